//! localkube-runtime's integration tests, one test binary: the cluster DNS queried by a real
//! resolver, and the userspace Service proxy, both on loopback addresses (no root needed).

mod dns;
mod proxy;
