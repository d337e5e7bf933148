//! kube-scheduler's own filters, emulated for `simulate`: what the scheduler checks before it
//! calls the extender, so that the candidate list the extender sees in a what-if run is the
//! one it would see in the cluster.
//!
//! Emulated, in the default plugins' words:
//! * `NodeUnschedulable`: a cordoned node, unless the pod tolerates
//!   `node.kubernetes.io/unschedulable:NoSchedule`;
//! * not-ready nodes: the node lifecycle controller taints them
//!   `node.kubernetes.io/not-ready:NoSchedule`, which `TaintToleration` then checks;
//! * `TaintToleration`: the first `NoSchedule` / `NoExecute` taint the pod does not tolerate;
//! * `NodeAffinity`: `spec.nodeSelector` and required node affinity;
//! * `NodeResourcesFit`: `pods` and every resource the pod requests, against allocatable
//!   minus the pods already on the node.
//!
//! A failure reads as kube-scheduler prints it: `0/N nodes are available: 2 Insufficient cpu,
//! 3 node(s) had untolerated taint {gpu: true}.`

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};

use crate::cluster::pod_requests;
use crate::topology::node::{RequiredAffinity, first_untolerated_taint, matches_node_selector};
use crate::topology::resources::{PODS, add_pod_usage};
use crate::topology::{NodeInfo, ResourceList};

use crate::keys::{NOT_READY_TAINT, UNSCHEDULABLE_TAINT};

/// The scheduler's view: nodes and what bound pods use on each.
///
/// Nodes do not change during a simulation, so the verdicts of the filters that read only the
/// node and the pod's placement constraints (not resources) are kept for the last set of
/// constraints seen: the pods of a gang share them, and a 15,000-node cluster is then checked
/// for labels and taints once per gang instead of once per pod.
#[derive(Debug, Clone)]
pub struct SchedulerView<'c> {
    nodes: &'c [NodeInfo],
    /// Each node's position in `nodes`, by name.
    index: std::collections::HashMap<&'c str, usize>,
    /// Per node: requests of pods on it, plus a `pods` count.
    used: Vec<ResourceList>,
    /// The constraints last checked, and per node why they turn it down (`None`: passes).
    constraint_verdicts: Option<(Constraints, Vec<Option<String>>)>,
    /// The requests last checked, and per node why `NodeResourcesFit` turns them down; kept
    /// current node by node as pods are assumed.
    resource_verdicts: Option<(ResourceList, Vec<Option<String>>)>,
}

/// The part of a pod the node-only filters read.
#[derive(Debug, Clone, PartialEq)]
struct Constraints {
    node_selector: BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
    affinity: Option<RequiredAffinity>,
}

/// What the filters read from a pod, parsed once.
#[derive(Debug, Clone)]
pub struct PodFilterFacts {
    requests: ResourceList,
    node_selector: BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
    affinity: Option<RequiredAffinity>,
}

impl PodFilterFacts {
    /// Reads a pod; the error names the field.
    pub fn of(pod: &Pod) -> Result<Self, String> {
        let spec = pod.spec.clone().unwrap_or_default();
        let requests = pod_requests(&spec, "spec").map_err(|e| e.to_string())?;
        let affinity = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(RequiredAffinity::parse)
            .transpose()
            .map_err(|e| format!("spec.affinity.nodeAffinity: {e}"))?;
        Ok(Self {
            requests,
            node_selector: spec.node_selector.unwrap_or_default(),
            tolerations: spec.tolerations.unwrap_or_default(),
            affinity,
        })
    }

    /// The pod's effective requests (without the `pods` slot).
    pub fn requests(&self) -> &ResourceList {
        &self.requests
    }
}

impl<'c> SchedulerView<'c> {
    /// The view of `nodes` with `bound` pods (node name, requests) on them.
    pub fn new<'a>(
        nodes: &'c [NodeInfo],
        bound: impl IntoIterator<Item = (&'a str, &'a ResourceList)>,
    ) -> Self {
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut view = Self {
            nodes,
            index,
            used: vec![ResourceList::new(); nodes.len()],
            constraint_verdicts: None,
            resource_verdicts: None,
        };
        for (node, requests) in bound {
            if let Some(i) = view.position(node) {
                view.assume(i, requests);
            }
        }
        view
    }

    /// The position of the node named `name` in [`Self::nodes`].
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The nodes.
    pub fn nodes(&self) -> &'c [NodeInfo] {
        self.nodes
    }

    /// Requests of the pods on node `i`, plus a `pods` count.
    pub fn usage(&self, i: usize) -> &ResourceList {
        &self.used[i]
    }

    /// Records a pod on node `i` (the scheduler's "assume").
    pub fn assume(&mut self, i: usize, requests: &ResourceList) {
        add_pod_usage(&mut self.used[i], requests);
        if let Some((requests, _)) = &self.resource_verdicts {
            let verdict = self.resource_reason(i, requests);
            if let Some((_, verdicts)) = &mut self.resource_verdicts {
                verdicts[i] = verdict;
            }
        }
    }

    /// Why node `i` rejects the pod, or `None` when it passes every filter.
    pub fn reject_reason(&self, i: usize, pod: &PodFilterFacts) -> Option<String> {
        self.constraint_reason(i, pod)
            .or_else(|| self.resource_reason(i, &pod.requests))
    }

    /// The node-only filters: unschedulable, not ready, taints, nodeSelector and affinity.
    fn constraint_reason(&self, i: usize, pod: &PodFilterFacts) -> Option<String> {
        let node = &self.nodes[i];
        if node.unschedulable
            && !tolerated(
                &pod.tolerations,
                &synthetic_taint(UNSCHEDULABLE_TAINT, "NoSchedule"),
            )
        {
            return Some("node(s) were unschedulable".to_string());
        }
        if !node.ready {
            let t = synthetic_taint(NOT_READY_TAINT, "NoSchedule");
            if !tolerated(&pod.tolerations, &t) {
                return Some(untolerated(&t));
            }
        }
        if let Some(t) = first_untolerated_taint(&node.taints, &pod.tolerations) {
            return Some(untolerated(t));
        }
        let affinity_ok = pod.affinity.as_ref().is_none_or(|a| a.matches(node));
        if !matches_node_selector(&node.labels, &pod.node_selector) || !affinity_ok {
            return Some("node(s) didn't match Pod's node affinity/selector".to_string());
        }
        None
    }

    /// `NodeResourcesFit`: pod slots and every requested resource.
    fn resource_reason(&self, i: usize, requests: &ResourceList) -> Option<String> {
        let node = &self.nodes[i];
        let used = &self.used[i];
        let used_of = |k: &str| used.get(k).copied().unwrap_or(0);
        let alloc_of = |k: &str| node.allocatable.get(k).copied().unwrap_or(0);
        if used_of(PODS) + 1 > alloc_of(PODS) {
            return Some("Too many pods".to_string());
        }
        for (k, &v) in requests {
            if k != PODS && v > 0 && used_of(k) + v > alloc_of(k) {
                return Some(format!("Insufficient {k}"));
            }
        }
        None
    }

    /// The nodes passing every filter, or kube-scheduler's `0/N nodes are available` text.
    pub fn feasible(&mut self, pod: &PodFilterFacts) -> Result<Vec<usize>, String> {
        let constraints = Constraints {
            node_selector: pod.node_selector.clone(),
            tolerations: pod.tolerations.clone(),
            affinity: pod.affinity.clone(),
        };
        if self
            .constraint_verdicts
            .as_ref()
            .is_none_or(|(c, _)| *c != constraints)
        {
            let verdicts = (0..self.nodes.len())
                .map(|i| self.constraint_reason(i, pod))
                .collect();
            self.constraint_verdicts = Some((constraints, verdicts));
        }
        if self
            .resource_verdicts
            .as_ref()
            .is_none_or(|(r, _)| *r != pod.requests)
        {
            let verdicts = (0..self.nodes.len())
                .map(|i| self.resource_reason(i, &pod.requests))
                .collect();
            self.resource_verdicts = Some((pod.requests.clone(), verdicts));
        }
        let (Some((_, constraint)), Some((_, resource))) =
            (&self.constraint_verdicts, &self.resource_verdicts)
        else {
            return Err("kube-scheduler emulation lost its verdicts".to_string());
        };
        let pass: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| constraint[i].is_none() && resource[i].is_none())
            .collect();
        if pass.is_empty() {
            let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
            for (c, r) in constraint.iter().zip(resource) {
                if let Some(reason) = c.as_ref().or(r.as_ref()) {
                    *reasons.entry(reason.clone()).or_insert(0) += 1;
                }
            }
            return Err(unavailable(self.nodes.len(), &reasons));
        }
        Ok(pass)
    }
}

/// `0/N nodes are available: <count> <reason>, ... .` with entries sorted as strings.
pub fn unavailable(total: usize, reasons: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}

fn synthetic_taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        ..Default::default()
    }
}

fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    first_untolerated_taint(std::slice::from_ref(taint), tolerations).is_none()
}

/// `node(s) had untolerated taint {key: value}`, as `TaintToleration` words it.
fn untolerated(t: &Taint) -> String {
    format!(
        "node(s) had untolerated taint {{{}: {}}}",
        t.key,
        t.value.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.to_string(),
            allocatable: [("cpu".to_string(), 4000), ("pods".to_string(), 2)].into(),
            ready: true,
            ..Default::default()
        }
    }

    fn pod(json: serde_json::Value) -> PodFilterFacts {
        PodFilterFacts::of(&serde_json::from_value(json).unwrap()).unwrap()
    }

    fn cpu_pod(cpu: &str) -> PodFilterFacts {
        pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
        )
    }

    #[test]
    fn each_filter_rejects_in_the_schedulers_words() {
        let mut nodes = vec![node("ok"), node("cordoned"), node("down"), node("tainted")];
        nodes.push(NodeInfo {
            labels: [("zone", "b")].into_iter().collect(),
            ..node("labelled")
        });
        nodes[1].unschedulable = true;
        nodes[2].ready = false;
        nodes[3].taints = vec![Taint {
            key: "gpu".into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        }];
        let view = SchedulerView::new(&nodes, []);
        let p = cpu_pod("1");
        assert_eq!(view.reject_reason(0, &p), None);
        assert_eq!(
            view.reject_reason(1, &p).unwrap(),
            "node(s) were unschedulable"
        );
        assert_eq!(
            view.reject_reason(2, &p).unwrap(),
            "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
        );
        assert_eq!(
            view.reject_reason(3, &p).unwrap(),
            "node(s) had untolerated taint {gpu: true}"
        );
        let selective = pod(serde_json::json!({"metadata": {"name": "p"},
            "spec": {"nodeSelector": {"zone": "a"}, "containers": []}}));
        assert_eq!(
            view.reject_reason(4, &selective).unwrap(),
            "node(s) didn't match Pod's node affinity/selector"
        );
        assert_eq!(
            view.reject_reason(0, &cpu_pod("5")).unwrap(),
            "Insufficient cpu"
        );
    }

    #[test]
    fn bound_pods_use_capacity_and_pod_slots() {
        let nodes = vec![node("n1")];
        let two: ResourceList = [("cpu".to_string(), 2000)].into();
        let mut view = SchedulerView::new(&nodes, [("n1", &two)]);
        assert_eq!(view.reject_reason(0, &cpu_pod("2")), None);
        assert_eq!(
            view.reject_reason(0, &cpu_pod("2500m")).unwrap(),
            "Insufficient cpu"
        );
        view.assume(0, &ResourceList::new());
        assert_eq!(
            view.reject_reason(0, &cpu_pod("1")).unwrap(),
            "Too many pods"
        );
    }

    #[test]
    fn a_toleration_lets_the_pod_onto_cordoned_and_tainted_nodes() {
        let mut n = node("n1");
        n.unschedulable = true;
        let view_nodes = vec![n];
        let view = SchedulerView::new(&view_nodes, []);
        let p = pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [],
            "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}}),
        );
        assert_eq!(view.reject_reason(0, &p), None);
    }

    #[test]
    fn kept_verdicts_follow_the_pods_constraints_and_resources() {
        let mut tainted = node("gpu");
        tainted.taints = vec![Taint {
            key: "gpu".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }];
        let nodes = vec![node("cpu"), tainted];
        let mut view = SchedulerView::new(&nodes, []);
        let plain = cpu_pod("3");
        assert_eq!(view.feasible(&plain).unwrap(), vec![0]);
        let tolerant = pod(serde_json::json!({"metadata": {"name": "p"}, "spec": {
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}));
        assert_eq!(view.feasible(&tolerant).unwrap(), vec![0, 1]);
        // Same constraints, but the first node is now full: resources are checked afresh.
        view.assume(0, &[("cpu".to_string(), 2000)].into());
        assert_eq!(view.feasible(&tolerant).unwrap(), vec![1]);
        let e = view.feasible(&plain).unwrap_err();
        assert_eq!(
            e,
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: }."
        );
    }

    #[test]
    fn the_tally_is_sorted_like_kube_scheduler() {
        let reasons: BTreeMap<String, usize> = [
            ("node(s) were unschedulable".to_string(), 3),
            ("Insufficient cpu".to_string(), 2),
        ]
        .into();
        assert_eq!(
            unavailable(5, &reasons),
            "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) were unschedulable."
        );
    }
}
