//! Leader election with the `coordination.k8s.io/v1` Lease `bloodraven-leader` in the
//! operator namespace (seed 001: extra replicas are idle standbys). Only the leader polls,
//! writes status, DNS, labels and taints, or serves the deploy API.
//!
//! Every write is an update guarded by the Lease's `resourceVersion`: two candidates racing
//! for an expired lease cannot both win (the loser gets 409 Conflict and stays a standby).
//! A leader that cannot renew within `renew_deadline` steps down before its lease can expire
//! in the eyes of the others.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::error::{Error, Result};

/// Whether this replica currently leads; cheap to clone and read.
#[derive(Clone, Debug, Default)]
pub struct LeaderFlag(Arc<AtomicBool>);

impl LeaderFlag {
    /// A flag starting at `leading`.
    pub fn new(leading: bool) -> Self {
        Self(Arc::new(AtomicBool::new(leading)))
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Sets the flag.
    pub fn set(&self, leading: bool) {
        self.0.store(leading, Ordering::SeqCst);
    }
}

/// Timings of the election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectionTimings {
    /// `spec.leaseDurationSeconds`: how long others wait after the last renewal.
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long steps down (< lease_duration).
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

/// Decides the election step from the Lease as read at `now` (pure).
pub fn election_step(lease: Option<&Lease>, identity: &str, now: jiff::Timestamp) -> ElectionStep {
    let Some(lease) = lease else {
        return ElectionStep::Create;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == identity {
        return ElectionStep::Renew;
    }
    if holder.is_empty() {
        return ElectionStep::TakeOver;
    }
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0).max(0));
    let expired = match &spec.renew_time {
        Some(MicroTime(renewed)) => renewed
            .checked_add(jiff::SignedDuration::from_secs(duration))
            .map(|expiry| expiry <= now)
            .unwrap_or(true),
        None => true,
    };
    if expired {
        ElectionStep::TakeOver
    } else {
        ElectionStep::Standby { holder }
    }
}

/// The Lease spec written for `step` by `identity` at `now` (pure).
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
    let mut last_renewal = tokio::time::Instant::now();
    loop {
        match try_acquire_or_renew(&api, name, identity, timings).await {
            Ok(true) => {
                if !flag.is_leader() {
                    tracing::info!(lease = name, identity, "became leader");
                }
                flag.set(true);
                last_renewal = tokio::time::Instant::now();
            }
            Ok(false) => {
                if flag.is_leader() {
                    tracing::warn!(lease = name, identity, "lost leadership");
                }
                flag.set(false);
            }
            Err(error) => {
                tracing::warn!(lease = name, identity, %error, "leader election attempt failed");
                if flag.is_leader() && last_renewal.elapsed() >= timings.renew_deadline {
                    tracing::warn!(
                        lease = name,
                        identity,
                        "renew deadline passed; stepping down"
                    );
                    flag.set(false);
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(timings.retry_period) => {}
            _ = shutdown.changed() => break,
        }
    }
    if flag.is_leader() {
        flag.set(false);
        release(&api, name, identity).await;
    }
}

/// One attempt: `Ok(true)` when we lead afterwards.
pub async fn try_acquire_or_renew(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    timings: ElectionTimings,
) -> Result<bool> {
    let current = api
        .get_opt(name)
        .await
        .map_err(|error| Error::kube(format!("get lease {name}"), error))?;
    let now = jiff::Timestamp::now();
    let step = election_step(current.as_ref(), identity, now);
    let spec = lease_spec(
        current.as_ref().and_then(|lease| lease.spec.as_ref()),
        &step,
        identity,
        now,
        timings,
    );
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
            api.create(&PostParams::default(), &lease).await
        }
        (ElectionStep::Renew | ElectionStep::TakeOver, Some(mut lease)) => {
            // Keeps metadata.resourceVersion: a concurrent writer makes this a 409.
            lease.spec = Some(spec);
            api.replace(name, &PostParams::default(), &lease).await
        }
    };
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(Error::kube(format!("write lease {name}"), error)),
    }
}

async fn release(api: &Api<Lease>, name: &str, identity: &str) {
    let Ok(Some(mut lease)) = api.get_opt(name).await else {
        return;
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

    /// Seed 001: one replica holds the lease; the others are standbys until it expires.
    #[test]
    fn seed_001_standbys_wait_for_the_holder_lease_to_expire() {
        assert_eq!(election_step(None, "b", at(100)), ElectionStep::Create);
        let held = lease(Some("a"), 100, 15);
        assert_eq!(
            election_step(Some(&held), "a", at(110)),
            ElectionStep::Renew
        );
        assert_eq!(
            election_step(Some(&held), "b", at(114)),
            ElectionStep::Standby { holder: "a".into() }
        );
        assert_eq!(
            election_step(Some(&held), "b", at(115)),
            ElectionStep::TakeOver
        );
        assert_eq!(
            election_step(Some(&lease(None, 100, 15)), "b", at(101)),
            ElectionStep::TakeOver
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
}
