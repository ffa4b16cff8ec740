//! Each `MysqlDatabase`'s schema, created on the group's primary
//! (docs/design/operator.md#mysqldatabase: "`spec.database` is an SQL schema, which the
//! operator creates on the primary").
//!
//! After a poll's actions, while the group's authority is Valid, the `MysqlDatabase`s of the
//! group's namespace whose `spec.failoverGroupRef.name` is the group are ensured through the
//! active site's sidecar (`POST /v1/databases`; the operator never talks to MySQL itself, and
//! the sidecar refuses unless its site is the writable active site). Replication carries the
//! schema to the other sites.
//!
//! What was ensured is remembered in memory, per group, under the authority it was ensured
//! under ([`Ensured`]: the group's uid, the topology generation and the active site): a steady
//! state sends no sidecar request (one `list` of `MysqlDatabase`s per poll), and a new active
//! site, a new generation or a re-created group ensures every schema again (a request each,
//! answered `alreadyExisted` when replication brought it). A failure is logged and retried by
//! the next poll; the first failure under an authority raises a Warning Event on the
//! `MysqlDatabase`. A schema dropped by hand is not re-created until the authority changes or
//! the operator restarts.
//!
//! The `MysqlDatabase`s are listed as objects decoded one by one: one that does not decode is
//! reported on itself (`SpecUndecodable`, [`crate::decode`]) and skipped, and the schemas of
//! the others are ensured.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bloodraven_api::sidecar::{DatabaseOutcome, EnsureDatabaseRequest};
use bloodraven_api::{MysqlDatabase, MysqlFailoverGroup};
use bloodraven_core::GroupMemory;
use kube::api::ListParams;
use kube::runtime::events::{Event, EventType};
use kube::Resource;

use crate::decode::{list_decoded, Undecodable};
use crate::error::Error;
use crate::poll::Shell;
use crate::sidecar::MUTATION_TIMEOUT;

/// The most schemas one poll asks the sidecar for; the rest wait for the next poll.
pub const DATABASES_PER_POLL_MAX: usize = 16;
/// The shortest [`ensure_budget`], however short the poll interval.
pub const ENSURE_BUDGET_MIN: Duration = Duration::from_millis(250);
/// Event reason: the schema was created on the active site.
pub const REASON_CREATED: &str = "DatabaseCreated";
/// Event reason (Warning): the schema could not be ensured under the current authority.
pub const REASON_FAILED: &str = "DatabaseEnsureFailed";

/// One schema ensured under one authority.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ensured {
    /// The group's `metadata.uid` (a re-created group starts over).
    pub group_uid: String,
    /// `status.topologyGeneration` it was ensured under.
    pub topology_generation: u64,
    /// The active site whose sidecar ensured it.
    pub active_site: String,
    /// The schema name (`spec.database`).
    pub database: String,
}

/// The authority a poll ensures under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The group's `metadata.uid`.
    pub group_uid: String,
    /// The topology generation.
    pub topology_generation: u64,
    /// The active site.
    pub active_site: String,
}

impl Target {
    /// The key of `database` ensured under this target.
    pub fn key(&self, database: &str) -> Ensured {
        Ensured {
            group_uid: self.group_uid.clone(),
            topology_generation: self.topology_generation,
            active_site: self.active_site.clone(),
            database: database.to_string(),
        }
    }
}

/// What one group remembers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupBook {
    /// Schemas ensured.
    pub done: BTreeSet<Ensured>,
    /// Schemas whose failure already raised a Warning Event.
    pub warned: BTreeSet<Ensured>,
}

impl GroupBook {
    /// The schemas of `wanted` to ask for under `target` (pure), at most
    /// [`DATABASES_PER_POLL_MAX`], in name order. Forgets everything not ensured under
    /// `target` or no longer wanted, so the book stays as small as the group's schema list
    /// and a schema that comes back (or an authority that changes) is ensured again.
    pub fn needing(&mut self, target: &Target, wanted: &BTreeSet<String>) -> Vec<String> {
        let current = |key: &Ensured| {
            key.group_uid == target.group_uid
                && key.topology_generation == target.topology_generation
                && key.active_site == target.active_site
                && wanted.contains(&key.database)
        };
        self.done.retain(current);
        self.warned.retain(current);
        wanted
            .iter()
            .filter(|database| !self.done.contains(&target.key(database)))
            .take(DATABASES_PER_POLL_MAX)
            .cloned()
            .collect()
    }
}

/// Every group's [`GroupBook`], in memory only, shared by the poll loops of one process.
#[derive(Clone, Debug, Default)]
pub struct EnsuredDatabases {
    books: Arc<Mutex<BTreeMap<(String, String), GroupBook>>>,
}

impl EnsuredDatabases {
    fn books(&self) -> MutexGuard<'_, BTreeMap<(String, String), GroupBook>> {
        // Nothing here panics while holding the lock; a poisoned book is still a book.
        self.books
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// [`GroupBook::needing`] on `namespace/name`'s book.
    pub fn needing(
        &self,
        namespace: &str,
        name: &str,
        target: &Target,
        wanted: &BTreeSet<String>,
    ) -> Vec<String> {
        self.books()
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
            .needing(target, wanted)
    }

    /// Records `key` ensured.
    fn record_done(&self, namespace: &str, name: &str, key: Ensured) {
        self.books()
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
            .done
            .insert(key);
    }

    /// Records a failure of `key`; returns whether it is the first under its authority.
    fn record_failure(&self, namespace: &str, name: &str, key: Ensured) -> bool {
        self.books()
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
            .warned
            .insert(key)
    }
}

/// How long one poll spends ensuring schemas, in a poll of `poll_interval`: half the
/// interval, within [`ENSURE_BUDGET_MIN`]..=[`MUTATION_TIMEOUT`]. It is also each request's
/// timeout, and no request starts once it is spent (the rest wait for the next poll), so a
/// slow sidecar stretches a poll by at most twice the budget, about one interval.
pub fn ensure_budget(poll_interval: Duration) -> Duration {
    (poll_interval / 2).clamp(ENSURE_BUDGET_MIN, MUTATION_TIMEOUT)
}

/// Ensures the schemas of `group`'s `MysqlDatabase`s on the active site of `memory` (the
/// memory the poll's decision returned), when its authority is Valid and this replica leads
/// (re-checked before each schema's request).
pub async fn ensure(shell: &Shell, group: &MysqlFailoverGroup, memory: &GroupMemory) {
    if !memory.authority.is_valid() || !shell.leader.may_act() {
        return;
    }
    let name = group.metadata.name.clone().unwrap_or_default();
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let target = Target {
        group_uid: group.metadata.uid.clone().unwrap_or_default(),
        topology_generation: memory.topology_generation,
        active_site: memory.active_site.clone(),
    };
    // Decoded one by one: a `MysqlDatabase` that does not decode is reported and skipped, the
    // others of the namespace are ensured (docs/design/operator.md#mysqlfailovergroup, "An
    // object that does not decode is skipped and reported").
    let listed = match list_decoded::<MysqlDatabase>(
        &shell.client,
        Some(&namespace),
        &ListParams::default(),
    )
    .await
    {
        Ok(decoded) => {
            report_undecodable(shell, &namespace, &decoded.undecodable).await;
            decoded.objects
        }
        Err(error) => {
            let error = Error::kube(format!("list mysqldatabases in {namespace}"), error);
            tracing::warn!(group = %name, namespace = %namespace, %error, "failed to list databases; retried next poll");
            return;
        }
    };
    let ours: Vec<&MysqlDatabase> = listed
        .iter()
        .filter(|database| {
            database.spec.failover_group_ref.name == name
                && database.metadata.deletion_timestamp.is_none()
        })
        .collect();
    let wanted: BTreeSet<String> = ours
        .iter()
        .map(|database| database.spec.database.clone())
        .collect();
    let needed = shell.databases.needing(&namespace, &name, &target, &wanted);
    let budget = ensure_budget(group.spec.poll_interval.get());
    let started = tokio::time::Instant::now();
    for database in needed {
        // Each schema is a side effect of the leader's: re-checked before each request.
        if !shell.leader.may_act() {
            tracing::info!(group = %name, namespace = %namespace, "leadership lost; remaining databases not ensured");
            break;
        }
        if started.elapsed() >= budget {
            tracing::debug!(group = %name, namespace = %namespace, "database budget spent; the rest next poll");
            break;
        }
        let objects: Vec<&MysqlDatabase> = ours
            .iter()
            .copied()
            .filter(|object| object.spec.database == database)
            .collect();
        let key = target.key(&database);
        let request = EnsureDatabaseRequest {
            group: name.clone(),
            database: database.clone(),
        };
        let outcome = match request.database_problem() {
            Some(problem) => Err(format!("{} (not sent)", problem.describe())),
            None => shell
                .sidecars
                .ensure_database(&target.active_site, &namespace, &request, budget)
                .await
                .map_err(|error| error.to_string()),
        };
        match outcome {
            Ok(response) => {
                tracing::info!(group = %name, namespace = %namespace, database = %database, site = %target.active_site, generation = target.topology_generation, outcome = ?response.outcome, "database ensured on the active site");
                shell.databases.record_done(&namespace, &name, key);
                if response.outcome == DatabaseOutcome::Created {
                    let note = format!(
                        "schema {database:?} created on the active site {} (generation {})",
                        target.active_site, target.topology_generation
                    );
                    publish(shell, &objects, EventType::Normal, REASON_CREATED, note).await;
                }
            }
            Err(error) => {
                tracing::warn!(group = %name, namespace = %namespace, database = %database, site = %target.active_site, generation = target.topology_generation, %error, "failed to ensure database on the active site; retried next poll");
                if shell.databases.record_failure(&namespace, &name, key) {
                    let note = format!(
                        "schema {database:?} not ensured on the active site {}: {error}; retried every poll",
                        target.active_site
                    );
                    publish(shell, &objects, EventType::Warning, REASON_FAILED, note).await;
                }
            }
        }
    }
}

/// Reports the `MysqlDatabase`s of `namespace` that do not decode; those reported before that
/// decode again (or are gone) are resolved.
async fn report_undecodable(shell: &Shell, namespace: &str, undecodable: &[Undecodable]) {
    for object in undecodable {
        shell
            .undecodable
            .report(&shell.recorder, &shell.metrics, object)
            .await;
    }
    let still: BTreeSet<String> = undecodable
        .iter()
        .map(|object| object.name.clone())
        .collect();
    shell
        .undecodable
        .resolved_except(&shell.metrics, &MysqlDatabase::kind(&()), namespace, &still);
}

/// Raises an Event on each `MysqlDatabase` naming the schema; a failed publish is logged.
async fn publish(
    shell: &Shell,
    objects: &[&MysqlDatabase],
    type_: EventType,
    reason: &str,
    note: String,
) {
    for object in objects {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note.clone()),
            action: "EnsureDatabase".to_string(),
            secondary: None,
        };
        if let Err(error) = shell
            .recorder
            .publish(&event, &object.object_ref(&()))
            .await
        {
            tracing::warn!(database = ?object.metadata.name, reason, %error, "failed to publish database event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(generation: u64, site: &str) -> Target {
        Target {
            group_uid: "uid-1".into(),
            topology_generation: generation,
            active_site: site.into(),
        }
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    /// docs/design/operator.md#mysqldatabase (schema created on the primary) /
    /// docs/design/history.md#issue-8: a schema is asked for once per authority; a steady state
    /// asks for nothing; a new active site, a new generation, a re-created group or a schema
    /// that left and came back asks again; a failure is asked again next poll.
    #[test]
    fn which_databases_need_ensuring() {
        let mut book = GroupBook::default();
        let iad = target(1, "iad");
        let wanted = names(&["counter", "orders"]);
        assert_eq!(book.needing(&iad, &wanted), vec!["counter", "orders"]);
        // "orders" failed: only "counter" is recorded; the failure is retried.
        book.done.insert(iad.key("counter"));
        book.warned.insert(iad.key("orders"));
        assert_eq!(book.needing(&iad, &wanted), vec!["orders"]);
        book.done.insert(iad.key("orders"));
        assert!(book.needing(&iad, &wanted).is_empty(), "steady state");
        assert!(book.needing(&iad, &wanted).is_empty(), "and it stays so");

        // Failover: pdx at generation 2 ensures everything again; iad's entries are forgotten.
        let pdx = target(2, "pdx");
        assert_eq!(book.needing(&pdx, &wanted), vec!["counter", "orders"]);
        assert!(book.done.is_empty() && book.warned.is_empty());
        book.done.insert(pdx.key("counter"));
        book.done.insert(pdx.key("orders"));
        // A generation bump on the same site (primary reasserted after a planned failover
        // back, say) asks again too.
        let pdx_later = target(3, "pdx");
        assert_eq!(book.needing(&pdx_later, &wanted), vec!["counter", "orders"]);
        book.done.insert(pdx_later.key("counter"));
        book.done.insert(pdx_later.key("orders"));

        // A deleted MysqlDatabase is forgotten; re-created, it is asked for again.
        assert!(book.needing(&pdx_later, &names(&["counter"])).is_empty());
        assert_eq!(book.needing(&pdx_later, &wanted), vec!["orders"]);

        // A group deleted and re-created under the same name starts over at generation 1.
        let mut book = GroupBook::default();
        book.done.insert(iad.key("counter"));
        let recreated = Target {
            group_uid: "uid-2".into(),
            ..iad.clone()
        };
        assert_eq!(
            book.needing(&recreated, &names(&["counter"])),
            vec!["counter"]
        );
    }

    /// Every loop has a named bound
    /// (docs/design/style.md#4-assertions-for-invariants-result-for-the-world): one poll asks
    /// for at most DATABASES_PER_POLL_MAX schemas; the next poll asks for the rest.
    #[test]
    fn one_poll_asks_for_a_bounded_number_of_schemas() {
        let mut book = GroupBook::default();
        let iad = target(1, "iad");
        let wanted: BTreeSet<String> = (0..DATABASES_PER_POLL_MAX + 3)
            .map(|index| format!("db{index:02}"))
            .collect();
        let first = book.needing(&iad, &wanted);
        assert_eq!(first.len(), DATABASES_PER_POLL_MAX);
        for database in &first {
            book.done.insert(iad.key(database));
        }
        assert_eq!(book.needing(&iad, &wanted).len(), 3);
    }

    #[test]
    fn ensure_budget_is_half_the_poll_interval_within_bounds() {
        assert_eq!(
            ensure_budget(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
        assert_eq!(ensure_budget(Duration::from_millis(100)), ENSURE_BUDGET_MIN);
        assert_eq!(ensure_budget(Duration::from_secs(60)), MUTATION_TIMEOUT);
    }
}
