//! Nodes as the placement engine sees them, and the node-level filters Kueue applies in
//! hostname-lowest mode: taints against tolerations, nodeSelector, required node affinity,
//! and the preferred-affinity score.
//!
//! All matching follows the standard Kubernetes semantics (`k8s.io/component-helpers`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, PreferredSchedulingTerm, Taint, Toleration};

use super::resources::ResourceList;

/// A node stripped to what placement needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `status.allocatable`, parsed (CPU in millicores).
    pub allocatable: ResourceList,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
}

impl NodeInfo {
    /// Ready and not cordoned: the only nodes Kueue's cache keeps.
    pub fn schedulable_and_ready(&self) -> bool {
        self.ready && !self.unschedulable
    }
}
