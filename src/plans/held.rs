//! Capacity that plans hold for seats whose pods are not bound yet: per node when the lowest
//! level is the hostname, per lowest-level domain of a flavor's tree otherwise.
//!
//! Invariant: every entry is the sum of the requests (plus one `pods` slot) of the open and
//! taken seats placed there; an entry that drops to nothing is removed, so an empty map means
//! no plan holds anything.

use std::collections::HashMap;

use crate::topology::ResourceList;
use crate::topology::resources::{PODS, add_pod_usage};
use crate::topology::tree::DomainIdx;

/// Where a seat holds its capacity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HeldAt {
    /// A node (hostname-lowest trees).
    Node(String),
    /// A lowest-level domain of a flavor's tree (the flavor name, the leaf).
    Leaf(String, DomainIdx),
}

/// Held capacity, summed per place. Looked up by borrowed names on the hot path (a lone pod's
/// filter asks once per candidate node), so nodes and flavors are keyed by `String` directly.
#[derive(Debug, Clone, Default)]
pub struct HeldCapacity {
    by_node: HashMap<String, ResourceList>,
    by_leaf: HashMap<String, HashMap<DomainIdx, ResourceList>>,
    seats: u64,
}

impl HeldCapacity {
    fn entry(&mut self, place: &HeldAt) -> &mut ResourceList {
        match place {
            HeldAt::Node(n) => self.by_node.entry(n.clone()).or_default(),
            HeldAt::Leaf(f, leaf) => self
                .by_leaf
                .entry(f.clone())
                .or_default()
                .entry(*leaf)
                .or_default(),
        }
    }

    /// Holds one pod of `requests` at `place`.
    pub fn hold(&mut self, place: HeldAt, requests: &ResourceList) {
        add_pod_usage(self.entry(&place), requests);
        self.seats += 1;
    }

    /// Gives back one pod of `requests` held at `place`.
    pub fn release(&mut self, place: &HeldAt, requests: &ResourceList) {
        let emptied = {
            let entry = match place {
                HeldAt::Node(n) => self.by_node.get_mut(n),
                HeldAt::Leaf(f, leaf) => self.by_leaf.get_mut(f).and_then(|m| m.get_mut(leaf)),
            };
            let Some(entry) = entry else {
                return;
            };
            for (name, value) in requests {
                if name != PODS
                    && let Some(v) = entry.get_mut(name)
                {
                    *v -= value;
                }
            }
            let pods = entry.entry(PODS.to_string()).or_insert(0);
            *pods -= 1;
            *pods <= 0
        };
        if emptied {
            match place {
                HeldAt::Node(n) => {
                    self.by_node.remove(n);
                }
                HeldAt::Leaf(f, leaf) => {
                    if let Some(m) = self.by_leaf.get_mut(f) {
                        m.remove(leaf);
                        if m.is_empty() {
                            self.by_leaf.remove(f);
                        }
                    }
                }
            }
        }
        self.seats = self.seats.saturating_sub(1);
    }

    /// What is held on a node.
    pub fn at_node(&self, node: &str) -> Option<&ResourceList> {
        self.by_node.get(node)
    }

    /// What is held on a lowest-level domain of a flavor's tree.
    pub fn at_leaf(&self, flavor: &str, leaf: DomainIdx) -> Option<&ResourceList> {
        self.by_leaf.get(flavor).and_then(|m| m.get(&leaf))
    }

    /// Nodes with something held on them.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, &ResourceList)> {
        self.by_node.iter().map(|(n, r)| (n.as_str(), r))
    }

    /// Lowest-level domains of `flavor` with something held on them.
    pub fn leaves_of(&self, flavor: &str) -> impl Iterator<Item = (DomainIdx, &ResourceList)> {
        self.by_leaf
            .get(flavor)
            .into_iter()
            .flat_map(|m| m.iter().map(|(l, r)| (*l, r)))
    }

    /// Some lowest-level domain (of a tree whose leaves are not nodes) holds something.
    pub fn has_leaves(&self) -> bool {
        !self.by_leaf.is_empty()
    }

    /// Nothing is held anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty() && self.by_leaf.is_empty()
    }

    /// Seats held.
    pub fn seats(&self) -> u64 {
        self.seats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_and_release_balance_out() {
        let mut h = HeldCapacity::default();
        let r: ResourceList = [("cpu".to_string(), 1000)].into();
        let n = HeldAt::Node("n1".into());
        h.hold(n.clone(), &r);
        h.hold(n.clone(), &r);
        assert_eq!(h.at_node("n1").unwrap()["cpu"], 2000);
        assert_eq!(h.at_node("n1").unwrap()[PODS], 2);
        assert_eq!(h.seats(), 2);
        h.release(&n, &r);
        h.release(&n, &r);
        assert!(h.is_empty());
        assert_eq!(h.seats(), 0);
    }
}
