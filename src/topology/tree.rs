//! The domain tree of one ResourceFlavor: levels from its Topology, domains from node labels.
//!
//! Invariants: built once per cluster change and never mutated afterwards (requests carry
//! their own scratch state); domains are stored densely and every level's list is sorted by
//! the full label path, which is also Kueue's tie-breaker order; in hostname-lowest mode a leaf
//! is one hostname (nodes sharing it pool their allocatable, the first node gives the path),
//! otherwise a leaf pools every node with the same full label path. A build reads the nodes
//! through their [`NodeDigests`] (resources as numbered key sets and amounts in one array,
//! name hashes; whatever the flavor) and the flavor's [`NodeFacts`] (membership, level values
//! ranked as integers), which a caller may keep between builds so that a rebuild reads only
//! what changed.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::ops::Range;
use std::sync::Arc;

use hashbrown::HashTable;

use super::node::NodeInfo;
use super::node_digest::NodeDigests;
use super::node_facts::{NodeFacts, Verdict};
use crate::keys::HOSTNAME_LABEL;

/// A hash map with a fast hasher (foldhash): the tree's maps are keyed by names and label
/// values that come from the cluster, rebuilt with it, and never exposed to callers.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Dense index of a domain in [`TopologyTree::domains`].
pub type DomainIdx = usize;

/// One domain: a distinct label path prefix at some level. Its label values are read from
/// its first node ([`TopologyTree::value`], [`TopologyTree::values`]), so a build copies no
/// label values.
#[derive(Debug, Clone)]
pub struct Domain {
    /// Depth: 0 is the top level.
    pub level: usize,
    /// The member node (index into [`TopologyTree::nodes`]) whose labels give the path: the
    /// first node of the domain's first leaf.
    pub first_node: usize,
    /// Parent domain (none at level 0).
    pub parent: Option<DomainIdx>,
    /// Child domains, sorted by values: they come one after another in the level below
    /// (empty for a leaf).
    pub children: Range<DomainIdx>,
    /// Position of this domain in its level's sorted list (Kueue's level-values order).
    pub rank: usize,
    /// For a leaf: where its nodes are in the tree's leaf members
    /// ([`TopologyTree::leaf_members`]); empty above the leaves.
    members: Range<usize>,
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
    /// Each member's position among the nodes the tree was built from (its slot, for
    /// [`TopologyTree::build_from`]), so that whoever gave them maps members back to its own
    /// ids without a lookup by name.
    pub positions: Vec<usize>,
    /// Per domain, row-major over [`TopologyTree::resources`]: a leaf's summed allocatable
    /// (zero above the leaves). The same layout as a `FreeCapacity`: `FreeCapacity::empty`
    /// is a copy of it.
    capacity: Vec<i64>,
    /// Every leaf's pooled nodes (indexes into [`TopologyTree::nodes`]), leaf after leaf
    /// (each [`Domain`] says where its own are).
    leaf_members: Vec<usize>,
    /// Each member node (index into [`TopologyTree::nodes`]), found by the node's name:
    /// hashed by [`TopologyTree::name_hasher`], so no name is copied, and four bytes a member
    /// (a build writes this table at random places). Node names are unique (the cluster
    /// state keys nodes by name); of two members given the same name, which one a lookup
    /// finds is unspecified.
    member_by_name: HashTable<u32>,
    /// The leaf of each member node.
    leaf_of_member: Vec<u32>,
    name_hasher: foldhash::fast::RandomState,
    resource_ids: FastMap<String, usize>,
    /// The flavor's nodes (those carrying its node labels) that cannot take its pods, and why.
    pub left_out: LeftOut,
}

/// Why a node of a flavor takes none of its pods.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum LeftOutReason {
    /// The node reports no `Ready` condition at all: left out of the tree.
    NoReadyCondition,
    /// `Ready` is not `True`: left out of the tree.
    NotReady,
    /// `spec.unschedulable` (cordoned): left out of the tree.
    Unschedulable,
    /// It lacks the Topology's level label: left out of the tree.
    MissingLabel(String),
    /// In the tree, but its allocatable is empty or zero: no pod fits there.
    NoAllocatable,
}

impl LeftOutReason {
    /// The reason as a metric label value (`not_ready`, `missing_label`, ...).
    pub fn slug(&self) -> &'static str {
        match self {
            Self::NoReadyCondition => "no_ready_condition",
            Self::NotReady => "not_ready",
            Self::Unschedulable => "unschedulable",
            Self::MissingLabel(_) => "missing_label",
            Self::NoAllocatable => "no_allocatable",
        }
    }
}

impl std::fmt::Display for LeftOutReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoReadyCondition => f.write_str("without a Ready condition"),
            Self::NotReady => f.write_str("not Ready"),
            Self::Unschedulable => f.write_str("unschedulable (cordoned)"),
            Self::MissingLabel(label) => write!(f, "without the level label {label}"),
            Self::NoAllocatable => f.write_str("without allocatable resources"),
        }
    }
}

/// How many nodes were left out for each reason, with the first few names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Per reason: how many nodes, and up to [`LeftOut::NAMED`] of their names (in input order).
    pub by_reason: BTreeMap<LeftOutReason, (usize, Vec<String>)>,
}

impl LeftOut {
    /// How many names each reason keeps.
    pub const NAMED: usize = 3;

    fn add(&mut self, reason: LeftOutReason, node: &str) {
        let (count, names) = self.by_reason.entry(reason).or_default();
        *count += 1;
        if names.len() < Self::NAMED {
            names.push(node.to_string());
        }
    }

    /// Nodes left out, over all reasons.
    pub fn total(&self) -> usize {
        self.by_reason.values().map(|(n, _)| n).sum()
    }

    /// `2 not Ready (h1, h2); 1 without the level label rack (x1)`; empty when none.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .by_reason
            .iter()
            .map(|(reason, (count, names))| {
                let more = count - names.len();
                let more = if more > 0 {
                    format!(", {more} more")
                } else {
                    String::new()
                };
                format!("{count} {reason} ({}{more})", names.join(", "))
            })
            .collect();
        parts.join("; ")
    }
}

/// Members `0..count` pooled by `key`: each member's pool (numbered in order of first
/// appearance) and each pool's first member.
fn pool_by<K: Hash + Eq>(count: usize, key: impl Fn(usize) -> K) -> (Vec<u32>, Vec<usize>) {
    let mut pool_of: FastMap<K, u32> = FastMap::with_capacity_and_hasher(count, Default::default());
    let mut pools = Vec::with_capacity(count);
    let mut firsts = Vec::new();
    for m in 0..count {
        let pool = *pool_of.entry(key(m)).or_insert_with(|| {
            firsts.push(m);
            firsts.len() as u32 - 1
        });
        pools.push(pool);
    }
    (pools, firsts)
}

/// [`pool_by`] for keys below `bound`: a table indexed by key instead of a hash map.
fn pool_by_dense(
    count: usize,
    bound: usize,
    key: impl Fn(usize) -> usize,
) -> (Vec<u32>, Vec<usize>) {
    let mut pool_of = vec![u32::MAX; bound];
    let mut pools = Vec::with_capacity(count);
    let mut firsts = Vec::new();
    for m in 0..count {
        let pool = &mut pool_of[key(m)];
        if *pool == u32::MAX {
            *pool = firsts.len() as u32;
            firsts.push(m);
        }
        pools.push(*pool);
    }
    (pools, firsts)
}

/// Members `0..count` in path order (rows of `depth` ranks in `paths`; level `lvl`'s ranks are
/// below `bounds[lvl]`), equal paths in member order: a stable counting sort per level,
/// innermost first, so no two paths are ever compared.
fn sort_by_path(count: usize, depth: usize, paths: &[u32], bounds: &[usize]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..count).collect();
    let mut sorted = vec![0; count];
    for lvl in (0..depth).rev() {
        let rank = |m: usize| paths[m * depth + lvl] as usize;
        // Where each rank's members start in the sorted order.
        let mut starts = vec![0usize; bounds[lvl] + 1];
        for &m in &order {
            starts[rank(m) + 1] += 1;
        }
        for r in 1..starts.len() {
            starts[r] += starts[r - 1];
        }
        for &m in &order {
            let at = &mut starts[rank(m)];
            sorted[*at] = m;
            *at += 1;
        }
        std::mem::swap(&mut order, &mut sorted);
    }
    order
}

impl TopologyTree {
    /// Builds the tree from the nodes that belong to the flavor: Ready, schedulable, carrying
    /// every `flavor_node_labels` entry and every level label. [`TopologyTree::positions`]
    /// are positions among `nodes`.
    pub fn build(
        topology_name: &str,
        levels: &[String],
        flavor_node_labels: &BTreeMap<String, String>,
        nodes: impl IntoIterator<Item = Arc<NodeInfo>>,
    ) -> Self {
        let slots = NodeDigests::of_nodes(nodes);
        let mut facts = NodeFacts::new(levels, flavor_node_labels);
        Self::build_from(topology_name, &mut facts, &slots)
    }

    /// [`TopologyTree::build`] from the nodes of digest slots (empty slots skipped), reading
    /// again only the nodes that changed since `facts` last saw them: the same tree as a build
    /// from scratch. [`TopologyTree::positions`] are slot indexes.
    pub fn build_from(topology_name: &str, facts: &mut NodeFacts, slots: &NodeDigests) -> Self {
        facts.refresh(slots);
        // The facts stand for the slots' nodes now: a member's slot has a digest.
        let digest_of = |slot: usize| {
            slots.slots()[slot]
                .as_ref()
                .expect("a slot with facts has a node")
        };
        let levels = facts.levels().to_vec();
        let depth = levels.len();
        let hostname_lowest = levels.last().is_some_and(|l| l == HOSTNAME_LABEL);
        let mut left_out = LeftOut::default();
        let mut positions: Vec<usize> = Vec::new();
        for (slot, f) in facts.facts().iter().enumerate() {
            let Some(f) = f else { continue };
            match &f.verdict {
                Verdict::OtherFlavor => {}
                Verdict::LeftOut(reason) => {
                    left_out.add(reason.clone(), &digest_of(slot).node.name)
                }
                Verdict::Member => {
                    if digest_of(slot).no_allocatable {
                        left_out.add(LeftOutReason::NoAllocatable, &digest_of(slot).node.name);
                    }
                    positions.push(slot);
                }
            }
        }
        // Label paths as rank tuples: each level's values are ranked in text order by the
        // facts (kept between builds), so paths compare as integers, never as strings.
        let mut paths: Vec<u32> = vec![0; positions.len() * depth];
        for lvl in 0..depth {
            let ranks = facts.ranks(lvl);
            for (m, &slot) in positions.iter().enumerate() {
                paths[m * depth + lvl] = ranks[facts.values_of(slot)[lvl] as usize];
            }
        }
        let member_digest = |m: usize| digest_of(positions[m]);
        let members: Vec<Arc<NodeInfo>> = (0..positions.len())
            .map(|m| Arc::clone(&member_digest(m).node))
            .collect();
        // Every member's resource key set, numbered among the members' sets; the resource
        // axis is their names' union, sorted.
        let mut set_of_id: FastMap<u32, usize> = FastMap::default();
        let mut key_set_of: Vec<u32> = Vec::with_capacity(members.len());
        let mut used_sets: Vec<u32> = Vec::new();
        let mut before: Option<(u32, usize)> = None;
        for m in 0..members.len() {
            let id = member_digest(m).key_set;
            let local = match before {
                Some((b, local)) if b == id => local,
                _ => *set_of_id.entry(id).or_insert_with(|| {
                    used_sets.push(id);
                    used_sets.len() - 1
                }),
            };
            before = Some((id, local));
            key_set_of.push(local as u32);
        }
        let mut resources: Vec<String> = used_sets
            .iter()
            .flat_map(|&id| slots.key_set(id).iter().cloned())
            .collect();
        resources.sort_unstable();
        resources.dedup();
        let resource_ids: FastMap<String, usize> = resources
            .iter()
            .enumerate()
            .map(|(i, r)| (r.clone(), i))
            .collect();
        // Each key set's names as dense resource ids, in the set's (name) order.
        let key_set_ids: Vec<Vec<usize>> = used_sets
            .iter()
            .map(|&id| slots.key_set(id).iter().map(|k| resource_ids[k]).collect())
            .collect();

        // Every member, sorted by its full path.
        let path = |m: usize| &paths[m * depth..(m + 1) * depth];
        let bounds: Vec<usize> = (0..depth).map(|lvl| facts.ranked(lvl)).collect();
        let by_path = match depth {
            0 => Vec::new(),
            _ => sort_by_path(members.len(), depth, &paths, &bounds),
        };

        // Leaves: nodes sharing a hostname (hostname-lowest) or a full path (otherwise) pool
        // into one; the first node (the lowest member) gives the path.
        let (pool_of, pool_first) = match depth {
            0 => (Vec::new(), Vec::new()),
            // A rank stands for its value: hosts pool by their hostname's rank, each below
            // the number of hostnames ranked.
            _ if hostname_lowest => pool_by_dense(members.len(), bounds[depth - 1], |m| {
                paths[m * depth + depth - 1] as usize
            }),
            _ => pool_by(members.len(), path),
        };
        // Leaves in the order of their first node's path: walk the members by path and take
        // each leaf where its first node comes.
        let mut leaf_of_pool = vec![0usize; pool_first.len()];
        let mut leaf_first: Vec<usize> = Vec::with_capacity(pool_first.len());
        for &m in &by_path {
            let pool = pool_of[m] as usize;
            if pool_first[pool] == m {
                leaf_of_pool[pool] = leaf_first.len();
                leaf_first.push(m);
            }
        }
        // Every leaf's members in one array, leaf after leaf, each leaf's in member order
        // (first node first): leaf `k`'s are `leaf_members[leaf_start[k]..leaf_start[k + 1]]`.
        let mut leaf_start = vec![0usize; leaf_first.len() + 1];
        for &pool in &pool_of {
            leaf_start[leaf_of_pool[pool as usize] + 1] += 1;
        }
        for k in 1..leaf_start.len() {
            leaf_start[k] += leaf_start[k - 1];
        }
        let mut leaf_members = vec![0usize; members.len()];
        let mut cursor = leaf_start.clone();
        for (m, &pool) in pool_of.iter().enumerate() {
            let at = &mut cursor[leaf_of_pool[pool as usize]];
            leaf_members[*at] = m;
            *at += 1;
        }

        // Every prefix of a leaf's path is a domain: walking the sorted leaves, a level starts
        // a new domain whenever its value or a level above it changes. Per level, each
        // domain's first node and its parent's position in the level above; a level's `k`th
        // domain at the lowest level is leaf `k`.
        let mut per_level: Vec<Vec<(usize, Option<usize>)>> = vec![Vec::new(); depth];
        let mut previous: Option<&[u32]> = None;
        for &first in &leaf_first {
            let p = path(first);
            let mut changed = false;
            for lvl in 0..depth {
                changed = changed || previous.is_none_or(|q| q[lvl] != p[lvl]);
                if changed {
                    let parent = lvl.checked_sub(1).map(|up| per_level[up].len() - 1);
                    per_level[lvl].push((first, parent));
                }
            }
            previous = Some(p);
        }
        let mut offsets = Vec::with_capacity(depth);
        let mut total = 0;
        for level in &per_level {
            offsets.push(total);
            total += level.len();
        }
        let width = resources.len();
        let mut domains: Vec<Domain> = Vec::with_capacity(total);
        let mut capacity = vec![0i64; width * total];
        let mut by_level = Vec::with_capacity(depth);
        for (lvl, level_domains) in per_level.into_iter().enumerate() {
            let lowest = lvl + 1 == depth;
            let mut ids = Vec::with_capacity(level_domains.len());
            for (rank, (first, parent)) in level_domains.into_iter().enumerate() {
                let idx = domains.len();
                let parent = parent.map(|p| offsets[lvl - 1] + p);
                // A parent's children come one after another in the level below.
                if let Some(p) = parent {
                    let children = &mut domains[p].children;
                    *children = match Range::is_empty(children) {
                        true => idx..idx + 1,
                        false => children.start..idx + 1,
                    };
                }
                let members = match lowest {
                    true => leaf_start[rank]..leaf_start[rank + 1],
                    false => 0..0,
                };
                let row = &mut capacity[idx * width..(idx + 1) * width];
                for &n in &leaf_members[members.clone()] {
                    let ids = &key_set_ids[key_set_of[n] as usize];
                    for (&id, value) in ids.iter().zip(slots.amounts(member_digest(n))) {
                        row[id] = row[id].saturating_add(*value);
                    }
                }
                domains.push(Domain {
                    level: lvl,
                    first_node: first,
                    parent,
                    children: 0..0,
                    rank,
                    members,
                });
                ids.push(idx);
            }
            by_level.push(ids);
        }
        let name_hasher = slots.name_hasher();
        // Each member's leaf: leaf `k` is the lowest level's `k`th domain (no leaves, and no
        // member found by name, without levels).
        let leaf_of_member: Vec<u32> = match offsets.last() {
            Some(&lowest) => pool_of
                .iter()
                .map(|&pool| (lowest + leaf_of_pool[pool as usize]) as u32)
                .collect(),
            None => Vec::new(),
        };
        let mut member_by_name = HashTable::with_capacity(leaf_of_member.len());
        for m in 0..leaf_of_member.len() {
            member_by_name.insert_unique(member_digest(m).name_hash, m as u32, |&m| {
                member_digest(m as usize).name_hash
            });
        }
        let member_nodes = members;
        Self {
            topology_name: topology_name.to_string(),
            levels,
            hostname_lowest,
            domains,
            by_level,
            resources,
            nodes: member_nodes,
            positions,
            capacity,
            leaf_members,
            member_by_name,
            leaf_of_member,
            name_hasher,
            resource_ids,
            left_out,
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
        self.member_of_node(node_name).map(|(leaf, _)| leaf)
    }

    /// A member node's leaf and its own index among the members (in a pooled leaf, the node
    /// itself, not the leaf's first member).
    pub fn member_of_node(&self, node_name: &str) -> Option<(DomainIdx, usize)> {
        self.member_by_name
            .find(self.name_hasher.hash_one(node_name), |&m| {
                self.nodes[m as usize].name == node_name
            })
            .map(|&m| (self.leaf_of_member[m as usize] as DomainIdx, m as usize))
    }

    /// A domain's own label value (its level's).
    pub fn value(&self, d: DomainIdx) -> &str {
        let domain = &self.domains[d];
        self.label_of(domain.first_node, domain.level)
    }

    /// A domain's label values, levels `0..=level`, outermost first.
    pub fn values(&self, d: DomainIdx) -> Vec<&str> {
        self.path(d).collect()
    }

    /// [`TopologyTree::values`] without collecting them: paths compare with `Iterator::cmp`.
    pub fn path(&self, d: DomainIdx) -> impl Iterator<Item = &str> + '_ {
        let domain = &self.domains[d];
        (0..=domain.level).map(|lvl| self.label_of(domain.first_node, lvl))
    }

    /// The domain's ID as Kueue writes it: the values joined by `,`.
    pub fn id(&self, d: DomainIdx) -> String {
        self.values(d).join(",")
    }

    /// A leaf's summed allocatable over [`TopologyTree::resources`] (zero above the leaves).
    pub fn capacity(&self, d: DomainIdx) -> &[i64] {
        let width = self.resources.len();
        &self.capacity[d * width..(d + 1) * width]
    }

    /// Every domain's [`TopologyTree::capacity`], row-major.
    pub fn capacities(&self) -> &[i64] {
        &self.capacity
    }

    /// A member's label value at `level`. Every member carries every level label (the build
    /// leaves out the nodes that do not), so the value is always there.
    fn label_of(&self, member: usize, level: usize) -> &str {
        self.nodes[member]
            .labels
            .get(&self.levels[level])
            .unwrap_or_default()
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
            stack.extend(self.domains[d].children.clone());
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
                .flat_map(|&f| self.domains[f].children.clone())
                .collect();
        }
        frontier
    }

    /// The first node of a leaf: the one whose labels and taints the node filters read.
    pub fn leaf_node(&self, leaf: DomainIdx) -> Option<&NodeInfo> {
        self.leaf_members(leaf).first().map(|&n| &*self.nodes[n])
    }

    /// A leaf's pooled nodes (indexes into [`TopologyTree::nodes`]), first node first; none
    /// for a domain above the leaves.
    pub fn leaf_members(&self, d: DomainIdx) -> &[usize] {
        &self.leaf_members[self.domains[d].members.clone()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::fixtures::{BLOCK, HOST, NodeBuilder, RACK};

    fn levels() -> Vec<String> {
        vec![BLOCK.into(), RACK.into(), HOST.into()]
    }

    fn flavor_labels() -> BTreeMap<String, String> {
        BTreeMap::from([("pool".to_string(), "tas".to_string())])
    }

    fn node(name: &str) -> NodeBuilder {
        NodeBuilder::new(name)
            .label("pool", "tas")
            .block("b1")
            .rack("r1")
            .cpu(8)
    }

    /// Nodes sharing a hostname pool into one leaf whatever their other labels, and the first
    /// of them (in input order) gives the leaf its path; leaves are in path order.
    #[test]
    fn a_shared_hostname_pools_under_the_first_nodes_path() {
        let nodes = [
            node("n-a").block("b2").label(HOST, "h1").build(),
            node("n-b").block("b1").label(HOST, "h1").build(),
            node("n-c").block("b1").label(HOST, "h0").build(),
        ];
        let tree = TopologyTree::build("t", &levels(), &flavor_labels(), nodes.map(Arc::new));
        let leaves = tree.leaves();
        assert_eq!(leaves.len(), 2);
        assert_eq!(tree.values(leaves[0]), ["b1", "r1", "h0"]);
        assert_eq!(tree.values(leaves[1]), ["b2", "r1", "h1"]);
        let pooled: Vec<&str> = tree
            .leaf_members(leaves[1])
            .iter()
            .map(|&m| tree.nodes[m].name.as_str())
            .collect();
        assert_eq!(pooled, ["n-a", "n-b"]);
        let cpu = tree.resource_id("cpu").unwrap();
        assert_eq!(tree.capacity(leaves[1])[cpu], 16_000, "both nodes' cpu");
        assert_eq!(tree.leaf_of_node("n-b"), Some(leaves[1]));
        let (leaf, b) = tree.member_of_node("n-b").unwrap();
        assert_eq!((leaf, tree.nodes[b].name.as_str()), (leaves[1], "n-b"));
        assert_eq!(tree.leaf_of_node("n-c"), Some(leaves[0]));
        assert_eq!(
            tree.leaf_of_node("h1"),
            None,
            "a hostname is not a node name"
        );
        let rack = tree.domains[leaves[1]].parent.unwrap();
        assert_eq!(
            tree.capacity(rack)[cpu],
            0,
            "capacity is kept on leaves only"
        );
        assert_eq!(tree.value(rack), "r1");
        assert_eq!(tree.id(leaves[1]), "b2,r1,h1");
        use std::cmp::Ordering::Less;
        assert_eq!(
            tree.path(rack).cmp(tree.path(leaves[1])),
            Less,
            "a prefix first"
        );
        assert_eq!(
            tree.path(leaves[0]).cmp(tree.path(rack)),
            Less,
            "b1 before b2"
        );
    }

    /// Whatever order the nodes come in, every level lists its domains by label path, each
    /// domain's rank is its place there, children are in path order under their parent, and
    /// a path shared by nodes without the hostname level is one leaf.
    #[test]
    fn domains_are_in_path_order_whatever_the_input_order() {
        let mut nodes = Vec::new();
        for (i, (b, r, h)) in [
            ("b2", "r2", "h9"),
            ("b1", "r2", "h3"),
            ("b2", "r1", "h1"),
            ("b1", "r1", "h4"),
            ("b1", "r2", "h2"),
            ("b10", "r1", "h0"),
            ("b1", "r1", "h10"),
        ]
        .into_iter()
        .enumerate()
        {
            nodes.push(Arc::new(
                node(&format!("n{i}"))
                    .block(b)
                    .rack(r)
                    .label(HOST, h)
                    .build(),
            ));
        }
        let tree = TopologyTree::build("t", &levels(), &flavor_labels(), nodes.clone());
        let paths: Vec<Vec<&str>> = tree.leaves().iter().map(|&d| tree.values(d)).collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
        assert_eq!(paths[0], ["b1", "r1", "h10"]);
        for level in &tree.by_level {
            for (rank, &d) in level.iter().enumerate() {
                assert_eq!(tree.domains[d].rank, rank);
                let children: Vec<Vec<&str>> = tree.domains[d]
                    .children
                    .clone()
                    .map(|c| tree.values(c))
                    .collect();
                let mut in_order = children.clone();
                in_order.sort();
                assert_eq!(children, in_order);
                if let Some(p) = tree.domains[d].parent {
                    assert!(tree.domains[p].children.contains(&d));
                }
            }
        }
        let counts: Vec<usize> = tree.by_level.iter().map(Vec::len).collect();
        assert_eq!(counts, [3, 5, 7]);
        // Each member is found by its name in the leaf that holds it.
        let found_in_their_leaves = |tree: &TopologyTree| {
            for (m, n) in tree.nodes.iter().enumerate() {
                let leaf = tree.leaf_of_node(&n.name).expect("a member is found");
                assert!(tree.leaves().contains(&leaf), "{} in a leaf", n.name);
                assert!(
                    tree.leaf_members(leaf).contains(&m),
                    "{} in its leaf",
                    n.name
                );
            }
        };
        found_in_their_leaves(&tree);
        // Without the hostname level, nodes of one rack share a leaf.
        let two = vec![BLOCK.to_string(), RACK.to_string()];
        let tree = TopologyTree::build("t", &two, &flavor_labels(), nodes.clone());
        found_in_their_leaves(&tree);
        assert_eq!(tree.leaves().len(), 5);
        let b1r2 = tree
            .leaves()
            .iter()
            .find(|&&d| tree.values(d) == ["b1", "r2"])
            .copied()
            .unwrap();
        assert_eq!(tree.leaf_members(b1r2).len(), 2);
        // Without levels there are no leaves: no node is found in one.
        let flat = TopologyTree::build("t", &[], &flavor_labels(), nodes);
        assert!(flat.leaves().is_empty());
        assert_eq!(flat.leaf_of_node("n0"), None);
    }

    /// Each reason a node of the flavor takes none of its pods is counted and named; nodes of
    /// other flavors are not the flavor's to report, and healthy nodes are members.
    #[test]
    fn the_nodes_a_flavor_leaves_out_are_counted_by_reason() {
        let mut no_condition = node("no-condition").not_ready().build();
        no_condition.ready_condition_missing = true;
        let mut cordoned = node("cordoned").build();
        cordoned.unschedulable = true;
        let mut unlabelled = node("unlabelled").build();
        unlabelled.labels.remove(RACK);
        let mut empty = node("empty").build();
        empty.allocatable.clear();
        let nodes = [
            node("ok").build(),
            no_condition,
            node("down-1").not_ready().build(),
            node("down-2").not_ready().build(),
            cordoned,
            unlabelled,
            empty,
            NodeBuilder::new("other-pool").not_ready().build(),
        ];
        let tree = TopologyTree::build("t", &levels(), &flavor_labels(), nodes.map(Arc::new));

        let names: Vec<&str> = tree.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["ok", "empty"], "members");
        let left = &tree.left_out;
        assert_eq!(left.total(), 6, "{left:?}");
        let count = |r: LeftOutReason| left.by_reason.get(&r).map(|(n, _)| *n);
        assert_eq!(count(LeftOutReason::NoReadyCondition), Some(1));
        assert_eq!(count(LeftOutReason::NotReady), Some(2));
        assert_eq!(count(LeftOutReason::Unschedulable), Some(1));
        assert_eq!(count(LeftOutReason::MissingLabel(RACK.into())), Some(1));
        assert_eq!(count(LeftOutReason::NoAllocatable), Some(1));
        assert_eq!(
            left.describe(),
            format!(
                "1 without a Ready condition (no-condition); 2 not Ready (down-1, down-2); \
                 1 unschedulable (cordoned) (cordoned); 1 without the level label {RACK} \
                 (unlabelled); 1 without allocatable resources (empty)"
            )
        );
    }

    /// Past [`LeftOut::NAMED`] names, the rest are counted.
    #[test]
    fn many_nodes_left_out_name_a_few_and_count_the_rest() {
        let nodes: Vec<Arc<NodeInfo>> = (0..5)
            .map(|i| Arc::new(node(&format!("h{i}")).not_ready().build()))
            .collect();
        let tree = TopologyTree::build("t", &levels(), &flavor_labels(), nodes);
        assert!(tree.nodes.is_empty());
        assert_eq!(tree.left_out.describe(), "5 not Ready (h0, h1, h2, 2 more)");
        let healthy = TopologyTree::build(
            "t",
            &levels(),
            &flavor_labels(),
            [Arc::new(node("h").build())],
        );
        assert_eq!(healthy.left_out.total(), 0);
        assert_eq!(healthy.left_out.describe(), "");
    }
}
