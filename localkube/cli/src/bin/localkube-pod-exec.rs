//! `localkube-pod-exec SPEC.json`: enters a pod's namespaces and execs a container's program.
//! Spawned by the localkube node agent; see `localkube::runtime::exec`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(spec_path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: localkube-pod-exec SPEC.json");
        return ExitCode::from(2);
    };
    match localkube::runtime::exec::helper_main(&spec_path) {
        Ok(never) => match never {},
        Err(err) => {
            eprintln!("localkube-pod-exec: failed to {err}");
            // 127: as a shell reports a command it could not execute.
            ExitCode::from(127)
        }
    }
}
