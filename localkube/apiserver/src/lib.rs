//! The Kubernetes-compatible API server: store, verbs, watch, patch, apply, RBAC, controllers.
//!
//! Entry points: [`LocalKube::start`] (embedded), the `localkube` binary (crate `localkube`), and
//! [`log_path`], where the node agent writes container logs for `pods/log`.
//!
//! Layout: [`store`] (objects as JSON, one global resourceVersion, watch history, snapshot
//! plus append log in `DIR/store/`), [`registry`] (built-in kinds and CRDs), [`ops`] (the
//! verbs; [`cluster`]: what they share), [`apply`]/[`fields`]/[`schema`] (server-side apply, FieldsV1, list types),
//! [`crd_validation`] (custom resources against their schema, CEL rules),
//! [`patch`], [`selector`], [`auth`] (client certificates, tokens, RBAC), [`tls`] (CA,
//! serving and client certificates, their verification), [`batch`] (Job defaults and
//! validation), [`reviews`], [`http`] (routing, watch, logs), [`accept`] (content
//! negotiation), [`wire`] (response field order), [`discovery`] (discovery and OpenAPI v3),
//! [`openapi`] (OpenAPI v2),
//! [`table`], [`protobuf`] (the request bodies kubectl's typed clients send),
//! [`controllers`], [`node_pods`] (what a node agent plugin uses), [`server`].
//!
//! A node agent plugs in as a [`Plugin`] whose `runs_pods()` is true: pod deletion then
//! sets `deletionTimestamp` and waits for the agent's
//! [`Cluster::finish_pod_deletion`](cluster::Cluster); without one, pods are bound by the
//! scheduler and stay Pending, and deletes are immediate.
//!
//! Documented subset (differences from kube-apiserver a client could notice):
//! - Lists and watches always serve the latest state: `resourceVersion`/
//!   `resourceVersionMatch` on lists are accepted but not used for consistent reads;
//!   `continue` tokens page through the current state (no 410 on stale tokens).
//! - Discovery: `/api` and `/apis` serve the aggregated form (`apidiscovery.k8s.io` v2 and
//!   v2beta1) when asked for it, else the legacy form; per group-version documents are
//!   legacy only, as on a real server. `apiregistration.k8s.io` APIServices exist for every
//!   served group version, all local (no `spec.service`, always Available). OpenAPI v3
//!   schemas of built-in kinds are permissive (`x-kubernetes-preserve-unknown-fields`);
//!   `/openapi/v2` ([`openapi`]) is the same schemas as Swagger 2.0, JSON or gnostic
//!   protobuf (whose form has no `paths`); strategic merge patch is served but not
//!   advertised.
//! - Responses are JSON only ([`accept`]: `Accept` clauses for YAML or protobuf are skipped,
//!   an `Accept` with nothing else is 406); `as=Table` and `as=PartialObjectMetadata[List]`
//!   conversions are served. Protobuf request bodies are decoded for the kinds kubectl's
//!   typed `create` commands, `auth can-i`, `create token` and `drain` send.
//! - Field order ([`wire`]): built-in objects, lists, Status and watch events lead with the
//!   real order (`kind`, `apiVersion`, `metadata` in ObjectMeta order, then the kind's own
//!   fields); fields nested below those are in key order, not Go declaration order.
//! - Custom resources: one stored version, no conversion webhooks; validation
//!   ([`crd_validation`]) covers the OpenAPI value validations, list-type uniqueness and CEL
//!   rules with the real messages and ratcheting; not `format`, embedded resources'
//!   metadata, CEL's cost budget or the Kubernetes CEL libraries.
//! - Server-side apply ([`apply`]): list semantics of built-in kinds come from a table of
//!   their keyed and set lists ([`schema`]); any list not in it is atomic. A map or list
//!   that pruning empties is dropped where the real server leaves `null` (which a typed
//!   object omits, but a `nullable` custom-resource field keeps), as is a struct it empties
//!   (a real typed object keeps a non-pointer one, such as a container's `resources: {}`).
//! - `core/v1` and `events.k8s.io/v1` Events are stored separately; a controller mirrors each
//!   `events.k8s.io/v1` Event into `core/v1` (as the one storage of a real server shows it),
//!   not the other way round.
//! - StatefulSets and DaemonSets keep no ControllerRevisions; revisions are template hashes
//!   (so `kubectl rollout history`/`undo` find no revisions).
//! - `batch/v1` Jobs: NonIndexed only (`completionMode: Indexed` is refused with 422);
//!   `podFailurePolicy`, `successPolicy` and `backoffLimitPerIndex` are stored, not
//!   enforced; pods carry no `batch.kubernetes.io/job-tracking` finalizer, so the counts
//!   come from the pods that exist (and never go down). Deleting a Job without a
//!   propagationPolicy orphans its pods, as the real default does, without its Warning.
//! - Client certificates: verified against the cluster CA (no CRLs, no front-proxy
//!   request-header authentication); the certificates this server issues carry one O.
//! - ServiceAccount tokens are HS256 JWTs signed with `DIR/sa-signing-key` (verified only
//!   by this server, as TokenReview does).

pub mod accept;
pub mod apply;
pub mod auth;
pub mod batch;
pub mod cluster;
pub mod controllers;
pub mod crd_validation;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod fields;
pub mod http;
pub mod kind_rules;
pub mod meta;
pub mod node_pods;
pub mod openapi;
pub mod ops;
pub mod patch;
pub mod plugin;
pub mod pod_logs;
pub mod protobuf;
pub mod registry;
pub mod reviews;
pub mod schema;
pub mod selector;
pub mod server;
pub mod store;
pub mod table;
pub mod tls;
pub mod validation;
pub mod wire;

pub use cluster::Cluster;
pub use error::{ApiError, Error, FieldError, Reason, Result};
pub use plugin::{Plugin, PluginContext};
pub use pod_logs::log_path;
pub use server::{CleanupHook, ClientConfig, Config, LocalKube};
