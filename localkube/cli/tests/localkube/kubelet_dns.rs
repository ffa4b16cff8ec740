//! DNSEndpoint objects (external-dns stand-in) feed the cluster DNS, kept current from store
//! events, and a stopped external-dns keeps serving the old answer; unknown images are
//! ErrImagePull (docs/design/history.md#issue-4; needs root).

use crate::support::{ready, TestCluster};
use anyhow::{bail, ensure, Result};
use std::time::{Duration, Instant};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: dnsendpoints.externaldns.k8s.io}
spec:
  group: externaldns.k8s.io
  names: {kind: DNSEndpoint, listKind: DNSEndpointList, plural: dnsendpoints, singular: dnsendpoint}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

fn endpoint(target: &str) -> String {
    format!(
        r#"
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {{name: writer, namespace: default}}
spec:
  endpoints:
  - {{dnsName: writer.db.example.test, recordType: A, targets: ["{target}"], recordTTL: 5}}
"#
    )
}

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: resolver, namespace: default, labels: {role: resolver}}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: missing-image, namespace: default, labels: {role: missing}}
spec:
  containers: [{name: main, image: registry.example/not-in-catalog:1}]
"#;

async fn resolve(c: &TestCluster, name: &str) -> Result<String> {
    let shared =
        localkube::kubelet::lookup(c.dir()).ok_or_else(|| anyhow::anyhow!("no kubelet"))?;
    let script = format!(
        "import socket\ntry:\n print(socket.gethostbyname('{name}'))\nexcept OSError:\n print('NXDOMAIN')"
    );
    let out = shared
        .runtime
        .exec_in_container(
            "default/resolver",
            "main",
            &["python3".into(), "-c".into(), script],
            Duration::from_secs(10),
        )
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

async fn wait_resolves(c: &TestCluster, name: &str, want: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = resolve(c, name).await?;
        if got == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{name} resolves to {got}, want {want}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Design "Services and DNS": DNSEndpoint zones are served; "Faults": stop external-dns
/// keeps the published answer until it is started again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_endpoints_follow_the_api_and_external_dns_can_stop() -> Result<()> {
    let c = TestCluster::start(&["iad"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    let t = Duration::from_secs(60);
    c.apply(CRD).await?;
    let deadline = Instant::now() + t;
    while c.kubectl(&["get", "dnsendpoints"]).await?.status.code() != Some(0) {
        ensure!(Instant::now() < deadline, "the CRD is served");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    c.apply(PODS).await?;
    c.wait_pods("role=resolver", t, |p| p.len() == 1 && p.iter().all(ready))
        .await?;
    c.apply(&endpoint("10.1.2.3")).await?;
    wait_resolves(c, "writer.db.example.test", "10.1.2.3").await?;

    let shared =
        localkube::kubelet::lookup(c.dir()).ok_or_else(|| anyhow::anyhow!("no kubelet"))?;
    localkube::kubelet::control::handle(
        &shared,
        &serde_json::json!({"fault": "stop-external-dns"}),
    )
    .await?;
    c.apply(&endpoint("10.1.2.4")).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        resolve(c, "writer.db.example.test").await? == "10.1.2.3",
        "a stopped external-dns keeps the old record"
    );
    localkube::kubelet::control::handle(
        &shared,
        &serde_json::json!({"fault": "start-external-dns"}),
    )
    .await?;
    wait_resolves(c, "writer.db.example.test", "10.1.2.4").await?;
    c.kubectl_ok(&["delete", "dnsendpoint", "writer"]).await?;
    wait_resolves(c, "writer.db.example.test", "NXDOMAIN").await?;

    // An image the catalog does not know: ErrImagePull, as a registry miss on Kubernetes.
    c.wait_pods("role=missing", t, |p| {
        p.len() == 1
            && p[0]["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "ErrImagePull"
    })
    .await?;
    Ok(())
}
