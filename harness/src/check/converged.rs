//! The liveness condition after heal (docs/design/harness.md#one-run, step 5), as a pure judgement
//! the backends' [`crate::backend::Cluster::converged`] call with the group's `.status` they just
//! read and the history so far ([`crate::history::recorder::Recorder::snapshot`]).
//!
//! Converged means: authority Valid; exactly one writable site, the active one, reachable and not
//! fenced; every other site healthy, except a returning old primary (the last failover's `from`)
//! kept fenced, read-only, because of errant GTIDs it was read with (reachable: a frozen or dead
//! mysqld's last-known GTIDs are no reading); an emergency failover whose old primary is readable
//! again has an exact lost set (docs/design/operator.md#emergency-failover, step 6; R001.8); since
//! the last heal, the latest DNS answer names the active site and the latest `-primary` endpoints
//! (if probed) are exactly it; and a write invoked after the last heal was acknowledged by the
//! active site.

use serde_json::Value;

use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// `None` when the group has converged, else the first reason it has not.
pub fn converged(status: &Value, history: &History) -> Option<String> {
    let authority = status
        .pointer("/authority/state")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if authority != "Valid" {
        return Some(format!("authority is {authority}"));
    }
    let Some(active_name) = status.get("activeSite").and_then(Value::as_str) else {
        return Some("no active site".to_owned());
    };
    let Some(active) = Site::from_name(active_name) else {
        return Some(format!(
            "the active site `{active_name}` is not a playground site"
        ));
    };
    let sites = status
        .get("sites")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if sites.is_empty() {
        return Some("the status lists no site".to_owned());
    }
    let flag = |site: &Value, key: &str| site.get(key).and_then(Value::as_bool) == Some(true);
    let name_of = |site: &Value| {
        site.get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    let writable: Vec<String> = sites
        .iter()
        .filter(|site| flag(site, "writable"))
        .map(name_of)
        .collect();
    if writable != [active_name] {
        return Some(format!(
            "writable sites [{}], expected only the active site {active_name}",
            writable.join(", ")
        ));
    }
    let returning = status.pointer("/lastFailover/from").and_then(Value::as_str);
    for site in sites {
        let name = name_of(site);
        if name == active_name {
            if !flag(site, "reachable") || flag(site, "fenced") {
                return Some(format!(
                    "the active site {name} is {}",
                    if flag(site, "fenced") {
                        "fenced"
                    } else {
                        "unreachable"
                    }
                ));
            }
            continue;
        }
        if flag(site, "healthy") {
            continue;
        }
        let errant = site
            .get("errantGtidSet")
            .and_then(Value::as_str)
            .is_some_and(|set| !set.trim().is_empty());
        let kept_fenced =
            flag(site, "fenced") || site.get("role").and_then(Value::as_str) == Some("fenced");
        if errant && kept_fenced && flag(site, "reachable") && returning == Some(name.as_str()) {
            // A returning old primary with errant transactions stays fenced
            // (docs/design/operator.md#returning-primary).
            continue;
        }
        return Some(if errant && kept_fenced && !flag(site, "reachable") {
            format!("{name} is unreachable (its errant GTIDs are from its last reading)")
        } else if errant && kept_fenced {
            format!(
                "{name} is fenced with errant GTIDs but was not the last failover's old primary"
            )
        } else if errant {
            format!("{name} has errant GTIDs but is not kept fenced")
        } else {
            format!("{name} is not healthy")
        });
    }
    if let Some(reason) = inexact_failover(status, sites) {
        return Some(reason);
    }
    history_converged(active, history)
}

/// docs/design/operator.md#emergency-failover, step 6 (and R001.8): once an emergency failover's
/// old primary is readable again, the operator reads what it had that the new primary lacks, and
/// `lastFailover.exact` turns true.
fn inexact_failover(status: &Value, sites: &[Value]) -> Option<String> {
    let failover = status.get("lastFailover")?;
    if failover.get("kind").and_then(Value::as_str) != Some("emergency")
        || failover.get("exact").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let from = failover.get("from").and_then(Value::as_str)?;
    let readable = sites.iter().any(|site| {
        site.get("name").and_then(Value::as_str) == Some(from)
            && site.get("reachable").and_then(Value::as_bool) == Some(true)
    });
    readable.then(|| {
        format!(
            "the emergency failover {from} -> {} is not exact though {from} is readable again",
            failover.get("to").and_then(Value::as_str).unwrap_or("?")
        )
    })
}

/// The conditions the history shows: DNS, endpoints and a write since the last heal.
fn history_converged(active: Site, history: &History) -> Option<String> {
    let healed_ns = history
        .events
        .iter()
        .rev()
        .find(|event| {
            event.kind != EventType::Invoke
                && matches!(
                    event.op,
                    Op::Fault {
                        phase: FaultPhase::End,
                        ..
                    }
                )
        })
        .map_or(0, |event| event.mono_ns);
    let since = || {
        history
            .events
            .iter()
            .filter(move |event| event.kind == EventType::Ok && event.mono_ns >= healed_ns)
    };
    let dns = since()
        .filter_map(|event| match &event.op {
            Op::Dns { site, .. } => Some(*site),
            _ => None,
        })
        .next_back();
    match dns {
        None => return Some("no DNS answer since the heal".to_owned()),
        Some(site) if site != Some(active) => {
            return Some(format!(
                "DNS answers {}, not the active site {active}",
                site.map_or_else(|| "no site".to_owned(), |site| site.to_string())
            ))
        }
        Some(_) => {}
    }
    let endpoints = since()
        .filter_map(|event| match &event.op {
            Op::Endpoints { service, sites } if service == "primary" => Some(sites.clone()),
            _ => None,
        })
        .next_back();
    if let Some(sites) = endpoints.filter(|sites| sites.as_slice() != [active]) {
        return Some(format!(
            "-primary endpoints are [{}], not the active site {active}",
            sites
                .iter()
                .map(|site| site.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let Ok(operations) = history.operations() else {
        return Some("the history is malformed".to_owned());
    };
    let acknowledged = operations.iter().any(|operation| {
        operation.invoke.mono_ns >= healed_ns
            && matches!(
                operation.completion,
                Some(event) if event.kind == EventType::Ok
                    && matches!(event.op, Op::Write { site: Some(site), .. } if site == active)
            )
    });
    if !acknowledged {
        return Some(format!(
            "no write invoked since the heal was acknowledged by {active}"
        ));
    }
    None
}
