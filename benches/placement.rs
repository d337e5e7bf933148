//! Gang placement compute in the pure core (performance.md G6): `place_group` for a gang of
//! 1,000 and 10,000 one-CPU pods on 5,000, 15,000 and 50,000 nodes (3 levels: block, rack,
//! host; 40 hosts per rack, 25 racks per block, 32 CPU per host), with a required rack
//! constraint (1,000 pods) or a preferred block (both sizes), on capacity nobody uses. Also
//! the topology tree build at each size (G7). Each node carries the labels a cloud node has
//! (18: architecture, OS, instance type, region, zone, node pool, hostname, the two topology
//! labels ...), their texts shared across nodes as a cluster state shares them.
//!
//! ```text
//! cargo bench --bench placement
//! cargo bench --bench placement -- --quick      # fewer samples
//! KUBE_TAS_BENCH_BLOCKS=5 cargo bench --bench placement -- --quick   # 5,000 nodes only
//! ```
//!
//! Criterion reports the mean; before it runs, each case is also timed one placement at a
//! time (200 times, 30 at 50,000 nodes) and its p50 / p99 printed, since the goal is stated
//! as a p99. Each case is checked once (every pod placed) before it is timed.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

use kube_tas::synthetic::cloud_node_labels;
use kube_tas::topology::capacity::FreeCapacity;
use kube_tas::topology::labels::{LabelTexts, NodeLabels};
use kube_tas::topology::placement::{GroupRequest, PlacementContext, place_group};
use kube_tas::topology::tree::TopologyTree;
use kube_tas::topology::{FeatureGates, NodeInfo, PodSetSpec, TopologyRequest};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BLOCK: &str = "cloud.provider.com/topology-block";
const RACK: &str = "cloud.provider.com/topology-rack";
const HOST: &str = "kubernetes.io/hostname";
const RACKS: usize = 25;
const HOSTS: usize = 40;

fn nodes(blocks: usize) -> Vec<Arc<NodeInfo>> {
    let mut out = Vec::with_capacity(blocks * RACKS * HOSTS);
    let mut texts = LabelTexts::default();
    for b in 0..blocks {
        for r in 0..RACKS {
            for h in 0..HOSTS {
                let name = format!("gke-cluster-pool-{b:04}-{r:08x}-{h:04}");
                let mut labels = cloud_node_labels(b);
                labels.extend([
                    (BLOCK, format!("b{b}")),
                    (RACK, format!("b{b}-r{r}")),
                    (HOST, name.clone()),
                ]);
                let labels: NodeLabels = labels.into_iter().collect();
                out.push(Arc::new(NodeInfo {
                    labels: labels.interned(&mut texts),
                    allocatable: [
                        ("cpu".to_string(), 32_000),
                        ("memory".to_string(), 256 << 30),
                        ("pods".to_string(), 110),
                    ]
                    .into(),
                    ready: true,
                    name,
                    ..Default::default()
                }));
            }
        }
    }
    out
}

fn levels() -> Vec<String> {
    [BLOCK, RACK, HOST].map(String::from).to_vec()
}

fn gang(count: i32, topology: TopologyRequest) -> PodSetSpec {
    PodSetSpec {
        name: "main".to_string(),
        count,
        requests: [("cpu".to_string(), 1000), ("memory".to_string(), 4 << 30)].into(),
        topology: Some(topology),
        ..Default::default()
    }
}

fn percentiles(what: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let at = |p: usize| samples[(samples.len() * p).div_ceil(100).clamp(1, samples.len()) - 1];
    eprintln!(
        "{what:<44} n={:<4} p50 {:>9.3?}  p99 {:>9.3?}  max {:>9.3?}",
        samples.len(),
        at(50),
        at(99),
        samples[samples.len() - 1]
    );
}

/// The cluster sizes to run, in blocks of 1,000 nodes: `KUBE_TAS_BENCH_BLOCKS` (comma-separated)
/// or 5, 15 and 50.
fn block_counts() -> Vec<usize> {
    match std::env::var("KUBE_TAS_BENCH_BLOCKS") {
        Ok(list) => list
            .split(',')
            .map(|b| {
                b.trim()
                    .parse()
                    .expect("KUBE_TAS_BENCH_BLOCKS: numbers, comma-separated")
            })
            .collect(),
        Err(_) => vec![5, 15, 50],
    }
}

fn bench(c: &mut Criterion) {
    let gates = FeatureGates::default();
    let mut group = c.benchmark_group("placement");
    group.sample_size(10);
    for blocks in block_counts() {
        let nodes = nodes(blocks);
        let size = nodes.len();
        let build = || TopologyTree::build("t", &levels(), &BTreeMap::new(), nodes.iter().cloned());
        let tree = build();
        let free = FreeCapacity::empty(&tree);
        let ctx = PlacementContext {
            tree: &tree,
            free: &free,
            gates: &gates,
            flavor_name: "f",
            flavor_tolerations: &[],
        };
        let cases = [
            (
                1_000,
                TopologyRequest {
                    required: Some(RACK.into()),
                    ..Default::default()
                },
                "required rack",
            ),
            (
                1_000,
                TopologyRequest {
                    preferred: Some(BLOCK.into()),
                    ..Default::default()
                },
                "preferred block",
            ),
            (
                10_000,
                TopologyRequest {
                    preferred: Some(BLOCK.into()),
                    ..Default::default()
                },
                "preferred block",
            ),
        ];
        // Under `cargo test --benches` (no `--bench`: a smoke run, unoptimised) once each.
        let times = match (std::env::args().any(|a| a == "--bench"), size >= 50_000) {
            (false, _) => 1,
            (true, true) => 30,
            (true, false) => 200,
        };
        let mut builds = Vec::with_capacity(times);
        for _ in 0..times {
            let t = Instant::now();
            black_box(build());
            builds.push(t.elapsed());
        }
        percentiles(&format!("tree build, {size} nodes"), builds);
        for (count, topology, how) in cases {
            let spec = gang(count, topology);
            let request = GroupRequest {
                workers: &spec,
                leader: None,
                within: None,
            };
            // The bench measures what it says: every pod placed, once, before timing.
            let placed = place_group(&ctx, &request).expect("the gang fits");
            let pods: i64 = placed.workers.domains.iter().map(|(_, n)| *n).sum();
            assert_eq!(pods, i64::from(count), "{how}: every pod placed");
            let name = format!("{count} pods, {how}, {size} nodes");
            let mut samples = Vec::with_capacity(times);
            for _ in 0..times {
                let t = Instant::now();
                black_box(place_group(&ctx, black_box(&request)).ok());
                samples.push(t.elapsed());
            }
            percentiles(&name, samples);
            group.bench_function(&name, |b| {
                b.iter(|| place_group(&ctx, black_box(&request)).ok())
            });
        }
        group.bench_function(format!("tree build, {size} nodes"), |b| b.iter(build));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
