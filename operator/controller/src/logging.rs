//! The operator's log lines: one JSON object per event, with the message under a top-level
//! `msg` next to `timestamp`, `level`, `target` and the event's own fields, all at the top
//! level (docs/design/requirements.md R003.25: every deploy API request logs `msg="deploy api"`
//! with handler, group, instance, operationId and status, which an operator greps for).
//!
//! tracing-subscriber's JSON formatter puts the message under `fields.message` (or, with
//! `flatten_event`, under `message`); neither is the `msg` key the requirements read, and it has no
//! option to rename it, hence this formatter.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, SubscriberBuilder};
use tracing_subscriber::registry::LookupSpan;

/// The key of the event's message.
pub const MESSAGE_KEY: &str = "msg";
/// Keys every line has; an event field of the same name is written as `field.<name>`.
pub const RESERVED_KEYS: [&str; 5] = ["timestamp", "level", "target", MESSAGE_KEY, "spans"];

/// The JSON line formatter (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonLines;

/// A subscriber builder writing [`JsonLines`] to stdout; add a filter (and, in tests, a
/// writer) and install or finish it.
pub fn json_lines() -> SubscriberBuilder<DefaultFields, JsonLines> {
    tracing_subscriber::fmt().event_format(JsonLines)
}

/// Collects an event's fields as JSON values, the message under [`MESSAGE_KEY`].
#[derive(Default)]
struct FieldsVisitor {
    fields: Map<String, Value>,
}

impl FieldsVisitor {
    fn insert(&mut self, field: &Field, value: Value) {
        let key = match field.name() {
            "message" => MESSAGE_KEY.to_string(),
            name if RESERVED_KEYS.contains(&name) => format!("field.{name}"),
            name => name.to_string(),
        };
        self.fields.insert(key, value);
    }
}

impl Visit for FieldsVisitor {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.insert(field, Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.insert(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.insert(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.insert(field, Value::from(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.insert(field, Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.insert(field, Value::from(value.to_string()));
    }

    /// `%value` fields arrive here too, formatting as their `Display`.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.insert(field, Value::from(format!("{value:?}")));
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            Value::from(jiff::Timestamp::now().to_string()),
        );
        line.insert("level".into(), Value::from(metadata.level().as_str()));
        let mut visitor = FieldsVisitor::default();
        event.record(&mut visitor);
        if !visitor.fields.contains_key(MESSAGE_KEY) {
            line.insert(MESSAGE_KEY.into(), Value::from(""));
        }
        line.extend(visitor.fields);
        line.insert("target".into(), Value::from(metadata.target()));
        let spans: Vec<Value> = context
            .event_scope()
            .into_iter()
            .flat_map(|scope| scope.from_root())
            .map(|span| Value::from(span.name()))
            .collect();
        if !spans.is_empty() {
            line.insert("spans".into(), Value::Array(spans));
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::CapturedLogs;

    /// docs/design/requirements.md R003.25 (`msg="deploy api"` with its fields): the message is
    /// a top-level `msg`, the fields sit beside it with their JSON types, `%` fields as their
    /// Display text, and a field named like a fixed key does not overwrite it.
    #[test]
    fn a_line_carries_msg_and_the_fields_at_the_top_level() {
        let captured = CapturedLogs::default();
        {
            let _guard = captured.install();
            let instance = String::from("counter-app");
            tracing::info!(
                handler = "post_lease",
                instance = %instance,
                status = 201u16,
                held = false,
                level = "shadowed",
                "deploy api"
            );
            tracing::debug!("filtered out");
            tracing::info_span!("poll").in_scope(|| tracing::warn!(site = "iad", "action failed"));
        }
        let lines = captured.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        let line = &lines[0];
        assert_eq!(line["msg"], "deploy api");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["handler"], "post_lease");
        assert_eq!(line["instance"], "counter-app");
        assert_eq!(line["status"], 201);
        assert_eq!(line["held"], false);
        assert_eq!(line["field.level"], "shadowed");
        assert_eq!(
            line["target"], "bloodraven_operator::logging::tests",
            "{line}"
        );
        assert!(line.get("fields").is_none() && line.get("message").is_none());
        assert!(line["timestamp"]
            .as_str()
            .is_some_and(|text| text.parse::<jiff::Timestamp>().is_ok()));
        assert_eq!(
            (&lines[1]["msg"], &lines[1]["level"], &lines[1]["spans"]),
            (
                &Value::from("action failed"),
                &Value::from("WARN"),
                &serde_json::json!(["poll"])
            )
        );
    }
}
