//! The scaffolding the end-to-end tests share: [`TestCluster`], a localkube with the kubelet
//! (needs root) driven through the real `kubectl` and kube-rs, for the `kubelet_*` tests;
//! [`node`], the node agent alone, for the `node_*` tests.

pub mod node;

use anyhow::{bail, Context, Result};
use localkube::apiserver::{Config, LocalKube};
use localkube::kubelet::{self, Kubelet, KubeletConfig};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Extra images: `python:*` runs the host's python3, `kubectl:*` the host's kubectl.
pub const CATALOG: &str = r#"images:
  - image: "python:*"
    entrypoint: ["python3"]
  - image: "kubectl:*"
    entrypoint: ["/usr/bin/kubectl"]
"#;

/// A running cluster; dropped without `stop`, it still removes namespaces and links.
pub struct TestCluster {
    lk: Option<LocalKube>,
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Err(e) = localkube::runtime::cleanup(&self.dir) {
            eprintln!("cleanup of {} failed: {e}", self.dir.display());
        }
    }
}

impl TestCluster {
    /// Starts localkube with the kubelet on `nodes`.
    pub async fn start(nodes: &[&str]) -> Result<TestCluster> {
        Self::start_with_clock_faults(nodes, &[]).await
    }

    /// Starts localkube with the kubelet on `nodes`, the containers named `clock_faults`
    /// getting libfaketime (`localkube up --clock-faults`).
    pub async fn start_with_clock_faults(
        nodes: &[&str],
        clock_faults: &[&str],
    ) -> Result<TestCluster> {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        let tmp = tempfile::Builder::new()
            .prefix("lk-kubelet")
            .tempdir_in("/tmp")?;
        std::fs::write(tmp.path().join(kubelet::plugin::CATALOG_FILE), CATALOG)?;
        let mut config = Config::new(tmp.path());
        config.nodes = nodes.iter().map(|n| n.to_string()).collect();
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_localkube-pod-exec"))
            .parent()
            .context("bin dir")?
            .to_path_buf();
        kubelet::prepare(
            &mut config,
            Kubelet::new(KubeletConfig {
                bin_dir,
                catalog: None,
                clock_faults: clock_faults.iter().map(|c| c.to_string()).collect(),
            }),
        )?;
        let dir = config.state_dir.clone();
        let lk = LocalKube::start(config).await?;
        Ok(TestCluster {
            lk: Some(lk),
            dir,
            _tmp: tmp,
        })
    }

    /// The state dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A kube-rs client from the written kubeconfig.
    pub async fn client(&self) -> Result<kube::Client> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kc = kube::config::Kubeconfig::read_from(self.dir.join("kubeconfig"))?;
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kc, &options).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Runs the real kubectl against the cluster (isolated cache dir).
    pub async fn kubectl(&self, args: &[&str]) -> Result<std::process::Output> {
        let out = tokio::process::Command::new("/usr/bin/kubectl")
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("kubectl-cache"))
            .args(args)
            .output()
            .await?;
        Ok(out)
    }

    /// kubectl that must succeed; its stdout.
    pub async fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        let out = self.kubectl(args).await?;
        if !out.status.success() {
            bail!(
                "kubectl {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl apply -f -` of a YAML document.
    pub async fn apply(&self, yaml: &str) -> Result<()> {
        let path = self.dir.join(format!("apply-{}.yaml", rand_suffix()));
        std::fs::write(&path, yaml)?;
        self.kubectl_ok(&["apply", "-f", &path.to_string_lossy()])
            .await?;
        Ok(())
    }

    /// Pods matching a label selector, as JSON.
    pub async fn pods(&self, selector: &str) -> Result<Vec<Value>> {
        let out = self
            .kubectl_ok(&["get", "pods", "-A", "-l", selector, "-o", "json"])
            .await?;
        let v: Value = serde_json::from_str(&out)?;
        Ok(v["items"].as_array().cloned().unwrap_or_default())
    }

    /// Waits until `check` holds for the pods of `selector`.
    pub async fn wait_pods(
        &self,
        selector: &str,
        timeout: Duration,
        check: impl Fn(&[Value]) -> bool,
    ) -> Result<Vec<Value>> {
        let deadline = Instant::now() + timeout;
        loop {
            let pods = self.pods(selector).await?;
            if check(&pods) {
                return Ok(pods);
            }
            if Instant::now() > deadline {
                bail!(
                    "pods {selector}: condition not reached within {timeout:?}: {}",
                    serde_json::to_string_pretty(&pods)?
                );
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Stops localkube (pods, DNS, proxy, namespaces).
    pub async fn stop(mut self) -> Result<()> {
        if let Some(lk) = self.lk.take() {
            lk.shutdown().await?;
        }
        Ok(())
    }
}

fn rand_suffix() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// Whether a pod is Running and Ready.
pub fn ready(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// The pod's name.
pub fn name(p: &Value) -> String {
    p["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The names of this machine's network namespaces that start with `prefix` (a cluster's
/// `ClusterNaming::prefix_for`: what it leaves behind).
pub fn netns_with(prefix: &str) -> Vec<String> {
    std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .filter(|name| name.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}
