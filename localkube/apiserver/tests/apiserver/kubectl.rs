//! Real `kubectl` 1.32 against localkube: the commands an operator on call and the harness
//! use, each with an isolated `--cache-dir`.

use crate::support::{start, start_with};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Real `kubectl` with the test cluster's kubeconfig and its own cache dir.
pub(crate) struct Kubectl {
    pub(crate) kubeconfig: PathBuf,
    pub(crate) cache: PathBuf,
}

impl Kubectl {
    /// Runs kubectl: (succeeded, stdout, stderr).
    pub(crate) async fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let (code, out, err) = self.run_code(args, stdin).await;
        (code == Some(0), out, err)
    }
    /// Runs kubectl: (exit code, stdout, stderr).
    pub(crate) async fn run_code(
        &self,
        args: &[&str],
        stdin: Option<&str>,
    ) -> (Option<i32>, String, String) {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .expect("kubectl 1.32 must be installed at /usr/bin/kubectl");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).await.expect("write stdin");
        }
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finished")
            .expect("kubectl output");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
    /// Runs kubectl, which must succeed: its stdout.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args, None).await;
        assert!(ok, "kubectl {args:?} failed: {err}{out}");
        out
    }
    /// `kubectl apply -f -` of `manifest`, with `args`.
    pub(crate) async fn apply(&self, args: &[&str], manifest: &str) -> (bool, String, String) {
        let mut all = vec!["apply", "-f", "-"];
        all.extend_from_slice(args);
        self.run(&all, Some(manifest)).await
    }
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports: [{containerPort: 80}]
";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: integer, default: 3}
          status:
            type: object
            properties:
              ready: {type: boolean}
";

const WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: demo}
spec: {color: red}
";

pub(crate) fn tmp(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_the_operator_workflow() {
    let tc = start().await;
    let k = Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache"),
    };
    k.ok(&["create", "namespace", "demo"]).await;
    assert!(k.ok(&["get", "ns"]).await.contains("demo"));

    // Client-side apply (validation on) of a Deployment, a CRD and a CR.
    for m in [DEPLOYMENT, CRD, WIDGET] {
        let (ok, out, err) = k.apply(&[], m).await;
        assert!(ok, "apply: {err}{out}");
    }
    let table = k.ok(&["get", "wd", "-n", "demo"]).await;
    assert!(
        table.contains("COLOR") && table.contains("red"),
        "printer columns: {table}"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "widget",
            "w1",
            "-n",
            "demo",
            "-o",
            "jsonpath={.spec.size}"
        ])
        .await,
        "3",
        "schema default applied"
    );
    // Server-side apply of the same objects.
    for m in [DEPLOYMENT, CRD, WIDGET] {
        let (ok, out, err) = k.apply(&["--server-side"], m).await;
        assert!(ok, "apply --server-side: {err}{out}");
    }
    // Another field manager changing an owned field conflicts, then forces.
    let other = DEPLOYMENT.replace("replicas: 2", "replicas: 4");
    let (ok, _, err) = k
        .apply(&["--server-side", "--field-manager=other"], &other)
        .await;
    assert!(
        !ok && err.contains("conflict"),
        "expected a conflict: {err}"
    );
    let (ok, out, err) = k
        .apply(
            &[
                "--server-side",
                "--field-manager=other",
                "--force-conflicts",
            ],
            &other,
        )
        .await;
    assert!(ok, "force-conflicts: {err}{out}");
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "web",
            "-n",
            "demo",
            "-o",
            "jsonpath={.spec.replicas}"
        ])
        .await,
        "4"
    );

    // Pods appear; `get -w` streams and is bounded by --request-timeout.
    let (_, watched, _) = k
        .run(
            &["get", "pods", "-n", "demo", "-w", "--request-timeout=3s"],
            None,
        )
        .await;
    assert!(
        watched.contains("web-"),
        "get -w listed the pods: {watched}"
    );

    k.ok(&["scale", "deploy/web", "-n", "demo", "--replicas=0"])
        .await;
    k.ok(&[
        "wait",
        "--for=condition=Available",
        "deploy/web",
        "-n",
        "demo",
        "--timeout=20s",
    ])
    .await;
    k.ok(&["annotate", "deploy/web", "-n", "demo", "on-call=me"])
        .await;
    k.ok(&["label", "deploy/web", "-n", "demo", "tier=frontend"])
        .await;
    k.ok(&[
        "patch",
        "deploy/web",
        "-n",
        "demo",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"merge":"yes"}}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "deploy/web",
        "-n",
        "demo",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/json","value":"yes"}]"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "deploy/web",
        "-n",
        "demo",
        "--type=strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}"#,
    ])
    .await;
    let labels = k
        .ok(&[
            "get",
            "deploy",
            "web",
            "-n",
            "demo",
            "-o",
            "jsonpath={.metadata.labels}",
        ])
        .await;
    assert!(
        labels.contains("frontend")
            && labels.contains("\"merge\":\"yes\"")
            && labels.contains("\"json\":\"yes\""),
        "{labels}"
    );
    let yaml = k
        .ok(&["get", "deploy", "web", "-n", "demo", "-o", "yaml"])
        .await;
    assert!(
        yaml.contains("image: nginx:1.27")
            && yaml.contains("on-call: me")
            && yaml.contains("containerPort: 80"),
        "strategic merge kept the port: {yaml}"
    );
    assert!(k
        .ok(&["explain", "deployment"])
        .await
        .contains("Deployment"));

    // RBAC through impersonation.
    k.ok(&["create", "serviceaccount", "bot", "-n", "demo"])
        .await;
    let (_, no, _) = k
        .run(
            &[
                "auth",
                "can-i",
                "list",
                "pods",
                "-n",
                "demo",
                "--as",
                "system:serviceaccount:demo:bot",
            ],
            None,
        )
        .await;
    assert_eq!(no.trim(), "no");
    k.ok(&[
        "create",
        "role",
        "reader",
        "-n",
        "demo",
        "--verb=get,list",
        "--resource=pods",
    ])
    .await;
    k.ok(&[
        "create",
        "rolebinding",
        "bot-reader",
        "-n",
        "demo",
        "--role=reader",
        "--serviceaccount=demo:bot",
    ])
    .await;
    assert_eq!(
        k.ok(&[
            "auth",
            "can-i",
            "list",
            "pods",
            "-n",
            "demo",
            "--as",
            "system:serviceaccount:demo:bot"
        ])
        .await
        .trim(),
        "yes"
    );
    assert!(k
        .ok(&["create", "token", "bot", "-n", "demo"])
        .await
        .starts_with("ey"));

    // Finalizers hold a deletion; removing them completes it.
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "-n",
        "demo",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ])
    .await;
    k.ok(&["delete", "widget", "w1", "-n", "demo", "--wait=false"])
        .await;
    assert!(!k
        .ok(&[
            "get",
            "widget",
            "w1",
            "-n",
            "demo",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}"
        ])
        .await
        .is_empty());
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "-n",
        "demo",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let (found, _, _) = k.run(&["get", "widget", "w1", "-n", "demo"], None).await;
    assert!(!found, "the widget is gone once its finalizers are");

    // Cascading delete removes the ReplicaSets.
    k.ok(&["scale", "deploy/web", "-n", "demo", "--replicas=1"])
        .await;
    k.ok(&[
        "delete",
        "deploy",
        "web",
        "-n",
        "demo",
        "--cascade=foreground",
        "--timeout=20s",
    ])
    .await;
    let mut rs_left = String::from("?");
    for _ in 0..40 {
        rs_left = k.ok(&["get", "rs,pods", "-n", "demo", "-o", "name"]).await;
        if rs_left.trim().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(rs_left.trim().is_empty(), "dependents deleted: {rs_left}");
    k.ok(&["delete", "namespace", "demo", "--timeout=30s"])
        .await;
    tc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_typed_create_commands_send_protobuf_that_is_understood() {
    let tc = start().await;
    let k = Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache"),
    };
    k.ok(&[
        "create",
        "deployment",
        "d1",
        "--image=nginx:1.25",
        "--replicas=0",
        "--port=80",
    ])
    .await;
    assert_eq!(k.ok(&["get", "deploy", "d1", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}"]).await, "0 nginx:1.25 80");
    k.ok(&["create", "service", "clusterip", "s1", "--tcp=80:8080"])
        .await;
    assert_eq!(
        k.ok(&[
            "get",
            "svc",
            "s1",
            "-o",
            "jsonpath={.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.selector.app}"
        ])
        .await,
        "80 8080 s1"
    );
    k.ok(&["create", "configmap", "c1", "--from-literal=a=b"])
        .await;
    k.ok(&["create", "secret", "generic", "s1", "--from-literal=a=b"])
        .await;
    assert_eq!(
        k.ok(&["get", "secret", "s1", "-o", "jsonpath={.data.a}"])
            .await,
        "Yg=="
    );
    k.ok(&[
        "create",
        "clusterrole",
        "r1",
        "--verb=get",
        "--resource=pods",
    ])
    .await;
    k.ok(&[
        "create",
        "clusterrolebinding",
        "b1",
        "--clusterrole=r1",
        "--user=someone",
    ])
    .await;
    assert_eq!(
        k.ok(&["auth", "can-i", "get", "pods", "--as", "someone"])
            .await
            .trim(),
        "yes"
    );
    assert!(k.ok(&["auth", "whoami"]).await.contains("system:masters"));
    tc.stop().await;
}

/// docs/design/history.md#issue-14-item-5: kubectl 1.32 reads aggregated discovery (`/api` and
/// `/apis` only, no per-group-version documents) and its cache holds the same resources, custom
/// ones too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_uses_aggregated_discovery() {
    let tc = start().await;
    let k = Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache"),
    };
    let (ok, out, err) = k.apply(&[], CRD).await;
    assert!(ok, "apply crd: {err}{out}");
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
    ])
    .await;
    // A fresh cache, so this run discovers from the server.
    let fresh = Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache-fresh"),
    };
    let (ok, out, err) = fresh.run(&["api-resources", "-v=6"], None).await;
    assert!(ok, "api-resources: {err}{out}");
    for name in ["pods", "deployments", "widgets", "apiservices"] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} listed: {out}"
        );
    }
    assert!(err.contains("/apis?"), "-v=6 logs the requests: {err}");
    assert!(
        !err.contains("/apis/apps/v1?") && !err.contains("/api/v1?"),
        "aggregated discovery needs no per-group-version requests: {err}"
    );
    // kubectl's disk cache holds per-group-version documents built from the aggregated one.
    let discovery = tmp(tc.dir.path(), "kubectl-cache-fresh").join("discovery");
    let host = std::fs::read_dir(&discovery)
        .expect("discovery cache")
        .next()
        .expect("one server")
        .expect("entry")
        .path();
    let widgets = std::fs::read_to_string(host.join("example.com/v1/serverresources.json"))
        .expect("cached example.com/v1");
    assert!(widgets.contains(r#""name":"widgets""#), "{widgets}");
    let cached = fresh.ok(&["get", "widgets", "-A"]).await;
    assert!(
        cached.is_empty() || cached.contains("No resources") || cached.contains("NAME"),
        "{cached}"
    );
    let listed = fresh.ok(&["get", "apiservices", "-o", "name"]).await;
    assert!(
        listed.contains("apiservice.apiregistration.k8s.io/v1.apps"),
        "{listed}"
    );
    let table = fresh.ok(&["get", "apiservice", "v1.apps"]).await;
    assert!(
        table.contains("SERVICE") && table.contains("Local") && table.contains("True"),
        "{table}"
    );
    tc.stop().await;
}

/// docs/design/history.md#issue-14-item-8: the cluster DNS address is held by
/// `kube-system/kube-dns`, as kubeadm and kind clusters hold it, so the allocator never gives
/// it to another Service (before, the ninth Service got 10.96.0.10 and pods' resolv.conf
/// pointed at it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_never_gets_the_cluster_dns_address_for_a_service() {
    let dns_ip = "10.96.0.10";
    let tc = start_with(|c| c.dns_address = Some(dns_ip.parse().unwrap())).await;
    let k = Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache"),
    };
    for i in 0..12 {
        k.ok(&[
            "create",
            "service",
            "clusterip",
            &format!("s{i}"),
            "--tcp=80:80",
        ])
        .await;
    }
    let ips = k
        .ok(&[
            "get",
            "services",
            "-o",
            "jsonpath={.items[*].spec.clusterIP}",
        ])
        .await;
    assert_eq!(ips.split_whitespace().count(), 13, "kubernetes + 12: {ips}");
    assert!(
        !ips.split_whitespace().any(|ip| ip == dns_ip),
        "no Service in default gets the DNS address: {ips}"
    );
    let held = k
        .ok(&[
            "get",
            "service",
            "kube-dns",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.spec.clusterIP} {.spec.ports[*].name}",
        ])
        .await;
    assert_eq!(held, format!("{dns_ip} dns dns-tcp metrics"));
    let (ok, out, err) = k
        .run(
            &[
                "create",
                "service",
                "clusterip",
                "squatter",
                "--tcp=53:53",
                &format!("--clusterip={dns_ip}"),
            ],
            None,
        )
        .await;
    assert!(!ok, "asking for the DNS address is refused: {out}");
    assert!(
        err.contains("is invalid") && err.contains("already allocated"),
        "422 Invalid naming the allocation: {err}"
    );
    tc.stop().await;
}

/// docs/design/history.md#issue-14-item-8: `/openapi/v2` is served (it was 404). kubectl's v2
/// explain asks for the gnostic protobuf form; kube-rs reads the JSON form; an Accept with
/// neither is 406.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_openapi_v2() {
    let tc = start().await;
    let k = Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache"),
    };
    let (ok, out, err) = k.apply(&[], CRD).await;
    assert!(ok, "apply crd: {err}{out}");
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
    ])
    .await;
    let (ok, out, err) = k
        .run(
            &["explain", "pods", "--output=plaintext-openapiv2", "-v=8"],
            None,
        )
        .await;
    assert!(ok, "explain pods (v2): {err}{out}");
    assert!(
        err.contains("/openapi/v2") && !err.contains("/openapi/v3"),
        "the v2 output reads /openapi/v2 only: {err}"
    );
    assert!(
        out.contains("KIND:") && out.contains("Pod") && out.contains("VERSION:"),
        "{out}"
    );
    for field in ["apiVersion", "kind", "metadata", "spec", "status"] {
        assert!(out.contains(field), "{field} listed: {out}");
    }
    let widget = k
        .ok(&["explain", "widgets.spec", "--output=plaintext-openapiv2"])
        .await;
    assert!(
        widget.contains("color") && widget.contains("size") && widget.contains("<integer>"),
        "the CRD's schema: {widget}"
    );
    // kube-rs: the JSON form.
    let req = http::Request::get("/openapi/v2")
        .header("Accept", "application/json")
        .body(Vec::new())
        .unwrap();
    let text = tc.client.request_text(req).await.expect("GET /openapi/v2");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(doc["swagger"], "2.0");
    let pod = &doc["definitions"]["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "", "version": "v1", "kind": "Pod"}])
    );
    assert_eq!(
        pod["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert!(
        doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].is_object(),
        "paths carry the operations"
    );
    let req = http::Request::get("/openapi/v2")
        .header("Accept", "application/yaml")
        .body(Vec::new())
        .unwrap();
    match tc.client.request_text(req).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (406, "NotAcceptable")),
        other => panic!("406 for an Accept it cannot serve: {other:?}"),
    }
    tc.stop().await;
}

const PROBE_FIRST: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: probe, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: probe}}
  template:
    metadata: {labels: {app: probe}}
    spec:
      containers:
      - name: c
        image: bloodraven:0.1.0
        args: [--a, --b]
        env: [{name: E, value: \"1\"}]
        ports: [{containerPort: 8443, name: deploy}, {containerPort: 8082, name: metrics}]
        volumeMounts: [{name: tls, mountPath: /tls}]
      volumes: [{name: tls, secret: {secretName: x}}]
";

const PROBE_SECOND: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: probe, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: probe}}
  template:
    metadata: {labels: {app: probe}}
    spec:
      containers:
      - name: c
        image: bloodraven:0.1.0
        args: [--a]
        ports: [{containerPort: 8082, name: metrics}]
";

/// A second server-side apply by the same field manager that drops list items merged by key
/// (env by name, container ports by containerPort and protocol, volumeMounts by mountPath,
/// volumes by name) removes each item whole: its keys, the rest of its fields and the
/// server's defaults in it (`protocol: TCP`), as structured-merge-diff does; no husks. The
/// atomic `args` is replaced whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_removes_dropped_list_items_whole() {
    let tc = start().await;
    let k = Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache"),
    };
    for m in [PROBE_FIRST, PROBE_SECOND] {
        let (ok, out, err) = k
            .apply(&["--server-side", "--field-manager=probe"], m)
            .await;
        assert!(ok, "apply --server-side: {err}{out}");
    }
    let spec: serde_json::Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "deploy",
            "probe",
            "-o",
            "jsonpath={.spec.template.spec}",
        ])
        .await,
    )
    .expect("pod spec JSON");
    let c = &spec["containers"][0];
    assert_eq!(c["args"], serde_json::json!(["--a"]), "{spec}");
    assert_eq!(c.get("env"), None, "env E removed whole: {spec}");
    assert_eq!(
        c["ports"],
        serde_json::json!([{"containerPort": 8082, "name": "metrics", "protocol": "TCP"}]),
        "port 8443 removed whole: {spec}"
    );
    assert_eq!(
        c.get("volumeMounts"),
        None,
        "tls mount removed whole: {spec}"
    );
    assert_eq!(
        spec.get("volumes"),
        None,
        "tls volume removed whole: {spec}"
    );
    assert_eq!(c["image"], "bloodraven:0.1.0", "{spec}");
    tc.stop().await;
}
