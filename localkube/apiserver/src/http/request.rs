//! Request parsing: the resource path, the verb, the query's options, the body; and the
//! authorization of a resource request.

use super::ServerState;
use crate::accept::{self, Endpoint, Output};
use crate::auth::{self, Attributes, UserInfo};
use crate::cluster::{Cluster, DeleteOptions, WriteOptions};
use crate::error::ApiError;
use crate::plugin::StreamSubresource;
use crate::registry::{ResourceInfo, Subresource};
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::IncludeObject;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use bytes::Bytes;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The query parameters.
pub(super) type Query = HashMap<String, String>;

/// A parsed resource path.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) r: ResourceInfo,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) sub: Option<String>,
    pub(super) watch_prefix: bool,
}

fn parse_query(query: Option<&str>) -> Query {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .map(|(k, value)| (k.into_owned(), value.into_owned()))
        .collect()
}

pub(super) fn flag(query: &Query, key: &str) -> bool {
    matches!(query.get(key).map(String::as_str), Some("true") | Some("1"))
}

pub(super) fn parse_target(cluster: &Cluster, segs: &[&str]) -> Option<Target> {
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, value, rest @ ..] => (*g, *value, rest),
        _ => return None,
    };
    let (watch_prefix, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let lookup = |path: &str| cluster.registry.lookup(group, version, path);
    if let ["namespaces", ns, plural, tail @ ..] = rest {
        if let Some(r) = lookup(plural).filter(|r| r.namespaced) {
            if tail.len() > 2 {
                return None;
            }
            return Some(Target {
                r,
                namespace: Some(ns.to_string()),
                name: tail.first().map(|s| s.to_string()),
                sub: tail.get(1).map(|s| s.to_string()),
                watch_prefix,
            });
        }
    }
    let (plural, tail) = rest.split_first()?;
    let resource = lookup(plural)?;
    if tail.len() > 2 {
        return None;
    }
    Some(Target {
        r: resource,
        namespace: None,
        name: tail.first().map(|s| s.to_string()),
        sub: tail.get(1).map(|s| s.to_string()),
        watch_prefix,
    })
}

fn verb_of(method: &Method, target: &Target, query: &Query) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => {
            if target.name.is_some() {
                if target.watch_prefix {
                    "watch"
                } else {
                    "get"
                }
            } else if target.watch_prefix || flag(query, "watch") {
                "watch"
            } else {
                "list"
            }
        }
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => {
            if target.name.is_some() {
                "delete"
            } else {
                "deletecollection"
            }
        }
        _ => "",
    }
}

pub(super) async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, super::BODY_BYTES_MAX)
        .await
        .map_err(|_| ApiError::too_large(super::BODY_BYTES_MAX))
}

pub(super) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|header_value| header_value.to_str().ok())
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_lowercase()
}

pub(super) fn decode_object(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    let value: Value = match ct.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/vnd.kubernetes.protobuf" => {
            crate::protobuf::decode_body(body).map_err(|e| {
                if e.contains("not supported") {
                    ApiError::unsupported_media_type("application/vnd.kubernetes.protobuf")
                } else {
                    ApiError::bad_request(format!("couldn't decode the protobuf body: {e}"))
                }
            })?
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => serde_yaml::from_slice(body)
            .map_err(|error| {
                ApiError::bad_request(format!(
                    "couldn't get version/kind; yaml parse error: {error}"
                ))
            })?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    Ok(value)
}

/// The output a resource request negotiated from its `Accept` header.
pub(super) fn output_of(headers: &HeaderMap) -> Result<Output, ApiError> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|header_value| header_value.to_str().ok());
    accept::negotiate(accept, Endpoint::Resource)
}

pub(super) fn include_object(query: &Query) -> IncludeObject {
    match query.get("includeObject").map(String::as_str) {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    }
}

pub(super) fn write_options(query: &Query, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
    let manager = match query.get("fieldManager") {
        Some(message) => message.clone(),
        None => headers
            .get(header::USER_AGENT)
            .and_then(|header_value| header_value.to_str().ok())
            .map(|ua| {
                ua.split('/')
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(128)
                    .collect()
            })
            .unwrap_or_default(),
    };
    if manager.len() > 128 {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            "fieldManager",
            "Too long: may not be more than 128 bytes",
        ));
    }
    let strict = match query.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Ignore") | Some("Warn") => false,
        Some("Strict") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other:?}"
            )))
        }
    };
    let dry_run = match query.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            )))
        }
    };
    let force = match query.get("force").map(String::as_str) {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid force value {other:?}"
            )))
        }
    };
    Ok(WriteOptions {
        manager,
        dry_run,
        strict,
        force,
    })
}

fn selectors(target: &Target, query: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(
        query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )?;
    let fields = FieldSelector::parse(
        query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
        &target.r,
    )?;
    Ok((labels, fields))
}

pub(super) fn delete_options(
    query: &Query,
    body: Option<Value>,
) -> Result<DeleteOptions, ApiError> {
    let b = body.unwrap_or(Value::Null);
    let grace =
        match query.get("gracePeriodSeconds") {
            Some(group) => Some(group.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("invalid gracePeriodSeconds {group:?}"))
            })?),
            None => b.get("gracePeriodSeconds").and_then(Value::as_i64),
        };
    let mut propagation = query.get("propagationPolicy").cloned().or_else(|| {
        b.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
    });
    if propagation.is_none() {
        if let Some(orphan) = query
            .get("orphanDependents")
            .map(|value| value == "true")
            .or_else(|| b.get("orphanDependents").and_then(Value::as_bool))
        {
            propagation = Some(if orphan {
                "Orphan".into()
            } else {
                "Background".into()
            });
        }
    }
    if let Some(path) = &propagation {
        if !matches!(path.as_str(), "Orphan" | "Background" | "Foreground") {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                "propagationPolicy",
                format!("Unsupported value: {path:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""),
            ));
        }
    }
    let dry_run = query.get("dryRun").map(|d| d == "All").unwrap_or(false)
        || b.get("dryRun")
            .and_then(Value::as_array)
            .map(|a| !a.is_empty())
            .unwrap_or(false);
    Ok(DeleteOptions {
        grace_period_seconds: grace,
        propagation,
        precondition_uid: b
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        precondition_rv: b
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run,
    })
}

impl Target {
    /// The pod streaming subresource (exec, attach, portforward) this path names, if any.
    pub(super) fn stream_subresource(&self) -> Option<StreamSubresource> {
        let sub = self.sub.as_deref().and_then(StreamSubresource::parse)?;
        let pod = self.name.is_some() && self.r.group.is_empty() && self.r.plural == "pods";
        pod.then_some(sub)
    }
}

/// A resource request, parsed and authorized: what the per-verb handlers read.
pub(super) struct ResourceRequest {
    pub(super) st: Arc<ServerState>,
    pub(super) target: Target,
    pub(super) sub: Option<Subresource>,
    pub(super) verb: &'static str,
    /// The path's namespace (empty for a cluster-scoped path).
    pub(super) namespace: String,
    pub(super) attrs: Attributes,
    pub(super) user: UserInfo,
    /// The selectors of a list, watch or deletecollection (else empty).
    pub(super) labels: LabelSelector,
    pub(super) fields: FieldSelector,
    pub(super) query: Query,
    pub(super) method: Method,
    pub(super) headers: HeaderMap,
}

impl ResourceRequest {
    /// The request to `target` by `user`, authorized by RBAC (trap 11: the verb from the
    /// method, a fieldSelector on `metadata.name` as the name). A namespaced resource needs
    /// a namespace in its path except to list or watch; a cluster-scoped one must not have
    /// one.
    pub(super) fn authorize(
        st: Arc<ServerState>,
        target: Target,
        user: UserInfo,
        parts: Parts,
    ) -> Result<Self, ApiError> {
        let query = parse_query(parts.uri.query());
        let method = parts.method;
        let sub = match target.sub.as_deref() {
            None => None,
            Some(segment) => match Subresource::parse(segment) {
                Some(sub) if target.r.has_subresource(sub) => Some(sub),
                _ => return Err(ApiError::path_not_found()),
            },
        };
        let verb = verb_of(&method, &target, &query);
        if verb.is_empty() {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource: {method}"
            )));
        }
        let namespace = target.namespace.clone().unwrap_or_default();
        let mut attrs = Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: target.r.group.clone(),
            resource: target.r.plural.clone(),
            subresource: target.sub.clone().unwrap_or_default(),
            namespace: namespace.clone(),
            name: target.name.clone().unwrap_or_default(),
            path: parts.uri.path().to_string(),
        };
        let (labels, fields) = if matches!(verb, "list" | "watch" | "deletecollection") {
            selectors(&target, &query)?
        } else {
            Default::default()
        };
        if attrs.name.is_empty() {
            if let Some(n) = fields.pinned_name() {
                attrs.name = n.to_string();
            }
        }
        if !auth::authorize(&st.cluster.store, &user, &attrs) {
            return Err(attrs.forbidden(&user));
        }
        let (namespaced, has_namespace) = (target.r.namespaced, target.namespace.is_some());
        if namespaced && !has_namespace && !matches!(verb, "list" | "watch") {
            return Err(ApiError::path_not_found());
        }
        if !namespaced && has_namespace {
            return Err(ApiError::path_not_found());
        }
        Ok(Self {
            st,
            target,
            sub,
            verb,
            namespace,
            attrs,
            user,
            labels,
            fields,
            query,
            method,
            headers: parts.headers,
        })
    }
}
