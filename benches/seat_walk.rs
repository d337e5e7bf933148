//! A gang's pods taking their seats one by one (performance.md G1, G4): every pod of a
//! NonIndexed Job (no completion index, so no seat is its own) filtered and bound in turn, as
//! kube-scheduler's cycle does, on a generated one-block cluster. The work per pod must not
//! grow with the gang: a search of every seat for an open one, or of every seat for one not
//! bound, costs a gang of n pods n² over its walk.
//!
//! ```text
//! cargo bench --bench seat_walk
//! ```
//!
//! For gangs of 1,000 and 10,000 pods: the first pod's filter (it plans the gang), then each
//! later pod's filter and bind as p50 / p99, and the growth: the mean time of the walk's last
//! tenth over its first tenth (about 1 when the work per pod is flat). Criterion then times
//! whole walks of the smaller gang. Every answer is checked (one node passes, the bind is
//! accepted).
//!
//! Then lone pods' filters, as kube-scheduler's request bodies answered by the route's
//! service, while a gang of 1,000 or 10,000 pods fills every node with seats taken and not
//! bound: each node is turned away with the words saying who holds its room, and the time
//! must not grow with the gang either; then with one name, the node of the gang's last seat;
//! then while the gang's pods are bound one by one, a lone pod after each bind (a bind gives
//! a seat's hold back: who holds which node must not be found anew from every seat, nor the
//! held nodes' names read anew when a bind frees a node). The same on 5,000 nodes with a
//! 10,000-pod gang. Under
//! `cargo test --benches` (a smoke run, unoptimised) one walk of 50 pods, and 20 lone pods
//! beside a 400-pod gang.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use kube_tas::bench::requests::{gang_pod, job_info, lone_pod, request_body};
use kube_tas::bench::stats::Samples;
use kube_tas::extender::Extender;
use kube_tas::extender::http::filter_answer;
use kube_tas::extender::wire::{ExtenderBindingArgs, ExtenderFilterResult};
use kube_tas::keys::{JOB_COMPLETION_INDEX, PODSET_REQUIRED_TOPOLOGY};
use kube_tas::synthetic::{BLOCK_LABEL, SyntheticCluster, job_yaml};
use kube_tas::topology::FeatureGates;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// 200 nodes of 64 cpu and 110 pods in one block: room for 22,000 pods of 100m.
const SHAPE: SyntheticCluster = SyntheticCluster {
    blocks: 1,
    racks_per_block: 10,
    hosts_per_rack: 20,
    cpu_per_node: 64,
    memory_gi: 256,
    gpus_per_node: 0,
    pods_per_node: 110,
    busy_fraction_percent: 0,
    seed: 7,
};
const CPU_MILLIS_PER_POD: u32 = 100;
/// Lone pods timed per case of the held-back report.
const LONE_PODS: usize = 2_000;
/// The held-back report on 5,000 nodes as well (a 10,000-pod gang, two pods a node): there a
/// bind every other pod frees a node.
const WIDE: SyntheticCluster = SyntheticCluster {
    racks_per_block: 250,
    ..SHAPE
};
/// Lone pods timed per case on `WIDE` (each every-name answer turns 5,000 nodes away).
const WIDE_LONE_PODS: usize = 500;

/// A walk's set-up: the extender over the cluster with the gang's Job, the gang's pods as
/// kube-scheduler sends them, and every node's name.
struct Walk {
    extender: Extender,
    pods: Vec<(Pod, ExtenderBindingArgs)>,
    names: Vec<String>,
}

impl Walk {
    fn new(gang: u32) -> Self {
        Self::with_cpu(&SHAPE, gang, CPU_MILLIS_PER_POD)
    }

    /// A gang of `gang` pods of `cpu_millis` each on a cluster of `shape`.
    fn with_cpu(shape: &SyntheticCluster, gang: u32, cpu_millis: u32) -> Self {
        let job = job_yaml(
            "walk",
            gang,
            cpu_millis,
            PODSET_REQUIRED_TOPOLOGY,
            BLOCK_LABEL,
        )
        .replace("completionMode: Indexed", "completionMode: NonIndexed");
        assert!(job.contains("NonIndexed"), "the gang's Job is NonIndexed");
        let yaml = shape.to_yaml() + &job;
        let cluster = kube_tas::cluster::load_text(Path::new("walk.yaml"), &yaml)
            .expect("the generated cluster loads");
        let names = cluster.nodes.iter().map(|n| n.name.clone()).collect();
        let extender =
            Extender::over_cluster(&cluster, FeatureGates::default(), Duration::from_secs(3600));
        let docs: Vec<Value> = serde_saphyr::from_multiple(&job).expect("the Job parses");
        let info = job_info(&docs[0]);
        let pods = (0..info.count)
            .map(|i| {
                let mut pod = gang_pod(&info, i);
                // A NonIndexed Job's pod carries no completion index.
                for key in ["labels", "annotations"] {
                    if let Some(map) = pod["metadata"][key].as_object_mut() {
                        map.remove(JOB_COMPLETION_INDEX);
                    }
                }
                let pod: Pod = serde_json::from_value(pod).expect("a gang pod is a Pod");
                let meta = &pod.metadata;
                let bind = ExtenderBindingArgs {
                    pod_name: meta.name.clone().unwrap_or_default(),
                    pod_namespace: meta.namespace.clone().unwrap_or_default(),
                    pod_uid: meta.uid.clone().unwrap_or_default(),
                    node: String::new(),
                };
                (pod, bind)
            })
            .collect();
        Self {
            extender,
            pods,
            names,
        }
    }

    /// Filters and binds every pod in turn, passing each time taken to `timed` (pod index,
    /// filter, bind).
    fn run(&mut self, mut timed: impl FnMut(usize, Duration, Duration)) {
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        for (i, (pod, bind)) in self.pods.iter_mut().enumerate() {
            let t = Instant::now();
            let answer = self.extender.filter_cached(black_box(pod), &names);
            let filter = t.elapsed();
            bind.node = match answer.node_names.as_deref() {
                Some([seat]) => seat.clone(),
                _ => panic!("pod {i} of the walk gets no single seat: {answer:?}"),
            };
            let t = Instant::now();
            let bound = self.extender.bind(black_box(bind));
            let binding = t.elapsed();
            assert!(bound.error.is_empty(), "pod {i}'s bind: {}", bound.error);
            timed(i, filter, binding);
        }
    }
}

/// Lone pods filtered while a gang's seats fill the cluster, taken and none bound (its pods
/// wait for the rest, as in Permit): every node has room without the holds and none with them,
/// so each answer says who holds it. Timed before the gang is planned too, on the same
/// cluster: the difference is what naming the holders costs.
fn held_back_report(shape: &SyntheticCluster, gang: u32, lone_pods: usize) {
    // The gang's pods fill every node's cpu: as many on each node, at most as many as a node
    // takes.
    let nodes = u32::try_from(shape.node_count()).unwrap();
    assert!(
        gang.is_multiple_of(nodes) && gang / nodes <= shape.pods_per_node,
        "{gang} pods"
    );
    let cpu = shape.cpu_per_node * 1000 * nodes / gang;
    let walk = Walk::with_cpu(shape, gang, cpu);
    let names: Vec<&str> = walk.names.iter().map(String::as_str).collect();
    // kube-scheduler's request bodies, answered by the route's own service (parse, decide,
    // encode), as the server does.
    let every_name = (names.iter())
        .map(|n| Value::from(*n).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let bodies = |names: &str| -> Vec<Bytes> {
        (0..lone_pods)
            .map(|i| request_body(&lone_pod(i), names))
            .collect()
    };
    // Each answer must name `names` nodes: passing when nothing is held, else turned away for
    // the gang's holds.
    let time_one = |body: &Bytes, samples: &mut Samples| {
        let t = Instant::now();
        let answer = filter_answer(&walk.extender, black_box(body));
        samples.push(t.elapsed());
        let answer: ExtenderFilterResult =
            serde_json::from_slice(&answer).expect("the answer is a filter result");
        answer
    };
    let time_lone = |bodies: &[Bytes], names: usize, held: bool| {
        let mut samples = Samples::default();
        for body in bodies {
            let answer = time_one(body, &mut samples);
            let turned_away = (answer.failed_nodes.values())
                .filter(|why| why.contains("held by 1 plan"))
                .count();
            let passing = answer.node_names.as_ref().map_or(0, Vec::len);
            match held {
                true => assert_eq!(turned_away, names, "{answer:?}"),
                false => assert_eq!(passing, names, "{answer:?}"),
            }
        }
        samples.summary()
    };
    let every = bodies(&every_name);
    let free = time_lone(&every, names.len(), false);
    let mut binds = Vec::with_capacity(walk.pods.len());
    for (pod, bind) in &walk.pods {
        let answer = walk.extender.filter_cached(pod, &names);
        let node = match answer.node_names.as_deref() {
            Some([seat]) => seat.clone(),
            _ => panic!("a seat each: {answer:?}"),
        };
        binds.push(ExtenderBindingArgs {
            node,
            ..bind.clone()
        });
    }
    let held = time_lone(&every, names.len(), true);
    // One name, the node of the gang's last seat: the plans holding it are found by a lookup,
    // not a look through the seats before it.
    let last_seat = &binds.last().expect("a gang").node;
    let one = bodies(&Value::from(last_seat.as_str()).to_string());
    let held_one = time_lone(&one, 1, true);
    // The gang's pods bound one by one, a lone pod asking after each: every bind gives a seat's
    // hold back, so the plans holding each node are found anew. A node is turned away while
    // a seat on it is held; once all its seats are bound nothing of kube-tas's holds it (its
    // pods' usage is kube-scheduler's to count), and it passes.
    let mut unbound: HashMap<&str, usize> = HashMap::new();
    for bind in &binds {
        *unbound.entry(bind.node.as_str()).or_default() += 1;
    }
    // Every other bind is followed by the same pod with one name instead, the node of the
    // gang's last seat (bound last, so held throughout).
    let (mut binding, mut binding_one) = (Samples::default(), Samples::default());
    let walked = binds.len().min(every.len()) - 1;
    for (i, bind) in binds[..walked].iter().enumerate() {
        let bound = walk.extender.bind(bind);
        assert!(bound.error.is_empty(), "{}", bound.error);
        *unbound.get_mut(bind.node.as_str()).expect("a seat's node") -= 1;
        if i % 2 == 1 {
            let answer = time_one(&one[i], &mut binding_one);
            assert!(
                answer.failed_nodes[last_seat].contains("held by 1 plan"),
                "{answer:?}"
            );
            continue;
        }
        let answer = time_one(&every[i], &mut binding);
        let passing = answer.node_names.unwrap_or_default();
        let held = unbound.values().filter(|&&n| n > 0).count();
        assert_eq!(answer.failed_nodes.len(), held, "{:?}", answer.failed_nodes);
        assert_eq!(passing.len(), names.len() - held, "{passing:?}");
        assert!(
            passing.iter().all(|n| unbound[n.as_str()] == 0),
            "{passing:?}"
        );
    }
    let (binding, binding_one) = (binding.summary(), binding_one.summary());
    println!(
        "lone pod, {} nodes held by a {gang}-pod gang's seats: filter p50 {:.1} / p99 {:.1} µs; \
         before the gang was planned {:.1} / {:.1} µs; with one name, the node of the gang's \
         last seat, {:.1} / {:.1} µs ({lone_pods} each); a gang pod bound before each, every \
         name {:.1} / {:.1} µs, one name {:.1} / {:.1} µs (binds {walked}, half of them each)",
        shape.node_count(),
        held.p50,
        held.p99,
        free.p50,
        free.p99,
        held_one.p50,
        held_one.p99,
        binding.p50,
        binding.p99,
        binding_one.p50,
        binding_one.p99,
    );
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One walk of `gang` pods, its figures printed.
fn report(gang: u32) {
    let mut walk = Walk::new(gang);
    let (mut filters, mut binds) = (Samples::default(), Samples::default());
    let mut per_pod = Vec::with_capacity(gang as usize);
    let mut planning = Duration::ZERO;
    walk.run(|i, filter, bind| {
        per_pod.push(micros(filter + bind));
        if i == 0 {
            planning = filter;
        } else {
            filters.push(filter);
            binds.push(bind);
        }
    });
    let tenth = (per_pod.len() / 10).max(1);
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let first = mean(&per_pod[1..=tenth.min(per_pod.len() - 1)]);
    let last = mean(&per_pod[per_pod.len() - tenth..]);
    let (f, b) = (filters.summary(), binds.summary());
    println!(
        "{gang}-pod NonIndexed gang, {} nodes: planned in {:.1} ms; filter p50 {:.1} / p99 \
         {:.1} µs, bind p50 {:.1} / p99 {:.1} µs; filter + bind mean {:.1} µs over the first \
         tenth, {:.1} µs over the last (growth {:.2})",
        SHAPE.node_count(),
        planning.as_secs_f64() * 1e3,
        f.p50,
        f.p99,
        b.p50,
        b.p99,
        first,
        last,
        last / first.max(1e-9),
    );
}

fn bench(c: &mut Criterion) {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    if !benchmarking {
        report(50);
        held_back_report(&SHAPE, 400, 20);
        return;
    }
    for gang in [1_000, 10_000] {
        report(gang);
    }
    for gang in [1_000, 10_000] {
        held_back_report(&SHAPE, gang, LONE_PODS);
    }
    held_back_report(&WIDE, 10_000, WIDE_LONE_PODS);
    let mut group = c.benchmark_group("seat_walk");
    group.sample_size(20);
    group.bench_function("1000-pod NonIndexed gang, whole walk", |b| {
        b.iter_batched(
            || Walk::new(1_000),
            // The walk is returned: dropped after the clock stops.
            |mut walk| {
                walk.run(|_, _, _| {});
                walk
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
