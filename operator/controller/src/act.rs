//! Act: executes a [`Decision`]'s actions in order, then persists memory (status through the
//! status subresource, the cooldown annotation copy).
//!
//! Seed 001: an error from a mutation is an unknown, never "did not happen". Nothing here
//! retries or rolls back; each outcome is logged (group, site, action, generation, outcome)
//! and the next poll re-reads the state. The remaining actions of the poll still run (core
//! never makes a later action's safety depend on an earlier one of the same poll).

use bloodraven_api::{names, MysqlFailoverGroup, Timestamp};
use bloodraven_core::deploy::{DeployLeases, Tombstone};
use bloodraven_core::engine::{Action, AnnotationChange};
use bloodraven_core::{Decision, GroupMemory};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, Recorder};
use kube::{Api, Client, Resource};
use serde_json::json;

use crate::deploy_api::store::LeaseStore;
use crate::error::{Error, Result};
use crate::memory::status_of;
use crate::metrics::Metrics;
use crate::render;
use crate::sidecar::SidecarClient;

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
        | Action::SetPodLabels { site, .. } => Some(site),
        Action::ApplyService(service) => service.site.as_deref(),
        Action::ApplyDnsEndpoint { .. }
        | Action::RevokeDeployLeases { .. }
        | Action::Annotate(_)
        | Action::Event(_)
        | Action::Metric(_) => None,
    }
}

/// The annotation key and value (`None`: remove) of an annotation change (pure).
pub fn annotation_write(change: &AnnotationChange) -> (&'static str, Option<String>) {
    match change {
        AnnotationChange::SetCooldownUntil(until) => {
            (names::ANNOTATION_COOLDOWN_UNTIL, Some(until.to_string()))
        }
        AnnotationChange::SetLastFailover(text) => {
            (names::ANNOTATION_LAST_FAILOVER, Some(text.clone()))
        }
        AnnotationChange::ClearPlannedFailover => (names::ANNOTATION_PLANNED_FAILOVER, None),
        AnnotationChange::ClearRevokeDeploymentLeases => {
            (names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES, None)
        }
    }
}

impl Executor<'_> {
    fn namespace(&self) -> String {
        self.group.metadata.namespace.clone().unwrap_or_default()
    }

    fn name(&self) -> String {
        self.group.metadata.name.clone().unwrap_or_default()
    }

    /// Executes every action in order, logging each outcome; returns how many failed.
    pub async fn execute(&self, decision: &Decision, now: Timestamp) -> usize {
        let group = self.name();
        let generation = decision.memory.topology_generation;
        let mut failures = 0;
        let mut revoke_failed = false;
        for action in &decision.actions {
            let name = action_name(action);
            let site = action_site(action).unwrap_or("");
            if revoke_failed
                && matches!(
                    action,
                    Action::Annotate(AnnotationChange::ClearRevokeDeploymentLeases)
                )
            {
                // The revocation's outcome is unknown: keep the request so the next poll
                // re-reads and revokes again, instead of dropping it.
                tracing::warn!(group = %group, action = name, generation, outcome = "skipped", "revocation did not complete; keeping the revoke annotation");
                continue;
            }
            match self.execute_one(action, now).await {
                Ok(()) => match action {
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
                    | Action::ApplyDnsEndpoint { .. }
                    | Action::RevokeDeployLeases { .. }
                    | Action::Annotate(_) => {
                        tracing::info!(group = %group, site, action = name, generation, outcome = "ok", "action")
                    }
                },
                Err(error) => {
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
        failures
    }

    async fn execute_one(&self, action: &Action, now: Timestamp) -> Result<()> {
        let namespace = self.namespace();
        let group = self.name();
        match action {
            Action::TaintNode { node, .. } => self.retaint(node, true).await,
            Action::UntaintNode { node, .. } => self.retaint(node, false).await,
            Action::PushAuthority { site, authority }
            | Action::AnnounceAuthorityMove { site, authority } => {
                let answer = self
                    .sidecars
                    .push_authority(site, &namespace, authority)
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
                let (key, value) = annotation_write(change);
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
    /// (seed 003: a generation change revokes every lease with `TopologyChanged` and raises
    /// the Event). The leases are revoked whether or not the Event is published, so a failed
    /// publish is logged, never retried as a revocation.
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
    /// older, seed 001).
    pub async fn persist(&self, memory: &GroupMemory) -> Result<()> {
        let namespace = self.namespace();
        let name = self.name();
        let status = status_of(memory, self.group.metadata.generation);
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
