//! The scenario catalogue loads and validates, matches docs/design/harness.md#catalogue, and the
//! key rows say what they must prove.

use std::time::Duration;

use bloodraven_harness::scenario::model::{
    Action, Container, Fault, HealTarget, Site, Step, Subject, Verb,
};
use bloodraven_harness::scenario::validate::{load_catalogue, LoadedScenario};
use bloodraven_harness::targets::archive::ArchiveExpect;
use bloodraven_harness::targets::dns::DnsExpect;
use bloodraven_harness::targets::node::NodeExpect;
use bloodraven_harness::targets::pods::PodsExpect;
use bloodraven_harness::targets::Target;

/// The status fields a `group` expectation matches, if it is one.
fn group_of(target: &Target) -> Option<&serde_json::Value> {
    match target {
        Target::Group(group) => Some(&group.0),
        _ => None,
    }
}

/// A `dns` expectation, if it is one.
fn dns_of(target: &Target) -> Option<&DnsExpect> {
    match target {
        Target::Dns(dns) => Some(dns),
        _ => None,
    }
}

/// A `pods` expectation, if it is one.
fn pods_of(target: &Target) -> Option<&PodsExpect> {
    match target {
        Target::Pods(pods) => Some(pods),
        _ => None,
    }
}

/// A `node` expectation, if it is one.
fn node_of(target: &Target) -> Option<&NodeExpect> {
    match target {
        Target::Node(node) => Some(node),
        _ => None,
    }
}

/// An `archive` expectation, if it is one.
fn archive_of(target: &Target) -> Option<ArchiveExpect> {
    match target {
        Target::Archive(archive) => Some(*archive),
        _ => None,
    }
}

/// docs/design/harness.md#catalogue: the ids, stable: the rows of its first table, and those of
/// its second, the scenarios the project added: 029 (docs/design/history.md#issue-10, with 027
/// and 028); 036 (the curl lines of docs/design/requirements.md R003.7 from a pod) and 037 (the
/// hold and reconnect counters of R000.20), the acceptance tests of
/// docs/design/history.md#issue-8; 041 (docs/design/history.md#issue-14: the primary's wall
/// clock stepped); 042 and 043 (docs/design/history.md#issue-34: the candidate's catch-up from
/// a survivor that holds more, and the relay-log drain, each breakable on purpose); 044 (the
/// catch-up keeping the candidate's relay log, found by 043 through the fault agent); 053 (docs/design/history.md#issue-12: the restore from the mariadb-backup
/// copy, after 052); 054 (docs/design/history.md#issue-32); and 055-057
/// (docs/design/history.md#issue-35: the rejoin of a fenced returning primary, by the plugin,
/// by the policy, and through a sidecar killed mid-re-seed, each archive read back).
const CATALOGUE_IDS: [u16; 45] = [
    1, 2, 3, 5, 10, 11, 12, 13, 14, 15, 16, 17, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
    33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 50, 51, 52, 53, 54, 55, 56, 57,
];

fn catalogue() -> Vec<LoadedScenario> {
    match load_catalogue(&bloodraven_harness::backend::workspace_root().join("scenarios")) {
        Ok(catalogue) => catalogue,
        Err(error) => panic!("failed to {error}"),
    }
}

fn scenario(id: u16) -> LoadedScenario {
    catalogue()
        .into_iter()
        .find(|loaded| loaded.scenario.id == id)
        .unwrap_or_else(|| panic!("no scenario {id}"))
}

#[test]
fn catalogue_validates_and_has_every_row_of_harness_md() {
    let ids: Vec<u16> = catalogue()
        .iter()
        .map(|loaded| loaded.scenario.id)
        .collect();
    assert_eq!(ids, CATALOGUE_IDS);
}

#[test]
fn trial_names_are_snnn_slug() {
    for loaded in catalogue() {
        let name = loaded.trial_name();
        assert!(
            name.starts_with(&format!("s{:03}_", loaded.scenario.id)),
            "{name}"
        );
        assert!(
            name.bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_'),
            "{name}"
        );
    }
}

// The install waits for the authority to be Valid on the initial active site (iad) before
// the steps (docs/scenarios.md "Where the steps start"): no scenario repeats that wait as its
// first step (001 and 051-053 check more than that in theirs: the topology generation).
#[test]
fn no_scenario_repeats_the_install_wait_as_its_first_step() {
    let wait: serde_json::Value =
        serde_json::json!({"authority": {"state": "Valid"}, "activeSite": "iad"});
    for loaded in catalogue() {
        if let Some(Step::Expect(expect)) = loaded.scenario.steps.first() {
            assert!(
                group_of(&expect.target) != Some(&wait),
                "{}: its first step repeats the install's wait; remove it",
                loaded.trial_name()
            );
        }
    }
}

#[test]
fn every_scenario_asserts_something_after_its_faults() {
    for loaded in catalogue() {
        let last_fault = loaded
            .scenario
            .steps
            .iter()
            .rposition(|step| matches!(step, Step::Fault(_)));
        let last_check = loaded
            .scenario
            .steps
            .iter()
            .rposition(|step| matches!(step, Step::Expect(_) | Step::Measure(_)));
        assert!(
            last_check.is_some(),
            "{} asserts nothing",
            loaded.trial_name()
        );
        if let (Some(fault), Some(check)) = (last_fault, last_check) {
            assert!(
                check > fault,
                "{}: its last fault is never checked",
                loaded.trial_name()
            );
        }
    }
}

// docs/design/requirements.md R000.16, chaos scenario 38: deny dnsendpoints write verbs, kill the
// primary; the CR promotes correctly while the DNS target stays stale; it heals on a later poll.
#[test]
fn seed_000_scenario_38_proves_its_row() {
    let steps = scenario(38).scenario.steps;
    let denied = steps.iter().position(|step| {
        matches!(step, Step::Fault(Fault::DenyRbac { subject: Subject::Operator, resource, verbs })
            if resource == "dnsendpoints" && [Verb::Create, Verb::Update, Verb::Patch].iter().all(|verb| verbs.contains(verb)))
    });
    let killed = steps.iter().position(|step| {
        matches!(step, Step::Fault(Fault::Kill(target)) if target.site == Site::Iad && target.container == Container::Mysql)
    });
    let promoted = steps.iter().position(|step| {
        matches!(step, Step::Expect(expect) if expect.within == Some(span(20))
            && group_of(&expect.target).and_then(|group| group.get("activeSite")).and_then(|site| site.as_str()) == Some("pdx"))
    });
    let stale = steps.iter().position(|step| {
        matches!(step, Step::Expect(expect) if expect.for_ == Some(span(10))
            && dns_of(&expect.target).is_some_and(|dns| dns.target.0 == Site::Iad))
    });
    let healed = steps
        .iter()
        .position(|step| matches!(step, Step::Heal(HealTarget::All)));
    let fresh = steps.iter().position(|step| {
        matches!(step, Step::Expect(expect) if expect.within == Some(span(10))
            && dns_of(&expect.target).is_some_and(|dns| dns.target.0 == Site::Pdx))
    });
    let order = [denied, killed, promoted, stale, healed, fresh];
    assert!(
        order.iter().all(Option::is_some),
        "missing steps: {order:?}"
    );
    assert!(
        order.windows(2).all(|pair| pair[0] < pair[1]),
        "out of order: {order:?}"
    );
}

// docs/design/requirements.md R000.19, chaos scenario 21: the old primary's node taint evicts a
// non-tolerating canary; a canary tolerating the same taint stays Running.
#[test]
fn seed_000_scenario_21_proves_its_row() {
    let steps = scenario(21).scenario.steps;
    let tolerating = steps.iter().any(|step| {
        matches!(step, Step::Apply(apply) if apply.object.as_ref().is_some_and(|object| {
            object.pointer("/spec/tolerations/0/key").and_then(|key| key.as_str()) == Some("bloodraven.shipstream.io/demoted")
                && object.pointer("/spec/tolerations/0/effect").and_then(|effect| effect.as_str()) == Some("NoExecute")
        }))
    });
    assert!(
        tolerating,
        "a canary must tolerate the demoted NoExecute taint"
    );
    let evicted = steps.iter().position(|step| {
        matches!(step, Step::Expect(expect) if pods_of(&expect.target).is_some_and(|pods| pods.name.as_deref() == Some("canary-plain") && pods.phase.as_deref() == Some("absent")))
    });
    let stays = steps.iter().position(|step| {
        matches!(step, Step::Expect(expect) if expect.for_.is_some() && pods_of(&expect.target).is_some_and(|pods| pods.name.as_deref() == Some("canary-tolerating") && pods.phase.as_deref() == Some("Running")))
    });
    let tainted = steps.iter().position(|step| {
        matches!(step, Step::Expect(expect) if node_of(&expect.target).is_some_and(|node| node.site == Site::Iad && node.demoted_taint))
    });
    assert!(tainted.is_some() && evicted.is_some() && stays.is_some());
    assert!(tainted < evicted && evicted < stays);
}

// docs/design/operator.md#planned-failover: planned failover loses nothing; 022 asserts
// lostTransactions 0 under load.
#[test]
fn seed_001_planned_failover_asserts_zero_loss() {
    let steps = scenario(22).scenario.steps;
    let zero = steps.iter().any(|step| {
        matches!(step, Step::Expect(expect) if group_of(&expect.target)
            .and_then(|group| group.pointer("/lastFailover/lostTransactions"))
            .and_then(serde_json::Value::as_u64) == Some(0))
    });
    assert!(zero);
}

fn span(seconds: u64) -> bloodraven_harness::scenario::span::Span {
    bloodraven_harness::scenario::span::Span::new(Duration::from_secs(seconds))
}

/// The scenario as compact JSON, to look for the assertions a row needs.
fn steps_json(id: u16) -> String {
    serde_json::to_string(&scenario(id).scenario).unwrap_or_default()
}

// Each row of docs/design/harness.md#catalogue, pinned to the facts its scenario must assert.
#[test]
fn every_row_asserts_what_it_claims() {
    let rows: [(u16, &[&str]); 34] = [
        (
            1,
            &[
                "\"state\":\"Valid\"",
                "mysql-playground-reader-hl",
                "mysql-playground-replicas",
                "\"recordTTL\":10",
                "\"write\":\"ok\"",
            ],
        ),
        (
            2,
            &[
                "\"shipstream.io/role\":\"primary\"",
                "\"$len\":2",
                "\"$len\":3",
                "\"publishNotReadyAddresses\":{\"$ne\":true}",
            ],
        ),
        (
            3,
            &[
                "replication-delay",
                "\"secondsBehindSource\":{\"$gt\":30}",
                "\"shipstream.io/healthy\":\"no\"",
                "\"sites\":[\"pdx\"]",
            ],
        ),
        (
            5,
            &[
                "\"state\":\"Invalid\"",
                "\"service\":\"primary\",\"sites\":[]",
                "\"service\":\"replicas\",\"sites\":[]",
                // The active site stays readable and the reader's own conjuncts hold while
                // it is shed: only the invalid authority can empty -replicas.
                "\"peers\":[\"iad\"]",
                "\"name\":\"reader\",\"reachable\":true,\"replicating\":true,\"secondsBehindSource\":0",
            ],
        ),
        (
            10,
            &[
                "\"replicas\":0",
                "\"increasing\":true",
                "\"lastSeen\":{\"$unchanged\":true}",
            ],
        ),
        (
            11,
            &[
                "\"replicas\":0",
                "stop-node",
                "\"lastFailover\":{\"$exists\":false}",
                "\"exact\":true",
            ],
        ),
        (
            12,
            &[
                "delete-pod",
                "\"readOnly\":true",
                "PrimaryReasserted",
                "set-read-only",
                "SET GLOBAL event_scheduler = OFF",
                "bloodraven_sidecar_writable_fences_total",
                "\"reason\":\"no_authority\"",
            ],
        ),
        (
            13,
            &[
                "set-read-only",
                "\"value\":false",
                "\"site\":\"pdx\",\"readOnly\":true",
                "SET GLOBAL event_scheduler = OFF",
                "bloodraven_sidecar_topology_mismatches_total",
            ],
        ),
        (
            14,
            &[
                "\"replicaCount\":3",
                "kill-operator",
                "\"holderIdentity\":{\"$changed\":true}",
                "\"quantity\":\"detection\",\"atLeast\":\"3s500ms\",\"atMost\":\"7s\"",
            ],
        ),
        (
            15,
            &[
                "\"phase\":\"Rejected\"",
                "\"onCooldown\":\"defer\"",
                "\"deferReason\":\"Cooldown\"",
                "\"phase\":\"Completed\",\"target\":\"iad\"",
            ],
        ),
        (
            16,
            &[
                "kill-operator",
                "EmergencyFailoverBlockedByCooldown",
                "\"from\":\"pdx\",\"kind\":\"emergency\",\"to\":\"iad\"",
            ],
        ),
        (
            17,
            &[
                "\"args\":[\"promote\",\"playground\",\"pdx\"",
                "bloodraven.shipstream.io/planned-failover\":\"pdx\"",
                "\"kind\":\"planned\"",
            ],
        ),
        (
            20,
            &[
                "\"keepDown\":true",
                "\"exact\":false",
                "\"exact\":true",
                "write-outage",
                "\"target\":\"site-of pdx\"",
                // Detection lies between (failureThreshold - 1) and failureThreshold poll
                // intervals after the kill (4 s to 6 s, with a poll in flight: 3 s to 7 s).
                "\"quantity\":\"detection\",\"atLeast\":\"3s500ms\",\"atMost\":\"7s\"",
            ],
        ),
        (
            21,
            &[
                "canary-plain",
                "canary-tolerating",
                "\"demotedTaint\":true",
                "\"phase\":\"absent\"",
            ],
        ),
        (
            22,
            &["planned-failover", "\"lostTransactions\":0", "write-outage"],
        ),
        (
            37,
            &[
                "\"peers\":[\"iad\"]",
                "counter-reconnect",
                "\"write\":\"fail\",\"writeError\":1290",
                "\"readOnly\":true,\"dbSite\":\"iad\"",
                "\"connectionId\":{\"$unchanged\":true}",
            ],
        ),
        (
            28,
            &[
                "\"freeze\"",
                "\"send-write\"",
                "\"sentWrite\":\"not-acknowledged\"",
                "\"restarts\":{\"$gte\":1}",
            ],
        ),
        (
            23,
            &[
                "partition",
                "\"shipstream.io/role\":\"fenced\"",
                "\"errantGtidSet\":{\"$exists\":true}",
                "ReturningPrimaryFenced",
            ],
        ),
        (
            24,
            &[
                "\"kill\":{\"site\":\"iad\",\"container\":\"mysql\",\"keepDown\":false}",
                "\"lastFailover\":{\"$exists\":false}",
                "\"topologyGeneration\":{\"$unchanged\":true}",
                "\"restarts\":{\"$changed\":true}",
                "PrimaryReasserted",
            ],
        ),
        (
            25,
            &[
                "\"partition\":{\"sites\":[\"iad\"]}",
                "\"site\":\"iad\",\"readOnly\":true",
                "SET GLOBAL event_scheduler = OFF",
                "\"reason\":\"no_majority_lease\"",
            ],
        ),
        (
            26,
            &[
                "open-connection",
                "\"writeError\":null,\"site\":\"iad\"",
                "\"writeError\":1290,\"site\":\"iad\"",
            ],
        ),
        (
            30,
            &[
                "\"status\":409",
                "\"error\":\"held\"",
                "\"status\":403",
                "\"ttlSeconds\":1",
                "\"ttlSeconds\":300",
                "\"expiresIn\":{\"$gt\":118",
                "\"status\":404",
                "\"error\":\"token_mismatch\"",
                "\"status\":200",
            ],
        ),
        (
            31,
            &[
                "failover-hold",
                "\"deferReason\":\"DeploymentHold\"",
                "\"retryTime\":\"${hold_expires}\"",
                "\"retryTime\":\"${hold_renewed}\"",
                "bloodraven_planned_failovers_deferred_total",
            ],
        ),
        (
            32,
            &[
                "stop-node",
                "\"error\":\"revoked\"",
                "\"reason\":\"TopologyChanged\"",
                "\"topologyGeneration\":{\"$gt\":\"${generation}\"}",
                "\"topologyGeneration\":\"${new_generation}\"",
                "op-b",
                "DeploymentLeaseRevoked",
            ],
        ),
        (
            33,
            &[
                "revoke-deployment-leases",
                "\"reason\":\"OperatorRevoked\"",
                "\"topologyGeneration\":\"${generation}\"",
            ],
        ),
        (
            34,
            &[
                "\"audience\":\"\"",
                "outsider",
                "\"port\":\"plain\"",
                "\"replica\":\"follower\"",
                "\"error\":\"not_leader\"",
                "\"status\":503",
            ],
        ),
        (
            35,
            &[
                "\"status\":423",
                "\"retryAfterSeconds\":{\"$gte\":1}",
                "${deadline}",
            ],
        ),
        (
            38,
            &[
                "dnsendpoints",
                "\"target\":\"site-of iad\"",
                "\"target\":\"site-of pdx\"",
            ],
        ),
        (
            39,
            &[
                "\"fieldManager\":\"intruder\"",
                "192.0.2.1",
                "\"fieldManager\":\"bloodraven\"",
            ],
        ),
        (
            40,
            &[
                "stop-external-dns",
                "\"dns-endpoint\":{\"target\":\"site-of pdx\"",
                "\"dns\":{\"target\":\"site-of iad\"}",
            ],
        ),
        (
            55,
            &[
                "\"args\":[\"rejoin\",\"playground\",\"iad\"",
                "\"reason\":\"ReturningPrimaryFenced\"",
                "\"automatic\":false",
                "\"archive\":{\"site\":\"iad\",\"holds\":\"lost-writes\"}",
                "\"sites\":[\"iad\",\"reader\"]",
                "\"from\":\"pdx\"",
            ],
        ),
        (
            56,
            &[
                "\"onErrant\":\"rejoin\"",
                "\"automatic\":true",
                "\"archive\":{\"site\":\"iad\",\"holds\":\"lost-writes\"}",
                "\"archive\":{\"site\":\"pdx\",\"holds\":\"lost-writes\"}",
            ],
        ),
        (
            57,
            &[
                "\"container\":\"sidecar\",\"keepDown\":true",
                "\"phase\":\"Reseeding\"",
                "\"rejoinId\":{\"$unchanged\":true}",
                "\"sites\":[\"reader\"],\"recorded\":true",
                "\"archive\":{\"site\":\"iad\",\"holds\":\"lost-writes\"}",
            ],
        ),
        (
            50,
            &[
                "upgrade-operator",
                "\"sites\":[\"iad\"],\"recorded\":true",
                "\"lastFailover\":{\"$exists\":false}",
                "\"method\":\"PUT\"",
            ],
        ),
    ];
    let mut missing = Vec::new();
    for (id, needles) in rows {
        let json = steps_json(id);
        missing.extend(
            needles
                .iter()
                .filter(|needle| !json.contains(*needle))
                .map(|needle| format!("{id:03}: {needle}")),
        );
    }
    assert!(
        missing.is_empty(),
        "assertions missing from the catalogue:\n{}",
        missing.join("\n")
    );
}

/// docs/design/history.md#issue-12-part-2: 052 backs up, restores in place by annotation, and
/// expects the pod stamped role=fenced with both shared Services empty of it, then the new
/// generation and the revoked lease.
#[test]
fn s052_restores_in_place_fenced_then_re_promoted_at_a_new_generation() {
    let loaded = scenario(52);
    let text = serde_json::to_string(&loaded.scenario.steps).expect("steps serialise");
    let annotated: Vec<String> = loaded
        .scenario
        .steps
        .iter()
        .filter_map(|step| match step {
            Step::Do(Action::Annotate { key, .. }) => Some(key.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        annotated,
        [
            "bloodraven.shipstream.io/backup",
            "bloodraven.shipstream.io/restore"
        ]
    );
    for needle in [
        "\"shipstream.io/role\":\"fenced\"",
        "\"topologyGeneration\":2",
        "\"reason\":\"TopologyChanged\"",
        "\"phase\":\"Completed\"",
    ] {
        assert!(text.contains(needle), "052 lacks {needle}: {text}");
    }
}

/// docs/design/history.md#issue-12: 053 restores in place from the backup's mariadb-backup copy
/// (annotation `<backup>,method=physical`), with 052's assertions plus the method and mysqld's
/// restart.
#[test]
fn s053_restores_in_place_from_the_physical_copy() {
    let loaded = scenario(53);
    let text = serde_json::to_string(&loaded.scenario.steps).expect("steps serialise");
    let annotated: Vec<(String, Option<String>)> = loaded
        .scenario
        .steps
        .iter()
        .filter_map(|step| match step {
            Step::Do(Action::Annotate { key, value, .. }) => Some((key.clone(), value.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        annotated,
        [
            (
                "bloodraven.shipstream.io/backup".to_owned(),
                Some("b1".to_owned())
            ),
            (
                "bloodraven.shipstream.io/restore".to_owned(),
                Some("b1,method=physical".to_owned())
            )
        ]
    );
    for needle in [
        "\"shipstream.io/role\":\"fenced\"",
        "\"topologyGeneration\":2",
        "\"reason\":\"TopologyChanged\"",
        "\"phase\":\"Completed\"",
        "\"method\":\"Physical\"",
        "\"restartCount\"",
        "\"lostGtidSet\"",
    ] {
        assert!(text.contains(needle), "053 lacks {needle}: {text}");
    }
}

/// docs/design/history.md#issue-35: the rejoin scenarios lose writes on purpose (the survivors
/// stop receiving before the primary dies), read the archive back after the rejoin completes,
/// and 056 has the operator start both rejoins itself: no plugin step.
#[test]
fn s055_to_s057_lose_writes_then_read_the_rejoined_site_s_archive() {
    for id in [55, 56, 57] {
        let steps = scenario(id).scenario.steps;
        let stopped = steps.iter().position(|step| {
            matches!(step, Step::Do(Action::Sql { site: Site::Pdx, statements, .. }) if statements == "STOP SLAVE IO_THREAD")
        });
        let killed = steps.iter().position(|step| {
            matches!(step, Step::Fault(Fault::Kill(target)) if target.site == Site::Iad && target.container == Container::Mysql && target.keep_down)
        });
        let archive = steps.iter().position(|step| {
            matches!(step, Step::Expect(expect) if archive_of(&expect.target).is_some_and(|archive| archive.site == Site::Iad))
        });
        assert!(
            stopped.is_some() && stopped < killed && killed < archive,
            "{id:03}: {stopped:?} {killed:?} {archive:?}"
        );
        let plugin = steps
            .iter()
            .any(|step| matches!(step, Step::Do(Action::Plugin { args }) if args.first().map(String::as_str) == Some("rejoin")));
        assert_eq!(plugin, id != 56, "{id:03}: a plugin rejoin step");
    }
}

fn measure_bounds(loaded: &LoadedScenario, quantity: &str) -> (Option<Duration>, Option<Duration>) {
    loaded
        .scenario
        .steps
        .iter()
        .find_map(|step| match step {
            Step::Measure(measure) if measure.quantity.name() == quantity => Some((
                measure.at_least.map(|span| span.duration()),
                measure.at_most.map(|span| span.duration()),
            )),
            _ => None,
        })
        .unwrap_or_else(|| panic!("s{:03} measures no {quantity}", loaded.scenario.id))
}

// Issue 36: the catalogue's timing bounds follow the run's profile; every expression resolves
// (none goes to zero or past the maximum) under the fast profile, the profile goes under each
// scenario's own groupSpec, and a scenario's own fields win.
#[test]
fn the_catalogue_resolves_under_the_fast_profile() {
    use bloodraven_harness::scenario::timing::Profile;
    use bloodraven_harness::scenario::validate::load_catalogue_with;
    let dir = bloodraven_harness::backend::workspace_root().join("scenarios");
    let patch = Profile::Fast.patch().expect("the fast profile");
    let fast = match load_catalogue_with(&dir, &patch) {
        Ok(catalogue) => catalogue,
        Err(error) => panic!("failed to {error}"),
    };
    assert_eq!(fast.len(), CATALOGUE_IDS.len());
    let by_id = |id: u16| {
        fast.iter()
            .find(|loaded| loaded.scenario.id == id)
            .unwrap_or_else(|| panic!("no scenario {id}"))
    };
    let s020 = by_id(20);
    assert_eq!(s020.timing.detection(), Duration::from_millis(1500));
    assert_eq!(
        measure_bounds(s020, "detection"),
        (
            Some(Duration::from_millis(500)),
            Some(Duration::from_millis(2500))
        )
    );
    assert_eq!(
        s020.scenario
            .install
            .group_spec
            .as_ref()
            .map(|spec| spec["pollInterval"].clone()),
        Some(serde_json::json!("500ms"))
    );
    // 016 keeps its own 60 s cooldown, and its bound follows it.
    let s016 = by_id(16);
    assert_eq!(s016.timing.cooldown, Duration::from_secs(60));
    assert_eq!(s016.timing.poll_interval, Duration::from_millis(500));
    // The playground's own timing resolves the same files to the old literal bounds.
    assert_eq!(
        measure_bounds(&scenario(20), "detection"),
        (
            Some(Duration::from_millis(3500)),
            Some(Duration::from_secs(7))
        )
    );
    assert_eq!(scenario(20).scenario.install.group_spec, None);
}
