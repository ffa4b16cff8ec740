//! Peer discovery by DNS, with the semantics of `tellus-bootstrap-dns`
//! (docs/design/requirements.md R004.1-R004.4, R004.13):
//!
//! - A site's sidecar is found from SRV records, which carry address and port (the named
//!   `sidecar` port of the site's internal Service), or from A records paired with a
//!   configured port.
//! - SRV targets are resolved concurrently and independently: a failing target is skipped
//!   while any other target resolves.
//! - A view resolving no address at all is an error, retried on the next lease round.
//! - No response cache: every round queries DNS, so a pod that moved is seen at once.

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use hickory_resolver::{
    config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts},
    net::runtime::TokioRuntimeProvider,
    proto::rr::RData,
    TokioResolver,
};
use tokio::task::JoinSet;

use crate::error::{Error, Result};

/// How long one DNS query may take before it counts as failed.
const DNS_TIMEOUT: Duration = Duration::from_secs(1);

/// What to resolve for each site; `{site}` and `{group}` in the name are substituted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerQuery {
    /// SRV records, e.g. `_sidecar._tcp.mysql-{group}-{site}.<namespace>.svc.cluster.local`.
    Srv {
        /// The SRV name template.
        name: String,
    },
    /// A records of the site's Service, paired with `port`.
    Host {
        /// The host name template.
        name: String,
        /// The sidecar port.
        port: u16,
    },
}

impl PeerQuery {
    /// The name template with `group` and `site` substituted.
    pub fn name_for(&self, group: &str, site: &str) -> String {
        let template = match self {
            PeerQuery::Srv { name } | PeerQuery::Host { name, .. } => name,
        };
        template.replace("{group}", group).replace("{site}", site)
    }
}

/// Resolves peer sites to sidecar addresses.
#[derive(Clone)]
pub struct Discovery {
    resolver: TokioResolver,
    query: PeerQuery,
    group: String,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("query", &self.query)
            .field("group", &self.group)
            .finish()
    }
}

impl Discovery {
    /// A discovery for `group` using `dns_server`, or the system's resolv.conf when `None`.
    /// The resolver keeps no response cache.
    pub fn new(query: PeerQuery, group: &str, dns_server: Option<SocketAddr>) -> Result<Self> {
        let mut builder = match dns_server {
            Some(server) => {
                let mut udp = ConnectionConfig::udp();
                udp.port = server.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = server.port();
                let name_server = NameServerConfig::new(server.ip(), true, vec![udp, tcp]);
                TokioResolver::builder_with_config(
                    ResolverConfig::from_parts(None, Vec::new(), vec![name_server]),
                    TokioRuntimeProvider::default(),
                )
            }
            None => TokioResolver::builder_tokio().map_err(|e| Error::Resolver(e.to_string()))?,
        };
        let options: &mut ResolverOpts = builder.options_mut();
        options.cache_size = 0;
        options.timeout = DNS_TIMEOUT;
        options.attempts = 1;
        let resolver = builder
            .build()
            .map_err(|e| Error::Resolver(e.to_string()))?;
        Ok(Self {
            resolver,
            query,
            group: group.to_owned(),
        })
    }

    /// Resolves `site`'s sidecar addresses. An empty view is [`Error::EmptyView`].
    pub async fn resolve_site(&self, site: &str) -> Result<Vec<SocketAddr>> {
        let name = self.query.name_for(&self.group, site);
        // No response cache (docs/design/requirements.md R004.3): whatever a previous round saw
        // is forgotten.
        self.resolver.clear_cache();
        let addresses = match &self.query {
            PeerQuery::Srv { .. } => self.resolve_srv(&name).await?,
            PeerQuery::Host { port, .. } => self
                .resolve_a(&name)
                .await?
                .into_iter()
                .map(|ip| SocketAddr::new(ip, *port))
                .collect(),
        };
        if addresses.is_empty() {
            return Err(Error::EmptyView {
                site: site.to_owned(),
                name,
            });
        }
        Ok(addresses)
    }

    async fn resolve_a(&self, name: &str) -> Result<Vec<IpAddr>> {
        resolve_a(&self.resolver, name).await
    }

    async fn resolve_srv(&self, name: &str) -> Result<Vec<SocketAddr>> {
        let lookup = self
            .resolver
            .srv_lookup(name)
            .await
            .map_err(|e| Error::Resolve {
                name: name.to_owned(),
                reason: e.to_string(),
            })?;
        let mut targets = JoinSet::new();
        for record in lookup.answers() {
            if let RData::SRV(srv) = &record.data {
                let resolver = self.resolver.clone();
                let target = srv.target.to_utf8();
                let port = srv.port;
                targets.spawn(async move {
                    let result = resolve_a(&resolver, &target).await;
                    (target, port, result)
                });
            }
        }
        let mut addresses = Vec::new();
        while let Some(joined) = targets.join_next().await {
            match joined {
                Ok((_, port, Ok(ips))) => {
                    addresses.extend(ips.into_iter().map(|ip| SocketAddr::new(ip, port)));
                }
                // A failing target is skipped while others resolve.
                Ok((target, _, Err(error))) => {
                    tracing::debug!(%target, %error, "srv target did not resolve; skipped");
                }
                Err(error) => tracing::debug!(%error, "srv target task failed; skipped"),
            }
        }
        addresses.sort();
        addresses.dedup();
        Ok(addresses)
    }
}

async fn resolve_a(resolver: &TokioResolver, name: &str) -> Result<Vec<IpAddr>> {
    let lookup = resolver
        .ipv4_lookup(name)
        .await
        .map_err(|e| Error::Resolve {
            name: name.to_owned(),
            reason: e.to_string(),
        })?;
    Ok(lookup
        .answers()
        .iter()
        .filter_map(|record| match &record.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect())
}
