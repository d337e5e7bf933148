//! What every topology tree build reads of a node whatever its flavor: its labels as pairs
//! of text ids, its allocatable resource names as an interned key set, their amounts, whether
//! they are all zero, whether it is Ready and schedulable, its name's hash, and a stamp that
//! changes whenever what a flavor reads of it does. Kept by slot by whoever owns the nodes
//! (the cluster state keeps its nodes here) and brought up to date at each node's event, where
//! the node is in cache, so that a build for a flavor or Topology never seen before reads
//! nothing from the nodes' own separately allocated labels, names and resource maps.
//!
//! The amounts and label ids of all nodes sit in one array each, node after node in the order
//! they were first read (slot order at a start-up, and again after each compaction), so a
//! build reads them from consecutive memory rather than from an allocation per node. The
//! label texts are interned here too ([`NodeDigests::label_texts`]): every digest holds the
//! shared copies of its node's (and gives them to a node only its caller held), which keeps
//! each id naming its text while a digest carries it.
//!
//! Invariants: a slot's digest is what a read of the `Arc<NodeInfo>` it holds gives (read
//! from it, or kept from a node with the same allocatable resource names, amounts copied, and
//! with the same name, label texts, readiness and cordon, stamp and label ids kept); every
//! digest's key set is interned in [`NodeDigests::key_set`]; key sets only grow until they
//! hold more than twice what the live nodes can use (plus a slack), when they are interned
//! again from the live nodes, which bounds their number; live digests' spans never overlap,
//! and the values no digest holds are compacted away once they outnumber the held ones (plus
//! a slack); no two digests of a store are ever given the same stamp.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::labels::{LabelTexts, NodeLabels};
use super::node::NodeInfo;
use super::tree::LeftOutReason;

type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// One node's digest.
#[derive(Debug)]
pub struct NodeDigest {
    /// The node it was read from.
    pub node: Arc<NodeInfo>,
    /// Its allocatable resource names, as an id into [`NodeDigests::key_set`].
    pub key_set: u32,
    /// Its allocatable amounts in the shared array ([`NodeDigests::amounts`]), in its key
    /// set's (name) order.
    amounts: Span,
    /// Its labels as `(key id, value id)` in the shared array ([`NodeDigests::label_ids`]), in
    /// key order; ids of [`NodeDigests::label_texts`].
    labels: Span,
    /// The node's labels as the store's shared copies (the node's own list when it holds
    /// them): holding them keeps each label id naming its text.
    texts: NodeLabels,
    /// Every allocatable amount is zero or less.
    pub no_allocatable: bool,
    /// Why no tree takes the node whatever its labels (not Ready, cordoned), if none does.
    pub unfit: Option<Unfit>,
    /// Its name hashed with [`NodeDigests::name_hasher`].
    pub name_hash: u64,
    /// Changes whenever what a flavor's facts read of the node does (its name, labels,
    /// readiness or cordon), never otherwise; never given to two digests.
    pub stamp: u64,
}

/// One [`NodeDigests`] among all made in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin(u64);

impl Default for Origin {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// Why no tree takes a node, whatever its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    NoReadyCondition,
    NotReady,
    Unschedulable,
}

impl Unfit {
    /// Why `node` is unfit, if it is.
    fn of(node: &NodeInfo) -> Option<Self> {
        if node.ready_condition_missing {
            return Some(Self::NoReadyCondition);
        }
        if !node.ready {
            return Some(Self::NotReady);
        }
        if node.unschedulable {
            return Some(Self::Unschedulable);
        }
        None
    }

    /// The tree's reason for it.
    pub fn reason(self) -> LeftOutReason {
        match self {
            Self::NoReadyCondition => LeftOutReason::NoReadyCondition,
            Self::NotReady => LeftOutReason::NotReady,
            Self::Unschedulable => LeftOutReason::Unschedulable,
        }
    }
}

/// Where one owner's values sit in a [`Runs`] array.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    at: u32,
    len: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        self.at as usize..(self.at + self.len) as usize
    }
}

/// The values of many owners in one array, owner after owner, so that a walk over the owners
/// reads consecutive memory; the values no owner holds any more are counted, and compacted
/// away once they outnumber the held ones (plus a slack).
#[derive(Debug, Default)]
struct Runs<T> {
    values: Vec<T>,
    /// How many of `values` no owner holds.
    unheld: usize,
}

impl<T: Copy + Default> Runs<T> {
    /// Compacted once the unheld values outnumber the held ones plus this.
    const COMPACT_SLACK: usize = 4096;

    /// Room for `len` values of an owner that held `before`: the same span when as long, new
    /// room at the end otherwise (`before` is no longer held).
    fn place(&mut self, before: Option<Span>, len: usize) -> Span {
        match before {
            Some(b) if b.len as usize == len => b,
            _ => {
                self.release(before);
                self.values.resize(self.values.len() + len, T::default());
                Span {
                    at: (self.values.len() - len) as u32,
                    len: len as u32,
                }
            }
        }
    }

    /// A span no owner holds any more.
    fn release(&mut self, span: Option<Span>) {
        self.unheld += span.map_or(0, |s| s.len as usize);
    }

    fn get(&self, span: Span) -> &[T] {
        &self.values[span.range()]
    }

    fn get_mut(&mut self, span: Span) -> &mut [T] {
        &mut self.values[span.range()]
    }

    /// Whether the unheld values are due for a compaction.
    fn due(&self) -> bool {
        self.unheld > self.values.len() - self.unheld + Self::COMPACT_SLACK
    }

    /// Moves every held span's values together, in the order given, dropping the rest.
    fn compact<'s>(&mut self, spans: impl Iterator<Item = &'s mut Span>) {
        let mut packed = Vec::with_capacity(self.values.len() - self.unheld);
        for span in spans {
            let range = span.range();
            span.at = packed.len() as u32;
            packed.extend_from_slice(&self.values[range]);
        }
        self.values = packed;
        self.unheld = 0;
    }
}

/// The distinct allocatable key sets, each with a dense id.
#[derive(Debug, Default)]
struct KeySets {
    sets: Vec<Box<[String]>>,
    /// Set ids by the hash of their names.
    by_hash: FastMap<u64, Vec<u32>>,
    hasher: foldhash::fast::FixedState,
}

impl KeySets {
    fn intern<'k>(&mut self, keys: impl Iterator<Item = &'k String> + Clone) -> u32 {
        if let Some(last) = self.sets.last()
            && last.iter().eq(keys.clone())
        {
            return self.sets.len() as u32 - 1;
        }
        let hash = keys.clone().fold(0u64, |h, k| {
            h.rotate_left(5) ^ self.hasher.hash_one(k.as_str())
        });
        let candidates = self.by_hash.entry(hash).or_default();
        if let Some(&id) = candidates
            .iter()
            .find(|&&id| self.sets[id as usize].iter().eq(keys.clone()))
        {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(keys.cloned().collect());
        candidates.push(id);
        id
    }
}

/// Every node slot with its digest (see the module documentation).
#[derive(Debug, Default)]
pub struct NodeDigests {
    /// By slot (the owner's node id); `None` for an empty slot.
    slots: Vec<Option<NodeDigest>>,
    /// How many slots hold a node.
    live: usize,
    key_sets: KeySets,
    /// Every digest's amounts.
    amounts: Runs<i64>,
    /// Every digest's label id pairs.
    label_ids: Runs<(u32, u32)>,
    /// The texts of every node's labels, and their ids.
    texts: LabelTexts,
    /// The last stamp given.
    stamps: u64,
    /// Names this store among all (stamps and label ids are its own).
    origin: Origin,
    name_hasher: foldhash::fast::RandomState,
    /// Reused room for one node's label ids.
    scratch: Vec<(u32, u32)>,
}

impl NodeDigests {
    /// Key sets are interned again once they number more than twice the live nodes plus this.
    const RESET_SLACK: usize = 1024;

    /// No slots.
    pub fn new() -> Self {
        Self::default()
    }

    /// One slot per node, in order.
    pub fn of_nodes(nodes: impl IntoIterator<Item = Arc<NodeInfo>>) -> Self {
        let mut digests = Self::new();
        for (slot, node) in nodes.into_iter().enumerate() {
            digests.set(slot, Some(node));
        }
        digests
    }

    /// Which store this is: stamps and label ids mean something only within one.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// How many slots hold a node.
    pub fn live(&self) -> usize {
        self.live
    }

    /// How many slots there are, empty ones included.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there is no slot at all.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The node in a slot.
    pub fn node(&self, slot: usize) -> Option<&Arc<NodeInfo>> {
        self.slots.get(slot)?.as_ref().map(|d| &d.node)
    }

    /// Every slot's node, `None` for empty slots.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = Option<&Arc<NodeInfo>>> + '_ {
        self.slots.iter().map(|d| d.as_ref().map(|d| &d.node))
    }

    /// Every slot's digest, `None` for empty slots.
    pub fn slots(&self) -> &[Option<NodeDigest>] {
        &self.slots
    }

    /// The texts of the nodes' labels (every digest holds the copies its label ids name).
    pub fn label_texts(&self) -> &LabelTexts {
        &self.texts
    }

    /// Puts `node` in a slot (`None` empties it), growing the slots as needed. A node keeps
    /// what it shares with the slot's last one: its key set with the amounts copied in place
    /// when it has the same resource names, its label ids and stamp when it has the same name,
    /// label texts (the same allocations), readiness and cordon. A node read afresh that only
    /// the caller holds is given the shared copies of its label texts
    /// ([`Self::label_texts`]); one held elsewhere too is kept as given.
    pub fn set(&mut self, slot: usize, node: Option<Arc<NodeInfo>>) {
        if slot >= self.slots.len() {
            self.slots.resize_with(slot + 1, || None);
        }
        let was_live = self.slots[slot].is_some();
        let before = self.slots[slot].take();
        match node {
            None => {
                if let Some(gone) = before {
                    self.amounts.release(Some(gone.amounts));
                    self.label_ids.release(Some(gone.labels));
                }
            }
            Some(node) => {
                let digest = self.read(node, before);
                self.slots[slot] = Some(digest);
            }
        }
        match (was_live, self.slots[slot].is_some()) {
            (false, true) => self.live += 1,
            (true, false) => self.live -= 1,
            _ => {}
        }
        if self.key_sets.sets.len() > 2 * self.live + Self::RESET_SLACK {
            self.intern_key_sets_again();
        }
        if self.amounts.due() {
            self.amounts
                .compact(self.slots.iter_mut().flatten().map(|d| &mut d.amounts));
        }
        if self.label_ids.due() {
            self.label_ids
                .compact(self.slots.iter_mut().flatten().map(|d| &mut d.labels));
        }
    }

    /// A digest of `node`, keeping what it shares with `before` (the slot's last digest); its
    /// values go where those of `before` were when there are as many, at the end of their
    /// arrays otherwise.
    fn read(&mut self, mut node: Arc<NodeInfo>, before: Option<NodeDigest>) -> NodeDigest {
        let same_keys = before.as_ref().filter(|b| {
            (self.key_sets.sets[b.key_set as usize].iter()).eq(node.allocatable.keys())
        });
        let (key_set, amounts) = match same_keys {
            Some(b) => (b.key_set, b.amounts),
            None => {
                let span = (self.amounts)
                    .place(before.as_ref().map(|b| b.amounts), node.allocatable.len());
                (self.key_sets.intern(node.allocatable.keys()), span)
            }
        };
        copy_amounts(self.amounts.get_mut(amounts), &node);
        let same_facts = before
            .as_ref()
            .filter(|b| only_allocatable_differs(&b.node, &node));
        let (labels, stamp, texts) = match same_facts {
            Some(b) => (b.labels, b.stamp, b.texts.clone()),
            None => {
                let shared =
                    (node.labels.clone()).interned_with_ids(&mut self.texts, &mut self.scratch);
                // A node only the caller holds takes the shared copies (one copy of each text
                // in memory); a node held elsewhere too is kept as it is, not copied.
                if !shared.same_texts_as(&node.labels)
                    && let Some(only) = Arc::get_mut(&mut node)
                {
                    only.labels = shared.clone();
                }
                let span =
                    (self.label_ids).place(before.as_ref().map(|b| b.labels), self.scratch.len());
                self.label_ids.get_mut(span).copy_from_slice(&self.scratch);
                self.stamps += 1;
                (span, self.stamps, shared)
            }
        };
        NodeDigest {
            key_set,
            amounts,
            labels,
            texts,
            no_allocatable: no_allocatable(&node),
            unfit: Unfit::of(&node),
            name_hash: match &before {
                Some(b) if b.node.name == node.name => b.name_hash,
                _ => self.name_hasher.hash_one(node.name.as_str()),
            },
            stamp,
            node,
        }
    }

    /// A digest's allocatable amounts, in its key set's (name) order.
    pub fn amounts(&self, digest: &NodeDigest) -> &[i64] {
        self.amounts.get(digest.amounts)
    }

    /// A digest's labels as `(key id, value id)` pairs of [`Self::label_texts`], in key order.
    pub fn label_ids(&self, digest: &NodeDigest) -> &[(u32, u32)] {
        self.label_ids.get(digest.labels)
    }

    /// Drops the key sets no live node has, renumbering the others.
    fn intern_key_sets_again(&mut self) {
        self.key_sets = KeySets::default();
        for d in self.slots.iter_mut().flatten() {
            d.key_set = self.key_sets.intern(d.node.allocatable.keys());
        }
    }

    /// A key set's resource names, sorted.
    pub fn key_set(&self, id: u32) -> &[String] {
        &self.key_sets.sets[id as usize]
    }

    /// The hasher of [`NodeDigest::name_hash`].
    pub fn name_hasher(&self) -> foldhash::fast::RandomState {
        self.name_hasher.clone()
    }
}

/// Whether a flavor's facts read the same of `new` as of `old`: the same name, readiness,
/// cordon and label texts (the same shared allocations; labels equal in text only count as
/// changed).
fn only_allocatable_differs(old: &NodeInfo, new: &NodeInfo) -> bool {
    old.name == new.name
        && old.ready == new.ready
        && old.ready_condition_missing == new.ready_condition_missing
        && old.unschedulable == new.unschedulable
        && old.labels.same_texts_as(&new.labels)
}

/// Writes `node`'s allocatable amounts, in name order, at the start of `range`.
fn copy_amounts(range: &mut [i64], node: &NodeInfo) {
    for (kept, &amount) in range.iter_mut().zip(node.allocatable.values()) {
        *kept = amount;
    }
}

fn no_allocatable(node: &NodeInfo) -> bool {
    node.allocatable.values().all(|&v| v <= 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::fixtures::NodeBuilder;

    fn node(name: &str, cpu: i64) -> Arc<NodeInfo> {
        Arc::new(NodeBuilder::new(name).cpu(cpu).build())
    }

    /// Each slot's digest is a fresh read of its node after any sequence of puts: capacity
    /// updates copy amounts in place (the same range), a new resource name or a new node is read
    /// afresh, empty slots count as such.
    #[test]
    fn a_kept_digest_is_a_fresh_read_of_its_node() {
        let mut digests = NodeDigests::new();
        digests.set(2, Some(node("a", 4)));
        assert_eq!(digests.len(), 3);
        assert!(digests.node(0).is_none() && digests.node(1).is_none());
        let amounts_at = |d: &NodeDigests| d.slots()[2].as_ref().expect("set").amounts.at;
        let first = amounts_at(&digests);

        // A capacity update: amounts copied into the same range.
        let mut zero = NodeInfo::clone(&node("a", 0));
        zero.allocatable.values_mut().for_each(|v| *v = 0);
        digests.set(2, Some(Arc::new(zero)));
        let d = digests.slots()[2].as_ref().expect("set");
        assert_eq!(amounts_at(&digests), first, "amounts copied in place");
        assert!(digests.amounts(d).iter().all(|&a| a == 0) && d.no_allocatable);

        // A resource name added: a key set of its own, read afresh.
        let mut gpu = NodeInfo::clone(&node("a", 4));
        gpu.allocatable.insert("nvidia.com/gpu".into(), 8);
        digests.set(2, Some(Arc::new(gpu)));
        let fresh = NodeDigests::of_nodes([Arc::clone(digests.node(2).expect("set"))]);
        let (kept, read) = (
            digests.slots()[2].as_ref().expect("set"),
            fresh.slots()[0].as_ref().expect("set"),
        );
        assert_eq!(digests.key_set(kept.key_set), fresh.key_set(read.key_set));
        assert_eq!(digests.amounts(kept), fresh.amounts(read));
        assert_ne!(amounts_at(&digests), first, "more amounts: at the end");
        assert!(!kept.no_allocatable);
        assert!(
            digests
                .key_set(kept.key_set)
                .contains(&"nvidia.com/gpu".to_string())
        );

        digests.set(2, None);
        assert!(digests.node(2).is_none());
        assert_eq!(digests.live, 0);
    }

    /// Key sets no node has any more are dropped once they outnumber the live nodes twice over
    /// (plus the slack), and every live digest still names its own resources after.
    #[test]
    fn key_sets_stay_bounded_as_resource_names_churn() {
        let mut digests = NodeDigests::new();
        let mut most = 0;
        for round in 0..3_000 {
            for slot in 0..2 {
                let mut n = NodeInfo::clone(&node(&format!("n{slot}"), 8));
                n.allocatable
                    .insert(format!("example.com/r{round}-{slot}"), 1);
                digests.set(slot, Some(Arc::new(n)));
                most = most.max(digests.key_sets.sets.len());
            }
        }
        assert!(most > 2 * 2 + 100, "the churn reached the key sets: {most}");
        assert!(most <= 2 * 2 + NodeDigests::RESET_SLACK, "held {most}");
        for d in digests.slots().iter().flatten() {
            assert!(
                digests
                    .key_set(d.key_set)
                    .iter()
                    .eq(d.node.allocatable.keys())
            );
        }
    }

    /// The shared amounts array's invariants: every live range in bounds, no two overlapping,
    /// `unheld` exactly what no live digest holds.
    fn check_amounts(digests: &NodeDigests) {
        check_runs(
            &digests.amounts,
            digests.slots().iter().flatten().map(|d| d.amounts),
        );
        check_runs(
            &digests.label_ids,
            digests.slots().iter().flatten().map(|d| d.labels),
        );
        for d in digests.slots().iter().flatten() {
            assert!(digests.amounts(d).iter().eq(d.node.allocatable.values()));
            assert_eq!(labels_of(digests, d), d.node.labels);
        }
    }

    /// A run array's invariants over the spans held: in bounds, no two overlapping, `unheld`
    /// exactly what they do not hold.
    fn check_runs<T>(runs: &Runs<T>, spans: impl Iterator<Item = Span>) {
        let mut spans: Vec<Span> = spans.collect();
        spans.sort_unstable();
        for pair in spans.windows(2) {
            assert!(pair[0].at + pair[0].len <= pair[1].at, "overlap {pair:?}");
        }
        let held: usize = spans.iter().map(|s| s.len as usize).sum();
        assert!(
            spans
                .last()
                .is_none_or(|s| s.range().end <= runs.values.len())
        );
        assert_eq!(runs.unheld, runs.values.len() - held);
    }

    /// A digest's labels as its label ids name them.
    fn labels_of(digests: &NodeDigests, d: &NodeDigest) -> crate::topology::labels::NodeLabels {
        let text = |id: u32| digests.label_texts().text(id).expect("a held text");
        (digests.label_ids(d).iter())
            .map(|&(k, v)| (text(k), text(v)))
            .collect()
    }

    /// The stamp changes exactly when what a flavor reads does (name, labels, readiness,
    /// cordon), never for a capacity or resource change, and is never given twice; the label
    /// ids always name the node's labels, whose texts the node shares with the store.
    #[test]
    fn stamps_and_label_ids_follow_what_a_flavor_reads() {
        let mut digests = NodeDigests::new();
        let labelled = |name: &str, rack: &str| {
            let mut n = NodeInfo::clone(&node(name, 8));
            n.labels = [("rack", rack), ("zone", "z1")].into();
            n
        };
        let stamp = |d: &NodeDigests, slot: usize| d.slots()[slot].as_ref().expect("set").stamp;
        let seen = std::cell::RefCell::new(std::collections::BTreeSet::new());
        let put = |d: &mut NodeDigests, slot: usize, n: NodeInfo| {
            d.set(slot, Some(Arc::new(n)));
            check_amounts(d);
            let node = d.node(slot).expect("set");
            assert!(node.labels.shares_texts_with(d.label_texts()));
            seen.borrow_mut().insert(stamp(d, slot));
        };
        put(&mut digests, 0, labelled("a", "r1"));
        put(&mut digests, 1, labelled("b", "r1"));
        let first = stamp(&digests, 0);
        assert_ne!(stamp(&digests, 1), first, "never given twice");

        // Capacity and a new resource, the same label texts: the stamp stays.
        let mut more = NodeInfo::clone(digests.node(0).expect("set"));
        more.allocatable.insert("nvidia.com/gpu".into(), 8);
        put(&mut digests, 0, more);
        assert_eq!(stamp(&digests, 0), first);
        // Labels changed; then, each on the stored node with its shared label texts,
        // cordoned, renamed, not Ready, without a Ready condition: a new stamp each time.
        let mut last = first;
        let edits: [fn(&mut NodeInfo); 4] = [
            |n| n.unschedulable = true,
            |n| n.name = "c".into(),
            |n| n.ready = false,
            |n| n.ready_condition_missing = true,
        ];
        put(&mut digests, 0, labelled("a", "r2"));
        assert_ne!(stamp(&digests, 0), last);
        for edit in edits {
            last = stamp(&digests, 0);
            let mut n = NodeInfo::clone(digests.node(0).expect("set"));
            edit(&mut n);
            put(&mut digests, 0, n);
            assert_ne!(stamp(&digests, 0), last);
        }
        let d = digests.slots()[0].as_ref().expect("set");
        assert_eq!(d.node.name, "c");
        assert_eq!(labels_of(&digests, d).get("rack"), Some("r2"));
        assert_eq!(d.unfit, Some(Unfit::NoReadyCondition));
        assert_eq!(seen.borrow().len(), 7, "seven reads, seven stamps");
        // A capacity update of it keeps the stamp again.
        last = stamp(&digests, 0);
        let mut n = NodeInfo::clone(digests.node(0).expect("set"));
        n.allocatable.values_mut().for_each(|v| *v += 1);
        put(&mut digests, 0, n);
        assert_eq!(stamp(&digests, 0), last);
    }

    /// A node held elsewhere too is kept as given, not copied; its digest holds the shared
    /// texts itself, so its label ids name its labels through sweeps of the texts.
    #[test]
    fn a_node_held_elsewhere_is_kept_as_given_and_its_ids_stand() {
        let mut digests = NodeDigests::new();
        let labelled = |name: &str, key: &str, value: &str| {
            Arc::new(NodeBuilder::new(name).label(key, value).cpu(8).build())
        };
        // The store's copies come from another node, gone after.
        digests.set(2, Some(labelled("x", "rack", "r1")));
        let given = labelled("a", "rack", "r1");
        digests.set(0, Some(Arc::clone(&given)));
        digests.set(2, None);
        assert!(Arc::ptr_eq(digests.node(0).expect("set"), &given));
        assert!(!given.labels.shares_texts_with(digests.label_texts()));
        for stamp in 0..3_000 {
            digests.set(1, Some(labelled("b", "stamp", &stamp.to_string())));
        }
        assert!(
            digests.label_texts().stamp().sweeps > 0,
            "the texts were swept"
        );
        check_amounts(&digests);
    }

    /// Amounts no digest holds any more (nodes gone, or grown a resource) are compacted away
    /// once they outnumber the held ones (plus the slack); through it every digest reads its own
    /// node's amounts (each slot's distinct), ranges never overlap, a node read afresh with as
    /// many amounts keeps its range, digests set once survive the compactions, and a compaction
    /// lays the ranges out in slot order, back to back.
    #[test]
    fn amounts_stay_bounded_as_nodes_come_and_go() {
        let mut digests = NodeDigests::new();
        // Set once, never touched again.
        for slot in 4..6 {
            digests.set(
                slot,
                Some(node(&format!("stable{slot}"), 100 + slot as i64)),
            );
        }
        let (mut most, mut compactions, mut last_len, mut same_range) = (0, 0, 0, 0);
        for round in 0..2_000i64 {
            for slot in 0..4 {
                // Every other round a resource more: the amounts move to the end; but now
                // and then another node in slot 3, with as many amounts as the slot's last:
                // read afresh in place.
                let other = round % 5 == 4 && slot == 3;
                let (name, extra) = match other {
                    true => (format!("other{round}"), (round - 1 + slot as i64) % 2),
                    false => (format!("n{slot}"), (round + slot as i64) % 2),
                };
                let mut n = NodeInfo::clone(&node(&name, round * 10 + slot as i64));
                for r in 0..extra {
                    n.allocatable
                        .insert(format!("example.com/r{r}"), round + slot as i64);
                }
                let before = (digests.slots().get(slot).and_then(Option::as_ref))
                    .map(|d| (d.amounts.at, d.amounts.len));
                let unheld = digests.amounts.unheld;
                let node = (round % 3 != 0 || slot != 0).then(|| Arc::new(n));
                digests.set(slot, node);
                check_amounts(&digests);
                let after = digests.slots()[slot]
                    .as_ref()
                    .map(|d| (d.amounts.at, d.amounts.len));
                if other && before.is_some() && before == after && digests.amounts.unheld == unheld
                {
                    same_range += 1;
                }
            }
            most = most.max(digests.amounts.values.len());
            if digests.amounts.values.len() < last_len {
                compactions += 1;
            }
            last_len = digests.amounts.values.len();
        }
        assert!(compactions >= 2, "only {compactions} compactions");
        assert!(
            same_range >= 20,
            "only {same_range} nodes read afresh in place"
        );
        assert!(
            most <= 2 * 6 * 4 + Runs::<i64>::COMPACT_SLACK,
            "held {most}"
        );
        for slot in 4..6 {
            let stable = digests.node(slot).expect("set once");
            assert_eq!(stable.name, format!("stable{slot}"));
        }
        digests
            .amounts
            .compact(digests.slots.iter_mut().flatten().map(|d| &mut d.amounts));
        check_amounts(&digests);
        let mut next = 0;
        for d in digests.slots().iter().flatten() {
            assert_eq!(d.amounts.at, next, "back to back in slot order");
            next += d.amounts.len;
        }
        assert_eq!(digests.amounts.unheld, 0);
        assert_eq!(digests.amounts.values.len(), next as usize);
    }
}
