//! The failover-hold gate (docs/design/requirements.md R003.16;
//! docs/design/history.md#issue-10-case-6): a failover-hold the deploy API granted between a
//! poll's read of the deploy leases and the Fence that starts a planned failover must still
//! defer that failover. Core decides which decisions start a deferrable disruption
//! ([`gated_start`]) and how long one stays in flight ([`deferrable_disruption_in_flight`]);
//! this module is the atomic step.
//!
//! The gate lives inside the lock the deploy API and the poll loop already share for every
//! lease load-modify-save ([`GateLock`]), so closing it and granting a hold exclude each
//! other. Before act executes a decision that starts a planned failover,
//! [`confirm_no_hold`] takes the lock and re-reads the leases:
//!
//! - no live hold: it closes the gate, and from then on the API treats the group as between
//!   confirmed states (a hold POST, or any grant or renewal, answers the
//!   `423 {"error":"unstable","retryAfterSeconds"}`, as it does once the poll has published the
//!   Draining memory, docs/design/requirements.md R003.13); the decision is executed;
//! - a live hold (granted after gather's read) or unreadable leases: the gate stays open and
//!   the poll is decided again with that hold in the observation; core defers the planned
//!   failover (`Deferred`, `DeploymentHold`) and nothing is fenced.
//!
//! The gate reopens ([`reopen_when_settled`]) once a poll's decided memory has no deferrable
//! disruption in flight (completed, rejected, aborted or dropped), and ([`reopen`]) when the
//! group's poll loop loses leadership or stops. It is in memory only, so a restart reopens
//! it too; the restarted leader judges a Draining or Promoting planned failover from status
//! as between confirmed states anyway. No hold is refused forever.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bloodraven_api::{MysqlFailoverGroupSpec, Timestamp};
use bloodraven_core::deploy::{DeployLeases, HoldInfo, Stability};
use bloodraven_core::engine::{deferrable_disruption_in_flight, gated_start, GatedStart};
use bloodraven_core::{decide, Decision, GroupMemory, Observation};
use tokio::sync::Mutex;

use crate::error::Result;
use crate::gather::{hold_after_fence, UNREADABLE_HOLD};

/// The lock shared by the deploy API and the poll loop: it serialises every deploy-lease
/// load-modify-save in this process and guards the gates.
pub type GateLock = Arc<Mutex<HoldGates>>;

/// The closed gates, one per group (`namespace/name`) with a planned failover under way that
/// started in this process.
#[derive(Debug, Default)]
pub struct HoldGates {
    closed: BTreeMap<(String, String), GatedStart>,
}

impl HoldGates {
    /// A new lock over no closed gates.
    pub fn new_lock() -> GateLock {
        Arc::new(Mutex::new(Self::default()))
    }

    /// The disruption the gate of `namespace/name` is closed for, if it is closed.
    pub fn closed_for(&self, namespace: &str, name: &str) -> Option<&GatedStart> {
        self.closed.get(&(namespace.to_string(), name.to_string()))
    }

    fn close(&mut self, namespace: &str, name: &str, start: GatedStart) {
        self.closed
            .insert((namespace.to_string(), name.to_string()), start);
    }

    fn open(&mut self, namespace: &str, name: &str) -> Option<GatedStart> {
        self.closed
            .remove(&(namespace.to_string(), name.to_string()))
    }

    /// The lease stability the deploy API decides a request by: `judged` (core's
    /// `lease_stability` over the memory it read), or between confirmed states while the
    /// group's gate is closed, even if that memory predates the drain.
    pub fn stability(
        &self,
        namespace: &str,
        name: &str,
        judged: Stability,
        retry_after: Duration,
    ) -> Stability {
        match self.closed_for(namespace, name) {
            Some(_) => Stability::BetweenConfirmedStates { retry_after },
            None => judged,
        }
    }
}

/// The group a gate belongs to.
#[derive(Clone, Copy, Debug)]
pub struct GroupKey<'a> {
    /// The group's namespace.
    pub namespace: &'a str,
    /// The group's name.
    pub name: &'a str,
}

/// What act executes for `decision`, decided from `memory` and `observation` at `now`.
///
/// A decision that starts no deferrable disruption is returned as it is. One that does is
/// executed only after `load` (the group's stored leases), read under `lock`, shows no live
/// failover-hold at `now_of()`: then the gate is closed before the lock is released. A hold
/// found there, or leases that could not be read (deferred one poll, as gather does), makes
/// the poll decided again with that hold, which defers the planned failover.
#[allow(clippy::too_many_arguments)]
pub async fn confirm_no_hold(
    lock: &GateLock,
    group: GroupKey<'_>,
    spec: &MysqlFailoverGroupSpec,
    memory: &GroupMemory,
    observation: &Observation,
    decision: Decision,
    now: Timestamp,
    load: impl Future<Output = Result<DeployLeases>>,
    now_of: impl Fn() -> Timestamp,
) -> Decision {
    let Some(start) = gated_start(memory, &decision.memory) else {
        return decision;
    };
    let mut gates = lock.lock().await;
    let hold = match load.await {
        Ok(leases) => hold_after_fence(&leases, start.topology_generation, now_of()),
        Err(error) => {
            tracing::warn!(group = %group.name, namespace = %group.namespace, from = %start.from, target = %start.target, %error, "deploy lease state unreadable before the fence; planned failover deferred this poll");
            Some(HoldInfo {
                earliest_expiry: now_of() + spec.poll_interval.get(),
                operation_id: UNREADABLE_HOLD.to_string(),
                instance: String::new(),
            })
        }
    };
    let Some(hold) = hold else {
        tracing::info!(group = %group.name, namespace = %group.namespace, from = %start.from, target = %start.target, generation = start.topology_generation, "failover-hold gate closed: no live hold before the fence; holds answer 423 until the planned failover ends");
        gates.close(group.namespace, group.name, start);
        return decision;
    };
    drop(gates);
    tracing::warn!(group = %group.name, namespace = %group.namespace, from = %start.from, target = %start.target, operationId = %hold.operation_id, instance = %hold.instance, "failover-hold granted after this poll read the leases; planned failover deferred, nothing fenced");
    let mut late = observation.clone();
    late.deploy_hold = Some(hold);
    let redecided = decide(spec, memory, &late, now);
    assert!(
        gated_start(memory, &redecided.memory).is_none(),
        "a live failover-hold must defer the planned failover"
    );
    redecided
}

/// Reopens the gate of `group` once `decided` (a poll's decided memory) has no deferrable
/// disruption in flight.
pub async fn reopen_when_settled(lock: &GateLock, group: GroupKey<'_>, decided: &GroupMemory) {
    if deferrable_disruption_in_flight(decided) {
        return;
    }
    let phase = decided
        .planned_failover
        .as_ref()
        .map(|planned| format!("{:?}", planned.phase))
        .unwrap_or_else(|| "gone".to_string());
    reopen(lock, group, &format!("planned failover {phase}")).await;
}

/// Reopens the gate of `group` (a no-op when it is open), logging `why`.
pub async fn reopen(lock: &GateLock, group: GroupKey<'_>, why: &str) {
    let opened = lock.lock().await.open(group.namespace, group.name);
    if let Some(start) = opened {
        tracing::info!(group = %group.name, namespace = %group.namespace, from = %start.from, target = %start.target, why, "failover-hold gate reopened");
    }
}
