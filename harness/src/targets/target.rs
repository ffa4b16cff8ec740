//! The expectation targets as one single-key enum ([`Target`]), and the one interface every
//! target implements ([`ExpectTarget`]): validate, observe, evaluate, describe
//! (docs/design/style.md#12-one-variant-one-module-one-way-in).
//!
//! Each target is a module of [`crate::targets`] holding its spec (what the scenario file
//! says), its typed observation (what one poll read) and the four operations. Adding a target
//! is one new module and one line of the [`targets!`] list below, which writes the enum, the
//! matching [`Observation`] enum and the dispatch.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::history::recorder::Recorder;
use crate::live::LiveCluster;
use crate::scenario::model::Scenario;
use crate::scenario::validate::collect_variables_in_str;

/// What a validation of one target sees of the scenario and of the steps before it.
pub struct Validation<'a> {
    /// The scenario (its `install`, for targets that need something installed).
    pub scenario: &'a Scenario,
    /// The expectation holds `for` a window (not `within` a bound).
    pub holding: bool,
    /// Variables saved by earlier steps; a target that saves more adds them.
    pub variables: &'a mut BTreeSet<String>,
    /// Names of the connections open at this step.
    pub connections: &'a BTreeSet<String>,
    /// Connections that carry a `send-write`.
    pub sent_writes: &'a BTreeSet<String>,
}

/// What an observation is judged against besides itself.
#[derive(Debug)]
pub struct Judging<'a, O> {
    /// The baseline for `$changed`/`$unchanged` and `increasing`: the observation before the
    /// step's fault, else the expectation's first poll (on the first poll, the observation
    /// itself).
    pub baseline: &'a O,
    /// This is the expectation's first poll and no baseline was taken before it.
    pub first_poll: bool,
    /// The expectation holds `for` a window (not `within` a bound).
    pub holding: bool,
    /// Events count from this instant, archives from the scenario's start
    /// ([`ExpectTarget::counts_from_scenario_start`]).
    pub since: jiff::Timestamp,
}

/// Replaces `${var}` with saved values, collecting the names no earlier step saved.
pub struct Substitution<'a> {
    variables: &'a BTreeMap<String, Value>,
    missing: Vec<String>,
}

impl<'a> Substitution<'a> {
    /// A substitution from these saved variables.
    pub fn new(variables: &'a BTreeMap<String, Value>) -> Self {
        Self {
            variables,
            missing: Vec::new(),
        }
    }

    /// Splices saved values into a string, as text.
    pub fn text(&mut self, text: &mut String) {
        let mut names = Vec::new();
        collect_variables_in_str(text, &mut names);
        for name in names {
            match self.variables.get(&name) {
                Some(saved) => {
                    let shown = match saved {
                        Value::String(saved) => saved.clone(),
                        other => other.to_string(),
                    };
                    *text = text.replace(&format!("${{{name}}}"), &shown);
                }
                None => self.missing.push(name),
            }
        }
    }

    /// Substitutes every string of a document: one that is exactly `${var}` becomes the saved
    /// value itself (a number stays a number), others are spliced as text.
    pub fn json(&mut self, value: &mut Value) {
        match value {
            Value::String(text) => match whole_variable(text).map(str::to_owned) {
                Some(name) => match self.variables.get(&name) {
                    Some(saved) => *value = saved.clone(),
                    None => self.missing.push(name),
                },
                None => self.text(text),
            },
            Value::Array(items) => items.iter_mut().for_each(|item| self.json(item)),
            Value::Object(map) => map.values_mut().for_each(|item| self.json(item)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Substitutes the optional strings given.
    pub fn texts<'t>(&mut self, texts: impl IntoIterator<Item = &'t mut String>) {
        texts.into_iter().for_each(|text| self.text(text));
    }

    /// The first variable no earlier step saved, if any.
    pub fn first_missing(&self) -> Option<&str> {
        self.missing.first().map(String::as_str)
    }
}

/// Reads an optional field whose presence counts: absent is `None` (through
/// `#[serde(default)]`), present and null is `Some(None)`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The variable name when `text` is exactly `${name}`.
pub fn whole_variable(text: &str) -> Option<&str> {
    let name = text.strip_prefix("${")?.strip_suffix('}')?;
    (!name.is_empty() && !name.contains(['{', '}', '$'])).then_some(name)
}

/// One expectation target: its spec is `Self`, what one poll reads is [`Self::Observation`].
pub trait ExpectTarget {
    /// The key the file spells it with (`dns-endpoint`).
    const NAME: &'static str;
    /// What one observation of it reads; serialized, it is what `save` pointers point into.
    type Observation: Serialize + DeserializeOwned + Clone + fmt::Debug + PartialEq;

    /// The rules across fields and steps serde cannot check.
    fn validate(&self, validation: &mut Validation<'_>) -> Result<(), String>;
    /// Reads the target on a live cluster.
    fn observe(&self, live: &LiveCluster) -> impl Future<Output = Result<Self::Observation>>;
    /// Whether `observed` satisfies it; the error says what differs.
    fn evaluate(
        &self,
        observed: &Self::Observation,
        judging: &Judging<'_, Self::Observation>,
    ) -> Result<(), String>;
    /// What it asserts, short, for reports (`None`: the target's name says enough).
    fn describe(&self) -> Option<String>;
    /// Replaces `${var}` in every field that may use one.
    fn substitute(&mut self, substitution: &mut Substitution<'_>);
    /// The partial-match documents it holds (where `$changed`/`$unchanged` may appear).
    fn patterns(&self) -> Vec<&Value> {
        Vec::new()
    }
    /// At the end of a `for` window: whether what had to change over it did.
    fn climbed(
        &self,
        baseline: Option<&Self::Observation>,
        last: Option<&Self::Observation>,
    ) -> Result<(), String> {
        let _ = (baseline, last);
        Ok(())
    }
    /// Whether what it counts dates from the scenario's start rather than the latest
    /// fault, action, heal or apply.
    fn counts_from_scenario_start(&self) -> bool {
        false
    }
    /// Whether observing it changes the cluster (a request sent), so the expectation after
    /// it takes its baseline first.
    fn acts(&self) -> bool {
        false
    }
    /// Variables the satisfying observation saves besides `save` (name, value; `None`:
    /// forget it).
    fn answer_variables(&self, observed: &Self::Observation) -> Vec<(String, Option<Value>)> {
        let _ = observed;
        Vec::new()
    }
    /// Every pod (`namespace/name`) the observation holds.
    fn pods_seen(&self, observed: &Self::Observation) -> Vec<String> {
        let _ = observed;
        Vec::new()
    }
    /// Rules on what the run saw before (a pod asserted absent must have been seen).
    fn check_seen(&self, seen_pods: &BTreeSet<String>) -> Result<(), String> {
        let _ = seen_pods;
        Ok(())
    }
    /// Records what the last observation read into the history, when the target's checker
    /// judges it after the run.
    fn record(
        &self,
        recorder: &Recorder,
        last: Option<&Self::Observation>,
        since: jiff::Timestamp,
        satisfied: bool,
    ) {
        let _ = (recorder, last, since, satisfied);
    }
}

/// Writes [`Target`], [`Observation`] and their dispatch from the list of targets.
macro_rules! targets {
    ($($(#[doc = $doc:literal])* $variant:ident($module:ident::$spec:ident),)*) => {
        /// What an expectation asserts about: exactly one key of the `expect` map.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "kebab-case")]
        pub enum Target {
            $($(#[doc = $doc])* $variant(super::$module::$spec),)*
        }

        /// One observation of a target, typed per target.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum Observation {
            $(
                #[doc = concat!("Of `", stringify!($module), "`.")]
                $variant(<super::$module::$spec as ExpectTarget>::Observation),
            )*
        }

        impl Target {
            /// Every target's name as the file spells it, in declaration order.
            pub const NAMES: &'static [&'static str] =
                &[$(<super::$module::$spec as ExpectTarget>::NAME,)*];

            /// The target's name as the file spells it.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Target::$variant(_) => <super::$module::$spec as ExpectTarget>::NAME,)*
                }
            }

            /// [`ExpectTarget::validate`].
            pub fn validate(&self, validation: &mut Validation<'_>) -> Result<(), String> {
                match self { $(Target::$variant(spec) => spec.validate(validation),)* }
            }

            /// [`ExpectTarget::observe`].
            pub async fn observe(&self, live: &LiveCluster) -> Result<Observation> {
                match self {
                    $(Target::$variant(spec) => spec.observe(live).await.map(Observation::$variant),)*
                }
            }

            /// [`ExpectTarget::evaluate`]; `baseline` `None` on a first poll with no baseline
            /// taken before it (the observation is then its own).
            pub fn evaluate(
                &self,
                observed: &Observation,
                baseline: Option<&Observation>,
                holding: bool,
                since: jiff::Timestamp,
            ) -> Result<(), String> {
                match (self, observed) {
                    $((Target::$variant(spec), Observation::$variant(observed)) => {
                        let same = match baseline {
                            Some(Observation::$variant(baseline)) => Some(baseline),
                            Some(_) | None => None,
                        };
                        spec.evaluate(observed, &Judging {
                            baseline: same.unwrap_or(observed),
                            first_poll: baseline.is_none(),
                            holding,
                            since,
                        })
                    })*
                    (target, observed) => Err(target.mismatch(observed)),
                }
            }

            /// [`ExpectTarget::describe`].
            pub fn describe(&self) -> Option<String> {
                match self { $(Target::$variant(spec) => spec.describe(),)* }
            }

            /// [`ExpectTarget::substitute`].
            pub fn substitute(&mut self, substitution: &mut Substitution<'_>) {
                match self { $(Target::$variant(spec) => spec.substitute(substitution),)* }
            }

            /// [`ExpectTarget::patterns`].
            pub fn patterns(&self) -> Vec<&Value> {
                match self { $(Target::$variant(spec) => spec.patterns(),)* }
            }

            /// [`ExpectTarget::climbed`].
            pub fn climbed(
                &self,
                baseline: Option<&Observation>,
                last: Option<&Observation>,
            ) -> Result<(), String> {
                match self {
                    $(Target::$variant(spec) => {
                        let baseline = match baseline {
                            Some(Observation::$variant(observed)) => Some(observed),
                            Some(_) | None => None,
                        };
                        let last = match last {
                            Some(Observation::$variant(observed)) => Some(observed),
                            Some(_) | None => None,
                        };
                        spec.climbed(baseline, last)
                    })*
                }
            }

            /// [`ExpectTarget::counts_from_scenario_start`].
            pub fn counts_from_scenario_start(&self) -> bool {
                match self { $(Target::$variant(spec) => spec.counts_from_scenario_start(),)* }
            }

            /// [`ExpectTarget::acts`].
            pub fn acts(&self) -> bool {
                match self { $(Target::$variant(spec) => spec.acts(),)* }
            }

            /// [`ExpectTarget::answer_variables`] (nothing for another target's observation).
            pub fn answer_variables(&self, observed: &Observation) -> Vec<(String, Option<Value>)> {
                match (self, observed) {
                    $((Target::$variant(spec), Observation::$variant(observed)) => {
                        spec.answer_variables(observed)
                    })*
                    (_, _) => Vec::new(),
                }
            }

            /// [`ExpectTarget::pods_seen`] (nothing for another target's observation).
            pub fn pods_seen(&self, observed: &Observation) -> Vec<String> {
                match (self, observed) {
                    $((Target::$variant(spec), Observation::$variant(observed)) => {
                        spec.pods_seen(observed)
                    })*
                    (_, _) => Vec::new(),
                }
            }

            /// [`ExpectTarget::check_seen`].
            pub fn check_seen(&self, seen_pods: &BTreeSet<String>) -> Result<(), String> {
                match self { $(Target::$variant(spec) => spec.check_seen(seen_pods),)* }
            }

            /// [`ExpectTarget::record`].
            pub fn record(
                &self,
                recorder: &Recorder,
                last: Option<&Observation>,
                since: jiff::Timestamp,
                satisfied: bool,
            ) {
                match self {
                    $(Target::$variant(spec) => {
                        let last = match last {
                            Some(Observation::$variant(observed)) => Some(observed),
                            Some(_) | None => None,
                        };
                        spec.record(recorder, last, since, satisfied);
                    })*
                }
            }
        }

        impl Observation {
            /// The name of the target it observes.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Observation::$variant(_) => <super::$module::$spec as ExpectTarget>::NAME,)*
                }
            }

            /// Reads an observation of `target` from its JSON shape (what [`Self::to_json`]
            /// writes: a recorded observation, or a fake cluster's answer in tests).
            pub fn from_json(target: &Target, value: Value) -> Result<Self, String> {
                let name = target.name();
                let read = |error: serde_json::Error| {
                    format!("{name}: the observation does not read: {error}")
                };
                match target {
                    $(Target::$variant(_) => serde_json::from_value(value)
                        .map(Observation::$variant)
                        .map_err(read),)*
                }
            }
        }
    };
}

targets! {
    /// The group's `.status`, partial match.
    Group(group::GroupExpect),
    /// Pods.
    Pods(pods::PodsExpect),
    /// A Service's ready endpoints, as the set of sites behind them.
    Endpoints(endpoints::EndpointsExpect),
    /// The DNSEndpoint `bloodraven-playground`.
    DnsEndpoint(dns_endpoint::DnsEndpointExpect),
    /// The DNS answer for the group's hostname (after external-dns).
    Dns(dns::DnsExpect),
    /// The counter app.
    Counter(counter::CounterExpect),
    /// A deploy API request and its answer.
    DeployApi(deploy_api::DeployApiExpect),
    /// An operator metric.
    Metric(metric::MetricExpect),
    /// A Kubernetes Event.
    Event(event::EventExpect),
    /// Any object, partial match.
    Object(object::ObjectExpect),
    /// A site's node.
    Node(node::NodeExpect),
    /// A connection opened by `open-connection`.
    Connection(connection::ConnectionExpect),
    /// A site's mysqld, read directly (not through the operator).
    Mysql(mysql::MysqlExpect),
    /// The archives on a site's backups volume (a rejoin's), read back and verified.
    Archive(archive::ArchiveExpect),
}

impl Target {
    fn mismatch(&self, observed: &Observation) -> String {
        format!(
            "a {} observation cannot judge a {} expectation",
            observed.name(),
            self.name()
        )
    }
}

impl Observation {
    /// The observation in its JSON shape (what `save` pointers point into).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl fmt::Display for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

/// A JSON document shortened to about 80 characters, for descriptions.
pub fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(77).collect();
        format!("{cut}...")
    } else {
        text
    }
}
