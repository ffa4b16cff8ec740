//! external-dns's `DNSEndpoint` (`externaldns.k8s.io/v1alpha1`), the one object Bloodraven
//! writes outside the cluster's routing.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The records external-dns publishes.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[kube(
    group = "externaldns.k8s.io",
    version = "v1alpha1",
    kind = "DNSEndpoint",
    namespaced,
    status = "DNSEndpointStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct DNSEndpointSpec {
    /// The records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoint>,
}

/// One DNS record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Record name.
    pub dns_name: String,
    /// Record type (`A`).
    pub record_type: String,
    /// TTL in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "recordTTL")]
    pub record_ttl: Option<i64>,
    /// Record values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Provider labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Status of a DNSEndpoint, written by external-dns.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSEndpointStatus {
    /// The metadata.generation external-dns last published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl DNSEndpointSpec {
    /// The single A record Bloodraven writes: `hostname` -> `target` with `ttl`.
    pub fn a_record(hostname: &str, target: &str, ttl: u32) -> Self {
        Self {
            endpoints: vec![Endpoint {
                dns_name: hostname.to_string(),
                record_type: "A".to_string(),
                record_ttl: Some(i64::from(ttl)),
                targets: vec![target.to_string()],
                labels: BTreeMap::new(),
            }],
        }
    }
}
