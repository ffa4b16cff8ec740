//! scenarios/schema.json: current with the model, and faithful to the parser: every scenario
//! of the catalogue and every example of docs/scenarios.md fits it, and it refuses what the
//! parser refuses for its shape. Checked with a small validator of the JSON Schema keywords
//! the generator emits (it fails on any other keyword, so a new one is noticed).

use std::path::Path;

use bloodraven_harness::scenario::schema::{render, REGENERATE, SCHEMA_FILE};
use bloodraven_harness::scenario::span::{Span, OFFSET_PATTERN, SPAN_PATTERN};
use bloodraven_harness::scenario::validate::parse_scenario;
use serde_json::Value;

use super::reference::reference;

fn workspace_root() -> std::path::PathBuf {
    bloodraven_harness::backend::workspace_root()
}

fn schema() -> Value {
    serde_json::from_str(&render()).expect("the rendered schema is JSON")
}

#[test]
fn the_committed_schema_is_current() {
    let path = workspace_root().join(SCHEMA_FILE);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == render(),
        "{SCHEMA_FILE} differs from the scenario model (harness/src/scenario/model.rs): run `{REGENERATE}` (`just scenario-schema`) and commit it"
    );
}

/// Validates `value` against `schema` (within `root`, for `$ref`), pushing what fails.
fn check(root: &Value, schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            errors.push(format!("{path}: nothing is allowed here"));
        }
        return;
    };
    for (keyword, operand) in map {
        match keyword.as_str() {
            "$ref" => {
                let pointer = operand
                    .as_str()
                    .and_then(|reference| reference.strip_prefix('#'))
                    .unwrap_or_default();
                let target = root
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("dangling $ref {operand}"));
                check(root, target, value, path, errors);
            }
            "allOf" => {
                for branch in operand.as_array().into_iter().flatten() {
                    check(root, branch, value, path, errors);
                }
            }
            "anyOf" | "oneOf" => {
                let mut branch_errors = Vec::new();
                let fitting = operand
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|branch| {
                        let mut own = Vec::new();
                        check(root, branch, value, path, &mut own);
                        let fits = own.is_empty();
                        branch_errors.extend(own);
                        fits
                    })
                    .count();
                let ok = if keyword == "oneOf" {
                    fitting == 1
                } else {
                    fitting >= 1
                };
                if !ok {
                    errors.push(format!(
                        "{path}: {fitting} branches of {keyword} fit ({})",
                        branch_errors.join("; ")
                    ));
                }
            }
            "type" => {
                let types: Vec<&str> = match operand {
                    Value::String(one) => vec![one.as_str()],
                    Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("type {operand}"),
                };
                if !types.iter().any(|kind| is_type(kind, value)) {
                    errors.push(format!("{path}: {value} is not of type {operand}"));
                }
            }
            "enum" => {
                if !operand
                    .as_array()
                    .is_some_and(|items| items.contains(value))
                {
                    errors.push(format!("{path}: {value} is none of {operand}"));
                }
            }
            "const" => {
                if operand != value {
                    errors.push(format!("{path}: {value} is not {operand}"));
                }
            }
            "properties" => {
                if let Value::Object(object) = value {
                    for (name, property) in operand.as_object().into_iter().flatten() {
                        if let Some(child) = object.get(name) {
                            check(root, property, child, &format!("{path}.{name}"), errors);
                        }
                    }
                }
            }
            "required" => {
                if let Value::Object(object) = value {
                    for name in operand.as_array().into_iter().flatten() {
                        let name = name.as_str().unwrap_or_default();
                        if !object.contains_key(name) {
                            errors.push(format!("{path}: `{name}` is required"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Value::Object(object) = value {
                    let known = map.get("properties").and_then(Value::as_object);
                    for (name, child) in object {
                        if known.is_some_and(|known| known.contains_key(name)) {
                            continue;
                        }
                        match operand {
                            Value::Bool(false) => {
                                errors.push(format!("{path}: unknown field `{name}`"));
                            }
                            Value::Bool(true) => {}
                            schema => check(root, schema, child, &format!("{path}.{name}"), errors),
                        }
                    }
                }
            }
            "items" => {
                if let Value::Array(items) = value {
                    for (index, item) in items.iter().enumerate() {
                        check(root, operand, item, &format!("{path}[{index}]"), errors);
                    }
                }
            }
            "pattern" => {
                if let Value::String(text) = value {
                    let pattern = operand.as_str().unwrap_or_default();
                    let regex = regex::Regex::new(pattern)
                        .unwrap_or_else(|error| panic!("pattern {pattern}: {error}"));
                    if !regex.is_match(text) {
                        errors.push(format!("{path}: {text:?} does not match {pattern}"));
                    }
                }
            }
            "minimum" | "maximum" => {
                if let (Some(found), Some(bound)) = (value.as_f64(), operand.as_f64()) {
                    let ok = if keyword == "minimum" {
                        found >= bound
                    } else {
                        found <= bound
                    };
                    if !ok {
                        errors.push(format!("{path}: {found} is beyond the {keyword} {bound}"));
                    }
                }
            }
            "description" | "default" | "format" | "title" | "$schema" | "$comment"
            | "definitions" => {}
            other => panic!(
                "the schema uses `{other}`, which this test's validator does not know: teach it"
            ),
        }
    }
}

fn is_type(kind: &str, value: &Value) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        other => panic!("unknown type {other}"),
    }
}

/// What the schema says of a scenario file's text (empty: it fits).
fn schema_errors(schema: &Value, source: &str) -> Vec<String> {
    let value: Value = match serde_yaml::from_str(source) {
        Ok(value) => value,
        Err(error) => return vec![format!("not YAML: {error}")],
    };
    let mut errors = Vec::new();
    check(schema, schema, &value, "", &mut errors);
    errors
}

#[test]
fn every_scenario_and_reference_example_fits_the_schema() {
    let schema = schema();
    let mut failures = Vec::new();
    let dir = workspace_root().join("scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() > 30, "{} scenario files", files.len());
    for file in &files {
        let source = std::fs::read_to_string(file).expect("read a scenario");
        for error in schema_errors(&schema, &source) {
            failures.push(format!("{}: {error}", file.display()));
        }
    }
    for example in reference().examples {
        let (_, source) = example.as_scenario();
        for error in schema_errors(&schema, &source) {
            failures.push(format!("{}: {error}", example.at()));
        }
    }
    assert!(
        failures.is_empty(),
        "valid scenarios the schema refuses:\n{}",
        failures.join("\n")
    );
}

// Shapes the parser refuses, each refused by the schema too (an editor flags them as typed).
#[test]
fn the_schema_refuses_what_the_parser_refuses_for_its_shape() {
    let schema = schema();
    let header = "id: 38\ntitle: t\nseed: \"harness.md: x\"\nsteps:\n";
    for steps in [
        "- fault: {kill: {site: atlantis, container: mysql}}\n",
        "- fault: {kill: {site: iad, container: mysql, keepdown: true}}\n",
        "- fault: {explode: {site: iad}}\n",
        "- fault: {partition: {everything: [iad]}}\n",
        "- expect: {within: 20, group: {activeSite: pdx}}\n",
        "- expect: {within: 20sec, group: {activeSite: pdx}}\n",
        "- expect: {within: 1s, gruop: {activeSite: pdx}}\n",
        "- expect: {within: 1s, dns: {target: iad}}\n",
        "- heal: everything\n",
        "- sleep: 1s\n  measure: {quantity: detection}\n",
        "- measure: {quantity: latency}\n",
        "- fault: {clock-offset: {site: iad, offset: 20s}}\n",
        "- expect: {within: 1s, mysql: {site: iad, clockOffset: {atLeast: -1s, atMost: 1s}}}\n",
    ] {
        let source = format!("{header}{steps}");
        assert!(
            parse_scenario(Path::new("scenarios/038-x.yaml"), &source).is_err(),
            "the parser accepts {steps}"
        );
        assert!(
            !schema_errors(&schema, &source).is_empty(),
            "the schema accepts {steps}"
        );
    }
    let unknown_top = "id: 38\ntitle: t\nseed: \"harness.md: x\"\nstep: []\n";
    assert!(!schema_errors(&schema, unknown_top).is_empty());
}

// The patterns say what `Span::parse` and `offset_ms` read (save the bounds: zero, over 1h).
#[test]
fn the_duration_and_offset_patterns_agree_with_the_parsers() {
    let span = regex::Regex::new(SPAN_PATTERN).expect("span pattern");
    let offset = regex::Regex::new(OFFSET_PATTERN).expect("offset pattern");
    for text in [
        "20s",
        "500ms",
        "1m30s",
        "1h",
        "2m5s250ms",
        "5m",
        "5ms",
        "59m5ms",
        "1m500ms",
        "59m59s999ms",
    ] {
        assert!(Span::parse(text).is_ok(), "{text}");
        assert!(span.is_match(text), "{text}");
        assert!(offset.is_match(&format!("+{text}")), "+{text}");
        assert!(offset.is_match(&format!("-{text}")), "-{text}");
    }
    for text in [
        "20", "20sec", "s", "30s1m", "1.5s", "-5s", "+5s", "1d", "20 s", "1h, 30m", "5s5s", "",
    ] {
        assert!(Span::parse(text).is_err(), "{text}");
        assert!(!span.is_match(text), "{text}");
    }
    assert!(offset.is_match("0"));
    for text in ["20s", "+", "-0", "+1.5s", "0s"] {
        assert!(
            bloodraven_harness::scenario::model::offset_ms(text).is_err(),
            "{text}"
        );
        assert!(!offset.is_match(text), "{text}");
    }
}
