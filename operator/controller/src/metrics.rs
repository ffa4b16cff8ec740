//! Prometheus metrics (docs/design/operator.md#metrics and docs/design/requirements.md
//! R003.25), with a drop-guard poll timer
//! (docs/design/style.md#10-observability-is-part-of-the-feature, controller-rs `metrics.rs`).

use std::sync::Arc;
use std::time::Instant;

use bloodraven_api::FailoverKind;
use bloodraven_core::engine::MetricObservation;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// `kind` label of failover metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum KindValue {
    /// Emergency failover.
    emergency,
    /// Planned failover.
    planned,
}

impl From<FailoverKind> for KindValue {
    fn from(kind: FailoverKind) -> Self {
        match kind {
            FailoverKind::Emergency => KindValue::emergency,
            FailoverKind::Planned => KindValue::planned,
        }
    }
}

/// Labels `{kind}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// emergency or planned.
    pub kind: KindValue,
}

/// Labels `{group}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// `namespace/name` of the group.
    pub group: String,
}

/// Labels `{group, site}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SiteLabels {
    /// `namespace/name` of the group.
    pub group: String,
    /// The site.
    pub site: String,
}

/// Labels `{method}` of the operator's own requests to the API server.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// The HTTP method (`GET`, `PATCH`, ...): a watch is a `GET`.
    pub method: String,
}

/// Labels `{kind, namespace, name}` of one stored object.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    /// The object's kind (`MysqlFailoverGroup`, `MysqlDatabase`).
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Every metric the operator exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    /// `bloodraven_failovers_total{kind}`.
    pub failovers: Family<KindLabels, Counter>,
    /// `bloodraven_failover_duration_seconds{kind}`.
    pub failover_duration: Family<KindLabels, Histogram>,
    /// `bloodraven_lost_transactions_total`.
    pub lost_transactions: Counter,
    /// `bloodraven_poll_duration_seconds`.
    pub poll_duration: Histogram,
    /// `bloodraven_group_poll_duration_seconds{group}`: the same polls, per group (a fleet's
    /// slowest group, `just bench-fleet`).
    pub group_poll_duration: Family<GroupLabels, Histogram>,
    /// `bloodraven_kube_requests_total{method}`: every request this process sent to the API
    /// server (what one operator costs the control plane, `just bench-fleet`).
    pub kube_requests: Family<MethodLabels, Counter>,
    /// `bloodraven_deploy_leases_active{group}`.
    pub deploy_leases_active: Family<GroupLabels, Gauge>,
    /// `bloodraven_planned_failovers_deferred_total`.
    pub planned_failovers_deferred: Counter,
    /// `bloodraven_replication_lag_seconds{group, site}`.
    pub replication_lag: Family<SiteLabels, Gauge>,
    /// `bloodraven_is_leader` (1 on the leader).
    pub is_leader: Gauge,
    /// `bloodraven_undecodable_objects{kind, namespace, name}`: 1 while a stored object the
    /// operator needs does not decode (it is skipped); the series goes once it decodes again
    /// or is deleted ([`crate::decode`]).
    pub undecodable_objects: Family<ObjectLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("bloodraven");
        let failovers = Family::<KindLabels, Counter>::default();
        registry.register(
            "failovers",
            "Completed failovers by kind",
            failovers.clone(),
        );
        let failover_duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([1.0, 2.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0])
        });
        registry.register(
            "failover_duration_seconds",
            "Failover duration from start to completion",
            failover_duration.clone(),
        );
        let lost_transactions = Counter::default();
        registry.register(
            "lost_transactions",
            "Transactions of old primaries missing on the promoted site",
            lost_transactions.clone(),
        );
        let poll_duration = Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0]);
        registry.register(
            "poll_duration_seconds",
            "Duration of one poll of one group",
            poll_duration.clone(),
        );
        let group_poll_duration = Family::<GroupLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(GROUP_POLL_BUCKETS)
        });
        registry.register(
            "group_poll_duration_seconds",
            "Duration of one poll of one group, by group",
            group_poll_duration.clone(),
        );
        let kube_requests = Family::<MethodLabels, Counter>::default();
        registry.register(
            "kube_requests",
            "Requests this operator process sent to the Kubernetes API server, by method",
            kube_requests.clone(),
        );
        let deploy_leases_active = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "deploy_leases_active",
            "Unexpired deployment leases (migration and failover-hold)",
            deploy_leases_active.clone(),
        );
        let planned_failovers_deferred = Counter::default();
        registry.register(
            "planned_failovers_deferred",
            "Planned failovers that entered Deferred",
            planned_failovers_deferred.clone(),
        );
        let replication_lag = Family::<SiteLabels, Gauge>::default();
        registry.register(
            "replication_lag_seconds",
            "Seconds behind source of a replicating site",
            replication_lag.clone(),
        );
        let is_leader = Gauge::default();
        registry.register(
            "is_leader",
            "1 while this replica holds the leader lease",
            is_leader.clone(),
        );
        let undecodable_objects = Family::<ObjectLabels, Gauge>::default();
        registry.register(
            "undecodable_objects",
            "Stored objects the operator cannot decode and skips (1 each)",
            undecodable_objects.clone(),
        );
        Self {
            registry: Arc::new(registry),
            failovers,
            failover_duration,
            lost_transactions,
            poll_duration,
            group_poll_duration,
            kube_requests,
            deploy_leases_active,
            planned_failovers_deferred,
            replication_lag,
            is_leader,
            undecodable_objects,
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Encoding into a String cannot fail (fmt::Write on String is infallible).
        let _ = prometheus_client::encoding::text::encode_registry(&mut text, &self.registry);
        text.push_str(&process_metrics());
        let _ = prometheus_client::encoding::text::encode_eof(&mut text);
        text
    }

    /// Counts one request to the API server (the kube client's layer, [`crate::run`]).
    pub fn count_kube_request(&self, method: &str) {
        self.kube_requests
            .get_or_create(&MethodLabels {
                method: method.to_string(),
            })
            .inc();
    }

    /// Records one of core's metric observations for `group` (`namespace/name`).
    pub fn observe(&self, group: &str, observation: &MetricObservation) {
        match observation {
            MetricObservation::FailoverCompleted { kind } => {
                self.failovers
                    .get_or_create(&KindLabels {
                        kind: (*kind).into(),
                    })
                    .inc();
            }
            MetricObservation::FailoverDuration { kind, duration } => {
                self.failover_duration
                    .get_or_create(&KindLabels {
                        kind: (*kind).into(),
                    })
                    .observe(duration.as_secs_f64());
            }
            MetricObservation::LostTransactions { count } => {
                self.lost_transactions.inc_by(*count);
            }
            MetricObservation::PlannedFailoverDeferred => {
                self.planned_failovers_deferred.inc();
            }
            MetricObservation::ReplicationLag { site, seconds } => {
                self.replication_lag
                    .get_or_create(&SiteLabels {
                        group: group.to_string(),
                        site: site.clone(),
                    })
                    .set(i64::try_from(*seconds).unwrap_or(i64::MAX));
            }
        }
    }

    /// Sets the active deploy lease gauge of `group`.
    pub fn set_deploy_leases_active(&self, group: &str, count: usize) {
        self.deploy_leases_active
            .get_or_create(&GroupLabels {
                group: group.to_string(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// A timer that observes `bloodraven_poll_duration_seconds` when dropped, on every exit
    /// path of a poll (early returns and errors included).
    /// `group` is `namespace/name`; the poll is counted in both histograms.
    pub fn poll_timer(&self, group: &str) -> PollTimer {
        PollTimer {
            start: Instant::now(),
            histogram: self.poll_duration.clone(),
            group_histogram: self
                .group_poll_duration
                .get_or_create(&GroupLabels {
                    group: group.to_string(),
                })
                .clone(),
        }
    }
}

/// The buckets of `bloodraven_group_poll_duration_seconds`: fine below a quarter of a fast
/// profile's 500 ms interval, where a fleet's polls must stay.
const GROUP_POLL_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.125, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// Drop guard of [`Metrics::poll_timer`].
pub struct PollTimer {
    start: Instant,
    histogram: Histogram,
    group_histogram: Histogram,
}

impl Drop for PollTimer {
    fn drop(&mut self) {
        let seconds = self.start.elapsed().as_secs_f64();
        self.histogram.observe(seconds);
        self.group_histogram.observe(seconds);
    }
}

/// The standard process metrics of this process, read from `/proc/self` at scrape time:
/// `process_cpu_seconds_total` (user + system) and `process_resident_memory_bytes` (what one
/// operator costs a node, `just bench-fleet`). Empty where `/proc` cannot be read.
fn process_metrics() -> String {
    let mut text = String::new();
    if let Some(seconds) = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| cpu_seconds(&stat, CLOCK_TICKS_PER_SECOND))
    {
        text.push_str(&format!(
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {seconds}\n"
        ));
    }
    if let Some(bytes) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| resident_bytes(&status))
    {
        text.push_str(&format!(
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {bytes}\n"
        ));
    }
    text
}

/// `utime + stime` of a `/proc/<pid>/stat` line, in seconds (pure). The fields after the
/// command's closing parenthesis: state is the 3rd field of the line, utime the 14th.
fn cpu_seconds(stat: &str, ticks_per_second: u64) -> Option<f64> {
    let after_command = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_command.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    #[allow(clippy::cast_precision_loss)]
    Some((user + system) as f64 / ticks_per_second.max(1) as f64)
}

/// The resident set of a `/proc/<pid>/status` text, in bytes (pure): its `VmRSS:` line, in kB.
fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kilobytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kilobytes.saturating_mul(1024))
}

/// `USER_HZ`, the unit of `/proc`'s CPU times: 100 on every Linux architecture (the kernel's
/// ABI to user space, whatever its internal `HZ`).
const CLOCK_TICKS_PER_SECOND: u64 = 100;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// docs/design/operator.md#metrics / docs/design/requirements.md R003.25: the exported
    /// metric names.
    #[test]
    fn exports_the_seed_metric_names() {
        let metrics = Metrics::new();
        metrics.observe(
            "ns/g",
            &MetricObservation::FailoverCompleted {
                kind: FailoverKind::Emergency,
            },
        );
        metrics.observe(
            "ns/g",
            &MetricObservation::FailoverDuration {
                kind: FailoverKind::Planned,
                duration: Duration::from_secs(3),
            },
        );
        metrics.observe("ns/g", &MetricObservation::LostTransactions { count: 4 });
        metrics.observe("ns/g", &MetricObservation::PlannedFailoverDeferred);
        metrics.set_deploy_leases_active("ns/g", 2);
        drop(metrics.poll_timer("ns/g"));
        metrics.count_kube_request("GET");
        let text = metrics.encode();
        for needle in [
            "bloodraven_failovers_total{kind=\"emergency\"} 1",
            "bloodraven_failover_duration_seconds_count{kind=\"planned\"} 1",
            "bloodraven_lost_transactions_total 4",
            "bloodraven_poll_duration_seconds_count 1",
            "bloodraven_deploy_leases_active{group=\"ns/g\"} 2",
            "bloodraven_planned_failovers_deferred_total 1",
            "bloodraven_group_poll_duration_seconds_count{group=\"ns/g\"} 1",
            "bloodraven_kube_requests_total{method=\"GET\"} 1",
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    /// A `/proc/<pid>/stat` line whose command has spaces and parentheses still parses.
    #[test]
    fn reads_the_process_figures_of_proc() {
        let stat = "4242 (bloodraven (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 100 123456 789 18446744073709551615";
        assert_eq!(cpu_seconds(stat, 100), Some(3.0));
        assert_eq!(cpu_seconds("garbage", 100), None);
        assert_eq!(
            resident_bytes("Name:\tbloodraven\nVmPeak:\t  9000 kB\nVmRSS:\t  1234 kB\n"),
            Some(1234 * 1024)
        );
        assert_eq!(resident_bytes("Name:\tbloodraven\n"), None);
        // The text ends with the OpenMetrics EOF after the process metrics.
        let text = Metrics::new().encode();
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
    }
}
