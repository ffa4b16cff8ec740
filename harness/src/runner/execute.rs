//! Running one scenario's steps against a [`Cluster`]: faults, waits, assertions and
//! measurements, then heal, the liveness phase and the final read.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::evaluate::{describe, evaluate};
use crate::backend::Cluster;
use crate::check::expectations::{ExpectMode, ExpectationResult, MeasureResult};
use crate::check::timings::check_timings;
use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::recorder::Recorder;
use crate::history::store::History;
use crate::scenario::model::{Expect, HealTarget, Quantity, Step};
use crate::scenario::validate::{collect_variables_in_str, LoadedScenario};

/// How often expectations re-observe their target.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// The bound on the liveness phase after the final heal (harness.md step 5).
pub const LIVENESS_BOUND: Duration = Duration::from_secs(120);

/// Timing knobs (tests shorten them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Expectation poll interval.
    pub poll_interval: Duration,
    /// Liveness bound.
    pub liveness_bound: Duration,
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            poll_interval: POLL_INTERVAL,
            liveness_bound: LIVENESS_BOUND,
        }
    }
}

/// What running a scenario produced, before the checkers.
#[derive(Debug, Clone, Default)]
pub struct ScenarioRun {
    /// The recorded history.
    pub history: History,
    /// One entry per `expect` step that ran.
    pub expectations: Vec<ExpectationResult>,
    /// One entry per `measure` step that ran.
    pub measures: Vec<MeasureResult>,
    /// Why the run stopped early (a step's error, a failed expectation, no convergence).
    pub error: Option<String>,
    /// Wall duration of the run in ms.
    pub duration_ms: u64,
}

/// Runs `loaded` on `cluster`; artifacts go to `artifacts` when the run fails.
pub fn execute(
    cluster: &dyn Cluster,
    loaded: &LoadedScenario,
    pacing: Pacing,
    artifacts: Option<&Path>,
) -> ScenarioRun {
    let started = Instant::now();
    let recorder = Arc::new(Recorder::new());
    let mut run = ScenarioRun::default();
    let error = run_steps(cluster, loaded, pacing, &recorder, &mut run, started).err();
    run.error = error;
    if let (Some(_), Some(dir)) = (&run.error, artifacts) {
        if let Err(error) = cluster.collect_artifacts(dir) {
            tracing::warn!(scenario = loaded.scenario.id, %error, "failed to collect artifacts");
        }
    }
    run.history = recorder.snapshot();
    run.duration_ms = millis(started.elapsed());
    run
}

fn run_steps(
    cluster: &dyn Cluster,
    loaded: &LoadedScenario,
    pacing: Pacing,
    recorder: &Arc<Recorder>,
    run: &mut ScenarioRun,
    started: Instant,
) -> Result<(), String> {
    let scenario = &loaded.scenario;
    cluster
        .install(&scenario.install)
        .map_err(|error| format!("failed to install: {error}"))?;
    let workload = cluster
        .start_workload(Arc::clone(recorder))
        .map_err(|error| format!("failed to start the workload: {error}"))?;
    let mut variables: BTreeMap<String, String> = BTreeMap::new();
    let mut outcome = Ok(());
    for (index, step) in scenario.steps.iter().enumerate() {
        tracing::info!(
            scenario = scenario.id,
            step = index,
            kind = step.kind(),
            "step"
        );
        let result = match step {
            Step::Apply(apply) => cluster
                .apply(apply)
                .map_err(|error| format!("step {index}: failed to {error}")),
            Step::Fault(fault) => cluster
                .inject(fault, recorder)
                .map_err(|error| format!("step {index}: failed to {error}")),
            Step::Heal(target) => cluster
                .heal(target, recorder)
                .map_err(|error| format!("step {index}: failed to {error}")),
            Step::Sleep(span) => {
                std::thread::sleep(span.duration());
                Ok(())
            }
            Step::Expect(expect) => {
                let expect = substitute(expect, &variables);
                let (result, last) = run_expect(cluster, &expect, index, pacing, started);
                if result.satisfied {
                    if let (Some(deploy), Some(observed)) = (&expect.deploy_api, &last) {
                        for (name, field) in &deploy.save {
                            let value =
                                observed.pointer(&format!("/body/{field}")).map(
                                    |value| match value {
                                        Value::String(text) => text.clone(),
                                        other => other.to_string(),
                                    },
                                );
                            variables.insert(name.clone(), value.unwrap_or_default());
                        }
                    }
                }
                let failure = (!result.satisfied).then(|| {
                    format!(
                        "step {index}: {}: {}",
                        result.name,
                        result.failure.clone().unwrap_or_default()
                    )
                });
                run.expectations.push(result);
                failure.map_or(Ok(()), Err)
            }
            Step::Measure(measure) => {
                let value = match measure.quantity {
                    Quantity::Convergence => wait_converged(cluster, recorder, pacing).ok(),
                    Quantity::Detection | Quantity::WriteOutage => {
                        measure_from_history(&recorder.snapshot(), measure.quantity)
                    }
                };
                run.measures.push(MeasureResult {
                    step: index,
                    quantity: measure.quantity,
                    value_ms: value.map(millis),
                    at_least_ms: measure.at_least.map(|span| millis(span.duration())),
                    at_most_ms: measure.at_most.map(|span| millis(span.duration())),
                });
                Ok(())
            }
        };
        if let Err(error) = result {
            outcome = Err(error);
            break;
        }
    }
    // Heal everything, then the liveness phase and the final read, even after a failure:
    // the history needs its final state and the cluster must be left converged for reuse.
    let heal = cluster
        .heal(&HealTarget::All, recorder)
        .map_err(|error| format!("final heal: failed to {error}"));
    let converged = wait_converged(cluster, recorder, pacing)
        .map(|_| ())
        .map_err(|reason| {
            format!(
                "liveness: did not converge within {} s: {reason}",
                pacing.liveness_bound.as_secs()
            )
        });
    // The workload stops and drains before the final read: a write acknowledged while the
    // sites are being read would otherwise count as lost.
    let stopped = workload
        .stop()
        .map_err(|error| format!("failed to stop the workload: {error}"));
    recorder.invoke("final", Op::FinalState { ids: Vec::new() });
    let final_read = match cluster.final_state() {
        Ok(ids) => {
            recorder.complete("final", EventType::Ok, Op::FinalState { ids });
            Ok(())
        }
        Err(error) => {
            recorder.complete("final", EventType::Fail, Op::FinalState { ids: Vec::new() });
            Err(format!("final read: failed to {error}"))
        }
    };
    outcome
        .and(heal)
        .and(converged)
        .and(stopped)
        .and(final_read)
}

/// Polls one expectation until it is decided.
pub fn run_expect(
    cluster: &dyn Cluster,
    expect: &Expect,
    step: usize,
    pacing: Pacing,
    scenario_start: Instant,
) -> (ExpectationResult, Option<Value>) {
    let (mode, span) = match (expect.within, expect.for_) {
        (Some(span), _) => (ExpectMode::Within, span.duration()),
        (None, Some(span)) => (ExpectMode::For, span.duration()),
        (None, None) => (ExpectMode::Within, Duration::ZERO),
    };
    let start = Instant::now();
    let mut result = ExpectationResult {
        step,
        name: describe(expect),
        mode,
        span_ms: millis(span),
        satisfied: false,
        time_to_satisfy_ms: None,
        started_ms: millis(start.duration_since(scenario_start)),
        failure: None,
    };
    let mut baseline: Option<Value> = None;
    let mut last = None;
    loop {
        let verdict = match cluster.observe(expect) {
            Ok(observed) => {
                let verdict = evaluate(expect, &observed, baseline.as_ref());
                if baseline.is_none() {
                    baseline = Some(observed.clone());
                }
                last = Some(observed);
                verdict
            }
            Err(error) => Err(format!("failed to observe: {error}")),
        };
        let elapsed = start.elapsed();
        match (mode, verdict) {
            (ExpectMode::Within, Ok(())) => {
                result.satisfied = true;
                result.time_to_satisfy_ms = Some(millis(elapsed));
                return (result, last);
            }
            (ExpectMode::Within, Err(why)) => {
                result.failure = Some(why);
                if elapsed >= span {
                    return (result, last);
                }
            }
            (ExpectMode::For, Err(why)) => {
                result.failure = Some(format!(
                    "stopped holding after {} ms: {why}",
                    millis(elapsed)
                ));
                return (result, last);
            }
            (ExpectMode::For, Ok(())) => {
                if elapsed >= span {
                    result.satisfied = true;
                    return (result, last);
                }
            }
        }
        std::thread::sleep(
            pacing
                .poll_interval
                .min(span.saturating_sub(elapsed))
                .max(Duration::from_millis(1)),
        );
    }
}

/// Polls the liveness condition. The duration is measured from the last fault end (or from
/// the start of polling when no fault ended).
fn wait_converged(
    cluster: &dyn Cluster,
    recorder: &Recorder,
    pacing: Pacing,
) -> Result<Duration, String> {
    let start = Instant::now();
    let start_ns = recorder.now_ns();
    let healed_ns = recorder
        .snapshot()
        .events
        .iter()
        .rev()
        .find(|event| {
            matches!(
                event.op,
                Op::Fault {
                    phase: FaultPhase::End,
                    ..
                }
            )
        })
        .map_or(start_ns, |event| event.mono_ns);
    loop {
        match cluster.converged() {
            Ok(None) => {
                return Ok(Duration::from_nanos(
                    recorder.now_ns().saturating_sub(healed_ns),
                ))
            }
            Ok(Some(reason)) if start.elapsed() >= pacing.liveness_bound => return Err(reason),
            Err(error) if start.elapsed() >= pacing.liveness_bound => return Err(error.to_string()),
            Ok(Some(_)) | Err(_) => std::thread::sleep(pacing.poll_interval),
        }
    }
}

fn measure_from_history(history: &History, quantity: Quantity) -> Option<Duration> {
    let (timings, _) = check_timings(history);
    let last = timings.last()?;
    let ms = match quantity {
        Quantity::Detection => last.detected_ms?,
        Quantity::WriteOutage => last.first_write_ms?,
        Quantity::Convergence => return None,
    };
    Some(Duration::from_millis(ms))
}

/// Replaces `${var}` in a deploy API request and its expected body with saved values.
pub fn substitute(expect: &Expect, variables: &BTreeMap<String, String>) -> Expect {
    let mut expect = expect.clone();
    if let Some(deploy) = expect.deploy_api.as_mut() {
        deploy.request.path = substitute_str(&deploy.request.path, variables);
        if let Some(body) = deploy.request.body.as_mut() {
            substitute_value(body, variables);
        }
        if let Some(body) = deploy.body.as_mut() {
            substitute_value(body, variables);
        }
    }
    expect
}

fn substitute_value(value: &mut Value, variables: &BTreeMap<String, String>) {
    match value {
        Value::String(text) => *text = substitute_str(text, variables),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| substitute_value(item, variables)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|item| substitute_value(item, variables)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn substitute_str(text: &str, variables: &BTreeMap<String, String>) -> String {
    let mut names = Vec::new();
    collect_variables_in_str(text, &mut names);
    names.iter().fold(text.to_owned(), |acc, name| {
        acc.replace(
            &format!("${{{name}}}"),
            variables.get(name).map_or("", String::as_str),
        )
    })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
