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

#[derive(Clone, Copy)]
enum F {
    Str,
    Int,
    Bool,
    Msg(&'static str),
    Time,
    MapStr,
    MapBytes,
    RepStr,
    RepMsg(&'static str),
    IntOrString,
}

type Fields = &'static [(u64, &'static str, F)];

fn fields(message: &str) -> Option<Fields> {
    Some(match message {
        "TypeMeta" => &[(1, "apiVersion", F::Str), (2, "kind", F::Str)],
        "ObjectMeta" => &[
            (1, "name", F::Str),
            (2, "generateName", F::Str),
            (3, "namespace", F::Str),
            (5, "uid", F::Str),
            (6, "resourceVersion", F::Str),
            (7, "generation", F::Int),
            (8, "creationTimestamp", F::Time),
            (9, "deletionTimestamp", F::Time),
            (10, "deletionGracePeriodSeconds", F::Int),
            (11, "labels", F::MapStr),
            (12, "annotations", F::MapStr),
            (13, "ownerReferences", F::RepMsg("OwnerReference")),
            (14, "finalizers", F::RepStr),
        ],
        "OwnerReference" => &[
            (1, "kind", F::Str),
            (3, "name", F::Str),
            (4, "uid", F::Str),
            (5, "apiVersion", F::Str),
            (6, "controller", F::Bool),
            (7, "blockOwnerDeletion", F::Bool),
        ],
        "Namespace" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("NamespaceSpec")),
        ],
        "NamespaceSpec" => &[(1, "finalizers", F::RepStr)],
        "ConfigMap" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "data", F::MapStr),
            (3, "binaryData", F::MapBytes),
            (4, "immutable", F::Bool),
        ],
        "Secret" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "data", F::MapBytes),
            (3, "type", F::Str),
            (4, "stringData", F::MapStr),
            (5, "immutable", F::Bool),
        ],
        "ServiceAccount" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "secrets", F::RepMsg("ObjectReference")),
            (3, "imagePullSecrets", F::RepMsg("LocalObjectReference")),
            (4, "automountServiceAccountToken", F::Bool),
        ],
        "ObjectReference" => &[
            (1, "kind", F::Str),
            (2, "namespace", F::Str),
            (3, "name", F::Str),
            (4, "uid", F::Str),
            (5, "apiVersion", F::Str),
        ],
        "LocalObjectReference" => &[(1, "name", F::Str)],
        "SelfSubjectAccessReview" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("SelfSubjectAccessReviewSpec")),
        ],
        "SelfSubjectAccessReviewSpec" => &[
            (1, "resourceAttributes", F::Msg("ResourceAttributes")),
            (2, "nonResourceAttributes", F::Msg("NonResourceAttributes")),
        ],
        "ResourceAttributes" => &[
            (1, "namespace", F::Str),
            (2, "verb", F::Str),
            (3, "group", F::Str),
            (4, "version", F::Str),
            (5, "resource", F::Str),
            (6, "subresource", F::Str),
            (7, "name", F::Str),
        ],
        "NonResourceAttributes" => &[(1, "path", F::Str), (2, "verb", F::Str)],
        "SelfSubjectRulesReview" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("SelfSubjectRulesReviewSpec")),
        ],
        "SelfSubjectRulesReviewSpec" => &[(1, "namespace", F::Str)],
        "SelfSubjectReview" => &[(1, "metadata", F::Msg("ObjectMeta"))],
        "TokenRequest" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("TokenRequestSpec")),
        ],
        "TokenRequestSpec" => &[
            (1, "audiences", F::RepStr),
            (3, "boundObjectRef", F::Msg("BoundObjectReference")),
            (4, "expirationSeconds", F::Int),
        ],
        "BoundObjectReference" => &[
            (1, "kind", F::Str),
            (2, "apiVersion", F::Str),
            (3, "name", F::Str),
            (4, "uid", F::Str),
        ],
        "Role" | "ClusterRole" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "rules", F::RepMsg("PolicyRule")),
        ],
        "PolicyRule" => &[
            (1, "verbs", F::RepStr),
            (2, "apiGroups", F::RepStr),
            (3, "resources", F::RepStr),
            (4, "resourceNames", F::RepStr),
            (5, "nonResourceURLs", F::RepStr),
        ],
        "RoleBinding" | "ClusterRoleBinding" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "subjects", F::RepMsg("Subject")),
            (3, "roleRef", F::Msg("RoleRef")),
        ],
        "Subject" => &[
            (1, "kind", F::Str),
            (2, "apiGroup", F::Str),
            (3, "name", F::Str),
            (4, "namespace", F::Str),
        ],
        "RoleRef" => &[
            (1, "apiGroup", F::Str),
            (2, "kind", F::Str),
            (3, "name", F::Str),
        ],
        "Eviction" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "deleteOptions", F::Msg("DeleteOptions")),
        ],
        "DeleteOptions" => &[
            (1, "gracePeriodSeconds", F::Int),
            (4, "propagationPolicy", F::Str),
            (5, "dryRun", F::RepStr),
        ],
        "Time" => &[(1, "seconds", F::Int), (2, "nanos", F::Int)],
        "IntOrString" => &[
            (1, "type", F::Int),
            (2, "intVal", F::Int),
            (3, "strVal", F::Str),
        ],
        "Deployment" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("DeploymentSpec")),
        ],
        "DeploymentSpec" => &[
            (1, "replicas", F::Int),
            (2, "selector", F::Msg("LabelSelector")),
            (3, "template", F::Msg("PodTemplateSpec")),
            (4, "strategy", F::Msg("DeploymentStrategy")),
            (5, "minReadySeconds", F::Int),
            (6, "revisionHistoryLimit", F::Int),
            (7, "paused", F::Bool),
            (9, "progressDeadlineSeconds", F::Int),
        ],
        "DeploymentStrategy" => &[
            (1, "type", F::Str),
            (2, "rollingUpdate", F::Msg("RollingUpdateDeployment")),
        ],
        "RollingUpdateDeployment" => &[
            (1, "maxUnavailable", F::IntOrString),
            (2, "maxSurge", F::IntOrString),
        ],
        "LabelSelector" => &[
            (1, "matchLabels", F::MapStr),
            (2, "matchExpressions", F::RepMsg("LabelSelectorRequirement")),
        ],
        "LabelSelectorRequirement" => &[
            (1, "key", F::Str),
            (2, "operator", F::Str),
            (3, "values", F::RepStr),
        ],
        "Job" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("JobSpec")),
        ],
        "JobSpec" => &[
            (1, "parallelism", F::Int),
            (2, "completions", F::Int),
            (3, "activeDeadlineSeconds", F::Int),
            (4, "selector", F::Msg("LabelSelector")),
            (5, "manualSelector", F::Bool),
            (6, "template", F::Msg("PodTemplateSpec")),
            (7, "backoffLimit", F::Int),
            (8, "ttlSecondsAfterFinished", F::Int),
            (9, "completionMode", F::Str),
            (10, "suspend", F::Bool),
        ],
        "PodTemplateSpec" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("PodSpec")),
        ],
        "PodSpec" => &[
            (2, "containers", F::RepMsg("Container")),
            (3, "restartPolicy", F::Str),
            (4, "terminationGracePeriodSeconds", F::Int),
            (6, "dnsPolicy", F::Str),
            (7, "nodeSelector", F::MapStr),
            (8, "serviceAccountName", F::Str),
            (10, "nodeName", F::Str),
            (20, "initContainers", F::RepMsg("Container")),
        ],
        "Container" => &[
            (1, "name", F::Str),
            (2, "image", F::Str),
            (3, "command", F::RepStr),
            (4, "args", F::RepStr),
            (5, "workingDir", F::Str),
            (6, "ports", F::RepMsg("ContainerPort")),
            (7, "env", F::RepMsg("EnvVar")),
            (8, "resources", F::Msg("ResourceRequirements")),
            (13, "terminationMessagePath", F::Str),
            (14, "imagePullPolicy", F::Str),
            (20, "terminationMessagePolicy", F::Str),
        ],
        "ContainerPort" => &[
            (1, "name", F::Str),
            (2, "hostPort", F::Int),
            (3, "containerPort", F::Int),
            (4, "protocol", F::Str),
            (5, "hostIP", F::Str),
        ],
        "EnvVar" => &[(1, "name", F::Str), (2, "value", F::Str)],
        "ResourceRequirements" => &[],
        "Service" => &[
            (1, "metadata", F::Msg("ObjectMeta")),
            (2, "spec", F::Msg("ServiceSpec")),
        ],
        "ServiceSpec" => &[
            (1, "ports", F::RepMsg("ServicePort")),
            (2, "selector", F::MapStr),
            (3, "clusterIP", F::Str),
            (4, "type", F::Str),
        ],
        "ServicePort" => &[
            (1, "name", F::Str),
            (2, "protocol", F::Str),
            (3, "port", F::Int),
            (4, "targetPort", F::IntOrString),
            (5, "nodePort", F::Int),
            (6, "appProtocol", F::Str),
        ],
        _ => return None,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
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
            w => Err(format!("unsupported wire type {w}")),
        }
    }
    fn advance(&mut self, n: usize) -> Result<(), String> {
        if self.pos + n > self.buf.len() {
            return Err("truncated field".into());
        }
        self.pos += n;
        Ok(())
    }
}

fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid utf-8 in a string field".to_string())
}

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), String> {
    let mut r = Reader { buf: b, pos: 0 };
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    while r.pos < b.len() {
        let key = r.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        if wire != 2 {
            r.skip(wire)?;
            continue;
        }
        let data = r.bytes()?;
        match num {
            1 => k = string(data)?,
            2 if bytes_value => v = json!(base64::engine::general_purpose::STANDARD.encode(data)),
            2 => v = json!(string(data)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn decode(message: &str, b: &[u8]) -> Result<Value, String> {
    let spec =
        fields(message).ok_or_else(|| format!("protobuf message {message} is not supported"))?;
    let mut out = Map::new();
    let mut r = Reader { buf: b, pos: 0 };
    while r.pos < b.len() {
        let key = r.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        let Some((_, name, f)) = spec.iter().find(|(n, _, _)| *n == num) else {
            r.skip(wire)?;
            continue;
        };
        let name = name.to_string();
        match (*f, wire) {
            (F::Int, 0) => {
                out.insert(name, json!(r.varint()? as i64));
            }
            (F::Bool, 0) => {
                out.insert(name, json!(r.varint()? != 0));
            }
            (F::Str, 2) => {
                out.insert(name, json!(string(r.bytes()?)?));
            }
            (F::Msg(m), 2) => {
                out.insert(name, decode(m, r.bytes()?)?);
            }
            (F::Time, 2) => {
                let t = decode("Time", r.bytes()?)?;
                let secs = t.get("seconds").and_then(Value::as_i64).unwrap_or(0);
                if secs != 0 {
                    let when = jiff::Timestamp::from_second(secs)
                        .map(super::meta::time)
                        .unwrap_or_default();
                    out.insert(name, json!(when));
                }
            }
            (F::IntOrString, 2) => {
                let v = decode("IntOrString", r.bytes()?)?;
                let value = if v.get("type").and_then(Value::as_i64) == Some(1) {
                    json!(v.get("strVal").and_then(Value::as_str).unwrap_or_default())
                } else {
                    json!(v.get("intVal").and_then(Value::as_i64).unwrap_or(0))
                };
                out.insert(name, value);
            }
            (F::MapStr, 2) | (F::MapBytes, 2) => {
                let (k, v) = map_entry(r.bytes()?, matches!(f, F::MapBytes))?;
                out.entry(name).or_insert_with(|| json!({}))[k] = v;
            }
            (F::RepStr, 2) => {
                let s = string(r.bytes()?)?;
                if let Some(a) = out.entry(name).or_insert_with(|| json!([])).as_array_mut() {
                    a.push(json!(s));
                }
            }
            (F::RepMsg(m), 2) => {
                let v = decode(m, r.bytes()?)?;
                if let Some(a) = out.entry(name).or_insert_with(|| json!([])).as_array_mut() {
                    a.push(v);
                }
            }
            (_, w) => r.skip(w)?,
        }
    }
    // Go's JSON encoding omits empty optional fields; do the same.
    out.retain(|k, v| match v {
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_i64() != Some(0) || POINTER_FIELDS.contains(&k.as_str()),
        Value::Bool(b) => *b || POINTER_FIELDS.contains(&k.as_str()),
        _ => true,
    });
    Ok(Value::Object(out))
}

/// Decodes a `application/vnd.kubernetes.protobuf` body into JSON.
pub fn decode_body(body: &[u8]) -> Result<Value, String> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the protobuf envelope magic")?;
    let mut r = Reader { buf: inner, pos: 0 };
    let (mut type_meta, mut raw) = (Value::Null, &[][..]);
    while r.pos < inner.len() {
        let key = r.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        match (num, wire) {
            (1, 2) => type_meta = decode("TypeMeta", r.bytes()?)?,
            (2, 2) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
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
        let v = decode_body(&body).expect("decode");
        assert_eq!(
            v,
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
