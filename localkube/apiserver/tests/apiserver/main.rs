//! localkube-apiserver's integration tests, one test binary (linking one per file cost
//! minutes on 2 cores): kube-rs (`kube_rs`, the traps it relies on) and the real `kubectl`
//! against the API server, verbs, bad input, custom resource validation (`crd_validation`), Jobs, x509 client certificates, and the
//! performance figures (`bench`, printed). No node agent, no root.

mod support;

mod bad_input;
mod bench;
mod crd_validation;
mod jobs;
mod kube_rs;
mod kubectl;
mod verbs;
mod x509;
