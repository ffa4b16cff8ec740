//! What plugs into the server: a [`Plugin`] (the node agent) runs next to the controllers
//! with a [`PluginContext`], and may serve the streaming pod subresources
//! ([`StreamSubresource`]) through a [`StreamRequest`]. The HTTP layer ([`super::http`])
//! and the server ([`super::server`]) both depend on these types; they depend on neither.

use super::cluster::Cluster;
use super::error::ApiError;
use axum::http::request::Parts;
use axum::response::Response;
use futures::future::BoxFuture;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::sync::watch;

/// Something that runs inside the server process next to the controllers, such as the
/// node agent: it gets the cluster (store, verbs) and runs until `shutdown` turns true.
pub trait Plugin: Send + Sync + 'static {
    /// Name for logs.
    fn name(&self) -> &str;
    /// Whether this plugin runs pods: pod deletion then waits for it (deletionTimestamp is
    /// set and the plugin removes the pod with grace 0 once its processes are gone).
    fn runs_pods(&self) -> bool {
        false
    }
    /// Runs the plugin.
    fn run(&self, ctx: PluginContext) -> BoxFuture<'static, ()>;
    /// Why the kubelet of `node` cannot be reached now (exec, attach, port-forward and logs
    /// of its pods are then refused with it, as kube-apiserver's `error dialing backend`);
    /// `None` when it can, or when this plugin runs no kubelet.
    fn node_unreachable(&self, cluster: &Cluster, node: &str) -> Option<String> {
        let _ = (cluster, node);
        None
    }
    /// Whether this plugin serves the streaming pod subresources ([`serve_stream`](Plugin::serve_stream)).
    fn serves_streams(&self) -> bool {
        false
    }
    /// Serves an authorized `pods/exec`, `pods/attach` or `pods/portforward` request
    /// (called only when [`serves_streams`](Plugin::serves_streams) is true).
    fn serve_stream(
        &self,
        request: StreamRequest,
    ) -> BoxFuture<'static, Result<Response, ApiError>> {
        let _ = request;
        Box::pin(async {
            Err(ApiError::bad_request(
                "no node agent runs pods in this cluster",
            ))
        })
    }
}

/// A streaming pod subresource: served by a node agent plugin, not by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamSubresource {
    /// `pods/<name>/exec`.
    Exec,
    /// `pods/<name>/attach`.
    Attach,
    /// `pods/<name>/portforward`.
    PortForward,
}

impl StreamSubresource {
    /// The subresource a path names, if it is a streaming one.
    pub fn parse(subresource: &str) -> Option<Self> {
        match subresource {
            "exec" => Some(StreamSubresource::Exec),
            "attach" => Some(StreamSubresource::Attach),
            "portforward" => Some(StreamSubresource::PortForward),
            _ => None,
        }
    }

    /// The name in the path.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamSubresource::Exec => "exec",
            StreamSubresource::Attach => "attach",
            StreamSubresource::PortForward => "portforward",
        }
    }
}

/// An authorized request for a streaming pod subresource.
pub struct StreamRequest {
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// Which subresource.
    pub subresource: StreamSubresource,
    /// The HTTP request (its query and upgrade headers).
    pub parts: Parts,
}

/// What a plugin gets.
#[derive(Clone)]
pub struct PluginContext {
    /// The cluster: store (with `subscribe()` for changes), registry and verbs.
    pub cluster: Arc<Cluster>,
    /// Turns true on shutdown.
    pub shutdown: watch::Receiver<bool>,
    /// The API server's address.
    pub address: SocketAddr,
    /// Node names: the site nodes, then the zoneless ones ([`Config::all_nodes`](super::server::Config::all_nodes)).
    pub nodes: Vec<String>,
    /// ClusterIP of the `kubernetes` Service.
    pub kubernetes_service_ip: Ipv4Addr,
}
