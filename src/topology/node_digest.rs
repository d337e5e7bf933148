//! What every topology tree build reads of a node whatever its flavor: its allocatable
//! resource names as an interned key set, their amounts, whether they are all zero, and its
//! name's hash. Kept by slot by whoever owns the nodes (the cluster state keeps its nodes
//! here) and brought up to date at each node's event, where the node is in cache, so that a
//! build for a flavor or Topology never seen before reads none of it from the nodes' own
//! separately allocated names and resource maps: only their labels.
//!
//! The amounts of all nodes sit in one array, node after node in the order they were first
//! read (slot order at a start-up, and again after each compaction), so a build sums them
//! from consecutive memory rather than from an allocation per node.
//!
//! Invariants: a slot's digest is what a read of the `Arc<NodeInfo>` it holds gives (read
//! from it, or from a node with the same name and allocatable resource names, with the
//! amounts copied); every digest's key set is interned in [`NodeDigests::key_set`]; key sets only
//! grow until they hold more than twice what the live nodes can use (plus a slack), when they
//! are interned again from the live nodes, which bounds their number; live digests' amounts
//! never overlap, and the amounts no digest holds are compacted away once they outnumber the
//! held ones (plus a slack).

use std::hash::BuildHasher;
use std::sync::Arc;

use super::node::NodeInfo;

type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// One node's digest.
#[derive(Debug)]
pub struct NodeDigest {
    /// The node it was read from.
    pub node: Arc<NodeInfo>,
    /// Its allocatable resource names, as an id into [`NodeDigests::key_set`].
    pub key_set: u32,
    /// Where its allocatable amounts start in the shared array ([`NodeDigests::amounts`]),
    /// in its key set's (name) order.
    amounts_at: u32,
    /// How many amounts it has (its key set's length).
    amounts_len: u32,
    /// Every allocatable amount is zero or less.
    pub no_allocatable: bool,
    /// Its name hashed with [`NodeDigests::name_hasher`].
    pub name_hash: u64,
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
    /// Every digest's amounts, at its `amounts_at`.
    amounts: Vec<i64>,
    /// How many of `amounts` no digest holds.
    unheld: usize,
    name_hasher: foldhash::fast::RandomState,
}

impl NodeDigests {
    /// Key sets are interned again once they number more than twice the live nodes plus this.
    const RESET_SLACK: usize = 1024;
    /// Amounts are compacted once those no digest holds outnumber the held ones plus this.
    const COMPACT_SLACK: usize = 4096;

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

    /// Puts `node` in a slot (`None` empties it), growing the slots as needed. A node with the
    /// same name and allocatable resource names as the slot's last one (a capacity update, or
    /// a change of labels or flags, which a digest does not read) has its amounts copied into
    /// the kept digest; any other is read afresh.
    pub fn set(&mut self, slot: usize, node: Option<Arc<NodeInfo>>) {
        if slot >= self.slots.len() {
            self.slots.resize_with(slot + 1, || None);
        }
        let was_live = self.slots[slot].is_some();
        match node {
            None => {
                if let Some(gone) = self.slots[slot].take() {
                    self.unheld += gone.amounts_len as usize;
                }
            }
            Some(node) => {
                if let Some(d) = &mut self.slots[slot]
                    && d.node.name == node.name
                    && (self.key_sets.sets[d.key_set as usize].iter()).eq(node.allocatable.keys())
                {
                    copy_amounts(&mut self.amounts[d.amounts_at as usize..], &node);
                    d.no_allocatable = no_allocatable(&node);
                    d.node = node;
                } else {
                    let before = self.slots[slot].take();
                    let digest = self.read(node, before.as_ref());
                    self.slots[slot] = Some(digest);
                }
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
        if self.unheld > self.amounts.len() - self.unheld + Self::COMPACT_SLACK {
            self.compact_amounts();
        }
    }

    /// A digest of `node`; its amounts go where those of `before` (the slot's last digest)
    /// were when there are as many, at the end of the array otherwise.
    fn read(&mut self, node: Arc<NodeInfo>, before: Option<&NodeDigest>) -> NodeDigest {
        let len = node.allocatable.len();
        let amounts_at = match before {
            Some(b) if b.amounts_len as usize == len => b.amounts_at as usize,
            _ => {
                self.unheld += before.map_or(0, |b| b.amounts_len as usize);
                self.amounts.resize(self.amounts.len() + len, 0);
                self.amounts.len() - len
            }
        };
        copy_amounts(&mut self.amounts[amounts_at..], &node);
        NodeDigest {
            key_set: self.key_sets.intern(node.allocatable.keys()),
            amounts_at: amounts_at as u32,
            amounts_len: len as u32,
            no_allocatable: no_allocatable(&node),
            name_hash: self.name_hasher.hash_one(node.name.as_str()),
            node,
        }
    }

    /// Moves every live digest's amounts together, in slot order, dropping the rest.
    fn compact_amounts(&mut self) {
        let mut packed = Vec::with_capacity(self.amounts.len() - self.unheld);
        for d in self.slots.iter_mut().flatten() {
            let at = d.amounts_at as usize;
            d.amounts_at = packed.len() as u32;
            packed.extend_from_slice(&self.amounts[at..at + d.amounts_len as usize]);
        }
        self.amounts = packed;
        self.unheld = 0;
    }

    /// A digest's allocatable amounts, in its key set's (name) order.
    pub fn amounts(&self, digest: &NodeDigest) -> &[i64] {
        let at = digest.amounts_at as usize;
        &self.amounts[at..at + digest.amounts_len as usize]
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
        let amounts_at = |d: &NodeDigests| d.slots()[2].as_ref().expect("set").amounts_at;
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
        let mut ranges: Vec<(usize, usize)> = (digests.slots().iter().flatten())
            .map(|d| (d.amounts_at as usize, d.amounts_len as usize))
            .collect();
        ranges.sort_unstable();
        for pair in ranges.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "overlap {pair:?}");
        }
        let held: usize = ranges.iter().map(|r| r.1).sum();
        assert!(
            ranges
                .last()
                .is_none_or(|r| r.0 + r.1 <= digests.amounts.len())
        );
        assert_eq!(digests.unheld, digests.amounts.len() - held);
        for d in digests.slots().iter().flatten() {
            assert!(digests.amounts(d).iter().eq(d.node.allocatable.values()));
        }
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
                    .map(|d| (d.amounts_at, d.amounts_len));
                let unheld = digests.unheld;
                let node = (round % 3 != 0 || slot != 0).then(|| Arc::new(n));
                digests.set(slot, node);
                check_amounts(&digests);
                let after = digests.slots()[slot]
                    .as_ref()
                    .map(|d| (d.amounts_at, d.amounts_len));
                if other && before.is_some() && before == after && digests.unheld == unheld {
                    same_range += 1;
                }
            }
            most = most.max(digests.amounts.len());
            if digests.amounts.len() < last_len {
                compactions += 1;
            }
            last_len = digests.amounts.len();
        }
        assert!(compactions >= 2, "only {compactions} compactions");
        assert!(
            same_range >= 20,
            "only {same_range} nodes read afresh in place"
        );
        assert!(
            most <= 2 * 6 * 4 + NodeDigests::COMPACT_SLACK,
            "held {most}"
        );
        for slot in 4..6 {
            let stable = digests.node(slot).expect("set once");
            assert_eq!(stable.name, format!("stable{slot}"));
        }
        digests.compact_amounts();
        check_amounts(&digests);
        let mut next = 0;
        for d in digests.slots().iter().flatten() {
            assert_eq!(d.amounts_at, next, "back to back in slot order");
            next += d.amounts_len;
        }
        assert_eq!(digests.unheld, 0);
        assert_eq!(digests.amounts.len(), next as usize);
    }
}
