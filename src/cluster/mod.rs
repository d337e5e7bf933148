//! The cluster view: Nodes, Pods, Jobs and Kueue's Topology / ResourceFlavor / ClusterQueue /
//! LocalQueue, loaded from manifests (or, later, from live reflectors) into one [`Cluster`].
//!
//! What lives here:
//! * [`quantity`]: Kubernetes quantities and the `i64` units Kueue counts in;
//! * [`mod@pod_requests`]: a pod's effective requests (containers, init containers, sidecars,
//!   overhead, pod-level resources);
//! * [`kueue`]: serde types for Kueue's objects;
//! * [`pod_view`]: the parts of a pod spec placement and admission read, as a serde view;
//! * `load`: [`load_paths`], which reads files and folders of manifests and builds a
//!   [`Cluster`], naming the file, document, object and field of anything malformed.
//!
//! Invariants of a loaded [`Cluster`]: every object has a name; no two objects of one kind
//! share a namespace and name; every quantity parsed; nodes, bound pods and workloads are in
//! file order (files sorted by path within a folder, documents in stream order).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::topology::{NodeInfo, PodSetSpec, ResourceList};

pub mod admit;
pub mod group;
pub mod incarnation;
pub mod kueue;
pub mod live;
mod load;
pub mod meta_view;
pub mod pod_requests;
pub mod pod_resources;
pub mod pod_uid;
pub mod pod_view;
pub mod quantity;
pub mod role;
pub mod scheduling_groups;
pub mod sets;
pub mod state;
mod workloads;

pub use kueue::{ClusterQueue, KueueObjects, LocalQueue, ResourceFlavor, Topology};
pub use load::{LoadError, load_paths, load_text, yaml_options};
pub use pod_requests::pod_requests;
pub use quantity::{QuantityError, QuantityValue, parse_quantity};
pub use workloads::{
    PendingGroupPod, bound_pod_of, controller_job_of, controller_job_ref, is_terminal,
    job_finished, kueue_workload_owner, managed_by_kueue, name_or_generate_name,
    namespace_or_default, owned_by_jobset, pending_group_pod, pod_marks_tas, workload_of_job,
    workload_of_pod, workload_of_stamped_job_pod,
};

/// Everything kube-tas knows about a cluster.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// All nodes, in file order (ready or not; placement decides which count).
    pub nodes: Vec<NodeInfo>,
    /// Pods with `spec.nodeName` set whose phase is neither `Succeeded` nor `Failed`.
    pub bound_pods: Vec<BoundPod>,
    /// Pending workloads (Jobs, single pods and plain pod groups), in file order.
    pub workloads: Vec<Workload>,
    /// Every Job that has not finished, pending or running, by (namespace, name): where a
    /// pod that names its Job finds its gang size and template annotations.
    pub jobs: BTreeMap<(String, String), Workload>,
    /// Every JobSet that has not finished and every LeaderWorkerSet, by the set's own key.
    pub sets: BTreeMap<group::GroupKey, sets::SetEntry>,
    /// Running Jobs placed again for pods that failed on a failed node: (namespace, name) →
    /// the completion indices their controller recreates. Such a Job is also in `workloads`.
    pub replacements: BTreeMap<(String, String), Vec<usize>>,
    /// Pods that failed on a failed node (not Ready, or gone): where their groups lost them.
    pub lost_pods: Vec<LostPod>,
    /// Kueue's Topology, ResourceFlavor, ClusterQueue and LocalQueue objects.
    pub kueue: KueueObjects,
    /// Workload-API `PodGroup`s and `CompositePodGroup`s, in file order.
    pub scheduling_groups: Vec<scheduling_groups::SchedulingGroup>,
    /// Pending pods naming a Workload-API PodGroup, in file order.
    pub scheduling_pods: Vec<k8s_openapi::api::core::v1::Pod>,
    /// Things skipped on the way in (unsupported kinds, ...), one sentence each.
    pub warnings: Vec<String>,
}

/// A pod that failed on a failed node: its controller recreates it, and the new pod is placed
/// where the group needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostPod {
    /// Its group.
    pub group: group::GroupKey,
    /// Its PodSet, as the pod said.
    pub pod_set: group::PodSetHint,
    /// Which pod of the PodSet it was.
    pub index: group::PodIndex,
    /// The node it failed on.
    pub node_name: String,
}

/// A pod that holds capacity on a node.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundPod {
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`, when the manifest has one.
    pub uid: Option<String>,
    /// `spec.nodeName`.
    pub node_name: String,
    /// Effective requests ([`pod_requests()`]), without the `pods` slot.
    pub requests: ResourceList,
    /// CPU and memory as kube-scheduler's scoring counts them (non-zero defaults).
    pub scoring: ResourceList,
    /// Carries one of [`crate::keys::TAS_POD_ANNOTATIONS`]: its usage is TAS usage.
    pub tas: bool,
    /// The name of the Job that controls it (a controller `ownerReference` of kind `Job`).
    pub owner_job: Option<String>,
    /// The group it belongs to ([`group::GroupKey::of_pod`]).
    pub group: group::GroupKey,
    /// Its PodSet in the group, as far as the pod says ([`group::PodSetHint::of_pod`]).
    pub pod_set: group::PodSetHint,
    /// Which pod of its PodSet it is ([`group::PodIndex::of_pod`]).
    pub index: group::PodIndex,
    /// It is being deleted (`metadata.deletionTimestamp` is set): it still holds capacity,
    /// but no longer progresses.
    pub terminating: bool,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// Which creation of its Job made it.
    pub incarnation: incarnation::Incarnation,
}

impl BoundPod {
    /// The key the cluster state records it under: its uid, `namespace/name` without one
    /// (only in hand-written manifests).
    pub fn key(&self) -> String {
        self.uid
            .clone()
            .unwrap_or_else(|| format!("{}/{}", self.namespace, self.name))
    }
}

/// What kind of object a pending workload comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// A `batch/v1` Job.
    Job,
    /// A single pod that no Job controls.
    Pod,
    /// Pods joined by `kueue.x-k8s.io/pod-group-name` (+ `pod-group-total-count`).
    PodGroup,
    /// A `jobset.x-k8s.io` JobSet: one PodSet per replicated Job.
    JobSet,
    /// One replica group of a `leaderworkerset.x-k8s.io` LeaderWorkerSet: a leader and its
    /// workers.
    LeaderWorkerSet,
    /// A Workload-API `PodGroup` (`scheduling.k8s.io`, or kube-tas's `kube-tas.io` copy): pods
    /// naming it in `spec.schedulingGroup.podGroupName` or the `kube-tas.io/pod-group` label.
    SchedulingGroup,
}

impl WorkloadKind {
    /// The name shown in messages and output (`Job`, `Pod`, `PodGroup`, `JobSet`,
    /// `LeaderWorkerSet`; a Workload-API PodGroup is a `PodGroup` too).
    pub fn as_str(&self) -> &'static str {
        match self {
            WorkloadKind::Job => "Job",
            WorkloadKind::Pod => "Pod",
            WorkloadKind::PodGroup => "PodGroup",
            WorkloadKind::JobSet => "JobSet",
            WorkloadKind::LeaderWorkerSet => "LeaderWorkerSet",
            WorkloadKind::SchedulingGroup => "PodGroup",
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A workload waiting to be placed.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Where it comes from.
    pub kind: WorkloadKind,
    /// Its namespace (`default` when absent).
    pub namespace: String,
    /// The Job's, pod's or pod group's name.
    pub name: String,
    /// `kueue.x-k8s.io/queue-name` (label, else annotation), naming a LocalQueue.
    pub queue_name: Option<String>,
    /// The PodSets to place (one, named `main`, for every kind loaded today).
    pub pod_sets: Vec<PendingPodSet>,
    /// The manifest it was read from.
    pub source: Source,
}

/// One PodSet of a pending workload, with what admission still needs to decide.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingPodSet {
    /// Count, requests, scheduling constraints. `topology` is `None` and `implied` false:
    /// admission fills them from `annotations` and the ClusterQueue.
    pub spec: PodSetSpec,
    /// The pod template's annotations (where the `kueue.x-k8s.io/podset-*` keys live).
    pub annotations: BTreeMap<String, String>,
    /// Where those annotations sit in the object, for messages:
    /// `spec.template.metadata.annotations` (Job) or `metadata.annotations` (Pod).
    pub annotations_path: String,
    /// Pods per replica: per Job of a JobSet's replicated Job (ranks are `job index × this +
    /// completion index`); the PodSet's count otherwise.
    pub pods_per_replica: i32,
}

/// Where an object was read: a file, the 1-based document in its YAML/JSON stream and, for
/// objects inside a `List`, the index in `items`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Source {
    /// The file.
    pub path: PathBuf,
    /// The document number, from 1.
    pub document: usize,
    /// The index in the document's `items` when the document is a `List`.
    pub item: Option<usize>,
}

impl fmt::Display for Source {
    /// `cluster.yaml: document 3`, or `cluster.yaml: document 1 items[4]` inside a List.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.path.display(), self.document)?;
        if let Some(item) = self.item {
            write!(f, " items[{item}]")?;
        }
        Ok(())
    }
}

/// A problem with one field of an object: `{field}: {message}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The field path inside the object, e.g. `status.allocatable.cpu`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}
