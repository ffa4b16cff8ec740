//! `mysql`: a site's mysqld read directly as root (not through the operator): read_only,
//! replication, its wall clock and the sidecar's write deadline event.

use bloodraven_api::names;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::observe::unix_ms;
use crate::live::LiveCluster;
use crate::playground::names::GROUP;
use crate::scenario::matcher::matches;
use crate::scenario::model::{offset_ms, OffsetRange, Site};
use crate::scenario::span::Span;

/// What one read asks mysqld: read_only, replication threads, its clock (ms since the epoch)
/// and how long ago the write deadline event last ran (ms, by its own clock).
const MYSQL_QUERY: &str = "SELECT @@GLOBAL.read_only, (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Slave_IO' OR USER = 'system user'), \
     CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), \
     IFNULL((SELECT CAST(TIMESTAMPDIFF(MICROSECOND, LAST_EXECUTED, NOW(6)) DIV 1000 AS SIGNED) FROM information_schema.EVENTS \
     WHERE EVENT_SCHEMA = 'bloodraven_sidecar' AND EVENT_NAME = 'fence_at_write_deadline'), 'NULL')";

/// A site's mysqld, read directly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MysqlExpect {
    /// The site.
    pub site: Site,
    /// `@@global.read_only`.
    #[serde(default)]
    pub read_only: Option<bool>,
    /// Replication running (IO and SQL threads).
    #[serde(default)]
    pub replicating: Option<bool>,
    /// mysqld's wall clock (`UTC_TIMESTAMP(6)`) minus the harness's, within these bounds
    /// (signed offsets: `{atLeast: -21s, atMost: -19s}`; the exec's latency counts as half).
    #[serde(default)]
    pub clock_offset: Option<OffsetRange>,
    /// mysqld's write deadline event (the sidecar's dead man's switch) last ran at most this
    /// long ago by mysqld's own clock, and not in its future: the switch runs now, and would
    /// fence on time (a backward step of mysqld's clock stalls the event scheduler).
    #[serde(default)]
    pub write_deadline_ran_within: Option<Span>,
}

/// One read: `{"readOnly": true, "replicating": false, "clockOffsetMs": -20012,
/// "roundTripMs": 40, "writeDeadlineAgoMs": 640}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MysqlSeen {
    /// `@@GLOBAL.read_only` is 1.
    #[serde(default)]
    pub read_only: bool,
    /// A replication thread runs.
    #[serde(default)]
    pub replicating: bool,
    /// mysqld's wall clock minus the harness's (the exec's round trip's middle), ms.
    #[serde(default)]
    pub clock_offset_ms: Option<i64>,
    /// The exec's round trip, ms.
    #[serde(default)]
    pub round_trip_ms: i64,
    /// How long ago the write deadline event last ran, ms by mysqld's clock.
    #[serde(default)]
    pub write_deadline_ago_ms: Option<i64>,
}

impl MysqlExpect {
    /// What the read must match, as a partial-match document.
    fn expected(&self) -> Result<Value, String> {
        let mut expected = serde_json::Map::new();
        if let Some(read_only) = self.read_only {
            expected.insert("readOnly".to_owned(), json!(read_only));
        }
        if let Some(replicating) = self.replicating {
            expected.insert("replicating".to_owned(), json!(replicating));
        }
        if let Some(range) = &self.clock_offset {
            let (low, high) = match (offset_ms(&range.at_least), offset_ms(&range.at_most)) {
                (Ok(low), Ok(high)) => (low, high),
                (Err(why), _) | (_, Err(why)) => return Err(format!("mysql.clockOffset: {why}")),
            };
            expected.insert(
                "clockOffsetMs".to_owned(),
                json!({"$gte": low, "$lte": high}),
            );
        }
        if let Some(within) = self.write_deadline_ran_within {
            // LAST_EXECUTED has whole seconds: up to a second "ahead" of NOW(6) is no stall.
            let within_ms = i64::try_from(within.duration().as_millis()).unwrap_or(i64::MAX);
            expected.insert(
                "writeDeadlineAgoMs".to_owned(),
                json!({"$gte": -1000, "$lte": within_ms}),
            );
        }
        Ok(Value::Object(expected))
    }
}

impl ExpectTarget for MysqlExpect {
    const NAME: &'static str = "mysql";
    type Observation = MysqlSeen;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        if self.read_only.is_none()
            && self.replicating.is_none()
            && self.clock_offset.is_none()
            && self.write_deadline_ran_within.is_none()
        {
            return Err(
                "mysql: asserts nothing (give readOnly, replicating, clockOffset or writeDeadlineRanWithin)"
                    .to_owned(),
            );
        }
        if let Some(range) = &self.clock_offset {
            let low = offset_ms(&range.at_least)
                .map_err(|e| format!("mysql.clockOffset.atLeast: {e}"))?;
            let high =
                offset_ms(&range.at_most).map_err(|e| format!("mysql.clockOffset.atMost: {e}"))?;
            if low > high {
                return Err(format!(
                    "mysql.clockOffset: atLeast {} is more than atMost {}",
                    range.at_least, range.at_most
                ));
            }
        }
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<MysqlSeen> {
        let sent = std::time::SystemTime::now();
        let out = live
            .installer()
            .sql_as_root(&names::pod(GROUP, self.site.name()), MYSQL_QUERY)
            .await?;
        let answered = std::time::SystemTime::now();
        let fields: Vec<&str> = out.trim().split('\t').collect();
        // mysqld read its clock somewhere in the exec's round trip: take the middle.
        let midpoint = (unix_ms(sent) + unix_ms(answered)) / 2;
        let number = |index: usize| fields.get(index).and_then(|n| n.parse::<i64>().ok());
        Ok(MysqlSeen {
            read_only: fields.first() == Some(&"1"),
            replicating: fields
                .get(1)
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
                > 0,
            clock_offset_ms: number(2).map(|mysqld| mysqld - midpoint),
            round_trip_ms: unix_ms(answered) - unix_ms(sent),
            write_deadline_ago_ms: number(3),
        })
    }

    fn evaluate(
        &self,
        observed: &MysqlSeen,
        _judging: &Judging<'_, MysqlSeen>,
    ) -> Result<(), String> {
        let observed = serde_json::to_value(observed).unwrap_or_default();
        matches(&self.expected()?, Some(&observed), None)
            .map_err(|why| format!("mysqld of {}: {why}", self.site))
    }

    fn describe(&self) -> Option<String> {
        None
    }

    fn substitute(&mut self, _substitution: &mut Substitution<'_>) {}
}
