//! Kueue's own objects (`kueue.x-k8s.io/v1beta2`, `v1beta1` accepted): `Topology`,
//! `ResourceFlavor`, `ClusterQueue` and `LocalQueue`, as serde types holding the fields
//! kube-tas reads.
//!
//! Field names are Kueue's (camelCase); unknown fields are ignored so any object `kubectl get
//! -o yaml` prints deserializes; `null` or a missing list/map/spec reads as empty. The
//! `apiVersion` and `kind` are checked by the loader, not here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Deserializer, Serialize};

/// The API group of every Kueue kind.
pub const GROUP: &str = "kueue.x-k8s.io";
/// The `apiVersion`s kube-tas reads Kueue objects from.
pub const API_VERSIONS: [&str; 2] = ["kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"];

/// Reads `null` (or a missing field, with `#[serde(default)]`) as `T::default()`.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// A `Topology`: the node labels that make up the levels, outermost first (cluster scoped).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// Standard object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The levels.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: TopologySpec,
}

/// `Topology.spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// Levels from the highest (coarsest, e.g. block) to the lowest (e.g. hostname).
    #[serde(default, deserialize_with = "null_as_default")]
    pub levels: Vec<TopologyLevel>,
}

/// One level of a `Topology`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    /// The node label whose values name this level's domains.
    pub node_label: String,
}

/// A `ResourceFlavor`: which nodes a flavor stands for, and its topology (cluster scoped).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavor {
    /// Standard object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The node selection and topology.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: ResourceFlavorSpec,
}

/// `ResourceFlavor.spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// A node belongs to the flavor when it carries every one of these labels.
    #[serde(default, deserialize_with = "null_as_default")]
    pub node_labels: BTreeMap<String, String>,
    /// The `Topology` this flavor places on; `None` for a non-TAS flavor.
    #[serde(default)]
    pub topology_name: Option<String>,
    /// Added to a PodSet's tolerations when taints are checked.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tolerations: Vec<Toleration>,
    /// Taints that apply to every node of the flavor.
    #[serde(default, deserialize_with = "null_as_default")]
    pub node_taints: Vec<Taint>,
}

/// A `ClusterQueue`: quotas per flavor, grouped by resource (cluster scoped).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueue {
    /// Standard object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// Resource groups and namespace selector.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: ClusterQueueSpec,
}

/// `ClusterQueue.spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    /// Groups of resources with the flavors that provide them.
    #[serde(default, deserialize_with = "null_as_default")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Namespaces whose workloads may use this queue; `None` matches none, `{}` matches all.
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
}

/// One `resourceGroups[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    /// The resources this group provides.
    #[serde(default, deserialize_with = "null_as_default")]
    pub covered_resources: Vec<String>,
    /// The flavors, in the order Kueue tries them.
    #[serde(default, deserialize_with = "null_as_default")]
    pub flavors: Vec<FlavorQuotas>,
}

/// One `flavors[]` entry of a resource group.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// The `ResourceFlavor` name.
    pub name: String,
    /// The quota of each covered resource.
    #[serde(default, deserialize_with = "null_as_default")]
    pub resources: Vec<ResourceQuota>,
}

/// One `resources[]` entry of a flavor's quotas.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    /// The resource name.
    pub name: String,
    /// The guaranteed quota (the loader checks it parses as a quantity).
    pub nominal_quota: Quantity,
    /// How much more may be borrowed from the cohort.
    #[serde(default)]
    pub borrowing_limit: Option<Quantity>,
    /// How much of the nominal quota may be lent to the cohort.
    #[serde(default)]
    pub lending_limit: Option<Quantity>,
}

/// A `LocalQueue`: the namespaced name users put in `kueue.x-k8s.io/queue-name`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueue {
    /// Standard object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The ClusterQueue it feeds.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: LocalQueueSpec,
}

/// `LocalQueue.spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// The `ClusterQueue` name.
    pub cluster_queue: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_cluster_queue() {
        let cq: ClusterQueue = serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "cohortName": "ignored",
                "resourceGroups": [{
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": "f", "resources": [
                        {"name": "cpu", "nominalQuota": 9},
                        {"name": "memory", "nominalQuota": "36Gi", "borrowingLimit": "1Gi"},
                    ]}],
                }],
            },
        }))
        .expect("valid ClusterQueue");
        assert_eq!(cq.metadata.name.as_deref(), Some("cq"));
        assert!(cq.spec.namespace_selector.is_some());
        let group = &cq.spec.resource_groups[0];
        assert_eq!(group.covered_resources, ["cpu", "memory"]);
        assert_eq!(group.flavors[0].resources[0].nominal_quota.0, "9");
        assert_eq!(
            group.flavors[0].resources[1].borrowing_limit,
            Some(Quantity("1Gi".into()))
        );
    }

    #[test]
    fn reads_a_resource_flavor_with_nulls() {
        let rf: ResourceFlavor = serde_json::from_value(json!({
            "metadata": {"name": "gpu"},
            "spec": {
                "nodeLabels": {"pool": "gpu"},
                "topologyName": "default",
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "nodeTaints": null,
            },
        }))
        .expect("valid ResourceFlavor");
        assert_eq!(rf.spec.node_labels["pool"], "gpu");
        assert_eq!(rf.spec.topology_name.as_deref(), Some("default"));
        assert_eq!(rf.spec.tolerations[0].key.as_deref(), Some("gpu"));
        assert!(rf.spec.node_taints.is_empty());
    }

    #[test]
    fn reads_topology_and_local_queue() {
        let t: Topology = serde_json::from_value(json!({
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": "block"}, {"nodeLabel": "kubernetes.io/hostname"}]},
        }))
        .expect("valid Topology");
        assert_eq!(t.spec.levels[1].node_label, "kubernetes.io/hostname");

        let lq: LocalQueue = serde_json::from_value(json!({
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        }))
        .expect("valid LocalQueue");
        assert_eq!(lq.spec.cluster_queue, "cq");
    }

    #[test]
    fn a_quota_needs_a_nominal_quota() {
        let err = serde_json::from_value::<ResourceQuota>(json!({"name": "cpu"}))
            .expect_err("missing nominalQuota");
        assert!(err.to_string().contains("nominalQuota"), "{err}");
    }
}

/// A Kueue `Workload`, read only for whom it stands: its controller owner (the Job or JobSet
/// Kueue queues and places). Its spec and status are not read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct KueueWorkload {
    /// Standard object metadata (the owner references).
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
}

/// The Kueue objects admission resolves a workload against, by name.
#[derive(Debug, Clone, Default)]
pub struct KueueObjects {
    /// `Topology` objects by name.
    pub topologies: BTreeMap<String, Topology>,
    /// `ResourceFlavor` objects by name.
    pub resource_flavors: BTreeMap<String, ResourceFlavor>,
    /// `ClusterQueue` objects by name.
    pub cluster_queues: BTreeMap<String, ClusterQueue>,
    /// `LocalQueue` objects by (namespace, name).
    pub local_queues: BTreeMap<(String, String), LocalQueue>,
}
