//! The pods a workload's controller would create, as the webhook leaves them: the pod
//! template with the webhook's [`Injection`] applied (the flavor's nodeLabels in
//! `nodeSelector`, its tolerations, a Job's stamps), owned by their Job (with completion
//! indices; a JobSet's Jobs with the JobSet labels), labelled with their LeaderWorkerSet group
//! and worker index, or labelled with their pod group.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, Pod, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::admission::AdmittedPodSet;
use crate::admission::mutation::{set_stamps, stamps};
use crate::admission::patch::Injection;
use crate::cluster::group::{GroupKey, LWS_WORKER_POD_SET};
use crate::cluster::kueue::ResourceFlavor;
use crate::cluster::{Workload, WorkloadKind};
use crate::keys;
use crate::topology::resources::{CPU, PODS};

/// The pods of pod set `index` of `w`, placed on flavor `rf`.
pub fn pods_of(w: &Workload, index: usize, ps: &AdmittedPodSet, rf: &ResourceFlavor) -> Vec<Pod> {
    let annotations = w
        .pod_sets
        .get(index)
        .map(|p| p.annotations.clone())
        .unwrap_or_default();
    let spec = &ps.spec;
    // What the webhook adds to the Job's template (or to each pod).
    let stamps = match w.kind {
        WorkloadKind::Job => stamps(w),
        WorkloadKind::JobSet | WorkloadKind::LeaderWorkerSet => set_stamps(w, index),
        WorkloadKind::Pod | WorkloadKind::PodGroup | WorkloadKind::SchedulingGroup => {
            BTreeMap::new()
        }
    };
    let per_replica = w.pod_sets.get(index).map_or(1, |p| {
        usize::try_from(p.pods_per_replica).unwrap_or(1).max(1)
    });
    let group = GroupKey {
        kind: w.kind,
        namespace: w.namespace.clone(),
        name: w.name.clone(),
    };
    let injection = Injection::of_flavor(rf, stamps);
    let mut annotations = annotations;
    let requests: BTreeMap<String, Quantity> = spec
        .requests
        .iter()
        .filter(|(k, _)| k.as_str() != PODS)
        .map(|(k, &v)| {
            let q = if k == CPU {
                format!("{v}m")
            } else {
                v.to_string()
            };
            (k.clone(), Quantity(q))
        })
        .collect();
    let affinity =
        (spec.required_affinity.is_some() || !spec.preferred_affinity.is_empty()).then(|| {
            Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: spec
                        .required_affinity
                        .clone(),
                    preferred_during_scheduling_ignored_during_execution: (!spec
                        .preferred_affinity
                        .is_empty())
                    .then(|| spec.preferred_affinity.clone()),
                }),
                ..Default::default()
            }
        });
    let mut pod_spec = PodSpec {
        containers: vec![Container {
            name: "main".to_string(),
            resources: Some(ResourceRequirements {
                requests: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        }],
        node_selector: (!spec.node_selector.is_empty()).then(|| spec.node_selector.clone()),
        tolerations: (!spec.tolerations.is_empty()).then(|| spec.tolerations.clone()),
        affinity,
        ..Default::default()
    };
    injection.apply(&mut pod_spec, &mut annotations);
    let count = usize::try_from(spec.count).unwrap_or(0);
    (0..count)
        .map(|i| {
            let mut annotations = annotations.clone();
            let mut labels = BTreeMap::new();
            let mut owner_references = None;
            let name = match w.kind {
                WorkloadKind::Job => {
                    annotations.insert(keys::JOB_COMPLETION_INDEX.to_string(), i.to_string());
                    owner_references = Some(vec![OwnerReference {
                        api_version: "batch/v1".to_string(),
                        kind: "Job".to_string(),
                        name: w.name.clone(),
                        uid: format!("job-{}-{}", w.namespace, w.name),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]);
                    format!("{}-{i}", w.name)
                }
                WorkloadKind::PodGroup => {
                    labels.insert(keys::POD_GROUP_NAME_LABEL.to_string(), w.name.clone());
                    let total: i32 = w.pod_sets.iter().map(|p| p.spec.count).sum();
                    annotations.insert(keys::POD_GROUP_TOTAL_COUNT.to_string(), total.to_string());
                    if w.pod_sets.len() > 1 {
                        // The webhook stamps each pod's role as Kueue's does, before the
                        // flavor's injection changes the pod's shape.
                        annotations.insert(keys::ROLE_HASH.to_string(), spec.name.clone());
                        format!("{}-{}-{i}", w.name, spec.name)
                    } else {
                        format!("{}-{i}", w.name)
                    }
                }
                WorkloadKind::JobSet => {
                    let (job_index, completion) = (i / per_replica, i % per_replica);
                    let job = format!("{}-{}-{job_index}", w.name, spec.name);
                    annotations.insert(
                        keys::JOB_COMPLETION_INDEX.to_string(),
                        completion.to_string(),
                    );
                    labels.insert(keys::JOBSET_NAME_LABEL.to_string(), w.name.clone());
                    labels.insert(
                        keys::JOBSET_REPLICATED_JOB_LABEL.to_string(),
                        spec.name.clone(),
                    );
                    labels.insert(
                        keys::JOBSET_JOB_INDEX_LABEL.to_string(),
                        job_index.to_string(),
                    );
                    owner_references = Some(vec![OwnerReference {
                        api_version: "batch/v1".to_string(),
                        kind: "Job".to_string(),
                        uid: format!("job-{}-{job}", w.namespace),
                        name: job.clone(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]);
                    format!("{job}-{completion}")
                }
                WorkloadKind::LeaderWorkerSet => {
                    let (lws, group_index) = group.lws_parts().unwrap_or((&w.name, 0));
                    let worker = if spec.name == LWS_WORKER_POD_SET {
                        i + 1
                    } else {
                        i
                    };
                    labels.insert(keys::LWS_NAME_LABEL.to_string(), lws.to_string());
                    labels.insert(
                        keys::LWS_GROUP_INDEX_LABEL.to_string(),
                        group_index.to_string(),
                    );
                    labels.insert(keys::LWS_WORKER_INDEX_LABEL.to_string(), worker.to_string());
                    if worker == 0 {
                        w.name.clone()
                    } else {
                        format!("{}-{worker}", w.name)
                    }
                }
                WorkloadKind::Pod | WorkloadKind::SchedulingGroup => w.name.clone(),
            };
            if matches!(w.kind, WorkloadKind::Pod | WorkloadKind::PodGroup)
                && let Some(q) = &w.queue_name
            {
                labels.insert(keys::QUEUE_NAME_LABEL.to_string(), q.clone());
            }
            Pod {
                metadata: ObjectMeta {
                    uid: Some(format!("{}/{}/{i}", w.namespace, name)),
                    namespace: Some(w.namespace.clone()),
                    name: Some(name),
                    labels: (!labels.is_empty()).then_some(labels),
                    annotations: (!annotations.is_empty()).then_some(annotations),
                    owner_references,
                    ..Default::default()
                },
                spec: Some(pod_spec.clone()),
                status: None,
            }
        })
        .collect()
}

/// A simulated pod's completion index (a Job's or a JobSet's pod).
pub fn completion_index(pod: &Pod) -> Option<usize> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(keys::JOB_COMPLETION_INDEX)?
        .parse()
        .ok()
}
