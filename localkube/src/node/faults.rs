//! Faults the harness injects, each reversible and recorded with its start and end time in
//! a fault log (kept in memory and appended to `STATE/faults.jsonl`, one JSON object per
//! change, so a report can be built even after a crash).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::dns::DnsRecords;
use super::error::{Error, Result};
use super::partition::Partition;
use super::runtime::PodRuntime;

/// File name of the fault log in the state dir.
pub const FAULT_LOG: &str = "faults.jsonl";

/// What was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum FaultKind {
    /// SIGKILL to a container's processes: instant (ends when it starts), or with
    /// `keepDown` the container is not restarted until the fault is ended.
    KillContainer {
        /// `namespace/name` of the pod.
        pod: String,
        /// The container.
        container: String,
        /// The pid killed.
        pid: i32,
        /// Kept down (not restarted) until the fault ends.
        #[serde(
            rename = "keepDown",
            default,
            skip_serializing_if = "std::ops::Not::not"
        )]
        keep_down: bool,
    },
    /// SIGSTOP to a container's processes until thawed (SIGCONT).
    FreezeContainer {
        /// `namespace/name` of the pod.
        pod: String,
        /// The container.
        container: String,
        /// The pid frozen.
        pid: i32,
    },
    /// A node stopped (all its pods' processes killed) until started.
    StopNode {
        /// The node.
        node: String,
    },
    /// Two sets of nodes partitioned until healed.
    Partition {
        /// One side.
        side_a: Vec<String>,
        /// The other side.
        side_b: Vec<String>,
    },
    /// The external-dns stand-in stopped until started.
    StopExternalDns,
}

/// One fault in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRecord {
    /// Sequence number (per cluster).
    pub id: u64,
    /// What.
    pub fault: FaultKind,
    /// When it was injected.
    pub started_at: DateTime<Utc>,
    /// When it was reverted (`None` while active).
    pub ended_at: Option<DateTime<Utc>>,
}

#[derive(Debug)]
enum Undo {
    Nothing,
    Thaw { pid: i32 },
    Release { pod: String, container: String },
    StartNode { node: String },
    Heal { partition: Partition },
    StartExternalDns,
}

/// The fault injector of one cluster.
#[derive(Debug)]
pub struct Faults {
    runtime: PodRuntime,
    dns: Option<Arc<DnsRecords>>,
    log_path: PathBuf,
    records: Mutex<Vec<(FaultRecord, Option<Undo>)>>,
}

impl Faults {
    /// A fault injector over `runtime` (and the DNS records, for external-dns faults).
    pub fn new(runtime: PodRuntime, dns: Option<Arc<DnsRecords>>) -> Self {
        let log_path = runtime.network().state_dir().join(FAULT_LOG);
        Self {
            runtime,
            dns,
            log_path,
            records: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(FaultRecord, Option<Undo>)>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn append(&self, record: &FaultRecord) {
        let line = serde_json::to_string(record).map(|mut s| {
            s.push('\n');
            s
        });
        let written = line.map_err(std::io::Error::other).and_then(|line| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log_path)?
                .write_all(line.as_bytes())
        });
        if let Err(err) = written {
            tracing::warn!(path = %self.log_path.display(), error = %err, "could not append to fault log");
        }
    }

    fn start(&self, fault: FaultKind, undo: Undo, instant: bool) -> u64 {
        let now = Utc::now();
        let mut records = self.lock();
        let id = records.len() as u64 + 1;
        let record = FaultRecord {
            id,
            fault,
            started_at: now,
            ended_at: instant.then_some(now),
        };
        tracing::info!(fault_id = id, fault = ?record.fault, "fault injected");
        self.append(&record);
        records.push((record, (!instant).then_some(undo)));
        id
    }

    /// SIGKILLs a container's processes (the runtime then restarts it per restartPolicy).
    pub fn kill_container(&self, pod: &str, container: &str) -> Result<u64> {
        let pid = self
            .runtime
            .signal_container(pod, container, Signal::SIGKILL)?;
        Ok(self.start(
            FaultKind::KillContainer {
                pod: pod.into(),
                container: container.into(),
                pid,
                keep_down: false,
            },
            Undo::Nothing,
            true,
        ))
    }

    /// SIGKILLs a container's processes and keeps the container down (waiting in
    /// CrashLoopBackOff, not ready) until [`Faults::end`], which lets it restart at once.
    pub fn kill_container_kept_down(&self, pod: &str, container: &str) -> Result<u64> {
        let pid = self.runtime.kill_and_hold(pod, container)?;
        Ok(self.start(
            FaultKind::KillContainer {
                pod: pod.into(),
                container: container.into(),
                pid,
                keep_down: true,
            },
            Undo::Release {
                pod: pod.into(),
                container: container.into(),
            },
            false,
        ))
    }

    /// SIGSTOPs a container's processes until [`Faults::end`].
    pub fn freeze_container(&self, pod: &str, container: &str) -> Result<u64> {
        let pid = self
            .runtime
            .signal_container(pod, container, Signal::SIGSTOP)?;
        Ok(self.start(
            FaultKind::FreezeContainer {
                pod: pod.into(),
                container: container.into(),
                pid,
            },
            Undo::Thaw { pid },
            false,
        ))
    }

    /// Stops a node until [`Faults::end`].
    pub fn stop_node(&self, node: &str) -> Result<u64> {
        self.runtime.stop_node(node)?;
        Ok(self.start(
            FaultKind::StopNode { node: node.into() },
            Undo::StartNode { node: node.into() },
            false,
        ))
    }

    /// Partitions two sets of nodes until [`Faults::end`].
    pub fn partition(&self, side_a: &[&str], side_b: &[&str]) -> Result<u64> {
        let partition = self.runtime.partition(side_a, side_b)?;
        let fault = FaultKind::Partition {
            side_a: side_a.iter().map(|s| s.to_string()).collect(),
            side_b: side_b.iter().map(|s| s.to_string()).collect(),
        };
        Ok(self.start(fault, Undo::Heal { partition }, false))
    }

    /// Stops the external-dns stand-in until [`Faults::end`].
    pub fn stop_external_dns(&self) -> Result<u64> {
        let dns = self.dns.as_ref().ok_or_else(|| {
            Error::Invalid("external-dns fault: no DNS records were given".into())
        })?;
        dns.stop_external_dns();
        Ok(self.start(FaultKind::StopExternalDns, Undo::StartExternalDns, false))
    }

    /// Reverts an active fault (thaw, release a kept-down container, start the node, heal,
    /// start external-dns) and records
    /// its end time. Ending a fault that already ended is a no-op.
    pub fn end(&self, id: u64) -> Result<()> {
        let mut records = self.lock();
        let index = usize::try_from(id)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .filter(|i| *i < records.len());
        let index = index.ok_or_else(|| Error::Invalid(format!("fault id {id}: no such fault")))?;
        let Some(undo) = records[index].1.take() else {
            return Ok(());
        };
        let result = match &undo {
            Undo::Nothing => Ok(()),
            Undo::Thaw { pid } => {
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(*pid), Signal::SIGCONT)
                    .or_else(|err| {
                        if err == nix::errno::Errno::ESRCH {
                            Ok(())
                        } else {
                            Err(err)
                        }
                    })
                    .map_err(Error::sys(format!("thaw pid {pid}")))
            }
            Undo::Release { pod, container } => self.runtime.release_container(pod, container),
            Undo::StartNode { node } => self.runtime.start_node(node),
            Undo::Heal { partition } => self.runtime.heal(partition),
            Undo::StartExternalDns => {
                if let Some(dns) = &self.dns {
                    dns.start_external_dns();
                }
                Ok(())
            }
        };
        if let Err(err) = result {
            records[index].1 = Some(undo);
            return Err(err);
        }
        records[index].0.ended_at = Some(Utc::now());
        tracing::info!(fault_id = id, "fault reverted");
        self.append(&records[index].0);
        Ok(())
    }

    /// Reverts every active fault, newest first.
    pub fn end_all(&self) -> Result<()> {
        let active: Vec<u64> = self
            .lock()
            .iter()
            .filter(|(_, undo)| undo.is_some())
            .map(|(r, _)| r.id)
            .collect();
        for id in active.into_iter().rev() {
            self.end(id)?;
        }
        Ok(())
    }

    /// The fault log so far.
    pub fn log(&self) -> Vec<FaultRecord> {
        self.lock()
            .iter()
            .map(|(record, _)| record.clone())
            .collect()
    }
}
