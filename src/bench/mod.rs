//! `kube-tas bench`: `serve` started in process on loopback over a generated cluster, driven
//! as kube-scheduler and kube-apiserver drive it, with the round-trip latency of every call
//! shape reported as p50 / p99 / p99.9 (performance.md G1-G4, G9).
//!
//! * **Call shapes**, one keep-alive connection, one request at a time (kube-scheduler calls
//!   the extender for one pod at a time): `filter` for a lone pod, for a gang pod whose seat is
//!   in the sample and one whose seat is not, and with every node's name; `prioritize` for a
//!   gang pod, and for a lone pod after its `filter`; `/mutate` for a Job's pod. Names per
//!   request default to kube-scheduler's own sample (`percentageOfNodesToScore` adaptive: 500
//!   of 5,000 nodes), a window that rotates as its `nextStartNodeIndex` does.
//! * **`--compare-floor`**: the same bodies, in the same run, against [`floor`] (a server
//!   that only parses and answers), interleaved in chunks so that machine noise falls on
//!   both; the ratio is printed per row. The lone pod's filter is measured a second time
//!   against the floor's filter that passes every name ([`floor::FILTER_EVERY_NAME`]): a lone
//!   pod's answer must list every passing node, the floor's lists 16, and the second row
//!   tells what kube-tas adds from what the longer answer costs.
//! * **Replay**: the scheduling cycle per pod (filter → prioritize when more than one node
//!   passes → bind to the best score), for gangs of mixed sizes and lone pods; a pod nothing
//!   passes for goes back to the queue. Reports each verb's latency and pods bound per second.
//! * **`/mutate` at concurrency 8**: requests per second and latency, against the floor too.
//! * **Service time in process**: the same bodies handed to each route's service without HTTP
//!   (parse, decide, encode: the server's own work, performance.md's "server-side service
//!   time" less hyper's), kube-tas's and the floor's interleaved.
//!
//! Every kube-tas answer is checked (a gang pod gets exactly its seat, a lone pod some node,
//! a review `allowed` with its `uid`), after its chunk, when the floor's are parsed too, so
//! that the client does the same for either server; a wrong answer stops the bench with an
//! error, so the numbers are always for correct work. Progress goes to stderr, the report to
//! stdout.
//! Timings are round trip: from handing the request to the client until the whole answer is
//! read; bodies are built before the clock starts.

pub mod fixture;
pub mod floor;
pub mod requests;
pub mod stats;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::extender::Extender;
use crate::keys::PODSET_REQUIRED_TOPOLOGY;
use crate::server::ServeConfig;
use crate::synthetic::{RACK_LABEL, SyntheticCluster, job_yaml};
use fixture::{Expect, Fixture, Room, RowBodies, Services, best_host};
use stats::{Samples, Summary};

/// Requests per target before switching to the other one (with `--compare-floor`).
const CHUNK: usize = 50;
/// Gang sizes of the replay, in turn.
const REPLAY_GANGS: [u32; 3] = [8, 32, 128];
/// A replayed pod nothing passes for is tried at most this often.
const MAX_ATTEMPTS: usize = 400;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Blocks of the generated cluster.
    pub blocks: u32,
    /// Racks per block.
    pub racks: u32,
    /// Hosts per rack.
    pub hosts: u32,
    /// Names per request; `None`: kube-scheduler's default sample for the cluster's size.
    pub names: Option<usize>,
    /// Measured requests per row.
    pub samples: usize,
    /// Requests per row sent first and not measured.
    pub warmup: usize,
    /// Measure the floor server too and print the ratios.
    pub compare_floor: bool,
    /// Pods the replay schedules (0: no replay).
    pub replay_pods: usize,
    /// Connections of the concurrent `/mutate` row (0: no such row).
    pub mutate_concurrency: usize,
    /// Worker threads of the servers' runtime; `None`: one per core, as `serve`.
    pub server_workers: Option<usize>,
}

impl Default for BenchConfig {
    /// 5,000 nodes, the default sample, 2,000 samples per row, the floor compared.
    fn default() -> Self {
        Self {
            blocks: 5,
            racks: 25,
            hosts: 40,
            names: None,
            samples: 2000,
            warmup: 200,
            compare_floor: true,
            replay_pods: 2000,
            mutate_concurrency: 8,
            server_workers: None,
        }
    }
}

/// One measured row: kube-tas, and the floor on the same bodies when compared.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was sent.
    pub call: String,
    /// Mean request size in bytes.
    pub request_bytes: usize,
    /// Mean size of kube-tas's answers in bytes.
    pub answer_bytes: usize,
    /// kube-tas's latencies.
    pub kube_tas: Summary,
    /// The floor's latencies.
    pub floor: Option<Summary>,
    /// kube-tas's service time in process: the route's work from the body to the encoded
    /// answer, without HTTP.
    pub kube_tas_service: Summary,
    /// The floor's service time on the same bodies, when compared.
    pub floor_service: Option<Summary>,
}

/// The replay's outcome.
#[derive(Debug, Clone)]
pub struct Replay {
    /// Latency per verb: filter, prioritize, bind.
    pub verbs: Vec<(&'static str, Summary)>,
    /// Pods bound.
    pub bound: usize,
    /// Pods given up on after [`MAX_ATTEMPTS`] filters.
    pub unplaced: usize,
    /// Filter calls in all.
    pub filters: usize,
    /// Wall time of the replay.
    pub wall: Duration,
}

/// A concurrent `/mutate` run.
#[derive(Debug, Clone)]
pub struct Concurrent {
    /// Connections.
    pub connections: usize,
    /// kube-tas: requests per second and latencies.
    pub kube_tas: (f64, Summary),
    /// The floor, when compared.
    pub floor: Option<(f64, Summary)>,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Nodes of the generated cluster.
    pub nodes: usize,
    /// Names per extender request.
    pub names: usize,
    /// Worker threads the servers ran on.
    pub server_workers: usize,
    /// The call-shape rows.
    pub rows: Vec<Row>,
    /// The replay, if run.
    pub replay: Option<Replay>,
    /// `/mutate` at concurrency, if run.
    pub concurrent: Option<Concurrent>,
}

/// Runs the bench (blocking: it owns its runtimes) and returns what it measured.
pub fn run(config: &BenchConfig) -> anyhow::Result<Report> {
    let shape = cluster_shape(config);
    let mut extra_jobs = String::new();
    for (i, size) in replay_job_sizes(config.replay_pods).iter().enumerate() {
        let name = format!("replay-{i}");
        extra_jobs.push_str(&job_yaml(
            &name,
            *size,
            1000,
            PODSET_REQUIRED_TOPOLOGY,
            RACK_LABEL,
        ));
    }
    let fixture = Fixture::generate(&shape, &extra_jobs)?;
    let servers = Servers::start(
        fixture.services.extender.clone(),
        fixture.names.clone(),
        config.server_workers,
    )?;
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = client_rt.block_on(measure(config, &servers, &fixture));
    servers.stop();
    result
}

/// The generated cluster `config` asks for: nodes of 32 CPUs and 256 GiB.
fn cluster_shape(config: &BenchConfig) -> SyntheticCluster {
    SyntheticCluster {
        blocks: config.blocks,
        racks_per_block: config.racks,
        hosts_per_rack: config.hosts,
        cpu_per_node: 32,
        memory_gi: 256,
        ..SyntheticCluster::default()
    }
}

/// `count` replay pods as gangs of [`REPLAY_GANGS`] sizes; a quarter of `count` is left to
/// lone pods.
fn replay_job_sizes(count: usize) -> Vec<u32> {
    let mut left = count - count / 4;
    let mut sizes = Vec::new();
    for size in REPLAY_GANGS.iter().cycle() {
        if left == 0 {
            break;
        }
        let size = (*size as usize).min(left);
        sizes.push(size as u32);
        left -= size;
    }
    sizes
}

/// kube-tas and the floor, serving on one runtime of their own (one worker per core, as
/// `serve`, unless told how many).
struct Servers {
    kube_tas: SocketAddr,
    floor: SocketAddr,
    /// The runtime's worker threads.
    workers: usize,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Servers {
    fn start(
        extender: Extender,
        names: Vec<String>,
        workers: Option<usize>,
    ) -> anyhow::Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if let Some(workers) = workers {
                builder.worker_threads(workers);
            }
            // Named apart from the client's threads, for profiles.
            let rt = match builder.thread_name("bench-servers").enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(anyhow::Error::new(e)));
                    return;
                }
            };
            let workers = rt.metrics().num_workers();
            rt.block_on(async move {
                let started = async {
                    let config = ServeConfig {
                        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                        admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                        ..ServeConfig::default()
                    };
                    let server = crate::server::start(&config, extender).await?;
                    server.readiness().mark_ready();
                    let floor = std::net::TcpListener::bind(("127.0.0.1", 0))?;
                    let floor_addr = floor.local_addr()?;
                    let floor_server = crate::server::with_timeouts(axum_server::from_tcp(floor)?);
                    tokio::spawn(floor_server.serve(floor::router(names).into_make_service()));
                    anyhow::Ok((server, floor_addr))
                };
                match started.await {
                    Ok((server, floor_addr)) => {
                        let _ = ready_tx.send(Ok((server.main_addr(), floor_addr, workers)));
                        let _ = stop_rx.await;
                        drop(server);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        });
        let (kube_tas, floor, workers) = ready_rx
            .recv()
            .context("the server thread stopped before it listened")??;
        Ok(Self {
            kube_tas,
            floor,
            workers,
            stop,
            thread,
        })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn client(connections: usize) -> HttpClient {
    let mut connector = HttpConnector::new();
    // Go's net/http sets TCP_NODELAY too; without it small bodies wait for delayed ACKs.
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(connections)
        .build(connector)
}

/// One POST; its round-trip time and answer.
async fn post(
    client: &HttpClient,
    addr: SocketAddr,
    path: &str,
    body: Bytes,
) -> anyhow::Result<(Duration, Bytes)> {
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("http://{addr}{path}"))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    let started = Instant::now();
    let response = client.request(request).await?;
    let status = response.status();
    let answer = response.into_body().collect().await?.to_bytes();
    let elapsed = started.elapsed();
    if status != StatusCode::OK {
        bail!(
            "{path}: HTTP {status}: {}",
            String::from_utf8_lossy(&answer[..answer.len().min(300)])
        );
    }
    Ok((elapsed, answer))
}

async fn measure(
    config: &BenchConfig,
    servers: &Servers,
    fixture: &Fixture,
) -> anyhow::Result<Report> {
    let names = &fixture.names;
    let k = config
        .names
        .unwrap_or_else(|| requests::sample_size(names.len()))
        .clamp(1, names.len());
    let http = client(config.mutate_concurrency.max(1));
    let rows_bodies = fixture.rows(k)?;
    let mut rows = Vec::new();
    for row in &rows_bodies {
        eprintln!("bench: {}", row.call);
        fixture.services.prepare(row);
        rows.push(measure_row(config, servers, &fixture.services, &http, row).await?);
    }
    let concurrent = if config.mutate_concurrency > 0 {
        eprintln!(
            "bench: /mutate at concurrency {}",
            config.mutate_concurrency
        );
        let reviews = rows_bodies
            .iter()
            .find(|r| r.path == "/mutate")
            .map(|r| r.bodies.as_slice())
            .unwrap_or_default();
        Some(measure_concurrent(config, servers, &http, reviews).await?)
    } else {
        None
    };
    let replay = if config.replay_pods > 0 {
        eprintln!("bench: replaying {} pods", config.replay_pods);
        Some(replay(config, servers, &http, fixture, k).await?)
    } else {
        None
    };
    Ok(Report {
        nodes: names.len(),
        names: k,
        server_workers: servers.workers,
        rows,
        replay,
        concurrent,
    })
}

async fn measure_row(
    config: &BenchConfig,
    servers: &Servers,
    services: &Services,
    http: &HttpClient,
    row: &RowBodies,
) -> anyhow::Result<Row> {
    let total = config.warmup + config.samples;
    let mut ours = Samples::with_capacity(config.samples);
    let mut floor = Samples::with_capacity(config.samples);
    let mut sent = 0;
    let mut bytes = 0usize;
    let mut answer_bytes = 0usize;
    let mut answers: Vec<(usize, Bytes)> = Vec::with_capacity(CHUNK);
    while sent < total {
        let chunk = CHUNK.min(total - sent);
        for target in [
            Some(servers.kube_tas),
            config.compare_floor.then_some(servers.floor),
        ] {
            let Some(addr) = target else { continue };
            // A chunk's answers are read once it is sent, each server's alike (kube-tas's
            // checked, the floor's parsed): reading one between two requests would give the
            // client work (and the caches a scrub) before one server's requests only.
            answers.clear();
            for j in sent..sent + chunk {
                let (body, _) = &row.bodies[j % row.bodies.len()];
                let path = if addr == servers.kube_tas {
                    row.path
                } else {
                    row.floor_path
                };
                let (took, answer) = post(http, addr, path, body.clone()).await?;
                if j >= config.warmup {
                    if addr == servers.kube_tas {
                        ours.push(took);
                        bytes += body.len();
                        answer_bytes += answer.len();
                    } else {
                        floor.push(took);
                    }
                }
                answers.push((j, answer));
            }
            for (j, answer) in &answers {
                if addr == servers.kube_tas {
                    let (_, expect) = &row.bodies[j % row.bodies.len()];
                    expect
                        .check(answer)
                        .with_context(|| format!("{}: request {j}", row.call))?;
                } else {
                    serde_json::from_slice::<serde_json::Value>(answer).with_context(|| {
                        format!(
                            "{}: the floor's answer to request {j} is not JSON",
                            row.call
                        )
                    })?;
                }
            }
        }
        sent += chunk;
    }
    let (kube_tas_service, floor_service) = measure_service(config, services, row)?;
    Ok(Row {
        call: row.call.clone(),
        request_bytes: bytes / ours.len().max(1),
        answer_bytes: answer_bytes / ours.len().max(1),
        kube_tas: ours.summary(),
        floor: config.compare_floor.then(|| floor.summary()),
        kube_tas_service,
        floor_service,
    })
}

/// The row's service time in process: each body handed to the route's service (kube-tas's
/// and, when compared, the floor's) and timed until its answer is encoded and dropped;
/// interleaved in chunks as the round trips are. kube-tas's answers are checked here too.
fn measure_service(
    config: &BenchConfig,
    services: &Services,
    row: &RowBodies,
) -> anyhow::Result<(Summary, Option<Summary>)> {
    let total = config.warmup + config.samples;
    let mut ours = Samples::with_capacity(config.samples);
    let mut floor = Samples::with_capacity(config.samples);
    let mut sent = 0;
    while sent < total {
        let chunk = CHUNK.min(total - sent);
        for j in sent..sent + chunk {
            let (body, expect) = &row.bodies[j % row.bodies.len()];
            let started = Instant::now();
            let answer = services.kube_tas(row.path, body);
            let took = started.elapsed();
            expect
                .check(&answer)
                .with_context(|| format!("{} in process: request {j}", row.call))?;
            if j >= config.warmup {
                ours.push(took);
            }
        }
        if config.compare_floor {
            for j in sent..sent + chunk {
                let (body, _) = &row.bodies[j % row.bodies.len()];
                let started = Instant::now();
                let answer = services.floor(row.floor_path, body);
                let took = started.elapsed();
                if answer.is_empty() {
                    bail!("{}: the floor could not read request {j}", row.call);
                }
                if j >= config.warmup {
                    floor.push(took);
                }
            }
        }
        sent += chunk;
    }
    Ok((
        ours.summary(),
        config.compare_floor.then(|| floor.summary()),
    ))
}

async fn measure_concurrent(
    config: &BenchConfig,
    servers: &Servers,
    http: &HttpClient,
    reviews: &[(Bytes, Expect)],
) -> anyhow::Result<Concurrent> {
    let connections = config.mutate_concurrency;
    let mut runs = Vec::new();
    for target in [
        Some(servers.kube_tas),
        config.compare_floor.then_some(servers.floor),
    ] {
        let Some(addr) = target else {
            runs.push(None);
            continue;
        };
        let per_connection = (config.samples / connections).max(1);
        let started = Instant::now();
        let tasks: Vec<_> = (0..connections)
            .map(|c| {
                let http = http.clone();
                let reviews = reviews.to_vec();
                let check = addr == servers.kube_tas;
                async move {
                    let mut samples = Samples::with_capacity(per_connection);
                    for j in 0..per_connection {
                        let (body, expect) = &reviews[(c * per_connection + j) % reviews.len()];
                        let (took, answer) = post(&http, addr, "/mutate", body.clone()).await?;
                        if check {
                            expect.check(&answer)?;
                        }
                        samples.push(took);
                    }
                    anyhow::Ok(samples)
                }
            })
            .collect();
        let mut all = Samples::with_capacity(per_connection * connections);
        for samples in futures::future::join_all(tasks).await {
            all.extend(&samples?);
        }
        let rate = all.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
        runs.push(Some((rate, all.summary())));
    }
    let floor = runs.pop().flatten();
    let kube_tas = runs.pop().flatten().context("the kube-tas run")?;
    Ok(Concurrent {
        connections,
        kube_tas,
        floor,
    })
}

/// A pod of the replay: its JSON, what it requests (`pods` included), and how often filter
/// has seen it.
struct Queued {
    pod: Value,
    requests: crate::topology::ResourceList,
    attempts: usize,
}

impl Queued {
    fn new(pod: Value) -> anyhow::Result<Self> {
        let spec: k8s_openapi::api::core::v1::PodSpec =
            serde_json::from_value(pod["spec"].clone()).context("a generated pod's spec")?;
        let mut requests = crate::cluster::pod_requests::pod_requests(&spec, "spec")
            .map_err(|e| anyhow::anyhow!("a generated pod's requests: {e}"))?;
        requests.insert(crate::topology::resources::PODS.to_string(), 1);
        Ok(Self {
            pod,
            requests,
            attempts: 0,
        })
    }

    fn fits(&self, left: &crate::topology::ResourceList) -> bool {
        self.requests
            .iter()
            .all(|(r, want)| *want == 0 || left.get(r).is_some_and(|have| have >= want))
    }
}

/// The `i`-th window of `k` names among the nodes `pod` fits on, as kube-scheduler's
/// `findNodesThatPassFilters` collects them from its rotating start index.
fn fitting_window(
    quoted: &[String],
    names_room: (&[&str], &Room),
    k: usize,
    start: &mut usize,
    pod: &Queued,
) -> String {
    let (names, room) = names_room;
    let n = names.len();
    let mut out = Vec::with_capacity(k);
    let mut looked = 0;
    while looked < n && out.len() < k {
        let i = (*start + looked) % n;
        looked += 1;
        if room.get(names[i]).is_some_and(|left| pod.fits(left)) {
            out.push(quoted[i].as_str());
        }
    }
    *start = (*start + looked) % n;
    out.join(",")
}

async fn replay(
    config: &BenchConfig,
    servers: &Servers,
    http: &HttpClient,
    fixture: &Fixture,
    k: usize,
) -> anyhow::Result<Replay> {
    let quoted = &fixture.quoted;
    let jobs = &fixture.jobs;
    let mut room = fixture.room.clone();
    let names: Vec<&str> = fixture.names.iter().map(String::as_str).collect();
    let mut queue = std::collections::VecDeque::new();
    let mut lone = 0usize;
    for job in jobs.iter().filter(|j| j.name.starts_with("replay-")) {
        for index in 0..job.count {
            queue.push_back(Queued::new(requests::gang_pod(job, index))?);
            // A lone pod after every third gang pod: a quarter of all.
            if index % 3 == 2 && lone < config.replay_pods / 4 {
                queue.push_back(Queued::new(requests::lone_pod(1_000_000 + lone))?);
                lone += 1;
            }
        }
    }
    while lone < config.replay_pods / 4 {
        queue.push_back(Queued::new(requests::lone_pod(1_000_000 + lone))?);
        lone += 1;
    }
    let (mut filters, mut prioritizes, mut binds) =
        (Samples::default(), Samples::default(), Samples::default());
    let (mut bound, mut unplaced, mut start) = (0usize, 0usize, 0usize);
    let started = Instant::now();
    while let Some(mut queued) = queue.pop_front() {
        let window = fitting_window(quoted, (&names, &room), k, &mut start, &queued);
        if window.is_empty() {
            bail!(
                "replay: no node has room for {}",
                queued.pod["metadata"]["name"]
            );
        }
        let body = requests::request_body(&queued.pod, &window);
        let (took, answer) = post(http, servers.kube_tas, "/scheduler/filter", body).await?;
        filters.push(took);
        let value: Value = serde_json::from_slice(&answer)?;
        if value["Error"] != "" {
            bail!("replay filter: {}", value["Error"]);
        }
        let passing: Vec<String> = value["NodeNames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect();
        let node = match passing.as_slice() {
            [] => {
                queued.attempts += 1;
                if queued.attempts >= MAX_ATTEMPTS {
                    unplaced += 1;
                } else {
                    queue.push_back(queued);
                }
                continue;
            }
            [only] => only.clone(),
            more => {
                let names: Vec<String> = more
                    .iter()
                    .map(|n| Value::from(n.as_str()).to_string())
                    .collect();
                let body = requests::request_body(&queued.pod, &names.join(","));
                let (took, answer) =
                    post(http, servers.kube_tas, "/scheduler/prioritize", body).await?;
                prioritizes.push(took);
                let value: Value = serde_json::from_slice(&answer)?;
                best_host(&value).unwrap_or(&more[0]).to_string()
            }
        };
        let meta = &queued.pod["metadata"];
        let body = serde_json::json!({
            "PodName": meta["name"], "PodNamespace": meta["namespace"],
            "PodUID": meta["uid"], "Node": node,
        });
        let (took, answer) = post(
            http,
            servers.kube_tas,
            "/scheduler/bind",
            Bytes::from(body.to_string()),
        )
        .await?;
        binds.push(took);
        let value: Value = serde_json::from_slice(&answer)?;
        if value["Error"] != "" {
            bail!("replay bind to {node}: {}", value["Error"]);
        }
        if let Some(left) = room.get_mut(&node) {
            for (r, want) in &queued.requests {
                if let Some(have) = left.get_mut(r) {
                    *have -= want;
                }
            }
        }
        bound += 1;
    }
    Ok(Replay {
        verbs: vec![
            ("filter", filters.summary()),
            ("prioritize", prioritizes.summary()),
            ("bind", binds.summary()),
        ],
        bound,
        unplaced,
        filters: filters.len(),
        wall: started.elapsed(),
    })
}

/// A row's cells: kube-tas's percentiles, the floor's, and the ratios (`whole`: µs without
/// decimals, else one decimal).
fn columns(ours: &Summary, floor: Option<&Summary>, whole: bool) -> (String, String, String) {
    let digits = usize::from(!whole);
    let ours_text = format!(
        "{:.digits$} / {:.digits$} / {:.digits$}",
        ours.p50, ours.p99, ours.p999
    );
    match floor {
        Some(f) => (
            ours_text,
            format!("{:.digits$} / {:.digits$}", f.p50, f.p99),
            format!(
                "{:.2} / {:.2}",
                ours.p50 / f.p50.max(1e-9),
                ours.p99 / f.p99.max(1e-9)
            ),
        ),
        None => (ours_text, "-".to_string(), "-".to_string()),
    }
}

/// The report as text: one line per row, ratios to the floor when measured.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let width = report
        .rows
        .iter()
        .map(|r| r.call.chars().count())
        .fold(44, usize::max);
    let _ = writeln!(
        out,
        "kube-tas bench: {} nodes, {} names per extender request, servers on {} worker \
         thread(s); round trip over loopback, one request at a time; µs",
        report.nodes, report.names, report.server_workers
    );
    let titles = ["kube-tas p50/p99/p99.9", "floor p50/p99", "ratio p50/p99"];
    table_line(&mut out, width, ["call", "bytes", "answer"], titles);
    for row in &report.rows {
        let (ours, floor, ratio) = columns(&row.kube_tas, row.floor.as_ref(), true);
        let (bytes, answer) = (row.request_bytes.to_string(), row.answer_bytes.to_string());
        table_line(
            &mut out,
            width,
            [&row.call, &bytes, &answer],
            [&ours, &floor, &ratio],
        );
    }
    let _ = writeln!(
        out,
        "service time in process (the route's work from body to encoded answer, no HTTP); µs"
    );
    table_line(&mut out, width, ["call", "", ""], titles);
    for row in &report.rows {
        let (ours, floor, ratio) =
            columns(&row.kube_tas_service, row.floor_service.as_ref(), false);
        table_line(
            &mut out,
            width,
            [&row.call, "", ""],
            [&ours, &floor, &ratio],
        );
    }
    if let Some(c) = &report.concurrent {
        let (rate, s) = &c.kube_tas;
        let _ = write!(
            out,
            "/mutate at concurrency {}: kube-tas {rate:.0} req/s (p50 {:.0}, p99 {:.0})",
            c.connections, s.p50, s.p99
        );
        match &c.floor {
            Some((frate, f)) => {
                let _ = writeln!(
                    out,
                    "; floor {frate:.0} req/s (p50 {:.0}, p99 {:.0}); ratio {:.2}",
                    f.p50,
                    f.p99,
                    frate / rate.max(1e-9)
                );
            }
            None => out.push('\n'),
        }
    }
    if let Some(r) = &report.replay {
        let _ = writeln!(
            out,
            "replay: {} pods bound ({} given up) in {:.2?}: {:.0} pods/s, {} filter calls \
             ({:.1} per bound pod)",
            r.bound,
            r.unplaced,
            r.wall,
            r.bound as f64 / r.wall.as_secs_f64().max(1e-9),
            r.filters,
            r.filters as f64 / r.bound.max(1) as f64
        );
        for (verb, s) in &r.verbs {
            let _ = writeln!(
                out,
                "  {verb:<11} {} calls: p50 {:.0} / p99 {:.0} / p99.9 {:.0}",
                s.count, s.p50, s.p99, s.p999
            );
        }
    }
    out
}

/// One line of a report table: the call padded to `width`, then the numbers' columns.
fn table_line(
    out: &mut String,
    width: usize,
    [call, bytes, answer]: [&str; 3],
    [ours, floor, ratio]: [&str; 3],
) {
    let _ = writeln!(
        out,
        "{call:<width$} {bytes:>8} {answer:>7} {ours:>22} {floor:>16} {ratio:>13}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_sizes_cover_three_quarters() {
        let sizes = replay_job_sizes(400);
        assert_eq!(sizes.iter().sum::<u32>(), 300);
        assert_eq!(&sizes[..3], &[8, 32, 128]);
        assert!(replay_job_sizes(0).is_empty());
    }

    /// A row's answers are checked after each chunk, not between requests: a wrong answer in
    /// the warm-up or the last, short chunk still stops the row with the request named, and
    /// the right expectations pass.
    #[test]
    fn a_wrong_answer_stops_the_row_though_checked_after_its_chunk() {
        let config = BenchConfig {
            blocks: 1,
            racks: 2,
            // A rack of 8 nodes of 32 CPUs holds the fixture's 256-pod gang.
            hosts: 8,
            samples: CHUNK + 3,
            warmup: 2,
            compare_floor: true,
            replay_pods: 0,
            mutate_concurrency: 0,
            ..BenchConfig::default()
        };
        let fixture = Fixture::generate(&cluster_shape(&config), "").unwrap();
        let servers = Servers::start(
            fixture.services.extender.clone(),
            fixture.names.clone(),
            Some(1),
        )
        .unwrap();
        let client_rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let http = client(1);
        let rows = fixture.rows(fixture.names.len()).unwrap();
        let mutate = rows.iter().find(|r| r.path == "/mutate").unwrap();
        let measured = client_rt.block_on(measure_row(
            &config,
            &servers,
            &fixture.services,
            &http,
            mutate,
        ));
        let row = measured.unwrap();
        assert_eq!(row.kube_tas.count, config.samples);

        let total = config.warmup + config.samples;
        for wrong in [0, total - 1] {
            // One body per request, so that only request `wrong` expects another answer.
            let mut bodies: Vec<_> = (0..total)
                .map(|j| mutate.bodies[j % mutate.bodies.len()].clone())
                .collect();
            bodies[wrong].1 = Expect::Allowed("another-uid".to_string());
            let row = RowBodies {
                bodies,
                ..mutate.clone()
            };
            let measured = client_rt.block_on(measure_row(
                &config,
                &servers,
                &fixture.services,
                &http,
                &row,
            ));
            let error = format!("{:#}", measured.unwrap_err());
            assert!(
                error.contains(&format!("/mutate, Job pod: request {wrong}:"))
                    && error.contains("which is not what the request needs"),
                "{error}"
            );
        }
        servers.stop();
    }
}
