//! Expectation evaluation against observations, per target (each observation written in the
//! JSON shape its module in `harness/src/targets/` documents, and read into that type).

use std::path::Path;

use bloodraven_harness::runner::evaluate::describe;
use bloodraven_harness::scenario::model::{Expect, Step};
use bloodraven_harness::scenario::validate::parse_scenario;
use bloodraven_harness::targets::Observation;
use serde_json::{json, Value};

/// Parses one `expect` step written in scenario syntax.
fn expect(yaml: &str) -> Expect {
    let source =
        format!("id: 1\ntitle: t\nseed: \"harness.md: Catalogue\"\ninstall: {{deployApi: true}}\nsteps:\n- expect: {yaml}\n");
    let loaded = parse_scenario(Path::new("scenarios/001-t.yaml"), &source)
        .unwrap_or_else(|errors| panic!("{errors:?}"));
    match loaded.scenario.steps.into_iter().next() {
        Some(Step::Expect(expect)) => *expect,
        other => panic!("not an expect: {other:?}"),
    }
}

/// An observation of `expect`'s target, written in its JSON shape.
fn observation(expect: &Expect, observed: &Value) -> Result<Observation, String> {
    Observation::from_json(&expect.target, observed.clone())
}

/// [`bloodraven_harness::runner::evaluate::evaluate`] of observations written in their JSON
/// shape (one that does not read as the target's observation fails).
fn evaluate(
    expect: &Expect,
    observed: &Value,
    baseline: Option<&Value>,
    since: jiff::Timestamp,
) -> Result<(), String> {
    let observed = observation(expect, observed)?;
    let baseline = baseline
        .map(|value| observation(expect, value))
        .transpose()?;
    bloodraven_harness::runner::evaluate::evaluate(expect, &observed, baseline.as_ref(), since)
}

/// [`bloodraven_harness::runner::evaluate::climbed`] of observations written as JSON.
fn climbed(expect: &Expect, baseline: Option<&Value>, last: Option<&Value>) -> Result<(), String> {
    let read = |value: Option<&Value>| value.map(|value| observation(expect, value)).transpose();
    bloodraven_harness::runner::evaluate::climbed(
        expect,
        read(baseline)?.as_ref(),
        read(last)?.as_ref(),
    )
}

/// Evaluates with the event window open since the epoch (events are tested separately).
fn evaluate_at(expect: &Expect, observed: &Value, baseline: Option<&Value>) -> Result<(), String> {
    evaluate(expect, observed, baseline, jiff::Timestamp::UNIX_EPOCH)
}

fn pod(name: &str, phase: &str, labels: Value, restarts: u64) -> Value {
    json!({"metadata": {"name": name, "labels": labels}, "status": {"phase": phase, "containerStatuses": [{"restartCount": restarts}, {"restartCount": 0}]}})
}

// docs/design/requirements.md R000.6: role and healthy labels on the pods behind the Services.
#[test]
fn pods_phase_labels_restarts_and_absence() {
    let running = json!([pod(
        "mysql-playground-iad-0",
        "Running",
        json!({"shipstream.io/role": "primary"}),
        1
    )]);
    let primary = expect("{within: 1s, pods: {site: iad, phase: Running, labels: {shipstream.io/role: primary}, restarts: {$gte: 1}}}");
    assert_eq!(evaluate_at(&primary, &running, None), Ok(()));
    let fenced = expect("{within: 1s, pods: {site: iad, labels: {shipstream.io/role: fenced}}}");
    let error = evaluate_at(&fenced, &running, None).expect_err("wrong role");
    assert!(
        error.contains("mysql-playground-iad-0 labels") && error.contains("\"fenced\""),
        "{error}"
    );
    let absent = expect("{within: 1s, pods: {name: canary-plain, phase: absent}}");
    assert_eq!(evaluate_at(&absent, &json!([]), None), Ok(()));
    assert!(evaluate_at(&absent, &running, None).is_err());
    assert_eq!(
        evaluate_at(&primary, &json!([]), None),
        Err("no such pod".to_owned())
    );
}

#[test]
fn endpoints_are_an_exact_set_of_sites() {
    let primary = expect("{within: 1s, endpoints: {service: replicas, sites: [pdx, reader]}}");
    assert_eq!(
        evaluate_at(&primary, &json!({"sites": ["reader", "pdx"]}), None),
        Ok(())
    );
    assert!(evaluate_at(&primary, &json!({"sites": ["pdx"]}), None).is_err());
    let shed = expect("{within: 1s, endpoints: {service: primary, sites: []}}");
    assert_eq!(evaluate_at(&shed, &json!({"sites": []}), None), Ok(()));
    assert!(evaluate_at(&shed, &json!({"sites": ["iad"]}), None).is_err());
}

// docs/design/requirements.md R000.16 (scenario 038): the DNSEndpoint target and the DNS answer are
// separate surfaces.
#[test]
fn dns_endpoint_and_dns_answer() {
    let record = expect("{within: 1s, dns-endpoint: {target: site-of pdx, recordTTL: 10, fieldManager: bloodraven}}");
    assert_eq!(
        evaluate_at(
            &record,
            &json!({"site": "pdx", "recordTTL": 10, "fieldManagers": ["bloodraven"]}),
            None
        ),
        Ok(())
    );
    assert!(evaluate_at(
        &record,
        &json!({"site": "pdx", "recordTTL": 10, "fieldManagers": ["intruder"]}),
        None
    )
    .is_err());
    assert!(evaluate_at(
        &record,
        &json!({"site": "iad", "recordTTL": 10, "fieldManagers": ["bloodraven"]}),
        None
    )
    .is_err());
    // docs/design/requirements.md R000.12 (scenario 039): a foreign field manager beside the
    // operator's is not "owned by bloodraven".
    assert!(evaluate_at(
        &record,
        &json!({"site": "pdx", "recordTTL": 10, "fieldManagers": ["bloodraven", "kubectl-edit"]}),
        None
    )
    .is_err());
    let answer = expect("{for: 1s, dns: {target: site-of iad}}");
    assert_eq!(evaluate_at(&answer, &json!({"site": "iad"}), None), Ok(()));
    assert!(evaluate_at(&answer, &json!({"site": null}), None).is_err());
    assert_eq!(describe(&answer), "dns: answers site-of iad");
}

// docs/design/requirements.md R001.3: with the operator at zero the counter keeps climbing.
#[test]
fn counter_increasing_is_judged_against_the_first_poll() {
    let climbing = expect("{for: 1s, counter: {increasing: true, readOnly: false}}");
    let first = json!({"value": 7, "readOnly": false});
    assert_eq!(
        evaluate_at(&climbing, &first, None),
        Ok(()),
        "the first poll is its own baseline"
    );
    assert_eq!(
        evaluate_at(
            &climbing,
            &json!({"value": 9, "readOnly": false}),
            Some(&first)
        ),
        Ok(())
    );
    // Equal to the baseline on one poll is not a fall (the counter writes once a second);
    // the climb itself is required at the end of the window (`climbed`).
    assert!(evaluate_at(
        &climbing,
        &json!({"value": 7, "readOnly": false}),
        Some(&first)
    )
    .is_ok());
    assert!(evaluate_at(
        &climbing,
        &json!({"value": 6, "readOnly": false}),
        Some(&first)
    )
    .is_err());
    assert!(evaluate_at(
        &climbing,
        &json!({"value": 9, "readOnly": true}),
        Some(&first)
    )
    .is_err());
    let write = expect("{within: 1s, counter: {write: fail}}");
    assert_eq!(evaluate_at(&write, &json!({"write": "fail"}), None), Ok(()));
    assert!(evaluate_at(&write, &json!({"write": "ok"}), None).is_err());
}

// docs/design/requirements.md R000.20: the hold counter is refused over the socket it had before
// the promotion, not over a new one to the same demoted site after a disconnect.
#[test]
fn counter_connection_id_unchanged_is_judged_against_the_baseline() {
    let held = expect(
        "{within: 1s, counter: {write: fail, writeError: 1290, connectionId: {$unchanged: true}}}",
    );
    let before =
        json!({"value": 5, "readOnly": false, "dbSite": "iad", "connectionId": 41, "write": "ok"});
    let same = json!({"value": null, "readOnly": null, "dbSite": null, "connectionId": 41, "write": "fail", "writeError": 1290});
    assert_eq!(evaluate_at(&held, &same, Some(&before)), Ok(()));
    let reconnected = json!({"connectionId": 57, "write": "fail", "writeError": 1290});
    let why = evaluate_at(&held, &reconnected, Some(&before)).unwrap_err();
    assert!(why.contains("connectionId"), "{why}");
    // No connection held (the counter could not connect) is not "the same socket".
    let none = json!({"connectionId": null, "write": "fail", "writeError": 1290});
    assert!(evaluate_at(&held, &none, Some(&before)).is_err());
}

// docs/design/requirements.md R003.10: status codes and body fields.
#[test]
fn deploy_api_status_and_body() {
    let held = expect(
        "{within: 1s, deploy-api: {request: {method: POST, path: /deploy/v1/groups/playground/leases, client: {namespace: n, serviceAccount: b}}, status: 409, body: {error: held, operationId: op-a}}}",
    );
    assert_eq!(
        evaluate_at(
            &held,
            &json!({"status": 409, "body": {"error": "held", "operationId": "op-a", "instance": "counter"}}),
            None
        ),
        Ok(())
    );
    let error =
        evaluate_at(&held, &json!({"status": 201, "body": {}}), None).expect_err("wrong status");
    assert!(error.contains("expected status 409, found 201"), "{error}");
    assert!(evaluate_at(
        &held,
        &json!({"status": 409, "body": {"error": "revoked"}}),
        None
    )
    .is_err());
}

#[test]
fn group_object_metric_event_node_connection_mysql() {
    let group = expect("{for: 1s, group: {sites: [{name: iad, lastSeen: {$unchanged: true}}]}}");
    let before = json!({"sites": [{"name": "iad", "lastSeen": "t1"}]});
    assert_eq!(evaluate_at(&group, &before, Some(&before)), Ok(()));
    assert!(evaluate_at(
        &group,
        &json!({"sites": [{"name": "iad", "lastSeen": "t2"}]}),
        Some(&before)
    )
    .is_err());

    let object = expect("{within: 1s, object: {apiVersion: v1, kind: Service, name: mysql-playground-primary, match: {spec: {publishNotReadyAddresses: {$ne: true}}}}}");
    assert_eq!(
        evaluate_at(
            &object,
            &json!({"spec": {"publishNotReadyAddresses": false}}),
            None
        ),
        Ok(())
    );
    assert!(
        evaluate_at(&object, &json!({"spec": {}}), None).is_err(),
        "$ne does not pass on an absent field"
    );
    assert!(evaluate_at(
        &object,
        &json!({"spec": {"publishNotReadyAddresses": true}}),
        None
    )
    .is_err());
    let gone = expect(
        "{within: 1s, object: {apiVersion: v1, kind: Pod, name: x, match: {$exists: false}}}",
    );
    assert_eq!(evaluate_at(&gone, &Value::Null, None), Ok(()));

    let metric = expect("{within: 1s, metric: {name: bloodraven_deploy_leases_active, value: 2}}");
    assert_eq!(evaluate_at(&metric, &json!({"value": 2.0}), None), Ok(()));
    assert!(evaluate_at(&metric, &json!({"value": null}), None).is_err());

    let event = expect("{within: 1s, event: {reason: PrimaryReasserted}}");
    assert_eq!(
        evaluate_at(
            &event,
            &json!({"events": [{"reason": "PrimaryReasserted", "type": "Normal", "message": "m", "time": "2026-01-01T00:00:00Z"}]}),
            None
        ),
        Ok(())
    );
    assert!(evaluate_at(&event, &json!({"events": []}), None).is_err());

    let node = expect("{within: 1s, node: {site: iad, demotedTaint: true}}");
    assert_eq!(
        evaluate_at(&node, &json!({"demotedTaint": true}), None),
        Ok(())
    );
    assert!(evaluate_at(&node, &json!({"demotedTaint": false}), None).is_err());

    let source = "id: 1\ntitle: t\nseed: \"harness.md: x\"\nsteps:\n- do: {open-connection: {name: held, service: primary}}\n- expect: {within: 1s, connection: {name: held, writeError: 1290}}\n";
    let loaded = parse_scenario(Path::new("scenarios/001-t.yaml"), source).expect("valid");
    let Some(Step::Expect(connection)) = loaded.scenario.steps.get(1) else {
        panic!("expect")
    };
    assert_eq!(
        evaluate_at(connection, &json!({"writeError": 1290}), None),
        Ok(())
    );
    assert!(evaluate_at(connection, &json!({"writeError": null}), None).is_err());

    let mysql = expect("{within: 1s, mysql: {site: pdx, readOnly: true}}");
    assert_eq!(
        evaluate_at(
            &mysql,
            &json!({"readOnly": true, "replicating": true}),
            None
        ),
        Ok(())
    );
    assert!(evaluate_at(&mysql, &json!({"readOnly": false}), None).is_err());
}

// Events count only since the step's fault (to the second), and only with the reason, type
// and message asked for: the backend's answer is not trusted to have filtered.
#[test]
fn events_are_judged_by_reason_type_message_and_time() {
    let since: jiff::Timestamp = "2026-01-01T00:00:10.400Z".parse().expect("time");
    let item = |reason: &str, type_: &str, message: &str, time: &str| json!({"reason": reason, "type": type_, "message": message, "time": time});
    let fenced = expect(
        "{within: 1s, event: {reason: ReturningPrimaryFenced, type: Warning, messageContains: errant}}",
    );
    let judge = |events: Vec<Value>| evaluate(&fenced, &json!({ "events": events }), None, since);
    let good = item(
        "ReturningPrimaryFenced",
        "Warning",
        "iad has errant GTIDs 0-1-5..7",
        "2026-01-01T00:00:11Z",
    );
    assert_eq!(judge(vec![good.clone()]), Ok(()));
    // The same second as the fault: event times are whole seconds.
    let same_second = item(
        "ReturningPrimaryFenced",
        "Warning",
        "errant",
        "2026-01-01T00:00:10Z",
    );
    assert_eq!(judge(vec![same_second]), Ok(()));
    let error = judge(vec![item(
        "ReturningPrimaryFenced",
        "Warning",
        "errant",
        "2026-01-01T00:00:09Z",
    )])
    .expect_err("before the fault");
    assert!(
        error.contains("no Warning ReturningPrimaryFenced") && error.contains("1 earlier"),
        "{error}"
    );
    for wrong in [
        item(
            "ReturningPrimaryFenced",
            "Normal",
            "errant",
            "2026-01-01T00:00:11Z",
        ),
        item(
            "ReturningPrimaryFenced",
            "Warning",
            "rejoined",
            "2026-01-01T00:00:11Z",
        ),
        item(
            "PrimaryReasserted",
            "Warning",
            "errant",
            "2026-01-01T00:00:11Z",
        ),
        json!({"reason": "ReturningPrimaryFenced", "type": "Warning", "message": "errant"}),
    ] {
        assert!(judge(vec![wrong.clone()]).is_err(), "{wrong}");
    }
    // The old shape (a bare count) proves nothing.
    assert!(evaluate(&fenced, &json!({"count": 3}), None, since).is_err());
}

// docs/design/requirements.md R001.3: a counter writing once a second reads equal on two polls
// 250 ms apart; `for: increasing` holds while it never falls back and fails when it did not climb
// by the end.
#[test]
fn seed_001_for_increasing_tolerates_equal_polls_but_needs_a_climb() {
    let expect: bloodraven_harness::scenario::model::Expect =
        serde_yaml::from_str("{for: 10s, counter: {increasing: true}}").expect("expect");
    let at = |value: i64| serde_json::json!({"value": value, "readOnly": false});
    let since = jiff::Timestamp::UNIX_EPOCH;
    let eval = evaluate;
    assert!(
        eval(&expect, &at(2), Some(&at(2)), since).is_ok(),
        "equal on the next poll"
    );
    assert!(
        eval(&expect, &at(1), Some(&at(2)), since).is_err(),
        "it fell back"
    );
    assert!(
        climbed(&expect, Some(&at(2)), Some(&at(2))).is_err(),
        "never climbed"
    );
    assert!(climbed(&expect, Some(&at(2)), Some(&at(5))).is_ok());
    let within: bloodraven_harness::scenario::model::Expect =
        serde_yaml::from_str("{within: 10s, counter: {increasing: true}}").expect("expect");
    assert!(
        eval(&within, &at(2), Some(&at(2)), since).is_err(),
        "within needs a climb"
    );
}

/// Parses the `expect` step after an `open-connection` of `held`.
fn connection_expect(yaml: &str) -> Expect {
    let source = format!("id: 1\ntitle: t\nseed: \"harness.md: x\"\nsteps:\n- do: {{open-connection: {{name: held, service: primary}}}}\n- expect: {yaml}\n");
    let loaded = parse_scenario(Path::new("scenarios/001-t.yaml"), &source)
        .unwrap_or_else(|errors| panic!("{errors:?}"));
    match loaded.scenario.steps.into_iter().nth(1) {
        Some(Step::Expect(expect)) => *expect,
        other => panic!("not an expect: {other:?}"),
    }
}

// s026 (docs/design/history.md#issue-11): "committed" must not pass on an answer without a write
// outcome, and the site on the other end of the held connection is checked when named.
#[test]
fn connection_needs_an_answer_and_checks_the_site() {
    let committed =
        connection_expect("{within: 1s, connection: {name: held, writeError: null, site: iad}}");
    assert_eq!(
        evaluate_at(
            &committed,
            &json!({"writeError": null, "site": "iad"}),
            None
        ),
        Ok(())
    );
    let error = evaluate_at(&committed, &json!({}), None).expect_err("an empty answer");
    assert!(error.contains("no write outcome"), "{error}");
    assert!(evaluate_at(
        &committed,
        &json!({"writeError": null, "site": "pdx"}),
        None
    )
    .is_err());
    assert!(evaluate_at(&committed, &json!({"writeError": null, "site": null}), None).is_err());
    let refused =
        connection_expect("{within: 1s, connection: {name: held, writeError: 1290, site: iad}}");
    assert_eq!(
        evaluate_at(&refused, &json!({"writeError": 1290, "site": "iad"}), None),
        Ok(())
    );
    // A lost connection (2013, nobody answered @@hostname) is not the fenced old primary.
    assert!(evaluate_at(&refused, &json!({"writeError": 2013, "site": null}), None).is_err());
}

// s024 (docs/design/history.md#issue-11): `restarts: {$changed: true}` compares with the same pod's
// count in the baseline taken before the kill; it passed on any count before.
#[test]
fn pod_restarts_changed_compares_with_the_baseline_pod() {
    let restarted = expect("{within: 1s, pods: {site: iad, restarts: {$changed: true}}}");
    let labels = json!({"shipstream.io/role": "primary"});
    let before = json!([pod("mysql-playground-iad-0", "Running", labels.clone(), 2)]);
    let same = before.clone();
    let after = json!([pod("mysql-playground-iad-0", "Running", labels, 3)]);
    assert!(evaluate_at(&restarted, &same, Some(&before)).is_err());
    assert_eq!(evaluate_at(&restarted, &after, Some(&before)), Ok(()));
}

// s030 (docs/design/history.md#issue-11): the TTL clamp's upper end, as expiresAt minus the
// answer's Date header.
#[test]
fn deploy_api_expires_in() {
    let clamped = expect(
        "{within: 1s, deploy-api: {request: {method: POST, path: /deploy/v1/groups/playground/leases, client: {namespace: n, serviceAccount: a}}, status: 201, expiresIn: {$gt: 118, $lte: 122}}}",
    );
    assert_eq!(
        evaluate_at(
            &clamped,
            &json!({"status": 201, "body": {}, "expiresIn": 120.4}),
            None
        ),
        Ok(())
    );
    let error = evaluate_at(
        &clamped,
        &json!({"status": 201, "body": {}, "expiresIn": 300.2}),
        None,
    )
    .expect_err("not clamped");
    assert!(error.contains("expiresAt - Date"), "{error}");
    assert!(evaluate_at(
        &clamped,
        &json!({"status": 201, "body": {}, "expiresIn": null}),
        None
    )
    .is_err());
}

// s050 (docs/design/history.md#issue-11): `recorded` endpoints are judged from the probe history
// since the window's start, not from the observation's current set.
#[test]
fn recorded_endpoints_are_judged_from_the_history() {
    let recorded =
        expect("{within: 1s, endpoints: {service: primary, sites: [iad], recorded: true}}");
    let since: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().expect("time");
    let history = |middle: &[&str]| {
        json!({"now": "2026-12-01T00:00:01.500Z", "recorded": [
            {"wall": "2026-12-01T00:00:00.200Z", "ok": true, "sites": ["iad"]},
            {"wall": "2026-12-01T00:00:00.700Z", "ok": true, "sites": middle},
            {"wall": "2026-12-01T00:00:01.200Z", "ok": true, "sites": ["iad"]},
        ]})
    };
    assert_eq!(evaluate(&recorded, &history(&["iad"]), None, since), Ok(()));
    let error = evaluate(&recorded, &history(&[]), None, since).expect_err("a flap");
    assert!(error.contains("flapped"), "{error}");
}

// An observation satisfies a `within` only if it was taken before the bound, whenever its
// answer came back.
#[test]
fn within_judges_an_observation_by_when_it_was_taken() {
    use bloodraven_harness::runner::execute::late;
    use std::time::Duration;
    let span = Duration::from_secs(30);
    assert_eq!(late(Duration::from_millis(29_990), span), None);
    assert_eq!(late(span, span), None);
    let why = late(Duration::from_millis(30_001), span).expect("late");
    assert!(
        why.contains("30001 ms") && why.contains("30000 ms bound"),
        "{why}"
    );
}

// `phase: absent` holds only for a pod the run saw: a never-created or misspelt pod is absent
// too.
#[test]
fn absent_needs_a_pod_the_run_saw() {
    use std::collections::BTreeSet;
    let pod_was_seen = |expect: &Expect, seen: &BTreeSet<String>| expect.target.check_seen(seen);
    let pods_in = |expect: &Expect, observed: &Value| {
        expect
            .target
            .pods_seen(&observation(expect, observed).expect("a pods observation"))
    };
    let absent = expect("{within: 30s, pods: {name: canary-plain, phase: absent}}");
    let running = expect("{within: 30s, pods: {name: canary-plain, phase: Running}}");
    let never: BTreeSet<String> = BTreeSet::new();
    let error = pod_was_seen(&absent, &never).expect_err("never seen");
    assert!(
        error.contains("bloodraven-playground/canary-plain") && error.contains("never saw"),
        "{error}"
    );
    let observed = json!([pod("canary-plain", "Running", json!({}), 0)]);
    let seen: BTreeSet<String> = pods_in(&running, &observed).into_iter().collect();
    assert_eq!(pod_was_seen(&absent, &seen), Ok(()));
    assert_eq!(
        pod_was_seen(&running, &never),
        Ok(()),
        "only `absent` needs it"
    );
    let by_site = expect("{within: 30s, pods: {site: iad, phase: absent}}");
    assert!(pod_was_seen(&by_site, &seen).is_err());
}

// `endpoints: {sites: []}` on a Service that does not exist is not "no endpoint".
#[test]
fn no_endpoints_of_a_missing_service_is_a_failure() {
    let none = expect("{within: 5s, endpoints: {service: primary, sites: []}}");
    assert_eq!(
        evaluate_at(&none, &json!({"sites": [], "serviceExists": true}), None),
        Ok(())
    );
    let error = evaluate_at(&none, &json!({"sites": [], "serviceExists": false}), None)
        .expect_err("no Service");
    assert!(error.contains("does not exist"), "{error}");
}
