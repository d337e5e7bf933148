//! JobSets (`jobset.x-k8s.io/v1alpha2`) and LeaderWorkerSets (`leaderworkerset.x-k8s.io/v1`):
//! serde types holding the fields kube-tas reads, and the workloads Kueue forms from them.
//!
//! * A JobSet is one workload with one PodSet per replicated Job: named after it, `replicas ×`
//!   Kueue's pod count of its Job template pods.
//! * A LeaderWorkerSet is one workload per replica group (`<name>-<index>`): with a leader
//!   template, PodSets `leader` (1 pod) and `worker` (size − 1); without one, `main` (size).
//!
//! Unknown fields are ignored, so any object `kubectl get -o yaml` prints deserializes.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::group::{GroupKey, LWS_LEADER_POD_SET, LWS_WORKER_POD_SET};
use super::workloads::{job_pod_count, non_negative, pod_set_spec, queue_name};
use super::{
    FieldError, PendingPodSet, Source, Workload, WorkloadKind, name_or_generate_name,
    namespace_or_default,
};

/// `apiVersion` of the JobSets kube-tas reads.
pub const JOBSET_API_VERSION: &str = "jobset.x-k8s.io/v1alpha2";
/// `apiVersion` of the LeaderWorkerSets kube-tas reads.
pub const LWS_API_VERSION: &str = "leaderworkerset.x-k8s.io/v1";

/// A JobSet.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSet {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The replicated Jobs.
    #[serde(default)]
    pub spec: JobSetSpec,
    /// Its conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SetStatus>,
}

/// `JobSet.spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    /// One PodSet each.
    #[serde(default)]
    pub replicated_jobs: Vec<ReplicatedJob>,
}

/// `JobSet.spec.replicatedJobs[]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJob {
    /// The PodSet's name.
    #[serde(default)]
    pub name: String,
    /// How many Jobs of the template (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The Job template.
    #[serde(default)]
    pub template: JobTemplateSpec,
}

/// A LeaderWorkerSet.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSet {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Replicas and the group templates.
    #[serde(default)]
    pub spec: LeaderWorkerSetSpec,
}

/// `LeaderWorkerSet.spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetSpec {
    /// Replica groups (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The group's shape.
    #[serde(default)]
    pub leader_worker_template: LeaderWorkerTemplate,
}

/// `LeaderWorkerSet.spec.leaderWorkerTemplate`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplate {
    /// Pods per group, the leader included (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    /// The leader's template; the worker template serves the leader too when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_template: Option<PodTemplateSpec>,
    /// The workers' template.
    #[serde(default)]
    pub worker_template: PodTemplateSpec,
}

/// The conditions of a JobSet's status.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetStatus {
    /// `type` / `status` pairs.
    #[serde(default)]
    pub conditions: Vec<SetCondition>,
}

/// One condition.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct SetCondition {
    /// `Completed`, `Failed`, ...
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    #[serde(default)]
    pub status: String,
}

impl JobSet {
    /// A JobSet with a `Completed` or `Failed` condition: it places nothing more.
    pub fn finished(&self) -> bool {
        self.status
            .iter()
            .flat_map(|s| &s.conditions)
            .any(|c| (c.type_ == "Completed" || c.type_ == "Failed") && c.status == "True")
    }
}

/// The workload Kueue forms from a JobSet: one PodSet per replicated Job.
pub fn workload_of_jobset(js: &JobSet, at: &Source) -> Result<Workload, FieldError> {
    let mut pod_sets = Vec::with_capacity(js.spec.replicated_jobs.len());
    if js.spec.replicated_jobs.is_empty() {
        return Err(FieldError::new(
            "spec.replicatedJobs",
            "missing (a JobSet needs at least one replicated Job)",
        ));
    }
    for (i, rj) in js.spec.replicated_jobs.iter().enumerate() {
        let path = format!("spec.replicatedJobs[{i}]");
        if rj.name.is_empty() {
            return Err(FieldError::new(
                format!("{path}.name"),
                "missing (each replicated Job names a PodSet)",
            ));
        }
        let replicas = non_negative(rj.replicas, &format!("{path}.replicas"))?.unwrap_or(1);
        let template = &rj.template;
        let Some(job_spec) = &template.spec else {
            return Err(FieldError::new(
                format!("{path}.template.spec"),
                "missing (a replicated Job needs a Job template)",
            ));
        };
        let per_job = job_pod_count(job_spec, &format!("{path}.template.spec"))?;
        let Some(pod_spec) = &job_spec.template.spec else {
            return Err(FieldError::new(
                format!("{path}.template.spec.template.spec"),
                "missing (a replicated Job needs a pod template)",
            ));
        };
        let count = replicas.checked_mul(per_job).ok_or_else(|| {
            FieldError::new(
                format!("{path}.replicas"),
                format!("{replicas} replicas of {per_job} pods overflow a pod count"),
            )
        })?;
        let meta = job_spec.template.metadata.clone().unwrap_or_default();
        pod_sets.push(PendingPodSet {
            spec: pod_set_spec(
                &rj.name,
                pod_spec,
                count,
                &format!("{path}.template.spec.template.spec"),
            )?,
            annotations: meta.annotations.unwrap_or_default(),
            annotations_path: format!("{path}.template.spec.template.metadata.annotations"),
            pods_per_replica: per_job,
        });
    }
    Ok(Workload {
        kind: WorkloadKind::JobSet,
        namespace: namespace_or_default(&js.metadata),
        name: name_or_generate_name(&js.metadata),
        queue_name: queue_name(&js.metadata),
        pod_sets,
        source: at.clone(),
    })
}

/// The workload of replica group `index` of a LeaderWorkerSet, as Kueue forms it.
pub fn workload_of_lws_group(
    lws: &LeaderWorkerSet,
    index: u32,
    at: &Source,
) -> Result<Workload, FieldError> {
    let lwt = &lws.spec.leader_worker_template;
    let size = non_negative(lwt.size, "spec.leaderWorkerTemplate.size")?.unwrap_or(1);
    if size < 1 {
        return Err(FieldError::new(
            "spec.leaderWorkerTemplate.size",
            "must be at least 1 (the leader)",
        ));
    }
    let template = |t: &PodTemplateSpec, path: &str, name: &str, count: i32| {
        let Some(spec) = &t.spec else {
            return Err(FieldError::new(
                format!("{path}.spec"),
                "missing (a LeaderWorkerSet needs pod templates)",
            ));
        };
        Ok(PendingPodSet {
            spec: pod_set_spec(name, spec, count, &format!("{path}.spec"))?,
            annotations: t
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone())
                .unwrap_or_default(),
            annotations_path: format!("{path}.metadata.annotations"),
            pods_per_replica: count,
        })
    };
    const LEADER: &str = "spec.leaderWorkerTemplate.leaderTemplate";
    const WORKER: &str = "spec.leaderWorkerTemplate.workerTemplate";
    let pod_sets = match &lwt.leader_template {
        Some(leader) => vec![
            template(leader, LEADER, LWS_LEADER_POD_SET, 1)?,
            template(&lwt.worker_template, WORKER, LWS_WORKER_POD_SET, size - 1)?,
        ],
        None => vec![template(&lwt.worker_template, WORKER, "main", size)?],
    };
    let namespace = namespace_or_default(&lws.metadata);
    let name = name_or_generate_name(&lws.metadata);
    Ok(Workload {
        kind: WorkloadKind::LeaderWorkerSet,
        name: GroupKey::lws_group(namespace.clone(), &name, index).name,
        namespace,
        queue_name: queue_name(&lws.metadata),
        pod_sets,
        source: at.clone(),
    })
}

/// A JobSet's or LeaderWorkerSet's workload as the cluster view keeps it, under the set's own
/// [`GroupKey`] (`JobSet ns/name`, `LeaderWorkerSet ns/name`).
#[derive(Debug, Clone, PartialEq)]
pub struct SetEntry {
    /// The JobSet's workload; a LeaderWorkerSet's group 0.
    pub workload: Workload,
    /// Replica groups: a LeaderWorkerSet's replicas, 1 for a JobSet.
    pub groups: u32,
}

impl SetEntry {
    /// The entry of a JobSet.
    pub fn of_jobset(js: &JobSet, at: &Source) -> Result<(GroupKey, Self), FieldError> {
        let workload = workload_of_jobset(js, at)?;
        let key = GroupKey {
            kind: WorkloadKind::JobSet,
            namespace: workload.namespace.clone(),
            name: workload.name.clone(),
        };
        Ok((
            key,
            SetEntry {
                workload,
                groups: 1,
            },
        ))
    }

    /// The entry of a LeaderWorkerSet.
    pub fn of_lws(lws: &LeaderWorkerSet, at: &Source) -> Result<(GroupKey, Self), FieldError> {
        let groups = lws_replicas(lws)?;
        let workload = workload_of_lws_group(lws, 0, at)?;
        let key = GroupKey {
            kind: WorkloadKind::LeaderWorkerSet,
            namespace: workload.namespace.clone(),
            name: name_or_generate_name(&lws.metadata),
        };
        Ok((key, SetEntry { workload, groups }))
    }

    /// The workload of replica group `index` (the JobSet's own for index 0).
    pub fn group(&self, set: &GroupKey, index: u32) -> Option<Workload> {
        if index >= self.groups {
            return None;
        }
        let mut w = self.workload.clone();
        if set.kind == WorkloadKind::LeaderWorkerSet {
            w.name = GroupKey::lws_group(set.namespace.clone(), &set.name, index).name;
        }
        Some(w)
    }

    /// The set's key of a group key: itself for a JobSet, the LeaderWorkerSet's for one of
    /// its replica groups (with the index).
    pub fn set_of(group: &GroupKey) -> Option<(GroupKey, u32)> {
        match group.kind {
            WorkloadKind::JobSet => Some((group.clone(), 0)),
            WorkloadKind::LeaderWorkerSet => {
                let (lws, index) = group.lws_parts()?;
                Some((
                    GroupKey {
                        kind: WorkloadKind::LeaderWorkerSet,
                        namespace: group.namespace.clone(),
                        name: lws.to_string(),
                    },
                    index,
                ))
            }
            _ => None,
        }
    }
}

/// How many replica groups a LeaderWorkerSet has (1 when absent; a negative count is an error).
pub fn lws_replicas(lws: &LeaderWorkerSet) -> Result<u32, FieldError> {
    let n = non_negative(lws.spec.replicas, "spec.replicas")?.unwrap_or(1);
    Ok(u32::try_from(n).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobset(json: serde_json::Value) -> JobSet {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_jobset_has_one_pod_set_per_replicated_job() {
        let js = jobset(serde_json::json!({
            "metadata": {"name": "train", "namespace": "ml",
                "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"replicatedJobs": [
                {"name": "driver", "template": {"spec": {"template": {"spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}}},
                {"name": "workers", "replicas": 3, "template": {"spec": {
                    "parallelism": 4, "completions": 4,
                    "template": {"metadata": {"annotations":
                        {"kueue.x-k8s.io/podset-required-topology": "rack"}},
                        "spec": {"containers": [{"name": "c"}]}}}}}
            ]}
        }));
        let w = workload_of_jobset(&js, &Source::default()).unwrap();
        assert_eq!(w.kind, WorkloadKind::JobSet);
        assert_eq!(w.queue_name.as_deref(), Some("q"));
        let sets: Vec<(&str, i32, i32)> = w
            .pod_sets
            .iter()
            .map(|p| (p.spec.name.as_str(), p.spec.count, p.pods_per_replica))
            .collect();
        assert_eq!(sets, vec![("driver", 1, 1), ("workers", 12, 4)]);
        assert_eq!(
            w.pod_sets[1].annotations_path,
            "spec.replicatedJobs[1].template.spec.template.metadata.annotations"
        );
        assert_eq!(w.pod_sets[0].spec.requests["cpu"], 1000);
    }

    #[test]
    fn bad_jobsets_name_the_field() {
        let e = workload_of_jobset(&jobset(serde_json::json!({"spec": {}})), &Source::default())
            .unwrap_err();
        assert_eq!(e.field, "spec.replicatedJobs");
        let e = workload_of_jobset(
            &jobset(serde_json::json!({"spec": {"replicatedJobs": [
                {"name": "a", "replicas": -1, "template": {"spec": {"template": {"spec": {}}}}}]}})),
            &Source::default(),
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.replicatedJobs[0].replicas");
    }

    #[test]
    fn a_lws_group_is_a_leader_and_workers() {
        let lws: LeaderWorkerSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "serve", "namespace": "ml"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4,
                "leaderTemplate": {"spec": {"containers": [{"name": "l"}]}},
                "workerTemplate": {"spec": {"containers": [{"name": "w"}]}}}}
        }))
        .unwrap();
        assert_eq!(lws_replicas(&lws).unwrap(), 2);
        let w = workload_of_lws_group(&lws, 1, &Source::default()).unwrap();
        assert_eq!(w.name, "serve-1");
        let sets: Vec<(&str, i32)> = w
            .pod_sets
            .iter()
            .map(|p| (p.spec.name.as_str(), p.spec.count))
            .collect();
        assert_eq!(sets, vec![("leader", 1), ("worker", 3)]);
        let mut no_leader = lws.clone();
        no_leader.spec.leader_worker_template.leader_template = None;
        let w = workload_of_lws_group(&no_leader, 0, &Source::default()).unwrap();
        assert_eq!(w.pod_sets.len(), 1);
        assert_eq!(
            (w.pod_sets[0].spec.name.as_str(), w.pod_sets[0].spec.count),
            ("main", 4)
        );
    }
}
