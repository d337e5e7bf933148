//! Tests of the cluster state's event API: usage per node by pod uid, node changes that
//! rebuild trees or only capacity, relists that remove what they no longer list.

use std::collections::{BTreeMap, HashSet};

use super::*;
use crate::cluster::WorkloadKind;
use crate::cluster::group::PodIndex;
use crate::topology::fixtures::{BLOCK, HOST, NodeBuilder, RACK};

fn node(name: &str, rack: &str, cpu: i64) -> NodeInfo {
    NodeBuilder::new(name)
        .block("b1")
        .rack(rack)
        .cpu(cpu)
        .build()
}

/// Applies nodes `n0`..`n{count - 1}` of 8 cores in block `b1`: the first `in_r1` in rack `r1`,
/// the rest in `r2`.
fn apply_racked_nodes(s: &mut ClusterState, count: usize, in_r1: usize) {
    for i in 0..count {
        s.apply_node(node(
            &format!("n{i}"),
            if i < in_r1 { "r1" } else { "r2" },
            8,
        ));
    }
}

fn pod(uid: &str, node: &str, cpu: i64, job: Option<&str>) -> BoundPod {
    let group = match job {
        Some(j) => GroupKey {
            kind: WorkloadKind::Job,
            namespace: "default".into(),
            name: j.into(),
        },
        None => GroupKey {
            kind: WorkloadKind::Pod,
            namespace: "default".into(),
            name: uid.into(),
        },
    };
    BoundPod {
        namespace: "default".into(),
        name: uid.into(),
        uid: Some(uid.into()),
        node_name: node.into(),
        requests: [("cpu".to_string(), cpu * 1000)].into(),
        scoring: [("cpu".to_string(), cpu * 1000)].into(),
        tas: false,
        owner_job: job.map(str::to_string),
        group,
        pod_set: Default::default(),
        index: Default::default(),
        terminating: false,
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        incarnation: Default::default(),
    }
}

fn cpu(state: &ClusterState, node: &str) -> i64 {
    state
        .node_usage(node)
        .and_then(|u| u.get("cpu").copied())
        .unwrap_or(0)
}

fn with_flavor(state: &mut ClusterState) {
    let topology: Topology = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}
    }))
    .unwrap();
    let flavor: ResourceFlavor = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "f"}, "spec": {"topologyName": "t"}
    }))
    .unwrap();
    state.apply_topology("t", topology);
    state.apply_resource_flavor("f", flavor);
}

#[test]
fn the_same_pod_applied_twice_counts_once_and_deletion_gives_it_back() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    s.apply_bound_pod(&pod("p1", "n1", 2, Some("j")));
    s.apply_bound_pod(&pod("p1", "n1", 2, Some("j")));
    assert_eq!(cpu(&s, "n1"), 2000);
    assert_eq!(s.used(s.node_id("n1").unwrap()).get(PODS), Some(1));
    let group = s.pod("p1").unwrap().group.clone();
    assert_eq!(s.members(&group).count(), 1);
    // The pod moves (a watch shows it bound elsewhere): the old node gets its room back.
    s.apply_node(node("n2", "r1", 8));
    s.apply_bound_pod(&pod("p1", "n2", 2, Some("j")));
    assert_eq!((cpu(&s, "n1"), cpu(&s, "n2")), (0, 2000));
    let before = s.capacity_generation();
    assert!(s.remove_pod("p1"));
    assert!(!s.remove_pod("p1"));
    assert_eq!(cpu(&s, "n2"), 0);
    assert!(s.used(s.node_id("n2").unwrap()).is_empty());
    assert!(s.capacity_generation() > before);
    assert_eq!(s.members(&group).count(), 0);
}

/// What a bind of kube-tas's records for a lone one-CPU pod on `node`.
fn bind_of_one_cpu(s: &ClusterState, node: &str) -> PodUsage {
    PodUsage {
        node: s.node_id(node).unwrap(),
        requests: PodResources::from(&[("cpu".to_string(), 1000)].into()),
        scoring: ScoringAmounts::from(&[("cpu".to_string(), 1000)].into()),
        group: Arc::new(GroupKey::of_pod(&Default::default(), None)),
        pod_set: Default::default(),
        index: Default::default(),
        terminating: false,
        assumed: true,
        incarnation: Incarnation::UNKNOWN,
    }
}

#[test]
fn an_assumed_bind_is_confirmed_by_the_watch_and_only_unconfirmed_ones_are_forgotten() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    let usage = bind_of_one_cpu(&s, "n1");
    s.assume("p1", ("ns", "p1"), usage.clone());
    assert!(s.pod("p1").unwrap().assumed);
    // The watch shows the same pod bound: no double count, no longer assumed.
    s.apply_bound_pod(&pod("p1", "n1", 1, None));
    assert_eq!(cpu(&s, "n1"), 1000);
    assert!(!s.pod("p1").unwrap().assumed);
    assert!(!s.forget_assumed("p1"), "a confirmed pod stays");
    s.assume("p2", ("ns", "p2"), usage);
    assert_eq!(cpu(&s, "n1"), 2000);
    assert!(s.forget_assumed("p2"));
    assert_eq!(cpu(&s, "n1"), 1000);
}

/// A bind whose answer comes after the watch showed its pod bound and then gone (deleted, or
/// succeeded) records nothing: no event would ever remove that usage. Removals are remembered
/// for [`RecentUids::KEPT_FOR`], however many there are.
#[test]
fn a_bind_answered_after_its_pod_is_gone_records_nothing() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    let usage = bind_of_one_cpu(&s, "n1");
    s.apply_bound_pod(&pod("deleted", "n1", 1, None));
    assert!(s.remove_pod("deleted"));
    s.apply_bound_pod(&pod("succeeded", "n1", 1, None));
    assert!(s.remove_pod_not_replaced("succeeded"));
    s.assume("deleted", ("ns", "deleted"), usage.clone());
    s.assume("succeeded", ("ns", "succeeded"), usage.clone());
    assert!(s.pod("deleted").is_none() && s.pod("succeeded").is_none());
    assert_eq!(cpu(&s, "n1"), 0);
    // A pod the watch has not removed is recorded.
    s.assume("live", ("ns", "live"), usage.clone());
    assert_eq!(cpu(&s, "n1"), 1000);
    // A pod whose bound state the watch never showed, only its deletion.
    assert!(!s.remove_pod("never-seen"));
    s.assume("never-seen", ("ns", "never-seen"), usage.clone());
    assert!(s.pod("never-seen").is_none());
    // Many removals (a mass deletion) push nothing out of the window.
    for i in 0..5000 {
        let uid = format!("other-{i}");
        s.apply_bound_pod(&pod(&uid, "n1", 0, None));
        assert!(s.remove_pod(&uid));
    }
    s.assume("deleted", ("ns", "deleted"), usage.clone());
    assert!(s.pod("deleted").is_none());
    // Remembered for a while, not for good: a removal past the window forgets the others.
    let later = Instant::now() + RecentUids::KEPT_FOR + Duration::from_secs(1);
    s.removed.insert(PodUid::new("another"), later);
    assert_eq!((s.removed.order.len(), s.removed.set.len()), (1, 1));
    s.assume("deleted", ("ns", "deleted"), usage);
    assert_eq!(cpu(&s, "n1"), 2000, "forgotten: recorded again");
}

/// A bind assumed before the pod watch's relist began is among the keys that relist removes
/// when it does not list the pod (the list is the most recent state, requested after the
/// Binding was accepted: the pod is gone); a bind assumed after it began is not (the list may
/// predate it), and a confirmed one is an ordinary watched pod.
#[test]
fn a_relist_begun_after_a_bind_removes_it_when_unlisted() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    let usage = bind_of_one_cpu(&s, "n1");
    let watched = |s: &ClusterState| {
        let mut uids = s.watched_pod_uids();
        uids.sort();
        uids
    };
    s.assume("early", ("ns", "early"), usage.clone());
    s.assume("confirmed", ("ns", "confirmed"), usage.clone());
    s.apply_bound_pod(&pod("confirmed", "n1", 1, None));
    assert_eq!(watched(&s), ["confirmed"], "no relist yet: binds are kept");
    std::thread::sleep(Duration::from_millis(2));
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    s.assume("late", ("ns", "late"), usage);
    s.pod_relist_began(began);
    assert_eq!(watched(&s), ["confirmed", "early"]);
    // What the relist does with an unlisted key.
    assert!(s.remove_pod("early"));
    assert_eq!(cpu(&s, "n1"), 2000);
    assert_eq!(
        s.assumed_at.keys().collect::<Vec<_>>(),
        [&PodUid::new("late")],
        "only pods still assumed are timed"
    );
}

/// The binds left unconfirmed past a time, oldest first and at most as many as asked, named
/// for reading back; a bind the watch confirmed, or one after the time, is not among them.
#[test]
fn unconfirmed_binds_are_the_old_assumed_ones_oldest_first() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    s.apply_node(node("n2", "r1", 8));
    let on_n1 = bind_of_one_cpu(&s, "n1");
    let on_n2 = bind_of_one_cpu(&s, "n2");
    s.assume("first", ("ns-a", "pod-a"), on_n2);
    std::thread::sleep(Duration::from_millis(2));
    s.assume("second", ("ns-b", "pod-b"), on_n1.clone());
    s.assume("confirmed", ("ns", "confirmed"), on_n1.clone());
    s.apply_bound_pod(&pod("confirmed", "n1", 1, None));
    std::thread::sleep(Duration::from_millis(2));
    let cut = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    s.assume("late", ("ns", "late"), on_n1);
    let old = s.assumed_unconfirmed(cut, 10);
    let named: Vec<_> = old
        .iter()
        .map(|b| {
            (
                b.uid.as_str(),
                b.namespace.as_str(),
                b.name.as_str(),
                b.node.as_str(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("first", "ns-a", "pod-a", "n2"),
            ("second", "ns-b", "pod-b", "n1")
        ]
    );
    let oldest = s.assumed_unconfirmed(cut, 1);
    assert_eq!(oldest.len(), 1);
    assert_eq!(oldest[0].uid, "first");
    assert!(s.forget_assumed("first"));
    assert_eq!(s.assumed_unconfirmed(cut, 10)[0].uid, "second");
}

#[test]
fn capacity_changes_keep_the_tree_and_topology_changes_rebuild_it() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    s.apply_node(node("n2", "r1", 8));
    with_flavor(&mut s);
    let first = s.flavor("f").unwrap();
    assert!(Arc::ptr_eq(&first, &s.flavor("f").unwrap()), "cached");
    // More allocatable: capacity in place, the same tree, free capacity follows.
    assert_eq!(s.apply_node(node("n1", "r1", 16)), NodeChange::Capacity);
    assert_eq!(s.apply_node(node("n1", "r1", 16)), NodeChange::Unchanged);
    let same = s.flavor("f").unwrap();
    assert!(Arc::ptr_eq(&first, &same));
    let free = s.free_capacity(&same, |_| None);
    let leaf = same.tree.leaf_of_node("n1").unwrap();
    let cpu_id = same.tree.resource_id("cpu").unwrap();
    assert_eq!(free.remaining(leaf)[cpu_id], 16000);
    // Relabelled into another rack: a new tree where n1 sits in r2.
    assert_eq!(s.apply_node(node("n1", "r2", 16)), NodeChange::Topology);
    let rebuilt = s.flavor("f").unwrap();
    assert!(!Arc::ptr_eq(&first, &rebuilt));
    let leaf = rebuilt.tree.leaf_of_node("n1").unwrap();
    assert_eq!(rebuilt.tree.values(leaf), ["b1", "r2", "n1"]);
    // NotReady: out of the tree.
    let mut not_ready = node("n1", "r2", 16);
    not_ready.ready = false;
    assert_eq!(s.apply_node(not_ready), NodeChange::Topology);
    assert!(s.flavor("f").unwrap().tree.leaf_of_node("n1").is_none());
    // Its Ready condition gone, still not ready: a topology change, and the tree says why.
    let mut no_condition = node("n1", "r2", 16);
    no_condition.ready = false;
    no_condition.ready_condition_missing = true;
    assert_eq!(s.apply_node(no_condition), NodeChange::Topology);
    let why = s.flavor("f").unwrap().tree.left_out.describe();
    let reason = crate::topology::tree::LeftOutReason::NoReadyCondition.to_string();
    assert!(why.contains(&reason), "{why}");
}

#[test]
fn nodes_share_one_copy_of_each_label_text() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    s.apply_node(node("n2", "r1", 8));
    s.apply_node(node("n3", "r2", 8));
    let pointer = |s: &ClusterState, name: &str, key: &str| {
        let labels = &s.node_by_name(name).unwrap().labels;
        labels.iter().find(|(k, _)| *k == key).unwrap().1.as_ptr()
    };
    assert_eq!(
        pointer(&s, "n1", RACK),
        pointer(&s, "n2", RACK),
        "one copy of r1"
    );
    assert_ne!(pointer(&s, "n1", RACK), pointer(&s, "n3", RACK));
    assert_eq!(
        pointer(&s, "n1", BLOCK),
        pointer(&s, "n3", BLOCK),
        "one copy of b1"
    );
    for name in ["n1", "n2", "n3"] {
        assert!(
            s.node_by_name(name)
                .unwrap()
                .labels
                .shares_texts_with(s.nodes.label_texts())
        );
    }
    // A capacity change keeps the node on the shared copies.
    assert_eq!(s.apply_node(node("n1", "r1", 16)), NodeChange::Capacity);
    assert_eq!(pointer(&s, "n1", RACK), pointer(&s, "n2", RACK));
    // block, rack, host keys; b1, r1, r2; n1, n2, n3.
    assert_eq!(s.nodes.label_texts().len(), 9);
}

#[test]
fn a_relist_removes_what_it_no_longer_lists_but_keeps_binds_in_flight() {
    let mut s = ClusterState::new();
    for n in ["n1", "n2", "n3"] {
        s.apply_node(node(n, "r1", 8));
    }
    s.apply_bound_pod(&pod("p1", "n1", 1, None));
    s.apply_bound_pod(&pod("p2", "n2", 1, None));
    let usage = PodUsage {
        assumed: true,
        ..s.pod("p2").unwrap().clone()
    };
    s.assume("p3", ("ns", "p3"), usage);
    s.replace_nodes(vec![node("n1", "r1", 8), node("n2", "r1", 8)]);
    assert_eq!(s.node_count(), 2);
    assert!(s.node_by_name("n3").is_none());
    s.replace_pods(vec![pod("p1", "n1", 1, None)]);
    assert!(s.pod("p2").is_none(), "deleted during the gap");
    assert!(
        s.pod("p3").is_some(),
        "an assumed bind the watch has not shown yet stays"
    );
    assert_eq!((cpu(&s, "n1"), cpu(&s, "n2")), (1000, 1000));
    // A node deleted and re-created keeps its id.
    let id = s.node_id("n2").unwrap();
    s.delete_node("n2");
    s.apply_node(node("n2", "r1", 8));
    assert_eq!(s.node_id("n2"), Some(id));
}

#[test]
fn room_counts_usage_holds_and_the_pod_slot() {
    let mut s = ClusterState::new();
    let mut n = node("n1", "r1", 8);
    n.allocatable.insert(PODS.into(), 2);
    s.apply_node(n);
    let id = s.node_id("n1").unwrap();
    let nine: ResourceList = [("cpu".to_string(), 9000)].into();
    let four: ResourceList = [("cpu".to_string(), 4000)].into();
    assert!(!s.room_for(id, None, &nine), "9 cpu on an 8-cpu node");
    assert!(s.room_for(id, None, &four));
    let held: ResourceList = [("cpu".to_string(), 5000), (PODS.to_string(), 1)].into();
    assert!(!s.room_for(id, Some(&held), &four));
    s.apply_bound_pod(&pod("a", "n1", 1, None));
    s.apply_bound_pod(&pod("b", "n1", 1, None));
    assert!(!s.room_for(id, None, &four), "no pod slot left");
}

/// Pod `uid` of Job `train` with completion index `index` on `node`.
fn indexed(uid: &str, index: u32, node: &str) -> BoundPod {
    BoundPod {
        index: PodIndex {
            job: None,
            completion: Some(index),
        },
        ..pod(uid, node, 1, Some("train"))
    }
}

fn train() -> GroupKey {
    GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "train".into(),
    }
}

#[test]
fn a_pod_that_leaves_a_running_group_is_remembered_until_its_place_is_taken() {
    let mut s = ClusterState::new();
    for n in ["n1", "n2"] {
        s.apply_node(node(n, "r1", 8));
    }
    s.apply_bound_pod(&indexed("a0", 0, "n1"));
    s.apply_bound_pod(&indexed("a1", 1, "n2"));
    assert!(!s.has_lost(&train()));
    // Pod 1 fails (a deletion in the watch): remembered on n2.
    assert!(s.remove_pod("a1"));
    assert!(s.has_lost(&train()));
    let gone = s.departed(&train());
    assert_eq!(gone.len(), 1);
    assert_eq!(s.name_of(gone[0].node), Some("n2"));
    // Its successor (same index, new uid) takes the place.
    s.apply_bound_pod(&indexed("a1-again", 1, "n1"));
    assert!(s.departed(&train()).is_empty());
    assert!(!s.has_lost(&train()));
}

/// Pod `uid` of the creation `job_uid` of Job `train`, index `index`, on `node`.
fn made_by(job_uid: &str, uid: &str, index: u32, node: &str) -> BoundPod {
    BoundPod {
        incarnation: Incarnation::of_uid(Some(job_uid)),
        ..indexed(uid, index, node)
    }
}

fn train_job() -> crate::cluster::Workload {
    crate::cluster::Workload {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "train".into(),
        queue_name: None,
        pod_sets: Vec::new(),
        source: Default::default(),
    }
}

/// A Job deleted and created again under its name is a new workload: the first Job's pods
/// still being deleted are no members of it, and leave no place for its pods to take; its
/// own pods do.
#[test]
fn a_job_created_again_under_its_name_inherits_nothing_from_the_first() {
    let (first, second) = (
        Incarnation::of_uid(Some("uid-a")),
        Incarnation::of_uid(Some("uid-b")),
    );
    let mut s = ClusterState::new();
    for n in ["n1", "n2"] {
        s.apply_node(node(n, "r1", 8));
    }
    s.apply_job("default", "train", train_job(), first);
    s.apply_bound_pod(&made_by("uid-a", "a0", 0, "n1"));
    s.apply_bound_pod(&made_by("uid-a", "a1", 1, "n2"));
    assert_eq!(s.members(&train()).count(), 2);
    // Deleted (background): the Job goes first, its pods are then being deleted.
    s.delete_job("default", "train");
    for (uid, index, node) in [("a0", 0, "n1"), ("a1", 1, "n2")] {
        s.apply_bound_pod(&BoundPod {
            terminating: true,
            ..made_by("uid-a", uid, index, node)
        });
    }
    assert_eq!(
        s.members(&train()).count(),
        2,
        "the first Job's, until another comes"
    );
    let before = s.workloads_generation();
    s.apply_job("default", "train", train_job(), second);
    assert!(s.workloads_generation() > before);
    assert_eq!(s.members(&train()).count(), 0);
    assert_eq!(cpu(&s, "n1"), 1000, "their usage still counts");
    s.apply_bound_pod(&made_by("uid-b", "b1", 1, "n1"));
    assert!(s.remove_pod("a0"));
    assert!(
        s.departed(&train()).is_empty(),
        "{:?}",
        s.departed(&train())
    );
    assert_eq!(s.members(&train()).count(), 1);
    // A pod of the second Job that leaves is remembered (the check can see a place).
    s.apply_bound_pod(&made_by("uid-b", "b0", 0, "n2"));
    assert!(s.remove_pod("b0"));
    assert_eq!(s.departed(&train()).len(), 1);
    // The second Job deleted too, its pods gone: nothing of it is kept.
    s.delete_job("default", "train");
    assert!(s.remove_pod("a1"));
    assert!(s.remove_pod("b1"));
    assert!(s.job_incarnations.is_empty());
}

/// After a restart the pods may be listed before the Jobs: a place a first Job's pod left
/// while no Job was known is forgotten when the Job shows up as another creation, and kept
/// when it shows up as the same.
#[test]
fn a_place_left_before_the_job_was_known_is_kept_only_for_its_own_creation() {
    for (job_uid, kept) in [("uid-a", 1), ("uid-b", 0)] {
        let mut s = ClusterState::new();
        for n in ["n1", "n2"] {
            s.apply_node(node(n, "r1", 8));
        }
        s.apply_bound_pod(&made_by("uid-a", "a0", 0, "n1"));
        s.apply_bound_pod(&made_by("uid-a", "a1", 1, "n2"));
        assert!(s.remove_pod("a1"));
        assert_eq!(s.departed(&train()).len(), 1);
        s.apply_job(
            "default",
            "train",
            train_job(),
            Incarnation::of_uid(Some(job_uid)),
        );
        assert_eq!(s.departed(&train()).len(), kept, "Job {job_uid}");
    }
}

#[test]
fn a_pod_succeeded_or_already_replaced_leaves_nothing_to_replace() {
    let mut s = ClusterState::new();
    for n in ["n1", "n2"] {
        s.apply_node(node(n, "r1", 8));
    }
    s.apply_bound_pod(&indexed("a0", 0, "n1"));
    s.apply_bound_pod(&indexed("a1", 1, "n2"));
    assert!(s.remove_pod_not_replaced("a1"));
    assert!(s.departed(&train()).is_empty());
    // Pod 0 is being deleted while its successor already runs: when it goes, nothing is left.
    let terminating = BoundPod {
        terminating: true,
        ..indexed("a0", 0, "n1")
    };
    s.apply_bound_pod(&terminating);
    assert!(s.has_lost(&train()), "a pod being deleted counts as lost");
    s.apply_bound_pod(&indexed("a0-again", 0, "n2"));
    assert!(s.remove_pod("a0"));
    assert!(s.departed(&train()).is_empty());
    assert!(!s.has_lost(&train()));
    // The last pod gone: the group runs no more.
    assert!(s.remove_pod("a0-again"));
    assert!(s.departed(&train()).is_empty());
}

/// A Kueue Workload owned by `owner` (`apiVersion`, `kind`, `name`).
fn kueue_workload_meta(
    owner: (&str, &str, &str),
    controller: bool,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    ObjectMeta {
        name: Some("wl".into()),
        namespace: Some("default".into()),
        owner_references: Some(vec![OwnerReference {
            api_version: owner.0.into(),
            kind: owner.1.into(),
            name: owner.2.into(),
            uid: "u".into(),
            controller: Some(controller),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

#[test]
fn a_kueue_workload_stands_for_its_controller_job_or_jobset() {
    use crate::cluster::kueue_workload_owner;
    let job = kueue_workload_owner(&kueue_workload_meta(("batch/v1", "Job", "train"), true));
    assert_eq!(job, Some(train()));
    let set = kueue_workload_owner(&kueue_workload_meta(
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "js"),
        true,
    ))
    .unwrap();
    assert_eq!((set.kind, set.name.as_str()), (WorkloadKind::JobSet, "js"));
    // Not the controller, or a kind kube-tas does not plan: no group.
    let not_controller = kueue_workload_meta(("batch/v1", "Job", "train"), false);
    assert_eq!(kueue_workload_owner(&not_controller), None);
    let deployment = kueue_workload_meta(("apps/v1", "Deployment", "web"), true);
    assert_eq!(kueue_workload_owner(&deployment), None);
}

#[test]
fn a_group_is_kueues_while_one_of_its_workloads_exists() {
    let mut s = ClusterState::new();
    assert!(!s.kueue_manages(&train()));
    s.apply_kueue_workload("default/wl-1", Some(train()));
    s.apply_kueue_workload("default/wl-2", Some(train()));
    s.apply_kueue_workload("default/other", None);
    assert!(s.kueue_manages(&train()));
    // Re-applying a Workload does not count it twice.
    s.apply_kueue_workload("default/wl-1", Some(train()));
    s.delete_kueue_workload("default/wl-1");
    assert!(s.kueue_manages(&train()), "wl-2 still stands for it");
    s.delete_kueue_workload("default/wl-2");
    assert!(!s.kueue_manages(&train()));
    assert_eq!(s.kueue_workload_keys(), ["default/other"]);
}

#[test]
fn scoring_usage_follows_pods_in_and_out() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    let id = s.node_id("n1").unwrap();
    let mut p = pod("p1", "n1", 2, None);
    p.scoring = [("cpu".to_string(), 2000), ("memory".to_string(), 200 << 20)].into();
    s.apply_bound_pod(&p);
    s.apply_bound_pod(&p); // the same pod again counts once
    assert_eq!(s.scored(id).memory, 200 << 20);
    assert_eq!(s.scored(id).cpu, 2000);
    // Resized in place: the old amounts leave, the new ones come.
    p.requests = [("cpu".to_string(), 3000)].into();
    p.scoring = [("cpu".to_string(), 3000), ("memory".to_string(), 200 << 20)].into();
    s.apply_bound_pod(&p);
    assert_eq!(s.scored(id).cpu, 3000);
    assert!(s.remove_pod("p1"));
    assert_eq!(s.scored(id), ScoringAmounts::default());
}

/// A rebuild reads only the nodes that changed since the flavor's last build (at their events,
/// once the flavor's facts are kept) and still places every node where its labels say; a
/// flavor whose Topology changes levels is read afresh, and a flavor that is gone takes its
/// kept facts with it.
#[test]
fn a_rebuild_reads_only_the_nodes_that_changed() {
    let mut s = ClusterState::new();
    apply_racked_nodes(&mut s, 6, 3);
    with_flavor(&mut s);
    assert_eq!(s.nodes_read_by_last_build("f"), None);
    s.flavor("f").unwrap();
    assert_eq!(s.nodes_read_by_last_build("f"), reads(0, 6));
    assert_eq!(s.apply_node(node("n1", "r2", 8)), NodeChange::Topology);
    s.apply_node(node("n9", "r3", 8));
    let f = s.flavor("f").unwrap();
    assert_eq!(
        s.nodes_read_by_last_build("f"),
        reads(2, 0),
        "the moved node and the new one, at their events"
    );
    for (name, rack) in [("n0", "r1"), ("n1", "r2"), ("n4", "r2"), ("n9", "r3")] {
        let leaf = f.tree.leaf_of_node(name).unwrap();
        assert_eq!(f.tree.values(leaf), ["b1", rack, name]);
    }
    let racks: Vec<&str> = f.tree.by_level[1]
        .iter()
        .map(|&d| f.tree.value(d))
        .collect();
    assert_eq!(racks, ["r1", "r2", "r3"]);
    assert!(s.delete_node("n0"));
    let f = s.flavor("f").unwrap();
    assert_eq!(s.nodes_read_by_last_build("f"), reads(0, 0));
    assert_eq!(f.tree.nodes.len(), 6);
    assert!(f.tree.leaf_of_node("n0").is_none());
    // Two levels now: every node read again.
    let topology: Topology = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}
    }))
    .unwrap();
    s.apply_topology("t", topology);
    let f = s.flavor("f").unwrap();
    assert_eq!(s.nodes_read_by_last_build("f"), reads(0, 6));
    assert_eq!(f.tree.leaves().len(), 3);
    s.delete_resource_flavor("f");
    assert!(s.flavor("f").is_none());
    let other: ResourceFlavor = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "g"}, "spec": {"topologyName": "t"}
    }))
    .unwrap();
    s.apply_resource_flavor("g", other);
    s.flavor("g").unwrap();
    assert_eq!(
        s.nodes_read_by_last_build("f"),
        None,
        "gone with its flavor"
    );
}

/// A flavor deleted, or left without its Topology, keeps no cached tree (a tree holds every
/// member node): a cluster whose flavors come and go does not grow.
#[test]
fn gone_flavors_leave_no_cached_tree() {
    let mut s = ClusterState::new();
    with_flavor(&mut s);
    apply_racked_nodes(&mut s, 4, 4);
    let other: ResourceFlavor = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "g"}, "spec": {"topologyName": "t"}
    }))
    .unwrap();
    s.apply_resource_flavor("g", other);
    s.flavor("f").unwrap();
    s.flavor("g").unwrap();
    let cached = |s: &ClusterState| -> BTreeSet<String> {
        s.trees.lock().unwrap().keys().cloned().collect()
    };
    assert_eq!(cached(&s), BTreeSet::from(["f".into(), "g".into()]));
    s.delete_resource_flavor("g");
    assert_eq!(cached(&s), BTreeSet::from(["f".into()]));
    s.delete_topology("t");
    assert!(cached(&s).is_empty(), "{:?}", cached(&s));
    assert!(s.flavor("f").is_none());
}

/// Nodes read at their events and at a build, as [`ClusterState::nodes_read_by_last_build`]
/// says them.
fn reads(at_events: usize, at_build: usize) -> Option<NodeReads> {
    Some(NodeReads {
        at_events,
        at_build,
    })
}

/// Nodes that come after their flavor (as at start-up, when the small Kueue lists arrive
/// before the node list) are read at their events: the first build reads none and gives the
/// tree a build from scratch gives; nodes that came before a flavor's Topology are read at
/// its first build.
#[test]
fn nodes_after_their_flavor_are_read_at_their_events() {
    let mut s = ClusterState::new();
    with_flavor(&mut s);
    apply_racked_nodes(&mut s, 6, 3);
    s.apply_node(node("n2", "r3", 8));
    assert!(s.delete_node("n5"));
    let f = s.flavor("f").unwrap();
    assert_eq!(
        s.nodes_read_by_last_build("f"),
        reads(7, 0),
        "six nodes and a move, each at its event"
    );
    let nodes: Vec<Arc<NodeInfo>> = s.nodes().map(|(_, n)| Arc::new(n.clone())).collect();
    let fresh = TopologyTree::build("t", &f.tree.levels, &BTreeMap::new(), nodes);
    let leaves = |t: &TopologyTree| -> Vec<Vec<String>> {
        t.leaves()
            .iter()
            .map(|&l| t.values(l).into_iter().map(str::to_string).collect())
            .collect()
    };
    assert_eq!(leaves(&f.tree), leaves(&fresh));
    assert_eq!(f.tree.leaves().len(), 5);

    // A flavor whose Topology does not exist yet keeps no facts: its first build reads every
    // node.
    let mut s = ClusterState::new();
    let other: ResourceFlavor = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "g"}, "spec": {"topologyName": "later"}
    }))
    .unwrap();
    s.apply_resource_flavor("g", other);
    apply_racked_nodes(&mut s, 4, 4);
    assert!(s.flavor("g").is_none());
    let topology: Topology = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "later"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}
    }))
    .unwrap();
    s.apply_topology("later", topology);
    s.flavor("g").unwrap();
    assert_eq!(s.nodes_read_by_last_build("g"), reads(0, 4));
}

/// A tree's members map back to their node ids by position, past deleted nodes (holes in
/// the ids), nodes left out of the tree, and nodes missing a level label (which the build
/// reads again without them).
#[test]
fn member_ids_name_each_members_own_node() {
    let mut s = ClusterState::new();
    for (name, rack) in [("n0", "r1"), ("gone", "r1"), ("n2", "r2"), ("down", "r1")] {
        s.apply_node(node(name, rack, 8));
    }
    let mut down = node("down", "r1", 8);
    down.ready = false;
    s.apply_node(down);
    let mut unlabelled = node("unlabelled", "r1", 8);
    unlabelled.labels.remove(RACK);
    s.apply_node(unlabelled);
    s.apply_node(node("n5", "r1", 8));
    assert!(s.delete_node("gone"));
    with_flavor(&mut s);
    let f = s.flavor("f").unwrap();
    let members: Vec<&str> = f.tree.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(members, ["n0", "n2", "n5"]);
    for (m, &id) in f.member_ids.iter().enumerate() {
        assert_eq!(s.name_of(id), Some(members[m]), "member {m}");
        assert_eq!(s.node_id(members[m]), Some(id), "member {m}");
    }
    assert_eq!(f.member_ids.len(), 3);
}

/// The pods of one group share one copy of the group (the key their members are listed
/// under) and a uid that is not a UUID is kept once, shared by the pod table and the group's
/// member list; the scoring amounts add up per node as CPU and memory.
#[test]
fn a_groups_pods_share_one_group_copy_and_each_uid_is_kept_once() {
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    let mut p1 = pod("p1", "n1", 1, Some("j"));
    p1.scoring.insert("memory".into(), 300 << 20);
    let named = |p: BoundPod, pod_set: &str| BoundPod {
        pod_set: PodSetHint::Named(pod_set.into()),
        ..p
    };
    s.apply_bound_pod(&named(p1, "workers"));
    s.apply_bound_pod(&named(pod("p2", "n1", 2, Some("j")), "leader"));
    s.apply_bound_pod(&named(pod("p3", "n1", 1, Some("other")), "workers"));
    s.apply_bound_pod(&named(pod("p4", "n1", 1, Some("j")), "workers"));
    let (a, b, c) = (
        s.pod("p1").unwrap(),
        s.pod("p2").unwrap(),
        s.pod("p3").unwrap(),
    );
    assert!(Arc::ptr_eq(&a.group, &b.group), "one copy of Job default/j");
    assert!(!Arc::ptr_eq(&a.group, &c.group));
    let d = s.pod("p4").unwrap();
    assert!(
        d.requests.is_shared_with(&a.requests),
        "the same requests as its group's first listed pod: one copy"
    );
    assert!(
        !a.requests.is_shared_with(&b.requests),
        "different requests"
    );
    assert!(
        !c.requests.is_shared_with(&a.requests),
        "another group's pod"
    );
    assert!(
        d.pod_set.is_shared_with(&a.pod_set),
        "the same PodSet as its group's first listed pod: one copy of its name"
    );
    assert!(!b.pod_set.is_shared_with(&a.pod_set), "another PodSet");
    assert!(!c.pod_set.is_shared_with(&a.pod_set), "another group's pod");
    let (listed, uids) = s.members.get_key_value(&*a.group).unwrap();
    assert!(
        Arc::ptr_eq(listed, &a.group),
        "the member list's key is that copy"
    );
    let shared = |a: &PodUid, b: &PodUid| matches!((a, b), (PodUid::Text(a), PodUid::Text(b)) if Arc::ptr_eq(a, b));
    let p2 = PodUid::new("p2");
    let (table_uid, _) = s.pods.get_key_value(&p2).unwrap();
    let member_uid = uids.get(&p2).unwrap();
    assert!(shared(table_uid, member_uid), "the uid is allocated once");
    let id = s.node_id("n1").unwrap();
    assert_eq!(s.scored(id).cpu, 5000);
    assert_eq!(s.scored(id).memory, 300 << 20);
    // Marked terminating by a later event: the uid listed there is the table's copy too.
    let mut deleted = pod("p2", "n1", 2, Some("j"));
    deleted.terminating = true;
    s.apply_bound_pod(&deleted);
    let (table_uid, _) = s.pods.get_key_value(&p2).unwrap();
    let terminating = s.terminating.values().next().unwrap().get(&p2).unwrap();
    assert!(shared(table_uid, terminating), "one copy of the uid");
    // Every pod of the group gone: the copy goes with its member list.
    assert!(s.remove_pod("p1") && s.remove_pod("p2") && s.remove_pod("p4"));
    assert!(!s.members.contains_key(&GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "j".into(),
    }));
    assert_eq!(s.scored(id).memory, 0, "given back");
    assert_eq!(s.scored(id).cpu, 1000);
}

/// A pod with an API-server uid is keyed by the UUID's 16 bytes (nothing allocated for its
/// key) and is found, marked and removed by its uid's text as any other pod.
#[test]
fn an_api_server_uid_is_kept_inline_and_found_by_its_text() {
    const UID: &str = "6f1d2c3b-4a59-4e8f-9a0b-1c2d3e4f5a6b";
    let mut s = ClusterState::new();
    s.apply_node(node("n1", "r1", 8));
    s.apply_bound_pod(&pod(UID, "n1", 2, Some("j")));
    s.apply_bound_pod(&pod("p2", "n1", 1, Some("j")));
    let keys: Vec<&PodUid> = s.pods.keys().collect();
    assert!(
        keys.iter().any(|k| matches!(k, PodUid::Uuid(_)))
            && keys.iter().any(|k| matches!(k, PodUid::Text(_))),
        "{keys:?}"
    );
    assert_eq!(s.pod(UID).unwrap().requests.get("cpu"), Some(2000));
    let mut uids = s.watched_pod_uids();
    uids.sort();
    assert_eq!(uids, [UID, "p2"], "written back as listed");
    let mut deleted = pod(UID, "n1", 2, Some("j"));
    deleted.terminating = true;
    s.apply_bound_pod(&deleted);
    assert!(s.pod(UID).unwrap().terminating);
    assert!(s.has_lost(&s.pod("p2").unwrap().group.as_ref().clone()));
    assert!(s.remove_pod(UID));
    assert!(s.pod(UID).is_none() && !s.remove_pod(UID));
    let id = s.node_id("n1").unwrap();
    assert_eq!(s.used(id).get("cpu"), Some(1000), "its usage given back");
    assert!(s.remove_pod("p2"));
    assert!(s.members.is_empty() && s.terminating.is_empty());
}

#[test]
fn a_pods_record_stays_small() {
    // The pod table holds one of these per pod holding capacity (150,000 at 15,000 nodes):
    // a field that grows it shows here first. 96 since the Job's incarnation (4 bytes, which
    // the layout pads to 8): 1.2 MB at 150,000 pods.
    assert!(
        std::mem::size_of::<PodUsage>() <= 96,
        "PodUsage is {} bytes",
        std::mem::size_of::<PodUsage>()
    );
    assert_eq!(std::mem::size_of::<PodIndex>(), 16);
    assert_eq!(std::mem::size_of::<PodSetHint>(), 24);
}

/// Warming builds each TAS flavor's tree once per change, so that a request finds it built;
/// a flavor that is not TAS has none to build, and what a scrape reads ([`ClusterState::built_flavors`])
/// is the trees built so far, never a build of its own.
#[test]
fn warming_builds_each_stale_tree_once_and_a_scrape_builds_none() {
    let mut s = ClusterState::new();
    apply_racked_nodes(&mut s, 4, 2);
    with_flavor(&mut s);
    let plain: ResourceFlavor = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "plain"}, "spec": {}
    }))
    .unwrap();
    s.apply_resource_flavor("plain", plain);
    assert!(s.built_flavors().is_empty());
    assert_eq!(s.tree_builds(), 0);
    assert_eq!(s.warm_trees(), 1, "the TAS flavor only");
    assert_eq!(s.warm_trees(), 0, "nothing changed");
    let warmed = s.flavor("f").unwrap();
    assert_eq!(s.tree_builds(), 1, "the request found the tree built");
    assert!(Arc::ptr_eq(&warmed, &s.built_flavors()[0]));

    // The Workload-API hostname tree shares the cache, but is no flavor's.
    s.hostname_topology();
    s.apply_node(node("n0", "r2", 8));
    let scraped = s.built_flavors();
    assert_eq!(scraped.len(), 1);
    assert!(
        Arc::ptr_eq(&scraped[0], &warmed),
        "the scrape built nothing"
    );
    assert!(s.left_out_notes().is_empty());
    assert_eq!(s.tree_builds(), 1);
    assert_eq!(s.warm_trees(), 1);
    let rebuilt = s.flavor("f").unwrap();
    assert_eq!(s.tree_builds(), 2);
    assert_eq!(rebuilt.generation, s.topology_generation());
    let leaf = rebuilt.tree.leaf_of_node("n0").unwrap();
    assert_eq!(rebuilt.tree.values(leaf), ["b1", "r2", "n0"]);
    // A capacity-only change leaves the tree as it is.
    s.apply_node(node("n1", "r1", 16));
    assert_eq!(s.warm_trees(), 0);
    // A node no longer Ready is in the notes once a build says so, not before.
    s.apply_node(
        NodeBuilder::new("n3")
            .block("b1")
            .rack("r2")
            .cpu(8)
            .not_ready()
            .build(),
    );
    assert!(s.left_out_notes().is_empty());
    assert_eq!(s.tree_builds(), 2, "the notes built nothing");
    assert_eq!(s.warm_trees(), 1);
    let notes = s.left_out_notes();
    assert!(notes.len() == 1 && notes[0].contains("n3"), "{notes:?}");
}

/// The id of a deleted node that nothing refers to is given back and taken by the next new
/// name, with nothing of the old node on it; one still referred to (a pod recorded on it, a
/// departed pod, an id the caller holds) is kept and looked at again; a node back under its
/// name before the sweep keeps its id; a stale tree that lists one is dropped.
#[test]
fn a_deleted_nodes_id_is_given_back_once_nothing_refers_to_it() {
    let mut s = ClusterState::new();
    with_flavor(&mut s);
    apply_racked_nodes(&mut s, 6, 3);
    let id = |s: &ClusterState, name: &str| s.node_id(name).unwrap();
    let [n0, n1, n2, n3, n4] = ["n0", "n1", "n2", "n3", "n4"].map(|n| id(&s, n));
    // n1 has a pod recorded, n2 a pod of a running group that left it; n3 the caller holds.
    s.apply_bound_pod(&pod("p1", "n1", 1, None));
    s.apply_bound_pod(&indexed("a0", 0, "n5"));
    s.apply_bound_pod(&indexed("a1", 1, "n2"));
    assert!(s.remove_pod("a1"));
    assert!(s.flavor("f").is_some());
    for n in ["n0", "n1", "n2", "n3", "n4"] {
        assert!(s.delete_node(n));
    }
    // n4 is back under its name. The cache's tree, built before the deletions, lists them
    // all: stale, it is dropped (a request builds it anew first), and keeps none of them.
    s.apply_node(node("n4", "r2", 8));
    let mut asked = HashSet::new();
    let given = s.reclaim_node_ids(|c| {
        asked = c.clone();
        [n3].into()
    });
    assert_eq!((given, &asked), (1, &[n0, n3].into()));
    assert!(
        s.trees.get_mut().unwrap().is_empty(),
        "the stale tree is dropped"
    );
    assert_eq!((s.node_id("n0"), s.name_of(n0)), (None, None));
    assert_eq!(s.node_id("n4"), Some(n4));
    assert_eq!(s.node_id_count(), 5);
    // A new name takes n0's id, with no usage and its own labels in the tree.
    s.apply_node(node("fresh", "r2", 8));
    assert_eq!(s.node_id("fresh"), Some(n0));
    assert_eq!(s.node_id_count(), 6);
    assert_eq!(
        (cpu(&s, "fresh"), s.scored(n0)),
        (0, ScoringAmounts::default())
    );
    let f = s.flavor("f").unwrap();
    let m = f.member_ids.iter().position(|&i| i == n0).unwrap();
    assert_eq!(f.tree.nodes[m].name, "fresh");
    assert_eq!(&f.tree.nodes[m].labels[RACK], "r2");
    // The pod on n1 goes, the group's last pod too (nothing departed is kept), n3 is let go.
    assert!(s.remove_pod("p1"));
    assert!(s.remove_pod("a0"));
    let given = s.reclaim_node_ids(|c| {
        asked = c.clone();
        HashSet::new()
    });
    assert_eq!((given, &asked), (3, &[n1, n2, n3].into()));
    assert_eq!(
        s.reclaim_node_ids(|_| unreachable!("nothing is left to look at")),
        0
    );
    assert_eq!(s.node_id_count(), 3);
}

/// Under churn that names every new node afresh (an autoscaler's), swept ids keep the state
/// as large as the most nodes known at once, and every name maps to its own node.
#[test]
fn node_churn_with_fresh_names_keeps_the_ids_bounded() {
    let mut s = ClusterState::new();
    with_flavor(&mut s);
    apply_racked_nodes(&mut s, 10, 5);
    let mut last = "n0".to_string();
    for round in 0..200 {
        assert!(s.delete_node(&last));
        last = format!("c{round}");
        s.apply_node(node(&last, if round % 2 == 0 { "r1" } else { "r2" }, 8));
        s.apply_bound_pod(&pod(&format!("p{round}"), &last, 1, None));
        assert!(s.flavor("f").is_some());
        if round > 0 {
            assert!(s.remove_pod(&format!("p{}", round - 1)));
        }
        s.reclaim_node_ids(|_| HashSet::new());
    }
    assert_eq!(s.node_count(), 10);
    // Each new node comes before the last deleted one is swept: 11 ids at most, not 210.
    assert_eq!(s.names.len(), 11);
    assert_eq!(s.nodes.len(), 11);
    let f = s.flavor("f").unwrap();
    assert_eq!(f.member_ids.len(), 10);
    for (m, &id) in f.member_ids.iter().enumerate() {
        let name = f.tree.nodes[m].name.as_str();
        assert_eq!((s.name_of(id), s.node_id(name)), (Some(name), Some(id)));
    }
    assert_eq!(cpu(&s, "c199"), 1000);
    assert_eq!(s.pod_count(), 1);
}

/// A watch event that comes while a reader holds the state (a tree build) waits without
/// making the other readers wait behind it (a writer blocked in `write` does: the lock favours
/// writers), and is applied once the reader lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_waiting_for_a_reader_lets_other_readers_in() {
    use std::sync::atomic::AtomicBool;
    let shared = SharedState::new(ClusterState::new());
    // A tree build on the blocking pool: a read lock held until it is told to end.
    let (held, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let building = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let _read = shared.read();
            held.0.send(()).expect("the test waits");
            let _ = release.1.recv();
        })
    };
    held.1.recv().expect("the build holds its read lock");
    // The writer says when it has tried and is waiting (patience far beyond the test's
    // length, so a slow machine cannot make it queue for the lock).
    let waiting = Arc::new(AtomicBool::new(false));
    let writer = {
        let (shared, waiting) = (shared.clone(), waiting.clone());
        tokio::spawn(async move {
            let mut write = std::pin::pin!(shared.write_soon_within(Duration::from_secs(600)));
            let mut guard = std::future::poll_fn(|cx| {
                let poll = write.as_mut().poll(cx);
                waiting.store(poll.is_pending(), Ordering::SeqCst);
                poll
            })
            .await;
            guard.apply_node(node("n0", "r1", 8));
        })
    };
    let began = Instant::now();
    while !waiting.load(Ordering::SeqCst) {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "the writer never waited (it blocked, or was never run)"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        shared.inner.try_read().is_ok(),
        "a request's read gets in beside the build"
    );
    release.0.send(()).expect("the build waits");
    building.join().expect("no panic");
    tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the writer gets in once the reader lets go")
        .expect("no panic");
    assert!(shared.read().node_id("n0").is_some());
}

/// What a remembered "does not fit" of a workload is decided on moves with the workload and
/// its queues, and only when they change (a Job's status update leaves it).
#[test]
fn the_workloads_generation_moves_only_when_one_changes() {
    use crate::cluster::kueue::{ClusterQueue, LocalQueue};
    let mut s = ClusterState::new();
    let moved = |s: &mut ClusterState, f: &dyn Fn(&mut ClusterState)| {
        let before = s.workloads_generation();
        f(s);
        s.workloads_generation() != before
    };
    let job = |queue: &str| crate::cluster::Workload {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "train".into(),
        queue_name: Some(queue.into()),
        pod_sets: Vec::new(),
        source: Default::default(),
    };
    assert!(moved(&mut s, &|s| s.apply_job(
        "default",
        "train",
        job("a"),
        Incarnation::UNKNOWN
    )));
    assert!(!moved(&mut s, &|s| s.apply_job(
        "default",
        "train",
        job("a"),
        Incarnation::UNKNOWN
    )));
    assert!(moved(&mut s, &|s| s.apply_job(
        "default",
        "train",
        job("b"),
        Incarnation::UNKNOWN
    )));
    assert!(moved(&mut s, &|s| {
        s.delete_job("default", "train");
    }));
    assert!(!moved(&mut s, &|s| {
        s.delete_job("default", "train");
    }));
    let queue = ClusterQueue::default();
    assert!(moved(&mut s, &|s| s.apply_cluster_queue("cq", queue.clone())));
    assert!(!moved(&mut s, &|s| s.apply_cluster_queue("cq", queue.clone())));
    // A status write (a new resourceVersion) routes nothing; a spec change does.
    let mut written = queue.clone();
    written.metadata.resource_version = Some("2".into());
    assert!(!moved(&mut s, &|s| s.apply_cluster_queue("cq", written.clone())));
    let mut selective = queue.clone();
    selective.spec.namespace_selector = Some(Default::default());
    assert!(moved(&mut s, &|s| s.apply_cluster_queue("cq", selective.clone())));
    assert!(moved(&mut s, &|s| s.delete_cluster_queue("cq")));
    let local = LocalQueue::default();
    assert!(moved(&mut s, &|s| s.apply_local_queue(
        "default",
        "q",
        local.clone()
    )));
    assert!(!moved(&mut s, &|s| s.apply_local_queue(
        "default",
        "q",
        local.clone()
    )));
    let mut written = local.clone();
    written.metadata.resource_version = Some("2".into());
    assert!(!moved(&mut s, &|s| s.apply_local_queue(
        "default",
        "q",
        written.clone()
    )));
    assert!(moved(&mut s, &|s| s.delete_local_queue("default", "q")));
    // A plain pod group's workload is formed from its pending pods.
    let group_pod = |cpu: &str| {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "g-0", "namespace": "default", "uid": "u0",
                "labels": {"kueue.x-k8s.io/pod-group-name": "g",
                    "kueue.x-k8s.io/queue-name": "q"},
                "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        crate::cluster::pending_group_pod(&pod)
            .unwrap()
            .expect("a pending group pod")
    };
    assert!(moved(&mut s, &|s| s.apply_pending_group_pod("u0", group_pod("4"))));
    assert!(!moved(&mut s, &|s| s.apply_pending_group_pod("u0", group_pod("4"))));
    assert!(moved(&mut s, &|s| s.apply_pending_group_pod("u0", group_pod("1"))));
    assert!(moved(&mut s, &|s| {
        s.remove_pending_group_pod("u0");
    }));
    assert!(moved(&mut s, &|s| s.apply_kueue_workload("default/w", None)));
    assert!(!moved(&mut s, &|s| s.apply_kueue_workload("default/w", None)));
    assert!(moved(&mut s, &|s| s.delete_kueue_workload("default/w")));
}
