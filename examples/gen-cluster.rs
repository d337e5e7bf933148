//! Prints a synthetic cluster plus one pending Job as manifests YAML, for benchmarks and load
//! tests of `kube-tas simulate` / `serve --cluster`:
//!
//! ```text
//! cargo run --release --example gen-cluster -- --blocks 15 --racks 25 --hosts 40 --job-pods 1000 > big.yaml
//! kube-tas simulate big.yaml
//! ```
//!
//! The output is deterministic for a given set of flags (see `--seed`).

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;
use kube_tas::keys::{PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY};
use kube_tas::synthetic::{RACK_LABEL, SyntheticCluster, job_yaml};

/// Generate a synthetic block/rack/host cluster and one Job, as YAML on stdout.
#[derive(Debug, Parser)]
#[command(name = "gen-cluster")]
struct Args {
    /// Number of blocks.
    #[arg(long, default_value_t = 4)]
    blocks: u32,
    /// Racks per block.
    #[arg(long, default_value_t = 8)]
    racks: u32,
    /// Hosts per rack.
    #[arg(long, default_value_t = 16)]
    hosts: u32,
    /// Allocatable CPU cores per node.
    #[arg(long, default_value_t = 8)]
    cpu: u32,
    /// Allocatable memory per node, in GiB.
    #[arg(long, default_value_t = 32)]
    memory_gi: u32,
    /// Allocatable nvidia.com/gpu per node (0: none).
    #[arg(long, default_value_t = 0)]
    gpus: u32,
    /// Allocatable pods per node.
    #[arg(long, default_value_t = 110)]
    pods: u32,
    /// Share of nodes (percent) already running a non-TAS pod that uses some CPU.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100))]
    busy_percent: u32,
    /// Seed for node ids and busy pods.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pods of the pending Job (0: no Job).
    #[arg(long, default_value_t = 1000)]
    job_pods: u32,
    /// CPU per pod of the Job, in millicores.
    #[arg(long, default_value_t = 1000)]
    job_cpu_millis: u32,
    /// Name of the Job.
    #[arg(long, default_value = "big-job")]
    job_name: String,
    /// Topology level the Job asks for (preferred: climbs to the block when a rack is too
    /// small).
    #[arg(long, default_value = RACK_LABEL)]
    level: String,
    /// Make the level required instead of preferred.
    #[arg(long)]
    required: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cluster = SyntheticCluster {
        blocks: args.blocks,
        racks_per_block: args.racks,
        hosts_per_rack: args.hosts,
        cpu_per_node: args.cpu,
        memory_gi: args.memory_gi,
        gpus_per_node: args.gpus,
        pods_per_node: args.pods,
        busy_fraction_percent: args.busy_percent,
        seed: args.seed,
    };
    let mut yaml = cluster.to_yaml();
    if args.job_pods > 0 {
        let key = if args.required {
            PODSET_REQUIRED_TOPOLOGY
        } else {
            PODSET_PREFERRED_TOPOLOGY
        };
        yaml.push_str(&job_yaml(
            &args.job_name,
            args.job_pods,
            args.job_cpu_millis,
            key,
            &args.level,
        ));
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(yaml.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen-cluster: writing to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
