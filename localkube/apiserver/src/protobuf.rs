//! Decoding of the protobuf request bodies kubectl 1.32 sends from its typed clients
//! (`kubectl create namespace|configmap|secret|serviceaccount|role|rolebinding|job|token`,
//! `kubectl auth can-i`, `kubectl drain`): the `k8s\0` envelope around `runtime.Unknown`,
//! and the messages of those kinds, turned into the JSON the rest of the server handles.
//! Responses stay JSON (those clients accept it). Other kinds are 415 UnsupportedMediaType.

use base64::Engine;
use serde_json::{json, Map, Value};

const MAGIC: &[u8] = b"k8s\0";

/// Fields that are pointers in the Go types: a zero or false on the wire was set on purpose
/// (`--replicas=0`), unlike plain fields whose zero value JSON omits.
const POINTER_FIELDS: &[&str] = &[
    "replicas",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
    "terminationGracePeriodSeconds",
    "deletionGracePeriodSeconds",
    "gracePeriodSeconds",
    "expirationSeconds",
    "controller",
    "blockOwnerDeletion",
    "immutable",
    "automountServiceAccountToken",
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "backoffLimit",
    "manualSelector",
    "ttlSecondsAfterFinished",
    "suspend",
];

/// The wire type of a field, and what it becomes in JSON.
#[derive(Clone, Copy)]
enum FieldType {
    /// A string.
    String,
    /// A varint integer.
    Integer,
    /// A varint boolean.
    Boolean,
    /// An embedded message, by name.
    Message(&'static str),
    /// A `Time` (seconds, nanos) as RFC 3339.
    Time,
    /// A `map<string, string>`.
    StringMap,
    /// A `map<string, bytes>`, the bytes in base64 (Secret data).
    BytesMap,
    /// `repeated string`.
    RepeatedString,
    /// `repeated` of a message, by name.
    RepeatedMessage(&'static str),
    /// An `IntOrString`.
    IntOrString,
}

/// A message's fields: (field number, JSON name, type).
type Fields = &'static [(u64, &'static str, FieldType)];

/// One message this decoder knows: the names it goes by (kinds that share a shape share
/// a row) and its fields.
struct Message {
    names: &'static [&'static str],
    fields: Fields,
}

use FieldType::{
    Boolean, BytesMap, IntOrString, Integer, Message as Msg, RepeatedMessage, RepeatedString,
    String as Str, StringMap, Time,
};

/// The messages of the kinds kubectl's typed clients send, with the fields read of each
/// (the Go types' protobuf tags); a field not listed is skipped.
#[rustfmt::skip]
static MESSAGES: &[Message] = &[
    Message { names: &["TypeMeta"], fields: &[(1, "apiVersion", Str), (2, "kind", Str)]},
    Message { names: &["ObjectMeta"], fields: &[
        (1, "name", Str),
        (2, "generateName", Str),
        (3, "namespace", Str),
        (5, "uid", Str),
        (6, "resourceVersion", Str),
        (7, "generation", Integer),
        (8, "creationTimestamp", Time),
        (9, "deletionTimestamp", Time),
        (10, "deletionGracePeriodSeconds", Integer),
        (11, "labels", StringMap),
        (12, "annotations", StringMap),
        (13, "ownerReferences", RepeatedMessage("OwnerReference")),
        (14, "finalizers", RepeatedString),
    ]},
    Message { names: &["OwnerReference"], fields: &[
        (1, "kind", Str),
        (3, "name", Str),
        (4, "uid", Str),
        (5, "apiVersion", Str),
        (6, "controller", Boolean),
        (7, "blockOwnerDeletion", Boolean),
    ]},
    Message { names: &["Namespace"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("NamespaceSpec")),
    ]},
    Message { names: &["NamespaceSpec"], fields: &[(1, "finalizers", RepeatedString)]},
    Message { names: &["ConfigMap"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "data", StringMap),
        (3, "binaryData", BytesMap),
        (4, "immutable", Boolean),
    ]},
    Message { names: &["Secret"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "data", BytesMap),
        (3, "type", Str),
        (4, "stringData", StringMap),
        (5, "immutable", Boolean),
    ]},
    Message { names: &["ServiceAccount"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "secrets", RepeatedMessage("ObjectReference")),
        (3, "imagePullSecrets", RepeatedMessage("LocalObjectReference")),
        (4, "automountServiceAccountToken", Boolean),
    ]},
    Message { names: &["ObjectReference"], fields: &[
        (1, "kind", Str),
        (2, "namespace", Str),
        (3, "name", Str),
        (4, "uid", Str),
        (5, "apiVersion", Str),
    ]},
    Message { names: &["LocalObjectReference"], fields: &[(1, "name", Str)]},
    Message { names: &["SelfSubjectAccessReview"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("SelfSubjectAccessReviewSpec")),
    ]},
    Message { names: &["SelfSubjectAccessReviewSpec"], fields: &[
        (1, "resourceAttributes", Msg("ResourceAttributes")),
        (2, "nonResourceAttributes", Msg("NonResourceAttributes")),
    ]},
    Message { names: &["ResourceAttributes"], fields: &[
        (1, "namespace", Str),
        (2, "verb", Str),
        (3, "group", Str),
        (4, "version", Str),
        (5, "resource", Str),
        (6, "subresource", Str),
        (7, "name", Str),
    ]},
    Message { names: &["NonResourceAttributes"], fields: &[(1, "path", Str), (2, "verb", Str)]},
    Message { names: &["SelfSubjectRulesReview"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("SelfSubjectRulesReviewSpec")),
    ]},
    Message { names: &["SelfSubjectRulesReviewSpec"], fields: &[(1, "namespace", Str)]},
    Message { names: &["SelfSubjectReview"], fields: &[(1, "metadata", Msg("ObjectMeta"))]},
    Message { names: &["TokenRequest"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("TokenRequestSpec")),
    ]},
    Message { names: &["TokenRequestSpec"], fields: &[
        (1, "audiences", RepeatedString),
        (3, "boundObjectRef", Msg("BoundObjectReference")),
        (4, "expirationSeconds", Integer),
    ]},
    Message { names: &["BoundObjectReference"], fields: &[
        (1, "kind", Str),
        (2, "apiVersion", Str),
        (3, "name", Str),
        (4, "uid", Str),
    ]},
    Message { names: &["Role", "ClusterRole"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "rules", RepeatedMessage("PolicyRule")),
    ]},
    Message { names: &["PolicyRule"], fields: &[
        (1, "verbs", RepeatedString),
        (2, "apiGroups", RepeatedString),
        (3, "resources", RepeatedString),
        (4, "resourceNames", RepeatedString),
        (5, "nonResourceURLs", RepeatedString),
    ]},
    Message { names: &["RoleBinding", "ClusterRoleBinding"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "subjects", RepeatedMessage("Subject")),
        (3, "roleRef", Msg("RoleRef")),
    ]},
    Message { names: &["Subject"], fields: &[
        (1, "kind", Str),
        (2, "apiGroup", Str),
        (3, "name", Str),
        (4, "namespace", Str),
    ]},
    Message { names: &["RoleRef"], fields: &[
        (1, "apiGroup", Str),
        (2, "kind", Str),
        (3, "name", Str),
    ]},
    Message { names: &["Eviction"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "deleteOptions", Msg("DeleteOptions")),
    ]},
    Message { names: &["DeleteOptions"], fields: &[
        (1, "gracePeriodSeconds", Integer),
        (4, "propagationPolicy", Str),
        (5, "dryRun", RepeatedString),
    ]},
    Message { names: &["Time"], fields: &[(1, "seconds", Integer), (2, "nanos", Integer)]},
    Message { names: &["IntOrString"], fields: &[
        (1, "type", Integer),
        (2, "intVal", Integer),
        (3, "strVal", Str),
    ]},
    Message { names: &["Deployment"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("DeploymentSpec")),
    ]},
    Message { names: &["DeploymentSpec"], fields: &[
        (1, "replicas", Integer),
        (2, "selector", Msg("LabelSelector")),
        (3, "template", Msg("PodTemplateSpec")),
        (4, "strategy", Msg("DeploymentStrategy")),
        (5, "minReadySeconds", Integer),
        (6, "revisionHistoryLimit", Integer),
        (7, "paused", Boolean),
        (9, "progressDeadlineSeconds", Integer),
    ]},
    Message { names: &["DeploymentStrategy"], fields: &[
        (1, "type", Str),
        (2, "rollingUpdate", Msg("RollingUpdateDeployment")),
    ]},
    Message { names: &["RollingUpdateDeployment"], fields: &[
        (1, "maxUnavailable", IntOrString),
        (2, "maxSurge", IntOrString),
    ]},
    Message { names: &["LabelSelector"], fields: &[
        (1, "matchLabels", StringMap),
        (2, "matchExpressions", RepeatedMessage("LabelSelectorRequirement")),
    ]},
    Message { names: &["LabelSelectorRequirement"], fields: &[
        (1, "key", Str),
        (2, "operator", Str),
        (3, "values", RepeatedString),
    ]},
    Message { names: &["Job"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("JobSpec")),
    ]},
    Message { names: &["JobSpec"], fields: &[
        (1, "parallelism", Integer),
        (2, "completions", Integer),
        (3, "activeDeadlineSeconds", Integer),
        (4, "selector", Msg("LabelSelector")),
        (5, "manualSelector", Boolean),
        (6, "template", Msg("PodTemplateSpec")),
        (7, "backoffLimit", Integer),
        (8, "ttlSecondsAfterFinished", Integer),
        (9, "completionMode", Str),
        (10, "suspend", Boolean),
    ]},
    Message { names: &["PodTemplateSpec"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("PodSpec")),
    ]},
    Message { names: &["PodSpec"], fields: &[
        (2, "containers", RepeatedMessage("Container")),
        (3, "restartPolicy", Str),
        (4, "terminationGracePeriodSeconds", Integer),
        (6, "dnsPolicy", Str),
        (7, "nodeSelector", StringMap),
        (8, "serviceAccountName", Str),
        (10, "nodeName", Str),
        (20, "initContainers", RepeatedMessage("Container")),
    ]},
    Message { names: &["Container"], fields: &[
        (1, "name", Str),
        (2, "image", Str),
        (3, "command", RepeatedString),
        (4, "args", RepeatedString),
        (5, "workingDir", Str),
        (6, "ports", RepeatedMessage("ContainerPort")),
        (7, "env", RepeatedMessage("EnvVar")),
        (8, "resources", Msg("ResourceRequirements")),
        (13, "terminationMessagePath", Str),
        (14, "imagePullPolicy", Str),
        (20, "terminationMessagePolicy", Str),
    ]},
    Message { names: &["ContainerPort"], fields: &[
        (1, "name", Str),
        (2, "hostPort", Integer),
        (3, "containerPort", Integer),
        (4, "protocol", Str),
        (5, "hostIP", Str),
    ]},
    Message { names: &["EnvVar"], fields: &[(1, "name", Str), (2, "value", Str)]},
    Message { names: &["ResourceRequirements"], fields: &[]},
    Message { names: &["Service"], fields: &[
        (1, "metadata", Msg("ObjectMeta")),
        (2, "spec", Msg("ServiceSpec")),
    ]},
    Message { names: &["ServiceSpec"], fields: &[
        (1, "ports", RepeatedMessage("ServicePort")),
        (2, "selector", StringMap),
        (3, "clusterIP", Str),
        (4, "type", Str),
    ]},
    Message { names: &["ServicePort"], fields: &[
        (1, "name", Str),
        (2, "protocol", Str),
        (3, "port", Integer),
        (4, "targetPort", IntOrString),
        (5, "nodePort", Integer),
        (6, "appProtocol", Str),
    ]},
];

/// The fields of `message`, if this decoder knows it.
fn fields(message: &str) -> Option<Fields> {
    MESSAGES
        .iter()
        .find(|known| known.names.contains(&message))
        .map(|known| known.fields)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut number: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            number |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(number);
            }
        }
        Err("varint too long".into())
    }
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.varint()? as usize;
        let end = self
            .pos
            .checked_add(len)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated field")?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Ok(b)
    }
    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            wire_type => Err(format!("unsupported wire type {wire_type}")),
        }
    }
    fn advance(&mut self, count: usize) -> Result<(), String> {
        if self.pos + count > self.buf.len() {
            return Err("truncated field".into());
        }
        self.pos += count;
        Ok(())
    }
}

fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid utf-8 in a string field".to_string())
}

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), String> {
    let mut reader = Reader { buf: b, pos: 0 };
    let (mut k, mut value) = (String::new(), Value::String(String::new()));
    while reader.pos < b.len() {
        let key = reader.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        if wire != 2 {
            reader.skip(wire)?;
            continue;
        }
        let data = reader.bytes()?;
        match num {
            1 => k = string(data)?,
            2 if bytes_value => {
                value = json!(base64::engine::general_purpose::STANDARD.encode(data))
            }
            2 => value = json!(string(data)?),
            _ => {}
        }
    }
    Ok((k, value))
}

fn decode(message: &str, b: &[u8]) -> Result<Value, String> {
    let spec =
        fields(message).ok_or_else(|| format!("protobuf message {message} is not supported"))?;
    let mut out = Map::new();
    let mut reader = Reader { buf: b, pos: 0 };
    while reader.pos < b.len() {
        let key = reader.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        let Some((_, name, field_type)) = spec.iter().find(|(count, _, _)| *count == num) else {
            reader.skip(wire)?;
            continue;
        };
        let name = name.to_string();
        match (*field_type, wire) {
            (FieldType::Integer, 0) => {
                out.insert(name, json!(reader.varint()? as i64));
            }
            (FieldType::Boolean, 0) => {
                out.insert(name, json!(reader.varint()? != 0));
            }
            (FieldType::String, 2) => {
                out.insert(name, json!(string(reader.bytes()?)?));
            }
            (FieldType::Message(m), 2) => {
                out.insert(name, decode(m, reader.bytes()?)?);
            }
            (FieldType::Time, 2) => {
                let t = decode("Time", reader.bytes()?)?;
                let secs = t.get("seconds").and_then(Value::as_i64).unwrap_or(0);
                if secs != 0 {
                    let when = jiff::Timestamp::from_second(secs)
                        .map(super::meta::time)
                        .unwrap_or_default();
                    out.insert(name, json!(when));
                }
            }
            (FieldType::IntOrString, 2) => {
                let v = decode("IntOrString", reader.bytes()?)?;
                let value = if v.get("type").and_then(Value::as_i64) == Some(1) {
                    json!(v.get("strVal").and_then(Value::as_str).unwrap_or_default())
                } else {
                    json!(v.get("intVal").and_then(Value::as_i64).unwrap_or(0))
                };
                out.insert(name, value);
            }
            (FieldType::StringMap, 2) | (FieldType::BytesMap, 2) => {
                let (k, v) = map_entry(reader.bytes()?, matches!(field_type, FieldType::BytesMap))?;
                out.entry(name).or_insert_with(|| json!({}))[k] = v;
            }
            (FieldType::RepeatedString, 2) => {
                let s = string(reader.bytes()?)?;
                if let Some(a) = out.entry(name).or_insert_with(|| json!([])).as_array_mut() {
                    a.push(json!(s));
                }
            }
            (FieldType::RepeatedMessage(m), 2) => {
                let v = decode(m, reader.bytes()?)?;
                if let Some(a) = out.entry(name).or_insert_with(|| json!([])).as_array_mut() {
                    a.push(v);
                }
            }
            (_, wire_type) => reader.skip(wire_type)?,
        }
    }
    // Go's JSON encoding omits empty optional fields; do the same.
    out.retain(|k, v| match v {
        Value::String(text) => !text.is_empty(),
        Value::Number(number) => number.as_i64() != Some(0) || POINTER_FIELDS.contains(&k.as_str()),
        Value::Bool(flag) => *flag || POINTER_FIELDS.contains(&k.as_str()),
        _ => true,
    });
    Ok(Value::Object(out))
}

/// Decodes a `application/vnd.kubernetes.protobuf` body into JSON.
pub fn decode_body(body: &[u8]) -> Result<Value, String> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the protobuf envelope magic")?;
    let mut reader = Reader { buf: inner, pos: 0 };
    let (mut type_meta, mut raw) = (Value::Null, &[][..]);
    while reader.pos < inner.len() {
        let key = reader.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        match (num, wire) {
            (1, 2) => type_meta = decode("TypeMeta", reader.bytes()?)?,
            (2, 2) => raw = reader.bytes()?,
            (_, wire_type) => reader.skip(wire_type)?,
        }
    }
    let kind = super::meta::str_at(&type_meta, "/kind").to_string();
    let mut obj = decode(&kind, raw)?;
    obj["apiVersion"] = type_meta.get("apiVersion").cloned().unwrap_or(Value::Null);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, data: &[u8]) -> Vec<u8> {
        let mut v = vec![((num << 3) | 2) as u8, data.len() as u8];
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn decodes_a_namespace_envelope_as_kubectl_create_namespace_sends_it() {
        let meta = field(1, b"demo");
        let ns = field(1, &meta);
        let tm = [field(1, b"v1"), field(2, b"Namespace")].concat();
        let unknown = [field(1, &tm), field(2, &ns), field(3, b""), field(4, b"")].concat();
        let body = [MAGIC.to_vec(), unknown].concat();
        let value = decode_body(&body).expect("decode");
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
        );
        let real: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x1c\x0a\x14\x0a\x04demo\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_body(real)
                .expect("kubectl body")
                .pointer("/metadata/name"),
            Some(&json!("demo"))
        );
        assert!(
            decode_body(b"k8s\0\x0a\xff").is_err(),
            "truncated input is an error, not a panic"
        );
    }
}
