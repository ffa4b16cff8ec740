//! The requesting side of the lease rule: the sidecar whose cached authority names its own
//! site asks every peer for a lease every `duration / 3`; once a majority of ALL sites
//! (itself included) granted one round, the lease is valid until that round's send time plus
//! the shortest granted duration, on the requester's own monotonic clock.

use std::collections::{BTreeSet, VecDeque};

use bloodraven_api::sidecar::LeaseResponse;

use super::clock::MonotonicMillis;

/// How many lease rounds are remembered at once, so a slow answer to the previous round
/// still counts. Older rounds are forgotten; their answers are ignored.
pub const ROUNDS_IN_FLIGHT_MAX: usize = 3;

/// Identifies one lease round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoundId(pub u64);

/// One round of lease requests: sent to every peer at `sent_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRound {
    /// The round's identity.
    pub id: RoundId,
    /// When the requests were sent, on the requester's clock: the lease is measured from here.
    pub sent_at: MonotonicMillis,
    /// The topology generation requested.
    pub topology_generation: u64,
    /// Sites that granted, the requester itself included.
    pub granted: BTreeSet<String>,
    /// The shortest duration granted in this round.
    pub duration_ms_min: u64,
}

/// The requester's lease bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requester {
    next_round: u64,
    rounds: VecDeque<LeaseRound>,
    last_round_sent_at: Option<MonotonicMillis>,
    held: Option<HeldLease>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeldLease {
    topology_generation: u64,
    valid_until: MonotonicMillis,
}

impl Requester {
    /// No lease, no round sent.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a new round is due at `now`: none was ever sent, or the last one was sent at
    /// least `renew_interval_ms` ago.
    pub fn round_due(&self, now: MonotonicMillis, renew_interval_ms: u64) -> bool {
        match self.last_round_sent_at {
            None => true,
            Some(sent_at) => now.millis_since(sent_at) >= renew_interval_ms,
        }
    }

    /// Starts a round at `now` for `topology_generation`, counting the requester's own grant
    /// (`own_site`, `own_duration_ms`): the requester votes too. The caller has already
    /// checked that its own cached authority grants it.
    pub fn start_round(
        &mut self,
        now: MonotonicMillis,
        topology_generation: u64,
        own_site: &str,
        own_duration_ms: u64,
        majority: usize,
    ) -> RoundId {
        let id = RoundId(self.next_round);
        self.next_round = self.next_round.saturating_add(1);
        self.last_round_sent_at = Some(now);
        let mut granted = BTreeSet::new();
        granted.insert(own_site.to_owned());
        let round = LeaseRound {
            id,
            sent_at: now,
            topology_generation,
            granted,
            duration_ms_min: own_duration_ms,
        };
        self.settle(&round, majority);
        self.rounds.push_back(round);
        while self.rounds.len() > ROUNDS_IN_FLIGHT_MAX {
            self.rounds.pop_front();
        }
        id
    }

    /// Records `peer`'s answer to round `id`. Returns whether the held lease was extended.
    /// Answers to forgotten rounds, refusals and duplicate grants change nothing.
    pub fn record_response(
        &mut self,
        id: RoundId,
        peer: &str,
        response: &LeaseResponse,
        majority: usize,
    ) -> bool {
        if !response.granted {
            return false;
        }
        let Some(index) = self.rounds.iter().position(|r| r.id == id) else {
            return false;
        };
        let Some(round) = self.rounds.get_mut(index) else {
            return false;
        };
        if !round.granted.insert(peer.to_owned()) {
            return false;
        }
        round.duration_ms_min = round.duration_ms_min.min(response.duration_ms);
        let round = round.clone();
        self.settle(&round, majority)
    }

    /// Extends the held lease from `round` when it reached a majority.
    fn settle(&mut self, round: &LeaseRound, majority: usize) -> bool {
        if round.granted.len() < majority {
            return false;
        }
        let valid_until = round
            .sent_at
            .saturating_add(std::time::Duration::from_millis(round.duration_ms_min));
        match self.held {
            Some(held)
                if held.topology_generation == round.topology_generation
                    && held.valid_until >= valid_until =>
            {
                false
            }
            Some(held) if held.topology_generation > round.topology_generation => false,
            Some(_) | None => {
                self.held = Some(HeldLease {
                    topology_generation: round.topology_generation,
                    valid_until,
                });
                true
            }
        }
    }

    /// Whether an unexpired lease for `topology_generation` is held at `now`.
    pub fn is_held(&self, now: MonotonicMillis, topology_generation: u64) -> bool {
        self.remaining_ms(now, topology_generation) > 0
    }

    /// Milliseconds left on the lease for `topology_generation` at `now`; zero if none.
    pub fn remaining_ms(&self, now: MonotonicMillis, topology_generation: u64) -> u64 {
        match self.held {
            Some(held) if held.topology_generation == topology_generation => {
                held.valid_until.millis_since(now)
            }
            Some(_) | None => 0,
        }
    }

    /// Forgets the held lease and every round (the cached authority changed).
    pub fn drop_lease(&mut self) {
        self.held = None;
        self.rounds.clear();
        self.last_round_sent_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(duration_ms: u64) -> LeaseResponse {
        LeaseResponse {
            granted: true,
            duration_ms,
            reason: None,
            generation: None,
        }
    }

    #[test]
    fn lease_valid_from_send_time_once_majority_of_all_sites_granted() {
        let mut requester = Requester::new();
        let round = requester.start_round(MonotonicMillis(1000), 2, "iad", 6000, 2);
        // Own vote alone is one of three: no lease.
        assert!(!requester.is_held(MonotonicMillis(1000), 2));
        // The answer arrives 500 ms later; the lease still counts from the send time.
        assert!(requester.record_response(round, "reader", &granted(6000), 2));
        assert_eq!(requester.remaining_ms(MonotonicMillis(1500), 2), 5500);
        assert!(requester.is_held(MonotonicMillis(6999), 2));
        assert!(!requester.is_held(MonotonicMillis(7000), 2));
    }

    #[test]
    fn lease_lost_majority_expires_within_duration() {
        let mut requester = Requester::new();
        let first = requester.start_round(MonotonicMillis(0), 2, "iad", 6000, 2);
        requester.record_response(first, "pdx", &granted(6000), 2);
        // Later rounds get no grants (partitioned): the lease runs out at 6000 regardless.
        for at in [2000, 4000] {
            requester.start_round(MonotonicMillis(at), 2, "iad", 6000, 2);
        }
        assert!(requester.is_held(MonotonicMillis(5999), 2));
        assert!(!requester.is_held(MonotonicMillis(6000), 2));
    }

    #[test]
    fn lease_uses_shortest_granted_duration_and_ignores_refusals() {
        let mut requester = Requester::new();
        let round = requester.start_round(MonotonicMillis(0), 1, "iad", 6000, 3);
        let refused = LeaseResponse {
            granted: false,
            duration_ms: 0,
            reason: None,
            generation: None,
        };
        assert!(!requester.record_response(round, "pdx", &refused, 3));
        requester.record_response(round, "pdx", &granted(3000), 3);
        assert!(!requester.is_held(MonotonicMillis(0), 1));
        requester.record_response(round, "reader", &granted(6000), 3);
        assert_eq!(requester.remaining_ms(MonotonicMillis(0), 1), 3000);
    }

    #[test]
    fn lease_is_per_generation_and_duplicate_grants_do_not_count_twice() {
        let mut requester = Requester::new();
        let round = requester.start_round(MonotonicMillis(0), 4, "iad", 6000, 3);
        requester.record_response(round, "pdx", &granted(6000), 3);
        requester.record_response(round, "pdx", &granted(6000), 3);
        assert!(!requester.is_held(MonotonicMillis(1), 4));
        requester.record_response(round, "reader", &granted(6000), 3);
        assert!(requester.is_held(MonotonicMillis(1), 4));
        assert!(!requester.is_held(MonotonicMillis(1), 5));
    }

    #[test]
    fn lease_renewal_due_every_third_of_duration() {
        let mut requester = Requester::new();
        assert!(requester.round_due(MonotonicMillis(0), 2000));
        requester.start_round(MonotonicMillis(0), 1, "iad", 6000, 2);
        assert!(!requester.round_due(MonotonicMillis(1999), 2000));
        assert!(requester.round_due(MonotonicMillis(2000), 2000));
    }

    #[test]
    fn lease_answers_to_forgotten_rounds_are_ignored() {
        let mut requester = Requester::new();
        let old = requester.start_round(MonotonicMillis(0), 1, "iad", 6000, 2);
        for at in 1..=ROUNDS_IN_FLIGHT_MAX as u64 {
            requester.start_round(MonotonicMillis(at * 2000), 1, "iad", 6000, 2);
        }
        assert!(!requester.record_response(old, "pdx", &granted(6000), 2));
        assert!(!requester.is_held(MonotonicMillis(6000), 1));
    }
}
