//! docs/design/history.md#issue-4 ("pods as real processes"): a Deployment's pods run as
//! processes, report status, scale 2 -> 0 -> 2, serve `kubectl logs`, reach each other
//! through Service DNS names and the proxy, and talk to the API in-cluster (needs root).

use crate::support::{name, ready, TestCluster};
use anyhow::{ensure, Result};
use std::time::Duration;

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - name: web
        image: python:3.12
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
        - {name: ADDR, value: "$(POD_IP):8080"}
        args:
        - -u
        - -c
        - |
          import http.server, os
          print("serving", os.environ["POD_NAME"], os.environ["ADDR"], flush=True)
          class H(http.server.BaseHTTPRequestHandler):
              def do_GET(self):
                  self.send_response(200); self.end_headers(); self.wfile.write(os.environ["POD_NAME"].encode())
          http.server.HTTPServer(("0.0.0.0", 8080), H).serve_forever()
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          tcpSocket: {port: http}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
"#;

const CLIENT: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default, labels: {app: client}}
spec:
  restartPolicy: Never
  containers:
  - name: client
    image: python:3.12
    args:
    - -c
    - |
      import urllib.request, socket
      print("dns", socket.gethostbyname("web.default.svc.cluster.local"))
      print("body", urllib.request.urlopen("http://web/", timeout=5).read().decode())
"#;

const IN_CLUSTER: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: whoami, namespace: default, labels: {app: whoami}}
spec:
  restartPolicy: Never
  volumes: [{name: cache, emptyDir: {}}]
  containers:
  - name: kubectl
    image: kubectl:1.32
    args: ["--cache-dir=/cache", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]
    volumeMounts: [{name: cache, mountPath: /cache}]
"#;

fn finished(pods: &[serde_json::Value]) -> bool {
    pods.len() == 1
        && (pods[0]["status"]["phase"] == "Succeeded" || pods[0]["status"]["phase"] == "Failed")
}

/// docs/design/history.md#issue-4 ("pods as real processes"): Deployment 2 -> 0 -> 2, logs,
/// Service DNS + proxy, fieldRef and $(VAR) env (docs/design/requirements.md R004.11:
/// `$(POD_IP):7878`), in-cluster config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_scales_serves_logs_dns_and_in_cluster_api() -> Result<()> {
    let c = TestCluster::start(&["iad", "pdx"]).await?;
    let result = scenario(&c).await;
    c.stop().await?;
    result
}

async fn scenario(c: &TestCluster) -> Result<()> {
    let t = Duration::from_secs(60);
    c.apply(WEB).await?;
    let pods = c
        .wait_pods("app=web", t, |p| p.len() == 2 && p.iter().all(ready))
        .await?;
    let pod = name(&pods[0]);
    let ip = pods[0]["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    ensure!(!ip.is_empty(), "pod has an IP");
    // kubectl logs through pods/log: what the process printed, with $(VAR) expanded.
    let deadline = std::time::Instant::now() + t;
    loop {
        let logs = c.kubectl_ok(&["logs", &pod, "--tail", "5"]).await?;
        if logs.contains(&format!("serving {pod} {ip}:8080")) {
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "logs of {pod}: {logs:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // kubectl exec over websockets (v5.channel.k8s.io): stdout, exit code, and stdin with -i.
    let out = c
        .kubectl_ok(&[
            "exec",
            &pod,
            "--",
            "sh",
            "-c",
            "echo out-$POD_NAME; echo err >&2",
        ])
        .await?;
    ensure!(out.trim() == format!("out-{pod}"), "exec stdout: {out:?}");
    let failed = c
        .kubectl(&["exec", &pod, "--", "sh", "-c", "exit 3"])
        .await?;
    ensure!(
        failed.status.code() == Some(3),
        "exec exit code: {failed:?}"
    );
    let mut child = tokio::process::Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(c.dir().join("kubeconfig"))
        .arg("--cache-dir")
        .arg(c.dir().join("kubectl-cache"))
        .args(["exec", "-i", &pod, "--", "tr", "a-z", "A-Z"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        stdin.write_all(b"hello stdin\n").await?;
    }
    let out = tokio::time::timeout(t, child.wait_with_output()).await??;
    ensure!(
        String::from_utf8_lossy(&out.stdout).trim() == "HELLO STDIN",
        "exec -i: {out:?}"
    );
    // kubectl port-forward (websocket tunnel of SPDY): a local port reaches the pod's 8080.
    let local = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut pf = tokio::process::Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(c.dir().join("kubeconfig"))
        .arg("--cache-dir")
        .arg(c.dir().join("kubectl-cache"))
        .args([
            "port-forward",
            &format!("pod/{pod}"),
            &format!("{local}:8080"),
        ])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let forwarded = async {
        let deadline = std::time::Instant::now() + t;
        loop {
            let got = async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(("127.0.0.1", local)).await?;
                s.write_all(b"GET / HTTP/1.0\r\n\r\n").await?;
                let mut body = String::new();
                s.read_to_string(&mut body).await?;
                anyhow::Ok(body)
            }
            .await;
            match got {
                Ok(body) if body.ends_with(&pod) => return Ok(()),
                other if std::time::Instant::now() > deadline => {
                    anyhow::bail!("port-forward to {pod}: {other:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }
    .await;
    let _ = pf.kill().await;
    forwarded?;
    // A client pod reaches the Service by its DNS name through the proxy.
    c.apply(CLIENT).await?;
    c.wait_pods("app=client", t, finished).await?;
    let out = c.kubectl_ok(&["logs", "client"]).await?;
    ensure!(out.contains("body web-"), "client output: {out}");
    // In-cluster config: kubectl in a pod with the SA token and KUBERNETES_SERVICE_HOST.
    c.apply(IN_CLUSTER).await?;
    c.wait_pods("app=whoami", t, finished).await?;
    let who = c.kubectl_ok(&["logs", "whoami"]).await?;
    ensure!(
        who.trim() == "system:serviceaccount:default:default",
        "whoami: {who}"
    );
    // Scale 2 -> 0: processes stop, pods go away; 0 -> 2: new processes.
    c.kubectl_ok(&["scale", "deployment/web", "--replicas=0"])
        .await?;
    c.wait_pods("app=web", t, |p| p.is_empty()).await?;
    c.kubectl_ok(&["scale", "deployment/web", "--replicas=2"])
        .await?;
    let pods = c
        .wait_pods("app=web", t, |p| p.len() == 2 && p.iter().all(ready))
        .await?;
    ensure!(
        pods.iter().all(|p| name(p) != pod),
        "new pods after scaling"
    );
    Ok(())
}
