//! [`LocalKube`]: starts the API server and controllers in this process, writes the
//! kubeconfig and state file, and stops them again. The harness embeds it; the `localkube`
//! binary wraps it.

use super::auth::{self, Authenticator};
use super::cluster::{Cluster, WriteOptions};
use super::controllers;
use super::defaults::IpRange;
use super::error::{ApiError, Error, Reason, Result};
use super::http::{self, ServerState};
use super::meta;
use super::plugin::{Plugin, PluginContext};
use super::store::Store;
use super::tls;
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Name of the state file in the state dir: `{"pid", "port", "server", "startedAt"}`, plus
/// `"dnsAddress"` (the cluster DNS IP, served on port `"dnsPort"`, 53) when a node agent
/// runs pods.
pub const STATE_FILE: &str = "localkube.json";
/// The port the cluster DNS serves on at `dnsAddress` (the node side's DNS server listens there).
pub const CLUSTER_DNS_PORT: u16 = 53;
/// Name of the kubeconfig in the state dir.
pub const KUBECONFIG_FILE: &str = "kubeconfig";

/// Server configuration.
#[derive(Clone)]
pub struct Config {
    /// Where state, certificates, kubeconfig and logs live.
    pub state_dir: PathBuf,
    /// Port on 127.0.0.1 (0: any free port).
    pub port: u16,
    /// Nodes, named after sites and labelled `topology.kubernetes.io/zone=<name>`.
    pub nodes: Vec<String>,
    /// More nodes without a zone label (e.g. `apps` for the operator and the counter, so
    /// that site faults never take them down); they run pods like any other node.
    pub zoneless_nodes: Vec<String>,
    /// Service ClusterIP range.
    pub service_cidr: String,
    /// Watch history window (events kept for resumption).
    pub history_window: usize,
    /// Interval of watch BOOKMARKs.
    pub bookmark_interval: Duration,
    /// Extra names or IPs in the serving certificate.
    pub extra_sans: Vec<String>,
    /// Run the built-in controllers.
    pub controllers: bool,
    /// Plugins (node agent).
    pub plugins: Vec<Arc<dyn Plugin>>,
    /// The cluster DNS address (port 53) pods resolve through, recorded in the state file
    /// as `dnsAddress`; set by `kubelet::prepare` (`None`: no node agent, no cluster DNS).
    pub dns_address: Option<Ipv4Addr>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Config")
            .field("state_dir", &self.state_dir)
            .field("port", &self.port)
            .field("nodes", &self.nodes)
            .field("zoneless_nodes", &self.zoneless_nodes)
            .finish()
    }
}

impl Config {
    /// Defaults for a state dir: nodes iad, pdx, reader; 10.96.0.0/16; any port.
    pub fn new(state_dir: impl Into<PathBuf>) -> Config {
        Config {
            state_dir: state_dir.into(),
            port: 0,
            nodes: vec!["iad".into(), "pdx".into(), "reader".into()],
            zoneless_nodes: vec![],
            service_cidr: "10.96.0.0/16".into(),
            history_window: 10_000,
            bookmark_interval: Duration::from_secs(5),
            extra_sans: vec![],
            controllers: true,
            plugins: vec![],
            dns_address: None,
        }
    }

    /// Every node with whether it has a zone: `nodes` (zoned), then `zoneless_nodes`. A
    /// name in both lists, or twice, is an error.
    pub fn all_nodes(&self) -> Result<Vec<(String, bool)>> {
        let mut all: Vec<(String, bool)> = Vec::new();
        let zoned = self.nodes.iter().map(|node| (node, true));
        let zoneless = self
            .zoneless_nodes
            .iter()
            .map(|zoneless_node| (zoneless_node, false));
        for (name, has_zone) in zoned.chain(zoneless) {
            if name.is_empty() || all.iter().any(|(n, _)| n == name) {
                return Err(Error::Config(format!(
                    "start: node name {name:?} is empty or listed twice (nodes {:?}, zoneless nodes {:?})",
                    self.nodes, self.zoneless_nodes
                )));
            }
            all.push((name.clone(), has_zone));
        }
        Ok(all)
    }
}

/// How to reach the API server without a kubeconfig (the admin bearer token: the
/// kubeconfig's admin authenticates with a client certificate instead).
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The admin bearer token.
    pub token: String,
}

/// A running localkube.
pub struct LocalKube {
    cluster: Arc<Cluster>,
    address: SocketAddr,
    state_dir: PathBuf,
    shutdown_tx: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    ca_pem: String,
}

impl std::fmt::Debug for LocalKube {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LocalKube")
            .field("address", &self.address)
            .field("state_dir", &self.state_dir)
            .finish()
    }
}

fn ensure(cluster: &Cluster, group: &str, plural: &str, obj: Value) -> Result<()> {
    let Some(resource) = cluster.resource(group, plural) else {
        return Ok(());
    };
    let ns = meta::namespace(&obj).to_string();
    if cluster
        .store
        .get(
            &resource.storage_key(),
            if resource.namespaced { &ns } else { "" },
            meta::name(&obj),
        )
        .is_some()
    {
        return Ok(());
    }
    match cluster.create(&resource, &ns, obj, &WriteOptions::manager("localkube")) {
        Ok(_) => Ok(()),
        Err(ApiError {
            reason: Reason::AlreadyExists,
            ..
        }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The Node object of a node: labelled `topology.kubernetes.io/zone=<name>` when it is a
/// site (`zoned`), without a zone label otherwise.
pub fn node_object(site: &str, index: usize, zoned: bool) -> Value {
    let mut labels = json!({"kubernetes.io/hostname": site, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"});
    if zoned {
        labels["topology.kubernetes.io/zone"] = json!(site);
    }
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": site, "labels": labels},
        "spec": {"podCIDR": format!("10.244.{index}.0/24"), "podCIDRs": [format!("10.244.{index}.0/24")]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": meta::now(), "lastTransitionTime": meta::now()}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": site}],
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}, "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
            "nodeInfo": {"kubeletVersion": "v1.32.0-localkube", "kubeProxyVersion": "v1.32.0-localkube", "operatingSystem": "linux", "architecture": "amd64",
                "containerRuntimeVersion": "localkube://0.1.0", "osImage": "localkube", "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""}}})
}

fn bootstrap(
    cluster: &Cluster,
    nodes: &[(String, bool)],
    kubernetes_ip: Ipv4Addr,
    dns_ip: Option<Ipv4Addr>,
    port: u16,
) -> Result<()> {
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        ensure(
            cluster,
            "",
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )?;
    }
    for (key, obj) in auth::bootstrap_rbac() {
        let plural = key.rsplit('/').next().unwrap_or_default();
        ensure(cluster, "rbac.authorization.k8s.io", plural, obj)?;
    }
    for (index, (node, zoned)) in nodes.iter().enumerate() {
        ensure(cluster, "", "nodes", node_object(node, index + 1, *zoned))?;
    }
    ensure(
        cluster,
        "",
        "services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "namespace": "default",
        "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": kubernetes_ip.to_string(), "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}}),
    )?;
    if let Some(dns_ip) = dns_ip {
        ensure_dns_service(cluster, dns_ip)?;
    }
    let subsets = json!([{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]);
    ensure(
        cluster,
        "",
        "endpoints",
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "kubernetes", "namespace": "default"}, "subsets": subsets}),
    )?;
    cluster.modify(
        "",
        "endpoints",
        "default",
        "kubernetes",
        None,
        "localkube",
        |e| {
            if e.get("subsets") == Some(&subsets) {
                return false;
            }
            e["subsets"] = subsets.clone();
            true
        },
    )?;
    cluster.modify(
        "",
        "services",
        "default",
        "kubernetes",
        None,
        "localkube",
        |s| {
            if s.pointer("/spec/ports/0/targetPort") == Some(&json!(port)) {
                return false;
            }
            s["spec"]["ports"][0]["targetPort"] = json!(port);
            true
        },
    )?;
    Ok(())
}

/// The `kube-system/kube-dns` Service at the cluster DNS address, as kubeadm and kind
/// create it for CoreDNS: holding that ClusterIP is what keeps the allocator from giving
/// it to another Service (a Service asking for it gets 422 "already allocated"). The node
/// agent serves the address with the cluster DNS itself, not through the proxy. A state
/// dir whose store already gave the address to another Service keeps that Service and
/// logs why there is no `kube-dns`.
fn ensure_dns_service(cluster: &Cluster, dns_ip: Ipv4Addr) -> Result<()> {
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}},
        "spec": {"clusterIP": dns_ip.to_string(), "selector": {"k8s-app": "kube-dns"},
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153}]}});
    match ensure(cluster, "", "services", service) {
        Err(Error::Api(e)) if matches!(e.reason, Reason::Invalid) => {
            tracing::warn!(%dns_ip, error = %e.message, "the cluster DNS address is held by another Service; no kube-dns Service");
            Ok(())
        }
        other => other,
    }
}

/// The kubeconfig of the admin user, who authenticates with an x509 client certificate
/// (`cert_pem`, `key_pem`) as on kind and kubeadm clusters.
pub fn kubeconfig(server: &str, ca_pem: &str, cert_pem: &str, key_pem: &str) -> String {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let (ca, cert, key) = (b64(ca_pem), b64(cert_pem), b64(key_pem));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: localkube\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: localkube\n  context:\n    cluster: localkube\n    user: admin\n    namespace: default\ncurrent-context: localkube\n"
    )
}

/// Accepts TLS connections and serves each with `app` until `stop` turns true.
async fn accept_connections(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    app: axum::Router,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let acceptor = acceptor.clone();
                let app = app.clone();
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    // The handshake's client certificates go with every request of
                    // the connection; each request verifies them.
                    let service = match tls::PeerCertificates::of(tls.get_ref().1) {
                        Some(chain) => TowerToHyperService::new(app.layer(axum::Extension(chain))),
                        None => TowerToHyperService::new(app),
                    };
                    let _ = auto::Builder::new(TokioExecutor::new()).serve_connection_with_upgrades(TokioIo::new(tls), service).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    connections.abort_all();
}

/// Writes what clients read in the state dir: the admin kubeconfig (owner only) and the
/// state file; returns the server's URL.
fn write_client_files(
    dir: &Path,
    certs: &tls::Certs,
    address: SocketAddr,
    dns_address: Option<Ipv4Addr>,
) -> Result<String> {
    let server = format!("https://{address}");
    let kubeconfig_path = dir.join(KUBECONFIG_FILE);
    std::fs::write(
        &kubeconfig_path,
        kubeconfig(
            &server,
            &certs.ca_pem,
            &certs.admin_cert_pem,
            &certs.admin_key_pem,
        ),
    )
    .map_err(|error| Error::io(&kubeconfig_path, error))?;
    // It holds the admin's private key: owner only, as kind writes it.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kubeconfig_path, std::fs::Permissions::from_mode(0o600))
            .map_err(|error| Error::io(&kubeconfig_path, error))?;
    }
    let state_file = dir.join(STATE_FILE);
    let mut state_json = json!({"pid": std::process::id(), "port": address.port(), "server": server, "startedAt": meta::now()});
    if let Some(dns) = dns_address {
        state_json["dnsAddress"] = json!(dns.to_string());
        state_json["dnsPort"] = json!(CLUSTER_DNS_PORT);
    }
    std::fs::write(&state_file, state_json.to_string())
        .map_err(|error| Error::io(&state_file, error))?;
    Ok(server)
}

impl LocalKube {
    /// Starts the API server, controllers and plugins; returns once the API is served.
    pub async fn start(config: Config) -> Result<LocalKube> {
        let started = std::time::Instant::now();
        let nodes = config.all_nodes()?;
        let dir = config.state_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let range = IpRange::parse(&config.service_cidr).ok_or_else(|| {
            Error::Config(format!("parse service range {:?}", config.service_cidr))
        })?;
        let kubernetes_ip = range.nth(1);
        let mut sans = config.extra_sans.clone();
        sans.push(kubernetes_ip.to_string());
        let certs = tls::load_or_create(&dir, &sans)?;
        let store = Arc::new(Store::open(
            Some(&dir.join("store")),
            config.history_window,
        )?);
        let authn = Authenticator::load(&dir)?;
        let cluster = Arc::new(Cluster::new(
            store,
            authn,
            range,
            dir.clone(),
            certs.ca_pem.clone(),
        ));
        if config.plugins.iter().any(|p| p.runs_pods()) {
            cluster
                .node_agent_attached
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, config.port))
            .await
            .map_err(|e| Error::io(format!("127.0.0.1:{}", config.port), e))?;
        let address = listener
            .local_addr()
            .map_err(|error| Error::io("listener", error))?;
        let dns_ip = config.dns_address.filter(|ip| {
            let inside = cluster.service_range.contains(*ip);
            if !inside {
                tracing::warn!(dns_ip = %ip, service_cidr = %config.service_cidr, "the cluster DNS address is outside the Service range; not reserved");
            }
            inside
        });
        bootstrap(&cluster, &nodes, kubernetes_ip, dns_ip, address.port())?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let client_ca = tls::ClientCa::new(&certs.ca_pem)?;
        let state = Arc::new(ServerState {
            cluster: cluster.clone(),
            address: address.to_string(),
            bookmark_interval: config.bookmark_interval,
            shutdown: shutdown_rx.clone(),
            client_ca: client_ca.clone(),
            plugins: config.plugins.clone(),
        });
        let app = http::router(state);
        let acceptor =
            tokio_rustls::TlsAcceptor::from(Arc::new(tls::server_config(&certs, &client_ca)?));
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(accept_connections(
            listener,
            acceptor,
            app,
            shutdown_rx.clone(),
        )));
        if config.controllers {
            tasks.push(tokio::spawn(controllers::run(
                cluster.clone(),
                shutdown_rx.clone(),
            )));
        }
        for plugin in &config.plugins {
            let ctx = PluginContext {
                cluster: cluster.clone(),
                shutdown: shutdown_rx.clone(),
                address,
                nodes: nodes.iter().map(|(node, _)| node.clone()).collect(),
                kubernetes_service_ip: kubernetes_ip,
            };
            tracing::info!(plugin = plugin.name(), "starting plugin");
            tasks.push(tokio::spawn(plugin.run(ctx)));
        }
        let server = write_client_files(&dir, &certs, address, config.dns_address)?;
        tracing::info!(%server, state_dir = %dir.display(), elapsed_ms = started.elapsed().as_millis() as u64, "localkube is serving");
        Ok(LocalKube {
            cluster,
            address,
            state_dir: dir,
            shutdown_tx,
            tasks,
            ca_pem: certs.ca_pem,
        })
    }

    /// The address served.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `DIR/kubeconfig` (admin user).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.state_dir.join(KUBECONFIG_FILE)
    }

    /// Server URL, CA and admin token.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            server: format!("https://{}", self.address),
            ca_pem: self.ca_pem.clone(),
            token: self.cluster.auth.admin_token().to_string(),
        }
    }

    /// The cluster (store and verbs), for in-process use.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// Stops serving, stops controllers and plugins, and writes the store snapshot. The
    /// state dir keeps the objects for the next start.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.shutdown_tx.send(true);
        for join_handle in self.tasks {
            match tokio::time::timeout(Duration::from_secs(10), join_handle).await {
                Ok(_) => {}
                Err(_) => tracing::warn!("a task did not stop within 10s"),
            }
        }
        self.cluster.store.flush()?;
        let sf = self.state_dir.join(STATE_FILE);
        let _ = std::fs::remove_file(&sf);
        Ok(())
    }
}

/// Hooks `down` runs to remove what plugins made (namespaces, links, processes).
pub type CleanupHook = fn(&Path) -> std::result::Result<(), String>;

/// Reads the state file of a state dir: (pid, port).
pub fn read_state(dir: &Path) -> Option<(u32, u16)> {
    let text = std::fs::read_to_string(dir.join(STATE_FILE)).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    Some((
        value.get("pid")?.as_u64()? as u32,
        value.get("port")?.as_u64()? as u16,
    ))
}
