//! The in-cluster workload, `bloodraven-workload` (docs/design/harness.md#one-run, step 3):
//! the writers, readers and DNS probe of [`crate::live::workload`] run in a pod of the
//! cluster, so the harness reaches the cluster only through the Kubernetes API. The pod's
//! process ([`daemon`]) opens no TCP port: it is driven through a unix socket by
//! `bloodraven-workload ctl` ([`control`]), run through the API's exec, and writes each run's
//! events to a log ([`runlog`], lines in [`lines`]) that `bloodraven-workload follow`
//! ([`follow`]) streams back. One-shot helpers ([`oneshot`]) ask the cluster's DNS and send
//! HTTP requests from inside the cluster. The site probes
//! ([`crate::live::site_probes`]) dial each site's mysqld by pod IP, which the pod learns from
//! the API itself ([`site_pods`], `get`/`list`/`watch` of pods in its namespace, nothing
//! else). The harness's side is [`crate::live::incluster`].

pub mod cli;
pub mod control;
pub mod daemon;
pub mod follow;
pub mod lines;
pub mod oneshot;
pub mod resolv;
pub mod runlog;
pub mod site_pods;
