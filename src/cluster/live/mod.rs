//! The live event source: kube-runtime watchers on the API server feeding the
//! [`ClusterState`](super::state::ClusterState), one task per kind.
//!
//! * Nodes, Pods (bound and unfinished only, by field selector), Jobs, and Kueue's
//!   `v1beta2` Topology, ResourceFlavor, ClusterQueue and LocalQueue ([`kinds`]); Kueue's
//!   Workloads, only for which Jobs Kueue itself manages; the Workload API's PodGroups and
//!   CompositePodGroups (`scheduling.k8s.io`, and kube-tas's `kube-tas.io` copies, whichever
//!   the cluster serves) and the pending pods that name a PodGroup.
//! * Each watch lists, then watches from the list's resourceVersion; the API server's 410 Gone
//!   (or any break) makes kube-runtime relist, and a relist **replaces** what it lists: objects
//!   deleted during the gap are removed (`remove_unlisted`). Listed objects are applied as they
//!   arrive and only their keys kept until the list ends, so a 150k-pod list is never held
//!   whole. A bind the relist could not settle (assumed after it began, its pod gone before
//!   its list) is read back once it stays unconfirmed ([`unconfirmed`]).
//! * Events are applied as they come, each with those the watch already holds (at most
//!   [`BURST`]; removals after a relist in chunks of [`RELIST_CHUNK`]) under one write lock,
//!   so readers never wait behind a whole list and a busy watch does not wait for the lock
//!   once per event.
//! * Errors are retried with kube-runtime's default backoff and counted per kind
//!   ([`KindStatus`]); a kind the cluster does not serve (404: Kueue's CRDs not installed),
//!   or an optional kind (JobSet, LeaderWorkerSet, the Workload-API kinds) kube-tas may not
//!   read (403), is logged
//!   once, reported as not served, and does not hold back readiness
//!   ([`WatchStatus::synced`]).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use futures::{FutureExt as _, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::kueue::{ClusterQueue, KueueWorkload, LocalQueue, ResourceFlavor, Topology};
use super::sets::{JobSet, LeaderWorkerSet};
use super::state::{ClusterState, SharedState};

pub mod events;
pub mod kinds;
pub mod leader;
pub mod resources;
pub mod unconfirmed;
mod watched_fields;

pub use kinds::{
    CompositePodGroupV1alpha3, KubeTasCompositePodGroup, KubeTasPodGroup, PendingGroupPod,
    PendingMemberPod, PodGroupV1alpha2, PodGroupV1alpha3, PodGroupV1beta1, WatchedKind,
    WatchedNode, WatchedPod,
};
pub use leader::Leadership;

/// How many objects of a relist are applied under one write lock.
pub const RELIST_CHUNK: usize = 256;

/// The `User-Agent` kube-tas sends (kube 5 sends none unless told), so audit logs and field
/// managers name it.
pub fn user_agent() -> String {
    format!("kube-tas/{}", env!("CARGO_PKG_VERSION"))
}

/// Why no client could be made: the configuration names no usable cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `--kubeconfig` cannot be read or used.
    #[error("cannot use --kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// Nothing to infer a cluster from.
    #[error(
        "no cluster to talk to: no --kubeconfig, no usable KUBECONFIG or ~/.kube/config, and \
         not running in a pod ({0}); give --cluster PATH to serve from manifest files"
    )]
    NoCluster(String),
    /// The configuration was found but the client cannot be built from it.
    #[error("cannot build the Kubernetes client: {0}")]
    Build(String),
}

/// A client from `kubeconfig` when given, else from `KUBECONFIG` / `~/.kube/config`, else
/// the in-cluster service account; it sends kube-tas's `User-Agent`.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let mut config = match kubeconfig {
        Some(path) => {
            let fail = |e: &dyn std::fmt::Display| ClientError::Kubeconfig {
                path: path.display().to_string(),
                message: e.to_string(),
            };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| fail(&e))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| fail(&e))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| ClientError::NoCluster(e.to_string()))?,
    };
    let agent = http::HeaderValue::from_str(&user_agent())
        .map_err(|e| ClientError::Build(e.to_string()))?;
    config.headers.push((http::header::USER_AGENT, agent));
    Client::try_from(config).map_err(|e| ClientError::Build(e.to_string()))
}

/// One watched kind's health, for readiness, logs and metrics.
#[derive(Debug)]
pub struct KindStatus {
    /// The kind's plural (`nodes`).
    pub name: &'static str,
    synced: AtomicBool,
    served: AtomicBool,
    errors: AtomicU64,
    events: AtomicU64,
    writes: AtomicU64,
    relists: AtomicU64,
}

impl KindStatus {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            synced: AtomicBool::new(false),
            served: AtomicBool::new(true),
            errors: AtomicU64::new(0),
            events: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            relists: AtomicU64::new(0),
        }
    }

    /// Its first list has been applied.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    /// The cluster serves the kind (false after a 404 until a list succeeds).
    pub fn is_served(&self) -> bool {
        self.served.load(Ordering::Relaxed)
    }

    /// Watch errors so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Watch events applied so far.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Write locks taken so far to apply listed objects and events (several changes the watch
    /// holds at once go in under one).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Complete lists applied so far (the first one included).
    pub fn relists(&self) -> u64 {
        self.relists.load(Ordering::Relaxed)
    }
}

/// The health of every watch.
#[derive(Debug, Clone, Default)]
pub struct WatchStatus {
    kinds: Vec<Arc<KindStatus>>,
}

impl WatchStatus {
    /// Every kind has applied its first list, or is not served by the cluster.
    pub fn synced(&self) -> bool {
        self.kinds.iter().all(|k| k.is_synced() || !k.is_served())
    }

    /// Each kind's status.
    pub fn kinds(&self) -> &[Arc<KindStatus>] {
        &self.kinds
    }

    fn add(&mut self, name: &'static str) -> Arc<KindStatus> {
        let k = Arc::new(KindStatus::new(name));
        self.kinds.push(k.clone());
        k
    }
}

/// The running watches: their status, and a way to stop them.
pub struct Watches {
    status: WatchStatus,
    cancel: CancellationToken,
    tasks: JoinSet<()>,
}

impl Watches {
    /// Starts one watch per kind, feeding `state`.
    pub fn start(client: Client, state: SharedState) -> Self {
        let cancel = CancellationToken::new();
        let mut status = WatchStatus::default();
        state.write().track_pending_group_pods();
        let mut tasks = JoinSet::new();
        macro_rules! watch {
            ($($kind:ty),*) => {$(
                let kind = status.add(<$kind as WatchedKind>::NAME);
                tasks.spawn(run::<$kind>(
                    client.clone(),
                    state.clone(),
                    kind,
                    cancel.clone(),
                ));
            )*};
        }
        watch!(
            WatchedNode,
            WatchedPod,
            Job,
            Topology,
            ResourceFlavor,
            ClusterQueue,
            LocalQueue,
            JobSet,
            LeaderWorkerSet,
            PendingGroupPod,
            KueueWorkload,
            PodGroupV1beta1,
            PodGroupV1alpha3,
            PodGroupV1alpha2,
            CompositePodGroupV1alpha3,
            KubeTasPodGroup,
            KubeTasCompositePodGroup,
            PendingMemberPod
        );
        Self {
            status,
            cancel,
            tasks,
        }
    }

    /// The watches' health.
    pub fn status(&self) -> &WatchStatus {
        &self.status
    }

    /// Stops every watch and waits for them to end.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// One kind's watch loop, until cancelled.
async fn run<K: WatchedKind>(
    client: Client,
    state: SharedState,
    status: Arc<KindStatus>,
    cancel: CancellationToken,
) {
    let api: Api<K> = Api::all(client);
    let mut stream = watcher(api, K::config()).default_backoff().boxed();
    // Keys listed since the last `Init`: each listed object is applied as it arrives (never
    // buffered whole: 150k pods would take gigabytes), and at `InitDone` whatever the state
    // holds that the list did not name is removed.
    let mut listed: HashSet<String> = HashSet::new();
    // The changes at hand, applied under one write lock, and the step that ended the batch.
    let mut batch: Vec<Change<K>> = Vec::with_capacity(BURST);
    let mut carried: Option<Step<K>> = None;
    loop {
        let step = match carried.take() {
            Some(step) => step,
            None => tokio::select! {
                () = cancel.cancelled() => return,
                item = stream.next() => Step::of(item),
            },
        };
        match step {
            Step::Change(change) => {
                batch.push(change.noted_in(&mut listed));
                // What the stream already holds (the rest of a list page, the events of one
                // chunk) joins the batch, taken before the lock (a poll may parse a page).
                while batch.len() < BURST {
                    match stream.next().now_or_never().map(Step::of) {
                        Some(Step::Change(change)) => batch.push(change.noted_in(&mut listed)),
                        Some(step) => {
                            carried = Some(step);
                            break;
                        }
                        None => break,
                    }
                }
                let mut s = state.write_soon().await;
                status.writes.fetch_add(1, Ordering::Relaxed);
                for change in batch.drain(..) {
                    change.apply(&mut s, &status);
                }
            }
            Step::ListBegan => {
                listed.clear();
                K::relist_began(&mut *state.write_soon().await, Instant::now());
            }
            Step::ListDone => {
                let count = listed.len();
                remove_unlisted::<K>(&state, &std::mem::take(&mut listed)).await;
                status.relists.fetch_add(1, Ordering::Relaxed);
                if !status.served.swap(true, Ordering::Relaxed) {
                    tracing::info!(kind = K::NAME, "the cluster serves this kind now");
                }
                if !status.synced.swap(true, Ordering::Relaxed) {
                    tracing::info!(kind = K::NAME, objects = count, "initial list applied");
                } else {
                    tracing::info!(kind = K::NAME, objects = count, "relisted");
                }
            }
            Step::Failed(e) => {
                status.errors.fetch_add(1, Ordering::Relaxed);
                if K::OPTIONAL && is_forbidden(&e) {
                    if status.served.swap(false, Ordering::Relaxed) {
                        tracing::error!(
                            kind = K::NAME,
                            "kube-tas may not list and watch this optional kind (403): its \
                             workloads are not placed as one until its ClusterRole grants \
                             list and watch; retried with backoff"
                        );
                    }
                } else if is_not_served(&e) {
                    if status.served.swap(false, Ordering::Relaxed) {
                        tracing::warn!(
                            kind = K::NAME,
                            "the cluster does not serve this kind (404); it is skipped and \
                             retried with backoff (install its CRD to use it)"
                        );
                    }
                } else {
                    tracing::warn!(kind = K::NAME, error = %e, "watch error; retrying with backoff");
                }
            }
            Step::Ended => {
                tracing::error!(kind = K::NAME, "watch stream ended");
                return;
            }
        }
    }
}

/// At most this many changes a watch already holds are applied under one write lock (a pod
/// from its API object takes 3–7 µs, so one burst holds the lock a few hundred µs): a watch
/// that found the lock held sleeps a timer tick ([`SharedState::write_soon`]), and what came
/// meanwhile then goes in at once rather than each change waiting a tick of its own.
pub const BURST: usize = 64;

/// What one item of a kind's watch stream asks of its loop.
enum Step<K> {
    /// An object listed, changed or deleted.
    Change(Change<K>),
    /// A list begins (the first, or a relist after 410 Gone or a broken watch).
    ListBegan,
    /// The list is complete.
    ListDone,
    /// The list or watch failed; kube-runtime retries it with backoff.
    Failed(watcher::Error),
    /// The stream is over (it never ends while the watcher retries).
    Ended,
}

impl<K> Step<K> {
    fn of(item: Option<Result<watcher::Event<K>, watcher::Error>>) -> Self {
        match item {
            Some(Ok(watcher::Event::InitApply(obj))) => Step::Change(Change::Listed(obj)),
            Some(Ok(watcher::Event::Apply(obj))) => Step::Change(Change::Applied(obj)),
            Some(Ok(watcher::Event::Delete(obj))) => Step::Change(Change::Deleted(obj)),
            Some(Ok(watcher::Event::Init)) => Step::ListBegan,
            Some(Ok(watcher::Event::InitDone)) => Step::ListDone,
            Some(Err(e)) => Step::Failed(e),
            None => Step::Ended,
        }
    }
}

/// One object's change from a watch.
enum Change<K> {
    /// Listed by a list in progress.
    Listed(K),
    /// Added or changed (a watch event).
    Applied(K),
    /// Deleted (a watch event).
    Deleted(K),
}

impl<K: WatchedKind> Change<K> {
    /// The change, its object's key added to `listed` if a list in progress names it (done
    /// before the write lock is taken: the set grows by rehashing during a big list).
    fn noted_in(self, listed: &mut HashSet<String>) -> Self {
        if let Change::Listed(obj) = &self {
            listed.insert(K::key(obj));
        }
        self
    }

    /// Applies the change; a watch event is counted.
    fn apply(self, state: &mut ClusterState, status: &KindStatus) {
        match self {
            Change::Listed(obj) => K::apply(state, &obj),
            Change::Applied(obj) => {
                K::apply(state, &obj);
                status.events.fetch_add(1, Ordering::Relaxed);
            }
            Change::Deleted(obj) => {
                K::delete(state, &obj);
                status.events.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Removes every object of the kind the state holds whose key `listed` does not name.
async fn remove_unlisted<K: WatchedKind>(state: &SharedState, listed: &HashSet<String>) {
    let gone: Vec<String> = K::keys(&state.read())
        .into_iter()
        .filter(|k| !listed.contains(k))
        .collect();
    for chunk in gone.chunks(RELIST_CHUNK) {
        let mut s = state.write_soon().await;
        for key in chunk {
            K::delete_key(&mut s, key);
        }
    }
}

/// The initial list (or watch start) failed with 403: kube-tas's RBAC does not allow it.
fn is_forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code == 403,
        _ => false,
    }
}

/// The initial list (or watch start) failed with 404: the cluster does not serve the kind.
fn is_not_served(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code == 404,
        _ => false,
    }
}
