//! `bloodraven-upgrade --from A [--to B]` or `--from-image A --to-image B` (`just upgrade`): is
//! operator B safe to roll out over operator A? See [`bloodraven_harness::upgrade`] for what it
//! does and [`bloodraven_harness::upgrade::cli`] for its flags. Exit status 0: safe; 1: not
//! safe; 2: inconclusive or the run could not be made.

use std::path::Path;
use std::process::{Command, ExitCode};

use bloodraven_harness::history::store::History;
use bloodraven_harness::report::results::RunResults;
use bloodraven_harness::upgrade::cli::{HarnessOperators, Operators, UpgradeCli};
use bloodraven_harness::upgrade::{
    build_ref, judge_upgrade, resolve_ref, sha256_file, working_tree_commit, Operator,
    OperatorBuild, UpgradeError, Verdict, UPGRADE_SCENARIO,
};

fn default_cache() -> std::path::PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::PathBuf::from(home).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir)
        .join("bloodraven")
        .join("upgrade")
}

fn main() -> ExitCode {
    use clap::Parser as _;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = UpgradeCli::parse();
    bloodraven_harness::progress::enable(
        "bloodraven-upgrade",
        bloodraven_harness::progress::quiet_from_env(),
    );
    match upgrade(&cli) {
        Ok(Verdict::Safe) => ExitCode::SUCCESS,
        Ok(Verdict::NotSafe) => ExitCode::from(1),
        Ok(Verdict::Inconclusive) => ExitCode::from(2),
        Err(error) => {
            eprintln!("bloodraven-upgrade: failed to {error}");
            println!("VERDICT: INCONCLUSIVE: the upgrade run could not be made ({error})");
            ExitCode::from(2)
        }
    }
}

fn fail(action: impl Into<String>, reason: impl ToString) -> UpgradeError {
    UpgradeError {
        action: action.into(),
        reason: reason.to_string(),
    }
}

/// What [`build_refs`] made.
enum Builds {
    /// A, B, and whether B is a ref (not the working tree): run them.
    Run(OperatorBuild, OperatorBuild, bool),
    /// `--build-only` printed them: the exit status (inconclusive when they are the same).
    Only(Verdict),
}

/// Builds (or finds) A and B of git refs, then relinks this checkout's binaries.
fn build_refs(
    cli: &UpgradeCli,
    repo: &Path,
    bin_dir: &Path,
    from_ref: &str,
    to_ref: &str,
) -> Result<Builds, UpgradeError> {
    // `<target>/release/bloodraven-upgrade`: A builds in the same target directory, so the
    // dependencies it shares with this checkout are not built again.
    let target_dir = bin_dir
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| fail("find the cargo target directory", bin_dir.display()))?;
    let cache = cli.cache.clone().unwrap_or_else(default_cache);
    let from_commit = resolve_ref(repo, from_ref)?;
    let to_commit = if to_ref == "worktree" {
        None
    } else {
        Some(resolve_ref(repo, to_ref)?)
    };
    let from = build_ref(repo, &cache, from_ref, &from_commit, &target_dir)?;
    let to_build = match &to_commit {
        Some(commit) => Some(build_ref(repo, &cache, to_ref, commit, &target_dir)?),
        None => None,
    };
    // Building a ref replaced `<target>/release/bloodraven` with its binary: build this
    // checkout again (nothing recompiles; cargo links its own binaries back).
    eprintln!("bloodraven-upgrade: relinking this checkout's binaries");
    let status = Command::new("cargo")
        .current_dir(repo)
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["build", "-q", "--release", "--workspace", "--bins"])
        .status()
        .map_err(|e| fail("build this checkout", format!("could not start cargo: {e}")))?;
    if !status.success() {
        return Err(fail(
            "build this checkout",
            format!("cargo exited with {status}"),
        ));
    }
    let own = bin_dir.join("bloodraven");
    let to_is_ref = to_build.is_some();
    let to = match to_build {
        Some(build) => build,
        None => OperatorBuild {
            name: "the working tree".to_owned(),
            commit: working_tree_commit(repo)?,
            sha256: sha256_file(&own)?,
            binary: own.clone(),
        },
    };
    eprintln!("bloodraven-upgrade: A = {}", from.describe());
    eprintln!("bloodraven-upgrade: B = {}", to.describe());
    if cli.build_only {
        println!("A = {}\nB = {}", from.describe(), to.describe());
        return Ok(Builds::Only(if from.sha256 == to.sha256 {
            Verdict::Inconclusive
        } else {
            Verdict::Safe
        }));
    }
    Ok(Builds::Run(from, to, to_is_ref))
}

fn upgrade(cli: &UpgradeCli) -> Result<Verdict, UpgradeError> {
    let repo = bloodraven_harness::backend::workspace_root();
    let exe = std::env::current_exe().map_err(|e| fail("find this program", e))?;
    let bin_dir = exe
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| fail("find the build directory", exe.display()))?;
    let smoke = cli.smoke_ids()?;
    let run_id = format!(
        "{}-upgrade",
        jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ")
    );
    let (from, to, harness_args) = match plan(cli, &repo, &bin_dir, &smoke, &run_id)? {
        Planned::Run { from, to, args } => (from, to, args),
        Planned::Decided(verdict) => return Ok(verdict),
    };
    if let Some(same) = from.same_as(&to) {
        eprintln!("bloodraven-upgrade: {same}");
    }
    run_harness(&bin_dir, &repo, &harness_args, &smoke)?;
    let report_root = if cli.report_dir.is_absolute() {
        cli.report_dir.clone()
    } else {
        repo.join(&cli.report_dir)
    };
    judge_run(&report_root.join(&run_id), &from, &to, &smoke)
}

/// What the run compares, or a verdict reached without running (the builds alone decide).
/// One value per program run: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Planned {
    Run {
        from: Operator,
        to: Operator,
        args: Vec<std::ffi::OsString>,
    },
    Decided(Verdict),
}

/// Operators A and B (built from refs, or by image) and the harness's arguments.
fn plan(
    cli: &UpgradeCli,
    repo: &Path,
    bin_dir: &Path,
    smoke: &[u16],
    run_id: &str,
) -> Result<Planned, UpgradeError> {
    match &cli.operators()? {
        Operators::Refs {
            from: from_ref,
            to: to_ref,
        } => {
            let (from, to, to_is_ref) = match build_refs(cli, repo, bin_dir, from_ref, to_ref)? {
                Builds::Run(from, to, to_is_ref) => (from, to, to_is_ref),
                Builds::Only(verdict) => return Ok(Planned::Decided(verdict)),
            };
            let args = cli.harness_args(
                smoke,
                run_id,
                HarnessOperators::Binaries {
                    from: &from.binary,
                    to: to_is_ref.then_some(to.binary.as_path()),
                },
            );
            Ok(Planned::Run {
                from: Operator::Build(from),
                to: Operator::Build(to),
                args,
            })
        }
        Operators::Images(images) => {
            eprintln!("bloodraven-upgrade: A = image {}", images.from);
            eprintln!("bloodraven-upgrade: B = image {}", images.to);
            eprintln!(
                "bloodraven-upgrade: nothing to build; the cluster: {}",
                cli.cluster.map_or_else(
                    || "the harness's default (no --cluster, BLOODRAVEN_CLUSTER unset)".to_owned(),
                    |kind| format!("--cluster {}", kind.name())
                )
            );
            Ok(Planned::Run {
                from: Operator::Image(images.from.clone()),
                to: Operator::Image(images.to.clone()),
                args: cli.harness_args(smoke, run_id, HarnessOperators::Images(images)),
            })
        }
    }
}

/// Runs the harness: the roll A -> B under load, then the smoke set on B. Its exit status
/// only says whether every trial passed; the verdict reads the results.
fn run_harness(
    bin_dir: &Path,
    repo: &Path,
    args: &[std::ffi::OsString],
    smoke: &[u16],
) -> Result<(), UpgradeError> {
    let mut harness = Command::new(bin_dir.join("bloodraven-harness"));
    harness.current_dir(repo).args(args);
    eprintln!(
        "bloodraven-upgrade: rolling A -> B under load (s{UPGRADE_SCENARIO:03}), then on B: {}",
        smoke
            .iter()
            .map(|id| format!("s{id:03}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = harness
        .status()
        .map_err(|e| fail("run bloodraven-harness", e))?;
    Ok(())
}

/// Reads the run's results and histories, judges the upgrade, prints the answer and puts it
/// into the run's report (upgrade.txt, results.json's notes, a box atop index.html).
fn judge_run(
    run_dir: &Path,
    from: &Operator,
    to: &Operator,
    smoke: &[u16],
) -> Result<Verdict, UpgradeError> {
    let results_path = run_dir.join("results.json");
    let text = std::fs::read_to_string(&results_path)
        .map_err(|e| fail(format!("read {}", results_path.display()), e))?;
    let mut results: RunResults = serde_json::from_str(&text)
        .map_err(|e| fail(format!("parse {}", results_path.display()), e))?;
    let histories: Vec<History> = results
        .scenarios
        .iter()
        .map(|scenario| {
            History::read(&run_dir.join(scenario.dir_name()).join("history.jsonl"))
                .unwrap_or_default()
        })
        .collect();
    let upgrade_history = results
        .scenarios
        .iter()
        .position(|scenario| scenario.id == UPGRADE_SCENARIO)
        .and_then(|index| histories.get(index))
        .filter(|history| !history.events.is_empty());
    let judgement = judge_upgrade(from, to, &results, upgrade_history, smoke);
    let index = run_dir.join("index.html");
    let answer = judgement.render(from, to, &index);
    print!("\n{answer}");
    let _ = std::fs::write(run_dir.join("upgrade.txt"), &answer);
    results.notes = answer.lines().map(str::to_owned).collect();
    if let Ok(json) = serde_json::to_string_pretty(&results) {
        let _ = std::fs::write(&results_path, json);
    }
    let _ = std::fs::write(
        &index,
        bloodraven_harness::report::html::render_index(&results, &histories),
    );
    Ok(judgement.verdict)
}
