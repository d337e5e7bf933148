//! When a node has failed for a group: Kueue's TAS node controller rules (tas-semantics §4.2,
//! with the gate matrix of §4.4), as one pure decision over what the caller observed.
//!
//! A node that has failed for a group is replaced: the group's lost pods are placed again
//! inside the domain the group needs, every other pod stays. A node that has not failed keeps
//! the group's seats there: a recreated pod waits for it, as Kueue's pinned pod would.
//!
//! Rules, in Kueue's order:
//! 1. the node is gone, or has no `Ready` condition: failed at once, in every configuration;
//! 2. NotReady for less than [`NODE_FAILURE_DELAY`] with `TASReplaceNodeOnPodTermination` off:
//!    not yet (decided again when the delay has passed); NotReady for at least the delay with
//!    `TASReplaceNodeDueToNotReadyOverFixedTime` on: failed;
//! 3. NotReady: failed with `TASReplaceNodeOnPodTermination` off; with it on, failed only once
//!    no pod of the group progresses there (bound, not being deleted, not finished);
//! 4. Ready: with `TASReplaceNodeOnNodeTaints` on, a `NoSchedule`/`NoExecute` taint that some
//!    PodSet on the node does not tolerate fails it (after the group's pods stopped running
//!    there when `TASReplaceNodeOnPodTermination` is on); a taint every PodSet tolerates only
//!    for `tolerationSeconds` fails it once the pods stopped; `PreferNoSchedule` never does.
//!
//! With `TASFailedNodeReplacement` off nothing is ever replaced.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::gates::FeatureGates;
use super::node::{TAINT_EFFECT_NO_EXECUTE, TAINT_EFFECT_NO_SCHEDULE, taint_to_string, tolerates};

/// How long a node must be NotReady before the 30-second rules apply (Kueue's
/// `NodeFailureDelay`).
pub const NODE_FAILURE_DELAY: Duration = Duration::from_secs(30);

/// Hot swap at all.
pub const GATE_REPLACEMENT: &str = "TASFailedNodeReplacement";
/// NotReady or tainted nodes fail only once the group's pods stopped running there.
pub const GATE_ON_POD_TERMINATION: &str = "TASReplaceNodeOnPodTermination";
/// A node NotReady for [`NODE_FAILURE_DELAY`] fails whatever its pods do.
pub const GATE_NOT_READY_FIXED_TIME: &str = "TASReplaceNodeDueToNotReadyOverFixedTime";
/// Untolerated scheduling taints are a failure signal.
pub const GATE_ON_NODE_TAINTS: &str = "TASReplaceNodeOnNodeTaints";
/// A single replacement attempt; on failure the group is given up.
pub const GATE_FAIL_FAST: &str = "TASFailedNodeReplacementFailFast";
/// A workload owned by exactly one pod keeps its assignment.
pub const GATE_SKIP_POD_OWNED: &str = "SkipReassignmentForPodOwnedWorkloads";

/// What is known about a node when a group's seat on it is judged.
#[derive(Debug, Clone, Copy)]
pub struct NodeSeen<'a> {
    /// The node exists.
    pub exists: bool,
    /// Its `Ready` condition: `None` when it has none, else whether it is `True`.
    pub ready: Option<bool>,
    /// How long the `Ready` condition has had its status (`None`: unknown, taken as longer
    /// than any delay, as Kueue's zero transition time is).
    pub ready_for: Option<Duration>,
    /// `spec.taints`.
    pub taints: &'a [Taint],
}

/// What the group has on that node.
#[derive(Debug, Clone, Copy)]
pub struct GroupOnNode<'a> {
    /// Some pod of the group is bound there, not being deleted and not finished.
    pub progressing: bool,
    /// The effective tolerations of each PodSet of the group assigned there (template plus
    /// flavor).
    pub tolerations: &'a [&'a [Toleration]],
}

/// Why a node has failed for a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureCause {
    /// The node object is gone.
    Deleted,
    /// The node has no `Ready` condition.
    NoReadyCondition,
    /// NotReady and the group's pods there stopped (or the gate does not wait for them).
    NotReady,
    /// NotReady for at least [`NODE_FAILURE_DELAY`] (`TASReplaceNodeDueToNotReadyOverFixedTime`).
    NotReadyOverFixedTime,
    /// A scheduling taint (`key=value:Effect`) the group does not tolerate, or tolerates only
    /// for a while.
    Taint(String),
}

impl std::fmt::Display for FailureCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Deleted => f.write_str("the node is gone"),
            Self::NoReadyCondition => f.write_str("the node has no Ready condition"),
            Self::NotReady => f.write_str("the node is NotReady"),
            Self::NotReadyOverFixedTime => write!(
                f,
                "the node is NotReady for {}s or more",
                NODE_FAILURE_DELAY.as_secs()
            ),
            Self::Taint(t) => write!(f, "the node has the taint {t}"),
        }
    }
}

/// The decision for one node and one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeVerdict {
    /// Replace what the group lost there.
    Failed(FailureCause),
    /// Not failed: the group keeps its seats there (the reason, for messages).
    Kept(KeptBecause),
    /// Not failed yet: decided again after this long.
    NotYet(Duration),
}

/// Why a node that is not healthy has not failed for a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptBecause {
    /// Ready, and no scheduling taint counts.
    Healthy,
    /// `TASFailedNodeReplacement` is off.
    ReplacementOff,
    /// Some pod of the group still runs there (`TASReplaceNodeOnPodTermination`).
    PodsStillRun,
    /// Every scheduling taint is tolerated for good.
    TaintsTolerated,
}

impl std::fmt::Display for KeptBecause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Healthy => "the node is Ready",
            Self::ReplacementOff => "TASFailedNodeReplacement is off",
            Self::PodsStillRun => {
                "pods of the group still run there (TASReplaceNodeOnPodTermination)"
            }
            Self::TaintsTolerated => "the group tolerates the node's taints",
        })
    }
}

/// Whether `node` has failed for the group (see the module rules).
pub fn judge(node: &NodeSeen<'_>, group: &GroupOnNode<'_>, gates: &FeatureGates) -> NodeVerdict {
    if !gates.enabled(GATE_REPLACEMENT) {
        return NodeVerdict::Kept(KeptBecause::ReplacementOff);
    }
    if !node.exists {
        return NodeVerdict::Failed(FailureCause::Deleted);
    }
    let on_termination = gates.enabled(GATE_ON_POD_TERMINATION);
    // Kept while pods run there, when the gate waits for them; else failed for `cause`.
    let unless_running = |cause: FailureCause| {
        if on_termination && group.progressing {
            NodeVerdict::Kept(KeptBecause::PodsStillRun)
        } else {
            NodeVerdict::Failed(cause)
        }
    };
    match node.ready {
        None => return NodeVerdict::Failed(FailureCause::NoReadyCondition),
        Some(false) => {
            let expired = node.ready_for.is_none_or(|d| d >= NODE_FAILURE_DELAY);
            if !expired && !on_termination {
                let waited = node.ready_for.unwrap_or_default();
                return NodeVerdict::NotYet(NODE_FAILURE_DELAY.saturating_sub(waited));
            }
            if expired && gates.enabled(GATE_NOT_READY_FIXED_TIME) {
                return NodeVerdict::Failed(FailureCause::NotReadyOverFixedTime);
            }
            return unless_running(FailureCause::NotReady);
        }
        Some(true) => {}
    }
    if !gates.enabled(GATE_ON_NODE_TAINTS) {
        return NodeVerdict::Kept(KeptBecause::Healthy);
    }
    let mut scheduling = node
        .taints
        .iter()
        .filter(|t| t.effect == TAINT_EFFECT_NO_SCHEDULE || t.effect == TAINT_EFFECT_NO_EXECUTE)
        .peekable();
    if scheduling.peek().is_none() {
        return NodeVerdict::Kept(KeptBecause::Healthy);
    }
    let mut for_a_while: Option<&Taint> = None;
    for taint in scheduling {
        match tolerance(taint, group.tolerations) {
            Tolerance::Not => return unless_running(FailureCause::Taint(taint_to_string(taint))),
            Tolerance::ForAWhile => {
                for_a_while.get_or_insert(taint);
            }
            Tolerance::ForGood => {}
        }
    }
    match for_a_while {
        Some(taint) => {
            if group.progressing {
                NodeVerdict::Kept(KeptBecause::PodsStillRun)
            } else {
                NodeVerdict::Failed(FailureCause::Taint(taint_to_string(taint)))
            }
        }
        None => NodeVerdict::Kept(KeptBecause::TaintsTolerated),
    }
}

/// How the PodSets on a node tolerate one taint.
enum Tolerance {
    /// Some PodSet does not tolerate it.
    Not,
    /// Every PodSet tolerates it, at least one only through `tolerationSeconds`.
    ForAWhile,
    /// Every PodSet tolerates it without a time limit.
    ForGood,
}

fn tolerance(taint: &Taint, pod_sets: &[&[Toleration]]) -> Tolerance {
    let mut for_a_while = false;
    for tolerations in pod_sets {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Tolerance::Not;
        }
        // Tolerated for good when some matching toleration has no time limit.
        if matching.iter().all(|t| t.toleration_seconds.is_some()) {
            for_a_while = true;
        }
    }
    if for_a_while {
        Tolerance::ForAWhile
    } else {
        Tolerance::ForGood
    }
}

#[cfg(test)]
mod tests;
