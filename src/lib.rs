//! kube-tas: topology-aware gang placement for any Kubernetes cluster, through a
//! kube-scheduler HTTP extender and a mutating admission webhook that speak Kueue's TAS
//! annotations. `topology` is the pure placement core; `cluster` is the view of the cluster
//! it places on.
#![forbid(unsafe_code)]

pub mod cluster;
pub mod keys;
pub mod synthetic;
pub mod topology;
