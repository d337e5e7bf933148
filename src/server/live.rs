//! `serve` in live mode: the API server is the source of truth.
//!
//! Startup: a client (`--kubeconfig`, else `KUBECONFIG`, else in-cluster), the watches feeding
//! one shared state, the extender writing Bindings, the leader election (unless
//! `--leader-elect=false`), both listeners. Ready once every watched kind has applied its
//! first list (a kind the cluster does not serve does not hold readiness back) and every TAS
//! flavor's tree is built; from then on a tree left behind by a change is built again in the
//! background, so that the extender's calls find it built.
//!
//! What the replicas do:
//! * every replica answers `/mutate` from its own watches;
//! * only the leader plans and binds. It labels its own pod `kube-tas.io/leader=true` (and
//!   removes the label when it steps down), so an extender Service selecting that label sends
//!   kube-scheduler to the leader; a follower reached anyway answers `filter` and `bind` with
//!   an `Error` naming the leader (kube-scheduler retries the pod) and `prioritize` with no
//!   scores;
//! * on losing the lease the replica drops every plan at once; the new leader rebuilds plans
//!   from the cluster (bound pods and their owners), so no seat is held by two replicas.

use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::admin::Readiness;
use super::{ServeConfig, shutdown, start};
use crate::cluster::live::leader::{self, ElectionConfig};
use crate::cluster::live::{self as source, Leadership, WatchStatus, Watches};
use crate::cluster::state::SharedState;
use crate::extender::binding::BIND_LONGEST;
use crate::extender::{Binder, Extender};
use crate::plans::PlanBook;

/// The namespace a pod's service account token is mounted for.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The Lease's namespace when neither the flag nor the pod's own namespace says.
pub const DEFAULT_NAMESPACE: &str = "kube-tas-system";

/// Runs live mode until SIGTERM/SIGINT.
pub async fn run(config: ServeConfig) -> anyhow::Result<()> {
    let client = source::client(config.kubeconfig.as_deref()).await?;
    run_with(config, client, shutdown::signal(), |_| {}).await
}

/// Runs live mode over `client` until `stop` resolves; `started` sees the running server
/// (its addresses) once both listeners are up.
pub async fn run_with(
    config: ServeConfig,
    client: kube::Client,
    stop: impl std::future::Future<Output = ()>,
    started: impl FnOnce(&super::RunningServer),
) -> anyhow::Result<()> {
    let state = SharedState::default();
    let watches = Watches::start(client.clone(), state.clone());
    let identity = config
        .pod_name
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("kube-tas-{}", std::process::id()));
    let leadership = if config.leader_elect {
        Leadership::elected(&identity)
    } else {
        Leadership::always()
    };
    let extender = Extender::new(
        state,
        PlanBook::new(config.feature_gates.clone(), config.plan_ttl),
    )
    .with_binder(Binder::Api(client.clone()))
    .with_leadership(leadership.clone());
    let (notices, notice_rx) = source::events::channel();
    let extender = extender.with_notices(notices);
    let mut server = start(&config, extender.clone()).await?;
    server.metrics().set_watch_status(watches.status().clone());
    started(&server);

    let cancel = CancellationToken::new();
    // Leading ends first on the way out (see below); a child token, so an error exit that
    // cancels everything ends it too.
    let leading = cancel.child_token();
    let mut leading_tasks = tokio::task::JoinSet::new();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(source::events::publish(
        client.clone(),
        identity.clone(),
        notice_rx,
        cancel.clone(),
    ));
    if config.leader_elect {
        let namespace = config
            .leader_election_namespace
            .clone()
            .or_else(own_namespace)
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        let election = ElectionConfig {
            namespace: namespace.clone(),
            lease_name: config.leader_election_id.clone(),
            identity: identity.clone(),
            lease_duration: config.lease_duration,
            renew_before: (config.lease_duration / 3).max(Duration::from_secs(1)),
        };
        let (c, l, k) = (client.clone(), leadership.clone(), leading.clone());
        let status = watches.status().clone();
        // A replica takes part once its watches have listed everything: a leader planning on
        // a partial view (pods not listed yet are no usage) could give their room away, and a
        // replica that is not ready is not in the Service's endpoints, so kube-scheduler would
        // be left without an extender while a ready one followed.
        leading_tasks.spawn(async move {
            if until_synced(&status, &k).await {
                leader::run(c, election, l, k).await;
            }
        });
        let pod = config
            .pod_name
            .clone()
            .or_else(|| std::env::var("POD_NAME").ok());
        leading_tasks.spawn(follow_leadership(
            client.clone(),
            extender.clone(),
            namespace,
            pod,
            leading.clone(),
        ));
    }
    tasks.spawn(get_ready_and_keep_trees_warm(
        extender.state().clone(),
        server.readiness().clone(),
        watches.status().clone(),
        cancel.clone(),
    ));
    tasks.spawn(report_left_out(extender.clone(), cancel.clone()));
    tasks.spawn(source::unconfirmed::run(
        client.clone(),
        extender.state().clone(),
        cancel.clone(),
    ));
    tasks.spawn(crate::extender::quiet_seats::run(
        client.clone(),
        extender.clone(),
        cancel.clone(),
    ));
    let sweep = config.node_id_sweep;
    tasks.spawn(reclaim_node_ids(extender.clone(), sweep, cancel.clone()));

    let outcome = tokio::select! {
        () = stop => Ok(()),
        e = server.failed() => Err(e),
    };
    if let Err(e) = outcome {
        cancel.cancel();
        while leading_tasks.join_next().await.is_some() {}
        while tasks.join_next().await.is_some() {}
        watches.stop().await;
        return Err(e);
    }
    // Leadership is given up at once: this pod is leaving the Services' endpoints (it is
    // terminating and /readyz turns 503), so a leader that kept its Lease and label through
    // the delay and the drain would leave kube-scheduler without an extender for that long.
    // Stepping down drops the plans and the label now (nothing new is planned or bound; the
    // requests still reaching this replica get the follower's answer, an Error naming the
    // leader, retried); the Lease is let go once the Bindings being written have ended (one
    // landing after the next leader planned would take room that leader gave away), at most
    // as long as one bind takes, and a follower takes over then. The watches go on, for the
    // webhook, until nothing more is served.
    server.readiness().begin_shutdown();
    leadership.step_down();
    if !extender.binds_ended(BIND_LONGEST).await {
        tracing::warn!(
            waited_ms = BIND_LONGEST.as_millis(),
            "binds still being written as the Lease is let go"
        );
    }
    leading.cancel();
    while leading_tasks.join_next().await.is_some() {}
    let stopping = server
        .stop_main(config.shutdown_delay, config.shutdown_grace)
        .await;
    cancel.cancel();
    while tasks.join_next().await.is_some() {}
    watches.stop().await;
    stopping.finish().await.context("shutdown")
}

/// Waits until every watched kind is listed ([`WatchStatus::synced`]); `false` when cancelled
/// first.
async fn until_synced(status: &WatchStatus, cancel: &CancellationToken) -> bool {
    while !status.synced() {
        tokio::select! {
            () = cancel.cancelled() => return false,
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    true
}

/// How often the warmer looks for a change that leaves a flavor's tree behind the cluster.
const WARM_CHECK: Duration = Duration::from_millis(25);

/// After a pass that spent `t` building, the warmer starts no other for this many times `t`
/// (so it keeps at most a tenth of one core busy however fast nodes change).
const WARM_REST: u32 = 9;

/// Marks the replica ready once every watched kind is listed and every TAS flavor's tree is
/// built (a build that fails is logged and does not hold readiness back), then keeps the
/// trees built: whenever nodes or Kueue objects moved the topology generation, the stale
/// trees are built again here (on the blocking pool, under the read lock as a request would),
/// so that the extender's next call finds its tree rather than building it (1–3 ms at 15,000
/// nodes, 5–12 ms at 50,000); the Workload-API hostname tree too while such groups are known
/// (the first of their pods builds it, the warmer keeps it after that). The generation is
/// checked every [`WARM_CHECK`], but after a pass no other starts for [`WARM_REST`] times what
/// it spent building: changes coming faster are built for once; a request that comes before
/// the warmer still builds the tree itself, as without it.
async fn get_ready_and_keep_trees_warm(
    state: SharedState,
    readiness: Readiness,
    status: WatchStatus,
    cancel: CancellationToken,
) {
    let since = std::time::Instant::now();
    if !until_synced(&status, &cancel).await {
        return;
    }
    let (mut warmed, busy) = tokio::select! {
        () = cancel.cancelled() => return,
        pass = warm(&state) => pass,
    };
    let mut resting_until = tokio::time::Instant::now() + busy * WARM_REST;
    readiness.mark_ready();
    tracing::info!(
        sync_ms = since.elapsed().as_secs_f64() * 1e3,
        "ready: every watched kind is listed and every topology tree built"
    );
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(WARM_CHECK) => {}
        }
        if tokio::time::Instant::now() >= resting_until
            && state.read().topology_generation() != warmed
        {
            let busy;
            (warmed, busy) = tokio::select! {
                () = cancel.cancelled() => return,
                pass = warm(&state) => pass,
            };
            resting_until = tokio::time::Instant::now() + busy * WARM_REST;
        }
    }
}

/// Builds the stale trees on the blocking pool, each flavor's under a read lock of its own
/// (the warmer holds none between two flavors): the topology generation read before them (a
/// change made meanwhile is warmed for at the next check) and the time spent building (not
/// waiting for the pool or a lock).
async fn warm(state: &SharedState) -> (u64, Duration) {
    let shared = state.clone();
    let pass = tokio::task::spawn_blocking(move || {
        let (generation, flavors) = {
            let s = shared.read();
            let flavors: Vec<String> = s.kueue().resource_flavors.keys().cloned().collect();
            (s.topology_generation(), flavors)
        };
        let (mut built, mut busy) = (0, Duration::ZERO);
        // Each flavor's tree, then the Workload-API hostname tree (`None`).
        for name in flavors.iter().map(Some).chain([None]) {
            let s = shared.read();
            let started = std::time::Instant::now();
            built += usize::from(match name {
                Some(name) => s.warm_tree(name),
                None => s.warm_hostname_tree(),
            });
            busy += started.elapsed();
        }
        (generation, built, busy)
    })
    .await;
    match pass {
        Ok((generation, built, busy)) => {
            if built > 0 {
                tracing::debug!(
                    trees = built,
                    build_ms = busy.as_secs_f64() * 1e3,
                    "topology trees built ahead of requests"
                );
            }
            (generation, busy)
        }
        // A panic in a build (a bug) is logged, and the trees are tried again after the next
        // change (requests build as without the warmer); a pass cancelled at shutdown is not
        // a failure.
        Err(e) => {
            if e.is_panic() {
                tracing::error!(error = %e, "building the topology trees ahead of requests failed");
            }
            (state.read().topology_generation(), Duration::ZERO)
        }
    }
}

/// How often the nodes that flavors leave out are checked for a change worth a log line.
const LEFT_OUT_CHECK: Duration = Duration::from_secs(30);

/// Logs, whenever it changes, which nodes each TAS flavor leaves out and why, as the trees
/// built so far say (the warmer keeps them current; the metric
/// `kube_tas_flavor_nodes_left_out` has the counts at any time).
async fn report_left_out(extender: Extender, cancel: CancellationToken) {
    let mut last: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(LEFT_OUT_CHECK) => {}
        }
        let notes = extender.state().read().left_out_notes();
        if notes != last {
            for note in notes.iter().filter(|n| !last.contains(n)) {
                tracing::warn!("{note}");
            }
            last = notes;
        }
    }
}

/// Every `interval`, gives back the ids of deleted nodes nothing refers to any more
/// ([`Extender::reclaim_node_ids`]), so that node churn under an autoscaler (every new node a
/// new name) does not grow the state, and the arrays every tree build reads, without bound.
async fn reclaim_node_ids(extender: Extender, interval: Duration, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let e = extender.clone();
        // A task of its own, so that a panic in the pass (a bug) is logged and the sweep goes
        // on; the pass waits for the locks without holding a thread.
        let sweep = tokio::spawn(async move {
            let began = std::time::Instant::now();
            (e.reclaim_node_ids().await, began.elapsed())
        });
        match sweep.await {
            Ok((0, _)) => {}
            Ok((n, took)) => tracing::debug!(
                ids = n,
                took_us = took.as_micros() as u64,
                "node ids of deleted nodes given back"
            ),
            Err(e) if e.is_panic() => tracing::error!(error = %e, "the node id sweep failed"),
            Err(_) => return,
        }
    }
}

/// On every leadership change: drop the plans when stepping down, and move the leader label.
async fn follow_leadership(
    client: kube::Client,
    extender: Extender,
    namespace: String,
    pod: Option<String>,
    cancel: CancellationToken,
) {
    extender
        .drop_plans_when_not_leading(cancel, |leader| {
            let (client, namespace, pod) = (client.clone(), namespace.clone(), pod.clone());
            async move {
                if let Some(pod) = &pod
                    && let Err(e) = leader::label_own_pod(client, &namespace, pod, leader).await
                {
                    tracing::warn!(error = %e, pod = %pod, "cannot update the leader label on this pod");
                }
            }
        })
        .await;
    if let Some(pod) = &pod {
        let _ = leader::label_own_pod(client, &namespace, pod, false).await;
    }
}

fn own_namespace() -> Option<String> {
    std::env::var("POD_NAMESPACE").ok().or_else(|| {
        std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
}
