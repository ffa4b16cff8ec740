//! The control protocol of the workload daemon: one JSON request a connection on
//! `DIR/control.sock`, one JSON line back, `{"ok": <result>}` or `{"error": "<reason>"}`.
//! `bloodraven-workload ctl '<request>'` sends one ([`call`]) and prints the result.
//!
//! | request | result |
//! |---|---|
//! | `{"start": {"run", "primary", "replicas", "dnsHostname", "dnsServer"?, "password", "group"?, "namespace"?, "sites"?}}` | `{"run", "log"}` |
//! | `{"stop": {"run"}}` | `{"run", "events", "lastSeq", "unwritten"}` once drained |
//! | `{"status": {"run"}}` | `{"run", "active"}` |
//! | `{"openConnection": {"name", "host", "password"?}}` | `{"opened"}` |
//! | `{"sendWrite": {"name", "id"?}}` | `{"sent", "id"}` |
//! | `{"connection": {"name"}}` | `{"sentWrite"}` or `{"writeError", "site"}` |
//! | `{"closeConnections": {}}` | `{"closed"}` |
//! | `{"ping": {}}` | `{"pong": true}` |
//!
//! `start`'s `group` turns the site probes on ([`crate::live::site_probes`]): every ~100 ms
//! each of `sites` (default: all three) is probed by pod IP, the pods found through the API in
//! `namespace` (default: the pod's own). Without `group` (an older caller) there are none.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::scenario::model::Site;

/// The longest request or response line.
pub const MESSAGE_BYTES_MAX: u64 = 1 << 20;
/// How long `ctl` waits for the daemon's answer: a stop drains in-flight operations, each
/// bounded by [`crate::live::workload::STATEMENT_TIMEOUT`] for connecting and for its
/// statement.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A request to the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Request {
    /// Starts a run: today's writers, readers and DNS probe
    /// ([`crate::live::workload`]), recording into `runs/<run>.jsonl`.
    Start(StartRun),
    /// Stops the run and waits until every in-flight operation completed and was written.
    Stop(RunRef),
    /// Whether the run is active (started and not yet ended).
    Status(RunRef),
    /// Opens a held connection as the workload user.
    OpenConnection(OpenConnection),
    /// Sends one write on a held connection and leaves it in flight.
    SendWrite(SendWrite),
    /// What a held connection sees now (or what its sent write was told).
    Connection(ConnectionName),
    /// Closes every held connection and forgets sent writes.
    CloseConnections(Empty),
    /// Answers `{"pong": true}` (a readiness probe).
    Ping(Empty),
}

/// `start`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRun {
    /// The run's id (names its log).
    pub run: String,
    /// `-primary`'s host (a Service DNS name, resolved by the pod; `host:port` allowed).
    pub primary: String,
    /// `-replicas`' host.
    pub replicas: String,
    /// The group's DNS hostname, probed through the pod's resolver (empty: no DNS probe).
    #[serde(default)]
    pub dns_hostname: String,
    /// The DNS server the probe asks (`ip:port`), instead of the pod's resolver: the
    /// in-cluster stand-in for external-dns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_server: Option<String>,
    /// The workload user's password.
    pub password: String,
    /// The group whose sites the site probes dial by pod IP (`None`: no site probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The namespace of the group's pods (`None`: the workload pod's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The sites to probe (empty: every site).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<Site>,
}

/// A run's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRef {
    /// The run.
    pub run: String,
}

/// `openConnection`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenConnection {
    /// The connection's name (a scenario's `open-connection` fault names it).
    pub name: String,
    /// Where (`host` or `host:port`).
    pub host: String,
    /// The workload user's password; default: the last `start`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// `sendWrite`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendWrite {
    /// The held connection.
    pub name: String,
    /// The row id of the held write (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
}

/// A held connection's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionName {
    /// The name.
    pub name: String,
}

/// No arguments (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// The daemon's answer on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Response {
    /// The request's result.
    Ok(Value),
    /// Why it failed ("failed to ..." completes it).
    Error(String),
}

/// Parses a request as `ctl` takes it (one JSON object with one key).
pub fn parse_request(text: &str) -> Result<Request, String> {
    serde_json::from_str(text).map_err(|e| {
        format!(
            "{e}; a request is one of {{\"start\": {{\"run\", \"primary\", \"replicas\", \"dnsHostname\", \"password\", \"group\"?, \"namespace\"?, \"sites\"?}}}}, {{\"stop\": {{\"run\"}}}}, {{\"status\": {{\"run\"}}}}, {{\"openConnection\": {{\"name\", \"host\"}}}}, {{\"sendWrite\": {{\"name\", \"id\"?}}}}, {{\"connection\": {{\"name\"}}}}, {{\"closeConnections\": {{}}}}, {{\"ping\": {{}}}}"
        )
    })
}

fn control_error(action: &str, reason: impl ToString) -> Error {
    Error::Workload {
        action: action.to_owned(),
        reason: reason.to_string(),
    }
}

/// Sends `request` to the daemon listening on `socket` and returns its result (an error with
/// the daemon's reason when it answered `error`), waiting at most `timeout`.
pub fn call(socket: &Path, request: &Request, timeout: Duration) -> Result<Value> {
    let action = format!("ask the workload daemon at {}", socket.display());
    let mut stream = std::os::unix::net::UnixStream::connect(socket).map_err(|e| {
        control_error(
            &action,
            format!("connect: {e} (is `bloodraven-workload serve` running?)"),
        )
    })?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| control_error(&action, e))?;
    let mut line = serde_json::to_string(request).map_err(|source| Error::Json {
        what: "workload request",
        source,
    })?;
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .map_err(|e| control_error(&action, format!("send the request: {e}")))?;
    let mut answer = String::new();
    BufReader::new(stream.take(MESSAGE_BYTES_MAX))
        .read_line(&mut answer)
        .map_err(|e| control_error(&action, format!("read the answer: {e}")))?;
    if answer.trim().is_empty() {
        return Err(control_error(
            &action,
            "the daemon closed the connection without answering",
        ));
    }
    match serde_json::from_str::<Response>(answer.trim()) {
        Ok(Response::Ok(value)) => Ok(value),
        Ok(Response::Error(reason)) => Err(control_error(&request_action(request), reason)),
        Err(e) => Err(control_error(
            &action,
            format!("unreadable answer ({e}): {:.200}", answer.trim()),
        )),
    }
}

/// What a request does, as an error's action ("stop run r1").
pub fn request_action(request: &Request) -> String {
    match request {
        Request::Start(start) => format!("start run {}", start.run),
        Request::Stop(run) => format!("stop run {}", run.run),
        Request::Status(run) => format!("read the status of run {}", run.run),
        Request::OpenConnection(open) => {
            format!("open connection {} to {}", open.name, open.host)
        }
        Request::SendWrite(send) => format!("send a write on connection {}", send.name),
        Request::Connection(name) => format!("observe connection {}", name.name),
        Request::CloseConnections(_) => "close the held connections".to_owned(),
        Request::Ping(_) => "ping the workload daemon".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The request shapes `ctl` takes (module docs): camelCase keys, one key per request,
    // unknown fields refused with the list of requests.
    #[test]
    fn requests_parse_in_their_documented_shapes() {
        assert_eq!(
            parse_request(
                r#"{"start": {"run": "r1", "primary": "p.ns.svc.cluster.local", "replicas": "r.ns.svc.cluster.local", "dnsHostname": "db.example", "password": "pw"}}"#
            ),
            Ok(Request::Start(StartRun {
                run: "r1".to_owned(),
                primary: "p.ns.svc.cluster.local".to_owned(),
                replicas: "r.ns.svc.cluster.local".to_owned(),
                dns_hostname: "db.example".to_owned(),
                dns_server: None,
                password: "pw".to_owned(),
                group: None,
                namespace: None,
                sites: Vec::new(),
            }))
        );
        // The site probes' fields, optional so older callers keep working.
        assert_eq!(
            parse_request(
                r#"{"start": {"run": "r2", "primary": "p", "replicas": "r", "password": "pw", "group": "playground", "namespace": "bloodraven-playground", "sites": ["iad", "pdx", "reader"]}}"#
            ),
            Ok(Request::Start(StartRun {
                run: "r2".to_owned(),
                primary: "p".to_owned(),
                replicas: "r".to_owned(),
                dns_hostname: String::new(),
                dns_server: None,
                password: "pw".to_owned(),
                group: Some("playground".to_owned()),
                namespace: Some("bloodraven-playground".to_owned()),
                sites: Site::ALL.to_vec(),
            }))
        );
        assert_eq!(
            parse_request(r#"{"sendWrite": {"name": "held"}}"#),
            Ok(Request::SendWrite(SendWrite {
                name: "held".to_owned(),
                id: None
            }))
        );
        assert_eq!(
            parse_request(r#"{"closeConnections": {}}"#),
            Ok(Request::CloseConnections(Empty {}))
        );
        let unknown =
            parse_request(r#"{"stop": {"run": "r1", "force": true}}"#).expect_err("unknown field");
        assert!(
            unknown.contains("force") && unknown.contains("openConnection"),
            "{unknown}"
        );
        assert!(parse_request("[]").is_err());
        let wire =
            serde_json::to_string(&Response::Ok(serde_json::json!({"events": 3}))).expect("json");
        assert_eq!(wire, r#"{"ok":{"events":3}}"#);
    }
}
