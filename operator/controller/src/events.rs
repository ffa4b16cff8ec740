//! The Event recorder (`events.k8s.io/v1`): kube-runtime's [`Recorder`] with the note in the
//! series key.
//!
//! kube-runtime 5.0's recorder folds every Event with the same type, action, reason,
//! reporter and object into one series for six minutes, whatever its note: a second
//! `SiteFailed` (pdx) within that time bumps the count of the first (iad) and keeps iad's
//! message, and a reader of Events (an SRE, `kubectl describe`, the harness's `event`
//! expectation) sees the old message at the new time. client-go's events/v1 recorder keys
//! series on the note as well (kubernetes PR 112365, "to be consistent with the core API
//! aggregation"); this one does the same and is otherwise kube-runtime's: an Event is
//! created the first time, and a repeat within [`SERIES_TTL`] of the last occurrence patches
//! its `series` (count, lastObservedTime).
//!
//! The messages `decide` writes are stable for a stable situation (no clocks in them unless
//! the situation changed), so keying on the note does not turn a steady condition into a
//! new Event per poll.
//!
//! [`Recorder`]: kube::runtime::events::Recorder

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::Client;
use tokio::sync::Mutex;

/// How long after its last occurrence an Event still takes repeats as a series (kube-runtime
/// and client-go: six minutes).
pub const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// The identity of a series: what must all be equal for a repeat to count on an earlier
/// Event rather than be a new one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SeriesKey {
    type_: &'static str,
    action: String,
    reason: String,
    note: Option<String>,
    regarding: ReferenceKey,
    related: Option<ReferenceKey>,
}

impl SeriesKey {
    fn of(event: &Event, regarding: &ObjectReference) -> Self {
        Self {
            type_: type_name(event.type_),
            action: event.action.clone(),
            reason: event.reason.clone(),
            note: event.note.clone(),
            regarding: ReferenceKey::of(regarding),
            related: event.secondary.as_ref().map(ReferenceKey::of),
        }
    }
}

/// The fields of an object reference that name the object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ReferenceKey {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl ReferenceKey {
    fn of(reference: &ObjectReference) -> Self {
        Self {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
            uid: reference.uid.clone(),
        }
    }
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// The recent Events by series, and what to send next (pure: time is an input).
#[derive(Debug, Default)]
struct Series {
    recent: BTreeMap<SeriesKey, K8sEvent>,
}

impl Series {
    /// The Event to send for `event` about `regarding` at `now`, and whether it repeats an
    /// Event already sent (patch its series) rather than being a new one (create). Forgets
    /// series whose last occurrence is older than [`SERIES_TTL`].
    fn next(
        &mut self,
        reporter: &Reporter,
        event: &Event,
        regarding: &ObjectReference,
        now: Timestamp,
    ) -> (K8sEvent, bool) {
        self.recent
            .retain(|_, sent| last_occurrence(sent).is_none_or(|last| last + SERIES_TTL > now));
        match self.recent.get(&SeriesKey::of(event, regarding)) {
            Some(sent) => {
                let mut repeat = sent.clone();
                repeat.series = Some(EventSeries {
                    count: sent.series.as_ref().map_or(2, |series| series.count + 1),
                    last_observed_time: MicroTime(now),
                });
                (repeat, true)
            }
            None => (new_event(reporter, event, regarding, now), false),
        }
    }

    /// Remembers `sent` as the latest of its series (only once the API server took it).
    fn sent(&mut self, event: &Event, regarding: &ObjectReference, sent: K8sEvent) {
        self.recent.insert(SeriesKey::of(event, regarding), sent);
    }
}

fn last_occurrence(event: &K8sEvent) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .map(|series| series.last_observed_time.0)
        .or_else(|| event.event_time.as_ref().map(|time| time.0))
}

fn new_event(
    reporter: &Reporter,
    event: &Event,
    regarding: &ObjectReference,
    now: Timestamp,
) -> K8sEvent {
    K8sEvent {
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        related: event.secondary.clone(),
        note: event.note.clone(),
        type_: Some(type_name(event.type_).to_string()),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(format!(
                "{}.{:x}",
                regarding.name.as_deref().unwrap_or(&reporter.controller),
                now.as_nanosecond()
            )),
            ..ObjectMeta::default()
        },
        ..K8sEvent::default()
    }
}

/// Publishes Events as `reporter`; keep one per process so repeats form series.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    series: Arc<Mutex<Series>>,
}

impl Recorder {
    /// A recorder publishing through `client` as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            series: Arc::default(),
        }
    }

    /// Publishes `event` about `regarding` (in its namespace; `default` for a cluster-scoped
    /// object): created, or its series patched when it repeats one sent within
    /// [`SERIES_TTL`] with the same note.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        // Not held across the request: a slow API server must not stall other publishers
        // (two identical Events racing are then two Events, which loses nothing).
        let (next, repeat) =
            self.series
                .lock()
                .await
                .next(&self.reporter, event, regarding, Timestamp::now());
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let name = next.metadata.name.clone().unwrap_or_default();
        if repeat {
            events
                .patch(&name, &PatchParams::default(), &Patch::Merge(&next))
                .await?;
        } else {
            events.create(&PostParams::default(), &next).await?;
        }
        self.series.lock().await.sent(event, regarding, next);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reporter() -> Reporter {
        Reporter {
            controller: "bloodraven".into(),
            instance: Some("operator-0".into()),
        }
    }

    fn group() -> ObjectReference {
        ObjectReference {
            api_version: Some("bloodraven.shipstream.io/v1alpha1".into()),
            kind: Some("MysqlFailoverGroup".into()),
            namespace: Some("bloodraven-playground".into()),
            name: Some("playground".into()),
            uid: Some("u-1".into()),
            ..ObjectReference::default()
        }
    }

    fn event(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Observe".into(),
            secondary: None,
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("time")
    }

    /// The bug this module exists for: with kube-runtime's recorder the second failure
    /// (pdx) was a series of the first (iad) and showed iad's message.
    #[test]
    fn the_same_reason_with_another_note_is_a_new_event() {
        let mut series = Series::default();
        let iad = event("SiteFailed", "iad failed 3 consecutive polls");
        let pdx = event("SiteFailed", "pdx failed 3 consecutive polls");
        let (first, repeat) = series.next(&reporter(), &iad, &group(), at(0));
        assert!(!repeat);
        series.sent(&iad, &group(), first.clone());
        let (second, repeat) = series.next(&reporter(), &pdx, &group(), at(10));
        assert!(!repeat, "another note is another Event");
        assert_eq!(
            second.note.as_deref(),
            Some("pdx failed 3 consecutive polls")
        );
        assert_ne!(second.metadata.name, first.metadata.name);
        assert_eq!(second.type_.as_deref(), Some("Warning"));
        assert_eq!(second.reporting_instance.as_deref(), Some("operator-0"));
        assert_eq!(
            second.metadata.namespace.as_deref(),
            Some("bloodraven-playground")
        );
    }

    #[test]
    fn the_same_note_again_counts_on_its_event_until_the_series_ttl_passes() {
        let mut series = Series::default();
        let iad = event("SiteFailed", "iad failed 3 consecutive polls");
        let (first, _) = series.next(&reporter(), &iad, &group(), at(0));
        series.sent(&iad, &group(), first.clone());
        let (again, repeat) = series.next(&reporter(), &iad, &group(), at(30));
        assert!(repeat);
        assert_eq!(again.metadata.name, first.metadata.name);
        let counted = again.series.clone().expect("series");
        assert_eq!((counted.count, counted.last_observed_time.0), (2, at(30)));
        series.sent(&iad, &group(), again);
        let (third, repeat) = series.next(&reporter(), &iad, &group(), at(60));
        assert!(repeat);
        assert_eq!(third.series.as_ref().map(|s| s.count), Some(3));
        series.sent(&iad, &group(), third);
        // Six minutes after the last occurrence the series is over: a new Event.
        let later = at(60) + SERIES_TTL;
        let (fresh, repeat) = series.next(&reporter(), &iad, &group(), later);
        assert!(!repeat);
        assert!(fresh.series.is_none());
        assert_ne!(fresh.metadata.name, first.metadata.name);
        // An Event about another object never counts on this one's.
        let mut other = group();
        other.name = Some("other".into());
        series.sent(&iad, &group(), fresh);
        let (elsewhere, repeat) = series.next(&reporter(), &iad, &other, later);
        assert!(!repeat);
        assert_eq!(
            elsewhere.regarding.and_then(|r| r.name).as_deref(),
            Some("other")
        );
    }

    #[test]
    fn an_event_the_api_server_refused_is_not_counted_on() {
        let mut series = Series::default();
        let iad = event("SiteFailed", "iad failed 3 consecutive polls");
        let _ = series.next(&reporter(), &iad, &group(), at(0));
        // Never `sent`: the create failed, so the next one is created again.
        let (_, repeat) = series.next(&reporter(), &iad, &group(), at(1));
        assert!(!repeat);
    }
}
