//! The role of a plain pod group's pod: which of its group's PodSets it belongs to. Kueue forms
//! a plain pod group's PodSets by pod shape (its role hash); pods whose specs differ in what
//! placement reads are different PodSets.
//!
//! The role is Kueue's `kueue.x-k8s.io/role-hash` annotation when the pod carries one, else 8
//! hex digits of a stable hash (64-bit FNV-1a) over what placement reads of the pod: its
//! effective requests, nodeSelector, tolerations, node affinity and `kueue.x-k8s.io/podset-*`
//! annotations. The same pod always has the same role, in every process and after a restart;
//! kube-tas's digits are its own (not Kueue's SHA-256 of the whole spec shape).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use super::FieldError;
use super::pod_requests::pod_requests;
use crate::keys;

/// What placement reads of a pod, in a fixed order (maps are sorted).
#[derive(Serialize)]
struct Shape<'a> {
    requests: BTreeMap<String, i64>,
    node_selector: Option<&'a BTreeMap<String, String>>,
    tolerations: &'a Option<Vec<k8s_openapi::api::core::v1::Toleration>>,
    node_affinity: Option<&'a k8s_openapi::api::core::v1::NodeAffinity>,
    annotations: BTreeMap<&'a str, &'a str>,
}

/// The pod's role (see the module documentation).
pub fn pod_role(meta: &ObjectMeta, spec: &PodSpec) -> Result<String, FieldError> {
    let annotations = meta.annotations.as_ref();
    if let Some(hash) = annotations
        .and_then(|a| a.get(keys::ROLE_HASH))
        .filter(|h| !h.is_empty())
    {
        return Ok(hash.clone());
    }
    let shape = Shape {
        requests: pod_requests(spec, "spec")?,
        node_selector: spec.node_selector.as_ref(),
        tolerations: &spec.tolerations,
        node_affinity: spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref()),
        annotations: annotations
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(keys::PODSET_ANNOTATION_PREFIX))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
    };
    // Serializing plain maps, strings and numbers cannot fail.
    let bytes = serde_json::to_vec(&shape).unwrap_or_default();
    Ok(format!("{:08x}", fnv1a64(&bytes) >> 32))
}

/// 64-bit FNV-1a.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> (ObjectMeta, PodSpec) {
        let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json).unwrap();
        (p.metadata, p.spec.unwrap_or_default())
    }

    fn role(json: serde_json::Value) -> String {
        let (m, s) = pod(json);
        pod_role(&m, &s).unwrap()
    }

    #[test]
    fn same_shape_same_role_and_what_placement_reads_changes_it() {
        let base = serde_json::json!({
            "metadata": {"name": "a", "labels": {"x": "1"},
                "annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}},
            "spec": {"containers": [{"name": "c", "image": "one",
                "resources": {"requests": {"cpu": "1"}}}]}
        });
        let r = role(base.clone());
        assert_eq!(r.len(), 8);
        // Name, labels and image are not placement's business.
        let mut other = base.clone();
        other["metadata"]["name"] = "b".into();
        other["metadata"]["labels"]["x"] = "2".into();
        other["spec"]["containers"][0]["image"] = "two".into();
        assert_eq!(role(other), r);
        // Requests, selectors and the topology annotations are.
        let mut more_cpu = base.clone();
        more_cpu["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2".into();
        assert_ne!(role(more_cpu), r);
        let mut selector = base.clone();
        selector["spec"]["nodeSelector"] = serde_json::json!({"pool": "gpu"});
        assert_ne!(role(selector), r);
        let mut preferred = base.clone();
        preferred["metadata"]["annotations"] =
            serde_json::json!({"kueue.x-k8s.io/podset-preferred-topology": "rack"});
        assert_ne!(role(preferred), r);
        // Kueue's own role hash wins.
        let mut kueue = base;
        kueue["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = "abcd1234".into();
        assert_eq!(role(kueue), "abcd1234");
    }
}
