//! Timings per failover: fault -> detected -> fenced -> promoted -> endpoints switched ->
//! DNS switched -> first acknowledged write on the new primary (the write outage, RTO).
//!
//! Operator phases come from `status.lastFailover` (the operator's wall clock, mapped onto
//! the history's monotonic axis); the last three are observed by the harness's probes.

use serde::{Deserialize, Serialize};

use super::rpo::observed_failovers;
use super::verdict::Verdict;
use crate::history::event::{EventType, FailoverKind, FaultPhase, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// Slack allowed when an operator time is compared with a harness observation: the two
/// clocks are the same machine's, but status times are written with second precision.
pub const CROSS_CLOCK_SLACK_NS: u64 = 1_000_000_000;

/// The phases of one failover, as milliseconds after the fault (or after `startedAt` when
/// no fault preceded it).
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
    pub detected_ms: Option<u64>,
    /// `fencedAt`.
    pub fenced_ms: Option<u64>,
    /// `promotedAt`.
    pub promoted_ms: Option<u64>,
    /// `-primary` endpoints became exactly the new site.
    pub endpoints_switched_ms: Option<u64>,
    /// DNS answered the new site.
    pub dns_switched_ms: Option<u64>,
    /// First write acknowledged by the new site (= RTO).
    pub first_write_ms: Option<u64>,
}

impl FailoverTimings {
    /// The write outage (RTO).
    pub fn rto_ms(&self) -> Option<u64> {
        self.first_write_ms
    }

    /// The phases in order, with names, for tables and charts.
    pub fn phases(&self) -> [(&'static str, Option<u64>); 6] {
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

fn millis_after(reference_ns: u64, at_ns: u64) -> u64 {
    at_ns.saturating_sub(reference_ns) / 1_000_000
}

/// Computes the timings of every observed failover and checks their order.
pub fn check_timings(history: &History) -> (Vec<FailoverTimings>, Verdict) {
    const NAME: &str = "timings";
    let operations = match history.operations() {
        Ok(operations) => operations,
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
    let failovers = observed_failovers(history);
    for (index, record) in failovers.iter().enumerate() {
        let Some(started_ns) = history.wall_to_mono_ns(record.started_at) else {
            continue;
        };
        let to_mono =
            |time: Option<jiff::Timestamp>| time.and_then(|time| history.wall_to_mono_ns(time));
        // The fault: the latest fault start no later than the failover's start (with slack),
        // and after the previous failover.
        let previous_ns = failovers
            .get(index.wrapping_sub(1))
            .filter(|_| index > 0)
            .and_then(|previous| history.wall_to_mono_ns(previous.started_at))
            .unwrap_or(0);
        let fault = history
            .events
            .iter()
            .rev()
            .filter(|event| {
                event.mono_ns <= started_ns + CROSS_CLOCK_SLACK_NS && event.mono_ns >= previous_ns
            })
            .filter_map(|event| match &event.op {
                Op::Fault {
                    name,
                    phase: FaultPhase::Start,
                    ..
                } if event.kind == EventType::Invoke => Some((name.clone(), event.mono_ns)),
                _ => None,
            })
            .next();
        let fault_ns = fault.as_ref().map_or(started_ns, |(_, at)| *at);
        let detected_ns = to_mono(record.detected_at);
        let fenced_ns = to_mono(record.fenced_at);
        let promoted_ns = to_mono(record.promoted_at);
        let endpoints_ns = history.events.iter().find_map(|event| match &event.op {
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
        let dns_ns = history.events.iter().find_map(|event| match &event.op {
            Op::Dns {
                site: Some(site), ..
            } if event.kind == EventType::Ok && event.mono_ns >= fault_ns && *site == record.to => {
                Some(event.mono_ns)
            }
            _ => None,
        });
        let first_write_ns = operations
            .iter()
            .filter(|operation| operation.invoke.mono_ns >= fault_ns)
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
        let label = format!(
            "{:?} failover {} -> {}",
            record.kind, record.from, record.to
        )
        .to_lowercase();
        // Operator phases share one clock: strict order.
        let operator_order = [
            ("detected", detected_ns),
            ("fenced", fenced_ns),
            ("promoted", promoted_ns),
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
        if promoted_ns.is_some() && fenced_ns.is_none() {
            findings.push(format!(
                "{label}: promoted without the old primary ever being fenced"
            ));
        }
        if record.kind == FailoverKind::Emergency {
            if let (Some((name, at)), Some(detected)) = (&fault, detected_ns) {
                if detected + CROSS_CLOCK_SLACK_NS < *at {
                    findings.push(format!("{label}: detected before the `{name}` fault began"));
                }
            }
        }
        // Surfaces may only move to a promoted site.
        if let Some(promoted) = promoted_ns {
            for (name, at) in [
                ("endpoints switched", endpoints_ns),
                ("DNS switched", dns_ns),
                ("first write", first_write_ns),
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
        let writes_after = operations.iter().any(|operation| {
            matches!(operation.invoke.op, Op::Write { .. }) && operation.invoke.mono_ns >= fault_ns
        });
        if writes_after && first_write_ns.is_none() {
            findings.push(format!(
                "{label}: the workload kept writing but {} never acknowledged a write",
                record.to
            ));
        }
        all.push(FailoverTimings {
            kind: record.kind,
            from: record.from,
            to: record.to,
            fault: fault.map(|(name, _)| name),
            fault_ns,
            detected_ms: detected_ns.map(|at| millis_after(fault_ns, at)),
            fenced_ms: fenced_ns.map(|at| millis_after(fault_ns, at)),
            promoted_ms: promoted_ns.map(|at| millis_after(fault_ns, at)),
            endpoints_switched_ms: endpoints_ns.map(|at| millis_after(fault_ns, at)),
            dns_switched_ms: dns_ns.map(|at| millis_after(fault_ns, at)),
            first_write_ms: first_write_ns.map(|at| millis_after(fault_ns, at)),
        });
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
