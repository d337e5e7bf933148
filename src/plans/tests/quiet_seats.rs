//! Seats whose pods stopped asking ([`PlanBook::quiet_seats`]) and the seat of one read back
//! gone, opened for the group's next pod ([`PlanBook::reopen_seat_of_gone`]).

use super::*;

fn quiet_names(b: &TestBook, before: Instant, limit: usize) -> Vec<String> {
    (b.book.quiet_seats(&b.state, before, limit).into_iter())
        .map(|q| q.name)
        .collect()
}

/// A NonIndexed Job fills its rack; one pod is deleted before its bind and another is made
/// in its place. Only the seat of a pod read back gone opens, for that newcomer, and only
/// while that pod has not asked again and holds nothing.
#[test]
fn the_seat_of_a_quiet_pod_read_back_gone_goes_to_the_next_pod() {
    // Plans outlive the test's clock: the newcomer must find the seat, not a plan made anew.
    let mut b = book_with_ttl(1, &job_yaml("train", 8, 1, RACK), Duration::from_secs(3600));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let t0 = Instant::now();
    let pods: Vec<Pod> = "abcdefgh"
        .chars()
        .map(|c| unindexed_pod("train", &c.to_string()))
        .collect();
    let seat: Vec<String> = pods.iter().map(|p| seat_of(&mut b, p, t0)).collect();
    assert_eq!(b.stats().seats_held, 8);
    let newcomer = unindexed_pod("train", "i");
    let t1 = t0 + Duration::from_secs(1);
    let refused = b.filter(&newcomer, &candidates, t1);
    assert!(
        matches!(&refused, FilterVerdict::Only { pass, .. } if pass.is_empty()),
        "the rack is full: {refused:?}"
    );
    // None is quiet since before they asked; all eight since after.
    assert!(quiet_names(&b, t0, 100).is_empty());
    assert_eq!(quiet_names(&b, t1, 100).len(), 8);
    let listed_at_t1 = b.book.quiet_seats(&b.state, t1, 100);
    // One asks again, one is bound: neither is quiet. The quietest come first.
    let t2 = t0 + Duration::from_secs(2);
    assert_eq!(seat_of(&mut b, &pods[0], t2), seat[0]);
    b.bind("default", "train-c", "uid-train-c", &seat[2], t2)
        .unwrap();
    let before = t0 + Duration::from_secs(90);
    let quiet = b.book.quiet_seats(&b.state, before, 100);
    let mut listed: Vec<&str> = quiet.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(listed.last(), Some(&"train-a"), "asked last: {listed:?}");
    listed.sort_unstable();
    assert_eq!(
        listed,
        [
            "train-a", "train-b", "train-d", "train-e", "train-f", "train-g", "train-h"
        ]
    );
    assert!(quiet.iter().all(|q| q.namespace == "default"));
    assert_eq!(quiet_names(&b, before, 2).len(), 2);
    assert!(!quiet_names(&b, before, 2).contains(&"train-a".to_string()));
    // A listing older than the pod's last ask opens nothing.
    let stale = listed_at_t1.iter().find(|q| q.name == "train-a").unwrap();
    assert!(!b.book.reopen_seat_of_gone(&b.state, stale));
    // train-b is read back gone: its seat is the newcomer's, no extra seat is made.
    let gone = quiet.iter().find(|q| q.name == "train-b").unwrap();
    assert_eq!(b.stats().seats_reopened, 0);
    assert!(b.book.reopen_seat_of_gone(&b.state, gone));
    assert!(!b.book.reopen_seat_of_gone(&b.state, gone), "open already");
    assert_eq!(b.stats().seats_reopened, 1);
    let t3 = t0 + Duration::from_secs(91);
    assert_eq!(seat_of(&mut b, &newcomer, t3), seat[1]);
    assert_eq!(b.stats().seats_held, 7, "train-c is bound");
    assert!(
        !b.book.reopen_seat_of_gone(&b.state, gone),
        "the newcomer's now"
    );
    assert!(!quiet_names(&b, t3, 100).contains(&"train-b".to_string()));
    let s = b.stats();
    assert_eq!((s.plans_made, s.plans_active), (1, 1), "{s:?}");
}

/// A pod read back waiting is not read again until it has been quiet as long once more: pods
/// that wait long do not take every read from a seat whose pod is gone.
#[test]
fn a_pod_read_back_waiting_waits_its_turn() {
    let mut b = book_with_ttl(1, &job_yaml("train", 8, 1, RACK), Duration::from_secs(3600));
    let t0 = Instant::now();
    for c in ["a", "b", "c"] {
        seat_of(&mut b, &unindexed_pod("train", c), t0);
    }
    let t1 = t0 + Duration::from_secs(60);
    let first = b.book.quiet_seats(&b.state, t1, 2);
    assert_eq!(first.len(), 2);
    for seat in &first {
        b.book.quiet_seat_waits(seat, t1);
    }
    let next = b.book.quiet_seats(&b.state, t1, 2);
    assert_eq!(next.len(), 1, "{next:?}");
    assert!(!first.contains(&next[0]));
    let later = t1 + Duration::from_secs(1);
    assert_eq!(b.book.quiet_seats(&b.state, later, 10).len(), 3);
}
