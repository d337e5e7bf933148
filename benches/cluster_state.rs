//! What the watch path costs the cluster state (performance.md G7): an incremental node update
//! (allocatable only: no tree rebuild), a pod event (a bound pod's usage recorded, then given
//! back), the same pod event from the API object (requests parsed), and a full tree rebuild
//! after a topology-relevant node change (a node moved to another rack) and after a node
//! joins, and for Workload-API PodGroups the hostname tree's rebuild and the read of every node
//! with its usage and a gang's placement on them, on idle nodes and again with four pods on
//! every node ("busy"), the first tree build after start-up with the flavor known before
//! the nodes and after them (and again with hostnames of a cloud's node pools, which share
//! long prefixes), and the build after a change of the flavor on a running state
//! (every node read again), at 15,000 nodes (15 blocks × 25 racks × 40 hosts;
//! `KUBE_TAS_BENCH_BLOCKS` sets the number of blocks of 1,000 nodes). Each node carries a cloud
//! node's labels besides the three topology labels (18 in all).
//!
//! ```text
//! cargo bench --bench cluster_state
//! KUBE_TAS_BENCH_BLOCKS=50 cargo bench --bench cluster_state    # 50,000 nodes
//! ```
//!
//! Criterion reports the mean per operation; before it runs, each operation is also timed one
//! by one (100,000 times, 200 for a rebuild or a flavor change, 100 for a start-up) and its
//! p50 / p99 / p99.9 printed, since the goal is stated as a p99.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

use kube_tas::cluster::group::GroupKey;
use kube_tas::cluster::live::{WatchedKind, WatchedPod};
use kube_tas::cluster::state::ClusterState;
use kube_tas::cluster::{BoundPod, ResourceFlavor, Topology, WorkloadKind};
use kube_tas::synthetic::cloud_node_labels;
use kube_tas::topology::{NodeInfo, podgroup};

const BLOCK: &str = "cloud.provider.com/topology-block";
const RACK: &str = "cloud.provider.com/topology-rack";
const HOST: &str = "kubernetes.io/hostname";

// The binary's allocator, so the numbers are what `serve` pays.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Blocks of 1,000 nodes: `KUBE_TAS_BENCH_BLOCKS`, or 15.
fn blocks() -> usize {
    match std::env::var("KUBE_TAS_BENCH_BLOCKS") {
        Ok(b) => b.trim().parse().expect("KUBE_TAS_BENCH_BLOCKS: a number"),
        Err(_) => 15,
    }
}
const RACKS: usize = 25;
const HOSTS: usize = 40;

fn node(b: usize, r: usize, h: usize, cpu: i64) -> NodeInfo {
    named_node(format!("n-{b}-{r}-{h}"), b, r, cpu)
}

/// A hostname of the shape a cloud gives a node pool's nodes: the cluster and pool names, the
/// pool's instance group hash and a random-looking suffix of four characters, so that the
/// hostnames of a block share their first 43 bytes and those of all blocks their first 31
/// (short names, as [`node`] gives, part within 16), and their order is not the order the
/// nodes came in.
fn pool_hostname(b: usize, r: usize, h: usize) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let group = (b as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    // A multiplier prime to 36 permutes the 36^4 suffixes: each node its own.
    let node = ((b * RACKS + r) * HOSTS + h) as u64;
    let mut mixed = node * 1_000_003 % 36u64.pow(4);
    let suffix: String = (0..4)
        .map(|_| {
            let digit = DIGITS[(mixed % 36) as usize] as char;
            mixed /= 36;
            digit
        })
        .collect();
    format!("gke-ml-train-cluster-a3-pool-{b:04}-{group:08x}-{suffix}")
}

fn named_node(name: String, b: usize, r: usize, cpu: i64) -> NodeInfo {
    NodeInfo {
        labels: cloud_node_labels(b)
            .into_iter()
            .chain([
                (BLOCK, format!("b{b}")),
                (RACK, format!("b{b}-r{r}")),
                (HOST, name.clone()),
            ])
            .collect(),
        allocatable: [
            ("cpu".to_string(), cpu * 1000),
            ("memory".to_string(), 256 << 30),
            ("pods".to_string(), 110),
        ]
        .into(),
        ready: true,
        name,
        ..Default::default()
    }
}

fn all_nodes() -> Vec<NodeInfo> {
    nodes_by(|b, r, h| node(b, r, h, 64))
}

/// [`all_nodes`] named by [`pool_hostname`].
fn pool_nodes() -> Vec<NodeInfo> {
    nodes_by(|b, r, h| named_node(pool_hostname(b, r, h), b, r, 64))
}

/// Every block's racks' hosts, each made by `make(block, rack, host)`.
fn nodes_by(make: impl Fn(usize, usize, usize) -> NodeInfo) -> Vec<NodeInfo> {
    let mut nodes = Vec::with_capacity(blocks() * RACKS * HOSTS);
    for b in 0..blocks() {
        for r in 0..RACKS {
            for h in 0..HOSTS {
                nodes.push(make(b, r, h));
            }
        }
    }
    nodes
}

/// The Topology "t" (block, rack, hostname) and the flavor "f" naming it.
fn apply_flavor(state: &mut ClusterState) {
    apply_flavor_with(state, serde_json::json!({}));
}

/// [`apply_flavor`] with the flavor's `nodeLabels`.
fn apply_flavor_with(state: &mut ClusterState, node_labels: serde_json::Value) {
    let topology: Topology = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}
    }))
    .expect("topology");
    let flavor: ResourceFlavor = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "f"}, "spec": {"topologyName": "t", "nodeLabels": node_labels}
    }))
    .expect("flavor");
    state.apply_topology("t", topology);
    state.apply_resource_flavor("f", flavor);
}

/// A state fed `nodes` and the flavor (before the nodes or after them): how long applying
/// the nodes took, and the flavor's first tree build after.
fn start_up(nodes: &[NodeInfo], flavor_first: bool) -> (ClusterState, Duration, Duration) {
    let mut state = ClusterState::new();
    if flavor_first {
        apply_flavor(&mut state);
    }
    let copies = nodes.to_vec();
    let t = Instant::now();
    for n in copies {
        state.apply_node(n);
    }
    let applied = t.elapsed();
    if !flavor_first {
        apply_flavor(&mut state);
    }
    let t = Instant::now();
    let tree = state.flavor("f").expect("tree");
    let built = t.elapsed();
    assert_eq!(tree.tree.nodes.len(), nodes.len());
    (state, applied, built)
}

/// The first tree build after start-up, with the flavor known before the nodes came (each
/// node read at its event, as at a live start-up where the small Kueue lists come first) and
/// after them (every node read at the build, as after a Topology or flavor change), and what
/// applying the nodes cost per node in each case.
fn first_builds(nodes: &[NodeInfo], named: &str) {
    for (flavor_first, when) in [(true, "flavor first"), (false, "flavor last")] {
        let when = format!("{when}{named}");
        let (mut applied, mut built) = (Vec::new(), Vec::new());
        for _ in 0..times(100) {
            let (_, a, b) = start_up(nodes, flavor_first);
            applied.push(a / nodes.len() as u32);
            built.push(b);
        }
        percentiles(&format!("node applied at start-up, {when}"), applied);
        percentiles(&format!("first tree build, {when}"), built);
    }
}

/// The flavor's tree built again after each change of the flavor on a running state (its node
/// labels alternate between two that every node carries, so every node is read again and
/// every node is a member).
fn flavor_changes(state: &mut ClusterState, nodes: usize) {
    let mut builds = Vec::with_capacity(200);
    for i in 0..times(200) {
        let node_labels = match i % 2 {
            0 => serde_json::json!({"kubernetes.io/os": "linux"}),
            _ => serde_json::json!({"kubernetes.io/arch": "amd64"}),
        };
        apply_flavor_with(state, node_labels);
        let t = Instant::now();
        let tree = state.flavor("f").expect("tree");
        builds.push(t.elapsed());
        assert_eq!(tree.tree.nodes.len(), nodes);
    }
    percentiles("tree build, flavor changed", builds);
    apply_flavor(state);
}

fn bound_pod(i: usize, node: &str) -> BoundPod {
    BoundPod {
        namespace: "default".into(),
        name: format!("p-{i}"),
        uid: Some(format!("uid-{i}")),
        node_name: node.into(),
        requests: [("cpu".to_string(), 1000), ("memory".to_string(), 1 << 30)].into(),
        scoring: [("cpu".to_string(), 1000), ("memory".to_string(), 1 << 30)].into(),
        tas: true,
        owner_job: Some("train".into()),
        group: GroupKey {
            kind: WorkloadKind::Job,
            namespace: "default".into(),
            name: "train".into(),
        },
        pod_set: Default::default(),
        index: Default::default(),
        terminating: false,
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        incarnation: Default::default(),
    }
}

/// A bound Running pod of a Job as the API server sends it (managedFields aside).
fn pod_object(node: &str) -> WatchedPod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "train-7-abcde", "namespace": "default", "uid": "uid-obj",
            "labels": {"batch.kubernetes.io/job-completion-index": "7", "job-name": "train"},
            "annotations": {"batch.kubernetes.io/job-completion-index": "7",
                "kueue.x-k8s.io/podset-required-topology": RACK},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                "uid": "job-uid", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "w", "image": "pause",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("pod")
}

fn percentiles(what: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    println!(
        "{what:<32} n={:<7} p50 {:>9.3?}  p99 {:>9.3?}  p99.9 {:>9.3?}  max {:>9.3?}",
        samples.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        samples[samples.len() - 1]
    );
}

/// Under `cargo bench` (criterion's `--bench`) the full counts; under `cargo test --benches`
/// (a smoke run, unoptimised) a few, so that the code still runs.
fn times(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") {
        full
    } else {
        full.min(20)
    }
}

fn one_by_one(state: &mut ClusterState, nodes: &[NodeInfo]) {
    let n = nodes.len();
    let mut node_updates = Vec::with_capacity(100_000);
    for i in 0..times(100_000) {
        let mut up = nodes[(i * 7919) % n].clone();
        up.allocatable.insert("cpu".into(), 64_000 + (i % 2) as i64);
        let t = Instant::now();
        state.apply_node(up);
        node_updates.push(t.elapsed());
    }
    percentiles("node update (capacity only)", node_updates);
    let mut pod_events = Vec::with_capacity(200_000);
    for i in 0..times(100_000) {
        let pod = bound_pod(i, &nodes[(i * 104_729) % n].name);
        let uid = pod.uid.clone().unwrap_or_default();
        let t = Instant::now();
        state.apply_bound_pod(&pod);
        pod_events.push(t.elapsed());
        let t = Instant::now();
        state.remove_pod(&uid);
        pod_events.push(t.elapsed());
    }
    percentiles("pod event (record / give back)", pod_events);
    let mut watched = Vec::with_capacity(100_000);
    for i in 0..times(100_000) {
        let pod = pod_object(&nodes[(i * 104_729) % n].name);
        let t = Instant::now();
        WatchedPod::apply(state, &pod);
        watched.push(t.elapsed());
    }
    percentiles("pod watch event (from the object)", watched);
    let mut rebuilds = Vec::with_capacity(200);
    let blocks = blocks();
    for i in 0..times(200) {
        let b = i % blocks;
        // Off its rack in every sample (rack 0 is where it starts).
        let mut moved = nodes[b * RACKS * HOSTS].clone();
        moved
            .labels
            .insert(RACK, &format!("b{b}-r{}", (i / blocks + 1) % RACKS));
        let t = Instant::now();
        state.apply_node(moved);
        let tree = state.flavor("f");
        rebuilds.push(t.elapsed());
        assert!(tree.is_some());
    }
    percentiles(&format!("tree rebuild, {n} nodes"), rebuilds);
    // A node joins: a new name and hostname, ranked among the others.
    let mut joins = Vec::with_capacity(200);
    for i in 0..times(200) {
        let mut joined = node(i % blocks, i % RACKS, HOSTS + i, 64);
        joined.name = format!("joined-{i}");
        joined.labels.insert(HOST, &joined.name.clone());
        let t = Instant::now();
        state.apply_node(joined);
        let tree = state.flavor("f");
        joins.push(t.elapsed());
        assert!(tree.is_some_and(|f| f.tree.leaf_of_node(&format!("joined-{i}")).is_some()));
    }
    percentiles("tree rebuild, node joined", joins);
    // Workload-API PodGroups: the one-level hostname tree their seats sit in, rebuilt after a
    // node moves, and every node with its usage as the group placement reads them.
    // Built once first, so every sample is a rebuild; each moves a node off its rack.
    state.hostname_topology();
    let mut seat_rebuilds = Vec::with_capacity(200);
    for i in 0..times(200) {
        let b = i % blocks;
        let mut moved = nodes[b * RACKS * HOSTS + 1].clone();
        moved
            .labels
            .insert(RACK, &format!("b{b}-r{}", (i / blocks + 1) % RACKS));
        state.apply_node(moved);
        let t = Instant::now();
        let seats = state.hostname_topology();
        seat_rebuilds.push(t.elapsed());
        assert!(seats.tree.nodes.len() >= n);
    }
    percentiles("hostname tree rebuild", seat_rebuilds);
    group_placement(state, "");
    // The same on a busy cluster: four one-CPU pods on every node.
    for (i, node) in nodes.iter().enumerate() {
        for k in 0..4 {
            state.apply_bound_pod(&bound_pod(1_000_000 + 4 * i + k, &node.name));
        }
    }
    group_placement(state, ", busy");
}

/// The group placement's node read and a gang of 8 by rack placed on what it read.
fn group_placement(state: &ClusterState, busy: &str) {
    let n = state.nodes().count();
    let mut usage_reads = Vec::with_capacity(200);
    for _ in 0..times(200) {
        let t = Instant::now();
        let read = state.scheduling_usage(|_| None);
        usage_reads.push(t.elapsed());
        assert!(read.0.len() >= n);
    }
    percentiles(&format!("group node read{busy}"), usage_reads);
    // A gang of 8 one-CPU pods that must share a rack, placed on them.
    let (read, usage) = state.scheduling_usage(|_| None);
    let gang = [rack_gang(8)];
    let mut placements = Vec::with_capacity(200);
    for _ in 0..times(200) {
        let t = Instant::now();
        let decision = podgroup::place(&read, &usage, &gang, "g");
        placements.push(t.elapsed());
        assert!(decision.is_ok_and(|d| d.fits));
    }
    percentiles(&format!("gang of 8 by rack placed{busy}"), placements);
}

/// A PodGroup `g` of `pods` one-CPU pods, all or none, in one rack.
fn rack_gang(pods: usize) -> podgroup::Group {
    let requests: BTreeMap<String, i64> = [("cpu".to_string(), 1000)].into();
    podgroup::Group {
        namespace: "default".into(),
        name: "g".into(),
        parent: None,
        created: 0,
        key: Some(RACK.into()),
        kind: podgroup::GroupKind::PodGroup {
            policy: podgroup::PodGroupPolicy::Gang {
                min_count: pods as u32,
            },
            pending: (0..pods)
                .map(|i| podgroup::PendingPod {
                    name: format!("g-{i}"),
                    requests: requests.clone(),
                    non_zero: requests.clone(),
                    tolerations: Vec::new(),
                    node_selector: BTreeMap::new(),
                    affinity: None,
                })
                .collect(),
            bound: Vec::new(),
        },
    }
}

fn bench(c: &mut Criterion) {
    let nodes = all_nodes();
    first_builds(&nodes, "");
    first_builds(&pool_nodes(), ", pool hostnames");
    let (mut state, _, _) = start_up(&nodes, false);
    flavor_changes(&mut state, nodes.len());
    one_by_one(&mut state, &nodes);
    let n = nodes.len();
    let mut group = c.benchmark_group("cluster_state");
    let mut i = 0usize;
    group.bench_function("node_update_capacity_only", |b| {
        b.iter(|| {
            i += 1;
            let mut up = nodes[(i * 7919) % n].clone();
            up.allocatable.insert("cpu".into(), 64_000 + (i % 2) as i64);
            black_box(state.apply_node(up))
        })
    });
    group.bench_function("pod_record_and_give_back", |b| {
        b.iter(|| {
            i += 1;
            let pod = bound_pod(i, &nodes[(i * 104_729) % n].name);
            state.apply_bound_pod(&pod);
            black_box(state.remove_pod(pod.uid.as_deref().unwrap_or_default()))
        })
    });
    let pod = pod_object(&nodes[n / 2].name);
    group.bench_function("pod_watch_event_from_object", |b| {
        b.iter(|| WatchedPod::apply(&mut state, black_box(&pod)))
    });
    group.sample_size(20);
    group.bench_function(format!("tree_rebuild_{n}_nodes"), |b| {
        b.iter(|| {
            i += 1;
            let mut moved = nodes[0].clone();
            moved.labels.insert(RACK, &format!("b0-r{}", i % RACKS));
            state.apply_node(moved);
            black_box(state.flavor("f"))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
