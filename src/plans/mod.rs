//! Plans and seats: which capacity each pod group holds, and which seat each pod takes.
//!
//! No HTTP here: the extender is the first door that asks for plans, not the only one.
//!
//! * The first pod of a group that asks triggers a **plan** for the whole group, computed by
//!   the placement engine on free capacity: allocatable minus bound pods minus what other
//!   plans hold. A group that does not fit gets no plan; the failure is remembered until
//!   capacity is given back (the book's generation moves), so repeated calls are cheap.
//! * A plan is a list of **seats** in topology order (one per pod: a node in hostname-lowest
//!   trees, a lowest-level domain otherwise). A pod's seat is fixed at its first call and the
//!   same on every later call; completion index `i` takes seat `i` when it is open, so ranks
//!   that talk most sit side by side.
//! * Open and taken seats **hold** capacity ([`held`]); binding turns a seat into usage on its
//!   node; a plan whose pods stop coming for the TTL **expires** and gives its open seats back.
//! * A plan is **rebuilt from the cluster**: bound pods of the group are usage, and the pods
//!   still to come are planned inside the domain the bound ones sit in. A restart therefore
//!   loses nothing and double-books nothing.
//!
//! Lock-free by design: the book is one value behind the caller's lock; every method runs to
//! completion, so no request sees a half-made plan.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Toleration};

use crate::admission::{self, Denial};
use crate::cluster::{
    BoundPod, Cluster, Workload, WorkloadKind, workload_of_pod, workload_of_stamped_job_pod,
};
use crate::keys;
use crate::topology::capacity::FreeCapacity;
use crate::topology::placement::{GroupRequest, PlacementContext, place_group};
use crate::topology::resources::{PODS, add_pod_usage};
use crate::topology::tree::{DomainIdx, TopologyTree};
use crate::topology::{FeatureGates, PodSetSpec, ResourceList};

mod group;
mod held;
#[cfg(test)]
mod tests;

pub use group::{GroupKey, PodFacts};
pub use held::{HeldAt, HeldCapacity};

/// Counters and gauges the server exports.
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
}

/// A ResourceFlavor's topology tree, built once per cluster view and shared.
#[derive(Debug)]
pub struct FlavorTopology {
    /// The ResourceFlavor's name.
    pub name: String,
    /// Its domain tree.
    pub tree: TopologyTree,
    /// Its tolerations.
    pub tolerations: Vec<Toleration>,
}

impl FlavorTopology {
    /// Builds the tree of ResourceFlavor `name` over the cluster's nodes; `None` when the
    /// flavor or its Topology does not exist.
    pub fn build(cluster: &Cluster, name: &str) -> Option<Self> {
        let rf = cluster.resource_flavors.get(name)?;
        let topology_name = rf.spec.topology_name.clone()?;
        let topology = cluster.topologies.get(&topology_name)?;
        let levels: Vec<String> = topology
            .spec
            .levels
            .iter()
            .map(|l| l.node_label.clone())
            .collect();
        let started = Instant::now();
        let tree = TopologyTree::build(
            &topology_name,
            &levels,
            &rf.spec.node_labels,
            &cluster.nodes,
        );
        tracing::info!(
            flavor = name,
            leaves = tree.leaves().len(),
            build_ms = started.elapsed().as_secs_f64() * 1e3,
            "topology tree built"
        );
        Some(Self {
            name: name.to_string(),
            tree,
            tolerations: rf.spec.tolerations.clone(),
        })
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
    },
    /// Every candidate passes except these.
    Except {
        /// Turned-down candidates with their reasons.
        rejected: Vec<(usize, Rejection)>,
    },
    /// The request cannot be decided (a malformed pod, a Job kube-tas does not know).
    Invalid(String),
}

/// Why a bind was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BindError(pub String);

/// A plan that did not fit, remembered until capacity is given back.
#[derive(Debug, Clone)]
struct Failure {
    generation: u64,
    /// The engine's words (Kueue's message).
    message: String,
    rejection: Rejection,
}

/// Who sits in a seat.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    Open,
    Taken(String),
    Bound(String),
}

/// One pod's place in a plan.
#[derive(Debug, Clone)]
struct Seat {
    leaf: DomainIdx,
    /// The node, in hostname-lowest trees.
    node: Option<String>,
    holder: Holder,
}

/// A group's plan.
#[derive(Debug, Clone)]
struct Plan {
    flavor: Arc<FlavorTopology>,
    /// One pod's requests (the group's template).
    requests: ResourceList,
    /// The level the request names (required or preferred), for extra seats and messages.
    level: Option<usize>,
    seats: Vec<Seat>,
    by_uid: HashMap<String, usize>,
    touched: Instant,
}

impl Plan {
    fn held_at(&self, seat: &Seat) -> HeldAt {
        match &seat.node {
            Some(n) => HeldAt::Node(n.clone()),
            None => HeldAt::Leaf(self.flavor.name.clone(), seat.leaf),
        }
    }

    /// The seat of `uid`, taking one when it has none: seat `index` when open, else the
    /// first open seat.
    fn take_seat(&mut self, uid: &str, index: Option<usize>) -> Option<usize> {
        if let Some(&s) = self.by_uid.get(uid) {
            return Some(s);
        }
        let open = |s: &Seat| s.holder == Holder::Open;
        let chosen = index
            .filter(|&i| self.seats.get(i).is_some_and(open))
            .or_else(|| self.seats.iter().position(open))?;
        self.seats[chosen].holder = Holder::Taken(uid.to_string());
        self.by_uid.insert(uid.to_string(), chosen);
        Some(chosen)
    }

    /// The domain every seat shares at the request's level, if they share one.
    fn domain(&self) -> Option<DomainIdx> {
        let level = self.level?;
        let tree = &self.flavor.tree;
        let mut seats = self.seats.iter().map(|s| tree.ancestor_at(s.leaf, level));
        let first = seats.next()?;
        seats.all(|d| d == first).then_some(first)
    }

    fn complete(&self) -> bool {
        self.seats
            .iter()
            .all(|s| matches!(s.holder, Holder::Bound(_)))
    }
}

/// A pod kube-tas has seen in `filter` (what `bind` needs to record it).
#[derive(Debug, Clone)]
struct SeenPod {
    group: GroupKey,
    requests: ResourceList,
    bound_to: Option<String>,
    seen: Instant,
}

/// How a pod is to be placed.
enum Route {
    /// Not a TAS pod: anywhere, but off capacity plans hold.
    Lone,
    /// The webhook would refuse it.
    Denied(Denial),
    /// Placed with its group on this flavor.
    Group {
        flavor: String,
        spec: Box<PodSetSpec>,
    },
}

/// Every plan and seat, over one cluster view.
pub struct PlanBook {
    cluster: Cluster,
    gates: FeatureGates,
    ttl: Duration,
    node_index: HashMap<String, usize>,
    /// Per node (as `cluster.nodes`): requests of bound pods plus their `pods` slots.
    used: Vec<ResourceList>,
    flavors: BTreeMap<String, Arc<FlavorTopology>>,
    plans: HashMap<GroupKey, Plan>,
    held: HeldCapacity,
    pods: HashMap<String, SeenPod>,
    failures: HashMap<GroupKey, Failure>,
    /// Moves whenever capacity is given back; failures of older generations are stale.
    generation: u64,
    last_sweep: Option<Instant>,
    stats: PlanStats,
}

impl PlanBook {
    /// A book over `cluster`; plans idle for `ttl` expire.
    pub fn new(cluster: Cluster, gates: FeatureGates, ttl: Duration) -> Self {
        let node_index: HashMap<String, usize> = cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let mut used = vec![ResourceList::new(); cluster.nodes.len()];
        for p in &cluster.bound_pods {
            if let Some(&i) = node_index.get(&p.node_name) {
                add_pod_usage(&mut used[i], &p.requests);
            }
        }
        Self {
            cluster,
            gates,
            ttl,
            node_index,
            used,
            flavors: BTreeMap::new(),
            plans: HashMap::new(),
            held: HeldCapacity::default(),
            pods: HashMap::new(),
            failures: HashMap::new(),
            generation: 0,
            last_sweep: None,
            stats: PlanStats::default(),
        }
    }

    /// The cluster view, with every bind recorded so far.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The feature gates in force.
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// Counters and gauges.
    pub fn stats(&self) -> PlanStats {
        PlanStats {
            plans_active: self.plans.len() as u64,
            seats_held: self.held.seats(),
            ..self.stats
        }
    }

    /// Requests of bound pods (plus their `pods` slots) on a node, by name.
    pub fn node_usage(&self, node: &str) -> Option<&ResourceList> {
        self.node_index.get(node).map(|&i| &self.used[i])
    }

    /// The engine's message for a group whose plan did not fit (Kueue's words).
    pub fn group_failure(&self, group: &GroupKey) -> Option<&str> {
        self.failures.get(group).map(|f| f.message.as_str())
    }

    /// A flavor's tree, built on first use.
    pub fn flavor(&mut self, name: &str) -> Option<Arc<FlavorTopology>> {
        if let Some(f) = self.flavors.get(name) {
            return Some(f.clone());
        }
        let f = Arc::new(FlavorTopology::build(&self.cluster, name)?);
        self.flavors.insert(name.to_string(), f.clone());
        Some(f)
    }

    /// Where `pod` may go among `candidates` (node names, as the scheduler sent them).
    pub fn filter(&mut self, pod: &Pod, candidates: &[&str], now: Instant) -> FilterVerdict {
        self.sweep(now);
        let facts = match PodFacts::of(pod) {
            Ok(f) => f,
            Err(e) => return FilterVerdict::Invalid(e),
        };
        let seen = self
            .pods
            .entry(facts.uid.clone())
            .or_insert_with(|| SeenPod {
                group: facts.group.clone(),
                requests: facts.requests.clone(),
                bound_to: None,
                seen: now,
            });
        seen.seen = now;
        if let Some(node) = seen.bound_to.clone() {
            return only(
                candidates,
                &[node.as_str()],
                format!("node(s) other than {node}, where the pod is bound"),
            );
        }
        if !self.plans.contains_key(&facts.group) {
            match self.route(pod, &facts) {
                Ok(Route::Lone) => return self.lone_filter(&facts, candidates),
                Ok(Route::Denied(d)) => {
                    return FilterVerdict::Only {
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
                Ok(Route::Group { flavor, spec }) => {
                    if let Err(rejection) = self.make_plan(&facts.group, &flavor, &spec, now, true)
                    {
                        return FilterVerdict::Only {
                            pass: Vec::new(),
                            rejected: rejection,
                        };
                    }
                }
                Err(e) => return FilterVerdict::Invalid(e),
            }
        }
        self.seat_filter(&facts, candidates, now)
    }

    /// Why `pod`'s group cannot be planned, in the engine's (Kueue's) words, without making
    /// a plan: what a person needs when kube-scheduler's own filters already turned every
    /// node down. `None` when the group would fit, has a plan, or is not a TAS group.
    pub fn diagnose(&mut self, pod: &Pod, now: Instant) -> Option<String> {
        let facts = PodFacts::of(pod).ok()?;
        if self.plans.contains_key(&facts.group) {
            return None;
        }
        let Ok(Route::Group { flavor, spec }) = self.route(pod, &facts) else {
            return None;
        };
        self.make_plan(&facts.group, &flavor, &spec, now, false)
            .err()?;
        self.group_failure(&facts.group).map(str::to_string)
    }

    /// The candidates to favour for `pod` (its seat's nodes); never creates a plan.
    pub fn favoured(&mut self, pod: &Pod, candidates: &[&str]) -> Vec<usize> {
        let Ok(facts) = PodFacts::of(pod) else {
            return Vec::new();
        };
        if let Some(node) = self.pods.get(&facts.uid).and_then(|p| p.bound_to.clone()) {
            return positions(candidates, |c| c == node);
        }
        let Some(plan) = self.plans.get(&facts.group) else {
            return Vec::new();
        };
        let Some(&s) = plan.by_uid.get(&facts.uid) else {
            return Vec::new();
        };
        let nodes = seat_nodes(plan, &plan.seats[s]);
        positions(candidates, |c| nodes.contains(&c))
    }

    /// Records `pod` as bound to `node`: its seat becomes usage on the node.
    pub fn bind(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        now: Instant,
    ) -> Result<(), BindError> {
        self.sweep(now);
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
        if let Some(bound) = &seen.bound_to {
            return if bound == node {
                Ok(())
            } else {
                Err(BindError(format!(
                    "pod {namespace}/{name} is already bound to {bound}"
                )))
            };
        }
        let Some(&node_idx) = self.node_index.get(node) else {
            return Err(BindError(format!(
                "node {node:?} is not in kube-tas's cluster view"
            )));
        };
        let group = seen.group.clone();
        let requests = seen.requests.clone();
        if let Some(plan) = self.plans.get_mut(&group)
            && let Some(&s) = plan.by_uid.get(&uid)
        {
            let nodes = seat_nodes(plan, &plan.seats[s]);
            if !nodes.contains(&node) {
                return Err(BindError(format!(
                    "pod {namespace}/{name} has its seat on {} in the plan for {group}, not \
                     on {node}; refusing to bind outside the plan",
                    nodes.join(", ")
                )));
            }
            let place = plan.held_at(&plan.seats[s]);
            let plan_requests = plan.requests.clone();
            plan.seats[s].holder = Holder::Bound(uid.clone());
            plan.touched = now;
            self.held.release(&place, &plan_requests);
            if plan.complete() {
                self.plans.remove(&group);
            }
        }
        add_pod_usage(&mut self.used[node_idx], &requests);
        let mut labels = BTreeMap::new();
        if group.kind == WorkloadKind::PodGroup {
            labels.insert(keys::POD_GROUP_NAME_LABEL.to_string(), group.name.clone());
        }
        self.cluster.bound_pods.push(BoundPod {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: Some(uid.clone()),
            node_name: node.to_string(),
            requests,
            tas: false,
            owner_job: (group.kind == WorkloadKind::Job).then(|| group.name.clone()),
            labels,
            annotations: BTreeMap::new(),
        });
        if let Some(p) = self.pods.get_mut(&uid) {
            p.bound_to = Some(node.to_string());
        }
        self.stats.pods_bound += 1;
        Ok(())
    }

    /// Decides how a pod without a plan is placed: as its Job's, pod group's or own
    /// workload, through the same admission the webhook runs.
    fn route(&self, pod: &Pod, facts: &PodFacts) -> Result<Route, String> {
        let owned;
        let workload: &Workload = if facts.group.kind == WorkloadKind::Job {
            let key = (facts.group.namespace.clone(), facts.group.name.clone());
            // The webhook stamped the Job's template: the pod itself says its gang.
            let stamped = match self.cluster.jobs.get(&key) {
                Some(_) => None,
                None => workload_of_stamped_job_pod(pod, &facts.group.name),
            };
            match (self.cluster.jobs.get(&key), stamped) {
                (Some(w), _) => w,
                (None, _) if !facts.tas_marked => return Ok(Route::Lone),
                (None, Some(stamped)) => {
                    owned = stamped
                        .map_err(|e| format!("Pod {}/{}: {e}", facts.namespace, facts.name))?;
                    &owned
                }
                (None, None) => {
                    return Err(format!(
                        "{} (owner of pod {}/{}) is not in kube-tas's cluster view, so its \
                         gang size is unknown",
                        facts.group, facts.namespace, facts.name
                    ));
                }
            }
        } else if !facts.tas_marked {
            // No queue and no podset annotation: admission would say "not TAS" anyway.
            return Ok(Route::Lone);
        } else {
            owned = workload_of_pod(pod)
                .map_err(|e| format!("Pod {}/{}: {e}", facts.namespace, facts.name))?;
            &owned
        };
        let admitted = match admission::admit(workload, &self.cluster, &self.gates) {
            Ok(Some(a)) => a,
            Ok(None) => return Ok(Route::Lone),
            Err(d) => return Ok(Route::Denied(d)),
        };
        let Some(ps) = admitted.pod_sets.into_iter().next() else {
            return Ok(Route::Lone);
        };
        Ok(match ps.flavor {
            Some(flavor) => Route::Group {
                flavor,
                spec: Box::new(ps.spec),
            },
            None => Route::Lone,
        })
    }

    /// Free capacity of a flavor's tree: allocatable minus bound pods minus held seats.
    fn free_capacity(&self, f: &FlavorTopology) -> FreeCapacity {
        let tree = &f.tree;
        let mut free = FreeCapacity::empty(tree);
        for (i, usage) in self.used.iter().enumerate() {
            if usage.is_empty() {
                continue;
            }
            if let Some(leaf) = tree.leaf_of_node(&self.cluster.nodes[i].name) {
                free.subtract(tree, leaf, usage);
            }
        }
        for (node, held) in self.held.nodes() {
            if let Some(leaf) = tree.leaf_of_node(node) {
                free.subtract(tree, leaf, held);
            }
        }
        for (leaf, held) in self.held.leaves_of(&f.name) {
            free.subtract(tree, leaf, held);
        }
        free
    }

    /// Plans the group, or says why it does not fit.
    fn make_plan(
        &mut self,
        group: &GroupKey,
        flavor_name: &str,
        spec: &PodSetSpec,
        now: Instant,
        keep: bool,
    ) -> Result<(), Rejection> {
        if let Some(f) = self.failures.get(group)
            && f.generation == self.generation
        {
            return Err(f.rejection.clone());
        }
        let Some(flavor) = self.flavor(flavor_name) else {
            return Err(Rejection {
                reason: format!(
                    "node(s) cannot be used: ResourceFlavor {flavor_name:?} has no Topology"
                )
                .into(),
                unresolvable: true,
            });
        };
        let tree = &flavor.tree;
        let level = spec
            .topology
            .as_ref()
            .and_then(|t| t.required.as_ref().or(t.preferred.as_ref()))
            .and_then(|l| tree.level_index(l));
        // Pods of the group already bound (a restart, a replacement): plan only the rest,
        // inside the domain they sit in.
        let bound: Vec<DomainIdx> = self
            .cluster
            .bound_pods
            .iter()
            .filter(|p| member_of(p, group))
            .filter_map(|p| tree.leaf_of_node(&p.node_name))
            .collect();
        let mut request = spec.clone();
        let mut within = None;
        if !bound.is_empty() {
            request.count = (spec.count - bound.len() as i32).max(1);
            within = level.and_then(|l| common_ancestor(tree, &bound, l));
            if let Some(t) = &mut request.topology
                && t.slice_layers
                    .first()
                    .is_some_and(|s| s.size > 0 && request.count % s.size != 0)
            {
                t.slice_layers.clear();
            }
        }
        let free = self.free_capacity(&flavor);
        let ctx = PlacementContext {
            tree,
            free: &free,
            gates: &self.gates,
            flavor_name,
            flavor_tolerations: &flavor.tolerations,
        };
        let started = Instant::now();
        let outcome = place_group(
            &ctx,
            &GroupRequest {
                workers: &request,
                leader: None,
                within,
            },
        );
        tracing::info!(
            group = %group,
            pods = request.count,
            place_ms = started.elapsed().as_secs_f64() * 1e3,
            fits = outcome.is_ok(),
            "group planned"
        );
        match outcome {
            Ok(_) if !keep => Ok(()),
            Ok(placement) => {
                let mut seats = Vec::with_capacity(request.count as usize);
                for &(leaf, count) in &placement.workers.domains {
                    let node = if tree.hostname_lowest {
                        tree.leaf_node(leaf).map(|n| n.name.clone())
                    } else {
                        None
                    };
                    for _ in 0..count {
                        seats.push(Seat {
                            leaf,
                            node: node.clone(),
                            holder: Holder::Open,
                        });
                    }
                }
                let plan = Plan {
                    flavor: flavor.clone(),
                    requests: spec.requests.clone(),
                    level,
                    seats,
                    by_uid: HashMap::new(),
                    touched: now,
                };
                for seat in &plan.seats {
                    self.held.hold(plan.held_at(seat), &plan.requests);
                }
                self.plans.insert(group.clone(), plan);
                self.failures.remove(group);
                self.stats.plans_made += 1;
                Ok(())
            }
            Err(not_fit) => {
                // Would it fit on an empty cluster? Then freeing capacity (preemption) may
                // help; otherwise it never will.
                let empty = FreeCapacity::empty(tree);
                let fits_empty = place_group(
                    &PlacementContext {
                        free: &empty,
                        ..ctx
                    },
                    &GroupRequest {
                        workers: &request,
                        leader: None,
                        within,
                    },
                )
                .is_ok();
                let rejection = Rejection {
                    reason: format!(
                        "node(s) cannot take {group} ({} pods): {}",
                        spec.count, not_fit.message
                    )
                    .into(),
                    unresolvable: !fits_empty,
                };
                self.stats.groups_not_fit += 1;
                self.failures.insert(
                    group.clone(),
                    Failure {
                        generation: self.generation,
                        message: not_fit.message,
                        rejection: rejection.clone(),
                    },
                );
                Err(rejection)
            }
        }
    }

    /// The seat's node(s) among the candidates.
    fn seat_filter(
        &mut self,
        facts: &PodFacts,
        candidates: &[&str],
        now: Instant,
    ) -> FilterVerdict {
        let group = &facts.group;
        let Some(plan) = self.plans.get_mut(group) else {
            return FilterVerdict::Invalid(format!("no plan for {group}"));
        };
        plan.touched = now;
        let seat = match plan.take_seat(&facts.uid, facts.completion_index) {
            Some(s) => s,
            None => match self.extra_seat(group, &facts.uid) {
                Ok(s) => s,
                Err(rejection) => {
                    return FilterVerdict::Only {
                        pass: Vec::new(),
                        rejected: rejection,
                    };
                }
            },
        };
        let plan = &self.plans[group];
        let nodes = seat_nodes(plan, &plan.seats[seat]);
        let place = describe_seat(plan, &plan.seats[seat]);
        let pass = positions(candidates, |c| nodes.contains(&c));
        let reason = if pass.is_empty() {
            format!(
                "node(s) outside {place} planned for {group} (the seat's node(s) {} were not \
                 among the scheduler's candidates: check their taints, free resources and the \
                 pod's nodeSelector)",
                nodes.join(", ")
            )
        } else {
            format!("node(s) outside {place} planned for {group}")
        };
        FilterVerdict::Only {
            pass,
            rejected: Rejection {
                reason: reason.into(),
                unresolvable: true,
            },
        }
    }

    /// One more seat for a group whose seats are all taken (a replacement pod): inside the
    /// plan's domain, on capacity nobody holds.
    fn extra_seat(&mut self, group: &GroupKey, uid: &str) -> Result<usize, Rejection> {
        let plan = &self.plans[group];
        let flavor = plan.flavor.clone();
        let within = plan.domain();
        let one = PodSetSpec {
            name: "main".to_string(),
            count: 1,
            requests: plan.requests.clone(),
            ..Default::default()
        };
        let free = self.free_capacity(&flavor);
        let ctx = PlacementContext {
            tree: &flavor.tree,
            free: &free,
            gates: &self.gates,
            flavor_name: &flavor.name,
            flavor_tolerations: &flavor.tolerations,
        };
        let placed = place_group(
            &ctx,
            &GroupRequest {
                workers: &one,
                leader: None,
                within,
            },
        );
        let leaf = match placed.ok().and_then(|p| p.workers.domains.first().copied()) {
            Some((leaf, _)) => leaf,
            None => {
                return Err(Rejection {
                    reason: format!(
                        "node(s) have no room for another pod of {group}: every seat of its \
                         plan is taken and its domain is full"
                    )
                    .into(),
                    unresolvable: false,
                });
            }
        };
        let node = if flavor.tree.hostname_lowest {
            flavor.tree.leaf_node(leaf).map(|n| n.name.clone())
        } else {
            None
        };
        let Some(plan) = self.plans.get_mut(group) else {
            return Err(Rejection {
                reason: format!("node(s) lost the plan for {group}").into(),
                unresolvable: false,
            });
        };
        plan.seats.push(Seat {
            leaf,
            node,
            holder: Holder::Taken(uid.to_string()),
        });
        let s = plan.seats.len() - 1;
        plan.by_uid.insert(uid.to_string(), s);
        let place = plan.held_at(&plan.seats[s]);
        let requests = plan.requests.clone();
        self.held.hold(place, &requests);
        Ok(s)
    }

    /// A pod with no group: any candidate, except where plans hold the room it needs.
    fn lone_filter(&self, facts: &PodFacts, candidates: &[&str]) -> FilterVerdict {
        let mut rejected = Vec::new();
        if self.held.is_empty() {
            return FilterVerdict::Except { rejected };
        }
        let reason: Rejection = Rejection {
            reason: "node(s) have their free capacity held by kube-tas for a pod group".into(),
            unresolvable: false,
        };
        let mut need = facts.requests.clone();
        *need.entry(PODS.to_string()).or_insert(0) += 1;
        let leaf_holds = self.held.has_leaves();
        for (i, name) in candidates.iter().enumerate() {
            if !leaf_holds && self.held.at_node(name).is_none() {
                continue;
            }
            let Some(&n) = self.node_index.get(*name) else {
                continue;
            };
            if !self.room_for(n, &need) {
                rejected.push((i, reason.clone()));
            }
        }
        FilterVerdict::Except { rejected }
    }

    /// Whether node `n` has room for `need` once held seats are counted.
    fn room_for(&self, n: usize, need: &ResourceList) -> bool {
        let node = &self.cluster.nodes[n];
        if let Some(held) = self.held.at_node(&node.name)
            && !fits(&node.allocatable, &[&self.used[n], held], need)
        {
            return false;
        }
        for f in self.flavors.values() {
            let Some(leaf) = f.tree.leaf_of_node(&node.name) else {
                continue;
            };
            let Some(held) = self.held.at_leaf(&f.name, leaf) else {
                continue;
            };
            let d = &f.tree.domains[leaf];
            let mut leaf_used = ResourceList::new();
            for &m in &d.nodes {
                if let Some(&i) = self.node_index.get(&f.tree.nodes[m].name) {
                    for (k, v) in &self.used[i] {
                        *leaf_used.entry(k.clone()).or_insert(0) += v;
                    }
                }
            }
            let capacity: ResourceList = f
                .tree
                .resources
                .iter()
                .cloned()
                .zip(d.capacity.iter().copied())
                .collect();
            if !fits(&capacity, &[&leaf_used, held], need) {
                return false;
            }
        }
        true
    }

    /// Expires plans idle for longer than the TTL (at most once a second) and forgets pods
    /// seen long ago that never bound.
    fn sweep(&mut self, now: Instant) {
        if self.last_sweep.is_some_and(|t| {
            now.saturating_duration_since(t) < Duration::from_secs(1).min(self.ttl)
        }) {
            return;
        }
        self.last_sweep = Some(now);
        let ttl = self.ttl;
        let stale: Vec<GroupKey> = self
            .plans
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.touched) >= ttl)
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            let Some(plan) = self.plans.remove(&key) else {
                continue;
            };
            for seat in &plan.seats {
                if !matches!(seat.holder, Holder::Bound(_)) {
                    self.held.release(&plan.held_at(seat), &plan.requests);
                }
            }
            self.stats.plans_expired += 1;
            self.generation += 1;
            tracing::info!(group = %key, "plan expired: its pods did not come");
        }
        // A pod waiting with a seat in a live plan (kube-scheduler may hold it in Permit while
        // the rest of its gang arrives) must still be able to bind.
        let plans = &self.plans;
        self.pods.retain(|uid, p| {
            p.bound_to.is_some()
                || now.saturating_duration_since(p.seen) < ttl
                || plans
                    .get(&p.group)
                    .is_some_and(|plan| plan.by_uid.contains_key(uid))
        });
        if self.failures.len() > 10_000 {
            self.failures.clear();
        }
    }
}

/// Pod `p` belongs to `group`.
fn member_of(p: &BoundPod, group: &GroupKey) -> bool {
    if p.namespace != group.namespace {
        return false;
    }
    match group.kind {
        WorkloadKind::Job => p.owner_job.as_deref() == Some(group.name.as_str()),
        WorkloadKind::PodGroup => {
            p.owner_job.is_none() && p.labels.get(keys::POD_GROUP_NAME_LABEL) == Some(&group.name)
        }
        WorkloadKind::Pod => false,
    }
}

/// The domain at `level` holding every leaf, if there is one.
fn common_ancestor(tree: &TopologyTree, leaves: &[DomainIdx], level: usize) -> Option<DomainIdx> {
    let mut it = leaves.iter().map(|&l| tree.ancestor_at(l, level));
    let first = it.next()?;
    it.all(|d| d == first).then_some(first)
}

/// The nodes a seat stands for.
fn seat_nodes<'a>(plan: &'a Plan, seat: &'a Seat) -> Vec<&'a str> {
    match &seat.node {
        Some(n) => vec![n.as_str()],
        None => {
            let tree = &plan.flavor.tree;
            tree.domains[seat.leaf]
                .nodes
                .iter()
                .map(|&m| tree.nodes[m].name.as_str())
                .collect()
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
    let domain = &tree.domains[d];
    let value = domain.values.last().cloned().unwrap_or_default();
    format!("{} {value}", level_noun(&tree.levels[domain.level]))
}

/// A level's short name: `cloud.provider.com/topology-rack` → `rack`, the hostname → `host`.
pub fn level_noun(label: &str) -> String {
    if label == keys::HOSTNAME_LABEL {
        return "host".to_string();
    }
    let last = label.rsplit('/').next().unwrap_or(label);
    last.strip_prefix("topology-").unwrap_or(last).to_string()
}

/// `capacity - sum(used) >= need` for every resource `need` asks for (zero asks pass).
fn fits(capacity: &ResourceList, used: &[&ResourceList], need: &ResourceList) -> bool {
    need.iter().all(|(k, &v)| {
        if v <= 0 {
            return true;
        }
        let cap = capacity.get(k).copied().unwrap_or(0);
        let taken: i64 = used.iter().map(|u| u.get(k).copied().unwrap_or(0)).sum();
        cap - taken >= v
    })
}

/// Indices of the candidates matching `keep`.
fn positions(candidates: &[&str], keep: impl Fn(&str) -> bool) -> Vec<usize> {
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| keep(c))
        .map(|(i, _)| i)
        .collect()
}

/// Only the candidates named in `allowed` pass.
fn only(candidates: &[&str], allowed: &[&str], reason: String) -> FilterVerdict {
    FilterVerdict::Only {
        pass: positions(candidates, |c| allowed.contains(&c)),
        rejected: Rejection {
            reason: reason.into(),
            unresolvable: true,
        },
    }
}
