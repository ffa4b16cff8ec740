//! What [`super::LiveCluster`] reads, and only reads: the operator's pods and leader, the
//! in-cluster workload pod's HTTP and metrics reads the targets observe through
//! ([`crate::targets`]), convergence, the final read and the artifacts. Faults are
//! [`super::faults`]', actions [`super::actions`]'.

use std::path::Path;

use bloodraven_api::names;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Pod};
use kube::api::{Api, ListParams, LogParams};

use super::{topology, workload, LiveCluster};
use crate::error::{Error, Result};
use crate::history::event::Op;
use crate::playground::names::{GROUP, NAMESPACE, OPERATOR_NAMESPACE};
use crate::scenario::model::Site;

/// A [`Error::Cluster`] of `action`, failed for `reason`.
pub(crate) fn cluster_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Cluster {
        action: action.into(),
        reason: reason.to_string(),
    }
}

/// The leader operator pod's name, from the leader Lease (`None`: no holder).
pub(crate) async fn leader_pod_of(client: &kube::Client) -> Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), OPERATOR_NAMESPACE);
    Ok(leases
        .get_opt(names::LEADER_LEASE)
        .await
        .map_err(|e| cluster_error("read the leader Lease", e))?
        .and_then(|lease| lease.spec.and_then(|spec| spec.holder_identity))
        .map(|identity| names::leader_pod(&identity).to_owned()))
}

/// The URL of the leader operator's metrics page, by its pod IP (`None`: no leader yet).
pub(crate) async fn operator_metrics_url(client: &kube::Client) -> Result<Option<String>> {
    let Some(pod) = leader_pod_of(client).await? else {
        return Ok(None);
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NAMESPACE);
    let ip = pods
        .get(&pod)
        .await
        .map_err(|e| cluster_error(format!("read pod {pod}"), e))?
        .status
        .and_then(|status| status.pod_ip)
        .unwrap_or_default();
    Ok(Some(format!(
        "http://{ip}:{}/metrics",
        names::PORT_OPERATOR_HTTP
    )))
}

/// A metrics page, fetched from the in-cluster workload pod; an error unless 2xx.
pub(crate) async fn scrape_from(client: &kube::Client, url: &str, action: &str) -> Result<String> {
    let answer = super::incluster::WorkloadPod::find(client.clone(), NAMESPACE)
        .await?
        .http(&super::incluster::HttpCall {
            method: "GET",
            url: url.to_owned(),
            ca_pem: None,
            bearer: None,
            headers: Vec::new(),
            body: None,
            resolve: Vec::new(),
            timeout: std::time::Duration::from_secs(10),
        })
        .await
        .map_err(|e| cluster_error(action, e))?;
    if !(200..300).contains(&answer.status) {
        return Err(cluster_error(
            action,
            format!("{url} answered {}: {:.200}", answer.status, answer.body),
        ));
    }
    Ok(answer.body)
}

impl LiveCluster {
    pub(crate) async fn leader_pod(&self) -> Result<Option<String>> {
        leader_pod_of(&self.client).await
    }

    /// The operator's pods that are not terminating.
    pub(crate) async fn operator_pods(&self) -> Result<Vec<String>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
        let list = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=bloodraven"))
            .await
            .map_err(|e| cluster_error("list operator pods", e))?;
        Ok(list
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter_map(|pod| pod.metadata.name)
            .collect())
    }

    /// The in-cluster workload pod (everything that talks to the cluster's network runs there).
    pub(crate) async fn workload_pod(&self) -> Result<super::incluster::WorkloadPod> {
        super::incluster::WorkloadPod::find(self.client.clone(), NAMESPACE).await
    }

    /// Sends an HTTP request from the in-cluster workload pod.
    pub(crate) async fn http_in_cluster(
        &self,
        call: &super::incluster::HttpCall,
    ) -> Result<crate::incluster::oneshot::HttpAnswer> {
        self.workload_pod().await?.http(call).await
    }

    /// A metrics page, fetched from the in-cluster workload pod; an error unless 2xx.
    pub(crate) async fn scrape(&self, url: &str, action: &str) -> Result<String> {
        scrape_from(&self.client, url, action).await
    }

    pub(super) async fn converged_now(&self) -> Result<Option<String>> {
        let group = self.installer.group().await?;
        let history = self.history();
        Ok(crate::check::converged::converged(
            &group["status"],
            &history,
        ))
    }

    /// The rows of one of the workload's tables on `site` as `tag`, id, site lines
    /// ([`parse_final_rows`]), read directly from its mysqld.
    async fn table_rows(&self, site: Site, tag: &str, table: &str) -> Result<String> {
        self.installer
            .sql_as_root(
                &names::pod(GROUP, site.name()),
                &format!(
                    "SELECT '{tag}', id, site FROM `{}`.`{table}`",
                    workload::DATABASE
                ),
            )
            .await
    }

    /// Every row of `site`'s workload table and, when it can be read, of its canary table
    /// (a canary table that cannot be read leaves only the canaries unknown, never the
    /// workload's rows, which the RPO checker needs).
    async fn site_rows(&self, site: Site) -> Result<SiteRows> {
        let writes = self.table_rows(site, "w", workload::TABLE).await?;
        let canaries = match self.table_rows(site, "c", workload::CANARY_TABLE).await {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(site = %site, %error, "the canary table could not be read");
                String::new()
            }
        };
        Ok(parse_final_rows(&format!("{writes}\n{canaries}")))
    }

    /// Every workload id in `site`'s table, read directly from its mysqld.
    pub(super) async fn site_ids(&self, site: Site) -> Result<Vec<u64>> {
        let text = self.table_rows(site, "w", workload::TABLE).await?;
        Ok(parse_final_rows(&text)
            .writes
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    pub(super) async fn final_rows(&self) -> Result<crate::backend::FinalRows> {
        let mut rows = crate::backend::FinalRows::default();
        let mut last_error = None;
        for site in Site::ALL {
            match self.site_rows(site).await {
                Ok(read) => {
                    rows.sites
                        .insert(site, read.writes.iter().map(|(id, _)| *id).collect());
                    for (id, committer) in read.writes {
                        if let Some(committer) = committer {
                            rows.committed.entry(id).or_insert(committer);
                        }
                    }
                    for (id, committer) in read.canaries {
                        if let Some(committer) = committer {
                            rows.canaries.entry(id).or_insert(committer);
                        }
                    }
                }
                Err(error) => last_error = Some(error),
            }
        }
        match (rows.sites.is_empty(), last_error) {
            (true, Some(error)) => Err(error),
            _ => Ok(rows),
        }
    }

    /// Every readable site's executed GTID set (MariaDB's `@@gtid_binlog_state`), then the
    /// group's `lastFailover` and `activeSite` ([`Op::GtidState`]). An error only when no
    /// site can be read.
    pub(super) async fn gtid_state(&self) -> Result<Op> {
        let mut sites = std::collections::BTreeMap::new();
        let mut last_error = None;
        // The active site is read last: writes still arrive (the counter app's), and a
        // transaction it committed between two reads reached a replica read after it, which
        // the lost-set checker took for one the failover lost (s055's second failover).
        let active = match self
            .installer
            .group()
            .await
            .map(|group| Op::status_of_group(&group))
        {
            Ok(Op::Status { active_site, .. }) => active_site,
            _ => None,
        };
        for site in gtid_read_order(active) {
            let read = self
                .installer
                .sql_as_root(
                    &names::pod(GROUP, site.name()),
                    // The playground runs MariaDB (its image); the operator's MariaDB dialect
                    // reads the same variable as the executed set.
                    "SELECT @@GLOBAL.gtid_binlog_state",
                )
                .await;
            match read {
                Ok(text) => {
                    sites.insert(site, text.trim().replace('\n', ""));
                }
                Err(error) => last_error = Some(error),
            }
        }
        if let (true, Some(error)) = (sites.is_empty(), last_error) {
            return Err(error);
        }
        let group = self.installer.group().await?;
        let Op::Status {
            active_site,
            last_failover,
            ..
        } = Op::status_of_group(&group)
        else {
            return Err(cluster_error("read the group", "not a status"));
        };
        Ok(Op::GtidState {
            sites,
            last_failover,
            active_site,
            error: None,
        })
    }

    pub(super) async fn artifacts(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)
            .map_err(|e| cluster_error(format!("create {}", dir.display()), e))?;
        let write = |file: &str, text: &str| {
            std::fs::write(dir.join(file), text)
                .map_err(|e| cluster_error(format!("write {file}"), e))
        };
        if let Ok(group) = self.installer.group().await {
            write(
                "group.yaml",
                &serde_yaml::to_string(&group).unwrap_or_default(),
            )?;
        }
        for namespace in [NAMESPACE, OPERATOR_NAMESPACE] {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            let events: Api<KubeEvent> = Api::namespaced(self.client.clone(), namespace);
            if let Ok(list) = events.list(&ListParams::default()).await {
                let lines: Vec<String> = list
                    .into_iter()
                    .map(|e| {
                        format!(
                            "{} {} {} {}",
                            e.type_.unwrap_or_default(),
                            e.reason.unwrap_or_default(),
                            e.involved_object.name.unwrap_or_default(),
                            e.message.unwrap_or_default()
                        )
                    })
                    .collect();
                write(&format!("events-{namespace}.txt"), &lines.join("\n"))?;
            }
            let Ok(list) = pods.list(&ListParams::default()).await else {
                continue;
            };
            for pod in list {
                let name = pod.metadata.name.clone().unwrap_or_default();
                for container in pod.spec.map(|s| s.containers).unwrap_or_default() {
                    for previous in [false, true] {
                        let params = LogParams {
                            container: Some(container.name.clone()),
                            previous,
                            ..LogParams::default()
                        };
                        if let Ok(text) = pods.logs(&name, &params).await {
                            let suffix = if previous { ".previous" } else { "" };
                            write(&format!("{name}.{}{suffix}.log", container.name), &text)?;
                        }
                    }
                }
            }
        }
        if let Some(log) = self.driver.fault_log() {
            write("faults.jsonl", &log)?;
        }
        // The control plane's view (e.g. a Service its kubelet could not apply to DNS): a
        // localkube cluster's state dir goes with the cluster.
        if let Some(log) = self.driver.cluster_log() {
            write("cluster.log", &log)?;
        }
        Ok(())
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One site's rows: (id, committing site) of the workload's and of the canary table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteRows {
    /// The workload table's rows.
    pub writes: Vec<(u64, Option<Site>)>,
    /// The canary table's rows.
    pub canaries: Vec<(u64, Option<Site>)>,
}

/// Parses the final read's answer, one row a line, tab separated: `w` or `c` (workload or
/// canary table), the id, the `site` column (`@@hostname` at commit: the committing site's pod,
/// `None` when it names none of the playground's). Unreadable lines are skipped.
pub fn parse_final_rows(text: &str) -> SiteRows {
    let mut rows = SiteRows::default();
    for line in text.lines() {
        let mut fields = line.trim_end_matches('\r').split('\t');
        let (Some(table), Some(Ok(id)), site) = (
            fields.next(),
            fields.next().map(|id| id.trim().parse::<u64>()),
            fields
                .next()
                .and_then(|host| topology::site_of_hostname(host.trim())),
        ) else {
            continue;
        };
        match table {
            "w" => rows.writes.push((id, site)),
            "c" => rows.canaries.push((id, site)),
            _ => {}
        }
    }
    rows
}

/// The order the final GTID read takes the sites in: the active site last, so it has
/// committed everything any site read before it holds (writes start there only).
fn gtid_read_order(active: Option<Site>) -> Vec<Site> {
    let mut order: Vec<Site> = Site::ALL
        .into_iter()
        .filter(|site| Some(*site) != active)
        .collect();
    order.extend(active);
    order
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_final_gtid_read_takes_the_active_site_last() {
        use super::{gtid_read_order, Site};
        assert_eq!(
            gtid_read_order(Some(Site::Iad)),
            [Site::Pdx, Site::Reader, Site::Iad]
        );
        assert_eq!(
            gtid_read_order(Some(Site::Pdx)),
            [Site::Iad, Site::Reader, Site::Pdx]
        );
        assert_eq!(gtid_read_order(None), Site::ALL.to_vec());
    }

    use super::*;

    // docs/design/harness.md#history-and-checkers: the final read names each row's committing
    // site from its `site` column, for the workload's table and the canaries apart.
    #[test]
    fn final_rows_name_their_table_and_committing_site() {
        let rows = parse_final_rows(
            "w\t1\tmysql-playground-iad-0\nw\t2\tmysql-playground-pdx-0\r\nc\t1000000000001\tmysql-playground-iad-0\nw\t3\tsomewhere-else\nw\tx\tmysql-playground-iad-0\n\n",
        );
        assert_eq!(
            rows.writes,
            [(1, Some(Site::Iad)), (2, Some(Site::Pdx)), (3, None)]
        );
        assert_eq!(rows.canaries, [(1_000_000_000_001, Some(Site::Iad))]);
    }
}
