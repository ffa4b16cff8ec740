//! Command-line flags: libtest-mimic's own (filter, `--list`, `--exact`, `--skip`, nextest's)
//! flattened with the harness's.

use std::path::PathBuf;

use crate::backend::{default_cluster_kind, ClusterKind};

/// The scenario catalogue of this checkout.
pub const DEFAULT_SCENARIOS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");

/// `bloodraven-harness [OPTIONS] [FILTER]`.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "bloodraven-harness",
    about = "Bloodraven chaos scenarios as libtest-mimic trials (sNNN_slug).",
    disable_version_flag = true
)]
pub struct Cli {
    /// Where the cluster comes from (default: kind with Docker, localkube without).
    #[arg(long, value_enum, env = "BLOODRAVEN_CLUSTER")]
    pub cluster: Option<ClusterKind>,
    /// Reuse one cluster across scenarios (torn down at the end).
    #[arg(long)]
    pub reuse: bool,
    /// Where `<run-id>/`, `trend.jsonl` and `trends.html` are written.
    #[arg(long, default_value = "reports", env = "BLOODRAVEN_REPORT_DIR")]
    pub report_dir: PathBuf,
    /// Only re-render `<report-dir>/trends.html` from `trend.jsonl`, run nothing.
    #[arg(long)]
    pub trends: bool,
    /// The scenario catalogue directory.
    #[arg(long, default_value = DEFAULT_SCENARIOS_DIR, env = "BLOODRAVEN_SCENARIOS")]
    pub scenarios: PathBuf,
    /// libtest's arguments.
    #[command(flatten)]
    pub test: libtest_mimic::Arguments,
}

impl Cli {
    /// The backend to use: the flag, else the default for this machine.
    pub fn cluster_kind(&self) -> ClusterKind {
        self.cluster
            .unwrap_or_else(|| default_cluster_kind(crate::backends::kind::docker_daemon_answers()))
    }
}
