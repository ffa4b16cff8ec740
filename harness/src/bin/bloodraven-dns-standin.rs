//! `bloodraven-dns-standin`: the in-cluster stand-in for external-dns; everything lives in
//! [`bloodraven_harness::dns_standin`].

fn main() -> std::process::ExitCode {
    bloodraven_harness::dns_standin::cli::main()
}
