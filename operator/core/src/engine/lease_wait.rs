//! The emergency lease wait, judged by the lease terms the sidecars run with
//! (docs/design/history.md#issue-10-case-4).
//!
//! A sidecar's lease duration and site list come from the flags its pod was created with, and
//! site pods are never changed in place (StatefulSets are `OnDelete`): after a spec edit the
//! running sidecars keep the old terms until their pods are recreated, one at a time. Judged
//! by today's spec alone, the operator would wait less than a sidecar grants (a lowered
//! `writeLease.duration`) or count a majority that need not meet the one the old primary was
//! granted by (a changed site set). So:
//!
//! - **Duration**: the wait bound is the longest duration any sidecar reports or any site pod
//!   was created with, never less than the spec's, plus [`CLOCK_DRIFT_MARGIN`].
//! - **Site set**: the evidence must hold for a strict majority of *every* site set in play
//!   (the spec's, and each set a sidecar reports or a site pod was created with), as Raft's
//!   joint consensus does. The old primary's lease came from a majority of its own set, which
//!   is among them (its pod object names it even while its sidecar does not answer), and two
//!   majorities of one set always share a member: a voter that granted nothing for longer
//!   than the bound. A member of a set that the operator cannot read (a site removed from the
//!   spec whose pod still runs, and still grants) never votes, so a removed site that could
//!   keep the old primary's lease alive is never outvoted by the new set.

use std::collections::BTreeSet;

use super::failover::notice_generation;
use super::memory::GroupMemory;
use super::options::CLOCK_DRIFT_MARGIN;
use super::plan::Context;
use crate::time::Duration;

/// A site set in play, with the votes it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SiteSetVotes {
    /// The set's sites, sorted.
    pub sites: BTreeSet<String>,
    /// Members whose sidecar vouches that no lease it granted can still run.
    pub votes: usize,
    /// A strict majority of the set.
    pub majority: usize,
}

impl SiteSetVotes {
    /// Whether a majority of this set voted.
    pub fn carried(&self) -> bool {
        self.votes >= self.majority
    }
}

/// The lease wait's verdict this poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LeaseWait {
    /// How old the most recent grant of a voter must be.
    pub bound: Duration,
    /// Every site set in play, the spec's first.
    pub sets: Vec<SiteSetVotes>,
}

impl LeaseWait {
    /// Whether a majority of every site set in play voted: no lease of the old generation can
    /// still run.
    pub fn lapsed(&self) -> bool {
        self.sets.iter().all(SiteSetVotes::carried)
    }

    /// The sets and their votes, for events: `{iad,pdx,reader} 1/2, {iad,pdx} 1/2`.
    pub fn describe(&self) -> String {
        self.sets
            .iter()
            .map(|set| {
                let names: Vec<&str> = set.sites.iter().map(String::as_str).collect();
                format!("{{{}}} {}/{}", names.join(","), set.votes, set.majority)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The longest lease any sidecar of the group may be granting with: the spec's, or longer
/// when a sidecar reports (or a site pod was created with) a longer duration.
pub(super) fn longest_lease(context: &Context<'_>) -> Duration {
    let spec = context.spec.effective_write_lease();
    context
        .views
        .values()
        .flat_map(|view| [&view.reported_lease_terms, &view.pod_lease_terms])
        .flatten()
        .map(|terms| Duration::from_millis(terms.duration_ms))
        .fold(spec, Duration::max)
}

/// The lease wait bound: [`longest_lease`] plus [`CLOCK_DRIFT_MARGIN`].
pub(super) fn lease_wait_bound(context: &Context<'_>) -> Duration {
    longest_lease(context) + CLOCK_DRIFT_MARGIN
}

/// Every site set in play: the spec's first, then each distinct set a sidecar reports or a
/// site pod was created with, in spec site order.
pub(super) fn site_sets_in_play(context: &Context<'_>) -> Vec<BTreeSet<String>> {
    let mut sets: Vec<BTreeSet<String>> = vec![context.site_names().map(str::to_string).collect()];
    for name in context.site_names() {
        let view = context.view(name);
        for terms in [&view.reported_lease_terms, &view.pod_lease_terms]
            .into_iter()
            .flatten()
        {
            let set: BTreeSet<String> = terms.sites.iter().cloned().collect();
            if !set.is_empty() && !sets.contains(&set) {
                sets.push(set);
            }
        }
    }
    sets
}

/// Whether some sidecar runs with other lease terms than the spec's (a duration or a site
/// set): a spec edit whose pods were not all recreated yet.
pub(super) fn terms_differ_from_spec(context: &Context<'_>) -> bool {
    let spec_ms =
        u64::try_from(context.spec.effective_write_lease().as_millis()).unwrap_or(u64::MAX);
    site_sets_in_play(context).len() > 1
        || context
            .views
            .values()
            .flat_map(|view| [&view.reported_lease_terms, &view.pod_lease_terms])
            .flatten()
            .any(|terms| terms.duration_ms != spec_ms)
}

/// The old active site's lease has lapsed when, for every site set in play, a strict majority
/// of its members' sidecars answer, cache the move notice (of this move's generation) and
/// report their most recent lease grant to any site older than [`lease_wait_bound`] (a sidecar
/// that never granted counts only if it has been up longer than the bound: a restarted
/// sidecar forgot the grants of its previous run). Grants to any site count, not only to the
/// old one: during a move nobody may hold a lease, and memory recovered after a restart may
/// not know the old site.
pub(super) fn lease_wait(context: &Context<'_>, memory: &GroupMemory) -> LeaseWait {
    let bound = lease_wait_bound(context);
    let voters: BTreeSet<&str> = context
        .views
        .iter()
        .filter(|(_, view)| {
            let has_notice = view.authority.as_ref().is_some_and(|authority| {
                authority.active_site.is_none()
                    && authority.topology_generation == notice_generation(memory)
            });
            let latest_grant = view.last_granted_ago.values().min();
            let old_enough = match latest_grant {
                Some(ago) => *ago > bound,
                None => view.sidecar_uptime.is_some_and(|uptime| uptime > bound),
            };
            view.sidecar_up && has_notice && old_enough
        })
        .map(|(name, _)| name.as_str())
        .collect();
    let sets = site_sets_in_play(context)
        .into_iter()
        .map(|sites| {
            let votes = sites
                .iter()
                .filter(|site| voters.contains(site.as_str()))
                .count();
            let majority = sites.len() / 2 + 1;
            SiteSetVotes {
                sites,
                votes,
                majority,
            }
        })
        .collect();
    LeaseWait { bound, sets }
}
