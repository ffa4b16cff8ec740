//! The operator's `lostGtidSet` against the harness's own reads: after the final read the
//! harness reads every site's executed GTID set itself ([`Op::GtidState`]); for the last
//! emergency failover whose new primary is still the active site and whose old primary can be
//! read, the transactions lost are exactly those the old primary executed that the active site
//! did not (set subtraction, not the operator's history walk). The operator says it agrees
//! exactly once `exact` (docs/design/operator.md): a set that names a transaction that was not
//! lost, or misses one that was, and a `lostTransactions` that is not that set's size, are
//! findings in either direction. The rpo checker judges the workload's writes one by one;
//! this one also sees the other writers (the counter app) the workload cannot name.
//!
//! An old primary rejoined since (its errant transactions archived, then re-seeded from the
//! active site) no longer executes what the failover lost: the GTIDs the harness itself read
//! back from its verified archives ([`Op::ArchiveRead`]) count as what it held.
//!
//! Missing evidence is a finding too: a live run whose GTID read failed while an exact
//! emergency failover needs judging. What it does not judge, it says in its summary.

use std::collections::BTreeMap;

use bloodraven_mysql::GtidSet;

use super::gtid::{parse_gtid, parse_gtid_set};
use super::observed::observed_failovers;
use super::verdict::Verdict;
use crate::history::event::{EventType, FailoverKind, FailoverRecord, Op};
use crate::history::store::History;
use crate::scenario::model::Site;

/// The checker's name in reports.
pub const NAME: &str = "lost-set";

/// The last completed [`Op::GtidState`] of the history, with whether its read succeeded
/// (`Ok`) or failed (`Fail`); `None` when none was read or the cluster has no MySQL to read
/// (`Info`).
fn gtid_state(history: &History) -> Option<(bool, &Op)> {
    history
        .events
        .iter()
        .rev()
        .find_map(|event| match &event.op {
            op @ Op::GtidState { .. } if matches!(event.kind, EventType::Ok | EventType::Fail) => {
                Some((event.kind == EventType::Ok, op))
            }
            _ => None,
        })
}

/// Judges the operator's `lostGtidSet` and `lostTransactions` of the last emergency failover
/// against the sets the harness read.
pub fn check_lost_set(history: &History) -> Verdict {
    let Some((read, state)) = gtid_state(history) else {
        return Verdict::from_findings(
            NAME,
            "not judged: this backend reads no GTID sets".to_owned(),
            Vec::new(),
        );
    };
    let Op::GtidState {
        sites,
        last_failover,
        active_site,
        error,
    } = state
    else {
        return Verdict::from_findings(NAME, String::new(), Vec::new());
    };
    let failover = last_failover
        .as_ref()
        .filter(|record| record.kind == FailoverKind::Emergency);
    if !read {
        // Without the sets nothing about an emergency failover's loss can be compared.
        let any_emergency = observed_failovers(history)
            .iter()
            .any(|record| record.kind == FailoverKind::Emergency);
        let findings = if any_emergency {
            vec![format!(
                "missing evidence: the GTID sets could not be read after the final state ({}), so the emergency failover's lostGtidSet is not compared with the harness's reads",
                error.as_deref().unwrap_or("no reason given")
            )]
        } else {
            Vec::new()
        };
        return Verdict::from_findings(NAME, "no GTID sets read".to_owned(), findings);
    }
    let Some(record) = failover else {
        return Verdict::from_findings(
            NAME,
            "no emergency failover to judge".to_owned(),
            Vec::new(),
        );
    };
    let archived = archived_gtids(history, record);
    judge(record, *active_site, sites, &archived)
}

/// The GTIDs of the errant-binlog files of `record.from`'s archives that the harness read back
/// and verified (a manifest, no problem), written after the failover started: what a rejoin
/// kept of the old primary's history before it re-seeded it.
fn archived_gtids<'h>(history: &'h History, record: &FailoverRecord) -> Vec<&'h str> {
    history
        .events
        .iter()
        .filter(|event| event.kind == EventType::Ok)
        .filter_map(|event| match &event.op {
            Op::ArchiveRead { site, archives, .. } if *site == record.from => Some(archives),
            _ => None,
        })
        .flatten()
        .filter(|archive| archive.manifest && archive.problems.is_empty())
        .filter(|archive| {
            archive
                .created_at
                .is_some_and(|created| created >= record.started_at)
        })
        .flat_map(|archive| archive.binlog_gtids.iter().map(String::as_str))
        .collect()
}

/// The verdict on one emergency failover `record` given the sets read.
pub fn judge(
    record: &FailoverRecord,
    active: Option<Site>,
    sites: &BTreeMap<Site, String>,
    archived: &[&str],
) -> Verdict {
    let name = format!("emergency failover {} -> {}", record.from, record.to);
    let compared = lost_by_reads(record, active, sites, archived, &name)
        .and_then(|lost| Ok((reported_set(record, sites, &lost, &name)?, lost)));
    let (reported, lost) = match compared {
        Ok(sets) => sets,
        Err(verdict) => return verdict,
    };
    let mut findings = Vec::new();
    let over = reported.subtract(&lost);
    let under = lost.subtract(&reported);
    if !over.is_empty() {
        findings.push(format!(
            "{name}: lostGtidSet names {} transaction{} that were not lost ({over}): {} holds them or {} never had them",
            over.count(),
            if over.count() == 1 { "" } else { "s" },
            record.to,
            record.from
        ));
    }
    if !under.is_empty() {
        findings.push(format!(
            "{name}: lostGtidSet misses {} lost transaction{} ({under}) that {} executed (or archived) and {} lacks",
            under.count(),
            if under.count() == 1 { "" } else { "s" },
            record.from,
            record.to
        ));
    }
    if let Some(count) = record.lost_transactions {
        if count != lost.count() {
            findings.push(format!(
                "{name}: lostTransactions {count}, the harness reads {} lost",
                lost.count()
            ));
        }
    }
    let summary = format!(
        "{name}: {} lost by the harness's reads ({}), operator {} ({})",
        lost.count(),
        if lost.is_empty() {
            "none".to_owned()
        } else {
            lost.to_string()
        },
        record
            .lost_transactions
            .map_or("no count".to_owned(), |count| count.to_string()),
        record.lost_gtid_set.as_deref().unwrap_or("no set")
    );
    Verdict::from_findings(NAME, summary, findings)
}

/// The judgement of failover `name` ended by one finding.
fn one_finding(name: &str, finding: String) -> Verdict {
    Verdict::from_findings(NAME, name.to_owned(), vec![finding])
}

/// The transactions lost by the harness's own reads: what the old primary executed (or
/// archived) that the active site did not; or why they are not compared.
fn lost_by_reads(
    record: &FailoverRecord,
    active: Option<Site>,
    sites: &BTreeMap<Site, String>,
    archived: &[&str],
    name: &str,
) -> Result<GtidSet, Verdict> {
    let not_judged = |why: String| {
        Verdict::from_findings(NAME, format!("{name}: not judged: {why}"), Vec::new())
    };
    if active != Some(record.to) {
        return Err(not_judged(format!(
            "the active site is {} now, not {} (a later move changed what {} holds)",
            active.map_or("none".to_owned(), |site| site.to_string()),
            record.to,
            record.to
        )));
    }
    let (Some(old_text), Some(new_text)) = (sites.get(&record.from), sites.get(&record.to)) else {
        return Err(not_judged(format!(
            "{} or {} could not be read",
            record.from, record.to
        )));
    };
    if !record.exact {
        return Err(one_finding(
            name,
            format!(
                "{name}: the old primary {} is readable, but the operator's count is not exact",
                record.from
            ),
        ));
    }
    let parsed = parse_gtid_set(old_text).and_then(|old| Ok((old, parse_gtid_set(new_text)?)));
    let (mut old, new) = parsed.map_err(|error| {
        one_finding(
            name,
            format!("{name}: an executed set read does not parse: {error}"),
        )
    })?;
    for text in archived {
        let gtid = parse_gtid(text).map_err(|error| {
            one_finding(
                name,
                format!(
                    "{name}: an archived GTID of {} does not parse: {error}",
                    record.from
                ),
            )
        })?;
        old.insert(gtid);
    }
    Ok(old.subtract(&new))
}

/// The operator's `lostGtidSet` (none stands for the empty set when nothing was lost); or why
/// it cannot be compared with `lost`.
fn reported_set(
    record: &FailoverRecord,
    sites: &BTreeMap<Site, String>,
    lost: &GtidSet,
    name: &str,
) -> Result<GtidSet, Verdict> {
    match record.lost_gtid_set.as_deref().map(parse_gtid_set) {
        Some(Ok(set)) => Ok(set),
        Some(Err(error)) => Err(one_finding(
            name,
            format!("{name}: lostGtidSet does not parse: {error}"),
        )),
        None if lost.is_empty() => Ok(lost.clone()),
        None => Err(one_finding(
            name,
            format!(
                "{name}: exact, but no lostGtidSet; the harness reads {} lost ({lost}: {}'s {} minus {}'s {})",
                lost.count(),
                record.from,
                sites.get(&record.from).map_or("", String::as_str),
                record.to,
                sites.get(&record.to).map_or("", String::as_str),
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(lost: Option<&str>, count: Option<u64>, exact: bool) -> FailoverRecord {
        let mut record: FailoverRecord = serde_json::from_value(serde_json::json!({
            "kind": "emergency",
            "from": "iad",
            "to": "pdx",
            "startedAt": "2026-12-06T00:00:00Z",
            "exact": exact,
        }))
        .expect("a failover record");
        record.lost_gtid_set = lost.map(str::to_owned);
        record.lost_transactions = count;
        record
    }

    fn sites(iad: &str, pdx: &str) -> BTreeMap<Site, String> {
        BTreeMap::from([(Site::Iad, iad.to_owned()), (Site::Pdx, pdx.to_owned())])
    }

    #[test]
    fn an_exact_set_that_agrees_passes() {
        let verdict = judge(
            &record(Some("0-1-101..120"), Some(20), true),
            Some(Site::Pdx),
            &sites("0-1-120", "0-1-100,0-2-130"),
            &[],
        );
        assert!(verdict.valid, "{verdict:?}");
    }

    // Over-reporting passed the rpo checker (it has no upper bound from the workload's writes);
    // here it is a finding, and so is under-reporting and a count that is not the set's size.
    #[test]
    fn over_and_under_reporting_and_a_wrong_count_are_findings() {
        let reads = sites("0-1-120", "0-1-100,0-2-130");
        let over = judge(
            &record(Some("0-1-99..120"), Some(22), true),
            Some(Site::Pdx),
            &reads,
            &[],
        );
        assert!(!over.valid);
        assert!(
            over.findings
                .iter()
                .any(|f| f.contains("not lost") && f.contains("0-1-99..100")),
            "{over:?}"
        );
        assert!(over
            .findings
            .iter()
            .any(|f| f.contains("lostTransactions 22")));
        let under = judge(
            &record(Some("0-1-101..110"), Some(10), true),
            Some(Site::Pdx),
            &reads,
            &[],
        );
        assert!(
            under.findings.iter().any(|f| f.contains("misses 10")),
            "{under:?}"
        );
        let not_exact = judge(&record(None, Some(20), false), Some(Site::Pdx), &reads, &[]);
        assert!(!not_exact.valid);
        let missing = judge(&record(None, None, true), Some(Site::Pdx), &reads, &[]);
        assert!(!missing.valid, "{missing:?}");
    }

    #[test]
    fn nothing_lost_and_nothing_reported_agree() {
        let verdict = judge(
            &record(None, Some(0), true),
            Some(Site::Pdx),
            &sites("0-1-100", "0-1-100,0-2-130"),
            &[],
        );
        assert!(verdict.valid, "{verdict:?}");
    }

    // s056/s057: the old primary was rejoined (archived, then re-seeded from the active site)
    // before the final read; what its archive holds is what it held.
    #[test]
    fn a_rejoined_old_primary_is_judged_with_what_its_archive_holds() {
        let reads = sites("0-1-100", "0-1-100,0-2-130");
        let archived = ["0-1-101", "0-1-102"];
        let agrees = judge(
            &record(Some("0-1-101..102"), Some(2), true),
            Some(Site::Pdx),
            &reads,
            &archived,
        );
        assert!(agrees.valid, "{agrees:?}");
        let without = judge(
            &record(Some("0-1-101..102"), Some(2), true),
            Some(Site::Pdx),
            &reads,
            &[],
        );
        assert!(!without.valid, "{without:?}");
        let under = judge(
            &record(Some("0-1-101"), Some(1), true),
            Some(Site::Pdx),
            &reads,
            &archived,
        );
        assert!(
            under.findings.iter().any(|f| f.contains("misses 1")),
            "{under:?}"
        );
    }

    #[test]
    fn a_later_move_or_an_unreadable_site_is_said_not_judged() {
        let moved = judge(
            &record(Some("0-1-101..120"), Some(20), true),
            Some(Site::Iad),
            &sites("0-1-120", "0-1-100"),
            &[],
        );
        assert!(
            moved.valid && moved.summary.contains("not judged"),
            "{moved:?}"
        );
        let unread = judge(
            &record(Some("0-1-101..120"), Some(20), true),
            Some(Site::Pdx),
            &BTreeMap::from([(Site::Pdx, "0-1-100".to_owned())]),
            &[],
        );
        assert!(unread.valid && unread.summary.contains("not judged"));
    }
}
