//! Resource lists as Kueue counts them: CPU in milli-units, everything else in whole units,
//! all as `i64`; `pods` is a resource like any other (every pod takes one).

use std::collections::BTreeMap;

/// Resource name → amount (CPU in millicores, others in whole units). Ordered by name, which
/// is also the order Kueue uses to break ties between limiting resources.
pub type ResourceList = BTreeMap<String, i64>;

/// The resource every pod takes one of.
pub const PODS: &str = "pods";
/// The resource measured in milli-units.
pub const CPU: &str = "cpu";

/// Adds one pod to a usage total: its requests (any `pods` entry in them ignored) and one
/// `pods` slot.
pub fn add_pod_usage(total: &mut ResourceList, requests: &ResourceList) {
    for (name, value) in requests {
        if name != PODS {
            *total.entry(name.clone()).or_insert(0) += value;
        }
    }
    *total.entry(PODS.to_string()).or_insert(0) += 1;
}

/// A single pod's request with its `pods: 1` slot added, as Kueue counts it.
pub fn with_pod_slot(requests: &ResourceList) -> ResourceList {
    let mut r = requests.clone();
    *r.entry(PODS.to_string()).or_insert(0) += 1;
    r
}
