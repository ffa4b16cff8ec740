//! The poll loop: per `MysqlFailoverGroup`, every `pollInterval` at a fixed rate
//! ([`run_turns`]), gather -> decide -> act (docs/design/style.md#1-gather-decide-act). Only
//! the leader polls; a standby keeps no memory and loads it from status when it becomes leader.

use std::collections::BTreeMap;
use std::time::Duration;

use bloodraven_api::{MysqlFailoverGroup, Timestamp};
use bloodraven_core::engine::{DnsReading, GroupAnnotations, Observation};
use bloodraven_core::{decide, GroupMemory};
use kube::api::{DynamicObject, ListParams};
use kube::Resource;
use std::sync::Arc;

use crate::events::Recorder;
use futures::FutureExt;
use kube::runtime::events::Reporter;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{interval_at, Instant, Interval, MissedTickBehavior};

use crate::act::Executor;
use crate::decode::{decode, get_api, DecodeReports};
use crate::deploy_api::store::LeaseStore;
use crate::error::{Error, Result};
use crate::gather::gather;
use crate::hold_gate::{confirm_no_hold, reopen, reopen_when_settled, GroupKey};
use crate::leader::LeaderFlag;
use crate::memory::{status_while_invalid, MemoryBoard};
use crate::metrics::Metrics;
use crate::sidecar::SidecarClient;

/// How often the set of groups is re-listed.
pub const GROUP_LIST_INTERVAL: Duration = Duration::from_secs(5);
/// How often a standby checks whether it became leader.
pub const STANDBY_INTERVAL: Duration = Duration::from_secs(1);
/// Back-off after a failed read of a group.
pub const READ_RETRY_INTERVAL: Duration = Duration::from_secs(2);

/// The shortest period between two polls of a group, whatever its `pollInterval` says.
pub const POLL_INTERVAL_MIN: Duration = Duration::from_millis(100);
/// The shortest period between two reads of a group whose spec is invalid (its
/// `pollInterval` may be the problem, e.g. `0`).
pub const SPEC_INVALID_RECHECK_MIN: Duration = Duration::from_secs(2);

/// What one turn of a group's poll loop did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Polled the group: the next poll starts `period` after this one started.
    Polled {
        /// The group's poll interval.
        period: Duration,
    },
    /// Did not poll (a standby, or the group could not be read): the next turn starts
    /// `after` this one ended.
    Waited {
        /// The pause before the next turn.
        after: Duration,
    },
    /// The loop is over (the group is gone).
    Stop,
}

/// A loop [`run_turns`] drives, one turn at a time.
pub trait Turns {
    /// One turn: a poll, or a pause.
    fn turn(&mut self) -> impl std::future::Future<Output = Turn> + Send;
}

/// The loop of one group: its memory carried from poll to poll.
struct GroupLoop<'a> {
    shell: &'a Shell,
    api: Api<DynamicObject>,
    namespace: &'a str,
    name: &'a str,
    memory: Option<GroupMemory>,
}

impl Turns for GroupLoop<'_> {
    async fn turn(&mut self) -> Turn {
        self.shell
            .turn(&self.api, self.namespace, self.name, &mut self.memory)
            .await
    }
}

/// Runs `turns` until a turn returns [`Turn::Stop`] or `shutdown` flips.
///
/// Polls are fixed-rate: a poll starts `pollInterval` after the previous one *started*, not
/// after it ended, so failure detection keeps its floor of pollInterval x failureThreshold
/// (docs/design/requirements.md R001.9: 2 s x 3 = 6 s) however long each poll takes. A poll
/// that overran its interval is followed by the next one at once, and the rhythm restarts from
/// there ([`MissedTickBehavior::Delay`]): never a burst of catch-up polls. A changed interval
/// takes effect from the poll that read it; a turn that did not poll drops the rhythm.
pub async fn run_turns(turns: &mut (impl Turns + Send), mut shutdown: watch::Receiver<bool>) {
    let mut ticker: Option<(Duration, Interval)> = None;
    loop {
        let started = Instant::now();
        let outcome = turns.turn().await;
        let wait = match outcome {
            Turn::Stop => return,
            Turn::Waited { after } => {
                ticker = None;
                tokio::time::sleep(after).boxed()
            }
            Turn::Polled { period } => {
                let interval = match ticker.take() {
                    Some((current, interval)) if current == period => interval,
                    Some(_) | None => {
                        let mut interval = interval_at(started + period, period);
                        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
                        interval
                    }
                };
                let (_, interval) = ticker.insert((period, interval));
                async move {
                    interval.tick().await;
                }
                .boxed()
            }
        };
        tokio::select! {
            _ = wait => {}
            _ = shutdown.changed() => return,
        }
    }
}

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
    /// The `MysqlDatabase` schemas each group's polls ensured ([`crate::databases`]).
    pub databases: crate::databases::EnsuredDatabases,
    /// The stored objects reported as undecodable ([`crate::decode`]).
    pub undecodable: DecodeReports,
}

impl Shell {
    /// The recorder of Events raised by `reporter` through `client`.
    pub fn recorder(client: &Client, reporter: Reporter) -> Arc<Recorder> {
        Arc::new(Recorder::new(client.clone(), reporter))
    }

    /// One poll of `group`, starting from `memory` (loaded from status when `None`). Returns
    /// the memory to carry to the next poll: `None` only while the spec is invalid and no
    /// valid spec left a memory in this process ([`Shell::poll_invalid`]).
    pub async fn poll(
        &self,
        group: &MysqlFailoverGroup,
        memory: Option<GroupMemory>,
    ) -> Option<GroupMemory> {
        let problems = group.spec.validate();
        if problems.is_empty() {
            Some(self.poll_valid(group, memory).await)
        } else {
            self.poll_invalid(group, memory, &problems).await
        }
    }

    /// One poll of a group whose spec is invalid (docs/design/operator.md#mysqlfailovergroup,
    /// "An invalid spec builds nothing and says so"): nothing is built (no StatefulSet, Secret,
    /// Service or DNSEndpoint), no sidecar is called, and core decides nothing but its
    /// `SpecInvalid` Event (when the problem is new) and the `SpecValid=False` condition naming
    /// every field, which the status carries ([`status_while_invalid`]). What runs keeps
    /// running, as when the operator is away.
    ///
    /// A memory carried from a valid spec is carried on (with the condition), so that the
    /// poll after the fix resumes from it; none is made up under the invalid spec
    /// (`from_status` needs its sites): the first valid poll loads one from status.
    async fn poll_invalid(
        &self,
        group: &MysqlFailoverGroup,
        carried: Option<GroupMemory>,
        problems: &[String],
    ) -> Option<GroupMemory> {
        let name = group.metadata.name.clone().unwrap_or_default();
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let _timer = self.metrics.poll_timer(&format!("{namespace}/{name}"));
        let now = wall_clock();
        let stored = group.status.as_ref();
        let base = carried.clone().unwrap_or_else(|| GroupMemory {
            conditions: stored
                .map(|status| status.conditions.clone())
                .unwrap_or_default(),
            ..GroupMemory::from_status(&group.spec, stored, now)
        });
        let observation = Observation {
            group: name.clone(),
            namespace: namespace.clone(),
            sites: Vec::new(),
            annotations: GroupAnnotations::default(),
            deploy_hold: None,
            dns: DnsReading::Unknown {
                error: "not read: the spec is invalid".to_string(),
            },
            polled_at: None,
        };
        let decision = decide(&group.spec, &base, &observation, now);
        if !self.leader.may_act() {
            return carried;
        }
        if !decision.actions.is_empty() {
            tracing::warn!(group = %name, namespace = %namespace, problems = %problems.join("; "), "spec invalid: nothing built and no failover decided until it is fixed");
        }
        let executor = Executor {
            client: &self.client,
            sidecars: &self.sidecars,
            store: &self.store,
            recorder: &self.recorder,
            metrics: &self.metrics,
            group,
            leader: &self.leader,
        };
        executor.execute(&decision, now).await;
        let status = status_while_invalid(
            carried.as_ref(),
            stored,
            &decision.memory.conditions,
            group.metadata.generation,
        );
        if let Err(error) = executor.persist_status(status).await {
            tracing::warn!(group = %name, namespace = %namespace, action = "WriteStatus", outcome = "unknown", %error, "status write failed; retried next poll");
        }
        carried.map(|_| decision.memory)
    }

    /// One poll of `group`, whose spec is valid.
    async fn poll_valid(
        &self,
        group: &MysqlFailoverGroup,
        memory: Option<GroupMemory>,
    ) -> GroupMemory {
        let _timer = self.metrics.poll_timer(&format!(
            "{}/{}",
            group.metadata.namespace.as_deref().unwrap_or_default(),
            group.metadata.name.as_deref().unwrap_or_default()
        ));
        let name = group.metadata.name.clone().unwrap_or_default();
        let memory = memory.unwrap_or_else(|| {
            tracing::info!(group = %name, "loading memory from status");
            GroupMemory::from_status(&group.spec, group.status.as_ref(), wall_clock())
        });
        // Ensure workloads (a shell concern, before observing; `decide` never sees it).
        if self.leader.is_leader() {
            crate::workloads::ensure(&self.client, group, self.sidecars.signing_keys()).await;
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
        // The executor re-checks before each action too ([`Executor`]'s gate).
        if !self.leader.may_act() {
            tracing::info!(group = %name, "lost leadership during the poll; nothing executed");
            return memory;
        }
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let key = GroupKey {
            namespace: &namespace,
            name: &name,
        };
        // A decision that starts a planned failover is executed only once no failover-hold
        // was granted since gather read the leases (docs/design/history.md#issue-10-case-6).
        let decision = confirm_no_hold(
            self.store.gate_lock(),
            key,
            &group.spec,
            &memory,
            &observation,
            decision,
            now,
            self.store.load(&namespace, &name),
            wall_clock,
        )
        .await;
        let executor = Executor {
            client: &self.client,
            sidecars: &self.sidecars,
            store: &self.store,
            recorder: &self.recorder,
            metrics: &self.metrics,
            group,
            leader: &self.leader,
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
        reopen_when_settled(self.store.gate_lock(), key, &decision.memory).await;
        crate::databases::ensure(self, group, &decision.memory).await;
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

    /// Polls `namespace/name` every `pollInterval` (fixed rate) while leader, until the group
    /// is deleted or `shutdown` flips. Each poll's memory is published on the
    /// [`MemoryBoard`]; it is forgotten, and the group's failover-hold gate reopened, when
    /// leadership is lost or the loop ends.
    pub async fn run_group(
        &self,
        namespace: String,
        name: String,
        shutdown: watch::Receiver<bool>,
    ) {
        self.poll_group(&namespace, &name, shutdown).await;
        self.board.forget(&namespace, &name);
        let key = GroupKey {
            namespace: &namespace,
            name: &name,
        };
        reopen(self.store.gate_lock(), key, "poll loop stopped").await;
    }

    async fn poll_group(&self, namespace: &str, name: &str, shutdown: watch::Receiver<bool>) {
        let mut group = GroupLoop {
            shell: self,
            api: get_api::<MysqlFailoverGroup>(&self.client, Some(namespace)),
            namespace,
            name,
            memory: None,
        };
        run_turns(&mut group, shutdown).await;
    }

    /// One turn of a group's loop: a poll while leader, else nothing. The group is read on
    /// its own and decoded here: one that does not decode is reported and waited on, its
    /// memory kept ([`crate::decode`]).
    async fn turn(
        &self,
        api: &Api<DynamicObject>,
        namespace: &str,
        name: &str,
        memory: &mut Option<GroupMemory>,
    ) -> Turn {
        if !self.leader.is_leader() {
            *memory = None;
            self.board.forget(namespace, name);
            reopen(
                self.store.gate_lock(),
                GroupKey { namespace, name },
                "leadership lost",
            )
            .await;
            return Turn::Waited {
                after: STANDBY_INTERVAL,
            };
        }
        let kind = MysqlFailoverGroup::kind(&());
        let object = match api.get_opt(name).await {
            Ok(None) => {
                tracing::info!(group = %name, namespace = %namespace, "group deleted; stopping its poll loop");
                self.undecodable
                    .resolved(&self.metrics, &kind, namespace, name);
                return Turn::Stop;
            }
            Ok(Some(object)) if object.metadata.deletion_timestamp.is_some() => {
                tracing::info!(group = %name, namespace = %namespace, "group terminating; stopping its poll loop");
                self.undecodable
                    .resolved(&self.metrics, &kind, namespace, name);
                return Turn::Stop;
            }
            Ok(Some(object)) => object,
            Err(error) => {
                tracing::warn!(group = %name, namespace = %namespace, %error, "failed to read group");
                return Turn::Waited {
                    after: READ_RETRY_INTERVAL,
                };
            }
        };
        let group = match decode::<MysqlFailoverGroup>(object) {
            Ok(group) => group,
            Err(undecodable) => {
                self.undecodable
                    .report(&self.recorder, &self.metrics, &undecodable)
                    .await;
                return Turn::Waited {
                    after: READ_RETRY_INTERVAL,
                };
            }
        };
        self.undecodable
            .resolved(&self.metrics, &kind, namespace, name);
        let valid = group.spec.validate().is_empty();
        let polled = self.poll(&group, memory.take()).await;
        match &polled {
            Some(polled) => self.board.publish(namespace, name, polled),
            None => self.board.forget(namespace, name),
        }
        let period = match &polled {
            // pollInterval, or a follow-up while a failover is in flight (core).
            Some(polled) if valid => {
                bloodraven_core::engine::next_poll_in(&group.spec, polled, wall_clock())
                    .max(POLL_INTERVAL_MIN)
            }
            // Nothing is decided while the spec is invalid: no follow-ups.
            Some(_) | None => group.spec.poll_interval.get().max(SPEC_INVALID_RECHECK_MIN),
        };
        *memory = polled;
        Turn::Polled { period }
    }

    /// Keeps one poll loop per group (all namespaces) until `shutdown` flips. Groups are
    /// discovered by their metadata only: a stored group that does not decode cannot fail
    /// the list (docs/design/operator.md#mysqlfailovergroup, "An object that does not decode is
    /// skipped and reported"); its own loop reports it.
    pub async fn run_groups(&self, shutdown: watch::Receiver<bool>) -> Result<()> {
        let api: Api<MysqlFailoverGroup> = Api::all(self.client.clone());
        let mut loops: BTreeMap<(String, String), JoinHandle<()>> = BTreeMap::new();
        let mut stop = shutdown.clone();
        loop {
            loops.retain(|_, handle| !handle.is_finished());
            if self.leader.is_leader() {
                match api.list_metadata(&ListParams::default()).await {
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
            if !wait_to_list_groups(&self.leader, &mut stop).await {
                break;
            }
        }
        for (_, handle) in loops {
            let _ = handle.await;
        }
        Ok(())
    }
}

/// Waits until the group list is due again: [`GROUP_LIST_INTERVAL`], or at once when this
/// replica becomes the leader meanwhile (a standby's list interval would otherwise delay its
/// first poll after winning the election by up to that interval). `false`: shut down.
async fn wait_to_list_groups(leader: &LeaderFlag, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(GROUP_LIST_INTERVAL) => true,
        _ = leader.acquired() => true,
        _ = stop.changed() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns that record when they start and then act as `script` says for that turn.
    struct Scripted<F> {
        origin: Instant,
        starts: Vec<u128>,
        script: F,
    }

    impl<F, Fut> Turns for Scripted<F>
    where
        F: FnMut(usize) -> Fut + Send,
        Fut: std::future::Future<Output = Turn> + Send,
    {
        fn turn(&mut self) -> impl std::future::Future<Output = Turn> + Send {
            self.starts.push((Instant::now() - self.origin).as_millis());
            (self.script)(self.starts.len())
        }
    }

    fn scripted<F>(script: F) -> Scripted<F> {
        Scripted {
            origin: Instant::now(),
            starts: Vec::new(),
            script,
        }
    }

    /// docs/design/requirements.md R001.9 (detection floor pollInterval x failureThreshold) /
    /// docs/design/history.md#issue-8: polls start at a fixed rate, `pollInterval` after the
    /// previous poll started, whatever it took; an overrun is followed at once by the next poll
    /// (no burst), and the rhythm restarts there.
    #[tokio::test(start_paused = true)]
    async fn polls_start_at_a_fixed_rate_not_an_interval_after_the_previous_ended() {
        let period = Duration::from_secs(2);
        let took = [1500, 500, 2500, 100].map(Duration::from_millis);
        let (_stop, shutdown) = watch::channel(false);
        let mut turns = scripted(|turn: usize| async move {
            match took.get(turn - 1) {
                Some(duration) => {
                    tokio::time::sleep(*duration).await;
                    Turn::Polled { period }
                }
                None => Turn::Stop,
            }
        });
        run_turns(&mut turns, shutdown).await;
        // Sleeping an interval after each poll would start them at 0, 3500, 6000, 10500, 12600.
        assert_eq!(turns.starts, vec![0, 2000, 4000, 6500, 8500]);
    }

    /// A turn that did not poll (standby, unreadable group) waits its pause from its end, and
    /// the rhythm starts again with the next poll; shutdown ends the loop at once.
    #[tokio::test(start_paused = true)]
    async fn a_turn_without_a_poll_waits_from_its_end_and_shutdown_stops() {
        let (stop, shutdown) = watch::channel(false);
        let stop = &stop;
        let mut turns = scripted(|turn: usize| async move {
            match turn {
                1 => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Turn::Waited {
                        after: Duration::from_secs(1),
                    }
                }
                2 => Turn::Polled {
                    period: Duration::from_secs(2),
                },
                _ => {
                    let _ = stop.send(true);
                    Turn::Polled {
                        period: Duration::from_secs(2),
                    }
                }
            }
        });
        run_turns(&mut turns, shutdown).await;
        assert_eq!(turns.starts, vec![0, 1300, 3300]);
    }

    /// Scenario 011 (docs/design/requirements.md R001.6: the operator away while the primary
    /// dies): the replica that starts wins the election milliseconds after its group list first
    /// ran as a standby. The list is due again at once, not a whole list interval later (the
    /// live run's detection came 5 s late).
    #[tokio::test(start_paused = true)]
    async fn a_standby_lists_groups_as_soon_as_it_becomes_the_leader() {
        let leader = LeaderFlag::new(false);
        let (_stop, mut shutdown) = watch::channel(false);
        let elected = leader.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            elected.lead_until(Instant::now() + Duration::from_secs(10));
        });
        let started = Instant::now();
        assert!(wait_to_list_groups(&leader, &mut shutdown).await);
        assert_eq!(started.elapsed(), Duration::from_millis(100));
    }

    /// A leader that renews does not list faster than the interval, and a standby that stays
    /// one waits the interval; shutdown ends the wait.
    #[tokio::test(start_paused = true)]
    async fn renewals_do_not_hurry_the_group_list_and_shutdown_ends_its_wait() {
        let leader = LeaderFlag::new(false);
        leader.lead_until(Instant::now() + Duration::from_secs(10));
        leader.acquired().await; // the acquisition above
        let (stop, mut shutdown) = watch::channel(false);
        let renewing = leader.clone();
        tokio::spawn(async move {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                renewing.lead_until(Instant::now() + Duration::from_secs(10));
            }
        });
        let started = Instant::now();
        assert!(wait_to_list_groups(&leader, &mut shutdown).await);
        assert_eq!(started.elapsed(), GROUP_LIST_INTERVAL);
        let standby = LeaderFlag::new(false);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = stop.send(true);
        });
        let started = Instant::now();
        assert!(!wait_to_list_groups(&standby, &mut shutdown).await);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }
}
