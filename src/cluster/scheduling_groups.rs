//! Workload-API pod groups as kube-tas reads them: `PodGroup`s (`scheduling.k8s.io/v1beta1`,
//! `v1alpha3` and 1.36's `v1alpha2`) and `CompositePodGroup`s (`v1alpha3`), or kube-tas's own copies of both under
//! `kube-tas.io/v1alpha1` (identical spec) for clusters that do not serve the Workload API; and
//! the pending pods that name them.
//!
//! Only what placement reads is kept: the policy (`gang` with its minimum, or `basic`), the
//! topology key, the parent and the creation time. Every object is checked as the API server's
//! validation would (exactly one policy, a minimum of at least 1, at most one topology
//! constraint with a non-empty key), and a bad one is refused naming its field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use super::group::GroupKey;
use super::pod_requests::{pod_requests, scoring_requests};
use super::{FieldError, WorkloadKind, is_terminal, name_or_generate_name, namespace_or_default};
use crate::topology::node::RequiredAffinity;
use crate::topology::podgroup::{self, PendingPod};

/// The Workload API's group.
pub const SCHEDULING_API_GROUP: &str = "scheduling.k8s.io";
/// kube-tas's own group for the same kinds (CRDs in `manifests/crds-workload-api`).
pub const KUBE_TAS_API_GROUP: &str = "kube-tas.io";
/// kube-tas's copies' apiVersion.
pub const KUBE_TAS_API_VERSION: &str = "kube-tas.io/v1alpha1";
/// apiVersions a `PodGroup` is read at (1.36 serves `v1alpha2`, with the same policy and
/// constraint fields).
pub const POD_GROUP_API_VERSIONS: [&str; 4] = [
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1alpha2",
    KUBE_TAS_API_VERSION,
];
/// apiVersions a `CompositePodGroup` is read at.
pub const COMPOSITE_POD_GROUP_API_VERSIONS: [&str; 2] =
    ["scheduling.k8s.io/v1alpha3", KUBE_TAS_API_VERSION];

/// Where a group object comes from: its API group and version. Each watch records what it
/// sees under its own origin (so one watch's relist never drops what another lists), and a
/// lookup takes the first origin holding the object: the Workload API's own, newest version
/// first, then kube-tas's copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// `scheduling.k8s.io/v1beta1`.
    Scheduling,
    /// `scheduling.k8s.io/v1alpha3`.
    SchedulingV1alpha3,
    /// `scheduling.k8s.io/v1alpha2` (1.36).
    SchedulingV1alpha2,
    /// `kube-tas.io/v1alpha1`.
    KubeTas,
}

impl Origin {
    /// The origin of an apiVersion (`group/version`); unknown versions of
    /// `scheduling.k8s.io` count as its newest.
    pub fn of(api_version: &str) -> Origin {
        match api_version {
            "scheduling.k8s.io/v1alpha3" => Origin::SchedulingV1alpha3,
            "scheduling.k8s.io/v1alpha2" => Origin::SchedulingV1alpha2,
            v if v.starts_with("kube-tas.io/") => Origin::KubeTas,
            _ => Origin::Scheduling,
        }
    }

    /// The apiVersion objects of this origin are read (and named in Events) at.
    pub fn api_version(self) -> &'static str {
        match self {
            Origin::Scheduling => "scheduling.k8s.io/v1beta1",
            Origin::SchedulingV1alpha3 => "scheduling.k8s.io/v1alpha3",
            Origin::SchedulingV1alpha2 => "scheduling.k8s.io/v1alpha2",
            Origin::KubeTas => KUBE_TAS_API_VERSION,
        }
    }
}

/// A group's scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `gang`: `minCount` pods (PodGroup) or `minGroupCount` children (CompositePodGroup).
    Gang(u32),
    /// `basic`.
    Basic,
}

/// One `PodGroup` or `CompositePodGroup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulingGroup {
    /// Which API group it was read from.
    pub origin: Origin,
    /// A `CompositePodGroup` (else a `PodGroup`).
    pub composite: bool,
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.parentCompositePodGroupName`.
    pub parent: Option<String>,
    /// `metadata.creationTimestamp`, seconds since the epoch (0 when absent: file order then).
    pub created: i64,
    /// `spec.schedulingConstraints.topology[0].key`.
    pub key: Option<String>,
    /// `spec.schedulingPolicy`.
    pub policy: Policy,
}

impl SchedulingGroup {
    /// `PodGroup` or `CompositePodGroup`.
    pub fn kind(&self) -> &'static str {
        if self.composite {
            "CompositePodGroup"
        } else {
            "PodGroup"
        }
    }

    /// The group's key in the cluster state: kind, namespace and name.
    pub fn id(&self) -> GroupId {
        GroupId {
            composite: self.composite,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// The group as the placement core reads it, with its pods still to place and the nodes
    /// of its pods already bound (none for a composite).
    pub fn to_core(&self, pending: Vec<PendingPod>, bound: Vec<String>) -> podgroup::Group {
        let kind = if self.composite {
            podgroup::GroupKind::Composite {
                policy: match self.policy {
                    Policy::Gang(n) => podgroup::CompositePolicy::Gang { min_group_count: n },
                    Policy::Basic => podgroup::CompositePolicy::Basic,
                },
            }
        } else {
            podgroup::GroupKind::PodGroup {
                policy: match self.policy {
                    Policy::Gang(n) => podgroup::PodGroupPolicy::Gang { min_count: n },
                    Policy::Basic => podgroup::PodGroupPolicy::Basic,
                },
                pending,
                bound,
            }
        };
        podgroup::Group {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            parent: self.parent.clone(),
            created: self.created,
            key: self.key.clone(),
            kind,
        }
    }
}

/// A group's identity: kind, namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId {
    /// A `CompositePodGroup`.
    pub composite: bool,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecView {
    parent_composite_pod_group_name: Option<String>,
    #[serde(default)]
    scheduling_policy: Option<PolicyView>,
    scheduling_constraints: Option<ConstraintsView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyView {
    basic: Option<Value>,
    gang: Option<GangView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GangView {
    min_count: Option<i64>,
    min_group_count: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct ConstraintsView {
    #[serde(default)]
    topology: Vec<TopologyView>,
}

#[derive(Debug, Default, Deserialize)]
struct TopologyView {
    #[serde(default)]
    key: String,
}

/// Reads a group object's `metadata` and `spec` (`composite` for a CompositePodGroup). The
/// error names the field, as `FieldError` does everywhere.
pub fn scheduling_group(
    api_version: &str,
    composite: bool,
    meta: &ObjectMeta,
    spec: Option<&Value>,
) -> Result<SchedulingGroup, FieldError> {
    let name = meta
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::new("metadata.name", "Required value"))?;
    let null = Value::Null;
    let spec_value = spec.unwrap_or(&null);
    if spec_value.is_null() {
        return Err(FieldError::new("spec", "Required value"));
    }
    let view: SpecView = serde_path_to_error::deserialize(spec_value).map_err(|e| {
        let path = e.path().to_string();
        FieldError::new(
            if path == "." {
                "spec".to_string()
            } else {
                format!("spec.{path}")
            },
            e.into_inner().to_string(),
        )
    })?;
    let policy_view = view
        .scheduling_policy
        .ok_or_else(|| FieldError::new("spec.schedulingPolicy", "Required value"))?;
    let (min_field, min) = if composite {
        (
            "minGroupCount",
            policy_view.gang.as_ref().and_then(|g| g.min_group_count),
        )
    } else {
        (
            "minCount",
            policy_view.gang.as_ref().and_then(|g| g.min_count),
        )
    };
    let policy = match (&policy_view.basic, &policy_view.gang) {
        (Some(_), Some(_)) => {
            return Err(FieldError::new(
                "spec.schedulingPolicy",
                "Invalid value: exactly one of basic or gang may be set, not both",
            ));
        }
        (None, None) => {
            return Err(FieldError::new(
                "spec.schedulingPolicy",
                "Invalid value: exactly one of basic or gang must be set",
            ));
        }
        (Some(_), None) => Policy::Basic,
        (None, Some(_)) => {
            let field = format!("spec.schedulingPolicy.gang.{min_field}");
            let n = min.ok_or_else(|| FieldError::new(field.clone(), "Required value"))?;
            if n < 1 {
                return Err(FieldError::new(
                    field,
                    format!("Invalid value: {n}: must be greater than or equal to 1"),
                ));
            }
            let n = i32::try_from(n)
                .ok()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    FieldError::new(field, format!("Invalid value: {n}: must fit in an int32"))
                })?;
            Policy::Gang(n)
        }
    };
    let topology = view.scheduling_constraints.map(|c| c.topology);
    let key = match topology.as_deref() {
        None | Some([]) => None,
        Some([one]) if one.key.is_empty() => {
            return Err(FieldError::new(
                "spec.schedulingConstraints.topology[0].key",
                "Required value",
            ));
        }
        Some([one]) => Some(one.key.clone()),
        Some(many) => {
            return Err(FieldError::new(
                "spec.schedulingConstraints.topology",
                format!("Too many: {}: must have at most 1 item", many.len()),
            ));
        }
    };
    let parent = view
        .parent_composite_pod_group_name
        .filter(|p| !p.is_empty());
    Ok(SchedulingGroup {
        origin: Origin::of(api_version),
        composite,
        namespace: namespace_or_default(meta),
        name,
        parent,
        created: meta
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
        key,
        policy,
    })
}

/// A pending pod of a Workload-API PodGroup, as the cluster state keeps it until it binds.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingMember {
    /// Its group (kind [`WorkloadKind::SchedulingGroup`], the PodGroup's namespace and name).
    pub group: GroupKey,
    /// What the placement core reads (name, requests, filters).
    pub pod: PendingPod,
    /// `spec.priority` (higher goes first).
    pub priority: i32,
    /// `metadata.creationTimestamp`, seconds (earlier goes first).
    pub created: i64,
}

impl PendingMember {
    /// Scheduling order within a group: priority (highest first), then creation, then name.
    pub fn order(&self) -> (std::cmp::Reverse<i32>, i64, &str) {
        (
            std::cmp::Reverse(self.priority),
            self.created,
            self.pod.name.as_str(),
        )
    }
}

/// The pending member `pod` is: `None` for a pod that names no Workload-API group, is bound
/// or has finished. The error names the field.
pub fn pending_member(pod: &Pod) -> Result<Option<PendingMember>, FieldError> {
    let meta = &pod.metadata;
    let group = GroupKey::of_pod(meta, pod.spec.as_ref());
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if group.kind != WorkloadKind::SchedulingGroup || bound || is_terminal(pod) {
        return Ok(None);
    }
    let no_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&no_spec);
    Ok(Some(PendingMember {
        pod: pending_pod(&name_or_generate_name(meta), spec)?,
        priority: spec.priority.unwrap_or(0),
        created: meta
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
        group,
    }))
}

/// A pod spec as the placement core's filters and score read it.
pub fn pending_pod(name: &str, spec: &PodSpec) -> Result<PendingPod, FieldError> {
    let requests = pod_requests(spec, "spec")?;
    let non_zero = scoring_requests(spec, "spec", &requests)?;
    let affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(RequiredAffinity::parse)
        .transpose()
        .map_err(|e| {
            FieldError::new(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                e.to_string(),
            )
        })?;
    Ok(PendingPod {
        name: name.to_string(),
        requests,
        non_zero,
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        node_selector: spec
            .node_selector
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        affinity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(api_version: &str, composite: bool, doc: Value) -> Result<SchedulingGroup, String> {
        let meta: ObjectMeta = serde_json::from_value(doc["metadata"].clone()).unwrap();
        scheduling_group(api_version, composite, &meta, doc.get("spec"))
            .map_err(|e| format!("{}: {}", e.field, e.message))
    }

    #[test]
    fn a_gang_pod_group_with_a_key_and_a_parent() {
        let g = read(
            "scheduling.k8s.io/v1beta1",
            false,
            json!({"metadata": {"name": "w", "namespace": "ml",
                "creationTimestamp": "2026-01-01T00:00:10Z"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 8}},
                    "schedulingConstraints": {"topology": [{"key": "rack"}]},
                    "parentCompositePodGroupName": "root"}}),
        )
        .unwrap();
        assert_eq!(g.policy, Policy::Gang(8));
        assert_eq!(g.key.as_deref(), Some("rack"));
        assert_eq!(g.parent.as_deref(), Some("root"));
        assert_eq!(g.origin, Origin::Scheduling);
        assert_eq!((g.namespace.as_str(), g.created % 60), ("ml", 10));
        let c = read(
            KUBE_TAS_API_VERSION,
            true,
            json!({"metadata": {"name": "root"},
                "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}}}),
        )
        .unwrap();
        assert_eq!(
            (c.policy, c.origin, c.key.as_deref()),
            (Policy::Gang(2), Origin::KubeTas, None)
        );
        assert_eq!(c.kind(), "CompositePodGroup");
    }

    #[test]
    fn bad_groups_name_the_field() {
        let cases = [
            (false, json!({}), "spec.schedulingPolicy: Required value"),
            (
                false,
                json!({"schedulingPolicy": {}}),
                "exactly one of basic or gang must be set",
            ),
            (
                false,
                json!({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}),
                "not both",
            ),
            (
                false,
                json!({"schedulingPolicy": {"gang": {"minCount": 0}}}),
                "spec.schedulingPolicy.gang.minCount: Invalid value: 0",
            ),
            (
                true,
                json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
                "spec.schedulingPolicy.gang.minGroupCount: Required value",
            ),
            (
                false,
                json!({"schedulingPolicy": {"basic": {}},
                    "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}),
                "must have at most 1 item",
            ),
            (
                false,
                json!({"schedulingPolicy": {"basic": {}},
                    "schedulingConstraints": {"topology": [{"key": ""}]}}),
                "topology[0].key: Required value",
            ),
            (
                false,
                json!({"schedulingPolicy": {"gang": {"minCount": "x"}}}),
                "spec.schedulingPolicy.gang.minCount",
            ),
        ];
        for (composite, spec, want) in cases {
            let doc = json!({"metadata": {"name": "g"}, "spec": spec});
            let err = read("scheduling.k8s.io/v1alpha3", composite, doc).unwrap_err();
            assert!(err.contains(want), "{spec}: {err}");
        }
        let err = read(
            "scheduling.k8s.io/v1beta1",
            false,
            json!({"metadata": {"name": "g"}}),
        );
        assert_eq!(err.unwrap_err(), "spec: Required value");
    }

    #[test]
    fn pending_members_come_from_either_the_spec_or_the_label() {
        let pod = |v: Value| -> Pod { serde_json::from_value(v).unwrap() };
        let by_spec = pod(json!({"metadata": {"name": "p0", "namespace": "ml"},
            "spec": {"schedulingGroup": {"podGroupName": "w"}, "priority": 5,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}));
        let m = pending_member(&by_spec).unwrap().unwrap();
        assert_eq!(m.group.to_string(), "PodGroup ml/w");
        assert_eq!(m.group.kind, WorkloadKind::SchedulingGroup);
        assert_eq!((m.pod.requests["cpu"], m.priority), (2000, 5));
        // CPU as requested, memory at the scoring default.
        assert_eq!(m.pod.non_zero["cpu"], 2000);
        assert_eq!(m.pod.non_zero["memory"], 200 << 20);
        let by_label = pod(json!({"metadata": {"name": "p1",
            "labels": {"kube-tas.io/pod-group": "w"}}, "spec": {"containers": []}}));
        assert_eq!(
            pending_member(&by_label).unwrap().unwrap().group.name,
            "w".to_string()
        );
        let bound = pod(json!({"metadata": {"name": "p2"},
            "spec": {"nodeName": "n1", "schedulingGroup": {"podGroupName": "w"},
                "containers": []}}));
        assert_eq!(pending_member(&bound).unwrap(), None);
        let other = pod(json!({"metadata": {"name": "p3"}, "spec": {"containers": []}}));
        assert_eq!(pending_member(&other).unwrap(), None);
        let bad = pod(
            json!({"metadata": {"name": "p4", "labels": {"kube-tas.io/pod-group": "w"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1x"}}}]}}),
        );
        let err = pending_member(&bad).unwrap_err();
        assert!(err.field.contains("cpu"), "{err:?}");
    }
}
