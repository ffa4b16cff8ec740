//! Verbs and subresources beyond the traps: pagination, dry run, deletecollection, orphan
//! propagation, eviction, pod logs, list-map apply on custom resources, namespace deletion.

use crate::support::{eventually, reason, start};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, LogParams, Patch, PatchParams,
    PostParams,
};
use kube::discovery::ApiResource;
use kube::ResourceExt;
use serde_json::json;

#[tokio::test]
async fn list_pagination_dry_run_and_deletecollection() {
    let tc = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "default");
    for i in 0..5 {
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("p{i}"), "labels": {"batch": "yes"}}}),
        )
        .expect("cm");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().labels("batch=yes").limit(2);
    loop {
        let page = cms.list(&lp).await.expect("page");
        assert!(page.items.len() <= 2);
        names.extend(page.items.iter().map(|c| c.name_any()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    let dry: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "dry"}})).expect("cm");
    cms.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &dry,
    )
    .await
    .expect("dry run");
    assert_eq!(
        reason(&cms.get("dry").await.expect_err("not stored")).1,
        404
    );
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("batch=yes"),
    )
    .await
    .expect("deletecollection");
    assert!(cms
        .list(&ListParams::default().labels("batch=yes"))
        .await
        .expect("list")
        .items
        .is_empty());
    tc.stop().await;
}

#[tokio::test]
async fn orphan_propagation_keeps_dependents_and_drops_their_owner_reference() {
    let tc = start().await;
    let rs: Api<ReplicaSet> = Api::namespaced(tc.client.clone(), "default");
    let r: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": "o"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "o"}},
        "template": {"metadata": {"labels": {"app": "o"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).expect("rs");
    rs.create(&PostParams::default(), &r).await.expect("create");
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let pod = eventually(10, || {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default().labels("app=o"))
                .await
                .ok()?
                .items
                .into_iter()
                .next()
        }
    })
    .await
    .expect("pod created by the ReplicaSet");
    rs.delete("o", &DeleteParams::orphan())
        .await
        .expect("orphan delete");
    let gone = eventually(10, || {
        let rs = rs.clone();
        async move { rs.get("o").await.err().map(|_| ()) }
    })
    .await;
    assert!(
        gone.is_some(),
        "the owner goes once its dependents are orphaned"
    );
    let kept = pods.get(&pod.name_any()).await.expect("the pod is kept");
    assert!(kept.owner_references().is_empty(), "and no longer owned");
    tc.stop().await;
}

#[tokio::test]
async fn eviction_and_pod_logs() {
    let tc = start().await;
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {"nodeName": "iad", "containers": [{"name": "c", "image": "i"}]}})).expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    let path = localkube_apiserver::log_path(tc.dir.path(), "default", "l", "c", false);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, "one\ntwo\nthree\n").expect("write log");
    let all = pods.logs("l", &LogParams::default()).await.expect("logs");
    assert_eq!(all, "one\ntwo\nthree\n");
    let tail = pods
        .logs(
            "l",
            &LogParams {
                tail_lines: Some(1),
                ..Default::default()
            },
        )
        .await
        .expect("tail");
    assert_eq!(tail, "three\n");
    let e = pods
        .logs(
            "l",
            &LogParams {
                container: Some("nope".into()),
                ..Default::default()
            },
        )
        .await
        .expect_err("bad container");
    assert_eq!(reason(&e).0, "BadRequest");
    pods.evict("l", &EvictParams::default())
        .await
        .expect("evict");
    assert_eq!(reason(&pods.get("l").await.expect_err("evicted")).1, 404);
    tc.stop().await;
}

#[tokio::test]
async fn custom_resource_apply_merges_map_lists_by_key_and_status_is_separate() {
    let tc = start().await;
    let crds: Api<DynamicObject> = Api::all_with(
        tc.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "fleets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Fleet", "plural": "fleets", "singular": "fleet"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"ships": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}}}},
                    "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}}}]}})).expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("crd");
    let ar = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("example.com", "v1", "Fleet"),
        "fleets",
    );
    let fleets: Api<DynamicObject> = Api::namespaced_with(tc.client.clone(), "default", &ar);
    let a = json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f"}, "spec": {"ships": [{"name": "a", "size": 1}]}});
    fleets
        .patch("f", &PatchParams::apply("alice"), &Patch::Apply(&a))
        .await
        .expect("alice");
    let b = json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f"}, "spec": {"ships": [{"name": "b", "size": 2}]}});
    let got = fleets
        .patch("f", &PatchParams::apply("bob"), &Patch::Apply(&b))
        .await
        .expect("bob");
    let ships = got.data["spec"]["ships"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        ships.len(),
        2,
        "map list items from two managers are merged by key: {ships:?}"
    );
    let st = json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f"}, "status": {"ok": true}, "spec": {"ships": []}});
    let got = fleets
        .patch_status(
            "f",
            &PatchParams::apply("status-writer"),
            &Patch::Apply(&st),
        )
        .await
        .expect("status apply");
    assert_eq!(got.data["status"]["ok"], json!(true));
    assert_eq!(
        got.data["spec"]["ships"].as_array().map(Vec::len),
        Some(2),
        "status writes ignore spec"
    );
    let e = fleets
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {}})),
        )
        .await
        .expect_err("no strategic merge for custom resources");
    assert_eq!(reason(&e).0, "UnsupportedMediaType");
    tc.stop().await;
}

/// A custom resource's `x-kubernetes-list-type: map` list (two keys): an item its applier
/// drops goes whole, as do items of a nested map list; another applier's item stays.
#[tokio::test]
async fn custom_resource_apply_prunes_dropped_map_list_items_whole() {
    let tc = start().await;
    let crds: Api<DynamicObject> = Api::all_with(
        tc.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
    );
    let crew = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["role"],
        "items": {"type": "object", "required": ["role"], "properties": {"role": {"type": "string"}, "n": {"type": "integer"}}}});
    let ships = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "yard"],
        "items": {"type": "object", "required": ["name", "yard"], "properties": {"name": {"type": "string"}, "yard": {"type": "string"},
            "size": {"type": "integer", "default": 1}, "crew": crew}}});
    let crd: DynamicObject = serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "fleets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Fleet", "plural": "fleets", "singular": "fleet"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"ships": ships}}}}}}]}})).expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("crd");
    let ar = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("example.com", "v1", "Fleet"),
        "fleets",
    );
    let fleets: Api<DynamicObject> = Api::namespaced_with(tc.client.clone(), "default", &ar);
    let fleet = |ships: serde_json::Value| json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f"}, "spec": {"ships": ships}});
    let first = fleet(json!([
        {"name": "a", "yard": "n", "crew": [{"role": "cook", "n": 1}, {"role": "pilot", "n": 2}]},
        {"name": "b", "yard": "n", "size": 2},
        {"name": "b", "yard": "s", "size": 3}]));
    fleets
        .patch("f", &PatchParams::apply("alice"), &Patch::Apply(&first))
        .await
        .expect("alice applies");
    fleets
        .patch(
            "f",
            &PatchParams::apply("bob"),
            &Patch::Apply(&fleet(json!([{"name": "c", "yard": "n"}]))),
        )
        .await
        .expect("bob applies");
    let second = fleet(json!([
        {"name": "a", "yard": "n", "crew": [{"role": "pilot", "n": 2}]},
        {"name": "b", "yard": "s", "size": 3}]));
    let got = fleets
        .patch("f", &PatchParams::apply("alice"), &Patch::Apply(&second))
        .await
        .expect("alice applies less");
    assert_eq!(
        got.data["spec"]["ships"],
        json!([
            {"name": "a", "yard": "n", "size": 1, "crew": [{"role": "pilot", "n": 2}]},
            {"name": "b", "yard": "s", "size": 3},
            {"name": "c", "yard": "n", "size": 1}]),
        "ship b@n and a's cook go whole, bob's c stays"
    );
    tc.stop().await;
}

#[tokio::test]
async fn namespace_deletion_removes_its_contents_then_itself() {
    let tc = start().await;
    let nss: Api<Namespace> = Api::all(tc.client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "gone"}})).expect("ns"),
    )
    .await
    .expect("ns");
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), "gone");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "c", "finalizers": ["example.com/x"]}}),
        )
        .expect("cm"),
    )
    .await
    .expect("cm");
    nss.delete("gone", &DeleteParams::default())
        .await
        .expect("delete ns");
    let terminating = nss.get("gone").await.expect("still there");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let e = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "new"}})).expect("cm"),
        )
        .await
        .expect_err("terminating");
    assert_eq!(reason(&e).0, "Forbidden");
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release finalizer");
    let gone = eventually(10, || {
        let nss = nss.clone();
        async move { nss.get("gone").await.err().map(|_| ()) }
    })
    .await;
    assert!(gone.is_some(), "the namespace is removed once empty");
    tc.stop().await;
}

#[tokio::test]
async fn kube_runtime_event_recorder_creates_and_updates_events() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let tc = start().await;
    let recorder = Recorder::new(
        tc.client.clone(),
        Reporter {
            controller: "bloodraven".into(),
            instance: Some("test".into()),
        },
    );
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: Some("kubernetes".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    let ev = Event {
        type_: EventType::Normal,
        reason: "Promoted".into(),
        note: Some("site iad is primary".into()),
        action: "Promote".into(),
        secondary: None,
    };
    recorder
        .publish(&ev, &reference)
        .await
        .expect("first publish creates");
    recorder
        .publish(&ev, &reference)
        .await
        .expect("second publish patches the series");
    let events: Api<DynamicObject> = Api::namespaced_with(
        tc.client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("events.k8s.io", "v1", "Event"),
            "events",
        ),
    );
    let list = events.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    let e = &list.items[0];
    assert_eq!(e.data["series"]["count"], json!(2));
    let t = e.data["eventTime"].as_str().expect("eventTime");
    assert_eq!(
        t.split('.').nth(1).map(|f| f.len()),
        Some(7),
        "MicroTime: 6 digits and Z: {t}"
    );
    tc.stop().await;
}

#[tokio::test]
async fn custom_resources_are_pruned_defaulted_and_validated() {
    let tc = start().await;
    let crds: Api<DynamicObject> = Api::all_with(
        tc.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "dials.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Dial", "plural": "dials", "singular": "dial"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "required": ["level"], "properties": {
                    "level": {"type": "integer", "minimum": 0, "maximum": 10}, "mode": {"type": "string", "enum": ["auto", "manual"], "default": "auto"}}}}}}}]}}))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("crd");
    let dials: Api<DynamicObject> = Api::namespaced_with(
        tc.client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("example.com", "v1", "Dial"),
            "dials",
        ),
    );
    let ok: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Dial", "metadata": {"name": "d"}, "spec": {"level": 3, "extra": true}})).expect("cr");
    let got = dials
        .create(&PostParams::default(), &ok)
        .await
        .expect("valid");
    assert_eq!(got.data["spec"]["mode"], json!("auto"), "defaulted");
    assert!(
        got.data["spec"].get("extra").is_none(),
        "unknown fields are pruned"
    );
    for (bad, field) in [
        (json!({"level": "high"}), "spec.level"),
        (json!({"level": 11}), "spec.level"),
        (json!({"level": 1, "mode": "turbo"}), "spec.mode"),
        (json!({}), "spec.level"),
    ] {
        let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Dial", "metadata": {"name": "bad"}, "spec": bad})).expect("cr");
        let e = dials
            .create(&PostParams::default(), &obj)
            .await
            .expect_err("invalid");
        assert_eq!(reason(&e), ("Invalid".to_string(), 422));
        if let kube::Error::Api(s) = &e {
            assert!(s.message.contains(field), "{}", s.message);
        }
    }
    let e = dials
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"level": -1}})),
        )
        .await
        .expect_err("invalid update");
    assert_eq!(reason(&e).0, "Invalid");
    tc.stop().await;
}

#[tokio::test]
async fn legacy_token_secrets_are_filled_and_authenticate_and_node_ports_are_allocated() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
    let tc = start().await;
    let sas: Api<ServiceAccount> = Api::namespaced(tc.client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "legacy"}})).expect("sa"),
    )
    .await
    .expect("sa");
    let secrets: Api<Secret> = Api::namespaced(tc.client.clone(), "default");
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "legacy-token", "annotations": {"kubernetes.io/service-account.name": "legacy"}},
        "type": "kubernetes.io/service-account-token"})).expect("secret");
    secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("secret");
    let token = eventually(10, || {
        let secrets = secrets.clone();
        async move {
            secrets
                .get("legacy-token")
                .await
                .ok()?
                .data?
                .get("token")
                .map(|t| String::from_utf8_lossy(&t.0).into_owned())
        }
    })
    .await
    .expect("the token controller filled the secret");
    let reviews: Api<TokenReview> = Api::all(tc.client.clone());
    let r = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.clone()),
            audiences: None,
        },
        ..Default::default()
    };
    let st = reviews
        .create(&PostParams::default(), &r)
        .await
        .expect("review")
        .status
        .expect("status");
    assert_eq!(st.authenticated, Some(true));
    assert_eq!(
        st.user.and_then(|u| u.username).as_deref(),
        Some("system:serviceaccount:default:legacy")
    );
    secrets
        .delete("legacy-token", &DeleteParams::default())
        .await
        .expect("delete");
    let st = reviews
        .create(&PostParams::default(), &r)
        .await
        .expect("review")
        .status
        .expect("status");
    assert_eq!(
        st.authenticated,
        Some(false),
        "deleting the secret invalidates its token"
    );

    let svcs: Api<Service> = Api::namespaced(tc.client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "np"}, "spec": {"type": "NodePort", "selector": {"a": "b"}, "ports": [{"port": 80}, {"port": 81, "name": "b"}]}})).expect("svc");
    let svc = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("svc");
    let ports: Vec<i32> = svc
        .spec
        .and_then(|s| s.ports)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.node_port)
        .collect();
    assert_eq!(ports.len(), 2);
    assert!(
        ports.iter().all(|p| (30000..=32767).contains(p)) && ports[0] != ports[1],
        "{ports:?}"
    );
    tc.stop().await;
}

#[tokio::test]
async fn pod_specs_are_immutable_but_for_images_and_added_tolerations() {
    let tc = start().await;
    let pods: Api<Pod> = Api::namespaced(tc.client.clone(), "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "im"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}})).expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    pods.patch(
        "im",
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "image": "i:2"}]}})),
    )
    .await
    .expect("image change allowed");
    pods.patch(
        "im",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .expect("metadata change allowed");
    let e = pods
        .patch(
            "im",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"restartPolicy": "Never"}})),
        )
        .await
        .expect_err("spec change");
    assert_eq!(reason(&e), ("Invalid".to_string(), 422));
    // A replace with the client's own (undefaulted) copy of the spec is not a change.
    let mut fresh = p.clone();
    let current = pods.get("im").await.expect("get");
    fresh.metadata = current.metadata.clone();
    if let Some(spec) = fresh.spec.as_mut() {
        spec.containers[0].image = Some("i:2".into());
    }
    pods.replace("im", &PostParams::default(), &fresh)
        .await
        .expect("replace with an undefaulted copy");
    tc.stop().await;
}
