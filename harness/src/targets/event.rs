//! `event`: a Kubernetes Event of the group's namespace, by reason, type and message, that
//! occurred since the latest fault, action, heal or apply step.

use k8s_openapi::api::core::v1::Event as KubeEvent;
use kube::api::{Api, ListParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::cluster_error;
use crate::live::LiveCluster;
use crate::playground::names::NAMESPACE;

/// A Kubernetes Event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventExpect {
    /// `reason`.
    pub reason: String,
    /// `Normal` or `Warning`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The message contains this.
    #[serde(default)]
    pub message_contains: Option<String>,
}

/// Every event of the group's namespace with the reason asked for (more are fine):
/// `{"events": [{"reason": "PrimaryReasserted", "type": "Normal", "message": "...", "time":
/// "2026-01-01T00:00:07Z"}]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventsSeen {
    /// The events.
    #[serde(default)]
    pub events: Vec<SeenEvent>,
}

/// One event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeenEvent {
    /// `reason`.
    #[serde(default)]
    pub reason: Option<String>,
    /// `type`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// `message`.
    #[serde(default)]
    pub message: Option<String>,
    /// The latest occurrence (`lastTimestamp`, else `eventTime`, else `firstTimestamp`), RFC
    /// 3339.
    #[serde(default)]
    pub time: Option<String>,
}

impl ExpectTarget for EventExpect {
    const NAME: &'static str = "event";
    type Observation = EventsSeen;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<EventsSeen> {
        let events: Api<KubeEvent> = Api::namespaced(live.client().clone(), NAMESPACE);
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| cluster_error("list events", e))?;
        let events = list
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(self.reason.as_str()))
            .map(|e| {
                let time = e
                    .last_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
                    .or_else(|| e.first_timestamp.as_ref().map(|t| t.0.to_string()));
                SeenEvent {
                    reason: e.reason,
                    type_: e.type_,
                    message: e.message,
                    time,
                }
            })
            .collect();
        Ok(EventsSeen { events })
    }

    /// An event of that reason, type and message at or after `since`.
    fn evaluate(
        &self,
        observed: &EventsSeen,
        judging: &Judging<'_, EventsSeen>,
    ) -> Result<(), String> {
        let since = judging.since;
        // Event times are whole seconds: an event in the same second as `since` counts.
        let floor = jiff::Timestamp::from_second(since.as_second()).unwrap_or(since);
        let mut earlier = 0;
        let mut other = 0;
        for item in &observed.events {
            if item.reason.as_deref() != Some(self.reason.as_str()) {
                continue;
            }
            let type_ok = self
                .type_
                .as_deref()
                .is_none_or(|wanted| item.type_.as_deref() == Some(wanted));
            let message_ok = self.message_contains.as_deref().is_none_or(|needle| {
                item.message
                    .as_deref()
                    .is_some_and(|message| message.contains(needle))
            });
            if !(type_ok && message_ok) {
                other += 1;
                continue;
            }
            let time = item
                .time
                .as_deref()
                .and_then(|text| text.parse::<jiff::Timestamp>().ok());
            match time {
                Some(time) if time >= floor => return Ok(()),
                _ => earlier += 1,
            }
        }
        Err(format!(
            "no {} event since {since:.0} ({earlier} earlier or undated, {other} of another type or message)",
            self.wanted()
        ))
    }

    fn describe(&self) -> Option<String> {
        Some(self.reason.clone())
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.text(&mut self.reason);
        substitution.texts(
            [&mut self.type_, &mut self.message_contains]
                .into_iter()
                .flatten(),
        );
    }
}

impl EventExpect {
    /// The event it wants, in words.
    fn wanted(&self) -> String {
        let mut wanted = self.reason.clone();
        if let Some(type_) = &self.type_ {
            wanted = format!("{type_} {wanted}");
        }
        if let Some(needle) = &self.message_contains {
            wanted = format!("{wanted} with a message containing {needle:?}");
        }
        wanted
    }
}
