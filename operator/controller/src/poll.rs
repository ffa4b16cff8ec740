//! The poll loop: per `MysqlFailoverGroup`, every `pollInterval`, gather -> decide -> act
//! (STYLE.md 1). Only the leader polls; a standby keeps no memory and loads it from status
//! when it becomes leader.

use std::collections::BTreeMap;
use std::time::Duration;

use bloodraven_api::{MysqlFailoverGroup, Timestamp};
use bloodraven_core::{decide, GroupMemory};
use kube::api::ListParams;
use std::sync::Arc;

use kube::runtime::events::{Recorder, Reporter};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::act::Executor;
use crate::deploy_api::store::LeaseStore;
use crate::error::{Error, Result};
use crate::gather::gather;
use crate::leader::LeaderFlag;
use crate::memory::MemoryBoard;
use crate::metrics::Metrics;
use crate::sidecar::SidecarClient;

/// How often the set of groups is re-listed.
pub const GROUP_LIST_INTERVAL: Duration = Duration::from_secs(5);
/// How often a standby checks whether it became leader.
pub const STANDBY_INTERVAL: Duration = Duration::from_secs(1);
/// Back-off after a failed read of a group.
pub const READ_RETRY_INTERVAL: Duration = Duration::from_secs(2);

/// The operator's wall clock as a core timestamp.
pub fn wall_clock() -> Timestamp {
    Timestamp::from_unix_millis(jiff::Timestamp::now().as_millisecond())
}

/// Everything a poll needs.
#[derive(Clone)]
pub struct Shell {
    /// The API client.
    pub client: Client,
    /// The sidecar client.
    pub sidecars: SidecarClient,
    /// Deploy lease storage (shares its lock with the deploy API).
    pub store: LeaseStore,
    /// Event recorder (kept across polls so repeated Events form a series).
    pub recorder: Arc<Recorder>,
    /// Metrics.
    pub metrics: Metrics,
    /// Leadership.
    pub leader: LeaderFlag,
    /// Where each poll publishes the memory it returned (read by the deploy API).
    pub board: MemoryBoard,
}

impl Shell {
    /// The recorder of Events raised by `reporter` through `client`.
    pub fn recorder(client: &Client, reporter: Reporter) -> Arc<Recorder> {
        Arc::new(Recorder::new(client.clone(), reporter))
    }

    /// One poll of `group`, starting from `memory` (loaded from status when `None`). Returns
    /// the memory to carry to the next poll.
    pub async fn poll(
        &self,
        group: &MysqlFailoverGroup,
        memory: Option<GroupMemory>,
    ) -> GroupMemory {
        let _timer = self.metrics.poll_timer();
        let name = group.metadata.name.clone().unwrap_or_default();
        let memory = memory.unwrap_or_else(|| {
            tracing::info!(group = %name, "loading memory from status");
            GroupMemory::from_status(&group.spec, group.status.as_ref(), wall_clock())
        });
        // Ensure workloads (a shell concern, before observing; `decide` never sees it).
        if self.leader.is_leader() {
            crate::workloads::ensure(&self.client, &self.recorder, group).await;
        }
        let gathered = gather(
            &self.client,
            &self.sidecars,
            &self.store,
            group,
            &memory,
            wall_clock,
        )
        .await;
        let observation = gathered.observation;
        let now = wall_clock();
        if let Some(leases) = &gathered.deploy_leases {
            let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
            self.metrics
                .set_deploy_leases_active(&format!("{namespace}/{name}"), leases.active_count(now));
        }
        let decision = decide(&group.spec, &memory, &observation, now);
        if !self.leader.is_leader() {
            tracing::info!(group = %name, "lost leadership during the poll; nothing executed");
            return memory;
        }
        let executor = Executor {
            client: &self.client,
            sidecars: &self.sidecars,
            store: &self.store,
            recorder: &self.recorder,
            metrics: &self.metrics,
            group,
        };
        let failures = executor.execute(&decision, now).await;
        if let Err(error) = executor
            .fence_stale_leases(
                decision.memory.topology_generation,
                gathered.deploy_leases.as_ref(),
                now,
            )
            .await
        {
            tracing::warn!(group = %name, action = "FenceDeployLeases", generation = decision.memory.topology_generation, outcome = "unknown", %error, "failed to revoke deploy leases of an older generation; retried next poll");
        }
        if let Err(error) = executor.persist(&decision.memory).await {
            tracing::warn!(group = %name, action = "WriteStatus", generation = decision.memory.topology_generation, outcome = "unknown", %error, "status write failed; memory kept in process, re-read on restart");
        }
        for transition in &decision.transitions {
            tracing::info!(group = %name, site = %transition.site, from = transition.from.as_str(), to = transition.to.as_str(), generation = decision.memory.topology_generation, "site transition");
        }
        tracing::debug!(
            group = %name,
            generation = decision.memory.topology_generation,
            active = %decision.memory.active_site,
            actions = decision.actions.len(),
            failed = failures,
            "poll"
        );
        decision.memory
    }

    /// Polls `namespace/name` every `pollInterval` while leader, until the group is deleted
    /// or `shutdown` flips. Each poll's memory is published on the [`MemoryBoard`]; it is
    /// forgotten when leadership is lost or the loop ends.
    pub async fn run_group(
        &self,
        namespace: String,
        name: String,
        shutdown: watch::Receiver<bool>,
    ) {
        self.poll_group(&namespace, &name, shutdown).await;
        self.board.forget(&namespace, &name);
    }

    async fn poll_group(&self, namespace: &str, name: &str, mut shutdown: watch::Receiver<bool>) {
        let api: Api<MysqlFailoverGroup> = Api::namespaced(self.client.clone(), namespace);
        let mut memory: Option<GroupMemory> = None;
        loop {
            let wait = if !self.leader.is_leader() {
                memory = None;
                self.board.forget(namespace, name);
                STANDBY_INTERVAL
            } else {
                match api.get_opt(name).await {
                    Ok(None) => {
                        tracing::info!(group = %name, namespace = %namespace, "group deleted; stopping its poll loop");
                        return;
                    }
                    Ok(Some(group)) if group.metadata.deletion_timestamp.is_some() => {
                        tracing::info!(group = %name, namespace = %namespace, "group terminating; stopping its poll loop");
                        return;
                    }
                    Ok(Some(group)) => {
                        // An invalid spec is core's to judge (it raises SpecInvalid and
                        // decides nothing else).
                        let polled = self.poll(&group, memory.take()).await;
                        self.board.publish(namespace, name, &polled);
                        memory = Some(polled);
                        group
                            .spec
                            .poll_interval
                            .get()
                            .max(Duration::from_millis(100))
                    }
                    Err(error) => {
                        tracing::warn!(group = %name, namespace = %namespace, %error, "failed to read group");
                        READ_RETRY_INTERVAL
                    }
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Keeps one poll loop per group (all namespaces) until `shutdown` flips.
    pub async fn run_groups(&self, shutdown: watch::Receiver<bool>) -> Result<()> {
        let api: Api<MysqlFailoverGroup> = Api::all(self.client.clone());
        let mut loops: BTreeMap<(String, String), JoinHandle<()>> = BTreeMap::new();
        let mut stop = shutdown.clone();
        loop {
            loops.retain(|_, handle| !handle.is_finished());
            if self.leader.is_leader() {
                match api.list(&ListParams::default()).await {
                    Ok(groups) => {
                        for group in groups.items {
                            let key = (
                                group.metadata.namespace.clone().unwrap_or_default(),
                                group.metadata.name.clone().unwrap_or_default(),
                            );
                            if loops.contains_key(&key) {
                                continue;
                            }
                            let shell = self.clone();
                            let receiver = shutdown.clone();
                            let (namespace, name) = key.clone();
                            loops.insert(
                                key,
                                tokio::spawn(async move {
                                    shell.run_group(namespace, name, receiver).await
                                }),
                            );
                        }
                    }
                    Err(error) => {
                        let error = Error::kube("list mysqlfailovergroups", error);
                        tracing::warn!(%error, "failed to list groups");
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(GROUP_LIST_INTERVAL) => {}
                _ = stop.changed() => break,
            }
        }
        for (_, handle) in loops {
            let _ = handle.await;
        }
        Ok(())
    }
}
