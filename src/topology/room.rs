//! The most room one pod finds on the leaves it may use, for the message that says why it
//! fits none of them: `no host of rack r1 has room for cpu 4; the most free is cpu 3 on
//! b1-r1-h2`.
//!
//! Counts as placement does: a pod takes its requests plus one `pods` slot; a resource the
//! tree does not know is free nowhere; negative free amounts (over-committed nodes) read as
//! nothing free.

use super::capacity::FreeCapacity;
use super::placement::cmp_values;
use super::resources::{ResourceList, with_pod_slot};
use super::tree::{DomainIdx, TopologyTree};

/// A resource no leaf has enough of for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    /// The resource (the first by name, as Kueue breaks ties between limiting resources).
    pub resource: String,
    /// What one pod asks of it.
    pub wanted: i64,
    /// The leaf with the most of it free (the first in topology order on a tie) and that
    /// amount; `None` without leaves.
    pub most: Option<(DomainIdx, i64)>,
}

/// The first resource of `requests` (with the `pods` slot) that none of `leaves` has enough
/// of in `free`; `None` when every resource is on some leaf (a pod then fits none only because
/// no leaf has all of them at once).
pub fn shortfall(
    tree: &TopologyTree,
    free: &FreeCapacity,
    leaves: &[DomainIdx],
    requests: &ResourceList,
) -> Option<Shortfall> {
    with_pod_slot(requests)
        .into_iter()
        .filter(|(_, wanted)| *wanted > 0)
        .find_map(|(resource, wanted)| {
            let id = tree.resource_id(&resource);
            let most = leaves
                .iter()
                .map(|&leaf| (leaf, id.map_or(0, |i| free.remaining(leaf)[i]).max(0)))
                .reduce(|best, next| {
                    let better = next.1 > best.1
                        || (next.1 == best.1 && cmp_values(tree, next.0, best.0).is_lt());
                    if better { next } else { best }
                });
            let enough = most.is_some_and(|(_, have)| have >= wanted);
            (!enough).then_some(Shortfall {
                resource,
                wanted,
                most,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;

    fn tree_of(cpus: &[(&str, i64)]) -> TopologyTree {
        let nodes: Vec<_> = cpus
            .iter()
            .map(|&(name, cpu)| {
                NodeBuilder::new(name)
                    .block("b1")
                    .rack("r1")
                    .cpu(cpu)
                    .build()
            })
            .collect();
        tree(&[BLOCK, RACK, HOST], &nodes)
    }

    #[test]
    fn names_the_first_short_resource_and_the_leaf_with_the_most_of_it() {
        let t = tree_of(&[("x1", 2), ("x2", 3), ("x3", 3)]);
        let free = FreeCapacity::empty(&t);
        let leaves = t.leaves().to_vec();
        let cpu4: ResourceList = [("cpu".to_string(), 4000)].into();
        let s = shortfall(&t, &free, &leaves, &cpu4).unwrap();
        assert_eq!((s.resource.as_str(), s.wanted), ("cpu", 4000));
        let (leaf, most) = s.most.unwrap();
        assert_eq!(most, 3000);
        assert_eq!(t.value(leaf), "x2", "first of the tie");
        // Enough on some leaf: no shortfall.
        let cpu3: ResourceList = [("cpu".to_string(), 3000)].into();
        assert_eq!(shortfall(&t, &free, &leaves, &cpu3), None);
        // A resource the tree does not know is free nowhere.
        let gpu: ResourceList = [("nvidia.com/gpu".to_string(), 1)].into();
        let s = shortfall(&t, &free, &leaves, &gpu).unwrap();
        assert_eq!(
            (s.resource.as_str(), s.most.map(|m| m.1)),
            ("nvidia.com/gpu", Some(0))
        );
        // No leaves at all.
        assert_eq!(shortfall(&t, &free, &[], &cpu3).unwrap().most, None);
    }
}
