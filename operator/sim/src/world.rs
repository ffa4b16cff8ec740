//! The simulated world and its discrete-event loop.
//!
//! One seeded ChaCha PRNG draws every random number; events are ordered by (time, sequence
//! number), so a run is a pure function of its [`SimConfig`]. After every event the invariants
//! of [`crate::invariants`] are checked.
//!
//! The world's behaviour is split by component: this module holds the state, the loop and
//! replication; [`crate::client`], [`crate::fencing`], [`crate::sidecar`],
//! [`crate::operator`], [`crate::store`] and [`crate::faults`] add their own `impl World`
//! blocks.

use crate::client::ClientState;
use crate::clock::{DriftClock, SimTime, DRIFT_PPM_MAX, OPERATOR_SKEW_MILLIS_MAX};
use crate::config::SimConfig;
use crate::faults::{FaultState, PipelineState};
use crate::invariants::{Checker, Finding, FindingClass};
use crate::network::Network;
use crate::operator::{playground_spec, SimOperator};
use crate::sidecar::SimSidecar;
use crate::site::{Site, SiteRole};
use crate::store::ApiStore;
use crate::trace;
use crate::trace::Trace;
use bloodraven_api::OnCooldown;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

/// Events processed in one run beyond which the run stops (a runaway schedule is a bug).
pub const EVENTS_PER_RUN_MAX: u64 = 5_000_000;

/// Names of the simulated sites, in spec order.
pub const SITE_NAMES: [&str; 3] = ["iad", "pdx", "reader"];

/// What happens at one instant.
#[derive(Debug, Clone)]
pub enum Event {
    /// The client workload attempts one write.
    Write,
    /// A replica's IO thread fetches from its source.
    ReplicationPull {
        /// The replica.
        site: usize,
    },
    /// A replica's SQL thread applies its relay log.
    RelayApply {
        /// The replica.
        site: usize,
    },
    /// A sidecar's periodic check of its rules against mysqld.
    SidecarTick {
        /// The sidecar's site.
        site: usize,
        /// The sidecar run this tick belongs to (stale ticks of a dead run are dropped).
        run: u64,
        /// Part of the periodic chain (reschedules itself) rather than a lease-expiry wake-up.
        periodic: bool,
    },
    /// A sidecar's lease renewal timer.
    LeaseRenew {
        /// The sidecar's site.
        site: usize,
        /// The sidecar run.
        run: u64,
    },
    /// A lease request arrives at a peer.
    LeaseRequestArrives {
        /// Requesting site.
        from: usize,
        /// Peer asked.
        to: usize,
        /// The request.
        request: bloodraven_api::sidecar::LeaseRequest,
        /// The requester's round.
        round: u64,
        /// The requester's run.
        run: u64,
    },
    /// A lease response arrives back at the requester.
    LeaseResponseArrives {
        /// The peer that answered.
        from: usize,
        /// The requester.
        to: usize,
        /// The answer.
        response: bloodraven_api::sidecar::LeaseResponse,
        /// The requester's round.
        round: u64,
        /// The requester's run.
        run: u64,
    },
    /// The operator's poll timer.
    OperatorPoll {
        /// The operator run this poll belongs to.
        run: u64,
    },
    /// A human changes `spec.image` (`--image-update`).
    ImageChange,
    /// A mutation that returned an error or timed out lands after all
    /// (docs/design/requirements.md R001.15).
    LateMutation(crate::operator::Mutation),
    /// A fault starts or heals, or the deploy pipeline or a human acts.
    Fault(crate::faults::FaultEvent),
    /// mysqld's event scheduler runs `fence_at_write_deadline` (every `SWITCH_PERIOD`).
    DeadlineSwitch {
        /// The site.
        site: usize,
        /// The mysqld run the event chain belongs to.
        run: u64,
    },
    /// The sidecar's watchdog checks its verdict (every `WATCHDOG_CHECK_MILLIS`).
    WatchdogCheck {
        /// The sidecar's site.
        site: usize,
        /// The sidecar run.
        run: u64,
    },
    /// The kubelet kills the containers of a deleted pod (its grace period is over).
    PodKill {
        /// The site.
        site: usize,
        /// The pod's generation (a recreated pod makes this stale).
        generation: u64,
    },
    /// The StatefulSet's new pod starts.
    PodRecreate {
        /// The site.
        site: usize,
        /// The generation of the pod it replaces.
        generation: u64,
    },
    /// The kubelet restarts a mysqld the watchdog killed.
    MysqldRestart {
        /// The site.
        site: usize,
        /// The mysqld run that was killed (a later run makes this stale).
        run: u64,
    },
    /// The kubelet's liveness probe restarts a sidecar that has hung since `hang`.
    SidecarLivenessRestart {
        /// The sidecar's site.
        site: usize,
        /// The sidecar run that hung.
        run: u64,
        /// Which hang of that run.
        hang: u64,
    },
    /// A held client connection sends its next write.
    HeldWrite {
        /// The connection.
        connection: usize,
    },
    /// A held client connection (re)connects through the DNS record.
    HeldReconnect {
        /// The connection.
        connection: usize,
    },
    /// The human looks at the group and may ask for a rejoin (`--rejoin`).
    RejoinWatch,
    /// An archive job's run reaches its end (`crate::rejoin`).
    ArchiveDone {
        /// The site.
        site: usize,
        /// The job's run.
        seq: u64,
    },
    /// A rejoin's re-seed has its dump of the source and starts loading it (`crate::rejoin`).
    ReseedLoad {
        /// The site re-seeded.
        site: usize,
        /// The job's run.
        seq: u64,
    },
    /// A rejoin's re-seed has loaded its dump and points replication at the source.
    ReseedDone {
        /// The site re-seeded.
        site: usize,
        /// The job's run.
        seq: u64,
    },
}

#[derive(Debug)]
struct Scheduled {
    at: SimTime,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    // Reversed: BinaryHeap is a max-heap and the earliest event must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Counters of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Events processed.
    pub events: u64,
    /// Client writes acknowledged.
    pub acked_writes: u64,
    /// Client writes refused (no writable site reachable).
    pub refused_writes: u64,
    /// Authority moves to another site (emergency, planned and other).
    pub promotions: u64,
    /// Of those, emergency failovers.
    pub emergency_promotions: u64,
    /// Polls that saw a live failover-hold (the hold counterfactual ran).
    pub polls_with_hold: u64,
    /// Polls that saw a live failover-hold while an emergency failover was wanted or running.
    pub hold_polls_during_emergency: u64,
    /// Exact `lostTransactions` reports compared with the truth.
    pub exact_loss_checks: u64,
    /// Restores whose recorded loss was compared with the truth.
    pub restores_checked: u64,
    /// Operator polls run.
    pub polls: u64,
    /// mysqld processes the sidecars' watchdogs killed.
    pub watchdog_kills: u64,
    /// Times a mysqld's write deadline fenced it.
    pub deadline_fences: u64,
    /// `spec.image` changes (`--image-update`).
    pub image_changes: u64,
    /// Site pods an ordered update deleted.
    pub site_recreations: u64,
    /// Ordered updates completed by the end of the run.
    pub updates_completed: u64,
    /// Ordered updates refused inside the cooldown (onCooldown: reject).
    pub updates_rejected_in_cooldown: u64,
    /// Ordered updates stopped because their planned failover was rejected or aborted.
    pub updates_failed_failover: u64,
    /// Ordered updates still waiting at the end for a group that was not healthy.
    pub updates_blocked_unhealthy: u64,
    /// Polls whose update was deferred by a failover-hold.
    pub update_polls_deferred_by_hold: u64,
    /// `kubectl bloodraven rejoin` annotations the human set (`--rejoin`).
    pub rejoin_requests: u64,
    /// Rejoins that went under way (fenced for their archive, or re-seeded from a kept one).
    pub rejoins_started: u64,
    /// Of those, started by `onErrant: rejoin`.
    pub rejoins_automatic: u64,
    /// Rejoins completed (the site a replica again).
    pub rejoins_completed: u64,
    /// Rejoins failed.
    pub rejoins_failed: u64,
    /// Rejoins refused.
    pub rejoins_refused: u64,
    /// Archive jobs started on a sidecar.
    pub archive_jobs_started: u64,
    /// Archives written.
    pub archives_written: u64,
    /// Archive jobs failed (mysqld went away mid-archive).
    pub archive_jobs_failed: u64,
    /// Archive jobs cut off (the sidecar died mid-archive).
    pub archive_jobs_cut_off: u64,
    /// Rejoin re-seed jobs started on a sidecar.
    pub reseed_jobs_started: u64,
    /// Rejoin re-seed jobs failed (mysqld, or the source, went away).
    pub reseed_jobs_failed: u64,
    /// Rejoin re-seed jobs cut off (the sidecar died).
    pub reseed_jobs_cut_off: u64,
}

/// The result of one run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The seed.
    pub seed: u64,
    /// Violations per class.
    pub counts: BTreeMap<FindingClass, u64>,
    /// The first few findings of each class.
    pub findings: Vec<Finding>,
    /// The trace (empty unless tracing was on).
    pub trace: String,
    /// Counters.
    pub stats: RunStats,
}

/// The whole simulated world of one run.
#[derive(Debug)]
pub struct World {
    /// The run's configuration.
    pub cfg: SimConfig,
    /// The one PRNG.
    pub rng: ChaCha8Rng,
    /// True simulated time.
    pub now: SimTime,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    /// The sites' mysqld.
    pub sites: Vec<Site>,
    /// The sites' sidecars.
    pub sidecars: Vec<SimSidecar>,
    /// The ordered update's track (`--image-update`).
    pub update: crate::update::UpdateTrack,
    /// The site pods' API objects (the agentless rule's view of the kubelet).
    pub pods: Vec<crate::kubelet::SimPod>,
    /// The network.
    pub net: Network,
    /// The Kubernetes API as the operator sees it.
    pub store: ApiStore,
    /// The operator process.
    pub operator: SimOperator,
    /// Faults in force and the fault schedule's bookkeeping.
    pub faults: FaultState,
    /// The deploy pipeline holding leases.
    pub pipeline: PipelineState,
    /// The client workload: held connections and writes waiting on a frozen mysqld.
    pub clients: ClientState,
    /// The invariant checker.
    pub checker: Checker,
    /// The trace.
    pub trace: Trace,
    /// Counters.
    pub stats: RunStats,
    /// The sites' backup volumes and jobs (`crate::restore`).
    pub jobs: Vec<crate::restore::SiteJobs>,
    /// What the restore in flight discarded.
    pub restore_truth: Option<crate::restore::RestoreTruth>,
    /// Rejoins (`--rejoin`): the policy drawn, rejoin ids seen, archive job runs.
    pub rejoin: crate::rejoin::RejoinTrack,
    /// What removed data from a site during this event (a re-seed, a restore, a relay log
    /// deleted), checked by `DiscardedUnarchived` after it.
    pub data_removed: Option<String>,
}

impl World {
    /// Builds the world of `cfg`: three sites with iad the initial active site, replicas
    /// pointed at it, sidecars with drifting clocks, an operator about to bootstrap.
    pub fn new(cfg: SimConfig) -> World {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let roles = [SiteRole::ReadWrite, SiteRole::ReadWrite, SiteRole::ReadOnly];
        let sites = (0..SITE_NAMES.len())
            .map(|site| {
                let origin = rng.random_range(1_000_000..1_000_000_000);
                let drift = rng.random_range(-DRIFT_PPM_MAX..=DRIFT_PPM_MAX);
                let server_id = u32::try_from(site + 1).unwrap_or(u32::MAX);
                Site::new(
                    SITE_NAMES[site],
                    roles[site],
                    server_id,
                    DriftClock::new(origin, drift),
                )
            })
            .collect::<Vec<_>>();
        let sidecars = (0..sites.len())
            .map(|site| {
                let origin = rng.random_range(1_000_000..1_000_000_000);
                let drift = rng.random_range(-DRIFT_PPM_MAX..=DRIFT_PPM_MAX);
                SimSidecar::new(site, DriftClock::new(origin, drift))
            })
            .collect();
        let operator_skew = rng.random_range(-OPERATOR_SKEW_MILLIS_MAX..=OPERATOR_SKEW_MILLIS_MAX);
        let on_cooldown = if rng.random_bool(0.5) {
            OnCooldown::Defer
        } else {
            OnCooldown::Reject
        };
        let store = ApiStore::new();
        let checker = Checker::new(
            SITE_NAMES.to_vec(),
            crate::operator::COOLDOWN_MILLIS,
            2 * OPERATOR_SKEW_MILLIS_MAX.unsigned_abs(),
        );
        let trace = Trace::new(cfg.trace);
        let mut world = World {
            cfg,
            rng,
            now: SimTime(0),
            seq: 0,
            queue: BinaryHeap::new(),
            sites,
            sidecars,
            // The playground's pods predate the run (created at the Unix epoch, so before any
            // move the operator announces).
            pods: (0..SITE_NAMES.len())
                .map(|_| {
                    crate::kubelet::SimPod::new(
                        0,
                        bloodraven_core::time::Timestamp::from_unix_millis(0),
                    )
                })
                .collect(),
            net: Network::new(),
            store,
            operator: SimOperator::new(operator_skew, playground_spec(on_cooldown)),
            faults: FaultState::default(),
            pipeline: PipelineState::default(),
            jobs: vec![crate::restore::SiteJobs::default(); SITE_NAMES.len()],
            restore_truth: None,
            rejoin: crate::rejoin::RejoinTrack::default(),
            data_removed: None,
            clients: ClientState::new(SITE_NAMES.len()),
            checker,
            trace,
            stats: RunStats::default(),
            update: crate::update::UpdateTrack::default(),
        };
        world.bootstrap();
        world
    }

    fn bootstrap(&mut self) {
        // Replicas start pointed at the initial active site, as the StatefulSets would be set up.
        for site in 1..self.sites.len() {
            self.sites[site].source = Some(0);
            self.sites[site].replication_enabled = true;
        }
        // Every site's IO thread loop runs for the whole run; it fetches only while the site
        // is configured to replicate (any site may become a replica after a failover).
        for site in 0..self.sites.len() {
            let delay = self.rng.random_range(20..200);
            self.schedule_in(delay, Event::ReplicationPull { site });
            self.start_deadline_switch(site);
        }
        for site in 0..self.sidecars.len() {
            self.start_sidecar(site);
        }
        self.start_operator();
        self.start_clients();
        self.schedule_faults();
        self.schedule_image_change();
        self.schedule_rejoins();
        trace!(
            self.trace,
            self.now,
            "world",
            "seed {} bootstrap: iad initial active",
            self.cfg.seed
        );
    }

    /// Schedules `event` at `now + delay_millis`.
    pub fn schedule_in(&mut self, delay_millis: u64, event: Event) {
        self.schedule_at(self.now.plus_millis(delay_millis), event);
    }

    /// Schedules `event` at `at` (not before now).
    pub fn schedule_at(&mut self, at: SimTime, event: Event) {
        let at = at.max(self.now);
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    /// Runs until the configured duration and returns the outcome.
    ///
    /// A panic inside the run (a core assertion, or the simulator's own) does not unwind past
    /// here: it is reported as a [`FindingClass::Panicked`] finding at the simulated time it
    /// happened, with its message, and the run ends there with the findings and trace it had.
    pub fn run(mut self) -> RunOutcome {
        let duration = self.cfg.duration;
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_until(duration);
            self.finish();
        }));
        if let Err(payload) = stepped {
            let message = panic_message(payload.as_ref());
            trace!(self.trace, self.now, "world", "panicked: {message}");
            self.checker
                .report(FindingClass::Panicked, self.now, message);
        }
        RunOutcome {
            seed: self.cfg.seed,
            counts: self.checker.counts().clone(),
            findings: self.checker.findings().to_vec(),
            trace: self.trace.into_text(),
            stats: self.stats,
        }
    }

    /// Processes every event up to `until` (and not beyond the configured duration), checking
    /// the invariants after each; scenario tests step the world with it.
    pub fn run_until(&mut self, until: SimTime) {
        let until = until.min(self.cfg.duration);
        while let Some(next) = self.queue.peek() {
            if next.at > until || self.stats.events >= EVENTS_PER_RUN_MAX {
                break;
            }
            let Some(next) = self.queue.pop() else {
                break;
            };
            self.now = next.at;
            self.stats.events += 1;
            if self.cfg.panic_at.is_some_and(|at| self.now >= at) {
                panic!("injected panic at {} (test-only panic_at)", self.now);
            }
            self.dispatch(next.event);
            self.check_step();
        }
        self.now = self.now.max(until);
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Write => self.client_write(),
            Event::ReplicationPull { site } => self.replication_pull(site),
            Event::RelayApply { site } => self.relay_apply(site),
            Event::SidecarTick {
                site,
                run,
                periodic,
            } => self.sidecar_tick(site, run, periodic),
            Event::LeaseRenew { site, run } => self.lease_renew(site, run),
            Event::LeaseRequestArrives {
                from,
                to,
                request,
                round,
                run,
            } => self.lease_request_arrives(from, to, &request, round, run),
            Event::LeaseResponseArrives {
                from,
                to,
                response,
                round,
                run,
            } => self.lease_response_arrives(from, to, &response, round, run),
            Event::OperatorPoll { run } => self.operator_poll(run),
            Event::LateMutation(mutation) => self.late_mutation(mutation),
            Event::Fault(fault) => self.fault(fault),
            Event::DeadlineSwitch { site, run } => self.deadline_switch(site, run),
            Event::WatchdogCheck { site, run } => self.watchdog_check(site, run),
            Event::MysqldRestart { site, run } => self.mysqld_restart_after_kill(site, run),
            Event::PodKill { site, generation } => self.pod_kill(site, generation),
            Event::PodRecreate { site, generation } => self.pod_recreate(site, generation),
            Event::SidecarLivenessRestart { site, run, hang } => {
                self.sidecar_liveness_restart(site, run, hang);
            }
            Event::HeldWrite { connection } => self.held_write(connection),
            Event::HeldReconnect { connection } => self.held_reconnect(connection),
            Event::ImageChange => self.image_change(),
            Event::RejoinWatch => self.rejoin_watch(),
            Event::ArchiveDone { site, seq } => self.archive_done(site, seq),
            Event::ReseedLoad { site, seq } => self.reseed_load(site, seq),
            Event::ReseedDone { site, seq } => self.reseed_done(site, seq),
        }
    }

    fn check_step(&mut self) {
        for site in 0..self.sites.len() {
            let agentless = self.sites[site].frozen && !self.sidecars[site].serving();
            let kubelet_cut = !self.kubelet_connected(site);
            self.checker
                .on_agentless_freeze(self.now, site, agentless, kubelet_cut);
        }
        let accepts: Vec<bool> = self.sites.iter().map(Site::accepts_writes).collect();
        let executed: Vec<&crate::gtid::TxnSet> = self.sites.iter().map(|s| &s.executed).collect();
        self.checker.on_step(self.now, &accepts, &executed);
        if let Some(cause) = self.data_removed.take() {
            self.check_acknowledged_kept(&cause);
        }
        for site in 0..self.sites.len() {
            self.check_rejoin_jobs_running(site);
        }
        self.check_liveness();
    }

    /// A uniformly drawn one-way network latency.
    pub fn latency(&mut self) -> u64 {
        self.rng
            .random_range(crate::network::LATENCY_MILLIS_MIN..=crate::network::LATENCY_MILLIS_MAX)
    }

    /// An exponentially distributed delay with the given mean, at least 1 ms.
    ///
    /// Integer arithmetic only (see [`crate::clock::neg_ln_fixed`]): a libm `ln` may differ by an
    /// ulp between platforms, and a run must replay from (seed, commit) anywhere.
    pub fn exponential(&mut self, mean_millis: u64) -> u64 {
        let uniform = self.rng.random_range(1..=crate::clock::UNIT_FIXED);
        let scaled = u128::from(crate::clock::neg_ln_fixed(uniform)) * u128::from(mean_millis)
            / u128::from(crate::clock::UNIT_FIXED);
        u64::try_from(scaled).unwrap_or(u64::MAX).max(1)
    }

    fn replication_pull(&mut self, site: usize) {
        let delay = if self.rng.random_bool(0.01) {
            self.rng.random_range(1_000..6_000)
        } else {
            self.rng.random_range(20..200)
        };
        self.schedule_in(delay, Event::ReplicationPull { site });
        let Some(source) = self.sites[site].source else {
            return;
        };
        if !self.sites[site].replicating()
            || !self.sites[source].answers()
            || !self.net.connected(site, source)
            || source == site
        {
            return;
        }
        let source_executed = self.sites[source].executed.clone();
        let now = self.now;
        let arrived = self.sites[site].receive_from(&source_executed, now);
        if arrived > 0 {
            let apply = if self.rng.random_bool(0.02) {
                self.rng.random_range(1_000..5_000)
            } else {
                self.rng.random_range(0..300)
            };
            self.schedule_in(apply, Event::RelayApply { site });
        }
    }

    fn relay_apply(&mut self, site: usize) {
        self.sites[site].apply_relay();
    }

    fn finish(&mut self) {
        self.checker.judge_authority_history(self.now);
        self.check_update_complete();
        trace!(
            self.trace,
            self.now,
            "world",
            "end: {} acked writes, {} refused, {} promotions, {} polls, {} events",
            self.stats.acked_writes,
            self.stats.refused_writes,
            self.stats.promotions,
            self.stats.polls,
            self.stats.events
        );
    }
}

/// The text of a panic's payload (`panic!` with a literal or with format arguments).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a text payload".to_string()
    }
}

/// Runs one seed to completion.
pub fn run(cfg: &SimConfig) -> RunOutcome {
    World::new(cfg.clone()).run()
}
