//! `connection`: a held connection opened by `open-connection`: who answers on it and what a
//! write on it gets, or what became of the write `send-write` left in flight on it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::cluster_error;
use crate::live::LiveCluster;
use crate::scenario::matcher::matches;
use crate::scenario::model::{SentWrite, Site};

/// A write through a connection opened by `open-connection`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConnectionExpect {
    /// The connection's name.
    pub name: String,
    /// The MySQL error number a write gets (1290 = read-only; 2013 = `CR_SERVER_LOST`, no
    /// server answered: the connection's mysqld is gone), or null for success.
    #[serde(default)]
    pub write_error: Option<u16>,
    /// The site whose mysqld is on the other end of the connection (`@@hostname`, asked on
    /// the same connection before the write). Not checked with `sentWrite`.
    #[serde(default)]
    pub site: Option<Site>,
    /// The outcome of the write `send-write` left in flight on it. Given, `writeError` is not
    /// checked (the connection belongs to that write).
    #[serde(default)]
    pub sent_write: Option<SentWrite>,
}

/// What the workload pod answers of a held connection: `{"writeError": 1290, "site": "iad"}`
/// (a null error: the write succeeded; a null site: nobody answered `@@hostname`), or
/// `{"sentWrite": "pending"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSeen {
    /// The outcome of the write left in flight on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_write: Option<SentWrite>,
    /// A write's error number (present and null: it committed; absent: no write was tried).
    #[serde(
        default,
        deserialize_with = "super::target::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub write_error: Option<Option<u16>>,
    /// The site that answered `@@hostname`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<Site>,
}

impl ExpectTarget for ConnectionExpect {
    const NAME: &'static str = "connection";
    type Observation = ConnectionSeen;

    fn validate(&self, validation: &mut Validation<'_>) -> Result<(), String> {
        let name = &self.name;
        if !validation.connections.contains(name) {
            return Err(format!(
                "connection: `{name}` was not opened by an earlier step"
            ));
        }
        let sent = validation.sent_writes.contains(name);
        match (self.sent_write.is_some(), sent) {
            (true, false) => {
                return Err(format!(
                    "connection: `{name}` asserts sentWrite, but no send-write used it"
                ))
            }
            (false, true) => {
                return Err(format!(
                    "connection: `{name}` carries a sent write; assert sentWrite, not writeError"
                ))
            }
            (true, true) | (false, false) => {}
        }
        if self.sent_write.is_some() && self.site.is_some() {
            return Err(format!(
                "connection: `{name}` asserts sentWrite; `site` is only read with writeError"
            ));
        }
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<ConnectionSeen> {
        use crate::incluster::control::{ConnectionName, Request};
        let answer = live
            .workload_pod()
            .await?
            .ctl(&Request::Connection(ConnectionName {
                name: self.name.clone(),
            }))
            .await?;
        serde_json::from_value(answer.clone()).map_err(|error| {
            cluster_error(
                format!("read connection {}", self.name),
                format!("unexpected answer {answer}: {error}"),
            )
        })
    }

    fn evaluate(
        &self,
        observed: &ConnectionSeen,
        _judging: &Judging<'_, ConnectionSeen>,
    ) -> Result<(), String> {
        let name = &self.name;
        let expected = match self.sent_write {
            Some(sent) => json!({"sentWrite": sent.as_str()}),
            None => {
                // `writeError: null` means committed: an answer without the field is no
                // answer, not a success.
                if observed.write_error.is_none() {
                    return Err(format!(
                        "connection {name}: the observation has no write outcome: {}",
                        serde_json::to_value(observed).unwrap_or_default()
                    ));
                }
                let mut expected = json!({"writeError": self.write_error});
                if let Some(site) = self.site {
                    expected["site"] = json!(site.name());
                }
                expected
            }
        };
        let observed = serde_json::to_value(observed).unwrap_or_default();
        matches(&expected, Some(&observed), None).map_err(|why| format!("connection {name}: {why}"))
    }

    fn describe(&self) -> Option<String> {
        Some(match self.sent_write {
            Some(sent) => format!("{} sent write {}", self.name, sent.as_str()),
            None => format!("{} write error {:?}", self.name, self.write_error),
        })
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.text(&mut self.name);
    }
}

#[cfg(test)]
mod tests {
    use crate::live::workload;

    // A write on a connection whose mysqld was killed must not read as a success (`null`).
    #[test]
    fn a_lost_connection_is_error_2013_not_success() {
        let lost = bloodraven_mysql::live::LiveError::Timeout {
            what: "held write".to_owned(),
            timeout: std::time::Duration::from_secs(2),
        };
        assert_eq!(workload::write_error_code(&lost), workload::CR_SERVER_LOST);
        assert_eq!(
            serde_json::json!({"writeError": workload::write_error_code(&lost)}),
            serde_json::json!({"writeError": 2013})
        );
    }
}
