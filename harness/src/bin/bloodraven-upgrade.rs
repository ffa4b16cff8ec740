//! `bloodraven-upgrade --from A [--to B]` (`just upgrade`): is operator build B safe to roll
//! out over build A? See [`bloodraven_harness::upgrade`] for what it does. Exit status 0:
//! safe; 1: not safe; 2: inconclusive or the run could not be made.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use bloodraven_harness::history::store::History;
use bloodraven_harness::report::results::RunResults;
use bloodraven_harness::upgrade::{
    build_ref, judge_upgrade, resolve_ref, sha256_file, working_tree_commit, OperatorBuild,
    UpgradeError, Verdict, SMOKE_IDS, UPGRADE_SCENARIO,
};

/// `bloodraven-upgrade --from A [--to B]`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "bloodraven-upgrade",
    about = "Is operator build B safe to roll out over build A? Rolls A -> B under load (scenario 050), then runs the smoke scenarios on B.",
    disable_version_flag = true
)]
struct Cli {
    /// Build A: a git ref of this repository (`main~3`, a tag, a commit).
    #[arg(long, value_name = "REF")]
    from: String,
    /// Build B: a git ref, or `worktree` for this working tree (uncommitted changes included).
    #[arg(long, value_name = "REF", default_value = "worktree")]
    to: String,
    /// The scenarios run on B after the roll (default: CI's smoke set).
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    smoke: Vec<u16>,
    /// Where builds of refs are kept and reused (`<cache>/<commit>/`).
    #[arg(long, value_name = "DIR", env = "BLOODRAVEN_UPGRADE_CACHE")]
    cache: Option<PathBuf>,
    /// Only build (or find) A and B and print them; run nothing (builds before a live run
    /// takes the machine's live lock).
    #[arg(long)]
    build_only: bool,
    /// Where the run's report is written.
    #[arg(long, default_value = "reports", env = "BLOODRAVEN_REPORT_DIR")]
    report_dir: PathBuf,
}

fn default_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
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
    let cli = Cli::parse();
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

fn upgrade(cli: &Cli) -> Result<Verdict, UpgradeError> {
    let repo = bloodraven_harness::backend::workspace_root();
    let exe = std::env::current_exe().map_err(|e| fail("find this program", e))?;
    let bin_dir = exe
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| fail("find the build directory", exe.display()))?;
    // `<target>/release/bloodraven-upgrade`: A builds in the same target directory, so the
    // dependencies it shares with this checkout are not built again.
    let target_dir = bin_dir
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| fail("find the cargo target directory", bin_dir.display()))?;
    let cache = cli.cache.clone().unwrap_or_else(default_cache);
    let smoke: Vec<u16> = if cli.smoke.is_empty() {
        SMOKE_IDS.to_vec()
    } else {
        cli.smoke.clone()
    };
    if smoke.contains(&UPGRADE_SCENARIO) {
        return Err(fail(
            "read --smoke",
            format!("{UPGRADE_SCENARIO:03} is the upgrade itself, not a smoke scenario"),
        ));
    }

    let from_commit = resolve_ref(&repo, &cli.from)?;
    let to_commit = if cli.to == "worktree" {
        None
    } else {
        Some(resolve_ref(&repo, &cli.to)?)
    };
    let from = build_ref(&repo, &cache, &cli.from, &from_commit, &target_dir)?;
    let to_ref = match &to_commit {
        Some(commit) => Some(build_ref(&repo, &cache, &cli.to, commit, &target_dir)?),
        None => None,
    };
    // Building a ref replaced `<target>/release/bloodraven` with its binary: build this
    // checkout again (nothing recompiles; cargo links its own binaries back).
    eprintln!("bloodraven-upgrade: relinking this checkout's binaries");
    let status = Command::new("cargo")
        .current_dir(&repo)
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
    let to = match to_ref {
        Some(build) => build,
        None => OperatorBuild {
            name: "the working tree".to_owned(),
            commit: working_tree_commit(&repo)?,
            sha256: sha256_file(&own)?,
            binary: own.clone(),
        },
    };
    eprintln!("bloodraven-upgrade: A = {}", from.describe());
    eprintln!("bloodraven-upgrade: B = {}", to.describe());
    if cli.build_only {
        println!("A = {}\nB = {}", from.describe(), to.describe());
        return Ok(if from.sha256 == to.sha256 {
            Verdict::Inconclusive
        } else {
            Verdict::Safe
        });
    }

    let run_id = format!(
        "{}-upgrade",
        jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ")
    );
    let ids: Vec<String> = std::iter::once(UPGRADE_SCENARIO)
        .chain(smoke.iter().copied())
        .map(|id| id.to_string())
        .collect();
    let mut harness = Command::new(bin_dir.join("bloodraven-harness"));
    harness
        .current_dir(&repo)
        .arg("--cluster")
        .arg("localkube")
        .arg("--reuse")
        .arg("--ids")
        .arg(ids.join(","))
        .arg("--report-dir")
        .arg(&cli.report_dir)
        .arg("--run-id")
        .arg(&run_id)
        .arg("--upgrade-from-bin")
        .arg(&from.binary);
    if to_commit.is_some() {
        harness.arg("--upgrade-to-bin").arg(&to.binary);
    }
    eprintln!(
        "bloodraven-upgrade: rolling A -> B under load (s{UPGRADE_SCENARIO:03}), then on B: {}",
        smoke
            .iter()
            .map(|id| format!("s{id:03}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // Its exit status only says whether every trial passed; the verdict reads the results.
    let _ = harness
        .status()
        .map_err(|e| fail("run bloodraven-harness", e))?;

    let report_root = if cli.report_dir.is_absolute() {
        cli.report_dir.clone()
    } else {
        repo.join(&cli.report_dir)
    };
    let run_dir = report_root.join(&run_id);
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
    let judgement = judge_upgrade(&from, &to, &results, upgrade_history, &smoke);
    let index = run_dir.join("index.html");
    let answer = judgement.render(&from, &to, &index);
    print!("\n{answer}");
    // The answer goes into the run's report too: upgrade.txt, and a box atop index.html.
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
