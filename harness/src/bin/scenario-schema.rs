//! `scenario-schema`: writes `scenarios/schema.json` from the scenario model (or to the path
//! given as the argument). `just scenario-schema` runs it.

use std::path::PathBuf;
use std::process::ExitCode;

use bloodraven_harness::scenario::schema::{render, SCHEMA_FILE};

fn main() -> ExitCode {
    let path = std::env::args_os().nth(1).map_or_else(
        || bloodraven_harness::backend::workspace_root().join(SCHEMA_FILE),
        PathBuf::from,
    );
    if let Err(error) = std::fs::write(&path, render()) {
        eprintln!(
            "scenario-schema: failed to write {}: {error}",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}
