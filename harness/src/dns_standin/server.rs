//! The DNS server (hickory-server, UDP and TCP on one address) answering from the published
//! [`Zone`]; it reads the zone only, the stand-in's loop ([`super::standin`]) replaces it.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_proto::op::{Metadata, OpCode, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record};
use hickory_server::net::runtime::Time;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::{MessageResponse, MessageResponseBuilder};
use hickory_server::Server;

use super::zone::{Answer, Zone};
use crate::error::{Error, Result};

/// How long an idle TCP connection stays open.
const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Responses buffered per TCP connection.
const TCP_RESPONSE_BUFFER: usize = 64;
/// How often an ephemeral port is tried when its TCP twin is taken.
const BIND_ATTEMPTS_MAX: usize = 16;

/// The zone the server answers from, replaced as a whole by the stand-in's loop.
#[derive(Debug, Clone, Default)]
pub struct Published {
    zone: Arc<RwLock<Zone>>,
}

impl Published {
    /// An empty zone.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `zone` from now on.
    pub fn publish(&self, zone: Zone) {
        *self
            .zone
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = zone;
    }

    /// A copy of the zone served now.
    pub fn zone(&self) -> Zone {
        self.zone
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn answer(&self, request: &Request) -> (ResponseCode, Vec<Record>) {
        if request.metadata.op_code != OpCode::Query {
            return (ResponseCode::NotImp, Vec::new());
        }
        let [query] = request.queries.queries() else {
            return (ResponseCode::FormErr, Vec::new());
        };
        let owner = query.original().name().clone();
        let answer = self
            .zone
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .answer(&owner.to_ascii(), query.query_type(), query.query_class());
        match answer {
            Answer::Records {
                addresses,
                ttl_seconds,
            } => (
                ResponseCode::NoError,
                addresses
                    .into_iter()
                    .map(|address| {
                        Record::from_rdata(owner.clone(), ttl_seconds, RData::A(A(address)))
                    })
                    .collect(),
            ),
            Answer::NoSuchName => (ResponseCode::NXDomain, Vec::new()),
            Answer::Refused => (ResponseCode::Refused, Vec::new()),
        }
    }
}

/// The hickory request handler over [`Published`].
#[derive(Debug, Clone)]
struct StandInHandler {
    published: Published,
}

#[async_trait::async_trait]
impl RequestHandler for StandInHandler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let (response_code, records) = self.published.answer(request);
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = response_code != ResponseCode::Refused;
        metadata.recursion_available = false;
        metadata.response_code = response_code;
        let builder = MessageResponseBuilder::from_message_request(request);
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

async fn send<'a, R: ResponseHandler>(
    handle: &mut R,
    response: MessageResponse<
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
            tracing::warn!(error = %err, src = %request.src(), "could not send a dns response");
            let mut metadata = Metadata::response_from_request(&request.metadata);
            metadata.response_code = ResponseCode::ServFail;
            ResponseInfo::from(hickory_proto::op::Header {
                metadata,
                counts: Default::default(),
            })
        }
    }
}

fn bind_error(addr: SocketAddr, protocol: &str, source: std::io::Error) -> Error {
    Error::Cluster {
        action: format!("listen for dns on {addr} ({protocol})"),
        reason: source.to_string(),
    }
}

/// Binds UDP and TCP on the same address; with port 0, retries until a port is free for both.
async fn bind_udp_and_tcp(
    addr: SocketAddr,
) -> Result<(tokio::net::UdpSocket, tokio::net::TcpListener, SocketAddr)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let udp = tokio::net::UdpSocket::bind(addr)
            .await
            .map_err(|source| bind_error(addr, "udp", source))?;
        let bound = udp
            .local_addr()
            .map_err(|source| bind_error(addr, "udp", source))?;
        match tokio::net::TcpListener::bind(bound).await {
            Ok(tcp) => return Ok((udp, tcp, bound)),
            Err(source)
                if addr.port() == 0
                    && attempt < BIND_ATTEMPTS_MAX
                    && source.kind() == std::io::ErrorKind::AddrInUse =>
            {
                continue;
            }
            Err(source) => return Err(bind_error(bound, "tcp", source)),
        }
    }
}

/// A running DNS server.
pub struct DnsServer {
    addr: SocketAddr,
    server: Server<StandInHandler>,
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl DnsServer {
    /// Serves `published` on `addr`, UDP and TCP (port 0 picks a free port, see
    /// [`DnsServer::addr`]).
    pub async fn serve(addr: SocketAddr, published: Published) -> Result<Self> {
        let (udp, tcp, bound) = bind_udp_and_tcp(addr).await?;
        let mut server = Server::new(StandInHandler { published });
        server.register_socket(udp);
        server.register_listener(tcp, TCP_IDLE_TIMEOUT, TCP_RESPONSE_BUFFER);
        tracing::info!(addr = %bound, "dns stand-in serving (udp and tcp)");
        Ok(Self {
            addr: bound,
            server,
        })
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until the server stops (it stops on its own only when its sockets fail).
    pub async fn wait(&mut self) -> Result<()> {
        self.server
            .block_until_done()
            .await
            .map_err(|source| Error::Cluster {
                action: format!("serve dns on {}", self.addr),
                reason: source.to_string(),
            })
    }

    /// Stops serving.
    pub async fn shutdown(mut self) {
        if let Err(err) = self.server.shutdown_gracefully().await {
            tracing::warn!(error = %err, addr = %self.addr, "dns stand-in shutdown");
        }
    }
}
