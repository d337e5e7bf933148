//! The facts about one pod that plans need, read from the pod object itself (as
//! kube-scheduler sends it).

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodSpec};

use crate::cluster::group::{GroupKey, PodIndex, PodSetHint};
use crate::cluster::incarnation::Incarnation;
use crate::cluster::pod_requests::scoring_requests;
use crate::cluster::{
    controller_job_ref, managed_by_kueue, name_or_generate_name, namespace_or_default,
    pod_marks_tas, pod_requests,
};
use crate::keys;
use crate::topology::ResourceList;

/// What plans need to know about one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFacts {
    /// `metadata.uid`; `namespace/name` when the pod has none (only in hand-written input).
    pub uid: String,
    /// The namespace (`default` when absent).
    pub namespace: String,
    /// `metadata.name` (or `generateName` when the name is not set yet).
    pub name: String,
    /// The group it belongs to.
    pub group: GroupKey,
    /// Its PodSet in the group, as far as the pod says.
    pub pod_set: PodSetHint,
    /// `batch.kubernetes.io/job-completion-index` (annotation or label) of an Indexed Job.
    pub completion_index: Option<u32>,
    /// `jobset.sigs.k8s.io/job-index` of a JobSet's pod: its Job among the replicas.
    pub job_index: Option<u32>,
    /// Its effective requests, without the `pods` slot.
    pub requests: ResourceList,
    /// Its CPU and memory as kube-scheduler's scoring counts them (non-zero defaults).
    pub scoring: ResourceList,
    /// It names a queue or carries a `kueue.x-k8s.io/podset-*` annotation: a TAS candidate.
    pub tas_marked: bool,
    /// Kueue itself manages it ([`managed_by_kueue`]): left to Kueue.
    pub kueue_managed: bool,
    /// What Events about its group are recorded on: its controller Job, else the pod itself.
    pub owner: ObjectReference,
    /// Which creation of its Job made it.
    pub incarnation: Incarnation,
}

impl PodFacts {
    /// Reads a pod. The error names the field, for the extender's `Error`.
    pub fn of(pod: &Pod) -> Result<Self, String> {
        let meta = &pod.metadata;
        let namespace = namespace_or_default(meta);
        let name = name_or_generate_name(meta);
        if name.is_empty() {
            return Err("Pod: metadata.name: Required value".to_string());
        }
        // Named only in an error: no allocation on the usual path.
        let label = || format!("Pod {namespace}/{name}");
        let no_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);
        let requests = pod_requests(spec, "spec").map_err(|e| format!("{}: {e}", label()))?;
        let scoring =
            scoring_requests(spec, "spec", &requests).map_err(|e| format!("{}: {e}", label()))?;
        let uid = meta
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| format!("{namespace}/{name}"));
        let labels = meta.labels.as_ref();
        let annotations = meta.annotations.as_ref();
        let group = GroupKey::of_pod(meta, Some(spec));
        let index_text = annotations
            .and_then(|a| a.get(keys::JOB_COMPLETION_INDEX))
            .or_else(|| labels.and_then(|l| l.get(keys::JOB_COMPLETION_INDEX)));
        let completion_index = match index_text {
            None => None,
            Some(v) => Some(v.parse::<u32>().map_err(|_| {
                format!(
                    "{}: metadata.annotations[{:?}]: not a completion index: {v:?}",
                    label(),
                    keys::JOB_COMPLETION_INDEX
                )
            })?),
        };
        let job_index = match labels.and_then(|l| l.get(keys::JOBSET_JOB_INDEX_LABEL)) {
            None => None,
            Some(v) => Some(v.parse::<u32>().map_err(|_| {
                format!(
                    "{}: metadata.labels[{:?}]: not a job index: {v:?}",
                    label(),
                    keys::JOBSET_JOB_INDEX_LABEL
                )
            })?),
        };
        let tas_marked = pod_marks_tas(meta);
        let kueue_managed = managed_by_kueue(meta, pod.spec.as_ref());
        let owner = match controller_job_ref(meta) {
            Some(r) => ObjectReference {
                api_version: Some(r.api_version.clone()),
                kind: Some(r.kind.clone()),
                name: Some(r.name.clone()),
                namespace: Some(namespace.clone()),
                uid: Some(r.uid.clone()),
                ..Default::default()
            },
            None => ObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("Pod".to_string()),
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                uid: meta.uid.clone().filter(|u| !u.is_empty()),
                ..Default::default()
            },
        };
        Ok(Self {
            uid,
            namespace,
            name,
            group,
            pod_set: PodSetHint::of_pod(meta, Some(spec)),
            completion_index,
            job_index,
            requests,
            scoring,
            tas_marked,
            kueue_managed,
            owner,
            incarnation: Incarnation::of_pod(meta),
        })
    }
}

impl PodFacts {
    /// Which pod of its PodSet it is.
    pub fn index(&self) -> PodIndex {
        PodIndex {
            job: self.job_index,
            completion: self.completion_index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_jobs_pod_belongs_to_the_job_with_its_index() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "train-3-x", "namespace": "ml", "uid": "u3",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                    "uid": "j", "controller": true}],
                "annotations": {"batch.kubernetes.io/job-completion-index": "3",
                    "kueue.x-k8s.io/podset-required-topology": "rack"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
        }));
        let f = PodFacts::of(&p).unwrap();
        assert_eq!(f.group.to_string(), "Job ml/train");
        assert_eq!(f.completion_index, Some(3));
        assert_eq!(f.requests["cpu"], 2000);
        assert!(f.tas_marked);
        assert_eq!(f.uid, "u3");
    }

    #[test]
    fn plain_groups_and_lone_pods() {
        let g = pod(serde_json::json!({"metadata": {"name": "a", "labels":
            {"kueue.x-k8s.io/pod-group-name": "grp"}}, "spec": {"containers": []}}));
        let f = PodFacts::of(&g).unwrap();
        assert_eq!(f.group.to_string(), "PodGroup default/grp");
        assert!(!f.tas_marked);
        assert_eq!(f.uid, "default/a");
        let lone = pod(serde_json::json!({"metadata": {"name": "b", "namespace": "x"}}));
        assert_eq!(PodFacts::of(&lone).unwrap().group.to_string(), "Pod x/b");
    }

    #[test]
    fn bad_pods_are_named() {
        let e = PodFacts::of(&pod(serde_json::json!({"metadata": {}}))).unwrap_err();
        assert!(e.contains("metadata.name"), "{e}");
        let e = PodFacts::of(&pod(serde_json::json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "8x"}}}]}})))
        .unwrap_err();
        assert!(e.contains("Pod default/p") && e.contains("cpu"), "{e}");
        let e = PodFacts::of(&pod(
            serde_json::json!({"metadata": {"name": "p", "annotations":
            {"batch.kubernetes.io/job-completion-index": "x"}}}),
        ))
        .unwrap_err();
        assert!(e.contains("completion index"), "{e}");
    }
}
