//! Server-side apply and field ownership tracking (trap 9): managedFields with FieldsV1,
//! conflicts only when another manager's field would change value, `force` takes
//! ownership, prune of fields a manager stopped applying, list merge by list type.

use super::error::ApiError;
use super::fields::{display_path, remove_at, value_at, FieldPath, FieldSet, Scope};
use super::schema::{item_key, ListKind, Schema};
use serde_json::{json, Map, Value};

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEntry {
    /// Field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the manager used.
    pub api_version: String,
    /// When the entry last changed (RFC 3339, seconds).
    pub time: String,
    /// `""` or `status`.
    pub subresource: String,
    /// The owned fields.
    pub set: FieldSet,
}

/// The managedFields entries of an object.
pub fn parse_managed(obj: &Value) -> Vec<ManagedEntry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            ManagedEntry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                set: e
                    .get("fieldsV1")
                    .map(FieldSet::from_json)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

fn write_managed(obj: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut v = json!({"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": e.set.to_json()});
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who is writing, and through which endpoint.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    /// Field manager name.
    pub manager: &'a str,
    /// apiVersion of the request.
    pub api_version: &'a str,
    /// `""` or `status`.
    pub subresource: &'a str,
    /// Which fields the endpoint writes.
    pub scope: Scope,
    /// Now, RFC 3339 seconds.
    pub now: &'a str,
}

fn in_scope(path: &FieldPath, scope: Scope) -> bool {
    let status = path.first().map(|p| p == "f:status").unwrap_or(false);
    match scope {
        Scope::All => true,
        Scope::NoStatus => !status,
        Scope::StatusOnly => status,
    }
}

/// Records an update (PUT, merge/JSON/strategic patch, create) by `w` in `new`'s
/// managedFields: the writer owns what it changed; others lose changed and removed fields.
pub fn track_update(old: Option<&Value>, new: &mut Value, schema: &Schema, w: &Writer<'_>) {
    let mut entries = old.map(parse_managed).unwrap_or_default();
    let f_new = FieldSet::from_object(new, schema, w.scope);
    let f_old = old
        .map(|o| FieldSet::from_object(o, schema, w.scope))
        .unwrap_or_default();
    let mut changed = FieldSet::default();
    for (p, leaf) in f_new.paths() {
        let now = value_at(new, &p);
        let before = old.and_then(|o| value_at(o, &p));
        let differs = if leaf {
            now != before
        } else {
            before.is_none()
        };
        if differs {
            changed.insert(&p);
        }
    }
    let removed = f_old.difference(&f_new);
    let mut found = false;
    for e in entries.iter_mut() {
        let mine =
            e.manager == w.manager && e.operation == "Update" && e.subresource == w.subresource;
        let mut set = e.set.difference(&removed);
        if mine {
            set = set.union(&changed);
            e.time = w.now.to_string();
            e.api_version = w.api_version.to_string();
            found = true;
        } else {
            set = set.difference(&changed);
        }
        e.set = set;
    }
    if !found && !changed.is_empty() {
        entries.push(ManagedEntry {
            manager: w.manager.into(),
            operation: "Update".into(),
            api_version: w.api_version.into(),
            time: w.now.into(),
            subresource: w.subresource.into(),
            set: changed,
        });
    }
    write_managed(new, &entries);
}

/// Merges an applied configuration into the live object by the schema's list semantics.
fn merge_applied(live: &Value, applied: &Value, schema: &Schema, names: &mut Vec<String>) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            let mut out = l.clone();
            for (k, av) in a {
                if av.is_null() {
                    continue;
                }
                names.push(k.clone());
                let merged = match l.get(k) {
                    Some(lv) => merge_applied(lv, av, schema, names),
                    None => av.clone(),
                };
                names.pop();
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => {
            let path: Vec<&str> = names.iter().map(String::as_str).collect();
            match schema.list_kind(&path) {
                ListKind::Map(keys) => {
                    let mut out = l.clone();
                    for item in a {
                        let k = item_key(item, &keys);
                        match out.iter().position(|x| item_key(x, &keys) == k) {
                            Some(i) => out[i] = merge_applied(&out[i], item, schema, names),
                            None => out.push(item.clone()),
                        }
                    }
                    Value::Array(out)
                }
                ListKind::Set => {
                    let mut out = l.clone();
                    for x in a {
                        if !out.contains(x) {
                            out.push(x.clone());
                        }
                    }
                    Value::Array(out)
                }
                ListKind::Atomic => applied.clone(),
            }
        }
        _ => applied.clone(),
    }
}

fn scoped_applied(applied: &Value, scope: Scope) -> Value {
    let mut a = applied.clone();
    if let Some(m) = a.as_object_mut() {
        match scope {
            Scope::NoStatus => {
                m.remove("status");
            }
            Scope::StatusOnly => {
                m.retain(|k, _| matches!(k.as_str(), "status" | "apiVersion" | "kind" | "metadata"))
            }
            Scope::All => {}
        }
        if scope == Scope::StatusOnly {
            if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| k == "name" || k == "namespace");
            }
        }
    }
    a
}

/// Server-side apply of `applied` by `w` onto `live` (`None`: the object is created).
/// Returns the new object with managedFields, or 409 Conflict with FieldManagerConflict causes.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    force: bool,
    schema: &Schema,
    w: &Writer<'_>,
) -> Result<Value, ApiError> {
    let applied = scoped_applied(applied, w.scope);
    let mut entries = live.map(parse_managed).unwrap_or_default();
    let f_applied = FieldSet::from_object(&applied, schema, w.scope);
    let is_mine = |e: &ManagedEntry| {
        e.manager == w.manager && e.operation == "Apply" && e.subresource == w.subresource
    };

    // Conflicts: another manager owns a field whose value would change.
    let mut causes = Vec::new();
    let mut conflicts: Vec<(usize, FieldPath)> = Vec::new();
    if let Some(live) = live {
        for (idx, e) in entries.iter().enumerate() {
            if is_mine(e) {
                continue;
            }
            for (p, leaf) in f_applied.paths() {
                if !leaf || !e.set.contains(&p) {
                    continue;
                }
                let lv = value_at(live, &p);
                if lv.is_some() && lv != value_at(&applied, &p) {
                    conflicts.push((idx, p.clone()));
                    causes.push((e.manager.clone(), e.api_version.clone(), display_path(&p)));
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let n = causes.len();
        let lines: Vec<String> = causes
            .iter()
            .map(|(m, av, p)| format!("conflict with \"{m}\" using {av}: {p}"))
            .collect();
        let message = if n == 1 {
            format!("Apply failed with 1 conflict: {}", lines[0])
        } else {
            format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
        };
        let mut e = ApiError::conflict_message(message);
        let (ns_name, kind) = (
            applied
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            applied
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        );
        let causes: Vec<Value> = causes
            .iter()
            .map(|(m, av, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\" using {av}"), "field": p}))
            .collect();
        e.details = Some(json!({"name": ns_name, "kind": kind, "causes": causes}));
        return Err(e);
    }
    for (idx, p) in &conflicts {
        entries[*idx].set.remove(p);
    }

    let previous = entries
        .iter()
        .find(|e| is_mine(e))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let mut merged = match live {
        Some(l) => merge_applied(l, &applied, schema, &mut Vec::new()),
        None => applied.clone(),
    };

    // Prune fields this manager stopped applying and nobody else owns.
    let stopped = previous.difference(&f_applied);
    let mut to_remove: Vec<FieldPath> = stopped
        .paths()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| in_scope(p, w.scope))
        .collect();
    to_remove.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in to_remove {
        let owned_elsewhere = entries.iter().any(|e| {
            !is_mine(e)
                && e.set
                    .paths()
                    .iter()
                    .any(|(q, _)| q.len() >= p.len() && q[..p.len()] == p[..])
        }) || f_applied
            .paths()
            .iter()
            .any(|(q, _)| q.len() > p.len() && q[..p.len()] == p[..]);
        if !owned_elsewhere {
            remove_at(&mut merged, &p);
        }
    }

    match entries.iter_mut().find(|e| is_mine(e)) {
        Some(e) => {
            e.set = f_applied;
            e.time = w.now.into();
            e.api_version = w.api_version.into();
        }
        None => entries.push(ManagedEntry {
            manager: w.manager.into(),
            operation: "Apply".into(),
            api_version: w.api_version.into(),
            time: w.now.into(),
            subresource: w.subresource.into(),
            set: f_applied,
        }),
    }
    // The applier's entry goes first for stable output; order is otherwise preserved.
    write_managed(&mut merged, &entries);
    Ok(merged)
}

/// Removes empty `managedFields` and keeps an object's metadata a map.
pub fn ensure_metadata(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        m.entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;

    fn schema() -> Schema {
        Schema {
            kind: "ConfigMap".into(),
            builtin: true,
            openapi: None,
        }
    }
    fn w<'a>(m: &'a str) -> Writer<'a> {
        Writer {
            manager: m,
            api_version: "v1",
            subresource: "",
            scope: Scope::All,
            now: "2026-01-01T00:00:00Z",
        }
    }

    #[test]
    fn trap9_conflict_only_when_value_changes_and_force_takes_ownership() {
        let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1", "y": "2"}});
        let live = apply(None, &a, false, &schema(), &w("a")).expect("create");
        // Same value: shared ownership, no conflict.
        let b_same = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}});
        let shared = apply(Some(&live), &b_same, false, &schema(), &w("b")).expect("shared");
        let entries = parse_managed(&shared);
        assert_eq!(entries.len(), 2);
        assert!(entries
            .iter()
            .all(|e| e.set.contains(&["f:data".into(), "f:x".into()])));
        // Different value: conflict naming the other manager.
        let b_diff = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"y": "3"}});
        let e = apply(Some(&shared), &b_diff, false, &schema(), &w("b")).expect_err("conflict");
        assert_eq!((e.code, e.reason), (409, Reason::Conflict));
        assert_eq!(
            e.details
                .as_ref()
                .and_then(|d| d.pointer("/causes/0/reason")),
            Some(&json!("FieldManagerConflict"))
        );
        assert_eq!(
            e.details
                .as_ref()
                .and_then(|d| d.pointer("/causes/0/field")),
            Some(&json!(".data.y"))
        );
        // Force: b owns y now, a lost it.
        let forced = apply(Some(&shared), &b_diff, true, &schema(), &w("b")).expect("force");
        assert_eq!(forced.pointer("/data/y"), Some(&json!("3")));
        let a_entry = parse_managed(&forced)
            .into_iter()
            .find(|e| e.manager == "a")
            .expect("a");
        assert!(!a_entry.set.contains(&["f:data".into(), "f:y".into()]));
    }

    #[test]
    fn trap9_prune_removes_fields_a_manager_stopped_applying() {
        let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"l": "1"}}, "data": {"x": "1", "y": "2"}});
        let live = apply(None, &a, false, &schema(), &w("a")).expect("create");
        let a2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}});
        let out = apply(Some(&live), &a2, false, &schema(), &w("a")).expect("apply");
        assert_eq!(out.pointer("/data/y"), None);
        assert_eq!(out.pointer("/metadata/labels/l"), None);
        assert_eq!(out.pointer("/data/x"), Some(&json!("1")));
    }

    #[test]
    fn trap9_update_takes_ownership_of_changed_fields() {
        let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}});
        let live = apply(None, &a, false, &schema(), &w("a")).expect("create");
        let mut updated = live.clone();
        updated["data"]["x"] = json!("2");
        track_update(Some(&live), &mut updated, &schema(), &w("kubectl-edit"));
        let entries = parse_managed(&updated);
        assert!(
            entries.iter().all(|e| e.manager != "a"),
            "a owned nothing else: {entries:?}"
        );
        let e = apply(Some(&updated), &a, false, &schema(), &w("a"))
            .expect_err("conflict with the editor");
        assert!(e.message.contains("kubectl-edit"));
    }
}
