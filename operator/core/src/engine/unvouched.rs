//! An authority no sidecar vouches for: compare GTID sets before issuing it
//! (docs/design/history.md#issue-10-case-7).
//!
//! Normally the sidecars are the proof of who holds the authority: they cache it, and a newer
//! one than memory knows is adopted (`adopt_newer_authority`). Two situations have no such
//! proof:
//!
//! - **bootstrap** (generation 0): memory names `initialActiveSite`, but a group recreated
//!   over retained volumes may have written elsewhere since;
//! - **forgotten**: every sidecar that answers caches no authority at all (all restarted
//!   since the last push), so nothing confirms memory, which may itself be a status that was
//!   reverted or restored from an old copy.
//!
//! Then the operator does not hand the authority out on memory's word. It reads the GTID sets
//! of the sites and names the site memory names only if it holds every transaction any
//! readable site holds (the errant transactions memory recorded for a site excepted: those
//! are known to be off the history). Otherwise it names the read-write site that holds them all,
//! if one does and every other site is confirmed read-only or down (nobody may be writing
//! while the authority is re-derived); and if none does (the histories diverged, or only the
//! read-only reader has them), it issues nothing and says which site lacks what
//! ([`EventReason::AuthorityWithheld`]): choosing between two histories is a human's call,
//! and an emergency failover, gated as always, remains possible. A majority of all sites must
//! be readable before anything is issued: fewer could not hold a lease anyway, and more sites
//! compared is fewer transactions overlooked.

use bloodraven_api::{FailoverKind, SiteRole};
use bloodraven_mysql::{lost_transactions, GtidSet};

use super::action::{Action, EventReason};
use super::failover::{issue_promotion, moving};
use super::memory::{GroupMemory, SiteState};
use super::plan::{Context, Plan};
use crate::deploy::RevokeReason;

/// What the GTID comparison allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Holder {
    /// Memory's site holds every readable site's transactions: issue as memory says.
    Keep,
    /// Another read-write site holds them all (memory's lacks `missing` of them): name it.
    Recover {
        /// The site to name.
        to: String,
        /// How many transactions memory's site lacks that `to` holds.
        missing: u64,
    },
    /// Issue nothing; the message says why.
    Withhold(String),
}

/// Whether memory's authority is unvouched: never issued, or no sidecar that answers caches
/// an authority of this group (and no move is in flight, which has its own proof). A poll in
/// which no sidecar answers vouches for nothing: pushing memory's authority then would let the
/// first sidecar it lands on (a read that timed out, a push that did not) cache it and vouch
/// for memory on the next poll, its own word coming back (simulator seed 693 with
/// `--status-revert`: a reverted status re-issued the generation a lost promotion had
/// superseded).
pub(super) fn unvouched(context: &Context<'_>, memory: &GroupMemory) -> bool {
    if memory.topology_generation == 0 {
        return true;
    }
    if moving(memory) || memory.emergency_failover.is_some() {
        return false;
    }
    let answering: Vec<_> = context
        .views
        .values()
        .filter(|view| view.sidecar_up)
        .collect();
    answering.iter().all(|view| view.authority.is_none())
}

/// Transactions a site holds (`gtid`) that `holder` lacks, less every errant set memory
/// records (a demoted old primary's, or a replica's that an emergency failover left behind:
/// a GTID names one transaction, so a copy the reader replicated from the old primary before
/// it was repointed is that same off-history transaction) and what the last failover declared
/// lost (`lastFailover.lostGtidSet`: the old primary's last transactions, which a replica
/// killed before its errant set was computed may still hold), and what restores discarded
/// (`status.restore`: a replica not yet re-seeded still holds it, simulator seed 3085 with
/// every fault mode): those are off the history by an earlier decision.
fn unexplained_extra(memory: &GroupMemory, gtid: &GtidSet, holder_gtid: &GtidSet) -> GtidSet {
    let mut extra = lost_transactions(gtid, holder_gtid);
    for errant in memory
        .sites
        .iter()
        .filter_map(|entry| entry.errant.as_ref())
    {
        extra = extra.subtract(errant);
    }
    let declared_lost = memory
        .last_failover
        .as_ref()
        .and_then(|failover| failover.lost_gtid_set.as_deref())
        .and_then(|text| GtidSet::parse(gtid.flavor(), text).ok());
    if let Some(lost) = declared_lost {
        extra = extra.subtract(&lost);
    }
    match super::restore::discarded_by_restores(memory, gtid.flavor()) {
        Some(discarded) => extra.subtract(&discarded),
        None => extra,
    }
}

/// Who may be named, by the GTID sets read this poll (see the module docs).
pub(super) fn holder(context: &Context<'_>, memory: &GroupMemory) -> Holder {
    let readable: Vec<(&str, &GtidSet)> = context
        .site_names()
        .filter_map(|name| {
            let view = context.view(name);
            view.is_up().then_some(())?;
            view.gtid.as_ref().map(|gtid| (name, gtid))
        })
        .collect();
    let sites = context.spec.sites.len();
    let majority = sites / 2 + 1;
    if readable.len() < majority {
        let names: Vec<&str> = readable.iter().map(|(name, _)| *name).collect();
        return Holder::Withhold(format!(
            "only {} of {sites} sites are readable ({}); a majority must be compared first",
            readable.len(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ));
    }
    let lacking = |holder: &str, holder_gtid: &GtidSet| -> Vec<(String, GtidSet)> {
        readable
            .iter()
            .filter(|(name, _)| *name != holder)
            .map(|(name, gtid)| {
                (
                    name.to_string(),
                    unexplained_extra(memory, gtid, holder_gtid),
                )
            })
            .filter(|(_, extra)| !extra.is_empty())
            .collect()
    };
    // A site awaiting a restore's re-seed holds what the restore discarded: never the one
    // that holds "every transaction".
    let eligible = |name: &str| {
        context.role(name) == Some(SiteRole::ReadWrite)
            && memory
                .site(name)
                .is_some_and(|site| site.state != SiteState::Demoted)
            && !super::restore::withholds(memory, name)
    };
    let named = memory.active_site.as_str();
    let named_gtid = readable
        .iter()
        .find(|(name, _)| *name == named)
        .map(|(_, gtid)| *gtid);
    let Some(named_gtid) = named_gtid else {
        return Holder::Withhold(format!(
            "{named}, the site memory names, is not readable: its GTID set cannot be compared"
        ));
    };
    let named_lacks = lacking(named, named_gtid);
    if named_lacks.is_empty() && eligible(named) {
        return Holder::Keep;
    }
    // The named site holds every readable site's transactions but is demoted: the move that
    // demoted it is lost and no sidecar vouches for memory's authority (or the move would have
    // resumed). When no other site holds them all, it is the last resort, as an emergency
    // failover that finds no other candidate promotes its old site back: it takes the
    // authority again at a new generation. Withholding instead kept every site read-only for
    // good (simulator seed 1468 with `--all-faults`: pdx, demoted by an emergency failover the
    // operator's crash lost, held every transaction; iad lacked two).
    let demoted_holder = named_lacks.is_empty()
        && context.role(named) == Some(SiteRole::ReadWrite)
        && memory.site(named).is_some_and(|site| {
            site.state == SiteState::Demoted
                && site.errant.as_ref().is_none_or(GtidSet::is_empty)
                && !super::rejoin::holds_record(site)
        });
    let recovery = readable
        .iter()
        .filter(|(name, _)| *name != named && eligible(name))
        .find(|(name, gtid)| lacking(name, gtid).is_empty())
        .or_else(|| {
            readable
                .iter()
                .find(|(name, _)| demoted_holder && *name == named)
        });
    let describe = |lacks: &[(String, GtidSet)]| -> String {
        lacks
            .iter()
            .map(|(site, extra)| format!("{site} holds {} it lacks ({extra})", extra.count()))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match recovery {
        Some((to, to_gtid)) => {
            let others_fenced = context
                .site_names()
                .filter(|name| name != to)
                .all(|name| context.view(name).confirmed_not_writable());
            if !others_fenced && *to == named {
                return Holder::Withhold(format!(
                    "{named} is demoted by a move memory lost and holds every readable site's transactions, but another site is not yet confirmed read-only or down"
                ));
            }
            if !others_fenced {
                return Holder::Withhold(format!(
                    "{named} lacks transactions: {}; {to} holds them all but another site is not yet confirmed read-only or down",
                    describe(&named_lacks)
                ));
            }
            Holder::Recover {
                to: to.to_string(),
                missing: lost_transactions(to_gtid, named_gtid).count(),
            }
        }
        None if named_lacks.is_empty() => Holder::Withhold(format!(
            "{named} holds every readable site's transactions but is demoted with errant transactions or not read-write, and no other read-write site holds them all (a human's choice)"
        )),
        None => Holder::Withhold(format!(
            "{named} lacks transactions: {}; no read-write site holds every readable site's transactions (diverged histories need a human's choice)",
            describe(&named_lacks)
        )),
    }
}

/// Settles an unvouched authority: bootstrap or re-issue as memory says, recover it to the
/// site holding every transaction, or withhold it. Returns whether it is withheld: then
/// nothing is pushed and nothing repointed this poll.
pub(super) fn settle(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) -> bool {
    if !unvouched(context, memory) {
        return false;
    }
    let bootstrap = memory.topology_generation == 0;
    match holder(context, memory) {
        Holder::Keep => {
            if bootstrap {
                issue(context, memory, plan);
                plan.event(
                    EventReason::AuthorityIssued,
                    format!(
                        "authority issued to {} at topology generation 1",
                        memory.active_site
                    ),
                );
            }
            false
        }
        Holder::Recover { to, missing } => {
            let from = memory.active_site.clone();
            let cooldown_until = memory.cooldown_until.filter(|until| context.now < *until);
            if let (false, Some(until)) = (bootstrap, cooldown_until) {
                plan.event(
                    EventReason::AuthorityWithheld,
                    format!(
                        "no authority issued to {to} (the site holding every transaction; {from}, the site memory names, lacks {missing} of them or is demoted): inside the failover cooldown until {until}"
                    ),
                );
                return true;
            }
            plan.transition_site(context, memory, &from, SiteState::Replica);
            if bootstrap {
                plan.transition_site(context, memory, &to, SiteState::Active);
                memory.active_site = to.clone();
                issue(context, memory, plan);
            } else {
                // An authority that moves to another site is a promotion like any other
                // (docs/design/operator.md#cooldown: "Every promotion starts a
                // `failoverCooldown`"; the harness explains every active-site change by a
                // failover): cooldown, lastFailover (kind emergency: nobody asked for it),
                // leases revoked, `Promoted`.
                issue_promotion(context, memory, plan, &to, FailoverKind::Emergency, &from);
            }
            let whose = if bootstrap {
                "initialActiveSite"
            } else {
                "the site memory names (no sidecar caches an authority)"
            };
            plan.event(
                EventReason::AuthorityRecovered,
                format!(
                    "{from}, {whose}, lacks {missing} transactions {to} holds; authority issued to {to} at topology generation {}",
                    memory.topology_generation
                ),
            );
            false
        }
        Holder::Withhold(why) => {
            plan.event(
                EventReason::AuthorityWithheld,
                format!(
                    "no authority issued to {} at topology generation {}: {why}",
                    memory.active_site,
                    memory.topology_generation.max(1)
                ),
            );
            true
        }
    }
}

/// A new generation for memory's active site: every deploy lease is revoked
/// (`TopologyChanged`, docs/design/requirements.md R003.20).
fn issue(context: &Context<'_>, memory: &mut GroupMemory, plan: &mut Plan) {
    memory.advance_generation();
    memory.authority_issued_at = Some(context.now);
    plan.cross_site(Action::RevokeDeployLeases {
        reason: RevokeReason::TopologyChanged,
        topology_generation: memory.topology_generation,
    });
}
