//! What [`super::LiveCluster`] does per step: apply, inject, heal, the shared reads the
//! targets observe through ([`crate::targets`]), converge, the final read and artifacts.

use std::path::Path;

use bloodraven_api::names;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Pod};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams};
use serde_json::json;

use super::faults::{deny_verbs, Undo};
use super::{topology, workload, LiveCluster};
use crate::error::{Error, Result};
use crate::history::event::{EventType, FaultPhase, Op};
use crate::history::recorder::Recorder;
use crate::playground::install::{GROUP, NAMESPACE, OPERATOR_NAMESPACE};
use crate::scenario::model::{
    Apply, Container, Fault, HealTarget, OperatorPod, Partition, SharedService, Site,
};

/// A [`Error::Cluster`] of `action`, failed for `reason`.
pub(crate) fn cluster_error(action: impl Into<String>, reason: impl ToString) -> Error {
    Error::Cluster {
        action: action.into(),
        reason: reason.to_string(),
    }
}

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

/// How long healing a `scale-operator` waits for a running replica to lead again.
pub const OPERATOR_BACK_MAX: std::time::Duration = std::time::Duration::from_secs(120);

impl LiveCluster {
    pub(super) async fn apply_step(&self, apply: &Apply) -> Result<()> {
        let objects = match (&apply.fixture, &apply.object) {
            (Some(fixture), _) => crate::playground::kube::read_manifests(
                &crate::playground::install::Fixtures::new(self.fixtures_root()).path(fixture),
            )?,
            (None, Some(object)) => vec![object.clone()],
            (None, None) => return Err(cluster_error("apply", "neither fixture nor object")),
        };
        let manager = apply
            .field_manager
            .as_deref()
            .unwrap_or(crate::playground::kube::SCENARIO_FIELD_MANAGER);
        for object in objects {
            crate::playground::kube::apply_as(&self.client, &object, manager).await?;
        }
        Ok(())
    }

    fn fixtures_root(&self) -> std::path::PathBuf {
        self.installer.fixtures_root()
    }

    fn remember(&self, kind: &str, detail: String, undo: Undo) {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .active
            .push((kind.to_owned(), detail, undo));
    }

    /// The operator pod holding the leader Lease, if any.
    pub(crate) async fn leader_pod(&self) -> Result<Option<String>> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
        Ok(leases
            .get_opt(names::LEADER_LEASE)
            .await
            .map_err(|e| cluster_error("read the leader Lease", e))?
            .and_then(|lease| lease.spec.and_then(|spec| spec.holder_identity))
            .map(|identity| names::leader_pod(&identity).to_owned()))
    }

    /// The operator's pods that are not terminating.
    pub(crate) async fn operator_pods(&self) -> Result<Vec<String>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
        let list = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=bloodraven"))
            .await
            .map_err(|e| cluster_error("list operator pods", e))?;
        Ok(list
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter_map(|pod| pod.metadata.name)
            .collect())
    }

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

    fn driver<T>(&self, f: impl FnOnce(&dyn super::faults::FaultDriver) -> Result<T>) -> Result<T> {
        tokio::task::block_in_place(|| f(self.driver.as_ref()))
    }

    pub(super) async fn inject_fault(&self, fault: &Fault, recorder: &Recorder) -> Result<()> {
        let name = fault.kind();
        let detail = serde_json::to_string(fault).unwrap_or_default();
        let pod_of = |site: Site| names::pod(GROUP, site.name());
        // The automatic seal (docs/design/harness.md#history-and-checkers): when the fault can
        // take a site's primary away, which site is active is read before it is injected, so
        // the survivors are read right after it returns (and its start is recorded).
        let taken = super::seal::primary_taken_from(fault);
        let active = if taken.is_empty() {
            None
        } else {
            self.active_site_now().await
        };
        let (undo, one_shot) = match fault {
            Fault::Kill(target) => {
                let pod = pod_of(target.site);
                let container = container_name(target.container);
                let handle =
                    self.driver(|d| d.kill(NAMESPACE, &pod, container, target.keep_down))?;
                if target.keep_down {
                    (
                        Some(Undo::Driver {
                            kind: "kill".into(),
                            fault: handle,
                            detail: pod,
                        }),
                        false,
                    )
                } else {
                    (None, true)
                }
            }
            Fault::KillOperator { pod } => {
                let leader = self.leader_pod().await?;
                let pods = self.operator_pods().await?;
                let target = match pod {
                    OperatorPod::Leader => leader.clone().filter(|l| pods.contains(l)),
                    OperatorPod::Standby => {
                        pods.iter().find(|p| Some(*p) != leader.as_ref()).cloned()
                    }
                }
                .ok_or_else(|| {
                    cluster_error(
                        "kill an operator pod",
                        format!("no {pod:?} pod among {pods:?}"),
                    )
                })?;
                self.driver(|d| d.kill(OPERATOR_NAMESPACE, &target, "operator", false))?;
                (None, true)
            }
            Fault::Freeze(target) => {
                let pod = pod_of(target.site);
                let handle =
                    self.driver(|d| d.freeze(NAMESPACE, &pod, container_name(target.container)))?;
                (
                    Some(Undo::Driver {
                        kind: "freeze".into(),
                        fault: handle,
                        detail: pod,
                    }),
                    false,
                )
            }
            Fault::Thaw(target) => {
                self.end_active("freeze", &pod_of(target.site), recorder)
                    .await?;
                (None, true)
            }
            Fault::DeletePod(target) => {
                let pods: Api<Pod> = Api::namespaced(self.client.clone(), NAMESPACE);
                pods.delete(&pod_of(target.site), &DeleteParams::default())
                    .await
                    .map_err(|e| cluster_error("delete the site pod", e))?;
                (None, true)
            }
            Fault::StopNode(target) => {
                let node = target.site.name().to_owned();
                let handle = self.driver(|d| d.stop_node(&node))?;
                (
                    Some(Undo::Driver {
                        kind: "stop-node".into(),
                        fault: handle,
                        detail: node,
                    }),
                    false,
                )
            }
            Fault::StartNode(target) => {
                self.end_active("stop-node", target.site.name(), recorder)
                    .await?;
                (None, true)
            }
            Fault::Partition(partition) => {
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
                (
                    Some(Undo::Driver {
                        kind: "partition".into(),
                        fault: handle,
                        detail: side_a.join(","),
                    }),
                    false,
                )
            }
            Fault::DenyRbac {
                resource, verbs, ..
            } => {
                let roles: Api<ClusterRole> = Api::all(self.client.clone());
                let role = roles
                    .get(names::OPERATOR_DEPLOYMENT)
                    .await
                    .map_err(|e| cluster_error("read the operator ClusterRole", e))?;
                let rules =
                    serde_json::to_value(role.rules.unwrap_or_default()).unwrap_or_default();
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
                (Some(Undo::RestoreRbac), false)
            }
            Fault::ScaleOperator { replicas } => {
                let before = self.operator_replicas().await?;
                self.scale_operator(*replicas).await?;
                (Some(Undo::ScaleOperator(before)), false)
            }
            Fault::StopExternalDns => {
                // Through the API on every backend: the in-cluster stand-in stops applying
                // DNSEndpoint changes and keeps answering what it last applied.
                self.installer.pause_external_dns(true).await?;
                (Some(Undo::ResumeExternalDns), false)
            }
            Fault::Annotate { key, value, .. } => {
                let groups = crate::playground::install::group_api(&self.client);
                groups
                    .patch(
                        GROUP,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"annotations": {key.as_str(): value}}})),
                    )
                    .await
                    .map_err(|e| cluster_error(format!("annotate the group with {key}"), e))?;
                (None, true)
            }
            Fault::SetReadOnly { site, value } => {
                // Read back in the same session: proof that the value took, before anything
                // (the sidecar's topology-mismatch rule) could set it back.
                let sql = format!(
                    "SET GLOBAL read_only = {}; SELECT @@GLOBAL.read_only",
                    if *value { "ON" } else { "OFF" }
                );
                let read_back = self.installer.sql_as_root(&pod_of(*site), &sql).await?;
                let want = if *value { "1" } else { "0" };
                if read_back.trim() != want {
                    return Err(cluster_error(
                        format!("set read_only on {site}"),
                        format!(
                            "read back {:?} right after setting it, expected {want}",
                            read_back.trim()
                        ),
                    ));
                }
                (None, true)
            }
            Fault::ReplicationDelay { site, delay } => {
                let pod = pod_of(*site);
                let sql = format!(
                    "STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = {}; START SLAVE",
                    delay.duration().as_secs()
                );
                self.installer.sql_as_root(&pod, &sql).await?;
                (Some(Undo::ReplicationDelay { pod }), false)
            }
            Fault::Sql {
                site,
                statements,
                heal,
            } => {
                let pod = pod_of(*site);
                self.installer.sql_as_root(&pod, statements).await?;
                let undo = heal.as_ref().map(|sql| Undo::Sql {
                    pod,
                    sql: sql.clone(),
                });
                let one_shot = undo.is_none();
                (undo, one_shot)
            }
            Fault::SealRpo { sites } => {
                recorder.invoke(
                    "seal",
                    Op::Sealed {
                        sites: std::collections::BTreeMap::new(),
                    },
                );
                let mut sealed = std::collections::BTreeMap::new();
                for site in sites {
                    match self.site_ids(*site).await {
                        Ok(ids) => {
                            sealed.insert(*site, ids);
                        }
                        Err(error) => {
                            recorder.complete(
                                "seal",
                                EventType::Fail,
                                Op::Sealed {
                                    sites: std::collections::BTreeMap::new(),
                                },
                            );
                            return Err(error);
                        }
                    }
                }
                recorder.complete("seal", EventType::Ok, Op::Sealed { sites: sealed });
                (None, true)
            }
            Fault::OpenConnection {
                name: connection,
                service,
            } => {
                let host = match service {
                    SharedService::Primary => topology::service_host("primary"),
                    SharedService::Replicas => topology::service_host("replicas"),
                };
                self.open_connection(connection, &host).await?;
                (None, true)
            }
            Fault::SendWrite { connection } => {
                self.send_write(connection).await?;
                (None, true)
            }
            Fault::Plugin { args } => {
                let binary = self.bin_dir.join("kubectl-bloodraven");
                let output = tokio::process::Command::new(&binary)
                    .args(args)
                    .env("KUBECONFIG", &self.kubeconfig)
                    .output()
                    .await
                    .map_err(|e| cluster_error(format!("run {}", binary.display()), e))?;
                if !output.status.success() {
                    return Err(cluster_error(
                        format!("kubectl bloodraven {}", args.join(" ")),
                        String::from_utf8_lossy(&output.stderr).trim(),
                    ));
                }
                (None, true)
            }
            Fault::ClockOffset(target) => {
                let pod = pod_of(target.site);
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
                (
                    Some(Undo::Driver {
                        kind: "clock-offset".into(),
                        fault: handle,
                        detail: pod,
                    }),
                    false,
                )
            }
            Fault::UpgradeOperator { image } => {
                let deployments: Api<Deployment> =
                    Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
                // The image it runs now: rolling to the same one is a restart, which only a
                // changed template (the restart annotation) makes happen.
                let running = deployments
                    .get(names::OPERATOR_DEPLOYMENT)
                    .await
                    .map_err(|e| cluster_error("read the operator Deployment", e))?
                    .spec
                    .and_then(|spec| spec.template.spec)
                    .and_then(|pod| {
                        pod.containers
                            .into_iter()
                            .find(|container| container.name == "operator")
                    })
                    .and_then(|container| container.image);
                let now = jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%SZ")
                    .to_string();
                deployments
                    .patch(
                        names::OPERATOR_DEPLOYMENT,
                        &PatchParams::default(),
                        &Patch::Strategic(crate::upgrade::operator_roll_patch(
                            running.as_deref(),
                            image,
                            &now,
                        )),
                    )
                    .await
                    .map_err(|e| cluster_error("upgrade the operator image", e))?;
                (None, true)
            }
        };
        // Recorded after the fault took effect: its effective start.
        let sites = crate::history::event::fault_sites(fault);
        fault_event_on(
            recorder,
            name,
            FaultPhase::Start,
            &detail,
            EventType::Ok,
            sites.clone(),
        );
        if let Some(undo) = undo {
            self.remember(name, detail, undo);
        } else if one_shot {
            fault_event_on(
                recorder,
                name,
                FaultPhase::End,
                &detail,
                EventType::Ok,
                sites,
            );
        }
        match active {
            Some(active) if taken.contains(&active) => {
                self.seal_survivors(fault, active, recorder).await;
            }
            Some(_) => {}
            None if taken.is_empty() => {}
            None => tracing::warn!(
                fault = name,
                "seal: the active site is unknown (no group status read or observed), so what the survivors held is not sealed"
            ),
        }
        Ok(())
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

    /// Opens the held connection `name` to `host` from the in-cluster workload (a name opened
    /// again drops that name's earlier sent write there).
    async fn open_connection(&self, name: &str, host: &str) -> Result<()> {
        use crate::incluster::control::{OpenConnection, Request};
        self.workload_pod()
            .await?
            .ctl(&Request::OpenConnection(OpenConnection {
                name: name.to_owned(),
                host: host.to_owned(),
                password: self.password(),
            }))
            .await
            .map(|_| ())
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

    /// The in-cluster workload pod (everything that talks to the cluster's network runs there).
    pub(crate) async fn workload_pod(&self) -> Result<super::incluster::WorkloadPod> {
        super::incluster::WorkloadPod::find(self.client.clone(), NAMESPACE).await
    }

    /// Sends an HTTP request from the in-cluster workload pod.
    pub(crate) async fn http_in_cluster(
        &self,
        call: &super::incluster::HttpCall,
    ) -> Result<crate::incluster::oneshot::HttpAnswer> {
        self.workload_pod().await?.http(call).await
    }

    /// Sends one write on the held connection `name` (in the workload pod) and leaves it in
    /// flight; the pod records what it is told.
    async fn send_write(&self, name: &str) -> Result<()> {
        use crate::incluster::control::{Request, SendWrite};
        self.workload_pod()
            .await?
            .ctl(&Request::SendWrite(SendWrite {
                name: name.to_owned(),
                id: None,
            }))
            .await
            .map(|_| ())
    }

    /// A metrics page, fetched from the in-cluster workload pod; an error unless 2xx.
    pub(crate) async fn scrape(&self, url: &str, action: &str) -> Result<String> {
        let answer = self
            .http_in_cluster(&super::incluster::HttpCall {
                method: "GET",
                url: url.to_owned(),
                ca_pem: None,
                bearer: None,
                headers: Vec::new(),
                body: None,
                resolve: Vec::new(),
                timeout: std::time::Duration::from_secs(10),
            })
            .await
            .map_err(|e| cluster_error(action, e))?;
        if !(200..300).contains(&answer.status) {
            return Err(cluster_error(
                action,
                format!("{url} answered {}: {:.200}", answer.status, answer.body),
            ));
        }
        Ok(answer.body)
    }

    pub(super) async fn converged_now(&self) -> Result<Option<String>> {
        let group = self.installer.group().await?;
        let history = self.history();
        Ok(crate::check::converged::converged(
            &group["status"],
            &history,
        ))
    }

    /// The rows of one of the workload's tables on `site` as `tag`, id, site lines
    /// ([`parse_final_rows`]), read directly from its mysqld.
    async fn table_rows(&self, site: Site, tag: &str, table: &str) -> Result<String> {
        self.installer
            .sql_as_root(
                &names::pod(GROUP, site.name()),
                &format!(
                    "SELECT '{tag}', id, site FROM `{}`.`{table}`",
                    workload::DATABASE
                ),
            )
            .await
    }

    /// Every row of `site`'s workload table and, when it can be read, of its canary table
    /// (a canary table that cannot be read leaves only the canaries unknown, never the
    /// workload's rows, which the RPO checker needs).
    async fn site_rows(&self, site: Site) -> Result<SiteRows> {
        let writes = self.table_rows(site, "w", workload::TABLE).await?;
        let canaries = match self.table_rows(site, "c", workload::CANARY_TABLE).await {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(site = %site, %error, "the canary table could not be read");
                String::new()
            }
        };
        Ok(parse_final_rows(&format!("{writes}\n{canaries}")))
    }

    /// Every workload id in `site`'s table, read directly from its mysqld.
    async fn site_ids(&self, site: Site) -> Result<Vec<u64>> {
        let text = self.table_rows(site, "w", workload::TABLE).await?;
        Ok(parse_final_rows(&text)
            .writes
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    pub(super) async fn final_rows(&self) -> Result<crate::backend::FinalRows> {
        let mut rows = crate::backend::FinalRows::default();
        let mut last_error = None;
        for site in Site::ALL {
            match self.site_rows(site).await {
                Ok(read) => {
                    rows.sites
                        .insert(site, read.writes.iter().map(|(id, _)| *id).collect());
                    for (id, committer) in read.writes {
                        if let Some(committer) = committer {
                            rows.committed.entry(id).or_insert(committer);
                        }
                    }
                    for (id, committer) in read.canaries {
                        if let Some(committer) = committer {
                            rows.canaries.entry(id).or_insert(committer);
                        }
                    }
                }
                Err(error) => last_error = Some(error),
            }
        }
        match (rows.sites.is_empty(), last_error) {
            (true, Some(error)) => Err(error),
            _ => Ok(rows),
        }
    }

    /// Every readable site's executed GTID set (MariaDB's `@@gtid_binlog_state`), then the
    /// group's `lastFailover` and `activeSite` ([`Op::GtidState`]). An error only when no
    /// site can be read.
    pub(super) async fn gtid_state(&self) -> Result<Op> {
        let mut sites = std::collections::BTreeMap::new();
        let mut last_error = None;
        // The active site is read last: writes still arrive (the counter app's), and a
        // transaction it committed between two reads reached a replica read after it, which
        // the lost-set checker took for one the failover lost (s055's second failover).
        let active = match self
            .installer
            .group()
            .await
            .map(|group| Op::status_of_group(&group))
        {
            Ok(Op::Status { active_site, .. }) => active_site,
            _ => None,
        };
        for site in gtid_read_order(active) {
            let read = self
                .installer
                .sql_as_root(
                    &names::pod(GROUP, site.name()),
                    // The playground runs MariaDB (its image); the operator's MariaDB dialect
                    // reads the same variable as the executed set.
                    "SELECT @@GLOBAL.gtid_binlog_state",
                )
                .await;
            match read {
                Ok(text) => {
                    sites.insert(site, text.trim().replace('\n', ""));
                }
                Err(error) => last_error = Some(error),
            }
        }
        if let (true, Some(error)) = (sites.is_empty(), last_error) {
            return Err(error);
        }
        let group = self.installer.group().await?;
        let Op::Status {
            active_site,
            last_failover,
            ..
        } = Op::status_of_group(&group)
        else {
            return Err(cluster_error("read the group", "not a status"));
        };
        Ok(Op::GtidState {
            sites,
            last_failover,
            active_site,
            error: None,
        })
    }

    pub(super) async fn artifacts(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)
            .map_err(|e| cluster_error(format!("create {}", dir.display()), e))?;
        let write = |file: &str, text: &str| {
            std::fs::write(dir.join(file), text)
                .map_err(|e| cluster_error(format!("write {file}"), e))
        };
        if let Ok(group) = self.installer.group().await {
            write(
                "group.yaml",
                &serde_yaml::to_string(&group).unwrap_or_default(),
            )?;
        }
        for namespace in [NAMESPACE, OPERATOR_NAMESPACE] {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            let events: Api<KubeEvent> = Api::namespaced(self.client.clone(), namespace);
            if let Ok(list) = events.list(&ListParams::default()).await {
                let lines: Vec<String> = list
                    .into_iter()
                    .map(|e| {
                        format!(
                            "{} {} {} {}",
                            e.type_.unwrap_or_default(),
                            e.reason.unwrap_or_default(),
                            e.involved_object.name.unwrap_or_default(),
                            e.message.unwrap_or_default()
                        )
                    })
                    .collect();
                write(&format!("events-{namespace}.txt"), &lines.join("\n"))?;
            }
            let Ok(list) = pods.list(&ListParams::default()).await else {
                continue;
            };
            for pod in list {
                let name = pod.metadata.name.clone().unwrap_or_default();
                for container in pod.spec.map(|s| s.containers).unwrap_or_default() {
                    for previous in [false, true] {
                        let params = LogParams {
                            container: Some(container.name.clone()),
                            previous,
                            ..LogParams::default()
                        };
                        if let Ok(text) = pods.logs(&name, &params).await {
                            let suffix = if previous { ".previous" } else { "" };
                            write(&format!("{name}.{}{suffix}.log", container.name), &text)?;
                        }
                    }
                }
            }
        }
        if let Some(log) = self.driver.fault_log() {
            write("faults.jsonl", &log)?;
        }
        // The control plane's view (e.g. a Service its kubelet could not apply to DNS): a
        // localkube cluster's state dir goes with the cluster.
        if let Some(log) = self.driver.cluster_log() {
            write("cluster.log", &log)?;
        }
        Ok(())
    }
}

/// How long a clock-offset fault may take to reach mysqld (libfaketime re-reads its control
/// file every second) before the step fails as not taken effect.
const CLOCK_STEP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How far mysqld's stepped clock may be from the wanted offset (the exec's round trip).
const CLOCK_STEP_TOLERANCE_MS: i64 = 1_000;

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One site's rows: (id, committing site) of the workload's and of the canary table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteRows {
    /// The workload table's rows.
    pub writes: Vec<(u64, Option<Site>)>,
    /// The canary table's rows.
    pub canaries: Vec<(u64, Option<Site>)>,
}

/// Parses the final read's answer, one row a line, tab separated: `w` or `c` (workload or
/// canary table), the id, the `site` column (`@@hostname` at commit: the committing site's pod,
/// `None` when it names none of the playground's). Unreadable lines are skipped.
pub fn parse_final_rows(text: &str) -> SiteRows {
    let mut rows = SiteRows::default();
    for line in text.lines() {
        let mut fields = line.trim_end_matches('\r').split('\t');
        let (Some(table), Some(Ok(id)), site) = (
            fields.next(),
            fields.next().map(|id| id.trim().parse::<u64>()),
            fields
                .next()
                .and_then(|host| topology::site_of_hostname(host.trim())),
        ) else {
            continue;
        };
        match table {
            "w" => rows.writes.push((id, site)),
            "c" => rows.canaries.push((id, site)),
            _ => {}
        }
    }
    rows
}

/// The order the final GTID read takes the sites in: the active site last, so it has
/// committed everything any site read before it holds (writes start there only).
fn gtid_read_order(active: Option<Site>) -> Vec<Site> {
    let mut order: Vec<Site> = Site::ALL
        .into_iter()
        .filter(|site| Some(*site) != active)
        .collect();
    order.extend(active);
    order
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_final_gtid_read_takes_the_active_site_last() {
        use super::{gtid_read_order, Site};
        assert_eq!(
            gtid_read_order(Some(Site::Iad)),
            [Site::Pdx, Site::Reader, Site::Iad]
        );
        assert_eq!(
            gtid_read_order(Some(Site::Pdx)),
            [Site::Iad, Site::Reader, Site::Pdx]
        );
        assert_eq!(gtid_read_order(None), Site::ALL.to_vec());
    }

    use super::*;

    // docs/design/harness.md#history-and-checkers: the final read names each row's committing
    // site from its `site` column, for the workload's table and the canaries apart.
    #[test]
    fn final_rows_name_their_table_and_committing_site() {
        let rows = parse_final_rows(
            "w\t1\tmysql-playground-iad-0\nw\t2\tmysql-playground-pdx-0\r\nc\t1000000000001\tmysql-playground-iad-0\nw\t3\tsomewhere-else\nw\tx\tmysql-playground-iad-0\n\n",
        );
        assert_eq!(
            rows.writes,
            [(1, Some(Site::Iad)), (2, Some(Site::Pdx)), (3, None)]
        );
        assert_eq!(rows.canaries, [(1_000_000_000_001, Some(Site::Iad))]);
    }

    // A write on a connection whose mysqld was killed must not read as a success (`null`).
    #[test]
    fn a_lost_connection_is_error_2013_not_success() {
        let lost = bloodraven_mysql::live::LiveError::Timeout {
            what: "held write".to_owned(),
            timeout: std::time::Duration::from_secs(2),
        };
        assert_eq!(workload::write_error_code(&lost), workload::CR_SERVER_LOST);
        assert_eq!(
            json!({"writeError": workload::write_error_code(&lost)}),
            json!({"writeError": 2013})
        );
    }
}
