//! The scheduler extender: `filter`, `prioritize` and `bind` as kube-scheduler calls them,
//! answered from the plans and seats of [`crate::plans`].
//!
//! [`Extender`] is the service (no HTTP in it): `simulate` calls it in process, [`http`]
//! mounts it on axum. Every answer is in the protocol's own shape; nothing here panics on
//! input, and a problem with a request becomes the protocol's `Error`, never an HTTP error.
//!
//! Speed choice: when a pod's seat is among the candidates, the answer names only the passing
//! node(s) and leaves the others out of `FailedNodes` (a reason per node would cost far more
//! than the whole request, and the scheduler binds the pod at once). When nothing passes,
//! every candidate is listed with its reason, so `kubectl describe pod` shows the full
//! `0/N nodes are available: ...` tally.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use k8s_openapi::List;
use k8s_openapi::api::core::v1::{Node, Pod};

pub mod http;
pub mod wire;

pub use wire::{
    ExtenderArgs, ExtenderArgsRef, ExtenderBindingArgs, ExtenderBindingResult,
    ExtenderFilterResult, HostPriority,
};

use crate::plans::{FilterVerdict, PlanBook, PlanStats, Rejection};

/// The extender service: a shared [`PlanBook`] behind a lock (decisions are serialised, as
/// kube-scheduler's cycle is).
#[derive(Clone)]
pub struct Extender {
    book: Arc<Mutex<PlanBook>>,
}

impl Extender {
    /// Serves decisions from `book`.
    pub fn new(book: PlanBook) -> Self {
        Self {
            book: Arc::new(Mutex::new(book)),
        }
    }

    /// `POST /scheduler/filter`: the seat's node(s) for a pod of a group, every node with room
    /// nobody holds for a pod outside any group.
    pub fn filter(&self, args: &ExtenderArgs) -> ExtenderFilterResult {
        let names = args
            .node_names
            .as_ref()
            .map(|v| v.iter().map(String::as_str).collect());
        self.filter_candidates(&args.pod, names, args.nodes.as_ref())
    }

    /// `filter` over a request read with borrowed names and a reduced pod (the server's path).
    pub fn filter_ref(&self, args: ExtenderArgsRef<'_>) -> ExtenderFilterResult {
        let pod = args.pod.into_pod();
        let names = args
            .node_names
            .as_ref()
            .map(|v| v.iter().map(|n| n.as_ref()).collect());
        self.filter_candidates(&pod, names, args.nodes.as_ref())
    }

    /// `filter` in whichever mode the request came: names when the scheduler sent names.
    fn filter_candidates(
        &self,
        pod: &Pod,
        names: Option<Vec<&str>>,
        nodes: Option<&List<Node>>,
    ) -> ExtenderFilterResult {
        match (names, nodes) {
            (Some(names), _) => self.filter_cached(pod, &names),
            (None, Some(list)) => self.filter_nodes(pod, list),
            (None, None) => error_result(NO_CANDIDATES),
        }
    }

    /// `filter` in non-cache mode: the passing node objects are echoed back unchanged.
    fn filter_nodes(&self, pod: &Pod, list: &List<Node>) -> ExtenderFilterResult {
        let names = node_names(list);
        match self.decide_filter(pod, &names) {
            Ok((mut result, pass)) => {
                result.nodes = Some(List {
                    items: pass.iter().map(|&i| list.items[i].clone()).collect(),
                    metadata: list.metadata.clone(),
                });
                result
            }
            Err(e) => error_result(&e),
        }
    }

    /// `filter` in node-cache mode over borrowed names: what `simulate` calls in process.
    pub fn filter_cached(&self, pod: &Pod, names: &[&str]) -> ExtenderFilterResult {
        match self.decide_filter(pod, names) {
            Ok((mut result, pass)) => {
                result.node_names = Some(pass.iter().map(|&i| names[i].to_string()).collect());
                result
            }
            Err(e) => error_result(&e),
        }
    }

    /// The failed maps and the passing candidates, or the request's problem.
    fn decide_filter(
        &self,
        pod: &Pod,
        names: &[&str],
    ) -> Result<(ExtenderFilterResult, Vec<usize>), String> {
        let verdict = self.lock().filter(pod, names, Instant::now());
        let mut result = ExtenderFilterResult::default();
        let pass = match verdict {
            FilterVerdict::Invalid(e) => return Err(e),
            FilterVerdict::Only { pass, rejected } => {
                if pass.is_empty() {
                    for name in names {
                        record(&mut result, name, &rejected);
                    }
                }
                pass
            }
            FilterVerdict::Except { rejected } => {
                let mut turned_down = vec![false; names.len()];
                for (i, why) in &rejected {
                    turned_down[*i] = true;
                    record(&mut result, names[*i], why);
                }
                (0..names.len()).filter(|&i| !turned_down[i]).collect()
            }
        };
        Ok((result, pass))
    }

    /// `POST /scheduler/prioritize`: a bare array listing only favoured hosts (the seat's
    /// node(s)) at the top score; hosts left out score 0.
    pub fn prioritize(&self, args: &ExtenderArgs) -> Vec<HostPriority> {
        let names = args
            .node_names
            .as_ref()
            .map(|v| v.iter().map(String::as_str).collect());
        self.prioritize_candidates(&args.pod, names, args.nodes.as_ref())
    }

    /// `prioritize` over a request read with borrowed names and a reduced pod.
    pub fn prioritize_ref(&self, args: ExtenderArgsRef<'_>) -> Vec<HostPriority> {
        let pod = args.pod.into_pod();
        let names = args
            .node_names
            .as_ref()
            .map(|v| v.iter().map(|n| n.as_ref()).collect());
        self.prioritize_candidates(&pod, names, args.nodes.as_ref())
    }

    fn prioritize_candidates(
        &self,
        pod: &Pod,
        names: Option<Vec<&str>>,
        nodes: Option<&List<Node>>,
    ) -> Vec<HostPriority> {
        match (names, nodes) {
            (Some(names), _) => self.host_priorities(pod, &names),
            (None, Some(list)) => self.host_priorities(pod, &node_names(list)),
            (None, None) => Vec::new(),
        }
    }

    /// `prioritize` in node-cache mode over borrowed names: what `simulate` calls in process.
    pub fn host_priorities(&self, pod: &Pod, names: &[&str]) -> Vec<HostPriority> {
        self.prioritize_names(pod, names)
            .into_iter()
            .map(|(i, score)| HostPriority {
                host: names[i].to_string(),
                score,
            })
            .collect()
    }

    /// The scores behind `prioritize`, as (candidate index, 0..=10), favoured hosts only.
    pub fn prioritize_names(&self, pod: &Pod, candidates: &[&str]) -> Vec<(usize, i64)> {
        self.lock()
            .favoured(pod, candidates)
            .into_iter()
            .map(|i| (i, wire::MAX_EXTENDER_PRIORITY))
            .collect()
    }

    /// `POST /scheduler/bind`: makes the seat final and records the pod on its node.
    pub fn bind(&self, args: &ExtenderBindingArgs) -> ExtenderBindingResult {
        let outcome = self.lock().bind(
            &args.pod_namespace,
            &args.pod_name,
            &args.pod_uid,
            &args.node,
            Instant::now(),
        );
        match outcome {
            Ok(()) => ExtenderBindingResult::default(),
            Err(e) => ExtenderBindingResult {
                error: wire::go_format_safe(&e.0),
            },
        }
    }

    /// Counters and gauges for `/metrics`.
    pub fn stats(&self) -> PlanStats {
        self.lock().stats()
    }

    /// Runs `f` on the plan book (for `simulate`, which reads the cluster view it updates).
    pub fn with_book<T>(&self, f: impl FnOnce(&mut PlanBook) -> T) -> T {
        f(&mut self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, PlanBook> {
        // Every book method runs to completion before it returns; a panic inside one (a bug)
        // cannot leave a half-made plan, so a poisoned lock is still safe to use.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Said when a request carries neither candidate list.
const NO_CANDIDATES: &str = "ExtenderArgs has neither NodeNames nor Nodes";

fn node_names(list: &List<Node>) -> Vec<&str> {
    list.items
        .iter()
        .map(|n| n.metadata.name.as_deref().unwrap_or(""))
        .collect()
}

/// Puts a turned-down node in the map its rejection belongs to.
fn record(result: &mut ExtenderFilterResult, name: &str, why: &Rejection) {
    let map: &mut BTreeMap<String, String> = if why.unresolvable {
        &mut result.failed_and_unresolvable_nodes
    } else {
        &mut result.failed_nodes
    };
    map.insert(name.to_string(), why.reason.to_string());
}

fn error_result(message: &str) -> ExtenderFilterResult {
    ExtenderFilterResult {
        error: wire::go_format_safe(message),
        ..Default::default()
    }
}
