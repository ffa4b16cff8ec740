//! The `localkube` binary runs the kubelet: `up --detach` with three nodes runs pods as
//! processes, `localkube.json` records the cluster DNS address, `fault` reaches the running
//! cluster, `down` stops it and leaves no network namespace behind (localkube node-agent
//! issue; needs root).

use crate::support::netns_with;
use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn localkube(args: &[&str], dir: &Path) -> Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_localkube"))
        .args(args)
        .arg("--state-dir")
        .arg(dir)
        .output()?;
    if !out.status.success() {
        bail!(
            "localkube {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn fault(args: &[&str], dir: &Path) -> Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_localkube"))
        .arg("fault")
        .arg("--state-dir")
        .arg(dir)
        .args(args)
        .output()?;
    if !out.status.success() {
        bail!(
            "localkube fault {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn kubectl(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kubectl-cache"))
        .args(args)
        .output()?;
    if !out.status.success() {
        bail!("kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The A records of `name` from the DNS server at `ip:port`.
fn resolve_a(ip: std::net::Ipv4Addr, port: u16, name: &str) -> Result<Vec<std::net::Ipv4Addr>> {
    use hickory_resolver::config::{
        ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts,
    };
    use hickory_resolver::net::runtime::TokioRuntimeProvider;
    use hickory_resolver::proto::rr::{RData, RecordType};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut udp = ConnectionConfig::udp();
        udp.port = port;
        let server = NameServerConfig::new(ip.into(), true, vec![udp]);
        let config = ResolverConfig::from_parts(None, vec![], vec![server]);
        let mut opts = ResolverOpts::default();
        opts.cache_size = 0;
        let resolver = hickory_resolver::Resolver::builder_with_config(
            config,
            TokioRuntimeProvider::default(),
        )
        .with_options(opts)
        .build()?;
        let lookup = resolver.lookup(name, RecordType::A).await?;
        Ok(lookup
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(a) => Some(a.0),
                _ => None,
            })
            .collect())
    })
}

/// `localkube.json` records the cluster DNS address: querying it resolves the `kubernetes`
/// Service to its ClusterIP.
fn dns_address_is_recorded_and_answers(dir: &Path) -> Result<()> {
    let state: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("localkube.json"))?)?;
    let ip: std::net::Ipv4Addr = state["dnsAddress"]
        .as_str()
        .with_context(|| format!("dnsAddress in localkube.json: {state}"))?
        .parse()?;
    let port = u16::try_from(state["dnsPort"].as_u64().context("dnsPort")?)?;
    ensure!(port == 53, "dnsPort {port}");
    let cluster_ip: std::net::Ipv4Addr = kubectl(
        dir,
        &[
            "get",
            "svc",
            "kubernetes",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    )?
    .trim()
    .parse()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match resolve_a(ip, port, "kubernetes.default.svc.cluster.local") {
            Ok(ips) if ips == vec![cluster_ip] => return Ok(()),
            other => ensure!(
                Instant::now() < deadline,
                "DNS at {ip}:{port} for kubernetes.default: {other:?}, want {cluster_ip}"
            ),
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: p-iad, labels: {app: p}}
spec: {nodeName: iad, containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p-pdx, labels: {app: p}}
spec: {nodeName: pdx, containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p-reader, labels: {app: p}}
spec: {nodeName: reader, containers: [{name: main, image: busybox:1.36, command: ["sh", "-c", "exec sleep 3600"]}]}
"#;

fn scenario(dir: &Path, started: Instant) -> Result<()> {
    std::fs::write(dir.join("pods.yaml"), PODS)?;
    kubectl(
        dir,
        &["apply", "-f", &dir.join("pods.yaml").to_string_lossy()],
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v: Value = serde_json::from_str(&kubectl(
            dir,
            &["get", "pods", "-l", "app=p", "-o", "json"],
        )?)?;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 3 && items.iter().all(|p| p["status"]["phase"] == "Running") {
            break;
        }
        ensure!(Instant::now() < deadline, "pods did not run: {v}");
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!(
        "localkube up --detach (3 nodes) to a Running pod per node: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    dns_address_is_recorded_and_answers(dir)?;
    // Heartbeat: each node renews its Lease in kube-node-lease.
    let holder = kubectl(
        dir,
        &[
            "get",
            "lease",
            "-n",
            "kube-node-lease",
            "reader",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    )?;
    ensure!(holder == "reader", "node lease: {holder:?}");
    let out = fault(&["stop-node", "pdx"], dir)?;
    ensure!(out.contains("\"id\""), "stop-node: {out}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !kubectl(
        dir,
        &[
            "get",
            "node",
            "pdx",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
    )?
    .contains("Unknown")
    {
        ensure!(Instant::now() < deadline, "pdx did not turn NotReady");
        std::thread::sleep(Duration::from_millis(300));
    }
    fault(&["start-node", "pdx"], dir)?;
    Ok(())
}

/// Design "Shape": `up` starts the node agents, `down` removes every namespace it made.
#[test]
fn up_runs_pods_fault_reaches_it_down_cleans_up() -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("lk-cli")
        .tempdir_in("/tmp")?;
    let dir = std::fs::canonicalize(tmp.path()).context("state dir")?;
    let prefix = localkube::runtime::ClusterNaming::prefix_for(&dir);
    let started = Instant::now();
    localkube(&["up", "--detach", "--nodes", "iad,pdx,reader"], &dir)?;
    let result = scenario(&dir, started);
    let cgroups_while_up = cluster_cgroups(&prefix);
    let down = localkube(&["down"], &dir);
    result?;
    down?;
    let left = netns_with(&prefix);
    ensure!(left.is_empty(), "netns left behind: {left:?}");
    // docs/design/localkube.md "What the in-cluster fault agent needs": the cluster's
    // container cgroups exist while it runs and `down` removes them.
    ensure!(
        !cgroups_while_up.is_empty(),
        "no container cgroups of the cluster while it ran"
    );
    let left = cluster_cgroups(&prefix);
    ensure!(left.is_empty(), "cgroups left behind: {left:?}");
    Ok(())
}

/// The cluster's cgroup roots (`/sys/fs/cgroup/<hierarchy>/localkube-<prefix>`, or the v2
/// root's) that exist.
fn cluster_cgroups(prefix: &str) -> Vec<std::path::PathBuf> {
    let name = localkube::runtime::cgroups::root_name(prefix);
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(&name))
        .filter(|p| p.is_dir())
        .collect();
    let v2 = Path::new("/sys/fs/cgroup").join(&name);
    if v2.is_dir() {
        found.push(v2);
    }
    found
}

const APPS_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: app, labels: {app: app}}
spec:
  nodeSelector: {kubernetes.io/hostname: apps}
  containers:
  - name: main
    image: python:3.12
    command: ["python3", "-u", "-c", "import socket, time\nprint('kubernetes=' + socket.gethostbyname('kubernetes.default.svc.cluster.local'))\ntime.sleep(3600)"]
"#;

fn json_of(dir: &Path, args: &[&str]) -> Result<Value> {
    Ok(serde_json::from_str(&kubectl(dir, args)?)?)
}

fn zoneless_scenario(dir: &Path) -> Result<()> {
    let zone = |n: &Value| n["metadata"]["labels"]["topology.kubernetes.io/zone"].clone();
    let iad = json_of(dir, &["get", "node", "iad", "-o", "json"])?;
    let apps = json_of(dir, &["get", "node", "apps", "-o", "json"])?;
    ensure!(zone(&iad) == "iad", "iad's zone: {}", iad["metadata"]);
    ensure!(
        zone(&apps).is_null(),
        "apps has no zone: {}",
        apps["metadata"]
    );
    ensure!(
        apps["metadata"]["labels"]["kubernetes.io/hostname"] == "apps",
        "{}",
        apps["metadata"]
    );
    std::fs::write(dir.join("app.yaml"), APPS_POD)?;
    kubectl(
        dir,
        &["apply", "-f", &dir.join("app.yaml").to_string_lossy()],
    )?;
    let running = |p: &Value| {
        p["status"]["phase"] == "Running"
            && p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let pod = loop {
        let p = json_of(dir, &["get", "pod", "app", "-o", "json"])?;
        if running(&p) {
            break p;
        }
        ensure!(Instant::now() < deadline, "the app pod did not run: {p}");
        std::thread::sleep(Duration::from_millis(300));
    };
    ensure!(
        pod["spec"]["nodeName"] == "apps",
        "scheduled to apps: {}",
        pod["spec"]
    );
    // The node's own pod subnet (the kubelet sets podCIDR from the node side).
    let apps = json_of(dir, &["get", "node", "apps", "-o", "json"])?;
    let cidr = apps["spec"]["podCIDR"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ip = pod["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let net = cidr.trim_end_matches(".0/24");
    ensure!(
        cidr.ends_with(".0/24") && ip.starts_with(&format!("{net}.")),
        "pod IP {ip} in apps' podCIDR {cidr}"
    );
    ensure!(
        Some(cidr.as_str()) != iad["spec"]["podCIDR"].as_str(),
        "apps has its own subnet"
    );
    // Cluster DNS from the zoneless node's pod.
    let cluster_ip = kubectl(
        dir,
        &[
            "get",
            "svc",
            "kubernetes",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    )?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logs = kubectl(dir, &["logs", "app"])?;
        if logs.contains(&format!("kubernetes={}", cluster_ip.trim())) {
            break;
        }
        ensure!(Instant::now() < deadline, "app's DNS answer: {logs:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // A site fault leaves the zoneless node's pod alone.
    fault(&["stop-node", "iad"], dir)?;
    std::thread::sleep(Duration::from_secs(2));
    let p = json_of(dir, &["get", "pod", "app", "-o", "json"])?;
    ensure!(
        running(&p) && p["status"]["containerStatuses"][0]["restartCount"] == 0,
        "app keeps running while iad is stopped: {}",
        p["status"]
    );
    let ready = kubectl(
        dir,
        &[
            "get",
            "node",
            "apps",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
    )?;
    ensure!(ready == "True", "apps stays Ready: {ready}");
    fault(&["start-node", "iad"], dir)?;
    Ok(())
}

/// Design "Shape": `--zoneless-nodes apps` (passed through `up --detach`) adds a node without
/// a `topology.kubernetes.io/zone` label that runs pods as any other (its own pod subnet,
/// kubelet, cluster DNS) and that a site fault does not touch.
#[test]
fn zoneless_node_runs_pods_and_survives_site_faults() -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("lk-zoneless")
        .tempdir_in("/tmp")?;
    let dir = std::fs::canonicalize(tmp.path()).context("state dir")?;
    std::fs::write(
        dir.join("images.yaml"),
        "images:\n  - image: \"python:*\"\n    entrypoint: [\"python3\"]\n",
    )?;
    let prefix = localkube::runtime::ClusterNaming::prefix_for(&dir);
    localkube(
        &[
            "up",
            "--detach",
            "--nodes",
            "iad",
            "--zoneless-nodes",
            "apps",
        ],
        &dir,
    )?;
    let result = zoneless_scenario(&dir);
    let down = localkube(&["down"], &dir);
    result?;
    down?;
    let left = netns_with(&prefix);
    ensure!(left.is_empty(), "netns left behind: {left:?}");
    Ok(())
}

/// `up` refuses a node listed both with and without a zone.
#[test]
fn up_refuses_a_node_both_zoned_and_zoneless() -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("lk-zonedup")
        .tempdir_in("/tmp")?;
    let err = localkube(
        &[
            "up",
            "--detach",
            "--nodes",
            "iad,apps",
            "--zoneless-nodes",
            "apps",
        ],
        tmp.path(),
    )
    .expect_err("a node both zoned and zoneless");
    ensure!(err.to_string().contains("listed twice"), "{err}");
    ensure!(
        !tmp.path().join("localkube.json").exists(),
        "nothing started"
    );
    Ok(())
}

/// Design "Node agent": without root, `up` fails with one sentence naming the kind backend.
#[test]
fn up_without_root_names_the_kind_backend() -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("lk-noroot")
        .tempdir_in("/tmp")?;
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )?;
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_localkube"))
        .args(["up", "--state-dir"])
        .arg(tmp.path().join("state"))
        .output()
        .context("run setpriv (util-linux)")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "up succeeded without root");
    let last = stderr.lines().last().unwrap_or_default();
    ensure!(
        last.starts_with("localkube: failed to ") && last.contains("kind backend"),
        "stderr: {stderr}"
    );
    Ok(())
}
