//! `batch/v1` Jobs in the API server: create-time defaults (the generated selector and the
//! `job-name`/`controller-uid` labels, as kube-apiserver's job strategy writes them) and
//! validation (422 Invalid with the real field paths and messages). The Job controller is
//! `controllers::job`.

use super::error::{ApiError, FieldError};
use super::meta;
use super::selector::LabelSelector;
use serde_json::{json, Value};

/// The label with the Job's name on its pods (and the legacy one without a prefix).
pub const JOB_NAME_LABELS: [&str; 2] = ["batch.kubernetes.io/job-name", "job-name"];
/// The label with the Job's uid on its pods (and the legacy one without a prefix).
pub const CONTROLLER_UID_LABELS: [&str; 2] =
    ["batch.kubernetes.io/controller-uid", "controller-uid"];

fn set_default(obj: &mut Value, key: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        if map.get(key).map(Value::is_null).unwrap_or(true) {
            map.insert(key.to_string(), value);
        }
    }
}

/// The object map at `pointer`, creating (or replacing non-objects with) empty objects on
/// the way.
fn object_mut<'a>(
    obj: &'a mut Value,
    pointer: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let mut cur = obj;
    for key in pointer.split('/').filter(|k| !k.is_empty()) {
        if !cur.get(key).map(Value::is_object).unwrap_or(false) {
            cur.as_object_mut()?.insert(key.to_string(), json!({}));
        }
        cur = cur.get_mut(key)?;
    }
    cur.as_object_mut()
}

/// The spec defaults of a Job (SetDefaults_Job) and, unless `spec.manualSelector` is true,
/// the generated selector and pod labels (the strategy's generateSelector). The object has
/// its name and uid already.
pub fn job_defaults(job: &mut Value) {
    if !job.get("spec").map(Value::is_object).unwrap_or(false) {
        job["spec"] = json!({});
    }
    let spec = &mut job["spec"];
    if spec.get("completions").map(Value::is_null).unwrap_or(true)
        && spec.get("parallelism").map(Value::is_null).unwrap_or(true)
    {
        spec["completions"] = json!(1);
    }
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    set_default(spec, "manualSelector", json!(false));
    if !spec.get("template").map(Value::is_object).unwrap_or(false) {
        spec["template"] = json!({});
    }
    if !spec["template"]
        .get("metadata")
        .map(Value::is_object)
        .unwrap_or(false)
    {
        spec["template"]["metadata"] = json!({});
    }
    if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) {
        generate_selector(job);
    }
    let template_labels = job.pointer("/spec/template/metadata/labels").cloned();
    let job_labels_empty = job
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|map| map.is_empty())
        .unwrap_or(true);
    if let (true, Some(labels)) = (job_labels_empty, template_labels) {
        job["metadata"]["labels"] = labels;
    }
    job["status"] = json!({});
}

fn generate_selector(job: &mut Value) {
    let name = meta::name(job).to_string();
    let uid = meta::uid_of(job).to_string();
    if let Some(labels) = object_mut(job, "/spec/template/metadata/labels") {
        for key in JOB_NAME_LABELS {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in CONTROLLER_UID_LABELS {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
    }
    if let Some(match_labels) = object_mut(job, "/spec/selector/matchLabels") {
        match_labels
            .entry(CONTROLLER_UID_LABELS[0])
            .or_insert_with(|| json!(uid));
    }
}

fn non_negative(spec: &Value, key: &str, errors: &mut Vec<FieldError>) {
    if let Some(n) = spec
        .get(key)
        .and_then(Value::as_i64)
        .filter(|count| *count < 0)
    {
        errors.push(FieldError::invalid(
            &format!("spec.{key}"),
            &json!(n),
            "must be greater than or equal to 0",
        ));
    }
}

fn validate_selector(job: &Value, errors: &mut Vec<FieldError>) {
    let Some(selector) = job.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        errors.push(FieldError::required("spec.selector", ""));
        return;
    };
    let template_labels = job.pointer("/spec/template/metadata/labels");
    if !LabelSelector::from_object(selector).matches_labels(template_labels) {
        errors.push(FieldError::invalid(
            "spec.template.metadata.labels",
            template_labels.unwrap_or(&Value::Null),
            "`selector` does not match template `labels`",
        ));
    }
    if job.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let generated = json!({"matchLabels": {CONTROLLER_UID_LABELS[0]: meta::uid_of(job)}});
    if selector != &generated {
        errors.push(FieldError::invalid(
            "spec.selector",
            selector,
            "`selector` not auto-generated",
        ));
    }
}

fn validate_template(job: &Value, errors: &mut Vec<FieldError>) {
    let containers = job
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array);
    if containers.map(Vec::is_empty).unwrap_or(true) {
        errors.push(FieldError::required("spec.template.spec.containers", ""));
    }
    // The pod defaults make an absent restartPolicy `Always`: both are "Required".
    let field = "spec.template.spec.restartPolicy";
    match meta::str_at(job, "/spec/template/spec/restartPolicy") {
        "OnFailure" | "Never" => {}
        "" | "Always" => errors.push(FieldError::required(
            field,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        other => errors.push(FieldError::not_supported(
            field,
            other,
            &["OnFailure", "Never"],
        )),
    }
}

fn validate_spec(job: &Value, errors: &mut Vec<FieldError>) {
    let spec = job.get("spec").cloned().unwrap_or(Value::Null);
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        non_negative(&spec, key, errors);
    }
    match meta::str_at(job, "/spec/completionMode") {
        "NonIndexed" => {}
        // Indexed Jobs are not run here (no completion index): refuse them plainly.
        other => errors.push(FieldError::not_supported(
            "spec.completionMode",
            other,
            &["NonIndexed"],
        )),
    }
    validate_selector(job, errors);
    validate_template(job, errors);
}

fn immutable(old: &Value, new: &Value, pointer: &str, errors: &mut Vec<FieldError>) {
    let (before, after) = (old.pointer(pointer), new.pointer(pointer));
    if before != after {
        errors.push(FieldError::invalid(
            &pointer.trim_start_matches('/').replace('/', "."),
            after.unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
}

/// Validates a Job on create (`old` None) or update of the main resource.
pub fn validate_job(old: Option<&Value>, job: &Value) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    validate_spec(job, &mut errors);
    if let Some(old) = old {
        for pointer in [
            "/spec/selector",
            "/spec/template",
            "/spec/completions",
            "/spec/completionMode",
        ] {
            immutable(old, job, pointer, &mut errors);
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_fields(
        "batch",
        "Job",
        meta::name(job),
        &errors,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;

    fn job(spec: Value) -> Value {
        let mut j = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "default", "uid": "u-1"}, "spec": spec});
        job_defaults(&mut j);
        if let Some(ps) = j.pointer_mut("/spec/template/spec") {
            super::super::defaults::pod_spec_defaults(ps);
        }
        j
    }

    #[test]
    fn defaults_generate_the_selector_and_labels_as_the_job_strategy_does() {
        let j = job(
            json!({"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}),
        );
        assert_eq!(j.pointer("/spec/completions"), Some(&json!(1)));
        assert_eq!(j.pointer("/spec/parallelism"), Some(&json!(1)));
        assert_eq!(j.pointer("/spec/backoffLimit"), Some(&json!(6)));
        assert_eq!(
            j.pointer("/spec/selector"),
            Some(&json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}))
        );
        for (key, value) in [
            ("job-name", "pi"),
            ("batch.kubernetes.io/job-name", "pi"),
            ("controller-uid", "u-1"),
        ] {
            assert_eq!(
                j["spec"]["template"]["metadata"]["labels"][key],
                json!(value)
            );
            assert_eq!(j["metadata"]["labels"][key], json!(value));
        }
        assert!(validate_job(None, &j).is_ok());
    }

    #[test]
    fn parallelism_alone_leaves_completions_unset() {
        let j = job(
            json!({"parallelism": 3, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}),
        );
        assert_eq!(j.pointer("/spec/completions"), None);
    }

    #[test]
    fn restart_policy_always_or_absent_is_required_and_errors_aggregate() {
        let j = job(
            json!({"backoffLimit": -1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}),
        );
        let error = validate_job(None, &j).expect_err("invalid");
        assert_eq!((error.code, error.reason), (422, Reason::Invalid));
        assert_eq!(
            error.message,
            "Job.batch \"pi\" is invalid: [spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"]"
        );
        let causes = error.details.expect("details")["causes"].clone();
        assert_eq!(causes[1]["reason"], json!("FieldValueRequired"));
    }

    #[test]
    fn a_changed_template_is_immutable() {
        let old = job(
            json!({"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}),
        );
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("j");
        let error = validate_job(Some(&old), &new).expect_err("immutable");
        assert!(
            error.message.contains("spec.template: Invalid value: "),
            "{}",
            error.message
        );
        assert!(
            error.message.ends_with("field is immutable"),
            "{}",
            error.message
        );
        let mut scaled = old.clone();
        scaled["spec"]["parallelism"] = json!(2);
        assert!(validate_job(Some(&old), &scaled).is_ok());
    }
}
