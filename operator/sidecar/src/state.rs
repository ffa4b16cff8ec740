//! State shared by the HTTP handlers and the timers.

use std::sync::{Arc, Mutex, MutexGuard};

use bloodraven_api::sidecar::MysqlObservation;
use bloodraven_core::lease::SiteLease;
use bloodraven_mysql::live::LiveMysql;
use tokio::sync::Notify;

use crate::{clock::MonotonicClock, config::Settings, discovery::Discovery, metrics::Metrics};

/// Everything the sidecar's tasks share.
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    lease: Mutex<SiteLease>,
    pub(crate) clock: MonotonicClock,
    pub(crate) mysql: LiveMysql,
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
        Arc::new(Self {
            settings,
            lease: Mutex::new(lease),
            clock: MonotonicClock::start(),
            mysql,
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

    /// Records a new observation of mysqld (metrics).
    pub(crate) fn set_observation(&self, observation: &MysqlObservation) {
        self.metrics.observe_read_only(observation.read_only);
    }

    /// The group this sidecar serves.
    pub(crate) fn group(&self) -> &str {
        self.settings.lease.group()
    }

    /// This sidecar's site.
    pub(crate) fn site(&self) -> &str {
        self.settings.lease.site()
    }
}
