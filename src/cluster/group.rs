//! Which pod group a pod belongs to, read from the pod's own metadata (its controller Job,
//! its `kueue.x-k8s.io/pod-group-name` label), never from memory: the same answer for a pod
//! kube-scheduler sends, a pod the watch shows bound, and a pod after a restart.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{WorkloadKind, controller_job_of, name_or_generate_name, namespace_or_default};
use crate::keys;

/// A group that is placed as a whole: a Job's pods, a plain pod group, or a single pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    /// Job, PodGroup or Pod.
    pub kind: WorkloadKind,
    /// The namespace.
    pub namespace: String,
    /// The Job's, pod group's or pod's name.
    pub name: String,
}

impl fmt::Display for GroupKey {
    /// `Job default/train`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

impl GroupKey {
    /// The group of a pod with this metadata: its controller Job's, else its plain pod
    /// group's (a non-empty `pod-group-name` label), else the pod's own.
    pub fn of_pod(meta: &ObjectMeta) -> Self {
        let namespace = namespace_or_default(meta);
        let group_label = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::POD_GROUP_NAME_LABEL))
            .filter(|v| !v.is_empty());
        match (controller_job_of(meta), group_label) {
            (Some(job), _) => GroupKey {
                kind: WorkloadKind::Job,
                namespace,
                name: job,
            },
            (None, Some(g)) => GroupKey {
                kind: WorkloadKind::PodGroup,
                namespace,
                name: g.clone(),
            },
            (None, None) => GroupKey {
                kind: WorkloadKind::Pod,
                namespace,
                name: name_or_generate_name(meta),
            },
        }
    }

    /// Whether pods of this group are placed together (a Job or a plain pod group).
    pub fn is_gang(&self) -> bool {
        self.kind != WorkloadKind::Pod
    }
}
