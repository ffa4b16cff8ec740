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
        let resolv = dir.join("resolv.conf");
        // A nameserver that answers nothing: the DNS probe records empty answers, quickly.
        std::fs::write(&resolv, "nameserver 127.0.0.1\n").expect("resolv.conf");
        let child = Command::new(BINARY)
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
            && matches!(op, Op::Probing { processes, period_ms: 200 } if processes == &["dns".to_owned()])),
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
