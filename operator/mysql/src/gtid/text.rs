//! Text forms of GTID sets: parsing and formatting for both flavors (see [`GtidSet`]).

use std::collections::BTreeMap;

use super::intervals::Intervals;
use super::set::GtidSet;
use super::transaction::{format_uuid, parse_tag, parse_uuid, Source, MYSQL_SEQ_MAX};
use crate::{Error, Flavor, Result};

/// How much of an offending item an error message quotes.
const ERROR_TEXT_LEN_MAX: usize = 80;

/// One comma-separated item, trimmed, with its byte offset in the whole text.
struct Item<'a> {
    text: &'a str,
    position: usize,
}

fn error(flavor: Flavor, position: usize, reason: impl Into<String>, text: &str) -> Error {
    Error::GtidParse {
        flavor,
        position,
        reason: reason.into(),
        text: text.chars().take(ERROR_TEXT_LEN_MAX).collect(),
    }
}

/// Splits on commas; an all-whitespace text has no items, an empty item between commas is an
/// error.
fn items(flavor: Flavor, text: &str) -> Result<Vec<Item<'_>>> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut result = Vec::new();
    let mut offset = 0;
    for raw in text.split(',') {
        let leading = raw.len() - raw.trim_start().len();
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Err(error(flavor, offset, "empty item between commas", raw));
        }
        result.push(Item {
            text: trimmed,
            position: offset + leading,
        });
        offset += raw.len() + 1;
    }
    Ok(result)
}

/// Parses a decimal number made of ASCII digits only.
fn number<T: std::str::FromStr>(
    flavor: Flavor,
    field: &str,
    what: &str,
    position: usize,
    item: &str,
) -> Result<T> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error(
            flavor,
            position,
            format!("{what} {field:?} is not a decimal number"),
            item,
        ));
    }
    field.parse().map_err(|_| {
        error(
            flavor,
            position,
            format!("{what} {field} is out of range"),
            item,
        )
    })
}

pub(crate) fn parse(flavor: Flavor, text: &str) -> Result<GtidSet> {
    match flavor {
        Flavor::MariaDb => parse_mariadb(text),
        Flavor::MySql => parse_mysql(text),
    }
}

/// A position item waiting for its domain's chain to be ordered.
struct PositionItem {
    last_seq: u64,
    server_id: u32,
    position: usize,
}

fn parse_mariadb(text: &str) -> Result<GtidSet> {
    let flavor = Flavor::MariaDb;
    let mut set = GtidSet::empty(flavor);
    let mut chains: BTreeMap<u32, Vec<PositionItem>> = BTreeMap::new();
    for item in items(flavor, text)? {
        if item.text.contains(':') {
            return Err(error(
                flavor,
                item.position,
                "expected domain-server_id-seq, found ':' (a MySQL GTID set?)",
                item.text,
            ));
        }
        let fields: Vec<&str> = item.text.splitn(3, '-').collect();
        let [domain, server_id, seq] = fields[..] else {
            return Err(error(
                flavor,
                item.position,
                "expected domain-server_id-seq or domain-server_id-first..last",
                item.text,
            ));
        };
        let domain: u32 = number(flavor, domain, "domain id", item.position, item.text)?;
        let server_id: u32 = number(flavor, server_id, "server id", item.position, item.text)?;
        match seq.split_once("..") {
            None => {
                let last_seq: u64 =
                    number(flavor, seq, "sequence number", item.position, item.text)?;
                chains.entry(domain).or_default().push(PositionItem {
                    last_seq,
                    server_id,
                    position: item.position,
                });
            }
            Some((first, last)) => {
                let first: u64 = number(flavor, first, "range start", item.position, item.text)?;
                let last: u64 = number(flavor, last, "range end", item.position, item.text)?;
                if first == 0 || first > last {
                    return Err(error(
                        flavor,
                        item.position,
                        format!("range {first}..{last} must satisfy 1 <= start <= end"),
                        item.text,
                    ));
                }
                insert_range(&mut set, Source::MariaDb { domain, server_id }, first, last);
            }
        }
    }
    for (domain, mut chain) in chains {
        chain.sort_by_key(|item| item.last_seq);
        let mut previous: Option<&PositionItem> = None;
        for item in &chain {
            let start = match previous {
                Some(prev) if prev.last_seq == item.last_seq => {
                    return Err(error(
                        flavor,
                        item.position,
                        format!(
                            "domain {domain} has two positions at sequence number {} \
                             (servers {} and {}); diverged histories need range items D-S-A..B",
                            item.last_seq, prev.server_id, item.server_id
                        ),
                        text.get(item.position..).unwrap_or_default(),
                    ));
                }
                Some(prev) => prev.last_seq + 1,
                None => 1,
            };
            let source = Source::MariaDb {
                domain,
                server_id: item.server_id,
            };
            insert_range(&mut set, source, start, item.last_seq);
            previous = Some(item);
        }
    }
    Ok(set)
}

fn insert_range(set: &mut GtidSet, source: Source, first: u64, last: u64) {
    if first > last {
        return;
    }
    set.sources
        .entry(source)
        .or_default()
        .insert_range(first, last);
}

fn parse_mysql(text: &str) -> Result<GtidSet> {
    let flavor = Flavor::MySql;
    let mut set = GtidSet::empty(flavor);
    for item in items(flavor, text)? {
        let mut segments = item.text.split(':');
        let uuid_text = segments.next().unwrap_or_default().trim();
        let uuid = parse_uuid(uuid_text)
            .map_err(|e| error(flavor, item.position, e.to_string(), item.text))?;
        let mut tag: Option<String> = None;
        // Whether the current tag (or the bare UUID) has received at least one interval.
        let mut has_interval = false;
        let mut segment_count = 0;
        for segment in segments {
            segment_count += 1;
            let segment = segment.trim();
            let starts_with_digit = segment.bytes().next().is_some_and(|b| b.is_ascii_digit());
            if !starts_with_digit {
                if tag.is_some() && !has_interval {
                    return Err(error(
                        flavor,
                        item.position,
                        format!("tag {:?} has no interval", tag.unwrap_or_default()),
                        item.text,
                    ));
                }
                let parsed = parse_tag(segment)
                    .map_err(|e| error(flavor, item.position, e.to_string(), item.text))?;
                tag = Some(parsed);
                has_interval = false;
                continue;
            }
            let (first, last) = match segment.split_once('-') {
                Some((first, last)) => (first.trim(), last.trim()),
                None => (segment, segment),
            };
            let first: u64 = number(flavor, first, "interval start", item.position, item.text)?;
            let last: u64 = number(flavor, last, "interval end", item.position, item.text)?;
            if first == 0 || first > last || last > MYSQL_SEQ_MAX {
                return Err(error(
                    flavor,
                    item.position,
                    format!(
                        "interval {first}-{last} must satisfy 1 <= start <= end <= {MYSQL_SEQ_MAX}"
                    ),
                    item.text,
                ));
            }
            insert_range(
                &mut set,
                Source::MySql {
                    uuid,
                    tag: tag.clone(),
                },
                first,
                last,
            );
            has_interval = true;
        }
        if segment_count == 0 || !has_interval {
            return Err(error(
                flavor,
                item.position,
                "expected uuid:interval[:interval...] (an interval is N or N-M)",
                item.text,
            ));
        }
    }
    Ok(set)
}

pub(crate) fn format(set: &GtidSet) -> String {
    let mut items: Vec<String> = Vec::new();
    // MariaDB domains, in order: collect every (start, end, server) run of the domain.
    let mut domains: BTreeMap<u32, Vec<(u64, u64, u32)>> = BTreeMap::new();
    // MySQL: per UUID, the untagged intervals first and then each tag's.
    let mut uuids: BTreeMap<u128, Vec<(Option<&str>, &Intervals)>> = BTreeMap::new();
    for (source, intervals) in &set.sources {
        match source {
            Source::MariaDb { domain, server_id } => {
                let runs = domains.entry(*domain).or_default();
                runs.extend(intervals.ranges().iter().map(|&(s, e)| (s, e, *server_id)));
            }
            Source::MySql { uuid, tag } => {
                uuids
                    .entry(*uuid)
                    .or_default()
                    .push((tag.as_deref(), intervals));
            }
        }
    }
    for (domain, mut runs) in domains {
        runs.sort_unstable();
        let linear = runs
            .iter()
            .try_fold(0u64, |end, &(start, last, _)| {
                (end.checked_add(1) == Some(start)).then_some(last)
            })
            .is_some();
        for (start, last, server_id) in runs {
            items.push(if linear {
                format!("{domain}-{server_id}-{last}")
            } else {
                format!("{domain}-{server_id}-{start}..{last}")
            });
        }
    }
    for (uuid, tagged) in uuids {
        // BTreeMap order puts `None` (untagged) before every tag.
        let mut item = format_uuid(uuid);
        for (tag, intervals) in tagged {
            if let Some(tag) = tag {
                item.push(':');
                item.push_str(tag);
            }
            for &(first, last) in intervals.ranges() {
                if first == last {
                    item.push_str(&format!(":{first}"));
                } else {
                    item.push_str(&format!(":{first}-{last}"));
                }
            }
        }
        items.push(item);
    }
    items.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Gtid;

    fn mariadb(text: &str) -> GtidSet {
        GtidSet::parse(Flavor::MariaDb, text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn mysql(text: &str) -> GtidSet {
        GtidSet::parse(Flavor::MySql, text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    // Brief: MariaDB position `D-S-N` = domain D's transactions 1..=N, last by server S.
    #[test]
    fn mariadb_position_is_the_whole_prefix_of_its_domain() {
        let set = mariadb("0-1-100,1-2-5");
        assert_eq!(set.count(), 105);
        assert!(set.contains_gtid(&Gtid::mariadb(0, 1, 1)));
        assert!(set.contains_gtid(&Gtid::mariadb(0, 1, 100)));
        assert!(!set.contains_gtid(&Gtid::mariadb(0, 1, 101)));
        assert!(set.contains_gtid(&Gtid::mariadb(1, 2, 5)));
        assert_eq!(set.to_string(), "0-1-100,1-2-5");
        assert_eq!(set.domain_last_seq(0), Some(100));
        assert_eq!(set.domains(), vec![0, 1]);
    }

    // Brief: "" is the empty set for both flavors, whitespace and newlines are allowed.
    #[test]
    fn empty_and_whitespace_texts_are_the_empty_set() {
        for flavor in [Flavor::MariaDb, Flavor::MySql] {
            for text in ["", "  ", "\n"] {
                let set = GtidSet::parse(flavor, text);
                assert_eq!(set, Ok(GtidSet::empty(flavor)), "{flavor} {text:?}");
            }
        }
        assert_eq!(GtidSet::empty(Flavor::MariaDb).to_string(), "");
    }

    // MariaDB `gtid_binlog_state`: one item per (domain, server), read as one linear history.
    #[test]
    fn mariadb_binlog_state_chains_runs_in_sequence_order() {
        let set = mariadb("0-2-103, 0-1-100");
        assert!(set.contains_gtid(&Gtid::mariadb(0, 1, 100)));
        assert!(!set.contains_gtid(&Gtid::mariadb(0, 2, 100)));
        assert!(set.contains_gtid(&Gtid::mariadb(0, 2, 101)));
        assert_eq!(set.count(), 103);
        assert_eq!(set.to_string(), "0-1-100,0-2-103");
    }

    // Brief: a set that is not a prefix has a documented text form that parse accepts.
    #[test]
    fn mariadb_non_prefix_sets_use_range_items_and_round_trip() {
        let subtracted = mariadb("0-1-105").subtract(&mariadb("0-1-100"));
        assert_eq!(subtracted.to_string(), "0-1-101..105");
        assert_eq!(mariadb(&subtracted.to_string()), subtracted);
        // Diverged union: both servers wrote 101.
        let diverged = mariadb("0-1-101").union(&mariadb("0-1-100,0-2-101"));
        assert_eq!(diverged.to_string(), "0-1-1..101,0-2-101..101");
        assert_eq!(mariadb(&diverged.to_string()), diverged);
        assert_eq!(diverged.count(), 102);
    }

    // Brief: MySQL gtid_executed with whitespace/newlines, single numbers and tags.
    #[test]
    fn mysql_gtid_executed_parses_and_normalises() {
        let text = "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7,\n\
                    4f2a1b2c-0000-11ef-8000-0242ac120002:1-3:Deploy:1-2";
        let set = mysql(text);
        assert_eq!(set.count(), 6 + 3 + 2);
        assert_eq!(
            set.to_string(),
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,\
             4f2a1b2c-0000-11ef-8000-0242ac120002:1-3:deploy:1-2"
        );
        // Overlapping and adjacent intervals merge.
        assert_eq!(
            mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:4-6:5").to_string(),
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6"
        );
    }

    // Brief: parse errors name what was wrong and where.
    #[test]
    fn parse_errors_name_the_problem_and_byte_offset() {
        let cases: &[(Flavor, &str, usize, &str)] = &[
            (Flavor::MariaDb, "0-1-100,x-1-2", 8, "domain id"),
            (Flavor::MariaDb, "0-1-100,,", 8, "empty item"),
            (Flavor::MariaDb, "0-1", 0, "expected domain-server_id-seq"),
            (Flavor::MariaDb, "0-1-5..3", 0, "1 <= start <= end"),
            (Flavor::MariaDb, "0-1-100, 0-2-100", 9, "two positions"),
            (
                Flavor::MariaDb,
                "0-1-99999999999999999999",
                0,
                "out of range",
            ),
            (Flavor::MariaDb, "0-4294967296-1", 0, "server id"),
            (
                Flavor::MySql,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562",
                0,
                "expected uuid:interval",
            ),
            (Flavor::MySql, "3e11fa47-71ca-11e1-9e33:1", 0, "UUID"),
            (
                Flavor::MySql,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:0",
                0,
                "1 <= start",
            ),
            (
                Flavor::MySql,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-3",
                0,
                "1 <= start",
            ),
            (
                Flavor::MySql,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:1, x:1",
                40,
                "UUID",
            ),
            (
                Flavor::MySql,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:tag",
                0,
                "expected uuid:interval",
            ),
            (
                Flavor::MySql,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:a:b:1",
                0,
                "has no interval",
            ),
            (Flavor::MySql, "0-1-100", 0, "UUID"),
            (
                Flavor::MariaDb,
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:1",
                0,
                "expected domain",
            ),
        ];
        for &(flavor, text, position, needle) in cases {
            match GtidSet::parse(flavor, text) {
                Err(Error::GtidParse {
                    position: found,
                    reason,
                    ..
                }) => {
                    assert_eq!(found, position, "{text:?}: {reason}");
                    assert!(
                        reason.contains(needle),
                        "{text:?}: {reason:?} lacks {needle:?}"
                    );
                }
                other => panic!("{text:?} parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn mariadb_zero_position_is_an_empty_domain() {
        assert_eq!(mariadb("0-1-0"), GtidSet::empty(Flavor::MariaDb));
        assert_eq!(mariadb("0-1-0,1-1-3").to_string(), "1-1-3");
    }

    // The sidecar's archive of errant transactions (docs/design/operator.md#returning-primary)
    // selects them from the binlog one run at a time: the runs are maximal and cover the set.
    #[test]
    fn mariadb_runs_list_each_domain_and_servers_maximal_ranges() {
        let set = mariadb("1-7-3..4,0-1-5..6,0-1-9..9,0-7-7..7,0-1-10..10");
        assert_eq!(
            set.mariadb_runs(),
            [(0, 1, 5, 6), (0, 1, 9, 10), (0, 7, 7, 7), (1, 7, 3, 4)]
        );
        assert_eq!(mariadb("0-1-3").mariadb_runs(), [(0, 1, 1, 3)]);
        assert!(GtidSet::empty(Flavor::MariaDb).mariadb_runs().is_empty());
        assert!(mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
            .mariadb_runs()
            .is_empty());
    }
}
