//! Every label, annotation and well-known key kube-tas reads or writes, in one place.
//!
//! The `kueue.x-k8s.io/...` keys are Kueue's own: users submit the same Jobs to kube-tas as
//! they would to Kueue, so the spelling must match Kueue's constants exactly.

/// Pod-template annotation: all pods of the PodSet in one domain of this level.
pub const PODSET_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// Pod-template annotation: try this level, climb on failure.
pub const PODSET_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// Pod-template annotation: TAS capacity check with no compactness constraint (a bool).
pub const PODSET_UNCONSTRAINED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
/// Pod-template annotation: each slice inside one domain of this level.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-slice-required-topology";
/// Pod-template annotation: the slice size (int32 ≥ 1).
pub const PODSET_SLICE_SIZE: &str = "kueue.x-k8s.io/podset-slice-size";
/// Pod-template annotation: multi-layer slice constraints, a JSON array outermost first.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
/// What every PodSet topology annotation starts with.
pub const PODSET_ANNOTATION_PREFIX: &str = "kueue.x-k8s.io/podset-";
/// Pod-template annotation: joins two PodSets (leader and workers).
pub const PODSET_GROUP_NAME: &str = "kueue.x-k8s.io/podset-group-name";

/// The annotations whose presence makes a bound pod a TAS pod (its usage is not "non-TAS").
pub const TAS_POD_ANNOTATIONS: [&str; 5] = [
    PODSET_REQUIRED_TOPOLOGY,
    PODSET_PREFERRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    PODSET_UNCONSTRAINED_TOPOLOGY,
];

/// Job / pod label naming the LocalQueue.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Legacy annotation form of the queue name (Kueue still reads it).
pub const QUEUE_NAME_ANNOTATION: &str = "kueue.x-k8s.io/queue-name";
/// Plain pod groups: the group's name (label).
pub const POD_GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";

/// The label a pod names its Workload-API `PodGroup` with on a cluster that does not serve
/// `spec.schedulingGroup` (kube-tas's own `kube-tas.io/v1alpha1` PodGroups).
pub const SCHEDULING_GROUP_LABEL: &str = "kube-tas.io/pod-group";
/// Plain pod groups: how many pods the group has (annotation).
pub const POD_GROUP_TOTAL_COUNT: &str = "kueue.x-k8s.io/pod-group-total-count";

/// The node label of the lowest level in "hostname-lowest" mode.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The taint the node lifecycle controller puts on a node that is not Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The taint that stands for `spec.unschedulable` (kube-scheduler's `NodeUnschedulable`).
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
/// Completion index of an Indexed Job's pod.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The uid of the Job that made a pod, as the Job controller labels it.
pub const JOB_CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The same, as Kubernetes before 1.27 labelled it (still set beside the new one).
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";

/// Pod-template annotation the webhook stamps on a TAS Job: the gang size (Kueue's pod
/// count of the Job), so the extender knows the group of a Job's pod even before its cluster
/// view shows the Job.
pub const STAMP_POD_GROUP_TOTAL_COUNT: &str = "kube-tas.io/pod-group-total-count";
/// Pod-template annotation the webhook stamps on a TAS Job: the Job's LocalQueue, which the
/// pods do not otherwise carry (the queue-name label sits on the Job).
pub const STAMP_QUEUE_NAME: &str = "kube-tas.io/queue-name";

/// Label the JobSet controller puts on its Jobs and their pods: the JobSet's name.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// Label on a JobSet's Jobs and pods: the replicated Job (Kueue's PodSet) they belong to.
pub const JOBSET_REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// Label on a JobSet's Jobs and pods: the Job's index among its replicated Job's replicas.
pub const JOBSET_JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";
/// Label the LeaderWorkerSet controller puts on its pods: the LeaderWorkerSet's name.
pub const LWS_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
/// Label on a LeaderWorkerSet's pods: the replica group (one Kueue workload each).
pub const LWS_GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// Label on a LeaderWorkerSet's pods: the pod's index in its group (0 is the leader).
pub const LWS_WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// Pod-template annotation the webhook stamps on every PodSet template of a TAS workload:
/// the PodSet the template's pods belong to.
pub const STAMP_POD_SET: &str = "kube-tas.io/pod-set";
/// Pod annotation with which Kueue (or the user) fixes a plain pod group pod's role: the
/// PodSet it belongs to.
pub const ROLE_HASH: &str = "kueue.x-k8s.io/role-hash";

/// Kueue's scheduling gate on the pods of a workload its TAS places.
pub const KUEUE_TOPOLOGY_GATE: &str = "kueue.x-k8s.io/topology";
/// Kueue's scheduling gate on pods of a workload it has not admitted yet.
pub const KUEUE_ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";
/// The label Kueue puts on the pods of an admitted workload: their PodSet.
pub const KUEUE_PODSET_LABEL: &str = "kueue.x-k8s.io/podset";
/// The annotation Kueue puts on the pods of an admitted workload: its Workload's name.
pub const KUEUE_WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/workload";
