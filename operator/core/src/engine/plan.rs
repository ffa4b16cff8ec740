//! The decision under construction: actions in their execution buckets, site transitions,
//! and the invariants checked before it is handed out.

use std::collections::BTreeMap;

use bloodraven_api::{MysqlFailoverGroupSpec, SiteRole};

use super::action::{Action, Decision, Event, EventReason, SiteTransition};
use super::memory::{GroupMemory, PodRole, SiteState};
use super::observation::Observation;
use super::options::DecideOptions;
use super::reading::SiteView;
use crate::time::Timestamp;

/// Everything a rule reads: the inputs of this `decide` call, with the sites parsed.
pub(super) struct Context<'a> {
    /// The group spec.
    pub spec: &'a MysqlFailoverGroupSpec,
    /// The raw observation.
    pub observation: &'a Observation,
    /// The decision time.
    pub now: Timestamp,
    /// Options (the test-only switch).
    pub options: DecideOptions,
    /// Every spec site, parsed.
    pub views: BTreeMap<String, SiteView>,
}

impl Context<'_> {
    /// The parsed view of a site (a site the spec does not name reads as unreachable).
    pub fn view(&self, site: &str) -> &SiteView {
        static UNREACHABLE: std::sync::OnceLock<SiteView> = std::sync::OnceLock::new();
        self.views
            .get(site)
            .unwrap_or_else(|| UNREACHABLE.get_or_init(SiteView::default))
    }

    /// The spec role of a site; `None` for a site not in the spec.
    pub fn role(&self, site: &str) -> Option<SiteRole> {
        self.spec.site(site).map(|site| site.role)
    }

    /// Sites of the spec, in order.
    pub fn site_names(&self) -> impl Iterator<Item = &str> {
        self.spec.sites.iter().map(|site| site.name.as_str())
    }

    /// Majority of all sites' sidecars (the reader votes).
    pub fn majority(&self) -> usize {
        self.spec.sites.len() / 2 + 1
    }

    /// The group name.
    pub fn group(&self) -> &str {
        &self.observation.group
    }
}

/// Actions by execution bucket (ARCHITECTURE.md "One poll" order).
#[derive(Default)]
pub(super) struct Plan {
    taints: Vec<Action>,
    cross_site: Vec<Action>,
    surfaces: Vec<Action>,
    tail: Vec<Action>,
    transitions: Vec<SiteTransition>,
}

impl Plan {
    /// A cross-site action (authority, fence, promote, repoint, lease revocation).
    pub fn cross_site(&mut self, action: Action) {
        self.cross_site.push(action);
    }

    /// A surface action (labels, Services, DNSEndpoint).
    pub fn surface(&mut self, action: Action) {
        self.surfaces.push(action);
    }

    /// An annotation change, event or metric.
    pub fn tail(&mut self, action: Action) {
        self.tail.push(action);
    }

    /// An event.
    pub fn event(&mut self, reason: EventReason, message: String) {
        self.tail.push(Action::Event(Event { reason, message }));
    }

    /// A taint re-assertion on a demoted read-write site's node (idempotent; repairs a taint
    /// write that failed and covers a node learned late).
    pub fn keep_taint(&mut self, site: &str, role: SiteRole, node: Option<&str>) {
        if let (SiteRole::ReadWrite, Some(node)) = (role, node) {
            let action = Action::TaintNode {
                site: site.to_string(),
                node: node.to_string(),
            };
            if !self.taints.contains(&action) {
                self.taints.push(action);
            }
        }
    }

    /// Moves `site` to `to`, records the transition and emits the taint action it implies.
    pub fn transition(
        &mut self,
        memory: &mut GroupMemory,
        site: &str,
        role: SiteRole,
        node: Option<&str>,
        to: SiteState,
    ) {
        let Some(entry) = memory.site_mut(site) else {
            return;
        };
        let from = entry.state;
        if from == to {
            return;
        }
        entry.state = to;
        let transition = SiteTransition {
            site: site.to_string(),
            from,
            to,
        };
        if let Some(action) = taint_for_transition(&transition, role, node) {
            if !self.taints.contains(&action) {
                self.taints.push(action);
            }
        }
        self.transitions.push(transition);
    }

    /// The finished decision, after checking the invariants that must never break.
    pub fn finish(self, spec: &MysqlFailoverGroupSpec, memory: GroupMemory) -> Decision {
        let mut actions = self.taints;
        actions.extend(self.cross_site);
        actions.extend(self.surfaces);
        actions.extend(self.tail);
        assert_invariants(spec, &actions, &memory);
        Decision {
            actions,
            memory,
            transitions: self.transitions,
        }
    }
}

/// The node taint as a pure function of one site transition (seed 000 "The taint"):
/// entering `Demoted` taints a read-write site's node, leaving it removes the taint; a
/// read-only site is never tainted; nothing else taints.
pub(super) fn taint_for_transition(
    transition: &SiteTransition,
    role: SiteRole,
    node: Option<&str>,
) -> Option<Action> {
    let node = node?.to_string();
    let site = transition.site.clone();
    match role {
        SiteRole::ReadOnly => None,
        SiteRole::ReadWrite => match (transition.from, transition.to) {
            (SiteState::Active | SiteState::Replica, SiteState::Demoted) => {
                Some(Action::TaintNode { site, node })
            }
            (SiteState::Demoted, SiteState::Active | SiteState::Replica) => {
                Some(Action::UntaintNode { site, node })
            }
            (SiteState::Active, SiteState::Active | SiteState::Replica)
            | (SiteState::Replica, SiteState::Active | SiteState::Replica)
            | (SiteState::Demoted, SiteState::Demoted) => None,
        },
    }
}

/// What must never happen in one decision (STYLE.md 4: assert the negative space too).
fn assert_invariants(spec: &MysqlFailoverGroupSpec, actions: &[Action], memory: &GroupMemory) {
    let primaries: Vec<&str> = actions
        .iter()
        .filter_map(|action| match action {
            Action::SetPodLabels {
                site,
                role: PodRole::Primary,
                ..
            } => Some(site.as_str()),
            _ => None,
        })
        .collect();
    assert!(primaries.len() <= 1, "two primaries in one decision: {primaries:?}");
    if let Some(primary) = primaries.first() {
        assert!(
            *primary == memory.active_site && memory.authority.is_valid(),
            "role=primary on {primary} while authority names {} ({:?})",
            memory.active_site,
            memory.authority
        );
    }
    let mut named: Vec<(&str, u64)> = actions
        .iter()
        .filter_map(|action| match action {
            Action::PushAuthority { authority, .. } => authority
                .active_site
                .as_deref()
                .map(|site| (site, authority.topology_generation)),
            _ => None,
        })
        .collect();
    named.dedup();
    assert!(named.len() <= 1, "two authorities pushed in one decision: {named:?}");
    for action in actions {
        match action {
            Action::TaintNode { site, .. } => assert!(
                spec.site(site).is_some_and(|s| s.role == SiteRole::ReadWrite),
                "taint on the node of read-only or unknown site {site}"
            ),
            Action::Promote { site, .. } => assert!(
                !named.iter().any(|(active, _)| active == site),
                "promote and authority for {site} in one decision"
            ),
            Action::AnnounceAuthorityMove { authority, .. } => assert!(
                authority.active_site.is_none() && named.is_empty(),
                "move notice mixed with an authority naming a site"
            ),
            _ => {}
        }
    }
}
