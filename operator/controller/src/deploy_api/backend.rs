//! What the deploy API needs from the cluster, behind a trait so its handlers can be tested
//! with the real router and core's state machine over an in-memory store.

use std::sync::Arc;
use std::time::Duration;

use crate::events::Recorder;
use bloodraven_api::{MysqlDatabase, MysqlFailoverGroup, Timestamp};
use bloodraven_core::deploy::{authorized_clients, AuthorizedClient, DeployLeases, Tombstone};
use bloodraven_core::GroupMemory;
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ListParams;
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Client, Resource};

use super::store::LeaseStore;
use crate::decode::list_decoded;
use crate::error::{Error, Result};
use crate::memory::MemoryBoard;
use crate::poll::wall_clock;
use crate::render::owner_reference;

/// A group as the deploy API sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupRef {
    /// Namespace of the group.
    pub namespace: String,
    /// Name of the group.
    pub name: String,
    /// The operator's memory of the group: core judges `stable`, `unstableReason` and the
    /// lease stability from it (`engine::unstable_reason`, `engine::lease_stability`).
    pub memory: GroupMemory,
    /// `spec.pollInterval`: the retry hint of a 423.
    pub poll_interval: Duration,
    /// Owner reference for the lease objects.
    pub owner: Option<OwnerReference>,
    /// The object reference Events are raised on.
    pub reference: Option<k8s_openapi::api::core::v1::ObjectReference>,
}

impl GroupRef {
    /// The view of a `MysqlFailoverGroup` object with `memory`.
    pub fn with_memory(group: &MysqlFailoverGroup, memory: GroupMemory) -> Self {
        Self {
            namespace: group.metadata.namespace.clone().unwrap_or_default(),
            name: group.metadata.name.clone().unwrap_or_default(),
            memory,
            poll_interval: group.spec.poll_interval.get(),
            owner: owner_reference(group),
            reference: Some(group.object_ref(&())),
        }
    }

    /// The view of a `MysqlFailoverGroup` object: its memory is the one the poll loop
    /// published on `board`, else (before the first poll of this leader) the memory core
    /// loads from the group's status at `now`.
    pub fn of(group: &MysqlFailoverGroup, board: &MemoryBoard, now: Timestamp) -> Self {
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let name = group.metadata.name.clone().unwrap_or_default();
        let memory = board
            .get(&namespace, &name)
            .unwrap_or_else(|| GroupMemory::from_status(&group.spec, group.status.as_ref(), now));
        Self::with_memory(group, memory)
    }

    /// `namespace/name`, the metrics label.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The cluster as the deploy API uses it.
pub trait DeployBackend: Send + Sync {
    /// Every group named `name` (only in `namespace` when given).
    fn find_groups<'a>(
        &'a self,
        name: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<GroupRef>>>;
    /// The group's authorized clients, from `MysqlDatabase.spec.deploymentClients`.
    fn authorized_clients<'a>(
        &'a self,
        group: &'a GroupRef,
    ) -> BoxFuture<'a, Result<Vec<AuthorizedClient>>>;
    /// The stored lease state of the group.
    fn load<'a>(&'a self, group: &'a GroupRef) -> BoxFuture<'a, Result<DeployLeases>>;
    /// Persists `after` (diffed against `before`).
    fn save<'a>(
        &'a self,
        group: &'a GroupRef,
        before: &'a DeployLeases,
        after: &'a DeployLeases,
    ) -> BoxFuture<'a, Result<()>>;
    /// Raises `DeploymentLeaseRevoked` on the group for leases revoked while handling a
    /// request (a generation change noticed by the API before the poll loop did).
    fn leases_revoked<'a>(
        &'a self,
        group: &'a GroupRef,
        revoked: &'a [Tombstone],
    ) -> BoxFuture<'a, ()>;
}

/// The real backend over the Kubernetes API.
#[derive(Clone)]
pub struct KubeBackend {
    client: Client,
    store: LeaseStore,
    recorder: Arc<Recorder>,
    board: MemoryBoard,
}

impl KubeBackend {
    /// A backend sharing `store` (and its lock) with the poll loop; groups are judged from
    /// their status until [`KubeBackend::with_board`] shares the poll loop's memories.
    pub fn new(client: Client, store: LeaseStore, reporter: Reporter) -> Self {
        Self {
            recorder: Arc::new(Recorder::new(client.clone(), reporter)),
            client,
            store,
            board: MemoryBoard::new(),
        }
    }

    /// Judges groups from the memories the poll loop publishes on `board`.
    pub fn with_board(mut self, board: MemoryBoard) -> Self {
        self.board = board;
        self
    }
}

impl DeployBackend for KubeBackend {
    fn find_groups<'a>(
        &'a self,
        name: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<GroupRef>>> {
        Box::pin(async move {
            let params = ListParams::default().fields(&format!("metadata.name={name}"));
            let groups = list_decoded::<MysqlFailoverGroup>(&self.client, namespace, &params)
                .await
                .map_err(|error| {
                    Error::kube(format!("list mysqlfailovergroups named {name}"), error)
                })?;
            // A group of this name that does not decode may be the one asked about: say so
            // rather than answer without it (the poll loop reports it on the object).
            if let Some(undecodable) = groups.undecodable.into_iter().next() {
                return Err(Error::Undecodable(Box::new(undecodable)));
            }
            let now = wall_clock();
            Ok(groups
                .objects
                .iter()
                .map(|group| GroupRef::of(group, &self.board, now))
                .collect())
        })
    }

    fn authorized_clients<'a>(
        &'a self,
        group: &'a GroupRef,
    ) -> BoxFuture<'a, Result<Vec<AuthorizedClient>>> {
        Box::pin(async move {
            let databases = list_decoded::<MysqlDatabase>(
                &self.client,
                Some(&group.namespace),
                &ListParams::default(),
            )
            .await
            .map_err(|error| {
                Error::kube(format!("list mysqldatabases in {}", group.namespace), error)
            })?;
            // One that does not decode authorizes nobody; the others still do (the poll loop
            // reports it on the object).
            for undecodable in &databases.undecodable {
                tracing::warn!(kind = %undecodable.kind, namespace = %undecodable.namespace, name = %undecodable.name, field = %undecodable.field, error = %undecodable.error, "object does not decode; its deployment clients are not authorized");
            }
            Ok(authorized_clients(
                &group.namespace,
                &group.name,
                &databases.objects,
            ))
        })
    }

    fn load<'a>(&'a self, group: &'a GroupRef) -> BoxFuture<'a, Result<DeployLeases>> {
        Box::pin(self.store.load(&group.namespace, &group.name))
    }

    fn save<'a>(
        &'a self,
        group: &'a GroupRef,
        before: &'a DeployLeases,
        after: &'a DeployLeases,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.store.save(
            &group.namespace,
            &group.name,
            before,
            after,
            group.owner.clone(),
        ))
    }

    fn leases_revoked<'a>(
        &'a self,
        group: &'a GroupRef,
        revoked: &'a [Tombstone],
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(reference) = &group.reference else {
                return;
            };
            let operations: Vec<String> = revoked
                .iter()
                .map(|tombstone| {
                    format!(
                        "{} {} ({})",
                        tombstone.kind, tombstone.operation_id, tombstone.reason
                    )
                })
                .collect();
            let event = Event {
                type_: EventType::Normal,
                reason: "DeploymentLeaseRevoked".into(),
                note: Some(format!(
                    "deployment leases revoked: {}",
                    operations.join(", ")
                )),
                action: "DeployLeases".into(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, reference).await {
                tracing::warn!(group = %group.key(), %error, "failed to publish DeploymentLeaseRevoked event");
            }
        })
    }
}
