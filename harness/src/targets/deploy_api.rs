//! `deploy-api`: a deploy API request (docs/design/requirements.md R003.2-R003.4) sent as a
//! client would, and the answer it must get.

use std::collections::BTreeMap;

use bloodraven_api::names;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::Api;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::target::{ExpectTarget, Judging, Substitution, Validation};
use crate::error::Result;
use crate::live::incluster::HttpCall;
use crate::live::observe::cluster_error;
use crate::live::LiveCluster;
use crate::playground::names::OPERATOR_NAMESPACE;
use crate::scenario::matcher::{check_operators, matches};
use crate::scenario::validate::collect_variables_in_str;

/// HTTP methods the deploy API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
}

/// Which listener a deploy API request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeployPort {
    /// TLS :8443 (the only one that serves /deploy/v1).
    #[default]
    Tls,
    /// Plain HTTP :8082 (must never serve it).
    Plain,
}

/// Which operator replica a deploy API request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReplicaTarget {
    /// The leader.
    #[default]
    Leader,
    /// A standby (answers 503 not_leader).
    Follower,
}

/// The caller's projected ServiceAccount token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeployClient {
    /// ServiceAccount namespace.
    pub namespace: String,
    /// ServiceAccount name.
    pub service_account: String,
    /// Token audience (default `bloodraven-deploy`); `""` asks for none, so the token carries
    /// the Kubernetes API's default audience, as a pod's own ServiceAccount token does.
    #[serde(default)]
    pub audience: Option<String>,
}

/// One deploy API request. Strings may use `${var}` saved by an earlier request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeployRequest {
    /// Method.
    pub method: Method,
    /// Path, starting with `/deploy/v1/`.
    pub path: String,
    /// The caller.
    pub client: DeployClient,
    /// JSON body.
    #[serde(default)]
    pub body: Option<Value>,
    /// Listener.
    #[serde(default)]
    pub port: DeployPort,
    /// Replica.
    #[serde(default)]
    pub replica: ReplicaTarget,
}

/// A deploy API request with the answer it must get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeployApiExpect {
    /// The request, re-sent on each poll of the expectation.
    pub request: DeployRequest,
    /// The HTTP status code.
    pub status: u16,
    /// Body fields, partial match.
    #[serde(default)]
    pub body: Option<Value>,
    /// Seconds from the answer's `Date` header to the body's `expiresAt`, both the operator's
    /// clock (docs/design/requirements.md R003.15: expiry is judged on it), matched like a body
    /// field (`{$lte: 121}`).
    /// `Date` has whole seconds, so a lease of `ttl` seconds reads in `(ttl - 1, ttl + 1]`.
    /// An answer without either reads as absent.
    #[serde(default)]
    pub expires_in: Option<Value>,
    /// Save answer fields for later requests: variable name -> top-level body field.
    #[serde(default)]
    pub save: BTreeMap<String, String>,
}

/// The answer: `{"status": 409, "body": {...}, "expiresIn": 119.6}` (the body as JSON, or as
/// a string when it is not JSON; `expiresIn`: `expiresAt` minus the `Date` header in
/// seconds, null without either).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployAnswer {
    /// The HTTP status code.
    #[serde(default)]
    pub status: Option<u16>,
    /// The body.
    #[serde(default)]
    pub body: Value,
    /// Seconds from `Date` to the body's `expiresAt`.
    #[serde(default)]
    pub expires_in: Option<f64>,
}

impl ExpectTarget for DeployApiExpect {
    const NAME: &'static str = "deploy-api";
    type Observation = DeployAnswer;

    fn validate(&self, validation: &mut Validation<'_>) -> Result<(), String> {
        let install = &validation.scenario.install;
        if !install.deploy_api {
            return Err(
                "deploy-api: needs `install: {deployApi: true}` (the API is off by default)"
                    .to_owned(),
            );
        }
        if self.request.replica == ReplicaTarget::Follower && install.replica_count.unwrap_or(1) < 2
        {
            return Err(
                "deploy-api: asks a follower, but install.replicaCount is below 2".to_owned(),
            );
        }
        if !self.request.path.starts_with("/deploy/v1/") {
            return Err(format!(
                "deploy-api: path `{}` must start with /deploy/v1/",
                self.request.path
            ));
        }
        if !(100..=599).contains(&self.status) {
            return Err(format!(
                "deploy-api: status {} is not an HTTP status code",
                self.status
            ));
        }
        let mut used = Vec::new();
        collect_variables_in_str(&self.request.path, &mut used);
        for body in [&self.request.body, &self.body].into_iter().flatten() {
            collect_variables(body, &mut used);
        }
        if let Some(missing) = used
            .iter()
            .find(|name| !validation.variables.contains(*name))
        {
            return Err(format!(
                "deploy-api: uses `${{{missing}}}`, which no earlier step saved"
            ));
        }
        if let Some(body) = &self.body {
            check_operators(body, "deploy-api.body")?;
        }
        if let Some(expires_in) = &self.expires_in {
            check_operators(expires_in, "deploy-api.expiresIn")?;
        }
        validation.variables.extend(self.save.keys().cloned());
        Ok(())
    }

    /// The deploy API from a client's point of view: a projected-style token for the caller's
    /// ServiceAccount, the request to the leader's (or a follower's) :8443 over TLS verified
    /// against the escrow CA under the Service's name, or to :8082 in plain HTTP.
    async fn observe(&self, live: &LiveCluster) -> Result<DeployAnswer> {
        let request = &self.request;
        let token = client_token(live, &request.client).await?;
        let ip = replica_ip(live, request.replica).await?;
        let host = format!("{}.{OPERATOR_NAMESPACE}.svc", names::OPERATOR_DEPLOYMENT);
        let (scheme, port) = match request.port {
            DeployPort::Tls => ("https", names::PORT_OPERATOR_TLS),
            DeployPort::Plain => ("http", names::PORT_OPERATOR_HTTP),
        };
        let ca = live.installer().ca_pem().await?;
        let url = format!("{scheme}://{host}:{port}{}", request.path);
        let answer = live
            .http_in_cluster(&HttpCall {
                method: match request.method {
                    Method::Get => "GET",
                    Method::Post => "POST",
                    Method::Put => "PUT",
                    Method::Delete => "DELETE",
                },
                url: url.clone(),
                ca_pem: (!ca.is_empty()).then_some(ca),
                bearer: Some(token),
                headers: if request.body.is_some() {
                    vec![("Content-Type".to_owned(), "application/json".to_owned())]
                } else {
                    Vec::new()
                },
                body: request.body.as_ref().map(Value::to_string),
                resolve: vec![(host.clone(), std::net::SocketAddr::new(ip, port))],
                timeout: std::time::Duration::from_secs(10),
            })
            .await
            .map_err(|e| cluster_error(format!("call {url}"), e))?;
        let date = answer.headers.get("date").cloned();
        let text = answer.body;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        let expires_in = expires_in_seconds(date.as_deref(), &body);
        Ok(DeployAnswer {
            status: Some(answer.status),
            body,
            expires_in,
        })
    }

    fn evaluate(
        &self,
        observed: &DeployAnswer,
        _judging: &Judging<'_, DeployAnswer>,
    ) -> Result<(), String> {
        if observed.status != Some(self.status) {
            return Err(format!(
                "deploy API {:?} {}: expected status {}, found {}",
                self.request.method,
                self.request.path,
                self.status,
                observed
                    .status
                    .map_or_else(|| "none".to_owned(), |code| code.to_string())
            ));
        }
        if let Some(body) = &self.body {
            matches(body, Some(&observed.body), None)
                .map_err(|why| format!("deploy API body {why}"))?;
        }
        if let Some(expires_in) = &self.expires_in {
            matches(expires_in, Some(&json!(observed.expires_in)), None)
                .map_err(|why| format!("deploy API expiresAt - Date (s) {why}"))?;
        }
        Ok(())
    }

    fn describe(&self) -> Option<String> {
        Some(format!(
            "{:?} {} -> {}",
            self.request.method, self.request.path, self.status
        ))
    }

    fn substitute(&mut self, substitution: &mut Substitution<'_>) {
        substitution.text(&mut self.request.path);
        substitution.text(&mut self.request.client.namespace);
        substitution.text(&mut self.request.client.service_account);
        for document in [&mut self.request.body, &mut self.body, &mut self.expires_in]
            .into_iter()
            .flatten()
        {
            substitution.json(document);
        }
    }

    fn patterns(&self) -> Vec<&Value> {
        self.body.iter().collect()
    }

    /// The request it sends changes the cluster.
    fn acts(&self) -> bool {
        true
    }

    /// The answer fields `save` names. A field the answer lacks (or that is null) is not
    /// saved, so a later `${var}` of it fails its step.
    fn answer_variables(&self, observed: &DeployAnswer) -> Vec<(String, Option<Value>)> {
        self.save
            .iter()
            .map(|(name, field)| {
                let value = observed
                    .body
                    .pointer(&format!("/{field}"))
                    .filter(|value| !value.is_null());
                (name.clone(), value.cloned())
            })
            .collect()
    }
}

/// A token for the caller's ServiceAccount (created when missing: a scenario may call as an
/// unlisted client), with the audience asked for (`bloodraven-deploy` by default; an empty
/// one asks for none, the API server's default, docs/design/requirements.md R003.4: not
/// accepted).
async fn client_token(live: &LiveCluster, client: &DeployClient) -> Result<String> {
    crate::playground::kube::apply(
        live.client(),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": client.service_account, "namespace": client.namespace}}),
    )
    .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(live.client().clone(), &client.namespace);
    let audience = client
        .audience
        .clone()
        .unwrap_or_else(|| names::DEPLOY_AUDIENCE.to_owned());
    let audiences = if audience.is_empty() {
        Vec::new()
    } else {
        vec![audience]
    };
    let token_request = TokenRequest {
        spec: TokenRequestSpec {
            audiences,
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    Ok(accounts
        .create_token_request(&client.service_account, &Default::default(), &token_request)
        .await
        .map_err(|e| {
            cluster_error(
                format!(
                    "request a token for {}/{}",
                    client.namespace, client.service_account
                ),
                e,
            )
        })?
        .status
        .map(|s| s.token)
        .unwrap_or_default())
}

/// The pod IP of the operator replica a request goes to.
async fn replica_ip(live: &LiveCluster, replica: ReplicaTarget) -> Result<std::net::IpAddr> {
    let leader = live.leader_pod().await?;
    let pods = live.operator_pods().await?;
    let target = match replica {
        ReplicaTarget::Leader => leader.clone(),
        ReplicaTarget::Follower => pods.iter().find(|p| Some(*p) != leader.as_ref()).cloned(),
    }
    .ok_or_else(|| {
        cluster_error(
            "call the deploy API",
            format!("no {replica:?} operator pod among {pods:?}"),
        )
    })?;
    let pod_api: Api<Pod> = Api::namespaced(live.client().clone(), OPERATOR_NAMESPACE);
    pod_api
        .get(&target)
        .await
        .map_err(|e| cluster_error(format!("read pod {target}"), e))?
        .status
        .and_then(|s| s.pod_ip)
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| cluster_error("call the deploy API", format!("pod {target} has no IP")))
}

/// Seconds from an HTTP `Date` header (RFC 9110 IMF-fixdate, whole seconds) to the body's
/// `expiresAt` (RFC 3339); `None` when either is missing or unreadable.
pub fn expires_in_seconds(date: Option<&str>, body: &Value) -> Option<f64> {
    let date = jiff::fmt::rfc2822::parse(date?).ok()?.timestamp();
    let expires: jiff::Timestamp = body.get("expiresAt")?.as_str()?.parse().ok()?;
    let millis = expires.as_millisecond() - date.as_millisecond();
    #[allow(clippy::cast_precision_loss)] // lease lengths are far below 2^52 ms
    Some(millis as f64 / 1000.0)
}

fn collect_variables(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => collect_variables_in_str(text, out),
        Value::Array(items) => items.iter().for_each(|item| collect_variables(item, out)),
        Value::Object(map) => map.values().for_each(|item| collect_variables(item, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_in_is_expires_at_minus_the_date_header() {
        let body = json!({"expiresAt": "2026-12-01T23:52:10.500Z"});
        let date = Some("Tue, 01 Dec 2026 23:50:10 GMT");
        assert_eq!(expires_in_seconds(date, &body), Some(120.5));
        assert_eq!(expires_in_seconds(None, &body), None);
        assert_eq!(expires_in_seconds(date, &json!({"error": "held"})), None);
        assert_eq!(expires_in_seconds(Some("yesterday"), &body), None);
    }
}
