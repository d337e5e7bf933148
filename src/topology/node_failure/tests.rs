//! The gate matrix of tas-semantics §4.4 and the per-node rules of §4.2, one row each.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::*;

fn gates(spec: &str) -> FeatureGates {
    FeatureGates::parse(spec).unwrap()
}

fn not_ready(for_secs: u64) -> NodeSeen<'static> {
    NodeSeen {
        exists: true,
        ready: Some(false),
        ready_for: Some(Duration::from_secs(for_secs)),
        taints: &[],
    }
}

fn ready(taints: &[Taint]) -> NodeSeen<'_> {
    NodeSeen {
        exists: true,
        ready: Some(true),
        ready_for: Some(Duration::from_secs(3600)),
        taints,
    }
}

const NONE: &[&[Toleration]] = &[&[]];

fn running(progressing: bool) -> GroupOnNode<'static> {
    GroupOnNode {
        progressing,
        tolerations: NONE,
    }
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        ..Default::default()
    }
}

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        toleration_seconds: seconds,
        ..Default::default()
    }
}

#[test]
fn replacement_off_keeps_every_node_even_a_deleted_one() {
    let g = gates("TASFailedNodeReplacement=false");
    let gone = NodeSeen {
        exists: false,
        ready: None,
        ready_for: None,
        taints: &[],
    };
    for node in [gone, not_ready(600), ready(&[])] {
        assert_eq!(
            judge(&node, &running(false), &g),
            NodeVerdict::Kept(KeptBecause::ReplacementOff)
        );
    }
}

#[test]
fn a_deleted_node_or_one_without_ready_condition_fails_at_once_in_every_configuration() {
    let gone = NodeSeen {
        exists: false,
        ready: None,
        ready_for: None,
        taints: &[],
    };
    let no_condition = NodeSeen {
        exists: true,
        ready: None,
        ready_for: None,
        taints: &[],
    };
    for spec in [
        "",
        "TASReplaceNodeOnPodTermination=false",
        "TASReplaceNodeDueToNotReadyOverFixedTime=true",
        "TASFailedNodeReplacementFailFast=false",
    ] {
        assert_eq!(
            judge(&gone, &running(true), &gates(spec)),
            NodeVerdict::Failed(FailureCause::Deleted),
            "{spec}"
        );
        assert_eq!(
            judge(&no_condition, &running(true), &gates(spec)),
            NodeVerdict::Failed(FailureCause::NoReadyCondition),
            "{spec}"
        );
    }
}

#[test]
fn pod_termination_on_not_ready_fails_once_the_pods_stopped_however_soon() {
    let g = gates("");
    assert_eq!(
        judge(&not_ready(1), &running(false), &g),
        NodeVerdict::Failed(FailureCause::NotReady)
    );
    // Pods still running: never failed, however long it is NotReady.
    assert_eq!(
        judge(&not_ready(86_400), &running(true), &g),
        NodeVerdict::Kept(KeptBecause::PodsStillRun)
    );
}

#[test]
fn pod_termination_off_waits_thirty_seconds_of_not_ready_then_fails_whatever_the_pods_do() {
    let g = gates("TASReplaceNodeOnPodTermination=false");
    assert_eq!(
        judge(&not_ready(12), &running(false), &g),
        NodeVerdict::NotYet(Duration::from_secs(18))
    );
    assert_eq!(
        judge(&not_ready(30), &running(true), &g),
        NodeVerdict::Failed(FailureCause::NotReady)
    );
}

#[test]
fn fixed_time_with_pod_termination_fails_on_whichever_comes_first() {
    let g = gates("TASReplaceNodeDueToNotReadyOverFixedTime=true");
    // Pods stopped: at once.
    assert_eq!(
        judge(&not_ready(2), &running(false), &g),
        NodeVerdict::Failed(FailureCause::NotReady)
    );
    // Pods running: kept until 30 s, failed after.
    assert_eq!(
        judge(&not_ready(29), &running(true), &g),
        NodeVerdict::Kept(KeptBecause::PodsStillRun)
    );
    assert_eq!(
        judge(&not_ready(31), &running(true), &g),
        NodeVerdict::Failed(FailureCause::NotReadyOverFixedTime)
    );
}

#[test]
fn fixed_time_without_pod_termination_fails_only_after_thirty_seconds() {
    let g =
        gates("TASReplaceNodeDueToNotReadyOverFixedTime=true,TASReplaceNodeOnPodTermination=false");
    assert!(matches!(
        judge(&not_ready(5), &running(false), &g),
        NodeVerdict::NotYet(_)
    ));
    assert_eq!(
        judge(&not_ready(45), &running(true), &g),
        NodeVerdict::Failed(FailureCause::NotReadyOverFixedTime)
    );
}

#[test]
fn an_unknown_transition_time_counts_as_long_ago() {
    let g = gates("TASReplaceNodeOnPodTermination=false");
    let node = NodeSeen {
        ready_for: None,
        ..not_ready(0)
    };
    assert_eq!(
        judge(&node, &running(true), &g),
        NodeVerdict::Failed(FailureCause::NotReady)
    );
}

#[test]
fn fail_fast_does_not_change_when_a_node_fails() {
    for spec in ["", "TASFailedNodeReplacementFailFast=false"] {
        let g = gates(spec);
        assert_eq!(
            judge(&not_ready(1), &running(false), &g),
            NodeVerdict::Failed(FailureCause::NotReady)
        );
        assert_eq!(
            judge(&not_ready(1), &running(true), &g),
            NodeVerdict::Kept(KeptBecause::PodsStillRun)
        );
    }
}

#[test]
fn an_untolerated_taint_fails_a_ready_node_once_its_pods_stopped() {
    let taints = [taint("gpu-broken", "NoSchedule")];
    let g = gates("");
    assert_eq!(
        judge(&ready(&taints), &running(true), &g),
        NodeVerdict::Kept(KeptBecause::PodsStillRun)
    );
    assert_eq!(
        judge(&ready(&taints), &running(false), &g),
        NodeVerdict::Failed(FailureCause::Taint("gpu-broken:NoSchedule".into()))
    );
    // Without the wait for pods, at once.
    let g = gates("TASReplaceNodeOnPodTermination=false");
    assert_eq!(
        judge(&ready(&taints), &running(true), &g),
        NodeVerdict::Failed(FailureCause::Taint("gpu-broken:NoSchedule".into()))
    );
}

#[test]
fn taints_are_no_signal_without_the_taints_gate_and_prefer_no_schedule_never_is() {
    let taints = [taint("gpu-broken", "NoExecute")];
    assert_eq!(
        judge(
            &ready(&taints),
            &running(false),
            &gates("TASReplaceNodeOnNodeTaints=false")
        ),
        NodeVerdict::Kept(KeptBecause::Healthy)
    );
    let soft = [taint("maybe", "PreferNoSchedule")];
    assert_eq!(
        judge(&ready(&soft), &running(false), &gates("")),
        NodeVerdict::Kept(KeptBecause::Healthy)
    );
}

#[test]
fn a_taint_tolerated_for_good_by_every_pod_set_keeps_the_node() {
    let taints = [taint("dedicated", "NoSchedule")];
    let forever = [toleration("dedicated", None)];
    let pod_sets: &[&[Toleration]] = &[&forever, &forever];
    let group = GroupOnNode {
        progressing: false,
        tolerations: pod_sets,
    };
    assert_eq!(
        judge(&ready(&taints), &group, &gates("")),
        NodeVerdict::Kept(KeptBecause::TaintsTolerated)
    );
    // One PodSet on the node without the toleration: untolerated.
    let pod_sets: &[&[Toleration]] = &[&forever, &[]];
    let group = GroupOnNode {
        progressing: false,
        tolerations: pod_sets,
    };
    assert!(matches!(
        judge(&ready(&taints), &group, &gates("")),
        NodeVerdict::Failed(FailureCause::Taint(_))
    ));
}

#[test]
fn a_no_execute_taint_tolerated_for_a_while_fails_once_the_pods_were_evicted() {
    let taints = [taint("node.kubernetes.io/unreachable", "NoExecute")];
    let a_while = [toleration("node.kubernetes.io/unreachable", Some(300))];
    let pod_sets: &[&[Toleration]] = &[&a_while];
    for spec in ["", "TASReplaceNodeOnPodTermination=false"] {
        let running = GroupOnNode {
            progressing: true,
            tolerations: pod_sets,
        };
        assert_eq!(
            judge(&ready(&taints), &running, &gates(spec)),
            NodeVerdict::Kept(KeptBecause::PodsStillRun),
            "{spec}"
        );
        let evicted = GroupOnNode {
            progressing: false,
            ..running
        };
        assert_eq!(
            judge(&ready(&taints), &evicted, &gates(spec)),
            NodeVerdict::Failed(FailureCause::Taint(
                "node.kubernetes.io/unreachable:NoExecute".into()
            )),
            "{spec}"
        );
    }
}
