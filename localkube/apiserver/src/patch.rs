//! JSON merge patch (RFC 7386), JSON patch (RFC 6902, with trap 5) and strategic merge
//! patch for built-in kinds.

use super::error::ApiError;
use super::schema::{item_key, Schema};
use serde_json::{Map, Value};

/// Applies a JSON merge patch (RFC 7386: `null` deletes a member, an object merges into an
/// object, anything else replaces the target whole, arrays included).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies a JSON patch. A `test` of a path that does not exist against `null` succeeds,
/// as in Kubernetes (trap 5; kube-runtime's finalizer helper relies on it).
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|error| {
        ApiError::bad_request(format!(
            "the server rejected our request due to an error in our request: invalid JSON patch: {error}"
        ))
    })?;
    for op in ops.0 {
        if let json_patch::PatchOperation::Test(test_operation) = &op {
            if test_operation.value.is_null()
                && target.pointer(test_operation.path.as_str()).is_none()
            {
                continue;
            }
        }
        json_patch::patch(target, &[op]).map_err(|patch_error| {
            let mut err = ApiError::invalid("", "", "", "", "");
            err.message = format!(
                "the server rejected our request due to an error in our request: {patch_error}"
            );
            err.details = None;
            err
        })?;
    }
    Ok(())
}

/// Applies a strategic merge patch for a built-in kind.
pub fn strategic_merge(target: &Value, patch: &Value, schema: &Schema) -> Result<Value, ApiError> {
    let mut names = Vec::new();
    Ok(smp_value(target, patch, schema, &mut names).unwrap_or(Value::Null))
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(key, value)| (key.clone(), strip_directives(value)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        ),
        _ => v.clone(),
    }
}

/// Strategic merge of `patch` onto `original` at the field path `names`; `None` when the
/// patch deletes it (`$patch: delete`).
fn smp_value(
    original: &Value,
    patch: &Value,
    schema: &Schema,
    names: &mut Vec<String>,
) -> Option<Value> {
    match (original, patch) {
        (_, Value::Object(patch_map)) => smp_map(original, patch, patch_map, schema, names),
        (Value::Array(original_items), Value::Array(patch_items)) => {
            let path: Vec<&str> = names.iter().map(String::as_str).collect();
            match schema.merge_key(&path) {
                None => Some(strip_directives(patch)),
                // A set of primitives: the patch's values are added.
                Some(key) if key.is_empty() => {
                    let mut out = original_items.clone();
                    for item in patch_items {
                        if !out.contains(item) {
                            out.push(item.clone());
                        }
                    }
                    Some(Value::Array(out))
                }
                Some(key) => Some(smp_keyed_list(
                    original_items,
                    patch_items,
                    &key,
                    schema,
                    names,
                )),
            }
        }
        _ => Some(strip_directives(patch)),
    }
}

/// Strategic merge of a patch map: its `$patch`, `$deleteFromPrimitiveList/`, `null`
/// (delete) and `$retainKeys` directives, and each field merged.
fn smp_map(
    original: &Value,
    patch: &Value,
    patch_map: &Map<String, Value>,
    schema: &Schema,
    names: &mut Vec<String>,
) -> Option<Value> {
    match patch_map.get("$patch").and_then(Value::as_str) {
        Some("replace") => return Some(strip_directives(patch)),
        Some("delete") => return None,
        _ => {}
    }
    let mut out = original.as_object().cloned().unwrap_or_default();
    for (key, patch_value) in patch_map {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(current)), Some(deleted)) =
                (out.get_mut(field), patch_value.as_array())
            {
                current.retain(|item| !deleted.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if patch_value.is_null() {
            out.remove(key);
            continue;
        }
        names.push(key.clone());
        let merged = match out.get(key) {
            Some(original_value) => smp_value(original_value, patch_value, schema, names),
            None => Some(strip_directives(patch_value)),
        };
        names.pop();
        match merged {
            Some(value) => {
                out.insert(key.clone(), value);
            }
            None => {
                out.remove(key);
            }
        }
    }
    if let Some(retain) = patch_map.get("$retainKeys").and_then(Value::as_array) {
        out.retain(|key, _| retain.iter().any(|kept| kept.as_str() == Some(key)));
    }
    Some(Value::Object(out))
}

/// Strategic merge of a list keyed by `key`: items merged by key, `$patch: delete` items
/// removed, a `$patch: replace` item replaces the whole list.
fn smp_keyed_list(
    original_items: &[Value],
    patch_items: &[Value],
    key: &str,
    schema: &Schema,
    names: &mut Vec<String>,
) -> Value {
    if patch_items
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return strip_directives(&Value::Array(
            patch_items
                .iter()
                .filter(|item| item.get("$patch").is_none())
                .cloned()
                .collect(),
        ));
    }
    let keys = vec![key.to_string()];
    let mut out = original_items.to_vec();
    for item in patch_items {
        let item_value = item_key(item, &keys);
        let position = out
            .iter()
            .position(|existing| item_key(existing, &keys) == item_value);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(index), true) => {
                out.remove(index);
            }
            (None, true) => {}
            (Some(index), false) => {
                if let Some(merged) = smp_value(&out[index], item, schema, names) {
                    out[index] = merged;
                }
            }
            (None, false) => out.push(strip_directives(item)),
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;
    use serde_json::json;

    #[test]
    fn trap5_test_of_missing_path_against_null_succeeds() {
        let mut obj = json!({"metadata": {"name": "x"}});
        let patch = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]);
        json_patch(&mut obj, &patch).expect("patch");
        assert_eq!(obj.pointer("/metadata/finalizers/0"), Some(&json!("f")));
        let failing = json!([{"op": "test", "path": "/metadata/name", "value": "y"}]);
        let error = json_patch(&mut obj, &failing).expect_err("test must fail");
        assert_eq!(error.reason, Reason::Invalid);
    }

    /// RFC 7386 appendix A, every example, plus a nested merge into a Kubernetes object.
    #[test]
    fn merge_patch_follows_rfc7386() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
            (
                json!({"metadata": {"name": "x", "labels": {"app": "db", "tier": "1"}},
                    "spec": {"ports": [{"port": 80}, {"port": 443}]}}),
                json!({"metadata": {"labels": {"tier": null, "zone": "pdx"}},
                    "spec": {"ports": [{"port": 3306}]}}),
                json!({"metadata": {"name": "x", "labels": {"app": "db", "zone": "pdx"}},
                    "spec": {"ports": [{"port": 3306}]}}),
            ),
        ];
        for (original, patch, expected) in cases {
            let mut target = original.clone();
            merge_patch(&mut target, &patch);
            assert_eq!(target, expected, "{original} + {patch}");
        }
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let schema = Schema {
            kind: "Deployment".into(),
            builtin: true,
            openapi: None,
        };
        let orig = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "3"}, {"name": "a", "$patch": "delete"}]}}}});
        let out = strategic_merge(&orig, &patch, &schema).expect("smp");
        assert_eq!(
            out,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "3"}]}}}})
        );
    }
}
