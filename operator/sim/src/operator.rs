//! The simulated operator: every pollInterval it observes every site through its sidecar,
//! calls core's real `decide`, and executes the decision's actions against the simulated world.
//!
//! Mutations may fail: refused outright, errored after they applied, or timed out and landing
//! later (docs/design/requirements.md R001.15: an error from a mutation is an unknown, so
//! re-read). The operator never interprets an error; the next poll re-reads. It keeps its
//! memory in process and persists it to the store's status every poll; a restart reloads it
//! from the store.

use crate::clock::{SimTime, EPOCH_UNIX_MILLIS, OPERATOR_SKEW_MILLIS_MAX};
use crate::epochs::FailoverTimes;
use crate::invariants::{FindingClass, PromotionKind};
use crate::network::OPERATOR_NODE;
use crate::store::{cluster_ip, node_name, site_index, GROUP};
use crate::trace;
use crate::world::{Event, World, SITE_NAMES};
use bloodraven_api::names;
use bloodraven_api::sidecar::{Authority, FenceRequest, PromoteRequest, RepointRequest};
use bloodraven_api::{
    DNSEndpointSpec, DnsSpec, FailoverKind, Flavor, GoDuration, MysqlFailoverGroupSpec, OnCooldown,
    PlannedFailoverPolicy, SiteRole, SiteSpec, WriteLeaseSpec,
};
use bloodraven_core::engine::{
    decide_with_options, next_poll_in, Action, AnnotationChange, DecideOptions, Decision,
    DnsReading, EventReason, GroupMemory, Observation, PodRole, SidecarReading, SiteObservation,
};
use bloodraven_core::time::Timestamp;
use rand::Rng;
use std::collections::BTreeMap;
use std::time::Duration;

/// `spec.pollInterval` of the simulated group (the playground's 2 s).
pub const POLL_INTERVAL_MILLIS: u64 = 2_000;
/// `spec.failureThreshold`.
pub const FAILURE_THRESHOLD: u32 = 3;
/// `spec.writeLease.duration`: the detection floor, 6 s.
pub const WRITE_LEASE_MILLIS: u64 = 6_000;
/// `spec.failoverCooldown` (the playground's 30 s).
pub const COOLDOWN_MILLIS: u64 = 30_000;
/// `spec.maxLagSeconds`.
pub const MAX_LAG_SECONDS: u64 = 30;
/// `spec.dns.ttl`.
pub const DNS_TTL_SECONDS: u32 = 10;
/// The DNS hostname.
pub const DNS_HOSTNAME: &str = "playground-db.example.local";

/// Probability that a sidecar read times out though the sidecar is reachable.
pub const READ_FAILURE_PROBABILITY: f64 = 0.02;
/// Probability that a mutation does not simply succeed; split evenly between refused,
/// errored-but-applied and timed-out (half of which land later).
pub const MUTATION_FAILURE_PROBABILITY: f64 = 0.06;
/// Probability, with `--state-loss`, that a restart loses the status copy (and, independently,
/// the annotation copy) of the operator's memory.
pub const STATE_LOSS_PROBABILITY: f64 = 0.7;
/// Longest operator startup (leader election, cache sync) before its first poll.
pub const STARTUP_MILLIS_MAX: u64 = 3_000;

/// The group spec the simulator runs: the playground, with onCooldown drawn per seed.
pub fn playground_spec(on_cooldown: OnCooldown) -> MysqlFailoverGroupSpec {
    let site = |name: &str, role: SiteRole| SiteSpec {
        name: name.to_string(),
        role,
        read_only_max_lag_seconds: None,
        node_selector: BTreeMap::new(),
    };
    MysqlFailoverGroupSpec {
        flavor: Flavor::Mariadb,
        image: "mariadb:10.11".to_string(),
        sites: vec![
            site(SITE_NAMES[0], SiteRole::ReadWrite),
            site(SITE_NAMES[1], SiteRole::ReadWrite),
            site(SITE_NAMES[2], SiteRole::ReadOnly),
        ],
        initial_active_site: SITE_NAMES[0].to_string(),
        poll_interval: GoDuration::from(Duration::from_millis(POLL_INTERVAL_MILLIS)),
        failure_threshold: FAILURE_THRESHOLD,
        max_lag_seconds: MAX_LAG_SECONDS,
        failover_cooldown: GoDuration::from(Duration::from_millis(COOLDOWN_MILLIS)),
        planned_failover: PlannedFailoverPolicy { on_cooldown },
        write_lease: WriteLeaseSpec {
            duration: Some(GoDuration::from(Duration::from_millis(WRITE_LEASE_MILLIS))),
        },
        // The default (`fence`); `--rejoin` draws `rejoin` for half of its seeds
        // (`crate::rejoin`).
        returning_primary: bloodraven_api::ReturningPrimaryPolicy::default(),
        dns: Some(DnsSpec {
            hostname: DNS_HOSTNAME.to_string(),
            ttl: DNS_TTL_SECONDS,
        }),
    }
}

/// A mutation that timed out and lands after the operator stopped waiting.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// `PUT /v1/authority` (also the move notice).
    PushAuthority(usize, Authority),
    /// `POST /v1/fence`.
    Fence(usize, FenceRequest),
    /// `POST /v1/promote`.
    Promote(usize, PromoteRequest),
    /// `POST /v1/repoint`.
    Repoint(usize, RepointRequest),
    /// DNSEndpoint server-side apply.
    Dns(DNSEndpointSpec),
    /// `POST /v1/backup`.
    Backup(usize, bloodraven_api::sidecar::BackupRequest),
    /// `POST /v1/restore`.
    Restore(usize, bloodraven_api::sidecar::RestoreRequest),
    /// `POST /v1/reseed`.
    Reseed(usize, bloodraven_api::sidecar::ReseedRequest),
    /// `POST /v1/archive`.
    Archive(usize, bloodraven_api::sidecar::ArchiveRequest),
}

/// How a mutation turned out, as the world (not the operator) knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Applied, success returned.
    Ok,
    /// Not applied, error returned.
    Refused,
    /// Applied, error returned anyway.
    ErroredButApplied,
    /// Timed out; lands later (or never).
    TimedOut { lands_later: bool },
}

impl Outcome {
    fn applied_now(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::ErroredButApplied)
    }

    fn failed(self) -> bool {
        !matches!(self, Outcome::Ok)
    }
}

/// The operator process.
#[derive(Debug)]
pub struct SimOperator {
    /// Whether the process runs.
    pub up: bool,
    /// Incarnation counter.
    pub run: u64,
    /// This incarnation's wall-clock skew, in milliseconds.
    pub skew_millis: i64,
    /// The in-process memory; `None` until loaded after a (re)start.
    pub memory: Option<GroupMemory>,
    /// The spec it runs.
    pub spec: MysqlFailoverGroupSpec,
    /// The highest topology generation ever pushed (ground truth for promotions).
    pub max_generation_pushed: u64,
    /// The active site of that generation.
    pub active_of_max_generation: Option<usize>,
    /// Every generation ever pushed with the site it named.
    pub pushed_generations: BTreeMap<u64, usize>,
}

impl SimOperator {
    /// A stopped operator with the given clock skew.
    pub fn new(skew_millis: i64, spec: MysqlFailoverGroupSpec) -> SimOperator {
        SimOperator {
            up: false,
            run: 0,
            skew_millis,
            memory: None,
            spec,
            max_generation_pushed: 0,
            active_of_max_generation: None,
            pushed_generations: BTreeMap::new(),
        }
    }
}

impl World {
    /// The operator's wall clock now.
    pub fn operator_now(&self) -> Timestamp {
        let millis = i64::try_from(self.now.as_millis()).unwrap_or(i64::MAX);
        Timestamp::from_unix_millis(EPOCH_UNIX_MILLIS + millis + self.operator.skew_millis)
    }

    /// Starts (or restarts) the operator. With `--state-loss`, the restart may lose the status
    /// copy and the annotation copy of its memory, each independently.
    pub fn start_operator(&mut self) {
        self.operator.up = true;
        self.operator.run += 1;
        self.operator.memory = None;
        self.operator.skew_millis = self
            .rng
            .random_range(-OPERATOR_SKEW_MILLIS_MAX..=OPERATOR_SKEW_MILLIS_MAX);
        if self.cfg.state_loss && self.operator.run > 1 {
            if self.rng.random_bool(STATE_LOSS_PROBABILITY) {
                if self.cfg.status_revert && self.rng.random_bool(0.5) {
                    trace!(
                        self.trace,
                        self.now,
                        "store",
                        "state loss: status reverts to before the cooldown write"
                    );
                    self.store.revert_status();
                    self.checker.on_store_revert();
                } else {
                    trace!(
                        self.trace,
                        self.now,
                        "store",
                        "state loss: status.cooldownUntil dropped"
                    );
                    self.store.drop_status_cooldown();
                }
            }
            if self.rng.random_bool(STATE_LOSS_PROBABILITY) {
                trace!(
                    self.trace,
                    self.now,
                    "store",
                    "state loss: cooldown-until annotation lost"
                );
                self.store.lose_annotation_copy();
            }
        }
        self.note_cooldown_copies();
        self.publish_status_snapshot();
        let run = self.operator.run;
        let delay = self.rng.random_range(1..=STARTUP_MILLIS_MAX);
        self.schedule_in(delay, Event::OperatorPoll { run });
    }

    /// Ground truth for the cooldown finding: whether neither persisted copy covers the
    /// cooldown of the last promotion any more.
    fn note_cooldown_copies(&mut self) {
        let Some(promoted_at) = self.checker.last_promotion_at() else {
            return;
        };
        let end = promoted_at.as_millis() + COOLDOWN_MILLIS;
        if self.now.as_millis() >= end {
            return;
        }
        let end_wall = EPOCH_UNIX_MILLIS + i64::try_from(end).unwrap_or(i64::MAX);
        let tolerance = 2 * OPERATOR_SKEW_MILLIS_MAX;
        let covered = self
            .store
            .persisted_cooldown_until()
            .is_some_and(|until| until.unix_millis() + tolerance >= end_wall);
        if !covered {
            trace!(
                self.trace,
                self.now,
                "store",
                "both persisted cooldown copies lost"
            );
            self.checker.on_both_cooldown_copies_lost();
        }
    }

    /// Stops the operator: its in-process memory is gone.
    pub fn stop_operator(&mut self) {
        self.operator.up = false;
        self.operator.memory = None;
    }

    fn observe(&mut self, memory: &GroupMemory) -> Observation {
        let active = site_index(&memory.active_site);
        // Contract: every other site is read before the site memory names active.
        let mut order: Vec<usize> = (0..SITE_NAMES.len())
            .filter(|&s| Some(s) != active)
            .collect();
        order.extend(active);
        let mut sites = Vec::with_capacity(order.len());
        for site in order {
            let reading = if !self.net.connected(OPERATOR_NODE, site) {
                SidecarReading::Unreachable {
                    error: "connect to sidecar: network unreachable".to_string(),
                }
            } else if self.rng.random_bool(READ_FAILURE_PROBABILITY) || self.sidecars[site].hung {
                SidecarReading::Unreachable {
                    error: "read sidecar status: timed out".to_string(),
                }
            } else {
                match self.sidecar_status(site) {
                    Some(status) => SidecarReading::Reachable(Box::new(status)),
                    None => SidecarReading::Unreachable {
                        error: "connect to sidecar: connection refused".to_string(),
                    },
                }
            };
            let sidecar = &self.sidecars[site];
            let uptime = sidecar
                .up()
                .then(|| Duration::from_millis(self.now.millis_since(sidecar.started_at)));
            sites.push(SiteObservation {
                site: SITE_NAMES[site].to_string(),
                sidecar: reading,
                node_name: Some(node_name(site)),
                service_cluster_ip: Some(cluster_ip(site)),
                sidecar_uptime: uptime,
                pod_lease_terms: crate::sidecar::pod_lease_terms(site),
                pod: self.pod_reading(site),
            });
        }
        let now = self.operator_now();
        Observation {
            group: GROUP.to_string(),
            namespace: crate::store::NAMESPACE.to_string(),
            sites,
            annotations: self.store.group_annotations(),
            deploy_hold: self.store.deploy.live_hold(now),
            dns: match &self.store.dns {
                Some(spec) => DnsReading::Present(spec.clone()),
                None => DnsReading::Absent,
            },
            polled_at: None,
        }
    }

    /// The in-process memory, or after a (re)start what core resumes from the stored status.
    fn loaded_memory(&mut self) -> GroupMemory {
        if let Some(memory) = &self.operator.memory {
            return memory.clone();
        }
        let now = self.operator_now();
        GroupMemory::from_status(&self.operator.spec, self.store.status.as_ref(), now)
    }

    /// One line per site for the trace: up/down, read_only, executed count and last sequence,
    /// relay backlog, replication source.
    fn world_summary(&self) -> String {
        let mut parts = Vec::with_capacity(SITE_NAMES.len());
        for (index, site) in self.sites.iter().enumerate() {
            let state = match (site.mysqld_up, site.read_only, site.frozen) {
                (false, _, _) => "down",
                (true, true, false) => "ro",
                (true, false, false) => "RW",
                (true, true, true) => "ro frozen",
                (true, false, true) => "RW frozen",
            };
            let source = match (site.source, site.replication_enabled) {
                (Some(source), true) => format!("<-{}", SITE_NAMES[source]),
                (Some(source), false) => format!("<-{} stopped", SITE_NAMES[source]),
                (None, _) => String::new(),
            };
            let sidecar = match (self.sidecars[index].up(), self.sidecars[index].hung) {
                (true, false) => "",
                (true, true) => " sidecar hung",
                (false, _) => " sidecar down",
            };
            parts.push(format!(
                "{} {state} seq {} (+{} relay){source}{sidecar}",
                site.name,
                site.executed.max_seq(),
                site.relay.count()
            ));
        }
        parts.join(" | ")
    }

    /// One poll of the operator.
    pub fn operator_poll(&mut self, run: u64) {
        if !self.operator.up || self.operator.run != run {
            return;
        }
        self.stats.polls += 1;
        if self.trace.enabled() {
            let summary = self.world_summary();
            trace!(self.trace, self.now, "poll", "{summary}");
        }
        let memory = self.loaded_memory();
        let observation = self.observe(&memory);
        let now = self.operator_now();
        let options = DecideOptions {
            unsafe_skip_lease_wait: self.cfg.broken_promotion_rule,
            unsafe_skip_agentless_kill: self.cfg.no_agentless_kill,
        };
        let decision =
            decide_with_options(&self.operator.spec, &memory, &observation, now, options);
        // The shell's rhythm: pollInterval, or follow-ups while a failover is in flight.
        let next = next_poll_in(&self.operator.spec, &decision.memory, now);
        self.schedule_in(
            u64::try_from(next.as_millis()).unwrap_or(POLL_INTERVAL_MILLIS),
            Event::OperatorPoll { run },
        );
        if observation.deploy_hold.is_some() {
            self.check_hold_never_delays_emergency(&memory, &observation, now, options, &decision);
        }
        self.check_decision_consistent(&decision);
        self.check_restore(&memory, observation.deploy_hold.is_some(), &decision);
        self.check_update_hold(&memory, &observation, &decision);
        self.note_promotion(&memory, &decision);
        self.note_rejoins(&memory, &decision);
        let outcomes = self.execute(&decision);
        self.check_serving_labels();
        self.store.write_status(decision.memory.to_status());
        self.publish_status_snapshot();
        self.operator.memory = Some(decision.memory.clone());
        self.check_after_poll(&decision, &outcomes);
    }

    /// docs/design/requirements.md R003.18: a live failover-hold never changes what the
    /// emergency path decides. `decide` is pure, so the same poll is decided again without the
    /// hold and compared.
    fn check_hold_never_delays_emergency(
        &mut self,
        memory: &GroupMemory,
        observation: &Observation,
        now: Timestamp,
        options: DecideOptions,
        with_hold: &Decision,
    ) {
        let mut without = observation.clone();
        without.deploy_hold = None;
        let free = decide_with_options(&self.operator.spec, memory, &without, now, options);
        self.stats.polls_with_hold += 1;
        if free.memory.emergency_failover.is_some() {
            self.stats.hold_polls_during_emergency += 1;
        }
        let emergency = |d: &Decision| {
            (
                d.memory.emergency_failover.clone(),
                d.memory
                    .last_failover
                    .as_ref()
                    .filter(|f| f.kind == FailoverKind::Emergency)
                    .cloned(),
            )
        };
        if emergency(with_hold) != emergency(&free) {
            let detail = format!(
                "with hold: {:?}; without: {:?}",
                emergency(with_hold),
                emergency(&free)
            );
            self.checker
                .report(FindingClass::HoldDelayedEmergency, self.now, detail);
        }
    }

    /// docs/design/style.md#4-assertions-for-invariants-result-for-the-world, "two primaries in
    /// one Decision": every authority pushed in one decision is the same, and at most one pod
    /// is labelled primary.
    fn check_decision_consistent(&mut self, decision: &Decision) {
        let mut authorities = std::collections::BTreeSet::new();
        let mut primaries = std::collections::BTreeSet::new();
        for action in &decision.actions {
            match action {
                Action::PushAuthority { authority, .. } => {
                    authorities
                        .insert((authority.active_site.clone(), authority.topology_generation));
                }
                Action::SetPodLabels {
                    site,
                    role: PodRole::Primary,
                    ..
                } => {
                    primaries.insert(site.clone());
                }
                _ => {}
            }
        }
        if authorities.len() > 1 || primaries.len() > 1 {
            let detail =
                format!("authorities pushed {authorities:?}, pods labelled primary {primaries:?}");
            self.checker
                .report(FindingClass::ConflictingDecision, self.now, detail);
        }
    }

    /// Ground truth of promotions: a pushed authority with a new generation naming another site.
    fn note_promotion(&mut self, before: &GroupMemory, decision: &Decision) {
        for action in &decision.actions {
            let Action::PushAuthority { authority, .. } = action else {
                continue;
            };
            let Some(site) = authority.active_site.as_deref().and_then(site_index) else {
                continue;
            };
            let generation = authority.topology_generation;
            let reused = self
                .operator
                .pushed_generations
                .get(&generation)
                .is_some_and(|&named| named != site);
            if reused {
                // A generation already issued naming another site (the status, and the
                // generation in it, was lost): an authority move nobody can order.
                trace!(
                    self.trace,
                    self.now,
                    "operator",
                    "REUSES generation {generation} for {}",
                    SITE_NAMES[site]
                );
                self.stats.promotions += 1;
                self.checker
                    .on_promotion(self.now, site, PromotionKind::Other);
                self.operator.pushed_generations.insert(generation, site);
                continue;
            }
            self.operator.pushed_generations.insert(generation, site);
            if generation <= self.operator.max_generation_pushed {
                continue;
            }
            let previous = self.operator.active_of_max_generation;
            self.operator.max_generation_pushed = generation;
            self.operator.active_of_max_generation = Some(site);
            if previous.is_none_or(|p| p == site) {
                continue;
            }
            let promoted = decision.actions.iter().any(|action| {
                matches!(action, Action::Event(event) if event.reason == EventReason::Promoted)
            });
            let recorded = decision
                .memory
                .last_failover
                .as_ref()
                .filter(|f| promoted && f.to == SITE_NAMES[site])
                .map(|f| f.kind);
            let kind = match recorded {
                Some(FailoverKind::Emergency) => PromotionKind::Emergency,
                Some(FailoverKind::Planned) => PromotionKind::Planned,
                None => PromotionKind::Other,
            };
            self.stats.promotions += 1;
            if kind == PromotionKind::Emergency {
                self.stats.emergency_promotions += 1;
            }
            if let Some(replaced) = previous {
                self.check_promotion_errant(site, kind, replaced);
            }
            trace!(
                self.trace,
                self.now,
                "operator",
                "PROMOTES {} ({kind:?}, generation {}, was {})",
                SITE_NAMES[site],
                authority.topology_generation,
                before.active_site
            );
            self.checker.on_promotion(self.now, site, kind);
        }
    }

    fn roll_outcome(&mut self) -> Outcome {
        if !self.rng.random_bool(MUTATION_FAILURE_PROBABILITY) {
            return Outcome::Ok;
        }
        match self.rng.random_range(0..4u32) {
            0 => Outcome::Refused,
            1 => Outcome::ErroredButApplied,
            2 => Outcome::TimedOut { lands_later: true },
            _ => Outcome::TimedOut { lands_later: false },
        }
    }

    /// Executes the decision's actions in order; returns, per action index, whether it failed.
    fn execute(&mut self, decision: &Decision) -> Vec<bool> {
        let mut failed = Vec::with_capacity(decision.actions.len());
        for action in &decision.actions {
            let outcome = self.execute_one(action);
            failed.push(outcome.failed());
        }
        failed
    }

    fn sidecar_mutation(&mut self, mutation: Mutation) -> Outcome {
        let site = match &mutation {
            Mutation::PushAuthority(site, _)
            | Mutation::Fence(site, _)
            | Mutation::Promote(site, _)
            | Mutation::Repoint(site, _)
            | Mutation::Backup(site, _)
            | Mutation::Restore(site, _)
            | Mutation::Reseed(site, _)
            | Mutation::Archive(site, _) => *site,
            Mutation::Dns(_) => return self.dns_mutation(mutation),
        };
        if !self.net.connected(OPERATOR_NODE, site) || !self.sidecars[site].up() {
            return Outcome::Refused;
        }
        if self.sidecars[site].hung {
            // The kernel accepted the request; the hung server serves it when it resumes.
            self.queue_for_hung_sidecar(site, mutation);
            return Outcome::TimedOut { lands_later: true };
        }
        let outcome = self.roll_outcome();
        if outcome.applied_now() {
            self.apply_mutation(&mutation);
        }
        if outcome == (Outcome::TimedOut { lands_later: true }) {
            let delay = self.rng.random_range(1..POLL_INTERVAL_MILLIS / 2);
            self.schedule_in(delay, Event::LateMutation(mutation));
        }
        outcome
    }

    fn dns_mutation(&mut self, mutation: Mutation) -> Outcome {
        let outcome = self.roll_outcome();
        if outcome.applied_now() {
            self.apply_mutation(&mutation);
        }
        if outcome == (Outcome::TimedOut { lands_later: true }) {
            let delay = self.rng.random_range(1..POLL_INTERVAL_MILLIS / 2);
            self.schedule_in(delay, Event::LateMutation(mutation));
        }
        outcome
    }

    /// A timed-out mutation lands after all.
    pub fn late_mutation(&mut self, mutation: Mutation) {
        let sidecar = match &mutation {
            Mutation::PushAuthority(site, _)
            | Mutation::Fence(site, _)
            | Mutation::Promote(site, _)
            | Mutation::Repoint(site, _)
            | Mutation::Backup(site, _)
            | Mutation::Restore(site, _)
            | Mutation::Reseed(site, _)
            | Mutation::Archive(site, _) => Some(*site),
            Mutation::Dns(_) => None,
        };
        if let Some(site) = sidecar.filter(|&site| self.sidecars[site].hung) {
            self.queue_for_hung_sidecar(site, mutation);
            return;
        }
        if sidecar.is_none_or(|site| self.sidecars[site].up()) {
            trace!(
                self.trace,
                self.now,
                "operator",
                "late mutation lands: {mutation:?}"
            );
            self.apply_mutation(&mutation);
        }
    }

    /// A request to the hung sidecar of `site` waits in its server's queue (bounded: beyond it,
    /// the connection is refused).
    fn queue_for_hung_sidecar(&mut self, site: usize, mutation: Mutation) {
        let queued = &mut self.sidecars[site].queued;
        if queued.len() < crate::fencing::QUEUED_MUTATIONS_MAX {
            queued.push(mutation);
        }
    }

    /// Applies a mutation to the world (the request reached a running, serving sidecar).
    pub fn apply_mutation(&mut self, mutation: &Mutation) {
        match mutation {
            Mutation::PushAuthority(site, authority) => {
                self.sidecar_push_authority(*site, authority);
            }
            Mutation::Fence(site, request) => {
                self.sidecar_fence(*site, request);
            }
            Mutation::Promote(site, request) => {
                self.sidecar_promote(*site, request);
            }
            Mutation::Repoint(site, request) => {
                self.sidecar_repoint(*site, request);
            }
            Mutation::Backup(site, request) => {
                self.sidecar_backup(*site, request);
            }
            Mutation::Restore(site, request) => {
                self.sidecar_restore(*site, request);
            }
            Mutation::Reseed(site, request) => {
                self.sidecar_reseed(*site, request);
            }
            Mutation::Archive(site, request) => {
                self.sidecar_archive(*site, request);
            }
            Mutation::Dns(spec) => {
                let target = spec
                    .endpoints
                    .first()
                    .and_then(|e| e.targets.first())
                    .and_then(|ip| (0..SITE_NAMES.len()).find(|&s| cluster_ip(s) == *ip));
                let active = self
                    .operator
                    .active_of_max_generation
                    .or_else(|| self.store.status_active_site().and_then(site_index));
                if target.is_some() && target != active {
                    let detail = format!(
                        "DNS apply lands targeting {:?} while {:?} holds the newest authority",
                        target.map(|t| SITE_NAMES[t]),
                        active.map(|a| SITE_NAMES[a])
                    );
                    self.checker
                        .report(FindingClass::DnsStale, self.now, detail);
                }
                if self.store.dns.as_ref() != Some(spec) {
                    trace!(
                        self.trace,
                        self.now,
                        "dns",
                        "record now targets {:?}",
                        target.map(|t| SITE_NAMES[t])
                    );
                }
                self.store.dns = Some(spec.clone());
            }
        }
    }

    fn execute_one(&mut self, action: &Action) -> Outcome {
        match action {
            Action::TaintNode { node, .. } => {
                self.store.taints.insert(node.clone());
                Outcome::Ok
            }
            Action::UntaintNode { node, .. } => {
                self.store.taints.remove(node);
                Outcome::Ok
            }
            Action::PushAuthority { site, authority }
            | Action::AnnounceAuthorityMove { site, authority } => match site_index(site) {
                Some(index) => {
                    self.sidecar_mutation(Mutation::PushAuthority(index, authority.clone()))
                }
                None => Outcome::Refused,
            },
            Action::Fence { site, request } => match site_index(site) {
                Some(index) => self.sidecar_mutation(Mutation::Fence(index, request.clone())),
                None => Outcome::Refused,
            },
            Action::Promote { site, request } => match site_index(site) {
                Some(index) => self.sidecar_mutation(Mutation::Promote(index, request.clone())),
                None => Outcome::Refused,
            },
            Action::Repoint { site, request } => match site_index(site) {
                Some(index) => self.sidecar_mutation(Mutation::Repoint(index, request.clone())),
                None => Outcome::Refused,
            },
            Action::SetPodLabels {
                site,
                role,
                healthy,
                ..
            } => {
                if let Some(index) = site_index(site) {
                    self.store.labels.insert(index, (*role, *healthy));
                }
                Outcome::Ok
            }
            Action::DeletePod {
                site, uid, grace, ..
            } => match site_index(site) {
                Some(index) if self.delete_pod(index, uid, *grace) => Outcome::Ok,
                // A precondition failure (another uid) is done, as the operator takes it.
                Some(_) => Outcome::Ok,
                None => Outcome::Refused,
            },
            Action::RollSite {
                site,
                uid,
                image,
                grace,
                ..
            } => match site_index(site) {
                Some(index) => {
                    self.roll_site(index, uid, image, *grace);
                    Outcome::Ok
                }
                None => Outcome::Refused,
            },
            Action::ApplyService(_) | Action::Metric(_) => Outcome::Ok,
            Action::Backup { site, request } => match site_index(site) {
                Some(index) => self.sidecar_mutation(Mutation::Backup(index, request.clone())),
                None => Outcome::Refused,
            },
            Action::Restore { site, request } => match site_index(site) {
                Some(index) => self.sidecar_mutation(Mutation::Restore(index, request.clone())),
                None => Outcome::Refused,
            },
            Action::Reseed { site, request } => match site_index(site) {
                Some(index) => {
                    if self.rejoin.ids.contains(&request.restore_id) {
                        self.check_rejoin_target(index, "the rejoin's re-seed asked");
                    }
                    self.sidecar_mutation(Mutation::Reseed(index, request.clone()))
                }
                None => Outcome::Refused,
            },
            Action::Archive { site, request } => match site_index(site) {
                Some(index) => {
                    self.check_rejoin_target(index, &format!("archive {} asked", request.name));
                    self.sidecar_mutation(Mutation::Archive(index, request.clone()))
                }
                None => Outcome::Refused,
            },
            Action::ApplyDnsEndpoint { spec, .. } => {
                self.sidecar_mutation(Mutation::Dns(spec.clone()))
            }
            Action::RevokeDeployLeases {
                reason,
                topology_generation,
            } => {
                let now = self.operator_now();
                let revoked = self
                    .store
                    .deploy
                    .revoke_all(*reason, *topology_generation, now);
                if !revoked.is_empty() {
                    trace!(
                        self.trace,
                        self.now,
                        "deploy",
                        "revoked {} leases ({})",
                        revoked.len(),
                        reason.as_str()
                    );
                }
                Outcome::Ok
            }
            Action::Annotate(change) => {
                self.annotate(change);
                Outcome::Ok
            }
            Action::Event(event) => {
                trace!(
                    self.trace,
                    self.now,
                    "event",
                    "{}: {}",
                    event.reason.as_str(),
                    event.message
                );
                Outcome::Ok
            }
        }
    }

    fn annotate(&mut self, change: &AnnotationChange) {
        let annotations = &mut self.store.annotations;
        match change {
            AnnotationChange::SetCooldownUntil(until) => {
                annotations.insert(
                    names::ANNOTATION_COOLDOWN_UNTIL.to_string(),
                    until.to_string(),
                );
            }
            AnnotationChange::SetLastFailover(text) => {
                annotations.insert(names::ANNOTATION_LAST_FAILOVER.to_string(), text.clone());
            }
            AnnotationChange::ClearPlannedFailover => {
                annotations.remove(names::ANNOTATION_PLANNED_FAILOVER);
            }
            AnnotationChange::ClearRevokeDeploymentLeases => {
                annotations.remove(names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES);
            }
            AnnotationChange::ClearBackup => {
                annotations.remove(names::ANNOTATION_BACKUP);
            }
            AnnotationChange::ClearRestore => {
                annotations.remove(names::ANNOTATION_RESTORE);
            }
            AnnotationChange::ClearRejoin => {
                annotations.remove(names::ANNOTATION_REJOIN);
            }
        }
    }

    fn check_after_poll(&mut self, decision: &Decision, failed: &[bool]) {
        let memory = &decision.memory;
        // lastFailover.lostTransactions against the truth.
        if let Some(last) = memory.last_failover.as_ref() {
            if last.kind == FailoverKind::Emergency {
                if let (Some(from), Some(to)) = (site_index(&last.from), site_index(&last.to)) {
                    let promoted_at = last.promoted_at.map(sim_time_of);
                    let compared = self.checker.on_reported_loss(
                        self.now,
                        from,
                        to,
                        promoted_at,
                        last.lost_transactions,
                        last.exact,
                    );
                    if compared {
                        self.stats.exact_loss_checks += 1;
                    }
                }
            }
        }
        // DNS after the poll: with a valid authority and no failed DNS apply this poll, the
        // record targets the active site.
        let dns_failed = decision
            .actions
            .iter()
            .zip(failed)
            .any(|(action, &f)| f && matches!(action, Action::ApplyDnsEndpoint { .. }));
        if memory.authority.is_valid() && !dns_failed {
            let target = self.store.dns_target_site();
            let active = site_index(&memory.active_site);
            if target.is_some() && target != active {
                let detail = format!(
                    "after the poll DNS targets {:?}, active is {}",
                    target.map(|t| SITE_NAMES[t]),
                    memory.active_site
                );
                self.checker
                    .report(FindingClass::DnsStale, self.now, detail);
            }
        }
        // Every generation bump revokes every deploy lease.
        let now = self.operator_now();
        let stale: Vec<String> = self
            .store
            .deploy
            .leases()
            .filter(|lease| {
                lease.is_live(now) && lease.topology_generation < memory.topology_generation
            })
            .map(|lease| {
                format!(
                    "{} {} (generation {})",
                    lease.kind.as_str(),
                    lease.operation_id,
                    lease.topology_generation
                )
            })
            .collect();
        if !stale.is_empty() {
            let detail = format!(
                "generation is {} but leases {} are live",
                memory.topology_generation,
                stale.join(", ")
            );
            self.checker
                .report(FindingClass::LeaseNotRevoked, self.now, detail);
        }
    }
}

/// A status timestamp (the operator's wall clock) on the simulator's time axis: off true time
/// by the writer's clock skew.
pub fn sim_time_of(at: Timestamp) -> SimTime {
    SimTime(u64::try_from(at.unix_millis() - EPOCH_UNIX_MILLIS).unwrap_or(0))
}

impl World {
    /// The split-brain judge sees the status as it is now (as the harness's status probe
    /// would).
    pub fn publish_status_snapshot(&mut self) {
        let Some(status) = self.store.status.as_ref() else {
            return;
        };
        let active = status.active_site.as_deref().and_then(site_index);
        let failover = status.last_failover.as_ref().and_then(|last| {
            Some(FailoverTimes {
                from: site_index(&last.from)?,
                to: site_index(&last.to)?,
                started_at: last.started_at.map(sim_time_of),
                fenced_at: last.fenced_at.map(sim_time_of),
                promoted_at: last.promoted_at.map(sim_time_of),
            })
        });
        let generation = status.topology_generation;
        self.checker
            .on_status(self.now, active, generation, failover);
    }
}

/// Time of the simulated run as an operator-independent wall clock (for the pipeline).
pub fn wall_of(now: SimTime) -> Timestamp {
    Timestamp::from_unix_millis(
        EPOCH_UNIX_MILLIS + i64::try_from(now.as_millis()).unwrap_or(i64::MAX),
    )
}
