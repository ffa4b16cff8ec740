//! docs/design/localkube.md, "What the in-cluster fault agent needs": `apps/v1` DaemonSets
//! through the real kubectl — one pod per node the template fits (a NoSchedule taint
//! without toleration and a nodeSelector keep pods off, a cordon does not), names `<ds>-<5 chars>`, owner
//! references, the `controller-revision-hash` and `pod-template-generation` labels, a
//! deleted pod comes back, `kubectl rollout status`, a rolling update node by node, OnDelete,
//! and garbage collection on delete (needs root).

use crate::support::{name, ready, TestCluster};
use anyhow::{ensure, Context, Result};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

const AGENT: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: busybox:1.36
        command: ["sh", "-c", "exec sleep 100000"]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: pinned, namespace: default}
spec:
  selector: {matchLabels: {app: pinned}}
  updateStrategy: {type: OnDelete}
  template:
    metadata: {labels: {app: pinned}}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {kubernetes.io/hostname: iad}
      containers:
      - name: pinned
        image: busybox:1.36
        command: ["sh", "-c", "exec sleep 100000"]
"#;

fn node_of(p: &Value) -> String {
    p["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn label<'a>(p: &'a Value, key: &str) -> &'a str {
    p["metadata"]["labels"][key].as_str().unwrap_or_default()
}

fn nodes_of(pods: &[Value]) -> BTreeSet<String> {
    pods.iter().map(node_of).collect()
}

fn live(pods: &[Value]) -> Vec<Value> {
    pods.iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .cloned()
        .collect()
}

/// docs/design/localkube.md "What the in-cluster fault agent needs": a DaemonSet's pods,
/// placement, rollout and garbage collection as kubectl sees them on a real cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_places_one_pod_per_fitting_node_rolls_out_and_is_collected() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let c = TestCluster::start(&["iad", "pdx", "ord"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    let t = Duration::from_secs(60);
    c.kubectl_ok(&["taint", "node", "ord", "dedicated=db:NoSchedule"])
        .await?;
    // A cordoned node still gets its daemon pod (the controller tolerates unschedulable).
    c.kubectl_ok(&["cordon", "pdx"]).await?;
    c.apply(AGENT).await?;
    let pods = c
        .wait_pods("app=agent", t, |p| {
            p.len() == 2 && p.iter().all(ready) && nodes_of(p).len() == 2
        })
        .await?;
    ensure!(
        nodes_of(&pods) == ["iad", "pdx"].map(String::from).into(),
        "the tainted node ord gets no pod: {:?}",
        nodes_of(&pods)
    );
    for p in &pods {
        let n = name(p);
        let suffix = n.strip_prefix("agent-").context("name agent-<suffix>")?;
        ensure!(
            suffix.len() == 5 && suffix.bytes().all(|b| b.is_ascii_alphanumeric()),
            "pod name {n}"
        );
        let owner = &p["metadata"]["ownerReferences"][0];
        ensure!(
            owner["kind"] == "DaemonSet" && owner["name"] == "agent" && owner["controller"] == true,
            "owner of {n}: {owner}"
        );
        ensure!(
            !label(p, "controller-revision-hash").is_empty()
                && label(p, "pod-template-generation") == "1",
            "labels of {n}: {}",
            p["metadata"]["labels"]
        );
    }
    // A nodeSelector: one pod, on iad only.
    let pinned = c
        .wait_pods("app=pinned", t, |p| p.len() == 1 && p.iter().all(ready))
        .await?;
    ensure!(
        node_of(&pinned[0]) == "iad",
        "pinned pod on {}",
        node_of(&pinned[0])
    );
    // kubectl rollout status, get (table) and describe.
    c.kubectl_ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"])
        .await?;
    let table = c.kubectl_ok(&["get", "ds", "agent"]).await?;
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    ensure!(
        row.get(..7) == Some(&["agent", "2", "2", "2", "2", "2", "<none>"][..]),
        "kubectl get ds: {table}"
    );
    let described = c.kubectl_ok(&["describe", "daemonset", "agent"]).await?;
    ensure!(
        described.contains("Desired Number of Nodes Scheduled: 2")
            && described.contains("SuccessfulCreate"),
        "kubectl describe ds: {described}"
    );
    let ds: Value =
        serde_json::from_str(&c.kubectl_ok(&["get", "ds", "agent", "-o", "json"]).await?)?;
    let status = &ds["status"];
    ensure!(
        status["desiredNumberScheduled"] == 2
            && status["currentNumberScheduled"] == 2
            && status["numberReady"] == 2
            && status["updatedNumberScheduled"] == 2
            && status["numberAvailable"] == 2
            && status["numberMisscheduled"] == 0
            && status["observedGeneration"] == ds["metadata"]["generation"],
        "status: {status}"
    );
    // A deleted pod is recreated on its node.
    let victim = pods[0].clone();
    c.kubectl_ok(&["delete", "pod", &name(&victim), "--wait=false"])
        .await?;
    let again = c
        .wait_pods("app=agent", t, |p| {
            let p = live(p);
            p.len() == 2 && p.iter().all(ready) && p.iter().all(|x| name(x) != name(&victim))
        })
        .await?;
    ensure!(
        nodes_of(&live(&again)) == nodes_of(&pods),
        "recreated on the same node"
    );
    // Rolling update: every pod replaced by one of the new template, node by node.
    let before: BTreeSet<String> = live(&again).iter().map(name).collect();
    c.kubectl_ok(&["set", "env", "daemonset/agent", "ROUND=2"])
        .await?;
    c.kubectl_ok(&["rollout", "status", "daemonset/agent", "--timeout=90s"])
        .await?;
    let updated = c
        .wait_pods("app=agent", t, |p| {
            p.len() == 2
                && p.iter()
                    .all(|x| ready(x) && label(x, "pod-template-generation") == "2")
        })
        .await?;
    ensure!(
        updated.iter().all(|p| !before.contains(&name(p))),
        "every pod replaced: before {before:?}, after {:?}",
        updated.iter().map(name).collect::<Vec<_>>()
    );
    ensure!(
        updated[0]["spec"]["containers"][0]["env"][0]["value"] == "2",
        "new template: {}",
        updated[0]["spec"]["containers"][0]
    );
    // A toleration for the taint brings a pod to ord too.
    c.kubectl_ok(&[
        "patch",
        "daemonset/agent",
        "--type=merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"tolerations":[{"key":"dedicated","operator":"Exists","effect":"NoSchedule"}]}}}}"#,
    ])
    .await?;
    c.wait_pods("app=agent", Duration::from_secs(90), |p| {
        p.len() == 3 && p.iter().all(ready) && nodes_of(p).len() == 3
    })
    .await?;
    // OnDelete: a template change replaces nothing until the pod is deleted.
    let old_pinned = name(&pinned[0]);
    c.kubectl_ok(&["set", "env", "daemonset/pinned", "ROUND=2"])
        .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = c.pods("app=pinned").await?;
    ensure!(
        still.len() == 1 && name(&still[0]) == old_pinned,
        "OnDelete keeps the old pod: {:?}",
        still.iter().map(name).collect::<Vec<_>>()
    );
    c.kubectl_ok(&["delete", "pod", &old_pinned, "--wait=false"])
        .await?;
    c.wait_pods("app=pinned", t, |p| {
        let p = live(p);
        p.len() == 1 && label(&p[0], "pod-template-generation") == "2" && ready(&p[0])
    })
    .await?;
    // Deleting the DaemonSet collects its pods.
    c.kubectl_ok(&["delete", "daemonset", "agent"]).await?;
    c.wait_pods("app=agent", t, |p| p.is_empty()).await?;
    Ok(())
}
