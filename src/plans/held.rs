//! Capacity that plans hold for seats whose pods are not bound yet: per node when the lowest
//! level is the hostname, per lowest-level domain of a flavor's tree otherwise.
//!
//! Invariant: every entry is the sum of the requests (plus one `pods` slot) of the open and
//! taken seats placed there; an entry that drops to nothing is removed, so an empty map means
//! no plan holds anything.

use std::collections::HashMap;

use crate::topology::ResourceList;
use crate::topology::resources::PODS;
use crate::topology::tree::DomainIdx;

/// Where a seat holds its capacity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HeldAt {
    /// A node (hostname-lowest trees).
    Node(String),
    /// A lowest-level domain of a flavor's tree (the flavor name, the leaf).
    Leaf(String, DomainIdx),
}

/// Held capacity, summed per place.
#[derive(Debug, Clone, Default)]
pub struct HeldCapacity {
    by_place: HashMap<HeldAt, ResourceList>,
    seats: u64,
}

impl HeldCapacity {
    /// Holds one pod of `requests` at `place`.
    pub fn hold(&mut self, place: HeldAt, requests: &ResourceList) {
        let entry = self.by_place.entry(place).or_default();
        for (name, value) in requests {
            *entry.entry(name.clone()).or_insert(0) += value;
        }
        *entry.entry(PODS.to_string()).or_insert(0) += 1;
        self.seats += 1;
    }

    /// Gives back one pod of `requests` held at `place`.
    pub fn release(&mut self, place: &HeldAt, requests: &ResourceList) {
        let Some(entry) = self.by_place.get_mut(place) else {
            return;
        };
        for (name, value) in requests {
            if let Some(v) = entry.get_mut(name) {
                *v -= value;
            }
        }
        if let Some(v) = entry.get_mut(PODS) {
            *v -= 1;
            if *v <= 0 {
                self.by_place.remove(place);
            }
        }
        self.seats = self.seats.saturating_sub(1);
    }

    /// What is held at `place`.
    pub fn at(&self, place: &HeldAt) -> Option<&ResourceList> {
        self.by_place.get(place)
    }

    /// Every place with something held.
    pub fn iter(&self) -> impl Iterator<Item = (&HeldAt, &ResourceList)> {
        self.by_place.iter()
    }

    /// Nothing is held anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_place.is_empty()
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
        assert_eq!(h.at(&n).unwrap()["cpu"], 2000);
        assert_eq!(h.at(&n).unwrap()[PODS], 2);
        assert_eq!(h.seats(), 2);
        h.release(&n, &r);
        h.release(&n, &r);
        assert!(h.is_empty());
        assert_eq!(h.seats(), 0);
    }
}
