//! Responses: JSON bodies, Status errors, and objects in the output a client negotiated (the
//! object, its PartialObjectMetadata, or a list of those).

use crate::accept::Output;
use crate::error::ApiError;
use crate::registry::ResourceInfo;
use crate::wire::{self, Form};
use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

/// The encoding of `r`'s objects (custom resources are unstructured maps on a real server).
pub(super) fn form_of(resource: &ResourceInfo) -> Form {
    if resource.crd.is_some() {
        Form::Unstructured
    } else {
        Form::Typed
    }
}

pub(super) fn json_response(code: u16, value: &Value) -> Response {
    object_response(code, value, Form::Typed)
}

fn object_response(code: u16, value: &Value, form: Form) -> Response {
    let body = wire::to_vec(value, form);
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap_or_default()
}

/// `resp` with its `Content-Type` replaced.
pub(super) fn with_content_type(mut resp: Response, content_type: &str) -> Response {
    if let Ok(header_value) = header::HeaderValue::from_str(content_type) {
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, header_value);
    }
    resp
}

pub(super) fn error_response(error: &ApiError) -> Response {
    json_response(error.code, &error.to_status())
}

/// `PartialObjectMetadata` of `obj` (kube-runtime's metadata watcher and `get_metadata`).
pub(super) fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

fn is_list(obj: &Value) -> bool {
    obj.get("items").map(Value::is_array).unwrap_or(false)
}

/// `obj` (an object of `r`, or a list of them) in the negotiated `output`; `Status`
/// objects pass unchanged, as on the real server.
fn present(
    obj: &Value,
    resource: &ResourceInfo,
    output: Output,
) -> Result<(Value, Form), ApiError> {
    if obj.get("kind").and_then(Value::as_str) == Some("Status") {
        return Ok((obj.clone(), Form::Typed));
    }
    let go_type = |list: &str| {
        if resource.crd.is_some() {
            format!("*unstructured.Unstructured{list}")
        } else {
            format!("*{}.{}{list}", resource.version, resource.kind)
        }
    };
    match output {
        Output::Metadata if is_list(obj) => Err(ApiError::not_acceptable_message(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type("List")
        ))),
        Output::Metadata => Ok((partial_metadata(obj), Form::Typed)),
        Output::MetadataList if !is_list(obj) => Err(ApiError::not_acceptable_message(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type("")
        ))),
        Output::MetadataList => {
            let items: Vec<Value> = obj["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(partial_metadata)
                .collect();
            let list = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})), "items": items});
            Ok((list, Form::Typed))
        }
        Output::Object | Output::Table | Output::Aggregated(_) => {
            Ok((obj.clone(), form_of(resource)))
        }
    }
}

/// The response for `obj` of `r` in the negotiated `output`.
pub(super) fn respond(
    code: u16,
    obj: &Value,
    resource: &ResourceInfo,
    output: Output,
) -> Result<Response, ApiError> {
    let (value, form) = present(obj, resource, output)?;
    Ok(object_response(code, &value, form))
}
