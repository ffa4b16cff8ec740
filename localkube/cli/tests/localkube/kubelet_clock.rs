//! The clock-offset fault with real processes, read through the real `kubectl exec`: only
//! the containers `--clock-faults` names get libfaketime, `localkube fault clock-offset`
//! steps their wall clock forward and back while they run, a pod without such a container is
//! refused, and healing sets the offset back (docs/design/history.md#issue-14-item-8; needs
//! root and Debian's libfaketime).

use crate::support::{ready, TestCluster};
use anyhow::{bail, ensure, Context, Result};
use std::time::Duration;

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: stepped, namespace: default, labels: {role: clock}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers:
  - {name: faked, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}
  - {name: plain, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: untouched, namespace: default, labels: {role: clock}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: private, namespace: default, labels: {role: clock}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers: [{name: faked, image: "mariadb:10.11", command: ["sh", "-c", "exec sleep 3600"]}]
"#;

async fn fault(c: &TestCluster, args: &[&str]) -> Result<std::process::Output> {
    Ok(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_localkube"))
            .arg("fault")
            .arg("--state-dir")
            .arg(c.dir())
            .args(args)
            .output()
            .await?,
    )
}

async fn fault_ok(c: &TestCluster, args: &[&str]) -> Result<String> {
    let out = fault(c, args).await?;
    if !out.status.success() {
        bail!(
            "localkube fault {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The container's wall clock minus this process's, in seconds, read with `date` through
/// `kubectl exec`.
async fn offset(c: &TestCluster, pod: &str, container: &str) -> Result<i64> {
    let out = c
        .kubectl_ok(&["exec", pod, "-c", container, "--", "date", "+%s"])
        .await?;
    let theirs: i64 = out
        .trim()
        .parse()
        .with_context(|| format!("date said {out:?}"))?;
    let ours = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs(),
    )?;
    Ok(theirs - ours)
}

/// Waits until the container's offset is within 2 s of `wanted` (libfaketime re-reads its
/// control file every second).
async fn wait_offset(c: &TestCluster, pod: &str, container: &str, wanted: i64) -> Result<()> {
    let mut seen = Vec::new();
    for _ in 0..10 {
        let now = offset(c, pod, container).await?;
        if (now - wanted).abs() <= 2 {
            return Ok(());
        }
        seen.push(now);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("{pod}/{container}: offset {seen:?} s, wanted {wanted} s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_offset_steps_only_the_named_containers_wall_clock_and_heals() -> Result<()> {
    let c = TestCluster::start_with_clock_faults(&["iad"], &["faked"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    c.apply(PODS).await?;
    c.wait_pods("role=clock", Duration::from_secs(60), |p| {
        p.len() == 3 && p.iter().all(ready)
    })
    .await?;
    wait_offset(c, "stepped", "faked", 0).await?;
    // Only the named container has the library in its environment.
    let faked_env = c
        .kubectl_ok(&["exec", "stepped", "-c", "faked", "--", "env"])
        .await?;
    ensure!(faked_env.contains("libfaketime"), "{faked_env}");
    for (pod, container) in [("stepped", "plain"), ("untouched", "main")] {
        let env = c
            .kubectl_ok(&["exec", pod, "-c", container, "--", "env"])
            .await?;
        ensure!(
            !env.contains("LD_PRELOAD") && !env.contains("FAKETIME"),
            "{pod}/{container}: {env}"
        );
    }

    // Forward an hour: the running container's clock moves, its neighbour's does not.
    let answer = fault_ok(c, &["clock-offset", "default/stepped", "+3600s"]).await?;
    ensure!(answer.contains("\"id\""), "{answer}");
    wait_offset(c, "stepped", "faked", 3600).await?;
    ensure!(
        offset(c, "stepped", "plain").await?.abs() <= 2,
        "plain moved"
    );

    // The mariadb image's private /tmp hides this cluster's state dir (under /tmp): the
    // control file is read at its fixed mount, so the step reaches this container too (it was
    // a silent no-op there, and scenario 041 failed on a checkout under /tmp).
    wait_offset(c, "private", "faked", 0).await?;
    fault_ok(c, &["clock-offset", "default/private", "+600s"]).await?;
    wait_offset(c, "private", "faked", 600).await?;
    fault_ok(c, &["clock-offset", "default/private", "reset"]).await?;
    wait_offset(c, "private", "faked", 0).await?;

    // A pod with no named container is refused, and nothing is recorded for it.
    let refused = fault(c, &["clock-offset", "default/untouched", "+10s"]).await?;
    ensure!(
        !refused.status.success(),
        "a pod that did not opt in was stepped"
    );
    ensure!(
        String::from_utf8_lossy(&refused.stderr).contains("--clock-faults"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // Backward 20 s from the real clock (the forward fault ends first), then reset.
    fault_ok(c, &["clock-offset", "default/stepped", "-20s"]).await?;
    wait_offset(c, "stepped", "faked", -20).await?;
    fault_ok(c, &["clock-offset", "default/stepped", "reset"]).await?;
    wait_offset(c, "stepped", "faked", 0).await?;

    // The log has both steps, each with its start and end.
    let log = fault_ok(c, &["log"]).await?;
    let records: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|r: &serde_json::Value| r["fault"]["kind"] == "clockOffset")
        .collect();
    let offsets: Vec<i64> = records
        .iter()
        .filter_map(|r| r["fault"]["offsetMs"].as_i64())
        .collect();
    ensure!(offsets == vec![3_600_000, 600_000, -20_000], "{log}");
    ensure!(
        records.iter().all(|r| !r["endedAt"].is_null()),
        "every clock fault ended: {log}"
    );
    Ok(())
}
