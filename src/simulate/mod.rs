//! `kube-tas simulate`: the what-if loop, run through the same service the scheduler calls.
//!
//! Every pending workload, in file order, goes through admission (the webhook's decision);
//! then each of its pods is created as the Job controller would create it, with the flavor's
//! nodeSelector and tolerations injected as the webhook does, and scheduled one by one as
//! kube-scheduler would: its own filters ([`kube_scheduler`]), then the extender's `filter`,
//! `prioritize` and `bind` ([`crate::extender::Extender`], in process). Every bound pod is
//! usage for the next. The what-if answer is therefore the production answer. Workload-API
//! `PodGroup`s and `CompositePodGroup`s come after, root by root ([`scheduling`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

pub mod kube_scheduler;
pub mod pods;
mod scheduling;
pub mod table;

use crate::admission::{self, AdmittedPodSet};
use crate::cluster::state::FlavorTopology;
use crate::cluster::{Cluster, Workload, WorkloadKind};
use crate::extender::wire::{MAX_EXTENDER_PRIORITY, MIN_EXTENDER_PRIORITY};
use crate::extender::{
    Extender, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, HostPriority,
};
use crate::plans::PodFacts;
use crate::topology::FeatureGates;
use crate::topology::capacity::FreeCapacity;
use crate::topology::tree::{DomainIdx, TopologyTree};
use kube_scheduler::{PodFilterFacts, SchedulerView};

/// What `simulate` found, workload by workload.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One entry per pending TAS workload, in file order.
    pub workloads: Vec<WorkloadReport>,
    /// The flavors that workloads were placed on, with their final free capacity.
    pub flavors: Vec<FlavorReport>,
    /// Per TAS flavor whose nodes are not all usable: which were left out and why
    /// (`flavor tas-flavor (topology default): 2 node(s) take none of its pods: 1 not Ready
    /// (h1); ...`).
    pub left_out: Vec<String>,
}

/// The outcome for one workload.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadReport {
    /// `Job`, `Pod`, `PodGroup`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// False when the webhook denies it.
    pub admitted: bool,
    /// The denial, as kubectl shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Soft problems reported at admission.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// One entry per pod set (empty when denied).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pod_sets: Vec<PodSetReport>,
}

/// Where one pod set landed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetReport {
    /// The pod set name (`main` for a Job).
    pub name: String,
    /// Pods in the pod set.
    pub count: i32,
    /// Whether the whole pod set was placed.
    pub fits: bool,
    /// The flavor it was placed on (absent for a pod set kube-tas does not place).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
    /// Every level of the flavor's Topology, outermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<String>,
    /// Pods per lowest-level domain (full label path).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainCount>,
    /// Of `domains`, the pods placed again for pods lost on a failed node (hot swap), per
    /// lowest-level domain; empty when nothing was replaced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<DomainCount>,
    /// Why it does not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Pods in one lowest-level domain.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DomainCount {
    /// The domain's full label path, outermost first.
    pub values: Vec<String>,
    /// Pods placed there.
    pub count: i64,
}

/// Where a PodSet's pods are once it is placed.
struct PlacedPodSet {
    levels: Vec<String>,
    domains: Vec<DomainCount>,
    replaced: Vec<DomainCount>,
}

/// A flavor's tree after the simulation, for the table output.
#[derive(Debug, Clone)]
pub struct FlavorReport {
    /// The ResourceFlavor's name.
    pub name: String,
    /// Its tree.
    pub tree: TopologyTree,
    /// Free capacity left after every placement.
    pub free: FreeCapacity,
    /// Per leaf: (workload, pods) placed there during the simulation.
    pub placed: BTreeMap<DomainIdx, Vec<(String, i64)>>,
}

/// The feature gate without which a running Job is never placed again for lost pods.
const REPLACEMENT_GATE: &str = "TASFailedNodeReplacement";

/// Plans never expire during a simulation: every pod of a group comes at once.
const SIMULATION_PLAN_TTL: Duration = Duration::from_secs(24 * 3600);

/// The extender as `simulate` calls it: in process ([`Extender`]), or over HTTP (the tests
/// that show both answer alike). Calls are in node-cache mode, as the shipped scheduler
/// configuration makes them.
pub trait ExtenderCalls {
    /// `filter` with the candidates' names.
    fn filter(&mut self, pod: &Pod, names: &[&str]) -> Result<ExtenderFilterResult, String>;
    /// `prioritize` with the filter's survivors.
    fn prioritize(&mut self, pod: &Pod, names: &[&str]) -> Result<Vec<HostPriority>, String>;
    /// `bind`.
    fn bind(&mut self, args: &ExtenderBindingArgs) -> Result<ExtenderBindingResult, String>;
    /// The engine's reason the pod's group cannot be placed, when it can say.
    fn explain(&mut self, pod: &Pod) -> Option<String>;
    /// A flavor's tree (for reporting domains).
    fn flavor(&mut self, cluster: &Cluster, name: &str) -> Option<Arc<FlavorTopology>>;
}

impl ExtenderCalls for Extender {
    fn filter(&mut self, pod: &Pod, names: &[&str]) -> Result<ExtenderFilterResult, String> {
        Ok(self.filter_cached(pod, names))
    }

    fn prioritize(&mut self, pod: &Pod, names: &[&str]) -> Result<Vec<HostPriority>, String> {
        Ok(self.host_priorities(pod, names))
    }

    fn bind(&mut self, args: &ExtenderBindingArgs) -> Result<ExtenderBindingResult, String> {
        Ok(Extender::bind(self, args))
    }

    fn explain(&mut self, pod: &Pod) -> Option<String> {
        let now = std::time::Instant::now();
        self.with_book(|b, state| {
            let group = PodFacts::of(pod).ok()?.group;
            b.group_failure(&group)
                .map(str::to_string)
                .or_else(|| b.diagnose(state, pod, now))
        })
    }

    fn flavor(&mut self, _cluster: &Cluster, name: &str) -> Option<Arc<FlavorTopology>> {
        Extender::flavor(self, name)
    }
}

/// Runs the simulation over a loaded cluster, through an in-process extender.
pub fn run(cluster: &Cluster, gates: &FeatureGates) -> Report {
    let mut extender = Extender::over_cluster(cluster, gates.clone(), SIMULATION_PLAN_TTL);
    run_with(cluster, gates, &mut extender)
}

/// Runs the simulation, calling `extender` for every pod.
pub fn run_with(
    cluster: &Cluster,
    gates: &FeatureGates,
    extender: &mut dyn ExtenderCalls,
) -> Report {
    let mut sim = Simulation {
        cluster,
        gates,
        extender,
        view: SchedulerView::new(
            &cluster.nodes,
            cluster
                .bound_pods
                .iter()
                .map(|p| (p.node_name.as_str(), &p.requests)),
        ),
        placed: BTreeMap::new(),
    };
    let mut report = Report::default();
    for w in &cluster.workloads {
        if let Some(r) = sim.workload(w) {
            report.workloads.push(r);
        }
    }
    // Workload-API groups after Kueue's workloads (which they see as usage), in file order.
    let groups = sim.scheduling_groups();
    report.workloads.extend(groups);
    report.flavors = sim.flavor_reports();
    report.left_out = sim.left_out();
    report
}

/// The simulation's state: the extender and the scheduler's view.
struct Simulation<'c, 'e> {
    cluster: &'c Cluster,
    gates: &'c FeatureGates,
    extender: &'e mut dyn ExtenderCalls,
    view: SchedulerView<'c>,
    /// Per flavor, per leaf: (workload, pods) placed there.
    placed: BTreeMap<String, BTreeMap<DomainIdx, Vec<(String, i64)>>>,
}

impl Simulation<'_, '_> {
    fn workload(&mut self, w: &Workload) -> Option<WorkloadReport> {
        let replacing = w.kind == WorkloadKind::Job
            && self
                .cluster
                .replacements
                .contains_key(&(w.namespace.clone(), w.name.clone()));
        if replacing && !self.gates.enabled(REPLACEMENT_GATE) {
            // Hot swap is off: a running Job whose pods failed is not placed again.
            return None;
        }
        let mut report = WorkloadReport {
            kind: w.kind.to_string(),
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            admitted: true,
            message: None,
            warnings: Vec::new(),
            pod_sets: Vec::new(),
        };
        let admitted = match admission::admit(w, &self.cluster.kueue, self.gates) {
            Ok(Some(a)) => a,
            Ok(None) => return None,
            Err(denial) => {
                report.admitted = false;
                report.message = Some(denial.as_kubectl_shows());
                return Some(report);
            }
        };
        report.warnings = admitted.warnings;
        let mut failed: Option<String> = None;
        for (i, ps) in admitted.pod_sets.iter().enumerate() {
            let mut r = PodSetReport {
                name: ps.spec.name.clone(),
                count: ps.spec.count,
                fits: ps.flavor.is_none(),
                flavor: ps.flavor.clone(),
                levels: Vec::new(),
                domains: Vec::new(),
                replaced: Vec::new(),
                message: None,
            };
            if let Some(reason) = &failed {
                r.fits = false;
                r.message = Some(reason.clone());
            } else if ps.flavor.is_some() {
                match self.schedule_pod_set(w, i, ps) {
                    Ok(placed) => {
                        r.fits = true;
                        r.levels = placed.levels;
                        r.domains = placed.domains;
                        r.replaced = placed.replaced;
                    }
                    Err(message) => {
                        r.message = Some(message.clone());
                        failed = Some(message);
                    }
                }
            }
            report.pod_sets.push(r);
        }
        Some(report)
    }

    /// Creates the pod set's pods and schedules them one by one; on success, the flavor's
    /// levels and the pods per lowest-level domain.
    fn schedule_pod_set(
        &mut self,
        w: &Workload,
        index: usize,
        ps: &AdmittedPodSet,
    ) -> Result<PlacedPodSet, String> {
        let flavor_name = ps.flavor.clone().unwrap_or_default();
        let Some(rf) = self.cluster.kueue.resource_flavors.get(&flavor_name) else {
            return Err(format!("ResourceFlavor {flavor_name:?} does not exist"));
        };
        let Some(flavor) = self.extender.flavor(self.cluster, &flavor_name) else {
            return Err(format!("ResourceFlavor {flavor_name:?} has no Topology"));
        };
        let label = format!("{}/{}", w.namespace, w.name);
        let mut per_leaf: BTreeMap<DomainIdx, i64> = BTreeMap::new();
        // A running Job placed again (hot swap): only its lost pods are recreated, and the
        // answer is where all its pods are once they are placed.
        let key = (w.namespace.clone(), w.name.clone());
        let recreate = (w.kind == WorkloadKind::Job)
            .then(|| self.cluster.replacements.get(&key))
            .flatten();
        let mut pods = pods::pods_of(w, index, ps, rf);
        if let Some(lost) = recreate {
            pods.retain(|p| pods::completion_index(p).is_some_and(|i| lost.contains(&i)));
        }
        let mut placed_here: Vec<(DomainIdx, i64)> = Vec::new();
        for pod in pods {
            let node = self.schedule_pod(&pod)?;
            if let Some(leaf) = flavor.tree.leaf_of_node(&node) {
                placed_here.push((leaf, 1));
            }
        }
        if recreate.is_some() {
            for p in &self.cluster.bound_pods {
                if p.namespace == w.namespace
                    && p.owner_job.as_deref() == Some(w.name.as_str())
                    && let Some(leaf) = flavor.tree.leaf_of_node(&p.node_name)
                {
                    *per_leaf.entry(leaf).or_insert(0) += 1;
                }
            }
        }
        let placed = self.placed.entry(flavor_name).or_default();
        let mut new_here: BTreeMap<DomainIdx, i64> = BTreeMap::new();
        for (leaf, n) in placed_here {
            *new_here.entry(leaf).or_insert(0) += n;
            *per_leaf.entry(leaf).or_insert(0) += n;
        }
        // Replacements are marked where the table shows them.
        let shown = if recreate.is_some() {
            format!("{label} (replaced)")
        } else {
            label
        };
        for (&leaf, &count) in &new_here {
            placed.entry(leaf).or_default().push((shown.clone(), count));
        }
        let counts = |m: &BTreeMap<DomainIdx, i64>| {
            m.iter()
                .map(|(&leaf, &count)| DomainCount {
                    values: flavor.tree.path(leaf).map(str::to_string).collect(),
                    count,
                })
                .collect()
        };
        Ok(PlacedPodSet {
            levels: flavor.tree.levels.clone(),
            domains: counts(&per_leaf),
            replaced: if recreate.is_some() {
                counts(&new_here)
            } else {
                Vec::new()
            },
        })
    }

    /// One kube-scheduler cycle for one pod: its filters, the extender's filter,
    /// prioritize, bind.
    fn schedule_pod(&mut self, pod: &Pod) -> Result<String, String> {
        let facts = PodFilterFacts::of(pod)?;
        // When the scheduler's own filters leave nothing, the extender is never called; the
        // gang-level reason (the engine's) still says more than the per-node tally.
        let feasible = match self.view.feasible(&facts) {
            Ok(f) => f,
            Err(tally) => return Err(self.extender.explain(pod).unwrap_or(tally)),
        };
        let nodes = self.view.nodes();
        let names: Vec<&str> = feasible.iter().map(|&i| nodes[i].name.as_str()).collect();
        let result = self.extender.filter(pod, &names)?;
        if !result.error.is_empty() {
            return Err(result.error);
        }
        // Only names among the candidates count, as kube-scheduler checks (it fails the
        // attempt on any other; here they are left out). `feasible` is in node order.
        let passing: Vec<&str> = result
            .node_names
            .iter()
            .flatten()
            .filter_map(|n| {
                self.view
                    .position(n)
                    .filter(|i| feasible.binary_search(i).is_ok())
            })
            .map(|i| nodes[i].name.as_str())
            .collect();
        if passing.is_empty() {
            if let Some(reason) = self.extender.explain(pod) {
                return Err(reason);
            }
            let mut tally: BTreeMap<String, usize> = BTreeMap::new();
            for reason in result
                .failed_nodes
                .values()
                .chain(result.failed_and_unresolvable_nodes.values())
            {
                *tally.entry(reason.clone()).or_insert(0) += 1;
            }
            return Err(kube_scheduler::unavailable(nodes.len(), &tally));
        }
        // One feasible node: kube-scheduler takes it without scoring. Otherwise the highest
        // extender score wins; ties go to the first node (the scheduler breaks them at random;
        // a what-if run must be repeatable).
        let node = if passing.len() == 1 {
            passing[0]
        } else {
            let scores = self.extender.prioritize(pod, &passing)?;
            let score = |n: &str| {
                scores
                    .iter()
                    .find(|h| h.host == n)
                    .map(|h| h.score.clamp(MIN_EXTENDER_PRIORITY, MAX_EXTENDER_PRIORITY))
                    .unwrap_or(0)
            };
            let mut best = passing[0];
            for &n in &passing[1..] {
                if score(n) > score(best) {
                    best = n;
                }
            }
            best
        }
        .to_string();
        let bound = self.extender.bind(&ExtenderBindingArgs {
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            pod_namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
            node: node.clone(),
        })?;
        if !bound.error.is_empty() {
            return Err(bound.error);
        }
        if let Some(i) = self.view.position(&node) {
            self.view.assume(i, facts.requests());
        }
        Ok(node)
    }

    /// Each flavor that pods were placed on, with its final free capacity.
    /// One line per TAS flavor that has nodes left out.
    fn left_out(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for name in self.cluster.kueue.resource_flavors.keys() {
            let Some(f) = self.extender.flavor(self.cluster, name) else {
                continue;
            };
            out.extend(f.left_out_note());
        }
        out
    }

    fn flavor_reports(&mut self) -> Vec<FlavorReport> {
        let placed = std::mem::take(&mut self.placed);
        let mut out = Vec::new();
        for (name, leaves) in placed {
            let Some(f) = self.extender.flavor(self.cluster, &name) else {
                continue;
            };
            let mut free = FreeCapacity::empty(&f.tree);
            for (i, node) in self.view.nodes().iter().enumerate() {
                if let Some(leaf) = f.tree.leaf_of_node(&node.name) {
                    free.subtract(&f.tree, leaf, self.view.usage(i));
                }
            }
            out.push(FlavorReport {
                name,
                tree: f.tree.clone(),
                free,
                placed: leaves,
            });
        }
        out
    }
}

impl Report {
    /// The documented JSON shape (`{"workloads": [...]}`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "workloads": self.workloads })
    }

    /// The table for people: each flavor's tree with free capacity and placed pods, then the
    /// workloads that did not fit or were denied.
    pub fn to_table(&self) -> String {
        table::render(self)
    }
}
