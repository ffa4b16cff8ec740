//! The command line: sweep a seed range and print the finding table, or replay one seed.
//!
//! Exit codes: 0 when every finding is inherent (or none), 1 when any non-inherent finding was
//! seen, 2 on a usage or internal error.

use crate::clock::SimTime;
use crate::config::{SimConfig, DURATION_MILLIS_DEFAULT};
use crate::error::{Error, Result};
use crate::invariants::FindingClass;
use crate::world::{run, RunOutcome};
use clap::Parser;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Exit code: no non-inherent finding.
pub const EXIT_OK: u8 = 0;
/// Exit code: at least one non-inherent finding.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code: bad arguments or an internal error.
pub const EXIT_ERROR: u8 = 2;

/// Deterministic simulator over bloodraven-core: seeded, replayable.
#[derive(Debug, Parser)]
#[command(name = "bloodraven-sim", version)]
#[command(group(clap::ArgGroup::new("loss").args(["state_loss", "all_faults"]).multiple(true)))]
pub struct Args {
    /// Seed range to sweep, `START..END` (END exclusive).
    #[arg(long, default_value = "0..100", conflicts_with = "seed")]
    pub seeds: String,
    /// Run one seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// With --seed: print the run step by step.
    #[arg(long, requires = "seed")]
    pub trace: bool,
    /// Operator restarts may lose the status copy and the annotation copy of its memory,
    /// each independently.
    #[arg(long)]
    pub state_loss: bool,
    /// With --state-loss: a lost status copy may also be the whole status reverting to before
    /// the last cooldown write (the topology generation with it).
    #[arg(long, requires = "loss")]
    pub status_revert: bool,
    /// Also crash sidecar processes alone (mysqld keeps running; its write deadline fences it).
    #[arg(long)]
    pub sidecar_crash: bool,
    /// Also hang sidecar processes (alive, executing nothing) until they resume or their
    /// liveness probe restarts them.
    #[arg(long)]
    pub sidecar_hang: bool,
    /// Also freeze mysqld (SIGSTOP) and thaw it (SIGCONT) with whatever read_only it had.
    #[arg(long)]
    pub mysqld_freeze: bool,
    /// Client connections held open across failovers, writing to the site they connected to.
    #[arg(long)]
    pub held_connections: bool,
    /// Also take named backups of the active site and restore it in place from them, some
    /// behind a live failover-hold (docs/design/history.md#issue-12).
    #[arg(long)]
    pub restore: bool,
    /// A human changes spec.image once mid-run: the ordered update
    /// (docs/design/history.md#issue-12).
    #[arg(long)]
    pub image_update: bool,
    /// Returning primaries with errant transactions are rejoined: archive, then re-seed (by
    /// the annotation at random and bad times, or by `onErrant: rejoin`, drawn per seed)
    /// (docs/design/operator.md#returning-primary).
    #[arg(long)]
    pub rejoin: bool,
    /// Every fault mode within the design's durability assumption: --sidecar-crash,
    /// --sidecar-hang, --mysqld-freeze, --held-connections and --state-loss
    /// (not --status-revert).
    #[arg(long)]
    pub all_faults: bool,
    /// Simulated duration of each run, in seconds.
    #[arg(long, default_value_t = DURATION_MILLIS_DEFAULT / 1000)]
    pub duration_seconds: u64,
    /// Worker threads for a sweep (default: available parallelism). Results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Test-only: core's deliberately broken rule (promotion without waiting for the old lease).
    #[arg(long, hide = true)]
    pub broken_promotion_rule: bool,
    /// Test-only: the operator never asks a kubelet to kill an agentless old primary.
    #[arg(long, hide = true)]
    pub no_agentless_kill: bool,
    /// Test-only: the run of this seed panics 30 simulated seconds in (the sweep must report
    /// it as a finding and carry on).
    #[arg(long, hide = true)]
    pub panic_seed: Option<u64>,
}

/// When a `--panic-seed` run panics, in simulated milliseconds.
const INJECTED_PANIC_AT_MILLIS: u64 = 30_000;

impl Args {
    /// The run configuration for `seed` under these flags.
    pub fn config(&self, seed: u64) -> SimConfig {
        SimConfig {
            seed,
            duration: SimTime(self.duration_seconds.saturating_mul(1000)),
            state_loss: self.state_loss || self.all_faults,
            status_revert: self.status_revert,
            sidecar_crash: self.sidecar_crash || self.all_faults,
            sidecar_hang: self.sidecar_hang || self.all_faults,
            mysqld_freeze: self.mysqld_freeze || self.all_faults,
            held_connections: self.held_connections || self.all_faults,
            restore: self.restore,
            image_update: self.image_update,
            rejoin: self.rejoin,
            trace: self.trace,
            broken_promotion_rule: self.broken_promotion_rule,
            no_agentless_kill: self.no_agentless_kill,
            panic_at: (self.panic_seed == Some(seed)).then_some(SimTime(INJECTED_PANIC_AT_MILLIS)),
        }
    }
}

/// Parses `START..END`.
pub fn parse_seed_range(input: &str) -> Result<Range<u64>> {
    let bad = || Error::SeedRange {
        input: input.to_string(),
    };
    let (start, end) = input.split_once("..").ok_or_else(bad)?;
    let start: u64 = start.trim().parse().map_err(|_| bad())?;
    let end: u64 = end.trim().parse().map_err(|_| bad())?;
    if start >= end {
        return Err(bad());
    }
    Ok(start..end)
}

/// One finding class across a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassSummary {
    /// Seeds that saw the class at least once.
    pub seeds: u64,
    /// Violations in total.
    pub violations: u64,
    /// The smallest seed that saw it, to replay with `--seed N --trace`.
    pub replay_seed: u64,
    /// The first finding's detail on the replay seed.
    pub example: String,
}

/// What a sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepSummary {
    /// Seeds run.
    pub seeds_run: u64,
    /// Per finding class.
    pub classes: BTreeMap<FindingClass, ClassSummary>,
    /// Promotions decided, summed over every seed (a sanity signal that faults bite).
    pub promotions: u64,
    /// Emergency failovers among them.
    pub emergency_promotions: u64,
    /// Polls that ran the failover-hold counterfactual.
    pub polls_with_hold: u64,
    /// Of those, polls where the emergency path was active.
    pub hold_polls_during_emergency: u64,
    /// Exact `lostTransactions` reports compared with the truth.
    pub exact_loss_checks: u64,
    /// Restores whose recorded loss was compared with the truth.
    pub restores_checked: u64,
    /// Acknowledged writes, summed over every seed.
    pub acked_writes: u64,
    /// mysqld processes killed by a sidecar's watchdog, summed over every seed.
    pub watchdog_kills: u64,
    /// mysqld processes fenced by their own write deadline, summed over every seed.
    pub deadline_fences: u64,
    /// Ordered updates (`--image-update`): image changes, site recreations, updates completed,
    /// refused inside the cooldown, left waiting for an unhealthy group at the end, and polls
    /// deferred by a failover-hold.
    pub updates: [u64; 7],
    /// Rejoins (`--rejoin`): annotations the human set, rejoins started (of them by the
    /// policy), completed, failed, refused; archive jobs started, archives written, archive
    /// jobs failed (mysqld went away) and cut off (the sidecar died); rejoin re-seed jobs
    /// started, failed and cut off.
    pub rejoins: [u64; 13],
    /// Seeds whose run panicked, with the time and the panic message (the first
    /// [`PANICKED_SEEDS_LISTED_MAX`], in seed order).
    pub panicked_seeds: Vec<(u64, String)>,
}

/// How many panicking seeds the table lists one by one.
pub const PANICKED_SEEDS_LISTED_MAX: usize = 50;

impl SweepSummary {
    /// Whether any non-inherent finding was seen.
    pub fn has_bugs(&self) -> bool {
        self.classes.keys().any(|class| !class.is_inherent())
    }

    fn absorb(&mut self, outcome: &RunOutcome) {
        self.seeds_run += 1;
        self.promotions += outcome.stats.promotions;
        self.emergency_promotions += outcome.stats.emergency_promotions;
        self.polls_with_hold += outcome.stats.polls_with_hold;
        self.hold_polls_during_emergency += outcome.stats.hold_polls_during_emergency;
        self.exact_loss_checks += outcome.stats.exact_loss_checks;
        self.restores_checked += outcome.stats.restores_checked;
        self.acked_writes += outcome.stats.acked_writes;
        self.watchdog_kills += outcome.stats.watchdog_kills;
        self.deadline_fences += outcome.stats.deadline_fences;
        for (sum, add) in self.updates.iter_mut().zip([
            outcome.stats.image_changes,
            outcome.stats.site_recreations,
            outcome.stats.updates_completed,
            outcome.stats.updates_rejected_in_cooldown,
            outcome.stats.updates_failed_failover,
            outcome.stats.updates_blocked_unhealthy,
            outcome.stats.update_polls_deferred_by_hold,
        ]) {
            *sum += add;
        }
        for (sum, add) in self.rejoins.iter_mut().zip([
            outcome.stats.rejoin_requests,
            outcome.stats.rejoins_started,
            outcome.stats.rejoins_automatic,
            outcome.stats.rejoins_completed,
            outcome.stats.rejoins_failed,
            outcome.stats.rejoins_refused,
            outcome.stats.archive_jobs_started,
            outcome.stats.archives_written,
            outcome.stats.archive_jobs_failed,
            outcome.stats.archive_jobs_cut_off,
            outcome.stats.reseed_jobs_started,
            outcome.stats.reseed_jobs_failed,
            outcome.stats.reseed_jobs_cut_off,
        ]) {
            *sum += add;
        }
        if self.panicked_seeds.len() < PANICKED_SEEDS_LISTED_MAX {
            if let Some(panic) = outcome
                .findings
                .iter()
                .find(|f| f.class == FindingClass::Panicked)
            {
                self.panicked_seeds
                    .push((outcome.seed, format!("t={} {}", panic.at, panic.detail)));
            }
        }
        for (&class, &violations) in &outcome.counts {
            let example = outcome
                .findings
                .iter()
                .find(|f| f.class == class)
                .map(|f| format!("t={} {}", f.at, f.detail))
                .unwrap_or_default();
            let entry = self.classes.entry(class).or_insert(ClassSummary {
                seeds: 0,
                violations: 0,
                replay_seed: outcome.seed,
                example,
            });
            entry.seeds += 1;
            entry.violations += violations;
        }
    }

    /// The finding table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} seeds, {} promotions ({} emergency), {} acknowledged writes, {} exact loss reports \
             checked, {} restores' losses checked, {} polls under a failover-hold ({} with the \
             emergency path active)",
            self.seeds_run,
            self.promotions,
            self.emergency_promotions,
            self.acked_writes,
            self.exact_loss_checks,
            self.restores_checked,
            self.polls_with_hold,
            self.hold_polls_during_emergency
        );
        let _ = writeln!(
            out,
            "{} watchdog kills of mysqld, {} fences by mysqld's own write deadline",
            self.watchdog_kills, self.deadline_fences
        );
        if self.updates[0] > 0 {
            let [changes, recreations, completed, rejected, failed, blocked, deferred] =
                self.updates;
            let _ = writeln!(
                out,
                "{changes} image changes: {recreations} site recreations, {completed} updates \
                 completed, {rejected} refused inside the cooldown (onCooldown: reject), {failed} \
                 stopped by a rejected or aborted planned failover, {blocked} \
                 waiting at the end for an unhealthy group, {deferred} polls deferred by a \
                 failover-hold"
            );
        }
        if self.rejoins.iter().any(|&count| count > 0) {
            let [requests, started, automatic, completed, failed, refused, jobs, written, jobs_failed, cut_off, reseeds, reseeds_failed, reseeds_cut_off] =
                self.rejoins;
            let _ = writeln!(
                out,
                "{requests} rejoin requests (annotation): {started} rejoins started ({automatic} \
                 by onErrant: rejoin), {completed} completed, {failed} failed, {refused} \
                 refused; {jobs} archive jobs: {written} archives written, {jobs_failed} failed \
                 (mysqld went away), {cut_off} cut off (the sidecar died); {reseeds} re-seed \
                 jobs: {reseeds_failed} failed, {reseeds_cut_off} cut off"
            );
        }
        let _ = writeln!(
            out,
            "{:<38} {:>7} {:>10} {:>7} {:>9}",
            "finding class", "seeds", "violations", "replay", "inherent"
        );
        for class in FindingClass::ALL {
            let (seeds, violations, replay) = match self.classes.get(&class) {
                Some(s) => (s.seeds, s.violations, s.replay_seed.to_string()),
                None => (0, 0, "-".to_string()),
            };
            let inherent = if class.is_inherent() { "yes" } else { "no" };
            let _ = writeln!(
                out,
                "{:<38} {seeds:>7} {violations:>10} {replay:>7} {inherent:>9}",
                class.name()
            );
        }
        for (class, summary) in &self.classes {
            let _ = writeln!(
                out,
                "e.g. {} (seed {}): {}",
                class.name(),
                summary.replay_seed,
                summary.example
            );
        }
        for (seed, detail) in &self.panicked_seeds {
            let _ = writeln!(out, "seed {seed} panicked: {detail}");
        }
        out
    }
}

/// Runs every seed of `seeds` on `threads` workers. Each run is deterministic in its seed, and
/// results are combined in seed order, so the summary does not depend on `threads`.
pub fn sweep(args: &Args, seeds: Range<u64>, threads: usize) -> Result<SweepSummary> {
    let next = AtomicU64::new(seeds.start);
    let results: Mutex<Vec<RunOutcome>> = Mutex::new(Vec::new());
    let worker_count = threads.max(1);
    let joined: Vec<std::thread::Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..worker_count)
            .map(|_| {
                scope.spawn(|| loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= seeds.end {
                        break;
                    }
                    let mut outcome = run(&args.config(seed));
                    outcome.trace.clear();
                    if let Ok(mut all) = results.lock() {
                        all.push(outcome);
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    if joined.iter().any(std::result::Result::is_err) {
        return Err(Error::WorkerPanicked);
    }
    let mut outcomes = results.into_inner().map_err(|_| Error::WorkerPanicked)?;
    outcomes.sort_by_key(|o| o.seed);
    let mut summary = SweepSummary::default();
    for outcome in &outcomes {
        summary.absorb(outcome);
    }
    Ok(summary)
}

/// Runs the command line; returns the process exit code.
pub fn main_with(args: &Args) -> Result<u8> {
    if let Some(seed) = args.seed {
        let outcome = run(&args.config(seed));
        let mut out = String::new();
        if args.trace {
            out.push_str(&outcome.trace);
        }
        let _ = writeln!(
            out,
            "seed {seed}: {} promotions, {} acknowledged writes, {} findings",
            outcome.stats.promotions,
            outcome.stats.acked_writes,
            outcome.counts.values().sum::<u64>()
        );
        for finding in &outcome.findings {
            let inherent = if finding.class.is_inherent() {
                " (inherent)"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {} at {}{inherent}: {}",
                finding.class, finding.at, finding.detail
            );
        }
        print!("{out}");
        let bugs = outcome.counts.keys().any(|c| !c.is_inherent());
        return Ok(if bugs { EXIT_FINDINGS } else { EXIT_OK });
    }
    let seeds = parse_seed_range(&args.seeds)?;
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let summary = sweep(args, seeds, threads)?;
    print!("{}", summary.table());
    Ok(if summary.has_bugs() {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_range_parses_and_rejects_garbage() {
        assert_eq!(parse_seed_range("0..1000").ok(), Some(0..1000));
        assert!(parse_seed_range("5..5").is_err());
        assert!(parse_seed_range("x..3").is_err());
        assert!(parse_seed_range("7").is_err());
    }
}
