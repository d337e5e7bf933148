//! Property tests for the placement engine: random small clusters (block → rack → hostname),
//! random existing usage and random requests, checked against invariants that every placement
//! must keep whatever the tie-breakers choose (tas-semantics.md §1.5 and §3).
//!
//! The expected values are computed from the generated cluster itself, never from the engine's
//! tree or counters, so a bug in counting shows up as a disagreement.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::capacity::FreeCapacity;
use super::fixtures::{
    BLOCK, HOST, NodeBuilder, RACK, podset, preferred, required, sliced, unconstrained,
};
use super::gates::FeatureGates;
use super::node::NodeInfo;
use super::placement::{GroupRequest, PlacementContext, place_group};
use super::request::PodSetSpec;
use super::resources::ResourceList;
use super::tree::{DomainIdx, TopologyTree};

/// The topology levels, outermost first.
const LEVELS: [&str; 3] = [BLOCK, RACK, HOST];
/// Most hosts a generated cluster can have (3 blocks × 3 racks × 4 hosts).
const MAX_HOSTS: usize = 36;

/// One generated host.
#[derive(Debug, Clone)]
struct Host {
    /// Allocatable CPU, whole cores.
    cpu: i64,
    /// Allocatable pod slots.
    pods: i64,
    /// Ready (NotReady nodes are not in the tree at all).
    ready: bool,
    /// Existing pods on the node: one CPU request (millicores) each; each also takes a slot.
    usage: Vec<i64>,
}

impl Host {
    fn free_cpu(&self) -> i64 {
        self.cpu * 1000 - self.usage.iter().sum::<i64>()
    }

    fn free_pods(&self) -> i64 {
        self.pods - self.usage.len() as i64
    }

    /// Pods of `cpu` cores (plus one slot each) that fit: Kueue's `CountIn`, 0 when NotReady.
    fn fits(&self, cpu: i64) -> i64 {
        if !self.ready {
            return 0;
        }
        (self.free_cpu() / (cpu * 1000))
            .min(self.free_pods())
            .max(0)
    }
}

/// Blocks → racks → hosts.
type Cluster = Vec<Vec<Vec<Host>>>;

/// A host with its position: (block, rack, host) indexes.
fn hosts(cluster: &Cluster) -> impl Iterator<Item = ([usize; 3], &Host)> {
    cluster.iter().enumerate().flat_map(|(b, racks)| {
        racks
            .iter()
            .enumerate()
            .flat_map(move |(r, hs)| hs.iter().enumerate().map(move |(x, h)| ([b, r, x], h)))
    })
}

fn host_name(pos: [usize; 3]) -> String {
    format!("x{}{}{}", pos[0], pos[1], pos[2])
}

/// The nodes, in generation order.
fn nodes(cluster: &Cluster) -> Vec<NodeInfo> {
    hosts(cluster)
        .map(|(pos, h)| {
            let b = NodeBuilder::new(&host_name(pos))
                .block(&format!("b{}", pos[0]))
                .rack(&format!("r{}", pos[1]))
                .cpu(h.cpu)
                .resource("pods", h.pods);
            if h.ready { b } else { b.not_ready() }.build()
        })
        .collect()
}

/// Existing pods as (node name, requests), for [`FreeCapacity::with_pod_usage`].
fn usage(cluster: &Cluster) -> Vec<(String, ResourceList)> {
    hosts(cluster)
        .flat_map(|(pos, h)| {
            h.usage
                .iter()
                .map(move |&m| (host_name(pos), ResourceList::from([("cpu".to_string(), m)])))
        })
        .collect()
}

/// The host a name stands for.
fn host_by_name<'c>(cluster: &'c Cluster, name: &str) -> Option<([usize; 3], &'c Host)> {
    hosts(cluster).find(|(pos, _)| host_name(*pos) == name)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Required,
    Preferred,
    Unconstrained,
}

/// A generated request.
#[derive(Debug, Clone)]
struct Request {
    kind: Kind,
    /// Main level index (ignored for unconstrained).
    level: usize,
    /// Optional slice layer: (level index, size).
    slice: Option<(usize, i32)>,
    count: i32,
    /// Whole cores per pod.
    cpu: i64,
    /// TASBalancedPlacement on (only matters for preferred).
    balanced: bool,
}

impl Request {
    fn podset(&self) -> PodSetSpec {
        let level = LEVELS[self.level];
        let tr = match self.kind {
            Kind::Required => required(level),
            Kind::Preferred => preferred(level),
            Kind::Unconstrained => unconstrained(),
        };
        let tr = match self.slice {
            Some((lvl, size)) => sliced(tr, &[(LEVELS[lvl], size)]),
            None => tr,
        };
        podset(self.count, self.cpu, tr)
    }

    fn slice_size(&self) -> i64 {
        self.slice.map_or(1, |(_, s)| i64::from(s))
    }

    fn gates(&self) -> FeatureGates {
        let mut g = FeatureGates::default();
        if self.balanced {
            g.set("TASBalancedPlacement", true).unwrap();
        }
        g
    }
}

fn host_strategy() -> impl Strategy<Value = Host> {
    (
        0..=8i64,
        0..=8i64,
        prop::bool::weighted(0.85),
        prop::collection::vec((0..=12i64).prop_map(|q| q * 250), 0..=2),
    )
        .prop_map(|(cpu, pods, ready, usage)| Host {
            cpu,
            pods,
            ready,
            usage,
        })
}

fn cluster_strategy() -> impl Strategy<Value = Cluster> {
    prop::collection::vec(
        prop::collection::vec(prop::collection::vec(host_strategy(), 1..=4), 1..=3),
        1..=3,
    )
}

/// How often a generated request has a slice layer.
#[derive(Debug, Clone, Copy)]
enum Slices {
    Never,
    Sometimes,
    Always,
}

/// A request of `kind` (any kind when `None`).
fn request_strategy(kind: Option<Kind>, slices: Slices) -> impl Strategy<Value = Request> {
    // (raw level, size); the raw level is mapped below.
    let layer = (0..3usize, 1..=4i32);
    let slice = match slices {
        Slices::Never => Just(None).boxed(),
        Slices::Sometimes => prop::option::weighted(0.4, layer).boxed(),
        Slices::Always => layer.prop_map(Some).boxed(),
    };
    let kind = match kind {
        Some(k) => Just(k).boxed(),
        None => prop_oneof![
            Just(Kind::Required),
            Just(Kind::Preferred),
            Just(Kind::Unconstrained)
        ]
        .boxed(),
    };
    // 1–20 pods, biased towards small counts so that more requests fit.
    let count = prop_oneof![3 => 1..=6i32, 1 => 7..=20i32];
    (kind, 0..3usize, slice, count, 1..=3i64, any::<bool>()).prop_map(
        |(kind, level, slice, count, cpu, balanced)| {
            // The slice level is at or below the main level (any level for unconstrained).
            let slice = slice.map(|(raw, size)| match kind {
                Kind::Unconstrained => (raw, size),
                _ => (level + raw % (LEVELS.len() - level), size),
            });
            Request {
                kind,
                level,
                slice,
                count,
                cpu,
                balanced,
            }
        },
    )
}

/// The tree and what `place_group` answered: (leaf, pods) or the failure message.
struct Outcome {
    tree: TopologyTree,
    result: Result<Vec<(DomainIdx, i64)>, String>,
}

impl Outcome {
    /// The result keyed by label path, independent of domain indexes.
    fn by_path(&self) -> Result<Vec<(String, i64)>, String> {
        self.result.clone().map(|ds| {
            ds.iter()
                .map(|&(d, c)| (self.tree.values(d).join("/"), c))
                .collect()
        })
    }

    fn host_of<'c>(&self, cluster: &'c Cluster, leaf: DomainIdx) -> ([usize; 3], &'c Host) {
        let node = self.tree.leaf_node(leaf).expect("a leaf has a node");
        host_by_name(cluster, &node.name).expect("the node was generated")
    }
}

/// Builds the tree from `nodes`, takes the cluster's usage and places the request.
fn run_with_nodes(cluster: &Cluster, nodes: &[NodeInfo], req: &Request) -> Outcome {
    let levels: Vec<String> = LEVELS.iter().map(|s| s.to_string()).collect();
    let tree = TopologyTree::build(
        "default",
        &levels,
        &BTreeMap::new(),
        nodes.iter().cloned().map(std::sync::Arc::new),
    );
    let used = usage(cluster);
    let free = FreeCapacity::with_pod_usage(&tree, used.iter().map(|(n, r)| (n.as_str(), r)));
    let gates = req.gates();
    let ps = req.podset();
    let ctx = PlacementContext {
        tree: &tree,
        free: &free,
        gates: &gates,
        flavor_name: "tas",
        flavor_tolerations: &[],
    };
    let group = GroupRequest {
        workers: &ps,
        leader: None,
        within: None,
    };
    let result = place_group(&ctx, &group)
        .map(|p| p.workers.domains)
        .map_err(|e| e.message);
    Outcome { tree, result }
}

fn run(cluster: &Cluster, req: &Request) -> Outcome {
    run_with_nodes(cluster, &nodes(cluster), req)
}

/// Brute force: the capacity (pods) of every domain at `level`, keyed by its position prefix.
fn capacities_at(cluster: &Cluster, level: usize, cpu: i64) -> BTreeMap<Vec<usize>, i64> {
    let mut out = BTreeMap::new();
    for (pos, h) in hosts(cluster).filter(|(_, h)| h.ready) {
        *out.entry(pos[..=level].to_vec()).or_insert(0) += h.fits(cpu);
    }
    out
}

fn config() -> ProptestConfig {
    // 256 cases (proptest's default; PROPTEST_CASES overrides it). No regression files: the
    // source tree is shared, and a failure prints the minimal input anyway.
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// 1. No leaf gets more pods than its free CPU and free pod slots allow, and only Ready
    ///    nodes receive pods.
    #[test]
    fn no_leaf_over_capacity(cluster in cluster_strategy(), req in request_strategy(None, Slices::Sometimes)) {
        let out = run(&cluster, &req);
        if let Ok(domains) = &out.result {
            for &(leaf, count) in domains {
                let (pos, h) = out.host_of(&cluster, leaf);
                prop_assert!(h.ready, "{} is NotReady", host_name(pos));
                prop_assert!(
                    count * req.cpu * 1000 <= h.free_cpu(),
                    "{}: {count} pods × {} cores > free {}m",
                    host_name(pos), req.cpu, h.free_cpu()
                );
                prop_assert!(
                    count <= h.free_pods(),
                    "{}: {count} pods > {} free slots",
                    host_name(pos), h.free_pods()
                );
            }
        }
    }

    /// 2. A required request never spans two domains of the required level.
    #[test]
    fn required_stays_in_one_domain(
        cluster in cluster_strategy(),
        req in request_strategy(Some(Kind::Required), Slices::Sometimes),
    ) {
        let out = run(&cluster, &req);
        if let Ok(domains) = &out.result {
            let mut ancestors: Vec<DomainIdx> = domains
                .iter()
                .map(|&(leaf, _)| out.tree.ancestor_at(leaf, req.level))
                .collect();
            ancestors.sort_unstable();
            ancestors.dedup();
            prop_assert!(ancestors.len() <= 1, "spans {:?}", out.by_path());
            for &a in &ancestors {
                prop_assert_eq!(out.tree.domains[a].level, req.level);
            }
            // The same, from the generated positions.
            let mut prefixes: Vec<Vec<usize>> = domains
                .iter()
                .map(|&(leaf, _)| out.host_of(&cluster, leaf).0[..=req.level].to_vec())
                .collect();
            prefixes.sort();
            prefixes.dedup();
            prop_assert!(prefixes.len() <= 1, "spans {:?}", out.by_path());
        }
    }

    /// 3. The counts add up: (count / slice size) × slice size pods in all, a multiple of the
    ///    slice size in every slice-level domain, and no empty entry.
    #[test]
    fn counts_add_up(cluster in cluster_strategy(), req in request_strategy(None, Slices::Sometimes)) {
        let out = run(&cluster, &req);
        if let Ok(domains) = &out.result {
            let ss = req.slice_size();
            let total: i64 = domains.iter().map(|(_, c)| c).sum();
            prop_assert_eq!(total, i64::from(req.count) / ss * ss, "{:?}", out.by_path());
            prop_assert!(domains.iter().all(|&(_, c)| c > 0), "{:?}", out.by_path());
            if let Some((slice_level, size)) = req.slice {
                let mut per_domain: BTreeMap<DomainIdx, i64> = BTreeMap::new();
                for &(leaf, c) in domains {
                    *per_domain
                        .entry(out.tree.ancestor_at(leaf, slice_level))
                        .or_insert(0) += c;
                }
                for (d, c) in per_domain {
                    prop_assert_eq!(
                        c % i64::from(size),
                        0,
                        "{} holds {} pods; {:?}",
                        out.tree.id(d),
                        c,
                        out.by_path()
                    );
                }
            }
        }
    }

    /// 4. "Does not fit" is true, and "fits" is too: required fails iff no domain of the
    ///    required level holds `count` pods; preferred and unconstrained fail iff the whole
    ///    cluster does not.
    #[test]
    fn does_not_fit_is_true(cluster in cluster_strategy(), req in request_strategy(None, Slices::Never)) {
        let out = run(&cluster, &req);
        let count = i64::from(req.count);
        let fits = match req.kind {
            Kind::Required => capacities_at(&cluster, req.level, req.cpu)
                .values()
                .any(|&c| c >= count),
            Kind::Preferred | Kind::Unconstrained => {
                hosts(&cluster).map(|(_, h)| h.fits(req.cpu)).sum::<i64>() >= count
            }
        };
        prop_assert_eq!(
            out.result.is_ok(),
            fits,
            "brute force says fits = {}, engine says {:?}",
            fits,
            out.by_path()
        );
    }

    /// 4b. The same with a slice layer, counted in whole slices: a slice never straddles two
    ///     domains of the slice level (§3.3, §3.11).
    #[test]
    fn does_not_fit_is_true_with_slices(
        cluster in cluster_strategy(),
        req in request_strategy(None, Slices::Always),
    ) {
        let (slice_level, size) = req.slice.expect("always sliced");
        let out = run(&cluster, &req);
        let size = i64::from(size);
        let need = i64::from(req.count) / size;
        let slices = capacities_at(&cluster, slice_level, req.cpu);
        let fits = match req.kind {
            Kind::Required => {
                let mut per_domain: BTreeMap<&[usize], i64> = BTreeMap::new();
                for (path, pods) in &slices {
                    *per_domain.entry(&path[..=req.level]).or_insert(0) += pods / size;
                }
                per_domain.values().any(|&c| c >= need)
            }
            Kind::Preferred | Kind::Unconstrained => {
                // Any domain at all (else "no topology domains at level"), and enough slices.
                !slices.is_empty() && slices.values().map(|pods| pods / size).sum::<i64>() >= need
            }
        };
        prop_assert_eq!(
            out.result.is_ok(),
            fits,
            "brute force says fits = {}, engine says {:?}",
            fits,
            out.by_path()
        );
    }

    /// 5. The same input gives the same result, whatever order the nodes come in.
    #[test]
    fn placement_is_deterministic(
        cluster in cluster_strategy(),
        req in request_strategy(None, Slices::Sometimes),
        keys in prop::collection::vec(any::<u32>(), MAX_HOSTS),
    ) {
        let first = run(&cluster, &req).by_path();
        let again = run(&cluster, &req).by_path();
        prop_assert_eq!(&first, &again);
        let mut shuffled: Vec<(u32, NodeInfo)> = keys.into_iter().zip(nodes(&cluster)).collect();
        shuffled.sort_by_key(|(k, _)| *k);
        let shuffled: Vec<NodeInfo> = shuffled.into_iter().map(|(_, n)| n).collect();
        let reordered = run_with_nodes(&cluster, &shuffled, &req).by_path();
        prop_assert_eq!(&first, &reordered);
    }
}
