//! Who may coordinate a group (seed 003 "Who is allowed to ask").
//!
//! Authentication (a projected ServiceAccount token with audience `bloodraven-deploy`, checked by
//! a TokenReview) is the shell's job; it hands core the authenticated [`Caller`]. Authorization
//! lives on `MysqlDatabase`: each database whose `spec.failoverGroupRef.name` is the group
//! contributes one [`AuthorizedClient`] per `spec.deploymentClients[]` entry, with `instance`
//! set to the `MysqlDatabase` resource name (not its SQL schema).

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
    use super::*;

    fn caller(namespace: &str, service_account: &str) -> Caller {
        Caller {
            namespace: namespace.into(),
            service_account: service_account.into(),
        }
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
