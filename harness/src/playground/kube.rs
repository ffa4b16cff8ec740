//! Thin kube-rs helpers the installer and the backends share: a client from a kubeconfig
//! file, server-side apply of untyped manifests, and multi-document YAML reading.

use std::path::Path;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::Value;

use crate::error::{Error, Result};

/// The field manager of everything the install applies. Not the scenarios' manager: a
/// scenario's partial `apply` of the group under the install's manager would own (and so
/// prune) every field the install set, and the API server would reject the group as
/// missing `spec.image` (scenario 015).
pub const FIELD_MANAGER: &str = "bloodraven-playground";
/// The default field manager of a scenario's `apply` step (scenario model).
pub const SCENARIO_FIELD_MANAGER: &str = "bloodraven-harness";

/// A client for the cluster of `kubeconfig`.
pub async fn client(kubeconfig: &Path) -> Result<Client> {
    let config = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Cluster {
        action: format!("read kubeconfig {}", kubeconfig.display()),
        reason: e.to_string(),
    })?;
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Cluster {
            action: format!("load kubeconfig {}", kubeconfig.display()),
            reason: e.to_string(),
        })?;
    Client::try_from(config).map_err(|e| Error::Cluster {
        action: "build a Kubernetes client".to_owned(),
        reason: e.to_string(),
    })
}

/// Every document of a multi-document YAML text (empty documents skipped). `origin` names the
/// text in errors (a file path).
pub fn documents(text: &str, origin: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value: Value =
            serde::Deserialize::deserialize(document).map_err(|e| Error::Cluster {
                action: format!("parse {origin}"),
                reason: e.to_string(),
            })?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// Reads a manifest file into its documents.
pub fn read_manifests(path: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Cluster {
        action: format!("read {}", path.display()),
        reason: e.to_string(),
    })?;
    documents(&text, &path.display().to_string())
}

/// The API of an untyped object (namespaced when it carries a namespace).
pub fn api_for(client: &Client, object: &Value) -> Result<(Api<DynamicObject>, String)> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if api_version.is_empty() || kind.is_empty() || name.is_empty() {
        return Err(Error::Cluster {
            action: "apply an object".to_owned(),
            reason: format!(
                "object needs apiVersion, kind and metadata.name (got {api_version:?}, {kind:?}, {name:?})"
            ),
        });
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api = match object["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    Ok((api, name))
}

/// Server-side applies `object` with [`FIELD_MANAGER`] and force.
pub async fn apply(client: &Client, object: &Value) -> Result<()> {
    apply_as(client, object, FIELD_MANAGER).await
}

/// Server-side applies `object` as `manager`, with force.
pub async fn apply_as(client: &Client, object: &Value, manager: &str) -> Result<()> {
    let (api, name) = api_for(client, object)?;
    let params = PatchParams::apply(manager).force();
    api.patch(&name, &params, &Patch::Apply(object))
        .await
        .map(|_| ())
        .map_err(|e| Error::Cluster {
            action: format!(
                "apply {} {}",
                object["kind"].as_str().unwrap_or_default(),
                name
            ),
            reason: e.to_string(),
        })
}

/// Deletes `object` if it exists (NotFound is fine).
pub async fn delete(client: &Client, object: &Value) -> Result<()> {
    let (api, name) = api_for(client, object)?;
    match api.delete(&name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(Error::Cluster {
            action: format!(
                "delete {} {}",
                object["kind"].as_str().unwrap_or_default(),
                name
            ),
            reason: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_and_the_scenarios_apply_as_different_managers() {
        assert_ne!(FIELD_MANAGER, SCENARIO_FIELD_MANAGER);
    }

    #[test]
    fn documents_skip_empty_and_name_the_origin_on_error() {
        let docs = documents("---\na: 1\n---\n---\nb: 2\n", "x.yaml").expect("parse");
        assert_eq!(docs.len(), 2);
        let error = documents("a: [1\n", "broken.yaml")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("broken.yaml"), "{error}");
        assert!(error.contains("line"), "{error}");
    }
}
