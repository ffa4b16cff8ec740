//! `endpoints`: a Service's ready endpoints as the set of sites behind them, read now or, with
//! `recorded`, judged over what the workload's probe recorded since the latest step.

use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::cluster_error;
use crate::live::{topology, LiveCluster};
use crate::playground::names::NAMESPACE;
use crate::scenario::model::Site;

/// A Service's ready endpoints as the sites of the pods behind them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointsExpect {
    /// `primary`, `replicas`, `<site>` (internal) or `<site>-hl` (headless).
    pub service: String,
    /// Exactly these sites are behind the Service (`[]`: no endpoint at all).
    pub sites: Vec<Site>,
    /// Judge what the workload's probe recorded (every ~200 ms, `primary` and `replicas`
    /// only) since the latest fault, action, heal or apply step, instead of reading the
    /// Service now: every recorded set must be `sites`, with no gap in the recording
    /// ([`crate::check::endpoint_history`]). "No endpoint flap" is a claim about the whole
    /// window, which sampling cannot make.
    #[serde(default)]
    pub recorded: bool,
}

/// What an `endpoints` poll read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EndpointsSeen {
    /// The Service read now: `{"sites": ["pdx"], "serviceExists": true}`.
    Now {
        /// The sites behind its ready endpoints.
        sites: Vec<Site>,
        /// Whether the Service exists (absent: not known).
        #[serde(
            default,
            rename = "serviceExists",
            skip_serializing_if = "Option::is_none"
        )]
        service_exists: Option<bool>,
    },
    /// The probe's readings since the window's start, in the shape
    /// [`crate::check::endpoint_history::recorded_endpoints`] writes.
    Recorded(Value),
}

impl ExpectTarget for EndpointsExpect {
    const NAME: &'static str = "endpoints";
    type Observation = EndpointsSeen;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        let service = self.service.as_str();
        let known = matches!(service, "primary" | "replicas")
            || Site::ALL.iter().any(|site| {
                service == site.name() || service.strip_suffix("-hl") == Some(site.name())
            });
        if !known {
            return Err(format!(
                "endpoints: unknown service `{service}`, expected primary, replicas, <site> or <site>-hl"
            ));
        }
        if self.recorded && !matches!(service, "primary" | "replicas") {
            return Err(format!(
                "endpoints: `recorded` reads the workload's probe, which records primary and replicas only, not `{service}`"
            ));
        }
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<EndpointsSeen> {
        if self.recorded {
            return Ok(EndpointsSeen::Recorded(
                crate::check::endpoint_history::recorded_endpoints(
                    &live.history(),
                    &self.service,
                    jiff::Timestamp::now(),
                ),
            ));
        }
        let sites = topology::endpoint_sites(live.client(), &self.service).await?;
        let name = topology::service_name(&self.service);
        let services: Api<Service> = Api::namespaced(live.client().clone(), NAMESPACE);
        let exists = services
            .get_opt(&name)
            .await
            .map_err(|e| cluster_error(format!("read Service {name}"), e))?
            .is_some();
        Ok(EndpointsSeen::Now {
            sites,
            service_exists: Some(exists),
        })
    }

    fn evaluate(
        &self,
        observed: &EndpointsSeen,
        judging: &Judging<'_, EndpointsSeen>,
    ) -> Result<(), String> {
        let service = &self.service;
        match (self.recorded, observed) {
            (true, EndpointsSeen::Recorded(history)) => {
                crate::check::endpoint_history::judge(service, &self.sites, history, judging.since)
            }
            (true, EndpointsSeen::Now { .. }) => Err(format!(
                "{service} endpoints: read now, but `recorded` judges the probe's history"
            )),
            (false, EndpointsSeen::Recorded(_)) => Err(format!(
                "{service} endpoints: a recorded history, but the Service is to be read now"
            )),
            // No endpoint of a Service that is not there is no evidence of anything.
            (
                false,
                EndpointsSeen::Now {
                    service_exists: Some(false),
                    ..
                },
            ) => Err(format!("{service} endpoints: the Service does not exist")),
            (false, EndpointsSeen::Now { sites, .. }) => {
                let mut want: Vec<&str> = self.sites.iter().map(|site| site.name()).collect();
                let mut found: Vec<&str> = sites.iter().map(|site| site.name()).collect();
                want.sort_unstable();
                found.sort_unstable();
                if want == found {
                    Ok(())
                } else {
                    Err(format!(
                        "{service} endpoints: expected sites {want:?}, found {found:?}"
                    ))
                }
            }
        }
    }

    fn describe(&self) -> Option<String> {
        let sites: Vec<&str> = self.sites.iter().map(|site| site.name()).collect();
        let recorded = if self.recorded { " (recorded)" } else { "" };
        Some(format!(
            "{} = [{}]{recorded}",
            self.service,
            sites.join(", ")
        ))
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.text(&mut self.service);
    }
}
