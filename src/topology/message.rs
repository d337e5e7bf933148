//! Why a group does not fit, in Kueue's words: the failure text and the exclusion tally
//! (`. Total nodes: N; excluded: ...`) that tells a person which filter removed which nodes.

use std::collections::BTreeMap;
use std::fmt;

/// How many candidate leaves each filter removed during one evaluation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclusions {
    /// Leaves evaluated.
    pub total_nodes: usize,
    /// Removed by the pod's nodeSelector.
    pub node_selector: usize,
    /// Removed by required node affinity.
    pub affinity: usize,
    /// Outside the domain the group must stay in.
    pub topology_domain: usize,
    /// Removed by an untolerated taint, keyed by the taint as `key=value:Effect`.
    pub taints: BTreeMap<String, usize>,
    /// Leaves that fit no pod, keyed by the limiting resource.
    pub resources: BTreeMap<String, usize>,
}

impl Exclusions {
    /// Kueue's suffix: empty when nothing was excluded, else
    /// `. Total nodes: N; excluded: a: 1, b: 2` with the reasons sorted as strings.
    pub fn suffix(&self) -> String {
        let mut reasons: Vec<String> = Vec::new();
        if self.node_selector > 0 {
            reasons.push(format!("nodeSelector: {}", self.node_selector));
        }
        if self.affinity > 0 {
            reasons.push(format!("affinity: {}", self.affinity));
        }
        if self.topology_domain > 0 {
            reasons.push(format!("topologyDomain: {}", self.topology_domain));
        }
        for (taint, n) in &self.taints {
            reasons.push(format!("taint \"{taint}\": {n}"));
        }
        for (resource, n) in &self.resources {
            reasons.push(format!("resource \"{resource}\": {n}"));
        }
        if reasons.is_empty() {
            return String::new();
        }
        reasons.sort();
        format!(
            ". Total nodes: {}; excluded: {}",
            self.total_nodes,
            reasons.join(", ")
        )
    }
}

/// How much of a request fit, as Kueue's `allows to fit only F out of N pod(s)` (or
/// `slice(s)`) counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Units that fit (`F`).
    pub fit: i64,
    /// Units the request needs (`N`).
    pub need: i64,
    /// `pod` or `slice`.
    pub unit: &'static str,
}

/// A group that cannot be placed, with the reason a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFit {
    /// The reason, in Kueue's wording where Kueue has one.
    pub message: String,
    /// The counts the message states, when it is the single-layer "fit F out of N" form.
    pub counted: Option<Counted>,
}

impl NotFit {
    /// A reason with no further structure.
    pub fn plain(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            counted: None,
        }
    }
}

impl fmt::Display for NotFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NotFit {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_is_sorted_and_empty_without_exclusions() {
        assert_eq!(Exclusions::default().suffix(), "");
        let mut e = Exclusions {
            total_nodes: 4,
            node_selector: 2,
            ..Default::default()
        };
        e.resources.insert("cpu".into(), 1);
        e.taints.insert("key=value:NoSchedule".into(), 1);
        assert_eq!(
            e.suffix(),
            ". Total nodes: 4; excluded: nodeSelector: 2, resource \"cpu\": 1, taint \"key=value:NoSchedule\": 1"
        );
    }
}
