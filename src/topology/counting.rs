//! Phase 1 of placement: how many pods (and slices) of a request every domain can hold.
//!
//! Leaves are counted from their free capacity (Kueue's `CountIn`, with `pods: 1` in every
//! request); parents sum their children bottom-up, rounding to multi-layer slice sizes and
//! keeping the smallest "leader penalty" among leader-capable children.

use std::collections::BTreeMap;

use super::resources::ResourceList;
use super::tree::TopologyTree;

/// Per-domain scratch counters for one evaluation (Kueue's domain state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DomainCounts {
    /// Worker pods that fit.
    pub pods: i64,
    /// Whole slices that fit (0 below the slice level).
    pub slices: i64,
    /// Worker pods that fit once the leader is placed here too.
    pub pods_with_leader: i64,
    /// Whole slices that fit once the leader is placed here too.
    pub slices_with_leader: i64,
    /// 1 when the leader fits in this domain.
    pub leaders: i64,
    /// Sum of matching preferred node-affinity weights (gated).
    pub affinity: i64,
}

/// A request on the tree's dense resource axis, kept in resource-name order so that ties
/// between limiting resources resolve to the lexicographically smallest name.
#[derive(Debug, Clone)]
pub struct DenseRequest {
    items: Vec<(Option<usize>, i64, String)>,
}

impl DenseRequest {
    /// Converts a resource list (which must already include the `pods` slot).
    pub fn new(tree: &TopologyTree, list: &ResourceList) -> Self {
        let items = list
            .iter()
            .map(|(name, value)| (tree.resource_id(name), *value, name.clone()))
            .collect();
        Self { items }
    }

    /// Kueue's `CountInWithLimitingResource`: how many copies fit in `free`, and the first
    /// (by name) resource that limits it. A zero request never limits; a resource missing
    /// from `free` allows none.
    pub fn count_in(&self, free: &[i64]) -> (i64, Option<&str>) {
        let mut best: Option<(i64, &str)> = None;
        for (id, want, name) in &self.items {
            let fits = if *want == 0 {
                i64::from(i32::MAX)
            } else {
                let have = id.map(|i| free[i]).unwrap_or(0);
                (have / want).clamp(0, i64::from(i32::MAX))
            };
            if best.is_none_or(|(b, _)| fits < b) {
                best = Some((fits, name));
            }
        }
        match best {
            Some((n, name)) => (n, Some(name)),
            None => (0, None),
        }
    }

    /// Subtracts one copy of the request from `free`.
    pub fn subtract_from(&self, free: &mut [i64]) {
        for (id, want, _) in &self.items {
            if let Some(i) = id {
                free[*i] = free[*i].saturating_sub(*want);
            }
        }
    }
}

/// Sums children into parents, bottom-up, as Kueue's `fillInCountsHelper` does. Leaves must
/// already hold their pod counts. `size_at_level[l]` is the multi-layer slice size that
/// applies to domains at level `l` (rounding their counts before they are summed).
pub fn aggregate(
    tree: &TopologyTree,
    counts: &mut [DomainCounts],
    slice_level: usize,
    slice_size: i64,
    size_at_level: &BTreeMap<usize, i64>,
    has_leader: bool,
) {
    let depth = tree.depth();
    if depth == 0 {
        return;
    }
    for &leaf in tree.leaves() {
        if depth - 1 == slice_level {
            let c = &mut counts[leaf];
            c.slices = c.pods / slice_size;
            c.slices_with_leader = c.pods_with_leader / slice_size;
        } else {
            counts[leaf].slices = 0;
            counts[leaf].slices_with_leader = 0;
        }
    }
    for level in (0..depth - 1).rev() {
        let round = size_at_level.get(&(level + 1)).copied();
        for &d in &tree.by_level[level] {
            counts[d] = combine(
                tree.domains[d].children.clone().map(|c| counts[c]),
                round,
                level == slice_level,
                slice_size,
                has_leader,
            );
        }
    }
}

/// One parent's counters from its children's (Kueue's parent branch of `fillInCountsHelper`).
pub fn combine(
    children: impl Iterator<Item = DomainCounts>,
    round: Option<i64>,
    at_slice_level: bool,
    slice_size: i64,
    has_leader: bool,
) -> DomainCounts {
    let mut out = DomainCounts::default();
    let mut slices_sum = 0i64;
    let mut min_pod_penalty: Option<i64> = None;
    let mut min_slice_penalty: Option<i64> = None;
    for c in children {
        let (mut cp, mut cpl) = (c.pods, c.pods_with_leader);
        if let Some(k) = round.filter(|k| *k > 0) {
            cp = cp / k * k;
            cpl = cpl / k * k;
        }
        out.pods += cp;
        slices_sum += c.slices;
        if !has_leader || c.leaders > 0 {
            let pp = cp - cpl;
            let sp = c.slices - c.slices_with_leader;
            min_pod_penalty = Some(min_pod_penalty.map_or(pp, |m| m.min(pp)));
            min_slice_penalty = Some(min_slice_penalty.map_or(sp, |m| m.min(sp)));
        }
        out.leaders = out.leaders.max(c.leaders);
        out.affinity += c.affinity;
    }
    if let (Some(pp), Some(sp)) = (min_pod_penalty, min_slice_penalty) {
        out.pods_with_leader = out.pods - pp;
        out.slices_with_leader = slices_sum - sp;
    }
    if at_slice_level {
        out.slices = out.pods / slice_size;
        out.slices_with_leader = out.pods_with_leader / slice_size;
    } else {
        out.slices = slices_sum;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_in_takes_the_smallest_and_names_the_first_limiting_resource() {
        let tree = TopologyTree::build("t", &[], &BTreeMap::new(), std::iter::empty());
        let req = DenseRequest {
            items: vec![(Some(0), 2, "cpu".into()), (Some(1), 1, "pods".into())],
        };
        assert_eq!(req.count_in(&[8, 3]), (3, Some("pods")));
        assert_eq!(req.count_in(&[6, 3]), (3, Some("cpu")));
        assert_eq!(req.count_in(&[-4, 3]), (0, Some("cpu")));
        let missing = DenseRequest {
            items: vec![(None, 1, "example.com/gpu".into())],
        };
        assert_eq!(missing.count_in(&[]), (0, Some("example.com/gpu")));
        let zero = DenseRequest {
            items: vec![(None, 0, "example.com/gpu".into())],
        };
        assert_eq!(zero.count_in(&[]).0, i64::from(i32::MAX));
        let _ = tree;
    }

    #[test]
    fn combine_rounds_children_and_keeps_the_smallest_leader_penalty() {
        let kids = [
            DomainCounts {
                pods: 7,
                pods_with_leader: 5,
                leaders: 1,
                ..Default::default()
            },
            DomainCounts {
                pods: 4,
                pods_with_leader: 4,
                leaders: 0,
                ..Default::default()
            },
        ];
        let c = combine(kids.into_iter(), Some(2), true, 2, true);
        // 7 → 6 and 5 → 4 after rounding to 2; 4 stays; penalty only from the leader child.
        assert_eq!(c.pods, 10);
        assert_eq!(c.pods_with_leader, 8);
        assert_eq!(c.slices, 5);
        assert_eq!(c.slices_with_leader, 4);
        assert_eq!(c.leaders, 1);
    }
}
