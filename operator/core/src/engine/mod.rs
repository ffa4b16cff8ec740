//! The decision engine: `decide(spec, memory, observation, now) -> Decision`.
//!
//! Gather -> decide -> act (STYLE.md 1): the shell gathers an [`Observation`], [`decide`] is
//! pure and deterministic over it and the persisted [`GroupMemory`], and the shell executes
//! the [`Decision`]'s [`Action`]s in order and persists its memory.

mod action;
mod decide;
mod detection;
mod failover;
mod memory;
mod observation;
mod options;
mod persist;
mod plan;
mod planned;
mod reading;
mod surfaces;

pub use action::{
    Action, AnnotationChange, Decision, DesiredService, Event, EventReason, EventType,
    MetricObservation, ServiceKind, SiteTransition,
};
pub use decide::{decide, decide_with_options};
pub use memory::{
    AuthorityValidity, Detection, EmergencyFailover, EmergencyPhase, GroupMemory, InvalidReason,
    PlannedFailover, PodRole, SiteMemory, SiteState,
};
pub use observation::{DnsReading, GroupAnnotations, Observation, SidecarReading, SiteObservation};
pub use options::{
    DecideOptions, CLOCK_DRIFT_MARGIN, DRAIN_POLLS_MAX, DRAIN_TIMEOUT, MYSQLD_START_JITTER,
    PLANNED_ADMISSION_TIMEOUT, PLANNED_DRAIN_TIMEOUT,
};
