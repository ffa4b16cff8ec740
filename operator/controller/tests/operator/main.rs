//! The operator end to end, one test binary (linking one per file cost time on 2 cores): the
//! operator shell against localkube's embedded API server (`localkube`) and the `bloodraven`
//! binary on it (`binary`), both on `support`'s cluster.

mod support;

mod binary;
mod localkube;
