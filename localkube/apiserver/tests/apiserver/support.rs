//! Shared setup of the API server tests: a localkube on an ephemeral loopback port in a
//! temp state dir, and kube-rs clients for it.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use localkube_apiserver::{Config as LkConfig, LocalKube};
use std::time::Duration;

/// A running test cluster; `stop` shuts it down (the temp dir goes with it).
pub struct TestCluster {
    pub lk: LocalKube,
    pub dir: tempfile::TempDir,
    pub client: Client,
}

/// Installs the rustls crypto provider once per test binary.
pub fn crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Starts a cluster; `tune` adjusts the config.
pub async fn start_with(tune: impl FnOnce(&mut LkConfig)) -> TestCluster {
    crypto();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = LkConfig::new(dir.path());
    cfg.bookmark_interval = Duration::from_millis(500);
    tune(&mut cfg);
    let lk = LocalKube::start(cfg).await.expect("start localkube");
    let client = admin_client(&lk).await;
    TestCluster { lk, dir, client }
}

/// Starts a cluster with defaults.
pub async fn start() -> TestCluster {
    start_with(|_| {}).await
}

/// A client with the admin kubeconfig.
pub async fn admin_client(lk: &LocalKube) -> Client {
    let kc = Kubeconfig::read_from(lk.kubeconfig_path()).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Client::try_from(config).expect("client")
}

/// A client using a bearer token only (the admin kubeconfig's cluster, without its client
/// certificate, which would authenticate first as on kube-apiserver).
pub async fn token_client(lk: &LocalKube, token: &str) -> Client {
    let kc = Kubeconfig::read_from(lk.kubeconfig_path()).expect("read kubeconfig");
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    Client::try_from(config).expect("client")
}

impl TestCluster {
    pub async fn stop(self) {
        self.lk.shutdown().await.expect("shutdown");
        drop(self.dir);
    }
}

/// Polls `f` every 50 ms until it returns Some, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if let Some(v) = f().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// The `reason` and `code` of a kube API error.
pub fn reason(e: &kube::Error) -> (String, u16) {
    match e {
        kube::Error::Api(s) => (s.reason.clone(), s.code),
        other => (format!("{other}"), 0),
    }
}
