//! `bloodraven-harness`: every scenario of `scenarios/` as a libtest-mimic trial `sNNN_slug`.
//! `cargo run -p bloodraven-harness -- s038`, `-- --list`, `-- --cluster kind --reuse`.

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // mysql_async logs every refused workload statement at ERROR: those are recorded
            // in the history already.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,mysql_async=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    bloodraven_harness::runner::trials::main_with(false)
}
