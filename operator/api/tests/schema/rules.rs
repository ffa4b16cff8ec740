//! The table of what the operator requires of its objects and where each rule is refused: by
//! the API server at a schema keyword (named by its JSON pointer), or at run time only, with the
//! reason. docs/design/operator.md ("What the API server refuses and what only the operator
//! refuses") carries the same table, checked here line by line.

use bloodraven_api::{
    names,
    sidecar::{backup_name_problem, DatabaseNameProblem, EnsureDatabaseRequest},
    MysqlDatabase, MysqlFailoverGroup, RestoreSource,
};
use regex::Regex;
use serde_json::{json, Value};

use crate::{
    database_crd,
    evaluator::{Evaluator, Violation, ROOT},
    group_crd, repository,
};

/// A JSON pointer into the group CRD's `spec` schema.
macro_rules! spec {
    ($at:literal) => {
        concat!(
            "/spec/versions/0/schema/openAPIV3Schema/properties/spec",
            $at
        )
    };
}

/// Which CRD a rule is about.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Group,
    Database,
}

/// Who in the operator refuses an object breaking the rule.
enum Operator {
    /// `MysqlFailoverGroupSpec::validate` reports one problem, matching this regex.
    Validate(&'static str),
    /// The object does not decode into the operator's types.
    Decode,
    /// `EnsureDatabaseRequest::database_problem` reports it; the operator never sends it.
    DatabaseProblem(DatabaseNameProblem),
    /// The operator's own checks let it through (decodes, `validate()` is empty); the text
    /// says what refuses it later, or why the schema refuses more than the operator.
    Beyond(&'static str),
    /// A check of the operator's engine refuses it when it acts on it: the text says which and
    /// how; the function, when there is one, is that check.
    Runtime(&'static str, Option<fn(&Value) -> bool>),
}

/// Where the API server refuses it.
enum Refused {
    /// At this keyword: a JSON pointer into the CRD.
    Schema(&'static str),
    /// Nowhere: only the operator refuses it, for this reason.
    RuntimeOnly(&'static str),
}

struct Rule {
    /// What the operator requires, as the docs' table says it.
    rule: &'static str,
    kind: Kind,
    operator: Operator,
    /// Breaks this rule, and no other, in the valid base object.
    example: fn(&mut Value),
    refused: Refused,
}

const ANNOTATIONS: &str = "a CRD's schema cannot constrain `metadata` beyond `name` and \
     `generateName`, so no OpenAPI keyword or CRD CEL rule reaches annotations";

fn annotation(object: &Value, key: &str) -> String {
    object["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn annotate(object: &mut Value, key: &str, value: &str) {
    object["metadata"]["annotations"] = json!({ key: value });
}

fn table() -> Vec<Rule> {
    use Kind::*;
    use Operator::*;
    use Refused::*;
    vec![
        // validate(): each of its problems.
        Rule {
            rule: "at least one site",
            kind: Group,
            operator: Validate(r"^spec\.sites: at least one site is required$"),
            example: |o| o["spec"]["sites"] = json!([]),
            refused: Schema(spec!("/properties/sites/minItems")),
        },
        Rule {
            rule: "site names are unique",
            kind: Group,
            operator: Validate(r#"^spec\.sites\[\d+\]\.name: duplicate site ".*"$"#),
            example: |o| {
                let copy = o["spec"]["sites"][1].clone();
                o["spec"]["sites"].as_array_mut().expect("sites").push(copy);
            },
            refused: Schema(spec!("/properties/sites/x-kubernetes-validations/0")),
        },
        Rule {
            rule: "a site name is not empty",
            kind: Group,
            operator: Validate(r"^spec\.sites\[\d+\]\.name: must not be empty$"),
            example: |o| o["spec"]["sites"][2]["name"] = json!(""),
            refused: Schema(spec!("/properties/sites/items/properties/name/minLength")),
        },
        Rule {
            rule: "`initialActiveSite` names one of the sites",
            kind: Group,
            operator: Validate(r#"^spec\.initialActiveSite: ".*" is not one of spec\.sites$"#),
            example: |o| o["spec"]["initialActiveSite"] = json!("sea"),
            refused: Schema(spec!("/x-kubernetes-validations/0")),
        },
        Rule {
            rule: "`initialActiveSite` is a read-write site",
            kind: Group,
            operator: Validate(r#"^spec\.initialActiveSite: ".*" is a read-only site$"#),
            example: |o| o["spec"]["initialActiveSite"] = json!("reader"),
            refused: Schema(spec!("/x-kubernetes-validations/1")),
        },
        Rule {
            rule: "`failureThreshold` is at least 1",
            kind: Group,
            operator: Validate(r"^spec\.failureThreshold: must be at least 1$"),
            example: |o| o["spec"]["failureThreshold"] = json!(0),
            refused: Schema(spec!("/properties/failureThreshold/minimum")),
        },
        Rule {
            rule: "`pollInterval` is positive (`0s` is not)",
            kind: Group,
            operator: Validate(r"^spec\.pollInterval: must be positive$"),
            example: |o| o["spec"]["pollInterval"] = json!("0s"),
            refused: Schema(spec!("/properties/pollInterval/pattern")),
        },
        // Decoding: what the operator's types require.
        Rule {
            rule: "`pollInterval` is a duration (not `fast`, not empty)",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["pollInterval"] = json!(""),
            refused: Schema(spec!("/properties/pollInterval/pattern")),
        },
        Rule {
            rule: "`failoverCooldown` is a duration",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["failoverCooldown"] = json!("fast"),
            refused: Schema(spec!("/properties/failoverCooldown/pattern")),
        },
        Rule {
            rule: "`writeLease.duration` is a duration",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["writeLease"]["duration"] = json!(""),
            refused: Schema(spec!("/properties/writeLease/properties/duration/pattern")),
        },
        Rule {
            rule: "a duration's numbers are below 1000000000",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["failoverCooldown"] = json!("1000000000ms"),
            refused: Schema(spec!("/properties/failoverCooldown/pattern")),
        },
        Rule {
            rule: "a site's `role` is `read-write` or `read-only`",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["sites"][2]["role"] = json!("replica"),
            refused: Schema(spec!("/properties/sites/items/properties/role/enum")),
        },
        Rule {
            rule: "`flavor` is `mariadb` or `mysql`",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["flavor"] = json!("percona"),
            refused: Schema(spec!("/properties/flavor/enum")),
        },
        Rule {
            rule: "`plannedFailover.onCooldown` is `reject` or `defer`",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["plannedFailover"]["onCooldown"] = json!("wait"),
            refused: Schema(spec!(
                "/properties/plannedFailover/properties/onCooldown/enum"
            )),
        },
        Rule {
            rule: "`returningPrimary.onErrant` is `fence` or `rejoin`",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["returningPrimary"]["onErrant"] = json!("discard"),
            refused: Schema(spec!(
                "/properties/returningPrimary/properties/onErrant/enum"
            )),
        },
        Rule {
            rule: "`failureThreshold` fits 32 bits",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["failureThreshold"] = json!(4_294_967_296_u64),
            refused: Schema(spec!("/properties/failureThreshold/maximum")),
        },
        Rule {
            rule: "`dns.ttl` fits 32 bits",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["dns"]["ttl"] = json!(4_294_967_296_u64),
            refused: Schema(spec!("/properties/dns/properties/ttl/maximum")),
        },
        Rule {
            rule: "`maxLagSeconds` is not negative",
            kind: Group,
            operator: Decode,
            example: |o| o["spec"]["maxLagSeconds"] = json!(-1),
            refused: Schema(spec!("/properties/maxLagSeconds/minimum")),
        },
        Rule {
            rule: "`image`, `sites` and `initialActiveSite` are given",
            kind: Group,
            operator: Decode,
            example: |o| {
                o["spec"].as_object_mut().expect("spec").remove("image");
            },
            refused: Schema(spec!("/required")),
        },
        // Refused by the schema, though the operator's own checks let it through.
        Rule {
            rule: "a site name is a DNS label (lowercase letters, digits, `-`)",
            kind: Group,
            operator: Beyond(
                "the API server refuses the StatefulSet, Services and labels named after it",
            ),
            example: |o| o["spec"]["sites"][2]["name"] = json!("Reader"),
            refused: Schema(spec!("/properties/sites/items/properties/name/pattern")),
        },
        Rule {
            rule: "a site name has at most 63 characters",
            kind: Group,
            operator: Beyond("the API server refuses the objects named after it"),
            example: |o| o["spec"]["sites"][2]["name"] = json!("r".repeat(64)),
            refused: Schema(spec!("/properties/sites/items/properties/name/maxLength")),
        },
        Rule {
            rule: "at most 32 sites",
            kind: Group,
            operator: Beyond("any number works; the CEL rules on `spec.sites` need a bound"),
            example: |o| {
                let sites: Vec<Value> = (0..33)
                    .map(|i| json!({"name": format!("s{i}"), "role": "read-write"}))
                    .collect();
                o["spec"]["sites"] = json!(sites);
                o["spec"]["initialActiveSite"] = json!("s0");
            },
            refused: Schema(spec!("/properties/sites/maxItems")),
        },
        Rule {
            rule: "`writeLease.duration` is at least 3ms",
            kind: Group,
            operator: Beyond("the sidecar refuses a shorter lease at start: its pod never runs"),
            example: |o| o["spec"]["writeLease"]["duration"] = json!("2ms"),
            refused: Schema(spec!("/properties/writeLease/properties/duration/pattern")),
        },
        // The annotations: runtime only.
        Rule {
            rule: "`planned-failover` names a read-write site other than the active one",
            kind: Group,
            operator: Runtime("core: the request is `Rejected`, the message says why", None),
            example: |o| annotate(o, names::ANNOTATION_PLANNED_FAILOVER, "reader"),
            refused: RuntimeOnly(ANNOTATIONS),
        },
        Rule {
            rule: "`backup` is a backup name (1 to 63 of `a-z`, `0-9`, `-`)",
            kind: Group,
            operator: Runtime(
                "core (`backup_name_problem`): `lastBackup` is `Failed`, naming the problem",
                Some(|o| backup_name_problem(&annotation(o, names::ANNOTATION_BACKUP)).is_some()),
            ),
            example: |o| annotate(o, names::ANNOTATION_BACKUP, "Nightly_1"),
            refused: RuntimeOnly(ANNOTATIONS),
        },
        Rule {
            rule: "`restore` is a backup name, then `,method=logical` or `,method=physical` or nothing",
            kind: Group,
            operator: Runtime(
                "core (`RestoreSource::parse`, `backup_name_problem`): `restore` is `Failed` in \
                 admission, naming the problem",
                Some(|o| {
                    RestoreSource::parse(&annotation(o, names::ANNOTATION_RESTORE))
                        .map_or(true, |source| backup_name_problem(&source.backup).is_some())
                }),
            ),
            example: |o| annotate(o, names::ANNOTATION_RESTORE, "nightly-1,method=fast"),
            refused: RuntimeOnly(ANNOTATIONS),
        },
        Rule {
            rule: "`rejoin` names a fenced returning primary (a demoted read-write site) holding errant transactions",
            kind: Group,
            operator: Runtime(
                "core: `sites[].rejoin` is `Refused`, the message says why",
                None,
            ),
            example: |o| annotate(o, names::ANNOTATION_REJOIN, "reader"),
            refused: RuntimeOnly(ANNOTATIONS),
        },
        // MysqlDatabase.
        Rule {
            rule: "`database` is not empty",
            kind: Database,
            operator: DatabaseProblem(DatabaseNameProblem::Empty),
            example: |o| o["spec"]["database"] = json!(""),
            refused: Schema(
                "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/database/minLength",
            ),
        },
        Rule {
            rule: "`database` has at most 64 characters",
            kind: Database,
            operator: DatabaseProblem(DatabaseNameProblem::TooLong),
            example: |o| o["spec"]["database"] = json!("d".repeat(65)),
            refused: Schema(
                "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/database/maxLength",
            ),
        },
        Rule {
            rule: "`database` has no NUL",
            kind: Database,
            operator: DatabaseProblem(DatabaseNameProblem::ContainsNul),
            example: |o| o["spec"]["database"] = json!("count\u{0}er"),
            refused: Schema(
                "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/database/pattern",
            ),
        },
        Rule {
            rule: "`failoverGroupRef.name` names a group of the namespace",
            kind: Database,
            operator: Runtime("the operator: nothing is created until that group exists", None),
            example: |o| o["spec"]["failoverGroupRef"]["name"] = json!("no-such-group"),
            refused: RuntimeOnly(
                "another object: a CEL rule of a CRD sees only the object it validates",
            ),
        },
    ]
}

/// The valid group every example breaks: the playground.
fn group() -> Value {
    json!({
        "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlFailoverGroup",
        "metadata": {"name": "playground", "namespace": "bloodraven-playground"},
        "spec": {
            "flavor": "mariadb",
            "image": "mariadb:10.11",
            "sites": [
                {"name": "iad", "role": "read-write", "nodeSelector": {"topology.kubernetes.io/zone": "iad"}},
                {"name": "pdx", "role": "read-write"},
                {"name": "reader", "role": "read-only", "readOnlyMaxLagSeconds": null}
            ],
            "initialActiveSite": "iad",
            "pollInterval": "2s",
            "failureThreshold": 3,
            "maxLagSeconds": 30,
            "failoverCooldown": "30s",
            "plannedFailover": {"onCooldown": "reject"},
            "writeLease": {"duration": "6s"},
            "dns": {"hostname": "playground-db.example.local", "ttl": 10}
        }
    })
}

/// The valid database every example breaks: the counter's.
fn database() -> Value {
    json!({
        "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlDatabase",
        "metadata": {"name": "counter-app", "namespace": "bloodraven-playground"},
        "spec": {
            "failoverGroupRef": {"name": "playground"},
            "database": "counter",
            "deploymentClients": [{"namespace": "bloodraven-playground", "serviceAccount": "deployer"}]
        }
    })
}

/// What the operator's own checks say of a group: `Err` when it does not decode, else the
/// problems of `validate()`.
fn operator_on_group(object: &Value) -> Result<Vec<String>, String> {
    serde_json::from_value::<MysqlFailoverGroup>(object.clone())
        .map(|group| group.spec.validate())
        .map_err(|e| e.to_string())
}

fn database_problem(object: &Value) -> Option<DatabaseNameProblem> {
    let database: MysqlDatabase = serde_json::from_value(object.clone()).expect("decodes");
    EnsureDatabaseRequest {
        group: database.spec.failover_group_ref.name.clone(),
        database: database.spec.database,
    }
    .database_problem()
}

/// Pointers of the keywords that refuse more than the operator ([`Operator::Beyond`]): a
/// violation of one of them may come with another rule's example.
fn beyond_pointers() -> Vec<&'static str> {
    table()
        .iter()
        .filter_map(|row| match (&row.operator, &row.refused) {
            (Operator::Beyond(_), Refused::Schema(at)) => Some(*at),
            _ => None,
        })
        .collect()
}

/// The JSON pointers of the rows whose `validate()` problem matches `problem` (and whether the
/// row is a schema keyword at all).
fn rows_saying(problem: &str) -> Vec<(&'static str, Option<&'static str>)> {
    table()
        .into_iter()
        .filter_map(|row| match (row.operator, row.refused) {
            (Operator::Validate(says), refused) => Regex::new(says)
                .expect("regex")
                .is_match(problem)
                .then_some((
                    row.rule,
                    match refused {
                        Refused::Schema(at) => Some(at),
                        Refused::RuntimeOnly(_) => None,
                    },
                )),
            _ => None,
        })
        .collect()
}

/// `crd` without the keyword at `pointer`; a CEL rule is replaced by `true`, so the other
/// rules keep their pointers.
fn without(crd: &Value, pointer: &str) -> Value {
    let mut crd = crd.clone();
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    match crd.pointer_mut(parent).expect("parent") {
        Value::Object(map) => {
            map.remove(key);
        }
        Value::Array(list) => {
            let index = key.parse::<usize>().expect("an index");
            list[index]["rule"] = json!("true");
        }
        other => panic!("{parent} is {other}"),
    }
    crd
}

#[test]
fn every_rule_is_refused_where_the_table_says() {
    let evaluators = [
        (Kind::Group, Evaluator::new(group_crd()), group()),
        (Kind::Database, Evaluator::new(database_crd()), database()),
    ];
    for (_, evaluator, base) in &evaluators {
        assert_eq!(
            evaluator.check(base),
            Vec::<Violation>::new(),
            "the base is valid"
        );
    }
    assert_eq!(operator_on_group(&group()), Ok(vec![]));
    assert_eq!(database_problem(&database()), None);
    let beyond = beyond_pointers();
    for row in table() {
        let (_, evaluator, base) = evaluators
            .iter()
            .find(|(kind, _, _)| *kind == row.kind)
            .expect("an evaluator");
        let mut object = base.clone();
        (row.example)(&mut object);
        let rule = row.rule;

        // The operator refuses it where the table says. An example may break another rule of
        // `validate()` as a consequence (no site: initialActiveSite names none); each such
        // problem has its own row, whose keyword may refuse it too.
        let mut collateral: Vec<&str> = Vec::new();
        match &row.operator {
            Operator::Validate(_) => {
                let problems = operator_on_group(&object).expect("decodes");
                let mut own = 0;
                for problem in &problems {
                    let rows = rows_saying(problem);
                    assert_eq!(rows.len(), 1, "{rule}: {problem:?} matches {rows:?}");
                    if rows[0].0 == rule {
                        own += 1;
                    } else {
                        collateral.extend(rows[0].1);
                    }
                }
                assert_eq!(own, 1, "{rule}: validate() says {problems:?}");
            }
            Operator::Decode => {
                assert!(operator_on_group(&object).is_err(), "{rule}: decodes");
            }
            Operator::DatabaseProblem(problem) => {
                assert_eq!(database_problem(&object), Some(*problem), "{rule}");
            }
            Operator::Beyond(_) => {
                assert_eq!(operator_on_group(&object), Ok(vec![]), "{rule}");
            }
            Operator::Runtime(_, check) => {
                if row.kind == Kind::Group {
                    assert_eq!(operator_on_group(&object), Ok(vec![]), "{rule}");
                }
                if let Some(check) = check {
                    assert!(check(&object), "{rule}: the runtime check takes it");
                }
            }
        }

        // The API server refuses it at the keyword named, and without that keyword it would
        // not (only the collateral rules' keywords would still refuse it).
        let violations = evaluator.check(&object);
        match row.refused {
            Refused::Schema(at) => {
                assert!(
                    evaluator.crd().pointer(at).is_some(),
                    "{rule}: no {at} in the CRD"
                );
                assert!(
                    violations.iter().any(|v| v.keyword == at),
                    "{rule}: not refused at {at}: {violations:?}"
                );
                let explained = |keyword: &str| {
                    keyword == at || collateral.contains(&keyword) || beyond.contains(&keyword)
                };
                let others: Vec<&Violation> = violations
                    .iter()
                    .filter(|v| !explained(&v.keyword))
                    .collect();
                assert!(others.is_empty(), "{rule}: also refused by {others:?}");
                let lax = Evaluator::new(without(evaluator.crd(), at)).check(&object);
                let rest: Vec<Violation> = violations
                    .iter()
                    .filter(|v| v.keyword != at)
                    .cloned()
                    .collect();
                assert_eq!(lax, rest, "{rule}: without {at}");
            }
            Refused::RuntimeOnly(_) => {
                assert!(
                    violations.is_empty(),
                    "{rule}: the schema refuses it: {violations:?}"
                );
            }
        }
    }
}

/// The CEL rules name the field in the API server's answer (`spec.initialActiveSite`, not
/// `spec`), as `validate()` does.
#[test]
fn cel_refusals_name_the_field() {
    let evaluator = Evaluator::new(group_crd());
    let mut object = group();
    object["spec"]["initialActiveSite"] = json!("reader");
    let violations = evaluator.check(&object);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].field, "spec.initialActiveSite");
    assert_eq!(
        violations[0].message,
        "must be a read-write site, not a read-only one"
    );
}

/// Every problem `validate()` can report has a row: groups built from small pools of sites,
/// names, thresholds and intervals (every combination), and for each one the schema refuses
/// exactly when `validate()` does, at the keywords of the rows its problems match.
#[test]
fn every_problem_validate_reports_is_in_the_table() {
    let rows = table();
    let validate_rows: Vec<(Regex, Option<&str>, &str)> = rows
        .iter()
        .filter_map(|row| match (&row.operator, &row.refused) {
            (Operator::Validate(says), Refused::Schema(at)) => {
                Some((Regex::new(says).expect("regex"), Some(*at), row.rule))
            }
            (Operator::Validate(says), Refused::RuntimeOnly(_)) => {
                Some((Regex::new(says).expect("regex"), None, row.rule))
            }
            _ => None,
        })
        .collect();
    let beyond = beyond_pointers();
    let evaluator = Evaluator::new(group_crd());
    let pool = [
        ("iad", "read-write"),
        ("pdx", "read-write"),
        ("reader", "read-only"),
        ("iad", "read-only"),
        ("", "read-write"),
    ];
    // Every list of 0 to 3 sites from the pool.
    let mut site_lists: Vec<Vec<(&str, &str)>> = vec![vec![]];
    let mut longest: Vec<Vec<(&str, &str)>> = vec![vec![]];
    for _ in 0..3 {
        longest = longest
            .iter()
            .flat_map(|list| {
                pool.iter().map(move |site| {
                    let mut next = list.clone();
                    next.push(*site);
                    next
                })
            })
            .collect();
        site_lists.extend(longest.iter().cloned());
    }
    let mut checked = 0;
    let mut refused = 0;
    for sites in &site_lists {
        for initial in ["iad", "reader", "sea", ""] {
            for threshold in [0, 1, 3] {
                for interval in ["0", "0s", "0h0m0s0ms", "1ms", "2s"] {
                    let mut object = group();
                    object["spec"]["sites"] = sites
                        .iter()
                        .map(|(name, role)| json!({"name": name, "role": role}))
                        .collect();
                    object["spec"]["initialActiveSite"] = json!(initial);
                    object["spec"]["failureThreshold"] = json!(threshold);
                    object["spec"]["pollInterval"] = json!(interval);
                    let problems = operator_on_group(&object).expect("decodes");
                    let violations = evaluator.check(&object);
                    let mut expected: Vec<&str> = Vec::new();
                    for problem in &problems {
                        let matching: Vec<_> = validate_rows
                            .iter()
                            .filter(|(says, _, _)| says.is_match(problem))
                            .collect();
                        assert!(
                            matching.len() == 1,
                            "validate() reports {problem:?}, which {} rows of the table match: \
                             add it to tests/schema/rules.rs and to the docs' table",
                            matching.len()
                        );
                        if let Some(at) = matching[0].1 {
                            expected.push(at);
                        }
                    }
                    let fired: Vec<&str> = violations.iter().map(|v| v.keyword.as_str()).collect();
                    assert_eq!(
                        fired.is_empty(),
                        problems.is_empty(),
                        "{object}: validate() {problems:?}, schema {violations:?}"
                    );
                    for at in &expected {
                        assert!(
                            fired.contains(at),
                            "{object}: not refused at {at}: {violations:?}"
                        );
                    }
                    // With distinct names the keywords are exactly the rows' (and the rules
                    // that refuse more than the operator); `validate()` reads the first of two
                    // sites of one name, the CEL rules every one.
                    let distinct = sites
                        .iter()
                        .enumerate()
                        .all(|(i, (name, _))| sites[..i].iter().all(|(other, _)| other != name));
                    if distinct {
                        let unexplained: Vec<&&str> = fired
                            .iter()
                            .filter(|at| !expected.contains(at) && !beyond.contains(at))
                            .collect();
                        assert!(unexplained.is_empty(), "{object}: {unexplained:?}");
                    }
                    checked += 1;
                    refused += usize::from(!problems.is_empty());
                }
            }
        }
    }
    assert!(
        checked > 9_000 && refused > 0 && refused < checked,
        "{checked} {refused}"
    );
}

/// Every problem `database_problem()` knows has a row (a new variant does not compile here
/// until it has one).
#[test]
fn every_database_problem_is_in_the_table() {
    for problem in [
        DatabaseNameProblem::Empty,
        DatabaseNameProblem::ContainsNul,
        DatabaseNameProblem::TooLong,
    ] {
        match problem {
            DatabaseNameProblem::Empty
            | DatabaseNameProblem::ContainsNul
            | DatabaseNameProblem::TooLong => {}
        }
        assert!(
            table()
                .iter()
                .any(|row| matches!(row.operator, Operator::DatabaseProblem(p) if p == problem)),
            "{problem:?} has no row"
        );
    }
}

/// The docs' table is this table: one line per rule.
#[test]
fn the_docs_carry_the_table() {
    let docs = std::fs::read_to_string(repository().join("docs/design/operator.md"))
        .expect("docs/design/operator.md");
    let lines: Vec<String> = table().iter().map(markdown).collect();
    let missing: Vec<&String> = lines
        .iter()
        .filter(|line| !docs.lines().any(|l| l == line.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/design/operator.md lacks these lines of the table (the whole table, to paste):\n{}\n\nmissing:\n{}",
        lines.join("\n"),
        missing
            .iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn markdown(row: &Rule) -> String {
    let kind = match row.kind {
        Kind::Group => "MysqlFailoverGroup",
        Kind::Database => "MysqlDatabase",
    };
    let operator = match &row.operator {
        Operator::Validate(_) => "`validate()`: `SpecValid=False`".to_owned(),
        Operator::Decode => "decoding: `SpecUndecodable`".to_owned(),
        Operator::DatabaseProblem(_) => "`database_problem()`: not sent".to_owned(),
        Operator::Beyond(text) => format!("not refused; {text}"),
        Operator::Runtime(text, _) => (*text).to_owned(),
    };
    let api = match row.refused {
        Refused::Schema(at) => keyword(at),
        Refused::RuntimeOnly(why) => format!("runtime only: {why}"),
    };
    format!("| {kind} | {} | {operator} | {api} |", row.rule)
}

/// `` `spec.sites[].name` `minLength` `` for a pointer into the CRD.
fn keyword(pointer: &str) -> String {
    let mut rest = pointer.strip_prefix(ROOT).expect("under the root");
    let mut field = String::new();
    let keyword = loop {
        if let Some(after) = rest.strip_prefix("/properties/") {
            let name = after.split('/').next().unwrap_or(after);
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(name);
            rest = &after[name.len()..];
        } else if let Some(after) = rest.strip_prefix("/items") {
            field.push_str("[]");
            rest = after;
        } else if let Some(index) = rest.strip_prefix("/x-kubernetes-validations/") {
            break format!("x-kubernetes-validations[{index}]");
        } else {
            break rest.trim_start_matches('/').to_owned();
        }
    };
    format!("`{field}` `{keyword}`")
}
