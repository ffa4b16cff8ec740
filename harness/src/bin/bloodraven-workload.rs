//! `bloodraven-workload`: the harness's in-cluster workload (serve, ctl, follow, dns, http);
//! everything lives in [`bloodraven_harness::incluster`].

fn main() -> std::process::ExitCode {
    bloodraven_harness::incluster::cli::main()
}
