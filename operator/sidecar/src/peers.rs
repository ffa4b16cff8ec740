//! The lease loop: every `duration / 3` the sidecar whose cached authority names its own site
//! asks every peer for a lease, concurrently; answers are recorded as they arrive.

use std::sync::Arc;

use bloodraven_api::{
    auth::{AuthHeaders, SignedRequest, Stamp, NONCE_BYTES},
    sidecar::{LeaseRequest, LeaseResponse, PATH_LEASE},
};
use bloodraven_core::lease::RoundId;
use ring::rand::SecureRandom;
use tokio::task::JoinSet;

use crate::{
    clock::wall_now,
    config::RequestAuth,
    error::{Error, Result},
    state::Shared,
};

/// Runs forever: starts a round whenever one is due, and sleeps until the next is.
pub(crate) async fn run(shared: Arc<Shared>) {
    let renew = std::time::Duration::from_millis(shared.settings.lease.renew_interval_ms().max(1));
    loop {
        let now = shared.clock.now();
        let begun = shared.lease().begin_round(now);
        if let Some((round, request)) = begun {
            let round_shared = shared.clone();
            tokio::spawn(async move { run_round(round_shared, round, request).await });
        }
        tokio::select! {
            () = tokio::time::sleep(renew) => {}
            () = shared.wake_lease.notified() => {}
        }
    }
}

/// Asks every peer for round `round` and records each answer as it arrives; bounded by the
/// peer timeout.
async fn run_round(shared: Arc<Shared>, round: RoundId, request: LeaseRequest) {
    let mut asks = JoinSet::new();
    for peer in shared.settings.lease.peers() {
        let peer = peer.to_owned();
        let ask_shared = shared.clone();
        let request = request.clone();
        asks.spawn(async move {
            let timeout = ask_shared.settings.peer_timeout;
            let answer =
                match tokio::time::timeout(timeout, ask(&ask_shared, &peer, &request)).await {
                    Ok(answer) => answer,
                    Err(_) => Err(Error::Peer {
                        site: peer.clone(),
                        address: "-".to_owned(),
                        reason: format!("no answer within {timeout:?}"),
                    }),
                };
            (peer, answer)
        });
    }
    while let Some(joined) = asks.join_next().await {
        let Ok((peer, answer)) = joined else {
            continue;
        };
        match answer {
            Ok(response) => {
                let now = shared.clock.now();
                let (was_held, extended, remaining_ms) = {
                    let mut lease = shared.lease();
                    let was_held = lease.lease_held(now);
                    let extended = lease.record_peer_response(round, &peer, &response);
                    (was_held, extended, lease.lease_remaining_ms(now))
                };
                shared.metrics.peer_result(
                    &peer,
                    if response.granted {
                        "granted"
                    } else {
                        "refused"
                    },
                );
                tracing::debug!(
                    site = shared.site(),
                    peer = %peer,
                    granted = response.granted,
                    reason = ?response.reason,
                    lease_remaining_ms = remaining_ms,
                    "lease answer"
                );
                if extended && !was_held {
                    tracing::info!(
                        site = shared.site(),
                        generation = request.topology_generation,
                        lease_held = true,
                        lease_remaining_ms = remaining_ms,
                        "write lease gained from a majority"
                    );
                    shared.wake_enforcer.notify_one();
                }
            }
            Err(error) => {
                shared.metrics.peer_result(&peer, "unreachable");
                tracing::debug!(site = shared.site(), peer = %peer, %error, "lease request failed");
            }
        }
    }
}

/// The body of a lease request to `peer_site` and, unless unauthenticated, its signature
/// headers (the group's peer key; docs/design/history.md#issue-10-case-8).
fn signed_lease_request(
    shared: &Shared,
    peer_site: &str,
    request: &LeaseRequest,
) -> Result<(Vec<u8>, Option<AuthHeaders>)> {
    let body = serde_json::to_vec(request).map_err(|error| Error::Peer {
        site: request.site.clone(),
        address: "-".to_owned(),
        reason: format!("encode lease request: {error}"),
    })?;
    let RequestAuth::Signed { peer, .. } = &shared.settings.auth else {
        return Ok((body, None));
    };
    let mut nonce = [0u8; NONCE_BYTES];
    ring::rand::SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| Error::Peer {
            site: request.site.clone(),
            address: "-".to_owned(),
            reason: "draw a nonce from the OS random source".to_owned(),
        })?;
    let stamp = Stamp {
        timestamp: wall_now(),
        nonce,
    };
    let headers = peer.sign(
        &SignedRequest {
            group: shared.group(),
            site: peer_site,
            method: "POST",
            path: PATH_LEASE,
            body: &body,
        },
        &stamp,
    );
    Ok((body, Some(headers)))
}

/// Asks one peer site, trying each discovered address until one answers. Each attempt is
/// signed afresh (a nonce is accepted once).
async fn ask(shared: &Shared, site: &str, request: &LeaseRequest) -> Result<LeaseResponse> {
    let addresses = shared.discovery.resolve_site(site).await?;
    let mut last_error = None;
    for address in addresses {
        let url = format!("http://{address}{PATH_LEASE}");
        let (body, headers) = signed_lease_request(shared, site, request)?;
        let mut post = shared
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers.iter().flat_map(AuthHeaders::pairs) {
            post = post.header(name, value);
        }
        let sent = post.send().await;
        let peer_error = |reason: String| Error::Peer {
            site: site.to_owned(),
            address: address.to_string(),
            reason,
        };
        match sent {
            Ok(response) if response.status().is_success() => {
                return response
                    .json::<LeaseResponse>()
                    .await
                    .map_err(|e| peer_error(e.to_string()));
            }
            Ok(response) => {
                let status = response.status();
                let detail = response
                    .json::<bloodraven_api::sidecar::ErrorBody>()
                    .await
                    .map(|body| format!(": {}", body.error))
                    .unwrap_or_default();
                last_error = Some(peer_error(format!("status {status}{detail}")));
            }
            Err(error) => last_error = Some(peer_error(error.to_string())),
        }
    }
    Err(last_error.unwrap_or_else(|| Error::EmptyView {
        site: site.to_owned(),
        name: shared.settings.discovery.name_for(shared.group(), site),
    }))
}
