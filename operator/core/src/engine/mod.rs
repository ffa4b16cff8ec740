//! The decision engine: `decide(spec, memory, observation, now) -> Decision`.
//!
//! Gather -> decide -> act (docs/design/style.md#1-gather-decide-act): the shell gathers an
//! [`Observation`], [`decide`] is pure and deterministic over it and the persisted
//! [`GroupMemory`], and the shell executes the [`Decision`]'s [`Action`]s in order and persists
//! its memory ([`GroupMemory::to_status`], plus the annotation changes among the actions).
//!
//! # One poll (docs/design/architecture.md#one-poll order)
//!
//! 1. Per-site state: failure detection (`failureThreshold` consecutive failed polls spanning
//!    the detection floor `pollInterval × failureThreshold`), the status mirror, mysqld
//!    restarts, and adoption of a newer authority the sidecars cache than memory knows.
//!    Transitions of [`SiteState`] imply the node taint, which leads the action list.
//! 2. Cross-site: bootstrap authority, the revoke annotation, emergency failover (move
//!    notice, lease wait, drain, promote), planned failover phases, completion, returning
//!    primaries and their rejoin, primary reassertion, the authority push and repointing.
//! 3. Surfaces: pod labels, the `2 × sites + 2` Services, the DNSEndpoint (only on
//!    divergence), events and metrics; then the status conditions ([`conditions`]).
//!
//! The deploy API's `stable`/`unstableReason` is [`unstable_reason`] over the memory a
//! decision returned, and whether leases may be granted now is [`lease_stability`]. A
//! decision that starts a planned disruption ([`gated_start`]) must not be executed until
//! the shell has re-checked, atomically with the API's grants, that no failover-hold was
//! granted after its observation was read (see the `gate` module).
//!
//! # Authority moves
//!
//! Every move (emergency or planned) first pushes the "authority is moving" notice
//! (`active_site: None`) at the generation the move will end in (current + 1), so every
//! sidecar that caches it stops granting write leases; the new authority is then issued at
//! that generation, which sidecars accept exactly once (`Authority::supersedes`). An emergency
//! promotion waits until a majority of sidecars report their last grant older than the lease
//! duration plus [`CLOCK_DRIFT_MARGIN`], unless the old site's own sidecar confirms MySQL
//! read-only or down. The candidate drains and detaches (`Promote`) in one poll; the new
//! authority is pushed only after the detachment was observed, in a later poll, so no
//! action's safety ever depends on an earlier action of the same poll having succeeded.
//!
//! # Errors are unknowns
//!
//! `decide` never sees an action's result. After a mutation that errored or timed out the
//! shell does nothing special: the next [`Observation`] re-reads the state, and `decide`
//! acts on what was read (docs/design/requirements.md R001.15).

mod action;
mod agentless;
mod cadence;
mod conditions;
mod decide;
mod detection;
mod failover;
mod gate;
mod lease_wait;
mod memory;
mod note;
mod observation;
mod options;
mod persist;
mod plan;
mod planned;
mod reading;
mod rejoin;
mod restore;
mod stability;
mod surfaces;
mod unvouched;
mod update;

pub use action::{
    Action, AnnotationChange, Decision, DesiredService, Event, EventReason, EventType,
    MetricObservation, ServiceKind, SiteTransition,
};
pub use cadence::{next_poll_in, FOLLOW_UP_DIVISOR, FOLLOW_UP_MIN, FOLLOW_UP_WINDOW};
pub use conditions::{
    conditions, set_condition, spec_valid, CONDITION_DEGRADED, CONDITION_FAILOVER_IN_PROGRESS,
    CONDITION_READY, CONDITION_SPEC_VALID, CONDITION_STABLE, REASON_SPEC_INVALID,
};
pub use decide::{decide, decide_with_options};
pub use gate::{deferrable_disruption_in_flight, gated_start, GatedStart};
pub use memory::{
    AuthorityValidity, Detection, EmergencyFailover, EmergencyPhase, GroupMemory, InvalidReason,
    PlannedFailover, PodRole, SiteMemory, SiteState,
};
pub use note::{
    signed_value, split_signature, FailoverNote, FailoverNoteError, NoteReading, NoteSignature,
    PromotionKind, RestoreNote, FAILOVER_NOTE_FORMAT, SIGNATURE_WORD,
};
pub use observation::{
    DnsReading, GroupAnnotations, Observation, PodFacts, PodReading, SidecarReading,
    SiteObservation,
};
pub use options::{
    DecideOptions, AGENTLESS_KILL_GRACE, AGENTLESS_KILL_PATIENCE, CLOCK_DRIFT_MARGIN,
    DRAIN_POLLS_MAX, DRAIN_TIMEOUT, MYSQLD_START_JITTER, PLANNED_ADMISSION_TIMEOUT,
    PLANNED_DRAIN_TIMEOUT, SIDECAR_NOT_READY_WITHIN, SIDECAR_READINESS_FAILURES,
    SIDECAR_READINESS_PERIOD, SIDECAR_READINESS_TIMEOUT,
};
pub use rejoin::{RejoinMemory, REJOIN_ARCHIVE_TIMEOUT, REJOIN_RESEED_TIMEOUT};
pub use restore::{
    RestoreMemory, BACKUP_TIMEOUT, RESTORE_ADMISSION_TIMEOUT, RESTORE_FENCE_TIMEOUT,
    RESTORE_LOAD_TIMEOUT, RESTORE_RETRY_TIMEOUT, RESTORE_SETTLE_TIMEOUT,
};
pub use stability::{lease_stability, unstable_reason, UnstableReason};
pub use update::{OrderedUpdate, UPDATE_POD_GRACE, UPDATE_STEP_TIMEOUT};
