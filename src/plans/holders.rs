//! Who holds the room a rejection is about, and the words that say so.
//!
//! Capacity held by plans (seats whose pods are not bound yet) counts as used for every other
//! decision ([`super::held`]). When a pod or a group is turned away, the message tells a
//! person whether holds are what keeps it out: the decision is tried again on the capacity
//! without the holds in question, and only when that makes room (wholly or partly) does the
//! message say `held by N plan(s) (Job default/a, ...)`. Otherwise it names what really is
//! short, counting only the pods on the nodes.
//!
//! Everything here is computed on the failure path only; a decision that fits never pays for
//! it.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{PlanBook, PlanId, PlanKey, level_noun};
use crate::cluster::group::GroupKey;
use crate::cluster::state::{ClusterState, FlavorTopology, NodeId};
use crate::topology::ResourceList;
use crate::topology::capacity::FreeCapacity;
use crate::topology::counting::DenseRequest;
use crate::topology::message::NotFit;
use crate::topology::placement::{GroupRequest, PlacementContext, eligible_leaves, place_group};
use crate::topology::resources::{PODS, add_pod_usage, show_amount, with_pod_slot};
use crate::topology::room::shortfall;
use crate::topology::tree::{DomainIdx, TopologyTree};

/// Plans named in full in a message; more are counted.
const NAMED_PLANS: usize = 3;

/// What some plans hold on one node.
#[derive(Debug, Default)]
pub(super) struct NodeHolds<'a> {
    /// Their seats' requests, each with one `pods` slot.
    pub amount: ResourceList,
    /// The plans.
    pub plans: BTreeSet<&'a PlanKey>,
}

impl PlanBook {
    /// What the plans `keep` accepts hold on the nodes `on` accepts, per node (seats not
    /// bound yet only, as [`super::HeldCapacity`] sums them).
    pub(super) fn holds_by_node(
        &self,
        keep: impl Fn(&PlanKey) -> bool,
        on: impl Fn(NodeId) -> bool,
    ) -> HashMap<NodeId, NodeHolds<'_>> {
        let mut out: HashMap<NodeId, NodeHolds<'_>> = HashMap::new();
        for (key, plan) in self.plans.iter().filter(|(k, _)| keep(k)) {
            for seat in plan.seats.iter().filter(|s| s.holds()) {
                let id = plan.node_id(seat);
                if !on(id) {
                    continue;
                }
                let h = out.entry(id).or_default();
                add_pod_usage(&mut h.amount, &plan.requests);
                h.plans.insert(key);
            }
        }
        out
    }

    /// The plans holding capacity on `nodes` (which `on` accepts): a lookup per node of
    /// which plans hold its seats ([`super::HeldCapacity::plans_on`]) until every plan holding
    /// anything is found, then a pass over the plans for their keys.
    pub(super) fn plans_holding(
        &self,
        nodes: &[NodeId],
        on: impl Fn(NodeId) -> bool,
    ) -> BTreeSet<&PlanKey> {
        // Each plan once, and no further look once every plan holding anything is found.
        let every = self.held.holding_plans();
        let mut ids: Vec<PlanId> = Vec::new();
        for &node in nodes {
            for id in self.held.plans_on(node) {
                if let Err(at) = ids.binary_search(&id) {
                    ids.insert(at, id);
                }
            }
            if ids.len() == every {
                break;
            }
        }
        let holding: BTreeSet<&PlanKey> = (self.plans.iter())
            .filter(|(_, plan)| ids.binary_search(&plan.id).is_ok())
            .map(|(key, _)| key)
            .collect();
        debug_assert_eq!(
            holding,
            self.plans_holding_by_seats(&on),
            "the holds' plans are not the seats'"
        );
        holding
    }

    /// What [`Self::plans_holding`] says, by a look through every seat (debug builds' check).
    fn plans_holding_by_seats(&self, on: impl Fn(NodeId) -> bool) -> BTreeSet<&PlanKey> {
        self.plans
            .iter()
            .filter(|(_, plan)| plan.seats.iter().any(|s| s.holds() && on(plan.node_id(s))))
            .map(|(key, _)| key)
            .collect()
    }

    /// `held by 2 plans (...) for pods not bound yet` when the holds on `node` are what leave
    /// it without room for one pod of `requests` (it would fit without them), else `None`.
    pub(super) fn held_room(
        &self,
        state: &ClusterState,
        node: NodeId,
        requests: &ResourceList,
    ) -> Option<String> {
        let held = self.held.at(node)?;
        if state.room_with_and_without(node, Some(held), requests) != (false, true) {
            return None;
        }
        Some(self.holders_on(&[node]))
    }

    /// Who holds capacity on `nodes` (each once): `held by 2 plans (...) for pods not bound
    /// yet`, `held for 1 pod whose Binding is being written` (a pod without a seat, from its
    /// bind's start to its end), or both.
    pub(super) fn holders_on(&self, nodes: &[NodeId]) -> String {
        let set: HashSet<NodeId, foldhash::fast::RandomState>;
        let on: &dyn Fn(NodeId) -> bool = match nodes {
            [one] => &|id| id == *one,
            _ => {
                set = nodes.iter().copied().collect();
                &|id| set.contains(&id)
            }
        };
        let plans = self.plans_holding(nodes, on);
        let binding = self.held.binding_on(on);
        let for_binds = |lead: &str| {
            format!(
                "{lead} {binding} pod{} whose Binding is being written",
                if binding == 1 { "" } else { "s" }
            )
        };
        match (plans.is_empty(), binding) {
            (true, 0) => "held for pods not bound yet".to_string(),
            (true, _) => for_binds("held for"),
            (false, 0) => format!("{} for pods not bound yet", held_by(&plans, None)),
            (false, _) => format!(
                "{} for pods not bound yet {}",
                held_by(&plans, None),
                for_binds("and for")
            ),
        }
    }

    /// The words to add to the engine's message for a unit of `group` that does not fit on
    /// `ctx.free`, when other groups' holds are in its way: `32 more would fit on capacity
    /// held by 2 plans (...) for pods not bound yet` (with `(not all N pod(s) even then)` when
    /// it would not fit without them either). `None` when those holds make no difference.
    pub(super) fn held_note(
        &self,
        state: &ClusterState,
        group: &GroupKey,
        flavor: &FlavorTopology,
        ctx: &PlacementContext<'_>,
        request: &GroupRequest<'_>,
        not_fit: &NotFit,
    ) -> Option<String> {
        let holds = self.holds_by_node(|k| k.group != *group, |_| true);
        if holds.is_empty() {
            return None;
        }
        let tree = &flavor.tree;
        let unheld = without_holds(state, flavor, ctx.free, &holds);
        let unheld_ctx = PlacementContext {
            free: &unheld,
            ..*ctx
        };
        let workers = DenseRequest::new(tree, &with_pod_slot(&request.workers.requests));
        let leader = request
            .leader
            .map(|l| DenseRequest::new(tree, &with_pod_slot(&l.requests)));
        let room = |free: &FreeCapacity, req: &DenseRequest, leaf: DomainIdx| {
            req.count_in(free.remaining(leaf)).0
        };
        match place_group(&unheld_ctx, request) {
            Ok(placed) => {
                // The leaves where the placement puts more than the holds leave room for.
                let mut leaves: Vec<DomainIdx> = placed
                    .workers
                    .domains
                    .iter()
                    .filter(|&&(leaf, n)| room(ctx.free, &workers, leaf) < n)
                    .map(|&(leaf, _)| leaf)
                    .collect();
                if let (Some(assigned), Some(leader)) = (&placed.leader, &leader) {
                    leaves.extend(
                        assigned
                            .domains
                            .iter()
                            .filter(|&&(leaf, n)| room(ctx.free, leader, leaf) < n)
                            .map(|&(leaf, _)| leaf),
                    );
                }
                let plans = plans_on(flavor, &leaves, &holds);
                if plans.is_empty() {
                    return None;
                }
                let held = held_by(&plans, None);
                Some(match not_fit.counted {
                    Some(c) if c.need > c.fit => format!(
                        "{} more would fit on capacity {held} for pods not bound yet",
                        c.need - c.fit
                    ),
                    _ => format!("it would fit on capacity {held} for pods not bound yet"),
                })
            }
            Err(unheld_not_fit) => {
                let (Some(with), Some(without)) = (not_fit.counted, unheld_not_fit.counted) else {
                    return None;
                };
                if without.fit <= with.fit {
                    return None;
                }
                let leaves: Vec<DomainIdx> = eligible_leaves(&unheld_ctx, request)
                    .ok()?
                    .into_iter()
                    .filter(|&leaf| room(ctx.free, &workers, leaf) < room(&unheld, &workers, leaf))
                    .collect();
                let plans = plans_on(flavor, &leaves, &holds);
                if plans.is_empty() {
                    return None;
                }
                Some(format!(
                    "{} more would fit on capacity {} for pods not bound yet (not all {} {}(s) \
                     even then)",
                    without.fit - with.fit,
                    held_by(&plans, None),
                    with.need,
                    with.unit
                ))
            }
        }
    }

    /// Why one more pod of `key`'s PodSet (every seat of its plan taken) finds no room for
    /// `request` (one pod) on `ctx.free`: the plans whose holds take the room it would use
    /// (other plans first, then its own seats too), else what is short once only the pods on
    /// the nodes are counted.
    pub(super) fn no_extra_seat(
        &self,
        state: &ClusterState,
        key: &PlanKey,
        flavor: &FlavorTopology,
        ctx: &PlacementContext<'_>,
        request: &GroupRequest<'_>,
    ) -> String {
        let tree = &flavor.tree;
        let lead = format!(
            "node(s) have no room for another pod of {key}: every seat of its plan is taken"
        );
        let place = match request.within {
            Some(d) => describe_domain(tree, d),
            None => format!("ResourceFlavor {}", flavor.name),
        };
        for with_own in [false, true] {
            let holds = self.holds_by_node(|k| with_own || k != key, |_| true);
            if holds.is_empty() {
                continue;
            }
            let unheld = without_holds(state, flavor, ctx.free, &holds);
            let unheld_ctx = PlacementContext {
                free: &unheld,
                ..*ctx
            };
            let Ok(placed) = place_group(&unheld_ctx, request) else {
                continue;
            };
            let leaves: Vec<DomainIdx> = placed.workers.domains.iter().map(|d| d.0).collect();
            let plans = plans_on(flavor, &leaves, &holds);
            if !plans.is_empty() {
                return format!(
                    "{lead}, and the room left in {place} is {} for pods not bound yet",
                    held_by(&plans, Some(&key.group))
                );
            }
        }
        // No room even with nothing held: what is short, counting only the pods on the nodes.
        let bare = state.free_capacity(flavor, |_| None);
        let bare_ctx = PlacementContext {
            free: &bare,
            ..*ctx
        };
        let leaves = eligible_leaves(&bare_ctx, request).unwrap_or_default();
        let leaf_noun = tree
            .levels
            .last()
            .map(|l| level_noun(l))
            .unwrap_or_default();
        let requests = &request.workers.requests;
        if leaves.is_empty() {
            // Nothing it may use at all (taints, nodeSelector, affinity): Kueue's words say
            // which filter removed what.
            return match place_group(&bare_ctx, request) {
                Err(e) => format!("{lead} and {}", e.message),
                Ok(_) => format!("{lead} and no {leaf_noun} of {place} takes it"),
            };
        }
        match shortfall(tree, &bare, &leaves, requests) {
            Some(s) => {
                let at = match s.most {
                    Some((leaf, most)) => {
                        let name = tree.value(leaf);
                        let where_ = if tree.hostname_lowest {
                            format!("on {name}")
                        } else {
                            format!("in {leaf_noun} {name}")
                        };
                        format!(
                            "; the most free is {} {} {where_}",
                            s.resource,
                            show_amount(&s.resource, most)
                        )
                    }
                    None => String::new(),
                };
                format!(
                    "{lead} and no {leaf_noun} of {place} has room for {} {}{at}",
                    s.resource,
                    show_amount(&s.resource, s.wanted)
                )
            }
            None => format!(
                "{lead} and no {leaf_noun} of {place} has room for {} at once",
                show_requests(requests)
            ),
        }
    }
}

/// `free` with what `holds` hold given back, node by node as the state subtracted it.
fn without_holds(
    state: &ClusterState,
    flavor: &FlavorTopology,
    free: &FreeCapacity,
    holds: &HashMap<NodeId, NodeHolds<'_>>,
) -> FreeCapacity {
    let tree = &flavor.tree;
    let mut out = free.clone();
    for &leaf in tree.leaves() {
        for &m in tree.leaf_members(leaf) {
            let id = flavor.member_ids[m];
            if state.node(id).is_none() {
                continue;
            }
            if let Some(h) = holds.get(&id) {
                out.add(tree, leaf, &h.amount);
            }
        }
    }
    out
}

/// The plans holding capacity on the nodes of `leaves`.
fn plans_on<'a>(
    flavor: &FlavorTopology,
    leaves: &[DomainIdx],
    holds: &HashMap<NodeId, NodeHolds<'a>>,
) -> BTreeSet<&'a PlanKey> {
    let tree = &flavor.tree;
    leaves
        .iter()
        .flat_map(|&leaf| tree.leaf_members(leaf))
        .filter_map(|&m| holds.get(&flavor.member_ids[m]))
        .flat_map(|h| h.plans.iter().copied())
        .collect()
}

/// `held by 2 plans (Job default/a, Job default/b)`; after three names, `and N more`; a plan
/// of `own` (the asking group) reads `Job default/a itself`.
pub(super) fn held_by(plans: &BTreeSet<&PlanKey>, own: Option<&GroupKey>) -> String {
    let n = plans.len();
    let mut names: Vec<String> = plans
        .iter()
        .take(NAMED_PLANS)
        .map(|k| {
            if own == Some(&k.group) {
                format!("{k} itself")
            } else {
                k.to_string()
            }
        })
        .collect();
    if n > NAMED_PLANS {
        let last = names.pop().unwrap_or_default();
        names.push(format!("{last} and {} more", n - NAMED_PLANS));
    }
    format!(
        "held by {n} plan{} ({})",
        if n == 1 { "" } else { "s" },
        names.join(", ")
    )
}

/// `cpu 4, memory 8Gi` (the `pods` slot left out).
fn show_requests(requests: &ResourceList) -> String {
    requests
        .iter()
        .filter(|(k, v)| **v > 0 && k.as_str() != PODS)
        .map(|(k, v)| format!("{k} {}", show_amount(k, *v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `rack r3` / `host n7`: a domain by its level's short name and its own value.
pub(super) fn describe_domain(tree: &TopologyTree, d: DomainIdx) -> String {
    let level = &tree.levels[tree.domains[d].level];
    format!("{} {}", level_noun(level), tree.value(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::WorkloadKind;

    fn key(name: &str) -> PlanKey {
        PlanKey {
            group: GroupKey {
                kind: WorkloadKind::Job,
                namespace: "default".into(),
                name: name.into(),
            },
            pod_set: super::super::MAIN_POD_SET.into(),
        }
    }

    #[test]
    fn held_by_counts_names_three_and_marks_the_askers_own() {
        let keys: Vec<PlanKey> = ["a", "b", "c", "d", "e"].into_iter().map(key).collect();
        let one: BTreeSet<&PlanKey> = keys.iter().take(1).collect();
        assert_eq!(held_by(&one, None), "held by 1 plan (Job default/a)");
        assert_eq!(
            held_by(&one, Some(&keys[0].group)),
            "held by 1 plan (Job default/a itself)"
        );
        let all: BTreeSet<&PlanKey> = keys.iter().collect();
        assert_eq!(
            held_by(&all, None),
            "held by 5 plans (Job default/a, Job default/b, Job default/c and 2 more)"
        );
    }
}
