//! [`Incarnation`]: which creation of a Job a pod belongs to. A Job deleted and created again
//! under its name is a new workload (Kueue makes a new `Workload` for it): its pods replace
//! none of the old Job's pods, and the old Job's pods still being deleted are no part of it.
//! A pod names its Job's uid (its controller owner reference, and the Job controller's
//! label), which tells them apart.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::controller_job_ref;
use crate::keys;

/// A Job's uid, hashed to four bytes (they fit beside a pod record's other small fields;
/// only creations of one Job name are ever compared); [`Incarnation::UNKNOWN`] when it is not
/// known (a pod no Job made, a Job read from a file), which belongs to any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Incarnation(u32);

impl Incarnation {
    /// Not known: belongs with every incarnation.
    pub const UNKNOWN: Self = Self(0);

    /// The incarnation of the Job whose uid is `uid`.
    pub fn of_uid(uid: Option<&str>) -> Self {
        let Some(uid) = uid.filter(|u| !u.is_empty()) else {
            return Self::UNKNOWN;
        };
        let mut h = DefaultHasher::new();
        uid.hash(&mut h);
        Self((h.finish() as u32).max(1))
    }

    /// The incarnation of the Job that made a pod: the uid of its controller Job (owner
    /// reference), else of its `batch.kubernetes.io/controller-uid` label (or the older
    /// `controller-uid`); unknown for a pod no Job made.
    pub fn of_pod(meta: &ObjectMeta) -> Self {
        let uid = match controller_job_ref(meta) {
            Some(owner) => Some(owner.uid.as_str()),
            None => meta.labels.as_ref().and_then(|l| {
                (l.get(keys::JOB_CONTROLLER_UID_LABEL))
                    .or_else(|| l.get(keys::LEGACY_CONTROLLER_UID_LABEL))
                    .map(String::as_str)
            }),
        };
        Self::of_uid(uid)
    }

    /// Whether a pod of this incarnation is part of its group while the group's Job is at
    /// `current`: unless both are known and differ.
    pub fn belongs_to(self, current: Self) -> bool {
        self == Self::UNKNOWN || current == Self::UNKNOWN || self == current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &str = "2b7c1f0e-0000-4000-8000-000000000001";
    const SECOND: &str = "2b7c1f0e-0000-4000-8000-000000000002";

    fn labelled(key: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            labels: Some([(key.to_string(), uid.to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_belongs_to_its_own_jobs_creation_and_to_an_unknown_one() {
        let (first, second) = (
            Incarnation::of_uid(Some(FIRST)),
            Incarnation::of_uid(Some(SECOND)),
        );
        assert_ne!(first, second);
        assert_ne!(first, Incarnation::UNKNOWN);
        let pod = Incarnation::of_pod(&labelled("batch.kubernetes.io/controller-uid", FIRST));
        assert_eq!(pod, first);
        let legacy = Incarnation::of_pod(&labelled("controller-uid", SECOND));
        assert_eq!(legacy, second);
        assert!(pod.belongs_to(first));
        assert!(!pod.belongs_to(second));
        assert!(pod.belongs_to(Incarnation::UNKNOWN));
        assert!(Incarnation::UNKNOWN.belongs_to(second));
        assert_eq!(
            Incarnation::of_pod(&ObjectMeta::default()),
            Incarnation::UNKNOWN
        );
        assert_eq!(Incarnation::of_uid(Some("")), Incarnation::UNKNOWN);
    }

    /// The controller owner reference names the Job first (a pod made before the label).
    #[test]
    fn the_controller_job_reference_names_the_creation() {
        let mut meta = labelled("batch.kubernetes.io/controller-uid", SECOND);
        meta.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name: "train".into(),
                uid: FIRST.into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        assert_eq!(Incarnation::of_pod(&meta), Incarnation::of_uid(Some(FIRST)));
    }
}
