//! Command-line flags: libtest-mimic's own (filter, `--list`, `--exact`, `--skip`, nextest's)
//! flattened with the harness's.

use std::path::PathBuf;

use crate::backend::ClusterKind;
use crate::backends::select::default_cluster_kind;

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
    /// Run each scenario this many times (flake detection: the summary gives each one's
    /// pass rate). With `--reuse` every run installs afresh on the same cluster.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Only these catalogue ids, in this order (e.g. `50,20,22`); the libtest filter still
    /// applies on top.
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    pub ids: Vec<u16>,
    /// `just upgrade`: the operator binary of build A; the image `bloodraven:upgrade-a`
    /// (scenario 050's install) runs it. localkube only.
    #[arg(long, value_name = "PATH", env = "BLOODRAVEN_UPGRADE_FROM_BIN")]
    pub upgrade_from_bin: Option<PathBuf>,
    /// `just upgrade`: the operator binary of build B (default: this workspace's); the image
    /// `bloodraven:upgrade-b` and every other `bloodraven:*` tag run it. localkube only.
    #[arg(long, value_name = "PATH", env = "BLOODRAVEN_UPGRADE_TO_BIN")]
    pub upgrade_to_bin: Option<PathBuf>,
    /// `just upgrade --from-image`: operator A by image reference, on any backend: scenario
    /// 050 installs it instead of `bloodraven:upgrade-a`. Needs `--upgrade-to-image`.
    #[arg(
        long,
        value_name = "IMAGE",
        requires = "upgrade_to_image",
        conflicts_with_all = ["upgrade_from_bin", "upgrade_to_bin"],
        value_parser = crate::upgrade::image_reference
    )]
    pub upgrade_from_image: Option<String>,
    /// `just upgrade --to-image`: operator B by image reference: 050 rolls to it instead of
    /// `bloodraven:upgrade-b`, and every other scenario of the run installs it.
    #[arg(
        long,
        value_name = "IMAGE",
        requires = "upgrade_from_image",
        conflicts_with_all = ["upgrade_from_bin", "upgrade_to_bin"],
        value_parser = crate::upgrade::image_reference
    )]
    pub upgrade_to_image: Option<String>,
    /// The run id, the report directory's name (default: the start time, `%Y%m%dT%H%M%SZ`).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// How process, node and network faults reach the cluster: `agent` is the portable path
    /// (the in-cluster fault agent through the Kubernetes API only; localkube's fault socket is
    /// never used), `native` localkube's fault socket, `auto` native where there is one.
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        env = "BLOODRAVEN_FAULT_DRIVER"
    )]
    pub fault_driver: crate::backend::FaultDriverKind,
    /// The group's timing for the whole run: `playground` (fixtures/playground/group.yaml),
    /// `fast` (pollInterval 500ms, failureThreshold 3, lease 1.5s, cooldown 30s), or a YAML
    /// file holding a partial group spec (your own settings). A scenario's own
    /// `install.groupSpec` still wins; its timing bounds (`detection + 1s`) resolve against
    /// the result.
    #[arg(
        long,
        default_value = "playground",
        env = "BLOODRAVEN_PROFILE",
        value_name = "playground|fast|FILE",
        value_parser = crate::scenario::timing::Profile::parse
    )]
    pub profile: crate::scenario::timing::Profile,
    /// Run every scenario beside a fleet: the playground plus N - 1 more groups, one operator
    /// for all (`install.fleet`; `just bench-fleet N`). The report gives the operator's cost
    /// and the fleet checker demands that no other group's authority is ever Invalid.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=60))]
    pub fleet: Option<u32>,
    /// The scenario catalogue directory (default: `scenarios/` of the workspace root).
    #[arg(long, env = "BLOODRAVEN_SCENARIOS")]
    pub scenarios: Option<PathBuf>,
    /// libtest's arguments.
    #[command(flatten)]
    pub test: libtest_mimic::Arguments,
}

impl Cli {
    /// The scenario catalogue: the flag, else `scenarios/` of the
    /// [`workspace_root`](crate::backend::workspace_root).
    pub fn scenarios_dir(&self) -> PathBuf {
        self.scenarios
            .clone()
            .unwrap_or_else(|| crate::backend::workspace_root().join("scenarios"))
    }

    /// Operators A and B by image reference (`--upgrade-from-image`, `--upgrade-to-image`).
    pub fn upgrade_images(&self) -> Option<crate::upgrade::OperatorImages> {
        match (&self.upgrade_from_image, &self.upgrade_to_image) {
            (Some(from), Some(to)) => Some(crate::upgrade::OperatorImages {
                from: from.clone(),
                to: to.clone(),
            }),
            _ => None,
        }
    }

    /// The backend to use: the flag, else the default for this machine.
    pub fn cluster_kind(&self) -> ClusterKind {
        self.cluster
            .unwrap_or_else(|| default_cluster_kind(crate::backends::kind::docker_daemon_answers()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::Parser as _;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("bloodraven-harness").chain(args.iter().copied()))
    }

    #[test]
    fn the_upgrade_images_go_together_on_any_backend_and_not_with_binaries() {
        for cluster in ["localkube", "kind", "kubeconfig"] {
            let cli = parse(&[
                "--cluster",
                cluster,
                "--upgrade-from-image",
                "reg/bloodraven:1.2.3",
                "--upgrade-to-image",
                "reg/bloodraven:1.3.0",
            ])
            .expect("both images");
            assert_eq!(
                cli.upgrade_images(),
                Some(crate::upgrade::OperatorImages {
                    from: "reg/bloodraven:1.2.3".to_owned(),
                    to: "reg/bloodraven:1.3.0".to_owned(),
                })
            );
        }
        for alone in [
            &["--upgrade-from-image", "a:1"][..],
            &["--upgrade-to-image", "b:1"],
        ] {
            let error = parse(alone).expect_err("one image alone");
            assert_eq!(error.kind(), ErrorKind::MissingRequiredArgument, "{error}");
        }
        let mixed = parse(&[
            "--upgrade-from-image",
            "a:1",
            "--upgrade-to-image",
            "b:1",
            "--upgrade-from-bin",
            "/cache/a/bloodraven",
        ])
        .expect_err("images and binaries");
        assert_eq!(mixed.kind(), ErrorKind::ArgumentConflict, "{mixed}");
        let empty = parse(&["--upgrade-from-image", "", "--upgrade-to-image", "b:1"])
            .expect_err("an empty reference");
        assert_eq!(empty.kind(), ErrorKind::ValueValidation);
        assert!(
            empty.to_string().contains("--upgrade-from-image"),
            "{empty}"
        );
        let spaced = parse(&["--upgrade-from-image", "a:1", "--upgrade-to-image", "b :1"])
            .expect_err("a reference with a space");
        assert!(
            spaced.to_string().contains("--upgrade-to-image"),
            "{spaced}"
        );
        assert_eq!(parse(&[]).expect("no flags").upgrade_images(), None);
    }

    #[test]
    fn a_profile_is_playground_fast_or_a_file() {
        use crate::scenario::timing::Profile;
        assert_eq!(parse(&[]).expect("default").profile, Profile::Playground);
        assert_eq!(
            parse(&["--profile", "fast"]).expect("fast").profile,
            Profile::Fast
        );
        let error = parse(&["--profile", "/no/such/profile.yaml"]).expect_err("missing file");
        assert_eq!(error.kind(), ErrorKind::ValueValidation);
        let text = error.to_string();
        assert!(
            text.contains("--profile") && text.contains("/no/such/profile.yaml"),
            "{text}"
        );
    }

    #[test]
    fn a_fleet_has_1_to_60_groups() {
        assert_eq!(parse(&["--fleet", "30"]).expect("30").fleet, Some(30));
        assert_eq!(parse(&[]).expect("none").fleet, None);
        for bad in ["0", "61", "many"] {
            let error = parse(&["--fleet", bad]).expect_err(bad);
            assert_eq!(error.kind(), ErrorKind::ValueValidation, "{bad}: {error}");
        }
    }
}
