//! Server-side apply and field ownership tracking (trap 9): managedFields with FieldsV1,
//! conflicts only when another manager's field would change value, `force` takes
//! ownership, list merge by list type, and prune of what a manager stopped applying as
//! structured-merge-diff prunes: a field or list item (by its keys, or value in a set) it
//! applied last time and no applier applies now is removed whole, keys and server defaults
//! inside it included; of an item another applier still applies, exactly that applier's
//! fields (and fields nobody owns) stay. Ownership through updates (writes other than
//! apply) does not stop a prune, as upstream.

use super::error::ApiError;
use super::fields::{display_path, remove_items, value_at, FieldPath, FieldSet, Scope};
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
        .map(|managed_field| {
            let s = |key: &str| {
                managed_field
                    .get(key)
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
                set: managed_field
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
        .map(|managed_entry| {
            let mut value = json!({"manager": managed_entry.manager, "operation": managed_entry.operation, "apiVersion": managed_entry.api_version,
                "time": managed_entry.time, "fieldsType": "FieldsV1", "fieldsV1": managed_entry.set.to_json()});
            if !managed_entry.subresource.is_empty() {
                value["subresource"] = json!(managed_entry.subresource);
            }
            value
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

/// Whether a top-level field (`f:status`, `f:spec`, ...) is within `scope`.
fn in_scope(top: &str, scope: Scope) -> bool {
    let status = top == "f:status";
    match scope {
        Scope::All => true,
        Scope::NoStatus => !status,
        Scope::StatusOnly => status,
    }
}

/// The part of `set` within `scope`.
fn in_scope_set(set: &FieldSet, scope: Scope) -> FieldSet {
    let mut out = set.clone();
    out.children.retain(|key, _| in_scope(key, scope));
    out
}

/// Records an update (PUT, merge/JSON/strategic patch, create) by `w` in `new`'s
/// managedFields: the writer owns what it changed; others lose changed and removed fields.
pub fn track_update(old: Option<&Value>, new: &mut Value, schema: &Schema, writer: &Writer<'_>) {
    let mut entries = old.map(parse_managed).unwrap_or_default();
    let f_new = FieldSet::from_object(new, schema, writer.scope);
    let f_old = old
        .map(|o| FieldSet::from_object(o, schema, writer.scope))
        .unwrap_or_default();
    let mut changed = FieldSet::default();
    for (p, leaf) in f_new.paths() {
        let now = value_at(new, &p);
        let before = old.and_then(|object| value_at(object, &p));
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
    for managed_entry in entries.iter_mut() {
        let mine = managed_entry.manager == writer.manager
            && managed_entry.operation == "Update"
            && managed_entry.subresource == writer.subresource;
        let mut set = managed_entry.set.difference(&removed);
        if mine {
            set = set.union(&changed);
            managed_entry.time = writer.now.to_string();
            managed_entry.api_version = writer.api_version.to_string();
            found = true;
        } else {
            set = set.difference(&changed);
        }
        managed_entry.set = set;
    }
    if !found && !changed.is_empty() {
        entries.push(ManagedEntry {
            manager: writer.manager.into(),
            operation: "Update".into(),
            api_version: writer.api_version.into(),
            time: writer.now.into(),
            subresource: writer.subresource.into(),
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
            for (key, av) in a {
                if av.is_null() {
                    continue;
                }
                names.push(key.clone());
                let merged = match l.get(key) {
                    Some(lv) => merge_applied(lv, av, schema, names),
                    None => av.clone(),
                };
                names.pop();
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => {
            let path: Vec<&str> = names.iter().map(String::as_str).collect();
            match schema.list_kind(&path) {
                ListKind::Map(keys) => {
                    let mut out = l.clone();
                    for item in a {
                        let map = item_key(item, &keys);
                        match out.iter().position(|x| item_key(x, &keys) == map) {
                            Some(index) => {
                                out[index] = merge_applied(&out[index], item, schema, names)
                            }
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
    if let Some(map) = a.as_object_mut() {
        match scope {
            Scope::NoStatus => {
                map.remove("status");
            }
            Scope::StatusOnly => map
                .retain(|k, _| matches!(k.as_str(), "status" | "apiVersion" | "kind" | "metadata")),
            Scope::All => {}
        }
        if scope == Scope::StatusOnly {
            if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|key, _| key == "name" || key == "namespace");
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
    writer: &Writer<'_>,
) -> Result<Value, ApiError> {
    let applied = scoped_applied(applied, writer.scope);
    let mut entries = live.map(parse_managed).unwrap_or_default();
    let f_applied = FieldSet::from_object(&applied, schema, writer.scope);
    let is_mine = |e: &ManagedEntry| {
        e.manager == writer.manager && e.operation == "Apply" && e.subresource == writer.subresource
    };

    // Conflicts: another manager owns a field whose value would change.
    let conflicts = conflicts(live, &applied, &entries, &f_applied, &is_mine);
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&applied, &entries, &conflicts));
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

    let last = in_scope_set(&previous, writer.scope);
    if !last.is_empty() {
        let applied_by_others = entries
            .iter()
            .filter(|entry| entry.operation == "Apply" && !is_mine(entry));
        merged = prune_last_applied(
            &merged,
            &last,
            &f_applied,
            applied_by_others,
            schema,
            writer.scope,
        );
    }

    match entries.iter_mut().find(|e| is_mine(e)) {
        Some(managed_entry) => {
            managed_entry.set = f_applied;
            managed_entry.time = writer.now.into();
            managed_entry.api_version = writer.api_version.into();
        }
        None => entries.push(ManagedEntry {
            manager: writer.manager.into(),
            operation: "Apply".into(),
            api_version: writer.api_version.into(),
            time: writer.now.into(),
            subresource: writer.subresource.into(),
            set: f_applied,
        }),
    }
    // The applier's entry goes first for stable output; order is otherwise preserved.
    write_managed(&mut merged, &entries);
    Ok(merged)
}

/// The fields of `applied` another manager (an entry `is_mine` rejects) owns on `live`
/// whose value would change: (index of the entry, path).
fn conflicts(
    live: Option<&Value>,
    applied: &Value,
    entries: &[ManagedEntry],
    applied_set: &FieldSet,
    is_mine: &dyn Fn(&ManagedEntry) -> bool,
) -> Vec<(usize, FieldPath)> {
    let Some(live) = live else {
        return Vec::new();
    };
    let mut conflicts = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        if is_mine(entry) {
            continue;
        }
        for (path, leaf) in applied_set.paths() {
            if !leaf || !entry.set.contains(&path) {
                continue;
            }
            let live_value = value_at(live, &path);
            if live_value.is_some() && live_value != value_at(applied, &path) {
                conflicts.push((index, path.clone()));
            }
        }
    }
    conflicts
}

/// The 409 of an apply with conflicts: its message lists them, its details carry one
/// FieldManagerConflict cause each.
fn conflict_error(
    applied: &Value,
    entries: &[ManagedEntry],
    conflicts: &[(usize, FieldPath)],
) -> ApiError {
    let causes: Vec<(String, String, String)> = conflicts
        .iter()
        .map(|(index, path)| {
            let entry = &entries[*index];
            (
                entry.manager.clone(),
                entry.api_version.clone(),
                display_path(path),
            )
        })
        .collect();
    let count = causes.len();
    let lines: Vec<String> = causes
        .iter()
        .map(|(manager, api_version, path)| {
            format!("conflict with \"{manager}\" using {api_version}: {path}")
        })
        .collect();
    let message = if count == 1 {
        format!("Apply failed with 1 conflict: {}", lines[0])
    } else {
        format!("Apply failed with {count} conflicts: {}", lines.join("\n"))
    };
    let mut error = ApiError::conflict_message(message);
    let name = applied
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = applied
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let causes: Vec<Value> = causes
        .iter()
        .map(|(manager, api_version, path)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{manager}\" using {api_version}"), "field": path}))
        .collect();
    error.details = Some(json!({"name": name, "kind": kind, "causes": causes}));
    error
}

/// Prune what this manager applied last time and no longer applies, as
/// structured-merge-diff does (its `prune`): remove everything of its last applied set
/// (an item or field it owned goes whole, keys and defaults in it included); add back
/// whatever an applier (itself, now, included) owns; then remove, of what is still
/// missing, only what its last set held (so fields nobody owns inside an item that
/// stays, such as defaults, are kept). Owners through updates do not keep a field or
/// item in place, as upstream.
fn prune_last_applied<'a>(
    merged: &Value,
    last: &FieldSet,
    applied_set: &FieldSet,
    applied_by_others: impl Iterator<Item = &'a ManagedEntry>,
    schema: &Schema,
    scope: Scope,
) -> Value {
    let mut applied_sets = applied_set.clone();
    for entry in applied_by_others {
        applied_sets = applied_sets.union(&entry.set);
    }
    let merged_set = FieldSet::from_object(merged, schema, scope);
    let pruned = remove_items(merged, last, schema);
    let kept = FieldSet::from_object(&pruned, schema, scope).union(&applied_sets);
    let pruned = remove_items(merged, &merged_set.difference(&kept), schema);
    let gone = merged_set
        .difference(&FieldSet::from_object(&pruned, schema, scope))
        .intersection(last);
    remove_items(merged, &gone, schema)
}

/// Removes empty `managedFields` and keeps an object's metadata a map.
pub fn ensure_metadata(obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.entry("metadata")
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
    fn w<'a>(message: &'a str) -> Writer<'a> {
        Writer {
            manager: message,
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
        let error = apply(Some(&shared), &b_diff, false, &schema(), &w("b")).expect_err("conflict");
        assert_eq!((error.code, error.reason), (409, Reason::Conflict));
        assert_eq!(
            error
                .details
                .as_ref()
                .and_then(|d| d.pointer("/causes/0/reason")),
            Some(&json!("FieldManagerConflict"))
        );
        assert_eq!(
            error
                .details
                .as_ref()
                .and_then(|d| d.pointer("/causes/0/field")),
            Some(&json!(".data.y"))
        );
        // Force: b owns y now, a lost it.
        let forced = apply(Some(&shared), &b_diff, true, &schema(), &w("b")).expect("force");
        assert_eq!(forced.pointer("/data/y"), Some(&json!("3")));
        let a_entry = parse_managed(&forced)
            .into_iter()
            .find(|managed_entry| managed_entry.manager == "a")
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
            entries
                .iter()
                .all(|managed_entry| managed_entry.manager != "a"),
            "a owned nothing else: {entries:?}"
        );
        let error = apply(Some(&updated), &a, false, &schema(), &w("a"))
            .expect_err("conflict with the editor");
        assert!(error.message.contains("kubectl-edit"));
    }

    fn deployment_schema() -> Schema {
        Schema {
            kind: "Deployment".into(),
            builtin: true,
            openapi: None,
        }
    }
    fn w_main<'a>(message: &'a str) -> Writer<'a> {
        Writer {
            api_version: "apps/v1",
            scope: Scope::NoStatus,
            ..w(message)
        }
    }
    fn deployment(pod_spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod_spec}}})
    }
    /// What the server's defaulting adds to the repro's pod spec once stored.
    fn with_defaults(mut d: Value) -> Value {
        let spec = &mut d["spec"]["template"]["spec"];
        for c in spec["containers"].as_array_mut().expect("containers") {
            c["terminationMessagePath"] = json!("/dev/termination-log");
            c["imagePullPolicy"] = json!("IfNotPresent");
            for p in c["ports"].as_array_mut().into_iter().flatten() {
                p["protocol"] = json!("TCP");
            }
        }
        for value in spec["volumes"].as_array_mut().into_iter().flatten() {
            value["secret"]["defaultMode"] = json!(420);
        }
        d
    }
    fn repro_first() -> Value {
        deployment(
            json!({"containers": [{"name": "c", "image": "bloodraven:0.1.0",
            "args": ["--a", "--b"], "env": [{"name": "E", "value": "1"}],
            "ports": [{"containerPort": 8443, "name": "deploy"}, {"containerPort": 8082, "name": "metrics"}],
            "volumeMounts": [{"name": "tls", "mountPath": "/tls"}]}],
            "volumes": [{"name": "tls", "secret": {"secretName": "x"}}]}),
        )
    }
    fn repro_second() -> Value {
        deployment(
            json!({"containers": [{"name": "c", "image": "bloodraven:0.1.0",
            "args": ["--a"], "ports": [{"containerPort": 8082, "name": "metrics"}]}]}),
        )
    }

    #[test]
    fn prune_removes_map_list_items_whole_with_their_keys_and_defaults() {
        let schema = deployment_schema();
        let live = with_defaults(
            apply(None, &repro_first(), false, &schema, &w_main("probe")).expect("create"),
        );
        let out = apply(
            Some(&live),
            &repro_second(),
            false,
            &schema,
            &w_main("probe"),
        )
        .expect("apply");
        assert_eq!(
            out.pointer("/spec/template/spec"),
            Some(
                &json!({"containers": [{"name": "c", "image": "bloodraven:0.1.0", "args": ["--a"],
                "ports": [{"containerPort": 8082, "name": "metrics", "protocol": "TCP"}],
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}]})
            ),
            "env E, port 8443, the tls mount and the tls volume go whole"
        );
        let entry = parse_managed(&out)
            .into_iter()
            .find(|managed_entry| managed_entry.manager == "probe")
            .expect("probe");
        assert_eq!(
            entry.set,
            FieldSet::from_object(&repro_second(), &schema, Scope::NoStatus)
        );
    }

    #[test]
    fn prune_keeps_what_another_applier_owns_in_a_dropped_item() {
        let schema = deployment_schema();
        let live = with_defaults(
            apply(None, &repro_first(), false, &schema, &w_main("a")).expect("create"),
        );
        // b applies its own value of E (forcing a's ownership of the value away) and the
        // tls volume's name only.
        let b = deployment(
            json!({"containers": [{"name": "c", "env": [{"name": "E", "value": "2"}]}],
            "volumes": [{"name": "tls"}]}),
        );
        let b = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": b["spec"]["template"]["spec"].clone()}}});
        let live = apply(Some(&live), &b, true, &schema, &w_main("b")).expect("b");
        assert_eq!(
            live.pointer("/spec/template/spec/containers/0/env"),
            Some(&json!([{"name": "E", "value": "2"}]))
        );
        let out =
            apply(Some(&live), &repro_second(), false, &schema, &w_main("a")).expect("a again");
        let spec = out.pointer("/spec/template/spec").expect("pod spec");
        assert_eq!(
            spec.pointer("/containers/0/env"),
            Some(&json!([{"name": "E", "value": "2"}])),
            "b's E stays"
        );
        // b owns only the tls volume's name: a's secretName goes, the server's defaultMode
        // (nobody's) stays.
        assert_eq!(
            spec.get("volumes"),
            Some(&json!([{"name": "tls", "secret": {"defaultMode": 420}}]))
        );
        assert_eq!(spec.pointer("/containers/0/volumeMounts"), None);
        assert_eq!(
            spec.pointer("/containers/0/ports"),
            Some(&json!([{"containerPort": 8082, "name": "metrics", "protocol": "TCP"}]))
        );
        // b stops applying: nothing of E or the volume is left.
        let b2 = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
        let out = apply(Some(&out), &b2, false, &schema, &w_main("b")).expect("b again");
        let spec = out.pointer("/spec/template/spec").expect("pod spec");
        assert_eq!(spec.pointer("/containers/0/env"), None);
        assert_eq!(spec.get("volumes"), None);
        assert_eq!(
            spec.pointer("/containers/0/image"),
            Some(&json!("bloodraven:0.1.0"))
        );
    }

    #[test]
    fn ownership_through_an_update_does_not_keep_a_dropped_item() {
        let schema = deployment_schema();
        let live = with_defaults(
            apply(None, &repro_first(), false, &schema, &w_main("a")).expect("create"),
        );
        let mut edited = live.clone();
        edited["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = json!("3");
        track_update(Some(&live), &mut edited, &schema, &w_main("editor"));
        let out =
            apply(Some(&edited), &repro_second(), false, &schema, &w_main("a")).expect("apply");
        assert_eq!(out.pointer("/spec/template/spec/containers/0/env"), None);
        // The editor's entry still names the field, as upstream's would.
        let editor = parse_managed(&out)
            .into_iter()
            .find(|managed_entry| managed_entry.manager == "editor")
            .expect("editor");
        assert!(!editor.set.is_empty());
    }

    #[test]
    fn atomic_and_set_lists_are_replaced_and_pruned_by_value() {
        let s = deployment_schema();
        let live = apply(None, &repro_first(), false, &s, &w_main("a")).expect("create");
        let out = apply(Some(&live), &repro_second(), false, &s, &w_main("a")).expect("apply");
        assert_eq!(
            out.pointer("/spec/template/spec/containers/0/args"),
            Some(&json!(["--a"]))
        );
        let no_args =
            deployment(json!({"containers": [{"name": "c", "image": "bloodraven:0.1.0"}]}));
        let out = apply(Some(&out), &no_args, false, &s, &w_main("a")).expect("apply");
        assert_eq!(out.pointer("/spec/template/spec/containers/0/args"), None);
        // finalizers are a set: the one dropped goes, the other applier's stays.
        let cm = |field: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": field}});
        let live =
            apply(None, &cm(json!(["x/a", "x/b"])), false, &schema(), &w("a")).expect("create");
        let live = apply(Some(&live), &cm(json!(["x/b"])), false, &schema(), &w("b")).expect("b");
        let out = apply(Some(&live), &cm(json!(["x/c"])), false, &schema(), &w("a")).expect("a");
        assert_eq!(
            out.pointer("/metadata/finalizers"),
            Some(&json!(["x/b", "x/c"]))
        );
    }

    #[test]
    fn prune_removes_custom_resource_map_list_items_whole() {
        let schema = Schema {
            kind: "Fleet".into(),
            builtin: false,
            openapi: Some(
                json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "ships": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "yard"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "yard": {"type": "string"},
                        "size": {"type": "integer"}, "crew": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["role"], "items": {"type": "object"}}}}}}}}}),
            ),
        };
        let fleet = |ships: Value| json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f"}, "spec": {"ships": ships}});
        let live = apply(None, &fleet(json!([
            {"name": "a", "yard": "n", "size": 1, "crew": [{"role": "cook", "n": 1}, {"role": "pilot", "n": 2}]},
            {"name": "b", "yard": "n", "size": 2}])), false, &schema, &w("alice")).expect("create");
        let out = apply(
            Some(&live),
            &fleet(
                json!([{"name": "a", "yard": "n", "size": 1, "crew": [{"role": "pilot", "n": 2}]}]),
            ),
            false,
            &schema,
            &w("alice"),
        )
        .expect("apply");
        assert_eq!(
            out.pointer("/spec/ships"),
            Some(
                &json!([{"name": "a", "yard": "n", "size": 1, "crew": [{"role": "pilot", "n": 2}]}])
            )
        );
    }
}
