//! Faults (`fault:` steps): the backend-specific [`FaultDriver`] (processes, nodes, network,
//! clocks), the faults every backend injects the same way through the API or SQL (RBAC denial,
//! operator scale, external-dns, read_only, replication delay), what is in effect
//! ([`ActiveFaults`]) and healing it. The runner's recorder gets a `fault` start event once a
//! fault took effect and an end event once it is healed. Actions (`do:`) are
//! [`super::actions`]'.

use bloodraven_api::names;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::observe::{cluster_error, unix_ms};
use super::LiveCluster;
use crate::error::{Error, Result};
use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::recorder::Recorder;
use crate::playground::names::{GROUP, NAMESPACE, OPERATOR_NAMESPACE};
use crate::scenario::model::{
    ClockOffsetTarget, Container, Fault, HealTarget, OperatorPod, Partition, Site, Verb,
};

/// A fault the driver started and can end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverFault {
    /// The driver's id of the fault (`localkube`'s fault id).
    pub id: Option<u64>,
    /// The in-cluster fault agent's parts of it: (the agent pod's node, the agent's fault
    /// id); a partition has one per pod it cut.
    pub agent_faults: Vec<(String, u64)>,
}

/// How a backend reaches processes, nodes and the network.
pub trait FaultDriver: Send + Sync {
    /// SIGKILL a container; with `keep_down` it is not restarted until [`Self::end`].
    fn kill(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        keep_down: bool,
    ) -> Result<DriverFault>;
    /// SIGSTOP a container until [`Self::end`].
    fn freeze(&self, namespace: &str, pod: &str, container: &str) -> Result<DriverFault>;
    /// Stop a node (its pods stop, it goes NotReady) until [`Self::end`].
    fn stop_node(&self, node: &str) -> Result<DriverFault>;
    /// Partition two sets of nodes until [`Self::end`].
    fn partition(&self, side_a: &[String], side_b: &[String]) -> Result<DriverFault>;
    /// Step the wall clock of a pod's `container` to `offset` (`+20s`) from the real clock
    /// until [`Self::end`].
    fn clock_offset(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        offset: &str,
    ) -> Result<DriverFault> {
        let _ = (namespace, pod, container, offset);
        Err(Error::Cluster {
            action: "step a container's wall clock".to_owned(),
            reason: "this backend has no clock-offset fault (localkube has: libfaketime)"
                .to_owned(),
        })
    }
    /// Ends a fault of `kind` (one of the above) the driver started.
    fn end(&self, kind: &str, fault: &DriverFault, detail: &str) -> Result<()>;
    /// The driver's own fault log, for the artifacts (None when it keeps none).
    fn fault_log(&self) -> Option<String> {
        None
    }
    /// The control plane's own log (the API server, kubelet, DNS and proxy), for the
    /// artifacts: the last [`CLUSTER_LOG_BYTES_MAX`] of it (None when the backend's control
    /// plane is not this machine's).
    fn cluster_log(&self) -> Option<String> {
        None
    }
}

/// How much of the end of a control plane's log goes into a failed scenario's artifacts.
pub const CLUSTER_LOG_BYTES_MAX: u64 = 8 << 20;

/// The last `bytes_max` of the file at `path` (from the first whole line within them).
pub fn file_tail(path: &std::path::Path, bytes_max: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(bytes_max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(match (start, text.find('\n')) {
        (0, _) | (_, None) => text.into_owned(),
        (_, Some(newline)) => text[newline + 1..].to_owned(),
    })
}

/// A fault that is in effect and how to end it.
#[derive(Debug, Clone, PartialEq)]
pub enum Undo {
    /// A driver fault.
    Driver {
        /// Its kind (`kill`, `freeze`, `stop-node`, `partition`, `clock-offset`).
        kind: String,
        /// The driver's handle.
        fault: DriverFault,
        /// The node of a `stop-node` (to start it) or other detail.
        detail: String,
    },
    /// Re-apply the operator's rendered RBAC.
    RestoreRbac,
    /// Scale the operator back to this many replicas.
    ScaleOperator(u32),
    /// Set this replication delay (seconds) back on a site.
    ReplicationDelay {
        /// The site's pod.
        pod: String,
    },
    /// Resume the in-cluster stand-in for external-dns (`paused: "false"`).
    ResumeExternalDns,
    /// Run this SQL as root on a site's pod (an `sql` fault's `heal`).
    Sql {
        /// The site's pod.
        pod: String,
        /// The statements.
        sql: String,
    },
}

/// The faults in effect, by kind, in injection order.
#[derive(Debug, Default)]
pub struct ActiveFaults {
    /// (fault kind, detail for the history, undo).
    pub active: Vec<(String, String, Undo)>,
}

/// The `localkube fault` driver: the binary's control socket.
#[derive(Debug, Clone)]
pub struct LocalkubeDriver {
    /// The cluster.
    pub config: crate::playground::localkube::LocalkubeConfig,
}

fn parse_id(output: &str, action: &str) -> Result<DriverFault> {
    let answer: Value = serde_json::from_str(output.trim()).map_err(|e| Error::Cluster {
        action: action.to_owned(),
        reason: format!("unexpected answer {:?}: {e}", output.trim()),
    })?;
    if let Some(error) = answer.get("error").and_then(Value::as_str) {
        return Err(Error::Cluster {
            action: action.to_owned(),
            reason: error.to_owned(),
        });
    }
    Ok(DriverFault {
        id: answer.get("id").and_then(Value::as_u64),
        agent_faults: Vec::new(),
    })
}

impl FaultDriver for LocalkubeDriver {
    fn kill(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        keep_down: bool,
    ) -> Result<DriverFault> {
        let target = format!("{namespace}/{pod}");
        let mut args = vec!["kill", target.as_str(), "-c", container];
        if keep_down {
            args.push("--keep-down");
        }
        let out = self.config.fault(&args)?;
        parse_id(&out, &format!("kill {target} {container}"))
    }

    fn freeze(&self, namespace: &str, pod: &str, container: &str) -> Result<DriverFault> {
        let target = format!("{namespace}/{pod}");
        let out = self.config.fault(&["freeze", &target, "-c", container])?;
        parse_id(&out, &format!("freeze {target} {container}"))
    }

    fn clock_offset(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        offset: &str,
    ) -> Result<DriverFault> {
        // localkube steps every container of the pod that `--clock-faults` names: `mysql`.
        if container != "mysql" {
            return Err(Error::Cluster {
                action: format!("step the wall clock of {namespace}/{pod} {container}"),
                reason: "the harness starts localkube with --clock-faults mysql only".to_owned(),
            });
        }
        let target = format!("{namespace}/{pod}");
        let out = self.config.fault(&["clock-offset", &target, offset])?;
        parse_id(&out, &format!("clock-offset {target} {offset}"))
    }

    fn stop_node(&self, node: &str) -> Result<DriverFault> {
        let out = self.config.fault(&["stop-node", node])?;
        parse_id(&out, &format!("stop node {node}"))
    }

    fn partition(&self, side_a: &[String], side_b: &[String]) -> Result<DriverFault> {
        let out = self
            .config
            .fault(&["partition", &side_a.join(","), &side_b.join(",")])?;
        parse_id(&out, "partition")
    }

    fn end(&self, kind: &str, fault: &DriverFault, detail: &str) -> Result<()> {
        let id = fault.id.map(|id| id.to_string());
        let with_id = |verb: &'static str| -> Vec<String> {
            let mut args = vec![verb.to_owned()];
            args.extend(id.clone());
            args
        };
        let args: Vec<String> = match kind {
            "kill" => with_id("heal"),
            "freeze" => with_id("thaw"),
            "partition" | "clock-offset" => with_id("heal"),
            "stop-node" => vec!["start-node".to_owned(), detail.to_owned()],
            other => {
                return Err(Error::Cluster {
                    action: format!("end a {other} fault"),
                    reason: "the localkube driver did not start it".to_owned(),
                })
            }
        };
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.config.fault(&refs)?;
        parse_id(&out, &format!("end {kind}")).map(|_| ())
    }

    fn fault_log(&self) -> Option<String> {
        std::fs::read_to_string(self.config.state_dir.join("faults.jsonl")).ok()
    }

    fn cluster_log(&self) -> Option<String> {
        file_tail(
            &self.config.state_dir.join("localkube.log"),
            CLUSTER_LOG_BYTES_MAX,
        )
        .ok()
    }
}

/// How long healing a `scale-operator` waits for a running replica to lead again.
pub const OPERATOR_BACK_MAX: std::time::Duration = std::time::Duration::from_secs(120);

/// How long a clock-offset fault may take to reach mysqld (libfaketime re-reads its control
/// file every second) before the step fails as not taken effect.
const CLOCK_STEP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How far mysqld's stepped clock may be from the wanted offset (the exec's round trip).
const CLOCK_STEP_TOLERANCE_MS: i64 = 1_000;

fn container_name(container: Container) -> &'static str {
    match container {
        Container::Mysql => "mysql",
        Container::Sidecar => "sidecar",
    }
}

fn fault_event(recorder: &Recorder, name: &str, phase: FaultPhase, detail: &str, kind: EventType) {
    fault_event_on(recorder, name, phase, detail, kind, Vec::new());
}

/// A fault event naming the sites it acts on (`fault_sites`: the timings checker takes the
/// fault that can trigger a failover from them).
fn fault_event_on(
    recorder: &Recorder,
    name: &str,
    phase: FaultPhase,
    detail: &str,
    kind: EventType,
    sites: Vec<Site>,
) {
    let op = Op::Fault {
        name: name.to_owned(),
        phase,
        detail: detail.to_owned(),
        sites,
    };
    recorder.invoke("nemesis", op.clone());
    recorder.complete("nemesis", kind, op);
}

/// A driver fault of `kind` on `detail` (a pod, a node), undone through the driver.
fn driver_undo(kind: &str, fault: DriverFault, detail: String) -> Option<Undo> {
    Some(Undo::Driver {
        kind: kind.to_owned(),
        fault,
        detail,
    })
}

impl LiveCluster {
    /// Injects a fault and records its start once it took effect (and its end at once when
    /// it leaves nothing to heal). When the fault can take a site's primary away, which site
    /// is active is read before it is injected, so the survivors are sealed right after it
    /// returns (the automatic seal, docs/design/harness.md#history-and-checkers).
    pub(super) async fn inject_fault(&self, fault: &Fault, recorder: &Recorder) -> Result<()> {
        let taken = super::seal::primary_taken_from(fault);
        let active = if taken.is_empty() {
            None
        } else {
            self.active_site_now().await
        };
        let undo = self.start_fault(fault, recorder).await?;
        let detail = serde_json::to_string(fault).unwrap_or_default();
        let sites = crate::history::event::fault_sites(fault);
        self.record_started(fault.kind(), detail, sites, undo, recorder);
        match active {
            Some(active) if taken.contains(&active) => {
                self.seal_survivors(fault, active, recorder).await;
            }
            Some(_) => {}
            None if taken.is_empty() => {}
            None => tracing::warn!(
                fault = fault.kind(),
                "seal: the active site is unknown (no group status read or observed), so what the survivors held is not sealed"
            ),
        }
        Ok(())
    }

    /// Records the start of a fault or action that took effect (its effective start), then
    /// remembers how to undo it, or records its end at once when there is nothing to undo.
    pub(super) fn record_started(
        &self,
        name: &str,
        detail: String,
        sites: Vec<Site>,
        undo: Option<Undo>,
        recorder: &Recorder,
    ) {
        fault_event_on(
            recorder,
            name,
            FaultPhase::Start,
            &detail,
            EventType::Ok,
            sites.clone(),
        );
        match undo {
            Some(undo) => self.remember(name, detail, undo),
            None => fault_event_on(
                recorder,
                name,
                FaultPhase::End,
                &detail,
                EventType::Ok,
                sites,
            ),
        }
    }

    /// Starts `fault`: how to undo it, `None` when it is over once started.
    async fn start_fault(&self, fault: &Fault, recorder: &Recorder) -> Result<Option<Undo>> {
        let pod_of = |site: Site| names::pod(GROUP, site.name());
        match fault {
            Fault::Kill(target) => {
                let pod = pod_of(target.site);
                let container = container_name(target.container);
                let handle =
                    self.driver(|d| d.kill(NAMESPACE, &pod, container, target.keep_down))?;
                Ok(target
                    .keep_down
                    .then(|| driver_undo("kill", handle, pod))
                    .flatten())
            }
            Fault::KillOperator { pod } => self.kill_operator(*pod).await.map(|()| None),
            Fault::Freeze(target) => {
                let pod = pod_of(target.site);
                let handle =
                    self.driver(|d| d.freeze(NAMESPACE, &pod, container_name(target.container)))?;
                Ok(driver_undo("freeze", handle, pod))
            }
            Fault::Thaw(target) => self
                .end_active("freeze", &pod_of(target.site), recorder)
                .await
                .map(|()| None),
            Fault::DeletePod(target) => {
                let pods: Api<Pod> = Api::namespaced(self.client.clone(), NAMESPACE);
                pods.delete(&pod_of(target.site), &DeleteParams::default())
                    .await
                    .map_err(|e| cluster_error("delete the site pod", e))?;
                Ok(None)
            }
            Fault::StopNode(target) => {
                let node = target.site.name().to_owned();
                let handle = self.driver(|d| d.stop_node(&node))?;
                Ok(driver_undo("stop-node", handle, node))
            }
            Fault::StartNode(target) => self
                .end_active("stop-node", target.site.name(), recorder)
                .await
                .map(|()| None),
            Fault::Partition(partition) => self.partition(partition),
            Fault::DenyRbac {
                resource, verbs, ..
            } => self.deny_rbac(resource, verbs).await,
            Fault::ScaleOperator { replicas } => {
                let before = self.operator_replicas().await?;
                self.scale_operator(*replicas).await?;
                Ok(Some(Undo::ScaleOperator(before)))
            }
            Fault::StopExternalDns => {
                // Through the API on every backend: the in-cluster stand-in stops applying
                // DNSEndpoint changes and keeps answering what it last applied.
                self.installer.pause_external_dns(true).await?;
                Ok(Some(Undo::ResumeExternalDns))
            }
            Fault::SetReadOnly { site, value } => self.set_read_only(*site, *value).await,
            Fault::ReplicationDelay { site, delay } => {
                let pod = pod_of(*site);
                let sql = format!(
                    "STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = {}; START SLAVE",
                    delay.duration().as_secs()
                );
                self.installer.sql_as_root(&pod, &sql).await?;
                Ok(Some(Undo::ReplicationDelay { pod }))
            }
            Fault::ClockOffset(target) => self.clock_offset(target).await,
        }
    }

    fn driver<T>(&self, f: impl FnOnce(&dyn FaultDriver) -> Result<T>) -> Result<T> {
        tokio::task::block_in_place(|| f(self.driver.as_ref()))
    }

    /// SIGKILL the leader's or a standby's operator process.
    async fn kill_operator(&self, pod: OperatorPod) -> Result<()> {
        let leader = self.leader_pod().await?;
        let pods = self.operator_pods().await?;
        let target = match pod {
            OperatorPod::Leader => leader.clone().filter(|l| pods.contains(l)),
            OperatorPod::Standby => pods.iter().find(|p| Some(*p) != leader.as_ref()).cloned(),
        }
        .ok_or_else(|| {
            cluster_error(
                "kill an operator pod",
                format!("no {pod:?} pod among {pods:?}"),
            )
        })?;
        self.driver(|d| d.kill(OPERATOR_NAMESPACE, &target, "operator", false))?;
        Ok(())
    }

    /// Cuts `partition`'s sites off from the other sites (and, but for `peers`, from the
    /// applications' node).
    fn partition(&self, partition: &Partition) -> Result<Option<Undo>> {
        let (sites, apps_too) = match partition {
            Partition::Sites(sites) | Partition::Nodes(sites) => (sites, true),
            Partition::Peers(sites) => (sites, false),
        };
        let side_a: Vec<String> = sites.iter().map(|s| s.name().to_owned()).collect();
        let side_b: Vec<String> = Site::ALL
            .iter()
            .filter(|s| !sites.contains(s))
            .map(|s| s.name().to_owned())
            .chain(apps_too.then(|| crate::playground::localkube::APPS_NODE.to_owned()))
            .collect();
        let handle = self.driver(|d| d.partition(&side_a, &side_b))?;
        Ok(driver_undo("partition", handle, side_a.join(",")))
    }

    /// Removes `verbs` on `resource` from the operator's ClusterRole.
    async fn deny_rbac(&self, resource: &str, verbs: &[Verb]) -> Result<Option<Undo>> {
        let roles: Api<ClusterRole> = Api::all(self.client.clone());
        let role = roles
            .get(names::OPERATOR_DEPLOYMENT)
            .await
            .map_err(|e| cluster_error("read the operator ClusterRole", e))?;
        let rules = serde_json::to_value(role.rules.unwrap_or_default()).unwrap_or_default();
        let verbs: Vec<String> = verbs
            .iter()
            .map(|v| {
                serde_json::to_value(v)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            })
            .collect();
        let verbs: Vec<&str> = verbs.iter().map(String::as_str).collect();
        let narrowed = deny_verbs(&rules, resource, &verbs);
        roles
            .patch(
                names::OPERATOR_DEPLOYMENT,
                &PatchParams::default(),
                &Patch::Merge(json!({"rules": narrowed})),
            )
            .await
            .map_err(|e| cluster_error("narrow the operator ClusterRole", e))?;
        Ok(Some(Undo::RestoreRbac))
    }

    /// `SET GLOBAL read_only` on a site's mysqld, read back in the same session: proof that
    /// the value took, before anything (the sidecar's topology-mismatch rule) could set it back.
    async fn set_read_only(&self, site: Site, value: bool) -> Result<Option<Undo>> {
        let sql = format!(
            "SET GLOBAL read_only = {}; SELECT @@GLOBAL.read_only",
            if value { "ON" } else { "OFF" }
        );
        let read_back = self
            .installer
            .sql_as_root(&names::pod(GROUP, site.name()), &sql)
            .await?;
        let want = if value { "1" } else { "0" };
        if read_back.trim() != want {
            return Err(cluster_error(
                format!("set read_only on {site}"),
                format!(
                    "read back {:?} right after setting it, expected {want}",
                    read_back.trim()
                ),
            ));
        }
        Ok(None)
    }

    /// Steps a site's mysqld clock, and undoes it (failing the step) when mysqld does not see
    /// the step.
    async fn clock_offset(&self, target: &ClockOffsetTarget) -> Result<Option<Undo>> {
        let pod = names::pod(GROUP, target.site.name());
        let ms = crate::scenario::model::offset_ms(&target.offset)
            .map_err(|why| cluster_error("step a clock", why))?;
        let offset = format!("{ms:+}ms");
        let handle = self.driver(|d| d.clock_offset(NAMESPACE, &pod, "mysql", &offset))?;
        if let Err(why) = self.wait_clock_moved(&pod, ms).await {
            // The step did nothing the target can see: undo it, and fail the step.
            let undone = self.driver(|d| d.end("clock-offset", &handle, &pod));
            return Err(cluster_error(
                format!("step the clock of {pod}'s mysqld by {offset}"),
                match undone {
                    Ok(()) => why,
                    Err(end) => format!("{why}; undoing it failed too: {end}"),
                },
            ));
        }
        Ok(driver_undo("clock-offset", handle, pod))
    }

    fn remember(&self, kind: &str, detail: String, undo: Undo) {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .active
            .push((kind.to_owned(), detail, undo));
    }

    /// The operator pod holding the leader Lease, if any.
    async fn operator_replicas(&self) -> Result<u32> {
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
        let deployment = deployments
            .get(names::OPERATOR_DEPLOYMENT)
            .await
            .map_err(|e| cluster_error("read the operator Deployment", e))?;
        Ok(deployment
            .spec
            .and_then(|s| s.replicas)
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(1))
    }

    async fn scale_operator(&self, replicas: u32) -> Result<()> {
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
        deployments
            .patch(
                names::OPERATOR_DEPLOYMENT,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .map(|_| ())
            .map_err(|e| cluster_error("scale the operator", e))
    }

    /// After scaling the operator back: waits (at most [`OPERATOR_BACK_MAX`]) until a running
    /// replica holds the leader Lease, so the outage's end event is the operator's return, not
    /// the scale request (the timings checker bounds detection from it: a pod's start and its
    /// leader election are not detection). Returns at once for zero replicas.
    async fn await_operator_leading(&self, replicas: u32) -> Result<()> {
        if replicas == 0 {
            return Ok(());
        }
        let start = std::time::Instant::now();
        loop {
            let pods = self.operator_pods().await?;
            let leader = self.leader_pod().await?;
            if leader.is_some_and(|leader| pods.contains(&leader)) {
                return Ok(());
            }
            if start.elapsed() >= OPERATOR_BACK_MAX {
                return Err(cluster_error(
                    "scale the operator back",
                    format!(
                        "no running replica holds the leader Lease after {} s (replicas {pods:?})",
                        OPERATOR_BACK_MAX.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Ends the active driver fault of `kind` on `detail` (a pod, a node), recording its end.
    async fn end_active(&self, kind: &str, detail: &str, recorder: &Recorder) -> Result<()> {
        let taken = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let index = state.active.iter().position(|(active, _, undo)| {
                active == kind && matches!(undo, Undo::Driver { detail: d, .. } if d == detail)
            });
            index.map(|i| state.active.remove(i))
        };
        if let Some((_, recorded, undo)) = taken {
            self.undo(&undo).await?;
            fault_event(recorder, kind, FaultPhase::End, &recorded, EventType::Ok);
        }
        Ok(())
    }

    async fn undo(&self, undo: &Undo) -> Result<()> {
        match undo {
            Undo::Driver {
                kind,
                fault,
                detail,
            } => {
                let (kind, fault, detail) = (kind.clone(), fault.clone(), detail.clone());
                self.driver(move |d| d.end(&kind, &fault, &detail))
            }
            Undo::RestoreRbac => self.installer.reapply_operator_rbac().await,
            Undo::ResumeExternalDns => self.installer.pause_external_dns(false).await,
            Undo::ScaleOperator(replicas) => {
                self.scale_operator(*replicas).await?;
                self.await_operator_leading(*replicas).await
            }
            Undo::Sql { pod, sql } => self.installer.sql_as_root(pod, sql).await.map(|_| ()),
            Undo::ReplicationDelay { pod } => self
                .installer
                .sql_as_root(
                    pod,
                    "STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE",
                )
                .await
                .map(|_| ()),
        }
    }

    pub(super) async fn heal_faults(
        &self,
        target: &HealTarget,
        recorder: Option<&Recorder>,
    ) -> Result<()> {
        let healed: Vec<(String, String, Undo)> = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (take, keep): (Vec<_>, Vec<_>) =
                state
                    .active
                    .drain(..)
                    .partition(|(kind, _, _)| match target {
                        HealTarget::All => true,
                        HealTarget::Kind(want) => kind == want,
                    });
            state.active = keep;
            take
        };
        let mut first_error = None;
        // Undo in reverse order of injection.
        for (kind, detail, undo) in healed.into_iter().rev() {
            match self.undo(&undo).await {
                Ok(()) => {
                    if let Some(recorder) = recorder {
                        fault_event(recorder, &kind, FaultPhase::End, &detail, EventType::Ok);
                    }
                }
                Err(error) => {
                    if let Some(recorder) = recorder {
                        fault_event(recorder, &kind, FaultPhase::End, &detail, EventType::Fail);
                    }
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    pub(super) fn heal_all_quietly(&self) -> Result<()> {
        self.runtime
            .block_on(self.heal_faults(&HealTarget::All, None))
    }

    /// Waits until `pod`'s mysqld reads its wall clock `wanted_ms` from the harness's (within
    /// [`CLOCK_STEP_TOLERANCE_MS`]), or says that the clock-offset fault did not take effect:
    /// a fake clock that mysqld never reads (libfaketime not loaded, or its control file out
    /// of the container's sight) makes every later clock expectation meaningless.
    async fn wait_clock_moved(&self, pod: &str, wanted_ms: i64) -> std::result::Result<(), String> {
        let deadline = std::time::Instant::now() + CLOCK_STEP_WAIT;
        let mut seen = Vec::new();
        loop {
            match self.mysqld_clock_offset_ms(pod).await {
                Ok(found) if (found - wanted_ms).abs() <= CLOCK_STEP_TOLERANCE_MS => return Ok(()),
                Ok(found) => seen.push(found.to_string()),
                Err(err) => seen.push(format!("unreadable ({err})")),
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "the fault did not take effect: mysqld's clock stayed {} ms off the \
                     harness's within {} s, wanted {wanted_ms} ms",
                    seen.join(", "),
                    CLOCK_STEP_WAIT.as_secs()
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    /// `pod`'s mysqld wall clock minus the harness's, in milliseconds (mysqld read it
    /// somewhere in the exec's round trip: its middle is taken).
    async fn mysqld_clock_offset_ms(&self, pod: &str) -> Result<i64> {
        let sent = std::time::SystemTime::now();
        let out = self
            .installer
            .sql_as_root(
                pod,
                "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)",
            )
            .await?;
        let answered = std::time::SystemTime::now();
        let midpoint = (unix_ms(sent) + unix_ms(answered)) / 2;
        out.trim()
            .parse::<i64>()
            .map(|mysqld| mysqld - midpoint)
            .map_err(|_| {
                cluster_error(
                    format!("read the clock of {pod}'s mysqld"),
                    format!("answer {out:?}"),
                )
            })
    }
}

/// The operator ClusterRole's rules with `verbs` removed on `resource` (rules naming other
/// resources too are split so only `resource` loses the verbs).
pub fn deny_verbs(rules: &Value, resource: &str, verbs: &[&str]) -> Value {
    let mut out = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        let resources: Vec<&str> = rule["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !resources.contains(&resource) {
            out.push(rule.clone());
            continue;
        }
        let others: Vec<&str> = resources
            .iter()
            .copied()
            .filter(|r| *r != resource)
            .collect();
        if !others.is_empty() {
            let mut rest = rule.clone();
            rest["resources"] = json!(others);
            out.push(rest);
        }
        let kept: Vec<Value> = rule["verbs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|verb| !verbs.contains(&verb.as_str().unwrap_or_default()))
            .cloned()
            .collect();
        if !kept.is_empty() {
            let mut narrowed = rule.clone();
            narrowed["resources"] = json!([resource]);
            narrowed["verbs"] = Value::Array(kept);
            out.push(narrowed);
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_tail_keeps_whole_lines_of_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("localkube.log");
        std::fs::write(&path, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(
            file_tail(&path, 1024).unwrap(),
            "first line\nsecond line\nthird\n"
        );
        // The last 12 bytes start inside "second line": that partial line is dropped.
        assert_eq!(file_tail(&path, 12).unwrap(), "third\n");
        assert!(file_tail(&dir.path().join("absent.log"), 10).is_err());
    }

    #[test]
    fn denying_verbs_keeps_the_others_and_other_resources() {
        let rules = json!([
            {"apiGroups": ["externaldns.k8s.io"], "resources": ["dnsendpoints"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
            {"apiGroups": [""], "resources": ["services", "pods"], "verbs": ["get", "patch"]},
        ]);
        let denied = deny_verbs(&rules, "dnsendpoints", &["create", "update", "patch"]);
        assert_eq!(denied[0]["verbs"], json!(["get", "list", "watch"]));
        assert_eq!(denied[1], rules[1]);
        let pods = deny_verbs(&rules, "pods", &["patch"]);
        assert_eq!(pods[1]["resources"], json!(["services"]));
        assert_eq!(pods[1]["verbs"], json!(["get", "patch"]));
        assert_eq!(pods[2]["resources"], json!(["pods"]));
        assert_eq!(pods[2]["verbs"], json!(["get"]));
    }

    #[test]
    fn driver_answers_are_parsed_and_errors_named() {
        assert_eq!(parse_id("{\"id\":7}\n", "x").unwrap().id, Some(7));
        let error = parse_id("{\"error\":\"no such pod\"}", "kill a/b")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("kill a/b") && error.contains("no such pod"),
            "{error}"
        );
    }
}
