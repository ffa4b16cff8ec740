//! The Kubernetes side: a client from the usual places, and the two calls every subcommand
//! makes on its group (get it, annotate it).

use bloodraven_api::MysqlFailoverGroup;
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::Value;

use crate::{Error, Result};

/// A client from the usual places (KUBECONFIG, ~/.kube/config, in-cluster), for `context`.
pub async fn client(context: Option<&str>) -> Result<Client> {
    let config = match context {
        None => Config::infer()
            .await
            .map_err(|error| Error::Config(error.to_string()))?,
        Some(context) => {
            let kubeconfig =
                Kubeconfig::read().map_err(|error| Error::Config(error.to_string()))?;
            let options = KubeConfigOptions {
                context: Some(context.to_string()),
                ..KubeConfigOptions::default()
            };
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|error| Error::Config(error.to_string()))?
        }
    };
    Client::try_from(config).map_err(|error| Error::Config(error.to_string()))
}

/// The MysqlFailoverGroups of one namespace.
pub(crate) struct Groups {
    api: Api<MysqlFailoverGroup>,
    namespace: String,
}

impl Groups {
    /// The groups of `namespace`.
    pub(crate) fn new(client: Client, namespace: String) -> Self {
        Self {
            api: Api::namespaced(client, &namespace),
            namespace,
        }
    }

    /// The namespace, for what the subcommands print.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Reads `group`.
    pub(crate) async fn get(&self, group: &str) -> Result<MysqlFailoverGroup> {
        self.api.get(group).await.map_err(|source| Error::Kube {
            action: format!("get mysqlfailovergroup {}/{group}", self.namespace),
            source,
        })
    }

    /// Applies the merge `patch` (the subcommands' annotations) to `group`.
    pub(crate) async fn annotate(&self, group: &str, patch: Value) -> Result<()> {
        self.api
            .patch(group, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|source| Error::Kube {
                action: format!("annotate mysqlfailovergroup {}/{group}", self.namespace),
                source,
            })
    }
}
