//! The command line: `kube-tas simulate ...` (and, as they land, `serve` and `certs`).
//!
//! Exit codes: 0 when the command ran (a workload that does not fit is an answer, not an
//! error), 2 on bad input with a message naming the file, the object and the field.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::simulate;
use crate::topology::FeatureGates;

/// Topology-aware gang placement for Kubernetes, speaking Kueue's TAS annotations.
#[derive(Debug, Parser)]
#[command(name = "kube-tas", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Place every pending TAS workload of a cluster given as manifests, and show where each
    /// lands (or why it does not fit, or why the webhook denies it).
    Simulate(SimulateArgs),
}

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Manifest files or folders (multi-document YAML or JSON, as `kubectl get -o yaml` prints).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Kueue feature gates, `NAME=BOOL,...` (Kueue's names and defaults).
    #[arg(long, env = "KUBE_TAS_FEATURE_GATES", default_value = "")]
    pub feature_gates: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Output formats of `simulate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The topology as a tree with free capacity and placed pods, for people.
    Table,
    /// The documented JSON shape, for programs.
    Json,
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Simulate(args) => run_simulate(args),
    }
}

fn run_simulate(args: SimulateArgs) -> ExitCode {
    let gates = match FeatureGates::parse(&args.feature_gates) {
        Ok(g) => g,
        Err(e) => return fail(&format!("--feature-gates: {e}")),
    };
    let started = std::time::Instant::now();
    let cluster = match crate::cluster::load_paths(&args.paths) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    for w in &cluster.warnings {
        eprintln!("warning: {w}");
    }
    let loaded = started.elapsed();
    let report = simulate::run(&cluster, &gates);
    tracing::info!(
        nodes = cluster.nodes.len(),
        workloads = cluster.workloads.len(),
        load_ms = loaded.as_secs_f64() * 1e3,
        simulate_ms = (started.elapsed() - loaded).as_secs_f64() * 1e3,
        "simulation done"
    );
    let text = match args.output {
        Output::Json => match serde_json::to_string_pretty(&report.to_json()) {
            Ok(s) => s + "\n",
            Err(e) => return fail(&format!("cannot encode the report: {e}")),
        },
        Output::Table => report.to_table(),
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(text.as_bytes()).is_err() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("kube-tas: {message}");
    ExitCode::from(2)
}
