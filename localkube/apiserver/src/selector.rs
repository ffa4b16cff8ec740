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

fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        if p.is_empty()
            || p.len() > 253
            || !p
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        {
            return false;
        }
    }
    valid_value(name) && !name.is_empty()
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && v.chars()
            .next()
            .map(|c| c.is_ascii_alphanumeric())
            .unwrap_or(true)
        && v.chars()
            .last()
            .map(|c| c.is_ascii_alphanumeric())
            .unwrap_or(true)
}

fn split_top(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
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
    for v in &values {
        if !valid_value(v) {
            return Err(ApiError::bad_request(format!(
                "unable to parse requirement: invalid label value: {v:?}"
            )));
        }
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax; errors are 400 BadRequest.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: found '', expected: identifier in {s:?}"
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
            let req = if let Some(k) = p.strip_prefix('!') {
                let k = k.trim();
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                Requirement::DoesNotExist(k.into())
            } else if let Some((k, v)) = p.split_once("!=") {
                let (k, v) = (k.trim(), v.trim());
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                if !valid_value(v) {
                    return Err(bad_val(v));
                }
                Requirement::NotIn(k.into(), vec![v.into()])
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                let (k, v) = (k.trim(), v.trim());
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                if !valid_value(v) {
                    return Err(bad_val(v));
                }
                Requirement::In(k.into(), vec![v.into()])
            } else if let Some((k, v)) = p.split_once('>') {
                let n = v.trim().parse().map_err(|_| bad_val(v))?;
                Requirement::Gt(k.trim().into(), n)
            } else if let Some((k, v)) = p.split_once('<') {
                let n = v.trim().parse().map_err(|_| bad_val(v))?;
                Requirement::Lt(k.trim().into(), n)
            } else if let Some(idx) = p.find(" notin ").or_else(|| p.find(" notin(")) {
                let k = p[..idx].trim();
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                Requirement::NotIn(k.into(), parse_set(&p[idx + 6..], s)?)
            } else if let Some(idx) = p.find(" in ").or_else(|| p.find(" in(")) {
                let k = p[..idx].trim();
                if !valid_key(k) {
                    return Err(bad_key(k));
                }
                Requirement::In(k.into(), parse_set(&p[idx + 3..], s)?)
            } else {
                if !valid_key(p) {
                    return Err(bad_key(p));
                }
                Requirement::Exists(p.into())
            };
            requirements.push(req);
        }
        Ok(LabelSelector { requirements })
    }

    /// Converts a `metav1.LabelSelector` object (matchLabels, matchExpressions).
    pub fn from_object(sel: &Value) -> LabelSelector {
        let mut requirements = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
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
                .filter_map(|v| v.as_str().map(String::from))
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
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        Requirement::In(k.clone(), vec![v.as_str().unwrap_or_default().to_string()])
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
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => get(k).map(|v| vs.iter().any(|x| x == v)).unwrap_or(false),
            Requirement::NotIn(k, vs) => get(k).map(|v| !vs.iter().any(|x| x == v)).unwrap_or(true),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
            Requirement::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .map(|v| v > *n)
                .unwrap_or(false),
            Requirement::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .map(|v| v < *n)
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
fn unsupported(r: &ResourceInfo, field: &str) -> ApiError {
    if r.crd.is_none() && supported_fields(&r.group, &r.kind).is_none() {
        return ApiError::bad_request(format!(
            "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ));
    }
    ApiError::bad_request(format!("field label not supported: {field}"))
}

/// Whether `r` accepts the field label `field` (custom resources: name, namespace when
/// namespaced, and the CRD's `selectableFields`).
fn accepts(r: &ResourceInfo, field: &str) -> bool {
    if let Some(crd) = &r.crd {
        return field == "metadata.name"
            || (r.namespaced && field == "metadata.namespace")
            || crd.selectable_fields.iter().any(|f| f == field);
    }
    match supported_fields(&r.group, &r.kind) {
        Some(labels) => labels.contains(&field),
        None => matches!(field, "metadata.name" | "metadata.namespace"),
    }
}

impl FieldSelector {
    /// Parses a field selector, rejecting fields the resource does not support (400 with
    /// the real server's message).
    pub fn parse(s: &str, r: &ResourceInfo) -> Result<FieldSelector, ApiError> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { terms });
        }
        for part in s.split(',') {
            let part = part.trim();
            let (field, value, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !accepts(r, field) {
                return Err(unsupported(r, field));
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
        self.terms.iter().all(|(f, v, eq)| {
            let actual = field_value(obj, f);
            (actual == *v) == *eq
        })
    }

    /// The value of `metadata.name=X` if the selector pins the name (RBAC, trap 11).
    pub fn pinned_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, _, eq)| f == "metadata.name" && *eq)
            .map(|(_, v, _)| v.as_str())
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
    for seg in field.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
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
        for s in ["a in b", "=b", "a b", "a=b c", "x in (a b)"] {
            let e = LabelSelector::parse(s).expect_err(s);
            assert_eq!(e.reason, Reason::BadRequest, "{s}");
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
        let e = FieldSelector::parse("metadata.namespace=x", &find("Node")).expect_err("node ns");
        assert_eq!(e.message, "field label not supported: metadata.namespace");
        let f = FieldSelector::parse("metadata.name=x", &find("Deployment")).expect("parse");
        assert_eq!(f.pinned_name(), Some("x"));
    }

    #[test]
    fn issue14_absent_booleans_select_as_false() {
        let all = crate::registry::builtin_resources();
        let node = all.iter().find(|r| r.kind == "Node").expect("node");
        let plain = json!({"metadata": {"name": "n"}, "spec": {}});
        let cordoned = json!({"metadata": {"name": "c"}, "spec": {"unschedulable": true}});
        for (s, plain_matches) in [
            ("spec.unschedulable==false", true),
            ("spec.unschedulable=false", true),
            ("spec.unschedulable!=true", true),
            ("spec.unschedulable=true", false),
        ] {
            let f = FieldSelector::parse(s, node).expect(s);
            assert_eq!(f.matches(&plain), plain_matches, "{s}");
            assert_eq!(f.matches(&cordoned), !plain_matches, "{s}");
        }
    }
}
