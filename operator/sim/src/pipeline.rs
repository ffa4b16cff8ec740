//! The simulated deploy pipeline: a client of the lease API of docs/design/requirements.md R003
//! that takes the migration mutex, then the failover-hold, heartbeats every ttl/3, and releases
//! both when done.
//!
//! Requests are decided by core's deploy module ([`DeployLeases`]) on the operator's clock, and
//! only while the operator runs (only the leader serves `/deploy/v1`). On every successful
//! renewal the pipeline compares the generation with the one it was granted under: a renewal
//! that succeeds after the topology generation moved is the finding `LeaseNotRevoked`.
//!
//! [`DeployLeases`]: bloodraven_core::deploy::DeployLeases

use crate::faults::FaultEvent;
use crate::invariants::FindingClass;
use crate::trace;
use crate::world::{Event, World};
use bloodraven_core::deploy::{
    AcquireOutcome, AuthorizedClient, Caller, LeaseCredentials, LeaseKind, LeaseRequest,
    LeaseToken, Refusal, RenewOutcome, RequestContext, Stability,
};
use bloodraven_core::engine::lease_stability;
use rand::Rng;
use std::time::Duration;

/// The `MysqlDatabase` the pipeline migrates.
pub const INSTANCE: &str = "counter-app";

/// Shortest and longest migration, in milliseconds.
pub const MIGRATION_MILLIS_RANGE: (u64, u64) = (10_000, 120_000);

fn caller() -> Caller {
    Caller {
        namespace: "counter".to_string(),
        service_account: "deployer".to_string(),
    }
}

fn clients() -> Vec<AuthorizedClient> {
    vec![AuthorizedClient {
        instance: INSTANCE.to_string(),
        namespace: "counter".to_string(),
        service_account: "deployer".to_string(),
    }]
}

impl World {
    /// The generation the leader judges requests by: its published memory's, else the
    /// status's (a restarted operator before its first poll).
    fn deploy_generation(&self) -> u64 {
        match &self.operator.memory {
            Some(memory) => memory.topology_generation,
            None => self.store.status_generation(),
        }
    }

    /// Core's `lease_stability` over the leader's memory; a restarted operator that has not
    /// polled yet knows nothing confirmed.
    fn deploy_stability(&self) -> Stability {
        let retry_after = Duration::from_millis(crate::operator::POLL_INTERVAL_MILLIS);
        match &self.operator.memory {
            Some(memory) => lease_stability(memory, retry_after),
            None => Stability::BetweenConfirmedStates { retry_after },
        }
    }

    /// The pipeline starts a migration (if idle and the operator serves the API).
    pub fn pipeline_start(&mut self) {
        if self.pipeline.operation != 0 || !self.operator.up {
            return;
        }
        self.pipeline.sequence += 1;
        let operation = self.pipeline.sequence;
        let ttl_seconds = self.rng.random_range(5..=60);
        let caller = caller();
        let clients = clients();
        let context = RequestContext {
            caller: &caller,
            clients: &clients,
            topology_generation: self.deploy_generation(),
            stability: self.deploy_stability(),
            now: self.operator_now(),
        };
        let mut held = Vec::new();
        for kind in [LeaseKind::Migration, LeaseKind::FailoverHold] {
            let request = LeaseRequest {
                kind,
                operation_id: format!("op-{operation}"),
                instance: INSTANCE.to_string(),
                ttl_seconds,
            };
            let token = LeaseToken::new(format!("token-{operation}-{}", kind.as_str()));
            let handled = self.store.deploy.acquire(&context, &request, token);
            match handled.outcome {
                AcquireOutcome::Granted(grant) | AcquireOutcome::Rotated(grant) => {
                    trace!(
                        self.trace,
                        self.now,
                        "pipeline",
                        "op-{operation} holds {} until {} (generation {})",
                        kind.as_str(),
                        grant.expires_at,
                        grant.topology_generation
                    );
                    held.push((
                        LeaseCredentials {
                            kind,
                            operation_id: grant.operation_id,
                            token: grant.token,
                        },
                        grant.topology_generation,
                    ));
                }
                AcquireOutcome::Refused(refusal) => {
                    trace!(
                        self.trace,
                        self.now,
                        "pipeline",
                        "op-{operation} refused {}: {}",
                        kind.as_str(),
                        refusal.error_code()
                    );
                    break;
                }
            }
        }
        if held.is_empty() {
            return;
        }
        self.pipeline.operation = operation;
        self.pipeline.held = held;
        let heartbeat = ttl_seconds.unsigned_abs() * 1000 / 3;
        self.pipeline.heartbeat_millis = heartbeat;
        self.schedule_in(
            heartbeat,
            Event::Fault(FaultEvent::PipelineHeartbeat { operation }),
        );
        let length = self
            .rng
            .random_range(MIGRATION_MILLIS_RANGE.0..=MIGRATION_MILLIS_RANGE.1);
        self.schedule_in(
            length,
            Event::Fault(FaultEvent::PipelineFinish { operation }),
        );
    }

    /// The pipeline renews every lease it holds.
    pub fn pipeline_heartbeat(&mut self, operation: u64) {
        if self.pipeline.operation != operation || self.pipeline.held.is_empty() {
            return;
        }
        let heartbeat = self.pipeline.heartbeat_millis;
        self.schedule_in(
            heartbeat,
            Event::Fault(FaultEvent::PipelineHeartbeat { operation }),
        );
        if !self.operator.up {
            return;
        }
        let caller = caller();
        let clients = clients();
        let generation = self.deploy_generation();
        let context = RequestContext {
            caller: &caller,
            clients: &clients,
            topology_generation: generation,
            stability: self.deploy_stability(),
            now: self.operator_now(),
        };
        let held = std::mem::take(&mut self.pipeline.held);
        let mut kept = Vec::new();
        for (credentials, granted_generation) in held {
            let handled = self.store.deploy.renew(&context, &credentials);
            match handled.outcome {
                RenewOutcome::Renewed(renewal) => {
                    if generation != granted_generation
                        || renewal.topology_generation != granted_generation
                    {
                        let detail = format!(
                            "op-{operation} renewed {} granted under generation {granted_generation} while the \
                             generation is {generation}",
                            credentials.kind.as_str()
                        );
                        self.checker
                            .report(FindingClass::LeaseNotRevoked, self.now, detail);
                    }
                    kept.push((credentials, granted_generation));
                }
                RenewOutcome::Refused(Refusal::Unstable { .. }) => {
                    kept.push((credentials, granted_generation))
                }
                RenewOutcome::Refused(refusal) => {
                    // 409 revoked, 404, 403 token_mismatch: authority lost; stop
                    // (docs/design/requirements.md R003.21-R003.22).
                    trace!(
                        self.trace,
                        self.now,
                        "pipeline",
                        "op-{operation} lost {}: {}",
                        credentials.kind.as_str(),
                        refusal.error_code()
                    );
                }
            }
        }
        if kept.is_empty() {
            self.pipeline.operation = 0;
        }
        self.pipeline.held = kept;
    }

    /// The pipeline finishes: releases the hold, then the mutex.
    pub fn pipeline_finish(&mut self, operation: u64) {
        if self.pipeline.operation != operation {
            return;
        }
        if self.operator.up {
            let caller = caller();
            let clients = clients();
            let context = RequestContext {
                caller: &caller,
                clients: &clients,
                topology_generation: self.deploy_generation(),
                stability: self.deploy_stability(),
                now: self.operator_now(),
            };
            let mut held = std::mem::take(&mut self.pipeline.held);
            held.sort_by_key(|(c, _)| match c.kind {
                LeaseKind::FailoverHold => 0,
                LeaseKind::Migration => 1,
            });
            for (credentials, _) in held {
                let _ = self.store.deploy.release(&context, &credentials);
            }
            trace!(
                self.trace,
                self.now,
                "pipeline",
                "op-{operation} done, leases released"
            );
        } else {
            // The operator is down: the leases lapse on their own.
            self.pipeline.held.clear();
        }
        self.pipeline.operation = 0;
    }
}
