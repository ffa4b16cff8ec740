//! Resolving the database host without a response cache, so a DNS change is seen at the
//! next poll (the `reconnect` policy acts on it).

use std::net::{IpAddr, SocketAddr};

use hickory_resolver::{
    config::{ConnectionConfig, NameServerConfig, ResolverConfig},
    net::runtime::TokioRuntimeProvider,
    proto::rr::RData,
    TokioResolver,
};

use crate::error::{Error, Result};

/// Resolves one host name to IPv4 addresses.
#[derive(Clone)]
pub(crate) struct HostResolver {
    resolver: TokioResolver,
}

impl HostResolver {
    /// Uses `dns_server`, or the system's resolv.conf when `None`.
    pub(crate) fn new(dns_server: Option<SocketAddr>) -> Result<Self> {
        let mut builder = match dns_server {
            Some(server) => {
                let mut udp = ConnectionConfig::udp();
                udp.port = server.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = server.port();
                TokioResolver::builder_with_config(
                    ResolverConfig::from_parts(
                        None,
                        Vec::new(),
                        vec![NameServerConfig::new(server.ip(), true, vec![udp, tcp])],
                    ),
                    TokioRuntimeProvider::default(),
                )
            }
            None => TokioResolver::builder_tokio().map_err(|e| Error::Resolve {
                host: "<system resolver>".to_owned(),
                reason: e.to_string(),
            })?,
        };
        builder.options_mut().cache_size = 0;
        let resolver = builder.build().map_err(|e| Error::Resolve {
            host: "<resolver>".to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Self { resolver })
    }

    /// The addresses of `host` (an IP literal resolves to itself), sorted.
    pub(crate) async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        self.resolver.clear_cache();
        let lookup = self
            .resolver
            .ipv4_lookup(host)
            .await
            .map_err(|e| Error::Resolve {
                host: host.to_owned(),
                reason: e.to_string(),
            })?;
        let mut ips: Vec<IpAddr> = lookup
            .answers()
            .iter()
            .filter_map(|record| match &record.data {
                RData::A(a) => Some(IpAddr::V4(a.0)),
                _ => None,
            })
            .collect();
        ips.sort();
        if ips.is_empty() {
            return Err(Error::Resolve {
                host: host.to_owned(),
                reason: "no address".to_owned(),
            });
        }
        Ok(ips)
    }
}
