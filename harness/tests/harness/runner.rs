//! The runner against a scripted fake cluster: `within`/`for` semantics, deploy API
//! variables, stop-on-failure with heal and final read, trials with and without a backend,
//! and the flags (libtest-mimic's and the harness's together).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bloodraven_harness::backend::{Backend, Cluster, ClusterKind, FinalRows, Workload};
use bloodraven_harness::check::rpo::check_rpo;
use bloodraven_harness::error::Result;
use bloodraven_harness::history::event::{EventType, FaultPhase, Op};
use bloodraven_harness::history::recorder::Recorder;
use bloodraven_harness::runner::cli::Cli;
use bloodraven_harness::runner::execute::{execute, Pacing};
use bloodraven_harness::runner::trials::{build_trials, finish_run, run_trial, RunContext};
use bloodraven_harness::scenario::model::{
    Action, Apply, Expect, Fault, HealTarget, Install, Site,
};
use bloodraven_harness::scenario::validate::{parse_scenario, LoadedScenario};
use bloodraven_harness::targets::{Observation, Target};
use clap::Parser as _;
use serde_json::{json, Value};

/// What the fake cluster answers to `observe`: given the expectation, the poll count (from
/// 1) and how many faults and heals were injected so far.
type Script = Box<dyn Fn(&Expect, u32, u32) -> Value + Send + Sync>;

fn table_rows(table: &Mutex<Vec<u64>>) -> usize {
    table.lock().unwrap_or_else(PoisonError::into_inner).len()
}

struct FakeCluster {
    script: Script,
    polls: Mutex<u32>,
    /// Faults and heals so far.
    actions: Mutex<u32>,
    calls: Arc<Mutex<Vec<String>>>,
    /// The rows of the workload's table on the one site (iad), shared with the workload.
    table: Arc<Mutex<Vec<u64>>>,
    /// Rows at the last heal: converged only once a write committed after it.
    rows_at_heal: Mutex<usize>,
}

impl FakeCluster {
    fn new(script: impl Fn(&Expect, u32) -> Value + Send + Sync + 'static) -> Self {
        Self::with_actions(move |expect, poll, _| script(expect, poll))
    }

    /// A cluster whose answers may depend on the faults and heals injected so far.
    fn with_actions(script: impl Fn(&Expect, u32, u32) -> Value + Send + Sync + 'static) -> Self {
        Self {
            script: Box::new(script),
            polls: Mutex::new(0),
            actions: Mutex::new(0),
            calls: Arc::new(Mutex::new(Vec::new())),
            table: Arc::new(Mutex::new(Vec::new())),
            rows_at_heal: Mutex::new(0),
        }
    }

    fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn call(&self, what: String) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(what);
    }
}

/// A workload that keeps writing (each write committed to the table, then acknowledged
/// by iad) until it is stopped, and records `stop` when it has drained.
struct WritingWorkload {
    running: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl WritingWorkload {
    fn start(
        recorder: Arc<Recorder>,
        table: Arc<Mutex<Vec<u64>>>,
        calls: Arc<Mutex<Vec<String>>>,
    ) -> Self {
        let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = Arc::clone(&running);
        let table_seen = Arc::clone(&table);
        let thread = std::thread::spawn(move || {
            let mut id = 0;
            while flag.load(std::sync::atomic::Ordering::SeqCst) {
                if id % 10 == 0 {
                    // The status probe: iad stays active.
                    recorder.invoke("status", Op::status_of_group(&Value::Null));
                    recorder.complete(
                        "status",
                        EventType::Ok,
                        Op::status_of_group(&json!({
                            "spec": {"pollInterval": "2s", "failureThreshold": 3},
                            "status": {"activeSite": "iad", "topologyGeneration": 1, "authority": {"state": "Valid"}}
                        })),
                    );
                }
                recorder.invoke(
                    "writer-0",
                    Op::Write {
                        id,
                        site: None,
                        gtid: None,
                        error: None,
                    },
                );
                table
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(id);
                std::thread::sleep(Duration::from_millis(2));
                recorder.complete(
                    "writer-0",
                    EventType::Ok,
                    Op::Write {
                        id,
                        site: Some(Site::Iad),
                        gtid: Some(format!("0-1-{}", id + 1)),
                        error: None,
                    },
                );
                id += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
        });
        // Up and writing before the steps start (as a live workload while the install waits
        // for authority).
        while table_rows(&table_seen) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        Self {
            running,
            thread: Some(thread),
            calls,
        }
    }
}

impl Workload for WritingWorkload {
    fn stop(mut self: Box<Self>) -> Result<()> {
        self.running
            .store(false, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the workload thread");
        }
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push("stop".to_owned());
        Ok(())
    }
}

impl Cluster for FakeCluster {
    fn kubeconfig(&self) -> &Path {
        Path::new("/nonexistent/kubeconfig")
    }
    fn install(&self, _install: &Install) -> Result<()> {
        self.call("install".to_owned());
        Ok(())
    }
    fn uninstall(&self) -> Result<()> {
        Ok(())
    }
    fn start_workload(&self, recorder: Arc<Recorder>) -> Result<Box<dyn Workload>> {
        Ok(Box::new(WritingWorkload::start(
            recorder,
            Arc::clone(&self.table),
            Arc::clone(&self.calls),
        )))
    }
    fn apply(&self, _apply: &Apply) -> Result<()> {
        self.call("apply".to_owned());
        Ok(())
    }
    fn inject(&self, fault: &Fault, recorder: &Recorder) -> Result<()> {
        let op = Op::fault(fault, FaultPhase::Start);
        recorder.invoke("nemesis", op.clone());
        recorder.complete("nemesis", EventType::Ok, op);
        self.call(format!("fault {}", fault.kind()));
        *self.actions.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Ok(())
    }
    fn act(&self, action: &Action, recorder: &Recorder) -> Result<()> {
        let op = Op::Fault {
            name: action.kind().to_owned(),
            phase: FaultPhase::Start,
            detail: String::new(),
            sites: action.sites(),
        };
        recorder.invoke("nemesis", op.clone());
        recorder.complete("nemesis", EventType::Ok, op);
        self.call(format!("do {}", action.kind()));
        *self.actions.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Ok(())
    }
    fn heal(&self, target: &HealTarget, recorder: &Recorder) -> Result<()> {
        self.call(format!("heal {}", String::from(target.clone())));
        let op = Op::Fault {
            name: String::from(target.clone()),
            phase: FaultPhase::End,
            detail: String::new(),
            sites: Vec::new(),
        };
        recorder.invoke("nemesis", op.clone());
        recorder.complete("nemesis", EventType::Ok, op);
        *self
            .rows_at_heal
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = table_rows(&self.table);
        *self.actions.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Ok(())
    }
    fn observe(&self, expect: &Expect) -> Result<Observation> {
        let actions = *self.actions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut polls = self.polls.lock().unwrap_or_else(PoisonError::into_inner);
        *polls += 1;
        // The script answers in the target's JSON shape.
        Observation::from_json(&expect.target, (self.script)(expect, *polls, actions)).map_err(
            |reason| bloodraven_harness::Error::Cluster {
                action: "observe".to_owned(),
                reason,
            },
        )
    }
    fn converged(&self) -> Result<Option<String>> {
        let at_heal = *self
            .rows_at_heal
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // One acknowledged write after the heal (the row is committed just before the ack).
        Ok((table_rows(&self.table) <= at_heal + 1).then(|| "no write since the heal".to_owned()))
    }
    fn final_state(&self) -> Result<FinalRows> {
        self.call("final".to_owned());
        let rows = self
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // Reading every site takes a while.
        std::thread::sleep(Duration::from_millis(50));
        Ok(FinalRows {
            sites: BTreeMap::from([(Site::Iad, rows)]),
            ..FinalRows::default()
        })
    }
    fn collect_artifacts(&self, dir: &Path) -> Result<()> {
        self.call(format!("artifacts {}", dir.display()));
        Ok(())
    }
}

fn pacing() -> Pacing {
    Pacing {
        poll_interval: Duration::from_millis(20),
        liveness_bound: Duration::from_secs(1),
    }
}

fn scenario(steps: &str) -> LoadedScenario {
    let source = format!("id: 38\ntitle: t\nseed: \"harness.md: Catalogue\"\ninstall: {{deployApi: true}}\nsteps:\n{steps}");
    parse_scenario(Path::new("scenarios/038-test.yaml"), &source).expect("valid scenario")
}

// docs/design/harness.md#scenario-files: `within` = becomes true by; its time-to-satisfy is
// recorded.
#[test]
fn within_waits_and_records_time_to_satisfy() {
    let cluster =
        FakeCluster::new(|_, poll| json!({"activeSite": if poll >= 3 { "pdx" } else { "iad" }}));
    let run = execute(
        &cluster,
        &scenario("- expect: {within: 2s, group: {activeSite: pdx}}\n"),
        pacing(),
        None,
    );
    assert_eq!(run.error, None);
    let result = &run.expectations[0];
    assert!(result.satisfied);
    assert!(
        result.time_to_satisfy_ms.is_some_and(|ms| ms >= 40),
        "{result:?}"
    );
    assert_eq!(cluster.calls(), ["install", "heal all", "stop", "final"]);
}

#[test]
fn within_fails_at_its_deadline_with_the_last_mismatch() {
    let cluster = FakeCluster::new(|_, _| json!({"activeSite": "iad"}));
    let run = execute(
        &cluster,
        &scenario("- expect: {within: 200ms, group: {activeSite: pdx}}\n- sleep: 1s\n"),
        pacing(),
        Some(Path::new("/tmp/a")),
    );
    let result = &run.expectations[0];
    assert!(!result.satisfied && result.time_to_satisfy_ms.is_none());
    assert!(
        result
            .failure
            .as_deref()
            .is_some_and(|why| why.contains("expected \"pdx\", found \"iad\"")),
        "{result:?}"
    );
    let error = run.error.expect("failed run");
    assert!(error.starts_with("step 0: group:"), "{error}");
    // The run stopped (no sleep), then healed, read the final state and kept artifacts.
    assert!(run.duration_ms < 900, "{}", run.duration_ms);
    assert_eq!(
        cluster.calls(),
        ["install", "heal all", "stop", "final", "artifacts /tmp/a"]
    );
    assert!(run
        .history
        .events
        .iter()
        .any(|event| matches!(event.op, Op::FinalState { .. }) && event.kind == EventType::Ok));
}

// docs/design/harness.md#scenario-files: `for` = stays true throughout.
#[test]
fn for_fails_as_soon_as_it_stops_holding() {
    let cluster =
        FakeCluster::new(|_, poll| json!({"site": if poll >= 4 { "pdx" } else { "iad" }}));
    let run = execute(
        &cluster,
        &scenario("- expect: {for: 2s, dns: {target: site-of iad}}\n"),
        pacing(),
        None,
    );
    let result = &run.expectations[0];
    assert!(!result.satisfied);
    assert!(
        result
            .failure
            .as_deref()
            .is_some_and(|why| why.starts_with("stopped holding after")),
        "{result:?}"
    );
    let cluster = FakeCluster::new(|_, _| json!({"site": "iad"}));
    let run = execute(
        &cluster,
        &scenario("- expect: {for: 150ms, dns: {target: site-of iad}}\n"),
        pacing(),
        None,
    );
    assert!(run.expectations[0].satisfied && run.error.is_none());
}

// docs/design/requirements.md R003.14: a re-POST rotates the token; later requests use the saved
// one.
#[test]
fn deploy_api_saves_and_substitutes_variables() {
    let cluster = FakeCluster::new(|expect, _| {
        let Target::DeployApi(deploy) = &expect.target else {
            return Value::Null;
        };
        match deploy
            .request
            .body
            .as_ref()
            .and_then(|body| body.get("token"))
        {
            None => json!({"status": 201, "body": {"token": "secret-1", "topologyGeneration": 4}}),
            Some(token) if token == "secret-1" && deploy.request.path.ends_with("/4") => {
                json!({"status": 200, "body": {"echo": "secret-1"}})
            }
            Some(_) => json!({"status": 403, "body": {"error": "token_mismatch"}}),
        }
    });
    let steps = "\
- expect:
    within: 1s
    deploy-api:
      request: {method: POST, path: /deploy/v1/groups/playground/leases, client: {namespace: n, serviceAccount: a}}
      status: 201
      save: {tok: token, gen: topologyGeneration}
- expect:
    within: 1s
    deploy-api:
      request: {method: PUT, path: \"/deploy/v1/groups/playground/${gen}\", client: {namespace: n, serviceAccount: a}, body: {token: \"${tok}\"}}
      status: 200
      body: {echo: \"${tok}\"}
";
    let run = execute(&cluster, &scenario(steps), pacing(), None);
    assert_eq!(run.error, None, "{:?}", run.expectations);
    assert!(run.expectations.iter().all(|result| result.satisfied));
}

// `$changed` is judged against the value before the step's fault: a change that happened
// before the first poll still counts.
#[test]
fn changed_baselines_are_taken_before_the_steps_fault() {
    let cluster = FakeCluster::with_actions(|expect, _, actions| {
        if matches!(expect.target, Target::Object(_)) {
            json!({"spec": {"holderIdentity": if actions > 0 { "b" } else { "a" }}})
        } else {
            Value::Null
        }
    });
    let steps = "\
- fault: {kill-operator: {pod: leader}}
- sleep: 10ms
- expect: {within: 200ms, object: {apiVersion: coordination.k8s.io/v1, kind: Lease, namespace: bloodraven, name: bloodraven-leader, match: {spec: {holderIdentity: {$changed: true}}}}}
";
    let run = execute(&cluster, &scenario(steps), pacing(), None);
    assert_eq!(run.error, None, "{:?}", run.expectations);
}

// `$unchanged` must not pass because its first poll came after the change.
#[test]
fn unchanged_is_judged_against_the_value_before_the_steps_fault() {
    let cluster = FakeCluster::with_actions(|expect, _, actions| {
        if matches!(expect.target, Target::Group(_)) {
            json!({"sites": [{"name": "iad", "lastSeen": if actions > 0 { "t2" } else { "t1" }}]})
        } else {
            Value::Null
        }
    });
    let steps = "\
- fault: {scale-operator: {replicas: 0}}
- expect: {for: 100ms, group: {sites: [{name: iad, lastSeen: {$unchanged: true}}]}}
";
    let run = execute(&cluster, &scenario(steps), pacing(), None);
    let error = run.error.expect("lastSeen moved at the fault");
    assert!(error.contains("unchanged from \"t1\""), "{error}");
    // Not directly after a fault: the expectation's first poll is the baseline.
    let steps = "\
- fault: {scale-operator: {replicas: 0}}
- expect: {within: 1s, group: {sites: [{name: iad}]}}
- expect: {for: 100ms, group: {sites: [{name: iad, lastSeen: {$unchanged: true}}]}}
";
    let run = execute(&cluster, &scenario(steps), pacing(), None);
    assert_eq!(run.error, None, "{:?}", run.expectations);
}

fn event(reason: &str, type_: &str, message: &str, time: jiff::Timestamp) -> Value {
    json!({"reason": reason, "type": type_, "message": message, "time": time.to_string()})
}

// An event from before the step's fault (an earlier scenario on a reused cluster, the
// bootstrap) does not satisfy an event expectation; neither does another type or message.
#[test]
fn events_are_matched_only_since_the_steps_fault() {
    let long_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3600);
    let old = FakeCluster::with_actions(move |expect, _, _| {
        if matches!(expect.target, Target::Event(_)) {
            json!({"events": [event("PrimaryReasserted", "Normal", "authority re-issued to iad", long_ago)]})
        } else {
            Value::Null
        }
    });
    let steps = "\
- fault: {kill: {site: iad, container: mysql}}
- expect: {within: 100ms, event: {reason: PrimaryReasserted}}
";
    let run = execute(&old, &scenario(steps), pacing(), None);
    assert!(
        run.error
            .as_deref()
            .is_some_and(|error| error.contains("PrimaryReasserted")),
        "{run:?}"
    );
    // Emitted after the fault, with two expectations in between: found.
    let fresh = FakeCluster::with_actions(|expect, _, actions| {
        if matches!(expect.target, Target::Event(_)) && actions > 0 {
            json!({"events": [event("PrimaryReasserted", "Normal", "authority re-issued to iad", jiff::Timestamp::now())]})
        } else if matches!(expect.target, Target::Event(_)) {
            json!({"events": []})
        } else {
            json!({"readOnly": false})
        }
    });
    let steps = "\
- fault: {kill: {site: iad, container: mysql}}
- expect: {within: 1s, mysql: {site: iad, readOnly: false}}
- expect: {within: 1s, mysql: {site: iad, readOnly: false}}
- expect: {within: 1s, event: {reason: PrimaryReasserted, type: Normal, messageContains: re-issued}}
";
    let run = execute(&fresh, &scenario(steps), pacing(), None);
    assert_eq!(run.error, None, "{:?}", run.expectations);
    for wrong in [
        "{within: 100ms, event: {reason: PrimaryReasserted, type: Warning}}",
        "{within: 100ms, event: {reason: PrimaryReasserted, messageContains: pdx}}",
        "{within: 100ms, event: {reason: SiteFailed}}",
    ] {
        let steps =
            format!("- fault: {{kill: {{site: iad, container: mysql}}}}\n- expect: {wrong}\n");
        let run = execute(&fresh, &scenario(&steps), pacing(), None);
        assert!(run.error.is_some(), "{wrong} passed");
    }
}

/// A deploy API that answers 201 with `body` to a POST, and 200 to anything else.
fn deploy_api(body: Value) -> FakeCluster {
    FakeCluster::new(move |expect, _| {
        if let Target::DeployApi(deploy) = &expect.target {
            if deploy.request.method == bloodraven_harness::targets::deploy_api::Method::Post {
                return json!({"status": 201, "body": body.clone()});
            }
            return json!({"status": 200, "body": {"echo": deploy.request.body.clone()}});
        }
        if matches!(expect.target, Target::Group(_)) {
            return json!({"topologyGeneration": 4, "plannedFailover": {"admission": {"message": "held by lease tok-1"}}});
        }
        if matches!(expect.target, Target::Metric(_)) {
            return json!({"value": 5.0});
        }
        Value::Null
    })
}

const SAVE: &str = "\
- expect:
    within: 1s
    deploy-api:
      request: {method: POST, path: /deploy/v1/groups/playground/leases, client: {namespace: n, serviceAccount: a}}
      status: 201
      save: {tok: token, gen: topologyGeneration}
";

// A variable whose field was absent from the answer was never saved: the step using it
// fails instead of sending an empty string.
#[test]
fn a_missing_saved_variable_fails_the_step() {
    let cluster = deploy_api(json!({"topologyGeneration": 4}));
    let steps = format!("{SAVE}- expect:\n    within: 1s\n    deploy-api:\n      request: {{method: PUT, path: /deploy/v1/groups/playground/leases, client: {{namespace: n, serviceAccount: a}}, body: {{token: \"${{tok}}\"}}}}\n      status: 200\n");
    let run = execute(&cluster, &scenario(&steps), pacing(), None);
    let error = run.error.expect("`${tok}` was never saved");
    assert!(
        error.starts_with("step 1:") && error.contains("${tok}"),
        "{error}"
    );
}

// `${var}` works in every expectation, and a saved number stays a number.
#[test]
fn variables_work_in_every_expectation_with_numbers_as_numbers() {
    let cluster = deploy_api(json!({"token": "tok-1", "topologyGeneration": 4}));
    let steps = format!(
        "{SAVE}\
- expect: {{within: 1s, group: {{topologyGeneration: \"${{gen}}\", plannedFailover: {{admission: {{message: {{$contains: \"${{tok}}\"}}}}}}}}}}
- expect: {{within: 1s, metric: {{name: bloodraven_deploy_leases_active, value: {{$gt: \"${{gen}}\"}}}}}}
- expect:
    within: 1s
    deploy-api:
      request: {{method: PUT, path: /deploy/v1/groups/playground/leases, client: {{namespace: n, serviceAccount: a}}, body: {{token: \"${{tok}}\", generation: \"${{gen}}\"}}}}
      status: 200
      body: {{echo: {{token: tok-1, generation: 4}}}}
"
    );
    let run = execute(&cluster, &scenario(&steps), pacing(), None);
    assert_eq!(run.error, None, "{:?}", run.expectations);
}

#[test]
fn faults_are_recorded_in_the_history() {
    let cluster = FakeCluster::new(|_, _| json!({"readOnly": true}));
    let run = execute(&cluster, &scenario("- fault: {scale-operator: {replicas: 0}}\n- expect: {within: 1s, mysql: {site: pdx, readOnly: true}}\n- heal: scale-operator\n"), pacing(), None);
    assert_eq!(run.error, None);
    assert_eq!(
        cluster.calls(),
        [
            "install",
            "fault scale-operator",
            "heal scale-operator",
            "heal all",
            "stop",
            "final"
        ]
    );
    assert!(run
        .history
        .events
        .iter()
        .any(|event| matches!(&event.op, Op::Fault { name, .. } if name == "scale-operator")));
}

// The final state is read after the workload stopped and drained: a write acknowledged
// after the read is not a lost write.
#[test]
fn the_final_state_is_read_after_the_workload_drained() {
    let cluster = FakeCluster::new(|_, _| json!({"activeSite": "iad"}));
    let run = execute(&cluster, &scenario("- sleep: 100ms\n"), pacing(), None);
    assert_eq!(run.error, None);
    let (summary, verdict) = check_rpo(&run.history);
    assert!(summary.acknowledged > 5, "{summary:?}");
    assert_eq!(summary.lost, 0, "{verdict:?}");
    let calls = cluster.calls();
    assert_eq!(calls[calls.len() - 2..], ["stop", "final"]);
}

struct FakeBackend;

impl Backend for FakeBackend {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Kubeconfig
    }
    fn create(&self) -> Result<Arc<dyn Cluster>> {
        Ok(Arc::new(FakeCluster::new(
            |_, _| json!({"activeSite": "iad"}),
        )))
    }
    fn teardown(&self, _cluster: Arc<dyn Cluster>) -> Result<()> {
        Ok(())
    }
}

fn context(
    backend: std::result::Result<Box<dyn Backend>, String>,
    report_dir: &Path,
) -> Arc<RunContext> {
    let capabilities = backend
        .as_ref()
        .map(|backend| backend.capabilities())
        .unwrap_or_default();
    Arc::new(RunContext {
        kind: backend
            .as_ref()
            .map_or(ClusterKind::Localkube, |backend| backend.kind()),
        capabilities,
        fault_driver: bloodraven_harness::backend::FaultDriverKind::Auto,
        backend,
        shared_cluster: Mutex::new(None),
        reuse: false,
        pacing: pacing(),
        run_id: "run-1".to_owned(),
        report_dir: report_dir.to_path_buf(),
        repeat: 1,
        results: Mutex::new(Vec::new()),
    })
}

/// Every second cluster it creates answers activeSite pdx: a flaky scenario.
struct FlakyBackend {
    created: std::sync::atomic::AtomicU32,
}

impl Backend for FlakyBackend {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Kubeconfig
    }
    fn create(&self) -> Result<Arc<dyn Cluster>> {
        let n = self
            .created
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let site = if n % 2 == 1 { "pdx" } else { "iad" };
        Ok(Arc::new(FakeCluster::new(
            move |_, _| json!({"activeSite": site}),
        )))
    }
    fn teardown(&self, _cluster: Arc<dyn Cluster>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn repeat_runs_each_scenario_n_times_and_reports_its_pass_rate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FlakyBackend {
        created: std::sync::atomic::AtomicU32::new(0),
    };
    let context = Arc::new(RunContext {
        repeat: 3,
        ..Arc::into_inner(context(Ok(Box::new(backend)), dir.path())).expect("one owner")
    });
    let loaded = scenario("- expect: {within: 300ms, group: {activeSite: iad}}\n");
    let message = failure_message(run_trial(&context, &loaded)).expect("one run failed");
    assert!(
        message.starts_with("passed 2 of 3 runs; run 2: step 0: group"),
        "{message}"
    );
    let written = finish_run(&context, support_epoch(), "kubeconfig")
        .expect("finish")
        .expect("report dir");
    let results: bloodraven_harness::report::results::RunResults = serde_json::from_str(
        &std::fs::read_to_string(written.join("results.json")).expect("results.json"),
    )
    .expect("parses");
    assert_eq!(results.repeat, 3);
    let attempts: Vec<(u32, bool)> = results
        .scenarios
        .iter()
        .map(|scenario| (scenario.attempt, scenario.passed))
        .collect();
    assert_eq!(attempts, [(1, true), (2, false), (3, true)]);
    for run in ["s038_test", "s038_test.run2", "s038_test.run3"] {
        assert!(written.join(run).join("history.jsonl").is_file(), "{run}");
    }
    let html = std::fs::read_to_string(written.join("index.html")).expect("index.html");
    assert!(
        html.contains(">FLAKY<") && html.contains("2/3 (67%)"),
        "pass rate in the report"
    );
    assert!(
        html.contains("id=\"s038_test.run2\""),
        "each run has its section"
    );
    let trend = bloodraven_harness::report::trend::read_trend(&dir.path().join("trend.jsonl"))
        .expect("trend");
    assert_eq!(trend[0].scenarios.len(), 1);
    assert_eq!(trend[0].scenarios[0].pass_count(), (2, 3));
    assert!(!trend[0].scenarios[0].passed);
}

#[test]
fn ids_select_scenarios_in_their_order_and_unknown_ids_are_named() {
    use bloodraven_harness::runner::trials::select_ids;
    let catalogue = bloodraven_harness::scenario::validate::load_catalogue(
        &bloodraven_harness::backend::workspace_root().join("scenarios"),
    )
    .expect("catalogue");
    let all = catalogue.len();
    let chosen = select_ids(catalogue.clone(), &[50, 20, 22, 20]).expect("known ids");
    let ids: Vec<u16> = chosen.iter().map(|loaded| loaded.scenario.id).collect();
    assert_eq!(ids, [50, 20, 22]);
    assert_eq!(select_ids(catalogue.clone(), &[]).expect("all").len(), all);
    let error = select_ids(catalogue, &[20, 999]).expect_err("unknown id");
    assert!(error.contains("999"), "{error}");
}

fn failure_message(result: std::result::Result<(), libtest_mimic::Failed>) -> Option<String> {
    result
        .err()
        .map(|failed| failed.message().unwrap_or_default().to_owned())
}

// The brief: a trial run without a backend must fail with one clear sentence, never pass,
// and the scenario is a FAIL row in results.json, the report, JUnit and the trend line (it
// was missing from all four, so a run whose clusters all failed wrote no report at all).
#[test]
fn trials_without_a_backend_fail_and_are_reported_as_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sentence = bloodraven_harness::backend::unavailable_sentence(ClusterKind::Localkube);
    assert!(
        sentence.starts_with("failed to find a cluster: the `localkube` backend")
            && sentence.ends_with('.')
            && sentence.matches(". ").count() == 0
    );
    let context = context(Err(sentence.clone()), dir.path());
    let loaded = scenario("- expect: {within: 1s, group: {activeSite: iad}}\n");
    assert_eq!(
        failure_message(run_trial(&context, &loaded)),
        Some(sentence)
    );
    let written = finish_run(&context, support_epoch(), "localkube")
        .expect("finish")
        .expect("a report of the failed run");
    assert_unrun_is_a_fail_row(&written, dir.path(), "failed to find a cluster");
    // Trials are named sNNN_slug; the cargo test target marks them ignored (not passed).
    let trials = build_trials(std::slice::from_ref(&loaded), &context, false);
    assert_eq!(
        (trials[0].name(), trials[0].has_ignored_flag()),
        ("s038_test", false)
    );
    assert!(build_trials(&[loaded], &context, true)[0].has_ignored_flag());
}

/// results.json, index.html, junit.xml and the trend line of a run with one scenario that
/// never ran all show it failed, with `reason` in the failure.
fn assert_unrun_is_a_fail_row(written: &Path, report_dir: &Path, reason: &str) {
    let results: bloodraven_harness::report::results::RunResults = serde_json::from_str(
        &std::fs::read_to_string(written.join("results.json")).expect("results.json"),
    )
    .expect("parses");
    assert_eq!(results.scenarios.len(), 1);
    let row = &results.scenarios[0];
    assert!(!row.passed, "{row:?}");
    assert!(
        row.failure.as_deref().is_some_and(|f| f.contains(reason)),
        "{:?}",
        row.failure
    );
    let html = std::fs::read_to_string(written.join("index.html")).expect("index.html");
    assert!(
        html.contains("s038_test") && html.contains(">FAIL<"),
        "report row"
    );
    let junit = std::fs::read_to_string(written.join("junit.xml")).expect("junit.xml");
    assert!(
        junit.contains("<failure") && junit.contains("s038_test"),
        "{junit}"
    );
    let trend = bloodraven_harness::report::trend::read_trend(&report_dir.join("trend.jsonl"))
        .expect("trend");
    assert_eq!(trend[0].scenarios.len(), 1);
    assert!(!trend[0].scenarios[0].passed);
}

/// A backend whose clusters cannot be created.
struct BrokenBackend;

impl Backend for BrokenBackend {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Kubeconfig
    }
    fn create(&self) -> Result<Arc<dyn Cluster>> {
        Err(bloodraven_harness::error::Error::Cluster {
            action: "create the cluster".to_owned(),
            reason: "the API server never answered".to_owned(),
        })
    }
    fn teardown(&self, _cluster: Arc<dyn Cluster>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_scenario_whose_cluster_could_not_be_created_is_a_fail_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context(Ok(Box::new(BrokenBackend)), dir.path());
    let loaded = scenario("- expect: {within: 1s, group: {activeSite: iad}}\n");
    let message = failure_message(run_trial(&context, &loaded)).expect("fails");
    assert!(
        message.contains("the API server never answered"),
        "{message}"
    );
    let written = finish_run(&context, support_epoch(), "kubeconfig")
        .expect("finish")
        .expect("a report of the failed run");
    assert_unrun_is_a_fail_row(&written, dir.path(), "the API server never answered");
}

#[test]
fn trials_with_a_backend_run_and_write_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context(Ok(Box::new(FakeBackend)), dir.path());
    let passing = scenario("- expect: {within: 1s, group: {activeSite: iad}}\n");
    let failing_source = "id: 39\ntitle: u\nseed: \"harness.md: Catalogue\"\nsteps:\n- expect: {within: 100ms, group: {activeSite: pdx}}\n";
    let failing =
        parse_scenario(Path::new("scenarios/039-other.yaml"), failing_source).expect("valid");
    assert_eq!(failure_message(run_trial(&context, &passing)), None);
    let message = failure_message(run_trial(&context, &failing)).expect("fails");
    assert!(
        message.starts_with("step 0: group") && message.contains("found \"iad\""),
        "{message}"
    );
    let written = finish_run(&context, support_epoch(), "kubeconfig")
        .expect("finish")
        .expect("report dir");
    let results = std::fs::read_to_string(written.join("results.json")).expect("results.json");
    assert!(
        results.contains("\"trial\": \"s038_test\"")
            && results.contains("\"trial\": \"s039_other\"")
    );
    assert!(
        results.contains("step 0: group"),
        "the failing expectation is named"
    );
    assert!(written.join("index.html").is_file() && dir.path().join("trend.jsonl").is_file());
}

#[test]
fn harness_flags_parse_alongside_libtest_flags() {
    let cli = Cli::try_parse_from([
        "bloodraven-harness",
        "--cluster",
        "kind",
        "--reuse",
        "--report-dir",
        "out",
        "--exact",
        "--skip",
        "s001",
        "--list",
        "--format",
        "terse",
        "s038_dns_write_denied",
    ])
    .expect("flags parse");
    assert_eq!(cli.cluster, Some(ClusterKind::Kind));
    assert!(cli.reuse && cli.test.exact && cli.test.list);
    assert_eq!(cli.report_dir, Path::new("out"));
    assert_eq!(cli.test.skip, ["s001"]);
    assert_eq!(cli.test.filter.as_deref(), Some("s038_dns_write_denied"));
    let error = Cli::try_parse_from(["bloodraven-harness", "--cluster", "minikube"])
        .expect_err("unknown backend");
    assert!(error.to_string().contains("localkube"), "{error}");
    let cli = Cli::try_parse_from([
        "bloodraven-harness",
        "--repeat",
        "2",
        "--ids",
        "50,20",
        "s0",
    ])
    .expect("repeat and ids parse next to a filter");
    assert_eq!((cli.repeat, cli.ids.as_slice()), (2, &[50_u16, 20][..]));
    assert_eq!(cli.test.filter.as_deref(), Some("s0"));
    assert_eq!(
        Cli::try_parse_from(["bloodraven-harness"])
            .expect("default")
            .repeat,
        1
    );
    assert!(Cli::try_parse_from(["bloodraven-harness", "--repeat", "0"]).is_err());
}

fn support_epoch() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000).expect("valid")
}

// s020: the write-outage measure step ran 11 ms before the new primary acknowledged its
// first write (the expectations before it had passed) and reported "could not be
// measured"; a measurement now waits for its value within its bound.
#[test]
fn a_measurement_waits_for_a_value_that_comes_later() {
    use bloodraven_harness::runner::execute::poll_until;
    let start = std::time::Instant::now();
    let mut calls = 0;
    let value = poll_until(Duration::from_secs(5), Duration::from_millis(10), || {
        calls += 1;
        (start.elapsed() >= Duration::from_millis(50)).then_some(calls)
    });
    assert!(value.is_some_and(|calls| calls > 1), "{value:?}");
    let never = poll_until(Duration::from_millis(60), Duration::from_millis(10), || {
        None::<()>
    });
    assert_eq!(never, None);
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// A backend whose clusters can step no clock (like kind, or any cluster's own runtime).
struct NoClockBackend;

impl Backend for NoClockBackend {
    fn kind(&self) -> ClusterKind {
        ClusterKind::Kind
    }
    fn create(&self) -> Result<Arc<dyn Cluster>> {
        panic!("a skipped scenario must not ask for a cluster")
    }
    fn teardown(&self, _cluster: Arc<dyn Cluster>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn a_scenario_needing_a_capability_the_backend_lacks_is_skipped_never_passed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context(Ok(Box::new(NoClockBackend)), dir.path());
    let source = "id: 41\ntitle: clock\nseed: \"harness.md: Catalogue\"\nrequires: [clock-offset]\nsteps:\n- fault: {clock-offset: {site: iad, offset: \"+20s\"}}\n";
    let loaded = parse_scenario(Path::new("scenarios/041-clock.yaml"), source).expect("valid");
    let reason = context.skip_reason(&loaded).expect("skipped");
    assert_eq!(
        reason,
        "requires clock-offset, which the kind backend does not have"
    );
    // The trial is ignored (libtest never says `ok`); run anyway, it fails as skipped.
    let trials = build_trials(std::slice::from_ref(&loaded), &context, false);
    assert!(trials[0].has_ignored_flag());
    let message = failure_message(run_trial(&context, &loaded)).expect("not a pass");
    assert!(
        message.starts_with("skipped: requires clock-offset"),
        "{message}"
    );
    let written = finish_run(&context, support_epoch(), "kind")
        .expect("finish")
        .expect("a report with the skipped row");
    let results: bloodraven_harness::report::results::RunResults = serde_json::from_str(
        &std::fs::read_to_string(written.join("results.json")).expect("results.json"),
    )
    .expect("parses");
    assert_eq!(results.scenarios.len(), 1);
    let row = &results.scenarios[0];
    assert!(!row.passed && row.skipped.as_deref() == Some(reason.as_str()));
    assert_eq!(
        (results.passed(), results.failed(), results.skipped()),
        (0, 0, 1)
    );
    let junit = std::fs::read_to_string(written.join("junit.xml")).expect("junit.xml");
    assert!(
        junit.contains("<skipped") && junit.contains("requires clock-offset"),
        "{junit}"
    );
    let index = std::fs::read_to_string(written.join("index.html")).expect("index.html");
    assert!(index.contains("SKIPPED") && index.contains("1 skipped"));
    let trend = bloodraven_harness::report::trend::read_trend(&dir.path().join("trend.jsonl"))
        .expect("trend");
    assert!(!trend[0].scenarios[0].passed);
    assert_eq!(trend[0].scenarios[0].pass_count(), (0, 0));
    assert_eq!(trend[0].pass_rate(), 0.0);
    // The same scenario on a backend that has the capability is not skipped.
    let localkube_like = context_with_capabilities(dir.path());
    assert_eq!(localkube_like.skip_reason(&loaded), None);
}

fn context_with_capabilities(report_dir: &Path) -> Arc<RunContext> {
    let context = context(Ok(Box::new(FakeBackend)), report_dir);
    let mut context = Arc::try_unwrap(context).unwrap_or_else(|_| unreachable!());
    context
        .capabilities
        .insert(bloodraven_harness::scenario::model::Capability::ClockOffset);
    Arc::new(context)
}

#[test]
fn libtests_selection_is_replayed_for_skipped_trials() {
    use bloodraven_harness::runner::trials::selected_by_filter;
    let args = |flags: &[&str]| {
        libtest_mimic::Arguments::parse_from(
            std::iter::once("harness").chain(flags.iter().copied()),
        )
    };
    assert!(selected_by_filter(&args(&[]), "s041_clock"));
    assert!(selected_by_filter(&args(&["s041"]), "s041_clock"));
    assert!(!selected_by_filter(
        &args(&["s041", "--exact"]),
        "s041_clock"
    ));
    assert!(selected_by_filter(
        &args(&["s041_clock", "--exact"]),
        "s041_clock"
    ));
    assert!(!selected_by_filter(
        &args(&["--skip", "clock"]),
        "s041_clock"
    ));
    assert!(!selected_by_filter(&args(&["s020"]), "s041_clock"));
}

// docs/scenarios.md, `archive`: the runner records what an archive expectation read last
// (process `archive`: `ok` once satisfied, `fail` when it was not), archives counting from the
// scenario's start, for the archive checker to judge after the final read.
#[test]
fn an_archive_expectation_records_what_it_read() {
    use bloodraven_harness::check::archive::ArchiveObservation;
    let observe = |partial: bool| {
        move |expect: &Expect, poll: u32| {
            if !matches!(expect.target, Target::Archive(_)) {
                return Value::Null;
            }
            let mut fixture = crate::support::ArchiveFixture::holding(
                "rejoin-iad-1",
                Site::Iad,
                jiff::Timestamp::now(),
                &["0-1-5".to_owned()],
            );
            if partial || poll < 2 {
                fixture.manifest = None;
            }
            serde_json::to_value(ArchiveObservation {
                site: Site::Iad,
                archives: vec![fixture.read(Site::Iad)],
            })
            .expect("json")
        }
    };
    let reads = |history: &bloodraven_harness::history::store::History| {
        history
            .events
            .iter()
            .filter(|event| event.process == "archive")
            .map(|event| match &event.op {
                Op::ArchiveRead {
                    site,
                    since,
                    archives,
                } => (
                    event.kind,
                    *site,
                    *since <= event.wall,
                    archives.iter().map(|archive| archive.manifest).collect(),
                ),
                other => panic!("not an archive read: {other:?}"),
            })
            .collect::<Vec<(EventType, Site, bool, Vec<bool>)>>()
    };
    let steps = "- expect: {within: 2s, archive: {site: iad, holds: lost-writes}}\n";
    let cluster = FakeCluster::new(observe(false));
    let run = execute(&cluster, &scenario(steps), pacing(), None);
    assert_eq!(run.error, None);
    assert!(run.expectations[0].satisfied);
    assert_eq!(
        reads(&run.history),
        [
            (EventType::Invoke, Site::Iad, true, Vec::new()),
            (EventType::Ok, Site::Iad, true, vec![true]),
        ]
    );

    let steps = "- expect: {within: 200ms, archive: {site: iad, holds: lost-writes}}\n";
    let cluster = FakeCluster::new(observe(true));
    let run = execute(&cluster, &scenario(steps), pacing(), None);
    let error = run.error.expect("no manifest, no archive");
    assert!(error.contains("no archive with a manifest"), "{error}");
    assert_eq!(
        reads(&run.history),
        [
            (EventType::Invoke, Site::Iad, true, Vec::new()),
            (EventType::Fail, Site::Iad, true, vec![false]),
        ]
    );
}
