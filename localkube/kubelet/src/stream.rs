//! `pods/exec`, `pods/attach` (and, through [`super::portforward`], `pods/portforward`) over websockets as kubectl 1.32 speaks it: subprotocols `v5.channel.k8s.io`
//! and `v4.channel.k8s.io`; every binary message starts with its channel (0 stdin,
//! 1 stdout, 2 stderr, 3 error/status, 4 resize); v5 adds `[255, channel]` to close a
//! stream (stdin EOF). The command runs in the container's namespaces through the node
//! runtime; its exit is reported on channel 3 as a Status (`NonZeroExitCode` with an
//! `ExitCode` cause, which kubectl turns into its own exit code). With `tty=true`
//! (`kubectl exec -it`) the command gets a pseudo-terminal as stdin, stdout and stderr and
//! as its controlling terminal; its output comes on channel 1 only (stderr is the same
//! terminal, as on Kubernetes), and channel 4 messages (`{"Width":W,"Height":H}`) set the
//! terminal's window size (the program gets SIGWINCH). Closing stdin of a TTY exec does not
//! hang up the terminal.

use super::plugin::lookup;
use axum::body::Body;
use axum::http::{header, request::Parts, StatusCode};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use localkube_apiserver::plugin::{StreamRequest, StreamSubresource};
use localkube_apiserver::{meta, ApiError, Cluster};
use serde_json::{json, Value};
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Subprotocols served, preferred first.
pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;
/// Largest resize message read (a bound on a client's JSON).
const RESIZE_BYTES_MAX: usize = 256;

/// Serves `pods/<name>/exec`, `attach` and `portforward`.
pub async fn serve(request: StreamRequest) -> Result<Response, ApiError> {
    let StreamRequest {
        cluster,
        namespace,
        name,
        subresource,
        mut parts,
    } = request;
    let (ns, name) = (namespace.as_str(), name.as_str());
    match subresource {
        StreamSubresource::PortForward => return portforward(&cluster, ns, name, parts),
        StreamSubresource::Attach => return attach(&cluster, ns, name, parts),
        StreamSubresource::Exec => {}
    }
    let pod = cluster
        .store
        .get("/pods", ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let on = |k: &str| matches!(get(k), Some("true") | Some("1"));
    let command: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return Err(ApiError::bad_request("you must specify at least 1 command"));
    }
    let container = match get("container").filter(|c| !c.is_empty()) {
        Some(c) => c.to_string(),
        None => pod
            .pointer("/spec/containers/0/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    let shared = lookup(&cluster.state_dir)
        .ok_or_else(|| ApiError::bad_request("no node agent runs pods in this cluster"))?;
    let key = format!("{ns}/{name}");
    let tty = on("tty");
    let mut cmd = shared
        .runtime
        .exec_command(&key, &container, &command, tty)
        .map_err(|e| {
            ApiError::bad_request(format!(
                "unable to upgrade connection: container {container} in pod {name}: {e}"
            ))
        })?;
    let (protocol, accept, upgrade) = channel_upgrade(&mut parts, "exec")?;
    let terminal = if tty {
        let (master, slave) = open_pty().map_err(|e| {
            ApiError::internal(format!("failed to allocate a pseudo-terminal: {e}"))
        })?;
        let copy = |fd: &OwnedFd| {
            fd.try_clone().map_err(|e| {
                ApiError::internal(format!("failed to allocate a pseudo-terminal: {e}"))
            })
        };
        cmd.stdin(Stdio::from(copy(&slave)?))
            .stdout(Stdio::from(copy(&slave)?))
            .stderr(Stdio::from(slave));
        Some(master)
    } else {
        cmd.stdin(if on("stdin") {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        None
    };
    let child = cmd
        .spawn()
        .map_err(|e| ApiError::internal(format!("failed to start the exec helper: {e}")))?;
    // The command holds this process's copies of the terminal's slave: without them the
    // master reads end (EIO) once the exec'd program and its children are gone.
    drop(cmd);
    let v5 = protocol.starts_with("v5");
    let uid = meta::uid_of(&pod).to_string();
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, None).await;
                run(ws, child, terminal, v5, command).await;
            }
            Err(e) => tracing::warn!(pod = %key, %uid, error = %e, "exec upgrade failed"),
        }
    });
    switching_protocols(accept, protocol)
}

/// The websocket upgrade of an exec or attach request: the chosen subprotocol, the
/// `Sec-WebSocket-Accept` value and the connection to take over.
fn channel_upgrade(
    parts: &mut Parts,
    what: &str,
) -> Result<(&'static str, String, hyper::upgrade::OnUpgrade), ApiError> {
    let protocol = parts
        .headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(str::trim))
        .find_map(|p| PROTOCOLS.iter().find(|s| **s == p).copied());
    let (Some(protocol), Some(key_header)) =
        (protocol, parts.headers.get(header::SEC_WEBSOCKET_KEY))
    else {
        return Err(ApiError::bad_request(format!(
            "{what} needs a websocket upgrade with subprotocol v5.channel.k8s.io or v4.channel.k8s.io"
        )));
    };
    let accept = derive_accept_key(key_header.as_bytes());
    let upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ApiError::bad_request("the connection cannot be upgraded"))?;
    Ok((protocol, accept, upgrade))
}

fn switching_protocols(accept: String, protocol: &str) -> Result<Response, ApiError> {
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .header(header::SEC_WEBSOCKET_PROTOCOL, protocol)
        .body(Body::empty())
        .map_err(|e| ApiError::internal(format!("failed to build the upgrade response: {e}")))
}

/// The streams an attach session asked for.
#[derive(Debug, Clone, Copy)]
struct Streams {
    stdin: bool,
    stdout: bool,
    stderr: bool,
}

/// `pods/attach` (`kubectl attach`): the running container's output from now on, on
/// channels 1 and 2, and with `stdin=true` what the client sends into the container's stdin
/// when it has `stdin: true` (without it the client's stdin goes nowhere, as on a real
/// node). With `stdinOnce` the container's stdin is closed when the session's stdin ends.
/// Output is passed on line by line (as it is logged); the session ends with a Success
/// status once the container has exited. Containers here never have a TTY, so `tty=true`
/// is served as without one (kubectl then warns that the container did not allocate one).
fn attach(cluster: &Cluster, ns: &str, name: &str, mut parts: Parts) -> Result<Response, ApiError> {
    let pod = cluster
        .store
        .get("/pods", ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let on = |k: &str| matches!(get(k), Some("true") | Some("1"));
    let streams = Streams {
        stdin: on("stdin"),
        stdout: on("stdout"),
        stderr: on("stderr"),
    };
    if !(streams.stdin || streams.stdout || streams.stderr) {
        return Err(ApiError::bad_request(
            "you must specify at least one of stdin, stdout, stderr",
        ));
    }
    let container = match get("container").filter(|c| !c.is_empty()) {
        Some(c) => c.to_string(),
        None => pod
            .pointer("/spec/containers/0/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    let shared = lookup(&cluster.state_dir)
        .ok_or_else(|| ApiError::bad_request("no node agent runs pods in this cluster"))?;
    let key = format!("{ns}/{name}");
    let attached = shared.runtime.attach(&key, &container).map_err(|e| {
        ApiError::bad_request(format!(
            "unable to upgrade connection: container {container} in pod {name}: {e}"
        ))
    })?;
    let (protocol, accept, upgrade) = channel_upgrade(&mut parts, "attach")?;
    let v5 = protocol.starts_with("v5");
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, None).await;
                tracing::debug!(pod = %key, %container, "attach session");
                run_attach(ws, attached, streams, v5).await;
            }
            Err(e) => tracing::warn!(pod = %key, error = %e, "attach upgrade failed"),
        }
    });
    switching_protocols(accept, protocol)
}

async fn run_attach<S>(
    ws: WebSocketStream<S>,
    mut attached: localkube_runtime::Attached,
    streams: Streams,
    v5: bool,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio::sync::broadcast::error::RecvError;
    let (mut sink, mut source) = ws.split();
    let stdin_once = attached.stdin_once;
    let mut stdin = attached.stdin.take().filter(|_| streams.stdin);
    let mut input = tokio::spawn(async move {
        // The session's stdin ends with a v5 close, or with the connection.
        let end_stdin = |pipe: Option<
            Arc<tokio::sync::Mutex<Option<tokio::process::ChildStdin>>>,
        >| async move {
            if let (true, Some(pipe)) = (stdin_once, pipe) {
                pipe.lock().await.take();
            }
        };
        while let Some(Ok(msg)) = source.next().await {
            let data = match msg {
                Message::Binary(b) => b.to_vec(),
                Message::Close(_) => break,
                _ => continue,
            };
            match data.split_first() {
                Some((&STDIN, rest)) => {
                    if let Some(pipe) = &stdin {
                        let mut w = pipe.lock().await;
                        if let Some(writer) = w.as_mut() {
                            if writer.write_all(rest).await.is_err() {
                                w.take();
                            }
                        }
                    }
                }
                Some((&CLOSE, [STDIN])) if v5 => end_stdin(stdin.take()).await,
                _ => {}
            }
        }
        end_stdin(stdin.take()).await;
    });
    let mut connected = true;
    loop {
        let received = tokio::select! {
            r = attached.output.recv() => r,
            _ = &mut input => { connected = false; break; }
        };
        let (channel, bytes) = match received {
            Ok((localkube_runtime::cri_logs::Stream::Stdout, b)) if streams.stdout => (STDOUT, b),
            Ok((localkube_runtime::cri_logs::Stream::Stderr, b)) if streams.stderr => (STDERR, b),
            Ok(_) => continue,
            Err(RecvError::Lagged(skipped)) => {
                tracing::debug!(skipped, "attach session fell behind the container's output");
                continue;
            }
            Err(RecvError::Closed) => break,
        };
        let mut frame = Vec::with_capacity(bytes.len() + 1);
        frame.push(channel);
        frame.extend(bytes);
        if sink.send(Message::Binary(frame.into())).await.is_err() {
            connected = false;
            break;
        }
    }
    if connected {
        let mut status = vec![ERROR];
        status.extend(exit_status(0, &[]).to_string().into_bytes());
        let _ = sink.send(Message::Binary(status.into())).await;
        let close = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = sink.send(Message::Close(Some(close))).await;
        input.abort();
    }
}

/// `pods/portforward`: the websocket tunnel of a SPDY session ([`super::portforward`]).
fn portforward(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    mut parts: Parts,
) -> Result<Response, ApiError> {
    let pod = cluster
        .store
        .get("/pods", ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let ip: std::net::Ipv4Addr = meta::str_at(&pod, "/status/podIP")
        .parse()
        .map_err(|_| ApiError::bad_request(format!("pod {name} has no IP yet")))?;
    let offered = parts
        .headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(str::trim))
        .any(|p| p == super::portforward::PROTOCOL);
    let (true, Some(key_header)) = (offered, parts.headers.get(header::SEC_WEBSOCKET_KEY)) else {
        return Err(ApiError::bad_request(format!(
            "port-forward needs a websocket upgrade with subprotocol {}",
            super::portforward::PROTOCOL
        )));
    };
    let accept = derive_accept_key(key_header.as_bytes());
    let upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ApiError::bad_request("the connection cannot be upgraded"))?;
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, None).await;
                super::portforward::run(ws, ip).await;
            }
            Err(e) => tracing::warn!(error = %e, "port-forward upgrade failed"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .header(header::SEC_WEBSOCKET_PROTOCOL, super::portforward::PROTOCOL)
        .body(Body::empty())
        .map_err(|e| ApiError::internal(format!("failed to build the upgrade response: {e}")))
}

async fn pump(mut r: impl AsyncRead + Unpin, channel: u8, tx: mpsc::Sender<Vec<u8>>) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match r.read(&mut buf[1..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                buf[0] = channel;
                if tx.send(buf[..=n].to_vec()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The Status kubectl expects on the error channel for an exit code.
pub fn exit_status(code: i32, command: &[String]) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({"metadata": {}, "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command {command:?}, exit code {code}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
}

/// A pseudo-terminal: (master, slave), both close-on-exec and neither this process's
/// controlling terminal.
fn open_pty() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok((master, slave))
}

/// A terminal size as client-go and kube-rs send it on channel 4.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TerminalSize {
    width: u16,
    height: u16,
}

/// Sets the window size of a TTY exec from one channel 4 message; a malformed one is
/// logged and skipped, as the real kubelet skips it.
fn resize(master: &OwnedFd, message: &[u8]) {
    let message = &message[..message.len().min(RESIZE_BYTES_MAX)];
    match serde_json::from_slice::<TerminalSize>(message) {
        Ok(size) => {
            let winsize = rustix::termios::Winsize {
                ws_row: size.height,
                ws_col: size.width,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            if let Err(e) = rustix::termios::tcsetwinsize(master, winsize) {
                tracing::debug!(error = %e, "could not resize the exec terminal");
            }
        }
        Err(e) => tracing::debug!(error = %e, "malformed resize message"),
    }
}

fn file_of(fd: &OwnedFd) -> Option<tokio::fs::File> {
    fd.try_clone()
        .ok()
        .map(|fd| tokio::fs::File::from_std(std::fs::File::from(fd)))
}

async fn run<S>(
    ws: WebSocketStream<S>,
    mut child: tokio::process::Child,
    terminal: Option<OwnedFd>,
    v5: bool,
    command: Vec<String>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
    let mut outputs = Vec::new();
    let mut stdin: Option<Box<dyn tokio::io::AsyncWrite + Unpin + Send>> = None;
    if let Some(master) = &terminal {
        if let Some(r) = file_of(master) {
            outputs.push(tokio::spawn(pump(r, STDOUT, tx.clone())));
        }
        stdin = file_of(master).map(|w| Box::new(w) as _);
    }
    if let Some(o) = child.stdout.take() {
        outputs.push(tokio::spawn(pump(o, STDOUT, tx.clone())));
    }
    if let Some(e) = child.stderr.take() {
        outputs.push(tokio::spawn(pump(e, STDERR, tx.clone())));
    }
    drop(tx);
    if let Some(w) = child.stdin.take() {
        stdin = Some(Box::new(w));
    }
    let input = tokio::spawn(async move {
        while let Some(Ok(msg)) = source.next().await {
            let data = match msg {
                Message::Binary(b) => b.to_vec(),
                Message::Close(_) => break,
                _ => continue,
            };
            match data.split_first() {
                Some((&STDIN, rest)) => {
                    if let Some(w) = stdin.as_mut() {
                        if w.write_all(rest).await.is_err() || w.flush().await.is_err() {
                            stdin = None;
                        }
                    }
                }
                Some((&RESIZE, rest)) => {
                    if let Some(master) = &terminal {
                        resize(master, rest);
                    }
                }
                // A terminal has no half-close: its stdin stays open.
                Some((&CLOSE, [STDIN])) if v5 && terminal.is_none() => stdin = None,
                _ => {}
            }
        }
    });
    let forward = async {
        while let Some(frame) = rx.recv().await {
            if sink.send(Message::Binary(frame.into())).await.is_err() {
                return false;
            }
        }
        true
    };
    let ok = forward.await;
    let code = match child.wait().await {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        }
        Err(_) => 1,
    };
    for o in outputs {
        let _ = o.await;
    }
    if ok {
        let mut status = vec![ERROR];
        status.extend(exit_status(code, &command).to_string().into_bytes());
        let _ = sink.send(Message::Binary(status.into())).await;
        // client-go takes only a normal closure (1000) as the end of its streams.
        let close = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = sink.send(Message::Close(Some(close))).await;
    }
    input.abort();
}
