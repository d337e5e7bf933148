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
//! request. With `--router` each call goes through the whole router instead (`serve`'s
//! layers: timeout, body limit, metrics, the route's tracing span), on a current-thread
//! runtime without sockets; `--log LEVEL` installs `serve`'s log subscriber at that level
//! first (`serve` runs at `info`). The rows are those of `kube-tas bench` for the cluster's
//! default sample: 0 lone filter, 1 gang filter (seat sampled), 2 gang filter (seat not
//! sampled), 3 prioritize, 4 filter with every name, 5 `/mutate`, 6 prioritize for a lone pod
//! (its filter made first, outside what is collected), 7 lone filter again, whose `--floor`
//! passes every name. Each kube-tas answer is checked. `--prioritize` sends the row's bodies
//! to `prioritize` instead (row 0: a lone pod's `prioritize` with no filter before it).
//!
//! Between two requests a server's caches are not warm: the kernel's network stack, hyper and
//! (on one machine) the client run in between. `--evict-kib N` writes over N KiB before every
//! call (not collected), so that what a request brings back into the caches shows: under
//! callgrind with `--cache-sim=yes` as misses, and with `--timed` as each call's wall time
//! (p50 and p99 printed; a noisy figure, compare kube-tas and `--floor` in one session).

use std::hint::black_box;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use kube_tas::bench::fixture::{Fixture, PRIORITIZE, Services};
use kube_tas::bench::requests::sample_size;
use kube_tas::extender::wire::HostPriority;
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
    /// Call through the whole router (layers and spans included), not the bare service.
    #[arg(long)]
    router: bool,
    /// Install a log subscriber at this level first (as `serve` does at `info`).
    #[arg(long)]
    log: Option<String>,
    /// Write over this many KiB before every call, as what runs between two requests would.
    #[arg(long, default_value_t = 0)]
    evict_kib: usize,
    /// Time each call and print the p50 and p99 in µs.
    #[arg(long)]
    timed: bool,
    /// Send the row's bodies to `prioritize` instead of their own route (each answer checked
    /// to be a score array only); with row 0, `prioritize` for a lone pod.
    #[arg(long)]
    prioritize: bool,
}

/// What a call goes through.
enum Target<'a> {
    /// The route's service function.
    Service(&'a Services),
    /// The whole router, on a current-thread runtime.
    Router(tokio::runtime::Runtime, axum::Router),
}

/// One call; the function callgrind collects in.
#[inline(never)]
fn call(target: &Target<'_>, floor: bool, path: &str, body: &[u8]) -> Vec<u8> {
    match target {
        Target::Service(services) if floor => services.floor(path, body),
        Target::Service(services) => services.kube_tas(path, body),
        Target::Router(runtime, router) => runtime.block_on(async {
            use http_body_util::BodyExt as _;
            use tower::ServiceExt as _;
            let request = axum::http::Request::post(path)
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body.to_vec()))
                .expect("a request from a path and a body");
            match router.clone().oneshot(request).await {
                Ok(response) => match response.into_body().collect().await {
                    Ok(collected) => collected.to_bytes().to_vec(),
                    Err(_) => Vec::new(),
                },
                Err(never) => match never {},
            }
        }),
    }
}

/// Writes over `scratch` (a different byte each call, so that it is not optimised away).
#[inline(never)]
fn evict(scratch: &mut [u8], call: usize) {
    for line in scratch.chunks_mut(64) {
        line[0] = line[0].wrapping_add(call as u8 | 1);
    }
    black_box(scratch);
}

/// The router a `--router` call goes through: `serve`'s main router, or the floor's.
fn router(services: &Services, floor: bool) -> axum::Router {
    if floor {
        kube_tas::bench::floor::router(services.floor_names.iter().cloned())
    } else {
        kube_tas::server::main_router(services.extender.clone())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(level) = &args.log {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(level))
            .with_writer(std::io::stderr)
            .init();
    }
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
        let target = if args.router {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let router = router(&fixture.services, args.floor);
            Target::Router(runtime, router)
        } else {
            Target::Service(&fixture.services)
        };
        fixture.services.prepare(row);
        let path = if args.prioritize {
            PRIORITIZE
        } else if args.floor {
            row.floor_path
        } else {
            row.path
        };
        let mut bytes = 0;
        let mut scratch = vec![0u8; args.evict_kib * 1024];
        let mut took = Vec::with_capacity(args.calls);
        for i in 0..args.calls {
            let (body, expect) = &row.bodies[i % row.bodies.len()];
            evict(&mut scratch, i);
            let started = std::time::Instant::now();
            let answer = call(&target, args.floor, path, black_box(body));
            took.push(started.elapsed());
            if args.prioritize && path != row.path {
                serde_json::from_slice::<Vec<HostPriority>>(&answer)
                    .context("prioritize answers a score array")?;
            } else if !args.floor {
                expect.check(&answer)?;
            }
            bytes += answer.len();
        }
        if args.timed {
            took.sort_unstable();
            let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
            println!(
                "p50 {:.1} µs, p99 {:.1} µs over {} calls",
                at(0.5).as_secs_f64() * 1e6,
                at(0.99).as_secs_f64() * 1e6,
                took.len()
            );
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
