//! Where a long run is, on stderr, as chainsaw and kuttl show it: the phase before the first
//! step (creating the cluster, installing, waiting for the authority to be Valid), then each
//! step as it starts and how it ended (`ok in 1.2 s` or the failure).
//!
//! The lines are for a person watching a terminal; the structured record of a run stays in
//! `tracing`, the history and the report. They are off until a program turns them on
//! ([`enable`]): the harness, `bloodraven-playground` and `bloodraven-upgrade` do unless they
//! are asked to be quiet (`--quiet`, or `BLOODRAVEN_QUIET=1` for every program), so library
//! tests print nothing. libtest's own lines are untouched.

use std::cell::RefCell;
use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);
static PROGRAM: OnceLock<&'static str> = OnceLock::new();

thread_local! {
    /// The scenario this thread runs (`1/9 s038`), prefixed to its lines.
    static SCOPE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The environment variable that keeps every program quiet (CI logs).
pub const QUIET_ENV: &str = "BLOODRAVEN_QUIET";

/// Whether `BLOODRAVEN_QUIET` asks for quiet (set, and not `0` or empty).
pub fn quiet_from_env() -> bool {
    std::env::var(QUIET_ENV).is_ok_and(|value| !value.is_empty() && value != "0")
}

/// Turns the lines on for `program` (its name leads each line) unless `quiet`.
pub fn enable(program: &'static str, quiet: bool) {
    let _ = PROGRAM.set(program);
    ENABLED.store(!quiet, Ordering::Relaxed);
}

/// Whether lines are printed.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Runs `f` with this thread's lines prefixed by `scope` (e.g. `2/9 s020`).
pub fn scoped<T>(scope: String, f: impl FnOnce() -> T) -> T {
    let previous = SCOPE.with(|cell| cell.replace(Some(scope)));
    let result = f();
    SCOPE.with(|cell| *cell.borrow_mut() = previous);
    result
}

/// The line `message` would be printed as.
pub fn format_line(message: &str) -> String {
    let program = PROGRAM.get().copied().unwrap_or("bloodraven");
    match SCOPE.with(|cell| cell.borrow().clone()) {
        Some(scope) => format!("{program}: [{scope}] {message}"),
        None => format!("{program}: {message}"),
    }
}

/// Prints one line (when enabled).
pub fn say(message: impl Display) {
    if enabled() {
        eprintln!("{}", format_line(&message.to_string()));
    }
}

/// A phase or step that was announced and will say how it ended.
#[derive(Debug)]
pub struct Phase {
    label: String,
    started: Instant,
}

impl Phase {
    /// Announces `label` and starts its clock.
    pub fn start(label: impl Into<String>) -> Self {
        let label = label.into();
        say(&label);
        Self {
            label,
            started: Instant::now(),
        }
    }

    /// How long it has run.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Says how it ended: `<label>: ok in 1.2 s`, or `<label>: FAILED after 3.4 s: why`.
    pub fn end<T, E: Display>(self, result: &Result<T, E>) {
        say(ending(&self.label, self.started.elapsed(), result));
    }
}

/// The closing line of a phase.
pub fn ending<T, E: Display>(label: &str, elapsed: Duration, result: &Result<T, E>) -> String {
    match result {
        Ok(_) => format!("{label}: ok in {:.1} s", elapsed.as_secs_f64()),
        Err(error) => format!(
            "{label}: FAILED after {:.1} s: {}",
            elapsed.as_secs_f64(),
            first_line(&error.to_string())
        ),
    }
}

/// The first line of a message, at most 300 characters (the report has the rest).
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default();
    if line.chars().count() > 300 {
        format!("{}...", line.chars().take(300).collect::<String>())
    } else {
        line.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_ends_with_ok_and_its_time_or_the_failures_first_line() {
        let ok: Result<(), String> = Ok(());
        assert_eq!(
            ending("step 3/12 fault kill", Duration::from_millis(1234), &ok),
            "step 3/12 fault kill: ok in 1.2 s"
        );
        let failed: Result<(), String> = Err("group: activeSite: found iad\nmore".into());
        assert_eq!(
            ending("step 4/12 expect", Duration::from_millis(10_000), &failed),
            "step 4/12 expect: FAILED after 10.0 s: group: activeSite: found iad"
        );
    }

    #[test]
    fn lines_carry_the_scenario_scope_of_their_thread() {
        let line = scoped("2/9 s020".into(), || format_line("installing"));
        assert!(line.ends_with(": [2/9 s020] installing"), "{line}");
        assert!(!format_line("after").contains('['));
    }
}
