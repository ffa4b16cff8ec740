//! Property tests of the GTID set algebra for both flavors (brief: set algebra laws, display
//! and parse round trip, parse never panics).

use bloodraven_mysql::{errant_transactions, lost_transactions, Error, Flavor, Gtid, GtidSet};
use proptest::prelude::*;

const UUIDS: [&str; 3] = [
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "4f2a1b2c-0000-11ef-8000-0242ac120002",
    "00000000-0000-0000-0000-000000000001",
];

/// Runs `(source index, tag index, first, length)`; sources and numbers are kept small so
/// that generated sets overlap often.
fn runs() -> impl Strategy<Value = Vec<(u32, u32, u64, u64)>> {
    prop::collection::vec((0u32..3, 0u32..3, 1u64..80, 0u64..25), 0..8)
}

fn mariadb_set() -> impl Strategy<Value = GtidSet> {
    runs().prop_map(|runs| {
        let mut set = GtidSet::empty(Flavor::MariaDb);
        for (domain, server_id, first, length) in runs {
            for seq in first..first + length {
                set.insert(Gtid::mariadb(domain, server_id + 1, seq));
            }
        }
        set
    })
}

fn mysql_set() -> impl Strategy<Value = GtidSet> {
    runs().prop_map(|runs| {
        let mut set = GtidSet::empty(Flavor::MySql);
        for (uuid, tag, first, length) in runs {
            for seq in first..first + length {
                let gtid = match tag {
                    0 => Gtid::mysql(UUIDS[uuid as usize], seq),
                    _ => Gtid::mysql_tagged(
                        UUIDS[uuid as usize],
                        ["blue", "green"][tag as usize - 1],
                        seq,
                    ),
                };
                if let Ok(gtid) = gtid {
                    set.insert(gtid);
                }
            }
        }
        set
    })
}

/// Three sets of one flavor.
fn triple() -> impl Strategy<Value = (GtidSet, GtidSet, GtidSet)> {
    prop_oneof![
        (mariadb_set(), mariadb_set(), mariadb_set()),
        (mysql_set(), mysql_set(), mysql_set()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn union_is_commutative_and_associative((a, b, c) in triple()) {
        prop_assert_eq!(a.union(&b), b.union(&a));
        prop_assert_eq!(a.union(&b).union(&c), a.union(&b.union(&c)));
        prop_assert_eq!(a.union(&a), a.clone());
        prop_assert_eq!(a.union(&GtidSet::empty(a.flavor())), a);
    }

    #[test]
    fn subtract_then_union_restores_the_union((a, b, _) in triple()) {
        prop_assert_eq!(a.subtract(&b).union(&b), a.union(&b));
        prop_assert_eq!(a.subtract(&b).union(&a.intersect(&b)), a.clone());
        prop_assert!(a.subtract(&b).intersect(&b).is_empty());
        prop_assert!(a.subtract(&a).is_empty());
    }

    #[test]
    fn contains_is_consistent_with_union_and_subtract((a, b, _) in triple()) {
        let union = a.union(&b);
        prop_assert!(union.contains(&a) && union.contains(&b));
        prop_assert!(a.contains(&a.subtract(&b)));
        prop_assert!(a.contains(&GtidSet::empty(a.flavor())));
        prop_assert_eq!(a.contains(&b), b.subtract(&a).is_empty());
        prop_assert_eq!(a.contains(&b), a.union(&b) == a);
        prop_assert_eq!(a.contains(&b) && b.contains(&a), a == b);
    }

    #[test]
    fn count_is_additive((a, b, _) in triple()) {
        prop_assert_eq!(
            a.union(&b).count() + a.intersect(&b).count(),
            a.count() + b.count()
        );
        prop_assert_eq!(a.count(), a.subtract(&b).count() + a.intersect(&b).count());
        prop_assert_eq!(a.is_empty(), a.count() == 0);
    }

    #[test]
    fn display_then_parse_round_trips((a, b, _) in triple()) {
        for set in [a.clone(), a.subtract(&b), a.union(&b), a.intersect(&b)] {
            let text = set.to_string();
            prop_assert_eq!(GtidSet::parse(set.flavor(), &text), Ok(set.clone()), "{}", text);
            if !set.is_empty() {
                let json = serde_json::to_string(&set).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let back: GtidSet = serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(back, set);
            }
        }
    }

    // Inserting is the same as a union with the one-transaction set.
    #[test]
    fn insert_agrees_with_union((a, _, _) in triple(), domain in 0u32..3, server in 1u32..4, seq in 1u64..120) {
        let gtid = match a.flavor() {
            Flavor::MariaDb => Gtid::mariadb(domain, server, seq),
            Flavor::MySql => Gtid::mysql(UUIDS[domain as usize], seq).map_err(|e| TestCaseError::fail(e.to_string()))?,
        };
        let mut single = GtidSet::empty(a.flavor());
        single.insert(gtid.clone());
        let mut inserted = a.clone();
        inserted.insert(gtid.clone());
        prop_assert!(inserted.contains_gtid(&gtid));
        prop_assert_eq!(inserted.count(), a.count() + u64::from(!a.contains_gtid(&gtid)));
        prop_assert_eq!(inserted, a.union(&single));
    }

    #[test]
    fn errant_and_lost_are_subsets_and_vanish_for_supersets((a, b, _) in triple()) {
        prop_assert!(a.contains(&errant_transactions(&a, &b)));
        prop_assert!(errant_transactions(&a, &a.union(&b)).is_empty());
        prop_assert!(lost_transactions(&a, &a).is_empty());
        prop_assert!(a.subtract(&b).contains(&errant_transactions(&a, &b)));
    }

    // Brief: MariaDB divergence. A common history by server 1, then two branches written by
    // different servers; read back through gtid_binlog_state text. Each branch's own
    // transactions, and only those, are errant relative to the other.
    #[test]
    fn diverged_mariadb_branches_are_errant_relative_to_each_other(
        common in 0u64..200, ahead_a in 0u64..50, ahead_b in 0u64..50, server_b in 3u32..6,
    ) {
        let mut history_a = GtidSet::empty(Flavor::MariaDb);
        for seq in 1..=common {
            history_a.insert(Gtid::mariadb(0, 1, seq));
        }
        let mut history_b = history_a.clone();
        for seq in common + 1..=common + ahead_a {
            history_a.insert(Gtid::mariadb(0, 2, seq));
        }
        for seq in common + 1..=common + ahead_b {
            history_b.insert(Gtid::mariadb(0, server_b, seq));
        }
        let parse = |set: &GtidSet| GtidSet::parse(Flavor::MariaDb, &set.to_string());
        let (Ok(read_a), Ok(read_b)) = (parse(&history_a), parse(&history_b)) else {
            return Err(TestCaseError::fail("binlog_state text must parse"));
        };
        prop_assert_eq!(errant_transactions(&read_a, &read_b).count(), ahead_a);
        prop_assert_eq!(lost_transactions(&read_b, &read_a).count(), ahead_b);
        prop_assert_eq!(read_a.contains(&read_b), ahead_b == 0);
    }

    // gtid_binlog_state after a failback credits an earlier run to the wrong server; a
    // replica anywhere in the second run still has no errant transaction and the primary's
    // lost-to-replica count is exact.
    #[test]
    fn failback_binlog_state_does_not_invent_errant_transactions(
        first in 1u64..100, second in 1u64..100, third in 1u64..100, replica_in_second in 1u64..100,
    ) {
        let replica_last = first + replica_in_second.min(second);
        let (end_b, end_c) = (first + second, first + second + third);
        let primary = GtidSet::parse(Flavor::MariaDb, &format!("0-2-{end_b},0-1-{end_c}"));
        let replica = GtidSet::parse(Flavor::MariaDb, &format!("0-1-{first},0-2-{replica_last}"));
        let (Ok(primary), Ok(replica)) = (primary, replica) else {
            return Err(TestCaseError::fail("binlog_state text must parse"));
        };
        prop_assert!(errant_transactions(&replica, &primary).is_empty());
        prop_assert_eq!(lost_transactions(&primary, &replica).count(), end_c - replica_last);
    }

    // Brief: parse over arbitrary strings never panics and errors say what and where.
    #[test]
    fn parse_never_panics_on_arbitrary_text(text in any::<String>()) {
        for flavor in [Flavor::MariaDb, Flavor::MySql] {
            check_parse(flavor, &text)?;
        }
    }

    // Same, over text made of GTID characters, which gets much deeper into the parser.
    #[test]
    fn parse_never_panics_on_gtid_like_text(text in "[0-9a-fA-FxZ:,.\\- \n]{0,80}") {
        for flavor in [Flavor::MariaDb, Flavor::MySql] {
            check_parse(flavor, &text)?;
        }
    }
}

fn check_parse(flavor: Flavor, text: &str) -> Result<(), TestCaseError> {
    match GtidSet::parse(flavor, text) {
        Ok(set) => {
            prop_assert_eq!(set.flavor(), flavor);
            prop_assert_eq!(GtidSet::parse(flavor, &set.to_string()), Ok(set));
        }
        Err(Error::GtidParse {
            position, reason, ..
        }) => {
            prop_assert!(
                position <= text.len(),
                "position {} beyond {:?}",
                position,
                text
            );
            prop_assert!(!reason.is_empty());
        }
        Err(other) => {
            return Err(TestCaseError::fail(format!(
                "unexpected error kind {other:?}"
            )))
        }
    }
    Ok(())
}

// Brief: mixing flavors returns an error type through the try_ operations and never panics;
// subtract/contains stay exact because transactions of two flavors are never equal.
#[test]
fn mixing_flavors_is_an_error_or_exact() {
    let mariadb = GtidSet::parse(Flavor::MariaDb, "0-1-10");
    let mysql = GtidSet::parse(Flavor::MySql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-3");
    let (Ok(mariadb), Ok(mysql)) = (mariadb, mysql) else {
        panic!("fixtures parse");
    };
    let mismatch = Error::FlavorMismatch {
        left: Flavor::MariaDb,
        right: Flavor::MySql,
    };
    assert_eq!(mariadb.try_union(&mysql), Err(mismatch.clone()));
    assert_eq!(mariadb.try_subtract(&mysql), Err(mismatch.clone()));
    assert_eq!(mariadb.try_contains(&mysql), Err(mismatch));
    assert_eq!(mariadb.subtract(&mysql), mariadb);
    assert!(!mariadb.contains(&mysql));
    assert!(mariadb.contains(&GtidSet::empty(Flavor::MySql)));
    assert_eq!(errant_transactions(&mysql, &mariadb), mysql);
    let mixed = mariadb.union(&mysql);
    assert!(mixed.is_mixed() && !mariadb.is_mixed());
    assert_eq!(mixed.count(), 13);
    assert_eq!(
        mariadb.try_union(&GtidSet::empty(Flavor::MariaDb)),
        Ok(mariadb)
    );
}
