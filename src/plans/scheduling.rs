//! Plans for Workload-API groups (`PodGroup`s, alone or under `CompositePodGroup`s): the first
//! pod of a tree that asks has the whole tree placed by the placement core
//! ([`crate::topology::podgroup`]) on what is free now, and every pod the core placed gets a
//! seat on its node, in a plan per PodGroup, held like any other plan's seats.
//!
//! * A seat is **taken at planning** by the pod the core placed there (its uid), so every pod
//!   gets the node its own filters were checked against; `filter` passes only that node.
//! * Pods of the tree already bound, and seats of its live plans, are what the core calls
//!   bound pods: they fix the domain, so a pod that comes later (or after a restart) is placed
//!   beside them, and the domain is never re-chosen under a running group.
//! * A pod the core leaves pending (a basic group that only partly fits) gets no seat and is
//!   turned down with the reason; a tree that does not fit holds nothing.
//! * A plan holds, per seat, the largest requests of its PodGroup's pods (pods of one
//!   PodGroup share a template in practice; a mixed group is never under-held).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodSpec};

use super::held::HeldCapacity;
use super::{
    FilterVerdict, Holder, MAIN_POD_SET, Plan, PlanBook, PlanCounters, PlanKey, PodFacts,
    Rejection, Seat, main_key, reopen_vanished_seats,
};
use crate::cluster::WorkloadKind;
use crate::cluster::group::GroupKey;
use crate::cluster::scheduling_groups::{Policy, SchedulingGroup, pending_pod};
use crate::cluster::state::{ClusterState, FlavorTopology, SchedulingTree};
use crate::topology::podgroup::{self, Decision, PendingPod};
use crate::topology::resources::PODS;
use crate::topology::{PodSetSpec, ResourceList};

/// A remembered "does not fit" of a PodGroup's tree and what it was decided on: the cluster's
/// capacity, usage, topology and Workload-API generations, the book's own, and the asking pod when
/// the watches did not know it (another such pod is another question).
#[derive(Debug, Clone)]
pub(super) struct Memo {
    stamp: (u64, u64, u64, u64, u64),
    asker: Option<String>,
    rejection: Rejection,
}

/// One PodGroup of a tree being planned: its key, the uid of each pod it offers the core (by
/// pod name), and the largest requests among them.
struct LeafInput {
    key: PlanKey,
    uids: HashMap<String, String>,
    requests: ResourceList,
    /// Its pods that exist: pending ones offered to the core, bound ones and held seats.
    known: usize,
}

impl PlanBook {
    /// `filter` for a pod of a Workload-API PodGroup: its seat, planning its tree first when
    /// it has none.
    pub(super) fn scheduling_filter(
        &mut self,
        state: &ClusterState,
        pod: &Pod,
        facts: &PodFacts,
        candidates: &[&str],
        now: Instant,
    ) -> FilterVerdict {
        let key = main_key(&facts.group);
        self.drop_if_seats_failed(state, &key);
        if !self.has_seat(&key, &facts.uid) {
            let no_spec = PodSpec::default();
            let spec = pod.spec.as_ref().unwrap_or(&no_spec);
            let asking = match pending_pod(&facts.name, spec) {
                Ok(p) => p,
                Err(e) => {
                    return FilterVerdict::Invalid(format!(
                        "Pod {}/{}: {}: {}",
                        facts.namespace, facts.name, e.field, e.message
                    ));
                }
            };
            self.take_open_seat(state, &key, &facts.uid, &asking);
            // No open seat it can take: some may be pods gone (a scan, only then).
            if !self.has_seat(&key, &facts.uid)
                && let Some(plan) = self.plans.get_mut(&key)
            {
                let reopened =
                    reopen_vanished_seats(plan, &self.pods, state, &key, &facts.uid, now);
                PlanCounters::add(&self.counters.seats_reopened, reopened);
                if reopened > 0 {
                    self.take_open_seat(state, &key, &facts.uid, &asking);
                }
            }
            if !self.has_seat(&key, &facts.uid)
                && let Err(rejection) = self.plan_scheduling_tree(state, facts, asking, now, true)
            {
                self.see(facts, key, now);
                return FilterVerdict::Only {
                    seat: false,
                    pass: Vec::new(),
                    rejected: rejection,
                };
            }
        }
        self.see(facts, key.clone(), now);
        if !self.has_seat(&key, &facts.uid) {
            let reason = self
                .group_failure(&facts.group)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{} has no room left for it", facts.group));
            // Others' pods may give the room back: not unresolvable.
            return FilterVerdict::Only {
                seat: false,
                pass: Vec::new(),
                rejected: Rejection {
                    reason: format!("node(s) cannot take pod {}: {reason}", facts.name).into(),
                    unresolvable: false,
                },
            };
        }
        self.seat_filter(state, &key, facts, candidates, now)
    }

    /// Seats the pod in an open seat of its PodGroup's plan (one a refused Binding gave back,
    /// or a vanished pod's) that it can take ([`Self::open_seat_fits`]).
    fn take_open_seat(&mut self, state: &ClusterState, key: &PlanKey, uid: &str, pod: &PendingPod) {
        let Some(plan) = self.plans.get(key) else {
            return;
        };
        let from = plan.open_from.min(plan.seats.len());
        let Some(s) = plan.seats[from..].iter().position(|seat| {
            seat.holder == Holder::Open && self.open_seat_fits(state, plan, seat, pod)
        }) else {
            return;
        };
        let s = from + s;
        if let Some(plan) = self.plans.get_mut(key) {
            plan.set_holder(s, Holder::Taken(uid.to_string()));
            plan.by_uid.insert(uid.to_string(), s);
        }
    }

    /// `pod` can take the open `seat` of `plan`: the seat's hold covers it (it asks no more
    /// than the pods the plan was made for: room beyond the hold is not the seat's to give,
    /// and two bigger pods on one node would each count the same free room), and its own
    /// filters pass on the seat's node, counting that hold as its room.
    fn open_seat_fits(
        &self,
        state: &ClusterState,
        plan: &Plan,
        seat: &Seat,
        pod: &PendingPod,
    ) -> bool {
        let covered = (pod.requests.iter())
            .filter(|(k, _)| k.as_str() != PODS)
            .all(|(k, v)| *v <= plan.requests.get(k).copied().unwrap_or(0));
        if !covered {
            return false;
        }
        let id = plan.node_id(seat);
        let Some(node) = state.node(id) else {
            return false;
        };
        let held = self.held.at(id);
        // The node's usage with the seat's own hold given back.
        let used = |k: &str| {
            let with_holds = state.used(id).get(k).unwrap_or(0)
                + held.and_then(|h| h.get(k)).copied().unwrap_or(0);
            let seat = match k {
                PODS => 1,
                _ => plan.requests.get(k).copied().unwrap_or(0),
            };
            with_holds - seat
        };
        podgroup::reject(node, used, pod).is_none()
    }

    fn has_seat(&self, key: &PlanKey, uid: &str) -> bool {
        self.plans
            .get(key)
            .is_some_and(|plan| plan.by_uid.contains_key(uid))
    }

    /// Why the Workload-API group of `pod` cannot be placed now, without keeping a plan.
    pub(super) fn diagnose_scheduling(
        &mut self,
        state: &ClusterState,
        pod: &Pod,
        facts: &PodFacts,
        now: Instant,
    ) -> Option<String> {
        if self.has_seat(&main_key(&facts.group), &facts.uid) {
            return None;
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let asking = pending_pod(&facts.name, &spec).ok()?;
        match self.plan_scheduling_tree(state, facts, asking, now, false) {
            Err(r) => Some(
                self.group_failure(&facts.group)
                    .map(str::to_string)
                    .unwrap_or_else(|| r.reason.to_string()),
            ),
            Ok(()) => None,
        }
    }

    /// Places the tree of the asking pod's PodGroup and seats every pod placed. With `keep`
    /// the plans are kept (and Events noticed on the tree's root); without, the attempt is
    /// only a diagnosis.
    fn plan_scheduling_tree(
        &mut self,
        state: &ClusterState,
        facts: &PodFacts,
        asking: PendingPod,
        now: Instant,
        keep: bool,
    ) -> Result<(), Rejection> {
        let stamp = (
            state.capacity_generation(),
            state.usage_generation(),
            state.topology_generation(),
            state.scheduling_generation(),
            self.generation,
        );
        let asker = state
            .pending_member(&facts.uid)
            .is_none()
            .then(|| facts.uid.clone());
        if let Some(m) = self.scheduling_memo.get(&facts.group)
            && m.stamp == stamp
            && m.asker == asker
        {
            return Err(m.rejection.clone());
        }
        let outcome = self.place_scheduling_tree(state, facts, asking, now, keep);
        match &outcome {
            Err(rejection) => {
                self.scheduling_memo.insert(
                    facts.group.clone(),
                    Memo {
                        stamp,
                        asker,
                        rejection: rejection.clone(),
                    },
                );
            }
            Ok(()) => {
                self.scheduling_memo.remove(&facts.group);
            }
        }
        outcome
    }

    fn place_scheduling_tree(
        &mut self,
        state: &ClusterState,
        facts: &PodFacts,
        asking: PendingPod,
        now: Instant,
        keep: bool,
    ) -> Result<(), Rejection> {
        let tree = match state.scheduling_tree(&facts.group) {
            Ok(t) => t,
            Err(why) => {
                return Err(self.scheduling_failure(
                    &facts.group,
                    None,
                    why.clone(),
                    format!("node(s) wait: {why}"),
                    false,
                ));
            }
        };
        let owner = keep.then(|| owner_of(&tree));
        let owner = owner.as_ref();
        let (groups, inputs) = self.core_groups(state, &tree, facts, asking);
        // kube-scheduler's gang gate: a gang is not tried before minCount of its pods exist.
        // Only the watches know which exist; from files, the pods given are all there are.
        let asking_group = tree
            .leaves()
            .find(|g| g.name == facts.group.name)
            .filter(|_| state.tracks_pending_group_pods());
        let known = inputs
            .iter()
            .find(|i| i.key.group == facts.group)
            .map_or(0, |i| i.known);
        if let Some(g) = asking_group
            && let Policy::Gang(min) = g.policy
            && known < min as usize
        {
            let why = format!(
                "{} (gang, minCount {min}): waiting for minCount pods from a gang to appear in \
                 scheduling queue: {known} of {min} exist",
                facts.group
            );
            return Err(self.scheduling_failure(
                &facts.group,
                None,
                why.clone(),
                format!("node(s) wait: {why}"),
                false,
            ));
        }
        let (nodes, usage) = state.scheduling_usage(|id| self.held.at(id));
        let decision = match podgroup::place(&nodes, &usage, &groups, &tree.root) {
            Ok(d) => d,
            Err(e) => {
                let why = e.to_string();
                return Err(self.scheduling_failure(
                    &facts.group,
                    owner.map(|o| (o, why.clone())),
                    why.clone(),
                    format!("node(s) cannot take {}: {why}", facts.group),
                    true,
                ));
            }
        };
        let asking_leaf = decision.leaves.iter().find(|l| l.name == facts.group.name);
        if !decision.fits || asking_leaf.is_some_and(|l| !l.fits) {
            let why = asking_leaf
                .and_then(|l| l.message.clone())
                .or_else(|| decision.message.clone())
                .unwrap_or_else(|| format!("{} does not fit", facts.group));
            // The Event is about the tree: the root's reason when the root does not fit (the
            // same whichever child's pod asked), else the child's.
            let event = if decision.fits {
                why.clone()
            } else {
                decision.message.clone().unwrap_or_else(|| why.clone())
            };
            if keep {
                PlanCounters::bump(&self.counters.groups_not_fit);
            }
            // Preemption cannot help a tree that would not fit with every other pod gone: say
            // so, so kube-scheduler evicts nothing for it.
            let empty = podgroup::Usage::new();
            let unresolvable =
                podgroup::place(&nodes, &empty, &groups, &tree.root).is_ok_and(|d| {
                    let leaf = d.leaves.iter().find(|l| l.name == facts.group.name);
                    !d.fits || leaf.is_some_and(|l| !l.fits)
                });
            return Err(self.scheduling_failure(
                &facts.group,
                owner.map(|o| (o, event)),
                why.clone(),
                format!("node(s) cannot take {why}"),
                unresolvable,
            ));
        }
        if !keep {
            return Ok(());
        }
        self.seat_decision(state, &tree, &decision, inputs, now)
    }

    /// The core's groups for `tree`: per PodGroup, its pods still to place (watched pending
    /// pods and the asking pod, without those seated already) and its bound pods (pods holding
    /// capacity, and seats of its live plan not bound yet).
    fn core_groups(
        &self,
        state: &ClusterState,
        tree: &SchedulingTree,
        facts: &PodFacts,
        asking: PendingPod,
    ) -> (Vec<podgroup::Group>, Vec<LeafInput>) {
        let mut groups = Vec::with_capacity(tree.groups.len());
        let mut inputs = Vec::new();
        let mut asking = Some(asking);
        for g in &tree.groups {
            if g.composite {
                groups.push(g.to_core(Vec::new(), Vec::new()));
                continue;
            }
            let leaf = GroupKey {
                kind: WorkloadKind::SchedulingGroup,
                namespace: g.namespace.clone(),
                name: g.name.clone(),
            };
            let key = main_key(&leaf);
            let plan = self.plans.get(&key);
            let seated = |uid: &str| plan.is_some_and(|p| p.by_uid.contains_key(uid));
            let mut bound: Vec<String> = state
                .members(&leaf)
                .filter_map(|m| state.name_of(m.node).map(str::to_string))
                .collect();
            let bound_uids: HashSet<&str> = plan
                .map(|p| {
                    p.seats
                        .iter()
                        .filter_map(|s| match &s.holder {
                            Holder::Bound(uid) => Some(uid.as_str()),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            if let Some(p) = plan {
                for seat in p.seats.iter().filter(|s| s.holds()) {
                    if let Some(name) = state.name_of(p.node_id(seat)) {
                        bound.push(name.to_string());
                    }
                }
            }
            let mut pending = Vec::new();
            let mut uids = HashMap::new();
            let asks_here = leaf == facts.group;
            // An open seat (its Binding refused, or its pod gone) is counted above where it
            // holds; it is some pending pod's of the group, which takes it when it asks: a
            // pending pod that can take one (`open_seat_fits`) is not placed again beside it
            // (the asking pod, which would have taken one already, aside). One that cannot, a
            // bigger pod made in place of one gone, is placed with the tree; the seat it
            // leaves holds until the plan expires.
            let mut open: Vec<&Seat> = plan.map_or_else(Vec::new, |p| {
                (p.seats.iter())
                    .filter(|s| s.holder == Holder::Open)
                    .collect()
            });
            for (uid, m) in state.pending_members(&leaf) {
                if seated(uid) || bound_uids.contains(uid) {
                    continue;
                }
                // A pod whose Binding is being written is on its node already, seat or not (a
                // seat whose node left is dropped when the plan moves, `move_seats`): it is
                // placed nowhere else, and counts as bound there.
                if let Some(node) = self.pods.get(uid).and_then(|p| p.binding) {
                    bound.extend(state.name_of(node).map(str::to_string));
                    continue;
                }
                // Names are unique among live pods: an entry under the asking pod's name with
                // another uid is its predecessor, gone from the API server already (the watch
                // has not said so yet); a second entry under one name is stale too.
                let stale = asks_here && m.pod.name == facts.name && uid != facts.uid;
                if stale || uids.contains_key(&m.pod.name) {
                    continue;
                }
                let asking_pod = asks_here && uid == facts.uid;
                if let Some(p) = plan.filter(|_| !asking_pod)
                    && let Some(i) =
                        (open.iter()).position(|seat| self.open_seat_fits(state, p, seat, &m.pod))
                {
                    open.swap_remove(i);
                    continue;
                }
                uids.insert(m.pod.name.clone(), uid.to_string());
                pending.push(m.pod.clone());
            }
            if asks_here
                && !uids.values().any(|u| *u == facts.uid)
                && !seated(&facts.uid)
                && let Some(p) = asking.take()
            {
                // The asking pod, not watched yet (or from a scheduler ahead of the watch):
                // after the pods the watch knows, as the scheduler's queue would have it.
                uids.insert(p.name.clone(), facts.uid.clone());
                pending.push(p);
            }
            let mut requests = ResourceList::new();
            for p in &pending {
                for (k, v) in &p.requests {
                    let slot = requests.entry(k.clone()).or_insert(0);
                    *slot = (*slot).max(*v);
                }
            }
            let known = pending.len() + bound.len();
            groups.push(g.to_core(pending, bound));
            inputs.push(LeafInput {
                key,
                uids,
                requests,
                known,
            });
        }
        (groups, inputs)
    }

    /// Seats the pods `decision` placed: one seat per pod on its node, taken by that pod, in
    /// its PodGroup's plan (made when it has none).
    fn seat_decision(
        &mut self,
        state: &ClusterState,
        tree: &SchedulingTree,
        decision: &Decision,
        inputs: Vec<LeafInput>,
        now: Instant,
    ) -> Result<(), Rejection> {
        let flavor = state.hostname_topology();
        let mut made = Vec::new();
        for leaf in &decision.leaves {
            let Some(input) = inputs.iter().find(|i| i.key.group.name == leaf.name) else {
                continue;
            };
            if leaf.assignments.is_empty() {
                continue;
            }
            let group = tree
                .leaves()
                .find(|g| g.name == leaf.name)
                .cloned()
                .ok_or_else(|| Rejection {
                    reason: format!("node(s) lost PodGroup {}", leaf.name).into(),
                    unresolvable: false,
                })?;
            let mut seats = Vec::new();
            for a in &leaf.assignments {
                let Some(uid) = input.uids.get(&a.pod) else {
                    continue;
                };
                let Some((leaf_idx, member)) = flavor.tree.member_of_node(&a.node) else {
                    // The seat tree holds every node the core was given, so this is a node
                    // gone in between: nothing of the tree is seated, the pod asks again.
                    return Err(Rejection {
                        reason: format!(
                            "node(s) lost node {} while {} was planned; planning again",
                            a.node, input.key
                        )
                        .into(),
                        unresolvable: false,
                    });
                };
                seats.push(Seat {
                    leaf: leaf_idx,
                    member,
                    holder: Holder::Taken(uid.clone()),
                });
            }
            made.push((input.key.clone(), group, input.requests.clone(), seats));
        }
        let mut notes = Vec::new();
        for (key, group, requests, seats) in made {
            let path = decision
                .leaves
                .iter()
                .find(|l| l.name == key.group.name)
                .map(|l| {
                    l.path
                        .iter()
                        .map(|p| format!("{} {}", super::level_noun(&p.key), p.value))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            notes.push(format!(
                "{} pod(s) of {key}{}",
                seats.len(),
                if path.is_empty() {
                    String::new()
                } else {
                    format!(" in {path}")
                }
            ));
            self.add_seats(&key, &group, &flavor, requests, seats, now);
        }
        let owner = owner_of(tree);
        self.scheduling_noticed.remove(&root_key(&owner));
        for input in &inputs {
            self.failures.remove(&input.key.group);
        }
        if !notes.is_empty() {
            self.notice(
                &owner,
                false,
                "TopologyPlanned",
                format!("planned {}", notes.join("; ")),
            );
        }
        Ok(())
    }

    /// Adds `seats` to the plan of `key` (made when there is none) and holds them; a plan
    /// whose pods now ask for more holds every seat at the larger requests, and gives back
    /// its open seats.
    fn add_seats(
        &mut self,
        key: &PlanKey,
        group: &SchedulingGroup,
        flavor: &Arc<FlavorTopology>,
        requests: ResourceList,
        seats: Vec<Seat>,
        now: Instant,
    ) {
        if seats.is_empty() {
            return;
        }
        if !self.plans.contains_key(key) {
            self.plans.insert(
                key.clone(),
                Plan::new(
                    flavor.clone(),
                    PodSetSpec {
                        name: MAIN_POD_SET.to_string(),
                        ..Default::default()
                    },
                    None,
                    now,
                    group_ref(group),
                    1,
                    1,
                ),
            );
            PlanCounters::bump(&self.counters.plans_made);
        }
        let Some(plan) = self.plans.get_mut(key) else {
            return;
        };
        if !Arc::ptr_eq(&plan.flavor, flavor) {
            // `seats` are members of `flavor`, the hostname tree as it stands: the plan's own
            // seats move onto it too, so that every member index means one tree.
            move_seats(plan, flavor, &mut self.held);
        }
        let mut larger = plan.requests.clone();
        for (k, v) in &requests {
            let slot = larger.entry(k.clone()).or_insert(0);
            *slot = (*slot).max(*v);
        }
        if larger != plan.requests {
            // Open seats (their pods gone) are given back rather than held at the larger
            // size, which their nodes may have no room for: the group's next pod is placed
            // with the tree.
            if plan.seats.iter().any(|s| s.holder == Holder::Open) {
                for seat in plan.seats.iter().filter(|s| s.holder == Holder::Open) {
                    self.held
                        .release(plan.node_id(seat), &plan.requests, plan.id);
                }
                plan.seats.retain(|s| s.holder != Holder::Open);
                plan.index_holders();
                // Room given back: a "does not fit" remembered may fit now.
                self.generation += 1;
            }
            for seat in plan.seats.iter().filter(|s| s.holds()) {
                let node = plan.node_id(seat);
                self.held.release(node, &plan.requests, plan.id);
                self.held.hold(node, &larger, plan.id);
            }
            plan.requests = larger;
        }
        for seat in seats {
            // Only seats taken are added: a bound one would need counting (`Plan::set_holder`).
            debug_assert!(matches!(seat.holder, Holder::Taken(_)), "{seat:?}");
            if let Holder::Taken(uid) = &seat.holder {
                plan.by_uid.insert(uid.clone(), plan.seats.len());
            }
            self.held
                .hold(plan.flavor.member_ids[seat.member], &plan.requests, plan.id);
            plan.seats.push(seat);
        }
        plan.touched = now;
        plan.seats_checked = None;
    }

    /// Remembers why the group does not fit (for `explain` and repeated calls), notices the
    /// `event` on its tree's root once per new reason, and returns the rejection.
    fn scheduling_failure(
        &mut self,
        group: &GroupKey,
        event: Option<(&ObjectReference, String)>,
        message: String,
        reason: String,
        unresolvable: bool,
    ) -> Rejection {
        let rejection = Rejection {
            reason: reason.into(),
            unresolvable,
        };
        if let Some((owner, note)) = event {
            let root = root_key(owner);
            if self.scheduling_noticed.get(&root) != Some(&note) {
                self.notice(owner, true, "TopologyDoesNotFit", note.clone());
                self.scheduling_noticed.insert(root, note);
            }
        }
        self.failures.insert(
            group.clone(),
            super::Failure {
                stamp: super::FailureStamp::default(),
                given_up: false,
                message,
                rejection: rejection.clone(),
            },
        );
        rejection
    }
}

/// The key a tree's root is remembered under for its Events: `Kind namespace/name`.
fn root_key(owner: &ObjectReference) -> String {
    format!(
        "{} {}/{}",
        owner.kind.as_deref().unwrap_or_default(),
        owner.namespace.as_deref().unwrap_or_default(),
        owner.name.as_deref().unwrap_or_default()
    )
}

/// Where Events about a tree go: its root group.
fn owner_of(tree: &SchedulingTree) -> ObjectReference {
    tree.groups
        .iter()
        .find(|g| g.name == tree.root && g.composite == tree.composite)
        .map(group_ref)
        .unwrap_or_default()
}

/// An object reference to a group, at the apiVersion it was read from.
fn group_ref(group: &SchedulingGroup) -> ObjectReference {
    let api_version = group.origin.api_version();
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(group.kind().to_string()),
        name: Some(group.name.clone()),
        namespace: Some(group.namespace.clone()),
        ..Default::default()
    }
}

/// Moves a Workload-API plan's seats onto `onto` (a later build of the hostname tree), each to
/// its node's seat there: member indexes are positions in one build, and nodes joining or
/// leaving between builds shift them. A seat whose node has left (deleted) is dropped, its
/// hold given back; its pod, if it has one, is given a seat again when it asks, unless its
/// Binding is being written (then it counts as bound on that node: `core_groups`).
pub(super) fn move_seats(plan: &mut Plan, onto: &Arc<FlavorTopology>, held: &mut HeldCapacity) {
    let from = std::mem::replace(&mut plan.flavor, Arc::clone(onto));
    let seats = std::mem::take(&mut plan.seats);
    for seat in seats {
        let name = from.tree.nodes[seat.member].name.as_str();
        match onto.tree.member_of_node(name) {
            Some((leaf, member)) => plan.seats.push(Seat {
                leaf,
                member,
                holder: seat.holder,
            }),
            None if seat.holds() => {
                held.release(from.member_ids[seat.member], &plan.requests, plan.id)
            }
            None => {}
        }
    }
    plan.index_holders();
}
