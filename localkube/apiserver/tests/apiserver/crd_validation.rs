//! Issue 32 item 3: localkube refuses a custom resource a real API server refuses, with the
//! same 422 and message, through real `kubectl` 1.32: OpenAPI `pattern`, bounds, `enum`,
//! lengths, item counts, `required`, `nullable`, list-map keys and CEL rules, on create,
//! apply (client- and server-side), replace, merge and JSON patch, and the status
//! subresource (validated against the status schema only); an object stored before its
//! CRD tightened can still be labelled and have its status written (ratcheting).

use crate::kubectl::{tmp, Kubectl};
use crate::support::{start, TestCluster};
use serde_json::{json, Value};
use std::path::Path;

/// A CRD of its own with each rule (not the operator's, which changes on its own).
const CHECK_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: checks.example.com}
spec:
  group: example.com
  names: {kind: Check, plural: checks, singular: check}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [pollInterval, sites]
            x-kubernetes-validations:
            - rule: self.initialActiveSite in self.sites.map(s, s.name)
              message: initialActiveSite must name a site
              fieldPath: .initialActiveSite
            - rule: self.sites.exists(s, has(s.role) && s.role == 'read-write')
              message: one site must be read-write
              reason: FieldValueRequired
              fieldPath: .sites
            properties:
              pollInterval: {type: string, pattern: '^[0-9]+(ms|s|m|h)$'}
              failureThreshold: {type: integer, minimum: 1, maximum: 10}
              ratio: {type: number, minimum: 0, maximum: 1, exclusiveMinimum: true, exclusiveMaximum: true}
              mode:
                type: string
                enum: [auto, manual]
                x-kubernetes-validations:
                - {rule: self == oldSelf, message: mode is immutable}
              hostname: {type: string, minLength: 3, maxLength: 10}
              note: {type: string, nullable: true}
              initialActiveSite: {type: string}
              sites:
                type: array
                minItems: 1
                maxItems: 3
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    role: {type: string, enum: [read-write, read-only]}
          status:
            type: object
            properties:
              phase: {type: string, enum: [Ready, Failed]}
"#;

/// A valid Check whose spec has `extra` lines replacing the defaults they name.
fn check(name: &str, spec: &[(&str, &str)]) -> String {
    let mut fields: Vec<(String, String)> = [
        ("pollInterval", "2s"),
        ("failureThreshold", "3"),
        ("ratio", "0.5"),
        ("mode", "auto"),
        ("hostname", "db.local"),
        ("note", "null"),
        ("initialActiveSite", "iad"),
        (
            "sites",
            "[{name: iad, role: read-write}, {name: pdx, role: read-only}]",
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in spec {
        match fields.iter_mut().find(|(f, _)| f == k) {
            Some(f) if *v == "-" => f.1 = String::new(),
            Some(f) => f.1 = v.to_string(),
            None => fields.push((k.to_string(), v.to_string())),
        }
    }
    let mut out = format!(
        "apiVersion: example.com/v1\nkind: Check\nmetadata: {{name: {name}, namespace: default}}\nspec:\n"
    );
    for (k, v) in fields.iter().filter(|(_, v)| !v.is_empty()) {
        out.push_str(&format!("  {k}: {v}\n"));
    }
    out
}

/// (object name, spec fields replaced, what kubectl must print)
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
);

fn kubectl(tc: &TestCluster) -> Kubectl {
    Kubectl {
        kubeconfig: tc.lk.kubeconfig_path(),
        cache: tmp(tc.dir.path(), "kubectl-cache"),
    }
}

async fn install(k: &Kubectl, crd: &str, name: &str) {
    let (ok, out, err) = k.apply(&[], crd).await;
    assert!(ok, "apply {name}: {err}{out}");
    k.ok(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{name}"),
    ])
    .await;
}

/// A kubectl command that must fail as a 422 does: exit code 1, kubectl's rendering of an
/// Invalid Status (`The <kind> "<name>" is invalid: ` then the causes, one per line when
/// there are several), and each of `want` in what it printed. Returns stderr.
async fn refused(k: &Kubectl, args: &[&str], stdin: Option<&str>, want: &[&str]) -> String {
    let (code, out, err) = k.run_code(args, stdin).await;
    assert_eq!(code, Some(1), "kubectl {args:?} must fail: {out}{err}");
    assert!(
        err.starts_with("The ") && err.contains(" is invalid: "),
        "kubectl {args:?}: {err}"
    );
    for w in want {
        assert!(err.contains(w), "kubectl {args:?} names {w:?}: {err}");
    }
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_a_bad_custom_resource_fails_naming_the_field() {
    let tc = start().await;
    let k = kubectl(&tc);
    install(&k, CHECK_CRD, "checks.example.com").await;

    // What kubectl prints for a 422, whole.
    let err = refused(
        &k,
        &["apply", "-f", "-"],
        Some(&check("bad-poll", &[("pollInterval", "fast")])),
        &[],
    )
    .await;
    assert_eq!(
        err,
        "The Check \"bad-poll\" is invalid: spec.pollInterval: Invalid value: \"fast\": spec.pollInterval in body should match '^[0-9]+(ms|s|m|h)$'\n"
    );

    let cases: &[Case] = &[
        (
            "low-threshold",
            &[("failureThreshold", "0")],
            &["spec.failureThreshold: Invalid value: 0: spec.failureThreshold in body should be greater than or equal to 1"],
        ),
        (
            "high-threshold",
            &[("failureThreshold", "11")],
            &["spec.failureThreshold: Invalid value: 11: spec.failureThreshold in body should be less than or equal to 10"],
        ),
        (
            "string-threshold",
            &[("failureThreshold", "'3'")],
            &["spec.failureThreshold: Invalid value: \"string\": spec.failureThreshold in body must be of type integer: \"string\""],
        ),
        (
            "whole-ratio",
            &[("ratio", "1")],
            &["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"],
        ),
        (
            "bad-mode",
            &[("mode", "turbo")],
            &["spec.mode: Unsupported value: \"turbo\": supported values: \"auto\", \"manual\""],
        ),
        (
            "short-host",
            &[("hostname", "db")],
            &["spec.hostname: Invalid value: \"db\": spec.hostname in body should be at least 3 chars long"],
        ),
        (
            "long-host",
            &[("hostname", "db.example.local")],
            &["spec.hostname: Too long: may not be more than 10 bytes"],
        ),
        (
            "no-sites",
            &[("sites", "[]")],
            &[
                "spec.sites: Invalid value: 0: spec.sites in body should have at least 1 items",
                "spec.initialActiveSite: Invalid value: \"object\": initialActiveSite must name a site",
                "spec.sites: Required value: one site must be read-write",
            ],
        ),
        (
            "many-sites",
            &[("sites", "[{name: iad, role: read-write}, {name: a}, {name: b}, {name: c}]")],
            &[
                "spec.sites: Too many: 4: must have at most 3 items",
                "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ],
        ),
        (
            "no-poll",
            &[("pollInterval", "-")],
            &["spec.pollInterval: Required value"],
        ),
        (
            "unnamed-site",
            &[("sites", "[{name: iad, role: read-write}, {role: read-only}]")],
            &["spec.sites[1].name: Required value"],
        ),
        (
            "twin-sites",
            &[("sites", "[{name: iad, role: read-write}, {name: iad, role: read-only}]")],
            &["spec.sites[1]: Duplicate value: map[string]interface {}{\"name\":\"iad\"}"],
        ),
        (
            "bad-role",
            &[("sites", "[{name: iad, role: primary}]")],
            &["spec.sites[0].role: Unsupported value: \"primary\": supported values: \"read-write\", \"read-only\""],
        ),
        (
            "not-a-site",
            &[("initialActiveSite", "sea")],
            &["spec.initialActiveSite: Invalid value: \"object\": initialActiveSite must name a site"],
        ),
        (
            "no-writer",
            &[("sites", "[{name: iad, role: read-only}]")],
            &["spec.sites: Required value: one site must be read-write"],
        ),
    ];
    for (name, spec, want) in cases {
        let mut want = want.to_vec();
        let prefix = format!("The Check \"{name}\" is invalid: ");
        want.push(&prefix);
        refused(&k, &["apply", "-f", "-"], Some(&check(name, spec)), &want).await;
    }
    let (ok, out, _) = k
        .run(&["get", "checks", "-n", "default", "-o", "name"], None)
        .await;
    assert!(ok && out.trim().is_empty(), "nothing was stored: {out}");

    // A good one is accepted, `nullable` keeping its null, `mode` defaulting nothing.
    let good = check("good", &[]);
    let (ok, out, err) = k.apply(&[], &good).await;
    assert!(ok, "a valid Check is accepted: {err}{out}");
    assert_eq!(
        k.ok(&[
            "get",
            "check",
            "good",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.note}"
        ])
        .await,
        ""
    );

    // Every verb that writes it is validated the same way.
    refused(
        &k,
        &["apply", "-f", "-"],
        Some(&check("good", &[("pollInterval", "fast")])),
        &[
            "spec.pollInterval: Invalid value: \"fast\": spec.pollInterval in body should match '^[0-9]+(ms|s|m|h)$'",
        ],
    )
    .await;
    refused(
        &k,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&check("good", &[("ratio", "2")])),
        &["spec.ratio: Invalid value: 2: spec.ratio in body should be less than 1"],
    )
    .await;
    refused(
        &k,
        &["replace", "-f", "-"],
        Some(&check("good", &[("failureThreshold", "0")])),
        &["spec.failureThreshold: Invalid value: 0"],
    )
    .await;
    refused(
        &k,
        &[
            "patch",
            "check",
            "good",
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"spec":{"mode":"manual"}}"#,
        ],
        None,
        &["spec.mode: Invalid value: \"string\": mode is immutable"],
    )
    .await;
    refused(
        &k,
        &[
            "patch",
            "check",
            "good",
            "-n",
            "default",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/sites/0/role","value":"primary"}]"#,
        ],
        None,
        &["spec.sites[0].role: Unsupported value: \"primary\""],
    )
    .await;
    // Strategic merge patch (kubectl patch's default) is not served for custom resources.
    let (code, _, err) = k
        .run_code(
            &[
                "patch",
                "check",
                "good",
                "-n",
                "default",
                "-p",
                r#"{"spec":{"failureThreshold":0}}"#,
            ],
            None,
        )
        .await;
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "error: application/strategic-merge-patch+json is not supported by example.com/v1, Kind=Check: the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml\n"
    );
    // The status subresource: the status schema.
    refused(
        &k,
        &[
            "patch",
            "check",
            "good",
            "-n",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Bogus"}}"#,
        ],
        None,
        &["status.phase: Unsupported value: \"Bogus\": supported values: \"Ready\", \"Failed\""],
    )
    .await;
    k.ok(&[
        "patch",
        "check",
        "good",
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Ready"}}"#,
    ])
    .await;
    let stored = k
        .ok(&["get", "check", "good", "-n", "default", "-o", "json"])
        .await;
    let stored: Value = serde_json::from_str(&stored).expect("json");
    assert_eq!(stored["spec"]["pollInterval"], "2s", "{stored}");
    assert_eq!(stored["spec"]["mode"], "auto");
    assert_eq!(stored["status"]["phase"], "Ready");

    // The Status itself: 422, reason Invalid, a cause per field with its reason.
    let bad = json!({"apiVersion": "example.com/v1", "kind": "Check",
        "metadata": {"name": "raw", "namespace": "default"},
        "spec": {"pollInterval": "fast", "sites": [{"name": "iad", "role": "read-write"}], "initialActiveSite": "iad", "mode": "turbo"}});
    let req = http::Request::post("/apis/example.com/v1/namespaces/default/checks")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&bad).expect("json"),
        ))
        .expect("request");
    let resp = tc.client.send(req).await.expect("sent");
    assert_eq!(resp.status().as_u16(), 422);
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let status: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "Check.example.com \"raw\" is invalid: [spec.mode: Unsupported value: \"turbo\": supported values: \"auto\", \"manual\", spec.pollInterval: Invalid value: \"fast\": spec.pollInterval in body should match '^[0-9]+(ms|s|m|h)$', <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
    assert_eq!(
        status["details"],
        json!({"name": "raw", "group": "example.com", "kind": "Check", "causes": [
            {"reason": "FieldValueNotSupported", "message": "Unsupported value: \"turbo\": supported values: \"auto\", \"manual\"", "field": "spec.mode"},
            {"reason": "FieldValueInvalid", "message": "Invalid value: \"fast\": spec.pollInterval in body should match '^[0-9]+(ms|s|m|h)$'", "field": "spec.pollInterval"},
            {"reason": "FieldValueInvalid", "message": "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation", "field": "<nil>"}]})
    );
    tc.stop().await;
}

/// An object stored before its CRD tightened keeps being writable where it does not change
/// the invalid value, as on a real server (ratcheting): its labels, its status, its other
/// fields; a change of the invalid value itself is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_can_still_write_an_object_stored_before_its_crd_tightened() {
    let tc = start().await;
    let k = kubectl(&tc);
    let loose = CHECK_CRD.replace(" pattern: '^[0-9]+(ms|s|m|h)$'", "");
    assert_ne!(loose, CHECK_CRD);
    install(&k, &loose, "checks.example.com").await;
    let (ok, out, err) = k
        .apply(&[], &check("old", &[("pollInterval", "fast")]))
        .await;
    assert!(ok, "stored before the pattern: {err}{out}");
    install(&k, CHECK_CRD, "checks.example.com").await;
    k.ok(&["label", "check", "old", "-n", "default", "team=db"])
        .await;
    k.ok(&[
        "patch",
        "check",
        "old",
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Failed"}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "check",
        "old",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"spec":{"failureThreshold":4}}"#,
    ])
    .await;
    refused(
        &k,
        &[
            "patch",
            "check",
            "old",
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"spec":{"pollInterval":"faster"}}"#,
        ],
        None,
        &["spec.pollInterval: Invalid value: \"faster\": spec.pollInterval in body should match"],
    )
    .await;
    k.ok(&[
        "patch",
        "check",
        "old",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"spec":{"pollInterval":"5s"}}"#,
    ])
    .await;
    tc.stop().await;
}

/// An object stored before its CRD gained a CEL rule it breaks and a defaulted field: its
/// status can still be written. The API server defaults the stored object when it reads it,
/// so the defaulted field is unchanged and the spec ratchets; localkube defaulted only the
/// new object, the spec differed from the stored one, and the rule refused every status write
/// (the operator's status of an invalid group after `spec.returningPrimary` got a default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_ratchets_a_spec_stored_before_a_rule_and_a_defaulted_field() {
    let tc = start().await;
    let k = kubectl(&tc);
    let rule = "            - rule: self.initialActiveSite in self.sites.map(s, s.name)\n              message: initialActiveSite must name a site\n              fieldPath: .initialActiveSite\n";
    let loose = CHECK_CRD.replace(rule, "");
    assert_ne!(loose, CHECK_CRD);
    let note = "              note: {type: string, nullable: true}\n";
    let tight = CHECK_CRD.replace(
        note,
        &format!("{note}              policy: {{type: object, default: {{onErrant: fence}}, properties: {{onErrant: {{type: string, default: fence}}}}}}\n"),
    );
    assert_ne!(tight, CHECK_CRD);
    install(&k, &loose, "checks.example.com").await;
    let (ok, out, err) = k
        .apply(&[], &check("stray", &[("initialActiveSite", "nowhere")]))
        .await;
    assert!(ok, "stored before the rule: {err}{out}");
    install(&k, &tight, "checks.example.com").await;
    k.ok(&[
        "patch",
        "check",
        "stray",
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Failed"}}"#,
    ])
    .await;
    let read = k
        .ok(&["get", "check", "stray", "-n", "default", "-o", "json"])
        .await;
    let read: Value = serde_json::from_str(&read).expect("json");
    assert_eq!(read["status"]["phase"], "Failed");
    // A change of the spec is judged by the rule.
    refused(
        &k,
        &[
            "patch",
            "check",
            "stray",
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"spec":{"failureThreshold":4}}"#,
        ],
        None,
        &["initialActiveSite must name a site"],
    )
    .await;
    tc.stop().await;
}

/// A CRD whose CEL rule does not compile is refused when it is created, naming the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_a_crd_with_a_broken_cel_rule_fails() {
    let tc = start().await;
    let k = kubectl(&tc);
    let broken = CHECK_CRD
        .replace("checks.example.com", "brokens.example.com")
        .replace(
            "plural: checks, singular: check",
            "plural: brokens, singular: broken",
        )
        .replace("kind: Check,", "kind: Broken,")
        .replace(
            "rule: self.initialActiveSite in self.sites.map(s, s.name)",
            "rule: self.initialActiveSite in",
        );
    let err = refused(
        &k,
        &["apply", "-f", "-"],
        Some(&broken),
        &[
            "The CustomResourceDefinition \"brokens.example.com\" is invalid: spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.initialActiveSite in\"",
            "compilation failed: ERROR: <input>:1:26: Syntax error:",
        ],
    )
    .await;
    assert!(!err.contains("x-kubernetes-validations[1]"), "{err}");
    let (ok, _, _) = k.run(&["get", "crd", "brokens.example.com"], None).await;
    assert!(!ok, "the CRD was not stored");
    tc.stop().await;
}

/// The real CRDs and the playground's group (fixtures/) are accepted: their schemas and
/// rules, as they are in the tree, accept what the playground applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixture_crds_accept_the_playground_group() {
    let tc = start().await;
    let k = kubectl(&tc);
    // At run time (cargo test sets it): the compile-time value names whichever checkout built
    // the cached test binary (a CI clone elsewhere sharing the target directory).
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let fixtures = Path::new(&manifest_dir).join("../../fixtures");
    let crds = fixtures.join("crds");
    k.ok(&["apply", "-f", crds.to_str().expect("utf-8 path")])
        .await;
    for entry in std::fs::read_dir(&crds).expect("fixtures/crds") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read crd");
        let doc: Value = serde_yaml::from_str(&text).expect("yaml");
        let name = doc["metadata"]["name"].as_str().expect("a CRD name");
        k.ok(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{name}"),
        ])
        .await;
    }
    let group = fixtures.join("playground/group.yaml");
    let group = group.to_str().expect("utf-8 path");
    let (ok, out, err) = k.run(&["apply", "-f", group], None).await;
    assert!(ok, "the playground group is accepted: {err}{out}");
    // (--force-conflicts: after the client-side apply, localkube's server-side apply
    // conflicts on the atomic .spec.sites because an item holds an explicit
    // `readOnlyMaxLagSeconds: null`; without the null it does not. Not this test's subject.)
    let (ok, out, err) = k
        .run(
            &["apply", "--server-side", "--force-conflicts", "-f", group],
            None,
        )
        .await;
    assert!(ok, "and server-side: {err}{out}");
    assert!(k
        .ok(&["get", "mfg", "-n", "bloodraven-playground", "-o", "name"])
        .await
        .contains("playground"));
    tc.stop().await;
}
