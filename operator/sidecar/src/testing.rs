//! An in-process DNS server on an ephemeral loopback port, for tests
//! (docs/design/requirements.md R004.4: discovery is tested against an in-process
//! hickory-server, never real DNS). Records can be changed while it runs; it is stopped when
//! dropped.

use std::{
    net::{Ipv4Addr, SocketAddr},
    str::FromStr,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};

use hickory_server::{
    proto::rr::{
        rdata::{A, SOA, SRV},
        LowerName, Name, RData, Record, RecordType, RrKey,
    },
    store::in_memory::InMemoryZoneHandler,
    zone_handler::{AxfrPolicy, Catalog, ZoneHandler, ZoneType},
    Server,
};

use crate::error::{Error, Result};

/// Record TTL served (short: tests change records and the resolver keeps no cache anyway).
const TTL_SECONDS: u32 = 1;
/// How many times a UDP+TCP port pair is tried.
const BIND_ATTEMPTS_MAX: usize = 20;

/// A DNS server authoritative for one zone, on `127.0.0.1:<ephemeral>` (UDP and TCP).
pub struct TestDns {
    address: SocketAddr,
    zone: Arc<InMemoryZoneHandler>,
    serial: AtomicU32,
    _server: Server<Catalog>,
}

impl std::fmt::Debug for TestDns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDns")
            .field("address", &self.address)
            .finish()
    }
}

fn name(text: &str) -> Result<Name> {
    Name::from_str(text).map_err(|e| Error::Resolve {
        name: text.to_owned(),
        reason: e.to_string(),
    })
}

fn dns_error(what: &str, error: impl std::fmt::Display) -> Error {
    Error::Resolver(format!("{what}: {error}"))
}

impl TestDns {
    /// Starts a server authoritative for `origin` (e.g. `test.`).
    pub async fn start(origin: &str) -> Result<Self> {
        let origin_name = name(origin)?;
        let mut zone: InMemoryZoneHandler =
            InMemoryZoneHandler::empty(origin_name.clone(), ZoneType::Primary, AxfrPolicy::Deny);
        let soa = SOA::new(
            name(&format!("ns.{origin}"))?,
            name(&format!("admin.{origin}"))?,
            1,
            60,
            60,
            60,
            TTL_SECONDS,
        );
        zone.upsert_mut(
            Record::from_rdata(origin_name.clone(), TTL_SECONDS, RData::SOA(soa)),
            1,
        );
        let zone = Arc::new(zone);
        let mut catalog = Catalog::new();
        let handler: Arc<dyn ZoneHandler> = zone.clone();
        catalog.upsert(LowerName::new(&origin_name), vec![handler]);
        let mut server = Server::new(catalog);
        let mut bound = None;
        for _ in 0..BIND_ATTEMPTS_MAX {
            let udp = tokio::net::UdpSocket::bind("127.0.0.1:0")
                .await
                .map_err(|e| dns_error("bind dns udp", e))?;
            let address = udp
                .local_addr()
                .map_err(|e| dns_error("read dns address", e))?;
            if let Ok(tcp) = tokio::net::TcpListener::bind(address).await {
                bound = Some((udp, tcp, address));
                break;
            }
        }
        let Some((udp, tcp, address)) = bound else {
            return Err(dns_error("bind dns", "no port free for both udp and tcp"));
        };
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5), 64);
        Ok(Self {
            address,
            zone,
            serial: AtomicU32::new(2),
            _server: server,
        })
    }

    /// The server's address (UDP and TCP).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    async fn replace(&self, owner: &str, record_type: RecordType, data: Vec<RData>) -> Result<()> {
        let owner = name(owner)?;
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        self.zone
            .records_mut()
            .await
            .remove(&RrKey::new(LowerName::new(&owner), record_type));
        for rdata in data {
            self.zone
                .upsert(
                    Record::from_rdata(owner.clone(), TTL_SECONDS, rdata),
                    serial,
                )
                .await;
        }
        Ok(())
    }

    /// Sets the A records of `owner` (a fully qualified name) to `ips`; empty removes them.
    pub async fn set_a(&self, owner: &str, ips: &[Ipv4Addr]) -> Result<()> {
        let data = ips.iter().map(|ip| RData::A(A(*ip))).collect();
        self.replace(owner, RecordType::A, data).await
    }

    /// Sets the SRV records of `owner` to `(target, port)` pairs; empty removes them.
    pub async fn set_srv(&self, owner: &str, targets: &[(&str, u16)]) -> Result<()> {
        let mut data = Vec::new();
        for (target, port) in targets {
            data.push(RData::SRV(SRV::new(0, 0, *port, name(target)?)));
        }
        self.replace(owner, RecordType::SRV, data).await
    }
}
