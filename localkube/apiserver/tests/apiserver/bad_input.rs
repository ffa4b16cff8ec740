//! Bad input gets a proper Status error (trap 4 reasons), never a panic or a hang: each
//! malformed request below, then the server still answers.

use crate::support::start;
use axum::http::{Method, Request};
use kube::Client;
use std::time::Duration;

/// (what, method, uri, content type, body, expected code, expected reason)
type Case = (
    &'static str,
    Method,
    String,
    &'static str,
    Vec<u8>,
    u16,
    &'static str,
);

async fn send(
    client: &Client,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(body)
        .expect("request");
    match tokio::time::timeout(Duration::from_secs(10), client.request_text(req))
        .await
        .expect("the server answered in time")
    {
        Ok(_) => (200, "Success".into()),
        Err(kube::Error::Api(s)) => (s.code, s.reason),
        Err(other) => (0, other.to_string()),
    }
}

#[tokio::test]
async fn malformed_requests_get_status_errors() {
    let tc = start().await;
    let c = &tc.client;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cases: Vec<Case> = vec![
        (
            "malformed json",
            Method::POST,
            cms.into(),
            "application/json",
            b"{\"kind\": ".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "json that is not an object",
            Method::POST,
            cms.into(),
            "application/json",
            b"[1,2]".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "malformed yaml",
            Method::POST,
            cms.into(),
            "application/yaml",
            b"a: [b".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "wrong kind",
            Method::POST,
            cms.into(),
            "application/json",
            br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "unknown field under Strict",
            Method::POST,
            format!("{cms}?fieldValidation=Strict"),
            "application/json",
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"dataa":{}}"#
                .to_vec(),
            400,
            "BadRequest",
        ),
        (
            "mistyped built-in field",
            Method::POST,
            "/api/v1/namespaces/default/services".into(),
            "application/json",
            br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":"oops"}"#
                .to_vec(),
            400,
            "BadRequest",
        ),
        (
            "merge patch mistyping a built-in field",
            Method::PATCH,
            format!("{cms}/kube-root-ca.crt"),
            "application/merge-patch+json",
            br#"{"data":{"ca.crt":7}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "update mistyping a built-in field",
            Method::PUT,
            "/api/v1/namespaces/default/services/kubernetes".into(),
            "application/json",
            br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"kubernetes"},"spec":"oops"}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "missing name",
            Method::POST,
            cms.into(),
            "application/json",
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "wrong content type",
            Method::POST,
            cms.into(),
            "text/plain",
            b"hello".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "garbage protobuf",
            Method::POST,
            cms.into(),
            "application/vnd.kubernetes.protobuf",
            b"k8s\0\x0a\xff\xff".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "unknown patch type",
            Method::PATCH,
            format!("{cms}/kube-root-ca.crt"),
            "application/xml",
            b"<a/>".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "malformed merge patch",
            Method::PATCH,
            format!("{cms}/kube-root-ca.crt"),
            "application/merge-patch+json",
            b"{".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "merge patch replacing the object",
            Method::PATCH,
            format!("{cms}/kube-root-ca.crt"),
            "application/merge-patch+json",
            b"[1]".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "malformed json patch",
            Method::PATCH,
            format!("{cms}/kube-root-ca.crt"),
            "application/json-patch+json",
            br#"[{"op":"jump"}]"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "json patch on a missing path",
            Method::PATCH,
            format!("{cms}/kube-root-ca.crt"),
            "application/json-patch+json",
            br#"[{"op":"remove","path":"/nope/x"}]"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "apply without field manager",
            Method::PATCH,
            format!("{cms}/x"),
            "application/apply-patch+yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "malformed apply yaml",
            Method::PATCH,
            format!("{cms}/x?fieldManager=m"),
            "application/apply-patch+yaml",
            b"metadata: [".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "oversize body",
            Method::POST,
            cms.into(),
            "application/json",
            vec![b' '; 4 * 1024 * 1024],
            413,
            "RequestEntityTooLarge",
        ),
        (
            "post to a named object",
            Method::POST,
            format!("{cms}/kube-root-ca.crt"),
            "application/json",
            b"{}".to_vec(),
            405,
            "MethodNotAllowed",
        ),
        (
            "invalid label selector",
            Method::GET,
            format!("{cms}?labelSelector=a%20in%20b"),
            "",
            vec![],
            400,
            "BadRequest",
        ),
        (
            "unsupported field selector",
            Method::GET,
            format!("{cms}?fieldSelector=spec.x%3Dy"),
            "",
            vec![],
            400,
            "BadRequest",
        ),
        (
            "invalid watch resourceVersion",
            Method::GET,
            format!("{cms}?watch=true&resourceVersion=abc"),
            "",
            vec![],
            400,
            "BadRequest",
        ),
        (
            "invalid limit",
            Method::GET,
            format!("{cms}?limit=x"),
            "",
            vec![],
            400,
            "BadRequest",
        ),
        (
            "invalid continue",
            Method::GET,
            format!("{cms}?limit=1&continue=%25%25"),
            "",
            vec![],
            400,
            "BadRequest",
        ),
        (
            "invalid propagation policy",
            Method::DELETE,
            format!("{cms}/kube-root-ca.crt?propagationPolicy=Sideways"),
            "",
            vec![],
            422,
            "Invalid",
        ),
        (
            "unknown resource",
            Method::GET,
            "/api/v1/widgets".into(),
            "",
            vec![],
            404,
            "NotFound",
        ),
        (
            "unknown group",
            Method::GET,
            "/apis/nope.example.com/v1".into(),
            "",
            vec![],
            404,
            "NotFound",
        ),
        (
            "strategic merge on a custom resource path that does not exist",
            Method::PATCH,
            "/apis/example.com/v1/namespaces/default/widgets/w".into(),
            "application/strategic-merge-patch+json",
            b"{}".to_vec(),
            404,
            "NotFound",
        ),
    ];
    for (what, method, uri, ct, body, code, reason) in cases {
        let (got_code, got_reason) = send(c, method, &uri, ct, body).await;
        assert_eq!((got_code, got_reason.as_str()), (code, reason), "{what}");
    }
    // Unauthenticated requests are 401, health is public.
    let mut cfg = kube::Config::new(format!("https://{}", tc.lk.address()).parse().expect("url"));
    cfg.root_cert = Some(vec![pem_to_der(&tc.lk.client_config().ca_pem)]);
    let anonymous = Client::try_from(cfg).expect("client");
    let (code, reason) = send(&anonymous, Method::GET, cms, "", vec![]).await;
    assert_eq!((code, reason.as_str()), (401, "Unauthorized"));
    let (code, _) = send(&anonymous, Method::GET, "/readyz", "", vec![]).await;
    assert_eq!(code, 200);
    // Still serving.
    let (code, _) = send(c, Method::GET, cms, "", vec![]).await;
    assert_eq!(code, 200);
    tc.stop().await;
}

fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("pem")
}
