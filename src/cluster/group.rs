//! Which pod group a pod belongs to, and which PodSet of it, read from the pod's own metadata
//! (its JobSet or LeaderWorkerSet labels, its controller Job, its
//! `kueue.x-k8s.io/pod-group-name` label), never from memory: the same answer for a pod
//! kube-scheduler sends, a pod the watch shows bound, and a pod after a restart.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::role::pod_role;
use super::{WorkloadKind, controller_job_of, name_or_generate_name, namespace_or_default};
use crate::keys;

/// A group that is placed as a whole (one Kueue workload): a JobSet's pods, one replica group
/// of a LeaderWorkerSet (named `<name>-<group index>`), a Job's pods, a plain pod group, or a
/// single pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    /// Job, PodGroup or Pod.
    pub kind: WorkloadKind,
    /// The namespace.
    pub namespace: String,
    /// The Job's, pod group's or pod's name.
    pub name: String,
}

impl fmt::Display for GroupKey {
    /// `Job default/train`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

impl GroupKey {
    /// The group of a pod with this metadata and spec: the Workload-API PodGroup it names
    /// ([`scheduling_group_name`]: `spec.schedulingGroup.podGroupName` or the
    /// `kube-tas.io/pod-group` label; an explicit group wins over everything below), its
    /// JobSet's (a Job's pod with the JobSet name label), its LeaderWorkerSet replica group's
    /// (name and group-index labels), its controller Job's, else its plain pod group's (a
    /// non-empty `pod-group-name` label), else the pod's own.
    pub fn of_pod(meta: &ObjectMeta, spec: Option<&PodSpec>) -> Self {
        let namespace = namespace_or_default(meta);
        if let Some(name) = scheduling_group_name(meta, spec) {
            return GroupKey {
                kind: WorkloadKind::SchedulingGroup,
                namespace,
                name,
            };
        }
        Self::of_controller(meta)
    }

    /// The group of a pod by its controller and Kueue's labels only (as [`Self::of_pod`], the
    /// Workload-API PodGroup aside): which JobSet, LeaderWorkerSet replica group, Job or plain
    /// pod group it is part of, else the pod's own.
    pub fn of_controller(meta: &ObjectMeta) -> Self {
        let namespace = namespace_or_default(meta);
        let job = controller_job_of(meta);
        if job.is_some()
            && let Some(jobset) = label(meta, keys::JOBSET_NAME_LABEL)
        {
            return GroupKey {
                kind: WorkloadKind::JobSet,
                namespace,
                name: jobset.to_string(),
            };
        }
        if let (Some(lws), Some(index)) = (
            label(meta, keys::LWS_NAME_LABEL),
            label(meta, keys::LWS_GROUP_INDEX_LABEL),
        ) {
            return GroupKey::lws_group(namespace, lws, index);
        }
        let group_label = label(meta, keys::POD_GROUP_NAME_LABEL);
        match (job, group_label) {
            (Some(job), _) => GroupKey {
                kind: WorkloadKind::Job,
                namespace,
                name: job,
            },
            (None, Some(g)) => GroupKey {
                kind: WorkloadKind::PodGroup,
                namespace,
                name: g.to_string(),
            },
            (None, None) => GroupKey {
                kind: WorkloadKind::Pod,
                namespace,
                name: name_or_generate_name(meta),
            },
        }
    }

    /// Replica group `index` of LeaderWorkerSet `lws`: `<lws>-<index>`, as Kueue names the
    /// group's workload.
    pub fn lws_group(namespace: String, lws: &str, index: impl fmt::Display) -> Self {
        GroupKey {
            kind: WorkloadKind::LeaderWorkerSet,
            namespace,
            name: format!("{lws}-{index}"),
        }
    }

    /// For a LeaderWorkerSet replica group: the LeaderWorkerSet's name and the group index.
    pub fn lws_parts(&self) -> Option<(&str, u32)> {
        if self.kind != WorkloadKind::LeaderWorkerSet {
            return None;
        }
        let (lws, index) = self.name.rsplit_once('-')?;
        Some((lws, index.parse().ok()?))
    }

    /// Whether pods of this group are placed together (anything but a single pod).
    pub fn is_gang(&self) -> bool {
        self.kind != WorkloadKind::Pod
    }
}

/// The Workload-API PodGroup a pod names: `spec.schedulingGroup.podGroupName` (clusters that
/// serve the Workload API keep the field), else the `kube-tas.io/pod-group` label (clusters
/// that drop it). Empty names count as none.
pub fn scheduling_group_name(meta: &ObjectMeta, spec: Option<&PodSpec>) -> Option<String> {
    spec.and_then(|s| s.scheduling_group.as_ref())
        .and_then(|g| g.pod_group_name.as_deref())
        .or_else(|| label(meta, keys::SCHEDULING_GROUP_LABEL))
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// Which PodSet of its workload a pod belongs to, as far as the pod itself says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum PodSetHint {
    /// The workload's only PodSet (`main`: a Job, a plain pod group, a single pod).
    #[default]
    Main,
    /// A named PodSet: a JobSet's replicated Job, or the webhook's PodSet stamp.
    Named(Arc<str>),
    /// A LeaderWorkerSet pod by its worker index: 0 is the leader.
    LwsWorker(usize),
    /// A plain pod group's pod by its role ([`super::role::pod_role`]).
    Role(Arc<str>),
}

/// The PodSet of a LeaderWorkerSet group's leader (when the set has a leader template).
pub const LWS_LEADER_POD_SET: &str = "leader";
/// The PodSet of a LeaderWorkerSet group's workers (when the set has a leader template).
pub const LWS_WORKER_POD_SET: &str = "worker";

impl PodSetHint {
    /// What a pod's labels and annotations (and, for a plain pod group's pod, its spec's
    /// role) say.
    pub fn of_pod(meta: &ObjectMeta, spec: Option<&PodSpec>) -> Self {
        if label(meta, keys::JOBSET_NAME_LABEL).is_some()
            && let Some(rj) = label(meta, keys::JOBSET_REPLICATED_JOB_LABEL)
        {
            return PodSetHint::Named(rj.into());
        }
        if label(meta, keys::LWS_NAME_LABEL).is_some()
            && let Some(i) = label(meta, keys::LWS_WORKER_INDEX_LABEL).and_then(|v| v.parse().ok())
        {
            return PodSetHint::LwsWorker(i);
        }
        if let Some(name) = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::STAMP_POD_SET))
            .filter(|v| !v.is_empty())
        {
            return PodSetHint::Named(name.as_str().into());
        }
        if controller_job_of(meta).is_none()
            && label(meta, keys::POD_GROUP_NAME_LABEL).is_some()
            && let Some(spec) = spec
            && let Ok(role) = pod_role(meta, spec)
        {
            return PodSetHint::Role(role.into());
        }
        PodSetHint::Main
    }

    /// Takes `other`'s copy of the name when both name the same PodSet or role, so that the
    /// pods of a group keep one copy of it.
    pub fn share(&mut self, other: &Self) {
        match (self, other) {
            (PodSetHint::Named(mine), PodSetHint::Named(theirs))
            | (PodSetHint::Role(mine), PodSetHint::Role(theirs))
                if mine == theirs =>
            {
                *mine = Arc::clone(theirs);
            }
            _ => {}
        }
    }

    /// Whether this hint keeps its name in the same allocation as `other` (tests).
    pub fn is_shared_with(&self, other: &Self) -> bool {
        match (self, other) {
            (PodSetHint::Named(a), PodSetHint::Named(b))
            | (PodSetHint::Role(a), PodSetHint::Role(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The PodSet among a workload's PodSet names: a named one by its name; a
    /// LeaderWorkerSet's leader is `leader` and its workers `worker` when the workload has
    /// them, else `main`; a role is the PodSet of that role, else `main` (a group of one
    /// shape); `Main` is `main`, or the workload's only PodSet.
    pub fn resolve<'a>(&self, names: &[&'a str]) -> Option<&'a str> {
        let find = |n: &str| names.iter().copied().find(|m| *m == n);
        match self {
            PodSetHint::Named(n) => find(n),
            PodSetHint::LwsWorker(0) => find(LWS_LEADER_POD_SET).or_else(|| find("main")),
            PodSetHint::LwsWorker(_) => find(LWS_WORKER_POD_SET).or_else(|| find("main")),
            PodSetHint::Main => find("main").or(match names {
                [only] => Some(*only),
                _ => None,
            }),
            PodSetHint::Role(role) => find(role).or_else(|| find("main")),
        }
    }

    /// The pod's rank inside PodSet `pod_set`, so that neighbouring ranks take neighbouring
    /// seats: a JobSet pod's `job index × pods per Job + completion index`, a
    /// LeaderWorkerSet worker's index (from 0 among the workers when the leader has its own
    /// PodSet), a Job pod's completion index.
    pub fn rank(
        &self,
        pod_set: &str,
        completion_index: Option<u32>,
        job_index: Option<u32>,
        pods_per_replica: usize,
    ) -> Option<usize> {
        let (completion_index, job_index) = (
            completion_index.map(|c| c as usize),
            job_index.map(|j| j as usize),
        );
        match self {
            PodSetHint::LwsWorker(i) if pod_set == LWS_WORKER_POD_SET => i.checked_sub(1),
            PodSetHint::LwsWorker(0) if pod_set == LWS_LEADER_POD_SET => Some(0),
            PodSetHint::LwsWorker(i) => Some(*i),
            _ => match (job_index, completion_index) {
                (Some(j), c) => j
                    .checked_mul(pods_per_replica)
                    .and_then(|r| r.checked_add(c.unwrap_or(0))),
                (None, c) => c,
            },
        }
    }
}

/// Which pod of its PodSet a pod is, as its controllers number it: a JobSet's Job index and an
/// Indexed Job's completion index. A pod recreated for a lost one has the same numbers (a
/// pod of a NonIndexed Job or a plain group has none: any lost pod of its PodSet is its
/// predecessor).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PodIndex {
    /// `jobset.sigs.k8s.io/job-index`.
    pub job: Option<u32>,
    /// `batch.kubernetes.io/job-completion-index` (annotation, else label). Kubernetes keeps
    /// it an `int32`, so 32 bits hold every valid one.
    pub completion: Option<u32>,
}

impl PodIndex {
    /// The numbers a pod with this metadata carries (a value that is not a number counts as
    /// none; the extender's own reading of the pod names such a field as an error).
    pub fn of_pod(meta: &ObjectMeta) -> Self {
        let completion = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::JOB_COMPLETION_INDEX))
            .map(String::as_str)
            .or_else(|| label(meta, keys::JOB_COMPLETION_INDEX))
            .and_then(|v| v.parse().ok());
        let job = label(meta, keys::JOBSET_JOB_INDEX_LABEL).and_then(|v| v.parse().ok());
        Self { job, completion }
    }
}

/// A non-empty label value.
fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}
