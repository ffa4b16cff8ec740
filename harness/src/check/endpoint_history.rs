//! "No endpoint flap" judged from the probe history (docs/design/history.md#issue-11, scenario
//! 050): every endpoint set the workload's probe recorded for a shared Service since an instant
//! must be exactly the expected sites, and the probe must have kept recording (no gap longer than
//! [`MAX_PROBE_GAP`]), so a flap cannot hide between samples the harness never took.
//!
//! The observation (`endpoints: {recorded: true}`, built by the live cluster from its
//! recorder) is `{"now": RFC 3339, "recorded": [{"wall": RFC 3339, "ok": bool, "sites":
//! ["iad"]}, ...]}`, one entry per completed probe of the Service, oldest first.

use std::time::Duration;

use serde_json::{json, Value};

use crate::history::event::{EventType, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// The longest the probe may go without a successful reading of the Service inside the
/// judged window (it probes every 200 ms; an API read rarely takes a second even under load).
pub const MAX_PROBE_GAP: Duration = Duration::from_secs(3);

/// The observation of `service`'s recorded endpoint sets in `history`, at `now`.
pub fn recorded_endpoints(history: &History, service: &str, now: jiff::Timestamp) -> Value {
    let recorded: Vec<Value> = history
        .events
        .iter()
        .filter(|event| event.kind.is_completion())
        .filter_map(|event| match &event.op {
            Op::Endpoints {
                service: probed,
                sites,
            } if probed == service => Some(json!({
                "wall": event.wall.to_string(),
                "ok": event.kind == EventType::Ok,
                "sites": sites.iter().map(|site| site.name()).collect::<Vec<_>>(),
            })),
            _ => None,
        })
        .collect();
    json!({"now": now.to_string(), "recorded": recorded})
}

/// Judges an observation of [`recorded_endpoints`]: from `since` to its `now`, every
/// successful reading is exactly `expected` (any order), at least one was taken, and no two
/// successive ones (nor `since` and the first, nor the last and `now`) are further apart than
/// [`MAX_PROBE_GAP`]. The error names the first differing reading, or the gap.
pub fn judge(
    service: &str,
    expected: &[Site],
    observed: &Value,
    since: jiff::Timestamp,
) -> Result<(), String> {
    let time = |value: &Value| {
        value
            .as_str()
            .and_then(|text| text.parse::<jiff::Timestamp>().ok())
    };
    let now = time(&observed["now"])
        .ok_or_else(|| format!("{service} endpoint history: no `now` in {observed}"))?;
    let mut want: Vec<&str> = expected.iter().map(|site| site.name()).collect();
    want.sort_unstable();
    let mut readings = 0_usize;
    let mut previous = since;
    let mut widest = (Duration::ZERO, since);
    let entries = observed["recorded"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for entry in entries {
        let Some(wall) = time(&entry["wall"]) else {
            return Err(format!("{service} endpoint history: undated entry {entry}"));
        };
        if wall < since || entry["ok"].as_bool() != Some(true) {
            continue;
        }
        let mut found: Vec<&str> = entry["sites"]
            .as_array()
            .map(|sites| sites.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        found.sort_unstable();
        if found != want {
            return Err(format!(
                "{service} endpoints flapped: recorded {found:?} at {wall:.3}, expected {want:?} throughout since {since:.3}"
            ));
        }
        readings += 1;
        widest = widest.max((gap(previous, wall), previous));
        previous = wall;
    }
    if readings == 0 {
        return Err(format!(
            "{service} endpoint history: no successful probe recorded since {since:.3}"
        ));
    }
    widest = widest.max((gap(previous, now), previous));
    if widest.0 > MAX_PROBE_GAP {
        return Err(format!(
            "{service} endpoint history: no successful probe for {} ms after {:.3} (bound {} ms), so a flap could hide there",
            widest.0.as_millis(),
            widest.1,
            MAX_PROBE_GAP.as_millis()
        ));
    }
    Ok(())
}

fn gap(from: jiff::Timestamp, to: jiff::Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::recorder::Recorder;

    fn at(second: i64, millis: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_millisecond(1_796_000_000_000 + second * 1000 + millis)
            .expect("in range")
    }

    fn observation(now: jiff::Timestamp, entries: &[(jiff::Timestamp, bool, &[&str])]) -> Value {
        json!({
            "now": now.to_string(),
            "recorded": entries
                .iter()
                .map(|(wall, ok, sites)| json!({"wall": wall.to_string(), "ok": ok, "sites": sites}))
                .collect::<Vec<_>>(),
        })
    }

    fn steady(from: i64, to: i64) -> Vec<(jiff::Timestamp, bool, &'static [&'static str])> {
        (from * 5..to * 5)
            .map(|tick| (at(tick / 5, (tick % 5) * 200), true, &["iad"][..]))
            .collect()
    }

    #[test]
    fn a_steady_history_passes() {
        let observed = observation(at(20, 100), &steady(0, 20));
        assert_eq!(judge("primary", &[Site::Iad], &observed, at(0, 0)), Ok(()));
    }

    // One 200 ms reading of another set is a flap, however short: the sampled `for` check
    // polling every 250 ms could step over it.
    #[test]
    fn one_short_flap_fails_and_is_named() {
        let mut entries = steady(0, 20);
        entries[37].2 = &[];
        let observed = observation(at(20, 100), &entries);
        let error = judge("primary", &[Site::Iad], &observed, at(0, 0)).expect_err("flapped");
        assert!(error.contains("flapped"), "{error}");
        assert!(error.contains("[]"), "{error}");
    }

    #[test]
    fn readings_before_since_and_failed_probes_do_not_count() {
        let mut entries = vec![(at(0, 0), true, &["pdx"][..])];
        entries.extend(steady(1, 10));
        entries.insert(5, (at(2, 10), false, &[][..]));
        let observed = observation(at(10, 0), &entries);
        assert_eq!(judge("primary", &[Site::Iad], &observed, at(1, 0)), Ok(()));
        assert!(judge("primary", &[Site::Iad], &observed, at(0, 0)).is_err());
    }

    #[test]
    fn a_gap_in_the_probe_history_fails() {
        let mut entries = steady(0, 5);
        entries.extend(steady(9, 12));
        let observed = observation(at(12, 0), &entries);
        let error = judge("primary", &[Site::Iad], &observed, at(0, 0)).expect_err("gap");
        assert!(error.contains("no successful probe for"), "{error}");
        // Ending early is a gap too.
        let observed = observation(at(30, 0), &steady(0, 12));
        assert!(judge("primary", &[Site::Iad], &observed, at(0, 0)).is_err());
    }

    #[test]
    fn no_reading_at_all_fails() {
        let observed = observation(at(2, 0), &[]);
        let error = judge("primary", &[Site::Iad], &observed, at(1, 0)).expect_err("empty");
        assert!(error.contains("no successful probe recorded"), "{error}");
        assert!(judge("primary", &[Site::Iad], &json!({}), at(1, 0)).is_err());
    }

    #[test]
    fn sites_compare_in_any_order() {
        let entries = vec![(at(0, 500), true, &["reader", "pdx"][..])];
        let observed = observation(at(1, 0), &entries);
        assert_eq!(
            judge("replicas", &[Site::Pdx, Site::Reader], &observed, at(0, 0)),
            Ok(())
        );
    }

    #[test]
    fn the_observation_holds_only_that_services_completions() {
        let recorder = Recorder::new();
        for (service, sites) in [("primary", vec![Site::Iad]), ("replicas", vec![Site::Pdx])] {
            let process = format!("endpoints-{service}");
            let op = |sites: Vec<Site>| Op::Endpoints {
                service: service.to_owned(),
                sites,
            };
            recorder.invoke(&process, op(Vec::new()));
            recorder.complete(&process, EventType::Ok, op(sites));
        }
        let observed = recorded_endpoints(&recorder.snapshot(), "primary", jiff::Timestamp::now());
        let recorded = observed["recorded"].as_array().expect("a list");
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0]["sites"], json!(["iad"]));
        assert_eq!(recorded[0]["ok"], json!(true));
    }
}
