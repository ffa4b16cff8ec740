//! `scenarios/schema.json`: a JSON Schema of a scenario file, derived from the model
//! ([`super::model`]) so editors validate a scenario as it is typed (a
//! `# yaml-language-server: $schema=./schema.json` line, see docs/scenarios.md).
//!
//! `cargo run -p bloodraven-harness --bin scenario-schema` (`just scenario-schema`) writes it;
//! a test in the harness test binary fails when the committed file differs from what the model
//! generates. The schema checks the shape (kinds, fields, enums, spellings of durations and
//! offsets); the rules across fields and steps stay [`super::validate`]'s.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::model::Scenario;

/// The file, relative to the workspace root.
pub const SCHEMA_FILE: &str = "scenarios/schema.json";

/// The command that regenerates [`SCHEMA_FILE`].
pub const REGENERATE: &str = "cargo run -p bloodraven-harness --bin scenario-schema";

/// The schema of a scenario file as pretty JSON with a trailing newline: draft 07, which
/// every YAML language server reads.
pub fn render() -> String {
    let mut schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<Scenario>();
    if let Some(object) = schema.as_object_mut() {
        object.insert("title".to_owned(), "Bloodraven scenario".into());
        object.insert(
            "$comment".to_owned(),
            format!("Generated from harness/src/scenario/model.rs by `{REGENERATE}`; do not edit. The reference is docs/scenarios.md.").into(),
        );
    }
    let mut value = schema.to_value();
    tidy(&mut value);
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// Makes the derived schema read well in an editor's hover: descriptions (the model's doc
/// comments) lose rustdoc's link brackets and their hard line breaks, and the `default: null`
/// every optional field carries goes (absent means the same).
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            for (key, child) in map.iter_mut() {
                match child {
                    Value::String(text) if key == "description" => *text = plain(text),
                    _ => tidy(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// A doc comment as plain text: paragraphs kept, lines within one joined, and a rustdoc link
/// `` [`crate::a::b`] `` written as the file it names (`` `harness/src/a/b.rs` ``;
/// `super::` is the scenario module), any other `` [`x`] `` as `` `x` ``.
fn plain(doc: &str) -> String {
    let joined = doc
        .split("\n\n")
        .map(|paragraph| paragraph.split('\n').collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut out = String::with_capacity(joined.len());
    let mut rest = joined.as_str();
    while let Some(start) = rest.find("[`") {
        let Some(end) = rest[start..].find("`]") else {
            break;
        };
        out.push_str(&rest[..start]);
        let target = &rest[start + 2..start + end];
        let file = target
            .strip_prefix("crate::")
            .map(|path| format!("harness/src/{}.rs", path.replace("::", "/")))
            .or_else(|| {
                target
                    .strip_prefix("super::")
                    .map(|path| format!("harness/src/scenario/{}.rs", path.replace("::", "/")))
            });
        out.push('`');
        out.push_str(file.as_deref().unwrap_or(target));
        out.push('`');
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_read_as_plain_text() {
        assert_eq!(
            plain("A one-key map (see [`super::single_key`]),\nread [`crate::runner::evaluate`]\nand [`Span`].\n\nNext."),
            "A one-key map (see `harness/src/scenario/single_key.rs`), read `harness/src/runner/evaluate.rs` and `Span`.\n\nNext."
        );
        assert_eq!(plain("[`unclosed"), "[`unclosed");
    }
}
