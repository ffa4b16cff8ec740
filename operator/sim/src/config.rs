//! What one simulated run is: its seed, its length and which fault families are on.

use crate::clock::SimTime;

/// Default simulated duration of a run: 10 minutes.
pub const DURATION_MILLIS_DEFAULT: u64 = 10 * 60 * 1000;

/// Configuration of one run. The seed alone decides everything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// The one PRNG seed.
    pub seed: u64,
    /// Simulated duration.
    pub duration: SimTime,
    /// Operator restarts may lose the status copy and the annotation copy of its memory,
    /// independently of each other (docs/design/requirements.md R001.10:
    /// `CooldownViolated(restart+stateLost)`).
    pub state_loss: bool,
    /// With `state_loss`: a lost status copy may also be the whole status reverting to before
    /// the write that set the cooldown (every status write since was rejected), which loses
    /// the topology generation the design calls durable. Off by default: it goes beyond the
    /// design's durability assumption, and its findings are reported separately.
    pub status_revert: bool,
    /// Also crash sidecar processes alone, leaving mysqld running with only its write deadline
    /// to fence it; a crashed sidecar stays down for a random time and restarts without
    /// authority.
    pub sidecar_crash: bool,
    /// Also hang sidecar processes: alive, executing nothing (no renewal, no fence, no
    /// watchdog, no answer) until they resume or their liveness probe restarts them.
    pub sidecar_hang: bool,
    /// Also freeze mysqld (SIGSTOP): it executes nothing, its deadline event included, until
    /// thawed (SIGCONT) with whatever `read_only` it had, or killed by its sidecar's watchdog.
    pub mysqld_freeze: bool,
    /// Client connections held open across failovers, writing to the site they connected to.
    pub held_connections: bool,
    /// Named backups and restores in place of the active site (`crate::restore`).
    pub restore: bool,
    /// A human changes `spec.image` once mid-run: the ordered update
    /// (docs/design/history.md#issue-12).
    pub image_update: bool,
    /// Returning primaries with errant transactions are rejoined (`crate::rejoin`): by the
    /// annotation (`kubectl bloodraven rejoin`) at random times, bad ones included, or by
    /// `spec.returningPrimary.onErrant: rejoin`, drawn per seed; the sidecars run the archive
    /// job (docs/design/operator.md#returning-primary).
    pub rejoin: bool,
    /// Record the step-by-step trace.
    pub trace: bool,
    /// Test-only: run core's deliberately broken promotion rule (promote without waiting for
    /// the old lease), to prove the invariants catch it.
    #[doc(hidden)]
    pub broken_promotion_rule: bool,
    /// Test-only: never ask the kubelet to kill an agentless old primary (core's
    /// `unsafe_skip_agentless_kill`), to show `SplitBrain(frozen+agentless)` comes back.
    #[doc(hidden)]
    pub no_agentless_kill: bool,
    /// Test-only: the world panics at the first event at or after this time, to show that a
    /// sweep reports a panicking seed as a finding and runs the others.
    #[doc(hidden)]
    pub panic_at: Option<SimTime>,
}

impl SimConfig {
    /// Defaults for `seed`: 10 simulated minutes, no state loss, no trace.
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            duration: SimTime(DURATION_MILLIS_DEFAULT),
            state_loss: false,
            status_revert: false,
            sidecar_crash: false,
            sidecar_hang: false,
            mysqld_freeze: false,
            held_connections: false,
            restore: false,
            image_update: false,
            rejoin: false,
            trace: false,
            broken_promotion_rule: false,
            no_agentless_kill: false,
            panic_at: None,
        }
    }
}
