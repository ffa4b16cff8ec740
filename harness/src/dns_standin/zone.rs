//! What the stand-in serves (pure): the A records it last applied, by name, and the answer to
//! one question.
//!
//! Answers: for a name it holds, an A (or ANY) question gets its addresses and any other type
//! an empty NOERROR; every answer is authoritative. A name it does not hold is NXDOMAIN, as a
//! DNS provider answers for a record that was never published or was removed. A question of
//! another class than IN is refused: the stand-in serves no other class.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use hickory_proto::rr::{DNSClass, RecordType};

use super::records::{normalize_name, ARecord, ObjectKey};

/// The addresses of one name and the TTL they are served with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRecords {
    /// The addresses, sorted, without duplicates.
    pub addresses: Vec<Ipv4Addr>,
    /// The lowest `recordTTL` among the objects that publish the name.
    pub ttl_seconds: u32,
}

/// The records served, by normalized name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    names: BTreeMap<String, NameRecords>,
}

/// The answer to one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The name is held: these addresses with this TTL (no addresses when the question asked
    /// for another type than A).
    Records {
        /// The A addresses.
        addresses: Vec<Ipv4Addr>,
        /// Their TTL.
        ttl_seconds: u32,
    },
    /// The name is not held (NXDOMAIN).
    NoSuchName,
    /// The question is of a class the stand-in does not serve (REFUSED).
    Refused,
}

impl Zone {
    /// The zone of the applied records of every object; objects that publish one name share
    /// it (their addresses merged, the lowest TTL kept).
    pub fn from_applied(applied: &BTreeMap<ObjectKey, Vec<ARecord>>) -> Self {
        let mut names: BTreeMap<String, NameRecords> = BTreeMap::new();
        for record in applied.values().flatten() {
            let entry = names
                .entry(record.name.clone())
                .or_insert_with(|| NameRecords {
                    addresses: Vec::new(),
                    ttl_seconds: record.ttl_seconds,
                });
            entry.addresses.extend(&record.targets);
            entry.ttl_seconds = entry.ttl_seconds.min(record.ttl_seconds);
        }
        for records in names.values_mut() {
            records.addresses.sort();
            records.addresses.dedup();
        }
        Self { names }
    }

    /// How many names are served.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name is served.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The answer to `name` (`record_type`, `class`).
    pub fn answer(&self, name: &str, record_type: RecordType, class: DNSClass) -> Answer {
        if class != DNSClass::IN && class != DNSClass::ANY {
            return Answer::Refused;
        }
        let Some(records) = self.names.get(&normalize_name(name)) else {
            return Answer::NoSuchName;
        };
        let addresses = if record_type == RecordType::A || record_type == RecordType::ANY {
            records.addresses.clone()
        } else {
            Vec::new()
        };
        Answer::Records {
            addresses,
            ttl_seconds: records.ttl_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().expect("ip")
    }

    fn zone() -> Zone {
        let record = |name: &str, targets: &[&str], ttl_seconds| ARecord {
            name: name.into(),
            targets: targets.iter().map(|t| ip(t)).collect(),
            ttl_seconds,
        };
        let applied = BTreeMap::from([
            (
                ObjectKey::new("ns", "a"),
                vec![
                    record("db.example.local", &["10.0.0.2"], 10),
                    record("readers.example.local", &["10.0.0.3", "10.0.0.4"], 30),
                ],
            ),
            (
                ObjectKey::new("ns", "b"),
                vec![record("db.example.local", &["10.0.0.1", "10.0.0.2"], 20)],
            ),
        ]);
        Zone::from_applied(&applied)
    }

    // docs/design/harness.md#the-portable-path: the stand-in answers A for the names it holds,
    // with recordTTL as the TTL; two objects publishing one name share it.
    #[test]
    fn an_a_question_for_a_held_name_gets_its_addresses() {
        let zone = zone();
        assert_eq!(zone.len(), 2);
        assert_eq!(
            zone.answer("DB.example.local.", RecordType::A, DNSClass::IN),
            Answer::Records {
                addresses: vec![ip("10.0.0.1"), ip("10.0.0.2")],
                ttl_seconds: 10,
            }
        );
        assert_eq!(
            zone.answer("readers.example.local", RecordType::ANY, DNSClass::IN),
            Answer::Records {
                addresses: vec![ip("10.0.0.3"), ip("10.0.0.4")],
                ttl_seconds: 30,
            }
        );
    }

    // docs/design/harness.md#the-portable-path: authoritative for the names it holds: another
    // type is an empty NOERROR, never NXDOMAIN (the name exists) and never an A address.
    #[test]
    fn another_type_for_a_held_name_is_empty() {
        assert_eq!(
            zone().answer("db.example.local", RecordType::AAAA, DNSClass::IN),
            Answer::Records {
                addresses: Vec::new(),
                ttl_seconds: 10,
            }
        );
    }

    // docs/design/harness.md#the-portable-path: a name it does not hold is NXDOMAIN (a removed
    // or never published record), another class is refused.
    #[test]
    fn an_unknown_name_is_nxdomain_and_another_class_refused() {
        let zone = zone();
        assert_eq!(
            zone.answer("other.example.local", RecordType::A, DNSClass::IN),
            Answer::NoSuchName
        );
        assert_eq!(
            zone.answer("example.local", RecordType::A, DNSClass::IN),
            Answer::NoSuchName
        );
        assert_eq!(
            zone.answer("db.example.local", RecordType::A, DNSClass::CH),
            Answer::Refused
        );
        assert_eq!(
            Zone::default().answer("db.example.local", RecordType::A, DNSClass::IN),
            Answer::NoSuchName
        );
    }
}
