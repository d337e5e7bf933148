//! One active planner: leader election on a `coordination.k8s.io/v1` Lease
//! (kube-lease-manager), and [`Leadership`], what the extender asks before it plans or binds.
//!
//! Safety does not rest on the lease manager's own flag alone: that flag only changes when the
//! manager manages to talk to the API server, so a leader cut off from it would go on believing
//! it leads after its lease expired and another replica took over. [`Leadership::is_leader`]
//! is therefore also bounded in time: a separate confirmer reads the Lease three times per
//! renewal period, and leadership counts only while the Lease names this replica and its
//! `renewTime + leaseDurationSeconds − margin` lies ahead (the margin, at most
//! [`MAX_SKEW_MARGIN`], covers clock skew and the read's own latency). A replica that cannot confirm stops
//! planning before any other replica may take the lease over (clock skew between replicas
//! aside, the usual assumption of Lease-based election).
//!
//! Handover: a leader shutting down releases the Lease. kube-lease-manager's follower would
//! still sleep until the old lease's end (`leaseDurationSeconds`, 15 s by default), so the
//! confirmer, finding the Lease free after it saw another replica hold it, starts the election
//! afresh, which takes the free Lease at once: a rolling update hands over within a Lease read
//! or two. Only a replica that holds the Lease ever releases it (a follower restarting its
//! election gives nothing back: releasing a free Lease would clear whoever took it meanwhile).
//! An election that cannot start (API server unreachable, namespace missing, RBAC) is tried
//! again with a growing wait, never given up.
//!
//! Leadership changes are announced on a channel ([`Leadership::changes`]) so the server can
//! drop its plans when it loses the lease (a new leader rebuilds them from the cluster) and
//! mark its own pod for the extender's Service.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The most a leader gives up of its lease's end, against clock skew between replicas.
pub const MAX_SKEW_MARGIN: Duration = Duration::from_millis(500);

/// What [`run`] needs.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub lease_name: String,
    /// This replica's identity (its pod name), written as `holderIdentity`.
    pub identity: String,
    /// `leaseDurationSeconds`.
    pub lease_duration: Duration,
    /// How long before expiry the leader renews (kube-lease-manager's grace).
    pub renew_before: Duration,
}

#[derive(Debug)]
struct Inner {
    always: bool,
    identity: String,
    /// The lease manager says we hold the lease.
    holds: AtomicBool,
    /// The replica is on its way out ([`Leadership::step_down`]): it leads no more, whatever
    /// the Lease says, while it still holds it.
    stepped_down: AtomicBool,
    /// Unix milliseconds until which the last confirmation lets us act.
    valid_until_ms: AtomicI64,
    /// The holder the last read of the Lease named.
    holder: Mutex<Option<String>>,
    changes: watch::Sender<bool>,
}

/// Whether this replica may plan and bind now; cheap to clone and to ask.
#[derive(Debug, Clone)]
pub struct Leadership {
    inner: Arc<Inner>,
}

impl Leadership {
    /// Always the leader: files mode, or `--leader-elect=false`.
    pub fn always() -> Self {
        Self::build(true, String::new())
    }

    /// Not the leader until [`run`] says so.
    pub fn elected(identity: &str) -> Self {
        Self::build(false, identity.to_string())
    }

    fn build(always: bool, identity: String) -> Self {
        let (changes, _) = watch::channel(always);
        Self {
            inner: Arc::new(Inner {
                always,
                identity,
                holds: AtomicBool::new(false),
                stepped_down: AtomicBool::new(false),
                valid_until_ms: AtomicI64::new(0),
                holder: Mutex::new(None),
                changes,
            }),
        }
    }

    /// This replica may plan and bind now.
    pub fn is_leader(&self) -> bool {
        self.inner.always
            || (self.inner.holds.load(Ordering::Acquire)
                && !self.inner.stepped_down.load(Ordering::Acquire)
                && now_ms() < self.inner.valid_until_ms.load(Ordering::Acquire))
    }

    /// Stops leading at once, the Lease still held (its renewals go on) until the election is
    /// cancelled: a replica shutting down plans and binds nothing new while the binds it began
    /// end, and only then lets the Lease go. No effect when always the leader.
    pub fn step_down(&self) {
        self.inner.stepped_down.store(true, Ordering::Release);
        self.publish();
    }

    /// This replica's identity (empty when always the leader).
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The holder the Lease named when last read (`None` before the first read).
    pub fn holder(&self) -> Option<String> {
        self.inner
            .holder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Follows leadership changes (`true`: became the leader).
    pub fn changes(&self) -> watch::Receiver<bool> {
        self.inner.changes.subscribe()
    }

    /// Why a follower does not answer: names the leader.
    pub fn follower_message(&self) -> String {
        match self.holder() {
            Some(h) if !h.is_empty() && h != self.inner.identity => format!(
                "kube-tas replica {} is not the leader; {h} is: only the leader plans and \
                 binds (the extender Service should select the leader's pod)",
                self.inner.identity
            ),
            _ => format!(
                "kube-tas replica {} is not the leader and no leader is known yet: only the \
                 leader plans and binds; retry shortly",
                self.inner.identity
            ),
        }
    }

    fn set_holds(&self, holds: bool) {
        self.inner.holds.store(holds, Ordering::Release);
        if !holds {
            self.inner.valid_until_ms.store(0, Ordering::Release);
        }
        self.publish();
    }

    fn confirm(&self, lease: &Lease, duration: Duration, margin: Duration) {
        let spec = lease.spec.as_ref();
        let holder = spec.and_then(|s| s.holder_identity.clone());
        let mine = holder.as_deref() == Some(self.inner.identity.as_str());
        *self.inner.holder.lock().unwrap_or_else(|p| p.into_inner()) = holder;
        let renewed = spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.as_millisecond());
        let lease_ms = spec
            .and_then(|s| s.lease_duration_seconds)
            .map(|d| i64::from(d) * 1000)
            .unwrap_or(duration.as_millis() as i64);
        let until = match (mine, renewed) {
            (true, Some(r)) => r + lease_ms - margin.as_millis() as i64,
            _ => 0,
        };
        self.inner.valid_until_ms.store(until, Ordering::Release);
        self.publish();
    }

    fn publish(&self) {
        let now = self.is_leader();
        self.inner.changes.send_if_modified(|was| {
            let changed = *was != now;
            *was = now;
            changed
        });
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The first wait before the election is started again after it failed (the Lease could not
/// be created or read: the API server unreachable, its namespace missing, RBAC); it doubles
/// up to [`ELECTION_RETRY_MAX`].
pub const ELECTION_RETRY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two attempts to start the election.
pub const ELECTION_RETRY_MAX: Duration = Duration::from_secs(30);

/// Runs the election until `cancel`, releasing the Lease on the way out. A failure to start
/// it, or its lease manager stopping, never leaves the replica a follower for good: it is
/// logged and the election starts again, after [`ELECTION_RETRY_FIRST`] doubling up to
/// [`ELECTION_RETRY_MAX`] while it keeps failing to start.
pub async fn run(
    client: Client,
    config: ElectionConfig,
    leadership: Leadership,
    cancel: CancellationToken,
) {
    let mut wait = ELECTION_RETRY_FIRST;
    loop {
        // `run_once` has stopped holding by the time it returns (it never holds when it
        // cannot start).
        let outcome = run_once(client.clone(), &config, &leadership, &cancel).await;
        if cancel.is_cancelled() {
            return;
        }
        match outcome {
            Ok(Ended::Released) => {
                // The lease manager would sleep until the old holder's lease expired; a
                // fresh one takes the free Lease at once.
                tracing::info!("the Lease was released by its holder; taking part again at once");
                wait = ELECTION_RETRY_FIRST;
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, retry_in_s = wait.as_secs(),
                    "leader election failed; this replica follows until it starts again");
            }
            Ok(Ended::Stopped) => {
                // It ran: a fresh start deserves the shortest wait.
                wait = ELECTION_RETRY_FIRST;
                tracing::warn!(
                    retry_in_s = wait.as_secs(),
                    "leader election stopped; starting it again"
                );
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(ELECTION_RETRY_MAX);
    }
}

/// How one run of the election ended.
enum Ended {
    /// Cancelled, or its lease manager stopped.
    Stopped,
    /// This replica followed another holder and then found the Lease free (its holder
    /// released it on the way out): the lease manager would wait out the old lease before
    /// taking it.
    Released,
}

/// One run of the election: `Err` when it cannot start.
async fn run_once(
    client: Client,
    config: &ElectionConfig,
    leadership: &Leadership,
    cancel: &CancellationToken,
) -> anyhow::Result<Ended> {
    let renew_before = config.renew_before.max(Duration::from_secs(1));
    // A renewal is seen within `confirm_every`, and the old validity lasts `renew_before −
    // margin` past the renewal: with these, a renewing leader never lapses.
    let confirm_every = renew_before / 3;
    let margin = MAX_SKEW_MARGIN.min(renew_before / 4);
    let params = LeaseParams::new(
        config.identity.clone(),
        config.lease_duration.as_secs().max(2),
        renew_before.as_secs(),
    )
    .with_field_manager(format!("kube-tas-{}", config.identity));
    let manager = LeaseManagerBuilder::new(client.clone(), &config.lease_name)
        .with_namespace(&config.namespace)
        .with_parameters(params)
        .build()
        .await?;
    let leases: Api<Lease> = Api::namespaced(client, &config.namespace);
    // The first confirmation at once: a Lease another replica holds is then known held, and
    // one found free later is one released. A Lease free at start is not (the lease manager
    // is taking it).
    let mut confirm = tokio::time::interval(confirm_every);
    confirm.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(
        lease = %format_args!("{}/{}", config.namespace, config.lease_name),
        identity = %config.identity,
        "leader election started"
    );
    // What the lease manager last said, and whether this run saw another replica hold the
    // Lease (a Lease found free is then one released, worth restarting for).
    let mut holds = false;
    let mut seen_other = false;
    let ended = loop {
        tokio::select! {
            () = cancel.cancelled() => break Ended::Stopped,
            changed = manager.changed() => match changed {
                Ok(now_holds) => {
                    holds = now_holds;
                    leadership.set_holds(holds);
                    // Confirm at once, so a new leader starts without waiting a tick.
                    if let Ok(lease) = leases.get(&config.lease_name).await {
                        leadership.confirm(&lease, config.lease_duration, margin);
                    }
                    tracing::info!(leader = leadership.is_leader(), "leadership changed");
                }
                Err(e) => {
                    // As the lease manager's own loop does: wait and go on. A holder that
                    // cannot renew stops leading when its confirmation runs out.
                    tracing::warn!(error = %e, "the lease manager failed; trying again");
                    tokio::select! {
                        () = cancel.cancelled() => break Ended::Stopped,
                        () = tokio::time::sleep(ELECTION_RETRY_FIRST) => {}
                    }
                }
            },
            _ = confirm.tick() => match leases.get(&config.lease_name).await {
                Ok(lease) => {
                    leadership.confirm(&lease, config.lease_duration, margin);
                    match holder_of(&lease) {
                        None if !holds && seen_other => break Ended::Released,
                        Some(holder) if holder != config.identity => seen_other = true,
                        _ => {}
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the Lease to confirm leadership"),
            },
        }
    };
    leadership.set_holds(false);
    if holds {
        match manager.release().await {
            Ok(()) => tracing::info!("Lease released"),
            Err(e) => tracing::warn!(error = %e, "releasing the Lease failed"),
        }
    }
    Ok(ended)
}

/// Who holds `lease`; `None` when nobody does (a holder releasing it clears
/// `holderIdentity`).
fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// The label the leader puts on its own pod, for the extender Service's selector.
pub const LEADER_LABEL: &str = "kube-tas.io/leader";

/// Sets (leader) or removes (follower) [`LEADER_LABEL`] on this replica's pod.
pub async fn label_own_pod(
    client: Client,
    namespace: &str,
    pod: &str,
    leader: bool,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Patch, PatchParams};
    let value = if leader {
        serde_json::Value::String("true".into())
    } else {
        serde_json::Value::Null
    };
    let patch = serde_json::json!({"metadata": {"labels": {LEADER_LABEL: value}}});
    Api::<Pod>::namespaced(client, namespace)
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}
