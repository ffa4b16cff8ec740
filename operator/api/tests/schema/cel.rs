//! The CEL rules are simple, standard and bounded, as the API server requires of a CRD it
//! accepts (Kubernetes 1.30+): only the standard macros and `size`/`has`; a message each; a
//! `fieldPath` that names a property; and every list a rule iterates and every string it
//! compares has a `maxItems` or `maxLength`, so the rule's estimated cost is bounded (the API
//! server refuses a CRD whose rules' worst case exceeds its cost limit).

use regex::Regex;
use serde_json::Value;

use crate::{database_crd, evaluator, group_crd};

/// What a rule may call.
const ALLOWED: &[&str] = &["all", "exists", "exists_one", "has", "size"];

/// Every schema node with `x-kubernetes-validations`, with its pointer.
fn nodes_with_rules<'a>(schema: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    if schema.get("x-kubernetes-validations").is_some() {
        out.push((at.clone(), schema));
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            nodes_with_rules(
                child,
                format!("{at}/properties/{}", evaluator::escape(name)),
                out,
            );
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = schema.get(key).filter(|c| c.is_object()) {
            nodes_with_rules(child, format!("{at}/{key}"), out);
        }
    }
}

/// Every (property name, schema) in the subtree of `schema`.
fn properties<'a>(schema: &'a Value, out: &mut Vec<(&'a str, &'a Value)>) {
    if let Some(map) = schema.get("properties").and_then(Value::as_object) {
        for (name, child) in map {
            out.push((name, child));
            properties(child, out);
        }
    }
    if let Some(items) = schema.get("items") {
        properties(items, out);
    }
}

#[test]
fn cel_rules_are_simple_standard_and_bounded() {
    let call = Regex::new(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(").expect("regex");
    let member = Regex::new(r"\.([A-Za-z_][A-Za-z0-9_]*)").expect("regex");
    let mut rules = 0;
    for crd in [group_crd(), database_crd()] {
        let root = crd.pointer(evaluator::ROOT).expect("root");
        let mut nodes = Vec::new();
        nodes_with_rules(root, evaluator::ROOT.to_owned(), &mut nodes);
        for (at, node) in nodes {
            let mut fields = Vec::new();
            properties(node, &mut fields);
            for validation in node["x-kubernetes-validations"].as_array().expect("a list") {
                rules += 1;
                let rule = validation["rule"].as_str().expect("rule");
                // A mirror exists (panics otherwise).
                evaluator::cel(rule, &Value::Null);
                for name in call.captures_iter(rule).map(|c| c[1].to_owned()) {
                    assert!(
                        ALLOWED.contains(&name.as_str()),
                        "{at}: {rule}: calls {name}"
                    );
                }
                assert!(
                    validation["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "{at}: {rule}: no message"
                );
                if let Some(path) = validation.get("fieldPath") {
                    let name = path.as_str().and_then(|p| p.strip_prefix('.'));
                    assert!(
                        name.is_some_and(|n| node["properties"].get(n).is_some()),
                        "{at}: fieldPath {path} names no property"
                    );
                }
                if node["type"] == "array" {
                    assert!(node.get("maxItems").is_some(), "{at}: {rule}: no maxItems");
                }
                for name in member
                    .captures_iter(rule)
                    .map(|c| c[1].to_owned())
                    .filter(|name| !ALLOWED.contains(&name.as_str()))
                {
                    let read: Vec<&&Value> = fields
                        .iter()
                        .filter(|(field, _)| *field == name)
                        .map(|(_, schema)| schema)
                        .collect();
                    assert!(
                        !read.is_empty(),
                        "{at}: {rule}: reads {name}, not in the schema"
                    );
                    for schema in read {
                        match schema["type"].as_str() {
                            Some("array") => assert!(
                                schema.get("maxItems").is_some(),
                                "{at}: {rule}: {name} has no maxItems"
                            ),
                            Some("string") => assert!(
                                schema.get("maxLength").is_some(),
                                "{at}: {rule}: {name} has no maxLength"
                            ),
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    assert_eq!(rules, 3, "the group's three rules");
}
