//! The operator's HTTP client of the sidecars (`:8086`, wire types in
//! `bloodraven_api::sidecar`), and the pure translation of an answer into a
//! [`SidecarReading`].
//!
//! Every call has a timeout. A mutation that errored or timed out is an unknown
//! (docs/design/requirements.md R001.15): the caller logs it and the next poll re-reads the
//! status; nothing here retries.
//!
//! Every call but the status read is signed with the group's operator key
//! (docs/design/history.md#issue-10-case-8, [`bloodraven_api::auth`]): [`SigningKeys`] holds
//! the key of each group, loaded by [`crate::workloads`] from the group's Secret before each
//! poll gathers. A group whose key is not loaded yet gets no request at all: the call fails
//! before anything is sent.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bloodraven_api::auth::{AuthHeaders, OperatorKey, SignedRequest, Stamp};
use bloodraven_api::{names, sidecar};
use bloodraven_core::engine::SidecarReading;
use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

/// The default sidecar URL template: the per-site internal Service on port 8086.
pub const DEFAULT_URL_TEMPLATE: &str = "http://mysql-{group}-{site}.{namespace}.svc:8086";
/// The longest a status read or an authority push may take (a poll must not stall on one
/// site); shorter when the poll interval is short, see [`round_trip_budget`].
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(1);
/// Timeout of a fence or repoint.
pub const MUTATION_TIMEOUT: Duration = Duration::from_secs(3);
/// The shortest timeout [`round_trip_budget`] gives a status read or an authority push,
/// however short the poll interval: a loopback round trip to a sidecar that reads mysqld
/// takes milliseconds, a loaded node tens of them.
pub const ROUND_TRIP_MIN: Duration = Duration::from_millis(250);
/// How many sequential rounds of sidecar requests one poll makes: the other sites' status,
/// then the active site's (gather's read order), then the authority pushes (each round
/// concurrent across sites).
pub const POLL_ROUNDS: u32 = 3;
/// Timeout added to a promote request's own drain timeout.
pub const PROMOTE_TIMEOUT_MARGIN: Duration = Duration::from_secs(2);
/// Connect timeout of every call.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The timeout of one status read or authority push in a poll of `poll_interval` (pure):
/// a [`POLL_ROUNDS`]th of the interval, within [`ROUND_TRIP_MIN`]..=[`STATUS_TIMEOUT`]. A poll
/// whose rounds all time out then still ends within its interval, so a site that hangs costs
/// one failed poll per interval and detection keeps its floor of pollInterval x
/// failureThreshold (docs/design/requirements.md R001.9: 2 s x 3 = 6 s).
pub fn round_trip_budget(poll_interval: Duration) -> Duration {
    (poll_interval / POLL_ROUNDS).clamp(ROUND_TRIP_MIN, STATUS_TIMEOUT)
}

/// Where the sidecar of a site answers: a template with `{group}`, `{site}` and
/// `{namespace}` placeholders (overridable for tests and out-of-cluster runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SidecarAddressing {
    template: String,
}

impl Default for SidecarAddressing {
    fn default() -> Self {
        Self::new(DEFAULT_URL_TEMPLATE)
    }
}

impl SidecarAddressing {
    /// Addressing by `template` (e.g. `http://127.0.0.1:18086` for a single test sidecar, or
    /// `http://{site}.test:8086`).
    pub fn new(template: impl Into<String>) -> Self {
        Self {
            template: template.into().trim_end_matches('/').to_string(),
        }
    }

    /// The base URL of `site`'s sidecar.
    pub fn base_url(&self, group: &str, site: &str, namespace: &str) -> String {
        self.template
            .replace("{group}", group)
            .replace("{site}", site)
            .replace("{namespace}", namespace)
    }
}

/// The reading of a `GET /v1/status` answer (pure): a non-2xx status, an undecodable body, or a
/// status of another group or site is [`SidecarReading::Unreachable`] (it counts as a failed
/// poll; the address is wrong or the answer is not this site's).
pub fn reading_from_response(
    group: &str,
    site: &str,
    status_code: u16,
    body: &[u8],
) -> SidecarReading {
    if !(200..300).contains(&status_code) {
        let detail = serde_json::from_slice::<sidecar::ErrorBody>(body)
            .map(|error| error.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(body).chars().take(200).collect());
        return SidecarReading::Unreachable {
            error: format!("sidecar answered {status_code}: {detail}"),
        };
    }
    match serde_json::from_slice::<sidecar::SidecarStatus>(body) {
        Err(error) => SidecarReading::Unreachable {
            error: format!("decode sidecar status: {error}"),
        },
        Ok(status) if status.group != group || status.site != site => SidecarReading::Unreachable {
            error: format!(
                "sidecar reports group {:?} site {:?}, expected {group:?} {site:?}",
                status.group, status.site
            ),
        },
        Ok(status) => SidecarReading::Reachable(Box::new(status)),
    }
}

/// `(namespace, group)`.
type GroupName = (String, String);

/// The operator's signing key of each group, by `(namespace, group)`; shared by every clone
/// of a [`SidecarClient`].
#[derive(Clone, Debug, Default)]
pub struct SigningKeys {
    keys: Arc<RwLock<BTreeMap<GroupName, Arc<OperatorKey>>>>,
}

impl SigningKeys {
    /// Uses `key` for `namespace/group` from now on.
    pub fn set(&self, namespace: &str, group: &str, key: OperatorKey) {
        let mut keys = self
            .keys
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let slot = (namespace.to_string(), group.to_string());
        let changed = keys
            .get(&slot)
            .is_none_or(|known| known.verifying_key() != key.verifying_key());
        if changed {
            tracing::info!(group = %group, namespace = %namespace, verifying_key = %key.verifying_key().to_hex(), "signing key loaded for the group's sidecars");
            keys.insert(slot, Arc::new(key));
        }
    }

    /// The key of `namespace/group`, if loaded.
    pub fn get(&self, namespace: &str, group: &str) -> Option<Arc<OperatorKey>> {
        self.keys
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&(namespace.to_string(), group.to_string()))
            .cloned()
    }
}

/// The signature headers of `method path` with `body` for the sidecar of `group`'s `site`
/// (pure: the stamp's time and nonce are inputs).
pub fn signed_headers(
    key: &OperatorKey,
    group: &str,
    site: &str,
    method: &reqwest::Method,
    path: &str,
    body: &[u8],
    stamp: &Stamp,
) -> AuthHeaders {
    key.sign(
        &SignedRequest {
            group,
            site,
            method: method.as_str(),
            path,
            body,
        },
        stamp,
    )
}

/// An HTTP client of every sidecar of the cluster.
#[derive(Clone, Debug)]
pub struct SidecarClient {
    http: reqwest::Client,
    addressing: SidecarAddressing,
    keys: SigningKeys,
}

impl SidecarClient {
    /// A client with the timeouts above.
    pub fn new(addressing: SidecarAddressing) -> Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|error| Error::Sidecar {
                site: String::new(),
                url: String::new(),
                reason: format!("build http client: {error}"),
            })?;
        Ok(Self {
            http,
            addressing,
            keys: SigningKeys::default(),
        })
    }

    /// The signing keys the calls use (shared by every clone of this client).
    pub fn signing_keys(&self) -> &SigningKeys {
        &self.keys
    }

    /// The addressing in use.
    pub fn addressing(&self) -> &SidecarAddressing {
        &self.addressing
    }

    /// `GET /v1/status` of `site` within `timeout`, as a reading (errors and timeouts are
    /// `Unreachable`, never `Err`).
    pub async fn status(
        &self,
        group: &str,
        site: &str,
        namespace: &str,
        timeout: Duration,
    ) -> SidecarReading {
        let url = format!(
            "{}{}",
            self.addressing.base_url(group, site, namespace),
            sidecar::PATH_STATUS
        );
        let response = match self.http.get(&url).timeout(timeout).send().await {
            Ok(response) => response,
            Err(error) => {
                return SidecarReading::Unreachable {
                    error: format!("get {url}: {}", describe(&error)),
                }
            }
        };
        let code = response.status().as_u16();
        match response.bytes().await {
            Ok(body) => reading_from_response(group, site, code, &body),
            Err(error) => SidecarReading::Unreachable {
                error: format!("read body of {url}: {}", describe(&error)),
            },
        }
    }

    /// `PUT /v1/authority` within `timeout` (the sidecar only caches it, and it is pushed
    /// again every poll).
    pub async fn push_authority(
        &self,
        site: &str,
        namespace: &str,
        authority: &sidecar::Authority,
        timeout: Duration,
    ) -> Result<sidecar::AuthorityResponse> {
        self.call(
            reqwest::Method::PUT,
            &authority.group,
            site,
            namespace,
            sidecar::PATH_AUTHORITY,
            authority,
            timeout,
        )
        .await
    }

    /// `POST /v1/fence`.
    pub async fn fence(
        &self,
        site: &str,
        namespace: &str,
        request: &sidecar::FenceRequest,
    ) -> Result<sidecar::FenceResponse> {
        self.call(
            reqwest::Method::POST,
            &request.group,
            site,
            namespace,
            sidecar::PATH_FENCE,
            request,
            MUTATION_TIMEOUT,
        )
        .await
    }

    /// `POST /v1/backup`, `/v1/restore`, `/v1/reseed` or `/v1/archive` (`path`): starts the
    /// sidecar's job, or answers the one that runs or last finished (202 with its `JobStatus`).
    pub async fn start_job(
        &self,
        site: &str,
        namespace: &str,
        group: &str,
        path: &str,
        request: &impl serde::Serialize,
    ) -> Result<sidecar::JobStatus> {
        self.call(
            reqwest::Method::POST,
            group,
            site,
            namespace,
            path,
            request,
            MUTATION_TIMEOUT,
        )
        .await
    }

    /// `POST /v1/promote` (timeout: the request's drain timeout plus a margin).
    pub async fn promote(
        &self,
        site: &str,
        namespace: &str,
        request: &sidecar::PromoteRequest,
    ) -> Result<sidecar::PromoteResponse> {
        let timeout = Duration::from_millis(request.timeout_ms) + PROMOTE_TIMEOUT_MARGIN;
        self.call(
            reqwest::Method::POST,
            &request.group,
            site,
            namespace,
            sidecar::PATH_PROMOTE,
            request,
            timeout,
        )
        .await
    }

    /// `POST /v1/repoint` (timeout: a catch-up's drain bound plus a margin, at least the
    /// mutation timeout).
    pub async fn repoint(
        &self,
        site: &str,
        namespace: &str,
        request: &sidecar::RepointRequest,
    ) -> Result<sidecar::RepointResponse> {
        let timeout = request
            .drain_received_ms
            .map_or(MUTATION_TIMEOUT, |drain_ms| {
                (Duration::from_millis(drain_ms) + PROMOTE_TIMEOUT_MARGIN).max(MUTATION_TIMEOUT)
            });
        self.call(
            reqwest::Method::POST,
            &request.group,
            site,
            namespace,
            sidecar::PATH_REPOINT,
            request,
            timeout,
        )
        .await
    }

    /// `POST /v1/databases` within `timeout`: the schema exists on `site` afterwards (the
    /// sidecar refuses, 409, unless `site` is the writable active site).
    pub async fn ensure_database(
        &self,
        site: &str,
        namespace: &str,
        request: &sidecar::EnsureDatabaseRequest,
        timeout: Duration,
    ) -> Result<sidecar::EnsureDatabaseResponse> {
        self.call(
            reqwest::Method::POST,
            &request.group,
            site,
            namespace,
            sidecar::PATH_DATABASES,
            request,
            timeout,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn call<B: Serialize, R: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        group: &str,
        site: &str,
        namespace: &str,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<R> {
        let url = format!("{}{path}", self.addressing.base_url(group, site, namespace));
        let failure = |reason: String| Error::Sidecar {
            site: site.to_string(),
            url: url.clone(),
            reason,
        };
        let body = serde_json::to_vec(body)
            .map_err(|error| failure(format!("encode request: {error}")))?;
        let key = self.keys.get(namespace, group).ok_or_else(|| {
            failure(format!(
                "sign request: no signing key loaded for group {namespace}/{group} (Secret {} not read yet); nothing was sent",
                crate::workloads::operator_key_secret(group)
            ))
        })?;
        let stamp = Stamp {
            timestamp: crate::poll::wall_clock(),
            nonce: rand::random(),
        };
        let headers = signed_headers(&key, group, site, &method, path, &body, &stamp);
        let mut request = self
            .http
            .request(method, &url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .timeout(timeout);
        for (name, value) in headers.pairs() {
            request = request.header(name, value);
        }
        let response = request
            .send()
            .await
            .map_err(|error| failure(describe(&error)))?;
        let code = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|error| failure(describe(&error)))?;
        if !code.is_success() {
            let detail = serde_json::from_slice::<sidecar::ErrorBody>(&bytes)
                .map(|error| error.error)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).chars().take(200).collect());
            return Err(failure(format!("answered {}: {detail}", code.as_u16())));
        }
        serde_json::from_slice(&bytes).map_err(|error| failure(format!("decode answer: {error}")))
    }
}

/// The error with its whole source chain (reqwest's own text stops at "error sending
/// request"; the causes say whether the time went into DNS, the connect, or the answer).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    if error.is_timeout() {
        format!("timed out (outcome unknown): {text}")
    } else if error.is_connect() {
        format!("connect: {text}")
    } else {
        text
    }
}

/// The sidecar port, re-exported for addressing docs.
pub const PORT: u16 = names::PORT_SIDECAR;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bloodraven_api::sidecar::{LeaseState, MysqlObservation, SidecarStatus};
    use bloodraven_api::Timestamp;

    use super::*;

    fn status(group: &str, site: &str) -> SidecarStatus {
        SidecarStatus {
            group: group.into(),
            site: site.into(),
            observed_at: Timestamp::from_unix_millis(1_000),
            mysql: MysqlObservation {
                reachable: true,
                error: None,
                down: false,
                read_only: Some(false),
                gtid_executed: Some("0-1-42".into()),
                replication: None,
                mysqld: None,
            },
            fenced: false,
            fence: None,
            lease: LeaseState {
                held: true,
                remaining_ms: 4_000,
            },
            authority: None,
            known_generation: None,
            latest_authority: None,
            last_granted_ago_ms: BTreeMap::new(),
            backups: Vec::new(),
            job: None,
            runtime: None,
        }
    }

    /// docs/design/architecture.md#one-poll step 1: a sidecar answer becomes the site's reading
    /// verbatim.
    #[test]
    fn a_2xx_status_of_the_right_site_is_reachable_verbatim() {
        let body = serde_json::to_vec(&status("playground", "iad")).expect("encode");
        match reading_from_response("playground", "iad", 200, &body) {
            SidecarReading::Reachable(read) => assert_eq!(*read, status("playground", "iad")),
            other => panic!("expected reachable, got {other:?}"),
        }
    }

    /// Core's contract: non-2xx, undecodable, or another site's answer is Unreachable (a failed
    /// poll), never a guess.
    #[test]
    fn errors_and_foreign_answers_are_unreachable() {
        let unreachable = |reading: SidecarReading| match reading {
            SidecarReading::Unreachable { error } => error,
            other => panic!("expected unreachable, got {other:?}"),
        };
        let error = unreachable(reading_from_response(
            "playground",
            "iad",
            503,
            br#"{"error":"read mysqld status"}"#,
        ));
        assert!(
            error.contains("503") && error.contains("read mysqld status"),
            "{error}"
        );
        let error = unreachable(reading_from_response("playground", "iad", 200, b"not json"));
        assert!(error.contains("decode sidecar status"), "{error}");
        let body = serde_json::to_vec(&status("playground", "pdx")).expect("encode");
        let error = unreachable(reading_from_response("playground", "iad", 200, &body));
        assert!(error.contains("\"pdx\""), "{error}");
    }

    #[test]
    fn addressing_defaults_to_the_internal_site_service_on_8086() {
        let addressing = SidecarAddressing::default();
        assert_eq!(
            addressing.base_url("playground", "iad", "bloodraven-playground"),
            "http://mysql-playground-iad.bloodraven-playground.svc:8086"
        );
        let addressing = SidecarAddressing::new("http://127.0.0.1:18086/{site}/");
        assert_eq!(
            addressing.base_url("g", "pdx", "ns"),
            "http://127.0.0.1:18086/pdx"
        );
    }

    /// docs/design/requirements.md R001.15: a timed-out status read is an unknown, reported as
    /// Unreachable, not an Err.
    #[tokio::test]
    async fn an_unanswered_status_read_is_unreachable_within_the_timeout() {
        let (address, silent) = crate::test_support::silent_listener().await;
        let client = SidecarClient::new(SidecarAddressing::new(format!("http://{address}")))
            .expect("client");
        let started = std::time::Instant::now();
        let reading = client
            .status("playground", "iad", "ns", STATUS_TIMEOUT)
            .await;
        assert!(
            started.elapsed() < STATUS_TIMEOUT * 3,
            "took {:?}",
            started.elapsed()
        );
        assert!(
            matches!(reading, SidecarReading::Unreachable { ref error } if error.contains("timed out")),
            "{reading:?}"
        );
        silent.abort();
    }

    /// A failed call names its cause, not only reqwest's "error sending request" (the
    /// intermittent live stall could not be told apart: DNS, connect or answer).
    #[tokio::test]
    async fn a_failed_call_names_its_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        drop(listener);
        let client = SidecarClient::new(SidecarAddressing::new(format!("http://{address}")))
            .expect("client");
        let reading = client
            .status("playground", "iad", "ns", STATUS_TIMEOUT)
            .await;
        assert!(
            matches!(reading, SidecarReading::Unreachable { ref error }
                if error.contains("error sending request") && error.to_lowercase().contains("refused")),
            "{reading:?}"
        );
    }

    /// docs/design/requirements.md R001.9 (detection floor pollInterval x failureThreshold): a
    /// status read or push gets a third of the poll interval, so the three sequential rounds of
    /// a poll (others' status, the active site's, the pushes) fit in it; never less than the
    /// floor, never more than the one-second ceiling.
    #[test]
    fn round_trip_budget_is_a_third_of_the_poll_interval_within_bounds() {
        let budget = |millis| round_trip_budget(Duration::from_millis(millis));
        assert_eq!(budget(2_000).as_millis(), 666);
        assert!(budget(2_000) * POLL_ROUNDS < Duration::from_secs(2));
        assert_eq!(budget(100), ROUND_TRIP_MIN);
        assert_eq!(budget(10_000), STATUS_TIMEOUT);
    }

    /// docs/design/history.md#issue-10-case-8: every mutation the operator sends is signed with
    /// the group's key over the exact body and path, and verifies at a sidecar holding the
    /// verifying half; without a loaded key nothing is sent.
    #[tokio::test]
    async fn case_8_mutations_are_signed_with_the_group_key() {
        use axum::{body::Bytes, extract::State, http::HeaderMap, routing::put, Router};
        use bloodraven_api::auth::{
            PresentedHeaders, Principal, Verifier, HEADER_NONCE, HEADER_SIGNATURE, HEADER_TIMESTAMP,
        };
        use std::sync::Mutex;

        type Seen = Arc<Mutex<Vec<(HeaderMap, Bytes)>>>;
        let seen: Seen = Arc::default();
        let router = Router::new()
            .route(
                sidecar::PATH_AUTHORITY,
                put(
                    |State(seen): State<Seen>, headers: HeaderMap, body: Bytes| async move {
                        seen.lock().expect("lock").push((headers, body));
                        axum::Json(sidecar::AuthorityResponse {
                            decision: sidecar::AuthorityDecision::Accepted,
                            cached: None,
                            last_granted_ago_ms: BTreeMap::new(),
                        })
                    },
                ),
            )
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let client = SidecarClient::new(SidecarAddressing::new(format!("http://{address}")))
            .expect("client");
        let authority = sidecar::Authority {
            group: "playground".into(),
            active_site: Some("pdx".into()),
            topology_generation: 4,
            issued_at: Timestamp::from_unix_millis(1_000),
            moving_from: None,
        };
        let unsigned = client
            .push_authority("pdx", "ns", &authority, STATUS_TIMEOUT)
            .await;
        let error = unsigned.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("no signing key loaded for group ns/playground"),
            "{error}"
        );
        assert!(
            seen.lock().expect("lock").is_empty(),
            "nothing sent without a key"
        );

        let key = OperatorKey::from_seed(&[9; 32]).expect("key");
        let mut verifier = Verifier::new(
            key.verifying_key(),
            bloodraven_api::auth::PeerKey::from_bytes(&[1; 32]).expect("peer key"),
        );
        client.signing_keys().set("ns", "playground", key);
        client
            .push_authority("pdx", "ns", &authority, STATUS_TIMEOUT)
            .await
            .expect("signed push");
        let (headers, body) = seen.lock().expect("lock").pop().expect("one push");
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let presented = PresentedHeaders {
            timestamp: header(HEADER_TIMESTAMP),
            nonce: header(HEADER_NONCE),
            signature: header(HEADER_SIGNATURE),
        };
        let request = SignedRequest {
            group: "playground",
            site: "pdx",
            method: "PUT",
            path: sidecar::PATH_AUTHORITY,
            body: &body,
        };
        assert_eq!(
            verifier.verify(
                Principal::Operator,
                &request,
                &presented,
                crate::poll::wall_clock()
            ),
            Ok(())
        );
        let sent: sidecar::Authority =
            serde_json::from_slice(&body).expect("the body is the authority");
        assert_eq!(sent, authority);
        let other_group = SignedRequest {
            group: "other",
            ..request
        };
        assert!(verifier
            .verify(
                Principal::Operator,
                &other_group,
                &presented,
                crate::poll::wall_clock()
            )
            .is_err());
        server.abort();
    }
}
