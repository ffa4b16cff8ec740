//! Judging an expectation against what [`crate::backend::Cluster::observe`] returned.
//!
//! Observation shapes, per target (JSON):
//!
//! | target | observed |
//! |---|---|
//! | group | the group's `.status` |
//! | pods | a list of Pod objects (empty when none), each with `nodeLabels`: its node's labels (absent when unscheduled) |
//! | endpoints | `{"sites": ["pdx"], "serviceExists": true}`; with `recorded`, the probe's readings since the step's window start (`check::endpoint_history`) |
//! | dns-endpoint | `{"site": "iad", "recordTTL": 10, "fieldManagers": ["bloodraven"]}` (the managers of `spec.endpoints`) |
//! | dns | `{"site": "pdx"}` (`null` site: answered no site's ClusterIP) |
//! | counter | `{"value": 7, "readOnly": false, "dbSite": "iad", "connectionId": 12, "write": "ok"}` (`connectionId`: the answering connection, `null` when none is held) |
//! | deploy-api | `{"status": 409, "body": {...}, "expiresIn": 119.6}` (`expiresAt` minus the `Date` header, s; `null` without either) |
//! | metric | `{"value": 1.0}` (`null`: no such sample) |
//! | event | `{"events": [{"reason": "PrimaryReasserted", "type": "Normal", "message": "...", "time": "2026-01-01T00:00:07Z"}]}`: every event of the group's namespace with that reason (more are fine); `time` is the latest occurrence (`lastTimestamp`, else `eventTime`, else `firstTimestamp`) |
//! | object | the object, or `null` when absent |
//! | node | `{"demotedTaint": true}` |
//! | connection | `{"writeError": 1290, "site": "iad"}` (`null` error: the write succeeded; `null` site: nobody answered `@@hostname`), or `{"sentWrite": "pending"}` |
//! | mysql | `{"readOnly": true, "replicating": false, "clockOffsetMs": -20012, "roundTripMs": 40, "writeDeadlineAgoMs": 640}` |
//! | archive | `{"site": "iad", "archives": [{"name": "rejoin-iad-1767225600", "manifest": true, "createdAt": .., "rejoinId": .., "errantGtidSet": "0-1-101..140", "binlogGtids": ["0-1-101", ..], "files": [{"name", "role", "bytes", "sha256", "readBytes", "readSha256"}], "problems": []}]}` ([`crate::check::archive::ArchiveObservation`]) |

use serde_json::{json, Value};

use crate::scenario::matcher::matches;
use crate::scenario::model::{Expect, OutcomeKind};

/// At the end of a `for` window: an `increasing` counter must be above its baseline (it climbed
/// during the window, docs/design/requirements.md R001.3); `Err` says it did not. Other
/// expectations pass.
pub fn climbed(
    expect: &Expect,
    baseline: Option<&Value>,
    last: Option<&Value>,
) -> Result<(), String> {
    if expect.counter.as_ref().and_then(|c| c.increasing) != Some(true) {
        return Ok(());
    }
    let value = |v: Option<&Value>| v.and_then(|v| v.get("value")).and_then(Value::as_i64);
    match (value(baseline), value(last)) {
        (Some(before), Some(now)) if now > before => Ok(()),
        (before, now) => Err(format!(
            "counter did not climb over the window: {before:?} -> {now:?}"
        )),
    }
}

/// Whether `observed` satisfies `expect`; `baseline` is the observation before the step's
/// fault or else the first observation of this expectation (for `$changed`/`$unchanged` and
/// `increasing`), `None` on the first poll itself (which is then its own baseline). Events
/// count only when they occurred at or after `since` (to the second: Kubernetes event
/// times have second precision), archives only when written since `since` (the runner passes
/// the scenario's start for them). The error says what differs.
pub fn evaluate(
    expect: &Expect,
    observed: &Value,
    baseline: Option<&Value>,
    since: jiff::Timestamp,
) -> Result<(), String> {
    let first_poll = baseline.is_none();
    let baseline = Some(baseline.unwrap_or(observed));
    if let Some(group) = &expect.group {
        return matches(group, Some(observed), baseline);
    }
    if let Some(pods) = &expect.pods {
        let items = observed.as_array().map(Vec::as_slice).unwrap_or_default();
        if pods.phase.as_deref() == Some("absent") {
            return if items.is_empty() {
                Ok(())
            } else {
                Err(format!("expected no pod, found {}", items.len()))
            };
        }
        if items.is_empty() {
            return Err("no such pod".to_owned());
        }
        for pod in items {
            let name = pod
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("?");
            if let Some(phase) = &pods.phase {
                matches(&json!(phase), pod.pointer("/status/phase"), None)
                    .map_err(|why| format!("pod {name} phase: {why}"))?;
            }
            if let Some(labels) = &pods.labels {
                let expected = serde_json::to_value(labels).unwrap_or(Value::Null);
                matches(&expected, pod.pointer("/metadata/labels"), None)
                    .map_err(|why| format!("pod {name} labels: {why}"))?;
            }
            if let Some(node_labels) = &pods.node_labels {
                matches(node_labels, pod.get("nodeLabels"), None)
                    .map_err(|why| format!("pod {name} node labels: {why}"))?;
            }
            if let Some(restarts) = &pods.restarts {
                // `$changed`/`$unchanged` compare with the same pod's count in the baseline
                // (a pod the baseline lacks has no baseline count).
                let before = baseline
                    .and_then(Value::as_array)
                    .and_then(|pods| {
                        pods.iter().find(|old| {
                            old.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                        })
                    })
                    .map(|old| json!(restart_count(old)));
                matches(restarts, Some(&json!(restart_count(pod))), before.as_ref())
                    .map_err(|why| format!("pod {name} restarts: {why}"))?;
            }
        }
        return Ok(());
    }
    if let Some(endpoints) = &expect.endpoints {
        if endpoints.recorded {
            return crate::check::endpoint_history::judge(
                &endpoints.service,
                &endpoints.sites,
                observed,
                since,
            );
        }
        // No endpoint of a Service that is not there is no evidence of anything.
        if observed.get("serviceExists") == Some(&Value::Bool(false)) {
            return Err(format!(
                "{} endpoints: the Service does not exist",
                endpoints.service
            ));
        }
        let mut want: Vec<&str> = endpoints.sites.iter().map(|site| site.name()).collect();
        let mut found: Vec<&str> = observed
            .get("sites")
            .and_then(Value::as_array)
            .map(|sites| sites.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        want.sort_unstable();
        found.sort_unstable();
        return if want == found {
            Ok(())
        } else {
            Err(format!(
                "{} endpoints: expected sites {want:?}, found {found:?}",
                endpoints.service
            ))
        };
    }
    if let Some(record) = &expect.dns_endpoint {
        let mut expected = json!({"site": record.target.0.name()});
        if let Some(ttl) = record.record_ttl {
            expected["recordTTL"] = json!(ttl);
        }
        if let Some(manager) = &record.field_manager {
            // The one manager owning `spec.endpoints`: another beside it is not ownership.
            expected["fieldManagers"] = json!({"$exact": [manager]});
        }
        return matches(&expected, Some(observed), None)
            .map_err(|why| format!("DNSEndpoint {why}"));
    }
    if let Some(dns) = &expect.dns {
        return matches(&json!({"site": dns.target.0.name()}), Some(observed), None)
            .map_err(|why| format!("DNS answer {why}"));
    }
    if let Some(counter) = &expect.counter {
        let mut expected = serde_json::Map::new();
        if let Some(read_only) = counter.read_only {
            expected.insert("readOnly".to_owned(), json!(read_only));
        }
        if let Some(site) = counter.db_site {
            expected.insert("dbSite".to_owned(), json!(site.name()));
        }
        if let Some(write) = counter.write {
            let name = match write {
                OutcomeKind::Ok => "ok",
                OutcomeKind::Fail => "fail",
                OutcomeKind::Info => "info",
            };
            expected.insert("write".to_owned(), json!(name));
        }
        if let Some(code) = counter.write_error {
            expected.insert("writeError".to_owned(), json!(code));
        }
        if let Some(connection_id) = &counter.connection_id {
            expected.insert("connectionId".to_owned(), connection_id.clone());
        }
        matches(&Value::Object(expected), Some(observed), baseline)
            .map_err(|why| format!("counter {why}"))?;
        if counter.increasing == Some(true) {
            let now = observed.get("value").and_then(Value::as_i64);
            let before = baseline
                .and_then(|base| base.get("value"))
                .and_then(Value::as_i64);
            // `for`: it never falls below the baseline on any poll (a counter writing every
            // second reads equal on two polls 250 ms apart) and must have climbed by the end
            // of the window ([`climbed`]); `within`: it becomes strictly greater.
            let holding = expect.for_.is_some();
            match (before, now) {
                (Some(_), Some(_)) if first_poll => {}
                (Some(before), Some(now)) if now > before || (holding && now == before) => {}
                (before, now) => {
                    return Err(format!("counter not increasing: {before:?} -> {now:?}"))
                }
            }
        }
        return Ok(());
    }
    if let Some(deploy) = &expect.deploy_api {
        let status = observed.get("status").and_then(Value::as_u64);
        if status != Some(u64::from(deploy.status)) {
            return Err(format!(
                "deploy API {:?} {}: expected status {}, found {}",
                deploy.request.method,
                deploy.request.path,
                deploy.status,
                status.map_or_else(|| "none".to_owned(), |code| code.to_string())
            ));
        }
        if let Some(body) = &deploy.body {
            matches(body, observed.get("body"), None)
                .map_err(|why| format!("deploy API body {why}"))?;
        }
        if let Some(expires_in) = &deploy.expires_in {
            matches(expires_in, observed.get("expiresIn"), None)
                .map_err(|why| format!("deploy API expiresAt - Date (s) {why}"))?;
        }
        return Ok(());
    }
    if let Some(metric) = &expect.metric {
        return matches(
            &metric.value,
            observed.get("value"),
            baseline.and_then(|base| base.get("value")),
        )
        .map_err(|why| format!("metric {}: {why}", metric.name));
    }
    if let Some(event) = &expect.event {
        return evaluate_event(event, observed, since);
    }
    if let Some(object) = &expect.object {
        let present = (!observed.is_null()).then_some(observed);
        return matches(&object.match_, present, baseline)
            .map_err(|why| format!("{} {}: {why}", object.kind, object.name));
    }
    if let Some(node) = &expect.node {
        return matches(
            &json!({"demotedTaint": node.demoted_taint}),
            Some(observed),
            None,
        )
        .map_err(|why| format!("node of {}: {why}", node.site));
    }
    if let Some(connection) = &expect.connection {
        let expected = match connection.sent_write {
            Some(sent) => json!({"sentWrite": sent.as_str()}),
            None => {
                // `writeError: null` means committed: an answer without the field is no
                // answer, not a success.
                if observed.get("writeError").is_none() {
                    return Err(format!(
                        "connection {}: the observation has no write outcome: {observed}",
                        connection.name
                    ));
                }
                let mut expected = json!({"writeError": connection.write_error});
                if let Some(site) = connection.site {
                    expected["site"] = json!(site.name());
                }
                expected
            }
        };
        return matches(&expected, Some(observed), None)
            .map_err(|why| format!("connection {}: {why}", connection.name));
    }
    if let Some(mysql) = &expect.mysql {
        let mut expected = serde_json::Map::new();
        if let Some(read_only) = mysql.read_only {
            expected.insert("readOnly".to_owned(), json!(read_only));
        }
        if let Some(replicating) = mysql.replicating {
            expected.insert("replicating".to_owned(), json!(replicating));
        }
        if let Some(range) = &mysql.clock_offset {
            let bound = |text: &str| crate::scenario::model::offset_ms(text);
            let (low, high) = match (bound(&range.at_least), bound(&range.at_most)) {
                (Ok(low), Ok(high)) => (low, high),
                (Err(why), _) | (_, Err(why)) => return Err(format!("mysql.clockOffset: {why}")),
            };
            expected.insert(
                "clockOffsetMs".to_owned(),
                json!({"$gte": low, "$lte": high}),
            );
        }
        if let Some(within) = mysql.write_deadline_ran_within {
            // LAST_EXECUTED has whole seconds: up to a second "ahead" of NOW(6) is no stall.
            let within_ms = i64::try_from(within.duration().as_millis()).unwrap_or(i64::MAX);
            expected.insert(
                "writeDeadlineAgoMs".to_owned(),
                json!({"$gte": -1000, "$lte": within_ms}),
            );
        }
        return matches(&Value::Object(expected), Some(observed), None)
            .map_err(|why| format!("mysqld of {}: {why}", mysql.site));
    }
    if expect.archive.is_some() {
        let observation: crate::check::archive::ArchiveObservation =
            serde_json::from_value(observed.clone())
                .map_err(|error| format!("archive: the observation does not read: {error}"))?;
        return crate::check::archive::judge_observation(&observation, since);
    }
    Err("names no target".to_owned())
}

/// The sum of a pod's containers' `restartCount`.
fn restart_count(pod: &Value) -> u64 {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|statuses| {
            statuses
                .iter()
                .filter_map(|status| status.get("restartCount").and_then(Value::as_u64))
                .sum()
        })
        .unwrap_or(0)
}

/// An event expectation: an event of that reason, type and message at or after `since`.
fn evaluate_event(
    event: &crate::scenario::model::EventExpect,
    observed: &Value,
    since: jiff::Timestamp,
) -> Result<(), String> {
    // Event times are whole seconds: an event in the same second as `since` counts.
    let floor = jiff::Timestamp::from_second(since.as_second()).unwrap_or(since);
    let events = observed
        .get("events")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let field = |item: &Value, key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut earlier = 0;
    let mut other = 0;
    for item in events {
        if field(item, "reason").as_deref() != Some(event.reason.as_str()) {
            continue;
        }
        let type_ok = event
            .type_
            .as_deref()
            .is_none_or(|wanted| field(item, "type").as_deref() == Some(wanted));
        let message_ok = event.message_contains.as_deref().is_none_or(|needle| {
            field(item, "message").is_some_and(|message| message.contains(needle))
        });
        if !(type_ok && message_ok) {
            other += 1;
            continue;
        }
        let time = field(item, "time").and_then(|text| text.parse::<jiff::Timestamp>().ok());
        match time {
            Some(time) if time >= floor => return Ok(()),
            _ => earlier += 1,
        }
    }
    let mut wanted = event.reason.clone();
    if let Some(type_) = &event.type_ {
        wanted = format!("{type_} {wanted}");
    }
    if let Some(needle) = &event.message_contains {
        wanted = format!("{wanted} with a message containing {needle:?}");
    }
    Err(format!(
        "no {wanted} event since {since:.0} ({earlier} earlier or undated, {other} of another type or message)"
    ))
}

/// A short human name for an expectation, for reports.
pub fn describe(expect: &Expect) -> String {
    if let Some(name) = &expect.name {
        return name.clone();
    }
    let target = expect.targets().first().copied().unwrap_or("nothing");
    let detail = match target {
        "group" => expect.group.as_ref().map(compact),
        "pods" => expect.pods.as_ref().map(|pods| {
            let who = pods
                .site
                .map(|site| site.to_string())
                .or_else(|| pods.name.clone())
                .unwrap_or_default();
            format!("{who} {}", pods.phase.clone().unwrap_or_default())
                .trim()
                .to_owned()
        }),
        "endpoints" => expect.endpoints.as_ref().map(|endpoints| {
            let sites: Vec<&str> = endpoints.sites.iter().map(|site| site.name()).collect();
            let recorded = if endpoints.recorded {
                " (recorded)"
            } else {
                ""
            };
            format!("{} = [{}]{recorded}", endpoints.service, sites.join(", "))
        }),
        "dns-endpoint" => expect
            .dns_endpoint
            .as_ref()
            .map(|record| format!("target site-of {}", record.target.0)),
        "dns" => expect
            .dns
            .as_ref()
            .map(|dns| format!("answers site-of {}", dns.target.0)),
        "deploy-api" => expect.deploy_api.as_ref().map(|deploy| {
            format!(
                "{:?} {} -> {}",
                deploy.request.method, deploy.request.path, deploy.status
            )
        }),
        "metric" => expect
            .metric
            .as_ref()
            .map(|metric| format!("{} {}", metric.name, compact(&metric.value))),
        "event" => expect.event.as_ref().map(|event| event.reason.clone()),
        "object" => expect
            .object
            .as_ref()
            .map(|object| format!("{} {}", object.kind, object.name)),
        "node" => expect
            .node
            .as_ref()
            .map(|node| format!("{} demoted taint {}", node.site, node.demoted_taint)),
        "archive" => expect.archive.as_ref().map(|archive| {
            format!(
                "{} holds {}",
                archive.site,
                match archive.holds {
                    crate::scenario::model::ArchiveHolds::LostWrites => "its lost writes",
                }
            )
        }),
        "connection" => expect
            .connection
            .as_ref()
            .map(|connection| match connection.sent_write {
                Some(sent) => format!("{} sent write {}", connection.name, sent.as_str()),
                None => format!(
                    "{} write error {:?}",
                    connection.name, connection.write_error
                ),
            }),
        _ => None,
    };
    match detail {
        Some(detail) => format!("{target}: {detail}"),
        None => target.to_owned(),
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(77).collect();
        format!("{cut}...")
    } else {
        text
    }
}
