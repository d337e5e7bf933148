//! What each watched kind does to the [`ClusterState`]: how an object is keyed, applied and
//! deleted, and which objects a relist may remove. Objects are converted on the way in to
//! what placement reads (a node's labels, taints, readiness and allocatable; a bound pod's
//! node, requests and group; a Job's gang), so no watched object is kept whole.

use std::fmt::Debug;
use std::time::Instant;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use crate::cluster::group::GroupKey;
use crate::cluster::incarnation::Incarnation;
use crate::cluster::kueue::{ClusterQueue, KueueWorkload, LocalQueue, ResourceFlavor, Topology};
use crate::cluster::live::watched_fields::{NodeFields, PodFields, watched_object};
use crate::cluster::load::node_info;
use crate::cluster::sets::{JobSet, LeaderWorkerSet, SetEntry};
use crate::cluster::state::ClusterState;
use crate::cluster::{
    Source, WorkloadKind, bound_pod_of, is_terminal, job_finished, namespace_or_default,
    owned_by_jobset, pending_group_pod, workload_of_job,
};
use crate::keys;

mod scheduling;
pub use scheduling::{
    CompositePodGroupV1alpha3, KubeTasCompositePodGroup, KubeTasPodGroup, PendingMemberPod,
    PodGroupV1alpha2, PodGroupV1alpha3, PodGroupV1beta1,
};

/// A kind kube-tas watches.
pub trait WatchedKind:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// The kind's plural, for logs and metric labels (`nodes`, `topologies`).
    const NAME: &'static str;

    /// An add-on kind (JobSet, LeaderWorkerSet): when kube-tas may not read it (403), it is
    /// reported as not served instead of holding back readiness.
    const OPTIONAL: bool = false;

    /// List and watch options (selectors, page size).
    fn config() -> watcher::Config {
        watcher::Config::default()
    }

    /// The object's key in the state.
    fn key(obj: &Self) -> String;

    /// An object added or changed.
    fn apply(state: &mut ClusterState, obj: &Self);

    /// The object under `key` is gone.
    fn delete_key(state: &mut ClusterState, key: &str);

    /// The object is gone (a watch's delete event, with its last state).
    fn delete(state: &mut ClusterState, obj: &Self) {
        Self::delete_key(state, &Self::key(obj));
    }

    /// Keys of every object of this kind the state holds from the cluster: what a relist
    /// that no longer lists them removes.
    fn keys(state: &ClusterState) -> Vec<String>;

    /// A relist begins (`Init`, before the list is requested).
    fn relist_began(_state: &mut ClusterState, _now: Instant) {}
}

fn name_of<K: Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

fn namespaced_key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", namespace_or_default(obj.meta()), name_of(obj))
}

fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

watched_object!(
    /// A node as the node watch reads it.
    WatchedNode(Node) through NodeFields
);

impl WatchedKind for WatchedNode {
    const NAME: &'static str = "nodes";

    fn key(obj: &Self) -> String {
        name_of(&obj.0)
    }

    fn apply(state: &mut ClusterState, WatchedNode(obj): &Self) {
        let name = name_of(obj);
        match node_info(obj.clone(), name.clone()) {
            Ok(info) => {
                state.apply_node(info);
            }
            Err(e) => {
                // A node whose allocatable cannot be read is left out rather than guessed.
                tracing::warn!(node = %name, error = %e, "node skipped: unreadable field");
                state.delete_node(&name);
            }
        }
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.delete_node(key);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.node_names()
    }
}

/// The pod's key: its uid (`namespace/name` without one, as the state records it).
fn pod_key(pod: &Pod) -> String {
    pod.metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| namespaced_key(pod))
}

watched_object!(
    /// A pod as the pod watch reads it: only pods that can hold capacity (bound, not
    /// finished).
    WatchedPod(Pod) through PodFields
);

impl WatchedKind for WatchedPod {
    const NAME: &'static str = "pods";

    /// Only pods that can hold capacity: bound and not finished. A pod that gets bound
    /// arrives as added, one that finishes leaves as deleted.
    fn config() -> watcher::Config {
        watcher::Config::default()
            .fields("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
    }

    fn key(obj: &Self) -> String {
        pod_key(&obj.0)
    }

    fn apply(state: &mut ClusterState, WatchedPod(obj): &Self) {
        match bound_pod_of(obj) {
            Ok(Some(bound)) => state.apply_bound_pod(&bound),
            Ok(None) => {
                let key = pod_key(obj);
                let phase = obj.status.as_ref().and_then(|s| s.phase.as_deref());
                if phase == Some("Succeeded") {
                    state.remove_pod_not_replaced(&key);
                } else {
                    state.apply_unbound_pod(&key, is_terminal(obj));
                }
            }
            Err(e) => tracing::warn!(
                pod = %namespaced_key(obj),
                error = %e,
                "pod's usage not counted: unreadable requests"
            ),
        }
    }

    /// A pod a relist no longer shows: succeeded or deleted meanwhile, which the list cannot
    /// tell (it shows no finished pod), so no successor is expected on its node; unless the
    /// watch had seen it being deleted, which it then was.
    fn delete_key(state: &mut ClusterState, key: &str) {
        if state.pod(key).is_some_and(|p| p.terminating) {
            state.remove_pod(key);
        } else {
            state.remove_pod_not_replaced(key);
        }
    }

    /// A pod that succeeded leaves the watch (its field selector) as a deletion: nothing is
    /// recreated for it, so its place is not remembered.
    fn delete(state: &mut ClusterState, WatchedPod(obj): &Self) {
        let phase = obj.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase == Some("Succeeded") {
            state.remove_pod_not_replaced(&pod_key(obj));
        } else {
            state.remove_pod(&pod_key(obj));
        }
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.watched_pod_uids()
    }

    fn relist_began(state: &mut ClusterState, now: Instant) {
        state.pod_relist_began(now);
    }
}

impl WatchedKind for Job {
    const NAME: &'static str = "jobs";

    fn key(obj: &Self) -> String {
        namespaced_key(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        let namespace = namespace_or_default(&obj.metadata);
        let name = name_of(obj);
        if job_finished(obj) || owned_by_jobset(&obj.metadata) {
            // A JobSet's Job is placed as part of its JobSet (watched on its own).
            state.delete_job(&namespace, &name);
            return;
        }
        match workload_of_job(obj) {
            Ok(workload) => state.apply_job(
                &namespace,
                &name,
                workload,
                Incarnation::of_uid(obj.metadata.uid.as_deref()),
            ),
            Err(e) => {
                tracing::warn!(job = %format_args!("{namespace}/{name}"), error = %e,
                    "Job not known to placement: its pods are treated as single pods");
                state.delete_job(&namespace, &name);
            }
        }
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        let (namespace, name) = split_key(key);
        state.delete_job(namespace, name);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state
            .job_keys()
            .into_iter()
            .map(|(ns, n)| format!("{ns}/{n}"))
            .collect()
    }
}

impl WatchedKind for Topology {
    const NAME: &'static str = "topologies";

    fn key(obj: &Self) -> String {
        name_of(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        state.apply_topology(&name_of(obj), obj.clone());
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.delete_topology(key);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.kueue().topologies.keys().cloned().collect()
    }
}

impl WatchedKind for ResourceFlavor {
    const NAME: &'static str = "resourceflavors";

    fn key(obj: &Self) -> String {
        name_of(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        state.apply_resource_flavor(&name_of(obj), obj.clone());
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.delete_resource_flavor(key);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.kueue().resource_flavors.keys().cloned().collect()
    }
}

impl WatchedKind for ClusterQueue {
    const NAME: &'static str = "clusterqueues";

    fn key(obj: &Self) -> String {
        name_of(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        state.apply_cluster_queue(&name_of(obj), obj.clone());
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.delete_cluster_queue(key);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.kueue().cluster_queues.keys().cloned().collect()
    }
}

impl WatchedKind for LocalQueue {
    const NAME: &'static str = "localqueues";

    fn key(obj: &Self) -> String {
        namespaced_key(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        let namespace = namespace_or_default(&obj.metadata);
        state.apply_local_queue(&namespace, &name_of(obj), obj.clone());
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        let (namespace, name) = split_key(key);
        state.delete_local_queue(namespace, name);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state
            .kueue()
            .local_queues
            .keys()
            .map(|(ns, n)| format!("{ns}/{n}"))
            .collect()
    }
}

/// Kueue's Workloads: the Jobs and JobSets they stand for are Kueue's to place (kube-tas
/// leaves their pods alone). Optional: a cluster without Kueue does not serve the kind, and
/// RBAC without it only loses this coexistence check.
impl WatchedKind for KueueWorkload {
    const NAME: &'static str = "workloads";
    const OPTIONAL: bool = true;

    fn key(obj: &Self) -> String {
        namespaced_key(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        let owner = crate::cluster::kueue_workload_owner(&obj.metadata);
        state.apply_kueue_workload(&namespaced_key(obj), owner);
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.delete_kueue_workload(key);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.kueue_workload_keys()
    }
}

/// The set's key in the state (`JobSet ns/name`, `LeaderWorkerSet ns/name`) from a watch key.
fn set_key(kind: WorkloadKind, key: &str) -> GroupKey {
    let (namespace, name) = split_key(key);
    GroupKey {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// Applies a set's entry, or forgets the set when it cannot be read (its pods then get an
/// extender error naming the set, never a silent placement).
fn apply_set(
    state: &mut ClusterState,
    kind: WorkloadKind,
    key: &str,
    entry: Result<(GroupKey, SetEntry), crate::cluster::FieldError>,
) {
    match entry {
        Ok((key, entry)) => state.apply_set(key, entry),
        Err(e) => {
            tracing::warn!(set = %format_args!("{kind} {key}"), error = %e,
                "set not known to placement: its pods get an error until it is fixed");
            state.delete_set(&set_key(kind, key));
        }
    }
}

impl WatchedKind for JobSet {
    const NAME: &'static str = "jobsets";
    const OPTIONAL: bool = true;

    fn key(obj: &Self) -> String {
        namespaced_key(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        let key = namespaced_key(obj);
        if obj.finished() {
            state.delete_set(&set_key(WorkloadKind::JobSet, &key));
            return;
        }
        let entry = SetEntry::of_jobset(obj, &Source::default());
        apply_set(state, WorkloadKind::JobSet, &key, entry);
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.delete_set(&set_key(WorkloadKind::JobSet, key));
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state
            .set_keys(WorkloadKind::JobSet)
            .into_iter()
            .map(|k| format!("{}/{}", k.namespace, k.name))
            .collect()
    }
}

impl WatchedKind for LeaderWorkerSet {
    const NAME: &'static str = "leaderworkersets";
    const OPTIONAL: bool = true;

    fn key(obj: &Self) -> String {
        namespaced_key(obj)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        let key = namespaced_key(obj);
        let entry = SetEntry::of_lws(obj, &Source::default());
        apply_set(state, WorkloadKind::LeaderWorkerSet, &key, entry);
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.delete_set(&set_key(WorkloadKind::LeaderWorkerSet, key));
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state
            .set_keys(WorkloadKind::LeaderWorkerSet)
            .into_iter()
            .map(|k| format!("{}/{}", k.namespace, k.name))
            .collect()
    }
}

watched_object!(
    /// A pending pod of a plain pod group: the second watch on pods (label
    /// `kueue.x-k8s.io/pod-group-name`, field `spec.nodeName=`), so that a group's PodSets (one
    /// per pod shape) and whether all its pods exist are known before any of them binds. A pod
    /// that binds leaves this watch (as a deletion) and shows up in the pod watch.
    PendingGroupPod(Pod) through PodFields
);

impl WatchedKind for PendingGroupPod {
    const NAME: &'static str = "podgrouppods";

    fn config() -> watcher::Config {
        watcher::Config::default()
            .labels(keys::POD_GROUP_NAME_LABEL)
            .fields("spec.nodeName=")
    }

    fn key(obj: &Self) -> String {
        pod_key(&obj.0)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        let key = pod_key(&obj.0);
        match pending_group_pod(&obj.0) {
            Ok(Some(pod)) => state.apply_pending_group_pod(&key, pod),
            Ok(None) => {
                state.remove_pending_group_pod(&key);
            }
            Err(e) => {
                tracing::warn!(pod = %key, error = %e,
                    "pod group pod not readable: its group is placed without it");
                state.remove_pending_group_pod(&key);
            }
        }
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.remove_pending_group_pod(key);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.pending_group_pod_uids()
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::{InitialListStrategy, ListSemantic};

    use super::*;

    /// The pod watch relists as [`ClusterState::pod_relist_began`] assumes: `Init` before the
    /// list is requested (not a streaming list, whose `Init` follows the request) and the list
    /// the most recent state (not "any", which a cache may serve from before a Binding). With
    /// either changed, a relist could remove a bind it does not yet show: a double-booking.
    #[test]
    fn the_pod_watch_lists_the_most_recent_state_after_init() {
        let config = WatchedPod::config();
        assert!(matches!(
            config.initial_list_strategy,
            InitialListStrategy::ListWatch
        ));
        assert!(matches!(config.list_semantic, ListSemantic::MostRecent));
    }

    /// A pod a relist no longer shows leaves no place for a successor: it may have succeeded
    /// during the watch's gap (finished pods are not listed), and a departed place would
    /// make the group's next pod a replacement pinned to that node. A deletion the watch
    /// saw (the pod's last state known) still leaves one.
    #[test]
    fn a_pod_gone_from_a_relist_leaves_no_place_to_take() {
        use crate::cluster::group::GroupKey;
        use crate::cluster::{BoundPod, WorkloadKind};
        let mut s = ClusterState::new();
        let node = crate::topology::NodeInfo {
            name: "n1".into(),
            labels: [("kubernetes.io/hostname".to_string(), "n1".to_string())].into(),
            allocatable: [("cpu".to_string(), 8000)].into(),
            ..Default::default()
        };
        s.apply_node(node);
        let train = GroupKey {
            kind: WorkloadKind::Job,
            namespace: "default".into(),
            name: "train".into(),
        };
        let pod = |uid: &str| BoundPod {
            namespace: "default".into(),
            name: uid.into(),
            uid: Some(uid.into()),
            node_name: "n1".into(),
            requests: [("cpu".to_string(), 1000)].into(),
            scoring: [("cpu".to_string(), 1000)].into(),
            tas: true,
            owner_job: Some("train".into()),
            group: train.clone(),
            pod_set: Default::default(),
            index: Default::default(),
            terminating: false,
            labels: Default::default(),
            annotations: Default::default(),
            incarnation: Default::default(),
        };
        for uid in ["p1", "p2", "p3", "p4"] {
            s.apply_bound_pod(&pod(uid));
        }
        WatchedPod::delete_key(&mut s, "p1");
        assert!(s.pod("p1").is_none(), "its usage is given back");
        assert!(s.departed(&train).is_empty(), "{:?}", s.departed(&train));
        assert!(!s.has_lost(&train));
        // A deletion event the watch saw still leaves a place (the check can fail), as does a
        // pod seen being deleted and then missing from a relist.
        s.remove_pod("p2");
        assert_eq!(s.departed(&train).len(), 1);
        s.apply_bound_pod(&BoundPod {
            terminating: true,
            ..pod("p3")
        });
        WatchedPod::delete_key(&mut s, "p3");
        assert!(s.pod("p3").is_none());
        assert_eq!(s.departed(&train).len(), 2);
    }
}
