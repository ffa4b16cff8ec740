//! The verbs on the store with the API server's semantics: create (generateName, defaults,
//! namespace must exist), update (resourceVersion conflicts), patch (merge, JSON,
//! strategic, apply), delete (grace, finalizers, propagation), scale, generation (trap 6)
//! and status subresource rules. Used by the HTTP layer and by the controllers.

use super::apply::{self, Writer};
use super::cluster::{Cluster, DeleteOptions, PatchType, WriteOptions};
use super::defaults;
use super::error::{status_success, ApiError, Reason};
use super::fields::Scope;
use super::kind_rules;
use super::meta;
use super::patch;
use super::registry::{ResourceInfo, Subresource};
use super::schema::{self, Schema};
use super::selector::{FieldSelector, LabelSelector};
use serde_json::{json, Value};
use std::collections::HashSet;

/// Retries of a patch whose base object changed underneath it.
const PATCH_RETRIES_MAX: usize = 5;

fn uses_generation(resource: &ResourceInfo) -> bool {
    resource.crd.is_some()
        || matches!(
            resource.group.as_str(),
            "apps" | "batch" | "policy" | "networking.k8s.io" | "apiextensions.k8s.io"
        )
}

fn spec_of(resource: &ResourceInfo, obj: &Value) -> Value {
    if resource.crd.is_some() {
        let mut value = obj.clone();
        if let Some(map) = value.as_object_mut() {
            map.remove("metadata");
            map.remove("status");
        }
        value
    } else {
        obj.get("spec").cloned().unwrap_or(Value::Null)
    }
}

/// One patch request, as [`Cluster::patch`] got it.
struct PatchRequest<'a> {
    r: &'a ResourceInfo,
    ns: &'a str,
    name: &'a str,
    pt: PatchType,
    body: &'a Value,
    sub: Option<Subresource>,
    o: &'a WriteOptions,
    schema: Schema,
}

/// How one attempt of a delete ended.
enum DeleteAttempt {
    /// What the delete answers.
    Done(Value),
    /// The object was written between the read and the write.
    Stale,
}

fn parse_rv(text: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {text:?}")))
}

impl Cluster {
    fn resource_or_internal(&self, group: &str, plural: &str) -> Result<ResourceInfo, ApiError> {
        self.resource(group, plural)
            .ok_or_else(|| ApiError::internal(format!("resource {plural}.{group} is not served")))
    }

    /// Gets one object.
    pub fn get(&self, resource: &ResourceInfo, ns: &str, name: &str) -> Result<Value, ApiError> {
        let ns = if resource.namespaced { ns } else { "" };
        let mut obj = self
            .store
            .get(&resource.storage_key(), ns, name)
            .ok_or_else(|| ApiError::not_found(&resource.group, &resource.plural, name))?;
        set_gvk(resource, &mut obj);
        Ok(obj)
    }

    /// Lists objects matching selectors; returns items and the list's resourceVersion.
    pub fn list(
        &self,
        resource: &ResourceInfo,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> (Vec<Value>, u64) {
        let ns = if resource.namespaced { ns } else { None };
        let (items, rv) = self.store.list(&resource.storage_key(), ns);
        let items = items
            .into_iter()
            .filter(|o| labels.matches(o) && fields.matches(o))
            .map(|mut object| {
                set_gvk(resource, &mut object);
                object
            })
            .collect();
        (items, rv)
    }

    fn check_namespace(&self, resource: &ResourceInfo, ns: &str) -> Result<(), ApiError> {
        if !resource.namespaced {
            return Ok(());
        }
        let nso = self
            .store
            .get("/namespaces", "", ns)
            .ok_or_else(|| ApiError::not_found("", "namespaces", ns))?;
        if nso.pointer("/metadata/deletionTimestamp").is_some() {
            let mut error = ApiError::forbidden(format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                resource.plural, ""
            ));
            error.details = Some(
                json!({"group": resource.group, "kind": resource.plural, "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}),
            );
            return Err(error);
        }
        Ok(())
    }

    /// Prunes undeclared fields and non-nullable nulls of a custom resource, applies its
    /// schema's defaults, and validates it against the schema and its CEL rules (422 Invalid
    /// listing every violation); `old` is the stored object on an update (ratcheting,
    /// transition rules).
    fn prune_and_validate_custom(
        &self,
        resource: &ResourceInfo,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(crd) = resource.crd.as_ref() else {
            return Ok(());
        };
        let Some(schema) = crd.schema.as_ref() else {
            return Ok(());
        };
        schema::prune(schema, obj, true);
        crate::crd_validation::prune_nulls(schema, obj);
        schema::apply_defaults(schema, obj);
        // The stored object as the API server reads it back (pruned and defaulted on read),
        // so a field the CRD defaults since is unchanged and ratchets like the rest.
        let old = old.map(|stored| {
            let mut read = stored.clone();
            schema::prune(schema, &mut read, true);
            crate::crd_validation::prune_nulls(schema, &mut read);
            schema::apply_defaults(schema, &mut read);
            read
        });
        let errors = crd.validator.get(schema).validate(obj, old.as_ref());
        if errors.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid_fields(
            &resource.group,
            &resource.kind,
            meta::name(obj),
            &errors,
        ))
    }

    fn validate_strict(&self, resource: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
        let Some(schema) = resource
            .crd
            .as_ref()
            .and_then(|crd_version| crd_version.schema.as_ref())
        else {
            return super::validation::strict_builtin(&resource.group, &resource.kind, obj);
        };
        let mut unknown = Vec::new();
        schema::unknown_fields(schema, obj, "", &mut unknown);
        if unknown.is_empty() {
            Ok(())
        } else {
            let list: Vec<String> = unknown
                .iter()
                .map(|user| format!("unknown field \"{user}\""))
                .collect();
            Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                list.join(", ")
            )))
        }
    }

    fn check_type(&self, resource: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is not a JSON object",
            ));
        }
        let want = resource.api_version();
        match obj.get("apiVersion").and_then(Value::as_str) {
            Some(av) if av != want => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({want})"
                )));
            }
            _ => {}
        }
        match obj.get("kind").and_then(Value::as_str) {
            Some(key) if key != resource.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({key}) does not match the expected kind ({})",
                    resource.kind
                )))
            }
            _ => {}
        }
        set_gvk(resource, obj);
        apply::ensure_metadata(obj);
        if !obj["metadata"].is_object() {
            return Err(ApiError::bad_request("metadata must be an object"));
        }
        Ok(())
    }

    /// Creates an object.
    pub fn create(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        mut obj: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if resource.create_only {
            return Err(ApiError::method_not_allowed(
                "create is served by the review endpoint",
            ));
        }
        self.check_type(resource, &mut obj)?;
        if options.strict {
            self.validate_strict(resource, &obj)?;
        } else if resource.crd.is_none() {
            super::validation::decode_builtin(&resource.group, &resource.kind, &obj, false)?;
        }
        // A Service's address is allocated and stored under one hold of the allocation lock:
        // taken twice, two creates could both allocate the first free address before either
        // was stored (seen live: the reader's and iad's Services both got 10.96.0.3).
        let _allocations = kind_rules::store_lock(self, resource);
        self.prepare_create(resource, ns, &mut obj)?;
        if resource.crd.is_none() {
            super::validation::decode_builtin(&resource.group, &resource.kind, &obj, false)?;
        } else {
            self.prune_and_validate_custom(resource, &mut obj, None)?;
        }
        let (api_version, now) = (resource.api_version(), meta::now());
        let w = writer(options, resource, None, &api_version, &now);
        let schema = self.schema(resource);
        apply::track_update(None, &mut obj, &schema, &w);
        self.store_create(resource, obj, options.dry_run)
    }

    fn prepare_create(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let map = &mut obj["metadata"];
        if resource.namespaced {
            match map.get("namespace").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => map["namespace"] = json!(ns),
            }
        } else if let Some(mm) = map.as_object_mut() {
            mm.remove("namespace");
        }
        let mut name = meta::str_at(map, "/name").to_string();
        if name.is_empty() {
            let gen = meta::str_at(map, "/generateName").to_string();
            if gen.is_empty() {
                return Err(ApiError::invalid(
                    &resource.group,
                    &resource.kind,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = format!("{gen}{}", meta::random_suffix());
            map["name"] = json!(name);
        }
        if !kind_rules::valid_name(resource, &name) {
            return Err(ApiError::invalid(&resource.group, &resource.kind, &name, "metadata.name", format!("Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")));
        }
        self.check_namespace(resource, ns)?;
        if let Some(mm) = map.as_object_mut() {
            for key in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
            ] {
                mm.remove(key);
            }
            mm.insert("uid".into(), json!(meta::uid()));
            mm.insert("creationTimestamp".into(), json!(meta::now()));
            if uses_generation(resource) {
                mm.insert("generation".into(), json!(1));
            } else {
                mm.remove("generation");
            }
        }
        match &resource.crd {
            Some(crd_version) => {
                if resource.has_subresource(Subresource::Status) {
                    if let Some(mm) = obj.as_object_mut() {
                        mm.remove("status");
                    }
                }
                if let Some(s) = &crd_version.schema {
                    schema::apply_defaults(s, obj);
                }
            }
            None => defaults::builtin_defaults(&resource.group, &resource.kind, obj),
        }
        kind_rules::prepare_create(self, resource, obj)
    }

    fn store_create(&self, r: &ResourceInfo, obj: Value, dry_run: bool) -> Result<Value, ApiError> {
        if dry_run {
            return Ok(obj);
        }
        // The caller holds the allocation lock for a Service (`kind_rules::store_lock`).
        let mut created = self.store.create(&r.storage_key(), obj)?;
        kind_rules::after_store(self, r, &created);
        set_gvk(r, &mut created);
        tracing::debug!(resource = %r.plural, namespace = meta::namespace(&created), name = meta::name(&created), "created");
        Ok(created)
    }

    /// Replaces an object (PUT), on the main resource or the `status` subresource.
    pub fn update(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        name: &str,
        mut obj: Value,
        sub: Option<Subresource>,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.check_type(resource, &mut obj)?;
        if options.strict {
            self.validate_strict(resource, &obj)?;
        }
        let body_name = meta::name(&obj).to_string();
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        obj["metadata"]["name"] = json!(name);
        let ns = if resource.namespaced { ns } else { "" };
        let Some(old) = self.store.get(&resource.storage_key(), ns, name) else {
            if kind_rules::update_creates(resource, sub) {
                return self.create(resource, ns, obj, options);
            }
            return Err(ApiError::not_found(&resource.group, &resource.plural, name));
        };
        let expected = match meta::str_at(&obj, "/metadata/resourceVersion") {
            "" => None,
            text => Some(parse_rv(text)?),
        };
        self.commit(resource, &old, obj, sub, options, expected, None)
    }

    /// Turns a requested new state into the stored one and writes it.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        resource: &ResourceInfo,
        old: &Value,
        requested: Value,
        sub: Option<Subresource>,
        options: &WriteOptions,
        expected_rv: Option<u64>,
        applied: Option<&Value>,
    ) -> Result<Value, ApiError> {
        if resource.crd.is_none() {
            super::validation::decode_builtin(&resource.group, &resource.kind, &requested, false)?;
        }
        let mut new = written_fields(resource, old, requested, sub);
        set_gvk(resource, &mut new);
        keep_server_metadata(old, &mut new);
        check_no_new_finalizers(resource, old, &new)?;
        kind_rules::prepare_update(resource, old, &mut new, sub)?;
        for path in [
            "/spec/renewTime",
            "/spec/acquireTime",
            "/eventTime",
            "/series/lastObservedTime",
        ] {
            meta::normalize_micro_time(&mut new, path);
        }
        if uses_generation(resource)
            && sub.is_none()
            && spec_of(resource, old) != spec_of(resource, &new)
        {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        let schema = self.schema(resource);
        let (api_version, now) = (resource.api_version(), meta::now());
        let w = writer(options, resource, sub, &api_version, &now);
        if applied.is_none() {
            apply::track_update(Some(old), &mut new, &schema, &w);
        }
        if resource.crd.is_none() {
            super::validation::decode_builtin(&resource.group, &resource.kind, &new, false)?;
        }
        if resource.crd.is_some() {
            self.prune_and_validate_custom(resource, &mut new, Some(old))?;
        }
        self.store_update(resource, old, new, options.dry_run, expected_rv)
    }

    /// Stores the new state of `old` (unless it is the same but for managed-fields times,
    /// or `dry_run`); a deleted object without finalizers left is gone instead.
    fn store_update(
        &self,
        resource: &ResourceInfo,
        old: &Value,
        new: Value,
        dry_run: bool,
        expected_rv: Option<u64>,
    ) -> Result<Value, ApiError> {
        if without_managed_time(old) == without_managed_time(&new) {
            let mut same = old.clone();
            set_gvk(resource, &mut same);
            return Ok(same);
        }
        if dry_run {
            return Ok(new);
        }
        // As kube-apiserver's `ShouldDeleteDuringUpdate`: an update removes an object being
        // deleted once it has no finalizers left, unless the existing object is in a graceful
        // deletion (`deletionGracePeriodSeconds` > 0: a pod its kubelet is still stopping). That
        // one only its kubelet's final delete removes; a status write or a label patch on it
        // meanwhile must not (s029: the kubelet's status write removed a terminating pod, its
        // StatefulSet created the next one at once, and the operator promoted while the old
        // pod's frozen mysqld still ran).
        let deleting = old.pointer("/metadata/deletionTimestamp").is_some()
            || new.pointer("/metadata/deletionTimestamp").is_some();
        let graceful = old
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|grace| grace > 0);
        if deleting
            && !graceful
            && finalizers(&new).is_empty()
            && kind_rules::kind_finalizers(resource, &new).is_empty()
        {
            let (ns, name) = (
                meta::namespace(old).to_string(),
                meta::name(old).to_string(),
            );
            let mut gone = self.store.delete(
                &resource.storage_key(),
                &ns,
                &name,
                expected_rv.or_else(|| rv_of(old)),
            )?;
            kind_rules::after_delete(self, resource, &gone);
            set_gvk(resource, &mut gone);
            return Ok(gone);
        }
        let mut stored = self
            .store
            .update(&resource.storage_key(), new, expected_rv)?;
        kind_rules::after_store(self, resource, &stored);
        set_gvk(resource, &mut stored);
        Ok(stored)
    }

    /// Patches an object (or, for apply, creates it when missing).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        name: &str,
        pt: PatchType,
        body: &Value,
        sub: Option<Subresource>,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let ns = if resource.namespaced { ns } else { "" };
        if pt == PatchType::Strategic && resource.crd.is_some() {
            // as the real server words it for custom resources: their patch types only
            let mut error =
                ApiError::unsupported_media_type("application/strategic-merge-patch+json");
            error.message = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into();
            return Err(error);
        }
        if pt == PatchType::Apply && options.manager.is_empty() {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let request = PatchRequest {
            r: resource,
            ns,
            name,
            pt,
            body,
            sub,
            o: options,
            schema: self.schema(resource),
        };
        for _ in 0..PATCH_RETRIES_MAX {
            let old = self.store.get(&resource.storage_key(), ns, name);
            let Some(old) = old else {
                if pt != PatchType::Apply || sub == Some(Subresource::Status) {
                    return Err(ApiError::not_found(&resource.group, &resource.plural, name));
                }
                // Allocated and stored under one hold of the allocation lock (see `create`).
                let _allocations = kind_rules::store_lock(self, resource);
                let created = self.apply_create(&request)?;
                return match self.store_create(resource, created, options.dry_run) {
                    Err(ApiError {
                        reason: Reason::AlreadyExists,
                        ..
                    }) => continue,
                    other => other,
                };
            };
            let (new, applied) = self.patch_existing(&request, &old)?;
            match self.commit(resource, &old, new, sub, options, rv_of(&old), applied) {
                Err(ApiError {
                    reason: Reason::Conflict,
                    details,
                    ..
                }) if details.as_ref().and_then(|d| d.get("causes")).is_none() => continue,
                other => return other,
            }
        }
        Err(ApiError::conflict(&resource.group, &resource.plural, name))
    }

    /// The object an apply of a missing object creates.
    fn apply_create(&self, request: &PatchRequest) -> Result<Value, ApiError> {
        let PatchRequest { r, ns, name, o, .. } = *request;
        let mut obj = request.body.clone();
        self.check_type(r, &mut obj)?;
        // The real server applies onto an empty object here, so an apply body without
        // a name cannot create (its checkName sees "").
        check_name(&obj, name, ns)?;
        if o.strict {
            self.validate_strict(r, &obj)?;
        }
        let (api_version, now) = (r.api_version(), meta::now());
        let w = writer(o, r, None, &api_version, &now);
        let mut created = apply::apply(None, &obj, o.force, &request.schema, &w)?;
        let managed = created.pointer("/metadata/managedFields").cloned();
        if r.crd.is_none() {
            super::validation::decode_builtin(&r.group, &r.kind, &created, false)?;
        }
        self.prepare_create(r, ns, &mut created)?;
        if r.crd.is_some() {
            self.prune_and_validate_custom(r, &mut created, None)?;
        }
        if let Some(mf) = managed {
            created["metadata"]["managedFields"] = mf;
        }
        Ok(created)
    }

    /// The stored `old` patched, and for an apply the applied configuration: what to
    /// commit.
    fn patch_existing<'a>(
        &self,
        request: &PatchRequest<'a>,
        old: &Value,
    ) -> Result<(Value, Option<&'a Value>), ApiError> {
        let PatchRequest { r, name, pt, o, .. } = *request;
        let old_rv = rv_of(old);
        let mut base = old.clone();
        set_gvk(r, &mut base);
        let (new, applied) = self.patched(request, &base)?;
        if !new.is_object() || !new.get("metadata").map(Value::is_object).unwrap_or(false) {
            return Err(ApiError::bad_request(
                "the patch produced an object without metadata",
            ));
        }
        if o.strict && pt != PatchType::Apply {
            self.validate_strict(r, &new)?;
        }
        let requested_rv = meta::str_at(&new, "/metadata/resourceVersion").to_string();
        let explicit = !requested_rv.is_empty()
            && Some(requested_rv.as_str()) != old_rv.map(|number| number.to_string()).as_deref();
        if explicit {
            return Err(ApiError::conflict(&r.group, &r.plural, name));
        }
        Ok((new, applied))
    }

    /// `base` with the patch applied, by patch type; for an apply also the applied
    /// configuration.
    fn patched<'a>(
        &self,
        request: &PatchRequest<'a>,
        base: &Value,
    ) -> Result<(Value, Option<&'a Value>), ApiError> {
        let PatchRequest {
            r,
            ns,
            name,
            body,
            sub,
            o,
            ..
        } = *request;
        let schema = &request.schema;
        Ok(match request.pt {
            PatchType::Merge => {
                let mut n = base.clone();
                patch::merge_patch(&mut n, body);
                (n, None)
            }
            PatchType::Json => {
                let mut n = base.clone();
                patch::json_patch(&mut n, body)?;
                (n, None)
            }
            PatchType::Strategic => (patch::strategic_merge(base, body, schema)?, None),
            PatchType::Apply => {
                let mut a = body.clone();
                self.check_type(r, &mut a)?;
                // Applied onto the live object, a body without a name keeps the live one
                // (docs/design/history.md#issue-14-item-1); only a different name or namespace
                // is rejected.
                if meta::name(&a).is_empty() {
                    a["metadata"]["name"] = json!(name);
                }
                check_name(&a, name, ns)?;
                if o.strict {
                    self.validate_strict(r, &a)?;
                }
                let (api_version, now) = (r.api_version(), meta::now());
                let w = writer(o, r, sub, &api_version, &now);
                (
                    apply::apply(Some(base), &a, o.force, schema, &w)?,
                    Some(body),
                )
            }
        })
    }

    /// Deletes an object: at once, or by setting deletionTimestamp when finalizers (or a
    /// graceful pod termination) hold it.
    pub fn delete(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        // A controller may write the object between this read and the write (a
        // Deployment's status right after `kubectl scale`): read again and decide again, as
        // `modify` and the scale and patch paths do, instead of answering 409 Conflict.
        for _ in 0..PATCH_RETRIES_MAX {
            match self.delete_attempt(resource, ns, name, options)? {
                DeleteAttempt::Done(result) => return Ok(result),
                DeleteAttempt::Stale => continue,
            }
        }
        Err(ApiError::conflict(&resource.group, &resource.plural, name))
    }

    /// One read-decide-write of [`Cluster::delete`].
    fn delete_attempt(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<DeleteAttempt, ApiError> {
        let ns = if resource.namespaced { ns } else { "" };
        let key = resource.storage_key();
        let old = self
            .store
            .get(&key, ns, name)
            .ok_or_else(|| ApiError::not_found(&resource.group, &resource.plural, name))?;
        check_preconditions(&old, options)?;
        let mut new = old.clone();
        let fins = self.deletion_finalizers(resource, &old, options);
        let graceful_pod = kind_rules::graceful_delete(self, resource, &old, options);
        let ns_fins = kind_rules::kind_finalizers(resource, &old);
        if fins.is_empty() && ns_fins.is_empty() && !graceful_pod {
            if options.dry_run {
                return Ok(DeleteAttempt::Done(old));
            }
            return self.delete_now(resource, ns, name).map(DeleteAttempt::Done);
        }
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            let graceful = old
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .is_some_and(|grace| grace > 0);
            // A delete with grace 0 of an object in a graceful deletion that finalizers still
            // hold (a pod's kubelet done with it) ends the grace period: the last finalizer's
            // removal then removes it.
            if graceful && options.grace_period_seconds == Some(0) && !options.dry_run {
                new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                return self.store_deleting(resource, &key, new, &old);
            }
            let mut object = old;
            set_gvk(resource, &mut object);
            return Ok(DeleteAttempt::Done(object));
        }
        let grace = if graceful_pod {
            options.grace_period_seconds.unwrap_or_else(|| {
                old.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(30)
            })
        } else {
            0
        };
        new["metadata"]["deletionTimestamp"] =
            json!(meta::time(meta::add_seconds(jiff::Timestamp::now(), grace)));
        new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        if !fins.is_empty() {
            new["metadata"]["finalizers"] = json!(fins);
        }
        if let Some(generation) = old.pointer("/metadata/generation").and_then(Value::as_i64) {
            new["metadata"]["generation"] = json!(generation + 1);
        }
        kind_rules::mark_deleting(resource, &mut new);
        if options.dry_run {
            return Ok(DeleteAttempt::Done(new));
        }
        #[cfg(test)]
        {
            let interleave = self
                .delete_interleave
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(write) = interleave {
                write(self);
            }
        }
        self.store_deleting(resource, &key, new, &old)
    }

    /// Stores `new`, the object `old` marked (further) for deletion, if nothing wrote it since
    /// it was read; [`DeleteAttempt::Stale`] if something did (the caller reads again).
    fn store_deleting(
        &self,
        resource: &ResourceInfo,
        key: &str,
        new: Value,
        old: &Value,
    ) -> Result<DeleteAttempt, ApiError> {
        match self.store.update(key, new, rv_of(old)) {
            Ok(mut stored) => {
                set_gvk(resource, &mut stored);
                Ok(DeleteAttempt::Done(stored))
            }
            Err(ApiError {
                reason: Reason::Conflict,
                ..
            }) => Ok(DeleteAttempt::Stale),
            Err(error) => Err(error),
        }
    }

    /// The finalizers that hold `old` once deleted: its own, plus `orphan` or
    /// `foregroundDeletion` when the propagation asks for it and it has dependents (not
    /// added again to an object already being deleted).
    fn deletion_finalizers(
        &self,
        resource: &ResourceInfo,
        old: &Value,
        options: &DeleteOptions,
    ) -> Vec<String> {
        let mut fins: Vec<String> = finalizers(old).into_iter().map(String::from).collect();
        let propagation = options
            .propagation
            .clone()
            .unwrap_or_else(|| kind_rules::default_propagation(resource).to_string());
        let policy_finalizer = match propagation.as_str() {
            "Orphan" => Some("orphan"),
            "Foreground" => Some("foregroundDeletion"),
            _ => None,
        };
        let has_dependents = policy_finalizer.is_some() && self.has_dependents(meta::uid_of(old));
        if let Some(field) = policy_finalizer {
            if has_dependents
                && !fins.iter().any(|finalizer| finalizer == field)
                && old.pointer("/metadata/deletionTimestamp").is_none()
            {
                fins.push(field.into());
            }
        }
        fins
    }

    /// Removes the object now; answers a Status, or the object for the kinds that answer
    /// with it.
    fn delete_now(&self, r: &ResourceInfo, ns: &str, name: &str) -> Result<Value, ApiError> {
        let gone = self.store.delete(&r.storage_key(), ns, name, None)?;
        kind_rules::after_delete(self, r, &gone);
        tracing::debug!(resource = %r.plural, namespace = ns, name, "deleted");
        if kind_rules::delete_answers_object(r) {
            let mut g = gone;
            set_gvk(r, &mut g);
            return Ok(g);
        }
        Ok(status_success(
            &r.group,
            &r.plural,
            name,
            meta::uid_of(&gone),
        ))
    }

    fn has_dependents(&self, uid: &str) -> bool {
        self.store.all_objects().iter().any(|(_, object)| {
            object
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|owner_reference| meta::str_at(owner_reference, "/uid") == uid)
        })
    }

    /// Deletes every object matching the selectors.
    pub fn delete_collection(
        &self,
        resource: &ResourceInfo,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let (items, _) = self.list(resource, ns, labels, fields);
        for item in &items {
            match self.delete(resource, meta::namespace(item), meta::name(item), options) {
                Ok(_) => {}
                Err(ApiError {
                    reason: Reason::NotFound,
                    ..
                }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}))
    }

    /// The `autoscaling/v1` Scale of an object.
    pub fn get_scale(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let obj = self.get(resource, ns, name)?;
        Ok(self.scale_of(resource, &obj))
    }

    fn scale_paths(resource: &ResourceInfo) -> (String, String, String) {
        match resource
            .crd
            .as_ref()
            .and_then(|crd_version| crd_version.scale.as_ref())
        {
            Some(s) => (
                json_path_to_pointer(meta::str_at(s, "/specReplicasPath")),
                json_path_to_pointer(meta::str_at(s, "/statusReplicasPath")),
                json_path_to_pointer(meta::str_at(s, "/labelSelectorPath")),
            ),
            None => (
                "/spec/replicas".into(),
                "/status/replicas".into(),
                String::new(),
            ),
        }
    }

    fn scale_of(&self, resource: &ResourceInfo, obj: &Value) -> Value {
        let (spec_p, status_p, sel_p) = Self::scale_paths(resource);
        let selector = if sel_p.is_empty() {
            obj.pointer("/spec/selector")
                .map(selector_string)
                .unwrap_or_default()
        } else {
            obj.pointer(&sel_p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": meta::name(obj), "namespace": meta::namespace(obj), "uid": meta::uid_of(obj),
                "resourceVersion": meta::str_at(obj, "/metadata/resourceVersion"), "creationTimestamp": meta::str_at(obj, "/metadata/creationTimestamp")},
            "spec": {"replicas": obj.pointer(&spec_p).and_then(Value::as_i64).unwrap_or(0)},
            "status": {"replicas": obj.pointer(&status_p).and_then(Value::as_i64).unwrap_or(0), "selector": selector}})
    }

    /// Writes a Scale (PUT or patch of the scale subresource): changes the spec's replicas.
    pub fn write_scale(
        &self,
        resource: &ResourceInfo,
        ns: &str,
        name: &str,
        pt: Option<PatchType>,
        body: &Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        for _ in 0..PATCH_RETRIES_MAX {
            let obj = self.get(resource, ns, name)?;
            let mut scale = self.scale_of(resource, &obj);
            match pt {
                None => scale = body.clone(),
                Some(PatchType::Merge) | Some(PatchType::Strategic) | Some(PatchType::Apply) => {
                    patch::merge_patch(&mut scale, body)
                }
                Some(PatchType::Json) => patch::json_patch(&mut scale, body)?,
            }
            let replicas = scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .ok_or_else(|| {
                    ApiError::invalid(
                        "autoscaling",
                        "Scale",
                        name,
                        "spec.replicas",
                        "Required value",
                    )
                })?;
            if replicas < 0 {
                return Err(ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    "spec.replicas",
                    format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                ));
            }
            let want_rv = meta::str_at(&scale, "/metadata/resourceVersion").to_string();
            if !want_rv.is_empty() && want_rv != meta::str_at(&obj, "/metadata/resourceVersion") {
                return Err(ApiError::conflict(&resource.group, &resource.plural, name));
            }
            let (spec_p, _, _) = Self::scale_paths(resource);
            let mut new = obj.clone();
            set_pointer(&mut new, &spec_p, json!(replicas));
            match self.commit(resource, &obj, new, None, options, rv_of(&obj), None) {
                Ok(stored) => return Ok(self.scale_of(resource, &stored)),
                Err(ApiError {
                    reason: Reason::Conflict,
                    ..
                }) if want_rv.is_empty() => continue,
                Err(error) => return Err(error),
            }
        }
        Err(ApiError::conflict(&resource.group, &resource.plural, name))
    }

    /// Internal write helper for controllers: gets, mutates, updates with retries.
    #[allow(clippy::too_many_arguments)]
    pub fn modify(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        name: &str,
        sub: Option<Subresource>,
        manager: &str,
        f: impl Fn(&mut Value) -> bool,
    ) -> Result<Option<Value>, ApiError> {
        let resource = self.resource_or_internal(group, plural)?;
        for _ in 0..PATCH_RETRIES_MAX {
            let Some(old) = self.store.get(
                &resource.storage_key(),
                if resource.namespaced { ns } else { "" },
                name,
            ) else {
                return Ok(None);
            };
            let mut new = old.clone();
            if !f(&mut new) {
                return Ok(Some(old));
            }
            match self.commit(
                &resource,
                &old,
                new,
                sub,
                &WriteOptions::manager(manager),
                rv_of(&old),
                None,
            ) {
                Ok(value) => return Ok(Some(value)),
                Err(ApiError {
                    reason: Reason::Conflict,
                    ..
                }) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(ApiError::conflict(group, plural, name))
    }

    /// Internal create for controllers.
    pub fn create_internal(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        obj: Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let resource = self.resource_or_internal(group, plural)?;
        self.create(&resource, ns, obj, &WriteOptions::manager(manager))
    }

    /// Internal delete for controllers.
    pub fn delete_internal(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        name: &str,
        propagation: Option<&str>,
    ) -> Result<Value, ApiError> {
        let resource = self.resource_or_internal(group, plural)?;
        self.delete(
            &resource,
            ns,
            name,
            &DeleteOptions {
                propagation: propagation.map(String::from),
                ..Default::default()
            },
        )
    }
}

/// The real server's `checkName` on the object a patch produced: the name must equal the
/// URL's, and a non-empty namespace must equal the request's.
fn check_name(obj: &Value, name: &str, ns: &str) -> Result<(), ApiError> {
    let obj_name = meta::name(obj);
    if obj_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({obj_name}) does not match the name on the URL ({name})"
        )));
    }
    let obj_ns = meta::namespace(obj);
    if !ns.is_empty() && !obj_ns.is_empty() && obj_ns != ns {
        return Err(ApiError::bad_request(format!(
            "the namespace of the object ({obj_ns}) does not match the namespace on the request ({ns})"
        )));
    }
    Ok(())
}

/// The object an update through `sub` asks for: through `status`, the stored object with
/// the requested status (and managed fields); through the main resource, the requested
/// object with the stored status when the status subresource owns it.
fn written_fields(
    resource: &ResourceInfo,
    old: &Value,
    requested: Value,
    sub: Option<Subresource>,
) -> Value {
    if sub == Some(Subresource::Status) {
        let mut n = old.clone();
        n["status"] = requested.get("status").cloned().unwrap_or(Value::Null);
        if let Some(mf) = requested.pointer("/metadata/managedFields") {
            n["metadata"]["managedFields"] = mf.clone();
        }
        return n;
    }
    let mut n = requested;
    if kind_rules::status_subresource_owns_status(resource) {
        match old.get("status") {
            Some(s) => n["status"] = s.clone(),
            None => {
                if let Some(map) = n.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
    n
}

/// Server-owned metadata comes from the stored object.
fn keep_server_metadata(old: &Value, new: &mut Value) {
    for key in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ] {
        match old["metadata"].get(key) {
            Some(value) => new["metadata"][key] = value.clone(),
            None => {
                if let Some(map) = new["metadata"].as_object_mut() {
                    map.remove(key);
                }
            }
        }
    }
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
}

/// An object being deleted takes no new finalizers (422).
fn check_no_new_finalizers(
    resource: &ResourceInfo,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if old.pointer("/metadata/deletionTimestamp").is_none() {
        return Ok(());
    }
    let before: HashSet<&str> = finalizers(old).into_iter().collect();
    if let Some(added) = finalizers(new)
        .into_iter()
        .find(|field| !before.contains(field))
    {
        return Err(ApiError::invalid(
            &resource.group,
            &resource.kind,
            meta::name(old),
            "metadata.finalizers",
            format!("Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{added}\"}}"),
        ));
    }
    Ok(())
}

/// A delete's preconditions (uid, resourceVersion) hold for `old` (409 otherwise).
fn check_preconditions(old: &Value, options: &DeleteOptions) -> Result<(), ApiError> {
    if let Some(uid) = &options.precondition_uid {
        if uid != meta::uid_of(old) {
            return Err(ApiError::conflict_message(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta::uid_of(old)
            )));
        }
    }
    if let Some(rv) = &options.precondition_rv {
        if Some(rv.as_str())
            != old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
        {
            return Err(ApiError::conflict_message(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta::str_at(old, "/metadata/resourceVersion")
            )));
        }
    }
    Ok(())
}

/// The field manager's view of a write by `o` through `sub` at `now`.
fn writer<'a>(
    options: &'a WriteOptions,
    resource: &ResourceInfo,
    sub: Option<Subresource>,
    api_version: &'a str,
    now: &'a str,
) -> Writer<'a> {
    Writer {
        manager: &options.manager,
        api_version,
        subresource: if sub == Some(Subresource::Status) {
            "status"
        } else {
            ""
        },
        scope: scope_of(resource, sub),
        now,
    }
}

/// Which fields a write through `sub` covers.
pub fn scope_of(resource: &ResourceInfo, sub: Option<Subresource>) -> Scope {
    if sub == Some(Subresource::Status) {
        Scope::StatusOnly
    } else if kind_rules::status_subresource_owns_status(resource) {
        Scope::NoStatus
    } else {
        Scope::All
    }
}

fn rv_of(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|text| text.parse().ok())
}

fn finalizers(obj: &Value) -> Vec<&str> {
    meta::strings_at(obj, "/metadata/finalizers")
}

fn without_managed_time(obj: &Value) -> Value {
    let mut value = obj.clone();
    if let Some(mf) = value
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    {
        for e in mf {
            if let Some(map) = e.as_object_mut() {
                map.remove("time");
            }
        }
    }
    value
}

/// Sets `apiVersion` and `kind` of a resource on an object.
pub fn set_gvk(resource: &ResourceInfo, obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(resource.api_version()));
        map.insert("kind".into(), json!(resource.kind));
    }
}

/// `.spec.replicas` -> `/spec/replicas`.
pub fn json_path_to_pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .fold(String::new(), |acc, text| format!("{acc}/{text}"))
}

fn set_pointer(obj: &mut Value, pointer: &str, value: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    for (index, part) in parts.iter().enumerate() {
        if index + 1 == parts.len() {
            if let Some(map) = cur.as_object_mut() {
                map.insert(part.to_string(), value);
            }
            return;
        }
        if !cur.get(*part).map(Value::is_object).unwrap_or(false) {
            cur[*part] = json!({});
        }
        cur = &mut cur[*part];
    }
}

/// A `metav1.LabelSelector` object as the selector string.
pub fn selector_string(sel: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(map) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, value) in map {
            parts.push(format!("{k}={}", value.as_str().unwrap_or_default()));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = meta::str_at(e, "/key");
        let vals: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match meta::str_at(e, "/operator") {
            "In" => parts.push(format!("{key} in ({})", vals.join(","))),
            "NotIn" => parts.push(format!("{key} notin ({})", vals.join(","))),
            "Exists" => parts.push(key.to_string()),
            "DoesNotExist" => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Authenticator;
    use crate::defaults::IpRange;
    use crate::store::Store;
    use std::sync::Arc;

    fn cluster(dir: &std::path::Path) -> Cluster {
        let store = Arc::new(Store::open(None, 100).expect("store"));
        let auth = Authenticator::load(dir).expect("authenticator");
        let range = IpRange::parse("10.96.0.0/16").expect("range");
        Cluster::new(store, auth, range, dir.to_path_buf(), String::new())
    }

    fn create(cluster: &Cluster, group: &str, plural: &str, object: Value) -> Value {
        let resource = cluster.resource(group, plural).expect("resource");
        let ns = if resource.namespaced { "default" } else { "" };
        cluster
            .create(&resource, ns, object, &WriteOptions::manager("test"))
            .expect("create")
    }

    /// `kubectl delete deploy web --cascade=foreground` right after `kubectl scale`: the
    /// Deployment controller's status write lands between the delete's read and its write.
    /// The delete re-reads and applies again instead of answering 409 Conflict.
    #[test]
    fn foreground_delete_retries_over_a_concurrent_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = cluster(dir.path());
        create(
            &c,
            "",
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        );
        let labels = json!({"app": "web"});
        let deployment = create(
            &c,
            "apps",
            "deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
        );
        create(
            &c,
            "apps",
            "replicasets",
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web-1", "namespace": "default",
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                        "name": "web", "uid": meta::uid_of(&deployment), "controller": true}]},
                "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
        );
        *c.delete_interleave.lock().expect("lock") = Some(Box::new(|c: &Cluster| {
            c.modify(
                "apps",
                "deployments",
                "default",
                "web",
                Some(Subresource::Status),
                "deployment-controller",
                |d| {
                    d["status"]["replicas"] = json!(2);
                    true
                },
            )
            .expect("concurrent status write");
        }));
        let resource = c.resource("apps", "deployments").expect("deployments");
        let options = DeleteOptions {
            propagation: Some("Foreground".into()),
            ..Default::default()
        };
        let deleted = c
            .delete(&resource, "default", "web", &options)
            .expect("the delete wins over the concurrent write");
        assert!(
            c.delete_interleave.lock().expect("lock").is_none(),
            "the write was interleaved"
        );
        assert!(deleted.pointer("/metadata/deletionTimestamp").is_some());
        assert_eq!(
            deleted["metadata"]["finalizers"],
            json!(["foregroundDeletion"])
        );
        assert_eq!(
            deleted["status"]["replicas"],
            json!(2),
            "the concurrent write is kept"
        );
    }

    /// Services created at once never share a cluster IP: the first free address is taken
    /// and stored under one hold of the allocation lock (seen live: after a reinstall, the
    /// reader's and iad's Services both got 10.96.0.3, the proxy could not listen for the
    /// second, and its name never resolved).
    #[test]
    fn services_created_at_once_get_distinct_cluster_ips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = Arc::new(cluster(dir.path()));
        create(
            &c,
            "",
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        );
        let threads: Vec<_> = (0..8)
            .map(|thread| {
                let shared_cluster = Arc::clone(&c);
                std::thread::spawn(move || {
                    (0..8)
                        .map(|index| {
                            let created = create(
                                &shared_cluster,
                                "",
                                "services",
                                json!({"apiVersion": "v1", "kind": "Service",
                                       "metadata": {"name": format!("s-{thread}-{index}")},
                                       "spec": {"ports": [{"port": 3306}]}}),
                            );
                            created["spec"]["clusterIP"]
                                .as_str()
                                .expect("clusterIP")
                                .to_string()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let ips: Vec<String> = threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("thread"))
            .collect();
        let distinct: std::collections::BTreeSet<&String> = ips.iter().collect();
        assert_eq!(distinct.len(), ips.len(), "{ips:?}");
    }
}
