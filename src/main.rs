//! The `kube-tas` binary: parses the command line, sets up logging, hands over to the library.
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = kube_tas::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    kube_tas::cli::run(cli)
}
