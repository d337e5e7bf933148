//! What a topology tree build reads of each node for one flavor, kept between its builds:
//! whether the node is a member (or why it is left out) and its level values as interned ids
//! (what does not depend on the flavor, resources and name hash, is in the nodes'
//! [`NodeDigests`]). A rebuild re-reads only the nodes whose `Arc` changed since the last
//! build, so it reads dense arrays instead of 15,000 separately allocated label lists; the
//! owner of the slots may read a node ahead, at its event, where the node is still in cache,
//! so that even a first build after start-up reads none.
//!
//! Invariants: the facts of a slot are what a read of the `Arc<NodeInfo>` they keep gives
//! (read from it, or from a node that differed from it only in its allocatable, which facts
//! do not read; the `Arc` is held, so its address cannot be reused by another node
//! while the facts stand);
//! every level value id of a member is interned in that level's value table; the tables'
//! ranks order ids as their texts order; the facts are only for the levels and flavor node
//! labels they were made with ([`NodeFacts::is_for`]). Tables only grow between resets: a
//! reset (everything read again at the next build) happens once they hold more than twice
//! what the live nodes can use (at a build) or the slots can (at a read ahead), which bounds
//! their size.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use super::labels::LabelLookup;
use super::node::NodeInfo;
use super::node_digest::NodeDigests;
use super::tree::LeftOutReason;

/// What a build does with a node, as read from it.
#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    /// It lacks one of the flavor's node labels: not the flavor's node at all.
    OtherFlavor,
    /// The flavor's node, but it takes none of its pods and is not in the tree.
    LeftOut(LeftOutReason),
    /// In the tree.
    Member,
}

/// One node's facts.
#[derive(Debug)]
pub(crate) struct Facts {
    /// The node they were read from.
    pub node: Arc<NodeInfo>,
    pub verdict: Verdict,
}

/// The distinct label values of one level, each with a dense id and a rank in text order.
#[derive(Debug, Default)]
pub(crate) struct ValueTable {
    /// Ids hashed by their text (the text itself is kept once, in `texts`).
    ids: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    texts: Vec<Arc<str>>,
    /// Ids in text order (every id below `order.len()`; newer ids are ranked on demand).
    order: Vec<u32>,
    /// Each ranked id's position in `order`.
    rank: Vec<u32>,
    /// The id of the last value interned: nodes come grouped (a rack's hosts one after
    /// another), so most upper-level values equal the one before and skip the hash.
    last: Option<u32>,
}

impl ValueTable {
    fn intern(&mut self, text: &Arc<str>) -> u32 {
        if let Some(id) = self.last
            && let last = &self.texts[id as usize]
            && (Arc::ptr_eq(last, text) || **last == **text)
        {
            return id;
        }
        let hash = self.hasher.hash_one(&**text);
        let texts = &self.texts;
        let id = match self.ids.find(hash, |&id| *texts[id as usize] == **text) {
            Some(&id) => id,
            None => {
                let id = texts.len() as u32;
                self.ids
                    .insert_unique(hash, id, hash_of_id(texts, &self.hasher));
                self.texts.push(Arc::clone(text));
                id
            }
        };
        self.last = Some(id);
        id
    }

    /// The rank of every id (its position among all texts in text order), ranking the ids
    /// interned since the last call: each is placed by a binary search among the ranked ones
    /// (a few text comparisons each), so a rebuild after a node joins reads a few texts, not
    /// all of them.
    fn rank_new_values(&mut self) {
        let ranked = self.order.len();
        if ranked < self.texts.len() {
            let texts = &self.texts;
            // Sorted by a key that orders as the texts do (their bytes after the prefix they
            // all share, packed into an integer), then by the text where keys tie: thousands
            // of hostnames sort as integers, each text read once, not at every comparison.
            let shared = shared_prefix(texts[ranked..].iter().map(|t| t.as_bytes()));
            let mut fresh: Vec<(u128, u32)> = (ranked..texts.len())
                .map(|id| (order_key(&texts[id].as_bytes()[shared..]), id as u32))
                .collect();
            fresh.sort_unstable_by_key(|&(key, _)| key);
            // Texts are distinct: where keys tie, the texts decide.
            for tied in fresh.chunk_by_mut(|a, b| a.0 == b.0) {
                if tied.len() > 1 {
                    tied.sort_unstable_by(|a, b| texts[a.1 as usize].cmp(&texts[b.1 as usize]));
                }
            }
            let mut merged = Vec::with_capacity(texts.len());
            let mut from = 0;
            for (_, id) in fresh {
                let text = &*texts[id as usize];
                let at = from + self.order[from..].partition_point(|&o| &*texts[o as usize] < text);
                merged.extend_from_slice(&self.order[from..at]);
                merged.push(id);
                from = at;
            }
            merged.extend_from_slice(&self.order[from..]);
            self.order = merged;
            self.rank.resize(texts.len(), 0);
            for (rank, &id) in self.order.iter().enumerate() {
                self.rank[id as usize] = rank as u32;
            }
        }
    }

    /// Room for `more` values, so that a first build does not rehash every text as the
    /// table grows.
    fn reserve(&mut self, more: usize) {
        self.ids
            .reserve(more, hash_of_id(&self.texts, &self.hasher));
        self.texts.reserve(more);
    }

    /// Gives back what [`Self::reserve`] took beyond the values interned (an upper level keeps
    /// a few dozen, not one per node).
    fn shrink_to_fit(&mut self) {
        self.ids
            .shrink_to_fit(hash_of_id(&self.texts, &self.hasher));
        self.texts.shrink_to_fit();
    }

    /// How many distinct values were ever interned since the last reset.
    fn len(&self) -> usize {
        self.texts.len()
    }
}

/// How many leading bytes all `texts` share (0 for none).
fn shared_prefix<'t>(mut texts: impl Iterator<Item = &'t [u8]>) -> usize {
    let Some(first) = texts.next() else {
        return 0;
    };
    texts.fold(first.len(), |shared, t| {
        first[..shared]
            .iter()
            .zip(t)
            .take_while(|(a, b)| a == b)
            .count()
    })
}

/// The first 16 bytes of `bytes`, big-endian, zero-padded: `a < b` as byte strings implies
/// `order_key(a) <= order_key(b)`, so keys order texts as the texts do, up to ties.
fn order_key(bytes: &[u8]) -> u128 {
    let mut key = [0u8; 16];
    let n = bytes.len().min(16);
    key[..n].copy_from_slice(&bytes[..n]);
    u128::from_be_bytes(key)
}

/// An id's hash as its table keeps it: its text's (what a table that grows or shrinks rehashes).
fn hash_of_id<'t>(
    texts: &'t [Arc<str>],
    hasher: &'t foldhash::fast::RandomState,
) -> impl Fn(&u32) -> u64 + 't {
    move |&id| hasher.hash_one(&*texts[id as usize])
}

/// The facts of every node slot for one flavor's builds (see the module documentation).
#[derive(Debug)]
pub struct NodeFacts {
    levels: Vec<String>,
    flavor_node_labels: BTreeMap<String, String>,
    /// By slot (the caller's node id); `None` for an empty slot.
    facts: Vec<Option<Facts>>,
    /// Level value ids, `slot * depth + level`; meaningful for members only.
    values: Vec<u32>,
    tables: Vec<ValueTable>,
    /// The flavor's node labels, then the level labels, as lookups that remember where the
    /// last node read had them.
    lookups: Vec<LabelLookup>,
    /// Nodes read ahead of a build ([`NodeFacts::read_ahead`]) since the last refresh.
    read_ahead: usize,
    /// What the last refresh found read; `None` before the first.
    last_reads: Option<NodeReads>,
}

/// How many node reads a build's facts made since the build before: at the nodes' events
/// (read ahead; a node that changed twice is read twice) and at the build itself (the other
/// nodes were unchanged). A node whose facts are kept (only its allocatable changed) counts
/// as a read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeReads {
    pub at_events: usize,
    pub at_build: usize,
}

impl NodeReads {
    /// Every read since the build before, wherever it was made.
    pub fn total(&self) -> usize {
        self.at_events + self.at_build
    }
}

impl NodeFacts {
    /// Tables are reset once they hold more than twice the live slots plus this.
    const RESET_SLACK: usize = 1024;
    /// How many nodes a build reads at a time ([`Self::touch_labels`]).
    const READ_BATCH: usize = 16;

    /// No facts yet, for a flavor with these levels and node labels.
    pub fn new(levels: &[String], flavor_node_labels: &BTreeMap<String, String>) -> Self {
        Self {
            levels: levels.to_vec(),
            flavor_node_labels: flavor_node_labels.clone(),
            facts: Vec::new(),
            values: Vec::new(),
            tables: levels.iter().map(|_| ValueTable::default()).collect(),
            lookups: (flavor_node_labels.keys().chain(levels))
                .map(|key| LabelLookup::new(key))
                .collect(),
            read_ahead: 0,
            last_reads: None,
        }
    }

    /// Whether these facts were made for these levels and flavor node labels.
    pub fn is_for(&self, levels: &[String], flavor_node_labels: &BTreeMap<String, String>) -> bool {
        self.levels == levels && self.flavor_node_labels == *flavor_node_labels
    }

    /// How many nodes the last build's facts read since the build before, and where; `None`
    /// before the first build.
    pub fn last_reads(&self) -> Option<NodeReads> {
        self.last_reads
    }

    /// Reads one slot's facts now, where the node is at hand (its event), so the next build
    /// finds them kept and reads dense arrays only: `None` empties the slot. Only a warm-up:
    /// [`Self::refresh`] still reads any slot whose node is not the one its facts were read
    /// from, so a slot never read ahead is read at the build.
    pub fn read_ahead(&mut self, slot: usize, node: Option<&Arc<NodeInfo>>) {
        if slot >= self.facts.len() {
            self.facts.resize_with(slot + 1, || None);
            self.values.resize((slot + 1) * self.levels.len(), 0);
        }
        match node {
            None => self.facts[slot] = None,
            Some(n)
                if self.facts[slot]
                    .as_ref()
                    .is_some_and(|f| Arc::ptr_eq(n, &f.node)) => {}
            Some(n) => {
                self.update(slot, n);
                self.read_ahead += 1;
                // Tables grow between builds too: bounded by the slots (the live nodes are
                // only counted at a build), every node read again at the next one.
                if self.outgrown(self.facts.len()) {
                    *self = Self::new(&self.levels, &self.flavor_node_labels);
                }
            }
        }
    }

    /// Whether a table holds more than twice what `live` nodes can use (plus the slack): time
    /// for a reset.
    fn outgrown(&self, live: usize) -> bool {
        let bound = 2 * live + Self::RESET_SLACK;
        self.tables.iter().any(|t| t.len() > bound)
    }

    /// Brings a slot's facts up to `node`: when it differs from the node they were read from
    /// in its allocatable only (the same name, flags and label texts; a capacity update or a
    /// resource added), the facts stand and only the node they stand for is replaced;
    /// otherwise it is read afresh.
    fn update(&mut self, slot: usize, node: &Arc<NodeInfo>) {
        if let Some(f) = &mut self.facts[slot]
            && only_allocatable_differs(&f.node, node)
        {
            f.node = Arc::clone(node);
            return;
        }
        self.facts[slot] = Some(Facts {
            verdict: self.verdict(slot, node),
            node: Arc::clone(node),
        });
    }

    /// The levels these facts are for.
    pub(crate) fn levels(&self) -> &[String] {
        &self.levels
    }

    /// Brings every slot's facts up to date with the nodes of `slots`: a slot whose node is
    /// the same `Arc` as last time keeps its facts, any other is brought up to it
    /// ([`Self::update`]); values new to a level are ranked.
    pub(crate) fn refresh(&mut self, slots: &NodeDigests) {
        let depth = self.levels.len();
        self.facts.truncate(slots.len());
        self.facts.resize_with(slots.len(), || None);
        self.values.resize(slots.len() * depth, 0);
        // Empty slots lose their facts; the slots whose node is not the one read last time
        // are read again below.
        let mut to_read: Vec<(usize, &Arc<NodeInfo>)> = Vec::new();
        for (slot, (node, facts)) in slots.nodes().zip(&mut self.facts).enumerate() {
            match node {
                None => *facts = None,
                Some(n) if facts.as_ref().is_some_and(|f| Arc::ptr_eq(n, &f.node)) => {}
                Some(n) => to_read.push((slot, n)),
            }
        }
        // A first build reads every node: room for as many values, given back after.
        let many = to_read.len() > Self::RESET_SLACK;
        if many {
            for table in &mut self.tables {
                table.reserve(to_read.len());
            }
        }
        for chunk in to_read.chunks(Self::READ_BATCH) {
            self.touch_labels(chunk);
            for &(slot, node) in chunk {
                self.update(slot, node);
            }
        }
        if many {
            for table in &mut self.tables {
                table.shrink_to_fit();
            }
        }
        self.last_reads = Some(NodeReads {
            at_events: std::mem::take(&mut self.read_ahead),
            at_build: to_read.len(),
        });
        if self.outgrown(self.facts.iter().flatten().count()) {
            *self = Self::new(&self.levels, &self.flavor_node_labels);
            self.refresh(slots);
            return;
        }
        for table in &mut self.tables {
            table.rank_new_values();
        }
    }

    /// Reads the label values the lookups will read of each node of a batch, and their first
    /// byte, without acting on them: each node's labels and values sit in allocations of their
    /// own, cold when every node is read at once (a new flavor or Topology), and a loop that
    /// only loads keeps many of those cache misses in flight together, where the full read of
    /// one node after another would wait for each in turn. The reads after find them cached.
    fn touch_labels(&mut self, batch: &[(usize, &Arc<NodeInfo>)]) {
        let mut seen = 0u8;
        for (_, node) in batch {
            for lookup in &mut self.lookups {
                if let Some(value) = lookup.value_in(&node.labels) {
                    seen ^= value.as_bytes().first().copied().unwrap_or(0);
                }
            }
        }
        std::hint::black_box(seen);
    }

    /// The node's verdict; for a member, its level value ids are written to its slot.
    fn verdict(&mut self, slot: usize, node: &NodeInfo) -> Verdict {
        let (flavor_lookups, level_lookups) =
            self.lookups.split_at_mut(self.flavor_node_labels.len());
        let of_flavor = (self.flavor_node_labels.values().zip(flavor_lookups))
            .all(|(want, lookup)| lookup.value_in(&node.labels).is_some_and(|v| **v == **want));
        if !of_flavor {
            return Verdict::OtherFlavor;
        }
        if let Some(reason) = left_out_because(node) {
            return Verdict::LeftOut(reason);
        }
        let depth = self.levels.len();
        for ((lvl, level), lookup) in self.levels.iter().enumerate().zip(level_lookups) {
            // The first level it lacks, outermost first (values interned for the levels
            // above are garbage the reset bound covers).
            let Some(value) = lookup.value_in(&node.labels) else {
                return Verdict::LeftOut(LeftOutReason::MissingLabel(level.clone()));
            };
            self.values[slot * depth + lvl] = self.tables[lvl].intern(value);
        }
        Verdict::Member
    }

    /// Every slot's facts, `None` for empty slots.
    pub(crate) fn facts(&self) -> &[Option<Facts>] {
        &self.facts
    }

    /// A slot's level value ids, outermost first.
    pub(crate) fn values_of(&self, slot: usize) -> &[u32] {
        let depth = self.levels.len();
        &self.values[slot * depth..(slot + 1) * depth]
    }

    /// The rank of every value id of `level`, in text order (as of the last refresh).
    pub(crate) fn ranks(&self, level: usize) -> &[u32] {
        &self.tables[level].rank
    }
}

/// Whether a flavor's build reads the same of `new` as of `old` but the allocatable: the same
/// name, readiness, cordon and label texts (the same shared allocations; labels equal in text
/// only are read afresh).
fn only_allocatable_differs(old: &NodeInfo, new: &NodeInfo) -> bool {
    old.name == new.name
        && old.ready == new.ready
        && old.ready_condition_missing == new.ready_condition_missing
        && old.unschedulable == new.unschedulable
        && old.labels.same_texts_as(&new.labels)
}

/// Why `node` cannot be a member of any tree, if it cannot (its labels aside).
fn left_out_because(node: &NodeInfo) -> Option<LeftOutReason> {
    if node.ready_condition_missing {
        return Some(LeftOutReason::NoReadyCondition);
    }
    if !node.ready {
        return Some(LeftOutReason::NotReady);
    }
    if node.unschedulable {
        return Some(LeftOutReason::Unschedulable);
    }
    None
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    use super::*;
    use crate::topology::fixtures::{BLOCK, HOST, NodeBuilder, RACK};
    use crate::topology::tree::{DomainIdx, TopologyTree};

    /// A node as generated: its slot gives its name, the rest its labels and state.
    #[derive(Debug, Clone)]
    struct Spec {
        block: u8,
        rack: u8,
        /// Hostnames repeat across slots, so hosts pool in hostname-lowest trees.
        host: u8,
        of_flavor: bool,
        ready: bool,
        unschedulable: bool,
        without_rack: bool,
        /// 0: cpu and pods; 1: with a GPU too; 2: pods only.
        keys: u8,
        cpu: i64,
    }

    impl Spec {
        fn node(&self, slot: usize) -> Arc<NodeInfo> {
            let mut b = NodeBuilder::new(&format!("n{slot}"))
                .block(&format!("b{}", self.block))
                .label(HOST, &format!("h{}", self.host))
                .label("pool", if self.of_flavor { "tas" } else { "other" });
            if !self.without_rack {
                b = b.rack(&format!("r{}", self.rack));
            }
            if !self.ready {
                b = b.not_ready();
            }
            b = match self.keys {
                0 => b.cpu(self.cpu),
                1 => b.cpu(self.cpu).resource("nvidia.com/gpu", 8),
                _ => b,
            };
            let mut node = b.build();
            node.unschedulable = self.unschedulable;
            Arc::new(node)
        }
    }

    prop_compose! {
        fn spec()(
            (block, rack, host) in (0u8..3, 0u8..4, 0u8..24),
            of_flavor in prop::bool::weighted(0.9),
            ready in prop::bool::weighted(0.9),
            unschedulable in prop::bool::weighted(0.1),
            without_rack in prop::bool::weighted(0.1),
            keys in 0u8..3,
            cpu in 0i64..16,
        ) -> Spec {
            Spec { block, rack, host, of_flavor, ready, unschedulable, without_rack, keys, cpu }
        }
    }

    /// A new node for a slot.
    #[derive(Debug, Clone)]
    enum Edit {
        /// One made from this spec, or none (the slot empties).
        Node(Option<Spec>),
        /// The slot's node with every allocatable amount set to this (the same label texts:
        /// a capacity update, as the cluster state makes it).
        Amounts(i64),
        /// The slot's node (the same label texts) with readiness, cordon or the Ready
        /// condition's presence flipped, by bit.
        Flags(u8),
        /// The slot's node (the same label texts) with a resource added, or removed if it had
        /// it.
        Keys,
    }

    /// A step's change to one slot: `None` keeps its node (the same `Arc`), `Some((edit,
    /// ahead))` gives it a new one, read ahead of the build when `ahead`.
    type Change = Option<(Edit, bool)>;

    /// Levels (hostname lowest or not), whether the flavor has a node label, the first slots,
    /// and the steps after (each may add slots at the end).
    type Case = (bool, bool, Vec<Option<Spec>>, Vec<Vec<Change>>);

    fn case() -> impl Strategy<Value = Case> {
        let slot = prop::option::weighted(0.85, spec());
        let edit = prop_oneof![
            prop::option::weighted(0.85, spec()).prop_map(Edit::Node),
            (-1i64..3).prop_map(Edit::Amounts),
            (1u8..8).prop_map(Edit::Flags),
            Just(Edit::Keys),
        ];
        let change = prop::option::weighted(0.3, (edit, any::<bool>()));
        (
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec(slot, 1..30),
            prop::collection::vec(prop::collection::vec(change, 0..36), 1..6),
        )
    }

    /// Fresh digests of the slots' nodes.
    fn digests_of(slots: &[Option<Arc<NodeInfo>>]) -> NodeDigests {
        let mut digests = NodeDigests::new();
        for (i, node) in slots.iter().enumerate() {
            digests.set(i, node.clone());
        }
        digests
    }

    /// A build from scratch over the slots' nodes (empty slots skipped).
    fn build_from_scratch(
        levels: &[String],
        labels: &BTreeMap<String, String>,
        slots: &[Option<Arc<NodeInfo>>],
    ) -> TopologyTree {
        TopologyTree::build("t", levels, labels, slots.iter().flatten().cloned())
    }

    /// Node `i` of a churn round: in rack `i % 4`, with a hostname new in every round.
    fn churned(round: usize, i: usize) -> Arc<NodeInfo> {
        let node = NodeBuilder::new(&format!("n{i}"))
            .block("b1")
            .rack(&format!("r{}", i % 4))
            .label(HOST, &format!("h{round}-{i}"))
            .cpu(8)
            .build();
        Arc::new(node)
    }

    /// Everything a tree says, independent of hash order and hashers.
    fn describe(tree: &TopologyTree) -> String {
        let domains: Vec<String> = (0..tree.domains.len())
            .map(|d| {
                let domain = &tree.domains[d];
                let nodes: Vec<&str> = tree
                    .leaf_members(d)
                    .iter()
                    .map(|&n| tree.nodes[n].name.as_str())
                    .collect();
                format!(
                    "{} {:?} parent {:?} children {:?} rank {} nodes {nodes:?} capacity {:?}",
                    domain.level,
                    tree.values(d),
                    domain.parent,
                    domain.children,
                    domain.rank,
                    tree.capacity(d)
                )
            })
            .collect();
        let leaf_of: Vec<Option<DomainIdx>> = tree
            .nodes
            .iter()
            .map(|n| tree.leaf_of_node(&n.name))
            .collect();
        let resource_ids: Vec<Option<usize>> =
            tree.resources.iter().map(|r| tree.resource_id(r)).collect();
        format!(
            "levels {:?} hostname-lowest {} resources {:?} {resource_ids:?}\npositions {:?}\n\
             by level {:?}\nleaf of each member {leaf_of:?}\nleft out {:?}\n{}",
            tree.levels,
            tree.hostname_lowest,
            tree.resources,
            tree.positions,
            tree.by_level,
            tree.left_out,
            domains.join("\n")
        )
    }

    /// A build that carries its facts and the nodes' digests from build to build gives, after
    /// every change, the same tree as a build from scratch over the same nodes, whether the
    /// changed nodes were read ahead at their change or at the build; the cases include
    /// builds that read no node again, some, and all, some read ahead, capacity updates
    /// (amounts copied into kept digests, facts kept), flag changes that keep the label texts
    /// (read afresh), resource-name changes (facts kept, digests read afresh), and trees that
    /// pool hosts and leave nodes out.
    #[test]
    fn a_rebuild_from_kept_facts_is_the_build_from_scratch() {
        let mut runner = TestRunner::new(Config {
            failure_persistence: None,
            ..Config::default()
        });
        let (reused, reread, ahead, amounts, same_labels, pooled, left_out) = (
            Cell::new(0),
            Cell::new(0),
            Cell::new(0),
            Cell::new(0),
            Cell::new(0),
            Cell::new(0),
            Cell::new(0),
        );
        runner
            .run(&case(), |(hostname_lowest, flavor_label, first, steps)| {
                let levels: Vec<String> = if hostname_lowest {
                    vec![BLOCK.into(), RACK.into(), HOST.into()]
                } else {
                    vec![BLOCK.into(), RACK.into()]
                };
                let labels: BTreeMap<String, String> = if flavor_label {
                    BTreeMap::from([("pool".to_string(), "tas".to_string())])
                } else {
                    BTreeMap::new()
                };
                let mut slots: Vec<Option<Arc<NodeInfo>>> = first
                    .iter()
                    .enumerate()
                    .map(|(i, s)| s.as_ref().map(|s| s.node(i)))
                    .collect();
                let mut facts = NodeFacts::new(&levels, &labels);
                // Kept from step to step, as an owner of the nodes keeps them.
                let mut digests = digests_of(&slots);
                for step in std::iter::once(Vec::new()).chain(steps) {
                    for (i, change) in step.into_iter().enumerate() {
                        if i >= slots.len() {
                            slots.push(None);
                        }
                        if let Some((edit, read_ahead)) = change {
                            slots[i] = match (edit, &slots[i]) {
                                (Edit::Node(content), _) => content.map(|s| s.node(i)),
                                (Edit::Amounts(amount), Some(node)) => {
                                    amounts.set(amounts.get() + 1);
                                    let mut node = NodeInfo::clone(node);
                                    node.allocatable.values_mut().for_each(|v| *v = amount);
                                    Some(Arc::new(node))
                                }
                                (Edit::Flags(bits), Some(node)) => {
                                    same_labels.set(same_labels.get() + 1);
                                    let mut node = NodeInfo::clone(node);
                                    node.ready ^= bits & 1 != 0;
                                    node.unschedulable ^= bits & 2 != 0;
                                    node.ready_condition_missing ^= bits & 4 != 0;
                                    Some(Arc::new(node))
                                }
                                (Edit::Keys, Some(node)) => {
                                    same_labels.set(same_labels.get() + 1);
                                    let mut node = NodeInfo::clone(node);
                                    if node.allocatable.remove("example.com/nic").is_none() {
                                        node.allocatable.insert("example.com/nic".into(), 2);
                                    }
                                    Some(Arc::new(node))
                                }
                                (_, None) => None,
                            };
                            digests.set(i, slots[i].clone());
                            if read_ahead {
                                facts.read_ahead(i, slots[i].as_ref());
                            }
                        }
                    }
                    let kept = TopologyTree::build_from("t", &mut facts, &digests);
                    let fresh = build_from_scratch(&levels, &labels, &slots);
                    // Slots and positions among the live nodes differ only by the empty slots.
                    let slot_of: Vec<usize> =
                        (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
                    let fresh_slots: Vec<usize> =
                        fresh.positions.iter().map(|&p| slot_of[p]).collect();
                    prop_assert_eq!(&kept.positions, &fresh_slots);
                    let mut fresh = fresh;
                    fresh.positions = fresh_slots;
                    prop_assert_eq!(describe(&kept), describe(&fresh));
                    // Both read the nodes through digests: hold the leaves' capacity and the
                    // nodes left out for no allocatable to the nodes themselves too.
                    for &leaf in kept.leaves() {
                        for (id, name) in kept.resources.iter().enumerate() {
                            let total: i64 = (kept.leaf_members(leaf).iter())
                                .map(|&m| kept.nodes[m].allocatable.get(name).copied().unwrap_or(0))
                                .fold(0, i64::saturating_add);
                            prop_assert_eq!(kept.capacity(leaf)[id], total, "{}", name);
                        }
                    }
                    let no_allocatable = (kept.nodes.iter())
                        .filter(|n| n.allocatable.values().all(|&v| v <= 0))
                        .count();
                    prop_assert_eq!(
                        (kept.left_out.by_reason.get(&LeftOutReason::NoAllocatable))
                            .map_or(0, |(count, _)| *count),
                        no_allocatable
                    );
                    // Both come from the same ranks: hold those to the texts' own order.
                    for level in &kept.by_level {
                        for pair in level.windows(2) {
                            prop_assert!(
                                kept.path(pair[0]).lt(kept.path(pair[1])),
                                "{:?} before {:?}",
                                kept.values(pair[0]),
                                kept.values(pair[1])
                            );
                        }
                    }
                    let live = slots.iter().flatten().count();
                    let reads = facts.last_reads().expect("built");
                    if reads.total() < live {
                        reused.set(reused.get() + 1);
                    }
                    if reads.at_build > 0 {
                        reread.set(reread.get() + 1);
                    }
                    if reads.at_events > 0 {
                        ahead.set(ahead.get() + 1);
                    }
                    if kept
                        .leaves()
                        .iter()
                        .any(|&l| kept.leaf_members(l).len() > 1)
                    {
                        pooled.set(pooled.get() + 1);
                    }
                    if kept.left_out.total() > 0 {
                        left_out.set(left_out.get() + 1);
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        // The generator makes what the property is about, many times over.
        for (what, count) in [
            ("builds that kept some facts", reused.get()),
            ("builds that read nodes again", reread.get()),
            ("builds after nodes read ahead", ahead.get()),
            ("capacity updates", amounts.get()),
            (
                "flag or resource changes keeping the label texts",
                same_labels.get(),
            ),
            ("trees that pool hosts", pooled.get()),
            ("trees that leave nodes out", left_out.get()),
        ] {
            assert!(count >= 20, "only {count} {what}");
        }
    }

    /// A first build of many nodes sizes every level's table for all of them and gives the
    /// excess back after: the upper levels keep room for their few values, not one per node,
    /// and builds after it still find every value (the tables were rehashed right).
    #[test]
    fn a_first_build_sizes_its_tables_once_and_gives_the_excess_back() {
        let levels: Vec<String> = vec![BLOCK.into(), RACK.into(), HOST.into()];
        let node = |i: usize, rack: usize| {
            let node = NodeBuilder::new(&format!("n{i}"))
                .block(&format!("b{}", rack / 10))
                .rack(&format!("r{rack}"))
                .label(HOST, &format!("n{i}"))
                .cpu(8)
                .build();
            Some(Arc::new(node))
        };
        let mut slots: Vec<Option<Arc<NodeInfo>>> = (0..1_500).map(|i| node(i, i / 50)).collect();
        let mut facts = NodeFacts::new(&levels, &BTreeMap::new());
        let first = TopologyTree::build_from("t", &mut facts, &digests_of(&slots));
        assert_eq!(
            facts.last_reads().map(|r| r.at_build),
            Some(1_500),
            "a first build reads every node"
        );
        assert_eq!(first.leaves().len(), 1_500);
        let held: Vec<(usize, usize)> = facts
            .tables
            .iter()
            .map(|t| (t.len(), t.ids.capacity()))
            .collect();
        assert_eq!(held.iter().map(|h| h.0).collect::<Vec<_>>(), [3, 30, 1_500]);
        assert!(
            held[0].1 < 64 && held[1].1 < 64,
            "upper levels hold {held:?}"
        );
        assert!(held[2].1 >= 1_500, "hostnames hold {held:?}");
        // A node moves rack, another joins: the same tree as a build from scratch.
        slots[7] = node(7, 29);
        slots.push(node(1_500, 3));
        let kept = TopologyTree::build_from("t", &mut facts, &digests_of(&slots));
        assert_eq!(
            facts.last_reads(),
            Some(NodeReads {
                at_events: 0,
                at_build: 2
            })
        );
        let fresh = build_from_scratch(&levels, &BTreeMap::new(), &slots);
        assert_eq!(describe(&kept), describe(&fresh));
        assert_eq!(
            facts.tables.iter().map(ValueTable::len).collect::<Vec<_>>(),
            [3, 30, 1_501]
        );
    }

    /// Values that no node uses any more are dropped once they outnumber the
    /// live nodes' twice over (plus the slack): facts kept for long do not grow without bound,
    /// and the trees stay right through the reset.
    #[test]
    fn kept_facts_stay_bounded_as_hostnames_churn() {
        let levels: Vec<String> = vec![BLOCK.into(), RACK.into(), HOST.into()];
        let mut facts = NodeFacts::new(&levels, &BTreeMap::new());
        let mut most = 0;
        for round in 0..200 {
            let slots: Vec<Option<Arc<NodeInfo>>> =
                (0..20).map(|i| Some(churned(round, i))).collect();
            let tree = TopologyTree::build_from("t", &mut facts, &digests_of(&slots));
            assert_eq!(tree.leaves().len(), 20, "round {round}");
            let host = tree.value(tree.leaves()[0]);
            assert_eq!(host, format!("h{round}-0"), "round {round}");
            most = most.max(facts.tables[2].len());
        }
        // 4,000 hostnames were seen; never more than the bound were held.
        assert!(most > 2 * 20, "the churn reached the table: {most}");
        assert!(most <= 2 * 20 + NodeFacts::RESET_SLACK, "held {most}");
    }

    /// A table ranks its values as their texts order, ranked in one batch or in two (the
    /// second merged into the first), whatever they share: long common prefixes, ties past
    /// the 16 bytes its sort key holds, a text that is the start of another, NUL bytes that
    /// look like the key's padding, multi-byte characters.
    #[test]
    fn ranks_order_values_as_their_texts_order() {
        let mut runner = TestRunner::new(Config {
            failure_persistence: None,
            ..Config::default()
        });
        let prefix = prop::sample::select(vec!["", "n-", "gke-cluster-default-pool-1a2b3c4d-"]);
        let text = (prefix, "[ab\\x00é]{0,24}").prop_map(|(p, body)| format!("{p}{body}"));
        let (ties, merged) = (Cell::new(0), Cell::new(0));
        runner
            .run(
                &(
                    prop::collection::vec(text, 1..60),
                    any::<prop::sample::Index>(),
                ),
                |(texts, split)| {
                    let mut table = ValueTable::default();
                    let cut = split.index(texts.len() + 1);
                    for batch in [&texts[..cut], &texts[cut..]] {
                        for t in batch {
                            table.intern(&Arc::from(t.as_str()));
                        }
                        table.rank_new_values();
                    }
                    let mut by_rank: Vec<&str> = vec![""; table.len()];
                    for (id, text) in table.texts.iter().enumerate() {
                        by_rank[table.rank[id] as usize] = text;
                    }
                    let mut sorted: Vec<&str> = texts.iter().map(String::as_str).collect();
                    sorted.sort_unstable();
                    sorted.dedup();
                    prop_assert_eq!(by_rank, sorted.clone());
                    let shared = shared_prefix(sorted.iter().map(|t| t.as_bytes()));
                    let keys: Vec<u128> = sorted
                        .iter()
                        .map(|t| order_key(&t.as_bytes()[shared..]))
                        .collect();
                    if keys.windows(2).any(|k| k[0] == k[1]) {
                        ties.set(ties.get() + 1);
                    }
                    if cut > 0 && cut < texts.len() {
                        merged.set(merged.get() + 1);
                    }
                    Ok(())
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
        // The generator makes keys that tie (the texts decide) and rankings in two batches.
        assert!(ties.get() >= 20, "only {} cases with tied keys", ties.get());
        assert!(merged.get() >= 20, "only {} merged rankings", merged.get());
    }

    /// Nodes read ahead with no build between keep the tables bounded too: the churn resets
    /// them, and the build after is the build from scratch.
    #[test]
    fn reads_ahead_alone_keep_the_tables_bounded() {
        let levels: Vec<String> = vec![BLOCK.into(), RACK.into(), HOST.into()];
        let mut facts = NodeFacts::new(&levels, &BTreeMap::new());
        let mut slots: Vec<Option<Arc<NodeInfo>>> = vec![None; 20];
        let mut most = 0;
        for round in 0..200 {
            for (i, slot) in slots.iter_mut().enumerate() {
                *slot = Some(churned(round, i));
                facts.read_ahead(i, slot.as_ref());
                most = most.max(facts.tables[2].len());
            }
        }
        assert!(most > 2 * 20, "the churn reached the table: {most}");
        assert!(most <= 2 * 20 + NodeFacts::RESET_SLACK, "held {most}");
        let kept = TopologyTree::build_from("t", &mut facts, &digests_of(&slots));
        let fresh = build_from_scratch(&levels, &BTreeMap::new(), &slots);
        assert_eq!(describe(&kept), describe(&fresh));
    }
}
