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
use crate::check::split_brain::unknown_outcome_write_ids;
use crate::check::timings::check_timings;
use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::recorder::Recorder;
use crate::history::store::History;
use crate::progress;
use crate::scenario::model::{Expect, HealTarget, Quantity, Step};
use crate::scenario::validate::{collect_variables_in_str, LoadedScenario};

/// How often expectations re-observe their target.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// The bound on the liveness phase after the final heal (docs/design/harness.md#one-run, step 5).
pub const LIVENESS_BOUND: Duration = Duration::from_secs(120);

/// Bound on the warm-up: the workload's first acknowledged write after it started.
pub const WARMUP_MAX: Duration = Duration::from_secs(30);

/// Whether `history` holds an acknowledged write.
pub fn has_acknowledged_write(history: &History) -> bool {
    history
        .events
        .iter()
        .any(|event| event.kind == EventType::Ok && matches!(event.op, Op::Write { .. }))
}

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
    let scenario_wall_start = jiff::Timestamp::now();
    let phase = progress::Phase::start(
        "installing the playground and waiting for its authority to be Valid on its initial active site",
    );
    let installed = cluster
        .install(&scenario.install)
        .map_err(|error| format!("failed to install: {error}"));
    phase.end(&installed);
    installed?;
    let phase = progress::Phase::start("starting the workload and waiting for its first write");
    let workload = cluster
        .start_workload(Arc::clone(recorder))
        .map_err(|error| format!("failed to start the workload: {error}"));
    let workload = match workload {
        Ok(workload) => workload,
        Err(error) => {
            let failed: Result<(), &String> = Err(&error);
            phase.end(&failed);
            return Err(error);
        }
    };
    // Warm-up: the steps start once the workload has an acknowledged write, so the first
    // fault never precedes the workload (the liveness checker's "before the first fault").
    let warmed = poll_until(
        WARMUP_MAX,
        pacing.poll_interval.min(Duration::from_millis(100)),
        || has_acknowledged_write(&recorder.snapshot()).then_some(()),
    );
    if warmed.is_none() {
        let _ = workload.stop();
        let error = format!(
            "the workload acknowledged no write within {} s of starting",
            WARMUP_MAX.as_secs()
        );
        let failed: Result<(), &String> = Err(&error);
        phase.end(&failed);
        return Err(error);
    }
    phase.end(&Ok::<(), String>(()));
    let total_steps = scenario.steps.len();
    let mut variables: BTreeMap<String, Value> = BTreeMap::new();
    // Baselines taken before an expectation's fault (`$changed`/`$unchanged`), by step.
    let mut baselines: BTreeMap<usize, Result<Value, String>> = BTreeMap::new();
    // When the latest fault, heal or apply started: events are matched only since then.
    let mut fault_started = scenario_wall_start;
    // Pods seen by this run's observations (`phase: absent` needs one it saw).
    let mut seen_pods = std::collections::BTreeSet::new();
    let mut outcome = Ok(());
    for (index, step) in scenario.steps.iter().enumerate() {
        tracing::info!(
            scenario = scenario.id,
            step = index,
            kind = step.kind(),
            "step"
        );
        if acts(step) {
            if let Some((next, expect)) = baseline_taker(&scenario.steps, index) {
                // Taken with the variables known now; one the acting step saves is not yet.
                if let Ok(expect) = substitute(expect, &variables) {
                    let observed = cluster.observe(&expect).map_err(|error| {
                        format!("failed to observe the baseline before step {index}: {error}")
                    });
                    if let Ok(observed) = &observed {
                        seen_pods.extend(pods_in(&expect, observed));
                    }
                    baselines.insert(next, observed);
                }
            }
        }
        if matches!(step, Step::Fault(_) | Step::Heal(_) | Step::Apply(_)) {
            fault_started = jiff::Timestamp::now();
        }
        let phase = progress::Phase::start(format!(
            "step {}/{total_steps} {}",
            index + 1,
            step_label(step)
        ));
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
            Step::Expect(expect) => match substitute(expect, &variables) {
                Err(why) => Err(format!("step {index}: {}: {why}", describe(expect))),
                Ok(expect) => match baselines.remove(&index) {
                    Some(Err(why)) => Err(format!("step {index}: {}: {why}", describe(&expect))),
                    baseline => {
                        let since = if expect.archive.is_some() {
                            scenario_wall_start
                        } else {
                            fault_started
                        };
                        let window = Window {
                            baseline: baseline.and_then(Result::ok),
                            since,
                            seen_pods: seen_pods.clone(),
                        };
                        let (mut result, last) =
                            run_expect(cluster, &expect, index, pacing, started, window);
                        record_archive_read(
                            recorder,
                            &expect,
                            last.as_ref(),
                            since,
                            result.satisfied,
                        );
                        if let Some(observed) = &last {
                            seen_pods.extend(pods_in(&expect, observed));
                        }
                        if result.satisfied {
                            if let (Some(deploy), Some(observed)) = (&expect.deploy_api, &last) {
                                save_variables(deploy, observed, &mut variables);
                            }
                            if let Err(why) = save_observed(&expect, last.as_ref(), &mut variables)
                            {
                                result.satisfied = false;
                                result.failure = Some(why);
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
                },
            },
            Step::Measure(measure) => {
                let value = match measure.quantity {
                    Quantity::Convergence => wait_converged(cluster, recorder, pacing).ok(),
                    Quantity::WriteGap => crate::check::liveness::longest_write_gap_ns(
                        &recorder.snapshot(),
                        recorder.now_ns(),
                    )
                    .map(Duration::from_nanos),
                    // The outage may not be over when the step starts (the expectations before
                    // it can pass before a write is acknowledged by the new primary): wait for
                    // the quantity, at most its `atMost` (else [`MEASURE_WAIT_MAX`]).
                    Quantity::Detection | Quantity::WriteOutage => poll_until(
                        measure
                            .at_most
                            .map_or(MEASURE_WAIT_MAX, |span| span.duration()),
                        pacing.poll_interval,
                        || measure_from_history(&recorder.snapshot(), measure.quantity),
                    ),
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
        phase.end(&result);
        if let Err(error) = result {
            outcome = Err(error);
            break;
        }
    }
    let phase = progress::Phase::start(
        "healing every fault, waiting for convergence, reading the final state",
    );
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
    let unread = || Op::FinalState {
        sites: BTreeMap::new(),
        committed: BTreeMap::new(),
        canaries: BTreeMap::new(),
    };
    recorder.invoke("final", unread());
    let final_read = match cluster.final_state() {
        Ok(rows) => {
            // The committing site of the writes whose outcome is unknown: the split-brain
            // checker judges where they landed.
            let unknown = unknown_outcome_write_ids(&recorder.snapshot());
            let committed = rows
                .committed
                .into_iter()
                .filter(|(id, _)| unknown.contains(id))
                .collect();
            recorder.complete(
                "final",
                EventType::Ok,
                Op::FinalState {
                    sites: rows.sites,
                    committed,
                    canaries: rows.canaries,
                },
            );
            Ok(())
        }
        Err(error) => {
            recorder.complete("final", EventType::Fail, unread());
            Err(format!("final read: failed to {error}"))
        }
    };
    // The executed GTID sets, for the operator's lostGtidSet to be compared with.
    let unread = || Op::GtidState {
        sites: BTreeMap::new(),
        last_failover: None,
        active_site: None,
        error: None,
    };
    recorder.invoke("gtid-state", unread());
    match cluster.final_gtid_state() {
        Ok(Some(op)) => recorder.complete("gtid-state", EventType::Ok, op),
        // A cluster with no MySQL to read: the checker says it judged nothing.
        Ok(None) => recorder.complete("gtid-state", EventType::Info, unread()),
        Err(error) => recorder.complete(
            "gtid-state",
            EventType::Fail,
            Op::GtidState {
                sites: BTreeMap::new(),
                last_failover: None,
                active_site: None,
                error: Some(error.to_string()),
            },
        ),
    }
    let closing = heal.and(converged).and(stopped).and(final_read);
    phase.end(&closing);
    outcome.and(closing)
}

/// Records what an `archive` expectation read last ([`Op::ArchiveRead`], process `archive`):
/// `ok` when it was satisfied, `fail` when not; nothing for other targets or when nothing was
/// read. The archive checker judges the `ok` ones after the final read.
pub fn record_archive_read(
    recorder: &Recorder,
    expect: &Expect,
    last: Option<&Value>,
    since: jiff::Timestamp,
    satisfied: bool,
) {
    if expect.archive.is_none() {
        return;
    }
    let Some(observation) = last.and_then(|value| {
        serde_json::from_value::<crate::check::archive::ArchiveObservation>(value.clone()).ok()
    }) else {
        return;
    };
    let op = |archives| Op::ArchiveRead {
        site: observation.site,
        since,
        archives,
    };
    recorder.invoke("archive", op(Vec::new()));
    let kind = if satisfied {
        EventType::Ok
    } else {
        EventType::Fail
    };
    recorder.complete("archive", kind, op(observation.archives.clone()));
}

/// A step as the progress line names it: its kind and target (`fault {"kill":{"site":"iad"}}`,
/// `expect within 30s: group activeSite pdx`), at most about a line.
pub fn step_label(step: &Step) -> String {
    let label = match step {
        Step::Expect(expect) => {
            let window = match (&expect.within, &expect.for_) {
                (Some(within), _) => format!(" within {within}"),
                (None, Some(hold)) => format!(" for {hold}"),
                (None, None) => String::new(),
            };
            format!("expect{window}: {}", describe(expect))
        }
        other => {
            let body = serde_json::to_value(other)
                .ok()
                .and_then(|value| value.as_object()?.values().next().cloned())
                .map(|value| value.to_string())
                .unwrap_or_default();
            format!("{} {body}", other.kind())
        }
    };
    if label.chars().count() > 120 {
        format!("{}...", label.chars().take(117).collect::<String>())
    } else {
        label
    }
}

/// What an expectation is judged against besides the live observation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// The baseline for `$changed`/`$unchanged`: observed before the step's fault (see
    /// [`baseline_taker`]); `None`: the expectation's first poll is its baseline.
    pub baseline: Option<Value>,
    /// Events count only from this instant: the start of the latest `fault`, `heal` or
    /// `apply` step before the expectation, else the scenario's start. Archives count from the
    /// scenario's start (a rejoin may re-use an archive written before the latest step).
    pub since: jiff::Timestamp,
    /// Every pod (`namespace/name`) a `pods` observation of this run has held so far.
    pub seen_pods: std::collections::BTreeSet<String>,
}

/// Whether a step changes the cluster: a fault, heal or apply, or a deploy API request.
fn acts(step: &Step) -> bool {
    match step {
        Step::Fault(_) | Step::Heal(_) | Step::Apply(_) => true,
        Step::Expect(expect) => expect.deploy_api.is_some(),
        Step::Measure(_) | Step::Sleep(_) => false,
    }
}

/// The expectation whose `$changed`/`$unchanged` baseline must be observed before the acting
/// step `index` runs: the next step that is not a sleep or a measurement, when it is an
/// expectation using either operator. An expectation that follows other expectations (not
/// directly its fault) takes its baseline at its own first poll.
pub fn baseline_taker(steps: &[Step], index: usize) -> Option<(usize, &Expect)> {
    steps
        .iter()
        .enumerate()
        .skip(index + 1)
        .find(|(_, step)| !matches!(step, Step::Sleep(_) | Step::Measure(_)))
        .and_then(|(next, step)| match step {
            Step::Expect(expect) if uses_baseline(expect) => Some((next, expect.as_ref())),
            _ => None,
        })
}

/// Whether an expectation uses `$changed` or `$unchanged` anywhere.
pub fn uses_baseline(expect: &Expect) -> bool {
    fn walk(value: &Value) -> bool {
        match value {
            Value::Object(map) => map
                .iter()
                .any(|(key, child)| key == "$changed" || key == "$unchanged" || walk(child)),
            Value::Array(items) => items.iter().any(walk),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => false,
        }
    }
    [
        expect.group.as_ref(),
        expect.object.as_ref().map(|object| &object.match_),
        expect.metric.as_ref().map(|metric| &metric.value),
        expect
            .counter
            .as_ref()
            .and_then(|counter| counter.connection_id.as_ref()),
        expect.pods.as_ref().and_then(|pods| pods.restarts.as_ref()),
        expect
            .deploy_api
            .as_ref()
            .and_then(|deploy| deploy.body.as_ref()),
    ]
    .into_iter()
    .flatten()
    .any(walk)
}

/// Saves the answer fields a deploy API expectation names. A field the answer lacks (or that
/// is null) is not saved, so a later `${var}` of it fails its step.
fn save_variables(
    deploy: &crate::scenario::model::DeployApiExpect,
    observed: &Value,
    variables: &mut BTreeMap<String, Value>,
) {
    for (name, field) in &deploy.save {
        match observed.pointer(&format!("/body/{field}")) {
            Some(value) if !value.is_null() => {
                variables.insert(name.clone(), value.clone());
            }
            _ => {
                variables.remove(name);
            }
        }
    }
}

/// Saves what an expectation's `save` names from the observation that satisfied it. A
/// pointer that finds nothing (or null) is an error naming it: the variable is not saved.
pub fn save_observed(
    expect: &Expect,
    observed: Option<&Value>,
    variables: &mut BTreeMap<String, Value>,
) -> Result<(), String> {
    for (name, pointer) in &expect.save {
        match observed.and_then(|value| value.pointer(pointer)) {
            Some(value) if !value.is_null() => {
                variables.insert(name.clone(), value.clone());
            }
            _ => {
                variables.remove(name);
                return Err(format!(
                    "save `{name}`: the observation has nothing at `{pointer}`"
                ));
            }
        }
    }
    Ok(())
}

/// Polls one expectation until it is decided.
pub fn run_expect(
    cluster: &dyn Cluster,
    expect: &Expect,
    step: usize,
    pacing: Pacing,
    scenario_start: Instant,
    window: Window,
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
    let mut baseline: Option<Value> = window.baseline;
    let mut last = None;
    loop {
        // An observation counts for the moment it was taken (its request sent), not for when
        // its answer came back.
        let taken = start.elapsed();
        let verdict = match cluster.observe(expect) {
            Ok(observed) => {
                let verdict = evaluate(expect, &observed, baseline.as_ref(), window.since)
                    .and_then(|()| pod_was_seen(expect, &window.seen_pods));
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
            (ExpectMode::Within, Ok(())) if late(taken, span).is_some() => {
                result.failure = late(taken, span);
                return (result, last);
            }
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
                    match super::evaluate::climbed(expect, baseline.as_ref(), last.as_ref()) {
                        Ok(()) => result.satisfied = true,
                        Err(why) => result.failure = Some(why),
                    }
                    return (result, last);
                }
            }
        }
        // The last observation of a `within` is taken just before its bound, not after it.
        let remaining = span.saturating_sub(elapsed);
        let before_bound = match mode {
            ExpectMode::Within => remaining.saturating_sub(LAST_OBSERVATION_MARGIN),
            ExpectMode::For => remaining,
        };
        std::thread::sleep(
            pacing
                .poll_interval
                .min(before_bound)
                .max(Duration::from_millis(1)),
        );
    }
}

/// Why an observation taken `taken` after a `within` step started cannot satisfy its `span`
/// bound, or `None` when it was taken in time.
pub fn late(taken: Duration, span: Duration) -> Option<String> {
    (taken > span).then(|| {
        format!(
            "satisfied only by an observation taken {} ms after the step started, past its {} ms bound",
            millis(taken),
            millis(span)
        )
    })
}

/// How long before a `within` bound its last observation is sent.
const LAST_OBSERVATION_MARGIN: Duration = Duration::from_millis(5);

/// `pods: {phase: absent}` holds only for a pod this run has seen: a pod that never existed
/// (a misspelt name, a pod that was never created) is absent too, and would pass.
pub fn pod_was_seen(
    expect: &Expect,
    seen: &std::collections::BTreeSet<String>,
) -> Result<(), String> {
    let Some(pods) = &expect.pods else {
        return Ok(());
    };
    if pods.phase.as_deref() != Some("absent") {
        return Ok(());
    }
    match pod_subject(pods) {
        Some(name) if !seen.contains(&name) => Err(format!(
            "pod {name} is absent, but this run never saw it: `phase: absent` asserts that a pod \
             that existed is gone (observe it before the step that removes it)"
        )),
        _ => Ok(()),
    }
}

/// The pod an expectation names: `namespace/name`.
fn pod_subject(pods: &crate::scenario::model::PodsExpect) -> Option<String> {
    let namespace = pods
        .namespace
        .as_deref()
        .unwrap_or(crate::playground::install::NAMESPACE);
    let name = pods.pod_name()?;
    Some(format!("{namespace}/{name}"))
}

/// Every pod an observation of a `pods` expectation holds, as `namespace/name`.
pub fn pods_in(expect: &Expect, observed: &Value) -> Vec<String> {
    let Some(pods) = &expect.pods else {
        return Vec::new();
    };
    observed
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pod| {
            let name = pod.pointer("/metadata/name")?.as_str()?;
            let namespace = pod
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .or(pods.namespace.as_deref())
                .unwrap_or(crate::playground::install::NAMESPACE);
            Some(format!("{namespace}/{name}"))
        })
        .collect()
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

/// The longest a detection or write-outage measurement waits for its value when the step
/// gives no `atMost`.
pub const MEASURE_WAIT_MAX: Duration = Duration::from_secs(30);

/// Calls `probe` every `interval` until it answers, at most `bound` (pure of the cluster).
pub fn poll_until<T>(
    bound: Duration,
    interval: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if start.elapsed() >= bound {
            return None;
        }
        std::thread::sleep(interval);
    }
}

fn measure_from_history(history: &History, quantity: Quantity) -> Option<Duration> {
    let (timings, _) = check_timings(history);
    let last = timings.last()?;
    let ms = match quantity {
        Quantity::Detection => last.detected_ms?,
        Quantity::WriteOutage => last.first_write_ms?,
        Quantity::Convergence | Quantity::WriteGap => return None,
    };
    // A negative phase (before the fault) cannot be measured: the timings checker flags it.
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// Replaces `${var}` with saved values in every field of an expectation. A string that is
/// exactly `${var}` becomes the saved value itself (a number stays a number); inside a longer
/// string the value is spliced in as text. A variable no earlier step saved is an error
/// naming it: the step fails rather than sending or matching an empty string.
pub fn substitute(expect: &Expect, variables: &BTreeMap<String, Value>) -> Result<Expect, String> {
    let mut expect = expect.clone();
    let mut missing: Vec<String> = Vec::new();
    let text = |value: &mut String, missing: &mut Vec<String>| {
        *value = splice(value, variables, missing);
    };
    let json = |value: &mut Value, missing: &mut Vec<String>| {
        substitute_value(value, variables, missing);
    };
    if let Some(name) = expect.name.as_mut() {
        text(name, &mut missing);
    }
    if let Some(group) = expect.group.as_mut() {
        json(group, &mut missing);
    }
    if let Some(pods) = expect.pods.as_mut() {
        for field in [&mut pods.name, &mut pods.namespace, &mut pods.phase]
            .into_iter()
            .flatten()
        {
            text(field, &mut missing);
        }
        if let Some(labels) = pods.labels.as_mut() {
            labels
                .values_mut()
                .for_each(|value| text(value, &mut missing));
        }
        if let Some(restarts) = pods.restarts.as_mut() {
            json(restarts, &mut missing);
        }
    }
    if let Some(endpoints) = expect.endpoints.as_mut() {
        text(&mut endpoints.service, &mut missing);
    }
    if let Some(manager) = expect
        .dns_endpoint
        .as_mut()
        .and_then(|record| record.field_manager.as_mut())
    {
        text(manager, &mut missing);
    }
    if let Some(deploy) = expect.deploy_api.as_mut() {
        text(&mut deploy.request.path, &mut missing);
        text(&mut deploy.request.client.namespace, &mut missing);
        text(&mut deploy.request.client.service_account, &mut missing);
        if let Some(body) = deploy.request.body.as_mut() {
            json(body, &mut missing);
        }
        if let Some(body) = deploy.body.as_mut() {
            json(body, &mut missing);
        }
        if let Some(expires_in) = deploy.expires_in.as_mut() {
            json(expires_in, &mut missing);
        }
    }
    if let Some(metric) = expect.metric.as_mut() {
        text(&mut metric.name, &mut missing);
        metric
            .labels
            .values_mut()
            .for_each(|value| text(value, &mut missing));
        json(&mut metric.value, &mut missing);
    }
    if let Some(event) = expect.event.as_mut() {
        text(&mut event.reason, &mut missing);
        for field in [&mut event.type_, &mut event.message_contains]
            .into_iter()
            .flatten()
        {
            text(field, &mut missing);
        }
    }
    if let Some(object) = expect.object.as_mut() {
        text(&mut object.api_version, &mut missing);
        text(&mut object.kind, &mut missing);
        text(&mut object.name, &mut missing);
        if let Some(namespace) = object.namespace.as_mut() {
            text(namespace, &mut missing);
        }
        json(&mut object.match_, &mut missing);
    }
    if let Some(connection) = expect.connection.as_mut() {
        text(&mut connection.name, &mut missing);
    }
    match missing.first() {
        None => Ok(expect),
        Some(name) => Err(format!(
            "uses `${{{name}}}`, which no earlier step saved (or the answer it was saved from lacked the field)"
        )),
    }
}

fn substitute_value(
    value: &mut Value,
    variables: &BTreeMap<String, Value>,
    missing: &mut Vec<String>,
) {
    match value {
        Value::String(text) => {
            if let Some(name) = whole_variable(text) {
                match variables.get(name) {
                    Some(saved) => *value = saved.clone(),
                    None => missing.push(name.to_owned()),
                }
            } else {
                *text = splice(text, variables, missing);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| substitute_value(item, variables, missing)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|item| substitute_value(item, variables, missing)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The variable name when `text` is exactly `${name}`.
pub fn whole_variable(text: &str) -> Option<&str> {
    let name = text.strip_prefix("${")?.strip_suffix('}')?;
    (!name.is_empty() && !name.contains(['{', '}', '$'])).then_some(name)
}

fn splice(text: &str, variables: &BTreeMap<String, Value>, missing: &mut Vec<String>) -> String {
    let mut names = Vec::new();
    collect_variables_in_str(text, &mut names);
    names
        .iter()
        .fold(text.to_owned(), |acc, name| match variables.get(name) {
            Some(saved) => {
                let shown = match saved {
                    Value::String(saved) => saved.clone(),
                    other => other.to_string(),
                };
                acc.replace(&format!("${{{name}}}"), &shown)
            }
            None => {
                missing.push(name.clone());
                acc
            }
        })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
