//! List semantics (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, patchMergeKey)
//! for built-in kinds and for custom resources (from their `openAPIV3Schema`).

use serde_json::{Map, Value};

/// How a list merges.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Items are objects identified by these keys.
    Map(Vec<String>),
    /// Items are unique scalars.
    Set,
    /// The list is replaced as a whole.
    Atomic,
}

/// The list semantics of one kind.
#[derive(Debug, Clone)]
pub struct Schema {
    /// Kind (`Service` needs its own `ports` keys).
    pub kind: String,
    /// Whether this is a built-in kind (strategic merge is served).
    pub builtin: bool,
    /// The CRD `openAPIV3Schema`.
    pub openapi: Option<Value>,
}

fn builtin_list_kind(kind: &str, path: &[&str]) -> ListKind {
    let names = |v: &[&str]| ListKind::Map(v.iter().map(|s| s.to_string()).collect());
    let last = path.last().copied().unwrap_or_default();
    let parent = if path.len() >= 2 {
        path[path.len() - 2]
    } else {
        ""
    };
    match last {
        "finalizers" if path.len() == 2 && path[0] == "metadata" => ListKind::Set,
        "ownerReferences" if parent == "metadata" => names(&["uid"]),
        "containers" | "initContainers" | "ephemeralContainers" => names(&["name"]),
        "env" | "volumes" | "imagePullSecrets" | "resourceClaims" => names(&["name"]),
        "volumeMounts" => names(&["mountPath"]),
        "volumeDevices" => names(&["devicePath"]),
        "hostAliases" => names(&["ip"]),
        "conditions" => names(&["type"]),
        "topologySpreadConstraints" => names(&["topologyKey", "whenUnsatisfiable"]),
        "ports" if kind == "Service" && path == ["spec", "ports"] => names(&["port", "protocol"]),
        "ports"
            if matches!(
                parent,
                "containers" | "initContainers" | "ephemeralContainers"
            ) =>
        {
            names(&["containerPort", "protocol"])
        }
        "containerStatuses" | "initContainerStatuses" => names(&["name"]),
        _ => ListKind::Atomic,
    }
}

fn schema_at<'a>(schema: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = schema;
    for seg in path {
        // descend through arrays to their items first
        while cur.get("type").and_then(Value::as_str) == Some("array") {
            cur = cur.get("items")?;
        }
        cur = match cur.get("properties").and_then(|p| p.get(*seg)) {
            Some(s) => s,
            None => cur.get("additionalProperties").filter(|a| a.is_object())?,
        };
    }
    Some(cur)
}

impl Schema {
    /// The semantics of the list at `path` (field names from the root, no list keys).
    pub fn list_kind(&self, path: &[&str]) -> ListKind {
        if self.builtin || path.first() == Some(&"metadata") {
            return builtin_list_kind(&self.kind, path);
        }
        let Some(s) = self.openapi.as_ref().and_then(|o| schema_at(o, path)) else {
            return ListKind::Atomic;
        };
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListKind::Map(
                s.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|k| k.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Some("set") => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }

    /// The strategic-merge patchMergeKey of the list at `path`, `Some("")` for merged
    /// primitive lists, `None` for replaced lists.
    pub fn merge_key(&self, path: &[&str]) -> Option<String> {
        match self.list_kind(path) {
            ListKind::Map(keys) => keys.into_iter().next(),
            ListKind::Set => Some(String::new()),
            ListKind::Atomic => None,
        }
    }
}

/// The identity of a list item under `keys` (missing `protocol` defaults to TCP, as the
/// built-in schemas default it).
pub fn item_key(item: &Value, keys: &[String]) -> Map<String, Value> {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let mut m = Map::new();
    for k in sorted {
        match item.get(k) {
            Some(v) => {
                m.insert(k.clone(), v.clone());
            }
            None if k == "protocol" => {
                m.insert(k.clone(), Value::String("TCP".into()));
            }
            None => {}
        }
    }
    m
}

/// Applies `default` values of an `openAPIV3Schema` to an object, recursively.
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    match obj {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if !map.contains_key(k) {
                        if let Some(d) = s.get("default") {
                            map.insert(k.clone(), d.clone());
                        }
                    }
                    if let Some(v) = map.get_mut(k) {
                        apply_defaults(s, v);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for v in map.values_mut() {
                    apply_defaults(ap, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for v in items {
                    apply_defaults(s, v);
                }
            }
        }
        _ => {}
    }
}

/// Paths of fields not declared by an `openAPIV3Schema` (for `fieldValidation=Strict`).
pub fn unknown_fields(schema: &Value, obj: &Value, prefix: &str, out: &mut Vec<String>) {
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match obj {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema
                .get("additionalProperties")
                .filter(|a| a.is_object() || a.as_bool() == Some(true));
            if props.is_none() && additional.is_none() {
                // An object without properties in a structural schema is only valid empty;
                // treat it as free-form to stay permissive.
                return;
            }
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if prefix.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match props.and_then(|p| p.get(k)) {
                    Some(s) => unknown_fields(s, v, &path, out),
                    None => match additional {
                        Some(a) if a.is_object() => unknown_fields(a, v, &path, out),
                        Some(_) => {}
                        None => out.push(path),
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    unknown_fields(s, v, &format!("{prefix}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Validates an object against a structural `openAPIV3Schema` (type, enum, required,
/// bounds, lengths, item counts, int-or-string, nullable); returns (field path, message)
/// per violation, in the real server's wording.
pub fn validate(schema: &Value, v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let field = if path.is_empty() {
        "<root>".to_string()
    } else {
        path.to_string()
    };
    if v.is_null() {
        if schema.get("nullable").and_then(Value::as_bool) != Some(true)
            && !path.is_empty()
            && schema.get("type").is_some()
        {
            out.push((
                field.clone(),
                format!(
                    "Invalid value: \"null\": {field} in body must be of type {}: \"null\"",
                    schema
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("object")
                ),
            ));
        }
        return;
    }
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let got = type_name(v);
        let ok = got == want
            || (want == "number" && got == "integer")
            || (int_or_string && (got == "integer" || got == "string"));
        if !ok {
            out.push((
                field.clone(),
                format!(
                    "Invalid value: \"{got}\": {field} in body must be of type {want}: \"{got}\""
                ),
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(v) {
            let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
            out.push((
                field.clone(),
                format!(
                    "Unsupported value: {v}: supported values: {}",
                    list.join(", ")
                ),
            ));
        }
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            if n < min {
                out.push((field.clone(), format!("Invalid value: {v}: {field} in body should be greater than or equal to {min}")));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if n > max {
                out.push((
                    field.clone(),
                    format!(
                        "Invalid value: {v}: {field} in body should be less than or equal to {max}"
                    ),
                ));
            }
        }
    }
    if let Some(s) = v.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
            if len < min {
                out.push((
                    field.clone(),
                    format!(
                        "Invalid value: {v}: {field} in body should be at least {min} chars long"
                    ),
                ));
            }
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
            if len > max {
                out.push((
                    field.clone(),
                    format!("Too long: may not be more than {max} bytes"),
                ));
            }
        }
    }
    match v {
        Value::Object(m) => {
            for r in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !m.contains_key(r) {
                    let p = if path.is_empty() {
                        r.to_string()
                    } else {
                        format!("{path}.{r}")
                    };
                    out.push((p, "Required value".to_string()));
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => validate(s, child, &p, out),
                    (None, Some(a)) => validate(a, child, &p, out),
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if (items.len() as u64) < min {
                    out.push((
                        field.clone(),
                        format!(
                            "Invalid value: {}: {field} in body should have at least {min} items",
                            items.len()
                        ),
                    ));
                }
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if items.len() as u64 > max {
                    out.push((
                        field.clone(),
                        format!("Too many: {}: must have at most {max} items", items.len()),
                    ));
                }
            }
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate(s, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Drops fields a structural `openAPIV3Schema` does not declare (the real server prunes
/// them unless `x-kubernetes-preserve-unknown-fields`).
pub fn prune(schema: &Value, v: &mut Value, root: bool) {
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            if props.is_none() && additional.is_none() {
                return;
            }
            m.retain(|k, _| {
                (root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                    || props.map(|p| p.contains_key(k)).unwrap_or(false)
                    || additional
                        .map(|a| a.is_object() || a.as_bool() == Some(true))
                        .unwrap_or(false)
            });
            for (k, child) in m.iter_mut() {
                if root && k == "metadata" {
                    continue;
                }
                match props.and_then(|p| p.get(k)) {
                    Some(s) => prune(s, child, false),
                    None => {
                        if let Some(a) = additional.filter(|a| a.is_object()) {
                            prune(a, child, false);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for i in items {
                    prune(s, i, false);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod validate_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn custom_resources_are_validated_against_their_schema() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1}, "mode": {"type": "string", "enum": ["a", "b"]}, "port": {"x-kubernetes-int-or-string": true}}}}});
        let mut out = Vec::new();
        validate(
            &schema,
            &json!({"spec": {"size": 3, "mode": "a", "port": "http"}}),
            "",
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        validate(
            &schema,
            &json!({"spec": {"size": "x", "mode": "c"}}),
            "",
            &mut out,
        );
        let mut fields: Vec<&str> = out.iter().map(|(f, _)| f.as_str()).collect();
        fields.sort();
        assert_eq!(fields, ["spec.mode", "spec.size"]);
        out.clear();
        validate(&schema, &json!({"spec": {"size": 0}}), "", &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
        validate(&schema, &json!({"spec": {}}), "", &mut out);
        assert_eq!(
            out,
            vec![("spec.size".to_string(), "Required value".to_string())]
        );
    }
}
