//! The conformance cases driven over HTTP the way kube-scheduler drives the extender: every
//! workload of `tests/conformance/{placement,admission,podset-groups,node-replacement,
//! podgroups}` must land exactly where in-process `simulate` puts it.
//!
//! Per case, a real `kube-tas` main server is started in process on `127.0.0.1:0` (the
//! [`kube_tas::server::start`] stack, on a multi-thread runtime of its own) over the case's
//! cluster and gates. [`simulate::run_with`] then schedules every pod through [`HttpExtender`],
//! which speaks the wire protocol over one keep-alive HTTP/1.1 connection (driven from a
//! separate current-thread runtime): `POST /scheduler/filter` and `/prioritize` with
//! `{"Pod": ..., "Nodes": null, "NodeNames": [...]}` (`nodeCacheCapable: true`), and
//! `/scheduler/bind` with `{"PodName", "PodNamespace", "PodUID", "Node"}`.
//!
//! The answer is compared with [`simulate::run`] (the in-process extender) workload by
//! workload: kind, namespace, name, admitted, warnings, and per pod set its name, count, fits,
//! flavor, levels and domains. Messages are compared only for denied workloads: admission runs
//! in process on both paths, while a pod set's failure message may differ (the HTTP client
//! cannot ask the engine to explain a failure). Every mismatch of every case is collected and
//! reported at once.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use common::conformance::{self, CONFORMANCE, Case, PLAN_TTL, case_gates};
use common::{KeepAlive, Reply};
use kube_tas::cluster::Cluster;
use kube_tas::cluster::state::{ClusterState, FlavorTopology};
use kube_tas::extender::{
    Extender, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, HostPriority,
};
use kube_tas::server::{ServeConfig, start};
use kube_tas::simulate::{self, ExtenderCalls};

/// Folders that must exist (CI always has them), then folders run when present.
const REQUIRED_FOLDERS: &[&str] = &[
    "placement",
    "admission",
    "podset-groups",
    "node-replacement",
    "podgroups",
];
const OPTIONAL_FOLDERS: &[&str] = &[];

/// At least this many cases must have run for the test to mean anything.
const MIN_CASES: usize = 40;

// ---------------------------------------------------------------------------------------------
// The HTTP client
// ---------------------------------------------------------------------------------------------

/// [`ExtenderCalls`] over real HTTP/1.1 to a running `kube-tas` server, as kube-scheduler's
/// `HTTPExtender` sends them (node-cache mode).
struct HttpExtender<'rt> {
    /// The client's runtime (never the server's).
    rt: &'rt Runtime,
    /// The keep-alive connection, opened on first use.
    http: KeepAlive,
    /// Flavor trees, built from the cluster as the server builds them.
    flavors: BTreeMap<String, Option<Arc<FlavorTopology>>>,
    /// Transport or protocol failures (not 200, unreadable body): mismatches in themselves.
    failures: Vec<String>,
    /// Requests sent per route.
    requests: BTreeMap<&'static str, usize>,
}

impl<'rt> HttpExtender<'rt> {
    fn new(rt: &'rt Runtime, addr: SocketAddr) -> Self {
        Self {
            rt,
            http: KeepAlive::new(addr),
            flavors: BTreeMap::new(),
            failures: Vec::new(),
            requests: BTreeMap::new(),
        }
    }

    /// POSTs `body` as JSON to `/scheduler/{route}`; 200 and a `T` body, or why not.
    fn post<T: DeserializeOwned>(
        &mut self,
        route: &'static str,
        body: &Value,
    ) -> Result<T, String> {
        *self.requests.entry(route).or_insert(0) += 1;
        let result = self.rt.block_on(self.send(route, body));
        if let Err(e) = &result {
            self.failures.push(format!("POST /scheduler/{route}: {e}"));
        }
        result
    }

    async fn send<T: DeserializeOwned>(
        &mut self,
        route: &'static str,
        body: &Value,
    ) -> Result<T, String> {
        let bytes = serde_json::to_vec(body).map_err(|e| format!("cannot encode: {e}"))?;
        let Reply { status, body, .. } = self
            .http
            .post(&format!("/scheduler/{route}"), "application/json", bytes)
            .await?;
        if status != StatusCode::OK {
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        serde_json::from_slice(&body).map_err(|e| {
            format!(
                "cannot parse the answer ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        })
    }

    /// kube-scheduler's `ExtenderArgs` in node-cache mode.
    fn args(pod: &Pod, names: &[&str]) -> Value {
        json!({ "Pod": pod, "Nodes": null, "NodeNames": names })
    }

    /// Connections opened (1 when keep-alive held for the whole case).
    fn connections(&self) -> usize {
        self.http.connections()
    }

    /// Closes the keep-alive connection and waits for its task, so that the server can drain
    /// at once.
    fn close(&mut self) {
        self.rt.block_on(self.http.close());
    }
}

impl ExtenderCalls for HttpExtender<'_> {
    fn filter(&mut self, pod: &Pod, names: &[&str]) -> Result<ExtenderFilterResult, String> {
        self.post("filter", &Self::args(pod, names))
    }

    fn prioritize(&mut self, pod: &Pod, names: &[&str]) -> Result<Vec<HostPriority>, String> {
        self.post("prioritize", &Self::args(pod, names))
    }

    fn bind(&mut self, args: &ExtenderBindingArgs) -> Result<ExtenderBindingResult, String> {
        let body = json!({
            "PodName": args.pod_name,
            "PodNamespace": args.pod_namespace,
            "PodUID": args.pod_uid,
            "Node": args.node,
        });
        self.post("bind", &body)
    }

    fn explain(&mut self, _pod: &Pod) -> Option<String> {
        None
    }

    fn flavor(&mut self, cluster: &Cluster, name: &str) -> Option<Arc<FlavorTopology>> {
        self.flavors
            .entry(name.to_string())
            .or_insert_with(|| ClusterState::from_cluster(cluster).flavor(name))
            .clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// What one case contributed.
#[derive(Default)]
struct Outcome {
    mismatches: Vec<String>,
    placed_pods: i64,
    requests: BTreeMap<&'static str, usize>,
    connections: usize,
}

/// Runs one case both ways and compares.
fn run_case(case: &Case, server_rt: &Runtime, client_rt: &Runtime) -> Outcome {
    let mut out = Outcome::default();
    let gates = match case_gates(&case.dir) {
        Ok(g) => g,
        Err(e) => {
            out.mismatches.push(e);
            return out;
        }
    };
    let paths = vec![case.dir.join("cluster.yaml")];
    let cluster = match kube_tas::cluster::load_paths(&paths) {
        Ok(c) => c,
        Err(e) => {
            out.mismatches.push(format!("cannot load the cluster: {e}"));
            return out;
        }
    };

    let expected = simulate::run(&cluster, &gates).to_json();

    let config = ServeConfig {
        cluster: paths,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        feature_gates: gates.clone(),
        plan_ttl: PLAN_TTL,
        ..ServeConfig::default()
    };
    let extender = Extender::over_cluster(&cluster, gates.clone(), PLAN_TTL);
    let server = match server_rt.block_on(start(&config, extender)) {
        Ok(s) => s,
        Err(e) => {
            out.mismatches
                .push(format!("the server does not start: {e:#}"));
            return out;
        }
    };
    let mut client = HttpExtender::new(client_rt, server.main_addr());
    let actual = simulate::run_with(&cluster, &gates, &mut client).to_json();
    client.close();
    if let Err(e) = server_rt.block_on(server.shutdown(Duration::ZERO, Duration::from_secs(1))) {
        out.mismatches
            .push(format!("the server does not shut down cleanly: {e:#}"));
    }

    out.mismatches.extend(client.failures.iter().cloned());
    out.requests = std::mem::take(&mut client.requests);
    out.connections = client.connections();
    out.placed_pods = placed_pods(&actual);
    compare(&expected, &actual, &mut out.mismatches);
    out
}

/// The pods placed in a report (the sum of its domain counts).
fn placed_pods(report: &Value) -> i64 {
    workloads(report)
        .iter()
        .flat_map(pod_sets)
        .flat_map(|ps| {
            field(&ps, "domains")
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|d| d.get("count").and_then(Value::as_i64).unwrap_or(0))
        .sum()
}

fn workloads(report: &Value) -> Vec<Value> {
    report
        .get("workloads")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn pod_sets(workload: &Value) -> Vec<Value> {
    workload
        .get("podSets")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A field, `null` when absent (the report leaves empty fields out).
fn field<'v>(v: &'v Value, key: &str) -> &'v Value {
    v.get(key).unwrap_or(&Value::Null)
}

fn workload_label(w: &Value) -> String {
    format!(
        "{} {}/{}",
        field(w, "kind").as_str().unwrap_or("?"),
        field(w, "namespace").as_str().unwrap_or("?"),
        field(w, "name").as_str().unwrap_or("?")
    )
}

/// Appends every difference between the in-process report and the HTTP one.
fn compare(expected: &Value, actual: &Value, mismatches: &mut Vec<String>) {
    let (want, got) = (workloads(expected), workloads(actual));
    if want.len() != got.len() {
        mismatches.push(format!(
            "{} workloads in process, {} over HTTP: want [{}], got [{}]",
            want.len(),
            got.len(),
            want.iter()
                .map(workload_label)
                .collect::<Vec<_>>()
                .join(", "),
            got.iter()
                .map(workload_label)
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    for (w, g) in want.iter().zip(&got) {
        let label = workload_label(w);
        for key in ["kind", "namespace", "name", "admitted", "warnings"] {
            if field(w, key) != field(g, key) {
                mismatches.push(format!(
                    "{label}: {key}: want {}, got {}",
                    field(w, key),
                    field(g, key)
                ));
            }
        }
        let denied = field(w, "admitted") == &Value::Bool(false);
        if denied && field(w, "message") != field(g, "message") {
            mismatches.push(format!(
                "{label}: denial message: want {}, got {}",
                field(w, "message"),
                field(g, "message")
            ));
        }
        let (want_sets, got_sets) = (pod_sets(w), pod_sets(g));
        if want_sets.len() != got_sets.len() {
            mismatches.push(format!(
                "{label}: {} pod sets in process, {} over HTTP",
                want_sets.len(),
                got_sets.len()
            ));
        }
        for (ws, gs) in want_sets.iter().zip(&got_sets) {
            let differences: Vec<String> = ["name", "count", "fits", "flavor", "levels", "domains"]
                .iter()
                .filter(|key| field(ws, key) != field(gs, key))
                .map(|key| format!("{key}: want {}, got {}", field(ws, key), field(gs, key)))
                .collect();
            if differences.is_empty() {
                continue;
            }
            let mut line = format!(
                "{label}: pod set {}: {}",
                field(ws, "name"),
                differences.join("; ")
            );
            for (path, v) in [("in process", ws), ("over HTTP", gs)] {
                if let Some(m) = v.get("message") {
                    let _ = write!(line, " [message {path}: {m}]");
                }
            }
            mismatches.push(line);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

#[test]
fn conformance_cases_place_alike_over_http_and_in_process() {
    let cases = conformance::cases(REQUIRED_FOLDERS, OPTIONAL_FOLDERS);
    let (server_rt, client_rt) = conformance::runtimes();

    let mut report = String::new();
    let mut failed_cases = 0;
    let mut placed_pods = 0;
    let mut requests: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut reconnected = Vec::new();
    for case in &cases {
        let outcome = run_case(case, &server_rt, &client_rt);
        placed_pods += outcome.placed_pods;
        for (route, n) in &outcome.requests {
            *requests.entry(route).or_insert(0) += n;
        }
        if outcome.connections > 1 {
            reconnected.push(format!("{} ({})", case.label, outcome.connections));
        }
        if !outcome.mismatches.is_empty() {
            failed_cases += 1;
            let _ = writeln!(report, "{}:", case.label);
            for m in &outcome.mismatches {
                let _ = writeln!(report, "    {m}");
            }
        }
    }

    assert!(
        report.is_empty(),
        "{failed_cases} of {} conformance cases differ over HTTP from in-process simulate:\n{report}",
        cases.len()
    );
    assert!(
        cases.len() >= MIN_CASES,
        "only {} conformance cases found under {CONFORMANCE}; expected at least {MIN_CASES}",
        cases.len()
    );
    assert!(
        placed_pods > 0,
        "no pod was placed in any of {} cases: the comparison is vacuous",
        cases.len()
    );
    for route in ["filter", "prioritize", "bind"] {
        assert!(
            requests.get(route).copied().unwrap_or(0) > 0,
            "no {route} request went over HTTP ({requests:?})"
        );
    }
    assert!(
        reconnected.is_empty(),
        "the keep-alive connection was not kept for the whole case: {reconnected:?}"
    );
    eprintln!(
        "{} cases alike over HTTP; {placed_pods} pods placed; requests: {requests:?}",
        cases.len()
    );
}
