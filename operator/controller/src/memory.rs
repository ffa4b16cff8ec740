//! The shell's side of [`GroupMemory`]: the group's annotations read into the
//! `Observation`, the status written after a poll, and the board that shares the leader's
//! memory with the deploy API.
//!
//! The conversions themselves are core's ([`GroupMemory::to_status`],
//! [`GroupMemory::from_status`]); so are the conditions (stored by `decide` in
//! `GroupMemory::conditions`) and the anti-flap cooldown's second copy: the annotation
//! `bloodraven.shipstream.io/cooldown-until` is read here into
//! [`GroupAnnotations::cooldown_until`], `decide` takes the later of the two copies and
//! emits the annotation rewrite when that copy is missing or older (docs/design/requirements.md
//! R001.10: losing the cooldown takes both copies lost).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use bloodraven_api::auth::{OperatorKey, OperatorVerifyingKey, SignedAnnotation};
use bloodraven_api::{names, Condition, MysqlFailoverGroup, MysqlFailoverGroupStatus};
use bloodraven_core::engine::{
    signed_value, split_signature, FailoverNote, FailoverNoteError, GroupAnnotations, NoteReading,
    NoteSignature,
};
use bloodraven_core::GroupMemory;

/// The group's annotations that `decide` reads. `verifying` is the group's operator key
/// (`None` before the shell loaded it): the `last-failover` note is checked against it.
pub fn annotations_of(
    group: &MysqlFailoverGroup,
    verifying: Option<&OperatorVerifyingKey>,
) -> GroupAnnotations {
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    let name = group.metadata.name.as_deref().unwrap_or_default();
    let empty = BTreeMap::new();
    let annotations = group.metadata.annotations.as_ref().unwrap_or(&empty);
    GroupAnnotations {
        planned_failover: annotations
            .get(names::ANNOTATION_PLANNED_FAILOVER)
            .map(|site| site.trim().to_string())
            .filter(|site| !site.is_empty()),
        revoke_deployment_leases: annotations
            .contains_key(names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES),
        cooldown_until: annotations
            .get(names::ANNOTATION_COOLDOWN_UNTIL)
            .and_then(|text| text.parse().ok()),
        backup: annotations
            .get(names::ANNOTATION_BACKUP)
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty()),
        restore: annotations
            .get(names::ANNOTATION_RESTORE)
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty()),
        rejoin: annotations
            .get(names::ANNOTATION_REJOIN)
            .map(|site| site.trim().to_string())
            .filter(|site| !site.is_empty()),
        last_failover: annotations
            .get(names::ANNOTATION_LAST_FAILOVER)
            .and_then(|value| read_last_failover(value, namespace, name, verifying)),
    }
}

/// The `last-failover` value to write for core's note `text`: the text signed with the
/// group's operator key (core's `signed_value`), so that only this operator's notes are
/// adopted when a reverted status is behind them.
pub fn signed_last_failover(key: &OperatorKey, namespace: &str, group: &str, text: &str) -> String {
    let signature = key.sign_annotation(&SignedAnnotation {
        namespace,
        group,
        key: names::ANNOTATION_LAST_FAILOVER,
        text,
    });
    signed_value(text, &signature)
}

/// Reads a `last-failover` value of `namespace/group`: the note (core's
/// [`FailoverNote::read`]: `None` for an older operator's value without a generation) and
/// whether its signature verifies with `verifying`.
pub fn read_last_failover(
    value: &str,
    namespace: &str,
    group: &str,
    verifying: Option<&OperatorVerifyingKey>,
) -> Option<Result<NoteReading, FailoverNoteError>> {
    let (text, signature) = split_signature(value);
    let note = FailoverNote::read(text)?;
    let signature = match (signature, verifying) {
        (None, _) => NoteSignature::Rejected("the value carries no signature".to_string()),
        (Some(_), None) => NoteSignature::Rejected(
            "the group's operator key is not loaded (its Secret was not read yet)".to_string(),
        ),
        (Some(signature), Some(verifying)) => {
            let annotation = SignedAnnotation {
                namespace,
                group,
                key: names::ANNOTATION_LAST_FAILOVER,
                text,
            };
            match verifying.verify_annotation(&annotation, signature) {
                Ok(()) => NoteSignature::Verified,
                Err(error) => NoteSignature::Rejected(error.to_string()),
            }
        }
    };
    Some(note.map(|note| NoteReading { note, signature }))
}

/// The status to write for `memory` (core's [`GroupMemory::to_status`]) with
/// `observedGeneration`, the group's `metadata.generation` read at the start of the poll.
pub fn status_of(
    memory: &GroupMemory,
    observed_generation: Option<i64>,
) -> MysqlFailoverGroupStatus {
    MysqlFailoverGroupStatus {
        observed_generation,
        ..memory.to_status()
    }
}

/// The status to write after a poll of a group whose spec is invalid
/// (docs/design/operator.md#mysqlfailovergroup, "An invalid spec builds nothing and says so"): the
/// carried memory's status when a valid spec left one in this process, else the stored
/// status, with `conditions` (the decision's: the previous ones and `SpecValid=False`) and
/// `observedGeneration`.
///
/// Never the status of memory rebuilt from the stored status under the invalid spec:
/// [`GroupMemory::from_status`] needs the spec's sites and falls back to the initial memory
/// when the active site is not one of them, and writing that would reset
/// `topologyGeneration` and `activeSite` of a group that was edited invalid while the
/// operator was away.
pub fn status_while_invalid(
    carried: Option<&GroupMemory>,
    stored: Option<&MysqlFailoverGroupStatus>,
    conditions: &[Condition],
    observed_generation: Option<i64>,
) -> MysqlFailoverGroupStatus {
    let status = match carried {
        Some(memory) => memory.to_status(),
        None => stored.cloned().unwrap_or_default(),
    };
    MysqlFailoverGroupStatus {
        conditions: conditions.to_vec(),
        observed_generation,
        ..status
    }
}

/// The memory each poll loop returned last, keyed by `(namespace, name)`: the leader's view
/// of its groups, read by the deploy API so that `stable`/`unstableReason` and the lease
/// stability are core's judgement of the full memory (an emergency failover in flight is
/// volatile and not in the status). A group with no entry (a new leader before its first
/// poll) is judged from its status by [`GroupMemory::from_status`].
#[derive(Clone, Debug, Default)]
pub struct MemoryBoard {
    memories: Arc<RwLock<BTreeMap<(String, String), GroupMemory>>>,
}

impl MemoryBoard {
    /// An empty board.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the memory `namespace/name`'s poll returned.
    pub fn publish(&self, namespace: &str, name: &str, memory: &GroupMemory) {
        if let Ok(mut memories) = self.memories.write() {
            memories.insert((namespace.to_string(), name.to_string()), memory.clone());
        }
    }

    /// Forgets `namespace/name` (its poll loop stopped: deleted, or leadership lost).
    pub fn forget(&self, namespace: &str, name: &str) {
        if let Ok(mut memories) = self.memories.write() {
            memories.remove(&(namespace.to_string(), name.to_string()));
        }
    }

    /// The last published memory of `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<GroupMemory> {
        self.memories
            .read()
            .ok()?
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use bloodraven_api::{
        Admission, AuthorityState, DeferReason, FailoverKind, LastFailover, MysqlFailoverGroupSpec,
        PlannedFailoverPhase, Timestamp,
    };
    use bloodraven_core::decide;
    use bloodraven_core::engine::{
        conditions, Action, AnnotationChange, AuthorityValidity, Detection, DnsReading,
        InvalidReason, Observation, PlannedFailover, PodRole, PromotionKind, SiteState,
        CONDITION_READY,
    };
    use bloodraven_mysql::{Flavor, GtidSet};

    use super::*;

    fn spec() -> MysqlFailoverGroupSpec {
        serde_yaml::from_str(
            "image: mariadb:10.11\nsites:\n- {name: iad, role: read-write}\n- {name: pdx, role: read-write}\n- {name: reader, role: read-only}\ninitialActiveSite: iad\nfailoverCooldown: 30s\n",
        )
        .expect("spec")
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_unix_millis(1_796_000_000_000 + seconds * 1_000)
    }

    /// A memory after an emergency failover iad -> pdx: iad demoted (fenced), cooldown set,
    /// conditions derived by core at `at(1)`.
    fn after_failover() -> GroupMemory {
        let spec = spec();
        let mut memory = GroupMemory::initial(&spec);
        memory.active_site = "pdx".into();
        memory.topology_generation = 3;
        memory.authority = AuthorityValidity::Valid;
        memory.cooldown_until = Some(at(30));
        memory.last_failover = Some(LastFailover {
            kind: FailoverKind::Emergency,
            from: "iad".into(),
            to: "pdx".into(),
            started_at: Some(at(-8)),
            detected_at: Some(at(-2)),
            fenced_at: Some(at(-1)),
            promoted_at: Some(at(0)),
            completed_at: Some(at(1)),
            lost_transactions: 2,
            lost_gtid_set: Some("0-1-41-42".into()),
            exact: false,
        });
        for site in &mut memory.sites {
            site.last_seen = Some(at(1));
            site.reachable = site.site != "iad";
            site.gtid_executed = GtidSet::parse(Flavor::MariaDb, "0-1-40").ok();
            match site.site.as_str() {
                "iad" => {
                    site.state = SiteState::Demoted;
                    site.role = PodRole::Fenced;
                    site.consecutive_failures = 5;
                    site.detection = Detection::Suspect;
                    site.errant = GtidSet::parse(Flavor::MariaDb, "0-1-42").ok();
                }
                "pdx" => {
                    site.state = SiteState::Active;
                    site.role = PodRole::Primary;
                    site.writable = true;
                    site.healthy = true;
                }
                _ => {
                    site.state = SiteState::Replica;
                    site.role = PodRole::Replica;
                    site.replicating = true;
                    site.healthy = true;
                    site.seconds_behind_source = Some(4);
                    site.source_host = Some("mysql-g-pdx.ns.svc.cluster.local".into());
                }
            }
        }
        memory.conditions = conditions(&memory, &[], at(1));
        memory
    }

    /// An observation of `g` at which no sidecar answered, with `annotations`.
    fn observation(annotations: GroupAnnotations) -> Observation {
        Observation {
            group: "g".into(),
            namespace: "ns".into(),
            sites: Vec::new(),
            annotations,
            deploy_hold: None,
            dns: DnsReading::Absent,
            polled_at: None,
        }
    }

    fn annotations(cooldown: Option<Timestamp>) -> GroupAnnotations {
        GroupAnnotations {
            cooldown_until: cooldown,
            ..GroupAnnotations::default()
        }
    }

    /// docs/design/operator.md#mysqlfailovergroup (an invalid spec): a group edited invalid
    /// while the operator was away (its restart carries no memory) keeps its status as stored,
    /// with SpecValid=False added: memory rebuilt under the invalid spec (pdx no longer one of
    /// its sites) is the initial one, and writing it would have reset the generation and the
    /// active site.
    #[test]
    fn an_invalid_spec_writes_the_stored_status_with_its_spec_valid_condition() {
        let valid = after_failover();
        let stored = status_of(&valid, Some(4));
        let mut invalid = spec();
        invalid.sites.retain(|site| site.name != "pdx");
        invalid.failure_threshold = 0;
        invalid.initial_active_site = "pdx".into();
        let rebuilt = GroupMemory::from_status(&invalid, Some(&stored), at(5));
        assert_eq!(
            (rebuilt.topology_generation, rebuilt.active_site.as_str()),
            (0, "pdx"),
            "the hazard: initial memory"
        );

        let base = GroupMemory {
            conditions: stored.conditions.clone(),
            ..rebuilt
        };
        let decision = bloodraven_core::decide(
            &invalid,
            &base,
            &observation(GroupAnnotations::default()),
            at(5),
        );
        let status =
            status_while_invalid(None, Some(&stored), &decision.memory.conditions, Some(5));
        assert_eq!(
            (
                status.active_site.as_deref(),
                status.topology_generation,
                status.observed_generation
            ),
            (Some("pdx"), 3, Some(5))
        );
        assert_eq!(status.last_failover, stored.last_failover);
        assert_eq!(status.sites, stored.sites);
        let find = |type_: &str| {
            status
                .conditions
                .iter()
                .find(|condition| condition.type_ == type_)
                .cloned()
                .unwrap_or_else(|| panic!("{type_} in {:?}", status.conditions))
        };
        let spec_valid = find(bloodraven_core::engine::CONDITION_SPEC_VALID);
        assert_eq!(
            (spec_valid.status.as_str(), spec_valid.reason.as_str()),
            ("False", "SpecInvalid")
        );
        assert!(
            spec_valid
                .message
                .contains("spec.initialActiveSite: \"pdx\" is not one of spec.sites")
                && spec_valid
                    .message
                    .contains("spec.failureThreshold: must be at least 1"),
            "{}",
            spec_valid.message
        );
        assert_eq!(
            find(bloodraven_core::engine::CONDITION_READY),
            stored.conditions[0],
            "the other conditions as stored"
        );

        // A memory carried from a valid spec in this process is the one written.
        let status = status_while_invalid(Some(&valid), None, &decision.memory.conditions, Some(5));
        assert_eq!(
            (status.active_site.as_deref(), status.topology_generation),
            (Some("pdx"), 3)
        );
        assert_eq!(status.conditions, decision.memory.conditions);
    }

    /// docs/design/operator.md#mysqlfailovergroup: status carries activeSite,
    /// topologyGeneration, authority, conditions, sites[], cooldownUntil, lastFailover; loading
    /// it back (core's `from_status`) gives the same memory, except what core marks volatile
    /// (authority_issued_at, re-adopted from the sidecars).
    #[test]
    fn memory_round_trips_through_the_written_status() {
        let spec = spec();
        let mut memory = after_failover();
        memory.authority_issued_at = Some(at(0));
        let status = status_of(&memory, Some(4));
        assert_eq!(status.active_site.as_deref(), Some("pdx"));
        assert_eq!(status.topology_generation, 3);
        assert_eq!(
            status.authority.as_ref().map(|a| a.state),
            Some(AuthorityState::Valid)
        );
        assert_eq!(status.observed_generation, Some(4));
        assert_eq!(
            status
                .health
                .as_ref()
                .and_then(|h| h.replication_lag_seconds),
            Some(4)
        );
        let iad = status.sites.iter().find(|s| s.name == "iad").expect("iad");
        assert_eq!(iad.role.as_deref(), Some("fenced"));
        assert_eq!(iad.errant_gtid_set.as_deref(), Some("0-1-42"));

        let loaded = GroupMemory::from_status(&spec, Some(&status), at(5));
        let mut expected = memory.clone();
        expected.authority_issued_at = None;
        assert_eq!(loaded, expected);
    }

    /// docs/design/requirements.md R001.10: the cooldown is persisted twice; losing either copy
    /// alone keeps it. The annotation copy reaches core through the Observation; `decide` keeps
    /// the later.
    #[test]
    fn seed_001_losing_one_cooldown_copy_keeps_the_cooldown() {
        let spec = spec();
        let mut status = status_of(&after_failover(), None);
        let cooldown_after_poll = |status: Option<&MysqlFailoverGroupStatus>,
                                   copy: Option<Timestamp>| {
            let memory = GroupMemory::from_status(&spec, status, at(5));
            let decision = decide(&spec, &memory, &observation(annotations(copy)), at(5));
            let rewrites_annotation = decision.actions.iter().any(|action| {
                matches!(
                    action,
                    Action::Annotate(AnnotationChange::SetCooldownUntil(_))
                )
            });
            (decision.memory.cooldown_until, rewrites_annotation)
        };

        // Annotation lost, status copy kept: the annotation is rewritten.
        assert_eq!(
            cooldown_after_poll(Some(&status), None),
            (Some(at(30)), true)
        );

        // Status copy lost (e.g. a status rewrite), annotation kept.
        status.cooldown_until = None;
        assert_eq!(
            cooldown_after_poll(Some(&status), Some(at(30))).0,
            Some(at(30))
        );

        // No status at all (object recreated): the annotation alone still restores it.
        assert_eq!(cooldown_after_poll(None, Some(at(30))).0, Some(at(30)));

        // Both copies present and different: the later is in force.
        status.cooldown_until = Some(at(45));
        assert_eq!(
            cooldown_after_poll(Some(&status), Some(at(30))),
            (Some(at(45)), true)
        );

        // Both lost: CooldownViolated(restart+stateLost) is possible, by construction.
        status.cooldown_until = None;
        assert_eq!(cooldown_after_poll(Some(&status), None), (None, false));
    }

    /// A restart re-times detection: a site suspect before the restart is suspect after it
    /// (never failed early), and the streak start is forgotten.
    #[test]
    fn detection_restarts_its_streak_after_a_load() {
        let spec = spec();
        let mut memory = after_failover();
        if let Some(site) = memory.site_mut("iad") {
            site.detection = Detection::Failed;
            site.failing_since = Some(at(-8));
            site.failed_at = Some(at(-2));
        }
        let status = status_of(&memory, None);
        let loaded = GroupMemory::from_status(&spec, Some(&status), at(5));
        let iad = loaded.site("iad").expect("iad");
        assert_eq!(iad.detection, Detection::Suspect);
        assert_eq!((iad.failing_since, iad.failed_at), (None, None));
        assert_eq!(iad.consecutive_failures, 5);
    }

    /// docs/design/requirements.md R003.16: a Deferred planned failover keeps its admission
    /// (deferReason, retryTime, message) across a restart, its phase re-timed from the load
    /// (core's `from_status`); a finished request whose annotation is still present is not a
    /// new one: the next poll clears the annotation, and without it the request is marked
    /// cleared.
    #[test]
    fn planned_failover_round_trips_with_admission() {
        let spec = spec();
        let mut memory = GroupMemory::initial(&spec);
        memory.topology_generation = 1;
        memory.planned_failover = Some(PlannedFailover {
            target: "pdx".into(),
            from: "iad".into(),
            phase: PlannedFailoverPhase::Deferred,
            admission: Admission {
                defer_reason: Some(DeferReason::DeploymentHold),
                retry_time: Some(at(20)),
                message: Some("held by a1 (counter-app)".into()),
            },
            requested_at: at(1),
            phase_since: at(1),
            fenced_at: None,
            annotation_cleared: false,
        });
        let status = status_of(&memory, None);
        let loaded = GroupMemory::from_status(&spec, Some(&status), at(5));
        let mut expected = memory.planned_failover.clone();
        if let Some(planned) = expected.as_mut() {
            planned.phase_since = at(5);
        }
        assert_eq!(loaded.planned_failover, expected);

        let mut completed = status.clone();
        if let Some(planned) = completed.planned_failover.as_mut() {
            planned.phase = PlannedFailoverPhase::Completed;
        }
        let loaded = GroupMemory::from_status(&spec, Some(&completed), at(5));
        let with_request = GroupAnnotations {
            planned_failover: Some("pdx".into()),
            ..GroupAnnotations::default()
        };
        let decision = decide(&spec, &loaded, &observation(with_request), at(5));
        assert!(decision
            .actions
            .contains(&Action::Annotate(AnnotationChange::ClearPlannedFailover)));
        assert_eq!(
            decision.memory.planned_failover.map(|p| p.phase),
            Some(PlannedFailoverPhase::Completed),
            "not a new request"
        );
        let decision = decide(
            &spec,
            &loaded,
            &observation(GroupAnnotations::default()),
            at(5),
        );
        assert_eq!(
            decision
                .memory
                .planned_failover
                .map(|p| p.annotation_cleared),
            Some(true)
        );
    }

    #[test]
    fn annotations_are_read_from_the_group() {
        let mut group = MysqlFailoverGroup::new("g", spec());
        group.metadata.annotations = Some(
            [
                (
                    names::ANNOTATION_PLANNED_FAILOVER.to_string(),
                    " pdx ".to_string(),
                ),
                (
                    names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES.to_string(),
                    String::new(),
                ),
                (
                    names::ANNOTATION_COOLDOWN_UNTIL.to_string(),
                    at(30).to_string(),
                ),
                (names::ANNOTATION_REJOIN.to_string(), " iad ".to_string()),
            ]
            .into_iter()
            .collect(),
        );
        let read = annotations_of(&group, None);
        assert_eq!(read.planned_failover.as_deref(), Some("pdx"));
        assert_eq!(read.rejoin.as_deref(), Some("iad"));
        assert!(read.revoke_deployment_leases);
        assert_eq!(read.cooldown_until, Some(at(30)));
        // An unparsable cooldown copy counts as lost, never as "no cooldown forever".
        group.metadata.annotations = Some(
            [(
                names::ANNOTATION_COOLDOWN_UNTIL.to_string(),
                "soon".to_string(),
            )]
            .into_iter()
            .collect(),
        );
        assert_eq!(annotations_of(&group, None).cooldown_until, None);
        assert_eq!(annotations_of(&group, None).last_failover, None);
        assert_eq!(annotations_of(&group, None).rejoin, None);
    }

    /// Simulator seed 131 with `--status-revert`: the `last-failover` annotation is the copy of
    /// a promotion that survives a reverted status, so core must be handed what it wrote
    /// there (verified, once signed with the group's key), an older operator's value as
    /// nothing, and a value it cannot read as an error that says why.
    #[test]
    fn the_last_failover_annotation_reads_back_as_the_note_core_wrote() {
        let note = FailoverNote {
            kind: PromotionKind::Planned,
            from: "pdx".to_string(),
            to: "iad".to_string(),
            promoted_at: at(12),
            topology_generation: 3,
            restore: None,
        };
        let key = OperatorKey::from_seed(&[7; 32]).expect("key");
        let verifying = key.verifying_key();
        let mut group = MysqlFailoverGroup::new("g", spec());
        group.metadata.namespace = Some("ns".to_string());
        let annotate = |group: &mut MysqlFailoverGroup, value: String| {
            group.metadata.annotations = Some(
                [(names::ANNOTATION_LAST_FAILOVER.to_string(), value)]
                    .into_iter()
                    .collect(),
            );
        };
        let value = signed_last_failover(&key, "ns", "g", &note.to_string());
        annotate(&mut group, value);
        assert_eq!(
            annotations_of(&group, Some(&verifying)).last_failover,
            Some(Ok(NoteReading::verified(note.clone())))
        );
        // What an operator wrote before the note carried its generation: still on a group
        // after an upgrade, nothing to adopt and nothing to warn about.
        annotate(&mut group, format!("planned pdx->iad {}", at(12)));
        assert_eq!(annotations_of(&group, Some(&verifying)).last_failover, None);
        annotate(
            &mut group,
            format!("planned pdx->iad {} generation", at(12)),
        );
        let error = annotations_of(&group, Some(&verifying))
            .last_failover
            .expect("present")
            .expect_err("no generation number");
        assert_eq!(error.reason, "4 words, not 5 (or 9 for a restore)");
    }

    /// The hole an unsigned note left (README "Known wrong" until this test): anyone allowed
    /// to annotate the group could name a site at a higher generation and have it adopted.
    /// Only the value this operator signed for this group verifies; a hand-written one,
    /// one signed with another key, one edited after signing or copied from another group
    /// reads back rejected, with why.
    #[test]
    fn only_a_note_signed_with_the_group_key_for_this_group_verifies() {
        let key = OperatorKey::from_seed(&[7; 32]).expect("key");
        let verifying = key.verifying_key();
        let text = "emergency iad->pdx 2026-12-05T07:00:00Z generation 9";
        let signed = signed_last_failover(&key, "ns", "g", text);
        assert!(
            signed.starts_with(&format!("{text} signature ed25519:")),
            "{signed}"
        );
        let signature_of = |value: &str, namespace: &str, group: &str| {
            read_last_failover(value, namespace, group, Some(&verifying))
                .expect("present")
                .expect("well formed")
                .signature
        };
        assert_eq!(signature_of(&signed, "ns", "g"), NoteSignature::Verified);
        let rejected = |why: &str| NoteSignature::Rejected(why.to_string());
        assert_eq!(
            signature_of(text, "ns", "g"),
            rejected("the value carries no signature")
        );
        let bad = "signature does not verify against the group's operator key (written by someone else, or the text was changed after signing)";
        let other_key = OperatorKey::from_seed(&[8; 32]).expect("key");
        let forged = signed_last_failover(&other_key, "ns", "g", text);
        assert_eq!(signature_of(&forged, "ns", "g"), rejected(bad));
        let edited = signed.replace("generation 9", "generation 10");
        assert_eq!(signature_of(&edited, "ns", "g"), rejected(bad));
        let retargeted = signed.replace("iad->pdx", "iad->reader");
        assert_eq!(signature_of(&retargeted, "ns", "g"), rejected(bad));
        assert_eq!(signature_of(&signed, "ns", "other"), rejected(bad));
        assert_eq!(signature_of(&signed, "other", "g"), rejected(bad));
        let garbled = format!("{text} signature ed25519:not-hex");
        assert_eq!(
            signature_of(&garbled, "ns", "g"),
            rejected("signature \"ed25519:not-hex\" is not \"ed25519:<hex>\"")
        );
        let no_key = read_last_failover(&signed, "ns", "g", None)
            .expect("present")
            .expect("well formed");
        assert!(
            matches!(&no_key.signature, NoteSignature::Rejected(why) if why.contains("not loaded")),
            "{no_key:?}"
        );
    }

    /// Conditions are written from memory and restored by a load, so their transition times
    /// survive a restart and move only when the status changes.
    #[test]
    fn condition_transition_times_survive_a_restart_and_move_only_on_change() {
        let spec = spec();
        let memory = after_failover();
        let ready = |conditions: &[bloodraven_api::Condition]| {
            conditions
                .iter()
                .find(|c| c.type_ == CONDITION_READY)
                .cloned()
                .expect("ready")
        };
        let written = status_of(&memory, None);
        assert_eq!(ready(&written.conditions).last_transition_time, Some(at(1)));
        let loaded = GroupMemory::from_status(&spec, Some(&written), at(5));
        assert_eq!(loaded.conditions, memory.conditions);
        let unchanged = conditions(&loaded, &loaded.conditions, at(6));
        assert_eq!(ready(&unchanged).last_transition_time, Some(at(1)));
        let mut invalid = loaded.clone();
        invalid.authority = AuthorityValidity::Invalid(InvalidReason::Moving);
        let moved = conditions(&invalid, &loaded.conditions, at(7));
        assert_eq!(ready(&moved).status, "False");
        assert_eq!(ready(&moved).reason, "Moving");
        assert_eq!(ready(&moved).last_transition_time, Some(at(7)));
    }

    /// The board hands the deploy API the memory a poll returned, until the loop forgets it.
    #[test]
    fn board_publishes_and_forgets_memories() {
        let board = MemoryBoard::new();
        assert_eq!(board.get("ns", "g"), None);
        let memory = after_failover();
        board.publish("ns", "g", &memory);
        assert_eq!(board.get("ns", "g"), Some(memory));
        assert_eq!(board.get("other", "g"), None);
        board.forget("ns", "g");
        assert_eq!(board.get("ns", "g"), None);
    }
}
