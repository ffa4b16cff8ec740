//! The crate's error type. Messages are lowercase fragments that read after "failed to".

use std::fmt;
use std::path::PathBuf;

/// A problem in one scenario file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The field path (`steps[3].expect.within`), empty for the whole file.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.field, self.message)
        }
    }
}

/// Every error of the harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a file or directory.
    #[error("read {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Writing a file or directory.
    #[error("write {path}: {source}")]
    Write {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// One or more scenario files are invalid.
    #[error("validate the scenario catalogue:\n{}", render_list(.0))]
    Scenarios(Vec<ScenarioError>),
    /// A history line is not a valid event.
    #[error("parse {path} line {line}: {source}")]
    HistoryLine {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The cause.
        source: serde_json::Error,
    },
    /// Encoding JSON.
    #[error("encode {what} as JSON: {source}")]
    Json {
        /// What was encoded.
        what: &'static str,
        /// The cause.
        source: serde_json::Error,
    },
    /// Rendering JUnit XML.
    #[error("render junit.xml: {0}")]
    Junit(#[from] quick_junit::SerializeError),
    /// An action against a live cluster (or its tools) failed.
    #[error("{action}: {reason}")]
    Cluster {
        /// What was attempted ("apply Deployment counter").
        action: String,
        /// Why it failed.
        reason: String,
    },
    /// The in-cluster workload (`bloodraven-workload`: its daemon, control socket, run logs,
    /// one-shot helpers) failed.
    #[error("{action}: {reason}")]
    Workload {
        /// What was attempted ("start run s020-1").
        action: String,
        /// Why it failed.
        reason: String,
    },
    /// No backend can provide a cluster.
    #[error("find a cluster: the `{kind}` backend is not built into bloodraven-harness yet, so no scenario can run (--list needs no cluster)")]
    BackendUnavailable {
        /// The `--cluster` value.
        kind: String,
    },
}

fn render_list(errors: &[ScenarioError]) -> String {
    errors
        .iter()
        .map(|error| format!("  {error}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
