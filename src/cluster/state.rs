//! [`ClusterState`]: everything placement and admission read about the cluster, changed only
//! through events, whatever their source (manifest files, API-server watches, the extender's
//! own binds).
//!
//! What it owns:
//! * **nodes by stable id**: a node's name is interned to a [`NodeId`] on first sight and keeps
//!   it for as long as anything refers to it (a node deleted and re-created under the same name
//!   meanwhile gets the same id back), so nothing is ever indexed by a position an event can
//!   reorder. The id of a deleted node that nothing refers to any more (no pod recorded on it,
//!   no departed pod, no tree kept, nothing the caller holds) is given back by
//!   [`ClusterState::reclaim_node_ids`] and reused for the next new name, so ids, and the
//!   arrays by id every build reads, stay bounded by the most nodes ever known at once, not by
//!   every name an autoscaler ever made;
//! * **usage per node**: the requests (plus one `pods` slot) of every pod that holds capacity
//!   there, by pod uid, so applying the same pod twice never counts it twice;
//! * the **Kueue objects** and the unfinished **Jobs** admission resolves against;
//! * per-flavor **topology trees** ([`FlavorTopology`]), built on first use (or ahead of
//!   it, [`ClusterState::warm_trees`]) and stamped with the topology generation: a node
//!   change that touches no label, readiness, schedulability, taint or resource name only
//!   changes capacity, which is read live, so the trees stay.
//!
//! Invariants: `used[id]` is exactly the sum over `pods` whose node is `id`; `members` lists
//! exactly the pods of `pods` per group; a tree of generation `g` was built from the nodes and
//! Kueue objects as they stood at topology generation `g`. The capacity generation moves
//! whenever capacity is given back (a pod gone or finished, a node added or grown, a failed
//! bind undone), so a remembered "does not fit" is known to be stale.
//!
//! Locking: the state is one value; [`SharedState`] puts it behind a read-write lock. Writers
//! (the watch appliers, `bind`) hold the write lock for one event at a time, so a reader never
//! waits behind a whole batch. Readers build a missing tree under the read lock: builds take
//! turns on the kept facts (`tree_facts`, or `hostname_seats` for the Workload-API hostname
//! tree), and the tree cache's own lock is held only to look up and to insert, so a reader
//! whose tree is built never waits behind a build.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Toleration;

use std::borrow::Cow;

use super::group::{GroupKey, PodIndex, PodSetHint};
use super::incarnation::Incarnation;
use super::kueue::{ClusterQueue, KueueObjects, LocalQueue, ResourceFlavor, Topology};
pub use super::pod_resources::{PodResources, ResourceAmounts, ScoringAmounts};
use super::pod_uid::PodUid;
use super::scheduling_groups::{GroupId, Origin, PendingMember, SchedulingGroup, pending_member};
use super::sets::SetEntry;
use super::workloads::{count_pod_of_role, finish_group_pod_sets};
use super::{BoundPod, Cluster, LostPod, PendingGroupPod, PendingPodSet, Workload};
use crate::topology::capacity::FreeCapacity;
use crate::topology::node_digest::NodeDigests;
use crate::topology::node_facts::{NodeFacts, NodeReads};
use crate::topology::resources::{PODS, add_pod_amounts};
use crate::topology::tree::TopologyTree;
use crate::topology::{NodeInfo, ResourceList};

/// A node's stable id: its interned name.
pub type NodeId = u32;

/// A pod that holds capacity on a node, by uid.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    /// The node it holds capacity on.
    pub node: NodeId,
    /// Its effective requests, without the `pods` slot.
    pub requests: PodResources,
    /// Its CPU and memory as kube-scheduler's scoring counts them (the non-zero defaults for
    /// containers that request none; [`crate::cluster::pod_requests::scoring_requests`]).
    pub scoring: ScoringAmounts,
    /// The group it belongs to: one copy shared by every pod of the group the state holds.
    pub group: Arc<GroupKey>,
    /// Its PodSet in the group, as the pod says.
    pub pod_set: PodSetHint,
    /// Which pod of its PodSet it is.
    pub index: PodIndex,
    /// Being deleted: it holds capacity but no longer progresses.
    pub terminating: bool,
    /// Recorded by a bind and not yet shown by the watch.
    pub assumed: bool,
    /// Which creation of its Job made it (a Job's pod; unknown for any other).
    pub incarnation: Incarnation,
}

impl PodUsage {
    /// The seat it takes in its group: its PodSet and index.
    pub fn slot(&self) -> (&PodSetHint, PodIndex) {
        (&self.pod_set, self.index)
    }
}

/// A bind kube-tas assumed: when, and the pod it bound.
#[derive(Debug, Clone)]
struct AssumedBind {
    at: Instant,
    namespace: String,
    name: String,
}

/// A bind assumed long ago that the pod watch has not shown ([`ClusterState::assumed_unconfirmed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnconfirmedBind {
    /// The pod's uid (its key in the state).
    pub uid: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The node it was bound to.
    pub node: String,
}

/// A pod of a running group that stopped holding capacity (deleted, or finished as failed)
/// while other pods of its group still ran: the pod its controller recreates takes its place,
/// on its node unless that node has failed for the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departed {
    /// Its PodSet, as the pod said.
    pub pod_set: PodSetHint,
    /// Which pod of the PodSet it was.
    pub index: PodIndex,
    /// The node it held capacity on.
    pub node: NodeId,
    /// Which creation of its Job it was made by.
    pub incarnation: Incarnation,
}

/// Departures remembered per group, at most (the oldest are forgotten first).
pub const MAX_DEPARTED_PER_GROUP: usize = 4096;

/// What a node event changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeChange {
    /// A node not known before (every tree is rebuilt on next use).
    Added,
    /// Labels, taints, readiness, schedulability or the resource names changed: trees are
    /// rebuilt on next use.
    Topology,
    /// Only allocatable amounts changed: updated in place.
    Capacity,
    /// Nothing placement reads changed.
    Unchanged,
}

/// A ResourceFlavor's topology tree at one topology generation, shared by every plan made on it.
#[derive(Debug)]
pub struct FlavorTopology {
    /// The ResourceFlavor's name.
    pub name: String,
    /// Its domain tree.
    pub tree: TopologyTree,
    /// Its tolerations.
    pub tolerations: Vec<Toleration>,
    /// `member_ids[m]` is the id of `tree.nodes[m]`.
    pub member_ids: Vec<NodeId>,
    /// The topology generation it was built at.
    pub generation: u64,
}

impl FlavorTopology {
    /// `flavor F (topology T): 2 node(s) take none of its pods: 1 not Ready (h1); ...`, when
    /// some of the flavor's nodes are left out of its tree or cannot hold a pod.
    pub fn left_out_note(&self) -> Option<String> {
        let left_out = &self.tree.left_out;
        (left_out.total() > 0).then(|| {
            format!(
                "flavor {} (topology {}): {} node(s) take none of its pods: {}",
                self.name,
                self.tree.topology_name,
                left_out.total(),
                left_out.describe()
            )
        })
    }
}

/// The uids of the pods removed in the last [`RecentUids::KEPT_FOR`]: a pod's uid is never
/// reused, so a removed uid stands for a pod gone for good. A bind's answer races its pod's
/// watch events by at most the Binding's timeout and a lock wait; the window is kept by time,
/// not by count, so a mass deletion cannot push out the uid of a pod being bound.
#[derive(Debug, Default)]
struct RecentUids {
    order: VecDeque<(Instant, PodUid)>,
    set: HashSet<PodUid>,
}

impl RecentUids {
    /// Well above the Binding's timeout ([`crate::extender::binding::BINDING_TIMEOUT`]).
    const KEPT_FOR: Duration = Duration::from_secs(60);

    /// Remembers `uid`, removed at `now`, and forgets those removed before the window.
    fn insert(&mut self, uid: PodUid, now: Instant) {
        while let Some((at, _)) = self.order.front()
            && now.saturating_duration_since(*at) > Self::KEPT_FOR
        {
            if let Some((_, old)) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        if self.set.insert(uid.clone()) {
            self.order.push_back((now, uid));
        }
    }

    fn contains(&self, uid: &PodUid) -> bool {
        self.set.contains(uid)
    }
}

/// Everything kube-tas knows about the cluster (see the module documentation).
#[derive(Debug, Default)]
pub struct ClusterState {
    /// Looked up once per candidate name of every extender request: a fast hash.
    node_ids: HashMap<String, NodeId, foldhash::fast::RandomState>,
    /// By id; empty for an id given back.
    names: Vec<String>,
    /// Ids of the nodes deleted since the last [`ClusterState::reclaim_node_ids`] and of those
    /// it found still referred to: the ones it looks at.
    deleted_ids: Vec<NodeId>,
    /// Ids given back, taken again by the next new names.
    free_ids: Vec<NodeId>,
    /// By id; `None` for a name whose node is deleted. Shared with the trees built from them,
    /// each with what every tree build reads of it whatever the flavor and one copy of every
    /// label key and value the nodes carry.
    nodes: NodeDigests,
    /// By id: requests of the pods holding capacity there, plus their `pods` slots.
    used: Vec<ResourceAmounts>,
    /// By id: the same pods' CPU and memory as scoring counts them.
    scored: Vec<ScoringAmounts>,
    /// By uid (a UUID kept inline: nothing allocated per pod for its key).
    pods: HashMap<PodUid, PodUsage, foldhash::fast::RandomState>,
    /// Per group, the uids of its pods holding capacity. The key is the one copy of the group
    /// its pods share.
    members: HashMap<Arc<GroupKey>, BTreeSet<PodUid>>,
    /// Per running group, the pods that left it and are not replaced yet.
    departed: HashMap<GroupKey, Vec<Departed>>,
    /// Per Job known from its watch, which creation of it is current (its uid); kept while
    /// its pods are, after the Job is deleted.
    job_incarnations: HashMap<GroupKey, Incarnation>,
    /// Per group, the uids of its pods being deleted.
    terminating: HashMap<GroupKey, BTreeSet<PodUid>>,
    /// The pods removed (deleted or finished) lately, which [`ClusterState::assume`] does not
    /// record again.
    removed: RecentUids,
    /// Each pod still assumed: when, and its name (to read it back).
    assumed_at: HashMap<PodUid, AssumedBind>,
    /// When the pod watch's last relist began (before its list was requested).
    pod_relist_began: Option<Instant>,
    /// Kueue's Workloads (`namespace/name`) and the group each stands for, when it is a Job
    /// or JobSet: those groups are Kueue's to place.
    kueue_workloads: HashMap<String, Option<GroupKey>>,
    /// How many Workloads stand for each group (normally one).
    kueue_managed: HashMap<GroupKey, usize>,
    jobs: BTreeMap<(String, String), Workload>,
    sets: BTreeMap<GroupKey, SetEntry>,
    /// Plain pod groups whose pods are known (their PodSets by shape).
    pod_groups: HashMap<GroupKey, Workload>,
    /// Pending pods of plain pod groups by uid (live mode's watch of unbound group pods).
    pending_group_pods: HashMap<String, PendingGroupPod>,
    /// Their uids per group.
    pending_by_group: HashMap<GroupKey, BTreeSet<String>>,
    /// A watch feeds the pending group pods (live mode): a group none of whose pods is known
    /// yet is waited for, never guessed from one pod.
    tracks_pending_group_pods: bool,
    /// Workload-API PodGroups and CompositePodGroups, per origin ([`scheduling`]).
    scheduling_groups: HashMap<GroupId, BTreeMap<Origin, SchedulingGroup>>,
    /// Pending pods of Workload-API PodGroups, by uid.
    scheduling_pending: HashMap<String, PendingMember>,
    /// Their uids per group.
    scheduling_pending_by_group: HashMap<GroupKey, BTreeSet<String>>,
    kueue: KueueObjects,
    trees: Mutex<HashMap<String, Arc<FlavorTopology>>>,
    /// Per TAS flavor (kept from the moment its Topology and flavor are known), what its tree
    /// builds read of each node for that flavor (the rest is in `nodes`), read at each node's
    /// event, so that a build reads only the nodes not read since. Held for a whole build, so
    /// builds take turns (lock order: `tree_facts` first, `trees` only briefly inside it); the
    /// events reach it through `&mut self`, without the lock.
    tree_facts: Mutex<HashMap<String, NodeFacts>>,
    /// What the last build of the Workload-API hostname tree made and read, so that a rebuild
    /// makes seats only for the nodes that changed. Held for a whole build of that tree (lock
    /// order: `hostname_seats` first, `trees` only briefly inside it).
    hostname_seats: Mutex<scheduling::HostnameSeats>,
    /// Flavor trees built since start (every [`ClusterState::flavor`] that had to build).
    tree_builds: AtomicU64,
    topology_generation: u64,
    capacity_generation: u64,
    /// Moves whenever a Workload-API group or a pending pod naming one changes.
    scheduling_generation: u64,
    /// Moves whenever a pod starts or stops holding capacity.
    usage_generation: u64,
    /// Moves whenever what a workload is read or routed from changes.
    workloads_generation: u64,
}

impl ClusterState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The state a set of manifests describes, fed through the same events a watch sends:
    /// every node, every pod holding capacity, every unfinished Job and every Kueue object.
    pub fn from_cluster(cluster: &Cluster) -> Self {
        let mut state = Self::new();
        // Flavors first, as a watch usually brings them: each node's facts are read at its
        // event, not all at the first build.
        for (name, t) in &cluster.kueue.topologies {
            state.apply_topology(name, t.clone());
        }
        for (name, f) in &cluster.kueue.resource_flavors {
            state.apply_resource_flavor(name, f.clone());
        }
        for node in &cluster.nodes {
            state.apply_node(node.clone());
        }
        for pod in &cluster.bound_pods {
            state.apply_bound_pod(pod);
        }
        for lost in &cluster.lost_pods {
            state.add_departed(lost);
        }
        for ((namespace, name), workload) in &cluster.jobs {
            state.apply_job(namespace, name, workload.clone(), Incarnation::UNKNOWN);
        }
        for (key, entry) in &cluster.sets {
            state.apply_set(key.clone(), entry.clone());
        }
        for w in &cluster.workloads {
            if w.kind == super::WorkloadKind::PodGroup {
                state.apply_pod_group(w.clone());
            }
        }
        for group in &cluster.scheduling_groups {
            state.apply_scheduling_group(group.clone());
        }
        for pod in &cluster.scheduling_pods {
            // The loader has read every one of them already.
            if let Ok(Some(member)) = pending_member(pod) {
                let uid = pod
                    .metadata
                    .uid
                    .clone()
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| format!("{}/{}", member.group.namespace, member.pod.name));
                state.apply_pending_member(&uid, member);
            }
        }
        for (name, q) in &cluster.kueue.cluster_queues {
            state.apply_cluster_queue(name, q.clone());
        }
        for ((namespace, name), q) in &cluster.kueue.local_queues {
            state.apply_local_queue(namespace, name, q.clone());
        }
        state
    }

    // -----------------------------------------------------------------------------------------
    // Nodes
    // -----------------------------------------------------------------------------------------

    fn intern(&mut self, name: &str) -> NodeId {
        if let Some(&id) = self.node_ids.get(name) {
            return id;
        }
        // A given-back id has an empty slot, no usage and no facts kept (see
        // `reclaim_node_ids`): it is as good as a new one.
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.names[id as usize] = name.to_string();
                id
            }
            None => {
                let id = self.names.len() as NodeId;
                self.names.push(name.to_string());
                self.nodes.set(id as usize, None);
                self.used.push(ResourceAmounts::default());
                self.scored.push(ScoringAmounts::default());
                id
            }
        };
        self.node_ids.insert(name.to_string(), id);
        id
    }

    /// A node was added or changed.
    pub fn apply_node(&mut self, mut node: NodeInfo) -> NodeChange {
        let id = self.intern(&node.name) as usize;
        let change = match self.nodes.node(id) {
            None => NodeChange::Added,
            Some(old) if **old == node => NodeChange::Unchanged,
            Some(old)
                if old.labels == node.labels
                    && old.taints == node.taints
                    && old.ready == node.ready
                    && old.ready_condition_missing == node.ready_condition_missing
                    && old.unschedulable == node.unschedulable
                    && old.allocatable.keys().eq(node.allocatable.keys()) =>
            {
                NodeChange::Capacity
            }
            Some(_) => NodeChange::Topology,
        };
        match change {
            NodeChange::Unchanged => return change,
            NodeChange::Added => {
                self.topology_generation += 1;
                self.capacity_generation += 1;
            }
            NodeChange::Topology => {
                self.topology_generation += 1;
                self.capacity_generation += 1;
            }
            NodeChange::Capacity => self.capacity_generation += 1,
        }
        // Labels equal to the old node's: its shared copies, no lookups (the node store
        // interns any other).
        if let Some(old) = self.nodes.node(id)
            && (change == NodeChange::Capacity || old.labels == node.labels)
        {
            node.labels = old.labels.clone();
        }
        self.nodes.set(id, Some(Arc::new(node)));
        self.read_node_ahead(id);
        change
    }

    /// Reads a node's facts now, at its event, for every flavor whose facts are kept: the node
    /// is in cache here, and the next tree build then reads dense arrays only (at start-up
    /// too, when the flavors came before the nodes). `None` (a deleted node) drops them.
    fn read_node_ahead(&mut self, id: usize) {
        let kept = self.tree_facts.get_mut().unwrap_or_else(|p| p.into_inner());
        for facts in kept.values_mut() {
            facts.read_ahead(id, &self.nodes);
        }
    }

    /// A node is gone. The usage of pods still recorded on it is kept (their own deletion
    /// gives it back), and comes back with the node if it returns under the same name.
    pub fn delete_node(&mut self, name: &str) -> bool {
        let Some(&id) = self.node_ids.get(name) else {
            return false;
        };
        if self.nodes.node(id as usize).is_none() {
            return false;
        }
        self.nodes.set(id as usize, None);
        self.read_node_ahead(id as usize);
        self.topology_generation += 1;
        self.deleted_ids.push(id);
        true
    }

    /// Gives back the ids of deleted nodes that nothing refers to any more, for new names to
    /// take: no pod is recorded on the node, no departed pod names it, no current tree in the
    /// cache lists it (a stale one that does is dropped), and `held_elsewhere` (given the
    /// candidates) does not return it — the caller names there every id it keeps across this
    /// call (the plan book's seats and trees), holding whatever keeps them unchanged meanwhile.
    /// The ids still referred to are looked at again next time. How many ids were given back.
    pub fn reclaim_node_ids(
        &mut self,
        held_elsewhere: impl FnOnce(&HashSet<NodeId>) -> HashSet<NodeId>,
    ) -> usize {
        if self.deleted_ids.is_empty() {
            return 0;
        }
        // Still deleted (one back under its name is not looked at again unless deleted anew).
        let deleted: BTreeSet<NodeId> = std::mem::take(&mut self.deleted_ids)
            .into_iter()
            .filter(|&id| self.nodes.node(id as usize).is_none())
            .collect();
        let mut candidates: HashSet<NodeId> = (deleted.iter().copied())
            .filter(|&id| self.used[id as usize].is_empty())
            .collect();
        for gone in self.departed.values().flatten() {
            candidates.remove(&gone.node);
        }
        // A cached tree built before a deletion is stale: no request reads it again (it is
        // built anew first), so one that lists a candidate is dropped rather than keeping it
        // (the Workload-API hostname tree too: its next request or the warmer builds it
        // anew). A current tree lists no deleted node.
        let current = self.topology_generation;
        let trees = self.trees.get_mut().unwrap_or_else(|p| p.into_inner());
        trees.retain(|_, tree| {
            tree.generation == current || !tree.member_ids.iter().any(|id| candidates.contains(id))
        });
        for tree in trees.values() {
            for id in &tree.member_ids {
                candidates.remove(id);
            }
        }
        let held = held_elsewhere(&candidates);
        let mut reclaimed = 0;
        for id in deleted {
            if !candidates.contains(&id) || held.contains(&id) {
                // Still referred to: looked at again next time.
                self.deleted_ids.push(id);
                continue;
            }
            let name = std::mem::take(&mut self.names[id as usize]);
            self.node_ids.remove(&name);
            self.scored[id as usize] = ScoringAmounts::default();
            self.free_ids.push(id);
            reclaimed += 1;
        }
        reclaimed
    }

    /// Ids the state gives out now: live nodes and deleted ones not given back yet.
    pub fn node_id_count(&self) -> usize {
        self.names.len() - self.free_ids.len()
    }

    /// A full node list (a relist): nodes missing from it are deleted, the rest applied.
    pub fn replace_nodes(&mut self, nodes: Vec<NodeInfo>) {
        let keep: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let gone: Vec<String> = self
            .live_node_names()
            .filter(|n| !keep.contains(n))
            .map(str::to_string)
            .collect();
        for name in gone {
            self.delete_node(&name);
        }
        for node in nodes {
            self.apply_node(node);
        }
    }

    /// The id of a node known by name (deleted or not).
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_ids.get(name).copied()
    }

    /// A node that exists now.
    pub fn node(&self, id: NodeId) -> Option<&NodeInfo> {
        self.nodes.node(id as usize).map(|n| &**n)
    }

    /// The name a node id was given (the node may be deleted since).
    pub fn name_of(&self, id: NodeId) -> Option<&str> {
        (self.names.get(id as usize))
            .filter(|name| !name.is_empty())
            .map(String::as_str)
    }

    /// A node that exists now, by name.
    pub fn node_by_name(&self, name: &str) -> Option<&NodeInfo> {
        self.node(self.node_id(name)?)
    }

    /// Every node that exists now, by id order.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &NodeInfo)> {
        self.shared_nodes().map(|(id, n)| (id, &**n))
    }

    /// [`Self::nodes`] as the `Arc`s the state shares with its trees.
    fn shared_nodes(&self) -> impl Iterator<Item = (NodeId, &Arc<NodeInfo>)> {
        self.nodes
            .nodes()
            .enumerate()
            .filter_map(|(i, n)| n.map(|n| (i as NodeId, n)))
    }

    fn live_node_names(&self) -> impl Iterator<Item = &str> {
        self.nodes().map(|(_, n)| n.name.as_str())
    }

    /// The names of the nodes that exist now.
    pub fn node_names(&self) -> Vec<String> {
        self.live_node_names().map(str::to_string).collect()
    }

    /// How many nodes exist now.
    pub fn node_count(&self) -> usize {
        self.nodes.live()
    }

    /// Requests of the pods holding capacity on a node (plus their `pods` slots).
    pub fn used(&self, id: NodeId) -> &ResourceAmounts {
        &self.used[id as usize]
    }

    /// What the pods on node `id` count for in kube-scheduler's scoring: CPU and memory with
    /// the non-zero defaults for containers that request none.
    pub fn scored(&self, id: NodeId) -> ScoringAmounts {
        self.scored[id as usize]
    }

    /// [`Self::used`] by name, as a list; `None` for a node never seen.
    pub fn node_usage(&self, name: &str) -> Option<ResourceList> {
        self.node_id(name).map(|id| self.used(id).to_list())
    }

    // -----------------------------------------------------------------------------------------
    // Pods
    // -----------------------------------------------------------------------------------------

    /// A pod that holds capacity (bound, not finished), from manifests or a watch. Replaces
    /// whatever was recorded under its uid (an assumed bind becomes confirmed).
    pub fn apply_bound_pod(&mut self, pod: &BoundPod) {
        let uid = PodUid::new(&pod.key());
        let node = self.intern(&pod.node_name);
        // The group's shared copy when it is listed already (`record` lists a new one).
        let group = match self.members.get_key_value(&pod.group) {
            Some((listed, _)) => listed.clone(),
            None => Arc::new(pod.group.clone()),
        };
        self.record(
            uid,
            PodUsage {
                node,
                requests: PodResources::from(&pod.requests),
                scoring: ScoringAmounts::from(&pod.scoring),
                group,
                pod_set: pod.pod_set.clone(),
                index: pod.index,
                terminating: pod.terminating,
                assumed: false,
                incarnation: pod.incarnation,
            },
        );
    }

    /// A pod bound by kube-tas before the watch shows it (read-your-writes). Not recorded
    /// when the watch has already shown the pod bound and gone (its Binding's answer came
    /// after both events): no event would ever remove it, and its usage would stay for good.
    /// `pod` names it (`namespace`, `name`), for [`Self::assumed_unconfirmed`].
    pub fn assume(&mut self, uid: &str, pod: (&str, &str), usage: PodUsage) {
        let uid = PodUid::new(uid);
        if self.removed.contains(&uid) {
            tracing::debug!(pod_uid = %uid, "bind not recorded: the pod is gone already");
            return;
        }
        self.record(
            uid.clone(),
            PodUsage {
                assumed: true,
                ..usage
            },
        );
        // The first bind's time stays: a pod is bound once (a second Binding gets a 409).
        if self.pods.get(&uid).is_some_and(|p| p.assumed) {
            let (namespace, name) = pod;
            self.assumed_at.entry(uid).or_insert_with(|| AssumedBind {
                at: Instant::now(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        }
    }

    /// The binds assumed before `before` that the pod watch has not shown yet, oldest first,
    /// at most `limit`: normally none (the watch shows a bind within a second). One stays
    /// unconfirmed for good when its pod was deleted while the pod watch relisted and its
    /// Binding was answered after that list (no event, no relist would remove it), so those
    /// left long are read back from the API server.
    pub fn assumed_unconfirmed(&self, before: Instant, limit: usize) -> Vec<UnconfirmedBind> {
        let mut old: Vec<(&PodUid, &AssumedBind)> = self
            .assumed_at
            .iter()
            .filter(|(_, bind)| bind.at < before)
            .collect();
        old.sort_by_key(|(_, bind)| bind.at);
        old.into_iter()
            .take(limit)
            .filter_map(|(uid, bind)| {
                let node = self.name_of(self.pods.get(uid)?.node)?;
                Some(UnconfirmedBind {
                    uid: uid.to_string(),
                    namespace: bind.namespace.clone(),
                    name: bind.name.clone(),
                    node: node.to_string(),
                })
            })
            .collect()
    }

    /// The pod watch begins a relist (its `Init`, sent before the list is requested): a pod
    /// assumed before now whose bind that list does not show is gone
    /// ([`Self::watched_pod_uids`]).
    pub fn pod_relist_began(&mut self, now: Instant) {
        self.pod_relist_began = Some(now);
    }

    /// Whether `uid` is a pod assumed before the pod watch's last relist began: that list
    /// (the most recent state, requested after the Binding was accepted) shows the pod if it
    /// still holds capacity.
    fn assumed_before_relist(&self, uid: &PodUid) -> bool {
        match (self.assumed_at.get(uid), self.pod_relist_began) {
            (Some(bind), Some(began)) => bind.at < began,
            _ => false,
        }
    }

    fn record(&mut self, uid: PodUid, mut usage: PodUsage) {
        if let Some(old) = self.pods.get_mut(&uid) {
            if old.node == usage.node && old.requests == usage.requests {
                let confirmed = old.assumed && !usage.assumed;
                old.assumed &= !confirmed;
                if confirmed {
                    self.assumed_at.remove(&uid);
                }
                old.terminating |= usage.terminating;
                let group = usage.terminating.then(|| (*old.group).clone());
                if let Some(group) = group {
                    // The table's copy of the uid, not this event's (one allocation for a
                    // uid kept as text).
                    let stored = self
                        .pods
                        .get_key_value(&uid)
                        .map_or(uid, |(k, _)| k.clone());
                    self.terminating.entry(group).or_default().insert(stored);
                }
                return;
            }
            self.take_pod(&uid);
        } else if let Some(gone) = self.departed.get_mut(&*usage.group) {
            // A pod taking a departed pod's place (the latest to leave it).
            let (pod_set, index) = usage.slot();
            if let Some(i) = gone
                .iter()
                .rposition(|d| &d.pod_set == pod_set && d.index == index)
            {
                gone.remove(i);
            }
            if gone.is_empty() {
                self.departed.remove(&*usage.group);
            }
        }
        if usage.terminating {
            self.terminating
                .entry((*usage.group).clone())
                .or_default()
                .insert(uid.clone());
        }
        self.usage_generation += 1;
        add_pod_amounts(&mut self.used[usage.node as usize], usage.requests.iter());
        self.scored[usage.node as usize].add(&usage.scoring);
        // The group's one shared copy: the key its members are listed under.
        let uids = match self.members.entry(usage.group.clone()) {
            Entry::Occupied(listed) => {
                usage.group = listed.key().clone();
                listed.into_mut()
            }
            Entry::Vacant(first) => first.insert(BTreeSet::new()),
        };
        // The pods of a group mostly ask the same and name the same PodSet: equal requests
        // and PodSet names share the first listed pod's copy (one comparison each, not a
        // search of the group).
        if let Some(listed) = uids.first().and_then(|u| self.pods.get(u)) {
            usage.requests.share(&listed.requests);
            usage.pod_set.share(&listed.pod_set);
        }
        uids.insert(uid.clone());
        self.pods.insert(uid, usage);
    }

    /// A pod no longer holds capacity (deleted, or finished): its usage is given back, and a
    /// pod of a group that still runs is remembered as departed. `false` when nothing was
    /// recorded under `uid`.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let uid = PodUid::new(uid);
        self.removed.insert(uid.clone(), Instant::now());
        let Some(p) = self.take_pod(&uid) else {
            return false;
        };
        // An indexed pod whose successor already runs leaves no place to take.
        let indexed = p.index != PodIndex::default();
        let replaced = indexed
            && self
                .members(&p.group)
                .any(|m| !m.terminating && m.pod_set == p.pod_set && m.index == p.index);
        let current = p.incarnation.belongs_to(self.incarnation_of(&p.group));
        if self.members.contains_key(&p.group) && !replaced && current {
            let gone = self.departed.entry((*p.group).clone()).or_default();
            if gone.len() >= MAX_DEPARTED_PER_GROUP {
                gone.remove(0);
            }
            gone.push(Departed {
                pod_set: p.pod_set,
                index: p.index,
                node: p.node,
                incarnation: p.incarnation,
            });
        }
        self.forget_departed_if_idle(&p.group);
        true
    }

    /// A pod gone whose place no successor takes: its usage is given back and nothing is
    /// remembered. One that finished `Succeeded` (no pod is recreated for it), and one a relist
    /// no longer shows: it may have succeeded meanwhile as well as been deleted (the pod watch
    /// lists no finished pod), and remembering it as departed would pin the group's next pod,
    /// a fresh one perhaps, to its node.
    pub fn remove_pod_not_replaced(&mut self, uid: &str) -> bool {
        let uid = PodUid::new(uid);
        self.removed.insert(uid.clone(), Instant::now());
        let Some(p) = self.take_pod(&uid) else {
            return false;
        };
        self.forget_departed_if_idle(&p.group);
        true
    }

    /// Remembers a pod of a running group that left before the state was built (a pod that
    /// failed on a failed node, from manifests). Nothing is remembered for a group that runs no
    /// more, or when a pod of the group already sits in its place.
    pub fn add_departed(&mut self, lost: &LostPod) {
        let taken = self
            .members(&lost.group)
            .any(|p| p.pod_set == lost.pod_set && p.index == lost.index);
        if taken || !self.members.contains_key(&lost.group) {
            return;
        }
        let node = self.intern(&lost.node_name);
        self.departed
            .entry(lost.group.clone())
            .or_default()
            .push(Departed {
                pod_set: lost.pod_set.clone(),
                index: lost.index,
                node,
                incarnation: Incarnation::UNKNOWN,
            });
    }

    /// The pods of `group` that left it and are not replaced yet.
    pub fn departed(&self, group: &GroupKey) -> &[Departed] {
        self.departed.get(group).map_or(&[], Vec::as_slice)
    }

    /// Takes a pod out, giving its usage back (nothing remembered).
    fn take_pod(&mut self, uid: &PodUid) -> Option<PodUsage> {
        let p = self.pods.remove(uid)?;
        self.assumed_at.remove(uid);
        self.usage_generation += 1;
        let used = &mut self.used[p.node as usize];
        for (name, value) in p.requests.iter().filter(|(name, _)| *name != PODS) {
            used.take_off(name, value);
        }
        used.take_off(PODS, 1);
        used.drop_zeros();
        self.scored[p.node as usize].take_off(&p.scoring);
        if let Some(m) = self.members.get_mut(&p.group) {
            m.remove(uid);
            if m.is_empty() {
                self.members.remove(&p.group);
                let job = (p.group.namespace.clone(), p.group.name.clone());
                if p.group.kind == super::WorkloadKind::Job && !self.jobs.contains_key(&job) {
                    self.job_incarnations.remove(&*p.group);
                }
            }
        }
        if p.terminating {
            self.forget_terminating(&p.group, uid);
        }
        self.capacity_generation += 1;
        Some(p)
    }

    /// A group with no pod left runs no more: nothing is left to replace.
    fn forget_departed_if_idle(&mut self, group: &GroupKey) {
        if !self.members.contains_key(group) {
            self.departed.remove(group);
        }
    }

    fn forget_terminating(&mut self, group: &GroupKey, uid: &PodUid) {
        if let Some(t) = self.terminating.get_mut(group) {
            t.remove(uid);
            if t.is_empty() {
                self.terminating.remove(group);
            }
        }
    }

    /// The group lost pods that are not replaced yet: some are being deleted, or departed.
    pub fn has_lost(&self, group: &GroupKey) -> bool {
        self.terminating.contains_key(group) || self.departed.contains_key(group)
    }

    /// A pod the watch shows holding nothing: not bound (yet), or finished. A bind of
    /// kube-tas's own the watch has not caught up with stays, unless the pod has finished.
    pub fn apply_unbound_pod(&mut self, uid: &str, finished: bool) -> bool {
        match self.pod(uid) {
            Some(p) if p.assumed && !finished => false,
            Some(_) => self.remove_pod(uid),
            None => false,
        }
    }

    /// Undoes an assumed bind whose Binding failed; a pod the watch has confirmed stays.
    pub fn forget_assumed(&mut self, uid: &str) -> bool {
        let uid = PodUid::new(uid);
        if self.pods.get(&uid).is_some_and(|p| p.assumed)
            && let Some(p) = self.take_pod(&uid)
        {
            self.forget_departed_if_idle(&p.group);
            return true;
        }
        false
    }

    /// A full pod list (a relist): `holding` are the pods that hold capacity now (by uid);
    /// every other pod recorded, except binds the watch has not shown yet, is removed.
    pub fn replace_pods(&mut self, holding: Vec<BoundPod>) {
        let keep: BTreeSet<PodUid> = holding.iter().map(|p| PodUid::new(&p.key())).collect();
        let gone: Vec<String> = self
            .pods
            .iter()
            .filter(|(uid, p)| !p.assumed && !keep.contains(uid))
            .map(|(uid, _)| uid.to_string())
            .collect();
        for uid in gone {
            self.remove_pod(&uid);
        }
        for pod in &holding {
            self.apply_bound_pod(pod);
        }
    }

    /// Uids of the pods recorded from the cluster, and of the binds assumed before the pod
    /// watch's last relist began (binds since are left out: the list may predate them): what
    /// a relist that no longer lists them removes.
    pub fn watched_pod_uids(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|(uid, p)| !p.assumed || self.assumed_before_relist(uid))
            .map(|(uid, _)| uid.to_string())
            .collect()
    }

    /// The pod recorded under `uid`.
    pub fn pod(&self, uid: &str) -> Option<&PodUsage> {
        self.pods.get(&PodUid::new(uid))
    }

    /// How many pods hold capacity.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// The pods of a group that hold capacity (bound, or being bound by kube-tas).
    pub fn members(&self, group: &GroupKey) -> impl Iterator<Item = &PodUsage> {
        let current = self.incarnation_of(group);
        self.members
            .get(group)
            .into_iter()
            .flatten()
            .filter_map(|uid| self.pods.get(uid))
            .filter(move |p| p.incarnation.belongs_to(current))
    }

    /// `incarnation` is the creation of `group`'s Job from now on: places left by pods of
    /// another are forgotten.
    fn make_current(&mut self, group: &GroupKey, incarnation: Incarnation) {
        self.job_incarnations.insert(group.clone(), incarnation);
        if let Some(gone) = self.departed.get_mut(group) {
            gone.retain(|d| d.incarnation.belongs_to(incarnation));
            if gone.is_empty() {
                self.departed.remove(group);
            }
        }
        self.workloads_generation += 1;
    }

    /// The creation of `group`'s Job the state knows (unknown for any other kind of group).
    /// Pods of an earlier creation still recorded (being deleted) are no members of it.
    pub fn incarnation_of(&self, group: &GroupKey) -> Incarnation {
        if group.kind != super::WorkloadKind::Job || self.job_incarnations.is_empty() {
            return Incarnation::UNKNOWN;
        }
        (self.job_incarnations.get(group).copied()).unwrap_or(Incarnation::UNKNOWN)
    }

    // -----------------------------------------------------------------------------------------
    // Jobs and Kueue objects
    // -----------------------------------------------------------------------------------------

    /// An unfinished Job, as a workload (its gang size and template), made as `incarnation`
    /// (its uid). A Job created again under its name is a new workload: the places its
    /// predecessor's pods left are forgotten, and those pods still recorded (being deleted)
    /// are no members of it.
    pub fn apply_job(
        &mut self,
        namespace: &str,
        name: &str,
        workload: Workload,
        incarnation: Incarnation,
    ) {
        if incarnation != Incarnation::UNKNOWN {
            let group = GroupKey {
                kind: super::WorkloadKind::Job,
                namespace: namespace.to_string(),
                name: name.to_string(),
            };
            if self.incarnation_of(&group) != incarnation {
                self.make_current(&group, incarnation);
            }
        }
        let key = (namespace.to_string(), name.to_string());
        if self.jobs.get(&key) != Some(&workload) {
            self.jobs.insert(key, workload);
            self.workloads_generation += 1;
        }
    }

    /// A Job deleted or finished.
    pub fn delete_job(&mut self, namespace: &str, name: &str) -> bool {
        // A Job created again under the same name is a new workload: nothing to replace.
        let group = GroupKey {
            kind: super::WorkloadKind::Job,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        self.departed.remove(&group);
        // Kept while the Job's pods are (they are told from a new Job's by it).
        if !self.members.contains_key(&group) {
            self.job_incarnations.remove(&group);
        }
        let removed = self
            .jobs
            .remove(&(namespace.to_string(), name.to_string()))
            .is_some();
        self.workloads_generation += u64::from(removed);
        removed
    }

    /// A Kueue Workload added or changed, standing for `owner` (its controller Job or JobSet).
    pub fn apply_kueue_workload(&mut self, key: &str, owner: Option<GroupKey>) {
        if self.kueue_workloads.get(key) == Some(&owner) {
            return;
        }
        self.delete_kueue_workload(key);
        if let Some(group) = &owner {
            *self.kueue_managed.entry(group.clone()).or_default() += 1;
        }
        self.kueue_workloads.insert(key.to_string(), owner);
        self.workloads_generation += 1;
    }

    /// The Kueue Workload `namespace/name` is gone.
    pub fn delete_kueue_workload(&mut self, key: &str) {
        let removed = self.kueue_workloads.remove(key);
        self.workloads_generation += u64::from(removed.is_some());
        if let Some(Some(group)) = removed
            && let Some(n) = self.kueue_managed.get_mut(&group)
        {
            *n -= 1;
            if *n == 0 {
                self.kueue_managed.remove(&group);
            }
        }
    }

    /// `namespace/name` of every Kueue Workload the state knows.
    pub fn kueue_workload_keys(&self) -> Vec<String> {
        self.kueue_workloads.keys().cloned().collect()
    }

    /// Whether a Kueue Workload stands for `group`: Kueue queues and places it, kube-tas
    /// leaves its pods alone.
    pub fn kueue_manages(&self, group: &GroupKey) -> bool {
        self.kueue_managed.contains_key(group)
    }

    /// A full Job list (a relist).
    pub fn replace_jobs(&mut self, jobs: BTreeMap<(String, String), Workload>) {
        self.jobs = jobs;
        self.workloads_generation += 1;
    }

    /// `(namespace, name)` of every unfinished Job.
    pub fn job_keys(&self) -> Vec<(String, String)> {
        self.jobs.keys().cloned().collect()
    }

    /// The unfinished Job `namespace/name`.
    pub fn job(&self, namespace: &str, name: &str) -> Option<&Workload> {
        self.jobs.get(&(namespace.to_string(), name.to_string()))
    }

    /// A JobSet or LeaderWorkerSet, under the set's own key.
    pub fn apply_set(&mut self, key: GroupKey, entry: SetEntry) {
        if self.sets.get(&key) != Some(&entry) {
            self.sets.insert(key, entry);
            self.workloads_generation += 1;
        }
    }

    /// A JobSet or LeaderWorkerSet deleted (or a JobSet finished).
    pub fn delete_set(&mut self, key: &GroupKey) -> bool {
        let removed = self.sets.remove(key).is_some();
        self.workloads_generation += u64::from(removed);
        removed
    }

    /// The keys of every set of `kind` (JobSet or LeaderWorkerSet).
    pub fn set_keys(&self, kind: super::WorkloadKind) -> Vec<GroupKey> {
        self.sets
            .keys()
            .filter(|k| k.kind == kind)
            .cloned()
            .collect()
    }

    /// A plain pod group's workload, its PodSets formed from its known pods.
    pub fn apply_pod_group(&mut self, workload: Workload) {
        let key = GroupKey {
            kind: super::WorkloadKind::PodGroup,
            namespace: workload.namespace.clone(),
            name: workload.name.clone(),
        };
        if self.pod_groups.get(&key) != Some(&workload) {
            self.pod_groups.insert(key, workload);
            self.workloads_generation += 1;
        }
    }

    /// A pending pod of a plain pod group (added or changed).
    pub fn apply_pending_group_pod(&mut self, uid: &str, pod: PendingGroupPod) {
        if self.pending_group_pods.get(uid) == Some(&pod) {
            return;
        }
        // A plain pod group's workload is formed from its pods.
        self.workloads_generation += 1;
        self.take_pending_group_pod(uid);
        self.pending_by_group
            .entry(pod.group.clone())
            .or_default()
            .insert(uid.to_string());
        self.pending_group_pods.insert(uid.to_string(), pod);
    }

    /// A pending group pod gone (deleted, or bound: the pod watch shows it then).
    pub fn remove_pending_group_pod(&mut self, uid: &str) -> bool {
        let removed = self.take_pending_group_pod(uid);
        self.workloads_generation += u64::from(removed);
        removed
    }

    fn take_pending_group_pod(&mut self, uid: &str) -> bool {
        let Some(old) = self.pending_group_pods.remove(uid) else {
            return false;
        };
        if let Some(uids) = self.pending_by_group.get_mut(&old.group) {
            uids.remove(uid);
            if uids.is_empty() {
                self.pending_by_group.remove(&old.group);
            }
        }
        true
    }

    /// From now on a watch feeds the pending pods of plain pod groups.
    pub fn track_pending_group_pods(&mut self) {
        self.tracks_pending_group_pods = true;
    }

    /// Whether a watch feeds the pending pods of plain pod groups.
    pub fn tracks_pending_group_pods(&self) -> bool {
        self.tracks_pending_group_pods
    }

    /// The pending group pods of `group`, without those already holding capacity (a pod
    /// assumed on bind stays in the pending watch until it shows up bound).
    fn pending_of(&self, group: &GroupKey) -> impl Iterator<Item = &PendingGroupPod> {
        self.pending_by_group
            .get(group)
            .into_iter()
            .flatten()
            .filter(|u| self.pod(u).is_none())
            .filter_map(|u| self.pending_group_pods.get(u))
    }

    /// Whether `uid` is a pending pod of a plain pod group the watch shows.
    pub fn is_pending_group_pod(&self, uid: &str) -> bool {
        self.pending_group_pods.contains_key(uid)
    }

    /// The uids of every pending group pod recorded.
    pub fn pending_group_pod_uids(&self) -> Vec<String> {
        self.pending_group_pods.keys().cloned().collect()
    }

    /// For a plain pod group whose pending pods are watched: `(pods known, total count)` while
    /// fewer pods than its total count exist. Kueue admits a pod group only once all its pods
    /// exist (until then the shapes of the missing ones are unknown).
    pub fn pod_group_incomplete(&self, group: &GroupKey) -> Option<(usize, i32)> {
        if self.pod_groups.contains_key(group) {
            return None;
        }
        let total = self.pending_of(group).map(|p| p.total).max()?;
        let known = self.pending_of(group).count() + self.members(group).count();
        (known < usize::try_from(total).unwrap_or(0)).then_some((known, total))
    }

    /// The workload of a plain pod group from its watched pods: one PodSet per role (pending
    /// and bound pods counted), ordered by their first pod's name; `main` of the total count
    /// when the group has one shape.
    fn watched_pod_group(&self, group: &GroupKey) -> Option<Workload> {
        let mut pods: Vec<&PendingGroupPod> = self.pending_of(group).collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        let first = pods.first()?;
        let mut pod_sets: Vec<PendingPodSet> = Vec::new();
        for p in &pods {
            count_pod_of_role(&mut pod_sets, &p.role, || p.pod_set.clone());
        }
        for m in self.members(group) {
            if let PodSetHint::Role(role) = &m.pod_set
                && let Some(set) = pod_sets.iter_mut().find(|s| *s.spec.name == **role)
            {
                set.spec.count += 1;
            }
        }
        finish_group_pod_sets(&mut pod_sets, first.total);
        Some(Workload {
            kind: super::WorkloadKind::PodGroup,
            namespace: group.namespace.clone(),
            name: group.name.clone(),
            queue_name: first.queue_name.clone(),
            pod_sets,
            source: Default::default(),
        })
    }

    /// A plain pod group forgotten.
    pub fn delete_pod_group(&mut self, key: &GroupKey) -> bool {
        self.pod_groups.remove(key).is_some()
    }

    /// The workload of a group: its Job's, its JobSet's, its LeaderWorkerSet replica group's,
    /// or its plain pod group's when the group's pods are known. `None` for a group whose
    /// object is not known (or a single pod).
    pub fn workload(&self, group: &GroupKey) -> Option<Cow<'_, Workload>> {
        match group.kind {
            super::WorkloadKind::Job => {
                return self.job(&group.namespace, &group.name).map(Cow::Borrowed);
            }
            super::WorkloadKind::PodGroup => {
                return match self.pod_groups.get(group) {
                    Some(w) => Some(Cow::Borrowed(w)),
                    None => self.watched_pod_group(group).map(Cow::Owned),
                };
            }
            _ => {}
        }
        let (set, index) = SetEntry::set_of(group)?;
        let entry = self.sets.get(&set)?;
        if group.kind == super::WorkloadKind::JobSet {
            return Some(Cow::Borrowed(&entry.workload));
        }
        entry.group(&set, index).map(Cow::Owned)
    }

    /// How many unfinished Jobs are known.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// The Kueue objects.
    pub fn kueue(&self) -> &KueueObjects {
        &self.kueue
    }

    fn kueue_changed(&mut self) {
        self.topology_generation += 1;
        self.capacity_generation += 1;
        self.workloads_generation += 1;
        self.keep_only_tas_flavors();
    }

    /// Keeps node facts for every TAS flavor (one whose Topology exists), made for its levels
    /// and node labels, so that nodes are read ahead for it from now on; facts made for other
    /// levels or node labels are started afresh (the next build reads every node). The facts
    /// and cached trees of flavors that are gone or no longer TAS go: a deleted flavor holds
    /// no tree of thousands of nodes.
    fn keep_only_tas_flavors(&mut self) {
        let kept = self.tree_facts.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut tas = HashSet::new();
        for (name, rf) in &self.kueue.resource_flavors {
            if let Some((_, levels)) = tas_levels(&self.kueue, rf) {
                facts_for(kept, name, &levels, &rf.spec.node_labels);
                tas.insert(name.as_str());
            }
        }
        kept.retain(|flavor, _| tas.contains(flavor.as_str()));
        let trees = self.trees.get_mut().unwrap_or_else(|p| p.into_inner());
        trees.retain(|flavor, _| tas.contains(flavor.as_str()));
    }

    /// A Topology added or changed.
    pub fn apply_topology(&mut self, name: &str, t: Topology) {
        if self.kueue.topologies.get(name) != Some(&t) {
            self.kueue.topologies.insert(name.to_string(), t);
            self.kueue_changed();
        }
    }

    /// A Topology deleted.
    pub fn delete_topology(&mut self, name: &str) {
        if self.kueue.topologies.remove(name).is_some() {
            self.kueue_changed();
        }
    }

    /// A ResourceFlavor added or changed.
    pub fn apply_resource_flavor(&mut self, name: &str, f: ResourceFlavor) {
        if self.kueue.resource_flavors.get(name) != Some(&f) {
            self.kueue.resource_flavors.insert(name.to_string(), f);
            self.kueue_changed();
        }
    }

    /// A ResourceFlavor deleted.
    pub fn delete_resource_flavor(&mut self, name: &str) {
        if self.kueue.resource_flavors.remove(name).is_some() {
            self.kueue_changed();
        }
    }

    /// A ClusterQueue added or changed.
    pub fn apply_cluster_queue(&mut self, name: &str, q: ClusterQueue) {
        // Its status (Kueue writes it often) and metadata route nothing.
        let old = self.kueue.cluster_queues.insert(name.to_string(), q);
        if old.as_ref().map(|o| &o.spec) != self.kueue.cluster_queues.get(name).map(|q| &q.spec) {
            self.workloads_generation += 1;
        }
    }

    /// A ClusterQueue deleted.
    pub fn delete_cluster_queue(&mut self, name: &str) {
        if self.kueue.cluster_queues.remove(name).is_some() {
            self.workloads_generation += 1;
        }
    }

    /// A LocalQueue added or changed.
    pub fn apply_local_queue(&mut self, namespace: &str, name: &str, q: LocalQueue) {
        let key = (namespace.to_string(), name.to_string());
        let changed = self.kueue.local_queues.get(&key).map(|o| &o.spec) != Some(&q.spec);
        self.kueue.local_queues.insert(key, q);
        self.workloads_generation += u64::from(changed);
    }

    /// A LocalQueue deleted.
    pub fn delete_local_queue(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        if self.kueue.local_queues.remove(&key).is_some() {
            self.workloads_generation += 1;
        }
    }

    /// Replaces every object of one Kueue kind (a relist).
    pub fn replace_kueue(&mut self, f: impl FnOnce(&mut KueueObjects)) {
        f(&mut self.kueue);
        self.kueue_changed();
    }

    // -----------------------------------------------------------------------------------------
    // Generations, trees and capacity
    // -----------------------------------------------------------------------------------------

    /// Moves whenever a tree may have changed (node labels, readiness, taints; Topology or
    /// ResourceFlavor objects).
    pub fn topology_generation(&self) -> u64 {
        self.topology_generation
    }

    /// Moves whenever capacity may have been given back.
    pub fn capacity_generation(&self) -> u64 {
        self.capacity_generation
    }

    /// Moves whenever a Workload-API PodGroup or CompositePodGroup, or a pending pod naming
    /// one, is added, changed or removed: a remembered "does not fit" of such a group is stale.
    pub fn scheduling_generation(&self) -> u64 {
        self.scheduling_generation
    }

    /// Moves whenever a pod starts or stops holding capacity (usage changed either way).
    pub fn usage_generation(&self) -> u64 {
        self.usage_generation
    }

    /// Moves whenever what a workload is read or routed from is added, changed or removed: a
    /// Job, a JobSet or LeaderWorkerSet, a plain pod group's PodSets, a Kueue Workload
    /// standing for a group, a ClusterQueue or LocalQueue (and every Kueue change). A
    /// remembered "does not fit" of a workload is stale then: it may now be another one.
    pub fn workloads_generation(&self) -> u64 {
        self.workloads_generation
    }

    /// A ResourceFlavor's tree at the current topology generation, built on first use; `None`
    /// when the flavor or its Topology does not exist.
    pub fn flavor(&self, name: &str) -> Option<Arc<FlavorTopology>> {
        self.flavor_built(name).map(|(tree, _)| tree)
    }

    /// [`Self::flavor`], and whether this call built it. Builds take turns on the kept facts
    /// (a tree another build made meanwhile is taken as it is), and the cache is locked only
    /// to look up and to insert, so a caller whose tree is built never waits behind a build
    /// of another flavor. The topology generation cannot move during the call (writers need
    /// `&mut self`), so whatever is inserted is current.
    fn flavor_built(&self, name: &str) -> Option<(Arc<FlavorTopology>, bool)> {
        if let Some(f) = self.current_tree(name) {
            return Some((f, false));
        }
        let mut kept = self.tree_facts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = self.current_tree(name) {
            return Some((f, false));
        }
        let built = Arc::new(self.build_flavor(name, &mut kept)?);
        self.tree_builds.fetch_add(1, Ordering::Relaxed);
        let mut trees = self.trees.lock().unwrap_or_else(|p| p.into_inner());
        trees.insert(name.to_string(), built.clone());
        Some((built, true))
    }

    /// The cached tree named `name` if it is at the current topology generation.
    fn current_tree(&self, name: &str) -> Option<Arc<FlavorTopology>> {
        let trees = self.trees.lock().unwrap_or_else(|p| p.into_inner());
        (trees.get(name))
            .filter(|f| f.generation == self.topology_generation)
            .cloned()
    }

    /// Builds every TAS flavor's tree that is not at the current topology generation, and the
    /// Workload-API hostname tree while such groups are known, ahead of the requests that
    /// would otherwise build them (live mode warms them after each change, one at a time:
    /// [`Self::warm_tree`], [`Self::warm_hostname_tree`]). How many it built.
    pub fn warm_trees(&self) -> usize {
        (self.kueue.resource_flavors.keys())
            .filter(|name| self.warm_tree(name))
            .count()
            + usize::from(self.warm_hostname_tree())
    }

    /// Builds one flavor's tree unless it is at the current topology generation (or the
    /// flavor is not TAS); whether it built.
    pub fn warm_tree(&self, flavor: &str) -> bool {
        self.flavor_built(flavor).is_some_and(|(_, built)| built)
    }

    /// How many flavor trees were built since start, wherever a build was asked for.
    pub fn tree_builds(&self) -> u64 {
        self.tree_builds.load(Ordering::Relaxed)
    }

    /// The TAS flavors' trees built so far, at whatever generation they were built, by flavor
    /// name (none is built here: what a metrics scrape and the left-out log read; live mode
    /// keeps them current).
    pub fn built_flavors(&self) -> Vec<Arc<FlavorTopology>> {
        let trees = self.trees.lock().unwrap_or_else(|p| p.into_inner());
        // Flavors only: the Workload-API hostname tree shares the cache.
        let mut built: Vec<Arc<FlavorTopology>> = (trees.iter())
            .filter(|(name, _)| self.kueue.resource_flavors.contains_key(*name))
            .map(|(_, f)| f.clone())
            .collect();
        built.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        built
    }

    /// One line per TAS flavor with nodes that take none of its pods, saying which and why, as
    /// the trees built so far say ([`Self::built_flavors`]: none is built here).
    pub fn left_out_notes(&self) -> Vec<String> {
        self.built_flavors()
            .iter()
            .filter_map(|f| f.left_out_note())
            .collect()
    }

    /// Builds a flavor's tree with its facts from `kept` (the caller holds their lock).
    fn build_flavor(
        &self,
        name: &str,
        kept: &mut HashMap<String, NodeFacts>,
    ) -> Option<FlavorTopology> {
        let rf = self.kueue.resource_flavors.get(name)?;
        let (topology_name, levels) = tas_levels(&self.kueue, rf)?;
        let started = Instant::now();
        let facts = facts_for(kept, name, &levels, &rf.spec.node_labels);
        let tree = TopologyTree::build_from(topology_name, facts, &self.nodes);
        // Slots are node ids.
        let member_ids = tree.positions.iter().map(|&p| p as NodeId).collect();
        let reads = facts.last_reads().unwrap_or_default();
        tracing::debug!(
            flavor = name,
            leaves = tree.leaves().len(),
            nodes_read_at_events = reads.at_events,
            nodes_read_at_build = reads.at_build,
            build_ms = started.elapsed().as_secs_f64() * 1e3,
            "topology tree built"
        );
        Some(FlavorTopology {
            name: name.to_string(),
            tree,
            tolerations: rf.spec.tolerations.clone(),
            member_ids,
            generation: self.topology_generation,
        })
    }

    /// How many nodes the last build of a flavor's tree read since the build before, at their
    /// events and at the build (the others' facts were kept); `None` before its first build.
    pub fn nodes_read_by_last_build(&self, flavor: &str) -> Option<NodeReads> {
        let kept = self.tree_facts.lock().unwrap_or_else(|p| p.into_inner());
        kept.get(flavor).and_then(NodeFacts::last_reads)
    }

    /// Free capacity of a flavor's tree now: each member node's current allocatable, minus
    /// its usage, minus what `held` says is held on it.
    pub fn free_capacity<'h>(
        &self,
        f: &FlavorTopology,
        held: impl Fn(NodeId) -> Option<&'h ResourceList>,
    ) -> FreeCapacity {
        self.capacity(f, true, held)
    }

    /// A flavor's tree with nothing used: each member node's current allocatable (would a
    /// group fit once everything else is gone?).
    pub fn allocatable(&self, f: &FlavorTopology) -> FreeCapacity {
        self.capacity(f, false, |_| None)
    }

    fn capacity<'h>(
        &self,
        f: &FlavorTopology,
        subtract_usage: bool,
        held: impl Fn(NodeId) -> Option<&'h ResourceList>,
    ) -> FreeCapacity {
        let tree = &f.tree;
        let mut free = FreeCapacity::zero(tree);
        for &leaf in tree.leaves() {
            for &m in tree.leaf_members(leaf) {
                let id = f.member_ids[m];
                let Some(node) = self.node(id) else {
                    continue;
                };
                free.add(tree, leaf, &node.allocatable);
                if !subtract_usage {
                    continue;
                }
                free.subtract(tree, leaf, self.used(id).iter());
                if let Some(h) = held(id) {
                    free.subtract(tree, leaf, h);
                }
            }
        }
        free
    }

    /// Whether node `id` has room for one more pod of `requests` once its usage and `held`
    /// are counted (zero asks always fit). A node that does not exist has no room.
    pub fn room_for(
        &self,
        id: NodeId,
        held: Option<&ResourceList>,
        requests: &ResourceList,
    ) -> bool {
        self.room_with_and_without(id, held, requests).0
    }

    /// [`Self::room_for`] with `held` counted and without it, in one pass over the requests:
    /// whether holds are what keeps the pod off the node.
    pub fn room_with_and_without(
        &self,
        id: NodeId,
        held: Option<&ResourceList>,
        requests: &ResourceList,
    ) -> (bool, bool) {
        let Some(node) = self.node(id) else {
            return (false, false);
        };
        let used = self.used(id);
        // What is left without the holds, and with them.
        let left = |k: &str| {
            let free = node.allocatable.get(k).copied().unwrap_or(0) - used.get(k).unwrap_or(0);
            let held = held.and_then(|h| h.get(k)).copied().unwrap_or(0);
            (free - held, free)
        };
        let (mut with, mut without) = (true, true);
        for (k, v) in requests
            .iter()
            .filter(|(k, v)| **v > 0 && k.as_str() != PODS)
        {
            let (left_with, left_without) = left(k);
            with &= left_with >= *v;
            without &= left_without >= *v;
        }
        // One more pod takes one more `pods` slot, as kube-scheduler's NodeResourcesFit counts.
        let slot = requests.get(PODS).copied().unwrap_or(0).max(0);
        let (left_with, left_without) = left(PODS);
        (with && left_with > slot, without && left_without > slot)
    }
}

/// A TAS flavor's Topology name and level labels, outermost first; `None` for a flavor that
/// names no Topology, or one that does not exist.
fn tas_levels<'k>(
    kueue: &'k KueueObjects,
    rf: &'k ResourceFlavor,
) -> Option<(&'k str, Vec<String>)> {
    let topology_name = rf.spec.topology_name.as_deref()?;
    let topology = kueue.topologies.get(topology_name)?;
    let levels = topology
        .spec
        .levels
        .iter()
        .map(|l| l.node_label.clone())
        .collect();
    Some((topology_name, levels))
}

/// The kept facts of a flavor, made for these levels and node labels: new ones (every node
/// read at the next build) when there are none yet or they were made for others.
fn facts_for<'f>(
    kept: &'f mut HashMap<String, NodeFacts>,
    flavor: &str,
    levels: &[String],
    node_labels: &BTreeMap<String, String>,
) -> &'f mut NodeFacts {
    let facts = kept
        .entry(flavor.to_string())
        .or_insert_with(|| NodeFacts::new(levels, node_labels));
    if !facts.is_for(levels, node_labels) {
        *facts = NodeFacts::new(levels, node_labels);
    }
    facts
}

/// The cluster state shared by both doors and its event sources (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct SharedState {
    inner: Arc<RwLock<ClusterState>>,
}

impl SharedState {
    /// Shares `state`.
    pub fn new(state: ClusterState) -> Self {
        Self {
            inner: Arc::new(RwLock::new(state)),
        }
    }

    /// Reads the state. Every writer applies one event to completion before it lets go, so a
    /// poisoned lock (a panic in a writer, a bug) still guards a consistent state.
    pub fn read(&self) -> RwLockReadGuard<'_, ClusterState> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the state (one event, or a small batch).
    pub fn write(&self) -> RwLockWriteGuard<'_, ClusterState> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the state from an async task (the watches' events) without holding up the
    /// readers: a writer blocked in [`Self::write`] makes every new reader wait behind it (the
    /// lock favours writers) and holds its runtime thread, so an event that came while a tree
    /// build held a read lock (2–3 ms at 15,000 nodes) stalled every request until the build
    /// ended. Here the writer takes the lock when it is free, sleeping a timer tick while a
    /// reader holds it; after [`WRITE_PATIENCE`] it waits as `write` does, so a stream of
    /// readers cannot keep the events out for long.
    pub async fn write_soon(&self) -> RwLockWriteGuard<'_, ClusterState> {
        self.write_soon_within(WRITE_PATIENCE).await
    }

    /// [`Self::write_soon`], queueing for the lock after `patience`.
    pub async fn write_soon_within(
        &self,
        patience: Duration,
    ) -> RwLockWriteGuard<'_, ClusterState> {
        self.write_soon_after(patience, || ()).await.1
    }

    /// [`Self::write_soon_within`] for a caller that holds another lock first (the plan book,
    /// always taken before the state): `first` takes it at each try, and what it returned is
    /// let go before the sleep between tries, so the caller's other lock is not held while the
    /// state is waited for.
    pub async fn write_soon_after<G>(
        &self,
        patience: Duration,
        mut first: impl FnMut() -> G,
    ) -> (G, RwLockWriteGuard<'_, ClusterState>) {
        let began = tokio::time::Instant::now();
        loop {
            let held = first();
            if let Some(guard) = self.try_write() {
                return (held, guard);
            }
            if began.elapsed() >= patience {
                return (held, self.write());
            }
            drop(held);
            tokio::time::sleep(WRITE_RETRY).await;
        }
    }

    /// The write lock if nobody holds the state now.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, ClusterState>> {
        match self.inner.try_write() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// How long [`SharedState::write_soon`] waits for a moment without readers before it queues
/// for the lock (longer than the longest tree build, about 25 ms at 50,000 nodes).
pub const WRITE_PATIENCE: Duration = Duration::from_millis(100);

/// How long [`SharedState::write_soon`] sleeps between two tries (the timer rounds it up to
/// its tick, a millisecond).
pub const WRITE_RETRY: Duration = Duration::from_micros(200);

mod scheduling;
#[cfg(test)]
mod tests;

pub use scheduling::{SchedulingLoads, SchedulingTree};
