//! A small evaluator of the OpenAPI v3 keywords the generated CRDs use (`type`, `nullable`,
//! `enum`, `pattern`, `minimum`, `maximum`, `minLength`, `maxLength`, `minItems`, `maxItems`,
//! `required`, `properties`, `additionalProperties`, `items`, `x-kubernetes-list-type: map`),
//! as the API server applies them at admission, and of their CEL `x-kubernetes-validations`
//! through [`cel`]: each rule written again in Rust, keyed by its exact text.
//!
//! Every refusal names the JSON pointer (into the CRD) of the keyword that refused, so a test
//! can say which keyword refuses which object.

use std::{cell::RefCell, collections::HashMap};

use regex::Regex;
use serde_json::Value;

/// Where the object schema of the only version sits in a generated CRD.
pub const ROOT: &str = "/spec/versions/0/schema/openAPIV3Schema";

/// One refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// JSON pointer, into the CRD, of the keyword that refused (`.../failureThreshold/minimum`).
    pub keyword: String,
    /// The field as the API server names it (`spec.sites[1].name`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The keywords of one CRD, with its patterns compiled once.
pub struct Evaluator {
    crd: Value,
    regexes: RefCell<HashMap<String, Regex>>,
}

impl Evaluator {
    /// An evaluator of `crd` (a generated CustomResourceDefinition as JSON).
    pub fn new(crd: Value) -> Self {
        assert!(crd.pointer(ROOT).is_some(), "no {ROOT} in the CRD");
        Self {
            crd,
            regexes: RefCell::default(),
        }
    }

    /// The CRD evaluated.
    pub fn crd(&self) -> &Value {
        &self.crd
    }

    /// Every refusal of `object` (apiVersion, kind and metadata are not the schema's).
    pub fn check(&self, object: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        let schema = self.crd.pointer(ROOT).expect("root schema");
        self.walk(schema, ROOT, object, "", &mut out);
        out
    }

    fn matches(&self, pattern: &str, text: &str) -> bool {
        let mut regexes = self.regexes.borrow_mut();
        let regex = regexes.entry(pattern.to_owned()).or_insert_with(|| {
            Regex::new(pattern).unwrap_or_else(|e| panic!("pattern {pattern:?}: {e}"))
        });
        regex.is_match(text)
    }

    fn walk(&self, schema: &Value, at: &str, value: &Value, field: &str, out: &mut Vec<Violation>) {
        let mut refuse = |keyword: &str, field: &str, message: String| {
            out.push(Violation {
                keyword: format!("{at}/{keyword}"),
                field: if field.is_empty() { "<root>" } else { field }.to_owned(),
                message,
            })
        };
        if value.is_null() {
            if schema.get("nullable") != Some(&Value::Bool(true)) && schema.get("type").is_some() {
                refuse("type", field, "must not be null".into());
            }
            return;
        }
        let kind = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if let Some(want) = schema.get("type").and_then(Value::as_str) {
            if want != kind && !(want == "number" && kind == "integer") {
                refuse("type", field, format!("must be of type {want}, not {kind}"));
                return;
            }
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            if !allowed.contains(value) {
                refuse("enum", field, format!("{value} is not one of {allowed:?}"));
            }
        }
        if let Some(number) = value.as_f64() {
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                if number < min {
                    refuse("minimum", field, format!("{number} is less than {min}"));
                }
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                if number > max {
                    refuse("maximum", field, format!("{number} is more than {max}"));
                }
            }
        }
        if let Some(text) = value.as_str() {
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                if !self.matches(pattern, text) {
                    refuse(
                        "pattern",
                        field,
                        format!("{text:?} does not match {pattern}"),
                    );
                }
            }
            let chars = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
                if chars < min {
                    refuse("minLength", field, format!("shorter than {min}"));
                }
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
                if chars > max {
                    refuse("maxLength", field, format!("longer than {max}"));
                }
            }
        }
        match value {
            Value::Object(map) => {
                for required in schema
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if !map.contains_key(required) {
                        refuse("required", &join(field, required), "required".into());
                    }
                }
                let properties = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                for (key, child) in map {
                    if field.is_empty()
                        && matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
                    {
                        continue;
                    }
                    let child_field = join(field, key);
                    if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
                        let child_at = format!("{at}/properties/{}", escape(key));
                        self.walk(child_schema, &child_at, child, &child_field, out);
                    } else if let Some(child_schema) = additional {
                        let child_at = format!("{at}/additionalProperties");
                        self.walk(child_schema, &child_at, child, &child_field, out);
                    }
                }
            }
            Value::Array(items) => {
                let count = items.len() as u64;
                if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                    if count < min {
                        out.push(violation(
                            at,
                            "minItems",
                            field,
                            format!("fewer than {min} items"),
                        ));
                    }
                }
                if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                    if count > max {
                        out.push(violation(
                            at,
                            "maxItems",
                            field,
                            format!("more than {max} items"),
                        ));
                    }
                }
                if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
                    let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let key_of =
                        |item: &Value| keys.iter().map(|k| item[*k].clone()).collect::<Vec<_>>();
                    for (index, item) in items.iter().enumerate() {
                        if items[..index]
                            .iter()
                            .any(|other| key_of(other) == key_of(item))
                        {
                            out.push(violation(
                                at,
                                "x-kubernetes-list-type",
                                &format!("{field}[{index}]"),
                                "duplicate value".into(),
                            ));
                        }
                    }
                }
                if let Some(item_schema) = schema.get("items") {
                    let item_at = format!("{at}/items");
                    for (index, item) in items.iter().enumerate() {
                        self.walk(
                            item_schema,
                            &item_at,
                            item,
                            &format!("{field}[{index}]"),
                            out,
                        );
                    }
                }
            }
            _ => {}
        }
        for (index, rule) in schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let text = rule["rule"].as_str().expect("a validation has a rule");
            if !cel(text, value) {
                let path = rule["fieldPath"].as_str().unwrap_or_default();
                out.push(violation(
                    at,
                    &format!("x-kubernetes-validations/{index}"),
                    &format!("{field}{path}"),
                    rule["message"].as_str().unwrap_or(text).to_owned(),
                ));
            }
        }
    }
}

fn violation(at: &str, keyword: &str, field: &str, message: String) -> Violation {
    Violation {
        keyword: format!("{at}/{keyword}"),
        field: field.to_owned(),
        message,
    }
}

fn join(field: &str, key: &str) -> String {
    if field.is_empty() {
        key.to_owned()
    } else {
        format!("{field}.{key}")
    }
}

/// A JSON pointer token (RFC 6901).
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Whether the CEL rule `rule` holds for `this` (its `self`), by a Rust mirror of the exact
/// rule text: a rule changed without its mirror fails every test that reaches it. Data the
/// rule cannot read (a missing or mistyped field, which the structural keywords refuse on
/// their own) counts as holding, so each refusal has one cause.
pub fn cel(rule: &str, this: &Value) -> bool {
    let sites = || this["sites"].as_array().cloned().unwrap_or_default();
    let initial = || this["initialActiveSite"].clone();
    match rule {
        // What a test puts in place of a rule it removes.
        "true" => true,
        // On spec.sites: every name occurs exactly once.
        "self.all(a, self.exists_one(b, b.name == a.name))" => {
            let items = this.as_array().cloned().unwrap_or_default();
            items.iter().all(|a| {
                items
                    .iter()
                    .filter(|b| b["name"] == a["name"])
                    .count()
                    == 1
            })
        }
        // On spec: initialActiveSite names a site.
        "self.sites.exists(s, s.name == self.initialActiveSite)" => {
            this["sites"].as_array().is_none() || sites().iter().any(|s| s["name"] == initial())
        }
        // On spec: every site so named is read-write.
        "self.sites.all(s, s.name != self.initialActiveSite || s.role == 'read-write')" => sites()
            .iter()
            .all(|s| s["name"] != initial() || s["role"] == "read-write"),
        other => panic!(
            "no Rust mirror of the CEL rule {other:?}: add one to operator/api/tests/schema/evaluator.rs \
             (and check the rule with a CEL implementation)"
        ),
    }
}
