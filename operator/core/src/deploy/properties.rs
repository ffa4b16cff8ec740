//! Property test of the deploy-lease rules of docs/design/requirements.md R003 against an
//! independent model: random sequences of POST/PUT/DELETE, clock advances, generation bumps
//! (announced or found after a restart), operator revocations, instability and reloads from
//! stored form never yield two migration holders, never renew or re-grant a revoked operation,
//! and never move a deadline on a refusal.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use proptest::prelude::*;

use super::{
    codec::{tombstones_from_data, tombstones_to_data},
    AcquireOutcome, AuthorizedClient, Caller, DeployLeases, Handled, LeaseCredentials, LeaseKind,
    LeaseRecord, LeaseRequest, LeaseToken, Refusal, ReleaseOutcome, RenewOutcome, RequestContext,
    RevokeReason, Stability, Tombstone,
};
use crate::time::Timestamp;

/// Operations the property drives, with the `MysqlDatabase` each migrates.
const OPERATIONS: [(&str, &str); 3] = [
    ("op-0", "counter-app"),
    ("op-1", "billing"),
    ("op-2", "counter-app"),
];
/// Longest generated sequence.
const STEPS_MAX: usize = 80;

#[derive(Clone, Copy, Debug)]
enum TokenChoice {
    Latest,
    Stale,
    Garbage,
}

#[derive(Clone, Debug)]
enum Step {
    Acquire {
        operation: usize,
        kind: LeaseKind,
        ttl_seconds: i64,
    },
    Renew {
        operation: usize,
        kind: LeaseKind,
        token: TokenChoice,
    },
    Release {
        operation: usize,
        kind: LeaseKind,
        token: TokenChoice,
    },
    Advance {
        millis: u64,
    },
    BumpGeneration {
        announced: bool,
    },
    OperatorRevoke,
    SetUnstable(bool),
    Reload,
}

fn kind() -> impl Strategy<Value = LeaseKind> {
    prop_oneof![Just(LeaseKind::Migration), Just(LeaseKind::FailoverHold)]
}

fn token_choice() -> impl Strategy<Value = TokenChoice> {
    prop_oneof![
        4 => Just(TokenChoice::Latest),
        1 => Just(TokenChoice::Stale),
        1 => Just(TokenChoice::Garbage),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0..OPERATIONS.len(), kind(), -5i64..200).prop_map(|(operation, kind, ttl_seconds)| {
            Step::Acquire { operation, kind, ttl_seconds }
        }),
        4 => (0..OPERATIONS.len(), kind(), token_choice())
            .prop_map(|(operation, kind, token)| Step::Renew { operation, kind, token }),
        1 => (0..OPERATIONS.len(), kind(), token_choice())
            .prop_map(|(operation, kind, token)| Step::Release { operation, kind, token }),
        2 => (0u64..40_000).prop_map(|millis| Step::Advance { millis }),
        2 => (0u64..40).prop_map(|seconds| Step::Advance { millis: seconds * 1_000 }),
        1 => any::<bool>().prop_map(|announced| Step::BumpGeneration { announced }),
        1 => Just(Step::OperatorRevoke),
        1 => any::<bool>().prop_map(Step::SetUnstable),
        1 => Just(Step::Reload),
    ]
}

/// Who asks: one ServiceAccount listed for both instances.
struct Clients {
    caller: Caller,
    authorized: Vec<AuthorizedClient>,
}

/// The system under test plus an independent model of what every client was confirmed.
struct Harness {
    state: DeployLeases,
    now: Timestamp,
    generation: u64,
    stability: Stability,
    /// A generation bump the state machine has not been told about (restart case).
    fence_pending: bool,
    clients: Clients,
    /// Every token issued per (operation, kind); the last is current.
    tokens: BTreeMap<(usize, LeaseKind), Vec<String>>,
    tokens_issued: u64,
    /// Model: the last deadline confirmed to the client by a 200/201.
    confirmed: BTreeMap<(usize, LeaseKind), Timestamp>,
    /// Model: operations that lost a live lease to a revocation.
    revoked: BTreeSet<usize>,
}

impl Harness {
    fn new() -> Self {
        Harness {
            state: DeployLeases::new(),
            now: Timestamp::from_unix_millis(1_796_007_358_000),
            generation: 17,
            stability: Stability::Confirmed,
            fence_pending: false,
            clients: Clients {
                caller: Caller {
                    namespace: "ci".into(),
                    service_account: "deployer".into(),
                },
                authorized: ["counter-app", "billing"]
                    .into_iter()
                    .map(|instance| AuthorizedClient {
                        instance: instance.into(),
                        namespace: "ci".into(),
                        service_account: "deployer".into(),
                    })
                    .collect(),
            },
            tokens: BTreeMap::new(),
            tokens_issued: 0,
            confirmed: BTreeMap::new(),
            revoked: BTreeSet::new(),
        }
    }

    fn operation_index(operation_id: &str) -> usize {
        OPERATIONS
            .iter()
            .position(|(id, _)| *id == operation_id)
            .unwrap_or_else(|| panic!("unknown operation {operation_id}"))
    }

    fn live_in_model(&self) -> BTreeSet<(usize, LeaseKind)> {
        self.confirmed
            .iter()
            .filter(|(_, deadline)| self.now < **deadline)
            .map(|(key, _)| *key)
            .collect()
    }

    fn confirmed_live(&self, operation: usize, kind: LeaseKind) -> bool {
        self.confirmed
            .get(&(operation, kind))
            .is_some_and(|deadline| self.now < *deadline)
    }

    /// Applies a revocation the state machine reported: it must be exactly the leases the
    /// model considers live, and each revoked operation is out for good.
    fn absorb_revocation(&mut self, tombstones: &[Tombstone]) {
        let reported: BTreeSet<(usize, LeaseKind)> = tombstones
            .iter()
            .map(|tombstone| {
                (
                    Self::operation_index(&tombstone.operation_id),
                    tombstone.kind,
                )
            })
            .collect();
        assert_eq!(
            reported,
            self.live_in_model(),
            "revoked set differs from live set"
        );
        self.revoked
            .extend(reported.iter().map(|(operation, _)| *operation));
        self.confirmed.clear();
    }

    fn absorb_fence<O>(&mut self, handled: &Handled<O>) {
        if self.fence_pending {
            self.absorb_revocation(&handled.revoked);
            self.fence_pending = false;
        } else {
            assert!(
                handled.revoked.is_empty(),
                "revoked without a generation change"
            );
        }
    }

    fn token_for(&self, operation: usize, kind: LeaseKind, choice: TokenChoice) -> String {
        let issued = self.tokens.get(&(operation, kind));
        match choice {
            TokenChoice::Latest => issued.and_then(|tokens| tokens.last()).cloned(),
            TokenChoice::Stale => issued
                .filter(|tokens| tokens.len() >= 2)
                .and_then(|tokens| tokens.first())
                .cloned(),
            TokenChoice::Garbage => None,
        }
        .unwrap_or_else(|| "garbage".to_string())
    }

    fn is_latest(&self, operation: usize, kind: LeaseKind, token: &str) -> bool {
        self.tokens
            .get(&(operation, kind))
            .and_then(|tokens| tokens.last())
            .is_some_and(|latest| latest == token)
    }

    fn run(&mut self, step: &Step) {
        match *step {
            Step::Acquire {
                operation,
                kind,
                ttl_seconds,
            } => self.acquire(operation, kind, ttl_seconds),
            Step::Renew {
                operation,
                kind,
                token,
            } => self.renew(operation, kind, token),
            Step::Release {
                operation,
                kind,
                token,
            } => self.release(operation, kind, token),
            Step::Advance { millis } => self.now = self.now + Duration::from_millis(millis),
            Step::BumpGeneration { announced } => {
                self.generation += 1;
                if announced {
                    let tombstones = self.state.revoke_all(
                        RevokeReason::TopologyChanged,
                        self.generation,
                        self.now,
                    );
                    self.absorb_revocation(&tombstones);
                    self.fence_pending = false;
                } else {
                    self.fence_pending = true;
                }
            }
            Step::OperatorRevoke => {
                if self.fence_pending {
                    // The shell fences after loading; then the operator annotation applies.
                    let fenced = self.state.fence_generation(self.generation, self.now);
                    self.absorb_revocation(&fenced);
                    self.fence_pending = false;
                }
                let tombstones =
                    self.state
                        .revoke_all(RevokeReason::OperatorRevoked, self.generation, self.now);
                self.absorb_revocation(&tombstones);
            }
            Step::SetUnstable(unstable) => {
                self.stability = if unstable {
                    Stability::BetweenConfirmedStates {
                        retry_after: Duration::from_secs(2),
                    }
                } else {
                    Stability::Confirmed
                };
            }
            Step::Reload => self.reload(),
        }
        self.check_observations();
    }

    fn acquire(&mut self, operation: usize, kind: LeaseKind, ttl_seconds: i64) {
        let (operation_id, instance) = OPERATIONS[operation];
        self.tokens_issued += 1;
        let token = format!("token-{}", self.tokens_issued);
        let request = LeaseRequest {
            kind,
            operation_id: operation_id.into(),
            instance: instance.into(),
            ttl_seconds,
        };
        let context = RequestContext {
            caller: &self.clients.caller,
            clients: &self.clients.authorized,
            topology_generation: self.generation,
            stability: self.stability,
            now: self.now,
        };
        let handled = self
            .state
            .acquire(&context, &request, LeaseToken::new(token.clone()));
        self.absorb_fence(&handled);
        match handled.outcome {
            AcquireOutcome::Granted(grant) | AcquireOutcome::Rotated(grant) => {
                assert!(
                    !self.revoked.contains(&operation),
                    "revoked {operation_id} re-granted"
                );
                assert_eq!(
                    self.stability,
                    Stability::Confirmed,
                    "granted while unstable"
                );
                for (other, _) in OPERATIONS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != operation)
                {
                    assert!(
                        !self.confirmed_live(other, kind),
                        "two {kind} holders: {operation_id} and op-{other}"
                    );
                }
                if kind == LeaseKind::FailoverHold {
                    assert!(
                        self.confirmed_live(operation, LeaseKind::Migration),
                        "hold granted to {operation_id} without the migration mutex"
                    );
                }
                assert_eq!(grant.expires_at, self.now + super::clamp_ttl(ttl_seconds));
                assert_eq!(grant.topology_generation, self.generation);
                self.confirmed.insert((operation, kind), grant.expires_at);
                self.tokens
                    .entry((operation, kind))
                    .or_default()
                    .push(token);
            }
            AcquireOutcome::Refused(Refusal::Revoked { .. }) => {
                assert!(self.revoked.contains(&operation));
            }
            AcquireOutcome::Refused(Refusal::Held { operation_id, .. }) => {
                let holder = Self::operation_index(&operation_id);
                assert_ne!(holder, operation);
                assert!(self.confirmed_live(holder, kind), "held by a lapsed lease");
            }
            AcquireOutcome::Refused(_) => {}
        }
    }

    fn renew(&mut self, operation: usize, kind: LeaseKind, choice: TokenChoice) {
        let token = self.token_for(operation, kind, choice);
        let credentials = LeaseCredentials {
            kind,
            operation_id: OPERATIONS[operation].0.into(),
            token: LeaseToken::new(token.clone()),
        };
        let before = self.state.lease(kind).cloned();
        let context = RequestContext {
            caller: &self.clients.caller,
            clients: &self.clients.authorized,
            topology_generation: self.generation,
            stability: self.stability,
            now: self.now,
        };
        let handled = self.state.renew(&context, &credentials);
        self.absorb_fence(&handled);
        match handled.outcome {
            RenewOutcome::Renewed(renewal) => {
                assert!(
                    !self.revoked.contains(&operation),
                    "renewed past a revocation"
                );
                assert!(
                    self.is_latest(operation, kind, &token),
                    "renewed with a stale token"
                );
                assert!(
                    self.confirmed_live(operation, kind),
                    "renewed a lapsed lease"
                );
                assert_eq!(
                    self.stability,
                    Stability::Confirmed,
                    "renewed while unstable"
                );
                self.confirmed.insert((operation, kind), renewal.expires_at);
            }
            RenewOutcome::Refused(refusal) => {
                self.check_refusal_moved_nothing(before, kind, &refusal, operation)
            }
        }
    }

    fn release(&mut self, operation: usize, kind: LeaseKind, choice: TokenChoice) {
        let token = self.token_for(operation, kind, choice);
        let credentials = LeaseCredentials {
            kind,
            operation_id: OPERATIONS[operation].0.into(),
            token: LeaseToken::new(token.clone()),
        };
        let before = self.state.lease(kind).cloned();
        let context = RequestContext {
            caller: &self.clients.caller,
            clients: &self.clients.authorized,
            topology_generation: self.generation,
            stability: self.stability,
            now: self.now,
        };
        let handled = self.state.release(&context, &credentials);
        self.absorb_fence(&handled);
        match handled.outcome {
            ReleaseOutcome::Released { .. } => {
                assert!(!self.revoked.contains(&operation));
                assert!(
                    self.is_latest(operation, kind, &token),
                    "released with a stale token"
                );
                assert!(self.confirmed_live(operation, kind));
                self.confirmed.remove(&(operation, kind));
            }
            ReleaseOutcome::Refused(refusal) => {
                self.check_refusal_moved_nothing(before, kind, &refusal, operation)
            }
        }
    }

    fn check_refusal_moved_nothing(
        &self,
        before: Option<LeaseRecord>,
        kind: LeaseKind,
        refusal: &Refusal,
        operation: usize,
    ) {
        if let Refusal::Revoked { .. } = refusal {
            assert!(self.revoked.contains(&operation));
        }
        if let Refusal::NotFound = refusal {
            assert!(
                !self.confirmed_live(operation, kind),
                "404 for a live lease"
            );
        }
        let after = self.state.lease(kind);
        if let (Some(before), Some(after)) = (before, after) {
            if before.operation_id == after.operation_id {
                assert_eq!(
                    before.expires_at, after.expires_at,
                    "a refusal moved a deadline"
                );
                assert_eq!(
                    before.token_hash, after.token_hash,
                    "a refusal changed a token"
                );
            }
        }
    }

    fn reload(&mut self) {
        let leases: Vec<LeaseRecord> = self
            .state
            .leases()
            .map(|lease| {
                LeaseRecord::from_annotations(&lease.to_annotations()).expect("lease round trip")
            })
            .collect();
        let tombstones =
            tombstones_from_data(&tombstones_to_data(self.state.tombstones())).expect("data");
        let reloaded = DeployLeases::from_parts(leases, tombstones).expect("reload");
        assert_eq!(reloaded, self.state, "stored form lost state");
        self.state = reloaded;
    }

    /// What the decision engine and metrics read must agree with the model.
    fn check_observations(&self) {
        let migration_holders = self
            .state
            .leases()
            .filter(|lease| lease.kind == LeaseKind::Migration && lease.is_live(self.now))
            .count();
        assert!(migration_holders <= 1);
        if self.fence_pending {
            return;
        }
        let live = self.live_in_model();
        assert_eq!(self.state.active_count(self.now), live.len());
        let model_hold = live
            .iter()
            .find(|(_, kind)| *kind == LeaseKind::FailoverHold)
            .map(|(operation, _)| OPERATIONS[*operation].0);
        let hold = self.state.live_hold(self.now);
        assert_eq!(
            hold.as_ref().map(|hold| hold.operation_id.as_str()),
            model_hold
        );
        if let Some(hold) = hold {
            let operation = Self::operation_index(&hold.operation_id);
            assert_eq!(
                self.confirmed.get(&(operation, LeaseKind::FailoverHold)),
                Some(&hold.earliest_expiry),
                "retryTime differs from the confirmed hold deadline"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// docs/design/requirements.md R003.10-R003.14, R003.21-R003.23: one migration lease per
    /// group, full stop; a revoked operation never renews or re-acquires; 423 and every other
    /// refusal never extend a deadline; a hold only for the migration holder;
    /// live_hold/active_count agree with what clients were confirmed.
    #[test]
    fn seed_003_random_sequences_keep_the_mutex_and_the_fence(
        steps in proptest::collection::vec(step(), 1..STEPS_MAX)
    ) {
        let mut harness = Harness::new();
        for step in &steps {
            harness.run(step);
        }
    }
}
