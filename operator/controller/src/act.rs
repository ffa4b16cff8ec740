//! Act: executes a [`Decision`]'s actions in order (per-site requests of one phase
//! concurrently, see [`batches`]), then persists memory (status through the status
//! subresource, the cooldown annotation copy).
//!
//! docs/design/requirements.md R001.15: an error from a mutation is an unknown, never "did not
//! happen". Nothing here retries or rolls back; each outcome is logged (group, site, action,
//! generation, outcome) and the next poll re-reads the state. The remaining actions of the poll
//! still run (core never makes a later action's safety depend on an earlier one of the same
//! poll).
//!
//! docs/design/history.md#issue-10-case-5: every side effect here passes one gate,
//! [`Executor::gate`], right before it is issued: an action is not issued unless this replica
//! still leads for [`crate::leader::ACTION_MARGIN`] ([`LeaderFlag::may_act`]). Leadership can
//! lapse mid-poll (a stalled renewal); the rest of the poll's actions are then skipped, not
//! sent.

use crate::events::Recorder;
use bloodraven_api::auth::OperatorKey;
use bloodraven_api::{names, sidecar, MysqlFailoverGroup, MysqlFailoverGroupStatus, Timestamp};
use bloodraven_core::deploy::{DeployLeases, Tombstone};
use bloodraven_core::engine::{Action, AnnotationChange};
use bloodraven_core::{Decision, GroupMemory};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::Event;
use kube::{Api, Client, Resource};
use serde_json::json;

use crate::deploy_api::store::LeaseStore;
use crate::error::{Error, Result};
use crate::leader::LeaderFlag;
use crate::memory::status_of;
use crate::metrics::Metrics;
use crate::render;
use crate::sidecar::{round_trip_budget, SidecarClient};

/// What executing one action needs.
pub struct Executor<'a> {
    /// The API client.
    pub client: &'a Client,
    /// The sidecar client.
    pub sidecars: &'a SidecarClient,
    /// Deploy lease storage.
    pub store: &'a LeaseStore,
    /// Event recorder.
    pub recorder: &'a Recorder,
    /// Metrics.
    pub metrics: &'a Metrics,
    /// The group as read at the start of the poll.
    pub group: &'a MysqlFailoverGroup,
    /// Leadership, re-checked before each action ([`Executor::gate`]).
    pub leader: &'a LeaderFlag,
}

/// A short name of an action for logs.
pub fn action_name(action: &Action) -> &'static str {
    match action {
        Action::TaintNode { .. } => "TaintNode",
        Action::UntaintNode { .. } => "UntaintNode",
        Action::PushAuthority { .. } => "PushAuthority",
        Action::AnnounceAuthorityMove { .. } => "AnnounceAuthorityMove",
        Action::Fence { .. } => "Fence",
        Action::Promote { .. } => "Promote",
        Action::Repoint { .. } => "Repoint",
        Action::DeletePod { .. } => "DeletePod",
        Action::Backup { .. } => "Backup",
        Action::Restore { .. } => "Restore",
        Action::Reseed { .. } => "Reseed",
        Action::Archive { .. } => "Archive",
        Action::RollSite { .. } => "RollSite",
        Action::SetPodLabels { .. } => "SetPodLabels",
        Action::ApplyService(_) => "ApplyService",
        Action::ApplyDnsEndpoint { .. } => "ApplyDnsEndpoint",
        Action::RevokeDeployLeases { .. } => "RevokeDeployLeases",
        Action::Annotate(_) => "Annotate",
        Action::Event(_) => "Event",
        Action::Metric(_) => "Metric",
    }
}

/// The site an action concerns, for logs.
pub fn action_site(action: &Action) -> Option<&str> {
    match action {
        Action::TaintNode { site, .. }
        | Action::UntaintNode { site, .. }
        | Action::PushAuthority { site, .. }
        | Action::AnnounceAuthorityMove { site, .. }
        | Action::Fence { site, .. }
        | Action::Promote { site, .. }
        | Action::Repoint { site, .. }
        | Action::DeletePod { site, .. }
        | Action::Backup { site, .. }
        | Action::Restore { site, .. }
        | Action::Reseed { site, .. }
        | Action::Archive { site, .. }
        | Action::RollSite { site, .. }
        | Action::SetPodLabels { site, .. } => Some(site),
        Action::ApplyService(service) => service.site.as_deref(),
        Action::ApplyDnsEndpoint { .. }
        | Action::RevokeDeployLeases { .. }
        | Action::Annotate(_)
        | Action::Event(_)
        | Action::Metric(_) => None,
    }
}

/// What may run concurrently with its neighbours of the same kind: a request to one site's
/// sidecar (authority push, move notice, fence, repoint), one pod's labels, one Service.
/// Everything else runs alone: node taints (read-modify-write of a node two sites may
/// share), the promotion (long), the DNSEndpoint, lease revocation, annotations (one object),
/// events and metrics (ordered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Concurrent {
    PushAuthority,
    AnnounceAuthorityMove,
    Fence,
    Repoint,
    SetPodLabels,
    ApplyService,
}

fn concurrent_kind(action: &Action) -> Option<(Concurrent, &str)> {
    match action {
        Action::PushAuthority { site, .. } => Some((Concurrent::PushAuthority, site)),
        Action::AnnounceAuthorityMove { site, .. } => {
            Some((Concurrent::AnnounceAuthorityMove, site))
        }
        Action::Fence { site, .. } => Some((Concurrent::Fence, site)),
        Action::Repoint { site, .. } => Some((Concurrent::Repoint, site)),
        Action::SetPodLabels { pod, .. } => Some((Concurrent::SetPodLabels, pod)),
        Action::ApplyService(service) => Some((Concurrent::ApplyService, &service.name)),
        Action::TaintNode { .. }
        | Action::UntaintNode { .. }
        | Action::Promote { .. }
        | Action::DeletePod { .. }
        | Action::Backup { .. }
        | Action::Restore { .. }
        | Action::Reseed { .. }
        | Action::Archive { .. }
        | Action::RollSite { .. }
        | Action::ApplyDnsEndpoint { .. }
        | Action::RevokeDeployLeases { .. }
        | Action::Annotate(_)
        | Action::Event(_)
        | Action::Metric(_) => None,
    }
}

/// Splits `actions` into consecutive batches, in order (pure): a batch is a run of actions of
/// one concurrent kind, each on a different site (or pod, or Service), or one action alone.
/// docs/design/architecture.md#one-poll: the phases keep their order (core emits them in order
/// and a batch never spans two kinds); within a phase, per-site requests are independent (core
/// never makes one action's safety depend on another of the same poll).
pub fn batches(actions: &[Action]) -> Vec<std::ops::Range<usize>> {
    let mut batches: Vec<std::ops::Range<usize>> = Vec::new();
    for (index, action) in actions.iter().enumerate() {
        let joins = batches.last().is_some_and(|batch| {
            let kind = concurrent_kind(action);
            let first = concurrent_kind(&actions[batch.start]);
            match (kind, first) {
                (Some((kind, target)), Some((first, _))) => {
                    kind == first
                        && actions[batch.clone()]
                            .iter()
                            .all(|other| concurrent_kind(other).map(|(_, t)| t) != Some(target))
                }
                _ => false,
            }
        });
        match batches.last_mut() {
            Some(batch) if joins => batch.end = index + 1,
            _ => batches.push(index..index + 1),
        }
    }
    batches
}

/// The annotation key and value (`None`: remove) of an annotation change (pure). The
/// `last-failover` note is signed with `key`, the group's operator key
/// ([`crate::memory::signed_last_failover`]); without it the note is not written (an unsigned
/// note would never be adopted, and writing it would hide the previous signed one).
pub fn annotation_write(
    change: &AnnotationChange,
    key: Option<&OperatorKey>,
    namespace: &str,
    group: &str,
) -> Result<(&'static str, Option<String>)> {
    Ok(match change {
        AnnotationChange::SetCooldownUntil(until) => {
            (names::ANNOTATION_COOLDOWN_UNTIL, Some(until.to_string()))
        }
        AnnotationChange::SetLastFailover(text) => {
            let key = key.ok_or_else(|| {
                Error::SigningKey(format!(
                    "sign annotation {}: no signing key loaded for group {namespace}/{group}; not written",
                    names::ANNOTATION_LAST_FAILOVER
                ))
            })?;
            (
                names::ANNOTATION_LAST_FAILOVER,
                Some(crate::memory::signed_last_failover(
                    key, namespace, group, text,
                )),
            )
        }
        AnnotationChange::ClearPlannedFailover => (names::ANNOTATION_PLANNED_FAILOVER, None),
        AnnotationChange::ClearRevokeDeploymentLeases => {
            (names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES, None)
        }
        AnnotationChange::ClearBackup => (names::ANNOTATION_BACKUP, None),
        AnnotationChange::ClearRestore => (names::ANNOTATION_RESTORE, None),
        AnnotationChange::ClearRejoin => (names::ANNOTATION_REJOIN, None),
    })
}

impl Executor<'_> {
    fn namespace(&self) -> String {
        self.group.metadata.namespace.clone().unwrap_or_default()
    }

    fn name(&self) -> String {
        self.group.metadata.name.clone().unwrap_or_default()
    }

    /// The one place the act step re-checks leadership: every action ([`Self::execute`]),
    /// the deploy-lease writes and the status write pass here right before they are issued.
    /// `Err(NotLeader)` unless this replica leads for [`crate::leader::ACTION_MARGIN`] more.
    fn gate(&self, action: &str) -> Result<()> {
        if self.leader.may_act() {
            Ok(())
        } else {
            Err(Error::NotLeader {
                action: action.to_string(),
            })
        }
    }

    /// Executes every action in order, logging each outcome; returns how many failed.
    ///
    /// A run of [`batches`] (per-site requests of one kind, in one phase) runs concurrently:
    /// one slow or unreachable sidecar then costs the poll one timeout, not one per site. The
    /// batches themselves run one after the other, in core's order.
    pub async fn execute(&self, decision: &Decision, now: Timestamp) -> usize {
        let group = self.name();
        let generation = decision.memory.topology_generation;
        let mut failures = 0;
        let mut revoke_failed = false;
        for batch in batches(&decision.actions) {
            let actions = &decision.actions[batch];
            let outcomes = futures::future::join_all(actions.iter().map(|action| async move {
                if revoke_failed
                    && matches!(
                        action,
                        Action::Annotate(AnnotationChange::ClearRevokeDeploymentLeases)
                    )
                {
                    None
                } else {
                    Some(self.execute_one(action, now).await)
                }
            }))
            .await;
            for (action, outcome) in actions.iter().zip(outcomes) {
                let name = action_name(action);
                let site = action_site(action).unwrap_or("");
                match outcome {
                    None => {
                        // The revocation's outcome is unknown: keep the request so the next
                        // poll re-reads and revokes again, instead of dropping it.
                        tracing::warn!(group = %group, action = name, generation, outcome = "skipped", "revocation did not complete; keeping the revoke annotation");
                    }
                    Some(Ok(())) => match action {
                        Action::Metric(_) | Action::Event(_) => {}
                        Action::PushAuthority { .. }
                        | Action::SetPodLabels { .. }
                        | Action::ApplyService(_) => {
                            tracing::debug!(group = %group, site, action = name, generation, outcome = "ok", "action")
                        }
                        Action::TaintNode { .. }
                        | Action::UntaintNode { .. }
                        | Action::AnnounceAuthorityMove { .. }
                        | Action::Fence { .. }
                        | Action::Promote { .. }
                        | Action::Repoint { .. }
                        | Action::DeletePod { .. }
                        | Action::Backup { .. }
                        | Action::Restore { .. }
                        | Action::Reseed { .. }
                        | Action::Archive { .. }
                        | Action::RollSite { .. }
                        | Action::ApplyDnsEndpoint { .. }
                        | Action::RevokeDeployLeases { .. }
                        | Action::Annotate(_) => {
                            tracing::info!(group = %group, site, action = name, generation, outcome = "ok", "action")
                        }
                    },
                    Some(Err(error)) if error.is_not_leader() => {
                        failures += 1;
                        revoke_failed |= matches!(action, Action::RevokeDeployLeases { .. });
                        tracing::warn!(group = %group, site, action = name, generation, outcome = "not_issued", %error, "leadership lost; action not issued");
                    }
                    Some(Err(error)) => {
                        failures += 1;
                        revoke_failed |= matches!(action, Action::RevokeDeployLeases { .. });
                        tracing::warn!(
                            group = %group,
                            site,
                            action = name,
                            generation,
                            outcome = "unknown",
                            %error,
                            "action failed; its outcome is unknown and the next poll re-reads"
                        );
                    }
                }
            }
        }
        failures
    }

    /// Starts (or re-asks for) a sidecar backup job and logs what it answered.
    async fn start_job(
        &self,
        site: &str,
        group: &str,
        path: &str,
        request: &impl serde::Serialize,
        name: &str,
    ) -> Result<()> {
        let job = self
            .sidecars
            .start_job(site, &self.namespace(), group, path, request)
            .await?;
        tracing::info!(group, site, path, name, kind = ?job.kind, restore_id = job.restore_id, state = ?job.state, message = ?job.message, "sidecar job");
        Ok(())
    }

    async fn execute_one(&self, action: &Action, now: Timestamp) -> Result<()> {
        self.gate(action_name(action))?;
        let namespace = self.namespace();
        let group = self.name();
        match action {
            Action::TaintNode { node, .. } => self.retaint(node, true).await,
            Action::UntaintNode { node, .. } => self.retaint(node, false).await,
            Action::PushAuthority { site, authority }
            | Action::AnnounceAuthorityMove { site, authority } => {
                let timeout = round_trip_budget(self.group.spec.poll_interval.get());
                let answer = self
                    .sidecars
                    .push_authority(site, &namespace, authority, timeout)
                    .await?;
                if !answer.decision.is_in_force() {
                    tracing::warn!(group = %group, site, action = action_name(action), generation = authority.topology_generation, outcome = ?answer.decision, "sidecar refused the authority");
                }
                Ok(())
            }
            Action::Fence { site, request } => {
                let answer = self.sidecars.fence(site, &namespace, request).await?;
                if let Some(error) = &answer.read_only.error {
                    tracing::warn!(group = %group, site, action = "Fence", generation = request.topology_generation, outcome = "unknown", %error, "fence reported an error; re-read next poll");
                }
                Ok(())
            }
            Action::Promote { site, request } => {
                let answer = self.sidecars.promote(site, &namespace, request).await?;
                tracing::info!(group = %group, site, action = "Promote", drained = answer.drained, outcome = if answer.detach.error.is_none() { "ok" } else { "unknown" }, "promote answered");
                Ok(())
            }
            Action::Repoint { site, request } => {
                let answer = self.sidecars.repoint(site, &namespace, request).await?;
                if let Some(error) = &answer.repoint.error {
                    tracing::warn!(group = %group, site, action = "Repoint", outcome = "unknown", %error, "repoint reported an error; re-read next poll");
                }
                Ok(())
            }
            Action::DeletePod {
                pod, uid, grace, ..
            } => self.delete_pod(&namespace, pod, uid, *grace).await,
            Action::Backup { site, request } => {
                self.start_job(
                    site,
                    &request.group,
                    sidecar::PATH_BACKUP,
                    request,
                    &request.name,
                )
                .await
            }
            Action::Restore { site, request } => {
                self.start_job(
                    site,
                    &request.group,
                    sidecar::PATH_RESTORE,
                    request,
                    &request.name,
                )
                .await
            }
            Action::Reseed { site, request } => {
                let source = &request.source_host;
                self.start_job(site, &request.group, sidecar::PATH_RESEED, request, source)
                    .await
            }
            Action::Archive { site, request } => {
                tracing::info!(group = %group, site, archive = %request.name, rejoin_id = request.rejoin_id, errant_gtid_set = %request.errant_gtid_set, "rejoin archive requested");
                self.start_job(
                    site,
                    &request.group,
                    sidecar::PATH_ARCHIVE,
                    request,
                    &request.name,
                )
                .await
            }
            Action::RollSite {
                site,
                pod,
                uid,
                image,
                grace,
            } => {
                // The template first: the StatefulSet recreates the pod from it. A deletion
                // that fails leaves the old pod running; core re-issues the recreation.
                crate::workloads::set_site_image(self.client, self.group, site, image).await?;
                self.recreate_pod(&namespace, site, pod, uid, image, *grace)
                    .await
            }
            Action::SetPodLabels {
                pod, role, healthy, ..
            } => {
                let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                pods.patch(
                    pod,
                    &PatchParams::default(),
                    &Patch::Merge(render::pod_labels_patch(*role, *healthy)),
                )
                .await
                .map(drop)
                .map_err(|error| Error::kube(format!("label pod {namespace}/{pod}"), error))
            }
            Action::ApplyService(desired) => {
                let services: Api<Service> = Api::namespaced(self.client.clone(), &namespace);
                let body = render::service(
                    desired,
                    &group,
                    &namespace,
                    render::owner_reference(self.group),
                );
                services
                    .patch(
                        &desired.name,
                        &apply_params(),
                        &Patch::Apply(render::apply_body(&body)),
                    )
                    .await
                    .map(drop)
                    .map_err(|error| {
                        Error::kube(format!("apply service {namespace}/{}", desired.name), error)
                    })
            }
            Action::ApplyDnsEndpoint { name, spec } => {
                let api: Api<bloodraven_api::DNSEndpoint> =
                    Api::namespaced(self.client.clone(), &namespace);
                let body = render::dns_endpoint(
                    name,
                    &namespace,
                    &group,
                    spec,
                    render::owner_reference(self.group),
                );
                api.patch(
                    name,
                    &apply_params(),
                    &Patch::Apply(render::apply_body(&body)),
                )
                .await
                .map(drop)
                .map_err(|error| {
                    Error::kube(format!("apply dnsendpoint {namespace}/{name}"), error)
                })
            }
            Action::RevokeDeployLeases {
                reason,
                topology_generation,
            } => {
                let (revoked, after) = self
                    .update_leases(|after| {
                        let revoked = after.revoke_all(*reason, *topology_generation, now);
                        after.expire(now);
                        revoked
                    })
                    .await?;
                tracing::info!(group = %group, action = "RevokeDeployLeases", generation = topology_generation, reason = %reason, revoked = revoked.len(), outcome = "ok", "deploy leases revoked");
                self.metrics.set_deploy_leases_active(
                    &format!("{namespace}/{group}"),
                    after.active_count(now),
                );
                self.publish_leases_revoked(&revoked).await;
                Ok(())
            }
            Action::Annotate(change) => {
                let signing_key = self.sidecars.signing_keys().get(&namespace, &group);
                let (key, value) =
                    annotation_write(change, signing_key.as_deref(), &namespace, &group)?;
                self.annotate(key, value.as_deref()).await
            }
            Action::Event(event) => {
                let (type_, reason, action) = render::event_fields(event.reason);
                let event = Event {
                    type_,
                    reason: reason.to_string(),
                    note: Some(event.message.clone()),
                    action: action.to_string(),
                    secondary: None,
                };
                tracing::info!(group = %group, reason, message = event.note.as_deref().unwrap_or(""), "event");
                self.recorder
                    .publish(&event, &self.group.object_ref(&()))
                    .await
                    .map_err(|error| Error::kube(format!("publish event {reason}"), error))
            }
            Action::Metric(observation) => {
                self.metrics
                    .observe(&format!("{namespace}/{group}"), observation);
                Ok(())
            }
        }
    }

    /// Revokes (TopologyChanged) leases stamped with another generation than `generation`
    /// when the state read this poll had any: heals a revocation whose write failed after a
    /// generation bump. Re-reads under the lock before writing.
    pub async fn fence_stale_leases(
        &self,
        generation: u64,
        seen: Option<&DeployLeases>,
        now: Timestamp,
    ) -> Result<()> {
        let stale = seen.is_some_and(|leases| {
            leases
                .leases()
                .any(|lease| lease.is_live(now) && lease.topology_generation != generation)
        });
        if generation == 0 || !stale {
            return Ok(());
        }
        let group = self.name();
        let (revoked, _) = self
            .update_leases(|after| after.fence_generation(generation, now))
            .await?;
        if revoked.is_empty() {
            return Ok(());
        }
        tracing::info!(group = %group, action = "FenceDeployLeases", generation, revoked = revoked.len(), outcome = "ok", "deploy leases of an older generation revoked");
        self.publish_leases_revoked(&revoked).await;
        Ok(())
    }

    /// Raises the `DeploymentLeaseRevoked` Event on the group for leases this poll revoked
    /// (docs/design/requirements.md R003.20: a generation change revokes every lease with
    /// `TopologyChanged` and raises the Event). The leases are revoked whether or not the Event
    /// is published, so a failed publish is logged, never retried as a revocation.
    async fn publish_leases_revoked(&self, revoked: &[Tombstone]) {
        let Some(event) = render::leases_revoked_event(revoked) else {
            return;
        };
        if let Err(error) = self
            .recorder
            .publish(&event, &self.group.object_ref(&()))
            .await
        {
            tracing::warn!(group = %self.name(), %error, "failed to publish DeploymentLeaseRevoked event");
        }
    }

    /// Loads the group's deploy leases under the store's lock (shared with the deploy API),
    /// applies `change` and saves the result when it differs. Returns what `change` returned
    /// and the leases after it.
    async fn update_leases<T>(
        &self,
        change: impl FnOnce(&mut DeployLeases) -> T,
    ) -> Result<(T, DeployLeases)> {
        let namespace = self.namespace();
        let group = self.name();
        let _guard = self.store.lock().await;
        let before = self.store.load(&namespace, &group).await?;
        let mut after = before.clone();
        let changed = change(&mut after);
        if after != before {
            // Loading waited on the lock and the API: leadership may have lapsed meanwhile.
            self.gate("save deploy leases")?;
            self.store
                .save(
                    &namespace,
                    &group,
                    &before,
                    &after,
                    render::owner_reference(self.group),
                )
                .await?;
        }
        Ok((changed, after))
    }

    async fn annotate(&self, key: &str, value: Option<&str>) -> Result<()> {
        let namespace = self.namespace();
        let name = self.name();
        let api: Api<MysqlFailoverGroup> = Api::namespaced(self.client.clone(), &namespace);
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(render::annotation_patch(key, value)),
        )
        .await
        .map(drop)
        .map_err(|error| {
            Error::kube(
                format!("annotate mysqlfailovergroup {namespace}/{name} {key}"),
                error,
            )
        })
    }

    /// Deletes an agentless old primary's pod, conditional on its uid and with a grace period
    /// (core `engine::agentless`): its kubelet kills the containers, a frozen mysqld included,
    /// and the StatefulSet recreates the pod. Already gone (404) or recreated under another
    /// uid (409, the precondition) is done.
    async fn delete_pod(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        grace: std::time::Duration,
    ) -> Result<()> {
        match self.delete_pod_with_uid(namespace, pod, uid, grace).await? {
            None => {
                tracing::warn!(group = %self.name(), pod, uid, "deleted the agentless old primary's pod; its kubelet kills mysqld")
            }
            Some(code) => {
                tracing::info!(group = %self.name(), pod, uid, code, "the agentless old primary's pod is already gone or was recreated")
            }
        }
        Ok(())
    }

    /// Deletes a site pod for the ordered update (uid precondition, graceful): the
    /// StatefulSet recreates it with the template's new image.
    async fn recreate_pod(
        &self,
        namespace: &str,
        site: &str,
        pod: &str,
        uid: &str,
        image: &str,
        grace: std::time::Duration,
    ) -> Result<()> {
        match self.delete_pod_with_uid(namespace, pod, uid, grace).await? {
            None => {
                tracing::info!(group = %self.name(), site, pod, uid, image, "ordered update: deleted the site pod; its StatefulSet recreates it with the new image")
            }
            Some(code) => {
                tracing::info!(group = %self.name(), site, pod, uid, code, "ordered update: the site pod is already gone or was recreated")
            }
        }
        Ok(())
    }

    /// Deletes `pod` if its uid is `uid`, with `grace` (at least 1 s, never a force
    /// deletion). `Ok(None)`: deleted; `Ok(Some(code))`: already gone (404) or recreated under
    /// another uid (409).
    async fn delete_pod_with_uid(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        grace: std::time::Duration,
    ) -> Result<Option<u16>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(u32::try_from(grace.as_secs()).unwrap_or(u32::MAX).max(1)),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match pods.delete(pod, &params).await {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                Ok(Some(status.code))
            }
            Err(error) => Err(Error::kube(
                format!("delete pod {namespace}/{pod} (uid {uid})"),
                error,
            )),
        }
    }

    /// Adds (or removes) this group's demotion taint, read-modify-write guarded by the node's
    /// resourceVersion.
    async fn retaint(&self, node: &str, add: bool) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let current = nodes
            .get(node)
            .await
            .map_err(|error| Error::kube(format!("get node {node}"), error))?;
        let existing = current
            .spec
            .as_ref()
            .and_then(|spec| spec.taints.clone())
            .unwrap_or_default();
        let group = self.name();
        let taints = if add {
            render::taints_with_demotion(&existing, &group)
        } else {
            render::taints_without_demotion(&existing, &group)
        };
        let Some(taints) = taints else {
            return Ok(());
        };
        let patch = render::taints_patch(&taints, current.metadata.resource_version.as_deref());
        nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|error| Error::kube(format!("patch taints of node {node}"), error))
    }

    /// Persists memory: the status (core's [`GroupMemory::to_status`], by server-side apply
    /// on the status subresource, so fields memory no longer has are removed). The cooldown's
    /// annotation copy is kept by `decide` itself (an `Annotate` action when it is missing or
    /// older, docs/design/requirements.md R001.10).
    pub async fn persist(&self, memory: &GroupMemory) -> Result<()> {
        self.persist_status(status_of(memory, self.group.metadata.generation))
            .await
    }

    /// Writes `status` as the group's whole status (server-side apply, as
    /// [`Executor::persist`]).
    pub async fn persist_status(&self, status: MysqlFailoverGroupStatus) -> Result<()> {
        let namespace = self.namespace();
        let name = self.name();
        self.gate("WriteStatus")?;
        let api: Api<MysqlFailoverGroup> = Api::namespaced(self.client.clone(), &namespace);
        let body = json!({
            "apiVersion": MysqlFailoverGroup::api_version(&()),
            "kind": MysqlFailoverGroup::kind(&()),
            "metadata": { "name": name },
            "status": status,
        });
        api.patch_status(&name, &apply_params(), &Patch::Apply(body))
            .await
            .map(drop)
            .map_err(|error| {
                Error::kube(
                    format!("apply status of mysqlfailovergroup {namespace}/{name}"),
                    error,
                )
            })
    }
}

/// Server-side apply as field manager `bloodraven`, forcing ownership.
pub fn apply_params() -> PatchParams {
    PatchParams::apply(names::FIELD_MANAGER).force()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::extract::{Path, State};
    use axum::routing::put;
    use axum::{Json, Router};
    use bloodraven_api::sidecar::{Authority, AuthorityDecision, AuthorityResponse};
    use bloodraven_core::engine::{DesiredService, Event as CoreEvent, EventReason, ServiceKind};
    use kube::runtime::events::Reporter;

    use super::*;

    fn authority(site: Option<&str>) -> Authority {
        Authority {
            group: "playground".into(),
            active_site: site.map(str::to_string),
            topology_generation: 2,
            issued_at: Timestamp::from_unix_millis(1_000),
            moving_from: None,
        }
    }

    fn push(site: &str) -> Action {
        Action::PushAuthority {
            site: site.into(),
            authority: authority(Some("iad")),
        }
    }

    fn service(name: &str) -> Action {
        Action::ApplyService(DesiredService {
            name: name.into(),
            kind: ServiceKind::Primary,
            site: None,
            selector: BTreeMap::new(),
            ports: Vec::new(),
            publish_not_ready_addresses: false,
            headless: false,
        })
    }

    /// docs/design/architecture.md#one-poll: phases keep core's order and a batch never spans
    /// two kinds; within a phase the per-site requests of one kind form one concurrent batch; a
    /// repeated site starts a new batch; taints, promotion, DNS, revocation, annotations,
    /// events run alone.
    #[test]
    fn batches_group_per_site_requests_of_one_kind_and_keep_the_order() {
        let event = Action::Event(CoreEvent {
            reason: EventReason::Promoted,
            message: "m".into(),
        });
        let actions = vec![
            Action::TaintNode {
                site: "iad".into(),
                node: "n1".into(),
            },
            Action::UntaintNode {
                site: "pdx".into(),
                node: "n2".into(),
            },
            push("iad"),
            push("pdx"),
            push("reader"),
            push("iad"),
            Action::AnnounceAuthorityMove {
                site: "reader".into(),
                authority: authority(None),
            },
            Action::RevokeDeployLeases {
                reason: bloodraven_core::deploy::RevokeReason::TopologyChanged,
                topology_generation: 2,
            },
            service("mysql-playground-primary"),
            service("mysql-playground-replicas"),
            event.clone(),
            event,
        ];
        assert_eq!(
            batches(&actions),
            vec![0..1, 1..2, 2..5, 5..6, 6..7, 7..8, 8..10, 10..11, 11..12]
        );
        assert_eq!(batches(&[]), Vec::<std::ops::Range<usize>>::new());
    }

    /// docs/design/operator.md#returning-primary (issue 35): the rejoin's archive is a sidecar
    /// job of its own that runs alone in its batch, and the rejoin annotation is removed by
    /// name.
    #[test]
    fn issue_35_the_archive_runs_alone_and_the_rejoin_annotation_is_removed() {
        let archive = Action::Archive {
            site: "iad".into(),
            request: sidecar::ArchiveRequest {
                group: "playground".into(),
                name: "rejoin-iad-1796000123".into(),
                rejoin_id: 1_796_000_123,
                errant_gtid_set: "0-1-11..13".into(),
            },
        };
        assert_eq!(action_name(&archive), "Archive");
        assert_eq!(action_site(&archive), Some("iad"));
        assert_eq!(
            batches(&[push("iad"), archive.clone(), archive]),
            vec![0..1, 1..2, 2..3]
        );
        assert_eq!(
            annotation_write(&AnnotationChange::ClearRejoin, None, "ns", "g").expect("write"),
            (names::ANNOTATION_REJOIN, None)
        );
    }

    /// docs/design/history.md#issue-8 (detection at the 6 s floor of
    /// docs/design/requirements.md R001.9): the authority pushes of one poll reach every
    /// sidecar concurrently. Each fake sidecar answers only once all three requests are in
    /// flight (or after a pause much longer than the test needs); one by one, no request would
    /// ever see another in flight.
    #[tokio::test]
    async fn authority_pushes_of_one_poll_run_concurrently() {
        const SITES: usize = 3;
        /// (requests in flight now, most ever in flight), and the "all arrived" signal.
        type Shared = (Arc<Mutex<(usize, usize)>>, Arc<tokio::sync::Notify>);
        let in_flight = Arc::new(Mutex::new((0usize, 0usize)));
        let arrived = Arc::new(tokio::sync::Notify::new());
        let state = (in_flight.clone(), arrived.clone());
        let router = Router::new()
            .route(
                "/{site}/v1/authority",
                put(
                    |State((in_flight, arrived)): State<Shared>,
                     Path(_site): Path<String>,
                     Json(pushed): Json<Authority>| async move {
                        let all_in = {
                            let mut counts = in_flight.lock().expect("lock");
                            counts.0 += 1;
                            counts.1 = counts.1.max(counts.0);
                            counts.0 == SITES
                        };
                        if all_in {
                            arrived.notify_waiters();
                        } else {
                            let _ = tokio::time::timeout(
                                Duration::from_millis(200),
                                arrived.notified(),
                            )
                            .await;
                        }
                        in_flight.lock().expect("lock").0 -= 1;
                        Json(AuthorityResponse {
                            decision: AuthorityDecision::Accepted,
                            cached: Some(pushed),
                            last_granted_ago_ms: BTreeMap::new(),
                        })
                    },
                ),
            )
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });

        // No API server is contacted: pushes go to the sidecars only.
        let client = crate::test_support::unreachable_api_client();
        let sidecars =
            crate::test_support::playground_sidecars(format!("http://{address}/{{site}}"));
        let store = LeaseStore::new(client.clone());
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "bloodraven".into(),
                instance: None,
            },
        );
        let metrics = Metrics::new();
        let group = crate::test_support::playground_group("2s");
        let executor = Executor {
            client: &client,
            sidecars: &sidecars,
            store: &store,
            recorder: &recorder,
            metrics: &metrics,
            group: &group,
            leader: &LeaderFlag::new(true),
        };
        let decision = Decision {
            actions: vec![push("iad"), push("pdx"), push("reader")],
            memory: GroupMemory::from_status(&group.spec, None, Timestamp::from_unix_millis(0)),
            transitions: Vec::new(),
        };
        let failures = executor
            .execute(&decision, Timestamp::from_unix_millis(0))
            .await;
        assert_eq!(failures, 0);
        let (left, most) = *in_flight.lock().expect("lock");
        assert_eq!((left, most), (0, SITES), "all pushes in flight at once");
        server.abort();
    }

    /// docs/design/history.md#issue-10-case-5: the act step re-checks leadership before each
    /// action. With less than ACTION_MARGIN of the term left (a renewal stalled), neither the
    /// authority pushes nor the status write are issued: the sidecar sees no request. With a
    /// live term the same push goes out.
    #[tokio::test]
    async fn actions_are_not_issued_once_leadership_no_longer_holds() {
        let hits = Arc::new(Mutex::new(0usize));
        let router = Router::new()
            .route(
                "/{site}/v1/authority",
                put(
                    |State(hits): State<Arc<Mutex<usize>>>,
                     Path(_site): Path<String>,
                     Json(pushed): Json<Authority>| async move {
                        *hits.lock().expect("lock") += 1;
                        Json(AuthorityResponse {
                            decision: AuthorityDecision::Accepted,
                            cached: Some(pushed),
                            last_granted_ago_ms: BTreeMap::new(),
                        })
                    },
                ),
            )
            .with_state(hits.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let client = crate::test_support::unreachable_api_client();
        let sidecars =
            crate::test_support::playground_sidecars(format!("http://{address}/{{site}}"));
        let store = LeaseStore::new(client.clone());
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "bloodraven".into(),
                instance: None,
            },
        );
        let metrics = Metrics::new();
        let group = crate::test_support::playground_group("2s");
        let leader = LeaderFlag::new(false);
        let executor = Executor {
            client: &client,
            sidecars: &sidecars,
            store: &store,
            recorder: &recorder,
            metrics: &metrics,
            group: &group,
            leader: &leader,
        };
        let decision = Decision {
            actions: vec![push("iad"), push("pdx")],
            memory: GroupMemory::from_status(&group.spec, None, Timestamp::from_unix_millis(0)),
            transitions: Vec::new(),
        };
        let now = Timestamp::from_unix_millis(0);
        let term_left = crate::leader::ACTION_MARGIN / 2;
        leader.lead_until(tokio::time::Instant::now() + term_left);
        assert!(leader.is_leader(), "still leading, but not for long enough");
        assert_eq!(executor.execute(&decision, now).await, 2);
        let persisted = executor.persist(&decision.memory).await;
        assert!(
            persisted.as_ref().is_err_and(Error::is_not_leader),
            "status write not issued: {persisted:?}"
        );
        assert_eq!(*hits.lock().expect("lock"), 0, "no push reached a sidecar");

        leader.lead_until(tokio::time::Instant::now() + Duration::from_secs(10));
        assert_eq!(executor.execute(&decision, now).await, 0);
        assert_eq!(*hits.lock().expect("lock"), 2);
        server.abort();
    }
}
