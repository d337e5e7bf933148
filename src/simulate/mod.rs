//! `kube-tas simulate`: the what-if loop, run through the same service the scheduler calls.
//!
//! Every pending workload, in file order, goes through admission (the webhook's decision);
//! then each of its pods is created as the Job controller would create it, with the flavor's
//! nodeSelector and tolerations injected as the webhook does, and scheduled one by one as
//! kube-scheduler would: its own filters ([`kube_scheduler`]), then the extender's `filter`,
//! `prioritize` and `bind` ([`crate::extender::Extender`], in process). Every bound pod is
//! usage for the next. The what-if answer is therefore the production answer.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

pub mod kube_scheduler;
mod pods;
pub mod table;

use crate::admission::{self, AdmittedPodSet};
use crate::cluster::{Cluster, Workload};
use crate::extender::{Extender, ExtenderBindingArgs};
use crate::plans::{FilterVerdict, GroupKey, PlanBook};
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

/// Plans never expire during a simulation: every pod of a group comes at once.
const SIMULATION_PLAN_TTL: Duration = Duration::from_secs(24 * 3600);

/// Runs the simulation over a loaded cluster.
pub fn run(cluster: &Cluster, gates: &FeatureGates) -> Report {
    let extender = Extender::new(PlanBook::new(
        cluster.clone(),
        gates.clone(),
        SIMULATION_PLAN_TTL,
    ));
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
    report.flavors = sim.flavor_reports();
    report
}

/// The simulation's state: the extender (with its plan book) and the scheduler's view.
struct Simulation<'c> {
    cluster: &'c Cluster,
    gates: &'c FeatureGates,
    extender: Extender,
    view: SchedulerView<'c>,
    /// Per flavor, per leaf: (workload, pods) placed there.
    placed: BTreeMap<String, BTreeMap<DomainIdx, Vec<(String, i64)>>>,
}

impl Simulation<'_> {
    fn workload(&mut self, w: &Workload) -> Option<WorkloadReport> {
        let mut report = WorkloadReport {
            kind: w.kind.to_string(),
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            admitted: true,
            message: None,
            warnings: Vec::new(),
            pod_sets: Vec::new(),
        };
        let admitted = match admission::admit(w, self.cluster, self.gates) {
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
                message: None,
            };
            if let Some(reason) = &failed {
                r.fits = false;
                r.message = Some(reason.clone());
            } else if ps.flavor.is_some() {
                match self.schedule_pod_set(w, i, ps) {
                    Ok((levels, domains)) => {
                        r.fits = true;
                        r.levels = levels;
                        r.domains = domains;
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
    ) -> Result<(Vec<String>, Vec<DomainCount>), String> {
        let flavor_name = ps.flavor.clone().unwrap_or_default();
        let Some(rf) = self.cluster.resource_flavors.get(&flavor_name) else {
            return Err(format!("ResourceFlavor {flavor_name:?} does not exist"));
        };
        let Some(flavor) = self.extender.with_book(|b| b.flavor(&flavor_name)) else {
            return Err(format!("ResourceFlavor {flavor_name:?} has no Topology"));
        };
        let group = GroupKey {
            kind: w.kind,
            namespace: w.namespace.clone(),
            name: w.name.clone(),
        };
        let label = format!("{}/{}", w.namespace, w.name);
        let mut per_leaf: BTreeMap<DomainIdx, i64> = BTreeMap::new();
        for pod in pods::pods_of(w, index, ps, rf) {
            let node = self.schedule_pod(&pod, &group)?;
            if let Some(leaf) = flavor.tree.leaf_of_node(&node) {
                *per_leaf.entry(leaf).or_insert(0) += 1;
            }
        }
        let placed = self.placed.entry(flavor_name).or_default();
        let domains = per_leaf
            .iter()
            .map(|(&leaf, &count)| {
                placed.entry(leaf).or_default().push((label.clone(), count));
                DomainCount {
                    values: flavor.tree.domains[leaf].values.clone(),
                    count,
                }
            })
            .collect();
        Ok((flavor.tree.levels.clone(), domains))
    }

    /// One kube-scheduler cycle for one pod: filters, extender filter, prioritize, bind.
    fn schedule_pod(
        &mut self,
        pod: &k8s_openapi::api::core::v1::Pod,
        group: &GroupKey,
    ) -> Result<String, String> {
        let facts = PodFilterFacts::of(pod)?;
        // When the scheduler's own filters leave nothing, the extender is never called; the
        // gang-level reason (the engine's) still says more than the per-node tally.
        let feasible = match self.view.feasible(&facts) {
            Ok(f) => f,
            Err(tally) => {
                let now = std::time::Instant::now();
                return Err(self
                    .extender
                    .with_book(|b| b.diagnose(pod, now))
                    .unwrap_or(tally));
            }
        };
        let nodes = self.view.nodes();
        let names: Vec<&str> = feasible.iter().map(|&i| nodes[i].name.as_str()).collect();
        let pass: Vec<usize> = match self.extender.filter_names(pod, &names) {
            FilterVerdict::Invalid(e) => return Err(e),
            FilterVerdict::Only { pass, rejected } => {
                if pass.is_empty() {
                    let engine = self
                        .extender
                        .with_book(|b| b.group_failure(group).map(str::to_string));
                    return Err(engine.unwrap_or_else(|| {
                        kube_scheduler::unavailable(
                            nodes.len(),
                            &[(rejected.reason.to_string(), names.len())].into(),
                        )
                    }));
                }
                pass
            }
            FilterVerdict::Except { rejected } => {
                let mut out = vec![false; names.len()];
                let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
                for (i, why) in &rejected {
                    out[*i] = true;
                    *reasons.entry(why.reason.to_string()).or_insert(0) += 1;
                }
                let pass: Vec<usize> = (0..names.len()).filter(|&i| !out[i]).collect();
                if pass.is_empty() {
                    return Err(kube_scheduler::unavailable(nodes.len(), &reasons));
                }
                pass
            }
        };
        let passing: Vec<&str> = pass.iter().map(|&i| names[i]).collect();
        // One feasible node: kube-scheduler takes it without scoring. Otherwise the highest
        // extender score wins; ties go to the first node (the scheduler breaks them at random;
        // a what-if run must be repeatable).
        let chosen = if passing.len() == 1 {
            0
        } else {
            let scores = self.extender.prioritize_names(pod, &passing);
            let mut best = 0usize;
            let mut best_score = i64::MIN;
            for (i, _) in passing.iter().enumerate() {
                let s = scores
                    .iter()
                    .find(|(j, _)| *j == i)
                    .map(|(_, s)| *s)
                    .unwrap_or(0);
                if s > best_score {
                    best = i;
                    best_score = s;
                }
            }
            best
        };
        let node = passing[chosen].to_string();
        let bound = self.extender.bind(&ExtenderBindingArgs {
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            pod_namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
            node: node.clone(),
        });
        if !bound.error.is_empty() {
            return Err(bound.error);
        }
        self.view.assume(feasible[pass[chosen]], facts.requests());
        Ok(node)
    }

    /// Each flavor that pods were placed on, with its final free capacity.
    fn flavor_reports(&mut self) -> Vec<FlavorReport> {
        let placed = std::mem::take(&mut self.placed);
        let mut out = Vec::new();
        for (name, leaves) in placed {
            let report = self.extender.with_book(|b| {
                let f = b.flavor(&name)?;
                let free = FreeCapacity::with_pod_usage(
                    &f.tree,
                    b.cluster()
                        .bound_pods
                        .iter()
                        .map(|p| (p.node_name.as_str(), &p.requests)),
                );
                Some(FlavorReport {
                    name: name.clone(),
                    tree: f.tree.clone(),
                    free,
                    placed: leaves,
                })
            });
            out.extend(report);
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
