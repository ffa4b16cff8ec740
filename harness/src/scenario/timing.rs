//! The group's timing, and the profiles that set it for a whole run.
//!
//! A scenario's timing-dependent bounds are written in terms of the group's spec
//! (`atMost: detection + 1s`, `within: lease + 10s`, see [`super::span`]); they are resolved
//! when the scenario is loaded for a run, against the spec that run installs:
//!
//! ```text
//! fixtures/playground/group.yaml's spec  <-  the run's --profile  <-  the scenario's install.groupSpec
//! ```
//!
//! each a JSON merge patch over the one before. `--profile playground` changes nothing,
//! `--profile fast` is [`FAST_PROFILE`], `--profile FILE` is a partial group spec of the
//! user's (their own settings, to validate the catalogue against).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use bloodraven_api::group::MysqlFailoverGroupSpec;
use serde_json::Value;

/// The playground group of the requirements, as installed (the harness's own copy of the
/// fixture, so a scenario resolves against exactly what the installer applies).
const PLAYGROUND_GROUP_YAML: &str = include_str!("../../../fixtures/playground/group.yaml");

/// `--profile fast`: polls every 500 ms, three failed polls, a 1.5 s write lease, a 30 s
/// cooldown (docs/scenarios.md, "Profiles").
pub const FAST_PROFILE: &str = "{pollInterval: 500ms, failureThreshold: 3, writeLease: {duration: 1500ms}, failoverCooldown: 30s}";

/// A profile file longer than this is refused before parsing (it is a partial group spec).
pub const PROFILE_BYTES_MAX: u64 = 64 * 1024;

/// A timing quantity of the group's spec a bound may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimingParam {
    /// `pollInterval x failureThreshold`: a failed site is declared failed after this.
    Detection,
    /// The sidecar write lease: `writeLease.duration`, else the detection floor.
    Lease,
    /// `pollInterval`.
    PollInterval,
    /// `failoverCooldown`.
    Cooldown,
}

impl TimingParam {
    /// Every parameter, in the order the reference lists them.
    pub const ALL: [Self; 4] = [
        Self::Detection,
        Self::Lease,
        Self::PollInterval,
        Self::Cooldown,
    ];

    /// The spelling in a scenario file.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Detection => "detection",
            Self::Lease => "lease",
            Self::PollInterval => "pollInterval",
            Self::Cooldown => "cooldown",
        }
    }

    /// The parameter spelled `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|param| param.name() == name)
    }
}

/// The timing fields of one group's spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timing {
    /// `pollInterval`.
    pub poll_interval: Duration,
    /// `failureThreshold`.
    pub failure_threshold: u32,
    /// The write lease (`writeLease.duration`, else the detection floor).
    pub lease: Duration,
    /// `failoverCooldown`.
    pub cooldown: Duration,
}

impl Timing {
    /// The timing of a parsed spec.
    pub fn of_spec(spec: &MysqlFailoverGroupSpec) -> Self {
        Self {
            poll_interval: spec.poll_interval.get(),
            failure_threshold: spec.failure_threshold,
            lease: spec.effective_write_lease(),
            cooldown: spec.failover_cooldown.get(),
        }
    }

    /// The timing of a spec as JSON (the playground's with patches merged in); the error
    /// names the field that is wrong.
    pub fn of_spec_value(spec: &Value) -> Result<Self, String> {
        let typed: MysqlFailoverGroupSpec = serde_path_to_error::deserialize(spec)
            .map_err(|error| format!("spec.{}: {}", error.path(), error.inner()))?;
        let problems = typed.validate();
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Ok(Self::of_spec(&typed))
    }

    /// The playground's timing (`fixtures/playground/group.yaml`): 2 s polls, threshold 3,
    /// a 6 s lease, a 30 s cooldown.
    pub fn playground() -> Self {
        static PLAYGROUND: LazyLock<Timing> = LazyLock::new(|| {
            Timing::of_spec_value(&playground_spec())
                .expect("fixtures/playground/group.yaml's spec is a valid group spec")
        });
        *PLAYGROUND
    }

    /// The failure detection floor, `pollInterval x failureThreshold`.
    pub fn detection(self) -> Duration {
        self.poll_interval.saturating_mul(self.failure_threshold)
    }

    /// The value of one parameter.
    pub fn get(self, param: TimingParam) -> Duration {
        match param {
            TimingParam::Detection => self.detection(),
            TimingParam::Lease => self.lease,
            TimingParam::PollInterval => self.poll_interval,
            TimingParam::Cooldown => self.cooldown,
        }
    }
}

/// The playground group's `spec` as JSON.
pub fn playground_spec() -> Value {
    use serde::Deserialize as _;
    serde_yaml::Deserializer::from_str(PLAYGROUND_GROUP_YAML)
        .filter_map(|document| Value::deserialize(document).ok())
        .find(|object| object["kind"] == "MysqlFailoverGroup")
        .map(|object| object["spec"].clone())
        .expect("fixtures/playground/group.yaml holds a MysqlFailoverGroup with a spec")
}

/// `--profile`: the timing fields a run sets on every scenario's group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Profile {
    /// The playground's own timing (nothing changed).
    #[default]
    Playground,
    /// [`FAST_PROFILE`].
    Fast,
    /// A partial group spec in a YAML file.
    File(PathBuf),
}

impl Profile {
    /// `playground`, `fast`, or a file's path (clap's value parser: a file that does not
    /// exist is an error naming it).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "playground" => Ok(Self::Playground),
            "fast" => Ok(Self::Fast),
            "" => Err("empty profile: use playground, fast, or a file's path".to_owned()),
            path if Path::new(path).is_file() => Ok(Self::File(PathBuf::from(path))),
            path => Err(format!(
                "`{path}` is neither `playground`, `fast`, nor a file (a partial group spec in YAML)"
            )),
        }
    }

    /// The profile's name in the report: `playground`, `fast`, or the file's path.
    pub fn name(&self) -> String {
        match self {
            Self::Playground => "playground".to_owned(),
            Self::Fast => "fast".to_owned(),
            Self::File(path) => path.display().to_string(),
        }
    }

    /// The merge patch this profile applies to the playground's spec (`{}` for the
    /// playground), checked: a map of known spec fields that leaves a valid spec.
    pub fn patch(&self) -> Result<Value, String> {
        let (source, origin) = match self {
            Self::Playground => return Ok(Value::Object(serde_json::Map::new())),
            Self::Fast => (FAST_PROFILE.to_owned(), "the fast profile".to_owned()),
            Self::File(path) => (read_profile(path)?, format!("profile {}", path.display())),
        };
        let patch: Value = serde_yaml::from_str(&source)
            .map_err(|error| format!("{origin}: not YAML: {error}"))?;
        check_patch(&patch).map_err(|problem| format!("{origin}: {problem}"))?;
        Ok(patch)
    }
}

fn read_profile(path: &Path) -> Result<String, String> {
    let metadata =
        std::fs::metadata(path).map_err(|error| format!("profile {}: {error}", path.display()))?;
    if metadata.len() > PROFILE_BYTES_MAX {
        return Err(format!(
            "profile {}: {} bytes, more than the {PROFILE_BYTES_MAX} a partial group spec may have",
            path.display(),
            metadata.len()
        ));
    }
    std::fs::read_to_string(path).map_err(|error| format!("profile {}: {error}", path.display()))
}

/// A profile is a map whose every key is a field of the group's spec, and which leaves the
/// playground's spec valid.
fn check_patch(patch: &Value) -> Result<(), String> {
    let Some(fields) = patch.as_object() else {
        return Err("must be a map of group spec fields (e.g. `pollInterval: 500ms`)".to_owned());
    };
    let merged = merged_spec(&[patch]);
    let typed: MysqlFailoverGroupSpec = serde_path_to_error::deserialize(&merged)
        .map_err(|error| format!("spec.{}: {}", error.path(), error.inner()))?;
    let known = serde_json::to_value(&typed).unwrap_or_default();
    for key in fields.keys() {
        if known.get(key).is_none() && !fields[key].is_null() {
            return Err(format!(
                "`{key}` is not a field of MysqlFailoverGroup's spec"
            ));
        }
    }
    let problems = typed.validate();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The playground's spec with each patch merged in, in order (JSON merge patch: a `null`
/// removes a field).
pub fn merged_spec(patches: &[&Value]) -> Value {
    let mut spec = playground_spec();
    for patch in patches {
        merge(&mut spec, patch);
    }
    spec
}

/// RFC 7386 JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// A scenario's `install.groupSpec` with the profile's fields underneath it (the scenario's
/// own fields win: a scenario that needs a cooldown of 60 s keeps it under any profile).
pub fn with_profile(profile_patch: &Value, scenario_patch: Option<&Value>) -> Option<Value> {
    let empty = profile_patch
        .as_object()
        .is_none_or(serde_json::Map::is_empty);
    match (empty, scenario_patch) {
        (true, patch) => patch.cloned(),
        (false, None) => Some(profile_patch.clone()),
        (false, Some(patch)) => {
            let mut combined = profile_patch.clone();
            merge(&mut combined, patch);
            Some(combined)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_playground_timing_is_the_fixture_s() {
        let timing = Timing::playground();
        assert_eq!(timing.poll_interval, Duration::from_secs(2));
        assert_eq!(timing.failure_threshold, 3);
        assert_eq!(timing.detection(), Duration::from_secs(6));
        assert_eq!(timing.lease, Duration::from_secs(6));
        assert_eq!(timing.cooldown, Duration::from_secs(30));
    }

    #[test]
    fn the_fast_profile_sets_the_issue_s_settings() {
        let patch = Profile::Fast.patch().expect("fast");
        let timing = Timing::of_spec_value(&merged_spec(&[&patch])).expect("valid");
        assert_eq!(timing.poll_interval, Duration::from_millis(500));
        assert_eq!(timing.detection(), Duration::from_millis(1500));
        assert_eq!(timing.lease, Duration::from_millis(1500));
        assert_eq!(timing.cooldown, Duration::from_secs(30));
        assert_eq!(
            timing.to_string(),
            "pollInterval 500ms x failureThreshold 3 = detection 1s500ms, lease 1s500ms, cooldown 30s"
        );
    }

    #[test]
    fn a_scenario_s_own_fields_win_over_the_profile() {
        let profile = json!({"pollInterval": "500ms", "failoverCooldown": "30s"});
        let scenario = json!({"failoverCooldown": "60s"});
        let combined = with_profile(&profile, Some(&scenario)).expect("combined");
        assert_eq!(
            combined,
            json!({"pollInterval": "500ms", "failoverCooldown": "60s"})
        );
        assert_eq!(with_profile(&json!({}), None), None);
        assert_eq!(with_profile(&json!({}), Some(&scenario)), Some(scenario));
    }

    fn file_profile(text: &str) -> Result<Value, String> {
        let dir = std::env::temp_dir().join(format!(
            "bloodraven-profile-{}-{}",
            std::process::id(),
            text.len()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("profile.yaml");
        std::fs::write(&path, text).expect("write");
        let result =
            Profile::parse(path.to_str().expect("utf-8")).and_then(|profile| profile.patch());
        std::fs::remove_dir_all(&dir).ok();
        result
    }

    #[test]
    fn a_file_profile_is_a_partial_group_spec() {
        let patch = file_profile("pollInterval: 1s\nwriteLease: {duration: 2s}\n").expect("valid");
        let timing = Timing::of_spec_value(&merged_spec(&[&patch])).expect("valid");
        assert_eq!(timing.detection(), Duration::from_secs(3));
        assert_eq!(timing.lease, Duration::from_secs(2));
    }

    #[test]
    fn a_bad_profile_names_what_is_wrong() {
        for (text, needle) in [
            ("pollIntervall: 1s\n", "`pollIntervall` is not a field"),
            ("pollInterval: soon\n", "spec.pollInterval"),
            (
                "failureThreshold: 0\n",
                "spec.failureThreshold: must be at least 1",
            ),
            ("- pollInterval: 1s\n", "must be a map of group spec fields"),
            ("pollInterval: [1s\n", "not YAML"),
        ] {
            let error = file_profile(text).expect_err(text);
            assert!(error.contains(needle), "{text}: {error}");
            assert!(error.contains("profile.yaml"), "{text}: {error}");
        }
        let error = Profile::parse("/nonexistent/profile.yaml").expect_err("missing");
        assert!(error.contains("/nonexistent/profile.yaml"), "{error}");
    }
}
