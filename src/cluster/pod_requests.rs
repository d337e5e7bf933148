//! The effective resource requests of one pod, computed as Kubernetes' `PodRequests` helper
//! (`k8s.io/component-helpers/resource`) does, after Kueue's limits-as-requests defaulting.
//!
//! The rules, in order:
//! 1. a container (or init container) that sets a limit but no request for a resource
//!    requests its limit (Kueue's `UseLimitsAsMissingRequestsInPod`);
//! 2. regular containers add up;
//! 3. init containers run one at a time, so each counts as a peak: restartable init
//!    containers (sidecars, `restartPolicy: Always`) keep running, so they add to the total and
//!    to the peak of every init container after them; the total is the per-resource maximum
//!    of the sum and the highest init peak;
//! 4. pod-level `spec.resources.requests` replace the total for the resources they name
//!    (`cpu`, `memory`, `hugepages-*` only); a pod-level limit without a request counts as the
//!    request when no container requests that resource (the API server's defaulting);
//! 5. `spec.overhead` is added last.
//!
//! Arithmetic is exact ([`QuantityValue`]); only the final list is converted to Kueue's `i64`
//! units. Negative quantities are rejected, as the API server's validation rejects them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::FieldError;
use super::quantity::{QuantityValue, fits_count, parse_quantity, resource_amount};
use crate::topology::ResourceList;

/// Resource name → exact amount.
type ExactList = BTreeMap<String, QuantityValue>;

/// One pod's effective requests (CPU in millicores, others in whole units; no `pods` slot).
///
/// `spec_path` is where `spec` sits in its object (`"spec"` for a Pod, `"spec.template.spec"`
/// for a Job); errors name the full field, e.g.
/// `spec.containers[0].resources.requests.cpu: invalid quantity "1x"`.
pub fn pod_requests(spec: &PodSpec, spec_path: &str) -> Result<ResourceList, FieldError> {
    let mut total = ExactList::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let requests = container_requests(c, &|| format!("{spec_path}.containers[{i}]"))?;
        add_into(&mut total, &requests);
    }

    let mut sidecars = ExactList::new();
    let mut init_peak = ExactList::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let requests = container_requests(c, &|| format!("{spec_path}.initContainers[{i}]"))?;
        if c.restart_policy.as_deref() == Some("Always") {
            add_into(&mut total, &requests);
            add_into(&mut sidecars, &requests);
            max_into(&mut init_peak, &sidecars);
        } else {
            let mut running = requests;
            add_into(&mut running, &sidecars);
            max_into(&mut init_peak, &running);
        }
    }
    max_into(&mut total, &init_peak);

    if let Some(pod_level) = &spec.resources {
        let requests = parse_list(pod_level.requests.as_ref(), &|| {
            format!("{spec_path}.resources.requests")
        })?;
        let limits = parse_list(pod_level.limits.as_ref(), &|| {
            format!("{spec_path}.resources.limits")
        })?;
        for (name, value) in requests {
            if is_pod_level_resource(&name) {
                total.insert(name, value);
            }
        }
        for (name, value) in limits {
            let has_request = pod_level
                .requests
                .as_ref()
                .is_some_and(|r| r.contains_key(&name));
            if is_pod_level_resource(&name) && !has_request && !total.contains_key(&name) {
                total.insert(name, value);
            }
        }
    }

    let overhead = parse_list(spec.overhead.as_ref(), &|| format!("{spec_path}.overhead"))?;
    add_into(&mut total, &overhead);

    // Each quantity fits on its own; their sum must too, or it would be clamped.
    total
        .into_iter()
        .map(|(name, value)| {
            if !fits_count(&name, value) {
                return Err(FieldError::new(
                    spec_path,
                    format!(
                        "the pod's {name} requests add up to {value}, beyond what can be \
                         counted; it would be clamped"
                    ),
                ));
            }
            let amount = resource_amount(&name, value);
            Ok((name, amount))
        })
        .collect()
}

/// CPU and memory as kube-scheduler's scoring counts a pod (its non-zero requests): the pod's
/// effective `requests` ([`pod_requests`]), plus 100m CPU / 200Mi memory for each regular
/// container that requests none of it, unless pod-level requests name it. (kube-scheduler
/// also defaults init containers that request nothing; their peak rarely decides.)
pub fn scoring_requests(
    spec: &PodSpec,
    spec_path: &str,
    requests: &ResourceList,
) -> Result<ResourceList, FieldError> {
    use crate::topology::podgroup::{DEFAULT_CPU_REQUEST, DEFAULT_MEMORY_REQUEST, MEMORY};
    use crate::topology::resources::CPU;
    let containers = container_request_lists(spec, spec_path)?;
    let pod_level = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut out = ResourceList::new();
    for (name, default) in [(CPU, DEFAULT_CPU_REQUEST), (MEMORY, DEFAULT_MEMORY_REQUEST)] {
        let mut value = requests.get(name).copied().unwrap_or(0);
        if !pod_level.is_some_and(|r| r.contains_key(name)) {
            let missing = containers.iter().filter(|c| !c.contains_key(name)).count();
            let missing = i64::try_from(missing).unwrap_or(i64::MAX);
            value = value.saturating_add(missing.saturating_mul(default));
        }
        out.insert(name.to_string(), value);
    }
    Ok(out)
}

/// Each regular container's requests (limits standing in for missing ones), in Kueue's `i64`
/// units: what kube-scheduler's scoring reads per container (its non-zero defaults apply to
/// a container that requests nothing of a resource).
pub fn container_request_lists(
    spec: &PodSpec,
    spec_path: &str,
) -> Result<Vec<ResourceList>, FieldError> {
    spec.containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let requests = container_requests(c, &|| format!("{spec_path}.containers[{i}]"))?;
            Ok(requests
                .into_iter()
                .map(|(name, value)| {
                    let amount = resource_amount(&name, value);
                    (name, amount)
                })
                .collect())
        })
        .collect()
}

/// Where a field sits, written only when an error names it (the usual pod has none, and
/// formatting every path cost more than parsing its quantities).
pub(crate) type FieldPath<'a> = &'a dyn Fn() -> String;

/// A container's requests, with limits standing in for missing requests.
fn container_requests(c: &Container, path: FieldPath<'_>) -> Result<ExactList, FieldError> {
    let Some(resources) = &c.resources else {
        return Ok(ExactList::new());
    };
    let mut requests = parse_list(resources.requests.as_ref(), &|| {
        format!("{}.resources.requests", path())
    })?;
    let limits = parse_list(resources.limits.as_ref(), &|| {
        format!("{}.resources.limits", path())
    })?;
    for (name, value) in limits {
        requests.entry(name).or_insert(value);
    }
    Ok(requests)
}

/// Parses a `ResourceList` field; each bad entry is reported as `{path}.{name}`.
pub(crate) fn parse_list(
    list: Option<&BTreeMap<String, Quantity>>,
    path: FieldPath<'_>,
) -> Result<ExactList, FieldError> {
    let mut out = ExactList::new();
    for (name, q) in list.into_iter().flatten() {
        out.insert(
            name.clone(),
            parse_non_negative(q, name, &|| format!("{}.{name}", path()))?,
        );
    }
    Ok(out)
}

/// Parses a quantity of `resource` that must not be negative (requests, limits, overhead,
/// allocatable) and that kube-tas can count exactly: an amount beyond what an `i64` holds in
/// Kueue's unit for the resource (`pods: 1e400`) is an error, never a silent clamp.
pub(crate) fn parse_non_negative(
    q: &Quantity,
    resource: &str,
    path: FieldPath<'_>,
) -> Result<QuantityValue, FieldError> {
    let value = parse_quantity(&q.0).map_err(|e| FieldError::new(path(), e.to_string()))?;
    if value.is_negative() {
        return Err(FieldError::new(
            path(),
            format!("must be greater than or equal to 0, got {:?}", q.0),
        ));
    }
    if !fits_count(resource, value) {
        return Err(FieldError::new(
            path(),
            format!(
                "{:?} is beyond what can be counted ({} {}); it would be clamped",
                q.0,
                i64::MAX,
                if resource == crate::topology::resources::CPU {
                    "millicores"
                } else {
                    "units"
                }
            ),
        ));
    }
    Ok(value)
}

/// The resources pod-level `spec.resources` may set (`IsSupportedPodLevelResource`).
fn is_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

fn add_into(total: &mut ExactList, more: &ExactList) {
    for (name, value) in more {
        let slot = total.entry(name.clone()).or_default();
        *slot = slot.saturating_add(*value);
    }
}

fn max_into(total: &mut ExactList, other: &ExactList) {
    for (name, value) in other {
        let slot = total.entry(name.clone()).or_default();
        if *value > *slot {
            *slot = *value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).expect("valid PodSpec")
    }

    fn requests(v: serde_json::Value) -> ResourceList {
        pod_requests(&spec(v), "spec").expect("valid requests")
    }

    fn list(items: &[(&str, i64)]) -> ResourceList {
        items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn container(name: &str, requests: serde_json::Value) -> serde_json::Value {
        json!({"name": name, "resources": {"requests": requests}})
    }

    #[test]
    fn containers_add_up() {
        let r = requests(json!({"containers": [
            container("a", json!({"cpu": "500m", "memory": "1Gi"})),
            container("b", json!({"cpu": "1", "example.com/gpu": "2"})),
        ]}));
        assert_eq!(
            r,
            list(&[("cpu", 1500), ("example.com/gpu", 2), ("memory", 1 << 30)])
        );
    }

    #[test]
    fn no_containers_means_no_requests() {
        assert_eq!(requests(json!({"containers": []})), ResourceList::new());
        assert_eq!(
            requests(json!({"containers": [{"name": "a"}]})),
            ResourceList::new()
        );
    }

    #[test]
    fn sums_are_exact_before_rounding() {
        let r = requests(json!({"containers": [
            container("a", json!({"memory": "500m"})),
            container("b", json!({"memory": "500m"})),
        ]}));
        assert_eq!(r, list(&[("memory", 1)]));
    }

    #[test]
    fn limits_stand_in_for_missing_requests() {
        let r = requests(json!({"containers": [{
            "name": "a",
            "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4", "memory": "2Gi"}},
        }]}));
        assert_eq!(r, list(&[("cpu", 1000), ("memory", 2 << 30)]));
    }

    #[test]
    fn init_containers_are_a_peak() {
        let r = requests(json!({
            "initContainers": [
                container("i1", json!({"cpu": "3"})),
                container("i2", json!({"memory": "1"})),
            ],
            "containers": [container("a", json!({"cpu": "1", "memory": "4"}))],
        }));
        assert_eq!(r, list(&[("cpu", 3000), ("memory", 4)]));
    }

    #[test]
    fn sidecars_add_up_and_raise_later_init_peaks() {
        let mut sidecar = container("s", json!({"cpu": "1"}));
        sidecar["restartPolicy"] = json!("Always");
        let r = requests(json!({
            "initContainers": [sidecar, container("i", json!({"cpu": "2"}))],
            "containers": [container("a", json!({"cpu": "1"}))],
        }));
        // Steady state: sidecar 1 + main 1 = 2; while `i` runs: sidecar 1 + i 2 = 3.
        assert_eq!(r, list(&[("cpu", 3000)]));

        let mut sidecar = container("s", json!({"cpu": "1"}));
        sidecar["restartPolicy"] = json!("Always");
        let r = requests(json!({
            "initContainers": [container("i", json!({"cpu": "2"})), sidecar],
            "containers": [container("a", json!({"cpu": "2"}))],
        }));
        // `i` runs before the sidecar starts: peak 2; steady state 1 + 2 = 3.
        assert_eq!(r, list(&[("cpu", 3000)]));
    }

    #[test]
    fn overhead_is_added() {
        let r = requests(json!({
            "containers": [container("a", json!({"cpu": "1"}))],
            "overhead": {"cpu": "250m", "memory": "100"},
        }));
        assert_eq!(r, list(&[("cpu", 1250), ("memory", 100)]));
    }

    #[test]
    fn pod_level_requests_override_supported_resources() {
        let r = requests(json!({
            "resources": {"requests": {"cpu": "4", "example.com/gpu": "9"}},
            "containers": [container("a", json!({"cpu": "1", "example.com/gpu": "1"}))],
            "overhead": {"cpu": "100m"},
        }));
        assert_eq!(r, list(&[("cpu", 4100), ("example.com/gpu", 1)]));
    }

    #[test]
    fn pod_level_limits_default_only_unrequested_resources() {
        let r = requests(json!({
            "resources": {"limits": {"cpu": "8", "memory": "2"}},
            "containers": [container("a", json!({"cpu": "1"}))],
        }));
        assert_eq!(r, list(&[("cpu", 1000), ("memory", 2)]));
    }

    #[test]
    fn errors_name_the_field() {
        let err = pod_requests(
            &spec(json!({"containers": [container("a", json!({"cpu": "1x"}))]})),
            "spec",
        )
        .expect_err("bad quantity");
        assert_eq!(
            err.to_string(),
            r#"spec.containers[0].resources.requests.cpu: invalid quantity "1x""#
        );

        let err = pod_requests(
            &spec(json!({"containers": [], "initContainers": [{
                "name": "i", "resources": {"limits": {"memory": "1Qi"}}
            }]})),
            "spec.template.spec",
        )
        .expect_err("bad quantity");
        assert_eq!(
            err.field,
            "spec.template.spec.initContainers[0].resources.limits.memory"
        );

        let err = pod_requests(
            &spec(json!({"containers": [], "overhead": {"cpu": "-1"}})),
            "spec",
        )
        .expect_err("negative");
        assert_eq!(err.field, "spec.overhead.cpu");
        assert!(err.message.contains("greater than or equal to 0"));
    }
}

#[cfg(test)]
mod scoring_tests {
    use super::*;
    use serde_json::json;

    fn scoring(spec: serde_json::Value) -> ResourceList {
        let spec: PodSpec = serde_json::from_value(spec).unwrap();
        let requests = pod_requests(&spec, "spec").unwrap();
        scoring_requests(&spec, "spec", &requests).unwrap()
    }

    #[test]
    fn containers_that_request_nothing_count_at_the_defaults() {
        let s = scoring(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "2"}}},
            {"name": "b"}]}));
        // a: 2 cpu + default memory; b: both defaults.
        assert_eq!(s["cpu"], 2000 + 100);
        assert_eq!(s["memory"], 2 * (200 << 20));
        // An explicit zero stays zero.
        let s = scoring(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "0", "memory": "0"}}}]}));
        assert_eq!((s["cpu"], s["memory"]), (0, 0));
    }

    #[test]
    fn sidecars_overhead_and_pod_level_requests_count_as_the_scheduler_counts_them() {
        let s = scoring(json!({
            "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}}],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            "overhead": {"cpu": "250m"}}));
        assert_eq!(s["cpu"], 1000 + 500 + 250);
        assert_eq!(s["memory"], (64 << 20) + (200 << 20));
        // Pod-level requests replace the containers' sum: no defaults on top.
        let s = scoring(json!({
            "resources": {"requests": {"cpu": "3", "memory": "1Gi"}},
            "containers": [{"name": "a"}, {"name": "b"}]}));
        assert_eq!((s["cpu"], s["memory"]), (3000, 1 << 30));
    }
}
