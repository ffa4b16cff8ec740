//! [`GtidSet`]: a set of transactions of one flavor, as intervals per source.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::intervals::Intervals;
use super::transaction::{Gtid, Source};
use crate::{Error, Flavor, Result};

/// A set of transactions.
///
/// # Model
///
/// A set is a set of transactions, each identified by its source key and sequence number,
/// stored as sorted intervals per source key (so [`insert`](Self::insert) of the next
/// transaction is O(log sources) and the set algebra is exact):
///
/// - **MySQL**: key = server UUID (plus the tag of a tagged GTID). Text form is
///   `gtid_executed`'s: `uuid:1-5:7,uuid2:1-3`, and `uuid:1-5:tag:1-3` for tags.
/// - **MariaDB**: key = `(domain, server_id)`. Sequence numbers are per **domain**: in one
///   linear history every number of a domain belongs to exactly one transaction, written by
///   one server. A position `D-S-N` (`gtid_current_pos`, `gtid_binlog_pos`) means domain D's
///   transactions 1..=N, the last one written by server S. Two servers that diverged in one
///   domain (both wrote N+1, under different server ids) hold different transactions at the
///   same number, so neither set contains the other.
///
/// # MariaDB text form
///
/// A comma-separated list of items (whitespace around items is ignored, `""` is the empty
/// set). Each item is one of:
///
/// - a **position item** `D-S-N`: in domain D, server S wrote the run of transactions that
///   ends at N and starts right after the previous position item of the same domain (ordered
///   by N), or at 1. So `0-1-100` is transactions 1..=100 of domain 0 by server 1, and
///   `0-1-100,0-2-103` (MariaDB's `gtid_binlog_state` form: the last GTID per domain and
///   server) is 1..=100 by server 1 followed by 101..=103 by server 2. Two position items of
///   one domain with the same N are an error (that is a divergence, which needs range items).
///   `D-S-0` is the empty history of domain D.
/// - a **range item** `D-S-A..B`: transactions A..=B (1 <= A <= B) of domain D written by
///   server S, regardless of anything else. This is what a set that is not a prefix looks
///   like, for example after [`subtract`](Self::subtract): `0-1-101..105`.
///
/// [`Display`](fmt::Display) writes a domain as position items when its transactions are one
/// linear prefix 1..=N with no number taken twice (so a server's own position reads back in
/// MariaDB's syntax), and as range items otherwise. [`parse`](Self::parse) reads both; for
/// every set, `parse(flavor, &set.to_string()) == set`.
///
/// Position items can only say who wrote each run as far as the input tells: a single
/// `gtid_current_pos` item attributes the whole domain to the last writer. That is why the
/// [`Dialect`](crate::Dialect) reads `@@gtid_binlog_state` (one item per server), and why
/// [`errant_transactions`](crate::errant_transactions) and
/// [`lost_transactions`](crate::lost_transactions) tolerate a wrong attribution below the
/// point where both histories provably agree.
///
/// # Flavors
///
/// Every set has a flavor ([`parse`](Self::parse), [`empty`](Self::empty)). Transactions of
/// different flavors are never equal, so [`subtract`](Self::subtract) and
/// [`contains`](Self::contains) stay exact across flavors; [`union`](Self::union) of two
/// flavors keeps the left operand's flavor and would hold transactions of both (a mixed set,
/// see [`is_mixed`](Self::is_mixed)). Use [`try_union`](Self::try_union),
/// [`try_subtract`](Self::try_subtract) and [`try_contains`](Self::try_contains) to get
/// [`Error::FlavorMismatch`] instead. Nothing here panics.
///
/// # Example
///
/// ```
/// use bloodraven_mysql::{lost_transactions, Flavor, GtidSet};
///
/// // iad (server 1) died at 105; pdx had replicated up to 100 and then wrote 101..=103.
/// let iad = GtidSet::parse(Flavor::MariaDb, "0-1-105")?;
/// let pdx = GtidSet::parse(Flavor::MariaDb, "0-1-100,0-2-103")?;
/// let lost = lost_transactions(&iad, &pdx);
/// assert_eq!(lost.to_string(), "0-1-101..105");
/// assert_eq!(lost.count(), 5);
/// assert_eq!(GtidSet::parse(Flavor::MariaDb, &lost.to_string())?, lost);
/// # Ok::<(), bloodraven_mysql::Error>(())
/// ```
///
/// Serde writes the text form; reading detects the flavor from the text (`:` means MySQL),
/// with the empty string read as an empty MariaDB set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GtidSet {
    pub(crate) flavor: Flavor,
    /// Invariant: no empty `Intervals` value is stored, so derived equality is set equality.
    pub(crate) sources: BTreeMap<Source, Intervals>,
}

impl Default for GtidSet {
    /// The empty set of the default flavor (MariaDB).
    fn default() -> Self {
        GtidSet::empty(Flavor::default())
    }
}

impl GtidSet {
    /// Parses a set in `flavor`'s text form (see the type documentation). Never panics;
    /// errors name the problem and its byte offset.
    pub fn parse(flavor: Flavor, text: &str) -> Result<GtidSet> {
        super::text::parse(flavor, text)
    }

    /// The empty set of `flavor`.
    pub fn empty(flavor: Flavor) -> GtidSet {
        GtidSet {
            flavor,
            sources: BTreeMap::new(),
        }
    }

    /// The set's flavor.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// Whether the set holds transactions of a flavor other than [`flavor`](Self::flavor)
    /// (only possible through [`union`](Self::union) or [`insert`](Self::insert) across
    /// flavors).
    pub fn is_mixed(&self) -> bool {
        self.sources
            .keys()
            .any(|source| source.flavor() != self.flavor)
    }

    /// Records one transaction. Cheap: appending the next sequence number of a source
    /// extends its last interval. A MariaDB GTID with sequence number 0 names no transaction
    /// and is ignored.
    pub fn insert(&mut self, gtid: Gtid) {
        if gtid.seq == 0 {
            return;
        }
        match self.sources.get_mut(&gtid.source) {
            Some(intervals) => intervals.insert(gtid.seq),
            None => {
                let mut intervals = Intervals::default();
                intervals.insert(gtid.seq);
                self.sources.insert(gtid.source, intervals);
            }
        }
    }

    /// Whether the set holds this transaction.
    pub fn contains_gtid(&self, gtid: &Gtid) -> bool {
        self.sources
            .get(&gtid.source)
            .is_some_and(|intervals| intervals.contains(gtid.seq))
    }

    /// All transactions in either set. The result has `self`'s flavor.
    pub fn union(&self, other: &GtidSet) -> GtidSet {
        if self.flavor != other.flavor && !other.is_empty() {
            tracing::warn!(
                left = %self.flavor,
                right = %other.flavor,
                "union of GTID sets of different flavors makes a mixed set"
            );
        }
        let mut sources = self.sources.clone();
        for (source, theirs) in &other.sources {
            let merged = match sources.get(source) {
                Some(ours) => ours.union(theirs),
                None => theirs.clone(),
            };
            sources.insert(source.clone(), merged);
        }
        GtidSet {
            flavor: self.flavor,
            sources,
        }
    }

    /// The transactions in `self` that are not in `other` (exact set difference; for history
    /// comparisons use [`errant_transactions`](crate::errant_transactions)).
    pub fn subtract(&self, other: &GtidSet) -> GtidSet {
        let sources = self
            .sources
            .iter()
            .filter_map(|(source, ours)| {
                let rest = match other.sources.get(source) {
                    Some(theirs) => ours.subtract(theirs),
                    None => ours.clone(),
                };
                (!rest.is_empty()).then(|| (source.clone(), rest))
            })
            .collect();
        GtidSet {
            flavor: self.flavor,
            sources,
        }
    }

    /// The transactions in both sets. The result has `self`'s flavor.
    pub fn intersect(&self, other: &GtidSet) -> GtidSet {
        let sources = self
            .sources
            .iter()
            .filter_map(|(source, ours)| {
                let both = ours.intersect(other.sources.get(source)?);
                (!both.is_empty()).then(|| (source.clone(), both))
            })
            .collect();
        GtidSet {
            flavor: self.flavor,
            sources,
        }
    }

    /// Whether every transaction of `other` is in `self` (superset or equal).
    pub fn contains(&self, other: &GtidSet) -> bool {
        other.sources.iter().all(|(source, theirs)| {
            self.sources
                .get(source)
                .is_some_and(|ours| ours.contains_all(theirs))
        })
    }

    /// [`union`](Self::union), or [`Error::FlavorMismatch`] for sets of different flavors.
    pub fn try_union(&self, other: &GtidSet) -> Result<GtidSet> {
        self.same_flavor(other).map(|()| self.union(other))
    }

    /// [`subtract`](Self::subtract), or [`Error::FlavorMismatch`] for sets of different
    /// flavors.
    pub fn try_subtract(&self, other: &GtidSet) -> Result<GtidSet> {
        self.same_flavor(other).map(|()| self.subtract(other))
    }

    /// [`contains`](Self::contains), or [`Error::FlavorMismatch`] for sets of different
    /// flavors.
    pub fn try_contains(&self, other: &GtidSet) -> Result<bool> {
        self.same_flavor(other).map(|()| self.contains(other))
    }

    fn same_flavor(&self, other: &GtidSet) -> Result<()> {
        if self.flavor == other.flavor {
            Ok(())
        } else {
            Err(Error::FlavorMismatch {
                left: self.flavor,
                right: other.flavor,
            })
        }
    }

    /// The number of transactions (saturating at `u64::MAX`).
    pub fn count(&self) -> u64 {
        self.sources.values().fold(0u64, |total, intervals| {
            total.saturating_add(intervals.count())
        })
    }

    /// Whether the set holds no transaction.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// MariaDB: the highest sequence number held in `domain` (by any server), the `N` of the
    /// domain's position. `None` for a domain with no transaction or a MySQL set.
    pub fn domain_last_seq(&self, domain: u32) -> Option<u64> {
        self.sources
            .iter()
            .filter(
                |(source, _)| matches!(source, Source::MariaDb { domain: d, .. } if *d == domain),
            )
            .filter_map(|(_, intervals)| intervals.last())
            .max()
    }

    /// MariaDB: the set as runs `(domain, server_id, first, last)` (transactions
    /// `first..=last` of `domain` written by `server_id`), maximal and ascending by domain,
    /// server id and number: what a tool that selects transactions by GTID range needs (the
    /// sidecar's archive of errant transactions reads them from the binlog run by run). A
    /// MySQL set has none.
    pub fn mariadb_runs(&self) -> Vec<(u32, u32, u64, u64)> {
        self.sources
            .iter()
            .filter_map(|(source, intervals)| match source {
                Source::MariaDb { domain, server_id } => Some((*domain, *server_id, intervals)),
                Source::MySql { .. } => None,
            })
            .flat_map(|(domain, server_id, intervals)| {
                intervals
                    .ranges()
                    .iter()
                    .map(move |&(first, last)| (domain, server_id, first, last))
            })
            .collect()
    }

    /// MariaDB domain ids that hold at least one transaction, ascending.
    pub fn domains(&self) -> Vec<u32> {
        let mut domains: Vec<u32> = self
            .sources
            .keys()
            .filter_map(|source| match source {
                Source::MariaDb { domain, .. } => Some(*domain),
                Source::MySql { .. } => None,
            })
            .collect();
        domains.dedup();
        domains
    }
}

impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&super::text::format(self))
    }
}

impl std::str::FromStr for GtidSet {
    type Err = Error;

    /// Parses with the flavor detected from the text: any `:` means MySQL, otherwise
    /// MariaDB (so `""` is an empty MariaDB set).
    fn from_str(text: &str) -> Result<GtidSet> {
        let flavor = if text.contains(':') {
            Flavor::MySql
        } else {
            Flavor::MariaDb
        };
        GtidSet::parse(flavor, text)
    }
}

impl Serialize for GtidSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GtidSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
