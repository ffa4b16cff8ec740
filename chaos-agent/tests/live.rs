//! Live tests of the agent's faults on real processes (test tier 4 of
//! docs/design/style.md#test-tiers: real kernel, no cluster). They run as root: each makes a
//! cgroup `/sys/fs/cgroup/pids/bloodraven-chaos-agent-test-<random>/pod<uid>/<64-hex id>`
//! standing in for a container (the cgroupfs layout of docs/design/style.md rule 14's
//! lookup), starts `sleep`s in it, and drives the library the way the agent does once the
//! pod lookup has yielded a container id. The partition test also makes a network namespace
//! and a veth pair. A drop guard removes everything made, even when a test fails. Without
//! root (or a writable cgroup v1 pids hierarchy) they are skipped with a message.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bloodraven_chaos_agent::agent::{Agent, AgentConfig, StateFile, STATE_FILE};
use bloodraven_chaos_agent::faults::freeze;
use bloodraven_chaos_agent::faults::kill::{self, KeepDown};
use bloodraven_chaos_agent::faults::partition::{self, Backend, Peer};
use bloodraven_chaos_agent::pod::{ContainerView, Locator, PodView};
use bloodraven_chaos_agent::procfs::ProcFs;
use bloodraven_chaos_agent::protocol::{
    EndRequest, FaultKind, FreezeRequest, KillRequest, ListRequest, PartitionRequest, Request,
    Response,
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
    uid: String,
    container_ids: Vec<String>,
    children: Vec<Child>,
    netns: Option<String>,
    host_link: Option<String>,
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
        let uid = format!(
            "{}-{}-{}-{}-{}",
            random_hex(8),
            random_hex(4),
            random_hex(4),
            random_hex(4),
            random_hex(12)
        );
        Some(Fixture {
            top,
            uid,
            container_ids: Vec::new(),
            children: Vec::new(),
            netns: None,
            host_link: None,
        })
    }

    /// A new fake container: its cgroup and id.
    fn container(&mut self) -> String {
        let id = random_hex(64);
        std::fs::create_dir_all(self.cgroup(&id)).unwrap();
        self.container_ids.push(id.clone());
        id
    }

    fn cgroup(&self, id: &str) -> PathBuf {
        self.top.join(format!("pod{}", self.uid)).join(id)
    }

    fn procs(&self, id: &str) -> Vec<i32> {
        std::fs::read_to_string(self.cgroup(id).join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// Starts `script` (sh) inside the container `id`'s cgroup (and network namespace, when
    /// `netns`), and waits until `expected` processes are in the cgroup.
    fn spawn(&mut self, id: &str, script: &str, netns: bool, expected: usize) -> i32 {
        let procs_file = self.cgroup(id).join("cgroup.procs");
        // Into the cgroup first (`ip netns exec` remounts /sys, hiding /sys/fs/cgroup), then
        // into the namespace: the cgroup is kept across exec.
        let script = match (&self.netns, netns) {
            (Some(name), true) => format!("exec ip netns exec {name} sh -c '{script}'"),
            _ => script.to_owned(),
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

    /// A network namespace with a veth pair: returns (host address, namespace address).
    fn network(&mut self) -> (String, String) {
        let tag = random_hex(6);
        let name = format!("br-chaos-test-{tag}");
        let host = format!("brc{tag}h");
        let inside = format!("brc{tag}n");
        let octet = u8::from_str_radix(&tag[..2], 16).unwrap();
        let (host_ip, inside_ip) = (format!("10.253.{octet}.1"), format!("10.253.{octet}.2"));
        Self::ip(&["netns", "add", &name]);
        self.netns = Some(name.clone());
        Self::ip(&[
            "link", "add", &host, "type", "veth", "peer", "name", &inside,
        ]);
        self.host_link = Some(host.clone());
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
        (host_ip, inside_ip)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for id in self.container_ids.clone() {
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
        for id in self.container_ids.clone() {
            while !self.procs(&id).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Err(error) = std::fs::remove_dir(self.cgroup(&id)) {
                eprintln!("cleanup: could not remove the cgroup of {id}: {error}");
            }
        }
        let _ = std::fs::remove_dir(self.top.join(format!("pod{}", self.uid)));
        if let Err(error) = std::fs::remove_dir(&self.top) {
            eprintln!("cleanup: could not remove {}: {error}", self.top.display());
        }
        if let Some(link) = &self.host_link {
            let _ = Command::new("ip")
                .args(["link", "del", link])
                .stderr(Stdio::null())
                .status();
        }
        if let Some(name) = &self.netns {
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
    let parent = fixture.spawn(&id, "sleep 1000 & sleep 1000", false, 3);
    let lone = fixture.spawn(&id, "exec sleep 1000", false, 4);
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

    let keep_down = KeepDown::start(procfs.clone(), ids.clone());
    let restarted = fixture.spawn(&id, "exec sleep 1000", false, 0);
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
    let after = fixture.spawn(&id, "exec sleep 1000", false, 1);
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
            })
            .collect(),
    }
}

fn config(state_dir: &Path) -> AgentConfig {
    AgentConfig {
        state_dir: state_dir.to_owned(),
        namespaces: vec!["bloodraven-playground".into()],
        node: Some("node-iad".into()),
        proc_root: "/proc".into(),
    }
}

fn started(response: Response) -> u64 {
    match response {
        Response::Started(started) => started.id,
        other => panic!("expected a started fault, got {}", other.to_line()),
    }
}

async fn list(
    agent: &Arc<Agent<FixedLocator>>,
) -> Vec<bloodraven_chaos_agent::protocol::FaultStatus> {
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
    fixture.spawn(&mysql, "exec sleep 1000", false, 1);
    fixture.spawn(&sidecar, "exec sleep 1000", false, 1);
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
    let restarted = fixture.spawn(&sidecar, "exec sleep 1000", false, 0);
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
    let (host_ip, inside_ip) = fixture.network();
    let app = fixture.container();
    fixture.spawn(&app, "exec sleep 1000", true, 1);
    let procfs = ProcFs::default();
    let holder = procfs.pod_processes(&fixture.uid).unwrap();
    assert_eq!(holder.len(), 1);
    let pid = holder[0].pid;
    let own = i32::try_from(std::process::id()).unwrap();
    assert_ne!(procfs.netns(pid).unwrap(), procfs.netns(own).unwrap());
    assert_reachable(&inside_ip, "before the partition");

    let port = echo_server_in(fixture.netns.as_deref().unwrap(), &inside_ip);
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
        }))
        .await;
    assert!(
        bad.error()
            .unwrap()
            .contains("parse partition peer \"iad-1\""),
        "{bad:?}"
    );
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
    fixture.spawn(&mysql, "exec sleep 1000", false, 1);
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
