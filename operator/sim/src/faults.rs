//! The fault schedule: crashes, partitions, operator outages, planned failover requests and the
//! deploy pipeline, all drawn from the run's PRNG at bootstrap; with their flags, also sidecar
//! crashes and hangs and mysqld freezes (SIGSTOP), some of them together on one site.
//!
//! Faults of one process do not overlap on one site (a frozen mysqld is not crashed as well);
//! faults of mysqld and of its sidecar may.
//!
//! Faults start only before the quiet tail of the run and last at most
//! [`FAULT_DURATION_MILLIS_MAX`], so every run ends with a healed world long enough to check
//! liveness ([`crate::invariants::LIVENESS_BOUND_MILLIS`]).

use crate::clock::SimTime;
use crate::invariants::{FindingClass, LIVENESS_BOUND_MILLIS};
use crate::network::{isolate, Partition, OPERATOR_NODE, SITE_COUNT};
use crate::trace;
use crate::world::{Event, World, SITE_NAMES};
use rand::Rng;
use std::collections::BTreeSet;

/// First fault no earlier than this, so the group bootstraps undisturbed.
pub const FAULTS_START_MILLIS: u64 = 20_000;

/// Mean time between fault starts.
pub const FAULT_INTERVAL_MILLIS_MEAN: u64 = 25_000;

/// Longest fault.
pub const FAULT_DURATION_MILLIS_MAX: u64 = 60_000;

/// Longest span of a cascade (active dies, operator restarts, new active dies).
pub const CASCADE_SPAN_MILLIS_MAX: u64 = 20_000 + 3_000 + 6_000 + FAULT_DURATION_MILLIS_MAX;

/// Faults stop starting this long before the end of the run: long enough for the last one to
/// heal and for the liveness bound to elapse after it.
pub const QUIET_TAIL_MILLIS: u64 = CASCADE_SPAN_MILLIS_MAX + LIVENESS_BOUND_MILLIS + 5_000;

/// Faults drawn per run at most (a bound on the schedule, not a target).
pub const FAULTS_PER_RUN_MAX: usize = 200;

/// With `--mysqld-freeze` and a sidecar fault mode: the share of freezes whose site's sidecar
/// also crashes or hangs (the double fault nothing inside the pod can fence: mysqld cannot run
/// its deadline event, and its sidecar can neither fence nor kill it).
pub const AGENTLESS_FREEZE_PROBABILITY: f64 = 0.25;

/// The sidecar fault of such a pair starts up to this long after the freeze.
pub const AGENTLESS_OFFSET_MILLIS_MAX: u64 = 3_000;

/// Fault ids of a freeze's sidecar fault: the freeze's id plus this (fault ids are below
/// [`FAULTS_PER_RUN_MAX`], cascade ids are multiples of 1000 plus 1-3).
pub const AGENTLESS_ID_OFFSET: u64 = 500;

/// One scheduled fault or external action.
#[derive(Debug, Clone)]
pub enum FaultEvent {
    /// mysqld of a site crashes; it restarts when the fault heals.
    MysqldCrash {
        /// Fault id.
        id: u64,
        /// The site.
        site: usize,
    },
    /// The sidecar process alone dies (opt-in, `--sidecar-crash`): mysqld keeps running in
    /// whatever state it was, with only its write deadline to fence it; the sidecar restarts
    /// when the fault heals, with no cached authority (startup safety net).
    SidecarCrash {
        /// Fault id.
        id: u64,
        /// The site.
        target: Target,
    },
    /// The sidecar process hangs (opt-in, `--sidecar-hang`): alive, answering and executing
    /// nothing, until the fault heals (it resumes where it stopped) or its liveness probe
    /// restarts it.
    SidecarHang {
        /// Fault id.
        id: u64,
        /// The site.
        target: Target,
    },
    /// mysqld is frozen (opt-in, `--mysqld-freeze`, SIGSTOP) until the fault heals (SIGCONT)
    /// or the watchdog kills it.
    MysqldFreeze {
        /// Fault id.
        id: u64,
        /// The site.
        target: Target,
    },
    /// The whole pod (mysqld and sidecar) dies; both restart when the fault heals.
    PodCrash {
        /// Fault id.
        id: u64,
        /// The site.
        site: usize,
    },
    /// Links are cut.
    Partition {
        /// Fault id.
        id: u64,
        /// The cut.
        partition: Partition,
    },
    /// The operator process dies; it restarts when the fault heals.
    OperatorCrash {
        /// Fault id.
        id: u64,
    },
    /// The pod of whichever site is active when the fault fires dies (the target is resolved
    /// then, from the DNS record the clients follow).
    ActivePodCrash {
        /// Fault id.
        id: u64,
    },
    /// A fault ends.
    Heal {
        /// Fault id.
        id: u64,
    },
    /// The operator loses sight of whichever site is active when the fault fires, while that
    /// site stays healthy and connected to its peers: the case the lease wait exists for.
    ActiveOperatorCut {
        /// Fault id.
        id: u64,
    },
    /// A human requests a planned failover to whichever read-write site is not active when
    /// the request fires.
    PlannedFailoverAway,
    /// A human (or `kubectl bloodraven promote`) requests a planned failover to `site`.
    PlannedFailoverRequest {
        /// Target site.
        site: usize,
    },
    /// A human annotates `bloodraven.shipstream.io/revoke-deployment-leases`.
    RevokeAnnotation,
    /// `kubectl bloodraven backup <group> --name <name>` (`--restore`).
    BackupRequest {
        /// The backup's name.
        name: String,
    },
    /// `kubectl bloodraven restore <group> --from <name> [--method physical]` (`--restore`).
    RestoreRequest {
        /// The backup to restore from.
        name: String,
        /// Logical or physical (the annotation's `,method=`).
        method: bloodraven_api::RestoreMethod,
    },
    /// The deploy pipeline starts a migration: takes the mutex, then the failover-hold.
    PipelineStart,
    /// The deploy pipeline's heartbeat.
    PipelineHeartbeat {
        /// The pipeline operation this heartbeat belongs to.
        operation: u64,
    },
    /// The deploy pipeline finishes and releases its leases.
    PipelineFinish {
        /// The pipeline operation.
        operation: u64,
    },
}

/// Which site a process fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// This site.
    Site(usize),
    /// Whichever site holds the newest authority when the fault fires.
    Active,
}

/// The process faults `--sidecar-crash`, `--sidecar-hang` and `--mysqld-freeze` add to mysqld
/// crashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProcessFault {
    MysqldCrash,
    SidecarCrash,
    SidecarHang,
    MysqldFreeze,
}

/// What a fault in force is, so its heal can undo it.
#[derive(Debug, Clone)]
enum ActiveFault {
    MysqldCrash(usize),
    SidecarCrash(usize),
    SidecarHang(usize),
    MysqldFreeze(usize),
    PodCrash(usize),
    Partition(Partition),
    OperatorCrash,
}

/// Faults in force.
#[derive(Debug, Default)]
pub struct FaultState {
    active: Vec<(u64, ActiveFault)>,
    healed_since: Option<SimTime>,
    liveness_checked: bool,
    /// Some site accepted writes at some instant since `healed_since`.
    writable_since_heal: bool,
    /// Sites whose mysqld a fault holds (crashed, frozen, or its pod down).
    mysqld_faulted: BTreeSet<usize>,
    /// Sites whose sidecar a fault holds (crashed, hung, or its pod down).
    sidecar_faulted: BTreeSet<usize>,
}

/// The deploy pipeline's own state (the client side of docs/design/requirements.md R003).
#[derive(Debug, Default)]
pub struct PipelineState {
    /// The current operation number; zero when idle.
    pub operation: u64,
    /// Operations started so far.
    pub sequence: u64,
    /// Credentials held, with the generation each was granted under.
    pub held: Vec<(bloodraven_core::deploy::LeaseCredentials, u64)>,
    /// Heartbeat interval: ttl / 3.
    pub heartbeat_millis: u64,
}

impl FaultState {
    /// Whether the fault schedule has nothing in force.
    pub fn none_active(&self) -> bool {
        self.active.is_empty()
    }

    /// Whether a fault holds the site's mysqld (crash, freeze, pod crash).
    pub fn mysqld_faulted(&self, site: usize) -> bool {
        self.mysqld_faulted.contains(&site)
    }

    /// Whether a fault holds the site's sidecar (crash, hang, pod crash).
    pub fn sidecar_faulted(&self, site: usize) -> bool {
        self.sidecar_faulted.contains(&site)
    }

    /// Whether a crash fault keeps the site's mysqld down until it heals (a freeze does not:
    /// a frozen mysqld the watchdog killed is restarted by the kubelet).
    pub fn mysqld_kept_down(&self, site: usize) -> bool {
        self.active.iter().any(|(_, fault)| {
            matches!(fault, ActiveFault::MysqldCrash(s) | ActiveFault::PodCrash(s) if *s == site)
        })
    }
}

impl World {
    /// With `--restore`: two backups of the active site, each restored in place later; the
    /// pipeline (and its failover-hold) often starts just before a restore request. Drawn
    /// after the fault schedule, so runs without `--restore` are unchanged.
    fn schedule_restores(&mut self, last_start: u64) {
        let mut at = FAULTS_START_MILLIS;
        for round in 1..=2u64 {
            at += self.rng.random_range(20_000..=120_000);
            let restore_at = at + self.rng.random_range(10_000..=60_000);
            if restore_at >= last_start {
                break;
            }
            let name = format!("b{round}");
            self.schedule_at(
                SimTime(at),
                Event::Fault(FaultEvent::BackupRequest { name: name.clone() }),
            );
            if self.rng.random_bool(0.5) {
                let lead = self.rng.random_range(0..=5_000);
                self.schedule_at(
                    SimTime(restore_at.saturating_sub(lead)),
                    Event::Fault(FaultEvent::PipelineStart),
                );
            }
            // The second round restores from the copy: no draw from the generator, so the
            // schedule of every seed stays what it was.
            let method = if round == 2 {
                bloodraven_api::RestoreMethod::Physical
            } else {
                bloodraven_api::RestoreMethod::Logical
            };
            self.schedule_at(
                SimTime(restore_at),
                Event::Fault(FaultEvent::RestoreRequest { name, method }),
            );
            at = restore_at;
        }
    }

    /// Draws the whole fault schedule of the run.
    pub fn schedule_faults(&mut self) {
        let last_start = self
            .cfg
            .duration
            .as_millis()
            .saturating_sub(QUIET_TAIL_MILLIS);
        let mut at = FAULTS_START_MILLIS;
        for index in 0..FAULTS_PER_RUN_MAX {
            at += self.exponential(FAULT_INTERVAL_MILLIS_MEAN);
            if at >= last_start {
                break;
            }
            let id = index as u64 + 1;
            let duration = self.rng.random_range(1_000..=FAULT_DURATION_MILLIS_MAX);
            let roll = self.rng.random_range(0..100u32);
            let fault = match roll {
                0..=17 => match self.process_fault() {
                    ProcessFault::MysqldCrash => FaultEvent::MysqldCrash {
                        id,
                        site: self.weighted_site(),
                    },
                    ProcessFault::SidecarCrash => FaultEvent::SidecarCrash {
                        id,
                        target: self.process_target(),
                    },
                    ProcessFault::SidecarHang => FaultEvent::SidecarHang {
                        id,
                        target: self.process_target(),
                    },
                    ProcessFault::MysqldFreeze => {
                        let target = self.process_target();
                        if self.rng.random_bool(AGENTLESS_FREEZE_PROBABILITY) {
                            if let Some(agent) = self.agent_fault(id, target) {
                                // The same site's sidecar fails too, a little before or after.
                                let offset = self.rng.random_range(0..=AGENTLESS_OFFSET_MILLIS_MAX);
                                let agent_duration =
                                    self.rng.random_range(1_000..=FAULT_DURATION_MILLIS_MAX);
                                self.schedule_at(SimTime(at + offset), Event::Fault(agent));
                                self.schedule_at(
                                    SimTime(at + offset + agent_duration),
                                    Event::Fault(FaultEvent::Heal {
                                        id: id + AGENTLESS_ID_OFFSET,
                                    }),
                                );
                            }
                        }
                        FaultEvent::MysqldFreeze { id, target }
                    }
                },
                18..=31 => FaultEvent::PodCrash {
                    id,
                    site: self.weighted_site(),
                },
                32..=47 => FaultEvent::Partition {
                    id,
                    partition: self.random_partition(),
                },
                48..=55 => FaultEvent::ActiveOperatorCut { id },
                56..=64 => FaultEvent::OperatorCrash { id },
                65..=74 => {
                    self.schedule_cascade(at, id);
                    continue;
                }
                75..=87 => {
                    let site = self.rng.random_range(0..2);
                    self.schedule_at(
                        SimTime(at),
                        Event::Fault(FaultEvent::PlannedFailoverRequest { site }),
                    );
                    continue;
                }
                88..=96 => {
                    self.schedule_at(SimTime(at), Event::Fault(FaultEvent::PipelineStart));
                    continue;
                }
                _ => {
                    self.schedule_at(SimTime(at), Event::Fault(FaultEvent::RevokeAnnotation));
                    continue;
                }
            };
            self.schedule_at(SimTime(at), Event::Fault(fault));
            self.schedule_at(
                SimTime(at + duration),
                Event::Fault(FaultEvent::Heal { id }),
            );
        }
        if self.cfg.restore {
            self.schedule_restores(last_start);
        }
    }

    /// A cascade: the active site dies, the operator restarts soon after the failover, and the
    /// new active site dies inside the cooldown. With `--state-loss` this is where a restart
    /// that lost both cooldown copies promotes early (the inherent finding of
    /// docs/design/requirements.md R001.10); without it the cooldown must hold the second
    /// failover back.
    fn schedule_cascade(&mut self, at: u64, id: u64) {
        let base = id * 1_000;
        if self.rng.random_bool(0.5) {
            // The first move is a crash: the old primary usually returns with errant
            // transactions, and the GTID gate (not the cooldown) must keep it from promotion.
            let first_down = self.rng.random_range(15_000..=FAULT_DURATION_MILLIS_MAX);
            self.schedule_at(
                SimTime(at),
                Event::Fault(FaultEvent::ActivePodCrash { id: base + 1 }),
            );
            self.schedule_at(
                SimTime(at + first_down),
                Event::Fault(FaultEvent::Heal { id: base + 1 }),
            );
        } else {
            // The first move is a planned failover: the old primary rejoins as a clean replica,
            // so only the cooldown stands between a second failure and a second promotion.
            self.schedule_at(SimTime(at), Event::Fault(FaultEvent::PlannedFailoverAway));
        }
        let operator_at = at + self.rng.random_range(14_000..=20_000);
        let operator_down = self.rng.random_range(500..=3_000);
        self.schedule_at(
            SimTime(operator_at),
            Event::Fault(FaultEvent::OperatorCrash { id: base + 2 }),
        );
        self.schedule_at(
            SimTime(operator_at + operator_down),
            Event::Fault(FaultEvent::Heal { id: base + 2 }),
        );
        let second_at = operator_at + operator_down + self.rng.random_range(1_000..=6_000);
        let second_down = self.rng.random_range(10_000..=FAULT_DURATION_MILLIS_MAX);
        self.schedule_at(
            SimTime(second_at),
            Event::Fault(FaultEvent::ActivePodCrash { id: base + 3 }),
        );
        self.schedule_at(
            SimTime(second_at + second_down),
            Event::Fault(FaultEvent::Heal { id: base + 3 }),
        );
    }

    /// Which process fault the 18% band draws: mysqld crashes, and each process fault whose flag
    /// is on, equally likely.
    fn process_fault(&mut self) -> ProcessFault {
        let mut kinds = vec![ProcessFault::MysqldCrash];
        if self.cfg.sidecar_crash {
            kinds.push(ProcessFault::SidecarCrash);
        }
        if self.cfg.sidecar_hang {
            kinds.push(ProcessFault::SidecarHang);
        }
        if self.cfg.mysqld_freeze {
            kinds.push(ProcessFault::MysqldFreeze);
        }
        if kinds.len() == 1 {
            return ProcessFault::MysqldCrash;
        }
        kinds[self.rng.random_range(0..kinds.len())]
    }

    /// The target of a sidecar or freeze fault: the active site half the time (where these
    /// faults bite), else a weighted site.
    fn process_target(&mut self) -> Target {
        if self.rng.random_bool(0.5) {
            Target::Active
        } else {
            Target::Site(self.weighted_site())
        }
    }

    /// A sidecar fault to go with a freeze on `target` (crash or hang, among the modes on).
    fn agent_fault(&mut self, id: u64, target: Target) -> Option<FaultEvent> {
        let id = id + AGENTLESS_ID_OFFSET;
        match (self.cfg.sidecar_crash, self.cfg.sidecar_hang) {
            (false, false) => None,
            (true, false) => Some(FaultEvent::SidecarCrash { id, target }),
            (false, true) => Some(FaultEvent::SidecarHang { id, target }),
            (true, true) => Some(if self.rng.random_bool(0.5) {
                FaultEvent::SidecarCrash { id, target }
            } else {
                FaultEvent::SidecarHang { id, target }
            }),
        }
    }

    /// The site a process fault hits now.
    fn resolve(&self, target: Target) -> Option<usize> {
        match target {
            Target::Site(site) => Some(site),
            Target::Active => self.newest_active_site(),
        }
    }

    /// A site, the read-write ones (the interesting ones) more often than the reader.
    fn weighted_site(&mut self) -> usize {
        match self.rng.random_range(0..10u32) {
            0..=4 => 0,
            5..=7 => 1,
            _ => 2,
        }
    }

    fn random_partition(&mut self) -> Partition {
        match self.rng.random_range(0..5u32) {
            0 | 1 => {
                let site = self.weighted_site();
                Partition {
                    links: isolate(site),
                    label: format!("{} isolated", SITE_NAMES[site]),
                }
            }
            2 => {
                let a = self.rng.random_range(0..SITE_COUNT);
                let b = (a + self.rng.random_range(1..SITE_COUNT)) % SITE_COUNT;
                Partition {
                    links: vec![(a, b)],
                    label: format!("{}-{} cut", SITE_NAMES[a], SITE_NAMES[b]),
                }
            }
            3 => {
                let site = self.weighted_site();
                Partition {
                    links: vec![(site, OPERATOR_NODE)],
                    label: format!("operator-{} cut", SITE_NAMES[site]),
                }
            }
            _ => Partition {
                links: isolate(OPERATOR_NODE),
                label: "operator isolated".to_string(),
            },
        }
    }

    /// The pod of `site` was deleted and its containers killed: the process faults of that
    /// pod end with it (their heal events find nothing left to heal); partitions stay.
    pub fn end_process_faults(&mut self, site: usize) {
        self.faults.active.retain(|(_, fault)| match fault {
            ActiveFault::MysqldCrash(s)
            | ActiveFault::SidecarCrash(s)
            | ActiveFault::SidecarHang(s)
            | ActiveFault::MysqldFreeze(s)
            | ActiveFault::PodCrash(s) => *s != site,
            ActiveFault::Partition(_) | ActiveFault::OperatorCrash => true,
        });
        self.faults.mysqld_faulted.remove(&site);
        self.faults.sidecar_faulted.remove(&site);
    }

    /// Executes one scheduled fault or external action.
    pub fn fault(&mut self, fault: FaultEvent) {
        match fault {
            FaultEvent::MysqldCrash { id, site } => {
                if self.faults.mysqld_faulted(site) || !self.sites[site].mysqld_up {
                    return;
                }
                trace!(
                    self.trace,
                    self.now,
                    "fault",
                    "mysqld on {} crashes",
                    SITE_NAMES[site]
                );
                self.stop_mysqld(site);
                self.faults.mysqld_faulted.insert(site);
                self.faults
                    .active
                    .push((id, ActiveFault::MysqldCrash(site)));
            }
            FaultEvent::SidecarCrash { id, target } => {
                let Some(site) = self.resolve(target) else {
                    return;
                };
                if self.faults.sidecar_faulted(site) {
                    return;
                }
                trace!(
                    self.trace,
                    self.now,
                    "fault",
                    "sidecar of {} dies (mysqld keeps running)",
                    SITE_NAMES[site]
                );
                self.stop_sidecar(site);
                self.faults.sidecar_faulted.insert(site);
                self.faults
                    .active
                    .push((id, ActiveFault::SidecarCrash(site)));
            }
            FaultEvent::SidecarHang { id, target } => {
                let Some(site) = self.resolve(target) else {
                    return;
                };
                if self.faults.sidecar_faulted(site) || !self.sidecars[site].up() {
                    return;
                }
                trace!(
                    self.trace,
                    self.now,
                    "fault",
                    "sidecar of {} hangs (alive, executing nothing)",
                    SITE_NAMES[site]
                );
                self.hang_sidecar(site);
                self.faults.sidecar_faulted.insert(site);
                self.faults
                    .active
                    .push((id, ActiveFault::SidecarHang(site)));
            }
            FaultEvent::MysqldFreeze { id, target } => {
                let Some(site) = self.resolve(target) else {
                    return;
                };
                if self.faults.mysqld_faulted(site) || !self.sites[site].mysqld_up {
                    return;
                }
                trace!(
                    self.trace,
                    self.now,
                    "fault",
                    "mysqld on {} frozen (SIGSTOP, {})",
                    SITE_NAMES[site],
                    if self.sites[site].read_only {
                        "read-only"
                    } else {
                        "writable"
                    }
                );
                self.freeze_mysqld(site);
                self.faults.mysqld_faulted.insert(site);
                self.faults
                    .active
                    .push((id, ActiveFault::MysqldFreeze(site)));
            }
            FaultEvent::PodCrash { id, site } => {
                if self.faults.mysqld_faulted(site) || self.faults.sidecar_faulted(site) {
                    return;
                }
                trace!(
                    self.trace,
                    self.now,
                    "fault",
                    "pod of {} dies (mysqld and sidecar)",
                    SITE_NAMES[site]
                );
                // The sidecar dies with mysqld: a job it ran is cut off, not failed.
                self.archive_sidecar_stopped(site);
                self.reseed_sidecar_stopped(site);
                self.stop_mysqld(site);
                self.stop_sidecar(site);
                self.faults.mysqld_faulted.insert(site);
                self.faults.sidecar_faulted.insert(site);
                self.faults.active.push((id, ActiveFault::PodCrash(site)));
            }
            FaultEvent::ActivePodCrash { id } => {
                let Some(site) = self.newest_active_site() else {
                    return;
                };
                self.fault(FaultEvent::PodCrash { id, site });
                return;
            }
            FaultEvent::Partition { id, partition } => {
                trace!(
                    self.trace,
                    self.now,
                    "fault",
                    "partition: {}",
                    partition.label
                );
                self.net.apply(&partition);
                self.faults
                    .active
                    .push((id, ActiveFault::Partition(partition)));
            }
            FaultEvent::OperatorCrash { id } => {
                if !self.operator.up {
                    return;
                }
                trace!(self.trace, self.now, "fault", "operator crashes");
                self.stop_operator();
                self.faults.active.push((id, ActiveFault::OperatorCrash));
            }
            FaultEvent::Heal { id } => self.heal(id),
            FaultEvent::ActiveOperatorCut { id } => {
                let Some(site) = self.newest_active_site() else {
                    return;
                };
                let partition = Partition {
                    links: vec![(site, OPERATOR_NODE)],
                    label: format!("operator-{} cut (active)", SITE_NAMES[site]),
                };
                self.fault(FaultEvent::Partition { id, partition });
                return;
            }
            FaultEvent::PlannedFailoverAway => {
                let active = self.newest_active_site();
                let Some(site) = (0..2).find(|&site| Some(site) != active) else {
                    return;
                };
                self.fault(FaultEvent::PlannedFailoverRequest { site });
                return;
            }
            FaultEvent::PlannedFailoverRequest { site } => {
                trace!(
                    self.trace,
                    self.now,
                    "human",
                    "annotates planned-failover={}",
                    SITE_NAMES[site]
                );
                self.store.request_planned_failover(SITE_NAMES[site]);
            }
            FaultEvent::BackupRequest { name } => {
                trace!(self.trace, self.now, "human", "annotates backup={name}");
                self.store
                    .annotations
                    .insert(bloodraven_api::names::ANNOTATION_BACKUP.to_string(), name);
            }
            FaultEvent::RestoreRequest { name, method } => {
                let value = bloodraven_api::RestoreSource {
                    backup: name,
                    method,
                }
                .annotation_value();
                trace!(self.trace, self.now, "human", "annotates restore={value}");
                self.store
                    .annotations
                    .insert(bloodraven_api::names::ANNOTATION_RESTORE.to_string(), value);
            }
            FaultEvent::RevokeAnnotation => {
                trace!(
                    self.trace,
                    self.now,
                    "human",
                    "annotates revoke-deployment-leases"
                );
                self.store.annotations.insert(
                    bloodraven_api::names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES.to_string(),
                    "true".to_string(),
                );
            }
            FaultEvent::PipelineStart => self.pipeline_start(),
            FaultEvent::PipelineHeartbeat { operation } => self.pipeline_heartbeat(operation),
            FaultEvent::PipelineFinish { operation } => self.pipeline_finish(operation),
        }
        self.faults.healed_since = None;
        self.faults.liveness_checked = false;
        self.faults.writable_since_heal = false;
    }

    fn heal(&mut self, id: u64) {
        let Some(index) = self.faults.active.iter().position(|(fid, _)| *fid == id) else {
            return;
        };
        let (_, fault) = self.faults.active.remove(index);
        match fault {
            ActiveFault::MysqldCrash(site) => {
                trace!(
                    self.trace,
                    self.now,
                    "heal",
                    "mysqld on {} restarts (read-only)",
                    SITE_NAMES[site]
                );
                self.faults.mysqld_faulted.remove(&site);
                if !self.sites[site].mysqld_up {
                    self.start_mysqld(site);
                }
            }
            ActiveFault::SidecarCrash(site) => {
                trace!(
                    self.trace,
                    self.now,
                    "heal",
                    "sidecar of {} restarts (no authority)",
                    SITE_NAMES[site]
                );
                self.faults.sidecar_faulted.remove(&site);
                self.start_sidecar(site);
            }
            ActiveFault::SidecarHang(site) => {
                trace!(
                    self.trace,
                    self.now,
                    "heal",
                    "sidecar of {} un-hangs",
                    SITE_NAMES[site]
                );
                self.faults.sidecar_faulted.remove(&site);
                self.resume_sidecar(site);
            }
            ActiveFault::MysqldFreeze(site) => {
                trace!(
                    self.trace,
                    self.now,
                    "heal",
                    "SIGCONT to mysqld on {}{}",
                    SITE_NAMES[site],
                    if self.sites[site].frozen {
                        ""
                    } else {
                        " (no longer frozen: killed)"
                    }
                );
                self.faults.mysqld_faulted.remove(&site);
                self.thaw_mysqld(site);
            }
            ActiveFault::PodCrash(site) => {
                trace!(
                    self.trace,
                    self.now,
                    "heal",
                    "pod of {} restarts (read-only, no authority)",
                    SITE_NAMES[site]
                );
                self.faults.mysqld_faulted.remove(&site);
                self.faults.sidecar_faulted.remove(&site);
                if !self.sites[site].mysqld_up {
                    self.start_mysqld(site);
                }
                self.start_sidecar(site);
            }
            ActiveFault::Partition(partition) => {
                trace!(
                    self.trace,
                    self.now,
                    "heal",
                    "partition healed: {}",
                    partition.label
                );
                self.net.heal(&partition);
            }
            ActiveFault::OperatorCrash => {
                trace!(self.trace, self.now, "heal", "operator restarts");
                self.start_operator();
            }
        }
    }

    /// The site named by the newest authority the operator ever pushed (ground truth of
    /// "the active site", whatever the status or DNS currently say).
    pub fn newest_active_site(&self) -> Option<usize> {
        self.operator.active_of_max_generation
    }

    /// Liveness after heal: once nothing is in force, a writable site must appear within
    /// [`LIVENESS_BOUND_MILLIS`]: at some instant of the bound, not at its last one (a
    /// planned failover's drain, the ordered update's included, is a few seconds without a
    /// writable site by design; sampling only the bound's last instant reported one that fell
    /// there, seed 838 `--image-update`, although iad had been writable throughout before).
    pub fn check_liveness(&mut self) {
        let healed = self.faults.none_active() && self.operator.up && self.net.fully_connected();
        if !healed {
            self.faults.healed_since = None;
            self.faults.liveness_checked = false;
            self.faults.writable_since_heal = false;
            return;
        }
        let since = *self.faults.healed_since.get_or_insert(self.now);
        if self.sites.iter().any(crate::site::Site::accepts_writes) {
            self.faults.writable_since_heal = true;
        }
        if self.faults.liveness_checked || self.now.millis_since(since) < LIVENESS_BOUND_MILLIS {
            return;
        }
        self.faults.liveness_checked = true;
        if !self.faults.writable_since_heal {
            let detail = format!(
                "healed since {since}, no site writable at any instant of the {LIVENESS_BOUND_MILLIS} ms since; store \
                 names {:?} active",
                self.store.status_active_site()
            );
            self.checker
                .report(FindingClass::NoWritableAfterHeal, self.now, detail);
        }
    }
}
