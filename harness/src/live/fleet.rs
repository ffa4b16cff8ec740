//! A fleet run (`install: {fleet: N}`, `--fleet N`, `just bench-fleet N`): one operator, the
//! playground group and N - 1 more groups beside it, each with its own three MariaDB sites on
//! the same nodes — how platform teams run one operator for many databases.
//!
//! The other groups (`fleet-01` ...) are copies of the playground group's spec without its DNS
//! record, in its namespace. They are installed after the playground and must all be Valid
//! before the steps start. While the steps run, a watcher reads every group of the namespace
//! once a second (one LIST) and records which of the other groups' authority is not Valid
//! (`Op::Fleet`: the fleet checker demands none ever is), and every ten seconds scrapes the
//! operator's own metrics page from the in-cluster workload pod: its CPU time, resident memory,
//! requests to the API server and per-group poll durations (`Op::OperatorCost`), from which
//! the checker computes the operator's cost over the run.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::history::event::{EventType, Op};
use crate::history::recorder::Recorder;
use crate::live::workload::Sink as _;
use crate::playground::names::{GROUP, NAMESPACE};

/// The most groups a fleet run may have (the playground included).
pub const FLEET_MAX: u32 = 60;

/// How long the fleet's groups may take to become Valid: this, plus [`FLEET_WAIT_PER_GROUP`]
/// for each (every site of every group initialises a MariaDB data directory).
const FLEET_WAIT_BASE: Duration = Duration::from_secs(120);
/// See [`FLEET_WAIT_BASE`].
const FLEET_WAIT_PER_GROUP: Duration = Duration::from_secs(30);
/// How often the watcher reads the groups.
const WATCH_PERIOD: Duration = Duration::from_secs(1);
/// The longest one read of the groups may take.
const READ_MAX: Duration = Duration::from_secs(5);
/// How often the operator's metrics are scraped.
const COST_PERIOD: Duration = Duration::from_secs(10);
/// The watcher's process name in the history.
pub const FLEET_PROCESS: &str = "fleet";
/// The process name of the operator's cost in the history.
pub const COST_PROCESS: &str = "operator-cost";

/// The name of the `index`th other group (`fleet-01` ...).
pub fn group_name(index: u32) -> String {
    format!("fleet-{index:02}")
}

/// The other groups of a fleet of `fleet` (the playground counts as one): the playground
/// group's spec without its DNS record, under their own names (pure).
pub fn fleet_objects(playground: &Value, fleet: u32) -> Vec<Value> {
    let mut spec = playground["spec"].clone();
    if let Some(fields) = spec.as_object_mut() {
        fields.remove("dns");
    }
    (1..fleet.max(1))
        .map(|index| {
            json!({
                "apiVersion": playground["apiVersion"],
                "kind": playground["kind"],
                "metadata": {"name": group_name(index), "namespace": NAMESPACE},
                "spec": spec,
            })
        })
        .collect()
}

/// Applies the other groups of the fleet and waits until every one's authority is Valid.
pub async fn install_fleet(client: &Client, playground: &Value, fleet: u32) -> Result<()> {
    let objects = fleet_objects(playground, fleet);
    if objects.is_empty() {
        return Ok(());
    }
    for object in &objects {
        crate::playground::kube::apply(client, object).await?;
    }
    let wait = FLEET_WAIT_BASE + FLEET_WAIT_PER_GROUP * u32::try_from(objects.len()).unwrap_or(0);
    crate::progress::say(format!(
        "installing: {} more groups beside the playground (a fleet of {fleet}), waiting up to {} s for every one to be Valid",
        objects.len(),
        wait.as_secs()
    ));
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let not_valid = not_valid(client).await?;
        if not_valid.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Cluster {
                action: format!("bring up a fleet of {fleet} groups"),
                reason: format!(
                    "after {} s, {} groups are not Valid: {}",
                    wait.as_secs(),
                    not_valid.len(),
                    not_valid.join(", ")
                ),
            });
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The other groups (not the playground) whose authority is not Valid, as `name: state`.
async fn not_valid(client: &Client) -> Result<Vec<String>> {
    Ok(not_valid_of(&read_groups(client).await?))
}

async fn read_groups(client: &Client) -> Result<Vec<Value>> {
    let groups: Api<bloodraven_api::MysqlFailoverGroup> =
        Api::namespaced(client.clone(), NAMESPACE);
    let list = groups
        .list(&ListParams::default())
        .await
        .map_err(|error| Error::Cluster {
            action: "list the fleet's groups".to_owned(),
            reason: error.to_string(),
        })?;
    Ok(list
        .items
        .iter()
        .filter_map(|group| serde_json::to_value(group).ok())
        .collect())
}

/// `name: state` of every group but the playground whose authority is not Valid (pure).
pub fn not_valid_of(groups: &[Value]) -> Vec<String> {
    groups
        .iter()
        .filter(|group| group["metadata"]["name"] != GROUP)
        .filter_map(|group| {
            let state = group["status"]["authority"]["state"]
                .as_str()
                .unwrap_or("none");
            (state != "Valid").then(|| {
                format!(
                    "{}: {state}",
                    group["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
        })
        .collect()
}

/// Records the fleet's state and the operator's cost until dropped.
pub struct FleetWatch {
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for FleetWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts the watcher on `runtime` (see the module's header): the fleet's reads, a declared
/// probe every [`WATCH_PERIOD`], and apart from them (a scrape may wait up to 10 s) the
/// operator's cost every [`COST_PERIOD`].
pub fn watch_fleet(
    runtime: &tokio::runtime::Handle,
    client: Client,
    recorder: Arc<Recorder>,
) -> FleetWatch {
    recorder.declare_probes_every(&[FLEET_PROCESS], WATCH_PERIOD, Some(READ_MAX));
    let reads = runtime.spawn({
        let (client, recorder) = (client.clone(), Arc::clone(&recorder));
        async move {
            loop {
                recorder.invoke(FLEET_PROCESS, Op::fleet_unknown());
                match tokio::time::timeout(READ_MAX, read_groups(&client)).await {
                    Ok(Ok(groups)) => recorder.complete(
                        FLEET_PROCESS,
                        EventType::Ok,
                        Op::Fleet {
                            groups: u32::try_from(groups.len()).unwrap_or(u32::MAX),
                            not_valid: not_valid_of(&groups),
                        },
                    ),
                    Ok(Err(_)) | Err(_) => {
                        recorder.complete(FLEET_PROCESS, EventType::Fail, Op::fleet_unknown());
                    }
                }
                tokio::time::sleep(WATCH_PERIOD).await;
            }
        }
    });
    let costs = runtime.spawn(async move {
        loop {
            recorder.invoke(COST_PROCESS, Op::operator_cost_unknown());
            match operator_metrics(&client).await {
                Ok(text) => recorder.complete(COST_PROCESS, EventType::Ok, operator_cost(&text)),
                Err(error) => {
                    tracing::warn!(%error, "failed to scrape the operator's metrics");
                    recorder.complete(COST_PROCESS, EventType::Fail, Op::operator_cost_unknown());
                }
            }
            tokio::time::sleep(COST_PERIOD).await;
        }
    });
    FleetWatch {
        tasks: [reads, costs],
    }
}

/// The leader's metrics page, fetched from the in-cluster workload pod.
async fn operator_metrics(client: &Client) -> Result<String> {
    let action = "scrape the operator's metrics";
    let url = super::observe::operator_metrics_url(client)
        .await?
        .ok_or_else(|| Error::Cluster {
            action: action.to_owned(),
            reason: "no leader".to_owned(),
        })?;
    super::observe::scrape_from(client, &url, action).await
}

/// The operator's cost from its metrics page (pure): CPU time, resident memory, requests to
/// the API server (all methods), and the per-group poll histograms summed over every group.
pub fn operator_cost(text: &str) -> Op {
    let sample = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse::<f64>().ok())
    };
    let kube_requests: f64 = text
        .lines()
        .filter(|line| line.starts_with("bloodraven_kube_requests_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let groups_polled = u32::try_from(
        text.lines()
            .filter(|line| line.starts_with("bloodraven_group_poll_duration_seconds_count{"))
            .count(),
    )
    .unwrap_or(u32::MAX);
    Op::OperatorCost {
        cpu_ms: sample("process_cpu_seconds_total").map_or(0, |seconds| whole(seconds * 1e3)),
        rss_bytes: sample("process_resident_memory_bytes").map_or(0, whole),
        kube_requests: whole(kube_requests),
        poll_buckets: poll_buckets(text),
        groups_polled,
    }
}

/// A non-negative sample as a whole number.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole(value: f64) -> u64 {
    value.max(0.0).round() as u64
}

/// Every group's cumulative bucket counts summed, by upper bound in µs (`+Inf`: `u64::MAX`).
fn poll_buckets(text: &str) -> Vec<(u64, u64)> {
    let mut buckets: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|line| line.starts_with("bloodraven_group_poll_duration_seconds_bucket{"))
    {
        let bound = line
            .split("le=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|le| match le {
                "+Inf" => Some(u64::MAX),
                seconds => seconds
                    .parse::<f64>()
                    .ok()
                    .map(|seconds| whole(seconds * 1e6)),
            });
        let count = line
            .rsplit(' ')
            .next()
            .and_then(|count| count.parse::<f64>().ok());
        if let (Some(bound), Some(count)) = (bound, count) {
            *buckets.entry(bound).or_default() += whole(count);
        }
    }
    buckets.into_iter().collect()
}

/// The upper bound, in ms, of the bucket that holds the `quantile` of the polls between two
/// scrapes' cumulative buckets (pure; None without polls between them, or when it falls in
/// `+Inf`).
pub fn window_quantile_ms(first: &[(u64, u64)], last: &[(u64, u64)], quantile: f64) -> Option<u64> {
    let before = |bound: u64| {
        first
            .iter()
            .find(|(known, _)| *known == bound)
            .map_or(0, |(_, count)| *count)
    };
    let window: Vec<(u64, u64)> = last
        .iter()
        .map(|(bound, count)| (*bound, count.saturating_sub(before(*bound))))
        .collect();
    let total = window.last()?.1;
    if total == 0 {
        return None;
    }
    #[allow(clippy::cast_precision_loss)]
    let wanted = total as f64 * quantile;
    #[allow(clippy::cast_precision_loss)]
    let bound = window.iter().find(|(_, count)| *count as f64 >= wanted)?.0;
    (bound != u64::MAX).then(|| bound.div_ceil(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_copies_the_playground_without_its_dns_record() {
        let playground = json!({
            "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlFailoverGroup",
            "metadata": {"name": "playground", "namespace": NAMESPACE},
            "spec": {"pollInterval": "2s", "dns": {"hostname": "x"}},
        });
        let objects = fleet_objects(&playground, 3);
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["metadata"]["name"], "fleet-01");
        assert_eq!(objects[1]["metadata"]["name"], "fleet-02");
        assert_eq!(objects[1]["spec"], json!({"pollInterval": "2s"}));
        assert!(fleet_objects(&playground, 1).is_empty());
    }

    #[test]
    fn only_other_groups_not_valid_are_named() {
        let groups = [
            json!({"metadata": {"name": "playground"}, "status": {"authority": {"state": "Invalid"}}}),
            json!({"metadata": {"name": "fleet-01"}, "status": {"authority": {"state": "Valid"}}}),
            json!({"metadata": {"name": "fleet-02"}, "status": {"authority": {"state": "Invalid"}}}),
            json!({"metadata": {"name": "fleet-03"}}),
        ];
        assert_eq!(
            not_valid_of(&groups),
            ["fleet-02: Invalid", "fleet-03: none"]
        );
    }

    #[test]
    fn the_operator_s_cost_is_read_from_its_metrics_page() {
        let text = "\
# TYPE bloodraven_group_poll_duration_seconds histogram
bloodraven_group_poll_duration_seconds_bucket{group=\"ns/a\",le=\"0.01\"} 60
bloodraven_group_poll_duration_seconds_bucket{group=\"ns/a\",le=\"0.05\"} 99
bloodraven_group_poll_duration_seconds_bucket{group=\"ns/a\",le=\"+Inf\"} 100
bloodraven_group_poll_duration_seconds_count{group=\"ns/a\"} 100
bloodraven_group_poll_duration_seconds_bucket{group=\"ns/b\",le=\"0.01\"} 40
bloodraven_group_poll_duration_seconds_bucket{group=\"ns/b\",le=\"0.05\"} 99
bloodraven_group_poll_duration_seconds_bucket{group=\"ns/b\",le=\"+Inf\"} 100
bloodraven_group_poll_duration_seconds_count{group=\"ns/b\"} 100
bloodraven_kube_requests_total{method=\"GET\"} 120
bloodraven_kube_requests_total{method=\"PATCH\"} 30
process_cpu_seconds_total 12.5
process_resident_memory_bytes 41943040
";
        let cost = operator_cost(text);
        assert_eq!(
            cost,
            Op::OperatorCost {
                cpu_ms: 12_500,
                rss_bytes: 41_943_040,
                kube_requests: 150,
                poll_buckets: vec![(10_000, 100), (50_000, 198), (u64::MAX, 200)],
                groups_polled: 2,
            }
        );
        assert_eq!(operator_cost(""), Op::operator_cost_unknown());
        let Op::OperatorCost { poll_buckets, .. } = cost else {
            unreachable!()
        };
        assert_eq!(window_quantile_ms(&[], &poll_buckets, 0.5), Some(10));
        assert_eq!(window_quantile_ms(&[], &poll_buckets, 0.99), Some(50));
        assert_eq!(window_quantile_ms(&[], &poll_buckets, 1.0), None, "+Inf");
        // Over a window: only the polls between the two scrapes count.
        let first = vec![(10_000, 100), (50_000, 100), (u64::MAX, 100)];
        assert_eq!(window_quantile_ms(&first, &poll_buckets, 0.5), Some(50));
        assert_eq!(window_quantile_ms(&poll_buckets, &poll_buckets, 0.5), None);
    }
}
