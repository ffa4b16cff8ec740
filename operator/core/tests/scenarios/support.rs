//! A small deterministic world for the core scenario tests: three fake sites (iad, pdx
//! read-write; reader read-only) whose sidecars follow the lease rule, replicas that copy
//! their source's GTID set, and an API store for annotations, taints and the DNSEndpoint.
//!
//! It is deliberately simpler than `bloodraven-sim` (no message loss, instant replication):
//! just enough to drive `decide` over many polls and check what a rule of docs/design says.

use std::collections::{BTreeMap, BTreeSet};

use bloodraven_api::{
    names,
    sidecar::{
        Authority, BackupInfo, FenceState, JobKind, JobState, JobStatus, LeaseState, LeaseTerms,
        MysqlObservation, MysqldRun, ReplicationState, SidecarRuntime, SidecarStatus,
    },
    DNSEndpointSpec, DnsSpec, GoDuration, MysqlFailoverGroupSpec, OnCooldown,
    PlannedFailoverPolicy, ReturningPrimaryPolicy, SiteRole, SiteSpec, WriteLeaseSpec,
};
use bloodraven_core::deploy::{HoldInfo, RevokeReason};
use bloodraven_core::engine::{
    decide_with_options, Action, AnnotationChange, DecideOptions, Decision, DnsReading, Event,
    EventReason, FailoverNote, GroupAnnotations, GroupMemory, NoteReading, Observation, PodFacts,
    PodReading, SidecarReading, SiteObservation,
};
use bloodraven_core::time::{Duration, Timestamp};
use bloodraven_mysql::{Gtid, GtidSet};

fn job(kind: JobKind, name: &str, restore_id: u64, state: JobState, now: Timestamp) -> JobStatus {
    JobStatus {
        kind,
        name: name.to_string(),
        restore_id,
        state,
        started_at: now,
        finished_at: (state != JobState::Running).then_some(now),
        gtid_set: None,
        message: None,
    }
}

/// The world's tick: lease renewals and replication run at this granularity.
pub const TICK: Duration = Duration::from_millis(500);
/// Start of every scenario (2026-11-30T00:00:00Z).
pub const EPOCH: Timestamp = Timestamp(1_796_000_000_000);

/// The playground spec: iad, pdx (read-write), reader (read-only, inherits maxLagSeconds 30);
/// poll 2s, threshold 3, cooldown 30s, lease default (6s), DNS ttl 10.
pub fn playground_spec() -> MysqlFailoverGroupSpec {
    MysqlFailoverGroupSpec {
        flavor: bloodraven_api::Flavor::Mariadb,
        image: "mariadb:10.11".to_string(),
        sites: vec![
            site("iad", SiteRole::ReadWrite, None),
            site("pdx", SiteRole::ReadWrite, None),
            site("reader", SiteRole::ReadOnly, None),
        ],
        initial_active_site: "iad".to_string(),
        poll_interval: GoDuration::from_secs(2),
        failure_threshold: 3,
        max_lag_seconds: 30,
        failover_cooldown: GoDuration::from_secs(30),
        planned_failover: PlannedFailoverPolicy {
            on_cooldown: OnCooldown::Reject,
        },
        write_lease: WriteLeaseSpec { duration: None },
        returning_primary: ReturningPrimaryPolicy::default(),
        dns: Some(DnsSpec {
            hostname: "playground-db.example.local".to_string(),
            ttl: 10,
        }),
    }
}

fn site(name: &str, role: SiteRole, lag: Option<u64>) -> SiteSpec {
    SiteSpec {
        name: name.to_string(),
        role,
        read_only_max_lag_seconds: lag,
        node_selector: BTreeMap::new(),
    }
}

/// One fake site: mysqld + sidecar.
#[derive(Clone, Debug)]
pub struct FakeSite {
    pub name: String,
    pub server_id: u32,
    /// The sidecar process runs.
    pub sidecar_alive: bool,
    /// mysqld runs.
    pub mysql_up: bool,
    /// mysqld runs (and may be writable) but the sidecar cannot read it: access denied, a
    /// query error (docs/design/history.md#issue-10-case-1: unknown, not down).
    pub mysql_unreadable: bool,
    /// The operator cannot reach this sidecar (the site may still reach its peers).
    pub operator_cut: bool,
    /// The site cannot reach its peers nor they it.
    pub peer_cut: bool,
    pub read_only: bool,
    pub gtid: GtidSet,
    pub source: Option<String>,
    pub running: bool,
    pub seconds_behind: u64,
    pub authority: Option<Authority>,
    /// The greatest generation the sidecar reports knowing (`SidecarStatus::known_generation`).
    pub known_generation: Option<u64>,
    /// The authority the sidecar reports it accepted last, also after forgetting it.
    pub latest_authority: Option<Authority>,
    pub fence_generation: Option<u64>,
    /// Requester side: the lease ends here (measured from the request's send time).
    pub lease_until: Option<Timestamp>,
    /// Grantor side: when this sidecar last granted each site.
    pub granted_at: BTreeMap<String, Timestamp>,
    pub mysqld_started_at: Timestamp,
    pub sidecar_started_at: Timestamp,
    pub node: String,
    pub cluster_ip: String,
    /// The lease duration this sidecar grants and asks for; `None`: the spec's.
    pub lease_duration: Option<Duration>,
    /// The sites this sidecar counts its majority of; `None`: the spec's.
    pub lease_sites: Option<Vec<String>>,
    /// The sidecar reports its uptime and lease terms in status (`SidecarStatus::runtime`).
    pub reports_runtime: bool,
    /// The lease terms the operator reads from the site pod, if any.
    pub pod_lease_terms: Option<LeaseTerms>,
    /// The sidecar container's start as the pod status says it (`None`: the true start). The
    /// pod status lags a container restart.
    pub pod_started_at: Option<Timestamp>,
    /// mysqld is frozen (SIGSTOP): it executes nothing, its `read_only` included, until
    /// thawed or killed.
    pub frozen: bool,
    /// The site's node reports Ready and its kubelet carries out pod deletions.
    pub kubelet_up: bool,
    /// The operator cannot read the site's node (its `Ready` condition is unknown).
    pub node_unreadable: bool,
    /// A pod deletion takes the grace period: the pod stays, terminating, its containers
    /// running, until the test clears this.
    pub deletion_lingers: bool,
    /// The site pod is terminating (a deletion that lingers).
    pub terminating: bool,
    /// What the kubelet says of the sidecar container's readiness when it is not what the
    /// sidecar's life says (`None`): a sidecar its kubelet just started again answers before its
    /// readiness probe ran.
    pub kubelet_sidecar_ready: Option<bool>,
    /// How many times the site pod was recreated (its uid is `<site>-<n>`).
    pub pod_generation: u64,
    /// When the current site pod was created.
    pub pod_created_at: Timestamp,
    /// Pod deletions the kubelet carried out (uids).
    pub pods_deleted: Vec<String>,
    /// Backups on the site's volume (`/v1/backup`).
    pub backups: Vec<BackupInfo>,
    /// The sidecar's backup job.
    pub job: Option<JobStatus>,
    /// A restore or re-seed here fails with this message.
    pub job_fails: Option<String>,
    /// A restore or re-seed here stays running.
    pub job_hangs: bool,
    /// Archives on the site's volume (`/v1/archive`): name and the errant GTID set each holds.
    pub archives: Vec<(String, GtidSet)>,
    /// An archive here fails with this message.
    pub archive_fails: Option<String>,
    /// An archive here stays running.
    pub archive_hangs: bool,
    /// The image the site pod's mysql container runs.
    pub image: String,
    /// The image of the site StatefulSet's template (a recreated pod runs it).
    pub template_image: String,
    /// A pod recreated by an ordered update does not come back (its mysqld and sidecar stay
    /// down): the update must wait for it and fail after its bound.
    pub recreation_stalls: bool,
    /// `RollSite` actions executed on this site.
    pub rolls: usize,
}

impl FakeSite {
    /// `metadata.uid` of the current site pod.
    pub fn pod_uid(&self) -> String {
        format!("{}-{}", self.name, self.pod_generation)
    }
}

/// The world.
pub struct World {
    pub group: String,
    pub namespace: String,
    pub spec: MysqlFailoverGroupSpec,
    pub now: Timestamp,
    /// Time advanced since the last sidecar tick (durations that are not whole ticks add up).
    since_tick: Duration,
    /// What the next observation says its reads began at (`None`: the decision time).
    pub polled_at: Option<Timestamp>,
    pub sites: Vec<FakeSite>,
    pub memory: GroupMemory,
    pub annotations: GroupAnnotations,
    pub hold: Option<HoldInfo>,
    pub dns: Option<DNSEndpointSpec>,
    pub dns_writes_denied: bool,
    /// Backups taken from now on have a `mariadb-backup` copy (a physical restore is possible).
    pub backups_have_copies: bool,
    /// Pod deletions are refused (RBAC): the kubelet never hears of them.
    pub pod_deletes_denied: bool,
    pub taints: BTreeSet<String>,
    pub revocations: Vec<(RevokeReason, u64)>,
    pub events: Vec<(Timestamp, Event)>,
    pub decisions: Vec<(Timestamp, Decision)>,
    pub options: DecideOptions,
    /// Ticks at which two or more sites were writable at once.
    pub split_brain_at: Vec<Timestamp>,
    next_seq: u64,
}

impl World {
    /// The playground, every site up, nothing issued yet; all sites at the same GTID set.
    pub fn playground() -> World {
        Self::with_spec(playground_spec())
    }

    /// A world for `spec` (site names must be iad, pdx, reader or anything: server ids and
    /// addresses are assigned in order).
    pub fn with_spec(spec: MysqlFailoverGroupSpec) -> World {
        let group = "playground".to_string();
        let mut base = GtidSet::empty(bloodraven_mysql::Flavor::MariaDb);
        for seq in 1..=10 {
            base.insert(Gtid::mariadb(0, 1, seq));
        }
        let sites = spec
            .sites
            .iter()
            .enumerate()
            .map(|(index, site)| {
                let id = u32::try_from(index).unwrap_or(0) + 1;
                FakeSite {
                    name: site.name.clone(),
                    server_id: id,
                    sidecar_alive: true,
                    mysql_up: true,
                    mysql_unreadable: false,
                    operator_cut: false,
                    peer_cut: false,
                    read_only: true,
                    gtid: base.clone(),
                    source: None,
                    running: false,
                    seconds_behind: 0,
                    authority: None,
                    known_generation: None,
                    latest_authority: None,
                    fence_generation: None,
                    lease_until: None,
                    granted_at: BTreeMap::new(),
                    mysqld_started_at: EPOCH.saturating_sub(Duration::from_secs(3600)),
                    sidecar_started_at: EPOCH.saturating_sub(Duration::from_secs(3600)),
                    node: format!("node-{}", site.name),
                    cluster_ip: format!("10.96.100.{}", 10 * id),
                    lease_duration: None,
                    lease_sites: None,
                    reports_runtime: true,
                    pod_lease_terms: None,
                    pod_started_at: None,
                    frozen: false,
                    kubelet_up: true,
                    node_unreadable: false,
                    deletion_lingers: false,
                    kubelet_sidecar_ready: None,
                    terminating: false,
                    pod_generation: 0,
                    pod_created_at: EPOCH.saturating_sub(Duration::from_secs(3600)),
                    pods_deleted: Vec::new(),
                    backups: Vec::new(),
                    job: None,
                    job_fails: None,
                    job_hangs: false,
                    archives: Vec::new(),
                    archive_fails: None,
                    archive_hangs: false,
                    image: spec.image.clone(),
                    template_image: spec.image.clone(),
                    recreation_stalls: false,
                    rolls: 0,
                }
            })
            .collect();
        let memory = GroupMemory::initial(&spec);
        World {
            group,
            namespace: names::PLAYGROUND_NAMESPACE.to_string(),
            spec,
            now: EPOCH,
            since_tick: Duration::ZERO,
            polled_at: None,
            sites,
            memory,
            annotations: GroupAnnotations::default(),
            hold: None,
            dns: None,
            dns_writes_denied: false,
            backups_have_copies: false,
            pod_deletes_denied: false,
            taints: BTreeSet::new(),
            revocations: Vec::new(),
            events: Vec::new(),
            decisions: Vec::new(),
            options: DecideOptions::default(),
            split_brain_at: Vec::new(),
            next_seq: 11,
        }
    }

    pub fn site(&self, name: &str) -> &FakeSite {
        self.sites
            .iter()
            .find(|s| s.name == name)
            .expect("known site")
    }

    pub fn site_mut(&mut self, name: &str) -> &mut FakeSite {
        self.sites
            .iter_mut()
            .find(|s| s.name == name)
            .expect("known site")
    }

    /// The lease terms `site`'s sidecar runs with (its own, else the spec's).
    pub fn lease_terms(&self, site: &FakeSite) -> LeaseTerms {
        LeaseTerms {
            duration_ms: site
                .lease_duration
                .unwrap_or_else(|| self.spec.effective_write_lease())
                .as_millis() as u64,
            sites: site
                .lease_sites
                .clone()
                .unwrap_or_else(|| self.spec.sites.iter().map(|s| s.name.clone()).collect()),
        }
    }

    /// What the operator reads now.
    pub fn observe(&self) -> Observation {
        Observation {
            group: self.group.clone(),
            namespace: self.namespace.clone(),
            sites: self
                .sites
                .iter()
                .map(|site| self.observe_site(site))
                .collect(),
            annotations: self.annotations.clone(),
            deploy_hold: self.hold.clone(),
            dns: match &self.dns {
                Some(spec) => DnsReading::Present(spec.clone()),
                None => DnsReading::Absent,
            },
            polled_at: self.polled_at,
        }
    }

    fn observe_site(&self, site: &FakeSite) -> SiteObservation {
        let sidecar = if !site.sidecar_alive || site.operator_cut {
            SidecarReading::Unreachable {
                error: "connection refused".to_string(),
            }
        } else {
            let replication = site.source.as_ref().map(|source| ReplicationState {
                running: site.running,
                source_host: Some(names::source_host(&self.group, source, &self.namespace)),
                source_port: Some(names::PORT_MYSQL),
                seconds_behind_source: site.running.then_some(site.seconds_behind),
                last_error: None,
            });
            let held = site.lease_until.is_some_and(|until| until > self.now);
            SidecarReading::Reachable(Box::new(SidecarStatus {
                group: self.group.clone(),
                site: site.name.clone(),
                observed_at: self.now,
                mysql: MysqlObservation {
                    reachable: site.mysql_up && !site.mysql_unreadable,
                    error: if !site.mysql_up {
                        Some("connection refused".to_string())
                    } else if site.mysql_unreadable {
                        Some("ERROR 1045 (28000): Access denied".to_string())
                    } else {
                        None
                    },
                    down: !site.mysql_up,
                    read_only: (site.mysql_up && !site.mysql_unreadable).then_some(site.read_only),
                    gtid_executed: (site.mysql_up && !site.mysql_unreadable)
                        .then(|| site.gtid.to_string()),
                    replication: if site.mysql_up && !site.mysql_unreadable {
                        replication
                    } else {
                        None
                    },
                    mysqld: (site.mysql_up && !site.mysql_unreadable).then(|| MysqldRun {
                        server_id: site.server_id.to_string(),
                        uptime_seconds: self
                            .now
                            .saturating_duration_since(site.mysqld_started_at)
                            .as_secs(),
                        started_at: site.mysqld_started_at,
                    }),
                },
                fenced: site.read_only,
                fence: site.fence_generation.map(|topology_generation| FenceState {
                    topology_generation,
                    reason: "fenced by the operator".to_string(),
                }),
                lease: LeaseState {
                    held,
                    remaining_ms: site
                        .lease_until
                        .map(|until| until.saturating_duration_since(self.now).as_millis() as u64)
                        .unwrap_or(0),
                },
                authority: site.authority.clone(),
                known_generation: site.known_generation,
                latest_authority: site.latest_authority.clone(),
                last_granted_ago_ms: site
                    .granted_at
                    .iter()
                    .map(|(name, at)| {
                        (
                            name.clone(),
                            self.now.saturating_duration_since(*at).as_millis() as u64,
                        )
                    })
                    .collect(),
                backups: site.backups.clone(),
                job: site.job.clone(),
                runtime: site.reports_runtime.then(|| SidecarRuntime {
                    uptime_ms: self
                        .now
                        .saturating_duration_since(site.sidecar_started_at)
                        .as_millis() as u64,
                    lease: self.lease_terms(site),
                }),
            }))
        };
        SiteObservation {
            site: site.name.clone(),
            sidecar,
            node_name: Some(site.node.clone()),
            service_cluster_ip: Some(site.cluster_ip.clone()),
            sidecar_uptime: site.sidecar_alive.then(|| {
                self.now.saturating_duration_since(
                    site.pod_started_at.unwrap_or(site.sidecar_started_at),
                )
            }),
            pod_lease_terms: site.pod_lease_terms.clone(),
            pod: PodReading::Present(PodFacts {
                uid: site.pod_uid(),
                created_at: site.pod_created_at,
                terminating: site.terminating,
                sidecar_ready: site.kubelet_sidecar_ready.unwrap_or(site.sidecar_alive),
                mysql_running: site.mysql_up,
                mysql_image: Some(site.image.clone()),
                node_ready: (!site.node_unreadable).then_some(site.kubelet_up),
            }),
        }
    }

    /// One operator poll: observe, decide, execute, persist.
    pub fn poll(&mut self) -> Decision {
        let observation = self.observe();
        self.decide_and_execute(&observation)
    }

    /// One poll in which every sidecar read failed (timed out, say) while the mutations it
    /// decides still land wherever the operator reaches: a read that timed out, a push that
    /// did not (simulator seed 693 with `--status-revert`).
    pub fn poll_with_failed_reads(&mut self) -> Decision {
        let cut: Vec<bool> = self.sites.iter().map(|site| site.operator_cut).collect();
        for site in &mut self.sites {
            site.operator_cut = true;
        }
        let observation = self.observe();
        for (site, was_cut) in self.sites.iter_mut().zip(cut) {
            site.operator_cut = was_cut;
        }
        self.decide_and_execute(&observation)
    }

    fn decide_and_execute(&mut self, observation: &Observation) -> Decision {
        let decision = decide_with_options(
            &self.spec,
            &self.memory,
            observation,
            self.now,
            self.options,
        );
        for action in &decision.actions {
            self.execute(action);
        }
        self.memory = decision.memory.clone();
        self.decisions.push((self.now, decision.clone()));
        decision
    }

    fn reachable_by_operator(&self, name: &str) -> bool {
        let site = self.site(name);
        site.sidecar_alive && !site.operator_cut
    }

    fn execute(&mut self, action: &Action) {
        let group = self.group.clone();
        let now = self.now;
        match action {
            Action::TaintNode { node, .. } => {
                self.taints.insert(node.clone());
            }
            Action::UntaintNode { node, .. } => {
                self.taints.remove(node);
            }
            Action::PushAuthority { site, authority }
            | Action::AnnounceAuthorityMove { site, authority } => {
                if !self.reachable_by_operator(site) {
                    return;
                }
                let target = self.site_mut(site);
                if authority
                    .decide_against(&group, target.authority.as_ref())
                    .is_in_force()
                {
                    target.authority = Some(authority.clone());
                    if target
                        .fence_generation
                        .is_some_and(|g| authority.topology_generation > g)
                    {
                        target.fence_generation = None;
                    }
                }
            }
            Action::Fence { site, request } => {
                if !self.reachable_by_operator(site) {
                    return;
                }
                let target = self.site_mut(site);
                target.fence_generation = Some(request.topology_generation);
                if target.mysql_up {
                    target.read_only = true;
                }
            }
            Action::Promote { site, .. } => {
                if !self.reachable_by_operator(site) || !self.site(site).mysql_up {
                    return;
                }
                let source_gtid = self
                    .site(site)
                    .source
                    .clone()
                    .filter(|source| self.site(source).mysql_up && !self.site(source).peer_cut)
                    .map(|source| self.site(&source).gtid.clone());
                let target = self.site_mut(site);
                if let Some(gtid) = source_gtid {
                    if target.running {
                        target.gtid = target.gtid.union(&gtid);
                    }
                }
                target.source = None;
                target.running = false;
            }
            Action::Repoint { site, request } => {
                if !self.reachable_by_operator(site) || !self.site(site).mysql_up {
                    return;
                }
                let namespace = self.namespace.clone();
                let source = self
                    .sites
                    .iter()
                    .find(|s| {
                        names::source_host(&group, &s.name, &namespace) == request.source_host
                    })
                    .map(|s| s.name.clone());
                let target = self.site_mut(site);
                target.source = source;
                target.running = true;
            }
            Action::ApplyDnsEndpoint { spec, .. } => {
                if !self.dns_writes_denied {
                    self.dns = Some(spec.clone());
                }
            }
            Action::RevokeDeployLeases {
                reason,
                topology_generation,
            } => {
                self.revocations.push((*reason, *topology_generation));
            }
            Action::Annotate(change) => match change {
                AnnotationChange::SetCooldownUntil(until) => {
                    self.annotations.cooldown_until = Some(*until)
                }
                AnnotationChange::ClearPlannedFailover => self.annotations.planned_failover = None,
                AnnotationChange::ClearRevokeDeploymentLeases => {
                    self.annotations.revoke_deployment_leases = false
                }
                // The shell signs the note it writes with the group's key, so it reads back
                // verified.
                AnnotationChange::SetLastFailover(text) => {
                    self.annotations.last_failover =
                        FailoverNote::read(text).map(|read| read.map(NoteReading::verified))
                }
                AnnotationChange::ClearBackup => self.annotations.backup = None,
                AnnotationChange::ClearRestore => self.annotations.restore = None,
                AnnotationChange::ClearRejoin => self.annotations.rejoin = None,
            },
            Action::Archive { site, request } => {
                if !self.reachable_by_operator(site) || !self.site(site).mysql_up {
                    return;
                }
                let target = self.site_mut(site);
                // The sidecar's rule (`ArchiveRequest`): only under an explicit fence, mysqld
                // read-only, and only of transactions the site holds.
                if target.fence_generation.is_none() || !target.read_only {
                    return;
                }
                let Ok(errant) = GtidSet::parse(target.gtid.flavor(), &request.errant_gtid_set)
                else {
                    return;
                };
                if !target.gtid.contains(&errant) {
                    return;
                }
                // The job it already has is answered, never run twice.
                if target.job.as_ref().is_some_and(|current| {
                    current.is(JobKind::Archive, &request.name, request.rejoin_id)
                }) {
                    return;
                }
                let mut status = job(
                    JobKind::Archive,
                    &request.name,
                    request.rejoin_id,
                    JobState::Running,
                    now,
                );
                if let Some(why) = target.archive_fails.clone() {
                    status.state = JobState::Failed;
                    status.message = Some(why);
                } else if !target.archive_hangs {
                    target.archives.push((request.name.clone(), errant));
                    status.state = JobState::Succeeded;
                }
                target.job = Some(status);
            }
            Action::Backup { site, request } => {
                if !self.reachable_by_operator(site) || !self.site(site).mysql_up {
                    return;
                }
                let copies = self.backups_have_copies;
                let target = self.site_mut(site);
                if !target.backups.iter().any(|b| b.name == request.name) {
                    target.backups.push(BackupInfo {
                        name: request.name.clone(),
                        site: site.clone(),
                        created_at: now,
                        gtid_set: target.gtid.to_string(),
                        databases: vec!["app".to_string()],
                        logical_bytes: 1,
                        physical: copies,
                        physical_gtid_set: copies.then(|| target.gtid.to_string()),
                    });
                }
                target.job = Some(job(
                    JobKind::Backup,
                    &request.name,
                    0,
                    JobState::Succeeded,
                    now,
                ));
            }
            Action::Restore { site, request } => {
                if !self.reachable_by_operator(site) || !self.site(site).mysql_up {
                    return;
                }
                let target = self.site_mut(site);
                // The sidecar's rule: only under an explicit fence, mysqld read-only.
                if target.fence_generation.is_none() || !target.read_only {
                    return;
                }
                // The sidecar answers a request for the job it already has (same kind, backup
                // and restore id) with that job, run or not: it never runs it twice.
                if target.job.as_ref().is_some_and(|current| {
                    current.is(JobKind::Restore, &request.name, request.restore_id)
                }) {
                    return;
                }
                let mut status = job(
                    JobKind::Restore,
                    &request.name,
                    request.restore_id,
                    JobState::Running,
                    now,
                );
                if let Some(why) = target.job_fails.clone() {
                    status.state = JobState::Failed;
                    status.message = Some(why);
                } else if !target.job_hangs {
                    let Some(backup) = target.backups.iter().find(|b| b.name == request.name)
                    else {
                        return;
                    };
                    let Ok(text) = backup.gtid_set_for(request.method) else {
                        // The real sidecar refuses it (409): nothing runs.
                        return;
                    };
                    let gtid = GtidSet::parse(target.gtid.flavor(), text).expect("backup set");
                    target.gtid = gtid;
                    target.source = None;
                    target.running = false;
                    status.state = JobState::Succeeded;
                    status.gtid_set = Some(target.gtid.to_string());
                }
                target.job = Some(status);
            }
            Action::Reseed { site, request } => {
                if !self.reachable_by_operator(site) || !self.site(site).mysql_up {
                    return;
                }
                let namespace = self.namespace.clone();
                let Some(source) = self
                    .sites
                    .iter()
                    .find(|s| {
                        names::source_host(&group, &s.name, &namespace) == request.source_host
                    })
                    .map(|s| (s.name.clone(), s.gtid.clone()))
                else {
                    return;
                };
                let target = self.site_mut(site);
                // The sidecar stops replication first.
                target.source = None;
                target.running = false;
                let name = format!("{}:{}", request.source_host, request.source_port);
                let mut status = job(
                    JobKind::Reseed,
                    &name,
                    request.restore_id,
                    JobState::Running,
                    now,
                );
                if let Some(why) = target.job_fails.clone() {
                    status.state = JobState::Failed;
                    status.message = Some(why);
                } else if !target.job_hangs {
                    target.gtid = source.1;
                    target.source = Some(source.0);
                    target.running = true;
                    status.state = JobState::Succeeded;
                    status.gtid_set = Some(target.gtid.to_string());
                }
                target.job = Some(status);
            }
            Action::DeletePod { site, uid, .. } => {
                let target = self.site(site);
                if !self.pod_deletes_denied && target.kubelet_up && target.pod_uid() == *uid {
                    if target.deletion_lingers {
                        self.site_mut(site).terminating = true;
                    } else {
                        self.site_mut(site).pods_deleted.push(uid.clone());
                        self.recreate_pod(site);
                    }
                }
            }
            Action::RollSite {
                site, uid, image, ..
            } => {
                let denied = self.pod_deletes_denied;
                let target = self.site_mut(site);
                target.rolls += 1;
                target.template_image = image.clone();
                let deletes = !denied && target.kubelet_up;
                if deletes && target.pod_uid() == *uid {
                    target.pods_deleted.push(uid.clone());
                    let stalls = target.recreation_stalls;
                    self.recreate_pod(site);
                    if stalls {
                        self.kill(site);
                    }
                }
            }
            Action::Event(event) => self.events.push((now, event.clone())),
            Action::SetPodLabels { .. } | Action::ApplyService(_) | Action::Metric(_) => {}
        }
    }

    /// Advances time by `duration` in [`TICK`]s: lease renewals, writability, replication.
    pub fn advance(&mut self, duration: Duration) {
        // Sidecars tick every TICK of world time, however the advances are cut.
        let mut left = duration;
        while self.since_tick + left >= TICK {
            let step = TICK - self.since_tick;
            self.now = self.now + step;
            left -= step;
            self.since_tick = Duration::ZERO;
            self.tick();
        }
        self.now = self.now + left;
        self.since_tick += left;
    }

    /// Polls `count` times, `pollInterval` apart (advance, then poll).
    /// Polls at the spec's interval until `site` is the active site, at most `max_polls`
    /// times, and asserts that it became so.
    pub fn run_polls_until_active(&mut self, site: &str, max_polls: usize) {
        for _ in 0..max_polls {
            if self.memory.active_site == site {
                return;
            }
            self.run_polls(1);
        }
        assert_eq!(
            self.memory.active_site, site,
            "not active within {max_polls} polls"
        );
    }

    pub fn run_polls(&mut self, count: usize) {
        let interval = self.spec.poll_interval.get();
        for _ in 0..count {
            self.advance(interval);
            self.poll();
        }
    }

    fn tick(&mut self) {
        let now = self.now;
        // Lease renewal: a site whose cached authority names itself asks every peer of its
        // own terms; the lease is the shortest duration granted (its own included).
        for index in 0..self.sites.len() {
            let requester = self.sites[index].clone();
            let Some(authority) = requester.authority.clone() else {
                continue;
            };
            if !requester.sidecar_alive
                || authority.active_site.as_deref() != Some(requester.name.as_str())
            {
                continue;
            }
            let terms = self.lease_terms(&requester);
            let majority = terms.majority();
            let mut grants = Vec::new();
            let mut lease = Duration::from_millis(terms.duration_ms);
            for peer in self.sites.iter().filter(|p| terms.sites.contains(&p.name)) {
                let connected =
                    peer.name == requester.name || !(peer.peer_cut || requester.peer_cut);
                let names_requester = peer.authority.as_ref().is_some_and(|a| {
                    a.active_site.as_deref() == Some(requester.name.as_str())
                        && a.topology_generation == authority.topology_generation
                });
                if peer.sidecar_alive && connected && names_requester {
                    grants.push(peer.name.clone());
                    lease = lease.min(Duration::from_millis(self.lease_terms(peer).duration_ms));
                }
            }
            if grants.len() >= majority {
                for peer in &grants {
                    self.site_mut(peer)
                        .granted_at
                        .insert(requester.name.clone(), now);
                }
                self.sites[index].lease_until = Some(now + lease);
            }
        }
        // Writability: lease held, authority names itself, no fence.
        for site in &mut self.sites {
            let held = site.lease_until.is_some_and(|until| until > now);
            let named = site
                .authority
                .as_ref()
                .and_then(|a| a.active_site.as_deref())
                == Some(site.name.as_str());
            let writable = site.sidecar_alive
                && site.mysql_up
                && held
                && named
                && site.fence_generation.is_none();
            if site.mysql_up && !site.frozen {
                site.read_only = !writable;
            }
        }
        // Replication: instant, from a reachable source.
        let snapshot: BTreeMap<String, (bool, bool, GtidSet)> = self
            .sites
            .iter()
            .map(|s| (s.name.clone(), (s.mysql_up, s.peer_cut, s.gtid.clone())))
            .collect();
        for site in &mut self.sites {
            if let (Some(source), true, true) = (&site.source, site.running, site.mysql_up) {
                if let Some((up, cut, gtid)) = snapshot.get(source) {
                    if *up && !*cut && !site.peer_cut {
                        site.gtid = site.gtid.union(gtid);
                    }
                }
            }
        }
        let writable: Vec<&str> = self
            .sites
            .iter()
            .filter(|s| s.mysql_up && !s.read_only)
            .map(|s| s.name.as_str())
            .collect();
        if writable.len() > 1 {
            self.split_brain_at.push(now);
        }
    }

    /// Commits one transaction on `site` if it is writable; returns whether it committed.
    pub fn write(&mut self, site: &str) -> bool {
        let seq = self.next_seq;
        let target = self.site_mut(site);
        if !target.mysql_up || target.read_only || target.frozen {
            return false;
        }
        let server_id = target.server_id;
        target.gtid.insert(Gtid::mariadb(0, server_id, seq));
        self.next_seq += 1;
        true
    }

    /// Commits one transaction on `site` numbered as MariaDB numbers it, after the highest
    /// number the site holds in domain 0, under `server_id` (the site's own, or another's
    /// whose transaction it applied). After a restore rewound the site, this reuses the
    /// numbers the restore discarded ([`World::write`] never reuses one).
    pub fn write_numbered_after_own(&mut self, site: &str, server_id: u32) -> bool {
        let target = self.site_mut(site);
        if !target.mysql_up || target.read_only || target.frozen {
            return false;
        }
        let seq = target.gtid.domain_last_seq(0).unwrap_or(0) + 1;
        target.gtid.insert(Gtid::mariadb(0, server_id, seq));
        self.next_seq = self.next_seq.max(seq + 1);
        true
    }

    /// Freezes (`true`) or thaws (`false`) a site's mysqld.
    pub fn freeze(&mut self, name: &str, frozen: bool) {
        self.site_mut(name).frozen = frozen;
    }

    /// The kubelet deleted the site pod and the StatefulSet recreated it (instantly here):
    /// a new uid, mysqld restarted read-only, the sidecar without authority.
    pub fn recreate_pod(&mut self, name: &str) {
        self.restart(name);
        let now = self.now;
        let site = self.site_mut(name);
        site.frozen = false;
        site.pod_generation += 1;
        site.pod_created_at = now;
        site.pod_started_at = None;
        site.image = site.template_image.clone();
    }

    /// Kills mysqld and the sidecar of a site (a dead pod).
    pub fn kill(&mut self, name: &str) {
        let site = self.site_mut(name);
        site.sidecar_alive = false;
        site.mysql_up = false;
        site.lease_until = None;
    }

    /// Restarts a killed site: mysqld read-only, sidecar with no cached authority.
    pub fn restart(&mut self, name: &str) {
        let now = self.now;
        let site = self.site_mut(name);
        site.sidecar_alive = true;
        site.mysql_up = true;
        site.read_only = true;
        site.authority = None;
        site.lease_until = None;
        site.granted_at.clear();
        site.fence_generation = None;
        site.mysqld_started_at = now;
        site.sidecar_started_at = now;
    }

    /// Restarts only the sidecar process of a site: its cached authority, its grants and
    /// its own lease are forgotten; mysqld keeps running as it is. The pod status keeps
    /// showing the previous container start (it lags a container restart).
    pub fn restart_sidecar(&mut self, name: &str) {
        let now = self.now;
        let site = self.site_mut(name);
        site.pod_started_at = Some(site.pod_started_at.unwrap_or(site.sidecar_started_at));
        site.authority = None;
        site.lease_until = None;
        site.granted_at.clear();
        site.fence_generation = None;
        site.sidecar_started_at = now;
    }

    /// Bootstraps the playground: polls until iad is writable and every replica follows it.
    pub fn bootstrapped() -> World {
        let mut world = World::playground();
        world.poll();
        world.run_polls(3);
        assert!(
            world.memory.authority.is_valid(),
            "bootstrap did not validate authority"
        );
        world
    }

    /// Events of a reason, in order.
    pub fn events_of(&self, reason: EventReason) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|(_, e)| e.reason == reason)
            .map(|(_, e)| e)
            .collect()
    }

    /// Sites writable now.
    pub fn writable_sites(&self) -> Vec<String> {
        self.sites
            .iter()
            .filter(|s| s.mysql_up && !s.read_only)
            .map(|s| s.name.clone())
            .collect()
    }
}

/// The labels the last decision set on a site.
pub fn labels_of(
    decision: &Decision,
    site: &str,
) -> Option<(bloodraven_core::engine::PodRole, bool)> {
    decision.actions.iter().find_map(|action| match action {
        Action::SetPodLabels {
            site: s,
            role,
            healthy,
            ..
        } if s == site => Some((*role, *healthy)),
        _ => None,
    })
}

/// Index of the first action matching, if any.
pub fn position(decision: &Decision, matches: impl Fn(&Action) -> bool) -> Option<usize> {
    decision.actions.iter().position(matches)
}
