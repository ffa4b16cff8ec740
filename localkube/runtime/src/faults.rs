//! Faults the harness injects, each reversible and recorded with its start and end time in
//! a fault log (kept in memory and appended to `STATE/faults.jsonl`, one JSON object per
//! change, so a report can be built even after a crash).
//!
//! The clock-offset fault steps the wall clock of one pod's opted-in containers (see
//! `super::clock`: libfaketime, preloaded only into the containers `localkube up
//! --clock-faults` names). A time namespace (`CLONE_NEWTIME`) would not do: it offsets only
//! `CLOCK_MONOTONIC` and `CLOCK_BOOTTIME`, never `CLOCK_REALTIME`, and only for processes
//! started inside it. Ending the fault sets the offset back to what it was before.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::dns::DnsRecords;
use super::error::{Error, Result};
use super::partition::Partition;
use super::runtime::PodRuntime;

/// How long a freeze waits for every thread of the container to stop after SIGSTOP (a thread
/// in uninterruptible sleep stops once its system call returns).
const FREEZE_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

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
    /// The wall clock of a pod's opted-in containers stepped to `offsetMs` from the real
    /// clock until the fault ends (then back to `previousMs`).
    ClockOffset {
        /// `namespace/name` of the pod.
        pod: String,
        /// The offset set, in milliseconds (negative: behind).
        #[serde(rename = "offsetMs")]
        offset_ms: i64,
        /// The offset it had before.
        #[serde(rename = "previousMs")]
        previous_ms: i64,
    },
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
    #[serde(serialize_with = "log_time::serialize")]
    pub started_at: Timestamp,
    /// When it was reverted (`None` while active).
    #[serde(serialize_with = "log_time::serialize_option")]
    pub ended_at: Option<Timestamp>,
}

/// The fault log's times: RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, the fewest
/// that are exact (the format the log has always had, chrono's serde format).
mod log_time {
    use jiff::Timestamp;
    use serde::Serializer;

    pub(super) fn format(t: Timestamp) -> String {
        let nanos = t.subsec_nanosecond();
        let digits = match nanos {
            0 => 0,
            _ if nanos % 1_000_000 == 0 => 3,
            _ if nanos % 1_000 == 0 => 6,
            _ => 9,
        };
        format!("{t:.digits$}")
    }

    pub(super) fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format(*t))
    }

    pub(super) fn serialize_option<S: Serializer>(
        t: &Option<Timestamp>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => serialize(t, s),
            None => s.serialize_none(),
        }
    }
}

#[derive(Debug)]
enum Undo {
    Nothing,
    Thaw { pid: i32 },
    Release { pod: String, container: String },
    StartNode { node: String },
    Heal { partition: Partition },
    StartExternalDns,
    ResetClock { pod: String, offset_ms: i64 },
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
        let now = Timestamp::now();
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
        // The fault starts when the container can no longer run code, not when the signal was
        // sent: a thread still running could answer one more query "after" the freeze.
        let running = super::state::wait_group_stopped(pid, FREEZE_WAIT_MAX);
        if !running.is_empty() {
            let _ = self
                .runtime
                .signal_container(pod, container, Signal::SIGCONT);
            return Err(Error::NotStopped {
                target: format!("{pod}/{container}"),
                group: pid,
                running,
                waited: FREEZE_WAIT_MAX,
            });
        }
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

    /// Steps the wall clock of pod `pod`'s opted-in containers to `offset` from the real clock
    /// until [`Faults::end`] (which sets it back). A new offset for a pod whose clock fault is
    /// active ends that one first, so one pod has at most one active clock fault.
    pub fn clock_offset(&self, pod: &str, offset: super::clock::ClockOffset) -> Result<u64> {
        let active: Vec<u64> = self
            .lock()
            .iter()
            .filter(|(record, undo)| {
                undo.is_some()
                    && matches!(&record.fault, FaultKind::ClockOffset { pod: p, .. } if p == pod)
            })
            .map(|(record, _)| record.id)
            .collect();
        for id in active {
            self.end(id)?;
        }
        let previous = self.runtime.set_clock_offset(pod, offset)?;
        Ok(self.start(
            FaultKind::ClockOffset {
                pod: pod.into(),
                offset_ms: offset.millis,
                previous_ms: previous.millis,
            },
            Undo::ResetClock {
                pod: pod.into(),
                offset_ms: previous.millis,
            },
            false,
        ))
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
            Undo::ResetClock { pod, offset_ms } => self
                .runtime
                .set_clock_offset(pod, super::clock::ClockOffset { millis: *offset_ms })
                .map(|_| ()),
        };
        if let Err(err) = result {
            records[index].1 = Some(undo);
            return Err(err);
        }
        records[index].0.ended_at = Some(Timestamp::now());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    #[test]
    fn log_times_have_the_fewest_exact_fractional_digits() {
        for (input, logged) in [
            ("2026-11-30T04:00:01Z", "2026-11-30T04:00:01Z"),
            ("2026-11-30T04:00:01.5Z", "2026-11-30T04:00:01.500Z"),
            ("2026-11-30T04:00:01.000123Z", "2026-11-30T04:00:01.000123Z"),
            (
                "2026-11-30T04:00:01.123456789Z",
                "2026-11-30T04:00:01.123456789Z",
            ),
        ] {
            assert_eq!(log_time::format(at(input)), logged);
        }
    }

    #[test]
    fn a_fault_record_round_trips_through_its_json_line() {
        let record = FaultRecord {
            id: 3,
            fault: FaultKind::StopExternalDns,
            started_at: at("2026-11-30T04:00:01.25Z"),
            ended_at: None,
        };
        let line = serde_json::to_string(&record).expect("json");
        assert!(
            line.contains(r#""startedAt":"2026-11-30T04:00:01.250Z","endedAt":null"#),
            "{line}"
        );
        assert_eq!(
            serde_json::from_str::<FaultRecord>(&line).expect("parse"),
            record
        );
    }
}
