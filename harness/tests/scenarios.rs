//! The scenario catalogue as a `harness = false` test target, so `cargo nextest run` and
//! `cargo test` list every `sNNN_slug` trial. Without `--cluster`/`BLOODRAVEN_CLUSTER`
//! the trials are ignored (no cluster is touched); with `--ignored` they run and, while no
//! backend is built in, fail with one sentence.

fn main() -> std::process::ExitCode {
    bloodraven_harness::runner::trials::main_with(true)
}
