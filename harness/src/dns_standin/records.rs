//! `DNSEndpoint` objects to A records (pure): what the stand-in would publish for one object.
//!
//! Only `recordType: A` is served; other types (`AAAA`, `CNAME`, `TXT`, ...) are left out, not
//! errors: Bloodraven writes A records only (`bloodraven_api::DNSEndpointSpec::a_record`). An
//! object that is malformed (no `spec`, an endpoint without `dnsName`, an A target that is not
//! an IPv4 address, a `recordTTL` out of range, ...) is skipped as a whole, with an error that
//! names the object and the field, as external-dns skips an endpoint it cannot publish.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use serde_json::Value;

use crate::error::{Error, Result};

/// TTL of a record without `recordTTL`: the answer TTL of localkube's own external-dns
/// stand-in (`localkube_runtime::dns::TTL_SECONDS`), so both stand-ins answer alike.
pub const DEFAULT_TTL_SECONDS: u32 = 5;
/// The largest TTL a record may carry (RFC 2181 section 8: a TTL is 31 bits).
pub const TTL_SECONDS_MAX: i64 = 0x7fff_ffff;

/// Which `DNSEndpoint` object: `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectKey {
    /// `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One A record set: `name` -> `targets`, with `ttl_seconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ARecord {
    /// The owner name, lower case, without the trailing dot.
    pub name: String,
    /// The addresses, in the order the object lists them.
    pub targets: Vec<Ipv4Addr>,
    /// `recordTTL`, or [`DEFAULT_TTL_SECONDS`].
    pub ttl_seconds: u32,
}

impl fmt::Display for ARecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let targets: Vec<String> = self.targets.iter().map(ToString::to_string).collect();
        write!(
            f,
            "{} A [{}] ttl {}s",
            self.name,
            targets.join(", "),
            self.ttl_seconds
        )
    }
}

/// A name as the stand-in stores and looks it up: lower case, no trailing dot.
pub fn normalize_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn malformed(key: &ObjectKey, reason: String) -> Error {
    Error::Cluster {
        action: format!("read DNSEndpoint {key}"),
        reason,
    }
}

/// Checks a record name the way a DNS server must take it: 1 to 253 characters, labels of 1
/// to 63 characters (letters, digits, `-`, `_`, or a leading `*` label).
fn check_name(name: &str) -> std::result::Result<String, String> {
    let normalized = normalize_name(name);
    if normalized.is_empty() {
        return Err("is empty".to_owned());
    }
    if normalized.len() > 253 {
        return Err(format!(
            "is {} characters long (at most 253)",
            normalized.len()
        ));
    }
    for (index, label) in normalized.split('.').enumerate() {
        if label.is_empty() {
            return Err("has an empty label".to_owned());
        }
        if label.len() > 63 {
            return Err(format!(
                "has a label of {} characters (at most 63)",
                label.len()
            ));
        }
        let wildcard = index == 0 && label == "*";
        if !wildcard
            && !label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "has a label {label:?} with a character DNS does not allow"
            ));
        }
    }
    Ok(normalized)
}

/// The A records of one `DNSEndpoint`, from the object's body (`spec.endpoints[]`; the other
/// top-level fields are ignored). An error names the object and the field at fault.
pub fn records_of(key: &ObjectKey, object: &Value) -> Result<Vec<ARecord>> {
    let Some(spec) = object.get("spec") else {
        return Err(malformed(key, "it has no spec".to_owned()));
    };
    let endpoints = match spec.get("endpoints") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(endpoints)) => endpoints,
        Some(other) => {
            return Err(malformed(
                key,
                format!("spec.endpoints is {other}, not a list"),
            ))
        }
    };
    let mut records = Vec::new();
    for (index, endpoint) in endpoints.iter().enumerate() {
        let field = |name: &str| format!("spec.endpoints[{index}].{name}");
        let text = |name: &str| -> Result<&str> {
            match endpoint.get(name) {
                Some(Value::String(text)) => Ok(text),
                None | Some(Value::Null) => {
                    Err(malformed(key, format!("{} is missing", field(name))))
                }
                Some(other) => Err(malformed(
                    key,
                    format!("{} is {other}, not a string", field(name)),
                )),
            }
        };
        let record_type = text("recordType")?;
        let dns_name = text("dnsName")?;
        let name = check_name(dns_name)
            .map_err(|why| malformed(key, format!("{} {dns_name:?} {why}", field("dnsName"))))?;
        if !record_type.eq_ignore_ascii_case("A") {
            continue;
        }
        let ttl_seconds = match endpoint.get("recordTTL") {
            None | Some(Value::Null) => DEFAULT_TTL_SECONDS,
            Some(Value::Number(number)) => match number.as_i64() {
                Some(ttl) if (0..=TTL_SECONDS_MAX).contains(&ttl) => {
                    u32::try_from(ttl).unwrap_or(DEFAULT_TTL_SECONDS)
                }
                _ => {
                    return Err(malformed(
                        key,
                        format!(
                        "{} is {number}, not a whole number of seconds from 0 to {TTL_SECONDS_MAX}",
                        field("recordTTL")
                    ),
                    ))
                }
            },
            Some(other) => {
                return Err(malformed(
                    key,
                    format!("{} is {other}, not a number", field("recordTTL")),
                ))
            }
        };
        let targets = match endpoint.get("targets") {
            Some(Value::Array(targets)) if !targets.is_empty() => targets,
            None | Some(Value::Null) | Some(Value::Array(_)) => {
                return Err(malformed(
                    key,
                    format!("{} of the A record {name} is empty", field("targets")),
                ))
            }
            Some(other) => {
                return Err(malformed(
                    key,
                    format!("{} is {other}, not a list", field("targets")),
                ))
            }
        };
        let mut addresses = Vec::with_capacity(targets.len());
        for (target_index, target) in targets.iter().enumerate() {
            let address = target
                .as_str()
                .and_then(|text| text.parse::<Ipv4Addr>().ok())
                .ok_or_else(|| {
                    malformed(
                        key,
                        format!(
                            "{}[{target_index}] is {target}, not an IPv4 address",
                            field("targets")
                        ),
                    )
                })?;
            addresses.push(address);
        }
        records.push(ARecord {
            name,
            targets: addresses,
            ttl_seconds,
        });
    }
    Ok(records)
}

/// The records of many objects, each by its key; a malformed object is left out and its error
/// returned beside the records of the others.
pub fn record_set<'a>(
    objects: impl IntoIterator<Item = (ObjectKey, &'a Value)>,
) -> (BTreeMap<ObjectKey, Vec<ARecord>>, Vec<Error>) {
    let mut records = BTreeMap::new();
    let mut errors = Vec::new();
    for (key, object) in objects {
        match records_of(&key, object) {
            Ok(found) => {
                records.insert(key, found);
            }
            Err(error) => errors.push(error),
        }
    }
    (records, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("bloodraven-playground", name)
    }

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().expect("ip")
    }

    // docs/design/harness.md#the-portable-path: the in-cluster stand-in for external-dns serves
    // each DNSEndpoint's A records, name -> targets with recordTTL as the TTL, as the operator
    // writes them (docs/design/requirements.md R000.11-R000.12).
    #[test]
    fn a_dns_endpoint_with_several_endpoints_and_targets_becomes_a_records() {
        let object = json!({"spec": {"endpoints": [
            {"dnsName": "Playground-DB.example.local.", "recordType": "A", "recordTTL": 10,
             "targets": ["10.96.100.20"]},
            {"dnsName": "readers.example.local", "recordType": "A",
             "targets": ["10.96.100.21", "10.96.100.22"]},
            {"dnsName": "alias.example.local", "recordType": "CNAME",
             "targets": ["playground-db.example.local"]},
        ]}, "status": {"observedGeneration": 3}});
        let records = records_of(&key("db"), &object).expect("records");
        assert_eq!(
            records,
            vec![
                ARecord {
                    name: "playground-db.example.local".into(),
                    targets: vec![ip("10.96.100.20")],
                    ttl_seconds: 10,
                },
                ARecord {
                    name: "readers.example.local".into(),
                    targets: vec![ip("10.96.100.21"), ip("10.96.100.22")],
                    ttl_seconds: DEFAULT_TTL_SECONDS,
                },
            ],
            "names are lower-cased without the dot; a CNAME is not served; no TTL means the default"
        );
        assert_eq!(
            records_of(&key("empty"), &json!({"spec": {}})).expect("no endpoints"),
            Vec::new()
        );
    }

    // docs/design/harness.md#the-portable-path: a malformed DNSEndpoint is skipped with an
    // error naming the object and the field; the others are still served; nothing panics.
    #[test]
    fn a_malformed_dns_endpoint_is_named_in_its_error_and_skipped() {
        let good = json!({"spec": {"endpoints": [
            {"dnsName": "db.example.local", "recordType": "A", "targets": ["10.0.0.1"]}]}});
        let cases = [
            (json!({"metadata": {}}), "it has no spec"),
            (
                json!({"spec": {"endpoints": "db"}}),
                "spec.endpoints is \"db\", not a list",
            ),
            (
                json!({"spec": {"endpoints": [{"recordType": "A", "targets": ["10.0.0.1"]}]}}),
                "spec.endpoints[0].dnsName is missing",
            ),
            (
                json!({"spec": {"endpoints": [{"dnsName": "db.example.local", "targets": []}]}}),
                "spec.endpoints[0].recordType is missing",
            ),
            (
                json!({"spec": {"endpoints": [{"dnsName": "db..local", "recordType": "A",
                    "targets": ["10.0.0.1"]}]}}),
                "spec.endpoints[0].dnsName \"db..local\" has an empty label",
            ),
            (
                json!({"spec": {"endpoints": [good["spec"]["endpoints"][0].clone(),
                    {"dnsName": "x.example.local", "recordType": "A",
                     "targets": ["10.0.0.2", "10.0.0.300"]}]}}),
                "spec.endpoints[1].targets[1] is \"10.0.0.300\", not an IPv4 address",
            ),
            (
                json!({"spec": {"endpoints": [{"dnsName": "x.example.local", "recordType": "A",
                    "targets": []}]}}),
                "spec.endpoints[0].targets of the A record x.example.local is empty",
            ),
            (
                json!({"spec": {"endpoints": [{"dnsName": "x.example.local", "recordType": "A",
                    "recordTTL": -1, "targets": ["10.0.0.1"]}]}}),
                "spec.endpoints[0].recordTTL is -1, not a whole number of seconds",
            ),
            (
                json!({"spec": {"endpoints": [{"dnsName": "x.example.local", "recordType": "A",
                    "recordTTL": "10", "targets": ["10.0.0.1"]}]}}),
                "spec.endpoints[0].recordTTL is \"10\", not a number",
            ),
        ];
        for (bad, reason) in &cases {
            let objects = [(key("good"), &good), (key("bad"), bad)];
            let (records, errors) = record_set(objects);
            assert_eq!(records.len(), 1, "the good object stays: {bad}");
            assert!(records.contains_key(&key("good")));
            assert_eq!(errors.len(), 1, "{bad}");
            let message = errors[0].to_string();
            assert!(
                message.starts_with("read DNSEndpoint bloodraven-playground/bad: "),
                "{message}"
            );
            assert!(message.contains(reason), "{message} should say {reason}");
        }
    }
}
