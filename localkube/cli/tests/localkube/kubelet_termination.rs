//! A gracefully deleted StatefulSet pod, as kube-apiserver and the kubelet keep it: the object
//! stays (terminating, same uid) until its kubelet has stopped every container, and only then
//! does the StatefulSet create its successor. The operator's agentless rule relies on it: it
//! holds a promotion while a pod of the old run is terminating, and takes a pod it cannot find,
//! or a new one, for "the old processes are gone" (s029: a frozen mysqld continued inside its
//! grace period acknowledged a held write).

use crate::kubelet_faults::fault;
use crate::support::{ready, TestCluster};
use anyhow::{bail, ensure, Result};
use std::time::{Duration, Instant};

const STUBBORN: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: stubborn, namespace: default}
spec:
  replicas: 1
  serviceName: stubborn
  selector: {matchLabels: {app: stubborn}}
  template:
    metadata: {labels: {app: stubborn}}
    spec:
      terminationGracePeriodSeconds: 30
      containers:
      - name: main
        image: python:3.12
        args:
        - -u
        - -c
        - |
          import signal, time
          signal.signal(signal.SIGTERM, signal.SIG_IGN)
          print("up", flush=True)
          while True:
              time.sleep(1)
      - name: side
        image: python:3.12
        args: ["-u", "-c", "import time\nwhile True: time.sleep(1)"]
"#;

/// The pod `stubborn-0` as `kubectl get` shows it: (uid, terminating), or `None` when absent.
async fn stubborn(c: &TestCluster) -> Result<Option<(String, bool)>> {
    let out = c
        .kubectl(&["get", "pod", "stubborn-0", "-o", "json"])
        .await?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        ensure!(
            err.contains("NotFound"),
            "kubectl get pod stubborn-0: {err}"
        );
        return Ok(None);
    }
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let uid = pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok(Some((uid, !pod["metadata"]["deletionTimestamp"].is_null())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_statefulset_pod_is_kept_until_its_kubelet_stopped_it() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = scenario(&c, false).await;
    c.stop().await?;
    result
}

// s029's shape: one container frozen, the other killed and kept down, then the pod deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_pod_with_a_frozen_and_a_kept_down_container_is_kept_too() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = scenario(&c, true).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster, faults: bool) -> Result<()> {
    c.apply(STUBBORN).await?;
    let pods = c
        .wait_pods("app=stubborn", Duration::from_secs(60), |p| {
            p.len() == 1 && p.iter().all(ready)
        })
        .await?;
    let old = pods[0]["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if faults {
        fault(c, &["freeze", "default/stubborn-0", "-c", "main"]).await?;
        fault(
            c,
            &["kill", "default/stubborn-0", "-c", "side", "--keep-down"],
        )
        .await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // SIGTERM is ignored: the kubelet kills the container once the 4 s are over.
    let deleted_at = Instant::now();
    c.kubectl_ok(&[
        "delete",
        "pod",
        "stubborn-0",
        "--grace-period=4",
        "--wait=false",
    ])
    .await?;
    // Until then the object is the old pod, terminating; no successor.
    while deleted_at.elapsed() < Duration::from_secs(3) {
        match stubborn(c).await? {
            Some((uid, true)) if uid == old => {}
            seen => bail!(
                "{:?} after the graceful delete: expected pod uid {old} terminating, found {seen:?}",
                deleted_at.elapsed()
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Then the kubelet kills it, removes it, and the StatefulSet creates another.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((uid, false)) = stubborn(c).await? {
            if uid != old {
                return Ok(());
            }
        }
        ensure!(
            Instant::now() < deadline,
            "no successor of stubborn-0 within 60 s of its grace period"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
