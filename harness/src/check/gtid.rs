//! GTIDs as the workload records them and GTID sets as the operator reports them, parsed
//! with the operator's own GTID library (so both sides read `lostGtidSet` the same way).
//! The flavor is told by the text: MySQL GTIDs have `:` (`uuid:n`, `uuid:tag:n`), MariaDB
//! ones do not (`domain-server_id-seq`).

use bloodraven_mysql::{Flavor, Gtid, GtidSet};

fn flavor_of(text: &str) -> Flavor {
    if text.contains(':') {
        Flavor::MySql
    } else {
        Flavor::MariaDb
    }
}

/// Parses one GTID: MariaDB `domain-server_id-seq` (`@@last_gtid`), MySQL `uuid:n` or
/// `uuid:tag:n` (`session_track_gtids=OWN_GTID`).
pub fn parse_gtid(text: &str) -> Result<Gtid, String> {
    let text = text.trim();
    let number = |field: &str, what: &str| {
        field
            .parse::<u64>()
            .map_err(|_| format!("{what} `{field}` of GTID `{text}` is not a number"))
    };
    match flavor_of(text) {
        Flavor::MariaDb => {
            let fields: Vec<&str> = text.split('-').collect();
            let [domain, server, seq] = fields[..] else {
                return Err(format!(
                    "GTID `{text}` is not domain-server_id-seq (MariaDB) or uuid:n (MySQL)"
                ));
            };
            let domain = u32::try_from(number(domain, "domain")?)
                .map_err(|_| format!("domain of GTID `{text}` is out of range"))?;
            let server = u32::try_from(number(server, "server id")?)
                .map_err(|_| format!("server id of GTID `{text}` is out of range"))?;
            let seq = number(seq, "sequence number")?;
            if seq == 0 {
                return Err(format!("GTID `{text}` has sequence number 0"));
            }
            Ok(Gtid::mariadb(domain, server, seq))
        }
        Flavor::MySql => {
            let fields: Vec<&str> = text.split(':').collect();
            match fields[..] {
                [uuid, seq] => Gtid::mysql(uuid, number(seq, "transaction number")?)
                    .map_err(|error| error.to_string()),
                [uuid, tag, seq] => {
                    Gtid::mysql_tagged(uuid, tag, number(seq, "transaction number")?)
                        .map_err(|error| error.to_string())
                }
                _ => Err(format!("GTID `{text}` is not uuid:n or uuid:tag:n")),
            }
        }
    }
}

/// Parses a GTID set in either flavor's text form; empty text is the empty set.
pub fn parse_gtid_set(text: &str) -> Result<GtidSet, String> {
    GtidSet::parse(flavor_of(text), text).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/operator.md#mysqlfailovergroup: lostGtidSet is the flavor's text form; MariaDB
    // writes ranges for a non-linear set (`0-1-101..103`).
    #[test]
    fn mariadb_gtids_are_found_in_range_and_position_sets() {
        let set = parse_gtid_set("0-1-101..103,0-1-900001..900005").expect("set");
        assert_eq!(set.count(), 8);
        let inside = parse_gtid("0-1-102").expect("gtid");
        assert!(set.contains_gtid(&inside));
        assert!(!set.contains_gtid(&parse_gtid("0-1-104").expect("gtid")));
        assert!(!set.contains_gtid(&parse_gtid("0-2-102").expect("gtid")));
        assert!(parse_gtid_set("").expect("empty").is_empty());
        assert!(parse_gtid("0-1").is_err() && parse_gtid("0-1-0").is_err());
    }

    #[test]
    fn mysql_gtids_and_tags() {
        let uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let set = parse_gtid_set(&format!("{uuid}:5-7:9")).expect("set");
        assert_eq!(set.count(), 4);
        assert!(set.contains_gtid(&parse_gtid(&format!("{uuid}:9")).expect("gtid")));
        assert!(!set.contains_gtid(&parse_gtid(&format!("{uuid}:8")).expect("gtid")));
        assert!(parse_gtid(&format!("{uuid}:harness:3")).is_ok());
        assert!(parse_gtid("not-a-uuid:3").is_err());
    }
}
