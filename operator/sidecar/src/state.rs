//! State shared by the HTTP handlers and the timers.

use std::sync::{Arc, Mutex, MutexGuard};

use bloodraven_api::sidecar::MysqlObservation;
use bloodraven_core::lease::{SiteLease, Watchdog};
use bloodraven_mysql::live::LiveMysql;
use tokio::sync::Notify;

use crate::{clock::MonotonicClock, config::Settings, discovery::Discovery, metrics::Metrics};

/// How far uptime may go backwards between two observations before it counts as a restart:
/// concurrent observations (status and enforcement) can be recorded out of order across a
/// second boundary. A restart within this many seconds of the previous run's start is missed.
const UPTIME_SLACK_SECONDS: u64 = 2;

/// Everything the sidecar's tasks share.
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    lease: Mutex<SiteLease>,
    /// What mysqld was last seen as, for the watchdog (`crate::watchdog`).
    watchdog: Mutex<Watchdog>,
    /// The last mysqld run seen: `(server id, uptime seconds)`.
    last_run: Mutex<Option<(String, u64)>>,
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
        Arc::new(Self {
            settings,
            lease: Mutex::new(lease),
            watchdog: Mutex::new(watchdog),
            last_run: Mutex::new(None),
            clock: MonotonicClock::start(),
            mysql,
            fence_mysql,
            discovery,
            http,
            metrics,
            wake_enforcer: Notify::new(),
            wake_lease: Notify::new(),
            mutation: tokio::sync::Mutex::new(()),
        })
    }

    /// The lease state; never held across an await.
    pub(crate) fn lease(&self) -> MutexGuard<'_, SiteLease> {
        // A panic while holding the lock cannot leave SiteLease half-updated in a way that
        // matters more than stopping: its methods do not panic. Keep serving.
        self.lease
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
    /// (another server id, or an uptime more than [`UPTIME_SLACK_SECONDS`] lower than last
    /// seen) under a running sidecar is
    /// treated like a sidecar start: the cached authority is forgotten (startup safety net),
    /// so the restarted mysqld stays read-only until the operator pushes authority again.
    pub(crate) fn set_observation(&self, observation: &MysqlObservation) {
        self.metrics.observe_read_only(observation.read_only);
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
            let restarted = last.as_ref().is_some_and(|(server_id, uptime_seconds)| {
                *server_id != run.server_id
                    || run.uptime_seconds + UPTIME_SLACK_SECONDS < *uptime_seconds
            });
            // Keep the highest uptime of this run: observations may be recorded out of order.
            let uptime_seconds = match &*last {
                Some((server_id, seen)) if !restarted && *server_id == run.server_id => {
                    (*seen).max(run.uptime_seconds)
                }
                Some(_) | None => run.uptime_seconds,
            };
            *last = Some((run.server_id.clone(), uptime_seconds));
            restarted
        };
        if restarted {
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
}
