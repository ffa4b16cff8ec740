//! Validation of custom resources against their CRD version's structural schema, as
//! kube-apiserver 1.32 validates them (apiextensions-apiserver over kube-openapi), with the
//! same field paths and messages:
//!
//! - OpenAPI v3 value validations: `type` (with `nullable`, int-or-string and a float that is
//!   a whole number accepted as an integer), `enum`, `minimum`/`maximum` (and exclusive),
//!   `multipleOf`, `minLength`/`maxLength`, `pattern`, `minItems`/`maxItems`,
//!   `minProperties`/`maxProperties`, `required`, `allOf`/`anyOf`/`oneOf`/`not`, nested in
//!   `properties`, `additionalProperties` and `items`;
//! - `x-kubernetes-list-type` `set` and `map` uniqueness (`Duplicate value`);
//! - CEL `x-kubernetes-validations` ([`rules`]): `rule`, `message`, `messageExpression`,
//!   `reason`, `fieldPath`, transition rules on `oldSelf` and `optionalOldSelf`; not run when
//!   the schema already found a blocking error, as the real server does;
//! - ratcheting (on by default since 1.30): on an update, a value equal to the old value at
//!   the same place (object fields by name, `map` lists by their keys) is not validated
//!   again, so an object stored before its CRD tightened can still have its status and
//!   metadata written.
//!
//! Not enforced (accepted): `format`, the embedded `metadata` of
//! `x-kubernetes-embedded-resource` objects, CEL's cost budget and type checking (a rule is
//! parsed when its CRD is written; a mistyped one fails when it runs). A CEL rule calling a
//! function localkube's CEL does not have (the Kubernetes libraries: `isSorted`,
//! `quantity`, `url`, `ip`, ...) is skipped with a warning logged when it is compiled,
//! rather than refusing every object.
//!
//! The compiled form ([`Validator`]: regular expressions, CEL programs) is built once per
//! CRD version, on its first use ([`LazyValidator`]); a schema without rules costs a walk
//! of the object.

pub mod crd;
pub mod go;
pub mod rules;

use super::error::FieldError;
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// One step of a field path.
#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    /// An object's property.
    Field(&'a str),
    /// A key of an `additionalProperties` map.
    Key(&'a str),
    /// An array index.
    Index(usize),
}

/// A field path, built on the stack as the walk descends and printed only for an error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Option<Seg<'a>>,
}

impl<'a> Path<'a> {
    /// The object itself.
    pub(crate) const ROOT: Path<'static> = Path {
        parent: None,
        seg: None,
    };

    fn child<'b>(&'b self, segment: Seg<'b>) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Some(segment),
        }
    }

    fn segs(&self) -> Vec<Seg<'a>> {
        let mut v = Vec::new();
        let mut cur = Some(self);
        while let Some(path) = cur {
            if let Some(segment) = path.seg {
                v.push(segment);
            }
            cur = path.parent;
        }
        v.reverse();
        v
    }

    /// As kube-openapi names it: `spec.sites[0].name`, map keys as properties.
    fn openapi(&self) -> String {
        let mut out = String::new();
        for segment in self.segs() {
            match segment {
                Seg::Field(k) | Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(index) => out.push_str(&format!("[{index}]")),
            }
        }
        out
    }

    /// As apimachinery's `field.Path` prints it: map keys in brackets, the root `<nil>`.
    fn field(&self) -> String {
        let segs = self.segs();
        if segs.is_empty() {
            return "<nil>".into();
        }
        let mut out = String::new();
        for segment in segs {
            match segment {
                Seg::Field(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Key(key) => out.push_str(&format!("[{key}]")),
                Seg::Index(index) => out.push_str(&format!("[{index}]")),
            }
        }
        out
    }

    /// `field` with a rule's normalized `fieldPath` appended (`field.Path.Child`).
    fn field_with(&self, suffix: &str) -> String {
        if suffix.is_empty() {
            return self.field();
        }
        if self.segs().is_empty() {
            return suffix.to_string();
        }
        if suffix.starts_with('[') {
            format!("{}{suffix}", self.field())
        } else {
            format!("{}.{suffix}", self.field())
        }
    }
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, PartialEq)]
enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// A `pattern` and its compiled form (`None`: not a valid RE2 expression, which, as on the
/// real server, no value matches).
#[derive(Debug)]
struct Pattern {
    source: String,
    re: Option<Regex>,
}

/// One schema node, compiled.
#[derive(Debug, Default)]
pub(crate) struct Node {
    ty: String,
    nullable: bool,
    preserve_unknown: bool,
    enum_values: Option<Vec<Value>>,
    minimum: Option<f64>,
    exclusive_minimum: bool,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<Pattern>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    required: Vec<String>,
    properties: BTreeMap<String, Node>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    list_type: Option<ListType>,
    map_atomic: bool,
    rules: Vec<rules::Rule>,
    /// This node or one below has CEL rules.
    rules_below: bool,
    /// This node or one below has a rule on `oldSelf`.
    old_self_below: bool,
    /// This node or one below is a `set` or `map` list.
    lists_below: bool,
}

fn u64_of(s: &Value, key: &str) -> Option<u64> {
    s.get(key).and_then(|value| {
        value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|f| *f >= 0.0)
                .map(|number| number as u64)
        })
    })
}

/// A Go (RE2) regular expression in the `regex` crate's syntax: Perl classes (`\d`, `\w`,
/// `\s` and their negations) are ASCII-only in Go and Unicode in `regex`, so they become
/// their ASCII classes; inside brackets a `[` is a literal in Go and a nested class in
/// `regex`, and `&`, `~` are set operators in `regex`, so they are escaped.
fn go_regex(pattern: &str) -> String {
    let cs: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut index = 0;
    while index < cs.len() {
        let c = cs[index];
        if c == '\\' && index + 1 < cs.len() {
            let character = cs[index + 1];
            let class = match character {
                'd' => Some(("[:digit:]", "[[:digit:]]")),
                'D' => Some(("[:^digit:]", "[[:^digit:]]")),
                'w' => Some(("[:word:]", "[[:word:]]")),
                'W' => Some(("[:^word:]", "[[:^word:]]")),
                's' => Some(("\\t\\n\\f\\r ", "[\\t\\n\\f\\r ]")),
                'S' => Some(("[^\\t\\n\\f\\r ]", "[^\\t\\n\\f\\r ]")),
                _ => None,
            };
            match class {
                Some((inside, outside)) => out.push_str(if in_class { inside } else { outside }),
                None => {
                    out.push('\\');
                    out.push(character);
                }
            }
            index += 2;
            continue;
        }
        if !in_class {
            out.push(c);
            index += 1;
            if c == '[' {
                in_class = true;
                if cs.get(index) == Some(&'^') {
                    out.push('^');
                    index += 1;
                }
                // a `]` first in a class is a literal
                if cs.get(index) == Some(&']') {
                    out.push_str("\\]");
                    index += 1;
                }
            }
            continue;
        }
        if c == '[' && cs.get(index + 1) == Some(&':') {
            // `[:alpha:]`, copied through its `:]`
            if let Some(end) = (index + 2..cs.len().saturating_sub(1))
                .find(|&position| cs[position] == ':' && cs[position + 1] == ']')
            {
                out.extend(&cs[index..end + 2]);
                index = end + 2;
                continue;
            }
        }
        match c {
            '[' | '&' | '~' => out.push('\\'),
            ']' => in_class = false,
            _ => {}
        }
        out.push(c);
        index += 1;
    }
    out
}

/// Where a node sits while compiling: its CRD path (for errors on the CRD) and whether it
/// is below a list whose items cannot be correlated with the old object's.
#[derive(Clone)]
pub(crate) struct CompileAt {
    pub(crate) crd_path: String,
    pub(crate) uncorrelatable: Option<String>,
}

impl Node {
    /// Compiles a schema node; problems a real server refuses the CRD for go to `errors`.
    pub(crate) fn compile(schema: &Value, at: &CompileAt, errors: &mut Vec<FieldError>) -> Node {
        let mut node = Node::compile_value_checks(schema);
        node.compile_children(schema, at, errors);
        node.compile_combinators(schema, at, errors);
        if let Some(list) = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            node.rules = rules::compile_all(list, at, errors);
        }
        node.mark_below();
        node
    }

    /// The checks of the node's own value: type, bounds, pattern, enum, list and map type.
    fn compile_value_checks(schema: &Value) -> Node {
        let str_of = |key: &str| schema.get(key).and_then(Value::as_str).unwrap_or_default();
        let bool_of = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
        let f64_of = |key: &str| schema.get(key).and_then(Value::as_f64);
        let strings_of = |key: &str| -> Vec<String> {
            schema
                .get(key)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let list_type = match str_of("x-kubernetes-list-type") {
            "set" => Some(ListType::Set),
            "map" => Some(ListType::Map(strings_of("x-kubernetes-list-map-keys"))),
            "atomic" => Some(ListType::Atomic),
            _ => None,
        };
        Node {
            ty: str_of("type").to_string(),
            nullable: bool_of("nullable"),
            preserve_unknown: bool_of("x-kubernetes-preserve-unknown-fields"),
            enum_values: schema.get("enum").and_then(Value::as_array).cloned(),
            minimum: f64_of("minimum"),
            exclusive_minimum: bool_of("exclusiveMinimum"),
            maximum: f64_of("maximum"),
            exclusive_maximum: bool_of("exclusiveMaximum"),
            multiple_of: f64_of("multipleOf"),
            min_length: u64_of(schema, "minLength"),
            max_length: u64_of(schema, "maxLength"),
            pattern: schema
                .get("pattern")
                .and_then(Value::as_str)
                .map(|pattern| Pattern {
                    source: pattern.to_string(),
                    re: Regex::new(&go_regex(pattern)).ok(),
                }),
            min_items: u64_of(schema, "minItems"),
            max_items: u64_of(schema, "maxItems"),
            min_properties: u64_of(schema, "minProperties"),
            max_properties: u64_of(schema, "maxProperties"),
            required: strings_of("required"),
            map_atomic: str_of("x-kubernetes-map-type") == "atomic",
            list_type,
            ..Node::default()
        }
    }

    /// Compiles `properties`, `additionalProperties` and `items`. The fields of an atomic
    /// map, and the items of a list other than a map list, are not correlated with the old
    /// object's.
    fn compile_children(&mut self, schema: &Value, at: &CompileAt, errors: &mut Vec<FieldError>) {
        let below = |path: String, uncorrelatable: Option<String>| CompileAt {
            crd_path: path,
            uncorrelatable,
        };
        let here_uncorrelatable = || {
            at.uncorrelatable
                .clone()
                .or_else(|| Some(at.crd_path.clone()))
        };
        let field_uncorrelatable = if self.map_atomic {
            here_uncorrelatable()
        } else {
            at.uncorrelatable.clone()
        };
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (key, property) in properties {
                let path = format!("{}.properties[{key}]", at.crd_path);
                let child =
                    Node::compile(property, &below(path, field_uncorrelatable.clone()), errors);
                self.properties.insert(key.clone(), child);
            }
        }
        if let Some(additional) = schema
            .get("additionalProperties")
            .filter(|additional| additional.is_object())
        {
            let path = format!("{}.additionalProperties", at.crd_path);
            let child = Node::compile(
                additional,
                &below(path, field_uncorrelatable.clone()),
                errors,
            );
            self.additional = Some(Box::new(child));
        }
        if let Some(items) = schema.get("items").filter(|items| items.is_object()) {
            let uncorrelatable = if matches!(self.list_type, Some(ListType::Map(_))) {
                at.uncorrelatable.clone()
            } else {
                here_uncorrelatable()
            };
            let path = format!("{}.items", at.crd_path);
            self.items = Some(Box::new(Node::compile(
                items,
                &below(path, uncorrelatable),
                errors,
            )));
        }
    }

    /// Compiles `allOf`, `anyOf`, `oneOf` and `not`.
    fn compile_combinators(
        &mut self,
        schema: &Value,
        at: &CompileAt,
        errors: &mut Vec<FieldError>,
    ) {
        let below = |path: String| CompileAt {
            crd_path: path,
            uncorrelatable: at.uncorrelatable.clone(),
        };
        for (key, out) in [
            ("allOf", &mut self.all_of),
            ("anyOf", &mut self.any_of),
            ("oneOf", &mut self.one_of),
        ] {
            for (index, branch) in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let path = format!("{}.{key}[{index}]", at.crd_path);
                out.push(Node::compile(branch, &below(path), errors));
            }
        }
        if let Some(not) = schema.get("not").filter(|not| not.is_object()) {
            let path = format!("{}.not", at.crd_path);
            self.not = Some(Box::new(Node::compile(not, &below(path), errors)));
        }
    }

    /// Sets what is below this node (rules, rules on `oldSelf`, set or map lists), from its
    /// own and its children's.
    fn mark_below(&mut self) {
        let children = self
            .properties
            .values()
            .chain(self.additional.as_deref())
            .chain(self.items.as_deref());
        let (mut rules_below, mut old_self_below, mut lists_below) = (
            !self.rules.is_empty(),
            self.rules.iter().any(|rule| rule.uses_old_self),
            matches!(self.list_type, Some(ListType::Set | ListType::Map(_))),
        );
        for child in children {
            rules_below |= child.rules_below;
            old_self_below |= child.old_self_below;
            lists_below |= child.lists_below;
        }
        self.rules_below = rules_below;
        self.old_self_below = old_self_below;
        self.lists_below = lists_below;
    }

    fn each_rule(&self, f: &mut impl FnMut(&rules::Rule)) {
        self.rules.iter().for_each(&mut *f);
        for node in self
            .properties
            .values()
            .chain(self.additional.as_deref())
            .chain(self.items.as_deref())
        {
            node.each_rule(f);
        }
    }

    fn child_schema(&self, key: &str) -> Option<&Node> {
        self.properties.get(key).or(self.additional.as_deref())
    }
}

/// The compiled schema of one CRD version.
#[derive(Debug)]
pub struct Validator {
    root: Node,
}

/// A [`Validator`] compiled on first use (CRDs are registered at startup and on every CRD
/// write; most are never validated against before they change again).
#[derive(Clone, Default)]
pub struct LazyValidator(Arc<OnceLock<Validator>>);

impl std::fmt::Debug for LazyValidator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(if self.0.get().is_some() {
            "LazyValidator(compiled)"
        } else {
            "LazyValidator"
        })
    }
}

/// Validators compare equal: a CRD version's identity is its schema, compared beside it.
impl PartialEq for LazyValidator {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl LazyValidator {
    /// The validator of `schema`, compiled the first time.
    pub fn get(&self, schema: &Value) -> &Validator {
        self.0.get_or_init(|| Validator::new(schema))
    }
}

/// The JSON type name kube-openapi infers for a decoded value.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, value: &Value) -> bool {
    let got = json_type(value);
    got == want
        || (want == "number" && got == "integer")
        || (want == "integer"
            && got == "number"
            && value
                .as_f64()
                .map(|number| number.fract() == 0.0)
                .unwrap_or(false))
}

fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(number)) => x.as_f64() == number.as_f64(),
        _ => a == b,
    }
}

fn invalid(field: String, value: &Value, detail: String) -> FieldError {
    FieldError {
        field,
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {}: {detail}", go::bad_value(value)),
    }
}

fn invalid_count(field: String, count: usize, detail: String) -> FieldError {
    FieldError {
        field,
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {count}: {detail}"),
    }
}

/// The error of a composition keyword (`anyOf`...): kube-openapi reports it without a
/// field, which apiextensions prints as `<nil>: Invalid value: ""`.
fn composite(detail: String) -> FieldError {
    FieldError {
        field: "<nil>".into(),
        reason: "FieldValueInvalid",
        message: format!("Invalid value: \"\": {detail}"),
    }
}

impl Node {
    /// kube-openapi's schema validator on `v` at `path`, ratcheting against `old`.
    fn check(&self, value: &Value, old: Option<&Value>, path: &Path, out: &mut Vec<FieldError>) {
        if old == Some(value) {
            return;
        }
        if value.is_null() {
            if !self.ty.is_empty() && !self.nullable {
                let p = path.openapi();
                out.push(FieldError {
                    field: p.clone(),
                    reason: "FieldValueTypeInvalid",
                    message: format!(
                        "Invalid value: \"null\": {p} in body must be of type {}: \"null\"",
                        self.ty
                    ),
                });
            }
            self.check_enum(value, path, out);
            return;
        }
        if !self.ty.is_empty() && !type_matches(&self.ty, value) {
            let (p, got) = (path.openapi(), json_type(value));
            out.push(FieldError {
                field: p.clone(),
                reason: "FieldValueTypeInvalid",
                message: format!(
                    "Invalid value: \"{got}\": {p} in body must be of type {}: \"{got}\"",
                    self.ty
                ),
            });
        }
        self.check_composition(value, path, out);
        match value {
            Value::String(text) => self.check_string(value, text, path, out),
            Value::Number(_) => self.check_number(value, path, out),
            Value::Array(items) => self.check_array(items, old, path, out),
            _ => {}
        }
        self.check_enum(value, path, out);
        if let Value::Object(map) = value {
            self.check_object(map, old, path, out);
        }
    }

    fn check_enum(&self, value: &Value, path: &Path, out: &mut Vec<FieldError>) {
        let Some(allowed) = &self.enum_values else {
            return;
        };
        if allowed.iter().any(|a| values_equal(a, value)) {
            return;
        }
        let list: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(text) => go::quote(text),
                other => go::quote(&other.to_string()),
            })
            .collect();
        out.push(FieldError {
            field: path.openapi(),
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: {}",
                go::bad_value(value),
                list.join(", ")
            ),
        });
    }

    fn check_composition(&self, value: &Value, path: &Path, out: &mut Vec<FieldError>) {
        let run = |n: &Node| {
            let mut e = Vec::new();
            n.check(value, None, path, &mut e);
            e
        };
        if !self.any_of.is_empty() {
            let mut best: Option<Vec<FieldError>> = None;
            let mut ok = false;
            for b in &self.any_of {
                let e = run(b);
                if e.is_empty() {
                    ok = true;
                    break;
                }
                if best.as_ref().map(|x| e.len() < x.len()).unwrap_or(true) {
                    best = Some(e);
                }
            }
            if !ok {
                out.push(composite(format!(
                    "{} must validate at least one schema (anyOf)",
                    go::quote(&path.openapi())
                )));
                out.extend(best.unwrap_or_default());
            }
        }
        if !self.one_of.is_empty() {
            let mut best: Option<Vec<FieldError>> = None;
            let mut valid = 0;
            for b in &self.one_of {
                let e = run(b);
                if e.is_empty() {
                    valid += 1;
                } else if valid == 0 && best.as_ref().map(|x| e.len() < x.len()).unwrap_or(true) {
                    best = Some(e);
                }
            }
            if valid != 1 {
                let more = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(composite(format!(
                    "{} must validate one and only one schema (oneOf). {more}",
                    go::quote(&path.openapi())
                )));
                if valid == 0 {
                    out.extend(best.unwrap_or_default());
                }
            }
        }
        if !self.all_of.is_empty() {
            let mut valid = 0;
            for node in &self.all_of {
                let e = run(node);
                if e.is_empty() {
                    valid += 1;
                }
                out.extend(e);
            }
            if valid != self.all_of.len() {
                let more = if valid == 0 { ". None validated" } else { "" };
                out.push(composite(format!(
                    "{} must validate all the schemas (allOf){more}",
                    go::quote(&path.openapi())
                )));
            }
        }
        if let Some(n) = &self.not {
            if run(n).is_empty() {
                out.push(composite(format!(
                    "{} must not validate the schema (not)",
                    go::quote(&path.openapi())
                )));
            }
        }
    }

    fn check_string(&self, value: &Value, text: &str, path: &Path, out: &mut Vec<FieldError>) {
        if self.max_length.is_none() && self.min_length.is_none() && self.pattern.is_none() {
            return;
        }
        let len = text.chars().count() as u64;
        if let Some(max) = self.max_length {
            if len > max {
                out.push(FieldError {
                    field: path.openapi(),
                    reason: "FieldValueTooLong",
                    message: format!("Too long: may not be more than {max} bytes"),
                });
            }
        }
        if let Some(min) = self.min_length {
            if len < min {
                let p = path.openapi();
                out.push(invalid(
                    p.clone(),
                    value,
                    format!("{p} in body should be at least {min} chars long"),
                ));
            }
        }
        if let Some(pat) = &self.pattern {
            if !pat.re.as_ref().map(|re| re.is_match(text)).unwrap_or(false) {
                let p = path.openapi();
                out.push(invalid(
                    p.clone(),
                    value,
                    format!("{p} in body should match '{}'", pat.source),
                ));
            }
        }
    }

    fn check_number(&self, value: &Value, path: &Path, out: &mut Vec<FieldError>) {
        let Some(count) = value.as_f64() else { return };
        if let Some(number) = self.multiple_of {
            if number > 0.0 && (count / number).fract() != 0.0 {
                let p = path.openapi();
                out.push(invalid(
                    p.clone(),
                    value,
                    format!("{p} in body should be a multiple of {}", go::float(number)),
                ));
            }
        }
        if let Some(max) = self.maximum {
            let bad = if self.exclusive_maximum {
                count >= max
            } else {
                count > max
            };
            if bad {
                let p = path.openapi();
                let rel = if self.exclusive_maximum {
                    "less than"
                } else {
                    "less than or equal to"
                };
                out.push(invalid(
                    p.clone(),
                    value,
                    format!("{p} in body should be {rel} {}", go::float(max)),
                ));
            }
        }
        if let Some(min) = self.minimum {
            let bad = if self.exclusive_minimum {
                count <= min
            } else {
                count < min
            };
            if bad {
                let p = path.openapi();
                let rel = if self.exclusive_minimum {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                out.push(invalid(
                    p.clone(),
                    value,
                    format!("{p} in body should be {rel} {}", go::float(min)),
                ));
            }
        }
    }

    fn check_array(
        &self,
        items: &[Value],
        old: Option<&Value>,
        path: &Path,
        out: &mut Vec<FieldError>,
    ) {
        if let Some(min) = self.min_items {
            if (items.len() as u64) < min {
                let p = path.openapi();
                out.push(invalid_count(
                    p.clone(),
                    items.len(),
                    format!("{p} in body should have at least {min} items"),
                ));
            }
        }
        if let Some(max) = self.max_items {
            if items.len() as u64 > max {
                out.push(FieldError {
                    field: path.openapi(),
                    reason: "FieldValueTooMany",
                    message: format!("Too many: {}: must have at most {max} items", items.len()),
                });
            }
        }
        let Some(item_schema) = &self.items else {
            return;
        };
        let olds = old.and_then(Value::as_array);
        for (index, item) in items.iter().enumerate() {
            let object = olds.and_then(|o| self.correlate(item, o));
            item_schema.check(item, object, &path.child(Seg::Index(index)), out);
        }
    }

    /// The old item a new item of a `map` list stands for (same key values); items of
    /// other lists have none.
    fn correlate<'o>(&self, item: &Value, old: &'o [Value]) -> Option<&'o Value> {
        let Some(ListType::Map(keys)) = &self.list_type else {
            return None;
        };
        if keys.is_empty() {
            return None;
        }
        old.iter()
            .find(|object| keys.iter().all(|key| object.get(key) == item.get(key)))
    }

    fn check_object(
        &self,
        m: &Map<String, Value>,
        old: Option<&Value>,
        path: &Path,
        out: &mut Vec<FieldError>,
    ) {
        let count = m.len() as u64;
        let root = path.seg.is_none();
        if let Some(min) = self.min_properties {
            if count < min {
                let p = path.openapi();
                out.push(invalid_count(
                    p.clone(),
                    m.len(),
                    format!("{p} in body should have at least {min} properties"),
                ));
            }
        }
        if let Some(max) = self.max_properties {
            if count > max {
                out.push(FieldError {
                    field: path.openapi(),
                    reason: "FieldValueTooMany",
                    message: format!("Too many: {}: must have at most {max} items", m.len()),
                });
            }
        }
        let old_map = old.and_then(Value::as_object);
        if let Some(add) = &self.additional {
            for (key, v) in m {
                if self.properties.contains_key(key) {
                    continue;
                }
                let o = old_map.and_then(|o| o.get(key));
                add.check(v, o, &path.child(Seg::Key(key)), out);
            }
        }
        for (property, node) in &self.properties {
            if root && matches!(property.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(value) = m.get(property) {
                let object = old_map.and_then(|map| map.get(property));
                node.check(value, object, &path.child(Seg::Field(property)), out);
            }
        }
        for r in &self.required {
            if root && matches!(r.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if !m.contains_key(r) {
                out.push(FieldError {
                    field: path.child(Seg::Field(r)).openapi(),
                    reason: "FieldValueRequired",
                    message: "Required value".into(),
                });
            }
        }
    }

    /// `x-kubernetes-list-type` `set` and `map` invariants: the second of two equal items
    /// (or items with equal keys) is a `Duplicate value`.
    fn check_lists(&self, value: &Value, path: &Path, out: &mut Vec<FieldError>) {
        if !self.lists_below {
            return;
        }
        match value {
            Value::Array(items) => {
                match &self.list_type {
                    Some(ListType::Set) => {
                        for i in duplicates(items.iter()) {
                            out.push(duplicate(path.child(Seg::Index(i)).field(), &items[i]));
                        }
                    }
                    Some(ListType::Map(keys)) => check_map_list(keys, items, path, out),
                    _ => {}
                }
                if let Some(s) = &self.items {
                    for (index, item) in items.iter().enumerate() {
                        s.check_lists(item, &path.child(Seg::Index(index)), out);
                    }
                }
            }
            Value::Object(map) => {
                for (key, child) in map {
                    if let Some(node) = self.properties.get(key) {
                        node.check_lists(child, &path.child(Seg::Field(key)), out);
                    } else if let Some(a) = &self.additional {
                        a.check_lists(child, &path.child(Seg::Key(key)), out);
                    }
                }
            }
            _ => {}
        }
    }
}

fn duplicate(field: String, value: &Value) -> FieldError {
    FieldError {
        field,
        reason: "FieldValueDuplicate",
        message: format!("Duplicate value: {}", go::bad_value(value)),
    }
}

/// Indices of the second sighting of each repeated value.
fn duplicates<'a>(items: impl Iterator<Item = &'a Value>) -> Vec<usize> {
    let mut seen: Vec<(&Value, usize)> = Vec::new();
    let mut out = Vec::new();
    for (index, item) in items.enumerate() {
        match seen.iter_mut().find(|(value, _)| values_equal(value, item)) {
            Some((_, times)) => {
                *times += 1;
                if *times == 2 {
                    out.push(index);
                }
            }
            None => seen.push((item, 1)),
        }
    }
    out
}

fn check_map_list(keys: &[String], items: &[Value], path: &Path, out: &mut Vec<FieldError>) {
    for (i, item) in items.iter().enumerate() {
        if !item.is_object() && !item.is_null() {
            out.push(invalid(
                path.child(Seg::Index(i)).field(),
                item,
                "must be an object for an array of list-type map".into(),
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    let key_values: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut map = Map::new();
            for key in keys {
                if let Some(value) = x.get(key) {
                    map.insert(key.clone(), value.clone());
                }
            }
            Value::Object(map)
        })
        .collect();
    for index in duplicates(key_values.iter()) {
        out.push(duplicate(
            path.child(Seg::Index(index)).field(),
            &key_values[index],
        ));
    }
}

/// The reasons after which the real server does not run CEL rules.
fn blocking(field_error: &FieldError) -> bool {
    matches!(
        field_error.reason,
        "FieldValueNotSupported"
            | "FieldValueRequired"
            | "FieldValueTooLong"
            | "FieldValueTooMany"
            | "FieldValueTypeInvalid"
    )
}

impl Validator {
    /// Compiles an `openAPIV3Schema` (problems a CRD write reports are dropped here: see
    /// [`crd::check`]).
    pub fn new(schema: &Value) -> Validator {
        let mut ignored = Vec::new();
        let at = CompileAt {
            crd_path: String::new(),
            uncorrelatable: None,
        };
        let root = Node::compile(schema, &at, &mut ignored);
        root.each_rule(&mut |r| {
            if let Some(field) = &r.unsupported {
                tracing::warn!(rule = r.source(), function = %field, "CEL rule not enforced: localkube's CEL has no such function");
            }
        });
        Validator { root }
    }

    /// Every violation of `new` (the whole object, after pruning and defaulting), as
    /// field errors in the real server's order and wording; `old` is the stored object on
    /// an update (ratcheting, transition rules).
    pub fn validate(&self, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.root.check(new, old, &Path::ROOT, &mut errors);
        if self.root.lists_below {
            let mut old_list_errors = Vec::new();
            if let Some(object) = old {
                self.root
                    .check_lists(object, &Path::ROOT, &mut old_list_errors);
            }
            if old_list_errors.is_empty() {
                self.root.check_lists(new, &Path::ROOT, &mut errors);
            }
        }
        if self.root.rules_below {
            if errors.iter().any(blocking) {
                errors.push(FieldError {
                    field: "<nil>".into(),
                    reason: "FieldValueInvalid",
                    message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
                });
            } else {
                rules::evaluate(&self.root, new, old, &Path::ROOT, true, &mut errors);
            }
        }
        errors
    }
}

/// Removes the `null` values of fields that are not `nullable` and have no `default`, as the
/// real server does when it decodes a custom resource (a `null` with a default is then
/// defaulted; `null` list items are kept, and fail the type check).
pub fn prune_nulls(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            m.retain(|k, x| {
                let s = props.and_then(|p| p.get(k)).or(additional);
                !(x.is_null()
                    && s.map(|s| {
                        s.get("nullable").and_then(Value::as_bool) != Some(true)
                            && s.get("default").is_none()
                    })
                    .unwrap_or(false))
            });
            for (key, x) in m.iter_mut() {
                if let Some(s) = props.and_then(|map| map.get(key)).or(additional) {
                    prune_nulls(s, x);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    prune_nulls(s, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
