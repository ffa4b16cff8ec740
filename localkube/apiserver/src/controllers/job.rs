//! Jobs (`batch/v1`, NonIndexed): pods from the template, `parallelism` at a time, until
//! `completions` of them succeed (or, without completions, until one succeeded and the
//! rest finished); failed pods are replaced after the real controller's back-off (10 s,
//! doubling, at most 6 min) until more than `backoffLimit` failed (OnFailure: container
//! restarts count); `activeDeadlineSeconds`, `suspend` and `ttlSecondsAfterFinished`.
//! As in 1.32, the interim condition (`SuccessCriteriaMet`, `FailureTarget`) comes first and
//! the terminal one (`Complete` with `completionTime`, `Failed`) once no pod of the Job is
//! still running or terminating.
//!
//! Gather (the Job and its pods) -> [`decide`] (pure) -> act (pods, events, status).
//! Subset: pods carry no `batch.kubernetes.io/job-tracking` finalizer; counts come from the
//! pods that exist and never go down, so a finished pod deleted by hand before the Job
//! counted it is not counted.

use super::super::cluster::{Cluster, DeleteOptions};
use super::super::meta;
use super::super::registry::Subresource;
use super::controller::{log_err, record_event, Controller};
use super::workloads::{controlled_by, controller_ref, pod_ready, set_count};
use jiff::Timestamp;
use serde_json::{json, Value};

const COMPONENT: &str = "job-controller";
/// First back-off after a failed pod (the real controller's DefaultJobPodFailureBackOff).
const BACKOFF_INITIAL_SECONDS: i64 = 10;
/// Longest back-off (MaxJobPodFailureBackOff).
const BACKOFF_MAX_SECONDS: i64 = 360;
/// Most pods created for one Job in one pass (the real controller's burst per sync).
const CREATES_PER_PASS_MAX: i64 = 500;

/// Runs Jobs.
pub struct JobController;

/// How a Job ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Enough pods succeeded.
    Succeeded,
    /// More than backoffLimit pods failed (or containers restarted, with OnFailure).
    BackoffLimitExceeded,
    /// Active longer than activeDeadlineSeconds.
    DeadlineExceeded,
}

impl Ending {
    fn reason(self) -> &'static str {
        match self {
            Ending::Succeeded => "CompletionsReached",
            Ending::BackoffLimitExceeded => "BackoffLimitExceeded",
            Ending::DeadlineExceeded => "DeadlineExceeded",
        }
    }
    fn message(self) -> &'static str {
        match self {
            Ending::Succeeded => "Reached expected number of succeeded pods",
            Ending::BackoffLimitExceeded => "Job has reached the specified backoff limit",
            Ending::DeadlineExceeded => "Job was active longer than specified deadline",
        }
    }
    /// The interim and the terminal condition types.
    fn conditions(self) -> (&'static str, &'static str) {
        match self {
            Ending::Succeeded => ("SuccessCriteriaMet", "Complete"),
            Ending::BackoffLimitExceeded | Ending::DeadlineExceeded => ("FailureTarget", "Failed"),
        }
    }
    fn from_reason(reason: &str) -> Option<Ending> {
        match reason {
            "CompletionsReached" => Some(Ending::Succeeded),
            "BackoffLimitExceeded" => Some(Ending::BackoffLimitExceeded),
            "DeadlineExceeded" => Some(Ending::DeadlineExceeded),
            _ => None,
        }
    }
}

/// What one pass does for one Job.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    /// Pods to create.
    create: i64,
    /// Active pods to delete (names).
    delete: Vec<String>,
    /// The status to write.
    status: Value,
    /// Events to record (type, reason, message).
    events: Vec<(&'static str, &'static str, &'static str)>,
}

/// The pods of one Job, counted.
#[derive(Debug, Default)]
struct Pods<'a> {
    active: Vec<&'a Value>,
    terminating: usize,
    succeeded: i64,
    failed: i64,
    /// Container restarts of running and pending pods (counted with OnFailure).
    restarts: i64,
    /// Failed pods that finished after the last succeeded one, and when the last did.
    failures_since_success: i64,
    last_failure: Option<Timestamp>,
}

/// When a finished pod finished: its containers' finishedAt, else its Ready transition.
fn finished_at(p: &Value) -> Option<Timestamp> {
    let containers = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|container_status| {
            container_status
                .pointer("/state/terminated/finishedAt")
                .and_then(Value::as_str)
                .and_then(meta::parse_time)
        })
        .max();
    containers.or_else(|| {
        p.pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| meta::str_at(c, "/type") == "Ready")
            .and_then(|condition| meta::parse_time(meta::str_at(condition, "/lastTransitionTime")))
    })
}

fn restart_count(p: &Value) -> i64 {
    ["/status/containerStatuses", "/status/initContainerStatuses"]
        .iter()
        .flat_map(|init_container_status| {
            p.pointer(init_container_status)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum()
}

fn count<'a>(pods: &[&'a Value]) -> Pods<'a> {
    let mut out = Pods::default();
    let last_success = pods
        .iter()
        .filter(|p| meta::str_at(p, "/status/phase") == "Succeeded")
        .filter_map(|p| finished_at(p))
        .max();
    for pod in pods {
        match meta::str_at(pod, "/status/phase") {
            "Succeeded" => out.succeeded += 1,
            "Failed" => {
                out.failed += 1;
                let at = finished_at(pod);
                if last_success.is_none() || at > last_success {
                    out.failures_since_success += 1;
                    out.last_failure = out.last_failure.max(at);
                }
            }
            _ if pod.pointer("/metadata/deletionTimestamp").is_some() => out.terminating += 1,
            _ => {
                out.restarts += restart_count(pod);
                out.active.push(pod);
            }
        }
    }
    out
}

fn int(object: &Value, path: &str) -> Option<i64> {
    object.pointer(path).and_then(Value::as_i64)
}

fn condition<'a>(job: &'a Value, ty: &str) -> Option<&'a Value> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| meta::str_at(c, "/type") == ty)
}

fn condition_true(job: &Value, ty: &str) -> bool {
    condition(job, ty).map(|c| meta::str_at(c, "/status") == "True") == Some(true)
}

/// The back-off in seconds before replacing the `n`th consecutive failed pod.
fn backoff_seconds(count: i64) -> i64 {
    let exponent = (count - 1).clamp(0, 16) as u32;
    (BACKOFF_INITIAL_SECONDS << exponent).min(BACKOFF_MAX_SECONDS)
}

/// The ending a Job has reached, if any: one already recorded in an interim condition,
/// else success, the deadline (not while suspended), then the back-off limit, as the real
/// controller checks.
fn ending(
    job: &Value,
    pods: &Pods,
    succeeded: i64,
    failed: i64,
    suspended: bool,
    now: Timestamp,
) -> Option<Ending> {
    for ty in ["SuccessCriteriaMet", "FailureTarget"] {
        if let Some(status) = condition(job, ty).filter(|c| meta::str_at(c, "/status") == "True") {
            return Ending::from_reason(meta::str_at(status, "/reason"))
                .or(Some(Ending::BackoffLimitExceeded));
        }
    }
    let done = match int(job, "/spec/completions") {
        Some(count) => succeeded >= count,
        None => succeeded > 0 && pods.active.is_empty(),
    };
    if done {
        return Some(Ending::Succeeded);
    }
    let start = job
        .pointer("/status/startTime")
        .and_then(Value::as_str)
        .and_then(meta::parse_time);
    // The deadline stands still while the Job is suspended.
    if let (false, Some(start), Some(deadline)) =
        (suspended, start, int(job, "/spec/activeDeadlineSeconds"))
    {
        if now >= meta::add_seconds(start, deadline) {
            return Some(Ending::DeadlineExceeded);
        }
    }
    let limit = int(job, "/spec/backoffLimit").unwrap_or(6);
    let on_failure = meta::str_at(job, "/spec/template/spec/restartPolicy") == "OnFailure";
    let restarts_exceed = on_failure
        && if limit == 0 {
            pods.restarts > 0
        } else {
            pods.restarts >= limit
        };
    if failed > limit || restarts_exceed {
        return Some(Ending::BackoffLimitExceeded);
    }
    None
}

/// How many pods should be active now.
fn wanted_active(job: &Value, succeeded: i64) -> i64 {
    let parallelism = int(job, "/spec/parallelism").unwrap_or(1).max(0);
    match int(job, "/spec/completions") {
        Some(count) => parallelism.min(count - succeeded).max(0),
        None if succeeded > 0 => 0,
        None => parallelism,
    }
}

fn cond(ty: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": ty, "status": status, "lastProbeTime": now, "lastTransitionTime": now, "reason": reason, "message": message})
}

/// Sets a condition by type; an unchanged status keeps its timestamps.
fn put_condition(conditions: &mut Vec<Value>, c: Value) {
    match conditions
        .iter_mut()
        .find(|x| meta::str_at(x, "/type") == meta::str_at(&c, "/type"))
    {
        Some(x) if meta::str_at(x, "/status") == meta::str_at(&c, "/status") => {}
        Some(x) => *x = c,
        None => conditions.push(c),
    }
}

/// The status being written, with its conditions and the events to record.
struct Draft {
    status: Value,
    conditions: Vec<Value>,
    events: Vec<(&'static str, &'static str, &'static str)>,
    now: String,
}

impl Draft {
    fn new(job: &Value, now: Timestamp) -> Draft {
        let status = job
            .get("status")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or(json!({}));
        let conditions = status
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Draft {
            status,
            conditions,
            events: Vec::new(),
            now: meta::time(now),
        }
    }
    fn condition(&mut self, ty: &str, status: &str, reason: &str, message: &str) {
        let c = cond(ty, status, reason, message, &self.now);
        put_condition(&mut self.conditions, c);
    }
    fn condition_true(&self, ty: &str) -> bool {
        self.conditions
            .iter()
            .any(|c| meta::str_at(c, "/type") == ty && meta::str_at(c, "/status") == "True")
    }
}

/// `suspend`: the Suspended condition, and a new startTime on resume (the deadline counts
/// from there) or on the first run.
fn suspension(job: &Value, suspended: bool, draft: &mut Draft) {
    match (suspended, condition_true(job, "Suspended")) {
        (true, false) => {
            draft.condition("Suspended", "True", "JobSuspended", "Job suspended");
            draft.events.push(("Normal", "Suspended", "Job suspended"));
        }
        (false, true) => {
            draft.condition("Suspended", "False", "JobResumed", "Job resumed");
            draft.events.push(("Normal", "Resumed", "Job resumed"));
            draft.status["startTime"] = json!(draft.now);
        }
        _ => {}
    }
    if !suspended
        && draft
            .status
            .get("startTime")
            .map(Value::is_null)
            .unwrap_or(true)
    {
        draft.status["startTime"] = json!(draft.now);
    }
}

/// The active pods to delete to get down to `want`: not-ready ones first, then the newest.
fn surplus(active: &[&Value], want: i64) -> Vec<String> {
    let extra = (active.len() as i64 - want).max(0) as usize;
    let mut victims = active.to_vec();
    victims.sort_by_key(|p| {
        (
            pod_ready(p),
            std::cmp::Reverse(meta::str_at(p, "/metadata/creationTimestamp").to_string()),
        )
    });
    victims
        .iter()
        .take(extra)
        .map(|p| meta::name(p).to_string())
        .collect()
}

/// Records an ending: the interim condition now, the terminal one (and completionTime)
/// once `remaining` pods (running or terminating) are gone.
fn finish(ending: Ending, remaining: i64, draft: &mut Draft) {
    let (interim, terminal) = ending.conditions();
    if !draft.condition_true(interim) {
        draft.condition(interim, "True", ending.reason(), ending.message());
    }
    if remaining > 0 {
        return;
    }
    draft.condition(terminal, "True", ending.reason(), ending.message());
    match ending {
        Ending::Succeeded => {
            draft.status["completionTime"] = json!(draft.now);
            draft.events.push(("Normal", "Completed", "Job completed"));
        }
        Ending::BackoffLimitExceeded | Ending::DeadlineExceeded => {
            draft
                .events
                .push(("Warning", ending.reason(), ending.message()))
        }
    }
}

/// Decides one pass for a Job that is not finished (pure).
fn decide(job: &Value, owned: &[&Value], now: Timestamp) -> Plan {
    let pods = count(owned);
    let succeeded = pods
        .succeeded
        .max(int(job, "/status/succeeded").unwrap_or(0));
    let failed = pods.failed.max(int(job, "/status/failed").unwrap_or(0));
    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let mut draft = Draft::new(job, now);
    suspension(job, suspended, &mut draft);
    let mut view = job.clone();
    view["status"] = draft.status.clone();
    let end = ending(&view, &pods, succeeded, failed, suspended, now);
    let want = match end {
        Some(_) => 0,
        None if suspended => 0,
        None => wanted_active(job, succeeded),
    };
    let active = pods.active.len() as i64;
    let delete = surplus(&pods.active, want);
    let backing_off = pods.failures_since_success > 0
        && pods
            .last_failure
            .map(|timestamp| {
                now < meta::add_seconds(timestamp, backoff_seconds(pods.failures_since_success))
            })
            .unwrap_or(false);
    let create = if backing_off {
        0
    } else {
        (want - active).clamp(0, CREATES_PER_PASS_MAX)
    };
    if let Some(e) = end {
        finish(e, active + pods.terminating as i64, &mut draft);
    }
    let deleting: Vec<&&Value> = pods
        .active
        .iter()
        .filter(|p| delete.iter().any(|n| n == meta::name(p)))
        .collect();
    let ready = pods.active.iter().filter(|p| pod_ready(p)).count()
        - deleting.iter().filter(|p| pod_ready(p)).count();
    // JobStatus: active/succeeded/failed omitempty; ready and terminating always (pointers).
    let status = &mut draft.status;
    set_count(status, "active", active - delete.len() as i64);
    set_count(status, "succeeded", succeeded);
    set_count(status, "failed", failed);
    status["ready"] = json!(ready);
    status["terminating"] = json!(pods.terminating + delete.len());
    status["uncountedTerminatedPods"] = json!({});
    if !draft.conditions.is_empty() {
        status["conditions"] = json!(draft.conditions);
    }
    Plan {
        create,
        delete,
        status: draft.status,
        events: draft.events,
    }
}

fn pod_for(job: &Value) -> Value {
    let template = job.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut md = template
        .get("metadata")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    md["generateName"] = json!(format!("{}-", meta::name(job)));
    md["namespace"] = json!(meta::namespace(job));
    md["ownerReferences"] = json!([controller_ref(job)]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": template.get("spec").cloned().unwrap_or(json!({}))})
}

fn act(cluster: &Cluster, job: &Value, plan: &Plan) {
    let (ns, name) = (meta::namespace(job), meta::name(job));
    for _ in 0..plan.create {
        let Some(created) = log_err(
            COMPONENT,
            "create pod",
            cluster.create_internal("", "pods", ns, pod_for(job), COMPONENT),
        ) else {
            break;
        };
        tracing::debug!(
            namespace = ns,
            job = name,
            pod = meta::name(&created),
            "job pod created"
        );
        let msg = format!("Created pod: {}", meta::name(&created));
        record_event(cluster, job, "Normal", "SuccessfulCreate", &msg, COMPONENT);
    }
    for pod in &plan.delete {
        if log_err(
            COMPONENT,
            "delete pod",
            cluster.delete_internal("", "pods", ns, pod, None),
        )
        .is_some()
        {
            let msg = format!("Deleted pod: {pod}");
            record_event(cluster, job, "Normal", "SuccessfulDelete", &msg, COMPONENT);
        }
    }
    for (ty, reason, message) in &plan.events {
        tracing::info!(namespace = ns, job = name, reason, "job {message}");
        record_event(cluster, job, ty, reason, message, COMPONENT);
    }
    let status = plan.status.clone();
    log_err(
        COMPONENT,
        "status",
        cluster.modify(
            "batch",
            "jobs",
            ns,
            name,
            Some(Subresource::Status),
            COMPONENT,
            |object| {
                if object.get("status") == Some(&status) {
                    return false;
                }
                object["status"] = status.clone();
                true
            },
        ),
    );
}

/// When a finished Job finished (completionTime, else its Failed condition).
fn finish_time(job: &Value) -> Option<Timestamp> {
    job.pointer("/status/completionTime")
        .and_then(Value::as_str)
        .and_then(meta::parse_time)
        .or_else(|| {
            condition(job, "Failed")
                .and_then(|c| meta::parse_time(meta::str_at(c, "/lastTransitionTime")))
        })
}

/// The TTL-after-finished controller: deletes a finished Job (and its pods) `ttl` seconds
/// after it finished.
fn expire(cluster: &Cluster, job: &Value, now: Timestamp) {
    let (Some(ttl), Some(done)) = (int(job, "/spec/ttlSecondsAfterFinished"), finish_time(job))
    else {
        return;
    };
    if now < meta::add_seconds(done, ttl) {
        return;
    }
    let Some(resource) = cluster.resource("batch", "jobs") else {
        return;
    };
    let options = DeleteOptions {
        propagation: Some("Background".into()),
        precondition_uid: Some(meta::uid_of(job).to_string()),
        ..Default::default()
    };
    if log_err(
        "ttl-after-finished-controller",
        "delete job",
        cluster.delete(&resource, meta::namespace(job), meta::name(job), &options),
    )
    .is_some()
    {
        tracing::info!(
            namespace = meta::namespace(job),
            job = meta::name(job),
            ttl,
            "finished job expired"
        );
    }
}

impl Controller for JobController {
    fn name(&self) -> &'static str {
        "job"
    }
    fn reconcile(&mut self, cluster: &Cluster, now: Timestamp) {
        let (jobs, _) = cluster.store.list("batch/jobs", None);
        if jobs.is_empty() {
            return;
        }
        let (pods, _) = cluster.store.list("/pods", None);
        for job in jobs
            .iter()
            .filter(|j| j.pointer("/metadata/deletionTimestamp").is_none())
        {
            if condition_true(job, "Complete") || condition_true(job, "Failed") {
                expire(cluster, job, now);
                continue;
            }
            let (ns, uid) = (meta::namespace(job), meta::uid_of(job));
            let owned: Vec<&Value> = pods
                .iter()
                .filter(|p| meta::namespace(p) == ns && controlled_by(p, uid))
                .collect();
            let plan = decide(job, &owned, now);
            act(cluster, job, &plan);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(spec: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default", "uid": "u"},
            "spec": spec, "status": {}})
    }

    fn pod(phase: &str, finished: &str) -> Value {
        json!({"metadata": {"name": format!("p-{phase}-{finished}"), "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": phase, "containerStatuses": [{"restartCount": 0, "state": {"terminated": {"finishedAt": finished}}}]}})
    }

    fn at(text: &str) -> Timestamp {
        meta::parse_time(text).expect("time")
    }

    #[test]
    fn a_new_job_starts_parallelism_pods_and_a_start_time() {
        let j = job(json!({"completions": 5, "parallelism": 2, "backoffLimit": 6}));
        let plan = decide(&j, &[], at("2026-01-01T00:00:00Z"));
        assert_eq!(plan.create, 2);
        assert_eq!(plan.status["startTime"], json!("2026-01-01T00:00:00Z"));
        assert_eq!(plan.status["ready"], json!(0));
        assert!(plan.status.get("active").is_none());
    }

    #[test]
    fn enough_successes_complete_with_both_conditions_and_completion_time() {
        let mut j = job(json!({"completions": 1, "parallelism": 1, "backoffLimit": 6}));
        j["status"]["startTime"] = json!("2026-01-01T00:00:00Z");
        let p = pod("Succeeded", "2026-01-01T00:00:05Z");
        let plan = decide(&j, &[&p], at("2026-01-01T00:00:06Z"));
        assert_eq!(plan.create, 0);
        let types: Vec<&str> = plan.status["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| meta::str_at(c, "/type"))
            .collect();
        assert_eq!(types, ["SuccessCriteriaMet", "Complete"]);
        assert_eq!(plan.status["completionTime"], json!("2026-01-01T00:00:06Z"));
        assert_eq!(plan.status["succeeded"], json!(1));
    }

    #[test]
    fn failures_back_off_then_exceed_the_limit() {
        let mut j = job(json!({"completions": 1, "parallelism": 1, "backoffLimit": 1}));
        j["status"]["startTime"] = json!("2026-01-01T00:00:00Z");
        let first = pod("Failed", "2026-01-01T00:00:01Z");
        let waiting = decide(&j, &[&first], at("2026-01-01T00:00:05Z"));
        assert_eq!(waiting.create, 0, "within the 10 s back-off");
        let replaced = decide(&j, &[&first], at("2026-01-01T00:00:12Z"));
        assert_eq!(replaced.create, 1);
        let second = pod("Failed", "2026-01-01T00:00:13Z");
        let failed = decide(&j, &[&first, &second], at("2026-01-01T00:00:14Z"));
        assert_eq!(failed.create, 0);
        let c = failed.status["conditions"].as_array().expect("conditions");
        assert_eq!(meta::str_at(&c[1], "/type"), "Failed");
        assert_eq!(meta::str_at(&c[1], "/reason"), "BackoffLimitExceeded");
        assert!(failed.status.get("completionTime").is_none());
    }

    #[test]
    fn the_deadline_deletes_active_pods_before_failing() {
        let mut j = job(json!({"completions": 1, "parallelism": 1, "activeDeadlineSeconds": 5}));
        j["status"]["startTime"] = json!("2026-01-01T00:00:00Z");
        let running = json!({"metadata": {"name": "r"}, "status": {"phase": "Running"}});
        let plan = decide(&j, &[&running], at("2026-01-01T00:00:06Z"));
        assert_eq!(plan.delete, ["r"]);
        let c = plan.status["conditions"].as_array().expect("conditions");
        assert_eq!(c.len(), 1, "FailureTarget only while the pod terminates");
        assert_eq!(meta::str_at(&c[0], "/reason"), "DeadlineExceeded");
    }

    #[test]
    fn suspending_deletes_active_pods_and_stops_the_deadline() {
        let mut j = job(
            json!({"completions": 1, "parallelism": 1, "activeDeadlineSeconds": 5, "suspend": true}),
        );
        j["status"]["startTime"] = json!("2026-01-01T00:00:00Z");
        let running = json!({"metadata": {"name": "r"}, "status": {"phase": "Running"}});
        let plan = decide(&j, &[&running], at("2026-01-01T00:01:00Z"));
        assert_eq!(
            (plan.create, plan.delete.as_slice()),
            (0, ["r".to_string()].as_slice())
        );
        let c = plan.status["conditions"].as_array().expect("conditions");
        assert_eq!(c.len(), 1);
        assert_eq!(meta::str_at(&c[0], "/type"), "Suspended");
        assert_eq!(meta::str_at(&c[0], "/reason"), "JobSuspended");
    }

    #[test]
    fn backoff_doubles_up_to_six_minutes() {
        assert_eq!(backoff_seconds(1), 10);
        assert_eq!(backoff_seconds(3), 40);
        assert_eq!(backoff_seconds(20), 360);
    }
}
