//! CEL `x-kubernetes-validations`, evaluated with the `cel` crate (the CEL standard
//! library, its macros and the strings extension), as apiextensions-apiserver 1.32 does:
//!
//! - `self` is the value at the rule's node, converted as its schema says (`integer` to
//!   int, `number` to double, objects to maps of their present fields); at the root it has
//!   `apiVersion`, `kind` and `metadata.name`/`metadata.generateName` too;
//! - a rule on `oldSelf` (a transition rule) runs only on an update where the old value at
//!   the same place exists (object fields by name, `map` list items by their keys), or
//!   always with `optionalOldSelf`, `oldSelf` then an optional;
//! - a failed rule is `Invalid value: "<schema type>": <message>` at the node's path (with
//!   `fieldPath` appended), or `Forbidden`/`Required value`/`Duplicate value` per `reason`;
//!   the message is `messageExpression`'s string when it yields a non-empty one, else
//!   `message`, else `failed rule: <rule>`;
//! - an evaluation error is `<error> evaluating rule: <rule>`; an unchanged value is not
//!   validated again by rules without `oldSelf` (ratcheting).
//!
//! Not done: type checking at compile time (a rule is only parsed; a mistyped one fails
//! when it runs, as an evaluation error, where the real server refuses the CRD), the cost
//! budget, and the Kubernetes CEL libraries (a rule calling one of their functions is
//! skipped, with a warning logged when it is compiled).

use super::{go, CompileAt, Node, Path, Seg};
use crate::error::FieldError;
use cel::objects::{Key, Map as CelMap, OptionalValue};
use cel::{Context, Env, ExecutionError, Program, Value as Cel};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The reasons a rule may give.
const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// One compiled `x-kubernetes-validations` entry.
pub(crate) struct Rule {
    rule: String,
    message: String,
    message_expression: Option<Program>,
    reason: Option<String>,
    field_path: String,
    program: Result<Program, String>,
    pub(crate) uses_old_self: bool,
    optional_old_self: bool,
    /// A function the rule calls that this CEL does not have.
    pub(crate) unsupported: Option<String>,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Rule")
            .field("rule", &self.rule)
            .finish()
    }
}

impl Rule {
    /// The rule's source.
    pub(crate) fn source(&self) -> &str {
        &self.rule
    }
}

/// The CEL environment rules run in, built once.
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // the strings extension is part of the Kubernetes CEL environment
        if let Err(declaration_error) = env.add_extension(cel::extensions::strings) {
            tracing::warn!(error = %declaration_error, "the CEL strings extension could not be added");
        }
        Arc::new(env)
    })
}

/// The first function `program` calls that the environment does not declare (operators
/// and macros are not functions here).
fn unsupported_function(program: &Program) -> Option<String> {
    let refs = program.references();
    for reference in refs.functions() {
        let plain = reference
            .chars()
            .next()
            .map(|c| c.is_ascii_alphabetic())
            .unwrap_or(false)
            && reference.chars().all(|character| {
                character.is_ascii_alphanumeric() || character == '_' || character == '.'
            });
        if !plain {
            continue;
        }
        // adding a function the environment already declares is refused
        let mut probe = Context::with_env(env().clone());
        if probe.add_function(reference, |number: i64| number).is_ok() {
            return Some(reference.to_string());
        }
    }
    None
}

/// `apiextensions.ValidationRule` as Go's `%#v` prints it in a CRD's field errors.
fn go_rule(r: &Value) -> String {
    let s = |k: &str| go::quote(r.get(k).and_then(Value::as_str).unwrap_or_default());
    let ptr = |key: &str, text: &str| match r.get(key) {
        None | Some(Value::Null) => format!("(*{text})(nil)"),
        Some(value) => format!("(*{text})({value})"),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        s("rule"),
        s("message"),
        s("messageExpression"),
        ptr("reason", "apiextensions.FieldValueErrorReason"),
        s("fieldPath"),
        ptr("optionalOldSelf", "bool"),
    )
}

/// `fieldPath` as the real server normalizes it: no leading dot, `['k']` as `[k]`.
fn normalize_field_path(path: &str) -> String {
    path.trim_start_matches('.')
        .replace("['", "[")
        .replace("']", "]")
}

/// Compiles a node's rules; what a real server refuses the CRD for goes to `errors`, at
/// `at.crd_path`.
pub(crate) fn compile_all(
    list: &[Value],
    at: &CompileAt,
    errors: &mut Vec<FieldError>,
) -> Vec<Rule> {
    list.iter()
        .enumerate()
        .map(|(index, entry)| {
            let base = format!("{}.x-kubernetes-validations[{index}]", at.crd_path);
            let base = base.trim_start_matches('.');
            check_rule_fields(entry, base, errors);
            compile_rule(entry, base, at, errors)
        })
        .collect()
}

/// The checks of one `x-kubernetes-validations` entry's fields (at `base`): rule,
/// message, messageExpression, reason and fieldPath, in the real server's order.
fn check_rule_fields(entry: &Value, base: &str, errors: &mut Vec<FieldError>) {
    let str_of = |key: &str| entry.get(key).and_then(Value::as_str);
    let rule = str_of("rule").unwrap_or_default();
    if rule.trim().is_empty() {
        errors.push(FieldError::required(
            &format!("{base}.rule"),
            "rule is not specified",
        ));
    }
    if let Some(message) = str_of("message") {
        if message.trim().is_empty() {
            errors.push(FieldError::invalid(
                &format!("{base}.message"),
                &Value::String(message.into()),
                "message must be non-empty if specified",
            ));
        } else if message.contains('\n') {
            errors.push(FieldError::invalid(
                &format!("{base}.message"),
                &Value::String(message.into()),
                "message must not contain line breaks",
            ));
        }
    } else if rule.contains('\n') {
        errors.push(FieldError::required(
            &format!("{base}.message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if str_of("messageExpression").map(|expression| expression.trim().is_empty()) == Some(true) {
        errors.push(FieldError::required(
            &format!("{base}.messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = str_of("reason") {
        if !REASONS.contains(&reason) {
            errors.push(FieldError::not_supported(
                &format!("{base}.reason"),
                reason,
                &REASONS,
            ));
        }
    }
    if let Some(field_path) = str_of("fieldPath") {
        let detail = if field_path.trim().is_empty() {
            Some("fieldPath must be non-empty if specified")
        } else if field_path.contains('\n') {
            Some("fieldPath must not contain line breaks")
        } else {
            None
        };
        if let Some(detail) = detail {
            errors.push(FieldError::invalid(
                &format!("{base}.fieldPath"),
                &Value::String(field_path.into()),
                detail,
            ));
        }
    }
}

/// Compiles one entry's rule and messageExpression (failures go to `errors`, as does
/// `oldSelf` where the schema is uncorrelatable).
fn compile_rule(entry: &Value, base: &str, at: &CompileAt, errors: &mut Vec<FieldError>) -> Rule {
    let str_of = |key: &str| entry.get(key).and_then(Value::as_str);
    let rule = str_of("rule").unwrap_or_default().to_string();
    let program = env().compile(&rule).map_err(|error| error.to_string());
    if let Err(error) = &program {
        if !rule.trim().is_empty() {
            errors.push(FieldError {
                field: format!("{base}.rule"),
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {}: compilation failed: {error}",
                    go_rule(entry)
                ),
            });
        }
    }
    let uses_old_self = program
        .as_ref()
        .map(|program| program.references().has_variable("oldSelf"))
        .unwrap_or(false);
    if uses_old_self {
        if let Some(within) = &at.uncorrelatable {
            errors.push(FieldError::invalid(
                &format!("{base}.rule"),
                &Value::String(rule.clone()),
                &format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {}",
                    within.trim_start_matches('.')
                ),
            ));
        }
    }
    let message_expression =
        match str_of("messageExpression").filter(|expression| !expression.trim().is_empty()) {
            Some(expression) => match env().compile(expression) {
                Ok(program) => Some(program),
                Err(error) => {
                    errors.push(FieldError {
                        field: format!("{base}.messageExpression"),
                        reason: "FieldValueInvalid",
                        message: format!(
                            "Invalid value: {}: messageExpression compilation failed: {error}",
                            go_rule(entry)
                        ),
                    });
                    None
                }
            },
            None => None,
        };
    let unsupported = program.as_ref().ok().and_then(unsupported_function);
    Rule {
        rule,
        message: str_of("message").unwrap_or_default().trim().to_string(),
        message_expression,
        reason: str_of("reason").map(String::from),
        field_path: str_of("fieldPath")
            .map(normalize_field_path)
            .unwrap_or_default(),
        program,
        uses_old_self,
        optional_old_self: entry.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
        unsupported,
    }
}

/// A JSON value as CEL sees it under `node` (`None`: no schema, every field kept).
fn to_cel(value: &Value, node: Option<&Node>) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(flag) => Cel::Bool(*flag),
        Value::Number(number) => {
            let double = node.map(|s| s.ty == "number").unwrap_or(false);
            match number.as_i64() {
                Some(index) if !double => Cel::Int(index),
                _ => Cel::Float(number.as_f64().unwrap_or(0.0)),
            }
        }
        Value::String(text) => Cel::String(Arc::new(text.clone())),
        Value::Array(items) => {
            let s = node.and_then(|n| n.items.as_deref());
            Cel::List(Arc::new(items.iter().map(|item| to_cel(item, s)).collect()))
        }
        Value::Object(m) => {
            let mut map: HashMap<Key, Cel> = HashMap::with_capacity(m.len());
            for (key, x) in m {
                let s = match node {
                    Some(n) => match n.child_schema(key) {
                        Some(s) => Some(s),
                        // pruned already, unless unknown fields are kept
                        None if n.preserve_unknown || n.properties.is_empty() => None,
                        None => continue,
                    },
                    None => None,
                };
                map.insert(Key::from(key.clone()), to_cel(x, s));
            }
            Cel::Map(CelMap { map: Arc::new(map) })
        }
    }
}

/// `self` at the root: the schema's fields, `apiVersion`, `kind`, and of `metadata` only
/// `name` and `generateName`.
fn root_to_cel(value: &Value, node: &Node) -> Cel {
    let mut obj = value.clone();
    if let Some(m) = obj.as_object_mut() {
        let mut meta = serde_json::Map::new();
        for k in ["name", "generateName"] {
            if let Some(x) = value.pointer(&format!("/metadata/{k}")) {
                meta.insert(k.into(), x.clone());
            }
        }
        m.insert("metadata".into(), Value::Object(meta));
    }
    match to_cel(&obj, Some(node)) {
        Cel::Map(mut map) => {
            let inner = Arc::make_mut(&mut map.map);
            for key in ["apiVersion", "kind", "metadata"] {
                if let Some(x) = obj.get(key) {
                    inner.insert(Key::from(key.to_string()), to_cel(x, None));
                }
            }
            Cel::Map(map)
        }
        other => other,
    }
}

fn field_error(field: String, ty: &str, detail: String, reason: Option<&str>) -> FieldError {
    match reason {
        Some("FieldValueForbidden") => FieldError {
            field,
            reason: "FieldValueForbidden",
            message: format!("Forbidden: {detail}"),
        },
        Some("FieldValueRequired") => FieldError {
            field,
            reason: "FieldValueRequired",
            message: format!("Required value: {detail}"),
        },
        Some("FieldValueDuplicate") => FieldError {
            field,
            reason: "FieldValueDuplicate",
            message: format!("Duplicate value: {}", go::quote(ty)),
        },
        _ => FieldError {
            field,
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {}: {detail}", go::quote(ty)),
        },
    }
}

/// How cel-go words an evaluation error, as the real server reports it.
fn eval_error(execution_error: &ExecutionError, rule_text: &str) -> String {
    match execution_error {
        ExecutionError::NoSuchOverload(_) => format!(
            "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}"
        ),
        ExecutionError::NoSuchKey(text) => format!("no such key: {text} evaluating rule: {rule_text}"),
        other => format!("{other} evaluating rule: {rule_text}"),
    }
}

impl Rule {
    /// `ruleErrorString`: the message, else the rule.
    fn error_string(&self) -> &str {
        if self.message.is_empty() {
            self.rule.trim()
        } else {
            &self.message
        }
    }

    /// `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.rule.trim())
        } else {
            self.message.clone()
        }
    }
}

/// Runs the rules of `node` and below on `v` (at `path`; `old` the correlated old value).
pub(crate) fn evaluate(
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    path: &Path,
    root: bool,
    out: &mut Vec<FieldError>,
) {
    if !node.rules_below || value.is_null() {
        return;
    }
    let unchanged = old == Some(value);
    if unchanged && !node.old_self_below {
        return;
    }
    if !node.rules.is_empty() {
        run_rules(node, value, old, path, root, unchanged, out);
    }
    match value {
        Value::Object(m) => {
            let old_map = if node.map_atomic {
                None
            } else {
                old.and_then(Value::as_object)
            };
            for (key, child) in m {
                if root && key == "metadata" {
                    continue;
                }
                let o = old_map.and_then(|map| map.get(key));
                if let Some(s) = node.properties.get(key) {
                    evaluate(s, child, o, &path.child(Seg::Field(key)), false, out);
                } else if let Some(a) = &node.additional {
                    evaluate(a, child, o, &path.child(Seg::Key(key)), false, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = &node.items {
                let olds = old.and_then(Value::as_array);
                for (index, item) in items.iter().enumerate() {
                    let object = olds.and_then(|o| node.correlate(item, o));
                    evaluate(s, item, object, &path.child(Seg::Index(index)), false, out);
                }
            }
        }
        _ => {}
    }
}

fn run_rules(
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    path: &Path,
    root: bool,
    unchanged: bool,
    out: &mut Vec<FieldError>,
) {
    let convert = |x: &Value| {
        if root {
            root_to_cel(x, node)
        } else {
            to_cel(x, Some(node))
        }
    };
    let mut self_value: Option<Cel> = None;
    let mut old_value: Option<Option<Cel>> = None;
    for rule in &node.rules {
        // ratcheting: an unchanged value is not validated again, but for transitions
        if unchanged && !rule.uses_old_self {
            continue;
        }
        if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
            continue;
        }
        let program = match &rule.program {
            Ok(p) => p,
            Err(e) => {
                out.push(FieldError {
                    field: path.field(),
                    reason: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {}: rule compile error: {e}",
                        go::quote(&node.ty)
                    ),
                });
                continue;
            }
        };
        if rule.unsupported.is_some() {
            continue;
        }
        let mut ctx = Context::with_env(env().clone());
        let this = self_value.get_or_insert_with(|| convert(value)).clone();
        ctx.add_variable_from_value("self", this);
        if rule.uses_old_self {
            let o = old_value.get_or_insert_with(|| old.map(&convert)).clone();
            let bound = match (o, rule.optional_old_self) {
                (Some(o), false) => o,
                (Some(object), true) => Cel::Opaque(Arc::new(OptionalValue::of(object))),
                (None, _) => Cel::Opaque(Arc::new(OptionalValue::none())),
            };
            ctx.add_variable_from_value("oldSelf", bound);
        }
        match program.execute(&ctx) {
            Ok(Cel::Bool(true)) => continue,
            Ok(Cel::Bool(false)) => {}
            Ok(other) => {
                out.push(FieldError {
                    field: path.field(),
                    reason: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {}: rule evaluated to {:?}, not a bool, evaluating rule: {}",
                        go::quote(&node.ty),
                        other.type_of().to_string(),
                        rule.error_string()
                    ),
                });
                continue;
            }
            Err(error) => {
                out.push(FieldError {
                    field: path.field(),
                    reason: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {}: {}",
                        go::quote(&node.ty),
                        eval_error(&error, rule.error_string())
                    ),
                });
                continue;
            }
        }
        let detail = rule
            .message_expression
            .as_ref()
            .and_then(|m| match m.execute(&ctx) {
                Ok(Cel::String(text)) if !text.trim().is_empty() => Some(text.to_string()),
                _ => None,
            })
            .unwrap_or_else(|| rule.message_or_default());
        out.push(field_error(
            path.field_with(&rule.field_path),
            &node.ty,
            detail,
            rule.reason.as_deref(),
        ));
    }
}
