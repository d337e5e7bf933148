//! `simulate` for Workload-API groups: each root (a standalone `PodGroup`, or a root
//! `CompositePodGroup`) in file order has its pending pods scheduled one by one through the
//! same kube-scheduler emulation and extender as Jobs, so the first pod plans the whole tree.
//!
//! Output: a standalone PodGroup is a workload of kind `PodGroup` with one PodSet `main`; a
//! root CompositePodGroup is one workload whose PodSets are its leaf PodGroups (depth first,
//! children by creation then name). A PodSet's `levels` are the keys from the root down
//! (groups without a key skipped), then `kubernetes.io/hostname`; `domains` count the pods
//! placed, so a basic group shows only what fit. Pods naming a PodGroup that does not exist
//! are reported under that name, as a PodGroup that does not fit.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use super::{DomainCount, PodSetReport, Simulation, WorkloadReport};
use crate::cluster::group::GroupKey;
use crate::cluster::scheduling_groups::SchedulingGroup;
use crate::cluster::{WorkloadKind, name_or_generate_name, namespace_or_default};
use crate::keys::HOSTNAME_LABEL;
use crate::plans::MAIN_POD_SET;

/// One PodGroup of a tree with the keys from the root down to it.
struct Leaf<'c> {
    group: &'c SchedulingGroup,
    keys: Vec<String>,
}

impl<'c> Simulation<'c, '_> {
    /// Every Workload-API root in file order, then the pods whose PodGroup is in no tree
    /// kube-tas can place (missing, or under a missing parent or a cycle).
    pub(super) fn scheduling_groups(&mut self) -> Vec<WorkloadReport> {
        let groups = &self.cluster.scheduling_groups;
        let mut reports = Vec::new();
        let mut covered: BTreeSet<(&str, &str)> = BTreeSet::new();
        for root in groups.iter().filter(|g| g.parent.is_none()) {
            let leaves = leaves_under(groups, root);
            if leaves.is_empty() && root.composite {
                continue;
            }
            for l in &leaves {
                covered.insert((l.group.namespace.as_str(), l.group.name.as_str()));
            }
            if leaves
                .iter()
                .all(|l| self.pods_of(&l.group.namespace, &l.group.name).is_empty())
            {
                continue; // nothing pending: a group that runs, or whose pods are to come
            }
            let pod_sets = leaves
                .iter()
                .map(|l| {
                    let name = if root.composite {
                        l.group.name.clone()
                    } else {
                        MAIN_POD_SET.to_string()
                    };
                    self.schedule_leaf(&l.group.namespace, &l.group.name, name, &l.keys)
                })
                .collect();
            reports.push(report(root.kind(), &root.namespace, &root.name, pod_sets));
        }
        let mut orphans: Vec<(String, String)> = Vec::new();
        for pod in &self.cluster.scheduling_pods {
            let group = GroupKey::of_pod(&pod.metadata, pod.spec.as_ref());
            let id = (group.namespace.clone(), group.name.clone());
            if !covered.contains(&(id.0.as_str(), id.1.as_str())) && !orphans.contains(&id) {
                orphans.push(id);
            }
        }
        for (namespace, name) in orphans {
            let mut pod_set = self.schedule_leaf(&namespace, &name, MAIN_POD_SET.to_string(), &[]);
            let exists = groups
                .iter()
                .any(|g| !g.composite && g.namespace == namespace && g.name == name);
            if !exists {
                // No such PodGroup: no levels to speak of.
                pod_set.levels.clear();
            }
            reports.push(report("PodGroup", &namespace, &name, vec![pod_set]));
        }
        reports
    }

    /// The pending pods naming PodGroup `namespace/name`, in file order.
    fn pods_of(&self, namespace: &str, name: &str) -> Vec<&'c Pod> {
        let cluster: &'c crate::cluster::Cluster = self.cluster;
        cluster
            .scheduling_pods
            .iter()
            .filter(|p| {
                let g = GroupKey::of_pod(&p.metadata, p.spec.as_ref());
                g.kind == WorkloadKind::SchedulingGroup
                    && g.namespace == namespace
                    && g.name == name
            })
            .collect()
    }

    /// Schedules the pending pods of PodGroup `namespace/name` in the scheduler's order
    /// (priority, then creation, then name) and reports where they went.
    fn schedule_leaf(
        &mut self,
        namespace: &str,
        name: &str,
        pod_set: String,
        keys: &[String],
    ) -> PodSetReport {
        let mut pods = self.pods_of(namespace, name);
        pods.sort_by_key(|p| {
            (
                std::cmp::Reverse(p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)),
                p.metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(0, |t| t.0.as_second()),
                name_or_generate_name(&p.metadata),
            )
        });
        let mut levels: Vec<String> = keys.to_vec();
        levels.push(HOSTNAME_LABEL.to_string());
        let mut per_domain: BTreeMap<Vec<String>, i64> = BTreeMap::new();
        let mut first_error: Option<String> = None;
        let count = pods.len();
        for pod in pods {
            debug_assert_eq!(namespace_or_default(&pod.metadata), namespace);
            match self.schedule_pod(pod) {
                Ok(node) => {
                    let labels = self
                        .cluster
                        .nodes
                        .iter()
                        .find(|n| n.name == node)
                        .map(|n| &n.labels);
                    let values = keys
                        .iter()
                        .map(|k| {
                            labels
                                .and_then(|l| l.get(k))
                                .unwrap_or_default()
                                .to_string()
                        })
                        .chain(std::iter::once(node.clone()))
                        .collect();
                    *per_domain.entry(values).or_insert(0) += 1;
                    self.mark_placed(&format!("{namespace}/{name}"), &node);
                }
                Err(message) => {
                    first_error.get_or_insert(message);
                }
            }
        }
        let placed: i64 = per_domain.values().sum();
        // A PodGroup with nothing pending (its pods run, or are still to be created) has
        // nothing that fails to fit.
        let fits = placed > 0 || count == 0;
        PodSetReport {
            name: pod_set,
            count: i32::try_from(count).unwrap_or(i32::MAX),
            fits,
            flavor: None,
            levels,
            domains: per_domain
                .into_iter()
                .map(|(values, count)| DomainCount { values, count })
                .collect(),
            replaced: Vec::new(),
            message: if fits {
                None
            } else {
                Some(
                    first_error.unwrap_or_else(|| {
                        format!("PodGroup {namespace}/{name} has no pending pods")
                    }),
                )
            },
        }
    }
}

impl Simulation<'_, '_> {
    /// Shows a pod placed on `node` in the table of every flavor whose tree holds the node.
    fn mark_placed(&mut self, label: &str, node: &str) {
        let flavors: Vec<String> = self
            .cluster
            .kueue
            .resource_flavors
            .keys()
            .cloned()
            .collect();
        for flavor in flavors {
            let Some(f) = self.extender.flavor(self.cluster, &flavor) else {
                continue;
            };
            let Some(leaf) = f.tree.leaf_of_node(node) else {
                continue;
            };
            let here = self
                .placed
                .entry(flavor)
                .or_default()
                .entry(leaf)
                .or_default();
            match here.iter_mut().find(|(w, _)| w == label) {
                Some((_, n)) => *n += 1,
                None => here.push((label.to_string(), 1)),
            }
        }
    }
}

fn report(kind: &str, namespace: &str, name: &str, pod_sets: Vec<PodSetReport>) -> WorkloadReport {
    WorkloadReport {
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        admitted: true,
        message: None,
        warnings: Vec::new(),
        pod_sets,
    }
}

/// The PodGroups under `root` (itself when it is one), depth first with children by
/// creation then name, as the placement core takes them; each with the keys from the root
/// down to it. A tree deeper than the API allows stops where the core stops it.
fn leaves_under<'c>(groups: &'c [SchedulingGroup], root: &'c SchedulingGroup) -> Vec<Leaf<'c>> {
    fn walk<'c>(
        groups: &'c [SchedulingGroup],
        at: &'c SchedulingGroup,
        keys: Vec<String>,
        depth: usize,
        out: &mut Vec<Leaf<'c>>,
    ) {
        let mut keys = keys;
        keys.extend(at.key.clone());
        if !at.composite {
            out.push(Leaf { group: at, keys });
            return;
        }
        if depth >= crate::topology::podgroup::MAX_DEPTH {
            return;
        }
        let mut children: Vec<&SchedulingGroup> = groups
            .iter()
            .filter(|g| g.namespace == at.namespace && g.parent.as_deref() == Some(&at.name))
            .collect();
        children.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
        for c in children {
            walk(groups, c, keys.clone(), depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(groups, root, Vec::new(), 1, &mut out);
    out
}
