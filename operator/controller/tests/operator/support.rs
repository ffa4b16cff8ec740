//! Scaffolding shared by the end-to-end tests: a localkube API server with a kube client, the
//! committed CRDs served, namespaces, and a probe that waits for a condition.

use std::path::PathBuf;
use std::time::Duration;

use bloodraven_api::MysqlFailoverGroup;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use localkube_apiserver::{Config as LocalKubeConfig, LocalKube};
use serde_json::json;

/// Probes every 50 ms until `probe` returns a value or `seconds` have passed.
pub async fn eventually<T, F, Fut>(seconds: u64, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    while tokio::time::Instant::now() < deadline {
        if let Some(value) = probe().await {
            return Some(value);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// localkube's embedded API server in its own temporary directory, and a client of it.
pub struct Cluster {
    localkube: LocalKube,
    _dir: tempfile::TempDir,
    pub client: Client,
}

impl Cluster {
    pub async fn start() -> Cluster {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        let localkube = LocalKube::start(LocalKubeConfig::new(dir.path()))
            .await
            .expect("start localkube");
        let kubeconfig = Kubeconfig::read_from(localkube.kubeconfig_path()).expect("kubeconfig");
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("client config");
        let client = Client::try_from(config).expect("client");
        Cluster {
            localkube,
            _dir: dir,
            client,
        }
    }

    pub async fn stop(self) {
        self.localkube.shutdown().await.expect("shutdown localkube");
    }

    /// The kubeconfig that reaches this cluster, for a process started by the test.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.localkube.kubeconfig_path()
    }

    /// Stores `object` (a `plural` of `group`, with its metadata) as it is, bypassing the API
    /// server's validation: what a real cluster may hold that the operator's types are
    /// stricter about than the CRD's schema (stored before the CRD tightened, or an edge the
    /// schema allows).
    pub fn store_unvalidated(&self, group: &str, plural: &str, object: serde_json::Value) {
        self.localkube
            .cluster()
            .store
            .create(&format!("{group}/{plural}"), object)
            .expect("store the object as it is");
    }

    /// Replaces an object in the store as it is, bypassing validation (an edit a tightened
    /// schema would refuse).
    pub fn replace_unvalidated(&self, group: &str, plural: &str, object: serde_json::Value) {
        self.localkube
            .cluster()
            .store
            .update(&format!("{group}/{plural}"), object, None)
            .expect("replace the object as it is");
    }

    pub async fn namespace(&self, name: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
        api.create(&PostParams::default(), &namespace)
            .await
            .expect("create namespace");
    }

    /// Installs the committed CRDs (fixtures/crds) and waits until they are served.
    pub async fn crds(&self) {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        // Read at run time: a test binary reused from a target directory shared with another
        // checkout (CI's clone) must install this checkout's CRDs.
        let root = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
        let dir = std::path::Path::new(&root).join("../../fixtures/crds");
        for file in [
            "mysqlfailovergroups.yaml",
            "mysqldatabases.yaml",
            "dnsendpoints.yaml",
        ] {
            let text = std::fs::read_to_string(dir.join(file)).expect("read crd");
            let crd: CustomResourceDefinition = serde_yaml::from_str(&text).expect("parse crd");
            api.create(&PostParams::default(), &crd)
                .await
                .expect("create crd");
        }
        let groups: Api<MysqlFailoverGroup> = Api::all(self.client.clone());
        let served = eventually(10, || async { groups.list(&Default::default()).await.ok() }).await;
        assert!(served.is_some(), "CRDs are served");
    }
}
