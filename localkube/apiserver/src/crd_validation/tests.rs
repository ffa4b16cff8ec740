//! Unit tests of the validator: each keyword with the real server's message, nesting,
//! arrays, nullable, additionalProperties and preserve-unknown-fields, list types,
//! ratcheting, CEL rules, and what a CRD write is refused for.

use super::*;
use serde_json::json;

/// (field, reason, message) of each error of `obj` against `schema`.
fn errors_of(schema: Value, obj: Value) -> Vec<(String, &'static str, String)> {
    errors_on_update(schema, obj, None)
}

fn errors_on_update(
    schema: Value,
    obj: Value,
    old: Option<Value>,
) -> Vec<(String, &'static str, String)> {
    let mut obj = obj;
    prune_nulls(&schema, &mut obj);
    crate::schema::apply_defaults(&schema, &mut obj);
    Validator::new(&schema)
        .validate(&obj, old.as_ref())
        .into_iter()
        .map(|field_error| (field_error.field, field_error.reason, field_error.message))
        .collect()
}

/// A root schema with `spec` as given.
fn spec(s: Value) -> Value {
    json!({"type": "object", "properties": {"spec": s, "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
}

fn one(field: &str, reason: &'static str, message: &str) -> Vec<(String, &'static str, String)> {
    vec![(field.to_string(), reason, message.to_string())]
}

#[test]
fn pattern_is_matched_as_go_matches_it() {
    let s = spec(
        json!({"type": "object", "properties": {"pollInterval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"}}}),
    );
    assert!(errors_of(s.clone(), json!({"spec": {"pollInterval": "5s"}})).is_empty());
    assert_eq!(
        errors_of(s, json!({"spec": {"pollInterval": "fast"}})),
        one(
            "spec.pollInterval",
            "FieldValueInvalid",
            "Invalid value: \"fast\": spec.pollInterval in body should match '^[0-9]+(ms|s|m|h)$'"
        )
    );
    // RE2's \d is ASCII only; unanchored patterns match anywhere
    let d = spec(json!({"type": "string", "pattern": "^\\d+$"}));
    assert!(errors_of(d.clone(), json!({"spec": "123"})).is_empty());
    assert_eq!(errors_of(d, json!({"spec": "١٢٣"})).len(), 1);
    let any = spec(json!({"type": "string", "pattern": "b"}));
    assert!(errors_of(any, json!({"spec": "abc"})).is_empty());
    // a pattern that does not compile matches nothing
    let bad = spec(json!({"type": "string", "pattern": "(("}));
    assert_eq!(errors_of(bad, json!({"spec": "x"})).len(), 1);
}

#[test]
fn go_regular_expressions_are_translated() {
    assert_eq!(go_regex("^\\d+$"), "^[[:digit:]]+$");
    assert_eq!(go_regex("[\\w.-]"), "[[:word:].-]");
    assert_eq!(go_regex("[]a]"), "[\\]a]");
    assert_eq!(go_regex("[^]a]"), "[^\\]a]");
    assert_eq!(go_regex("[[:alpha:]_]"), "[[:alpha:]_]");
    assert_eq!(go_regex("[a[]"), "[a\\[]");
    assert_eq!(go_regex("a\\.b\\\\d"), "a\\.b\\\\d");
    for path in [
        "^\\s\\S[\\s\\S]$",
        "[&&~~]",
        "^(0|([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?)$",
    ] {
        assert!(Regex::new(&go_regex(path)).is_ok(), "{path}");
    }
}

#[test]
fn bounds_have_the_real_messages() {
    let s = spec(json!({"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 1},
        "b": {"type": "integer", "maximum": 10},
        "c": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
        "d": {"type": "integer", "maximum": 1000000, "exclusiveMaximum": true},
        "e": {"type": "integer", "multipleOf": 5}}}));
    assert!(errors_of(
        s.clone(),
        json!({"spec": {"a": 1, "b": 10, "c": 0.5, "d": 999999, "e": 10}})
    )
    .is_empty());
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"a": 0}})),
        one(
            "spec.a",
            "FieldValueInvalid",
            "Invalid value: 0: spec.a in body should be greater than or equal to 1"
        )
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"b": 11}}))[0].2,
        "Invalid value: 11: spec.b in body should be less than or equal to 10"
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"c": 0}}))[0].2,
        "Invalid value: 0: spec.c in body should be greater than 0"
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"d": 1000000}}))[0].2,
        "Invalid value: 1000000: spec.d in body should be less than 1e+06"
    );
    assert_eq!(
        errors_of(s, json!({"spec": {"e": 7}}))[0].2,
        "Invalid value: 7: spec.e in body should be a multiple of 5"
    );
}

#[test]
fn enums_lengths_counts_and_required_have_the_real_shapes() {
    let s = spec(
        json!({"type": "object", "required": ["mode"], "properties": {
        "mode": {"type": "string", "enum": ["a", "b"]},
        "level": {"type": "integer", "enum": [1, 2]},
        "name": {"type": "string", "minLength": 2, "maxLength": 4},
        "sites": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "labels": {"type": "object", "maxProperties": 1, "minProperties": 1,
                   "additionalProperties": {"type": "string"}}}}),
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"mode": "c"}})),
        one(
            "spec.mode",
            "FieldValueNotSupported",
            "Unsupported value: \"c\": supported values: \"a\", \"b\""
        )
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"mode": "a", "level": 3}}))[0].2,
        "Unsupported value: 3: supported values: \"1\", \"2\""
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"mode": "a", "name": "x"}}))[0].2,
        "Invalid value: \"x\": spec.name in body should be at least 2 chars long"
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"mode": "a", "name": "xxxxx"}})),
        one(
            "spec.name",
            "FieldValueTooLong",
            "Too long: may not be more than 4 bytes"
        )
    );
    // lengths count characters, not bytes
    assert!(errors_of(s.clone(), json!({"spec": {"mode": "a", "name": "éééé"}})).is_empty());
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"mode": "a", "sites": []}}))[0].2,
        "Invalid value: 0: spec.sites in body should have at least 1 items"
    );
    assert_eq!(
        errors_of(
            s.clone(),
            json!({"spec": {"mode": "a", "sites": ["a", "b", "c"]}})
        ),
        one(
            "spec.sites",
            "FieldValueTooMany",
            "Too many: 3: must have at most 2 items"
        )
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"mode": "a", "labels": {}}}))[0].2,
        "Invalid value: 0: spec.labels in body should have at least 1 properties"
    );
    assert_eq!(
        errors_of(
            s.clone(),
            json!({"spec": {"mode": "a", "labels": {"x": "1", "y": "2"}}})
        )[0]
        .2,
        "Too many: 2: must have at most 1 items"
    );
    assert_eq!(
        errors_of(s, json!({"spec": {}})),
        one("spec.mode", "FieldValueRequired", "Required value")
    );
}

#[test]
fn types_are_checked_as_kube_openapi_checks_them() {
    let s = spec(json!({"type": "object", "properties": {
        "n": {"type": "integer"}, "f": {"type": "number"}, "s": {"type": "string"},
        "b": {"type": "boolean"}, "o": {"type": "object"}, "l": {"type": "array"},
        "p": {"x-kubernetes-int-or-string": true}}}));
    // an int is a number; a whole float is an integer; int-or-string takes both
    assert!(errors_of(
        s.clone(),
        json!({"spec": {"n": 3.0, "f": 3, "s": "x", "b": true, "o": {}, "l": [], "p": "http"}})
    )
    .is_empty());
    assert!(errors_of(s.clone(), json!({"spec": {"p": 80}})).is_empty());
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"n": "3"}})),
        one(
            "spec.n",
            "FieldValueTypeInvalid",
            "Invalid value: \"string\": spec.n in body must be of type integer: \"string\""
        )
    );
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {"n": 2.5}}))[0].2,
        "Invalid value: \"number\": spec.n in body must be of type integer: \"number\""
    );
    assert_eq!(
        errors_of(s, json!({"spec": {"o": []}}))[0].2,
        "Invalid value: \"array\": spec.o in body must be of type object: \"array\""
    );
}

#[test]
fn nested_objects_arrays_and_maps_name_the_field() {
    let s = spec(json!({"type": "object", "properties": {
        "sites": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "minLength": 1},
            "weight": {"type": "integer", "minimum": 0}}}},
        "limits": {"type": "object", "additionalProperties": {"type": "integer", "maximum": 5}}}}));
    let errs = errors_of(
        s,
        json!({"spec": {"sites": [{"name": "a"}, {"weight": -1}], "limits": {"cpu": 9}}}),
    );
    let fields: Vec<&str> = errs.iter().map(|error| error.0.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.limits.cpu",
            "spec.sites[1].weight",
            "spec.sites[1].name"
        ],
        "{errs:?}"
    );
    assert_eq!(
        errs[0].2,
        "Invalid value: 9: spec.limits.cpu in body should be less than or equal to 5"
    );
}

#[test]
fn nulls_are_pruned_defaulted_or_refused_as_the_real_server_does() {
    let s = spec(json!({"type": "object", "properties": {
        "a": {"type": "string"},
        "b": {"type": "string", "nullable": true},
        "c": {"type": "string", "default": "x"},
        "l": {"type": "array", "items": {"type": "string"}}}}));
    // a null in a non-nullable field is dropped; nullable keeps it; a default replaces it
    let mut obj = json!({"spec": {"a": null, "b": null, "c": null}});
    prune_nulls(&s, &mut obj);
    crate::schema::apply_defaults(&s, &mut obj);
    assert_eq!(obj, json!({"spec": {"b": null, "c": "x"}}));
    assert!(Validator::new(&s).validate(&obj, None).is_empty());
    // a null list item is kept, and is not a string
    assert_eq!(
        errors_of(s, json!({"spec": {"l": ["x", null]}})),
        one(
            "spec.l[1]",
            "FieldValueTypeInvalid",
            "Invalid value: \"null\": spec.l[1] in body must be of type string: \"null\""
        )
    );
}

#[test]
fn unknown_fields_are_not_validated_but_declared_ones_are() {
    // preserve-unknown-fields with properties: the declared ones are validated
    let s = spec(
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"size": {"type": "integer", "minimum": 1}}}),
    );
    assert!(errors_of(
        s.clone(),
        json!({"spec": {"anything": {"deep": [1]}, "size": 1}})
    )
    .is_empty());
    assert_eq!(errors_of(s, json!({"spec": {"size": 0}})).len(), 1);
    // additionalProperties: true takes anything
    let s = spec(json!({"type": "object", "additionalProperties": true}));
    assert!(errors_of(s, json!({"spec": {"x": 1, "y": "z"}})).is_empty());
}

#[test]
fn compositions_report_as_kube_openapi_does() {
    let s = spec(json!({"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[a-z]+$"}]},
        "both": {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]},
        "not": {"type": "string", "not": {"enum": ["forbidden"]}}}}));
    assert!(errors_of(
        s.clone(),
        json!({"spec": {"port": 80, "both": "ab", "not": "ok"}})
    )
    .is_empty());
    assert!(errors_of(s.clone(), json!({"spec": {"port": "http"}})).is_empty());
    let errs = errors_of(s.clone(), json!({"spec": {"port": "HTTP"}}));
    assert_eq!(
        errs[0],
        (
            "<nil>".to_string(),
            "FieldValueInvalid",
            "Invalid value: \"\": \"spec.port\" must validate at least one schema (anyOf)"
                .to_string()
        ),
        "{errs:?}"
    );
    let errs = errors_of(s.clone(), json!({"spec": {"both": "abcd"}}));
    assert!(
        errs.iter().any(|error| error
            .2
            .ends_with("\"spec.both\" must validate all the schemas (allOf)")),
        "{errs:?}"
    );
    let errs = errors_of(s, json!({"spec": {"not": "forbidden"}}));
    assert_eq!(
        errs[0].2,
        "Invalid value: \"\": \"spec.not\" must not validate the schema (not)"
    );
}

#[test]
fn list_types_refuse_duplicates() {
    let s = spec(json!({"type": "object", "properties": {
        "sites": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "rw": {"type": "boolean"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}));
    assert!(errors_of(
        s.clone(),
        json!({"spec": {"sites": [{"name": "a"}, {"name": "b"}], "tags": ["x", "y"]}})
    )
    .is_empty());
    assert_eq!(
        errors_of(
            s.clone(),
            json!({"spec": {"sites": [{"name": "a", "rw": true}, {"name": "a"}, {"name": "a"}]}})
        ),
        one(
            "spec.sites[1]",
            "FieldValueDuplicate",
            "Duplicate value: map[string]interface {}{\"name\":\"a\"}"
        )
    );
    assert_eq!(
        errors_of(s, json!({"spec": {"tags": ["x", "y", "x"]}})),
        one(
            "spec.tags[2]",
            "FieldValueDuplicate",
            "Duplicate value: \"x\""
        )
    );
}

#[test]
fn unchanged_values_are_not_validated_again_on_update() {
    let s = spec(json!({"type": "object", "properties": {
        "pollInterval": {"type": "string", "pattern": "^[0-9]+s$"},
        "size": {"type": "integer", "minimum": 1},
        "sites": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "weight": {"type": "integer", "minimum": 0}}}}}}));
    let stored = json!({"metadata": {"name": "x"}, "spec": {"pollInterval": "fast", "size": 1,
        "sites": [{"name": "a", "weight": -1}, {"name": "b", "weight": 1}]},
        "status": {"phase": "A"}});
    // a status or metadata write leaves the stored spec alone: accepted
    let mut status = stored.clone();
    status["status"]["phase"] = json!("B");
    status["metadata"]["labels"] = json!({"a": "b"});
    assert!(errors_on_update(s.clone(), status, Some(stored.clone())).is_empty());
    // another spec field changes: only it is validated
    let mut other = stored.clone();
    other["spec"]["size"] = json!(2);
    other["spec"]["sites"] = json!([{"name": "b", "weight": 2}, {"name": "a", "weight": -1}]);
    assert!(errors_on_update(s.clone(), other.clone(), Some(stored.clone())).is_empty());
    other["spec"]["size"] = json!(0);
    assert_eq!(
        errors_on_update(s.clone(), other, Some(stored.clone()))
            .into_iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        ["spec.size"]
    );
    // the invalid value itself changes to another invalid one: refused
    let mut changed = stored.clone();
    changed["spec"]["pollInterval"] = json!("faster");
    assert_eq!(
        errors_on_update(s.clone(), changed, Some(stored.clone())).len(),
        1
    );
    // a create is validated whole
    assert_eq!(errors_of(s, stored).len(), 2);
}

fn cel_schema() -> Value {
    json!({"type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('g-')", "message": "name must start with g-"}],
        "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.initialActiveSite in self.sites.map(s, s.name)", "message": "initialActiveSite must be one of the sites", "fieldPath": ".initialActiveSite"},
            {"rule": "self.sites.all(s, s.name != '')"},
            {"rule": "!has(self.replicas) || self.replicas >= 1", "messageExpression": "'replicas must be at least 1, not ' + string(self.replicas)"},
            {"rule": "!has(self.forbidden)", "message": "forbidden is forbidden", "reason": "FieldValueForbidden", "fieldPath": ".forbidden"}],
        "properties": {
            "initialActiveSite": {"type": "string"},
            "replicas": {"type": "integer"},
            "forbidden": {"type": "string"},
            "mode": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "mode is immutable"}]},
            "pollInterval": {"type": "string", "x-kubernetes-validations": [{"rule": "duration(self) > duration('0s')", "message": "must be a positive duration"}]},
            "sites": {"type": "array", "maxItems": 5, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "rw": {"type": "boolean"}},
                    "x-kubernetes-validations": [{"rule": "!has(oldSelf.rw) || self.rw == oldSelf.rw", "message": "rw is immutable"}]}}}}}})
}

fn group(spec: Value) -> Value {
    json!({"apiVersion": "x.io/v1", "kind": "G", "metadata": {"name": "g-1"}, "spec": spec})
}

#[test]
fn cel_rules_refuse_with_their_message_field_and_reason() {
    let s = cel_schema();
    let good =
        group(json!({"initialActiveSite": "a", "sites": [{"name": "a"}], "pollInterval": "5s"}));
    assert!(errors_of(s.clone(), good).is_empty());
    let errs = errors_of(
        s.clone(),
        group(
            json!({"initialActiveSite": "z", "sites": [{"name": "a"}], "replicas": 0, "forbidden": "x", "pollInterval": "0s"}),
        ),
    );
    assert_eq!(
        errs,
        vec![
            (
                "spec.initialActiveSite".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"object\": initialActiveSite must be one of the sites".to_string()
            ),
            (
                "spec".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"object\": replicas must be at least 1, not 0".to_string()
            ),
            (
                "spec.forbidden".to_string(),
                "FieldValueForbidden",
                "Forbidden: forbidden is forbidden".to_string()
            ),
            (
                "spec.pollInterval".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"string\": must be a positive duration".to_string()
            ),
        ]
    );
    // no message: `failed rule: <rule>`; a root rule has no path (`<nil>`)
    let mut obj = group(json!({"initialActiveSite": "", "sites": [{"name": ""}]}));
    obj["metadata"]["name"] = json!("x");
    let errs = errors_of(s, obj);
    assert_eq!(
        errs,
        vec![
            (
                "<nil>".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"object\": name must start with g-".to_string()
            ),
            (
                "spec".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"object\": failed rule: self.sites.all(s, s.name != '')"
                    .to_string()
            ),
        ]
    );
}

#[test]
fn cel_rules_do_not_run_after_a_blocking_error() {
    let errs = errors_of(
        cel_schema(),
        group(
            json!({"initialActiveSite": "z", "sites": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}, {"name": "e"}, {"name": "f"}]}),
        ),
    );
    assert_eq!(
        errs,
        vec![
            (
                "spec.sites".to_string(),
                "FieldValueTooMany",
                "Too many: 6: must have at most 5 items".to_string()
            ),
            (
                "<nil>".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string()
            )
        ]
    );
}

#[test]
fn transition_rules_compare_with_the_correlated_old_value() {
    let s = cel_schema();
    let old = group(
        json!({"initialActiveSite": "a", "mode": "x", "sites": [{"name": "a", "rw": true}, {"name": "b"}]}),
    );
    // a create has no oldSelf: transition rules do not run
    assert!(errors_of(s.clone(), old.clone()).is_empty());
    let mut new = old.clone();
    new["spec"]["mode"] = json!("y");
    // items are correlated by key, whatever their order
    new["spec"]["sites"] = json!([{"name": "b", "rw": true}, {"name": "a", "rw": false}]);
    let errs = errors_on_update(s.clone(), new, Some(old.clone()));
    assert_eq!(
        errs,
        vec![
            (
                "spec.mode".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"string\": mode is immutable".to_string()
            ),
            (
                "spec.sites[1]".to_string(),
                "FieldValueInvalid",
                "Invalid value: \"object\": rw is immutable".to_string()
            ),
        ]
    );
    // optionalOldSelf: runs on create too, oldSelf an optional
    let s = spec(json!({"type": "string", "x-kubernetes-validations": [
        {"rule": "oldSelf.hasValue() || self == 'first'", "optionalOldSelf": true, "message": "must start as first"}]}));
    assert_eq!(errors_of(s.clone(), json!({"spec": "second"})).len(), 1);
    assert!(errors_of(s.clone(), json!({"spec": "first"})).is_empty());
    assert!(
        errors_on_update(s, json!({"spec": "second"}), Some(json!({"spec": "first"}))).is_empty()
    );
}

#[test]
fn cel_rules_ratchet_unchanged_values() {
    let s = cel_schema();
    let stored = group(json!({"initialActiveSite": "z", "sites": [{"name": "a"}]}));
    // stored before the rule existed; a status write leaves spec as it was
    let mut new = stored.clone();
    new["status"] = json!({"phase": "x"});
    assert!(errors_on_update(s.clone(), new.clone(), Some(stored.clone())).is_empty());
    new["spec"]["replicas"] = json!(2);
    assert_eq!(
        errors_on_update(s, new, Some(stored))[0].2,
        "Invalid value: \"object\": initialActiveSite must be one of the sites"
    );
}

#[test]
fn evaluation_errors_and_unknown_functions() {
    let s = spec(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "x-kubernetes-validations": [
        {"rule": "self.a > 0"},
        {"rule": "self.isSorted()"}]}),
    );
    // a missing field is an evaluation error, as in cel-go
    assert_eq!(
        errors_of(s.clone(), json!({"spec": {}})),
        one(
            "spec",
            "FieldValueInvalid",
            "Invalid value: \"object\": no such key: a evaluating rule: self.a > 0"
        )
    );
    // a function of the Kubernetes libraries is not enforced
    assert!(errors_of(s, json!({"spec": {"a": 1}})).is_empty());
}

#[test]
fn crd_writes_are_refused_for_rules_that_do_not_compile() {
    let crd = json!({"metadata": {"name": "gs.x.io"}, "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema":
        {"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.x >"}, {"rule": "true", "reason": "Nope"}],
            "properties": {"l": {"type": "array", "items": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}}}}}]}});
    let errs = crd::errors(&crd);
    let fields: Vec<&str> = errs
        .iter()
        .map(|field_error| field_error.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[l].items.x-kubernetes-validations[0].rule",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].reason",
        ],
        "{errs:?}"
    );
    assert!(
        errs[0].message.ends_with("oldSelf cannot be used on the uncorrelatable portion of the schema within spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[l]"),
        "{}",
        errs[0].message
    );
    assert!(
        errs[1].message.starts_with("Invalid value: apiextensions.ValidationRule{Rule:\"self.x >\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:9: Syntax error:"),
        "{}",
        errs[1].message
    );
    let error = crd::check(&crd).expect_err("refused");
    assert_eq!(error.code, 422);
    assert!(error
        .message
        .starts_with("CustomResourceDefinition.apiextensions.k8s.io \"gs.x.io\" is invalid: ["));
}
