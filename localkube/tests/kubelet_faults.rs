//! Taint eviction with real processes, and faults through `localkube fault` (partition,
//! heal, kill) against a running cluster (localkube node-agent issue; needs root).

mod kubelet_support;

use anyhow::{bail, ensure, Result};
use kubelet_support::{name, ready, TestCluster};
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
async fn fault(c: &TestCluster, args: &[&str]) -> Result<String> {
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
    let prefix = localkube::node::ClusterNaming::prefix_for(c.dir());
    let result = scenario(&c).await;
    c.stop().await?;
    result?;
    let left: Vec<String> = kubelet_support::netns_list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
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
