//! A deleted PersistentVolumeClaim's data goes with it (dynamically provisioned volumes with
//! reclaimPolicy Delete, as kind's local-path): a new claim of the same name starts empty.
//! Found by the harness's `--reuse`: a reinstalled group opened the old group's MariaDB data
//! with freshly generated credentials (needs root).

use crate::support::{ready, TestCluster};
use anyhow::{ensure, Result};
use std::time::{Duration, Instant};

/// The claim both tests create (again, in the second).
const CLAIM: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"#;

/// A pod on the claim named `data`: `name` (its `app` label too) runs `script`, and is
/// ready once `ready_file` exists.
fn pod_on_claim(name: &str, script: &str, ready_file: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: {name}}}}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: data}}}}]
  containers:
  - name: {name}
    image: busybox:1.36
    command: [sh, -c, "{script}"]
    volumeMounts: [{{name: data, mountPath: /data}}]
    readinessProbe:
      exec: {{command: [test, -f, {ready_file}]}}
      periodSeconds: 1
"#
    )
}

/// The claim and a pod that writes `/data/marker` into it.
fn claim_and_writer() -> String {
    let writer = pod_on_claim(
        "writer",
        "echo old > /data/marker; sleep 3600",
        "/data/marker",
    );
    format!("{CLAIM}---{writer}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_claims_data_is_reclaimed_once_no_pod_mounts_it() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    c.apply(&claim_and_writer()).await?;
    c.wait_pods("app=writer", Duration::from_secs(60), |p| {
        p.len() == 1 && p.iter().all(ready)
    })
    .await?;
    let dir = claim_dir(c, "data").await?;
    ensure!(
        dir.join("marker").is_file(),
        "the claim's data is at {}",
        dir.display()
    );
    // Deleting the claim while its pod runs keeps the data (the pod still mounts it).
    c.kubectl_ok(&["delete", "pvc", "data", "--wait=false"])
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        dir.join("marker").is_file(),
        "data kept while the pod mounts it"
    );
    c.kubectl_ok(&["delete", "pod", "writer", "--wait=true"])
        .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while dir.exists() {
        ensure!(Instant::now() < deadline, "{} still exists", dir.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// The volume directory of claim `name` in `default`: by the claim's uid.
async fn claim_dir(c: &TestCluster, name: &str) -> Result<std::path::PathBuf> {
    let uid = c
        .kubectl_ok(&["get", "pvc", name, "-o", "jsonpath={.metadata.uid}"])
        .await?;
    ensure!(!uid.trim().is_empty(), "claim {name} has a uid");
    Ok(c.dir().join("pvc/default").join(name).join(uid.trim()))
}

/// The harness's `--reuse` (scenario 027 after 026): a namespace deleted and created again
/// while its pods still terminate; the new claims of the same names opened the old sites'
/// MariaDB data, and the operator rightly refused to bootstrap over the diverged histories.
/// A claim created again under a deleted claim's name is a new, empty volume at once, and
/// the old one is reclaimed once its pod is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_created_again_under_the_same_name_starts_empty() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = recreated(&c).await;
    c.stop().await?;
    result
}

async fn recreated(c: &TestCluster) -> Result<()> {
    c.apply(&claim_and_writer()).await?;
    c.wait_pods("app=writer", Duration::from_secs(60), |p| {
        p.len() == 1 && p.iter().all(ready)
    })
    .await?;
    let old = claim_dir(c, "data").await?;
    c.kubectl_ok(&["delete", "pvc", "data", "--wait=false"])
        .await?;
    c.kubectl_ok(&["delete", "pod", "writer", "--wait=false"])
        .await?;
    let fresh = pod_on_claim(
        "fresh",
        "if test -e /data/marker; then echo found the data of the deleted claim; exit 1; fi; touch /data/seen; sleep 3600",
        "/data/seen",
    );
    c.apply(&format!("{CLAIM}---{fresh}")).await?;
    c.wait_pods("app=fresh", Duration::from_secs(60), |p| {
        p.len() == 1 && p.iter().all(ready)
    })
    .await?;
    // The fresh pod is ready only if it found no marker: it got a volume of its own.
    let new = claim_dir(c, "data").await?;
    ensure!(
        new != old,
        "the new claim has its own volume ({})",
        new.display()
    );
    ensure!(!new.join("marker").exists(), "the new claim starts empty");
    let deadline = Instant::now() + Duration::from_secs(30);
    while old.exists() {
        ensure!(
            Instant::now() < deadline,
            "{} (the deleted claim's volume) still exists",
            old.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(new.join("seen").is_file(), "the new claim's data stays");
    Ok(())
}
