//! The Workload-API half of the [`ClusterState`]: `PodGroup`s and `CompositePodGroup`s (from
//! either API group), the pending pods that name them, and what the placement core reads to
//! place one tree of them (its groups, its nodes, their usage).
//!
//! Invariants: `scheduling_pending_by_group` lists exactly the uids of `scheduling_pending`
//! per group; a group object is kept per origin, and a lookup takes `scheduling.k8s.io`'s
//! before `kube-tas.io`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{ClusterState, FlavorTopology, NodeId};
use crate::cluster::group::GroupKey;
use crate::cluster::scheduling_groups::{GroupId, Origin, PendingMember, SchedulingGroup};
use crate::keys::HOSTNAME_LABEL;
use crate::topology::labels::NodeLabels;
use crate::topology::node_digest::NodeDigests;
use crate::topology::node_facts::NodeFacts;
use crate::topology::podgroup::{self, MAX_DEPTH};
use crate::topology::tree::TopologyTree;
use crate::topology::{NodeInfo, ResourceList};

/// The tree cache's key for [`ClusterState::hostname_topology`]: not a valid ResourceFlavor
/// name, so it never meets one.
const HOSTNAME_TREE: &str = "kubernetes.io/hostname";

/// What the pods on each node [`ClusterState::scheduling_usage`] lists take, read from the
/// state where the placement core asks: the node's usage plus what is held on it for plans,
/// and its scoring amounts plus the held CPU and memory. Positions are those of the node list
/// it came with: give the core that list, no other.
pub struct SchedulingLoads<'s, H> {
    state: &'s ClusterState,
    /// The state's id of each node, by its position in the list.
    ids: Vec<NodeId>,
    held: H,
}

impl<'h, H: Fn(NodeId) -> Option<&'h ResourceList>> podgroup::NodeLoads for SchedulingLoads<'_, H> {
    fn requested(&self, n: usize, _: &NodeInfo, resource: &str) -> i64 {
        let id = self.ids[n];
        let held = (self.held)(id).and_then(|h| h.get(resource)).copied();
        let used = self.state.used(id).get(resource).unwrap_or(0);
        used.saturating_add(held.unwrap_or(0))
    }

    fn scored(&self, n: usize, _: &NodeInfo) -> podgroup::ScoreAmounts {
        let id = self.ids[n];
        let scored = self.state.scored(id);
        let held = (self.held)(id);
        podgroup::SCORE_RESOURCES.map(|(name, _)| {
            let amount = scored
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |(_, v)| v);
            let held = held.and_then(|h| h.get(name)).copied().unwrap_or(0);
            amount.saturating_add(held)
        })
    }
}

/// The groups of one tree, as [`ClusterState::scheduling_tree`] finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulingTree {
    /// The root's name (the PodGroup itself when it stands alone).
    pub root: String,
    /// The root is a CompositePodGroup.
    pub composite: bool,
    /// The root, its descendants, and the groups met walking up from the asking PodGroup
    /// (which, for a broken tree, is where the core finds the cycle or the missing parent).
    pub groups: Vec<SchedulingGroup>,
}

impl SchedulingTree {
    /// The PodGroups of the tree (its leaves).
    pub fn leaves(&self) -> impl Iterator<Item = &SchedulingGroup> {
        self.groups.iter().filter(|g| !g.composite)
    }
}

impl ClusterState {
    /// A PodGroup or CompositePodGroup added or changed.
    pub fn apply_scheduling_group(&mut self, group: SchedulingGroup) {
        self.scheduling_generation += 1;
        self.scheduling_groups
            .entry(group.id())
            .or_default()
            .insert(group.origin, group);
    }

    /// A PodGroup or CompositePodGroup of `origin` gone; `false` when none was recorded.
    pub fn delete_scheduling_group(&mut self, origin: Origin, id: &GroupId) -> bool {
        let Some(by_origin) = self.scheduling_groups.get_mut(id) else {
            return false;
        };
        let removed = by_origin.remove(&origin).is_some();
        self.scheduling_generation += 1;
        if by_origin.is_empty() {
            self.scheduling_groups.remove(id);
        }
        removed
    }

    /// `namespace/name` of every group of `origin` and kind recorded.
    pub fn scheduling_group_keys(&self, origin: Origin, composite: bool) -> Vec<String> {
        self.scheduling_groups
            .iter()
            .filter(|(id, by)| id.composite == composite && by.contains_key(&origin))
            .map(|(id, _)| format!("{}/{}", id.namespace, id.name))
            .collect()
    }

    /// The group of this kind, namespace and name (the Workload API's own first).
    pub fn scheduling_group(&self, id: &GroupId) -> Option<&SchedulingGroup> {
        self.scheduling_groups.get(id)?.values().next()
    }

    /// How many groups are known (both kinds).
    pub fn scheduling_group_count(&self) -> usize {
        self.scheduling_groups.len()
    }

    /// A pending pod of a Workload-API PodGroup (added or changed).
    pub fn apply_pending_member(&mut self, uid: &str, member: PendingMember) {
        self.remove_pending_member(uid);
        self.scheduling_generation += 1;
        self.scheduling_pending_by_group
            .entry(member.group.clone())
            .or_default()
            .insert(uid.to_string());
        self.scheduling_pending.insert(uid.to_string(), member);
    }

    /// A pending member gone (deleted, or bound: the pod watch shows it then).
    pub fn remove_pending_member(&mut self, uid: &str) -> bool {
        let Some(old) = self.scheduling_pending.remove(uid) else {
            return false;
        };
        self.scheduling_generation += 1;
        if let Some(uids) = self.scheduling_pending_by_group.get_mut(&old.group) {
            uids.remove(uid);
            if uids.is_empty() {
                self.scheduling_pending_by_group.remove(&old.group);
            }
        }
        true
    }

    /// The pending member recorded under `uid`.
    pub fn pending_member(&self, uid: &str) -> Option<&PendingMember> {
        self.scheduling_pending.get(uid)
    }

    /// The uids of every pending member recorded.
    pub fn pending_member_uids(&self) -> Vec<String> {
        self.scheduling_pending.keys().cloned().collect()
    }

    /// The pending pods of `group` in scheduling order (priority, then creation, then name),
    /// without those already holding capacity (a pod assumed on bind stays pending in the
    /// watch until it shows up bound).
    pub fn pending_members(&self, group: &GroupKey) -> Vec<(&str, &PendingMember)> {
        let mut out: Vec<(&str, &PendingMember)> = self
            .scheduling_pending_by_group
            .get(group)
            .into_iter()
            .flatten()
            .filter(|u| self.pod(u).is_none())
            .filter_map(|u| self.scheduling_pending.get(u).map(|m| (u.as_str(), m)))
            .collect();
        out.sort_by(|a, b| a.1.order().cmp(&b.1.order()));
        out
    }

    /// The tree the PodGroup `leaf` belongs to: walking up its parents to the root, then every
    /// group under that root. The error, for a PodGroup that does not exist, is the reason its
    /// pods wait (kube-scheduler keeps them pending until it appears).
    pub fn scheduling_tree(&self, leaf: &GroupKey) -> Result<SchedulingTree, String> {
        let namespace = &leaf.namespace;
        let id = |composite: bool, name: &str| GroupId {
            composite,
            namespace: namespace.clone(),
            name: name.to_string(),
        };
        let Some(start) = self.scheduling_group(&id(false, &leaf.name)) else {
            return Err(format!(
                "PodGroup {namespace}/{} does not exist: its pods wait for it to be created",
                leaf.name
            ));
        };
        let mut chain: Vec<&SchedulingGroup> = vec![start];
        let mut at = start;
        while let Some(parent) = &at.parent {
            let Some(p) = self.scheduling_group(&id(true, parent)) else {
                break; // the core names the missing parent
            };
            if chain.iter().any(|c| c.composite && c.name == p.name) {
                break; // the core names the cycle
            }
            chain.push(p);
            at = p;
        }
        if chain.len() > MAX_DEPTH && at.parent.is_none() {
            return Err(podgroup::Error::TooDeep {
                group: format!("PodGroup {namespace}/{}", leaf.name),
                depth: chain.len(),
            }
            .to_string());
        }
        let root = *chain.last().unwrap_or(&start);
        let mut groups: Vec<SchedulingGroup> = chain.iter().map(|g| (*g).clone()).collect();
        if root.composite && root.parent.is_none() {
            // Every group of the namespace under the root, level by level.
            let mut parents: BTreeSet<String> = BTreeSet::from([root.name.clone()]);
            let mut seen: BTreeSet<GroupId> = groups.iter().map(SchedulingGroup::id).collect();
            for _ in 0..MAX_DEPTH {
                let mut next = BTreeSet::new();
                for (gid, by) in &self.scheduling_groups {
                    let Some(g) = by.values().next() else {
                        continue;
                    };
                    if gid.namespace == *namespace
                        && g.parent.as_ref().is_some_and(|p| parents.contains(p))
                        && seen.insert(gid.clone())
                    {
                        if g.composite {
                            next.insert(g.name.clone());
                        }
                        groups.push(g.clone());
                    }
                }
                if next.is_empty() {
                    break;
                }
                parents = next;
            }
        }
        // Stable order for the core and for messages: kind, then name.
        groups.sort_by(|a, b| (!a.composite, &a.name).cmp(&(!b.composite, &b.name)));
        Ok(SchedulingTree {
            root: root.name.clone(),
            composite: root.composite,
            groups,
        })
    }

    /// Every node and what the pods on it take, as the placement core reads them: usage is
    /// requests (and `pods` slots) plus `held` on each node, and the scoring amounts (held
    /// capacity counts at its requests there). The nodes are shared and the usage read in
    /// place where the core asks for it: nothing is copied per node.
    pub fn scheduling_usage<'s, 'h, H>(
        &'s self,
        held: H,
    ) -> (Vec<Arc<NodeInfo>>, SchedulingLoads<'s, H>)
    where
        H: Fn(NodeId) -> Option<&'h ResourceList>,
    {
        let mut nodes = Vec::with_capacity(self.node_count());
        let mut ids = Vec::with_capacity(self.node_count());
        for (id, node) in self.shared_nodes() {
            nodes.push(Arc::clone(node));
            ids.push(id);
        }
        let loads = SchedulingLoads {
            state: self,
            ids,
            held,
        };
        (nodes, loads)
    }

    /// Builds the hostname tree unless it is at the current topology generation or no
    /// Workload-API group is known (only their pods sit on it); whether it built. Live mode's
    /// warmer calls it after each change, as for the flavors' trees, so that a PodGroup's pod
    /// finds the tree built rather than building it (1–3 ms at 15,000 nodes).
    pub fn warm_hostname_tree(&self) -> bool {
        !self.scheduling_groups.is_empty() && self.hostname_tree_built().1
    }

    /// Every node as a leaf of a one-level tree (named by the node, whatever its labels,
    /// readiness or cordon): where the seats of Workload-API plans sit, one per pod on its
    /// node. It holds exactly the nodes the placement core is given ([`Self::scheduling_usage`]),
    /// so every node the core chooses has a seat; which nodes a pod may use is the core's
    /// filters' business. Built on first use per topology generation, making seats and
    /// reading facts only for the nodes that changed since the build before.
    pub fn hostname_topology(&self) -> Arc<FlavorTopology> {
        self.hostname_tree_built().0
    }

    /// [`Self::hostname_topology`], and whether this call built it.
    fn hostname_tree_built(&self) -> (Arc<FlavorTopology>, bool) {
        // As for a flavor's tree: builds take turns on the seats, the cache is locked only to
        // look up and to insert.
        if let Some(f) = self.current_tree(HOSTNAME_TREE) {
            return (f, false);
        }
        let mut kept = self
            .hostname_seats
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(f) = self.current_tree(HOSTNAME_TREE) {
            return (f, false);
        }
        kept.refresh(&self.nodes);
        let HostnameSeats { seats, facts, .. } = &mut *kept;
        let facts = facts
            .get_or_insert_with(|| NodeFacts::new(&[HOSTNAME_LABEL.to_string()], &BTreeMap::new()));
        let tree = TopologyTree::build_from(HOSTNAME_TREE, facts, seats);
        // Slots are node ids.
        let member_ids = tree.positions.iter().map(|&p| p as NodeId).collect();
        let built = Arc::new(FlavorTopology {
            name: HOSTNAME_TREE.to_string(),
            tree,
            tolerations: Vec::new(),
            member_ids,
            generation: self.topology_generation,
        });
        let mut trees = self.trees.lock().unwrap_or_else(|p| p.into_inner());
        trees.insert(HOSTNAME_TREE.to_string(), built.clone());
        (built, true)
    }
}

/// The seats of the hostname tree by node id, the node each was made from, and the facts its
/// last build read of them.
///
/// Invariant: a seat is the node it was made from with only its hostname as labels, Ready,
/// schedulable and untainted; it is the same `Arc` for as long as that node is, so the
/// facts re-read only the seats of nodes that changed.
#[derive(Debug, Default)]
pub(super) struct HostnameSeats {
    seats: NodeDigests,
    /// By id, the node each seat was made from.
    made_from: Vec<Option<Arc<NodeInfo>>>,
    facts: Option<NodeFacts>,
}

impl HostnameSeats {
    /// Brings the seats up to date with `nodes` (by id).
    fn refresh(&mut self, nodes: &NodeDigests) {
        self.made_from.truncate(nodes.len());
        self.made_from.resize_with(nodes.len(), || None);
        for (id, (node, from)) in nodes.nodes().zip(&mut self.made_from).enumerate() {
            match node {
                None if from.is_some() => {
                    *from = None;
                    self.seats.set(id, None);
                }
                None => {}
                Some(n) if from.as_ref().is_some_and(|from| Arc::ptr_eq(from, n)) => {}
                Some(n) => {
                    *from = Some(Arc::clone(n));
                    // While the name stands, so do the seat's labels (the same shared texts):
                    // the hostname facts of a node that changed in capacity only are kept.
                    let labels = (self.seats.node(id))
                        .filter(|seat| seat.name == n.name)
                        .map(|seat| seat.labels.clone());
                    self.seats.set(id, Some(Arc::new(seat_of(n, labels))));
                }
            }
        }
        for id in nodes.len()..self.seats.len() {
            self.seats.set(id, None);
        }
    }
}

/// `node` as a seat of the hostname tree: named by itself, whatever its labels, readiness,
/// cordon or taints; `labels` are its last seat's when it had one under the same name.
fn seat_of(node: &NodeInfo, labels: Option<NodeLabels>) -> NodeInfo {
    NodeInfo {
        name: node.name.clone(),
        labels: labels
            .unwrap_or_else(|| [(HOSTNAME_LABEL, node.name.as_str())].into_iter().collect()),
        taints: Vec::new(),
        allocatable: node.allocatable.clone(),
        ready: true,
        ready_condition_missing: false,
        ready_since: node.ready_since,
        unschedulable: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::WorkloadKind;
    use crate::cluster::scheduling_groups::{Policy, pending_member};
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn group(name: &str, composite: bool, parent: Option<&str>, origin: Origin) -> SchedulingGroup {
        SchedulingGroup {
            origin,
            composite,
            namespace: "ml".into(),
            name: name.into(),
            parent: parent.map(str::to_string),
            created: 0,
            key: Some(format!("key-{name}")),
            policy: Policy::Basic,
        }
    }

    fn leaf(name: &str) -> GroupKey {
        GroupKey {
            kind: WorkloadKind::SchedulingGroup,
            namespace: "ml".into(),
            name: name.into(),
        }
    }

    fn names(tree: &SchedulingTree) -> Vec<&str> {
        tree.groups.iter().map(|g| g.name.as_str()).collect()
    }

    #[test]
    fn a_tree_is_its_root_and_everything_under_it() {
        let mut s = ClusterState::new();
        for g in [
            group("root", true, None, Origin::Scheduling),
            group("mid", true, Some("root"), Origin::Scheduling),
            group("a", false, Some("mid"), Origin::Scheduling),
            group("b", false, Some("root"), Origin::Scheduling),
            group("other", false, None, Origin::Scheduling),
        ] {
            s.apply_scheduling_group(g);
        }
        // The same names in another namespace belong to another tree.
        s.apply_scheduling_group(SchedulingGroup {
            namespace: "else".into(),
            ..group("c", false, Some("root"), Origin::Scheduling)
        });
        let t = s.scheduling_tree(&leaf("a")).unwrap();
        assert_eq!((t.root.as_str(), t.composite), ("root", true));
        // Composites first, then PodGroups, each by name.
        assert_eq!(names(&t), ["mid", "root", "a", "b"]);
        assert_eq!(
            t.leaves().map(|g| g.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let alone = s.scheduling_tree(&leaf("other")).unwrap();
        assert_eq!((names(&alone), alone.composite), (vec!["other"], false));
        let missing = s.scheduling_tree(&leaf("ghost")).unwrap_err();
        assert!(
            missing.contains("PodGroup ml/ghost does not exist"),
            "{missing}"
        );
    }

    #[test]
    fn a_broken_tree_is_handed_to_the_core_as_found_and_a_deep_one_refused() {
        let mut s = ClusterState::new();
        s.apply_scheduling_group(group("orphan", false, Some("gone"), Origin::Scheduling));
        let t = s.scheduling_tree(&leaf("orphan")).unwrap();
        assert_eq!(
            names(&t),
            ["orphan"],
            "the core then names the missing parent"
        );
        for (name, parent) in [("x", "y"), ("y", "x")] {
            s.apply_scheduling_group(group(name, true, Some(parent), Origin::Scheduling));
        }
        s.apply_scheduling_group(group("in-cycle", false, Some("x"), Origin::Scheduling));
        let t = s.scheduling_tree(&leaf("in-cycle")).unwrap();
        assert_eq!(names(&t), ["x", "y", "in-cycle"]);
        // Five levels: one more than the API allows.
        let mut parent = None;
        for level in ["l1", "l2", "l3", "l4"] {
            s.apply_scheduling_group(group(level, true, parent, Origin::Scheduling));
            parent = Some(level);
        }
        s.apply_scheduling_group(group("deep", false, Some("l4"), Origin::Scheduling));
        let e = s.scheduling_tree(&leaf("deep")).unwrap_err();
        assert!(e.contains("depth 5") && e.contains("at most 4"), "{e}");
        // Four levels are fine.
        s.apply_scheduling_group(group("ok", false, Some("l3"), Origin::Scheduling));
        assert_eq!(s.scheduling_tree(&leaf("ok")).unwrap().root, "l1");
    }

    #[test]
    fn the_workload_apis_own_object_wins_over_kube_tas_copy() {
        let mut s = ClusterState::new();
        let copy = SchedulingGroup {
            key: Some("copy".into()),
            ..group("g", false, None, Origin::KubeTas)
        };
        s.apply_scheduling_group(copy);
        s.apply_scheduling_group(group("g", false, None, Origin::Scheduling));
        let id = GroupId {
            composite: false,
            namespace: "ml".into(),
            name: "g".into(),
        };
        assert_eq!(
            s.scheduling_group(&id).unwrap().key.as_deref(),
            Some("key-g")
        );
        assert_eq!(s.scheduling_group_keys(Origin::KubeTas, false), ["ml/g"]);
        assert!(s.delete_scheduling_group(Origin::Scheduling, &id));
        assert_eq!(
            s.scheduling_group(&id).unwrap().key.as_deref(),
            Some("copy")
        );
        assert!(
            s.scheduling_group_keys(Origin::Scheduling, false)
                .is_empty()
        );
        assert!(!s.delete_scheduling_group(Origin::Scheduling, &id));
        assert!(s.delete_scheduling_group(Origin::KubeTas, &id));
        assert_eq!(s.scheduling_group_count(), 0);
    }

    #[test]
    fn pending_members_come_in_the_schedulers_order() {
        let mut s = ClusterState::new();
        let pod = |name: &str, priority: i32, created: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml",
                "creationTimestamp": created},
                "spec": {"priority": priority, "schedulingGroup": {"podGroupName": "g"},
                    "containers": []}}))
            .unwrap()
        };
        for (uid, p) in [
            ("u-late", pod("late", 0, "2026-01-01T00:00:09Z")),
            ("u-b", pod("b", 0, "2026-01-01T00:00:01Z")),
            ("u-a", pod("a", 0, "2026-01-01T00:00:01Z")),
            ("u-urgent", pod("urgent", 10, "2026-01-01T00:00:30Z")),
        ] {
            s.apply_pending_member(uid, pending_member(&p).unwrap().unwrap());
        }
        let order: Vec<&str> = s
            .pending_members(&leaf("g"))
            .into_iter()
            .map(|(uid, _)| uid)
            .collect();
        assert_eq!(order, ["u-urgent", "u-a", "u-b", "u-late"]);
        assert!(s.remove_pending_member("u-a"));
        assert!(!s.remove_pending_member("u-a"));
        assert_eq!(s.pending_members(&leaf("g")).len(), 3);
        assert_eq!(s.pending_member_uids().len(), 3);
    }

    fn seat_names(f: &FlavorTopology) -> Vec<&str> {
        f.tree.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn the_hostname_tree_is_warmed_while_workload_api_groups_are_known() {
        use crate::topology::fixtures::NodeBuilder;
        let mut s = ClusterState::new();
        s.apply_node(NodeBuilder::new("a").rack("r1").cpu(8).build());
        // No group: nobody sits on it, it is not built.
        assert!(!s.warm_hostname_tree());
        assert_eq!(s.warm_trees(), 0);
        assert!(s.current_tree(HOSTNAME_TREE).is_none());

        let train = group("train", false, None, Origin::Scheduling);
        s.apply_scheduling_group(train.clone());
        assert!(s.warm_hostname_tree());
        let warmed = s.current_tree(HOSTNAME_TREE).expect("built ahead");
        assert_eq!(seat_names(&warmed), ["a"]);
        assert!(!s.warm_hostname_tree(), "nothing changed");
        assert!(
            Arc::ptr_eq(&warmed, &s.hostname_topology()),
            "a request finds it built"
        );

        // A node joins: the warmer builds it again, with the node.
        s.apply_node(NodeBuilder::new("b").rack("r1").cpu(8).build());
        assert_eq!(s.warm_trees(), 1, "the hostname tree (no flavor here)");
        let again = s.current_tree(HOSTNAME_TREE).expect("built ahead");
        assert_eq!(seat_names(&again), ["a", "b"]);

        // The last group gone, changes leave it alone.
        assert!(s.delete_scheduling_group(Origin::Scheduling, &train.id()));
        s.apply_node(NodeBuilder::new("c").rack("r1").cpu(8).build());
        assert!(!s.warm_hostname_tree());
        assert!(s.current_tree(HOSTNAME_TREE).is_none());
    }

    #[test]
    fn the_hostname_tree_makes_seats_only_for_nodes_that_changed() {
        use crate::topology::fixtures::NodeBuilder;
        let mut s = ClusterState::new();
        s.apply_node(NodeBuilder::new("a").rack("r1").cpu(8).build());
        s.apply_node(NodeBuilder::new("b").rack("r1").cpu(8).not_ready().build());
        s.apply_node(cordoned_c());
        let first = s.hostname_topology();
        // Every node is a seat, whatever its labels, readiness, cordon or taints.
        assert_eq!(seat_names(&first), ["a", "b", "c"]);
        assert!(first.tree.nodes.iter().all(|n| n.ready
            && !n.unschedulable
            && n.taints.is_empty()
            && n.labels.len() == 1
            && n.labels.get(HOSTNAME_LABEL) == Some(n.name.as_str())));
        assert!(
            Arc::ptr_eq(&first, &s.hostname_topology()),
            "cached per generation"
        );

        // "b" moves rack: only its seat is made again; it keeps its labels (what the
        // hostname facts read), so no node is read again.
        s.apply_node(NodeBuilder::new("b").rack("r2").cpu(8).not_ready().build());
        let second = s.hostname_topology();
        assert_eq!(seat_names(&second), ["a", "b", "c"]);
        let read = |s: &ClusterState| {
            let kept = s.hostname_seats.lock().expect("unpoisoned");
            kept.facts
                .as_ref()
                .and_then(NodeFacts::last_reads)
                .map(|r| r.total())
        };
        assert_eq!(read(&s), Some(0));
        let same = |x: usize| Arc::ptr_eq(&first.tree.nodes[x], &second.tree.nodes[x]);
        assert!(same(0) && !same(1) && same(2));

        // A node that goes loses its seat; one that joins gets one (members in node id
        // order), its leaf ranked by its name.
        s.delete_node("a");
        s.apply_node(NodeBuilder::new("aa").rack("r1").cpu(4).build());
        let third = s.hostname_topology();
        assert_eq!(seat_names(&third), ["b", "c", "aa"]);
        assert_eq!(read(&s), Some(1));
        let leaves: Vec<&str> = third
            .tree
            .leaves()
            .iter()
            .map(|&l| {
                third.tree.nodes[third.tree.domains[l].first_node]
                    .name
                    .as_str()
            })
            .collect();
        assert_eq!(leaves, ["aa", "b", "c"]);
        // The placement core reads every node, shared with the state.
        let (shared, _) = s.scheduling_usage(|_| None);
        assert!(shared.iter().all(|n| {
            s.node_id(&n.name)
                .and_then(|id| s.nodes.node(id as usize))
                .is_some_and(|live| Arc::ptr_eq(live, n))
        }));
        assert_eq!(shared.len(), 3);
        let ids: Vec<NodeId> = seat_names(&third)
            .iter()
            .map(|n| s.node_id(n).expect("a live node"))
            .collect();
        assert_eq!(third.member_ids, ids);
        assert_eq!(
            third
                .tree
                .leaf_of_node("aa")
                .map(|l| third.tree.leaf_members(l).len()),
            Some(1)
        );

        // A capacity-only update moves no generation; the next rebuild gives "aa" a seat with
        // its new allocatable. A node deleted and back under its id gets a new seat.
        let before = s.hostname_topology();
        s.apply_node(NodeBuilder::new("aa").rack("r1").cpu(6).build());
        s.delete_node("c");
        s.apply_node(cordoned_c());
        let fourth = s.hostname_topology();
        assert_eq!(seat_names(&fourth), ["b", "c", "aa"]);
        // Both seats are new, under the same names and with the same labels: their hostname
        // facts stand.
        assert_eq!(read(&s), Some(0));
        let seat =
            |f: &FlavorTopology, name: &str| f.tree.nodes.iter().find(|n| n.name == name).cloned();
        let (old_c, new_c) = (seat(&before, "c"), seat(&fourth, "c"));
        assert!(old_c.zip(new_c).is_some_and(|(o, n)| !Arc::ptr_eq(&o, &n)));
        assert_eq!(
            seat(&fourth, "aa").and_then(|n| n.allocatable.get("cpu").copied()),
            Some(6000)
        );
        // The seat's leaf holds its new capacity (the seat's kept digest took its amounts).
        let tree = &fourth.tree;
        let leaf = tree.leaf_of_node("aa").expect("a seat");
        let cpu = tree.resource_id("cpu").expect("cpu");
        assert_eq!(tree.capacity(leaf)[cpu], 6000);
    }

    /// A cordoned node, with the taint the node lifecycle controller gives it.
    fn cordoned_c() -> NodeInfo {
        let mut c = crate::topology::fixtures::NodeBuilder::new("c")
            .rack("r2")
            .cpu(8)
            .build();
        c.unschedulable = true;
        c.taints = vec![k8s_openapi::api::core::v1::Taint {
            key: crate::keys::UNSCHEDULABLE_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }];
        c
    }
}
