//! The playground's names and its group's typed API: what the live layers (faults, actions,
//! observation, the workload) need of the playground without depending on its installer.

use kube::api::Api;
use kube::Client;

pub use bloodraven_api::names::OPERATOR_NAMESPACE;
/// The playground's group.
pub use bloodraven_api::names::PLAYGROUND_GROUP as GROUP;
/// The playground's namespace.
pub use bloodraven_api::names::PLAYGROUND_NAMESPACE as NAMESPACE;

/// The typed API of failover groups in the playground namespace.
pub fn group_api(client: &Client) -> Api<bloodraven_api::MysqlFailoverGroup> {
    Api::namespaced(client.clone(), NAMESPACE)
}
