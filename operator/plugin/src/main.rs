//! `kubectl-bloodraven` binary.
fn main() {}
