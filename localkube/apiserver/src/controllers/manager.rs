//! The controller loop: level-triggered; every controller reconciles everything after a
//! change (debounced) and on a periodic tick (for timers such as taint eviction).

use super::super::cluster::Cluster;
use super::controller::Controller;
use jiff::Timestamp;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Pause after a change before reconciling, to batch bursts.
const DEBOUNCE: Duration = Duration::from_millis(10);
/// Periodic reconcile interval.
const TICK: Duration = Duration::from_millis(500);

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
