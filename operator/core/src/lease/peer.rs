//! The granting side of the lease rule: a peer grants while its cached authority names the
//! requesting site for the requested generation, and remembers when it last granted to whom.

use std::collections::BTreeMap;

use bloodraven_api::sidecar::{Authority, LeaseRefusal, LeaseRequest, LeaseResponse};

use super::clock::MonotonicMillis;

/// Whether a sidecar of `group` whose cached authority is `cached` grants `request`.
///
/// Granted only when the cached authority exists, is for the same group, names a site (not
/// the "authority is moving" notice), names the requesting site, and is for the requested
/// topology generation.
pub fn should_grant(
    group: &str,
    cached: Option<&Authority>,
    request: &LeaseRequest,
) -> Result<(), LeaseRefusal> {
    if request.group != group {
        return Err(LeaseRefusal::WrongGroup);
    }
    let Some(authority) = cached else {
        return Err(LeaseRefusal::NoAuthority);
    };
    let Some(active_site) = authority.active_site.as_deref() else {
        return Err(LeaseRefusal::AuthorityMoving);
    };
    if authority.topology_generation != request.topology_generation {
        return Err(LeaseRefusal::GenerationMismatch);
    }
    if active_site != request.site {
        return Err(LeaseRefusal::NotActiveSite);
    }
    Ok(())
}

/// When this sidecar last granted a lease to each site, on its own monotonic clock.
///
/// The operator reads the ages (through status or the authority push response) before
/// promoting: it waits until the most recent grant to the old site is older than the lease
/// duration plus a drift margin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantBook {
    last_granted: BTreeMap<String, MonotonicMillis>,
}

impl GrantBook {
    /// An empty book: nothing granted yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers `request` at `now` with `should_grant`, granting `duration_ms`, and records
    /// the grant.
    pub fn answer(
        &mut self,
        group: &str,
        cached: Option<&Authority>,
        request: &LeaseRequest,
        duration_ms: u64,
        now: MonotonicMillis,
    ) -> LeaseResponse {
        let generation = cached.map(|authority| authority.topology_generation);
        match should_grant(group, cached, request) {
            Ok(()) => {
                self.record_grant(&request.site, now);
                LeaseResponse {
                    granted: true,
                    duration_ms,
                    reason: None,
                    generation,
                }
            }
            Err(reason) => LeaseResponse {
                granted: false,
                duration_ms: 0,
                reason: Some(reason),
                generation,
            },
        }
    }

    /// Records a grant to `site` at `now`. Time never moves a record backwards.
    pub fn record_grant(&mut self, site: &str, now: MonotonicMillis) {
        let entry = self.last_granted.entry(site.to_owned()).or_insert(now);
        if *entry < now {
            *entry = now;
        }
    }

    /// When `site` was last granted a lease, if ever.
    pub fn last_granted(&self, site: &str) -> Option<MonotonicMillis> {
        self.last_granted.get(site).copied()
    }

    /// Per site, milliseconds since the last grant at `now`.
    pub fn last_granted_ago_ms(&self, now: MonotonicMillis) -> BTreeMap<String, u64> {
        self.last_granted
            .iter()
            .map(|(site, at)| (site.clone(), now.millis_since(*at)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use bloodraven_api::Timestamp;

    use super::*;

    fn authority(active_site: Option<&str>, topology_generation: u64) -> Authority {
        Authority {
            group: "playground".to_owned(),
            active_site: active_site.map(str::to_owned),
            topology_generation,
            issued_at: Timestamp::from_unix_millis(0),
            moving_from: None,
        }
    }

    fn request(site: &str, topology_generation: u64) -> LeaseRequest {
        LeaseRequest {
            group: "playground".to_owned(),
            site: site.to_owned(),
            topology_generation,
        }
    }

    #[test]
    fn lease_rule_peer_grants_while_cached_authority_names_site_and_generation() {
        let cached = authority(Some("iad"), 3);
        assert_eq!(
            should_grant("playground", Some(&cached), &request("iad", 3)),
            Ok(())
        );
        assert_eq!(
            should_grant("playground", Some(&cached), &request("pdx", 3)),
            Err(LeaseRefusal::NotActiveSite)
        );
        assert_eq!(
            should_grant("playground", Some(&cached), &request("iad", 2)),
            Err(LeaseRefusal::GenerationMismatch)
        );
        assert_eq!(
            should_grant("other", Some(&cached), &request("iad", 3)),
            Err(LeaseRefusal::WrongGroup)
        );
    }

    #[test]
    fn authority_moving_notice_makes_peers_grant_to_nobody() {
        let moving = authority(None, 3);
        for site in ["iad", "pdx", "reader"] {
            assert_eq!(
                should_grant("playground", Some(&moving), &request(site, 3)),
                Err(LeaseRefusal::AuthorityMoving)
            );
        }
    }

    #[test]
    fn startup_safety_net_peer_without_authority_grants_nothing() {
        assert_eq!(
            should_grant("playground", None, &request("iad", 1)),
            Err(LeaseRefusal::NoAuthority)
        );
    }

    #[test]
    fn grant_book_reports_age_of_last_grant_on_own_monotonic_clock() {
        let cached = authority(Some("iad"), 3);
        let mut book = GrantBook::new();
        let response = book.answer(
            "playground",
            Some(&cached),
            &request("iad", 3),
            6000,
            MonotonicMillis(1000),
        );
        assert!(response.granted);
        assert_eq!(response.duration_ms, 6000);
        let refused = book.answer(
            "playground",
            Some(&cached),
            &request("pdx", 3),
            6000,
            MonotonicMillis(1500),
        );
        assert!(!refused.granted);
        assert_eq!(refused.duration_ms, 0);
        let ages = book.last_granted_ago_ms(MonotonicMillis(4000));
        assert_eq!(ages.get("iad"), Some(&3000));
        // A refused request is not a grant.
        assert_eq!(ages.get("pdx"), None);
    }
}
