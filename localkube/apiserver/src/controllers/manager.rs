//! The controller loop: level-triggered; every controller reconciles everything after a
//! change (debounced) and on a periodic tick (for timers such as taint eviction).

use super::super::error::{ApiError, Reason};
use super::super::ops::Cluster;
use jiff::Timestamp;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Pause after a change before reconciling, to batch bursts.
const DEBOUNCE: Duration = Duration::from_millis(10);
/// Periodic reconcile interval.
const TICK: Duration = Duration::from_millis(500);

/// A controller: converges the store towards what its objects ask for.
pub trait Controller: Send {
    /// Name for logs.
    fn name(&self) -> &'static str;
    /// One pass over every object it manages.
    fn reconcile(&mut self, c: &Cluster, now: Timestamp);
}

fn all() -> Vec<Box<dyn Controller>> {
    vec![
        Box::new(super::namespace::NamespaceController),
        Box::new(super::serviceaccount::ServiceAccountController),
        Box::new(super::workloads::DeploymentController),
        Box::new(super::workloads::ReplicaSetController),
        Box::new(super::statefulset::StatefulSetController),
        Box::new(super::daemonset::DaemonSetController),
        Box::new(super::job::JobController),
        Box::new(super::nodes::Scheduler),
        Box::new(super::endpoints::EndpointsController),
        Box::new(super::gc::GarbageCollector),
        Box::new(super::taints::TaintEviction::default()),
        Box::new(super::events::EventMirror::default()),
        Box::new(super::apiservices::ApiServiceController),
    ]
}

/// Runs every controller until shutdown.
pub async fn run(cluster: Arc<Cluster>, mut shutdown: watch::Receiver<bool>) {
    let mut rx = cluster.store.subscribe();
    let mut controllers = all();
    let mut ticker = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            ev = rx.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = ev {
                    return;
                }
                tokio::time::sleep(DEBOUNCE).await;
                while rx.try_recv().is_ok() {}
            }
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        let now = Timestamp::now();
        for c in controllers.iter_mut() {
            // A bug in one controller must not stop the others: log and go on.
            let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                c.reconcile(&cluster, now)
            }));
            if pass.is_err() {
                tracing::error!(controller = c.name(), "controller pass panicked");
            }
        }
        // Yield so request handling is never starved by a long pass.
        tokio::task::yield_now().await;
    }
}

/// Logs a failed controller write.
pub fn log_err<T>(controller: &str, what: &str, r: Result<T, ApiError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
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
    c: &Cluster,
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
        c.create_internal("", "events", ns, ev, component),
    );
}
