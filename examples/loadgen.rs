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
use kube_tas::bench::requests::{
    JobInfo, creator, fake_uid, gang_pod, job_info, job_object, job_pod_object, lone_pod,
    names_window, request_body, review_body, sample_size,
};
use kube_tas::keys::PODSET_PREFERRED_TOPOLOGY;
use kube_tas::synthetic::{NAMESPACE, RACK_LABEL, SyntheticCluster, job_yaml};
use serde_json::Value;

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

/// A multi-document YAML stream, with the loader's budget (big enough for a 50k-node cluster).
fn parse_yaml(text: &str) -> Result<Vec<Value>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, kube_tas::cluster::yaml_options())
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

/// The Pod kube-scheduler would send for request `i`, as its informer holds it (no
/// `apiVersion`/`kind`, managed fields kept, status as the API server set it).
fn pod_json(kind: PodKind, job: Option<&JobInfo>, i: usize) -> Value {
    match (kind, job) {
        (PodKind::Gang, Some(job)) => gang_pod(job, i % job.count),
        _ => lone_pod(i),
    }
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
    let user = creator(pod_kind == PodKind::Pod);

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
