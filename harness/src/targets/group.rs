//! `group`: the playground group's `.status`, partial match
//! ([`crate::scenario::matcher`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::target::{compact, ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::LiveCluster;
use crate::scenario::matcher::{check_operators, matches};

/// The top-level fields of `MysqlFailoverGroup.status` (docs/design/operator.md#mysqlfailovergroup)
/// a `group` match may name.
pub const GROUP_STATUS_FIELDS: [&str; 13] = [
    "activeSite",
    "topologyGeneration",
    "authority",
    "conditions",
    "sites",
    "cooldownUntil",
    "plannedFailover",
    "orderedUpdate",
    "restore",
    "lastBackup",
    "lastFailover",
    "health",
    "observedGeneration",
];

/// The group's `.status` fields it must have (a partial match).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct GroupExpect(pub Value);

/// The group's `.status` as read (`null` before the operator wrote one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupStatus(pub Value);

impl ExpectTarget for GroupExpect {
    const NAME: &'static str = "group";
    type Observation = GroupStatus;

    fn validate(&self, _validation: &mut Validation<'_>) -> Result<(), String> {
        let Value::Object(map) = &self.0 else {
            return Err("group: must be a map of status fields".to_owned());
        };
        if let Some(unknown) = map
            .keys()
            .find(|key| !GROUP_STATUS_FIELDS.contains(&key.as_str()))
        {
            return Err(format!(
                "group: unknown status field `{unknown}`, expected one of {}",
                GROUP_STATUS_FIELDS.join(", ")
            ));
        }
        check_operators(&self.0, "group")
    }

    async fn observe(&self, live: &LiveCluster) -> Result<GroupStatus> {
        Ok(GroupStatus(
            live.installer().group().await?["status"].clone(),
        ))
    }

    fn evaluate(
        &self,
        observed: &GroupStatus,
        judging: &Judging<'_, GroupStatus>,
    ) -> Result<(), String> {
        matches(&self.0, Some(&observed.0), Some(&judging.baseline.0))
    }

    fn describe(&self) -> Option<String> {
        Some(compact(&self.0))
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.json(&mut self.0);
    }

    fn patterns(&self) -> Vec<&Value> {
        vec![&self.0]
    }
}
