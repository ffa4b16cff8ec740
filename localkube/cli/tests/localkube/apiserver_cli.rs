//! The `localkube` binary: `up --detach` writes the kubeconfig and state file and serves,
//! `status` reports it, `down` stops the recorded process and removes what it made.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn localkube(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_localkube"))
        .args(args)
        .arg("--state-dir")
        .arg(dir)
        .output()
        .expect("run localkube");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn up_status_down_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, out) = localkube(&["up", "--detach", "--nodes", "iad,pdx"], dir.path());
    assert!(ok, "up: {out}");
    assert!(
        dir.path().join("kubeconfig").exists()
            && dir.path().join("localkube.json").exists()
            && dir.path().join("admin-token").exists()
    );
    let kubectl = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(dir.path().join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .args(["get", "nodes", "-L", "topology.kubernetes.io/zone"])
        .output()
        .expect("kubectl");
    let nodes = String::from_utf8_lossy(&kubectl.stdout).into_owned();
    assert!(
        nodes.contains("iad") && nodes.contains("pdx") && nodes.contains("Ready"),
        "{nodes}"
    );
    let (_, status) = localkube(&["status"], dir.path());
    assert!(status.starts_with("running"), "{status}");
    let state = std::fs::read_to_string(dir.path().join("localkube.json")).expect("state");
    let pid: i32 = serde_json::from_str::<serde_json::Value>(&state).expect("json")["pid"]
        .as_i64()
        .expect("pid") as i32;
    let (ok, out) = localkube(&["down"], dir.path());
    assert!(ok, "down: {out}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err(),
        "the recorded process is gone"
    );
    assert!(!dir.path().join("kubeconfig").exists() && !dir.path().join("localkube.json").exists());
    let (_, status) = localkube(&["status"], dir.path());
    assert!(status.starts_with("stopped"), "{status}");
}
