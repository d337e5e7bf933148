//! The Workload-API kinds kube-tas watches: `PodGroup` (`scheduling.k8s.io` `v1beta1`, and
//! `v1alpha3` / `v1alpha2` for clusters that enable only an alpha version: 1.36 serves its
//! PodGroups at `v1alpha2`), `CompositePodGroup` (`v1alpha3`), kube-tas's `kube-tas.io/v1alpha1`
//! copies of both, and the pending pods that name a PodGroup. A cluster serving one PodGroup at
//! several versions shows each watch the same objects, each recorded under its version's
//! origin and read once. Every group kind is
//! optional: a cluster that serves neither API group (before 1.36, the gate off, kube-tas's
//! CRDs not installed) reports them as not served and runs on.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::NamespaceResourceScope;
use kube::runtime::watcher;
use serde::Deserialize;
use serde_json::Value;

use super::{WatchedKind, namespaced_key, pod_key, split_key};
use crate::cluster::live::watched_fields::{PodFields, watched_object};
use crate::cluster::scheduling_groups::{
    GroupId, KUBE_TAS_API_GROUP, Origin, SCHEDULING_API_GROUP, pending_member, scheduling_group,
};
use crate::cluster::state::ClusterState;

/// A group kind: its Rust type, kind, API group, version, plural, watch name, whether it is
/// a CompositePodGroup, and its origin. Objects are read as metadata plus a raw spec, checked
/// by [`scheduling_group`] (a bad one is logged and left out).
macro_rules! group_kind {
    ($ty:ident, $kind:literal, $group:expr, $version:literal, $plural:literal,
     $name:literal, $composite:expr, $origin:expr) => {
        #[doc = concat!("A `", $kind, "` as watched at `", $version, "`.")]
        #[derive(Debug, Clone, Deserialize)]
        pub struct $ty {
            /// `metadata`.
            #[serde(default)]
            pub metadata: ObjectMeta,
            /// `spec`, read by [`scheduling_group`].
            #[serde(default)]
            pub spec: Option<Value>,
        }

        impl Resource for $ty {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Owned(format!("{}/{}", $group, $version))
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl WatchedKind for $ty {
            const NAME: &'static str = $name;
            const OPTIONAL: bool = true;

            fn key(obj: &Self) -> String {
                namespaced_key(obj)
            }

            fn apply(state: &mut ClusterState, obj: &Self) {
                let api_version = <$ty as Resource>::api_version(&());
                match scheduling_group(&api_version, $composite, &obj.metadata, obj.spec.as_ref())
                {
                    Ok(group) => state.apply_scheduling_group(group),
                    Err(e) => {
                        let key = namespaced_key(obj);
                        tracing::warn!(object = %format_args!("{} {key}", $kind),
                            field = %e.field, error = %e.message,
                            "group not read: its pods wait as for a missing group");
                        Self::delete_key(state, &key);
                    }
                }
            }

            fn delete_key(state: &mut ClusterState, key: &str) {
                let (namespace, name) = split_key(key);
                let id = GroupId {
                    composite: $composite,
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                };
                state.delete_scheduling_group($origin, &id);
            }

            fn keys(state: &ClusterState) -> Vec<String> {
                state.scheduling_group_keys($origin, $composite)
            }
        }
    };
}

group_kind!(
    PodGroupV1beta1,
    "PodGroup",
    SCHEDULING_API_GROUP,
    "v1beta1",
    "podgroups",
    "podgroups",
    false,
    Origin::Scheduling
);
group_kind!(
    PodGroupV1alpha3,
    "PodGroup",
    SCHEDULING_API_GROUP,
    "v1alpha3",
    "podgroups",
    "podgroups.v1alpha3",
    false,
    Origin::SchedulingV1alpha3
);
group_kind!(
    PodGroupV1alpha2,
    "PodGroup",
    SCHEDULING_API_GROUP,
    "v1alpha2",
    "podgroups",
    "podgroups.v1alpha2",
    false,
    Origin::SchedulingV1alpha2
);
group_kind!(
    CompositePodGroupV1alpha3,
    "CompositePodGroup",
    SCHEDULING_API_GROUP,
    "v1alpha3",
    "compositepodgroups",
    "compositepodgroups",
    true,
    Origin::SchedulingV1alpha3
);
group_kind!(
    KubeTasPodGroup,
    "PodGroup",
    KUBE_TAS_API_GROUP,
    "v1alpha1",
    "podgroups",
    "podgroups.kube-tas.io",
    false,
    Origin::KubeTas
);
group_kind!(
    KubeTasCompositePodGroup,
    "CompositePodGroup",
    KUBE_TAS_API_GROUP,
    "v1alpha1",
    "compositepodgroups",
    "compositepodgroups.kube-tas.io",
    true,
    Origin::KubeTas
);

watched_object!(
    /// A pending pod, as the third watch on pods sees it (field `spec.nodeName=`): kept when it
    /// names a Workload-API PodGroup, so a group's pods are known before any of them binds. No
    /// selector can pick `spec.schedulingGroup`, so every unbound pod is listed and the others
    /// dropped on the way in. A pod that binds leaves this watch (as a deletion) and shows up in
    /// the pod watch.
    PendingMemberPod(Pod) through PodFields
);

impl WatchedKind for PendingMemberPod {
    const NAME: &'static str = "podgroupmembers";

    fn config() -> watcher::Config {
        watcher::Config::default().fields("spec.nodeName=")
    }

    fn key(obj: &Self) -> String {
        pod_key(&obj.0)
    }

    fn apply(state: &mut ClusterState, obj: &Self) {
        let key = pod_key(&obj.0);
        match pending_member(&obj.0) {
            Ok(Some(member)) => state.apply_pending_member(&key, member),
            Ok(None) => {
                state.remove_pending_member(&key);
            }
            Err(e) => {
                tracing::warn!(pod = %key, field = %e.field, error = %e.message,
                    "PodGroup pod not readable: its group is placed without it");
                state.remove_pending_member(&key);
            }
        }
    }

    fn delete_key(state: &mut ClusterState, key: &str) {
        state.remove_pending_member(key);
    }

    fn keys(state: &ClusterState) -> Vec<String> {
        state.pending_member_uids()
    }
}
