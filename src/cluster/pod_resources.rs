//! [`PodResources`]: the resource amounts the cluster state keeps for every pod that holds
//! capacity, in as little memory as they fit: one boxed slice per pod, the resource names
//! shared by every pod (interned once per process), never a map and a `String` per name.
//!
//! A cluster keeps tens of thousands of pods in the state, each with its requests and its
//! scoring amounts: as `BTreeMap<String, i64>` that is a map node and a key allocation per
//! resource, some 700 bytes per pod; here it is about 16 bytes plus 24 per resource.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use crate::topology::ResourceList;

/// Resource name → amount, sorted by name (as a [`ResourceList`] iterates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodResources(Box<[(Arc<str>, i64)]>);

impl PodResources {
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
        let again = PodResources::from(&list);
        assert_eq!(again, compact);
        assert!(
            Arc::ptr_eq(&again.0[0].0, &compact.0[0].0),
            "one copy of `cpu`"
        );
        assert_eq!(PodResources::default().to_list(), ResourceList::new());
    }
}
