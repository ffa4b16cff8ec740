//! What every backend needs to create a cluster ([`BackendConfig`]): below the backends and
//! their selection, so each backend reads it without importing the selection.

use std::path::{Path, PathBuf};

use crate::backend::{workspace_root, FaultDriverKind};

/// What the backends need to create a cluster.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// How faults reach the cluster.
    pub fault_driver: FaultDriverKind,
    /// The workspace root (fixtures, kind/, Dockerfiles).
    pub root: PathBuf,
    /// The directory of the workspace's built binaries (localkube, bloodraven, ...).
    pub bin_dir: PathBuf,
    /// The state dir of a cluster the harness creates.
    pub state_dir: PathBuf,
    /// Operator images mapped to other builds (`just upgrade`), localkube only; see
    /// [`crate::playground::localkube::operator_builds`].
    pub image_overrides: Vec<(String, PathBuf)>,
}

impl BackendConfig {
    /// The [`workspace_root`], the running program's directory for binaries, and
    /// `$BLOODRAVEN_HARNESS_STATE_DIR` or `<root>/.localkube-harness`.
    pub fn for_this_checkout() -> Self {
        let root = workspace_root();
        let bin_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let state_dir = std::env::var_os("BLOODRAVEN_HARNESS_STATE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".localkube-harness"));
        Self {
            fault_driver: FaultDriverKind::Auto,
            root,
            bin_dir,
            state_dir,
            image_overrides: Vec::new(),
        }
    }
}
