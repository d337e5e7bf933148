//! Capacity that plans hold for seats whose pods are not bound yet, summed **per node**, so
//! a hold keeps the room from every other decision: a pod outside any group, a plan on the
//! same flavor, and a plan on another flavor over the same nodes alike.
//!
//! A pod without a seat whose Binding is being written is held the same way on its node, from
//! its bind's start to its end: until the bind commits, nothing else counts its room.
//!
//! Each node's entry also counts which plans hold its seats, so that a message saying who
//! holds a node's room is a lookup, never a look through every seat.
//!
//! Invariant: every entry is the sum of the requests (plus one `pods` slot) of the open and
//! taken seats held on that node and of the seatless pods being bound there, and its plans
//! count those seats, per plan; an entry that drops to nothing is removed, so an empty map
//! means nothing is held.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cluster::state::NodeId;
use crate::topology::ResourceList;
use crate::topology::resources::{PODS, add_pod_usage};

/// A plan's number, given once in a process ([`PlanId::next`]): what a node's hold records
/// of the plan it is for, without the plan's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlanId(u64);

impl PlanId {
    /// A number no plan of this process had before.
    pub fn next() -> Self {
        static IDS: AtomicU64 = AtomicU64::new(1);
        Self(IDS.fetch_add(1, Ordering::Relaxed))
    }
}

/// What is held on one node.
#[derive(Debug, Clone, Default)]
struct NodeHeld {
    amount: ResourceList,
    /// The plans holding seats here, with their seats held here (each at least 1).
    plans: Vec<(PlanId, u32)>,
}

/// Held capacity, summed per node.
#[derive(Debug, Clone)]
pub struct HeldCapacity {
    by_node: HashMap<NodeId, NodeHeld, foldhash::fast::RandomState>,
    /// Pods without a seat whose Binding is being written, per node: few, and counted here so
    /// that a message naming what holds a node's room need not look through every pod seen.
    binding: HashMap<NodeId, u32, foldhash::fast::RandomState>,
    /// The nodes each plan holds seats on (each at least 1): how many plans hold anything.
    nodes_by_plan: HashMap<PlanId, u32, foldhash::fast::RandomState>,
    seats: u64,
    /// Changes when a node comes to be held or stops being held (not when what is held on a
    /// node changes): what says which nodes are held.
    nodes_version: u64,
}

impl Default for HeldCapacity {
    fn default() -> Self {
        Self {
            by_node: HashMap::default(),
            binding: HashMap::default(),
            nodes_by_plan: HashMap::default(),
            seats: 0,
            nodes_version: next_version(),
        }
    }
}

/// A number no holding of this process had before: versions of different holdings never meet.
fn next_version() -> u64 {
    static VERSIONS: AtomicU64 = AtomicU64::new(1);
    VERSIONS.fetch_add(1, Ordering::Relaxed)
}

impl HeldCapacity {
    /// Holds one seat of `plan`, of `requests`, on `node`.
    pub fn hold(&mut self, node: NodeId, requests: &ResourceList, plan: PlanId) {
        let entry = self.add(node, requests);
        match entry.plans.iter_mut().find(|(p, _)| *p == plan) {
            Some((_, seats)) => *seats += 1,
            None => {
                entry.plans.push((plan, 1));
                *self.nodes_by_plan.entry(plan).or_default() += 1;
            }
        }
        self.seats += 1;
    }

    /// Gives back one seat of `plan`, of `requests`, held on `node`.
    pub fn release(&mut self, node: NodeId, requests: &ResourceList, plan: PlanId) {
        let Some(entry) = self.by_node.get_mut(&node) else {
            return;
        };
        let at = entry.plans.iter().position(|(p, _)| *p == plan);
        debug_assert!(at.is_some(), "{plan:?} holds no seat on node {node}");
        if let Some(at) = at {
            entry.plans[at].1 -= 1;
            if entry.plans[at].1 == 0 {
                entry.plans.swap_remove(at);
                if let Some(nodes) = self.nodes_by_plan.get_mut(&plan) {
                    *nodes -= 1;
                    if *nodes == 0 {
                        self.nodes_by_plan.remove(&plan);
                    }
                }
            }
        }
        self.take(node, requests);
        self.seats = self.seats.saturating_sub(1);
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

    fn add(&mut self, node: NodeId, requests: &ResourceList) -> &mut NodeHeld {
        let entry = match self.by_node.entry(node) {
            Entry::Occupied(held) => held.into_mut(),
            Entry::Vacant(free) => {
                self.nodes_version = next_version();
                free.insert(NodeHeld::default())
            }
        };
        add_pod_usage(&mut entry.amount, requests);
        entry
    }

    /// Takes one pod of `requests` off `node`, if anything is held there.
    fn take(&mut self, node: NodeId, requests: &ResourceList) {
        let Some(entry) = self.by_node.get_mut(&node) else {
            return;
        };
        for (name, value) in requests {
            if name != PODS
                && let Some(v) = entry.amount.get_mut(name)
            {
                *v -= value;
            }
        }
        let pods = entry.amount.entry(PODS.to_string()).or_insert(0);
        *pods -= 1;
        if *pods <= 0 {
            debug_assert!(entry.plans.is_empty(), "{entry:?} on node {node}");
            self.by_node.remove(&node);
            self.nodes_version = next_version();
        }
    }

    /// What is held on a node.
    pub fn at(&self, node: NodeId) -> Option<&ResourceList> {
        self.by_node.get(&node).map(|entry| &entry.amount)
    }

    /// The plans holding seats on a node (each once).
    pub fn plans_on(&self, node: NodeId) -> impl Iterator<Item = PlanId> + '_ {
        (self.by_node.get(&node).into_iter()).flat_map(|entry| entry.plans.iter().map(|&(p, _)| p))
    }

    /// How many plans hold seats anywhere.
    pub fn holding_plans(&self) -> usize {
        self.nodes_by_plan.len()
    }

    /// How many nodes something is held on.
    pub fn node_count(&self) -> usize {
        self.by_node.len()
    }

    /// The nodes something is held on.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.by_node.keys().copied()
    }

    /// Changes when a node comes to be held or stops being held ([`Self::nodes`]), and is never
    /// the same for two holdings.
    pub fn nodes_version(&self) -> u64 {
        self.nodes_version
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
        let (a, b) = (PlanId::next(), PlanId::next());
        assert_ne!(a, b);
        let r: ResourceList = [("cpu".to_string(), 1000)].into();
        h.hold(7, &r, a);
        h.hold(7, &r, a);
        assert_eq!(h.at(7).unwrap()["cpu"], 2000);
        assert_eq!(h.at(7).unwrap()[PODS], 2);
        assert_eq!(h.seats(), 2);
        assert_eq!(h.plans_on(7).collect::<Vec<_>>(), [a], "each plan once");
        assert_eq!(h.node_count(), 1);
        let nodes = h.nodes_version();
        h.hold(7, &r, a);
        h.release(7, &r, a);
        assert_eq!(h.nodes_version(), nodes, "node 7 stayed held");
        assert_eq!(h.holding_plans(), 1);
        h.hold(7, &r, b);
        h.hold(9, &r, b);
        assert_ne!(h.nodes_version(), nodes, "node 9 came to be held");
        assert_eq!(h.holding_plans(), 2);
        let nodes = h.nodes_version();
        h.release(9, &r, b);
        assert_ne!(h.nodes_version(), nodes, "node 9 is held no more");
        h.release(7, &r, a);
        assert_eq!(h.at(7).unwrap()["cpu"], 2000);
        assert_eq!(h.plans_on(7).count(), 2, "a still holds one seat");
        let before = h.nodes_version();
        h.release(7, &r, a);
        assert_eq!(h.plans_on(7).collect::<Vec<_>>(), [b]);
        assert_eq!(h.holding_plans(), 1, "a holds nothing");
        h.release(7, &r, b);
        assert_eq!(h.holding_plans(), 0);
        assert!(h.is_empty());
        assert_eq!(h.plans_on(7).count(), 0);
        assert_eq!(h.seats(), 0);
        assert_ne!(h.nodes_version(), before);
        assert_ne!(HeldCapacity::default().nodes_version(), h.nodes_version());
        // A pod being bound holds its room, and is not a seat of any plan.
        h.hold(7, &r, a);
        h.hold_binding(7, &r);
        assert_eq!(h.at(7).unwrap()["cpu"], 2000);
        assert_eq!(h.seats(), 1);
        h.hold_binding(8, &r);
        h.hold_binding(8, &r);
        assert_eq!(h.plans_on(8).count(), 0, "no plan holds node 8");
        assert_eq!(h.binding_on(|n| n == 7), 1);
        assert_eq!(h.binding_on(|_| true), 3);
        h.release_binding(7, &r);
        assert_eq!(h.at(7).unwrap()["cpu"], 1000);
        assert_eq!(h.seats(), 1);
        assert_eq!(h.plans_on(7).collect::<Vec<_>>(), [a], "its seat stays");
        assert_eq!(h.binding_on(|n| n == 7), 0, "its seat is no Binding");
        h.release_binding(8, &r);
        h.release_binding(8, &r);
        assert_eq!(h.binding_on(|_| true), 0);
        h.release(7, &r, a);
        assert!(h.at(8).is_none());
        assert!(h.is_empty());
    }
}
