//! The simulator's tests, one test binary (linking one per file cost time on 2 cores): the
//! fencing mechanisms with one fault injected by hand (`fencing`), and seed runs: determinism,
//! clean ranges, the fault modes and the broken promotion rule caught (`seeds`).

mod fencing;
mod seeds;
