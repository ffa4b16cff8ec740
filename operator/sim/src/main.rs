//! `bloodraven-sim`: sweep seeds or replay one (see `bloodraven_sim::cli`).

use bloodraven_sim::cli::{main_with, Args, EXIT_ERROR};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = Args::parse();
    match main_with(&args) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("bloodraven-sim: failed to {error}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
