//! The cluster view: Nodes, Pods, Jobs and Kueue's Topology / ResourceFlavor / ClusterQueue /
//! LocalQueue, loaded from manifests (or, later, from live reflectors).
