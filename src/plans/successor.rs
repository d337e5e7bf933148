//! A pod recreated for one its group lost: where it goes (tas-semantics §4).
//!
//! Its **predecessor** is the group's pod in the same place (same PodSet, same Job and
//! completion index; for pods without indices, any lost pod of the PodSet): one still being
//! deleted, or one the state saw leave while the group ran. The predecessor's node is judged
//! for the group with Kueue's node controller rules ([`judge`]):
//!
//! * **failed** → the pod is placed again, with the rest the group lost, inside the domain the
//!   group needs (the plan book's replacement), every other pod staying where it is;
//! * **not failed** (Ready, its pods there still run, replacement off, or NotReady for less
//!   than the delay) → the pod goes back to the predecessor's node, as Kueue's pod pinned to
//!   its assignment does, and waits there while the node cannot take it.
//!
//! Without a known predecessor (the state was rebuilt after it left) the pod is placed in the
//! domain of the group's running pods, which is where Kueue's replacement would look too.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Toleration;

use super::{FilterVerdict, PlanBook, PlanKey, PodFacts, Rejection, positions};
use crate::cluster::WorkloadKind;
use crate::cluster::admit::RoutedWorkload;
use crate::cluster::state::{ClusterState, NodeId};
use crate::topology::node_failure::{
    FailureCause, GATE_SKIP_POD_OWNED, GroupOnNode, KeptBecause, NODE_FAILURE_DELAY, NodeSeen,
    NodeVerdict, judge,
};

/// What to do with a pod of a running group.
pub(super) enum Successor {
    /// Nothing known about a predecessor: plan as usual.
    Unknown,
    /// The predecessor's node has failed for the group: replace.
    Replace,
    /// Back to the predecessor's node (or wait for it).
    Pinned(FilterVerdict),
}

/// A node that failed for a group, and why.
#[derive(Debug, Clone)]
pub(super) struct FailedNode {
    /// Its name.
    pub name: String,
    /// Why it has failed.
    pub cause: FailureCause,
}

impl PlanBook {
    /// Where a pod of a group that runs in part goes, when its predecessor is known.
    pub(super) fn successor(
        &self,
        state: &ClusterState,
        facts: &PodFacts,
        routed: &RoutedWorkload,
        candidates: &[&str],
    ) -> Successor {
        let Some(node) = predecessor_node(state, facts) else {
            return Successor::Unknown;
        };
        let name = state.name_of(node).unwrap_or_default().to_string();
        let verdict = self.judge_for_group(state, facts, routed, node);
        let group = &facts.group;
        let waits = |why: String| {
            Successor::Pinned(FilterVerdict::Only {
                seat: false,
                pass: Vec::new(),
                rejected: Rejection {
                    reason: format!(
                        "node(s) are not {name}, where the pod this one replaces ran: {why}"
                    )
                    .into(),
                    unresolvable: false,
                },
            })
        };
        match verdict {
            NodeVerdict::Failed(_) => Successor::Replace,
            NodeVerdict::NotYet(left) => waits(format!(
                "{name} is NotReady and counts as failed for {group} after {}s more \
                 (TASReplaceNodeOnPodTermination is off: the node controller waits {}s)",
                left.as_secs().max(1),
                NODE_FAILURE_DELAY.as_secs()
            )),
            NodeVerdict::Kept(why) => {
                let ready = state.node(node).is_some_and(|n| n.ready);
                let pass = positions(candidates, &[name.as_str()]);
                if pass.is_empty() || !ready {
                    return waits(format!(
                        "{name} has not failed for {group} ({why}); the pod waits for it"
                    ));
                }
                if !state.room_for(node, self.held.at(node), &facts.requests) {
                    return waits(match self.held_room(state, node, &facts.requests) {
                        Some(held) => format!(
                            "{name} has not failed for {group} ({why}) and its room is {held}"
                        ),
                        None => format!(
                            "{name} has not failed for {group} ({why}) and has no room left for \
                             the pod"
                        ),
                    });
                }
                let reason = match why {
                    KeptBecause::Healthy => format!(
                        "node(s) are not {name}, where the pod this one replaces ran (its seat in {group})"
                    ),
                    other => format!(
                        "node(s) are not {name}, where the pod this one replaces ran: it has not failed for {group} ({other})"
                    ),
                };
                Successor::Pinned(FilterVerdict::Only {
                    seat: true,
                    pass,
                    rejected: Rejection {
                        reason: reason.into(),
                        unresolvable: true,
                    },
                })
            }
        }
    }

    /// The failed node one of plan `key`'s seats not bound yet sits on, if any; when none
    /// has failed and none may fail with time alone, the plan is marked checked at this
    /// topology generation (nothing else changes).
    pub(super) fn failed_seat(
        &mut self,
        state: &ClusterState,
        key: &PlanKey,
    ) -> Option<FailedNode> {
        let generation = state.topology_generation();
        let plan = self.plans.get(key)?;
        // Checked since nodes last changed; a pod being bound keeps the plan as it is.
        if plan.seats_checked_at(generation) {
            return None;
        }
        let mut waiting = false;
        let idle = GroupOnNode {
            progressing: false,
            tolerations: &[],
        };
        let failed = plan.seats.iter().filter(|s| s.holds()).find_map(|seat| {
            let node = plan.node_id(seat);
            let seen = NodeSeen {
                // Taints are for the pods' own tolerations: kube-scheduler's filter keeps an
                // open seat's pod off a node it does not tolerate.
                taints: &[],
                ..node_seen(state, node)
            };
            match judge(&seen, &idle, &self.gates) {
                NodeVerdict::Failed(cause) => Some(FailedNode {
                    name: state.name_of(node).unwrap_or_default().to_string(),
                    cause,
                }),
                NodeVerdict::NotYet(_) => {
                    waiting = true;
                    None
                }
                NodeVerdict::Kept(_) => None,
            }
        });
        // A node that may fail with time alone is checked again on the next call.
        if failed.is_none()
            && !waiting
            && let Some(plan) = self.plans.get_mut(key)
        {
            plan.seats_checked = Some(generation);
        }
        failed
    }

    /// A plan some of whose seats not bound yet sit on a node that has failed (gone, or not
    /// Ready by the gates' rules) is dropped, so that those pods are planned again inside the
    /// domain of the rest, as Kueue replaces a failed node of an assignment; `true` when it
    /// was. A single pod's plan stays with `SkipReassignmentForPodOwnedWorkloads`, as Kueue
    /// keeps such a workload's assignment.
    pub(super) fn drop_if_seats_failed(&mut self, state: &ClusterState, key: &PlanKey) -> bool {
        let Some(failed) = self.failed_seat(state, key) else {
            return false;
        };
        if key.group.kind == WorkloadKind::Pod && self.gates.enabled(GATE_SKIP_POD_OWNED) {
            return false;
        }
        let Some(plan) = self.remove_plan(key) else {
            return false;
        };
        let waiting = plan.seats.iter().filter(|s| s.holds()).count();
        self.notice(
            &plan.owner,
            true,
            "TopologySeatLost",
            format!(
                "node {} failed before {waiting} pod(s) of {key} were bound ({}): their seats \
                 are planned again beside the rest",
                failed.name, failed.cause
            ),
        );
        true
    }

    /// Every node of the group's lost pods (departed, or being deleted) that has failed for
    /// the group, by name.
    pub(super) fn failed_nodes(
        &self,
        state: &ClusterState,
        facts: &PodFacts,
        routed: &RoutedWorkload,
    ) -> Vec<FailedNode> {
        let group = &facts.group;
        let mut nodes: Vec<NodeId> = state.departed(group).iter().map(|d| d.node).collect();
        nodes.extend(
            state
                .members(group)
                .filter(|p| p.terminating)
                .map(|p| p.node),
        );
        nodes.sort_unstable();
        nodes.dedup();
        nodes
            .into_iter()
            .filter_map(
                |node| match self.judge_for_group(state, facts, routed, node) {
                    NodeVerdict::Failed(cause) => Some(FailedNode {
                        name: state.name_of(node).unwrap_or_default().to_string(),
                        cause,
                    }),
                    _ => None,
                },
            )
            .collect()
    }

    /// Kueue's node controller decision for `node` and the asking pod's group.
    fn judge_for_group(
        &self,
        state: &ClusterState,
        facts: &PodFacts,
        routed: &RoutedWorkload,
        node: NodeId,
    ) -> NodeVerdict {
        let seen = node_seen(state, node);
        let names = routed.pod_set_names();
        let there: Vec<_> = state
            .members(&facts.group)
            .filter(|p| p.node == node)
            .collect();
        // The effective tolerations (template and flavor) of every PodSet assigned there: those
        // with pods there, and the asking pod's, whose predecessor was there.
        let mut assigned: Vec<&str> = there
            .iter()
            .filter_map(|p| p.pod_set.resolve(&names))
            .chain(std::iter::once(routed.pod_set.as_str()))
            .collect();
        assigned.sort_unstable();
        assigned.dedup();
        let tolerations: Vec<Vec<Toleration>> = assigned
            .iter()
            .filter_map(|name| routed.pod_sets.iter().find(|p| p.spec.name == *name))
            .map(|p| {
                let mut all = p.spec.tolerations.clone();
                if let Some(f) = state.flavor(&p.flavor) {
                    all.extend(f.tolerations.iter().cloned());
                }
                all
            })
            .collect();
        let lists: Vec<&[Toleration]> = tolerations.iter().map(Vec::as_slice).collect();
        let group = GroupOnNode {
            progressing: there.iter().any(|p| !p.terminating),
            tolerations: &lists,
        };
        judge(&seen, &group, &self.gates)
    }
}

/// What the state knows of a node, for [`judge`].
fn node_seen(state: &ClusterState, node: NodeId) -> NodeSeen<'_> {
    let info = state.node(node);
    NodeSeen {
        exists: info.is_some(),
        ready: info.and_then(|n| (!n.ready_condition_missing).then_some(n.ready)),
        ready_for: info.and_then(|n| n.ready_since).map(since),
        taints: info.map_or(&[], |n| n.taints.as_slice()),
    }
}

/// The node of the asking pod's predecessor: a pod of its group in the same place that is
/// being deleted, else one that left the group; made by the same creation of its Job as the
/// asking pod (a Job created again before its watch shows it replaces nothing either).
fn predecessor_node(state: &ClusterState, facts: &PodFacts) -> Option<NodeId> {
    let index = facts.index();
    let group = &facts.group;
    let ours = facts.incarnation;
    state
        .members(group)
        .find(|p| {
            p.terminating
                && p.pod_set == facts.pod_set
                && p.index == index
                && p.incarnation.belongs_to(ours)
        })
        .map(|p| p.node)
        .or_else(|| {
            state
                .departed(group)
                .iter()
                .find(|d| {
                    d.pod_set == facts.pod_set && d.index == index && d.incarnation.belongs_to(ours)
                })
                .map(|d| d.node)
        })
}

/// How long ago a Unix time in seconds was (zero for a time ahead of the clock).
fn since(unix_seconds: i64) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Duration::from_secs(now.saturating_sub(unix_seconds).max(0) as u64)
}
