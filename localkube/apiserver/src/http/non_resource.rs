//! Non-resource paths: health, version, discovery (legacy and aggregated) and OpenAPI.

use super::response::{json_response, with_content_type};
use super::ServerState;
use crate::accept::{self, Endpoint, Output};
use crate::auth::{self, Attributes, UserInfo};
use crate::discovery;
use crate::error::ApiError;
use crate::openapi;
use crate::registry::ResourceInfo;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::response::Response;
use serde_json::{json, Value};

/// The answer to a non-resource path, `None` for any other path. Health paths answer
/// anyone; the others only GET (or HEAD), authorized by path unless `public`.
pub(super) fn serve(
    st: &ServerState,
    parts: &Parts,
    segs: &[&str],
    user: &UserInfo,
    public: bool,
) -> Result<Option<Response>, ApiError> {
    if matches!(segs.first().copied(), Some("healthz" | "livez" | "readyz")) {
        return Ok(Some(
            Response::builder()
                .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(Body::from("ok"))
                .unwrap_or_default(),
        ));
    }
    let aggregated = aggregated_discovery(&parts.headers, segs)?;
    let Some(doc) = document(st, segs, aggregated)? else {
        return Ok(None);
    };
    let (method, path) = (&parts.method, parts.uri.path());
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {method} {path}"
        )));
    }
    let attributes = Attributes {
        verb: "get".into(),
        resource_request: false,
        path: path.to_string(),
        ..Default::default()
    };
    if !public && !auth::authorize(&st.cluster.store, user, &attributes) {
        return Err(attributes.forbidden(user));
    }
    if segs == ["openapi", "v2"] {
        return openapi_v2(&parts.headers, &doc).map(Some);
    }
    if let Some(value) = aggregated {
        return Ok(Some(with_content_type(
            json_response(200, &doc),
            &discovery::aggregated_content_type(value),
        )));
    }
    Ok(Some(json_response(200, &doc)))
}

/// The aggregated discovery version `/api` or `/apis` negotiated (`None`: the legacy
/// documents, or another path).
fn aggregated_discovery(
    headers: &HeaderMap,
    segs: &[&str],
) -> Result<Option<&'static str>, ApiError> {
    if !matches!(segs, ["api"] | ["apis"]) {
        return Ok(None);
    }
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|header_value| header_value.to_str().ok());
    match accept::negotiate(accept, Endpoint::Discovery)? {
        Output::Aggregated(value) => Ok(Some(value)),
        Output::Object | Output::Table | Output::Metadata | Output::MetadataList => Ok(None),
    }
}

/// The document of a non-resource path, `None` when `segs` is not one.
fn document(
    st: &ServerState,
    segs: &[&str],
    aggregated: Option<&'static str>,
) -> Result<Option<Value>, ApiError> {
    let all = || st.cluster.registry.all();
    let doc = match segs {
        [] => {
            json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v2", "/openapi/v3", "/readyz", "/version"]})
        }
        ["version"] => discovery::version(),
        ["api"] => match aggregated {
            Some(v) => discovery::aggregated(&all(), true, v),
            None => discovery::api_versions(&st.address),
        },
        ["apis"] => match aggregated {
            Some(v) => discovery::aggregated(&all(), false, v),
            None => discovery::group_list(&all()),
        },
        ["api", v] => resource_list(&all(), "", v)?,
        ["apis", g, value] => resource_list(&all(), g, value)?,
        ["apis", g] => discovery::group(&all(), g).ok_or_else(ApiError::path_not_found)?,
        ["openapi", "v2"] => openapi::document(&all()),
        ["openapi", "v3"] => {
            let mut paths = serde_json::Map::new();
            for (path, rs) in discovery::by_openapi_path(&all()) {
                let doc = discovery::openapi_gv(&rs);
                paths.insert(
                    path.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", discovery::doc_hash(&doc))}),
                );
            }
            json!({"paths": paths})
        }
        ["openapi", "v3", rest @ ..] => {
            let key = rest.join("/");
            let all = discovery::by_openapi_path(&all());
            let rs = all.get(&key).ok_or_else(ApiError::path_not_found)?;
            discovery::openapi_gv(rs)
        }
        _ => return Ok(None),
    };
    Ok(Some(doc))
}

/// `/api/<v>` or `/apis/<group>/<v>`: the version's resources (404 when it has none).
fn resource_list(all: &[ResourceInfo], group: &str, version: &str) -> Result<Value, ApiError> {
    let rs: Vec<ResourceInfo> = all
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .cloned()
        .collect();
    if rs.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(discovery::resource_list(&gv, &rs))
}

/// `/openapi/v2` as JSON or protobuf, as `Accept` asks.
fn openapi_v2(headers: &HeaderMap, doc: &Value) -> Result<Response, ApiError> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|header_value| header_value.to_str().ok());
    match openapi::negotiate(accept) {
        Some(openapi::Format::Json) => Ok(json_response(200, doc)),
        Some(openapi::Format::Protobuf) => Ok(Response::builder()
            .header(header::CONTENT_TYPE, openapi::PROTOBUF_CONTENT_TYPE)
            .body(Body::from(openapi::protobuf(doc)))
            .unwrap_or_default()),
        None => Err(ApiError::not_acceptable(&format!(
            "application/json, {}",
            openapi::PROTOBUF
        ))),
    }
}
