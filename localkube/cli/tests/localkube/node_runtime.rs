//! localkube node agent end-to-end: pods as processes in their own namespaces (needs root;
//! without root the tests check the one-sentence refusal instead).

use std::time::{Duration, Instant};

use localkube::runtime::{
    cleanup, ContainerSpec, ContainerState, EnvValue, EnvVar, PodPhase, PodRuntime, RestartPolicy,
    RuntimeConfig, VolumeFile, VolumeMount, VolumeSource, VolumeSpec,
};

use crate::support::node::{exec_in, is_root, pod, running, shell, ClusterGuard};

/// The runtime's config for these tests: restart back-off from 200 ms to 1 s.
fn config(guard: &ClusterGuard) -> RuntimeConfig {
    let mut config = guard.config();
    config.backoff_initial = Duration::from_millis(200);
    config.backoff_max = Duration::from_secs(1);
    config
}

/// The container log as `kubectl logs` prints it.
fn kubectl_logs(path: &std::path::Path) -> String {
    localkube::runtime::cri_logs::read(path, &localkube::runtime::cri_logs::LogOptions::default())
        .unwrap()
}

// docs/design/localkube.md#node-agent: without root, starting fails with one sentence naming kind.
#[test]
fn without_root_start_names_the_kind_backend() {
    if is_root() {
        return;
    }
    let guard = ClusterGuard::new("noroot");
    let err = PodRuntime::new(config(&guard)).unwrap_err().to_string();
    assert!(err.contains("kind backend"), "{err}");
}

// docs/design/localkube.md#node-agent: pods on different nodes reach each other by pod IP (one
// bridge, no forwarding); volumes are bound at their mountPaths, /etc/hosts and
// /etc/resolv.conf are the pod's own; env $(VAR) and status.podIP resolve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_on_two_nodes_talk_tcp() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("tcp");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    runtime.register_node("pdx").unwrap();
    let server_script = "exec python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"0.0.0.0\", 8080)); s.listen(5)
greeting = open(\"/etc/demo/greeting\").read().strip()
open(\"/data/marker\", \"w\").write(\"ok\")
while True:
    c, a = s.accept(); c.sendall((greeting + \" from \" + socket.gethostname() + \" to \" + a[0] + \"\\n\").encode()); c.close()
'";
    let mut server = pod("server", "iad", vec![shell("server", server_script)]);
    server.containers[0].volume_mounts = vec![
        VolumeMount {
            name: "greeting".into(),
            mount_path: "/etc/demo".into(),
            read_only: true,
            sub_path: None,
        },
        VolumeMount {
            name: "data".into(),
            mount_path: "/data".into(),
            read_only: false,
            sub_path: None,
        },
    ];
    server.volumes = vec![
        VolumeSpec {
            name: "greeting".into(),
            source: VolumeSource::Files(vec![VolumeFile {
                path: "greeting".into(),
                contents: b"hello".to_vec(),
                mode: 0o644,
            }]),
        },
        VolumeSpec {
            name: "data".into(),
            source: VolumeSource::EmptyDir,
        },
    ];
    server.containers[0].readiness_probe = Some(localkube::runtime::Probe {
        period: Duration::from_millis(200),
        ..localkube::runtime::Probe::new(localkube::runtime::ProbeHandler::TcpSocket {
            port: localkube::runtime::ProbePort::Number(8080),
        })
    });
    let server_ip = runtime.start_pod(server).await.unwrap();
    runtime
        .wait_for("default/server", Duration::from_secs(20), |s| s.ready)
        .await
        .unwrap();

    let client_script = "cat /etc/resolv.conf; grep client /etc/hosts; echo MYIP=$MY_IP; \
        exec python3 -c 'import socket,sys; c=socket.create_connection((sys.argv[1], 8080), timeout=5); print(\"GOT\", c.recv(100).decode().strip())' $SERVER_ADDR";
    let mut client = pod("client", "pdx", vec![shell("client", client_script)]);
    client.restart_policy = RestartPolicy::Never;
    client.containers[0].env = vec![
        EnvVar {
            name: "MY_IP".into(),
            value: EnvValue::PodIp,
        },
        EnvVar::literal("SERVER_IP", server_ip.to_string()),
        EnvVar::literal("SERVER_ADDR", "$(SERVER_IP)"),
    ];
    let client_ip = runtime.start_pod(client).await.unwrap();
    assert_ne!(
        server_ip.octets()[2],
        client_ip.octets()[2],
        "pods are on different node subnets"
    );
    let status = runtime
        .wait_for("default/client", Duration::from_secs(20), |s| {
            s.phase == PodPhase::Succeeded || s.phase == PodPhase::Failed
        })
        .await
        .unwrap();
    let log = kubectl_logs(&status.container_statuses[0].log_path);
    assert_eq!(status.phase, PodPhase::Succeeded, "client log:\n{log}");
    assert!(
        log.contains(&format!("GOT hello from server to {client_ip}")),
        "{log}"
    );
    assert!(
        log.contains(&format!("nameserver {}", runtime.naming().dns_ip())),
        "{log}"
    );
    assert!(log.contains(&format!("{client_ip}\tclient")), "{log}");
    assert!(log.contains(&format!("MYIP={client_ip}")), "{log}");
    // A configMap change reaches the running container (the server re-reads nothing, so
    // check through exec).
    runtime
        .update_volume_files(
            "default/server",
            "greeting",
            &[VolumeFile {
                path: "greeting".into(),
                contents: b"updated".to_vec(),
                mode: 0o644,
            }],
        )
        .unwrap();
    let out = exec_in(
        &runtime,
        "default/server",
        "server",
        &["cat", "/etc/demo/greeting"],
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "updated");
    // Nothing was created on the host for the mount paths.
    assert!(!std::path::Path::new("/etc/demo").exists());
    assert!(!std::path::Path::new("/data/marker").exists());
    runtime
        .stop_pod("default/server", Duration::from_secs(2))
        .await
        .unwrap();
    runtime
        .stop_pod("default/client", Duration::from_secs(2))
        .await
        .unwrap();
}

// docs/design/localkube.md#node-agent: restartPolicy and restart counts are honoured; logs keep the
// previous instance; an unknown image waits with ErrImagePull.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_policy_backoff_and_unknown_image() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("restart");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    let crasher = pod(
        "crasher",
        "iad",
        vec![shell("main", "echo run-$(date +%s%N); exit 3")],
    );
    runtime.start_pod(crasher).await.unwrap();
    let status = runtime
        .wait_for("default/crasher", Duration::from_secs(20), |s| {
            s.container_statuses[0].restart_count >= 2
        })
        .await
        .unwrap();
    let c = &status.container_statuses[0];
    match c.last_state.as_ref().unwrap() {
        ContainerState::Terminated {
            exit_code, reason, ..
        } => {
            assert_eq!((*exit_code, reason.as_str()), (3, "Error"));
        }
        other => panic!("last state {other:?}"),
    }
    assert!(kubectl_logs(&c.previous_log_path).starts_with("run-"));

    let mut once = pod("once", "iad", vec![shell("main", "exit 0")]);
    once.restart_policy = RestartPolicy::OnFailure;
    runtime.start_pod(once).await.unwrap();
    let status = runtime
        .wait_for("default/once", Duration::from_secs(10), |s| {
            s.phase == PodPhase::Succeeded
        })
        .await
        .unwrap();
    assert_eq!(status.container_statuses[0].restart_count, 0);

    let mut unknown = pod("unknown", "iad", vec![shell("main", "true")]);
    unknown.containers[0].image = "nginx:1.27".into();
    runtime.start_pod(unknown).await.unwrap();
    let status = runtime
        .wait_for("default/unknown", Duration::from_secs(10), |s| {
            matches!(&s.container_statuses[0].state, ContainerState::Waiting { reason, .. } if reason == "ErrImagePull")
        })
        .await
        .unwrap();
    assert_eq!(status.phase, PodPhase::Pending);
    runtime.shutdown(Duration::from_secs(1)).await;
}

/// Every CrashLoopBackOff wait of `key`'s first container until its restartCount reaches
/// `restarts`, as (restartCount when it began, the back-off in its message).
async fn backoffs_until(
    events: &mut tokio::sync::broadcast::Receiver<localkube::runtime::PodStatus>,
    key: &str,
    restarts: u32,
) -> Vec<(u32, String)> {
    let mut seen: Vec<(u32, String)> = Vec::new();
    let mut in_backoff = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("{key}: {restarts} restarts within 30s; saw {seen:?}"))
            .expect("status events");
        if status.key != key {
            continue;
        }
        let c = &status.container_statuses[0];
        let backing_off = match &c.state {
            ContainerState::Waiting { reason, message } if reason == "CrashLoopBackOff" => {
                Some(message.split_whitespace().nth(1).unwrap_or_default())
            }
            _ => None,
        };
        // A wait begins when the state turns CrashLoopBackOff.
        if let (Some(wait), false) = (backing_off, in_backoff) {
            seen.push((c.restart_count, wait.to_string()));
        }
        in_backoff = backing_off.is_some();
        if c.restart_count >= restarts {
            return seen;
        }
    }
}

// docs/design/localkube.md#node-agent (kubelet's doBackOff): the first restart of a crashing
// container is immediate; only then does CrashLoopBackOff wait the initial back-off, doubling
// up to the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_restart_is_immediate_then_backoff_doubles_to_the_cap() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("backoff");
    let mut config = config(&guard);
    config.backoff_initial = Duration::from_millis(300);
    config.backoff_max = Duration::from_millis(1200);
    let runtime = PodRuntime::new(config).unwrap();
    runtime.register_node("iad").unwrap();
    let mut events = runtime.subscribe();
    let crasher = pod("crasher", "iad", vec![shell("main", "exit 1")]);
    runtime.start_pod(crasher).await.unwrap();
    let seen = backoffs_until(&mut events, "default/crasher", 5).await;
    let expected: Vec<(u32, String)> = [(1, "300ms"), (2, "600ms"), (3, "1.2s"), (4, "1.2s")]
        .into_iter()
        .map(|(n, w)| (n, w.to_string()))
        .collect();
    assert_eq!(seen, expected, "no back-off before the first restart");
    runtime.shutdown(Duration::from_secs(1)).await;
}

// The same with kubelet's own numbers: restartCount 1 comes at once, then 10 s of
// CrashLoopBackOff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_backoff_first_restart_at_once_then_ten_seconds() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("backoff10");
    let mut config = config(&guard);
    config.backoff_initial = localkube::runtime::runtime::BACKOFF_INITIAL;
    config.backoff_max = localkube::runtime::runtime::BACKOFF_MAX;
    let runtime = PodRuntime::new(config).unwrap();
    runtime.register_node("iad").unwrap();
    let crasher = pod("crasher", "iad", vec![shell("main", "exit 1")]);
    runtime.start_pod(crasher).await.unwrap();
    let status = runtime
        .wait_for("default/crasher", Duration::from_secs(5), |s| {
            let c = &s.container_statuses[0];
            c.restart_count == 1
                && matches!(&c.state, ContainerState::Waiting { reason, .. } if reason == "CrashLoopBackOff")
        })
        .await
        .expect("the first restart is immediate, the second waits in CrashLoopBackOff");
    match &status.container_statuses[0].state {
        ContainerState::Waiting { message, .. } => {
            assert!(message.starts_with("back-off 10s "), "{message}")
        }
        other => panic!("state {other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = runtime.pod_status("default/crasher").unwrap();
    assert_eq!(status.container_statuses[0].restart_count, 1);
    runtime.shutdown(Duration::from_secs(1)).await;
}

// Kubelet forgets a container's back-off once it ran long enough (10 minutes; here 1 s):
// every restart of a container that keeps running that long is immediate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_resets_after_a_long_enough_run() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("backoffreset");
    let mut config = config(&guard);
    config.backoff_initial = Duration::from_secs(5);
    config.backoff_max = Duration::from_secs(20);
    config.backoff_reset_after = Duration::from_secs(1);
    let runtime = PodRuntime::new(config).unwrap();
    runtime.register_node("iad").unwrap();
    let mut events = runtime.subscribe();
    let slow = pod("slow", "iad", vec![shell("main", "sleep 1.3; exit 1")]);
    runtime.start_pod(slow).await.unwrap();
    let seen = backoffs_until(&mut events, "default/slow", 3).await;
    assert_eq!(seen, Vec::new(), "no CrashLoopBackOff after long runs");
    runtime.shutdown(Duration::from_secs(1)).await;
}

// docs/design/localkube.md#node-agent: SIGTERM then SIGKILL after the grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_pod_kills_after_grace_period() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("grace");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    let mut stubborn = pod(
        "stubborn",
        "iad",
        vec![shell(
            "main",
            "trap 'echo got-term' TERM; echo trap-set; while true; do sleep 0.1; done",
        )],
    );
    stubborn.termination_grace_period = Duration::from_millis(800);
    runtime.start_pod(stubborn).await.unwrap();
    runtime
        .wait_for("default/stubborn", Duration::from_secs(10), running)
        .await
        .unwrap();
    // SIGTERM before the shell set its trap would end it at once: wait for the trap.
    let log_path = runtime
        .pod_status("default/stubborn")
        .unwrap()
        .container_statuses[0]
        .log_path
        .clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !kubectl_logs(&log_path).contains("trap-set") {
        assert!(Instant::now() < deadline, "the shell never set its trap");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = runtime.container_pid("default/stubborn", "main").unwrap();
    let started = Instant::now();
    let status = runtime
        .stop_pod("default/stubborn", Duration::from_millis(800))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "waited for the grace period"
    );
    match &status.container_statuses[0].state {
        ContainerState::Terminated {
            exit_code, signal, ..
        } => assert_eq!((*exit_code, *signal), (137, Some(9))),
        other => panic!("{other:?}"),
    }
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

// A container runtime signals a stopped (SIGSTOPped) process and waits out the grace period;
// it never continues it. A frozen mysqld that ran again for the grace period would serve its
// held connections (docs/design/history.md#issue-10-the-agentless-primary: the kubelet is the
// agent that kills a frozen, agentless primary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_container_is_killed_at_the_grace_period_without_running_again() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("frozen-stop");
    // The ticks go to a file outside the pod: the container log goes with the pod.
    let ticks = guard.dir.join("ticks");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    let mut ticker = pod(
        "ticker",
        "iad",
        vec![shell(
            "main",
            &format!(
                "trap 'echo got-term >> {0}' TERM; echo trap-set >> {0}; while true; do echo tick >> {0}; sleep 0.05; done",
                ticks.display()
            ),
        )],
    );
    ticker.termination_grace_period = Duration::from_secs(5);
    runtime.start_pod(ticker).await.unwrap();
    runtime
        .wait_for("default/ticker", Duration::from_secs(10), running)
        .await
        .unwrap();
    let read_ticks = || std::fs::read_to_string(&ticks).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !read_ticks().contains("tick") {
        assert!(Instant::now() < deadline, "the shell never set its trap");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = runtime.container_pid("default/ticker", "main").unwrap();
    runtime
        .signal_container("default/ticker", "main", nix::sys::signal::Signal::SIGSTOP)
        .unwrap();
    // Let the last ticks before the stop reach the log.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let frozen_log = read_ticks();
    let started = Instant::now();
    let status = runtime
        .stop_pod("default/ticker", Duration::from_millis(800))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "waited for the grace period"
    );
    match &status.container_statuses[0].state {
        ContainerState::Terminated {
            exit_code, signal, ..
        } => assert_eq!((*exit_code, *signal), (137, Some(9)), "SIGKILL"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        read_ticks(),
        frozen_log,
        "the frozen process ran again before it was killed"
    );
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

// docs/design/localkube.md#shape: `down` removes every namespace, veth, bridge and process it
// made, also after a crash (a dropped runtime without cleanup stands for SIGKILL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_after_crash_removes_everything() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("crash");
    let prefix;
    let mut pids = Vec::new();
    {
        let runtime = PodRuntime::new(config(&guard)).unwrap();
        prefix = format!("{}-", runtime.naming().prefix);
        runtime.register_node("iad").unwrap();
        runtime.register_node("pdx").unwrap();
        for (name, node) in [("a", "iad"), ("b", "pdx")] {
            // The container also starts a daemon that leaves its process group (setsid):
            // cleanup finds it through the pod's network namespace.
            let script = "setsid sleep 300 & echo escaped=$!; exec sleep 300";
            runtime
                .start_pod(pod(name, node, vec![shell("main", script)]))
                .await
                .unwrap();
            let key = format!("default/{name}");
            let status = runtime
                .wait_for(&key, Duration::from_secs(10), running)
                .await
                .unwrap();
            pids.push(runtime.container_pid(&key, "main").unwrap());
            let log_path = status.container_statuses[0].log_path.clone();
            let deadline = Instant::now() + Duration::from_secs(10);
            let escaped = loop {
                let log = kubectl_logs(&log_path);
                if let Some(pid) = log.lines().find_map(|l| l.strip_prefix("escaped=")) {
                    break pid.trim().parse::<i32>().unwrap();
                }
                assert!(Instant::now() < deadline, "no daemon pid in the log");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            pids.push(escaped);
        }
        // Dropped without stopping anything.
    }
    let names = |args: &[&str]| {
        String::from_utf8(
            std::process::Command::new("ip")
                .args(args)
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
    };
    assert!(names(&["netns", "list"]).contains(&prefix));
    cleanup(&guard.dir).unwrap();
    cleanup(&guard.dir).unwrap(); // idempotent
    assert!(
        !names(&["netns", "list"]).contains(&prefix),
        "{}",
        names(&["netns", "list"])
    );
    assert!(!names(&["-o", "link", "show"]).contains(&prefix));
    for pid in pids {
        assert!(
            !localkube::runtime::state::process_alive(pid, 0),
            "pid {pid} survived cleanup"
        );
    }
}

// docs/design/localkube.md#node-agent: probes (exec) drive Ready; startupProbe gates `started`
// and the other probes; a failing livenessProbe restarts the container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_readiness_and_liveness_probes() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("probes");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    let script = "rm -f /state/die; sleep 1; touch /state/started; exec sleep 300";
    let mut spec = pod("probed", "iad", vec![shell("main", script)]);
    spec.volumes = vec![VolumeSpec {
        name: "state".into(),
        source: VolumeSource::EmptyDir,
    }];
    let exec = |command: &str| localkube::runtime::Probe {
        period: Duration::from_millis(100),
        failure_threshold: 2,
        ..localkube::runtime::Probe::new(localkube::runtime::ProbeHandler::Exec {
            command: vec!["sh".into(), "-c".into(), command.into()],
        })
    };
    let container = &mut spec.containers[0];
    container.volume_mounts = vec![VolumeMount {
        name: "state".into(),
        mount_path: "/state".into(),
        ..VolumeMount::default()
    }];
    container.startup_probe = Some(localkube::runtime::Probe {
        failure_threshold: 100,
        ..exec("test -f /state/started")
    });
    container.readiness_probe = Some(exec("test -f /state/started"));
    container.liveness_probe = Some(localkube::runtime::Probe {
        initial_delay: Duration::from_millis(300),
        ..exec("test ! -f /state/die")
    });
    runtime.start_pod(spec).await.unwrap();
    let status = runtime
        .wait_for("default/probed", Duration::from_secs(10), running)
        .await
        .unwrap();
    assert!(
        !status.container_statuses[0].started && !status.ready,
        "not started before the startup probe succeeds"
    );
    runtime
        .wait_for("default/probed", Duration::from_secs(10), |s| {
            s.container_statuses[0].started && s.ready
        })
        .await
        .unwrap();
    let out = exec_in(
        &runtime,
        "default/probed",
        "main",
        &["touch", "/state/die"],
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(out.exit_code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    let status = runtime
        .wait_for("default/probed", Duration::from_secs(15), |s| {
            s.container_statuses[0].restart_count == 1
        })
        .await
        .unwrap();
    assert!(
        !status.ready,
        "a restarted container is not ready before its probes pass"
    );
    runtime
        .wait_for("default/probed", Duration::from_secs(15), |s| {
            s.ready && s.container_statuses[0].restart_count == 1
        })
        .await
        .unwrap();
    runtime.shutdown(Duration::from_secs(1)).await;
}

// docs/design/localkube.md#shape: `up` after a crash on the same state dir first removes the
// leftovers (their names and addresses would collide), then runs as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_after_crash_cleans_leftovers_first() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("reup");
    let old_pid;
    {
        let runtime = PodRuntime::new(config(&guard)).unwrap();
        runtime.register_node("iad").unwrap();
        runtime
            .start_pod(pod("a", "iad", vec![shell("main", "exec sleep 300")]))
            .await
            .unwrap();
        runtime
            .wait_for("default/a", Duration::from_secs(10), running)
            .await
            .unwrap();
        old_pid = runtime.container_pid("default/a", "main").unwrap();
    }
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    assert!(
        !localkube::runtime::state::process_alive(old_pid, 0),
        "the crashed run's container was killed"
    );
    runtime.register_node("iad").unwrap();
    let ip = runtime
        .start_pod(pod("a", "iad", vec![shell("main", "exec sleep 300")]))
        .await
        .unwrap();
    assert_eq!(ip.octets()[3], 2, "the first pod IP is free again");
    runtime
        .wait_for("default/a", Duration::from_secs(10), running)
        .await
        .unwrap();
    runtime.shutdown(Duration::from_secs(1)).await;
}

// docs/design/localkube.md#node-agent: init containers run in order, each to success, before the
// containers (sharing the pod's volumes); a failed init container with restartPolicy Never
// fails the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_first_and_can_fail_the_pod() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("init");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    let mount = VolumeMount {
        name: "work".into(),
        mount_path: "/work-dir".into(),
        ..VolumeMount::default()
    };
    let with_mount = |mut c: ContainerSpec| {
        c.volume_mounts = vec![mount.clone()];
        c
    };
    let mut spec = pod(
        "inited",
        "iad",
        vec![with_mount(shell(
            "main",
            "cat /work-dir/order; exec sleep 300",
        ))],
    );
    spec.volumes = vec![VolumeSpec {
        name: "work".into(),
        source: VolumeSource::EmptyDir,
    }];
    spec.init_containers = vec![
        with_mount(shell("first", "echo first >> /work-dir/order")),
        with_mount(shell("second", "echo second >> /work-dir/order")),
    ];
    runtime.start_pod(spec.clone()).await.unwrap();
    let status = runtime
        .wait_for("default/inited", Duration::from_secs(10), |s| s.ready)
        .await
        .unwrap();
    assert_eq!(status.phase, PodPhase::Running);
    assert!(status
        .init_container_statuses
        .iter()
        .all(|c| matches!(c.state, ContainerState::Terminated { exit_code: 0, .. })));
    let deadline = Instant::now() + Duration::from_secs(5);
    let log_path = status.container_statuses[0].log_path.clone();
    while kubectl_logs(&log_path) != "first\nsecond\n" {
        assert!(Instant::now() < deadline, "{:?}", kubectl_logs(&log_path));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut failing = spec;
    failing.name = "init-fails".into();
    failing.uid = "uid-init-fails".into();
    failing.restart_policy = RestartPolicy::Never;
    failing.init_containers[1] = with_mount(shell("second", "exit 4"));
    runtime.start_pod(failing).await.unwrap();
    let status = runtime
        .wait_for("default/init-fails", Duration::from_secs(10), |s| {
            s.phase == PodPhase::Failed
        })
        .await
        .unwrap();
    assert!(
        matches!(
            status.container_statuses[0].state,
            ContainerState::Waiting { .. }
        ),
        "main never ran"
    );
    runtime.shutdown(Duration::from_secs(1)).await;
}

// docs/design/localkube.md#node-agent: in-cluster config works unchanged: token, ca.crt and
// namespace at /var/run/secrets/kubernetes.io/serviceaccount/ (through the /var/run -> /run
// symlink), without creating anything on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_files_at_the_in_cluster_path() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("sa");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    let files = |token: &str| {
        vec![
            VolumeFile {
                path: "token".into(),
                contents: token.as_bytes().to_vec(),
                mode: 0o644,
            },
            VolumeFile {
                path: "ca.crt".into(),
                contents: b"CA".to_vec(),
                mode: 0o644,
            },
            VolumeFile {
                path: "namespace".into(),
                contents: b"default".to_vec(),
                mode: 0o644,
            },
        ]
    };
    let mut spec = pod("sa", "iad", vec![shell("main", "exec sleep 300")]);
    spec.volumes = vec![VolumeSpec {
        name: "kube-api-access".into(),
        source: VolumeSource::Files(files("t1")),
    }];
    spec.containers[0].volume_mounts = vec![VolumeMount {
        name: "kube-api-access".into(),
        mount_path: "/var/run/secrets/kubernetes.io/serviceaccount".into(),
        read_only: true,
        sub_path: None,
    }];
    let host_had_secrets = std::path::Path::new("/run/secrets").exists();
    runtime.start_pod(spec).await.unwrap();
    runtime
        .wait_for("default/sa", Duration::from_secs(10), running)
        .await
        .unwrap();
    let read = |runtime: PodRuntime| async move {
        let script = "cd /var/run/secrets/kubernetes.io/serviceaccount && cat token ca.crt namespace && ls /run/netns >/dev/null && echo ok";
        let out = exec_in(
            &runtime,
            "default/sa",
            "main",
            &["sh", "-c", script],
            Duration::from_secs(5),
        )
        .await;
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert_eq!(
        read(runtime.clone()).await,
        "t1CAdefaultok\n",
        "files there, /run's other entries still visible"
    );
    // Token rotation (kubelet refreshes projected tokens in place).
    runtime
        .update_volume_files("default/sa", "kube-api-access", &files("t2"))
        .unwrap();
    assert_eq!(read(runtime.clone()).await, "t2CAdefaultok\n");
    assert_eq!(
        std::path::Path::new("/run/secrets").exists(),
        host_had_secrets,
        "nothing created on the host"
    );
    runtime.shutdown(Duration::from_secs(1)).await;
}

// A power cut just after a container (re)started kills it: the stop may come before the
// container's helper made its own session, when its process group does not exist yet (the
// kill then failed with ESRCH and the container ran through the whole stop; the seed of
// node_faults' flake, where a node stop followed a restart at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_just_after_a_container_started_kills_it() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("early-stop");
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    runtime
        .start_pod(pod("early", "iad", vec![shell("main", "exec sleep 1000")]))
        .await
        .unwrap();
    for round in 1..=20u32 {
        // Returns on the Running update, which comes right after the spawn.
        runtime
            .wait_for("default/early", Duration::from_secs(10), |s| {
                running(s) && s.container_statuses[0].restart_count == round - 1
            })
            .await
            .unwrap();
        runtime.stop_node("iad").unwrap();
        let stopped = runtime
            .wait_for("default/early", Duration::from_secs(10), |s| {
                matches!(
                    s.container_statuses[0].state,
                    ContainerState::Terminated { .. }
                )
            })
            .await;
        assert!(
            stopped.is_ok(),
            "round {round}: the container still runs 10 s after its node stopped"
        );
        runtime.start_node("iad").unwrap();
    }
    runtime.shutdown(Duration::from_secs(2)).await;
}

// docs/design/localkube.md#node-agent (clusters coexist): a bridge a dead cluster left behind
// with the slot's MAC and gateway (its state dir gone, so nothing recorded it for cleanup)
// is removed when a new cluster takes the slot; left in place it made every pod-to-pod
// connection of the new cluster time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_clusters_bridge_on_the_slot_is_removed_when_the_slot_is_taken() {
    if !is_root() {
        return;
    }
    let guard = ClusterGuard::new("stalebr");
    let dir = std::fs::canonicalize(&guard.dir).unwrap();
    let naming = localkube::runtime::naming::ClusterNaming::claim(&dir).unwrap();
    let stale = "lkdead-br";
    let ip = |args: &[&str]| {
        let status = std::process::Command::new("ip")
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "ip {args:?}");
    };
    let _ = std::process::Command::new("ip")
        .args(["link", "del", stale])
        .status();
    ip(&["link", "add", stale, "type", "bridge"]);
    ip(&["link", "set", stale, "address", &naming.bridge_mac()]);
    ip(&[
        "addr",
        "add",
        &format!("{}/24", naming.gateway(0)),
        "dev",
        stale,
    ]);
    ip(&["link", "set", stale, "up"]);
    let runtime = PodRuntime::new(config(&guard)).unwrap();
    runtime.register_node("iad").unwrap();
    runtime.register_node("pdx").unwrap();
    let links = localkube::runtime::ip::link_list().unwrap();
    assert!(
        !links.iter().any(|link| link == stale),
        "the dead cluster's bridge is still there"
    );
    let server_ip = runtime
        .start_pod(pod(
            "server",
            "iad",
            vec![shell(
                "main",
                &crate::support::node::greeting_server("\"hi\""),
            )],
        ))
        .await
        .unwrap();
    runtime
        .start_pod(pod("client", "pdx", vec![shell("main", "exec sleep 3600")]))
        .await
        .unwrap();
    for key in ["default/server", "default/client"] {
        runtime
            .wait_for(key, Duration::from_secs(10), running)
            .await
            .unwrap();
    }
    let script = "import socket,sys\nc = socket.create_connection((sys.argv[1], 8080), timeout=2)\nprint(c.recv(100).decode().strip())";
    let out = exec_in(
        &runtime,
        "default/client",
        "main",
        &["python3", "-c", script, &server_ip.to_string()],
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hi");
}
