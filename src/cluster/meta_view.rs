//! [`MetaView`]: an object's `metadata` as kube-tas reads it, every field but
//! `managedFields`, which is most of a real object's metadata (a tree of objects per field
//! manager) and never read; serde skips it without building it. Shared by the extender's
//! hot path and the watches.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;

/// A pod's `metadata` as the hot path reads it: every field but `managedFields`, which is
/// most of a real pod's metadata (a tree of objects per field manager) and never read by
/// placement; it is skipped unparsed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaView {
    /// `annotations`.
    pub annotations: Option<BTreeMap<String, String>>,
    /// `creationTimestamp`.
    pub creation_timestamp: Option<Time>,
    /// `deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `deletionTimestamp`.
    pub deletion_timestamp: Option<Time>,
    /// `finalizers`.
    pub finalizers: Option<Vec<String>>,
    /// `generateName`.
    pub generate_name: Option<String>,
    /// `generation`.
    pub generation: Option<i64>,
    /// `labels`.
    pub labels: Option<BTreeMap<String, String>>,
    /// `name`.
    pub name: Option<String>,
    /// `namespace`.
    pub namespace: Option<String>,
    /// `ownerReferences`.
    pub owner_references: Option<Vec<OwnerReference>>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `selfLink`.
    pub self_link: Option<String>,
    /// `uid`.
    pub uid: Option<String>,
}

impl From<MetaView> for ObjectMeta {
    fn from(m: MetaView) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_path_keeps_all_metadata_but_managed_fields() {
        let meta = serde_json::json!({
            "name": "p", "namespace": "ml", "uid": "u", "generateName": "p-",
            "labels": {"a": "1"}, "annotations": {"b": "2"}, "finalizers": ["f"],
            "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "7",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                 "uid": "ju", "controller": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
        });
        let full: ObjectMeta = serde_json::from_value(meta.clone()).unwrap();
        let view: MetaView = serde_json::from_value(meta).unwrap();
        assert!(full.managed_fields.is_some());
        assert_eq!(
            ObjectMeta::from(view),
            ObjectMeta {
                managed_fields: None,
                ..full
            }
        );
    }
}
