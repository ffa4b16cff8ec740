//! docs/design/history.md#issue-14-item-8: UDP Service ports are proxied (they were in DNS
//! only): a client pod reaches a UDP echo pod through the Service's name and ClusterIP (needs
//! root).

use crate::support::{ready, TestCluster};
use anyhow::{ensure, Result};
use std::time::{Duration, Instant};

const ECHO: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: udp-echo, namespace: default, labels: {app: udp-echo}}
spec:
  nodeName: iad
  terminationGracePeriodSeconds: 1
  containers:
  - name: echo
    image: python:3.12
    args:
    - -u
    - -c
    - |
      import socket
      s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
      s.bind(("0.0.0.0", 7000))
      while True:
          data, peer = s.recvfrom(2048)
          s.sendto(b"echo:" + data, peer)
    ports: [{name: echo, containerPort: 7000, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: udp-echo, namespace: default}
spec:
  selector: {app: udp-echo}
  ports: [{name: echo, port: 7000, protocol: UDP, targetPort: echo}]
---
apiVersion: v1
kind: Pod
metadata: {name: udp-client, namespace: default, labels: {app: udp-client}}
spec:
  nodeName: pdx
  terminationGracePeriodSeconds: 1
  containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]
"#;

/// One datagram to the Service by name; prints the reply and the address it came from.
const CLIENT: &str = r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.sendto(b"ping", ("udp-echo.default.svc.cluster.local", 7000))
data, peer = s.recvfrom(2048)
print(data.decode(), peer[0])
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_services_are_proxied() -> Result<()> {
    let c = TestCluster::start(&["iad", "pdx"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    c.apply(ECHO).await?;
    let t = Duration::from_secs(60);
    c.wait_pods("app in (udp-echo, udp-client)", t, |p| {
        p.len() == 2 && p.iter().all(ready)
    })
    .await?;
    let cluster_ip = c
        .kubectl_ok(&[
            "get",
            "service",
            "udp-echo",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .await?;
    // The proxy follows the Endpoints asynchronously: retry for a while.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = c
            .kubectl(&["exec", "udp-client", "--", "python3", "-c", CLIENT])
            .await?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() {
            ensure!(
                text == format!("echo:ping {cluster_ip}"),
                "the reply comes from the Service address: {text:?}"
            );
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "no UDP reply through the Service: {text:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
