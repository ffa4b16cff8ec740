//! The boundary to a live cluster: a [`Backend`] provides a [`Cluster`]; the runner drives
//! scenarios through the [`Cluster`] trait only. The backends themselves, and the choice
//! among them, are in [`crate::backends`] ([`crate::backends::select`]); when none can be
//! had, [`unavailable_sentence`] says so in one sentence and every trial fails with it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::history::recorder::Recorder;
use crate::scenario::model::{Action, Apply, Capability, Expect, Fault, HealTarget, Install, Site};
use crate::targets::Observation;

/// Where the cluster comes from (`--cluster`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterKind {
    /// The embedded control plane (default without Docker).
    Localkube,
    /// A kind cluster created from `kind/`.
    Kind,
    /// An existing cluster from `$KUBECONFIG`.
    Kubeconfig,
}

impl ClusterKind {
    /// The flag value.
    pub const fn name(self) -> &'static str {
        match self {
            ClusterKind::Localkube => "localkube",
            ClusterKind::Kind => "kind",
            ClusterKind::Kubeconfig => "kubeconfig",
        }
    }
}

/// Creates and destroys clusters.
pub trait Backend: Send + Sync {
    /// Which kind this is.
    fn kind(&self) -> ClusterKind;
    /// Creates (or attaches to) a cluster, with the CRDs installed.
    fn create(&self) -> Result<Arc<dyn Cluster>>;
    /// Tears the cluster down (a no-op for `kubeconfig`).
    fn teardown(&self, cluster: Arc<dyn Cluster>) -> Result<()>;
    /// What its clusters can do beyond the Kubernetes API and the fault agent (a scenario's
    /// `requires:`); none unless a backend says so.
    fn capabilities(&self) -> std::collections::BTreeSet<Capability> {
        std::collections::BTreeSet::new()
    }
}

/// Why `scenario` cannot run on a backend with `capabilities`: the capabilities it
/// requires and the backend lacks, named (`None` when it can run).
pub fn skip_reason(
    scenario: &crate::scenario::model::Scenario,
    kind: ClusterKind,
    driver: FaultDriverKind,
    capabilities: &std::collections::BTreeSet<Capability>,
) -> Option<String> {
    let missing: Vec<&str> = scenario
        .requires
        .iter()
        .filter(|capability| !capabilities.contains(capability))
        .map(|capability| capability.name())
        .collect();
    (!missing.is_empty()).then(|| {
        let driver = match driver {
            FaultDriverKind::Auto => String::new(),
            FaultDriverKind::Native => " with --fault-driver native".to_owned(),
            FaultDriverKind::Agent => " with --fault-driver agent".to_owned(),
        };
        format!(
            "requires {}, which the {} backend{driver} does not have",
            missing.join(", "),
            kind.name()
        )
    })
}

/// A handle on the probes and workload running for one scenario; dropping it must stop them.
pub trait Workload: Send {
    /// Stops the workload and probes, waiting for in-flight operations to complete (or be
    /// recorded as `info`).
    fn stop(self: Box<Self>) -> Result<()>;
}

/// Everything the runner needs from a live cluster. Implementations record what they do
/// into the scenario's [`Recorder`] (faults as `fault` start/end events).
pub trait Cluster: Send + Sync {
    /// The kubeconfig file for kubectl and kube-rs.
    fn kubeconfig(&self) -> &Path;
    /// Installs the operator, the playground group and the counter app, and waits until the
    /// group's authority is Valid on its `initialActiveSite` with every site healthy: where a
    /// scenario's steps start (docs/scenarios.md, "Where the steps start").
    fn install(&self, install: &Install) -> Result<()>;
    /// Removes what `install` created, so the cluster can be reused (`--reuse`).
    fn uninstall(&self) -> Result<()>;
    /// Starts the workload (writes of unique ids through -primary, reads) and the probes
    /// (DNS, endpoints, group status), recording into `recorder`.
    fn start_workload(&self, recorder: Arc<Recorder>) -> Result<Box<dyn Workload>>;
    /// Server-side applies a fixture or an inline object.
    fn apply(&self, apply: &Apply) -> Result<()>;
    /// Injects a fault, recording a `fault` start event (invoke, then ok/fail/info) named by
    /// [`Fault::kind`], built with [`crate::history::event::Op::fault`] so it names the sites
    /// it acts on.
    fn inject(&self, fault: &Fault, recorder: &Recorder) -> Result<()>;
    /// Performs an outside action, recording it as a `fault` start event named by
    /// [`Action::kind`] with [`Action::sites`] (and its end at once unless `heal` undoes it).
    fn act(&self, action: &Action, recorder: &Recorder) -> Result<()>;
    /// Heals faults, recording one `fault` end event per healed fault (or one named `all`).
    fn heal(&self, target: &HealTarget, recorder: &Recorder) -> Result<()>;
    /// Reads the current state of an expectation's target, as its module in
    /// [`crate::targets`] types it. Deploy API requests are sent here
    /// with `${var}` already substituted.
    fn observe(&self, expect: &Expect) -> Result<Observation>;
    /// The liveness condition: one writable site, replicas healthy, DNS = active site.
    /// `Ok(None)` when it holds, `Ok(Some(reason))` when not yet. Judged by
    /// [`crate::check::converged::converged`] on the group's `.status` and the history.
    fn converged(&self) -> Result<Option<String>>;
    /// The final state for RPO. The runner calls it after the final heal and the liveness
    /// phase, and after [`Workload::stop`] returned (no write is in flight). Returns, for
    /// every site whose mysqld can be read (the active site, the replicas, and a returning
    /// old primary kept fenced: its rows are how lost writes are seen), every workload id
    /// present in that site's table, read directly from that site's mysqld (never through
    /// `-primary`/`-replicas`) and without writing, and the site each row found (workload and
    /// canary rows) names as its committer. A site that cannot be read is left out of the map
    /// (not an empty list); an error only when no site can be read.
    fn final_state(&self) -> Result<FinalRows>;
    /// Right after [`Cluster::final_state`]: the [`crate::history::event::Op::GtidState`]
    /// of every site whose mysqld can be read, and the group's `lastFailover` read after
    /// them. `Ok(None)`: this cluster has no MySQL to read (a scripted test double).
    fn final_gtid_state(&self) -> Result<Option<crate::history::event::Op>> {
        Ok(None)
    }
    /// Copies pod logs, events, the group's YAML and the operator log into `dir`.
    fn collect_artifacts(&self, dir: &Path) -> Result<()>;
}

/// What the final read found ([`Cluster::final_state`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FinalRows {
    /// Every workload id present, by site read.
    pub sites: BTreeMap<Site, Vec<u64>>,
    /// The committing site of every workload row read (its `site` column, `@@hostname` at
    /// commit), by id.
    pub committed: BTreeMap<u64, Site>,
    /// The committing site of every canary row of the site probes read, by canary id.
    pub canaries: BTreeMap<u64, Site>,
}

/// The sentence a trial fails with when no backend can provide a cluster.
pub fn unavailable_sentence(kind: ClusterKind) -> String {
    format!(
        "failed to {}.",
        Error::BackendUnavailable {
            kind: kind.name().to_owned()
        }
    )
}

/// How process, node and network faults reach a cluster (`--fault-driver`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum FaultDriverKind {
    /// The backend's own way where it has one (localkube's fault socket), else the agent.
    Auto,
    /// The backend's own way only (localkube's fault socket).
    Native,
    /// The in-cluster fault agent only, through the Kubernetes API: the portable path, the
    /// same on every backend (localkube's fault socket is never used).
    Agent,
}

/// What the in-cluster fault agent path can do that a scenario may require: stop-node (the
/// agent stops the node's kubelet and kills its pods' processes; on kind the backend's
/// `docker stop` does it instead); not clock-offset.
pub fn agent_capabilities() -> std::collections::BTreeSet<Capability> {
    [Capability::StopNode].into()
}

/// What localkube's own fault socket can do (clock-offset beyond the agent).
pub fn localkube_capabilities() -> std::collections::BTreeSet<Capability> {
    [Capability::ClockOffset, Capability::StopNode].into()
}

/// The environment variable naming the workspace root (fixtures/, scenarios/, kind/).
pub const ROOT_ENV: &str = "BLOODRAVEN_ROOT";

/// The workspace root a run works on: `$BLOODRAVEN_ROOT`, else the nearest ancestor of the
/// current directory that holds `fixtures/crds` and `scenarios/` (`just` runs its recipes in
/// the checkout's root), else the checkout this program was compiled in.
///
/// Not the compile-time path first: cargo reuses a binary built from another checkout of
/// the same sources when they share a target dir (CI's cache does), so a path baked in at
/// build time can name a different checkout, or one that no longer exists.
pub fn workspace_root() -> std::path::PathBuf {
    let root = std::env::var_os(ROOT_ENV)
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::current_dir()
                .ok()
                .and_then(|dir| find_workspace_root(&dir))
        })
        .unwrap_or_else(|| std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")));
    std::fs::canonicalize(&root).unwrap_or(root)
}

/// The nearest of `start` and its ancestors holding `fixtures/crds` and `scenarios/`.
pub fn find_workspace_root(start: &std::path::Path) -> Option<std::path::PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join("fixtures/crds").is_dir() && dir.join("scenarios").is_dir())
        .map(std::path::Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root is found from the current directory, not from where the binary was built:
    /// a second checkout sharing the target dir reads its own fixtures and scenarios.
    #[test]
    fn the_workspace_root_is_the_nearest_ancestor_with_fixtures_and_scenarios() {
        let checkout = tempfile::tempdir().expect("temp dir");
        let root = checkout.path();
        std::fs::create_dir_all(root.join("fixtures/crds")).expect("fixtures");
        std::fs::create_dir_all(root.join("scenarios")).expect("scenarios");
        std::fs::create_dir_all(root.join("harness/src")).expect("subdir");
        assert_eq!(
            find_workspace_root(&root.join("harness/src")).as_deref(),
            Some(root)
        );
        assert_eq!(find_workspace_root(root).as_deref(), Some(root));

        let elsewhere = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(elsewhere.path().join("fixtures/crds")).expect("fixtures only");
        assert_eq!(find_workspace_root(elsewhere.path()), None);
    }
}
