//! The harness's tests that need no cluster, one test binary (linking one per file cost
//! minutes on 2 cores): the scenario catalogue and its validation, expectation evaluation, the
//! checkers and the liveness condition over hand-built histories, reports, the runner against
//! a scripted fake cluster, the nightly workflow's structure, the in-cluster workload's binary
//! as real processes (and against a real mariadbd), the external-dns stand-in's binary against
//! localkube's embedded API server, and the scenario language's
//! reference (docs/scenarios.md) and JSON Schema (scenarios/schema.json) against the model.
//! The catalogue's trials are the separate `scenarios` target (`harness = false`).

mod support;

mod archive;
mod catalogue;
mod checkers;
mod converged;
mod dns_standin;
mod evaluate;
mod incluster_workload;
mod nightly_workflow;
mod readme_commands;
mod reference;
mod report;
mod runner;
mod schema;
mod survivors;
mod validation;
