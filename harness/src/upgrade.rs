//! `just upgrade`: is operator B safe to roll out over operator A? A and B are named one of two
//! ways.
//!
//! **Builds of git refs** (`--from REF [--to REF]`), on a localkube cluster the harness creates:
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
//!
//! **Images by reference** (`--from-image IMAGE --to-image IMAGE`), on any cluster: nothing is
//! built. The harness runs on the cluster the user chose, as `just chaos` does (`--cluster`,
//! else `BLOODRAVEN_CLUSTER`, else its default), with `--upgrade-from-image` and
//! `--upgrade-to-image`: [`OperatorImages::apply`], the one place the references go in,
//! replaces scenario 050's `install.operatorImage: bloodraven:upgrade-a` with A and its
//! `upgrade-operator` step's `bloodraven:upgrade-b` with B, and every other scenario of the run
//! (the smoke set) installs B. Against your own cluster (a staging cluster, say):
//!
//! ```sh
//! BLOODRAVEN_CLUSTER=kubeconfig KUBECONFIG=~/.kube/staging just upgrade \
//!   --from-image registry/bloodraven:1.2.3 --to-image registry/bloodraven:1.3.0
//! ```
//!
//! It needs what any run through `$KUBECONFIG` needs (README.md, "Running against your own
//! cluster": nodes labelled with the sites' zones and one without a zone, the fault agent's
//! privileged DaemonSet, the playground's images), and the cluster's nodes must be able to
//! pull both references (the operator's `imagePullPolicy` is `IfNotPresent`: a tag already on a
//! node is not pulled again, so give each build its own tag or a digest). On localkube no image
//! is pulled: its catalog runs this checkout's operator for every `bloodraven:<tag>`, so there A
//! and B are the same binary under two names.
//!
//! In both ways the roll is a rolling update of the operator Deployment. When A and B are the
//! same reference the pod template would not change and no pod would be replaced, so the roll
//! also stamps the annotation `kubectl rollout restart` stamps ([`operator_roll_patch`]): 050
//! still replaces every operator pod under load and judges it, and the verdict says it checked a
//! restart, not an upgrade.
//!
//! Then [`judge_upgrade`] reads the run's results and answers "is B safe to roll out?" with a
//! verdict line naming the builds (commits) or the images, the backend that ran it, the reasons,
//! and the report path.
//!
//! The install manifests (CRDs, RBAC, the Deployment's arguments) are this checkout's for both
//! A and B: what changes across the roll is the operator image (its binary), as in an
//! image-only upgrade.

pub mod cli;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

use crate::history::event::Op;
use crate::history::store::History;
use crate::playground::localkube::{UPGRADE_FROM_IMAGE, UPGRADE_TO_IMAGE};
use crate::report::results::{RunResults, ScenarioResult};
use crate::report::summary::{first_line, seconds_or_dash};
use crate::scenario::model::{Action, Scenario, Step};

/// The scenario that rolls the operator from A to B under load.
pub const UPGRADE_SCENARIO: u16 = 50;

/// The smoke scenarios run on B after the roll: `.ci/run`'s smoke set (a test keeps the two
/// lists equal).
pub const SMOKE_IDS: [u16; 16] = [
    10, 11, 20, 22, 27, 28, 29, 36, 37, 38, 42, 43, 44, 55, 56, 57,
];

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

/// Operator A or B as a run names it: a build of a git ref, or an image by reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// A build (`--from`/`--to`): its binary runs under localkube's upgrade tags.
    Build(OperatorBuild),
    /// An image by reference (`--from-image`/`--to-image`), as the cluster pulls it.
    Image(String),
}

impl Operator {
    /// How the verdict names it: the ref (`main~3`, `the working tree`) or the image reference.
    pub fn name(&self) -> &str {
        match self {
            Operator::Build(build) => &build.name,
            Operator::Image(reference) => reference,
        }
    }

    /// `main~3 (0123abc, operator sha256 89ab01234567)` or `image registry/bloodraven:1.2.3`.
    pub fn describe(&self) -> String {
        match self {
            Operator::Build(build) => build.describe(),
            Operator::Image(reference) => format!("image {reference}"),
        }
    }

    /// Why A (`self`) and B are the same operator, when they are: then the roll checks a
    /// restart, not an upgrade.
    pub fn same_as(&self, other: &Operator) -> Option<&'static str> {
        match (self, other) {
            (Operator::Build(a), Operator::Build(b)) if a.sha256 == b.sha256 => Some(
                "A and B are the same operator binary: this run checks a restart, not an upgrade",
            ),
            (Operator::Image(a), Operator::Image(b)) if a == b => {
                Some("A and B are the same image: this checks a restart under load, not an upgrade")
            }
            _ => None,
        }
    }
}

/// Operators A and B as images by reference (`--upgrade-from-image`, `--upgrade-to-image`):
/// what scenario 050 and the smoke set install instead of the upgrade tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorImages {
    /// A: scenario 050 installs it.
    pub from: String,
    /// B: 050 rolls to it, and every other scenario installs it.
    pub to: String,
}

impl OperatorImages {
    /// Puts the references into a scenario as read, the one place they go in: an install of
    /// [`UPGRADE_FROM_IMAGE`] (050's) installs A, an install of [`UPGRADE_TO_IMAGE`] or of no
    /// image in particular (every other scenario's: this checkout's own image otherwise)
    /// installs B; an `upgrade-operator` step to either tag rolls to A or B. An image a
    /// scenario names otherwise is its own and is kept.
    pub fn apply(&self, scenario: &mut Scenario) {
        let resolve = |image: &str| match image {
            UPGRADE_FROM_IMAGE => Some(self.from.clone()),
            UPGRADE_TO_IMAGE => Some(self.to.clone()),
            _ => None,
        };
        let install = &mut scenario.install.operator_image;
        match install.as_deref() {
            None => *install = Some(self.to.clone()),
            Some(image) => {
                if let Some(reference) = resolve(image) {
                    *install = Some(reference);
                }
            }
        }
        for step in &mut scenario.steps {
            if let Step::Do(Action::UpgradeOperator { image }) = step {
                if let Some(reference) = resolve(image) {
                    *image = reference;
                }
            }
        }
    }
}

/// Parses an image reference given on the command line (`--from-image`,
/// `--upgrade-from-image`, ...): refused when empty or when it holds whitespace (clap's error
/// names the flag).
pub fn image_reference(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Err("an image reference cannot be empty".to_owned());
    }
    if value.contains(char::is_whitespace) {
        return Err(format!(
            "`{value}` is not an image reference: it contains whitespace"
        ));
    }
    Ok(value.to_owned())
}

/// The pod-template annotation `kubectl rollout restart` sets: changing it replaces the pods.
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

/// The strategic merge patch of the operator Deployment that rolls its `operator` container to
/// `image` (the `upgrade-operator` fault), `running` being the image it runs now. When that is
/// already `image`, the template would not change and no pod would be replaced: the patch then
/// also sets [`RESTARTED_AT_ANNOTATION`] to `now` (RFC 3339), as `kubectl rollout restart`
/// does, so the roll still happens.
pub fn operator_roll_patch(running: Option<&str>, image: &str, now: &str) -> serde_json::Value {
    let mut patch = serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "operator", "image": image}]}}}});
    if running == Some(image) {
        patch["spec"]["template"]["metadata"] =
            serde_json::json!({"annotations": {RESTARTED_AT_ANNOTATION: now}});
    }
    patch
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
    /// The run could not answer (A and B the same operator, or a scenario did not run).
    Inconclusive,
}

/// The verdict, its reasons, one line each, and whether each held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeJudgement {
    /// The answer.
    pub verdict: Verdict,
    /// (held, reason), in the order checked.
    pub reasons: Vec<(bool, String)>,
    /// Why A and B are the same operator, when they are ([`Operator::same_as`]): the run
    /// checked a restart, not an upgrade, and can at best say so.
    pub same: Option<String>,
    /// The backend that ran it (`results.json`'s `backend`: `localkube`, `kind`,
    /// `kubeconfig`).
    pub backend: String,
}

impl UpgradeJudgement {
    /// The verdict line.
    pub fn headline(&self, from: &Operator, to: &Operator) -> String {
        let (to, from) = (to.name(), from.name());
        match self.verdict {
            Verdict::Safe => format!("VERDICT: SAFE to roll out {to} over {from}"),
            Verdict::NotSafe => format!(
                "VERDICT: NOT SAFE to roll out {to} over {from} ({} of {} checks failed)",
                self.reasons.iter().filter(|(held, _)| !held).count(),
                self.reasons.len()
            ),
            Verdict::Inconclusive => match &self.same {
                Some(same) if self.reasons.iter().all(|(held, _)| *held) => format!(
                    "VERDICT: INCONCLUSIVE for {to} over {from}: {same} (the restart held every check)"
                ),
                Some(same) => format!("VERDICT: INCONCLUSIVE for {to} over {from}: {same}"),
                None => format!(
                    "VERDICT: INCONCLUSIVE for {to} over {from}: this run cannot tell"
                ),
            },
        }
    }

    /// The whole answer: A and B, the backend, the verdict line, the reasons and the report.
    pub fn render(&self, from: &Operator, to: &Operator, report: &Path) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "A = {}", from.describe());
        let _ = writeln!(out, "B = {}", to.describe());
        let _ = writeln!(out, "ran on the {} backend", self.backend);
        let _ = writeln!(out, "{}", self.headline(from, to));
        if let (Some(same), Verdict::NotSafe) = (&self.same, self.verdict) {
            let _ = writeln!(out, "  note {same}");
        }
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
    match (&result.skipped, &result.failure) {
        (Some(reason), _) => format!("{} SKIPPED: {reason}", result.trial),
        (None, None) if result.passed => format!("{} passed ({numbers})", result.trial),
        (None, None) => format!("{} failed ({numbers})", result.trial),
        (None, Some(failure)) => format!(
            "{} failed: {} ({numbers})",
            result.trial,
            first_line(failure)
        ),
    }
}

/// Judges an upgrade run: `results` of the harness run (scenario 050 and the smoke set),
/// `upgrade_history` 050's history, `smoke` the ids that were asked for on B.
pub fn judge_upgrade(
    from: &Operator,
    to: &Operator,
    results: &RunResults,
    upgrade_history: Option<&History>,
    smoke: &[u16],
) -> UpgradeJudgement {
    let mut reasons = Vec::new();
    // Whether a piece the answer needs is missing (or A and B are the same operator).
    let same = from.same_as(to).map(str::to_owned);
    let mut inconclusive = same.is_some();
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
            if upgrade.skipped.is_some() {
                inconclusive = true;
            }
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
                None if upgrade.skipped.is_some() => {}
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
                if result.skipped.is_some() {
                    // Not run on this backend: neither a pass nor a finding.
                    inconclusive = true;
                }
                reasons.push((result.passed, format!("on B: {}", scenario_line(result))))
            }
            None => {
                inconclusive = true;
                reasons.push((false, format!("on B: scenario {id:03} did not run")));
            }
        }
    }
    // A failed scenario or a disturbance is a finding: no. Only missing pieces: cannot tell.
    let finding = results
        .scenarios
        .iter()
        .any(|scenario| !scenario.passed && scenario.skipped.is_none())
        || upgrade_history.is_some_and(|history| !upgrade_disturbances(history).is_empty());
    let verdict = if reasons.iter().all(|(held, _)| *held) && !inconclusive {
        Verdict::Safe
    } else if finding || !inconclusive {
        Verdict::NotSafe
    } else {
        Verdict::Inconclusive
    };
    UpgradeJudgement {
        verdict,
        reasons,
        same,
        backend: results.backend.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::rpo::RpoSummary;
    use crate::history::event::{Event, EventType, FailoverKind, FailoverRecord};
    use crate::scenario::model::Site;

    fn build(name: &str, sha: &str) -> Operator {
        Operator::Build(OperatorBuild {
            name: name.to_owned(),
            commit: "0123456789ab".to_owned(),
            binary: PathBuf::from("/cache/bloodraven"),
            sha256: sha.repeat(64 / sha.len()),
        })
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
            timing: String::new(),
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
            lease_ms: None,
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

    fn image(reference: &str) -> Operator {
        Operator::Image(reference.to_owned())
    }

    #[test]
    fn by_image_the_verdict_names_the_images_and_the_backend() {
        let (a, b) = (image("reg/bloodraven:1.2.3"), image("reg/bloodraven:1.3.0"));
        let mut results = run(vec![result(20, None), result(50, None)]);
        results.backend = "kubeconfig".to_owned();
        let judgement = judge_upgrade(&a, &b, &results, Some(&quiet()), &[20]);
        assert_eq!(judgement.verdict, Verdict::Safe, "{judgement:?}");
        let text = judgement.render(&a, &b, Path::new("reports/r/index.html"));
        assert!(
            text.starts_with(
                "A = image reg/bloodraven:1.2.3\nB = image reg/bloodraven:1.3.0\nran on the kubeconfig backend\nVERDICT: SAFE to roll out reg/bloodraven:1.3.0 over reg/bloodraven:1.2.3\n"
            ),
            "{text}"
        );
        assert!(!text.contains("sha256"), "{text}");
    }

    #[test]
    fn the_same_image_is_a_restart_under_load_and_says_so() {
        let a = image("reg/bloodraven:1.2.3");
        let same = "A and B are the same image: this checks a restart under load, not an upgrade";
        // Every check held: the restart held, the upgrade question is not answered.
        let held = judge_upgrade(
            &a,
            &a.clone(),
            &run(vec![result(20, None), result(50, None)]),
            Some(&quiet()),
            &[20],
        );
        assert_eq!(held.verdict, Verdict::Inconclusive, "{held:?}");
        assert!(held.reasons.iter().all(|(ok, _)| *ok), "{held:?}");
        let text = held.render(&a, &a, Path::new("reports/r/index.html"));
        assert!(
            text.contains(&format!(
                "VERDICT: INCONCLUSIVE for reg/bloodraven:1.2.3 over reg/bloodraven:1.2.3: {same} (the restart held every check)"
            )),
            "{text}"
        );
        // The restart broke something: a finding, still named a restart.
        let failed = judge_upgrade(
            &a,
            &a.clone(),
            &run(vec![result(50, Some("expectations: step 6 failed"))]),
            Some(&quiet()),
            &[],
        );
        assert_eq!(failed.verdict, Verdict::NotSafe);
        let text = failed.render(&a, &a, Path::new("reports/r/index.html"));
        assert!(text.contains(&format!("  note {same}\n")), "{text}");
        // Different references are an upgrade.
        assert_eq!(a.same_as(&image("reg/bloodraven:1.3.0")), None);
    }

    #[test]
    fn a_skipped_smoke_scenario_is_inconclusive_not_a_pass_or_a_finding() {
        let mut skipped = result(41, None);
        skipped.passed = false;
        skipped.skipped = Some("requires clock-offset".to_owned());
        let judgement = judge_upgrade(
            &image("a:1"),
            &image("a:2"),
            &run(vec![skipped, result(50, None)]),
            Some(&quiet()),
            &[41],
        );
        assert_eq!(judgement.verdict, Verdict::Inconclusive, "{judgement:?}");
        assert!(judgement.reasons.contains(&(
            false,
            "on B: s041_x SKIPPED: requires clock-offset".to_owned()
        )));
    }

    #[test]
    fn rolling_to_the_running_image_stamps_the_restart_annotation() {
        let now = "2026-01-02T03:04:05Z";
        let same = operator_roll_patch(Some("reg/bloodraven:1.2.3"), "reg/bloodraven:1.2.3", now);
        assert_eq!(
            same["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT_ANNOTATION],
            now
        );
        assert_eq!(
            same["spec"]["template"]["spec"]["containers"],
            serde_json::json!([{"name": "operator", "image": "reg/bloodraven:1.2.3"}])
        );
        // Another image changes the template by itself: no annotation.
        let upgrade =
            operator_roll_patch(Some("reg/bloodraven:1.2.3"), "reg/bloodraven:1.3.0", now);
        assert!(
            upgrade["spec"]["template"].get("metadata").is_none(),
            "{upgrade}"
        );
        assert_eq!(
            upgrade["spec"]["template"]["spec"]["containers"][0]["image"],
            "reg/bloodraven:1.3.0"
        );
    }

    #[test]
    fn the_images_go_into_050_and_every_other_scenario_installs_b() {
        let images = OperatorImages {
            from: "reg/bloodraven:1.2.3".to_owned(),
            to: "reg/bloodraven:1.3.0".to_owned(),
        };
        let mut scenario: Scenario = serde_yaml::from_str(
            "id: 999\ntitle: t\nseed: s\ninstall: {operatorImage: bloodraven:upgrade-a}\nsteps:\n- do: {upgrade-operator: {image: bloodraven:upgrade-b}}\n- do: {upgrade-operator: {image: bloodraven:upgrade-a}}\n- do: {upgrade-operator: {image: other/bloodraven:9}}\n",
        )
        .expect("a scenario");
        images.apply(&mut scenario);
        assert_eq!(
            scenario.install.operator_image.as_deref(),
            Some("reg/bloodraven:1.2.3")
        );
        let rolled: Vec<&str> = scenario
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Do(Action::UpgradeOperator { image }) => Some(image.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            rolled,
            [
                "reg/bloodraven:1.3.0",
                "reg/bloodraven:1.2.3",
                "other/bloodraven:9"
            ]
        );
        let mut plain: Scenario =
            serde_yaml::from_str("id: 998\ntitle: t\nseed: s\nsteps:\n- sleep: 1s\n")
                .expect("a scenario");
        images.apply(&mut plain);
        assert_eq!(
            plain.install.operator_image.as_deref(),
            Some("reg/bloodraven:1.3.0")
        );
    }

    #[test]
    fn image_references_are_refused_when_empty_or_spaced() {
        assert_eq!(
            image_reference("reg/bloodraven:1.2.3").as_deref(),
            Ok("reg/bloodraven:1.2.3")
        );
        assert!(image_reference("").is_err());
        assert!(image_reference("reg/bloodraven:1.2.3\n").is_err());
        assert!(image_reference("reg/blood raven").is_err());
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
