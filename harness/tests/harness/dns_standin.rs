//! `bloodraven-dns-standin` as a real process (harness/src/dns_standin,
//! docs/design/harness.md#the-portable-path) against localkube's embedded API server: it serves
//! the DNSEndpoints of its namespace over DNS, skips a malformed one, and "stopping external-dns"
//! through the ConfigMap `bloodraven-external-dns` leaves its answers stale until resumed. It
//! runs as the ServiceAccount of `fixtures/playground/dns-standin.yaml`, so the fixture's RBAC
//! is what lets it watch.

use std::io::{BufRead as _, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bloodraven_api::{DNSEndpoint, DNSEndpointSpec};
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::Resolver;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use localkube_apiserver::{Config as LocalKubeConfig, LocalKube};
use serde::Deserialize as _;
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_bloodraven-dns-standin");
const NAMESPACE: &str = "bloodraven-playground";
const HOSTNAME: &str = "playground-db.example.local";

/// A file of this checkout, found at run time: the compile-time manifest path is the one of
/// whichever checkout built the cached test binary.
fn workspace_file(path: &str) -> std::path::PathBuf {
    bloodraven_harness::backend::workspace_root().join(path)
}

/// The stand-in process (only this test's own child), its standard error collected; killed
/// when dropped.
struct StandIn {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl StandIn {
    fn start(kubeconfig: &std::path::Path) -> StandIn {
        let mut child = Command::new(BINARY)
            .args(["--listen", "127.0.0.1:0", "--namespace", NAMESPACE])
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("POD_NAMESPACE")
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bloodraven-dns-standin");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("dns-standin: {line}");
                lines.lock().expect("log").push(strip_ansi(&line));
            }
        });
        StandIn { child, log }
    }

    fn logged(&self, text: &str) -> Option<String> {
        self.log
            .lock()
            .expect("log")
            .iter()
            .find(|line| line.contains(text))
            .cloned()
    }

    async fn wait_logged(&self, text: &str) -> String {
        for _ in 0..400 {
            if let Some(line) = self.logged(text) {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the stand-in never logged {text:?}; its log:\n{}",
            self.log.lock().expect("log").join("\n")
        );
    }

    /// The address it serves, from its "serving" log line.
    async fn addr(&self) -> SocketAddr {
        let line = self.wait_logged("dns stand-in serving").await;
        let addr = line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("addr="))
            .unwrap_or_else(|| panic!("no addr= in {line:?}"));
        addr.parse().expect("addr")
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the stand-in did not exit within 10 s of SIGTERM");
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn resolver(addr: SocketAddr, tcp: bool) -> Resolver<TokioRuntimeProvider> {
    let mut connection = if tcp {
        ConnectionConfig::tcp()
    } else {
        ConnectionConfig::udp()
    };
    connection.port = addr.port();
    let server = NameServerConfig::new(addr.ip(), true, vec![connection]);
    let config = ResolverConfig::from_parts(None, vec![], vec![server]);
    let mut opts = ResolverOpts::default();
    opts.cache_size = 0;
    opts.attempts = 1;
    Resolver::builder_with_config(config, TokioRuntimeProvider::default())
        .with_options(opts)
        .build()
        .expect("resolver")
}

/// The sorted A answers with their TTLs, or `Err("NXDOMAIN")`.
async fn ask(
    resolver: &Resolver<TokioRuntimeProvider>,
    name: &str,
) -> Result<Vec<(Ipv4Addr, u32)>, String> {
    match resolver.lookup(name, RecordType::A).await {
        Ok(lookup) => {
            let mut answers: Vec<(Ipv4Addr, u32)> = lookup
                .answers()
                .iter()
                .filter_map(|record| match &record.data {
                    RData::A(a) => Some((a.0, record.ttl)),
                    _ => None,
                })
                .collect();
            answers.sort();
            Ok(answers)
        }
        Err(err) if err.is_nx_domain() => Err("NXDOMAIN".into()),
        Err(err) if err.is_no_records_found() => Ok(Vec::new()),
        Err(err) => Err(err.to_string()),
    }
}

async fn eventually_answers(
    resolver: &Resolver<TokioRuntimeProvider>,
    want: &Result<Vec<(Ipv4Addr, u32)>, String>,
) {
    let mut last = None;
    for _ in 0..200 {
        let got = ask(resolver, HOSTNAME).await;
        if &got == want {
            return;
        }
        last = Some(got);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{HOSTNAME} never answered {want:?}; last {last:?}");
}

async fn set_paused(client: &Client, paused: &str) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    config_maps
        .patch(
            "bloodraven-external-dns",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"paused": paused}})),
        )
        .await
        .expect("patch the pause ConfigMap");
}

async fn set_target(client: &Client, target: &str) {
    let endpoints: Api<DNSEndpoint> = Api::namespaced(client.clone(), NAMESPACE);
    let spec = DNSEndpointSpec::a_record(HOSTNAME, target, 10);
    endpoints
        .patch(
            "bloodraven-playground",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .expect("patch the DNSEndpoint");
}

// docs/design/harness.md#the-portable-path and docs/scenarios.md `stop-external-dns`: the
// stand-in publishes the operator's DNSEndpoint (A, recordTTL as the TTL) over UDP and TCP; a
// malformed DNSEndpoint is named in its log and skipped; with the ConfigMap's paused "true" a
// change of the DNSEndpoint is not applied and the answer stays stale; with "false" it catches
// up at once; a deleted DNSEndpoint is NXDOMAIN; SIGTERM exits 0. The fixture's Role (get,
// list, watch of dnsendpoints and of the one ConfigMap by name) is enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dns_stand_in_serves_dns_endpoints_and_goes_stale_while_paused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let localkube = LocalKube::start(LocalKubeConfig::new(dir.path()))
        .await
        .expect("start localkube's API server");
    let kubeconfig = Kubeconfig::read_from(localkube.kubeconfig_path()).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("client config");
    let client = Client::try_from(config).expect("client");

    let crd_text = std::fs::read_to_string(workspace_file("fixtures/crds/dnsendpoints.yaml"))
        .expect("read the DNSEndpoint CRD");
    let crd: CustomResourceDefinition = serde_yaml::from_str(&crd_text).expect("parse the CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("create the CRD");
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");

    // The fixture's ServiceAccount, RBAC and pause ConfigMap (paused: "false"), as the
    // playground installs them; the stand-in runs as that ServiceAccount, so the fixture's Role
    // is what lets it watch.
    let fixture = std::fs::read_to_string(workspace_file("fixtures/playground/dns-standin.yaml"))
        .expect("read the fixture");
    let documents: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&fixture)
        .map(|document| serde_yaml::Value::deserialize(document).expect("fixture document"))
        .collect();
    let kinds: Vec<&str> = documents
        .iter()
        .map(|document| document["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Deployment",
            "Service"
        ]
    );
    let document = |kind: &str| {
        documents
            .iter()
            .find(|document| document["kind"] == kind)
            .cloned()
            .expect("fixture document")
    };
    let service_account: ServiceAccount =
        serde_yaml::from_value(document("ServiceAccount")).expect("ServiceAccount");
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &service_account)
        .await
        .expect("create the ServiceAccount");
    let role: Role = serde_yaml::from_value(document("Role")).expect("Role");
    Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &role)
        .await
        .expect("create the Role");
    let binding: RoleBinding = serde_yaml::from_value(document("RoleBinding")).expect("binding");
    Api::<RoleBinding>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create the RoleBinding");
    let config_map: ConfigMap = serde_yaml::from_value(document("ConfigMap")).expect("ConfigMap");
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &config_map)
        .await
        .expect("create the pause ConfigMap");
    let token = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create_token_request(
            "bloodraven-dns-standin",
            &PostParams::default(),
            &TokenRequest::default(),
        )
        .await
        .expect("a token of the stand-in's ServiceAccount")
        .status
        .expect("TokenRequest status")
        .token;
    let mut kubeconfig: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(localkube.kubeconfig_path()).expect("read the kubeconfig"),
    )
    .expect("parse the kubeconfig");
    for user in kubeconfig["users"]
        .as_sequence_mut()
        .expect("kubeconfig users")
    {
        user["user"] = serde_yaml::to_value(json!({ "token": token })).expect("user");
    }
    let stand_in_kubeconfig = dir.path().join("dns-standin.kubeconfig");
    std::fs::write(
        &stand_in_kubeconfig,
        serde_yaml::to_string(&kubeconfig).expect("kubeconfig"),
    )
    .expect("write the stand-in's kubeconfig");

    let endpoints: Api<DNSEndpoint> = Api::namespaced(client.clone(), NAMESPACE);
    let mut group = DNSEndpoint::new(
        "bloodraven-playground",
        DNSEndpointSpec::a_record(HOSTNAME, "10.96.100.20", 10),
    );
    group.metadata.namespace = Some(NAMESPACE.to_owned());
    endpoints
        .create(&PostParams::default(), &group)
        .await
        .expect("create the DNSEndpoint");
    // The CRD's schema lets any string be a target; the stand-in must skip this one.
    let mut broken = DNSEndpoint::new(
        "broken",
        DNSEndpointSpec::a_record("broken.example.local", "not-an-ip", 10),
    );
    broken.metadata.namespace = Some(NAMESPACE.to_owned());
    endpoints
        .create(&PostParams::default(), &broken)
        .await
        .expect("create the malformed DNSEndpoint");

    let stand_in = StandIn::start(&stand_in_kubeconfig);
    let addr = stand_in.addr().await;
    let udp = resolver(addr, false);
    let tcp = resolver(addr, true);
    let first = Ok(vec![(Ipv4Addr::new(10, 96, 100, 20), 10)]);
    assert_eq!(ask(&udp, HOSTNAME).await, first);
    assert_eq!(ask(&tcp, HOSTNAME).await, first);
    assert_eq!(
        ask(&udp, "broken.example.local").await,
        Err("NXDOMAIN".to_owned())
    );
    let skipped = stand_in
        .wait_logged("skipping a malformed DNSEndpoint")
        .await;
    assert!(
        skipped.contains("bloodraven-playground/broken") && skipped.contains("not-an-ip"),
        "{skipped}"
    );

    // "Stop external-dns", then fail over: the DNSEndpoint changes, the answer stays stale.
    set_paused(&client, "true").await;
    stand_in.wait_logged("external-dns stand-in paused").await;
    set_target(&client, "10.96.100.21").await;
    stand_in.wait_logged("DNSEndpoint change held").await;
    assert_eq!(ask(&udp, HOSTNAME).await, first);
    assert_eq!(ask(&tcp, HOSTNAME).await, first);

    set_paused(&client, "false").await;
    let second = Ok(vec![(Ipv4Addr::new(10, 96, 100, 21), 10)]);
    eventually_answers(&udp, &second).await;
    assert_eq!(ask(&tcp, HOSTNAME).await, second);
    stand_in.wait_logged("external-dns stand-in resumed").await;

    endpoints
        .delete("bloodraven-playground", &DeleteParams::default())
        .await
        .expect("delete the DNSEndpoint");
    eventually_answers(&udp, &Err("NXDOMAIN".to_owned())).await;

    let status = stand_in.terminate();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
    localkube.shutdown().await.expect("stop localkube");
}
