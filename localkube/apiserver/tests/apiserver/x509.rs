//! docs/design/history.md#issue-14-item-7: x509 client-certificate authentication, as kind and
//! kubeadm clusters write their admin kubeconfigs: the written kubeconfig's admin has a client
//! certificate and no token, kube-rs and kubectl authenticate with it, RBAC sees the
//! certificate's CN and O as user and groups, certificates of another CA or expired ones are
//! 401, and ServiceAccount token kubeconfigs still work.

use crate::support::{reason, start, TestCluster};
use jiff::SignedDuration;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use localkube_apiserver::tls;
use serde_json::json;
use std::path::{Path, PathBuf};

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The written kubeconfig with its user replaced by `user`, saved next to it as `file`.
fn kubeconfig_with_user(tc: &TestCluster, user: AuthInfo, file: &str) -> (Kubeconfig, PathBuf) {
    let mut kc = Kubeconfig::read_from(tc.lk.kubeconfig_path()).expect("read kubeconfig");
    kc.auth_infos[0].auth_info = Some(user);
    let path = tc.dir.path().join(file);
    std::fs::write(&path, serde_yaml::to_string(&kc).expect("yaml")).expect("write kubeconfig");
    (kc, path)
}

fn cert_user(cert_pem: &str, key_pem: &str) -> AuthInfo {
    AuthInfo {
        client_certificate_data: Some(b64(cert_pem)),
        client_key_data: Some(b64(key_pem).into()),
        ..Default::default()
    }
}

async fn client(kc: Kubeconfig) -> Client {
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

async fn whoami(client: &Client) -> (String, Vec<String>) {
    let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
    let review: SelfSubjectReview = serde_json::from_value(
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .expect("review");
    let out = reviews
        .create(&PostParams::default(), &review)
        .await
        .expect("create SelfSubjectReview");
    let user = out.status.and_then(|s| s.user_info).expect("userInfo");
    (
        user.username.unwrap_or_default(),
        user.groups.unwrap_or_default(),
    )
}

async fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .await
        .expect("kubectl 1.32 at /usr/bin/kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Item 7: the admin kubeconfig carries a client certificate and no token; kube-rs and
/// kubectl (get nodes, auth whoami) authenticate with it as `admin` in `system:masters`.
/// Before: the admin user was a bearer token.
#[tokio::test]
async fn admin_kubeconfig_authenticates_with_its_client_certificate() {
    let tc = start().await;
    let kc = Kubeconfig::read_from(tc.lk.kubeconfig_path()).expect("read kubeconfig");
    let admin = kc.auth_infos[0].auth_info.clone().expect("admin user");
    assert!(
        admin.token.is_none() && admin.token_file.is_none(),
        "no token for the admin"
    );
    assert!(admin.client_certificate_data.is_some() && admin.client_key_data.is_some());
    let text = std::fs::read_to_string(tc.lk.kubeconfig_path()).expect("kubeconfig text");
    assert!(!text.contains("token"), "{text}");

    // kube-rs from the written kubeconfig.
    let nodes: Api<Node> = Api::all(tc.client.clone());
    assert!(!nodes
        .list(&ListParams::default())
        .await
        .expect("list nodes")
        .items
        .is_empty());
    let (user, groups) = whoami(&tc.client).await;
    assert_eq!(user, "admin");
    assert!(groups.iter().any(|g| g == "system:masters"), "{groups:?}");
    assert!(
        groups.iter().any(|g| g == "system:authenticated"),
        "{groups:?}"
    );

    // kubectl 1.32 from the written kubeconfig.
    let cache = tc.dir.path().join("kubectl-cache");
    let (ok, out, err) = kubectl(&tc.lk.kubeconfig_path(), &cache, &["get", "nodes"]).await;
    assert!(ok && out.contains("iad"), "kubectl get nodes: {out}{err}");
    let (ok, out, err) = kubectl(
        &tc.lk.kubeconfig_path(),
        &cache,
        &["auth", "whoami", "-o", "json"],
    )
    .await;
    assert!(ok, "kubectl auth whoami: {err}");
    let review: serde_json::Value = serde_json::from_str(&out).expect("whoami json");
    assert_eq!(review["status"]["userInfo"]["username"], json!("admin"));
    assert!(review["status"]["userInfo"]["groups"]
        .as_array()
        .is_some_and(|g| g.contains(&json!("system:masters"))));
    tc.stop().await;
}

/// Item 7: a certificate signed by another CA, or an expired one of the cluster CA, is 401
/// Unauthorized (not a failed handshake), for kube-rs and kubectl alike.
#[tokio::test]
async fn foreign_and_expired_certificates_are_unauthorized() {
    let tc = start().await;
    let now = jiff::Timestamp::now();
    let valid = (
        now - SignedDuration::from_hours(1),
        now + SignedDuration::from_hours(1),
    );
    let other_dir = tempfile::tempdir().expect("tempdir");
    let (other_ca, other_key, _) = tls::load_ca(other_dir.path()).expect("another CA");
    let (cert, key) =
        tls::issue_client_cert(&other_ca, &other_key, "admin", &["system:masters"], valid)
            .expect("foreign certificate");
    let (kc, path) = kubeconfig_with_user(&tc, cert_user(&cert, &key), "foreign.kubeconfig");
    let nodes: Api<Node> = Api::all(client(kc).await);
    let err = nodes
        .list(&ListParams::default())
        .await
        .expect_err("foreign CA refused");
    assert_eq!(reason(&err), ("Unauthorized".to_string(), 401));
    let cache = tc.dir.path().join("kubectl-cache");
    let (ok, out, err) = kubectl(&path, &cache, &["get", "nodes"]).await;
    // kubectl's words for a 401 on discovery, as against kube-apiserver.
    assert!(
        !ok && err.contains("You must be logged in to the server"),
        "kubectl with a foreign certificate: {out}{err}"
    );

    let (ca, ca_key, _) = tls::load_ca(tc.dir.path()).expect("cluster CA");
    let expired = (
        now - SignedDuration::from_hours(48),
        now - SignedDuration::from_hours(24),
    );
    let (cert, key) = tls::issue_client_cert(&ca, &ca_key, "admin", &["system:masters"], expired)
        .expect("expired certificate");
    let (kc, _) = kubeconfig_with_user(&tc, cert_user(&cert, &key), "expired.kubeconfig");
    let nodes: Api<Node> = Api::all(client(kc).await);
    let err = nodes
        .list(&ListParams::default())
        .await
        .expect_err("expired refused");
    assert_eq!(reason(&err), ("Unauthorized".to_string(), 401));
    tc.stop().await;
}

/// Item 7: RBAC treats a certificate's CN and O as it treats a token's user and groups.
#[tokio::test]
async fn rbac_sees_the_certificate_user_and_groups() {
    let tc = start().await;
    let now = jiff::Timestamp::now();
    let valid = (
        now - SignedDuration::from_hours(1),
        now + SignedDuration::from_hours(1),
    );
    let (ca, ca_key, _) = tls::load_ca(tc.dir.path()).expect("cluster CA");
    let (cert, key) =
        tls::issue_client_cert(&ca, &ca_key, "jane", &["night-shift"], valid).expect("certificate");
    let (kc, _) = kubeconfig_with_user(&tc, cert_user(&cert, &key), "jane.kubeconfig");
    let jane = client(kc).await;
    assert_eq!(
        whoami(&jane).await,
        (
            "jane".to_string(),
            vec![
                "night-shift".to_string(),
                "system:authenticated".to_string()
            ]
        )
    );
    let nodes: Api<Node> = Api::all(jane.clone());
    let err = nodes
        .list(&ListParams::default())
        .await
        .expect_err("not allowed yet");
    assert_eq!(reason(&err), ("Forbidden".to_string(), 403));
    let message = format!("{err}");
    assert!(
        message.contains("User \"jane\" cannot list resource \"nodes\""),
        "{message}"
    );
    let binding: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "night-shift-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "night-shift"}]}))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(tc.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind the group");
    assert!(
        nodes.list(&ListParams::default()).await.is_ok(),
        "the group's binding applies"
    );
    tc.stop().await;
}

/// Item 7: a token kubeconfig for a ServiceAccount (no certificate) still authenticates,
/// for kube-rs and `kubectl auth whoami`.
#[tokio::test]
async fn service_account_token_kubeconfigs_still_work() {
    let tc = start().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(tc.client.clone(), "default");
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "bot"}})).expect("sa"),
        )
        .await
        .expect("create sa");
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(600),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let token = accounts
        .create_token_request("bot", &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .expect("status")
        .token;
    let user = AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    let (kc, path) = kubeconfig_with_user(&tc, user, "bot.kubeconfig");
    let bot = client(kc).await;
    assert_eq!(whoami(&bot).await.0, "system:serviceaccount:default:bot");
    let cache = tc.dir.path().join("kubectl-cache");
    let (ok, out, err) = kubectl(
        &path,
        &cache,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    )
    .await;
    assert!(
        ok && out == "system:serviceaccount:default:bot",
        "kubectl auth whoami: {out}{err}"
    );
    tc.stop().await;
}

/// Item 7: a certificate that expires while its client is connected stops authenticating
/// (kube-apiserver verifies the chain on every request, not once per connection).
#[tokio::test]
async fn a_certificate_expiring_on_an_open_connection_stops_authenticating() {
    let tc = start().await;
    let now = jiff::Timestamp::now();
    let short = (
        now - SignedDuration::from_hours(1),
        now + SignedDuration::from_secs(3),
    );
    let (ca, ca_key, _) = tls::load_ca(tc.dir.path()).expect("cluster CA");
    let (cert, key) = tls::issue_client_cert(&ca, &ca_key, "admin", &["system:masters"], short)
        .expect("short-lived certificate");
    let (kc, _) = kubeconfig_with_user(&tc, cert_user(&cert, &key), "short.kubeconfig");
    let nodes: Api<Node> = Api::all(client(kc).await);
    assert!(
        nodes.list(&ListParams::default()).await.is_ok(),
        "valid at first"
    );
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let err = nodes
        .list(&ListParams::default())
        .await
        .expect_err("expired since");
    assert_eq!(reason(&err), ("Unauthorized".to_string(), 401));
    tc.stop().await;
}
