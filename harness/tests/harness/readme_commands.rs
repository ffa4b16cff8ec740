//! Every command the READMEs show names things that exist, as written: a `just` recipe of the
//! Justfile (the harness's own flags parsed by its real parser), a workspace package and its
//! binary or test target for `cargo`, a script of the repository. A README once said
//! `cargo run -p localkube -- up`, which cargo refuses since the package has several
//! binaries. The cheap commands also run as written in CI (`.ci/readme-commands`); this test
//! keeps the rest from drifting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser as _;

fn root() -> PathBuf {
    bloodraven_harness::backend::workspace_root()
}

/// The READMEs a newcomer reads, relative to the root.
const READMES: [&str; 9] = [
    "README.md",
    "harness/README.md",
    "localkube/README.md",
    "kind/README.md",
    "operator/controller/README.md",
    "operator/mysql/README.md",
    "operator/sim/README.md",
    "docs/measurements.md",
    "docs/known-issues.md",
];

/// The commands of a Markdown text: each line of a ```sh/```bash/```console block (comments
/// and `$ ` prompts stripped), and each inline code span that starts with `just `, `cargo ` or
/// `./`. A line `a && b` is two commands. Returns (line number, command).
pub fn commands_in(markdown: &str) -> Vec<(usize, String)> {
    let mut commands = Vec::new();
    let mut in_shell = false;
    let mut in_other = false;
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            if in_shell || in_other {
                in_shell = false;
                in_other = false;
            } else if matches!(info.trim(), "sh" | "bash" | "console" | "shell") {
                in_shell = true;
            } else {
                in_other = true;
            }
            continue;
        }
        if in_other {
            continue;
        }
        if in_shell {
            let text = line.split(" #").next().unwrap_or_default().trim();
            let text = text.strip_prefix("$ ").unwrap_or(text);
            if !text.is_empty() && !text.starts_with('#') {
                for part in text.split("&&").flat_map(|part| part.split(';')) {
                    commands.push((number, part.trim().to_owned()));
                }
            }
            continue;
        }
        for span in line.split('`').skip(1).step_by(2) {
            if span.starts_with("just ") || span.starts_with("cargo ") || span.starts_with("./") {
                for part in span.split("&&").flat_map(|part| part.split(';')) {
                    commands.push((number, part.trim().to_owned()));
                }
            }
        }
    }
    commands
}

/// A workspace package's targets, (kind, name), and its `default-run` binary (as a target
/// of kind `default-run`).
type Targets = BTreeMap<String, Vec<(String, String)>>;

fn workspace_targets() -> Targets {
    let output = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed");
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON");
    let mut packages = Targets::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default().to_owned();
        let default_run = package["default_run"]
            .as_str()
            .map(|bin| ("default-run".to_owned(), bin.to_owned()));
        let targets = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|target| {
                let name = target["name"].as_str().unwrap_or_default().to_owned();
                target["kind"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(serde_json::Value::as_str)
                    .map(move |kind| (kind.to_owned(), name.clone()))
                    .collect::<Vec<_>>()
            })
            .chain(default_run)
            .collect();
        packages.insert(name, targets);
    }
    packages
}

/// The value after `flag` in `words`.
fn flag_value<'a>(words: &[&'a str], flag: &str) -> Option<&'a str> {
    words
        .iter()
        .position(|word| *word == flag)
        .and_then(|index| words.get(index + 1).copied())
}

/// Why `command` does not exist as written, or `None`.
pub fn problem(
    command: &str,
    recipes: &[String],
    targets: &Targets,
    root: &Path,
) -> Option<String> {
    // Leading environment assignments (`BLOODRAVEN_CLUSTER=kubeconfig just chaos 1`).
    let words: Vec<&str> = command
        .split_whitespace()
        .skip_while(|word| word.contains('=') && !word.starts_with('-'))
        .collect();
    match words.as_slice() {
        ["just", recipe, rest @ ..] => {
            if !recipes.iter().any(|known| known == recipe) {
                return Some(format!("the Justfile has no recipe `{recipe}`"));
            }
            // `just upgrade` passes its flags to bloodraven-upgrade: parse them with its parser
            // (a bare mention of the recipe names no flags).
            if *recipe == "upgrade" && !rest.is_empty() {
                let args: Vec<&str> = std::iter::once("bloodraven-upgrade")
                    .chain(without_optional(rest))
                    .map(placeholder)
                    .collect();
                return bloodraven_harness::upgrade::cli::UpgradeCli::try_parse_from(&args)
                    .err()
                    .map(|error| format!("bloodraven-upgrade refuses {args:?}: {}", error.kind()));
            }
            // The harness's recipes pass their flags to it: parse them with its parser.
            let harness_args: Option<Vec<&str>> = match *recipe {
                "chaos" => rest
                    .first()
                    .map(|id| [&["--ids", id][..], &rest[1..]].concat()),
                "conformance" => Some([&["--reuse"][..], rest].concat()),
                _ => None,
            };
            let args = harness_args?;
            let args: Vec<String> = std::iter::once("bloodraven-harness")
                .chain(args.iter().copied())
                .filter(|word| !word.starts_with('['))
                .map(|word| placeholder(word).to_owned())
                .collect();
            bloodraven_harness::runner::cli::Cli::try_parse_from(&args)
                .err()
                .map(|error| format!("the harness refuses {args:?}: {}", error.kind()))
        }
        ["cargo", verb @ ("run" | "build" | "test" | "nextest"), rest @ ..] => {
            let is_nextest = *verb == "nextest";
            let before_args: Vec<&str> = rest.iter().take_while(|w| **w != "--").copied().collect();
            let package = flag_value(&before_args, "-p")?;
            let Some(package_targets) = targets.get(package) else {
                return Some(format!("no workspace package `{package}`"));
            };
            let bins: Vec<&str> = package_targets
                .iter()
                .filter(|(kind, _)| kind == "bin")
                .map(|(_, name)| name.as_str())
                .collect();
            if let Some(bin) = flag_value(&before_args, "--bin") {
                if !bins.contains(&bin) {
                    return Some(format!(
                        "package `{package}` has no binary `{bin}` ({bins:?})"
                    ));
                }
            } else if *verb == "run"
                && !is_nextest
                && bins.len() != 1
                && !package_targets
                    .iter()
                    .any(|(kind, _)| kind == "default-run")
            {
                return Some(format!(
                    "`cargo run -p {package}` without --bin: the package has binaries {bins:?}"
                ));
            }
            if let Some(test) = flag_value(&before_args, "--test") {
                if !package_targets
                    .iter()
                    .any(|(kind, name)| kind == "test" && name == test)
                {
                    return Some(format!("package `{package}` has no test target `{test}`"));
                }
            }
            // The harness's own flags, parsed as it parses them.
            if package == "bloodraven-harness"
                && *verb == "run"
                && flag_value(&before_args, "--bin").is_none()
            {
                let args: Vec<&str> = std::iter::once("bloodraven-harness")
                    .chain(rest.iter().skip_while(|w| **w != "--").skip(1).copied())
                    .collect();
                if let Err(error) = bloodraven_harness::runner::cli::Cli::try_parse_from(&args) {
                    return Some(format!("the harness refuses {args:?}: {}", error.kind()));
                }
            }
            None
        }
        [script, ..] if script.starts_with("./") => {
            let path = root.join(script.trim_start_matches("./"));
            (!path.is_file()).then(|| format!("no script {}", path.display()))
        }
        _ => None,
    }
}

/// A placeholder of a README (`N`) as an example value (`[flags]` and the like are left out).
fn placeholder(word: &str) -> &str {
    match word {
        "N" => "38",
        _ => word,
    }
}

/// The words of a command without its optional parts (`[--to REF]`, `[flags]`).
fn without_optional<'a>(words: &[&'a str]) -> Vec<&'a str> {
    let mut kept = Vec::new();
    let mut optional = false;
    for word in words {
        if word.starts_with('[') {
            optional = true;
        }
        if !optional {
            kept.push(*word);
        }
        if word.ends_with(']') {
            optional = false;
        }
    }
    kept
}

#[test]
fn the_commands_are_found_in_readmes_blocks_and_code_spans() {
    let text = "Run `just chaos 38` or `cargo build -p x && cargo run -p x --bin y`.\n\n```sh\n$ ./setup && just test   # all\n# a comment\n```\n\n```\njust not-a-command\n```\n";
    let commands: Vec<String> = commands_in(text).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        commands,
        [
            "just chaos 38",
            "cargo build -p x",
            "cargo run -p x --bin y",
            "./setup",
            "just test"
        ]
    );
}

#[test]
fn every_readme_command_names_what_exists() {
    let root = root();
    let justfile = std::fs::read_to_string(root.join("Justfile")).expect("Justfile");
    let recipes = crate::nightly_workflow::justfile_recipes(&justfile);
    let targets = workspace_targets();
    // The broken command of the issue that added this test is caught.
    assert!(problem(
        "cargo run -p localkube -- up --state-dir DIR",
        &recipes,
        &targets,
        &root
    )
    .is_some_and(|why| why.contains("without --bin")));
    assert!(problem("just chaos 38 --no-such-flag", &recipes, &targets, &root).is_some());
    // `just upgrade`'s flags are bloodraven-upgrade's, optional parts left out.
    assert_eq!(
        problem(
            "just upgrade --from REF [--to REF] [--smoke 20,22]",
            &recipes,
            &targets,
            &root
        ),
        None
    );
    assert!(problem(
        "just upgrade --from-image a:1 --to REF",
        &recipes,
        &targets,
        &root
    )
    .is_some());
    let mut problems = Vec::new();
    let mut checked = 0;
    for readme in READMES {
        let text = std::fs::read_to_string(root.join(readme)).expect(readme);
        for (line, command) in commands_in(&text) {
            checked += 1;
            if let Some(why) = problem(&command, &recipes, &targets, &root) {
                problems.push(format!("{readme}:{line}: `{command}`: {why}"));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} commands found: the extraction broke"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// `.ci/readme-commands` runs README commands "as written": each of its `readme '...'` lines
// must be a command a README shows, word for word.
#[test]
fn ci_runs_the_readme_commands_as_they_are_written() {
    let root = root();
    let script = std::fs::read_to_string(root.join(".ci/readme-commands")).expect("script");
    let shown: Vec<String> = READMES
        .iter()
        .flat_map(|readme| {
            let text = std::fs::read_to_string(root.join(readme)).expect(readme);
            let mut lines: Vec<String> = commands_in(&text).into_iter().map(|(_, c)| c).collect();
            // A line `a && b` is also shown whole.
            lines.extend(text.lines().map(|line| {
                line.split(" #")
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned()
            }));
            lines.extend(text.split('`').skip(1).step_by(2).map(str::to_owned));
            lines
        })
        .collect();
    let run: Vec<&str> = script
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("readme '"))
        .filter_map(|rest| rest.split('\'').next())
        .collect();
    assert!(
        run.len() >= 8,
        "only {} README commands run: {run:?}",
        run.len()
    );
    let missing: Vec<&&str> = run
        .iter()
        .filter(|command| !shown.iter().any(|line| line == *command))
        .collect();
    assert!(
        missing.is_empty(),
        "run by CI but shown in no README: {missing:?}"
    );
}
