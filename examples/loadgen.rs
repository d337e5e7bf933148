//! Load generator for a running `kube-tas serve`, over loopback: the scheduler extender
//! (`--verb filter|prioritize`) or the mutating admission webhook (`--verb mutate`).
//!
//! For the extender it sends `filter` or `prioritize` exactly as kube-scheduler does with
//! `nodeCacheCapable: true` (extender-protocol.md §2.3): `{"Pod": <a realistic ~6 KB Pod>,
//! "Nodes": null, "NodeNames": [...]}`, one request at a time on one keep-alive HTTP/1.1
//! connection (the scheduler calls the extender for one pod at a time), and prints the
//! round-trip latency distribution (performance.md G1-G4):
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
//! For the webhook (`--verb mutate`, `--url` then being the full `/mutate` URL) it sends the
//! `admission.k8s.io/v1` AdmissionReview of a CREATE as kube-apiserver does (extender-protocol.md
//! §4.1: in-tree defaults applied, `managedFields` set, no `uid` or `resourceVersion` yet, a
//! new `request.uid` on every request), for the first pending TAS Job of the cluster (not
//! finished, no pod of its own, naming a queue or carrying a `podset-*` annotation) or `--job`:
//!
//! * `--pod-kind job`: the Job itself (~6 KB: labels, annotations, a container with env,
//!   resources, volume mounts and probes), as `kubectl create` creates it;
//! * `--pod-kind pod`: the Job's pods as the Job controller creates them from the Job's
//!   *unpatched* template (`generateName`, no name yet, the controller `ownerReference`, the
//!   completion index annotation and label, the `batch.kubernetes.io/job-tracking` finalizer),
//!   cycling through completion indices. The server finds the Job in its cluster view, so each
//!   pod runs the full decision: the Job's admission (queue, flavor, levels) and the patch that
//!   adds what the template lacks (the flavor's nodeSelector and tolerations, the gang-size
//!   and queue stamps). The server must therefore be started on the same manifests.
//!
//! Every answer must be HTTP 200 with an AdmissionReview echoing the request's `uid`,
//! `allowed: true` and a non-empty `JSONPatch` (the first one is also applied to its object);
//! anything else counts as an error.
//!
//! ```text
//! cargo run --release -- serve --cluster examples --listen 127.0.0.1:8443 &
//! cargo run --release --example loadgen -- --verb mutate --pod-kind job \
//!     --url http://127.0.0.1:8443/mutate --cluster examples
//! ```
//!
//! Latency is client-side round trip: from just before the request is handed to the client
//! until the whole response body is read. Bodies are built before the clock starts.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube_tas::admission::review::{API_VERSION, AdmissionReviewOut, KIND};
use kube_tas::keys::{
    JOB_COMPLETION_INDEX, PODSET_PREFERRED_TOPOLOGY, QUEUE_NAME_ANNOTATION, QUEUE_NAME_LABEL,
};
use kube_tas::synthetic::{NAMESPACE, RACK_LABEL, SyntheticCluster, job_yaml};
use serde_json::{Map, Value, json};

/// kube-scheduler's `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_PERCENT: usize = 5;
/// Per-request limit; a request that takes longer counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Sequential filter/prioritize load against `kube-tas serve`, as kube-scheduler sends it, or
/// webhook load, as kube-apiserver sends it.
#[derive(Debug, Parser)]
#[command(name = "loadgen")]
struct Args {
    /// Plain HTTP. For `filter`/`prioritize` the extender's urlPrefix, the verb appended as
    /// `<url>/<verb>` (default `http://127.0.0.1:8443/scheduler`); for `mutate` the webhook's
    /// full URL (default `http://127.0.0.1:8443/mutate`).
    #[arg(long)]
    url: Option<String>,
    /// The extender verb to call, or `mutate` for the admission webhook.
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
    /// Extender verbs: `lone` (default), a fresh pod with no owner and no TAS annotation each
    /// time; `gang`, the pods of a Job of the cluster, cycling through completion indices.
    /// `mutate`: `job` (default), the AdmissionReview of a pending TAS Job; `pod`, those of its
    /// pods as the Job controller creates them from its unpatched template.
    #[arg(long, value_enum)]
    pod_kind: Option<PodKind>,
    /// Manifest files or folders with the Nodes (and Jobs) `serve` was started with.
    #[arg(long)]
    cluster: Vec<PathBuf>,
    /// The Job whose pods `--pod-kind gang` sends (`NAME` or `NAMESPACE/NAME`); default: the
    /// first Job. With `--pod-kind job|pod`, the Job whose review (or whose pods' reviews)
    /// `mutate` sends; default: the first pending TAS Job.
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
    /// The mutating admission webhook.
    Mutate,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Filter => "filter",
            Verb::Prioritize => "prioritize",
            Verb::Mutate => "mutate",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PodKind {
    /// Extender: a new pod with no owner.
    Lone,
    /// Extender: the pods of a Job.
    Gang,
    /// Webhook: the AdmissionReview of a Job.
    Job,
    /// Webhook: the AdmissionReview of a Job's pod.
    Pod,
}

impl PodKind {
    /// The default for `verb`, or whether `self` goes with it.
    fn for_verb(kind: Option<PodKind>, verb: Verb) -> Result<PodKind, String> {
        let webhook = verb == Verb::Mutate;
        match kind {
            None if webhook => Ok(PodKind::Job),
            None => Ok(PodKind::Lone),
            Some(k @ (PodKind::Job | PodKind::Pod)) if webhook => Ok(k),
            Some(k @ (PodKind::Lone | PodKind::Gang)) if !webhook => Ok(k),
            Some(k) => Err(format!(
                "--pod-kind {}: --verb {} takes {}",
                k.to_possible_value()
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_default(),
                verb.as_str(),
                if webhook {
                    "job or pod"
                } else {
                    "lone or gang"
                }
            )),
        }
    }
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
    /// The whole Job as the manifest has it.
    object: Value,
}

impl JobInfo {
    /// A TAS Job for the webhook: it names a LocalQueue or carries a `podset-*` annotation.
    fn is_tas(&self) -> bool {
        let meta = &self.object["metadata"];
        meta["labels"].get(QUEUE_NAME_LABEL).is_some()
            || meta["annotations"].get(QUEUE_NAME_ANNOTATION).is_some()
            || self.template["metadata"]["annotations"]
                .as_object()
                .is_some_and(|a| a.keys().any(|k| k.starts_with("kueue.x-k8s.io/podset-")))
    }

    /// A `Complete` or `Failed` condition that is `True`.
    fn finished(&self) -> bool {
        self.object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                matches!(c["type"].as_str(), Some("Complete" | "Failed"))
                    && c["status"].as_str() == Some("True")
            })
    }
}

/// What the cluster manifests provide.
#[derive(Debug, Default)]
struct ClusterNames {
    nodes: Vec<String>,
    jobs: Vec<JobInfo>,
    /// (namespace, name) of the Jobs that a non-terminal pod names as its controller.
    running_jobs: BTreeSet<(String, String)>,
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
            "Pod" => {
                let terminal = matches!(
                    doc["status"]["phase"].as_str(),
                    Some("Succeeded" | "Failed")
                );
                let owner = doc["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["controller"] == Value::Bool(true) && r["kind"] == "Job");
                if let (false, Some(owner)) = (terminal, owner) {
                    let namespace = doc["metadata"]["namespace"]
                        .as_str()
                        .filter(|ns| !ns.is_empty())
                        .unwrap_or(NAMESPACE);
                    let job = owner["name"].as_str().unwrap_or_default();
                    self.running_jobs
                        .insert((namespace.to_string(), job.to_string()));
                }
            }
            _ => {}
        }
    }

    /// The Job `--job` names (`NAME` or `NAMESPACE/NAME`).
    fn job_named(&self, wanted: &str) -> Result<&JobInfo, String> {
        let (ns, name) = wanted.split_once('/').unwrap_or((NAMESPACE, wanted));
        self.jobs
            .iter()
            .find(|j| j.namespace == ns && j.name == name)
            .ok_or_else(|| format!("--job {wanted}: no such Job in the cluster"))
    }

    /// The first Job the webhook would admit and the extender would place: TAS, not finished,
    /// no pod of its own yet.
    fn first_pending_tas_job(&self) -> Option<&JobInfo> {
        self.jobs.iter().find(|j| {
            j.is_tas()
                && !j.finished()
                && !self
                    .running_jobs
                    .contains(&(j.namespace.clone(), j.name.clone()))
        })
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
        object: job.clone(),
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
    Ok(ClusterNames {
        nodes,
        jobs,
        running_jobs: BTreeSet::new(),
    })
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

/// The ServiceAccount token volume the API server's ServiceAccount admission plugin adds to a
/// pod (never to a Job's template).
const SERVICE_ACCOUNT_VOLUME: &str = "kube-api-access-7xk2p";

/// `job` as kube-apiserver hands it to mutating admission when `kubectl create` creates it:
/// in-tree defaults applied (SetDefaults_Job, SetDefaults_PodSpec), `managedFields` from the
/// field manager, no `uid`, `resourceVersion`, `spec.selector` or status yet (those come after
/// admission). About 6 KB serialized.
fn job_object(job: &JobInfo) -> Value {
    let mut spec = match &job.object["spec"] {
        Value::Object(spec) => spec.clone(),
        _ => Map::new(),
    };
    if spec.get("manualSelector") != Some(&Value::Bool(true)) {
        spec.remove("selector");
    }
    if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
        spec.insert("completions".to_string(), 1.into());
    }
    let backoff_limit = if spec.contains_key("backoffLimitPerIndex") {
        Value::from(i32::MAX)
    } else {
        Value::from(6)
    };
    let pod_replacement_policy = if spec.contains_key("podFailurePolicy") {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    for (key, default) in [
        ("parallelism", Value::from(1)),
        ("backoffLimit", backoff_limit),
        ("completionMode", Value::from("NonIndexed")),
        ("suspend", Value::Bool(false)),
        ("podReplacementPolicy", Value::from(pod_replacement_policy)),
        ("manualSelector", Value::Bool(false)),
    ] {
        spec.entry(key).or_insert(default);
    }
    spec.insert("template".to_string(), job_template(job));

    let meta = &job.object["metadata"];
    let mut labels = meta["labels"].as_object().cloned().unwrap_or_default();
    for (k, v) in [
        ("app.kubernetes.io/name", "trainer"),
        ("app.kubernetes.io/instance", job.name.as_str()),
        ("app.kubernetes.io/component", "training"),
        ("app.kubernetes.io/part-of", "ml-platform"),
        ("app.kubernetes.io/managed-by", "kubectl"),
        ("team", "ml-research"),
        ("cost-center", "cc-4711"),
        ("ml-platform.example.com/project", "llm-pretrain"),
        ("ml-platform.example.com/tier", "research"),
    ] {
        labels.entry(k).or_insert_with(|| v.into());
    }
    let mut annotations = meta["annotations"].as_object().cloned().unwrap_or_default();
    for (k, v) in [
        ("owner", "ml-research@example.com"),
        (
            "ml-platform.example.com/submitted-by",
            "jane.doe@example.com",
        ),
        ("ml-platform.example.com/notify", "chat:#ml-research-runs"),
        (
            "ml-platform.example.com/description",
            "Pre-training ablation 12 of the 7B model: cosine schedule with a longer warmup, \
             data mix v7 (code 18%, web 52%, books 12%, papers 18%); compare with ablation 9 \
             at 20k steps before scaling out.",
        ),
        (
            "ml-platform.example.com/experiment",
            "llm-pretrain-7b/ablation-12",
        ),
        (
            "ml-platform.example.com/git-commit",
            "4f9c2e1b7a3d5c8e0f1a2b3c4d5e6f7a8b9c0d1e",
        ),
        (
            "ml-platform.example.com/dataset",
            "s3://datasets-example/pretrain/v7/shards-*.tar",
        ),
    ] {
        annotations.entry(k).or_insert_with(|| v.into());
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": labels,
            "annotations": annotations,
            "managedFields": [{
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "batch/v1",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {".": {}}, "f:labels": {".": {}}},
                    "f:spec": {
                        "f:backoffLimit": {}, "f:completionMode": {}, "f:completions": {},
                        "f:manualSelector": {}, "f:parallelism": {},
                        "f:podReplacementPolicy": {}, "f:suspend": {},
                        "f:template": {
                            "f:metadata": {"f:annotations": {".": {}}, "f:labels": {".": {}}},
                            "f:spec": {
                                "f:containers": {".": {}}, "f:dnsPolicy": {},
                                "f:restartPolicy": {}, "f:schedulerName": {},
                                "f:securityContext": {".": {}},
                                "f:terminationGracePeriodSeconds": {}, "f:volumes": {".": {}}
                            }
                        }
                    }
                }
            }]
        },
        "spec": spec,
        "status": {}
    })
}

/// The Job's `spec.template` as it is stored: the manifest's template (its annotations and
/// requests decide the webhook's answer) with the realistic container of [`base_pod`], less
/// what only pods get (the ServiceAccount volume, the default tolerations, the priority, the
/// completion-index variable).
fn job_template(job: &JobInfo) -> Value {
    let mut spec = gang_pod(job, 0)["spec"].take();
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        volumes.retain(|v| v["name"] != SERVICE_ACCOUNT_VOLUME);
    }
    for container in spec["containers"].as_array_mut().into_iter().flatten() {
        if let Some(mounts) = container["volumeMounts"].as_array_mut() {
            mounts.retain(|m| m["name"] != SERVICE_ACCOUNT_VOLUME);
        }
        if let Some(env) = container["env"].as_array_mut() {
            env.retain(|e| e["name"] != "JOB_COMPLETION_INDEX");
        }
    }
    let own_tolerations: Vec<Value> = job.template["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let spec_map = spec.as_object_mut().expect("a pod spec is an object");
    if own_tolerations.is_empty() {
        spec_map.remove("tolerations");
    } else {
        spec_map.insert("tolerations".to_string(), Value::Array(own_tolerations));
    }
    for key in [
        "serviceAccountName",
        "serviceAccount",
        "preemptionPolicy",
        "hostname",
    ] {
        spec_map.remove(key);
    }
    if job.template["spec"]["priority"].is_null() {
        spec_map.remove("priority");
    }

    let tmeta = &job.template["metadata"];
    let mut labels = tmeta["labels"].as_object().cloned().unwrap_or_default();
    let mut annotations = tmeta["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    add_template_extras(job, &mut labels, &mut annotations);
    json!({"metadata": {"labels": labels, "annotations": annotations}, "spec": spec})
}

/// The labels and annotations a real training Job's pod template carries besides Kueue's
/// (kept where the manifest sets them): what its pods inherit too.
fn add_template_extras(
    job: &JobInfo,
    labels: &mut Map<String, Value>,
    annotations: &mut Map<String, Value>,
) {
    for (k, v) in [
        ("app.kubernetes.io/name", "trainer"),
        ("app.kubernetes.io/instance", job.name.as_str()),
        ("app.kubernetes.io/component", "training"),
        ("team", "ml-research"),
    ] {
        labels.entry(k).or_insert_with(|| v.into());
    }
    let first_container = job.template["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or("main")
        .to_string();
    let run_config = json!({
        "model": {"name": "llm-7b", "layers": 32, "hidden": 4096, "heads": 32,
                  "vocab": 32000, "seqLen": 4096, "precision": "bf16"},
        "optimizer": {"name": "adamw", "lr": 0.0003, "betas": [0.9, 0.95],
                      "weightDecay": 0.1, "warmupSteps": 2000, "schedule": "cosine"},
        "data": {"train": "s3://datasets-example/pretrain/v7/train-*.tar",
                 "eval": "s3://datasets-example/pretrain/v7/eval-*.tar",
                 "tokenizer": "s3://models-example/tokenizers/llm-32k/v3"},
        "parallelism": {"data": 8, "tensor": 2, "pipeline": 1, "zeroStage": 1},
        "checkpoint": {"dir": "/scratch/ckpt", "everySteps": 1000, "keep": 3},
        "batch": {"microBatch": 4, "globalBatch": 1024, "gradAccum": 16}
    });
    for (k, v) in [
        ("prometheus.io/scrape", "true".to_string()),
        ("prometheus.io/port", "9090".to_string()),
        ("prometheus.io/path", "/metrics".to_string()),
        ("kubectl.kubernetes.io/default-container", first_container),
        (
            "cluster-autoscaler.kubernetes.io/safe-to-evict",
            "false".to_string(),
        ),
        ("ml-platform.example.com/run-config", run_config.to_string()),
    ] {
        annotations.entry(k).or_insert_with(|| v.into());
    }
}

/// A pod of `job` with completion index `index` as kube-apiserver hands it to mutating
/// admission when the Job controller creates it from the Job's unpatched template: no name yet
/// (`generateName`), the controller `ownerReference` and tracking finalizer, the pod admission
/// plugins' additions, `managedFields` of kube-controller-manager, an empty status.
fn job_pod_object(job: &JobInfo, index: usize) -> Value {
    let mut pod = gang_pod(job, index);
    // What the template carries besides the manifest's (see `job_template`).
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    add_template_extras(job, &mut labels, &mut annotations);
    for (key, extras) in [("labels", labels), ("annotations", annotations)] {
        if let Some(map) = pod["metadata"][key].as_object_mut() {
            for (k, v) in extras {
                map.entry(k).or_insert(v);
            }
        }
    }
    pod["apiVersion"] = "v1".into();
    pod["kind"] = "Pod".into();
    let meta = pod["metadata"]
        .as_object_mut()
        .expect("a pod's metadata is an object");
    for key in ["name", "uid", "resourceVersion", "creationTimestamp"] {
        meta.remove(key);
    }
    meta.insert(
        "finalizers".to_string(),
        json!(["batch.kubernetes.io/job-tracking"]),
    );
    // Only the controller's own entry: the scheduler has not seen the pod yet.
    if let Some(fields) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
        fields.truncate(1);
    }
    pod["status"] = json!({});
    pod
}

/// Who creates the object: a user applying the Job, or the Job controller creating its pods.
fn creator(kind: PodKind) -> Value {
    match kind {
        PodKind::Pod => json!({
            "username": "system:serviceaccount:kube-system:job-controller",
            "uid": fake_uid("serviceaccount/kube-system/job-controller"),
            "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                       "system:authenticated"]
        }),
        _ => json!({
            "username": "kubernetes-admin",
            "groups": ["kubeadm:cluster-admins", "system:authenticated"]
        }),
    }
}

/// The AdmissionReview kube-apiserver sends for the CREATE of `object` (a Job or a Pod) by
/// `user` (extender-protocol.md §4.1); `name` is left out for a `generateName` object.
fn review_body(uid: &str, object: &Value, user: &Value) -> Bytes {
    let (group, resource) = match object["kind"].as_str() {
        Some("Job") => ("batch", "jobs"),
        _ => ("", "pods"),
    };
    let gvk = json!({"group": group, "version": "v1", "kind": object["kind"]});
    let gvr = json!({"group": group, "version": "v1", "resource": resource});
    let mut request = json!({
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "namespace": object["metadata"]["namespace"],
        "operation": "CREATE",
        "userInfo": user,
        "object": object,
        "oldObject": null,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    });
    if let Some(name) = object["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
    {
        request["name"] = name.into();
    }
    let review = json!({"apiVersion": API_VERSION, "kind": KIND, "request": request});
    Bytes::from(review.to_string())
}

/// The webhook's answer to the review with `uid`: HTTP 200, an AdmissionReview echoing it,
/// `allowed: true` with a non-empty JSON Patch (applied to `object` when given). The patch's
/// operation count, or why the answer does not count as served.
fn check_review(
    status: StatusCode,
    body: &[u8],
    uid: &str,
    object: Option<&Value>,
) -> Result<usize, String> {
    let text = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != StatusCode::OK {
        return Err(format!("HTTP {status}: {}", text()));
    }
    let review: AdmissionReviewOut = serde_json::from_slice(body)
        .map_err(|e| format!("not an AdmissionReview ({e}): {}", text()))?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(format!(
            "answer is {} {}, not {API_VERSION} {KIND}",
            review.api_version, review.kind
        ));
    }
    let response = &review.response;
    if response.uid != uid {
        return Err(format!("response.uid {:?}, want {uid:?}", response.uid));
    }
    if !response.allowed {
        return Err(match &response.status {
            Some(s) => format!("denied ({}): {}", s.code, s.message),
            None => "denied without a status".to_string(),
        });
    }
    let patch = match (response.patch_type.as_deref(), &response.patch) {
        (Some("JSONPatch"), Some(patch)) => patch,
        (None, None) => return Err("allowed without a patch: nothing was injected".to_string()),
        (t, p) => {
            return Err(format!(
                "patchType {t:?} with patch {:?}",
                p.as_ref().map(|p| &p[..p.len().min(40)])
            ));
        }
    };
    let bytes = STANDARD
        .decode(patch)
        .map_err(|e| format!("response.patch is not standard base64: {e}"))?;
    let operations: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "response.patch is not a JSON Patch ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    })?;
    if operations.is_empty() {
        return Err("allowed with an empty patch".to_string());
    }
    if let Some(object) = object {
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &operations).map_err(|e| {
            format!(
                "the patch does not apply to the object ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        })?;
    }
    Ok(operations.len())
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
        Verb::Mutate => Some("a webhook answer is checked by check_review".to_string()),
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
    let webhook = args.verb == Verb::Mutate;
    let pod_kind = PodKind::for_verb(args.pod_kind, args.verb)?;
    let url = match &args.url {
        Some(url) if webhook => url.clone(),
        Some(url) => format!("{}/{}", url.trim_end_matches('/'), args.verb.as_str()),
        None if webhook => "http://127.0.0.1:8443/mutate".to_string(),
        None => format!("http://127.0.0.1:8443/scheduler/{}", args.verb.as_str()),
    };
    let uri: Uri = url.parse().map_err(|e| format!("--url {url:?}: {e}"))?;
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
    if cluster.nodes.is_empty() && !webhook {
        return Err("no Node in the cluster".to_string());
    }
    let job = match (pod_kind, &args.job) {
        (PodKind::Lone, _) => None,
        (PodKind::Gang, None) => Some(
            cluster
                .jobs
                .first()
                .ok_or("--pod-kind gang: the cluster has no Job")?,
        ),
        (PodKind::Job | PodKind::Pod, None) => Some(cluster.first_pending_tas_job().ok_or(
            "--verb mutate: the cluster has no pending TAS Job (one naming a queue or carrying \
             a kueue.x-k8s.io/podset-* annotation, not finished, with no pod yet); name one \
             with --job",
        )?),
        (_, Some(wanted)) => Some(cluster.job_named(wanted)?),
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
    // The webhook's objects: the Job (the same each time), or its pods (built per request).
    let job_review_object = match (pod_kind, job) {
        (PodKind::Job, Some(job)) => Some(job_object(job)),
        _ => None,
    };
    let user = creator(pod_kind);

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
    let mut patch_ops: Option<usize> = None;
    let mut window = String::new();
    let mut measured_start = Instant::now();

    for i in 0..total {
        let measured = i >= args.warmup;
        if i == args.warmup {
            measured_start = Instant::now();
        }
        // The request body, the size of the object in it, and for the webhook the review's
        // uid and (first request only) the object its patch must apply to.
        let (body, object_bytes, review) = match (pod_kind, job) {
            (PodKind::Job | PodKind::Pod, Some(job)) => {
                let built;
                let object = match &job_review_object {
                    Some(object) => object,
                    None => {
                        built = job_pod_object(job, i % job.count);
                        &built
                    }
                };
                let uid = fake_uid(&format!("review/{i}"));
                let body = review_body(&uid, object, &user);
                let check_patch_on = (i == 0).then(|| object.clone());
                (body, object.to_string().len(), Some((uid, check_patch_on)))
            }
            _ => {
                let pod = pod_json(pod_kind, job, i);
                let names = match &all_names {
                    Some(all) => all.as_str(),
                    None => {
                        window.clear();
                        names_window(&quoted, per_request, i, &mut window);
                        window.as_str()
                    }
                };
                (request_body(&pod, names), pod.to_string().len(), None)
            }
        };
        if measured {
            request_bytes += body.len() as u64;
            pod_bytes += object_bytes as u64;
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
                match &review {
                    Some((uid, object)) => {
                        match check_review(status, &body, uid, object.as_ref()) {
                            Ok(ops) => {
                                patch_ops.get_or_insert(ops);
                                None
                            }
                            Err(problem) => Some(problem),
                        }
                    }
                    None => check_response(args.verb, status, &body),
                }
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
    let sent = match (pod_kind, job) {
        (PodKind::Job, Some(j)) => format!(
            "job: AdmissionReview (CREATE) of Job {}/{}, a new uid per request",
            j.namespace, j.name
        ),
        (PodKind::Pod, Some(j)) => format!(
            "pod: AdmissionReview (CREATE) of the pods of Job {}/{} from its unpatched \
             template (indices 0..{})",
            j.namespace, j.name, j.count
        ),
        (_, Some(j)) => format!(
            "gang: pods of Job {}/{} (indices 0..{})",
            j.namespace, j.name, j.count
        ),
        (_, None) => "lone: a new pod per request, no owner".to_string(),
    };
    let _ = writeln!(
        report,
        "{:<15}{sent}",
        if webhook { "reviews" } else { "pods" }
    );
    if !webhook {
        let _ = writeln!(
            report,
            "names          {per_request} per request, of {} nodes",
            cluster.nodes.len()
        );
    }
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
    let object_kind = match pod_kind {
        PodKind::Job => "Job",
        _ => "Pod",
    };
    let _ = writeln!(
        report,
        "request bytes  {} (mean; {object_kind} {} B)",
        request_bytes / n,
        pod_bytes / n
    );
    if args.verb == Verb::Filter {
        let _ = writeln!(
            report,
            "passing        {with_passing} answers with at least one node"
        );
    }
    if webhook {
        let _ = writeln!(
            report,
            "patch          {} operations (first allowed answer)",
            patch_ops.map_or_else(|| "no".to_string(), |n| n.to_string())
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
