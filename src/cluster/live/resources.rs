//! `kube::Resource` for Kueue's kinds (`kueue.x-k8s.io/v1beta2`), so they are watched as typed
//! objects like the built-in ones. Unknown fields are ignored by the serde types, so newer
//! Kueue versions deserialize too.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, NamespaceResourceScope};

use crate::cluster::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Topology};

/// The version of Kueue's API kube-tas watches.
pub const KUEUE_VERSION: &str = "v1beta2";

macro_rules! kueue_resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(crate::cluster::kueue::GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(KUEUE_VERSION)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("kueue.x-k8s.io/v1beta2")
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
    }
}
