//! The `bloodraven.shipstream.io/last-failover` annotation: the promotion last issued, written
//! on the group with every failover's promotion (`AnnotationChange::SetLastFailover`) beside
//! `status.lastFailover`, and with every restore's re-promotion beside `status.restore`; read
//! back into [`GroupAnnotations::last_failover`].
//!
//! Its value is `"<kind> <from>-><to> <RFC 3339> generation <N>"`: the kind (`emergency`,
//! `planned`, or `restore`, whose two sites are the one restored), the old and new active
//! sites, `promotedAt` (the `issuedAt` of the authority the promotion pushed) and the
//! topology generation it issued. A restore's note goes on with `" backup <request>
//! discarded <GTID set>"`: the backup and method as the restore annotation named them, and
//! what the restore discarded (`none`, or `unknown` when its fenced set was never read), so
//! that a status reverted to before the restore can rebuild its record: what it discarded
//! is off the history, and the sites still holding it are re-seeded
//! ([`RestoreNote`]). It is a persisted copy of the
//! promotion independent of the status: when the status is reverted to an older copy (or its
//! write failed while the annotation's succeeded), the annotation still names the newest
//! failover, and `decide` adopts it (`detection::adopt_noted_failover`).
//!
//! The operator signs the value with the group's operator key (the Ed25519 key whose
//! verifying half the sidecars hold): the written value is `"<note> signature
//! ed25519:<hex>"` ([`signed_value`]). Anyone allowed to annotate the group (as `kubectl
//! bloodraven` users are, for a planned failover) could otherwise write a note naming a site
//! at a higher generation and have it adopted as the active site without the GTID comparison
//! a failover makes. Core is pure and holds no key: the shell splits the value
//! ([`split_signature`]), verifies it, and hands `decide` a [`NoteReading`] saying whether it
//! verified; only a [`NoteSignature::Verified`] note is adopted.
//!
//! [`GroupAnnotations::last_failover`]: super::GroupAnnotations::last_failover

use std::fmt;

use bloodraven_api::{names, FailoverKind, RestoreSource};

use crate::time::Timestamp;

/// The annotation's expected shape, for error messages.
pub const FAILOVER_NOTE_FORMAT: &str =
    "<kind> <from>-><to> <RFC 3339> generation <N>[ backup <request> discarded <GTID set>]";

/// What issued the noted authority at a new generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromotionKind {
    /// An emergency failover.
    Emergency,
    /// A planned failover.
    Planned,
    /// A restore in place re-promoting the active site (`from` and `to` are that site): not a
    /// failover (no cooldown starts), but a new generation all the same, which a reverted
    /// status must not issue again (simulator seed 779 with every fault mode: a restore's
    /// generation 5 was lost with the status and re-issued to another site).
    Restore,
}

impl From<FailoverKind> for PromotionKind {
    fn from(kind: FailoverKind) -> Self {
        match kind {
            FailoverKind::Emergency => PromotionKind::Emergency,
            FailoverKind::Planned => PromotionKind::Planned,
        }
    }
}

/// A promotion as the `last-failover` annotation records it: a failover, or a restore's
/// re-promotion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverNote {
    /// Emergency, planned, or a restore's re-promotion.
    pub kind: PromotionKind,
    /// The old active site.
    pub from: String,
    /// The site the authority was issued to.
    pub to: String,
    /// When the authority was issued (`lastFailover.promotedAt`, the authority's `issuedAt`).
    pub promoted_at: Timestamp,
    /// The topology generation the promotion issued.
    pub topology_generation: u64,
    /// A restore's re-promotion: what it restored and discarded (`None` for a failover, and
    /// for a restore noted by an operator from before this was written).
    pub restore: Option<RestoreNote>,
}

/// What a restore's note records besides the re-promotion: enough to rebuild its
/// `status.restore` after the status lost it (simulator seed 3085 with every fault mode: the
/// status reverted to before a restore that was still re-seeding the reader; the reader's
/// copy of what the restore discarded then read as transactions the restored site lacks, and
/// no authority was issued again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreNote {
    /// The backup and method, as the restore annotation named them.
    pub source: RestoreSource,
    /// The GTID set the restore discarded (its text); `None` when unknown (the site's fenced
    /// set was never read).
    pub discarded: Option<String>,
}

/// The note's word for a discarded set that is unknown.
const DISCARDED_UNKNOWN: &str = "unknown";
/// The note's word for an empty discarded set.
const DISCARDED_NONE: &str = "none";

/// The word between the note and its signature in a signed value.
pub const SIGNATURE_WORD: &str = "signature";

/// The value the operator writes: the note's `text`, then [`SIGNATURE_WORD`] and `signature`
/// (`ed25519:<hex>`, made by the shell over `text`).
pub fn signed_value(text: &str, signature: &str) -> String {
    format!("{text} {SIGNATURE_WORD} {signature}")
}

/// An annotation value split into the note's text and its signature, if it carries one
/// (pure: the shell verifies the signature over the text).
pub fn split_signature(value: &str) -> (&str, Option<&str>) {
    let trimmed = value.trim();
    if let Some((rest, signature)) = trimmed.rsplit_once(char::is_whitespace) {
        if let Some(text) = rest.trim_end().strip_suffix(SIGNATURE_WORD) {
            if text.is_empty() || text.ends_with(char::is_whitespace) {
                return (text.trim(), Some(signature));
            }
        }
    }
    (trimmed, None)
}

/// What the shell found of a note's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoteSignature {
    /// It verifies with the group's operator key over the note's text: an operator holding
    /// the group's key wrote it.
    Verified,
    /// Absent, malformed, made with another key, or over other text: anyone allowed to
    /// annotate the group could have written it. Why, a lowercase fragment.
    Rejected(String),
}

/// A well-formed note and what its signature showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteReading {
    /// The note.
    pub note: FailoverNote,
    /// Whether the operator's key signed it.
    pub signature: NoteSignature,
}

impl NoteReading {
    /// A note whose signature verified.
    pub fn verified(note: FailoverNote) -> Self {
        Self {
            note,
            signature: NoteSignature::Verified,
        }
    }
}

/// A `last-failover` annotation value that is not [`FAILOVER_NOTE_FORMAT`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "read annotation {annotation} = {value:?}: {reason} (expected \"{format}\")",
    annotation = names::ANNOTATION_LAST_FAILOVER,
    format = FAILOVER_NOTE_FORMAT
)]
pub struct FailoverNoteError {
    /// The annotation's text.
    pub value: String,
    /// What is wrong with it (a lowercase fragment).
    pub reason: String,
}

/// The annotation's word for a failover kind (also how events name it).
pub(in crate::engine) fn kind_name(kind: FailoverKind) -> &'static str {
    promotion_name(kind.into())
}

/// The annotation's word for a promotion kind.
pub(in crate::engine) fn promotion_name(kind: PromotionKind) -> &'static str {
    match kind {
        PromotionKind::Emergency => "emergency",
        PromotionKind::Planned => "planned",
        PromotionKind::Restore => "restore",
    }
}

impl FailoverNote {
    /// How events name what the note records: `the planned failover iad->pdx`, `the restore
    /// re-promotion of iad`.
    pub fn describe(&self) -> String {
        match self.kind {
            PromotionKind::Restore => format!("the restore re-promotion of {}", self.to),
            kind => format!(
                "the {} failover {}->{}",
                promotion_name(kind),
                self.from,
                self.to
            ),
        }
    }
}

impl FailoverNote {
    /// Reads the annotation's value as an observation carries it. `None` for the value an
    /// operator wrote before the note carried its generation (`<kind> <from>-><to> <RFC
    /// 3339>`): it stays on a group after an upgrade until the next promotion rewrites it, and
    /// names no generation, so there is nothing to adopt and nothing wrong to report. Anything
    /// else is [`FailoverNote::parse`]d.
    pub fn read(value: &str) -> Option<Result<FailoverNote, FailoverNoteError>> {
        (!is_pre_generation(value)).then(|| FailoverNote::parse(value))
    }

    /// Parses an annotation value written by [`FailoverNote`]'s `Display`.
    pub fn parse(value: &str) -> Result<FailoverNote, FailoverNoteError> {
        let error = |reason: String| FailoverNoteError {
            value: value.to_string(),
            reason,
        };
        let words: Vec<&str> = value.split_whitespace().collect();
        let (kind, sites, promoted_at, generation_word, generation, restore) = match words[..] {
            [kind, sites, promoted_at, generation_word, generation] => {
                (kind, sites, promoted_at, generation_word, generation, None)
            }
            [kind, sites, promoted_at, generation_word, generation, backup_word, request, discarded_word, discarded] =>
            {
                if kind != "restore" {
                    return Err(error(format!(
                        "a {kind:?} note carries no backup (9 words are a restore's)"
                    )));
                }
                (
                    kind,
                    sites,
                    promoted_at,
                    generation_word,
                    generation,
                    Some(
                        RestoreNote::parse(backup_word, request, discarded_word, discarded)
                            .map_err(error)?,
                    ),
                )
            }
            _ => {
                return Err(error(format!(
                    "{} words, not 5 (or 9 for a restore)",
                    words.len()
                )))
            }
        };
        let kind = match kind {
            "emergency" => PromotionKind::Emergency,
            "planned" => PromotionKind::Planned,
            "restore" => PromotionKind::Restore,
            other => return Err(error(format!("unknown failover kind {other:?}"))),
        };
        let Some((from, to)) = sites
            .split_once("->")
            .filter(|(from, to)| !from.is_empty() && !to.is_empty())
        else {
            return Err(error(format!("{sites:?} is not <from>-><to>")));
        };
        let promoted_at: Timestamp = promoted_at
            .parse()
            .map_err(|e| error(format!("promotion time: {e}")))?;
        if generation_word != "generation" {
            return Err(error(format!(
                "{generation_word:?} where \"generation\" belongs"
            )));
        }
        let topology_generation: u64 = generation
            .parse()
            .ok()
            .filter(|generation| *generation > 0)
            .ok_or_else(|| {
                error(format!(
                    "topology generation {generation:?} is not a positive integer"
                ))
            })?;
        Ok(FailoverNote {
            kind,
            from: from.to_string(),
            to: to.to_string(),
            promoted_at,
            topology_generation,
            restore,
        })
    }
}

impl RestoreNote {
    /// Reads the four words after a restore's generation.
    fn parse(
        backup_word: &str,
        request: &str,
        discarded_word: &str,
        discarded: &str,
    ) -> Result<RestoreNote, String> {
        if backup_word != "backup" {
            return Err(format!("{backup_word:?} where \"backup\" belongs"));
        }
        if discarded_word != "discarded" {
            return Err(format!("{discarded_word:?} where \"discarded\" belongs"));
        }
        let source = RestoreSource::parse(request)?;
        let discarded = match discarded {
            DISCARDED_UNKNOWN => None,
            DISCARDED_NONE => Some(String::new()),
            set => Some(set.to_string()),
        };
        Ok(RestoreNote { source, discarded })
    }
}

impl fmt::Display for RestoreNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let discarded = match self.discarded.as_deref() {
            None => DISCARDED_UNKNOWN,
            Some("") => DISCARDED_NONE,
            Some(set) => set,
        };
        write!(
            f,
            "backup {} discarded {discarded}",
            self.source.annotation_value()
        )
    }
}

/// Whether `value` is the annotation as operators wrote it before the generation was
/// recorded: `<kind> <from>-><to> <RFC 3339>`, every part well-formed.
fn is_pre_generation(value: &str) -> bool {
    let words: Vec<&str> = value.split_whitespace().collect();
    let [kind, sites, promoted_at] = words[..] else {
        return false;
    };
    matches!(kind, "emergency" | "planned")
        && sites
            .split_once("->")
            .is_some_and(|(from, to)| !from.is_empty() && !to.is_empty())
        && promoted_at.parse::<Timestamp>().is_ok()
}

impl fmt::Display for FailoverNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}->{} {} generation {}",
            promotion_name(self.kind),
            self.from,
            self.to,
            self.promoted_at,
            self.topology_generation
        )?;
        match &self.restore {
            Some(restore) => write!(f, " {restore}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note() -> FailoverNote {
        FailoverNote {
            kind: PromotionKind::Planned,
            from: "pdx".to_string(),
            to: "iad".to_string(),
            promoted_at: Timestamp::from_unix_millis(1_767_225_769_476),
            topology_generation: 3,
            restore: None,
        }
    }

    #[test]
    fn a_signed_value_splits_into_the_note_and_its_signature() {
        let text = note().to_string();
        let value = signed_value(&text, "ed25519:00ff");
        assert_eq!(value, format!("{text} signature ed25519:00ff"));
        assert_eq!(
            split_signature(&value),
            (text.as_str(), Some("ed25519:00ff"))
        );
        assert_eq!(split_signature(&text), (text.as_str(), None));
        // The note is read from the text alone; a signature never makes it parse differently.
        let (unsigned_text, _) = split_signature(&value);
        assert_eq!(FailoverNote::read(unsigned_text), Some(Ok(note())));
        // A value ending in the word with nothing after it carries no signature.
        let dangling = format!("{text} signature");
        assert_eq!(split_signature(&dangling), (dangling.as_str(), None));
    }

    #[test]
    fn written_value_reads_back() {
        let text = note().to_string();
        assert_eq!(
            text,
            "planned pdx->iad 2026-01-01T00:02:49.476Z generation 3"
        );
        assert_eq!(FailoverNote::parse(&text), Ok(note()));
        let emergency = FailoverNote {
            kind: PromotionKind::Emergency,
            ..note()
        };
        assert_eq!(FailoverNote::parse(&emergency.to_string()), Ok(emergency));
    }

    #[test]
    fn a_restore_note_carries_its_backup_and_what_it_discarded() {
        let restore = |method, discarded: Option<&str>| FailoverNote {
            kind: PromotionKind::Restore,
            from: "pdx".to_string(),
            to: "pdx".to_string(),
            restore: Some(RestoreNote {
                source: RestoreSource {
                    backup: "b2".to_string(),
                    method,
                },
                discarded: discarded.map(str::to_string),
            }),
            ..note()
        };
        use bloodraven_api::RestoreMethod::{Logical, Physical};
        for (note, text) in [
            (
                restore(Physical, Some("0-2-7478..7554")),
                "restore pdx->pdx 2026-01-01T00:02:49.476Z generation 3 backup b2,method=physical discarded 0-2-7478..7554",
            ),
            (
                restore(Logical, Some("")),
                "restore pdx->pdx 2026-01-01T00:02:49.476Z generation 3 backup b2 discarded none",
            ),
            (
                restore(Logical, None),
                "restore pdx->pdx 2026-01-01T00:02:49.476Z generation 3 backup b2 discarded unknown",
            ),
        ] {
            assert_eq!(note.to_string(), text);
            assert_eq!(FailoverNote::parse(text), Ok(note));
        }
        // A restore noted by an operator from before the backup was written still reads.
        let bare = "restore pdx->pdx 2026-01-01T00:02:49.476Z generation 3";
        assert_eq!(FailoverNote::parse(bare).map(|n| n.restore), Ok(None));
        for (value, reason) in [
            (
                "planned pdx->iad 2026-01-01T00:02:49.476Z generation 3 backup b2 discarded none",
                "a \"planned\" note carries no backup (9 words are a restore's)",
            ),
            (
                "restore pdx->pdx 2026-01-01T00:02:49.476Z generation 3 from b2 discarded none",
                "\"from\" where \"backup\" belongs",
            ),
            (
                "restore pdx->pdx 2026-01-01T00:02:49.476Z generation 3 backup b2 lost none",
                "\"lost\" where \"discarded\" belongs",
            ),
            (
                "restore pdx->pdx 2026-01-01T00:02:49.476Z generation 3 backup b2,method=fast discarded none",
                "restore method \"fast\" is unknown; use logical or physical",
            ),
        ] {
            assert_eq!(FailoverNote::parse(value).expect_err(value).reason, reason);
        }
    }

    #[test]
    fn a_value_from_before_the_generation_reads_as_no_note() {
        // An older operator's value, still on the group after an upgrade: no generation, so
        // nothing to adopt, and no warning on every poll until the next promotion.
        assert_eq!(
            FailoverNote::read("planned pdx->iad 2026-01-01T00:02:49.476Z"),
            None
        );
        assert_eq!(
            FailoverNote::read("emergency iad->pdx 2026-01-01T00:02:49.476Z"),
            None
        );
        // Only a well-formed old value: a malformed three-word one is still reported.
        for value in [
            "manual pdx->iad 2026-01-01T00:02:49.476Z",
            "planned pdx-iad 2026-01-01T00:02:49.476Z",
            "planned pdx->iad yesterday",
        ] {
            assert!(matches!(FailoverNote::read(value), Some(Err(_))), "{value}");
        }
        assert_eq!(FailoverNote::read(&note().to_string()), Some(Ok(note())));
    }

    #[test]
    fn malformed_values_name_what_is_wrong() {
        for (value, reason) in [
            // The value before the generation was recorded.
            (
                "planned pdx->iad 2026-01-01T00:02:49.476Z",
                "3 words, not 5 (or 9 for a restore)",
            ),
            (
                "manual pdx->iad 2026-01-01T00:02:49.476Z generation 3",
                "unknown failover kind \"manual\"",
            ),
            (
                "planned pdx-iad 2026-01-01T00:02:49.476Z generation 3",
                "\"pdx-iad\" is not <from>-><to>",
            ),
            (
                "planned ->iad 2026-01-01T00:02:49.476Z generation 3",
                "\"->iad\" is not <from>-><to>",
            ),
            (
                "planned pdx->iad 2026-01-01T00:02:49.476Z gen 3",
                "\"gen\" where \"generation\" belongs",
            ),
            (
                "planned pdx->iad 2026-01-01T00:02:49.476Z generation 0",
                "topology generation \"0\" is not a positive integer",
            ),
        ] {
            let error = FailoverNote::parse(value).expect_err(value);
            assert_eq!(error.reason, reason, "{value}");
            assert!(
                error
                    .to_string()
                    .starts_with("read annotation bloodraven.shipstream.io/last-failover = "),
                "{error}"
            );
        }
        let error =
            FailoverNote::parse("planned pdx->iad yesterday generation 3").expect_err("time");
        assert!(
            error.reason.starts_with("promotion time: "),
            "{}",
            error.reason
        );
    }
}
