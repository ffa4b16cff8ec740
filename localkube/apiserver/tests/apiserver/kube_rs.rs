//! kube-rs against localkube: every trap of docs/design/localkube.md#traps-clients-rely-on
//! that kube-rs relies on.

use crate::support::{eventually, reason, start, start_with, token_client};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{
    TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::runtime::watcher;
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .expect("configmap")
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

#[tokio::test]
async fn trap1_and_trap2_expired_watch_is_an_error_event_and_watcher_relists() {
    let tc = start_with(|c| {
        c.history_window = 5;
        c.bookmark_interval = Duration::from_secs(3600);
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("first", json!({})))
        .await
        .expect("create");
    let list = cms.list(&ListParams::default()).await.expect("list");
    let old_rv = list
        .metadata
        .resource_version
        .clone()
        .expect("trap 1: lists carry a resourceVersion");
    assert!(!old_rv.is_empty());
    let secrets: Api<Secret> = Api::namespaced(tc.client.clone(), "default");
    for i in 0..10 {
        let s: Secret =
            serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}})).expect("secret");
        secrets
            .create(&PostParams::default(), &s)
            .await
            .expect("create secret");
    }
    // trap 2: HTTP 200 and an ERROR event with 410 Expired.
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), &old_rv)
        .await
        .expect("watch is accepted")
        .boxed();
    match stream.try_next().await.expect("an event") {
        Some(WatchEvent::Error(s)) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("expected an ERROR 410 event, got {other:?}"),
    }
    // kube-runtime's watcher re-lists after the expiry and sees objects created meanwhile.
    let cfg = watcher::Config::default().timeout(1);
    let mut w = watcher(cms.clone(), cfg).boxed();
    let mut inits = 0;
    let mut seen_late = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline && !(inits >= 2 && seen_late) {
        let ev = tokio::time::timeout(Duration::from_secs(5), w.try_next()).await;
        match ev {
            Ok(Ok(Some(watcher::Event::InitDone))) => {
                inits += 1;
                if inits == 1 {
                    // Push the watch window past the watcher's resourceVersion.
                    for i in 10..20 {
                        let s: Secret =
                            serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}}))
                                .expect("secret");
                        secrets
                            .create(&PostParams::default(), &s)
                            .await
                            .expect("create secret");
                    }
                    cms.create(&PostParams::default(), &cm("late", json!({})))
                        .await
                        .expect("create");
                    for i in 20..30 {
                        let s: Secret =
                            serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}}))
                                .expect("secret");
                        secrets
                            .create(&PostParams::default(), &s)
                            .await
                            .expect("create secret");
                    }
                }
            }
            Ok(Ok(Some(watcher::Event::InitApply(o)))) | Ok(Ok(Some(watcher::Event::Apply(o))))
                if o.name_any() == "late" =>
            {
                seen_late = true
            }
            _ => {}
        }
    }
    assert!(
        inits >= 2,
        "the watcher re-listed after the 410 (InitDone {inits} times)"
    );
    assert!(
        seen_late,
        "the watcher saw the object created while its watch expired"
    );
    tc.stop().await;
}

#[tokio::test]
async fn trap3_bookmarks_and_streaming_list_end_marker() {
    let tc = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .expect("create");
    let rv = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut stream = cms
        .watch(&WatchParams::default().timeout(4), &rv)
        .await
        .expect("watch")
        .boxed();
    let other: Api<Secret> = Api::namespaced(tc.client.clone(), "default");
    other
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("secret"),
        )
        .await
        .expect("create");
    let mut bookmark = None;
    while let Ok(Some(ev)) = stream.try_next().await {
        if let WatchEvent::Bookmark(b) = ev {
            bookmark = Some(b);
            break;
        }
    }
    let b = bookmark.expect("a BOOKMARK within the timeout");
    assert_eq!(b.types.kind, "ConfigMap");
    assert_eq!(b.types.api_version, "v1");
    assert!(
        b.metadata
            .resource_version
            .parse::<u64>()
            .expect("numeric rv")
            > rv.parse::<u64>().expect("rv")
    );

    // sendInitialEvents=true: ADDED for every object, then the initial-events-end BOOKMARK.
    let mut stream = cms
        .watch(&WatchParams::default().timeout(3).initial_events(), "")
        .await
        .expect("streaming list")
        .boxed();
    let mut added = 0;
    let mut end = false;
    while let Ok(Some(ev)) = stream.try_next().await {
        match ev {
            WatchEvent::Added(_) => added += 1,
            WatchEvent::Bookmark(b) => {
                end = b
                    .metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str)
                    == Some("true");
                break;
            }
            _ => {}
        }
    }
    assert!(end && added >= 2, "added {added}, end marker {end}");
    // kube-runtime's streaming-list watcher reaches InitDone.
    let mut w = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let done = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(ev)) = w.try_next().await {
            if matches!(ev, watcher::Event::InitDone) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(done);
    tc.stop().await;
}

#[tokio::test]
async fn trap4_status_reasons_are_exact() {
    let tc = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    let e = cms.get("missing").await.expect_err("missing");
    assert_eq!(reason(&e), ("NotFound".into(), 404));
    let created = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .expect("create");
    let e = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .expect_err("twice");
    assert_eq!(reason(&e), ("AlreadyExists".into(), 409));
    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.data = Some([("k".to_string(), "fresh".to_string())].into());
    cms.replace("a", &PostParams::default(), &fresh)
        .await
        .expect("first replace");
    stale.data = Some([("k".to_string(), "w".to_string())].into());
    let e = cms
        .replace("a", &PostParams::default(), &stale)
        .await
        .expect_err("stale rv");
    assert_eq!(reason(&e), ("Conflict".into(), 409));
    let e = cms
        .create(&PostParams::default(), &cm("Bad_Name", json!({})))
        .await
        .expect_err("invalid name");
    assert_eq!(reason(&e), ("Invalid".into(), 422));
    let e = cms
        .list(&ListParams::default().labels("a in b"))
        .await
        .expect_err("bad selector");
    assert_eq!(reason(&e), ("BadRequest".into(), 400));
    let other_ns: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "nope");
    let e = other_ns
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .expect_err("namespace must exist");
    assert_eq!(reason(&e), ("NotFound".into(), 404));
    tc.stop().await;
}

#[tokio::test]
async fn trap5_finalizer_helper_adds_and_removes_its_finalizer() {
    use kube::runtime::controller::Action;
    use kube::runtime::finalizer::{finalizer, Event};
    let tc = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("f", json!({})))
        .await
        .expect("create");
    let run = |obj: ConfigMap| {
        let cms = cms.clone();
        async move {
            finalizer(
                &cms,
                "example.com/cleanup",
                std::sync::Arc::new(obj),
                |ev| async move {
                    match ev {
                        Event::Apply(_) | Event::Cleanup(_) => {
                            Ok::<_, std::io::Error>(Action::await_change())
                        }
                    }
                },
            )
            .await
            .map_err(|e| e.to_string())
        }
    };
    run(cms.get("f").await.expect("get"))
        .await
        .expect("finalizer added (JSON patch test of a missing path against null)");
    let got = cms.get("f").await.expect("get");
    assert_eq!(got.finalizers(), &["example.com/cleanup".to_string()]);
    run(got).await.expect("apply");
    cms.delete("f", &DeleteParams::default())
        .await
        .expect("delete");
    let held = cms.get("f").await.expect("held by the finalizer");
    assert!(held.metadata.deletion_timestamp.is_some());
    run(held).await.expect("cleanup removes the finalizer");
    let e = cms.get("f").await.expect_err("gone");
    assert_eq!(reason(&e).1, 404);
    tc.stop().await;
}

#[tokio::test]
async fn trap6_generation_moves_on_spec_changes_and_scale_only() {
    let tc = start().await;
    let deps: Api<Deployment> = Api::namespaced(tc.client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).expect("deployment");
    let d = deps
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    assert_eq!(d.metadata.generation, Some(1));
    let d = deps
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("label");
    assert_eq!(
        d.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    let d = deps
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 7}})),
        )
        .await
        .expect("status");
    assert_eq!(
        d.metadata.generation,
        Some(1),
        "status changes keep the generation"
    );
    assert_eq!(
        d.spec.as_ref().and_then(|s| s.replicas),
        Some(1),
        "status subresource ignores spec"
    );
    let s = deps
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale");
    assert_eq!(s.spec.and_then(|s| s.replicas), Some(3));
    let d = deps.get("d").await.expect("get");
    assert_eq!(d.metadata.generation, Some(2), "scaling changes the spec");
    let d = deps
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 99}})),
        )
        .await
        .expect("main ignores status");
    assert_ne!(d.status.and_then(|s| s.replicas), Some(99));
    tc.stop().await;
}

#[tokio::test]
async fn trap7_and_trap8_field_and_label_selectors() {
    let tc = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({"tier": "web"})))
        .await
        .expect("a");
    cms.create(&PostParams::default(), &cm("b", json!({"tier": "db"})))
        .await
        .expect("b");
    cms.create(&PostParams::default(), &cm("c", json!({})))
        .await
        .expect("c");
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        let mut v: Vec<String> = l
            .items
            .iter()
            .map(|o| o.name_any())
            .filter(|n| n.len() == 1)
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("tier!=web"))
                .await
                .expect("!=")
        ),
        ["b", "c"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("tier notin (db)"))
                .await
                .expect("notin")
        ),
        ["a", "c"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("tier in (db,web)"))
                .await
                .expect("in")
        ),
        ["a", "b"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("!tier"))
                .await
                .expect("!k")
        ),
        ["c"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().labels("tier,tier==web"))
                .await
                .expect("k,==")
        ),
        ["a"]
    );
    assert_eq!(
        names(
            cms.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .expect("name")
        ),
        ["b"]
    );
    assert_eq!(
        names(
            cms.list(
                &ListParams::default()
                    .fields("metadata.namespace=default,metadata.name!=b")
                    .labels("tier")
            )
            .await
            .expect("ns")
        ),
        ["a"]
    );
    let e = cms
        .list(&ListParams::default().fields("data.k=v"))
        .await
        .expect_err("unsupported field");
    assert_eq!(reason(&e), ("BadRequest".into(), 400));
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    for (name, node) in [("p1", "iad"), ("p2", "pdx")] {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})).expect("pod");
        pods.create(&PostParams::default(), &p).await.expect("pod");
    }
    let on_iad = pods
        .list(&ListParams::default().fields("spec.nodeName=iad,status.phase=Pending"))
        .await
        .expect("pod fields");
    assert_eq!(
        on_iad
            .items
            .iter()
            .map(|p| p.name_any())
            .collect::<Vec<_>>(),
        ["p1"]
    );
    tc.stop().await;
}

/// docs/design/history.md#issue-14-item-2: the field labels of the real conversion functions,
/// absent booleans selected as `false`, and the real server's two refusal messages.
#[tokio::test]
async fn issue14_node_and_pod_field_selectors_match_the_real_server() {
    let tc = start().await;
    let nodes: Api<Node> = Api::all(tc.client.clone());
    for (name, spec) in [
        ("open", json!({})),
        ("cordoned", json!({"unschedulable": true})),
    ] {
        let n: Node = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))
            .expect("node");
        nodes
            .create(&PostParams::default(), &n)
            .await
            .expect("node");
    }
    // The test cluster's own nodes (iad, pdx, reader) are schedulable too; look at ours.
    let names = |l: kube::core::ObjectList<Node>| {
        let mut v: Vec<String> = l
            .items
            .iter()
            .map(|o| o.name_any())
            .filter(|n| n == "open" || n == "cordoned")
            .collect();
        v.sort();
        v
    };
    for (sel, want) in [
        ("spec.unschedulable==false", vec!["open"]),
        ("spec.unschedulable=false", vec!["open"]),
        ("spec.unschedulable!=true", vec!["open"]),
        ("spec.unschedulable=true", vec!["cordoned"]),
        ("metadata.name=open", vec!["open"]),
    ] {
        let got = nodes
            .list(&ListParams::default().fields(sel))
            .await
            .expect(sel);
        assert_eq!(names(got), want, "{sel}");
    }
    let e = nodes
        .list(&ListParams::default().fields("metadata.namespace=default"))
        .await
        .expect_err("nodes have no metadata.namespace label");
    assert_eq!(reason(&e), ("BadRequest".into(), 400));
    assert!(
        format!("{e}").contains("field label not supported: metadata.namespace"),
        "{e}"
    );
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "open", "containers": [{"name": "c", "image": "i"}]}})).expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    for sel in [
        "spec.hostNetwork=false",
        "spec.host=open",
        "spec.restartPolicy=Always",
        "status.podIP=",
    ] {
        let got = pods
            .list(&ListParams::default().fields(sel))
            .await
            .expect(sel);
        assert_eq!(got.items.len(), 1, "{sel}");
    }
    let e = pods
        .list(&ListParams::default().fields("spec.priority=0"))
        .await
        .expect_err("not a pod field label");
    assert!(
        format!("{e}").contains("field label not supported: spec.priority"),
        "{e}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    let e = cms
        .list(&ListParams::default().fields("data.k=v"))
        .await
        .expect_err("default conversion");
    assert!(
        format!("{e}").contains(
            r#""data.k" is not a known field selector: only "metadata.name", "metadata.namespace""#
        ),
        "{e}"
    );
    let svcs: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(tc.client.clone(), "default");
    svcs.list(&ListParams::default().fields("spec.type=ClusterIP,spec.clusterIP!=None"))
        .await
        .expect("service field labels");
    tc.stop().await;
}

#[tokio::test]
async fn trap9_server_side_apply_conflicts_force_prune_and_shared_ownership() {
    let tc = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"x": "1", "y": "2"}});
    cms.patch("s", &PatchParams::apply("alice"), &Patch::Apply(&a))
        .await
        .expect("apply-create");
    let shared = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"x": "1"}});
    let got = cms
        .patch("s", &PatchParams::apply("bob"), &Patch::Apply(&shared))
        .await
        .expect("equal value: no conflict");
    let owners: Vec<String> = got
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(owners.contains(&"alice".into()) && owners.contains(&"bob".into()));
    let change = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"x": "1", "y": "3"}});
    let e = cms
        .patch("s", &PatchParams::apply("bob"), &Patch::Apply(&change))
        .await
        .expect_err("conflict");
    assert_eq!(reason(&e), ("Conflict".into(), 409));
    if let kube::Error::Api(s) = &e {
        let causes = s
            .details
            .as_ref()
            .map(|d| d.causes.clone())
            .unwrap_or_default();
        assert!(
            causes
                .iter()
                .any(|c| c.reason == "FieldManagerConflict" && c.field == ".data.y"),
            "{causes:?}"
        );
    }
    let got = cms
        .patch(
            "s",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&change),
        )
        .await
        .expect("force");
    assert_eq!(
        got.data
            .as_ref()
            .and_then(|d| d.get("y"))
            .map(String::as_str),
        Some("3")
    );
    // alice stops applying y (now bob's) and x (shared): x stays (bob owns it), nothing else pruned
    let alice2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"z": "9"}});
    let got = cms
        .patch("s", &PatchParams::apply("alice"), &Patch::Apply(&alice2))
        .await
        .expect("alice again");
    let data = got.data.clone().unwrap_or_default();
    assert_eq!(
        data.get("x").map(String::as_str),
        Some("1"),
        "shared field survives"
    );
    // bob stops applying x: nobody owns it any more, so it is pruned.
    let bob2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": {"y": "3"}});
    let got = cms
        .patch("s", &PatchParams::apply("bob"), &Patch::Apply(&bob2))
        .await
        .expect("bob again");
    let data = got.data.unwrap_or_default();
    assert!(!data.contains_key("x"), "pruned: {data:?}");
    assert_eq!(data.get("z").map(String::as_str), Some("9"));
    tc.stop().await;
}

/// Server-side apply prunes what its manager stopped applying item by item, as
/// structured-merge-diff does: a dropped list item nobody else applies goes whole (keys,
/// fields, defaults), one another applier owns fields in keeps exactly what that applier
/// owns (and what nobody owns), and goes once that applier stops applying it too.
#[tokio::test]
async fn server_side_apply_prunes_dropped_list_items_keeping_other_appliers_fields() {
    let tc = start().await;
    let deploys: Api<Deployment> = Api::namespaced(tc.client.clone(), "default");
    let pod_spec = |spec: serde_json::Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}}, "spec": spec}}})
    };
    let first = pod_spec(
        json!({"containers": [{"name": "c", "image": "i:1", "args": ["--a", "--b"],
        "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "f"}],
        "ports": [{"containerPort": 8443, "name": "deploy"}, {"containerPort": 8082, "name": "metrics"}],
        "volumeMounts": [{"name": "tls", "mountPath": "/tls"}]}],
        "volumes": [{"name": "tls", "secret": {"secretName": "x"}}]}),
    );
    deploys
        .patch("d", &PatchParams::apply("a"), &Patch::Apply(&first))
        .await
        .expect("a applies");
    // b owns env E's value (its own, forced) and, sharing it, the metrics port.
    let b = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "E", "value": "2"}],
            "ports": [{"containerPort": 8082, "name": "metrics"}]}]}}}});
    deploys
        .patch("d", &PatchParams::apply("b").force(), &Patch::Apply(&b))
        .await
        .expect("b applies");
    let second = pod_spec(json!({"containers": [{"name": "c", "image": "i:1", "args": ["--a"]}]}));
    let got = deploys
        .patch("d", &PatchParams::apply("a"), &Patch::Apply(&second))
        .await
        .expect("a applies less");
    let spec = serde_json::to_value(got.spec.expect("spec").template.spec.expect("pod spec"))
        .expect("json");
    let c = &spec["containers"][0];
    assert_eq!(c["args"], json!(["--a"]), "atomic list replaced: {spec}");
    assert_eq!(
        c["env"],
        json!([{"name": "E", "value": "2"}]),
        "F gone, b's E kept: {spec}"
    );
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 8082, "name": "metrics", "protocol": "TCP"}]),
        "{spec}"
    );
    assert_eq!(c.get("volumeMounts"), None, "{spec}");
    assert_eq!(spec.get("volumes"), None, "{spec}");
    // b stops applying the container: E and the metrics port go, a's container stays.
    let b2 = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 0}});
    let got = deploys
        .patch("d", &PatchParams::apply("b"), &Patch::Apply(&b2))
        .await
        .expect("b applies less");
    let spec = serde_json::to_value(got.spec.expect("spec").template.spec.expect("pod spec"))
        .expect("json");
    let c = &spec["containers"][0];
    assert_eq!((c.get("env"), c.get("ports")), (None, None), "{spec}");
    assert_eq!(
        (&c["name"], &c["image"]),
        (&json!("c"), &json!("i:1")),
        "{spec}"
    );
    tc.stop().await;
}

/// docs/design/history.md#issue-14-item-1: an apply body without `metadata.name` is applied
/// onto the live object (its name is the URL's); only a different name or namespace is a 400.
/// Creating through apply still needs the name, as the real server applies onto an empty object
/// then.
#[tokio::test]
async fn issue14_apply_without_metadata_name_uses_the_live_object() {
    let tc = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("nameless", json!({})))
        .await
        .expect("create");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"applied": "yes"}});
    let got = cms
        .patch("nameless", &PatchParams::apply("mgr"), &Patch::Apply(&body))
        .await
        .expect("apply without metadata.name");
    assert_eq!(got.name_any(), "nameless");
    assert_eq!(
        got.data
            .as_ref()
            .and_then(|d| d.get("applied"))
            .map(String::as_str),
        Some("yes")
    );
    let no_meta_ns =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"l": "v"}}});
    let got = cms
        .patch(
            "nameless",
            &PatchParams::apply("mgr2"),
            &Patch::Apply(&no_meta_ns),
        )
        .await
        .expect("apply with metadata but no name or namespace");
    assert_eq!(got.labels().get("l").map(String::as_str), Some("v"));
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}});
    let e = cms
        .patch(
            "nameless",
            &PatchParams::apply("mgr"),
            &Patch::Apply(&other),
        )
        .await
        .expect_err("a different name");
    assert_eq!(reason(&e), ("BadRequest".into(), 400));
    assert!(
        format!("{e}").contains(
            "the name of the object (other) does not match the name on the URL (nameless)"
        ),
        "{e}"
    );
    let other_ns = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nameless", "namespace": "kube-system"}});
    let e = cms
        .patch(
            "nameless",
            &PatchParams::apply("mgr"),
            &Patch::Apply(&other_ns),
        )
        .await
        .expect_err("a different namespace");
    assert_eq!(reason(&e), ("BadRequest".into(), 400));
    let e = cms
        .patch("absent", &PatchParams::apply("mgr"), &Patch::Apply(&body))
        .await
        .expect_err("apply-create needs the name");
    assert!(
        format!("{e}")
            .contains("the name of the object () does not match the name on the URL (absent)"),
        "{e}"
    );
    // kube-rs's usual status apply carries no metadata at all.
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(tc.client.clone());
    crds.create(&PostParams::default(), &Gadget::crd())
        .await
        .expect("crd");
    let gadgets: Api<Gadget> = Api::namespaced(tc.client.clone(), "default");
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("g", GadgetSpec { size: 2 }),
        )
        .await
        .expect("cr");
    let status =
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "status": {"doubled": 4}});
    let got = gadgets
        .patch_status("g", &PatchParams::apply("ctl"), &Patch::Apply(&status))
        .await
        .expect("status apply without metadata");
    assert_eq!(got.status.map(|s| s.doubled), Some(4));
    tc.stop().await;
}

/// GET `path` through kube-rs and return the raw body the server wrote.
async fn raw_get(client: &Client, path: &str, accept: &str) -> String {
    let req = http::Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())
        .expect("request");
    client.request_text(req).await.expect(path)
}

/// docs/design/history.md#issue-14-item-3: built-in objects, lists, Status errors and watch
/// events are written in the real server's field order; custom resources keep the sorted order
/// of unstructured maps, as a real server writes them.
#[tokio::test]
async fn issue14_responses_are_written_in_the_real_field_order() {
    let tc = start().await;
    let c = &tc.client;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "ordered", "labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    let one = raw_get(
        c,
        "/api/v1/namespaces/default/pods/ordered",
        "application/json",
    )
    .await;
    assert!(one.starts_with(r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"ordered","namespace":"default","uid":"#), "{one}");
    let (spec, status) = (one.find(r#","spec":"#), one.find(r#","status":"#));
    assert!(spec.is_some() && status.is_some() && spec < status, "{one}");
    let list = raw_get(c, "/api/v1/namespaces/default/pods", "application/json").await;
    assert!(
        list.starts_with(r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"#),
        "{list}"
    );
    assert!(
        list.contains(r#""items":[{"kind":"Pod","apiVersion":"v1","metadata":"#),
        "{list}"
    );
    let req = http::Request::get("/api/v1/namespaces/default/pods/absent")
        .body(Vec::new())
        .expect("request");
    let missing = c.request_text(req).await.expect_err("404");
    assert_eq!(reason(&missing), ("NotFound".into(), 404));
    let req = http::Request::get("/api/v1/namespaces/default/configmaps?fieldSelector=x%3Dy")
        .body(Vec::new())
        .expect("request");
    let resp = c
        .send(req.map(kube::client::Body::from))
        .await
        .expect("send");
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    let status = String::from_utf8_lossy(&bytes).into_owned();
    assert!(
        status.starts_with(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"#
        ),
        "{status}"
    );
    let watch = raw_get(
        c,
        "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
        "application/json",
    )
    .await;
    assert!(
        watch
            .starts_with(r#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":"#),
        "{watch}"
    );
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(&PostParams::default(), &Gadget::crd())
        .await
        .expect("crd");
    let gadgets: Api<Gadget> = Api::namespaced(c.clone(), "default");
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("g", GadgetSpec { size: 1 }),
        )
        .await
        .expect("cr");
    let cr = raw_get(
        c,
        "/apis/example.com/v1/namespaces/default/gadgets/g",
        "application/json",
    )
    .await;
    assert!(
        cr.starts_with(r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":"#),
        "{cr}"
    );
    let watch = raw_get(
        c,
        "/apis/example.com/v1/namespaces/default/gadgets?watch=true&timeoutSeconds=1",
        "application/json",
    )
    .await;
    assert!(
        watch.starts_with(
            r#"{"type":"ADDED","object":{"apiVersion":"example.com/v1","kind":"Gadget""#
        ),
        "{watch}"
    );
    tc.stop().await;
}

/// docs/design/history.md#issue-14-item-4: metadata-only requests
/// (`as=PartialObjectMetadata[List]`) get `meta.k8s.io/v1` metadata objects, on get, list,
/// patch and watch; an `Accept` with no supported clause is 406.
#[tokio::test]
async fn issue14_metadata_only_requests_get_partial_object_metadata() {
    use kube::core::PartialObjectMeta;
    use kube::runtime::WatchStreamExt;
    let tc = start().await;
    let c = &tc.client;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    cms.create(&PostParams::default(), &cm("meta", json!({"tier": "web"})))
        .await
        .expect("create");
    let one = cms.get_metadata("meta").await.expect("get_metadata");
    assert_eq!(
        one.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(
        one.types.as_ref().map(|t| t.api_version.as_str()),
        Some("meta.k8s.io/v1")
    );
    assert_eq!(one.labels().get("tier").map(String::as_str), Some("web"));
    let raw = raw_get(
        c,
        "/api/v1/namespaces/default/configmaps/meta",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    assert!(!raw.contains(r#""data""#), "only metadata: {raw}");
    let list = cms
        .list_metadata(&ListParams::default().labels("tier=web"))
        .await
        .expect("list_metadata");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert!(list.metadata.resource_version.is_some());
    let patched = cms
        .patch_metadata(
            "meta",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "1"}}})),
        )
        .await
        .expect("patch_metadata");
    assert_eq!(
        patched.annotations().get("a").map(String::as_str),
        Some("1")
    );
    // kube-runtime's metadata watcher (kube 5: a watcher over `PartialObjectMeta<K>`) lists
    // and watches metadata only.
    let metas: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(c.clone(), "default");
    let mut w = watcher(metas, watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut next_named = async |name: &str| loop {
        let o = tokio::time::timeout(Duration::from_secs(10), w.try_next())
            .await
            .expect("in time")
            .expect("no error")
            .expect("an object");
        if o.name_any() == name {
            return o;
        }
    };
    let first = next_named("meta").await;
    assert_eq!(first.labels().get("tier").map(String::as_str), Some("web"));
    cms.create(&PostParams::default(), &cm("later", json!({})))
        .await
        .expect("create");
    next_named("later").await;
    let watch = raw_get(
        c,
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    assert!(watch.starts_with(r#"{"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#), "{watch}");
    // Fallback to plain JSON, and 406 when nothing offered is produced.
    let fallback = raw_get(
        c,
        "/api/v1/namespaces/default/configmaps/meta",
        "application/json;as=Nothing;g=meta.k8s.io;v=v1, application/json",
    )
    .await;
    assert!(fallback.starts_with(r#"{"kind":"ConfigMap""#), "{fallback}");
    let req = http::Request::get("/api/v1/namespaces/default/configmaps/meta")
        .header("Accept", "application/json;as=Nothing;g=meta.k8s.io;v=v1")
        .body(Vec::new())
        .expect("request");
    let e = c.request_text(req).await.expect_err("406");
    assert_eq!(reason(&e), ("NotAcceptable".into(), 406));
    tc.stop().await;
}

/// docs/design/history.md#issue-14-item-5: aggregated discovery (`apidiscovery.k8s.io` v2 and
/// v2beta1) on `/api` and `/apis`, with the media type in `Content-Type`;
/// `apiregistration.k8s.io` serves an APIService per served group version, custom resource
/// groups included.
#[tokio::test]
async fn issue14_aggregated_discovery_and_api_services() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    use kube::core::GroupVersionKind;
    use kube::discovery::{Discovery, Scope};
    let tc = start().await;
    let c = &tc.client;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(&PostParams::default(), &Gadget::crd())
        .await
        .expect("crd");
    let discovery = Discovery::new(c.clone())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    for (group, version, kind, scope) in [
        ("", "v1", "Pod", Scope::Namespaced),
        ("", "v1", "Node", Scope::Cluster),
        ("apps", "v1", "Deployment", Scope::Namespaced),
        ("example.com", "v1", "Gadget", Scope::Namespaced),
        ("apiregistration.k8s.io", "v1", "APIService", Scope::Cluster),
    ] {
        let (ar, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(group, version, kind))
            .unwrap_or_else(|| panic!("{group}/{version} {kind} is discovered"));
        assert_eq!(caps.scope, scope, "{kind}");
        assert!(caps.supports_operation("watch"), "{kind}");
        if kind == "Pod" {
            let subs: Vec<&str> = caps
                .subresources
                .iter()
                .map(|(s, _)| s.plural.as_str())
                .collect();
            assert!(
                subs.contains(&"status") && subs.contains(&"log"),
                "{subs:?}"
            );
        }
        assert!(!ar.plural.is_empty());
    }
    for v in ["v2", "v2beta1"] {
        let accept = format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList,application/json");
        let req = http::Request::get("/apis")
            .header("Accept", accept)
            .body(Vec::new())
            .expect("request");
        let resp = c
            .send(req.map(kube::client::Body::from))
            .await
            .expect("send");
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            ct,
            format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList")
        );
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .expect("body")
            .to_bytes();
        let doc: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(doc["apiVersion"], json!(format!("apidiscovery.k8s.io/{v}")));
        assert_eq!(
            doc["items"][0]["versions"][0]["freshness"],
            json!("Current")
        );
    }
    let legacy = raw_get(c, "/apis", "application/json").await;
    assert!(
        legacy.contains(r#""name":"apiregistration.k8s.io""#),
        "{legacy}"
    );
    let services: Api<APIService> = Api::all(c.clone());
    let found = eventually(10, || {
        let services = services.clone();
        async move {
            let names: Vec<String> = services
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .map(|a| a.name_any())
                .collect();
            (names.iter().any(|n| n == "v1.")
                && names.iter().any(|n| n == "v1.apps")
                && names.iter().any(|n| n == "v1.example.com"))
            .then_some(names)
        }
    })
    .await;
    assert!(
        found.is_some(),
        "APIServices of core, apps and the CRD group"
    );
    let core = services.get("v1.").await.expect("v1.");
    let available = core.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(available
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "True"));
    tc.stop().await;
}

#[tokio::test]
async fn trap10_lease_micro_time_has_six_fractional_digits() {
    let tc = start().await;
    let leases: Api<DynamicObject> = Api::namespaced_with(
        tc.client.clone(),
        "default",
        &kube::discovery::ApiResource::erase::<Lease>(&()),
    );
    let l: DynamicObject = serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
        "spec": {"holderIdentity": "me", "renewTime": "2026-01-02T03:04:05.1Z", "acquireTime": "2026-01-02T03:04:05Z", "leaseDurationSeconds": 10}})).expect("lease");
    let got = leases
        .create(&PostParams::default(), &l)
        .await
        .expect("create");
    assert_eq!(
        got.data["spec"]["renewTime"],
        json!("2026-01-02T03:04:05.100000Z")
    );
    assert_eq!(
        got.data["spec"]["acquireTime"],
        json!("2026-01-02T03:04:05.000000Z")
    );
    let typed: Api<Lease> = Api::namespaced(tc.client.clone(), "default");
    typed.get("l").await.expect("k8s-openapi parses MicroTime");
    tc.stop().await;
}

#[tokio::test]
async fn trap11_rbac_denies_and_a_cluster_role_change_applies_on_the_next_request() {
    let tc = start().await;
    namespace(&tc.client, "team").await;
    let sas: Api<ServiceAccount> = Api::namespaced(tc.client.clone(), "team");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "bot"}})).expect("sa"),
    )
    .await
    .expect("sa");
    let tr = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let token = sas
        .create_token_request("bot", &PostParams::default(), &tr)
        .await
        .expect("token")
        .status
        .expect("status")
        .token;
    let bot = token_client(&tc.lk, &token).await;
    let pods: Api<Pod> = Api::namespaced(bot.clone(), "team");
    let e = pods.list(&ListParams::default()).await.expect_err("denied");
    assert_eq!(reason(&e), ("Forbidden".into(), 403));
    let roles: Api<ClusterRole> = Api::all(tc.client.clone());
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})).expect("role");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let bindings: Api<ClusterRoleBinding> = Api::all(tc.client.clone());
    let b: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "bot-reads"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}]})).expect("binding");
    bindings
        .create(&PostParams::default(), &b)
        .await
        .expect("binding");
    let e = pods
        .list(&ListParams::default())
        .await
        .expect_err("get does not allow list");
    assert_eq!(reason(&e).0, "Forbidden");
    let e = pods.get("x").await.expect_err("allowed, but missing");
    assert_eq!(reason(&e).0, "NotFound");
    roles.patch("pod-reader", &PatchParams::default(), &Patch::Merge(json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}))).await.expect("edit role");
    pods.list(&ListParams::default())
        .await
        .expect("list allowed right after the change");
    // fieldSelector metadata.name sets the name for resourceNames rules.
    roles.patch("pod-reader", &PatchParams::default(), &Patch::Merge(json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"], "resourceNames": ["only"]}]}))).await.expect("edit role");
    pods.list(&ListParams::default().fields("metadata.name=only"))
        .await
        .expect("named list allowed");
    let e = pods
        .list(&ListParams::default())
        .await
        .expect_err("unnamed list denied");
    assert_eq!(reason(&e).0, "Forbidden");
    // Server-side apply that creates needs the create verb as well as patch.
    let rule = |verbs: serde_json::Value| json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]});
    roles
        .patch(
            "pod-reader",
            &PatchParams::default(),
            &Patch::Merge(rule(json!(["patch"]))),
        )
        .await
        .expect("edit role");
    let bot_cms: Api<ConfigMap> = Api::namespaced(bot.clone(), "team");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}});
    let e = bot_cms
        .patch("applied", &PatchParams::apply("bot"), &Patch::Apply(&body))
        .await
        .expect_err("apply-create without create");
    assert_eq!(reason(&e).0, "Forbidden");
    roles
        .patch(
            "pod-reader",
            &PatchParams::default(),
            &Patch::Merge(rule(json!(["patch", "create"]))),
        )
        .await
        .expect("edit role");
    bot_cms
        .patch("applied", &PatchParams::apply("bot"), &Patch::Apply(&body))
        .await
        .expect("apply-create with create");
    tc.stop().await;
}

#[tokio::test]
async fn trap12_token_review_audiences_and_pod_bound_tokens() {
    let tc = start().await;
    let sas: Api<ServiceAccount> = Api::namespaced(tc.client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "app"}})).expect("sa"),
    )
    .await
    .expect("sa");
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .expect("pod");
    let pod = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let bound = k8s_openapi::api::authentication::v1::BoundObjectReference {
        kind: Some("Pod".into()),
        api_version: Some("v1".into()),
        name: Some("p".into()),
        uid: pod.metadata.uid.clone(),
    };
    let tr = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec!["vault".into()],
            expiration_seconds: Some(3600),
            bound_object_ref: Some(bound),
        },
        ..Default::default()
    };
    let token = sas
        .create_token_request("app", &PostParams::default(), &tr)
        .await
        .expect("token")
        .status
        .expect("status")
        .token;
    let reviews: Api<TokenReview> = Api::all(tc.client.clone());
    let review = |aud: Vec<String>| TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.clone()),
            audiences: Some(aud),
        },
        ..Default::default()
    };
    let ok = reviews
        .create(
            &PostParams::default(),
            &review(vec!["vault".into(), "other".into()]),
        )
        .await
        .expect("review")
        .status
        .expect("status");
    assert_eq!(ok.authenticated, Some(true));
    assert_eq!(ok.audiences, Some(vec!["vault".to_string()]));
    let user = ok.user.expect("user");
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:app")
    );
    assert!(user
        .groups
        .unwrap_or_default()
        .contains(&"system:serviceaccounts:default".to_string()));
    let wrong = reviews
        .create(&PostParams::default(), &review(vec!["api".into()]))
        .await
        .expect("review")
        .status
        .expect("status");
    assert_eq!(wrong.authenticated, Some(false), "audiences must intersect");
    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete pod");
    let dead = reviews
        .create(&PostParams::default(), &review(vec!["vault".into()]))
        .await
        .expect("review")
        .status
        .expect("status");
    assert_eq!(
        dead.authenticated,
        Some(false),
        "a pod-bound token dies with its pod"
    );
    tc.stop().await;
}

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
struct GadgetSpec {
    size: i64,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, Default)]
struct GadgetStatus {
    doubled: i64,
}

#[tokio::test]
async fn kube_runtime_controller_reconciles_a_custom_resource() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::controller::{Action, Controller};
    let tc = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(tc.client.clone());
    crds.create(&PostParams::default(), &Gadget::crd())
        .await
        .expect("crd");
    let gadgets: Api<Gadget> = Api::namespaced(tc.client.clone(), "default");
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("g", GadgetSpec { size: 21 }),
        )
        .await
        .expect("cr");
    let ctx = std::sync::Arc::new(gadgets.clone());
    let controller = Controller::new(gadgets.clone(), watcher::Config::default())
        .run(
            |g: std::sync::Arc<Gadget>, api: std::sync::Arc<Api<Gadget>>| async move {
                let status = json!({"status": {"doubled": g.spec.size * 2}});
                api.patch_status(
                    &g.name_any(),
                    &PatchParams::apply("gadget-controller"),
                    &Patch::Merge(&status),
                )
                .await?;
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            ctx,
        )
        .for_each(|_| async {});
    let handle = tokio::spawn(controller);
    let done = eventually(15, || {
        let gadgets = gadgets.clone();
        async move {
            gadgets
                .get("g")
                .await
                .ok()
                .and_then(|g| g.status)
                .filter(|s| s.doubled == 42)
        }
    })
    .await;
    handle.abort();
    assert!(
        done.is_some(),
        "the controller wrote the status subresource"
    );
    tc.stop().await;
}

#[tokio::test]
async fn deployment_rolls_out_replicasets_and_pods_and_scales_to_zero_and_cascades() {
    let tc = start().await;
    let deps: Api<Deployment> = Api::namespaced(tc.client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).expect("deployment");
    deps.create(&PostParams::default(), &d)
        .await
        .expect("create");
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let three = eventually(10, || {
        let pods = pods.clone();
        async move {
            let l = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?;
            (l.items.len() == 3
                && l.items
                    .iter()
                    .all(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()).is_some()))
            .then_some(())
        }
    })
    .await;
    assert!(three.is_some(), "three scheduled pods");
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(tc.client.clone(), "default");
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for r in ["ScalingReplicaSet", "SuccessfulCreate", "Scheduled"] {
        assert!(
            reasons.iter().any(|x| x == r),
            "event {r} recorded: {reasons:?}"
        );
    }
    deps.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .expect("scale to zero");
    let zero = eventually(10, || {
        let (pods, deps) = (pods.clone(), deps.clone());
        async move {
            let l = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?;
            let d = deps.get("web").await.ok()?;
            let st = d.status?;
            (l.items.is_empty()
                && st.observed_generation == d.metadata.generation
                && st.replicas.unwrap_or(0) == 0)
                .then_some(())
        }
    })
    .await;
    assert!(
        zero.is_some(),
        "scaled to zero with observedGeneration current"
    );
    deps.delete("web", &DeleteParams::background())
        .await
        .expect("delete");
    let rs: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(tc.client.clone(), "default");
    let gone = eventually(10, || {
        let rs = rs.clone();
        async move {
            rs.list(&ListParams::default())
                .await
                .ok()
                .filter(|l| l.items.is_empty())
                .map(|_| ())
        }
    })
    .await;
    assert!(gone.is_some(), "garbage collection removed the ReplicaSet");
    tc.stop().await;
}

/// The raw `status` of an apps/v1 object (typed clients cannot tell 0 from absent).
async fn raw_status<K>(client: &Client, name: &str) -> Option<serde_json::Value>
where
    K: kube::Resource<DynamicType = ()>,
{
    let ar = kube::api::ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let o = api.get(name).await.ok()?;
    o.data.get("status").cloned()
}

/// Controllers "status is right": the counts of DeploymentStatus are `omitempty` int32s in
/// k8s.io/api (ReplicaSetStatus: all but `replicas`), so the real controllers never write a
/// zero count; `availableReplicas: 0` is absent, not 0.
#[tokio::test]
async fn deployment_and_replicaset_status_omit_zero_counts() {
    let tc = start().await;
    let deps: Api<Deployment> = Api::namespaced(tc.client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "pending"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "pending"}},
        "template": {"metadata": {"labels": {"app": "pending"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).expect("deployment");
    deps.create(&PostParams::default(), &d)
        .await
        .expect("create");
    let counts = [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
    ];
    // No node agent: the two pods are bound but never ready.
    let client = tc.client.clone();
    let st = eventually(10, || {
        let client = client.clone();
        async move {
            let st = raw_status::<Deployment>(&client, "pending").await?;
            (st["replicas"] == 2 && st["updatedReplicas"] == 2 && st["unavailableReplicas"] == 2)
                .then_some(st)
        }
    })
    .await
    .expect("deployment status with two unavailable replicas");
    for absent in ["readyReplicas", "availableReplicas"] {
        assert!(st.get(absent).is_none(), "{absent} is omitted at 0: {st}");
    }
    let rs: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(tc.client.clone(), "default");
    let rs_name = rs
        .list(&ListParams::default().labels("app=pending"))
        .await
        .expect("replicasets")
        .items[0]
        .name_any();
    let rs_st = raw_status::<k8s_openapi::api::apps::v1::ReplicaSet>(&tc.client, &rs_name)
        .await
        .expect("replicaset status");
    assert_eq!(rs_st["replicas"], 2, "{rs_st}");
    assert_eq!(rs_st["fullyLabeledReplicas"], 2, "{rs_st}");
    for absent in ["readyReplicas", "availableReplicas"] {
        assert!(
            rs_st.get(absent).is_none(),
            "replicaset {absent} is omitted at 0: {rs_st}"
        );
    }

    deps.patch_scale(
        "pending",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .expect("scale to zero");
    let (client, deps2) = (tc.client.clone(), deps.clone());
    let st = eventually(10, || {
        let (client, deps) = (client.clone(), deps2.clone());
        async move {
            let generation = deps.get("pending").await.ok()?.metadata.generation?;
            let st = raw_status::<Deployment>(&client, "pending").await?;
            (st["observedGeneration"] == generation && st.get("replicas").is_none()).then_some(st)
        }
    })
    .await
    .expect("scaled to zero");
    for absent in counts {
        assert!(st.get(absent).is_none(), "{absent} is omitted at 0: {st}");
    }
    let rs_st = eventually(10, || {
        let client = client.clone();
        let rs_name = rs_name.clone();
        async move {
            let st =
                raw_status::<k8s_openapi::api::apps::v1::ReplicaSet>(&client, &rs_name).await?;
            (st["replicas"] == 0).then_some(st)
        }
    })
    .await
    .expect("replicaset scaled to zero keeps replicas: 0");
    for absent in ["fullyLabeledReplicas", "readyReplicas", "availableReplicas"] {
        assert!(
            rs_st.get(absent).is_none(),
            "replicaset {absent} is omitted at 0: {rs_st}"
        );
    }
    tc.stop().await;
}

#[tokio::test]
async fn noexecute_taint_evicts_untolerating_pods_now_and_tolerating_pods_after_their_seconds() {
    let tc = start().await;
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let mk = |name: &str, tol: serde_json::Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeName": "iad", "tolerations": tol, "containers": [{"name": "c", "image": "i"}]}})).expect("pod")
    };
    let key = "bloodraven.shipstream.io/demoted";
    pods.create(&PostParams::default(), &mk("none", json!([])))
        .await
        .expect("pod");
    pods.create(&PostParams::default(), &mk("two", json!([{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]))).await.expect("pod");
    pods.create(
        &PostParams::default(),
        &mk(
            "forever",
            json!([{"key": key, "operator": "Exists", "effect": "NoExecute"}]),
        ),
    )
    .await
    .expect("pod");
    let nodes: Api<Node> = Api::all(tc.client.clone());
    nodes
        .patch(
            "iad",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"taints": [{"key": key, "value": "g", "effect": "NoExecute"}]}}),
            ),
        )
        .await
        .expect("taint");
    let started = std::time::Instant::now();
    let first = eventually(5, || {
        let pods = pods.clone();
        async move { pods.get("none").await.err().map(|_| ()) }
    })
    .await;
    assert!(first.is_some(), "no matching toleration: deleted at once");
    assert!(
        pods.get("two").await.is_ok(),
        "still within tolerationSeconds"
    );
    let second = eventually(6, || {
        let pods = pods.clone();
        async move { pods.get("two").await.err().map(|_| ()) }
    })
    .await;
    assert!(
        second.is_some() && started.elapsed() >= Duration::from_millis(1500),
        "evicted after its tolerationSeconds"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        pods.get("forever").await.is_ok(),
        "nil tolerationSeconds tolerates forever"
    );
    tc.stop().await;
}

#[tokio::test]
async fn objects_survive_a_restart_of_the_same_state_dir() {
    crate::support::crypto();
    let dir = tempfile::tempdir().expect("tempdir");
    let lk = localkube_apiserver::LocalKube::start(localkube_apiserver::Config::new(dir.path()))
        .await
        .expect("start");
    let client = crate::support::admin_client(&lk).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let before = cms
        .create(&PostParams::default(), &cm("keep", json!({})))
        .await
        .expect("create");
    lk.shutdown().await.expect("stop");
    let lk = localkube_apiserver::LocalKube::start(localkube_apiserver::Config::new(dir.path()))
        .await
        .expect("restart");
    let client = crate::support::admin_client(&lk).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let after = cms.get("keep").await.expect("kept");
    assert_eq!(after.metadata.uid, before.metadata.uid);
    let next = cms
        .create(&PostParams::default(), &cm("next", json!({})))
        .await
        .expect("create");
    let rv = |o: &ConfigMap| {
        o.metadata
            .resource_version
            .clone()
            .unwrap_or_default()
            .parse::<u64>()
            .unwrap_or(0)
    };
    assert!(
        rv(&next) > rv(&before),
        "resourceVersions keep increasing across restarts"
    );
    lk.shutdown().await.expect("stop");
}

#[tokio::test]
async fn statefulset_creates_ordered_pods_with_stable_names_and_claims() {
    let tc = start().await;
    let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(tc.client.clone(), "default");
    let s = serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {"replicas": 2, "serviceName": "db-hl", "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app": "db"}}, "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}})).expect("sts");
    sts.create(&PostParams::default(), &s)
        .await
        .expect("create");
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let both = eventually(10, || {
        let pods = pods.clone();
        async move {
            let a = pods.get("db-0").await.ok()?;
            pods.get("db-1").await.ok()?;
            Some(a)
        }
    })
    .await
    .expect("db-0 and db-1");
    let spec = both.spec.expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("db-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("db-hl"));
    let claim = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "data")
        .and_then(|v| v.persistent_volume_claim)
        .map(|c| c.claim_name);
    assert_eq!(claim.as_deref(), Some("data-db-0"));
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(tc.client.clone(), "default");
    assert!(pvcs.get("data-db-1").await.is_ok());
    pods.delete("db-0", &DeleteParams::default())
        .await
        .expect("delete pod");
    let back = eventually(10, || {
        let pods = pods.clone();
        async move { pods.get("db-0").await.ok() }
    })
    .await;
    assert!(back.is_some(), "the pod comes back under the same name");
    assert!(
        pvcs.get("data-db-0").await.is_ok(),
        "the claim survives pod deletion"
    );
    // StatefulSetStatus: replicas and availableReplicas always; readyReplicas (0 here: no
    // node agent) is omitempty.
    let client = tc.client.clone();
    let st = eventually(10, || {
        let client = client.clone();
        async move {
            let st = raw_status::<k8s_openapi::api::apps::v1::StatefulSet>(&client, "db").await?;
            (st["replicas"] == 2 && st["updatedReplicas"] == 2).then_some(st)
        }
    })
    .await
    .expect("statefulset status");
    assert_eq!(st["availableReplicas"], 0, "{st}");
    assert!(st.get("readyReplicas").is_none(), "{st}");
    tc.stop().await;
}

#[tokio::test]
async fn endpoints_and_slices_follow_service_selectors_and_readiness() {
    let tc = start().await;
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "e", "labels": {"app": "e"}}, "spec": {"nodeName": "iad", "containers": [{"name": "c", "image": "i", "ports": [{"name": "http", "containerPort": 8080}]}]}})).expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    pods.patch_status(
        "e",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "10.244.1.5",
        "conditions": [{"type": "Ready", "status": "False"}]}})),
    )
    .await
    .expect("status");
    let svcs: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(tc.client.clone(), "default");
    let svc = serde_json::from_value(json!({"metadata": {"name": "e"}, "spec": {"selector": {"app": "e"}, "ports": [{"port": 80, "targetPort": "http"}]}})).expect("svc");
    let svc = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("svc");
    let ip = svc.spec.and_then(|s| s.cluster_ip).expect("cluster ip");
    assert!(ip.starts_with("10.96."), "{ip}");
    let eps: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(tc.client.clone(), "default");
    let not_ready = eventually(10, || {
        let eps = eps.clone();
        async move {
            eps.get("e")
                .await
                .ok()
                .and_then(|e| e.subsets)
                .and_then(|s| s.into_iter().next())
                .filter(|s| s.not_ready_addresses.is_some())
        }
    })
    .await
    .expect("not ready address");
    assert_eq!(
        not_ready.ports.unwrap_or_default()[0].port,
        8080,
        "named targetPort resolved"
    );
    pods.patch_status(
        "e",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .expect("ready");
    let ready = eventually(10, || {
        let eps = eps.clone();
        async move {
            eps.get("e")
                .await
                .ok()
                .and_then(|e| e.subsets)
                .and_then(|s| s.into_iter().next())
                .and_then(|s| s.addresses)
        }
    })
    .await
    .expect("ready address");
    assert_eq!(ready[0].ip, "10.244.1.5");
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(tc.client.clone(), "default");
    let slice = slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=e"))
        .await
        .expect("slices");
    let ep = &slice.items[0].endpoints[0];
    assert_eq!(ep.conditions.as_ref().and_then(|c| c.ready), Some(true));
    assert_eq!(ep.zone.as_deref(), Some("iad"));
    tc.stop().await;
}

/// A stand-in node agent: marks new pods Running with an IP and finishes graceful deletions.
struct FakeAgent;

impl localkube_apiserver::Plugin for FakeAgent {
    fn name(&self) -> &str {
        "fake-agent"
    }
    fn runs_pods(&self) -> bool {
        true
    }
    fn run(
        &self,
        ctx: localkube_apiserver::PluginContext,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut rx = ctx.cluster.store.subscribe();
            let mut shutdown = ctx.shutdown.clone();
            loop {
                let ev = tokio::select! {
                    ev = rx.recv() => match ev { Ok(ev) => ev, Err(_) => return },
                    _ = shutdown.changed() => return,
                };
                if !ctx
                    .nodes
                    .iter()
                    .any(|n| localkube_apiserver::node_pods::is_pod_event_for_node(&ev, n))
                {
                    continue;
                }
                let (ns, name) = (ev.namespace.clone(), ev.name.clone());
                let uid = ev.object["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if ev.object.pointer("/metadata/deletionTimestamp").is_some() {
                    ctx.cluster
                        .finish_pod_deletion(&ns, &name, &uid)
                        .expect("finish deletion");
                } else if ev.object.pointer("/status/podIP").is_none()
                    && ev.event_type != localkube_apiserver::store::EventType::Deleted
                {
                    ctx.cluster
                        .update_pod_status(&ns, &name, |p| {
                            p["status"]["phase"] = json!("Running");
                            p["status"]["podIP"] = json!("10.244.1.9");
                            true
                        })
                        .expect("status");
                }
            }
        })
    }
}

#[tokio::test]
async fn node_agent_plugin_runs_pods_and_finishes_graceful_deletion() {
    let tc = start_with(|c| c.plugins = vec![std::sync::Arc::new(FakeAgent)]).await;
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let p: Pod = serde_json::from_value(
        json!({"metadata": {"name": "g"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    let running = eventually(10, || {
        let pods = pods.clone();
        async move {
            pods.get("g")
                .await
                .ok()
                .and_then(|p| p.status)
                .filter(|s| s.phase.as_deref() == Some("Running"))
        }
    })
    .await;
    assert!(running.is_some(), "scheduled, then run by the agent");
    let deleted = pods
        .delete("g", &DeleteParams::default())
        .await
        .expect("delete");
    let pending = deleted.left().expect("graceful deletion returns the pod");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let gone = eventually(10, || {
        let pods = pods.clone();
        async move { pods.get("g").await.err().map(|_| ()) }
    })
    .await;
    assert!(gone.is_some(), "the agent finished the deletion");
    tc.stop().await;
}

// kube-rs's Recorder publishes `events.k8s.io/v1` Events; a real API server lists them as
// `core/v1` Events too (one storage), which is where `kubectl get events`, `kubectl describe`
// and the harness look. The operator's events were invisible on localkube (s023, s024).
#[tokio::test]
async fn events_published_as_events_k8s_io_are_listed_as_core_events() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    use kube::Resource as _;
    let tc = start().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    let object = configmaps
        .create(&PostParams::default(), &cm("regarded", json!({})))
        .await
        .expect("create");
    let recorder = Recorder::new(tc.client.clone(), Reporter::from("bloodraven"));
    let event = Event {
        type_: EventType::Normal,
        reason: "PrimaryReasserted".into(),
        note: Some("iad reasserted".into()),
        action: "Reassert".into(),
        secondary: None,
    };
    let reference = object.object_ref(&());
    recorder.publish(&event, &reference).await.expect("publish");
    recorder
        .publish(&event, &reference)
        .await
        .expect("publish again");
    let core: Api<CoreEvent> = Api::namespaced(tc.client.clone(), "default");
    let found = eventually(5, || {
        let core = core.clone();
        async move {
            core.list(&ListParams::default())
                .await
                .ok()?
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("PrimaryReasserted") && e.count == Some(2))
        }
    })
    .await
    .expect("the recorder's event listed as a core/v1 Event, its series counted");
    assert_eq!(found.message.as_deref(), Some("iad reasserted"));
    assert_eq!(found.involved_object.name.as_deref(), Some("regarded"));
    assert_eq!(found.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(found.reporting_component.as_deref(), Some("bloodraven"));
    assert!(found.last_timestamp.is_some() || found.event_time.is_some());
    tc.stop().await;
}

/// Bloodraven's install carries a NetworkPolicy (docs/design/history.md#issue-10-case-8):
/// localkube serves the kind (discovery, server-side apply, get) so the install applies, and
/// enforces nothing.
#[tokio::test]
async fn network_policies_are_served_for_server_side_apply_and_not_enforced() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let tc = start().await;
    namespace(&tc.client, "apps").await;
    let discovery = kube::discovery::Discovery::new(tc.client.clone())
        .run()
        .await
        .expect("discovery");
    assert!(
        discovery
            .groups()
            .any(|group| group.name() == "networking.k8s.io"),
        "networking.k8s.io is discovered"
    );
    let policies: Api<NetworkPolicy> = Api::namespaced(tc.client.clone(), "apps");
    let policy = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "mysql", "namespace": "apps"},
        "spec": {
            "podSelector": {"matchExpressions": [{"key": "shipstream.io/site", "operator": "Exists"}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"protocol": "TCP", "port": 8086}]}],
        }
    });
    policies
        .patch(
            "mysql",
            &PatchParams::apply("install").force(),
            &Patch::Apply(&policy),
        )
        .await
        .expect("server-side apply");
    let stored = policies.get("mysql").await.expect("get");
    assert_eq!(stored.metadata.generation, Some(1));
    let ports = stored
        .spec
        .and_then(|spec| spec.ingress)
        .and_then(|rules| rules[0].ports.clone())
        .and_then(|ports| ports[0].port.clone());
    assert_eq!(
        ports,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8086))
    );
}
