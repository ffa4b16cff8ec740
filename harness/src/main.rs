//! `bloodraven-harness`: every scenario of `scenarios/` as a libtest-mimic trial `sNNN_slug`.
//! `cargo run -p bloodraven-harness -- s038`, `-- --list`, `-- --cluster kind --reuse`.

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    bloodraven_harness::runner::trials::main_with(false)
}
