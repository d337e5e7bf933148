//! The `kube-tas` binary: parses the command line, sets up logging, hands over to the library.
use std::process::ExitCode;

use clap::Parser;

// glibc's allocator spends most of an extender request in its free-list upkeep when request
// buffers are allocated on one thread and freed on another (axum worker ↔ blocking pool);
// mimalloc's per-thread heaps do not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // One crypto provider for the whole process (ring; aws-lc-rs is never compiled in). An
    // error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = kube_tas::cli::Cli::parse();
    kube_tas::cli::init_logging(&cli);
    kube_tas::cli::run(cli)
}
