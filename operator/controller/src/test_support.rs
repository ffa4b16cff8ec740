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

/// A `MakeWriter` into a shared buffer, to read the operator's JSON log lines back.
#[derive(Clone, Default)]
pub(crate) struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Installs the operator's formatter (INFO and above) writing here as this thread's
    /// default subscriber, for as long as the guard lives.
    ///
    /// tracing caches one interest per callsite for the whole process, computed by the
    /// thread that reaches it first: a test that reaches a log line with no subscriber
    /// would cache `never` and silence that line for every thread, this one included. A
    /// process-wide default that is interested in everything (a bare registry, which
    /// writes nothing) keeps every callsite's interest open; the thread's own subscriber
    /// still decides what it records.
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        static KEEP_INTEREST: std::sync::Once = std::sync::Once::new();
        KEEP_INTEREST.call_once(|| {
            // Another global default (none in this crate's tests) would serve as well.
            let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
        });
        let subscriber = crate::logging::json_lines()
            .with_writer(self.clone())
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// The captured text.
    pub(crate) fn text(&self) -> String {
        self.0
            .lock()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// The captured lines, parsed; a line that is not JSON panics, naming it.
    pub(crate) fn lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
            .collect()
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut buffer) = self.0.lock() {
            buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedLogs;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
