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
    add_pod_amounts(
        total,
        requests.iter().map(|(name, value)| (name.as_str(), *value)),
    );
}

/// A total of amounts by resource name, kept in any form: what [`add_pod_amounts`] adds to.
pub trait AmountTotal {
    /// Adds `value` to `name`, saturating, as [`add_amount`] does.
    fn add_amount(&mut self, name: &str, value: i64);
}

impl AmountTotal for ResourceList {
    fn add_amount(&mut self, name: &str, value: i64) {
        add_amount(self, name, value);
    }
}

/// [`add_pod_usage`] for requests kept in any form (`(name, amount)` pairs), into a total kept
/// in any form.
pub fn add_pod_amounts<'a>(
    total: &mut impl AmountTotal,
    requests: impl IntoIterator<Item = (&'a str, i64)>,
) {
    for (name, value) in requests {
        if name != PODS {
            total.add_amount(name, value);
        }
    }
    total.add_amount(PODS, 1);
}

/// Adds `value` to `name` in `total`, saturating: usage beyond i64 (absurd requests summed)
/// stays "full", never wraps round to room. A name already there costs no allocation.
pub fn add_amount(total: &mut ResourceList, name: &str, value: i64) {
    match total.get_mut(name) {
        Some(slot) => *slot = slot.saturating_add(value),
        None => {
            total.insert(name.to_string(), value);
        }
    }
}

/// A single pod's request with its `pods: 1` slot added, as Kueue counts it.
pub fn with_pod_slot(requests: &ResourceList) -> ResourceList {
    let mut r = requests.clone();
    *r.entry(PODS.to_string()).or_insert(0) += 1;
    r
}

/// An amount as a person reads it in a message: cores for CPU (`4`, `3500m`), `Gi`/`Mi` for
/// memory and ephemeral storage when whole, the plain number otherwise.
pub fn show_amount(resource: &str, value: i64) -> String {
    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;
    match resource {
        CPU if value % 1000 == 0 => (value / 1000).to_string(),
        CPU => format!("{value}m"),
        "memory" | "ephemeral-storage" if value != 0 && value % GI == 0 => {
            format!("{}Gi", value / GI)
        }
        "memory" | "ephemeral-storage" if value != 0 && value % MI == 0 => {
            format!("{}Mi", value / MI)
        }
        _ => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(show_amount("cpu", 4000), "4");
        assert_eq!(show_amount("cpu", 3500), "3500m");
        assert_eq!(show_amount("memory", 16 << 30), "16Gi");
        assert_eq!(show_amount("memory", 512 << 20), "512Mi");
        assert_eq!(show_amount("memory", 1000), "1000");
        assert_eq!(show_amount("pods", 0), "0");
        assert_eq!(show_amount("nvidia.com/gpu", 8), "8");
    }
}
