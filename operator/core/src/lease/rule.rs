//! Whether mysqld may be writable, and what to do about what it is.

use bloodraven_api::sidecar::Authority;

/// Everything the write rule reads, for one sidecar at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleInput<'a> {
    /// This sidecar's site.
    pub site: &'a str,
    /// The cached authority, if the operator ever pushed one since the sidecar started.
    pub authority: Option<&'a Authority>,
    /// Whether an explicit fence from the operator is in force.
    pub fenced_by_operator: bool,
    /// Whether an unexpired majority lease for the cached authority's generation is held now.
    pub lease_held: bool,
    /// Whether a peer named a greater topology generation than the cached authority's: the
    /// operator issued an authority this sidecar never received.
    pub superseded: bool,
}

/// Why mysqld must be read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnlyReason {
    /// Startup safety net: no authority cached since the sidecar started.
    NoAuthority,
    /// The cached authority is the "authority is moving" notice.
    AuthorityMoving,
    /// The cached authority names another site (topology-mismatch rule when mysqld is
    /// writable).
    OtherSiteActive,
    /// A peer holds (or asked a lease for) a greater topology generation than the cached
    /// authority's: this site's authority was superseded by one it never received.
    Superseded,
    /// The operator fenced this site explicitly (planned failover, in-place restore).
    ExplicitFence,
    /// No unexpired lease from a majority of all sites.
    NoMajorityLease,
}

impl ReadOnlyReason {
    /// A short snake_case name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadOnlyReason::NoAuthority => "no_authority",
            ReadOnlyReason::AuthorityMoving => "authority_moving",
            ReadOnlyReason::OtherSiteActive => "other_site_active",
            ReadOnlyReason::Superseded => "superseded",
            ReadOnlyReason::ExplicitFence => "explicit_fence",
            ReadOnlyReason::NoMajorityLease => "no_majority_lease",
        }
    }
}

/// What the rule wants mysqld to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteDecision {
    /// Writable: authority names this site and a majority lease is held.
    Writable,
    /// Read-only, for the given reason.
    ReadOnly(ReadOnlyReason),
}

impl WriteDecision {
    /// Whether mysqld must be read-only.
    pub fn read_only(self) -> bool {
        match self {
            WriteDecision::Writable => false,
            WriteDecision::ReadOnly(_) => true,
        }
    }
}

/// The write rule: writable only with (a) a cached authority naming this site (for its
/// generation; the lease is per generation) and (b) an unexpired majority lease, and no
/// explicit fence, and no peer known to hold a greater generation. Otherwise read-only, with the first reason that applies.
pub fn desired_read_only(input: RuleInput<'_>) -> WriteDecision {
    let Some(authority) = input.authority else {
        return WriteDecision::ReadOnly(ReadOnlyReason::NoAuthority);
    };
    let Some(active_site) = authority.active_site.as_deref() else {
        return WriteDecision::ReadOnly(ReadOnlyReason::AuthorityMoving);
    };
    if active_site != input.site {
        return WriteDecision::ReadOnly(ReadOnlyReason::OtherSiteActive);
    }
    if input.superseded {
        return WriteDecision::ReadOnly(ReadOnlyReason::Superseded);
    }
    if input.fenced_by_operator {
        return WriteDecision::ReadOnly(ReadOnlyReason::ExplicitFence);
    }
    if !input.lease_held {
        return WriteDecision::ReadOnly(ReadOnlyReason::NoMajorityLease);
    }
    WriteDecision::Writable
}

/// What the sidecar does to mysqld this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// mysqld already is what the rule wants.
    Nothing,
    /// Set read-only now. `topology_mismatch` marks the topology-mismatch rule: mysqld was
    /// seen writable while the cached authority names another site.
    SetReadOnly {
        /// Why read-only is wanted.
        reason: ReadOnlyReason,
        /// mysqld was observed writable while the cached activeSite is another site.
        topology_mismatch: bool,
    },
    /// Clear read-only: authority and majority lease are held, with more than the unfence
    /// margin ([`unfence_margin_ms`](super::unfence_margin_ms)) of it left.
    SetWritable,
    /// The rule wants mysqld writable and it is read-only, but too little of the held lease is
    /// left to unfence: an unfence that lands after the fence lead began would leave the
    /// enforcer less than the lead to fence again. Nothing is done until the lease is renewed.
    AwaitRenewal {
        /// The lease left when this was decided.
        lease_remaining_ms: u64,
    },
    /// mysqld's state is unknown and the rule wants it writable: observe before acting.
    ObserveFirst,
}

/// Compares the rule's `desired` state with the `observed` read-only flag (`None`: unknown).
///
/// Read-only is enforced even when the observation is unknown (setting it is idempotent and
/// an error is an unknown, never "it is already read-only"); writability only from a known
/// read-only state.
pub fn enforcement(desired: WriteDecision, observed_read_only: Option<bool>) -> Enforcement {
    match (desired, observed_read_only) {
        (WriteDecision::ReadOnly(_), Some(true)) => Enforcement::Nothing,
        (WriteDecision::ReadOnly(reason), Some(false)) => Enforcement::SetReadOnly {
            reason,
            topology_mismatch: reason == ReadOnlyReason::OtherSiteActive,
        },
        (WriteDecision::ReadOnly(reason), None) => Enforcement::SetReadOnly {
            reason,
            topology_mismatch: false,
        },
        (WriteDecision::Writable, Some(true)) => Enforcement::SetWritable,
        (WriteDecision::Writable, Some(false)) => Enforcement::Nothing,
        (WriteDecision::Writable, None) => Enforcement::ObserveFirst,
    }
}

#[cfg(test)]
mod tests {
    use bloodraven_api::Timestamp;

    use super::*;

    fn authority(active_site: Option<&str>) -> Authority {
        Authority {
            group: "playground".to_owned(),
            active_site: active_site.map(str::to_owned),
            topology_generation: 1,
            issued_at: Timestamp::from_unix_millis(0),
            moving_from: None,
        }
    }

    fn input<'a>(authority: Option<&'a Authority>, lease_held: bool) -> RuleInput<'a> {
        RuleInput {
            site: "iad",
            authority,
            fenced_by_operator: false,
            lease_held,
            superseded: false,
        }
    }

    #[test]
    fn write_rule_needs_authority_naming_self_and_majority_lease() {
        let own = authority(Some("iad"));
        assert_eq!(
            desired_read_only(input(Some(&own), true)),
            WriteDecision::Writable
        );
        assert_eq!(
            desired_read_only(input(Some(&own), false)),
            WriteDecision::ReadOnly(ReadOnlyReason::NoMajorityLease)
        );
    }

    #[test]
    fn startup_safety_net_no_cached_authority_keeps_read_only() {
        // Even a (stale) held lease does not make a sidecar without authority writable.
        assert_eq!(
            desired_read_only(input(None, true)),
            WriteDecision::ReadOnly(ReadOnlyReason::NoAuthority)
        );
        assert_eq!(
            enforcement(desired_read_only(input(None, false)), Some(false)),
            Enforcement::SetReadOnly {
                reason: ReadOnlyReason::NoAuthority,
                topology_mismatch: false
            }
        );
    }

    #[test]
    fn topology_mismatch_rule_writable_while_other_site_active_sets_read_only_at_once() {
        let other = authority(Some("pdx"));
        let desired = desired_read_only(input(Some(&other), true));
        assert_eq!(
            desired,
            WriteDecision::ReadOnly(ReadOnlyReason::OtherSiteActive)
        );
        assert_eq!(
            enforcement(desired, Some(false)),
            Enforcement::SetReadOnly {
                reason: ReadOnlyReason::OtherSiteActive,
                topology_mismatch: true
            }
        );
        assert_eq!(enforcement(desired, Some(true)), Enforcement::Nothing);
    }

    #[test]
    fn authority_moving_and_explicit_fence_keep_read_only() {
        let moving = authority(None);
        assert_eq!(
            desired_read_only(input(Some(&moving), true)),
            WriteDecision::ReadOnly(ReadOnlyReason::AuthorityMoving)
        );
        let own = authority(Some("iad"));
        let fenced = RuleInput {
            fenced_by_operator: true,
            ..input(Some(&own), true)
        };
        assert_eq!(
            desired_read_only(fenced),
            WriteDecision::ReadOnly(ReadOnlyReason::ExplicitFence)
        );
        let superseded = RuleInput {
            superseded: true,
            ..input(Some(&own), true)
        };
        assert_eq!(
            desired_read_only(superseded),
            WriteDecision::ReadOnly(ReadOnlyReason::Superseded)
        );
    }

    #[test]
    fn seed_001_unknown_state_is_fenced_anyway_and_never_unfenced_blind() {
        let desired_ro = WriteDecision::ReadOnly(ReadOnlyReason::NoMajorityLease);
        assert!(matches!(
            enforcement(desired_ro, None),
            Enforcement::SetReadOnly { .. }
        ));
        assert_eq!(
            enforcement(WriteDecision::Writable, None),
            Enforcement::ObserveFirst
        );
        assert_eq!(
            enforcement(WriteDecision::Writable, Some(true)),
            Enforcement::SetWritable
        );
    }
}
