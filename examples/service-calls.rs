//! Calls one route's service (kube-tas's or the floor's) in process on the bodies of one
//! `kube-tas bench` row, for an instruction count that machine noise cannot move:
//!
//! ```text
//! cargo build --release --example service-calls
//! valgrind --tool=callgrind --toggle-collect='service_calls::call' \
//!   target/release/examples/service-calls --row 1 --calls 200
//! valgrind --tool=callgrind --toggle-collect='service_calls::call' \
//!   target/release/examples/service-calls --row 1 --calls 200 --floor
//! ```
//!
//! callgrind's `Collected` total divided by `--calls` is the service's instructions per
//! request. The rows are those of `kube-tas bench` for the cluster's default sample: 0 lone
//! filter, 1 gang filter (seat sampled), 2 gang filter (seat not sampled), 3 prioritize,
//! 4 filter with every name, 5 `/mutate`. Each kube-tas answer is checked.

use std::hint::black_box;
use std::process::ExitCode;

use clap::Parser;
use kube_tas::bench::fixture::{Fixture, Services};
use kube_tas::bench::requests::sample_size;
use kube_tas::synthetic::SyntheticCluster;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Call one row's service in process, for callgrind.
#[derive(Debug, Parser)]
#[command(name = "service-calls")]
struct Args {
    /// Blocks of 25 racks × 40 hosts.
    #[arg(long, default_value_t = 5)]
    blocks: u32,
    /// The row, as `kube-tas bench` lists them (0: lone filter ... 5: /mutate).
    #[arg(long, default_value_t = 1)]
    row: usize,
    /// Calls to make.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// Call the floor's service instead of kube-tas's.
    #[arg(long)]
    floor: bool,
}

/// One call; the function callgrind collects in.
#[inline(never)]
fn call(services: &Services, floor: bool, path: &str, body: &[u8]) -> Vec<u8> {
    if floor {
        services.floor(path, body)
    } else {
        services.kube_tas(path, body)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let shape = SyntheticCluster {
        blocks: args.blocks,
        racks_per_block: 25,
        hosts_per_rack: 40,
        cpu_per_node: 32,
        memory_gi: 256,
        ..SyntheticCluster::default()
    };
    let run = || -> anyhow::Result<usize> {
        let fixture = Fixture::generate(&shape, "")?;
        let rows = fixture.rows(sample_size(fixture.names.len()))?;
        let row = rows
            .get(args.row)
            .ok_or_else(|| anyhow::anyhow!("there are {} rows", rows.len()))?;
        eprintln!("service-calls: {} × {}", args.calls, row.call);
        let mut bytes = 0;
        for i in 0..args.calls {
            let (body, expect) = &row.bodies[i % row.bodies.len()];
            let answer = call(&fixture.services, args.floor, row.path, black_box(body));
            if !args.floor {
                expect.check(&answer)?;
            }
            bytes += answer.len();
        }
        Ok(bytes)
    };
    match run() {
        Ok(bytes) => {
            println!("{bytes} bytes answered");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("service-calls: {e:#}");
            ExitCode::FAILURE
        }
    }
}
