//! Writes the generated CRDs to `fixtures/crds/` (or the directory given as the argument).

use std::{path::PathBuf, process::ExitCode};

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/crds"));
    let files = match bloodraven_api::crds::render_all() {
        Ok(files) => files,
        Err(error) => {
            eprintln!("crdgen: failed to render CRDs: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!("crdgen: failed to create {}: {error}", dir.display());
        return ExitCode::FAILURE;
    }
    for (name, text) in files {
        let path = dir.join(name);
        if let Err(error) = std::fs::write(&path, text) {
            eprintln!("crdgen: failed to write {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
