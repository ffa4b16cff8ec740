//! The core scenario tests, one test binary (linking one per file cost time on 2 cores):
//! `decide` driven over many polls in a small deterministic world (`support`), one module per
//! part of the rules of docs/design/operator.md, and properties over random fault schedules.

mod support;

mod authority_evidence;
mod bootstrap_and_surfaces;
mod emergency;
mod failover_note;
mod invalid_spec;
mod operator_outage;
mod ordered_update;
mod planned;
mod properties;
mod rejoin;
mod replica_health;
mod restore;
