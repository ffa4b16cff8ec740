//! The operator process: flags, wiring, and the tasks it runs until SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bloodraven_api::names;
use kube::runtime::events::Reporter;
use kube::Client;
use tokio::sync::watch;

use crate::deploy_api::backend::KubeBackend;
use crate::deploy_api::handlers::{random_token, router as deploy_router, DeployApi};
use crate::deploy_api::review::KubeTokenReviewer;
use crate::deploy_api::store::LeaseStore;
use crate::error::{Error, Result};
use crate::hold_gate::HoldGates;
use crate::leader::{run_election, ElectionTimings, LeaderFlag};
use crate::memory::MemoryBoard;
use crate::metrics::Metrics;
use crate::poll::{wall_clock, Shell};
use crate::sidecar::{SidecarAddressing, SidecarClient, DEFAULT_URL_TEMPLATE};

/// Flags of the `bloodraven` binary.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "bloodraven",
    about = "Bloodraven operator: multi-site MySQL failover groups"
)]
pub struct OperatorArgs {
    /// Plain HTTP listener: /metrics, /healthz, /readyz (never /deploy/v1).
    #[arg(long, default_value = "0.0.0.0:8082")]
    pub http_address: SocketAddr,
    /// TLS listener for /deploy/v1.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub tls_address: SocketAddr,
    /// PEM certificate chain of the TLS listener (the escrowTLS Secret's tls.crt).
    #[arg(long)]
    pub tls_cert: Option<String>,
    /// PEM private key of the TLS listener (the escrowTLS Secret's tls.key).
    #[arg(long)]
    pub tls_key: Option<String>,
    /// Serve the deploy lease API on the TLS listener.
    #[arg(long)]
    pub deploy_api: bool,
    /// Elect a leader with the Lease `bloodraven-leader`; `false` makes this replica lead
    /// unconditionally (only with one replica).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Namespace of the operator (holds the leader Lease).
    #[arg(long, env = "POD_NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub namespace: String,
    /// The pod name; the leader-election identity is it plus a per-process nonce
    /// (`bloodraven_api::names::leader_identity`).
    #[arg(long, env = "POD_NAME", default_value = "bloodraven-local")]
    pub identity: String,
    /// Sidecar base URL template with `{group}`, `{site}`, `{namespace}`.
    #[arg(long, env = "BLOODRAVEN_SIDECAR_URL_TEMPLATE", default_value = DEFAULT_URL_TEMPLATE)]
    pub sidecar_url_template: String,
    /// Leader lease duration in seconds.
    #[arg(long, default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// Seconds after which a leader that could not renew steps down.
    #[arg(long, default_value_t = 10)]
    pub renew_deadline_seconds: u64,
    /// Seconds between election attempts.
    #[arg(long, default_value_t = 2)]
    pub retry_period_seconds: u64,
}

/// Installs the JSON tracing subscriber (`RUST_LOG`, default `info`): one JSON object per
/// line with `msg` and the event's fields at the top level ([`crate::logging`]).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = crate::logging::json_lines()
        .with_env_filter(filter)
        .try_init();
}

/// The kube client of the inferred config (in-cluster, else the kubeconfig), every request it
/// sends counted in `bloodraven_kube_requests_total{method}`.
async fn counted_client(metrics: &Metrics) -> Result<Client> {
    let config = kube::Config::infer()
        .await
        .map_err(|error| Error::ClientConfig(error.to_string()))?;
    let counter = metrics.clone();
    let layer = tower::util::MapRequestLayer::new(
        move |request: axum::http::Request<kube::client::Body>| {
            counter.count_kube_request(request.method().as_str());
            request
        },
    );
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(|error| Error::ClientConfig(error.to_string()))?
        .with_layer(&layer)
        .build();
    Ok(client)
}

/// Runs the operator until SIGTERM or SIGINT.
pub async fn run(args: OperatorArgs) -> Result<()> {
    // One crypto provider for every TLS user in the process (kube, reqwest, the listener).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let metrics = Metrics::new();
    let client = counted_client(&metrics).await?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::server_config_from_files(cert, key)?),
        (None, None) => None,
        _ => return Err(Error::Tls("--tls-cert and --tls-key go together".into())),
    };
    if args.deploy_api && tls.is_none() {
        return Err(Error::Tls(
            "--deploy-api needs --tls-cert and --tls-key: /deploy/v1 is served only over tls"
                .into(),
        ));
    }
    let (shutdown_sender, shutdown) = watch::channel(false);
    let leader = LeaderFlag::new(!args.leader_election);
    let lock = HoldGates::new_lock();
    let store = LeaseStore::with_lock(client.clone(), lock.clone());
    let reporter = Reporter {
        controller: "bloodraven".into(),
        instance: Some(args.identity.clone()),
    };
    let shell = Shell {
        client: client.clone(),
        sidecars: SidecarClient::new(SidecarAddressing::new(args.sidecar_url_template.clone()))?,
        store: store.clone(),
        recorder: Shell::recorder(&client, reporter.clone()),
        metrics: metrics.clone(),
        leader: leader.clone(),
        board: MemoryBoard::new(),
        databases: Default::default(),
        undecodable: Default::default(),
    };
    let ready = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();

    if args.leader_election {
        let timings = ElectionTimings {
            lease_duration: Duration::from_secs(args.lease_duration_seconds),
            renew_deadline: Duration::from_secs(args.renew_deadline_seconds),
            retry_period: Duration::from_secs(args.retry_period_seconds),
        };
        // A new candidate per process: a restarted container must not re-take at once the
        // lease its previous process held (docs/design/history.md#issue-10-case-5; scenario 014).
        let identity = names::leader_identity(&args.identity, rand::random());
        tracing::info!(pod = %args.identity, %identity, "leader election identity");
        let (client, namespace, identity, flag, receiver) = (
            client.clone(),
            args.namespace.clone(),
            identity,
            leader.clone(),
            shutdown.clone(),
        );
        let gauge = metrics.is_leader.clone();
        let watched = leader.clone();
        tasks.spawn(async move {
            run_election(
                client,
                &namespace,
                names::LEADER_LEASE,
                &identity,
                timings,
                flag,
                receiver,
            )
            .await;
            Ok(())
        });
        let mut receiver = shutdown.clone();
        tasks.spawn(async move {
            loop {
                gauge.set(i64::from(watched.is_leader()));
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = receiver.changed() => return Ok(()),
                }
            }
        });
    } else {
        metrics.is_leader.set(1);
    }

    let probes = crate::http::Probes {
        metrics: metrics.clone(),
        ready: ready.clone(),
    };
    tasks.spawn(crate::http::serve(
        args.http_address,
        crate::http::router(probes),
        shutdown.clone(),
    ));

    if let Some(config) = tls {
        let router = if args.deploy_api {
            deploy_router(DeployApi {
                leader: leader.clone(),
                reviewer: Arc::new(KubeTokenReviewer::new(client.clone())),
                backend: Arc::new(
                    KubeBackend::new(client.clone(), store.clone(), reporter.clone())
                        .with_board(shell.board.clone()),
                ),
                lock: lock.clone(),
                clock: Arc::new(wall_clock),
                tokens: Arc::new(random_token),
                metrics: metrics.clone(),
            })
        } else {
            axum::Router::new()
        };
        tasks.spawn(crate::tls::serve(
            args.tls_address,
            config,
            router,
            shutdown.clone(),
        ));
    }

    let groups_shell = shell.clone();
    let receiver = shutdown.clone();
    tasks.spawn(async move { groups_shell.run_groups(receiver).await });
    ready.store(true, Ordering::SeqCst);
    tracing::info!(identity = %args.identity, leader_election = args.leader_election, deploy_api = args.deploy_api, "bloodraven operator started");

    let outcome = tokio::select! {
        _ = shutdown_signal() => Ok(()),
        Some(finished) = tasks.join_next() => match finished {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error),
            Err(join) => Err(Error::Serve { address: "task".into(), source: std::io::Error::other(join.to_string()) }),
        },
    };
    let _ = shutdown_sender.send(true);
    while tasks.join_next().await.is_some() {}
    outcome
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
