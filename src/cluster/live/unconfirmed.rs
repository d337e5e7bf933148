//! Binds kube-tas assumed that the pod watch never showed, read back from the API server.
//!
//! A bind is recorded as soon as its Binding is accepted (read-your-writes) and the pod watch
//! confirms it within a second or so. One pod's never is: a pod bound and then deleted while the
//! pod watch relisted, whose Binding's answer came after that list. The list did not show it
//! (gone), no event will (the watch starts after the deletion), and the relist could not remove
//! it (the list may have predated the bind), so its usage would stay until the next relist,
//! hours away. Every [`CHECK_EVERY`], the binds left unconfirmed for [`UNCONFIRMED_AFTER`] are
//! read back, at most [`READ_MOST`] at a time: a pod gone, finished, another under the same
//! name, or not on the node bound gives its usage back; one bound as recorded stays (the watch
//! is late, and will show it), as does one that cannot be read (tried again next time). A
//! bind recorded under `namespace/name` (the scheduler sent no uid) is given back once the pod
//! is read with a uid: the watch counts it under that.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use crate::cluster::state::{SharedState, UnconfirmedBind};
use crate::cluster::workloads::is_terminal;

/// How long a bind may stay unconfirmed by the pod watch before it is read back: far beyond a
/// watch's usual delay, so that a busy API server's late events cost no reads.
pub const UNCONFIRMED_AFTER: Duration = Duration::from_secs(30);

/// How often the unconfirmed binds are looked for.
pub const CHECK_EVERY: Duration = Duration::from_secs(15);

/// The most pods read back in one check (the oldest binds first): a pod watch down for long
/// leaves every bind since unconfirmed, and its relist settles them anyway.
pub const READ_MOST: usize = 64;

/// How long one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What reading a bind's pod back says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadBack {
    /// The pod is bound as recorded: the watch is late.
    Holds,
    /// The pod holds nothing there (the reason, for the log): its usage is given back.
    Gone(&'static str),
}

/// Judges a bind by its pod as read (`None`: not found); `watched` says whether the pod watch
/// counts a pod under a uid.
pub fn judge(
    bind: &UnconfirmedBind,
    pod: Option<&Pod>,
    watched: impl FnOnce(&str) -> bool,
) -> ReadBack {
    let Some(pod) = pod else {
        return ReadBack::Gone("deleted");
    };
    let uid = pod.metadata.uid.as_deref().filter(|u| !u.is_empty());
    // Recorded under `namespace/name` (the scheduler sent no uid): once the watch counts the
    // pod under its uid, this record only counts it twice; until then (a watch down for long)
    // it is the only count.
    if let (true, Some(uid)) = (bind.uid.contains('/'), uid) {
        return if watched(uid) {
            ReadBack::Gone("counted by the pod watch under its uid")
        } else {
            ReadBack::Holds
        };
    }
    if !bind.uid.contains('/') && uid != Some(bind.uid.as_str()) {
        return ReadBack::Gone("deleted (another pod has its name now)");
    }
    if is_terminal(pod) {
        return ReadBack::Gone("finished");
    }
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if node != Some(bind.node.as_str()) {
        return ReadBack::Gone("not on the node it was bound to");
    }
    ReadBack::Holds
}

/// What one check did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CheckOutcome {
    /// Binds whose usage was given back.
    pub given_back: usize,
    /// Binds whose pods are bound as recorded.
    pub holding: usize,
    /// Pods that could not be read (kept).
    pub unread: usize,
}

/// Reads back the binds assumed before `before` that are still unconfirmed (at most
/// [`READ_MOST`]) and gives back the usage of those whose pods hold nothing there.
pub async fn check_once(client: &Client, state: &SharedState, before: Instant) -> CheckOutcome {
    let binds = state.read().assumed_unconfirmed(before, READ_MOST);
    let mut outcome = CheckOutcome::default();
    for bind in binds {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &bind.namespace);
        let pod = match tokio::time::timeout(READ_TIMEOUT, pods.get_opt(&bind.name)).await {
            Ok(Ok(pod)) => pod,
            Ok(Err(e)) => {
                tracing::debug!(pod = %format_args!("{}/{}", bind.namespace, bind.name),
                    error = %e, "an unconfirmed bind's pod could not be read back");
                outcome.unread += 1;
                continue;
            }
            Err(_) => {
                outcome.unread += 1;
                continue;
            }
        };
        let watched = |uid: &str| state.read().pod(uid).is_some();
        match judge(&bind, pod.as_ref(), watched) {
            ReadBack::Holds => outcome.holding += 1,
            ReadBack::Gone(why) => {
                // A watch event that confirmed it meanwhile keeps it: only a bind still
                // assumed is forgotten.
                let forgotten = state.write_soon().await.forget_assumed(&bind.uid);
                if forgotten {
                    tracing::info!(
                        pod = %format_args!("{}/{}", bind.namespace, bind.name),
                        node = %bind.node,
                        reason = why,
                        "a bind the pod watch never showed holds nothing: its usage is given back"
                    );
                    outcome.given_back += 1;
                }
            }
        }
    }
    outcome
}

/// Checks the unconfirmed binds every [`CHECK_EVERY`] until cancelled.
pub async fn run(client: Client, state: SharedState, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
        let Some(before) = Instant::now().checked_sub(UNCONFIRMED_AFTER) else {
            continue;
        };
        let outcome = tokio::select! {
            () = cancel.cancelled() => return,
            outcome = check_once(&client, &state, before) => outcome,
        };
        if outcome.holding > 0 || outcome.unread > 0 {
            tracing::debug!(
                holding = outcome.holding,
                unread = outcome.unread,
                "binds the pod watch has not shown for {} s",
                UNCONFIRMED_AFTER.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn bind(uid: &str) -> UnconfirmedBind {
        UnconfirmedBind {
            uid: uid.to_string(),
            namespace: "ns".to_string(),
            name: "p".to_string(),
            node: "n1".to_string(),
        }
    }

    fn pod(uid: &str, node: Option<&str>, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".to_string()),
                namespace: Some("ns".to_string()),
                uid: Some(uid.to_string()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(str::to_string),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.to_string()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn only_a_pod_bound_as_recorded_holds() {
        let b = bind("u1");
        assert_eq!(
            judge(&b, Some(&pod("u1", Some("n1"), "Running")), |_| true),
            ReadBack::Holds
        );
        assert_eq!(
            judge(&b, Some(&pod("u1", Some("n1"), "Pending")), |_| true),
            ReadBack::Holds
        );
        let gone = |p: Option<&Pod>| matches!(judge(&b, p, |_| true), ReadBack::Gone(_));
        assert!(gone(None));
        assert!(gone(Some(&pod("u2", Some("n1"), "Running"))), "another pod");
        assert!(gone(Some(&pod("u1", Some("n1"), "Succeeded"))));
        assert!(gone(Some(&pod("u1", Some("n1"), "Failed"))));
        assert!(
            gone(Some(&pod("u1", Some("n2"), "Running"))),
            "another node"
        );
        assert!(gone(Some(&pod("u1", None, "Pending"))), "not bound");
        // No uid recorded (the scheduler sent none): once the watch counts the pod under its
        // uid, the record under its name only counts it twice; until then it is the only one.
        let by_name = bind("ns/p");
        let running = pod("u9", Some("n1"), "Running");
        assert!(matches!(
            judge(&by_name, Some(&running), |uid| uid == "u9"),
            ReadBack::Gone(_)
        ));
        assert_eq!(judge(&by_name, Some(&running), |_| false), ReadBack::Holds);
        let mut no_uid = pod("", Some("n1"), "Running");
        no_uid.metadata.uid = None;
        assert_eq!(judge(&by_name, Some(&no_uid), |_| true), ReadBack::Holds);
    }
}
