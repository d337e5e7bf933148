//! The extender's placement decisions over HTTP, with bodies shaped exactly as kube-scheduler
//! sends them (`k8s.io/kube-scheduler/extender/v1`, Go field names, `null` for the unused one
//! of `Nodes` / `NodeNames`, full Pod and Node objects without apiVersion/kind).
//!
//! The cluster: one block `b1` of `racks` racks, two hosts of 4 cpu / 16Gi per rack, labelled
//! `node-group: tas` for the flavor `tas-flavor` (Topology block > rack > host), plus a node
//! `infra-1` outside the flavor. Jobs in namespace `ml` are queued to the LocalQueue
//! `tas-user-queue`, whose ClusterQueue uses `tas-flavor`. The cluster is written as a JSON
//! stream to a scratch dir and loaded like `--cluster`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use common::ScratchDir;
use kube_tas::extender::Extender;

use kube_tas::server::admin::{Readiness, admin_router};
use kube_tas::server::metrics::Metrics;
use kube_tas::server::{main_router, main_router_with};
use kube_tas::topology::FeatureGates;

const NS: &str = "ml";
const RACK: &str = "cloud.provider.com/topology-rack";
const BLOCK: &str = "cloud.provider.com/topology-block";

// ---------------------------------------------------------------------------------------------
// The cluster, as the API server holds it
// ---------------------------------------------------------------------------------------------

/// A Node as `kubectl get node -o json` prints it (apiVersion/kind included).
fn node_object(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": format!("node-uid-{name}"),
            "resourceVersion": "4711",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110",
                "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110",
                "ephemeral-storage": "100Gi"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "ok"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                 "lastTransitionTime": "2026-01-01T00:00:00Z",
                 "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b",
                "kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04", "containerRuntimeVersion":
                "containerd://2.0.0", "kubeletVersion": "v1.34.0", "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64"},
        },
    })
}

/// The TAS nodes (`b1-r<r>-h<h>`) in topology order, then `infra-1`.
fn nodes(racks: usize) -> Vec<Value> {
    let mut out = Vec::new();
    for r in 1..=racks {
        for h in 1..=2 {
            let name = format!("b1-r{r}-h{h}");
            out.push(node_object(
                &name,
                json!({
                    "beta.kubernetes.io/arch": "amd64",
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/hostname": name,
                    BLOCK: "b1",
                    RACK: format!("r{r}"),
                    "node-group": "tas",
                }),
            ));
        }
    }
    out.push(node_object(
        "infra-1",
        json!({"kubernetes.io/hostname": "infra-1", "kubernetes.io/os": "linux",
            "node-group": "infra"}),
    ));
    out
}

/// Topology, flavor, queues and nodes.
fn base_docs(racks: usize) -> Vec<Value> {
    let mut docs = vec![
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK},
                {"nodeLabel": "kubernetes.io/hostname"}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "tas-flavor"},
            "spec": {"topologyName": "default", "nodeLabels": {"node-group": "tas"}}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "tas-cluster-queue"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": "tas-flavor", "resources": [
                    {"name": "cpu", "nominalQuota": "1000"},
                    {"name": "memory", "nominalQuota": "4000Gi"}]}]}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "tas-user-queue", "namespace": NS},
            "spec": {"clusterQueue": "tas-cluster-queue"}}),
    ];
    docs.extend(nodes(racks));
    docs
}

fn job_uid(job: &str) -> String {
    format!("0b5e8c1a-2b7d-4f6e-9a1c-{job}")
}

/// An Indexed Job of `n` pods x `cpu` cpu, required in one domain of `level`, queued to the
/// LocalQueue whose ClusterQueue uses the TAS flavor.
fn job_doc(job: &str, n: usize, cpu: u32, level: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job, "namespace": NS, "uid": job_uid(job),
            "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"}},
        "spec": {
            "parallelism": n, "completions": n, "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": level}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "worker",
                    "image": "registry.example/trainer:1",
                    "resources": {"requests": {"cpu": cpu.to_string(), "memory": "1Gi"}}}]},
            },
        },
    })
}

/// A JobSet of a driver (1 pod of `driver_cpu`) and `workers` pods of `worker_cpu`, both
/// replicated Jobs required in one rack and joined by `podset-group-name`.
fn jobset_doc(name: &str, driver_cpu: u32, workers: usize, worker_cpu: u32) -> Value {
    jobset_replicas_doc(name, driver_cpu, 1, workers, worker_cpu)
}

/// [`jobset_doc`] with `replicas` worker Jobs of `workers` pods each.
fn jobset_replicas_doc(
    name: &str,
    driver_cpu: u32,
    replicas: usize,
    workers: usize,
    worker_cpu: u32,
) -> Value {
    let rj = |rj: &str, replicas: usize, n: usize, cpu: u32| {
        json!({"name": rj, "replicas": replicas, "template": {"spec": {
            "parallelism": n, "completions": n, "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK,
                    "kueue.x-k8s.io/podset-group-name": "gang"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "worker",
                    "image": "registry.example/trainer:1",
                    "resources": {"requests": {"cpu": cpu.to_string(), "memory": "1Gi"}}}]}}}}})
    };
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS, "uid": job_uid(name),
            "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"}},
        "spec": {"replicatedJobs": [rj("driver", 1, 1, driver_cpu),
            rj("workers", replicas, workers, worker_cpu)]},
    })
}

/// Pod `index` of replicated Job `rj` (Job index 0) of JobSet `js`, as the Job controller
/// creates it from the JobSet's Job: the JobSet labels, the Job as controller.
fn jobset_pod(js: &str, rj: &str, index: usize, cpu: u32) -> Value {
    jobset_job_pod(js, rj, 0, index, cpu)
}

/// Pod `index` of Job `job_index` of replicated Job `rj` of JobSet `js`.
fn jobset_job_pod(js: &str, rj: &str, job_index: usize, index: usize, cpu: u32) -> Value {
    let job = format!("{js}-{rj}-{job_index}");
    let mut pod = job_pod(&job, index, cpu);
    let labels = pod["metadata"]["labels"].as_object_mut().unwrap();
    labels.insert("jobset.sigs.k8s.io/jobset-name".into(), json!(js));
    labels.insert("jobset.sigs.k8s.io/replicatedjob-name".into(), json!(rj));
    labels.insert(
        "jobset.sigs.k8s.io/job-index".into(),
        json!(job_index.to_string()),
    );
    pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-group-name"] = json!("gang");
    pod
}

/// Pod `index` of `job` as the API server holds it once kube-tas bound it: `spec.nodeName`,
/// phase Running.
fn bound_pod_doc(job: &str, index: usize, cpu: u32, node: &str) -> Value {
    let mut p = job_pod(job, index, cpu);
    p["apiVersion"] = json!("v1");
    p["kind"] = json!("Pod");
    p["spec"]["nodeName"] = json!(node);
    p["status"] = json!({"phase": "Running", "qosClass": "Burstable",
        "hostIP": "10.0.0.1", "podIP": "10.244.1.7"});
    p
}

/// An ordinary Running pod of `cpu` cpu on `node`, in no group.
fn filler_doc(name: &str, cpu: u32, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]},
        "status": {"phase": "Running", "qosClass": "Burstable"}})
}

/// Loads `docs` (written as a JSON stream) into an extender whose plans expire after `ttl`.
fn extender_with_ttl(docs: &[Value], ttl: Duration) -> Extender {
    let dir = ScratchDir::new("extender-http");
    let text: String = docs
        .iter()
        .map(|d| serde_json::to_string_pretty(d).unwrap() + "\n")
        .collect();
    std::fs::write(dir.path().join("cluster.json"), text).unwrap();
    let cluster = kube_tas::cluster::load_paths(&[dir.path()]).expect("test cluster loads");
    assert!(cluster.warnings.is_empty(), "{:?}", cluster.warnings);
    Extender::over_cluster(&cluster, FeatureGates::default(), ttl)
}

fn extender(docs: &[Value]) -> Extender {
    extender_with_ttl(docs, Duration::from_secs(60))
}

// ---------------------------------------------------------------------------------------------
// Pods and bodies as kube-scheduler sends them
// ---------------------------------------------------------------------------------------------

fn pod_name(job: &str, index: usize) -> String {
    format!("{job}-{index}-x7k2p")
}

fn pod_uid(job: &str, index: usize) -> String {
    format!("6b0c2f4e-{index:04}-4222-8333-{job}")
}

/// Pending pod `index` of Indexed Job `job`, as the Job controller created it and the
/// scheduler's cache holds it (no apiVersion/kind).
fn job_pod(job: &str, index: usize, cpu: u32) -> Value {
    json!({
        "metadata": {
            "name": pod_name(job, index),
            "generateName": format!("{job}-{index}-"),
            "namespace": NS,
            "uid": pod_uid(job, index),
            "resourceVersion": "90210",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "batch.kubernetes.io/controller-uid": job_uid(job),
                "batch.kubernetes.io/job-completion-index": index.to_string(),
                "batch.kubernetes.io/job-name": job,
                "controller-uid": job_uid(job),
                "job-name": job,
            },
            "annotations": {
                "batch.kubernetes.io/job-completion-index": index.to_string(),
                "kueue.x-k8s.io/podset-required-topology": RACK,
            },
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job_uid(job),
                "controller": true, "blockOwnerDeletion": true,
            }],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
        },
        "spec": {
            "volumes": [{"name": "kube-api-access-9xk2q", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}]}}],
                "defaultMode": 420}}],
            "containers": [{
                "name": "worker",
                "image": "registry.example/trainer:1",
                "resources": {"requests": {"cpu": cpu.to_string(), "memory": "1Gi"}},
                "volumeMounts": [{"name": "kube-api-access-9xk2q", "readOnly": true,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"node-group": "tas"},
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "hostname": format!("{job}-{index}"),
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    })
}

/// A pod no Job owns and no queue names.
fn lone_pod(name: &str, cpu: u32) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "labels": {"app": "web"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
            "resources": {"requests": {"cpu": cpu.to_string(), "memory": "128Mi"}}}],
            "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    })
}

/// The node objects as the scheduler sends them (`nodeCacheCapable: false`): no
/// apiVersion/kind.
fn wire_nodes(racks: usize) -> Vec<Value> {
    nodes(racks)
        .into_iter()
        .map(|mut n| {
            let m = n.as_object_mut().unwrap();
            m.remove("apiVersion");
            m.remove("kind");
            n
        })
        .collect()
}

fn names(racks: usize) -> Vec<String> {
    nodes(racks)
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn cached_args(pod: &Value, node_names: &[String]) -> Value {
    json!({"Pod": pod, "Nodes": null, "NodeNames": node_names})
}

fn full_args(pod: &Value, items: &[Value]) -> Value {
    json!({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": null})
}

fn binding(namespace: &str, name: &str, uid: &str, node: &str) -> Value {
    json!({"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node})
}

// ---------------------------------------------------------------------------------------------
// Calling the router and reading its answers
// ---------------------------------------------------------------------------------------------

async fn post(router: &Router, path: &str, body: &Value) -> Value {
    let (status, bytes) = post_status(router, path, body).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{path}: {}",
        String::from_utf8_lossy(&bytes)
    );
    serde_json::from_slice(&bytes).expect("the extender answers JSON")
}

/// `POST path`: the status and the body, whatever the status.
async fn post_status(router: &Router, path: &str, body: &Value) -> (StatusCode, Bytes) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const FILTER_KEYS: [&str; 5] = [
    "Nodes",
    "NodeNames",
    "FailedNodes",
    "FailedAndUnresolvableNodes",
    "Error",
];

/// Filter in cache mode: checks the shape (`Nodes` null, `NodeNames` a list of input names,
/// empty `Error`) and returns the answer.
async fn filter_cached(router: &Router, pod: &Value, node_names: &[String]) -> Value {
    let v = post(router, "/scheduler/filter", &cached_args(pod, node_names)).await;
    assert_eq!(keys(&v), set(&FILTER_KEYS), "{v}");
    assert!(
        v["Nodes"].is_null(),
        "cache mode answers NodeNames only: {v}"
    );
    assert_eq!(v["Error"], "", "{v}");
    let passed = v["NodeNames"].as_array().expect("NodeNames is a list");
    for n in passed {
        assert!(node_names.iter().any(|c| c == n), "{n} was not a candidate");
    }
    v
}

/// Filter in non-cache mode: checks the shape (`NodeNames` null, `Nodes` a NodeList of input
/// objects, echoed unchanged) and returns the answer.
async fn filter_full(router: &Router, pod: &Value, items: &[Value]) -> Value {
    let v = post(router, "/scheduler/filter", &full_args(pod, items)).await;
    assert_eq!(keys(&v), set(&FILTER_KEYS), "{v}");
    assert!(
        v["NodeNames"].is_null(),
        "non-cache mode answers Nodes: {v}"
    );
    assert_eq!(v["Error"], "", "{v}");
    for n in v["Nodes"]["items"]
        .as_array()
        .expect("Nodes.items is a list")
    {
        let name = &n["metadata"]["name"];
        let input = items
            .iter()
            .find(|i| i["metadata"]["name"] == *name)
            .unwrap_or_else(|| panic!("{name} was not a candidate"));
        for part in ["metadata", "spec", "status"] {
            assert_eq!(n[part], input[part], "{name}: {part} not echoed unchanged");
        }
    }
    v
}

fn passed_names(v: &Value) -> Vec<String> {
    let list = if v["NodeNames"].is_null() {
        v["Nodes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].clone())
            .collect()
    } else {
        v["NodeNames"].as_array().unwrap().clone()
    };
    list.iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

/// The node(s) in `FailedNodes` and `FailedAndUnresolvableNodes` with their reasons, checking
/// each reason reads `node(s) ...` and carries no `%`.
fn failed(v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for map in ["FailedNodes", "FailedAndUnresolvableNodes"] {
        for (node, why) in v[map].as_object().expect("a map") {
            let why = why.as_str().unwrap();
            assert!(why.starts_with("node(s) "), "{map}[{node}] = {why}");
            assert!(!why.contains('%'), "{why}");
            out.insert(node.clone(), why.to_string());
        }
    }
    out
}

/// The single node a gang pod passes (its seat).
fn the_one(v: &Value) -> String {
    let passed = passed_names(v);
    assert_eq!(passed.len(), 1, "a seat is one host: {v}");
    passed[0].clone()
}

/// Prioritize in cache mode: a bare array of in-range scores for input hosts.
async fn prioritize_cached(
    router: &Router,
    pod: &Value,
    node_names: &[String],
) -> Vec<(String, i64)> {
    let v = post(
        router,
        "/scheduler/prioritize",
        &cached_args(pod, node_names),
    )
    .await;
    scores(&v, node_names)
}

fn scores(v: &Value, node_names: &[String]) -> Vec<(String, i64)> {
    let list = v.as_array().expect("prioritize answers a bare array");
    list.iter()
        .map(|h| {
            assert_eq!(keys(h), set(&["Host", "Score"]), "{h}");
            let host = h["Host"].as_str().unwrap().to_string();
            let score = h["Score"].as_i64().unwrap();
            assert!((0..=10).contains(&score), "{h}");
            assert!(node_names.contains(&host), "{host} was not a candidate");
            (host, score)
        })
        .collect()
}

/// The host the scheduler would pick on the extender's scores alone: the single best one.
fn best(scores: &[(String, i64)]) -> String {
    let top = scores
        .iter()
        .map(|(_, s)| *s)
        .max()
        .expect("some host scored");
    let at_top: Vec<&String> = scores
        .iter()
        .filter(|(_, s)| *s == top)
        .map(|(h, _)| h)
        .collect();
    assert_eq!(at_top.len(), 1, "one host must stand out: {scores:?}");
    assert!(top > 0, "{scores:?}");
    at_top[0].clone()
}

async fn bind(router: &Router, namespace: &str, name: &str, uid: &str, node: &str) -> String {
    let v = post(
        router,
        "/scheduler/bind",
        &binding(namespace, name, uid, node),
    )
    .await;
    assert_eq!(keys(&v), set(&["Error"]), "{v}");
    let e = v["Error"].as_str().expect("Error is a string").to_string();
    assert!(!e.contains('%'), "{e}");
    e
}

/// One scheduling cycle of a gang pod in cache mode: filter, prioritize, bind on the seat.
async fn schedule(
    router: &Router,
    job: &str,
    index: usize,
    cpu: u32,
    candidates: &[String],
) -> String {
    let pod = job_pod(job, index, cpu);
    let seat = the_one(&filter_cached(router, &pod, candidates).await);
    let scored = prioritize_cached(router, &pod, candidates).await;
    assert_eq!(best(&scored), seat);
    let e = bind(
        router,
        NS,
        &pod_name(job, index),
        &pod_uid(job, index),
        &seat,
    )
    .await;
    assert_eq!(e, "", "binding {job}-{index} on {seat}");
    seat
}

fn rack(node: &str) -> &str {
    // b1-r2-h1 -> r2
    node.split('-')
        .nth(1)
        .unwrap_or_else(|| panic!("{node} has no rack"))
}

fn rack_nodes(racks: usize, r: &str) -> Vec<String> {
    names(racks)
        .into_iter()
        .filter(|n| n.starts_with("b1-") && rack(n) == r)
        .collect()
}

/// Every node's bound usage is within its allocatable.
fn assert_nothing_overbooked(extender: &Extender) {
    let state = extender.state().read();
    {
        for (_, n) in state.nodes() {
            let used = state.node_usage(&n.name).unwrap_or_default();
            for (resource, amount) in &used {
                let cap = n.allocatable.get(resource).copied().unwrap_or(0);
                assert!(*amount <= cap, "{}: {resource} {amount} > {cap}", n.name);
            }
        }
    }
}

fn cpu_used(extender: &Extender, node: &str) -> i64 {
    extender
        .state()
        .read()
        .node_usage(node)
        .and_then(|u| u.get("cpu").copied())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_whole_gang_is_filtered_prioritized_and_bound_in_one_rack() {
    let mut docs = base_docs(3);
    docs.push(job_doc("train", 4, 2, RACK));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(3);
    let mut seats = Vec::new();
    for i in 0..4 {
        seats.push(schedule(&router, "train", i, 2, &candidates).await);
    }
    let r = rack(&seats[0]);
    assert!(seats.iter().all(|s| rack(s) == r), "{seats:?}");
    // 4 pods x 2 cpu = 8 cpu: both hosts of the rack, two pods each.
    assert_eq!(seats.iter().collect::<BTreeSet<_>>().len(), 2, "{seats:?}");
    for node in rack_nodes(3, r) {
        assert_eq!(cpu_used(&extender, &node), 4000, "{node}");
    }
    let s = extender.stats();
    assert_eq!(
        (s.plans_made, s.pods_bound, s.seats_held, s.plans_active),
        (1, 4, 0, 0),
        "{s:?}"
    );
    assert_nothing_overbooked(&extender);
}

#[tokio::test]
async fn repeated_filter_calls_give_the_same_node() {
    let mut docs = base_docs(3);
    docs.push(job_doc("train", 4, 2, RACK));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(3);
    let pod = job_pod("train", 1, 2);
    let seat = the_one(&filter_cached(&router, &pod, &candidates).await);
    // Filter calls are simulations: they repeat, other pods come in between, the candidate
    // list comes in another order or shorter.
    the_one(&filter_cached(&router, &job_pod("train", 3, 2), &candidates).await);
    let mut reversed = candidates.clone();
    reversed.reverse();
    for list in [&candidates, &reversed] {
        assert_eq!(the_one(&filter_cached(&router, &pod, list).await), seat);
    }
    let short: Vec<String> = vec![seat.clone(), "infra-1".into()];
    assert_eq!(the_one(&filter_cached(&router, &pod, &short).await), seat);
    let s = extender.stats();
    assert_eq!((s.plans_made, s.seats_held), (1, 4), "{s:?}");

    // A candidate list without the seat: nothing passes, and one summary entry (under the
    // first candidate) says the seat was not among them and how many it stands for.
    let without: Vec<String> = candidates.iter().filter(|n| **n != seat).cloned().collect();
    assert!(
        without.len() > 1,
        "the summary must stand for several candidates"
    );
    let v = filter_cached(&router, &pod, &without).await;
    assert_eq!(v["NodeNames"], json!([]));
    let why = failed(&v);
    assert_eq!(
        why.keys().cloned().collect::<Vec<_>>(),
        vec![without[0].clone()]
    );
    let reason = &why[&without[0]];
    assert!(reason.contains(&seat), "{reason}");
    assert!(reason.contains("candidates"), "{reason}");
    assert!(
        reason.contains(&format!(
            "({} candidate node(s) turned down alike)",
            without.len()
        )),
        "{reason}"
    );
    // ... and the seat is still the same afterwards.
    assert_eq!(
        the_one(&filter_cached(&router, &pod, &candidates).await),
        seat
    );
}

#[tokio::test]
async fn completion_indices_take_neighbouring_seats() {
    let mut docs = base_docs(2);
    docs.push(job_doc("train", 8, 1, RACK));
    let router = main_router(extender(&docs));
    let candidates = names(2);
    // Arrival order is not index order.
    let mut by_index = vec![String::new(); 8];
    for i in [5, 0, 7, 2, 1, 6, 3, 4] {
        by_index[i] = the_one(&filter_cached(&router, &job_pod("train", i, 1), &candidates).await);
    }
    let r = rack(&by_index[0]);
    assert!(by_index.iter().all(|n| rack(n) == r), "{by_index:?}");
    assert!(
        by_index[..4].iter().all(|n| n.ends_with("-h1")),
        "{by_index:?}"
    );
    assert!(
        by_index[4..].iter().all(|n| n.ends_with("-h2")),
        "{by_index:?}"
    );
}

#[tokio::test]
async fn a_second_gang_cannot_take_the_first_gangs_seats() {
    let mut docs = base_docs(2);
    for job in ["gang-a", "gang-b", "gang-c"] {
        docs.push(job_doc(job, 4, 2, RACK));
    }
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(2);
    // Gang a: planned (one pod filtered), not bound.
    let a0 = the_one(&filter_cached(&router, &job_pod("gang-a", 0, 2), &candidates).await);
    let mut b_seats = Vec::new();
    for i in 0..4 {
        b_seats.push(schedule(&router, "gang-b", i, 2, &candidates).await);
    }
    assert!(
        b_seats.iter().all(|n| rack(n) != rack(&a0)),
        "{a0} vs {b_seats:?}"
    );
    for i in 1..4 {
        let n = the_one(&filter_cached(&router, &job_pod("gang-a", i, 2), &candidates).await);
        assert_eq!(rack(&n), rack(&a0));
        assert!(!b_seats.contains(&n));
    }

    // Gang c fits on an empty cluster but not now: nothing passes, every candidate is in
    // FailedNodes (preemption could help) with a reason naming the group; Error stays empty.
    let v = filter_cached(&router, &job_pod("gang-c", 0, 2), &candidates).await;
    assert_eq!(v["NodeNames"], json!([]), "{v}");
    let why = failed(&v);
    assert_eq!(why.len(), candidates.len(), "{v}");
    assert_eq!(
        v["FailedNodes"].as_object().unwrap().len(),
        candidates.len(),
        "{v}"
    );
    for reason in why.values() {
        assert!(reason.contains("Job ml/gang-c"), "{reason}");
        // Gang b is bound; only gang a's seats, not bound yet, are what keeps gang c out.
        assert!(
            reason.ends_with(
                "; 4 more would fit on capacity held by 1 plan (Job ml/gang-a) for pods not \
                 bound yet"
            ),
            "{reason}"
        );
    }
    let s = extender.stats();
    assert_eq!((s.plans_made, s.groups_not_fit), (2, 1), "{s:?}");
}

#[tokio::test]
async fn a_gang_that_can_never_fit_is_refused_on_every_node_in_both_modes() {
    // 5 pods x 2 cpu in one rack of 8 cpu: never.
    let mut docs = base_docs(2);
    docs.push(job_doc("huge", 5, 2, RACK));
    let router = main_router(extender(&docs));
    let candidates = names(2);
    let v = filter_cached(&router, &job_pod("huge", 0, 2), &candidates).await;
    assert_eq!(v["NodeNames"], json!([]), "{v}");
    assert_eq!(v["FailedNodes"], json!({}), "{v}");
    let why = failed(&v);
    assert_eq!(
        why.keys().cloned().collect::<BTreeSet<_>>(),
        candidates.iter().cloned().collect::<BTreeSet<_>>()
    );
    assert!(why.values().all(|r| r.contains("Job ml/huge")), "{why:?}");

    let items = wire_nodes(2);
    let v = filter_full(&router, &job_pod("huge", 1, 2), &items).await;
    assert_eq!(v["Nodes"]["items"], json!([]), "{v}");
    assert_eq!(
        v["FailedAndUnresolvableNodes"].as_object().unwrap().len(),
        items.len(),
        "{v}"
    );
    failed(&v);
}

#[tokio::test]
async fn a_lone_pod_stays_off_held_capacity() {
    let mut docs = base_docs(3);
    docs.push(job_doc("gang-a", 4, 2, RACK));
    let router = main_router(extender(&docs));
    let candidates = names(3);
    let a0 = the_one(&filter_cached(&router, &job_pod("gang-a", 0, 2), &candidates).await);
    let held = rack_nodes(3, rack(&a0));

    let web = lone_pod("web-0", 1);
    let v = filter_cached(&router, &web, &candidates).await;
    let passed = passed_names(&v);
    let expected: Vec<String> = candidates
        .iter()
        .filter(|n| !held.contains(n))
        .cloned()
        .collect();
    assert_eq!(passed, expected, "{v}");
    assert_eq!(failed(&v).keys().cloned().collect::<Vec<_>>(), held, "{v}");
    for reason in failed(&v).values() {
        assert_eq!(
            reason,
            "node(s) have their free capacity held by 1 plan (Job ml/gang-a) for pods not \
             bound yet"
        );
    }

    // Same answer from the node objects.
    let v = filter_full(&router, &web, &wire_nodes(3)).await;
    assert_eq!(passed_names(&v), expected, "{v}");
    assert_eq!(failed(&v).keys().cloned().collect::<Vec<_>>(), held, "{v}");

    // It binds where it was let in.
    assert_eq!(
        bind(&router, "default", "web-0", "uid-web-0", &expected[0]).await,
        ""
    );
}

#[tokio::test]
async fn a_plan_expires_when_its_pods_never_come() {
    // One rack: gang a's plan holds all of it until it expires.
    let mut docs = base_docs(1);
    docs.push(job_doc("gang-a", 4, 2, RACK));
    docs.push(job_doc("gang-b", 4, 2, RACK));
    let ttl = Duration::from_millis(500);
    let extender = extender_with_ttl(&docs, ttl);
    let metrics = Metrics::new(extender.clone());
    let router = main_router_with(extender.clone(), &metrics, 1 << 20);
    let candidates = names(1);

    let a0 = the_one(&filter_cached(&router, &job_pod("gang-a", 0, 2), &candidates).await);
    let v = filter_cached(&router, &job_pod("gang-b", 0, 2), &candidates).await;
    assert_eq!(
        v["NodeNames"],
        json!([]),
        "gang b must wait while gang a holds the rack: {v}"
    );

    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    // The next filter call sweeps gang a's plan away; gang b now fits in the same rack.
    let b0 = the_one(&filter_cached(&router, &job_pod("gang-b", 0, 2), &candidates).await);
    assert_eq!(rack(&b0), rack(&a0));
    let s = extender.stats();
    assert_eq!(
        (s.plans_expired, s.plans_active, s.seats_held),
        (1, 1, 4),
        "{s:?}"
    );
    for i in 1..4 {
        the_one(&filter_cached(&router, &job_pod("gang-b", i, 2), &candidates).await);
    }

    let admin = admin_router(Readiness::new(), metrics);
    let request = Request::builder()
        .uri("/metrics")
        .body(Body::empty())
        .unwrap();
    let response = admin.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(
        text.lines().any(|l| l == "kube_tas_plans_expired_total 1"),
        "{text}"
    );
}

#[tokio::test]
async fn non_cache_mode_gets_node_objects_back() {
    let mut docs = base_docs(2);
    docs.push(job_doc("train", 4, 2, RACK));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let items = wire_nodes(2);
    let all = names(2);
    let mut seats = Vec::new();
    for i in 0..4 {
        let pod = job_pod("train", i, 2);
        let v = filter_full(&router, &pod, &items).await;
        assert_eq!(v["Nodes"]["items"].as_array().unwrap().len(), 1, "{v}");
        let seat = the_one(&v);
        // Prioritize takes the same body shape.
        let p = post(&router, "/scheduler/prioritize", &full_args(&pod, &items)).await;
        assert_eq!(best(&scores(&p, &all)), seat);
        assert_eq!(
            bind(
                &router,
                NS,
                &pod_name("train", i),
                &pod_uid("train", i),
                &seat
            )
            .await,
            ""
        );
        seats.push(seat);
    }
    assert!(
        seats.iter().all(|s| rack(s) == rack(&seats[0])),
        "{seats:?}"
    );
    assert_eq!(extender.stats().pods_bound, 4);
    assert_nothing_overbooked(&extender);
}

#[tokio::test]
async fn bind_errors_are_answered_in_protocol_form() {
    let mut docs = base_docs(2);
    docs.push(job_doc("train", 4, 2, RACK));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(2);
    let seat = the_one(&filter_cached(&router, &job_pod("train", 0, 2), &candidates).await);
    let (name, uid) = (pod_name("train", 0), pod_uid("train", 0));

    let e = bind(&router, NS, &name, &uid, "no-such-node").await;
    assert!(e.contains("no-such-node"), "{e}");
    let e = bind(&router, NS, "stranger-0", "uid-stranger", &seat).await;
    assert!(e.contains("stranger-0"), "{e}");
    let elsewhere = candidates
        .iter()
        .find(|n| n.starts_with("b1-") && **n != seat)
        .unwrap();
    let e = bind(&router, NS, &name, &uid, elsewhere).await;
    assert!(e.contains(&seat), "the error names the seat: {e}");
    assert_eq!(extender.stats().pods_bound, 0);
    assert_eq!(cpu_used(&extender, elsewhere), 0);

    // The seat itself binds, and binding again there is a no-op.
    assert_eq!(bind(&router, NS, &name, &uid, &seat).await, "");
    assert_eq!(bind(&router, NS, &name, &uid, &seat).await, "");
    assert_eq!(extender.stats().pods_bound, 1);
    assert_eq!(cpu_used(&extender, &seat), 2000);
}

#[tokio::test]
async fn after_a_restart_the_rest_of_the_gang_joins_its_rack() {
    // Before: a kube-tas binds half of Job `resume` (4 pods x 1 cpu, rack required).
    let mut docs = base_docs(3);
    docs.push(job_doc("resume", 4, 1, RACK));
    let candidates = names(3);
    let first = main_router(extender(&docs));
    let mut bound = Vec::new();
    for i in 0..2 {
        bound.push(schedule(&first, "resume", i, 1, &candidates).await);
    }
    let home = rack(&bound[0]).to_string();
    assert!(bound.iter().all(|n| rack(n) == home), "{bound:?}");

    // The restart: the API server holds the Job, its two bound pods and, meanwhile, other
    // pods that make another rack the tightest fit for two pods (2 cpu free).
    let other = if home == "r1" { "r2" } else { "r1" };
    for (i, node) in bound.iter().enumerate() {
        docs.push(bound_pod_doc("resume", i, 1, node));
    }
    docs.push(filler_doc("filler-1", 4, &format!("b1-{other}-h1")));
    docs.push(filler_doc("filler-2", 2, &format!("b1-{other}-h2")));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let mut rest = Vec::new();
    for i in 2..4 {
        rest.push(schedule(&router, "resume", i, 1, &candidates).await);
    }
    assert!(
        rest.iter().all(|n| rack(n) == home),
        "bound {bound:?}, rest {rest:?}"
    );
    let s = extender.stats();
    assert_eq!(
        (s.plans_made, s.pods_bound, s.seats_held),
        (1, 2, 0),
        "only the two missing pods are planned: {s:?}"
    );
    assert_nothing_overbooked(&extender);
    let home_nodes = rack_nodes(3, &home);
    let total: i64 = home_nodes.iter().map(|n| cpu_used(&extender, n)).sum();
    assert_eq!(total, 4000, "{home_nodes:?}");
}

#[tokio::test]
async fn both_pod_sets_of_a_jobset_share_one_rack_and_a_jobset_that_does_not_fit_passes_nothing() {
    // Racks of 2 × 4 cpu. The driver (2 cpu) and 3 workers (2 cpu) fill one rack exactly.
    let mut docs = base_docs(3);
    docs.push(jobset_doc("train", 2, 3, 2));
    // Its driver (1 cpu) would fit anywhere, but with its 9 workers (1 cpu) it needs 10 cpu
    // in one rack: the workload never fits.
    docs.push(jobset_doc("big", 1, 9, 1));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(3);
    let mut pods = vec![("driver", 0)];
    pods.extend((0..3).map(|i| ("workers", i)));
    let mut seats = Vec::new();
    for (rj, i) in pods {
        let pod = jobset_pod("train", rj, i, 2);
        let seat = the_one(&filter_cached(&router, &pod, &candidates).await);
        let name = pod["metadata"]["name"].as_str().unwrap().to_string();
        let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
        assert_eq!(bind(&router, NS, &name, &uid, &seat).await, "", "{name}");
        seats.push(seat);
    }
    let r = rack(&seats[0]);
    assert!(seats.iter().all(|s| rack(s) == r), "{seats:?}");
    for node in rack_nodes(3, r) {
        assert_eq!(cpu_used(&extender, &node), 4000, "{node}");
    }
    // The first JobSet made one plan per PodSet, all bound now.
    let s = extender.stats();
    assert_eq!(
        (s.plans_made, s.pods_bound, s.seats_held),
        (2, 4, 0),
        "{s:?}"
    );

    for (rj, i) in [("driver", 0), ("workers", 0), ("workers", 8)] {
        let v = filter_cached(&router, &jobset_pod("big", rj, i, 1), &candidates).await;
        assert_eq!(passed_names(&v), Vec::<String>::new(), "{rj} {i}: {v}");
        let reasons = failed(&v);
        assert_eq!(reasons.len(), candidates.len(), "{v}");
        assert!(
            reasons
                .values()
                .all(|r| r.contains("JobSet ml/big") && r.contains("allows to fit only")),
            "{reasons:?}"
        );
    }
    let after = extender.stats();
    assert_eq!((after.plans_made, after.seats_held), (2, 0), "{after:?}");
    assert_nothing_overbooked(&extender);
}

#[tokio::test]
async fn jobset_ranks_take_neighbouring_seats_across_its_jobs() {
    // 2 worker Jobs × 2 pods × 2 cpu (and a driver of no cpu) fill a rack of 2 × 4 cpu: the
    // workers' seats in topology order are h1, h1, h2, h2; rank = job index × 2 + completion
    // index, so each Job's pods share a host.
    let mut docs = base_docs(1);
    docs.push(jobset_replicas_doc("ranks", 0, 2, 2, 2));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(1);
    let seat = |job: usize, index: usize| {
        let pod = jobset_job_pod("ranks", "workers", job, index, 2);
        let router = router.clone();
        let candidates = candidates.clone();
        async move { the_one(&filter_cached(&router, &pod, &candidates).await) }
    };
    // Asked in an order unlike the ranks.
    let j1i1 = seat(1, 1).await;
    let j0i0 = seat(0, 0).await;
    let j1i0 = seat(1, 0).await;
    let j0i1 = seat(0, 1).await;
    assert_eq!(j0i0, j0i1, "Job 0 shares a host");
    assert_eq!(j1i0, j1i1, "Job 1 shares a host");
    assert_ne!(j0i0, j1i0, "{j0i0} {j1i0}");
}

#[tokio::test]
async fn after_a_restart_a_jobsets_workers_join_the_rack_of_its_bound_driver() {
    // The driver (1 cpu) runs on b1-r3-h1 already; fillers leave r1 exactly 2 cpu, the
    // tightest fit for the 2 workers (1 cpu) on their own. Placed as one workload, the workers
    // stay in the driver's rack.
    let mut docs = base_docs(3);
    docs.push(jobset_doc("train", 1, 2, 1));
    let mut driver = jobset_pod("train", "driver", 0, 1);
    driver["apiVersion"] = json!("v1");
    driver["kind"] = json!("Pod");
    driver["spec"]["nodeName"] = json!("b1-r3-h1");
    driver["status"] = json!({"phase": "Running"});
    docs.push(driver);
    docs.push(filler_doc("fill-1", 3, "b1-r1-h1"));
    docs.push(filler_doc("fill-2", 3, "b1-r1-h2"));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(3);
    for i in 0..2 {
        let pod = jobset_pod("train", "workers", i, 1);
        let seat = the_one(&filter_cached(&router, &pod, &candidates).await);
        assert_eq!(rack(&seat), "r3", "worker {i} on {seat}");
    }
    assert_eq!(
        extender.stats().plans_made,
        1,
        "only the workers are planned"
    );
}

#[tokio::test]
async fn a_jobset_whose_second_pod_set_does_not_fit_gives_back_what_the_first_held() {
    // Two PodSets placed one after the other (no podset-group-name): `a` (1 pod × 2 cpu, one
    // rack) fits and holds its seat before `b` (10 pods × 1 cpu, one rack of 8 cpu) is tried;
    // `b` does not fit, so `a`'s hold is given back and no pod of either passes.
    let rj = |name: &str, n: usize, cpu: u32| {
        json!({"name": name, "replicas": 1, "template": {"spec": {
            "parallelism": n, "completions": n, "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c",
                    "image": "registry.example/trainer:1",
                    "resources": {"requests": {"cpu": cpu.to_string(), "memory": "1Gi"}}}]}}}}})
    };
    let mut docs = base_docs(3);
    docs.push(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "split", "namespace": NS, "uid": job_uid("split"),
            "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"}},
        "spec": {"replicatedJobs": [rj("a", 1, 2), rj("b", 10, 1)]},
    }));
    let extender = extender(&docs);
    let router = main_router(extender.clone());
    let candidates = names(3);
    let mut a = jobset_pod("split", "a", 0, 2);
    a["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("kueue.x-k8s.io/podset-group-name");
    let v = filter_cached(&router, &a, &candidates).await;
    assert_eq!(passed_names(&v), Vec::<String>::new(), "{v}");
    assert!(
        failed(&v)
            .values()
            .all(|r| r.contains("JobSet ml/split pod set b (10 pods)")),
        "{v}"
    );
    let s = extender.stats();
    assert_eq!(
        (s.plans_active, s.seats_held, s.groups_not_fit),
        (0, 0, 1),
        "{s:?}"
    );
    // Nothing is held anywhere: a lone pod of a whole rack's worth still fits.
    for node in names(3).iter().filter(|n| n.starts_with("b1-")) {
        assert_eq!(
            extender.with_book(|b, state| b.held_on(state, node).cloned()),
            None,
            "{node}"
        );
    }
}

/// Job `train` (2 pods × 1 cpu, one rack) ran in r2: pod 0 still runs on b1-r2-h1, b1-r2-h2
/// went NotReady and pod 1 failed there. A 3-cpu filler runs on `filler_host`.
fn node_died_under_train(filler_host: &str) -> Vec<Value> {
    let mut docs = base_docs(3);
    for d in docs.iter_mut() {
        if d["metadata"]["name"] == "b1-r2-h2" {
            for c in d["status"]["conditions"].as_array_mut().unwrap() {
                if c["type"] == "Ready" {
                    c["status"] = json!("False");
                    c["reason"] = json!("KubeletNotReady");
                }
            }
        }
    }
    docs.push(job_doc("train", 2, 1, RACK));
    docs.push(bound_pod_doc("train", 0, 1, "b1-r2-h1"));
    let mut failed = bound_pod_doc("train", 1, 1, "b1-r2-h2");
    failed["status"]["phase"] = json!("Failed");
    docs.push(failed);
    docs.push(filler_doc("fill", 3, filler_host));
    docs
}

#[tokio::test]
async fn a_pod_recreated_after_its_node_died_gets_a_seat_in_its_jobs_rack() {
    // Job `train` (2 pods × 1 cpu, one rack) runs in r2: pod 0 on b1-r2-h1, pod 1 on b1-r2-h2.
    // b1-r2-h2 goes NotReady and pod 1 fails there; the Job controller recreates it (same
    // completion index, new uid). A filler leaves b1-r1-h1 with 1 cpu, the tightest host for a
    // lone 1-cpu pod; the recreated pod must still join its Job's rack, and pod 0 stays put.
    let docs = node_died_under_train("b1-r1-h1");
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let extender = extender(&docs).with_notices(tx);
    let router = main_router(extender.clone());
    let candidates: Vec<String> = names(3).into_iter().filter(|n| n != "b1-r2-h2").collect();
    let mut recreated = job_pod("train", 1, 1);
    recreated["metadata"]["uid"] = json!("6b0c2f4e-0001-4222-8333-recreated");
    recreated["metadata"]["name"] = json!("train-1-r3c8d");
    let seat = the_one(&filter_cached(&router, &recreated, &candidates).await);
    assert_eq!(seat, "b1-r2-h1", "the replacement joins its Job's rack");
    assert_eq!(
        bind(
            &router,
            NS,
            "train-1-r3c8d",
            "6b0c2f4e-0001-4222-8333-recreated",
            &seat
        )
        .await,
        ""
    );
    // Pod 0 and the replacement share b1-r2-h1; nothing else moved.
    assert_eq!(cpu_used(&extender, "b1-r2-h1"), 2000);
    assert_eq!(cpu_used(&extender, "b1-r1-h1"), 3000);
    assert_nothing_overbooked(&extender);
    let s = extender.stats();
    assert_eq!(
        (s.replacements_placed, s.replacements_failed),
        (1, 0),
        "{s:?}"
    );
    let notices: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert!(
        notices
            .iter()
            .any(|n| n.reason == "TopologyReplacementPlanned"
                && n.note.contains("1 pod(s) of Job ml/train run")),
        "{notices:?}"
    );
}

#[tokio::test]
async fn a_replacement_without_room_in_its_rack_is_reported_and_moves_nothing() {
    // As above, but the rest of r2 is full: the recreated pod has no room in its Job's rack.
    // It passes nowhere (other racks have room, but the Job needs one rack), the reason says
    // so, and nothing of the Job moves.
    let docs = node_died_under_train("b1-r2-h1");
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let extender = extender(&docs).with_notices(tx);
    let router = main_router(extender.clone());
    let candidates: Vec<String> = names(3).into_iter().filter(|n| n != "b1-r2-h2").collect();
    let mut recreated = job_pod("train", 1, 1);
    recreated["metadata"]["uid"] = json!("6b0c2f4e-0001-4222-8333-recreated");
    let v = filter_cached(&router, &recreated, &candidates).await;
    assert_eq!(passed_names(&v), Vec::<String>::new(), "{v}");
    assert!(
        failed(&v)
            .values()
            .all(|r| r.contains("Job ml/train") && r.contains("doesn't allow to fit")),
        "{v}"
    );
    assert_eq!(
        cpu_used(&extender, "b1-r2-h1"),
        4000,
        "pod 0 and the filler stay"
    );
    let s = extender.stats();
    assert_eq!(
        (s.replacements_placed, s.replacements_failed, s.seats_held),
        (0, 1, 0),
        "{s:?}"
    );
    let notices: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert!(
        notices
            .iter()
            .any(|n| n.reason == "TopologyReplacementFailed" && n.warning),
        "{notices:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A pod asked again at the same resourceVersion
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_pod_asked_again_at_its_version_is_answered_from_its_seat_without_its_spec() {
    let extender = extender(&[base_docs(2), vec![job_doc("train", 4, 1, RACK)]].concat());
    let router = main_router(extender.clone());
    let candidates = names(2);
    let pod = job_pod("train", 0, 1);
    let uid = pod_uid("train", 0);
    assert!(!extender.answers_from_seat(&uid, "90210"), "not seen yet");

    let first = filter_cached(&router, &pod, &candidates).await;
    let seat = the_one(&first);
    assert!(extender.answers_from_seat(&uid, "90210"));
    assert!(
        !extender.answers_from_seat(&uid, "90211"),
        "another version"
    );
    // Asked again, the answer is the same, byte for byte once parsed, and so is prioritize.
    assert_eq!(filter_cached(&router, &pod, &candidates).await, first);
    assert_eq!(
        best(&prioritize_cached(&router, &pod, &candidates).await),
        seat
    );

    // At the version the book knows, the spec is not read at all: a body whose spec serde
    // would refuse is still answered from the seat (the same version is the same object) ...
    let mut unread = pod.clone();
    unread["spec"]["containers"] = json!(5);
    assert_eq!(filter_cached(&router, &unread, &candidates).await, first);
    // ... while at another version it is read, and the problem named.
    unread["metadata"]["resourceVersion"] = json!("90211");
    let v = post(
        &router,
        "/scheduler/filter",
        &cached_args(&unread, &candidates),
    )
    .await;
    let e = v["Error"].as_str().unwrap();
    assert!(e.contains("Pod.spec.containers"), "{e}");

    // The pod's next version is read whole and keeps its seat.
    let mut next = pod.clone();
    next["metadata"]["resourceVersion"] = json!("90212");
    assert_eq!(
        the_one(&filter_cached(&router, &next, &candidates).await),
        seat
    );
    assert!(extender.answers_from_seat(&uid, "90212"));

    // Bound, it is answered with its node, from memory as from its body.
    assert_eq!(
        bind(&router, NS, &pod_name("train", 0), &uid, &seat).await,
        ""
    );
    assert_eq!(
        the_one(&filter_cached(&router, &next, &candidates).await),
        seat
    );
    assert!(extender.answers_from_seat(&uid, "90212"));

    // A pod of no group is filtered anew at every call (its answer depends on all the
    // capacity held at the time) ...
    let mut web = lone_pod("web", 1);
    web["metadata"]["resourceVersion"] = json!("5");
    assert!(
        !extender.prioritizes_from_memory("uid-web", "5"),
        "not read yet"
    );
    filter_cached(&router, &web, &candidates).await;
    assert!(!extender.answers_from_seat("uid-web", "5"));
    let mut broken = web.clone();
    broken["spec"]["containers"] = json!(5);
    let v = post(
        &router,
        "/scheduler/filter",
        &cached_args(&broken, &candidates),
    )
    .await;
    let e = v["Error"].as_str().unwrap();
    assert!(e.contains("Pod.spec.containers"), "{e}");
    // ... while `prioritize`, which follows `filter` at the same version, is answered from
    // what `filter` read, the spec left unread.
    assert!(extender.prioritizes_from_memory("uid-web", "5"));
    assert_eq!(
        post(
            &router,
            "/scheduler/prioritize",
            &cached_args(&broken, &candidates)
        )
        .await,
        json!([])
    );
    broken["metadata"]["resourceVersion"] = json!("6");
    assert!(!extender.prioritizes_from_memory("uid-web", "6"));
    let (status, _) = post_status(
        &router,
        "/scheduler/prioritize",
        &cached_args(&broken, &candidates),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "another version is read, and refused"
    );
}
