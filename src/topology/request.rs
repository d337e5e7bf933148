//! What a PodSet asks of the topology: the request built from the `kueue.x-k8s.io/podset-*`
//! annotations exactly as Kueue's builder does, plus the pod-level facts placement needs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, PreferredSchedulingTerm, Toleration};

use super::resources::ResourceList;

/// One slice layer: each group of `size` pods must sit inside one domain of `level`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceLayer {
    /// The level's node label.
    pub level: String,
    /// Pods per slice at this layer; 0 when the annotation gave a level but no size.
    pub size: i32,
}

/// A PodSet's topology request (Kueue's `PodSetTopologyRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyRequest {
    /// `podset-required-topology`.
    pub required: Option<String>,
    /// `podset-preferred-topology`.
    pub preferred: Option<String>,
    /// `podset-unconstrained-topology`, parsed as Go's `ParseBool`.
    pub unconstrained: Option<bool>,
    /// The unified slice view, outermost first: the multi-layer constraints when given,
    /// else the legacy `slice-required-topology` + `slice-size` pair, else empty.
    pub slice_layers: Vec<SliceLayer>,
    /// `podset-group-name` (kept only with required or preferred, as Kueue does).
    pub group_name: Option<String>,
}

/// One PodSet to place: `count` identical pods.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSetSpec {
    /// The PodSet name (`main` for a Job).
    pub name: String,
    /// How many pods.
    pub count: i32,
    /// One pod's effective requests (without the `pods` slot).
    pub requests: ResourceList,
    /// The topology request; `None` for a PodSet without TAS annotations.
    pub topology: Option<TopologyRequest>,
    /// No annotation but queued to a TAS-only ClusterQueue: unconstrained at the lowest level.
    pub implied: bool,
    /// The pod template's `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The pod template's tolerations (the flavor's are added at placement).
    pub tolerations: Vec<Toleration>,
    /// `requiredDuringSchedulingIgnoredDuringExecution` of the node affinity.
    pub required_affinity: Option<NodeSelector>,
    /// `preferredDuringSchedulingIgnoredDuringExecution` of the node affinity.
    pub preferred_affinity: Vec<PreferredSchedulingTerm>,
}
