//! docs/design/localkube.md, "What the in-cluster fault agent needs": what a privileged
//! in-cluster fault agent (a DaemonSet like Chaos Mesh's chaos-daemon) finds on a node —
//! `hostNetwork` (the node's address, the root namespace's interfaces), `hostPID` (every
//! process of the host in `/proc`), `privileged` (localkube's full capability set),
//! `hostPath` volumes (and kubelet's FailedMount for a missing `Directory`), and every
//! container's `containerd://<id>` with its processes, children included, in cgroups named
//! after the id, which go with the container, the pod and `localkube down` (needs root).

use crate::support::{ready, TestCluster};
use anyhow::{bail, ensure, Context, Result};
use localkube::runtime::cgroups;
use localkube::runtime::ClusterNaming;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn agent(host_dir: &Path) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: agent, namespace: default, labels: {{app: agent}}}}
spec:
  nodeName: iad
  hostNetwork: true
  hostPID: true
  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: host, hostPath: {{path: "{dir}", type: Directory}}}}
  - {{name: made, hostPath: {{path: "{dir}/made/here", type: DirectoryOrCreate}}}}
  containers:
  - name: agent
    image: busybox:1.36
    securityContext:
      privileged: true
      capabilities: {{add: ["NET_ADMIN", "SYS_ADMIN"]}}
    volumeMounts:
    - {{name: host, mountPath: /host}}
    - {{name: made, mountPath: /made}}
    command:
    - sh
    - -c
    # `$$$$`: Kubernetes expands `$$` in a command to `$`.
    - 'echo $$$$ > /host/main.pid; sleep 100000 & echo $! > /host/child.pid; wait'
---
apiVersion: v1
kind: Pod
metadata: {{name: plain, namespace: default, labels: {{app: plain}}}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers:
  - name: plain
    image: busybox:1.36
    command: ["sh", "-c", "exec sleep 100000"]
---
apiVersion: v1
kind: Pod
metadata: {{name: broken, namespace: default, labels: {{app: broken}}}}
spec:
  nodeName: pdx
  volumes:
  - {{name: missing, hostPath: {{path: "{dir}/no-such-dir", type: Directory}}}}
  containers:
  - name: broken
    image: busybox:1.36
    command: ["sh", "-c", "exec sleep 100000"]
    volumeMounts: [{{name: missing, mountPath: /missing}}]
"#,
        dir = host_dir.display()
    )
}

/// The cgroup paths of `/proc/<pid>/cgroup`, by hierarchy (`pids`, `freezer`,
/// `name=systemd`, `` for v2).
fn cgroup_lines(pid: i32) -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .with_context(|| format!("read /proc/{pid}/cgroup"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((controllers.to_string(), path.to_string()))
        })
        .collect())
}

/// Checks that every hierarchy localkube uses shows `pid` in the container's cgroup.
fn in_container_cgroup(pid: i32, id: &str) -> Result<()> {
    let lines = cgroup_lines(pid)?;
    let used: Vec<&(String, String)> = lines
        .iter()
        .filter(|(c, _)| {
            c.is_empty()
                || c.split(',')
                    .any(|x| matches!(x, "pids" | "freezer" | "name=systemd"))
        })
        .collect();
    ensure!(
        !used.is_empty(),
        "no pids/freezer/systemd/v2 line: {lines:?}"
    );
    for (controllers, path) in used {
        ensure!(
            path.ends_with(&format!("/{id}")),
            "/proc/{pid}/cgroup line {controllers}:{path} does not end with /{id}"
        );
    }
    Ok(())
}

fn container_id(pod: &Value) -> Result<String> {
    let uri = pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap_or_default();
    let id = uri
        .strip_prefix("containerd://")
        .with_context(|| format!("containerID {uri:?}"))?;
    ensure!(cgroups::is_container_id(id), "containerID {uri:?}");
    Ok(id.to_string())
}

async fn read_pid(path: &Path, t: Duration) -> Result<i32> {
    let deadline = Instant::now() + t;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return Ok(pid);
            }
        }
        if Instant::now() > deadline {
            bail!("{} never held a pid", path.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn pids_root(prefix: &str) -> PathBuf {
    Path::new("/sys/fs/cgroup/pids").join(cgroups::root_name(prefix))
}

async fn wait_gone(path: &Path, t: Duration) -> Result<()> {
    let deadline = Instant::now() + t;
    while path.exists() {
        if Instant::now() > deadline {
            bail!("{} still exists after {t:?}", path.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Whether a process is gone, or a zombie no one reaped yet (its parent killed, it waits
/// for the machine's init).
fn dead(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rfind(')')
                .and_then(|i| stat.get(i + 2..i + 3))
                .is_some_and(|state| state == "Z" || state == "X")
        })
        .unwrap_or(true)
}

fn cap_eff(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// docs/design/localkube.md "What the in-cluster fault agent needs".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_pod_gets_host_network_pid_paths_and_container_cgroups() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let c = TestCluster::start(&["iad", "pdx"]).await?;
    let prefix = ClusterNaming::prefix_for(&std::fs::canonicalize(c.dir())?);
    let host_dir = c.dir().join("host-share");
    std::fs::create_dir_all(&host_dir)?;
    std::fs::write(host_dir.join("marker"), "from the host\n")?;
    let result = scenario(&c, &host_dir, &prefix).await;
    let stopped = c.stop().await;
    result?;
    stopped?;
    Ok(())
}

async fn scenario(c: &TestCluster, host_dir: &Path, prefix: &str) -> Result<()> {
    let t = Duration::from_secs(60);
    c.apply(&agent(host_dir)).await?;
    let pods = c
        .wait_pods("app in (agent,plain)", t, |p| {
            p.len() == 2 && p.iter().all(ready)
        })
        .await?;
    let agent = pods
        .iter()
        .find(|p| p["metadata"]["name"] == "agent")
        .context("agent pod")?;
    // hostNetwork: the pod's IP is its node's address, as the Node reports it.
    let node: Value =
        serde_json::from_str(&c.kubectl_ok(&["get", "node", "iad", "-o", "json"]).await?)?;
    let node_ip = node["status"]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
        .and_then(|x| x["address"].as_str())
        .unwrap_or_default()
        .to_string();
    ensure!(
        !node_ip.is_empty()
            && agent["status"]["podIP"] == node_ip.as_str()
            && agent["status"]["hostIP"] == node_ip.as_str(),
        "podIP {} hostIP {} node {node_ip}",
        agent["status"]["podIP"],
        agent["status"]["hostIP"]
    );
    // ... and it sees the root namespace's interfaces (the cluster bridge); a plain pod does not.
    let bridge = format!("{prefix}-br");
    let agent_links = c
        .kubectl_ok(&["exec", "agent", "--", "cat", "/proc/net/dev"])
        .await?;
    ensure!(
        agent_links.contains(&bridge),
        "hostNetwork pod interfaces: {agent_links}"
    );
    let plain_links = c
        .kubectl_ok(&["exec", "plain", "--", "cat", "/proc/net/dev"])
        .await?;
    ensure!(
        !plain_links.contains(&bridge),
        "plain pod interfaces: {plain_links}"
    );
    // hostPath: the host's file inside; DirectoryOrCreate made its directory on the host.
    let marker = c
        .kubectl_ok(&["exec", "agent", "--", "cat", "/host/marker"])
        .await?;
    ensure!(marker == "from the host\n", "hostPath contents: {marker:?}");
    ensure!(
        host_dir.join("made/here").is_dir(),
        "DirectoryOrCreate created it"
    );
    // hostPID: this test process is visible in the pod's /proc.
    let me = std::process::id();
    c.kubectl_ok(&["exec", "agent", "--", "test", "-d", &format!("/proc/{me}")])
        .await
        .context("the test process is visible to a hostPID pod")?;
    // privileged: the container has localkube's full effective capability set.
    let caps = c
        .kubectl_ok(&["exec", "agent", "--", "cat", "/proc/self/status"])
        .await?;
    let own = std::fs::read_to_string("/proc/self/status")?;
    ensure!(
        cap_eff(&caps) == cap_eff(&own),
        "CapEff {} vs localkube's {}",
        cap_eff(&caps),
        cap_eff(&own)
    );
    // containerID, and the main process and its child in cgroups named after it.
    let id = container_id(agent)?;
    let main_pid = read_pid(&host_dir.join("main.pid"), t).await?;
    let child_pid = read_pid(&host_dir.join("child.pid"), t).await?;
    in_container_cgroup(main_pid, &id)?;
    in_container_cgroup(child_pid, &id)?;
    let uid = agent["metadata"]["uid"].as_str().unwrap_or_default();
    let pod_cgroup = pids_root(prefix).join("kubepods").join(format!("pod{uid}"));
    ensure!(
        pod_cgroup.join(&id).is_dir(),
        "{} exists",
        pod_cgroup.join(&id).display()
    );
    let plain = pods
        .iter()
        .find(|p| p["metadata"]["name"] == "plain")
        .context("plain pod")?;
    ensure!(container_id(plain)? != id, "each container its own id");
    // A restart: a new id, the old one in lastState, the old cgroup gone.
    std::fs::remove_file(host_dir.join("main.pid"))?;
    std::fs::remove_file(host_dir.join("child.pid"))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(main_pid),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    let restarted = c
        .wait_pods("app=agent", t, |p| {
            p.len() == 1
                && ready(&p[0])
                && p[0]["status"]["containerStatuses"][0]["restartCount"] == 1
        })
        .await?;
    let new_id = container_id(&restarted[0])?;
    ensure!(new_id != id, "a restart brings a new id");
    let last =
        &restarted[0]["status"]["containerStatuses"][0]["lastState"]["terminated"]["containerID"];
    ensure!(
        *last == format!("containerd://{id}").as_str(),
        "lastState: {last}"
    );
    wait_gone(&pod_cgroup.join(&id), t).await?;
    ensure!(
        dead(child_pid),
        "the old instance's child {child_pid} went with its cgroup"
    );
    let new_main = read_pid(&host_dir.join("main.pid"), t).await?;
    in_container_cgroup(new_main, &new_id)?;
    let new_child = read_pid(&host_dir.join("child.pid"), t).await?;
    ensure!(
        new_child != child_pid,
        "child.pid rewritten by the new instance"
    );
    // hostPath type Directory on a missing path: ContainerCreating and a FailedMount event.
    let deadline = Instant::now() + t;
    loop {
        let broken: Value = serde_json::from_str(
            &c.kubectl_ok(&["get", "pod", "broken", "-o", "json"])
                .await?,
        )?;
        let events = c.kubectl_ok(&["get", "events", "-o", "json"]).await?;
        let events: Value = serde_json::from_str(&events)?;
        let failed = events["items"].as_array().into_iter().flatten().any(|e| {
            e["reason"] == "FailedMount"
                && e["involvedObject"]["name"] == "broken"
                && e["message"].as_str().is_some_and(|m| {
                    m.starts_with("MountVolume.SetUp failed for volume \"missing\" : hostPath type check failed:")
                        && m.ends_with("no-such-dir is not a directory")
                })
        });
        let waiting = broken["status"]["phase"] == "Pending"
            && broken["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "ContainerCreating";
        if failed && waiting {
            break;
        }
        if Instant::now() > deadline {
            bail!("broken pod: {}\nevents: {events}", broken["status"]);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Deleting the pod removes its cgroups (and kills what is left in them).
    c.kubectl_ok(&["delete", "pod", "agent", "--wait=true", "--timeout=60s"])
        .await?;
    wait_gone(&pod_cgroup, t).await?;
    ensure!(
        dead(new_child),
        "the container's child {new_child} went with the pod"
    );
    Ok(())
}

/// docs/design/localkube.md "Shape": `localkube down` removes every cgroup of the cluster,
/// also after a crash left processes in them (they are the cluster's: killed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_removes_the_cluster_cgroups_and_what_is_left_in_them() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let c = TestCluster::start(&["iad"]).await?;
    let prefix = ClusterNaming::prefix_for(&std::fs::canonicalize(c.dir())?);
    let root = pids_root(&prefix);
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: default, labels: {app: sleeper}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: s, image: "busybox:1.36", command: ["sh", "-c", "exec sleep 100000"]}
"#,
    )
    .await?;
    c.wait_pods("app=sleeper", Duration::from_secs(60), |p| {
        p.len() == 1 && ready(&p[0])
    })
    .await?;
    ensure!(
        root.join("kubepods").is_dir(),
        "{} made by the node agent",
        root.display()
    );
    // As a crash would leave it: a process in a cgroup of the cluster nobody removes.
    let orphan_dir = root
        .join("kubepods/podcrashed")
        .join(cgroups::new_container_id());
    std::fs::create_dir_all(&orphan_dir)?;
    let mut orphan = std::process::Command::new("sleep").arg("100000").spawn()?;
    std::fs::write(orphan_dir.join("cgroup.procs"), orphan.id().to_string())?;
    // Stopping the cluster and dropping it runs what `localkube down` runs
    // (`localkube::runtime::cleanup` of the state dir).
    c.stop().await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = orphan.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = orphan.kill();
            bail!("the process left in the cluster's cgroup was not killed");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    use std::os::unix::process::ExitStatusExt;
    ensure!(status.signal() == Some(9), "killed by SIGKILL: {status:?}");
    ensure!(!root.exists(), "{} removed", root.display());
    Ok(())
}
