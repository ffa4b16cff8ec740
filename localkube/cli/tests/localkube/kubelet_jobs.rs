//! docs/design/history.md#issue-14-item-6: a Job's pods run as real processes: `exit 0`
//! completes the Job, `exit 1` with backoffLimit 1 fails it after one replacement (needs root).

use crate::support::TestCluster;
use anyhow::{ensure, Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use std::time::Duration;

const JOBS: &str = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: ok, namespace: default}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox:1.36, command: ["/bin/sh", "-c", "exit 0"]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: bad, namespace: default}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox:1.36, command: ["/bin/sh", "-c", "exit 1"]}
"#;

fn condition(job: &Job, ty: &str) -> Option<(String, String)> {
    let c = job.status.as_ref()?.conditions.as_ref()?;
    c.iter()
        .find(|c| c.type_ == ty)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

async fn phases(pods: &Api<Pod>, job: &str) -> Result<Vec<String>> {
    let lp = ListParams::default().labels(&format!("job-name={job}"));
    Ok(pods
        .list(&lp)
        .await?
        .items
        .iter()
        .map(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default()
        })
        .collect())
}

/// Item 6: `kubectl wait --for=condition=complete` returns for a Job whose process exits 0,
/// and a Job whose process exits 1 fails with BackoffLimitExceeded after backoffLimit + 1
/// failed pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_complete_and_fail_with_real_processes() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    c.apply(JOBS).await?;
    c.kubectl_ok(&[
        "wait",
        "--for=condition=complete",
        "job/ok",
        "--timeout=60s",
    ])
    .await
    .context("kubectl wait for the exit-0 Job")?;
    let client = c.client().await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let ok = jobs.get("ok").await?;
    let status = ok.status.clone().context("status")?;
    ensure!(status.succeeded == Some(1), "succeeded: {status:?}");
    ensure!(
        status.completion_time.is_some() && status.start_time.is_some(),
        "times: {status:?}"
    );
    ensure!(phases(&pods, "ok").await? == ["Succeeded"], "pods of ok");
    c.kubectl_ok(&["wait", "--for=condition=failed", "job/bad", "--timeout=90s"])
        .await
        .context("kubectl wait for the exit-1 Job")?;
    let bad = jobs.get("bad").await?;
    ensure!(
        condition(&bad, "Failed") == Some(("True".into(), "BackoffLimitExceeded".into())),
        "Failed condition: {:?}",
        bad.status
    );
    ensure!(
        condition(&bad, "Complete").is_none(),
        "a failed Job is not Complete"
    );
    ensure!(
        bad.status.as_ref().and_then(|s| s.failed) == Some(2),
        "failed: {:?}",
        bad.status
    );
    ensure!(
        phases(&pods, "bad").await? == ["Failed", "Failed"],
        "pods of bad"
    );
    let table = c.kubectl_ok(&["get", "jobs", "--no-headers"]).await?;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    ensure!(
        rows.iter().any(|r| r[..3] == ["bad", "Failed", "0/1"])
            && rows.iter().any(|r| r[..3] == ["ok", "Complete", "1/1"]),
        "kubectl get jobs: {table}"
    );
    // kubectl delete sends propagationPolicy=Background: the pods go with the Job.
    c.kubectl_ok(&["delete", "job/ok"]).await?;
    c.wait_pods("job-name=ok", Duration::from_secs(30), |p| p.is_empty())
        .await?;
    Ok(())
}
