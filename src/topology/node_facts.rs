//! What a topology tree build reads of each node for one flavor, kept between its builds:
//! whether the node is a member (or why it is left out), its level values as label text ids
//! (what does not depend on the flavor, resources and name hash, is in the nodes'
//! [`NodeDigests`]), and each level's values ranked in text order. A build reads the nodes
//! through their digests' label id pairs, consecutive in memory, and re-reads only the nodes
//! whose digest stamp changed since the last build; the owner of the slots may read a node
//! ahead, at its event, so that even a first build after start-up reads none.
//!
//! Invariants: the facts of a slot are what a read of the digest with their stamp gives, and
//! a member's value ids are texts of [`NodeDigests::label_texts`] that its digest holds (kept
//! facts stand only while the digest has their stamp, so the ids name the same texts); a
//! level's ranks order the ids ranked as their texts order, and are ranked again from scratch
//! whenever the texts were swept since (an id may have come back for another text) or they
//! hold more than twice what the members use (plus a slack), which bounds their size; the
//! facts are only for the levels and flavor node labels they were made with
//! ([`NodeFacts::is_for`]).

use std::collections::BTreeMap;

use super::labels::{LabelTexts, TextsStamp, head_key};
use super::node_digest::{NodeDigest, NodeDigests, Origin};
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
    /// The stamp of the digest they were read from.
    stamp: u64,
    pub verdict: Verdict,
}

/// An id not ranked (nor queued to be).
const UNRANKED: u32 = u32::MAX;
/// An id queued to be ranked at the next refresh.
const QUEUED: u32 = u32::MAX - 1;

/// One level's values (label text ids), ranked in text order.
#[derive(Debug, Default)]
struct LevelRanks {
    /// By text id: its position in `order`, or [`UNRANKED`] / [`QUEUED`].
    rank: Vec<u32>,
    /// Ranked ids in text order.
    order: Vec<u32>,
    /// Ids met since the last ranking and not ranked yet.
    fresh: Vec<u32>,
    /// The texts' sweeps when the ranks were made: ids met since may name other texts.
    sweeps: u64,
    /// Set when the ranks must be made again from the members (too many ids queued between
    /// builds): nothing is queued until then.
    from_scratch: bool,
}

impl LevelRanks {
    /// Queues `id` to be ranked when it is not.
    fn meet(&mut self, id: u32) {
        if self.from_scratch {
            return;
        }
        let id = id as usize;
        if id >= self.rank.len() {
            self.rank.resize(id + 1, UNRANKED);
        }
        if self.rank[id] == UNRANKED {
            self.rank[id] = QUEUED;
            self.fresh.push(id as u32);
        }
    }

    /// Forgets every rank: the next refresh ranks the members' values from scratch.
    fn forget(&mut self) {
        self.rank.iter_mut().for_each(|r| *r = UNRANKED);
        self.order.clear();
        self.fresh.clear();
        self.from_scratch = true;
    }

    /// Ranks the ids met since the last call: they are sorted by their texts and merged
    /// into the ranked ones (each placed by a binary search among them, a few text
    /// comparisons), so a rebuild after a node joins reads a few texts, not all of them.
    fn rank_new_values(&mut self, texts: &LabelTexts) {
        if self.fresh.is_empty() {
            return;
        }
        let text = |id: u32| texts.text(id).expect("a member's value is a kept text");
        // Sorted by the texts' heads (their first bytes as integers, kept with the texts in
        // one array): thousands of hostnames sort as integers without reading a text; texts
        // whose heads tie are sorted by what follows.
        let mut fresh: Vec<(u128, u32)> = (self.fresh.drain(..))
            .map(|id| (texts.head(id), id))
            .collect();
        fresh.sort_unstable_by_key(|&(key, _)| key);
        for tied in fresh.chunk_by_mut(|a, b| a.0 == b.0) {
            if tied.len() > 1 {
                sort_tied_heads(tied, &text);
            }
        }
        let mut merged = Vec::with_capacity(self.order.len() + fresh.len());
        let mut from = 0;
        for (_, id) in fresh {
            let t = text(id);
            let at = from + self.order[from..].partition_point(|&o| text(o) < t);
            merged.extend_from_slice(&self.order[from..at]);
            merged.push(id);
            from = at;
        }
        merged.extend_from_slice(&self.order[from..]);
        self.order = merged;
        for (rank, &id) in self.order.iter().enumerate() {
            self.rank[id as usize] = rank as u32;
        }
    }
}

/// How many leading bytes all `texts` share (0 for none).
fn shared_prefix<'t>(mut texts: impl Iterator<Item = &'t [u8]>) -> usize {
    let Some(first) = texts.next() else {
        return 0;
    };
    texts.fold(first.len(), |shared, t| common_prefix(&first[..shared], t))
}

/// How many leading bytes `a` and `b` share, compared 16 bytes at a time (hostnames of one
/// node pool share their first 30 or more).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut at = 0;
    while let (Some(x), Some(y)) = (a[at..].first_chunk::<16>(), b[at..].first_chunk::<16>()) {
        // Loaded little-endian, the first differing byte is the lowest differing one.
        let differ = u128::from_le_bytes(*x) ^ u128::from_le_bytes(*y);
        if differ != 0 {
            return at + differ.trailing_zeros() as usize / 8;
        }
        at += 16;
    }
    at + (a[at..].iter().zip(&b[at..]))
        .take_while(|(x, y)| x == y)
        .count()
}

/// Sorts ids whose texts share their first 16 bytes: keyed again by the bytes after the
/// prefix they all share (each text read once), then by the texts where those keys tie.
fn sort_tied_heads<'t>(tied: &mut [(u128, u32)], text: &impl Fn(u32) -> &'t str) {
    let shared = shared_prefix(tied.iter().map(|&(_, id)| text(id).as_bytes()));
    for (key, id) in tied.iter_mut() {
        *key = head_key(&text(*id).as_bytes()[shared..]);
    }
    tied.sort_unstable_by_key(|&(key, _)| key);
    for still in tied.chunk_by_mut(|a, b| a.0 == b.0) {
        if still.len() > 1 {
            still.sort_unstable_by(|a, b| text(a.1).cmp(text(b.1)));
        }
    }
}

/// The flavor's node labels and the level labels as label text ids, looked up in the nodes'
/// texts (`None`: no node carries that text).
#[derive(Debug, Default)]
struct KeyIds {
    /// Each flavor node label's key and wanted value.
    flavor: Vec<(Option<u32>, Option<u32>)>,
    /// Each level's key.
    levels: Vec<Option<u32>>,
    /// The texts' stamp when looked up; `None` before the first.
    looked_up: Option<TextsStamp>,
}

impl KeyIds {
    /// Looks the ids up again unless they still hold: no sweep since (every id found names
    /// the same text) and no text added since if one was not found.
    fn refresh(
        &mut self,
        texts: &LabelTexts,
        levels: &[String],
        flavor_node_labels: &BTreeMap<String, String>,
    ) {
        let now = texts.stamp();
        let all_found = self.flavor.iter().all(|(k, v)| k.is_some() && v.is_some())
            && self.levels.iter().all(Option::is_some);
        match self.looked_up {
            Some(then) if then.sweeps == now.sweeps && (then.added == now.added || all_found) => {
                return;
            }
            _ => {}
        }
        self.flavor = (flavor_node_labels.iter())
            .map(|(k, v)| (texts.id_of(k), texts.id_of(v)))
            .collect();
        self.levels = levels.iter().map(|l| texts.id_of(l)).collect();
        self.looked_up = Some(now);
    }
}

/// Whether a slot's facts make its node a member of the tree.
fn is_member(facts: &Option<Facts>) -> bool {
    facts
        .as_ref()
        .is_some_and(|f| matches!(f.verdict, Verdict::Member))
}

/// The value id of `key` among a node's label id pairs; `hint` is where it was on the node
/// read before (nodes of a cluster carry the same keys), tried first.
fn value_of(pairs: &[(u32, u32)], key: u32, hint: &mut usize) -> Option<u32> {
    if let Some(&(k, v)) = pairs.get(*hint)
        && k == key
    {
        return Some(v);
    }
    let at = pairs.iter().position(|&(k, _)| k == key)?;
    *hint = at;
    Some(pairs[at].1)
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
    ranks: Vec<LevelRanks>,
    keys: KeyIds,
    /// Per flavor node label then level, where the last node read had it.
    hints: Vec<usize>,
    /// Nodes read ahead of a build ([`NodeFacts::read_ahead`]) since the last refresh.
    read_ahead: usize,
    /// What the last refresh found read; `None` before the first.
    last_reads: Option<NodeReads>,
    /// The store of the digests read; `None` before the first read.
    origin: Option<Origin>,
}

/// How many node reads a build's facts made since the build before: at the nodes' events
/// (read ahead; a node that changed twice is read twice) and at the build itself (the other
/// nodes were unchanged).
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
    /// Ranks are made again from scratch once they hold more than twice the members plus
    /// this, and ids queued between builds are dropped (for a ranking from scratch) once they
    /// number more than twice the slots plus this.
    const RESET_SLACK: usize = 1024;

    /// No facts yet, for a flavor with these levels and node labels.
    pub fn new(levels: &[String], flavor_node_labels: &BTreeMap<String, String>) -> Self {
        Self {
            levels: levels.to_vec(),
            flavor_node_labels: flavor_node_labels.clone(),
            facts: Vec::new(),
            values: Vec::new(),
            ranks: levels.iter().map(|_| LevelRanks::default()).collect(),
            keys: KeyIds::default(),
            hints: vec![0; flavor_node_labels.len() + levels.len()],
            read_ahead: 0,
            last_reads: None,
            origin: None,
        }
    }

    /// Starts over when `slots` are not the store the facts were read from (stamps and ids
    /// are a store's own).
    fn read_from(&mut self, slots: &NodeDigests) {
        if self.origin != Some(slots.origin()) {
            *self = Self::new(&self.levels, &self.flavor_node_labels);
            self.origin = Some(slots.origin());
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
    /// finds them kept: an empty slot loses its facts. Only a warm-up: [`Self::refresh`] still
    /// reads any slot whose digest stamp is not the one its facts were read from, so a slot
    /// never read ahead is read at the build.
    pub fn read_ahead(&mut self, slot: usize, slots: &NodeDigests) {
        self.read_from(slots);
        if slot >= self.facts.len() {
            self.facts.resize_with(slot + 1, || None);
            self.values.resize((slot + 1) * self.levels.len(), 0);
        }
        self.keys
            .refresh(slots.label_texts(), &self.levels, &self.flavor_node_labels);
        if self.bring_up(slot, slots) {
            self.read_ahead += 1;
            // Ids queued between builds are bounded by the slots: past that, the next
            // build ranks its members' values from scratch.
            let bound = 2 * self.facts.len() + Self::RESET_SLACK;
            for ranks in &mut self.ranks {
                if ranks.fresh.len() > bound {
                    ranks.forget();
                }
            }
        }
    }

    /// Brings one slot's facts up to its digest in `slots` (keys looked up already): an empty
    /// slot loses them, a digest with their stamp keeps them, any other is read. Whether it
    /// was read.
    fn bring_up(&mut self, slot: usize, slots: &NodeDigests) -> bool {
        match slots.slots().get(slot).and_then(Option::as_ref) {
            None => self.facts[slot] = None,
            Some(d)
                if self.facts[slot]
                    .as_ref()
                    .is_some_and(|f| f.stamp == d.stamp) => {}
            Some(d) => {
                self.read(slot, d, slots);
                return true;
            }
        }
        false
    }

    /// The levels these facts are for.
    pub(crate) fn levels(&self) -> &[String] {
        &self.levels
    }

    /// Brings every slot's facts up to date with the digests of `slots`: a slot whose digest
    /// has the stamp its facts were read from keeps them, any other is read again; values new
    /// to a level are ranked.
    pub(crate) fn refresh(&mut self, slots: &NodeDigests) {
        self.read_from(slots);
        let depth = self.levels.len();
        self.facts.truncate(slots.len());
        self.facts.resize_with(slots.len(), || None);
        self.values.resize(slots.len() * depth, 0);
        self.keys
            .refresh(slots.label_texts(), &self.levels, &self.flavor_node_labels);
        let (mut at_build, mut member_count) = (0, 0);
        for slot in 0..slots.len() {
            if self.bring_up(slot, slots) {
                at_build += 1;
            }
            if is_member(&self.facts[slot]) {
                member_count += 1;
            }
        }
        self.last_reads = Some(NodeReads {
            at_events: std::mem::take(&mut self.read_ahead),
            at_build,
        });
        let texts = slots.label_texts();
        let members =
            || (self.facts.iter().enumerate()).filter_map(|(slot, f)| is_member(f).then_some(slot));
        let bound = 2 * member_count + Self::RESET_SLACK;
        for (lvl, ranks) in self.ranks.iter_mut().enumerate() {
            if ranks.sweeps != texts.stamp().sweeps || ranks.order.len() > bound {
                ranks.forget();
            }
            if ranks.from_scratch {
                ranks.from_scratch = false;
                ranks.sweeps = texts.stamp().sweeps;
                for slot in members() {
                    ranks.meet(self.values[slot * depth + lvl]);
                }
            }
            ranks.rank_new_values(texts);
        }
    }

    /// Reads a slot's facts from its digest; for a member, its level value ids are written to
    /// its slot and met by the level's ranks.
    fn read(&mut self, slot: usize, digest: &NodeDigest, slots: &NodeDigests) {
        let verdict = self.verdict(slot, digest, slots);
        self.facts[slot] = Some(Facts {
            stamp: digest.stamp,
            verdict,
        });
    }

    /// The verdict of a node; for a member, its level value ids are written to its slot and
    /// met by the level's ranks.
    fn verdict(&mut self, slot: usize, digest: &NodeDigest, slots: &NodeDigests) -> Verdict {
        let pairs = slots.label_ids(digest);
        let (flavor_hints, level_hints) = self.hints.split_at_mut(self.keys.flavor.len());
        for (&(key, want), hint) in self.keys.flavor.iter().zip(flavor_hints) {
            let found = key.and_then(|key| value_of(pairs, key, hint));
            if found.is_none() || found != want {
                return Verdict::OtherFlavor;
            }
        }
        if let Some(unfit) = digest.unfit {
            return Verdict::LeftOut(unfit.reason());
        }
        let depth = self.levels.len();
        for (lvl, (&key, hint)) in self.keys.levels.iter().zip(level_hints).enumerate() {
            // The first level it lacks, outermost first.
            let Some(value) = key.and_then(|key| value_of(pairs, key, hint)) else {
                return Verdict::LeftOut(LeftOutReason::MissingLabel(self.levels[lvl].clone()));
            };
            self.values[slot * depth + lvl] = value;
        }
        for (lvl, ranks) in self.ranks.iter_mut().enumerate() {
            ranks.meet(self.values[slot * depth + lvl]);
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

    /// The rank of every value id of `level`, in text order (as of the last refresh), by id.
    pub(crate) fn ranks(&self, level: usize) -> &[u32] {
        &self.ranks[level].rank
    }

    /// How many values of `level` are ranked: every rank of a member's value is below it.
    pub(crate) fn ranked(&self, level: usize) -> usize {
        self.ranks[level].order.len()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    use std::sync::Arc;

    use super::*;
    use crate::topology::NodeInfo;
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
                                facts.read_ahead(i, &digests);
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

    /// A first build reads every node and ranks every value of each level once; a rebuild
    /// after a node moves and another joins reads those two only, ranks the one new value, and
    /// builds the tree a build from scratch builds.
    #[test]
    fn a_rebuild_reads_and_ranks_only_what_changed() {
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
        let mut digests = digests_of(&slots);
        let mut facts = NodeFacts::new(&levels, &BTreeMap::new());
        let first = TopologyTree::build_from("t", &mut facts, &digests);
        assert_eq!(
            facts.last_reads().map(|r| r.at_build),
            Some(1_500),
            "a first build reads every node"
        );
        assert_eq!(first.leaves().len(), 1_500);
        let ranked = |facts: &NodeFacts| (0..3).map(|l| facts.ranked(l)).collect::<Vec<_>>();
        assert_eq!(ranked(&facts), [3, 30, 1_500]);
        // A node moves rack, another joins.
        slots[7] = node(7, 29);
        slots.push(node(1_500, 3));
        digests.set(7, slots[7].clone());
        digests.set(1_500, slots[1_500].clone());
        let kept = TopologyTree::build_from("t", &mut facts, &digests);
        assert_eq!(
            facts.last_reads(),
            Some(NodeReads {
                at_events: 0,
                at_build: 2
            })
        );
        let fresh = build_from_scratch(&levels, &BTreeMap::new(), &slots);
        assert_eq!(describe(&kept), describe(&fresh));
        assert_eq!(ranked(&facts), [3, 30, 1_501]);
        // Facts read from another store start over: its stamps and ids are its own.
        let other = digests_of(&slots);
        let again = TopologyTree::build_from("t", &mut facts, &other);
        assert_eq!(facts.last_reads().map(|r| r.at_build), Some(1_501));
        assert_eq!(describe(&again), describe(&fresh));
    }

    /// Ranks of values no node uses any more are dropped once they outnumber the members
    /// twice over (plus the slack), or the texts were swept: facts kept for long do not grow
    /// without bound, and the trees stay right through the resets. Run twice: with the old
    /// nodes dropped (the texts are swept, the ranks made again after each sweep) and held
    /// (nothing is swept, the ranks are dropped for their size).
    #[test]
    fn kept_facts_stay_bounded_as_hostnames_churn() {
        let levels: Vec<String> = vec![BLOCK.into(), RACK.into(), HOST.into()];
        for hold in [false, true] {
            let mut facts = NodeFacts::new(&levels, &BTreeMap::new());
            let mut digests = NodeDigests::new();
            let mut held = Vec::new();
            let (mut most, mut swept, mut dropped, mut last) = (0, 0, 0, 0);
            for round in 0..200 {
                let sweeps = digests.label_texts().stamp().sweeps;
                for i in 0..20 {
                    // Given unshared, so the node takes the store's texts.
                    digests.set(i, Some(churned(round, i)));
                    if hold {
                        held.push(digests.node(i).cloned());
                    }
                }
                swept += usize::from(digests.label_texts().stamp().sweeps > sweeps);
                let slots: Vec<Option<Arc<NodeInfo>>> =
                    digests.nodes().map(|n| n.cloned()).collect();
                let tree = TopologyTree::build_from("t", &mut facts, &digests);
                assert_eq!(
                    describe(&tree),
                    describe(&build_from_scratch(&levels, &BTreeMap::new(), &slots)),
                    "round {round}"
                );
                let host = tree.value(tree.leaves()[0]);
                assert_eq!(host, format!("h{round}-0"), "round {round}");
                let ranked = facts.ranks[2].order.len();
                dropped += usize::from(ranked < last);
                (most, last) = (most.max(ranked), ranked);
            }
            // 4,000 hostnames were seen; never more than the bound (checked before a build
            // ranks its new values) and one round's new values were held.
            assert!(most > 2 * 20, "the churn reached the ranks: {most}");
            assert!(most <= 2 * 20 + NodeFacts::RESET_SLACK + 20, "held {most}");
            match hold {
                false => assert!(swept >= 2, "only {swept} sweeps of the texts"),
                true => {
                    assert_eq!(swept, 0, "held texts are never swept");
                    assert!(dropped >= 2, "ranks dropped for their size {dropped} times");
                }
            }
        }
    }

    /// Ranks order values as their texts order, ranked in one batch or in two (the second
    /// merged into the first), whatever the texts share: long common prefixes, ties past the
    /// 16 bytes its sort key holds, a text that is the start of another, NUL bytes that look
    /// like the key's padding, multi-byte characters.
    #[test]
    fn ranks_order_values_as_their_texts_order() {
        let mut runner = TestRunner::new(Config {
            failure_persistence: None,
            ..Config::default()
        });
        let prefix = prop::sample::select(vec!["", "n-", "gke-cluster-default-pool-1a2b3c4d-"]);
        let text = (prefix, "[ab\\x00é]{0,24}").prop_map(|(p, body)| format!("{p}{body}"));
        let (ties, deep_ties, merged) = (Cell::new(0), Cell::new(0), Cell::new(0));
        runner
            .run(
                &(
                    prop::collection::vec(text, 1..60),
                    any::<prop::sample::Index>(),
                ),
                |(texts, split)| {
                    let mut interned = LabelTexts::default();
                    let mut ranks = LevelRanks::default();
                    // Held, as nodes hold their texts.
                    let mut held = Vec::new();
                    let cut = split.index(texts.len() + 1);
                    for batch in [&texts[..cut], &texts[cut..]] {
                        for t in batch {
                            let (text, id) = interned.intern(&Arc::from(t.as_str()));
                            held.push(text);
                            ranks.meet(id);
                        }
                        ranks.rank_new_values(&interned);
                    }
                    let by_rank: Vec<&str> = (ranks.order.iter())
                        .map(|&id| interned.text(id).expect("held"))
                        .collect();
                    for (rank, &id) in ranks.order.iter().enumerate() {
                        prop_assert_eq!(ranks.rank[id as usize] as usize, rank);
                    }
                    let mut sorted: Vec<&str> = texts.iter().map(String::as_str).collect();
                    sorted.sort_unstable();
                    sorted.dedup();
                    prop_assert_eq!(by_rank, sorted.clone());
                    // Texts whose heads tie, and among those, texts that tie again past the
                    // prefix their group shares (only the texts decide).
                    let heads =
                        sorted.chunk_by(|a, b| head_key(a.as_bytes()) == head_key(b.as_bytes()));
                    for group in heads.filter(|g| g.len() > 1) {
                        ties.set(ties.get() + 1);
                        let shared = shared_prefix(group.iter().map(|t| t.as_bytes()));
                        let keys: Vec<u128> = group
                            .iter()
                            .map(|t| head_key(&t.as_bytes()[shared..]))
                            .collect();
                        if keys.windows(2).any(|k| k[0] == k[1]) {
                            deep_ties.set(deep_ties.get() + 1);
                        }
                    }
                    if cut > 0 && cut < texts.len() {
                        merged.set(merged.get() + 1);
                    }
                    Ok(())
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
        // The generator makes heads that tie, texts that tie again past their shared prefix
        // (the texts decide), and rankings in two batches.
        assert!(ties.get() >= 20, "only {} groups of tied heads", ties.get());
        assert!(
            deep_ties.get() >= 20,
            "only {} groups tied past their prefix",
            deep_ties.get()
        );
        assert!(merged.get() >= 20, "only {} merged rankings", merged.get());
    }

    /// The common prefix compared 16 bytes at a time is the one compared byte by byte,
    /// wherever the texts part: within the first 16 bytes, past them, or where the shorter ends.
    #[test]
    fn a_common_prefix_is_the_bytewise_one() {
        let mut runner = TestRunner::new(Config {
            failure_persistence: None,
            ..Config::default()
        });
        let (past_a_word, at_an_end) = (Cell::new(0), Cell::new(0));
        runner
            .run(
                &("[ab]{0,40}", "[ab\\x00é]{0,8}", "[ab\\x00é]{0,8}"),
                |(shared, a, b)| {
                    let (a, b) = (format!("{shared}{a}"), format!("{shared}{b}"));
                    let (a, b) = (a.as_bytes(), b.as_bytes());
                    let bytewise = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                    prop_assert_eq!(common_prefix(a, b), bytewise);
                    prop_assert_eq!(common_prefix(b, a), bytewise);
                    past_a_word.set(past_a_word.get() + usize::from(bytewise >= 16));
                    at_an_end.set(at_an_end.get() + usize::from(bytewise == a.len().min(b.len())));
                    Ok(())
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            past_a_word.get() >= 20,
            "only {} past 16 bytes",
            past_a_word.get()
        );
        assert!(at_an_end.get() >= 20, "only {} at an end", at_an_end.get());
    }

    /// Nodes read ahead with no build between keep the queued values bounded too: the churn
    /// drops them for a ranking from scratch, and the build after is the build from scratch.
    #[test]
    fn reads_ahead_alone_keep_the_ranks_bounded() {
        let levels: Vec<String> = vec![BLOCK.into(), RACK.into(), HOST.into()];
        let mut facts = NodeFacts::new(&levels, &BTreeMap::new());
        let mut digests = NodeDigests::new();
        let mut slots: Vec<Option<Arc<NodeInfo>>> = vec![None; 20];
        let mut most = 0;
        for round in 0..200 {
            for (i, slot) in slots.iter_mut().enumerate() {
                *slot = Some(churned(round, i));
                digests.set(i, slot.clone());
                facts.read_ahead(i, &digests);
                most = most.max(facts.ranks[2].fresh.len());
            }
        }
        assert!(most > 2 * 20, "the churn reached the queue: {most}");
        assert!(most <= 2 * 20 + NodeFacts::RESET_SLACK + 1, "held {most}");
        assert!(
            facts.ranks[2].from_scratch,
            "dropped for a ranking from scratch"
        );
        let kept = TopologyTree::build_from("t", &mut facts, &digests);
        let fresh = build_from_scratch(&levels, &BTreeMap::new(), &slots);
        assert_eq!(describe(&kept), describe(&fresh));
    }
}
