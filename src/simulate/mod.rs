//! `kube-tas simulate`: the what-if loop. Admit every pending workload in file order, place
//! each admitted one on the capacity left by the bound pods and by the workloads placed before
//! it, and report where every pod set lands, why it does not fit, or why it was denied.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use serde::Serialize;

pub mod table;

use crate::admission::{self, AdmittedPodSet};
use crate::cluster::{Cluster, Workload};
use crate::topology::capacity::FreeCapacity;
use crate::topology::placement::{Assignment, GroupRequest, PlacementContext, place_group};
use crate::topology::tree::{DomainIdx, TopologyTree};
use crate::topology::{FeatureGates, ResourceList};

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

/// Runs the simulation over a loaded cluster.
pub fn run(cluster: &Cluster, gates: &FeatureGates) -> Report {
    let mut sim = Simulation {
        cluster,
        gates,
        flavors: BTreeMap::new(),
        placed: Vec::new(),
    };
    let mut report = Report::default();
    for w in &cluster.workloads {
        if let Some(r) = sim.workload(w) {
            report.workloads.push(r);
        }
    }
    for (name, f) in sim.flavors {
        let mut placed: BTreeMap<DomainIdx, Vec<(String, i64)>> = BTreeMap::new();
        for p in sim.placed.iter().filter(|p| p.flavor == name) {
            placed
                .entry(p.leaf)
                .or_default()
                .push((p.workload.clone(), p.count));
        }
        report.flavors.push(FlavorReport {
            name,
            tree: f.tree,
            free: f.free,
            placed,
        });
    }
    report
}

struct FlavorState {
    tree: TopologyTree,
    tolerations: Vec<Toleration>,
    free: FreeCapacity,
}

/// Pods placed by the simulation on one leaf.
#[derive(Debug, Clone)]
struct Placed {
    flavor: String,
    leaf: DomainIdx,
    requests: ResourceList,
    count: i64,
    workload: String,
}

struct Simulation<'c> {
    cluster: &'c Cluster,
    gates: &'c FeatureGates,
    flavors: BTreeMap<String, FlavorState>,
    placed: Vec<Placed>,
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
        let label = format!("{}/{}", w.namespace, w.name);
        let (pod_sets, assumed) = self.place_workload(&admitted.pod_sets, &label);
        report.pod_sets = pod_sets;
        if report.pod_sets.iter().all(|p| p.fits) {
            for p in assumed {
                self.commit(p);
            }
        }
        Some(report)
    }

    /// Places the pod sets group by group (flavors in name order, groups in order of first
    /// appearance); stops at the first group that does not fit, as Kueue does.
    fn place_workload(
        &mut self,
        pod_sets: &[AdmittedPodSet],
        label: &str,
    ) -> (Vec<PodSetReport>, Vec<Placed>) {
        let mut reports: Vec<PodSetReport> = pod_sets
            .iter()
            .map(|ps| PodSetReport {
                name: ps.spec.name.clone(),
                count: ps.spec.count,
                fits: ps.flavor.is_none(),
                flavor: ps.flavor.clone(),
                levels: Vec::new(),
                domains: Vec::new(),
                message: None,
            })
            .collect();
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let mut by_name: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (i, ps) in pod_sets.iter().enumerate() {
            let Some(flavor) = &ps.flavor else { continue };
            // Pod sets sharing a podset-group-name (on one flavor) are placed together.
            let key = ps
                .spec
                .topology
                .as_ref()
                .and_then(|t| t.group_name.clone())
                .map(|g| (flavor.clone(), g));
            match key.as_ref().and_then(|k| by_name.get(k)) {
                Some(&gi) => groups[gi].1.push(i),
                None => {
                    if let Some(k) = key {
                        by_name.insert(k, groups.len());
                    }
                    groups.push((flavor.clone(), vec![i]));
                }
            }
        }
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let mut assumed: Vec<Placed> = Vec::new();
        let mut failed: Option<String> = None;
        for (flavor, members) in groups {
            if let Some(reason) = &failed {
                for &i in &members {
                    reports[i].message = Some(reason.clone());
                }
                continue;
            }
            if !self.ensure_flavor(&flavor) {
                continue;
            }
            let (workers, leader) = match members.as_slice() {
                [w] => (*w, None),
                [a, b] if pod_sets[*b].spec.count > pod_sets[*a].spec.count => (*b, Some(*a)),
                [a, b] => (*a, Some(*b)),
                _ => (members[0], None),
            };
            let f = &self.flavors[&flavor];
            // Earlier groups of this workload count as used; copy the capacity only then.
            let free = if assumed.is_empty() {
                Cow::Borrowed(&f.free)
            } else {
                let mut free = f.free.clone();
                for p in &assumed {
                    apply(&self.flavors, &flavor, &mut free, p);
                }
                Cow::Owned(free)
            };
            let ctx = PlacementContext {
                tree: &f.tree,
                free: &free,
                gates: self.gates,
                flavor_name: &flavor,
                flavor_tolerations: &f.tolerations,
            };
            let request = GroupRequest {
                workers: &pod_sets[workers].spec,
                leader: leader.map(|l| &pod_sets[l].spec),
                within: None,
            };
            let levels = f.tree.levels.clone();
            let started = std::time::Instant::now();
            let outcome = place_group(&ctx, &request);
            tracing::info!(
                workload = label,
                pods = pod_sets[workers].spec.count,
                place_ms = started.elapsed().as_secs_f64() * 1e3,
                "group placed"
            );
            match outcome {
                Ok(placement) => {
                    let mut fill = |i: usize, a: &Assignment| {
                        reports[i].fits = true;
                        reports[i].levels = levels.clone();
                        reports[i].domains = a
                            .domains
                            .iter()
                            .map(|&(d, c)| DomainCount {
                                values: f.tree.domains[d].values.clone(),
                                count: c,
                            })
                            .collect();
                        for &(leaf, count) in &a.domains {
                            assumed.push(Placed {
                                flavor: flavor.clone(),
                                leaf,
                                requests: pod_sets[i].spec.requests.clone(),
                                count,
                                workload: label.to_string(),
                            });
                        }
                    };
                    fill(workers, &placement.workers);
                    if let (Some(l), Some(a)) = (leader, &placement.leader) {
                        fill(l, a);
                    }
                }
                Err(not_fit) => {
                    for &i in &members {
                        reports[i].message = Some(not_fit.message.clone());
                    }
                    failed = Some(not_fit.message);
                }
            }
        }
        (reports, assumed)
    }

    /// Builds a flavor's tree and capacity on first use; false when it cannot be built.
    fn ensure_flavor(&mut self, name: &str) -> bool {
        if self.flavors.contains_key(name) {
            return true;
        }
        let Some(rf) = self.cluster.resource_flavors.get(name) else {
            return false;
        };
        let topology_name = rf.spec.topology_name.clone().unwrap_or_default();
        let Some(topology) = self.cluster.topologies.get(&topology_name) else {
            return false;
        };
        let levels: Vec<String> = topology
            .spec
            .levels
            .iter()
            .map(|l| l.node_label.clone())
            .collect();
        let started = std::time::Instant::now();
        let tree = TopologyTree::build(
            &topology_name,
            &levels,
            &rf.spec.node_labels,
            &self.cluster.nodes,
        );
        tracing::info!(
            flavor = name,
            leaves = tree.leaves().len(),
            build_ms = started.elapsed().as_secs_f64() * 1e3,
            "topology tree built"
        );
        let free = FreeCapacity::with_pod_usage(
            &tree,
            self.cluster
                .bound_pods
                .iter()
                .map(|p| (p.node_name.as_str(), &p.requests)),
        );
        self.flavors.insert(
            name.to_string(),
            FlavorState {
                tree,
                tolerations: rf.spec.tolerations.clone(),
                free,
            },
        );
        let mut free = self.take_free(name);
        for p in &self.placed {
            apply(&self.flavors, name, &mut free, p);
        }
        self.put_free(name, free);
        true
    }

    /// Makes placed pods usage for every later decision, on every flavor sharing the nodes.
    fn commit(&mut self, p: Placed) {
        let names: Vec<String> = self.flavors.keys().cloned().collect();
        for name in names {
            let mut free = self.take_free(&name);
            apply(&self.flavors, &name, &mut free, &p);
            self.put_free(&name, free);
        }
        self.placed.push(p);
    }

    /// Moves a flavor's capacity out (so it can be changed while the trees are read).
    fn take_free(&mut self, name: &str) -> FreeCapacity {
        self.flavors
            .get_mut(name)
            .map(|f| std::mem::take(&mut f.free))
            .unwrap_or_default()
    }

    fn put_free(&mut self, name: &str, free: FreeCapacity) {
        if let Some(f) = self.flavors.get_mut(name) {
            f.free = free;
        }
    }
}

/// Takes placed pods from `free` (the capacity of flavor `target`): directly when they were
/// placed on the same flavor, through the node when they were placed on a hostname-level
/// flavor sharing it (Kueue's overlapping-flavor handling).
fn apply(
    flavors: &BTreeMap<String, FlavorState>,
    target: &str,
    free: &mut FreeCapacity,
    p: &Placed,
) {
    let Some(t) = flavors.get(target) else { return };
    if p.flavor == target {
        free.take(&t.tree, p.leaf, &p.requests, p.count);
        return;
    }
    let Some(src) = flavors.get(&p.flavor) else {
        return;
    };
    if !src.tree.hostname_lowest {
        return;
    }
    if let Some(node) = src.tree.leaf_node(p.leaf)
        && let Some(leaf) = t.tree.leaf_of_node(&node.name)
    {
        free.take(&t.tree, leaf, &p.requests, p.count);
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
