//! Hot swap in the plan book (tas-semantics §4): a pod recreated for one its running group lost
//! goes back to its predecessor's node unless that node has failed for the group under the
//! gates in force; then it is placed inside the group's domain and nothing else moves. The
//! cluster changes arrive as the watch applies them (node updates, pod deletions).

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::*;

/// Job `train`, 4 pods x 1 cpu in one rack, running in rack r2: pods 0 and 1 on b1-r2-h1,
/// pods 2 and 3 on b1-r2-h2 (each host has 2 cpu left). Rack r3 is empty, and decoys in rack
/// r1 leave exactly 2 cpu there (1 per host): as tight as r2's room once a host of r2 is lost,
/// and first by name, so a placement that forgot the running pods would take r1.
fn running_train(gates: &str) -> TestBook {
    running_train_with(gates, "")
}

/// [`running_train`] with more documents (`more`: Jobs, pods) in the cluster.
fn running_train_with(gates: &str, more: &str) -> TestBook {
    let extra = format!(
        "{}{}{}{}{}{}{}{more}",
        job_yaml("train", 4, 1, RACK),
        bound_job_pod_yaml("train", 0, 1, "b1-r2-h1"),
        bound_job_pod_yaml("train", 1, 1, "b1-r2-h1"),
        bound_job_pod_yaml("train", 2, 1, "b1-r2-h2"),
        bound_job_pod_yaml("train", 3, 1, "b1-r2-h2"),
        filler_pod_yaml("decoy-1", 3, "b1-r1-h1"),
        filler_pod_yaml("decoy-2", 3, "b1-r1-h2"),
    );
    let cluster = load(&format!("{}{extra}", base_yaml(3)));
    TestBook {
        book: PlanBook::new(FeatureGates::parse(gates).unwrap(), TTL),
        state: ClusterState::from_cluster(&cluster),
        cluster,
    }
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The node update the watch applies when `node` went NotReady `secs` seconds ago.
pub(super) fn not_ready_since(b: &mut TestBook, node: &str, secs: i64) {
    let mut info = b.state.node_by_name(node).unwrap().clone();
    info.ready = false;
    info.ready_since = Some(unix_now() - secs);
    b.state.apply_node(info);
}

/// The node update that gives `node` a taint.
fn taint_node(b: &mut TestBook, node: &str, key: &str, effect: &str) {
    let mut info = b.state.node_by_name(node).unwrap().clone();
    info.taints.push(Taint {
        key: key.into(),
        effect: effect.into(),
        ..Default::default()
    });
    b.state.apply_node(info);
}

/// The pod deletion (or finish as Failed) the watch applies for pod `index` of `job`.
fn lose(b: &mut TestBook, job: &str, index: usize) {
    assert!(
        b.state.remove_pod(&uid(job, index)),
        "{job}-{index} was bound"
    );
}

/// The pod update for pod `index` of `job` getting a deletion timestamp.
fn terminating(b: &mut TestBook, job: &str, index: usize) {
    let mut pod = b
        .cluster
        .bound_pods
        .iter()
        .find(|p| p.uid.as_deref() == Some(uid(job, index).as_str()))
        .unwrap()
        .clone();
    pod.terminating = true;
    b.state.apply_bound_pod(&pod);
    assert!(b.state.pod(&uid(job, index)).unwrap().terminating);
}

/// The pod the Job controller creates in place of pod `index` (same completion index, new
/// name and uid).
fn recreated(job: &str, index: usize) -> Pod {
    let mut pod = job_pod(job, index, 1);
    pod.metadata.name = Some(format!("{job}-{index}-again"));
    pod.metadata.uid = Some(format!("uid-{job}-{index}-again"));
    pod
}

/// What filter answers a recreated pod: the nodes that pass and the reason for the rest.
fn filter_recreated(b: &mut TestBook, index: usize) -> (Vec<String>, String) {
    let names = all_nodes(b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match b.filter(&recreated("train", index), &candidates, Instant::now()) {
        FilterVerdict::Only { pass, rejected, .. } => (
            pass.iter().map(|&i| names[i].clone()).collect(),
            rejected.reason.to_string(),
        ),
        other => panic!("a group pod gets Only, got {other:?}"),
    }
}

/// The nodes of the Job's pods that still run (by completion index), to show nothing moved.
fn running_nodes(b: &TestBook) -> Vec<(usize, String)> {
    let group = GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "train".into(),
    };
    let mut nodes: Vec<(usize, String)> = b
        .state
        .members(&group)
        .map(|p| {
            let node = b.state.name_of(p.node).unwrap().to_string();
            (p.index.completion.unwrap() as usize, node)
        })
        .collect();
    nodes.sort();
    nodes
}

#[test]
fn a_pod_deleted_on_a_healthy_node_is_recreated_on_the_same_node() {
    let mut b = running_train("");
    lose(&mut b, "train", 1);
    // b1-r2-h1 has 3 cpu left and b1-r2-h2 2: a fresh one-pod placement would take the
    // tighter h2. The pod goes back to its seat instead, as Kueue's assignment keeps it.
    let (pass, _) = filter_recreated(&mut b, 1);
    assert_eq!(pass, ["b1-r2-h1"]);
    let s = b.stats();
    assert_eq!((s.plans_made, s.replacements_placed), (0, 0), "{s:?}");
    // It binds there, and the next recreated pod of the same index has no predecessor left.
    b.bind(
        "default",
        "train-1-again",
        "uid-train-1-again",
        "b1-r2-h1",
        Instant::now(),
    )
    .unwrap();
    assert!(b.state.departed(&recreated_group()).is_empty());
}

fn recreated_group() -> GroupKey {
    GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "train".into(),
    }
}

#[test]
fn two_pods_lost_with_their_failed_node_are_both_replaced_in_their_rack_and_nothing_else_moves() {
    let mut b = running_train("");
    let before: Vec<(usize, String)> = running_nodes(&b)
        .into_iter()
        .filter(|(i, _)| *i >= 2)
        .collect();
    not_ready_since(&mut b, "b1-r2-h1", 60);
    lose(&mut b, "train", 0);
    lose(&mut b, "train", 1);
    let (first, _) = filter_recreated(&mut b, 0);
    let (second, _) = filter_recreated(&mut b, 1);
    // Rack r2's only room is b1-r2-h2; r1 (as tight, first by name) and r3 are never used.
    assert_eq!(
        (first.as_slice(), second.as_slice()),
        (&["b1-r2-h2".to_string()][..], &["b1-r2-h2".to_string()][..])
    );
    assert_eq!(
        running_nodes(&b),
        before,
        "the running pods stay where they are"
    );
    let s = b.stats();
    assert_eq!((s.plans_made, s.replacements_placed), (1, 1), "{s:?}");
    let notices = b.book.take_notices();
    let planned: Vec<&Notice> = notices
        .iter()
        .filter(|n| n.reason == "TopologyReplacementPlanned")
        .collect();
    assert_eq!(planned.len(), 1, "{notices:?}");
    assert!(
        planned[0]
            .note
            .contains("node b1-r2-h1 failed for the group (the node is NotReady)"),
        "{notices:?}"
    );
}

#[test]
fn with_pod_termination_off_a_not_ready_node_is_failed_after_thirty_seconds() {
    let mut b = running_train("TASReplaceNodeOnPodTermination=false");
    not_ready_since(&mut b, "b1-r2-h1", 5);
    lose(&mut b, "train", 0);
    let (pass, reason) = filter_recreated(&mut b, 0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        reason.contains("b1-r2-h1 is NotReady and counts as failed for Job default/train after")
            && reason.contains("TASReplaceNodeOnPodTermination is off"),
        "{reason}"
    );
    assert_eq!(b.stats().plans_made, 0);
    // Thirty seconds on, the node has failed: replaced beside the rest.
    not_ready_since(&mut b, "b1-r2-h1", 31);
    let (pass, _) = filter_recreated(&mut b, 0);
    assert_eq!(pass, ["b1-r2-h2"]);
}

#[test]
fn a_not_ready_node_where_pods_of_the_group_still_run_is_not_failed() {
    let mut b = running_train("");
    not_ready_since(&mut b, "b1-r2-h1", 3600);
    // Pod 0 is being deleted (its replacement exists), pod 1 still runs on the node.
    terminating(&mut b, "train", 0);
    let (pass, reason) = filter_recreated(&mut b, 0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        reason.contains("b1-r2-h1 has not failed for Job default/train")
            && reason.contains("still run"),
        "{reason}"
    );
    // Pod 1 stops too: now the node has failed.
    terminating(&mut b, "train", 1);
    let (pass, _) = filter_recreated(&mut b, 0);
    assert_eq!(pass, ["b1-r2-h2"]);
}

#[test]
fn with_fixed_time_a_not_ready_node_fails_after_thirty_seconds_even_with_pods_running() {
    let mut b = running_train("TASReplaceNodeDueToNotReadyOverFixedTime=true");
    terminating(&mut b, "train", 0);
    not_ready_since(&mut b, "b1-r2-h1", 10);
    let (pass, _) = filter_recreated(&mut b, 0);
    assert!(
        pass.is_empty(),
        "pod 1 still runs there and 30 s have not passed"
    );
    not_ready_since(&mut b, "b1-r2-h1", 45);
    let (pass, _) = filter_recreated(&mut b, 0);
    assert_eq!(pass, ["b1-r2-h2"]);
}

#[test]
fn with_replacement_off_the_pod_waits_for_its_failed_node() {
    let mut b = running_train("TASFailedNodeReplacement=false");
    not_ready_since(&mut b, "b1-r2-h1", 600);
    lose(&mut b, "train", 0);
    lose(&mut b, "train", 1);
    let (pass, reason) = filter_recreated(&mut b, 0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        reason.contains("TASFailedNodeReplacement is off"),
        "{reason}"
    );
    assert_eq!(b.stats().plans_made, 0);
}

#[test]
fn an_untolerated_taint_fails_a_ready_node_for_the_pods_it_lost() {
    // With the taints gate (default) the evicted pods are replaced beside the rest.
    let mut b = running_train("");
    taint_node(&mut b, "b1-r2-h1", "example.com/broken", "NoExecute");
    lose(&mut b, "train", 0);
    lose(&mut b, "train", 1);
    let (pass, _) = filter_recreated(&mut b, 0);
    assert_eq!(pass, ["b1-r2-h2"]);
    let notices = b.book.take_notices();
    assert!(
        notices.iter().any(|n| n
            .note
            .contains("node b1-r2-h1 failed for the group (the node has the taint example.com/broken:NoExecute)")),
        "{notices:?}"
    );
    // Without it the node is kept: the pod goes back to it (kube-scheduler's own taint filter
    // then keeps it pending, as Kueue's pinned pod stays).
    let mut b = running_train("TASReplaceNodeOnNodeTaints=false");
    taint_node(&mut b, "b1-r2-h1", "example.com/broken", "NoExecute");
    lose(&mut b, "train", 0);
    let (pass, _) = filter_recreated(&mut b, 0);
    assert_eq!(pass, ["b1-r2-h1"]);
}

/// Rack r2 loses b1-r2-h1 and pods 0 and 1 with it; a pod outside the group takes b1-r2-h2's
/// room, so the replacement fails; then that pod ends.
fn failed_replacement(gates: &str) -> TestBook {
    let mut b = running_train(gates);
    not_ready_since(&mut b, "b1-r2-h1", 60);
    lose(&mut b, "train", 0);
    lose(&mut b, "train", 1);
    let squatter = load(&format!(
        "{}{}",
        base_yaml(3),
        filler_pod_yaml("squatter", 2, "b1-r2-h2")
    ));
    b.state.apply_bound_pod(&squatter.bound_pods[0]);
    let (pass, reason) = filter_recreated(&mut b, 0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(reason.contains("cannot take Job default/train"), "{reason}");
    assert_eq!(b.stats().replacements_failed, 1);
    let key = squatter.bound_pods[0].key();
    assert!(b.state.remove_pod(&key));
    b
}

#[test]
fn fail_fast_tries_a_replacement_once_and_then_gives_the_group_up() {
    let mut b = failed_replacement("");
    let (pass, reason) = filter_recreated(&mut b, 0);
    assert!(pass.is_empty(), "given up, though room came back: {pass:?}");
    assert!(
        reason.contains("there was no replacement for unhealthy node(s): b1-r2-h1")
            && reason.contains("TASFailedNodeReplacementFailFast"),
        "{reason}"
    );
    let notices = b.book.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.reason == "TopologyReplacementFailed" && n.warning),
        "{notices:?}"
    );
}

#[test]
fn without_fail_fast_a_replacement_is_retried_when_capacity_comes_back() {
    let mut b = failed_replacement("TASFailedNodeReplacementFailFast=false");
    let (pass, _) = filter_recreated(&mut b, 0);
    assert_eq!(pass, ["b1-r2-h2"]);
    assert_eq!(b.stats().replacements_placed, 1);
}

#[test]
fn after_a_restart_between_failure_and_replacement_the_lost_pods_join_their_rack() {
    // The state is rebuilt from the cluster after the failure: b1-r2-h1 is NotReady, pods 0
    // and 1 are gone (nothing says where they ran), pods 2 and 3 run on b1-r2-h2. Rack r1 has
    // exactly the 2 cpu needed, as r2 has, and comes first: only the running pods say r2.
    let extra = format!(
        "{}{}{}{}{}",
        job_yaml("train", 4, 1, RACK),
        bound_job_pod_yaml("train", 2, 1, "b1-r2-h2"),
        bound_job_pod_yaml("train", 3, 1, "b1-r2-h2"),
        filler_pod_yaml("decoy-1", 3, "b1-r1-h1"),
        filler_pod_yaml("decoy-2", 3, "b1-r1-h2"),
    );
    let mut cluster = load(&format!("{}{extra}", base_yaml(3)));
    for n in cluster.nodes.iter_mut().filter(|n| n.name == "b1-r2-h1") {
        n.ready = false;
    }
    let mut b = TestBook::new(cluster, TTL);
    assert!(b.state.departed(&recreated_group()).is_empty());
    let (first, _) = filter_recreated(&mut b, 0);
    let (second, _) = filter_recreated(&mut b, 1);
    assert_eq!(first, ["b1-r2-h2"]);
    assert_eq!(second, ["b1-r2-h2"]);
}

#[test]
fn open_seats_on_a_node_that_fails_before_binding_are_planned_again_beside_the_rest() {
    // Job `fresh`: 6 pods x 1 cpu in one block (two racks of two hosts), nothing bound. Pod 0
    // binds to its seat; then the node of other seats fails before their pods came: without
    // a new plan those pods would wait for it until the plan expired.
    let mut b = book(2, &job_yaml("fresh", 6, 1, BLOCK));
    let t0 = Instant::now();
    let planned = seats(&mut b, "fresh", 6, 1, t0);
    b.bind(
        "default",
        &pod_name("fresh", 0),
        &uid("fresh", 0),
        &planned[0],
        t0,
    )
    .unwrap();
    let lost = planned[1..]
        .iter()
        .find(|n| **n != planned[0])
        .expect("the plan spans two hosts")
        .clone();
    not_ready_since(&mut b, &lost, 1);
    let names: Vec<String> = all_nodes(&b).into_iter().filter(|n| *n != lost).collect();
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    for i in 1..6 {
        match b.filter(&job_pod("fresh", i, 1), &candidates, t0) {
            FilterVerdict::Only { pass, rejected, .. } => {
                assert_eq!(pass.len(), 1, "pod {i}: {rejected:?}");
                let node = &names[pass[0]];
                assert_ne!(*node, lost, "pod {i}");
            }
            other => panic!("pod {i}: {other:?}"),
        }
    }
    let notices = b.book.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.reason == "TopologySeatLost" && n.note.contains(&lost)),
        "{notices:?}"
    );
}

/// A single pod that asks for a host by itself (a workload owned by one pod).
fn single_tas_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "solo", "namespace": "default", "uid": "uid-solo",
            "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"},
            "annotations": {"kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"},
        },
        "spec": {
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1"}}}],
            "nodeSelector": {"node-group": "tas"},
        },
        "status": {"phase": "Pending"},
    }))
    .unwrap()
}

#[test]
fn a_single_pods_seat_on_a_failed_node_is_kept_only_with_skip_reassignment() {
    for (gates, kept) in [
        ("", true),
        ("SkipReassignmentForPodOwnedWorkloads=false", false),
    ] {
        let cluster = load(&base_yaml(2));
        let mut b = TestBook {
            book: PlanBook::new(FeatureGates::parse(gates).unwrap(), TTL),
            state: ClusterState::from_cluster(&cluster),
            cluster,
        };
        let t0 = Instant::now();
        let seat = seat_of(&mut b, &single_tas_pod(), t0);
        not_ready_since(&mut b, &seat, 1);
        let names: Vec<String> = all_nodes(&b).into_iter().filter(|n| *n != seat).collect();
        let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
        match b.filter(&single_tas_pod(), &candidates, t0) {
            FilterVerdict::Only { pass, .. } if kept => {
                assert!(pass.is_empty(), "{gates}: the seat stays on {seat}")
            }
            FilterVerdict::Only { pass, rejected, .. } => {
                assert_eq!(pass.len(), 1, "{gates}: moved ({rejected:?})");
            }
            other => panic!("{gates}: {other:?}"),
        }
    }
}

#[test]
fn a_pod_lost_on_a_healthy_node_goes_back_there_even_after_a_replacement_plan_was_made() {
    let mut b = running_train("");
    not_ready_since(&mut b, "b1-r2-h1", 60);
    lose(&mut b, "train", 0);
    lose(&mut b, "train", 1);
    // Pod 3 is deleted on b1-r2-h2, which stays healthy.
    lose(&mut b, "train", 3);
    let (first, _) = filter_recreated(&mut b, 0);
    assert_eq!(first, ["b1-r2-h2"]);
    assert_eq!(b.stats().plans_made, 1);
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match b.filter(&recreated("train", 3), &candidates, Instant::now()) {
        FilterVerdict::Only { pass, rejected, .. } => {
            let pass: Vec<&str> = pass.iter().map(|&i| names[i].as_str()).collect();
            assert_eq!(pass, ["b1-r2-h2"], "{rejected:?}");
            assert!(
                rejected
                    .reason
                    .contains("where the pod this one replaces ran"),
                "pinned, not seated in the replacement plan: {rejected:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Pod `index` of `job` as Kueue's own TAS leaves it once it admitted the workload: its
/// PodSet label, its Workload annotation and the node it chose in the nodeSelector.
fn kueue_placed_pod(job: &str, index: usize, node: &str) -> Pod {
    let mut pod = job_pod(job, index, 1);
    let meta = &mut pod.metadata;
    meta.labels
        .get_or_insert_default()
        .insert("kueue.x-k8s.io/podset".into(), "main".into());
    meta.annotations
        .get_or_insert_default()
        .insert("kueue.x-k8s.io/workload".into(), format!("job-{job}-1a2b3"));
    pod.spec
        .as_mut()
        .unwrap()
        .node_selector
        .get_or_insert_default()
        .insert("kubernetes.io/hostname".into(), node.into());
    pod
}

#[test]
fn a_pod_kueue_manages_is_passed_through_never_planned_and_binds_on_held_capacity() {
    // Job `gang` (8 pods, one rack) holds all of rack r1 in kube-tas's plan; Job `theirs`,
    // which Kueue admitted and placed on b1-r1-h1, is not kube-tas's to plan.
    let mut b = book(
        1,
        &format!(
            "{}{}",
            job_yaml("gang", 8, 1, RACK),
            job_yaml("theirs", 1, 1, RACK)
        ),
    );
    let t0 = Instant::now();
    seat_of(&mut b, &job_pod("gang", 0, 1), t0);
    assert_eq!(b.stats().plans_made, 1);
    let theirs = kueue_placed_pod("theirs", 0, "b1-r1-h1");
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match b.filter(&theirs, &candidates, t0) {
        FilterVerdict::Except { rejected } => assert!(rejected.is_empty(), "{rejected:?}"),
        other => panic!("passed through, got {other:?}"),
    }
    assert_eq!(b.stats().plans_made, 1, "no plan for Kueue's pod");
    b.bind(
        "default",
        &pod_name("theirs", 0),
        &uid("theirs", 0),
        "b1-r1-h1",
        t0,
    )
    .unwrap();
    assert_eq!(cpu_used(&b, "b1-r1-h1"), 1000, "its usage counts");
    // The same pod without Kueue's marks would have to wait: the rack is held.
    let ours = job_pod("theirs", 0, 1);
    let mut ours = ours;
    ours.metadata.uid = Some("uid-ours".into());
    ours.metadata.name = Some("ours".into());
    match b.filter(&ours, &candidates, t0) {
        FilterVerdict::Only { pass, .. } => assert!(pass.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_pod_pinned_to_its_predecessors_node_is_told_when_a_plan_holds_the_room_there() {
    // Pod 1 leaves b1-r2-h1 (healthy), which then has 3 cpu free; `other` (3 x 1 cpu, one
    // rack) is planned onto exactly those 3 cpu before pod 1's successor comes.
    let mut b = running_train_with("", &job_yaml("other", 3, 1, RACK));
    lose(&mut b, "train", 1);
    let t0 = Instant::now();
    let other = seats(&mut b, "other", 3, 1, t0);
    assert!(other.iter().all(|n| n == "b1-r2-h1"), "{other:?}");
    let (pass, reason) = filter_recreated(&mut b, 1);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        reason.contains("b1-r2-h1 has not failed for Job default/train")
            && reason
                .contains("its room is held by 1 plan (Job default/other) for pods not bound yet"),
        "{reason}"
    );
}

#[test]
fn a_pod_pinned_to_a_node_pods_fill_is_not_told_of_holds() {
    // As above, but a pod outside any group is bound on b1-r2-h1's 3 free cpu.
    let mut b = running_train_with("", &job_yaml("other", 3, 1, RACK));
    lose(&mut b, "train", 1);
    let t0 = Instant::now();
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let _ = b.filter(&lone_pod("squat", 3), &candidates, t0);
    b.bind("default", "squat", "uid-squat", "b1-r2-h1", t0)
        .unwrap();
    let (pass, reason) = filter_recreated(&mut b, 1);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(reason.contains("has no room left for the pod"), "{reason}");
    assert!(!reason.contains("held"), "{reason}");
}

/// A Job deleted and created again under its name while the first Job's pods are still being
/// deleted is a new workload, as Kueue makes a new Workload for it: its pods are planned as a
/// gang of their own (its seats held), not sent one by one to the nodes of the first Job's
/// pods of the same index as if they replaced them.
#[test]
fn a_job_created_again_while_the_first_ones_pods_are_deleted_is_planned_anew() {
    let mut b = running_train("");
    let job = b.cluster.jobs[&("default".to_string(), "train".to_string())].clone();
    let first = Incarnation::of_uid(Some("job-uid-train"));
    b.state.apply_job("default", "train", job.clone(), first);
    assert!(b.state.delete_job("default", "train"));
    for i in 0..4 {
        terminating(&mut b, "train", i);
    }
    let second = "job-uid-train-again";
    b.state
        .apply_job("default", "train", job, Incarnation::of_uid(Some(second)));
    let mut pod = recreated("train", 1);
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: "train".into(),
        uid: second.into(),
        controller: Some(true),
        ..Default::default()
    }]);
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdict = b.filter(&pod, &candidates, Instant::now());
    let FilterVerdict::Only { pass, rejected, .. } = &verdict else {
        panic!("{verdict:?}")
    };
    assert_eq!(pass.len(), 1, "{verdict:?}");
    assert!(!rejected.reason.contains("replaces"), "{rejected:?}");
    let s = b.stats();
    assert_eq!((s.plans_made, s.seats_held), (1, 4), "{s:?}");
}

/// Pod `index` of the second creation of Job `job` (its Job's uid in its owner reference).
fn of_second_creation(job: &str, index: usize) -> Pod {
    let mut pod = recreated(job, index);
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: job.into(),
        uid: format!("job-uid-{job}-again"),
        controller: Some(true),
        ..Default::default()
    }]);
    pod
}

/// A pod of a Job created again is no successor of the first Job's pod of its index, even
/// before the Job watch shows the new Job: it is not sent to the node that pod is leaving.
#[test]
fn a_pod_of_a_job_created_again_replaces_no_pod_of_the_first() {
    let mut b = running_train("");
    terminating(&mut b, "train", 1);
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    // The first Job's own pod made again goes back (the check can see a predecessor).
    let (pass, _) = filter_recreated(&mut b, 1);
    assert_eq!(pass, ["b1-r2-h1"]);
    let verdict = b.filter(&of_second_creation("train", 1), &candidates, Instant::now());
    let reason = match &verdict {
        FilterVerdict::Only { rejected, .. } => rejected.reason.to_string(),
        other => format!("{other:?}"),
    };
    assert!(!reason.contains("replaces"), "{reason}");
}

/// A Job deleted and created again while the first one's gang waited for its seats: once the
/// Job watch shows the new Job, the first Job's plan is released at the new Job's first pod,
/// which is planned whole; a pending pod of the first Job still asking is placed nowhere (the
/// garbage collector deletes it), and drops nothing.
#[test]
fn a_plan_of_a_job_created_again_is_made_anew() {
    let mut b = book(2, &job_yaml("train", 2, 1, RACK));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    seat_of(&mut b, &job_pod("train", 0, 1), Instant::now());
    assert_eq!((b.stats().plans_made, b.stats().seats_held), (1, 2));
    let job = b.cluster.jobs[&("default".to_string(), "train".to_string())].clone();
    let second = Incarnation::of_uid(Some("job-uid-train-again"));
    b.state.apply_job("default", "train", job, second);
    seat_of(&mut b, &of_second_creation("train", 0), Instant::now());
    let s = b.stats();
    assert_eq!((s.plans_made, s.seats_held), (2, 2), "{s:?}");
    let notices = b.book.take_notices();
    assert!(
        notices.iter().any(|n| n.reason == "TopologyPlanReleased"
            && n.note.contains("created again")
            && n.note.contains("2 seat(s)")),
        "{notices:?}"
    );
    // The first Job's other pod, still pending: turned away, the new plan kept.
    let verdict = b.filter(&job_pod("train", 1, 1), &candidates, Instant::now());
    assert!(
        matches!(&verdict, FilterVerdict::Only { pass, rejected, .. }
            if pass.is_empty() && rejected.reason.contains("deleted and created again")),
        "{verdict:?}"
    );
    assert_eq!((b.stats().plans_made, b.stats().seats_held), (2, 2));
    // The new Job's second pod takes the new plan's other seat: no third plan.
    seat_of(&mut b, &of_second_creation("train", 1), Instant::now());
    assert_eq!(b.stats().plans_made, 2);
}
