//! Capacity that plans hold for seats whose pods are not bound yet, summed **per node**, so
//! a hold keeps the room from every other decision: a pod outside any group, a plan on the
//! same flavor, and a plan on another flavor over the same nodes alike.
//!
//! A pod without a seat whose Binding is being written is held the same way on its node, from
//! its bind's start to its end: until the bind commits, nothing else counts its room.
//!
//! Invariant: every entry is the sum of the requests (plus one `pods` slot) of the open and
//! taken seats held on that node and of the seatless pods being bound there; an entry that
//! drops to nothing is removed, so an empty map means nothing is held.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cluster::state::NodeId;
use crate::topology::ResourceList;
use crate::topology::resources::{PODS, add_pod_usage};

/// Held capacity, summed per node.
#[derive(Debug, Clone)]
pub struct HeldCapacity {
    by_node: HashMap<NodeId, ResourceList, foldhash::fast::RandomState>,
    /// Pods without a seat whose Binding is being written, per node: few, and counted here so
    /// that a message naming what holds a node's room need not look through every pod seen.
    binding: HashMap<NodeId, u32, foldhash::fast::RandomState>,
    seats: u64,
    version: u64,
    /// Changes with every seat held or given back, not with a seatless pod's Binding: what
    /// says which plans hold which nodes.
    seats_version: u64,
}

impl Default for HeldCapacity {
    fn default() -> Self {
        Self {
            by_node: HashMap::default(),
            binding: HashMap::default(),
            seats: 0,
            version: next_version(),
            seats_version: next_version(),
        }
    }
}

/// A number no holding of this process had before: versions of different holdings never meet.
fn next_version() -> u64 {
    static VERSIONS: AtomicU64 = AtomicU64::new(1);
    VERSIONS.fetch_add(1, Ordering::Relaxed)
}

impl HeldCapacity {
    /// Holds one seat of `requests` on `node`.
    pub fn hold(&mut self, node: NodeId, requests: &ResourceList) {
        self.add(node, requests);
        self.seats += 1;
        self.seats_version = self.version;
    }

    /// Gives back one seat of `requests` held on `node`.
    pub fn release(&mut self, node: NodeId, requests: &ResourceList) {
        if self.take(node, requests) {
            self.seats = self.seats.saturating_sub(1);
            self.seats_version = self.version;
        }
    }

    /// Holds a pod without a seat, of `requests`, while its Binding to `node` is written (not
    /// a seat: [`Self::seats`] stays).
    pub fn hold_binding(&mut self, node: NodeId, requests: &ResourceList) {
        self.add(node, requests);
        *self.binding.entry(node).or_default() += 1;
    }

    /// Gives back what [`Self::hold_binding`] held.
    pub fn release_binding(&mut self, node: NodeId, requests: &ResourceList) {
        self.take(node, requests);
        if let Some(pods) = self.binding.get_mut(&node) {
            *pods -= 1;
            if *pods == 0 {
                self.binding.remove(&node);
            }
        }
    }

    /// Pods without a seat whose Binding is being written, on the nodes `on` accepts.
    pub fn binding_on(&self, on: impl Fn(NodeId) -> bool) -> usize {
        (self.binding.iter())
            .filter(|&(&node, _)| on(node))
            .map(|(_, &pods)| pods as usize)
            .sum()
    }

    fn add(&mut self, node: NodeId, requests: &ResourceList) {
        add_pod_usage(self.by_node.entry(node).or_default(), requests);
        self.version = next_version();
    }

    /// Takes one pod of `requests` off `node`; `false` when nothing was held there.
    fn take(&mut self, node: NodeId, requests: &ResourceList) -> bool {
        let Some(entry) = self.by_node.get_mut(&node) else {
            return false;
        };
        self.version = next_version();
        for (name, value) in requests {
            if name != PODS
                && let Some(v) = entry.get_mut(name)
            {
                *v -= value;
            }
        }
        let pods = entry.entry(PODS.to_string()).or_insert(0);
        *pods -= 1;
        if *pods <= 0 {
            self.by_node.remove(&node);
        }
        true
    }

    /// What is held on a node.
    pub fn at(&self, node: NodeId) -> Option<&ResourceList> {
        self.by_node.get(&node)
    }

    /// The nodes something is held on.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.by_node.keys().copied()
    }

    /// Changes with every hold and release (and is never the same for two holdings).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Changes with every seat held or given back (and is never the same for two holdings);
    /// a seatless pod's Binding held or given back leaves it.
    pub fn seats_version(&self) -> u64 {
        self.seats_version
    }

    /// Nothing is held anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
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
        h.hold(7, &r);
        h.hold(7, &r);
        assert_eq!(h.at(7).unwrap()["cpu"], 2000);
        assert_eq!(h.at(7).unwrap()[PODS], 2);
        assert_eq!(h.seats(), 2);
        h.release(7, &r);
        assert_eq!(h.at(7).unwrap()["cpu"], 1000);
        let before = h.version();
        h.release(7, &r);
        assert!(h.is_empty());
        assert_eq!(h.seats(), 0);
        assert_ne!(h.version(), before);
        assert_ne!(HeldCapacity::default().version(), h.version());
        // A pod being bound holds its room, and is not a seat.
        h.hold(7, &r);
        h.hold_binding(7, &r);
        assert_eq!(h.at(7).unwrap()["cpu"], 2000);
        assert_eq!(h.seats(), 1);
        let seats_version = h.seats_version();
        h.hold_binding(8, &r);
        h.hold_binding(8, &r);
        assert_eq!(h.seats_version(), seats_version, "no seat changed");
        assert_eq!(h.binding_on(|n| n == 7), 1);
        assert_eq!(h.binding_on(|_| true), 3);
        h.release_binding(7, &r);
        assert_eq!(h.at(7).unwrap()["cpu"], 1000);
        assert_eq!(h.seats(), 1);
        assert_eq!(h.binding_on(|n| n == 7), 0, "its seat is no Binding");
        h.release_binding(8, &r);
        h.release_binding(8, &r);
        assert_eq!(h.binding_on(|_| true), 0);
        assert_eq!(h.seats_version(), seats_version, "no seat changed");
        h.release(7, &r);
        assert_ne!(h.seats_version(), seats_version);
        assert!(h.at(8).is_none());
    }
}
