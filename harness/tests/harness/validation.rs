//! Validation errors, one test per error class (docs/design/harness.md#scenario-files:
//! validated, with errors that name the file, line and field).

use std::path::Path;

use bloodraven_harness::scenario::validate::{duplicate_ids, load_catalogue, parse_scenario};
use bloodraven_harness::{Error, ScenarioError};

const HEADER: &str =
    "id: 38\ntitle: t\nseed: \"000_5253a91c46febfcf.txt: Chaos scenario 38\"\ninstall: {deployApi: true}\nsteps:\n";

fn errors_of(file: &str, source: &str) -> Vec<ScenarioError> {
    match parse_scenario(Path::new(file), source) {
        Ok(_) => panic!("{file} should be invalid:\n{source}"),
        Err(errors) => errors,
    }
}

fn single_error(steps: &str) -> ScenarioError {
    let source = format!("{HEADER}{steps}");
    let mut errors = errors_of("scenarios/038-x.yaml", &source);
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors.remove(0)
}

#[test]
fn valid_minimal_scenario_parses() {
    let source = format!("{HEADER}- sleep: 1s\n");
    let loaded = parse_scenario(Path::new("scenarios/038-x.yaml"), &source).expect("valid");
    assert_eq!(loaded.trial_name(), "s038_x");
}

#[test]
fn unknown_step_kind_names_line_and_kinds() {
    let error = single_error("- sleep: 1s\n- explode: {site: iad}\n");
    assert_eq!(error.line, Some(7), "{error}");
    assert_eq!(error.field, "steps[1]");
    assert!(
        error.message.contains("unknown variant `explode`") && error.message.contains("expect"),
        "{error}"
    );
    assert!(
        error.to_string().starts_with("scenarios/038-x.yaml:7:"),
        "{error}"
    );
}

#[test]
fn unknown_fault_kind_and_unknown_field() {
    let error = single_error("- fault: {melt: {site: iad}}\n");
    assert_eq!(error.line, Some(6));
    assert!(error.message.contains("unknown variant `melt`"), "{error}");
    let error =
        single_error("- sleep: 1s\n- expect: {within: 5s, withn: 5s, group: {activeSite: pdx}}\n");
    assert_eq!(error.line, Some(7));
    assert_eq!(error.field, "steps[1].expect");
    assert!(error.message.contains("unknown field `withn`"), "{error}");
    let error = single_error("- fault: {kill: {site: iad, container: mysql, signal: 9}}\n");
    assert!(error.message.contains("unknown field `signal`"), "{error}");
}

// The sidecar has no API access: denying it verbs is no fault at all, and is refused rather
// than silently applied to the operator.
#[test]
fn deny_rbac_has_no_sidecar_subject() {
    let error =
        single_error("- fault: {deny-rbac: {subject: sidecar, resource: pods, verbs: [get]}}\n");
    assert!(
        error.message.contains("unknown variant `sidecar`"),
        "{error}"
    );
}

#[test]
fn bad_durations_are_located() {
    let error = single_error(
        "- sleep: 1s\n- sleep: 1s\n- expect: {within: 20, group: {activeSite: pdx}}\n",
    );
    assert_eq!(error.line, Some(8));
    assert_eq!(error.field, "steps[2].expect.within");
    assert!(error.message.contains("no unit"), "{error}");
    let error = single_error("- sleep: 5 minutes\n");
    assert!(error.message.contains("invalid duration"), "{error}");
}

#[test]
fn unknown_sites_are_located() {
    let error = single_error("- fault: {kill: {site: sfo, container: mysql}}\n");
    assert_eq!(error.line, Some(6));
    assert!(
        error.message.contains("unknown variant `sfo`") && error.message.contains("`iad`"),
        "{error}"
    );
    let error = single_error("- expect: {within: 5s, dns: {target: site-of sfo}}\n");
    assert!(error.message.contains("unknown site `sfo`"), "{error}");
    let error =
        single_error("- expect: {within: 5s, endpoints: {service: primary, sites: [iad, lax]}}\n");
    assert!(error.message.contains("unknown variant `lax`"), "{error}");
}

#[test]
fn id_must_match_the_file_name() {
    let errors = errors_of("scenarios/039-x.yaml", &format!("{HEADER}- sleep: 1s\n"));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, Some(1));
    assert_eq!(errors[0].field, "id");
    assert!(
        errors[0]
            .message
            .contains("id 38 does not match the file name's 039"),
        "{}",
        errors[0]
    );
    let errors = errors_of("scenarios/38_x.yaml", &format!("{HEADER}- sleep: 1s\n"));
    assert!(errors[0].message.contains("NNN-slug.yaml"), "{}", errors[0]);
}

#[test]
fn duplicate_ids_across_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = "title: t\nseed: \"harness.md: Catalogue\"\nsteps:\n- sleep: 1s\n";
    std::fs::write(dir.path().join("007-a.yaml"), format!("id: 7\n{body}")).expect("write");
    std::fs::write(dir.path().join("007-b.yaml"), format!("id: 7\n{body}")).expect("write");
    let Err(Error::Scenarios(errors)) = load_catalogue(dir.path()) else {
        panic!("duplicate ids must fail")
    };
    assert_eq!(errors.len(), 1);
    assert!(errors[0].file.ends_with("007-b.yaml"));
    assert_eq!(errors[0].line, Some(1));
    assert!(
        errors[0].message.contains("duplicate id 7") && errors[0].message.contains("007-a.yaml"),
        "{}",
        errors[0]
    );
    assert!(duplicate_ids(&[]).is_empty());
}

// Issue 37: faults and actions are separate step kinds; the wrong one says which to write.
#[test]
fn an_action_written_as_a_fault_names_the_step_to_use() {
    let error = single_error(
        "- sleep: 1s\n- fault: {annotate: {key: bloodraven.shipstream.io/planned-failover, value: pdx}}\n",
    );
    assert_eq!(
        (error.line, error.field.as_str()),
        (Some(7), "steps[1].fault")
    );
    assert_eq!(
        error.message,
        "annotate is an action: write it as `do: {annotate: ...}`"
    );
    let error = single_error("- do: {kill: {site: iad, container: mysql}}\n");
    assert_eq!(error.field, "steps[0].do");
    assert_eq!(
        error.message,
        "kill is a fault: write it as `fault: {kill: ...}`"
    );
    let error = single_error("- do: stop-external-dns\n");
    assert!(
        error.message.contains("stop-external-dns is a fault"),
        "{error}"
    );
    let error = single_error("- do: {melt: {site: iad}}\n");
    assert!(error.message.contains("unknown variant `melt`"), "{error}");
}

#[test]
fn expect_needs_one_mode_and_one_target() {
    let error =
        single_error("- sleep: 1s\n- expect: {within: 5s, for: 5s, group: {activeSite: pdx}}\n");
    assert_eq!(
        (error.line, error.field.as_str()),
        (Some(7), "steps[1].expect")
    );
    assert!(error.message.contains("both `within` and `for`"), "{error}");
    let error = single_error("- expect: {group: {activeSite: pdx}}\n");
    assert!(error.message.contains("needs `within`"), "{error}");
    let error = single_error("- expect: {within: 5s}\n");
    assert!(error.message.contains("names no target"), "{error}");
    let error = single_error(
        "- expect: {within: 5s, group: {activeSite: pdx}, dns: {target: site-of pdx}}\n",
    );
    assert!(
        error.message.contains("names 2 targets (group, dns)"),
        "{error}"
    );
}

#[test]
fn group_fields_and_operators_are_checked() {
    let error = single_error("- expect: {within: 5s, group: {activSite: pdx}}\n");
    assert!(
        error.message.contains("unknown status field `activSite`"),
        "{error}"
    );
    let error = single_error("- expect: {within: 5s, group: {topologyGeneration: {$bigger: 1}}}\n");
    assert!(
        error.message.contains("unknown operator `$bigger`"),
        "{error}"
    );
}

#[test]
fn heal_needs_an_injected_healable_fault() {
    let error = single_error("- heal: all\n");
    assert!(error.message.contains("no fault in effect"), "{error}");
    let error = single_error("- fault: {deny-rbac: {subject: operator, resource: dnsendpoints, verbs: [patch]}}\n- heal: partition\n");
    assert_eq!(
        (error.line, error.field.as_str()),
        (Some(7), "steps[1].heal")
    );
    assert!(
        error.message.contains("no `partition` fault is in effect"),
        "{error}"
    );
    let error = single_error("- heal: annotate\n");
    assert!(
        error.message.contains("unknown heal target `annotate`"),
        "{error}"
    );
    let error = single_error("- fault: {kill: {site: iad, container: mysql}}\n- heal: kill\n");
    assert!(
        error.message.contains("no `kill` fault is in effect"),
        "a restarting kill is not healable: {error}"
    );
    let error = single_error("- fault: {thaw: {site: iad, container: mysql}}\n");
    assert!(
        error.message.contains("which no earlier step froze"),
        "{error}"
    );
    let source = format!(
        "{}requires: [stop-node]\nsteps:\n- fault: {{start-node: {{site: pdx}}}}\n",
        HEADER.trim_end_matches("steps:\n")
    );
    let mut errors = errors_of("scenarios/038-x.yaml", &source);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let error = errors.remove(0);
    assert!(
        error.message.contains("which no earlier step stopped"),
        "{error}"
    );
}

#[test]
fn deploy_api_variables_must_be_saved_first() {
    let request = "request: {method: PUT, path: /deploy/v1/groups/playground/leases, client: {namespace: n, serviceAccount: a}, body: {token: \"${tok}\"}}";
    let error = single_error(&format!(
        "- expect: {{within: 5s, deploy-api: {{{request}, status: 200}}}}\n"
    ));
    assert!(
        error
            .message
            .contains("uses `${tok}`, which no earlier step saved"),
        "{error}"
    );
    let save = "request: {method: POST, path: /deploy/v1/groups/playground/leases, client: {namespace: n, serviceAccount: a}}, status: 201, save: {tok: token}";
    let source = format!(
        "{HEADER}- expect: {{within: 5s, deploy-api: {{{save}}}}}\n- expect: {{within: 5s, deploy-api: {{{request}, status: 200}}}}\n"
    );
    assert!(parse_scenario(Path::new("scenarios/038-x.yaml"), &source).is_ok());
}

#[test]
fn one_key_per_step_and_apply_needs_one_source() {
    let error = single_error("- sleep: 1s\n  heal: all\n");
    assert!(
        error.message.contains("found `sleep` and `heal`"),
        "{error}"
    );
    let error = single_error("- apply: {}\n");
    assert!(error.message.contains("needs `fixture`"), "{error}");
    let error = single_error("- apply: {fixture: ../etc/passwd.yaml}\n");
    assert!(error.message.contains("under fixtures/"), "{error}");
    let error = single_error("- apply: {object: {apiVersion: v1, kind: Pod}}\n");
    assert!(error.message.contains("metadata.name"), "{error}");
}

#[test]
fn seed_must_cite_a_known_source() {
    let source = "id: 38\ntitle: t\nseed: \"somewhere.txt: page 3\"\nsteps:\n- sleep: 1s\n";
    let errors = errors_of("scenarios/038-x.yaml", source);
    assert_eq!(
        (errors[0].line, errors[0].field.as_str()),
        (Some(3), "seed")
    );
    assert!(
        errors[0].message.contains("unknown source `somewhere.txt`"),
        "{}",
        errors[0]
    );
}

#[test]
fn several_errors_in_one_file_are_all_reported() {
    // (An expect naming no target is a shape error now, refused while parsing like an unknown
    // field: `expect_needs_one_mode_and_one_target`; one without `within` or `for` is a rule.)
    let source = "id: 40\ntitle: \"\"\nseed: \"harness.md: x\"\nsteps:\n- heal: all\n- expect: {group: {activeSite: pdx}}\n";
    let errors = errors_of("scenarios/038-x.yaml", source);
    let fields: Vec<&str> = errors.iter().map(|error| error.field.as_str()).collect();
    assert_eq!(
        fields,
        ["id", "title", "steps[0].heal", "steps[1].expect"],
        "{errors:?}"
    );
}

// docs/design/requirements.md R003.2: the deploy API is off by default
// (auxiliary.deployAPI.enabled).
#[test]
fn deploy_api_needs_it_installed_and_followers_need_replicas() {
    let request = "request: {method: GET, path: /deploy/v1/groups/playground, client: {namespace: n, serviceAccount: a}}";
    let source = format!("id: 38\ntitle: t\nseed: \"harness.md: x\"\nsteps:\n- expect: {{within: 5s, deploy-api: {{{request}, status: 200}}}}\n");
    let errors = errors_of("scenarios/038-x.yaml", &source);
    assert!(
        errors[0]
            .message
            .contains("needs `install: {deployApi: true}`"),
        "{}",
        errors[0]
    );
    let follower = "request: {method: GET, path: /deploy/v1/groups/playground, client: {namespace: n, serviceAccount: a}, replica: follower}";
    let error = single_error(&format!(
        "- expect: {{within: 5s, deploy-api: {{{follower}, status: 503}}}}\n"
    ));
    assert!(
        error.message.contains("install.replicaCount is below 2"),
        "{error}"
    );
}

#[test]
fn a_fault_that_needs_a_capability_must_declare_it() {
    let error = single_error("- fault: {clock-offset: {site: iad, offset: \"+20s\"}}\n");
    assert_eq!(error.line, Some(6), "{error:?}");
    assert!(
        error
            .message
            .contains("needs the capability `clock-offset`")
            && error.message.contains("requires: [clock-offset]"),
        "{error:?}"
    );
    let declared = format!(
        "{}requires: [clock-offset]\nsteps:\n- fault: {{clock-offset: {{site: iad, offset: \"+20s\"}}}}\n",
        HEADER.trim_end_matches("steps:\n")
    );
    let loaded = parse_scenario(Path::new("scenarios/038-x.yaml"), &declared).expect("valid");
    assert_eq!(
        loaded.scenario.requires,
        [bloodraven_harness::scenario::model::Capability::ClockOffset]
    );
}

#[test]
fn a_declared_capability_no_step_needs_is_refused() {
    let source = format!(
        "{}requires: [clock-offset]\nsteps:\n- sleep: 1s\n",
        HEADER.trim_end_matches("steps:\n")
    );
    let errors = errors_of("scenarios/038-x.yaml", &source);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field, "requires");
    assert_eq!(errors[0].line, Some(5));
    assert!(errors[0].message.contains("no step needs it"), "{errors:?}");
    let unknown = format!(
        "{}requires: [time-travel]\nsteps:\n- sleep: 1s\n",
        HEADER.trim_end_matches("steps:\n")
    );
    let errors = errors_of("scenarios/038-x.yaml", &unknown);
    assert!(errors[0].message.contains("time-travel"), "{errors:?}");
}

// docs/scenarios.md, `archive`: a read-write site, `within` only, and `holds` said.
#[test]
fn archive_expectations_name_a_read_write_site_and_what_it_holds() {
    let error =
        single_error("- expect: {within: 30s, archive: {site: reader, holds: lost-writes}}\n");
    assert_eq!(error.field, "steps[0].expect");
    assert!(
        error.message.contains("reader is read-only") && error.message.contains("name iad or pdx"),
        "{error}"
    );
    let error = single_error("- expect: {for: 30s, archive: {site: iad, holds: lost-writes}}\n");
    assert!(error.message.contains("archive: needs `within`"), "{error}");
    let error = single_error("- expect: {within: 30s, archive: {site: iad}}\n");
    assert!(error.message.contains("missing field `holds`"), "{error}");
    let error = single_error("- expect: {within: 30s, archive: {site: iad, holds: everything}}\n");
    assert!(
        error.message.contains("unknown variant `everything`")
            && error.message.contains("lost-writes"),
        "{error}"
    );
    let source =
        format!("{HEADER}- expect: {{within: 30s, archive: {{site: pdx, holds: lost-writes}}}}\n");
    assert!(parse_scenario(Path::new("scenarios/038-x.yaml"), &source).is_ok());
}
