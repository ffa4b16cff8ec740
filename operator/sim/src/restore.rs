//! Named backups and restore-in-place in the simulated world
//! (docs/design/history.md#issue-12-part-2, `--restore`): the sidecars' backup, restore and
//! re-seed jobs over the sites' transaction sets, and the invariants: a live failover-hold
//! defers a restore, and what a restore discards is exactly what the status records
//! (`status.restore.lostTransactions`, `lostGtidSet`). Split brain is judged by the checker as
//! for every other run.
//!
//! Jobs finish in the request that starts them (the simulated load is instant); a restore's
//! preconditions are the real sidecar's: an explicit fence in force and mysqld read-only;
//! a re-seed never runs on the site the cached authority names.

use bloodraven_api::sidecar::{
    BackupInfo, BackupRequest, JobKind, JobState, JobStatus, ReseedRequest, RestoreRequest,
};
use bloodraven_api::RestorePhase;
use bloodraven_core::engine::{gated_start, Decision, GroupMemory};

use crate::gtid::TxnSet;
use crate::invariants::FindingClass;
use crate::sidecar::wall;
use crate::store::site_of_source_host;
use crate::trace;
use crate::world::{World, SITE_NAMES};

/// What one site's volume holds: its backups (with their true transaction sets), its
/// archives, and the last job.
#[derive(Debug, Clone, Default)]
pub struct SiteJobs {
    /// Backups, oldest first.
    pub backups: Vec<(BackupInfo, TxnSet)>,
    /// The job that runs or ran last (the sidecar's job slot).
    pub job: Option<JobStatus>,
    /// The last restore, re-seed or archive that finished, as the sidecar records it on the
    /// volume (`last-job.json`): what a restarted sidecar's job slot starts with.
    pub recorded: Option<JobStatus>,
    /// Archives written (`crate::rejoin`), oldest first: they stay on the volume whatever
    /// happens to the site's data.
    pub archives: Vec<crate::rejoin::Archive>,
    /// The archive job running, if any.
    pub archive_run: Option<crate::rejoin::ArchiveRun>,
    /// A rejoin's re-seed job running, if any.
    pub reseed_run: Option<crate::rejoin::ReseedRun>,
}

/// The truth of the restore in flight: what it discarded.
#[derive(Debug, Clone)]
pub struct RestoreTruth {
    /// The site restored.
    pub site: usize,
    /// The restore id.
    pub restore_id: u64,
    /// The backup restored from: with the id, the sidecar's identity of the restore job.
    pub backup: String,
    /// Transactions the site had that the backup lacks.
    pub discarded: TxnSet,
    /// Whether the status's record was compared already.
    pub checked: bool,
}

fn job(kind: JobKind, name: &str, id: u64, state: JobState, world: &World) -> JobStatus {
    JobStatus {
        kind,
        name: name.to_string(),
        restore_id: id,
        state,
        started_at: wall(world.now),
        finished_at: Some(wall(world.now)),
        gtid_set: None,
        message: None,
    }
}

impl World {
    /// `POST /v1/backup` on the sidecar of `site`.
    pub fn sidecar_backup(&mut self, site: usize, request: &BackupRequest) -> bool {
        if !self.sites[site].answers() {
            return false;
        }
        let executed = self.sites[site].executed.clone();
        if !self.jobs[site]
            .backups
            .iter()
            .any(|(info, _)| info.name == request.name)
        {
            let info = BackupInfo {
                name: request.name.clone(),
                site: SITE_NAMES[site].to_string(),
                created_at: wall(self.now),
                gtid_set: executed.server_text(),
                databases: vec!["app".to_string()],
                logical_bytes: executed.count(),
                // The simulated backup is instant: the copy holds what the dump holds.
                physical: true,
                physical_gtid_set: Some(executed.server_text()),
            };
            trace!(
                self.trace,
                self.now,
                SITE_NAMES[site],
                "backup {} at {}",
                request.name,
                executed.describe()
            );
            self.jobs[site].backups.push((info, executed));
        }
        let status = job(JobKind::Backup, &request.name, 0, JobState::Succeeded, self);
        self.jobs[site].job = Some(status);
        true
    }

    /// `POST /v1/restore` on the sidecar of `site`.
    pub fn sidecar_restore(&mut self, site: usize, request: &RestoreRequest) -> bool {
        let fenced = self.sidecars[site]
            .lease
            .as_ref()
            .is_some_and(|lease| lease.fence_state().is_some());
        if !fenced || !self.sites[site].answers() || !self.sites[site].read_only {
            return false;
        }
        let Some((info, backup)) = self.jobs[site]
            .backups
            .iter()
            .find(|(info, _)| info.name == request.name)
            .cloned()
        else {
            return false;
        };
        // The real sidecar refuses a method the backup cannot be restored by (409).
        if info.gtid_set_for(request.method).is_err() {
            return false;
        }
        if self.jobs[site]
            .job
            .as_ref()
            .is_some_and(|job| job.is(JobKind::Restore, &request.name, request.restore_id))
        {
            return true;
        }
        if self.jobs[site]
            .job
            .as_ref()
            .is_some_and(|job| job.state == JobState::Running)
        {
            // Another job runs (an archive): 409.
            return false;
        }
        let discarded = self.sites[site].executed.subtract(&backup);
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "restore {}: discards {}",
            request.name,
            discarded.describe()
        );
        self.checker.explain_restore(&discarded);
        // A run of the same restore again (the pod died mid-way and its job with it) discards
        // what is left to discard; what the restore discarded is everything its runs did
        // (seed 391 `--all-faults --restore --image-update`: the second run discarded nothing
        // and replaced the first run's truth). The same restore is the same job to the
        // sidecar: same id and same backup. An id alone is not: after a status revert the
        // operator may re-promote a second restore at the generation the first one had
        // (seed 153 with `--all-faults --state-loss --status-revert --restore
        // --image-update`: the second restore, of b2, discarded nothing, and was judged
        // against the first one's 3,501 discards).
        let discarded = match self.restore_truth.take() {
            Some(mut earlier)
                if earlier.restore_id == request.restore_id && earlier.backup == request.name =>
            {
                earlier.discarded.union_with(&discarded);
                earlier.discarded
            }
            _ => discarded,
        };
        self.restore_truth = Some(RestoreTruth {
            site,
            restore_id: request.restore_id,
            backup: request.name.clone(),
            discarded,
            checked: false,
        });
        let target = &mut self.sites[site];
        target.executed = backup.clone();
        target.relay = TxnSet::new();
        target.source = None;
        target.replication_enabled = false;
        let mut status = job(
            JobKind::Restore,
            &request.name,
            request.restore_id,
            JobState::Succeeded,
            self,
        );
        status.gtid_set = Some(backup.server_text());
        self.jobs[site].recorded = Some(status.clone());
        self.jobs[site].job = Some(status);
        self.data_removed = Some(format!(
            "the restore of {} from {}",
            SITE_NAMES[site], request.name
        ));
        true
    }

    /// `POST /v1/reseed` on the sidecar of `site`.
    pub fn sidecar_reseed(&mut self, site: usize, request: &ReseedRequest) -> bool {
        let names_itself = self.sidecars[site].lease.as_ref().is_some_and(|lease| {
            lease
                .authority()
                .is_some_and(|a| a.active_site.as_deref() == Some(SITE_NAMES[site]))
        });
        let Some(source) = site_of_source_host(&request.source_host) else {
            return false;
        };
        if self.rejoin.ids.contains(&request.restore_id) {
            // A rejoin's re-seed runs for a while (`crate::rejoin`).
            if names_itself || source == site || !self.sidecars[site].serving() {
                return false;
            }
            return self.sidecar_rejoin_reseed(site, source, request);
        }
        if names_itself
            || source == site
            || !self.sites[site].answers()
            || !self.sites[source].answers()
            || !self.net.connected(site, source)
        {
            return false;
        }
        let name = format!("{}:{}", request.source_host, request.source_port);
        if self.jobs[site].job.as_ref().is_some_and(|job| {
            job.state == JobState::Running && !job.is(JobKind::Reseed, &name, request.restore_id)
        }) {
            // Another job runs (an archive): 409.
            return false;
        }
        let executed = self.sites[source].executed.clone();
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "re-seeded from {} at {}",
            SITE_NAMES[source],
            executed.describe()
        );
        let target = &mut self.sites[site];
        target.executed = executed.clone();
        target.relay = TxnSet::new();
        target.source = Some(source);
        target.replication_enabled = true;
        target.replication_error = None;
        let mut status = job(
            JobKind::Reseed,
            &name,
            request.restore_id,
            JobState::Succeeded,
            self,
        );
        status.gtid_set = Some(executed.server_text());
        self.jobs[site].recorded = Some(status.clone());
        self.jobs[site].job = Some(status);
        self.data_removed = Some(format!(
            "the re-seed of {} from {} (job id {})",
            SITE_NAMES[site], SITE_NAMES[source], request.restore_id
        ));
        true
    }

    /// The restore invariants after a poll: a decision that starts a restore (enters Fencing)
    /// was decided without a live hold; once re-promoted, the recorded loss is the truth.
    pub fn check_restore(&mut self, before: &GroupMemory, hold_live: bool, decision: &Decision) {
        if hold_live {
            if let Some(start) = gated_start(before, &decision.memory) {
                if start.kind == bloodraven_core::deploy::DisruptionKind::RestoreInPlace {
                    self.checker.report(
                        FindingClass::RestoreIgnoredHold,
                        self.now,
                        format!(
                            "restore of {} fenced it while a failover-hold was live",
                            start.from
                        ),
                    );
                }
            }
        }
        let Some(restore) = decision.memory.restore.as_ref() else {
            return;
        };
        let status = &restore.status;
        let promoted = matches!(
            status.phase,
            RestorePhase::Promoting | RestorePhase::Reseeding | RestorePhase::Completed
        );
        let Some(truth) = self.restore_truth.as_mut() else {
            return;
        };
        if !promoted
            || truth.checked
            || status.topology_generation != Some(truth.restore_id)
            || status.backup != truth.backup
        {
            return;
        }
        truth.checked = true;
        self.stats.restores_checked += 1;
        let really = truth.discarded.count();
        let text = truth.discarded.server_text();
        let recorded = status.lost_gtid_set.clone().unwrap_or_default();
        if status.lost_transactions != really || !status.exact || recorded != text {
            let detail = format!(
                "restore of {} records lostTransactions={} ({recorded:?}, exact={}), really discarded {really} ({text:?})",
                status.site, status.lost_transactions, status.exact
            );
            self.checker
                .report(FindingClass::RestoreLossMismatch, self.now, detail);
        }
    }
}
