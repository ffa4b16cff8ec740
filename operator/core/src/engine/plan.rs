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

    /// The group name.
    pub fn group(&self) -> &str {
        &self.observation.group
    }
}

/// Actions by execution bucket (docs/design/architecture.md#one-poll order).
#[derive(Default)]
pub(super) struct Plan {
    taints: Vec<Action>,
    cross_site: Vec<Action>,
    surfaces: Vec<Action>,
    tail: Vec<Action>,
    transitions: Vec<SiteTransition>,
    /// The highest topology generation a sidecar reported this poll: no authority or move
    /// notice of this decision may carry a lower one (docs/design/history.md#issue-10-case-7).
    generation_floor: u64,
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

    /// Whether `action` is already among the annotation changes, events and metrics.
    pub fn has_tail(&self, action: &Action) -> bool {
        self.tail.contains(action)
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

    /// [`Plan::transition`] of `site` with its spec role and its pod's node as this poll read
    /// them (nothing for a site not in the spec).
    pub fn transition_site(
        &mut self,
        context: &Context<'_>,
        memory: &mut GroupMemory,
        site: &str,
        to: SiteState,
    ) {
        if let Some(role) = context.role(site) {
            let node = context.view(site).node_name.clone();
            self.transition(memory, site, role, node.as_deref(), to);
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

    /// Records the highest topology generation a sidecar reported: every authority and move
    /// notice this decision issues must carry at least it (checked by [`Plan::finish`]).
    pub fn floor_generations(&mut self, generation: u64) {
        self.generation_floor = self.generation_floor.max(generation);
    }

    /// The highest topology generation a sidecar reported this poll.
    pub fn generation_floor(&self) -> u64 {
        self.generation_floor
    }

    /// The finished decision, after checking the invariants that must never break.
    pub fn finish(self, spec: &MysqlFailoverGroupSpec, memory: GroupMemory) -> Decision {
        let mut actions = self.taints;
        actions.extend(self.cross_site);
        actions.extend(self.surfaces);
        actions.extend(self.tail);
        assert_invariants(spec, &actions, &memory);
        assert_generation_floor(&actions, self.generation_floor);
        Decision {
            actions,
            memory,
            transitions: self.transitions,
        }
    }
}

/// The node taint as a pure function of one site transition (docs/design/requirements.md R000.17):
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

/// The operator never issues a topology generation lower than one a sidecar reports: such an
/// authority would be refused, and memory acting on it would believe a site holds what the
/// sidecars know it does not (a reverted status re-asserting an old site,
/// docs/design/history.md#issue-10-case-7).
fn assert_generation_floor(actions: &[Action], floor: u64) {
    for action in actions {
        let authority = match action {
            Action::PushAuthority { authority, .. }
            | Action::AnnounceAuthorityMove { authority, .. } => authority,
            Action::TaintNode { .. }
            | Action::UntaintNode { .. }
            | Action::Fence { .. }
            | Action::Promote { .. }
            | Action::Repoint { .. }
            | Action::Backup { .. }
            | Action::Restore { .. }
            | Action::Reseed { .. }
            | Action::Archive { .. }
            | Action::DeletePod { .. }
            | Action::RollSite { .. }
            | Action::SetPodLabels { .. }
            | Action::ApplyService(_)
            | Action::ApplyDnsEndpoint { .. }
            | Action::RevokeDeployLeases { .. }
            | Action::Annotate(_)
            | Action::Event(_)
            | Action::Metric(_) => continue,
        };
        assert!(
            authority.topology_generation >= floor,
            "authority {:?} issued at generation {} below the generation {floor} a sidecar reports",
            authority.active_site,
            authority.topology_generation
        );
    }
}

/// What must never happen in one decision
/// (docs/design/style.md#4-assertions-for-invariants-result-for-the-world: assert the negative
/// space too).
fn assert_invariants(spec: &MysqlFailoverGroupSpec, actions: &[Action], memory: &GroupMemory) {
    // A site a rejoin holds (archiving, re-seeding, or past its archive and not rejoined) is
    // never labelled to serve (docs/design/operator.md#returning-primary): only the rejoin's
    // completion makes it a replica, in the decision that ends the hold.
    for entry in &memory.sites {
        assert!(
            !(super::rejoin::holds_record(entry) && labelled_serving(actions, &entry.site)),
            "{} is labelled to serve while its rejoin ({:?}) holds it fenced",
            entry.site,
            entry.rejoin.as_ref().map(|rejoin| rejoin.status.phase)
        );
    }
    let primaries: Vec<&str> = actions
        .iter()
        .filter_map(|action| {
            let Action::SetPodLabels { site, role, .. } = action else {
                return None;
            };
            match role {
                PodRole::Primary => Some(site.as_str()),
                PodRole::Replica | PodRole::Fenced => None,
            }
        })
        .collect();
    assert!(
        primaries.len() <= 1,
        "two primaries in one decision: {primaries:?}"
    );
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
        .filter_map(|action| {
            let Action::PushAuthority { authority, .. } = action else {
                return None;
            };
            authority
                .active_site
                .as_deref()
                .map(|site| (site, authority.topology_generation))
        })
        .collect();
    named.dedup();
    assert!(
        named.len() <= 1,
        "two authorities pushed in one decision: {named:?}"
    );
    if let Some((site, generation)) = named.first() {
        assert!(
            *site == memory.active_site && *generation == memory.topology_generation,
            "authority pushed for {site} at generation {generation} while memory names {} at {}",
            memory.active_site,
            memory.topology_generation
        );
    }
    for action in actions {
        match action {
            Action::TaintNode { site, .. } => assert!(
                spec.site(site)
                    .is_some_and(|s| s.role == SiteRole::ReadWrite),
                "taint on the node of read-only or unknown site {site}"
            ),
            Action::Promote { site, .. } => {
                assert!(
                    !named.iter().any(|(active, _)| active == site),
                    "promote and authority for {site} in one decision"
                );
            }
            Action::ApplyDnsEndpoint { .. } => assert!(
                memory.authority.is_valid(),
                "DNSEndpoint applied while the authority is {:?}",
                memory.authority
            ),
            Action::AnnounceAuthorityMove { authority, .. } => assert!(
                authority.active_site.is_none() && named.is_empty(),
                "move notice mixed with an authority naming a site"
            ),
            Action::DeletePod { site, .. } => assert!(
                !named.iter().any(|(active, _)| active == site),
                "pod of {site} deleted in the decision that pushes an authority naming it"
            ),
            Action::Restore { site, .. } => assert!(
                named.is_empty()
                    && !actions.iter().any(|other| matches!(
                        other,
                        Action::SetPodLabels { site: labelled, role: PodRole::Primary | PodRole::Replica, .. }
                            if labelled == site
                    )),
                "restore of {site} in a decision that pushes an authority or does not fence its pod"
            ),
            Action::RollSite { site, .. } => assert!(
                *site != memory.active_site && !named.iter().any(|(active, _)| active == site),
                "ordered update recreates {site}, the active site"
            ),
            Action::Archive { site, .. } => assert!(
                *site != memory.active_site
                    && memory
                        .site(site)
                        .is_some_and(|entry| entry.state == SiteState::Demoted)
                    && !labelled_serving(actions, site),
                "archive of {site}, which is not a demoted site kept fenced in this decision"
            ),
            Action::UntaintNode { .. }
            | Action::PushAuthority { .. }
            | Action::Fence { .. }
            | Action::Repoint { .. }
            | Action::Backup { .. }
            | Action::Reseed { .. }
            | Action::SetPodLabels { .. }
            | Action::ApplyService(_)
            | Action::RevokeDeployLeases { .. }
            | Action::Annotate(_)
            | Action::Event(_)
            | Action::Metric(_) => {}
        }
    }
}

/// Whether `actions` label `site`'s pod `role=primary` or `role=replica` (so that it may serve
/// in a shared Service).
fn labelled_serving(actions: &[Action], site: &str) -> bool {
    actions.iter().any(|action| {
        matches!(action, Action::SetPodLabels { site: labelled, role: PodRole::Primary | PodRole::Replica, .. }
            if labelled == site)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloodraven_api::{GoDuration, OnCooldown, PlannedFailoverPolicy, SiteSpec, WriteLeaseSpec};

    fn transition(from: SiteState, to: SiteState) -> SiteTransition {
        SiteTransition {
            site: "iad".to_string(),
            from,
            to,
        }
    }

    const STATES: [SiteState; 3] = [SiteState::Active, SiteState::Replica, SiteState::Demoted];

    #[test]
    fn seed_000_taint_is_a_pure_function_of_the_transition_into_and_out_of_demoted() {
        for from in STATES {
            for to in STATES {
                let action =
                    taint_for_transition(&transition(from, to), SiteRole::ReadWrite, Some("n1"));
                let expected = match (from, to) {
                    (SiteState::Active | SiteState::Replica, SiteState::Demoted) => {
                        Some(Action::TaintNode {
                            site: "iad".to_string(),
                            node: "n1".to_string(),
                        })
                    }
                    (SiteState::Demoted, SiteState::Active | SiteState::Replica) => {
                        Some(Action::UntaintNode {
                            site: "iad".to_string(),
                            node: "n1".to_string(),
                        })
                    }
                    (
                        SiteState::Active | SiteState::Replica,
                        SiteState::Active | SiteState::Replica,
                    )
                    | (SiteState::Demoted, SiteState::Demoted) => None,
                };
                assert_eq!(action, expected, "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn seed_000_read_only_site_transitions_never_taint() {
        for from in STATES {
            for to in STATES {
                assert_eq!(
                    taint_for_transition(&transition(from, to), SiteRole::ReadOnly, Some("n1")),
                    None
                );
            }
        }
    }

    fn spec() -> MysqlFailoverGroupSpec {
        let site = |name: &str, role| SiteSpec {
            name: name.to_string(),
            role,
            read_only_max_lag_seconds: None,
            node_selector: BTreeMap::new(),
        };
        MysqlFailoverGroupSpec {
            flavor: bloodraven_api::Flavor::Mariadb,
            image: "mariadb:10.11".to_string(),
            sites: vec![
                site("iad", SiteRole::ReadWrite),
                site("pdx", SiteRole::ReadWrite),
                site("reader", SiteRole::ReadOnly),
            ],
            initial_active_site: "iad".to_string(),
            poll_interval: GoDuration::from_secs(2),
            failure_threshold: 3,
            max_lag_seconds: 30,
            failover_cooldown: GoDuration::from_secs(30),
            planned_failover: PlannedFailoverPolicy {
                on_cooldown: OnCooldown::Reject,
            },
            write_lease: WriteLeaseSpec { duration: None },
            returning_primary: bloodraven_api::ReturningPrimaryPolicy::default(),
            dns: None,
        }
    }

    fn labels(site: &str, role: PodRole) -> Action {
        Action::SetPodLabels {
            site: site.to_string(),
            pod: format!("mysql-playground-{site}-0"),
            role,
            healthy: true,
        }
    }

    fn valid_memory() -> GroupMemory {
        let mut memory = GroupMemory::initial(&spec());
        memory.topology_generation = 1;
        memory.authority = super::super::memory::AuthorityValidity::Valid;
        memory
    }

    #[test]
    #[should_panic(expected = "two primaries in one decision")]
    fn style_4_two_primaries_in_one_decision_is_an_assertion() {
        let plan = Plan {
            surfaces: vec![
                labels("iad", PodRole::Primary),
                labels("pdx", PodRole::Primary),
            ],
            ..Plan::default()
        };
        plan.finish(&spec(), valid_memory());
    }

    #[test]
    #[should_panic(expected = "ordered update recreates iad, the active site")]
    fn issue_12_recreating_the_active_site_is_an_assertion() {
        let plan = Plan {
            cross_site: vec![Action::RollSite {
                site: "iad".to_string(),
                pod: "mysql-playground-iad-0".to_string(),
                uid: "u".to_string(),
                image: "mariadb:new".to_string(),
                grace: crate::time::Duration::from_secs(30),
            }],
            ..Plan::default()
        };
        plan.finish(&spec(), valid_memory());
    }

    #[test]
    #[should_panic(expected = "role=primary on pdx")]
    fn style_4_primary_label_off_the_active_site_is_an_assertion() {
        let plan = Plan {
            surfaces: vec![labels("pdx", PodRole::Primary)],
            ..Plan::default()
        };
        plan.finish(&spec(), valid_memory());
    }

    #[test]
    #[should_panic(expected = "taint on the node of read-only")]
    fn style_4_taint_on_a_read_only_site_is_an_assertion() {
        let plan = Plan {
            taints: vec![Action::TaintNode {
                site: "reader".to_string(),
                node: "n3".to_string(),
            }],
            ..Plan::default()
        };
        plan.finish(&spec(), valid_memory());
    }

    #[test]
    #[should_panic(expected = "DNSEndpoint applied while the authority is")]
    fn seed_000_dns_apply_under_invalid_authority_is_an_assertion() {
        let plan = Plan {
            surfaces: vec![Action::ApplyDnsEndpoint {
                name: "bloodraven-playground".to_string(),
                spec: bloodraven_api::DNSEndpointSpec::a_record("db.example", "10.0.0.1", 10),
            }],
            ..Plan::default()
        };
        plan.finish(&spec(), GroupMemory::initial(&spec()));
    }

    #[test]
    #[should_panic(expected = "authority pushed for pdx at generation 1")]
    fn style_4_authority_other_than_memory_is_an_assertion() {
        let plan = Plan {
            cross_site: vec![Action::PushAuthority {
                site: "reader".to_string(),
                authority: bloodraven_api::sidecar::Authority {
                    group: "playground".to_string(),
                    active_site: Some("pdx".to_string()),
                    topology_generation: 1,
                    issued_at: crate::time::Timestamp(0),
                    moving_from: None,
                },
            }],
            ..Plan::default()
        };
        plan.finish(&spec(), valid_memory());
    }

    #[test]
    fn actions_are_ordered_taints_cross_site_surfaces_tail() {
        let mut plan = Plan::default();
        plan.event(
            super::super::action::EventReason::SiteFailed,
            "x".to_string(),
        );
        plan.surface(labels("iad", PodRole::Primary));
        plan.cross_site(Action::RevokeDeployLeases {
            reason: crate::deploy::RevokeReason::OperatorRevoked,
            topology_generation: 1,
        });
        plan.keep_taint("iad", SiteRole::ReadWrite, Some("n1"));
        let decision = plan.finish(&spec(), valid_memory());
        assert!(matches!(decision.actions[0], Action::TaintNode { .. }));
        assert!(matches!(
            decision.actions[1],
            Action::RevokeDeployLeases { .. }
        ));
        assert!(matches!(decision.actions[2], Action::SetPodLabels { .. }));
        assert!(matches!(decision.actions[3], Action::Event(_)));
    }
}
