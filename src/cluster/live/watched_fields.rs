//! Pods and nodes as the watches read them: deserialized without the fields kube-tas never
//! reads (`metadata.managedFields`; of a pod's `status` all but `phase`; of a node's all but
//! `allocatable` and `conditions`, so never its `images`). Those are most of a running pod's
//! or a node's JSON; skipped, they are parsed over but never allocated, which keeps the initial
//! list of a big cluster fast and leaves the allocator little to hold on to after it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use crate::cluster::meta_view::MetaView;

/// The fields of a pod the watches keep (unknown and skipped fields are ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PodFields {
    metadata: MetaView,
    spec: Option<PodSpec>,
    status: Option<StatusFields>,
}

/// `PodStatus`: only the phase (whether the pod finished).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StatusFields {
    phase: Option<String>,
}

/// The fields of a node the node watch keeps.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeFields {
    metadata: MetaView,
    spec: Option<NodeSpec>,
    status: Option<NodeStatusFields>,
}

/// `NodeStatus`: what placement reads (allocatable, and the `Ready` condition).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NodeStatusFields {
    allocatable: Option<BTreeMap<String, Quantity>>,
    conditions: Option<Vec<NodeCondition>>,
}

impl From<NodeFields> for Node {
    fn from(n: NodeFields) -> Self {
        Node {
            metadata: n.metadata.into(),
            spec: n.spec,
            status: n.status.map(|s| NodeStatus {
                allocatable: s.allocatable,
                conditions: s.conditions,
                ..NodeStatus::default()
            }),
        }
    }
}

impl From<PodFields> for Pod {
    fn from(p: PodFields) -> Self {
        Pod {
            metadata: p.metadata.into(),
            spec: p.spec,
            status: p.status.map(|s| PodStatus {
                phase: s.phase,
                ..PodStatus::default()
            }),
        }
    }
}

/// A newtype over a Kubernetes type (`Pod`, `Node`) that a watch deserializes through one of
/// the fields structs here, with the inner type's `Resource` (kind, group, version, plural,
/// scope).
macro_rules! watched_object {
    ($(#[$doc:meta])* $name:ident($inner:ty) through $fields:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name(pub $inner);

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$fields as serde::Deserialize>::deserialize(d).map(|f| Self(f.into()))
            }
        }

        impl kube::Resource for $name {
            type DynamicType = ();
            type Scope = <$inner as kube::Resource>::Scope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$inner as kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$inner as kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$inner as kube::Resource>::version(dt)
            }
            fn api_version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$inner as kube::Resource>::api_version(dt)
            }
            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$inner as kube::Resource>::plural(dt)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.0.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.0.metadata
            }
        }
    };
}
pub(crate) use watched_object;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    /// A running pod as the API server serves it: managed fields, a full status.
    fn running_pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "train-0", "namespace": "ml", "uid": "0b7c5a52-3c9e-4d7a-9f1e-2a6b8c4d0e1f",
                "resourceVersion": "1234", "generateName": "train-",
                "creationTimestamp": "2026-11-30T10:00:00Z",
                "deletionTimestamp": "2026-11-30T11:00:00Z", "deletionGracePeriodSeconds": 30,
                "labels": { "job-name": "train" },
                "annotations": { "kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/rack" },
                "finalizers": ["batch.kubernetes.io/job-tracking"],
                "ownerReferences": [{ "apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                      "uid": "11111111-2222-4333-8444-555555555555",
                                      "controller": true, "blockOwnerDeletion": true }],
                "managedFields": [{ "manager": "kube-controller-manager", "operation": "Update",
                                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                                    "fieldsV1": { "f:metadata": { "f:labels": { ".": {} } } } }]
            },
            "spec": {
                "nodeName": "node-1",
                "containers": [{ "name": "c", "image": "trainer:1",
                                 "resources": { "requests": { "cpu": "2", "memory": "1Gi" } } }]
            },
            "status": {
                "phase": "Running",
                "conditions": [{ "type": "Ready", "status": "True" }],
                "containerStatuses": [{ "name": "c", "image": "trainer:1", "imageID": "x",
                                        "ready": true, "restartCount": 0 }],
                "podIP": "10.0.0.1"
            }
        })
    }

    #[test]
    fn every_field_read_is_kept_and_the_rest_is_dropped() {
        let full: Pod = serde_json::from_value(running_pod()).unwrap();
        let slim: Pod = serde_json::from_value::<PodFields>(running_pod())
            .unwrap()
            .into();
        assert!(
            full.metadata.managed_fields.is_some(),
            "the fixture has them"
        );
        assert_eq!(slim.metadata.managed_fields, None);
        assert_eq!(
            slim.metadata,
            ObjectMeta {
                managed_fields: None,
                ..full.metadata.clone()
            },
            "every other metadata field is kept"
        );
        assert_eq!(slim.spec, full.spec);
        let status = slim.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(
            full.status.as_ref().unwrap().pod_ip.is_some(),
            "the fixture has one"
        );
        assert_eq!(status.pod_ip, None);
        assert_eq!(status.conditions, None);
        assert_eq!(
            crate::cluster::bound_pod_of(&slim_pod()).unwrap(),
            crate::cluster::bound_pod_of(&full).unwrap(),
            "the pod watch reads the same pod"
        );
        assert!(crate::cluster::bound_pod_of(&full).unwrap().is_some());
    }

    fn slim_pod() -> Pod {
        serde_json::from_value::<PodFields>(running_pod())
            .unwrap()
            .into()
    }

    /// A node as the kubelet reports it: images, node info, addresses, managed fields.
    fn kubelet_node() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "node-1", "resourceVersion": "77",
                "labels": { "cloud.provider.com/rack": "r1", "kubernetes.io/hostname": "node-1" },
                "annotations": { "node.alpha.kubernetes.io/ttl": "0" },
                "managedFields": [{ "manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                                    "fieldsType": "FieldsV1", "fieldsV1": { "f:status": {} } }]
            },
            "spec": {
                "providerID": "cloud://node-1", "unschedulable": true,
                "taints": [{ "key": "gpu", "value": "true", "effect": "NoSchedule" }]
            },
            "status": {
                "allocatable": { "cpu": "63500m", "memory": "250Gi", "pods": "110" },
                "capacity": { "cpu": "64", "memory": "256Gi", "pods": "110" },
                "conditions": [{ "type": "Ready", "status": "True",
                                 "lastTransitionTime": "2026-11-30T10:00:00Z" }],
                "addresses": [{ "type": "InternalIP", "address": "10.0.0.1" }],
                "nodeInfo": { "architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "c",
                              "kernelVersion": "k", "kubeProxyVersion": "", "kubeletVersion": "v1.37.0",
                              "machineID": "m", "operatingSystem": "linux", "osImage": "o",
                              "systemUUID": "s" },
                "images": [{ "names": ["registry.example/trainer@sha256:0123", "registry.example/trainer:1"],
                             "sizeBytes": 123456789 }]
            }
        })
    }

    #[test]
    fn a_node_keeps_what_placement_reads_and_drops_its_images() {
        let full: Node = serde_json::from_value(kubelet_node()).unwrap();
        let slim: Node = serde_json::from_value::<NodeFields>(kubelet_node())
            .unwrap()
            .into();
        let status = slim.status.clone().unwrap();
        let full_status = full.status.clone().unwrap();
        assert!(full_status.images.is_some() && full_status.node_info.is_some());
        assert_eq!(
            (status.images, status.node_info, status.addresses),
            (None, None, None)
        );
        assert_eq!(status.capacity, None);
        assert_eq!(status.allocatable, full_status.allocatable);
        assert_eq!(status.conditions, full_status.conditions);
        assert_eq!(slim.spec, full.spec);
        assert_eq!(
            slim.metadata,
            ObjectMeta {
                managed_fields: None,
                ..full.metadata.clone()
            }
        );
        let read = |n: Node| crate::cluster::load::node_info(n, "node-1".into()).unwrap();
        let node = read(slim);
        assert_eq!(node, read(full), "placement sees the same node");
        assert!(node.ready && node.unschedulable && !node.taints.is_empty());
    }

    #[test]
    fn a_pod_without_spec_or_status_reads_as_one() {
        let slim: Pod = serde_json::from_value::<PodFields>(json!({ "metadata": { "name": "p" } }))
            .unwrap()
            .into();
        assert_eq!(slim.metadata.name.as_deref(), Some("p"));
        assert!(slim.spec.is_none() && slim.status.is_none());
    }

    #[test]
    fn a_field_of_the_wrong_type_is_an_error() {
        let mut pod = running_pod();
        pod["metadata"]["labels"] = json!(["not", "a", "map"]);
        assert!(serde_json::from_value::<PodFields>(pod).is_err());
    }
}
