//! The [`Cluster`]: what the verbs ([`super::ops`]), the per-kind rules
//! ([`super::kind_rules`]) and the controllers share (store, registry, token authority,
//! Service range), and the options of its writes. The verbs themselves are in `ops`.

use super::auth::Authenticator;
use super::defaults::IpRange;
use super::registry::{Registry, ResourceInfo};
use super::schema::Schema;
use super::store::Store;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LockResult, Mutex, MutexGuard};

/// Everything the verbs and controllers share.
pub struct Cluster {
    /// The object store.
    pub store: Arc<Store>,
    /// Served resources.
    pub registry: Registry,
    /// Token authority.
    pub auth: Authenticator,
    /// ClusterIP range.
    pub service_range: IpRange,
    /// The state dir.
    pub state_dir: PathBuf,
    /// PEM of the cluster CA (for `kube-root-ca.crt` and tokens' `ca.crt`).
    pub ca_pem: String,
    /// When true a node agent runs pods: pod deletion is graceful (deletionTimestamp, the
    /// agent finishes it). When false pods are removed at once.
    pub node_agent_attached: AtomicBool,
    allocations: Mutex<()>,
    /// Runs once between a delete's read and its write: tests interleave a concurrent
    /// write there.
    #[cfg(test)]
    pub(crate) delete_interleave: DeleteInterleave,
}

#[cfg(test)]
pub(crate) type DeleteInterleave = Mutex<Option<Box<dyn FnOnce(&Cluster) + Send>>>;

impl std::fmt::Debug for Cluster {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Cluster")
            .field("state_dir", &self.state_dir)
            .finish()
    }
}

/// How a write is made.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Field manager.
    pub manager: String,
    /// `dryRun=All`: validate and return, store nothing.
    pub dry_run: bool,
    /// `fieldValidation=Strict`.
    pub strict: bool,
    /// Server-side apply `force`.
    pub force: bool,
}

impl WriteOptions {
    /// Options for an internal controller write.
    pub fn manager(message: &str) -> WriteOptions {
        WriteOptions {
            manager: message.into(),
            ..Default::default()
        }
    }
}

/// Patch flavours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

/// `DeleteOptions` that matter here.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy` (Orphan, Background, Foreground).
    pub propagation: Option<String>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_rv: Option<String>,
    /// `dryRun`.
    pub dry_run: bool,
}

impl Cluster {
    /// A cluster over a store.
    pub fn new(
        store: Arc<Store>,
        auth: Authenticator,
        service_range: IpRange,
        state_dir: PathBuf,
        ca_pem: String,
    ) -> Cluster {
        let registry = Registry::new();
        let (crds, _) = store.list("apiextensions.k8s.io/customresourcedefinitions", None);
        for crd in &crds {
            registry.register_crd(crd);
        }
        Cluster {
            store,
            registry,
            auth,
            service_range,
            state_dir,
            ca_pem,
            node_agent_attached: AtomicBool::new(false),
            allocations: Mutex::new(()),
            #[cfg(test)]
            delete_interleave: Mutex::new(None),
        }
    }

    /// The lock held while Service addresses are allocated and Services stored.
    pub(crate) fn lock_allocations(&self) -> LockResult<MutexGuard<'_, ()>> {
        self.allocations.lock()
    }

    /// The list semantics of a resource.
    pub fn schema(&self, resource: &ResourceInfo) -> Schema {
        Schema {
            kind: resource.kind.clone(),
            builtin: resource.crd.is_none(),
            openapi: resource
                .crd
                .as_ref()
                .and_then(|crd_version| crd_version.schema.clone()),
        }
    }

    /// Resolves a kind's resource (first served version) by group and plural.
    pub fn resource(&self, group: &str, plural: &str) -> Option<ResourceInfo> {
        self.registry
            .all()
            .into_iter()
            .find(|r| r.group == group && r.plural == plural)
    }
}
