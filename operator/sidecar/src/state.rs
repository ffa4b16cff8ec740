//! State shared by the HTTP handlers and the timers.

use std::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Arc, Mutex, MutexGuard,
};

use bloodraven_api::sidecar::{LeaseTerms, MysqlObservation, SidecarRuntime};
use bloodraven_core::lease::{MonotonicMillis, SiteLease, Watchdog};
use bloodraven_mysql::live::LiveMysql;
use tokio::sync::Notify;

use crate::{clock::MonotonicClock, config::Settings, discovery::Discovery, metrics::Metrics};

/// How far a run's start (by mysqld's clock, `MysqldRun::started_at`) may move between two
/// observations before it counts as a restart: two reads of one run differ by up to a second.
/// A restart within this many seconds of the previous run's start is missed.
const UPTIME_SLACK_SECONDS: u64 = 2;

/// Whether `run` is another mysqld run than the one last seen (`last`: server id and start).
///
/// The start is `UNIX_TIMESTAMP() - Uptime` on mysqld's own clock, which a step of that clock
/// does not move; `Uptime` alone jumps by the step (a backward step of mysqld's wall clock
/// once read as a restart, and the sidecar forgot its authority and fenced a healthy primary).
pub(crate) fn is_new_run(last: &(String, i64), run: &bloodraven_api::sidecar::MysqldRun) -> bool {
    let slack_ms = i64::try_from(UPTIME_SLACK_SECONDS * 1000).unwrap_or(i64::MAX);
    last.0 != run.server_id || (run.started_at.unix_millis() - last.1).abs() > slack_ms
}

/// The least [`Shared::enforcer_stall`].
const ENFORCER_STALL_MIN: std::time::Duration = std::time::Duration::from_secs(30);

/// [`Shared::enforcer_stall`] for an enforcement `tick`.
fn enforcer_stall(tick: std::time::Duration) -> std::time::Duration {
    (tick * 10).max(ENFORCER_STALL_MIN)
}

/// Everything the sidecar's tasks share.
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    lease: Mutex<SiteLease>,
    /// What mysqld was last seen as, for the watchdog (`crate::watchdog`).
    watchdog: Mutex<Watchdog>,
    /// The last mysqld run seen: `(server id, start by mysqld's clock in Unix milliseconds)`.
    last_run: Mutex<Option<(String, i64)>>,
    /// The read-only flag of the last observation recorded (`None`: unknown).
    last_read_only: Mutex<Option<bool>>,
    /// mysqld's clock at the last arm of the write deadline (`crate::deadline`).
    pub(crate) mysqld_clock: Mutex<Option<bloodraven_mysql::deadline::ClockReading>>,
    pub(crate) clock: MonotonicClock,
    pub(crate) mysql: LiveMysql,
    /// The same client with a short bound on the enforcer's `SET GLOBAL read_only = ON`
    /// (half a tick, at most half the fence lead): a fence blocked behind a client's table lock gives up quickly, the
    /// client connections are killed, and the fence is retried within the same tick.
    pub(crate) fence_mysql: LiveMysql,
    pub(crate) discovery: Discovery,
    pub(crate) http: reqwest::Client,
    pub(crate) metrics: Metrics,
    /// Wakes the enforcement loop at once (authority pushed, fence, lease gained).
    pub(crate) wake_enforcer: Notify,
    /// Wakes the lease loop at once (authority pushed).
    pub(crate) wake_lease: Notify,
    /// Serialises every decision-then-mutation on mysqld: the enforcer's "desired -> set",
    /// the fence, promote and repoint endpoints. Without it the enforcer could unfence on a
    /// decision taken just before an explicit fence.
    pub(crate) mutation: tokio::sync::Mutex<()>,
    /// Whether this run installed mysqld's write deadline (`crate::deadline`); cleared when
    /// arming fails, so the next enforcement installs again.
    pub(crate) deadline_installed: AtomicBool,
    /// When the enforcer last finished a pass; `/healthz` fails once it is older than
    /// [`Shared::enforcer_stall`] (a hung sidecar is restarted by its liveness probe).
    last_enforced: Mutex<tokio::time::Instant>,
    /// Unfences begun plus unfences finished: odd while one is in flight. Bumped to odd only
    /// while the lease lock is held, in the same critical section as the decision to unfence
    /// ([`Shared::begin_unfence`]).
    unfence_epoch: AtomicU64,
    /// The backup job that runs or last finished (`crate::backup`).
    job: Mutex<Option<bloodraven_api::sidecar::JobStatus>>,
}

/// An unfence in flight, from the decision to the re-read after it: the status endpoint does
/// not report a read-only it observed meanwhile as read-only (it may be cleared any moment,
/// under an authority that was already replaced). Dropping it ends the unfence.
pub(crate) struct UnfenceInFlight<'a> {
    shared: &'a Shared,
}

impl Drop for UnfenceInFlight<'_> {
    fn drop(&mut self) {
        self.shared.unfence_epoch.fetch_add(1, Ordering::SeqCst);
    }
}

impl Shared {
    pub(crate) fn new(
        settings: Settings,
        mysql: LiveMysql,
        discovery: Discovery,
        http: reqwest::Client,
        metrics: Metrics,
    ) -> Arc<Self> {
        let lease = SiteLease::new(settings.lease.clone());
        let watchdog = Watchdog::new(&settings.lease);
        // Two bounded sets and a kill of client connections fit in the fence lead.
        let half_lead = std::time::Duration::from_millis(
            bloodraven_core::lease::fence_lead_ms(&settings.lease) / 2,
        );
        let fence_timeout = (settings.tick / 2)
            .min(half_lead)
            .max(std::time::Duration::from_millis(1))
            .min(settings.mysql.statement_timeout);
        let fence_mysql = mysql.clone().with_mutation_timeout(fence_timeout);
        let recorded_job = settings
            .backup
            .as_ref()
            .and_then(crate::backup::recorded_job);
        Arc::new(Self {
            settings,
            lease: Mutex::new(lease),
            watchdog: Mutex::new(watchdog),
            last_run: Mutex::new(None),
            mysqld_clock: Mutex::new(None),
            last_read_only: Mutex::new(None),
            clock: MonotonicClock::start(),
            mysql,
            fence_mysql,
            discovery,
            http,
            metrics,
            wake_enforcer: Notify::new(),
            wake_lease: Notify::new(),
            mutation: tokio::sync::Mutex::new(()),
            deadline_installed: AtomicBool::new(false),
            last_enforced: Mutex::new(tokio::time::Instant::now()),
            unfence_epoch: AtomicU64::new(0),
            job: Mutex::new(recorded_job),
        })
    }

    /// Marks an unfence in flight. Takes the lease guard under which the unfence was decided,
    /// so that a status read that took its own lease snapshot before this sees no unfence
    /// decided on an older authority, and one that took it after sees this mark.
    pub(crate) fn begin_unfence(
        &self,
        _decided_under: &MutexGuard<'_, SiteLease>,
    ) -> UnfenceInFlight<'_> {
        self.unfence_epoch.fetch_add(1, Ordering::SeqCst);
        UnfenceInFlight { shared: self }
    }

    /// The unfence epoch: odd while an unfence is in flight; a change between two reads means
    /// one began (and maybe ended) in between. A status read whose lease snapshot is taken
    /// under the lease lock reads the second value under that same lock.
    pub(crate) fn unfence_epoch(&self) -> u64 {
        self.unfence_epoch.load(Ordering::SeqCst)
    }

    /// The lease state; never held across an await.
    pub(crate) fn lease(&self) -> MutexGuard<'_, SiteLease> {
        // A panic while holding the lock cannot leave SiteLease half-updated in a way that
        // matters more than stopping: its methods do not panic. Keep serving.
        self.lease
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The read-only flag of the last observation recorded (`None`: unknown or none yet).
    pub(crate) fn last_read_only(&self) -> Option<bool> {
        *self
            .last_read_only
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The watchdog's memory; never held across an await.
    pub(crate) fn watchdog(&self) -> MutexGuard<'_, Watchdog> {
        self.watchdog
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a new observation of mysqld: metrics, the watchdog, and restart detection. A new mysqld run
    /// ([`is_new_run`]: another server id, or a start more than [`UPTIME_SLACK_SECONDS`] away
    /// from the one last seen) under a running sidecar is
    /// treated like a sidecar start: the cached authority is forgotten (startup safety net),
    /// so the restarted mysqld stays read-only until the operator pushes authority again.
    pub(crate) fn set_observation(&self, observation: &MysqlObservation) {
        self.metrics.observe_read_only(observation.read_only);
        *self
            .last_read_only
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = observation.read_only;
        self.watchdog()
            .observe(observation.read_only, observation.down);
        // Seen writable while it must be read-only: enforce now, not at the next tick (an
        // out-of-order observation must not leave the watchdog's grace running a whole tick).
        if observation.read_only == Some(false)
            && self.lease().desired(self.clock.now()).read_only()
        {
            self.wake_enforcer.notify_one();
        }
        let Some(run) = &observation.mysqld else {
            return;
        };
        let restarted = {
            let mut last = self
                .last_run
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let restarted = last.as_ref().is_some_and(|seen| is_new_run(seen, run));
            // Keep the first start seen of this run: reads of one run differ by a second.
            let started_ms = match &*last {
                Some((server_id, seen)) if !restarted && *server_id == run.server_id => *seen,
                Some(_) | None => run.started_at.unix_millis(),
            };
            *last = Some((run.server_id.clone(), started_ms));
            restarted
        };
        if restarted {
            // A new run may have a new datadir: install the write deadline again.
            self.deadline_installed.store(false, Ordering::SeqCst);
            let had_authority = {
                let mut lease = self.lease();
                let had = lease.authority().is_some();
                lease.forget_authority();
                had
            };
            tracing::warn!(
                site = self.site(),
                uptime_seconds = run.uptime_seconds,
                had_authority,
                read_only = ?observation.read_only,
                "mysqld restarted: forgetting cached authority; read-only until the operator pushes authority again"
            );
            self.wake_enforcer.notify_one();
        }
    }

    /// Records that the enforcer finished a pass.
    pub(crate) fn enforced(&self) {
        *self
            .last_enforced
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tokio::time::Instant::now();
    }

    /// How long since the enforcer last finished a pass.
    pub(crate) fn since_enforced(&self) -> std::time::Duration {
        self.last_enforced
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .elapsed()
    }

    /// How long the enforcer may go without finishing a pass before `/healthz` fails: ten ticks,
    /// at least [`ENFORCER_STALL_MIN`], longer than any bounded mutation it may wait behind (a
    /// promotion's drain included), so only a hung sidecar fails it. Safety does not wait
    /// for this: mysqld's write deadline fences it within the lease (`crate::deadline`).
    pub(crate) fn enforcer_stall(&self) -> std::time::Duration {
        enforcer_stall(self.settings.tick)
    }

    /// What this process runs with at `now` on its own clock: its uptime (the clock starts
    /// with the process, before any grant is recorded, so a restart shows at once) and the
    /// lease terms of its flags.
    pub(crate) fn runtime(&self, now: MonotonicMillis) -> SidecarRuntime {
        SidecarRuntime {
            uptime_ms: now.0,
            lease: LeaseTerms {
                duration_ms: self.settings.lease.duration_ms(),
                sites: self.settings.lease.sites().to_vec(),
            },
        }
    }

    /// The group this sidecar serves.
    pub(crate) fn group(&self) -> &str {
        self.settings.lease.group()
    }

    /// Users whose connections are never killed: the sidecar's own and the replication user.
    pub(crate) fn protected_users(&self) -> [&str; 2] {
        [
            self.settings.mysql.user.as_str(),
            self.settings.replication_user.as_str(),
        ]
    }

    /// This sidecar's site.
    pub(crate) fn site(&self) -> &str {
        self.settings.lease.site()
    }

    /// The backup job slot; never held across an await.
    pub(crate) fn job_slot(&self) -> MutexGuard<'_, Option<bloodraven_api::sidecar::JobStatus>> {
        self.job
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The backup job that runs or last finished, for the status.
    pub(crate) fn job(&self) -> Option<bloodraven_api::sidecar::JobStatus> {
        self.job_slot().clone()
    }

    /// The backups on this site's volume, for the status.
    pub(crate) fn backups(&self) -> Vec<bloodraven_api::sidecar::BackupInfo> {
        self.settings
            .backup
            .as_ref()
            .map(crate::backup::list)
            .unwrap_or_default()
    }
}

/// What the status endpoint reports of mysqld's read_only when an unfence may have been in
/// flight while it observed: `epoch_before` was read before observing, `epoch_after` under the
/// lease lock with the lease snapshot. Unless both are the same even value, a read-only it saw
/// is no evidence (the unfence may clear it any moment, decided under an authority the
/// snapshot no longer shows), so read_only is reported unknown, with why.
pub(crate) fn without_unfence_in_flight(
    mut observed: MysqlObservation,
    epoch_before: u64,
    epoch_after: u64,
) -> MysqlObservation {
    let quiet = epoch_before == epoch_after && epoch_before.is_multiple_of(2);
    if !quiet && observed.read_only == Some(true) {
        observed.read_only = None;
        observed.error = Some(
            "read_only not reported: an unfence was in flight while mysqld was observed".to_owned(),
        );
    }
    observed
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bloodraven_api::sidecar::MysqlObservation;

    use super::{enforcer_stall, is_new_run, without_unfence_in_flight};
    use crate::observation::from_snapshot;
    use bloodraven_mysql::live::{ReadOnlyState, ServerRun, Snapshot};

    /// What the sidecar records of a mysqld run whose `Uptime` is `uptime_seconds` while
    /// mysqld's clock reads `mysqld_now` (Unix seconds).
    fn run_seen(uptime_seconds: u64, mysqld_now: i64) -> bloodraven_api::sidecar::MysqldRun {
        let snapshot = Snapshot {
            read_only: ReadOnlyState {
                read_only: false,
                fenced: false,
            },
            gtid_executed: String::new(),
            replication: None,
            server: ServerRun {
                server_id: "1".to_owned(),
                uptime_seconds,
                started_at_unix_seconds: mysqld_now - i64::try_from(uptime_seconds).unwrap_or(0),
            },
        };
        from_snapshot(&snapshot).mysqld.expect("a run")
    }

    /// A step of mysqld's wall clock moves `Uptime` by the step (MariaDB computes it from the
    /// wall clock); it once read as a restart, and the sidecar forgot its authority and fenced
    /// a healthy primary. The run's start by mysqld's own clock does not move.
    #[test]
    fn a_step_of_mysqlds_clock_is_no_restart_and_a_restart_is_one() {
        let start = 1_800_000_000;
        let first = run_seen(100, start + 100);
        let last = (first.server_id.clone(), first.started_at.unix_millis());
        // 20 s back: Uptime reads 80 one second later.
        assert!(!is_new_run(&last, &run_seen(81, start + 81)));
        // 20 s forward: Uptime reads 121.
        assert!(!is_new_run(&last, &run_seen(121, start + 121)));
        // A second-boundary between the two statements of one read.
        assert!(!is_new_run(&last, &run_seen(102, start + 103)));
        // A restart 5 s ago, and one while the clock was stepped back.
        assert!(is_new_run(&last, &run_seen(5, start + 106)));
        assert!(is_new_run(&last, &run_seen(5, start - 30)));
        // Another server.
        let mut other = run_seen(101, start + 101);
        other.server_id = "2".to_owned();
        assert!(is_new_run(&last, &other));
    }

    fn observed(read_only: bool) -> MysqlObservation {
        MysqlObservation {
            reachable: true,
            error: None,
            down: false,
            read_only: Some(read_only),
            gtid_executed: None,
            replication: None,
            mysqld: None,
        }
    }

    /// docs/design/history.md#issue-10-case-7: a read-only observed while an unfence was in
    /// flight (or began during the read) is reported unknown, never as read-only; quiet reads
    /// and writable reads are reported as seen.
    #[test]
    fn a_read_only_seen_during_an_unfence_is_reported_unknown() {
        assert_eq!(
            without_unfence_in_flight(observed(true), 4, 4).read_only,
            Some(true)
        );
        for (before, after) in [(5, 5), (4, 5), (4, 6), (5, 6)] {
            let reported = without_unfence_in_flight(observed(true), before, after);
            assert_eq!(reported.read_only, None, "epochs {before}..{after}");
            assert!(reported.reachable);
            assert!(reported.error.unwrap_or_default().contains("unfence"));
        }
        assert_eq!(
            without_unfence_in_flight(observed(false), 5, 6).read_only,
            Some(false)
        );
    }

    #[test]
    fn the_enforcer_counts_as_stalled_after_ten_ticks_and_never_before_thirty_seconds() {
        // The default 6 s lease ticks every 2 s: 30 s, not 20 s.
        assert_eq!(
            enforcer_stall(Duration::from_secs(2)),
            Duration::from_secs(30)
        );
        assert_eq!(
            enforcer_stall(Duration::from_secs(5)),
            Duration::from_secs(50)
        );
        assert_eq!(
            enforcer_stall(Duration::from_millis(1)),
            Duration::from_secs(30)
        );
    }
}
