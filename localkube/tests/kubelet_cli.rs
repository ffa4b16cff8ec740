//! The `localkube` binary runs the kubelet: `up --detach` with three nodes runs pods as
//! processes, `fault` reaches the running cluster, `down` stops it and leaves no network
//! namespace behind (localkube node-agent issue; needs root).

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn localkube(args: &[&str], dir: &Path) -> Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_localkube"))
        .args(args)
        .arg("--state-dir")
        .arg(dir)
        .output()?;
    if !out.status.success() {
        bail!(
            "localkube {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn fault(args: &[&str], dir: &Path) -> Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_localkube"))
        .arg("fault")
        .arg("--state-dir")
        .arg(dir)
        .args(args)
        .output()?;
    if !out.status.success() {
        bail!(
            "localkube fault {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn kubectl(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kubectl-cache"))
        .args(args)
        .output()?;
    if !out.status.success() {
        bail!("kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn netns_with(prefix: &str) -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: p-iad, labels: {app: p}}
spec: {nodeName: iad, containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p-pdx, labels: {app: p}}
spec: {nodeName: pdx, containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p-reader, labels: {app: p}}
spec: {nodeName: reader, containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]}
"#;

fn scenario(dir: &Path, started: Instant) -> Result<()> {
    std::fs::write(dir.join("pods.yaml"), PODS)?;
    kubectl(
        dir,
        &["apply", "-f", &dir.join("pods.yaml").to_string_lossy()],
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v: Value = serde_json::from_str(&kubectl(
            dir,
            &["get", "pods", "-l", "app=p", "-o", "json"],
        )?)?;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 3 && items.iter().all(|p| p["status"]["phase"] == "Running") {
            break;
        }
        ensure!(Instant::now() < deadline, "pods did not run: {v}");
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!(
        "localkube up --detach (3 nodes) to a Running pod per node: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    // Heartbeat: each node renews its Lease in kube-node-lease.
    let holder = kubectl(
        dir,
        &[
            "get",
            "lease",
            "-n",
            "kube-node-lease",
            "reader",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    )?;
    ensure!(holder == "reader", "node lease: {holder:?}");
    let out = fault(&["stop-node", "pdx"], dir)?;
    ensure!(out.contains("\"id\""), "stop-node: {out}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !kubectl(
        dir,
        &[
            "get",
            "node",
            "pdx",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
    )?
    .contains("Unknown")
    {
        ensure!(Instant::now() < deadline, "pdx did not turn NotReady");
        std::thread::sleep(Duration::from_millis(300));
    }
    fault(&["start-node", "pdx"], dir)?;
    Ok(())
}

/// Design "Shape": `up` starts the node agents, `down` removes every namespace it made.
#[test]
fn up_runs_pods_fault_reaches_it_down_cleans_up() -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("lk-cli")
        .tempdir_in("/tmp")?;
    let dir = std::fs::canonicalize(tmp.path()).context("state dir")?;
    let prefix = localkube::node::ClusterNaming::prefix_for(&dir);
    let started = Instant::now();
    localkube(&["up", "--detach", "--nodes", "iad,pdx,reader"], &dir)?;
    let result = scenario(&dir, started);
    let down = localkube(&["down"], &dir);
    result?;
    down?;
    let left = netns_with(&prefix);
    ensure!(left.is_empty(), "netns left behind: {left:?}");
    Ok(())
}

/// Design "Node agent": without root, `up` fails with one sentence naming the kind backend.
#[test]
fn up_without_root_names_the_kind_backend() -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("lk-noroot")
        .tempdir_in("/tmp")?;
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )?;
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_localkube"))
        .args(["up", "--state-dir"])
        .arg(tmp.path().join("state"))
        .output()
        .context("run setpriv (util-linux)")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "up succeeded without root");
    let last = stderr.lines().last().unwrap_or_default();
    ensure!(
        last.starts_with("localkube: failed to ") && last.contains("kind backend"),
        "stderr: {stderr}"
    );
    Ok(())
}
