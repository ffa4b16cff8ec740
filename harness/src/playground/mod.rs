//! The live playground of the requirements (docs/design/history.md#issue-8): a cluster
//! (localkube here), the install every backend shares, and `just up` / `just down`
//! (`bloodraven-playground`).

pub mod install;
pub mod kube;
pub mod localkube;
pub mod names;
pub mod portforward;
pub mod tls;
pub mod up;
