//! Simulated sidecars running core's real lease rule ([`bloodraven_core::lease::SiteLease`]).
//!
//! Each sidecar reads its own drifting monotonic clock, asks its peers for a lease every
//! `duration / 3` over the simulated network, answers its peers' requests, and enforces the
//! write rule on its mysqld: on every state change, on a periodic tick, and exactly when its
//! held lease stops counting (a fence lead before it lapses) on its own clock. While its lease
//! counts it keeps mysqld's write deadline armed, and its watchdog
//! ([`crate::fencing`]) kills a mysqld it cannot fence. It also serves the operator's calls
//! (status, authority push, fence, promote, repoint).
//!
//! Like the live sidecar, it tells a mysqld restart from its observations (a new mysqld run)
//! and forgets its cached authority then (startup safety net), and a hung sidecar executes
//! nothing: its timers keep their rhythm but act only once it resumes.

use crate::clock::{DriftClock, SimTime, EPOCH_UNIX_MILLIS};
use crate::fencing::WATCHDOG_CHECK_MILLIS;
use crate::operator::{Mutation, WRITE_LEASE_MILLIS};
use crate::store::{site_of_source_host, GROUP};
use crate::trace;
use crate::world::{Event, World, SITE_NAMES};
use bloodraven_api::names;
use bloodraven_api::sidecar::{
    Authority, AuthorityResponse, FenceRequest, FenceResponse, LeaseRequest, LeaseResponse,
    LeaseTerms, MutationReport, MysqlObservation, MysqldRun, PromoteDrain, PromoteRequest,
    PromoteResponse, ReplicationState, RepointRequest, RepointResponse, SidecarRuntime,
    SidecarStatus,
};
use bloodraven_api::Timestamp;
use bloodraven_core::lease::{
    fence_lead_ms, Enforcement, LeaseConfig, MonotonicMillis, RoundId, SiteLease, Watchdog,
    WriteDecision,
};
use rand::Rng;
use std::time::Duration;

/// The sidecar's periodic enforcement tick, in milliseconds of its own clock.
pub const TICK_MILLIS: u64 = 250;

/// One simulated sidecar process.
#[derive(Debug)]
pub struct SimSidecar {
    /// Its site.
    pub site: usize,
    /// Its monotonic clock.
    pub clock: DriftClock,
    /// Incarnation counter: events of a dead run are dropped.
    pub run: u64,
    /// When this run started (true time), for `sidecar_uptime`.
    pub started_at: SimTime,
    /// The lease state; `None` while the process is down.
    pub lease: Option<SiteLease>,
    /// The watchdog's memory; `None` while the process is down.
    pub watchdog: Option<Watchdog>,
    /// Whether the process hangs: alive, executing nothing.
    pub hung: bool,
    /// Hangs of this run so far (the liveness restart names the one it is for).
    pub hang: u64,
    /// Operator requests its server accepted while it hung, served when it resumes.
    pub queued: Vec<Mutation>,
    /// The mysqld run it last observed; a different one is a restart under it.
    pub last_mysqld_run: Option<u64>,
    /// While hung: since when, and how long until its kubelet reads it not ready.
    pub hung_since: crate::kubelet::HungSince,
}

impl SimSidecar {
    /// A sidecar that has not started yet.
    pub fn new(site: usize, clock: DriftClock) -> SimSidecar {
        SimSidecar {
            site,
            clock,
            run: 0,
            started_at: SimTime(0),
            lease: None,
            watchdog: None,
            hung: false,
            hang: 0,
            queued: Vec::new(),
            last_mysqld_run: None,
            hung_since: None,
        }
    }

    /// Whether the process is running (hung or not).
    pub fn up(&self) -> bool {
        self.lease.is_some()
    }

    /// Whether the process runs and executes: up and not hung.
    pub fn serving(&self) -> bool {
        self.up() && !self.hung
    }

    /// The reading of its monotonic clock at true time `now`.
    pub fn mono(&self, now: SimTime) -> MonotonicMillis {
        MonotonicMillis(self.clock.read_millis(now))
    }

    /// True milliseconds until its clock has advanced by at least `mono_millis`.
    pub fn true_delay_for(&self, mono_millis: u64) -> u64 {
        self.clock.true_delay_for(mono_millis)
    }
}

fn lease_config(site: usize) -> Option<LeaseConfig> {
    LeaseConfig::new(
        GROUP,
        SITE_NAMES[site],
        SITE_NAMES,
        Duration::from_millis(WRITE_LEASE_MILLIS),
    )
    .ok()
}

/// The lease terms a sidecar with `config` runs with (reported in status, and in its pod's
/// flags).
pub fn lease_terms(config: &LeaseConfig) -> LeaseTerms {
    LeaseTerms {
        duration_ms: config.duration_ms(),
        sites: config.sites().to_vec(),
    }
}

/// The lease terms of the pod of `site` (every simulated pod runs the spec's).
pub fn pod_lease_terms(site: usize) -> Option<LeaseTerms> {
    lease_config(site).as_ref().map(lease_terms)
}

/// Wall-clock timestamp of true time `now` (sidecar status times are informational).
pub(crate) fn wall(now: SimTime) -> Timestamp {
    Timestamp::from_unix_millis(EPOCH_UNIX_MILLIS + i64::try_from(now.as_millis()).unwrap_or(0))
}

impl World {
    /// Starts (or restarts) the sidecar of `site`: no cached authority (startup safety net).
    pub fn start_sidecar(&mut self, site: usize) {
        let Some(config) = lease_config(site) else {
            return;
        };
        let sidecar = &mut self.sidecars[site];
        sidecar.run += 1;
        sidecar.started_at = self.now;
        sidecar.watchdog = Some(Watchdog::new(&config));
        sidecar.lease = Some(SiteLease::new(config));
        sidecar.hung = false;
        sidecar.hung_since = None;
        sidecar.hang = 0;
        sidecar.queued.clear();
        sidecar.last_mysqld_run = None;
        let run = sidecar.run;
        let first_tick = self.rng.random_range(1..TICK_MILLIS);
        self.schedule_in(
            first_tick,
            Event::SidecarTick {
                site,
                run,
                periodic: true,
            },
        );
        let first_renew = self.rng.random_range(1..100);
        self.schedule_in(first_renew, Event::LeaseRenew { site, run });
        let first_check = self.rng.random_range(1..=WATCHDOG_CHECK_MILLIS);
        self.schedule_in(first_check, Event::WatchdogCheck { site, run });
        self.enforce(site);
    }

    /// The sidecar process of `site` dies (its cached authority, lease and watchdog with it).
    pub fn stop_sidecar(&mut self, site: usize) {
        self.archive_sidecar_stopped(site);
        self.reseed_sidecar_stopped(site);
        let sidecar = &mut self.sidecars[site];
        sidecar.lease = None;
        sidecar.watchdog = None;
        sidecar.hung = false;
        sidecar.hung_since = None;
        sidecar.queued.clear();
    }

    /// The sidecar observes its mysqld, as its enforcer and its status handler do (the live
    /// sidecar's `set_observation`): the watchdog records what it saw, and a new mysqld run
    /// under a running sidecar makes it forget its cached authority (startup safety net).
    pub fn observe_mysqld(&mut self, site: usize) -> MysqlObservation {
        let observation = self.mysql_observation(site);
        let mysqld_run = self.sites[site].answers().then_some(self.sites[site].run);
        let sidecar = &mut self.sidecars[site];
        if let Some(watchdog) = sidecar.watchdog.as_mut() {
            watchdog.observe(observation.read_only, observation.down);
        }
        if let Some(run) = mysqld_run {
            let restarted = sidecar.last_mysqld_run.is_some_and(|last| last != run);
            sidecar.last_mysqld_run = Some(run);
            if restarted {
                if let Some(lease) = sidecar.lease.as_mut() {
                    let had_authority = lease.authority().is_some();
                    lease.forget_authority();
                    trace!(
                        self.trace,
                        self.now,
                        SITE_NAMES[site],
                        "sidecar sees mysqld restarted: forgets its authority (had one: \
                         {had_authority})"
                    );
                }
            }
        }
        observation
    }

    /// Applies the write rule to mysqld now (one pass of the live enforcer: observe, decide,
    /// act; the write deadline armed while the lease counts, and before any unfence).
    pub fn enforce(&mut self, site: usize) {
        if !self.sidecars[site].serving() {
            return;
        }
        let observation = self.observe_mysqld(site);
        if self.sites[site].answers() {
            self.sites[site].install_write_deadline();
        }
        let now = self.now;
        let mono = self.sidecars[site].mono(now);
        let Some(lease) = self.sidecars[site].lease.as_ref() else {
            return;
        };
        let desired = lease.desired(mono);
        let remaining = lease.lease_remaining_ms(mono);
        let observed = observation.read_only;
        // The live enforcer's rule, unfence margin included (AwaitRenewal: too little lease
        // left to make mysqld writable).
        match lease.enforcement(mono, observed) {
            Enforcement::Nothing | Enforcement::ObserveFirst | Enforcement::AwaitRenewal { .. } => {
                // Writable by right: keep mysqld's own deadline ahead of it.
                if desired == WriteDecision::Writable && observed == Some(false) {
                    self.arm_write_deadline(site);
                }
            }
            Enforcement::SetReadOnly {
                reason,
                topology_mismatch,
            } => {
                if self.sites[site].answers() && !self.sites[site].read_only {
                    self.sites[site].read_only = true;
                    trace!(
                        self.trace,
                        now,
                        SITE_NAMES[site],
                        "sidecar sets read_only ({}{})",
                        reason.as_str(),
                        if topology_mismatch {
                            ", topology mismatch"
                        } else {
                            ""
                        }
                    );
                }
            }
            Enforcement::SetWritable => {
                // Never writable without a deadline in the future: a sidecar that dies right
                // after this unfence leaves a mysqld that fences itself.
                if !self.arm_write_deadline(site) {
                    trace!(
                        self.trace,
                        now,
                        SITE_NAMES[site],
                        "not making mysqld writable: its write deadline could not be armed"
                    );
                    return;
                }
                self.sites[site].read_only = false;
                trace!(
                    self.trace,
                    now,
                    SITE_NAMES[site],
                    "sidecar clears read_only (lease {remaining} ms left)"
                );
            }
        }
    }

    /// Schedules a one-shot enforcement exactly when the held lease stops counting on this
    /// sidecar's clock, a fence lead before it lapses (the live enforcer's wake-up; the
    /// periodic tick alone would fence up to a tick late).
    fn schedule_expiry_wakeup(&mut self, site: usize) {
        let mono = self.sidecars[site].mono(self.now);
        let Some(lease) = self.sidecars[site].lease.as_ref() else {
            return;
        };
        let remaining = lease.lease_remaining_ms(mono);
        let lead = fence_lead_ms(lease.config());
        if remaining > lead {
            let delay = self.sidecars[site].true_delay_for(remaining - lead);
            let run = self.sidecars[site].run;
            self.schedule_in(
                delay,
                Event::SidecarTick {
                    site,
                    run,
                    periodic: false,
                },
            );
        }
    }

    /// The periodic tick of a sidecar.
    pub fn sidecar_tick(&mut self, site: usize, run: u64, periodic: bool) {
        if self.sidecars[site].run != run || !self.sidecars[site].up() {
            return;
        }
        // A hung sidecar enforces nothing (enforce checks); its timer keeps its rhythm.
        self.enforce(site);
        // Only the periodic chain reschedules itself; expiry wake-ups are one-shot.
        if periodic {
            let delay = self.sidecars[site].true_delay_for(TICK_MILLIS);
            self.schedule_in(
                delay,
                Event::SidecarTick {
                    site,
                    run,
                    periodic: true,
                },
            );
        }
    }

    /// The lease renewal timer: starts a round when this sidecar's authority names its site.
    pub fn lease_renew(&mut self, site: usize, run: u64) {
        if self.sidecars[site].run != run || !self.sidecars[site].up() {
            return;
        }
        let now = self.now;
        let mono = self.sidecars[site].mono(now);
        let interval = WRITE_LEASE_MILLIS / 3;
        let delay = self.sidecars[site].true_delay_for(interval);
        self.schedule_in(delay, Event::LeaseRenew { site, run });
        if self.sidecars[site].hung {
            return;
        }
        let Some(lease) = self.sidecars[site].lease.as_mut() else {
            return;
        };
        let Some((round, request)) = lease.begin_round(mono) else {
            return;
        };
        for peer in 0..SITE_NAMES.len() {
            if peer == site || !self.net.connected(site, peer) {
                continue;
            }
            let latency = self.latency();
            self.schedule_in(
                latency,
                Event::LeaseRequestArrives {
                    from: site,
                    to: peer,
                    request: request.clone(),
                    round: round.0,
                    run,
                },
            );
        }
        self.enforce(site);
    }

    /// A peer answers a lease request.
    pub fn lease_request_arrives(
        &mut self,
        from: usize,
        to: usize,
        request: &LeaseRequest,
        round: u64,
        run: u64,
    ) {
        if !self.net.connected(from, to) || self.sidecars[to].hung {
            // A hung peer answers nothing; the requester's round goes without its vote.
            return;
        }
        let mono = self.sidecars[to].mono(self.now);
        let Some(lease) = self.sidecars[to].lease.as_mut() else {
            return;
        };
        let response = lease.answer_lease(request, mono);
        let latency = self.latency();
        self.schedule_in(
            latency,
            Event::LeaseResponseArrives {
                from: to,
                to: from,
                response,
                round,
                run,
            },
        );
    }

    /// The requester records a peer's answer.
    pub fn lease_response_arrives(
        &mut self,
        from: usize,
        to: usize,
        response: &LeaseResponse,
        round: u64,
        run: u64,
    ) {
        if self.sidecars[to].run != run || !self.net.connected(from, to) || self.sidecars[to].hung {
            return;
        }
        let Some(lease) = self.sidecars[to].lease.as_mut() else {
            return;
        };
        if lease.record_peer_response(RoundId(round), SITE_NAMES[from], response) {
            self.enforce(to);
            self.schedule_expiry_wakeup(to);
        }
    }

    fn mysql_observation(&self, site: usize) -> MysqlObservation {
        let mysqld = &self.sites[site];
        if !mysqld.mysqld_up {
            return MysqlObservation {
                reachable: false,
                error: Some("connect to mysqld: connection refused".to_string()),
                down: true,
                read_only: None,
                gtid_executed: None,
                replication: None,
                mysqld: None,
            };
        }
        if mysqld.frozen {
            // Three-way reading: a frozen mysqld accepts the connection and answers nothing.
            return MysqlObservation {
                reachable: false,
                error: Some("observe mysqld: statement timed out".to_string()),
                down: false,
                read_only: None,
                gtid_executed: None,
                replication: None,
                mysqld: None,
            };
        }
        let replication = mysqld.source.map(|source| ReplicationState {
            running: mysqld.replicating(),
            source_host: Some(names::source_host(
                GROUP,
                SITE_NAMES[source],
                crate::store::NAMESPACE,
            )),
            source_port: Some(names::PORT_MYSQL),
            seconds_behind_source: mysqld.seconds_behind_source(self.now),
            last_error: mysqld.replication_error.clone(),
        });
        let uptime = self.now.millis_since(mysqld.started_at);
        MysqlObservation {
            reachable: true,
            error: None,
            down: false,
            read_only: Some(mysqld.read_only),
            gtid_executed: Some(mysqld.executed.server_text()),
            replication,
            mysqld: Some(MysqldRun {
                server_id: mysqld.server_id.to_string(),
                uptime_seconds: uptime / 1000,
                started_at: wall(mysqld.started_at),
            }),
        }
    }

    /// `GET /v1/status` of the sidecar of `site`; `None` when the process is down or hung.
    pub fn sidecar_status(&mut self, site: usize) -> Option<SidecarStatus> {
        if !self.sidecars[site].serving() {
            return None;
        }
        let mysql = self.observe_mysqld(site);
        let sidecar = &self.sidecars[site];
        let lease = sidecar.lease.as_ref()?;
        let mono = sidecar.mono(self.now);
        Some(SidecarStatus {
            group: GROUP.to_string(),
            site: SITE_NAMES[site].to_string(),
            observed_at: wall(self.now),
            mysql,
            fenced: lease.desired(mono).read_only(),
            fence: lease.fence_state().cloned(),
            lease: lease.lease_state(mono),
            authority: lease.authority().cloned(),
            known_generation: lease.known_generation(),
            latest_authority: lease.latest_authority().cloned(),
            last_granted_ago_ms: lease.last_granted_ago_ms(mono),
            backups: self.jobs[site]
                .backups
                .iter()
                .map(|(info, _)| info.clone())
                .collect(),
            job: self.jobs[site].job.clone(),
            runtime: Some(SidecarRuntime {
                uptime_ms: mono.millis_since(sidecar.mono(sidecar.started_at)),
                lease: lease_terms(lease.config()),
            }),
        })
    }

    /// `PUT /v1/authority` on the sidecar of `site`.
    pub fn sidecar_push_authority(
        &mut self,
        site: usize,
        authority: &Authority,
    ) -> Option<AuthorityResponse> {
        let mono = self.sidecars[site].mono(self.now);
        let lease = self.sidecars[site].lease.as_mut()?;
        let decision = lease.push_authority(authority.clone());
        if decision == bloodraven_api::sidecar::AuthorityDecision::Accepted
            || !decision.is_in_force()
        {
            let cached = lease
                .authority()
                .map(|a| (a.active_site.clone(), a.topology_generation));
            trace!(
                self.trace,
                self.now,
                SITE_NAMES[site],
                "authority {:?} gen {}: {decision:?} (cached {cached:?})",
                authority.active_site,
                authority.topology_generation
            );
        }
        let response = AuthorityResponse {
            decision,
            cached: lease.authority().cloned(),
            last_granted_ago_ms: lease.last_granted_ago_ms(mono),
        };
        self.enforce(site);
        Some(response)
    }

    /// `POST /v1/fence` on the sidecar of `site`.
    pub fn sidecar_fence(&mut self, site: usize, request: &FenceRequest) -> Option<FenceResponse> {
        let lease = self.sidecars[site].lease.as_mut()?;
        if request.group != GROUP {
            return None;
        }
        let fence = lease.fence(request.topology_generation, request.reason.clone());
        // A frozen mysqld executes neither the SET nor the kill.
        let answers = self.sites[site].answers();
        if answers && !self.sites[site].read_only {
            trace!(
                self.trace,
                self.now,
                SITE_NAMES[site],
                "fenced by operator: {}",
                request.reason
            );
        }
        if answers {
            self.sites[site].read_only = true;
            if request.kill_connections {
                self.sites[site].kill_client_connections();
            }
        }
        self.enforce(site);
        let killed = (request.kill_connections && answers).then_some(0);
        Some(FenceResponse {
            fence,
            read_only: self.mutation_report(site, None),
            killed_connections: killed,
        })
    }

    /// `POST /v1/promote` on the sidecar of `site`: drain the relay log, detach replication.
    pub fn sidecar_promote(
        &mut self,
        site: usize,
        request: &PromoteRequest,
    ) -> Option<PromoteResponse> {
        self.sidecars[site].lease.as_ref()?;
        if request.group != GROUP || !self.sites[site].answers() {
            return None;
        }
        // The simulated applier is instant: the whole relay log is applied either way.
        let applied = self.sites[site].apply_relay();
        let (drained, detach) = match &request.drain {
            // Everything received is applied; detached whether or not (the real sidecar
            // detaches after its bound too).
            PromoteDrain::Received => (true, true),
            PromoteDrain::UntilGtidSet(text) => {
                let reached =
                    match bloodraven_mysql::GtidSet::parse(bloodraven_mysql::Flavor::MariaDb, text)
                    {
                        Ok(target) => self.sites[site].executed.gtid_set().contains(&target),
                        Err(_) => false,
                    };
                (reached, reached)
            }
        };
        if detach {
            self.sites[site].replication_enabled = false;
            self.sites[site].source = None;
        }
        trace!(
            self.trace,
            self.now,
            SITE_NAMES[site],
            "promote: drained {applied} relayed, detached={drained}"
        );
        Some(PromoteResponse {
            drained,
            detach: self.mutation_report(site, None),
        })
    }

    /// `POST /v1/repoint` on the sidecar of `site`.
    pub fn sidecar_repoint(
        &mut self,
        site: usize,
        request: &RepointRequest,
    ) -> Option<RepointResponse> {
        let lease = self.sidecars[site].lease.as_ref()?;
        // The live sidecar's rule: the site its authority names never replicates (409).
        if lease
            .authority()
            .is_some_and(|authority| authority.active_site.as_deref() == Some(SITE_NAMES[site]))
        {
            return None;
        }
        let source = site_of_source_host(&request.source_host)?;
        if request.group != GROUP || !self.sites[site].answers() || source == site {
            return None;
        }
        if self.sites[site].source != Some(source) || !self.sites[site].replication_enabled {
            trace!(
                self.trace,
                self.now,
                SITE_NAMES[site],
                "repointed to {}",
                SITE_NAMES[source]
            );
        }
        // A catch-up applies what was received first (the simulated applier is instant);
        // any other repoint's CHANGE MASTER deletes the relay log.
        if request.drain_received_ms.is_some() {
            self.sites[site].apply_relay();
        } else {
            let discarded = self.sites[site].discard_relay();
            if !discarded.is_empty() {
                trace!(
                    self.trace,
                    self.now,
                    SITE_NAMES[site],
                    "repoint discarded {} relayed",
                    discarded.count()
                );
                self.checker.on_relay_discarded(site, &discarded);
                self.data_removed = Some(format!(
                    "the repoint of {} to {} deleting its relay log",
                    SITE_NAMES[site], SITE_NAMES[source]
                ));
            }
        }
        self.sites[site].source = Some(source);
        self.sites[site].replication_enabled = true;
        // START REPLICA re-evaluates a stopped IO thread at once: a diverged replica fails
        // again on connect.
        self.sites[site].replication_error = None;
        if self.sites[source].answers() && self.net.connected(site, source) {
            let source_executed = self.sites[source].executed.clone();
            let now = self.now;
            self.sites[site].receive_from(&source_executed, now);
        }
        Some(RepointResponse {
            repoint: self.mutation_report(site, None),
        })
    }

    fn mutation_report(&self, site: usize, error: Option<String>) -> MutationReport {
        MutationReport {
            error,
            observed: self.mysql_observation(site),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/operator.md#authority-sidecars-and-fencing: lease expiry is measured on the
    // requester's own monotonic clock; the simulator's wake-up must land no earlier than the
    // moment that clock reads the deadline.
    #[test]
    fn expiry_wakeup_is_never_early_on_a_drifting_clock() {
        for drift in [-500, -37, 0, 211, 500] {
            let sidecar = SimSidecar::new(0, DriftClock::new(1_000_000, drift));
            for start in [0u64, 1, 999, 123_457] {
                let now = SimTime(start);
                let before = sidecar.mono(now).0;
                let delay = sidecar.true_delay_for(6_000);
                let after = sidecar.mono(now.plus_millis(delay)).0;
                assert!(after - before >= 6_000, "drift {drift} start {start}");
                assert!(delay <= 6_005, "drift {drift}: {delay} ms is late");
            }
        }
    }
}
