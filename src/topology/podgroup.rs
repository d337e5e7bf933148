//! Workload API placement: where kube-scheduler 1.37 puts a `PodGroup` or a tree of
//! `CompositePodGroup`s with topology constraints (`pkg/scheduler/algorithm_podgroup.go`, the
//! `TopologyPlacement`, `GangScheduling`, `PodGroupPodsCount` and `NodeResourcesFit` placement
//! plugins), as one pure decision over nodes, their usage and the groups. Callers convert API
//! objects; nothing here reads a Pod or a PodGroup.
//!
//! Rules, in the scheduler's order:
//! 1. **Candidates** ([`candidates`]): one placement per value of the group's topology key,
//!    over the parent's nodes (all nodes for a root); nodes without the label are dropped; no
//!    key is one placement of all those nodes. Values are tried in name order.
//! 2. **Bound pods fix the domain**: when pods of the group (of the whole subtree for a
//!    composite) already run, only their domain is a candidate; pods already in two domains
//!    mean nothing more is placed, and the message says so.
//! 3. **Fitting** ([`reject`]): pods one at a time, in the order given (the caller sorts by
//!    priority, then creation), each to the first node by name of the placement that passes the
//!    filters: `node.kubernetes.io/unschedulable`, the `node.kubernetes.io/not-ready` taint a
//!    NotReady node carries, `NoSchedule`/`NoExecute` taints, `nodeSelector` and required node
//!    affinity, then `pods` slots and every requested resource. No backtracking. Which node of
//!    the placement a pod gets is kube-scheduler's own per-pod scoring upstream; only the domain
//!    is compared by the conformance runner (`compare_levels`), so first-by-name keeps it simple
//!    and deterministic.
//! 4. **Feasibility**: gang when bound + fitted pods reach `minCount`, basic when one pod fits;
//!    only the pods that fit are placed. A composite is feasible when `minGroupCount` children
//!    (gang) or one child (basic) are; children go in order of creation, then name, each
//!    confined to the composite's placement and seeing the earlier children's pods (greedy).
//! 5. **Score** ([`pods_count_scores`], [`resources_fit_score`]): only when several placements
//!    are feasible. PodGroupPodsCount (raw = the subtree's bound pods + pods proposed, then
//!    `raw * 100 / max raw`) plus NodeResourcesFit MostAllocated over every node of the
//!    placement, weights [`WEIGHT_PODS_COUNT`] and [`WEIGHT_RESOURCES_FIT`]. The highest total
//!    wins; ties (random upstream) go to the first value by name.
//!
//! Invariant: the input usage is never modified; [`record`] applies a decision to it so the
//! next group sees the pods placed.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::labels::LabelLookup;
use super::node::{
    NodeInfo, RequiredAffinity, TAINT_EFFECT_NO_SCHEDULE, first_untolerated_taint,
    matches_node_selector, taint_to_string,
};
use super::resources::{CPU, PODS, ResourceList, add_pod_usage};

use crate::keys::{NOT_READY_TAINT, UNSCHEDULABLE_TAINT};

/// A hash map with a fast hasher (foldhash), for the maps built with each placement.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The memory resource name (bytes).
pub const MEMORY: &str = "memory";
/// CPU a container that requests none counts for in scoring (millicores; `DefaultMilliCPURequest`).
pub const DEFAULT_CPU_REQUEST: i64 = 100;
/// Memory a container that requests none counts for in scoring (`DefaultMemoryRequest`, 200Mi).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 << 20;
/// Deepest group tree the Workload API accepts (root = depth 1).
pub const MAX_DEPTH: usize = 4;
/// `MaxNodeScore` / `MaxScore`.
pub const MAX_SCORE: i64 = 100;
/// NodeResourcesFit scoring resources and weights (the default `scoringStrategy.resources`).
pub const SCORE_RESOURCES: [(&str, i64); 2] = [(CPU, 1), (MEMORY, 1)];
/// Default weight of the `PodGroupPodsCount` placement score.
pub const WEIGHT_PODS_COUNT: i64 = 1;
/// Default weight of the `NodeResourcesFit` placement score.
pub const WEIGHT_RESOURCES_FIT: i64 = 1;

/// A group tree that kube-scheduler would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The root asked for is not among the groups.
    #[error("group {0} is not among the groups given")]
    UnknownGroup(String),
    /// Two groups share a name.
    #[error("two groups are named {0}")]
    DuplicateGroup(String),
    /// The root asked for has a parent.
    #[error("{group} has parent {parent}, so it is not a root")]
    NotRoot {
        /// The group.
        group: String,
        /// Its parent.
        parent: String,
    },
    /// A group names a parent that is not among the groups.
    #[error("{group} names parent CompositePodGroup {parent}, which does not exist")]
    MissingParent {
        /// The group.
        group: String,
        /// The parent it names.
        parent: String,
    },
    /// A group names a PodGroup as its parent.
    #[error(
        "{group} names parent {parent}, which is a PodGroup: only a CompositePodGroup has children"
    )]
    ParentNotComposite {
        /// The group.
        group: String,
        /// The parent it names.
        parent: String,
    },
    /// Parents form a loop.
    #[error("CompositePodGroup parents form a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// A group deeper than [`MAX_DEPTH`].
    #[error("{group} is at depth {depth}; a group tree is at most {MAX_DEPTH} deep")]
    TooDeep {
        /// The group.
        group: String,
        /// Its depth (root = 1).
        depth: usize,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What some pods on one node take: those already there (a name-keyed [`Usage`]) or those a
/// placement proposes there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// Their requests, plus a `pods` count (the filters read this).
    pub requested: ResourceList,
    /// Their CPU and memory with the non-zero defaults of [`non_zero_requests`] (scoring).
    pub non_zero: ResourceList,
}

impl NodeUsage {
    /// Adds one pod.
    pub fn add_pod(&mut self, requests: &ResourceList, non_zero: &ResourceList) {
        add_pod_usage(&mut self.requested, requests);
        for (k, v) in non_zero {
            *self.non_zero.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// What the pods request of `resource` (`pods`: how many they are).
    fn requested_of(&self, resource: &str) -> i64 {
        self.requested.get(resource).copied().unwrap_or(0)
    }

    /// Their CPU and memory as scoring counts them.
    fn score_amounts(&self) -> ScoreAmounts {
        SCORE_RESOURCES.map(|(r, _)| self.non_zero.get(r).copied().unwrap_or(0))
    }
}

/// Node name → what its pods take. Nodes missing here are empty.
pub type Usage = BTreeMap<String, NodeUsage>;

/// CPU and memory in [`SCORE_RESOURCES`] order, as NodeResourcesFit scores them.
pub type ScoreAmounts = [i64; SCORE_RESOURCES.len()];

/// What the pods already on each node take, read per node and resource where the placement
/// needs it: a caller that keeps usage in its own form (the cluster state's dense amounts)
/// hands it over without a copy per node. `n` is the node's position in the list given to
/// [`place`], `node` the node there.
pub trait NodeLoads {
    /// What the pods on the node request of `resource` (`pods`: how many pods there are).
    fn requested(&self, n: usize, node: &NodeInfo, resource: &str) -> i64;
    /// Their CPU and memory with the non-zero defaults of [`non_zero_requests`].
    fn scored(&self, n: usize, node: &NodeInfo) -> ScoreAmounts;
}

impl NodeLoads for Usage {
    fn requested(&self, _: usize, node: &NodeInfo, resource: &str) -> i64 {
        self.get(&node.name).map_or(0, |u| u.requested_of(resource))
    }

    fn scored(&self, _: usize, node: &NodeInfo) -> ScoreAmounts {
        self.get(&node.name)
            .map_or([0; SCORE_RESOURCES.len()], NodeUsage::score_amounts)
    }
}

/// A pod's CPU and memory as NodeResourcesFit scores them: per container, 100m CPU and 200Mi
/// memory for a resource the container does not request at all (an explicit 0 stays 0).
pub fn non_zero_requests<'a>(
    containers: impl IntoIterator<Item = &'a ResourceList>,
) -> ResourceList {
    let mut total = ResourceList::new();
    for c in containers {
        for (name, default) in [(CPU, DEFAULT_CPU_REQUEST), (MEMORY, DEFAULT_MEMORY_REQUEST)] {
            *total.entry(name.to_string()).or_insert(0) += c.get(name).copied().unwrap_or(default);
        }
    }
    total
}

/// A pod of the group still to be placed, as the filters and the score read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingPod {
    /// `metadata.name`.
    pub name: String,
    /// Effective requests, without the `pods` slot (filters).
    pub requests: ResourceList,
    /// CPU and memory with the non-zero defaults (scoring; see [`non_zero_requests`]).
    pub non_zero: ResourceList,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity, parsed.
    pub affinity: Option<RequiredAffinity>,
}

/// `PodGroup.spec.schedulingPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodGroupPolicy {
    /// `gang: {minCount}`: all or nothing below `min_count` pods.
    Gang {
        /// `minCount`.
        min_count: u32,
    },
    /// `basic: {}`: whatever fits.
    Basic,
}

/// `CompositePodGroup.spec.schedulingPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompositePolicy {
    /// `gang: {minGroupCount}`: at least that many children must be feasible.
    Gang {
        /// `minGroupCount`.
        min_group_count: u32,
    },
    /// `basic: {}`: one feasible child is enough.
    Basic,
}

/// What a group is.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupKind {
    /// A `PodGroup`: the leaf that holds pods.
    PodGroup {
        /// Its policy.
        policy: PodGroupPolicy,
        /// Pods still to place, in scheduling order.
        pending: Vec<PendingPod>,
        /// Nodes of the group's pods already bound (their usage is already in the loads given
        /// to [`place`]).
        bound: Vec<String>,
    },
    /// A `CompositePodGroup`: children only.
    Composite {
        /// Its policy.
        policy: CompositePolicy,
    },
}

/// One `PodGroup` or `CompositePodGroup`.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `metadata.namespace` (for messages).
    pub namespace: String,
    /// `metadata.name`, unique among the groups given.
    pub name: String,
    /// `spec.parentCompositePodGroupName`.
    pub parent: Option<String>,
    /// `metadata.creationTimestamp`, seconds; children are taken by (created, name).
    pub created: i64,
    /// `spec.schedulingConstraints.topology[0].key`.
    pub key: Option<String>,
    /// Leaf or composite.
    pub kind: GroupKind,
}

/// One chosen domain on a leaf's path: `key = value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// The topology key.
    pub key: String,
    /// The value chosen.
    pub value: String,
}

/// A pod placed on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Pod name.
    pub pod: String,
    /// Node name.
    pub node: String,
}

/// The outcome for one `PodGroup` of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafDecision {
    /// The PodGroup's name.
    pub name: String,
    /// Its pods are placed (some may stay pending: see `unplaced`).
    pub fits: bool,
    /// Chosen domains from the root down; groups without a key are skipped.
    pub path: Vec<Level>,
    /// Placed pods, in pod order.
    pub assignments: Vec<Assignment>,
    /// Pods left pending, in pod order.
    pub unplaced: Vec<String>,
    /// Why it does not fit, when it does not.
    pub message: Option<String>,
}

/// The scores of one feasible candidate of the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateScore {
    /// The key's value (`None`: all nodes).
    pub value: Option<String>,
    /// Normalized PodGroupPodsCount.
    pub pods_count: i64,
    /// NodeResourcesFit placement score.
    pub resources_fit: i64,
    /// Weighted sum.
    pub total: i64,
}

/// The decision for one root group and everything under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The root's name.
    pub root: String,
    /// The root is a CompositePodGroup.
    pub composite: bool,
    /// The root is feasible; its leaves' pods are placed.
    pub fits: bool,
    /// The root's chosen value of its key (`None`: no key, or not feasible).
    pub placement: Option<String>,
    /// Why the root does not fit.
    pub message: Option<String>,
    /// Every PodGroup under the root (the root itself when it is one), depth first in child
    /// order.
    pub leaves: Vec<LeafDecision>,
    /// The root's feasible candidates with their scores; empty when at most one was feasible.
    pub scores: Vec<CandidateScore>,
}

/// Why a node turns a pod down.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reject {
    /// Cordoned, and the pod does not tolerate `node.kubernetes.io/unschedulable`.
    Unschedulable,
    /// NotReady, and the pod does not tolerate `node.kubernetes.io/not-ready`.
    NotReady,
    /// An untolerated `NoSchedule`/`NoExecute` taint, as `key=value:Effect`.
    Taint(String),
    /// `nodeSelector` or required node affinity.
    Affinity,
    /// No `pods` slot left.
    TooManyPods,
    /// Not enough of a resource.
    Insufficient(String),
}

impl Reject {
    /// The short form in messages: `cpu`, `pods`, `taint gpu=true:NoSchedule`.
    pub fn short(&self) -> String {
        match self {
            Self::Unschedulable => "unschedulable".into(),
            Self::NotReady => "not ready".into(),
            Self::Taint(t) => format!("taint {t}"),
            Self::Affinity => "node selector/affinity".into(),
            Self::TooManyPods => PODS.into(),
            Self::Insufficient(r) => r.clone(),
        }
    }
}

/// Why `node`, holding `used` (what its pods request of a resource, `pods` their count),
/// cannot take `pod`, or `None`.
pub fn reject(node: &NodeInfo, used: impl Fn(&str) -> i64, pod: &PendingPod) -> Option<Reject> {
    let tolerated = |key: &str| {
        let t = Taint {
            key: key.into(),
            effect: TAINT_EFFECT_NO_SCHEDULE.into(),
            ..Default::default()
        };
        first_untolerated_taint(std::slice::from_ref(&t), &pod.tolerations).is_none()
    };
    if node.unschedulable && !tolerated(UNSCHEDULABLE_TAINT) {
        return Some(Reject::Unschedulable);
    }
    // NotReady nodes carry the lifecycle controller's taint; a node read before it was added
    // (a file, a fresh watch) is treated as carrying it.
    if !node.ready
        && !node.taints.iter().any(|t| t.key == NOT_READY_TAINT)
        && !tolerated(NOT_READY_TAINT)
    {
        return Some(Reject::NotReady);
    }
    if let Some(t) = first_untolerated_taint(&node.taints, &pod.tolerations) {
        return Some(Reject::Taint(taint_to_string(t)));
    }
    let affinity_ok = pod.affinity.as_ref().is_none_or(|a| a.matches(node));
    if !affinity_ok || !matches_node_selector(&node.labels, &pod.node_selector) {
        return Some(Reject::Affinity);
    }
    let alloc_of = |k: &str| node.allocatable.get(k).copied().unwrap_or(0);
    if used(PODS) + 1 > alloc_of(PODS) {
        return Some(Reject::TooManyPods);
    }
    pod.requests
        .iter()
        .find(|(k, v)| k.as_str() != PODS && **v > 0 && used(k) + **v > alloc_of(k))
        .map(|(k, _)| Reject::Insufficient(k.clone()))
}

/// Candidate placements of a group with `key` over the nodes `within` (indices into `nodes`):
/// one per value of the label, in value order, nodes without it dropped; `None` key: `within`
/// itself. Each candidate's nodes are in name order, the order pods are fitted in (sorted
/// here, per candidate: a subset of nodes already in name order costs one pass).
pub fn candidates(
    nodes: &[Arc<NodeInfo>],
    within: &[usize],
    key: Option<&str>,
) -> Vec<(Option<String>, Vec<usize>)> {
    // Each node with its name, read while the node is at hand: the sort then compares the
    // names' bytes without going through the node again.
    let by_name = |mut list: Vec<(&str, usize)>| {
        list.sort_by(|a, b| a.0.cmp(b.0));
        list.into_iter().map(|(_, i)| i).collect::<Vec<usize>>()
    };
    let Some(key) = key else {
        let all = within
            .iter()
            .map(|&i| (nodes[i].name.as_str(), i))
            .collect();
        return vec![(None, by_name(all))];
    };
    // Values in the order first seen, then sorted; the nodes of one domain mostly come one
    // after another, so the value before is tried first (a shared label text is one pointer).
    let mut slot_of: FastMap<&str, usize> = FastMap::default();
    let mut by_value: Vec<(&str, Vec<(&str, usize)>)> = Vec::new();
    let mut before: Option<(&str, usize)> = None;
    let mut lookup = LabelLookup::new(key);
    for &i in within {
        let node = &nodes[i];
        let Some(v) = lookup.value_in(&node.labels).map(|v| &**v) else {
            continue;
        };
        let slot = match before {
            Some((b, slot)) if std::ptr::eq(b, v) || b == v => slot,
            _ => *slot_of.entry(v).or_insert_with(|| {
                by_value.push((v, Vec::new()));
                by_value.len() - 1
            }),
        };
        by_value[slot].1.push((node.name.as_str(), i));
        before = Some((v, slot));
    }
    by_value.sort_unstable_by(|a, b| a.0.cmp(b.0));
    by_value
        .into_iter()
        .map(|(v, n)| (Some(v.to_string()), by_name(n)))
        .collect()
}

/// PodGroupPodsCount, normalized: `raw * 100 / max(raw)` (integer division); all 0 when the
/// maximum is 0 (an error upstream, unreachable here since a feasible placement places a pod).
pub fn pods_count_scores(raw: &[i64]) -> Vec<i64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    raw.iter()
        .map(|r| if max > 0 { r * MAX_SCORE / max } else { 0 })
        .collect()
}

/// NodeResourcesFit's placement score (MostAllocated) over the nodes of a placement: per
/// resource of [`SCORE_RESOURCES`], `min(requested, allocatable) * 100 / allocatable` with both
/// summed over the nodes (each node's [`ScoreAmounts`] are what its pods take, proposed pods
/// included), then the weighted mean, integer division; resources with zero allocatable are
/// skipped.
pub fn resources_fit_score<'a>(
    nodes: impl IntoIterator<Item = (&'a NodeInfo, ScoreAmounts)>,
) -> i64 {
    let mut requested: ScoreAmounts = [0; SCORE_RESOURCES.len()];
    let mut allocatable: ScoreAmounts = [0; SCORE_RESOURCES.len()];
    for (node, non_zero) in nodes {
        // One walk of the node's allocatable: names of another length are never read.
        for (name, amount) in &node.allocatable {
            if let Some(i) = SCORE_RESOURCES
                .iter()
                .position(|(r, _)| *r == name.as_str())
            {
                allocatable[i] += amount;
            }
        }
        for (total, amount) in requested.iter_mut().zip(non_zero) {
            *total += amount;
        }
    }
    let (mut score, mut weights) = (0i64, 0i64);
    for (i, (_, w)) in SCORE_RESOURCES.iter().enumerate() {
        if allocatable[i] == 0 {
            continue;
        }
        score += requested[i].min(allocatable[i]) * MAX_SCORE / allocatable[i] * w;
        weights += w;
    }
    if weights == 0 { 0 } else { score / weights }
}

/// Places the tree under `root` (a standalone PodGroup, or a root CompositePodGroup) on
/// `nodes` holding `loads`. Every group given is checked (cycles, missing parents, depth), so
/// pass the groups of one namespace or one workload.
pub fn place<L: NodeLoads + ?Sized>(
    nodes: &[Arc<NodeInfo>],
    loads: &L,
    groups: &[Group],
    root: &str,
) -> Result<Decision> {
    let tree = Tree::build(groups, root)?;
    // Name order comes per candidate ([`candidates`]); the nodes of bound pods are looked up
    // by name, so only they are indexed.
    let all: Vec<usize> = (0..nodes.len()).collect();
    let bound: BTreeSet<&str> = tree.bound(tree.root).collect();
    let index = if bound.is_empty() {
        FastMap::default()
    } else {
        nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| bound.contains(n.name.as_str()))
            .map(|(i, n)| (n.name.as_str(), i))
            .collect()
    };
    let state = State::default();
    let engine = Engine {
        nodes,
        loads,
        index,
        tree: &tree,
    };
    let eval = engine.eval(tree.root, &all, &state, &[]);
    let group = tree.groups[tree.root];
    let mut leaves = Vec::new();
    for leaf in tree.leaves(tree.root) {
        let g = tree.groups[leaf];
        let GroupKind::PodGroup { pending, .. } = &g.kind else {
            continue;
        };
        let seen = eval.leaves.get(&leaf);
        let decision = match seen {
            Some(l) if eval.feasible && l.feasible => {
                let placed: BTreeSet<usize> = l.assigned.iter().map(|&(p, _)| p).collect();
                LeafDecision {
                    name: g.name.clone(),
                    fits: true,
                    path: l.path.clone(),
                    assignments: l
                        .assigned
                        .iter()
                        .map(|&(p, n)| Assignment {
                            pod: pending[p].name.clone(),
                            node: nodes[n].name.clone(),
                        })
                        .collect(),
                    unplaced: (0..pending.len())
                        .filter(|p| !placed.contains(p))
                        .map(|p| pending[p].name.clone())
                        .collect(),
                    message: None,
                }
            }
            _ => LeafDecision {
                name: g.name.clone(),
                fits: false,
                path: Vec::new(),
                assignments: Vec::new(),
                unplaced: pending.iter().map(|p| p.name.clone()).collect(),
                message: seen
                    .and_then(|l| l.message.clone())
                    .or_else(|| eval.message.clone()),
            },
        };
        leaves.push(decision);
    }
    Ok(Decision {
        root: group.name.clone(),
        composite: matches!(group.kind, GroupKind::Composite { .. }),
        fits: eval.feasible,
        placement: if eval.feasible { eval.value } else { None },
        message: if eval.feasible { None } else { eval.message },
        leaves,
        scores: eval.scores,
    })
}

/// Adds the pods `decision` placed to `usage`, so the next group sees them.
pub fn record(usage: &mut Usage, groups: &[Group], decision: &Decision) {
    for leaf in &decision.leaves {
        let Some(GroupKind::PodGroup { pending, .. }) =
            groups.iter().find(|g| g.name == leaf.name).map(|g| &g.kind)
        else {
            continue;
        };
        for a in &leaf.assignments {
            if let Some(pod) = pending.iter().find(|p| p.name == a.pod) {
                usage
                    .entry(a.node.clone())
                    .or_default()
                    .add_pod(&pod.requests, &pod.non_zero);
            }
        }
    }
}

/// `PodGroup ml/workers (gang, minCount 8)`, the head of every message about a group.
pub fn describe(group: &Group) -> String {
    let (kind, policy) = match &group.kind {
        GroupKind::PodGroup { policy, .. } => (
            "PodGroup",
            match policy {
                PodGroupPolicy::Gang { min_count } => format!("gang, minCount {min_count}"),
                PodGroupPolicy::Basic => "basic".into(),
            },
        ),
        GroupKind::Composite { policy } => (
            "CompositePodGroup",
            match policy {
                CompositePolicy::Gang { min_group_count } => {
                    format!("gang, minGroupCount {min_group_count}")
                }
                CompositePolicy::Basic => "basic".into(),
            },
        ),
    };
    format!("{kind} {}/{} ({policy})", group.namespace, group.name)
}

// ---------------------------------------------------------------------------------------------
// The tree
// ---------------------------------------------------------------------------------------------

/// The groups under one root, children in (created, name) order.
struct Tree<'g> {
    groups: Vec<&'g Group>,
    children: Vec<Vec<usize>>,
    root: usize,
}

impl<'g> Tree<'g> {
    fn build(groups: &'g [Group], root: &str) -> Result<Self> {
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, g) in groups.iter().enumerate() {
            if by_name.insert(g.name.as_str(), i).is_some() {
                return Err(Error::DuplicateGroup(g.name.clone()));
            }
        }
        let mut children = vec![Vec::new(); groups.len()];
        for (i, g) in groups.iter().enumerate() {
            let Some(parent) = &g.parent else { continue };
            let Some(&p) = by_name.get(parent.as_str()) else {
                return Err(Error::MissingParent {
                    group: g.name.clone(),
                    parent: parent.clone(),
                });
            };
            if !matches!(groups[p].kind, GroupKind::Composite { .. }) {
                return Err(Error::ParentNotComposite {
                    group: g.name.clone(),
                    parent: parent.clone(),
                });
            }
            children[p].push(i);
        }
        // Walk every group up to its root: a revisit is a cycle, a long walk too deep.
        for (i, g) in groups.iter().enumerate() {
            let mut chain = vec![i];
            let mut at = i;
            while let Some(&p) = groups[at].parent.as_deref().and_then(|p| by_name.get(p)) {
                if let Some(start) = chain.iter().position(|&c| c == p) {
                    let mut names: Vec<String> = chain[start..]
                        .iter()
                        .map(|&c| groups[c].name.clone())
                        .collect();
                    names.push(groups[p].name.clone());
                    return Err(Error::Cycle(names));
                }
                chain.push(p);
                at = p;
            }
            if chain.len() > MAX_DEPTH {
                return Err(Error::TooDeep {
                    group: g.name.clone(),
                    depth: chain.len(),
                });
            }
        }
        let &r = by_name
            .get(root)
            .ok_or_else(|| Error::UnknownGroup(root.to_string()))?;
        if let Some(parent) = &groups[r].parent {
            return Err(Error::NotRoot {
                group: root.to_string(),
                parent: parent.clone(),
            });
        }
        for c in &mut children {
            c.sort_by(|&a, &b| {
                (groups[a].created, &groups[a].name).cmp(&(groups[b].created, &groups[b].name))
            });
        }
        Ok(Self {
            groups: groups.iter().collect(),
            children,
            root: r,
        })
    }

    /// The PodGroups under `g` (itself when it is one), depth first in child order.
    fn leaves(&self, g: usize) -> Vec<usize> {
        match self.groups[g].kind {
            GroupKind::PodGroup { .. } => vec![g],
            GroupKind::Composite { .. } => self.children[g]
                .iter()
                .flat_map(|&c| self.leaves(c))
                .collect(),
        }
    }

    /// Nodes of the bound pods under `g`.
    fn bound(&self, g: usize) -> impl Iterator<Item = &'g str> + '_ {
        self.leaves(g)
            .into_iter()
            .flat_map(move |l| match &self.groups[l].kind {
                GroupKind::PodGroup { bound, .. } => bound.iter().map(String::as_str).collect(),
                GroupKind::Composite { .. } => Vec::new(),
            })
    }
}

// ---------------------------------------------------------------------------------------------
// The evaluation
// ---------------------------------------------------------------------------------------------

/// The mutable half: what the pods proposed so far take, by node (index into the node list);
/// a node's usage is the loads given plus this ([`Engine::requested`]). A candidate's copy
/// costs the nodes proposals have changed so far, not the cluster.
#[derive(Debug, Clone, Default)]
struct State {
    proposed: BTreeMap<usize, NodeUsage>,
}

impl State {
    /// Proposes `pod` on node `n`.
    fn assume(&mut self, n: usize, pod: &PendingPod) {
        self.proposed
            .entry(n)
            .or_default()
            .add_pod(&pod.requests, &pod.non_zero);
    }
}

/// A leaf as one evaluation left it.
#[derive(Debug, Clone)]
struct LeafEval {
    feasible: bool,
    path: Vec<Level>,
    /// (pod index, node index), in pod order.
    assigned: Vec<(usize, usize)>,
    message: Option<String>,
}

/// One group evaluated inside one set of nodes.
#[derive(Debug, Clone)]
struct Eval {
    feasible: bool,
    /// The chosen (or, when not feasible, the best) candidate's value.
    value: Option<String>,
    /// Pods proposed under the group.
    proposed: usize,
    /// How far an infeasible candidate got: pods fitted (leaf) or feasible children.
    progress: usize,
    leaves: BTreeMap<usize, LeafEval>,
    /// What the proposals add.
    state: State,
    message: Option<String>,
    /// Why the first pod that did not fit was turned down, by how many nodes.
    reasons: BTreeMap<Reject, usize>,
    scores: Vec<CandidateScore>,
}

struct Engine<'a, L: ?Sized> {
    nodes: &'a [Arc<NodeInfo>],
    /// What the pods already on each node take.
    loads: &'a L,
    /// The nodes of the tree's bound pods, by name.
    index: FastMap<&'a str, usize>,
    tree: &'a Tree<'a>,
}

/// The key's last path segment, as a person names the domain: `rack` for
/// `topology.example.com/rack`.
fn noun(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

fn pods(n: usize) -> String {
    if n == 1 {
        "1 pod".into()
    } else {
        format!("{n} pods")
    }
}

/// `cpu`, or `cpu on 2 nodes, pods on 1 node` when the nodes disagree.
fn reasons_text(reasons: &BTreeMap<Reject, usize>) -> String {
    if reasons.len() == 1 {
        return reasons.keys().map(Reject::short).collect();
    }
    let mut items: Vec<(&Reject, &usize)> = reasons.iter().collect();
    items.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    items
        .iter()
        .map(|(r, n)| {
            let nodes = if **n == 1 { "node" } else { "nodes" };
            format!("{} on {n} {nodes}", r.short())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl<L: NodeLoads + ?Sized> Engine<'_, L> {
    /// What the pods on node `n` request of `resource` in `state`: those given plus those
    /// proposed.
    fn requested(&self, state: &State, n: usize, resource: &str) -> i64 {
        let given = self.loads.requested(n, &self.nodes[n], resource);
        let proposed = state
            .proposed
            .get(&n)
            .map_or(0, |u| u.requested_of(resource));
        given.saturating_add(proposed)
    }

    /// What the pods on node `n` count for in scoring in `state`.
    fn scored(&self, state: &State, n: usize) -> ScoreAmounts {
        let mut amounts = self.loads.scored(n, &self.nodes[n]);
        if let Some(u) = state.proposed.get(&n) {
            for (amount, proposed) in amounts.iter_mut().zip(u.score_amounts()) {
                *amount = amount.saturating_add(proposed);
            }
        }
        amounts
    }

    /// Evaluates group `g` over the nodes `within`, starting from `state`; `path` holds the
    /// ancestors' chosen domains.
    fn eval(&self, g: usize, within: &[usize], state: &State, path: &[Level]) -> Eval {
        let group = self.tree.groups[g];
        let head = describe(group);
        let infeasible = |message: String| Eval {
            feasible: false,
            value: None,
            proposed: 0,
            progress: 0,
            leaves: BTreeMap::new(),
            state: state.clone(),
            message: Some(message),
            reasons: BTreeMap::new(),
            scores: Vec::new(),
        };
        let mut cands = candidates(self.nodes, within, group.key.as_deref());
        if let Some(key) = &group.key {
            if cands.is_empty() {
                return infeasible(format!(
                    "{head}: no nodes found with topology label '{key}'"
                ));
            }
            let bound: BTreeSet<&str> = self
                .tree
                .bound(g)
                .filter_map(|n| self.index.get(n))
                .filter_map(|&i| self.nodes[i].labels.get(key))
                .collect();
            let noun = noun(key);
            match bound.iter().collect::<Vec<_>>().as_slice() {
                [] => {}
                [v] => {
                    cands.retain(|(c, _)| c.as_deref() == Some(**v));
                    if cands.is_empty() {
                        return infeasible(format!(
                            "{head}: its pods already run in {noun} {v}, which is outside the \
                             nodes it may use"
                        ));
                    }
                }
                many => {
                    let list: Vec<&str> = many.iter().map(|v| **v).collect();
                    return infeasible(format!(
                        "{head}: its pods already run in {} different {noun}s ({}); nothing more \
                         is placed",
                        list.len(),
                        list.join(", ")
                    ));
                }
            }
        }
        let evals: Vec<(Vec<usize>, Eval)> = cands
            .into_iter()
            .map(|(value, nodes)| {
                let mut p = path.to_vec();
                if let (Some(key), Some(v)) = (&group.key, &value) {
                    p.push(Level {
                        key: key.clone(),
                        value: v.clone(),
                    });
                }
                let mut e = self.eval_candidate(g, &nodes, state, &p);
                e.value = value;
                (nodes, e)
            })
            .collect();
        let feasible: Vec<usize> = (0..evals.len()).filter(|&i| evals[i].1.feasible).collect();
        match feasible.as_slice() {
            [] => {
                let single = evals.len() == 1;
                // The best infeasible candidate: most progress, then most pods, then by value.
                let best = (0..evals.len())
                    .rev()
                    .max_by_key(|&i| (evals[i].1.progress, evals[i].1.proposed))
                    .unwrap_or(0);
                let mut e = evals
                    .into_iter()
                    .nth(best)
                    .map(|(_, e)| e)
                    .unwrap_or_else(|| infeasible(String::new()));
                e.message = Some(self.why_not(g, &e, single));
                e.state = state.clone();
                e
            }
            [only] => evals
                .into_iter()
                .nth(*only)
                .map(|(_, e)| e)
                .unwrap_or_else(|| {
                    infeasible(format!("{head}: internal error: lost its only placement"))
                }),
            many => {
                let bound = self.tree.bound(g).count() as i64;
                let raw: Vec<i64> = many
                    .iter()
                    .map(|&i| bound + evals[i].1.proposed as i64)
                    .collect();
                let counts = pods_count_scores(&raw);
                let scores: Vec<CandidateScore> = many
                    .iter()
                    .zip(counts)
                    .map(|(&i, pods_count)| {
                        let (nodes, e) = &evals[i];
                        let resources_fit = resources_fit_score(
                            nodes
                                .iter()
                                .map(|&n| (&*self.nodes[n], self.scored(&e.state, n))),
                        );
                        CandidateScore {
                            value: e.value.clone(),
                            pods_count,
                            resources_fit,
                            total: pods_count * WEIGHT_PODS_COUNT
                                + resources_fit * WEIGHT_RESOURCES_FIT,
                        }
                    })
                    .collect();
                // Highest total; a tie goes to the first value (random upstream).
                let best = (0..scores.len())
                    .rev()
                    .max_by_key(|&s| scores[s].total)
                    .unwrap_or(0);
                let mut e = evals
                    .into_iter()
                    .nth(many[best])
                    .map(|(_, e)| e)
                    .unwrap_or_else(|| {
                        infeasible(format!("{head}: internal error: lost its best placement"))
                    });
                e.scores = scores;
                e
            }
        }
    }

    /// Evaluates group `g` on one candidate's nodes.
    fn eval_candidate(&self, g: usize, nodes: &[usize], state: &State, path: &[Level]) -> Eval {
        let group = self.tree.groups[g];
        let mut st = state.clone();
        let mut leaves = BTreeMap::new();
        let mut reasons = BTreeMap::new();
        let (feasible, proposed, progress, message) = match &group.kind {
            GroupKind::PodGroup {
                policy,
                pending,
                bound,
            } => {
                let mut assigned = Vec::new();
                for (p, pod) in pending.iter().enumerate() {
                    let mut turned_down = BTreeMap::new();
                    let fit = nodes.iter().copied().find(|&n| {
                        match reject(&self.nodes[n], |k| self.requested(&st, n, k), pod) {
                            None => true,
                            Some(r) => {
                                *turned_down.entry(r).or_insert(0) += 1;
                                false
                            }
                        }
                    });
                    match fit {
                        Some(n) => {
                            st.assume(n, pod);
                            assigned.push((p, n));
                        }
                        None if reasons.is_empty() => reasons = turned_down,
                        None => {}
                    }
                }
                let fitted = assigned.len();
                let enough = match policy {
                    PodGroupPolicy::Gang { min_count } => {
                        bound.len() + fitted >= *min_count as usize
                    }
                    PodGroupPolicy::Basic => bound.len() + fitted >= 1,
                };
                // With pods to place, nothing placed is not a fit.
                let feasible = enough && (fitted > 0 || pending.is_empty());
                leaves.insert(
                    g,
                    LeafEval {
                        feasible,
                        path: path.to_vec(),
                        assigned,
                        message: None,
                    },
                );
                (feasible, fitted, fitted, None)
            }
            GroupKind::Composite { policy } => {
                let mut feasible_children = 0;
                let mut proposed = 0;
                let mut first_failure = None;
                for &c in &self.tree.children[g] {
                    let e = self.eval(c, nodes, &st, path);
                    for (l, mut le) in e.leaves {
                        if !e.feasible {
                            le.feasible = false;
                            le.assigned.clear();
                            le.message = le.message.or_else(|| e.message.clone());
                        }
                        leaves.insert(l, le);
                    }
                    if e.feasible {
                        feasible_children += 1;
                        proposed += e.proposed;
                        st = e.state;
                    } else {
                        // Leaves of a child that failed before evaluating them.
                        for l in self.tree.leaves(c) {
                            leaves.entry(l).or_insert_with(|| LeafEval {
                                feasible: false,
                                path: Vec::new(),
                                assigned: Vec::new(),
                                message: e.message.clone(),
                            });
                        }
                        first_failure = first_failure.or(e.message);
                    }
                }
                let need = match policy {
                    CompositePolicy::Gang { min_group_count } => *min_group_count as usize,
                    CompositePolicy::Basic => 1,
                };
                (
                    feasible_children >= need,
                    proposed,
                    feasible_children,
                    first_failure,
                )
            }
        };
        Eval {
            feasible,
            value: None,
            proposed,
            progress,
            leaves,
            state: st,
            message,
            reasons,
            scores: Vec::new(),
        }
    }

    /// The message for a group none of whose candidates is feasible; `e` is the best one.
    fn why_not(&self, g: usize, e: &Eval, single: bool) -> String {
        let group = self.tree.groups[g];
        let head = describe(group);
        let domain = match (&group.key, &e.value) {
            (Some(key), Some(v)) => Some((noun(key), v.as_str())),
            _ => None,
        };
        match &group.kind {
            GroupKind::PodGroup {
                policy,
                pending,
                bound,
            } => {
                let need = match policy {
                    PodGroupPolicy::Gang { min_count } => {
                        (*min_count as usize).saturating_sub(bound.len()).max(1)
                    }
                    PodGroupPolicy::Basic => 1,
                };
                if pending.is_empty() {
                    return format!(
                        "{head}: no pods to place, and {} bound of minCount {need}",
                        bound.len()
                    );
                }
                let why = if e.reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", reasons_text(&e.reasons))
                };
                let fitted = e.progress;
                match domain {
                    Some((noun, v)) if !single => format!(
                        "{head}: no {noun} fits {}; best {noun} {v} fits {fitted}{why}",
                        pods(need)
                    ),
                    Some((noun, v)) => format!(
                        "{head}: {noun} {v} fits {} of the {need} needed{why}",
                        pods(fitted)
                    ),
                    None => format!("{head}: {} fit of the {need} needed{why}", pods(fitted)),
                }
            }
            GroupKind::Composite { policy } => {
                let need = match policy {
                    CompositePolicy::Gang { min_group_count } => *min_group_count as usize,
                    CompositePolicy::Basic => 1,
                };
                let children = |n: usize| {
                    if n == 1 {
                        "1 feasible child".to_string()
                    } else {
                        format!("{n} feasible children")
                    }
                };
                let child = e
                    .message
                    .as_deref()
                    .map(|m| format!("; first failing child: {m}"))
                    .unwrap_or_default();
                match domain {
                    Some((noun, v)) if !single => format!(
                        "{head}: no {noun} holds {}; best {noun} {v} holds {}{child}",
                        children(need),
                        e.progress
                    ),
                    Some((noun, v)) => format!(
                        "{head}: {noun} {v} holds {} of the {need} needed{child}",
                        children(e.progress)
                    ),
                    None => format!(
                        "{head}: {} of the {need} needed{child}",
                        children(e.progress)
                    ),
                }
            }
        }
    }
}
