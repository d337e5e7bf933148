//! Load generator for the scheduler extender of a running `kube-tas serve`, over loopback.
//!
//! It sends `filter` or `prioritize` exactly as kube-scheduler does with `nodeCacheCapable:
//! true` (extender-protocol.md §2.3): `{"Pod": <a realistic ~6 KB Pod>, "Nodes": null,
//! "NodeNames": [...]}`, one request at a time on one keep-alive HTTP/1.1 connection (the
//! scheduler calls the extender for one pod at a time), and prints the round-trip latency
//! distribution (performance.md G1-G4):
//!
//! ```text
//! cargo run --release --example gen-cluster -- --blocks 5 --racks 25 --hosts 40 > /tmp/5k.yaml
//! cargo run --release -- serve --cluster /tmp/5k.yaml --listen 127.0.0.1:8443 &
//! cargo run --release --example loadgen -- --url http://127.0.0.1:8443/scheduler \
//!     --cluster /tmp/5k.yaml --verb filter --names sample --pod-kind gang
//! ```
//!
//! Node names come from `--cluster` (files or folders of manifests, as `serve --cluster` takes
//! them) or, without it, from the naming scheme of `gen-cluster` (`--blocks --racks --hosts
//! --seed`, same defaults). `--pod-kind gang` sends the pods of a Job of the cluster (the first
//! one, or `--job`) as the Job controller creates them, cycling through completion indices;
//! `lone` sends a new pod with no owner and no TAS annotation on every request.
//!
//! Latency is client-side round trip: from just before the request is handed to the client
//! until the whole response body is read. Bodies are built before the clock starts.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube_tas::keys::{JOB_COMPLETION_INDEX, PODSET_PREFERRED_TOPOLOGY};
use kube_tas::synthetic::{NAMESPACE, RACK_LABEL, SyntheticCluster, job_yaml};
use serde_json::{Map, Value, json};

/// kube-scheduler's `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_PERCENT: usize = 5;
/// Per-request limit; a request that takes longer counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Sequential filter/prioritize load against `kube-tas serve`, as kube-scheduler sends it.
#[derive(Debug, Parser)]
#[command(name = "loadgen")]
struct Args {
    /// The extender's urlPrefix (plain HTTP); the verb is appended as `<url>/<verb>`.
    #[arg(long, default_value = "http://127.0.0.1:8443/scheduler")]
    url: String,
    /// The extender verb to call.
    #[arg(long, value_enum, default_value_t = Verb::Filter)]
    verb: Verb,
    /// Node names per request: `sample` (kube-scheduler's default percentageOfNodesToScore:
    /// 500 of 5k nodes, 750 of 15k, 2,500 of 50k), `all`, or a number.
    #[arg(long, default_value = "sample")]
    names: Names,
    /// Measured requests.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Requests sent first and not measured.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// `lone`: a fresh pod with no owner and no TAS annotation each time; `gang`: the pods of a
    /// Job of the cluster, cycling through completion indices.
    #[arg(long, value_enum, default_value_t = PodKind::Lone)]
    pod_kind: PodKind,
    /// Manifest files or folders with the Nodes (and Jobs) `serve` was started with.
    #[arg(long)]
    cluster: Vec<PathBuf>,
    /// The Job whose pods `--pod-kind gang` sends (`NAME` or `NAMESPACE/NAME`); default: the
    /// first Job.
    #[arg(long)]
    job: Option<String>,
    /// Without `--cluster`: blocks of the generated names (as gen-cluster).
    #[arg(long, default_value_t = 4)]
    blocks: u32,
    /// Without `--cluster`: racks per block.
    #[arg(long, default_value_t = 8)]
    racks: u32,
    /// Without `--cluster`: hosts per rack.
    #[arg(long, default_value_t = 16)]
    hosts: u32,
    /// Without `--cluster`: gen-cluster's `--seed`.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Without `--cluster`: pods of gen-cluster's Job `big-job` (its `--job-pods`).
    #[arg(long, default_value_t = 1000)]
    job_pods: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Verb {
    Filter,
    Prioritize,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Filter => "filter",
            Verb::Prioritize => "prioritize",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PodKind {
    Lone,
    Gang,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Names {
    Sample,
    All,
    Count(usize),
}

impl FromStr for Names {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sample" => Ok(Names::Sample),
            "all" => Ok(Names::All),
            n => match n.parse::<usize>() {
                Ok(k) if k > 0 => Ok(Names::Count(k)),
                _ => Err(format!(
                    "expected `sample`, `all` or a positive number, got {n:?}"
                )),
            },
        }
    }
}

impl Names {
    /// How many names each request carries, out of `nodes`.
    fn per_request(self, nodes: usize) -> usize {
        match self {
            Names::All => nodes,
            Names::Count(k) => k.min(nodes),
            Names::Sample => sample_size(nodes),
        }
    }
}

/// kube-scheduler's `numFeasibleNodesToFind` with the adaptive percentage (the default,
/// `percentageOfNodesToScore: 0`): `50 - nodes/125` percent, at least 5 % and 100 nodes.
fn sample_size(nodes: usize) -> usize {
    if nodes < MIN_FEASIBLE_NODES {
        return nodes;
    }
    let percent = 50usize
        .saturating_sub(nodes / 125)
        .max(MIN_FEASIBLE_PERCENT);
    (nodes * percent / 100).max(MIN_FEASIBLE_NODES)
}

/// The parts of a Job that its pods inherit.
#[derive(Debug, Clone)]
struct JobInfo {
    namespace: String,
    name: String,
    uid: String,
    /// `spec.completions` (else `parallelism`, else 1): completion indices are `0..count`.
    count: usize,
    /// `spec.template` (metadata and spec), possibly `null`.
    template: Value,
}

/// What the cluster manifests provide.
#[derive(Debug, Default)]
struct ClusterNames {
    nodes: Vec<String>,
    jobs: Vec<JobInfo>,
}

impl ClusterNames {
    fn add_document(&mut self, doc: Value) {
        if let Some(items) = doc.get("items").and_then(Value::as_array) {
            for item in items {
                self.add_document(item.clone());
            }
            return;
        }
        let kind = doc["kind"].as_str().unwrap_or_default();
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            return;
        }
        match kind {
            "Node" => self.nodes.push(name.to_string()),
            "Job" => self.jobs.push(job_info(&doc)),
            _ => {}
        }
    }
}

fn job_info(job: &Value) -> JobInfo {
    let meta = &job["metadata"];
    let namespace = meta["namespace"].as_str().unwrap_or(NAMESPACE).to_string();
    let name = meta["name"].as_str().unwrap_or_default().to_string();
    let uid = match meta["uid"].as_str() {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        // Manifests written by hand have no uid; the server matches the owner by name.
        _ => fake_uid(&format!("job/{namespace}/{name}")),
    };
    let spec = &job["spec"];
    let count = spec["completions"]
        .as_u64()
        .or_else(|| spec["parallelism"].as_u64())
        .unwrap_or(1)
        .max(1) as usize;
    JobInfo {
        namespace,
        name,
        uid,
        count,
        template: spec["template"].clone(),
    }
}

/// Reads every manifest under `paths`: files as given, folders recursively in path order.
fn load_cluster(paths: &[PathBuf]) -> Result<ClusterNames, String> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path, &mut files)?;
    }
    let mut cluster = ClusterNames::default();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
        let json = file
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if json {
            for doc in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
                cluster.add_document(doc.map_err(|e| format!("{}: {e}", file.display()))?);
            }
        } else {
            for doc in parse_yaml(&text).map_err(|e| format!("{}: {e}", file.display()))? {
                cluster.add_document(doc);
            }
        }
    }
    Ok(cluster)
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(&entry, out)?;
        } else if entry.extension().is_some_and(|e| {
            ["yaml", "yml", "json"]
                .iter()
                .any(|m| e.eq_ignore_ascii_case(m))
        }) {
            out.push(entry);
        }
    }
    Ok(())
}

/// A multi-document YAML stream, with a budget big enough for a 50k-node cluster.
fn parse_yaml(text: &str) -> Result<Vec<Value>, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_documents: 10_000_000,
            max_nodes: 500_000_000,
            max_events: 1_000_000_000,
            max_total_scalar_bytes: 1 << 30,
        },
        with_snippet: false,
    };
    serde_saphyr::from_multiple_with_options(text, options)
}

/// gen-cluster's cluster without reading a file: its node names and its default Job.
fn generated_cluster(args: &Args) -> Result<ClusterNames, String> {
    let shape = SyntheticCluster {
        blocks: args.blocks,
        racks_per_block: args.racks,
        hosts_per_rack: args.hosts,
        seed: args.seed,
        ..SyntheticCluster::default()
    };
    let mut nodes = Vec::new();
    for block in 0..args.blocks {
        for rack in 0..args.racks {
            for host in 0..args.hosts {
                nodes.push(shape.node_name(block, rack, host));
            }
        }
    }
    // gen-cluster's defaults: `--job-name big-job --job-cpu-millis 1000 --level <rack>`.
    let yaml = job_yaml(
        "big-job",
        args.job_pods,
        1000,
        PODSET_PREFERRED_TOPOLOGY,
        RACK_LABEL,
    );
    let mut jobs = Vec::new();
    for doc in parse_yaml(&yaml).map_err(|e| format!("generated Job: {e}"))? {
        jobs.push(job_info(&doc));
    }
    Ok(ClusterNames { nodes, jobs })
}

/// A stable UUID-shaped id for `key` (FNV-1a, twice).
fn fake_uid(key: &str) -> String {
    let fnv = |seed: u64| {
        key.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let a = fnv(0xcbf2_9ce4_8422_2325);
    let b = fnv(a ^ 0x9e37_79b9_7f4a_7c15);
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0xfff,
        b & 0xffff_ffff_ffff
    )
}

/// Five lowercase alphanumerics, like the suffix of a generated name.
fn name_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995;
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// The Pod kube-scheduler would send for request `i`, as its informer holds it (no
/// `apiVersion`/`kind`, managed fields kept, status as the API server set it).
fn pod_json(kind: PodKind, job: Option<&JobInfo>, i: usize) -> Value {
    match (kind, job) {
        (PodKind::Gang, Some(job)) => gang_pod(job, i % job.count),
        _ => lone_pod(i),
    }
}

fn lone_pod(i: usize) -> Value {
    let name = format!("inference-api-{}", name_suffix(i as u64));
    let mut pod = base_pod(&name, &fake_uid(&format!("pod/{name}/{i}")));
    let meta = &mut pod["metadata"];
    meta["labels"] = json!({
        "app.kubernetes.io/name": "inference-api",
        "app.kubernetes.io/instance": "inference-api-prod",
        "app.kubernetes.io/component": "server",
        "app.kubernetes.io/part-of": "ml-platform",
        "app.kubernetes.io/version": "2.14.1",
        "team": "ml-serving",
        "cost-center": "cc-4711"
    });
    meta["annotations"] = json!({
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
        "prometheus.io/path": "/metrics",
        "kubectl.kubernetes.io/default-container": "main",
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"
    });
    pod
}

/// A pod of `job` with completion index `index`, as the Job controller creates it: the
/// template's labels, annotations and spec, plus the controller's labels, the index annotation
/// and label, the controller `ownerReference` and the `JOB_COMPLETION_INDEX` variable.
fn gang_pod(job: &JobInfo, index: usize) -> Value {
    let name = format!("{}-{index}-{}", job.name, name_suffix(index as u64 ^ 0xab));
    let mut pod = base_pod(&name, &fake_uid(&format!("{}/{index}", job.uid)));
    let template = &job.template;
    let mut labels = template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", job.uid.as_str()),
        ("batch.kubernetes.io/job-name", job.name.as_str()),
        ("controller-uid", job.uid.as_str()),
        ("job-name", job.name.as_str()),
        (JOB_COMPLETION_INDEX, &index.to_string()),
    ] {
        labels.insert(k.to_string(), Value::from(v));
    }
    let mut annotations = template["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.insert(JOB_COMPLETION_INDEX.to_string(), index.to_string().into());

    let meta = &mut pod["metadata"];
    meta["namespace"] = job.namespace.clone().into();
    meta["generateName"] = format!("{}-{index}-", job.name).into();
    meta["labels"] = Value::Object(labels);
    meta["annotations"] = Value::Object(annotations);
    meta["ownerReferences"] = json!([{
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job.name,
        "uid": job.uid,
        "controller": true,
        "blockOwnerDeletion": true
    }]);

    // The template decides what the pod requests; the realistic extras stay.
    let tspec = &template["spec"];
    let spec = &mut pod["spec"];
    if let Some(containers) = tspec["containers"].as_array() {
        let base = spec["containers"][0].clone();
        let merged: Vec<Value> = containers
            .iter()
            .map(|c| {
                let mut merged = merge(&base, c);
                // Exactly the template's requests: the plan is made from the Job's template.
                merged["resources"] = match &c["resources"] {
                    Value::Null => json!({}),
                    r => r.clone(),
                };
                if let Some(env) = merged["env"].as_array_mut() {
                    env.push(
                        json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef":
                        {"apiVersion": "v1",
                         "fieldPath": format!("metadata.annotations['{JOB_COMPLETION_INDEX}']")}}}),
                    );
                }
                merged
            })
            .collect();
        spec["containers"] = Value::Array(merged);
    }
    for key in [
        "initContainers",
        "nodeSelector",
        "affinity",
        "priorityClassName",
        "priority",
        "overhead",
        "resources",
        "schedulingGates",
        "subdomain",
    ] {
        if !tspec[key].is_null() {
            spec[key] = tspec[key].clone();
        }
    }
    if let Some(t) = tspec["tolerations"].as_array() {
        let mut all = t.clone();
        all.extend(spec["tolerations"].as_array().cloned().unwrap_or_default());
        spec["tolerations"] = Value::Array(all);
    }
    if let Some(policy) = tspec["restartPolicy"].as_str() {
        spec["restartPolicy"] = policy.into();
    }
    if !tspec["subdomain"].is_null() {
        spec["hostname"] = format!("{}-{index}", job.name).into();
    }
    pod
}

/// `over` laid over `base`: objects merge key by key, anything else replaces.
fn merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            let mut out: Map<String, Value> = b.clone();
            for (k, v) in o {
                let merged = match out.get(k) {
                    Some(old) => merge(old, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => over.clone(),
    }
}

/// The bulk of a realistic pending Pod: what kubectl, the API server's admission plugins and
/// the informer leave on it (about 5.5 KB serialized; ~6 KB with labels and annotations).
fn base_pod(name: &str, uid: &str) -> Value {
    json!({
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": uid,
            "resourceVersion": "48213977",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {".": {}}, "f:labels": {".": {}},
                                   "f:ownerReferences": {".": {}}},
                    "f:spec": {
                        "f:containers": {"k:{\"name\":\"main\"}": {
                            ".": {}, "f:args": {}, "f:command": {}, "f:env": {".": {}},
                            "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                            "f:ports": {".": {}}, "f:readinessProbe": {".": {}},
                            "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
                            "f:securityContext": {".": {}}, "f:terminationMessagePath": {},
                            "f:terminationMessagePolicy": {}, "f:volumeMounts": {".": {}}}},
                        "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                        "f:schedulerName": {}, "f:securityContext": {".": {}},
                        "f:terminationGracePeriodSeconds": {}, "f:tolerations": {},
                        "f:volumes": {".": {}}
                    }
                }
            }, {
                "manager": "kube-scheduler",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-01T00:00:01Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"PodScheduled\"}": {
                    ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:message": {},
                    "f:reason": {}, "f:status": {}, "f:type": {}}}}},
                "subresource": "status"
            }]
        },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "registry.example.com/ml/trainer:2026.01.3@sha256:9f2d4c1e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e",
                "command": ["/usr/bin/python3", "-m", "trainer.main"],
                "args": ["--config=/etc/trainer/config.yaml", "--checkpoint-dir=/scratch/ckpt",
                         "--log-format=json", "--metrics-port=9090"],
                "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
                          {"name": "nccl", "containerPort": 29500, "protocol": "TCP"}],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                    {"name": "OMP_NUM_THREADS", "value": "4"},
                    {"name": "NCCL_DEBUG", "value": "WARN"},
                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                    {"name": "HF_HOME", "value": "/scratch/hf-cache"},
                    {"name": "TRAINER_RUN_ID", "value": "run-2026-01-01-7f3a9c"},
                    {"name": "WANDB_MODE", "value": "offline"},
                    {"name": "MASTER_PORT", "value": "29500"},
                    {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"containerName": "main", "resource": "limits.cpu", "divisor": "0"}}},
                    {"name": "MEMORY_LIMIT", "valueFrom": {"resourceFieldRef": {"containerName": "main", "resource": "limits.memory", "divisor": "0"}}}
                ],
                "resources": {
                    "requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"},
                    "limits": {"memory": "1Gi", "ephemeral-storage": "4Gi"}
                },
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/trainer", "readOnly": true},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                    {"name": "kube-api-access-7xk2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
                ],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
                                   "initialDelaySeconds": 5, "periodSeconds": 10, "timeoutSeconds": 1,
                                   "successThreshold": 1, "failureThreshold": 3},
                "livenessProbe": {"tcpSocket": {"port": "nccl"}, "initialDelaySeconds": 30,
                                  "periodSeconds": 20, "timeoutSeconds": 2, "successThreshold": 1,
                                  "failureThreshold": 6},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                                    "runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": "trainer-config", "defaultMode": 420}},
                {"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
                {"name": "kube-api-access-7xk2p", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}}
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {"fsGroup": 1000},
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        // What a pod looks like after one failed attempt: the scheduler's condition and
        // its managed-fields entry (pods usually reach the extender more than once).
        "status": {
            "phase": "Pending",
            "qosClass": "Burstable",
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": null,
                "lastTransitionTime": "2026-01-01T00:00:01Z",
                "reason": "Unschedulable",
                "message": "0/5000 nodes are available: 1000 node(s) outside the rack chosen for the group, 4000 Insufficient cpu. preemption: 0/5000 nodes are available: 5000 No preemption victims found for incoming pod."
            }]
        }
    })
}

/// The candidate names of request `i`: kube-scheduler starts each search where the previous
/// one stopped (`nextStartNodeIndex`), so consecutive windows of `k` names, wrapping around.
fn names_window(quoted: &[String], k: usize, i: usize, out: &mut String) {
    let n = quoted.len();
    let start = if k >= n { 0 } else { (i * k) % n };
    for j in 0..k.min(n) {
        if j > 0 {
            out.push(',');
        }
        out.push_str(&quoted[(start + j) % n]);
    }
}

/// One request body: `{"Pod":...,"Nodes":null,"NodeNames":[...]}`.
fn request_body(pod: &Value, names: &str) -> Bytes {
    let pod = pod.to_string();
    let mut body = String::with_capacity(pod.len() + names.len() + 40);
    body.push_str("{\"Pod\":");
    body.push_str(&pod);
    body.push_str(",\"Nodes\":null,\"NodeNames\":[");
    body.push_str(names);
    body.push_str("]}");
    Bytes::from(body)
}

/// Why a response does not count as served, or `None` when it is a good answer.
fn check_response(verb: Verb, status: StatusCode, body: &[u8]) -> Option<String> {
    let text = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != StatusCode::OK {
        return Some(format!("HTTP {status}: {}", text()));
    }
    let answer: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some(format!("response is not JSON ({e}): {}", text())),
    };
    match verb {
        Verb::Filter => match answer.get("Error").map(|e| e.as_str()) {
            Some(Some("")) => None,
            Some(Some(error)) => Some(format!("filter Error: {error}")),
            _ => Some(format!("not an ExtenderFilterResult: {}", text())),
        },
        Verb::Prioritize => {
            let ok = answer.as_array().is_some_and(|hosts| {
                hosts
                    .iter()
                    .all(|h| h["Host"].is_string() && h["Score"].is_i64())
            });
            (!ok).then(|| format!("not a HostPriorityList: {}", text()))
        }
    }
}

/// An error with its causes: hyper's own message alone is often just "client error (Connect)".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}

/// Nearest-rank percentile of sorted samples, in µs.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e6
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("loadgen: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the load; `Ok(false)` when some request failed.
async fn run(args: Args) -> Result<bool, String> {
    let uri: Uri = format!("{}/{}", args.url.trim_end_matches('/'), args.verb.as_str())
        .parse()
        .map_err(|e| format!("--url {:?}: {e}", args.url))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "--url {uri}: only plain http (run `kube-tas serve` without --tls-cert on loopback)"
        ));
    }

    let loaded = Instant::now();
    let cluster = if args.cluster.is_empty() {
        generated_cluster(&args)?
    } else {
        load_cluster(&args.cluster)?
    };
    if cluster.nodes.is_empty() {
        return Err("no Node in the cluster".to_string());
    }
    let job = match (args.pod_kind, &args.job) {
        (PodKind::Lone, _) => None,
        (PodKind::Gang, None) => Some(
            cluster
                .jobs
                .first()
                .ok_or("--pod-kind gang: the cluster has no Job")?,
        ),
        (PodKind::Gang, Some(wanted)) => {
            let (ns, name) = wanted.split_once('/').unwrap_or((NAMESPACE, wanted));
            Some(
                cluster
                    .jobs
                    .iter()
                    .find(|j| j.namespace == ns && j.name == name)
                    .ok_or_else(|| format!("--job {wanted}: no such Job in the cluster"))?,
            )
        }
    };
    let per_request = args.names.per_request(cluster.nodes.len());
    let quoted: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| Value::from(n.as_str()).to_string())
        .collect();
    // With every name in every request, build the list once.
    let all_names = (per_request == quoted.len()).then(|| quoted.join(","));
    eprintln!(
        "loadgen: {} nodes, {} jobs loaded in {:.1?}",
        cluster.nodes.len(),
        cluster.jobs.len(),
        loaded.elapsed()
    );

    let mut connector = HttpConnector::new();
    // Go's net/http sets TCP_NODELAY too; without it small bodies wait for delayed ACKs.
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1)
        .build(connector);

    let total = args.warmup + args.requests;
    let mut latencies = Vec::with_capacity(args.requests);
    let mut errors = 0usize;
    let mut warmup_errors = 0usize;
    let mut first_error: Option<String> = None;
    let mut request_bytes = 0u64;
    let mut pod_bytes = 0u64;
    let mut with_passing = 0usize;
    let mut window = String::new();
    let mut measured_start = Instant::now();

    for i in 0..total {
        let measured = i >= args.warmup;
        if i == args.warmup {
            measured_start = Instant::now();
        }
        let pod = pod_json(args.pod_kind, job, i);
        let names = match &all_names {
            Some(all) => all.as_str(),
            None => {
                window.clear();
                names_window(&quoted, per_request, i, &mut window);
                window.as_str()
            }
        };
        let body = request_body(&pod, names);
        if measured {
            request_bytes += body.len() as u64;
            pod_bytes += pod.to_string().len() as u64;
        }
        let request = Request::builder()
            .method(Method::POST)
            .uri(uri.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body))
            .map_err(|e| format!("building a request: {e}"))?;

        let started = Instant::now();
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let response = client.request(request).await.map_err(|e| error_chain(&e))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| error_chain(&e))?
                .to_bytes();
            Ok::<_, String>((status, body))
        })
        .await;
        let elapsed = started.elapsed();

        let problem = match outcome {
            Err(_) => Some(format!("no answer within {REQUEST_TIMEOUT:?}")),
            Ok(Err(e)) => Some(format!("request failed: {e}")),
            Ok(Ok((status, body))) => {
                if measured {
                    latencies.push(elapsed);
                    if args.verb == Verb::Filter {
                        let passing = serde_json::from_slice::<Value>(&body).is_ok_and(|v| {
                            v["NodeNames"].as_array().is_some_and(|n| !n.is_empty())
                        });
                        with_passing += usize::from(passing);
                    }
                }
                check_response(args.verb, status, &body)
            }
        };
        if let Some(problem) = problem {
            if measured {
                errors += 1;
            } else {
                warmup_errors += 1;
            }
            if first_error.is_none() {
                eprintln!("loadgen: first error (request {i}): {problem}");
                first_error = Some(problem);
            }
        }
    }
    let wall = measured_start.elapsed();

    latencies.sort_unstable();
    let n = args.requests.max(1) as u64;
    let mut report = String::new();
    let _ = writeln!(report, "url            {uri}");
    let pods = match job {
        Some(j) => format!(
            "gang: pods of Job {}/{} (indices 0..{})",
            j.namespace, j.name, j.count
        ),
        None => "lone: a new pod per request, no owner".to_string(),
    };
    let _ = writeln!(report, "pods           {pods}");
    let _ = writeln!(
        report,
        "names          {per_request} per request, of {} nodes",
        cluster.nodes.len()
    );
    let _ = writeln!(
        report,
        "requests       {} (+{} warmup)",
        args.requests, args.warmup
    );
    let _ = writeln!(report, "errors         {errors}");
    if warmup_errors > 0 {
        let _ = writeln!(report, "warmup errors  {warmup_errors}");
    }
    if let Some(e) = &first_error {
        let _ = writeln!(report, "first error    {e}");
    }
    let _ = writeln!(
        report,
        "request bytes  {} (mean; Pod {} B)",
        request_bytes / n,
        pod_bytes / n
    );
    if args.verb == Verb::Filter {
        let _ = writeln!(
            report,
            "passing        {with_passing} answers with at least one node"
        );
    }
    for (label, p) in [
        ("p50", 50.0),
        ("p90", 90.0),
        ("p99", 99.0),
        ("p99.9", 99.9),
        ("max", 100.0),
    ] {
        let _ = writeln!(report, "{label:<15}{:.0} µs", percentile(&latencies, p));
    }
    let _ = writeln!(
        report,
        "requests/s     {:.0}",
        args.requests as f64 / wall.as_secs_f64().max(1e-9)
    );
    print!("{report}");
    Ok(errors == 0 && warmup_errors == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_matches_kube_scheduler() {
        assert_eq!(sample_size(50), 50);
        assert_eq!(sample_size(640), 288);
        assert_eq!(sample_size(5_000), 500);
        assert_eq!(sample_size(15_000), 750);
        assert_eq!(sample_size(50_000), 2_500);
    }
}
