//! The parts of a Job or Pod that admission reads, and nothing else.
//!
//! The API server sends the whole object: `managedFields`, environment, volumes, probes. Read
//! into k8s-openapi's full types, all of it is built and dropped again. These types name only
//! what the webhook uses (metadata for the queue, annotations and owner; the pod spec as
//! placement reads it, [`PodSpecView`], shared with the extender; a Job's parallelism and
//! completions) and let serde skip the rest without building it; [`read_job`] and [`read_pod`] then hand the
//! familiar k8s-openapi types to the rest of admission, with only those fields set.
//!
//! Field names and shapes are the API's: a value of the wrong type is refused just as the
//! full types refuse it, and error messages name the API's types (`PodSpec`, `ObjectMeta`).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Deserialize;

use crate::cluster::pod_view::PodSpecView;

/// Reads a Job from its JSON, keeping what admission reads.
pub fn read_job(json: &str) -> Result<Job, serde_json::Error> {
    serde_json::from_str::<JobView>(json).map(Job::from)
}

/// Reads a Pod from its JSON, keeping what admission reads.
pub fn read_pod(json: &str) -> Result<Pod, serde_json::Error> {
    serde_json::from_str::<PodView>(json).map(Pod::from)
}

#[derive(Deserialize)]
#[serde(rename = "Job")]
struct JobView {
    #[serde(default)]
    metadata: MetaView,
    #[serde(default)]
    spec: Option<JobSpecView>,
}

#[derive(Deserialize)]
#[serde(rename = "JobSpec", rename_all = "camelCase")]
struct JobSpecView {
    #[serde(default)]
    parallelism: Option<i32>,
    #[serde(default)]
    completions: Option<i32>,
    #[serde(default)]
    template: Option<TemplateView>,
}

#[derive(Deserialize)]
#[serde(rename = "PodTemplateSpec")]
struct TemplateView {
    #[serde(default)]
    metadata: Option<MetaView>,
    #[serde(default)]
    spec: Option<PodSpecView>,
}

#[derive(Deserialize)]
#[serde(rename = "Pod")]
struct PodView {
    #[serde(default)]
    metadata: MetaView,
    #[serde(default)]
    spec: Option<PodSpecView>,
}

#[derive(Default, Deserialize)]
#[serde(rename = "ObjectMeta", rename_all = "camelCase")]
struct MetaView {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    generate_name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
}

impl From<MetaView> for ObjectMeta {
    fn from(m: MetaView) -> Self {
        ObjectMeta {
            name: m.name,
            generate_name: m.generate_name,
            namespace: m.namespace,
            labels: m.labels,
            annotations: m.annotations,
            owner_references: m.owner_references,
            ..Default::default()
        }
    }
}

impl From<PodView> for Pod {
    fn from(p: PodView) -> Self {
        Pod {
            metadata: p.metadata.into(),
            spec: p.spec.map(PodSpec::from),
            status: None,
        }
    }
}

impl From<JobView> for Job {
    fn from(j: JobView) -> Self {
        Job {
            metadata: j.metadata.into(),
            spec: j.spec.map(|s| {
                let template = s.template.map(|t| PodTemplateSpec {
                    metadata: t.metadata.map(ObjectMeta::from),
                    spec: t.spec.map(PodSpec::from),
                });
                JobSpec {
                    parallelism: s.parallelism,
                    completions: s.completions,
                    template: template.unwrap_or_default(),
                    ..Default::default()
                }
            }),
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What admission reads comes out of the view exactly as out of the full types.
    #[test]
    fn the_views_keep_what_admission_reads() {
        let pod = serde_json::json!({
            "metadata": {"name": "p", "generateName": "p-", "namespace": "ml",
                "labels": {"a": "1"}, "annotations": {"b": "2"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                    "uid": "u", "controller": true}],
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
            "spec": {
                "containers": [{"name": "c", "image": "x", "env": [{"name": "E", "value": "v"}],
                    "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}}}],
                "initContainers": [{"name": "s", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "1"}}}],
                "nodeSelector": {"k": "v"},
                "tolerations": [{"key": "t", "operator": "Exists"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions":
                        [{"key": "z", "operator": "In", "values": ["a"]}]}]}}},
                "resources": {"requests": {"cpu": "4"}},
                "overhead": {"cpu": "100m"},
                "volumes": [{"name": "v", "emptyDir": {}}]
            },
            "status": {"phase": "Pending"}
        });
        let text = pod.to_string();
        let full: Pod = serde_json::from_str(&text).unwrap();
        let slim = read_pod(&text).unwrap();
        let meta = &slim.metadata;
        assert_eq!(meta.name, full.metadata.name);
        assert_eq!(meta.generate_name, full.metadata.generate_name);
        assert_eq!(meta.namespace, full.metadata.namespace);
        assert_eq!(meta.labels, full.metadata.labels);
        assert_eq!(meta.annotations, full.metadata.annotations);
        assert_eq!(meta.owner_references, full.metadata.owner_references);
        let (s, f) = (slim.spec.unwrap(), full.spec.unwrap());
        assert_eq!(s.node_selector, f.node_selector);
        assert_eq!(s.tolerations, f.tolerations);
        assert_eq!(s.affinity, f.affinity);
        assert_eq!(s.resources, f.resources);
        assert_eq!(s.overhead, f.overhead);
        assert_eq!(
            crate::cluster::pod_requests(&s, "spec"),
            crate::cluster::pod_requests(&f, "spec")
        );
        let init = s.init_containers.unwrap();
        assert_eq!(init[0].restart_policy.as_deref(), Some("Always"));
    }

    #[test]
    fn a_job_keeps_its_counts_and_template() {
        let text = serde_json::json!({
            "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"parallelism": 4, "completions": 8, "backoffLimit": 6,
                "template": {"metadata": {"annotations": {"a": "b"}},
                    "spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}}
        })
        .to_string();
        let job = read_job(&text).unwrap();
        let spec = job.spec.unwrap();
        assert_eq!((spec.parallelism, spec.completions), (Some(4), Some(8)));
        let template = spec.template;
        assert_eq!(template.metadata.unwrap().annotations.unwrap()["a"], "b");
        assert_eq!(template.spec.unwrap().containers[0].name, "c");
    }

    #[test]
    fn wrong_shapes_are_refused_naming_the_api_type() {
        let e = read_pod(r#"{"spec": 5}"#).unwrap_err().to_string();
        assert!(e.contains("PodSpec"), "{e}");
        let e = read_job(r#"{"spec": {"parallelism": "x"}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("i32"), "{e}");
        assert!(read_pod(r#"{"metadata": {"labels": {"a": 1}}}"#).is_err());
    }
}
