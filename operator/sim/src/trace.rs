//! The step-by-step trace of one run (`--seed N --trace`).
//!
//! Formatting is skipped entirely when tracing is off, so the seed sweep pays nothing for it. The
//! same seed always produces a byte-identical trace: every line derives from simulated time and
//! from the one seeded PRNG.

use crate::clock::SimTime;
use std::fmt::{self, Write};

/// Upper bound on the trace size, in bytes: a runaway run stops recording rather than filling memory.
pub const TRACE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// An in-memory trace; disabled traces record nothing.
#[derive(Debug, Default)]
pub struct Trace {
    enabled: bool,
    text: String,
    truncated: bool,
}

impl Trace {
    /// A trace that records lines only when `enabled`.
    pub fn new(enabled: bool) -> Trace {
        Trace {
            enabled,
            text: String::new(),
            truncated: false,
        }
    }

    /// Whether lines are recorded; callers may skip building expensive details when not.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Records one line stamped with simulated time and the component that emitted it.
    pub fn line(&mut self, now: SimTime, component: &str, message: fmt::Arguments<'_>) {
        if !self.enabled || self.truncated {
            return;
        }
        if self.text.len() > TRACE_BYTES_MAX {
            self.truncated = true;
            self.text
                .push_str("... trace truncated at TRACE_BYTES_MAX\n");
            return;
        }
        // Writing into a String cannot fail.
        let _ = writeln!(self.text, "{now} {component:<9} {message}");
    }

    /// The recorded text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Takes the recorded text, leaving the trace empty.
    pub fn into_text(self) -> String {
        self.text
    }
}

/// Records a trace line: `trace!(world.trace, now, "operator", "poll {}", n)`.
#[macro_export]
macro_rules! trace {
    ($trace:expr, $now:expr, $component:expr, $($arg:tt)*) => {
        if $trace.enabled() {
            $trace.line($now, $component, format_args!($($arg)*));
        }
    };
}
