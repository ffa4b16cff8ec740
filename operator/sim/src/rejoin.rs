//! Rejoin of fenced returning primaries in the simulated world (`--rejoin`;
//! docs/design/operator.md#returning-primary, core `engine::rejoin`).
//!
//! An emergency failover that lost writes leaves the old primary holding errant transactions;
//! it returns read-only and core keeps it `role=fenced`. With `--rejoin` each seed draws how it
//! is brought back: by `spec.returningPrimary.onErrant: rejoin` (the operator starts the
//! rejoin itself), or by a human's `kubectl bloodraven rejoin` (the annotation), at random
//! times after the site returns. In both, the human also asks at bad times: while a failover,
//! a failover-hold, a restore in place or an ordered update is in flight (naming a fenced
//! returning primary if one shows, else any site, which core refuses), and again after a
//! rejoin failed or was refused.
//!
//! The sidecars run the archive job (`POST /v1/archive`) as the real one does
//! (`operator/sidecar/src/archive.rs`): refused unless an explicit fence is in force, mysqld is
//! read-only and the site holds the whole errant set; an archive of that name that exists is
//! answered as done (same rejoin and set) or refused; another job running refuses it. The job
//! takes [`ARCHIVE_MILLIS_MIN`]..=[`ARCHIVE_MILLIS_MAX`] (the errant transactions' binlog events
//! and a full logical dump of the playground's small database), stalls while mysqld is frozen
//! or the sidecar hung, fails when mysqld stops (no archive is left), and is cut off when the
//! sidecar dies (the restarted sidecar reports the job its volume recorded last, so the
//! operator asks again and the archive starts over). A completed archive stays on the site's
//! volume whatever happens to its data after.
//!
//! A rejoin's re-seed (`POST /v1/reseed` under a rejoin id; a restore's re-seeds stay
//! instant, `crate::restore`) runs for as long: it stops replication, dumps the source (the
//! source's set when the job starts; it fails if the source is gone when the dump ends), loads
//! the dump (the site's data is replaced from the load's start: a job that fails or is cut off
//! after it leaves the site holding the dump, not replicating), then replicates from the
//! source. A quarter of the archive and re-seed jobs started before the quiet tail get a crash
//! of the site's mysqld, pod or sidecar (with their modes also a sidecar hang or a mysqld
//! freeze) at a random point of their run.
//!
//! Invariants (`crate::invariants`): `DiscardedUnarchived` (no acknowledged write leaves every
//! site without being in an archive), `ErrantSiteUsed` (a site holding errant transactions is
//! never promoted, nor labelled primary or a healthy replica), `RejoinOnWritable` (a rejoin's
//! archive or re-seed is never asked of, nor runs on, a site that is or might be writable).

use std::collections::BTreeSet;

use bloodraven_api::names;
use bloodraven_api::sidecar::{ArchiveRequest, JobKind, JobState, JobStatus, ReseedRequest};
use bloodraven_api::{OnErrant, PlannedFailoverPhase, RejoinPhase, RestorePhase};
use bloodraven_core::engine::{Decision, GroupMemory, PodRole};
use bloodraven_mysql::{Flavor, GtidSet};
use rand::Rng;

use crate::clock::SimTime;
use crate::faults::{FaultEvent, Target, FAULTS_START_MILLIS, QUIET_TAIL_MILLIS};
use crate::gtid::TxnSet;
use crate::invariants::PromotionKind;
use crate::sidecar::wall;
use crate::store::GROUP;
use crate::trace;
use crate::world::{Event, World, SITE_NAMES};

/// Shortest archive job (a rejoin's re-seed draws from the same range).
pub const ARCHIVE_MILLIS_MIN: u64 = 3_000;
/// Longest archive job (and re-seed).
pub const ARCHIVE_MILLIS_MAX: u64 = 60_000;
/// How soon a job stalled by a frozen mysqld or a hung sidecar looks again.
const JOB_STALL_RETRY_MILLIS: u64 = 500;
/// Share of seeds whose group runs `onErrant: rejoin`; the others wait for the annotation.
pub const AUTOMATIC_PROBABILITY: f64 = 0.5;
/// Mean time between two looks of the human at the group.
pub const WATCH_INTERVAL_MILLIS_MEAN: u64 = 8_000;
/// Probability that a look at a fenced returning primary with errant transactions, and no
/// rejoin of it under way, ends in `kubectl bloodraven rejoin`.
pub const REQUEST_PROBABILITY: f64 = 0.25;
/// Probability that a look while a failover, a failover-hold, a restore in place or an
/// ordered update is in flight ends in a request anyway.
pub const BAD_TIME_REQUEST_PROBABILITY: f64 = 0.15;
/// Share of archive and re-seed jobs (started before the quiet tail) a process fault hits
/// mid-way.
pub const JOB_FAULT_PROBABILITY: f64 = 0.25;
/// Longest such fault.
const JOB_FAULT_MILLIS_MAX: u64 = 30_000;
/// Fault ids of those faults start here (the schedule's ids are far below).
const JOB_FAULT_ID_BASE: u64 = 1_000_000;

/// An archive on a site's backups volume: the errant set its binlog file holds, and the dump
/// (everything the site had executed).
#[derive(Debug, Clone)]
pub struct Archive {
    /// `rejoin-<site>-<rejoin id>`.
    pub name: String,
    /// The rejoin it was written for.
    pub rejoin_id: u64,
    /// The errant transactions archived (the manifest's set).
    pub errant: TxnSet,
    /// What the full dump holds.
    pub dump: TxnSet,
}

/// An archive job in flight on a site.
#[derive(Debug, Clone)]
pub struct ArchiveRun {
    /// Identifies this run of the job (a job cut off and asked again is another run).
    pub seq: u64,
    /// The archive's name.
    pub name: String,
    /// The rejoin id.
    pub rejoin_id: u64,
    /// The errant set asked for.
    pub errant: TxnSet,
    /// Whether `RejoinOnWritable` was reported for this run already.
    pub writable_reported: bool,
}

/// A rejoin's re-seed job in flight on a site (`POST /v1/reseed` under a rejoin id): it
/// stops replication, dumps the source, loads the dump (the site's data replaced from the
/// load's start), then replicates from the source.
#[derive(Debug, Clone)]
pub struct ReseedRun {
    /// Identifies this run of the job.
    pub seq: u64,
    /// The job's name (`<source host>:<port>`).
    pub name: String,
    /// The rejoin id.
    pub restore_id: u64,
    /// The source site.
    pub source: usize,
    /// The dump's set (the source's, when the job started).
    pub dump: TxnSet,
    /// How long the load takes once the dump is taken.
    pub load_millis: u64,
    /// Whether the load started (the site holds the dump from then on).
    pub loading: bool,
    /// Whether `RejoinOnWritable` was reported for this run already.
    pub writable_reported: bool,
}

/// What the run tracks of rejoins.
#[derive(Debug, Default)]
pub struct RejoinTrack {
    /// The group runs `onErrant: rejoin`.
    pub automatic: bool,
    /// Every rejoin id the operator's memory named: a re-seed under one is a rejoin's.
    pub ids: BTreeSet<u64>,
    job_seq: u64,
}

/// Whether a rejoin in `phase` is under way (its site fenced for it, jobs on its sidecar).
fn under_way(phase: Option<RejoinPhase>) -> bool {
    matches!(phase, Some(RejoinPhase::Archiving | RejoinPhase::Reseeding))
}

fn phase_of(memory: &GroupMemory, site: &str) -> Option<RejoinPhase> {
    memory
        .site(site)
        .and_then(|entry| entry.rejoin.as_ref())
        .map(|rejoin| rejoin.status.phase)
}

impl World {
    /// With `--rejoin`: draws the seed's policy and starts the human's looks. Drawn after
    /// every other schedule, so runs without `--rejoin` keep their random streams.
    pub fn schedule_rejoins(&mut self) {
        if !self.cfg.rejoin {
            return;
        }
        self.rejoin.automatic = self.rng.random_bool(AUTOMATIC_PROBABILITY);
        if self.rejoin.automatic {
            self.operator.spec.returning_primary.on_errant = OnErrant::Rejoin;
        }
        let first = FAULTS_START_MILLIS + self.exponential(WATCH_INTERVAL_MILLIS_MEAN);
        self.schedule_at(SimTime(first), Event::RejoinWatch);
    }

    /// Why the human's timing is bad now (a failover, a failover-hold, a restore in place or
    /// an ordered update in flight), if it is.
    fn bad_time(&self) -> Option<&'static str> {
        let now = self.operator_now();
        if self.store.deploy.live_hold(now).is_some() {
            return Some("a failover-hold is live");
        }
        let annotations = &self.store.annotations;
        if annotations.contains_key(names::ANNOTATION_PLANNED_FAILOVER) {
            return Some("a planned failover is requested");
        }
        if annotations.contains_key(names::ANNOTATION_RESTORE) {
            return Some("a restore is requested");
        }
        let memory = self.operator.memory.as_ref()?;
        if memory.emergency_failover.is_some()
            || memory
                .last_failover
                .as_ref()
                .is_some_and(|failover| failover.completed_at.is_none())
        {
            return Some("a failover is in flight");
        }
        if memory.planned_failover.as_ref().is_some_and(|planned| {
            !matches!(
                planned.phase,
                PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected
            )
        }) {
            return Some("a planned failover is in flight");
        }
        if memory.restore.as_ref().is_some_and(|restore| {
            !matches!(
                restore.status.phase,
                RestorePhase::Completed | RestorePhase::Failed
            )
        }) {
            return Some("a restore in place is in flight");
        }
        if memory
            .ordered_update
            .as_ref()
            .is_some_and(|update| update.in_flight())
        {
            return Some("an ordered update is in flight");
        }
        None
    }

    /// The human looks at the group (`kubectl bloodraven status`): a fenced site with errant
    /// transactions whose rejoin is not under way may be rejoined; at a bad time any site
    /// may be named.
    pub fn rejoin_watch(&mut self) {
        let delay = self.exponential(WATCH_INTERVAL_MILLIS_MEAN);
        self.schedule_in(delay, Event::RejoinWatch);
        if self
            .store
            .annotations
            .contains_key(names::ANNOTATION_REJOIN)
        {
            return;
        }
        let automatic = self.rejoin.automatic;
        // What the status shows: fenced sites with errant transactions, or whose rejoin failed
        // (a re-seed that failed after its load leaves none), and their rejoins.
        let fenced: Vec<(usize, Option<(RejoinPhase, bool)>)> = self
            .store
            .status
            .as_ref()
            .map(|status| {
                status
                    .sites
                    .iter()
                    .filter(|site| site.role.as_deref() == Some("fenced"))
                    .filter(|site| {
                        site.errant_gtid_set.as_ref().is_some_and(|e| !e.is_empty())
                            || site
                                .rejoin
                                .as_ref()
                                .is_some_and(|r| r.phase == RejoinPhase::Failed)
                    })
                    .filter_map(|site| {
                        let index = SITE_NAMES.iter().position(|name| *name == site.name)?;
                        let rejoin = site.rejoin.as_ref().map(|r| (r.phase, r.automatic));
                        Some((index, rejoin))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let askable: Vec<usize> = fenced
            .iter()
            .filter(|(_, rejoin)| match rejoin {
                // The policy starts (and starts again after completion) by itself.
                None => !automatic,
                Some((phase, by_policy)) => match phase {
                    RejoinPhase::Completed => !automatic,
                    RejoinPhase::Failed => true,
                    RejoinPhase::Refused => !automatic || *by_policy,
                    RejoinPhase::Requested
                    | RejoinPhase::Deferred
                    | RejoinPhase::Archiving
                    | RejoinPhase::Reseeding => false,
                },
            })
            .map(|(site, _)| *site)
            .collect();
        let target = if let Some(why) = self.bad_time() {
            if !self.rng.random_bool(BAD_TIME_REQUEST_PROBABILITY) {
                return;
            }
            let site = match fenced.first() {
                Some((site, _)) => *site,
                None => self.rng.random_range(0..SITE_NAMES.len()),
            };
            (site, why)
        } else {
            let Some(&site) = askable.first() else {
                return;
            };
            if !self.rng.random_bool(REQUEST_PROBABILITY) {
                return;
            }
            (site, "a fenced returning primary with errant transactions")
        };
        let (site, why) = target;
        trace!(
            self.trace,
            self.now,
            "human",
            "annotates rejoin={} ({why})",
            SITE_NAMES[site]
        );
        self.stats.rejoin_requests += 1;
        self.store.annotations.insert(
            names::ANNOTATION_REJOIN.to_string(),
            SITE_NAMES[site].to_string(),
        );
    }

    /// Whether `site` is or might be writable: (`read_only` off on a running mysqld, frozen
    /// or not; its sidecar holding an authority naming it with a lease that counts).
    pub fn might_be_writable(&self, site: usize) -> (bool, bool) {
        let read_only_off = self.sites[site].writable_if_thawed();
        let sidecar = &self.sidecars[site];
        let lease_names_it = sidecar.lease.as_ref().is_some_and(|lease| {
            lease
                .authority()
                .is_some_and(|authority| authority.active_site.as_deref() == Some(SITE_NAMES[site]))
                && lease.lease_held(sidecar.mono(self.now))
        });
        (read_only_off, lease_names_it)
    }

    /// `RejoinOnWritable` for a rejoin's `what` on `site` now.
    pub fn check_rejoin_target(&mut self, site: usize, what: &str) {
        let (read_only_off, lease_names_it) = self.might_be_writable(site);
        let now = self.now;
        self.checker
            .check_rejoin_target(now, site, what, read_only_off, lease_names_it);
    }

    /// `POST /v1/archive` on the sidecar of `site` (the real sidecar's admission, in its
    /// order): `true` when accepted (started, running, or done already).
    pub fn sidecar_archive(&mut self, site: usize, request: &ArchiveRequest) -> bool {
        if request.group != GROUP || !self.sidecars[site].serving() {
            return false;
        }
        let Ok(parsed) = GtidSet::parse(Flavor::MariaDb, &request.errant_gtid_set) else {
            return false;
        };
        let errant = TxnSet::from_gtid_set(parsed);
        if errant.is_empty() {
            return false;
        }
        let jobs = &self.jobs[site];
        // Asked again for the job that runs or finished last: answered from the slot.
        if let Some(job) = jobs
            .job
            .as_ref()
            .filter(|job| job.is(JobKind::Archive, &request.name, request.rejoin_id))
        {
            return job
                .gtid_set
                .as_ref()
                .is_none_or(|running| *running == request.errant_gtid_set);
        }
        // An archive is never overwritten: the same one is answered as done.
        if let Some(existing) = jobs.archives.iter().find(|a| a.name == request.name) {
            if existing.rejoin_id != request.rejoin_id || existing.errant != errant {
                return false;
            }
            let mut status = archive_job(request, JobState::Running, self.now);
            status.state = JobState::Succeeded;
            status.finished_at = Some(wall(self.now));
            self.jobs[site].job = Some(status);
            return true;
        }
        let fenced = self.sidecars[site]
            .lease
            .as_ref()
            .is_some_and(|lease| lease.fence_state().is_some());
        let mysqld = &self.sites[site];
        if !fenced || !mysqld.answers() || !mysqld.read_only {
            return false;
        }
        if !errant.is_subset_of(&mysqld.executed) {
            return false;
        }
        if jobs
            .job
            .as_ref()
            .is_some_and(|job| job.state == JobState::Running)
        {
            return false;
        }
        self.rejoin.job_seq += 1;
        let seq = self.rejoin.job_seq;
        let duration = self
            .rng
            .random_range(ARCHIVE_MILLIS_MIN..=ARCHIVE_MILLIS_MAX);
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "archive {} of {} started ({} ms)",
            request.name,
            errant.describe(),
            duration
        );
        self.jobs[site].archive_run = Some(ArchiveRun {
            seq,
            name: request.name.clone(),
            rejoin_id: request.rejoin_id,
            errant,
            writable_reported: false,
        });
        self.jobs[site].job = Some(archive_job(request, JobState::Running, self.now));
        self.stats.archive_jobs_started += 1;
        self.check_rejoin_jobs_running(site);
        self.schedule_in(duration, Event::ArchiveDone { site, seq });
        self.maybe_fault_mid_job(site, duration);
        true
    }

    /// A quarter of the rejoin jobs (archive, re-seed) started before the quiet tail: a crash
    /// of the site's mysqld or pod (or, with their modes, of its sidecar alone, a hang, a
    /// freeze) at a random point of the job's run.
    fn maybe_fault_mid_job(&mut self, site: usize, duration: u64) {
        let last_start = self
            .cfg
            .duration
            .as_millis()
            .saturating_sub(QUIET_TAIL_MILLIS);
        if self.now.as_millis() >= last_start || !self.rng.random_bool(JOB_FAULT_PROBABILITY) {
            return;
        }
        let id = JOB_FAULT_ID_BASE + self.rejoin.job_seq;
        let target = Target::Site(site);
        let mut kinds = vec![
            FaultEvent::MysqldCrash { id, site },
            FaultEvent::PodCrash { id, site },
        ];
        if self.cfg.sidecar_crash {
            kinds.push(FaultEvent::SidecarCrash { id, target });
        }
        if self.cfg.sidecar_hang {
            kinds.push(FaultEvent::SidecarHang { id, target });
        }
        if self.cfg.mysqld_freeze {
            kinds.push(FaultEvent::MysqldFreeze { id, target });
        }
        let fault = kinds.swap_remove(self.rng.random_range(0..kinds.len()));
        let at = self.now.as_millis() + self.rng.random_range(0..duration.max(1));
        let lasts = self.rng.random_range(1_000..=JOB_FAULT_MILLIS_MAX);
        self.schedule_at(SimTime(at), Event::Fault(fault));
        self.schedule_at(SimTime(at + lasts), Event::Fault(FaultEvent::Heal { id }));
    }

    /// The archive job's run `seq` on `site` reaches its end: the archive is written, unless
    /// the job stalls (mysqld frozen, sidecar hung) or is over already.
    pub fn archive_done(&mut self, site: usize, seq: u64) {
        let Some(run) = self.jobs[site]
            .archive_run
            .clone()
            .filter(|run| run.seq == seq)
        else {
            return;
        };
        if self.sites[site].frozen || self.sidecars[site].hung {
            self.schedule_in(JOB_STALL_RETRY_MILLIS, Event::ArchiveDone { site, seq });
            return;
        }
        self.check_rejoin_jobs_running(site);
        let dump = self.sites[site].executed.clone();
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "archive {} written: errant {} and a dump at {}",
            run.name,
            run.errant.describe(),
            dump.describe()
        );
        self.checker.on_archived(&run.errant);
        self.jobs[site].archive_run = None;
        self.jobs[site].archives.push(Archive {
            name: run.name.clone(),
            rejoin_id: run.rejoin_id,
            errant: run.errant.clone(),
            dump,
        });
        let mut status = self.jobs[site]
            .job
            .clone()
            .filter(|job| job.is(JobKind::Archive, &run.name, run.rejoin_id))
            .unwrap_or_else(|| JobStatus {
                kind: JobKind::Archive,
                name: run.name.clone(),
                restore_id: run.rejoin_id,
                state: JobState::Running,
                started_at: wall(self.now),
                finished_at: None,
                gtid_set: Some(run.errant.server_text()),
                message: None,
            });
        status.state = JobState::Succeeded;
        status.finished_at = Some(wall(self.now));
        status.message = Some(format!(
            "archived errant set {} of rejoin {} in archives/{}",
            run.errant.server_text(),
            run.rejoin_id,
            run.name
        ));
        self.jobs[site].recorded = Some(status.clone());
        self.jobs[site].job = Some(status);
        self.stats.archives_written += 1;
    }

    /// mysqld of `site` stopped: an archive job running there fails (its `mariadb-binlog` or
    /// dump loses its server) and removes its partial directory.
    pub fn archive_mysqld_stopped(&mut self, site: usize) {
        let Some(run) = self.jobs[site].archive_run.take() else {
            return;
        };
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "archive {} failed: mysqld went away",
            run.name
        );
        let status = self.jobs[site]
            .job
            .clone()
            .filter(|job| job.is(JobKind::Archive, &run.name, run.rejoin_id))
            .map(|mut job| {
                job.state = JobState::Failed;
                job.finished_at = Some(wall(self.now));
                job.gtid_set = None;
                job.message = Some(format!(
                    "archive {}: mysqld went away mid-archive (connection lost); the partial archive was removed",
                    run.name
                ));
                job
            });
        if let Some(status) = status {
            self.jobs[site].recorded = Some(status.clone());
            self.jobs[site].job = Some(status);
        }
        self.stats.archive_jobs_failed += 1;
    }

    /// The sidecar of `site` died: an archive job running there is cut off (no manifest: no
    /// archive), and the restarted sidecar reports the job its volume recorded last.
    pub fn archive_sidecar_stopped(&mut self, site: usize) {
        let Some(run) = self.jobs[site].archive_run.take() else {
            return;
        };
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "archive {} cut off: the sidecar died",
            run.name
        );
        self.jobs[site].job = self.jobs[site].recorded.clone();
        self.stats.archive_jobs_cut_off += 1;
    }

    /// `RejoinOnWritable` while a rejoin's archive or re-seed job runs on `site` (once per
    /// run).
    pub fn check_rejoin_jobs_running(&mut self, site: usize) {
        let jobs = &self.jobs[site];
        let what = match (&jobs.archive_run, &jobs.reseed_run) {
            (Some(run), _) if !run.writable_reported => format!("archive {} running", run.name),
            (_, Some(run)) if !run.writable_reported => {
                format!(
                    "the rejoin's re-seed from {} running",
                    SITE_NAMES[run.source]
                )
            }
            _ => return,
        };
        let (read_only_off, lease_names_it) = self.might_be_writable(site);
        if !read_only_off && !lease_names_it {
            return;
        }
        let jobs = &mut self.jobs[site];
        if let Some(run) = jobs.archive_run.as_mut() {
            run.writable_reported = true;
        }
        if let Some(run) = jobs.reseed_run.as_mut() {
            run.writable_reported = true;
        }
        let now = self.now;
        self.checker
            .check_rejoin_target(now, site, &what, read_only_off, lease_names_it);
    }

    /// `POST /v1/reseed` under a rejoin id on the sidecar of `site`, from `source` (the real
    /// sidecar's admission: never the site its authority names, checked by the caller; the
    /// same job asked again is answered from the slot; another job running refuses it).
    pub fn sidecar_rejoin_reseed(
        &mut self,
        site: usize,
        source: usize,
        request: &ReseedRequest,
    ) -> bool {
        let name = format!("{}:{}", request.source_host, request.source_port);
        if let Some(job) = self.jobs[site].job.as_ref() {
            if job.is(JobKind::Reseed, &name, request.restore_id) {
                return true;
            }
            if job.state == JobState::Running {
                return false;
            }
        }
        self.rejoin.job_seq += 1;
        let seq = self.rejoin.job_seq;
        let mut status = JobStatus {
            kind: JobKind::Reseed,
            name: name.clone(),
            restore_id: request.restore_id,
            state: JobState::Running,
            started_at: wall(self.now),
            finished_at: None,
            gtid_set: None,
            message: None,
        };
        self.stats.reseed_jobs_started += 1;
        if !self.sites[site].answers() {
            // Its first step, STOP REPLICA, fails.
            status.state = JobState::Failed;
            status.finished_at = Some(wall(self.now));
            status.message =
                Some("stop replication before the re-seed: mysqld does not answer".to_string());
            self.jobs[site].recorded = Some(status.clone());
            self.jobs[site].job = Some(status);
            self.stats.reseed_jobs_failed += 1;
            return true;
        }
        let duration = self
            .rng
            .random_range(ARCHIVE_MILLIS_MIN..=ARCHIVE_MILLIS_MAX);
        let dump_millis = self.rng.random_range(duration / 4..=duration * 3 / 4);
        let dump = self.sites[source].executed.clone();
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "rejoin re-seed from {} started ({} ms, dump at {})",
            SITE_NAMES[source],
            duration,
            dump.describe()
        );
        self.sites[site].replication_enabled = false;
        self.jobs[site].reseed_run = Some(ReseedRun {
            seq,
            name,
            restore_id: request.restore_id,
            source,
            dump,
            load_millis: duration - dump_millis,
            loading: false,
            writable_reported: false,
        });
        self.jobs[site].job = Some(status);
        self.check_rejoin_jobs_running(site);
        self.schedule_in(dump_millis, Event::ReseedLoad { site, seq });
        self.maybe_fault_mid_job(site, duration);
        true
    }

    /// The re-seed's dump of the source is taken (unless the source went away meanwhile):
    /// the site's data is replaced by it from now on.
    pub fn reseed_load(&mut self, site: usize, seq: u64) {
        let Some(run) = self.jobs[site]
            .reseed_run
            .clone()
            .filter(|run| run.seq == seq)
        else {
            return;
        };
        if self.sites[site].frozen || self.sidecars[site].hung || self.sites[run.source].frozen {
            self.schedule_in(JOB_STALL_RETRY_MILLIS, Event::ReseedLoad { site, seq });
            return;
        }
        if !self.sites[run.source].answers() || !self.net.connected(site, run.source) {
            let why = format!(
                "dump {}: the source went away mid-dump",
                SITE_NAMES[run.source]
            );
            self.fail_reseed(site, &why);
            return;
        }
        self.check_rejoin_jobs_running(site);
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "rejoin re-seed loads the dump of {} ({})",
            SITE_NAMES[run.source],
            run.dump.describe()
        );
        let target = &mut self.sites[site];
        target.executed = run.dump.clone();
        target.relay = TxnSet::new();
        target.relay_oldest_commit = None;
        target.source = None;
        target.replication_enabled = false;
        target.replication_error = None;
        self.data_removed = Some(format!(
            "the load of the rejoin's re-seed of {} from {} (job id {})",
            SITE_NAMES[site], SITE_NAMES[run.source], run.restore_id
        ));
        if let Some(current) = self.jobs[site].reseed_run.as_mut() {
            current.loading = true;
        }
        self.schedule_in(run.load_millis.max(1), Event::ReseedDone { site, seq });
    }

    /// The re-seed's load is done: the site replicates from the source, and the job reports
    /// success with the dump's set.
    pub fn reseed_done(&mut self, site: usize, seq: u64) {
        let Some(run) = self.jobs[site]
            .reseed_run
            .clone()
            .filter(|run| run.seq == seq)
        else {
            return;
        };
        if self.sites[site].frozen || self.sidecars[site].hung {
            self.schedule_in(JOB_STALL_RETRY_MILLIS, Event::ReseedDone { site, seq });
            return;
        }
        self.check_rejoin_jobs_running(site);
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "re-seeded from {} at {} (rejoin); replicates from it",
            SITE_NAMES[run.source],
            run.dump.describe()
        );
        let target = &mut self.sites[site];
        target.source = Some(run.source);
        target.replication_enabled = true;
        target.replication_error = None;
        self.jobs[site].reseed_run = None;
        let status = self.jobs[site]
            .job
            .clone()
            .filter(|job| job.is(JobKind::Reseed, &run.name, run.restore_id))
            .map(|mut job| {
                job.state = JobState::Succeeded;
                job.finished_at = Some(wall(self.now));
                job.gtid_set = Some(run.dump.server_text());
                job.message = Some(format!(
                    "re-seeded from {} and replicating from it",
                    run.name
                ));
                job
            });
        if let Some(status) = status {
            self.jobs[site].recorded = Some(status.clone());
            self.jobs[site].job = Some(status);
        }
    }

    /// The running rejoin re-seed of `site` fails with `why` (the site keeps whatever it
    /// loaded: all of its old data before the load, the dump once the load started).
    fn fail_reseed(&mut self, site: usize, why: &str) {
        let Some(run) = self.jobs[site].reseed_run.take() else {
            return;
        };
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "rejoin re-seed from {} failed ({}): {why}",
            SITE_NAMES[run.source],
            if run.loading {
                "its dump loaded"
            } else {
                "nothing loaded"
            }
        );
        let status = self.jobs[site]
            .job
            .clone()
            .filter(|job| job.is(JobKind::Reseed, &run.name, run.restore_id))
            .map(|mut job| {
                job.state = JobState::Failed;
                job.finished_at = Some(wall(self.now));
                job.message = Some(why.to_string());
                job
            });
        if let Some(status) = status {
            self.jobs[site].recorded = Some(status.clone());
            self.jobs[site].job = Some(status);
        }
        self.stats.reseed_jobs_failed += 1;
    }

    /// mysqld of `site` stopped: a rejoin re-seed running there fails.
    pub fn reseed_mysqld_stopped(&mut self, site: usize) {
        self.fail_reseed(site, "re-seed: mysqld went away (connection lost)");
    }

    /// The sidecar of `site` died: a rejoin re-seed running there is cut off (the site keeps
    /// what it loaded), and the restarted sidecar reports the job its volume recorded last.
    pub fn reseed_sidecar_stopped(&mut self, site: usize) {
        let Some(run) = self.jobs[site].reseed_run.take() else {
            return;
        };
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "rejoin re-seed from {} cut off: the sidecar died",
            SITE_NAMES[run.source]
        );
        self.jobs[site].job = self.jobs[site].recorded.clone();
        self.stats.reseed_jobs_cut_off += 1;
    }

    /// Before a decision executes: its rejoin ids are known (a re-seed under one is a
    /// rejoin's), and the rejoins it started, completed, failed or refused are counted.
    pub fn note_rejoins(&mut self, before: &GroupMemory, decision: &Decision) {
        for entry in &decision.memory.sites {
            let Some(rejoin) = entry.rejoin.as_ref() else {
                continue;
            };
            if let Some(id) = rejoin.status.rejoin_id {
                self.rejoin.ids.insert(id);
            }
            let was = phase_of(before, &entry.site);
            let is = Some(rejoin.status.phase);
            if was == is {
                continue;
            }
            if under_way(is) && !under_way(was) {
                self.stats.rejoins_started += 1;
                if rejoin.status.automatic {
                    self.stats.rejoins_automatic += 1;
                }
            }
            match rejoin.status.phase {
                RejoinPhase::Completed => self.stats.rejoins_completed += 1,
                RejoinPhase::Failed => self.stats.rejoins_failed += 1,
                RejoinPhase::Refused => self.stats.rejoins_refused += 1,
                RejoinPhase::Requested
                | RejoinPhase::Deferred
                | RejoinPhase::Archiving
                | RejoinPhase::Reseeding => {}
            }
        }
    }

    /// The group's history as `active`, the site of the newest authority, holds it: its
    /// executed set, and what a restore loaded on it discarded while that restore has not
    /// re-promoted it (it failed, or a reverted status forgot it: the rollback never took
    /// effect, and the history it discarded is still on the other sites, not errant there).
    fn group_history(&self, active: usize) -> TxnSet {
        let mut history = self.sites[active].executed.clone();
        if let Some(truth) = self
            .restore_truth
            .as_ref()
            .filter(|truth| truth.site == active && !truth.checked)
        {
            history.union_with(&truth.discarded);
        }
        history
    }

    /// `ErrantSiteUsed` for a promotion of `target` (`kind`) away from `replaced`, the site of
    /// the newest authority, judged before the decision executes.
    pub fn check_promotion_errant(&mut self, target: usize, kind: PromotionKind, replaced: usize) {
        let mut candidate = self.sites[target].executed.clone();
        candidate.union_with(&self.sites[target].relay);
        let replaced_executed = self.group_history(replaced);
        let now = self.now;
        self.checker.check_promotion_errant(
            now,
            target,
            kind,
            &candidate,
            replaced,
            &replaced_executed,
        );
    }

    /// `ErrantSiteUsed` after a decision executed: no site but the active one is labelled
    /// primary or a healthy replica while it holds transactions the active site lacks.
    pub fn check_serving_labels(&mut self) {
        let Some(active) = self.newest_active_site() else {
            return;
        };
        let now = self.now;
        let history = self.group_history(active);
        let serving: Vec<(usize, &'static str)> = self
            .store
            .labels
            .iter()
            .filter_map(|(&site, &(role, healthy))| match role {
                PodRole::Primary => Some((site, "role=primary")),
                PodRole::Replica if healthy => Some((site, "role=replica healthy")),
                PodRole::Replica | PodRole::Fenced => None,
            })
            .collect();
        for (site, label) in serving {
            self.checker.check_serving_errant(
                now,
                site,
                label,
                &self.sites[site].executed,
                active,
                &history,
            );
        }
    }

    /// `DiscardedUnarchived` after data left a site (`cause`): every acknowledged write is
    /// still held by some site or in an archive.
    pub fn check_acknowledged_kept(&mut self, cause: &str) {
        let mut held = TxnSet::new();
        for site in &self.sites {
            held.union_with(&site.executed);
            held.union_with(&site.relay);
        }
        let now = self.now;
        self.checker.check_acknowledged_kept(now, &held, cause);
    }
}

fn archive_job(request: &ArchiveRequest, state: JobState, now: SimTime) -> JobStatus {
    JobStatus {
        kind: JobKind::Archive,
        name: request.name.clone(),
        restore_id: request.rejoin_id,
        state,
        started_at: wall(now),
        finished_at: None,
        gtid_set: Some(request.errant_gtid_set.clone()),
        message: None,
    }
}
