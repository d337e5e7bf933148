//! kube-tas: topology-aware gang placement for any Kubernetes cluster, through a
//! kube-scheduler HTTP extender and a mutating admission webhook that speak Kueue's TAS
//! annotations.
//!
//! `topology` is the pure placement core; `cluster` is the view of the cluster it places on;
//! `admission` decides workloads as the webhook does; `plans` holds the plans and seats of pod
//! groups; `extender` answers kube-scheduler over them; `server` is the HTTP side of
//! `kube-tas serve` (routes, TLS, probes, metrics, shutdown); `simulate` is the what-if loop
//! behind `kube-tas simulate`; `certs` makes the development CA and serving certificate of
//! `kube-tas certs` and writes the caBundle into configuration files; `bench` measures `serve`
//! in process as kube-scheduler calls it (`kube-tas bench`); `cli` is the command line.
#![forbid(unsafe_code)]

pub mod admission;
pub mod bench;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod extender;
pub mod keys;
pub mod plans;
pub mod server;
pub mod simulate;
pub mod synthetic;
pub mod topology;
