//! `bloodraven-upgrade`'s flags (`just upgrade`), and the harness command line they make.
//! Here rather than in the binary so that tests (and the README command check) parse them
//! with the real parser.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{image_reference, OperatorImages, UpgradeError, SMOKE_IDS, UPGRADE_SCENARIO};
use crate::backend::{ClusterKind, FaultDriverKind};

/// `bloodraven-upgrade --from A [--to B]` or `bloodraven-upgrade --from-image A --to-image B`.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "bloodraven-upgrade",
    about = "Is operator B safe to roll out over operator A? Rolls A -> B under load (scenario 050), then runs the smoke scenarios on B. A and B are builds of git refs (--from/--to, on a localkube cluster the harness creates) or images by reference (--from-image/--to-image, on any cluster).",
    disable_version_flag = true
)]
#[command(group(
    clap::ArgGroup::new("operator-a")
        .required(true)
        .args(["from", "from_image"])
))]
pub struct UpgradeCli {
    /// Build A: a git ref of this repository (`main~3`, a tag, a commit), built here and run on
    /// a localkube cluster the harness creates.
    #[arg(long, value_name = "REF", conflicts_with_all = ["from_image", "to_image"])]
    pub from: Option<String>,
    /// Build B: a git ref, or `worktree` for this working tree (uncommitted changes included;
    /// the default).
    #[arg(
        long,
        value_name = "REF",
        requires = "from",
        conflicts_with_all = ["from_image", "to_image"]
    )]
    pub to: Option<String>,
    /// Operator A as an image reference (`registry/bloodraven:1.2.3`): nothing is built, and
    /// the run goes to the cluster `--cluster` (or `BLOODRAVEN_CLUSTER`) names. Needs
    /// `--to-image`.
    #[arg(
        long,
        value_name = "IMAGE",
        requires = "to_image",
        value_parser = image_reference
    )]
    pub from_image: Option<String>,
    /// Operator B as an image reference; the same as A makes the roll a restart under load.
    #[arg(
        long,
        value_name = "IMAGE",
        requires = "from_image",
        conflicts_with_all = ["from", "to"],
        value_parser = image_reference
    )]
    pub to_image: Option<String>,
    /// The cluster, as `just chaos` takes it (default: the harness's, kind with Docker,
    /// localkube without). `--from`/`--to` builds run on localkube only.
    #[arg(long, value_enum, env = "BLOODRAVEN_CLUSTER")]
    pub cluster: Option<ClusterKind>,
    /// How faults reach the cluster, passed to the harness (`agent`: the portable path).
    #[arg(long, value_enum, env = "BLOODRAVEN_FAULT_DRIVER")]
    pub fault_driver: Option<FaultDriverKind>,
    /// The scenarios run on B after the roll (default: CI's smoke set).
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    pub smoke: Vec<u16>,
    /// Where builds of refs are kept and reused (`<cache>/<commit>/`).
    #[arg(long, value_name = "DIR", env = "BLOODRAVEN_UPGRADE_CACHE")]
    pub cache: Option<PathBuf>,
    /// Only build (or find) A and B and print them; run nothing (builds before a live run
    /// takes the machine's live lock). Builds only: images are not built.
    #[arg(long, conflicts_with = "from_image")]
    pub build_only: bool,
    /// Where the run's report is written.
    #[arg(long, default_value = "reports", env = "BLOODRAVEN_REPORT_DIR")]
    pub report_dir: PathBuf,
}

/// What A and B are, as the flags name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operators {
    /// Git refs to build: `to` is `worktree` for the working tree.
    Refs {
        /// A's ref.
        from: String,
        /// B's ref, or `worktree`.
        to: String,
    },
    /// Images by reference.
    Images(OperatorImages),
}

/// How the harness gets A and B.
#[derive(Debug, Clone, Copy)]
pub enum HarnessOperators<'a> {
    /// The binaries of builds A and B (`None`: this checkout's own, which the harness runs by
    /// default), for localkube's image catalog.
    Binaries {
        /// A's binary.
        from: &'a Path,
        /// B's binary, unless it is this checkout's.
        to: Option<&'a Path>,
    },
    /// The images by reference.
    Images(&'a OperatorImages),
}

impl UpgradeCli {
    /// A and B, and whether the cluster asked for can run them: builds of refs only on a
    /// localkube cluster the harness creates.
    pub fn operators(&self) -> Result<Operators, UpgradeError> {
        if let (Some(from), Some(to)) = (&self.from_image, &self.to_image) {
            return Ok(Operators::Images(OperatorImages {
                from: from.clone(),
                to: to.clone(),
            }));
        }
        let from = self.from.clone().ok_or_else(|| UpgradeError {
            action: "read the flags".to_owned(),
            reason: "give --from REF or --from-image IMAGE with --to-image IMAGE".to_owned(),
        })?;
        if let Some(kind) = self.cluster.filter(|kind| *kind != ClusterKind::Localkube) {
            return Err(UpgradeError {
                action: format!("run builds of git refs on --cluster {}", kind.name()),
                reason: "--from/--to build operator binaries, which only a localkube cluster the harness creates can run (its image catalog maps them); on kind or your own cluster name the operators by image: --from-image IMAGE --to-image IMAGE".to_owned(),
            });
        }
        Ok(Operators::Refs {
            from,
            to: self.to.clone().unwrap_or_else(|| "worktree".to_owned()),
        })
    }

    /// The smoke scenarios (`--smoke`, else [`SMOKE_IDS`]); 050 is refused there.
    pub fn smoke_ids(&self) -> Result<Vec<u16>, UpgradeError> {
        let smoke = if self.smoke.is_empty() {
            SMOKE_IDS.to_vec()
        } else {
            self.smoke.clone()
        };
        if smoke.contains(&UPGRADE_SCENARIO) {
            return Err(UpgradeError {
                action: "read --smoke".to_owned(),
                reason: format!(
                    "{UPGRADE_SCENARIO:03} is the upgrade itself, not a smoke scenario"
                ),
            });
        }
        Ok(smoke)
    }

    /// The harness's arguments: 050 then `smoke` on one reused cluster, the report where
    /// asked, and A and B. Builds run on localkube (`--cluster localkube`); images on the
    /// cluster the user chose, passed on as given (none: the harness's own choice, from
    /// `BLOODRAVEN_CLUSTER` or its default, as `just chaos`).
    pub fn harness_args(
        &self,
        smoke: &[u16],
        run_id: &str,
        operators: HarnessOperators<'_>,
    ) -> Vec<OsString> {
        let ids: Vec<String> = std::iter::once(UPGRADE_SCENARIO)
            .chain(smoke.iter().copied())
            .map(|id| id.to_string())
            .collect();
        let mut args: Vec<OsString> = Vec::new();
        let cluster = match operators {
            HarnessOperators::Binaries { .. } => Some(ClusterKind::Localkube),
            HarnessOperators::Images(_) => self.cluster,
        };
        if let Some(cluster) = cluster {
            args.extend(["--cluster".into(), cluster.name().into()]);
        }
        if let Some(driver) = self.fault_driver {
            let name = match driver {
                FaultDriverKind::Auto => "auto",
                FaultDriverKind::Native => "native",
                FaultDriverKind::Agent => "agent",
            };
            args.extend(["--fault-driver".into(), name.into()]);
        }
        args.extend([
            "--reuse".into(),
            "--ids".into(),
            ids.join(",").into(),
            "--report-dir".into(),
            self.report_dir.clone().into(),
            "--run-id".into(),
            run_id.into(),
        ]);
        match operators {
            HarnessOperators::Binaries { from, to } => {
                args.extend(["--upgrade-from-bin".into(), from.into()]);
                if let Some(to) = to {
                    args.extend(["--upgrade-to-bin".into(), to.into()]);
                }
            }
            HarnessOperators::Images(images) => {
                args.extend([
                    "--upgrade-from-image".into(),
                    images.from.clone().into(),
                    "--upgrade-to-image".into(),
                    images.to.clone().into(),
                ]);
            }
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::Parser as _;

    fn parse(args: &[&str]) -> Result<UpgradeCli, clap::Error> {
        UpgradeCli::try_parse_from(
            std::iter::once("bloodraven-upgrade").chain(args.iter().copied()),
        )
    }

    #[test]
    fn images_and_refs_do_not_mix_and_both_images_are_required() {
        let images = parse(&[
            "--from-image",
            "reg/bloodraven:1.2.3",
            "--to-image",
            "reg/bloodraven:1.3.0",
        ])
        .expect("both images");
        assert_eq!(
            images.operators().expect("images run anywhere"),
            Operators::Images(OperatorImages {
                from: "reg/bloodraven:1.2.3".to_owned(),
                to: "reg/bloodraven:1.3.0".to_owned(),
            })
        );
        for mixed in [
            &[
                "--from",
                "main~3",
                "--from-image",
                "a:1",
                "--to-image",
                "b:1",
            ][..],
            &["--from", "main~3", "--to-image", "b:1"],
            &["--from-image", "a:1", "--to-image", "b:1", "--to", "main"],
            // A conflict lifts clap's requirements: `--to` must conflict by itself.
            &["--from-image", "a:1", "--to", "main"],
        ] {
            let error = parse(mixed).expect_err("refs and images mixed");
            assert_eq!(
                error.kind(),
                ErrorKind::ArgumentConflict,
                "{mixed:?}: {error}"
            );
        }
        for alone in [&["--from-image", "a:1"][..], &["--to-image", "b:1"]] {
            let error = parse(alone).expect_err("one image alone");
            assert_eq!(
                error.kind(),
                ErrorKind::MissingRequiredArgument,
                "{alone:?}: {error}"
            );
        }
        let neither = parse(&[]).expect_err("neither");
        assert_eq!(neither.kind(), ErrorKind::MissingRequiredArgument);
        assert!(neither.to_string().contains("--from-image"), "{neither}");
        let built = parse(&["--from-image", "a:1", "--to-image", "b:1", "--build-only"])
            .expect_err("nothing to build");
        assert_eq!(built.kind(), ErrorKind::ArgumentConflict);
        // Refs as before: B defaults to the working tree.
        assert_eq!(
            parse(&["--from", "main~3", "--cluster", "localkube"])
                .expect("a ref")
                .operators()
                .expect("on localkube"),
            Operators::Refs {
                from: "main~3".to_owned(),
                to: "worktree".to_owned()
            }
        );
    }

    #[test]
    fn an_empty_or_spaced_image_is_refused_naming_the_flag() {
        for (flag, value) in [
            ("--from-image", ""),
            ("--from-image", "reg/bloodraven:1.2.3 "),
            ("--to-image", "reg/blood raven:1"),
        ] {
            let args = if flag == "--from-image" {
                vec![flag, value, "--to-image", "b:1"]
            } else {
                vec!["--from-image", "a:1", flag, value]
            };
            let error = parse(&args).expect_err("not an image reference");
            assert_eq!(error.kind(), ErrorKind::ValueValidation, "{error}");
            assert!(error.to_string().contains(flag), "{error}");
        }
    }

    #[test]
    fn refs_are_refused_on_a_cluster_other_than_localkube() {
        let cli = parse(&["--from", "main~3", "--cluster", "kubeconfig"]).expect("parses");
        let error = cli.operators().expect_err("a build cannot run there");
        assert!(error.to_string().contains("--from-image"), "{error}");
    }

    #[test]
    fn the_harness_gets_the_images_and_the_cluster_as_given() {
        let os = |args: &[&str]| args.iter().map(OsString::from).collect::<Vec<_>>();
        let images = OperatorImages {
            from: "reg/bloodraven:1.2.3".to_owned(),
            to: "reg/bloodraven:1.3.0".to_owned(),
        };
        let cli = parse(&[
            "--from-image",
            "reg/bloodraven:1.2.3",
            "--to-image",
            "reg/bloodraven:1.3.0",
            "--cluster",
            "kubeconfig",
            "--fault-driver",
            "agent",
            "--smoke",
            "20,22",
            "--report-dir",
            "reports",
        ])
        .expect("parses");
        assert_eq!(
            cli.harness_args(&[20, 22], "r1", HarnessOperators::Images(&images)),
            os(&[
                "--cluster",
                "kubeconfig",
                "--fault-driver",
                "agent",
                "--reuse",
                "--ids",
                "50,20,22",
                "--report-dir",
                "reports",
                "--run-id",
                "r1",
                "--upgrade-from-image",
                "reg/bloodraven:1.2.3",
                "--upgrade-to-image",
                "reg/bloodraven:1.3.0",
            ])
        );
        // Builds: always the localkube cluster the harness creates, the binaries mapped.
        let cli = parse(&["--from", "main~3", "--to", "main"]).expect("parses");
        let args = cli.harness_args(
            &[20],
            "r2",
            HarnessOperators::Binaries {
                from: Path::new("/cache/a/bloodraven"),
                to: Some(Path::new("/cache/b/bloodraven")),
            },
        );
        assert_eq!(&args[..2], &os(&["--cluster", "localkube"])[..]);
        assert!(args.ends_with(&os(&[
            "--upgrade-from-bin",
            "/cache/a/bloodraven",
            "--upgrade-to-bin",
            "/cache/b/bloodraven",
        ])));
        // What the harness makes of them: its own parser takes them.
        let mut harness = vec![OsString::from("bloodraven-harness")];
        harness.extend(cli.harness_args(&[20], "r3", HarnessOperators::Images(&images)));
        let parsed =
            crate::runner::cli::Cli::try_parse_from(harness).expect("the harness parses them");
        assert_eq!(parsed.upgrade_images(), Some(images));
    }
}
