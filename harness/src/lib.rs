//! `bloodraven-harness`: the chaos and conformance harness for Bloodraven.
//!
//! Scenario files (`scenarios/NNN-slug.yaml`) are parsed into [`scenario::model`] and
//! validated by [`scenario::validate`]; the runner ([`runner`]) turns each into a
//! libtest-mimic trial `sNNN_slug` that drives a live cluster through the
//! [`backend::Cluster`] boundary, recording a Jepsen-style [`history`]; the [`check`]ers
//! judge it and [`report`] writes HTML, JSON and JUnit.

pub mod backend;
pub mod backends;
pub mod check;
pub mod dns_standin;
pub mod error;
pub mod history;
pub mod incluster;
pub mod live;
pub mod playground;
pub mod progress;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod targets;
pub mod upgrade;

pub use error::{Error, Result, ScenarioError};
