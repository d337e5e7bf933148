//! Service time of the extender's routes without the network (performance.md G1-G3): a
//! request body in, the encoded answer out, exactly as the `filter` and `prioritize` handlers
//! do it (parse, decide, answer), next to the floor (a service that only parses and answers)
//! on the same bodies.
//!
//! Per cluster size (5,000 nodes with kube-scheduler's sample of 500 names, 15,000 with 750,
//! 50,000 with 2,500), the rows of `kube-tas bench`: filter for a lone pod, for a gang pod
//! whose seat is in the sample and one whose seat is not, prioritize for a gang pod, and
//! filter with every name (`percentageOfNodesToScore: 100`, G2).
//!
//! ```text
//! cargo bench --bench extender
//! KUBE_TAS_BENCH_NODES=5000 cargo bench --bench extender -- --quick   # 5,000 nodes only
//! ```
//!
//! Before criterion runs, each row is timed one request at a time (2,000 times, fewer for
//! large bodies), kube-tas and the floor interleaved, and p50 / p99 and the ratio printed,
//! since the goals are stated as ratios and p99s. Every kube-tas answer of that pass is
//! checked (a gang pod gets exactly its seat, a lone pod some node). Under
//! `cargo test --benches` (a smoke run, unoptimised) a 100-node cluster, each row once.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use kube_tas::bench::fixture::{Fixture, MUTATE};
use kube_tas::bench::requests::sample_size;
use kube_tas::bench::stats::Samples;
use kube_tas::synthetic::SyntheticCluster;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RACKS: u32 = 25;
const HOSTS: u32 = 40;

/// The cluster sizes to measure: `KUBE_TAS_BENCH_NODES` (comma-separated, multiples of
/// 1,000), else 5,000, 15,000 and 50,000.
fn sizes() -> Vec<u32> {
    match std::env::var("KUBE_TAS_BENCH_NODES") {
        Ok(list) => list
            .split(',')
            .map(|n| n.trim().parse().expect("KUBE_TAS_BENCH_NODES: node counts"))
            .collect(),
        Err(_) => vec![5_000, 15_000, 50_000],
    }
}

fn bench(c: &mut Criterion) {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let shapes: Vec<SyntheticCluster> = if benchmarking {
        sizes()
            .into_iter()
            .map(|n| SyntheticCluster {
                blocks: (n / (RACKS * HOSTS)).max(1),
                racks_per_block: RACKS,
                hosts_per_rack: HOSTS,
                cpu_per_node: 32,
                memory_gi: 256,
                ..SyntheticCluster::default()
            })
            .collect()
    } else {
        vec![SyntheticCluster {
            blocks: 1,
            racks_per_block: 5,
            hosts_per_rack: 20,
            cpu_per_node: 32,
            memory_gi: 256,
            ..SyntheticCluster::default()
        }]
    };
    let mut group = c.benchmark_group("extender");
    for shape in shapes {
        let fixture = Fixture::generate(&shape, "").expect("the generated cluster loads");
        let nodes = fixture.names.len();
        let k = sample_size(nodes);
        let rows = fixture.rows(k).expect("the rows build");
        for row in rows.iter().filter(|r| r.path != MUTATE) {
            fixture.services.prepare(row);
            let bytes = row.bodies.iter().map(|(b, _)| b.len()).sum::<usize>() / row.bodies.len();
            let times = match benchmarking {
                false => 1,
                true => (400_000_000 / bytes.max(1)).clamp(200, 2_000),
            };
            let (mut ours, mut floor) = (Samples::default(), Samples::default());
            for i in 0..times {
                let (body, expect) = &row.bodies[i % row.bodies.len()];
                let t = Instant::now();
                let answer = fixture.services.kube_tas(row.path, body);
                ours.push(t.elapsed());
                expect.check(&answer).expect("kube-tas answers right");
                let t = Instant::now();
                let answer = fixture.services.floor(row.floor_path, body);
                floor.push(t.elapsed());
                assert!(!answer.is_empty(), "the floor reads the body");
            }
            let (o, f) = (ours.summary(), floor.summary());
            println!(
                "{nodes} nodes, {}: kube-tas p50 {:.1} / p99 {:.1} µs; floor p50 {:.1} / p99 \
                 {:.1} µs; ratio {:.2} / {:.2} ({times} each)",
                row.call,
                o.p50,
                o.p99,
                f.p50,
                f.p99,
                o.p50 / f.p50.max(1e-9),
                o.p99 / f.p99.max(1e-9)
            );
            group.throughput(Throughput::Bytes(bytes as u64));
            let name = format!("{nodes} nodes, {}", row.call);
            let mut i = 0usize;
            group.bench_function(format!("{name}, kube-tas"), |b| {
                b.iter(|| {
                    i += 1;
                    let body = &row.bodies[i % row.bodies.len()].0;
                    fixture.services.kube_tas(row.path, black_box(body))
                })
            });
            group.bench_function(format!("{name}, floor"), |b| {
                b.iter(|| {
                    i += 1;
                    let body = &row.bodies[i % row.bodies.len()].0;
                    fixture.services.floor(row.floor_path, black_box(body))
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
