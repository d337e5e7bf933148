//! What a rejection says when capacity that plans hold (seats whose pods are not bound yet)
//! is what keeps a pod or a gang out, and what it says when the room is really not there: a
//! gang planned on free capacity net of holds, an extra seat for a pod past its plan's seats,
//! a pod outside any group (filter and bind). Each message is checked in both situations; the
//! version without holds in the way never mentions them.

use super::*;

/// A pod of `job` made in place of pod `index` that took a seat and went away before it was
/// bound, carrying no completion index (as a NonIndexed Job's pods): it cannot be told from a
/// sibling still waiting, so its predecessor's seat stays taken and it needs a seat of its own
/// (a pod with the index takes its predecessor's seat:
/// `a_pod_made_in_place_of_one_deleted_before_its_bind_takes_its_seat`).
fn again(job: &str, index: usize, cpu: u32) -> Pod {
    without_index(job_pod(job, index, cpu), format!("{job}-{index}-again"))
}

/// What filter answers a group pod: the nodes that pass, the reason for the rest and whether
/// preemption cannot help.
fn answer(b: &mut TestBook, pod: &Pod, now: Instant) -> (Vec<String>, String, bool) {
    let names = all_nodes(b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match b.filter(pod, &candidates, now) {
        FilterVerdict::Only { pass, rejected, .. } => (
            pass.iter().map(|&i| names[i].clone()).collect(),
            rejected.reason.to_string(),
            rejected.unresolvable,
        ),
        other => panic!("a group pod gets Only, got {other:?}"),
    }
}

/// What filter answers a pod outside any group: the turned-down nodes with their reasons.
fn lone_answer(b: &mut TestBook, pod: &Pod, now: Instant) -> Vec<(String, String)> {
    let names = all_nodes(b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match b.filter(pod, &candidates, now) {
        FilterVerdict::Except { rejected } => rejected
            .iter()
            .map(|(i, why)| (names[*i].clone(), why.reason.to_string()))
            .collect(),
        other => panic!("a lone pod gets Except, got {other:?}"),
    }
}

fn job_key(name: &str) -> GroupKey {
    GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: name.into(),
    }
}

/// Holds and plans are never blamed for a rejection they did not cause.
fn assert_no_holds_blamed(reason: &str) {
    assert!(
        !reason.contains("held")
            && !reason.contains("hold")
            && !reason.contains(" plan (")
            && !reason.contains(" plans ("),
        "holds are not what keeps it out, yet the message says so: {reason}"
    );
}

// ---------------------------------------------------------------------------------------------
// Extra seats: a pod of a PodSet whose seats are all taken
// ---------------------------------------------------------------------------------------------

#[test]
fn a_pod_past_its_plans_seats_gets_a_seat_where_its_rack_has_room() {
    // One rack: b1-r1-h1 (4 cpu free) and b1-r1-h2 (3 cpu free, a filler uses 1). Job `train`
    // (4 x 1 cpu) fits exactly on h1. Pod 3 takes its seat and goes away before it is bound;
    // the pod the Job controller makes in its place finds every seat taken: it gets one more
    // seat in the rack, on h2's 3 free cpu (it used to be told "its domain is full").
    let extra = format!(
        "{}{}",
        filler_pod_yaml("f", 1, "b1-r1-h2"),
        job_yaml("train", 4, 1, RACK)
    );
    let mut b = book(1, &extra);
    let t0 = Instant::now();
    let nodes = seats(&mut b, "train", 4, 1, t0);
    assert!(nodes.iter().all(|n| n == "b1-r1-h1"), "{nodes:?}");
    let (pass, reason, _) = answer(&mut b, &again("train", 3, 1), t0);
    assert_eq!(pass, ["b1-r1-h2"], "{reason}");
    assert_eq!(b.stats().seats_held, 5);
    // It binds there like any seat.
    b.bind(
        "default",
        "train-3-again",
        "uid-train-3-again",
        "b1-r1-h2",
        t0,
    )
    .unwrap();
    assert_eq!(cpu_used(&b, "b1-r1-h2"), 2000);
}

#[test]
fn an_extra_seat_keeps_the_pod_sets_node_selector() {
    // Only b1-r1-h2 has `pool: a`, which the Job's template selects: its 2 seats are there
    // (2 cpu left). b1-r1-h1 has 1 cpu left, the tighter fit for one more pod, but the pod
    // cannot go there: its extra seat is on h2.
    let yaml = base_yaml(1).replace(
        "    kubernetes.io/hostname: b1-r1-h2\n",
        "    kubernetes.io/hostname: b1-r1-h2\n    pool: a\n",
    ) + &filler_pod_yaml("f", 3, "b1-r1-h1")
        + &job_yaml("train", 2, 1, RACK).replace(
            "      restartPolicy: Never\n",
            "      restartPolicy: Never\n      nodeSelector:\n        pool: a\n",
        );
    let mut b = TestBook::new(load(&yaml), TTL);
    let t0 = Instant::now();
    assert_eq!(seats(&mut b, "train", 2, 1, t0), ["b1-r1-h2", "b1-r1-h2"]);
    let (pass, reason, _) = answer(&mut b, &again("train", 1, 1), t0);
    assert_eq!(pass, ["b1-r1-h2"], "{reason}");
}

#[test]
fn an_extra_seat_keeps_the_pod_sets_tolerations() {
    // Both hosts of the rack carry a NoSchedule taint the Job's template tolerates (the
    // flavor does not): the extra seat is placed with the template's tolerations.
    let yaml = base_yaml(1).replace(
        "    node-group: tas\nspec: {}\n",
        "    node-group: tas\nspec:\n  taints:\n  - {key: dedicated, value: ml, effect: NoSchedule}\n",
    ) + &job_yaml("train", 2, 1, RACK).replace(
        "      restartPolicy: Never\n",
        "      restartPolicy: Never\n      tolerations:\n      - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}\n",
    );
    let mut b = TestBook::new(load(&yaml), TTL);
    let t0 = Instant::now();
    assert_eq!(seats(&mut b, "train", 2, 1, t0).len(), 2);
    let (pass, reason, _) = answer(&mut b, &again("train", 1, 1), t0);
    assert_eq!(pass.len(), 1, "{reason}");
    assert!(pass[0].starts_with("b1-r1-"), "{pass:?}");
}

#[test]
fn no_extra_seat_on_room_another_plan_holds_says_which_plan_holds_it() {
    // `train` (4 x 1 cpu) sits on b1-r1-h1, `other` (4 x 1 cpu) holds all of b1-r1-h2 for
    // pods not bound yet: the rack's only room is other's.
    let extra = format!(
        "{}{}",
        job_yaml("train", 4, 1, RACK),
        job_yaml("other", 4, 1, RACK)
    );
    let mut b = book(1, &extra);
    let t0 = Instant::now();
    assert!(
        seats(&mut b, "train", 4, 1, t0)
            .iter()
            .all(|n| n == "b1-r1-h1")
    );
    assert_eq!(seat_of(&mut b, &job_pod("other", 0, 1), t0), "b1-r1-h2");
    let (pass, reason, unresolvable) = answer(&mut b, &again("train", 3, 1), t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        !unresolvable,
        "the room comes back when other binds or expires"
    );
    assert_eq!(
        reason,
        "node(s) have no room for another pod of Job default/train: every seat of its plan is \
         taken, and the room left in rack r1 is held by 1 plan (Job default/other) for pods \
         not bound yet"
    );
}

#[test]
fn no_extra_seat_on_room_its_own_seats_hold_says_so() {
    // `train` (8 x 1 cpu) holds the whole rack; all 8 seats are taken by pods not bound yet.
    let mut b = book(1, &job_yaml("train", 8, 1, RACK));
    let t0 = Instant::now();
    seats(&mut b, "train", 8, 1, t0);
    let (pass, reason, _) = answer(&mut b, &again("train", 7, 1), t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        reason.contains("every seat of its plan is taken")
            && reason.contains("held by 1 plan (Job default/train itself) for pods not bound yet"),
        "{reason}"
    );
    assert!(!reason.contains("is full"), "{reason}");
}

#[test]
fn no_extra_seat_in_a_full_rack_names_the_resource_and_the_most_free() {
    // `train` (2 x 3 cpu) has a seat on each host of the rack; pod 0 binds. Then a pod bound
    // outside kube-tas lands on pod 1's host (2 cpu), and pod 1 goes away before it is bound:
    // its successor finds 1 and 2 cpu free on the two hosts, even counting no hold at all.
    let yaml = base_yaml(1) + &job_yaml("train", 2, 3, RACK);
    let mut b = TestBook::new(load(&yaml), TTL);
    let t0 = Instant::now();
    let s0 = seat_of(&mut b, &job_pod("train", 0, 3), t0);
    let s1 = seat_of(&mut b, &job_pod("train", 1, 3), t0);
    assert_ne!(s0, s1);
    b.bind("default", &pod_name("train", 0), &uid("train", 0), &s0, t0)
        .unwrap();
    let late = load(&format!(
        "{}{}",
        base_yaml(1),
        filler_pod_yaml("late", 2, &s1)
    ));
    b.state.apply_bound_pod(&late.bound_pods[0]);
    let (pass, reason, unresolvable) = answer(&mut b, &again("train", 1, 3), t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(!unresolvable);
    assert_eq!(
        reason,
        format!(
            "node(s) have no room for another pod of Job default/train: every seat of its plan \
             is taken and no host of rack r1 has room for cpu 3; the most free is cpu 2 on {s1}"
        )
    );
    assert_no_holds_blamed(&reason);
}

// ---------------------------------------------------------------------------------------------
// Gangs planned on free capacity net of holds
// ---------------------------------------------------------------------------------------------

#[test]
fn a_gang_kept_out_by_holds_says_how_many_more_would_fit_and_which_plans_hold_them() {
    // Two racks of 2 hosts x 4 cpu. `gang-a` and `gang-b` (2 x 2 cpu each) hold all of rack
    // r1 for pods not bound yet. `gang-c` (6 x 2 cpu, one block) finds 4 pods' room in r2;
    // on the capacity without holds it fits, using both held hosts of r1.
    let extra = format!(
        "{}{}{}",
        job_yaml("gang-a", 2, 2, RACK),
        job_yaml("gang-b", 2, 2, RACK),
        job_yaml("gang-c", 6, 2, BLOCK)
    );
    let mut b = book(2, &extra);
    let t0 = Instant::now();
    assert_eq!(seat_of(&mut b, &job_pod("gang-a", 0, 2), t0), "b1-r1-h1");
    assert_eq!(seat_of(&mut b, &job_pod("gang-b", 0, 2), t0), "b1-r1-h2");
    let (pass, reason, unresolvable) = answer(&mut b, &job_pod("gang-c", 0, 2), t0);
    assert!(pass.is_empty());
    assert!(!unresolvable);
    let kueue = "topology \"default\" allows to fit only 4 out of 6 pod(s). Total nodes: 4; \
                 excluded: resource \"cpu\": 2";
    let held = "; 2 more would fit on capacity held by 2 plans (Job default/gang-a, Job \
                default/gang-b) for pods not bound yet";
    assert_eq!(
        reason,
        format!("node(s) cannot take Job default/gang-c (6 pods): {kueue}{held}")
    );
    // Kueue's words stay the prefix of the engine's message (simulate and Events show it).
    assert_eq!(
        b.group_failure(&job_key("gang-c")),
        Some(format!("{kueue}{held}").as_str())
    );
    let notices = b.book.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.reason == "TopologyDoesNotFit" && n.note.contains(held)),
        "{notices:?}"
    );
}

#[test]
fn a_gang_names_only_the_plans_whose_holds_are_in_its_way() {
    // `gang-a` (4 x 2 cpu) holds all of rack r1, `gang-b` (1 x 2 cpu) a host of r2. `gang-c`
    // (4 x 2 cpu, one rack) fits 3 in r2; without holds it takes r1, which only gang-a holds.
    let extra = format!(
        "{}{}{}",
        job_yaml("gang-a", 4, 2, RACK),
        job_yaml("gang-b", 1, 2, RACK),
        job_yaml("gang-c", 4, 2, RACK)
    );
    let mut b = book(2, &extra);
    let t0 = Instant::now();
    let a = seat_of(&mut b, &job_pod("gang-a", 0, 2), t0);
    let b0 = seat_of(&mut b, &job_pod("gang-b", 0, 2), t0);
    assert_eq!(
        (rack_of(&b, &a), rack_of(&b, &b0)),
        ("b1/r1".into(), "b1/r2".into())
    );
    let (_, reason, _) = answer(&mut b, &job_pod("gang-c", 0, 2), t0);
    assert!(
        reason.starts_with(
            "node(s) cannot take Job default/gang-c (4 pods): topology \"default\" allows to \
             fit only 3 out of 4 pod(s)"
        ),
        "{reason}"
    );
    assert!(
        reason.ends_with(
            "; 1 more would fit on capacity held by 1 plan (Job default/gang-a) for pods not \
             bound yet"
        ),
        "{reason}"
    );
}

#[test]
fn a_gang_holds_keep_partly_out_says_it_would_not_fit_even_without_them() {
    // One rack of 8 cpu; `gang-a` (1 x 2 cpu) holds 2 of them. `gang-c` (5 x 2 cpu) fits 3 on
    // the rest, 4 without the hold: never all 5.
    let extra = format!(
        "{}{}",
        job_yaml("gang-a", 1, 2, RACK),
        job_yaml("gang-c", 5, 2, RACK)
    );
    let mut b = book(1, &extra);
    let t0 = Instant::now();
    seat_of(&mut b, &job_pod("gang-a", 0, 2), t0);
    let (_, reason, unresolvable) = answer(&mut b, &job_pod("gang-c", 0, 2), t0);
    assert!(unresolvable, "it fits no empty cluster either");
    assert_eq!(
        reason,
        "node(s) cannot take Job default/gang-c (5 pods): topology \"default\" allows to fit \
         only 3 out of 5 pod(s); 1 more would fit on capacity held by 1 plan (Job \
         default/gang-a) for pods not bound yet (not all 5 pod(s) even then)"
    );
}

#[test]
fn a_gang_short_of_room_for_other_reasons_does_not_blame_holds() {
    // Fillers leave 6 cpu in each rack; `gang-a` (1 x 2 cpu) holds 2 of r1's. `gang-c`
    // (4 x 2 cpu, one rack) fits 3 in r2 with or without the hold: the hold is not the cause.
    let extra = format!(
        "{}{}{}{}",
        filler_pod_yaml("f1", 2, "b1-r1-h2"),
        filler_pod_yaml("f2", 2, "b1-r2-h1"),
        job_yaml("gang-a", 1, 2, RACK),
        job_yaml("gang-c", 4, 2, RACK)
    );
    let mut b = book(2, &extra);
    let t0 = Instant::now();
    seat_of(&mut b, &job_pod("gang-a", 0, 2), t0);
    assert_eq!(b.stats().seats_held, 1);
    let (_, reason, _) = answer(&mut b, &job_pod("gang-c", 0, 2), t0);
    assert_no_holds_blamed(&reason);
    let message = b.group_failure(&job_key("gang-c")).unwrap().to_string();
    assert!(
        message.starts_with("topology \"default\" allows to fit only 3 out of 4 pod(s)"),
        "{message}"
    );
    assert_no_holds_blamed(&message);
    // Without any plan at all, nothing about holds either.
    let mut b = book(1, &job_yaml("huge", 5, 2, RACK));
    let (_, reason, _) = answer(&mut b, &job_pod("huge", 0, 2), t0);
    assert_eq!(
        reason,
        "node(s) cannot take Job default/huge (5 pods): topology \"default\" allows to fit \
         only 4 out of 5 pod(s)"
    );
}

// ---------------------------------------------------------------------------------------------
// Pods outside any group
// ---------------------------------------------------------------------------------------------

#[test]
fn a_lone_pod_kept_off_held_room_is_told_which_plans_hold_it() {
    // `a` and `b` (2 x 1 cpu each) both hold their seats on b1-r1-h1.
    let extra = format!("{}{}", job_yaml("a", 2, 1, RACK), job_yaml("b", 2, 1, RACK));
    let mut b = book(1, &extra);
    let t0 = Instant::now();
    assert_eq!(seat_of(&mut b, &job_pod("a", 0, 1), t0), "b1-r1-h1");
    assert_eq!(seat_of(&mut b, &job_pod("b", 0, 1), t0), "b1-r1-h1");
    let rejected = lone_answer(&mut b, &lone_pod("web", 1), t0);
    assert_eq!(
        rejected,
        [(
            "b1-r1-h1".to_string(),
            "node(s) have their free capacity held by 2 plans (Job default/a, Job default/b) \
             for pods not bound yet"
                .to_string()
        )]
    );
    // Asked again with the holds unchanged, the same words.
    assert_eq!(lone_answer(&mut b, &lone_pod("api", 1), t0), rejected);
    // `a`'s pods are bound: only `b` holds room there now, and the words say so.
    assert_eq!(seat_of(&mut b, &job_pod("a", 1, 1), t0), "b1-r1-h1");
    for i in 0..2 {
        b.bind("default", &pod_name("a", i), &uid("a", i), "b1-r1-h1", t0)
            .unwrap();
    }
    assert_eq!(
        lone_answer(&mut b, &lone_pod("web", 1), t0),
        [(
            "b1-r1-h1".to_string(),
            "node(s) have their free capacity held by 1 plan (Job default/b) for pods not \
             bound yet"
                .to_string()
        )]
    );
}

#[test]
fn a_lone_pod_is_told_every_plan_holding_its_nodes_and_none_whose_seats_there_are_bound() {
    // One rack of two 4-cpu hosts. `a` (3 x 2 cpu) holds one host whole and half the other;
    // `b` (1 x 1 cpu) holds a cpu of that other host.
    let extra = format!("{}{}", job_yaml("a", 3, 2, RACK), job_yaml("b", 1, 1, RACK));
    let mut b = book(1, &extra);
    let t0 = Instant::now();
    let seats: Vec<String> = (0..3)
        .map(|i| seat_of(&mut b, &job_pod("a", i, 2), t0))
        .collect();
    let shared = if seats.iter().filter(|s| *s == "b1-r1-h1").count() == 1 {
        "b1-r1-h1"
    } else {
        "b1-r1-h2"
    };
    assert_eq!(
        seats.iter().filter(|s| *s == shared).count(),
        1,
        "{seats:?}"
    );
    assert_eq!(seat_of(&mut b, &job_pod("b", 0, 1), t0), shared);
    // A lone pod of 2 cpu asking for that host alone: it fits but for the holds.
    let on_shared = |b: &mut TestBook| match b.filter(&lone_pod("web", 2), &[shared], t0) {
        FilterVerdict::Except { rejected } => {
            assert_eq!(rejected.len(), 1, "{rejected:?}");
            rejected[0].1.reason.to_string()
        }
        other => panic!("a lone pod gets Except, got {other:?}"),
    };
    assert_eq!(
        on_shared(&mut b),
        "node(s) have their free capacity held by 2 plans (Job default/a, Job default/b) for \
         pods not bound yet"
    );
    // Asking for both hosts, the one `a` alone holds first: both plans are named still.
    let whole = if shared == "b1-r1-h1" {
        "b1-r1-h2"
    } else {
        "b1-r1-h1"
    };
    match b.filter(&lone_pod("api", 2), &[whole, shared], t0) {
        FilterVerdict::Except { rejected } => assert_eq!(
            (rejected.iter())
                .map(|(i, why)| (*i, why.reason.to_string()))
                .collect::<Vec<_>>(),
            [0, 1].map(|i| (
                i,
                "node(s) have their free capacity held by 2 plans (Job default/a, Job \
                 default/b) for pods not bound yet"
                    .to_string()
            ))
        ),
        other => panic!("a lone pod gets Except, got {other:?}"),
    }
    // `a`'s pod there is bound; `a` still holds its other seats (elsewhere), `b` its own here.
    let i = seats.iter().position(|s| s == shared).unwrap();
    b.bind("default", &pod_name("a", i), &uid("a", i), shared, t0)
        .unwrap();
    assert_eq!(b.stats().seats_held, 3, "a's two others and b's");
    assert_eq!(
        on_shared(&mut b),
        "node(s) have their free capacity held by 1 plan (Job default/b) for pods not bound yet"
    );
}

#[test]
fn a_node_held_after_a_lone_pod_asked_turns_the_next_one_away() {
    // Two whole-node gangs; five candidates, so the lone pod's candidates are sifted by the
    // held nodes' names, which must follow the holds.
    let extra = format!("{}{}", job_yaml("a", 1, 4, RACK), job_yaml("b", 1, 4, RACK));
    let mut b = book(2, &extra);
    let t0 = Instant::now();
    let first = seat_of(&mut b, &job_pod("a", 0, 4), t0);
    let turned_away = |b: &mut TestBook, name: &str| -> Vec<String> {
        let answer = lone_answer(b, &lone_pod(name, 1), t0);
        answer.into_iter().map(|(node, _)| node).collect()
    };
    assert_eq!(turned_away(&mut b, "web"), std::slice::from_ref(&first));
    let second = seat_of(&mut b, &job_pod("b", 0, 4), t0);
    assert_ne!(first, second);
    let mut both = vec![first.clone(), second.clone()];
    both.sort();
    assert_eq!(turned_away(&mut b, "api"), both);
    // Its pod bound, `a`'s node holds nothing (kube-scheduler counts the pod there).
    b.bind("default", &pod_name("a", 0), &uid("a", 0), &first, t0)
        .unwrap();
    assert_eq!(turned_away(&mut b, "db"), [second]);
}

#[test]
fn a_node_held_while_lone_pods_asked_about_few_names_turns_the_next_one_away() {
    // Asked about one name (as many nodes held as names asked: each is looked up, the held
    // nodes' names are not read), then about five (fewer held: the names sift them), with a
    // node held in between: the five-name answer must see it.
    let extra = format!("{}{}", job_yaml("a", 1, 4, RACK), job_yaml("b", 1, 4, RACK));
    let mut b = book(2, &extra);
    let t0 = Instant::now();
    let turned_away = |b: &mut TestBook, name: &str, candidates: &[&str]| -> Vec<String> {
        match b.filter(&lone_pod(name, 1), candidates, t0) {
            FilterVerdict::Except { rejected } => (rejected.iter())
                .map(|(i, _)| candidates[*i].to_string())
                .collect(),
            other => panic!("a lone pod gets Except, got {other:?}"),
        }
    };
    let first = seat_of(&mut b, &job_pod("a", 0, 4), t0);
    let names = all_nodes(&b);
    let every: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(every.len(), 5);
    assert_eq!(
        turned_away(&mut b, "web", &every),
        std::slice::from_ref(&first)
    );
    let second = seat_of(&mut b, &job_pod("b", 0, 4), t0);
    assert_ne!(first, second);
    assert_eq!(
        turned_away(&mut b, "api", &[&first]),
        std::slice::from_ref(&first)
    );
    let mut both = vec![first, second];
    both.sort();
    assert_eq!(turned_away(&mut b, "db", &every), both);
}

/// One rack; a filler uses 1 cpu of b1-r1-h1 and `small` (3 x 1 cpu) holds the other 3.
fn small_on_h1() -> TestBook {
    let extra = format!(
        "{}{}",
        filler_pod_yaml("f", 1, "b1-r1-h1"),
        job_yaml("small", 3, 1, RACK)
    );
    let mut b = book(1, &extra);
    assert_eq!(
        seat_of(&mut b, &job_pod("small", 0, 1), Instant::now()),
        "b1-r1-h1"
    );
    b
}

#[test]
fn a_lone_pod_too_big_for_a_held_node_is_not_told_the_room_is_held() {
    let mut b = small_on_h1();
    let t0 = Instant::now();
    // 2 cpu would fit h1's 3 free cpu but for the hold.
    let held = lone_answer(&mut b, &lone_pod("two", 2), t0);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].0, "b1-r1-h1");
    assert!(
        held[0]
            .1
            .contains("held by 1 plan (Job default/small) for pods not bound yet"),
        "{held:?}"
    );
    // 4 cpu would not fit h1 even if nothing were held.
    let full = lone_answer(&mut b, &lone_pod("four", 4), t0);
    assert_eq!(full.len(), 1, "{full:?}");
    assert_eq!(full[0].0, "b1-r1-h1");
    assert!(full[0].1.starts_with("node(s) have no room"), "{full:?}");
    assert_no_holds_blamed(&full[0].1);
}

#[test]
fn a_lone_pods_bind_refusal_says_whether_holds_or_pods_fill_the_node() {
    let mut b = small_on_h1();
    let t0 = Instant::now();
    lone_answer(&mut b, &lone_pod("two", 2), t0);
    lone_answer(&mut b, &lone_pod("four", 4), t0);
    let held = b
        .bind("default", "two", "uid-two", "b1-r1-h1", t0)
        .unwrap_err();
    assert!(
        held.0.contains("no room")
            && held
                .0
                .contains("held by 1 plan (Job default/small) for pods not bound yet"),
        "{held}"
    );
    let full = b
        .bind("default", "four", "uid-four", "b1-r1-h1", t0)
        .unwrap_err();
    assert!(full.0.contains("no room"), "{full}");
    assert_no_holds_blamed(&full.0);
}
