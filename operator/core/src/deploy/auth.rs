//! Who may coordinate a group (docs/design/requirements.md R003.5).
//!
//! Authentication (a projected ServiceAccount token with audience `bloodraven-deploy`, checked by
//! a TokenReview) is the shell's job; it hands core the authenticated [`Caller`]. Authorization
//! lives on `MysqlDatabase`: each database whose `spec.failoverGroupRef.name` is the group
//! contributes one [`AuthorizedClient`] per `spec.deploymentClients[]` entry, with `instance`
//! set to the `MysqlDatabase` resource name (not its SQL schema).

use bloodraven_api::MysqlDatabase;

/// The authenticated identity behind a request: a ServiceAccount.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Caller {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub service_account: String,
}

/// One `spec.deploymentClients[]` entry of a `MysqlDatabase` in the group, paired with that
/// database's resource name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuthorizedClient {
    /// The `MysqlDatabase` resource name: the only `instance` this client may take leases for.
    pub instance: String,
    /// The client ServiceAccount's namespace.
    pub namespace: String,
    /// The client ServiceAccount's name.
    pub service_account: String,
}

impl AuthorizedClient {
    /// Whether this entry is `caller`'s ServiceAccount.
    pub fn is(&self, caller: &Caller) -> bool {
        self.namespace == caller.namespace && self.service_account == caller.service_account
    }
}

/// The authorized clients of group `group` in namespace `namespace`: every
/// `spec.deploymentClients[]` entry of every `MysqlDatabase` in that namespace whose
/// `spec.failoverGroupRef.name` is `group`, paired with the database's resource name.
/// Databases of other groups or namespaces, and unnamed ones, contribute nothing.
pub fn authorized_clients(
    namespace: &str,
    group: &str,
    databases: &[MysqlDatabase],
) -> Vec<AuthorizedClient> {
    databases
        .iter()
        .filter(|database| {
            database.metadata.namespace.as_deref() == Some(namespace)
                && database.spec.failover_group_ref.name == group
        })
        .filter_map(|database| {
            let instance = database.metadata.name.as_deref()?;
            Some(
                database
                    .spec
                    .deployment_clients
                    .iter()
                    .map(move |client| AuthorizedClient {
                        instance: instance.to_string(),
                        namespace: client.namespace.clone(),
                        service_account: client.service_account.clone(),
                    }),
            )
        })
        .flatten()
        .collect()
}

/// Whether `caller` may take, renew or release leases for `instance` in the group whose
/// authorized clients are `clients`.
pub fn may_coordinate(clients: &[AuthorizedClient], caller: &Caller, instance: &str) -> bool {
    clients
        .iter()
        .any(|client| client.instance == instance && client.is(caller))
}

/// Whether `caller` is listed for any instance of the group: the precondition for learning
/// anything about the group's leases.
pub fn is_known_client(clients: &[AuthorizedClient], caller: &Caller) -> bool {
    clients.iter().any(|client| client.is(caller))
}

#[cfg(test)]
mod tests {
    use bloodraven_api::{DeploymentClient, FailoverGroupRef, MysqlDatabaseSpec};

    use super::*;

    fn caller(namespace: &str, service_account: &str) -> Caller {
        Caller {
            namespace: namespace.into(),
            service_account: service_account.into(),
        }
    }

    fn database(namespace: &str, name: &str, group: &str) -> MysqlDatabase {
        let mut database = MysqlDatabase::new(
            name,
            MysqlDatabaseSpec {
                failover_group_ref: FailoverGroupRef { name: group.into() },
                database: "counter".into(),
                deployment_clients: vec![DeploymentClient {
                    namespace: "ci".into(),
                    service_account: "deployer".into(),
                }],
            },
        );
        database.metadata.namespace = Some(namespace.into());
        database
    }

    #[test]
    fn seed_003_clients_come_from_databases_of_the_group_with_instance_the_resource_name() {
        let databases = [
            database("bloodraven-playground", "counter-app", "playground"),
            database("bloodraven-playground", "billing", "other-group"),
            database("elsewhere", "ledger", "playground"),
        ];
        assert_eq!(
            authorized_clients("bloodraven-playground", "playground", &databases),
            vec![AuthorizedClient {
                instance: "counter-app".into(),
                namespace: "ci".into(),
                service_account: "deployer".into(),
            }]
        );
    }

    #[test]
    fn seed_003_authorization_is_per_database_namespace_and_service_account() {
        let clients = [AuthorizedClient {
            instance: "counter-app".into(),
            namespace: "ci".into(),
            service_account: "deployer".into(),
        }];
        assert!(may_coordinate(
            &clients,
            &caller("ci", "deployer"),
            "counter-app"
        ));
        // Same ServiceAccount, another database: not authorized for that instance.
        assert!(!may_coordinate(
            &clients,
            &caller("ci", "deployer"),
            "billing"
        ));
        // Same name in another namespace is another identity.
        assert!(!may_coordinate(
            &clients,
            &caller("other", "deployer"),
            "counter-app"
        ));
        assert!(!may_coordinate(
            &clients,
            &caller("ci", "default"),
            "counter-app"
        ));
        assert!(is_known_client(&clients, &caller("ci", "deployer")));
        assert!(!is_known_client(&clients, &caller("ci", "default")));
        assert!(!is_known_client(&[], &caller("ci", "deployer")));
    }
}
