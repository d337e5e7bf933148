//! Which queue, flavor and topology request a workload gets: Kueue's webhook rules and queue
//! resolution, below both doors. The webhook ([`crate::admission`]) answers the API server with
//! it; the plan book routes a pod's group through it; `simulate` decides each workload with it.
//!
//! A workload is validated with Kueue's annotation rules (a denial quotes the annotation and
//! the rule), its queue is resolved (LocalQueue → ClusterQueue → ResourceFlavor → Topology),
//! and every PodSet gets its flavor and topology request. What Kueue only finds out at
//! scheduling time and kube-tas can tell at once (a missing queue, a level the Topology does
//! not have, a nodeSelector that contradicts the flavor) is denied here with the reason.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::group::{GroupKey, PodSetHint};
use super::kueue::{ClusterQueue, KueueObjects, ResourceFlavor};
use super::state::ClusterState;
use super::{
    Workload, WorkloadKind, name_or_generate_name, workload_of_pod, workload_of_stamped_job_pod,
};
use crate::keys;
use crate::topology::validation::{
    aggregate_message, validate_podset_annotations, validate_podset_groups,
    validate_slice_size_upper_bound,
};
use crate::topology::{FeatureGates, PodSetSpec, TopologyRequest};

/// The name kube-tas's webhook is registered under (what kubectl prints in a denial).
pub const WEBHOOK_NAME: &str = "mutate.kube-tas.io";

/// Why a workload is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// What to fix, quoting the annotation or object and the rule.
    pub message: String,
}

impl Denial {
    /// A denial saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The denial as kubectl shows it to the user.
    pub fn as_kubectl_shows(&self) -> String {
        format!(
            "admission webhook \"{WEBHOOK_NAME}\" denied the request: {}",
            self.message
        )
    }
}

/// A PodSet that passed admission.
#[derive(Debug, Clone)]
pub struct AdmittedPodSet {
    /// The PodSet with its topology request (or `implied`) filled in.
    pub spec: PodSetSpec,
    /// The TAS ResourceFlavor it is placed on; `None` for a PodSet kube-tas does not place.
    pub flavor: Option<String>,
    /// Pods per replica ([`super::PendingPodSet::pods_per_replica`]).
    pub pods_per_replica: i32,
}

/// A workload that passed admission.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// Its PodSets, in the workload's order.
    pub pod_sets: Vec<AdmittedPodSet>,
    /// Soft problems the user should hear about (`response.warnings`).
    pub warnings: Vec<String>,
}

/// Decides a workload. `Ok(None)`: not a TAS workload (no queue and no `podset-*` annotation).
pub fn admit(
    workload: &Workload,
    kueue: &KueueObjects,
    gates: &FeatureGates,
) -> Result<Option<Admitted>, Denial> {
    let has_tas_annotation = workload.pod_sets.iter().any(|ps| {
        ps.annotations
            .keys()
            .any(|k| k.starts_with(keys::PODSET_ANNOTATION_PREFIX))
    });
    if workload.queue_name.is_none() && !has_tas_annotation {
        return Ok(None);
    }
    validate(workload, gates)?;

    let Some(queue) = workload.queue_name.as_deref() else {
        return Err(Denial::new(format!(
            "metadata.labels[{}]: Required value: a workload with kueue.x-k8s.io/podset-* \
             annotations must name the LocalQueue whose ResourceFlavor gives its topology",
            keys::QUEUE_NAME_LABEL
        )));
    };
    let lq = kueue
        .local_queues
        .get(&(workload.namespace.clone(), queue.to_string()))
        .ok_or_else(|| {
            Denial::new(format!(
                "metadata.labels[{}]: Not found: LocalQueue \"{}/{queue}\" does not exist",
                keys::QUEUE_NAME_LABEL,
                workload.namespace
            ))
        })?;
    let cq_name = &lq.spec.cluster_queue;
    let cq = kueue.cluster_queues.get(cq_name).ok_or_else(|| {
        Denial::new(format!(
            "ClusterQueue \"{cq_name}\" named by LocalQueue \"{}/{queue}\" does not exist",
            workload.namespace
        ))
    })?;
    let tas_only = is_tas_only(cq, kueue);

    let mut warnings = Vec::new();
    let mut pod_sets = Vec::with_capacity(workload.pod_sets.len());
    for ps in &workload.pod_sets {
        let mut spec = ps.spec.clone();
        let request = TopologyRequest::from_annotations(&ps.annotations, gates)
            .map_err(|e| Denial::new(format!("{}: {e}", ps.annotations_path)))?;
        let explicit = request.as_ref().is_some_and(TopologyRequest::is_explicit);
        if !explicit && !tas_only {
            pod_sets.push(AdmittedPodSet {
                spec,
                flavor: None,
                pods_per_replica: ps.pods_per_replica,
            });
            continue;
        }
        let flavor_name = tas_flavor_for(&spec, cq_name, cq, kueue)?;
        let flavor = &kueue.resource_flavors[&flavor_name];
        check_node_selector(
            &spec,
            &spec_path(&ps.annotations_path),
            &flavor_name,
            flavor,
        )?;
        let topology_name = flavor.spec.topology_name.clone().unwrap_or_default();
        let topology = kueue.topologies.get(&topology_name).ok_or_else(|| {
            Denial::new(format!(
                "Topology \"{topology_name}\" named by ResourceFlavor \"{flavor_name}\" does not exist"
            ))
        })?;
        let levels: Vec<&str> = topology
            .spec
            .levels
            .iter()
            .map(|l| l.node_label.as_str())
            .collect();
        if let Some(tr) = &request {
            let from_constraints = gates.multi_layer()
                && ps
                    .annotations
                    .contains_key(keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS);
            check_levels(
                tr,
                from_constraints,
                &ps.annotations_path,
                &flavor_name,
                &topology_name,
                &levels,
            )?;
            if let Some(p) = &tr.preferred
                && levels.first() == Some(&p.as_str())
                && levels.len() > 1
            {
                warnings.push(format!(
                    "{}[{}]: {p:?} is the top level of Topology \"{topology_name}\": when no \
                     single {p} has room the pods spread over several (use {} to wait for one \
                     instead)",
                    ps.annotations_path,
                    keys::PODSET_PREFERRED_TOPOLOGY,
                    keys::PODSET_REQUIRED_TOPOLOGY
                ));
            }
        }
        spec.implied = !explicit;
        spec.topology = if explicit { request } else { None };
        pod_sets.push(AdmittedPodSet {
            spec,
            flavor: Some(flavor_name),
            pods_per_replica: ps.pods_per_replica,
        });
    }
    Ok(Some(Admitted { pod_sets, warnings }))
}

/// Kueue's webhook rules for every PodSet and for the PodSet groups.
fn validate(workload: &Workload, gates: &FeatureGates) -> Result<(), Denial> {
    let mut errors = Vec::new();
    for ps in &workload.pod_sets {
        errors.extend(validate_podset_annotations(
            &ps.annotations_path,
            &ps.annotations,
            gates,
        ));
        errors.extend(validate_slice_size_upper_bound(
            &ps.annotations_path,
            &ps.annotations,
            ps.spec.count,
        ));
    }
    let members: Vec<(String, &BTreeMap<String, String>, i32)> = workload
        .pod_sets
        .iter()
        .map(|ps| (ps.annotations_path.clone(), &ps.annotations, ps.spec.count))
        .collect();
    // Kueue checks PodSet groups where a workload's PodSets are known up front (Jobs,
    // JobSets, LeaderWorkerSets); a pod is checked alone.
    if !matches!(workload.kind, WorkloadKind::Pod | WorkloadKind::PodGroup) {
        errors.extend(validate_podset_groups(&members, gates));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Denial::new(aggregate_message(&errors)))
    }
}

/// A ClusterQueue is TAS-only when every flavor of every resource group has a topology.
fn is_tas_only(cq: &ClusterQueue, kueue: &KueueObjects) -> bool {
    cq.spec
        .resource_groups
        .iter()
        .flat_map(|g| &g.flavors)
        .all(|f| {
            kueue
                .resource_flavors
                .get(&f.name)
                .is_some_and(|rf| rf.spec.topology_name.is_some())
        })
}

/// The TAS flavor a PodSet lands on: in the resource groups covering what it requests, the
/// first flavor with a topology (Kueue tries flavors in order and skips non-TAS ones for TAS
/// PodSets).
fn tas_flavor_for(
    spec: &PodSetSpec,
    cq_name: &str,
    cq: &ClusterQueue,
    kueue: &KueueObjects,
) -> Result<String, Denial> {
    let requested: Vec<&String> = spec
        .requests
        .iter()
        .filter(|(_, v)| **v != 0)
        .map(|(k, _)| k)
        .collect();
    for r in &requested {
        if !cq
            .spec
            .resource_groups
            .iter()
            .any(|g| g.covered_resources.contains(r))
        {
            return Err(Denial::new(format!(
                "pod set \"{}\" requests {r}, which ClusterQueue \"{cq_name}\" does not cover",
                spec.name
            )));
        }
    }
    let groups: Vec<_> = cq
        .spec
        .resource_groups
        .iter()
        .filter(|g| {
            requested.is_empty() || requested.iter().any(|r| g.covered_resources.contains(r))
        })
        .collect();
    let mut chosen: Option<String> = None;
    for g in groups {
        let mut tas = None;
        for f in &g.flavors {
            let rf = kueue.resource_flavors.get(&f.name).ok_or_else(|| {
                Denial::new(format!(
                    "ResourceFlavor \"{}\" named by ClusterQueue \"{cq_name}\" does not exist",
                    f.name
                ))
            })?;
            if rf.spec.topology_name.is_some() {
                tas = Some(f.name.clone());
                break;
            }
        }
        match (&chosen, tas) {
            (_, None) => {}
            (None, Some(t)) => chosen = Some(t),
            (Some(c), Some(t)) if *c != t => {
                return Err(Denial::new(format!(
                    "pod set \"{}\" would need more than one TAS flavor of ClusterQueue \"{cq_name}\": {c}, {t}",
                    spec.name
                )));
            }
            _ => {}
        }
    }
    chosen.ok_or_else(|| {
        let what = if requested.is_empty() {
            "any resource".to_string()
        } else {
            requested
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        Denial::new(format!(
            "ClusterQueue \"{cq_name}\" has no TAS ResourceFlavor (one with spec.topologyName) \
             for {what} of pod set \"{}\"",
            spec.name
        ))
    })
}

/// Where the pod spec sits next to the annotations: `spec` for a Pod, `spec.template.spec`
/// for a Job.
fn spec_path(annotations_path: &str) -> String {
    match annotations_path.strip_suffix("metadata.annotations") {
        Some(prefix) => format!("{prefix}spec"),
        None => "spec".to_string(),
    }
}

/// A nodeSelector key the user set to another value than the flavor's nodeLabels.
fn check_node_selector(
    spec: &PodSetSpec,
    spec_path: &str,
    flavor_name: &str,
    flavor: &ResourceFlavor,
) -> Result<(), Denial> {
    for (k, v) in &flavor.spec.node_labels {
        if let Some(user) = spec.node_selector.get(k)
            && user != v
        {
            return Err(Denial::new(format!(
                "{spec_path}.nodeSelector[{k}]: Invalid value: {user:?}: ResourceFlavor \
                 \"{flavor_name}\" places pod set \"{}\" on nodes with {k}={v}",
                spec.name
            )));
        }
    }
    Ok(())
}

/// The required/preferred level and the outer slice level must exist in the Topology.
fn check_levels(
    tr: &TopologyRequest,
    from_constraints: bool,
    annotations_path: &str,
    flavor: &str,
    topology: &str,
    levels: &[&str],
) -> Result<(), Denial> {
    let mut checks: Vec<(&str, &str)> = Vec::new();
    if let Some(r) = &tr.required {
        checks.push((keys::PODSET_REQUIRED_TOPOLOGY, r));
    }
    if let Some(p) = &tr.preferred {
        checks.push((keys::PODSET_PREFERRED_TOPOLOGY, p));
    }
    if let Some(first) = tr.slice_layers.first() {
        let key = if from_constraints {
            keys::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS
        } else {
            keys::PODSET_SLICE_REQUIRED_TOPOLOGY
        };
        checks.push((key, &first.level));
    }
    for (key, level) in checks {
        if !levels.contains(&level) {
            return Err(Denial::new(format!(
                "{annotations_path}[{key}]: Invalid value: {level:?}: Flavor \"{flavor}\" does not \
                 contain the requested level (Topology \"{topology}\" has levels: {})",
                levels.join(", ")
            )));
        }
    }
    Ok(())
}

/// How a pod kube-scheduler asks about is to be placed.
#[derive(Debug, Clone)]
pub enum Route {
    /// Not a TAS pod: anywhere, but off capacity plans hold.
    Lone,
    /// The webhook would refuse it.
    Denied(Denial),
    /// Placed with its workload.
    Workload(Box<RoutedWorkload>),
    /// Not placeable yet (a plain pod group not all of whose pods exist); the reason.
    Waiting(String),
}

/// A workload kube-tas places, and the PodSet of the pod that asked.
#[derive(Debug, Clone)]
pub struct RoutedWorkload {
    /// The pod's PodSet.
    pub pod_set: String,
    /// Every PodSet kube-tas places (those with a TAS flavor), in the workload's order.
    pub pod_sets: Vec<RoutedPodSet>,
}

impl RoutedWorkload {
    /// The names of its PodSets, in its order (what a pod's [`PodSetHint`] resolves against).
    pub fn pod_set_names(&self) -> Vec<&str> {
        self.pod_sets.iter().map(|p| p.spec.name.as_str()).collect()
    }
}

/// One PodSet of a routed workload.
#[derive(Debug, Clone)]
pub struct RoutedPodSet {
    /// The TAS ResourceFlavor.
    pub flavor: String,
    /// The PodSet, its topology request filled in.
    pub spec: PodSetSpec,
    /// Pods per replica (a JobSet's pods per Job), for ranks.
    pub pods_per_replica: i32,
}

/// Decides how `pod` (of `group`) is placed: as its workload's (its JobSet's, LeaderWorkerSet
/// group's, Job's or pod group's) or its own, through the same [`admit`] the webhook runs. A
/// Job's pod finds its Job in `state`, else in the stamps the webhook gave its template;
/// `tas_marked` says the pod names a queue or carries a `podset-*` annotation. The error names
/// what cannot be decided.
pub fn route(
    pod: &Pod,
    group: &GroupKey,
    tas_marked: bool,
    state: &ClusterState,
    gates: &FeatureGates,
) -> Result<Route, String> {
    let pod_label = || {
        format!(
            "Pod {}/{}",
            group.namespace,
            name_or_generate_name(&pod.metadata)
        )
    };
    if tas_marked && group.kind == WorkloadKind::PodGroup {
        if let Some((known, total)) = state.pod_group_incomplete(group) {
            return Ok(Route::Waiting(format!(
                "{group} has {known} of its {total} pods ({}); it is placed once all of them \
                 exist, as Kueue admits a pod group",
                keys::POD_GROUP_TOTAL_COUNT
            )));
        }
        if state.tracks_pending_group_pods() && state.workload(group).is_none() {
            return Ok(Route::Waiting(format!(
                "no pod of {group} is in kube-tas's view of pending pods yet (its watch lags \
                 the scheduler); the group is placed once its pods are seen"
            )));
        }
    }
    let owned;
    let known = state.workload(group);
    let workload: &Workload = match (&known, group.kind) {
        (Some(w), _) => w,
        (None, WorkloadKind::Job) if !tas_marked => return Ok(Route::Lone),
        // The webhook stamped the Job's template: the pod itself says its gang.
        (None, WorkloadKind::Job) => match workload_of_stamped_job_pod(pod, &group.name) {
            Some(stamped) => {
                owned = stamped.map_err(|e| format!("{}: {e}", pod_label()))?;
                &owned
            }
            None => {
                return Err(format!(
                    "{group} (owner of {}) is not in kube-tas's cluster view, so its gang \
                     size is unknown",
                    pod_label()
                ));
            }
        },
        (None, WorkloadKind::JobSet | WorkloadKind::LeaderWorkerSet) => {
            return Err(format!(
                "{group} (owner of {}) is not in kube-tas's cluster view, so its PodSets \
                 are unknown",
                pod_label()
            ));
        }
        // No queue and no podset annotation: admission would say "not TAS" anyway.
        (None, _) if !tas_marked => return Ok(Route::Lone),
        (None, _) => {
            owned = workload_of_pod(pod).map_err(|e| format!("{}: {e}", pod_label()))?;
            &owned
        }
    };
    let admitted = match admit(workload, state.kueue(), gates) {
        Ok(Some(a)) => a,
        Ok(None) => return Ok(Route::Lone),
        Err(d) => return Ok(Route::Denied(d)),
    };
    let names: Vec<&str> = admitted
        .pod_sets
        .iter()
        .map(|p| p.spec.name.as_str())
        .collect();
    let hint = PodSetHint::of_pod(&pod.metadata, pod.spec.as_ref());
    let Some(own) = hint.resolve(&names) else {
        return Err(format!(
            "{} names a PodSet that {group} does not have (it has {})",
            pod_label(),
            names.join(", ")
        ));
    };
    let own = own.to_string();
    let own_is_tas = admitted
        .pod_sets
        .iter()
        .any(|p| p.spec.name == own && p.flavor.is_some());
    if !own_is_tas {
        return Ok(Route::Lone);
    }
    let pod_sets = admitted
        .pod_sets
        .into_iter()
        .filter_map(|p| {
            Some(RoutedPodSet {
                flavor: p.flavor?,
                spec: p.spec,
                pods_per_replica: p.pods_per_replica,
            })
        })
        .collect();
    Ok(Route::Workload(Box::new(RoutedWorkload {
        pod_set: own,
        pod_sets,
    })))
}
