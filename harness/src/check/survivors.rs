//! What the survivors held when the primary died, against what was lost (issue 34 item 2: RPO
//! from the harness's own evidence; docs/design/requirements.md R001.8: the RPO is fixed at the
//! instant the primary died; docs/design/operator.md#emergency-failover: the candidate is the
//! most advanced site, caught up from a survivor that holds more, and its relay log drained).
//!
//! The evidence is the automatic seal ([`Op::SurvivorsHeld`], recorded by process `seal` right
//! after a fault took the active site's primary away): each surviving site's executed and
//! retrieved (relay log) GTID sets, read by the harness itself. Each emergency failover away
//! from a sealed site is judged against the latest seal of that site before its promotion. The
//! writes judged are those the dead site acknowledged and that were invoked before the seal;
//! one is lost when the active site's final read (after heal) lacks it. Findings:
//!
//! - a lost write that a survivor held, executed or retrieved into its relay log: a dropped
//!   relay log or an avoidable loss;
//! - the promoted site held fewer of those writes than another survivor and some that only the
//!   other held are lost: a less caught-up survivor was promoted, or the candidate was not
//!   caught up from the one holding more (a candidate that was caught up loses none of them, so
//!   holding fewer at the seal is no finding by itself);
//! - missing evidence: a survivor the seal could not read (named with why), a set that does not
//!   parse, a seal that never completed, when a failover needs judging.
//!
//! The operator's `lostTransactions`/`lostGtidSet` against the harness's sets is the lost-set
//! checker's ([`super::lost_set`]); the `seal-rpo` step's exact RPO is the rpo checker's. A
//! history with no seal is judged by neither rule (its summary says so).

use std::collections::{BTreeMap, BTreeSet};

use bloodraven_mysql::{Gtid, GtidSet};

use super::gtid::{parse_gtid, parse_gtid_set};
use super::observed::observed_failovers;
use super::verdict::Verdict;
use crate::history::event::{EventType, FailoverKind, FailoverRecord, HeldGtids, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// The checker's name in reports.
pub const NAME: &str = "survivors";

/// How many write ids a finding lists.
const IDS_LISTED_MAX: usize = 20;

/// One automatic seal: when it was invoked, and what its completion recorded.
struct Seal<'a> {
    at_ns: u64,
    trigger: &'a str,
    active: Site,
    /// The completion's outcome (`None`: it never completed).
    outcome: Option<EventType>,
    sites: Option<&'a BTreeMap<Site, HeldGtids>>,
    unread: Option<&'a BTreeMap<Site, String>>,
}

/// An acknowledged write of the dead site with its parsed GTID.
struct Acked {
    id: u64,
    gtid: Gtid,
    start_ns: u64,
}

/// What one survivor held, parsed.
struct Held {
    executed: GtidSet,
    retrieved: GtidSet,
}

impl Held {
    /// Whether the survivor held `gtid`, and where: applied, or only in its relay log.
    fn place(&self, gtid: &Gtid) -> Option<&'static str> {
        if self.executed.contains_gtid(gtid) {
            Some("executed")
        } else if self.retrieved.contains_gtid(gtid) {
            Some("in its relay log only")
        } else {
            None
        }
    }
}

fn seals(history: &History) -> Result<Vec<Seal<'_>>, String> {
    Ok(history
        .operations()?
        .into_iter()
        .filter_map(|operation| {
            let Op::SurvivorsHeld {
                trigger, active, ..
            } = &operation.invoke.op
            else {
                return None;
            };
            let completed = operation.completion.and_then(|event| match &event.op {
                Op::SurvivorsHeld { sites, unread, .. } => Some((event.kind, sites, unread)),
                _ => None,
            });
            Some(Seal {
                at_ns: operation.invoke.mono_ns,
                trigger,
                active: *active,
                outcome: completed.map(|(kind, _, _)| kind),
                sites: completed.map(|(_, sites, _)| sites),
                unread: completed.map(|(_, _, unread)| unread),
            })
        })
        .collect())
}

/// The final read of the active site after heal: its ids, or why there is none.
fn final_on_active(history: &History) -> Result<(Site, BTreeSet<u64>), String> {
    let active = history
        .last_active_site()
        .ok_or("no group status was observed, so the active site after heal is unknown")?;
    let sites = history
        .events
        .iter()
        .rev()
        .find_map(|event| match &event.op {
            Op::FinalState { sites, .. } if event.kind == EventType::Ok => Some(sites),
            _ => None,
        })
        .ok_or("no final state was read")?;
    let ids = sites.get(&active).ok_or(format!(
        "the active site {active} could not be read for the final state"
    ))?;
    Ok((active, ids.iter().copied().collect()))
}

/// The acknowledged writes of `site` invoked before `before_ns`, by id; a GTID that does not
/// parse is a finding (the write cannot be looked up), and so is a write lost after heal
/// (not in `on_active`) whose GTID was never recorded. A write that survived needs none: its
/// acknowledgement arrived and the follow-up read of `@@last_gtid` did not (a power cut between
/// the two, s011), and what survived is no loss to judge; it is left out of the held counts.
fn acknowledged_by(
    history: &History,
    site: Site,
    before_ns: u64,
    on_active: &BTreeSet<u64>,
    findings: &mut Vec<String>,
) -> Result<Vec<Acked>, String> {
    let mut writes = Vec::new();
    for operation in history.operations()? {
        let (Op::Write { id, .. }, Some(completion)) = (&operation.invoke.op, operation.completion)
        else {
            continue;
        };
        let Op::Write {
            site: Some(by),
            gtid,
            ..
        } = &completion.op
        else {
            continue;
        };
        if completion.kind != EventType::Ok || *by != site || operation.invoke.mono_ns >= before_ns
        {
            continue;
        }
        match gtid.as_deref().map(parse_gtid) {
            Some(Ok(gtid)) => writes.push(Acked {
                id: *id,
                gtid,
                start_ns: operation.invoke.mono_ns,
            }),
            Some(Err(error)) => findings.push(format!(
                "write {id} acknowledged by {site}: its GTID does not parse ({error}), so whether a survivor held it is unknown"
            )),
            None if on_active.contains(id) => {}
            None => findings.push(format!(
                "write {id} acknowledged by {site} and lost after heal has no GTID recorded, so whether a survivor held it is unknown"
            )),
        }
    }
    Ok(writes)
}

/// The index of the latest seal of `record.from` invoked before its promotion (its start when
/// the promotion time is not known) and after `since_ns` (the previous failover's promotion: an
/// older seal is of an earlier epoch of that site).
fn seal_of(
    history: &History,
    seals: &[Seal<'_>],
    record: &FailoverRecord,
    since_ns: u64,
) -> Option<usize> {
    let promoted_ns = history.wall_to_mono_ns(promoted_at(record))?;
    seals
        .iter()
        .enumerate()
        .filter(|(_, seal)| {
            seal.active == record.from && seal.at_ns < promoted_ns && seal.at_ns >= since_ns
        })
        .max_by_key(|(_, seal)| seal.at_ns)
        .map(|(index, _)| index)
}

fn promoted_at(record: &FailoverRecord) -> jiff::Timestamp {
    record.promoted_at.unwrap_or(record.started_at)
}

/// The survivors' sets of `seal`, parsed; a survivor left out, a set that does not parse, or a
/// seal that never completed is missing evidence (a finding: the failover needs judging).
fn held_sets(seal: &Seal<'_>, name: &str, findings: &mut Vec<String>) -> BTreeMap<Site, Held> {
    let (Some(sites), Some(unread)) = (seal.sites, seal.unread) else {
        findings.push(format!(
            "{name}: missing evidence: the seal of {} (after `{}`) never completed, so what the survivors held is unknown",
            seal.active, seal.trigger
        ));
        return BTreeMap::new();
    };
    for (site, why) in unread {
        findings.push(format!(
            "{name}: missing evidence: {site} could not be read when {}'s primary was taken away ({why}), so what it held is unknown",
            seal.active
        ));
    }
    if unread.is_empty() && seal.outcome != Some(EventType::Ok) {
        findings.push(format!(
            "{name}: missing evidence: the seal of {} failed and names no site left out",
            seal.active
        ));
    }
    let mut parsed = BTreeMap::new();
    for (site, held) in sites {
        let sets = parse_gtid_set(&held.executed)
            .and_then(|executed| Ok((executed, parse_gtid_set(&held.retrieved)?)));
        match sets {
            Ok((executed, retrieved)) => {
                parsed.insert(*site, Held { executed, retrieved });
            }
            Err(error) => findings.push(format!(
                "{name}: missing evidence: what {site} held does not parse ({error}; executed `{}`, retrieved `{}`)",
                held.executed, held.retrieved
            )),
        }
    }
    parsed
}

/// Finding (a): the lost writes each survivor held.
fn held_but_lost(
    name: &str,
    died: Site,
    held: &BTreeMap<Site, Held>,
    lost: &[&Acked],
    findings: &mut Vec<String>,
) {
    for (site, sets) in held {
        let found: Vec<String> = lost
            .iter()
            .filter_map(|write| {
                let place = sets.place(&write.gtid)?;
                Some(format!("{} ({}, {place})", write.id, write.gtid))
            })
            .collect();
        if found.is_empty() {
            continue;
        }
        findings.push(format!(
            "{name}: {} write{} acknowledged by {died} and lost after heal {} held by {site} when {died}'s primary was taken away (a dropped relay log or an avoidable loss): {}",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            if found.len() == 1 { "was" } else { "were" },
            listed(&found)
        ));
    }
}

/// Finding (b): the promoted site held fewer than another survivor, and writes only the other
/// held are lost.
fn promoted_held_fewer(
    name: &str,
    record: &FailoverRecord,
    held: &BTreeMap<Site, Held>,
    writes: &[Acked],
    lost: &BTreeSet<u64>,
    findings: &mut Vec<String>,
) {
    let Some(promoted) = held.get(&record.to) else {
        return;
    };
    let held_ids = |sets: &Held| -> BTreeSet<u64> {
        writes
            .iter()
            .filter(|write| sets.place(&write.gtid).is_some())
            .map(|write| write.id)
            .collect()
    };
    let by_promoted = held_ids(promoted);
    for (site, sets) in held.iter().filter(|(site, _)| **site != record.to) {
        let by_other = held_ids(sets);
        if by_other.len() <= by_promoted.len() {
            continue;
        }
        let only_other_lost: Vec<String> = by_other
            .difference(&by_promoted)
            .filter(|id| lost.contains(id))
            .map(u64::to_string)
            .collect();
        if only_other_lost.is_empty() {
            continue;
        }
        findings.push(format!(
            "{name}: the promoted site {} held {} of {}'s acknowledged writes when its primary was taken away, {site} held {}, and {} that only {site} held are lost (an avoidable loss: a less caught-up survivor was promoted, or it was not caught up from {site}): {}",
            record.to,
            by_promoted.len(),
            record.from,
            by_other.len(),
            only_other_lost.len(),
            listed(&only_other_lost)
        ));
    }
}

/// The summary line of one judged failover, and its findings.
fn judge(
    history: &History,
    seal: &Seal<'_>,
    record: &FailoverRecord,
    on_active: &BTreeSet<u64>,
    findings: &mut Vec<String>,
) -> Result<String, String> {
    let name = format!("emergency failover {} -> {}", record.from, record.to);
    let held = held_sets(seal, &name, findings);
    let writes = acknowledged_by(history, record.from, seal.at_ns, on_active, findings)?;
    let lost: Vec<&Acked> = writes
        .iter()
        .filter(|write| !on_active.contains(&write.id))
        .collect();
    held_but_lost(&name, record.from, &held, &lost, findings);
    let lost_ids: BTreeSet<u64> = lost.iter().map(|write| write.id).collect();
    promoted_held_fewer(&name, record, &held, &writes, &lost_ids, findings);
    let counts: Vec<String> = held
        .iter()
        .map(|(site, sets)| {
            let places: Vec<&str> = writes
                .iter()
                .filter_map(|write| sets.place(&write.gtid))
                .collect();
            let relay_only = places.iter().filter(|place| **place != "executed").count();
            if relay_only == 0 {
                format!("{site} held {}", places.len())
            } else {
                format!(
                    "{site} held {} ({relay_only} in its relay log only)",
                    places.len()
                )
            }
        })
        .collect();
    let last_ns = writes.iter().map(|write| write.start_ns).max().unwrap_or(0);
    Ok(format!(
        "{name}: sealed after `{}` ({} ms in): of {} acknowledged writes of {} invoked before it (last at {} ms), {}; {} lost after heal",
        seal.trigger,
        seal.at_ns / 1_000_000,
        writes.len(),
        record.from,
        last_ns / 1_000_000,
        if counts.is_empty() { "no survivor read".to_owned() } else { counts.join(", ") },
        lost.len()
    ))
}

/// Judges every emergency failover that has a seal of its old primary's site.
pub fn check_survivors(history: &History) -> Verdict {
    let seals = match seals(history) {
        Ok(seals) => seals,
        Err(malformed) => {
            return Verdict::from_findings(
                NAME,
                String::new(),
                vec![format!("malformed history: {malformed}")],
            )
        }
    };
    if seals.is_empty() {
        return Verdict::from_findings(
            NAME,
            "not judged: no automatic seal of what the survivors held in this history".to_owned(),
            Vec::new(),
        );
    }
    let failovers = observed_failovers(history);
    let mut findings = Vec::new();
    let mut lines = Vec::new();
    let mut used = BTreeSet::new();
    let mut since_ns = 0;
    for record in &failovers {
        let epoch_start_ns = since_ns;
        since_ns = history
            .wall_to_mono_ns(promoted_at(record))
            .unwrap_or(since_ns);
        if record.kind != FailoverKind::Emergency {
            continue;
        }
        let name = format!("emergency failover {} -> {}", record.from, record.to);
        let Some(index) = seal_of(history, &seals, record, epoch_start_ns) else {
            lines.push(format!(
                "{name}: not judged: no seal of {} before its promotion",
                record.from
            ));
            continue;
        };
        used.insert(index);
        let line = final_on_active(history).and_then(|(_, on_active)| {
            judge(history, &seals[index], record, &on_active, &mut findings)
        });
        match line {
            Ok(line) => lines.push(line),
            Err(why) => lines.push(format!("{name}: not judged: {why}")),
        }
    }
    let unjudged: Vec<&Seal<'_>> = seals
        .iter()
        .enumerate()
        .filter(|(index, _)| !used.contains(index))
        .map(|(_, seal)| seal)
        .collect();
    if !unjudged.is_empty() {
        lines.push(format!(
            "{} seal{} of {} followed by no emergency failover judged from {}",
            unjudged.len(),
            if unjudged.len() == 1 { "" } else { "s" },
            names(unjudged.iter().map(|seal| seal.active)),
            if unjudged.len() == 1 { "it" } else { "them" }
        ));
    }
    Verdict::from_findings(NAME, lines.join("; "), findings)
}

fn names(sites: impl Iterator<Item = Site>) -> String {
    let sites: BTreeSet<Site> = sites.collect();
    sites
        .iter()
        .map(|site| site.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn listed(items: &[String]) -> String {
    let mut shown: Vec<String> = items.iter().take(IDS_LISTED_MAX).cloned().collect();
    if items.len() > IDS_LISTED_MAX {
        shown.push(format!("... ({} in all)", items.len()));
    }
    shown.join(", ")
}
