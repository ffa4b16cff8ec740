//! `archive`: the archives a rejoin wrote on a site's backups volume (`archives/<name>/`,
//! docs/design/operator.md#returning-primary), read back through the site's sidecar and
//! verified; what they must hold is judged after the run by the archive checker
//! ([`crate::check::archive`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::check::archive::ArchiveObservation;
use crate::error::Result;
use crate::history::event::{EventType, Op};
use crate::history::recorder::Recorder;
use crate::live::LiveCluster;
use crate::scenario::model::Site;

/// The archives a rejoin wrote on a site's backups volume (`archives/<name>/`,
/// docs/design/operator.md#returning-primary), read back through the site's sidecar container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ArchiveExpect {
    /// The site whose volume holds them (the rejoined returning primary).
    pub site: Site,
    /// What the archive checker demands they hold, judged after the final read.
    pub holds: ArchiveHolds,
}

/// What the archive checker ([`crate::check::archive`]) demands of the archives an `archive`
/// expectation read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ArchiveHolds {
    /// Every acknowledged write lost in the emergency failover that demoted the site (by the
    /// rpo checker's count) has its GTID in an archive's errant binlog, and no archived GTID
    /// is that of an acknowledged write that was not lost there.
    LostWrites,
}

impl ExpectTarget for ArchiveExpect {
    const NAME: &'static str = "archive";
    /// Every archive on the volume, each verified against its manifest.
    type Observation = ArchiveObservation;

    fn validate(&self, validation: &mut Validation<'_>) -> Result<(), String> {
        if self.site == Site::Reader {
            return Err(
                "archive: reader is read-only: it is never demoted, so never rejoined, and holds no archive; name iad or pdx"
                    .to_owned(),
            );
        }
        if validation.holding {
            return Err(
                "archive: needs `within` (the archive is read until it verifies, and that read is what the archive checker judges), not `for`"
                    .to_owned(),
            );
        }
        Ok(())
    }

    async fn observe(&self, live: &LiveCluster) -> Result<ArchiveObservation> {
        live.observe_archive(self.site).await
    }

    fn evaluate(
        &self,
        observed: &ArchiveObservation,
        judging: &Judging<'_, ArchiveObservation>,
    ) -> Result<(), String> {
        crate::check::archive::judge_observation(observed, judging.since)
    }

    fn describe(&self) -> Option<String> {
        let holds = match self.holds {
            ArchiveHolds::LostWrites => "its lost writes",
        };
        Some(format!("{} holds {holds}", self.site))
    }

    fn substitute(&mut self, _substitution: &mut Substitution<'_>) {}

    /// Archives count from the scenario's start (a rejoin may re-use an archive written
    /// before the latest step).
    fn counts_from_scenario_start(&self) -> bool {
        true
    }

    /// Records what the expectation read last ([`Op::ArchiveRead`], process `archive`): `ok`
    /// when it was satisfied, `fail` when not; nothing when nothing was read. The archive
    /// checker judges the `ok` ones after the final read.
    fn record(
        &self,
        recorder: &Recorder,
        last: Option<&ArchiveObservation>,
        since: jiff::Timestamp,
        satisfied: bool,
    ) {
        let Some(observation) = last else {
            return;
        };
        let op = |archives| Op::ArchiveRead {
            site: observation.site,
            since,
            archives,
        };
        recorder.invoke("archive", op(Vec::new()));
        let kind = if satisfied {
            EventType::Ok
        } else {
            EventType::Fail
        };
        recorder.complete("archive", kind, op(observation.archives.clone()));
    }
}
