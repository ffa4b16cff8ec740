//! What every controller is and shares: the [`Controller`] trait the manager
//! ([`super::manager`]) runs, [`log_err`] for its writes and [`record_event`] for the Events
//! `kubectl describe` shows. The controllers depend on this module, the manager on them.

use super::super::cluster::Cluster;
use super::super::error::{ApiError, Reason};
use jiff::Timestamp;

/// A controller: converges the store towards what its objects ask for.
pub trait Controller: Send {
    /// Name for logs.
    fn name(&self) -> &'static str;
    /// One pass over every object it manages.
    fn reconcile(&mut self, cluster: &Cluster, now: Timestamp);
}

/// Logs a failed controller write.
pub fn log_err<T>(controller: &str, what: &str, result: Result<T, ApiError>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => match e.reason {
            // Another writer got there first, or the object went: the next pass sees it.
            Reason::NotFound | Reason::AlreadyExists | Reason::Conflict => None,
            Reason::Forbidden
            | Reason::Unauthorized
            | Reason::Invalid
            | Reason::BadRequest
            | Reason::MethodNotAllowed
            | Reason::UnsupportedMediaType
            | Reason::NotAcceptable
            | Reason::RequestEntityTooLarge
            | Reason::Expired
            | Reason::InternalError
            | Reason::Timeout => {
                tracing::warn!(controller, what, error = %e, "controller write failed");
                None
            }
        },
    }
}

/// Records a core/v1 Event about `obj` (as `kubectl describe` shows them).
pub fn record_event(
    cluster: &Cluster,
    obj: &serde_json::Value,
    type_: &str,
    reason: &str,
    message: &str,
    component: &str,
) {
    use super::super::meta;
    let now = Timestamp::now();
    let ns = match meta::namespace(obj) {
        "" => "default",
        ns => ns,
    };
    let name = format!(
        "{}.{:x}",
        meta::name(obj),
        i64::try_from(now.as_nanosecond()).unwrap_or(0)
    );
    let ev = serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": meta::str_at(obj, "/kind"), "apiVersion": meta::str_at(obj, "/apiVersion"), "namespace": meta::namespace(obj),
            "name": meta::name(obj), "uid": meta::uid_of(obj), "resourceVersion": meta::str_at(obj, "/metadata/resourceVersion")},
        "reason": reason, "message": message, "type": type_, "source": {"component": component},
        "firstTimestamp": meta::time(now), "lastTimestamp": meta::time(now), "count": 1,
        "reportingComponent": component, "reportingInstance": "localkube"});
    log_err(
        "events",
        "record event",
        cluster.create_internal("", "events", ns, ev, component),
    );
}
