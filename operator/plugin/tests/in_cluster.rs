//! docs/design/history.md#issue-4 (localkube's node agent): a kube-rs client in a pod using
//! in-cluster config.
//!
//! `kubectl-bloodraven` is a kube-rs program; run inside a localkube pod with no kubeconfig,
//! `Config::infer` takes the in-cluster path (ServiceAccount token, `ca.crt`,
//! `KUBERNETES_SERVICE_HOST/PORT`). Needs root (pods are namespaces) and localkube's helper
//! binaries next to this one (`cargo test --workspace` builds them).

use std::path::Path;
use std::time::{Duration, Instant};

use localkube::apiserver::{Config, LocalKube};
use localkube::kubelet::{self, Kubelet, KubeletConfig};

const OBJECTS: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: mfg-reader}
rules:
- apiGroups: [bloodraven.shipstream.io]
  resources: [mysqlfailovergroups]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mfg-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: mfg-reader}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
---
apiVersion: bloodraven.shipstream.io/v1
kind: MysqlFailoverGroup
metadata: {name: playground, namespace: default}
spec:
  image: mariadb:10.11
  initialActiveSite: iad
  sites:
  - {name: iad, role: read-write}
  - {name: pdx, role: read-write}
---
apiVersion: v1
kind: Pod
metadata: {name: plugin, namespace: default}
spec:
  restartPolicy: Never
  containers:
  - name: plugin
    image: bloodraven/plugin:test
    args: [status, playground, -n, default]
"#;

fn kubectl(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", dir.join("kubeconfig").display()))
        .arg(format!(
            "--cache-dir={}",
            dir.join("kubectl-cache").display()
        ))
        .args(args)
        .output()
        .expect("run /usr/bin/kubectl")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_client_in_a_pod_uses_in_cluster_config() {
    if !nix_is_root() {
        eprintln!("skipping: pods as processes need root (CI runs as root)");
        return;
    }
    let plugin = Path::new(env!("CARGO_BIN_EXE_kubectl-bloodraven"));
    let bin_dir = plugin.parent().expect("bin dir").to_path_buf();
    assert!(
        bin_dir.join("localkube-pod-exec").exists(),
        "localkube-pod-exec is missing from {}: run `cargo build -p localkube --bins` (cargo test --workspace does)",
        bin_dir.display()
    );
    let tmp = tempfile::Builder::new()
        .prefix("lk-plugin")
        .tempdir_in("/tmp")
        .expect("tempdir");
    std::fs::write(
        tmp.path().join(kubelet::plugin::CATALOG_FILE),
        format!(
            "images:\n  - image: \"bloodraven/plugin:*\"\n    entrypoint: [\"{}\"]\n",
            plugin.display()
        ),
    )
    .expect("write catalog");
    let mut config = Config::new(tmp.path());
    config.nodes = vec!["iad".into()];
    kubelet::prepare(
        &mut config,
        Kubelet::new(KubeletConfig {
            bin_dir,
            catalog: None,
            clock_faults: Vec::new(),
        }),
    )
    .expect("prepare kubelet");
    let dir = config.state_dir.clone();
    let lk = LocalKube::start(config).await.expect("start localkube");
    // Read at run time: a test binary reused from a target directory shared with another
    // checkout (CI's clone) must apply this checkout's CRD.
    let root = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let crd = Path::new(&root).join("../../fixtures/crds/mysqlfailovergroups.yaml");
    let out = kubectl(&dir, &["apply", "-f", &crd.display().to_string()]);
    assert!(
        out.status.success(),
        "apply CRD: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects = dir.join("objects.yaml");
    std::fs::write(&objects, OBJECTS).expect("write objects");
    // The CRD is served a moment after it is created: retry the apply (bounded).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = kubectl(&dir, &["apply", "-f", &objects.display().to_string()]);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "apply objects: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let phase = loop {
        let out = kubectl(
            &dir,
            &["get", "pod", "plugin", "-o", "jsonpath={.status.phase}"],
        );
        let phase = String::from_utf8_lossy(&out.stdout).to_string();
        if phase == "Succeeded" || phase == "Failed" || Instant::now() > deadline {
            break phase;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let logs = kubectl(&dir, &["logs", "plugin"]);
    let logs = String::from_utf8_lossy(&logs.stdout).to_string();
    lk.shutdown().await.expect("shutdown");
    if let Err(error) = localkube::runtime::cleanup(&dir) {
        eprintln!("cleanup of {} failed: {error}", dir.display());
    }
    assert_eq!(phase, "Succeeded", "plugin pod output: {logs}");
    assert!(
        logs.contains("default/playground"),
        "status output names the group: {logs}"
    );
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}
