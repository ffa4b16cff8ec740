//! `.github/workflows/nightly-conformance.yml` cannot run here (no Docker daemon, no GitHub):
//! this test keeps it honest. It parses the YAML, checks its structure (a schedule, one job on
//! a Linux runner with the kind backend selected, pinned actions, the report uploaded even on
//! failure), and checks that every `run:` command exists here: a recipe of the Justfile (with
//! arguments the harness accepts) or a script of the repository. The recipes it calls run
//! here against localkube (`BLOODRAVEN_CLUSTER=localkube just conformance ...`).

use std::path::{Path, PathBuf};

use serde_yaml::Value;

fn root() -> PathBuf {
    bloodraven_harness::backend::workspace_root()
}

fn workflow() -> Value {
    let path = root().join(".github/workflows/nightly-conformance.yml");
    let text = std::fs::read_to_string(&path).expect("the nightly workflow exists");
    serde_yaml::from_str(&text).expect("the nightly workflow is valid YAML")
}

/// The recipe names of a Justfile: unindented lines `name params...:` (not `set`, comments,
/// or `:=` assignments).
pub(crate) fn justfile_recipes(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| !line.starts_with([' ', '\t', '#', '@']) && !line.trim().is_empty())
        .filter(|line| !line.starts_with("set ") && !line.contains(":="))
        .filter_map(|line| {
            let (head, _) = line.split_once(':')?;
            let name = head.split_whitespace().next()?;
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                .then(|| name.to_owned())
        })
        .collect()
}

/// Why a `run:` command line does not exist here, or `None` when it does.
fn missing_command(line: &str, recipes: &[String], root: &Path) -> Option<String> {
    if line.contains(['|', ';', '&', '$', '`', '>', '<', '(', ')']) {
        return Some(format!(
            "`{line}`: one plain command per line (no shell operators, substitutions or variables), so this check means something"
        ));
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["just", recipe, args @ ..] => {
            if !recipes.iter().any(|known| known == recipe) {
                return Some(format!("`{line}`: the Justfile has no recipe `{recipe}`"));
            }
            if *recipe == "conformance" {
                // The recipe passes its arguments to the harness after `--reuse`.
                let argv = ["bloodraven-harness", "--reuse"]
                    .into_iter()
                    .chain(args.iter().copied());
                if let Err(error) =
                    <bloodraven_harness::runner::cli::Cli as clap::Parser>::try_parse_from(argv)
                {
                    return Some(format!(
                        "`{line}`: the harness refuses its arguments: {error}"
                    ));
                }
            }
            None
        }
        ["just"] => Some(format!("`{line}`: names no recipe")),
        [script, ..] if script.starts_with("./") => {
            let path = root.join(script.trim_start_matches("./"));
            let executable = std::fs::metadata(&path).is_ok_and(|meta| {
                use std::os::unix::fs::PermissionsExt as _;
                meta.is_file() && meta.permissions().mode() & 0o111 != 0
            });
            (!executable).then(|| {
                format!(
                    "`{line}`: no executable {} in the repository",
                    path.display()
                )
            })
        }
        _ => Some(format!(
            "`{line}`: neither a just recipe nor a script of the repository"
        )),
    }
}

fn steps(workflow: &Value) -> &Vec<Value> {
    workflow["jobs"]["conformance"]["steps"]
        .as_sequence()
        .expect("jobs.conformance.steps is a list")
}

#[test]
fn the_workflow_runs_nightly_on_a_linux_runner_with_the_kind_backend() {
    let workflow = workflow();
    assert!(workflow["name"]
        .as_str()
        .is_some_and(|name| !name.is_empty()));
    let on = &workflow["on"];
    let crons: Vec<&str> = on["schedule"]
        .as_sequence()
        .expect("on.schedule")
        .iter()
        .filter_map(|entry| entry["cron"].as_str())
        .collect();
    assert_eq!(crons.len(), 1, "one nightly schedule");
    let fields: Vec<&str> = crons[0].split_whitespace().collect();
    assert_eq!(fields.len(), 5, "a five-field cron: {}", crons[0]);
    let (minute, hour) = (fields[0].parse::<u32>(), fields[1].parse::<u32>());
    assert!(
        minute.is_ok_and(|m| m < 60) && hour.is_ok_and(|h| h < 24),
        "once a day at a fixed time: {}",
        crons[0]
    );
    assert_eq!(&fields[2..], ["*", "*", "*"], "every day: {}", crons[0]);
    assert!(
        on.get("workflow_dispatch").is_some(),
        "can be started by hand"
    );
    let jobs = workflow["jobs"].as_mapping().expect("jobs");
    assert_eq!(jobs.len(), 1, "one job");
    let job = &workflow["jobs"]["conformance"];
    assert!(
        job["runs-on"]
            .as_str()
            .is_some_and(|runner| runner.starts_with("ubuntu-")),
        "a Linux runner with Docker"
    );
    let timeout = job["timeout-minutes"].as_u64().expect("timeout-minutes");
    assert!((30..=360).contains(&timeout), "timeout {timeout} min");
    // The harness's backend comes from BLOODRAVEN_CLUSTER; `kind` must be one it knows.
    let cluster = job["env"]["BLOODRAVEN_CLUSTER"]
        .as_str()
        .expect("BLOODRAVEN_CLUSTER");
    assert_eq!(cluster, "kind");
    <bloodraven_harness::runner::cli::Cli as clap::Parser>::try_parse_from([
        "bloodraven-harness",
        "--cluster",
        cluster,
    ])
    .expect("the harness knows the cluster kind");
    assert!(
        root().join("kind/cluster.yaml").is_file(),
        "the kind cluster config"
    );
    assert_eq!(workflow["permissions"]["contents"].as_str(), Some("read"));
}

#[test]
fn every_step_is_a_pinned_action_or_a_command_that_exists_here() {
    let workflow = workflow();
    let justfile = std::fs::read_to_string(root().join("Justfile")).expect("Justfile");
    let recipes = justfile_recipes(&justfile);
    assert!(recipes.contains(&"conformance".to_owned()), "{recipes:?}");
    let mut problems = Vec::new();
    let mut commands = Vec::new();
    for (index, step) in steps(&workflow).iter().enumerate() {
        match (step.get("uses"), step.get("run")) {
            (Some(uses), None) => {
                let uses = uses.as_str().unwrap_or_default();
                let pinned = uses.split_once('@').is_some_and(|(action, version)| {
                    action.contains('/')
                        && (version.starts_with('v')
                            && version[1..].starts_with(|c: char| c.is_ascii_digit())
                            || version.len() == 40
                                && version.chars().all(|c| c.is_ascii_hexdigit()))
                });
                if !pinned {
                    problems.push(format!("step {index}: `{uses}` is not pinned to a version"));
                }
            }
            (None, Some(run)) => {
                for line in run.as_str().unwrap_or_default().lines() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    commands.push(line.to_owned());
                    if let Some(problem) = missing_command(line, &recipes, &root()) {
                        problems.push(format!("step {index}: {problem}"));
                    }
                }
            }
            _ => problems.push(format!(
                "step {index}: needs exactly one of `uses` and `run`"
            )),
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        commands
            .iter()
            .any(|command| command.starts_with("just conformance")),
        "the workflow runs the catalogue: {commands:?}"
    );
    let first = steps(&workflow)[0]["uses"].as_str().unwrap_or_default();
    assert!(first.starts_with("actions/checkout@"), "checks out first");
    // kind is installed but not started: the harness creates the cluster itself.
    let kind = steps(&workflow)
        .iter()
        .find(|step| {
            step["uses"]
                .as_str()
                .is_some_and(|uses| uses.starts_with("helm/kind-action@"))
        })
        .expect("installs kind");
    assert_eq!(kind["with"]["install_only"].as_bool(), Some(true));
}

#[test]
fn the_report_is_uploaded_even_when_a_scenario_failed() {
    let workflow = workflow();
    let upload = steps(&workflow)
        .iter()
        .find(|step| {
            step["uses"]
                .as_str()
                .is_some_and(|uses| uses.starts_with("actions/upload-artifact@"))
        })
        .expect("an upload-artifact step");
    assert_eq!(upload["if"].as_str(), Some("always()"));
    assert_eq!(upload["with"]["path"].as_str(), Some("reports/"));
    let position = |predicate: &dyn Fn(&Value) -> bool| {
        steps(&workflow).iter().position(predicate).expect("step")
    };
    let conformance = position(&|step| {
        step["run"]
            .as_str()
            .is_some_and(|run| run.contains("just conformance"))
    });
    let uploaded = position(&|step| step == upload);
    assert!(uploaded > conformance, "the upload comes after the run");
}

#[test]
fn the_command_check_itself_refuses_what_does_not_exist() {
    let recipes = vec!["conformance".to_owned(), "test".to_owned()];
    let root = root();
    assert_eq!(
        missing_command("just conformance --repeat 2", &recipes, &root),
        None
    );
    assert_eq!(missing_command("./setup", &recipes, &root), None);
    for bad in [
        "just nightly",
        "just conformance --no-such-flag",
        "just conformance --repeat 0",
        "./no-such-script",
        "./README.md",
        "kind create cluster",
        "just conformance | tee log",
        "echo $HOME",
    ] {
        assert!(
            missing_command(bad, &recipes, &root).is_some(),
            "`{bad}` should be refused"
        );
    }
    assert_eq!(
        justfile_recipes(
            "set shell := [\"bash\"]\n# c\ntest:\n    x\nsim seeds=\"0..1\" *flags=\"\":\n"
        ),
        ["test", "sim"]
    );
}
