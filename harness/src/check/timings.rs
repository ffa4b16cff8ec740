//! Timings per failover: fault -> detected -> fenced -> promoted -> endpoints switched ->
//! DNS switched -> first acknowledged write on the new primary (the write outage, RTO).
//!
//! The reference instant is the effective start (the completion of its injection) of the
//! fault that can trigger the failover: for an emergency failover from site X, the latest
//! kill, freeze, pod deletion, node stop or partition acting on X that took effect after the
//! previous failover and before this one started; for a planned one, the latest
//! planned-failover request (annotation or `kubectl bloodraven promote`) naming its target.
//! An emergency failover no such fault explains is a finding. Phases are signed: one before
//! the fault is negative, and a finding.
//!
//! Operator phases come from `status.lastFailover` (the operator's wall clock, mapped onto
//! the history's monotonic axis); the last three are observed by the harness's probes.
//! Detection is compared with the real window: the first failed poll comes within one poll
//! interval of the fault, and the failure is declared failureThreshold - 1 intervals after
//! it, so detection lies between (failureThreshold - 1) and failureThreshold poll intervals
//! after the fault, give or take [`DETECTION_SLACK_NS`] (a partition from the peers alone
//! fails the site only when its lease runs out: the window's end moves by the default lease,
//! pollInterval x failureThreshold); while the operator is away (see
//! [`OPERATOR_OUTAGES`]) nothing is detected, so the upper bound then counts from its return.

use serde::{Deserialize, Serialize};

use super::observed::{failover_label, mono_ns, observed_failovers, seconds, CROSS_CLOCK_SLACK_NS};
use super::verdict::Verdict;
use crate::history::event::{EventType, FailoverKind, FailoverRecord, FaultPhase, Op};
use crate::history::store::{History, Operation};
use crate::scenario::model::Site;

/// Slack on both ends of the detection window: a poll in flight when the fault took effect
/// (the operator's sidecar status timeout is 1 s), and the fault's effective start being
/// recorded after it took effect.
pub const DETECTION_SLACK_NS: u64 = 1_000_000_000;

/// `spec.pollInterval` when no status snapshot recorded it (its default,
/// docs/design/operator.md#mysqlfailovergroup).
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 2_000;

/// `spec.failureThreshold` when no status snapshot recorded it (its default,
/// docs/design/operator.md#mysqlfailovergroup).
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 3;

/// Faults that can make a primary fail (an emergency failover from a site they act on).
pub const EMERGENCY_TRIGGERS: [&str; 5] =
    ["kill", "freeze", "delete-pod", "stop-node", "partition"];

/// Faults that request a planned failover (to the site they name).
pub const PLANNED_TRIGGERS: [&str; 2] = ["annotate", "plugin"];

/// Faults that take the operator away: nothing is detected while it is gone, so detection's
/// upper bound counts from its return (a healed `scale-operator`), or cannot be judged (a
/// killed or upgraded operator comes back on its own, at a time the history does not show).
pub const OPERATOR_OUTAGES: [&str; 3] = ["scale-operator", "kill-operator", "upgrade-operator"];

/// How long before a fault a killed or upgraded operator may still be on its way back.
pub const OPERATOR_RETURN_MAX_NS: u64 = 60_000_000_000;

/// The phases of one failover, as signed milliseconds after the fault (or after `startedAt`
/// when no fault can have triggered it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverTimings {
    /// emergency | planned.
    pub kind: FailoverKind,
    /// Old active site.
    pub from: Site,
    /// New active site.
    pub to: Site,
    /// The fault that started it (`kill`, `annotate`, ...), if one.
    pub fault: Option<String>,
    /// The reference instant on the history's monotonic axis.
    pub fault_ns: u64,
    /// `detectedAt`.
    pub detected_ms: Option<i64>,
    /// `fencedAt`.
    pub fenced_ms: Option<i64>,
    /// `promotedAt`.
    pub promoted_ms: Option<i64>,
    /// `-primary` endpoints became exactly the new site.
    pub endpoints_switched_ms: Option<i64>,
    /// DNS answered the new site.
    pub dns_switched_ms: Option<i64>,
    /// First write acknowledged by the new site (= RTO).
    pub first_write_ms: Option<i64>,
}

impl FailoverTimings {
    /// The write outage (RTO); never negative (the first write is looked for after the fault).
    pub fn rto_ms(&self) -> Option<u64> {
        self.first_write_ms.and_then(|ms| u64::try_from(ms).ok())
    }

    /// The phases in order, with names, for tables and charts.
    pub fn phases(&self) -> [(&'static str, Option<i64>); 6] {
        [
            ("detected", self.detected_ms),
            ("fenced", self.fenced_ms),
            ("promoted", self.promoted_ms),
            ("endpoints switched", self.endpoints_switched_ms),
            ("DNS switched", self.dns_switched_ms),
            ("first write (RTO)", self.first_write_ms),
        ]
    }
}

/// Signed milliseconds from `reference_ns` to `at_ns`.
fn millis_after(reference_ns: u64, at_ns: u64) -> i64 {
    let delta = i128::from(at_ns) - i128::from(reference_ns);
    i64::try_from(delta / 1_000_000).unwrap_or(if delta < 0 { i64::MIN } else { i64::MAX })
}

/// A fault start that took effect: its name, sites and effective start.
struct FaultStart<'a> {
    name: &'a str,
    sites: &'a [Site],
    at_ns: u64,
    /// The step's fault as written (JSON).
    detail: &'a str,
}

impl FaultStart<'_> {
    /// Whether the fault makes the site fail only once its write lease runs out: a partition
    /// from its peers alone (`partition: {peers: [...]}`) leaves it reachable by the operator
    /// and writable until its sidecar fences it for want of a lease majority.
    fn acts_through_the_lease(&self) -> bool {
        self.name == "partition"
            && serde_json::from_str::<serde_json::Value>(self.detail)
                .ok()
                .is_some_and(|fault| fault.pointer("/partition/peers").is_some())
    }
}

/// When the operator was away: a `scale-operator` from its start to its heal (None: never
/// healed, or a one-shot outage whose end the history cannot show).
fn operator_outages(history: &History) -> Vec<(&str, u64, Option<u64>)> {
    let Ok(operations) = history.operations() else {
        return Vec::new();
    };
    let mut outages: Vec<(&str, u64, Option<u64>)> = Vec::new();
    for operation in &operations {
        let Op::Fault { name, phase, .. } = &operation.invoke.op else {
            continue;
        };
        if !OPERATOR_OUTAGES.contains(&name.as_str()) || operation.outcome() == EventType::Fail {
            continue;
        }
        let at = operation.end_ns().unwrap_or(operation.invoke.mono_ns);
        match phase {
            FaultPhase::Start => outages.push((name.as_str(), at, None)),
            FaultPhase::End if name == "scale-operator" => {
                if let Some(open) = outages
                    .iter_mut()
                    .rev()
                    .find(|(kind, _, end)| *kind == name.as_str() && end.is_none())
                {
                    open.2 = Some(at);
                }
            }
            FaultPhase::End => {}
        }
    }
    outages
}

/// Every fault start whose injection did not fail, at its completion (its effective start;
/// the invoke when it never completed).
fn fault_starts(history: &History) -> Vec<FaultStart<'_>> {
    let Ok(operations) = history.operations() else {
        return Vec::new();
    };
    operations
        .iter()
        .filter(|operation| operation.outcome() != EventType::Fail)
        .filter_map(|operation| match &operation.invoke.op {
            Op::Fault {
                name,
                phase: FaultPhase::Start,
                sites,
                detail,
            } => Some(FaultStart {
                name,
                sites,
                at_ns: operation.end_ns().unwrap_or(operation.invoke.mono_ns),
                detail,
            }),
            _ => None,
        })
        .collect()
}

/// Whether a fault can have triggered this failover.
fn can_trigger(fault: &FaultStart<'_>, record: &FailoverRecord) -> bool {
    match record.kind {
        FailoverKind::Emergency => {
            EMERGENCY_TRIGGERS.contains(&fault.name) && fault.sites.contains(&record.from)
        }
        FailoverKind::Planned => {
            PLANNED_TRIGGERS.contains(&fault.name) && fault.sites.contains(&record.to)
        }
    }
}

/// The detection window's spec: the latest status snapshot's, else the defaults.
struct DetectionSpec {
    /// `spec.pollInterval`.
    poll_interval_ms: u64,
    /// `spec.failureThreshold`.
    failure_threshold: u32,
    /// The write lease: `spec.writeLease.duration`, else pollInterval x failureThreshold.
    lease_ms: u64,
    /// Whether a status snapshot recorded them (else they are the defaults).
    known: bool,
}

impl DetectionSpec {
    fn of(history: &History) -> Self {
        let (poll_interval_ms, failure_threshold, lease_ms, known) = history
            .events
            .iter()
            .rev()
            .find_map(|event| match &event.op {
                Op::Status {
                    poll_interval_ms: Some(interval),
                    failure_threshold: Some(threshold),
                    lease_ms,
                    ..
                } if event.kind == EventType::Ok => Some((*interval, *threshold, *lease_ms, true)),
                _ => None,
            })
            .unwrap_or((
                DEFAULT_POLL_INTERVAL_MS,
                DEFAULT_FAILURE_THRESHOLD,
                None,
                false,
            ));
        Self {
            poll_interval_ms,
            failure_threshold,
            lease_ms: lease_ms
                .unwrap_or_else(|| poll_interval_ms.saturating_mul(u64::from(failure_threshold))),
            known,
        }
    }
}

/// What the timings are computed from: the history's operations, the failovers observed, the
/// faults that took effect, the operator's absences and the detection window's spec.
struct Observed<'h> {
    history: &'h History,
    operations: Vec<Operation<'h>>,
    failovers: Vec<FailoverRecord>,
    faults: Vec<FaultStart<'h>>,
    outages: Vec<(&'h str, u64, Option<u64>)>,
    spec: DetectionSpec,
}

impl<'h> Observed<'h> {
    /// Gathers what `history` shows (an error names a malformed pairing).
    fn of(history: &'h History) -> Result<Self, String> {
        Ok(Self {
            history,
            operations: history.operations()?,
            failovers: observed_failovers(history),
            faults: fault_starts(history),
            outages: operator_outages(history),
            spec: DetectionSpec::of(history),
        })
    }

    /// The triggering fault of failover `index`: the latest that took effect before it started
    /// (with slack) and after the previous failover's promotion.
    fn triggering_fault(&self, index: usize) -> Option<&FaultStart<'h>> {
        let record = self.failovers.get(index)?;
        let started_ns = self.history.wall_to_mono_ns(record.started_at)?;
        let previous_ns = index
            .checked_sub(1)
            .and_then(|back| self.failovers.get(back))
            .and_then(|previous| {
                mono_ns(self.history, previous.promoted_at)
                    .or_else(|| mono_ns(self.history, Some(previous.started_at)))
            })
            .unwrap_or(0);
        self.faults
            .iter()
            .filter(|fault| {
                fault.at_ns <= started_ns + CROSS_CLOCK_SLACK_NS
                    && fault.at_ns >= previous_ns
                    && can_trigger(fault, record)
            })
            .max_by_key(|fault| fault.at_ns)
    }

    /// Where the new site of failover `index` stops being its to judge: where the next
    /// failover's trigger took it away (or the next failover started). A write invoked after
    /// that is the next failover's to judge, and an acknowledgement after it is not this
    /// failover's first write.
    fn tenure_end_ns(&self, index: usize) -> u64 {
        self.failovers.get(index + 1).map_or(u64::MAX, |next| {
            self.triggering_fault(index + 1)
                .map(|fault| fault.at_ns)
                .or_else(|| self.history.wall_to_mono_ns(next.started_at))
                .unwrap_or(u64::MAX)
        })
    }

    /// The phases of `record` on the monotonic axis, the probes' looked for from `fault_ns`.
    fn phases(&self, record: &FailoverRecord, fault_ns: u64, tenure_end_ns: u64) -> Phases {
        let events = &self.history.events;
        let endpoints_ns = events.iter().find_map(|event| match &event.op {
            Op::Endpoints { service, sites }
                if event.kind == EventType::Ok
                    && event.mono_ns >= fault_ns
                    && service == "primary"
                    && sites.as_slice() == [record.to] =>
            {
                Some(event.mono_ns)
            }
            _ => None,
        });
        let dns_ns = events.iter().find_map(|event| match &event.op {
            Op::Dns {
                site: Some(site), ..
            } if event.kind == EventType::Ok && event.mono_ns >= fault_ns && *site == record.to => {
                Some(event.mono_ns)
            }
            _ => None,
        });
        let first_write_ns = self
            .operations
            .iter()
            .filter(|operation| {
                operation.invoke.mono_ns >= fault_ns && operation.invoke.mono_ns < tenure_end_ns
            })
            .filter_map(|operation| match operation.completion {
                Some(completion) if completion.kind == EventType::Ok => match completion.op {
                    Op::Write {
                        site: Some(site), ..
                    } if site == record.to => Some(completion.mono_ns),
                    _ => None,
                },
                _ => None,
            })
            .min();
        Phases {
            fault_ns,
            tenure_end_ns,
            detected_ns: mono_ns(self.history, record.detected_at),
            fenced_ns: mono_ns(self.history, record.fenced_at),
            promoted_ns: mono_ns(self.history, record.promoted_at),
            endpoints_ns,
            dns_ns,
            first_write_ns,
        }
    }
}

/// One failover's phases on the history's monotonic axis.
struct Phases {
    /// The reference instant: the triggering fault's effective start, else `startedAt`.
    fault_ns: u64,
    /// The end of the new site's tenure ([`Observed::tenure_end_ns`]).
    tenure_end_ns: u64,
    detected_ns: Option<u64>,
    fenced_ns: Option<u64>,
    promoted_ns: Option<u64>,
    endpoints_ns: Option<u64>,
    dns_ns: Option<u64>,
    first_write_ns: Option<u64>,
}

impl Phases {
    /// The phases as signed milliseconds after the reference instant.
    fn timings(&self, record: &FailoverRecord, fault: Option<&FaultStart<'_>>) -> FailoverTimings {
        let after = |at: Option<u64>| at.map(|at| millis_after(self.fault_ns, at));
        FailoverTimings {
            kind: record.kind,
            from: record.from,
            to: record.to,
            fault: fault.map(|fault| fault.name.to_owned()),
            fault_ns: self.fault_ns,
            detected_ms: after(self.detected_ns),
            fenced_ms: after(self.fenced_ns),
            promoted_ms: after(self.promoted_ns),
            endpoints_switched_ms: after(self.endpoints_ns),
            dns_switched_ms: after(self.dns_ns),
            first_write_ms: after(self.first_write_ns),
        }
    }
}

/// Computes the timings of every observed failover and checks their order.
pub fn check_timings(history: &History) -> (Vec<FailoverTimings>, Verdict) {
    const NAME: &str = "timings";
    let observed = match Observed::of(history) {
        Ok(observed) => observed,
        Err(malformed) => {
            return (
                Vec::new(),
                Verdict::from_findings(
                    NAME,
                    String::new(),
                    vec![format!("malformed history: {malformed}")],
                ),
            )
        }
    };
    let mut findings = Vec::new();
    let mut all = Vec::new();
    for (index, record) in observed.failovers.iter().enumerate() {
        let Some(started_ns) = history.wall_to_mono_ns(record.started_at) else {
            continue;
        };
        let (timings, found) = judge_failover(&observed, index, started_ns);
        findings.extend(found);
        all.push(timings);
    }
    let ok = if all.is_empty() {
        "no failover observed".to_owned()
    } else {
        all.iter()
            .map(|timings| {
                format!(
                    "{} -> {}: RTO {}",
                    timings.from,
                    timings.to,
                    timings
                        .rto_ms()
                        .map_or_else(|| "n/a".to_owned(), |ms| format!("{ms} ms"))
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    (all, Verdict::from_findings(NAME, ok, findings))
}

/// The timings of failover `index` (started at `started_ns`) and the findings about them.
fn judge_failover(
    observed: &Observed<'_>,
    index: usize,
    started_ns: u64,
) -> (FailoverTimings, Vec<String>) {
    let record = &observed.failovers[index];
    let label = failover_label(record);
    let fault = observed.triggering_fault(index);
    let mut findings = Vec::new();
    if fault.is_none() && record.kind == FailoverKind::Emergency {
        findings.push(format!(
            "{label}: no fault that can trigger it ({} of {}) took effect before it started at {:.3}s",
            EMERGENCY_TRIGGERS.join(", "),
            record.from,
            seconds(started_ns)
        ));
    }
    let fault_ns = fault.map_or(started_ns, |fault| fault.at_ns);
    let phases = observed.phases(record, fault_ns, observed.tenure_end_ns(index));
    findings.extend(missing_evidence(&label, record));
    let timings = phases.timings(record, fault);
    // A phase before the fault: negative, a finding (only meaningful with a fault).
    if let Some(fault) = fault {
        for (name, value) in timings.phases() {
            if let Some(ms) = value.filter(|ms| *ms < 0) {
                findings.push(format!(
                    "{label}: {name} {ms} ms after the `{}` fault took effect (a negative phase)",
                    fault.name
                ));
            }
        }
    }
    if let (Some(fault), Some(detected), FailoverKind::Emergency) =
        (fault, phases.detected_ns, record.kind)
    {
        findings.extend(detection_outside_window(observed, &label, fault, detected));
    }
    findings.extend(out_of_order(&label, record, &phases));
    if let Some(finding) = no_write_acknowledged(observed, &label, record, &phases) {
        findings.push(finding);
    }
    (timings, findings)
}

/// Missing evidence is a finding: a completed emergency failover without one of its phase
/// times would switch that phase's checks off without a word.
fn missing_evidence(label: &str, record: &FailoverRecord) -> Option<String> {
    if record.kind != FailoverKind::Emergency || record.completed_at.is_none() {
        return None;
    }
    let missing: Vec<&str> = [
        ("detectedAt", record.detected_at),
        ("fencedAt", record.fenced_at),
        ("promotedAt", record.promoted_at),
    ]
    .into_iter()
    .filter(|(_, time)| time.is_none())
    .map(|(name, _)| name)
    .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{label}: missing evidence: completed without {} (its timings cannot be judged)",
            missing.join(", ")
        )
    })
}

/// Detection (at `detected`) against the real window after `fault` (module docs).
fn detection_outside_window(
    observed: &Observed<'_>,
    label: &str,
    fault: &FaultStart<'_>,
    detected: u64,
) -> Option<String> {
    let DetectionSpec {
        poll_interval_ms,
        failure_threshold,
        lease_ms,
        known,
    } = observed.spec;
    let interval_ns = poll_interval_ms.saturating_mul(1_000_000);
    let threshold = u64::from(failure_threshold.max(1));
    let earliest = (threshold - 1) * interval_ns;
    // A fault acting through the lease starts the failure when the lease runs out: up to
    // the lease later (the spec's, by default pollInterval x failureThreshold).
    let latest = threshold * interval_ns
        + if fault.acts_through_the_lease() {
            lease_ms.saturating_mul(1_000_000)
        } else {
            0
        };
    let back_ns = operator_back_ns(&observed.outages, fault, detected);
    let measured = back_ns.map(|back| detected.saturating_sub(back));
    let source = if known {
        "the group's spec"
    } else {
        "the defaults"
    };
    if detected < fault.at_ns + earliest.saturating_sub(DETECTION_SLACK_NS) {
        return Some(format!(
            "{label}: detected {} ms after the `{}` fault, before the {} ms of failureThreshold - 1 = {} poll intervals of {poll_interval_ms} ms ({source})",
            millis_after(fault.at_ns, detected),
            fault.name,
            earliest / 1_000_000,
            threshold - 1
        ));
    }
    let measured = measured.filter(|ns| *ns > latest + DETECTION_SLACK_NS)?;
    let after = if back_ns == Some(fault.at_ns) {
        format!("the `{}` fault", fault.name)
    } else {
        "the operator came back".to_owned()
    };
    Some(format!(
        "{label}: detected {} ms after {after}, after the {} ms of failureThreshold {threshold} poll intervals of {poll_interval_ms} ms ({source})",
        measured / 1_000_000,
        latest / 1_000_000
    ))
}

/// Where detection's upper bound counts from: the fault, or the operator's return when it was
/// away during the detection (`None`: a return the history does not show).
fn operator_back_ns(
    outages: &[(&str, u64, Option<u64>)],
    fault: &FaultStart<'_>,
    detected: u64,
) -> Option<u64> {
    let mut back_ns = Some(fault.at_ns);
    for (_, start, end) in outages {
        let over = match end {
            Some(end) => *end < fault.at_ns,
            None => *start + OPERATOR_RETURN_MAX_NS < fault.at_ns,
        };
        if *start > detected || over {
            continue;
        }
        back_ns = match (back_ns, end) {
            (Some(back), Some(end)) => Some(back.max(*end)),
            _ => None,
        };
    }
    back_ns
}

/// The operator's phases in strict order (they share one clock), a promotion only after a
/// fence, and the surfaces moving only to a promoted site.
fn out_of_order(label: &str, record: &FailoverRecord, phases: &Phases) -> Vec<String> {
    let mut findings = Vec::new();
    let operator_order = [
        ("detected", phases.detected_ns),
        ("fenced", phases.fenced_ns),
        ("promoted", phases.promoted_ns),
    ];
    let mut previous: Option<(&str, u64)> = None;
    for (name, at) in operator_order {
        if let Some(at) = at {
            if let Some((previous_name, previous_at)) = previous {
                if at < previous_at {
                    findings.push(format!(
                        "{label}: {name} is {} ms before {previous_name}",
                        (previous_at - at) / 1_000_000
                    ));
                }
            }
            previous = Some((name, at));
        }
    }
    if phases.promoted_ns.is_some() && phases.fenced_ns.is_none() {
        findings.push(format!(
            "{label}: promoted without the old primary ever being fenced"
        ));
    }
    // Surfaces may only move to a promoted site.
    if let Some(promoted) = phases.promoted_ns {
        for (name, at) in [
            ("endpoints switched", phases.endpoints_ns),
            ("DNS switched", phases.dns_ns),
            ("first write", phases.first_write_ns),
        ] {
            if let Some(at) = at {
                if at + CROSS_CLOCK_SLACK_NS < promoted {
                    findings.push(format!(
                        "{label}: {name} {} ms before {} was promoted",
                        (promoted - at) / 1_000_000,
                        record.to
                    ));
                }
            }
        }
    }
    findings
}

/// The workload kept writing in the new site's tenure, but the new site never acknowledged a
/// write. Only a tenure long enough for the operator to confirm the new site and move the
/// primary Service (two polls after the promotion) can be expected to show a write.
fn no_write_acknowledged(
    observed: &Observed<'_>,
    label: &str,
    record: &FailoverRecord,
    phases: &Phases,
) -> Option<String> {
    let switch_grace_ns = 2 * observed.spec.poll_interval_ms * 1_000_000;
    let judged = phases
        .promoted_ns
        .is_none_or(|promoted| phases.tenure_end_ns.saturating_sub(promoted) >= switch_grace_ns);
    let writes_after = observed.operations.iter().any(|operation| {
        matches!(operation.invoke.op, Op::Write { .. })
            && operation.invoke.mono_ns >= phases.fault_ns
            && operation.invoke.mono_ns < phases.tenure_end_ns
    });
    (judged && writes_after && phases.first_write_ns.is_none()).then(|| {
        format!(
            "{label}: the workload kept writing but {} never acknowledged a write",
            record.to
        )
    })
}
