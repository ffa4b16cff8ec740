//! Helpers the crate's unit tests share (compiled for tests only).

use std::net::SocketAddr;

use bloodraven_api::MysqlFailoverGroup;

/// A TCP listener that accepts and never answers (a hanging sidecar); abort the handle to
/// stop it.
pub(crate) async fn silent_listener() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let handle = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    (address, handle)
}

/// A sidecar client addressed by `template` holding a signing key for the playground group
/// (`bloodraven-playground/playground`), as the workloads step loads it every poll.
pub(crate) fn playground_sidecars(template: String) -> crate::sidecar::SidecarClient {
    let client =
        crate::sidecar::SidecarClient::new(crate::sidecar::SidecarAddressing::new(template))
            .expect("sidecars");
    client.signing_keys().set(
        "bloodraven-playground",
        "playground",
        bloodraven_api::auth::OperatorKey::from_seed(&[3; 32]).expect("key"),
    );
    client
}

/// A client for an API server nobody listens on: every read fails at once, as an unknown.
pub(crate) fn unreachable_api_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
    kube::Client::try_from(config).expect("client")
}

/// The playground group (iad, pdx, reader) polled every `poll_interval` (`"2s"`).
pub(crate) fn playground_group(poll_interval: &str) -> MysqlFailoverGroup {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlFailoverGroup",
        "metadata": {"name": "playground", "namespace": "bloodraven-playground"},
        "spec": {
            "image": "mariadb:10.11",
            "sites": [
                {"name": "iad", "role": "read-write"},
                {"name": "pdx", "role": "read-write"},
                {"name": "reader", "role": "read-only"}
            ],
            "initialActiveSite": "iad",
            "pollInterval": poll_interval,
            "dns": {"hostname": "playground-db.example.local", "ttl": 10}
        }
    }))
    .expect("group")
}
