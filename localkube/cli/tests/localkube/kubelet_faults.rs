//! Taint eviction with real processes, and faults through `localkube fault` (partition,
//! heal, kill) against a running cluster (docs/design/history.md#issue-4; needs root).

use crate::support::{name, ready, TestCluster};
use anyhow::{bail, ensure, Result};
use std::time::{Duration, Instant};

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: default, labels: {role: sleeper}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 2
  containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: tolerant, namespace: default, labels: {role: sleeper}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 2
  tolerations: [{key: evict, operator: Exists, effect: NoExecute}]
  containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: default, labels: {role: server}}
spec:
  nodeName: pdx
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: python:3.12
    args: ["-u", "-m", "http.server", "8080"]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
"#;

/// The fault CLI against the running cluster.
pub(crate) async fn fault(c: &TestCluster, args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_localkube"))
        .arg("fault")
        .arg("--state-dir")
        .arg(c.dir())
        .args(args)
        .output()
        .await?;
    if !out.status.success() {
        bail!(
            "localkube fault {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `from` (a pod) can open a TCP connection to `ip:8080`.
async fn connects(c: &TestCluster, from: &str, ip: &str) -> Result<bool> {
    let shared =
        localkube::kubelet::lookup(c.dir()).ok_or_else(|| anyhow::anyhow!("no kubelet"))?;
    let script = format!(
        "import socket,sys\ntry:\n socket.create_connection(('{ip}', 8080), timeout=2)\nexcept OSError:\n sys.exit(1)"
    );
    let out = shared
        .runtime
        .exec_in_container(
            &format!("default/{from}"),
            "main",
            &["python3".into(), "-c".into(), script],
            Duration::from_secs(10),
        )
        .await?;
    Ok(out.exit_code == 0)
}

/// Design "Controllers": NoExecute taint without toleration deletes now (the process is
/// stopped gracefully), a tolerating pod stays Running; "Faults": partition blocks
/// cross-node connections until healed; kill restarts the container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taint_evicts_and_faults_partition_heal_kill() -> Result<()> {
    let c = TestCluster::start(&["iad", "pdx"]).await?;
    let prefix = localkube::runtime::ClusterNaming::prefix_for(c.dir());
    let result = scenario(&c).await;
    c.stop().await?;
    result?;
    let left = crate::support::netns_with(&prefix);
    ensure!(left.is_empty(), "netns left behind: {left:?}");
    Ok(())
}

async fn scenario(c: &TestCluster) -> Result<()> {
    let t = Duration::from_secs(60);
    c.apply(PODS).await?;
    let sleepers = c
        .wait_pods("role=sleeper", t, |p| p.len() == 2 && p.iter().all(ready))
        .await?;
    let tolerant_uid = sleepers
        .iter()
        .find(|p| name(p) == "tolerant")
        .map(|p| p["metadata"]["uid"].clone());
    let server = c
        .wait_pods("role=server", t, |p| p.len() == 1 && p.iter().all(ready))
        .await?;
    let server_ip = server[0]["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    // Partition iad | pdx: the connection from iad to the pdx pod fails, heal restores it.
    ensure!(
        connects(c, "tolerant", &server_ip).await?,
        "connects before the partition"
    );
    fault(c, &["partition", "iad", "pdx"]).await?;
    ensure!(
        !connects(c, "tolerant", &server_ip).await?,
        "blocked while partitioned"
    );
    fault(c, &["heal"]).await?;
    ensure!(
        connects(c, "tolerant", &server_ip).await?,
        "connects after heal"
    );

    // Kill: the container restarts (restartCount 1), the pod stays.
    fault(c, &["kill", "default/server"]).await?;
    c.wait_pods("role=server", t, |p| {
        p.len() == 1 && p[0]["status"]["containerStatuses"][0]["restartCount"] == 1
    })
    .await?;

    // kubectl logs --previous: the killed instance's output; -f streams the current one.
    let previous = c.kubectl_ok(&["logs", "server", "--previous"]).await?;
    ensure!(
        previous.contains("Serving HTTP on"),
        "--previous: {previous:?}"
    );
    let mut follow = tokio::process::Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(c.dir().join("kubeconfig"))
        .arg("--cache-dir")
        .arg(c.dir().join("kubectl-cache"))
        .args(["logs", "-f", "server"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = follow
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let first = tokio::time::timeout(t, async {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await? {
            if line.contains("Serving HTTP on") {
                return anyhow::Ok(true);
            }
        }
        anyhow::Ok(false)
    })
    .await;
    let _ = follow.kill().await;
    ensure!(matches!(first, Ok(Ok(true))), "logs -f: {first:?}");

    // NoExecute taint: plain is deleted (gracefully, through the kubelet), tolerant stays.
    c.kubectl_ok(&["taint", "nodes", "iad", "evict=yes:NoExecute"])
        .await?;
    let left = c.wait_pods("role=sleeper", t, |p| p.len() == 1).await?;
    ensure!(name(&left[0]) == "tolerant", "the tolerating pod stays");
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let p = c.pods("role=sleeper").await?;
        ensure!(
            p.len() == 1 && ready(&p[0]) && Some(p[0]["metadata"]["uid"].clone()) == tolerant_uid,
            "tolerant keeps running"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let log = fault(c, &["log"]).await?;
    ensure!(
        log.contains("partition") && log.contains("endedAt"),
        "fault log: {log}"
    );
    Ok(())
}

const HELD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: held, namespace: default, labels: {role: held}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]
"#;

/// The control socket, as the harness drives it.
async fn control(c: &TestCluster, req: serde_json::Value) -> Result<serde_json::Value> {
    Ok(localkube::kubelet::control::request(c.dir(), &req).await?)
}

/// The held pod's only container status, once `check` holds for it.
async fn wait_held(
    c: &TestCluster,
    what: &str,
    check: impl Fn(&serde_json::Value, &serde_json::Value) -> bool,
) -> Result<serde_json::Value> {
    let pods = c
        .wait_pods("role=held", Duration::from_secs(30), |p| {
            p.len() == 1 && check(&p[0], &p[0]["status"]["containerStatuses"][0])
        })
        .await
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    Ok(pods[0].clone())
}

/// Kept down: the container is waiting in CrashLoopBackOff with the killed instance in
/// lastState, and the pod is not Ready.
fn kept_down(p: &serde_json::Value, cs: &serde_json::Value, restarts: u64) -> bool {
    cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        && cs["lastState"]["terminated"]["exitCode"] == 137
        && cs["ready"] == false
        && cs["restartCount"] == restarts
        && !ready(p)
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "False")
        })
}

/// Design "Faults": kill with keep-down SIGKILLs a container and holds it back (not
/// running, pod not Ready) until `heal ID` or `revive`; then it restarts at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_keep_down_holds_the_container_until_healed_or_revived() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let prefix = localkube::runtime::ClusterNaming::prefix_for(c.dir());
    let result = keep_down_scenario(&c).await;
    c.stop().await?;
    result?;
    let left = crate::support::netns_with(&prefix);
    ensure!(left.is_empty(), "netns left behind: {left:?}");
    Ok(())
}

async fn keep_down_scenario(c: &TestCluster) -> Result<()> {
    c.apply(HELD).await?;
    wait_held(c, "running", |p, _| ready(p)).await?;

    // Through the socket: kill and keep down, healed by id.
    let answer = control(
        c,
        serde_json::json!({"fault": "kill", "pod": "default/held", "container": "main", "keepDown": true}),
    )
    .await?;
    let id = answer["id"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("answer {answer}"))?;
    wait_held(c, "kept down", |p, cs| kept_down(p, cs, 0)).await?;
    // A plain kill restarts at once; kept down, it stays down.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let p = wait_held(c, "still kept down", |p, cs| kept_down(p, cs, 0)).await?;
    ensure!(
        p["status"]["phase"] == "Running",
        "a held-back container's pod stays Running, as in CrashLoopBackOff: {}",
        p["status"]
    );
    let log = control(c, serde_json::json!({"fault": "log"})).await?;
    let record = log["log"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["id"] == id).cloned())
        .ok_or_else(|| anyhow::anyhow!("fault {id} in {log}"))?;
    ensure!(
        record["fault"]["keepDown"] == true && record["endedAt"].is_null(),
        "an active kept-down kill: {record}"
    );
    let healed = control(c, serde_json::json!({"fault": "heal", "id": id})).await?;
    ensure!(healed["ended"] == serde_json::json!([id]), "heal: {healed}");
    wait_held(c, "restarted after heal", |p, cs| {
        ready(p) && cs["restartCount"] == 1 && cs["state"]["running"].is_object()
    })
    .await?;

    // Through the CLI: `kill --keep-down`, then `revive` of the pod.
    let out = fault(c, &["kill", "held", "-c", "main", "--keep-down"]).await?;
    let id2 = serde_json::from_str::<serde_json::Value>(out.trim())?["id"].clone();
    wait_held(c, "kept down again", |p, cs| kept_down(p, cs, 1)).await?;
    let wrong = control(c, serde_json::json!({"fault": "revive", "id": 1_000})).await;
    ensure!(wrong.is_err(), "revive of an unknown fault id: {wrong:?}");
    let out = fault(c, &["revive", "default/held"]).await?;
    ensure!(out.contains(&format!("[{id2}]")), "revive: {out}");
    wait_held(c, "restarted after revive", |p, cs| {
        ready(p) && cs["restartCount"] == 2 && cs["state"]["running"].is_object()
    })
    .await?;
    let log = fault(c, &["log"]).await?;
    ensure!(
        log.lines().filter(|l| l.contains("keepDown")).count() == 2
            && log
                .lines()
                .filter(|l| l.contains("keepDown"))
                .all(|l| l.contains("endedAt\":\"")),
        "both kept-down kills ended: {log}"
    );
    Ok(())
}
