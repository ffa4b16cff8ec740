//! One sidecar's whole lease state: cached authority, explicit fence, grants given to peers
//! and the lease it holds itself.

use std::collections::BTreeMap;

use bloodraven_api::sidecar::{
    Authority, AuthorityDecision, FenceState, LeaseRequest, LeaseResponse, LeaseState,
};

use super::{
    clock::MonotonicMillis,
    config::LeaseConfig,
    peer::{should_grant, GrantBook},
    requester::{Requester, RoundId},
    rule::{desired_read_only, enforcement, Enforcement, RuleInput, WriteDecision},
    watchdog::{fence_lead_ms, unfence_margin_ms},
};

/// The lease state machine of one sidecar. The sidecar binary drives it from HTTP handlers
/// and timers; the simulator drives it from simulated messages and clocks.
#[derive(Debug, Clone)]
pub struct SiteLease {
    config: LeaseConfig,
    authority: Option<Authority>,
    fence: Option<FenceState>,
    grants: GrantBook,
    requester: Requester,
    /// The greatest topology generation known to have been issued: pushed, or named by a
    /// peer's lease request or answer (peers are authenticated). Above the cached authority's
    /// generation, that authority is superseded.
    known_generation: u64,
    /// The accepted authority of the greatest generation, kept across
    /// [`SiteLease::forget_authority`].
    latest_authority: Option<Authority>,
}

impl SiteLease {
    /// A freshly started sidecar: no authority (startup safety net), no fence, no lease.
    pub fn new(config: LeaseConfig) -> Self {
        Self {
            config,
            authority: None,
            fence: None,
            grants: GrantBook::new(),
            requester: Requester::new(),
            known_generation: 0,
            latest_authority: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The cached authority.
    pub fn authority(&self) -> Option<&Authority> {
        self.authority.as_ref()
    }

    /// The explicit fence in force, if any.
    pub fn fence_state(&self) -> Option<&FenceState> {
        self.fence.as_ref()
    }

    /// The greatest topology generation this sidecar knows was issued (`None`: none yet).
    pub fn known_generation(&self) -> Option<u64> {
        (self.known_generation > 0).then_some(self.known_generation)
    }

    /// The accepted authority of the greatest generation since this sidecar started, also
    /// once a mysqld restart made it forget it: reported to the operator as evidence of what
    /// was issued (a reverted status adopts it), never acted on here.
    pub fn latest_authority(&self) -> Option<&Authority> {
        self.latest_authority.as_ref()
    }

    /// Whether a greater generation than the cached authority's is known: the operator
    /// issued an authority this sidecar never received (a status revert made it re-issue an
    /// older one, simulator seed 179 `--state-loss --status-revert`), so the cached one must
    /// not make mysqld writable.
    pub fn superseded(&self) -> bool {
        self.authority
            .as_ref()
            .is_some_and(|authority| self.known_generation > authority.topology_generation)
    }

    /// Records that `generation` was issued. Learning of one greater than the cached
    /// authority's drops the held lease at once (it was for a superseded generation).
    fn learn_generation(&mut self, generation: u64) {
        if generation > self.known_generation {
            self.known_generation = generation;
        }
        if self.superseded() {
            self.requester.drop_lease();
        }
    }

    /// Applies a pushed authority under the monotonic rule ([`Authority::decide_against`]).
    ///
    /// When the cached authority changes, the held lease is dropped (it was for the old
    /// record). An explicit fence lifts once the cached authority's generation is greater
    /// than the fence's, whatever this push decided: a fence that arrived after the authority
    /// that lifts it (a fence request delayed in flight past the promotion it preceded,
    /// simulator seed 103 `--all-faults --restore`: the restore's fence of generation 4 landed
    /// after the re-promotion at 5 and kept iad read-only for good, since every later push of
    /// generation 5 was `Unchanged`) is lifted by the next push instead of holding forever.
    pub fn push_authority(&mut self, pushed: Authority) -> AuthorityDecision {
        let decision = pushed.decide_against(self.config.group(), self.authority.as_ref());
        let generation = pushed.topology_generation;
        match decision {
            AuthorityDecision::Accepted => {
                self.requester.drop_lease();
                if pushed.supersedes(self.latest_authority.as_ref()) {
                    self.latest_authority = Some(pushed.clone());
                }
                self.authority = Some(pushed);
            }
            AuthorityDecision::Unchanged
            | AuthorityDecision::RefusedStale
            | AuthorityDecision::RefusedWrongGroup => {}
        }
        if decision != AuthorityDecision::RefusedWrongGroup {
            self.learn_generation(generation);
        }
        let cached_generation = self
            .authority
            .as_ref()
            .map(|authority| authority.topology_generation);
        if let (Some(fence), Some(generation)) = (&self.fence, cached_generation) {
            if generation > fence.topology_generation {
                self.fence = None;
            }
        }
        decision
    }

    /// Forgets the cached authority and the held lease: mysqld restarted under this sidecar,
    /// so it is treated like a sidecar start (startup safety net). mysqld comes back
    /// read-only and stays so until the operator pushes authority again (primary
    /// reassertion). An explicit fence stays in force.
    pub fn forget_authority(&mut self) {
        self.authority = None;
        self.requester.drop_lease();
    }

    /// Puts an explicit fence in force: read-only until an authority with a generation
    /// greater than `topology_generation` is accepted. A second fence keeps the greater
    /// generation.
    pub fn fence(&mut self, topology_generation: u64, reason: impl Into<String>) -> FenceState {
        let topology_generation = match &self.fence {
            Some(existing) => existing.topology_generation.max(topology_generation),
            None => topology_generation,
        };
        let fence = FenceState {
            topology_generation,
            reason: reason.into(),
        };
        self.fence = Some(fence.clone());
        fence
    }

    /// Answers a peer's lease request at `now` and records a grant.
    /// A request for a greater generation than the cached one tells this sidecar its own
    /// authority was superseded.
    pub fn answer_lease(&mut self, request: &LeaseRequest, now: MonotonicMillis) -> LeaseResponse {
        if request.group == self.config.group() {
            self.learn_generation(request.topology_generation);
        }
        self.grants.answer(
            self.config.group(),
            self.authority.as_ref(),
            request,
            self.config.duration_ms(),
            now,
        )
    }

    /// Starts a lease round at `now` when one is due (every `duration / 3`) and this
    /// sidecar's own cached authority grants it (it names this site). Returns the round and
    /// the request to send to every peer; the own vote is already counted and recorded.
    pub fn begin_round(&mut self, now: MonotonicMillis) -> Option<(RoundId, LeaseRequest)> {
        if self.superseded() {
            return None;
        }
        let authority = self.authority.as_ref()?;
        let request = LeaseRequest {
            group: self.config.group().to_owned(),
            site: self.config.site().to_owned(),
            topology_generation: authority.topology_generation,
        };
        should_grant(self.config.group(), Some(authority), &request).ok()?;
        if !self
            .requester
            .round_due(now, self.config.renew_interval_ms())
        {
            return None;
        }
        self.grants.record_grant(self.config.site(), now);
        let round = self.requester.start_round(
            now,
            request.topology_generation,
            self.config.site(),
            self.config.duration_ms(),
            self.config.majority(),
        );
        Some((round, request))
    }

    /// Records `peer`'s answer to `round`. Returns whether the lease was extended.
    pub fn record_peer_response(
        &mut self,
        round: RoundId,
        peer: &str,
        response: &LeaseResponse,
    ) -> bool {
        if !self.config.sites().iter().any(|s| s == peer) || peer == self.config.site() {
            return false;
        }
        if let Some(generation) = response.generation {
            self.learn_generation(generation);
            if self.superseded() {
                return false;
            }
        }
        self.requester
            .record_response(round, peer, response, self.config.majority())
    }

    /// Whether an unexpired majority lease for the cached authority's generation is held.
    pub fn lease_held(&self, now: MonotonicMillis) -> bool {
        self.lease_remaining_ms(now) > 0
    }

    /// Milliseconds left on the held lease; zero without one.
    pub fn lease_remaining_ms(&self, now: MonotonicMillis) -> u64 {
        match &self.authority {
            Some(authority) => self
                .requester
                .remaining_ms(now, authority.topology_generation),
            None => 0,
        }
    }

    /// The lease as reported in status.
    pub fn lease_state(&self, now: MonotonicMillis) -> LeaseState {
        let remaining_ms = self.lease_remaining_ms(now);
        LeaseState {
            held: remaining_ms > 0,
            remaining_ms,
        }
    }

    /// What the write rule wants mysqld to be at `now`. The held lease counts only while more
    /// than the fence lead ([`fence_lead_ms`]) of it is left: a sidecar that stopped renewing
    /// fences before the lease runs out, so the watchdog finds mysqld read-only at expiry
    /// unless mysqld cannot answer.
    pub fn desired(&self, now: MonotonicMillis) -> WriteDecision {
        desired_read_only(RuleInput {
            site: self.config.site(),
            authority: self.authority.as_ref(),
            fenced_by_operator: self.fence.is_some(),
            lease_held: self.lease_remaining_ms(now) > fence_lead_ms(&self.config),
            superseded: self.superseded(),
        })
    }

    /// What the enforcer does at `now` to a mysqld observed `observed_read_only` (`None`:
    /// unknown): [`enforcement`] of [`SiteLease::desired`], except that a read-only mysqld is
    /// made writable only with more than [`unfence_margin_ms`] of the lease left
    /// ([`Enforcement::AwaitRenewal`] otherwise).
    pub fn enforcement(
        &self,
        now: MonotonicMillis,
        observed_read_only: Option<bool>,
    ) -> Enforcement {
        match enforcement(self.desired(now), observed_read_only) {
            Enforcement::SetWritable => {
                let lease_remaining_ms = self.lease_remaining_ms(now);
                if lease_remaining_ms > unfence_margin_ms(&self.config) {
                    Enforcement::SetWritable
                } else {
                    Enforcement::AwaitRenewal { lease_remaining_ms }
                }
            }
            other @ (Enforcement::Nothing
            | Enforcement::SetReadOnly { .. }
            | Enforcement::ObserveFirst
            | Enforcement::AwaitRenewal { .. }) => other,
        }
    }

    /// Whether mysqld must be read-only at `now` (the simulator's and the operator's view of
    /// [`SiteLease::desired`]).
    pub fn desired_read_only(&self, now: MonotonicMillis) -> bool {
        self.desired(now).read_only()
    }

    /// Per site, milliseconds since this sidecar last granted it a lease.
    pub fn last_granted_ago_ms(&self, now: MonotonicMillis) -> BTreeMap<String, u64> {
        self.grants.last_granted_ago_ms(now)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bloodraven_api::{sidecar::LeaseRefusal, Timestamp};

    use super::*;
    use crate::lease::rule::ReadOnlyReason;

    const SITES: [&str; 3] = ["iad", "pdx", "reader"];

    fn sidecar(site: &str) -> SiteLease {
        match LeaseConfig::new("playground", site, SITES, Duration::from_secs(6)) {
            Ok(config) => SiteLease::new(config),
            Err(error) => panic!("test config is valid: {error}"),
        }
    }

    fn authority(active_site: Option<&str>, topology_generation: u64) -> Authority {
        Authority {
            group: "playground".to_owned(),
            active_site: active_site.map(str::to_owned),
            topology_generation,
            issued_at: Timestamp::from_unix_millis(0),
            moving_from: None,
        }
    }

    /// Runs one lease round from `active` against `peers` at `now`.
    fn round(active: &mut SiteLease, peers: &mut [&mut SiteLease], now: u64) {
        let Some((id, request)) = active.begin_round(MonotonicMillis(now)) else {
            return;
        };
        for peer in peers.iter_mut() {
            let response = peer.answer_lease(&request, MonotonicMillis(now));
            let name = peer.config().site().to_owned();
            active.record_peer_response(id, &name, &response);
        }
    }

    #[test]
    fn issue_10_case_7_a_peer_holding_a_greater_generation_supersedes_the_cached_authority() {
        // Simulator seed 179 (`--state-loss --status-revert`): pdx was promoted at generation
        // 2; the status reverted and the operator re-issued iad at 1 to iad (whose mysqld
        // restart made it forget 2) and the reader (which never got 2). iad would hold a
        // majority lease at 1 with the reader's grant and lose pdx's writes. pdx's answer names
        // generation 2: iad is read-only from then on, and asks no more leases at 1.
        let mut iad = sidecar("iad");
        let mut pdx = sidecar("pdx");
        let mut reader = sidecar("reader");
        iad.push_authority(authority(Some("iad"), 1));
        reader.push_authority(authority(Some("iad"), 1));
        pdx.push_authority(authority(Some("pdx"), 2));
        round(&mut iad, &mut [&mut reader], 1000);
        assert!(
            iad.lease_held(MonotonicMillis(1000)),
            "a majority at 1 without pdx"
        );
        iad.requester.drop_lease();
        round(&mut iad, &mut [&mut pdx, &mut reader], 4000);
        assert!(iad.superseded());
        assert_eq!(iad.known_generation(), Some(2));
        assert!(!iad.lease_held(MonotonicMillis(4000)));
        assert_eq!(
            iad.desired(MonotonicMillis(4000)),
            WriteDecision::ReadOnly(ReadOnlyReason::Superseded)
        );
        assert!(iad.begin_round(MonotonicMillis(8000)).is_none());
        // The reader learns it too from a request of generation 2, and the operator's push of
        // generation 2 (or greater) ends it: the cached authority is no longer behind.
        let request = LeaseRequest {
            group: "playground".to_owned(),
            site: "pdx".to_owned(),
            topology_generation: 2,
        };
        reader.answer_lease(&request, MonotonicMillis(5000));
        assert_eq!(reader.known_generation(), Some(2));
        assert!(reader.superseded());
        iad.push_authority(authority(Some("iad"), 3));
        assert!(!iad.superseded());
        assert_eq!(iad.known_generation(), Some(3));
        // What a mysqld restart made iad forget is still reported, never acted on.
        iad.forget_authority();
        assert_eq!(iad.authority(), None);
        assert_eq!(
            iad.latest_authority().map(|a| a.topology_generation),
            Some(3)
        );
        assert_eq!(
            iad.desired(MonotonicMillis(9000)),
            WriteDecision::ReadOnly(ReadOnlyReason::NoAuthority)
        );
    }

    #[test]
    fn write_rule_primary_with_authority_and_majority_lease_is_writable() {
        let (mut iad, mut pdx, mut reader) = (sidecar("iad"), sidecar("pdx"), sidecar("reader"));
        for s in [&mut iad, &mut pdx, &mut reader] {
            s.push_authority(authority(Some("iad"), 1));
        }
        assert_eq!(
            iad.desired(MonotonicMillis(0)),
            WriteDecision::ReadOnly(ReadOnlyReason::NoMajorityLease)
        );
        round(&mut iad, &mut [&mut pdx, &mut reader], 0);
        assert_eq!(iad.desired(MonotonicMillis(10)), WriteDecision::Writable);
        assert!(!iad.desired_read_only(MonotonicMillis(10)));
        // Replicas never become writable: authority names another site.
        assert_eq!(
            pdx.desired(MonotonicMillis(10)),
            WriteDecision::ReadOnly(ReadOnlyReason::OtherSiteActive)
        );
    }

    #[test]
    fn lease_rule_partitioned_primary_fences_itself_within_lease_duration() {
        let (mut iad, mut pdx, mut reader) = (sidecar("iad"), sidecar("pdx"), sidecar("reader"));
        for s in [&mut iad, &mut pdx, &mut reader] {
            s.push_authority(authority(Some("iad"), 1));
        }
        round(&mut iad, &mut [&mut pdx, &mut reader], 0);
        round(&mut iad, &mut [&mut pdx, &mut reader], 2000);
        // Partition at 2500: rounds at 4000, 6000, ... reach nobody.
        for at in (4000..=8000).step_by(2000) {
            round(&mut iad, &mut [], at);
        }
        // The last grant was at 2000, so the lease runs out at 8000; it stops counting for
        // writability a fence lead (1500 ms) before.
        assert_eq!(iad.desired(MonotonicMillis(6499)), WriteDecision::Writable);
        assert!(iad.lease_held(MonotonicMillis(7999)));
        assert_eq!(
            iad.desired(MonotonicMillis(6500)),
            WriteDecision::ReadOnly(ReadOnlyReason::NoMajorityLease)
        );
    }

    #[test]
    fn authority_moving_notice_stops_grants_and_old_primary_loses_lease() {
        let (mut iad, mut pdx, mut reader) = (sidecar("iad"), sidecar("pdx"), sidecar("reader"));
        for s in [&mut iad, &mut pdx, &mut reader] {
            s.push_authority(authority(Some("iad"), 1));
        }
        round(&mut iad, &mut [&mut pdx, &mut reader], 0);
        // The moving notice carries the next generation (monotonic rule).
        assert_eq!(
            pdx.push_authority(authority(None, 2)),
            AuthorityDecision::Accepted
        );
        assert_eq!(
            reader.push_authority(authority(None, 2)),
            AuthorityDecision::Accepted
        );
        let request = LeaseRequest {
            group: "playground".to_owned(),
            site: "iad".to_owned(),
            topology_generation: 1,
        };
        assert_eq!(
            pdx.answer_lease(&request, MonotonicMillis(2000)).reason,
            Some(LeaseRefusal::AuthorityMoving)
        );
        // Peers older than `LeaseResponse::generation` refuse without naming theirs: the
        // lease runs out at its expiry.
        let (id, request) = iad
            .begin_round(MonotonicMillis(2000))
            .expect("a round is due");
        for peer in [&mut pdx, &mut reader] {
            let mut refusal = peer.answer_lease(&request, MonotonicMillis(2000));
            refusal.generation = None;
            let name = peer.config().site().to_owned();
            iad.record_peer_response(id, &name, &refusal);
        }
        assert!(iad.lease_held(MonotonicMillis(5999)));
        assert!(!iad.lease_held(MonotonicMillis(6000)));
        // A refusal naming the notice's generation ends it at once: iad's authority is
        // superseded.
        let mut early = sidecar("iad");
        early.push_authority(authority(Some("iad"), 1));
        let mut granting = sidecar("pdx");
        granting.push_authority(authority(Some("iad"), 1));
        round(&mut early, &mut [&mut granting], 0);
        assert!(early.lease_held(MonotonicMillis(2000)));
        round(&mut early, &mut [&mut pdx, &mut reader], 2000);
        assert!(early.superseded());
        assert!(!early.lease_held(MonotonicMillis(2000)));
        // The operator learns from the peers how long ago they last granted to iad.
        assert_eq!(
            pdx.last_granted_ago_ms(MonotonicMillis(6000)).get("iad"),
            Some(&6000)
        );
    }

    #[test]
    fn new_authority_drops_held_lease_and_lifts_older_fence() {
        let (mut iad, mut pdx, mut reader) = (sidecar("iad"), sidecar("pdx"), sidecar("reader"));
        for s in [&mut iad, &mut pdx, &mut reader] {
            s.push_authority(authority(Some("iad"), 1));
        }
        iad.fence(1, "planned failover draining");
        round(&mut iad, &mut [&mut pdx, &mut reader], 0);
        assert_eq!(
            iad.desired(MonotonicMillis(1)),
            WriteDecision::ReadOnly(ReadOnlyReason::ExplicitFence)
        );
        // Same-generation re-push does not lift the fence.
        assert_eq!(
            iad.push_authority(authority(Some("iad"), 1)),
            AuthorityDecision::Unchanged
        );
        assert!(iad.fence_state().is_some());
        // A greater generation does, and drops the lease held for generation 1.
        assert_eq!(
            iad.push_authority(authority(Some("iad"), 2)),
            AuthorityDecision::Accepted
        );
        assert!(iad.fence_state().is_none());
        assert!(!iad.lease_held(MonotonicMillis(1)));
    }

    #[test]
    fn a_fence_landing_after_the_authority_that_lifts_it_is_lifted_by_the_next_push() {
        // Simulator seed 103 (`--all-faults --restore`): a restore's fence of generation 4,
        // delayed in flight, lands after the re-promotion at generation 5 was accepted.
        let (mut iad, mut pdx, mut reader) = (sidecar("iad"), sidecar("pdx"), sidecar("reader"));
        for s in [&mut iad, &mut pdx, &mut reader] {
            s.push_authority(authority(Some("iad"), 5));
        }
        iad.fence(4, "restore in place from backup b2");
        assert_eq!(
            iad.desired(MonotonicMillis(1)),
            WriteDecision::ReadOnly(ReadOnlyReason::ExplicitFence)
        );
        assert_eq!(
            iad.push_authority(authority(Some("iad"), 5)),
            AuthorityDecision::Unchanged
        );
        assert!(iad.fence_state().is_none(), "the stale fence still holds");
        round(&mut iad, &mut [&mut pdx, &mut reader], 10);
        assert_eq!(iad.desired(MonotonicMillis(11)), WriteDecision::Writable);
        // A fence of the cached generation itself (a planned failover's drain) stays.
        iad.fence(5, "planned failover draining");
        iad.push_authority(authority(Some("iad"), 5));
        assert!(iad.fence_state().is_some());
    }

    #[test]
    fn startup_safety_net_mysqld_restart_forgets_authority_until_pushed_again() {
        let (mut iad, mut pdx, mut reader) = (sidecar("iad"), sidecar("pdx"), sidecar("reader"));
        for s in [&mut iad, &mut pdx, &mut reader] {
            s.push_authority(authority(Some("iad"), 1));
        }
        round(&mut iad, &mut [&mut pdx, &mut reader], 0);
        assert_eq!(iad.desired(MonotonicMillis(1)), WriteDecision::Writable);
        iad.forget_authority();
        assert_eq!(
            iad.desired(MonotonicMillis(1)),
            WriteDecision::ReadOnly(ReadOnlyReason::NoAuthority)
        );
        // The same record is accepted again (nothing cached) and the lease is re-earned.
        assert_eq!(
            iad.push_authority(authority(Some("iad"), 1)),
            AuthorityDecision::Accepted
        );
        round(&mut iad, &mut [&mut pdx, &mut reader], 10);
        assert_eq!(iad.desired(MonotonicMillis(11)), WriteDecision::Writable);
    }

    #[test]
    fn stale_authority_push_is_refused_and_changes_nothing() {
        let mut pdx = sidecar("pdx");
        pdx.push_authority(authority(Some("pdx"), 5));
        assert_eq!(
            pdx.push_authority(authority(Some("iad"), 4)),
            AuthorityDecision::RefusedStale
        );
        assert_eq!(
            pdx.authority().and_then(|a| a.active_site.as_deref()),
            Some("pdx")
        );
    }

    #[test]
    fn lease_round_only_from_the_site_its_own_authority_names() {
        let mut pdx = sidecar("pdx");
        assert!(
            pdx.begin_round(MonotonicMillis(0)).is_none(),
            "startup safety net"
        );
        pdx.push_authority(authority(Some("iad"), 1));
        assert!(pdx.begin_round(MonotonicMillis(0)).is_none());
        pdx.push_authority(authority(Some("pdx"), 2));
        assert!(pdx.begin_round(MonotonicMillis(0)).is_some());
        // Not due again before duration / 3.
        assert!(pdx.begin_round(MonotonicMillis(1999)).is_none());
        assert!(pdx.begin_round(MonotonicMillis(2000)).is_some());
    }

    /// docs/design/history.md#issue-10-case-7: a read-only mysqld is unfenced only with more
    /// than the fence lead plus the unfence's bound (1.5 s + 0.75 s of the 6 s lease) left,
    /// although the lease counts for writability down to the fence lead; a writable one is left
    /// writable until the lead.
    #[test]
    fn unfence_needs_the_fence_lead_plus_the_unfence_bound_of_lease_left() {
        let (mut iad, mut pdx, mut reader) = (sidecar("iad"), sidecar("pdx"), sidecar("reader"));
        for s in [&mut iad, &mut pdx, &mut reader] {
            s.push_authority(authority(Some("iad"), 1));
        }
        round(&mut iad, &mut [&mut pdx, &mut reader], 0);
        assert_eq!(unfence_margin_ms(iad.config()), 2250);
        // 2251 ms left: unfenced.
        assert_eq!(
            iad.enforcement(MonotonicMillis(3749), Some(true)),
            Enforcement::SetWritable
        );
        // 2250 ms left: the rule still wants it writable, but the unfence waits for a renewal.
        assert_eq!(iad.desired(MonotonicMillis(3750)), WriteDecision::Writable);
        assert_eq!(
            iad.enforcement(MonotonicMillis(3750), Some(true)),
            Enforcement::AwaitRenewal {
                lease_remaining_ms: 2250
            }
        );
        // Already writable: nothing to do until the fence lead begins, then read-only.
        assert_eq!(
            iad.enforcement(MonotonicMillis(4499), Some(false)),
            Enforcement::Nothing
        );
        assert_eq!(
            iad.enforcement(MonotonicMillis(4500), Some(false)),
            Enforcement::SetReadOnly {
                reason: ReadOnlyReason::NoMajorityLease,
                topology_mismatch: false
            }
        );
        // A renewal restores the margin.
        round(&mut iad, &mut [&mut pdx, &mut reader], 4000);
        assert_eq!(
            iad.enforcement(MonotonicMillis(4000), Some(true)),
            Enforcement::SetWritable
        );
    }

    #[test]
    fn lease_responses_from_unknown_sites_or_self_do_not_count() {
        let mut iad = sidecar("iad");
        iad.push_authority(authority(Some("iad"), 1));
        let Some((id, _)) = iad.begin_round(MonotonicMillis(0)) else {
            panic!("round due");
        };
        let granted = LeaseResponse {
            granted: true,
            duration_ms: 6000,
            reason: None,
            generation: None,
        };
        assert!(!iad.record_peer_response(id, "iad", &granted));
        assert!(!iad.record_peer_response(id, "sfo", &granted));
        assert!(!iad.lease_held(MonotonicMillis(1)));
    }
}
