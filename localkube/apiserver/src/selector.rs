//! Label selectors (trap 8) and field selectors (trap 7).

use super::error::ApiError;
use super::registry::ResourceInfo;
use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
pub enum Requirement {
    /// `k=v`, `k==v`, `k in (..)`.
    In(String, Vec<String>),
    /// `k!=v`, `k notin (..)`: also matches objects without the label.
    NotIn(String, Vec<String>),
    /// `k`.
    Exists(String),
    /// `!k`.
    DoesNotExist(String),
    /// `k>N`.
    Gt(String, i64),
    /// `k<N`.
    Lt(String, i64),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector {
    /// All must hold.
    pub requirements: Vec<Requirement>,
}

fn valid_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(path) = prefix {
        if path.is_empty()
            || path.len() > 253
            || !path.chars().all(|character| {
                character.is_ascii_lowercase()
                    || character.is_ascii_digit()
                    || character == '-'
                    || character == '.'
            })
        {
            return false;
        }
    }
    valid_value(name) && !name.is_empty()
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && value
            .chars()
            .next()
            .map(|c| c.is_ascii_alphanumeric())
            .unwrap_or(true)
        && value
            .chars()
            .last()
            .map(|character| character.is_ascii_alphanumeric())
            .unwrap_or(true)
}

fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for character in text.chars() {
        match character {
            '(' => {
                depth += 1;
                cur.push(character)
            }
            ')' => {
                depth -= 1;
                cur.push(character)
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(character),
        }
    }
    parts.push(cur);
    parts
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|reason| reason.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{rest}', expected: '(' in {whole:?}"
            ))
        })?;
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    for value in &values {
        if !valid_value(value) {
            return Err(ApiError::bad_request(format!(
                "unable to parse requirement: invalid label value: {value:?}"
            )));
        }
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax; errors are 400 BadRequest.
    pub fn parse(text: &str) -> Result<LabelSelector, ApiError> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for part in split_top(text) {
            let path = part.trim();
            if path.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: found '', expected: identifier in {text:?}"
                )));
            }
            let bad_key = |k: &str| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label key {k:?}"
                ))
            };
            let bad_val = |v: &str| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label value: {v:?}"
                ))
            };
            let req = if let Some(k) = path.strip_prefix('!') {
                let k = k.trim();
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                Requirement::DoesNotExist(k.into())
            } else if let Some((k, v)) = path.split_once("!=") {
                let (k, v) = (k.trim(), v.trim());
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                if !valid_value(v) {
                    return Err(bad_val(v));
                }
                Requirement::NotIn(k.into(), vec![v.into()])
            } else if let Some((k, v)) = path.split_once("==").or_else(|| path.split_once('=')) {
                let (k, v) = (k.trim(), v.trim());
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                if !valid_value(v) {
                    return Err(bad_val(v));
                }
                Requirement::In(k.into(), vec![v.into()])
            } else if let Some((k, v)) = path.split_once('>') {
                let n = v.trim().parse().map_err(|_| bad_val(v))?;
                Requirement::Gt(k.trim().into(), n)
            } else if let Some((k, value)) = path.split_once('<') {
                let count = value.trim().parse().map_err(|_| bad_val(value))?;
                Requirement::Lt(k.trim().into(), count)
            } else if let Some(idx) = path.find(" notin ").or_else(|| path.find(" notin(")) {
                let k = path[..idx].trim();
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                Requirement::NotIn(k.into(), parse_set(&path[idx + 6..], text)?)
            } else if let Some(idx) = path.find(" in ").or_else(|| path.find(" in(")) {
                let key = path[..idx].trim();
                if !valid_key(key) {
                    return Err(bad_key(key));
                }
                Requirement::In(key.into(), parse_set(&path[idx + 3..], text)?)
            } else {
                if !valid_key(path) {
                    return Err(bad_key(path));
                }
                Requirement::Exists(path.into())
            };
            requirements.push(req);
        }
        Ok(LabelSelector { requirements })
    }

    /// Converts a `metav1.LabelSelector` object (matchLabels, matchExpressions).
    pub fn from_object(sel: &Value) -> LabelSelector {
        let mut requirements = Vec::new();
        if let Some(map) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in map {
                requirements.push(Requirement::In(
                    k.clone(),
                    vec![v.as_str().unwrap_or_default().to_string()],
                ));
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|value| value.as_str().map(String::from))
                .collect();
            match e
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "In" => requirements.push(Requirement::In(key, values)),
                "NotIn" => requirements.push(Requirement::NotIn(key, values)),
                "Exists" => requirements.push(Requirement::Exists(key)),
                "DoesNotExist" => requirements.push(Requirement::DoesNotExist(key)),
                // An unknown operator selects nothing, as the real validation would reject it.
                _ => requirements.push(Requirement::In(key, vec![])),
            }
        }
        LabelSelector { requirements }
    }

    /// From a `map[string]string` selector (Service spec.selector).
    pub fn from_map(m: &Value) -> LabelSelector {
        let requirements = m
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(key, value)| {
                        Requirement::In(
                            key.clone(),
                            vec![value.as_str().unwrap_or_default().to_string()],
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        LabelSelector { requirements }
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.matches_labels(labels)
    }

    /// Whether a labels map satisfies every requirement.
    pub fn matches_labels(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::In(k, vs) => {
                    get(k).map(|v| vs.iter().any(|x| x == v)).unwrap_or(false)
                }
                Requirement::NotIn(k, vs) => get(k)
                    .map(|v| !vs.iter().any(|text| text == v))
                    .unwrap_or(true),
                Requirement::Exists(k) => get(k).is_some(),
                Requirement::DoesNotExist(k) => get(k).is_none(),
                Requirement::Gt(k, n) => get(k)
                    .and_then(|v| v.parse::<i64>().ok())
                    .map(|v| v > *n)
                    .unwrap_or(false),
                Requirement::Lt(key, count) => get(key)
                    .and_then(|value| value.parse::<i64>().ok())
                    .map(|number| number < *count)
                    .unwrap_or(false),
            })
    }

    /// Whether the selector selects nothing in particular (empty).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector {
    /// (field, value, equal?)
    pub terms: Vec<(String, String, bool)>,
}

/// The field labels a kind accepts, as the real scheme's field label conversion functions
/// (`pkg/apis/core/v1/conversion.go`, `pkg/apis/events/v1/conversion.go`); `None` for kinds
/// with the default conversion (only `metadata.name` and `metadata.namespace`).
pub fn supported_fields(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    let labels: &'static [&'static str] = match (group, kind) {
        ("", "Pod") => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
            "spec.host",
        ],
        ("", "Node") => &["metadata.name", "spec.unschedulable"],
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        ("events.k8s.io", "Event") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        ("", "Namespace") => &["status.phase", "metadata.name"],
        ("", "Secret") => &["type", "metadata.namespace", "metadata.name"],
        ("", "Service") => &[
            "metadata.namespace",
            "metadata.name",
            "spec.clusterIP",
            "spec.type",
        ],
        _ => return None,
    };
    Some(labels)
}

/// Why a field label is refused, in the real server's words.
fn unsupported(resource: &ResourceInfo, field: &str) -> ApiError {
    if resource.crd.is_none() && supported_fields(&resource.group, &resource.kind).is_none() {
        return ApiError::bad_request(format!(
            "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ));
    }
    ApiError::bad_request(format!("field label not supported: {field}"))
}

/// Whether `r` accepts the field label `field` (custom resources: name, namespace when
/// namespaced, and the CRD's `selectableFields`).
fn accepts(resource: &ResourceInfo, field: &str) -> bool {
    if let Some(crd) = &resource.crd {
        return field == "metadata.name"
            || (resource.namespaced && field == "metadata.namespace")
            || crd
                .selectable_fields
                .iter()
                .any(|selectable_field| selectable_field == field);
    }
    match supported_fields(&resource.group, &resource.kind) {
        Some(labels) => labels.contains(&field),
        None => matches!(field, "metadata.name" | "metadata.namespace"),
    }
}

impl FieldSelector {
    /// Parses a field selector, rejecting fields the resource does not support (400 with
    /// the real server's message).
    pub fn parse(text: &str, resource: &ResourceInfo) -> Result<FieldSelector, ApiError> {
        let mut terms = Vec::new();
        if text.trim().is_empty() {
            return Ok(FieldSelector { terms });
        }
        for part in text.split(',') {
            let part = part.trim();
            let (field, value, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !accepts(resource, field) {
                return Err(unsupported(resource, field));
            }
            // `spec.host` is the old v1 clients' name of `spec.nodeName`.
            let field = if field == "spec.host" {
                "spec.nodeName"
            } else {
                field
            };
            terms.push((field.to_string(), value.trim().to_string(), eq));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the object matches.
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(field, term, eq)| {
            let actual = field_value(obj, field);
            (actual == *term) == *eq
        })
    }

    /// The value of `metadata.name=X` if the selector pins the name (RBAC, trap 11).
    pub fn pinned_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(field, _, eq)| field == "metadata.name" && *eq)
            .map(|(_, value, _)| value.as_str())
    }
}

/// The value the real server's selectable field set holds for `field` (its
/// `ToSelectableFields` functions): booleans default to `false`, `status.podIP` is the first
/// of `status.podIPs`, `source` falls back as events.k8s.io's does.
fn field_value(obj: &Value, field: &str) -> String {
    match field {
        "spec.unschedulable" | "spec.hostNetwork" => {
            let set = obj
                .pointer(&format!("/{}", field.replace('.', "/")))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            set.to_string()
        }
        "status.podIP" => obj
            .pointer("/status/podIPs/0/ip")
            .or_else(|| obj.pointer("/status/podIP"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        // Accepted by the real conversion but absent from its field set.
        "status.podIPs" => String::new(),
        "source" => [
            "/source/component",
            "/deprecatedSource/component",
            "/reportingController",
        ]
        .iter()
        .filter_map(|p| obj.pointer(p).and_then(Value::as_str))
        .find(|s| !s.is_empty())
        .unwrap_or_default()
        .to_string(),
        _ => scalar_at(obj, field),
    }
}

fn scalar_at(obj: &Value, field: &str) -> String {
    let mut cur = obj;
    for segment in field.split('.') {
        match cur.get(segment) {
            Some(value) => cur = value,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(text) => text.clone(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;
    use serde_json::json;

    fn labeled(l: Value) -> Value {
        json!({"metadata": {"labels": l}})
    }

    #[test]
    fn trap8_not_equal_and_notin_match_objects_without_the_label() {
        let none = json!({"metadata": {}});
        assert!(LabelSelector::parse("a!=b").expect("parse").matches(&none));
        assert!(LabelSelector::parse("a notin (b,c)")
            .expect("parse")
            .matches(&none));
        assert!(!LabelSelector::parse("a in (b,c)")
            .expect("parse")
            .matches(&none));
        let ab = labeled(json!({"a": "b"}));
        assert!(!LabelSelector::parse("a!=b").expect("parse").matches(&ab));
        assert!(LabelSelector::parse("a==b,a").expect("parse").matches(&ab));
        assert!(LabelSelector::parse("!x,a=b").expect("parse").matches(&ab));
        assert!(!LabelSelector::parse("!a").expect("parse").matches(&ab));
    }

    #[test]
    fn trap8_invalid_selectors_are_bad_requests() {
        for text in ["a in b", "=b", "a b", "a=b c", "x in (a b)"] {
            let error = LabelSelector::parse(text).expect_err(text);
            assert_eq!(error.reason, Reason::BadRequest, "{text}");
        }
    }

    #[test]
    fn trap7_field_selector_support() {
        let all = crate::registry::builtin_resources();
        let find = |kind: &str| all.iter().find(|r| r.kind == kind).expect(kind).clone();
        let pod = find("Pod");
        assert!(FieldSelector::parse("spec.nodeName=iad,status.phase!=Running", &pod).is_ok());
        let e =
            FieldSelector::parse("spec.nodeName=iad", &find("ConfigMap")).expect_err("unsupported");
        assert_eq!((e.code, e.reason), (400, Reason::BadRequest));
        assert_eq!(
            e.message,
            "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let error =
            FieldSelector::parse("metadata.namespace=x", &find("Node")).expect_err("node ns");
        assert_eq!(
            error.message,
            "field label not supported: metadata.namespace"
        );
        let selector = FieldSelector::parse("metadata.name=x", &find("Deployment")).expect("parse");
        assert_eq!(selector.pinned_name(), Some("x"));
    }

    #[test]
    fn issue14_absent_booleans_select_as_false() {
        let all = crate::registry::builtin_resources();
        let node = all.iter().find(|r| r.kind == "Node").expect("node");
        let plain = json!({"metadata": {"name": "n"}, "spec": {}});
        let cordoned = json!({"metadata": {"name": "c"}, "spec": {"unschedulable": true}});
        for (text, plain_matches) in [
            ("spec.unschedulable==false", true),
            ("spec.unschedulable=false", true),
            ("spec.unschedulable!=true", true),
            ("spec.unschedulable=true", false),
        ] {
            let selector = FieldSelector::parse(text, node).expect(text);
            assert_eq!(selector.matches(&plain), plain_matches, "{text}");
            assert_eq!(selector.matches(&cordoned), !plain_matches, "{text}");
        }
    }
}
