//! Checkers over a history: no split brain, RPO, failover timings, expectations, the archives of
//! rejoined sites. [`run`] runs them all over one scenario's history; [`observed`] holds what
//! they share, so checkers do not import each other for helpers.

pub mod archive;
pub mod converged;
pub mod endpoint_history;
pub mod expectations;
pub mod fleet;
pub mod gtid;
pub mod liveness;
pub mod lost_set;
pub mod observed;
pub mod rpo;
pub mod run;
pub mod split_brain;
pub mod survivors;
pub mod timings;
pub mod verdict;
