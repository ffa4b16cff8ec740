//! One libtest-mimic trial per scenario, and the run around them (cluster reuse, report).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use libtest_mimic::{Failed, Trial};

use super::cli::Cli;
use super::execute::{execute, Pacing};
use super::judge::{judge, skipped};
use crate::backend::{Backend, Cluster, ClusterKind};
use crate::backends::select::{select_backend, BackendConfig};
use crate::error::Result;
use crate::history::store::History;
use crate::progress;
use crate::report::results::{RunResults, ScenarioIdentity, ScenarioResult};
use crate::report::write::write_report;
use crate::scenario::validate::LoadedScenario;

/// Shared state of one run.
pub struct RunContext {
    /// The backend, or the sentence every trial fails with.
    pub backend: Result<Box<dyn Backend>, String>,
    /// The reused cluster (`--reuse`).
    pub shared_cluster: Mutex<Option<Arc<dyn Cluster>>>,
    /// `--reuse`.
    pub reuse: bool,
    /// Step pacing.
    pub pacing: Pacing,
    /// The run id.
    pub run_id: String,
    /// `--report-dir`.
    pub report_dir: PathBuf,
    /// `--repeat`: runs per scenario.
    pub repeat: u32,
    /// Results, in completion order.
    pub results: Mutex<Vec<(ScenarioResult, History)>>,
    /// The backend's kind.
    pub kind: ClusterKind,
    /// `--fault-driver`.
    pub fault_driver: crate::backend::FaultDriverKind,
    /// What the backend's clusters can do beyond the API and the fault agent.
    pub capabilities: std::collections::BTreeSet<crate::scenario::model::Capability>,
}

impl RunContext {
    /// A context for the flags; the backend is selected (and may be unavailable).
    pub fn new(cli: &Cli, run_id: String) -> Self {
        let mut config = BackendConfig::for_this_checkout();
        config.fault_driver = cli.fault_driver;
        config.image_overrides = crate::playground::localkube::operator_builds(
            cli.upgrade_from_bin.as_deref(),
            cli.upgrade_to_bin.as_deref(),
        );
        let kind = cli.cluster_kind();
        let backend = if !config.image_overrides.is_empty() && kind != ClusterKind::Localkube {
            Err(format!(
                "failed to map operator builds to images: --upgrade-from-bin and --upgrade-to-bin need --cluster localkube, not {}.",
                kind.name()
            ))
        } else {
            select_backend(kind, &config).map_err(|error| format!("failed to {error}."))
        };
        let capabilities = backend
            .as_ref()
            .map(|backend| backend.capabilities())
            .unwrap_or_default();
        Self {
            backend,
            kind,
            fault_driver: cli.fault_driver,
            capabilities,
            shared_cluster: Mutex::new(None),
            reuse: cli.reuse,
            pacing: Pacing::default(),
            run_id,
            report_dir: cli.report_dir.clone(),
            repeat: cli.repeat.max(1),
            results: Mutex::new(Vec::new()),
        }
    }
}

/// One trial per scenario, named `sNNN_slug`. With `ignored`, every trial is marked ignored
/// (the `cargo test` target, where no cluster is asked for).
pub fn build_trials(
    catalogue: &[LoadedScenario],
    context: &Arc<RunContext>,
    ignored: bool,
) -> Vec<Trial> {
    let total = catalogue.len();
    catalogue
        .iter()
        .enumerate()
        .map(|(index, loaded)| {
            let context = Arc::clone(context);
            let scenario = loaded.clone();
            let scope = format!("{}/{total} s{:03}", index + 1, loaded.scenario.id);
            // A scenario the backend cannot run is an ignored trial (libtest says `ignored`,
            // never `ok`); [`record_skipped`] puts it in the report as SKIPPED.
            let skipped = context.skip_reason(loaded).is_some();
            Trial::test(loaded.trial_name(), move || {
                progress::scoped(scope, || run_trial(&context, &scenario))
            })
            .with_ignored_flag(ignored || skipped)
        })
        .collect()
}

fn cluster_for(context: &RunContext, backend: &dyn Backend) -> Result<Arc<dyn Cluster>> {
    let create = || {
        let phase =
            progress::Phase::start(format!("creating the cluster ({})", backend.kind().name()));
        let created = backend.create();
        phase.end(&created);
        created
    };
    if !context.reuse {
        return create();
    }
    let mut shared = context
        .shared_cluster
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(cluster) = shared.as_ref() {
        return Ok(Arc::clone(cluster));
    }
    let cluster = create()?;
    *shared = Some(Arc::clone(&cluster));
    Ok(cluster)
}

/// Runs one scenario as a trial, `--repeat` times: fails with the backend's sentence when
/// there is none, else runs it, judges each run's history and keeps every result for the
/// report. The trial fails when any run failed, naming how many passed.
pub fn run_trial(context: &RunContext, loaded: &LoadedScenario) -> Result<(), Failed> {
    if let Some(reason) = context.skip_reason(loaded) {
        // Run anyway (`--ignored`): it cannot, and that is not a pass.
        record_skipped(context, loaded, &reason);
        return Err(Failed::from(format!("skipped: {reason}")));
    }
    let mut failures = Vec::new();
    for attempt in 1..=context.repeat {
        let failure = match &context.backend {
            Ok(backend) => run_once(context, backend.as_ref(), loaded, attempt),
            Err(sentence) => Some(record_unrun(context, loaded, attempt, sentence.clone())),
        };
        if let Some(failure) = failure {
            failures.push((attempt, failure));
        }
    }
    match failures.as_slice() {
        [] => Ok(()),
        [(_, failure)] if context.repeat == 1 => Err(Failed::from(failure.as_str())),
        [(attempt, failure), ..] => Err(Failed::from(format!(
            "passed {} of {} runs; run {attempt}: {failure}",
            context.repeat as usize - failures.len(),
            context.repeat
        ))),
    }
}

/// The scenario as its result names it.
fn identity<'a>(loaded: &'a LoadedScenario, trial: &'a str) -> ScenarioIdentity<'a> {
    ScenarioIdentity {
        id: loaded.scenario.id,
        trial,
        title: &loaded.scenario.title,
        seed: &loaded.scenario.seed,
    }
}

/// A run that could not start (no backend, or no cluster could be had): a failed result
/// with no history, kept for the report, JUnit and the trend line like any other, so a run
/// whose clusters all failed is never an empty, green report. Returns the failure.
fn record_unrun(
    context: &RunContext,
    loaded: &LoadedScenario,
    attempt: u32,
    reason: String,
) -> String {
    let trial = loaded.trial_name();
    let mut result = judge(
        identity(loaded, &trial),
        &History::new(Vec::new()),
        Vec::new(),
        Vec::new(),
        Some(reason.clone()),
        0,
    );
    result.attempt = attempt;
    result.timing = loaded.timing.to_string();
    context
        .results
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((result, History::new(Vec::new())));
    reason
}

impl RunContext {
    /// Why `loaded` cannot run on this run's backend (`None`: it can, or there is no
    /// backend, which fails every trial by itself).
    pub fn skip_reason(&self, loaded: &LoadedScenario) -> Option<String> {
        self.backend.as_ref().ok()?;
        crate::backend::skip_reason(
            &loaded.scenario,
            self.kind,
            self.fault_driver,
            &self.capabilities,
        )
    }
}

/// A scenario the backend cannot run: a SKIPPED result with the reason and no history, in
/// the report, JUnit and the trend line like any other (never passed, never left out).
fn record_skipped(context: &RunContext, loaded: &LoadedScenario, reason: &str) {
    let trial = loaded.trial_name();
    let mut results = context
        .results
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if results.iter().any(|(result, _)| result.trial == trial) {
        return;
    }
    let result = skipped(identity(loaded, &trial), reason.to_owned());
    results.push((result, History::new(Vec::new())));
}

/// Whether libtest's own selection (`FILTER`, `--exact`, `--skip`) keeps the trial `name`,
/// as libtest-mimic decides it: the skipped trials it never calls are reported only when the
/// run selected them.
pub fn selected_by_filter(arguments: &libtest_mimic::Arguments, name: &str) -> bool {
    let matches = |pattern: &str| {
        if arguments.exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    };
    arguments.filter.as_deref().is_none_or(matches)
        && !arguments.skip.iter().any(|pattern| matches(pattern))
}

/// One run of a scenario; `Some(reason)` when it failed, including when no cluster could be
/// had (then nothing ran, and the result says so).
fn run_once(
    context: &RunContext,
    backend: &dyn Backend,
    loaded: &LoadedScenario,
    attempt: u32,
) -> Option<String> {
    if context.repeat > 1 {
        progress::say(format!("run {attempt} of {}", context.repeat));
    }
    let cluster = match cluster_for(context, backend) {
        Ok(cluster) => cluster,
        Err(error) => {
            return Some(record_unrun(
                context,
                loaded,
                attempt,
                format!("failed to {error}"),
            ))
        }
    };
    let trial = loaded.trial_name();
    let dir_name = if attempt <= 1 {
        trial.clone()
    } else {
        format!("{trial}.run{attempt}")
    };
    let artifacts = context
        .report_dir
        .join(&context.run_id)
        .join(&dir_name)
        .join("artifacts");
    let run = execute(cluster.as_ref(), loaded, context.pacing, Some(&artifacts));
    let mut result = judge(
        identity(loaded, &trial),
        &run.history,
        run.expectations,
        run.measures,
        run.error,
        run.duration_ms,
    );
    result.attempt = attempt;
    result.timing = loaded.timing.to_string();
    // A run whose steps passed but a checker failed (e.g. rpo) gets its artifacts too, read
    // before the cluster goes.
    if result.failure.is_some() && !artifacts.exists() {
        if let Err(error) = cluster.collect_artifacts(&artifacts) {
            tracing::warn!(scenario = loaded.scenario.id, %error, "failed to collect artifacts");
        }
    }
    if context.reuse {
        // The next scenario installs afresh on the same cluster. One that could not be
        // cleaned is replaced: a leftover must not fail, or pass, the next scenario.
        if let Err(error) = cluster.uninstall() {
            tracing::warn!(scenario = loaded.scenario.id, %error, "failed to uninstall from the reused cluster; the next scenario gets a new one");
            let shared = context
                .shared_cluster
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            drop(shared);
            if let Err(error) = backend.teardown(cluster) {
                tracing::warn!(scenario = loaded.scenario.id, %error, "failed to tear the cluster down");
            }
        }
    } else if let Err(error) = backend.teardown(cluster) {
        tracing::warn!(scenario = loaded.scenario.id, %error, "failed to tear the cluster down");
    }
    let failure = result.failure.clone();
    if context.repeat > 1 {
        eprintln!(
            "bloodraven-harness: {trial} run {attempt} of {}: {}",
            context.repeat,
            failure
                .as_deref()
                .map_or("passed", |reason| crate::report::summary::first_line(
                    reason
                ))
        );
    }
    context
        .results
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((result, run.history));
    failure
}

/// After the trials: tears down a reused cluster and writes the report when any scenario
/// ran. Returns the report directory, if one was written.
pub fn finish_run(
    context: &RunContext,
    started_at: jiff::Timestamp,
    backend_name: &str,
) -> Result<Option<PathBuf>> {
    if let (Ok(backend), Some(cluster)) = (
        &context.backend,
        context
            .shared_cluster
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(),
    ) {
        backend.teardown(cluster)?;
    }
    let mut ran = std::mem::take(
        &mut *context
            .results
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    if ran.is_empty() {
        return Ok(None);
    }
    ran.sort_by_key(|(result, _)| (result.id, result.attempt));
    let (scenarios, histories): (Vec<_>, Vec<_>) = ran.into_iter().unzip();
    let results = RunResults {
        run_id: context.run_id.clone(),
        started_at,
        finished_at: jiff::Timestamp::now(),
        backend: backend_name.to_owned(),
        commit: std::env::var("BLOODRAVEN_COMMIT").ok(),
        repeat: context.repeat,
        notes: Vec::new(),
        scenarios,
    };
    let dir = write_report(&context.report_dir, &results, &histories)?;
    print!(
        "\nsummary of run {}:\n{}",
        results.run_id,
        crate::report::summary::render_text(
            &crate::report::summary::summarize(&results.scenarios),
            context.repeat > 1
        )
    );
    Ok(Some(dir))
}

/// The scenarios of `ids` in that order (all of them, in catalogue order, when `ids` is
/// empty); an id not in the catalogue is an error naming it.
pub fn select_ids(
    catalogue: Vec<LoadedScenario>,
    ids: &[u16],
) -> std::result::Result<Vec<LoadedScenario>, String> {
    if ids.is_empty() {
        return Ok(catalogue);
    }
    let unknown: Vec<String> = ids
        .iter()
        .filter(|id| !catalogue.iter().any(|loaded| loaded.scenario.id == **id))
        .map(|id| format!("{id:03}"))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "select --ids: no scenario with id {} in the catalogue",
            unknown.join(", ")
        ));
    }
    let mut selected = Vec::new();
    for id in ids {
        if let Some(loaded) = catalogue.iter().find(|loaded| loaded.scenario.id == *id) {
            if !selected
                .iter()
                .any(|chosen: &LoadedScenario| chosen.scenario.id == *id)
            {
                selected.push(loaded.clone());
            }
        }
    }
    Ok(selected)
}

/// The scenarios a run executes, as it executes them: the catalogue of `--scenarios`, the
/// `--ids` in their order, and with `--upgrade-from-image`/`--upgrade-to-image` the operator
/// images put in ([`crate::upgrade::OperatorImages::apply`]: 050 installs A and rolls to B,
/// every other scenario installs B).
pub fn run_catalogue(cli: &Cli) -> std::result::Result<Vec<LoadedScenario>, String> {
    let profile = cli
        .profile
        .patch()
        .map_err(|problem| format!("use --profile: {problem}"))?;
    let catalogue = crate::scenario::validate::load_catalogue_with(&cli.scenarios_dir(), &profile)
        .map_err(|error| error.to_string())?;
    let mut selected = select_ids(catalogue, &cli.ids)?;
    if let Some(fleet) = cli.fleet {
        for loaded in &mut selected {
            loaded.scenario.install.fleet = Some(fleet);
        }
    }
    if let Some(images) = cli.upgrade_images() {
        for loaded in &mut selected {
            images.apply(&mut loaded.scenario);
        }
    }
    Ok(selected)
}

/// The whole program: parse flags, load the catalogue, run the trials, write the report.
/// `ignored_by_default` marks trials ignored unless a cluster was asked for (`--cluster` or
/// `BLOODRAVEN_CLUSTER`), for the `cargo test`/nextest target.
pub fn main_with(ignored_by_default: bool) -> std::process::ExitCode {
    use clap::Parser as _;
    let mut cli = Cli::parse();
    if cli.trends {
        return match crate::report::write::render_trends_file(&cli.report_dir) {
            Ok(path) => {
                eprintln!("bloodraven-harness: trends written to {}", path.display());
                std::process::ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("bloodraven-harness: failed to {error}");
                std::process::ExitCode::from(2)
            }
        };
    }
    let catalogue = match run_catalogue(&cli) {
        Ok(catalogue) => catalogue,
        Err(error) => {
            eprintln!("bloodraven-harness: failed to {error}");
            return std::process::ExitCode::from(2);
        }
    };
    if cli.test.test_threads.is_none() {
        // One cluster at a time: the machine has two cores and a cluster is heavy.
        cli.test.test_threads = Some(1);
    }
    let started_at = jiff::Timestamp::now();
    let run_id = match cli.run_id.clone() {
        Some(id)
            if !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            id
        }
        Some(id) => {
            eprintln!("bloodraven-harness: failed to use --run-id `{id}`: only letters, digits, `-`, `_` and `.` make a directory name");
            return std::process::ExitCode::from(2);
        }
        None => started_at.strftime("%Y%m%dT%H%M%SZ").to_string(),
    };
    progress::enable(
        "bloodraven-harness",
        cli.test.quiet || progress::quiet_from_env(),
    );
    let kind = cli.cluster_kind();
    let context = Arc::new(RunContext::new(&cli, run_id));
    let ignored = ignored_by_default && cli.cluster.is_none();
    let trials = build_trials(&catalogue, &context, ignored);
    let conclusion = libtest_mimic::run(&cli.test, trials);
    if !cli.test.list && !ignored {
        for loaded in &catalogue {
            if let Some(reason) = context.skip_reason(loaded) {
                if selected_by_filter(&cli.test, &loaded.trial_name()) {
                    eprintln!(
                        "bloodraven-harness: {} SKIPPED: {reason}",
                        loaded.trial_name()
                    );
                    record_skipped(&context, loaded, &reason);
                }
            }
        }
    }
    // A run asked for scenarios on a cluster and executed none (a filter or `--skip` that
    // matched nothing): never a green run.
    if !cli.test.list && !ignored && executed_nothing(&conclusion) {
        eprintln!(
            "bloodraven-harness: failed to run any scenario: {} matched, {} filtered out{}",
            conclusion.num_passed + conclusion.num_failed + conclusion.num_ignored,
            conclusion.num_filtered_out,
            if conclusion.num_ignored > 0 {
                " (the rest ignored)"
            } else {
                ""
            }
        );
        return std::process::ExitCode::from(2);
    }
    if !cli.test.list {
        match finish_run(&context, started_at, kind.name()) {
            Ok(Some(dir)) => eprintln!(
                "bloodraven-harness: report written to {}",
                dir.join("index.html").display()
            ),
            Ok(None) => {}
            Err(error) => {
                eprintln!("bloodraven-harness: failed to {error}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    conclusion.exit_code()
}

/// Whether a run executed no trial at all (none passed, none failed).
pub fn executed_nothing(conclusion: &libtest_mimic::Conclusion) -> bool {
    conclusion.num_passed == 0 && conclusion.num_failed == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::{Action, Step};
    use clap::Parser as _;

    fn catalogue(args: &[&str]) -> Vec<LoadedScenario> {
        let cli =
            Cli::try_parse_from(std::iter::once("bloodraven-harness").chain(args.iter().copied()))
                .expect("flags");
        run_catalogue(&cli).expect("the catalogue")
    }

    fn images_of(loaded: &LoadedScenario) -> (Option<&str>, Vec<&str>) {
        let rolled = loaded
            .scenario
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Do(Action::UpgradeOperator { image }) => Some(image.as_str()),
                _ => None,
            })
            .collect();
        (loaded.scenario.install.operator_image.as_deref(), rolled)
    }

    /// Scenario 050 as the run reads it installs A and rolls to B; the smoke scenarios after it
    /// install B. Without the image flags the files' upgrade tags stay (localkube's catalog maps
    /// them to the builds of `--upgrade-from-bin`/`--upgrade-to-bin`).
    #[test]
    fn by_image_050_installs_a_and_rolls_to_b_and_the_smoke_set_installs_b() {
        let ids = crate::upgrade::SMOKE_IDS
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let run = catalogue(&[
            "--ids",
            &format!("50,{ids}"),
            "--upgrade-from-image",
            "reg/bloodraven:1.2.3",
            "--upgrade-to-image",
            "reg/bloodraven:1.3.0",
        ]);
        assert_eq!(run.len(), 1 + crate::upgrade::SMOKE_IDS.len());
        assert_eq!(run[0].scenario.id, crate::upgrade::UPGRADE_SCENARIO);
        assert_eq!(
            images_of(&run[0]),
            (Some("reg/bloodraven:1.2.3"), vec!["reg/bloodraven:1.3.0"])
        );
        for smoke in &run[1..] {
            assert_eq!(
                images_of(smoke),
                (Some("reg/bloodraven:1.3.0"), Vec::new()),
                "s{:03}",
                smoke.scenario.id
            );
        }
        let plain = catalogue(&["--ids", "50,20"]);
        assert_eq!(
            images_of(&plain[0]),
            (
                Some(crate::playground::localkube::UPGRADE_FROM_IMAGE),
                vec![crate::playground::localkube::UPGRADE_TO_IMAGE]
            )
        );
        assert_eq!(images_of(&plain[1]), (None, Vec::new()));
    }
}
