//! `just upgrade --from A --to B`: is operator build B safe to roll out over build A?
//!
//! 1. A (a git ref) is checked out with `git worktree add --detach` into
//!    `<cache>/<commit>/src` and its operator binary built there (`cargo build --release -p
//!    bloodraven-operator --bin bloodraven`, sharing this checkout's cargo target directory so
//!    the dependencies are not built twice) and copied to `<cache>/<commit>/bloodraven`. A
//!    commit built once is reused. B is the working tree (default) or a ref built the same way.
//! 2. The harness runs on one reused localkube cluster whose image catalog maps
//!    `bloodraven:upgrade-a` to A's binary and `bloodraven:upgrade-b` and every other
//!    `bloodraven:*` tag to B's (`--upgrade-from-bin`, `--upgrade-to-bin`): scenario 050
//!    installs A, runs the workload and probes, rolls the operator Deployment to
//!    `bloodraven:upgrade-b` (a rolling update: new pods, B's binary) and asserts no failover,
//!    no endpoint flap, the lease kept; then the smoke scenarios install and run on B.
//! 3. [`judge_upgrade`] reads the run's results and answers "is B safe to roll out?" with a
//!    verdict line, the reasons, and the report path.
//!
//! The install manifests (CRDs, RBAC, the Deployment's arguments) are this checkout's for both
//! builds: what changes across the roll is the operator binary, as in an image-only upgrade.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

use crate::history::event::Op;
use crate::history::store::History;
use crate::report::results::{RunResults, ScenarioResult};
use crate::report::summary::{first_line, seconds_or_dash};

/// The scenario that rolls the operator from A to B under load.
pub const UPGRADE_SCENARIO: u16 = 50;

/// The smoke scenarios run on B after the roll: `.ci/run`'s smoke set (a test keeps the two
/// lists equal).
pub const SMOKE_IDS: [u16; 11] = [10, 20, 22, 27, 28, 29, 36, 37, 38, 42, 43];

/// An error of the upgrade tool: what it tried, and why it failed.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {reason}")]
pub struct UpgradeError {
    /// What was being done.
    pub action: String,
    /// Why it failed.
    pub reason: String,
}

fn error(action: impl Into<String>, reason: impl ToString) -> UpgradeError {
    UpgradeError {
        action: action.into(),
        reason: reason.to_string(),
    }
}

/// One operator build: where it came from and its binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorBuild {
    /// How the user named it (`main~3`, `working tree`).
    pub name: String,
    /// The commit, and whether the working tree had uncommitted changes.
    pub commit: String,
    /// The `bloodraven` binary.
    pub binary: PathBuf,
    /// Its SHA-256, hex.
    pub sha256: String,
}

impl OperatorBuild {
    /// `main~3 (0123abc, operator sha256 89ab01234567)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, operator sha256 {})",
            self.name,
            self.commit,
            &self.sha256[..self.sha256.len().min(12)]
        )
    }
}

/// The SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String, UpgradeError> {
    let bytes = std::fs::read(path).map_err(|e| error(format!("read {}", path.display()), e))?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .fold(String::new(), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        }))
}

fn run(command: &mut Command, action: &str) -> Result<String, UpgradeError> {
    let output = command
        .output()
        .map_err(|e| error(action, format!("could not start: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        return Err(error(
            action,
            format!(
                "{} exited with {}: {}",
                command.get_program().to_string_lossy(),
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The commit a ref names, in `repo` (an error naming the ref when it names none).
pub fn resolve_ref(repo: &Path, reference: &str) -> Result<String, UpgradeError> {
    if reference.starts_with('-') {
        return Err(error(
            format!("resolve `{reference}`"),
            "not a git ref (starts with `-`)",
        ));
    }
    run(
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("{reference}^{{commit}}")),
        &format!("resolve `{reference}` to a commit"),
    )
    .map_err(|_| {
        error(
            format!("resolve `{reference}`"),
            "no such commit in this repository (try `git log --oneline`)",
        )
    })
}

/// `abc1234` or `abc1234 + uncommitted changes`: the working tree's commit.
pub fn working_tree_commit(repo: &Path) -> Result<String, UpgradeError> {
    let head = run(
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["rev-parse", "--short=12", "HEAD"]),
        "read the working tree's commit",
    )?;
    let status = run(
        Command::new("git").arg("-C").arg(repo).args([
            "status",
            "--porcelain",
            "--untracked-files=no",
        ]),
        "read the working tree's status",
    )?;
    Ok(if status.is_empty() {
        head
    } else {
        format!("{head} + uncommitted changes")
    })
}

/// Where a ref's build lives: `<cache>/<commit>/`.
pub fn build_dir(cache: &Path, commit: &str) -> PathBuf {
    cache.join(commit)
}

/// Builds (or reuses) the operator binary of `commit`: a detached worktree at
/// `<cache>/<commit>/src`, `cargo build --release -p bloodraven-operator --bin bloodraven`
/// with `target_dir`, the binary copied to `<cache>/<commit>/bloodraven`.
pub fn build_ref(
    repo: &Path,
    cache: &Path,
    name: &str,
    commit: &str,
    target_dir: &Path,
) -> Result<OperatorBuild, UpgradeError> {
    let dir = build_dir(cache, commit);
    let binary = dir.join("bloodraven");
    let short = &commit[..commit.len().min(12)];
    if binary.is_file() {
        eprintln!(
            "bloodraven-upgrade: {name} ({short}) already built: {}",
            binary.display()
        );
    } else {
        std::fs::create_dir_all(&dir).map_err(|e| error(format!("create {}", dir.display()), e))?;
        let src = dir.join("src");
        if !src.join("Cargo.toml").is_file() {
            // A worktree left half-made by an interrupted run is pruned first.
            let _ = Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["worktree", "prune"])
                .output();
            eprintln!(
                "bloodraven-upgrade: checking out {name} ({short}) into {}",
                src.display()
            );
            run(
                Command::new("git")
                    .arg("-C")
                    .arg(repo)
                    .args(["worktree", "add", "--detach", "--force"])
                    .arg(&src)
                    .arg(commit),
                &format!("check out {name} ({short}) with git worktree"),
            )?;
        }
        eprintln!("bloodraven-upgrade: building the operator of {name} ({short}); the first build of a commit takes minutes");
        let status = Command::new("cargo")
            .current_dir(&src)
            .env("CARGO_TARGET_DIR", target_dir)
            .args([
                "build",
                "-q",
                "--release",
                "-p",
                "bloodraven-operator",
                "--bin",
                "bloodraven",
            ])
            .status()
            .map_err(|e| {
                error(
                    format!("build {name}"),
                    format!("could not start cargo: {e}"),
                )
            })?;
        if !status.success() {
            return Err(error(
                format!("build the operator of {name} ({short})"),
                format!("cargo exited with {status} (see its output above)"),
            ));
        }
        let built = target_dir.join("release").join("bloodraven");
        // Copied under another name, then renamed: a half-copied binary is never reused.
        let partial = dir.join("bloodraven.partial");
        std::fs::copy(&built, &partial)
            .map_err(|e| error(format!("copy {}", built.display()), e))?;
        std::fs::rename(&partial, &binary)
            .map_err(|e| error(format!("rename {}", partial.display()), e))?;
    }
    Ok(OperatorBuild {
        name: name.to_owned(),
        commit: short.to_owned(),
        sha256: sha256_file(&binary)?,
        binary,
    })
}

/// Whether a scenario's history shows the group failing over, or the shared Services'
/// endpoints leaving their sites, or the authority's generation moving: what "restarting the
/// operator releases nothing and resets nothing" rules out. Empty when none happened.
pub fn upgrade_disturbances(history: &History) -> Vec<String> {
    let mut found = Vec::new();
    let mut generations: Vec<u64> = Vec::new();
    let mut primary_sets: Vec<String> = Vec::new();
    for event in history
        .events
        .iter()
        .filter(|event| event.kind.is_completion())
    {
        match &event.op {
            Op::Status {
                topology_generation,
                last_failover,
                ..
            } => {
                if let Some(failover) = last_failover {
                    let line = format!(
                        "a {:?} failover {} -> {} started at {}",
                        failover.kind,
                        failover.from.name(),
                        failover.to.name(),
                        failover.started_at
                    )
                    .to_lowercase();
                    if !found.contains(&line) {
                        found.push(line);
                    }
                }
                if *topology_generation > 0 && !generations.contains(topology_generation) {
                    generations.push(*topology_generation);
                }
            }
            Op::Endpoints { service, sites } if service == "primary" => {
                let set = sites
                    .iter()
                    .map(|site| site.name())
                    .collect::<Vec<_>>()
                    .join(",");
                if primary_sets.last() != Some(&set) {
                    primary_sets.push(set);
                }
            }
            _ => {}
        }
    }
    if generations.len() > 1 {
        found.push(format!(
            "the topology generation moved: {}",
            generations
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" -> ")
        ));
    }
    if primary_sets.len() > 1 {
        found.push(format!(
            "the -primary endpoints changed: {}",
            primary_sets
                .iter()
                .map(|set| if set.is_empty() {
                    "(none)".to_owned()
                } else {
                    format!("[{set}]")
                })
                .collect::<Vec<_>>()
                .join(" -> ")
        ));
    }
    found
}

/// Is B safe to roll out?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every check held.
    Safe,
    /// Something failed: do not roll out.
    NotSafe,
    /// The run could not answer (A and B the same binary, or a scenario did not run).
    Inconclusive,
}

/// The verdict, its reasons, one line each, and whether each held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeJudgement {
    /// The answer.
    pub verdict: Verdict,
    /// (held, reason), in the order checked.
    pub reasons: Vec<(bool, String)>,
}

impl UpgradeJudgement {
    /// The verdict line.
    pub fn headline(&self, from: &OperatorBuild, to: &OperatorBuild) -> String {
        match self.verdict {
            Verdict::Safe => format!("VERDICT: SAFE to roll out {} over {}", to.name, from.name),
            Verdict::NotSafe => format!(
                "VERDICT: NOT SAFE to roll out {} over {} ({} of {} checks failed)",
                to.name,
                from.name,
                self.reasons.iter().filter(|(held, _)| !held).count(),
                self.reasons.len()
            ),
            Verdict::Inconclusive => format!(
                "VERDICT: INCONCLUSIVE for {} over {}: this run cannot tell",
                to.name, from.name
            ),
        }
    }

    /// The whole answer: the builds, the verdict line, the reasons and the report.
    pub fn render(&self, from: &OperatorBuild, to: &OperatorBuild, report: &Path) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "A = {}", from.describe());
        let _ = writeln!(out, "B = {}", to.describe());
        let _ = writeln!(out, "{}", self.headline(from, to));
        for (held, reason) in &self.reasons {
            let _ = writeln!(out, "  {} {reason}", if *held { "ok  " } else { "FAIL" });
        }
        let _ = writeln!(out, "report: {}", report.display());
        out
    }
}

fn scenario_line(result: &ScenarioResult) -> String {
    let numbers = format!(
        "write outage {}, {} lost",
        seconds_or_dash(result.write_outage_ms),
        result.rpo.lost
    );
    match &result.failure {
        None => format!("{} passed ({numbers})", result.trial),
        Some(failure) => format!(
            "{} failed: {} ({numbers})",
            result.trial,
            first_line(failure)
        ),
    }
}

/// Judges an upgrade run: `results` of the harness run (scenario 050 and the smoke set),
/// `upgrade_history` 050's history, `smoke` the ids that were asked for on B.
pub fn judge_upgrade(
    from: &OperatorBuild,
    to: &OperatorBuild,
    results: &RunResults,
    upgrade_history: Option<&History>,
    smoke: &[u16],
) -> UpgradeJudgement {
    let mut reasons = Vec::new();
    let mut inconclusive = false;
    if from.sha256 == to.sha256 {
        inconclusive = true;
        reasons.push((
            false,
            "A and B are the same operator binary: this run checks a restart, not an upgrade"
                .to_owned(),
        ));
    }
    match results
        .scenarios
        .iter()
        .find(|scenario| scenario.id == UPGRADE_SCENARIO)
    {
        None => {
            inconclusive = true;
            reasons.push((
                false,
                format!("the rolling upgrade A -> B (scenario {UPGRADE_SCENARIO:03}) did not run"),
            ));
        }
        Some(upgrade) => {
            reasons.push((
                upgrade.passed,
                format!(
                    "rolling upgrade A -> B under load: {}",
                    scenario_line(upgrade)
                ),
            ));
            match upgrade_history {
                Some(history) => {
                    let disturbances = upgrade_disturbances(history);
                    if disturbances.is_empty() {
                        reasons.push((
                            true,
                            "across the roll: no failover, -primary stayed on one site, the topology generation held"
                                .to_owned(),
                        ));
                    }
                    for disturbance in disturbances {
                        reasons.push((false, format!("across the roll: {disturbance}")));
                    }
                }
                None => {
                    inconclusive = true;
                    reasons.push((
                        false,
                        "the upgrade scenario's history is missing".to_owned(),
                    ));
                }
            }
        }
    }
    for id in smoke {
        match results.scenarios.iter().find(|scenario| scenario.id == *id) {
            Some(result) => {
                reasons.push((result.passed, format!("on B: {}", scenario_line(result))))
            }
            None => {
                inconclusive = true;
                reasons.push((false, format!("on B: scenario {id:03} did not run")));
            }
        }
    }
    // A failed scenario or a disturbance is a finding: no. Only missing pieces: cannot tell.
    let finding = results.scenarios.iter().any(|scenario| !scenario.passed)
        || upgrade_history.is_some_and(|history| !upgrade_disturbances(history).is_empty());
    let verdict = if reasons.iter().all(|(held, _)| *held) {
        Verdict::Safe
    } else if finding || !inconclusive {
        Verdict::NotSafe
    } else {
        Verdict::Inconclusive
    };
    UpgradeJudgement { verdict, reasons }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::rpo::RpoSummary;
    use crate::history::event::{Event, EventType, FailoverKind, FailoverRecord};
    use crate::scenario::model::Site;

    fn build(name: &str, sha: &str) -> OperatorBuild {
        OperatorBuild {
            name: name.to_owned(),
            commit: "0123456789ab".to_owned(),
            binary: PathBuf::from("/cache/bloodraven"),
            sha256: sha.repeat(64 / sha.len()),
        }
    }

    fn result(id: u16, failure: Option<&str>) -> ScenarioResult {
        ScenarioResult {
            id,
            trial: format!("s{id:03}_x"),
            title: String::new(),
            seed: String::new(),
            passed: failure.is_none(),
            skipped: None,
            failure: failure.map(str::to_owned),
            duration_ms: 1,
            attempt: 1,
            write_outage_ms: Some(400),
            expectations: Vec::new(),
            measures: Vec::new(),
            verdicts: Vec::new(),
            rpo: RpoSummary::default(),
            timings: Vec::new(),
        }
    }

    fn run(scenarios: Vec<ScenarioResult>) -> RunResults {
        RunResults {
            run_id: "r".to_owned(),
            started_at: jiff::Timestamp::UNIX_EPOCH,
            finished_at: jiff::Timestamp::UNIX_EPOCH,
            backend: "localkube".to_owned(),
            commit: None,
            repeat: 1,
            notes: Vec::new(),
            scenarios,
        }
    }

    fn event(ms: u64, op: Op) -> Event {
        Event {
            process: "probe".to_owned(),
            kind: EventType::Ok,
            op,
            wall: jiff::Timestamp::UNIX_EPOCH,
            mono_ns: ms * 1_000_000,
        }
    }

    fn status(generation: u64, failover: Option<FailoverRecord>) -> Op {
        Op::Status {
            active_site: Some(Site::Iad),
            topology_generation: generation,
            authority: Some("Valid".to_owned()),
            last_failover: failover,
            restore: None,
            poll_interval_ms: None,
            failure_threshold: None,
        }
    }

    fn primary(sites: Vec<Site>) -> Op {
        Op::Endpoints {
            service: "primary".to_owned(),
            sites,
        }
    }

    fn quiet() -> History {
        History::new(vec![
            event(0, status(1, None)),
            event(10, primary(vec![Site::Iad])),
            event(20, status(1, None)),
            event(30, primary(vec![Site::Iad])),
        ])
    }

    #[test]
    fn everything_held_is_safe_with_a_reason_per_check() {
        let judgement = judge_upgrade(
            &build("main~3", "a"),
            &build("working tree", "b"),
            &run(vec![result(20, None), result(50, None)]),
            Some(&quiet()),
            &[20],
        );
        assert_eq!(judgement.verdict, Verdict::Safe, "{judgement:?}");
        assert_eq!(judgement.reasons.len(), 3);
        let text = judgement.render(
            &build("main~3", "a"),
            &build("working tree", "b"),
            Path::new("reports/r/index.html"),
        );
        assert!(
            text.contains("VERDICT: SAFE to roll out working tree over main~3"),
            "{text}"
        );
        assert!(
            text.contains("ok   on B: s020_x passed (write outage 0.4 s, 0 lost)"),
            "{text}"
        );
        assert!(text.ends_with("report: reports/r/index.html\n"), "{text}");
    }

    #[test]
    fn a_failed_smoke_scenario_or_a_flap_is_not_safe_and_says_which() {
        let judgement = judge_upgrade(
            &build("main~3", "a"),
            &build("working tree", "b"),
            &run(vec![
                result(20, Some("expectations: step 4 failed\nmore")),
                result(50, None),
            ]),
            Some(&quiet()),
            &[20],
        );
        assert_eq!(judgement.verdict, Verdict::NotSafe);
        assert!(judgement.reasons.contains(&(
            false,
            "on B: s020_x failed: expectations: step 4 failed (write outage 0.4 s, 0 lost)"
                .to_owned()
        )));
        // The upgrade scenario passed, but its history shows -primary emptied for a moment
        // and a failover: both named.
        let mut history = quiet();
        history.events.push(event(40, primary(Vec::new())));
        history.events.push(event(50, primary(vec![Site::Iad])));
        history.events.push(event(
            60,
            status(
                2,
                Some(FailoverRecord {
                    kind: FailoverKind::Emergency,
                    from: Site::Iad,
                    to: Site::Pdx,
                    started_at: jiff::Timestamp::UNIX_EPOCH,
                    detected_at: None,
                    fenced_at: None,
                    promoted_at: None,
                    completed_at: None,
                    lost_transactions: None,
                    lost_gtid_set: None,
                    exact: false,
                }),
            ),
        ));
        let disturbances = upgrade_disturbances(&history);
        assert_eq!(disturbances.len(), 3, "{disturbances:?}");
        assert!(disturbances[0].starts_with("a emergency failover iad -> pdx"));
        assert_eq!(disturbances[1], "the topology generation moved: 1 -> 2");
        assert_eq!(
            disturbances[2],
            "the -primary endpoints changed: [iad] -> (none) -> [iad]"
        );
        let judgement = judge_upgrade(
            &build("main~3", "a"),
            &build("working tree", "b"),
            &run(vec![result(50, None)]),
            Some(&history),
            &[],
        );
        assert_eq!(judgement.verdict, Verdict::NotSafe);
        assert!(judgement
            .headline(&build("main~3", "a"), &build("working tree", "b"))
            .starts_with(
                "VERDICT: NOT SAFE to roll out working tree over main~3 (3 of 4 checks failed)"
            ));
    }

    #[test]
    fn the_same_binary_or_a_missing_scenario_is_inconclusive() {
        let same = judge_upgrade(
            &build("main", "a"),
            &build("working tree", "a"),
            &run(vec![result(50, None)]),
            Some(&quiet()),
            &[],
        );
        assert_eq!(same.verdict, Verdict::Inconclusive);
        let missing = judge_upgrade(
            &build("main~3", "a"),
            &build("working tree", "b"),
            &run(vec![result(50, None)]),
            Some(&quiet()),
            &[20],
        );
        assert_eq!(missing.verdict, Verdict::Inconclusive);
        assert!(missing
            .reasons
            .contains(&(false, "on B: scenario 020 did not run".to_owned())));
        // A real failure next to a missing piece is still a no.
        let failed = judge_upgrade(
            &build("main~3", "a"),
            &build("working tree", "b"),
            &run(vec![result(50, Some("expectations: step 9 failed"))]),
            Some(&quiet()),
            &[20],
        );
        assert_eq!(failed.verdict, Verdict::NotSafe);
    }

    #[test]
    fn the_smoke_set_is_the_ci_smoke_set() {
        let ci = std::fs::read_to_string(crate::backend::workspace_root().join(".ci/run"))
            .expect(".ci/run");
        // Every scenario CI runs, over its loops (the native one and the portable one), with
        // the quick start's 038 counted once.
        let mut ids: Vec<u16> = ci
            .lines()
            .map(str::trim_start)
            .filter(|line| line.starts_with("for scenario in "))
            .flat_map(|line| {
                line.trim_start_matches("for scenario in ")
                    .trim_end_matches("; do")
                    .split_whitespace()
                    .map(|id| id.parse::<u16>().expect("an id"))
                    .collect::<Vec<_>>()
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids, SMOKE_IDS);
    }

    #[test]
    fn refs_that_name_no_commit_are_refused_by_name() {
        let root = crate::backend::workspace_root();
        let repo = root.as_path();
        let error = resolve_ref(repo, "no-such-ref-xyz").expect_err("no such ref");
        assert!(error.to_string().contains("`no-such-ref-xyz`"), "{error}");
        assert!(resolve_ref(repo, "--help").is_err());
        let head = resolve_ref(repo, "HEAD").expect("HEAD");
        assert_eq!(head.len(), 40);
    }
}
