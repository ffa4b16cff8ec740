//! `localkube-mariadb-entrypoint [ARGS]`: the `mariadb:*` image's entrypoint on localkube.
//! See `localkube::runtime::mariadb`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match localkube::runtime::mariadb::entrypoint_main(args) {
        Ok(never) => match never {},
        Err(err) => {
            eprintln!("[Entrypoint]: error: failed to {err}");
            ExitCode::from(1)
        }
    }
}
