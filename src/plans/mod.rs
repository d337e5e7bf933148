//! Plans and seats: which capacity each pod group holds, and which seat each pod takes. The
//! book keeps only that (plans, seats, remembered failures); everything it reads about the
//! cluster comes from the [`ClusterState`] each call is given.
//!
//! No HTTP here: the extender is the first door that asks for plans, not the only one.
//!
//! * The first pod of a group that asks triggers a **plan** for the whole PodSet, computed by
//!   the placement engine on free capacity: allocatable minus the pods holding capacity minus
//!   what other plans hold. A group that does not fit gets no plan; the failure is remembered
//!   until capacity is given back (the state's capacity generation or the book's own moves), so
//!   repeated calls are cheap.
//! * A plan is a list of **seats** in topology order (one per pod: a node in hostname-lowest
//!   trees, a lowest-level domain otherwise). A pod's seat is fixed at its first call and the
//!   same on every later call; completion index `i` takes seat `i` when it is open, so ranks
//!   that talk most sit side by side.
//! * Open and taken seats **hold** capacity on one node each ([`held`]), so a hold is kept from
//!   every other decision, on any flavor; binding turns a seat into usage on its node (in the
//!   state, before the watch shows it); a plan whose pods stop coming for the TTL **expires**
//!   and gives its open seats back.
//! * A rejection that holds cause says so and names the plans holding the room (`held by 2
//!   plans (Job default/a, Job default/b) for pods not bound yet`); one they do not cause never
//!   mentions them ([`holders`]).
//! * A bind is two-phase ([`PlanBook::begin_bind`], then [`PlanBook::commit_bind`] or
//!   [`PlanBook::abort_bind`]) so that the Binding can be written to the API server in between
//!   with the seat still held; a failed Binding frees the seat.
//! * A plan is **rebuilt from the cluster**: the group's pods holding capacity (bound, from
//!   their owner references and labels) are usage, and the pods still to come are planned
//!   inside the domain the bound ones share. A restart therefore loses nothing and
//!   double-books nothing.
//!
//! Plans are keyed by [`PlanKey`] (group and PodSet), so a workload of several PodSets has one
//! plan per PodSet. The book is one value behind the caller's lock; every method runs to
//! completion, so no request sees a half-made plan. Counters are atomics ([`PlanCounters`]),
//! readable without that lock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};

use crate::cluster::WorkloadKind;
use crate::cluster::admit::{Route, RoutedPodSet, RoutedWorkload, route};
use crate::cluster::group::{LWS_LEADER_POD_SET, LWS_WORKER_POD_SET, PodIndex, PodSetHint};
use crate::cluster::incarnation::Incarnation;
use crate::cluster::state::{
    ClusterState, FlavorTopology, NodeId, PodResources, PodUsage, ScoringAmounts,
};
use crate::keys;
use crate::topology::node_failure::GATE_FAIL_FAST;
use crate::topology::placement::{
    Assignment, GroupRequest, PlacementContext, cmp_values, place_group,
};
use crate::topology::tree::{DomainIdx, TopologyTree};
use crate::topology::{FeatureGates, PodSetSpec, ResourceList, TopologyRequest};

pub use crate::cluster::group::GroupKey;

mod group;
mod held;
mod holders;
mod quiet;
mod scheduling;
mod successor;
#[cfg(test)]
mod tests;

pub use group::PodFacts;
pub use held::{HeldCapacity, PlanId};
pub use quiet::QuietSeat;
use successor::{FailedNode, Successor};

/// The name of the PodSet of a Job, a plain pod group or a single pod (as Kueue names it).
pub const MAIN_POD_SET: &str = "main";

/// Notices kept between two drains; more are dropped (Events are advice, never state).
pub const MAX_NOTICES: usize = 1024;

/// A plan's identity: the group and the PodSet in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlanKey {
    /// The workload the plan belongs to.
    pub group: GroupKey,
    /// The PodSet it places.
    pub pod_set: String,
}

impl fmt::Display for PlanKey {
    /// `Job default/train` (the PodSet is named only when it is not `main`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pod_set == MAIN_POD_SET {
            write!(f, "{}", self.group)
        } else {
            write!(f, "{} pod set {}", self.group, self.pod_set)
        }
    }
}

/// Counters and gauges the server exports, as one reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Plans made since start (counter).
    pub plans_made: u64,
    /// Plans dropped because their pods never came (counter).
    pub plans_expired: u64,
    /// Plans alive now (gauge).
    pub plans_active: u64,
    /// Seats held by plans and not bound yet (gauge).
    pub seats_held: u64,
    /// Pods bound through kube-tas since start (counter).
    pub pods_bound: u64,
    /// Group placements that did not fit (counter).
    pub groups_not_fit: u64,
    /// Binds whose Binding the API server refused (counter).
    pub binds_failed: u64,
    /// Pods of running workloads (recreated after a node failure, or left after a restart)
    /// planned beside the pods that hold capacity (counter).
    pub replacements_placed: u64,
    /// Such pods that found no room in their workload's domain (counter).
    pub replacements_failed: u64,
    /// Seats whose pods went away before they were bound, opened again for the group's next
    /// pod or handed to the pod made in their place (counter).
    pub seats_reopened: u64,
}

/// The book's counters, shared with whoever exports them; read without the book's lock.
#[derive(Debug, Default)]
pub struct PlanCounters {
    plans_made: AtomicU64,
    plans_expired: AtomicU64,
    plans_active: AtomicU64,
    seats_held: AtomicU64,
    pods_bound: AtomicU64,
    groups_not_fit: AtomicU64,
    binds_failed: AtomicU64,
    replacements_placed: AtomicU64,
    replacements_failed: AtomicU64,
    seats_reopened: AtomicU64,
}

impl PlanCounters {
    /// The current values.
    pub fn snapshot(&self) -> PlanStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PlanStats {
            plans_made: r(&self.plans_made),
            plans_expired: r(&self.plans_expired),
            plans_active: r(&self.plans_active),
            seats_held: r(&self.seats_held),
            pods_bound: r(&self.pods_bound),
            groups_not_fit: r(&self.groups_not_fit),
            binds_failed: r(&self.binds_failed),
            replacements_placed: r(&self.replacements_placed),
            replacements_failed: r(&self.replacements_failed),
            seats_reopened: r(&self.seats_reopened),
        }
    }

    fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }

    fn add(a: &AtomicU64, n: u64) {
        if n > 0 {
            a.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Why candidates are turned down, shared by many nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// A `node(s) ...` phrase a person can act on.
    pub reason: Arc<str>,
    /// Preemption cannot help (`FailedAndUnresolvableNodes`).
    pub unresolvable: bool,
}

/// The answer to "where may this pod go?", over the candidate list it was asked with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterVerdict {
    /// Only these candidates (indices into the list) pass; all others are turned down for
    /// `rejected`. An empty `pass` means the pod fits nowhere.
    Only {
        /// Passing candidates.
        pass: Vec<usize>,
        /// Why every other candidate is turned down.
        rejected: Rejection,
        /// The pod has its place (a seat, the node it is bound to, its predecessor's node):
        /// the others are turned down only for not being it, so when none of them passes one
        /// summary entry says so instead of one per candidate.
        seat: bool,
    },
    /// Every candidate passes except these.
    Except {
        /// Turned-down candidates with their reasons.
        rejected: Vec<(usize, Rejection)>,
    },
    /// The request cannot be decided (a malformed pod, a Job kube-tas does not know).
    Invalid(String),
}

/// Something a person watching the workload should hear about, recorded as a Kubernetes
/// Event on the group's owner (its Job, or the pod) by whoever drains the book's notices.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// What the Event is about.
    pub regarding: ObjectReference,
    /// A warning (else normal).
    pub warning: bool,
    /// `TopologyPlanned`, `TopologyDoesNotFit`, `TopologyReplacementPlanned`,
    /// `TopologyReplacementFailed`, `TopologySeatLost`, `TopologyPlanExpired`,
    /// `TopologyPlanReleased`, `BindingFailed`.
    pub reason: &'static str,
    /// What happened, for `kubectl describe`.
    pub note: String,
}

/// Why a bind was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BindError(pub String);

/// A bind under way: the seat is still held until [`PlanBook::commit_bind`] or
/// [`PlanBook::abort_bind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindTicket {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's uid (`namespace/name` when the scheduler sent none).
    pub uid: String,
    /// The node it is bound to.
    pub node: String,
    node_id: NodeId,
    /// Already bound there: nothing to write or commit.
    pub already_bound: bool,
}

/// One placement unit of a workload (one PodSet, or a leader and its workers), as
/// [`PlanBook::plan_unit`] places it.
struct Unit<'a> {
    group: &'a GroupKey,
    /// Its PodSets that have no live plan.
    members: Vec<&'a RoutedPodSet>,
    /// Nodes of the workload's pods holding capacity, per PodSet.
    bound: &'a HashMap<&'a str, Vec<NodeId>>,
    /// Pods lost on nodes that did not fail, per PodSet: they go back there, unplanned.
    kept: &'a HashMap<&'a str, i32>,
    /// Nodes the unit is tied to (its PodSets' bound pods, the seats of their live plans):
    /// what is placed now stays in their domain.
    anchors: Vec<NodeId>,
    /// The PodSet of the pod that asks.
    asking: &'a str,
    /// PodSets of the workload kube-tas places.
    workload_pod_sets: usize,
}

/// Why one placement unit of a workload does not fit.
struct UnitFailure {
    /// The PodSet (the workers of a leader + workers pair).
    key: PlanKey,
    /// Pods of the unit.
    pods: i32,
    /// The engine's words (Kueue's message).
    message: String,
    /// It would not fit on an empty cluster either.
    unresolvable: bool,
}

/// A plan that did not fit, remembered until capacity is given back.
#[derive(Debug, Clone)]
struct Failure {
    /// What it was decided on: asked again with any of it changed, the workload is tried anew.
    stamp: FailureStamp,
    /// A replacement tried once (`TASFailedNodeReplacementFailFast`): not tried again while
    /// pods of the group run, whatever capacity does.
    given_up: bool,
    /// The engine's words (Kueue's message).
    message: String,
    rejection: Rejection,
}

/// What a workload's "does not fit" was decided on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FailureStamp {
    /// [`ClusterState::capacity_generation`]: capacity given back.
    capacity: u64,
    /// [`PlanBook`]'s own generation: holds given back.
    book: u64,
    /// [`ClusterState::workloads_generation`]: the workload itself, or its routing, changed
    /// (a Job re-created smaller under its name, a ClusterQueue given another flavor).
    workloads: u64,
    /// The failed nodes its pods were replaced for, by name (`,`-joined).
    failed: String,
}

/// Who sits in a seat.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    Open,
    Taken(String),
    /// A Binding is being written for this pod; the seat is still held.
    Binding(String),
    Bound(String),
}

/// One pod's place in a plan.
#[derive(Debug, Clone)]
struct Seat {
    leaf: DomainIdx,
    /// The member node (index into the plan's tree nodes) the seat's capacity is held on; in
    /// hostname-lowest trees the only node the pod may go to.
    member: usize,
    holder: Holder,
}

impl Seat {
    fn holds(&self) -> bool {
        !matches!(self.holder, Holder::Bound(_))
    }
}

/// A PodSet's plan.
#[derive(Debug, Clone)]
struct Plan {
    /// What its seats' holds are recorded under ([`HeldCapacity`]).
    id: PlanId,
    flavor: Arc<FlavorTopology>,
    /// One pod's requests (the PodSet's template).
    requests: ResourceList,
    /// The PodSet as it was planned (its pods' node filters, for extra seats).
    template: PodSetSpec,
    /// The level the request names (required or preferred), for extra seats and messages.
    level: Option<usize>,
    seats: Vec<Seat>,
    by_uid: HashMap<String, usize>,
    /// Seats bound ([`Holder::Bound`]): the plan is complete when every seat is.
    bound: usize,
    /// No seat below this index is open: the search for an open seat starts here, so that a
    /// gang's pods without a seat of their own (no rank) take theirs in O(1) each, not O(seats).
    open_from: usize,
    touched: Instant,
    /// Where Events about the plan go.
    owner: ObjectReference,
    /// Pods per replica (a JobSet's pods per Job), for ranks.
    pods_per_replica: usize,
    /// PodSets of the plan's workload kube-tas places.
    workload_pod_sets: usize,
    /// The topology generation at which no seat not bound yet sat on a failed node.
    seats_checked: Option<u64>,
}

impl Plan {
    fn node_id(&self, seat: &Seat) -> NodeId {
        self.flavor.member_ids[seat.member]
    }

    /// A plan of no seat yet.
    #[allow(clippy::too_many_arguments)]
    fn new(
        flavor: Arc<FlavorTopology>,
        template: PodSetSpec,
        level: Option<usize>,
        touched: Instant,
        owner: ObjectReference,
        pods_per_replica: usize,
        workload_pod_sets: usize,
    ) -> Self {
        Self {
            id: PlanId::next(),
            flavor,
            requests: template.requests.clone(),
            template,
            level,
            seats: Vec::new(),
            by_uid: HashMap::new(),
            bound: 0,
            open_from: 0,
            touched,
            owner,
            pods_per_replica,
            workload_pod_sets,
            seats_checked: None,
        }
    }

    /// The seat of `uid`, taking one when it has none: seat `index` when open, else the
    /// first open seat.
    fn take_seat(&mut self, uid: &str, index: Option<usize>) -> Option<usize> {
        if let Some(&s) = self.by_uid.get(uid) {
            return Some(s);
        }
        let open = |s: &Seat| s.holder == Holder::Open;
        let chosen = match index.filter(|&i| self.seats.get(i).is_some_and(open)) {
            Some(i) => i,
            None => {
                let from = self.open_from.min(self.seats.len());
                let Some(first) = self.seats[from..].iter().position(open) else {
                    // None open: seats pushed from now on are searched from their own place.
                    self.open_from = self.seats.len();
                    return None;
                };
                self.open_from = from + first + 1;
                from + first
            }
        };
        self.set_holder(chosen, Holder::Taken(uid.to_string()));
        self.by_uid.insert(uid.to_string(), chosen);
        Some(chosen)
    }

    /// Seat `s` is `holder`'s now, keeping the count `bound` and the open-seat cursor
    /// `open_from`; `by_uid` is the caller's.
    fn set_holder(&mut self, s: usize, holder: Holder) {
        let seat = &mut self.seats[s];
        let bound = |h: &Holder| matches!(h, Holder::Bound(_));
        self.bound = self.bound - usize::from(bound(&seat.holder)) + usize::from(bound(&holder));
        if holder == Holder::Open {
            self.open_from = self.open_from.min(s);
        }
        seat.holder = holder;
    }

    /// `by_uid` and the counts anew, after seats moved or were dropped.
    fn index_holders(&mut self) {
        self.by_uid = (self.seats.iter().enumerate())
            .filter_map(|(i, seat)| match &seat.holder {
                Holder::Open => None,
                Holder::Taken(uid) | Holder::Binding(uid) | Holder::Bound(uid) => {
                    Some((uid.clone(), i))
                }
            })
            .collect();
        self.bound = (self.seats.iter())
            .filter(|s| matches!(s.holder, Holder::Bound(_)))
            .count();
        self.open_from = (self.seats.iter())
            .position(|s| s.holder == Holder::Open)
            .unwrap_or(self.seats.len());
    }

    /// The seat of `uid` is open again (its Binding refused, or its pod gone); `None` when
    /// `uid` has none.
    fn open_seat_of(&mut self, uid: &str) -> Option<usize> {
        let s = self.by_uid.remove(uid)?;
        self.set_holder(s, Holder::Open);
        Some(s)
    }

    /// The domain every seat shares at the request's level, if they share one.
    fn domain(&self) -> Option<DomainIdx> {
        let level = self.level?;
        let tree = &self.flavor.tree;
        let mut seats = self.seats.iter().map(|s| tree.ancestor_at(s.leaf, level));
        let first = seats.next()?;
        seats.all(|d| d == first).then_some(first)
    }

    /// Its seats not bound yet were found on no failed node at topology generation
    /// `generation`, or one is being bound (the plan then stays as it is).
    fn seats_checked_at(&self, generation: u64) -> bool {
        self.seats_checked == Some(generation) || self.binding_in_flight()
    }

    /// A pod of the plan is being bound to its seat.
    fn binding_in_flight(&self) -> bool {
        (self.seats.iter()).any(|s| matches!(s.holder, Holder::Binding(_)))
    }

    fn complete(&self) -> bool {
        debug_assert_eq!(
            self.bound,
            (self.seats.iter())
                .filter(|s| matches!(s.holder, Holder::Bound(_)))
                .count(),
            "bound seats are counted as they change"
        );
        self.bound == self.seats.len()
    }
}

/// A pod made in place of one that took a seat and went away before it was bound (a pending
/// pod deleted: its controller makes another with the same numbers) takes its predecessor's
/// seat: a seat taken, not being bound, by a pod of the same PodSet and the same index that
/// holds no capacity. Two pods of one completion index never both wait for a seat:
/// kube-scheduler schedules no pod being deleted. Without this the dead seat kept its room for
/// the plan's life, and its successor needed an extra seat beside it (none, in a full domain).
/// A pod with no index (a NonIndexed Job's) cannot tell its predecessor from a sibling still
/// waiting: its predecessor's seat is opened once the pod is read back gone ([`quiet`]).
fn hand_over_predecessor_seat(
    plan: &mut Plan,
    seen: &HashMap<String, SeenPod>,
    state: &ClusterState,
    facts: &PodFacts,
    rank: Option<usize>,
    anywhere: bool,
) -> bool {
    let index = facts.index();
    // Only a completion index numbers one pod: a JobSet's NonIndexed Job gives its pods one
    // Job index, which siblings share.
    if index.completion.is_none() {
        return false;
    }
    let replaced = |gone: &String| {
        *gone != facts.uid
            && state.pod(gone).is_none()
            && seen
                .get(gone)
                .is_some_and(|p| p.index == index && p.pod_set == facts.pod_set)
    };
    // Its predecessor, of the same numbers, asked for the seat of their rank: normally one seat
    // to look at (a scan of the plan's pods for every new pod would cost a gang of n pods n²
    // lookups). `anywhere` (no seat is open) looks at every seat: a pod whose rank's seat was
    // taken, or past the seats (an Indexed Job of more completions than parallelism), took the
    // first open one.
    let taken_by = |s: usize| match &plan.seats[s].holder {
        Holder::Taken(uid) if replaced(uid) => Some((uid.clone(), s)),
        _ => None,
    };
    let at_rank = rank.filter(|&r| r < plan.seats.len()).and_then(taken_by);
    let found = at_rank.or_else(|| {
        anywhere
            .then(|| (0..plan.seats.len()).find_map(taken_by))
            .flatten()
    });
    let Some((gone, s)) = found else {
        return false;
    };
    tracing::debug!(pod = %facts.name, predecessor = %gone,
        "a pod takes the seat of the pod it replaces");
    plan.open_seat_of(&gone);
    plan.take_seat(&facts.uid, Some(s));
    true
}

/// How long after its last `filter` a seat's pod the pending watch does not show counts as
/// gone: kube-scheduler's informer and kube-tas's watch learn of a new pod at about the same
/// time, but a pod just created may take its seat before the watch shows it.
const PENDING_WATCH_LAG: Duration = Duration::from_secs(1);

/// In live mode, where a watch feeds the pending pods of plain pod groups and of Workload-API
/// PodGroups, a seat taken by a pod that is gone (neither pending nor holding capacity, and not
/// filtered for [`PENDING_WATCH_LAG`]) is open again: its group's next pod takes it. A Job's
/// pending pods are not watched: one waiting cannot be told from one gone (its successor, of
/// the same index, takes its seat: [`hand_over_predecessor_seat`]; others are read back once
/// quiet: [`quiet`]).
fn reopen_vanished_seats(
    plan: &mut Plan,
    seen: &HashMap<String, SeenPod>,
    state: &ClusterState,
    key: &PlanKey,
    asking: &str,
    now: Instant,
) -> u64 {
    if !state.tracks_pending_group_pods() {
        return 0; // from files, a pod the scheduler sends may be known nowhere else
    }
    let quiet = |uid: &str| {
        seen.get(uid)
            .is_none_or(|p| now.saturating_duration_since(p.seen) >= PENDING_WATCH_LAG)
    };
    let pending = |uid: &str| match key.group.kind {
        WorkloadKind::SchedulingGroup => Some(state.pending_member(uid).is_some()),
        WorkloadKind::PodGroup => Some(state.is_pending_group_pod(uid)),
        _ => None,
    };
    let gone: Vec<String> = plan
        .by_uid
        .iter()
        .filter(|&(uid, &s)| {
            uid.as_str() != asking
                && matches!(&plan.seats[s].holder, Holder::Taken(u) if u == uid)
                && pending(uid) == Some(false)
                && state.pod(uid).is_none()
                && quiet(uid)
        })
        .map(|(uid, _)| uid.clone())
        .collect();
    for uid in &gone {
        plan.open_seat_of(uid);
    }
    gone.len() as u64
}

/// Why plans are released before their pods came ([`PlanBook::release_plans`]).
#[derive(Debug, Clone, Copy)]
enum Released {
    /// Kueue manages the group now.
    ToKueue,
    /// The group's Job was deleted and created again; the plan was the first one's.
    JobCreatedAgain,
}

/// A pod kube-tas has seen in `filter` (what `bind` needs to record it).
#[derive(Debug, Clone)]
struct SeenPod {
    key: PlanKey,
    /// The pod's name (its namespace is its group's), to read it back.
    name: String,
    pod_set: PodSetHint,
    index: PodIndex,
    /// Kueue's own TAS placed it: bound where the scheduler chose, kube-tas's holds aside.
    kueue_managed: bool,
    owner: ObjectReference,
    incarnation: Incarnation,
    requests: ResourceList,
    scoring: ResourceList,
    bound_to: Option<String>,
    /// A Binding to this node is being written (its commit records the pod there by id).
    binding: Option<NodeId>,
    /// That bind holds the pod's requests on the node ([`HeldCapacity::hold_binding`]): the
    /// pod has no seat, and nothing else keeps its room until the commit records it.
    binding_held: bool,
    seen: Instant,
    /// When its seat was last read back from the API server with the pod still waiting
    /// ([`PlanBook::quiet_seat_waits`]).
    read_back_waiting: Option<Instant>,
    /// What the pod said at its last version read.
    read: Option<ReadVersion>,
}

impl SeenPod {
    /// What the book read of the pod at `resource_version`, if that is its last version read.
    fn read_at(&self, resource_version: &str) -> Option<&ReadVersion> {
        self.read
            .as_ref()
            .filter(|r| *r.resource_version == *resource_version)
    }
}

/// What placement takes from a pod at one `resourceVersion` (the same version is the same
/// object): asked again at that version, the book answers `filter` for a pod with a seat or a
/// node ([`PlanBook::filter_known`]) and `prioritize` for any pod ([`PlanBook::favoured_known`])
/// from this, without the pod's body.
#[derive(Debug, Clone)]
struct ReadVersion {
    resource_version: Box<str>,
    group: GroupKey,
    pod_set: PodSetHint,
    /// The pod itself says Kueue manages it (what the state says is asked at every call).
    kueue_managed: bool,
}

/// Every plan and seat.
pub struct PlanBook {
    gates: FeatureGates,
    ttl: Duration,
    plans: HashMap<PlanKey, Plan>,
    held: HeldCapacity,
    pods: HashMap<String, SeenPod>,
    failures: HashMap<GroupKey, Failure>,
    /// Moves whenever the book gives capacity back; failures of older generations are stale.
    generation: u64,
    last_sweep: Option<Instant>,
    counters: Arc<PlanCounters>,
    notices: Vec<Notice>,
    /// Per Workload-API tree root (`Kind namespace/name`), the last "does not fit" noticed, so
    /// each reason is said once whichever child's pod asks.
    scheduling_noticed: HashMap<String, String>,
    /// Per Workload-API PodGroup, the last "does not fit" and what it was decided on
    /// ([`scheduling::Memo`]): asked again with nothing changed, the answer is given again
    /// without placing the tree anew.
    scheduling_memo: HashMap<GroupKey, scheduling::Memo>,
    /// The name tails ([`tail`]) of the nodes something is held on, as of a version of the
    /// nodes `held` holds ([`HeldCapacity::nodes_version`]) and the state's topology
    /// generation (a node id may come to name another node): a lone pod's candidates whose
    /// tail is not among them hold nothing, and are passed without looking their names up.
    held_tails: ((u64, u64), HashSet<u64, foldhash::fast::RandomState>),
}

impl PlanBook {
    /// An empty book; plans idle for `ttl` expire.
    pub fn new(gates: FeatureGates, ttl: Duration) -> Self {
        Self {
            gates,
            ttl,
            plans: HashMap::new(),
            held: HeldCapacity::default(),
            pods: HashMap::new(),
            failures: HashMap::new(),
            generation: 0,
            last_sweep: None,
            counters: Arc::default(),
            notices: Vec::new(),
            scheduling_noticed: HashMap::new(),
            scheduling_memo: HashMap::new(),
            held_tails: ((0, 0), HashSet::default()),
        }
    }

    /// The feature gates in force.
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// The counters, to read without the book's lock.
    pub fn counters(&self) -> Arc<PlanCounters> {
        self.counters.clone()
    }

    /// Counters and gauges.
    pub fn stats(&self) -> PlanStats {
        self.counters.snapshot()
    }

    /// What plans hold on a node, by name.
    pub fn held_on(&self, state: &ClusterState, node: &str) -> Option<&ResourceList> {
        self.held.at(state.node_id(node)?)
    }

    /// The notices gathered since the last call (at most [`MAX_NOTICES`] are kept).
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    fn notice(
        &mut self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &'static str,
        note: String,
    ) {
        if self.notices.len() < MAX_NOTICES {
            self.notices.push(Notice {
                regarding: regarding.clone(),
                warning,
                reason,
                note,
            });
        }
    }

    /// Drops every plan, seat and remembered failure (leadership lost: the next leader
    /// rebuilds plans from the cluster, and this replica must hold nothing meanwhile).
    pub fn clear(&mut self) {
        self.plans.clear();
        self.held = HeldCapacity::default();
        self.pods.clear();
        self.failures.clear();
        self.scheduling_noticed.clear();
        self.scheduling_memo.clear();
        self.generation += 1;
        self.publish();
    }

    /// Which of `candidates` (node ids the state may give back) the book refers to: a node of
    /// a live plan's tree (its seats, and the members extra seats may take), a node something
    /// is held on, or the node of a Binding being written (its commit records the pod there
    /// by id).
    pub fn node_ids_in_use(&self, candidates: &HashSet<NodeId>) -> HashSet<NodeId> {
        let mut in_use = HashSet::new();
        if candidates.is_empty() {
            return in_use;
        }
        let mut trees_read: HashSet<*const FlavorTopology> = HashSet::new();
        for plan in self.plans.values() {
            if trees_read.insert(Arc::as_ptr(&plan.flavor)) {
                let members = plan.flavor.member_ids.iter();
                in_use.extend(members.filter(|id| candidates.contains(id)));
            }
        }
        in_use.extend(self.held.nodes().filter(|id| candidates.contains(id)));
        let binding_on = self.pods.values().filter_map(|p| p.binding);
        in_use.extend(binding_on.filter(|id| candidates.contains(id)));
        in_use
    }

    /// The engine's message for a group whose plan did not fit (Kueue's words).
    pub fn group_failure(&self, group: &GroupKey) -> Option<&str> {
        self.failures.get(group).map(|f| f.message.as_str())
    }

    fn publish(&self) {
        let c = &self.counters;
        c.plans_active
            .store(self.plans.len() as u64, Ordering::Relaxed);
        c.seats_held.store(self.held.seats(), Ordering::Relaxed);
    }

    /// Where `pod` may go among `candidates` (node names, as the scheduler sent them).
    pub fn filter(
        &mut self,
        state: &ClusterState,
        pod: &Pod,
        candidates: &[&str],
        now: Instant,
    ) -> FilterVerdict {
        self.swept(state, now, |book| match PodFacts::of(pod) {
            Ok(mut facts) => {
                let by_pod = facts.kueue_managed;
                let verdict = book.decide_filter(state, pod, &mut facts, candidates, now);
                let version = pod.metadata.resource_version.as_deref();
                book.remember_version(&facts, version, by_pod);
                verdict
            }
            Err(e) => FilterVerdict::Invalid(e),
        })
    }

    /// `filter` for a pod the book has read at `resource_version` and that has a seat or a
    /// node: the same verdict and the same effects as [`Self::filter`] with the pod, without
    /// it. `None` when the book needs the pod (another version, no seat any more, Kueue's,
    /// seats to check against failed nodes): then call [`Self::filter`].
    pub fn filter_known(
        &mut self,
        state: &ClusterState,
        uid: &str,
        resource_version: &str,
        candidates: &[&str],
        now: Instant,
    ) -> Option<FilterVerdict> {
        self.swept(state, now, |book| {
            book.decide_known(state, uid, resource_version, candidates, now)
        })
    }

    /// `decide` after the sweep of expired plans, with the counters published after it.
    fn swept<T>(
        &mut self,
        state: &ClusterState,
        now: Instant,
        decide: impl FnOnce(&mut Self) -> T,
    ) -> T {
        self.sweep(state, now);
        let verdict = decide(self);
        self.publish();
        verdict
    }

    /// Whether [`Self::filter_known`] can answer the pod `uid` at `resource_version` (as far
    /// as the book alone says: the state may still send the filter to the pod's full
    /// reading). [`Self::knows_read`] says it for [`Self::favoured_known`].
    pub fn knows_seated(&self, uid: &str, resource_version: &str) -> bool {
        self.pods.get(uid).is_some_and(|seen| {
            seen.read_at(resource_version).is_some() && self.seated_by_key(uid, seen)
        })
    }

    /// Whether [`Self::favoured_known`] can answer the pod `uid` at `resource_version`.
    pub fn knows_read(&self, uid: &str, resource_version: &str) -> bool {
        self.pods
            .get(uid)
            .is_some_and(|seen| seen.read_at(resource_version).is_some())
    }

    /// The pod `uid` is bound, or holds a seat in the plan it was last seen under.
    fn seated_by_key(&self, uid: &str, seen: &SeenPod) -> bool {
        seen.bound_to.is_some()
            || self
                .plans
                .get(&seen.key)
                .is_some_and(|plan| plan.by_uid.contains_key(uid))
    }

    /// Keeps what `facts` (read at `version`, Kueue's by the pod itself when `by_pod`) say
    /// for a pod the book has seen, so that it is answered without its body when asked again
    /// at that version (`prioritize` right after `filter`, or `filter` again for a pod with a
    /// seat or a node).
    fn remember_version(&mut self, facts: &PodFacts, version: Option<&str>, by_pod: bool) {
        let Some(version) = version.filter(|v| !v.is_empty()) else {
            return;
        };
        // A Workload-API pod's decision reads the pod (its Job, its tree): never from memory.
        if facts.group.kind == WorkloadKind::SchedulingGroup {
            return;
        }
        let Some(seen) = self.pods.get(&facts.uid) else {
            return;
        };
        if seen.read_at(version).is_some() {
            return;
        }
        let read = ReadVersion {
            resource_version: version.into(),
            group: facts.group.clone(),
            pod_set: facts.pod_set.clone(),
            kueue_managed: by_pod,
        };
        if let Some(seen) = self.pods.get_mut(&facts.uid) {
            seen.read = Some(read);
        }
    }

    /// [`Self::decide_filter`]'s steps for a pod with a seat or a node, from what the book
    /// read at that version; `None` (nothing changed) wherever they would need the pod.
    fn decide_known(
        &mut self,
        state: &ClusterState,
        uid: &str,
        resource_version: &str,
        candidates: &[&str],
        now: Instant,
    ) -> Option<FilterVerdict> {
        let seen = self.pods.get(uid)?;
        let read = seen.read_at(resource_version)?;
        // Kueue's pods are passed through and recorded by the full path.
        if read.kueue_managed || state.kueue_manages(&read.group) {
            return None;
        }
        if let Some(node) = seen.bound_to.clone() {
            self.pods.get_mut(uid)?.seen = now;
            return Some(bound_verdict(candidates, &node));
        }
        if let Some(node) = seen.binding.and_then(|id| state.name_of(id)) {
            self.pods.get_mut(uid)?.seen = now;
            return Some(binding_verdict(candidates, node));
        }
        // Seated in the plan its PodSet names, none of whose seats sits on a failed node: the
        // full path would keep the plan and the seat.
        let key = self.planned_key(&read.group, &read.pod_set)?;
        if seen.key != key {
            return None;
        }
        let seat = *self.plans.get(&key)?.by_uid.get(uid)?;
        if self.failed_seat(state, &key).is_some() {
            return None;
        }
        self.pods.get_mut(uid)?.seen = now;
        self.plans.get_mut(&key)?.touched = now;
        Some(self.seat_verdict(&key, seat, candidates))
    }

    fn decide_filter(
        &mut self,
        state: &ClusterState,
        pod: &Pod,
        facts: &mut PodFacts,
        candidates: &[&str],
        now: Instant,
    ) -> FilterVerdict {
        // A Job Kueue has a Workload for is Kueue's too, whatever its pods carry (also when
        // they name a Workload-API PodGroup: the group is then the PodGroup, not the Job).
        facts.kueue_managed |= state.kueue_manages(&facts.group);
        if facts.group.kind == WorkloadKind::SchedulingGroup
            && let Some(job) = crate::cluster::controller_job_of(&pod.metadata)
        {
            facts.kueue_managed |= state.kueue_manages(&GroupKey {
                kind: WorkloadKind::Job,
                namespace: facts.namespace.clone(),
                name: job,
            });
        }
        // A bind begun or done stands, whoever manages the group now.
        if let Some(seen) = self.pods.get_mut(&facts.uid) {
            seen.seen = now;
            if let Some(node) = seen.bound_to.clone() {
                return bound_verdict(candidates, &node);
            }
            if let Some(node) = seen.binding.and_then(|id| state.name_of(id)) {
                return binding_verdict(candidates, node);
            }
        }
        if facts.kueue_managed {
            self.give_plans_to_kueue(&facts.group, &facts.pod_set);
            // A seat kept (its plan waits for a bind in flight) is still the pod's: its bind
            // anywhere else would be refused.
            if let Some(key) = (self.pods.get(&facts.uid))
                .filter(|seen| self.seated_by_key(&facts.uid, seen))
                .map(|seen| seen.key.clone())
            {
                self.see(facts, key.clone(), now);
                return self.seat_filter(state, &key, facts, candidates, now);
            }
            // Kueue's own TAS pinned it: passed through, never planned; bound where the
            // scheduler chose once the node has room.
            self.see(facts, main_key(&facts.group), now);
            return FilterVerdict::Except {
                rejected: Vec::new(),
            };
        }
        if facts.group.kind == WorkloadKind::SchedulingGroup {
            return self.scheduling_filter(state, pod, facts, candidates, now);
        }
        // A pod recreated for one its group lost: back to its predecessor's node, unless that
        // node has failed for the group (then `failed` says which nodes are replaced).
        let mut failed = Vec::new();
        if state.has_lost(&facts.group)
            && !self.seated(facts)
            && let Ok(Route::Workload(routed)) =
                route(pod, &facts.group, facts.tas_marked, state, &self.gates)
        {
            match self.successor(state, facts, &routed, candidates) {
                Successor::Pinned(verdict) => {
                    let key = PlanKey {
                        group: facts.group.clone(),
                        pod_set: routed.pod_set.clone(),
                    };
                    self.see(facts, key, now);
                    return verdict;
                }
                Successor::Replace => failed = self.failed_nodes(state, facts, &routed),
                Successor::Unknown => {}
            }
        }
        let current = state.incarnation_of(&facts.group);
        if !facts.incarnation.belongs_to(current) {
            // A pod of a Job deleted and created again (the garbage collector deletes it), or
            // of the new Job while the Job watch has not shown it yet (asked again later).
            return FilterVerdict::Only {
                seat: false,
                pass: Vec::new(),
                rejected: Rejection {
                    reason: format!(
                        "node(s) are not for pod {}: another creation of {} than the one \
                         kube-tas knows made it (the Job was deleted and created again); only \
                         the current Job's pods are placed",
                        facts.name, facts.group
                    )
                    .into(),
                    unresolvable: false,
                },
            };
        }
        let planned = self
            .planned_key(&facts.group, &facts.pod_set)
            .filter(|key| !self.drop_if_of_another_creation(key, current))
            .filter(|key| !self.drop_if_seats_failed(state, key));
        let key = match planned {
            Some(key) => key,
            None => match route(pod, &facts.group, facts.tas_marked, state, &self.gates) {
                Ok(Route::Lone) => {
                    self.see(facts, main_key(&facts.group), now);
                    return self.lone_filter(state, facts, candidates);
                }
                Ok(Route::Denied(d)) => {
                    return FilterVerdict::Only {
                        seat: false,
                        pass: Vec::new(),
                        rejected: Rejection {
                            reason: format!(
                                "node(s) cannot take a pod the webhook refuses: {}",
                                d.message
                            )
                            .into(),
                            unresolvable: true,
                        },
                    };
                }
                Ok(Route::Waiting(why)) => {
                    return FilterVerdict::Only {
                        seat: false,
                        pass: Vec::new(),
                        rejected: Rejection {
                            reason: format!("node(s) wait: {why}").into(),
                            unresolvable: false,
                        },
                    };
                }
                Ok(Route::Workload(routed)) => {
                    let key = PlanKey {
                        group: facts.group.clone(),
                        pod_set: routed.pod_set.clone(),
                    };
                    let planned = self.plan_workload(
                        state,
                        &facts.group,
                        &routed,
                        &failed,
                        now,
                        Some(&facts.owner),
                    );
                    if let Err(rejection) = planned {
                        return FilterVerdict::Only {
                            seat: false,
                            pass: Vec::new(),
                            rejected: rejection,
                        };
                    }
                    key
                }
                Err(e) => return FilterVerdict::Invalid(e),
            },
        };
        self.see(facts, key.clone(), now);
        self.seat_filter(state, &key, facts, candidates, now)
    }

    /// Kueue manages a group kube-tas had planned (its `Workload`, or its pods' Kueue marks,
    /// seen after the plan was made): the group's plans are removed and their holds given
    /// back, so that its pods bind where Kueue's TAS put them (a seat would refuse a bind
    /// anywhere else) and its room is not held twice. A plan with a Binding in flight stays
    /// until that bind ends, its seats still their pods'; the group's next pod, or the
    /// sweep, then removes it.
    fn give_plans_to_kueue(&mut self, group: &GroupKey, pod_set: &PodSetHint) {
        if self.plans.is_empty()
            || (self.planned_key(group, pod_set).is_none()
                && !self.plans.contains_key(&main_key(group)))
        {
            return;
        }
        self.release_plans(|k| k.group == *group, Released::ToKueue);
    }

    /// Removes every plan `of` picks that has no Binding in flight (those stay until their
    /// bind ends), giving back its holds, and says why on its owner.
    fn release_plans(&mut self, of: impl Fn(&PlanKey) -> bool, why: Released) {
        let keys: Vec<PlanKey> = (self.plans.iter())
            .filter(|(k, p)| of(k) && !p.binding_in_flight())
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some(plan) = self.remove_plan(&key) else {
                continue;
            };
            let seats = plan.seats.iter().filter(|s| s.holds()).count();
            let note = match why {
                Released::ToKueue => {
                    tracing::info!(group = %key, seats, "plan released: Kueue manages the group");
                    let plan_of = match key.pod_set.as_str() {
                        MAIN_POD_SET => String::new(),
                        pod_set => format!(" for pod set {pod_set}"),
                    };
                    format!(
                        "Kueue manages {} now: kube-tas released its plan{plan_of} and gave back \
                         the room of its {seats} seat(s) not yet bound; Kueue's TAS places the \
                         pods",
                        key.group
                    )
                }
                Released::JobCreatedAgain => {
                    tracing::info!(group = %key, "plan dropped: its Job was created again");
                    format!(
                        "{} was deleted and created again: kube-tas released the first Job's \
                         plan and gave back the room of its {seats} seat(s) not yet bound",
                        key.group
                    )
                }
            };
            self.notice(&plan.owner, false, "TopologyPlanReleased", note);
        }
    }

    /// A plan made for another creation of its Job than `current` (the Job deleted and
    /// created again under its name while its gang was waiting) is dropped, its holds given
    /// back, so that the new Job is planned whole rather than taking the first one's seats;
    /// `true` when it was. A plan with a Binding in flight stays until that bind ends.
    fn drop_if_of_another_creation(&mut self, key: &PlanKey, current: Incarnation) -> bool {
        let Some(plan) = self.plans.get(key) else {
            return false;
        };
        let made_for = match plan.owner.kind.as_deref() {
            Some("Job") => Incarnation::of_uid(plan.owner.uid.as_deref()),
            _ => Incarnation::UNKNOWN,
        };
        if made_for.belongs_to(current) || plan.binding_in_flight() {
            return false;
        }
        let group = key.group.clone();
        self.release_plans(|k| k.group == group, Released::JobCreatedAgain);
        true
    }

    /// Removes a plan and gives back the holds of its seats not bound.
    fn remove_plan(&mut self, key: &PlanKey) -> Option<Plan> {
        let plan = self.plans.remove(key)?;
        for seat in plan.seats.iter().filter(|s| s.holds()) {
            self.held
                .release(plan.node_id(seat), &plan.requests, plan.id);
        }
        self.generation += 1;
        Some(plan)
    }

    /// Records a pod seen in `filter` under its plan key (what `bind` needs).
    fn see(&mut self, facts: &PodFacts, key: PlanKey, now: Instant) {
        let seen = self
            .pods
            .entry(facts.uid.clone())
            .or_insert_with(|| SeenPod {
                key: key.clone(),
                name: facts.name.clone(),
                pod_set: facts.pod_set.clone(),
                index: facts.index(),
                kueue_managed: facts.kueue_managed,
                owner: facts.owner.clone(),
                incarnation: facts.incarnation,
                requests: facts.requests.clone(),
                scoring: facts.scoring.clone(),
                bound_to: None,
                binding: None,
                binding_held: false,
                seen: now,
                read_back_waiting: None,
                read: None,
            });
        seen.key = key;
        seen.seen = now;
        // Kueue may take the group over after the pod was first seen.
        seen.kueue_managed = facts.kueue_managed;
    }

    /// The pod holds a seat in a live plan, or is bound.
    fn seated(&self, facts: &PodFacts) -> bool {
        self.pods
            .get(&facts.uid)
            .is_some_and(|seen| self.seated_by_key(&facts.uid, seen))
    }

    /// The key of the live plan of the pod's PodSet, if there is one.
    fn planned_key(&self, group: &GroupKey, pod_set: &PodSetHint) -> Option<PlanKey> {
        // The PodSet the pod names, then the one a workload of one PodSet calls `main`.
        let (first, fallback) = match pod_set {
            PodSetHint::Main => (MAIN_POD_SET, None),
            PodSetHint::Named(name) => (&**name, None),
            PodSetHint::Role(role) => (&**role, Some(MAIN_POD_SET)),
            PodSetHint::LwsWorker(0) => (LWS_LEADER_POD_SET, Some(MAIN_POD_SET)),
            PodSetHint::LwsWorker(_) => (LWS_WORKER_POD_SET, Some(MAIN_POD_SET)),
        };
        [Some(first), fallback]
            .into_iter()
            .flatten()
            .find_map(|name| {
                let key = PlanKey {
                    group: group.clone(),
                    pod_set: name.to_string(),
                };
                self.plans.contains_key(&key).then_some(key)
            })
    }

    /// Why `pod`'s group cannot be planned, in the engine's (Kueue's) words, without making
    /// a plan: what a person needs when kube-scheduler's own filters already turned every
    /// node down. `None` when the group would fit, has a plan, or is not a TAS group.
    pub fn diagnose(&mut self, state: &ClusterState, pod: &Pod, now: Instant) -> Option<String> {
        let facts = PodFacts::of(pod).ok()?;
        if facts.group.kind == WorkloadKind::SchedulingGroup {
            return self.diagnose_scheduling(state, pod, &facts, now);
        }
        if self.planned_key(&facts.group, &facts.pod_set).is_some() {
            return None;
        }
        let Ok(Route::Workload(routed)) =
            route(pod, &facts.group, facts.tas_marked, state, &self.gates)
        else {
            return None;
        };
        self.plan_workload(state, &facts.group, &routed, &[], now, None)
            .err()?;
        self.group_failure(&facts.group).map(str::to_string)
    }

    /// The candidates to favour for `pod` (its seat's nodes); never creates a plan.
    pub fn favoured(&mut self, pod: &Pod, candidates: &[&str]) -> Vec<usize> {
        let Ok(facts) = PodFacts::of(pod) else {
            return Vec::new();
        };
        self.favoured_for(&facts.uid, &facts.group, &facts.pod_set, candidates)
    }

    /// [`Self::favoured`] for a pod the book has read at `resource_version` (seat or not),
    /// without it; `None` when the book has not.
    pub fn favoured_known(
        &self,
        uid: &str,
        resource_version: &str,
        candidates: &[&str],
    ) -> Option<Vec<usize>> {
        let read = self.pods.get(uid)?.read_at(resource_version)?;
        Some(self.favoured_for(uid, &read.group, &read.pod_set, candidates))
    }

    fn favoured_for(
        &self,
        uid: &str,
        group: &GroupKey,
        pod_set: &PodSetHint,
        candidates: &[&str],
    ) -> Vec<usize> {
        if let Some(node) = self.pods.get(uid).and_then(|p| p.bound_to.as_deref()) {
            return positions(candidates, &[node]);
        }
        let Some(plan) = self
            .planned_key(group, pod_set)
            .and_then(|k| self.plans.get(&k))
        else {
            return Vec::new();
        };
        let Some(&s) = plan.by_uid.get(uid) else {
            return Vec::new();
        };
        let nodes = seat_nodes(plan, &plan.seats[s]);
        positions(candidates, &nodes)
    }

    /// Binds at once (no API server in between): [`Self::begin_bind`] then
    /// [`Self::commit_bind`].
    pub fn bind(
        &mut self,
        state: &mut ClusterState,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        now: Instant,
    ) -> Result<(), BindError> {
        let ticket = self.begin_bind(state, namespace, name, uid, node, now)?;
        self.commit_bind(state, &ticket, now);
        Ok(())
    }

    /// Checks that `pod` may be bound to `node` and marks its seat as being bound (still
    /// held). The caller writes the Binding, then calls [`Self::commit_bind`] or
    /// [`Self::abort_bind`].
    pub fn begin_bind(
        &mut self,
        state: &ClusterState,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        now: Instant,
    ) -> Result<BindTicket, BindError> {
        self.sweep(state, now);
        let uid = if uid.is_empty() {
            format!("{namespace}/{name}")
        } else {
            uid.to_string()
        };
        let Some(seen) = self.pods.get(&uid) else {
            return Err(BindError(format!(
                "pod {namespace}/{name} (uid {uid}) never came through kube-tas's filter, so \
                 its requests are unknown; kube-tas binds only pods it filtered"
            )));
        };
        if let Some(bound) = seen.bound_to.as_ref().filter(|b| *b != node) {
            return Err(BindError(format!(
                "pod {namespace}/{name} is already bound to {bound}"
            )));
        }
        let Some(node_id) = state.node_id(node).filter(|&id| state.node(id).is_some()) else {
            return Err(BindError(format!(
                "node {node:?} is not in kube-tas's cluster view"
            )));
        };
        let ticket = BindTicket {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid.clone(),
            node: node.to_string(),
            node_id,
            already_bound: seen.bound_to.is_some(),
        };
        if ticket.already_bound {
            return Ok(ticket);
        }
        if seen.binding.is_some() {
            return Err(BindError(format!(
                "pod {namespace}/{name} is being bound already; retry once that bind has ended"
            )));
        }
        let key = seen.key.clone();
        let requests = seen.requests.clone();
        let kueue_managed = seen.kueue_managed;
        let binding_held = match self.plans.get_mut(&key) {
            Some(plan) if plan.by_uid.contains_key(&uid) => {
                let s = plan.by_uid[&uid];
                let nodes = seat_nodes(plan, &plan.seats[s]);
                if !nodes.contains(&node) {
                    return Err(BindError(format!(
                        "pod {namespace}/{name} has its seat on {} in the plan for {key}, not \
                         on {node}; refusing to bind outside the plan",
                        nodes.join(", ")
                    )));
                }
                plan.set_holder(s, Holder::Binding(uid.clone()));
                plan.touched = now;
                false
            }
            _ => {
                let held = if kueue_managed {
                    None
                } else {
                    self.held.at(node_id)
                };
                if !state.room_for(node_id, held, &requests) {
                    let why = match held.and_then(|_| self.held_room(state, node_id, &requests)) {
                        Some(held) => format!(": its free capacity is {held}"),
                        None => " once the pods on it are counted".to_string(),
                    };
                    return Err(BindError(format!(
                        "node {node} has no room for pod {namespace}/{name}{why}"
                    )));
                }
                // Kept from every other decision until the commit counts the pod on the node:
                // kube-scheduler binds while it filters the next pods, and a seat or another
                // pod could otherwise be given the same room.
                self.held.hold_binding(node_id, &requests);
                true
            }
        };
        if let Some(p) = self.pods.get_mut(&uid) {
            p.binding = Some(ticket.node_id);
            p.binding_held = binding_held;
        }
        Ok(ticket)
    }

    /// The Binding was written: the seat becomes usage on its node, in `state` at once.
    pub fn commit_bind(&mut self, state: &mut ClusterState, ticket: &BindTicket, now: Instant) {
        if ticket.already_bound {
            return;
        }
        // Only the bind this ticket began: after the book was cleared (leadership lost and won
        // back) the pod may be seen anew, and the ticket's node id is no longer kept for it.
        let Some(seen) =
            (self.pods.get_mut(&ticket.uid)).filter(|seen| seen.binding == Some(ticket.node_id))
        else {
            return;
        };
        seen.binding = None;
        let binding_held = std::mem::take(&mut seen.binding_held);
        seen.bound_to = Some(ticket.node.clone());
        seen.seen = now;
        let key = seen.key.clone();
        let (pod_set, index) = (seen.pod_set.clone(), seen.index);
        let incarnation = seen.incarnation;
        let requests = seen.requests.clone();
        let scoring = seen.scoring.clone();
        // Whether the room held for the pod is more than its usage recorded below: then
        // capacity is given back, and a "does not fit" remembered is stale.
        let mut gave_back = false;
        if binding_held {
            self.held.release_binding(ticket.node_id, &requests);
        }
        if let Some(plan) = self.plans.get_mut(&key)
            && let Some(&s) = plan.by_uid.get(&ticket.uid)
        {
            let held_on = plan.node_id(&plan.seats[s]);
            plan.set_holder(s, Holder::Bound(ticket.uid.clone()));
            plan.touched = now;
            self.held.release(held_on, &plan.requests, plan.id);
            gave_back |= plan.requests != requests;
            if held_on != ticket.node_id {
                // A seat of a pooled leaf bound to another node of the leaf than the one its
                // hold sat on: a seat of this plan held there moves its hold over, so the
                // holds keep matching where the room is.
                let (leaf, member) = (plan.seats[s].leaf, plan.seats[s].member);
                let ids = &plan.flavor.member_ids;
                let moved = plan
                    .seats
                    .iter_mut()
                    .find(|o| o.holds() && o.leaf == leaf && ids[o.member] == ticket.node_id);
                if let Some(other) = moved {
                    other.member = member;
                    self.held.release(ticket.node_id, &plan.requests, plan.id);
                    self.held.hold(held_on, &plan.requests, plan.id);
                } else {
                    gave_back = true;
                }
            }
            if plan.complete() {
                self.plans.remove(&key);
            }
        } else if let Some(seen) = self.pods.get_mut(&ticket.uid) {
            // What a pod without a seat was read as served its `prioritize`, which came
            // before the bind.
            seen.read = None;
        }
        let usage = state.usage_generation();
        state.assume(
            &ticket.uid,
            (&ticket.namespace, &ticket.name),
            PodUsage {
                node: ticket.node_id,
                requests: PodResources::from(&requests),
                scoring: ScoringAmounts::from(&scoring),
                group: Arc::new(key.group),
                pod_set,
                index,
                terminating: false,
                assumed: true,
                incarnation,
            },
        );
        // Not recorded: the watch showed the pod bound first (its usage counted beside the
        // hold until now), or gone.
        gave_back |= state.usage_generation() == usage;
        if gave_back {
            self.generation += 1;
        }
        PlanCounters::bump(&self.counters.pods_bound);
        self.publish();
    }

    /// The Binding failed: the seat is freed (open again, its capacity still held for the
    /// group) and the pod may be filtered and bound anew.
    pub fn abort_bind(&mut self, ticket: &BindTicket, reason: &str) {
        if ticket.already_bound {
            return;
        }
        let Some(seen) =
            (self.pods.get_mut(&ticket.uid)).filter(|seen| seen.binding == Some(ticket.node_id))
        else {
            return;
        };
        PlanCounters::bump(&self.counters.binds_failed);
        seen.binding = None;
        if std::mem::take(&mut seen.binding_held) {
            self.held.release_binding(ticket.node_id, &seen.requests);
            self.generation += 1;
        }
        let (owner, key) = (seen.owner.clone(), seen.key.clone());
        self.notice(
            &owner,
            true,
            "BindingFailed",
            format!(
                "pod {}/{} could not be bound to {}: {reason}; its seat is free again",
                ticket.namespace, ticket.name, ticket.node
            ),
        );
        if let Some(plan) = self.plans.get_mut(&key) {
            plan.open_seat_of(&ticket.uid);
        }
        self.publish();
    }

    /// Free capacity of a flavor's tree: allocatable minus usage minus held seats.
    fn free_capacity(
        &self,
        state: &ClusterState,
        f: &FlavorTopology,
    ) -> crate::topology::capacity::FreeCapacity {
        state.free_capacity(f, |id| self.held.at(id))
    }

    /// Plans every PodSet of the workload that has no plan yet, or says why the workload does
    /// not fit. With an `owner` the plans are kept (and noticed); without one they are only
    /// tried (a diagnosis) and every hold is given back.
    ///
    /// Kueue's order: flavors by name; in a flavor, PodSets joined by `podset-group-name` are
    /// one placement (workers and a leader in one domain), others one each, in the workload's
    /// order; each placement holds its seats before the next is computed, so it is usage for
    /// the next. The first that does not fit fails the whole workload, and what the earlier
    /// ones held is given back: no pod of a workload passes before all of it has its plan.
    ///
    /// `failed` are the nodes that failed for a running workload: what is planned replaces
    /// what they held. With `TASFailedNodeReplacementFailFast` a replacement is tried once.
    fn plan_workload(
        &mut self,
        state: &ClusterState,
        group: &GroupKey,
        routed: &RoutedWorkload,
        failed: &[FailedNode],
        now: Instant,
        owner: Option<&ObjectReference>,
    ) -> Result<(), Rejection> {
        let stamp = FailureStamp {
            capacity: state.capacity_generation(),
            book: self.generation,
            workloads: state.workloads_generation(),
            failed: node_names(failed),
        };
        if let Some(f) = self.failures.get(group)
            && (f.given_up || f.stamp == stamp)
        {
            return Err(f.rejection.clone());
        }
        let names = routed.pod_set_names();
        // Pods of the workload already holding capacity (a restart, a replacement), per PodSet;
        // a pod being deleted on a failed node is not one of them (it is replaced).
        let failed_ids: Vec<NodeId> = failed
            .iter()
            .filter_map(|f| state.node_id(&f.name))
            .collect();
        let mut bound: HashMap<&str, Vec<NodeId>> = HashMap::new();
        for p in state.members(group) {
            if p.terminating && failed_ids.contains(&p.node) {
                continue;
            }
            if let Some(name) = p.pod_set.resolve(&names) {
                bound.entry(name).or_default().push(p.node);
            }
        }
        // Pods lost on nodes that did not fail go back there: no seat is planned for them.
        let mut kept: HashMap<&str, i32> = HashMap::new();
        if !failed.is_empty() {
            for d in state.departed(group) {
                if !failed_ids.contains(&d.node)
                    && let Some(name) = d.pod_set.resolve(&names)
                {
                    *kept.entry(name).or_default() += 1;
                }
            }
        }
        // Part of the workload holds capacity already: what is planned now replaces lost pods
        // (a node failed) or completes the workload after a restart, beside them.
        let running = bound.values().map(Vec::len).sum::<usize>();
        let mut made: Vec<(PlanKey, Plan)> = Vec::new();
        for indices in placement_units(routed) {
            let mut unit = Unit {
                group,
                members: Vec::new(),
                bound: &bound,
                kept: &kept,
                anchors: Vec::new(),
                asking: &routed.pod_set,
                workload_pod_sets: routed.pod_sets.len(),
            };
            for p in indices.iter().map(|&i| &routed.pod_sets[i]) {
                let name = p.spec.name.as_str();
                unit.anchors
                    .extend(bound.get(name).into_iter().flatten().copied());
                let key = PlanKey {
                    group: group.clone(),
                    pod_set: name.to_string(),
                };
                match self.plans.get(&key) {
                    // A PodSet of the unit planned already: the rest joins its seats' domain.
                    Some(plan) => unit
                        .anchors
                        .extend(plan.seats.iter().map(|seat| plan.node_id(seat))),
                    None => unit.members.push(p),
                }
            }
            let outcome = self.plan_unit(state, &unit, now, owner);
            match outcome {
                Ok(plans) => {
                    for (_, plan) in &plans {
                        for seat in &plan.seats {
                            self.held.hold(plan.node_id(seat), &plan.requests, plan.id);
                        }
                    }
                    made.extend(plans);
                }
                Err(failure) => {
                    self.release_all(&made);
                    // A replacement for failed nodes is tried once with FailFast: the workload
                    // is given up (Kueue evicts it), until its pods are gone.
                    let given_up =
                        owner.is_some() && !failed.is_empty() && self.gates.enabled(GATE_FAIL_FAST);
                    let mut reason = format!(
                        "node(s) cannot take {} ({} pods): {}",
                        failure.key, failure.pods, failure.message
                    );
                    if given_up {
                        reason = format!(
                            "{reason}; there was no replacement for unhealthy node(s): {} \
                             (TASFailedNodeReplacementFailFast: not tried again while pods of \
                             {group} run)",
                            node_names(failed)
                        );
                    }
                    let rejection = Rejection {
                        reason: reason.into(),
                        unresolvable: failure.unresolvable || given_up,
                    };
                    PlanCounters::bump(&self.counters.groups_not_fit);
                    if let Some(owner) = owner {
                        let (reason, note) = if running > 0 {
                            PlanCounters::bump(&self.counters.replacements_failed);
                            (
                                "TopologyReplacementFailed",
                                format!(
                                    "{}{running} pod(s) of {group} run; the rest has no room in \
                                     their domain: {}",
                                    describe_failed(failed),
                                    rejection.reason
                                ),
                            )
                        } else {
                            ("TopologyDoesNotFit", rejection.reason.to_string())
                        };
                        self.notice(owner, true, reason, note);
                    }
                    self.failures.insert(
                        group.clone(),
                        Failure {
                            stamp,
                            given_up,
                            message: failure.message,
                            rejection: rejection.clone(),
                        },
                    );
                    return Err(rejection);
                }
            }
        }
        let Some(owner) = owner else {
            self.release_all(&made);
            return Ok(());
        };
        let note = made
            .iter()
            .map(|(key, plan)| {
                format!(
                    "{} pod(s) of {key} in {} (ResourceFlavor {})",
                    plan.seats.len(),
                    describe_plan(plan),
                    plan.flavor.name
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        for (key, plan) in made {
            self.plans.insert(key, plan);
            PlanCounters::bump(&self.counters.plans_made);
        }
        self.failures.remove(group);
        if !note.is_empty() {
            if running > 0 {
                PlanCounters::bump(&self.counters.replacements_placed);
                self.notice(
                    owner,
                    false,
                    "TopologyReplacementPlanned",
                    format!(
                        "{}{running} pod(s) of {group} run; planned beside them {note}",
                        describe_failed(failed)
                    ),
                );
            } else {
                self.notice(owner, false, "TopologyPlanned", format!("planned {note}"));
            }
        }
        Ok(())
    }

    /// Gives back the holds of plans made but not kept.
    fn release_all(&mut self, made: &[(PlanKey, Plan)]) {
        for (_, plan) in made {
            for seat in &plan.seats {
                self.held
                    .release(plan.node_id(seat), &plan.requests, plan.id);
            }
        }
    }

    /// Places one unit (one PodSet, or workers and their leader) on current free capacity
    /// (usage, every hold, the earlier units of this workload), inside the domain of its
    /// anchors. The plans come back without holds.
    fn plan_unit(
        &mut self,
        state: &ClusterState,
        unit: &Unit<'_>,
        now: Instant,
        owner: Option<&ObjectReference>,
    ) -> Result<Vec<(PlanKey, Plan)>, UnitFailure> {
        let Unit {
            group,
            bound,
            asking,
            ..
        } = *unit;
        // PodSets of size 0 get no placement (Kueue skips them).
        let mut members: Vec<&RoutedPodSet> = unit
            .members
            .iter()
            .copied()
            .filter(|p| p.spec.count > 0)
            .collect();
        let Some(first) = members.first() else {
            return Ok(Vec::new());
        };
        let key_of = |p: &RoutedPodSet| PlanKey {
            group: group.clone(),
            pod_set: p.spec.name.clone(),
        };
        let flavor_name = first.flavor.clone();
        let Some(flavor) = state.flavor(&flavor_name) else {
            return Err(UnitFailure {
                key: key_of(first),
                pods: first.spec.count,
                message: format!("ResourceFlavor {flavor_name:?} has no Topology"),
                unresolvable: true,
            });
        };
        // Workers first, leader second; the larger one is the workers (on a tie the second is
        // the leader).
        if members.len() == 2 && members[1].spec.count > members[0].spec.count {
            members.swap(0, 1);
        }
        let tree = &flavor.tree;
        let workers = members[0];
        let level = workers
            .spec
            .topology
            .as_ref()
            .and_then(|t| t.required.as_ref().or(t.preferred.as_ref()))
            .and_then(|l| tree.level_index(l));
        let bound_leaves = |p: &RoutedPodSet| -> Vec<DomainIdx> {
            bound
                .get(p.spec.name.as_str())
                .into_iter()
                .flatten()
                .filter_map(|&id| state.node(id))
                .filter_map(|n| tree.leaf_of_node(&n.name))
                .collect()
        };
        let anchors: Vec<DomainIdx> = unit
            .anchors
            .iter()
            .filter_map(|&id| state.node(id))
            .filter_map(|n| tree.leaf_of_node(&n.name))
            .collect();
        let mut within = if anchors.is_empty() {
            None
        } else {
            level.and_then(|l| common_ancestor(tree, &anchors, l))
        };
        // What is left to place of each PodSet: the pods not holding capacity yet; the PodSet of
        // the pod that asks gets at least its seat (a replacement).
        let remaining = |p: &RoutedPodSet| -> i32 {
            let kept = unit.kept.get(p.spec.name.as_str()).copied().unwrap_or(0);
            let left = p.spec.count - bound_leaves(p).len() as i32 - kept;
            if p.spec.name == asking {
                left.max(1)
            } else {
                left.max(0)
            }
        };
        let mut requests: Vec<PodSetSpec> = Vec::new();
        for p in &members {
            let mut spec = p.spec.clone();
            let left = remaining(p);
            if left != spec.count {
                spec.count = left;
                // The rest of a sliced PodSet that broke a slice: Kueue's replacement domain
                // (the incomplete slice's domain) and request.
                if let Some(domain) = broken_slice_domain(tree, &anchors, &mut spec) {
                    within = Some(domain);
                }
                if let Some(t) = &mut spec.topology
                    && t.slice_layers
                        .first()
                        .is_some_and(|s| s.size > 0 && spec.count % s.size != 0)
                {
                    t.slice_layers.clear();
                }
            }
            requests.push(spec);
        }
        // A leader already placed leaves only the workers; workers all placed leave the leader
        // to be placed alone.
        let (workers_req, leader_req, workers_set, leader_set) =
            match (requests.len(), &requests[..]) {
                (2, [w, l]) if w.count > 0 && l.count > 0 => {
                    (w, Some(l), members[0], Some(members[1]))
                }
                (2, [w, l]) if w.count == 0 => (l, None, members[1], None),
                (_, [w, ..]) => (w, None, members[0], None),
                _ => return Ok(Vec::new()),
            };
        if workers_req.count == 0 {
            return Ok(Vec::new());
        }
        let free = self.free_capacity(state, &flavor);
        let ctx = PlacementContext {
            tree,
            free: &free,
            gates: &self.gates,
            flavor_name: &flavor_name,
            flavor_tolerations: &flavor.tolerations,
        };
        let request = GroupRequest {
            workers: workers_req,
            leader: leader_req,
            within,
        };
        let started = Instant::now();
        let outcome = place_group(&ctx, &request);
        tracing::info!(
            group = %key_of(workers_set),
            pods = workers_req.count + leader_req.map_or(0, |l| l.count),
            place_ms = started.elapsed().as_secs_f64() * 1e3,
            fits = outcome.is_ok(),
            "group planned"
        );
        let placement = match outcome {
            Ok(p) => p,
            Err(not_fit) => {
                // Would it fit on an empty cluster? Then freeing capacity (preemption) may
                // help; otherwise it never will.
                let allocatable = state.allocatable(&flavor);
                let fits_empty = place_group(
                    &PlacementContext {
                        free: &allocatable,
                        ..ctx
                    },
                    &request,
                )
                .is_ok();
                // Holds of other groups' plans in the way are said after Kueue's words.
                let mut message = not_fit.message.clone();
                if let Some(note) = self.held_note(state, group, &flavor, &ctx, &request, &not_fit)
                {
                    message = format!("{message}; {note}");
                }
                return Err(UnitFailure {
                    key: key_of(workers_set),
                    pods: workers_set.spec.count + leader_set.map_or(0, |l| l.spec.count),
                    message,
                    unresolvable: !fits_empty,
                });
            }
        };
        let owner = owner.cloned().unwrap_or_default();
        let mut plans = Vec::new();
        let mut add = |set: &RoutedPodSet, assignment: &Assignment, this: &mut Self| {
            let mut plan = Plan::new(
                flavor.clone(),
                set.spec.clone(),
                level,
                now,
                owner.clone(),
                usize::try_from(set.pods_per_replica).unwrap_or(1).max(1),
                unit.workload_pod_sets,
            );
            for &(leaf, count) in &assignment.domains {
                for _ in 0..count {
                    let member = this.member_with_room(state, &flavor, leaf, &plan);
                    plan.seats.push(Seat {
                        leaf,
                        member,
                        holder: Holder::Open,
                    });
                    // Held at once so the next seat sees it; given back below, and held again
                    // by the caller with the rest of the workload.
                    this.held
                        .hold(flavor.member_ids[member], &plan.requests, plan.id);
                }
            }
            plans.push((key_of(set), plan));
        };
        add(workers_set, &placement.workers, self);
        if let (Some(leader_set), Some(leader)) = (leader_set, &placement.leader) {
            add(leader_set, leader, self);
        }
        for (_, plan) in &plans {
            for seat in &plan.seats {
                self.held
                    .release(plan.node_id(seat), &plan.requests, plan.id);
            }
        }
        Ok(plans)
    }

    /// A node of `leaf` for one more seat of `plan`: the first with room once usage and holds
    /// are counted, else the leaf's first.
    fn member_with_room(
        &self,
        state: &ClusterState,
        flavor: &FlavorTopology,
        leaf: DomainIdx,
        plan: &Plan,
    ) -> usize {
        let members = flavor.tree.leaf_members(leaf);
        members
            .iter()
            .copied()
            .find(|&m| {
                let id = flavor.member_ids[m];
                state.room_for(id, self.held.at(id), &plan.requests)
            })
            .or_else(|| members.first().copied())
            .unwrap_or_default()
    }

    /// The seat's node(s) among the candidates.
    fn seat_filter(
        &mut self,
        state: &ClusterState,
        key: &PlanKey,
        facts: &PodFacts,
        candidates: &[&str],
        now: Instant,
    ) -> FilterVerdict {
        let Some(plan) = self.plans.get_mut(key) else {
            return FilterVerdict::Invalid(format!("no plan for {key}"));
        };
        plan.touched = now;
        let rank = facts.pod_set.rank(
            &key.pod_set,
            facts.completion_index,
            facts.job_index,
            plan.pods_per_replica,
        );
        let mut reopened = 0;
        if !plan.by_uid.contains_key(&facts.uid) {
            reopened += u64::from(hand_over_predecessor_seat(
                plan, &self.pods, state, facts, rank, false,
            ));
        }
        let mut taken = plan.take_seat(&facts.uid, rank);
        if taken.is_none() {
            // Every seat is someone's: some may be pods gone (scans, only then).
            reopened += u64::from(hand_over_predecessor_seat(
                plan, &self.pods, state, facts, rank, true,
            ));
            reopened += reopen_vanished_seats(plan, &self.pods, state, key, &facts.uid, now);
            taken = plan.take_seat(&facts.uid, rank);
        }
        PlanCounters::add(&self.counters.seats_reopened, reopened);
        let seat = match taken {
            Some(s) => s,
            None => match self.extra_seat(state, key, &facts.uid) {
                Ok(s) => s,
                Err(rejection) => {
                    return FilterVerdict::Only {
                        seat: false,
                        pass: Vec::new(),
                        rejected: rejection,
                    };
                }
            },
        };
        self.seat_verdict(key, seat, candidates)
    }

    /// Only the node(s) of seat `seat` of plan `key` pass.
    fn seat_verdict(&self, key: &PlanKey, seat: usize, candidates: &[&str]) -> FilterVerdict {
        let plan = &self.plans[key];
        let nodes = seat_nodes(plan, &plan.seats[seat]);
        let place = describe_seat(plan, &plan.seats[seat]);
        let pass = positions(candidates, &nodes);
        let reason = if pass.is_empty() {
            format!(
                "node(s) outside {place} planned for {key} (the seat's node(s) {} were not \
                 among the scheduler's candidates: check their taints, free resources and the \
                 pod's nodeSelector)",
                nodes.join(", ")
            )
        } else {
            format!("node(s) outside {place} planned for {key}")
        };
        FilterVerdict::Only {
            seat: true,
            pass,
            rejected: Rejection {
                reason: reason.into(),
                unresolvable: true,
            },
        }
    }

    /// One more seat for a PodSet whose seats are all taken (a pod made in place of one that
    /// took a seat and went away before it was bound): inside the plan's domain, on capacity
    /// nobody holds, on a node the PodSet's pods may use (their tolerations, nodeSelector and
    /// node affinity, as the plan was placed).
    fn extra_seat(
        &mut self,
        state: &ClusterState,
        key: &PlanKey,
        uid: &str,
    ) -> Result<usize, Rejection> {
        let plan = &self.plans[key];
        let flavor = plan.flavor.clone();
        let requests = plan.requests.clone();
        let within = plan.domain();
        // One pod anywhere inside the plan's domain: the domain already carries the request's
        // level, and a single pod breaks no slice.
        let one = PodSetSpec {
            count: 1,
            requests: requests.clone(),
            topology: Some(TopologyRequest {
                unconstrained: Some(true),
                ..Default::default()
            }),
            implied: false,
            ..plan.template.clone()
        };
        let free = self.free_capacity(state, &flavor);
        let ctx = PlacementContext {
            tree: &flavor.tree,
            free: &free,
            gates: &self.gates,
            flavor_name: &flavor.name,
            flavor_tolerations: &flavor.tolerations,
        };
        let request = GroupRequest {
            workers: &one,
            leader: None,
            within,
        };
        let placed = place_group(&ctx, &request);
        let Some((leaf, _)) = placed.ok().and_then(|p| p.workers.domains.first().copied()) else {
            return Err(Rejection {
                reason: self
                    .no_extra_seat(state, key, &flavor, &ctx, &request)
                    .into(),
                unresolvable: false,
            });
        };
        let member = self.member_with_room(state, &flavor, leaf, &self.plans[key]);
        let Some(plan) = self.plans.get_mut(key) else {
            return Err(Rejection {
                reason: format!("node(s) lost the plan for {key}").into(),
                unresolvable: false,
            });
        };
        self.held
            .hold(flavor.member_ids[member], &requests, plan.id);
        plan.seats.push(Seat {
            leaf,
            member,
            holder: Holder::Taken(uid.to_string()),
        });
        let s = plan.seats.len() - 1;
        plan.by_uid.insert(uid.to_string(), s);
        Ok(s)
    }

    /// A pod with no group: any candidate, except where plans hold the room it needs. A node
    /// it would fit but for the holds is turned down naming the plans that hold it (one reason
    /// for all such nodes, so the scheduler's tally stays one line); a node it would not fit
    /// even without them is turned down without blaming them.
    fn lone_filter(
        &mut self,
        state: &ClusterState,
        facts: &PodFacts,
        candidates: &[&str],
    ) -> FilterVerdict {
        let mut rejected = Vec::new();
        if self.held.is_empty() {
            return FilterVerdict::Except { rejected };
        }
        // The tails sift the candidates only when fewer nodes are held than candidates asked
        // about: made anew, they then cost less than the look-ups they spare. With more held
        // (a gang over most of the cluster, its pods bound one by one), each candidate is
        // looked up, and no request pays for every held node.
        let sift = self.held.node_count() < candidates.len();
        let held_nodes = (self.held.nodes_version(), state.topology_generation());
        if sift && self.held_tails.0 != held_nodes {
            let tails = self
                .held
                .nodes()
                .filter_map(|id| state.name_of(id))
                .map(tail)
                .collect();
            self.held_tails = (held_nodes, tails);
        }
        let mut held_back: Vec<(usize, NodeId)> = Vec::new();
        let mut full: Vec<usize> = Vec::new();
        for (i, name) in candidates.iter().enumerate() {
            if sift && !self.held_tails.1.contains(&tail(name)) {
                continue;
            }
            let Some(id) = state.node_id(name) else {
                continue;
            };
            let Some(held) = self.held.at(id) else {
                continue;
            };
            match state.room_with_and_without(id, Some(held), &facts.requests) {
                (true, _) => {}
                (false, true) => held_back.push((i, id)),
                (false, false) => full.push(i),
            }
        }
        if !held_back.is_empty() {
            let nodes: Vec<NodeId> = held_back.iter().map(|&(_, id)| id).collect();
            let reason = Rejection {
                reason: format!(
                    "node(s) have their free capacity {}",
                    self.holders_on(&nodes)
                )
                .into(),
                unresolvable: false,
            };
            rejected.extend(held_back.iter().map(|&(i, _)| (i, reason.clone())));
        }
        if !full.is_empty() {
            let reason = Rejection {
                reason: "node(s) have no room for the pod once the pods bound to them are counted"
                    .into(),
                unresolvable: false,
            };
            rejected.extend(full.into_iter().map(|i| (i, reason.clone())));
        }
        rejected.sort_by_key(|(i, _)| *i);
        FilterVerdict::Except { rejected }
    }

    /// Expires plans idle for longer than the TTL (at most once a second) and forgets pods
    /// seen long ago that never bound.
    fn sweep(&mut self, state: &ClusterState, now: Instant) {
        if self.last_sweep.is_some_and(|t| {
            now.saturating_duration_since(t) < Duration::from_secs(1).min(self.ttl)
        }) {
            return;
        }
        self.last_sweep = Some(now);
        let ttl = self.ttl;
        // A plan of a group Kueue manages now is released when a pod of the group asks; this
        // releases it when none asks again (its pods bound elsewhere, a bind that was in flight
        // ended).
        self.release_plans(|k| state.kueue_manages(&k.group), Released::ToKueue);
        // The PodSets of one workload expire together: a pod of any of them keeps them all.
        let mut latest: HashMap<&GroupKey, Instant> = HashMap::new();
        for (key, plan) in &self.plans {
            let t = latest.entry(&key.group).or_insert(plan.touched);
            *t = (*t).max(plan.touched);
        }
        let stale: Vec<PlanKey> = self
            .plans
            .iter()
            .filter(|(k, _)| now.saturating_duration_since(latest[&k.group]) >= ttl)
            .filter(|(_, p)| !p.binding_in_flight())
            // A workload of several PodSets that runs in part (a driver up, its workers to
            // come, as JobSet's InOrder start) keeps the rest of its plan, as Kueue keeps an
            // admitted workload's assignment.
            .filter(|(k, p)| p.workload_pod_sets <= 1 || state.members(&k.group).next().is_none())
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            let Some(plan) = self.remove_plan(&key) else {
                continue;
            };
            PlanCounters::bump(&self.counters.plans_expired);
            tracing::info!(group = %key, "plan expired: its pods did not come");
            let open = plan
                .seats
                .iter()
                .filter(|s| s.holder == Holder::Open)
                .count();
            self.notice(
                &plan.owner,
                true,
                "TopologyPlanExpired",
                format!(
                    "the plan for {key} expired after {}s without its pods: {open} seat(s) never \
                     taken were given back; the group is planned anew when its pods come",
                    ttl.as_secs()
                ),
            );
        }
        // A pod waiting with a seat in a live plan (kube-scheduler may hold it in Permit while
        // the rest of its gang arrives) must still be able to bind. A bound pod is kept for a
        // TTL after its bind (a retried bind is answered as done, a bind elsewhere refused),
        // or while its plan lives; after that the API server holds its node (a second
        // Binding is refused there) and the cluster state its usage, so the book lets it go:
        // kept for ever, every pod bound in a leader's term would stay in memory.
        let plans = &self.plans;
        self.pods.retain(|uid, p| {
            p.binding.is_some()
                || now.saturating_duration_since(p.seen) < ttl
                || plans
                    .get(&p.key)
                    .is_some_and(|plan| plan.by_uid.contains_key(uid))
        });
        // A workload given up on (FailFast) is planned anew once its pods are gone.
        self.failures
            .retain(|group, f| !f.given_up || state.members(group).next().is_some());
        if self.failures.len() > 10_000 {
            self.failures.clear();
        }
        if self.scheduling_noticed.len() > 10_000 {
            self.scheduling_noticed.clear();
        }
        if self.scheduling_memo.len() > 10_000 {
            self.scheduling_memo.clear();
        }
        self.publish();
    }
}

/// `n1,n2` (Kueue's list of unhealthy nodes).
fn node_names(failed: &[FailedNode]) -> String {
    failed
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// `node n1 failed for the group (the node is NotReady); ` (empty without failed nodes).
fn describe_failed(failed: &[FailedNode]) -> String {
    failed
        .iter()
        .map(|f| format!("node {} failed for the group ({}); ", f.name, f.cause))
        .collect()
}

/// The plan key of a group's only PodSet.
fn main_key(group: &GroupKey) -> PlanKey {
    PlanKey {
        group: group.clone(),
        pod_set: MAIN_POD_SET.to_string(),
    }
}

/// A workload's PodSets (indices into `routed.pod_sets`) in the order Kueue places them:
/// flavors by name; in a flavor, the PodSets sharing a `podset-group-name` as one unit (at the
/// place of the first), each other PodSet a unit of its own, in the workload's order.
fn placement_units(routed: &RoutedWorkload) -> Vec<Vec<usize>> {
    let mut flavors: Vec<&str> = routed.pod_sets.iter().map(|p| p.flavor.as_str()).collect();
    flavors.sort_unstable();
    flavors.dedup();
    let mut units: Vec<Vec<usize>> = Vec::new();
    for flavor in flavors {
        let mut named: Vec<(&str, usize)> = Vec::new();
        for (i, p) in routed.pod_sets.iter().enumerate() {
            if p.flavor != flavor {
                continue;
            }
            let group = p
                .spec
                .topology
                .as_ref()
                .and_then(|t| t.group_name.as_deref());
            match group.and_then(|g| named.iter().find(|(n, _)| *n == g)) {
                Some(&(_, unit)) => units[unit].push(i),
                None => {
                    if let Some(g) = group {
                        named.push((g, units.len()));
                    }
                    units.push(vec![i]);
                }
            }
        }
    }
    units
}

/// Where the rest of a sliced PodSet goes when its missing pods (`spec.count` of them) broke
/// a slice, as Kueue's replacement picks it (tas-semantics §4.3, steps 3 and 4): the layer is
/// the innermost whose size the count does not divide (the outer one with a single layer); the
/// domain is the first, in topology order, of that layer's domains holding the pods already
/// placed (`anchors`, one leaf per pod or seat) whose pods plus the missing ones fill whole
/// slices. The request is rewritten to the innermost layer whose size divides the count (no
/// slices when none does). `None` (request unchanged) when no slice is broken or no domain
/// completes one.
fn broken_slice_domain(
    tree: &TopologyTree,
    anchors: &[DomainIdx],
    spec: &mut PodSetSpec,
) -> Option<DomainIdx> {
    let count = spec.count;
    let layers = &spec.topology.as_ref()?.slice_layers;
    let outer = layers.first().filter(|l| l.size > 0)?;
    if count % outer.size == 0 {
        return None;
    }
    let layer = match layers.len() {
        1 => outer,
        _ => layers
            .iter()
            .rev()
            .find(|l| l.size > 0 && count % l.size != 0)
            .unwrap_or(outer),
    };
    let level = tree.level_index(&layer.level)?;
    let mut placed: BTreeMap<DomainIdx, i32> = BTreeMap::new();
    for &leaf in anchors {
        *placed.entry(tree.ancestor_at(leaf, level)).or_insert(0) += 1;
    }
    let mut domains: Vec<(DomainIdx, i32)> = placed.into_iter().collect();
    domains.sort_by(|a, b| cmp_values(tree, a.0, b.0));
    let domain = domains
        .into_iter()
        .find(|&(_, pods)| (pods + count) % layer.size == 0)?
        .0;
    let divides = layers
        .iter()
        .rev()
        .find(|l| l.size > 0 && count % l.size == 0)
        .cloned();
    if let Some(t) = &mut spec.topology {
        t.slice_layers = divides.into_iter().collect();
    }
    Some(domain)
}

/// The domain at `level` holding every leaf, if there is one.
fn common_ancestor(tree: &TopologyTree, leaves: &[DomainIdx], level: usize) -> Option<DomainIdx> {
    let mut it = leaves.iter().map(|&l| tree.ancestor_at(l, level));
    let first = it.next()?;
    it.all(|d| d == first).then_some(first)
}

/// The nodes a seat stands for: its node in hostname-lowest trees, every node of its leaf
/// otherwise.
fn seat_nodes<'a>(plan: &'a Plan, seat: &'a Seat) -> Vec<&'a str> {
    let tree = &plan.flavor.tree;
    if tree.hostname_lowest {
        return vec![tree.nodes[seat.member].name.as_str()];
    }
    tree.leaf_members(seat.leaf)
        .iter()
        .map(|&m| tree.nodes[m].name.as_str())
        .collect()
}

/// Where a plan sits: `rack r3` when every seat shares one domain at the requested level,
/// else the number of lowest-level domains it spans.
fn describe_plan(plan: &Plan) -> String {
    match (plan.domain(), plan.seats.first()) {
        (Some(_), Some(seat)) => describe_seat(plan, seat),
        _ => {
            let mut leaves: Vec<DomainIdx> = plan.seats.iter().map(|s| s.leaf).collect();
            leaves.sort_unstable();
            leaves.dedup();
            format!("{} domain(s)", leaves.len())
        }
    }
}

/// `rack r3` / `host n7`: the seat's domain at the plan's level (or its own leaf) by the
/// level's short name.
fn describe_seat(plan: &Plan, seat: &Seat) -> String {
    let tree = &plan.flavor.tree;
    let d = match plan.level {
        Some(l) => tree.ancestor_at(seat.leaf, l),
        None => seat.leaf,
    };
    holders::describe_domain(tree, d)
}

/// A level's short name: `cloud.provider.com/topology-rack` → `rack`, the hostname → `host`.
pub fn level_noun(label: &str) -> String {
    if label == keys::HOSTNAME_LABEL {
        return "host".to_string();
    }
    let last = label.rsplit('/').next().unwrap_or(label);
    last.strip_prefix("topology-").unwrap_or(last).to_string()
}

/// Indices of the candidates named in `wanted`.
fn positions(candidates: &[&str], wanted: &[&str]) -> Vec<usize> {
    let wanted: Vec<(&str, u64)> = wanted.iter().map(|w| (*w, tail(w))).collect();
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            wanted
                .iter()
                .any(|(w, t)| c.len() == w.len() && tail(c) == *t && *c == w)
        })
        .map(|(i, _)| i)
        .collect()
}

/// The last eight bytes of a name (fewer, zero-padded, for a shorter one): node names of one
/// pool share a long prefix and differ at the end, so comparing tails first lets a scan of
/// thousands of candidates for one seat skip the full comparison almost always.
fn tail(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let mut word = [0u8; 8];
    let from = bytes.len().saturating_sub(8);
    word[..bytes.len() - from].copy_from_slice(&bytes[from..]);
    u64::from_le_bytes(word)
}

/// Only the node a pod is bound to passes.
fn bound_verdict(candidates: &[&str], node: &str) -> FilterVerdict {
    only(
        candidates,
        &[node],
        format!("node(s) other than {node}, where the pod is bound"),
    )
}

/// A pod asked about again while its Binding is written (a scheduler that stopped waiting
/// for the bind): that node, or none; the bind's end says which.
fn binding_verdict(candidates: &[&str], node: &str) -> FilterVerdict {
    only(
        candidates,
        &[node],
        format!("node(s) other than {node}, where the pod is being bound"),
    )
}

/// Only the candidates named in `allowed` pass.
fn only(candidates: &[&str], allowed: &[&str], reason: String) -> FilterVerdict {
    FilterVerdict::Only {
        seat: true,
        pass: positions(candidates, allowed),
        rejected: Rejection {
            reason: reason.into(),
            unresolvable: true,
        },
    }
}
