//! JSON merge patch (RFC 7386), JSON patch (RFC 6902, with trap 5) and strategic merge
//! patch for built-in kinds.

use super::error::ApiError;
use super::schema::{item_key, Schema};
use serde_json::Value;

/// Applies a JSON merge patch (RFC 7386: `null` deletes a member, an object merges into an
/// object, anything else replaces the target whole, arrays included).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies a JSON patch. A `test` of a path that does not exist against `null` succeeds,
/// as in Kubernetes (trap 5; kube-runtime's finalizer helper relies on it).
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "the server rejected our request due to an error in our request: invalid JSON patch: {e}"
        ))
    })?;
    for op in ops.0 {
        if let json_patch::PatchOperation::Test(t) = &op {
            if t.value.is_null() && target.pointer(t.path.as_str()).is_none() {
                continue;
            }
        }
        json_patch::patch(target, &[op]).map_err(|e| {
            let mut err = ApiError::invalid("", "", "", "", "");
            err.message =
                format!("the server rejected our request due to an error in our request: {e}");
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
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
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

fn smp_value(
    orig: &Value,
    patch: &Value,
    schema: &Schema,
    names: &mut Vec<String>,
) -> Option<Value> {
    match (orig, patch) {
        (_, Value::Object(p)) => {
            match p.get("$patch").and_then(Value::as_str) {
                Some("replace") => return Some(strip_directives(patch)),
                Some("delete") => return None,
                _ => {}
            }
            let mut out = orig.as_object().cloned().unwrap_or_default();
            for (k, pv) in p {
                if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
                    if let (Some(Value::Array(cur)), Some(del)) =
                        (out.get_mut(field), pv.as_array())
                    {
                        cur.retain(|x| !del.contains(x));
                    }
                    continue;
                }
                if k.starts_with('$') {
                    continue;
                }
                if pv.is_null() {
                    out.remove(k);
                    continue;
                }
                names.push(k.clone());
                let merged = match out.get(k) {
                    Some(ov) => smp_value(ov, pv, schema, names),
                    None => Some(strip_directives(pv)),
                };
                names.pop();
                match merged {
                    Some(v) => {
                        out.insert(k.clone(), v);
                    }
                    None => {
                        out.remove(k);
                    }
                }
            }
            if let Some(retain) = p.get("$retainKeys").and_then(Value::as_array) {
                out.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
            }
            Some(Value::Object(out))
        }
        (Value::Array(o), Value::Array(pa)) => {
            let path: Vec<&str> = names.iter().map(String::as_str).collect();
            match schema.merge_key(&path) {
                None => Some(strip_directives(patch)),
                Some(key) if key.is_empty() => {
                    let mut out = o.clone();
                    for x in pa {
                        if !out.contains(x) {
                            out.push(x.clone());
                        }
                    }
                    Some(Value::Array(out))
                }
                Some(key) => {
                    if pa
                        .iter()
                        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
                    {
                        return Some(strip_directives(&Value::Array(
                            pa.iter()
                                .filter(|i| i.get("$patch").is_none())
                                .cloned()
                                .collect(),
                        )));
                    }
                    let keys = vec![key.clone()];
                    let mut out = o.clone();
                    for item in pa {
                        let k = item_key(item, &keys);
                        let pos = out.iter().position(|x| item_key(x, &keys) == k);
                        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                        match (pos, delete) {
                            (Some(i), true) => {
                                out.remove(i);
                            }
                            (None, true) => {}
                            (Some(i), false) => {
                                if let Some(m) = smp_value(&out[i], item, schema, names) {
                                    out[i] = m;
                                }
                            }
                            (None, false) => out.push(strip_directives(item)),
                        }
                    }
                    Some(Value::Array(out))
                }
            }
        }
        _ => Some(strip_directives(patch)),
    }
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
        let e = json_patch(&mut obj, &failing).expect_err("test must fail");
        assert_eq!(e.reason, Reason::Invalid);
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
