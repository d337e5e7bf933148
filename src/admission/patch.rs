//! What the webhook adds to an admitted pod template or pod, and the JSON Patch that adds it.
//!
//! An [`Injection`] is the desired end state: the flavor's `nodeLabels` in `nodeSelector`,
//! its tolerations, and kube-tas's stamps (gang size and queue of a Job's pods). A patch adds
//! only what the object lacks and sets a stamp that says something else, so applying it
//! twice, or to a pod whose Job template was already patched, changes nothing: an object
//! that already has everything gets no patch. A `nodeSelector` key set to another value is
//! never overwritten: [`Injection::node_selector_conflict`] finds it, and the webhook denies.
//!
//! Tolerations are compared as the API server reads them: an omitted `operator` is `Equal`,
//! an omitted `value` or `effect` is empty.
//!
//! JSON Patch rules kept here: a missing map or array is added whole (an `add` below a
//! missing parent fails); keys are escaped (`/` → `~1`, `~` → `~0`) by building paths from
//! tokens; tolerations are appended with `/-`; `add` on an existing member replaces it.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use k8s_openapi::api::core::v1::{PodSpec, Toleration};
use serde_json::Value;

use crate::cluster::kueue::ResourceFlavor;

/// Everything an admitted pod of a TAS flavor must carry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Injection {
    /// The flavor's `nodeLabels`, for `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// The flavor's tolerations.
    pub tolerations: Vec<Toleration>,
    /// Annotations (kube-tas's stamps), set where absent or different.
    pub annotations: BTreeMap<String, String>,
}

/// The part of an object the injection goes into, as it is now.
#[derive(Debug, Clone, Copy)]
pub struct PodTemplateNow<'a> {
    /// JSON Pointer tokens to the pod template: `["spec", "template"]` for a Job, `[]` for a
    /// Pod.
    pub at: &'a [&'a str],
    /// Whether the template has a `metadata` object (a Pod always has).
    pub has_metadata: bool,
    /// Its annotations.
    pub annotations: Option<&'a BTreeMap<String, String>>,
    /// Its `spec`.
    pub spec: &'a PodSpec,
}

impl Injection {
    /// The flavor's node labels and tolerations, plus `annotations`.
    pub fn of_flavor(flavor: &ResourceFlavor, annotations: BTreeMap<String, String>) -> Self {
        Self {
            node_selector: flavor.spec.node_labels.clone(),
            tolerations: flavor.spec.tolerations.clone(),
            annotations,
        }
    }

    /// The operations that add what `now` lacks; empty when it lacks nothing.
    pub fn patch_for(&self, now: &PodTemplateNow<'_>) -> Vec<PatchOperation> {
        let mut ops = Vec::new();
        let path = |tokens: &[&str]| {
            PointerBuf::from_tokens(now.at.iter().copied().chain(tokens.iter().copied()))
        };

        let missing: BTreeMap<&String, &String> = self
            .annotations
            .iter()
            .filter(|(k, v)| now.annotations.is_none_or(|a| a.get(*k) != Some(*v)))
            .collect();
        if !missing.is_empty() {
            let map = string_map(missing);
            match (now.has_metadata, now.annotations) {
                (false, _) => ops.push(add(
                    path(&["metadata"]),
                    serde_json::json!({ "annotations": map }),
                )),
                (true, None) => ops.push(add(path(&["metadata", "annotations"]), map)),
                (true, Some(_)) => {
                    if let Value::Object(entries) = map {
                        for (k, v) in entries {
                            ops.push(add(path(&["metadata", "annotations", &k]), v));
                        }
                    }
                }
            }
        }

        let current = now.spec.node_selector.as_ref();
        let missing: BTreeMap<&String, &String> = self
            .node_selector
            .iter()
            .filter(|(k, _)| current.is_none_or(|s| !s.contains_key(*k)))
            .collect();
        if !missing.is_empty() {
            let map = string_map(missing);
            match current {
                None => ops.push(add(path(&["spec", "nodeSelector"]), map)),
                Some(_) => {
                    if let Value::Object(entries) = map {
                        for (k, v) in entries {
                            ops.push(add(path(&["spec", "nodeSelector", &k]), v));
                        }
                    }
                }
            }
        }

        let current = now.spec.tolerations.as_ref();
        let missing: Vec<&Toleration> = self
            .tolerations
            .iter()
            .filter(|t| current.is_none_or(|c| !contains_toleration(c, t)))
            .collect();
        if !missing.is_empty() {
            match current {
                None => ops.push(add(path(&["spec", "tolerations"]), to_value(&missing))),
                Some(_) => {
                    for t in missing {
                        ops.push(add(path(&["spec", "tolerations", "-"]), to_value(t)));
                    }
                }
            }
        }
        ops
    }

    /// Applies the injection to a typed pod spec and annotations (what `simulate` builds its
    /// pods from), with the same rules as [`Self::patch_for`].
    pub fn apply(&self, spec: &mut PodSpec, annotations: &mut BTreeMap<String, String>) {
        for (k, v) in &self.annotations {
            annotations.insert(k.clone(), v.clone());
        }
        if !self.node_selector.is_empty() {
            let selector = spec.node_selector.get_or_insert_with(BTreeMap::new);
            for (k, v) in &self.node_selector {
                selector.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        if !self.tolerations.is_empty() {
            let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
            for t in &self.tolerations {
                if !contains_toleration(tolerations, t) {
                    tolerations.push(t.clone());
                }
            }
        }
    }

    /// The first `nodeSelector` key of `spec` set to another value than the flavor's:
    /// `(key, the spec's value, the flavor's value)`.
    pub fn node_selector_conflict<'a>(
        &'a self,
        spec: &'a PodSpec,
    ) -> Option<(&'a str, &'a str, &'a str)> {
        let current = spec.node_selector.as_ref()?;
        self.node_selector.iter().find_map(|(k, want)| {
            current
                .get(k)
                .filter(|have| *have != want)
                .map(|have| (k.as_str(), have.as_str(), want.as_str()))
        })
    }
}

/// Whether `list` holds a toleration equal to `t` as the API server reads them.
fn contains_toleration(list: &[Toleration], t: &Toleration) -> bool {
    list.iter().any(|have| same_toleration(have, t))
}

fn same_toleration(a: &Toleration, b: &Toleration) -> bool {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let operator = |v: &Option<String>| {
        v.clone()
            .filter(|o| !o.is_empty())
            .unwrap_or_else(|| "Equal".to_string())
    };
    text(&a.key) == text(&b.key)
        && operator(&a.operator) == operator(&b.operator)
        && text(&a.value) == text(&b.value)
        && text(&a.effect) == text(&b.effect)
        && a.toleration_seconds == b.toleration_seconds
}

fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

fn string_map(entries: BTreeMap<&String, &String>) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    // Serialising k8s-openapi types and string maps into a `Value` cannot fail (string keys,
    // no non-finite floats); `Null` would only show a bug.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toleration(key: &str) -> Toleration {
        Toleration {
            key: Some(key.to_string()),
            operator: Some("Exists".to_string()),
            effect: Some("NoSchedule".to_string()),
            ..Default::default()
        }
    }

    fn injection() -> Injection {
        Injection {
            node_selector: [("cloud.com/pool".to_string(), "gpu".to_string())].into(),
            tolerations: vec![toleration("nvidia.com/gpu")],
            annotations: [(
                "kube-tas.io/pod-group-total-count".to_string(),
                "4".to_string(),
            )]
            .into(),
        }
    }

    fn apply(doc: &mut Value, ops: Vec<PatchOperation>) {
        json_patch::patch(doc, &json_patch::Patch(ops)).unwrap();
    }

    #[test]
    fn missing_maps_and_arrays_are_added_whole() {
        let spec = PodSpec::default();
        let now = PodTemplateNow {
            at: &["spec", "template"],
            has_metadata: false,
            annotations: None,
            spec: &spec,
        };
        let ops = injection().patch_for(&now);
        assert_eq!(ops.len(), 3, "{ops:?}");
        let mut job = serde_json::json!({"spec": {"template": {"spec": {"containers": []}}}});
        apply(&mut job, ops);
        let t = &job["spec"]["template"];
        assert_eq!(
            t["metadata"]["annotations"]["kube-tas.io/pod-group-total-count"],
            "4"
        );
        assert_eq!(t["spec"]["nodeSelector"]["cloud.com/pool"], "gpu");
        assert_eq!(t["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
    }

    #[test]
    fn existing_maps_get_only_missing_entries_and_a_second_pass_adds_nothing() {
        let user = toleration("user");
        let mut spec = PodSpec {
            node_selector: Some([("zone".to_string(), "a".to_string())].into()),
            tolerations: Some(vec![user.clone(), toleration("nvidia.com/gpu")]),
            ..Default::default()
        };
        let mut annotations: BTreeMap<String, String> = [(
            "kube-tas.io/pod-group-total-count".to_string(),
            "9".to_string(),
        )]
        .into();
        let now = PodTemplateNow {
            at: &[],
            has_metadata: true,
            annotations: Some(&annotations),
            spec: &spec,
        };
        let ops = injection().patch_for(&now);
        // The selector key is missing and the stamp says something else; the toleration is
        // there.
        assert_eq!(ops.len(), 2, "{ops:?}");
        let text = serde_json::to_string(&ops).unwrap();
        assert!(
            text.contains("/spec/nodeSelector/cloud.com~1pool"),
            "{text}"
        );
        let stamp =
            r#""path":"/metadata/annotations/kube-tas.io~1pod-group-total-count","value":"4""#;
        assert!(text.contains(stamp), "{text}");

        injection().apply(&mut spec, &mut annotations);
        assert_eq!(annotations["kube-tas.io/pod-group-total-count"], "4");
        assert_eq!(spec.tolerations.as_ref().unwrap().len(), 2);
        let now = PodTemplateNow {
            at: &[],
            has_metadata: true,
            annotations: Some(&annotations),
            spec: &spec,
        };
        assert!(injection().patch_for(&now).is_empty());
    }

    #[test]
    fn an_omitted_operator_is_equal_and_conflicts_are_found() {
        let flavor = Toleration {
            key: Some("pool".to_string()),
            operator: Some("Equal".to_string()),
            value: Some("gpu".to_string()),
            effect: Some("NoSchedule".to_string()),
            ..Default::default()
        };
        let user = Toleration {
            operator: None,
            ..flavor.clone()
        };
        let spec = PodSpec {
            tolerations: Some(vec![user]),
            node_selector: Some([("cloud.com/pool".to_string(), "cpu".to_string())].into()),
            ..Default::default()
        };
        let inj = Injection {
            tolerations: vec![flavor],
            ..injection()
        };
        let now = PodTemplateNow {
            at: &[],
            has_metadata: true,
            annotations: Some(&inj.annotations),
            spec: &spec,
        };
        let text = serde_json::to_string(&inj.patch_for(&now)).unwrap();
        assert!(!text.contains("tolerations"), "{text}");
        assert_eq!(
            inj.node_selector_conflict(&spec),
            Some(("cloud.com/pool", "cpu", "gpu"))
        );
        assert_eq!(inj.node_selector_conflict(&PodSpec::default()), None);
    }

    #[test]
    fn tolerations_are_appended_after_the_users() {
        let spec = PodSpec {
            tolerations: Some(vec![toleration("user")]),
            ..Default::default()
        };
        let now = PodTemplateNow {
            at: &[],
            has_metadata: true,
            annotations: None,
            spec: &spec,
        };
        let inj = Injection {
            tolerations: vec![toleration("a"), toleration("b")],
            ..Default::default()
        };
        let mut pod = serde_json::json!({"metadata": {}, "spec": {"tolerations": [
            {"key": "user", "operator": "Exists", "effect": "NoSchedule"}]}});
        apply(&mut pod, inj.patch_for(&now));
        let keys: Vec<&str> = pod["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["user", "a", "b"]);
    }
}
