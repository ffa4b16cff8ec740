//! ServiceAccounts: the `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap in
//! every namespace, and tokens for `kubernetes.io/service-account-token` Secrets.

use super::super::cluster::Cluster;
use super::super::meta;
use super::controller::{log_err, Controller};
use base64::Engine;
use jiff::Timestamp;
use serde_json::json;

/// Keeps service accounts and their tokens.
pub struct ServiceAccountController;

impl Controller for ServiceAccountController {
    fn name(&self) -> &'static str {
        "serviceaccount"
    }
    fn reconcile(&mut self, cluster: &Cluster, _now: Timestamp) {
        let (nss, _) = cluster.store.list("/namespaces", None);
        for ns in nss
            .iter()
            .filter(|n| n.pointer("/metadata/deletionTimestamp").is_none())
        {
            let name = meta::name(ns);
            if cluster
                .store
                .get("/serviceaccounts", name, "default")
                .is_none()
            {
                log_err(
                    "serviceaccount",
                    "create default",
                    cluster.create_internal(
                        "",
                        "serviceaccounts",
                        name,
                        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}}),
                        "service-account-controller",
                    ),
                );
            }
            if cluster
                .store
                .get("/configmaps", name, "kube-root-ca.crt")
                .is_none()
            {
                log_err("serviceaccount", "create kube-root-ca.crt", cluster.create_internal("", "configmaps", name,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": name,
                        "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                        "data": {"ca.crt": cluster.ca_pem}}), "root-ca-cert-publisher"));
            }
        }
        let (secrets, _) = cluster.store.list("/secrets", None);
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        for s in secrets.iter().filter(|secret| {
            meta::str_at(secret, "/type") == "kubernetes.io/service-account-token"
                && secret.pointer("/data/token").is_none()
        }) {
            let ns = meta::namespace(s);
            let sa_name = meta::str_at(
                s,
                "/metadata/annotations/kubernetes.io~1service-account.name",
            );
            let Some(sa) = cluster.store.get("/serviceaccounts", ns, sa_name) else {
                continue;
            };
            let sa_uid = meta::uid_of(&sa).to_string();
            let Ok(token) = cluster
                .auth
                .issue_legacy(ns, sa_name, &sa_uid, meta::name(s))
            else {
                continue;
            };
            let (ca, nsb) = (b64(&cluster.ca_pem), b64(ns));
            log_err(
                "serviceaccount",
                "fill token secret",
                cluster.modify(
                    "",
                    "secrets",
                    ns,
                    meta::name(s),
                    None,
                    "token-controller",
                    |sec| {
                        sec["metadata"]["annotations"]["kubernetes.io/service-account.uid"] =
                            json!(sa_uid);
                        sec["data"]["token"] = json!(b64(&token));
                        sec["data"]["ca.crt"] = json!(ca);
                        sec["data"]["namespace"] = json!(nsb);
                        true
                    },
                ),
            );
        }
    }
}
