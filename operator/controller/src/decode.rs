//! Reading the operator's custom resources one object at a time, so that one stored object
//! that does not decode is reported and skipped instead of stopping everything
//! (docs/design/operator.md#mysqlfailovergroup, "An object that does not decode is skipped and
//! reported").
//!
//! A typed LIST decodes every item or fails as a whole: one `MysqlFailoverGroup` with
//! `spec.pollInterval: fast` (stored by an API server that does not check the schema's
//! `pattern`, or before the CRD tightened, or an edge the schema allows such as `""`) made
//! the operator manage no group at all, also after a restart. So the operator never lists
//! its custom resources typed:
//!
//! - the poll loop discovers groups by their metadata only (`list_metadata`), and each
//!   group's loop reads its own object ([`get_api`]) and decodes it ([`decode`]);
//! - `MysqlDatabase`s (and the deploy API's reads) are listed as `DynamicObject`s and
//!   decoded one by one ([`list_decoded`]).
//!
//! An object that does not decode is an [`Undecodable`], naming the field
//! (`serde_path_to_error`: `spec.pollInterval`, `spec.sites[1].role`). The poll loop
//! reports it ([`DecodeReports::report`]): a Warning Event `SpecUndecodable` on the object
//! (it is addressable: its metadata always decodes), a log line naming kind, namespace, name
//! and field, and the gauge `bloodraven_undecodable_objects{kind,namespace,name}`. The Event
//! and the warning are repeated only when the problem changes or [`REPORT_REPEAT`] has
//! passed, so a poll every few seconds does not flood; the gauge stays 1 until the object
//! decodes again or is deleted ([`DecodeReports::resolved`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::events::Recorder;
use crate::metrics::{Metrics, ObjectLabels};

/// Event reason (Warning): a stored object does not decode; the operator skips it.
pub const REASON_UNDECODABLE: &str = "SpecUndecodable";
/// How long an unchanged problem goes unrepeated (Event and warning): under the Event
/// series' six minutes ([`crate::events::SERIES_TTL`]), so the repeats count on one Event.
pub const REPORT_REPEAT: Duration = Duration::from_secs(300);

/// A stored object that does not decode into the operator's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecodable {
    /// `apiVersion` of the type it should decode into.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// The path of the field that does not decode (`spec.pollInterval`); empty when the
    /// object itself is at fault.
    pub field: String,
    /// Why, as the decoder says it.
    pub error: String,
}

impl Undecodable {
    /// `field: error`.
    pub fn problem(&self) -> String {
        if self.field.is_empty() {
            self.error.clone()
        } else {
            format!("{}: {}", self.field, self.error)
        }
    }

    /// The Event's note.
    pub fn note(&self) -> String {
        format!(
            "{} {}/{} does not decode: {}; the operator skips it until it is fixed",
            self.kind,
            self.namespace,
            self.name,
            self.problem()
        )
    }

    /// The object, for Events.
    pub fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            uid: self.uid.clone(),
            ..ObjectReference::default()
        }
    }

    fn key(&self) -> ObjectKey {
        (self.kind.clone(), self.namespace.clone(), self.name.clone())
    }

    fn labels(&self) -> ObjectLabels {
        ObjectLabels {
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// Completes "failed to ..." (docs/design/style.md#5-one-error-enum-per-crate).
impl fmt::Display for Undecodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "decode {} {}/{}: {}",
            self.kind,
            self.namespace,
            self.name,
            self.problem()
        )
    }
}

/// `object` decoded as a `K`, or what does not decode, by field path.
pub fn decode<K>(object: DynamicObject) -> Result<K, Box<Undecodable>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let undecodable = |field: String, error: String| {
        Box::new(Undecodable {
            api_version: K::api_version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
            uid: object.metadata.uid.clone(),
            field,
            error,
        })
    };
    let value = serde_json::to_value(&object)
        .map_err(|error| undecodable(String::new(), error.to_string()))?;
    serde_path_to_error::deserialize(value).map_err(|error| {
        let field = match error.path().to_string() {
            root if root == "." => String::new(),
            path => path,
        };
        undecodable(field, error.into_inner().to_string())
    })
}

/// An API of `K`'s objects read as `DynamicObject`s (all namespaces when `namespace` is
/// `None`): reads that cannot fail on one object's spec.
pub fn get_api<K>(client: &Client, namespace: Option<&str>) -> Api<DynamicObject>
where
    K: Resource<DynamicType = ()>,
{
    let resource = ApiResource::erase::<K>(&());
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// The objects of one list, split into those that decode and those that do not.
#[derive(Clone, Debug)]
pub struct Decoded<K> {
    /// The objects that decode.
    pub objects: Vec<K>,
    /// The objects that do not.
    pub undecodable: Vec<Undecodable>,
}

/// Splits listed objects into those that decode as `K` and those that do not.
pub fn split<K>(items: impl IntoIterator<Item = DynamicObject>) -> Decoded<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let mut decoded = Decoded {
        objects: Vec::new(),
        undecodable: Vec::new(),
    };
    for item in items {
        match decode::<K>(item) {
            Ok(object) => decoded.objects.push(object),
            Err(undecodable) => decoded.undecodable.push(*undecodable),
        }
    }
    decoded
}

/// Lists `K`'s objects (in `namespace`, or all) and decodes each on its own: the list fails
/// only when the API call does.
pub async fn list_decoded<K>(
    client: &Client,
    namespace: Option<&str>,
    params: &ListParams,
) -> kube::Result<Decoded<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let listed = get_api::<K>(client, namespace).list(params).await?;
    Ok(split(listed.items))
}

/// `(kind, namespace, name)`.
type ObjectKey = (String, String, String);

/// What was reported, and when.
#[derive(Debug, Default)]
struct Book {
    reported: BTreeMap<ObjectKey, (String, Instant)>,
}

impl Book {
    /// Whether `problem` of `key` is to be reported at `now` (new, changed, or unrepeated for
    /// [`REPORT_REPEAT`]); if so, it counts as reported.
    fn due(&mut self, key: ObjectKey, problem: &str, now: Instant) -> bool {
        match self.reported.get(&key) {
            Some((said, at)) if said == problem && now.duration_since(*at) < REPORT_REPEAT => false,
            Some(_) | None => {
                self.reported.insert(key, (problem.to_string(), now));
                true
            }
        }
    }

    /// Forgets `key`; whether it had been reported.
    fn forget(&mut self, key: &ObjectKey) -> bool {
        self.reported.remove(key).is_some()
    }

    /// Forgets the objects of `kind` in `namespace` not named in `still`; returns them.
    fn forget_except(
        &mut self,
        kind: &str,
        namespace: &str,
        still: &BTreeSet<String>,
    ) -> Vec<ObjectKey> {
        let gone: Vec<ObjectKey> = self
            .reported
            .keys()
            .filter(|(k, n, name)| k == kind && n == namespace && !still.contains(name))
            .cloned()
            .collect();
        for key in &gone {
            self.reported.remove(key);
        }
        gone
    }
}

/// The undecodable objects reported (shared by every poll loop of the process, so one
/// `MysqlDatabase` seen by several groups' polls is reported once).
#[derive(Clone, Debug, Default)]
pub struct DecodeReports {
    book: Arc<Mutex<Book>>,
}

impl DecodeReports {
    fn book(&self) -> MutexGuard<'_, Book> {
        // A panic while holding this lock leaves a consistent map: recover it.
        self.book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reports `undecodable`: the gauge at once; the warning and the Warning Event when due.
    pub async fn report(&self, recorder: &Recorder, metrics: &Metrics, undecodable: &Undecodable) {
        metrics
            .undecodable_objects
            .get_or_create(&undecodable.labels())
            .set(1);
        let problem = undecodable.problem();
        if !self.book().due(undecodable.key(), &problem, Instant::now()) {
            tracing::debug!(kind = %undecodable.kind, namespace = %undecodable.namespace, name = %undecodable.name, field = %undecodable.field, "object still does not decode; skipped");
            return;
        }
        tracing::warn!(kind = %undecodable.kind, namespace = %undecodable.namespace, name = %undecodable.name, field = %undecodable.field, error = %undecodable.error, "object does not decode; skipped until it is fixed");
        let event = Event {
            type_: EventType::Warning,
            reason: REASON_UNDECODABLE.to_string(),
            note: Some(undecodable.note()),
            action: "Decode".to_string(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &undecodable.reference()).await {
            tracing::warn!(kind = %undecodable.kind, namespace = %undecodable.namespace, name = %undecodable.name, %error, "failed to publish SpecUndecodable event");
        }
    }

    /// `kind` `namespace/name` decodes again, or is gone: the gauge series goes.
    pub fn resolved(&self, metrics: &Metrics, kind: &str, namespace: &str, name: &str) {
        let key = (kind.to_string(), namespace.to_string(), name.to_string());
        if self.book().forget(&key) {
            tracing::info!(kind, namespace, name, "object decodes again (or is gone)");
        }
        remove_gauge(metrics, key);
    }

    /// After a list of `kind` in `namespace`: every object reported before that is not among
    /// `still` (the list's undecodable names) decodes again or is gone.
    pub fn resolved_except(
        &self,
        metrics: &Metrics,
        kind: &str,
        namespace: &str,
        still: &BTreeSet<String>,
    ) {
        let gone = self.book().forget_except(kind, namespace, still);
        for key in gone {
            tracing::info!(kind, namespace, name = %key.2, "object decodes again (or is gone)");
            remove_gauge(metrics, key);
        }
    }
}

fn remove_gauge(metrics: &Metrics, (kind, namespace, name): ObjectKey) {
    metrics.undecodable_objects.remove(&ObjectLabels {
        kind,
        namespace,
        name,
    });
}

#[cfg(test)]
mod tests {
    use bloodraven_api::{MysqlDatabase, MysqlFailoverGroup};
    use serde_json::json;

    use super::*;

    fn object(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).expect("dynamic object")
    }

    fn group(spec: serde_json::Value) -> DynamicObject {
        object(json!({
            "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlFailoverGroup",
            "metadata": {"name": "bad", "namespace": "team-a", "uid": "u-7"},
            "spec": spec
        }))
    }

    fn playground_spec() -> serde_json::Value {
        json!({
            "image": "mariadb:10.11",
            "sites": [{"name": "iad", "role": "read-write"}, {"name": "pdx", "role": "read-write"}],
            "initialActiveSite": "iad",
            "pollInterval": "2s"
        })
    }

    /// docs/design/operator.md#mysqlfailovergroup (an object that does not decode): what does
    /// not decode is named by its field path (the typed list's error, `parse duration "fast"`,
    /// named no object and no field).
    #[test]
    fn an_undecodable_group_names_its_namespace_name_and_field() {
        let mut spec = playground_spec();
        spec["pollInterval"] = json!("fast");
        let undecodable = decode::<MysqlFailoverGroup>(group(spec)).expect_err("fast");
        assert_eq!(
            (
                undecodable.kind.as_str(),
                undecodable.namespace.as_str(),
                undecodable.name.as_str(),
                undecodable.uid.as_deref(),
                undecodable.field.as_str()
            ),
            (
                "MysqlFailoverGroup",
                "team-a",
                "bad",
                Some("u-7"),
                "spec.pollInterval"
            )
        );
        assert!(
            undecodable.error.contains("parse duration \"fast\""),
            "{}",
            undecodable.error
        );
        assert!(
            undecodable
                .note()
                .starts_with("MysqlFailoverGroup team-a/bad does not decode: spec.pollInterval: "),
            "{}",
            undecodable.note()
        );
        let reference = undecodable.reference();
        assert_eq!(
            (
                reference.api_version.as_deref(),
                reference.uid.as_deref(),
                reference.namespace.as_deref()
            ),
            (
                Some("bloodraven.shipstream.io/v1"),
                Some("u-7"),
                Some("team-a")
            )
        );

        // The empty string the CRD's duration pattern lets through, a nested field, a missing
        // field.
        let mut spec = playground_spec();
        spec["pollInterval"] = json!("");
        let empty = decode::<MysqlFailoverGroup>(group(spec)).expect_err("empty");
        assert_eq!(empty.field, "spec.pollInterval");
        let mut spec = playground_spec();
        spec["sites"][1]["role"] = json!("writer");
        let role = decode::<MysqlFailoverGroup>(group(spec)).expect_err("role");
        assert_eq!(role.field, "spec.sites[1].role");
        let mut spec = playground_spec();
        spec.as_object_mut().expect("map").remove("image");
        let missing = decode::<MysqlFailoverGroup>(group(spec)).expect_err("image");
        assert_eq!(missing.problem(), "spec: missing field `image`");

        let fine = decode::<MysqlFailoverGroup>(group(playground_spec())).expect("decodes");
        assert_eq!(fine.spec.initial_active_site, "iad");
        assert_eq!(fine.metadata.uid.as_deref(), Some("u-7"));
    }

    /// docs/design/operator.md#mysqlfailovergroup (an object that does not decode): one
    /// `MysqlDatabase` that does not decode is set apart; the others of the same list are kept.
    #[test]
    fn a_list_keeps_every_object_that_decodes() {
        let database = |name: &str, spec: serde_json::Value| {
            object(json!({
                "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlDatabase",
                "metadata": {"name": name, "namespace": "team-a"},
                "spec": spec
            }))
        };
        let decoded = split::<MysqlDatabase>([
            database(
                "counter",
                json!({"failoverGroupRef": {"name": "playground"}, "database": "counter"}),
            ),
            database(
                "broken",
                json!({"failoverGroupRef": "playground", "database": "orders"}),
            ),
            database(
                "orders",
                json!({"failoverGroupRef": {"name": "playground"}, "database": "orders"}),
            ),
        ]);
        let names: Vec<_> = decoded
            .objects
            .iter()
            .map(|database| database.spec.database.as_str())
            .collect();
        assert_eq!(names, ["counter", "orders"]);
        assert_eq!(decoded.undecodable.len(), 1);
        assert_eq!(
            (
                decoded.undecodable[0].name.as_str(),
                decoded.undecodable[0].field.as_str()
            ),
            ("broken", "spec.failoverGroupRef")
        );
    }

    fn key(name: &str) -> ObjectKey {
        ("MysqlDatabase".into(), "team-a".into(), name.into())
    }

    /// A poll every few seconds does not flood: the same problem is reported again only after
    /// REPORT_REPEAT; a new problem, or one that came back after being fixed, at once.
    #[test]
    fn reports_repeat_only_when_the_problem_changes_or_after_the_repeat_interval() {
        let mut book = Book::default();
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        assert!(book.due(key("a"), "spec.database: invalid type", at(0)));
        for seconds in [2, 4, 60, 299] {
            assert!(!book.due(key("a"), "spec.database: invalid type", at(seconds)));
        }
        assert!(book.due(key("b"), "spec.database: invalid type", at(10)));
        assert!(book.due(key("a"), "spec: missing field `database`", at(300)));
        assert!(!book.due(key("a"), "spec: missing field `database`", at(302)));
        assert!(book.due(key("a"), "spec: missing field `database`", at(600)));
        // Fixed, then broken again: news.
        assert!(book.forget(&key("a")));
        assert!(!book.forget(&key("a")));
        assert!(book.due(key("a"), "spec: missing field `database`", at(601)));
        // A list in which only b is still undecodable resolves a.
        let gone = book.forget_except("MysqlDatabase", "team-a", &BTreeSet::from(["b".into()]));
        assert_eq!(gone, vec![key("a")]);
        assert!(book.reported.contains_key(&key("b")), "b is still reported");
    }

    /// The gauge is 1 while the object does not decode and goes once it does.
    #[tokio::test]
    async fn the_gauge_names_the_object_while_it_does_not_decode() {
        let metrics = Metrics::new();
        let reports = DecodeReports::default();
        // Events go nowhere (nobody listens): a failed publish is only logged.
        let recorder = Recorder::new(
            crate::test_support::unreachable_api_client(),
            kube::runtime::events::Reporter {
                controller: "bloodraven".into(),
                instance: None,
            },
        );
        let mut spec = playground_spec();
        spec["pollInterval"] = json!("fast");
        let undecodable = decode::<MysqlFailoverGroup>(group(spec)).expect_err("fast");
        reports.report(&recorder, &metrics, &undecodable).await;
        let series = "bloodraven_undecodable_objects{kind=\"MysqlFailoverGroup\",namespace=\"team-a\",name=\"bad\"} 1";
        assert!(metrics.encode().contains(series), "{}", metrics.encode());
        reports.resolved(&metrics, "MysqlFailoverGroup", "team-a", "bad");
        assert!(!metrics.encode().contains("name=\"bad\""));
    }
}
