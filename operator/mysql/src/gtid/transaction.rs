//! One transaction's GTID and the "source" part of it that GTID sets group by.

use std::fmt;

use crate::{Error, Flavor, Result};

/// The largest MySQL GNO (transaction number): MySQL stores it as a signed 64-bit integer.
pub(crate) const MYSQL_SEQ_MAX: u64 = i64::MAX as u64;

/// The longest MySQL GTID tag (MySQL 8.4: 32 characters).
const MYSQL_TAG_LEN_MAX: usize = 32;

/// What a GTID set groups sequence numbers by.
///
/// - MariaDB: `(domain, server_id)`. Sequence numbers are per domain, so two keys of one
///   domain share one number line: the same number under two server ids means two different
///   transactions, i.e. diverged histories.
/// - MySQL: `(server UUID, tag)`, each key its own number line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Source {
    /// A MariaDB domain and the server id that wrote the transactions.
    MariaDb {
        /// GTID domain id.
        domain: u32,
        /// Server id of the server that originally committed the transaction.
        server_id: u32,
    },
    /// A MySQL source UUID and optional tag (MySQL 8.3+ tagged GTIDs).
    MySql {
        /// The server UUID as 128 bits.
        uuid: u128,
        /// The tag, normalised to lowercase; `None` for untagged GTIDs.
        tag: Option<String>,
    },
}

impl Source {
    /// The flavor this source belongs to.
    pub(crate) fn flavor(&self) -> Flavor {
        match self {
            Source::MariaDb { .. } => Flavor::MariaDb,
            Source::MySql { .. } => Flavor::MySql,
        }
    }
}

/// Parses a MySQL server UUID (`8-4-4-4-12` hex digits, any case).
pub(crate) fn parse_uuid(text: &str) -> Result<u128> {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths_ok = groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len);
    if !lengths_ok || !text.chars().all(|c| c == '-' || c.is_ascii_hexdigit()) {
        return Err(Error::InvalidUuid(text.to_string()));
    }
    u128::from_str_radix(&groups.concat(), 16).map_err(|_| Error::InvalidUuid(text.to_string()))
}

/// Formats a UUID in MySQL's lowercase `8-4-4-4-12` form.
pub(crate) fn format_uuid(uuid: u128) -> String {
    let hex = format!("{uuid:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Validates and normalises (lowercases) a MySQL GTID tag.
pub(crate) fn parse_tag(text: &str) -> Result<String> {
    let mut chars = text.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !first_ok || !rest_ok || text.len() > MYSQL_TAG_LEN_MAX {
        return Err(Error::InvalidTag(text.to_string()));
    }
    Ok(text.to_ascii_lowercase())
}

/// One transaction's global transaction id.
///
/// MariaDB: `domain-server_id-seq` (for example `0-1-100`). MySQL: `uuid:seq` or, for tagged
/// GTIDs, `uuid:tag:seq`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gtid {
    pub(crate) source: Source,
    pub(crate) seq: u64,
}

impl Gtid {
    /// A MariaDB GTID: transaction `seq` of `domain`, committed by `server_id`.
    ///
    /// MariaDB sequence numbers start at 1; a GTID with `seq` 0 names no transaction and
    /// [`GtidSet::insert`](crate::GtidSet::insert) ignores it.
    pub fn mariadb(domain: u32, server_id: u32, seq: u64) -> Gtid {
        Gtid {
            source: Source::MariaDb { domain, server_id },
            seq,
        }
    }

    /// A MySQL GTID `uuid:seq`. Fails on a malformed UUID or a `seq` outside `1..=i64::MAX`.
    pub fn mysql(uuid: &str, seq: u64) -> Result<Gtid> {
        Self::mysql_source(uuid, None, seq)
    }

    /// A tagged MySQL GTID `uuid:tag:seq` (MySQL 8.3+). Tags are case-insensitive and stored
    /// lowercase.
    pub fn mysql_tagged(uuid: &str, tag: &str, seq: u64) -> Result<Gtid> {
        Self::mysql_source(uuid, Some(tag), seq)
    }

    fn mysql_source(uuid: &str, tag: Option<&str>, seq: u64) -> Result<Gtid> {
        if seq == 0 {
            return Err(Error::ZeroSequence);
        }
        if seq > MYSQL_SEQ_MAX {
            return Err(Error::GtidParse {
                flavor: Flavor::MySql,
                position: 0,
                reason: format!("transaction number {seq} exceeds {MYSQL_SEQ_MAX}"),
                text: uuid.to_string(),
            });
        }
        let uuid = parse_uuid(uuid)?;
        let tag = tag.map(parse_tag).transpose()?;
        Ok(Gtid {
            source: Source::MySql { uuid, tag },
            seq,
        })
    }

    /// The flavor of this GTID.
    pub fn flavor(&self) -> Flavor {
        self.source.flavor()
    }

    /// The sequence number (MariaDB `seq_no`, MySQL GNO).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The MariaDB domain id, or `None` for a MySQL GTID.
    pub fn domain(&self) -> Option<u32> {
        match self.source {
            Source::MariaDb { domain, .. } => Some(domain),
            Source::MySql { .. } => None,
        }
    }

    /// The MariaDB server id, or `None` for a MySQL GTID.
    pub fn server_id(&self) -> Option<u32> {
        match self.source {
            Source::MariaDb { server_id, .. } => Some(server_id),
            Source::MySql { .. } => None,
        }
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::MariaDb { domain, server_id } => {
                write!(f, "{domain}-{server_id}-{}", self.seq)
            }
            Source::MySql { uuid, tag: None } => write!(f, "{}:{}", format_uuid(*uuid), self.seq),
            Source::MySql {
                uuid,
                tag: Some(tag),
            } => write!(f, "{}:{tag}:{}", format_uuid(*uuid), self.seq),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Brief: Gtid::mysql validates the UUID.
    #[test]
    fn mysql_gtid_validates_uuid_and_sequence() {
        let gtid = Gtid::mysql("3E11FA47-71CA-11E1-9E33-C80AA9429562", 23);
        assert_eq!(
            gtid.map(|g| g.to_string()),
            Ok("3e11fa47-71ca-11e1-9e33-c80aa9429562:23".to_string())
        );
        assert!(matches!(
            Gtid::mysql("3E11FA47-71CA-11E1-9E33", 1),
            Err(Error::InvalidUuid(_))
        ));
        assert!(matches!(
            Gtid::mysql("3E11FA47-71CA-11E1-9E33-C80AA942956Z", 1),
            Err(Error::InvalidUuid(_))
        ));
        assert_eq!(
            Gtid::mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562", 0),
            Err(Error::ZeroSequence)
        );
        assert!(Gtid::mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562", MYSQL_SEQ_MAX + 1).is_err());
    }

    #[test]
    fn tagged_mysql_gtid_lowercases_tag_and_rejects_bad_tags() {
        let gtid = Gtid::mysql_tagged("3e11fa47-71ca-11e1-9e33-c80aa9429562", "Deploy_1", 5);
        assert_eq!(
            gtid.map(|g| g.to_string()),
            Ok("3e11fa47-71ca-11e1-9e33-c80aa9429562:deploy_1:5".to_string())
        );
        for bad in ["", "1abc", "with-dash", &"x".repeat(33)] {
            assert!(
                Gtid::mysql_tagged("3e11fa47-71ca-11e1-9e33-c80aa9429562", bad, 5).is_err(),
                "{bad:?} must be rejected"
            );
        }
    }

    #[test]
    fn mariadb_gtid_displays_domain_server_seq() {
        let gtid = Gtid::mariadb(0, 1, 100);
        assert_eq!(gtid.to_string(), "0-1-100");
        assert_eq!(
            (gtid.domain(), gtid.server_id(), gtid.seq()),
            (Some(0), Some(1), 100)
        );
        assert_eq!(gtid.flavor(), Flavor::MariaDb);
    }
}
