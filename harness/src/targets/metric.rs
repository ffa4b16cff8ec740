//! `metric`: a Prometheus sample of the operator leader's :8082/metrics, or of a site's
//! sidecar's :8086/metrics.

use std::collections::BTreeMap;

use bloodraven_api::names;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::target::{compact, ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::operator_metrics_url;
use crate::live::{topology, LiveCluster};
use crate::scenario::matcher::{check_operators, matches};
use crate::scenario::model::Site;

/// A Prometheus sample from the operator leader's :8082/metrics, or with `site` from that
/// site's sidecar (:8086/metrics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricExpect {
    /// Scrape this site's sidecar instead of the operator.
    #[serde(default)]
    pub site: Option<Site>,
    /// Metric name.
    pub name: String,
    /// Labels the sample must carry.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The value, partial match (a number, or `{$gt: 0}` ...).
    pub value: Value,
}

/// The sample: `{"value": 1.0}` (null: no such sample, or no leader or sidecar IP to
/// scrape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricSample {
    /// The first sample's value.
    #[serde(default)]
    pub value: Option<f64>,
}

impl MetricExpect {
    /// The metrics page it reads, `None` while there is nothing to scrape.
    async fn page(&self, live: &LiveCluster) -> Result<Option<String>> {
        let (url, action) = match self.site {
            Some(site) => {
                let Some(ip) = topology::site_pod_ip(live.client(), site).await? else {
                    return Ok(None);
                };
                (
                    format!(
                        "http://{ip}:{}{}",
                        names::PORT_SIDECAR,
                        bloodraven_api::sidecar::PATH_METRICS
                    ),
                    format!("scrape {}'s sidecar", site.name()),
                )
            }
            None => {
                let Some(url) = operator_metrics_url(live.client()).await? else {
                    return Ok(None);
                };
                (url, "scrape the operator".to_owned())
            }
        };
        live.scrape(&url, &action).await.map(Some)
    }
}

impl ExpectTarget for MetricExpect {
    const NAME: &'static str = "metric";
    type Observation = MetricSample;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        check_operators(&self.value, "metric.value")
    }

    async fn observe(&self, live: &LiveCluster) -> Result<MetricSample> {
        let page = self.page(live).await?;
        Ok(MetricSample {
            value: page.and_then(|text| metric_value(&text, &self.name, &self.labels)),
        })
    }

    fn evaluate(
        &self,
        observed: &MetricSample,
        judging: &Judging<'_, MetricSample>,
    ) -> Result<(), String> {
        matches(
            &self.value,
            Some(&json!(observed.value)),
            Some(&json!(judging.baseline.value)),
        )
        .map_err(|why| format!("metric {}: {why}", self.name))
    }

    fn describe(&self) -> Option<String> {
        Some(format!("{} {}", self.name, compact(&self.value)))
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.text(&mut self.name);
        substitution.texts(self.labels.values_mut());
        substitution.json(&mut self.value);
    }

    fn patterns(&self) -> Vec<&Value> {
        vec![&self.value]
    }
}

/// The value of the first sample of `name` whose labels include `labels`, from a Prometheus
/// text exposition.
pub fn metric_value(text: &str, name: &str, labels: &BTreeMap<String, String>) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((metric, rest)) => (metric, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let all = labels.iter().all(|(key, want)| {
                label_text
                    .split(',')
                    .any(|pair| pair == format!("{key}=\"{want}\""))
            });
            all.then(|| value.parse().ok()).flatten()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_samples_are_found_by_name_and_labels() {
        let text = "# HELP x\nbloodraven_failovers_total{kind=\"emergency\"} 1\nbloodraven_failovers_total{kind=\"planned\"} 2\nbloodraven_poll_duration_seconds_count 5\n";
        let planned = [("kind".to_owned(), "planned".to_owned())]
            .into_iter()
            .collect();
        assert_eq!(
            metric_value(text, "bloodraven_failovers_total", &planned),
            Some(2.0)
        );
        assert_eq!(
            metric_value(
                text,
                "bloodraven_poll_duration_seconds_count",
                &Default::default()
            ),
            Some(5.0)
        );
        assert_eq!(metric_value(text, "missing", &Default::default()), None);
    }
}
