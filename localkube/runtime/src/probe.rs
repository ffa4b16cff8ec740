//! Running one probe attempt (exec, tcpSocket, httpGet), as kubelet does.
//!
//! tcpSocket and httpGet connect from the root namespace to the pod IP (kubelet probes from
//! the node, so a partition between pods does not fail probes); exec runs the command in the
//! container's namespaces through `localkube-pod-exec`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::exec::ExecSpec;
use super::spec::{ContainerPort, ProbeHandler, ProbePort};

/// Where an attempt ran and with what environment.
#[derive(Debug, Clone)]
pub struct ProbeTarget<'a> {
    /// The pod IP.
    pub pod_ip: Ipv4Addr,
    /// The container's main pid (exec probes join its namespaces).
    pub pid: i32,
    /// The container's ports (named ports).
    pub ports: &'a [ContainerPort],
    /// The container's environment (exec probes).
    pub env: &'a [(String, String)],
    /// The container's `cgroup.procs` files (an exec probe runs in its cgroups).
    pub cgroup_procs: &'a [std::path::PathBuf],
    /// The `localkube-pod-exec` helper.
    pub helper: &'a Path,
    /// A directory for the exec spec file.
    pub scratch: &'a Path,
}

/// Runs one attempt; `true` is success. Every failure (including a timeout) is `false`.
pub async fn probe_once(
    handler: &ProbeHandler,
    target: &ProbeTarget<'_>,
    timeout: Duration,
) -> bool {
    // A timeout is a failure.
    tokio::time::timeout(timeout, attempt(handler, target))
        .await
        .unwrap_or(false)
}

fn resolve_port(port: &ProbePort, ports: &[ContainerPort]) -> Option<u16> {
    match port {
        ProbePort::Number(n) => Some(*n),
        ProbePort::Name(name) => ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port),
    }
}

async fn attempt(handler: &ProbeHandler, target: &ProbeTarget<'_>) -> bool {
    match handler {
        ProbeHandler::TcpSocket { port } => {
            let Some(port) = resolve_port(port, target.ports) else {
                return false;
            };
            TcpStream::connect(SocketAddr::from((target.pod_ip, port)))
                .await
                .is_ok()
        }
        ProbeHandler::HttpGet { path, port, host } => {
            let Some(port) = resolve_port(port, target.ports) else {
                return false;
            };
            let host = host.unwrap_or(target.pod_ip);
            http_get_status(SocketAddr::from((host, port)), path)
                .await
                .is_some_and(|code| (200..400).contains(&code))
        }
        ProbeHandler::Exec { command } => exec_probe(command, target).await,
    }
}

/// Sends `GET path HTTP/1.1` and returns the response's status code.
pub async fn http_get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let path = if path.is_empty() { "/" } else { path };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: kube-probe/1.32\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut buffer = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    while !buffer.contains(&b'\n') && buffer.len() < 4096 {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buffer);
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    parts.next()?.parse().ok()
}

async fn exec_probe(command: &[String], target: &ProbeTarget<'_>) -> bool {
    let spec = ExecSpec {
        netns_path: None,
        target_pid: Some(target.pid),
        hostname: None,
        staging_dir: target.scratch.to_path_buf(),
        mounts: Vec::new(),
        working_dir: None,
        argv: command.to_vec(),
        env: target.env.to_vec(),
        new_session: true,
        remove_after_read: false,
        cgroup_procs: target.cgroup_procs.to_vec(),
        controlling_tty: false,
    };
    let Ok(json) = serde_json::to_vec(&spec) else {
        return false;
    };
    let spec_path = target
        .scratch
        .join(format!("probe-{}.json", std::process::id()));
    let spec_path = spec_path.with_extension(format!("{}.json", rand_suffix()));
    if tokio::fs::write(&spec_path, json).await.is_err() {
        return false;
    }
    let child = tokio::process::Command::new(target.helper)
        .arg(&spec_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let result = match child {
        Ok(mut child) => child.wait().await.is_ok_and(|status| status.success()),
        Err(_) => false,
    };
    let _ = tokio::fs::remove_file(&spec_path).await;
    result
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn http_get_reads_the_status_code() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 512];
            let _ = socket.read(&mut buf).await.unwrap();
            socket
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                .await
                .unwrap();
        });
        assert_eq!(http_get_status(addr, "/readyz").await, Some(503));
        server.await.unwrap();
    }
}
