//! `pods/exec` (and, through [`super::portforward`], `pods/portforward`) over websockets as kubectl 1.32 speaks it: subprotocols `v5.channel.k8s.io`
//! and `v4.channel.k8s.io`; every binary message starts with its channel (0 stdin,
//! 1 stdout, 2 stderr, 3 error/status, 4 resize); v5 adds `[255, channel]` to close a
//! stream (stdin EOF). The command runs in the container's namespaces through the node
//! runtime; its exit is reported on channel 3 as a Status (`NonZeroExitCode` with an
//! `ExitCode` cause, which kubectl turns into its own exit code). A TTY is not allocated:
//! with `-t` the output is still piped.

use super::agent::lookup;
use crate::apiserver::{meta, ApiError, Cluster};
use axum::body::Body;
use axum::http::{header, request::Parts, StatusCode};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
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
const CLOSE: u8 = 255;

/// Serves `pods/<name>/exec` (and answers `attach` and `portforward`, which localkube does
/// not implement, with 400 BadRequest).
pub async fn serve(
    cluster: Arc<Cluster>,
    ns: &str,
    name: &str,
    sub: &str,
    mut parts: Parts,
) -> Result<Response, ApiError> {
    if sub == "portforward" {
        return portforward(&cluster, ns, name, parts);
    }
    if sub != "exec" {
        return Err(ApiError::bad_request(format!(
            "pods/{sub} is not supported by localkube (pods/exec, pods/portforward and pods/log are)"
        )));
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
    let mut cmd = shared
        .runtime
        .exec_command(&key, &container, &command)
        .map_err(|e| {
            ApiError::bad_request(format!(
                "unable to upgrade connection: container {container} in pod {name}: {e}"
            ))
        })?;
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
        return Err(ApiError::bad_request(
            "exec needs a websocket upgrade with subprotocol v5.channel.k8s.io or v4.channel.k8s.io",
        ));
    };
    let accept = derive_accept_key(key_header.as_bytes());
    let upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| ApiError::bad_request("the connection cannot be upgraded"))?;
    cmd.stdin(if on("stdin") {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .map_err(|e| ApiError::internal(format!("failed to start the exec helper: {e}")))?;
    let v5 = protocol.starts_with("v5");
    let uid = meta::uid_of(&pod).to_string();
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, None).await;
                run(ws, child, v5, command).await;
            }
            Err(e) => tracing::warn!(pod = %key, %uid, error = %e, "exec upgrade failed"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .header(header::SEC_WEBSOCKET_PROTOCOL, protocol)
        .body(Body::empty())
        .map_err(|e| ApiError::internal(format!("failed to build the upgrade response: {e}")))
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

async fn run<S>(
    ws: WebSocketStream<S>,
    mut child: tokio::process::Child,
    v5: bool,
    command: Vec<String>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
    let mut outputs = Vec::new();
    if let Some(o) = child.stdout.take() {
        outputs.push(tokio::spawn(pump(o, STDOUT, tx.clone())));
    }
    if let Some(e) = child.stderr.take() {
        outputs.push(tokio::spawn(pump(e, STDERR, tx.clone())));
    }
    drop(tx);
    let mut stdin = child.stdin.take();
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
                        if w.write_all(rest).await.is_err() {
                            stdin = None;
                        }
                    }
                }
                Some((&CLOSE, [STDIN])) if v5 => stdin = None,
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
