//! A pod the book has read at one `resourceVersion`, asked again at that version without its
//! body ([`PlanBook::filter_known`], [`PlanBook::favoured_known`]): the verdict the pod itself
//! would get, or `None` wherever the full path has to read it.

use super::hot_swap::not_ready_since;
use super::*;

fn at_version(mut pod: Pod, version: &str) -> Pod {
    pod.metadata.resource_version = Some(version.to_string());
    pod
}

fn candidates(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).collect()
}

fn known(b: &mut TestBook, uid: &str, version: &str, names: &[&str]) -> Option<FilterVerdict> {
    b.book
        .filter_known(&b.state, uid, version, names, Instant::now())
}

#[test]
fn a_seated_pod_is_answered_from_memory_as_from_its_body() {
    let mut b = book(2, &job_yaml("train", 4, 1, RACK));
    let names = all_nodes(&b);
    let names = candidates(&names);
    for i in 0..4 {
        let pod = at_version(job_pod("train", i, 1), "7");
        let uid = uid("train", i);
        assert_eq!(known(&mut b, &uid, "7", &names), None, "not read yet");
        let full = b.filter(&pod, &names, Instant::now());
        assert!(
            matches!(&full, FilterVerdict::Only { pass, seat: true, .. } if pass.len() == 1),
            "{full:?}"
        );
        assert_eq!(known(&mut b, &uid, "7", &names), Some(full.clone()));
        // The same over another candidate list (the scheduler's sample moves).
        let fewer = &names[1..];
        assert_eq!(
            known(&mut b, &uid, "7", fewer),
            Some(b.filter(&pod, fewer, Instant::now()))
        );
        assert_eq!(
            b.book.favoured_known(&uid, "7", &names),
            Some(b.favoured(&pod, &names))
        );
        assert_eq!(known(&mut b, &uid, "8", &names), None, "another version");
        assert_eq!(b.book.favoured_known(&uid, "8", &names), None);
    }
    // A pod sent without a version is read every time.
    let mut b = book(2, &job_yaml("eval", 2, 1, RACK));
    let names = all_nodes(&b);
    let names = candidates(&names);
    b.filter(&job_pod("eval", 0, 1), &names, Instant::now());
    assert!(!b.book.knows_seated(&uid("eval", 0), ""));
}

#[test]
fn a_bound_pod_is_answered_with_its_node() {
    let mut b = book(2, &job_yaml("train", 2, 1, RACK));
    let names = all_nodes(&b);
    let names = candidates(&names);
    let pod = at_version(job_pod("train", 0, 1), "7");
    let seat = seat_of(&mut b, &pod, Instant::now());
    b.bind(
        "default",
        &pod_name("train", 0),
        &uid("train", 0),
        &seat,
        Instant::now(),
    )
    .unwrap();
    let from_memory = known(&mut b, &uid("train", 0), "7", &names);
    let full = b.filter(&pod, &names, Instant::now());
    assert!(
        matches!(&full, FilterVerdict::Only { rejected, .. }
        if rejected.reason.contains("where the pod is bound")),
        "{full:?}"
    );
    assert_eq!(from_memory, Some(full));
}

#[test]
fn a_group_kueue_takes_over_is_sent_to_the_full_path() {
    let mut b = book(2, &job_yaml("train", 2, 1, RACK));
    let names = all_nodes(&b);
    let names = candidates(&names);
    let pod = at_version(job_pod("train", 0, 1), "7");
    seat_of(&mut b, &pod, Instant::now());
    assert!(known(&mut b, &uid("train", 0), "7", &names).is_some());
    let group = GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "train".into(),
    };
    b.state
        .apply_kueue_workload("default/job-train-1a2b3", Some(group));
    assert_eq!(known(&mut b, &uid("train", 0), "7", &names), None);
    // The full path passes Kueue's pod everywhere, which memory alone would not have said.
    let full = b.filter(&pod, &names, Instant::now());
    assert_eq!(full, FilterVerdict::Except { rejected: vec![] });
}

#[test]
fn after_nodes_change_a_seat_on_a_failed_node_is_left_to_the_full_path() {
    let mut b = book(3, &job_yaml("train", 2, 1, RACK));
    let names = all_nodes(&b);
    let names = candidates(&names);
    let pods: Vec<Pod> = (0..2)
        .map(|i| at_version(job_pod("train", i, 1), "7"))
        .collect();
    let seats: Vec<String> = pods
        .iter()
        .map(|p| seat_of(&mut b, p, Instant::now()))
        .collect();
    assert!(known(&mut b, &uid("train", 0), "7", &names).is_some());
    // A node of another rack fails: the seats are checked again, and nothing moves.
    let other = names
        .iter()
        .find(|n| n.starts_with("b1-") && rack_of(&b, n) != rack_of(&b, &seats[0]))
        .unwrap()
        .to_string();
    not_ready_since(&mut b, &other, 3600);
    let from_memory = known(&mut b, &uid("train", 0), "7", &names);
    assert_eq!(
        from_memory,
        Some(b.filter(&pods[0], &names, Instant::now()))
    );
    assert_eq!(seat_of(&mut b, &pods[0], Instant::now()), seats[0]);
    // The seat's own node fails: memory does not answer the lost seat, the full path
    // replans the group.
    not_ready_since(&mut b, &seats[0], 3600);
    assert_eq!(known(&mut b, &uid("train", 0), "7", &names), None);
    assert_ne!(seat_of(&mut b, &pods[0], Instant::now()), seats[0]);
}

#[test]
fn an_expired_plan_is_not_answered_from_memory() {
    let mut b = book_with_ttl(2, &job_yaml("train", 2, 1, RACK), Duration::from_secs(5));
    let names = all_nodes(&b);
    let names = candidates(&names);
    let start = Instant::now();
    let pod = at_version(job_pod("train", 0, 1), "7");
    seat_of(&mut b, &pod, start);
    let later = start + Duration::from_secs(60);
    let from_memory = b
        .book
        .filter_known(&b.state, &uid("train", 0), "7", &names, later);
    assert_eq!(from_memory, None);
    assert_eq!(b.stats().plans_active, 0, "the sweep expired the plan");
}

#[test]
fn a_lone_pod_read_by_filter_is_prioritized_from_memory_and_filtered_anew() {
    let mut b = book(2, &job_yaml("train", 4, 1, RACK));
    let names = all_nodes(&b);
    let names = candidates(&names);
    // A plan holds capacity, so that the lone pod's filter has something to decide.
    b.filter(
        &at_version(job_pod("train", 0, 1), "3"),
        &names,
        Instant::now(),
    );
    let web = at_version(lone_pod("web", 1), "5");
    assert!(!b.book.knows_read("uid-web", "5"), "not read yet");
    assert_eq!(b.book.favoured_known("uid-web", "5", &names), None);
    b.filter(&web, &names, Instant::now());
    assert!(b.book.knows_read("uid-web", "5"));
    assert!(!b.book.knows_read("uid-web", "6"), "another version");
    assert_eq!(
        b.book.favoured_known("uid-web", "5", &names),
        Some(b.favoured(&web, &names))
    );
    // Its filter depends on all the capacity held at the time: never from memory.
    assert!(!b.book.knows_seated("uid-web", "5"));
    assert_eq!(known(&mut b, "uid-web", "5", &names), None);
    // Bound, it stays in the book until it goes; what it was read as does not.
    let passing = match b.filter(&web, &names, Instant::now()) {
        FilterVerdict::Except { rejected } => {
            let out: Vec<usize> = rejected.iter().map(|(i, _)| *i).collect();
            (0..names.len()).find(|i| !out.contains(i)).unwrap()
        }
        other => panic!("a lone pod gets Except, got {other:?}"),
    };
    b.bind("default", "web", "uid-web", names[passing], Instant::now())
        .unwrap();
    assert!(!b.book.knows_read("uid-web", "5"));
}
