//! Live tests of the agent's faults on real processes (test tier 4 of
//! docs/design/style.md#test-tiers: real kernel, no cluster). They run as root: each makes a
//! cgroup `/sys/fs/cgroup/pids/bloodraven-chaos-agent-test-<random>/pod<uid>/<64-hex id>`
//! standing in for a container (the cgroupfs layout of docs/design/style.md rule 14's
//! lookup), starts `sleep`s in it, and drives the library the way the agent does once the
//! pod lookup has yielded a container id. The partition tests also make network namespaces
//! with veth pairs (and one a second pod uid: the pod deleted and made again). A drop guard
//! removes everything made, even when a test fails. Without root (or a writable cgroup v1
//! pids hierarchy) they are skipped with a message.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bloodraven_chaos_agent::agent::{
    Agent, AgentConfig, StateFile, KEEP_DOWN_REFRESH, PARTITION_REFRESH, STATE_FILE,
};
use bloodraven_chaos_agent::faults::freeze;
use bloodraven_chaos_agent::faults::kill::restart::Watch;
use bloodraven_chaos_agent::faults::kill::{self, KeepDown};
use bloodraven_chaos_agent::faults::partition::{self, Backend, Peer};
use bloodraven_chaos_agent::faults::stop_node;
use bloodraven_chaos_agent::pod::{ContainerView, Locator, PodView};
use bloodraven_chaos_agent::procfs::ProcFs;
use bloodraven_chaos_agent::protocol::{
    EndRequest, FaultKind, FaultStatus, FreezeRequest, KillRequest, ListRequest, PartitionRequest,
    PodRef, Request, Response, StopNodePhase, StopNodeRequest,
};
use bloodraven_chaos_agent::Result;

const PIDS_ROOT: &str = "/sys/fs/cgroup/pids";

fn random_hex(chars: usize) -> String {
    let mut out = String::new();
    while out.len() < chars {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        );
        hasher.write_usize(out.len());
        out.push_str(&format!("{:016x}", hasher.finish()));
    }
    out.truncate(chars);
    out
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

/// Everything a test made, removed on drop (processes first, then cgroups, namespaces, links).
struct Fixture {
    top: PathBuf,
    /// The pod uid `container` makes containers in.
    uid: String,
    /// Every pod uid made (the first, and those of pods made again).
    uids: Vec<String>,
    /// (pod uid, container id).
    container_ids: Vec<(String, String)>,
    children: Vec<Child>,
    /// (network namespace, host end of its veth pair).
    networks: Vec<(String, String)>,
}

/// A network namespace of the fixture.
struct Network {
    /// Its name (`ip netns`).
    name: String,
    /// The host end's address.
    host_ip: String,
    /// The namespace end's address.
    inside_ip: String,
}

fn random_uid() -> String {
    format!(
        "{}-{}-{}-{}-{}",
        random_hex(8),
        random_hex(4),
        random_hex(4),
        random_hex(4),
        random_hex(12)
    )
}

impl Fixture {
    /// None (with a message) when the test cannot run here.
    fn new(test: &str) -> Option<Fixture> {
        if !is_root() {
            eprintln!("SKIPPED {test}: the live fault tests need root (they signal processes and make cgroups)");
            return None;
        }
        let top =
            Path::new(PIDS_ROOT).join(format!("bloodraven-chaos-agent-test-{}", random_hex(8)));
        if let Err(error) = std::fs::create_dir(&top) {
            eprintln!("SKIPPED {test}: cannot make a cgroup under {PIDS_ROOT} (cgroup v1 pids hierarchy): {error}");
            return None;
        }
        let uid = random_uid();
        Some(Fixture {
            top,
            uid: uid.clone(),
            uids: vec![uid],
            container_ids: Vec::new(),
            children: Vec::new(),
            networks: Vec::new(),
        })
    }

    /// A new fake container of the current pod: its cgroup and id.
    fn container(&mut self) -> String {
        let id = random_hex(64);
        self.container_ids.push((self.uid.clone(), id.clone()));
        std::fs::create_dir_all(self.cgroup(&id)).unwrap();
        id
    }

    /// The pod deleted and made again: a new uid, for the containers made from now on.
    fn pod_made_again(&mut self) -> String {
        self.uid = random_uid();
        self.uids.push(self.uid.clone());
        self.uid.clone()
    }

    fn cgroup(&self, id: &str) -> PathBuf {
        let uid = self
            .container_ids
            .iter()
            .find(|(_, known)| known == id)
            .map_or(self.uid.as_str(), |(uid, _)| uid.as_str());
        self.top.join(format!("pod{uid}")).join(id)
    }

    fn procs(&self, id: &str) -> Vec<i32> {
        std::fs::read_to_string(self.cgroup(id).join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// Starts `script` (sh) inside the container `id`'s cgroup (and the network namespace
    /// `netns`, if any), and waits until `expected` processes are in the cgroup.
    fn spawn(&mut self, id: &str, script: &str, netns: Option<&str>, expected: usize) -> i32 {
        let procs_file = self.cgroup(id).join("cgroup.procs");
        // Into the cgroup first (`ip netns exec` remounts /sys, hiding /sys/fs/cgroup), then
        // into the namespace: the cgroup is kept across exec.
        let script = match netns {
            Some(name) => format!("exec ip netns exec {name} sh -c '{script}'"),
            None => script.to_owned(),
        };
        // Braces: `a && b & c` would background `a && b` in a subshell forked before the move.
        let body = format!("echo $$ > {} && {{ {script}; }}", procs_file.display());
        let mut command = Command::new("sh");
        command.args(["-c", &body]);
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        self.children.push(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.procs(id).len() < expected {
            assert!(
                Instant::now() < deadline,
                "the cgroup of {id} never held {expected} processes: {:?}",
                self.procs(id)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        pid
    }

    /// Whether the child with this pid has exited (reaping it).
    fn exited(&mut self, pid: i32) -> bool {
        self.children
            .iter_mut()
            .find(|child| i32::try_from(child.id()).ok() == Some(pid))
            .map(|child| child.try_wait().unwrap().is_some())
            .unwrap_or(true)
    }

    fn ip(args: &[&str]) {
        let status = Command::new("ip").args(args).status().unwrap();
        assert!(status.success(), "ip {}", args.join(" "));
    }

    /// A network namespace with a veth pair (each in a /30 of its own under 10.253/16).
    fn network(&mut self) -> Network {
        let (tag, octet) = loop {
            let tag = random_hex(6);
            let octet = u8::from_str_radix(&tag[..2], 16).unwrap();
            let taken = self.networks.iter().any(|(name, _)| {
                name.strip_prefix("br-chaos-test-")
                    .is_some_and(|t| t[..2] == tag[..2])
            });
            if !taken {
                break (tag, octet);
            }
        };
        let name = format!("br-chaos-test-{tag}");
        let host = format!("brc{tag}h");
        let inside = format!("brc{tag}n");
        let (host_ip, inside_ip) = (format!("10.253.{octet}.1"), format!("10.253.{octet}.2"));
        Self::ip(&["netns", "add", &name]);
        Self::ip(&[
            "link", "add", &host, "type", "veth", "peer", "name", &inside,
        ]);
        self.networks.push((name.clone(), host.clone()));
        Self::ip(&["link", "set", &inside, "netns", &name]);
        Self::ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &host]);
        Self::ip(&["link", "set", &host, "up"]);
        Self::ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{inside_ip}/30"),
            "dev",
            &inside,
        ]);
        Self::ip(&["-n", &name, "link", "set", &inside, "up"]);
        Self::ip(&["-n", &name, "link", "set", "lo", "up"]);
        Network {
            name,
            host_ip,
            inside_ip,
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for (_, id) in self.container_ids.clone() {
            for pid in self.procs(&id) {
                let _ = Command::new("kill")
                    .args(["-CONT", &pid.to_string()])
                    .status();
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (_, id) in self.container_ids.clone() {
            while !self.procs(&id).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Err(error) = std::fs::remove_dir(self.cgroup(&id)) {
                eprintln!("cleanup: could not remove the cgroup of {id}: {error}");
            }
        }
        for uid in &self.uids {
            let _ = std::fs::remove_dir(self.top.join(format!("pod{uid}")));
        }
        if let Err(error) = std::fs::remove_dir(&self.top) {
            eprintln!("cleanup: could not remove {}: {error}", self.top.display());
        }
        for (name, link) in &self.networks {
            let _ = Command::new("ip")
                .args(["link", "del", link])
                .stderr(Stdio::null())
                .status();
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

fn states(procfs: &ProcFs, ids: &[String]) -> Vec<char> {
    procfs
        .container_processes(ids)
        .unwrap()
        .iter()
        .flat_map(|p| procfs.threads(p.pid))
        .map(|t| t.state.0)
        .collect()
}

// Freeze counts only once every thread is stopped, thaw only once none is; kill only once
// no process of the container is left; keepDown kills what starts later until end
// (docs/design/style.md rule 14: an injection only counts after it has been verified).
#[test]
fn freeze_thaw_kill_and_keep_down_on_a_fake_container() {
    let Some(mut fixture) = Fixture::new("freeze_thaw_kill_and_keep_down_on_a_fake_container")
    else {
        return;
    };
    let id = fixture.container();
    let ids = vec![id.clone()];
    // A shell with two sleeps (one a child in the background), and a lone sleep.
    let parent = fixture.spawn(&id, "sleep 1000 & sleep 1000", None, 3);
    let lone = fixture.spawn(&id, "exec sleep 1000", None, 4);
    let procfs = ProcFs::default();
    assert_eq!(procfs.live_container_processes(&ids).unwrap().len(), 4);

    let (frozen, effect) = freeze::freeze(&procfs, &ids).unwrap();
    assert_eq!(frozen.len(), 4, "{effect}");
    assert!(effect.contains("4 processes SIGSTOPped"), "{effect}");
    let seen = states(&procfs, &ids);
    assert!(seen.iter().all(|s| *s == 'T'), "after freeze: {seen:?}");

    let effect = freeze::thaw(&procfs, &ids).unwrap();
    assert!(
        effect.contains("none of their 4 threads left stopped"),
        "{effect}"
    );
    let seen = states(&procfs, &ids);
    assert!(seen.iter().all(|s| *s != 'T'), "after thaw: {seen:?}");

    let (killed, effect) = kill::kill_once(&procfs, &ids).unwrap();
    assert_eq!(killed.len(), 4, "{effect}");
    assert!(procfs.live_container_processes(&ids).unwrap().is_empty());
    assert!(fixture.exited(parent) && fixture.exited(lone));
    assert!(kill::kill_once(&procfs, &ids)
        .unwrap_err()
        .to_string()
        .contains("none of its cgroups"));
    assert!(freeze::freeze(&procfs, &ids).is_err());

    let keep_down = KeepDown::start(procfs.clone(), Watch::known_ids("app", ids.clone()));
    let restarted = fixture.spawn(&id, "exec sleep 1000", None, 0);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !fixture.exited(restarted) {
        assert!(
            Instant::now() < deadline,
            "keepDown did not kill pid {restarted} within 3s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = keep_down.status();
    assert!(status.kills >= 1 && status.problem.is_none(), "{status:?}");
    let effect = keep_down.stop().unwrap();
    assert!(effect.contains("stopped killing"), "{effect}");
    let after = fixture.spawn(&id, "exec sleep 1000", None, 1);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !fixture.exited(after),
        "a process started after end was killed"
    );
}

/// A fixed pod, standing in for the API.
#[derive(Clone)]
struct FixedLocator(PodView);

impl Locator for FixedLocator {
    async fn pod(&self, namespace: &str, name: &str) -> Result<PodView> {
        if namespace == self.0.namespace && name == self.0.name {
            Ok(self.0.clone())
        } else {
            Err(bloodraven_chaos_agent::Error::PodLookup {
                namespace: namespace.to_owned(),
                pod: name.to_owned(),
                reason: format!("pods \"{name}\" not found"),
            })
        }
    }
}

fn pod_view(fixture: &Fixture, containers: &[(&str, &str)]) -> PodView {
    PodView {
        namespace: "bloodraven-playground".into(),
        name: "iad-0".into(),
        uid: fixture.uid.clone(),
        node_name: Some("node-iad".into()),
        host_network: false,
        containers: containers
            .iter()
            .map(|(name, id)| ContainerView {
                name: (*name).to_owned(),
                container_id: Some(format!("containerd://{id}")),
                finished: false,
            })
            .collect(),
        ips: Vec::new(),
    }
}

fn config(state_dir: &Path) -> AgentConfig {
    AgentConfig {
        state_dir: state_dir.to_owned(),
        namespaces: vec!["bloodraven-playground".into()],
        node: Some("node-iad".into()),
        proc_root: "/proc".into(),
        own_pod: None,
    }
}

fn started(response: Response) -> u64 {
    match response {
        Response::Started(started) => started.id,
        other => panic!("expected a started fault, got {}", other.to_line()),
    }
}

async fn list<L: Locator>(agent: &Arc<Agent<L>>) -> Vec<FaultStatus> {
    match agent.handle(Request::List(ListRequest {})).await {
        Response::List(list) => list.faults,
        other => panic!("expected a list, got {}", other.to_line()),
    }
}

// The agent's request path minus the API: guard, container lookup, verified injection,
// `faults.json`, end, cleanup, and the undo at start of what a crashed agent left
// (docs/design/style.md rule 14: always cleans up; mirrord's agent will not start on top of
// rules left behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_guards_records_ends_and_recovers_faults() {
    let Some(mut fixture) = Fixture::new("the_agent_guards_records_ends_and_recovers_faults")
    else {
        return;
    };
    let mysql = fixture.container();
    let sidecar = fixture.container();
    fixture.spawn(&mysql, "exec sleep 1000", None, 1);
    fixture.spawn(&sidecar, "exec sleep 1000", None, 1);
    let state = tempfile::tempdir().unwrap();
    let locator = FixedLocator(pod_view(
        &fixture,
        &[("mysql", &mysql), ("sidecar", &sidecar)],
    ));
    let agent = Agent::start(config(state.path()), locator.clone())
        .await
        .unwrap();
    let procfs = ProcFs::default();

    let freeze = |namespace: &str, pod: &str, container: &str| {
        Request::Freeze(FreezeRequest {
            namespace: namespace.into(),
            pod: pod.into(),
            container: container.into(),
        })
    };
    let refused = agent.handle(freeze("kube-system", "iad-0", "mysql")).await;
    assert_eq!(
        refused.error(),
        Some("refused: namespace \"kube-system\" is not one this agent may touch (allowed: bloodraven-playground)")
    );
    let absent = agent
        .handle(freeze("bloodraven-playground", "iad-0", "nginx"))
        .await;
    assert!(
        absent.error().unwrap().contains("lists: mysql, sidecar"),
        "{absent:?}"
    );

    let frozen = started(
        agent
            .handle(freeze("bloodraven-playground", "iad-0", "mysql"))
            .await,
    );
    assert!(states(&procfs, std::slice::from_ref(&mysql))
        .iter()
        .all(|s| *s == 'T'));
    assert!(states(&procfs, std::slice::from_ref(&sidecar))
        .iter()
        .all(|s| *s != 'T'));
    let recorded = StateFile::load(&state.path().join(STATE_FILE)).unwrap();
    assert_eq!(recorded.faults.len(), 1);
    assert_eq!(recorded.faults[0].kind, FaultKind::Freeze);
    assert_eq!(recorded.faults[0].container_ids, vec![mysql.clone()]);

    let kill = started(
        agent
            .handle(Request::Kill(KillRequest {
                namespace: "bloodraven-playground".into(),
                pod: "iad-0".into(),
                container: "sidecar".into(),
                keep_down: true,
            }))
            .await,
    );
    assert!(procfs
        .live_container_processes(std::slice::from_ref(&sidecar))
        .unwrap()
        .is_empty());
    let restarted = fixture.spawn(&sidecar, "exec sleep 1000", None, 0);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !fixture.exited(restarted) {
        assert!(
            Instant::now() < deadline,
            "keepDown did not kill the restarted sidecar"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let faults = list(&agent).await;
    assert_eq!(faults.len(), 2);
    assert!(
        faults[1].keep_down && faults[1].kills >= Some(1),
        "{faults:?}"
    );

    let ended = agent.handle(Request::End(EndRequest { id: kill })).await;
    assert!(
        matches!(&ended, Response::Ended(e) if e.effect.contains("stopped killing")),
        "{ended:?}"
    );
    let unknown = agent.handle(Request::End(EndRequest { id: kill })).await;
    assert!(unknown
        .error()
        .unwrap()
        .contains(&format!("holds no fault with that id (active: {frozen})")));

    // A crash: the agent is gone without undoing the freeze; the next one undoes it at start.
    drop(agent);
    assert!(states(&procfs, std::slice::from_ref(&mysql))
        .iter()
        .all(|s| *s == 'T'));
    let agent = Agent::start(config(state.path()), locator).await.unwrap();
    let seen = states(&procfs, std::slice::from_ref(&mysql));
    assert!(
        !seen.is_empty() && seen.iter().all(|s| *s != 'T'),
        "after restart: {seen:?}"
    );
    assert!(list(&agent).await.is_empty());
    assert!(StateFile::load(&state.path().join(STATE_FILE))
        .unwrap()
        .faults
        .is_empty());

    // Ids are not reused; cleanup ends what is left and `list` is empty after it.
    let again = started(
        agent
            .handle(freeze("bloodraven-playground", "iad-0", "mysql"))
            .await,
    );
    assert!(again > kill);
    let cleaned = agent.handle(Request::Cleanup(Default::default())).await;
    assert!(
        matches!(&cleaned, Response::CleanedUp(c) if c.ended.len() == 1),
        "{cleaned:?}"
    );
    assert!(states(&procfs, std::slice::from_ref(&mysql))
        .iter()
        .all(|s| *s != 'T'));
    assert!(list(&agent).await.is_empty());
}

/// How soon a keepDown must kill its container started again, the pod status not naming it.
const RESTART_KILLED_WITHIN: Duration = Duration::from_millis(200);

/// Starts `exe 1000` in the container `id` (a new cgroup: the container started again) and
/// returns how long it lived, failing when it outlives `within`.
fn start_again_and_time(fixture: &mut Fixture, id: &str, exe: &str, within: Duration) -> Duration {
    let started = Instant::now();
    let pid = fixture.spawn(id, &format!("exec {exe} 1000"), None, 0);
    while !fixture.exited(pid) {
        assert!(
            started.elapsed() < within,
            "pid {pid} ({exe}) in the new cgroup {id} still alive after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    started.elapsed()
}

// keepDown keeps the container down when the kubelet starts it again at once (a new
// container id the pod status names only a second or two later): a process in a new cgroup
// of the pod running the killed container's executable is killed within a few scans, while
// the pod's other container, and that container started again itself (a new cgroup, its own
// executable), are left alone (docs/design/style.md rule 14: the agent acts on its target
// only). The scenario behind it: a MariaDB primary kept down ran crash recovery and served
// its binlog for the second before the pod status named its new id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_down_kills_the_container_started_again_before_the_pod_status_names_it() {
    let Some(mut fixture) =
        Fixture::new("keep_down_kills_the_container_started_again_before_the_pod_status_names_it")
    else {
        return;
    };
    // The sidecar runs a program of its own, and so does a debug container: copies of sleep
    // under other names.
    let bin = tempfile::tempdir().unwrap();
    let sidecar_exe = bin.path().join("bloodraven-sidecar");
    std::fs::copy("/usr/bin/sleep", &sidecar_exe).unwrap();
    let sidecar_exe = sidecar_exe.to_str().unwrap().to_owned();
    let debug_exe = bin.path().join("debug");
    std::fs::copy("/usr/bin/sleep", &debug_exe).unwrap();
    let debug_exe = debug_exe.to_str().unwrap().to_owned();
    let mysql = fixture.container();
    let sidecar = fixture.container();
    fixture.spawn(&mysql, "exec sleep 1000", None, 1);
    let sidecar_pid = fixture.spawn(&sidecar, &format!("exec {sidecar_exe} 1000"), None, 1);
    let locator = SharedLocator::default();
    locator.set(pod_view(
        &fixture,
        &[("mysql", &mysql), ("sidecar", &sidecar)],
    ));
    let state = tempfile::tempdir().unwrap();
    let agent = Agent::start(config(state.path()), locator.clone())
        .await
        .unwrap();

    let kill = Request::Kill(KillRequest {
        namespace: "bloodraven-playground".into(),
        pod: "iad-0".into(),
        container: "mysql".into(),
        keep_down: true,
    });
    let fault = match agent.handle(kill).await {
        Response::Started(started) => {
            assert!(
                started.effect.contains(
                    "recognised in a new cgroup of the pod by its executable (/usr/bin/sleep)"
                ),
                "{}",
                started.effect
            );
            started.id
        }
        other => panic!("expected a started kill, got {}", other.to_line()),
    };

    // The kubelet starts mysql again: a new cgroup of the pod, the same executable; the pod
    // status still names the old id (the locator is not told).
    let again = fixture.container();
    let lived = start_again_and_time(&mut fixture, &again, "sleep", RESTART_KILLED_WITHIN);
    eprintln!("the container started again lived {lived:?}");
    let status = &list(&agent).await[0];
    assert_eq!(
        (status.restarts_caught, status.restarts_recognised),
        (Some(1), Some(1)),
        "{status:?}"
    );
    let longest = status.longest_restart_alive_ms.unwrap();
    assert!(
        u128::from(longest) <= RESTART_KILLED_WITHIN.as_millis(),
        "{status:?}"
    );
    assert_eq!(status.problem, None);
    assert!(!fixture.exited(sidecar_pid), "the sidecar was killed");

    // A container the status does not list yet (an ephemeral one just added), with a program
    // of its own, every other container up: left alone.
    let debug = fixture.container();
    let debug_pid = fixture.spawn(&debug, &format!("exec {debug_exe} 1000"), None, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !fixture.exited(debug_pid),
        "a new container running its own program was killed"
    );

    // The sidecar dies and the kubelet starts it again, in a new cgroup the status does not
    // name yet, with its own executable: left alone, before and after the status names it.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sidecar_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while !fixture.exited(sidecar_pid) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let sidecar_again = fixture.container();
    let sidecar_again_pid =
        fixture.spawn(&sidecar_again, &format!("exec {sidecar_exe} 1000"), None, 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !fixture.exited(sidecar_again_pid),
        "the sidecar started again was killed"
    );
    locator.set(pod_view(
        &fixture,
        &[("mysql", &again), ("sidecar", &sidecar_again)],
    ));
    tokio::time::sleep(KEEP_DOWN_REFRESH + Duration::from_millis(500)).await;
    assert!(
        !fixture.exited(sidecar_again_pid),
        "the sidecar started again was killed once the status named it"
    );

    // mysql started again a second time, the sidecar up under the id the status gave it.
    let third = fixture.container();
    start_again_and_time(&mut fixture, &third, "sleep", RESTART_KILLED_WITHIN);
    let status = &list(&agent).await[0];
    assert_eq!(
        (status.restarts_caught, status.restarts_recognised),
        (Some(2), Some(2)),
        "{status:?}"
    );
    assert_eq!(status.problem, None);
    assert!(!fixture.exited(sidecar_again_pid));

    let ended = match agent.handle(Request::End(EndRequest { id: fault })).await {
        Response::Ended(ended) => ended.effect,
        other => panic!("expected the kill ended, got {}", other.to_line()),
    };
    assert!(
        ended.contains("2 restarts of the container caught (2 before the pod status named them)"),
        "{ended}"
    );
    // After the end, the container starts again and stays up.
    let fourth = fixture.container();
    let up = fixture.spawn(&fourth, "exec sleep 1000", None, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !fixture.exited(up),
        "a process started after end was killed"
    );
    assert!(!fixture.exited(sidecar_again_pid));
}

fn connect(address: &str) -> std::io::Result<TcpStream> {
    let address: SocketAddr = format!("{address}:9").parse().unwrap();
    TcpStream::connect_timeout(&address, Duration::from_millis(700))
}

fn assert_reachable(address: &str, when: &str) {
    // Nothing listens on port 9 inside the namespace: a reachable namespace answers RST.
    let result = connect(address);
    assert!(
        matches!(&result, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused),
        "{when}: expected the connection refused (reachable), got {result:?}"
    );
}

fn assert_cut_off(address: &str, when: &str) {
    let result = connect(address);
    assert!(
        matches!(&result, Err(e) if e.kind() == std::io::ErrorKind::TimedOut),
        "{when}: expected the connection to time out (packets dropped), got {result:?}"
    );
}

/// An echo server on `address` inside the network namespace `netns` (a thread of this test
/// enters it): returns its port.
fn echo_server_in(netns: &str, address: &str) -> u16 {
    let namespace = std::fs::File::open(format!("/run/netns/{netns}")).unwrap();
    let address = address.to_owned();
    let (port_sender, port) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let listener = TcpListener::bind((address.as_str(), 0)).unwrap();
        port_sender
            .send(listener.local_addr().unwrap().port())
            .unwrap();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buffer = [0u8; 64];
                while let Ok(read) = stream.read(&mut buffer) {
                    if read == 0 || stream.write_all(&buffer[..read]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port.recv().unwrap()
}

/// Sends `byte` and reads the echo within `wait`.
fn echo(stream: &mut TcpStream, byte: u8, wait: Duration) -> std::io::Result<u8> {
    stream.set_read_timeout(Some(wait))?;
    stream.write_all(&[byte])?;
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer)?;
    Ok(answer[0])
}

// A partition drops every packet between the pod's network namespace and the peers until
// it ends, and its end leaves nothing of the agent's in the namespace (docs/design/style.md
// rule 14: a fault owns its rules, removed as a whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_cuts_a_network_namespace_off_until_it_ends() {
    let Some(mut fixture) = Fixture::new("a_partition_cuts_a_network_namespace_off_until_it_ends")
    else {
        return;
    };
    if bloodraven_chaos_agent::command::find_program("nft").is_none() {
        eprintln!("SKIPPED a_partition_cuts_a_network_namespace_off_until_it_ends: nft is not installed (Debian: apt-get install nftables; ./setup does)");
        return;
    }
    let network = fixture.network();
    let (host_ip, inside_ip) = (network.host_ip.clone(), network.inside_ip.clone());
    let app = fixture.container();
    fixture.spawn(&app, "exec sleep 1000", Some(&network.name), 1);
    let procfs = ProcFs::default();
    let holder = procfs.pod_processes(&fixture.uid).unwrap();
    assert_eq!(holder.len(), 1);
    let pid = holder[0].pid;
    let own = i32::try_from(std::process::id()).unwrap();
    assert_ne!(procfs.netns(pid).unwrap(), procfs.netns(own).unwrap());
    assert_reachable(&inside_ip, "before the partition");

    let port = echo_server_in(&network.name, &inside_ip);
    let mut established = TcpStream::connect((inside_ip.as_str(), port)).unwrap();
    assert_eq!(
        echo(&mut established, b'a', Duration::from_secs(5)).unwrap(),
        b'a'
    );

    // The library, as the agent calls it once it has a pid in the pod's namespace.
    let peers = vec![
        Peer::parse(&host_ip).unwrap(),
        Peer::parse("192.0.2.0/24").unwrap(),
    ];
    let id = 900_000 + u64::from(std::process::id() % 1000);
    let effect = partition::apply(pid, id, Backend::Nft, &peers).unwrap();
    assert!(
        effect.contains(&format!("table inet bloodraven_chaos_{id} listed")),
        "{effect}"
    );
    assert!(partition::present(pid, id, Backend::Nft).unwrap());
    assert_cut_off(&inside_ip, "during the partition");
    // The connection made before the partition is cut too.
    let during = echo(&mut established, b'b', Duration::from_millis(700));
    assert!(
        during.is_err(),
        "an established connection still answered: {during:?}"
    );
    let healed = partition::heal(pid, id, Backend::Nft).unwrap();
    assert!(
        healed.contains("no longer listed") && !healed.contains("(0 packets"),
        "{healed}"
    );
    assert!(!partition::present(pid, id, Backend::Nft).unwrap());
    assert_reachable(&inside_ip, "after the partition ended");
    // TCP retransmits the byte sent into the partition; its echo arrives once it is over.
    let mut answer = [0u8; 1];
    established
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    established.read_exact(&mut answer).unwrap();
    assert_eq!(answer[0], b'b');

    // The iptables fallback, where the machine has it.
    if bloodraven_chaos_agent::command::find_program("iptables").is_some() {
        let id = id + 1;
        let effect = partition::apply(pid, id, Backend::Iptables, &peers).unwrap();
        assert!(
            effect.contains(&format!("chain BR-CHAOS-{id} listed")),
            "{effect}"
        );
        assert!(partition::present(pid, id, Backend::Iptables).unwrap());
        assert_cut_off(&inside_ip, "during the iptables partition");
        let healed = partition::heal(pid, id, Backend::Iptables).unwrap();
        assert!(healed.contains("no longer listed"), "{healed}");
        assert!(!partition::present(pid, id, Backend::Iptables).unwrap());
        assert_reachable(&inside_ip, "after the iptables partition ended");
    } else {
        eprintln!("iptables is not installed: the iptables fallback is not tested live here");
    }

    // The same through the agent's request path.
    let state = tempfile::tempdir().unwrap();
    let agent = Agent::start(
        config(state.path()),
        FixedLocator(pod_view(&fixture, &[("app", &app)])),
    )
    .await
    .unwrap();
    let request = Request::Partition(PartitionRequest {
        namespace: "bloodraven-playground".into(),
        pod: "iad-0".into(),
        peers: vec![host_ip.clone()],
        peer_pods: vec![],
    });
    let fault = started(agent.handle(request).await);
    assert_cut_off(&inside_ip, "during the agent's partition");
    let ended = agent.handle(Request::End(EndRequest { id: fault })).await;
    assert!(
        matches!(&ended, Response::Ended(e) if e.effect.contains("no longer listed")),
        "{ended:?}"
    );
    assert!(!partition::present(pid, fault, Backend::Nft).unwrap());
    assert_reachable(&inside_ip, "after the agent's partition ended");
    let bad = agent
        .handle(Request::Partition(PartitionRequest {
            namespace: "bloodraven-playground".into(),
            pod: "iad-0".into(),
            peers: vec!["iad-1".into()],
            peer_pods: vec![],
        }))
        .await;
    assert!(
        bad.error()
            .unwrap()
            .contains("parse partition peer \"iad-1\""),
        "{bad:?}"
    );
}

/// Pods that change while a test runs (deleted, made again, given another IP), standing in
/// for the API.
#[derive(Clone, Default)]
struct SharedLocator(Arc<std::sync::Mutex<Vec<PodView>>>);

impl SharedLocator {
    fn pods(&self) -> std::sync::MutexGuard<'_, Vec<PodView>> {
        self.0.lock().unwrap()
    }

    fn set(&self, view: PodView) {
        let mut pods = self.pods();
        pods.retain(|p| (&p.namespace, &p.name) != (&view.namespace, &view.name));
        pods.push(view);
    }

    fn delete(&self, name: &str) {
        self.pods().retain(|p| p.name != name);
    }
}

impl Locator for SharedLocator {
    async fn pod(&self, namespace: &str, name: &str) -> Result<PodView> {
        let found = self
            .pods()
            .iter()
            .find(|p| p.namespace == namespace && p.name == name)
            .cloned();
        found.ok_or_else(|| bloodraven_chaos_agent::Error::PodLookup {
            namespace: namespace.to_owned(),
            pod: name.to_owned(),
            reason: format!("pods \"{name}\" not found"),
        })
    }
}

/// The peer pod `pdx-0` at `ips`.
fn peer_pod(ips: &[&str]) -> PodView {
    PodView {
        namespace: "bloodraven-playground".into(),
        name: "pdx-0".into(),
        uid: random_uid(),
        node_name: Some("node-pdx".into()),
        host_network: false,
        containers: Vec::new(),
        ips: ips.iter().map(|ip| (*ip).to_owned()).collect(),
    }
}

/// `nft list set inet bloodraven_chaos_<id> peers4` in the namespace `netns`.
fn nft_set(netns: &str, id: u64) -> String {
    let output = Command::new("ip")
        .args(["netns", "exec", netns, "nft", "list", "set", "inet"])
        .arg(format!("bloodraven_chaos_{id}"))
        .arg("peers4")
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Whether fault `id`'s table is listed in the namespace `netns`.
fn table_listed(netns: &str, id: u64) -> bool {
    let output = Command::new("ip")
        .args(["netns", "exec", netns, "nft", "list", "tables"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .any(|line| line.trim() == format!("table inet bloodraven_chaos_{id}"))
}

/// Waits (15 s at most) until the one fault listed satisfies `done`.
async fn wait_for<L: Locator>(
    agent: &Arc<Agent<L>>,
    what: &str,
    done: impl Fn(&FaultStatus) -> bool,
) -> FaultStatus {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let faults = list(agent).await;
        if let Some(fault) = faults.first().filter(|fault| done(fault)) {
            return fault.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 15 s: {faults:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SIGKILLs the "pod"'s process `pid` and reaps it: the pod deleted.
fn delete_pod_process(fixture: &mut Fixture, pid: i32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !fixture.exited(pid) {
        assert!(Instant::now() < deadline, "pid {pid} outlived SIGKILL");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// A partition follows its pod for its whole life, as a NetworkChaos follows the pods it
// selected: the pod deleted and made again (a new uid, a new network namespace) is cut too; a
// peer pod that came back under another address is dropped at the new one and no longer at
// the old; the end, and after a crash the next agent's start, remove the rules from every
// namespace cut, and say which namespace went with its pod (docs/design/style.md rule 14: a
// fault is verified where it is made, and always cleaned up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_follows_its_pod_made_again_and_its_peers_new_address() {
    let test = "a_partition_follows_its_pod_made_again_and_its_peers_new_address";
    let Some(mut fixture) = Fixture::new(test) else {
        return;
    };
    if bloodraven_chaos_agent::command::find_program("nft").is_none() {
        eprintln!(
            "SKIPPED {test}: nft is not installed (Debian: apt-get install nftables; ./setup does)"
        );
        return;
    }
    let first = fixture.network();
    let second = fixture.network();
    let third = fixture.network();
    let first_uid = fixture.uid.clone();
    let app = fixture.container();
    let app_pid = fixture.spawn(&app, "exec sleep 1000", Some(&first.name), 1);
    let locator = SharedLocator::default();
    locator.set(pod_view(&fixture, &[("app", &app)]));
    locator.set(peer_pod(&[&first.host_ip]));
    let state = tempfile::tempdir().unwrap();
    let agent = Agent::start(config(state.path()), locator.clone())
        .await
        .unwrap();
    assert_reachable(&first.inside_ip, "before the partition");

    // Cut from a fixed peer (the second namespace's host end) and from the peer pod pdx-0
    // (at the first namespace's host end, the address this test connects from).
    let request = Request::Partition(PartitionRequest {
        namespace: "bloodraven-playground".into(),
        pod: "iad-0".into(),
        peers: vec![second.host_ip.clone()],
        peer_pods: vec![PodRef {
            namespace: "bloodraven-playground".into(),
            pod: "pdx-0".into(),
        }],
    });
    let fault = match agent.handle(request.clone()).await {
        Response::Started(started) => {
            assert!(
                started.effect.contains("followed until end")
                    && started.effect.contains("bloodraven-playground/pdx-0"),
                "{}",
                started.effect
            );
            started.id
        }
        other => panic!("expected a started partition, got {}", other.to_line()),
    };
    assert_cut_off(&first.inside_ip, "during the partition");
    let status = &list(&agent).await[0];
    assert_eq!(status.cuts.len(), 1, "{status:?}");
    assert_eq!(status.cuts[0].pod_uid, first_uid);
    assert_eq!(status.reapplied, Some(0));
    assert_eq!(status.peer_pods[0].addresses, vec![first.host_ip.clone()]);

    // The pod deleted (its process gone, the API without it for a step or two), then made
    // again by its StatefulSet: a new uid, a new network namespace.
    delete_pod_process(&mut fixture, app_pid);
    locator.delete("iad-0");
    tokio::time::sleep(PARTITION_REFRESH + Duration::from_millis(500)).await;
    let second_uid = fixture.pod_made_again();
    let app = fixture.container();
    let app_pid = fixture.spawn(&app, "exec sleep 1000", Some(&second.name), 1);
    locator.set(pod_view(&fixture, &[("app", &app)]));
    let status = wait_for(&agent, "the pod made again is cut", |fault| {
        fault
            .cuts
            .iter()
            .any(|cut| cut.pod_uid == second_uid && !cut.pending)
    })
    .await;
    assert_eq!(status.reapplied, Some(1), "{status:?}");
    assert_eq!(status.cuts.len(), 2, "{status:?}");
    assert!(
        status.cuts[0].gone && !status.cuts[1].gone,
        "the first pod's namespace is gone with it: {status:?}"
    );
    assert_eq!(status.problem, None);
    assert_cut_off(
        &second.inside_ip,
        "the pod made again, during the partition",
    );
    let set = nft_set(&second.name, fault);
    assert!(
        set.contains(&first.host_ip) && set.contains(&second.host_ip),
        "{set}"
    );

    // The peer pod came back under another address: out with the old, in with the new.
    let moved = "192.0.2.77";
    locator.set(peer_pod(&[moved]));
    let status = wait_for(
        &agent,
        "the rules follow the peer pod's new address",
        |fault| fault.reapplied == Some(2),
    )
    .await;
    assert_eq!(status.peer_pods[0].addresses, vec![moved]);
    assert!(
        status.peers.contains(&moved.to_owned()) && !status.peers.contains(&first.host_ip),
        "{status:?}"
    );
    assert_eq!(status.cuts[1].peers, status.peers);
    let set = nft_set(&second.name, fault);
    assert!(
        set.contains(moved) && !set.contains(&first.host_ip) && set.contains(&second.host_ip),
        "{set}"
    );
    assert_cut_off(&second.inside_ip, "after the peer moved");

    // The end names every namespace cut; the one that went with its pod is not a failure.
    let ended = match agent.handle(Request::End(EndRequest { id: fault })).await {
        Response::Ended(ended) => ended.effect,
        other => panic!("expected the partition ended, got {}", other.to_line()),
    };
    assert!(
        ended.contains(&format!("(uid {first_uid}) "))
            && ended.contains("the namespace, and the rules in it, are gone (nothing to remove)"),
        "{ended}"
    );
    assert!(
        ended.contains(&format!("(uid {second_uid}) ")) && ended.contains("no longer listed"),
        "{ended}"
    );
    assert!(
        ended.contains("(2 namespaces; 2 re-applications while it stood)"),
        "{ended}"
    );
    assert!(!table_listed(&second.name, fault));
    assert_reachable(&second.inside_ip, "after the partition ended");
    assert!(list(&agent).await.is_empty());

    // A crash after the pod was made again: the next agent's start undoes the rules the
    // follower put in the new namespace.
    locator.set(peer_pod(&[&third.host_ip]));
    let fault = started(agent.handle(request).await);
    delete_pod_process(&mut fixture, app_pid);
    let third_uid = fixture.pod_made_again();
    let app = fixture.container();
    fixture.spawn(&app, "exec sleep 1000", Some(&third.name), 1);
    locator.set(pod_view(&fixture, &[("app", &app)]));
    wait_for(&agent, "the pod made again a second time is cut", |fault| {
        fault
            .cuts
            .iter()
            .any(|cut| cut.pod_uid == third_uid && !cut.pending)
    })
    .await;
    assert_cut_off(&third.inside_ip, "the pod made again a second time");
    drop(agent);
    // Any step under way when the agent went finishes, and its loop ends.
    tokio::time::sleep(PARTITION_REFRESH * 2).await;
    assert!(table_listed(&third.name, fault), "a crash undoes nothing");
    let recorded = StateFile::load(&state.path().join(STATE_FILE)).unwrap();
    assert_eq!(recorded.faults.len(), 1);
    assert_eq!(recorded.faults[0].cuts.len(), 2);
    let agent = Agent::start(config(state.path()), locator.clone())
        .await
        .unwrap();
    assert!(!table_listed(&third.name, fault));
    assert_reachable(&third.inside_ip, "after the next agent's start");
    assert!(list(&agent).await.is_empty());
    assert!(StateFile::load(&state.path().join(STATE_FILE))
        .unwrap()
        .faults
        .is_empty());
}

// The control socket end to end, as `kubectl exec ... ctl '<json>'` drives it: one request,
// one line back, errors as `{"error": ...}` with exit 1; a second agent will not start on the
// same state directory; shutdown undoes every fault and removes the socket
// (docs/design/style.md rule 14: always cleans up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_answers_ctl_and_shutdown_undoes_every_fault() {
    use bloodraven_chaos_agent::{ctl, server};
    let Some(mut fixture) = Fixture::new("the_socket_answers_ctl_and_shutdown_undoes_every_fault")
    else {
        return;
    };
    let mysql = fixture.container();
    fixture.spawn(&mysql, "exec sleep 1000", None, 1);
    let state = tempfile::tempdir().unwrap();
    let locator = FixedLocator(pod_view(&fixture, &[("mysql", &mysql)]));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve_until(
        config(state.path()),
        locator.clone(),
        async move {
            let _ = stopped.await;
            "test over"
        },
    ));
    let socket = server::socket_path(state.path());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "the agent never made {}",
            socket.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dir = state.path().to_owned();
    let ctl = move |request: &'static str| {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || ctl::run(&dir, request))
    };

    let (line, error, code) = ctl(
        r#"{"freeze":{"namespace":"bloodraven-playground","pod":"iad-0","container":"mysql"}}"#,
    )
    .await
    .unwrap();
    assert_eq!((code, error), (0, None), "{line}");
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["kind"], "freeze");
    assert!(
        answer["effect"].as_str().unwrap().contains("seen stopped"),
        "{line}"
    );
    let procfs = ProcFs::default();
    assert!(states(&procfs, std::slice::from_ref(&mysql))
        .iter()
        .all(|s| *s == 'T'));

    let (line, error, code) = ctl(r#"{"kill":{"namespace":"bloodraven-playground","pod":"iad-0","container":"mysql","keepDown":"yes"}}"#).await.unwrap();
    assert_eq!(code, 1);
    assert!(
        error.unwrap().contains("kill.keepDown: invalid type"),
        "{line}"
    );
    assert!(serde_json::from_str::<serde_json::Value>(&line).unwrap()["error"].is_string());
    let (line, _, code) =
        ctl(r#"{"freeze":{"namespace":"default","pod":"iad-0","container":"mysql"}}"#)
            .await
            .unwrap();
    assert_eq!(code, 1);
    assert!(line.contains("not one this agent may touch"), "{line}");
    let (line, _, code) = ctl(r#"{"list":{}}"#).await.unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&line).unwrap()["faults"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{line}"
    );

    let second = server::serve_until(config(state.path()), locator, async { "never" }).await;
    assert!(second
        .unwrap_err()
        .to_string()
        .contains("another agent is serving"));

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    let seen = states(&procfs, std::slice::from_ref(&mysql));
    assert!(
        !seen.is_empty() && seen.iter().all(|s| *s != 'T'),
        "after shutdown: {seen:?}"
    );
    assert!(!socket.exists());
    assert!(StateFile::load(&state.path().join(STATE_FILE))
        .unwrap()
        .faults
        .is_empty());
    let (line, error, code) = ctl(r#"{"list":{}}"#).await.unwrap();
    assert_eq!(code, 1);
    assert!(error.unwrap().contains("connect to the agent at"), "{line}");
}

/// The API of a stop-node: the pods on the node, and the agent's own Pod's heal annotation.
#[derive(Clone)]
struct NodeLocator {
    pods: Vec<PodView>,
    heal: Arc<std::sync::Mutex<Option<String>>>,
}

impl Locator for NodeLocator {
    async fn pod(&self, namespace: &str, name: &str) -> Result<PodView> {
        let found = self
            .pods
            .iter()
            .find(|p| p.namespace == namespace && p.name == name)
            .cloned();
        found.ok_or_else(|| bloodraven_chaos_agent::Error::PodLookup {
            namespace: namespace.to_owned(),
            pod: name.to_owned(),
            reason: format!("pods \"{name}\" not found"),
        })
    }

    async fn pods_on_node(&self, namespace: &str, node: &str) -> Result<Vec<PodView>> {
        Ok(self
            .pods
            .iter()
            .filter(|p| p.namespace == namespace && p.node_name.as_deref() == Some(node))
            .cloned()
            .collect())
    }

    async fn annotation(&self, _: &str, _: &str, key: &str) -> Result<Option<String>> {
        assert_eq!(key, stop_node::HEAL_ANNOTATION);
        Ok(self.heal.lock().unwrap().clone())
    }
}

/// A process named `kubelet` whose command line names `node`: a copy of sh, looping.
fn fake_kubelet(dir: &Path, node: &str) -> Child {
    let program = dir.join("kubelet");
    std::fs::copy("/bin/sh", &program).unwrap();
    Command::new(&program)
        .args([
            "-c",
            "while :; do sleep 0.2; done",
            "kubelet",
            &format!("--hostname-override={node}"),
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

fn thread_states(pid: i32) -> Vec<char> {
    ProcFs::default()
        .threads(pid)
        .iter()
        .map(|t| t.state.0)
        .collect()
}

async fn phase_of<L: Locator>(agent: &Arc<Agent<L>>, id: u64) -> Option<StopNodePhase> {
    list(agent)
        .await
        .into_iter()
        .find(|f| f.id == id)
        .and_then(|f| f.phase)
}

async fn wait_phase<L: Locator>(agent: &Arc<Agent<L>>, id: u64, want: StopNodePhase) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = phase_of(agent, id).await;
        if seen == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "fault {id}: phase {seen:?}, not {want:?}: {:?}",
            list(agent).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// docs/design/harness.md "The portable path", stop-node: the agent answers first, then stops
// its node's kubelet (every thread seen stopped) and kills its pods' processes (none left);
// the annotation naming the fault on its own Pod, the dead-man timer, or shutdown continues the
// kubelet (no thread left stopped); `end` then reports the heal and forgets the fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_node_stops_the_kubelet_kills_the_pods_and_heals_through_the_annotation() {
    let Some(mut fixture) = Fixture::new("stop_node_stops_the_kubelet_kills_the_pods") else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let node = format!("node-stop-{}", random_hex(6));
    let mut kubelet = fake_kubelet(state.path(), &node);
    let kubelet_pid = i32::try_from(kubelet.id()).unwrap();
    let id = fixture.container();
    fixture.spawn(&id, "sleep 3600", None, 2);
    let mut view = pod_view(&fixture, &[("mysql", &id)]);
    view.node_name = Some(node.clone());
    let heal = Arc::new(std::sync::Mutex::new(None));
    let locator = NodeLocator {
        pods: vec![view],
        heal: heal.clone(),
    };
    let mut agent_config = config(&state.path().join("agent"));
    agent_config.node = Some(node.clone());
    agent_config.own_pod = Some(PodRef {
        namespace: "bloodraven-chaos".into(),
        pod: "bloodraven-chaos-agent-x".into(),
    });
    let agent = Agent::start(agent_config.clone(), locator.clone())
        .await
        .unwrap();
    let stop = |node: &str, heal_after: Option<u64>| {
        Request::StopNode(StopNodeRequest {
            node: node.to_owned(),
            heal_after_seconds: heal_after,
        })
    };

    // Another node's stop is refused.
    let refused = agent.handle(stop("node-elsewhere", None)).await;
    assert!(
        refused
            .error()
            .is_some_and(|e| e.contains("not this agent's node")),
        "{}",
        refused.to_line()
    );

    // Answered scheduled, then in effect: the kubelet stopped, the pod's processes gone.
    let answer = agent.handle(stop(&node, None)).await;
    assert!(
        answer.to_line().contains("scheduled") && answer.to_line().contains(&node),
        "{}",
        answer.to_line()
    );
    let fault = started(answer);
    assert_eq!(
        phase_of(&agent, fault).await,
        Some(StopNodePhase::Scheduled)
    );
    // A container the kubelet starts again between the answer and the act runs under an id
    // the request never listed (s014 through the agent): it is killed too, by its pod.
    let restarted = fixture.container();
    fixture.spawn(&restarted, "sleep 3600", None, 1);
    wait_phase(&agent, fault, StopNodePhase::InEffect).await;
    assert!(
        thread_states(kubelet_pid).iter().all(|s| *s == 'T'),
        "{:?}",
        thread_states(kubelet_pid)
    );
    assert!(fixture.procs(&id).is_empty(), "{:?}", fixture.procs(&id));
    assert!(
        fixture.procs(&restarted).is_empty(),
        "{:?}",
        fixture.procs(&restarted)
    );
    let second = agent.handle(stop(&node, None)).await;
    assert!(
        second
            .error()
            .is_some_and(|e| e.contains("stopped already")),
        "{}",
        second.to_line()
    );

    // Another fault's id heals nothing; this one's does.
    *heal.lock().unwrap() = Some((fault + 100).to_string());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(phase_of(&agent, fault).await, Some(StopNodePhase::InEffect));
    *heal.lock().unwrap() = Some(fault.to_string());
    wait_phase(&agent, fault, StopNodePhase::Healed).await;
    assert!(
        !thread_states(kubelet_pid).contains(&'T'),
        "{:?}",
        thread_states(kubelet_pid)
    );
    let healed = list(&agent).await;
    assert!(
        healed[0]
            .heal
            .as_deref()
            .is_some_and(|h| h.contains("annotation")),
        "{healed:?}"
    );
    match agent.handle(Request::End(EndRequest { id: fault })).await {
        Response::Ended(ended) => {
            assert_eq!(ended.kind, FaultKind::StopNode);
            assert!(ended.effect.starts_with("healed at"), "{}", ended.effect);
        }
        other => panic!("expected ended, got {}", other.to_line()),
    }
    assert!(list(&agent).await.is_empty());

    // The dead-man timer heals by itself.
    *heal.lock().unwrap() = None;
    let timed = started(agent.handle(stop(&node, Some(1))).await);
    wait_phase(&agent, timed, StopNodePhase::InEffect).await;
    wait_phase(&agent, timed, StopNodePhase::Healed).await;
    assert!(!thread_states(kubelet_pid).contains(&'T'));
    assert!(list(&agent).await[0]
        .heal
        .as_deref()
        .is_some_and(|h| h.contains("dead-man timer")));

    // Shutdown (cleanup) continues a stopped kubelet; a new agent over the state file of one
    // that died with the node stopped does too.
    let shut = started(agent.handle(stop(&node, None)).await);
    wait_phase(&agent, shut, StopNodePhase::InEffect).await;
    agent.cleanup().await.unwrap();
    assert!(!thread_states(kubelet_pid).contains(&'T'));
    let crashed = started(agent.handle(stop(&node, None)).await);
    wait_phase(&agent, crashed, StopNodePhase::InEffect).await;
    drop(agent);
    let again = Agent::start(agent_config, locator).await.unwrap();
    assert!(!thread_states(kubelet_pid).contains(&'T'));
    assert!(list(&again).await.is_empty());

    let _ = kubelet.kill();
    let _ = kubelet.wait();
}
