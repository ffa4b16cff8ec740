//! Running one scenario's steps against a [`Cluster`]: faults, waits, assertions and
//! measurements, then heal, the liveness phase and the final read.

use std::collections::{BTreeMap, BTreeSet};
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
use crate::scenario::model::{Expect, HealTarget, Measure, Quantity, Step};
use crate::scenario::validate::LoadedScenario;
use crate::targets::{Observation, Substitution};

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
    let workload = install_and_warm_up(cluster, &scenario.install, pacing, recorder)?;
    let mut steps = StepRun {
        cluster,
        recorder,
        pacing,
        started,
        scenario_wall_start,
        variables: BTreeMap::new(),
        baselines: BTreeMap::new(),
        fault_started: scenario_wall_start,
        seen_pods: BTreeSet::new(),
    };
    let total_steps = scenario.steps.len();
    let mut outcome = Ok(());
    for (index, step) in scenario.steps.iter().enumerate() {
        tracing::info!(
            scenario = scenario.id,
            step = index,
            kind = step.kind(),
            "step"
        );
        steps.before(&scenario.steps, index);
        let phase = progress::Phase::start(format!(
            "step {}/{total_steps} {}",
            index + 1,
            step_label(step)
        ));
        let result = steps.run(index, step, run);
        phase.end(&result);
        if let Err(error) = result {
            outcome = Err(error);
            break;
        }
    }
    outcome.and(close_run(cluster, recorder, pacing, workload))
}

/// Installs the playground and starts the workload; the steps start once it has an
/// acknowledged write, so the first fault never precedes the workload (the liveness
/// checker's "before the first fault").
fn install_and_warm_up(
    cluster: &dyn Cluster,
    install: &crate::scenario::model::Install,
    pacing: Pacing,
    recorder: &Arc<Recorder>,
) -> Result<Box<dyn crate::backend::Workload>, String> {
    let phase = progress::Phase::start(
        "installing the playground and waiting for its authority to be Valid on its initial active site",
    );
    let installed = cluster
        .install(install)
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
    Ok(workload)
}

/// The steps' shared state while a scenario runs.
struct StepRun<'a> {
    cluster: &'a dyn Cluster,
    recorder: &'a Arc<Recorder>,
    pacing: Pacing,
    started: Instant,
    scenario_wall_start: jiff::Timestamp,
    /// Variables saved so far (`save`, deploy API `save`).
    variables: BTreeMap<String, Value>,
    /// Baselines taken before an expectation's fault (`$changed`/`$unchanged`), by step.
    baselines: BTreeMap<usize, Result<Observation, String>>,
    /// When the latest fault, action, heal or apply started: events are matched only since
    /// then.
    fault_started: jiff::Timestamp,
    /// Pods seen by this run's observations (`phase: absent` needs one it saw).
    seen_pods: BTreeSet<String>,
}

impl StepRun<'_> {
    /// Before step `index` runs: the baseline of the expectation after an acting step, and
    /// the start of the events window.
    fn before(&mut self, steps: &[Step], index: usize) {
        let step = &steps[index];
        if acts(step) {
            if let Some((next, expect)) = baseline_taker(steps, index) {
                // Taken with the variables known now; one the acting step saves is not yet.
                if let Ok(expect) = substitute(expect, &self.variables) {
                    let observed = self.cluster.observe(&expect).map_err(|error| {
                        format!("failed to observe the baseline before step {index}: {error}")
                    });
                    if let Ok(observed) = &observed {
                        self.seen_pods.extend(expect.target.pods_seen(observed));
                    }
                    self.baselines.insert(next, observed);
                }
            }
        }
        if matches!(
            step,
            Step::Fault(_) | Step::Do(_) | Step::Heal(_) | Step::Apply(_)
        ) {
            self.fault_started = jiff::Timestamp::now();
        }
    }

    /// Runs step `index`.
    fn run(&mut self, index: usize, step: &Step, run: &mut ScenarioRun) -> Result<(), String> {
        let (cluster, recorder) = (self.cluster, self.recorder.as_ref());
        let failed = |error: crate::error::Error| format!("step {index}: failed to {error}");
        match step {
            Step::Apply(apply) => cluster.apply(apply).map_err(failed),
            Step::Fault(fault) => cluster.inject(fault, recorder).map_err(failed),
            Step::Do(action) => cluster.act(action, recorder).map_err(failed),
            Step::Heal(target) => cluster.heal(target, recorder).map_err(failed),
            Step::Sleep(span) => {
                std::thread::sleep(span.duration());
                Ok(())
            }
            Step::Expect(expect) => self.expect(index, expect, run),
            Step::Measure(measure) => {
                run.measures.push(self.measure(index, measure));
                Ok(())
            }
        }
    }

    /// Polls an expectation (its `${var}` substituted) until it is decided, records what it
    /// read, and saves what it names.
    fn expect(
        &mut self,
        index: usize,
        expect: &Expect,
        run: &mut ScenarioRun,
    ) -> Result<(), String> {
        let expect = substitute(expect, &self.variables)
            .map_err(|why| format!("step {index}: {}: {why}", describe(expect)))?;
        let baseline = match self.baselines.remove(&index) {
            Some(Err(why)) => return Err(format!("step {index}: {}: {why}", describe(&expect))),
            baseline => baseline.and_then(Result::ok),
        };
        let since = if expect.target.counts_from_scenario_start() {
            self.scenario_wall_start
        } else {
            self.fault_started
        };
        let window = Window {
            baseline,
            since,
            seen_pods: self.seen_pods.clone(),
        };
        let (mut result, last) = run_expect(
            self.cluster,
            &expect,
            index,
            self.pacing,
            self.started,
            window,
        );
        expect
            .target
            .record(self.recorder, last.as_ref(), since, result.satisfied);
        if let Some(observed) = &last {
            self.seen_pods.extend(expect.target.pods_seen(observed));
        }
        if result.satisfied {
            if let Some(observed) = &last {
                save_answer(&expect, observed, &mut self.variables);
            }
            if let Err(why) = save_observed(&expect, last.as_ref(), &mut self.variables) {
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

    /// Measures a quantity.
    fn measure(&self, index: usize, measure: &Measure) -> MeasureResult {
        let (cluster, recorder, pacing) = (self.cluster, self.recorder, self.pacing);
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
        MeasureResult {
            step: index,
            quantity: measure.quantity,
            value_ms: value.map(millis),
            at_least_ms: measure.at_least.map(|span| millis(span.duration())),
            at_most_ms: measure.at_most.map(|span| millis(span.duration())),
        }
    }
}

/// Heals everything, then the liveness phase and the final read, even after a failure: the
/// history needs its final state and the cluster must be left converged for reuse.
fn close_run(
    cluster: &dyn Cluster,
    recorder: &Recorder,
    pacing: Pacing,
    workload: Box<dyn crate::backend::Workload>,
) -> Result<(), String> {
    let phase = progress::Phase::start(
        "healing every fault, waiting for convergence, reading the final state",
    );
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
    let final_read = record_final_state(cluster, recorder);
    record_gtid_state(cluster, recorder);
    let closing = heal.and(converged).and(stopped).and(final_read);
    phase.end(&closing);
    closing
}

/// The final read ([`Op::FinalState`]), with the committing site of the writes whose outcome
/// is unknown: the split-brain checker judges where they landed.
fn record_final_state(cluster: &dyn Cluster, recorder: &Recorder) -> Result<(), String> {
    let unread = || Op::FinalState {
        sites: BTreeMap::new(),
        committed: BTreeMap::new(),
        canaries: BTreeMap::new(),
    };
    recorder.invoke("final", unread());
    match cluster.final_state() {
        Ok(rows) => {
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
    }
}

/// The executed GTID sets ([`Op::GtidState`]), for the operator's lostGtidSet to be compared
/// with.
fn record_gtid_state(cluster: &dyn Cluster, recorder: &Recorder) {
    let unread = |error: Option<String>| Op::GtidState {
        sites: BTreeMap::new(),
        last_failover: None,
        active_site: None,
        error,
    };
    recorder.invoke("gtid-state", unread(None));
    match cluster.final_gtid_state() {
        Ok(Some(op)) => recorder.complete("gtid-state", EventType::Ok, op),
        // A cluster with no MySQL to read: the checker says it judged nothing.
        Ok(None) => recorder.complete("gtid-state", EventType::Info, unread(None)),
        Err(error) => recorder.complete(
            "gtid-state",
            EventType::Fail,
            unread(Some(error.to_string())),
        ),
    }
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
    pub baseline: Option<Observation>,
    /// Events count only from this instant: the start of the latest `fault`, `do`, `heal`
    /// or `apply` step before the expectation, else the scenario's start. Archives count from the
    /// scenario's start (a rejoin may re-use an archive written before the latest step).
    pub since: jiff::Timestamp,
    /// Every pod (`namespace/name`) a `pods` observation of this run has held so far.
    pub seen_pods: std::collections::BTreeSet<String>,
}

/// Whether a step changes the cluster: a fault, action, heal or apply, or a deploy API request.
fn acts(step: &Step) -> bool {
    match step {
        Step::Fault(_) | Step::Do(_) | Step::Heal(_) | Step::Apply(_) => true,
        Step::Expect(expect) => expect.target.acts(),
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
    expect.target.patterns().into_iter().any(walk)
}

/// Saves what the satisfying answer itself names (a deploy API expectation's `save` of body
/// fields): a field the answer lacks (or that is null) is forgotten, so a later `${var}` of it
/// fails its step.
fn save_answer(expect: &Expect, observed: &Observation, variables: &mut BTreeMap<String, Value>) {
    for (name, value) in expect.target.answer_variables(observed) {
        match value {
            Some(value) => {
                variables.insert(name, value);
            }
            None => {
                variables.remove(&name);
            }
        }
    }
}

/// Saves what an expectation's `save` names from the observation that satisfied it. A
/// pointer that finds nothing (or null) is an error naming it: the variable is not saved.
pub fn save_observed(
    expect: &Expect,
    observed: Option<&Observation>,
    variables: &mut BTreeMap<String, Value>,
) -> Result<(), String> {
    let observed = observed.map(Observation::to_json);
    for (name, pointer) in &expect.save {
        match observed.as_ref().and_then(|value| value.pointer(pointer)) {
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
) -> (ExpectationResult, Option<Observation>) {
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
    let mut baseline: Option<Observation> = window.baseline;
    let mut last = None;
    loop {
        // An observation counts for the moment it was taken (its request sent), not for when
        // its answer came back.
        let taken = start.elapsed();
        let verdict = match cluster.observe(expect) {
            Ok(observed) => {
                let verdict = evaluate(expect, &observed, baseline.as_ref(), window.since)
                    .and_then(|()| expect.target.check_seen(&window.seen_pods));
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
    let mut substitution = Substitution::new(variables);
    substitution.texts(expect.name.as_mut());
    expect.target.substitute(&mut substitution);
    match substitution.first_missing() {
        None => Ok(expect),
        Some(name) => Err(format!(
            "uses `${{{name}}}`, which no earlier step saved (or the answer it was saved from lacked the field)"
        )),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
