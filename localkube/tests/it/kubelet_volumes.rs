//! A deleted PersistentVolumeClaim's data goes with it (dynamically provisioned volumes with
//! reclaimPolicy Delete, as kind's local-path): a new claim of the same name starts empty.
//! Found by the harness's `--reuse`: a reinstalled group opened the old group's MariaDB data
//! with freshly generated credentials (needs root).

use crate::support::{ready, TestCluster};
use anyhow::{ensure, Result};
use std::time::{Duration, Instant};

const CLAIM_AND_POD: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer, namespace: default, labels: {app: writer}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
  containers:
  - name: writer
    image: busybox:1.36
    command: [sh, -c, "echo old > /data/marker; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
    readinessProbe:
      exec: {command: [test, -f, /data/marker]}
      periodSeconds: 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_claims_data_is_reclaimed_once_no_pod_mounts_it() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    c.apply(CLAIM_AND_POD).await?;
    c.wait_pods("app=writer", Duration::from_secs(60), |p| {
        p.len() == 1 && p.iter().all(ready)
    })
    .await?;
    let dir = c.dir().join("pvc/default/data");
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
