//! The stand-in's loop: takes [`Input`]s from any source (the API watchers of
//! [`super::source`] in a pod, a channel in tests), applies them to the [`Provider`], logs each
//! applied change and each pause and resume, publishes the applied records to the DNS server,
//! and starts the server once the provider started (so the pod is ready only once it serves
//! what the cluster asks for).

use std::net::SocketAddr;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::provider::{Input, Outcome, Provider, Transition};
use super::server::{DnsServer, Published};
use super::zone::Zone;
use crate::error::{Error, Result};

/// Inputs queued between the sources and the loop.
pub const INPUT_QUEUE: usize = 256;

fn log(outcome: &Outcome, provider: &Provider) {
    match outcome.transition {
        Some(Transition::Started { paused: false }) => {
            tracing::info!(
                objects = provider.applied().len(),
                "external-dns stand-in started: applying DNSEndpoints"
            );
        }
        Some(Transition::Started { paused: true }) => {
            tracing::warn!(
                held = outcome.held,
                "external-dns stand-in started paused: it applies and serves nothing until resumed"
            );
        }
        Some(Transition::Paused) => {
            tracing::info!(
                held = outcome.held,
                "external-dns stand-in paused: DNSEndpoint changes are held, answers stay as last applied"
            );
        }
        Some(Transition::Resumed) => {
            tracing::info!(
                changes = outcome.applied.len(),
                "external-dns stand-in resumed: catching up with every DNSEndpoint"
            );
        }
        None => {}
    }
    for change in &outcome.applied {
        match &change.records {
            Some(records) => {
                let records: Vec<String> = records.iter().map(ToString::to_string).collect();
                tracing::info!(
                    dns_endpoint = %change.key,
                    records = %records.join("; "),
                    "applied DNSEndpoint"
                );
            }
            None => {
                tracing::info!(dns_endpoint = %change.key, "removed DNSEndpoint's records");
            }
        }
    }
    if outcome.transition.is_none() && outcome.held > 0 {
        tracing::info!(held = outcome.held, "paused: DNSEndpoint change held");
    }
}

/// Applies inputs until the sources end; signals `started` once the provider started.
/// Counts the inputs taken in `processed`.
async fn run_loop(
    mut inputs: mpsc::Receiver<Input>,
    published: Published,
    started: oneshot::Sender<()>,
    processed: watch::Sender<u64>,
) {
    let mut provider = Provider::new();
    let mut started = Some(started);
    while let Some(input) = inputs.recv().await {
        let outcome = provider.observe(input);
        log(&outcome, &provider);
        if !outcome.applied.is_empty() {
            published.publish(Zone::from_applied(provider.applied()));
        }
        if provider.started() {
            if let Some(started) = started.take() {
                let _ = started.send(());
            }
        }
        processed.send_modify(|count| *count += 1);
    }
    tracing::warn!("external-dns stand-in: its sources ended, it applies nothing more");
}

/// A running stand-in: the loop and, once started, the DNS server.
#[derive(Debug)]
pub struct Running {
    server: DnsServer,
    published: Published,
    applier: JoinHandle<()>,
    processed: watch::Receiver<u64>,
}

/// Starts the loop over `inputs`, waits until it knows the DNSEndpoints and the pause state,
/// then serves DNS on `listen`.
pub async fn start(listen: SocketAddr, inputs: mpsc::Receiver<Input>) -> Result<Running> {
    let published = Published::new();
    let (started_tx, started_rx) = oneshot::channel();
    let (processed_tx, processed) = watch::channel(0);
    let mut applier = tokio::spawn(run_loop(
        inputs,
        published.clone(),
        started_tx,
        processed_tx,
    ));
    if started_rx.await.is_err() {
        let reason = match (&mut applier).await {
            Ok(()) => "its inputs ended before it knew the DNSEndpoints and the pause state",
            Err(_) => "its loop stopped before it knew the DNSEndpoints and the pause state",
        };
        return Err(Error::Cluster {
            action: "start the external-dns stand-in".to_owned(),
            reason: reason.to_owned(),
        });
    }
    let server = match DnsServer::serve(listen, published.clone()).await {
        Ok(server) => server,
        Err(error) => {
            applier.abort();
            return Err(error);
        }
    };
    Ok(Running {
        server,
        published,
        applier,
        processed,
    })
}

impl Running {
    /// The DNS address served (UDP and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The zone served now.
    pub fn zone(&self) -> Zone {
        self.published.zone()
    }

    /// Waits until the loop has taken `count` inputs in all (or stopped).
    pub async fn processed(&mut self, count: u64) {
        let _ = self.processed.wait_for(|taken| *taken >= count).await;
    }

    /// Serves until the DNS server fails or `stop` completes; then stops both.
    pub async fn serve_until(mut self, stop: impl std::future::Future<Output = ()>) -> Result<()> {
        let outcome = tokio::select! {
            served = self.server.wait() => served.and_then(|()| Err(Error::Cluster {
                action: format!("serve dns on {}", self.server.addr()),
                reason: "the server stopped on its own".to_owned(),
            })),
            () = stop => Ok(()),
        };
        self.shutdown().await;
        outcome
    }

    /// Stops the DNS server and the loop.
    pub async fn shutdown(self) {
        self.applier.abort();
        self.server.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    use hickory_resolver::config::{
        ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts,
    };
    use hickory_resolver::net::runtime::TokioRuntimeProvider;
    use hickory_resolver::proto::rr::{RData, RecordType};
    use hickory_resolver::Resolver;

    use super::*;
    use crate::dns_standin::records::{ARecord, ObjectKey};

    const NAME: &str = "playground-db.example.local.";

    /// A resolver asking only `addr`, over UDP or TCP only, without a cache (a stale answer
    /// must come from the stand-in, never from the resolver).
    fn resolver(addr: SocketAddr, tcp: bool) -> Resolver<TokioRuntimeProvider> {
        let mut connection = if tcp {
            ConnectionConfig::tcp()
        } else {
            ConnectionConfig::udp()
        };
        connection.port = addr.port();
        let server = NameServerConfig::new(addr.ip(), true, vec![connection]);
        let config = ResolverConfig::from_parts(None, vec![], vec![server]);
        let mut opts = ResolverOpts::default();
        opts.cache_size = 0;
        opts.attempts = 1;
        Resolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(opts)
            .build()
            .expect("resolver")
    }

    /// The A answers and their TTLs, `Err("NXDOMAIN")`, or `Ok` empty for NOERROR without
    /// records.
    async fn ask(
        resolver: &Resolver<TokioRuntimeProvider>,
        name: &str,
        record_type: RecordType,
    ) -> Result<Vec<(Ipv4Addr, u32)>, String> {
        match resolver.lookup(name, record_type).await {
            Ok(lookup) => {
                let mut answers: Vec<(Ipv4Addr, u32)> = lookup
                    .answers()
                    .iter()
                    .filter_map(|record| match &record.data {
                        RData::A(a) => Some((a.0, record.ttl)),
                        _ => None,
                    })
                    .collect();
                answers.sort();
                Ok(answers)
            }
            Err(err) if err.is_nx_domain() => Err("NXDOMAIN".into()),
            Err(err) if err.is_no_records_found() => Ok(Vec::new()),
            Err(err) => Err(err.to_string()),
        }
    }

    fn db(targets: &[[u8; 4]]) -> Vec<ARecord> {
        vec![ARecord {
            name: NAME.trim_end_matches('.').to_owned(),
            targets: targets.iter().map(|t| Ipv4Addr::from(*t)).collect(),
            ttl_seconds: 10,
        }]
    }

    fn key() -> ObjectKey {
        ObjectKey::new("bloodraven-playground", "bloodraven-playground")
    }

    // docs/design/harness.md#the-portable-path and docs/scenarios.md `stop-external-dns`: the
    // stand-in serves the DNSEndpoints' A records over UDP and TCP with recordTTL as the TTL;
    // paused, it applies no change and keeps answering what it last applied (stale); resumed,
    // it catches up at once; a deleted record is NXDOMAIN.
    #[tokio::test]
    async fn it_serves_dns_endpoints_over_udp_and_tcp_and_goes_stale_while_paused() {
        let (inputs, receiver) = mpsc::channel(INPUT_QUEUE);
        let mut sent = 0;
        for input in [
            Input::AllEndpoints(BTreeMap::from([(key(), db(&[[10, 96, 100, 20]]))])),
            Input::Paused(false),
        ] {
            inputs.send(input).await.expect("send");
            sent += 1;
        }
        let mut running = start("127.0.0.1:0".parse().expect("addr"), receiver)
            .await
            .expect("start");
        running.processed(sent).await;
        let udp = resolver(running.addr(), false);
        let tcp = resolver(running.addr(), true);
        let first = vec![(Ipv4Addr::new(10, 96, 100, 20), 10)];
        assert_eq!(ask(&udp, NAME, RecordType::A).await, Ok(first.clone()));
        assert_eq!(ask(&tcp, NAME, RecordType::A).await, Ok(first.clone()));
        assert_eq!(ask(&udp, NAME, RecordType::AAAA).await, Ok(Vec::new()));
        assert_eq!(
            ask(&udp, "other.example.local.", RecordType::A).await,
            Err("NXDOMAIN".to_owned())
        );

        // Stop external-dns, then fail over: the DNSEndpoint changes, the answer does not.
        for input in [
            Input::Paused(true),
            Input::Endpoint(key(), db(&[[10, 96, 100, 21], [10, 96, 100, 22]])),
        ] {
            inputs.send(input).await.expect("send");
            sent += 1;
        }
        running.processed(sent).await;
        assert_eq!(ask(&udp, NAME, RecordType::A).await, Ok(first.clone()));
        assert_eq!(ask(&tcp, NAME, RecordType::A).await, Ok(first));

        inputs.send(Input::Paused(false)).await.expect("send");
        sent += 1;
        running.processed(sent).await;
        let second = vec![
            (Ipv4Addr::new(10, 96, 100, 21), 10),
            (Ipv4Addr::new(10, 96, 100, 22), 10),
        ];
        assert_eq!(ask(&udp, NAME, RecordType::A).await, Ok(second.clone()));
        assert_eq!(ask(&tcp, NAME, RecordType::A).await, Ok(second));

        inputs
            .send(Input::EndpointDeleted(key()))
            .await
            .expect("send");
        sent += 1;
        running.processed(sent).await;
        assert_eq!(
            ask(&udp, NAME, RecordType::A).await,
            Err("NXDOMAIN".to_owned())
        );
        assert!(running.zone().is_empty());
        running.shutdown().await;
    }

    // docs/design/harness.md#the-portable-path: the stand-in does not serve (so its pod is not
    // ready) before it knows the DNSEndpoints and the pause state; inputs that end before that
    // are an error saying so.
    #[tokio::test]
    async fn it_does_not_start_without_the_endpoints_and_the_pause_state() {
        let (inputs, receiver) = mpsc::channel(INPUT_QUEUE);
        inputs.send(Input::Paused(false)).await.expect("send");
        drop(inputs);
        let error = start("127.0.0.1:0".parse().expect("addr"), receiver)
            .await
            .expect_err("no DNSEndpoint list");
        assert_eq!(
            error.to_string(),
            "start the external-dns stand-in: its inputs ended before it knew the DNSEndpoints and the pause state"
        );
    }
}
