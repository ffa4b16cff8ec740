//! The `MysqlDatabase` custom resource (short name `mdb`): a SQL schema on a group, and who
//! may use the deployment lease API for it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What `spec.database` must match: no NUL, which no MySQL server accepts in an identifier.
pub const DATABASE_NAME_PATTERN: &str = r"^[^\x00]*$";

/// A database (SQL schema) created on a group's primary.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "bloodraven.shipstream.io",
    version = "v1",
    kind = "MysqlDatabase",
    namespaced,
    shortname = "mdb",
    printcolumn = r#"{"name":"Group","type":"string","jsonPath":".spec.failoverGroupRef.name"}"#,
    printcolumn = r#"{"name":"Database","type":"string","jsonPath":".spec.database"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MysqlDatabaseSpec {
    /// The group this database lives on (and that its deployment clients may coordinate).
    pub failover_group_ref: FailoverGroupRef,
    /// SQL schema name: 1 to 64 characters, no NUL.
    #[schemars(length(min = 1, max = crate::sidecar::DATABASE_NAME_CHARS_MAX))]
    #[schemars(pattern(DATABASE_NAME_PATTERN))]
    pub database: String,
    /// ServiceAccounts allowed to use /deploy/v1 for this group; one pair per namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["namespace"]))]
    pub deployment_clients: Vec<DeploymentClient>,
}

/// Reference to a `MysqlFailoverGroup` in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct FailoverGroupRef {
    /// Group name.
    pub name: String,
}

/// A ServiceAccount allowed to take deployment leases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentClient {
    /// Namespace of the ServiceAccount.
    pub namespace: String,
    /// Name of the ServiceAccount.
    pub service_account: String,
}
