//! From the loaded Pods and Jobs to what placement needs: the pods that hold capacity
//! ([`BoundPod`]) and the workloads waiting to be placed ([`Workload`]).
//!
//! Rules:
//! * a pod in phase `Succeeded` or `Failed` is ignored altogether;
//! * a pod with `spec.nodeName` is bound;
//! * a Job is pending unless a non-terminal pod names it as its controller (the Job runs)
//!   or it has finished (`Complete` / `Failed` condition); a running Job whose pods failed on
//!   a failed node (not Ready, or gone) is placed again for those pods, by completion index
//!   (its controller recreates them: hot swap);
//! * a pending pod that a Job controls belongs to that Job, not to a workload of its own;
//! * other pending pods are single-pod workloads, or, with the `pod-group-name` label and
//!   the `pod-group-total-count` annotation, one workload per (namespace, group), unless a
//!   pod of the group is already bound (the group runs); a group's pods of one shape
//!   ([`super::role`]) are one PodSet: a group of one shape has the PodSet `main` of the total
//!   count, a group of several shapes one PodSet per role of the pods loaded;
//! * a JobSet is one workload (a PodSet per replicated Job), a LeaderWorkerSet one per replica
//!   group; their pods belong to them, and one bound pod means the workload runs;
//! * workloads keep the order in which their first object was loaded.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::group::{GroupKey, PodIndex, PodSetHint};
use super::pod_requests::{pod_requests, scoring_requests};
use super::role::pod_role;
use super::scheduling_groups::pending_member;
use super::sets::{JobSet, LeaderWorkerSet, SetEntry};
use super::{
    BoundPod, FieldError, LoadError, LostPod, PendingPodSet, Source, Workload, WorkloadKind,
};
use crate::keys;
use crate::topology::PodSetSpec;

/// The name of the single PodSet of a Job, pod or pod group (as Kueue names it).
const MAIN_POD_SET: &str = "main";

/// An object with its load position.
pub(super) struct Seen<T> {
    /// Load order across all files.
    pub seq: usize,
    /// Where it was read.
    pub at: Source,
    /// The object.
    pub object: T,
}

/// What [`derive`] finds.
pub(super) struct Derived {
    pub bound_pods: Vec<BoundPod>,
    pub workloads: Vec<Workload>,
    pub jobs: BTreeMap<(String, String), Workload>,
    pub sets: BTreeMap<GroupKey, SetEntry>,
    pub replacements: BTreeMap<(String, String), Vec<usize>>,
    pub lost_pods: Vec<LostPod>,
    pub scheduling_pods: Vec<Pod>,
    pub warnings: Vec<String>,
}

/// The objects [`derive`] reads.
#[derive(Default)]
pub(super) struct Objects {
    pub pods: Vec<Seen<Pod>>,
    pub jobs: Vec<Seen<Job>>,
    pub jobsets: Vec<Seen<JobSet>>,
    pub lws: Vec<Seen<LeaderWorkerSet>>,
    /// Nodes that are not Ready (or have no Ready condition); with the nodes that do not exist
    /// these are failed nodes: a Job's pod that failed there is recreated by its controller.
    pub failed_nodes: BTreeSet<String>,
    /// Every node's name.
    pub node_names: BTreeSet<String>,
}

/// Splits pods, Jobs, JobSets and LeaderWorkerSets into bound pods and pending workloads (see
/// the module rules).
pub(super) fn derive(objects: Objects) -> Result<Derived, LoadError> {
    let Objects {
        pods,
        jobs,
        jobsets,
        lws,
        failed_nodes,
        node_names,
    } = objects;
    // Per running Job: completion indices of its pods that failed on a failed node, and those
    // of its pods that have not finished.
    let mut failed_indices: BTreeMap<(String, String), BTreeSet<usize>> = BTreeMap::new();
    let mut live_indices: BTreeMap<(String, String), BTreeSet<usize>> = BTreeMap::new();
    let mut bound_pods = Vec::new();
    let mut warnings = Vec::new();
    let mut pending: Vec<(usize, Workload)> = Vec::new();
    let mut all_jobs = BTreeMap::new();
    let mut running_jobs = BTreeSet::new();
    let mut running_groups = BTreeSet::new();
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    let mut running_sets: BTreeSet<GroupKey> = BTreeSet::new();
    let mut replacements = BTreeMap::new();
    let mut lost_pods = Vec::new();
    let mut scheduling_pods = Vec::new();

    for Seen {
        seq,
        at,
        object: pod,
    } in pods
    {
        let job_index = || {
            let job = controller_job_of(&pod.metadata)?;
            let index = annotation_value(&pod.metadata, keys::JOB_COMPLETION_INDEX)
                .or_else(|| label_value(&pod.metadata, keys::JOB_COMPLETION_INDEX))?
                .parse::<usize>()
                .ok()?;
            Some(((namespace_or_default(&pod.metadata), job), index))
        };
        if is_terminal(&pod) {
            let on = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            let failed_there = pod.status.as_ref().and_then(|s| s.phase.as_deref())
                == Some("Failed")
                && on
                    .as_ref()
                    .is_some_and(|n| failed_nodes.contains(n) || !node_names.contains(n));
            if failed_there && let Some((job, index)) = job_index() {
                failed_indices.entry(job).or_default().insert(index);
            }
            if failed_there && let Some(node_name) = on {
                let spec = pod.spec.as_ref();
                lost_pods.push(LostPod {
                    group: GroupKey::of_pod(&pod.metadata, spec),
                    pod_set: PodSetHint::of_pod(&pod.metadata, spec),
                    index: PodIndex::of_pod(&pod.metadata),
                    node_name,
                });
            }
            continue;
        }
        if let Some((job, index)) = job_index() {
            live_indices.entry(job).or_default().insert(index);
        }
        let namespace = namespace_or_default(&pod.metadata);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let label = format!("Pod {namespace}/{name}");
        let fail = |e: FieldError| LoadError::Object {
            at: at.clone(),
            object: Some(label.clone()),
            field: e.field,
            message: e.message,
        };
        let owner_job = controller_job_of(&pod.metadata);
        if let Some(job) = &owner_job {
            running_jobs.insert((namespace.clone(), job.clone()));
        }
        let key = GroupKey::of_pod(&pod.metadata, pod.spec.as_ref());
        if key.kind == WorkloadKind::SchedulingGroup {
            // A Workload-API PodGroup's pod: bound, it is usage (and fixes its group's
            // domain); pending, its PodGroup places it.
            if let Some(bound) = bound_pod_of(&pod).map_err(fail)? {
                // Its set runs, as for any of the set's pods.
                let set = GroupKey::of_controller(&pod.metadata);
                if matches!(
                    set.kind,
                    WorkloadKind::JobSet | WorkloadKind::LeaderWorkerSet
                ) {
                    running_sets.insert(set);
                }
                bound_pods.push(bound);
            } else {
                pending_member(&pod).map_err(fail)?;
                scheduling_pods.push(pod);
            }
            continue;
        }
        if matches!(
            key.kind,
            WorkloadKind::JobSet | WorkloadKind::LeaderWorkerSet
        ) {
            // A set's pod, pending or bound, belongs to the set's workload; a bound one means
            // the workload runs.
            if let Some(bound) = bound_pod_of(&pod).map_err(fail)? {
                running_sets.insert(key);
                bound_pods.push(bound);
            }
            continue;
        }
        let group_name = label_value(&pod.metadata, keys::POD_GROUP_NAME_LABEL);
        if let Some(bound) = bound_pod_of(&pod).map_err(fail)? {
            if let Some(group) = group_name {
                running_groups.insert((namespace.clone(), group));
            }
            bound_pods.push(bound);
            continue;
        }
        let spec = pod.spec.clone().unwrap_or_default();
        if owner_job.is_some() {
            continue;
        }
        let pod_set = pending_pod_set(&pod.metadata, &spec, 1).map_err(fail)?;
        let Some(group_name) = group_name else {
            let workload = Workload {
                kind: WorkloadKind::Pod,
                queue_name: queue_name(&pod.metadata),
                pod_sets: vec![pod_set],
                source: at.clone(),
                namespace,
                name,
            };
            pending.push((seq, workload));
            continue;
        };
        let total = total_count(&pod.metadata).map_err(fail)?;
        let role = pod_role(&pod.metadata, &spec).map_err(fail)?;
        let key = (namespace.clone(), group_name.clone());
        let group = groups.entry(key).or_insert_with(|| Group {
            seq,
            first: label.clone(),
            total,
            workload: Workload {
                kind: WorkloadKind::PodGroup,
                queue_name: queue_name(&pod.metadata),
                pod_sets: Vec::new(),
                source: at.clone(),
                namespace: namespace.clone(),
                name: group_name.clone(),
            },
        });
        if group.total != total {
            return Err(fail(FieldError::new(
                annotation_path(keys::POD_GROUP_TOTAL_COUNT),
                format!(
                    "{total} disagrees with {} of {} in pod group {namespace}/{group_name}",
                    group.total, group.first
                ),
            )));
        }
        count_pod_of_role(&mut group.workload.pod_sets, &role, || pod_set);
    }

    for (key, mut group) in groups {
        if running_groups.contains(&key) {
            continue;
        }
        let sets = &mut group.workload.pod_sets;
        finish_group_pod_sets(sets, group.total);
        if sets.len() > 1 {
            let seen: i32 = sets.iter().map(|p| p.spec.count).sum();
            if seen != group.total {
                warnings.push(format!(
                    "{} (pod group {}/{}): {seen} pods of {} shapes are loaded but {} says {}; \
                     the group is placed as the pods loaded",
                    group.workload.source,
                    key.0,
                    key.1,
                    sets.len(),
                    keys::POD_GROUP_TOTAL_COUNT,
                    group.total
                ));
            }
        }
        pending.push((group.seq, group.workload));
    }

    for Seen {
        seq,
        at,
        object: job,
    } in jobs
    {
        let namespace = namespace_or_default(&job.metadata);
        let name = job.metadata.name.clone().unwrap_or_default();
        if job_finished(&job) || owned_by_jobset(&job.metadata) {
            // A JobSet's Job is placed as part of its JobSet.
            continue;
        }
        let key = (namespace.clone(), name.clone());
        let built = job_workload(&job, &at, namespace.clone(), name.clone());
        if running_jobs.contains(&key) {
            // A running Job is not placed again, but its pods still need its gang size and
            // template annotations (a replacement pod, a restart with half the gang bound).
            // Pods that failed on a failed node are recreated by the Job controller: the Job is
            // placed again for those (hot swap).
            match built {
                Ok(workload) => {
                    let lost: Vec<usize> = failed_indices
                        .get(&key)
                        .into_iter()
                        .flatten()
                        .filter(|i| !live_indices.get(&key).is_some_and(|l| l.contains(i)))
                        .copied()
                        .collect();
                    if !lost.is_empty() {
                        replacements.insert(key.clone(), lost);
                        pending.push((seq, workload.clone()));
                    }
                    all_jobs.insert(key, workload);
                }
                Err(e) => warnings.push(format!(
                    "{at} (Job {namespace}/{name}): {e}; its pods are treated as single pods"
                )),
            }
            continue;
        }
        let fail = |e: FieldError| LoadError::Object {
            at: at.clone(),
            object: Some(format!("Job {namespace}/{name}")),
            field: e.field,
            message: e.message,
        };
        let workload = built.map_err(fail)?;
        all_jobs.insert(key, workload.clone());
        pending.push((seq, workload));
    }

    let mut sets = BTreeMap::new();
    let set_fail = |at: &Source, what: String| {
        let at = at.clone();
        move |e: FieldError| LoadError::Object {
            at,
            object: Some(what),
            field: e.field,
            message: e.message,
        }
    };
    for Seen { seq, at, object } in jobsets {
        if object.finished() {
            continue;
        }
        let (key, entry) = SetEntry::of_jobset(&object, &at).map_err(set_fail(
            &at,
            format!("JobSet {}", label_of(&object.metadata)),
        ))?;
        if !running_sets.contains(&key) {
            pending.push((seq, entry.workload.clone()));
        }
        sets.insert(key, entry);
    }
    for Seen { seq, at, object } in lws {
        let (key, entry) = SetEntry::of_lws(&object, &at).map_err(set_fail(
            &at,
            format!("LeaderWorkerSet {}", label_of(&object.metadata)),
        ))?;
        for index in 0..entry.groups {
            let Some(w) = entry.group(&key, index) else {
                continue;
            };
            let group = GroupKey::lws_group(key.namespace.clone(), &key.name, index);
            if !running_sets.contains(&group) {
                pending.push((seq, w));
            }
        }
        sets.insert(key, entry);
    }

    pending.sort_by_key(|(seq, _)| *seq);
    Ok(Derived {
        bound_pods,
        workloads: pending.into_iter().map(|(_, w)| w).collect(),
        jobs: all_jobs,
        sets,
        replacements,
        lost_pods,
        scheduling_pods,
        warnings,
    })
}

/// `namespace/name` of an object, for messages.
fn label_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        namespace_or_default(meta),
        name_or_generate_name(meta)
    )
}

/// A Job a JobSet controls (its pods belong to the JobSet's workload).
pub fn owned_by_jobset(meta: &ObjectMeta) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.kind == "JobSet")
        || meta
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(keys::JOBSET_NAME_LABEL))
}

/// A pod in phase `Succeeded` or `Failed`: it holds nothing and is placed nowhere.
pub fn is_terminal(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// The capacity a pod holds: `Some` for a pod with `spec.nodeName` that has not finished
/// (whatever its phase says otherwise: `Pending` after binding, `Running`, `Unknown`).
pub fn bound_pod_of(pod: &Pod) -> Result<Option<BoundPod>, FieldError> {
    if is_terminal(pod) {
        return Ok(None);
    }
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(None);
    };
    let Some(node_name) = spec.node_name.clone().filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let meta = &pod.metadata;
    let annotations = meta.annotations.clone().unwrap_or_default();
    let requests = pod_requests(spec, "spec")?;
    Ok(Some(BoundPod {
        namespace: namespace_or_default(meta),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().filter(|u| !u.is_empty()),
        node_name,
        scoring: scoring_requests(spec, "spec", &requests)?,
        requests,
        tas: keys::TAS_POD_ANNOTATIONS
            .iter()
            .any(|k| annotations.contains_key(*k)),
        owner_job: controller_job_of(meta),
        group: GroupKey::of_pod(meta, Some(spec)),
        pod_set: PodSetHint::of_pod(meta, Some(spec)),
        index: PodIndex::of_pod(meta),
        terminating: meta.deletion_timestamp.is_some(),
        labels: meta.labels.clone().unwrap_or_default(),
        annotations,
        incarnation: super::incarnation::Incarnation::of_pod(meta),
    }))
}

/// The workload a pending pod belongs to when no Job controls it: its plain pod group
/// (`pod-group-name` label, sized by `pod-group-total-count`) or the pod alone. Used for pods
/// that arrive after loading (a scheduler's filter call).
pub fn workload_of_pod(pod: &Pod) -> Result<Workload, FieldError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let namespace = namespace_or_default(&pod.metadata);
    let mut pod_set = pending_pod_set(&pod.metadata, &spec, 1)?;
    let (kind, name) = match label_value(&pod.metadata, keys::POD_GROUP_NAME_LABEL) {
        Some(group) => {
            pod_set.spec.count = total_count(&pod.metadata)?;
            (WorkloadKind::PodGroup, group)
        }
        None => (WorkloadKind::Pod, name_or_generate_name(&pod.metadata)),
    };
    Ok(Workload {
        kind,
        namespace,
        name,
        queue_name: queue_name(&pod.metadata),
        pod_sets: vec![pod_set],
        source: Source::default(),
    })
}

/// Counts one pod of `role` into a plain pod group's PodSets: one per role, named by it, in
/// first-appearance order, as Kueue forms them. The first pod of a role gives its PodSet
/// (`template`, count 1).
pub(crate) fn count_pod_of_role(
    sets: &mut Vec<PendingPodSet>,
    role: &str,
    template: impl FnOnce() -> PendingPodSet,
) {
    match sets.iter_mut().find(|p| p.spec.name == role) {
        Some(set) => set.spec.count += 1,
        None => {
            let mut set = template();
            set.spec.name = role.to_string();
            set.spec.count = 1;
            sets.push(set);
        }
    }
}

/// A plain pod group's PodSets once its pods are counted: a group of one shape is the PodSet
/// `main` of its `total` count (pods may still come); several shapes keep the counts seen.
pub(crate) fn finish_group_pod_sets(sets: &mut [PendingPodSet], total: i32) {
    if let [only] = sets {
        only.spec.name = MAIN_POD_SET.to_string();
        only.spec.count = total;
    }
    for ps in sets.iter_mut() {
        ps.pods_per_replica = ps.spec.count;
    }
}

/// A pending pod of a plain pod group, as the cluster state tracks it until it binds.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingGroupPod {
    /// Its group.
    pub group: GroupKey,
    /// `metadata.name` (PodSets are ordered by their first pod's name).
    pub name: String,
    /// Its role: the PodSet of its shape.
    pub role: String,
    /// The group's `pod-group-total-count`.
    pub total: i32,
    /// Its LocalQueue.
    pub queue_name: Option<String>,
    /// Its PodSet (count 1), as its own workload would have it.
    pub pod_set: PendingPodSet,
}

/// The pending plain-group pod `pod` is, or `None` for a pod that is bound, finished, in no
/// plain pod group, or controlled by a Job or a set.
pub fn pending_group_pod(pod: &Pod) -> Result<Option<PendingGroupPod>, FieldError> {
    let meta = &pod.metadata;
    let group = GroupKey::of_pod(meta, pod.spec.as_ref());
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if group.kind != WorkloadKind::PodGroup || bound || is_terminal(pod) {
        return Ok(None);
    }
    let spec = pod.spec.clone().unwrap_or_default();
    Ok(Some(PendingGroupPod {
        name: name_or_generate_name(meta),
        role: pod_role(meta, &spec)?,
        total: total_count(meta)?,
        queue_name: queue_name(meta),
        pod_set: pending_pod_set(meta, &spec, 1)?,
        group,
    }))
}

/// `metadata.name`, or `generateName` while the API server has not named the object yet (a
/// CREATE in admission).
pub fn name_or_generate_name(meta: &ObjectMeta) -> String {
    meta.name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| meta.generate_name.clone())
        .unwrap_or_default()
}

/// Whether a pod asks for kube-tas: it names a queue (label or legacy annotation), carries a
/// `kueue.x-k8s.io/podset-*` annotation, or the queue stamp of a TAS Job's template.
pub fn pod_marks_tas(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(keys::QUEUE_NAME_LABEL))
        || meta.annotations.as_ref().is_some_and(|a| {
            a.contains_key(keys::QUEUE_NAME_ANNOTATION)
                || a.contains_key(keys::STAMP_QUEUE_NAME)
                || a.keys()
                    .any(|k| k.starts_with(keys::PODSET_ANNOTATION_PREFIX))
        })
}

/// Whether Kueue itself manages a pod (a cluster that runs Kueue beside kube-tas): it carries
/// Kueue's scheduling gate (`kueue.x-k8s.io/topology` or `kueue.x-k8s.io/admission`), the
/// `kueue.x-k8s.io/podset` label or the `kueue.x-k8s.io/workload` annotation. Such a pod is left
/// to Kueue: no patch, no plan; its usage still counts once it is bound.
pub fn managed_by_kueue(meta: &ObjectMeta, spec: Option<&PodSpec>) -> bool {
    let gated = spec
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|gates| {
            gates.iter().any(|g| {
                g.name == keys::KUEUE_TOPOLOGY_GATE || g.name == keys::KUEUE_ADMISSION_GATE
            })
        });
    gated
        || meta
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(keys::KUEUE_PODSET_LABEL))
        || meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(keys::KUEUE_WORKLOAD_ANNOTATION))
}

/// The group a Kueue `Workload` stands for: its controller owner when that is a Job or a
/// JobSet (Kueue's Workload of a Job is owned by it), in the Workload's namespace.
pub fn kueue_workload_owner(meta: &ObjectMeta) -> Option<GroupKey> {
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))?;
    let kind = match (owner.api_version.as_str(), owner.kind.as_str()) {
        ("batch/v1", "Job") => WorkloadKind::Job,
        (crate::cluster::sets::JOBSET_API_VERSION, "JobSet") => WorkloadKind::JobSet,
        _ => return None,
    };
    Some(GroupKey {
        kind,
        namespace: namespace_or_default(meta),
        name: owner.name.clone(),
    })
}

/// A Job as admission sees it (the webhook's `request.object`): one workload with the
/// PodSet `main`, sized as Kueue sizes it. The namespace is `default` when the object has none.
pub fn workload_of_job(job: &Job) -> Result<Workload, FieldError> {
    let namespace = namespace_or_default(&job.metadata);
    let name = name_or_generate_name(&job.metadata);
    job_workload(job, &Source::default(), namespace, name)
}

/// The workload of a Job's pod read from the pod alone, when the webhook stamped the Job's
/// template with the gang size and queue ([`keys::STAMP_POD_GROUP_TOTAL_COUNT`],
/// [`keys::STAMP_QUEUE_NAME`]): for a pod whose Job is not in the cluster view (yet).
/// `None` when the pod carries no stamp.
pub fn workload_of_stamped_job_pod(pod: &Pod, job: &str) -> Option<Result<Workload, FieldError>> {
    let count_text = annotation_value(&pod.metadata, keys::STAMP_POD_GROUP_TOTAL_COUNT)?;
    let build = || {
        let count = match count_text.parse::<i32>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(FieldError::new(
                    annotation_path(keys::STAMP_POD_GROUP_TOTAL_COUNT),
                    format!("must be a positive integer, got {count_text:?}"),
                ));
            }
        };
        let spec = pod.spec.clone().unwrap_or_default();
        Ok(Workload {
            kind: WorkloadKind::Job,
            namespace: namespace_or_default(&pod.metadata),
            name: job.to_string(),
            queue_name: annotation_value(&pod.metadata, keys::STAMP_QUEUE_NAME),
            pod_sets: vec![pending_pod_set(&pod.metadata, &spec, count)?],
            source: Source::default(),
        })
    };
    Some(build())
}

/// A plain pod group being collected.
struct Group {
    seq: usize,
    /// `Pod namespace/name` of its first pod, for messages.
    first: String,
    total: i32,
    workload: Workload,
}

/// A Job as one workload with the PodSet `main`.
fn job_workload(
    job: &Job,
    at: &Source,
    namespace: String,
    name: String,
) -> Result<Workload, FieldError> {
    let Some(spec) = &job.spec else {
        return Err(FieldError::new(
            "spec",
            "missing (a Job needs a pod template)",
        ));
    };
    let Some(pod_spec) = &spec.template.spec else {
        return Err(FieldError::new(
            "spec.template.spec",
            "missing (a Job needs a pod template)",
        ));
    };
    let count = job_pod_count(spec, "spec")?;
    let template_meta = spec.template.metadata.clone().unwrap_or_default();
    Ok(Workload {
        kind: WorkloadKind::Job,
        queue_name: queue_name(&job.metadata),
        pod_sets: vec![PendingPodSet {
            spec: pod_set_spec(MAIN_POD_SET, pod_spec, count, "spec.template.spec")?,
            annotations: template_meta.annotations.unwrap_or_default(),
            annotations_path: "spec.template.metadata.annotations".to_string(),
            pods_per_replica: count,
        }],
        source: at.clone(),
        namespace,
        name,
    })
}

/// Kueue's pod count of a Job: parallelism (1 when absent), unless fewer completions remain
/// to run. `path` is where the Job spec sits, for messages.
pub(super) fn job_pod_count(spec: &JobSpec, path: &str) -> Result<i32, FieldError> {
    let parallelism = non_negative(spec.parallelism, &format!("{path}.parallelism"))?.unwrap_or(1);
    let completions = non_negative(spec.completions, &format!("{path}.completions"))?;
    Ok(match completions {
        Some(c) if c < parallelism => c,
        _ => parallelism,
    })
}

pub(super) fn non_negative(value: Option<i32>, field: &str) -> Result<Option<i32>, FieldError> {
    match value {
        Some(v) if v < 0 => Err(FieldError::new(
            field,
            format!("must be greater than or equal to 0, got {v}"),
        )),
        _ => Ok(value),
    }
}

/// A Job with a `Complete` or `Failed` condition: it places nothing more.
pub fn job_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

/// The PodSet of a pending pod (count 1, or the group's total, set by the caller).
fn pending_pod_set(
    meta: &ObjectMeta,
    spec: &PodSpec,
    count: i32,
) -> Result<PendingPodSet, FieldError> {
    Ok(PendingPodSet {
        spec: pod_set_spec(MAIN_POD_SET, spec, count, "spec")?,
        annotations: meta.annotations.clone().unwrap_or_default(),
        annotations_path: "metadata.annotations".to_string(),
        pods_per_replica: count,
    })
}

/// Count, requests and scheduling constraints of PodSet `name`; `topology` is left to
/// admission.
pub(super) fn pod_set_spec(
    name: &str,
    spec: &PodSpec,
    count: i32,
    spec_path: &str,
) -> Result<PodSetSpec, FieldError> {
    let node_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    // `..Default::default()` keeps this compiling if topology/ adds fields to PodSetSpec.
    #[allow(clippy::needless_update)]
    Ok(PodSetSpec {
        name: name.to_string(),
        count,
        requests: pod_requests(spec, spec_path)?,
        topology: None,
        implied: false,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        required_affinity: node_affinity.and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .clone()
        }),
        preferred_affinity: node_affinity
            .and_then(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .clone()
            })
            .unwrap_or_default(),
        ..Default::default()
    })
}

/// `metadata.namespace`, `default` when absent or empty.
pub fn namespace_or_default(meta: &ObjectMeta) -> String {
    meta.namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

fn label_value(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .filter(|v| !v.is_empty())
        .cloned()
}

fn annotation_value(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .filter(|v| !v.is_empty())
        .cloned()
}

/// The LocalQueue named by the queue-name label, else by the legacy annotation.
pub(super) fn queue_name(meta: &ObjectMeta) -> Option<String> {
    label_value(meta, keys::QUEUE_NAME_LABEL)
        .or_else(|| annotation_value(meta, keys::QUEUE_NAME_ANNOTATION))
}

/// The name of the Job among the controller owner references.
pub fn controller_job_of(meta: &ObjectMeta) -> Option<String> {
    controller_job_ref(meta).map(|r| r.name.clone())
}

/// The controller `ownerReference` of kind `Job`, when there is one.
pub fn controller_job_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true) && r.kind == "Job")
}

fn annotation_path(key: &str) -> String {
    format!("metadata.annotations[{key:?}]")
}

/// The group's size from `pod-group-total-count`: a positive int32, as Kueue requires.
fn total_count(meta: &ObjectMeta) -> Result<i32, FieldError> {
    let path = annotation_path(keys::POD_GROUP_TOTAL_COUNT);
    let Some(value) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::POD_GROUP_TOTAL_COUNT))
    else {
        return Err(FieldError::new(
            path,
            format!(
                "missing (required with the {} label)",
                keys::POD_GROUP_NAME_LABEL
            ),
        ));
    };
    match value.parse::<i32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(FieldError::new(
            path,
            format!("must be a positive integer, got {value:?}"),
        )),
    }
}
