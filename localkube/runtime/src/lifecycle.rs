//! The rules of a pod's and its containers' lifecycle, as kubelet applies them, over plain
//! data: the pod phase and Ready from the container states, whether a container restarts
//! after it exited (restartPolicy, a fault's hold, a power cut), the crash-loop back-off
//! schedule, what each step writes into a container's status, and how probe results
//! decide `started`, `ready` and a kill.
//!
//! Nothing here spawns, waits, signals or reads a clock: [`super::runtime`] gathers what
//! happened (an instance exited with a code, after running so long), asks these functions
//! what follows, and does it.

use std::time::{Duration, SystemTime};

use super::spec::{ContainerState, ContainerStatus, PodPhase, PodStatus, Probe, RestartPolicy};

/// Which list a container's status is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    /// `spec.initContainers`: run one after the other, each to success, before the others.
    Init,
    /// `spec.containers`.
    Regular,
}

/// `status.phase` from the container states, as kubelet's `getPhase`.
pub fn pod_phase(status: &PodStatus, policy: RestartPolicy) -> PodPhase {
    let init_done = status
        .init_container_statuses
        .iter()
        .all(|c| matches!(c.state, ContainerState::Terminated { exit_code: 0, .. }));
    let init_failed = status
        .init_container_statuses
        .iter()
        .any(|c| matches!(c.state, ContainerState::Terminated { exit_code, .. } if exit_code != 0));
    if init_failed && policy == RestartPolicy::Never {
        return PodPhase::Failed;
    }
    if !init_done {
        return PodPhase::Pending;
    }
    let containers = &status.container_statuses;
    let running = containers
        .iter()
        .filter(|c| matches!(c.state, ContainerState::Running { .. }))
        .count();
    let waiting = containers
        .iter()
        .filter(|c| matches!(c.state, ContainerState::Waiting { .. }))
        .count();
    let terminated: Vec<i32> = containers
        .iter()
        .filter_map(|c| match c.state {
            ContainerState::Terminated { exit_code, .. } => Some(exit_code),
            _ => None,
        })
        .collect();
    let never_started = containers
        .iter()
        .filter(|c| !c.started && c.last_state.is_none())
        .count();
    if waiting > 0 && never_started > 0 && running == 0 && terminated.is_empty() {
        return PodPhase::Pending;
    }
    if running > 0 || waiting > 0 {
        return PodPhase::Running;
    }
    if terminated.len() == containers.len() {
        let failed = terminated.iter().any(|code| *code != 0);
        return match (policy, failed) {
            (RestartPolicy::Always, _) => PodPhase::Running,
            (RestartPolicy::OnFailure, true) => PodPhase::Running,
            (_, true) => PodPhase::Failed,
            (_, false) => PodPhase::Succeeded,
        };
    }
    PodPhase::Pending
}

/// The pod's Ready condition: it has containers and every one is ready.
pub fn pod_ready(status: &PodStatus) -> bool {
    !status.container_statuses.is_empty() && status.container_statuses.iter().all(|c| c.ready)
}

/// Applies `change` to container `name`'s status in `kind`'s list (a name not in the list
/// changes nothing), then recomputes the pod's Ready and phase.
pub fn update_container(
    status: &mut PodStatus,
    policy: RestartPolicy,
    kind: ContainerKind,
    name: &str,
    change: impl FnOnce(&mut ContainerStatus),
) {
    let list = match kind {
        ContainerKind::Init => &mut status.init_container_statuses,
        ContainerKind::Regular => &mut status.container_statuses,
    };
    if let Some(container) = list.iter_mut().find(|c| c.name == name) {
        change(container);
    }
    status.ready = pod_ready(status);
    status.phase = pod_phase(status, policy);
}

/// The waiting reason of a container before its first start: init containers and, in a pod
/// with init containers, the others wait in PodInitializing; else ContainerCreating.
pub fn initial_waiting_reason(kind: ContainerKind, pod_has_init_containers: bool) -> &'static str {
    match kind {
        ContainerKind::Init => "PodInitializing",
        ContainerKind::Regular if pod_has_init_containers => "PodInitializing",
        ContainerKind::Regular => "ContainerCreating",
    }
}

/// Whether a container that exited with `exit_code` runs again under `policy`. An init
/// container runs again only after a failure, and never under `Never`.
pub fn restart_allowed(kind: ContainerKind, policy: RestartPolicy, exit_code: i32) -> bool {
    match (kind, policy) {
        (ContainerKind::Init, RestartPolicy::Never) => false,
        (ContainerKind::Init, _) => exit_code != 0,
        (ContainerKind::Regular, RestartPolicy::Always) => true,
        (ContainerKind::Regular, RestartPolicy::OnFailure) => exit_code != 0,
        (ContainerKind::Regular, RestartPolicy::Never) => false,
    }
}

/// The exit code and signal a container reports from its wait status: the code when it
/// exited, 128+signal when a signal killed it, 255 when neither is known (or the wait
/// failed: `None`).
pub fn exit_code_and_signal(wait: Option<(Option<i32>, Option<i32>)>) -> (i32, Option<i32>) {
    match wait {
        Some((Some(code), _)) => (code, None),
        Some((None, Some(signal))) => (128 + signal, Some(signal)),
        Some((None, None)) | None => (255, None),
    }
}

/// The exit code a container that could not be started reports (reason StartError).
pub const START_ERROR_EXIT_CODE: i32 = 128;

/// What is the situation once a container instance has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exited {
    /// The instance's exit code.
    pub exit_code: i32,
    /// The pod is being stopped.
    pub pod_stopping: bool,
    /// A fault keeps the container down ([`super::runtime::PodRuntime::kill_and_hold`]).
    pub held: bool,
    /// Its node is powered off.
    pub node_stopped: bool,
}

/// What follows a container instance's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterExit {
    /// The container is done: no instance follows.
    Finish,
    /// Kept down by a fault: waiting in CrashLoopBackOff until released, then restarted.
    HoldUntilReleased,
    /// A power cut: restarted once the node is back, without back-off.
    RestartWhenPowered,
    /// Restarted after the crash-loop back-off.
    RestartAfterBackOff,
}

/// What follows an exit (kubelet's sync of a dead container, plus localkube's faults): a
/// stopping pod restarts nothing; otherwise restartPolicy decides whether, and a hold or a
/// power cut decide how.
pub fn after_exit(kind: ContainerKind, policy: RestartPolicy, exited: Exited) -> AfterExit {
    if exited.pod_stopping || !restart_allowed(kind, policy, exited.exit_code) {
        return AfterExit::Finish;
    }
    if exited.held {
        return AfterExit::HoldUntilReleased;
    }
    if exited.node_stopped {
        return AfterExit::RestartWhenPowered;
    }
    AfterExit::RestartAfterBackOff
}

/// Kubelet's restart back-off numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackOffSchedule {
    /// The wait before the second restart (the first is immediate).
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
    /// An instance that ran this long clears the back-off.
    pub reset_after: Duration,
}

impl BackOffSchedule {
    /// The wait after `wait`: doubled, at most `max`.
    pub fn doubled(&self, wait: Duration) -> Duration {
        (wait * 2).min(self.max)
    }
}

/// When a restart happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartDelay {
    /// At once (the first restart, or the first after a long run).
    Now,
    /// After waiting in CrashLoopBackOff this long.
    After(Duration),
}

/// One container's back-off entry (kubelet's `doBackOff`): none until its first restart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackOff {
    next: Option<Duration>,
}

impl BackOff {
    /// An instance that ran `ran_for` before it exited: long enough, and the back-off is
    /// forgotten.
    pub fn instance_ran(&mut self, ran_for: Duration, schedule: &BackOffSchedule) {
        if ran_for >= schedule.reset_after {
            self.next = None;
        }
    }

    /// A restart is due: without an entry it is immediate and the entry starts at
    /// `initial`; else it waits the entry, which doubles up to `max`.
    pub fn next_restart(&mut self, schedule: &BackOffSchedule) -> RestartDelay {
        match self.next {
            None => {
                self.next = Some(schedule.initial);
                RestartDelay::Now
            }
            Some(wait) => {
                self.next = Some(schedule.doubled(wait));
                RestartDelay::After(wait)
            }
        }
    }
}

/// What each lifecycle step writes into a container's status.
pub mod status {
    use super::*;

    /// Its image cannot be pulled (not in the catalog).
    pub fn image_pull_failed(c: &mut ContainerStatus, message: String) {
        c.state = ContainerState::Waiting {
            reason: "ErrImagePull".into(),
            message,
        };
    }

    /// It could not be started.
    pub fn start_failed(c: &mut ContainerStatus, now: SystemTime) {
        c.state = ContainerState::Terminated {
            exit_code: START_ERROR_EXIT_CODE,
            signal: None,
            reason: "StartError".into(),
            started_at: now,
            finished_at: now,
        };
    }

    /// An instance runs as `pid`. Kubelet: `started` (and readiness without a probe) once
    /// the startup probe, if any, succeeded ([`probe_started`]); an init container has no
    /// probes and is started at once.
    pub fn running(
        c: &mut ContainerStatus,
        kind: ContainerKind,
        started_at: SystemTime,
        pid: i32,
        container_id: &str,
    ) {
        c.state = ContainerState::Running { started_at };
        c.container_id = Some(container_id.to_string());
        c.started = kind == ContainerKind::Init;
        c.pid = Some(pid);
        c.ready = false;
    }

    /// The instance exited.
    pub fn terminated(
        c: &mut ContainerStatus,
        (exit_code, signal): (i32, Option<i32>),
        started_at: SystemTime,
        finished_at: SystemTime,
    ) {
        c.state = ContainerState::Terminated {
            exit_code,
            signal,
            reason: if exit_code == 0 {
                "Completed".into()
            } else {
                "Error".into()
            },
            started_at,
            finished_at,
        };
        c.ready = false;
        c.pid = None;
    }

    /// Kept down by a fault: its termination becomes `lastState` and it waits in
    /// CrashLoopBackOff, not started.
    pub fn held_down(c: &mut ContainerStatus, pod_name: &str) {
        let message = format!(
            "kept down by a localkube fault until healed: restarting failed container={} pod={pod_name}",
            c.name
        );
        waiting_in_crash_loop(c, message);
        c.started = false;
    }

    /// Restarted at once: its termination becomes `lastState`.
    pub fn restarting_now(c: &mut ContainerStatus) {
        c.last_state = Some(c.state.clone());
        c.last_container_id = c.container_id.clone();
        c.restart_count += 1;
    }

    /// Waiting `wait` in CrashLoopBackOff: its termination becomes `lastState`.
    pub fn backing_off(c: &mut ContainerStatus, wait: Duration, pod_name: &str) {
        let message = format!(
            "back-off {wait:?} restarting failed container={} pod={pod_name}",
            c.name
        );
        waiting_in_crash_loop(c, message);
    }

    /// Its termination becomes `lastState`; it waits in CrashLoopBackOff.
    fn waiting_in_crash_loop(c: &mut ContainerStatus, message: String) {
        c.last_state = Some(c.state.clone());
        c.last_container_id = c.container_id.clone();
        c.state = ContainerState::Waiting {
            reason: "CrashLoopBackOff".into(),
            message,
        };
    }

    /// Restarted after waiting (a back-off or a hold).
    pub fn restarting_after_wait(c: &mut ContainerStatus) {
        c.restart_count += 1;
    }

    /// Its startup probe succeeded (or it has none): started, and ready unless a readiness
    /// probe decides that.
    pub fn probe_started(c: &mut ContainerStatus, has_readiness_probe: bool) {
        c.started = true;
        c.ready = !has_readiness_probe;
    }
}

/// What one probe loop does with its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRole {
    /// Decides `started`; its failure threshold kills the container.
    Startup,
    /// Drives `ready`.
    Readiness,
    /// Its failure threshold kills the container.
    Liveness,
}

/// Consecutive results of one probe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeTally {
    successes: u32,
    failures: u32,
}

/// What a probe loop does after one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeStep {
    /// Probe again after the period.
    Continue,
    /// Set the container's `ready`, then probe again.
    SetReady(bool),
    /// The loop ends: `true` when the startup probe succeeded, `false` at a startup or
    /// liveness failure threshold.
    Done(bool),
}

impl ProbeTally {
    /// Counts one result (thresholds below 1 count as 1) and says what follows for `role`.
    pub fn record(&mut self, ok: bool, probe: &Probe, role: ProbeRole) -> ProbeStep {
        if ok {
            self.successes += 1;
            self.failures = 0;
        } else {
            self.failures += 1;
            self.successes = 0;
        }
        let succeeded = ok && self.successes >= probe.success_threshold.max(1);
        let failed = !ok && self.failures >= probe.failure_threshold.max(1);
        match role {
            ProbeRole::Startup if succeeded => ProbeStep::Done(true),
            ProbeRole::Startup | ProbeRole::Liveness if failed => ProbeStep::Done(false),
            ProbeRole::Readiness if succeeded => ProbeStep::SetReady(true),
            ProbeRole::Readiness if failed => ProbeStep::SetReady(false),
            ProbeRole::Startup | ProbeRole::Readiness | ProbeRole::Liveness => ProbeStep::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ProbeHandler;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn container(name: &str, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            image: "busybox".into(),
            state,
            last_state: None,
            restart_count: 0,
            ready: false,
            started: false,
            pid: None,
            container_id: None,
            last_container_id: None,
            log_path: "/x.log".into(),
            previous_log_path: "/x.previous.log".into(),
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState::Waiting {
            reason: reason.into(),
            message: String::new(),
        }
    }

    fn running() -> ContainerState {
        ContainerState::Running { started_at: T0 }
    }

    fn exited(exit_code: i32) -> ContainerState {
        ContainerState::Terminated {
            exit_code,
            signal: None,
            reason: String::new(),
            started_at: T0,
            finished_at: T0,
        }
    }

    fn pod(init: Vec<ContainerStatus>, containers: Vec<ContainerStatus>) -> PodStatus {
        PodStatus {
            key: "ns/p".into(),
            pod_ip: None,
            host_ip: None,
            phase: PodPhase::Pending,
            init_container_statuses: init,
            container_statuses: containers,
            ready: false,
            stopped: false,
        }
    }

    fn restarted(mut c: ContainerStatus) -> ContainerStatus {
        c.last_state = Some(exited(1));
        c
    }

    #[test]
    fn pod_phase_follows_kubelet_get_phase() {
        use PodPhase::{Failed, Pending, Running, Succeeded};
        use RestartPolicy::{Always, Never, OnFailure};
        let c = container;
        let init = |i, a| pod(vec![c("i", i)], vec![c("a", a)]);
        let two = |a, b| pod(vec![], vec![c("a", a), c("b", b)]);
        let one = |a| pod(vec![], vec![a]);
        #[rustfmt::skip]
        let cases = [
            ("new pod", one(c("a", waiting("ContainerCreating"))), Always, Pending),
            ("init container running", init(running(), waiting("PodInitializing")), Always, Pending),
            ("init container failed, Never", init(exited(1), waiting("PodInitializing")), Never, Failed),
            ("init failed, OnFailure: retried", init(exited(1), waiting("PodInitializing")), OnFailure, Pending),
            ("init done, one running", init(exited(0), running()), Never, Running),
            ("one running, one never started", two(running(), waiting("ContainerCreating")), Always, Running),
            ("crash looping", one(restarted(c("a", waiting("CrashLoopBackOff")))), Always, Running),
            ("all exited 0, Never", two(exited(0), exited(0)), Never, Succeeded),
            ("one exited 1, Never", two(exited(0), exited(1)), Never, Failed),
            ("exited 1, OnFailure: restarting", one(c("a", exited(1))), OnFailure, Running),
            ("exited 0, OnFailure", one(c("a", exited(0))), OnFailure, Succeeded),
            ("exited 0, Always: restarting", one(c("a", exited(0))), Always, Running),
            ("one exited, one running", two(exited(0), running()), Never, Running),
        ];
        for (name, status, policy, phase) in cases {
            assert_eq!(pod_phase(&status, policy), phase, "{name}");
        }
    }

    #[test]
    fn pod_is_ready_when_it_has_containers_all_ready() {
        let mut status = pod(vec![], vec![]);
        assert!(!pod_ready(&status), "no containers");
        status.container_statuses = vec![container("a", running()), container("b", running())];
        status.container_statuses[0].ready = true;
        assert!(!pod_ready(&status), "one of two ready");
        status.container_statuses[1].ready = true;
        assert!(pod_ready(&status), "both ready");
    }

    #[test]
    fn update_container_changes_the_named_container_and_recomputes_phase_and_ready() {
        let mut status = pod(
            vec![container("i", running())],
            vec![container("a", waiting("PodInitializing"))],
        );
        let policy = RestartPolicy::Always;
        update_container(&mut status, policy, ContainerKind::Init, "i", |c| {
            status::terminated(c, (0, None), T0, T0);
        });
        assert_eq!(status.phase, PodPhase::Pending, "a has not started yet");
        update_container(&mut status, policy, ContainerKind::Regular, "a", |c| {
            status::running(c, ContainerKind::Regular, T0, 7, "id7");
            status::probe_started(c, false);
        });
        assert_eq!((status.phase, status.ready), (PodPhase::Running, true));
        update_container(&mut status, policy, ContainerKind::Init, "a", |c| {
            c.ready = false;
        });
        assert!(status.ready, "a is not an init container: nothing changed");
    }

    #[test]
    fn initial_waiting_reason_is_pod_initializing_behind_init_containers() {
        let cases = [
            (ContainerKind::Init, true, "PodInitializing"),
            (ContainerKind::Regular, true, "PodInitializing"),
            (ContainerKind::Regular, false, "ContainerCreating"),
        ];
        for (kind, has_init, reason) in cases {
            assert_eq!(
                initial_waiting_reason(kind, has_init),
                reason,
                "{kind:?} {has_init}"
            );
        }
    }

    #[test]
    fn restart_policy_decides_which_exits_restart() {
        use ContainerKind::{Init, Regular};
        use RestartPolicy::{Always, Never, OnFailure};
        let cases = [
            (Regular, Always, 0, true),
            (Regular, Always, 1, true),
            (Regular, OnFailure, 0, false),
            (Regular, OnFailure, 137, true),
            (Regular, Never, 1, false),
            (Init, Always, 0, false),
            (Init, Always, 1, true),
            (Init, OnFailure, 1, true),
            (Init, Never, 1, false),
        ];
        for (kind, policy, exit_code, restarts) in cases {
            assert_eq!(
                restart_allowed(kind, policy, exit_code),
                restarts,
                "{kind:?} {policy:?} exit {exit_code}"
            );
        }
    }

    #[test]
    fn exit_code_is_the_code_or_128_plus_the_signal() {
        let cases = [
            (Some((Some(0), None)), (0, None)),
            (Some((Some(3), None)), (3, None)),
            (Some((None, Some(9))), (137, Some(9))),
            (Some((None, Some(15))), (143, Some(15))),
            (Some((None, None)), (255, None)),
            (None, (255, None)),
        ];
        for (wait, expected) in cases {
            assert_eq!(exit_code_and_signal(wait), expected, "{wait:?}");
        }
    }

    #[test]
    fn after_exit_stopping_and_policy_first_then_hold_then_power_cut() {
        use AfterExit::{Finish, HoldUntilReleased, RestartAfterBackOff, RestartWhenPowered};
        use ContainerKind::{Init, Regular};
        use RestartPolicy::{Always, Never, OnFailure};
        let exit = |exit_code, pod_stopping, held, node_stopped| Exited {
            exit_code,
            pod_stopping,
            held,
            node_stopped,
        };
        // (case, kind, policy, exit code, pod stopping, held, node stopped, what follows)
        #[rustfmt::skip]
        let cases = [
            ("crash", Regular, Always, 1, false, false, false, RestartAfterBackOff),
            ("clean exit, Always", Regular, Always, 0, false, false, false, RestartAfterBackOff),
            ("clean exit, OnFailure", Regular, OnFailure, 0, false, false, false, Finish),
            ("pod stopping", Regular, Always, 143, true, true, true, Finish),
            ("held", Regular, Always, 137, false, true, true, HoldUntilReleased),
            ("held, Never", Regular, Never, 137, false, true, false, Finish),
            ("power cut", Regular, Always, 137, false, false, true, RestartWhenPowered),
            ("power cut, Never", Regular, Never, 137, false, false, true, Finish),
            ("init done", Init, Always, 0, false, false, false, Finish),
            ("init failed", Init, OnFailure, 1, false, false, false, RestartAfterBackOff),
            ("init failed, Never", Init, Never, 1, false, false, false, Finish),
        ];
        for (name, kind, policy, code, stopping, held, node_stopped, expected) in cases {
            let exited = exit(code, stopping, held, node_stopped);
            assert_eq!(after_exit(kind, policy, exited), expected, "{name}");
        }
    }

    #[test]
    fn back_off_first_restart_at_once_then_doubles_to_the_cap_and_resets_after_a_long_run() {
        let secs = Duration::from_secs;
        let schedule = BackOffSchedule {
            initial: secs(10),
            max: secs(300),
            reset_after: secs(600),
        };
        let mut backoff = BackOff::default();
        let delays: Vec<RestartDelay> = (0..8).map(|_| backoff.next_restart(&schedule)).collect();
        let after = |s| RestartDelay::After(secs(s));
        assert_eq!(
            delays,
            [
                RestartDelay::Now,
                after(10),
                after(20),
                after(40),
                after(80),
                after(160),
                after(300),
                after(300)
            ]
        );
        backoff.instance_ran(secs(599), &schedule);
        assert_eq!(backoff.next_restart(&schedule), after(300), "ran too short");
        backoff.instance_ran(secs(600), &schedule);
        assert_eq!(
            backoff.next_restart(&schedule),
            RestartDelay::Now,
            "ran long enough"
        );
        assert_eq!(backoff.next_restart(&schedule), after(10));
    }

    #[test]
    fn status_steps_keep_the_last_termination_and_count_restarts() {
        let mut c = container("db", running());
        status::running(&mut c, ContainerKind::Regular, T0, 42, "first");
        assert_eq!((c.pid, c.started, c.ready), (Some(42), false, false));
        assert_eq!(c.container_id.as_deref(), Some("first"));
        status::probe_started(&mut c, true);
        assert_eq!(
            (c.started, c.ready),
            (true, false),
            "readiness probe decides"
        );
        status::terminated(&mut c, (137, Some(9)), T0, T0);
        assert!(matches!(
            &c.state,
            ContainerState::Terminated { exit_code: 137, signal: Some(9), reason, .. } if reason == "Error"
        ));
        assert_eq!(c.pid, None);
        let terminated = c.state.clone();
        status::backing_off(&mut c, Duration::from_secs(10), "mysql-0");
        assert_eq!(c.last_state.as_ref(), Some(&terminated));
        // docs/design/localkube.md "What the in-cluster fault agent needs": lastState
        // names the id of the instance it describes; a new start brings a new id.
        assert_eq!(c.last_container_id.as_deref(), Some("first"));
        assert_eq!(
            c.state,
            ContainerState::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: "back-off 10s restarting failed container=db pod=mysql-0".into()
            }
        );
        status::restarting_after_wait(&mut c);
        status::held_down(&mut c, "mysql-0");
        assert!(
            matches!(&c.state, ContainerState::Waiting { reason, .. } if reason == "CrashLoopBackOff")
        );
        assert!(!c.started);
        status::restarting_now(&mut c);
        assert_eq!(c.restart_count, 2);
        status::running(&mut c, ContainerKind::Regular, T0, 43, "second");
        assert_eq!(c.container_id.as_deref(), Some("second"));
        let mut init = container("init", waiting("PodInitializing"));
        status::running(&mut init, ContainerKind::Init, T0, 5, "init");
        assert!(
            init.started,
            "an init container has no probes: started at once"
        );
        status::terminated(&mut init, (0, None), T0, T0);
        assert!(
            matches!(&init.state, ContainerState::Terminated { reason, .. } if reason == "Completed")
        );
    }

    #[test]
    fn probe_thresholds_decide_started_ready_and_kill() {
        let probe = |success_threshold, failure_threshold| Probe {
            handler: ProbeHandler::Exec { command: vec![] },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold,
            failure_threshold,
        };
        use ProbeRole::{Liveness, Readiness, Startup};
        use ProbeStep::{Continue, Done, SetReady};
        // (case, probe, role, results, what each result leads to)
        type Case = (&'static str, Probe, ProbeRole, Vec<bool>, Vec<ProbeStep>);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("startup succeeds", probe(1, 3), Startup, vec![false, true], vec![Continue, Done(true)]),
            ("startup fails at 3", probe(1, 3), Startup, vec![false; 3], vec![Continue, Continue, Done(false)]),
            ("a success resets failures", probe(1, 2), Liveness, vec![false, true, false, false],
                vec![Continue, Continue, Continue, Done(false)]),
            ("thresholds of 0 count as 1", probe(0, 0), Liveness, vec![true, false], vec![Continue, Done(false)]),
            ("readiness flips", probe(2, 1), Readiness, vec![true, true, true, false, true],
                vec![Continue, SetReady(true), SetReady(true), SetReady(false), Continue]),
        ];
        for (name, probe, role, results, expected) in cases {
            let mut tally = ProbeTally::default();
            let steps: Vec<ProbeStep> = results
                .iter()
                .map(|ok| tally.record(*ok, &probe, role))
                .collect();
            assert_eq!(steps, expected, "{name}");
        }
    }
}
