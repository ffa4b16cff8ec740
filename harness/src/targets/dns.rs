//! `dns`: the DNS answer for the group's hostname, asked from inside the cluster of the DNS
//! external-dns publishes to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::{topology, LiveCluster};
use crate::scenario::matcher::matches;
use crate::scenario::model::{Site, SiteOf};

/// A DNS answer for the group's hostname.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DnsExpect {
    /// The one address answered.
    pub target: SiteOf,
}

/// The answer: `{"site": "pdx", "addresses": [..]}` (`site` null: not exactly one address,
/// or no site's ClusterIP).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DnsAnswer {
    /// The site whose ClusterIP is the one address answered.
    pub site: Option<Site>,
    /// Every address answered.
    #[serde(default)]
    pub addresses: Vec<String>,
}

impl ExpectTarget for DnsExpect {
    const NAME: &'static str = "dns";
    type Observation = DnsAnswer;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<DnsAnswer> {
        let group = live.installer().group().await?;
        let hostname = group["spec"]["dns"]["hostname"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // Asked from inside the cluster, of the DNS external-dns publishes to (the
        // in-cluster stand-in), as a client would.
        let server = topology::dns_standin_server(live.client()).await?;
        let addresses = live
            .workload_pod()
            .await?
            .dns_at(&hostname, &server)
            .await?;
        let ips = topology::site_cluster_ips(live.client()).await?;
        let site = match addresses.as_slice() {
            [one] => ips.get(one).copied(),
            _ => None,
        };
        Ok(DnsAnswer { site, addresses })
    }

    fn evaluate(
        &self,
        observed: &DnsAnswer,
        _judging: &Judging<'_, DnsAnswer>,
    ) -> Result<(), String> {
        let observed = serde_json::to_value(observed).unwrap_or_default();
        matches(
            &json!({"site": self.target.0.name()}),
            Some(&observed),
            None,
        )
        .map_err(|why| format!("DNS answer {why}"))
    }

    fn describe(&self) -> Option<String> {
        Some(format!("answers site-of {}", self.target.0))
    }

    fn substitute(&mut self, _substitution: &mut Substitution<'_>) {}
}
