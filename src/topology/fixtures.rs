//! Test fixtures for the placement core: node and PodSet builders and a one-call `place`.

use std::collections::BTreeMap;

use super::capacity::FreeCapacity;
use super::gates::FeatureGates;
use super::node::NodeInfo;
use super::placement::{GroupRequest, PlacementContext, place_group};
use super::request::{PodSetSpec, SliceLayer, TopologyRequest};
use super::tree::TopologyTree;
use crate::keys::HOSTNAME_LABEL;

/// Block level label used by the fixtures.
pub const BLOCK: &str = "cloud.com/topology-block";
/// Rack level label used by the fixtures.
pub const RACK: &str = "cloud.com/topology-rack";
/// Hostname level label.
pub const HOST: &str = HOSTNAME_LABEL;

/// Builds a Ready node: `NodeBuilder::new("x1").block("b1").rack("r1").cpu(4)`.
pub struct NodeBuilder(NodeInfo);

impl NodeBuilder {
    /// A Ready, schedulable node whose hostname label is its name, with 110 pod slots.
    pub fn new(name: &str) -> Self {
        let mut n = NodeInfo {
            name: name.into(),
            ready: true,
            ..Default::default()
        };
        n.labels.insert(HOST, name);
        n.allocatable.insert("pods".into(), 110);
        Self(n)
    }
    /// Sets the block label.
    pub fn block(self, v: &str) -> Self {
        self.label(BLOCK, v)
    }
    /// Sets the rack label.
    pub fn rack(self, v: &str) -> Self {
        self.label(RACK, v)
    }
    /// Sets any label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k, v);
        self
    }
    /// Whole CPUs (stored in millicores).
    pub fn cpu(self, cores: i64) -> Self {
        self.resource("cpu", cores * 1000)
    }
    /// Any resource amount (CPU in millicores).
    pub fn resource(mut self, name: &str, v: i64) -> Self {
        self.0.allocatable.insert(name.into(), v);
        self
    }
    /// Marks the node NotReady.
    pub fn not_ready(mut self) -> Self {
        self.0.ready = false;
        self
    }
    /// The node.
    pub fn build(self) -> NodeInfo {
        self.0
    }
}

/// A PodSet of `count` pods of `cpu` whole CPUs with a topology request.
pub fn podset(count: i32, cpu: i64, topology: TopologyRequest) -> PodSetSpec {
    PodSetSpec {
        name: "main".into(),
        count,
        requests: BTreeMap::from([("cpu".to_string(), cpu * 1000)]),
        topology: Some(topology),
        ..Default::default()
    }
}

/// `required` at a level.
pub fn required(level: &str) -> TopologyRequest {
    TopologyRequest {
        required: Some(level.into()),
        ..Default::default()
    }
}

/// `preferred` at a level.
pub fn preferred(level: &str) -> TopologyRequest {
    TopologyRequest {
        preferred: Some(level.into()),
        ..Default::default()
    }
}

/// `unconstrained: true`.
pub fn unconstrained() -> TopologyRequest {
    TopologyRequest {
        unconstrained: Some(true),
        ..Default::default()
    }
}

/// Adds slice layers `(level, size)`, outermost first.
pub fn sliced(mut tr: TopologyRequest, layers: &[(&str, i32)]) -> TopologyRequest {
    tr.slice_layers = layers
        .iter()
        .map(|(l, s)| SliceLayer {
            level: (*l).into(),
            size: *s,
        })
        .collect();
    tr
}

/// The tree of Topology `default` over `nodes` with the given levels.
pub fn tree(levels: &[&str], nodes: &[NodeInfo]) -> TopologyTree {
    let levels: Vec<String> = levels.iter().map(|s| s.to_string()).collect();
    TopologyTree::build(
        "default",
        &levels,
        &BTreeMap::new(),
        nodes.iter().cloned().map(std::sync::Arc::new),
    )
}

/// Places one PodSet on nodes with the given levels; returns `"b1/r1/x1" → pods`.
pub fn place(
    levels: &[&str],
    nodes: &[NodeInfo],
    ps: &PodSetSpec,
    gates: &FeatureGates,
) -> Result<BTreeMap<String, i64>, String> {
    let tree = tree(levels, nodes);
    let free = FreeCapacity::empty(&tree);
    let ctx = PlacementContext {
        tree: &tree,
        free: &free,
        gates,
        flavor_name: "tas",
        flavor_tolerations: &[],
    };
    let group = GroupRequest {
        workers: ps,
        leader: None,
        within: None,
    };
    let placed = place_group(&ctx, &group).map_err(|e| e.message)?;
    Ok(placed
        .workers
        .domains
        .iter()
        .map(|&(d, c)| (tree.values(d).join("/"), c))
        .collect())
}

/// `[("b1/r1/x1", 2), ...]` as a map, for comparisons.
pub fn domains(items: &[(&str, i64)]) -> BTreeMap<String, i64> {
    items.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}
