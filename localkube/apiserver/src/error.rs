//! Errors of the API server: [`Error`] for operating failures and [`ApiError`], a Kubernetes
//! `Status` failure with the exact `reason` clients match on (trap 4).

use serde_json::{json, Value};

/// Result of API server operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Failures of the API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request failed with a Kubernetes `Status`.
    #[error("{0}")]
    Api(Box<ApiError>),
    /// A file of the state dir could not be read or written.
    #[error("access {path}: {source}")]
    Io {
        /// The path that failed.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// JSON could not be encoded or decoded.
    #[error("encode or decode json: {0}")]
    Json(#[from] serde_json::Error),
    /// Certificates could not be generated.
    #[error("generate certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// TLS could not be configured.
    #[error("configure tls: {0}")]
    Tls(#[from] rustls::Error),
    /// A token could not be signed.
    #[error("sign token: {0}")]
    Token(#[from] jsonwebtoken::errors::Error),
    /// The configuration or the state dir is unusable.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// Wraps an I/O error with the path it concerned.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

impl From<ApiError> for Error {
    fn from(error: ApiError) -> Self {
        Error::Api(Box::new(error))
    }
}

/// The machine-readable `reason` of a failure `Status` (`metav1.StatusReason`), as clients
/// match on it: each variant is sent as its own name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// 404: the object or path does not exist.
    NotFound,
    /// 409: the object to create exists.
    AlreadyExists,
    /// 409: a stale resourceVersion, or a server-side apply conflict.
    Conflict,
    /// 403: RBAC denies the request.
    Forbidden,
    /// 401: no valid credentials.
    Unauthorized,
    /// 422: the object fails validation.
    Invalid,
    /// 400: the request is malformed.
    BadRequest,
    /// 405: the verb is not served for the resource.
    MethodNotAllowed,
    /// 415: the body's content type is not understood.
    UnsupportedMediaType,
    /// 406: no acceptable response form.
    NotAcceptable,
    /// 413: the body is too large.
    RequestEntityTooLarge,
    /// 410: a watch's resourceVersion is older than the history kept.
    Expired,
    /// 500: a server failure.
    InternalError,
    /// 504: the request did not finish in time.
    Timeout,
}

impl Reason {
    /// The reason as sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotFound => "NotFound",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Forbidden => "Forbidden",
            Reason::Unauthorized => "Unauthorized",
            Reason::Invalid => "Invalid",
            Reason::BadRequest => "BadRequest",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
            Reason::Expired => "Expired",
            Reason::InternalError => "InternalError",
            Reason::Timeout => "Timeout",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A Kubernetes `Status` failure.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The machine-readable reason.
    pub reason: Reason,
    /// Human-readable message.
    pub message: String,
    /// Optional `details` (name, group, kind, causes).
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "{} ({}): {}",
            self.reason, self.code, self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    fn new(code: u16, reason: Reason, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }
    /// Adds `details` naming the object.
    pub fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": group, "kind": kind}));
        self
    }
    /// 404 NotFound for `resource.group "name"`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self::new(404, Reason::NotFound, format!("{gr} \"{name}\" not found"))
            .with_details(group, plural, name)
    }
    /// 404 NotFound for a path that names nothing.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            Reason::NotFound,
            "the server could not find the requested resource",
        )
    }
    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self::new(
            409,
            Reason::AlreadyExists,
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }
    /// 409 Conflict because the resourceVersion is stale.
    pub fn conflict(group: &str, plural: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self::new(
            409,
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {gr} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(group, plural, name)
    }
    /// 409 Conflict with a free message (server-side apply).
    pub fn conflict_message(message: impl Into<String>) -> Self {
        Self::new(409, Reason::Conflict, message)
    }
    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, Reason::Forbidden, message)
    }
    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, Reason::Unauthorized, "Unauthorized")
    }
    /// 422 Invalid.
    pub fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        field: &str,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut error = Self::new(
            422,
            Reason::Invalid,
            format!("{gk} \"{name}\" is invalid: {field}: {message}"),
        );
        error.details = Some(json!({"name": name, "group": group, "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]}));
        error
    }
    /// 422 Invalid listing every field error, as the real server aggregates them
    /// (`Kind.group "name" is invalid: [a: ..., b: ...]`).
    pub fn invalid_fields(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        // The aggregate prints each distinct message once, as apimachinery's does.
        let mut lines: Vec<String> = Vec::with_capacity(errors.len());
        for e in errors {
            let line = format!("{}: {}", e.field, e.message);
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
        let list = match lines.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut error = Self::new(
            422,
            Reason::Invalid,
            format!("{gk} \"{name}\" is invalid: {list}"),
        );
        error.details = Some(json!({"name": name, "group": group, "kind": kind,
            "causes": errors.iter().map(|field_error| json!({"reason": field_error.reason, "message": field_error.message, "field": field_error.field})).collect::<Vec<_>>()}));
        error
    }
    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, Reason::BadRequest, message)
    }
    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, Reason::MethodNotAllowed, message)
    }
    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(415, Reason::UnsupportedMediaType, format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml; got {content_type:?}"))
    }
    /// 406 NotAcceptable: no `Accept` clause names something this server produces.
    pub fn not_acceptable(accepted: &str) -> Self {
        Self::new(
            406,
            Reason::NotAcceptable,
            format!("only the following media types are accepted: {accepted}"),
        )
    }
    /// 406 NotAcceptable with the real server's own message (a conversion that does not
    /// fit the object, such as a list asked for as `PartialObjectMetadata`).
    pub fn not_acceptable_message(message: impl Into<String>) -> Self {
        Self::new(406, Reason::NotAcceptable, message)
    }
    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            Reason::RequestEntityTooLarge,
            format!("Request entity too large: limit is {limit}"),
        )
    }
    /// 410 Expired (sent inside a watch ERROR event, never as the HTTP status).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, Reason::Expired, message)
    }
    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, Reason::InternalError, message)
    }
    /// 504 Timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, Reason::Timeout, message)
    }
    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// One field error of a 422 Invalid (`field.Error` of apimachinery).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path (`spec.template.spec.restartPolicy`).
    pub field: String,
    /// The cause reason (`FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`).
    pub reason: &'static str,
    /// The message (`Required value: ...`, `Invalid value: 1: ...`).
    pub message: String,
}

impl FieldError {
    /// `Required value: <detail>`.
    pub fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        FieldError {
            field: field.into(),
            reason: "FieldValueRequired",
            message,
        }
    }
    /// `Invalid value: <value>: <detail>` (the value as the real server prints it: JSON).
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {value}: {detail}"),
        }
    }
    /// `Unsupported value: "<value>": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            field: field.into(),
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }
}

/// The `Status` success object returned by deletes.
pub fn status_success(group: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "group": group, "kind": kind, "uid": uid}})
}
