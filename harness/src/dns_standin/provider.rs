//! The stand-in as a DNS provider (pure): the records the DNSEndpoints ask for (desired), the
//! records it applied (served), and the pause rule between them.
//!
//! - It starts once it has both the complete list of DNSEndpoints and the pause ConfigMap's
//!   state; before that it applies nothing.
//! - While not paused, every change of a DNSEndpoint is applied at once.
//! - While paused ("external-dns stopped"), no change is applied: the served records stay the
//!   ones last applied, so answers go stale as a stuck external-dns leaves them. A stand-in that
//!   starts paused has applied nothing, so it serves nothing until resumed.
//! - At resume it catches up at once: the served records become the desired ones.

use std::collections::BTreeMap;

use super::records::{ARecord, ObjectKey};

/// One thing the stand-in learned from the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The complete list of DNSEndpoints and their records (a watch's first list or a
    /// re-list); objects missing from it are gone.
    AllEndpoints(BTreeMap<ObjectKey, Vec<ARecord>>),
    /// One DNSEndpoint was created or changed (its records; none for an object that holds no
    /// A record or was malformed).
    Endpoint(ObjectKey, Vec<ARecord>),
    /// One DNSEndpoint was deleted.
    EndpointDeleted(ObjectKey),
    /// The pause ConfigMap says paused (`true`) or not.
    Paused(bool),
}

/// A change to what is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The object.
    pub key: ObjectKey,
    /// Its records now served; `None` when it no longer serves any.
    pub records: Option<Vec<ARecord>>,
}

/// A change of the provider's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// It knows the DNSEndpoints and the pause state for the first time.
    Started {
        /// Whether it starts paused.
        paused: bool,
    },
    /// It stopped applying changes.
    Paused,
    /// It applies changes again (after catching up).
    Resumed,
}

/// What one input did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// A change of state, if any.
    pub transition: Option<Transition>,
    /// The changes applied (now served), per object.
    pub applied: Vec<Change>,
    /// How many objects have a change held back by the pause (0 when not paused).
    pub held: usize,
}

/// The provider's state.
#[derive(Debug, Clone, Default)]
pub struct Provider {
    desired: BTreeMap<ObjectKey, Vec<ARecord>>,
    applied: BTreeMap<ObjectKey, Vec<ARecord>>,
    /// `None` until the pause ConfigMap was read.
    paused: Option<bool>,
    endpoints_listed: bool,
    started: bool,
}

impl Provider {
    /// A provider that knows nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The records served, per object.
    pub fn applied(&self) -> &BTreeMap<ObjectKey, Vec<ARecord>> {
        &self.applied
    }

    /// Whether it has started (see [`Transition::Started`]).
    pub fn started(&self) -> bool {
        self.started
    }

    /// Whether it is paused (`false` before the pause state is known).
    pub fn paused(&self) -> bool {
        self.paused == Some(true)
    }

    /// Takes one input; applies what the pause rule allows.
    pub fn observe(&mut self, input: Input) -> Outcome {
        let was_paused = self.paused();
        match input {
            Input::AllEndpoints(all) => {
                self.desired = all.into_iter().filter(|(_, r)| !r.is_empty()).collect();
                self.endpoints_listed = true;
            }
            Input::Endpoint(key, records) if records.is_empty() => {
                self.desired.remove(&key);
            }
            Input::Endpoint(key, records) => {
                self.desired.insert(key, records);
            }
            Input::EndpointDeleted(key) => {
                self.desired.remove(&key);
            }
            Input::Paused(paused) => self.paused = Some(paused),
        }
        let mut outcome = Outcome::default();
        if !self.started {
            let Some(paused) = self.paused.filter(|_| self.endpoints_listed) else {
                return outcome;
            };
            self.started = true;
            outcome.transition = Some(Transition::Started { paused });
        } else {
            outcome.transition = match (was_paused, self.paused()) {
                (false, true) => Some(Transition::Paused),
                (true, false) => Some(Transition::Resumed),
                (false, false) | (true, true) => None,
            };
        }
        if self.paused() {
            outcome.held = self.pending();
        } else {
            outcome.applied = self.catch_up();
        }
        outcome
    }

    /// How many objects' desired records differ from the applied ones.
    fn pending(&self) -> usize {
        let removed = self
            .applied
            .keys()
            .filter(|key| !self.desired.contains_key(*key))
            .count();
        let changed = self
            .desired
            .iter()
            .filter(|(key, records)| self.applied.get(*key) != Some(*records))
            .count();
        removed + changed
    }

    /// Applies every desired record; returns what changed.
    fn catch_up(&mut self) -> Vec<Change> {
        let mut changes: Vec<Change> = self
            .applied
            .keys()
            .filter(|key| !self.desired.contains_key(*key))
            .map(|key| Change {
                key: key.clone(),
                records: None,
            })
            .collect();
        changes.extend(
            self.desired
                .iter()
                .filter(|(key, records)| self.applied.get(*key) != Some(*records))
                .map(|(key, records)| Change {
                    key: key.clone(),
                    records: Some(records.clone()),
                }),
        );
        changes.sort_by(|a, b| a.key.cmp(&b.key));
        self.applied = self.desired.clone();
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("bloodraven-playground", name)
    }

    fn a(target: &str) -> Vec<ARecord> {
        vec![ARecord {
            name: "db.example.local".into(),
            targets: vec![target.parse().expect("ip")],
            ttl_seconds: 10,
        }]
    }

    fn set(name: &str, target: &str) -> Change {
        Change {
            key: key(name),
            records: Some(a(target)),
        }
    }

    // docs/design/harness.md#the-portable-path: the stand-in applies nothing before it knows
    // both the DNSEndpoints and whether it is paused, then applies the list at once.
    #[test]
    fn it_starts_once_it_knows_the_endpoints_and_the_pause_state() {
        let mut provider = Provider::new();
        let outcome = provider.observe(Input::AllEndpoints(BTreeMap::from([(
            key("db"),
            a("10.0.0.1"),
        )])));
        assert_eq!(
            outcome,
            Outcome::default(),
            "the pause state is not known yet"
        );
        assert!(!provider.started());
        assert!(provider.applied().is_empty());
        let outcome = provider.observe(Input::Paused(false));
        assert_eq!(
            outcome.transition,
            Some(Transition::Started { paused: false })
        );
        assert_eq!(outcome.applied, vec![set("db", "10.0.0.1")]);
        let outcome = provider.observe(Input::Endpoint(key("db"), a("10.0.0.2")));
        assert_eq!(outcome.transition, None);
        assert_eq!(outcome.applied, vec![set("db", "10.0.0.2")]);
        let outcome = provider.observe(Input::Endpoint(key("db"), a("10.0.0.2")));
        assert!(
            outcome.applied.is_empty(),
            "an unchanged object applies nothing"
        );
    }

    // docs/scenarios.md `stop-external-dns`: while external-dns is stopped the answers go stale
    // (changes and deletions are held), and at resume it catches up with all of them at once.
    #[test]
    fn changes_are_held_while_paused_and_applied_at_resume() {
        let mut provider = Provider::new();
        provider.observe(Input::Paused(false));
        provider.observe(Input::AllEndpoints(BTreeMap::from([
            (key("db"), a("10.0.0.1")),
            (key("old"), a("10.0.0.9")),
        ])));
        let outcome = provider.observe(Input::Paused(true));
        assert_eq!(outcome.transition, Some(Transition::Paused));
        assert_eq!(outcome.held, 0);

        let outcome = provider.observe(Input::Endpoint(key("db"), a("10.0.0.2")));
        assert!(outcome.applied.is_empty());
        assert_eq!(outcome.held, 1);
        provider.observe(Input::EndpointDeleted(key("old")));
        let outcome = provider.observe(Input::Endpoint(key("new"), a("10.0.0.3")));
        assert_eq!(outcome.held, 3);
        let outcome = provider.observe(Input::Paused(true));
        assert_eq!(outcome.transition, None, "still paused");
        assert_eq!(
            provider.applied(),
            &BTreeMap::from([(key("db"), a("10.0.0.1")), (key("old"), a("10.0.0.9"))]),
            "what was applied before the pause is still served"
        );

        let outcome = provider.observe(Input::Paused(false));
        assert_eq!(outcome.transition, Some(Transition::Resumed));
        assert_eq!(
            outcome.applied,
            vec![
                set("db", "10.0.0.2"),
                set("new", "10.0.0.3"),
                Change {
                    key: key("old"),
                    records: None,
                },
            ]
        );
        assert_eq!(
            provider.applied(),
            &BTreeMap::from([(key("db"), a("10.0.0.2")), (key("new"), a("10.0.0.3"))])
        );
    }

    // docs/design/harness.md#the-portable-path: a stand-in started while paused has applied
    // nothing, so it serves nothing until resumed (it never serves fresh records while paused).
    #[test]
    fn a_stand_in_started_paused_serves_nothing_until_resumed() {
        let mut provider = Provider::new();
        provider.observe(Input::Paused(true));
        let outcome = provider.observe(Input::AllEndpoints(BTreeMap::from([(
            key("db"),
            a("10.0.0.1"),
        )])));
        assert_eq!(
            outcome.transition,
            Some(Transition::Started { paused: true })
        );
        assert_eq!(outcome.held, 1);
        assert!(provider.applied().is_empty());
        let outcome = provider.observe(Input::Paused(false));
        assert_eq!(outcome.transition, Some(Transition::Resumed));
        assert_eq!(outcome.applied, vec![set("db", "10.0.0.1")]);
    }

    // docs/design/harness.md#the-portable-path: a re-list replaces the desired set, so an
    // object deleted while the watch was broken is removed; an object with no A record holds
    // nothing.
    #[test]
    fn a_relist_removes_objects_that_are_gone() {
        let mut provider = Provider::new();
        provider.observe(Input::Paused(false));
        provider.observe(Input::AllEndpoints(BTreeMap::from([
            (key("db"), a("10.0.0.1")),
            (key("gone"), a("10.0.0.5")),
        ])));
        let outcome = provider.observe(Input::AllEndpoints(BTreeMap::from([
            (key("db"), a("10.0.0.1")),
            (key("empty"), Vec::new()),
        ])));
        assert_eq!(
            outcome.applied,
            vec![Change {
                key: key("gone"),
                records: None,
            }]
        );
        let outcome = provider.observe(Input::Endpoint(key("db"), Vec::new()));
        assert_eq!(
            outcome.applied,
            vec![Change {
                key: key("db"),
                records: None,
            }]
        );
        assert!(provider.applied().is_empty());
    }
}
