//! The scheduler extender: `filter`, `prioritize` and `bind` as kube-scheduler calls them,
//! answered from the plans and seats of [`crate::plans`].
//!
//! [`Extender`] is the service (no HTTP in it): `simulate` calls it in process, [`http`]
//! mounts it on axum. Every answer is in the protocol's own shape; nothing here panics on
//! input, and a problem with a request becomes the protocol's `Error`, never an HTTP error.
//!
//! Speed choice: when a pod's seat is among the candidates, the answer names only the passing
//! node(s) and leaves the others out of `FailedNodes` (a reason per node would cost far more
//! than the whole request, and the scheduler binds the pod at once). When the pod has a seat
//! (or a node it is bound or pinned to) and it is not among the candidates, one summary entry
//! says so and how many candidates it stands for (the scheduler drops the others without a
//! reason; `kubectl describe pod` reads `0/N nodes are available: 1 node(s) outside ...`).
//! When nothing passes for any other reason, every candidate is listed with it, so the
//! `0/N nodes are available: ...` tally is complete.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use k8s_openapi::List;
use k8s_openapi::api::core::v1::{Node, Pod};
use tracing::Instrument;

pub mod binding;
pub mod http;
pub mod quiet_seats;
pub mod scan;
pub mod wire;

pub use binding::Binder;

pub use wire::{
    CandidateRequest, ExtenderArgs, ExtenderArgsRef, ExtenderBindingArgs, ExtenderBindingResult,
    ExtenderFilterResult, HostPriority, TurnedDown,
};

use crate::cluster::Cluster;
use crate::cluster::live::Leadership;
use crate::cluster::state::{ClusterState, FlavorTopology, SharedState, WRITE_PATIENCE};
use crate::plans::{
    BindTicket, FilterVerdict, Notice, PlanBook, PlanCounters, PlanStats, Rejection,
};
use crate::topology::FeatureGates;

/// The extender service: the shared cluster state, and a [`PlanBook`] behind a lock
/// (decisions are serialised, as kube-scheduler's cycle is).
///
/// Lock order: the book first, then the state (read for decisions, write for a bind's
/// record). Watch appliers take only the state's lock, one event at a time.
#[derive(Clone)]
pub struct Extender {
    state: SharedState,
    book: Arc<Mutex<PlanBook>>,
    counters: Arc<PlanCounters>,
    gates: FeatureGates,
    binder: Binder,
    leadership: Leadership,
    notices: Option<tokio::sync::mpsc::Sender<Notice>>,
    /// Binds begun and not ended: a leader on its way out lets its Lease go only after them.
    binds: Arc<BindsInFlight>,
}

/// How many binds are between their start and their end, and a wake-up when one ends.
#[derive(Default)]
struct BindsInFlight {
    count: AtomicUsize,
    ended: tokio::sync::Notify,
}

/// One bind counted in [`BindsInFlight`] while it lives.
struct BindInFlight(Arc<BindsInFlight>);

impl BindInFlight {
    fn start(binds: &Arc<BindsInFlight>) -> Self {
        binds.count.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(binds))
    }
}

impl Drop for BindInFlight {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_waiters();
    }
}

impl Extender {
    /// Serves decisions from `book` over `state`; binds are recorded, no Binding is written
    /// (see [`Self::with_binder`]).
    pub fn new(state: SharedState, book: PlanBook) -> Self {
        Self {
            state,
            counters: book.counters(),
            gates: book.gates().clone(),
            book: Arc::new(Mutex::new(book)),
            binder: Binder::Record,
            leadership: Leadership::always(),
            notices: None,
            binds: Arc::default(),
        }
    }

    /// Waits until no bind is between its start and its end, at most `within`; whether none
    /// is. A leader stepping down calls it before it lets its Lease go: a Binding it writes
    /// after the next leader planned would land on room that leader gave away.
    pub async fn binds_ended(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // Registered before the count is read: an end between the two still wakes it.
            let ended = self.binds.ended.notified();
            if self.binds.count.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return self.binds.count.load(Ordering::SeqCst) == 0;
            }
        }
    }

    /// Sends what the plan book notices (plans made, groups that do not fit, plans expired,
    /// Bindings refused) to `notices`, for Events; dropped when the channel is full.
    pub fn with_notices(mut self, notices: tokio::sync::mpsc::Sender<Notice>) -> Self {
        self.notices = Some(notices);
        self
    }

    fn forward(&self, book: &mut PlanBook) {
        let Some(tx) = &self.notices else {
            book.take_notices();
            return;
        };
        for n in book.take_notices() {
            if tx.try_send(n).is_err() {
                tracing::debug!("notice dropped: the Event queue is full");
            }
        }
    }

    /// Plans and binds only while `leadership` says this replica leads; a follower answers
    /// `filter` and `bind` with an `Error` naming the leader, and `prioritize` with no scores.
    pub fn with_leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = leadership;
        self
    }

    /// Whether this replica plans and binds.
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    /// Drops every plan and seat (on losing leadership).
    pub fn clear_plans(&self) {
        self.lock().clear();
    }

    /// Until `cancel`: whenever this replica stops leading, drops every plan at once, so a
    /// follower never holds capacity (the new leader rebuilds plans from the cluster).
    /// `on_change` hears every change (`true`: now the leader), after the plans are dropped.
    pub async fn drop_plans_when_not_leading<F, Fut>(
        &self,
        cancel: tokio_util::sync::CancellationToken,
        mut on_change: F,
    ) where
        F: FnMut(bool) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let mut changes = self.leadership.changes();
        let mut was_leader = *changes.borrow_and_update();
        // Leading already when this starts (the election can be quicker than the task that
        // runs this): heard like any change.
        if was_leader {
            tracing::info!("the leader: planning and binding");
            on_change(true).await;
        }
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
            let leader = *changes.borrow_and_update();
            if leader && was_leader {
                // Leading again with no `false` seen: the channel keeps only the last value,
                // so leadership was lost and won back while `on_change` ran. A new term
                // starts with an empty book, as after any loss.
                self.clear_plans();
                tracing::info!("the leader again after a term lost meanwhile: plans dropped");
            } else if leader {
                tracing::info!("the leader: planning and binding");
            } else {
                self.clear_plans();
                tracing::info!("not the leader: plans dropped");
            }
            was_leader = leader;
            on_change(leader).await;
        }
    }

    /// An extender over a cluster given as manifests (fed to a fresh state as events).
    pub fn over_cluster(cluster: &Cluster, gates: FeatureGates, plan_ttl: Duration) -> Self {
        Self::new(
            SharedState::new(ClusterState::from_cluster(cluster)),
            PlanBook::new(gates, plan_ttl),
        )
    }

    /// Writes each bind through `binder` before recording it.
    pub fn with_binder(mut self, binder: Binder) -> Self {
        self.binder = binder;
        self
    }

    /// The feature gates its plans follow.
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// The cluster state it decides over.
    pub fn state(&self) -> &SharedState {
        &self.state
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

    /// `filter` over a request read with borrowed names and a reduced pod (the server's path),
    /// answered as JSON; passing names are written from the request's own.
    pub fn filter_json(&self, request: CandidateRequest<'_>) -> Vec<u8> {
        let decided = match (request.node_names, request.pod.version()) {
            (Some(names), Some((uid, version))) => self
                .decide_filter_known(uid, version, names)
                .map(|decided| (names, decided)),
            _ => None,
        };
        let (names, decided) = match decided {
            Some(known) => known,
            None => {
                let pod = match request.pod.into_pod() {
                    Ok(pod) => pod,
                    Err(e) => return encode(&error_result(&e)),
                };
                let Some(names) = request.node_names else {
                    return encode(&self.filter_candidates(&pod, None, request.nodes.as_ref()));
                };
                (names, self.decide_filter(&pod, names))
            }
        };
        match decided {
            Ok(outcome) => {
                let mut out = Vec::new();
                wire::write_filter_names(
                    &mut out,
                    names,
                    &outcome.pass,
                    request.compact_names,
                    &outcome.turned_down(names),
                );
                out
            }
            Err(e) => encode(&error_result(&e)),
        }
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
            Ok(outcome) => {
                let (mut result, pass) = outcome.into_result(&names);
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
            Ok(outcome) => {
                let (mut result, pass) = outcome.into_result(names);
                result.node_names = Some(pass.iter().map(|&i| names[i].to_string()).collect());
                result
            }
            Err(e) => error_result(&e),
        }
    }

    /// Whether a request for the pod `uid` at `resource_version` can be answered from its
    /// seat or node without reading the pod's spec (the server then leaves it unread).
    pub fn answers_from_seat(&self, uid: &str, resource_version: &str) -> bool {
        self.seat_oracle()(uid, resource_version)
    }

    /// Whether `prioritize` for the pod `uid` at `resource_version` can be answered from what
    /// the book read of it at that version (by `filter`, just before), without its spec.
    pub fn prioritizes_from_memory(&self, uid: &str, resource_version: &str) -> bool {
        self.prioritize_oracle()(uid, resource_version)
    }

    /// [`Self::answers_from_seat`] as a function the request reader can keep.
    pub fn seat_oracle(&self) -> wire::PodOracle {
        self.book_oracle(PlanBook::knows_seated)
    }

    /// [`Self::prioritizes_from_memory`] as a function the request reader can keep.
    pub fn prioritize_oracle(&self) -> wire::PodOracle {
        self.book_oracle(PlanBook::knows_read)
    }

    fn book_oracle(&self, knows: fn(&PlanBook, &str, &str) -> bool) -> wire::PodOracle {
        let (leadership, book) = (self.leadership.clone(), self.book.clone());
        Box::new(move |uid, version| {
            leadership.is_leader() && knows(&lock_book(&book), uid, version)
        })
    }

    /// [`Self::decide_filter`] for a pod the book knows at `resource_version`, without the
    /// pod; `None` when the book needs it.
    fn decide_filter_known(
        &self,
        uid: &str,
        resource_version: &str,
        names: &[&str],
    ) -> Option<Result<FilterOutcome, String>> {
        if !self.leadership.is_leader() {
            return None;
        }
        let mut book = self.lock();
        let verdict = book.filter_known(
            &self.state.read(),
            uid,
            resource_version,
            names,
            Instant::now(),
        )?;
        self.forward(&mut book);
        drop(book);
        Some(filter_outcome(verdict, names))
    }

    /// The failed maps and the passing candidates, or the request's problem.
    fn decide_filter(&self, pod: &Pod, names: &[&str]) -> Result<FilterOutcome, String> {
        if !self.leadership.is_leader() {
            return Err(self.leadership.follower_message());
        }
        let mut book = self.lock();
        let verdict = book.filter(&self.state.read(), pod, names, Instant::now());
        self.forward(&mut book);
        drop(book);
        filter_outcome(verdict, names)
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

    /// `prioritize` over a request read with borrowed names and a reduced pod, answered as
    /// JSON with the hosts written from the request's own names.
    pub fn prioritize_json(&self, request: CandidateRequest<'_>) -> Result<Vec<u8>, String> {
        let known = match (request.node_names, request.pod.version()) {
            (Some(names), Some((uid, version))) if self.leadership.is_leader() => self
                .lock()
                .favoured_known(uid, version, names)
                .map(|favoured| (names, favoured)),
            _ => None,
        };
        let (names, favoured) = match known {
            Some(known) => known,
            None => {
                let pod = request.pod.into_pod()?;
                let Some(names) = request.node_names else {
                    return Ok(encode(&self.prioritize_candidates(
                        &pod,
                        None,
                        request.nodes.as_ref(),
                    )));
                };
                (names, self.favoured_names(&pod, names))
            }
        };
        let scores = with_top_score(favoured);
        let mut out = Vec::with_capacity(2 + scores.len() * 64);
        wire::write_priorities(&mut out, scores.into_iter().map(|(i, s)| (names[i], s)));
        Ok(out)
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
        with_top_score(self.favoured_names(pod, candidates))
    }

    /// The candidates to favour (none for a follower).
    fn favoured_names(&self, pod: &Pod, candidates: &[&str]) -> Vec<usize> {
        if !self.leadership.is_leader() {
            return Vec::new();
        }
        self.lock().favoured(pod, candidates)
    }

    /// `POST /scheduler/bind` without an API server (files mode, `simulate`): makes the seat
    /// final and records the pod on its node.
    pub fn bind(&self, args: &ExtenderBindingArgs) -> ExtenderBindingResult {
        if !self.leadership.is_leader() {
            return bind_result(Err(self.leadership.follower_message()));
        }
        let now = Instant::now();
        let mut book = self.lock();
        let mut state = self.state.write();
        let outcome = book.bind(
            &mut state,
            &args.pod_namespace,
            &args.pod_name,
            &args.pod_uid,
            &args.node,
            now,
        );
        self.forward(&mut book);
        bind_result(outcome.map_err(|e| e.0))
    }

    /// `POST /scheduler/bind` as the server answers it: the seat is checked and kept held,
    /// the Binding written through the binder (no lock held meanwhile), then the pod recorded
    /// on its node, or, when the API server refuses, the seat freed and its reason returned.
    pub async fn bind_and_write(&self, args: &ExtenderBindingArgs) -> ExtenderBindingResult {
        if !self.leadership.is_leader() {
            return bind_result(Err(self.leadership.follower_message()));
        }
        if matches!(self.binder, Binder::Record) {
            return self.bind(args);
        }
        let in_flight = BindInFlight::start(&self.binds);
        let ticket = {
            let mut book = self.lock();
            let state = self.state.read();
            book.begin_bind(
                &state,
                &args.pod_namespace,
                &args.pod_name,
                &args.pod_uid,
                &args.node,
                Instant::now(),
            )
        };
        let ticket = match ticket {
            Ok(t) if t.already_bound => return ExtenderBindingResult::default(),
            Ok(t) => t,
            Err(e) => return bind_result(Err(e.0)),
        };
        // Once begun, a bind runs to its end in a task of its own: a request dropped while the
        // Binding is written (kube-scheduler restarted, the connection closed) must not leave
        // the seat begun for good, its plan's capacity held and the pod refused as being bound.
        let this = self.clone();
        let begun = ticket.clone();
        let bind = async move {
            let result = this.finish_bind(ticket).await;
            drop(in_flight);
            result
        };
        match tokio::spawn(bind.in_current_span()).await {
            Ok(result) => result,
            Err(e) => {
                // A bug: the seat (or the room held for a pod without one) is given back, or
                // the pod would be refused as being bound until leadership changed.
                let reason = format!("the bind did not finish: {e}");
                let mut book = self.lock();
                book.abort_bind(&begun, &reason);
                self.forward(&mut book);
                bind_result(Err(reason))
            }
        }
    }

    /// Writes a begun bind's Binding and records the answer: the pod on its node, or the seat
    /// freed with the API server's reason.
    async fn finish_bind(&self, ticket: BindTicket) -> ExtenderBindingResult {
        let written = self.binder.write(&ticket).await;
        // A refused Binding changes only the book; an accepted one commits to the state too.
        let (mut book, state) = match written {
            Ok(()) => {
                let (book, state) = self.book_and_state(WRITE_PATIENCE).await;
                (book, Some(state))
            }
            Err(_) => (self.lock(), None),
        };
        // Leadership lost while the Binding was written: the book was cleared; what the API
        // server accepted shows up through the watch.
        if !self.leadership.is_leader() {
            return bind_result(written.map_err(|e| format!("{e} (and leadership was lost)")));
        }
        match written {
            Ok(()) => {
                if let Some(mut state) = state {
                    book.commit_bind(&mut state, &ticket, Instant::now());
                }
                self.forward(&mut book);
                bind_result(Ok(()))
            }
            Err(reason) => {
                book.abort_bind(&ticket, &reason);
                self.forward(&mut book);
                tracing::warn!(
                    pod = %format_args!("{}/{}", ticket.namespace, ticket.name),
                    node = %ticket.node,
                    %reason,
                    "Binding refused; the seat is free again"
                );
                bind_result(Err(reason))
            }
        }
    }

    /// Counters and gauges for `/metrics` (no lock taken).
    pub fn stats(&self) -> PlanStats {
        self.counters.snapshot()
    }

    /// Runs `f` on the plan book and the state it decides over.
    pub fn with_book<T>(&self, f: impl FnOnce(&mut PlanBook, &ClusterState) -> T) -> T {
        let mut book = self.lock();
        let state = self.state.read();
        f(&mut book, &state)
    }

    /// Gives back the ids of deleted nodes that neither the state nor the plan book refers to
    /// any more ([`ClusterState::reclaim_node_ids`]); how many. Holds the book, then the
    /// state's write lock ([`Self::book_and_state`]), for one pass over the deleted nodes
    /// and the plans' trees.
    pub async fn reclaim_node_ids(&self) -> usize {
        self.reclaim_node_ids_within(WRITE_PATIENCE).await
    }

    /// [`Self::reclaim_node_ids`], queueing for the state's lock after `patience`.
    pub async fn reclaim_node_ids_within(&self, patience: Duration) -> usize {
        let (book, mut state) = self.book_and_state(patience).await;
        state.reclaim_node_ids(|candidates| book.node_ids_in_use(candidates))
    }

    /// The plan book and the state's write lock (always in that order), taken as the watches'
    /// events take theirs ([`SharedState::write_soon_after`]): never queued behind a reader
    /// such as a tree build's, which would hold up every request's read, the book (every
    /// `filter` takes it) and the caller's thread until the build ends. The book is let go
    /// between tries, so requests go on meanwhile; after `patience` the state's lock is waited
    /// for.
    async fn book_and_state(
        &self,
        patience: Duration,
    ) -> (MutexGuard<'_, PlanBook>, RwLockWriteGuard<'_, ClusterState>) {
        self.state.write_soon_after(patience, || self.lock()).await
    }

    /// A flavor's tree at the state's current generation.
    pub fn flavor(&self, name: &str) -> Option<Arc<FlavorTopology>> {
        self.state.read().flavor(name)
    }

    fn lock(&self) -> MutexGuard<'_, PlanBook> {
        lock_book(&self.book)
    }
}

/// The plan book, locked. Every book method runs to completion before it returns; a panic
/// inside one (a bug) cannot leave a half-made plan, so a poisoned lock is still safe to use.
fn lock_book(book: &Mutex<PlanBook>) -> MutexGuard<'_, PlanBook> {
    book.lock().unwrap_or_else(|p| p.into_inner())
}

/// `value` as JSON. The wire types have string keys only, so encoding cannot fail; should it
/// ever, the answer is an `Error` the scheduler reports as a failed call.
pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot encode an extender answer");
        serde_json::json!({ "Error": format!("cannot encode the answer: {e}") })
            .to_string()
            .into_bytes()
    })
}

/// Said when a request carries neither candidate list.
const NO_CANDIDATES: &str = "ExtenderArgs has neither NodeNames nor Nodes";

fn node_names(list: &List<Node>) -> Vec<&str> {
    list.items
        .iter()
        .map(|n| n.metadata.name.as_deref().unwrap_or(""))
        .collect()
}

/// What `filter` decided over a candidate list: the candidates that pass, and those turned
/// down with why, in candidate order (by index into the list).
struct FilterOutcome {
    pass: Vec<usize>,
    turned_down: Vec<(usize, Rejection)>,
}

impl FilterOutcome {
    /// The owned answer over `names` (its `node_names` left for the caller).
    fn into_result(self, names: &[&str]) -> (ExtenderFilterResult, Vec<usize>) {
        let mut result = ExtenderFilterResult::default();
        for (i, why) in &self.turned_down {
            let map = match why.unresolvable {
                true => &mut result.failed_and_unresolvable_nodes,
                false => &mut result.failed_nodes,
            };
            map.insert(names[*i].to_string(), why.reason.to_string());
        }
        (result, self.pass)
    }

    /// The turned-down candidates as the answer's writer takes them, borrowing the names
    /// and reasons.
    fn turned_down<'a>(&'a self, names: &[&'a str]) -> Vec<TurnedDown<'a>> {
        (self.turned_down.iter())
            .map(|(i, why)| TurnedDown {
                name: names[*i],
                reason: &why.reason,
                unresolvable: why.unresolvable,
            })
            .collect()
    }
}

/// The passing candidates of `verdict` over `names` and those turned down, or the request's
/// problem.
fn filter_outcome(verdict: FilterVerdict, names: &[&str]) -> Result<FilterOutcome, String> {
    let (pass, turned_down) = match verdict {
        FilterVerdict::Invalid(e) => return Err(e),
        FilterVerdict::Only {
            pass,
            rejected,
            seat,
        } => {
            let turned_down = match (pass.is_empty(), seat, names.first()) {
                (false, _, _) | (true, _, None) => Vec::new(),
                // One entry for all: a reason per node would cost more than the whole
                // request, and every candidate fails for the same one.
                (true, true, Some(_)) if names.len() > 1 => {
                    let summary = Rejection {
                        reason: format!(
                            "{} ({} candidate node(s) turned down alike)",
                            rejected.reason,
                            names.len()
                        )
                        .into(),
                        unresolvable: rejected.unresolvable,
                    };
                    vec![(0, summary)]
                }
                (true, _, Some(_)) => (0..names.len()).map(|i| (i, rejected.clone())).collect(),
            };
            (pass, turned_down)
        }
        FilterVerdict::Except { rejected } => {
            let mut turned_down = vec![false; names.len()];
            for (i, _) in &rejected {
                turned_down[*i] = true;
            }
            let pass = (0..names.len()).filter(|&i| !turned_down[i]).collect();
            (pass, rejected)
        }
    };
    Ok(FilterOutcome { pass, turned_down })
}

/// Favoured candidates at the top score.
fn with_top_score(favoured: Vec<usize>) -> Vec<(usize, i64)> {
    favoured
        .into_iter()
        .map(|i| (i, wire::MAX_EXTENDER_PRIORITY))
        .collect()
}

fn bind_result(outcome: Result<(), String>) -> ExtenderBindingResult {
    match outcome {
        Ok(()) => ExtenderBindingResult::default(),
        Err(e) => ExtenderBindingResult {
            error: wire::go_format_safe(&e),
        },
    }
}

fn error_result(message: &str) -> ExtenderFilterResult {
    ExtenderFilterResult {
        error: wire::go_format_safe(message),
        ..Default::default()
    }
}
