//! Leader election with the `coordination.k8s.io/v1` Lease `bloodraven-leader` in the
//! operator namespace (docs/design/requirements.md R001.9: extra replicas are idle standbys).
//! Only the leader polls, writes status, DNS, labels and taints, or serves the deploy API.
//!
//! Every write is an update guarded by the Lease's `resourceVersion`: two candidates racing
//! for an expired lease cannot both win (the loser gets 409 Conflict and stays a standby).
//!
//! docs/design/history.md#issue-10-case-5, the timing rules (client-go's `leaderelection` keeps
//! the same ones):
//! - Leadership is a term, valid until the start of the last successful renewal plus
//!   `renew_deadline` ([`Leadership::Until`]). [`LeaderFlag::is_leader`] reads the clock, so
//!   it turns false at that instant whatever the election loop is doing; the loop also wakes
//!   then to log the step-down.
//! - Every API call of an attempt is bounded (`tokio::time::timeout_at`) by that same
//!   instant ([`attempt_deadline`]): kube's client has no read timeout, and a request the
//!   API server accepts and never answers must not outlast the term.
//! - A standby judges the holder's lease by its own monotonic clock: expired once the Lease
//!   (holder, renewTime, resourceVersion, ...) has gone unchanged for its
//!   `leaseDurationSeconds` since this replica first saw it so ([`ObservedLease`]), never by
//!   the holder's `renewTime` against the local wall clock (clock skew).
//!
//! Why that is safe: others restart their clock when they see a renewal, which lands after
//! the renewal started, so in their eyes the lease lasts at least until that start plus
//! `lease_duration`; the leader's term ends `lease_duration - renew_deadline` earlier. That
//! slack is what an action issued just before the term ends has to reach its target, and
//! callers re-check [`LeaderFlag::may_act`] before each action ([`crate::act::Executor`],
//! the deploy API's grants).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::error::{Error, Result};

/// How long leadership must still hold when an action is issued ([`LeaderFlag::may_act`]):
/// time for its request to reach the API server or the sidecar. What the request does after
/// that is covered by the slack between `renew_deadline` and `lease_duration`.
pub const ACTION_MARGIN: Duration = Duration::from_millis(500);

/// This replica's leadership as [`LeaderFlag`] holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// Not leading.
    Standby,
    /// Leading until this instant (the start of the last successful renewal plus
    /// `renew_deadline`); not leading from it on, unless renewed before.
    Until(Instant),
    /// Leading without an election (`--leader-election=false`: one replica; tests).
    Unbounded,
}

impl Leadership {
    /// Whether this leadership still holds `duration` after `now` (pure).
    pub fn holds_for(self, now: Instant, duration: Duration) -> bool {
        match self {
            Leadership::Standby => false,
            Leadership::Until(until) => now.checked_add(duration).is_some_and(|end| end < until),
            Leadership::Unbounded => true,
        }
    }
}

/// Whether this replica currently leads, and until when; cheap to clone and read. Becoming
/// the leader is also signalled ([`LeaderFlag::acquired`]), so a loop that only works while
/// leading starts at once instead of at its next periodic check.
#[derive(Clone, Debug)]
pub struct LeaderFlag {
    leadership: Arc<Mutex<Leadership>>,
    acquired: Arc<Notify>,
}

impl Default for LeaderFlag {
    fn default() -> Self {
        Self::new(false)
    }
}

impl LeaderFlag {
    /// A flag leading without an election when `leading` ([`Leadership::Unbounded`]), else
    /// a standby.
    pub fn new(leading: bool) -> Self {
        Self {
            leadership: Arc::new(Mutex::new(Self::unelected(leading))),
            acquired: Arc::new(Notify::new()),
        }
    }

    fn unelected(leading: bool) -> Leadership {
        if leading {
            Leadership::Unbounded
        } else {
            Leadership::Standby
        }
    }

    /// The leadership as last recorded (an [`Leadership::Until`] may have passed already).
    pub fn leadership(&self) -> Leadership {
        *self
            .leadership
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `leadership`; returns what was recorded before. A standby becoming leader
    /// wakes [`LeaderFlag::acquired`].
    fn replace(&self, leadership: Leadership) -> Leadership {
        let now = Instant::now();
        let previous = {
            let mut held = self
                .leadership
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            std::mem::replace(&mut *held, leadership)
        };
        if !previous.holds_for(now, Duration::ZERO) && leadership.holds_for(now, Duration::ZERO) {
            self.acquired.notify_one();
        }
        previous
    }

    /// Resolves once this replica becomes the leader after having been a standby (at once
    /// if that happened since the last call returned). For the one loop that waits on it
    /// (the group list, [`crate::poll`]): after an election it starts the groups' poll
    /// loops without waiting out its list interval, which would add up to that interval to
    /// the detection of a site that failed while no operator ran (scenario 011).
    pub async fn acquired(&self) {
        self.acquired.notified().await;
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        self.holds_for(Duration::ZERO)
    }

    /// Whether this replica will still lead `duration` from now.
    pub fn holds_for(&self, duration: Duration) -> bool {
        self.leadership().holds_for(Instant::now(), duration)
    }

    /// Whether an action with side effects may be issued now: leadership holds for at least
    /// [`ACTION_MARGIN`]. Checked right before each action.
    pub fn may_act(&self) -> bool {
        self.holds_for(ACTION_MARGIN)
    }

    /// Leads (or not) without an election, until set again (`--leader-election=false`;
    /// tests).
    pub fn set(&self, leading: bool) {
        self.replace(Self::unelected(leading));
    }

    /// Leads until `until` (a successful acquisition or renewal). Returns whether this
    /// replica led just before.
    pub fn lead_until(&self, until: Instant) -> bool {
        self.replace(Leadership::Until(until))
            .holds_for(Instant::now(), Duration::ZERO)
    }

    /// Stops leading. Returns whether this replica was still recorded as leading (its term
    /// may have passed already).
    pub fn step_down(&self) -> bool {
        self.replace(Leadership::Standby) != Leadership::Standby
    }
}

/// Timings of the election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectionTimings {
    /// `spec.leaseDurationSeconds`: how long others wait after they last saw the Lease change.
    pub lease_duration: Duration,
    /// A leader's term after the start of its last successful renewal (< lease_duration); it
    /// also bounds every attempt.
    pub renew_deadline: Duration,
    /// How often candidates and the leader try.
    pub retry_period: Duration,
}

impl Default for ElectionTimings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// When an attempt starting at `started` must be over (pure): the end of the current term
/// while leading, else `renew_deadline` after `started`.
pub fn attempt_deadline(
    leadership: Leadership,
    started: Instant,
    timings: ElectionTimings,
) -> Instant {
    let full = started + timings.renew_deadline;
    match leadership {
        Leadership::Until(until) if until > started => until.min(full),
        Leadership::Until(_) | Leadership::Standby | Leadership::Unbounded => full,
    }
}

/// The Lease as this replica last saw it change, and when by its own monotonic clock
/// (client-go's `observedRecord` and `observedTime`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedLease {
    seen: Option<SeenLease>,
}

#[derive(Clone, Debug, PartialEq)]
struct SeenLease {
    resource_version: Option<String>,
    spec: LeaseSpec,
    changed_at: Instant,
}

impl ObservedLease {
    /// Records `lease` as read at `now`: the clock restarts only when the Lease differs from
    /// the one last seen (resourceVersion or spec).
    pub fn observe(&mut self, lease: &Lease, now: Instant) {
        let resource_version = lease.metadata.resource_version.clone();
        let spec = lease.spec.clone().unwrap_or_default();
        let unchanged = self
            .seen
            .as_ref()
            .is_some_and(|seen| seen.resource_version == resource_version && seen.spec == spec);
        if !unchanged {
            self.seen = Some(SeenLease {
                resource_version,
                spec,
                changed_at: now,
            });
        }
    }

    /// Whether the Lease seen last has gone unchanged for its `leaseDurationSeconds` at `now`
    /// (nothing seen yet: not expired).
    pub fn expired(&self, now: Instant) -> bool {
        self.seen.as_ref().is_some_and(|seen| {
            let seconds = seen.spec.lease_duration_seconds.unwrap_or(0).max(0);
            let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
            now.saturating_duration_since(seen.changed_at) >= duration
        })
    }
}

/// What to do with the Lease as read (pure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElectionStep {
    /// No Lease: create it holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Another holder's lease expired (or nobody holds it): take it over.
    TakeOver,
    /// Another holder's lease is live: stay standby.
    Standby {
        /// The current holder.
        holder: String,
    },
}

/// Decides the election step from the Lease as read at `now` (local monotonic time), after
/// recording it in `observed` (pure). Another holder's lease expires by
/// [`ObservedLease::expired`], whatever its `renewTime` says.
pub fn election_step(
    lease: Option<&Lease>,
    identity: &str,
    observed: &mut ObservedLease,
    now: Instant,
) -> ElectionStep {
    let Some(lease) = lease else {
        return ElectionStep::Create;
    };
    observed.observe(lease, now);
    let holder = lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.clone())
        .unwrap_or_default();
    if holder == identity {
        return ElectionStep::Renew;
    }
    if holder.is_empty() || observed.expired(now) {
        return ElectionStep::TakeOver;
    }
    ElectionStep::Standby { holder }
}

/// The Lease spec written for `step` by `identity` at `now` (pure). The times written are
/// this replica's wall clock, for people reading the Lease; no candidate judges expiry by
/// them.
pub fn lease_spec(
    previous: Option<&LeaseSpec>,
    step: &ElectionStep,
    identity: &str,
    now: jiff::Timestamp,
    timings: ElectionTimings,
) -> LeaseSpec {
    let transitions = previous
        .and_then(|spec| spec.lease_transitions)
        .unwrap_or(0);
    let seconds = i32::try_from(timings.lease_duration.as_secs()).unwrap_or(i32::MAX);
    match step {
        ElectionStep::Renew => LeaseSpec {
            renew_time: Some(MicroTime(now)),
            holder_identity: Some(identity.to_string()),
            lease_duration_seconds: Some(seconds),
            ..previous.cloned().unwrap_or_default()
        },
        ElectionStep::Create | ElectionStep::TakeOver | ElectionStep::Standby { .. } => LeaseSpec {
            holder_identity: Some(identity.to_string()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(match step {
                ElectionStep::Create => 0,
                _ => transitions.saturating_add(1),
            }),
            ..LeaseSpec::default()
        },
    }
}

/// Runs the election for `identity` on `namespace/name` until `shutdown` flips, keeping
/// `flag` current. Errors of single attempts are logged and retried.
///
/// Each attempt ends by [`attempt_deadline`]; a success makes this replica lead until the
/// attempt's start plus `renew_deadline`. When that instant passes without another success
/// the flag reads false at once, and the loop wakes then to record and log the step-down.
pub async fn run_election(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    timings: ElectionTimings,
    flag: LeaderFlag,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let mut observed = ObservedLease::default();
    let renew_deadline_ms = millis(timings.renew_deadline);
    loop {
        let started = Instant::now();
        let deadline = attempt_deadline(flag.leadership(), started, timings);
        let attempt = try_acquire_or_renew(&api, name, identity, timings, &mut observed, deadline);
        let outcome = tokio::select! {
            outcome = attempt => outcome,
            _ = shutdown.changed() => break,
        };
        match outcome {
            Ok(true) => {
                if !flag.lead_until(started + timings.renew_deadline) {
                    tracing::info!(lease = name, identity, renew_deadline_ms, "became leader");
                }
            }
            Ok(false) => {
                if flag.step_down() {
                    tracing::warn!(
                        lease = name,
                        identity,
                        "lost leadership: another replica holds the lease"
                    );
                }
            }
            Err(error) => {
                tracing::warn!(lease = name, identity, %error, "leader election attempt failed");
                if matches!(flag.leadership(), Leadership::Until(until) if until <= Instant::now())
                {
                    step_down_at_deadline(&flag, name, identity, renew_deadline_ms);
                }
            }
        }
        let term_end = match flag.leadership() {
            Leadership::Until(until) => Some(until),
            Leadership::Standby | Leadership::Unbounded => None,
        };
        tokio::select! {
            _ = tokio::time::sleep(timings.retry_period) => {}
            _ = tokio::time::sleep_until(term_end.unwrap_or(started)), if term_end.is_some() => {
                step_down_at_deadline(&flag, name, identity, renew_deadline_ms);
            }
            _ = shutdown.changed() => break,
        }
    }
    if flag.step_down() {
        match tokio::time::timeout(timings.renew_deadline, release(&api, name, identity)).await {
            Ok(()) => {}
            Err(_) => tracing::warn!(
                lease = name,
                identity,
                renew_deadline_ms,
                "failed to release leader lease: no answer within the renew deadline"
            ),
        }
    }
}

fn step_down_at_deadline(flag: &LeaderFlag, name: &str, identity: &str, renew_deadline_ms: u64) {
    if flag.step_down() {
        tracing::warn!(
            lease = name,
            identity,
            renew_deadline_ms,
            "renew deadline passed without a successful renewal; stepping down"
        );
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `call` if it answers by `deadline`, else an [`Error::KubeTimeout`] naming `action`.
async fn by_deadline<T>(
    deadline: Instant,
    action: impl FnOnce() -> String,
    call: impl std::future::Future<Output = kube::Result<T>>,
) -> Result<kube::Result<T>> {
    let timeout_ms = millis(deadline.saturating_duration_since(Instant::now()));
    tokio::time::timeout_at(deadline, call)
        .await
        .map_err(|_| Error::KubeTimeout {
            action: action(),
            timeout_ms,
        })
}

/// One attempt, each API call bounded by `deadline`: `Ok(true)` when we lead afterwards.
/// `observed` carries what this replica saw of the Lease from attempt to attempt.
pub async fn try_acquire_or_renew(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    timings: ElectionTimings,
    observed: &mut ObservedLease,
    deadline: Instant,
) -> Result<bool> {
    let current = by_deadline(deadline, || format!("get lease {name}"), api.get_opt(name))
        .await?
        .map_err(|error| Error::kube(format!("get lease {name}"), error))?;
    let step = election_step(current.as_ref(), identity, observed, Instant::now());
    let now = jiff::Timestamp::now();
    let spec = lease_spec(
        current.as_ref().and_then(|lease| lease.spec.as_ref()),
        &step,
        identity,
        now,
        timings,
    );
    let params = PostParams::default();
    let result = match (&step, current) {
        (ElectionStep::Standby { .. }, _) => return Ok(false),
        (ElectionStep::Create, _) | (_, None) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            let create = api.create(&params, &lease);
            by_deadline(deadline, || format!("create lease {name}"), create).await?
        }
        (ElectionStep::Renew | ElectionStep::TakeOver, Some(mut lease)) => {
            // Keeps metadata.resourceVersion: a concurrent writer makes this a 409.
            lease.spec = Some(spec);
            let replace = api.replace(name, &params, &lease);
            by_deadline(deadline, || format!("write lease {name}"), replace).await?
        }
    };
    match result {
        Ok(written) => {
            observed.observe(&written, Instant::now());
            Ok(true)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(Error::kube(format!("write lease {name}"), error)),
    }
}

async fn release(api: &Api<Lease>, name: &str, identity: &str) {
    let mut lease = match api.get_opt(name).await {
        Ok(Some(lease)) => lease,
        Ok(None) => return,
        Err(error) => {
            let error = Error::kube(format!("get lease {name}"), error);
            tracing::warn!(lease = name, %error, "failed to release leader lease");
            return;
        }
    };
    let ours = lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.as_deref())
        == Some(identity);
    if !ours {
        return;
    }
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = None;
    }
    if let Err(error) = api.replace(name, &PostParams::default(), &lease).await {
        let error = Error::kube(format!("write lease {name}"), error);
        tracing::warn!(lease = name, %error, "failed to release leader lease");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renewed_seconds: i64, duration_seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                lease_duration_seconds: Some(duration_seconds),
                renew_time: jiff::Timestamp::from_second(renewed_seconds)
                    .ok()
                    .map(MicroTime),
                lease_transitions: Some(4),
                ..LeaseSpec::default()
            }),
        }
    }

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(seconds).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    }

    fn seconds(value: u64) -> Duration {
        Duration::from_secs(value)
    }

    fn with_version(mut lease: Lease, version: &str) -> Lease {
        lease.metadata.resource_version = Some(version.into());
        lease
    }

    /// docs/design/requirements.md R001.9: one replica holds the lease; the others are standbys
    /// until it expires. docs/design/history.md#issue-10-case-5: expiry is lease_duration of
    /// the standby's own time since it saw the Lease change, whatever renewTime says (an hour
    /// ahead, an hour behind, or the epoch).
    #[test]
    fn seed_001_standbys_wait_for_lease_duration_since_the_lease_last_changed() {
        let t0 = Instant::now();
        let mut observed = ObservedLease::default();
        assert_eq!(
            election_step(None, "b", &mut observed, t0),
            ElectionStep::Create
        );
        for renewed in [100, 3_700, 0] {
            let mut observed = ObservedLease::default();
            let held = with_version(lease(Some("a"), renewed, 15), "1");
            assert_eq!(
                election_step(Some(&held), "a", &mut observed, t0 + seconds(60)),
                ElectionStep::Renew
            );
            let mut observed = ObservedLease::default();
            let standby = ElectionStep::Standby { holder: "a".into() };
            // First seen at t0: the clock starts then, not at renewTime.
            assert_eq!(election_step(Some(&held), "b", &mut observed, t0), standby);
            assert_eq!(
                election_step(
                    Some(&held),
                    "b",
                    &mut observed,
                    t0 + Duration::from_millis(14_999)
                ),
                standby
            );
            // Renewed (new resourceVersion, same renewTime) at 10 s: the clock restarts.
            let renewed = with_version(lease(Some("a"), renewed, 15), "2");
            assert_eq!(
                election_step(Some(&renewed), "b", &mut observed, t0 + seconds(10)),
                standby
            );
            assert_eq!(
                election_step(Some(&renewed), "b", &mut observed, t0 + seconds(24)),
                standby
            );
            assert_eq!(
                election_step(Some(&renewed), "b", &mut observed, t0 + seconds(25)),
                ElectionStep::TakeOver
            );
        }
        let mut observed = ObservedLease::default();
        assert_eq!(
            election_step(Some(&lease(None, 100, 15)), "b", &mut observed, t0),
            ElectionStep::TakeOver
        );
    }

    /// docs/design/history.md#issue-10-case-5: a term holds strictly before its end; `may_act`
    /// wants ACTION_MARGIN of it left; without an election the flag leads unconditionally.
    #[test]
    fn leadership_holds_until_the_end_of_its_term() {
        let t0 = Instant::now();
        let term = Leadership::Until(t0 + seconds(10));
        assert!(term.holds_for(t0, Duration::ZERO));
        assert!(term.holds_for(t0, seconds(9)));
        assert!(!term.holds_for(t0, seconds(10)));
        assert!(term.holds_for(t0 + Duration::from_millis(9_999), Duration::ZERO));
        assert!(!term.holds_for(t0 + seconds(10), Duration::ZERO));
        assert!(!Leadership::Standby.holds_for(t0, Duration::ZERO));
        assert!(Leadership::Unbounded.holds_for(t0, seconds(3_600)));
        assert!(LeaderFlag::new(true).may_act());
        assert!(!LeaderFlag::new(false).is_leader());
    }

    /// docs/design/history.md#issue-10-case-5: `is_leader()` turns false when the term ends,
    /// with no call on the flag in between (nothing has to run for the step-down to take
    /// effect); a term shorter than ACTION_MARGIN allows no action.
    #[tokio::test(start_paused = true)]
    async fn the_flag_drops_at_the_end_of_the_term_by_itself() {
        let flag = LeaderFlag::new(false);
        let t0 = Instant::now();
        assert!(!flag.lead_until(t0 + seconds(10)));
        assert!(flag.is_leader() && flag.may_act());
        tokio::time::sleep_until(t0 + seconds(10) - ACTION_MARGIN).await;
        assert!(flag.is_leader());
        assert!(!flag.may_act(), "less than ACTION_MARGIN of the term left");
        tokio::time::sleep_until(t0 + seconds(10)).await;
        assert!(!flag.is_leader());
        assert!(flag.step_down(), "still recorded until the loop steps down");
        assert_eq!(flag.leadership(), Leadership::Standby);
    }

    /// docs/design/history.md#issue-10-case-5: an attempt never outlasts the renew deadline
    /// since the start of the last successful renewal; a standby's (or a lapsed leader's)
    /// attempt gets a full renew_deadline.
    #[test]
    fn attempts_end_by_the_renew_deadline_since_the_last_renewal() {
        let timings = ElectionTimings::default();
        let t0 = Instant::now();
        let term = Leadership::Until(t0 + seconds(10));
        assert_eq!(
            attempt_deadline(term, t0 + seconds(2), timings),
            t0 + seconds(10)
        );
        assert_eq!(
            attempt_deadline(term, t0 + seconds(9), timings),
            t0 + seconds(10)
        );
        assert_eq!(
            attempt_deadline(term, t0 + seconds(10), timings),
            t0 + seconds(20)
        );
        assert_eq!(
            attempt_deadline(Leadership::Standby, t0, timings),
            t0 + timings.renew_deadline
        );
    }

    /// A take-over counts a transition and stamps acquire and renew times; a renewal keeps
    /// the acquire time and the transition count.
    #[test]
    fn lease_spec_counts_transitions_on_take_over_only() {
        let timings = ElectionTimings::default();
        let held = lease(Some("a"), 100, 15);
        let previous = held.spec.as_ref();
        let taken = lease_spec(previous, &ElectionStep::TakeOver, "b", at(120), timings);
        assert_eq!(taken.holder_identity.as_deref(), Some("b"));
        assert_eq!(taken.lease_transitions, Some(5));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(120))));
        assert_eq!(taken.lease_duration_seconds, Some(15));
        let renewed = lease_spec(Some(&taken), &ElectionStep::Renew, "b", at(122), timings);
        assert_eq!(renewed.lease_transitions, Some(5));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(120))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(122))));
        let created = lease_spec(None, &ElectionStep::Create, "a", at(1), timings);
        assert_eq!(created.lease_transitions, Some(0));
    }

    /// localkube trap 10: MicroTime serialises with exactly 6 fractional digits.
    #[test]
    fn micro_time_serialises_with_microseconds() {
        let spec = lease_spec(
            None,
            &ElectionStep::Create,
            "a",
            at(1),
            ElectionTimings::default(),
        );
        let json = serde_json::to_value(&spec).unwrap_or_default();
        assert_eq!(json["renewTime"], "1970-01-01T00:00:01.000000Z");
    }

    /// A Kubernetes API holding one Lease in memory, behind kube's [`Client`] (no network):
    /// GET, POST and PUT (guarded by `resourceVersion`, 409 on a mismatch) of
    /// `.../leases/{name}`. While stalled, every request is accepted and never answered,
    /// as from an API server that stopped responding.
    #[derive(Clone, Default)]
    struct FakeLeaseApi(Arc<std::sync::Mutex<FakeLeaseState>>);

    #[derive(Default)]
    struct FakeLeaseState {
        lease: Option<Lease>,
        version: u64,
        stalled: bool,
        unanswered: usize,
    }

    impl FakeLeaseApi {
        fn state(&self) -> std::sync::MutexGuard<'_, FakeLeaseState> {
            self.0.lock().expect("fake api state")
        }

        fn client(&self) -> Client {
            let api = self.clone();
            let service =
                tower::service_fn(move |request: axum::http::Request<kube::client::Body>| {
                    let api = api.clone();
                    async move { Ok::<_, std::convert::Infallible>(api.answer(request).await) }
                });
            Client::new(service, NAMESPACE)
        }

        fn stall(&self, stalled: bool) {
            self.state().stalled = stalled;
        }

        /// Writes the Lease as its holder would (a new resourceVersion).
        fn write(&self, holder: &str, renewed: jiff::Timestamp) {
            let mut state = self.state();
            state.version += 1;
            let version = state.version.to_string();
            state.lease = Some(Lease {
                metadata: ObjectMeta {
                    name: Some(NAME.into()),
                    namespace: Some(NAMESPACE.into()),
                    resource_version: Some(version),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(holder.into()),
                    lease_duration_seconds: Some(15),
                    renew_time: Some(MicroTime(renewed)),
                    ..LeaseSpec::default()
                }),
            });
        }

        fn holder(&self) -> Option<String> {
            self.state()
                .lease
                .as_ref()
                .and_then(|lease| lease.spec.as_ref())
                .and_then(|spec| spec.holder_identity.clone())
        }

        async fn answer(
            &self,
            request: axum::http::Request<kube::client::Body>,
        ) -> axum::http::Response<kube::client::Body> {
            use http_body_util::BodyExt;
            if self.state().stalled {
                self.state().unanswered += 1;
                std::future::pending::<()>().await;
            }
            let method = request.method().clone();
            let body = request
                .into_body()
                .collect()
                .await
                .map(|collected| collected.to_bytes())
                .unwrap_or_default();
            let mut state = self.state();
            let written: Option<Lease> = serde_json::from_slice(&body).ok();
            let stored_version = state
                .lease
                .as_ref()
                .and_then(|lease| lease.metadata.resource_version.clone());
            let (code, answer) = match (method.as_str(), written) {
                ("GET", _) => match &state.lease {
                    Some(lease) => (200, serde_json::to_value(lease).unwrap_or_default()),
                    None => (404, status_body(404, "NotFound")),
                },
                ("POST", Some(_)) if state.lease.is_some() => {
                    (409, status_body(409, "AlreadyExists"))
                }
                ("PUT", Some(lease)) if lease.metadata.resource_version != stored_version => {
                    (409, status_body(409, "Conflict"))
                }
                ("POST" | "PUT", Some(mut lease)) => {
                    state.version += 1;
                    lease.metadata.resource_version = Some(state.version.to_string());
                    state.lease = Some(lease.clone());
                    (200, serde_json::to_value(&lease).unwrap_or_default())
                }
                _ => (400, status_body(400, "BadRequest")),
            };
            axum::http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(answer.to_string().into_bytes()))
                .expect("response")
        }
    }

    fn status_body(code: u16, reason: &str) -> serde_json::Value {
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": reason, "reason": reason, "code": code})
    }

    const NAMESPACE: &str = "bloodraven";
    const NAME: &str = "bloodraven-leader";

    fn timings() -> ElectionTimings {
        ElectionTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    fn candidate(
        api: &FakeLeaseApi,
        identity: &'static str,
        flag: &LeaderFlag,
        shutdown: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(run_election(
            api.client(),
            NAMESPACE,
            NAME,
            identity,
            timings(),
            flag.clone(),
            shutdown,
        ))
    }

    /// docs/design/history.md#issue-10-case-5: a renewal the API server accepts and never
    /// answers (kube's client has no read timeout) must not keep `is_leader()` true: it turns
    /// false when renew_deadline has passed since the last successful renewal started, while
    /// the renewal still hangs, well before lease_duration lets a standby take over. Shutdown
    /// does not hang on the stalled API either.
    #[tokio::test(start_paused = true)]
    async fn issue_10_a_stalled_renewal_drops_leadership_at_the_renew_deadline() {
        let api = FakeLeaseApi::default();
        let flag = LeaderFlag::new(false);
        let (stop, shutdown) = watch::channel(false);
        let acquired = tokio::time::Instant::now();
        let election = candidate(&api, "a", &flag, shutdown);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(flag.is_leader(), "the only candidate leads at once");
        api.stall(true);
        let renew_deadline = timings().renew_deadline;
        tokio::time::sleep_until(acquired + renew_deadline - Duration::from_millis(1)).await;
        assert!(flag.is_leader(), "still within the renew deadline");
        assert!(api.state().unanswered >= 1, "a renewal is hanging");
        tokio::time::sleep_until(acquired + renew_deadline).await;
        assert!(!flag.is_leader(), "stepped down at the renew deadline");
        tokio::time::sleep_until(acquired + timings().lease_duration).await;
        assert!(!flag.is_leader(), "stays down while the API is stalled");
        let _ = stop.send(true);
        let stopped = tokio::time::timeout(renew_deadline, election).await;
        assert!(stopped.is_ok(), "shutdown is bounded on a stalled API");
    }

    /// docs/design/history.md#issue-10-case-5: a leader stopping while the API is stalled steps
    /// down at once and gives up releasing the Lease after renew_deadline instead of hanging
    /// its shutdown.
    #[tokio::test(start_paused = true)]
    async fn issue_10_shutdown_of_a_leader_is_bounded_on_a_stalled_api() {
        let api = FakeLeaseApi::default();
        let flag = LeaderFlag::new(false);
        let (stop, shutdown) = watch::channel(false);
        let election = candidate(&api, "a", &flag, shutdown);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(flag.is_leader());
        api.stall(true);
        let _ = stop.send(true);
        let stopped = tokio::time::timeout(timings().renew_deadline * 2, election).await;
        assert!(stopped.is_ok(), "shutdown is bounded on a stalled API");
        assert!(!flag.is_leader());
        assert!(api.state().unanswered >= 1, "the release was sent and hung");
    }

    /// docs/design/history.md#issue-10-case-5: a standby judges the holder's lease by its own
    /// monotonic time since the Lease last changed, never by the holder's renewTime against its
    /// own wall clock. A holder whose clock is an hour behind keeps its lease while it renews;
    /// once it stops, the standby takes over after lease_duration of local time without change,
    /// not before.
    #[tokio::test(start_paused = true)]
    async fn issue_10_a_standby_takes_over_after_lease_duration_of_local_time_without_change() {
        let api = FakeLeaseApi::default();
        let skew = jiff::SignedDuration::from_hours(1);
        let behind = move || jiff::Timestamp::now() - skew;
        api.write("a", behind());
        let start = tokio::time::Instant::now();
        let holder = {
            let api = api.clone();
            tokio::spawn(async move {
                // Renews every 2 s (at 1 s, 3 s, ... 29 s) with its clock an hour behind.
                tokio::time::sleep(Duration::from_secs(1)).await;
                for _ in 0..15 {
                    api.write("a", behind());
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            })
        };
        let flag = LeaderFlag::new(false);
        let (stop, shutdown) = watch::channel(false);
        let election = candidate(&api, "b", &flag, shutdown);
        // The last renewal is at 29 s; b sees it at its turn at 30 s: expiry at 45 s local.
        let mut at = start;
        while at < start + Duration::from_millis(44_500) {
            at += Duration::from_millis(500);
            tokio::time::sleep_until(at).await;
            assert!(!flag.is_leader(), "b leads at {:?}", at - start);
            assert_eq!(api.holder().as_deref(), Some("a"));
        }
        let _ = holder.await;
        tokio::time::sleep_until(start + Duration::from_millis(46_500)).await;
        assert!(
            flag.is_leader(),
            "b took over once the lease went unchanged"
        );
        assert_eq!(api.holder().as_deref(), Some("b"));
        let _ = stop.send(true);
        let _ = election.await;
    }

    /// docs/design/history.md#issue-10-case-5: a holder whose clock runs an hour ahead and that
    /// then stops renewing loses its lease after lease_duration of the standby's time, not an
    /// hour later.
    #[tokio::test(start_paused = true)]
    async fn issue_10_a_holder_clock_ahead_does_not_stretch_its_lease() {
        let api = FakeLeaseApi::default();
        api.write(
            "a",
            jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1),
        );
        let start = tokio::time::Instant::now();
        let flag = LeaderFlag::new(false);
        let (stop, shutdown) = watch::channel(false);
        let election = candidate(&api, "b", &flag, shutdown);
        tokio::time::sleep_until(start + Duration::from_millis(14_500)).await;
        assert!(
            !flag.is_leader(),
            "the lease was seen unchanged for less than 15 s"
        );
        tokio::time::sleep_until(start + Duration::from_millis(16_500)).await;
        assert!(flag.is_leader(), "b took over after 15 s of local time");
        assert_eq!(api.holder().as_deref(), Some("b"));
        let _ = stop.send(true);
        let _ = election.await;
    }
}
