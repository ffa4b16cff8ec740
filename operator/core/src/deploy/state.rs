//! The per-group deploy-lease state machine (docs/design/requirements.md R003.10-R003.24):
//! acquire, renew, release, expiry, revocation, and the admission question "does a live
//! failover-hold defer this?".
//!
//! Every operation takes the time and the group's topology generation as inputs and mutates
//! [`DeployLeases`] in place; the shell persists the result (Lease objects, tombstone
//! ConfigMap, see [`super::codec`]) and answers with the outcome's status code and body.

use std::{collections::BTreeMap, time::Duration};

use super::{
    auth::{is_known_client, may_coordinate, AuthorizedClient, Caller},
    disruption::{DisruptionKind, HoldInfo},
    error::{Error, Result},
    model::{
        check_instance, check_operation_id, clamp_ttl, LeaseCredentials, LeaseKind, LeaseRecord,
        LeaseRequest, LeaseToken, RevokeReason, TokenHash, Tombstone,
    },
    outcome::{
        AcquireOutcome, ForbiddenReason, Grant, LeaseSummary, Refusal, ReleaseOutcome,
        RenewOutcome, Renewal,
    },
};
use crate::time::Timestamp;

/// Whether the group is at a confirmed state, as the shell judged it from status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stability {
    /// The topology is confirmed: leases may be granted and renewed.
    Confirmed,
    /// The group is between confirmed states (a failover or promotion in flight): grants and
    /// renewals answer `423 unstable` and no deadline moves (docs/design/requirements.md R003.13).
    BetweenConfirmedStates {
        /// When the client should try again; sent as `retryAfterSeconds`.
        retry_after: Duration,
    },
}

/// Everything about a request that is not its body.
#[derive(Clone, Copy, Debug)]
pub struct RequestContext<'a> {
    /// The authenticated ServiceAccount (from the TokenReview).
    pub caller: &'a Caller,
    /// The group's authorized clients, from every `MysqlDatabase` whose
    /// `spec.failoverGroupRef.name` is the group.
    pub clients: &'a [AuthorizedClient],
    /// The group's current `status.topologyGeneration`.
    pub topology_generation: u64,
    /// Whether the group is between confirmed states.
    pub stability: Stability,
    /// The operator's clock; expiry is judged on it.
    pub now: Timestamp,
}

/// An operation's answer plus any leases it revoked on the way because they were stamped with
/// an older topology generation than the request's (see [`DeployLeases::fence_generation`]);
/// the shell raises a `DeploymentLeaseRevoked` event when `revoked` is not empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handled<O> {
    /// The answer to the request.
    pub outcome: O,
    /// Leases revoked (`TopologyChanged`) before the request was decided.
    pub revoked: Vec<Tombstone>,
}

/// The deploy-lease state of one group: at most one migration lease (the mutex), at most one
/// failover-hold, and a tombstone for every revoked lease, kept until the group is deleted.
///
/// Invariants, kept by every method: no lease belongs to a tombstoned operation; a lease of
/// kind K sits only in K's slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeployLeases {
    migration: Option<LeaseRecord>,
    failover_hold: Option<LeaseRecord>,
    tombstones: BTreeMap<(String, LeaseKind), Tombstone>,
}

impl DeployLeases {
    /// An empty group: no leases, no tombstones.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds the state from what the shell stored (decoded Lease objects and tombstones).
    ///
    /// A lease whose operation is tombstoned is dropped: it was revoked but its Lease object
    /// outlived the revocation (the shell deletes every stored Lease not in [`Self::leases`]).
    /// Two stored leases of one kind are an error: the mutex would be ambiguous.
    pub fn from_parts(
        leases: impl IntoIterator<Item = LeaseRecord>,
        tombstones: impl IntoIterator<Item = Tombstone>,
    ) -> Result<Self> {
        let mut state = Self::new();
        for tombstone in tombstones {
            state
                .tombstones
                .insert((tombstone.operation_id.clone(), tombstone.kind), tombstone);
        }
        for lease in leases {
            if state.tombstone_of(&lease.operation_id).is_some() {
                continue;
            }
            let slot = state.slot_mut(lease.kind);
            if let Some(first) = slot {
                return Err(Error::DuplicateLease {
                    kind: lease.kind,
                    first: first.operation_id.clone(),
                    second: lease.operation_id,
                });
            }
            *slot = Some(lease);
        }
        Ok(state)
    }

    /// The stored lease of `kind`, live or not yet swept.
    pub fn lease(&self, kind: LeaseKind) -> Option<&LeaseRecord> {
        match kind {
            LeaseKind::Migration => self.migration.as_ref(),
            LeaseKind::FailoverHold => self.failover_hold.as_ref(),
        }
    }

    /// Every stored lease, migration first.
    pub fn leases(&self) -> impl Iterator<Item = &LeaseRecord> {
        self.migration.iter().chain(self.failover_hold.iter())
    }

    /// Every tombstone, ordered by operation and kind.
    pub fn tombstones(&self) -> impl Iterator<Item = &Tombstone> {
        self.tombstones.values()
    }

    /// A tombstone of `operation_id`, if the operation was ever revoked.
    pub fn tombstone_of(&self, operation_id: &str) -> Option<&Tombstone> {
        self.tombstones_of(operation_id).next()
    }

    /// `POST .../leases`: take the migration mutex or the failover-hold
    /// (docs/design/requirements.md R003.10-R003.11, R003.14).
    ///
    /// In order: 400 for an invalid `operationId`/`instance`; 403 unless the caller is a
    /// deployment client of `instance`; 409 revoked for a tombstoned operation (even after
    /// another operation took the mutex); for `migration`, 409 held when another operation
    /// holds it; for `failover-hold`, 403 unless the caller's operation and instance hold the
    /// live migration lease, 409 held if another operation's hold is live; 423 while the group
    /// is between confirmed states (a repeated POST cannot buy what a renewal may not); then
    /// 201 for a new lease or 200 for a repeated POST of the same operation, which rotates the
    /// token (the old one stops working) and sets the deadline to `now + ttl`.
    ///
    /// `token` is the fresh random token the shell generated; only its hash is kept.
    pub fn acquire(
        &mut self,
        context: &RequestContext<'_>,
        request: &LeaseRequest,
        token: LeaseToken,
    ) -> Handled<AcquireOutcome> {
        let revoked = self.fence_generation(context.topology_generation, context.now);
        let outcome = match self.decide_acquire(context, request, token) {
            Ok(outcome) => outcome,
            Err(refusal) => AcquireOutcome::Refused(refusal),
        };
        Handled { outcome, revoked }
    }

    fn decide_acquire(
        &mut self,
        context: &RequestContext<'_>,
        request: &LeaseRequest,
        token: LeaseToken,
    ) -> Result<AcquireOutcome, Refusal> {
        check_operation_id_field(&request.operation_id)?;
        check_instance(&request.instance).map_err(|message| Refusal::InvalidRequest {
            field: "instance",
            message: message.to_string(),
        })?;
        if !may_coordinate(context.clients, context.caller, &request.instance) {
            return Err(Refusal::Forbidden {
                reason: ForbiddenReason::NotAuthorized,
            });
        }
        if let Some(tombstone) = self.tombstone_of(&request.operation_id) {
            return Err(revoked(tombstone));
        }
        self.expire(context.now);
        let same_operation = |lease: &LeaseRecord| {
            lease.operation_id == request.operation_id && lease.instance == request.instance
        };
        if request.kind == LeaseKind::FailoverHold
            && !self.migration.as_ref().is_some_and(same_operation)
        {
            return Err(Refusal::Forbidden {
                reason: ForbiddenReason::NotMigrationHolder,
            });
        }
        if let Some(holder) = self.lease(request.kind) {
            if !same_operation(holder) {
                return Err(held(holder));
            }
        }
        if let Stability::BetweenConfirmedStates { retry_after } = context.stability {
            return Err(Refusal::unstable(retry_after));
        }

        let ttl = clamp_ttl(request.ttl_seconds);
        let expires_at = context.now + ttl;
        let token_hash = token.hash();
        let slot = self.slot_mut(request.kind);
        let rotated = match slot {
            Some(existing) => {
                existing.token_hash = token_hash;
                existing.expires_at = expires_at;
                existing.ttl = ttl;
                true
            }
            None => {
                *slot = Some(LeaseRecord {
                    kind: request.kind,
                    operation_id: request.operation_id.clone(),
                    instance: request.instance.clone(),
                    token_hash,
                    granted_at: context.now,
                    expires_at,
                    ttl,
                    topology_generation: context.topology_generation,
                });
                false
            }
        };
        let grant = Grant {
            kind: request.kind,
            operation_id: request.operation_id.clone(),
            instance: request.instance.clone(),
            token,
            expires_at,
            topology_generation: context.topology_generation,
        };
        Ok(if rotated {
            AcquireOutcome::Rotated(grant)
        } else {
            AcquireOutcome::Granted(grant)
        })
    }

    /// `PUT`: renew a lease the caller holds (docs/design/requirements.md R003.12-R003.13,
    /// R003.21).
    ///
    /// In order: 400 for an invalid `operationId`; 403 unless the caller is a deployment
    /// client of the group; for a revoked operation, 409 revoked (with the reason and the new
    /// generation) when the token is the one that was revoked, else 403 token_mismatch; 404 when
    /// the operation holds no live lease of that kind (expired or unknown; expiry is exclusive
    /// at `expires_at`); 403 unless the caller is a client of the lease's instance; 403
    /// token_mismatch for a wrong or rotated-out token; 423 while the group is between
    /// confirmed states, leaving the deadline where it was; else 200 with
    /// `expires_at = now + ttl` and the topology generation.
    pub fn renew(
        &mut self,
        context: &RequestContext<'_>,
        credentials: &LeaseCredentials,
    ) -> Handled<RenewOutcome> {
        let revoked = self.fence_generation(context.topology_generation, context.now);
        let outcome = match self.decide_renew(context, credentials) {
            Ok(renewal) => RenewOutcome::Renewed(renewal),
            Err(refusal) => RenewOutcome::Refused(refusal),
        };
        Handled { outcome, revoked }
    }

    fn decide_renew(
        &mut self,
        context: &RequestContext<'_>,
        credentials: &LeaseCredentials,
    ) -> Result<Renewal, Refusal> {
        let lease = self.authenticate(context, credentials)?;
        if let Stability::BetweenConfirmedStates { retry_after } = context.stability {
            return Err(Refusal::unstable(retry_after));
        }
        lease.expires_at = context.now + lease.ttl;
        Ok(Renewal {
            kind: lease.kind,
            operation_id: lease.operation_id.clone(),
            instance: lease.instance.clone(),
            expires_at: lease.expires_at,
            topology_generation: lease.topology_generation,
        })
    }

    /// `DELETE`: release a lease the caller holds (docs/design/requirements.md R003.22: release
    /// the hold on every failure path, the mutex once the deploy's outcome is recorded).
    ///
    /// The same checks as [`Self::renew`] up to the token (400, 403, 409 revoked, 404, 403
    /// token_mismatch); a release is never refused as unstable, because it only removes a
    /// restriction. Releasing the migration lease leaves a live failover-hold in place until
    /// it is released or lapses.
    pub fn release(
        &mut self,
        context: &RequestContext<'_>,
        credentials: &LeaseCredentials,
    ) -> Handled<ReleaseOutcome> {
        let revoked = self.fence_generation(context.topology_generation, context.now);
        let outcome = match self.authenticate(context, credentials) {
            Ok(lease) => {
                let kind = lease.kind;
                match self.slot_mut(kind).take() {
                    Some(released) => ReleaseOutcome::Released {
                        kind,
                        operation_id: released.operation_id,
                        instance: released.instance,
                    },
                    None => ReleaseOutcome::Refused(Refusal::NotFound),
                }
            }
            Err(refusal) => ReleaseOutcome::Refused(refusal),
        };
        Handled { outcome, revoked }
    }

    /// The checks renew and release share: returns the caller's live lease or the refusal.
    fn authenticate(
        &mut self,
        context: &RequestContext<'_>,
        credentials: &LeaseCredentials,
    ) -> Result<&mut LeaseRecord, Refusal> {
        check_operation_id_field(&credentials.operation_id)?;
        if !is_known_client(context.clients, context.caller) {
            return Err(Refusal::Forbidden {
                reason: ForbiddenReason::NotAuthorized,
            });
        }
        let presented = credentials.token.hash();
        self.refuse_if_revoked(context, &credentials.operation_id, &presented)?;
        self.expire(context.now);
        let lease = match self.slot_mut(credentials.kind) {
            Some(lease) if lease.operation_id == credentials.operation_id => lease,
            Some(_) | None => return Err(Refusal::NotFound),
        };
        if !may_coordinate(context.clients, context.caller, &lease.instance) {
            return Err(Refusal::Forbidden {
                reason: ForbiddenReason::NotAuthorized,
            });
        }
        if !lease.token_hash.matches(&presented) {
            return Err(Refusal::TokenMismatch);
        }
        Ok(lease)
    }

    /// For a tombstoned operation: 409 revoked when `presented` is a revoked token of it, 403
    /// token_mismatch otherwise (the caller cannot prove it held the lease).
    fn refuse_if_revoked(
        &self,
        context: &RequestContext<'_>,
        operation_id: &str,
        presented: &TokenHash,
    ) -> Result<(), Refusal> {
        let mut tombstones = self.tombstones_of(operation_id).peekable();
        let Some(first) = tombstones.peek() else {
            return Ok(());
        };
        if !may_coordinate(context.clients, context.caller, &first.instance) {
            return Err(Refusal::Forbidden {
                reason: ForbiddenReason::NotAuthorized,
            });
        }
        match tombstones.find(|tombstone| tombstone.token_hash.matches(presented)) {
            Some(tombstone) => Err(revoked(tombstone)),
            None => Err(Refusal::TokenMismatch),
        }
    }

    /// Removes every lease whose deadline has passed on the operator's clock
    /// (`now >= expires_at`) and returns them. Expiry creates no tombstone: a client renewing
    /// an expired lease gets 404, not 409.
    pub fn expire(&mut self, now: Timestamp) -> Vec<LeaseRecord> {
        let mut expired = Vec::new();
        for kind in LeaseKind::ALL {
            let slot = self.slot_mut(kind);
            if slot.as_ref().is_some_and(|lease| !lease.is_live(now)) {
                expired.extend(slot.take());
            }
        }
        expired
    }

    /// Revokes every live lease of the group: with [`RevokeReason::TopologyChanged`] and the
    /// new generation on every `status.topologyGeneration` bump, with
    /// [`RevokeReason::OperatorRevoked`] and the current generation when the group carries the
    /// `bloodraven.shipstream.io/revoke-deployment-leases` annotation.
    ///
    /// Returns the tombstones created, for the `DeploymentLeaseRevoked` event; expired leases
    /// are dropped without one. Renewals and POSTs of a revoked operation answer 409 revoked
    /// from now on.
    pub fn revoke_all(
        &mut self,
        reason: RevokeReason,
        topology_generation: u64,
        now: Timestamp,
    ) -> Vec<Tombstone> {
        self.revoke_where(reason, topology_generation, now, |_| true)
    }

    /// Revokes (`TopologyChanged`) every live lease stamped with a generation other than
    /// `current_generation`, and drops expired ones. Every request runs it first, so a bump
    /// that was persisted without its revocation (an operator restart in between) still fences
    /// the leases; the shell also calls it after loading state. Idempotent.
    pub fn fence_generation(&mut self, current_generation: u64, now: Timestamp) -> Vec<Tombstone> {
        self.revoke_where(
            RevokeReason::TopologyChanged,
            current_generation,
            now,
            |lease| lease.topology_generation != current_generation,
        )
    }

    fn revoke_where(
        &mut self,
        reason: RevokeReason,
        topology_generation: u64,
        now: Timestamp,
        mut revoke: impl FnMut(&LeaseRecord) -> bool,
    ) -> Vec<Tombstone> {
        let mut created = Vec::new();
        for kind in LeaseKind::ALL {
            let slot = self.slot_mut(kind);
            let Some(lease) = slot.take_if(|lease| revoke(lease)) else {
                continue;
            };
            if !lease.is_live(now) {
                continue;
            }
            let tombstone = Tombstone {
                operation_id: lease.operation_id,
                kind: lease.kind,
                instance: lease.instance,
                token_hash: lease.token_hash,
                reason,
                topology_generation,
                revoked_at: now,
            };
            let key = (tombstone.operation_id.clone(), tombstone.kind);
            let previous = self.tombstones.insert(key, tombstone.clone());
            assert!(
                previous.is_none(),
                "a tombstoned operation held a lease: {previous:?}"
            );
            created.push(tombstone);
        }
        created
    }

    /// The live failover-hold, if any: what defers a planned failover, an ordered update or a
    /// restore-in-place (`admission.retryTime` = `earliest_expiry`). A migration lease alone
    /// defers nothing, and an expired hold (`now >= expires_at`) defers nothing.
    pub fn live_hold(&self, now: Timestamp) -> Option<HoldInfo> {
        let hold = self
            .failover_hold
            .as_ref()
            .filter(|hold| hold.is_live(now))?;
        Some(HoldInfo {
            earliest_expiry: hold.expires_at,
            operation_id: hold.operation_id.clone(),
            instance: hold.instance.clone(),
        })
    }

    /// The hold that defers `disruption`, if any: always `None` for the kinds that never
    /// consult a lease (emergency failover, returning-primary fencing, primary reassertion),
    /// [`Self::live_hold`] for the others.
    pub fn deferring_hold(&self, disruption: DisruptionKind, now: Timestamp) -> Option<HoldInfo> {
        if disruption.consults_deployment_hold() {
            self.live_hold(now)
        } else {
            None
        }
    }

    /// Live leases at `now`: the `bloodraven_deploy_leases_active` gauge.
    pub fn active_count(&self, now: Timestamp) -> usize {
        self.leases().filter(|lease| lease.is_live(now)).count()
    }

    /// The `leases` array of `GET /deploy/v1/groups/{group}`: live leases, no tokens or hashes.
    pub fn summaries(&self, now: Timestamp) -> Vec<LeaseSummary> {
        self.leases()
            .filter(|lease| lease.is_live(now))
            .map(|lease| LeaseSummary {
                kind: lease.kind,
                operation_id: lease.operation_id.clone(),
                instance: lease.instance.clone(),
                expires_at: lease.expires_at,
                topology_generation: lease.topology_generation,
            })
            .collect()
    }

    fn slot_mut(&mut self, kind: LeaseKind) -> &mut Option<LeaseRecord> {
        match kind {
            LeaseKind::Migration => &mut self.migration,
            LeaseKind::FailoverHold => &mut self.failover_hold,
        }
    }

    fn tombstones_of(&self, operation_id: &str) -> impl Iterator<Item = &Tombstone> + '_ {
        let operation_id = operation_id.to_string();
        LeaseKind::ALL
            .into_iter()
            .filter_map(move |kind| self.tombstones.get(&(operation_id.clone(), kind)))
    }
}

fn check_operation_id_field(operation_id: &str) -> Result<(), Refusal> {
    check_operation_id(operation_id).map_err(|message| Refusal::InvalidRequest {
        field: "operationId",
        message: message.to_string(),
    })
}

fn held(holder: &LeaseRecord) -> Refusal {
    Refusal::Held {
        kind: holder.kind,
        operation_id: holder.operation_id.clone(),
        instance: holder.instance.clone(),
        expires_at: holder.expires_at,
    }
}

fn revoked(tombstone: &Tombstone) -> Refusal {
    Refusal::Revoked {
        operation_id: tombstone.operation_id.clone(),
        reason: tombstone.reason,
        topology_generation: tombstone.topology_generation,
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_unix_millis(1_796_007_358_000);
    const GENERATION: u64 = 17;

    fn seconds(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn caller(service_account: &str) -> Caller {
        Caller {
            namespace: "ci".into(),
            service_account: service_account.into(),
        }
    }

    fn client(instance: &str, service_account: &str) -> AuthorizedClient {
        AuthorizedClient {
            instance: instance.into(),
            namespace: "ci".into(),
            service_account: service_account.into(),
        }
    }

    /// The group's surroundings: `deployer` may coordinate `counter-app` and `billing`,
    /// `other` only `billing`, `stranger` nothing.
    struct World {
        clients: Vec<AuthorizedClient>,
        generation: u64,
        stability: Stability,
        deployer: Caller,
        other: Caller,
        stranger: Caller,
    }

    impl World {
        fn new() -> Self {
            World {
                clients: vec![
                    client("counter-app", "deployer"),
                    client("billing", "deployer"),
                    client("billing", "other"),
                ],
                generation: GENERATION,
                stability: Stability::Confirmed,
                deployer: caller("deployer"),
                other: caller("other"),
                stranger: caller("stranger"),
            }
        }

        fn as_caller<'a>(&'a self, caller: &'a Caller, now: Timestamp) -> RequestContext<'a> {
            RequestContext {
                caller,
                clients: &self.clients,
                topology_generation: self.generation,
                stability: self.stability,
                now,
            }
        }

        fn at(&self, now: Timestamp) -> RequestContext<'_> {
            self.as_caller(&self.deployer, now)
        }
    }

    fn request(kind: LeaseKind, operation_id: &str, instance: &str, ttl: i64) -> LeaseRequest {
        LeaseRequest {
            kind,
            operation_id: operation_id.into(),
            instance: instance.into(),
            ttl_seconds: ttl,
        }
    }

    fn credentials(kind: LeaseKind, operation_id: &str, token: &str) -> LeaseCredentials {
        LeaseCredentials {
            kind,
            operation_id: operation_id.into(),
            token: LeaseToken::new(token),
        }
    }

    fn granted(handled: Handled<AcquireOutcome>) -> Grant {
        match handled.outcome {
            AcquireOutcome::Granted(grant) => grant,
            other => panic!("expected 201 Granted, got {other:?}"),
        }
    }

    fn refused_acquire(handled: Handled<AcquireOutcome>) -> Refusal {
        match handled.outcome {
            AcquireOutcome::Refused(refusal) => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn renewed(handled: Handled<RenewOutcome>) -> Renewal {
        match handled.outcome {
            RenewOutcome::Renewed(renewal) => renewal,
            RenewOutcome::Refused(refusal) => panic!("expected 200 Renewed, got {refusal:?}"),
        }
    }

    fn refused_renew(handled: Handled<RenewOutcome>) -> Refusal {
        match handled.outcome {
            RenewOutcome::Refused(refusal) => refusal,
            RenewOutcome::Renewed(renewal) => panic!("expected a refusal, got {renewal:?}"),
        }
    }

    /// `deployer` takes migration then failover-hold for operation `op-a` on `counter-app`.
    fn both_leases(world: &World, leases: &mut DeployLeases, now: Timestamp) {
        let migration = request(LeaseKind::Migration, "op-a", "counter-app", 30);
        granted(leases.acquire(&world.at(now), &migration, LeaseToken::new("m-a")));
        let hold = request(LeaseKind::FailoverHold, "op-a", "counter-app", 30);
        granted(leases.acquire(&world.at(now), &hold, LeaseToken::new("h-a")));
    }

    #[test]
    fn seed_003_migration_grant_is_201_stamped_with_the_generation() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        let handled = leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a"),
        );
        assert!(handled.revoked.is_empty());
        assert_eq!(handled.outcome.status_code(), 201);
        let grant = granted(handled);
        assert_eq!(grant.expires_at, T0 + seconds(30));
        assert_eq!(grant.topology_generation, GENERATION);
        assert_eq!(grant.token, LeaseToken::new("m-a"));
        let stored = leases.lease(LeaseKind::Migration).expect("stored");
        assert_eq!(stored.token_hash, LeaseToken::new("m-a").hash());
        assert_eq!(stored.granted_at, T0);
        assert_eq!(stored.topology_generation, GENERATION);
    }

    #[test]
    fn seed_003_ttl_clamp_edges_4_to_5_and_121_to_120() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        let short = granted(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "counter-app", 4),
            LeaseToken::new("m-a"),
        ));
        assert_eq!(short.expires_at, T0 + seconds(5));
        let long = granted(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::FailoverHold, "op-a", "counter-app", 121),
            LeaseToken::new("h-a"),
        ));
        assert_eq!(long.expires_at, T0 + seconds(120));
        assert_eq!(
            leases.lease(LeaseKind::FailoverHold).map(|lease| lease.ttl),
            Some(seconds(120))
        );
    }

    #[test]
    fn seed_003_second_pipeline_gets_409_held_with_holder_operation_instance_expiry() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        granted(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a"),
        ));
        let refusal = refused_acquire(leases.acquire(
            &world.as_caller(&world.other, T0 + seconds(1)),
            &request(LeaseKind::Migration, "op-b", "billing", 30),
            LeaseToken::new("m-b"),
        ));
        assert_eq!(refusal.status_code(), 409);
        assert_eq!(
            refusal,
            Refusal::Held {
                kind: LeaseKind::Migration,
                operation_id: "op-a".into(),
                instance: "counter-app".into(),
                expires_at: T0 + seconds(30),
            }
        );
        // The same operation id on another instance is not a repeat of the original POST.
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0 + seconds(1)),
            &request(LeaseKind::Migration, "op-a", "billing", 30),
            LeaseToken::new("m-a2"),
        ));
        assert_eq!(refusal.error_code(), "held");
    }

    #[test]
    fn seed_003_mutex_is_free_again_exactly_at_expiry() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        granted(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a"),
        ));
        let just_before = (T0 + seconds(30)).saturating_sub(Duration::from_millis(1));
        let other = request(LeaseKind::Migration, "op-b", "billing", 30);
        let refusal = refused_acquire(leases.acquire(
            &world.as_caller(&world.other, just_before),
            &other,
            LeaseToken::new("m-b"),
        ));
        assert_eq!(refusal.error_code(), "held");
        let grant = granted(leases.acquire(
            &world.as_caller(&world.other, T0 + seconds(30)),
            &other,
            LeaseToken::new("m-b"),
        ));
        assert_eq!(grant.operation_id, "op-b");
    }

    #[test]
    fn seed_003_failover_hold_only_for_the_migration_holder_else_403() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        let not_holder = Refusal::Forbidden {
            reason: ForbiddenReason::NotMigrationHolder,
        };
        // Hold before migration: the order is not optional.
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::FailoverHold, "op-a", "counter-app", 30),
            LeaseToken::new("h-a"),
        ));
        assert_eq!((refusal.status_code(), &refusal), (403, &not_holder));
        granted(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a"),
        ));
        // Another operation, or the holder's operation on another instance: 403.
        for (caller, operation_id, instance) in [
            (&world.other, "op-b", "billing"),
            (&world.deployer, "op-b", "counter-app"),
            (&world.deployer, "op-a", "billing"),
        ] {
            let refusal = refused_acquire(leases.acquire(
                &world.as_caller(caller, T0),
                &request(LeaseKind::FailoverHold, operation_id, instance, 30),
                LeaseToken::new("h-x"),
            ));
            assert_eq!(refusal, not_holder, "{operation_id} on {instance}");
        }
        assert!(leases.lease(LeaseKind::FailoverHold).is_none());
        // The holder itself: 201.
        granted(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::FailoverHold, "op-a", "counter-app", 30),
            LeaseToken::new("h-a"),
        ));
        // Once the migration lease has lapsed, even op-a may not take a new hold.
        leases.release(
            &world.at(T0),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        );
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0 + seconds(30)),
            &request(LeaseKind::FailoverHold, "op-a", "counter-app", 30),
            LeaseToken::new("h-a2"),
        ));
        assert_eq!(refusal, not_holder);
    }

    #[test]
    fn seed_003_hold_of_an_earlier_operation_is_409_held_for_the_next_mutex_holder() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        leases.release(
            &world.at(T0),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        );
        granted(leases.acquire(
            &world.as_caller(&world.other, T0),
            &request(LeaseKind::Migration, "op-b", "billing", 30),
            LeaseToken::new("m-b"),
        ));
        let refusal = refused_acquire(leases.acquire(
            &world.as_caller(&world.other, T0),
            &request(LeaseKind::FailoverHold, "op-b", "billing", 30),
            LeaseToken::new("h-b"),
        ));
        assert_eq!(
            refusal,
            Refusal::Held {
                kind: LeaseKind::FailoverHold,
                operation_id: "op-a".into(),
                instance: "counter-app".into(),
                expires_at: T0 + seconds(30),
            }
        );
    }

    #[test]
    fn seed_003_repeated_post_is_200_and_rotates_the_token() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        let migration = request(LeaseKind::Migration, "op-a", "counter-app", 30);
        granted(leases.acquire(&world.at(T0), &migration, LeaseToken::new("first")));
        let handled = leases.acquire(
            &world.at(T0 + seconds(10)),
            &migration,
            LeaseToken::new("second"),
        );
        assert_eq!(handled.outcome.status_code(), 200);
        let AcquireOutcome::Rotated(grant) = handled.outcome else {
            panic!("expected 200 Rotated, got {:?}", handled.outcome);
        };
        assert_eq!(grant.token, LeaseToken::new("second"));
        assert_eq!(grant.expires_at, T0 + seconds(40));
        assert_eq!(
            leases
                .lease(LeaseKind::Migration)
                .map(|lease| lease.granted_at),
            Some(T0)
        );
        // The old token no longer works; the new one does.
        let refusal = refused_renew(leases.renew(
            &world.at(T0 + seconds(11)),
            &credentials(LeaseKind::Migration, "op-a", "first"),
        ));
        assert_eq!(
            (refusal.status_code(), refusal),
            (403, Refusal::TokenMismatch)
        );
        renewed(leases.renew(
            &world.at(T0 + seconds(11)),
            &credentials(LeaseKind::Migration, "op-a", "second"),
        ));
    }

    #[test]
    fn seed_003_renewal_returns_new_expiry_and_topology_generation() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        let handled = leases.renew(
            &world.at(T0 + seconds(10)),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        );
        assert_eq!(handled.outcome.status_code(), 200);
        let renewal = renewed(handled);
        assert_eq!(renewal.expires_at, T0 + seconds(40));
        assert_eq!(renewal.topology_generation, GENERATION);
        assert_eq!(renewal.kind, LeaseKind::FailoverHold);
    }

    #[test]
    fn seed_003_wrong_token_or_other_kinds_token_is_403_token_mismatch() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        for token in ["guess", "h-a"] {
            let refusal = refused_renew(leases.renew(
                &world.at(T0 + seconds(1)),
                &credentials(LeaseKind::Migration, "op-a", token),
            ));
            assert_eq!(refusal, Refusal::TokenMismatch, "token {token}");
        }
        assert_eq!(
            leases
                .lease(LeaseKind::Migration)
                .map(|lease| lease.expires_at),
            Some(T0 + seconds(30))
        );
    }

    #[test]
    fn seed_003_expired_lease_renewal_is_404_exactly_at_the_boundary() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        let deadline = T0 + seconds(30);
        let renewal = renewed(leases.renew(
            &world.at(deadline.saturating_sub(Duration::from_millis(1))),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        ));
        assert_eq!(
            renewal.expires_at,
            deadline.saturating_sub(Duration::from_millis(1)) + seconds(30)
        );
        let refusal = refused_renew(leases.renew(
            &world.at(deadline),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        ));
        assert_eq!((refusal.status_code(), refusal), (404, Refusal::NotFound));
        assert!(leases.lease(LeaseKind::FailoverHold).is_none());
    }

    #[test]
    fn seed_003_unknown_lease_is_404() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        let refusal = refused_renew(leases.renew(
            &world.at(T0),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        ));
        assert_eq!(refusal, Refusal::NotFound);
        // A lease held by another operation is not the caller's: still 404.
        granted(leases.acquire(
            &world.as_caller(&world.other, T0),
            &request(LeaseKind::Migration, "op-b", "billing", 30),
            LeaseToken::new("m-b"),
        ));
        let refusal = refused_renew(leases.renew(
            &world.at(T0),
            &credentials(LeaseKind::Migration, "op-a", "m-b"),
        ));
        assert_eq!(refusal, Refusal::NotFound);
    }

    #[test]
    fn seed_003_423_unstable_never_extends_the_deadline() {
        let mut world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        world.stability = Stability::BetweenConfirmedStates {
            retry_after: seconds(2),
        };
        let handled = leases.renew(
            &world.at(T0 + seconds(20)),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        );
        assert_eq!(handled.outcome.status_code(), 423);
        assert_eq!(
            refused_renew(handled),
            Refusal::Unstable {
                retry_after_seconds: 2
            }
        );
        assert_eq!(
            leases
                .live_hold(T0 + seconds(20))
                .map(|hold| hold.earliest_expiry),
            Some(T0 + seconds(30))
        );
        // A repeated POST cannot buy the extension either.
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0 + seconds(20)),
            &request(LeaseKind::FailoverHold, "op-a", "counter-app", 30),
            LeaseToken::new("h-a2"),
        ));
        assert_eq!(refusal.error_code(), "unstable");
        // The last confirmed deadline stands: once it passes the lease is gone.
        world.stability = Stability::Confirmed;
        let refusal = refused_renew(leases.renew(
            &world.at(T0 + seconds(30)),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        ));
        assert_eq!(refusal, Refusal::NotFound);
    }

    #[test]
    fn seed_003_new_grants_wait_while_the_group_is_between_confirmed_states() {
        let mut world = World::new();
        world.stability = Stability::BetweenConfirmedStates {
            retry_after: Duration::from_millis(2_500),
        };
        let mut leases = DeployLeases::new();
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a"),
        ));
        assert_eq!(
            refusal,
            Refusal::Unstable {
                retry_after_seconds: 3
            }
        );
        assert_eq!(leases.active_count(T0), 0);
    }

    #[test]
    fn seed_003_generation_bump_revokes_every_lease_with_topology_changed() {
        let mut world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        world.generation = GENERATION + 1;
        let revoked = leases.revoke_all(
            RevokeReason::TopologyChanged,
            world.generation,
            T0 + seconds(5),
        );
        assert_eq!(revoked.len(), 2);
        assert!(revoked.iter().all(|tombstone| {
            tombstone.reason == RevokeReason::TopologyChanged
                && tombstone.topology_generation == GENERATION + 1
                && tombstone.operation_id == "op-a"
                && tombstone.revoked_at == T0 + seconds(5)
        }));
        assert_eq!(leases.active_count(T0 + seconds(5)), 0);
        assert_eq!(leases.live_hold(T0 + seconds(5)), None);
        let expected = Refusal::Revoked {
            operation_id: "op-a".into(),
            reason: RevokeReason::TopologyChanged,
            topology_generation: GENERATION + 1,
        };
        for (kind, token) in [
            (LeaseKind::Migration, "m-a"),
            (LeaseKind::FailoverHold, "h-a"),
        ] {
            let refusal = refused_renew(leases.renew(
                &world.at(T0 + seconds(6)),
                &credentials(kind, "op-a", token),
            ));
            assert_eq!((refusal.status_code(), &refusal), (409, &expected));
        }
        // A stale or guessed token for the revoked operation proves nothing: 403.
        let refusal = refused_renew(leases.renew(
            &world.at(T0 + seconds(6)),
            &credentials(LeaseKind::Migration, "op-a", "guess"),
        ));
        assert_eq!(refusal, Refusal::TokenMismatch);
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0 + seconds(6)),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a2"),
        ));
        assert_eq!(refusal, expected);
        // Revoking again finds nothing: the shell raises one event per revocation.
        assert!(leases
            .revoke_all(
                RevokeReason::TopologyChanged,
                GENERATION + 1,
                T0 + seconds(7)
            )
            .is_empty());
    }

    #[test]
    fn seed_003_tombstone_survives_another_operation_taking_the_mutex() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        leases.revoke_all(RevokeReason::OperatorRevoked, GENERATION, T0 + seconds(1));
        granted(leases.acquire(
            &world.as_caller(&world.other, T0 + seconds(2)),
            &request(LeaseKind::Migration, "op-b", "billing", 30),
            LeaseToken::new("m-b"),
        ));
        let revoked_refusal = Refusal::Revoked {
            operation_id: "op-a".into(),
            reason: RevokeReason::OperatorRevoked,
            topology_generation: GENERATION,
        };
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0 + seconds(3)),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a2"),
        ));
        assert_eq!(refusal, revoked_refusal);
        let refusal = refused_renew(leases.renew(
            &world.at(T0 + seconds(3)),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        ));
        assert_eq!(refusal, revoked_refusal);
        // op-b's mutex is untouched by op-a's retries.
        assert_eq!(
            leases
                .lease(LeaseKind::Migration)
                .map(|lease| lease.operation_id.as_str()),
            Some("op-b")
        );
    }

    #[test]
    fn seed_003_revocation_skips_leases_that_already_expired() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        let revoked = leases.revoke_all(
            RevokeReason::TopologyChanged,
            GENERATION + 1,
            T0 + seconds(30),
        );
        assert!(revoked.is_empty());
        assert_eq!(leases.tombstones().count(), 0);
        assert_eq!(leases.leases().count(), 0);
    }

    #[test]
    fn seed_003_stale_generation_is_fenced_on_the_next_request_after_a_restart() {
        // The bump was persisted but the operator restarted before revoking.
        let mut world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        world.generation = GENERATION + 1;
        let handled = leases.renew(
            &world.at(T0 + seconds(5)),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        );
        assert_eq!(handled.revoked.len(), 2);
        assert_eq!(
            handled.outcome,
            RenewOutcome::Refused(Refusal::Revoked {
                operation_id: "op-a".into(),
                reason: RevokeReason::TopologyChanged,
                topology_generation: GENERATION + 1,
            })
        );
        assert!(leases
            .fence_generation(GENERATION + 1, T0 + seconds(5))
            .is_empty());
    }

    #[test]
    fn seed_003_callers_not_in_deployment_clients_get_403() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        let forbidden = Refusal::Forbidden {
            reason: ForbiddenReason::NotAuthorized,
        };
        // `other` may coordinate billing only, `stranger` nothing.
        let refusal = refused_acquire(leases.acquire(
            &world.as_caller(&world.other, T0),
            &request(LeaseKind::Migration, "op-b", "counter-app", 30),
            LeaseToken::new("m-b"),
        ));
        assert_eq!((refusal.status_code(), &refusal), (403, &forbidden));
        both_leases(&world, &mut leases, T0);
        let refusal = refused_renew(leases.renew(
            &world.as_caller(&world.stranger, T0),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        ));
        assert_eq!(refusal, forbidden);
        // Even with the right token, a client of another instance cannot renew or release.
        let refusal = refused_renew(leases.renew(
            &world.as_caller(&world.other, T0),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        ));
        assert_eq!(refusal, forbidden);
        let released = leases.release(
            &world.as_caller(&world.other, T0),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        );
        assert_eq!(released.outcome, ReleaseOutcome::Refused(forbidden));
        assert_eq!(leases.active_count(T0), 2);
    }

    #[test]
    fn seed_003_invalid_fields_are_400_naming_the_field() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "", "counter-app", 30),
            LeaseToken::new("m-a"),
        ));
        assert!(
            matches!(
                refusal,
                Refusal::InvalidRequest {
                    field: "operationId",
                    ..
                }
            ),
            "{refusal:?}"
        );
        let refusal = refused_acquire(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "Counter App", 30),
            LeaseToken::new("m-a"),
        ));
        assert_eq!(refusal.status_code(), 400);
        assert!(matches!(
            refusal,
            Refusal::InvalidRequest {
                field: "instance",
                ..
            }
        ));
    }

    #[test]
    fn seed_003_release_is_204_and_the_lease_is_gone() {
        let mut world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        let wrong = leases.release(
            &world.at(T0),
            &credentials(LeaseKind::FailoverHold, "op-a", "guess"),
        );
        assert_eq!(
            wrong.outcome,
            ReleaseOutcome::Refused(Refusal::TokenMismatch)
        );
        // Releasing is never refused as unstable: it only removes a restriction.
        world.stability = Stability::BetweenConfirmedStates {
            retry_after: seconds(2),
        };
        let released = leases.release(
            &world.at(T0 + seconds(1)),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        );
        assert_eq!(released.outcome.status_code(), 204);
        assert_eq!(leases.live_hold(T0 + seconds(1)), None);
        let again = leases.release(
            &world.at(T0 + seconds(1)),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        );
        assert_eq!(again.outcome, ReleaseOutcome::Refused(Refusal::NotFound));
        // The mutex is still held until it is released too.
        assert_eq!(leases.active_count(T0 + seconds(1)), 1);
        leases.release(
            &world.at(T0 + seconds(2)),
            &credentials(LeaseKind::Migration, "op-a", "m-a"),
        );
        assert_eq!(leases.active_count(T0 + seconds(2)), 0);
        // Release creates no tombstone: the operation may take the mutex again.
        world.stability = Stability::Confirmed;
        granted(leases.acquire(
            &world.at(T0 + seconds(3)),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a3"),
        ));
    }

    #[test]
    fn seed_003_release_of_a_revoked_lease_is_409_revoked() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        leases.revoke_all(RevokeReason::OperatorRevoked, GENERATION, T0);
        let released = leases.release(
            &world.at(T0),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        );
        assert_eq!(released.outcome.status_code(), 409);
    }

    #[test]
    fn seed_003_hold_defers_until_earliest_expiry_and_renewal_moves_it() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        let hold = leases.live_hold(T0 + seconds(1)).expect("live hold");
        assert_eq!(
            hold,
            HoldInfo {
                earliest_expiry: T0 + seconds(30),
                operation_id: "op-a".into(),
                instance: "counter-app".into(),
            }
        );
        renewed(leases.renew(
            &world.at(T0 + seconds(10)),
            &credentials(LeaseKind::FailoverHold, "op-a", "h-a"),
        ));
        assert_eq!(
            leases
                .deferring_hold(DisruptionKind::PlannedFailover, T0 + seconds(10))
                .map(|hold| hold.earliest_expiry),
            Some(T0 + seconds(40))
        );
        for deferrable in [
            DisruptionKind::OrderedUpdate,
            DisruptionKind::RestoreInPlace,
            DisruptionKind::Rejoin,
        ] {
            assert!(leases
                .deferring_hold(deferrable, T0 + seconds(10))
                .is_some());
        }
        // Lapsed exactly at its deadline: nothing defers any more.
        assert_eq!(leases.live_hold(T0 + seconds(40)), None);
    }

    #[test]
    fn seed_003_hold_never_delays_emergency_failover() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        for safety_path in [
            DisruptionKind::EmergencyFailover,
            DisruptionKind::ReturningPrimaryFencing,
            DisruptionKind::PrimaryReassertion,
        ] {
            assert_eq!(leases.deferring_hold(safety_path, T0 + seconds(1)), None);
        }
    }

    #[test]
    fn seed_003_migration_lease_alone_defers_nothing() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        granted(leases.acquire(
            &world.at(T0),
            &request(LeaseKind::Migration, "op-a", "counter-app", 30),
            LeaseToken::new("m-a"),
        ));
        assert_eq!(leases.live_hold(T0 + seconds(1)), None);
        assert_eq!(
            leases.deferring_hold(DisruptionKind::PlannedFailover, T0 + seconds(1)),
            None
        );
        assert_eq!(leases.active_count(T0 + seconds(1)), 1);
    }

    #[test]
    fn seed_003_active_count_and_summaries_follow_expiry() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        assert_eq!(leases.active_count(T0), 0);
        both_leases(&world, &mut leases, T0);
        assert_eq!(leases.active_count(T0 + seconds(29)), 2);
        let summaries = leases.summaries(T0 + seconds(29));
        assert_eq!(
            summaries
                .iter()
                .map(|summary| summary.kind)
                .collect::<Vec<_>>(),
            LeaseKind::ALL
        );
        assert_eq!(leases.active_count(T0 + seconds(30)), 0);
        assert!(leases.summaries(T0 + seconds(30)).is_empty());
        let expired = leases.expire(T0 + seconds(30));
        assert_eq!(expired.len(), 2);
        assert_eq!(leases.leases().count(), 0);
    }

    #[test]
    fn stored_state_reloads_and_drops_leases_of_revoked_operations() {
        let world = World::new();
        let mut leases = DeployLeases::new();
        both_leases(&world, &mut leases, T0);
        let before: Vec<LeaseRecord> = leases.leases().cloned().collect();
        let reloaded = DeployLeases::from_parts(before.clone(), []).expect("reload");
        assert_eq!(reloaded, leases);
        // Restarting the operator releases nothing: the reloaded state still defers.
        assert!(reloaded.live_hold(T0 + seconds(1)).is_some());
        let tombstones = leases.revoke_all(RevokeReason::OperatorRevoked, GENERATION, T0);
        // The Lease objects outlived the revocation (crash before delete).
        let reloaded = DeployLeases::from_parts(before.clone(), tombstones).expect("reload");
        assert_eq!(reloaded, leases);
        assert_eq!(reloaded.leases().count(), 0);
        let duplicate = DeployLeases::from_parts([before[0].clone(), before[0].clone()], []);
        assert!(matches!(duplicate, Err(Error::DuplicateLease { .. })));
    }
}
