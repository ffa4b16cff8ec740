//! The cluster DNS (hickory-server), answering from a snapshot the caller updates.
//!
//! Names (cluster domain `cluster.local`, IPv4 only, TTL [`TTL_SECONDS`] as CoreDNS):
//! - `<svc>.<ns>.svc.cluster.local` A: the ClusterIP, or for a headless Service the
//!   addresses of its endpoints that are ready (all of them with `publishNotReadyAddresses`);
//! - `<hostname>.<svc>.<ns>.svc.cluster.local` A (pods with `hostname` and `subdomain`), and
//!   `<a-b-c-d>.<svc>.<ns>.svc.cluster.local` for endpoints without a hostname;
//! - `_<port>._<proto>.<svc>.<ns>.svc.cluster.local` SRV for named ports: one per endpoint
//!   with the endpoint's own port for headless Services (docs/design/requirements.md R004.8),
//!   one with the Service port for ClusterIP Services;
//! - `<a-b-c-d>.<ns>.pod.cluster.local` A;
//! - the names of DNSEndpoint records (A, CNAME, TXT) published by the external-dns
//!   stand-in, which can be stopped: while stopped, what it published stays as it was;
//! - AAAA (and any other type) for an existing name is an empty NOERROR; anything else
//!   is NXDOMAIN.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_proto::op::{Metadata, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_server::net::runtime::Time;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;

use super::error::{Error, Result};

/// TTL of every answer (CoreDNS' kubernetes plugin default).
pub const TTL_SECONDS: u32 = 5;
/// The cluster domain.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// How long an idle TCP DNS connection stays open.
const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A Service port (`spec.ports[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePortRecord {
    /// `name` (SRV records exist for named ports only).
    pub name: Option<String>,
    /// `protocol` (`TCP`, `UDP`).
    pub protocol: String,
    /// `port`.
    pub port: u16,
}

/// One endpoint of a Service (an EndpointSlice endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRecord {
    /// `addresses[0]`.
    pub ip: Ipv4Addr,
    /// `hostname` (the pod's `spec.hostname` when its `spec.subdomain` is the Service).
    pub hostname: Option<String>,
    /// `conditions.ready`.
    pub ready: bool,
    /// The endpoint's port per Service port name (a named targetPort resolves per pod).
    pub ports: BTreeMap<String, u16>,
}

/// What DNS needs of one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    /// `spec.clusterIP`; `None` for a headless Service (`clusterIP: None`).
    pub cluster_ip: Option<Ipv4Addr>,
    /// `spec.ports`.
    pub ports: Vec<ServicePortRecord>,
    /// `spec.publishNotReadyAddresses`.
    pub publish_not_ready_addresses: bool,
    /// The Service's endpoints.
    pub endpoints: Vec<EndpointRecord>,
}

/// One `DNSEndpoint` `spec.endpoints[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalRecord {
    /// `dnsName`.
    pub dns_name: String,
    /// `recordType` (`A`, `CNAME`, `TXT`; others are ignored).
    pub record_type: String,
    /// `targets`.
    pub targets: Vec<String>,
    /// `recordTTL` (default [`TTL_SECONDS`]).
    pub ttl: Option<u32>,
}

#[derive(Debug, Default)]
struct Snapshot {
    services: BTreeMap<(String, String), ServiceRecord>,
    external_desired: BTreeMap<(String, String), Vec<ExternalRecord>>,
    external_published: BTreeMap<(String, String), Vec<ExternalRecord>>,
    external_stopped: bool,
}

/// The records DNS answers from; the caller updates them (shared with the server).
#[derive(Debug, Default)]
pub struct DnsRecords {
    snapshot: RwLock<Snapshot>,
}

impl DnsRecords {
    /// No records.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Snapshot> {
        self.snapshot
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets (replaces) a Service with its endpoints.
    pub fn set_service(&self, namespace: &str, name: &str, record: ServiceRecord) {
        self.write().services.insert(
            (namespace.to_ascii_lowercase(), name.to_ascii_lowercase()),
            record,
        );
    }

    /// Removes a Service.
    pub fn remove_service(&self, namespace: &str, name: &str) {
        self.write()
            .services
            .remove(&(namespace.to_ascii_lowercase(), name.to_ascii_lowercase()));
    }

    /// Sets the desired records of one `DNSEndpoint` object; they are published while the
    /// external-dns stand-in runs.
    pub fn set_dns_endpoint(&self, namespace: &str, name: &str, records: Vec<ExternalRecord>) {
        let mut snapshot = self.write();
        let key = (namespace.to_string(), name.to_string());
        snapshot
            .external_desired
            .insert(key.clone(), records.clone());
        if !snapshot.external_stopped {
            snapshot.external_published.insert(key, records);
        }
    }

    /// Removes a `DNSEndpoint` object (published while the stand-in runs).
    pub fn remove_dns_endpoint(&self, namespace: &str, name: &str) {
        let mut snapshot = self.write();
        let key = (namespace.to_string(), name.to_string());
        snapshot.external_desired.remove(&key);
        if !snapshot.external_stopped {
            snapshot.external_published.remove(&key);
        }
    }

    /// Stops the external-dns stand-in: published answers freeze as they are.
    pub fn stop_external_dns(&self) {
        self.write().external_stopped = true;
    }

    /// Starts it again: it catches up with every DNSEndpoint at once.
    pub fn start_external_dns(&self) {
        let mut snapshot = self.write();
        snapshot.external_stopped = false;
        snapshot.external_published = snapshot.external_desired.clone();
    }

    /// Whether the external-dns stand-in runs.
    pub fn external_dns_running(&self) -> bool {
        !self.read().external_stopped
    }

    /// Answers one question.
    pub fn answer(&self, name: &str, record_type: RecordType) -> Answer {
        answer(&self.read(), name, record_type)
    }
}

/// The answer to one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The name does not exist.
    NxDomain,
    /// The name exists; these are its records of the asked type (maybe none).
    Records(Vec<Record>),
}

fn dashed(ip: Ipv4Addr) -> String {
    ip.to_string().replace('.', "-")
}

fn undashed(label: &str) -> Option<Ipv4Addr> {
    label.replace('-', ".").parse().ok()
}

fn name(text: &str) -> Option<Name> {
    Name::from_ascii(format!("{}.", text.trim_end_matches('.'))).ok()
}

fn a_record(owner: &Name, ip: Ipv4Addr, ttl: u32) -> Record {
    Record::from_rdata(owner.clone(), ttl, RData::A(A(ip)))
}

fn published(service: &ServiceRecord) -> impl Iterator<Item = &EndpointRecord> {
    service
        .endpoints
        .iter()
        .filter(|e| e.ready || service.publish_not_ready_addresses)
}

fn endpoint_label(endpoint: &EndpointRecord) -> String {
    endpoint
        .hostname
        .clone()
        .unwrap_or_else(|| dashed(endpoint.ip))
}

fn answer(snapshot: &Snapshot, query: &str, record_type: RecordType) -> Answer {
    let query = query.trim_end_matches('.').to_ascii_lowercase();
    let Some(owner) = name(&query) else {
        return Answer::NxDomain;
    };
    let want = |t: RecordType| record_type == t || record_type == RecordType::ANY;
    if let Some(rest) = query.strip_suffix(&format!(".svc.{CLUSTER_DOMAIN}")) {
        let labels: Vec<&str> = rest.split('.').collect();
        match labels.as_slice() {
            [service, namespace] => {
                let Some(svc) = snapshot
                    .services
                    .get(&(namespace.to_string(), service.to_string()))
                else {
                    return Answer::NxDomain;
                };
                if !want(RecordType::A) {
                    return Answer::Records(Vec::new());
                }
                let records = match svc.cluster_ip {
                    Some(ip) => vec![a_record(&owner, ip, TTL_SECONDS)],
                    None => published(svc)
                        .map(|e| a_record(&owner, e.ip, TTL_SECONDS))
                        .collect(),
                };
                return Answer::Records(records);
            }
            [port, protocol, service, namespace]
                if port.starts_with('_') && protocol.starts_with('_') =>
            {
                let Some(svc) = snapshot
                    .services
                    .get(&(namespace.to_string(), service.to_string()))
                else {
                    return Answer::NxDomain;
                };
                let (port_name, proto) = (&port[1..], &protocol[1..]);
                let Some(svc_port) = svc.ports.iter().find(|p| {
                    p.name
                        .as_deref()
                        .is_some_and(|n| n.eq_ignore_ascii_case(port_name))
                        && p.protocol.eq_ignore_ascii_case(proto)
                }) else {
                    return Answer::NxDomain;
                };
                if !want(RecordType::SRV) {
                    return Answer::Records(Vec::new());
                }
                let base = format!("{service}.{namespace}.svc.{CLUSTER_DOMAIN}");
                let records = match svc.cluster_ip {
                    Some(_) => name(&base)
                        .map(|target| {
                            vec![Record::from_rdata(
                                owner.clone(),
                                TTL_SECONDS,
                                RData::SRV(SRV::new(0, 100, svc_port.port, target)),
                            )]
                        })
                        .unwrap_or_default(),
                    None => {
                        let endpoints: Vec<&EndpointRecord> = published(svc).collect();
                        let weight = u16::try_from(100 / endpoints.len().max(1)).unwrap_or(100);
                        endpoints
                            .iter()
                            .filter_map(|e| {
                                let target = name(&format!("{}.{base}", endpoint_label(e)))?;
                                let port =
                                    port_name_lookup(&e.ports, port_name).unwrap_or(svc_port.port);
                                Some(Record::from_rdata(
                                    owner.clone(),
                                    TTL_SECONDS,
                                    RData::SRV(SRV::new(0, weight, port, target)),
                                ))
                            })
                            .collect()
                    }
                };
                return Answer::Records(records);
            }
            [endpoint, service, namespace] => {
                let Some(svc) = snapshot
                    .services
                    .get(&(namespace.to_string(), service.to_string()))
                else {
                    return Answer::NxDomain;
                };
                let matches: Vec<&EndpointRecord> = published(svc)
                    .filter(|e| endpoint_label(e).eq_ignore_ascii_case(endpoint))
                    .collect();
                if matches.is_empty() {
                    return Answer::NxDomain;
                }
                if !want(RecordType::A) {
                    return Answer::Records(Vec::new());
                }
                return Answer::Records(
                    matches
                        .iter()
                        .map(|e| a_record(&owner, e.ip, TTL_SECONDS))
                        .collect(),
                );
            }
            _ => return Answer::NxDomain,
        }
    }
    if let Some(rest) = query.strip_suffix(&format!(".pod.{CLUSTER_DOMAIN}")) {
        if let [ip_label, _namespace] = rest.split('.').collect::<Vec<_>>().as_slice() {
            if let Some(ip) = undashed(ip_label) {
                let records = if want(RecordType::A) {
                    vec![a_record(&owner, ip, TTL_SECONDS)]
                } else {
                    Vec::new()
                };
                return Answer::Records(records);
            }
        }
        return Answer::NxDomain;
    }
    let mut found = false;
    let mut records = Vec::new();
    for record in snapshot.external_published.values().flatten() {
        if !record
            .dns_name
            .trim_end_matches('.')
            .eq_ignore_ascii_case(&query)
        {
            continue;
        }
        found = true;
        let ttl = record.ttl.unwrap_or(TTL_SECONDS);
        for target in &record.targets {
            let rdata = match record.record_type.to_ascii_uppercase().as_str() {
                "A" if want(RecordType::A) => target.parse().ok().map(|ip| RData::A(A(ip))),
                "CNAME" if want(RecordType::CNAME) || want(RecordType::A) => {
                    name(target).map(|n| RData::CNAME(CNAME(n)))
                }
                "TXT" if want(RecordType::TXT) => Some(RData::TXT(TXT::new(vec![target.clone()]))),
                _ => None,
            };
            if let Some(rdata) = rdata {
                records.push(Record::from_rdata(owner.clone(), ttl, rdata));
            }
        }
    }
    if found {
        Answer::Records(records)
    } else {
        Answer::NxDomain
    }
}

fn port_name_lookup(ports: &BTreeMap<String, u16>, port_name: &str) -> Option<u16> {
    ports
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(port_name))
        .map(|(_, port)| *port)
}

/// The hickory request handler over [`DnsRecords`].
#[derive(Debug, Clone)]
pub struct ClusterDnsHandler {
    records: Arc<DnsRecords>,
}

#[async_trait::async_trait]
impl RequestHandler for ClusterDnsHandler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = true;
        metadata.recursion_available = false;
        let builder = MessageResponseBuilder::from_message_request(request);
        let Some(query) = request.queries.queries().first() else {
            metadata.response_code = ResponseCode::FormErr;
            return send(
                &mut response_handle,
                builder.build_no_records(metadata),
                request,
            )
            .await;
        };
        let asked = query.name().to_string();
        match self.records.answer(&asked, query.query_type()) {
            Answer::NxDomain => {
                metadata.response_code = ResponseCode::NXDomain;
                send(
                    &mut response_handle,
                    builder.build_no_records(metadata),
                    request,
                )
                .await
            }
            Answer::Records(records) => {
                let response = builder.build(
                    metadata,
                    records.iter(),
                    std::iter::empty(),
                    std::iter::empty(),
                    std::iter::empty(),
                );
                send(&mut response_handle, response, request).await
            }
        }
    }
}

async fn send<'a, R: ResponseHandler>(
    handle: &mut R,
    response: hickory_server::zone_handler::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
    request: &Request,
) -> ResponseInfo {
    match handle.send_response(response).await {
        Ok(info) => info,
        Err(err) => {
            tracing::warn!(error = %err, "could not send dns response");
            let mut metadata = Metadata::response_from_request(&request.metadata);
            metadata.response_code = ResponseCode::ServFail;
            ResponseInfo::from(hickory_proto::op::Header {
                metadata,
                counts: Default::default(),
            })
        }
    }
}

/// How often an ephemeral port is tried when its TCP twin is taken.
const BIND_ATTEMPTS_MAX: usize = 16;

/// Binds UDP and TCP on the same address; with port 0, retries until a port is free for both.
async fn bind_udp_and_tcp(
    addr: SocketAddr,
) -> Result<(tokio::net::UdpSocket, tokio::net::TcpListener, SocketAddr)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let udp = tokio::net::UdpSocket::bind(addr)
            .await
            .map_err(|source| Error::Dns { addr, source })?;
        let bound = udp
            .local_addr()
            .map_err(|source| Error::Dns { addr, source })?;
        match tokio::net::TcpListener::bind(bound).await {
            Ok(tcp) => return Ok((udp, tcp, bound)),
            Err(source)
                if addr.port() == 0
                    && attempt < BIND_ATTEMPTS_MAX
                    && source.kind() == std::io::ErrorKind::AddrInUse =>
            {
                continue;
            }
            Err(source) => {
                return Err(Error::Dns {
                    addr: bound,
                    source,
                })
            }
        }
    }
}

/// A running cluster DNS server (UDP and TCP on one address).
pub struct ClusterDns {
    addr: SocketAddr,
    server: Server<ClusterDnsHandler>,
}

impl std::fmt::Debug for ClusterDns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterDns")
            .field("addr", &self.addr)
            .finish()
    }
}

impl ClusterDns {
    /// Serves `records` on `addr` (UDP and TCP; port 0 picks one, see [`ClusterDns::addr`]).
    /// For pods, `addr` is the cluster DNS address (`ClusterNaming::dns_ip`) port 53.
    pub async fn serve(addr: SocketAddr, records: Arc<DnsRecords>) -> Result<Self> {
        let (udp, tcp, bound) = bind_udp_and_tcp(addr).await?;
        let mut server = Server::new(ClusterDnsHandler { records });
        server.register_socket(udp);
        server.register_listener(tcp, TCP_IDLE_TIMEOUT, 64);
        tracing::info!(addr = %bound, "cluster dns serving");
        Ok(Self {
            addr: bound,
            server,
        })
    }

    /// The address served (UDP and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving.
    pub async fn shutdown(mut self) {
        if let Err(err) = self.server.shutdown_gracefully().await {
            tracing::warn!(error = %err, "cluster dns shutdown");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headless() -> ServiceRecord {
        ServiceRecord {
            cluster_ip: None,
            ports: vec![ServicePortRecord {
                name: Some("tellus".into()),
                protocol: "UDP".into(),
                port: 7878,
            }],
            publish_not_ready_addresses: false,
            endpoints: vec![
                EndpointRecord {
                    ip: Ipv4Addr::new(10, 244, 0, 2),
                    hostname: Some("t-0".into()),
                    ready: true,
                    ports: [("tellus".to_string(), 7000)].into(),
                },
                EndpointRecord {
                    ip: Ipv4Addr::new(10, 244, 1, 2),
                    hostname: None,
                    ready: false,
                    ports: BTreeMap::new(),
                },
            ],
        }
    }

    fn ips(answer: Answer) -> Vec<String> {
        match answer {
            Answer::Records(records) => records.iter().map(|r| r.data.to_string()).collect(),
            Answer::NxDomain => vec!["NXDOMAIN".into()],
        }
    }

    // docs/design/requirements.md R004.9: a headless service publishes ready pods only unless
    // publishNotReadyAddresses.
    #[test]
    fn headless_publishes_ready_endpoints_only() {
        let records = DnsRecords::new();
        records.set_service("ns", "tellus", headless());
        assert_eq!(
            ips(records.answer("tellus.ns.svc.cluster.local.", RecordType::A)),
            vec!["10.244.0.2"]
        );
        let mut svc = headless();
        svc.publish_not_ready_addresses = true;
        records.set_service("ns", "tellus", svc);
        assert_eq!(
            ips(records.answer("tellus.ns.svc.cluster.local", RecordType::A)).len(),
            2
        );
        // docs/design/requirements.md R004.10: SingleStack IPv4: AAAA is empty, never a second
        // address.
        assert_eq!(
            ips(records.answer("tellus.ns.svc.cluster.local", RecordType::AAAA)),
            Vec::<String>::new()
        );
        // docs/design/requirements.md R004.8: the named port yields one SRV per pod with the
        // pod's own port.
        let srv = ips(records.answer("_tellus._udp.tellus.ns.svc.cluster.local", RecordType::SRV));
        assert_eq!(srv.len(), 2);
        assert!(
            srv.iter()
                .any(|s| s.contains("7000") && s.contains("t-0.tellus.ns.svc.cluster.local")),
            "{srv:?}"
        );
        assert!(
            srv.iter()
                .any(|s| s.contains("7878") && s.contains("10-244-1-2.tellus")),
            "{srv:?}"
        );
        assert_eq!(
            ips(records.answer("t-0.tellus.ns.svc.cluster.local", RecordType::A)),
            vec!["10.244.0.2"]
        );
        assert_eq!(
            ips(records.answer("missing.ns.svc.cluster.local", RecordType::A)),
            vec!["NXDOMAIN"]
        );
        assert_eq!(
            ips(records.answer("_other._udp.tellus.ns.svc.cluster.local", RecordType::SRV)),
            vec!["NXDOMAIN"]
        );
    }

    // docs/design/localkube.md#controllers: external-dns can be stopped; while stopped its
    // answers stay what they were.
    #[test]
    fn stopped_external_dns_freezes_answers() {
        let records = DnsRecords::new();
        let rec = |ip: &str| {
            vec![ExternalRecord {
                dns_name: "db.example.test".into(),
                record_type: "A".into(),
                targets: vec![ip.into()],
                ttl: None,
            }]
        };
        records.set_dns_endpoint("ns", "bloodraven-playground", rec("10.96.0.20"));
        records.stop_external_dns();
        records.set_dns_endpoint("ns", "bloodraven-playground", rec("10.96.0.30"));
        assert_eq!(
            ips(records.answer("db.example.test", RecordType::A)),
            vec!["10.96.0.20"]
        );
        records.start_external_dns();
        assert_eq!(
            ips(records.answer("db.example.test", RecordType::A)),
            vec!["10.96.0.30"]
        );
        assert_eq!(
            ips(records.answer("other.example.test", RecordType::A)),
            vec!["NXDOMAIN"]
        );
    }
}
