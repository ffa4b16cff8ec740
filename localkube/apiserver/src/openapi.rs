//! `/openapi/v2`: one Swagger 2.0 document of every served kind, built from the OpenAPI v3
//! documents of [`discovery`](super::discovery) (the same schemas, `#/definitions/` refs,
//! v3-only keywords dropped as the real server's v2 conversion drops them), as JSON and as
//! the gnostic `openapi.v2.Document` protobuf client-go's `OpenAPISchema()` asks for
//! (`kubectl explain --output=plaintext-openapiv2`). The protobuf form carries `swagger`,
//! `info` and `definitions`, not `paths` (no client of this cluster reads v2 paths).

use super::discovery;
use super::registry::ResourceInfo;
use serde_json::{json, Map, Value};

/// The media type clients ask for the protobuf form with.
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The other spelling of [`PROTOBUF`], which the real server also accepts and answers as
/// its `Content-Type` (`@` is not a token character: Go's `mime.ParseMediaType`, which
/// client-go runs on every response, refuses the first spelling).
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// Nesting depth a schema is converted to (a bound on a CRD's recursion).
const DEPTH_MAX: usize = 64;
/// Largest number of `Accept` clauses looked at.
const CLAUSES_MAX: usize = 32;
/// Schema keywords Swagger 2.0 has; others (`nullable`, `anyOf`, `oneOf`, `not`) are
/// dropped, as the real server drops them from CRD schemas for v2.
const KEYWORDS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "readOnly",
    "example",
];

/// The form a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json` (also no `Accept`, `*/*`).
    Json,
    /// [`PROTOBUF`].
    Protobuf,
}

/// Negotiates `Accept` as the real OpenAPI handler does: the first clause it can serve wins;
/// none is 406.
pub fn negotiate(accept: Option<&str>) -> Option<Format> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Some(Format::Json);
    };
    accept.split(',').take(CLAUSES_MAX).find_map(|clause| {
        let mut parts = clause.split(';').map(str::trim);
        let media = parts.next()?.to_ascii_lowercase();
        if parts.any(|path| path.replace(' ', "") == "q=0") {
            return None;
        }
        match media.as_str() {
            "application/json" | "application/*" | "*/*" => Some(Format::Json),
            message if message == PROTOBUF || message == PROTOBUF_CONTENT_TYPE => {
                Some(Format::Protobuf)
            }
            _ => None,
        }
    })
}

/// The Swagger 2.0 document of every served resource.
pub fn document(resources: &[ResourceInfo]) -> Value {
    let mut definitions = Map::new();
    let mut paths = Map::new();
    for rs in discovery::by_openapi_path(resources).values() {
        let v3 = discovery::openapi_gv(rs);
        if let Some(schemas) = v3.pointer("/components/schemas").and_then(Value::as_object) {
            for (name, s) in schemas {
                definitions.insert(name.clone(), schema(s, 0));
            }
        }
        if let Some(v3_paths) = v3.get("paths").and_then(Value::as_object) {
            for (v3_path, item) in v3_paths {
                paths.insert(v3_path.clone(), path_item(item));
            }
        }
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths, "definitions": definitions})
}

/// A v3 schema as a v2 one.
fn schema(s: &Value, depth: usize) -> Value {
    let Some(m) = s.as_object() else {
        return s.clone();
    };
    if depth >= DEPTH_MAX {
        return json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    }
    // `allOf: [{$ref}]` (v3's way to put siblings next to a ref) is a plain ref in v2.
    if let Some([only]) = m.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        if let Some(r) = only.get("$ref") {
            let mut out = Map::new();
            out.insert("$ref".into(), reference(r));
            if let Some(description) = m.get("description") {
                out.insert("description".into(), description.clone());
            }
            return Value::Object(out);
        }
    }
    let mut out = Map::new();
    for (k, value) in m {
        let converted = match k.as_str() {
            "$ref" => reference(value),
            "properties" => Value::Object(
                value
                    .as_object()
                    .map(|map| {
                        map.iter()
                            .map(|(name, s)| (name.clone(), schema(s, depth + 1)))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "items" | "additionalProperties" if value.is_object() => schema(value, depth + 1),
            "allOf" => Value::Array(
                value
                    .as_array()
                    .map(|a| a.iter().map(|s| schema(s, depth + 1)).collect())
                    .unwrap_or_default(),
            ),
            key if key.starts_with("x-") || KEYWORDS.contains(&key) => value.clone(),
            _ => continue,
        };
        out.insert(k.clone(), converted);
    }
    Value::Object(out)
}

fn reference(r: &Value) -> Value {
    let reason = r.as_str().unwrap_or_default();
    json!(reason.replace("#/components/schemas/", "#/definitions/"))
}

/// A v3 path item's operations as v2 ones: query and path parameters with their type, the
/// request body as an `in: body` parameter, responses with their schema.
fn path_item(item: &Value) -> Value {
    let mut out = Map::new();
    for (k, value) in item.as_object().into_iter().flatten() {
        if k == "parameters" {
            out.insert(k.clone(), parameters(value, None));
            continue;
        }
        let mut map = Map::new();
        for key in ["operationId", "description", "tags"] {
            if let Some(x) = value.get(key) {
                map.insert(key.into(), x.clone());
            }
        }
        for (key, x) in value.as_object().into_iter().flatten() {
            if key.starts_with("x-") {
                map.insert(key.clone(), x.clone());
            }
        }
        let body = value.get("requestBody");
        if let Some(content) = body
            .and_then(|b| b.get("content"))
            .and_then(Value::as_object)
        {
            map.insert(
                "consumes".into(),
                json!(content.keys().cloned().collect::<Vec<_>>()),
            );
        }
        map.insert(
            "produces".into(),
            json!(["application/json", "application/yaml"]),
        );
        map.insert(
            "parameters".into(),
            parameters(value.get("parameters").unwrap_or(&Value::Null), body),
        );
        let mut responses = Map::new();
        for (code, r) in value
            .get("responses")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let mut resp =
                json!({"description": r.get("description").cloned().unwrap_or(json!(""))});
            if let Some(s) = r.pointer("/content/application~1json/schema") {
                resp["schema"] = schema(s, 0);
            }
            responses.insert(code.clone(), resp);
        }
        map.insert("responses".into(), Value::Object(responses));
        out.insert(k.clone(), Value::Object(map));
    }
    Value::Object(out)
}

fn parameters(params: &Value, body: Option<&Value>) -> Value {
    let mut out: Vec<Value> = params
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut v2 = json!({"name": p.get("name"), "in": p.get("in"),
                "type": p.pointer("/schema/type").cloned().unwrap_or(json!("string"))});
            for key in ["description", "required"] {
                if let Some(x) = p.get(key) {
                    v2[key] = x.clone();
                }
            }
            if p.pointer("/schema/uniqueItems") == Some(&json!(true)) {
                v2["uniqueItems"] = json!(true);
            }
            v2
        })
        .collect();
    if let Some(s) = body.and_then(|b| b.pointer("/content/application~1json/schema")) {
        out.push(json!({"name": "body", "in": "body", "required": true, "schema": schema(s, 0)}));
    }
    Value::Array(out)
}

/// The document as a gnostic `openapi.v2.Document` (field numbers of gnostic's
/// `OpenAPIv2.proto`): `swagger` (1), `info` (2), `definitions` (9).
pub fn protobuf(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(&mut out, 1, doc["swagger"].as_str().unwrap_or("2.0"));
    let mut info = Vec::new();
    put_str(
        &mut info,
        1,
        doc["info"]["title"].as_str().unwrap_or_default(),
    );
    put_str(
        &mut info,
        2,
        doc["info"]["version"].as_str().unwrap_or_default(),
    );
    put_msg(&mut out, 2, &info);
    let mut definitions = Vec::new();
    for (name, s) in doc["definitions"].as_object().into_iter().flatten() {
        put_msg(&mut definitions, 1, &named_schema(name, s));
    }
    put_msg(&mut out, 9, &definitions);
    out
}

/// `NamedSchema` {name 1, value 2}.
fn named_schema(name: &str, s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(&mut out, 1, name);
    put_msg(&mut out, 2, &schema_message(s));
    out
}

/// How a scalar field of gnostic's `Schema` is written.
#[derive(Clone, Copy)]
enum Encoding {
    Text,
    Double,
    Boolean,
    Integer,
    /// A gnostic `Any` (the value as YAML).
    Any,
}

/// The scalar fields of gnostic's `Schema`: (JSON key, field number, encoding).
#[rustfmt::skip]
const SCHEMA_SCALARS: &[(&str, u32, Encoding)] = &[
    ("$ref", 1, Encoding::Text),
    ("format", 2, Encoding::Text),
    ("title", 3, Encoding::Text),
    ("description", 4, Encoding::Text),
    ("default", 5, Encoding::Any),
    ("multipleOf", 6, Encoding::Double),
    ("maximum", 7, Encoding::Double),
    ("exclusiveMaximum", 8, Encoding::Boolean),
    ("minimum", 9, Encoding::Double),
    ("exclusiveMinimum", 10, Encoding::Boolean),
    ("maxLength", 11, Encoding::Integer),
    ("minLength", 12, Encoding::Integer),
    ("pattern", 13, Encoding::Text),
    ("maxItems", 14, Encoding::Integer),
    ("minItems", 15, Encoding::Integer),
    ("uniqueItems", 16, Encoding::Boolean),
    ("maxProperties", 17, Encoding::Integer),
    ("minProperties", 18, Encoding::Integer),
    ("readOnly", 27, Encoding::Boolean),
    ("example", 30, Encoding::Any),
];

fn put_scalar(out: &mut Vec<u8>, number: u32, encoding: Encoding, value: &Value) {
    match encoding {
        Encoding::Text => put_str(out, number, value.as_str().unwrap_or_default()),
        Encoding::Double => put_double(out, number, value),
        Encoding::Boolean => put_bool(out, number, value),
        Encoding::Integer => put_int(out, number, value),
        Encoding::Any => put_msg(out, number, &any(value)),
    }
}

/// `Schema`, from a v2 schema made by [`schema`] (its depth is already bounded).
fn schema_message(s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(map) = s.as_object() else {
        return out;
    };
    for (key, value) in map {
        let scalar = SCHEMA_SCALARS
            .iter()
            .find(|(scalar_key, _, _)| scalar_key == key);
        if let Some((_, number, encoding)) = scalar {
            put_scalar(&mut out, *number, *encoding, value);
            continue;
        }
        match key.as_str() {
            "required" => {
                for reason in value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    put_str(&mut out, 19, reason);
                }
            }
            "enum" => {
                for e in value.as_array().into_iter().flatten() {
                    put_msg(&mut out, 20, &any(e));
                }
            }
            "additionalProperties" => {
                // AdditionalPropertiesItem: oneof {schema 1, boolean 2}.
                let mut item = Vec::new();
                match value {
                    Value::Bool(flag) => {
                        put_key(&mut item, 2, 0);
                        put_varint(&mut item, u64::from(*flag));
                    }
                    other => put_msg(&mut item, 1, &schema_message(other)),
                }
                put_msg(&mut out, 21, &item);
            }
            "type" => {
                let mut item = Vec::new();
                match value {
                    Value::Array(a) => {
                        for t in a.iter().filter_map(Value::as_str) {
                            put_str(&mut item, 1, t);
                        }
                    }
                    other => put_str(&mut item, 1, other.as_str().unwrap_or_default()),
                }
                put_msg(&mut out, 22, &item);
            }
            "items" => {
                let mut item = Vec::new();
                match value {
                    Value::Array(a) => {
                        for s in a {
                            put_msg(&mut item, 1, &schema_message(s));
                        }
                    }
                    other => put_msg(&mut item, 1, &schema_message(other)),
                }
                put_msg(&mut out, 23, &item);
            }
            "allOf" => {
                for s in value.as_array().into_iter().flatten() {
                    put_msg(&mut out, 24, &schema_message(s));
                }
            }
            "properties" => {
                let mut props = Vec::new();
                for (name, s) in value.as_object().into_iter().flatten() {
                    put_msg(&mut props, 1, &named_schema(name, s));
                }
                put_msg(&mut out, 25, &props);
            }
            text if text.starts_with("x-") => {
                // NamedAny {name 1, value 2}.
                let mut named = Vec::new();
                put_str(&mut named, 1, text);
                put_msg(&mut named, 2, &any(value));
                put_msg(&mut out, 31, &named);
            }
            _ => {}
        }
    }
    out
}

/// gnostic `Any`: the value as YAML (field 2), as the real server encodes extensions.
fn any(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(
        &mut out,
        2,
        &serde_yaml::to_string(value).unwrap_or_default(),
    );
    out
}

fn put_varint(out: &mut Vec<u8>, mut count: u64) {
    while count >= 0x80 {
        out.push((count as u8) | 0x80);
        count >>= 7;
    }
    out.push(count as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

fn put_str(out: &mut Vec<u8>, field: u32, text: &str) {
    if text.is_empty() {
        return;
    }
    put_msg(out, field, text.as_bytes());
}

/// A length-delimited field (a message, present even when empty).
fn put_msg(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_bool(out: &mut Vec<u8>, field: u32, value: &Value) {
    if value.as_bool() == Some(true) {
        put_key(out, field, 0);
        put_varint(out, 1);
    }
}

fn put_int(out: &mut Vec<u8>, field: u32, value: &Value) {
    if let Some(n) = value.as_i64().filter(|count| *count != 0) {
        put_key(out, field, 0);
        put_varint(out, n as u64);
    }
}

fn put_double(out: &mut Vec<u8>, field: u32, value: &Value) {
    if let Some(f) = value.as_f64().filter(|number| *number != 0.0) {
        put_key(out, field, 1);
        out.extend_from_slice(&f.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue14_openapi_v2_accept_is_negotiated_as_the_real_handler() {
        assert_eq!(negotiate(None), Some(Format::Json));
        assert_eq!(negotiate(Some("application/json")), Some(Format::Json));
        assert_eq!(negotiate(Some(PROTOBUF)), Some(Format::Protobuf));
        assert_eq!(
            negotiate(Some(&format!("{PROTOBUF_CONTENT_TYPE}, application/json"))),
            Some(Format::Protobuf)
        );
        assert_eq!(negotiate(Some("application/yaml")), None);
        assert_eq!(
            negotiate(Some(&format!("{PROTOBUF};q=0, */*"))),
            Some(Format::Json)
        );
    }

    #[test]
    fn issue14_v3_schemas_become_v2_ones() {
        let v3 = json!({"type": "object", "nullable": true, "properties": {
            "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}},
            "spec": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true}}});
        let v2 = schema(&v3, 0);
        assert_eq!(
            v2,
            json!({"type": "object", "properties": {
                "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                "spec": {"x-kubernetes-int-or-string": true}}})
        );
    }

    #[test]
    fn protobuf_fields_are_gnostic_ones() {
        let doc = json!({"swagger": "2.0", "info": {"title": "T", "version": "v"},
            "definitions": {"A": {"type": "string", "minLength": 1}}});
        let bytes = protobuf(&doc);
        // swagger (1) "2.0", then info (2) {title 1 "T", version 2 "v"}.
        assert_eq!(&bytes[..5], &[0x0a, 3, b'2', b'.', b'0']);
        assert_eq!(&bytes[5..13], &[0x12, 6, 0x0a, 1, b'T', 0x12, 1, b'v']);
        // definitions (9) {NamedSchema (1) {name "A", value {minLength 12: 1, type 22}}}.
        let definitions = &bytes[13..];
        assert_eq!(&definitions[..5], &[0x4a, 20, 0x0a, 18, 0x0a]);
        let min_length = [0x60, 1];
        let type_item = [0xb2, 1, 8, 0x0a, 6, b's', b't', b'r', b'i', b'n', b'g'];
        assert!(definitions.windows(2).any(|w| w == min_length));
        assert!(definitions.windows(type_item.len()).any(|w| w == type_item));
    }
}
