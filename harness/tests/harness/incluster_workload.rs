//! `bloodraven-workload` as real processes in a temporary directory
//! (harness/src/incluster, docs/design/harness.md#one-run step 3): the daemon, `ctl` and
//! `follow`, against unreachable hosts (every operation fails, in order, with seq continuity;
//! stop drains; follow ends) and against a real `mariadbd` (writes are acknowledged).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bloodraven_harness::history::event::{EventType, Op};
use bloodraven_harness::incluster::lines::{parse_line, RunLine};

const BINARY: &str = env!("CARGO_BIN_EXE_bloodraven-workload");

/// A daemon stopped (SIGTERM, then SIGKILL) when dropped; only this process's own child.
struct Daemon {
    child: Child,
    dir: PathBuf,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        Daemon::start_with_kubeconfig(dir, None)
    }

    /// A daemon whose Kubernetes client (the site probes' watch of the site pods) reads
    /// `kubeconfig`; without one, none it could find by itself.
    fn start_with_kubeconfig(dir: &Path, kubeconfig: Option<&Path>) -> Daemon {
        let resolv = dir.join("resolv.conf");
        // A nameserver that answers nothing: the DNS probe records empty answers, quickly.
        std::fs::write(&resolv, "nameserver 127.0.0.1\n").expect("resolv.conf");
        let mut command = Command::new(BINARY);
        command.env_remove("KUBERNETES_SERVICE_HOST");
        match kubeconfig {
            Some(path) => command.env("KUBECONFIG", path),
            None => command.env("KUBECONFIG", dir.join("no-kubeconfig")),
        };
        let child = command
            .args(["serve", "--dir"])
            .arg(dir)
            .arg("--resolv-conf")
            .arg(&resolv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the daemon");
        let daemon = Daemon {
            child,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if ctl(dir, r#"{"ping": {}}"#).0 == 0 {
                return daemon;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon never answered a ping"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&mut self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, signal);
    }

    /// SIGTERM and wait: the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let status = self.child.wait().expect("wait for the daemon");
        std::mem::forget(self);
        status
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// Runs `ctl REQUEST`: (exit code, stdout, stderr).
fn ctl(dir: &Path, request: &str) -> (i32, String, String) {
    let output = Command::new(BINARY)
        .args(["ctl", "--dir"])
        .arg(dir)
        .arg(request)
        .output()
        .expect("run ctl");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn ctl_ok(dir: &Path, request: &str) -> serde_json::Value {
    let (code, stdout, stderr) = ctl(dir, request);
    assert_eq!(code, 0, "ctl {request}: {stderr}");
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    serde_json::from_str(stdout.trim()).expect("a JSON answer")
}

/// A `follow` running in the background, its lines collected by a thread.
struct Follow {
    child: Child,
    lines: std::thread::JoinHandle<Vec<String>>,
}

fn follow(dir: &Path, run: &str, from: u64) -> Follow {
    let mut child = Command::new(BINARY)
        .args(["follow", "--dir"])
        .arg(dir)
        .args(["--run", run, "--from", &from.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn follow");
    let stdout = child.stdout.take().expect("stdout");
    let lines = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map(|line| line.expect("a line"))
            .collect()
    });
    Follow { child, lines }
}

impl Follow {
    /// Waits (bounded) for `follow` to exit: its code and lines.
    fn finish(mut self, within: Duration) -> (i32, Vec<String>) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                let lines = self.lines.join().expect("reader");
                return (status.code().unwrap_or(-1), lines);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("follow did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn parsed(lines: &[String]) -> Vec<RunLine> {
    lines
        .iter()
        .map(|line| parse_line(line).unwrap_or_else(|why| panic!("{why}")))
        .collect()
}

/// Checks the run log's contract: seq 0..=last without gaps, anchor first, end last, and per
/// process an invoke then its completion, on strictly increasing monotonic times.
fn check_contract(lines: &[RunLine]) -> Vec<(String, EventType, Op)> {
    let seqs: Vec<u64> = lines.iter().map(RunLine::seq).collect();
    assert_eq!(
        seqs,
        (0..lines.len() as u64).collect::<Vec<_>>(),
        "gapless seq"
    );
    assert!(matches!(lines.first(), Some(RunLine::Anchor(_))));
    let Some(RunLine::End { end, .. }) = lines.last() else {
        panic!("no end line: {:?}", lines.last());
    };
    assert_eq!(end.events, lines.len() as u64 - 2);
    assert_eq!((end.unwritten, end.aborted.as_deref()), (0, None));
    let mut open = std::collections::BTreeMap::new();
    let mut last_mono = 0;
    let mut events = Vec::new();
    for line in lines {
        if let RunLine::Event(event) = line {
            assert!(event.mono_ns > last_mono, "monotonic: {event:?}");
            last_mono = event.mono_ns;
            let was_open = open.insert(event.process.clone(), event.kind == EventType::Invoke);
            if event.kind == EventType::Invoke {
                assert_ne!(was_open, Some(true), "one open operation per process");
            } else {
                assert_eq!(was_open, Some(true), "a completion after its invoke");
            }
            events.push((event.process.clone(), event.kind, event.op.clone()));
        }
    }
    assert!(
        open.values().all(|open| !open),
        "stop drained: nothing left open {open:?}"
    );
    events
}

// harness/src/incluster: a run against unreachable hosts records every operation as failed,
// in order and without a gap; `stop` drains and counts; `follow` ends at the end line; a
// follow from a later line repeats exactly the tail; a stop repeated answers the same.
#[test]
fn a_run_against_unreachable_hosts_records_failures_and_stop_drains() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(dir.path());
    let started = ctl_ok(
        dir.path(),
        r#"{"start": {"run": "r1", "primary": "127.0.0.1:1", "replicas": "127.0.0.1:1", "dnsHostname": "mysql.playground.test.", "password": "pw"}}"#,
    );
    assert_eq!(started["run"], "r1");
    let following = follow(dir.path(), "r1", 0);
    let (code, _, stderr) = ctl(
        dir.path(),
        r#"{"start": {"run": "r2", "primary": "127.0.0.1:1", "replicas": "127.0.0.1:1", "password": "pw"}}"#,
    );
    assert_eq!(code, 1, "one run at a time");
    assert!(stderr.contains("still active"), "{stderr}");
    std::thread::sleep(Duration::from_millis(1500));
    let stopped = ctl_ok(dir.path(), r#"{"stop": {"run": "r1"}}"#);
    let events = stopped["events"].as_u64().expect("events");
    let last_seq = stopped["lastSeq"].as_u64().expect("lastSeq");
    assert_eq!(last_seq, events + 1);
    let (code, lines) = following.finish(Duration::from_secs(20));
    assert_eq!(code, 0, "follow exits 0 after the end line");
    let lines = parsed(&lines);
    assert_eq!(lines.len() as u64, last_seq + 1, "every line, once");
    let ops = check_contract(&lines);
    let failed_writes = ops
        .iter()
        .filter(|(process, kind, op)| {
            process.starts_with("writer-")
                && *kind == EventType::Fail
                && matches!(op, Op::Write { error: Some(error), .. } if error.starts_with("connect:"))
        })
        .count();
    assert!(
        failed_writes >= 4,
        "writes every 100 ms per writer: {ops:?}"
    );
    for reader in ["reader-primary", "reader-replicas"] {
        assert!(
            ops.iter()
                .any(|(process, kind, _)| process == reader && *kind == EventType::Fail),
            "{reader} failed reads"
        );
    }
    assert!(
        ops.iter().any(|(process, kind, op)| process == "dns"
            && *kind == EventType::Ok
            && matches!(op, Op::Dns { addresses, site: None } if addresses.is_empty())),
        "DNS probes answered nothing"
    );
    assert!(
        ops.iter().any(|(process, kind, op)| process == "probes"
            && *kind == EventType::Ok
            && matches!(op, Op::Probing { processes, period_ms: 200, .. } if processes == &["dns".to_owned()])),
        "the DNS probe declares itself"
    );
    assert!(
        !ops.iter().any(|(process, kind, _)| process != "dns"
            && process != "probes"
            && *kind != EventType::Invoke
            && *kind != EventType::Fail),
        "nothing reached is acknowledged, nothing refused is unknown: {ops:?}"
    );
    // The tail again, from line 5.
    let (code, tail) = follow(dir.path(), "r1", 5).finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    assert_eq!(parsed(&tail), lines[5..].to_vec());
    // A stop repeated (a broken exec stream) answers from the end line.
    let again = ctl_ok(dir.path(), r#"{"stop": {"run": "r1"}}"#);
    assert_eq!(
        (again["events"].as_u64(), again["lastSeq"].as_u64()),
        (Some(events), Some(last_seq))
    );
    // A run id is used once; bad requests say why.
    let (code, _, stderr) = ctl(
        dir.path(),
        r#"{"start": {"run": "r1", "primary": "127.0.0.1:1", "replicas": "127.0.0.1:1", "password": "pw"}}"#,
    );
    assert_eq!(code, 1);
    assert!(stderr.contains("used once"), "{stderr}");
    let (code, _, stderr) = ctl(dir.path(), r#"{"launch": {}}"#);
    assert_eq!(code, 1);
    assert!(stderr.contains("failed to read the request"), "{stderr}");
    let (code, _, stderr) = ctl(dir.path(), r#"{"sendWrite": {"name": "nobody"}}"#);
    assert_eq!(code, 1);
    assert!(stderr.contains("no connection has that name"), "{stderr}");
    assert!(
        daemon.terminate().success(),
        "SIGTERM ends the daemon cleanly"
    );
}

// harness/src/incluster/runlog.rs: a daemon killed mid-run leaves its log open; the next
// daemon closes it as aborted, and `follow` ends with that end line (the harness then records
// the run as incomplete).
#[test]
fn a_run_whose_daemon_died_ends_as_aborted_at_the_next_start() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(dir.path());
    ctl_ok(
        dir.path(),
        r#"{"start": {"run": "r9", "primary": "127.0.0.1:1", "replicas": "127.0.0.1:1", "password": "pw"}}"#,
    );
    std::thread::sleep(Duration::from_millis(400));
    drop(daemon); // SIGKILL
    let daemon = Daemon::start(dir.path());
    let (code, lines) = follow(dir.path(), "r9", 0).finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    let lines = parsed(&lines);
    match lines.last() {
        Some(RunLine::End { end, .. }) => assert!(
            end.aborted
                .as_deref()
                .is_some_and(|why| why.contains("stopped while run r9")),
            "{end:?}"
        ),
        other => panic!("no end line: {other:?}"),
    }
    assert!(daemon.terminate().success());
}

// harness/src/incluster against a real mariadbd (docs/design/style.md#test-tiers, tier 4):
// the workload user set up by the harness's statements gets its writes acknowledged, each
// with the GTID it committed as, and reads see them.
#[test]
fn a_run_against_mariadb_acknowledges_writes() {
    use bloodraven_mysql::live::sandbox::{loopback_addresses, MariaDbServer};
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let address = loopback_addresses(1).expect("a loopback address")[0];
    let server = runtime
        .block_on(MariaDbServer::start("workload-db", 71, address))
        .unwrap_or_else(|error| {
            panic!("failed to start mariadbd (CI installs mariadb-server): {error}")
        });
    let password = "workload-secret";
    runtime.block_on(async {
        let admin = server.admin_client();
        assert!(admin.unfence().await.is_applied(), "writable");
        let mut conn = admin.connect().await.expect("admin connects");
        let statements =
            bloodraven_harness::live::workload::setup_statements(password).expect("statements");
        for statement in statements.split(";\n").filter(|s| !s.trim().is_empty()) {
            admin
                .execute(&mut conn, statement)
                .await
                .unwrap_or_else(|error| panic!("{statement}: {error}"));
        }
    });
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(dir.path());
    let host = format!("{}:{}", address.ip(), address.port());
    ctl_ok(
        dir.path(),
        &serde_json::json!({"start": {"run": "db1", "primary": host, "replicas": host, "password": password}})
            .to_string(),
    );
    let following = follow(dir.path(), "db1", 0);
    std::thread::sleep(Duration::from_millis(1500));
    // A held connection, its write sent and answered.
    ctl_ok(
        dir.path(),
        &serde_json::json!({"openConnection": {"name": "held", "host": host}}).to_string(),
    );
    let seen = ctl_ok(dir.path(), r#"{"connection": {"name": "held"}}"#);
    assert_eq!(seen["writeError"], serde_json::Value::Null, "{seen}");
    ctl_ok(dir.path(), r#"{"sendWrite": {"name": "held", "id": 2}}"#);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sent = ctl_ok(dir.path(), r#"{"connection": {"name": "held"}}"#);
        if sent["sentWrite"] == "acknowledged" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sent write was never answered: {sent}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        ctl_ok(dir.path(), r#"{"closeConnections": {}}"#)["closed"],
        0,
        "sent: no longer held"
    );
    let stopped = ctl_ok(dir.path(), r#"{"stop": {"run": "db1"}}"#);
    let (code, lines) = following.finish(Duration::from_secs(20));
    assert_eq!(code, 0);
    let lines = parsed(&lines);
    assert_eq!(
        Some(lines.len() as u64),
        stopped["lastSeq"].as_u64().map(|seq| seq + 1)
    );
    let ops = check_contract(&lines);
    let acknowledged: Vec<&Op> = ops
        .iter()
        .filter(|(process, kind, _)| process.starts_with("writer-") && *kind == EventType::Ok)
        .map(|(_, _, op)| op)
        .collect();
    assert!(acknowledged.len() >= 4, "{ops:?}");
    assert!(acknowledged
        .iter()
        .all(|op| matches!(op, Op::Write { gtid: Some(gtid), error: None, .. } if gtid.starts_with("0-71-"))));
    assert!(ops
        .iter()
        .any(|(process, kind, op)| process == "reader-primary"
            && *kind == EventType::Ok
            && matches!(
                op,
                Op::Read {
                    max_id: Some(_),
                    ..
                }
            )));
    assert!(daemon.terminate().success());
}

// harness/src/live/site_probes.rs against a real mariadbd (docs/design/style.md#test-tiers,
// tier 4): a site probe dialling a writable server gets its canary acknowledged into
// `harness.canary`; once the server is fenced the canary is refused with 1290 and read_only
// read as 1, on the same kept connection; a dead address is unreachable; a site with no pod
// IP asks nothing and says so; and a site whose address changes is dialled at the new one.
// The probes declare their 100 ms period and their 2 s bound. (The sandbox's `@@hostname` is
// this machine's, no playground pod: no answer names a site here.)
#[test]
fn site_probes_against_mariadb_see_acknowledgements_refusals_and_unreachable_sites() {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use bloodraven_harness::history::event::{ProbeOutcome, CANARY_ID_BASE};
    use bloodraven_harness::history::recorder::Recorder;
    use bloodraven_harness::live::site_probes::{spawn_site_probes, SiteAddress, SiteProbeTargets};
    use bloodraven_harness::scenario::model::Site;
    use bloodraven_mysql::live::sandbox::{loopback_addresses, MariaDbServer};

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let address = loopback_addresses(1).expect("a loopback address")[0];
    let server = runtime
        .block_on(MariaDbServer::start("probe-db", 72, address))
        .unwrap_or_else(|error| {
            panic!("failed to start mariadbd (CI installs mariadb-server): {error}")
        });
    let password = "probe-secret";
    let host = format!("{}:{}", address.ip(), address.port());
    let recorder = Arc::new(Recorder::new());
    let history = runtime.block_on(async {
        let admin = server.admin_client();
        assert!(admin.unfence().await.is_applied(), "writable");
        let mut conn = admin.connect().await.expect("admin connects");
        let statements =
            bloodraven_harness::live::workload::setup_statements(password).expect("statements");
        for statement in statements.split(";\n").filter(|s| !s.trim().is_empty()) {
            admin
                .execute(&mut conn, statement)
                .await
                .unwrap_or_else(|error| panic!("{statement}: {error}"));
        }
        let (addresses, watched) = tokio::sync::watch::channel(BTreeMap::from([
            (Site::Iad, SiteAddress::Known(host.clone())),
            (Site::Pdx, SiteAddress::Known("127.0.0.1:1".to_owned())),
            (Site::Reader, SiteAddress::Unknown("no pod yet".to_owned())),
        ]));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let targets = SiteProbeTargets {
            group: "playground".to_owned(),
            sites: Site::ALL.to_vec(),
            password: password.to_owned(),
        };
        let tasks = spawn_site_probes(&targets, &watched, &recorder, &stopped);
        tokio::time::sleep(Duration::from_millis(700)).await;
        // pdx's pod comes back at the server's address.
        addresses.send_modify(|all| {
            all.insert(Site::Pdx, SiteAddress::Known(host.clone()));
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(admin.fence().await.is_applied(), "fenced");
        tokio::time::sleep(Duration::from_millis(700)).await;
        let _ = stop.send(true);
        for task in tasks {
            task.await.expect("a probe task");
        }
        let rows = admin
            .rows(
                &mut conn,
                "SELECT COUNT(*) AS n, MIN(id) AS low FROM harness.canary",
            )
            .await
            .expect("canary rows");
        let count: u64 = rows[0]["n"]
            .as_deref()
            .and_then(|n| n.parse().ok())
            .expect("count");
        let low: u64 = rows[0]["low"]
            .as_deref()
            .and_then(|n| n.parse().ok())
            .expect("min id");
        assert!(count >= 5, "canaries written: {count}");
        assert!(
            low > CANARY_ID_BASE,
            "canary ids from their own range: {low}"
        );
        recorder.snapshot()
    });
    let operations = history.operations().expect("well formed");
    // (pod IP, outcome, read_only, error code) of each probe of `site`.
    type Seen = (Option<String>, ProbeOutcome, Option<bool>, Option<u16>);
    let outcomes = |site: Site| -> Vec<Seen> {
        operations
            .iter()
            .filter(|operation| operation.invoke.process == format!("site-probe-{site}"))
            .filter_map(|operation| match &operation.completion?.op {
                Op::SiteProbe {
                    pod_ip,
                    outcome: Some(outcome),
                    read_only,
                    error_code,
                    answered,
                    ..
                } => {
                    assert_eq!(*answered, None, "the sandbox is no playground pod");
                    Some((pod_ip.clone(), *outcome, *read_only, *error_code))
                }
                _ => None,
            })
            .collect()
    };
    let iad = outcomes(Site::Iad);
    assert!(iad.len() >= 15, "every ~100 ms: {iad:?}");
    let first_refusal = iad
        .iter()
        .position(|(_, outcome, _, _)| *outcome == ProbeOutcome::Refused)
        .expect("refused once fenced");
    assert!(first_refusal >= 5, "{iad:?}");
    assert!(iad[..first_refusal]
        .iter()
        .all(
            |(_, outcome, read_only, _)| *outcome == ProbeOutcome::Acknowledged
                && *read_only == Some(false)
        ));
    assert!(iad[first_refusal..]
        .iter()
        .all(
            |(_, outcome, read_only, code)| *outcome == ProbeOutcome::Refused
                && *read_only == Some(true)
                && *code == Some(1290)
        ));
    let pdx = outcomes(Site::Pdx);
    assert_eq!(
        pdx.first()
            .map(|(ip, outcome, _, _)| (ip.as_deref(), *outcome)),
        Some((Some("127.0.0.1:1"), ProbeOutcome::Unreachable))
    );
    assert!(
        pdx.iter()
            .any(|(ip, outcome, _, _)| ip.as_deref() == Some(host.as_str())
                && *outcome == ProbeOutcome::Acknowledged),
        "dialled at its new address: {pdx:?}"
    );
    let reader = outcomes(Site::Reader);
    assert!(
        !reader.is_empty()
            && reader
                .iter()
                .all(|(ip, outcome, _, _)| ip.is_none() && *outcome == ProbeOutcome::NoAddress),
        "{reader:?}"
    );
    assert!(history.events.iter().any(|event| matches!(
        &event.op,
        Op::Probing { processes, period_ms: 100, answer_max_ms: Some(2_000) }
            if processes == &["site-probe-iad", "site-probe-pdx", "site-probe-reader"]
    )));
}

// harness/src/incluster/site_pods.rs against localkube's embedded API server: the daemon,
// given a group in `start`, finds the site pods through the API as the ServiceAccount of
// `fixtures/playground/workload.yaml` (whose Role, pods get/list/watch, is what lets it),
// dials each at its pod IP, and follows a pod IP that changes; a site with no pod asks nothing
// and says why. (Nothing listens at the pod IPs: what is checked is where each probe dialled.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn site_probes_find_the_site_pods_through_the_api_and_follow_their_ips() {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde::Deserialize as _;
    use serde_json::json;

    const NAMESPACE: &str = "bloodraven-playground";
    let dir = tempfile::tempdir().expect("tempdir");
    let localkube =
        localkube_apiserver::LocalKube::start(localkube_apiserver::Config::new(dir.path()))
            .await
            .expect("start localkube's API server");
    let admin = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(localkube.kubeconfig_path()).expect("kubeconfig"),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("client config"),
    )
    .expect("client");
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace");
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");
    let fixture = std::fs::read_to_string(
        bloodraven_harness::backend::workspace_root().join("fixtures/playground/workload.yaml"),
    )
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
        ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
    );
    assert_eq!(
        documents[3]["spec"]["template"]["spec"]["serviceAccountName"].as_str(),
        Some("bloodraven-workload")
    );
    let service_account: ServiceAccount =
        serde_yaml::from_value(documents[0].clone()).expect("ServiceAccount");
    Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &service_account)
        .await
        .expect("create the ServiceAccount");
    let role: Role = serde_yaml::from_value(documents[1].clone()).expect("Role");
    Api::<Role>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &role)
        .await
        .expect("create the Role");
    let binding: RoleBinding = serde_yaml::from_value(documents[2].clone()).expect("binding");
    Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create the RoleBinding");
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE)
        .create_token_request(
            "bloodraven-workload",
            &PostParams::default(),
            &TokenRequest::default(),
        )
        .await
        .expect("a token of the workload's ServiceAccount")
        .status
        .expect("TokenRequest status")
        .token;
    let mut kubeconfig: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(localkube.kubeconfig_path()).expect("read the kubeconfig"),
    )
    .expect("parse the kubeconfig");
    for user in kubeconfig["users"].as_sequence_mut().expect("users") {
        user["user"] = serde_yaml::to_value(json!({ "token": token })).expect("user");
    }
    let workload_kubeconfig = dir.path().join("workload.kubeconfig");
    std::fs::write(
        &workload_kubeconfig,
        serde_yaml::to_string(&kubeconfig).expect("kubeconfig"),
    )
    .expect("write the workload's kubeconfig");

    // iad's pod (labels as the operator sets them) at one IP; pdx has none.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "mysql-playground-iad-0",
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/instance": "playground", "shipstream.io/site": "iad"},
        },
        "spec": {"containers": [{"name": "mysql", "image": "mariadb"}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create iad's pod");
    let set_ip = |ip: &'static str| {
        let pods = pods.clone();
        async move {
            pods.patch_status(
                "mysql-playground-iad-0",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"podIP": ip}})),
            )
            .await
            .expect("set iad's pod IP");
        }
    };
    set_ip("127.0.0.98").await;

    let state = tempfile::tempdir().expect("state dir");
    let state_dir = state.path().to_path_buf();
    let daemon_dir = state_dir.clone();
    let kubeconfig_path = workload_kubeconfig.clone();
    let daemon = tokio::task::spawn_blocking(move || {
        Daemon::start_with_kubeconfig(&daemon_dir, Some(&kubeconfig_path))
    })
    .await
    .expect("daemon");
    let start = json!({"start": {
        "run": "p1", "primary": "127.0.0.1:1", "replicas": "127.0.0.1:1", "password": "pw",
        "group": "playground", "namespace": NAMESPACE, "sites": ["iad", "pdx"],
    }})
    .to_string();
    let start_dir = state_dir.clone();
    tokio::task::spawn_blocking(move || ctl_ok(&start_dir, &start))
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    set_ip("127.0.0.97").await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let stop_dir = state_dir.clone();
    let lines = tokio::task::spawn_blocking(move || {
        ctl_ok(&stop_dir, r#"{"stop": {"run": "p1"}}"#);
        follow(&stop_dir, "p1", 0).finish(Duration::from_secs(20))
    })
    .await
    .expect("stop and follow");
    assert_eq!(lines.0, 0);
    let ops = check_contract(&parsed(&lines.1));
    let dialled = |process: &str| -> Vec<(Option<String>, Option<String>)> {
        ops.iter()
            .filter(|(name, kind, _)| name == process && *kind != EventType::Invoke)
            .filter_map(|(_, _, op)| match op {
                Op::SiteProbe { pod_ip, error, .. } => Some((pod_ip.clone(), error.clone())),
                _ => None,
            })
            .collect()
    };
    let iad: Vec<Option<String>> = dialled("site-probe-iad")
        .into_iter()
        .map(|(ip, _)| ip)
        .skip_while(Option::is_none)
        .collect();
    let first_new = iad
        .iter()
        .position(|ip| ip.as_deref() == Some("127.0.0.97"))
        .unwrap_or_else(|| panic!("never dialled the new IP: {iad:?}"));
    assert!(first_new > 0, "{iad:?}");
    assert!(
        iad[..first_new]
            .iter()
            .all(|ip| ip.as_deref() == Some("127.0.0.98"))
            && iad[first_new..]
                .iter()
                .all(|ip| ip.as_deref() == Some("127.0.0.97")),
        "the old IP until the new one, then only the new: {iad:?}"
    );
    let pdx = dialled("site-probe-pdx");
    assert!(
        !pdx.is_empty()
            && pdx.iter().all(|(ip, error)| ip.is_none()
                && error
                    .as_deref()
                    .is_some_and(|why| why.contains("no pod IP of pdx"))),
        "{pdx:?}"
    );
    assert!(
        pdx.iter().any(|(_, error)| error
            .as_deref()
            .is_some_and(|why| why.contains("the API lists no pod mysql-playground-pdx-0"))),
        "{pdx:?}"
    );
    let status = tokio::task::spawn_blocking(move || daemon.terminate())
        .await
        .expect("terminate");
    assert!(status.success());
    localkube.shutdown().await.expect("stop localkube");
}

// harness/src/incluster/oneshot.rs: `http` sends the method, headers, body and the bearer
// token read from standard input (never the command line), and prints status, headers and
// body; a request that gets no answer exits 1 with the reason.
#[test]
fn http_sends_one_request_and_prints_the_answer() {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut request = Vec::new();
        let mut chunk = [0_u8; 4096];
        // Headers, then a 2-byte body.
        while !String::from_utf8_lossy(&request).contains("\r\n\r\n{}") {
            let read = stream.read(&mut chunk).expect("read");
            assert!(read > 0, "the client closed early");
            request.extend_from_slice(&chunk[..read]);
        }
        stream
            .write_all(b"HTTP/1.1 201 Created\r\nx-counter-connection-id: 42\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}")
            .expect("answer");
        String::from_utf8_lossy(&request).into_owned()
    });
    let mut child = Command::new(BINARY)
        .args(["http", "--method", "POST", "--url"])
        .arg(format!("http://127.0.0.1:{port}/api/counter"))
        .args(["--header", "Content-Type: application/json", "--body", "{}"])
        .args(["--bearer-file", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn http");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"token-from-stdin\n")
        .expect("token");
    let output = child.wait_with_output().expect("http");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON answer");
    assert_eq!(answer["status"], 201);
    assert_eq!(answer["body"], "{\"ok\":true}");
    assert_eq!(answer["headers"]["x-counter-connection-id"], "42");
    let request = server.join().expect("server");
    assert!(
        request.starts_with("POST /api/counter HTTP/1.1"),
        "{request}"
    );
    assert!(
        request
            .to_ascii_lowercase()
            .contains("authorization: bearer token-from-stdin\r\n"),
        "{request}"
    );
    assert!(request
        .to_ascii_lowercase()
        .contains("content-type: application/json"));
    // Nobody listens any more: no answer is a failure, with the reason.
    let output = Command::new(BINARY)
        .args(["http", "--method", "GET", "--timeout-ms", "2000", "--url"])
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .output()
        .expect("http");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("failed to call http://127.0.0.1"),
        "{stderr}"
    );
}

/// Answers one DNS query on `socket` with A records `answers` (in the order given).
fn answer_one_query(socket: &std::net::UdpSocket, answers: &[[u8; 4]]) {
    let mut query = [0_u8; 512];
    let (length, from) = socket.recv_from(&mut query).expect("a query");
    // The question: labels from byte 12 to the root label, then type and class.
    let mut end = 12;
    while query[end] != 0 {
        end += usize::from(query[end]) + 1;
    }
    end += 1 + 4;
    assert!(end <= length, "a whole question");
    let mut response = Vec::new();
    response.extend_from_slice(&query[..2]); // id
    response.extend_from_slice(&[0x81, 0x80, 0, 1]); // a recursive answer, 1 question
    response.extend_from_slice(&u16::try_from(answers.len()).expect("few").to_be_bytes());
    response.extend_from_slice(&[0, 0, 0, 0]);
    response.extend_from_slice(&query[12..end]);
    for address in answers {
        // Name: a pointer to the question's; type A, class IN, TTL 5, 4 bytes.
        response.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
        response.extend_from_slice(address);
    }
    socket.send_to(&response, from).expect("answer");
}

// harness/src/incluster/oneshot.rs: `dns` asks the given server (in the pod: the first
// nameserver of /etc/resolv.conf, the cluster DNS) and prints the A answers sorted.
#[test]
fn dns_prints_the_sorted_a_answers() {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let server = socket.local_addr().expect("address");
    let responder = std::thread::spawn(move || {
        answer_one_query(&socket, &[[10, 96, 0, 30], [10, 96, 0, 4]]);
    });
    let output = Command::new(BINARY)
        .args(["dns", "--name", "mysql.playground.test.", "--server"])
        .arg(server.to_string())
        .output()
        .expect("dns");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    responder.join().expect("responder");
    let answers: Vec<String> = serde_json::from_slice(&output.stdout).expect("a JSON array");
    assert_eq!(
        answers,
        ["10.96.0.30", "10.96.0.4"],
        "sorted as text, as the probe records them"
    );
}
