//! [`PodResources`], [`ScoringAmounts`] and [`ResourceAmounts`]: the resource amounts the
//! cluster state keeps for every pod that holds capacity and every node's usage, in as little
//! memory as they fit: a pod's requests as one shared slice, a node's usage as one vector, the
//! resource names shared by every pod and node (interned once per process), never a map and a
//! `String` per name; the scoring amounts (always CPU and memory) as two numbers.
//!
//! A cluster keeps tens of thousands of pods in the state, each with its requests and its
//! scoring amounts: as `BTreeMap<String, i64>` that is a map node and a key allocation per
//! resource, some 700 bytes per pod; here it is about 16 bytes plus 24 per resource.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use crate::topology::ResourceList;
use crate::topology::podgroup::MEMORY;
use crate::topology::resources::AmountTotal;
use crate::topology::resources::CPU;

/// Resource name → amount, sorted by name (as a [`ResourceList`] iterates). Cheap to clone:
/// equal amounts can share one copy ([`Self::share`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodResources(Arc<[(Arc<str>, i64)]>);

impl PodResources {
    /// Takes `other`'s copy when the amounts are equal (the pods of one group mostly ask the
    /// same), so that the two share it.
    pub fn share(&mut self, other: &Self) {
        if !self.is_shared_with(other) && self.0 == other.0 {
            self.0 = other.0.clone();
        }
    }

    /// The two are one shared copy.
    pub fn is_shared_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Every (name, amount), by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(name, value)| (&**name, *value))
    }

    /// The amount of `name`, if listed.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Back to a [`ResourceList`].
    pub fn to_list(&self) -> ResourceList {
        self.iter().map(|(n, v)| (n.to_string(), v)).collect()
    }
}

impl From<&ResourceList> for PodResources {
    fn from(list: &ResourceList) -> Self {
        Self(list.iter().map(|(n, v)| (intern(n), *v)).collect())
    }
}

/// A pod's CPU and memory as kube-scheduler's scoring counts them
/// ([`crate::cluster::pod_requests::scoring_requests`], which names exactly these two): kept
/// inline, no allocation per pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScoringAmounts {
    /// Millicores.
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
}

impl ScoringAmounts {
    /// `cpu` then `memory`, each listed even when zero (as the scoring list names both).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> {
        [(CPU, self.cpu), (MEMORY, self.memory)].into_iter()
    }

    /// Adds a pod's amounts (a node's total), saturating.
    pub fn add(&mut self, pod: &Self) {
        self.cpu = self.cpu.saturating_add(pod.cpu);
        self.memory = self.memory.saturating_add(pod.memory);
    }

    /// Takes a pod's amounts off (a node's total), saturating.
    pub fn take_off(&mut self, pod: &Self) {
        self.cpu = self.cpu.saturating_sub(pod.cpu);
        self.memory = self.memory.saturating_sub(pod.memory);
    }
}

impl From<&ResourceList> for ScoringAmounts {
    /// The list's `cpu` and `memory` (zero when absent); it names nothing else.
    fn from(list: &ResourceList) -> Self {
        let amount = |name| list.get(name).copied().unwrap_or(0);
        Self {
            cpu: amount(CPU),
            memory: amount(MEMORY),
        }
    }
}

/// A node's usage: resource name → amount, sorted by name, names shared. About a tenth of a
/// [`ResourceList`]'s memory for the three or four resources a node's pods use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAmounts(Vec<(Arc<str>, i64)>);

impl ResourceAmounts {
    /// Every (name, amount), by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(name, value)| (&**name, *value))
    }

    /// The amount of `name`, if listed.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.position(name).ok().map(|i| self.0[i].1)
    }

    /// Nothing listed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Takes `value` off `name` when it is listed (nothing happens otherwise), saturating.
    pub fn take_off(&mut self, name: &str, value: i64) {
        if let Ok(i) = self.position(name) {
            let slot = &mut self.0[i].1;
            *slot = slot.saturating_sub(value);
        }
    }

    /// Drops the names whose amount is zero.
    pub fn drop_zeros(&mut self) {
        self.0.retain(|(_, v)| *v != 0);
    }

    /// Back to a [`ResourceList`].
    pub fn to_list(&self) -> ResourceList {
        self.iter().map(|(n, v)| (n.to_string(), v)).collect()
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| (**n).cmp(name))
    }
}

impl AmountTotal for ResourceAmounts {
    /// A name not listed yet is inserted in order (interned).
    fn add_amount(&mut self, name: &str, value: i64) {
        match self.position(name) {
            Ok(i) => {
                let slot = &mut self.0[i].1;
                *slot = slot.saturating_add(value);
            }
            Err(i) => self.0.insert(i, (intern(name), value)),
        }
    }
}

/// The one shared copy of a resource name. Names are few in any cluster (the standard ones and
/// its extended resources), so the set only grows to that size.
fn intern(name: &str) -> Arc<str> {
    static NAMES: OnceLock<Mutex<HashSet<Arc<str>>>> = OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    // A panic while the set was held cannot leave it inconsistent (insert or nothing).
    let mut names = names.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = names.get(name) {
        return known.clone();
    }
    let shared: Arc<str> = Arc::from(name);
    names.insert(shared.clone());
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_amount_in_order_and_shares_names() {
        let list: ResourceList = [
            ("memory".to_string(), 2 << 30),
            ("cpu".to_string(), 1500),
            ("nvidia.com/gpu".to_string(), 0),
        ]
        .into();
        let compact = PodResources::from(&list);
        assert_eq!(compact.to_list(), list);
        assert_eq!(
            compact.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            ["cpu", "memory", "nvidia.com/gpu"]
        );
        assert_eq!(compact.get("cpu"), Some(1500));
        assert_eq!(compact.get("pods"), None);
        let mut again = PodResources::from(&list);
        assert_eq!(again, compact);
        assert!(!again.is_shared_with(&compact));
        again.share(&compact);
        assert!(
            again.is_shared_with(&compact),
            "equal amounts share one copy"
        );
        let mut other = PodResources::from(&[("cpu".to_string(), 1)].into());
        other.share(&compact);
        assert!(
            !other.is_shared_with(&compact),
            "different amounts keep their own"
        );
        assert_eq!(other.get("cpu"), Some(1));
        assert!(
            Arc::ptr_eq(&again.0[0].0, &compact.0[0].0),
            "one copy of `cpu`"
        );
        assert_eq!(PodResources::default().to_list(), ResourceList::new());
    }

    #[test]
    fn scoring_amounts_are_cpu_and_memory_zero_when_absent() {
        let list: ResourceList = [("memory".to_string(), 200 << 20)].into();
        let amounts = ScoringAmounts::from(&list);
        assert_eq!(
            amounts,
            ScoringAmounts {
                cpu: 0,
                memory: 200 << 20
            }
        );
        assert_eq!(
            amounts.iter().collect::<Vec<_>>(),
            [("cpu", 0), ("memory", 200 << 20)]
        );
    }

    #[test]
    fn a_nodes_usage_adds_in_order_takes_off_only_what_it_lists_and_drops_zeros() {
        use crate::topology::resources::add_pod_amounts;
        let mut used = ResourceAmounts::default();
        add_pod_amounts(&mut used, [("memory", 100), ("cpu", 500)]);
        add_pod_amounts(&mut used, [("cpu", 250), ("nvidia.com/gpu", 1)]);
        assert_eq!(
            used.iter().collect::<Vec<_>>(),
            [
                ("cpu", 750),
                ("memory", 100),
                ("nvidia.com/gpu", 1),
                ("pods", 2)
            ]
        );
        let mut list = ResourceList::new();
        add_pod_amounts(&mut list, [("memory", 100), ("cpu", 500)]);
        add_pod_amounts(&mut list, [("cpu", 250), ("nvidia.com/gpu", 1)]);
        assert_eq!(used.to_list(), list, "the same total as a map");
        used.take_off("memory", 100);
        used.take_off("ephemeral-storage", 5);
        assert_eq!(used.get("memory"), Some(0));
        assert_eq!(
            used.get("ephemeral-storage"),
            None,
            "nothing listed, nothing taken"
        );
        used.drop_zeros();
        assert_eq!(used.get("memory"), None);
        used.add_amount("cpu", i64::MAX);
        assert_eq!(used.get("cpu"), Some(i64::MAX), "saturates");
        let other = PodResources::from(&[("cpu".to_string(), 1)].into());
        assert!(
            Arc::ptr_eq(&used.0[0].0, &other.0[0].0),
            "one copy of `cpu`"
        );
    }
}
