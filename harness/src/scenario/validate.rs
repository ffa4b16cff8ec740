//! Loading and validating scenario files: one file, or the whole catalogue directory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::model::{
    Action, Apply, Expect, Fault, HealTarget, OperatorPod, Partition, Scenario, Step,
};
use super::span::with_timing;
use super::timing::{merged_spec, with_profile, Timing};
use crate::error::{Error, Result, ScenarioError};
use crate::targets::Validation;

/// The source documents a scenario's `seed` may cite, by their original file names: the
/// requirement sets of docs/design/requirements.md and the design files that
/// docs/design/README.md maps ("Old citations").
pub const KNOWN_SOURCES: [&str; 9] = [
    "000_5253a91c46febfcf.txt",
    "001_9b9f38f8f4998df6.txt",
    "003_211f7bbe11e78c86.txt",
    "004_ecf6a3e2c67b2117.txt",
    "ARCHITECTURE.md",
    "bloodraven.md",
    "harness.md",
    "localkube.md",
    "STYLE.md",
];

/// Scenario files longer than this are refused before parsing (a bound, TIGER_STYLE).
pub const SCENARIO_BYTES_MAX: u64 = 256 * 1024;

/// A validated scenario with the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedScenario {
    /// The file.
    pub path: PathBuf,
    /// The `slug` of `NNN-slug.yaml`.
    pub slug: String,
    /// The scenario (its `install.groupSpec` with the run's profile merged underneath, its
    /// timing expressions resolved).
    pub scenario: Scenario,
    /// The timing of the group this scenario installs, which its expressions resolved
    /// against.
    pub timing: Timing,
}

impl LoadedScenario {
    /// The libtest-mimic trial name: `s038_dns_write_denied` for `038-dns-write-denied.yaml`.
    pub fn trial_name(&self) -> String {
        format!("s{:03}_{}", self.scenario.id, self.slug.replace('-', "_"))
    }
}

/// Splits `NNN-slug.yaml` into its id and slug.
pub fn split_file_name(path: &Path) -> Result<(u16, String), String> {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    let Some(stem) = name.strip_suffix(".yaml") else {
        return Err(format!("file name `{name}` must end in .yaml"));
    };
    let (number, slug) = stem.split_once('-').unwrap_or((stem, ""));
    let number_ok = number.len() == 3 && number.bytes().all(|byte| byte.is_ascii_digit());
    let slug_ok = !slug.is_empty()
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && !slug.contains("--")
        && slug
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    if !number_ok || !slug_ok {
        return Err(format!(
            "file name `{name}` must be NNN-slug.yaml (three digits, lowercase kebab-case slug)"
        ));
    }
    let id = number
        .parse()
        .map_err(|_| format!("file name `{name}` has a bad number"))?;
    Ok((id, slug.to_owned()))
}

/// Parses and validates one scenario file's text. `path` is used for messages and for the
/// file-name rules.
pub fn parse_scenario(path: &Path, source: &str) -> Result<LoadedScenario, Vec<ScenarioError>> {
    parse_scenario_with(path, source, &no_profile())
}

/// The playground profile's patch: nothing.
fn no_profile() -> Value {
    Value::Object(serde_json::Map::new())
}

/// [`parse_scenario`] under a run's `--profile` (its merge patch, [`super::timing::Profile::patch`]): the
/// profile's fields go under the scenario's own `install.groupSpec`, and the scenario's
/// timing expressions resolve against the group spec that results.
pub fn parse_scenario_with(
    path: &Path,
    source: &str,
    profile_patch: &Value,
) -> Result<LoadedScenario, Vec<ScenarioError>> {
    let file = ScenarioFile { path, source };
    let (scenario, timing) = read_scenario(&file, profile_patch)?;
    let mut errors = Vec::new();
    let slug = check_file_name(&file, &scenario, &mut errors);
    check_header(&file, &scenario, &mut errors);
    check_requires(&file, &scenario, &mut errors);
    check_steps(&file, &scenario, &mut errors);
    if errors.is_empty() {
        Ok(LoadedScenario {
            path: path.to_path_buf(),
            slug,
            scenario,
            timing,
        })
    } else {
        Err(errors)
    }
}

/// A scenario file being validated: its path and text, for errors that name a line.
struct ScenarioFile<'a> {
    path: &'a Path,
    source: &'a str,
}

impl ScenarioFile<'_> {
    fn error(&self, line: Option<usize>, field: &str, message: String) -> ScenarioError {
        ScenarioError {
            file: self.path.to_path_buf(),
            line,
            column: None,
            field: field.to_owned(),
            message,
        }
    }

    /// An error at a top-level key's line.
    fn at_key(&self, key: &str, field: &str, message: String) -> ScenarioError {
        self.error(top_level_line(self.source, key), field, message)
    }
}

/// The typed scenario, its timing expressions resolved against the group it installs under
/// the profile, and that group's `install.groupSpec` (the profile's fields underneath).
fn read_scenario(
    file: &ScenarioFile<'_>,
    profile_patch: &Value,
) -> Result<(Scenario, Timing), Vec<ScenarioError>> {
    let (timing, group_spec) = scenario_timing(file.source, profile_patch)
        .map_err(|message| vec![file.at_key("install", "install.groupSpec", message)])?;
    let mut scenario: Scenario = with_timing(timing, || serde_yaml::from_str(file.source))
        .map_err(|error| vec![serde_error(file.path, &error)])?;
    if scenario
        .install
        .group_spec
        .as_ref()
        .is_none_or(Value::is_object)
    {
        scenario.install.group_spec = group_spec;
    }
    Ok((scenario, timing))
}

/// The `slug` of `NNN-slug.yaml`; an error when `NNN` is not the scenario's `id`.
fn check_file_name(
    file: &ScenarioFile<'_>,
    scenario: &Scenario,
    errors: &mut Vec<ScenarioError>,
) -> String {
    match split_file_name(file.path) {
        Ok((id, slug)) => {
            if id != scenario.id {
                errors.push(file.at_key(
                    "id",
                    "id",
                    format!("id {} does not match the file name's {id:03}", scenario.id),
                ));
            }
            slug
        }
        Err(message) => {
            errors.push(file.error(None, "", message));
            String::new()
        }
    }
}

/// `title`, `seed`, `install` and a non-empty `steps`.
fn check_header(file: &ScenarioFile<'_>, scenario: &Scenario, errors: &mut Vec<ScenarioError>) {
    if scenario.title.trim().is_empty() {
        errors.push(file.at_key("title", "title", "is empty".to_owned()));
    }
    if let Err(message) = check_seed(&scenario.seed) {
        errors.push(file.at_key("seed", "seed", message));
    }
    if scenario
        .install
        .group_spec
        .as_ref()
        .is_some_and(|spec| !spec.is_object())
    {
        errors.push(file.at_key(
            "install",
            "install.groupSpec",
            "must be a map of spec fields".to_owned(),
        ));
    }
    if let Some(image) = &scenario.install.operator_image {
        if image.trim().is_empty() || image.contains(char::is_whitespace) {
            errors.push(file.at_key(
                "install",
                "install.operatorImage",
                format!("`{image}` is not an image reference"),
            ));
        }
    }
    if let Some(fleet) = scenario.install.fleet {
        if !(1..=crate::live::fleet::FLEET_MAX).contains(&fleet) {
            errors.push(file.at_key(
                "install",
                "install.fleet",
                format!(
                    "{fleet} groups: a fleet has 1 to {} (the playground included)",
                    crate::live::fleet::FLEET_MAX
                ),
            ));
        }
    }
    if scenario.steps.is_empty() {
        errors.push(file.at_key("steps", "steps", "has no steps".to_owned()));
    }
}

/// Every declared capability is needed by a step.
fn check_requires(file: &ScenarioFile<'_>, scenario: &Scenario, errors: &mut Vec<ScenarioError>) {
    for capability in &scenario.requires {
        let used = scenario.steps.iter().any(
            |step| matches!(step, Step::Fault(fault) if fault.capability() == Some(*capability)),
        );
        if !used {
            errors.push(file.at_key(
                "requires",
                "requires",
                format!(
                    "declares `{}`, but no step needs it (a declared capability skips the scenario on backends without it)",
                    capability.name()
                ),
            ));
        }
    }
}

/// Each step, in order, with what the steps before it set up.
fn check_steps(file: &ScenarioFile<'_>, scenario: &Scenario, errors: &mut Vec<ScenarioError>) {
    let lines = step_lines(file.source);
    let mut state = StepState::default();
    for (index, step) in scenario.steps.iter().enumerate() {
        let field = format!("steps[{index}].{}", step.kind());
        if let Err(message) = state.check(step, scenario) {
            errors.push(file.error(lines.get(index).copied(), &field, message));
        }
    }
}

/// The timing a scenario's group has under a profile, and its `install.groupSpec` with the
/// profile underneath. Read from the file as plain YAML first: the timing must be known
/// before the scenario's spans (which may be expressions over it) are read. A file that is
/// not YAML, or a `groupSpec` that is not a map, gets the profile's timing here and its
/// error from the typed parse and the checks after it.
fn scenario_timing(source: &str, profile_patch: &Value) -> Result<(Timing, Option<Value>), String> {
    let raw: Value = serde_yaml::from_str(source).unwrap_or(Value::Null);
    let own = raw
        .get("install")
        .and_then(|install| install.get("groupSpec"))
        .filter(|spec| spec.is_object());
    let group_spec = with_profile(profile_patch, own);
    let spec = merged_spec(&[group_spec.as_ref().unwrap_or(&no_profile())]);
    let timing = Timing::of_spec_value(&spec).map_err(|problem| {
        if profile_patch
            .as_object()
            .is_some_and(|fields| !fields.is_empty())
        {
            format!("with the run's profile underneath, {problem}")
        } else {
            problem
        }
    })?;
    Ok((timing, group_spec))
}

/// Reads and validates one file.
pub fn load_scenario(path: &Path) -> Result<LoadedScenario, Vec<ScenarioError>> {
    load_scenario_with(path, &no_profile())
}

/// [`load_scenario`] under a run's profile ([`parse_scenario_with`]).
pub fn load_scenario_with(
    path: &Path,
    profile_patch: &Value,
) -> Result<LoadedScenario, Vec<ScenarioError>> {
    let single = |message: String| {
        vec![ScenarioError {
            file: path.to_path_buf(),
            line: None,
            column: None,
            field: String::new(),
            message,
        }]
    };
    let size = std::fs::metadata(path)
        .map_err(|error| single(format!("cannot read: {error}")))?
        .len();
    if size > SCENARIO_BYTES_MAX {
        return Err(single(format!(
            "is {size} bytes, over the {SCENARIO_BYTES_MAX} byte limit"
        )));
    }
    let source =
        std::fs::read_to_string(path).map_err(|error| single(format!("cannot read: {error}")))?;
    parse_scenario_with(path, &source, profile_patch)
}

/// Loads every `*.yaml` in `dir`, sorted by file name, and checks ids are unique.
/// All problems of all files are reported together.
pub fn load_catalogue(dir: &Path) -> Result<Vec<LoadedScenario>> {
    load_catalogue_with(dir, &no_profile())
}

/// [`load_catalogue`] under a run's profile ([`parse_scenario_with`]).
pub fn load_catalogue_with(dir: &Path, profile_patch: &Value) -> Result<Vec<LoadedScenario>> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        if path
            .extension()
            .is_some_and(|extension| extension == "yaml" || extension == "yml")
        {
            paths.push(path);
        }
    }
    paths.sort();
    let mut errors = Vec::new();
    let mut loaded = Vec::new();
    for path in &paths {
        match load_scenario_with(path, profile_patch) {
            Ok(scenario) => loaded.push(scenario),
            Err(mut file_errors) => errors.append(&mut file_errors),
        }
    }
    errors.extend(duplicate_ids(&loaded));
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(Error::Scenarios(errors))
    }
}

/// One error per scenario whose id an earlier file (by name) already used.
pub fn duplicate_ids(loaded: &[LoadedScenario]) -> Vec<ScenarioError> {
    let mut first: BTreeMap<u16, &Path> = BTreeMap::new();
    let mut errors = Vec::new();
    for scenario in loaded {
        match first.get(&scenario.scenario.id) {
            Some(earlier) => errors.push(ScenarioError {
                file: scenario.path.clone(),
                line: std::fs::read_to_string(&scenario.path)
                    .ok()
                    .and_then(|source| top_level_line(&source, "id")),
                column: None,
                field: "id".to_owned(),
                message: format!(
                    "duplicate id {}, already used by {}",
                    scenario.scenario.id,
                    earlier.display()
                ),
            }),
            None => {
                first.insert(scenario.scenario.id, &scenario.path);
            }
        }
    }
    errors
}

fn serde_error(path: &Path, error: &serde_yaml::Error) -> ScenarioError {
    let location = error.location();
    let mut text = error.to_string();
    if let Some(mark) = &location {
        let suffix = format!(" at line {} column {}", mark.line(), mark.column());
        if let Some(stripped) = text.strip_suffix(&suffix) {
            text = stripped.to_owned();
        }
    }
    // serde_yaml prefixes the field path (`steps[2].fault: unknown variant ...`).
    let (field, message) = match text.split_once(": ") {
        Some((prefix, rest)) if !prefix.contains(' ') => (prefix.to_owned(), rest.to_owned()),
        _ => (String::new(), text),
    };
    let message = wrong_family(&field, &message).unwrap_or(message);
    ScenarioError {
        file: path.to_path_buf(),
        line: location.as_ref().map(serde_yaml::Location::line),
        column: location.as_ref().map(serde_yaml::Location::column),
        field,
        message,
    }
}

/// For an unknown fault kind that is an action (or an unknown action that is a fault), the
/// spelling to use instead: `annotate is an action: write it as `do: {annotate: ...}``.
fn wrong_family(field: &str, message: &str) -> Option<String> {
    let kind = message
        .strip_prefix("unknown variant `")?
        .split_once('`')?
        .0;
    let step = field.rsplit('.').next()?;
    let (what, written) = match step {
        "fault" if family::action(kind) => ("an action", "do"),
        "do" if family::fault(kind) => ("a fault", "fault"),
        _ => return None,
    };
    Some(format!(
        "{kind} is {what}: write it as `{written}: {{{kind}: ...}}`"
    ))
}

/// Whether a name is a fault's or an action's kind, as the file spells it.
mod family {
    use serde::de::value::{Error, StrDeserializer};
    use serde::Deserialize;

    use super::super::model::{Action, Fault};

    /// Whether `kind` names an action (a unit variant would read from the name alone; every
    /// action has arguments, so an unknown variant and a missing argument are told apart).
    pub fn action(kind: &str) -> bool {
        names::<Action>(kind)
    }

    /// Whether `kind` names a fault.
    pub fn fault(kind: &str) -> bool {
        names::<Fault>(kind)
    }

    fn names<'de, T: Deserialize<'de>>(kind: &str) -> bool {
        match T::deserialize(StrDeserializer::<Error>::new(kind)) {
            Ok(_) => true,
            Err(error) => !error.to_string().starts_with("unknown variant"),
        }
    }
}

fn check_seed(seed: &str) -> Result<(), String> {
    let Some((source, place)) = seed.split_once(": ") else {
        return Err(format!("`{seed}` must read `<source file>: <where in it>`"));
    };
    if !KNOWN_SOURCES.contains(&source.trim()) {
        return Err(format!(
            "unknown source `{}`, expected one of {}",
            source.trim(),
            KNOWN_SOURCES.join(", ")
        ));
    }
    if place.trim().is_empty() {
        return Err("names no place in its source".to_owned());
    }
    Ok(())
}

/// The 1-based line of a top-level `key:`.
pub fn top_level_line(source: &str, key: &str) -> Option<usize> {
    let prefix = format!("{key}:");
    source
        .lines()
        .position(|line| line.starts_with(&prefix))
        .map(|index| index + 1)
}

/// The 1-based line of each item of the top-level `steps:` list (block style).
pub fn step_lines(source: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut in_steps = false;
    let mut item_indent = None;
    for (index, line) in source.lines().enumerate() {
        if line.starts_with("steps:") {
            in_steps = true;
            continue;
        }
        if !in_steps {
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent == 0 && !trimmed.starts_with('-') {
            break;
        }
        if trimmed == "-" || trimmed.starts_with("- ") {
            let expected = *item_indent.get_or_insert(indent);
            if indent == expected {
                lines.push(index + 1);
            }
        }
    }
    lines
}

/// What earlier steps established, for the rules across steps.
#[derive(Default)]
struct StepState {
    /// Healable fault kinds injected and not yet healed.
    active: BTreeSet<String>,
    /// Containers frozen and not yet thawed (`site/container`).
    frozen: BTreeSet<String>,
    /// Sites whose node is stopped.
    stopped_nodes: BTreeSet<String>,
    /// Names of open connections.
    connections: BTreeSet<String>,
    /// Connections that carry a `send-write`.
    sent_writes: BTreeSet<String>,
    /// Variables saved by earlier expectations (`save`, deploy API `save`).
    variables: BTreeSet<String>,
}

impl StepState {
    fn check(&mut self, step: &Step, scenario: &Scenario) -> Result<(), String> {
        match step {
            Step::Apply(apply) => check_apply(apply),
            Step::Fault(fault) => self.check_fault(fault, scenario),
            Step::Do(action) => self.check_action(action),
            Step::Heal(HealTarget::All) => {
                if self.active.is_empty() {
                    return Err("`heal: all` with no fault in effect".to_owned());
                }
                self.active.clear();
                self.frozen.clear();
                self.stopped_nodes.clear();
                self.connections.clear();
                self.sent_writes.clear();
                Ok(())
            }
            Step::Heal(HealTarget::Kind(kind)) => {
                if !self.active.remove(kind) {
                    return Err(format!(
                        "heals `{kind}`, but no `{kind}` fault is in effect"
                    ));
                }
                match kind.as_str() {
                    "freeze" => self.frozen.clear(),
                    "stop-node" => self.stopped_nodes.clear(),
                    "open-connection" => {
                        self.connections.clear();
                        self.sent_writes.clear();
                    }
                    _ => {}
                }
                Ok(())
            }
            Step::Expect(expect) => self.check_expect(expect, scenario),
            Step::Measure(measure) => match (measure.at_least, measure.at_most) {
                (Some(low), Some(high)) if low > high => {
                    Err(format!("atLeast {low} is more than atMost {high}"))
                }
                _ => Ok(()),
            },
            Step::Sleep(_) => Ok(()),
        }
    }

    fn check_fault(&mut self, fault: &Fault, scenario: &Scenario) -> Result<(), String> {
        if let Some(capability) = fault.capability() {
            if !scenario.requires.contains(&capability) {
                return Err(format!(
                    "`{}` needs the capability `{}`, which not every backend has: declare it with `requires: [{}]`",
                    fault.kind(),
                    capability.name(),
                    capability.name()
                ));
            }
        }
        let ended = match fault {
            Fault::Freeze(_) | Fault::Thaw(_) => self.check_freezing(fault)?,
            Fault::StopNode(_) | Fault::StartNode(_) => self.check_node(fault)?,
            other => {
                check_fault_arguments(other, scenario)?;
                false
            }
        };
        if fault.is_healable() && !ended {
            self.active.insert(fault.kind().to_owned());
        }
        Ok(())
    }

    /// `freeze` and `thaw`: a container is frozen once, thawed only when frozen. `true` when
    /// the step ended a fault (a thaw).
    fn check_freezing(&mut self, fault: &Fault) -> Result<bool, String> {
        let (Fault::Freeze(target) | Fault::Thaw(target)) = fault else {
            return Ok(false);
        };
        let key = format!("{}/{:?}", target.site, target.container);
        if matches!(fault, Fault::Freeze(_)) {
            if !self.frozen.insert(key.clone()) {
                return Err(format!("{key} is already frozen"));
            }
            return Ok(false);
        }
        if !self.frozen.remove(&key) {
            return Err(format!("thaws {key}, which no earlier step froze"));
        }
        if self.frozen.is_empty() {
            self.active.remove("freeze");
        }
        Ok(true)
    }

    /// `stop-node` and `start-node`: a node is stopped once, started only when stopped. `true`
    /// when the step ended a fault (a start).
    fn check_node(&mut self, fault: &Fault) -> Result<bool, String> {
        let (Fault::StopNode(target) | Fault::StartNode(target)) = fault else {
            return Ok(false);
        };
        if matches!(fault, Fault::StopNode(_)) {
            if !self.stopped_nodes.insert(target.site.to_string()) {
                return Err(format!("the node of {} is already stopped", target.site));
            }
            return Ok(false);
        }
        if !self.stopped_nodes.remove(target.site.name()) {
            return Err(format!(
                "starts the node of {}, which no earlier step stopped",
                target.site
            ));
        }
        if self.stopped_nodes.is_empty() {
            self.active.remove("stop-node");
        }
        Ok(true)
    }

    fn check_action(&mut self, action: &Action) -> Result<(), String> {
        match action {
            Action::OpenConnection { name, .. } => {
                if !self.connections.insert(name.clone()) {
                    return Err(format!("connection `{name}` is already open"));
                }
            }
            Action::SendWrite { connection } => {
                if !self.connections.contains(connection) {
                    return Err(format!(
                        "send-write: connection `{connection}` was not opened by an earlier step"
                    ));
                }
                if !self.sent_writes.insert(connection.clone()) {
                    return Err(format!(
                        "send-write: connection `{connection}` already carries a sent write"
                    ));
                }
            }
            Action::SealRpo { sites } => {
                if sites.is_empty() {
                    return Err("seal-rpo: names no surviving site".to_owned());
                }
                if let Some(stopped) = sites
                    .iter()
                    .find(|site| self.stopped_nodes.contains(site.name()))
                {
                    return Err(format!(
                        "seal-rpo: {stopped}'s node is stopped, so it cannot be read"
                    ));
                }
            }
            other => check_action_arguments(other)?,
        }
        if action.is_healable() {
            self.active.insert(action.kind().to_owned());
        }
        Ok(())
    }

    fn check_expect(&mut self, expect: &Expect, scenario: &Scenario) -> Result<(), String> {
        match (expect.within, expect.for_) {
            (Some(_), Some(_)) => return Err("has both `within` and `for`; use one".to_owned()),
            (None, None) => {
                return Err(
                    "needs `within` (becomes true by) or `for` (stays true throughout)".to_owned(),
                )
            }
            _ => {}
        }
        expect.target.validate(&mut Validation {
            scenario,
            holding: expect.for_.is_some(),
            variables: &mut self.variables,
            connections: &self.connections,
            sent_writes: &self.sent_writes,
        })?;
        for (name, pointer) in &expect.save {
            if !pointer.starts_with('/') {
                return Err(format!(
                    "save: `{name}: {pointer}` is not a JSON pointer (it starts with `/`, e.g. /metadata/resourceVersion)"
                ));
            }
        }
        self.variables.extend(expect.save.keys().cloned());
        Ok(())
    }
}

/// The rules of a fault's own arguments (those that need no earlier step).
fn check_fault_arguments(fault: &Fault, scenario: &Scenario) -> Result<(), String> {
    let replica_count = scenario.install.replica_count.unwrap_or(1);
    match fault {
        Fault::Partition(
            Partition::Sites(sites) | Partition::Nodes(sites) | Partition::Peers(sites),
        ) if sites.is_empty() => Err("partitions no site".to_owned()),
        Fault::DenyRbac {
            resource, verbs, ..
        } if resource.is_empty() || verbs.is_empty() => {
            Err("needs a resource and at least one verb".to_owned())
        }
        Fault::ScaleOperator { replicas } if *replicas == replica_count => Err(format!(
            "scales to {replicas}, the installed replica count: not a fault"
        )),
        Fault::KillOperator {
            pod: OperatorPod::Standby,
        } if replica_count < 2 => {
            Err("kills a standby, but install.replicaCount is below 2".to_owned())
        }
        Fault::ClockOffset(target) => super::model::offset_ms(&target.offset)
            .map(|_| ())
            .map_err(|e| format!("clock-offset of {}: {e}", target.site)),
        _ => Ok(()),
    }
}

/// The rules of an action's own arguments (those that need no earlier step).
fn check_action_arguments(action: &Action) -> Result<(), String> {
    match action {
        Action::Annotate { key, .. } if !key.contains('/') => Err(format!(
            "annotation key `{key}` has no prefix (e.g. bloodraven.shipstream.io/)"
        )),
        Action::Plugin { args } if args.is_empty() => {
            Err("runs the plugin with no arguments".to_owned())
        }
        Action::UpgradeOperator { image } if image.trim().is_empty() => {
            Err("upgrades to an empty image".to_owned())
        }
        Action::Sql {
            statements, heal, ..
        } if statements.trim().is_empty()
            || heal.as_deref().is_some_and(|h| h.trim().is_empty()) =>
        {
            Err(
                "sql: runs no statement (give `statements`, and `heal` non-empty if given)"
                    .to_owned(),
            )
        }
        _ => Ok(()),
    }
}

fn check_apply(apply: &Apply) -> Result<(), String> {
    match (&apply.fixture, &apply.object) {
        (Some(_), Some(_)) => Err("has both `fixture` and `object`; use one".to_owned()),
        (None, None) => Err("needs `fixture` (a path under fixtures/) or `object`".to_owned()),
        (Some(fixture), None) => {
            let path = Path::new(fixture);
            let ok = fixture.starts_with("fixtures/")
                && path
                    .components()
                    .all(|part| matches!(part, std::path::Component::Normal(_)))
                && fixture.ends_with(".yaml");
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "fixture `{fixture}` must be a relative .yaml path under fixtures/"
                ))
            }
        }
        (None, Some(object)) => {
            for field in ["apiVersion", "kind"] {
                if object.get(field).and_then(Value::as_str).is_none() {
                    return Err(format!("object has no `{field}`"));
                }
            }
            if object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_none()
            {
                return Err("object has no `metadata.name`".to_owned());
            }
            Ok(())
        }
    }
}

/// Collects the `${name}` references in a string.
pub fn collect_variables_in_str(text: &str, out: &mut Vec<String>) {
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
}
