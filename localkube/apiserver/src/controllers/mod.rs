//! Controllers running inside the server process on the store: namespaces, service
//! accounts and tokens, scheduling, Deployments/ReplicaSets, StatefulSets, DaemonSets, Jobs, Endpoints and
//! EndpointSlices, garbage collection, NoExecute taint eviction, the `core/v1` mirror of
//! `events.k8s.io/v1` Events and the APIServices of served group versions.
//!
//! The node agent plugs in as a [`super::plugin::Plugin`]: it watches pods bound to its
//! nodes with `cluster.store.subscribe()` (or lists `spec.nodeName=<node>`), and writes pod
//! status through `cluster.modify(.., "status", ..)`.

mod apiservices;
mod controller;
mod daemonset;
mod endpoints;
mod events;
mod gc;
mod job;
mod manager;
mod namespace;
mod nodes;
mod serviceaccount;
mod statefulset;
mod taints;
mod workloads;

pub use controller::{record_event, Controller};
pub use manager::run;
pub use taints::tolerates;
