//! One libtest-mimic trial per scenario, and the run around them (cluster reuse, report).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use libtest_mimic::{Failed, Trial};

use super::cli::Cli;
use super::execute::{execute, Pacing};
use crate::backend::{select_backend, Backend, Cluster};
use crate::error::Result;
use crate::history::store::History;
use crate::report::results::{judge, RunResults, ScenarioIdentity, ScenarioResult};
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
    /// Results, in completion order.
    pub results: Mutex<Vec<(ScenarioResult, History)>>,
}

impl RunContext {
    /// A context for the flags; the backend is selected (and may be unavailable).
    pub fn new(cli: &Cli, run_id: String) -> Self {
        Self {
            backend: select_backend(
                cli.cluster_kind(),
                &crate::backend::BackendConfig::for_this_checkout(),
            )
            .map_err(|error| format!("failed to {error}.")),
            shared_cluster: Mutex::new(None),
            reuse: cli.reuse,
            pacing: Pacing::default(),
            run_id,
            report_dir: cli.report_dir.clone(),
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
    catalogue
        .iter()
        .map(|loaded| {
            let context = Arc::clone(context);
            let scenario = loaded.clone();
            Trial::test(loaded.trial_name(), move || run_trial(&context, &scenario))
                .with_ignored_flag(ignored)
        })
        .collect()
}

fn cluster_for(context: &RunContext, backend: &dyn Backend) -> Result<Arc<dyn Cluster>> {
    if !context.reuse {
        return backend.create();
    }
    let mut shared = context
        .shared_cluster
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(cluster) = shared.as_ref() {
        return Ok(Arc::clone(cluster));
    }
    let cluster = backend.create()?;
    *shared = Some(Arc::clone(&cluster));
    Ok(cluster)
}

/// Runs one scenario as a trial: fails with the backend's sentence when there is none,
/// else runs it, judges the history and keeps the result for the report.
pub fn run_trial(context: &RunContext, loaded: &LoadedScenario) -> Result<(), Failed> {
    let backend = match &context.backend {
        Ok(backend) => backend,
        Err(sentence) => return Err(Failed::from(sentence.as_str())),
    };
    let cluster = cluster_for(context, backend.as_ref())
        .map_err(|error| Failed::from(format!("failed to {error}")))?;
    let artifacts = context
        .report_dir
        .join(&context.run_id)
        .join(loaded.trial_name())
        .join("artifacts");
    let run = execute(cluster.as_ref(), loaded, context.pacing, Some(&artifacts));
    let trial = loaded.trial_name();
    let result = judge(
        ScenarioIdentity {
            id: loaded.scenario.id,
            trial: &trial,
            title: &loaded.scenario.title,
            seed: &loaded.scenario.seed,
        },
        &run.history,
        run.expectations,
        run.measures,
        run.error,
        run.duration_ms,
    );
    // A run whose steps passed but a checker failed (e.g. rpo) gets its artifacts too, read
    // before the cluster goes.
    if result.failure.is_some() && !artifacts.exists() {
        if let Err(error) = cluster.collect_artifacts(&artifacts) {
            tracing::warn!(scenario = loaded.scenario.id, %error, "failed to collect artifacts");
        }
    }
    if context.reuse {
        // The next scenario installs afresh on the same cluster.
        if let Err(error) = cluster.uninstall() {
            tracing::warn!(scenario = loaded.scenario.id, %error, "failed to uninstall from the reused cluster");
        }
    } else if let Err(error) = backend.teardown(cluster) {
        tracing::warn!(scenario = loaded.scenario.id, %error, "failed to tear the cluster down");
    }
    let outcome = match &result.failure {
        None => Ok(()),
        Some(failure) => Err(Failed::from(failure.as_str())),
    };
    context
        .results
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((result, run.history));
    outcome
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
    ran.sort_by_key(|(result, _)| result.id);
    let (scenarios, histories): (Vec<_>, Vec<_>) = ran.into_iter().unzip();
    let results = RunResults {
        run_id: context.run_id.clone(),
        started_at,
        finished_at: jiff::Timestamp::now(),
        backend: backend_name.to_owned(),
        commit: std::env::var("BLOODRAVEN_COMMIT").ok(),
        scenarios,
    };
    write_report(&context.report_dir, &results, &histories).map(Some)
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
    let catalogue = match crate::scenario::validate::load_catalogue(&cli.scenarios) {
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
    let run_id = started_at.strftime("%Y%m%dT%H%M%SZ").to_string();
    let kind = cli.cluster_kind();
    let context = Arc::new(RunContext::new(&cli, run_id));
    let ignored = ignored_by_default && cli.cluster.is_none();
    let trials = build_trials(&catalogue, &context, ignored);
    let conclusion = libtest_mimic::run(&cli.test, trials);
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
