//! Hand-written SVG charts (no script, no network): the scenario timeline and the trends.

use std::collections::BTreeMap;

use maud::{html, Markup};

use super::trend::TrendEntry;
use crate::check::timings::FailoverTimings;
use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

const WIDTH: f64 = 900.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
/// Width of one availability bucket.
pub const BUCKET_NS: u64 = 1_000_000_000;
/// The most buckets a timeline draws (longer histories use wider buckets).
pub const BUCKETS_MAX: u64 = 600;

/// A fault interval on the monotonic axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultInterval {
    /// Fault kind.
    pub name: String,
    /// Start (ns).
    pub start_ns: u64,
    /// End (ns); the history's end when never healed.
    pub end_ns: u64,
}

/// Pairs fault start/end events by name, first in first out.
pub fn fault_intervals(history: &History) -> Vec<FaultInterval> {
    let mut open: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut intervals = Vec::new();
    for event in &history.events {
        if event.kind != EventType::Invoke {
            continue;
        }
        if let Op::Fault { name, phase, .. } = &event.op {
            match phase {
                FaultPhase::Start => open.entry(name.clone()).or_default().push(event.mono_ns),
                FaultPhase::End => {
                    // `heal: all` ends every open fault; it is recorded with name `all`.
                    let names: Vec<String> = if name == "all" {
                        open.keys().cloned().collect()
                    } else {
                        vec![name.clone()]
                    };
                    for name in names {
                        if let Some(starts) = open.get_mut(&name) {
                            if !starts.is_empty() {
                                let start_ns = starts.remove(0);
                                intervals.push(FaultInterval {
                                    name: name.clone(),
                                    start_ns,
                                    end_ns: event.mono_ns,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    let end = history.end_ns();
    for (name, starts) in open {
        for start_ns in starts {
            intervals.push(FaultInterval {
                name: name.clone(),
                start_ns,
                end_ns: end,
            });
        }
    }
    intervals.sort_by_key(|interval| interval.start_ns);
    intervals
}

/// Write outcomes per bucket: (ok, failed or unknown). At most `2 * BUCKETS_MAX` buckets
/// are kept (later completions are not counted): a bound against a corrupt history.
pub fn write_buckets(history: &History, bucket_ns: u64) -> Vec<(u64, u64)> {
    let count = (history.end_ns() / bucket_ns.max(1) + 1).min(2 * BUCKETS_MAX);
    let mut buckets = vec![(0u64, 0u64); usize::try_from(count).unwrap_or(0)];
    for event in &history.events {
        if !matches!(event.op, Op::Write { .. }) || !event.kind.is_completion() {
            continue;
        }
        let Some(bucket) = usize::try_from(event.mono_ns / bucket_ns.max(1))
            .ok()
            .and_then(|index| buckets.get_mut(index))
        else {
            continue;
        };
        if event.kind == EventType::Ok {
            bucket.0 += 1;
        } else {
            bucket.1 += 1;
        }
    }
    buckets
}

/// Acknowledged writes per bucket and per site that acknowledged them: one row per site on
/// the timeline, so two sites taking writes in the same bucket (split brain) shows at a glance.
pub fn site_buckets(history: &History, bucket_ns: u64) -> Vec<(Site, Vec<u64>)> {
    let count = usize::try_from((history.end_ns() / bucket_ns.max(1) + 1).min(2 * BUCKETS_MAX))
        .unwrap_or(0);
    Site::ALL
        .into_iter()
        .map(|site| {
            let mut buckets = vec![0u64; count];
            for event in &history.events {
                let Op::Write {
                    site: Some(acked), ..
                } = &event.op
                else {
                    continue;
                };
                if event.kind != EventType::Ok || *acked != site {
                    continue;
                }
                if let Some(bucket) = usize::try_from(event.mono_ns / bucket_ns.max(1))
                    .ok()
                    .and_then(|index| buckets.get_mut(index))
                {
                    *bucket += 1;
                }
            }
            (site, buckets)
        })
        .filter(|(_, buckets)| buckets.iter().any(|n| *n > 0))
        .collect()
}

/// (completion ns, latency ms) of every acknowledged write.
pub fn write_latencies(history: &History) -> Vec<(u64, u64)> {
    let Ok(operations) = history.operations() else {
        return Vec::new();
    };
    operations
        .iter()
        .filter(|operation| matches!(operation.invoke.op, Op::Write { .. }))
        .filter_map(|operation| {
            let completion = operation
                .completion
                .filter(|event| event.kind == EventType::Ok)?;
            Some((
                completion.mono_ns,
                completion.mono_ns.saturating_sub(operation.invoke.mono_ns) / 1_000_000,
            ))
        })
        .collect()
}

/// `a / b` as a float (display only, so precision loss past 2^52 is irrelevant).
#[allow(clippy::cast_precision_loss)]
fn ratio(a: u64, b: u64) -> f64 {
    a as f64 / b.max(1) as f64
}

fn x_of(ns: u64, end_ns: u64) -> f64 {
    LEFT + ratio(ns, end_ns) * (WIDTH - LEFT - RIGHT)
}

fn fmt1(value: f64) -> String {
    format!("{value:.1}")
}

/// Approximate width of one character of a fault label (11 px sans-serif).
const LABEL_CHAR_WIDTH: f64 = 6.5;

/// Where each fault's name is written above the timeline: at its start, or just after the
/// previous label when faults start too close together to label both there (s038's
/// `deny-rbac` and `kill` overlapped).
pub fn fault_label_xs(faults: &[FaultInterval], end_ns: u64) -> Vec<f64> {
    let mut order: Vec<usize> = (0..faults.len()).collect();
    order.sort_by_key(|&index| faults[index].start_ns);
    let mut xs = vec![0.0; faults.len()];
    let mut free_from = f64::MIN;
    for index in order {
        let fault = &faults[index];
        let x = (x_of(fault.start_ns, end_ns) + 2.0).max(free_from);
        let chars = u32::try_from(fault.name.chars().count()).unwrap_or(u32::MAX);
        free_from = x + f64::from(chars) * LABEL_CHAR_WIDTH + 6.0;
        xs[index] = x;
    }
    xs
}

/// One failover phase on the timeline: a line at `x` and its number (1 = detected ... 6 =
/// first write, as the legend and the phase table say) in label row `row`.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseMark {
    /// Horizontal position.
    pub x: f64,
    /// The phase's number in [`FailoverTimings::phases`], from 1.
    pub number: usize,
    /// The phase's name.
    pub name: &'static str,
    /// Milliseconds after the fault.
    pub at_ms: i64,
    /// Label row: phases closer than [`PHASE_LABEL_GAP`] to the previous label go one row
    /// down, so labels never overlap however close the phases are (follow-up polls put six
    /// within a second).
    pub row: u32,
}

/// The horizontal room one phase number needs.
pub const PHASE_LABEL_GAP: f64 = 9.0;

/// The phase marks of every failover, left to right, with their label rows.
pub fn phase_marks(timings: &[FailoverTimings], end_ns: u64) -> Vec<PhaseMark> {
    let mut marks: Vec<PhaseMark> = timings
        .iter()
        .flat_map(|timing| {
            timing
                .phases()
                .into_iter()
                .enumerate()
                .filter_map(move |(index, (name, at_ms))| {
                    let at_ms = at_ms?;
                    let at_ns =
                        u64::try_from(i128::from(timing.fault_ns) + i128::from(at_ms) * 1_000_000)
                            .unwrap_or(0);
                    Some(PhaseMark {
                        x: x_of(at_ns, end_ns),
                        number: index + 1,
                        name,
                        at_ms,
                        row: 0,
                    })
                })
        })
        .collect();
    marks.sort_by(|a, b| a.x.total_cmp(&b.x));
    let mut previous: Option<(f64, u32)> = None;
    for mark in &mut marks {
        mark.row = match previous {
            Some((x, row)) if mark.x - x < PHASE_LABEL_GAP => row + 1,
            _ => 0,
        };
        previous = Some((mark.x, mark.row));
    }
    marks
}

/// The scenario timeline: fault intervals shaded, failover phases marked, write
/// availability per bucket and write latency over time.
pub fn timeline(history: &History, timings: &[FailoverTimings]) -> Markup {
    let end_ns = history.end_ns().max(1);
    let bucket_ns = BUCKET_NS.max(end_ns / BUCKETS_MAX + 1);
    let faults = fault_intervals(history);
    let buckets = write_buckets(history, bucket_ns);
    let sites = site_buckets(history, bucket_ns);
    let latencies = write_latencies(history);
    let latency_max = latencies
        .iter()
        .map(|(_, ms)| *ms)
        .max()
        .unwrap_or(1)
        .max(1);
    let (avail_top, avail_height) = (40.0, 24.0);
    let (site_top, site_height) = (avail_top + avail_height + 6.0, 10.0);
    let sites_bottom = site_top + site_height * f64::from(u32::try_from(sites.len()).unwrap_or(0));
    let (latency_top, latency_height) = (sites_bottom + 20.0, 130.0);
    let height = latency_top + latency_height + 40.0;
    let ticks = 10u64;
    let label_xs = fault_label_xs(&faults, end_ns);
    html! {
        svg class="timeline" xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height) viewBox={"0 0 " (WIDTH) " " (height)} role="img" {
            title { "timeline: faults, failover phases, write availability and latency" }
            @for (fault, label_x) in faults.iter().zip(&label_xs) {
                @let x = x_of(fault.start_ns, end_ns);
                @let w = (x_of(fault.end_ns, end_ns) - x).max(1.0);
                rect class="fault" x=(fmt1(x)) y="20" width=(fmt1(w)) height=(height - 40.0) {
                    title { (fault.name) }
                }
                text class="fault-label" x=(fmt1(*label_x)) y="14" { (fault.name) }
            }
            text class="axis-label" x="4" y=(avail_top + 16.0) { "writes" }
            @for (index, (ok, bad)) in buckets.iter().enumerate() {
                @let start = u64::try_from(index).unwrap_or(0) * bucket_ns;
                @let x = x_of(start, end_ns);
                @let w = (x_of(start + bucket_ns, end_ns) - x).max(0.5);
                @let class = match (ok, bad) { (0, 0) => "idle", (_, 0) => "up", (0, _) => "down", _ => "partial" };
                rect class=(class) x=(fmt1(x)) y=(avail_top) width=(fmt1(w)) height=(avail_height) {
                    title { (ok) " ok, " (bad) " failed or unknown" }
                }
            }
            @for (row, (site, counts)) in sites.iter().enumerate() {
                @let y = site_top + site_height * f64::from(u32::try_from(row).unwrap_or(0));
                text class="axis-label" x="4" y=(y + site_height - 1.0) { "acked by " (site.name()) }
                @for (index, n) in counts.iter().enumerate() {
                    @if *n > 0 {
                        @let start = u64::try_from(index).unwrap_or(0) * bucket_ns;
                        @let x = x_of(start, end_ns);
                        @let w = (x_of(start + bucket_ns, end_ns) - x).max(0.5);
                        rect class={"site-" (site.name())} x=(fmt1(x)) y=(fmt1(y)) width=(fmt1(w)) height=(site_height - 2.0) {
                            title { (n) " acknowledged by " (site.name()) }
                        }
                    }
                }
            }
            text class="axis-label" x="4" y=(latency_top + 10.0) { "latency" }
            text class="axis-label" x="4" y=(latency_top + 24.0) { (latency_max) " ms" }
            line class="axis" x1=(LEFT) y1=(latency_top + latency_height) x2=(WIDTH - RIGHT) y2=(latency_top + latency_height) {}
            @for (at, ms) in &latencies {
                @let y = latency_top + latency_height - ratio(*ms, latency_max) * latency_height;
                circle class="latency" cx=(fmt1(x_of(*at, end_ns))) cy=(fmt1(y)) r="1.6" {}
            }
            @for mark in phase_marks(timings, end_ns) {
                line class="phase" x1=(fmt1(mark.x)) y1="20" x2=(fmt1(mark.x)) y2=(latency_top + latency_height) {
                    title { (mark.name) " " (format!("{:+}", mark.at_ms)) " ms" }
                }
                text class="phase-label" x=(fmt1(mark.x + 2.0)) y=(fmt1(latency_top + 10.0 + 10.0 * f64::from(mark.row))) {
                    title { (mark.name) " " (format!("{:+}", mark.at_ms)) " ms" }
                    (mark.number)
                }
            }
            @for tick in 0..=ticks {
                @let ns = end_ns * tick / ticks;
                @let seconds = ratio(ns, 1_000_000_000);
                text class="tick" x=(fmt1(x_of(ns, end_ns))) y=(height - 6.0) { (format!("{seconds:.0}s")) }
            }
        }
    }
}

/// The pass rate across runs as a polyline (0..100 %).
pub fn pass_rate_chart(entries: &[TrendEntry]) -> Markup {
    let height = 160.0;
    let count = u64::try_from(entries.len().max(2) - 1).unwrap_or(1);
    let points: Vec<String> = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let x = LEFT + ratio(u64::try_from(index).unwrap_or(0), count) * (WIDTH - LEFT - RIGHT);
            let y = 20.0 + (1.0 - entry.pass_rate()) * (height - 40.0);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    html! {
        svg class="trend" xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height) viewBox={"0 0 " (WIDTH) " " (height)} role="img" {
            title { "pass rate per run" }
            text class="axis-label" x="4" y="24" { "100%" }
            text class="axis-label" x="4" y=(height - 20.0) { "0%" }
            line class="axis" x1=(LEFT) y1=(height - 20.0) x2=(WIDTH - RIGHT) y2=(height - 20.0) {}
            polyline class="pass-rate" points=(points.join(" ")) {}
            @for (point, entry) in points.iter().zip(entries) {
                @let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
                circle class="pass-point" cx=(x) cy=(y) r="3" {
                    title { (entry.run_id) ": " (format!("{:.0}%", entry.pass_rate() * 100.0)) }
                }
            }
        }
    }
}

/// How a trend chart labels its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrendUnit {
    /// Milliseconds, shown as seconds.
    Seconds,
    /// A count (lost writes).
    Count,
}

impl TrendUnit {
    fn label(self, value: u64) -> String {
        match self {
            TrendUnit::Seconds => format!("{:.1} s", ratio(value, 1000)),
            TrendUnit::Count => value.to_string(),
        }
    }
}

/// A small chart of one scenario's values over its runs, oldest left: the zero line, the
/// values (a missing value breaks the line), the largest value labelled at the top left and
/// the newest at the right end.
pub fn sparkline(values: &[Option<u64>], label: &str, unit: TrendUnit) -> Markup {
    let (width, height) = (170.0, 40.0);
    let (left, right, top, bottom) = (4.0, 44.0, 12.0, 4.0);
    let max = values.iter().flatten().copied().max();
    let scale = max.unwrap_or(0).max(1);
    let count = u64::try_from(values.len().max(2) - 1).unwrap_or(1);
    let point = |index: usize, value: u64| {
        let x = left + ratio(u64::try_from(index).unwrap_or(0), count) * (width - left - right);
        let y = height - bottom - ratio(value, scale) * (height - top - bottom);
        (x, y)
    };
    // Runs of consecutive present values, one polyline each.
    let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (index, value) in values.iter().enumerate() {
        match value {
            Some(value) => segments
                .last_mut()
                .map_or((), |segment| segment.push(point(index, *value))),
            None => segments.push(Vec::new()),
        }
    }
    segments.retain(|segment| !segment.is_empty());
    let newest = values.iter().rev().flatten().next().copied();
    let measured = values.iter().flatten().count();
    html! {
        svg class="spark" xmlns="http://www.w3.org/2000/svg" width=(width) height=(height) viewBox={"0 0 " (width) " " (height)} role="img" {
            title { (label) ": " (measured) " of " (values.len()) " runs measured" @if let Some(max) = max { ", max " (unit.label(max)) } }
            line class="axis" x1=(left) y1=(height - bottom) x2=(width - right) y2=(height - bottom) {}
            @if let Some(max) = max {
                text class="spark-max" x=(left) y="9" { "max " (unit.label(max)) }
            } @else {
                text class="spark-max" x=(left) y="9" { "not measured" }
            }
            @for segment in &segments {
                @if segment.len() > 1 {
                    polyline class="pass-rate" points=(segment.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect::<Vec<_>>().join(" ")) {}
                }
            }
            @for (index, value) in values.iter().enumerate() {
                @if let Some(value) = value {
                    @let (x, y) = point(index, *value);
                    circle class="pass-point" cx=(fmt1(x)) cy=(fmt1(y)) r="2" { title { (unit.label(*value)) } }
                }
            }
            @if let Some(newest) = newest {
                text class="spark-last" x=(width - right + 4.0) y=(height - bottom - 2.0) { (unit.label(newest)) }
            }
        }
    }
}

/// One square per run of a scenario, oldest left: green passed, red failed, amber some of
/// its repeats failed; the newest [`RESULT_STRIP_MAX`] runs.
pub fn result_strip(runs: &[(String, u32, u32)]) -> Markup {
    let shown = &runs[runs.len().saturating_sub(RESULT_STRIP_MAX)..];
    let (cell, gap) = (6.0, 1.5);
    let width = (cell + gap) * f64::from(u32::try_from(shown.len()).unwrap_or(0)) + gap;
    html! {
        svg class="spark" xmlns="http://www.w3.org/2000/svg" width=(fmt1(width.max(20.0))) height="14" role="img" {
            title { "result per run, oldest left" }
            @for (index, (run_id, passes, count)) in shown.iter().enumerate() {
                @let class = if passes == count { "strip-pass" } else if *passes == 0 { "strip-fail" } else { "strip-flaky" };
                rect class=(class) x=(fmt1(gap + (cell + gap) * f64::from(u32::try_from(index).unwrap_or(0)))) y="3" width=(cell) height=(cell + 1.0) {
                    title { (run_id) ": " (passes) " of " (count) " passed" }
                }
            }
        }
    }
}

/// The most runs a result strip shows.
pub const RESULT_STRIP_MAX: usize = 40;
