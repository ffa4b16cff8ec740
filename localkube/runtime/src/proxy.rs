//! The userspace Service proxy (kube-proxy's userspace mode).
//!
//! One listener per Service port on `ClusterIP:port` (a local address of the root
//! namespace). Each NEW connection goes to the next current endpoint (round robin); an
//! established connection keeps its endpoint whatever happens to the endpoint set later
//! (docs/design/requirements.md R000.20: moving a Service must not cut established connections;
//! fencing does that). During a partition, a connection whose client and chosen endpoint are on
//! opposite sides is refused (closed at once), and established connections across it stall (no
//! bytes move) until the partition heals, as a real network partition would.
//!
//! UDP Service ports are proxied the userspace way too: one socket on `ClusterIP:port`; the
//! first datagram of a client address opens a session to the next current endpoint (its
//! own socket, connected to that endpoint), later datagrams of that client go the same way
//! and the endpoint's replies go back from `ClusterIP:port`. A session ends after
//! [`UDP_SESSION_IDLE`] without traffic either way (kube-proxy's userspace `--udp-timeout`
//! default); the next datagram opens a new one. Across a partition datagrams are dropped.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::error::{Error, Result};
use super::partition::Partitions;

/// How long the proxy waits to connect to an endpoint before trying the next one.
pub const ENDPOINT_DIAL_TIMEOUT: Duration = Duration::from_secs(3);
/// Copy buffer per direction.
const BUFFER_BYTES: usize = 16 * 1024;
/// How long a UDP session lives without a datagram either way.
pub const UDP_SESSION_IDLE: Duration = Duration::from_millis(250);
/// UDP sessions of one Service port at once; datagrams of further clients are dropped.
const UDP_SESSIONS_MAX: usize = 1024;
/// Largest datagram relayed.
const DATAGRAM_BYTES_MAX: usize = 64 * 1024;

/// Identifies one Service port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServicePortKey {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.ports[].port`.
    pub port: u16,
}

impl std::fmt::Display for ServicePortKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.port)
    }
}

#[derive(Debug)]
struct Listener {
    addr: SocketAddr,
    endpoints: watch::Sender<Vec<SocketAddr>>,
    task: JoinHandle<()>,
}

/// Which network namespace a proxied connection from `client` to `endpoint` is dialled from:
/// the client pod's own, when both are pods of the cluster (`None`: the proxy's namespace).
pub type ClientNamespaces =
    Arc<dyn Fn(std::net::IpAddr, std::net::IpAddr) -> Option<std::path::PathBuf> + Send + Sync>;

/// The proxy of one cluster.
pub struct ServiceProxy {
    partitions: Option<Arc<Partitions>>,
    client_namespaces: Option<ClientNamespaces>,
    listeners: Mutex<HashMap<ServicePortKey, Listener>>,
    udp_listeners: Mutex<HashMap<ServicePortKey, Listener>>,
}

impl std::fmt::Debug for ServiceProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProxy")
            .field("partitions", &self.partitions)
            .field("client_namespaces", &self.client_namespaces.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        for listeners in [&mut self.listeners, &mut self.udp_listeners] {
            for listener in listeners
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .values()
            {
                listener.task.abort();
            }
        }
    }
}

/// A Service port already served on `listen` (or on its IP, when `listen` asks for any port)
/// keeps its listener and only takes the new endpoints: returns its address. Otherwise hands
/// the endpoints back for a new listener.
fn reuse_listener(
    listeners: &HashMap<ServicePortKey, Listener>,
    key: &ServicePortKey,
    listen: SocketAddr,
    endpoints: Vec<SocketAddr>,
) -> std::result::Result<SocketAddr, Vec<SocketAddr>> {
    match listeners.get(key) {
        Some(existing)
            if existing.addr == listen
                || listen.port() == 0 && existing.addr.ip() == listen.ip() =>
        {
            existing.endpoints.send_replace(endpoints);
            Ok(existing.addr)
        }
        Some(_) | None => Err(endpoints),
    }
}

impl ServiceProxy {
    /// A proxy without listeners; with `partitions`, it refuses cross-partition connections.
    pub fn new(partitions: Option<Arc<Partitions>>) -> Self {
        Self {
            partitions,
            client_namespaces: None,
            listeners: Mutex::new(HashMap::new()),
            udp_listeners: Mutex::new(HashMap::new()),
        }
    }

    /// Dials each proxied TCP connection from the client pod's network namespace, so the
    /// endpoint sees the client's pod IP as kube-proxy leaves it (DNAT, no SNAT), and packet
    /// filters in either pod's namespace (the in-cluster fault agent's partitions) act on
    /// Service traffic as they would on a real cluster.
    #[must_use]
    pub fn with_client_namespaces(mut self, lookup: ClientNamespaces) -> Self {
        self.client_namespaces = Some(lookup);
        self
    }

    fn lock_udp(&self) -> std::sync::MutexGuard<'_, HashMap<ServicePortKey, Listener>> {
        self.udp_listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Serves a UDP Service port on `listen` (as [`ServiceProxy::set_service_port`] for
    /// TCP): calling it again with the same address only replaces the endpoints (new
    /// sessions use them; current sessions keep theirs).
    pub async fn set_udp_service_port(
        &self,
        key: ServicePortKey,
        listen: SocketAddr,
        endpoints: Vec<SocketAddr>,
    ) -> Result<SocketAddr> {
        let endpoints = match reuse_listener(&self.lock_udp(), &key, listen, endpoints) {
            Ok(addr) => return Ok(addr),
            Err(endpoints) => endpoints,
        };
        self.remove_udp_service_port(&key);
        let bind_error = |source| Error::ProxyBind {
            service: format!("{key}/UDP"),
            addr: listen,
            source,
        };
        let socket = UdpSocket::bind(listen).await.map_err(bind_error)?;
        let addr = socket.local_addr().map_err(bind_error)?;
        let (tx, rx) = watch::channel(endpoints);
        let task = tokio::spawn(udp_loop(
            key.clone(),
            Arc::new(socket),
            rx,
            self.partitions.clone(),
        ));
        tracing::info!(service = %key, %addr, protocol = "UDP", "proxy listening");
        self.lock_udp().insert(
            key,
            Listener {
                addr,
                endpoints: tx,
                task,
            },
        );
        Ok(addr)
    }

    /// Stops serving a UDP Service port (its sessions go with it).
    pub fn remove_udp_service_port(&self, key: &ServicePortKey) {
        if let Some(listener) = self.lock_udp().remove(key) {
            listener.task.abort();
            tracing::info!(service = %key, protocol = "UDP", "proxy stopped listening");
        }
    }

    /// The address a UDP Service port is served on.
    pub fn udp_listen_addr(&self, key: &ServicePortKey) -> Option<SocketAddr> {
        self.lock_udp().get(key).map(|l| l.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ServicePortKey, Listener>> {
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Serves a Service port on `listen` with the given ready endpoints; returns the bound
    /// address (port 0 picks one). Calling it again with the same address only replaces the
    /// endpoints (new connections use them; established ones are left alone).
    pub async fn set_service_port(
        &self,
        key: ServicePortKey,
        listen: SocketAddr,
        endpoints: Vec<SocketAddr>,
    ) -> Result<SocketAddr> {
        let endpoints = match reuse_listener(&self.lock(), &key, listen, endpoints) {
            Ok(addr) => return Ok(addr),
            Err(endpoints) => endpoints,
        };
        self.remove_service_port(&key);
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| Error::ProxyBind {
                service: key.to_string(),
                addr: listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::ProxyBind {
            service: key.to_string(),
            addr: listen,
            source,
        })?;
        let (tx, rx) = watch::channel(endpoints);
        let task = tokio::spawn(accept_loop(
            key.clone(),
            listener,
            rx,
            self.partitions.clone(),
            self.client_namespaces.clone(),
        ));
        tracing::info!(service = %key, %addr, "proxy listening");
        self.lock().insert(
            key,
            Listener {
                addr,
                endpoints: tx,
                task,
            },
        );
        Ok(addr)
    }

    /// Replaces a Service port's endpoints.
    pub fn set_endpoints(&self, key: &ServicePortKey, endpoints: Vec<SocketAddr>) -> Result<()> {
        let listeners = self.lock();
        let listener = listeners
            .get(key)
            .ok_or_else(|| Error::Invalid(format!("service port {key}: it is not proxied")))?;
        listener.endpoints.send_replace(endpoints);
        Ok(())
    }

    /// Stops listening for a Service port (established connections are left alone).
    pub fn remove_service_port(&self, key: &ServicePortKey) {
        if let Some(listener) = self.lock().remove(key) {
            listener.task.abort();
            tracing::info!(service = %key, "proxy stopped listening");
        }
    }

    /// The address a Service port is served on.
    pub fn listen_addr(&self, key: &ServicePortKey) -> Option<SocketAddr> {
        self.lock().get(key).map(|l| l.addr)
    }
}

async fn accept_loop(
    key: ServicePortKey,
    listener: TcpListener,
    endpoints: watch::Receiver<Vec<SocketAddr>>,
    partitions: Option<Arc<Partitions>>,
    client_namespaces: Option<ClientNamespaces>,
) {
    let next = Arc::new(AtomicUsize::new(0));
    loop {
        let (client, client_addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(service = %key, error = %err, "proxy accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let current = endpoints.borrow().clone();
        let key = key.clone();
        let next = next.clone();
        let partitions = partitions.clone();
        let client_namespaces = client_namespaces.clone();
        tokio::spawn(async move {
            if let Err(reason) = proxy_connection(
                client,
                client_addr,
                &current,
                &next,
                partitions,
                client_namespaces,
            )
            .await
            {
                tracing::debug!(service = %key, client = %client_addr, reason, "proxy closed connection");
            }
        });
    }
}

async fn proxy_connection(
    client: TcpStream,
    client_addr: SocketAddr,
    endpoints: &[SocketAddr],
    next: &AtomicUsize,
    partitions: Option<Arc<Partitions>>,
    client_namespaces: Option<ClientNamespaces>,
) -> std::result::Result<(), &'static str> {
    if endpoints.is_empty() {
        return Err("no ready endpoints");
    }
    // As the userspace proxier: try endpoints in round-robin order until one accepts.
    for _ in 0..endpoints.len() {
        let endpoint = endpoints[next.fetch_add(1, Ordering::Relaxed) % endpoints.len()];
        if partitions
            .as_ref()
            .is_some_and(|p| p.blocks(client_addr.ip(), endpoint.ip()))
        {
            return Err("client and endpoint are partitioned");
        }
        let netns = client_namespaces
            .as_ref()
            .and_then(|lookup| lookup(client_addr.ip(), endpoint.ip()));
        let upstream = match netns {
            Some(netns) => dial_from_namespace(netns, endpoint).await.ok(),
            None => tokio::time::timeout(ENDPOINT_DIAL_TIMEOUT, TcpStream::connect(endpoint))
                .await
                .ok()
                .and_then(std::result::Result::ok),
        };
        let Some(upstream) = upstream else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let (client_read, client_write) = client.into_split();
        let (upstream_read, upstream_write) = upstream.into_split();
        let up = pump(
            client_read,
            upstream_write,
            client_addr.ip(),
            endpoint.ip(),
            partitions.clone(),
        );
        let down = pump(
            upstream_read,
            client_write,
            endpoint.ip(),
            client_addr.ip(),
            partitions,
        );
        let _ = tokio::join!(up, down);
        return Ok(());
    }
    Err("no endpoint accepted the connection")
}

/// Connects to `endpoint` from the network namespace at `netns` (a pod's), bounded by
/// [`ENDPOINT_DIAL_TIMEOUT`]. `setns` moves the calling thread, so a thread of its own joins
/// the namespace, connects and ends; the socket stays in the namespace it was made in.
async fn dial_from_namespace(
    netns: std::path::PathBuf,
    endpoint: SocketAddr,
) -> std::io::Result<TcpStream> {
    let dial = move || -> std::io::Result<std::net::TcpStream> {
        let namespace = std::fs::File::open(&netns)?;
        nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(std::io::Error::from)?;
        let stream = std::net::TcpStream::connect_timeout(&endpoint, ENDPOINT_DIAL_TIMEOUT)?;
        stream.set_nonblocking(true)?;
        Ok(stream)
    };
    let stream = tokio::task::spawn_blocking(move || {
        std::thread::Builder::new()
            .name("proxy-dial".to_owned())
            .spawn(dial)?
            .join()
            .map_err(|_| std::io::Error::other("the dialling thread panicked"))?
    })
    .await
    .map_err(std::io::Error::other)??;
    TcpStream::from_std(stream)
}

/// Copies one direction; stalls while a partition separates `from` and `to`.
async fn pump(
    mut reader: impl AsyncRead + Unpin,
    mut writer: impl AsyncWrite + Unpin,
    from: IpAddr,
    to: IpAddr,
    partitions: Option<Arc<Partitions>>,
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; BUFFER_BYTES];
    let mut changes = partitions.as_ref().map(|p| p.subscribe());
    loop {
        let n = reader.read(&mut buffer).await?;
        if n == 0 {
            writer.shutdown().await?;
            return Ok(());
        }
        if let (Some(table), Some(changes)) = (&partitions, changes.as_mut()) {
            while table.blocks(from, to) {
                if changes.changed().await.is_err() {
                    return Ok(());
                }
            }
        }
        writer.write_all(&buffer[..n]).await?;
    }
}

/// One client's UDP session: its socket to the chosen endpoint, and when it last moved a
/// datagram (milliseconds since the session began).
struct UdpSession {
    upstream: Arc<UdpSocket>,
    endpoint: SocketAddr,
    began: tokio::time::Instant,
    active_ms: std::sync::atomic::AtomicU64,
    replies: JoinHandle<()>,
}

impl UdpSession {
    fn touch(&self) {
        let ms = self.began.elapsed().as_millis() as u64;
        self.active_ms.store(ms, Ordering::Relaxed);
    }
}

type UdpSessions = Arc<Mutex<HashMap<SocketAddr, Arc<UdpSession>>>>;

fn lock_sessions(
    sessions: &Mutex<HashMap<SocketAddr, Arc<UdpSession>>>,
) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Arc<UdpSession>>> {
    sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Aborts a listener's session tasks when the listener task itself ends or is aborted.
struct SessionsGuard(UdpSessions);

impl Drop for SessionsGuard {
    fn drop(&mut self) {
        for session in lock_sessions(&self.0).values() {
            session.replies.abort();
        }
    }
}

async fn udp_loop(
    key: ServicePortKey,
    socket: Arc<UdpSocket>,
    endpoints: watch::Receiver<Vec<SocketAddr>>,
    partitions: Option<Arc<Partitions>>,
) {
    let next = AtomicUsize::new(0);
    let sessions: UdpSessions = Arc::new(Mutex::new(HashMap::new()));
    let _guard = SessionsGuard(sessions.clone());
    let mut buffer = vec![0u8; DATAGRAM_BYTES_MAX];
    loop {
        let (n, client) = match socket.recv_from(&mut buffer).await {
            Ok(received) => received,
            Err(err) => {
                tracing::warn!(service = %key, error = %err, "proxy receive failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let existing = lock_sessions(&sessions).get(&client).cloned();
        let session = match existing {
            Some(session) => session,
            None => {
                let current = endpoints.borrow().clone();
                match open_udp_session(
                    &key,
                    &socket,
                    client,
                    &current,
                    &next,
                    &sessions,
                    &partitions,
                )
                .await
                {
                    Ok(session) => session,
                    Err(reason) => {
                        tracing::debug!(service = %key, %client, reason, "proxy dropped datagram");
                        continue;
                    }
                }
            }
        };
        if partitions
            .as_ref()
            .is_some_and(|p| p.blocks(client.ip(), session.endpoint.ip()))
        {
            continue;
        }
        session.touch();
        if let Err(err) = session.upstream.send(&buffer[..n]).await {
            tracing::debug!(service = %key, %client, endpoint = %session.endpoint, error = %err, "proxy could not forward datagram");
        }
    }
}

async fn open_udp_session(
    key: &ServicePortKey,
    socket: &Arc<UdpSocket>,
    client: SocketAddr,
    endpoints: &[SocketAddr],
    next: &AtomicUsize,
    sessions: &UdpSessions,
    partitions: &Option<Arc<Partitions>>,
) -> std::result::Result<Arc<UdpSession>, &'static str> {
    if endpoints.is_empty() {
        return Err("no ready endpoints");
    }
    if lock_sessions(sessions).len() >= UDP_SESSIONS_MAX {
        return Err("too many udp sessions");
    }
    let endpoint = endpoints[next.fetch_add(1, Ordering::Relaxed) % endpoints.len()];
    if partitions
        .as_ref()
        .is_some_and(|p| p.blocks(client.ip(), endpoint.ip()))
    {
        return Err("client and endpoint are partitioned");
    }
    let upstream = UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))
        .await
        .map_err(|_| "cannot open an upstream socket")?;
    upstream
        .connect(endpoint)
        .await
        .map_err(|_| "cannot reach the endpoint")?;
    let upstream = Arc::new(upstream);
    let session = Arc::new_cyclic(|weak: &std::sync::Weak<UdpSession>| {
        let weak = weak.clone();
        let replies = tokio::spawn(udp_replies(
            key.clone(),
            socket.clone(),
            upstream.clone(),
            client,
            weak,
            sessions.clone(),
            partitions.clone(),
        ));
        UdpSession {
            upstream,
            endpoint,
            began: tokio::time::Instant::now(),
            active_ms: std::sync::atomic::AtomicU64::new(0),
            replies,
        }
    });
    lock_sessions(sessions).insert(client, session.clone());
    tracing::debug!(service = %key, %client, %endpoint, "proxy udp session");
    Ok(session)
}

/// Relays an endpoint's replies to the client from the Service address; ends the session
/// once it has been idle for [`UDP_SESSION_IDLE`].
async fn udp_replies(
    key: ServicePortKey,
    socket: Arc<UdpSocket>,
    upstream: Arc<UdpSocket>,
    client: SocketAddr,
    session: std::sync::Weak<UdpSession>,
    sessions: UdpSessions,
    partitions: Option<Arc<Partitions>>,
) {
    let mut buffer = vec![0u8; DATAGRAM_BYTES_MAX];
    loop {
        match tokio::time::timeout(UDP_SESSION_IDLE, upstream.recv(&mut buffer)).await {
            Ok(Ok(n)) => {
                let Some(session) = session.upgrade() else {
                    return;
                };
                if partitions
                    .as_ref()
                    .is_some_and(|p| p.blocks(session.endpoint.ip(), client.ip()))
                {
                    continue;
                }
                session.touch();
                let _ = socket.send_to(&buffer[..n], client).await;
            }
            // An ICMP error (nothing listens at the endpoint): the session is useless.
            Ok(Err(_)) => break,
            Err(_) => {
                let Some(session) = session.upgrade() else {
                    return;
                };
                let idle_ms = session.began.elapsed().as_millis() as u64
                    - session.active_ms.load(Ordering::Relaxed);
                if idle_ms >= UDP_SESSION_IDLE.as_millis() as u64 {
                    break;
                }
            }
        }
    }
    tracing::debug!(service = %key, %client, "proxy udp session ended");
    lock_sessions(&sessions).remove(&client);
}
