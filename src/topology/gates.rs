//! Kueue feature gates that change placement, with Kueue's names and defaults.
//!
//! `--feature-gates` takes `NAME=BOOL,...` exactly as Kueue does; every Kueue gate name is
//! accepted (so a Kueue configuration can be copied), an unknown name is an error.

use std::collections::BTreeMap;
use std::fmt;

/// Every Kueue gate this version knows, with its default. Only some change placement; the
/// others are accepted so that a Kueue flag line can be reused unchanged.
const KNOWN_GATES: &[(&str, bool)] = &[
    ("TopologyAwareScheduling", true),
    ("TASFailedNodeReplacement", true),
    ("TASReplaceNodeOnPodTermination", true),
    ("TASFailedNodeReplacementFailFast", true),
    ("TASReplaceNodeDueToNotReadyOverFixedTime", false),
    ("TASReplaceNodeOnNodeTaints", true),
    ("SkipReassignmentForPodOwnedWorkloads", true),
    ("TASProfileMixed", true),
    ("TASBalancedPlacement", false),
    ("TASMultiLayerTopology", true),
    ("TASRespectNodeAffinityPreferred", false),
    ("TASAssignmentsEncodingByHostnamePrefix", true),
    ("TASHandleOverlappingFlavors", true),
    ("TASCacheNodeMatchResults", true),
    ("TASCachingRemainingResources", true),
    ("VectorizedResourceRequests", true),
    ("TASCacheTopologyTree", true),
    ("TASRecomputeAssignmentWithinSchedulingCycle", true),
    ("ElasticJobsViaWorkloadSlices", false),
    ("ElasticJobsViaWorkloadSlicesWithTAS", false),
    ("TASValidateWorkloadSliceSize", true),
    ("SchedulerLibraryIntegration", false),
];

/// A feature-gate line that could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GateError {
    /// The name is not one of Kueue's gates.
    #[error("unknown feature gate {name:?} (known: {known})")]
    Unknown { name: String, known: String },
    /// `NAME=VALUE` where VALUE is not a boolean.
    #[error("feature gate {name}: {value:?} is not a boolean (want true or false)")]
    NotBool { name: String, value: String },
    /// An item without `=`.
    #[error("feature gate item {item:?} is not NAME=BOOL")]
    Malformed { item: String },
}

/// The gates in force: Kueue's defaults, overridden by the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    values: BTreeMap<&'static str, bool>,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            values: KNOWN_GATES.iter().copied().collect(),
        }
    }
}

impl FeatureGates {
    /// Parses `NAME=BOOL,NAME=BOOL` on top of the defaults (an empty string keeps them).
    pub fn parse(spec: &str) -> Result<Self, GateError> {
        let mut gates = Self::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| GateError::Malformed { item: item.into() })?;
            let value = match value.trim() {
                "true" | "True" | "TRUE" => true,
                "false" | "False" | "FALSE" => false,
                other => {
                    return Err(GateError::NotBool {
                        name: name.into(),
                        value: other.into(),
                    });
                }
            };
            gates.set(name.trim(), value)?;
        }
        Ok(gates)
    }

    /// Sets one gate by Kueue name.
    pub fn set(&mut self, name: &str, value: bool) -> Result<(), GateError> {
        match self.values.keys().find(|k| **k == name) {
            Some(key) => {
                let key: &'static str = key;
                self.values.insert(key, value);
                Ok(())
            }
            None => Err(GateError::Unknown {
                name: name.into(),
                known: KNOWN_GATES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Whether a gate is on; an unknown name is off.
    pub fn enabled(&self, name: &str) -> bool {
        self.values.get(name).copied().unwrap_or(false)
    }

    /// `TASProfileMixed`: LeastFreeCapacity for unconstrained requests.
    pub fn profile_mixed(&self) -> bool {
        self.enabled("TASProfileMixed")
    }
    /// `TASBalancedPlacement`: balanced placement for preferred requests.
    pub fn balanced_placement(&self) -> bool {
        self.enabled("TASBalancedPlacement")
    }
    /// `TASMultiLayerTopology`: the constraints annotation is read and validated.
    pub fn multi_layer(&self) -> bool {
        self.enabled("TASMultiLayerTopology")
    }
    /// `TASRespectNodeAffinityPreferred`: preferred node affinity orders domains.
    pub fn respect_preferred_affinity(&self) -> bool {
        self.enabled("TASRespectNodeAffinityPreferred")
    }
}

impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kueues() {
        let g = FeatureGates::default();
        assert!(g.profile_mixed());
        assert!(g.multi_layer());
        assert!(!g.balanced_placement());
        assert!(!g.respect_preferred_affinity());
    }

    #[test]
    fn parse_overrides_and_rejects_unknown() {
        let g = FeatureGates::parse("TASBalancedPlacement=true, TASProfileMixed=false").unwrap();
        assert!(g.balanced_placement());
        assert!(!g.profile_mixed());
        assert!(matches!(
            FeatureGates::parse("NoSuchGate=true"),
            Err(GateError::Unknown { .. })
        ));
        assert!(matches!(
            FeatureGates::parse("TASBalancedPlacement=yes"),
            Err(GateError::NotBool { .. })
        ));
        assert!(matches!(
            FeatureGates::parse("TASBalancedPlacement"),
            Err(GateError::Malformed { .. })
        ));
        assert_eq!(FeatureGates::parse("").unwrap(), FeatureGates::default());
    }
}
