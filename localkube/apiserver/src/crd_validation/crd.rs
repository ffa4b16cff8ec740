//! What a CustomResourceDefinition write is refused for here: its CEL rules must compile
//! (`compilation failed: ERROR: <input>:1:9: Syntax error: ...`), with a well-formed
//! `message`, `messageExpression`, `reason` and `fieldPath`, and no `oldSelf` where old and
//! new values cannot be correlated, as kube-apiserver 1.32 checks them (422 on the CRD, at
//! `spec.versions[i].schema.openAPIV3Schema...x-kubernetes-validations[j].rule`).

use super::{CompileAt, Node};
use crate::error::{ApiError, FieldError};
use serde_json::Value;

/// The field errors of a CRD object's schemas.
pub fn errors(crd: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (index, version) in crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            let at = CompileAt {
                crd_path: format!("spec.versions[{index}].schema.openAPIV3Schema"),
                uncorrelatable: None,
            };
            Node::compile(schema, &at, &mut errors);
        }
    }
    errors
}

/// 422 Invalid when a CRD's schemas have errors.
pub fn check(crd: &Value) -> Result<(), ApiError> {
    let errors = errors(crd);
    if errors.is_empty() {
        return Ok(());
    }
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(ApiError::invalid_fields(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        name,
        &errors,
    ))
}
