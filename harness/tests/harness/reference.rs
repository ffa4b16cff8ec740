//! docs/scenarios.md, the scenario language reference, against the model it documents: a
//! section for every step kind, fault, heal target, expectation target and matcher the model
//! knows (and none it does not), and every `yaml` example a scenario the real parser and
//! validator accept, showing the thing its section is about.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use bloodraven_harness::scenario::matcher::OPERATORS;
use bloodraven_harness::scenario::model::{
    healable_kinds, Action, Fault, HealTarget, Install, Partition, Quantity, Scenario, Step,
    HEALABLE_ACTIONS, HEALABLE_FAULTS,
};
use bloodraven_harness::scenario::validate::{parse_scenario, LoadedScenario};
use bloodraven_harness::targets::Target;
use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::Value;

/// The reference, relative to the workspace root.
pub const REFERENCE: &str = "docs/scenarios.md";

/// The header a list-of-steps example is checked under: a scenario with the default install.
const STEPS_HEADER: &str = "id: 1\ntitle: example\nseed: \"harness.md: Scenario files\"\nsteps:\n";

/// One fenced `yaml` block of the reference.
#[derive(Debug, Clone)]
pub struct Example {
    /// The `##` section it is in.
    pub section: String,
    /// The `### \`name\`` item it is under, if any.
    pub item: Option<String>,
    /// The 1-based line of its opening fence.
    pub line: usize,
    /// The block as written.
    pub text: String,
}

impl Example {
    /// The scenario file the example is checked as: itself when it is a whole file (a map),
    /// else its steps under [`STEPS_HEADER`]; and the path to check it at.
    pub fn as_scenario(&self) -> (PathBuf, String) {
        let value: Value = serde_yaml::from_str(&self.text).unwrap_or(Value::Null);
        match value.get("id").and_then(Value::as_u64) {
            Some(id) => (
                PathBuf::from(format!("scenarios/{id:03}-example.yaml")),
                self.text.clone(),
            ),
            None => (
                PathBuf::from("scenarios/001-example.yaml"),
                format!("{STEPS_HEADER}{}", self.text),
            ),
        }
    }

    /// Where it is, for messages.
    pub fn at(&self) -> String {
        format!(
            "{REFERENCE}:{} ({}{})",
            self.line,
            self.section,
            self.item
                .as_deref()
                .map(|item| format!(" / {item}"))
                .unwrap_or_default()
        )
    }
}

/// The reference's headings and fenced blocks.
#[derive(Debug, Default)]
pub struct Reference {
    /// `(section, item, line)` of every `### \`name\`` heading.
    pub items: Vec<(String, String, usize)>,
    /// Every `## ` section's title and text.
    pub sections: Vec<(String, String)>,
    /// Every fenced `yaml` block.
    pub examples: Vec<Example>,
}

/// Reads and splits docs/scenarios.md.
pub fn reference() -> Reference {
    let path = bloodraven_harness::backend::workspace_root().join(REFERENCE);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("failed to read {}: {error}", path.display()));
    split(&text)
}

fn split(text: &str) -> Reference {
    let mut reference = Reference::default();
    let mut section = String::new();
    let mut item: Option<String> = None;
    let mut fence: Option<(usize, String, String)> = None;
    for (index, line) in text.lines().enumerate() {
        if let Some((start, lang, mut body)) = fence.take() {
            if line.trim_start().starts_with("```") {
                if lang == "yaml" {
                    reference.examples.push(Example {
                        section: section.clone(),
                        item: item.clone(),
                        line: start,
                        text: body,
                    });
                }
            } else {
                body.push_str(line);
                body.push('\n');
                fence = Some((start, lang, body));
            }
            continue;
        }
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fence = Some((index + 1, lang.trim().to_owned(), String::new()));
        } else if let Some(title) = line.strip_prefix("## ") {
            section = title.trim().to_owned();
            item = None;
            reference.sections.push((section.clone(), String::new()));
        } else if let Some(title) = line.strip_prefix("### ") {
            let name = title.trim().trim_matches('`').to_owned();
            reference
                .items
                .push((section.clone(), name.clone(), index + 1));
            item = Some(name);
        }
        if let Some((_, body)) = reference.sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    assert!(fence.is_none(), "{REFERENCE}: a code fence is not closed");
    reference
}

/// The names serde reads for an enum's variants or a struct's fields: what a file may spell.
pub fn serde_names<T: for<'de> Deserialize<'de>>() -> Vec<&'static str> {
    let names = Cell::new(&[][..]);
    let _ = T::deserialize(Capture(&names));
    names.get().to_vec()
}

/// A deserializer that only records the variant or field names it is asked for.
struct Capture<'a>(&'a Cell<&'static [&'static str]>);

#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("names captured")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: fmt::Display>(_message: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for Capture<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        self.0.set(variants);
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        self.0.set(fields);
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map identifier ignored_any
    }
}

/// What each `##` section of the reference must have a `### \`name\`` for, from the model.
fn model_sections() -> Vec<(&'static str, Vec<String>)> {
    let owned = |names: Vec<&str>| names.into_iter().map(str::to_owned).collect::<Vec<_>>();
    let mut heal = vec!["all"];
    heal.extend(healable_kinds());
    vec![
        ("Steps", owned(serde_names::<Step>())),
        ("Faults", owned(serde_names::<Fault>())),
        ("Actions", owned(serde_names::<Action>())),
        ("Heal targets", owned(heal)),
        ("Expectation targets", owned(Target::NAMES.to_vec())),
        ("Matchers", owned(OPERATORS.to_vec())),
    ]
}

/// The scenario of an example, or why it is not one.
fn load(example: &Example) -> Result<LoadedScenario, String> {
    let (path, source) = example.as_scenario();
    parse_scenario(&path, &source).map_err(|errors| {
        errors
            .iter()
            .map(|error| format!("  {}: {error}", example.at()))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

#[test]
fn serde_names_reads_the_spellings() {
    assert_eq!(serde_names::<Partition>(), ["sites", "nodes", "peers"]);
    assert!(serde_names::<Target>().contains(&"dns-endpoint"));
    assert!(serde_names::<Install>().contains(&"replicaCount"));
}

// The targets `Target::NAMES` lists are exactly the keys the target enum reads (an `expect`'s
// keys besides `within`, `for`, `name` and `save`).
#[test]
fn expect_targets_are_the_fields_of_expect() {
    assert_eq!(serde_names::<Target>(), Target::NAMES);
    let faults = serde_names::<Fault>();
    for healable in HEALABLE_FAULTS {
        assert!(
            faults.contains(&healable),
            "heal target {healable} is no fault"
        );
    }
    let actions = serde_names::<Action>();
    for healable in HEALABLE_ACTIONS {
        assert!(
            actions.contains(&healable),
            "heal target {healable} is no action"
        );
    }
}

#[test]
fn the_reference_has_a_section_for_everything_the_model_knows() {
    let reference = reference();
    let mut problems = Vec::new();
    for (section, names) in model_sections() {
        if !reference.sections.iter().any(|(title, _)| title == section) {
            problems.push(format!("no `## {section}` section"));
            continue;
        }
        let documented: BTreeSet<&str> = reference
            .items
            .iter()
            .filter(|(item_section, _, _)| item_section == section)
            .map(|(_, name, _)| name.as_str())
            .collect();
        for name in &names {
            if !documented.contains(name.as_str()) {
                problems.push(format!(
                    "`## {section}` has no `### ` heading for `{name}`, which the model has: add one with a one-line example"
                ));
            }
        }
        for (item_section, name, line) in &reference.items {
            if item_section == section && !names.contains(name) {
                problems.push(format!(
                    "line {line}: `## {section}` documents `{name}`, which the model does not have"
                ));
            }
        }
    }
    // The file's fields and `install`'s, named in "The file".
    let file = reference
        .sections
        .iter()
        .find(|(title, _)| title == "The file")
        .map(|(_, text)| text.as_str())
        .unwrap_or_default();
    for field in serde_names::<Scenario>()
        .into_iter()
        .chain(serde_names::<Install>())
    {
        if !file.contains(&format!("`{field}`")) {
            problems.push(format!(
                "`## The file` does not describe the field `{field}`"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{REFERENCE} has drifted from harness/src/scenario/:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_example_in_the_reference_is_a_valid_scenario() {
    let reference = reference();
    assert!(
        reference.examples.len() > 60,
        "only {} yaml examples found in {REFERENCE}",
        reference.examples.len()
    );
    let failures: Vec<String> = reference
        .examples
        .iter()
        .filter_map(|example| load(example).err())
        .collect();
    assert!(
        failures.is_empty(),
        "examples the parser or validator refuses:\n{}",
        failures.join("\n")
    );
}

/// Whether `example`'s steps show `name` of `section`.
fn shows(section: &str, name: &str, loaded: &LoadedScenario, text: &Value) -> bool {
    let steps = &loaded.scenario.steps;
    match section {
        "Steps" => steps.iter().any(|step| step.kind() == name),
        "Faults" => steps
            .iter()
            .any(|step| matches!(step, Step::Fault(fault) if fault.kind() == name)),
        "Actions" => steps
            .iter()
            .any(|step| matches!(step, Step::Do(action) if action.kind() == name)),
        "Heal targets" => steps.iter().any(|step| match step {
            Step::Heal(HealTarget::All) => name == "all",
            Step::Heal(HealTarget::Kind(kind)) => kind == name,
            _ => false,
        }),
        "Expectation targets" => steps
            .iter()
            .any(|step| matches!(step, Step::Expect(expect) if expect.target.name() == name)),
        "Matchers" => has_key(text, name),
        _ => true,
    }
}

fn has_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(name, child)| name == key || has_key(child, key)),
        Value::Array(items) => items.iter().any(|item| has_key(item, key)),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => false,
    }
}

#[test]
fn every_section_shows_its_item_in_an_example() {
    let reference = reference();
    let mut problems = Vec::new();
    for (section, name, line) in &reference.items {
        let shown = reference
            .examples
            .iter()
            .filter(|example| &example.section == section && example.item.as_ref() == Some(name))
            .filter_map(|example| {
                let loaded = load(example).ok()?;
                let value: Value = serde_yaml::from_str(&example.text).ok()?;
                Some((loaded, value))
            })
            .any(|(loaded, value)| shows(section, name, &loaded, &value));
        if !shown {
            problems.push(format!(
                "line {line}: `{section}` / `{name}` has no valid example that uses it"
            ));
        }
    }
    // Every partition and every quantity appears in its section's examples.
    let uses = |section: &str, item: &str, needle: &str| {
        reference.examples.iter().any(|example| {
            example.section == section
                && example.item.as_deref() == Some(item)
                && example.text.contains(needle)
        })
    };
    for partition in serde_names::<Partition>() {
        if !uses("Faults", "partition", &format!("{{{partition}: ")) {
            problems.push(format!("`partition` shows no `{partition}` example"));
        }
    }
    for quantity in serde_names::<Quantity>() {
        if !uses("Steps", "measure", &format!("quantity: {quantity}")) {
            problems.push(format!("`measure` shows no `{quantity}` example"));
        }
    }
    assert!(problems.is_empty(), "{REFERENCE}:\n{}", problems.join("\n"));
}

// The checks above would pass on a reference they cannot read: they see what is there.
#[test]
fn the_reference_check_sees_a_missing_section_and_a_bad_example() {
    let text = "## Faults\n\n### `kill`\n\n```yaml\n- fault: {kill: {site: atlantis, container: mysql}}\n```\n";
    let reference = split(text);
    assert_eq!(
        reference.items,
        [("Faults".to_owned(), "kill".to_owned(), 3)]
    );
    let error = load(&reference.examples[0]).expect_err("unknown site");
    assert!(
        error.contains("atlantis") && error.contains(":5"),
        "{error}"
    );
    let known: Vec<String> = model_sections()
        .into_iter()
        .find(|(section, _)| *section == "Faults")
        .map(|(_, names)| names)
        .unwrap_or_default();
    assert!(known.len() > 1 && known.contains(&"kill".to_owned()));
}
