//! The fault control socket: `<state_dir>/kubelet.sock`, a Unix socket taking one JSON
//! request line per connection and answering one JSON line (`{"id": N}` of the fault
//! record, or `{"error": "..."}`). `localkube fault ...` ([`FaultCommand`]) is its client;
//! every fault is recorded with start and end time in the node side's fault log
//! (`<state_dir>/faults.jsonl`).
//!
//! Requests: `{"fault":"kill"|"freeze","pod":"ns/name","container":"c"?}`,
//! `{"fault":"thaw"|"start-node"|"heal"|"start-external-dns","id":N?}` (without `id`:
//! every active fault of the matching kind), `{"fault":"stop-node","node":"n"}`,
//! `{"fault":"partition","sideA":["n"],"sideB":["m"]}`, `{"fault":"stop-external-dns"}`,
//! `{"fault":"log"}` (answer `{"log": [records]}`),
//! `{"fault":"clock-offset","pod":"ns/name","offset":"+20s"}` (the wall clock of the pod's
//! containers that `localkube up --clock-faults` names, stepped to that offset from the real
//! clock; `"offset":"reset"` ends the pod's clock fault, which sets the offset back).
//!
//! `heal` with an `id` ends that fault whatever its kind; without one it heals every
//! partition. Answers of the ending requests are `{"ended": [ids]}`.
//!
//! Kill with keep-down: `{"fault":"kill","pod":"ns/name","container":"c"?,"keepDown":true}`
//! SIGKILLs the container and does not restart it until the fault ends; meanwhile its
//! status is `waiting` (reason CrashLoopBackOff, the killed instance in `lastState`) and the
//! pod is not Ready, as a crashlooping container held back. The fault stays active (no
//! `endedAt`) until `{"fault":"heal","id":N}` or `{"fault":"revive","pod":"ns/name"?,
//! "container":"c"?,"id":N?}` (every kept-down kill of that pod/container, or all of them
//! without `pod`) ends it; the container then restarts at once (restartCount + 1).

use super::error::{Error, Result};
use super::plugin::Shared;
use clap::Subcommand;
use localkube_runtime::faults::FaultKind;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The socket's file name in the state dir.
pub const SOCKET_FILE: &str = "kubelet.sock";

/// The control socket of a state dir.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET_FILE)
}

/// `localkube fault <...>`: faults against a running cluster.
#[derive(Debug, Clone, Subcommand)]
pub enum FaultCommand {
    /// SIGKILL a container's processes (`namespace/pod` or `pod` in `default`).
    Kill {
        /// The pod.
        pod: String,
        /// The container (default: the first).
        #[arg(short, long)]
        container: Option<String>,
        /// Keep the container down (no restart) until `heal ID` or `revive`.
        #[arg(long)]
        keep_down: bool,
    },
    /// Let containers kept down by `kill --keep-down` restart: by fault id, of one pod (and
    /// container), or all of them.
    Revive {
        /// The pod (default: every kept-down container).
        pod: Option<String>,
        /// The container (default: every kept-down container of the pod).
        #[arg(short, long)]
        container: Option<String>,
        /// Fault id.
        #[arg(long)]
        id: Option<u64>,
    },
    /// SIGSTOP a container's processes until thawed.
    Freeze {
        /// The pod.
        pod: String,
        /// The container (default: the first).
        #[arg(short, long)]
        container: Option<String>,
    },
    /// SIGCONT a frozen container (fault id, or every frozen one).
    Thaw {
        /// Fault id.
        id: Option<u64>,
    },
    /// Stop a node: all its containers are killed and stay down.
    StopNode {
        /// The node.
        node: String,
    },
    /// Start a stopped node.
    StartNode {
        /// The node.
        node: String,
    },
    /// Partition two sets of nodes: `partition iad pdx,reader`.
    Partition {
        /// One side (comma separated nodes).
        side_a: String,
        /// The other side (comma separated nodes).
        side_b: String,
    },
    /// End a fault by id (any kind: a partition, a kept-down kill, ...), or without an id
    /// heal every partition.
    Heal {
        /// Fault id.
        id: Option<u64>,
    },
    /// Stop the external-dns stand-in (DNSEndpoint changes are no longer published).
    StopExternalDns,
    /// Start the external-dns stand-in again.
    StartExternalDns,
    /// Step the wall clock of a pod's opted-in containers (`localkube up --clock-faults
    /// mysql`): `clock-offset ns/pod +20s`, `-20s`, `+1.5s`; `reset` ends it.
    ClockOffset {
        /// The pod.
        pod: String,
        /// The offset from the real clock (`+20s`, `-300ms`), or `reset`.
        #[arg(allow_hyphen_values = true)]
        offset: String,
    },
    /// Print the fault log.
    Log,
}

impl FaultCommand {
    /// The request line of this command.
    pub fn request(&self) -> Value {
        let pod = |p: &str| {
            if p.contains('/') {
                p.to_string()
            } else {
                format!("default/{p}")
            }
        };
        match self {
            FaultCommand::Kill {
                pod: p,
                container,
                keep_down,
            } => {
                json!({"fault": "kill", "pod": pod(p), "container": container, "keepDown": keep_down})
            }
            FaultCommand::Revive {
                pod: p,
                container,
                id,
            } => {
                json!({"fault": "revive", "pod": p.as_deref().map(pod), "container": container, "id": id})
            }
            FaultCommand::Freeze { pod: p, container } => {
                json!({"fault": "freeze", "pod": pod(p), "container": container})
            }
            FaultCommand::Thaw { id } => json!({"fault": "thaw", "id": id}),
            FaultCommand::StopNode { node } => json!({"fault": "stop-node", "node": node}),
            FaultCommand::StartNode { node } => json!({"fault": "start-node", "node": node}),
            FaultCommand::Partition { side_a, side_b } => {
                let split = |s: &str| -> Vec<String> {
                    s.split(',')
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                        .collect()
                };
                json!({"fault": "partition", "sideA": split(side_a), "sideB": split(side_b)})
            }
            FaultCommand::Heal { id } => json!({"fault": "heal", "id": id}),
            FaultCommand::StopExternalDns => json!({"fault": "stop-external-dns"}),
            FaultCommand::StartExternalDns => json!({"fault": "start-external-dns"}),
            FaultCommand::ClockOffset { pod: p, offset } => {
                json!({"fault": "clock-offset", "pod": pod(p), "offset": offset})
            }
            FaultCommand::Log => json!({"fault": "log"}),
        }
    }
}

/// Sends one request to the cluster of `state_dir` and returns its answer.
pub async fn request(state_dir: &Path, req: &Value) -> Result<Value> {
    let path = socket_path(state_dir);
    let mut s = UnixStream::connect(&path).await.map_err(Error::io(format!(
        "connect to {} (is localkube up?)",
        path.display()
    )))?;
    let mut line = req.to_string();
    line.push('\n');
    s.write_all(line.as_bytes())
        .await
        .map_err(Error::io("send the control request"))?;
    let mut answer = String::new();
    BufReader::new(s)
        .read_line(&mut answer)
        .await
        .map_err(Error::io("read the control answer"))?;
    let v: Value =
        serde_json::from_str(&answer).map_err(|e| Error::Control(format!("answer: {e}")))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(Error::Control(e.to_string()));
    }
    Ok(v)
}

/// Runs `localkube fault ...`: prints the answer.
pub async fn run_cli(state_dir: &Path, cmd: &FaultCommand) -> Result<()> {
    let answer = request(state_dir, &cmd.request()).await?;
    match answer.get("log") {
        Some(Value::Array(lines)) => {
            for l in lines {
                println!("{l}");
            }
        }
        _ => println!("{answer}"),
    }
    Ok(())
}

/// Serves the control socket until `shutdown`.
pub fn serve(shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) -> Result<JoinHandle<()>> {
    let path = socket_path(&shared.cluster.state_dir);
    let _ = std::fs::remove_file(&path);
    let listener =
        UnixListener::bind(&path).map_err(Error::io(format!("listen on {}", path.display())))?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                acc = listener.accept() => {
                    let Ok((s, _)) = acc else { continue };
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let (r, mut w) = s.into_split();
                        let mut line = String::new();
                        if BufReader::new(r).read_line(&mut line).await.is_err() {
                            return;
                        }
                        let answer = match serde_json::from_str::<Value>(&line) {
                            Ok(req) => match handle(&shared, &req).await {
                                Ok(v) => v,
                                Err(e) => json!({"error": e.to_string()}),
                            },
                            Err(e) => json!({"error": format!("parse the control request: {e}")}),
                        };
                        let _ = w.write_all(format!("{answer}\n").as_bytes()).await;
                    });
                }
                _ = shutdown.changed() => break,
            }
        }
    }))
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn names(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Carries out one control request.
pub async fn handle(shared: &Shared, req: &Value) -> Result<Value> {
    let agent = shared.agent.read().await;
    let agent = agent
        .as_ref()
        .ok_or_else(|| Error::Control("the node agent is stopped".into()))?;
    let faults = &agent.faults;
    let container = |pod: &str| -> Result<String> {
        match req.get("container").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => Ok(c.to_string()),
            _ => shared
                .runtime
                .pod_status(pod)?
                .container_statuses
                .first()
                .map(|c| c.name.clone())
                .ok_or_else(|| Error::Control(format!("pod {pod} has no containers"))),
        }
    };
    // Ends the given fault, or every active one matching `kind`.
    let end = |kind: &dyn Fn(&FaultKind) -> bool| -> Result<Value> {
        let ids: Vec<u64> = match req.get("id").and_then(Value::as_u64) {
            Some(id) => vec![id],
            None => faults
                .log()
                .iter()
                .filter(|r| r.ended_at.is_none() && kind(&r.fault))
                .map(|r| r.id)
                .collect(),
        };
        for id in &ids {
            faults.end(*id)?;
        }
        Ok(json!({"ended": ids}))
    };
    let id = match s(req, "fault") {
        "kill" => {
            let pod = s(req, "pod");
            let c = container(pod)?;
            if req
                .get("keepDown")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            {
                faults.kill_container_kept_down(pod, &c)?
            } else {
                faults.kill_container(pod, &c)?
            }
        }
        "revive" => {
            let (pod, c) = (s(req, "pod"), s(req, "container"));
            let kept_down = |k: &FaultKind| {
                matches!(k, FaultKind::KillContainer { pod: p, container: n, keep_down: true, .. }
                    if (pod.is_empty() || p == pod) && (c.is_empty() || n == c))
            };
            if let Some(id) = req.get("id").and_then(Value::as_u64) {
                let record = faults.log().into_iter().find(|r| r.id == id);
                if !record.is_some_and(|r| kept_down(&r.fault)) {
                    return Err(Error::Control(format!(
                        "revive: fault {id} is not a kept-down kill{}",
                        if pod.is_empty() {
                            String::new()
                        } else {
                            format!(" of {pod}")
                        }
                    )));
                }
            }
            return end(&kept_down);
        }
        "freeze" => {
            let pod = s(req, "pod");
            faults.freeze_container(pod, &container(pod)?)?
        }
        "thaw" => return end(&|k| matches!(k, FaultKind::FreezeContainer { .. })),
        "stop-node" => {
            let node = s(req, "node").to_string();
            let id = faults.stop_node(&node)?;
            shared.set_node_stopped(&node, true);
            id
        }
        "start-node" => {
            let node = s(req, "node").to_string();
            let out = end(&|k| matches!(k, FaultKind::StopNode { node: n } if *n == node))?;
            shared.set_node_stopped(&node, false);
            return Ok(out);
        }
        "partition" => {
            let a = names(req, "sideA");
            let b = names(req, "sideB");
            if a.is_empty() || b.is_empty() {
                return Err(Error::Control("partition needs two non-empty sides".into()));
            }
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let b: Vec<&str> = b.iter().map(String::as_str).collect();
            faults.partition(&a, &b)?
        }
        "heal" => return end(&|k| matches!(k, FaultKind::Partition { .. })),
        "stop-external-dns" => faults.stop_external_dns()?,
        "clock-offset" => {
            let pod = s(req, "pod").to_string();
            let offset = s(req, "offset");
            if offset == "reset" {
                return end(&|k| matches!(k, FaultKind::ClockOffset { pod: p, .. } if *p == pod));
            }
            faults.clock_offset(&pod, localkube_runtime::ClockOffset::parse(offset)?)?
        }
        "start-external-dns" => return end(&|k| matches!(k, FaultKind::StopExternalDns)),
        "log" => {
            let log: Vec<Value> = faults
                .log()
                .iter()
                .filter_map(|r| serde_json::to_value(r).ok())
                .collect();
            return Ok(json!({"log": log}));
        }
        other => return Err(Error::Control(format!("unknown fault {other:?}"))),
    };
    Ok(json!({"id": id}))
}
