//! The API server's integration tests, one test binary (one link on 2 cores): a
//! localkube API server without a node agent, driven by kube-rs and the real `kubectl`.

mod bad_input;
mod bench;
mod jobs;
mod kube_rs;
mod kubectl;
mod support;
mod verbs;
mod x509;
