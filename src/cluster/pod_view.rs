//! The parts of a pod spec that placement and admission read, as a serde view: every
//! container's resources (and an init container's `restartPolicy`, for sidecars), overhead,
//! pod-level resources, nodeSelector, tolerations, node affinity, scheduling gates (Kueue's
//! gate says Kueue manages the pod), the Workload-API `schedulingGroup` and `priority`.
//! Everything else (env,
//! volumes, probes, ...) is skipped by serde without being built, which is most of the cost of
//! reading a pod on the extender's and the webhook's hot paths.
//!
//! Field names and shapes are the API's, so a value of the wrong type is refused as
//! k8s-openapi's full `PodSpec` refuses it, and messages name `PodSpec`. [`PodSpec::from`]
//! gives the familiar type back with only these fields set.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, PodSchedulingGate, PodSchedulingGroup, PodSpec,
    ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

/// A pod spec reduced to what placement and admission read (see the module doc).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename = "PodSpec", rename_all = "camelCase")]
pub struct PodSpecView {
    #[serde(default)]
    containers: Vec<ContainerView>,
    #[serde(default)]
    init_containers: Option<Vec<ContainerView>>,
    #[serde(default)]
    overhead: Option<BTreeMap<String, Quantity>>,
    #[serde(default)]
    resources: Option<ResourceRequirements>,
    #[serde(default)]
    node_selector: Option<BTreeMap<String, String>>,
    #[serde(default)]
    tolerations: Option<Vec<Toleration>>,
    #[serde(default)]
    affinity: Option<AffinityView>,
    #[serde(default)]
    scheduling_gates: Option<Vec<PodSchedulingGate>>,
    #[serde(default)]
    scheduling_group: Option<PodSchedulingGroup>,
    #[serde(default)]
    priority: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename = "Container", rename_all = "camelCase")]
struct ContainerView {
    #[serde(default)]
    name: String,
    #[serde(default)]
    resources: Option<ResourceRequirements>,
    #[serde(default)]
    restart_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename = "Affinity", rename_all = "camelCase")]
struct AffinityView {
    #[serde(default)]
    node_affinity: Option<NodeAffinity>,
}

impl From<ContainerView> for Container {
    fn from(c: ContainerView) -> Self {
        Container {
            name: c.name,
            resources: c.resources,
            restart_policy: c.restart_policy,
            ..Default::default()
        }
    }
}

impl From<PodSpecView> for PodSpec {
    fn from(s: PodSpecView) -> Self {
        PodSpec {
            containers: s.containers.into_iter().map(Container::from).collect(),
            init_containers: s
                .init_containers
                .map(|v| v.into_iter().map(Container::from).collect()),
            overhead: s.overhead,
            resources: s.resources,
            node_selector: s.node_selector,
            tolerations: s.tolerations,
            affinity: s.affinity.map(|a| Affinity {
                node_affinity: a.node_affinity,
                ..Default::default()
            }),
            scheduling_gates: s.scheduling_gates,
            scheduling_group: s.scheduling_group,
            priority: s.priority,
            ..Default::default()
        }
    }
}
