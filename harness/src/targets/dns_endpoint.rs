//! `dns-endpoint`: the DNSEndpoint the operator writes for the group.

use std::collections::BTreeSet;

use bloodraven_api::names;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::cluster_error;
use crate::live::{topology, LiveCluster};
use crate::playground::kube::api_for;
use crate::playground::names::{GROUP, NAMESPACE};
use crate::scenario::matcher::matches;
use crate::scenario::model::{Site, SiteOf};

/// The DNSEndpoint object the operator writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DnsEndpointExpect {
    /// The single A record's single target.
    pub target: SiteOf,
    /// `recordTTL` (playground: 10).
    #[serde(default, rename = "recordTTL")]
    pub record_ttl: Option<u32>,
    /// The field manager owning `spec.endpoints` (the operator: `bloodraven`).
    #[serde(default)]
    pub field_manager: Option<String>,
}

/// The DNSEndpoint as read: `{"site": "iad", "targets": [..], "recordTTL": 10,
/// "fieldManagers": ["bloodraven"]}` (`site` null: no object, or its one target is no
/// site's ClusterIP; `fieldManagers`: the managers of `spec.endpoints`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsEndpointSeen {
    /// The site whose ClusterIP is the record's single target.
    pub site: Option<Site>,
    /// The record's targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    /// Its `recordTTL`.
    #[serde(default, rename = "recordTTL", skip_serializing_if = "Option::is_none")]
    pub record_ttl: Option<Value>,
    /// The field managers of `spec.endpoints`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_managers: Option<BTreeSet<String>>,
}

impl ExpectTarget for DnsEndpointExpect {
    const NAME: &'static str = "dns-endpoint";
    type Observation = DnsEndpointSeen;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<DnsEndpointSeen> {
        let probe = json!({"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
            "metadata": {"name": names::dns_endpoint(GROUP), "namespace": NAMESPACE}});
        let (api, name) = api_for(live.client(), &probe)?;
        let Some(object) = api
            .get_opt(&name)
            .await
            .map_err(|e| cluster_error("read the DNSEndpoint", e))?
        else {
            return Ok(DnsEndpointSeen::default());
        };
        let value = serde_json::to_value(&object).unwrap_or_default();
        let endpoint = &value["spec"]["endpoints"][0];
        let targets: Vec<String> = endpoint["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        let ips = topology::site_cluster_ips(live.client()).await?;
        let site = match targets.as_slice() {
            [one] => ips.get(one).copied(),
            _ => None,
        };
        let managers: BTreeSet<String> = value["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["fieldsV1"]["f:spec"].is_object())
            .filter_map(|entry| entry["manager"].as_str().map(str::to_owned))
            .collect();
        Ok(DnsEndpointSeen {
            site,
            targets: Some(targets),
            record_ttl: Some(endpoint["recordTTL"].clone()),
            field_managers: Some(managers),
        })
    }

    fn evaluate(
        &self,
        observed: &DnsEndpointSeen,
        _judging: &Judging<'_, DnsEndpointSeen>,
    ) -> Result<(), String> {
        let mut expected = json!({"site": self.target.0.name()});
        if let Some(ttl) = self.record_ttl {
            expected["recordTTL"] = json!(ttl);
        }
        if let Some(manager) = &self.field_manager {
            // The one manager owning `spec.endpoints`: another beside it is not ownership.
            expected["fieldManagers"] = json!({"$exact": [manager]});
        }
        let observed = serde_json::to_value(observed).unwrap_or_default();
        matches(&expected, Some(&observed), None).map_err(|why| format!("DNSEndpoint {why}"))
    }

    fn describe(&self) -> Option<String> {
        Some(format!("target site-of {}", self.target.0))
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.texts(self.field_manager.as_mut());
    }
}
