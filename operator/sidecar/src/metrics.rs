//! Prometheus metrics of the sidecar, served on `/metrics`.

use std::sync::atomic::AtomicU64;

use prometheus_client::{
    encoding::{text::encode, EncodeLabelSet},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// Labels of a read-only enforcement.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    /// Why read-only was set (`ReadOnlyReason::as_str`, or `operator_fence`).
    pub(crate) reason: String,
}

/// One more of `family` for `reason`.
fn count_reason(family: &Family<ReasonLabels, Counter>, reason: &str) {
    family
        .get_or_create(&ReasonLabels {
            reason: reason.to_owned(),
        })
        .inc();
}

/// Labels of a lease answer given to a peer.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AnswerLabels {
    /// The requesting site.
    pub(crate) site: String,
    /// `true` or `false`.
    pub(crate) granted: String,
}

/// Labels of a lease round's result.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PeerLabels {
    /// The peer site asked.
    pub(crate) site: String,
    /// `granted`, `refused` or `unreachable`.
    pub(crate) result: String,
}

/// The sidecar's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    read_only: Gauge,
    lease_held: Gauge,
    lease_remaining_seconds: Gauge<f64, AtomicU64>,
    authority_generation: Gauge,
    fences: Family<ReasonLabels, Counter>,
    writable_fences: Family<ReasonLabels, Counter>,
    topology_mismatches: Counter,
    unfences: Counter,
    answers: Family<AnswerLabels, Counter>,
    peer_results: Family<PeerLabels, Counter>,
    mysql_errors: Counter,
    watchdog_kills: Counter,
    write_deadline_seconds: Gauge<f64, AtomicU64>,
    write_deadline_errors: Counter,
    mysqld_clock_steps: Family<ReasonLabels, Counter>,
    unauthenticated: Family<ReasonLabels, Counter>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let read_only = Gauge::default();
        let lease_held = Gauge::default();
        let lease_remaining_seconds = Gauge::<f64, AtomicU64>::default();
        let authority_generation = Gauge::default();
        let fences = Family::<ReasonLabels, Counter>::default();
        let writable_fences = Family::<ReasonLabels, Counter>::default();
        let topology_mismatches = Counter::default();
        let unfences = Counter::default();
        let answers = Family::<AnswerLabels, Counter>::default();
        let peer_results = Family::<PeerLabels, Counter>::default();
        let mysql_errors = Counter::default();
        let watchdog_kills = Counter::default();
        let write_deadline_seconds = Gauge::<f64, AtomicU64>::default();
        let write_deadline_errors = Counter::default();
        let mysqld_clock_steps = Family::<ReasonLabels, Counter>::default();
        let unauthenticated = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "bloodraven_sidecar_read_only",
            "mysqld read_only as last observed: 1 read-only, 0 writable, -1 unknown",
            read_only.clone(),
        );
        registry.register(
            "bloodraven_sidecar_lease_held",
            "1 while this sidecar holds an unexpired majority write lease",
            lease_held.clone(),
        );
        registry.register(
            "bloodraven_sidecar_lease_remaining_seconds",
            "seconds left on the held write lease",
            lease_remaining_seconds.clone(),
        );
        registry.register(
            "bloodraven_sidecar_authority_generation",
            "topology generation of the cached authority (-1 none: startup safety net)",
            authority_generation.clone(),
        );
        registry.register(
            "bloodraven_sidecar_fences",
            "times this sidecar set mysqld read-only, by reason",
            fences.clone(),
        );
        registry.register(
            "bloodraven_sidecar_writable_fences",
            "times this sidecar saw mysqld writable and the rule set it read-only, by reason (no_authority: the startup safety net undid a writable mysqld)",
            writable_fences.clone(),
        );
        registry.register(
            "bloodraven_sidecar_topology_mismatches",
            "times mysqld was seen writable while the cached authority names another site, and the topology-mismatch rule set it read-only",
            topology_mismatches.clone(),
        );
        registry.register(
            "bloodraven_sidecar_unfences",
            "times this sidecar made mysqld writable",
            unfences.clone(),
        );
        registry.register(
            "bloodraven_sidecar_lease_answers",
            "lease requests answered for peers, by requesting site and grant",
            answers.clone(),
        );
        registry.register(
            "bloodraven_sidecar_lease_peer_results",
            "lease requests sent to peers, by peer site and result",
            peer_results.clone(),
        );
        registry.register(
            "bloodraven_sidecar_mysql_errors",
            "failed observations or mutations of mysqld",
            mysql_errors.clone(),
        );
        registry.register(
            "bloodraven_sidecar_watchdog_kills",
            "times the watchdog SIGKILLed mysqld: it had to be read-only, no lease covered it, and it was not seen read-only",
            watchdog_kills.clone(),
        );
        registry.register(
            "bloodraven_sidecar_write_deadline_seconds",
            "how far ahead mysqld's write deadline was last armed (-1 not armed: mysqld fences itself at its deadline)",
            write_deadline_seconds.clone(),
        );
        registry.register(
            "bloodraven_sidecar_write_deadline_errors",
            "failed installs or arms of mysqld's write deadline",
            write_deadline_errors.clone(),
        );
        registry.register(
            "bloodraven_sidecar_mysqld_clock_steps",
            "steps of mysqld's wall clock against the sidecar's monotonic clock seen between two arms of the write deadline, by reason (forward: the switch may have fenced early and the rule unfences; backward: the switch's event was created again)",
            mysqld_clock_steps.clone(),
        );
        registry.register(
            "bloodraven_sidecar_requests_unauthenticated",
            "requests refused for want of a valid signature (issue 10 case 8), by reason (bloodraven_api::auth::AuthError::reason)",
            unauthenticated.clone(),
        );
        write_deadline_seconds.set(-1.0);
        authority_generation.set(-1);
        read_only.set(-1);
        Self {
            registry,
            read_only,
            lease_held,
            lease_remaining_seconds,
            authority_generation,
            fences,
            writable_fences,
            topology_mismatches,
            unfences,
            answers,
            peer_results,
            mysql_errors,
            watchdog_kills,
            write_deadline_seconds,
            write_deadline_errors,
            mysqld_clock_steps,
            unauthenticated,
        }
    }

    pub(crate) fn observe_read_only(&self, read_only: Option<bool>) {
        self.read_only.set(match read_only {
            Some(true) => 1,
            Some(false) => 0,
            None => -1,
        });
    }

    pub(crate) fn observe_lease(&self, remaining_ms: u64, generation: Option<u64>) {
        self.lease_held.set(i64::from(remaining_ms > 0));
        // Millisecond counts of a lease fit f64 exactly.
        #[allow(clippy::cast_precision_loss)]
        self.lease_remaining_seconds
            .set(remaining_ms as f64 / 1000.0);
        self.authority_generation
            .set(generation.and_then(|g| i64::try_from(g).ok()).unwrap_or(-1));
    }

    pub(crate) fn fenced(&self, reason: &str) {
        count_reason(&self.fences, reason);
    }

    /// The rule set read-only on a mysqld it had just seen writable: the fences that undid a
    /// write-enabled mysqld, as opposed to re-asserting read-only on one that already was or
    /// could not be read (those count in `fences` only).
    pub(crate) fn fenced_writable(&self, reason: &str) {
        count_reason(&self.writable_fences, reason);
    }

    /// The topology-mismatch rule fired: mysqld was writable while the cached authority names
    /// another site.
    pub(crate) fn topology_mismatch(&self) {
        self.topology_mismatches.inc();
    }

    pub(crate) fn unfenced(&self) {
        self.unfences.inc();
    }

    pub(crate) fn answered(&self, site: &str, granted: bool) {
        self.answers
            .get_or_create(&AnswerLabels {
                site: site.to_owned(),
                granted: granted.to_string(),
            })
            .inc();
    }

    pub(crate) fn peer_result(&self, site: &str, result: &str) {
        self.peer_results
            .get_or_create(&PeerLabels {
                site: site.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    pub(crate) fn watchdog_killed(&self) {
        self.watchdog_kills.inc();
    }

    pub(crate) fn write_deadline_armed(&self, writable_for: std::time::Duration) {
        self.write_deadline_seconds.set(writable_for.as_secs_f64());
    }

    pub(crate) fn write_deadline_failed(&self) {
        self.write_deadline_errors.inc();
        self.write_deadline_seconds.set(-1.0);
    }

    pub(crate) fn mysqld_clock_stepped(&self, reason: &str) {
        count_reason(&self.mysqld_clock_steps, reason);
    }

    pub(crate) fn unauthenticated(&self, reason: &str) {
        count_reason(&self.unauthenticated, reason);
    }

    pub(crate) fn mysql_error(&self) {
        self.mysql_errors.inc();
    }

    /// The Prometheus text exposition.
    pub(crate) fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}
