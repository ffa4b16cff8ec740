//! Every group and database the repository applies through an API server passes the schema
//! (and decodes, and `validate()` finds nothing): the manifests under `fixtures/` (but the
//! CRDs), the playground as each scenario installs it (`install.groupSpec`) and edits it
//! (`apply`, merged in order), and the groups other crates' tests create.
//!
//! A fixture meant to be stored bypassing validation (a malformed object) goes in a file whose
//! name says `malformed` or `invalid`: those are skipped.

use std::path::{Path, PathBuf};

use bloodraven_api::{MysqlDatabase, MysqlFailoverGroup};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{
    database_crd,
    evaluator::{Evaluator, Violation},
    group_crd, repository,
};

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| {
            let yaml = serde_yaml::Value::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            serde_json::to_value(yaml).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .filter(|document| !document.is_null())
        .collect()
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.contains("malformed") || name.contains("invalid") {
            continue;
        }
        if path.is_dir() {
            if name != "crds" {
                yaml_files(&path, out);
            }
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            out.push(path);
        }
    }
}

/// RFC 7386 merge: what a server-side apply of a partial spec does to these objects, whose
/// lists are atomic.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// Refusals known and left to the owners of those files: (where, the keyword's pointer ends
/// with, why). Anything else refused fails the test. (Scenarios 030-035 listed two
/// ServiceAccounts of one namespace in `deploymentClients`, a map keyed by namespace; their
/// second deployer now has a namespace of its own.)
const KNOWN: &[(&str, &str, &str)] = &[];

struct Checker {
    groups: Evaluator,
    databases: Evaluator,
    checked: Vec<String>,
    failures: Vec<String>,
    known: Vec<String>,
}

impl Checker {
    /// The refusals as problems, but for the [`KNOWN`] ones (kept aside).
    fn refusals(&mut self, origin: &str, violations: Vec<Violation>) -> Vec<String> {
        let mut problems = Vec::new();
        for v in violations {
            let said = format!(
                "the schema refuses {}: {} ({})",
                v.field, v.message, v.keyword
            );
            match KNOWN
                .iter()
                .find(|(at, keyword, _)| origin.starts_with(at) && v.keyword.ends_with(keyword))
            {
                Some((_, _, why)) => self.known.push(format!("{origin}: {said}: known: {why}")),
                None => problems.push(said),
            }
        }
        problems
    }

    fn object(&mut self, origin: &str, object: &Value) {
        let kind = object["kind"].as_str().unwrap_or_default();
        let problems: Vec<String> = match kind {
            "MysqlFailoverGroup" => {
                let violations = self.groups.check(object);
                let mut problems = self.refusals(origin, violations);
                match serde_json::from_value::<MysqlFailoverGroup>(object.clone()) {
                    Ok(group) => problems.extend(group.spec.validate()),
                    Err(e) => problems.push(format!("does not decode: {e}")),
                }
                problems
            }
            "MysqlDatabase" => {
                let violations = self.databases.check(object);
                let mut problems = self.refusals(origin, violations);
                if let Err(e) = serde_json::from_value::<MysqlDatabase>(object.clone()) {
                    problems.push(format!("does not decode: {e}"));
                }
                problems
            }
            _ => return,
        };
        self.checked.push(format!("{origin}: {kind}"));
        for problem in problems {
            self.failures.push(format!("{origin}: {problem}"));
        }
    }
}

/// The groups other crates' tests create through an API server (copies: keep them in step).
fn groups_of_other_tests() -> Vec<(&'static str, Value)> {
    let group = |spec: Value| {
        json!({
            "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlFailoverGroup",
            "metadata": {"name": "g", "namespace": "n"}, "spec": spec
        })
    };
    vec![
        (
            "operator/controller/tests/operator/localkube.rs (Cluster::with_group)",
            group(json!({
                "image": "mariadb:10.11",
                "sites": [
                    {"name": "iad", "role": "read-write"},
                    {"name": "pdx", "role": "read-write"},
                    {"name": "reader", "role": "read-only"}
                ],
                "initialActiveSite": "iad", "pollInterval": "100ms", "maxLagSeconds": 30,
                "failoverCooldown": "30s",
                "dns": {"hostname": "playground-db.example.local", "ttl": 10}
            })),
        ),
        (
            "operator/controller/tests/operator/binary.rs",
            group(json!({
                "image": "mariadb:10.11", "sites": [{"name": "solo", "role": "read-write"}],
                "initialActiveSite": "solo", "pollInterval": "200ms"
            })),
        ),
        (
            "operator/plugin/tests/in_cluster.rs",
            group(json!({
                "image": "mariadb:10.11", "initialActiveSite": "iad",
                "sites": [{"name": "iad", "role": "read-write"}, {"name": "pdx", "role": "read-write"}]
            })),
        ),
    ]
}

#[test]
fn every_applied_group_and_database_passes_the_schema() {
    let root = repository();
    let mut checker = Checker {
        groups: Evaluator::new(group_crd()),
        databases: Evaluator::new(database_crd()),
        checked: Vec::new(),
        failures: Vec::new(),
        known: Vec::new(),
    };

    let mut files = Vec::new();
    yaml_files(&root.join("fixtures"), &mut files);
    for path in &files {
        let origin = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        for document in documents(path) {
            checker.object(&origin, &document);
        }
    }

    // The scenarios: the playground group with the install's groupSpec, then each apply of it
    // in order.
    let playground = documents(&root.join("fixtures/playground/group.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "MysqlFailoverGroup")
        .expect("the playground group");
    let mut scenarios = Vec::new();
    let scenario_dir = root.join("scenarios");
    for entry in std::fs::read_dir(&scenario_dir).expect("scenarios/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            scenarios.push(path);
        }
    }
    scenarios.sort();
    for path in &scenarios {
        let origin = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        for document in documents(path) {
            let mut group = playground.clone();
            if let Some(spec) = document.pointer("/install/groupSpec") {
                merge(&mut group["spec"], spec);
                checker.object(&format!("{origin} (install)"), &group);
            }
            // A scenario that applies a CRD of its own (054: the CRD as it was before it
            // tightened) stores what that CRD takes, until it applies fixtures/crds again.
            let mut own_crd = false;
            for (index, step) in document["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(apply) = step.get("apply") else {
                    continue;
                };
                if apply
                    .get("fixture")
                    .and_then(Value::as_str)
                    .is_some_and(|fixture| fixture.starts_with("fixtures/crds/"))
                {
                    own_crd = false;
                }
                if let Some(object) = apply.get("object") {
                    if object["kind"] == "CustomResourceDefinition" {
                        own_crd = true;
                        continue;
                    }
                    if own_crd {
                        continue;
                    }
                    if object["kind"] == "MysqlFailoverGroup" {
                        merge(&mut group["spec"], &object["spec"]);
                        merge(&mut group["metadata"], &object["metadata"]);
                        checker.object(&format!("{origin} (step {})", index + 1), &group);
                    } else {
                        checker.object(&format!("{origin} (step {})", index + 1), object);
                    }
                }
            }
        }
    }

    for (origin, group) in groups_of_other_tests() {
        checker.object(origin, &group);
    }

    for known in &checker.known {
        eprintln!("{known}");
    }
    assert!(
        checker.failures.is_empty(),
        "refused:\n{}",
        checker.failures.join("\n")
    );
    // Not vacuous: the playground and its database, the scenarios' edits, the other tests.
    let count = |needle: &str| {
        checker
            .checked
            .iter()
            .filter(|c| c.contains(needle))
            .count()
    };
    assert!(
        count("fixtures/playground/group.yaml: MysqlFailoverGroup") == 1
            && count("fixtures/playground/database.yaml: MysqlDatabase") == 1
            && count("scenarios/") >= 5
            && count(".rs") == 3,
        "checked only {:#?}",
        checker.checked
    );
}
