//! The placement engine: PURE (no I/O, no async, no kube client).
//!
//! It turns node labels into a domain tree (blocks → racks → hosts), counts how many pods of a
//! request every domain can hold, and chooses domains exactly as Kueue's Topology Aware
//! Scheduling does. Everything above this module (cluster view, plans, extender, webhook) calls
//! in; nothing here calls out.

pub mod balanced;
pub mod capacity;
pub mod counting;
#[cfg(test)]
pub mod fixtures;
pub mod gates;
pub mod labels;
pub mod message;
pub mod node;
pub mod node_digest;
pub mod node_facts;
pub mod node_failure;
pub mod placement;
pub mod podgroup;
#[cfg(test)]
mod properties;
pub mod request;
pub mod resources;
pub mod room;
pub mod tree;

pub use gates::FeatureGates;
pub use labels::NodeLabels;
pub use node::NodeInfo;
pub use request::{PodSetSpec, SliceLayer, TopologyRequest};
pub use resources::ResourceList;
pub mod validation;
