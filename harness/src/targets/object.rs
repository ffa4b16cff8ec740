//! `object`: any Kubernetes object by partial match, or its absence.

use kube::api::DynamicObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::cluster_error;
use crate::live::LiveCluster;
use crate::playground::kube::api_for;
use crate::playground::names::NAMESPACE;
use crate::scenario::matcher::{check_operators, matches};

/// The kinds without a namespace an `object` may name.
const CLUSTER_SCOPED: [&str; 5] = [
    "Node",
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
];

/// Any object by partial match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectExpect {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// Namespace (default `bloodraven-playground` for namespaced kinds).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Partial match against the whole object; `{$exists: false}` for an absent one.
    #[serde(rename = "match")]
    pub match_: Value,
}

/// The object as the API server returned it, or `null` when absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ObjectSeen(pub Option<Value>);

impl ExpectTarget for ObjectExpect {
    const NAME: &'static str = "object";
    type Observation = ObjectSeen;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        check_operators(&self.match_, "object.match")
    }

    async fn observe(&self, live: &LiveCluster) -> Result<ObjectSeen> {
        let mut probe = json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": {"name": self.name}});
        if !CLUSTER_SCOPED.contains(&self.kind.as_str()) {
            probe["metadata"]["namespace"] = json!(self.namespace.as_deref().unwrap_or(NAMESPACE));
        }
        let (api, name) = api_for(live.client(), &probe)?;
        let found: Option<DynamicObject> = api
            .get_opt(&name)
            .await
            .map_err(|e| cluster_error(format!("read {} {name}", self.kind), e))?;
        Ok(ObjectSeen(found.map(|object| {
            serde_json::to_value(object).unwrap_or_default()
        })))
    }

    fn evaluate(
        &self,
        observed: &ObjectSeen,
        judging: &Judging<'_, ObjectSeen>,
    ) -> Result<(), String> {
        let present = observed.0.as_ref().filter(|object| !object.is_null());
        let baseline = judging.baseline.0.clone().unwrap_or(Value::Null);
        matches(&self.match_, present, Some(&baseline))
            .map_err(|why| format!("{} {}: {why}", self.kind, self.name))
    }

    fn describe(&self) -> Option<String> {
        Some(format!("{} {}", self.kind, self.name))
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.text(&mut self.api_version);
        substitution.text(&mut self.kind);
        substitution.text(&mut self.name);
        substitution.texts(self.namespace.as_mut());
        substitution.json(&mut self.match_);
    }

    fn patterns(&self) -> Vec<&Value> {
        vec![&self.match_]
    }
}
