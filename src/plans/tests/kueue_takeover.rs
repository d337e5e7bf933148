//! A group kube-tas planned that Kueue then manages (its `Workload` seen after the plan was
//! made, as after a restart whose Workload list came late): the plan is released, a bind
//! already begun ends on its seat, and the pods bind where Kueue's TAS put them.

use super::*;

fn train_group() -> GroupKey {
    GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "train".into(),
    }
}

fn kueue_takes_train(b: &mut TestBook) {
    b.state
        .apply_kueue_workload("default/job-train-1a2b3", Some(train_group()));
}

fn held_nodes(b: &TestBook, names: &[String]) -> Vec<String> {
    (names.iter())
        .filter(|n| b.book.held_on(&b.state, n).is_some())
        .cloned()
        .collect()
}

fn released(notices: &[Notice]) -> Vec<&Notice> {
    (notices.iter())
        .filter(|n| n.reason == "TopologyPlanReleased")
        .collect()
}

/// The plan is released at the group's next pod, its holds given back, and the pod binds
/// where Kueue's TAS put it, not only on its old seat.
#[test]
fn a_planned_group_kueue_takes_over_gives_its_plan_back() {
    let mut b = book(2, &job_yaml("train", 2, 1, RACK));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let pod = job_pod("train", 0, 1);
    let seat = seat_of(&mut b, &pod, Instant::now());
    assert!(held_nodes(&b, &names).contains(&seat));
    kueue_takes_train(&mut b);
    let verdict = b.filter(&pod, &candidates, Instant::now());
    assert_eq!(verdict, FilterVerdict::Except { rejected: vec![] });
    assert!(held_nodes(&b, &names).is_empty());
    let notices = b.book.take_notices();
    let notes = released(&notices);
    assert_eq!(notes.len(), 1, "{notices:?}");
    assert_eq!(
        notes[0].note,
        "Kueue manages Job default/train now: kube-tas released its plan and gave back the \
         room of its 2 seat(s) not yet bound; Kueue's TAS places the pods"
    );
    // Kueue's node, not the old seat.
    let elsewhere = (names.iter())
        .find(|n| n.starts_with("b1-") && **n != seat)
        .unwrap();
    b.bind(
        "default",
        &pod_name("train", 0),
        &uid("train", 0),
        elsewhere,
        Instant::now(),
    )
    .unwrap();
    assert_eq!(cpu_used(&b, elsewhere), 1000);
}

/// A pod first seen while kube-tas planned its group is Kueue's at its bind once Kueue took
/// the group over: it binds on room another plan holds, as a pod Kueue managed from the
/// start does.
#[test]
fn a_pod_seen_before_kueue_took_its_group_binds_as_kueues() {
    let yaml = job_yaml("other", 8, 1, RACK) + &job_yaml("train", 2, 1, RACK);
    let mut b = book(2, &yaml);
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    seat_of(&mut b, &job_pod("other", 0, 1), Instant::now());
    let pod = job_pod("train", 0, 1);
    seat_of(&mut b, &pod, Instant::now());
    kueue_takes_train(&mut b);
    b.filter(&pod, &candidates, Instant::now());
    // Left held: `other`'s rack, every cpu of it.
    let held = held_nodes(&b, &names);
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(b.book.held_on(&b.state, &held[0]).unwrap()["cpu"], 4000);
    b.bind(
        "default",
        &pod_name("train", 0),
        &uid("train", 0),
        &held[0],
        Instant::now(),
    )
    .unwrap();
    assert_eq!(cpu_used(&b, &held[0]), 1000);
}

/// A pod whose Binding to its seat is being written when Kueue takes its group over keeps
/// that bind, and its plan's other seats stay their pods' until it ends; then the group's
/// next pod releases the plan.
#[test]
fn a_bind_in_flight_when_kueue_takes_over_ends_on_its_seat() {
    let mut b = book(2, &job_yaml("train", 3, 1, RACK));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let pods: Vec<Pod> = (0..3).map(|i| job_pod("train", i, 1)).collect();
    let seats: Vec<String> = (pods.iter())
        .map(|p| seat_of(&mut b, p, Instant::now()))
        .collect();
    let ticket = b
        .book
        .begin_bind(
            &b.state,
            "default",
            &pod_name("train", 0),
            &uid("train", 0),
            &seats[0],
            Instant::now(),
        )
        .unwrap();
    kueue_takes_train(&mut b);
    for (i, pod) in pods.iter().enumerate().take(2) {
        let verdict = b.filter(pod, &candidates, Instant::now());
        let FilterVerdict::Only { pass, .. } = &verdict else {
            panic!("pod {i}: {verdict:?}")
        };
        let passed: Vec<&String> = pass.iter().map(|&p| &names[p]).collect();
        assert_eq!(passed, [&seats[i]], "pod {i}");
    }
    assert_eq!(b.stats().seats_held, 3);
    b.book.commit_bind(&mut b.state, &ticket, Instant::now());
    assert_eq!(cpu_used(&b, &seats[0]), 1000);
    assert_eq!(
        b.stats().seats_held,
        2,
        "the bound seat's hold is given back"
    );
    assert!(released(&b.book.take_notices()).is_empty());
    let verdict = b.filter(&pods[1], &candidates, Instant::now());
    assert_eq!(verdict, FilterVerdict::Except { rejected: vec![] });
    assert_eq!(b.stats().seats_held, 0, "the plan is released");
    let notices = b.book.take_notices();
    assert!(
        released(&notices)
            .iter()
            .any(|n| n.note.contains("its 2 seat(s)")),
        "{notices:?}"
    );
}

/// A group none of whose pods asks again after Kueue took it over (they were bound
/// elsewhere) has its plan released by the book's sweep, not kept for its TTL.
#[test]
fn the_sweep_releases_a_plan_kueue_took_over_that_no_pod_asks_about() {
    let mut b = book(2, &job_yaml("train", 2, 1, RACK));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let t0 = Instant::now();
    seat_of(&mut b, &job_pod("train", 0, 1), t0);
    kueue_takes_train(&mut b);
    b.filter(&lone_pod("web", 1), &candidates, t0);
    assert_eq!(b.stats().seats_held, 2, "swept at most once a second");
    b.filter(
        &lone_pod("web", 1),
        &candidates,
        t0 + Duration::from_secs(2),
    );
    assert_eq!(b.stats().seats_held, 0);
    assert!(held_nodes(&b, &names).is_empty());
    assert_eq!(released(&b.book.take_notices()).len(), 1);
}
