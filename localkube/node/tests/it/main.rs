//! The node side's integration tests that need no pod processes, one test binary: cluster
//! DNS and the Service proxy on loopback addresses. Tests that run pods need the
//! `localkube-pod-exec` executable, which cargo builds only for the package under test, so
//! they live with the executables in `localkube` (`localkube/tests/it`).

mod dns;
mod proxy;
