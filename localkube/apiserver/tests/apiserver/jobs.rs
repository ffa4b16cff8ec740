//! docs/design/history.md#issue-14-item-6: `batch/v1` Jobs through kube-rs and kubectl (no node
//! agent: the tests finish the Job's pods by writing their status, as a kubelet would).

use crate::support::{eventually, reason, start};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

fn job(name: &str, restart_policy: &str, extra: serde_json::Value) -> Job {
    let mut spec = json!({"template": {"spec": {"restartPolicy": restart_policy,
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "exit 0"]}]}}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("job")
}

async fn namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns"),
    )
    .await
    .expect("create namespace");
}

async fn job_pods(client: &Client, ns: &str, job: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .expect("list pods")
        .items
}

/// Finishes a pod as the kubelet would: phase and a terminated container.
async fn finish(client: &Client, ns: &str, pod: &str, phase: &str, exit_code: i32) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = localkube_apiserver::meta::now();
    let status = json!({"status": {"phase": phase, "containerStatuses": [{"name": "main", "image": "busybox:1.36", "imageID": "",
        "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": exit_code, "startedAt": now, "finishedAt": now}}}]}});
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch pod status");
}

fn condition(job: &Job, ty: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// Item 6: Jobs are served (create, list across namespaces, get, status) and the Job
/// controller runs their pods to completion: before, `/apis/batch/v1` was a 404.
#[tokio::test]
async fn jobs_are_served_and_run_to_completion() {
    let tc = start().await;
    let c = tc.client.clone();
    namespace(&c, "batch-a").await;
    let a: Api<Job> = Api::namespaced(c.clone(), "batch-a");
    let d: Api<Job> = Api::namespaced(c.clone(), "default");
    let created = a
        .create(
            &PostParams::default(),
            &job("pi", "Never", json!({"completions": 2})),
        )
        .await
        .expect("create job");
    let uid = created.uid().expect("uid");
    let spec = created.spec.clone().expect("spec");
    assert_eq!(spec.parallelism, Some(1));
    assert_eq!(spec.backoff_limit, Some(6));
    assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
    let selector = spec
        .selector
        .expect("generated selector")
        .match_labels
        .expect("matchLabels");
    assert_eq!(
        selector.get("batch.kubernetes.io/controller-uid"),
        Some(&uid)
    );
    assert_eq!(
        created.labels().get("job-name").map(String::as_str),
        Some("pi")
    );
    assert_eq!(created.metadata.generation, Some(1));
    d.create(
        &PostParams::default(),
        &job("other", "OnFailure", json!({})),
    )
    .await
    .expect("create second job");

    // A cross-namespace list (the failing request of the issue).
    let all: Api<Job> = Api::all(c.clone());
    let names: Vec<String> = all
        .list(&ListParams::default())
        .await
        .expect("list jobs in all namespaces")
        .items
        .iter()
        .map(|j| format!("{}/{}", j.namespace().unwrap_or_default(), j.name_any()))
        .collect();
    assert!(
        names.contains(&"batch-a/pi".to_string()) && names.contains(&"default/other".to_string()),
        "{names:?}"
    );

    // The controller: one pod at a time (parallelism 1), owned and labelled as the real one.
    let pods = eventually(10, || async {
        Some(job_pods(&c, "batch-a", "pi").await).filter(|p| p.len() == 1)
    })
    .await
    .expect("one pod for parallelism 1");
    let pod = &pods[0];
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Job", uid.as_str(), Some(true))
    );
    assert_eq!(pod.labels().get("controller-uid"), Some(&uid));
    assert_eq!(
        pod.labels().get("batch.kubernetes.io/controller-uid"),
        Some(&uid)
    );
    assert_eq!(pod.labels().get("job-name").map(String::as_str), Some("pi"));
    let running = eventually(10, || async {
        a.get_status("pi")
            .await
            .ok()
            .filter(|j| j.status.as_ref().and_then(|s| s.active) == Some(1))
    })
    .await
    .expect("status.active 1");
    assert!(
        running
            .status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .is_some(),
        "startTime"
    );

    // Two successes complete the Job: SuccessCriteriaMet, Complete, completionTime.
    finish(&c, "batch-a", &pod.name_any(), "Succeeded", 0).await;
    let second = eventually(10, || async {
        let p = job_pods(&c, "batch-a", "pi").await;
        p.into_iter().find(|p| p.name_any() != pods[0].name_any())
    })
    .await
    .expect("a second pod after the first succeeded");
    finish(&c, "batch-a", &second.name_any(), "Succeeded", 0).await;
    let done = eventually(10, || async {
        a.get("pi")
            .await
            .ok()
            .filter(|j| condition(j, "Complete").is_some())
    })
    .await
    .expect("Complete condition");
    let status = done.status.clone().expect("status");
    assert_eq!(status.succeeded, Some(2));
    assert_eq!(status.active, None);
    assert!(status.completion_time.is_some());
    assert_eq!(
        condition(&done, "SuccessCriteriaMet"),
        Some(("True".into(), "CompletionsReached".into()))
    );
    assert_eq!(
        condition(&done, "Complete"),
        Some(("True".into(), "CompletionsReached".into()))
    );

    // The status subresource: a write there changes status, a write of the main resource
    // keeps it.
    a.patch_status(
        "pi",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"failed": 3}})),
    )
    .await
    .expect("patch status");
    a.patch(
        "pi",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {"x": "y"}}, "status": {"failed": 9}})),
    )
    .await
    .expect("patch main resource");
    let after = a.get("pi").await.expect("get");
    assert_eq!(after.status.and_then(|s| s.failed), Some(3));

    // Background deletion removes the Job's pods through the garbage collector.
    a.delete("pi", &DeleteParams::background())
        .await
        .expect("delete job");
    let gone = eventually(10, || async {
        job_pods(&c, "batch-a", "pi").await.is_empty().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "pods of a Background-deleted Job are collected"
    );
    tc.stop().await;
}

/// Item 6: without a propagationPolicy a `batch/v1` Job orphans its pods (the real
/// strategy's default); Foreground deletes them before the Job.
#[tokio::test]
async fn job_deletion_orphans_by_default_and_foreground_waits_for_pods() {
    let tc = start().await;
    let c = tc.client.clone();
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    for name in ["orphaning", "foreground"] {
        jobs.create(&PostParams::default(), &job(name, "Never", json!({})))
            .await
            .expect("create job");
    }
    for name in ["orphaning", "foreground"] {
        eventually(10, || async {
            (job_pods(&c, "default", name).await.len() == 1).then_some(())
        })
        .await
        .expect("a pod");
    }
    jobs.delete("orphaning", &DeleteParams::default())
        .await
        .expect("delete");
    let orphan = eventually(10, || async {
        let pods = job_pods(&c, "default", "orphaning").await;
        let job_gone = jobs.get_opt("orphaning").await.ok().flatten().is_none();
        pods.into_iter()
            .find(|p| job_gone && p.owner_references().is_empty())
    })
    .await;
    assert!(
        orphan.is_some(),
        "the pod stays, without its ownerReference"
    );
    jobs.delete("foreground", &DeleteParams::foreground())
        .await
        .expect("delete");
    let gone = eventually(10, || async {
        let job_gone = jobs.get_opt("foreground").await.ok().flatten().is_none();
        let pods_gone = job_pods(&c, "default", "foreground").await.is_empty();
        (job_gone && pods_gone).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "Foreground deletion removes the pods, then the Job"
    );
    tc.stop().await;
}

/// Item 6: validation as kube-apiserver's (422 Invalid, the real messages).
#[tokio::test]
async fn job_validation_errors_are_the_real_ones() {
    let tc = start().await;
    let jobs: Api<Job> = Api::namespaced(tc.client.clone(), "default");
    let err = jobs
        .create(&PostParams::default(), &job("always", "Always", json!({})))
        .await
        .expect_err("restartPolicy Always is invalid");
    assert_eq!(reason(&err), ("Invalid".to_string(), 422));
    let kube::Error::Api(status) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        status.message,
        "Job.batch \"always\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
    );
    let err = jobs
        .create(
            &PostParams::default(),
            &job(
                "negative",
                "Never",
                json!({"backoffLimit": -1, "parallelism": -2}),
            ),
        )
        .await
        .expect_err("negative counts are invalid");
    let kube::Error::Api(status) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        status.message,
        "Job.batch \"negative\" is invalid: [spec.parallelism: Invalid value: -2: must be greater than or equal to 0, spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0]"
    );
    // The pod template of a Job is immutable.
    jobs.create(&PostParams::default(), &job("fixed", "Never", json!({})))
        .await
        .expect("create");
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}}});
    let err = jobs
        .patch("fixed", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect_err("template is immutable");
    assert_eq!(reason(&err).1, 422);
    assert!(format!("{err}").contains("field is immutable"), "{err}");
    tc.stop().await;
}

/// Item 6: `kubectl get jobs -A` prints the real columns (NAME, STATUS, COMPLETIONS,
/// DURATION, AGE) from the server's Table.
#[tokio::test]
async fn kubectl_get_jobs_prints_the_real_columns() {
    let tc = start().await;
    let jobs: Api<Job> = Api::namespaced(tc.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("table", "Never", json!({"completions": 3})),
    )
    .await
    .expect("create");
    let cache = tc.dir.path().join("kubectl-cache");
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(tc.lk.kubeconfig_path())
        .arg("--cache-dir")
        .arg(&cache)
        .args(["get", "jobs", "-A"])
        .output()
        .await
        .expect("kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "NAME",
            "STATUS",
            "COMPLETIONS",
            "DURATION",
            "AGE"
        ]
    );
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        &row[..4],
        ["default", "table", "Running", "0/3"],
        "{stdout}"
    );
    // kubectl's typed `create job` (a protobuf body).
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(tc.lk.kubeconfig_path())
        .arg("--cache-dir")
        .arg(&cache)
        .args([
            "create",
            "job",
            "made",
            "--image=busybox:1.36",
            "--",
            "/bin/sh",
            "-c",
            "exit 0",
        ])
        .output()
        .await
        .expect("kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made = jobs.get("made").await.expect("created by kubectl");
    let spec = made.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    let command: Vec<String> = spec.containers[0].command.clone().unwrap_or_default();
    assert_eq!(command, ["/bin/sh", "-c", "exit 0"]);
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(tc.lk.kubeconfig_path())
        .arg("--cache-dir")
        .arg(&cache)
        .args(["describe", "job", "made"])
        .output()
        .await
        .expect("kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Pods Statuses:    1 Active (0 Ready) / 0 Succeeded / 0 Failed"),
        "{stdout}"
    );
    tc.stop().await;
}
