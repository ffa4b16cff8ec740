//! Emergency failover, the promotion step shared with planned failover, completion,
//! returning-primary fencing, and the every-poll convergence (authority push or move notice,
//! repointing, errant bookkeeping).
//!
//! Wiring only; one module per step of a failover:
//!
//! - [`authority`]: whether a move is in flight, the authority and the move notice, and the
//!   cooldown's two persisted copies.
//! - [`emergency`]: starting an emergency failover and advancing it through the lease wait,
//!   the catch-up and the drain; the candidate it promotes.
//! - [`promotion`]: issuing the new authority (shared with planned failover) and completing
//!   the promotion once the new active site is writable.
//! - [`convergence`]: every poll's authority push and repointing, and returning primaries
//!   rejoining as replicas.

mod authority;
mod convergence;
mod emergency;
mod promotion;

pub(super) use authority::{
    announce_move, cooldown_until, keep_cooldown_copies, moving, notice_generation, source_host_of,
};
pub(super) use convergence::{
    converge, errant_of, replicates_from, repoint_action, returning_primaries,
};
pub(super) use emergency::{emergency_step, old_site_confirmed_unwritable};
pub(super) use promotion::{complete_promotion, issue_promotion, promote_action};
