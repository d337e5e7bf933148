//! Plans and seats: which capacity each pod group holds, and which seat each pod takes.
//!
//! No HTTP here: the extender is the first door that asks for plans, not the only one.

use std::time::Duration;

use crate::cluster::Cluster;
use crate::topology::FeatureGates;

/// Counters and gauges the server exports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Plans made since start (counter).
    pub plans_made: u64,
    /// Plans dropped because their pods never came (counter).
    pub plans_expired: u64,
    /// Plans alive now (gauge).
    pub plans_active: u64,
    /// Seats held by plans and not bound yet (gauge).
    pub seats_held: u64,
    /// Pods bound through kube-tas since start (counter).
    pub pods_bound: u64,
    /// Group placements that did not fit (counter).
    pub groups_not_fit: u64,
}

/// Every plan and seat, over one cluster view.
pub struct PlanBook {
    cluster: Cluster,
    gates: FeatureGates,
    ttl: Duration,
    stats: PlanStats,
}

impl PlanBook {
    /// A book over `cluster`; plans idle for `ttl` expire.
    pub fn new(cluster: Cluster, gates: FeatureGates, ttl: Duration) -> Self {
        Self {
            cluster,
            gates,
            ttl,
            stats: PlanStats::default(),
        }
    }

    /// Counters and gauges.
    pub fn stats(&self) -> PlanStats {
        let _ = (&self.cluster, &self.gates, self.ttl);
        self.stats
    }
}
