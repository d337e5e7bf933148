//! The domain tree of one ResourceFlavor: levels from its Topology, domains from node labels.
//!
//! Invariants: built once per cluster change and never mutated afterwards (requests carry
//! their own scratch state); domains are stored densely and every level's list is sorted by
//! the full label path, which is also Kueue's tie-breaker order; in hostname-lowest mode a leaf
//! is one hostname (nodes sharing it pool their allocatable, the first node gives the path),
//! otherwise a leaf pools every node with the same full label path.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::node::NodeInfo;
use crate::keys::HOSTNAME_LABEL;

/// Dense index of a domain in [`TopologyTree::domains`].
pub type DomainIdx = usize;

/// One domain: a distinct label path prefix at some level.
#[derive(Debug, Clone)]
pub struct Domain {
    /// Depth: 0 is the top level.
    pub level: usize,
    /// The label values of levels `0..=level`, outermost first.
    pub values: Vec<String>,
    /// Parent domain (none at level 0).
    pub parent: Option<DomainIdx>,
    /// Child domains, sorted by values.
    pub children: Vec<DomainIdx>,
    /// Position of this domain in its level's sorted list (Kueue's level-values order).
    pub rank: usize,
    /// For a leaf: the nodes pooled in it (indexes into [`TopologyTree::nodes`]), first node first.
    pub nodes: Vec<usize>,
    /// For a leaf: the summed allocatable, as a dense vector over [`TopologyTree::resources`].
    pub capacity: Vec<i64>,
}

impl Domain {
    /// The domain's ID as Kueue writes it: the values joined by `,`.
    pub fn id(&self) -> String {
        self.values.join(",")
    }
}

/// The topology tree for one flavor at one cluster generation.
#[derive(Debug, Clone)]
pub struct TopologyTree {
    /// The Topology's name (used in failure messages).
    pub topology_name: String,
    /// Level node labels, outermost first.
    pub levels: Vec<String>,
    /// The lowest level is `kubernetes.io/hostname`: leaves are single hosts and the node
    /// filters (taints, nodeSelector, affinity) apply.
    pub hostname_lowest: bool,
    /// Every domain, dense.
    pub domains: Vec<Domain>,
    /// Domains of each level, sorted by values.
    pub by_level: Vec<Vec<DomainIdx>>,
    /// Resource names present on any member node, sorted: the dense resource axis.
    pub resources: Vec<String>,
    /// Member nodes (ready, schedulable, matching the flavor, carrying every level label),
    /// shared with whoever holds the nodes (no copy per tree).
    pub nodes: Vec<Arc<NodeInfo>>,
    node_leaf: HashMap<String, DomainIdx>,
    resource_ids: HashMap<String, usize>,
}

impl TopologyTree {
    /// Builds the tree from the nodes that belong to the flavor: Ready, schedulable, carrying
    /// every `flavor_node_labels` entry and every level label.
    pub fn build(
        topology_name: &str,
        levels: &[String],
        flavor_node_labels: &BTreeMap<String, String>,
        nodes: impl IntoIterator<Item = Arc<NodeInfo>>,
    ) -> Self {
        let hostname_lowest = levels.last().is_some_and(|l| l == HOSTNAME_LABEL);
        let members: Vec<Arc<NodeInfo>> = nodes
            .into_iter()
            .filter(|n| n.schedulable_and_ready())
            .filter(|n| {
                flavor_node_labels
                    .iter()
                    .all(|(k, v)| n.labels.get(k) == Some(v))
            })
            .filter(|n| levels.iter().all(|l| n.labels.contains_key(l)))
            .collect();
        let mut resource_set: BTreeSet<&String> = BTreeSet::new();
        for n in &members {
            resource_set.extend(n.allocatable.keys());
        }
        let resources: Vec<String> = resource_set.into_iter().cloned().collect();
        let resource_ids: HashMap<String, usize> = resources
            .iter()
            .enumerate()
            .map(|(i, r)| (r.clone(), i))
            .collect();

        let depth = levels.len();
        // Each level's distinct values, sorted: a value's rank stands for it, so label paths
        // compare as rank tuples (the same order as comparing the strings) without allocating.
        let ranks: Vec<HashMap<&str, u32>> = levels
            .iter()
            .map(|l| {
                let mut values: Vec<&str> = members.iter().map(|n| n.labels[l].as_str()).collect();
                values.sort_unstable();
                values.dedup();
                values
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (v, i as u32))
                    .collect()
            })
            .collect();
        let mut paths: Vec<u32> = Vec::with_capacity(members.len() * depth);
        for n in &members {
            for (l, r) in levels.iter().zip(&ranks) {
                paths.push(r[n.labels[l].as_str()]);
            }
        }
        let path = |m: usize| &paths[m * depth..(m + 1) * depth];

        // Leaves: nodes sharing a hostname (hostname-lowest) or a full path (otherwise) pool
        // into one; the first node gives the path.
        let mut leaf_of_key: HashMap<&[u32], usize> = HashMap::with_capacity(members.len());
        let mut leaves: Vec<(usize, Vec<usize>)> = Vec::new();
        if depth > 0 {
            for m in 0..members.len() {
                let p = path(m);
                let key = if hostname_lowest { &p[depth - 1..] } else { p };
                match leaf_of_key.get(key) {
                    Some(&i) => leaves[i].1.push(m),
                    None => {
                        leaf_of_key.insert(key, leaves.len());
                        leaves.push((m, vec![m]));
                    }
                }
            }
        }
        leaves.sort_unstable_by(|a, b| path(a.0).cmp(path(b.0)));

        // Every prefix of a leaf's path is a domain: walking the sorted leaves, a level starts
        // a new domain whenever its value or a level above it changes.
        struct Draft {
            first: usize,
            parent: Option<usize>,
            nodes: Vec<usize>,
        }
        let mut per_level: Vec<Vec<Draft>> = (0..depth).map(|_| Vec::new()).collect();
        let mut previous: Option<&[u32]> = None;
        for (first, nodes) in leaves {
            let p = path(first);
            let mut changed = false;
            for lvl in 0..depth {
                changed = changed || previous.is_none_or(|q| q[lvl] != p[lvl]);
                if changed {
                    let parent = lvl.checked_sub(1).map(|up| per_level[up].len() - 1);
                    per_level[lvl].push(Draft {
                        first,
                        parent,
                        nodes: Vec::new(),
                    });
                }
            }
            if let Some(leaf) = per_level.last_mut().and_then(|l| l.last_mut()) {
                leaf.nodes = nodes;
            }
            previous = Some(p);
        }
        let mut offsets = Vec::with_capacity(depth);
        let mut total = 0;
        for level in &per_level {
            offsets.push(total);
            total += level.len();
        }
        let mut domains: Vec<Domain> = Vec::with_capacity(total);
        let mut by_level = Vec::with_capacity(depth);
        for (lvl, level_domains) in per_level.into_iter().enumerate() {
            let mut ids = Vec::with_capacity(level_domains.len());
            for (rank, draft) in level_domains.into_iter().enumerate() {
                let idx = domains.len();
                let parent = draft.parent.map(|p| offsets[lvl - 1] + p);
                if let Some(p) = parent {
                    domains[p].children.push(idx);
                }
                let mut capacity = vec![0i64; resources.len()];
                for &n in &draft.nodes {
                    for (name, value) in &members[n].allocatable {
                        let slot = &mut capacity[resource_ids[name]];
                        *slot = slot.saturating_add(*value);
                    }
                }
                let labels = &members[draft.first].labels;
                domains.push(Domain {
                    level: lvl,
                    values: levels[..=lvl].iter().map(|l| labels[l].clone()).collect(),
                    parent,
                    children: Vec::new(),
                    rank,
                    nodes: draft.nodes,
                    capacity,
                });
                ids.push(idx);
            }
            by_level.push(ids);
        }
        let mut node_leaf = HashMap::with_capacity(members.len());
        if let Some(leaf_ids) = by_level.last() {
            for &leaf in leaf_ids {
                for &n in &domains[leaf].nodes {
                    node_leaf.insert(members[n].name.clone(), leaf);
                }
            }
        }
        let member_nodes = members;
        Self {
            topology_name: topology_name.to_string(),
            levels: levels.to_vec(),
            hostname_lowest,
            domains,
            by_level,
            resources,
            nodes: member_nodes,
            node_leaf,
            resource_ids,
        }
    }

    /// Number of levels.
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// The leaves (lowest-level domains), sorted by path.
    pub fn leaves(&self) -> &[DomainIdx] {
        self.by_level.last().map(Vec::as_slice).unwrap_or(&[])
    }

    /// Index of a level by its node label.
    pub fn level_index(&self, label: &str) -> Option<usize> {
        self.levels.iter().position(|l| l == label)
    }

    /// The leaf holding a member node.
    pub fn leaf_of_node(&self, node_name: &str) -> Option<DomainIdx> {
        self.node_leaf.get(node_name).copied()
    }

    /// Dense resource id of a resource name.
    pub fn resource_id(&self, name: &str) -> Option<usize> {
        self.resource_ids.get(name).copied()
    }

    /// The ancestor of `d` at `level` (itself when already there).
    pub fn ancestor_at(&self, mut d: DomainIdx, level: usize) -> DomainIdx {
        while self.domains[d].level > level {
            match self.domains[d].parent {
                Some(p) => d = p,
                None => break,
            }
        }
        d
    }

    /// Every domain under `roots`, the roots included (depth-first).
    pub fn subtree(&self, roots: &[DomainIdx]) -> Vec<DomainIdx> {
        let mut out = Vec::new();
        let mut stack = roots.to_vec();
        while let Some(d) = stack.pop() {
            out.push(d);
            stack.extend(self.domains[d].children.iter().copied());
        }
        out
    }

    /// The descendants of `d` at `level` (`d` itself when it is at that level).
    pub fn descendants_at(&self, d: DomainIdx, level: usize) -> Vec<DomainIdx> {
        let mut frontier = vec![d];
        while frontier
            .first()
            .is_some_and(|&f| self.domains[f].level < level)
        {
            frontier = frontier
                .iter()
                .flat_map(|&f| self.domains[f].children.iter().copied())
                .collect();
        }
        frontier
    }

    /// The first node of a leaf: the one whose labels and taints the node filters read.
    pub fn leaf_node(&self, leaf: DomainIdx) -> Option<&NodeInfo> {
        self.domains[leaf].nodes.first().map(|&n| &*self.nodes[n])
    }
}
