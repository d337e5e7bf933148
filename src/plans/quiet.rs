//! Seats taken by pods that stopped asking: listed for a read-back from the API server, and
//! opened again when their pod turns out to be gone.
//!
//! A pod takes its seat at its first `filter` (a Workload-API PodGroup's pods are seated when
//! their tree is planned) and keeps it until it is bound. One deleted
//! before it was bound leaves the seat taken and holding its room: for the plan's life, which
//! for a workload of several PodSets is the workload's. The book finds most such seats itself
//! (a successor of the same completion index takes its predecessor's seat; the pending-pod
//! watch shows a plain pod group's or a PodGroup's pod gone, which the book looks for when a
//! pod of the group finds no open seat), but nothing it sees tells a
//! NonIndexed Job's pod that is gone from one still waiting in kube-scheduler's queue. The
//! caller reads such pods back ([`PlanBook::quiet_seats`]) and reports the gone ones
//! ([`PlanBook::reopen_seat_of_gone`]); the group's next pod takes the seat. Only pods that
//! have asked are listed: one seated with its tree that never asked is not known by name.

use std::time::Instant;

use super::{Holder, PlanBook, PlanCounters, PlanKey, SeenPod};
use crate::cluster::state::ClusterState;

/// A seat taken by a pod that holds no capacity and has not asked since `asked`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuietSeat {
    /// The pod's uid (`namespace/name` when the scheduler sent none).
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// When it last asked (`filter`): a pod that asks again is alive.
    pub asked: Instant,
    /// The plan the seat is in.
    pub plan: PlanKey,
}

impl PlanBook {
    /// The seats taken by pods that hold no capacity (not bound, no Binding being written),
    /// have not asked since before `before` and were not read back waiting since then either,
    /// the quietest first, at most `limit`.
    pub fn quiet_seats(
        &self,
        state: &ClusterState,
        before: Instant,
        limit: usize,
    ) -> Vec<QuietSeat> {
        // References first, the quietest `limit` chosen among them in linear time, and only
        // those cloned: a gang of thousands held in Permit is quiet as a whole, under the
        // book's lock.
        let mut quiet: Vec<(Instant, &PlanKey, &String, &SeenPod)> = (self.plans.iter())
            .flat_map(|(key, plan)| {
                plan.seats
                    .iter()
                    .filter_map(move |seat| match &seat.holder {
                        Holder::Taken(uid) => Some((key, uid)),
                        _ => None,
                    })
            })
            .filter_map(|(key, uid)| {
                let seen = self.pods.get(uid)?;
                let heard = seen
                    .read_back_waiting
                    .map_or(seen.seen, |r| r.max(seen.seen));
                (heard < before && seen.binding.is_none() && state.pod(uid).is_none())
                    .then_some((heard, key, uid, seen))
            })
            .collect();
        if quiet.len() > limit && limit > 0 {
            quiet.select_nth_unstable_by_key(limit - 1, |q| (q.0, q.2));
        }
        quiet.truncate(limit);
        quiet.sort_by_key(|q| (q.0, q.2));
        (quiet.into_iter())
            .map(|(_, key, uid, seen)| QuietSeat {
                uid: uid.clone(),
                namespace: key.group.namespace.clone(),
                name: seen.name.clone(),
                asked: seen.seen,
                plan: key.clone(),
            })
            .collect()
    }

    /// The pod of a quiet seat was read back waiting at `now`: it is not read again before it
    /// has been quiet as long once more, so that pods that wait long (a gang held in Permit)
    /// do not take every read from a seat whose pod is gone.
    pub fn quiet_seat_waits(&mut self, seat: &QuietSeat, now: Instant) {
        if let Some(seen) = self.pods.get_mut(&seat.uid) {
            seen.read_back_waiting = Some(now);
        }
    }

    /// The pod of a quiet seat is gone (read back deleted, finished, being deleted, or
    /// another pod under its name): its seat is open again for the group's next pod. Nothing
    /// changes when the pod asked again since `seat.asked`, holds capacity now, or no longer
    /// sits there; `true` when the seat was opened.
    pub fn reopen_seat_of_gone(&mut self, state: &ClusterState, seat: &QuietSeat) -> bool {
        let Some(seen) = self.pods.get(&seat.uid) else {
            return false;
        };
        if seen.seen != seat.asked || seen.binding.is_some() || state.pod(&seat.uid).is_some() {
            return false;
        }
        let Some(plan) = self.plans.get_mut(&seat.plan) else {
            return false;
        };
        let taken = plan
            .by_uid
            .get(&seat.uid)
            .is_some_and(|&s| matches!(&plan.seats[s].holder, Holder::Taken(u) if *u == seat.uid));
        if !taken {
            return false;
        }
        plan.open_seat_of(&seat.uid);
        PlanCounters::bump(&self.counters.seats_reopened);
        true
    }
}
