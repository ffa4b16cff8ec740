//! `counter`: the counter app (GET/POST /api/counter) as a client sees it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::incluster::HttpCall;
use crate::live::{topology, LiveCluster};
use crate::playground::names::NAMESPACE;
use crate::scenario::matcher::{check_operators, matches};
use crate::scenario::model::Site;

/// The counter's header naming the connection that answered (`bloodraven_counter::HEADER_CONNECTION_ID`;
/// the harness does not link the counter).
const COUNTER_CONNECTION_ID_HEADER: &str = "x-counter-connection-id";

/// The outcome of an operation (Jepsen: ok, fail, info = unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    /// It happened.
    Ok,
    /// It definitely did not happen.
    Fail,
    /// Unknown (timeout, connection lost).
    Info,
}

/// The counter app (GET/POST /api/counter).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CounterExpect {
    /// The counter's Service in the playground namespace (default `counter`, the playground's
    /// own, policy `hold`).
    #[serde(default)]
    pub service: Option<String>,
    /// The value strictly increases across the expectation's polls (POSTs are sent).
    #[serde(default)]
    pub increasing: Option<bool>,
    /// `readOnly` in the GET answer.
    #[serde(default)]
    pub read_only: Option<bool>,
    /// The site behind `dbHost` in the GET answer.
    #[serde(default)]
    pub db_site: Option<Site>,
    /// The outcome of a POST.
    #[serde(default)]
    pub write: Option<OutcomeKind>,
    /// The MySQL error number of a refused POST (the counter's error body `code`; 1290 =
    /// read-only).
    #[serde(default)]
    pub write_error: Option<u16>,
    /// The server-side id of the connection that answered (the counter's
    /// `x-counter-connection-id` header), partial match: `{$unchanged: true}` asserts a `hold`
    /// counter still talks over the socket it had before the step's fault
    /// (docs/design/requirements.md R000.20), not a new one to the same site after a disconnect.
    #[serde(default)]
    pub connection_id: Option<Value>,
}

/// The counter's answer: `{"value": 7, "readOnly": false, "dbSite": "iad", "connectionId": 12,
/// "write": "ok", "writeError": null}` (`connectionId` null when no connection is held;
/// `write` and `writeError` only for a POST).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterAnswer {
    /// The counter's value.
    #[serde(default)]
    pub value: Option<i64>,
    /// `readOnly` of the answer.
    #[serde(default)]
    pub read_only: Option<bool>,
    /// The site behind the answer's `dbHost`.
    #[serde(default)]
    pub db_site: Option<Site>,
    /// The server-side id of the connection that answered.
    #[serde(default)]
    pub connection_id: Option<u64>,
    /// A POST's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<OutcomeKind>,
    /// A POST's error `code` (present and null: none).
    #[serde(
        default,
        deserialize_with = "super::target::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub write_error: Option<Option<u16>>,
}

impl CounterExpect {
    /// What the answer must match, as a partial-match document.
    fn expected(&self) -> Value {
        let mut expected = serde_json::Map::new();
        if let Some(read_only) = self.read_only {
            expected.insert("readOnly".to_owned(), json!(read_only));
        }
        if let Some(site) = self.db_site {
            expected.insert("dbSite".to_owned(), json!(site.name()));
        }
        if let Some(write) = self.write {
            expected.insert("write".to_owned(), json!(write));
        }
        if let Some(code) = self.write_error {
            expected.insert("writeError".to_owned(), json!(code));
        }
        if let Some(connection_id) = &self.connection_id {
            expected.insert("connectionId".to_owned(), connection_id.clone());
        }
        Value::Object(expected)
    }
}

impl ExpectTarget for CounterExpect {
    const NAME: &'static str = "counter";
    type Observation = CounterAnswer;

    fn validate(&self, validation: &mut Validation<'_>) -> Result<(), String> {
        if self.increasing.is_none()
            && self.read_only.is_none()
            && self.db_site.is_none()
            && self.write.is_none()
            && self.connection_id.is_none()
        {
            return Err("counter: asserts nothing".to_owned());
        }
        if let Some(connection_id) = &self.connection_id {
            check_operators(connection_id, "counter.connectionId")?;
        }
        if self.increasing == Some(true) && !validation.holding {
            return Err(
                "counter: `increasing` needs `for` (it is judged over a window)".to_owned(),
            );
        }
        let refused = self.write == Some(OutcomeKind::Fail);
        if self.write_error.is_some() && !refused {
            return Err("counter: `writeError` needs `write: fail`".to_owned());
        }
        if refused && (self.read_only.is_some() || self.db_site.is_some()) {
            return Err(
                "counter: a refused write answers an error body without readOnly or dbSite; assert them in a separate expectation (a GET)"
                    .to_owned(),
            );
        }
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<CounterAnswer> {
        let service = self.service.as_deref().unwrap_or("counter");
        let write = self.write.is_some();
        let url = format!("http://{service}.{NAMESPACE}.svc.cluster.local:8090/api/counter");
        let answer = live
            .http_in_cluster(&HttpCall {
                method: if write { "POST" } else { "GET" },
                url,
                ca_pem: None,
                bearer: None,
                headers: Vec::new(),
                body: None,
                resolve: Vec::new(),
                timeout: std::time::Duration::from_secs(5),
            })
            .await?;
        let ok = (200..300).contains(&answer.status);
        let body: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
        Ok(CounterAnswer {
            value: body["value"].as_i64(),
            read_only: body["readOnly"].as_bool(),
            db_site: body["dbHost"].as_str().and_then(topology::site_of_hostname),
            connection_id: answer
                .headers
                .get(COUNTER_CONNECTION_ID_HEADER)
                .and_then(|text| text.parse::<u64>().ok()),
            write: write.then_some(if ok {
                OutcomeKind::Ok
            } else {
                OutcomeKind::Fail
            }),
            write_error: write.then(|| {
                body["code"]
                    .as_u64()
                    .and_then(|code| u16::try_from(code).ok())
            }),
        })
    }

    fn evaluate(
        &self,
        observed: &CounterAnswer,
        judging: &Judging<'_, CounterAnswer>,
    ) -> Result<(), String> {
        let json = |answer: &CounterAnswer| serde_json::to_value(answer).unwrap_or_default();
        matches(
            &self.expected(),
            Some(&json(observed)),
            Some(&json(judging.baseline)),
        )
        .map_err(|why| format!("counter {why}"))?;
        if self.increasing != Some(true) {
            return Ok(());
        }
        // `for`: it never falls below the baseline on any poll (a counter writing every
        // second reads equal on two polls 250 ms apart) and must have climbed by the end
        // of the window ([`ExpectTarget::climbed`]); `within`: it becomes strictly greater.
        match (judging.baseline.value, observed.value) {
            (Some(_), Some(_)) if judging.first_poll => Ok(()),
            (Some(before), Some(now)) if now > before || (judging.holding && now == before) => {
                Ok(())
            }
            (before, now) => Err(format!("counter not increasing: {before:?} -> {now:?}")),
        }
    }

    fn describe(&self) -> Option<String> {
        None
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        let _ = substitution;
    }

    fn patterns(&self) -> Vec<&Value> {
        self.connection_id.iter().collect()
    }

    /// At the end of a `for` window: an `increasing` counter must be above its baseline (it
    /// climbed during the window, docs/design/requirements.md R001.3).
    fn climbed(
        &self,
        baseline: Option<&CounterAnswer>,
        last: Option<&CounterAnswer>,
    ) -> Result<(), String> {
        if self.increasing != Some(true) {
            return Ok(());
        }
        let value = |answer: Option<&CounterAnswer>| answer.and_then(|answer| answer.value);
        match (value(baseline), value(last)) {
            (Some(before), Some(now)) if now > before => Ok(()),
            (before, now) => Err(format!(
                "counter did not climb over the window: {before:?} -> {now:?}"
            )),
        }
    }
}
