//! `node`: a site's node, and whether it carries the demoted taint.

use bloodraven_api::names;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::cluster_error;
use crate::live::LiveCluster;
use crate::scenario::matcher::matches;
use crate::scenario::model::Site;

/// A site's node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeExpect {
    /// The site whose node.
    pub site: Site,
    /// Whether the node carries `bloodraven.shipstream.io/demoted=playground:NoExecute`.
    pub demoted_taint: bool,
}

/// The node as read: `{"demotedTaint": true}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSeen {
    /// It carries the demoted taint (absent: not known).
    #[serde(default)]
    pub demoted_taint: Option<bool>,
}

impl ExpectTarget for NodeExpect {
    const NAME: &'static str = "node";
    type Observation = NodeSeen;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<NodeSeen> {
        let nodes: Api<Node> = Api::all(live.client().clone());
        let found = nodes
            .get(self.site.name())
            .await
            .map_err(|e| cluster_error(format!("read node {}", self.site.name()), e))?;
        let tainted = found
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == names::TAINT_DEMOTED && t.effect == names::TAINT_EFFECT);
        Ok(NodeSeen {
            demoted_taint: Some(tainted),
        })
    }

    fn evaluate(
        &self,
        observed: &NodeSeen,
        _judging: &Judging<'_, NodeSeen>,
    ) -> Result<(), String> {
        let observed = serde_json::to_value(observed).unwrap_or_default();
        matches(
            &json!({"demotedTaint": self.demoted_taint}),
            Some(&observed),
            None,
        )
        .map_err(|why| format!("node of {}: {why}", self.site))
    }

    fn describe(&self) -> Option<String> {
        Some(format!(
            "{} demoted taint {}",
            self.site, self.demoted_taint
        ))
    }

    fn substitute(&mut self, _substitution: &mut Substitution<'_>) {}
}
