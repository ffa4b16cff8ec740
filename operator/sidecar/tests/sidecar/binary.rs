//! The `bloodraven-sidecar` binary: exit codes and JSON log lines with the fields an operator
//! greps for (site, group, generation, lease).

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

const BINARY: &str = env!("CARGO_BIN_EXE_bloodraven-sidecar");

#[test]
fn invalid_configuration_exits_with_code_2() {
    let output = Command::new(BINARY)
        .args([
            "--group",
            "playground",
            "--site",
            "iad",
            "--sites",
            "iad,pdx,reader",
            "--peer-host",
            "mysql-{group}-{site}",
            "--lease-duration-ms",
            "6000",
            "--tick-ms",
            "5000",
        ])
        .env_remove("RUST_LOG")
        .output()
        .expect("run the binary");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("a third of the lease"), "{stderr}");
}

/// docs/design/history.md#issue-10-case-8: a sidecar without request-signature keys does not
/// start (exit 2, naming the flags) unless told `--insecure-allow-unauthenticated`.
#[test]
fn without_keys_the_sidecar_refuses_to_start() {
    let mut child = Command::new(BINARY)
        .args([
            "--group",
            "playground",
            "--site",
            "iad",
            "--sites",
            "iad,pdx,reader",
            "--peer-host",
            "mysql-{group}-{site}",
            "--listen",
            "127.0.0.1:0",
        ])
        .env_remove("RUST_LOG")
        .env_remove("BLOODRAVEN_OPERATOR_KEY_FILE")
        .env_remove("BLOODRAVEN_PEER_KEY_FILE")
        .env_remove("BLOODRAVEN_INSECURE_ALLOW_UNAUTHENTICATED")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the binary");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the sidecar started and served without request-signature keys");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--operator-key-file")
            && stderr.contains("--insecure-allow-unauthenticated"),
        "{stderr}"
    );
}

#[test]
fn startup_logs_json_with_site_group_and_lease_fields() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let closed_mysql = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut child = Command::new(BINARY)
        .args([
            "--group",
            "playground",
            "--site",
            "reader",
            "--sites",
            "iad,pdx,reader",
        ])
        .args(["--peer-srv", "_sidecar._tcp.mysql-{group}-{site}.invalid."])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--dns-server", "127.0.0.1:9"])
        .arg("--insecure-allow-unauthenticated")
        .args([
            "--mysql-port",
            &closed_mysql.to_string(),
            "--mysql-timeout-ms",
            "300",
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the binary");
    let Some(stderr) = child.stderr.take() else {
        panic!("stderr is piped");
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut found = None;
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&line) else {
            panic!("log line is not JSON: {line}");
        };
        if json["site"] == "reader"
            && json["group"] == "playground"
            && json.get("lease_duration_ms").is_some()
        {
            found = Some(json);
            break;
        }
        if Instant::now() > deadline {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let json = found.expect("a startup log line with site, group and lease fields");
    assert_eq!(json["level"], "INFO");
    assert_eq!(json["lease_duration_ms"], 6000);
}
