//! Seats whose pods stopped asking, read back from the API server: a pod deleted before it was
//! bound gives its seat back to its group ([`crate::plans::PlanBook::quiet_seats`]).
//!
//! A pod with a seat passes `filter` at once and is bound, so a seat taken and quiet for
//! [`QUIET_FOR`] is a pod waiting (its seat's node not among the scheduler's candidates, or
//! held in Permit for its gang) or a pod gone. Every [`CHECK_EVERY`] the leader reads the
//! quietest ones back, at most [`READ_MOST`] at a time: one deleted, finished, being deleted,
//! or replaced by another pod under its name opens its seat again; one still pending keeps it,
//! as does one that cannot be read (tried again next time).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::Extender;
use crate::cluster::is_terminal;
use crate::plans::QuietSeat;

/// How long a seat's pod may go without asking before it is read back, and between two reads
/// that find it waiting: far beyond kube-scheduler's first retries, so that a pod that waits
/// costs a read a minute at most.
pub const QUIET_FOR: Duration = Duration::from_secs(60);

/// How often quiet seats are looked for.
pub const CHECK_EVERY: Duration = Duration::from_secs(30);

/// The most pods read back in one check (the quietest first).
pub const READ_MOST: usize = 32;

/// How long one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What reading a quiet seat's pod back says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeatReadBack {
    /// The pod is still there (pending, or bound and not shown by the watch yet).
    Waiting,
    /// The pod will never take the seat (the reason, for the log).
    Gone(&'static str),
}

/// Judges a quiet seat by its pod as read (`None`: not found).
pub fn judge(seat: &QuietSeat, pod: Option<&Pod>) -> SeatReadBack {
    let Some(pod) = pod else {
        return SeatReadBack::Gone("deleted");
    };
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    // Recorded under `namespace/name` (the scheduler sent no uid): the name is all there is.
    if !seat.uid.contains('/') && uid != seat.uid {
        return SeatReadBack::Gone("deleted (another pod has its name now)");
    }
    if is_terminal(pod) {
        return SeatReadBack::Gone("finished");
    }
    // kube-scheduler schedules no pod being deleted.
    let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    if pod.metadata.deletion_timestamp.is_some() && !bound {
        return SeatReadBack::Gone("being deleted");
    }
    SeatReadBack::Waiting
}

/// What one check did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CheckOutcome {
    /// Seats opened again.
    pub reopened: usize,
    /// Seats whose pods still wait.
    pub waiting: usize,
    /// Pods that could not be read (their seats kept).
    pub unread: usize,
}

/// Reads back the pods of the seats quiet since before `before` (at most [`READ_MOST`]) and
/// opens the seats of those gone.
pub async fn check_once(client: &Client, extender: &Extender, before: Instant) -> CheckOutcome {
    let seats = extender.with_book(|book, state| book.quiet_seats(state, before, READ_MOST));
    let mut outcome = CheckOutcome::default();
    for seat in seats {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &seat.namespace);
        let pod = match tokio::time::timeout(READ_TIMEOUT, pods.get_opt(&seat.name)).await {
            Ok(Ok(pod)) => pod,
            Ok(Err(e)) => {
                tracing::debug!(pod = %format_args!("{}/{}", seat.namespace, seat.name),
                    error = %e, "a quiet seat's pod could not be read back");
                outcome.unread += 1;
                continue;
            }
            Err(_) => {
                outcome.unread += 1;
                continue;
            }
        };
        match judge(&seat, pod.as_ref()) {
            SeatReadBack::Waiting => {
                extender.with_book(|book, _| book.quiet_seat_waits(&seat, Instant::now()));
                outcome.waiting += 1;
            }
            SeatReadBack::Gone(why) => {
                if extender.with_book(|book, state| book.reopen_seat_of_gone(state, &seat)) {
                    tracing::info!(pod = %format_args!("{}/{}", seat.namespace, seat.name),
                        reason = why,
                        "a seat's pod went away before it was bound: the seat is open again");
                    outcome.reopened += 1;
                }
            }
        }
    }
    outcome
}

/// Checks the quiet seats every [`CHECK_EVERY`] until cancelled.
pub async fn run(client: Client, extender: Extender, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
        let Some(before) = Instant::now().checked_sub(QUIET_FOR) else {
            continue;
        };
        // A task of its own, so that a panic in a check (a bug) is logged and the checks go on.
        let (c, e) = (client.clone(), extender.clone());
        let mut check = tokio::spawn(async move { check_once(&c, &e, before).await });
        let outcome = tokio::select! {
            () = cancel.cancelled() => {
                check.abort();
                return;
            }
            outcome = &mut check => outcome,
        };
        match outcome {
            Ok(outcome) if outcome != CheckOutcome::default() => tracing::debug!(
                reopened = outcome.reopened,
                waiting = outcome.waiting,
                unread = outcome.unread,
                "seats whose pods did not ask for {} s",
                QUIET_FOR.as_secs()
            ),
            Ok(_) => {}
            Err(e) if e.is_panic() => tracing::error!(error = %e, "a quiet-seat check failed"),
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(uid: &str) -> QuietSeat {
        QuietSeat {
            uid: uid.to_string(),
            namespace: "ns".to_string(),
            name: "p".to_string(),
            asked: Instant::now(),
            plan: crate::plans::PlanKey {
                group: crate::plans::GroupKey {
                    kind: crate::cluster::WorkloadKind::Job,
                    namespace: "ns".to_string(),
                    name: "train".to_string(),
                },
                pod_set: "main".to_string(),
            },
        }
    }

    fn pod(uid: &str, node: Option<&str>, phase: &str, deleting: bool) -> Pod {
        let mut pod = serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": uid},
            "spec": {"containers": [], "nodeName": node},
            "status": {"phase": phase},
        });
        if deleting {
            pod["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z".into();
        }
        serde_json::from_value(pod).unwrap()
    }

    #[test]
    fn only_a_pod_that_can_still_be_scheduled_or_bound_keeps_its_seat() {
        let s = seat("u1");
        let waiting = [
            pod("u1", None, "Pending", false),
            // Bound, and the watch has not shown it yet.
            pod("u1", Some("n1"), "Running", false),
            pod("u1", Some("n1"), "Running", true),
        ];
        for p in &waiting {
            assert_eq!(judge(&s, Some(p)), SeatReadBack::Waiting, "{p:?}");
        }
        let gone = [
            (None, "deleted"),
            (
                Some(pod("u2", None, "Pending", false)),
                "deleted (another pod has its name now)",
            ),
            (Some(pod("u1", None, "Failed", false)), "finished"),
            (Some(pod("u1", Some("n1"), "Succeeded", false)), "finished"),
            (Some(pod("u1", None, "Pending", true)), "being deleted"),
        ];
        for (p, why) in &gone {
            assert_eq!(judge(&s, p.as_ref()), SeatReadBack::Gone(why), "{p:?}");
        }
        // Recorded under its name (no uid sent): any uid is the pod's.
        let named = seat("ns/p");
        let p = pod("u2", None, "Pending", false);
        assert_eq!(judge(&named, Some(&p)), SeatReadBack::Waiting);
    }
}
