//! Prometheus metrics (prometheus-client, prefix `kube_tas`), served as OpenMetrics text on
//! the admin port.
//!
//! * `kube_tas_http_requests_total{route, code}`: requests per matched route and status code;
//! * `kube_tas_http_request_duration_seconds{route}`: handler latency, buckets 20 µs .. 1.3 s;
//! * the plan numbers of [`crate::plans::PlanStats`], read from [`Extender::stats`] at scrape
//!   time (`kube_tas_plans_made_total`, `..._plans_expired_total`, `..._plans_active`,
//!   `..._seats_held`, `..._pods_bound_total`, `..._groups_not_fit_total`);
//! * `kube_tas_admission_reviews_total{decision}`: `/mutate` answers by decision;
//! * `kube_tas_tls_cert_not_after_seconds`: when the served certificate expires (unix
//!   seconds), present only while TLS is on;
//! * `kube_tas_binds_failed_total`: Bindings the API server refused;
//! * `kube_tas_seats_reopened_total`: seats whose pods went away before they were bound,
//!   opened again for their group's next pod (or handed to the pod made in their place);
//! * `kube_tas_replacements_total{result}`: running workloads' lost pods planned beside them
//!   (`placed`) or without room in their domain (`failed`);
//! * `kube_tas_cluster_nodes`, `kube_tas_cluster_pods`: nodes and capacity-holding pods in the
//!   cluster state; `kube_tas_cluster_node_ids`: node ids in use (the nodes, and deleted ones
//!   not given back yet: it stays near `kube_tas_cluster_nodes` under node churn);
//! * `kube_tas_flavor_nodes_left_out{flavor,reason}`: nodes of a TAS flavor that take none of
//!   its pods, as its last tree built says (a scrape builds no tree);
//! * `kube_tas_topology_tree_builds_total`: flavor trees built since start;
//! * in live mode, per watched kind: `kube_tas_watch_errors_total{kind}`,
//!   `kube_tas_watch_events_total{kind}`, `kube_tas_watch_writes_total{kind}` (write locks
//!   taken for them), `kube_tas_watch_relists_total{kind}`,
//!   `kube_tas_watch_synced{kind}` (1 once its first list is applied) and
//!   `kube_tas_watch_served{kind}` (0 while the cluster answers 404: a CRD not installed);
//!   and `kube_tas_leader` (1 while this replica plans and binds).
//!
//! Labels are bounded: `route` is the router's matched path (unmatched requests are not
//! counted), `code` a status code. The main routes' latency and `code="200"` series exist from
//! the start (at 0) and are counted through handles taken once, so counting a request costs
//! no allocation and no label lookup.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::MatchedPath;
use axum::http::Request;
use axum::response::Response;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tower::{Layer, Service};

use crate::cluster::state::FlavorTopology;

use crate::cluster::live::WatchStatus;
use crate::extender::Extender;

/// Labels of the per-kind watch metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The watched kind's plural (`nodes`, `topologies`).
    pub kind: &'static str,
}

/// Labels of `kube_tas_flavor_nodes_left_out`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeftOutLabels {
    /// The ResourceFlavor.
    pub flavor: String,
    /// Why (`not_ready`, `no_ready_condition`, `unschedulable`, `missing_label`,
    /// `no_allocatable`).
    pub reason: &'static str,
}

/// Labels of `kube_tas_replacements_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `placed` or `failed`.
    pub result: &'static str,
}

/// The content type of [`Metrics::encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of the request counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The matched route, e.g. `/scheduler/filter`.
    pub route: String,
    /// The HTTP status code of the answer.
    pub code: u16,
}

/// Labels of the latency histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteOnly {
    /// The matched route.
    pub route: String,
}

/// Labels of the admission decision counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `allowed`, `patched`, `denied` or `invalid`.
    pub decision: &'static str,
}

/// The server's metrics; cheap to clone (everything is shared).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    requests: Family<RouteLabels, Counter>,
    latency: Family<RouteOnly, Histogram>,
    /// The series of the main routes' usual answer, looked up once: counting a request on
    /// them takes no label allocation and no family lookup.
    hot: Vec<HotRoute>,
    admission: Family<DecisionLabels, Counter>,
    cert_not_after: Arc<AtomicI64>,
    watches: Arc<OnceLock<WatchStatus>>,
}

impl Metrics {
    /// A registry with the request metrics, the plan numbers of `extender` and the (unset)
    /// certificate expiry.
    pub fn new(extender: Extender) -> Self {
        let mut registry = Registry::with_prefix("kube_tas");
        let requests = Family::<RouteLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route and status code",
            requests.clone(),
        );
        let latency = Family::<RouteOnly, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(20e-6, 2.0, 17))) as fn() -> Histogram,
        );
        registry.register_with_unit(
            "http_request_duration",
            "Time to answer an HTTP request, by route",
            Unit::Seconds,
            latency.clone(),
        );
        let admission = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "admission_reviews",
            "AdmissionReviews answered by /mutate, by decision (allowed, patched, denied, invalid)",
            admission.clone(),
        );
        let hot = HOT_ROUTES
            .iter()
            .map(|&route| HotRoute {
                route,
                latency: latency
                    .get_or_create(&RouteOnly {
                        route: route.to_string(),
                    })
                    .clone(),
                ok: requests
                    .get_or_create(&RouteLabels {
                        route: route.to_string(),
                        code: 200,
                    })
                    .clone(),
            })
            .collect();
        let cert_not_after = Arc::new(AtomicI64::new(0));
        let watches = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(LiveValues {
            extender,
            cert_not_after: cert_not_after.clone(),
            watches: watches.clone(),
        }));
        Self {
            inner: Arc::new(Inner {
                registry,
                requests,
                latency,
                hot,
                admission,
                cert_not_after,
                watches,
            }),
        }
    }

    /// Reports the health of the live watches from now on (live mode; set once).
    pub fn set_watch_status(&self, status: WatchStatus) {
        let _ = self.inner.watches.set(status);
    }

    /// Counts one answered request on `route` and its latency.
    pub fn observe(&self, route: &str, code: u16, elapsed: Duration) {
        let hot = self.inner.hot.iter().find(|h| h.route == route);
        match hot {
            Some(hot) => hot.latency.observe(elapsed.as_secs_f64()),
            None => self
                .inner
                .latency
                .get_or_create(&RouteOnly {
                    route: route.to_string(),
                })
                .observe(elapsed.as_secs_f64()),
        }
        match hot {
            Some(hot) if code == 200 => hot.ok.inc(),
            _ => self
                .inner
                .requests
                .get_or_create(&RouteLabels {
                    route: route.to_string(),
                    code,
                })
                .inc(),
        };
    }

    /// Counts one AdmissionReview answered with `decision` (`allowed`, `patched`, `denied`
    /// or `invalid`).
    pub fn observe_admission(&self, decision: &'static str) {
        self.inner
            .admission
            .get_or_create(&DecisionLabels { decision })
            .inc();
    }

    /// Records when the served certificate expires (unix seconds).
    pub fn set_cert_not_after(&self, unix_seconds: i64) {
        self.inner
            .cert_not_after
            .store(unix_seconds, Ordering::Relaxed);
    }

    /// Everything, as OpenMetrics text (see [`OPENMETRICS_CONTENT_TYPE`]). Locks the plan
    /// book briefly to read its numbers.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)?;
        Ok(text)
    }
}

/// Tower layer (mount with `route_layer`, so [`MatchedPath`] is known) that counts and times
/// every request of a matched route. Its future wraps the route's own without boxing it: the
/// extender's requests pass through it inside kube-scheduler's cycle.
#[derive(Clone)]
pub struct TrackLayer {
    metrics: Metrics,
}

impl TrackLayer {
    /// Counts into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for TrackLayer {
    type Service = Track<S>;

    fn layer(&self, inner: S) -> Track<S> {
        Track {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`TrackLayer`] makes.
#[derive(Clone)]
pub struct Track<S> {
    inner: S,
    metrics: Metrics,
}

impl<S, B> Service<Request<B>> for Track<S>
where
    S: Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = TrackFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let route = request.extensions().get::<MatchedPath>().cloned();
        TrackFuture {
            started: Instant::now(),
            counted: route.map(|route| (self.metrics.clone(), route)),
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// A route's future, counted and timed when it is ready.
    pub struct TrackFuture<F> {
        #[pin]
        inner: F,
        counted: Option<(Metrics, MatchedPath)>,
        started: Instant,
    }
}

impl<F, E> Future for TrackFuture<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = std::task::ready!(this.inner.poll(cx));
        if let (Ok(response), Some((metrics, route))) = (&output, this.counted.take()) {
            metrics.observe(
                route.as_str(),
                response.status().as_u16(),
                this.started.elapsed(),
            );
        }
        Poll::Ready(output)
    }
}

/// The routes whose usual answer is counted through [`HotRoute`]s.
const HOT_ROUTES: [&str; 4] = [
    "/scheduler/filter",
    "/scheduler/prioritize",
    "/scheduler/bind",
    "/mutate",
];

/// One main route's latency histogram and its `code="200"` counter.
struct HotRoute {
    route: &'static str,
    latency: Histogram,
    ok: Counter,
}

/// Values read at scrape time: the plan book's numbers and the certificate expiry.
struct LiveValues {
    extender: Extender,
    cert_not_after: Arc<AtomicI64>,
    watches: Arc<OnceLock<WatchStatus>>,
}

impl std::fmt::Debug for LiveValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveValues").finish_non_exhaustive()
    }
}

impl Collector for LiveValues {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.extender.stats();
        let counters = [
            ("plans_made", "Plans made since start", s.plans_made),
            (
                "plans_expired",
                "Plans dropped because their pods never came",
                s.plans_expired,
            ),
            (
                "pods_bound",
                "Pods bound through kube-tas since start",
                s.pods_bound,
            ),
            (
                "groups_not_fit",
                "Group placements that did not fit",
                s.groups_not_fit,
            ),
            (
                "binds_failed",
                "Bindings the API server refused (the seat was freed)",
                s.binds_failed,
            ),
            (
                "seats_reopened",
                "Seats whose pods went away before they were bound, opened again for their \
                 group's next pod",
                s.seats_reopened,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let mut family = encoder.encode_descriptor(
            "replacements",
            "Pods of running workloads planned beside them (a node failed, or a restart), by \
             result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, value) in [
            ("placed", s.replacements_placed),
            ("failed", s.replacements_failed),
        ] {
            ConstCounter::new(value).encode(family.encode_family(&ResultLabels { result })?)?;
        }
        let gauges = [
            ("plans_active", "Plans alive now", s.plans_active),
            (
                "seats_held",
                "Seats held by plans and not bound yet",
                s.seats_held,
            ),
        ];
        // The counts are read under the state's read lock, which watch writers hold for one
        // event at a time only.
        let (nodes, node_ids, pods) = {
            let state = self.extender.state().read();
            let ids = state.node_id_count() as u64;
            (state.node_count() as u64, ids, state.pod_count() as u64)
        };
        let gauges = gauges.into_iter().chain([
            ("cluster_nodes", "Nodes in the cluster state", nodes),
            (
                "cluster_node_ids",
                "Node ids in use: the nodes, and deleted nodes something still refers to or \
                 not swept yet",
                node_ids,
            ),
            (
                "cluster_pods",
                "Pods holding capacity in the cluster state",
                pods,
            ),
        ]);
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        let (builds, built) = {
            let state = self.extender.state().read();
            (state.tree_builds(), state.built_flavors())
        };
        let counter = ConstCounter::new(builds);
        counter.encode(encoder.encode_descriptor(
            "topology_tree_builds",
            "Flavor topology trees built since start (after a change of nodes or Kueue \
             objects; in live mode ahead of the requests)",
            None,
            counter.metric_type(),
        )?)?;
        // The trees built so far: a scrape builds none (the live mode's warmer keeps them at
        // the cluster's generation).
        encode_left_out(&mut encoder, &built)?;
        if let Some(watches) = self.watches.get() {
            encode_watches(&mut encoder, watches)?;
            let leader = ConstGauge::new(i64::from(self.extender.leadership().is_leader()));
            leader.encode(encoder.encode_descriptor(
                "leader",
                "1 while this replica is the one that plans and binds",
                None,
                leader.metric_type(),
            )?)?;
        }
        let not_after = self.cert_not_after.load(Ordering::Relaxed);
        // 0 means "no TLS" (or not loaded yet): report nothing rather than a cert that expired
        // in 1970 and would page someone.
        if not_after != 0 {
            let gauge = ConstGauge::new(not_after);
            gauge.encode(encoder.encode_descriptor(
                "tls_cert_not_after",
                "When the served TLS certificate expires, as unix time",
                Some(&Unit::Seconds),
                gauge.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

/// `kube_tas_flavor_nodes_left_out{flavor,reason}`: nodes of each TAS flavor that take none
/// of its pods.
fn encode_left_out(
    encoder: &mut DescriptorEncoder,
    flavors: &[Arc<FlavorTopology>],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "flavor_nodes_left_out",
        "Nodes of a TAS flavor that take none of its pods (not Ready, cordoned, a level label \
         missing, nothing allocatable), by reason",
        None,
        prometheus_client::metrics::MetricType::Gauge,
    )?;
    for f in flavors {
        let mut by_slug: std::collections::BTreeMap<&str, usize> = Default::default();
        for (reason, (count, _)) in &f.tree.left_out.by_reason {
            *by_slug.entry(reason.slug()).or_default() += count;
        }
        for (reason, count) in by_slug {
            ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX)).encode(
                family.encode_family(&LeftOutLabels {
                    flavor: f.name.clone(),
                    reason,
                })?,
            )?;
        }
    }
    Ok(())
}

/// The per-kind watch metrics.
fn encode_watches(
    encoder: &mut DescriptorEncoder,
    watches: &WatchStatus,
) -> Result<(), std::fmt::Error> {
    type Read = fn(&crate::cluster::live::KindStatus) -> u64;
    let counters: [(&str, &str, Read); 4] = [
        (
            "watch_errors",
            "Watch errors, by kind (retried with backoff)",
            |k| k.errors(),
        ),
        ("watch_events", "Watch events applied, by kind", |k| {
            k.events()
        }),
        (
            "watch_writes",
            "State write locks taken for listed objects and events, by kind (what a watch \
             holds at once goes in under one)",
            |k| k.writes(),
        ),
        ("watch_relists", "Complete lists applied, by kind", |k| {
            k.relists()
        }),
    ];
    for (name, help, read) in counters {
        let mut family = encoder.encode_descriptor(
            name,
            help,
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for k in watches.kinds() {
            ConstCounter::new(read(k))
                .encode(family.encode_family(&KindLabels { kind: k.name })?)?;
        }
    }
    let gauges: [(&str, &str, Read); 2] = [
        (
            "watch_synced",
            "1 once the kind's first list is applied",
            |k| u64::from(k.is_synced()),
        ),
        (
            "watch_served",
            "0 while the cluster does not serve the kind (404)",
            |k| u64::from(k.is_served()),
        ),
    ];
    for (name, help, read) in gauges {
        let mut family = encoder.encode_descriptor(
            name,
            help,
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for k in watches.kinds() {
            ConstGauge::new(read(k) as i64)
                .encode(family.encode_family(&KindLabels { kind: k.name })?)?;
        }
    }
    Ok(())
}
