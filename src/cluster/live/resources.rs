//! `kube::Resource` for Kueue's kinds (`kueue.x-k8s.io/v1beta2`), JobSet
//! (`jobset.x-k8s.io/v1alpha2`) and LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`), so they
//! are watched as typed objects like the built-in ones. Unknown fields are ignored by the serde types, so newer
//! Kueue versions deserialize too.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, NamespaceResourceScope};

use crate::cluster::kueue::{ClusterQueue, KueueWorkload, LocalQueue, ResourceFlavor, Topology};
use crate::cluster::sets::{JobSet, LeaderWorkerSet};

/// The version of Kueue's API kube-tas watches.
pub const KUEUE_VERSION: &str = "v1beta2";

/// `kube::Resource` for a serde type of a custom resource: kind, group, version, plural,
/// scope.
macro_rules! custom_resource {
    ($ty:ty, $kind:literal, $group:expr, $version:expr, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

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
    };
}

/// A Kueue kind at [`KUEUE_VERSION`].
macro_rules! kueue_resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        custom_resource!(
            $ty,
            $kind,
            crate::cluster::kueue::GROUP,
            KUEUE_VERSION,
            $plural,
            $scope
        );
    };
}

kueue_resource!(Topology, "Topology", "topologies", ClusterResourceScope);
kueue_resource!(
    ResourceFlavor,
    "ResourceFlavor",
    "resourceflavors",
    ClusterResourceScope
);
kueue_resource!(
    ClusterQueue,
    "ClusterQueue",
    "clusterqueues",
    ClusterResourceScope
);
kueue_resource!(
    LocalQueue,
    "LocalQueue",
    "localqueues",
    NamespaceResourceScope
);
kueue_resource!(
    KueueWorkload,
    "Workload",
    "workloads",
    NamespaceResourceScope
);
custom_resource!(
    JobSet,
    "JobSet",
    "jobset.x-k8s.io",
    "v1alpha2",
    "jobsets",
    NamespaceResourceScope
);
custom_resource!(
    LeaderWorkerSet,
    "LeaderWorkerSet",
    "leaderworkerset.x-k8s.io",
    "v1",
    "leaderworkersets",
    NamespaceResourceScope
);

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    #[test]
    fn urls_are_kueues() {
        assert_eq!(
            Topology::url_path(&(), None),
            "/apis/kueue.x-k8s.io/v1beta2/topologies"
        );
        assert_eq!(
            LocalQueue::url_path(&(), Some("team")),
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/localqueues"
        );
        assert_eq!(
            JobSet::url_path(&(), Some("ml")),
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets"
        );
        assert_eq!(
            LeaderWorkerSet::url_path(&(), Some("ml")),
            "/apis/leaderworkerset.x-k8s.io/v1/namespaces/ml/leaderworkersets"
        );
        assert_eq!(
            JobSet::api_version(&()),
            crate::cluster::sets::JOBSET_API_VERSION
        );
    }
}
