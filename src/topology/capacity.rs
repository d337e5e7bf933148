//! Free capacity per leaf: allocatable minus the usage of every pod (and plan) on its nodes.
//!
//! A `FreeCapacity` is the mutable half of a placement snapshot: the tree is shared and
//! immutable, the capacity is copied per decision and reduced as placements are made.
//! Values may go negative (over-committed nodes); counting treats that as no room.

use std::borrow::Borrow;

use super::resources::{PODS, ResourceList};
use super::tree::{DomainIdx, TopologyTree};

/// Remaining resources per leaf, on the tree's dense resource axis.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreeCapacity {
    /// Row-major: `width` resources per domain.
    values: Vec<i64>,
    width: usize,
}

impl FreeCapacity {
    /// Capacity with no usage at all: every leaf's allocatable.
    pub fn empty(tree: &TopologyTree) -> Self {
        Self {
            values: tree.capacities().to_vec(),
            width: tree.resources.len(),
        }
    }

    /// Nothing anywhere: the start for capacity summed node by node ([`Self::add`]).
    pub fn zero(tree: &TopologyTree) -> Self {
        let width = tree.resources.len();
        Self {
            values: vec![0; width * tree.domains.len()],
            width,
        }
    }

    /// Adds a node's allocatable (or any resource total) to a leaf.
    pub fn add(&mut self, tree: &TopologyTree, leaf: DomainIdx, amounts: &ResourceList) {
        let slot = &mut self.values[leaf * self.width..(leaf + 1) * self.width];
        for (name, value) in amounts {
            if let Some(id) = tree.resource_id(name) {
                slot[id] = slot[id].saturating_add(*value);
            }
        }
    }

    /// Allocatable minus the given usage, one entry per pod: (node name, its requests).
    /// Each entry also takes one `pods` slot. Usage on nodes outside the tree is ignored
    /// (Kueue drops usage of domains that no longer have a leaf).
    pub fn with_pod_usage<'a>(
        tree: &TopologyTree,
        pods: impl IntoIterator<Item = (&'a str, &'a ResourceList)>,
    ) -> Self {
        let mut free = Self::empty(tree);
        for (node, requests) in pods {
            if let Some(leaf) = tree.leaf_of_node(node) {
                free.take(tree, leaf, requests, 1);
            }
        }
        free
    }

    /// Takes `count` pods of `requests` (plus one `pods` slot each) from a leaf.
    pub fn take(
        &mut self,
        tree: &TopologyTree,
        leaf: DomainIdx,
        requests: &ResourceList,
        count: i64,
    ) {
        let slot = &mut self.values[leaf * self.width..(leaf + 1) * self.width];
        for (name, value) in requests {
            if name == PODS {
                continue;
            }
            if let Some(id) = tree.resource_id(name) {
                slot[id] = slot[id].saturating_sub(value.saturating_mul(count));
            }
        }
        if let Some(id) = tree.resource_id(PODS) {
            slot[id] = slot[id].saturating_sub(count);
        }
    }

    /// Takes a usage total (a `pods` entry counts pod slots) from a leaf.
    pub fn subtract<K: AsRef<str>, V: Borrow<i64>>(
        &mut self,
        tree: &TopologyTree,
        leaf: DomainIdx,
        usage: impl IntoIterator<Item = (K, V)>,
    ) {
        let slot = &mut self.values[leaf * self.width..(leaf + 1) * self.width];
        for (name, value) in usage {
            if let Some(id) = tree.resource_id(name.as_ref()) {
                slot[id] = slot[id].saturating_sub(*value.borrow());
            }
        }
    }

    /// The remaining resources of a leaf.
    pub fn remaining(&self, leaf: DomainIdx) -> &[i64] {
        &self.values[leaf * self.width..(leaf + 1) * self.width]
    }
}
