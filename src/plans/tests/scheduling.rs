//! Workload-API groups in the plan book: the first pod of a `PodGroup` tree that reaches
//! `filter` has the whole tree placed by the placement core, every placed pod gets a seat on
//! its node (taken by its uid), bound pods and live seats fix the domain, and a tree that does
//! not fit holds nothing.
//!
//! The clusters here are written out in full: zones of racks of two hosts, 4 cpu each, named
//! `<rack>-n1` and `<rack>-n2` and labelled `zone`, `rack` and `kubernetes.io/hostname`, plus
//! `edge-1` (4 cpu, hostname only: first by name, outside every zone and rack). Pods request
//! cpu only; the core puts each on the first node by name with room, and a tie between
//! domains goes to the first by name, so every test that wants another domain says why (a
//! busy pod that makes it score higher, or bound pods).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::*;
use crate::cluster::bound_pod_of;
use crate::cluster::scheduling_groups::{SchedulingGroup, pending_member, scheduling_group};

const POD_GROUP_V1BETA1: &str = "scheduling.k8s.io/v1beta1";
const COMPOSITE_V1ALPHA3: &str = "scheduling.k8s.io/v1alpha3";

// ---------------------------------------------------------------------------------------------
// Clusters
// ---------------------------------------------------------------------------------------------

/// Nodes for `zones` (zone name, its racks), plus `edge-1`.
fn nodes_yaml(zones: &[(&str, &[&str])]) -> String {
    let node = |name: &str, labels: &str| {
        format!(
            r#"---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/hostname: {name}{labels}
spec: {{}}
status:
  allocatable: {{cpu: '4', memory: 16Gi, pods: '110'}}
  conditions: [{{type: Ready, status: 'True'}}]
"#
        )
    };
    let mut y = node("edge-1", "");
    for (zone, racks) in zones {
        for rack in *racks {
            for h in 1..=2 {
                y.push_str(&node(
                    &format!("{rack}-n{h}"),
                    &format!("\n    zone: {zone}\n    rack: {rack}"),
                ));
            }
        }
    }
    y
}

/// One zone `z1` of racks `r1` and `r2`.
fn two_racks(extra: &str) -> TestBook {
    TestBook::new(
        load(&format!("{}{extra}", nodes_yaml(&[("z1", &["r1", "r2"])]))),
        TTL,
    )
}

/// Zone `z1` (racks `r1`, `r2`) and zone `z2` (racks `r3`, `r4`).
fn two_zones(extra: &str) -> TestBook {
    TestBook::new(
        load(&format!(
            "{}{extra}",
            nodes_yaml(&[("z1", &["r1", "r2"]), ("z2", &["r3", "r4"])])
        )),
        TTL,
    )
}

// ---------------------------------------------------------------------------------------------
// Groups and pods
// ---------------------------------------------------------------------------------------------

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some("default".to_string()),
        ..Default::default()
    }
}

/// A group spec: `policy` (`{"gang": ...}` or `{"basic": {}}`), an optional topology key and
/// parent.
fn spec(policy: Value, key: Option<&str>, parent: Option<&str>) -> Value {
    let mut s = json!({ "schedulingPolicy": policy });
    if let Some(k) = key {
        s["schedulingConstraints"] = json!({"topology": [{"key": k}]});
    }
    if let Some(p) = parent {
        s["parentCompositePodGroupName"] = json!(p);
    }
    s
}

/// A `scheduling.k8s.io/v1beta1` gang PodGroup of `min` pods.
fn gang(name: &str, min: u32, key: Option<&str>, parent: Option<&str>) -> SchedulingGroup {
    let spec = spec(json!({"gang": {"minCount": min}}), key, parent);
    scheduling_group(POD_GROUP_V1BETA1, false, &meta(name), Some(&spec)).unwrap()
}

/// A basic PodGroup.
fn basic(name: &str, key: Option<&str>) -> SchedulingGroup {
    let spec = spec(json!({"basic": {}}), key, None);
    scheduling_group(POD_GROUP_V1BETA1, false, &meta(name), Some(&spec)).unwrap()
}

/// A gang CompositePodGroup of `min` children.
fn composite(name: &str, min: u32, key: Option<&str>) -> SchedulingGroup {
    let spec = spec(json!({"gang": {"minGroupCount": min}}), key, None);
    scheduling_group(COMPOSITE_V1ALPHA3, true, &meta(name), Some(&spec)).unwrap()
}

/// The pod's group key in the state and the book.
fn leaf(name: &str) -> GroupKey {
    GroupKey {
        kind: WorkloadKind::SchedulingGroup,
        namespace: "default".into(),
        name: name.into(),
    }
}

fn pod_uid(name: &str) -> String {
    format!("uid-{name}")
}

/// A pending pod `name` of `cpu` cpu naming PodGroup `group` in `spec.schedulingGroup`.
fn member(group: &str, name: &str, cpu: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": pod_uid(name)},
        "spec": {
            "schedulingGroup": {"podGroupName": group},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu.to_string()}}}],
        },
        "status": {"phase": "Pending"},
    }))
    .unwrap()
}

/// The same pod naming its group by the `kube-tas.io/pod-group` label instead.
fn labelled_member(group: &str, name: &str, cpu: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": pod_uid(name),
            "labels": {"kube-tas.io/pod-group": group}},
        "spec": {
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu.to_string()}}}],
        },
        "status": {"phase": "Pending"},
    }))
    .unwrap()
}

/// The pod as the API server holds it once bound to `node` and Running.
fn bound_member(group: &str, name: &str, cpu: u32, node: &str) -> Pod {
    let mut pod = member(group, name, cpu);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.to_string());
    }
    if let Some(status) = pod.status.as_mut() {
        status.phase = Some("Running".to_string());
    }
    pod
}

/// The pod watch adding a pending pod to the state.
fn watch(b: &mut TestBook, pod: &Pod) {
    let m = pending_member(pod)
        .unwrap()
        .expect("a pending PodGroup pod");
    b.state
        .apply_pending_member(pod.metadata.uid.as_deref().unwrap(), m);
}

/// The pod watch adding a bound pod to the state.
fn watch_bound(b: &mut TestBook, pod: &Pod) {
    let bound = bound_pod_of(pod).unwrap().expect("a bound pod");
    assert_eq!(bound.group, leaf(&bound.group.name), "{bound:?}");
    b.state.apply_bound_pod(&bound);
}

/// PodGroup `group`'s pods `<group>-<i>` for `i` in `0..n`, each `cpu` cpu, all watched.
fn watched_members(b: &mut TestBook, group: &str, n: usize, cpu: u32) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let pod = member(group, &format!("{group}-{i}"), cpu);
            watch(b, &pod);
            pod
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Reading answers
// ---------------------------------------------------------------------------------------------

/// What `book` answers `pod` over every node of `names`: the passing nodes and the reason
/// for the rest.
fn ask_book(
    book: &mut PlanBook,
    state: &ClusterState,
    names: &[String],
    pod: &Pod,
    now: Instant,
) -> (Vec<String>, Rejection) {
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match book.filter(state, pod, &candidates, now) {
        FilterVerdict::Only { pass, rejected, .. } => {
            (pass.iter().map(|&i| names[i].clone()).collect(), rejected)
        }
        other => panic!("a PodGroup pod gets Only, got {other:?}"),
    }
}

/// [`ask_book`] on the test book over every node of the cluster.
fn ask(b: &mut TestBook, pod: &Pod, now: Instant) -> (Vec<String>, Rejection) {
    let names = all_nodes(b);
    ask_book(&mut b.book, &b.state, &names, pod, now)
}

/// The one node a pod is sent to.
fn seat(b: &mut TestBook, pod: &Pod, now: Instant) -> String {
    let (pass, rejected) = ask(b, pod, now);
    assert_eq!(pass.len(), 1, "one seat, got {pass:?} ({rejected:?})");
    pass[0].clone()
}

/// The one node a fresh book (nothing planned, nothing held) sends `pod` to on `b`'s state.
fn fresh_seat(b: &TestBook, pod: &Pod, now: Instant) -> String {
    let names = all_nodes(b);
    let mut fresh = PlanBook::new(FeatureGates::default(), TTL);
    let (pass, rejected) = ask_book(&mut fresh, &b.state, &names, pod, now);
    assert_eq!(pass.len(), 1, "one seat, got {pass:?} ({rejected:?})");
    pass[0].clone()
}

fn label_of(b: &TestBook, node: &str, key: &str) -> String {
    b.state
        .node_by_name(node)
        .unwrap_or_else(|| panic!("no node {node}"))
        .labels
        .get(key)
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{node} has no {key} label"))
}

fn rack(b: &TestBook, node: &str) -> String {
    label_of(b, node, "rack")
}

/// Nodes of the cluster in rack `r`.
fn rack_nodes(b: &TestBook, r: &str) -> Vec<String> {
    all_nodes(b)
        .into_iter()
        .filter(|n| b.state.node_by_name(n).unwrap().labels.get("rack") == Some(r))
        .collect()
}

/// `(cpu, pods)` the book holds on `node`; `None` when it holds nothing there.
fn held(b: &TestBook, node: &str) -> Option<(i64, i64)> {
    b.book
        .held_on(&b.state, node)
        .map(|h| (h.get("cpu").copied().unwrap_or(0), h[PODS_KEY]))
}

/// Every node the book holds anything on.
fn held_anywhere(b: &TestBook) -> Vec<String> {
    all_nodes(b)
        .into_iter()
        .filter(|n| b.book.held_on(&b.state, n).is_some())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn the_fixtures_are_what_the_tests_say() {
    let b = two_zones("");
    assert_eq!(
        all_nodes(&b),
        [
            "edge-1", "r1-n1", "r1-n2", "r2-n1", "r2-n2", "r3-n1", "r3-n2", "r4-n1", "r4-n2"
        ]
    );
    for (r, zone) in [("r1", "z1"), ("r2", "z1"), ("r3", "z2"), ("r4", "z2")] {
        let nodes = rack_nodes(&b, r);
        assert_eq!(nodes, [format!("{r}-n1"), format!("{r}-n2")]);
        for n in &nodes {
            assert_eq!(label_of(&b, n, "zone"), zone);
            assert_eq!(cpu_allocatable(&b, n), 4000);
        }
    }
    let edge = b.state.node_by_name("edge-1").unwrap();
    assert!(!edge.labels.contains_key("rack") && !edge.labels.contains_key("zone"));
    let pod = member("g", "g-0", 2);
    let m = pending_member(&pod).unwrap().unwrap();
    assert_eq!((m.group.clone(), m.pod.requests["cpu"]), (leaf("g"), 2000));
    let by_label = pending_member(&labelled_member("g", "g-1", 2))
        .unwrap()
        .unwrap();
    assert_eq!(by_label.group, leaf("g"));
}

/// Test 1: a gang of 3 in one rack, planned whole at its first pod.
#[test]
fn a_gang_is_planned_whole_in_one_rack_at_its_first_pod() {
    // A busy pod on r2-n2 makes r2 the fuller rack: MostAllocated prefers it, and it still
    // fits the gang (r2-n1 takes 2 pods, r2-n2 has 3 cpu left for 1).
    let mut b = two_racks(&filler_pod_yaml("busy", 1, "r2-n2"));
    assert_eq!(cpu_used(&b, "r2-n2"), 1000);
    b.state
        .apply_scheduling_group(gang("train", 3, Some("rack"), None));
    let mut pods = watched_members(&mut b, "train", 2, 2);
    let third = labelled_member("train", "train-2", 2);
    watch(&mut b, &third);
    pods.push(third);
    let t0 = Instant::now();

    // The first pod plans the whole gang: every seat is held before the others ask.
    assert_eq!(seat(&mut b, &pods[0], t0), "r2-n1");
    assert_eq!(held(&b, "r2-n1"), Some((4000, 2)));
    assert_eq!(held(&b, "r2-n2"), Some((2000, 1)));
    assert_eq!(held_anywhere(&b), ["r2-n1", "r2-n2"]);
    let stats = b.stats();
    assert_eq!(
        (stats.plans_made, stats.plans_active, stats.seats_held),
        (1, 1, 3)
    );

    let nodes: Vec<String> = pods.iter().map(|p| seat(&mut b, p, t0)).collect();
    assert_eq!(nodes, ["r2-n1", "r2-n1", "r2-n2"]);
    let racks: Vec<String> = nodes.iter().map(|n| rack(&b, n)).collect();
    assert_eq!(racks, ["r2", "r2", "r2"]);
    let stats = b.stats();
    assert_eq!((stats.plans_made, stats.seats_held), (1, 3));
    // The seat is also what the prioritize call favours.
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let favoured: Vec<&str> = b
        .favoured(&pods[2], &candidates)
        .into_iter()
        .map(|i| candidates[i])
        .collect();
    assert_eq!(favoured, ["r2-n2"]);

    // Outside the seat nothing passes, and a bind outside it is refused naming the seat.
    let names = ["r1-n1".to_string(), "r1-n2".into(), "r2-n2".into()];
    let (pass, rejected) = ask_book(&mut b.book, &b.state, &names, &pods[0], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(rejected.reason.contains("r2-n1"), "{}", rejected.reason);
    let err = b
        .bind("default", "train-2", &pod_uid("train-2"), "r2-n1", t0)
        .unwrap_err();
    assert!(err.0.contains("has its seat on r2-n2"), "{err}");

    // Binding turns every hold into usage, and the complete plan is dropped.
    for (pod, node) in pods.iter().zip(&nodes) {
        let name = pod.metadata.name.as_deref().unwrap();
        b.bind("default", name, &pod_uid(name), node, t0).unwrap();
    }
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    let stats = b.stats();
    assert_eq!(
        (
            stats.plans_active,
            stats.seats_held,
            stats.pods_bound,
            stats.plans_made
        ),
        (0, 0, 3, 1)
    );
    assert_eq!(cpu_used(&b, "r2-n1"), 4000);
    assert_eq!(cpu_used(&b, "r2-n2"), 3000);
    assert_eq!(b.state.members(&leaf("train")).count(), 3);
    // A bound pod asking again is sent to its node only.
    assert_eq!(seat(&mut b, &pods[2], t0), "r2-n2");
}

/// Test 2: a gang bigger than any rack fits is turned down everywhere and holds nothing.
#[test]
fn a_gang_that_fits_no_rack_holds_nothing() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("big", 5, Some("rack"), None));
    let pods = watched_members(&mut b, "big", 5, 2);
    let t0 = Instant::now();
    let message = "PodGroup default/big (gang, minCount 5): no rack fits 5 pods; best rack r1 \
                   fits 4 (cpu)";

    let (pass, rejected) = ask(&mut b, &pods[0], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert_eq!(
        rejected.reason.as_ref(),
        format!("node(s) cannot take {message}")
    );
    assert!(
        rejected.unresolvable,
        "10 cpu is more than any rack has even empty: preemption cannot help"
    );
    assert_eq!(b.group_failure(&leaf("big")), Some(message));
    let stats = b.stats();
    assert_eq!(
        (
            stats.plans_made,
            stats.plans_active,
            stats.seats_held,
            stats.groups_not_fit
        ),
        (0, 0, 0, 1)
    );
    for pod in &pods[1..] {
        let (pass, rejected) = ask(&mut b, pod, t0);
        assert!(pass.is_empty(), "{pass:?}");
        assert!(rejected.reason.contains(message), "{}", rejected.reason);
    }
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    assert_eq!(b.stats().plans_active, 0);
    // Nothing held: a lone pod of a whole node's cpu may go anywhere.
    assert!(lone_rejected(&mut b, &lone_pod("web", 4), t0).is_empty());

    // The fixture: a rack does take 4 such pods (a gang of 4 would fit; diagnose says so and
    // keeps nothing).
    b.state
        .apply_scheduling_group(gang("four", 4, Some("rack"), None));
    let four = watched_members(&mut b, "four", 4, 2);
    assert_eq!(b.book.diagnose(&b.state, &four[0], t0), None);
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    assert_eq!(b.stats().plans_made, 0);
    // And diagnose gives the big gang's reason, still holding nothing.
    assert_eq!(
        b.book.diagnose(&b.state, &pods[0], t0).as_deref(),
        Some(message)
    );
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
}

/// Test 3: a basic group seats what fits in its best rack; the pod left over is turned down.
#[test]
fn a_basic_group_seats_what_fits_and_turns_the_rest_down() {
    // 3-cpu pods: one per node, so a rack takes 2. The busy pod makes r2 the fuller rack and
    // leaves r2-n2 exactly 3 cpu.
    let mut b = two_racks(&filler_pod_yaml("busy", 1, "r2-n2"));
    b.state
        .apply_scheduling_group(basic("spread", Some("rack")));
    let pods = watched_members(&mut b, "spread", 3, 3);
    let t0 = Instant::now();

    // The pod the core leaves over (last in scheduling order) asks first: the tree is planned,
    // it alone gets no seat.
    let (pass, rejected) = ask(&mut b, &pods[2], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert_eq!(
        rejected.reason.as_ref(),
        "node(s) cannot take pod spread-2: PodGroup default/spread has no room left for it"
    );
    assert_eq!(held(&b, "r2-n1"), Some((3000, 1)));
    assert_eq!(held(&b, "r2-n2"), Some((3000, 1)));
    assert_eq!(held_anywhere(&b), ["r2-n1", "r2-n2"]);
    assert_eq!((b.stats().plans_made, b.stats().seats_held), (1, 2));
    assert_eq!(seat(&mut b, &pods[0], t0), "r2-n1");
    assert_eq!(seat(&mut b, &pods[1], t0), "r2-n2");

    // Asking again, it is planned beside its group's seats: r2 is full (r1 is empty, but the
    // group's rack is r2 now).
    let (pass, rejected) = ask(&mut b, &pods[2], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        rejected
            .reason
            .starts_with("node(s) cannot take PodGroup default/spread (basic): "),
        "{}",
        rejected.reason
    );
    assert!(
        rejected.reason.contains("rack r2 fits 0 pods"),
        "{}",
        rejected.reason
    );
    assert_eq!(held_anywhere(&b), ["r2-n1", "r2-n2"]);
    assert_eq!((b.stats().plans_made, b.stats().seats_held), (1, 2));
}

/// A seat given to a group that already has a plan, after nodes came and went (the hostname
/// tree built again, every member at another position), lands on the node the core chose, and
/// the plan's earlier seats stay on theirs.
#[test]
fn a_seat_added_after_nodes_changed_lands_on_its_own_node() {
    let mut b = two_racks(&filler_pod_yaml("busy", 1, "r2-n2"));
    b.state
        .apply_scheduling_group(basic("spread", Some("rack")));
    let pods = watched_members(&mut b, "spread", 3, 3);
    let t0 = Instant::now();
    let (pass, _) = ask(&mut b, &pods[2], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert_eq!(held_anywhere(&b), ["r2-n1", "r2-n2"]);
    // edge-1 (the first node) goes and r2-n3 joins rack r2: every member moves.
    assert!(b.state.delete_node("edge-1"));
    let mut joined = b.state.node_by_name("r2-n1").unwrap().clone();
    joined.name = "r2-n3".into();
    joined.labels.insert(keys::HOSTNAME_LABEL, "r2-n3");
    b.state.apply_node(joined);
    let names = b.state.node_names();
    let seat_now = |b: &mut TestBook, pod: &Pod| {
        let (pass, rejected) = ask_book(&mut b.book, &b.state, &names, pod, t0);
        assert_eq!(pass.len(), 1, "{pass:?} {rejected:?}");
        pass[0].clone()
    };
    assert_eq!(seat_now(&mut b, &pods[2]), "r2-n3");
    assert_eq!(seat_now(&mut b, &pods[0]), "r2-n1");
    assert_eq!(seat_now(&mut b, &pods[1]), "r2-n2");
    for node in ["r2-n1", "r2-n2", "r2-n3"] {
        assert_eq!(held(&b, node), Some((3000, 1)), "{node}");
    }
    assert_eq!((b.stats().plans_made, b.stats().seats_held), (1, 3));
}

/// A plan moved onto a later hostname tree drops the seat whose node left and gives its hold
/// back; the other seat keeps its pod, its node and its hold, and the pod finds it by uid.
#[test]
fn a_seat_whose_node_left_is_dropped_when_its_plan_moves_onto_a_later_tree() {
    let mut b = two_racks(&filler_pod_yaml("busy", 1, "r2-n2"));
    b.state
        .apply_scheduling_group(basic("spread", Some("rack")));
    let pods = watched_members(&mut b, "spread", 3, 3);
    let _ = ask(&mut b, &pods[2], Instant::now());
    let seats_of = |plan: &Plan| -> Vec<(String, Holder)> {
        (plan.seats.iter())
            .map(|s| {
                let node = &plan.flavor.tree.nodes[s.member].name;
                (node.clone(), s.holder.clone())
            })
            .collect()
    };
    let before = seats_of(b.book.plans.values().next().expect("one plan"));
    assert_eq!(before.len(), 2, "{before:?}");
    // The first seat's node goes, so the kept seat's index moves from 1 to 0.
    let (gone, kept) = (before[0].0.clone(), before[1].clone());
    let gone_id = b.state.node_id(&gone).expect("a known node");
    assert!(b.book.held.at(gone_id).is_some());
    let kept_hold = held(&b, &kept.0);
    assert!(b.state.delete_node(&gone));
    let onto = b.state.hostname_topology();

    let book = &mut b.book;
    let plan = book.plans.values_mut().next().expect("one plan");
    crate::plans::scheduling::move_seats(plan, &onto, &mut book.held);

    let plan = b.book.plans.values().next().expect("one plan");
    assert!(Arc::ptr_eq(&plan.flavor, &onto));
    assert_eq!(seats_of(plan), std::slice::from_ref(&kept));
    let Holder::Taken(uid) = &kept.1 else {
        panic!("a seat taken by its pod: {kept:?}");
    };
    assert_eq!(plan.by_uid.len(), 1);
    assert_eq!(plan.by_uid.get(uid), Some(&0));
    assert_eq!(
        b.book.held.at(gone_id),
        None,
        "the hold on {gone} given back"
    );
    assert_eq!(held(&b, &kept.0), kept_hold);
}

/// A pod whose Binding is being written lost its seat with its node (the plan moved onto a
/// later tree when a sibling was seated): it is placed nowhere else while the bind runs (its
/// node counts as bound for the group), and its commit records it where it was bound, with no
/// seat of the plan taken for it.
#[test]
fn a_pod_being_bound_is_not_seated_again_when_its_seat_went_with_its_node() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(basic("spread", Some("rack")));
    let pods = watched_members(&mut b, "spread", 2, 3);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &pods[0], t0), "r1-n1");
    assert_eq!(seat(&mut b, &pods[1], t0), "r1-n2");
    let uid0 = pod_uid("spread-0");
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "spread-0", &uid0, "r1-n1", t0)
        .unwrap();
    // r1-n1 goes and r1-n3 joins rack r1; a third pod is seated (on the room left on r1-n2),
    // so the plan moves onto the new tree and spread-0's seat is dropped with its node.
    let mut joined = b.state.node_by_name("r1-n1").unwrap().clone();
    joined.name = "r1-n3".into();
    joined.labels.insert(keys::HOSTNAME_LABEL, "r1-n3");
    assert!(b.state.delete_node("r1-n1"));
    b.state.apply_node(joined);
    let names = b.state.node_names();
    let ask_now = |b: &mut TestBook, pod: &Pod| {
        watch(b, pod);
        let (pass, rejected) = ask_book(&mut b.book, &b.state, &names, pod, t0);
        assert_eq!(pass.len(), 1, "{pass:?} {rejected:?}");
        pass[0].clone()
    };
    assert_eq!(ask_now(&mut b, &member("spread", "spread-2", 1)), "r1-n2");
    let by_uid = |b: &TestBook| -> Vec<String> {
        let plan = b.book.plans.values().next().expect("one plan");
        let mut uids: Vec<String> = plan.by_uid.keys().cloned().collect();
        uids.sort();
        uids
    };
    assert_eq!(by_uid(&b), [pod_uid("spread-1"), pod_uid("spread-2")]);

    // A fourth pod asks: the group is placed again, and spread-0 with it (r1-n3 has room for
    // it) unless its bind counts.
    assert_eq!(ask_now(&mut b, &member("spread", "spread-3", 1)), "r1-n3");
    assert_eq!(
        by_uid(&b),
        [
            pod_uid("spread-1"),
            pod_uid("spread-2"),
            pod_uid("spread-3")
        ],
        "spread-0 is being bound: no seat is made for it"
    );

    // spread-0 itself asks again (a scheduler that gave up waiting on its bind): no seat.
    let (pass, rejected) = ask_book(&mut b.book, &b.state, &names, &pods[0], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert_eq!(
        &*rejected.reason,
        "node(s) other than r1-n1, where the pod is being bound"
    );
    assert_eq!(by_uid(&b).len(), 3);

    b.book.commit_bind(&mut b.state, &ticket, t0);
    let usage = b.state.pod(&uid0).expect("recorded on its node");
    assert_eq!(b.state.name_of(usage.node), Some("r1-n1"));
    let plan = b.book.plans.values().next().expect("one plan");
    assert!(
        !plan
            .seats
            .iter()
            .any(|s| s.holder == Holder::Bound(uid0.clone())),
        "{:?}",
        plan.seats
    );
}

/// Test 4: a bound pod of the group fixes its rack, though another rack scores higher.
#[test]
fn bound_pods_fix_the_domain_even_where_another_rack_scores_higher() {
    // r1 holds 3 cpu of busy pods (r1-n2 has room for a 2-cpu pod); r2 holds the group's
    // bound pod (2 cpu on r2-n1).
    let mut b = two_racks(&filler_pod_yaml("busy", 3, "r1-n1"));
    b.state
        .apply_scheduling_group(gang("g", 2, Some("rack"), None));
    watch_bound(&mut b, &bound_member("g", "g-0", 2, "r2-n1"));
    let members: Vec<String> = b
        .state
        .members(&leaf("g"))
        .filter_map(|m| b.state.name_of(m.node).map(str::to_string))
        .collect();
    assert_eq!(members, ["r2-n1"]);
    let pending = member("g", "g-1", 2);
    watch(&mut b, &pending);
    let t0 = Instant::now();

    // The fixture: a group with no bound pod goes to r1 (fuller, with room on r1-n2).
    b.state
        .apply_scheduling_group(gang("probe", 1, Some("rack"), None));
    assert_eq!(fresh_seat(&b, &member("probe", "probe-0", 2), t0), "r1-n2");

    assert_eq!(seat(&mut b, &pending, t0), "r2-n1");
    assert_eq!(held_anywhere(&b), ["r2-n1"]);
    assert_eq!(held(&b, "r2-n1"), Some((2000, 1)));
}

/// Bound pods in two racks: nothing more of the group is placed, and the reason says why.
#[test]
fn bound_pods_in_two_racks_stop_the_group() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("split", 3, Some("rack"), None));
    watch_bound(&mut b, &bound_member("split", "split-0", 1, "r1-n1"));
    watch_bound(&mut b, &bound_member("split", "split-1", 1, "r2-n1"));
    let pending = member("split", "split-2", 1);
    watch(&mut b, &pending);
    let (pass, rejected) = ask(&mut b, &pending, Instant::now());
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        rejected
            .reason
            .contains("its pods already run in 2 different racks (r1, r2); nothing more is placed"),
        "{}",
        rejected.reason
    );
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
}

/// Test 5: a CompositePodGroup planned whole at the pod of its keyless child.
#[test]
fn a_composite_is_planned_whole_from_its_drivers_pod() {
    // A busy pod in z2 makes z2 the fuller zone. In z2 the driver (first child by name) takes
    // r3-n1 (first node by name); the workers (3 cpu each, one per node) then fit r3 and r4
    // alike, and the tie goes to r3.
    let setup = |extra: &str| {
        let mut b = two_zones(extra);
        b.state
            .apply_scheduling_group(composite("job", 2, Some("zone")));
        b.state
            .apply_scheduling_group(gang("workers", 2, Some("rack"), Some("job")));
        b.state
            .apply_scheduling_group(gang("driver", 1, None, Some("job")));
        let workers = watched_members(&mut b, "workers", 2, 3);
        let driver = member("driver", "driver-0", 1);
        watch(&mut b, &driver);
        (b, workers, driver)
    };
    let t0 = Instant::now();

    // The fixture: without the busy pod the zones tie and z1 wins.
    let (b, _, driver) = setup("");
    assert_eq!(fresh_seat(&b, &driver, t0), "r1-n1");

    let (mut b, workers, driver) = setup(&filler_pod_yaml("busy", 1, "r4-n2"));
    assert_eq!(seat(&mut b, &driver, t0), "r3-n1");
    // The whole tree is planned: one plan per PodGroup, every seat held.
    let stats = b.stats();
    assert_eq!(
        (stats.plans_made, stats.plans_active, stats.seats_held),
        (2, 2, 3)
    );
    assert_eq!(held(&b, "r3-n1"), Some((4000, 2)));
    assert_eq!(held(&b, "r3-n2"), Some((3000, 1)));
    assert_eq!(held_anywhere(&b), ["r3-n1", "r3-n2"]);

    let nodes: Vec<String> = workers.iter().map(|p| seat(&mut b, p, t0)).collect();
    assert_eq!(nodes, ["r3-n1", "r3-n2"]);
    for n in &nodes {
        assert_eq!(label_of(&b, n, "zone"), label_of(&b, "r3-n1", "zone"));
        assert_eq!(rack(&b, n), "r3");
    }
    assert_eq!(b.stats().plans_made, 2);

    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let n = &notices[0];
    assert_eq!((n.reason, n.warning), ("TopologyPlanned", false));
    assert_eq!(n.regarding.kind.as_deref(), Some("CompositePodGroup"));
    assert_eq!(n.regarding.name.as_deref(), Some("job"));
    assert_eq!(n.regarding.namespace.as_deref(), Some("default"));
    assert_eq!(n.regarding.api_version.as_deref(), Some(COMPOSITE_V1ALPHA3));
    assert!(
        n.note
            .contains("1 pod(s) of PodGroup default/driver in zone z2"),
        "{}",
        n.note
    );
    assert!(
        n.note
            .contains("2 pod(s) of PodGroup default/workers in zone z2, rack r3"),
        "{}",
        n.note
    );
}

/// Test 6: a pod naming a PodGroup that does not exist waits, holding nothing.
#[test]
fn a_pod_of_a_missing_pod_group_waits() {
    let mut b = two_racks("");
    let pod = member("ghost", "ghost-0", 1);
    watch(&mut b, &pod);
    let t0 = Instant::now();
    let why = "PodGroup default/ghost does not exist: its pods wait for it to be created";
    let (pass, rejected) = ask(&mut b, &pod, t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert_eq!(rejected.reason.as_ref(), format!("node(s) wait: {why}"));
    assert!(!rejected.unresolvable);
    assert_eq!(b.group_failure(&leaf("ghost")), Some(why));
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    assert_eq!(b.stats().plans_made, 0);
    assert!(b.book.take_notices().is_empty());

    // Once it is created, the pod is planned.
    b.state
        .apply_scheduling_group(gang("ghost", 1, Some("rack"), None));
    assert_eq!(seat(&mut b, &pod, t0), "r1-n1");
    assert_eq!(b.group_failure(&leaf("ghost")), None);
}

/// The asking pod need not be watched yet: it is offered after the pods the watch knows.
#[test]
fn the_asking_pod_joins_its_group_before_the_watch_shows_it() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("fresh", 2, Some("rack"), None));
    let watched = member("fresh", "fresh-1", 3);
    watch(&mut b, &watched);
    let asking = member("fresh", "fresh-0", 3);
    let t0 = Instant::now();
    // fresh-1 (watched) takes r1-n1, fresh-0 (asking) r1-n2.
    assert_eq!(seat(&mut b, &asking, t0), "r1-n2");
    assert_eq!(seat(&mut b, &watched, t0), "r1-n1");
    // The watch catching up changes nothing.
    watch(&mut b, &asking);
    assert_eq!(seat(&mut b, &asking, t0), "r1-n2");
    let stats = b.stats();
    assert_eq!((stats.plans_made, stats.seats_held), (1, 2));
}

/// r1 has room for one 2-cpu pod (r1-n2) and is fuller than r2 once two of the gang run there.
fn restart_fillers() -> String {
    filler_pod_yaml("busy-1", 3, "r1-n1") + &filler_pod_yaml("busy-2", 2, "r1-n2")
}

/// Test 7: after pods 0 and 1 of a gang are bound, a fresh book seats pod 2 beside them.
#[test]
fn after_a_restart_the_rest_of_a_gang_joins_its_bound_pods() {
    let yaml = r#"---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: train
  namespace: default
spec:
  schedulingPolicy:
    gang:
      minCount: 3
  schedulingConstraints:
    topology:
    - key: rack
"#
    .to_string()
        + &restart_fillers();
    let mut b = two_racks(&yaml);
    let pods = watched_members(&mut b, "train", 3, 2);
    let t0 = Instant::now();
    // Only r2 fits the gang.
    let nodes: Vec<String> = pods.iter().map(|p| seat(&mut b, p, t0)).collect();
    assert_eq!(nodes, ["r2-n1", "r2-n1", "r2-n2"]);
    for (i, node) in nodes.iter().enumerate().take(2) {
        let name = format!("train-{i}");
        b.bind("default", &name, &pod_uid(&name), node, t0).unwrap();
    }
    assert_eq!(b.state.members(&leaf("train")).count(), 2);

    // The fixture: a lone pod of the same size scores r1 higher (7 of 8 cpu against 6).
    b.state
        .apply_scheduling_group(gang("probe", 1, Some("rack"), None));
    assert_eq!(fresh_seat(&b, &member("probe", "probe-0", 2), t0), "r1-n2");

    // The restart: a new book, the same cluster.
    b.book = PlanBook::new(FeatureGates::default(), TTL);
    assert_eq!(seat(&mut b, &pods[2], t0), "r2-n2");
    assert_eq!(held_anywhere(&b), ["r2-n2"]);
    assert_eq!(b.stats().plans_made, 1);
    b.bind("default", "train-2", &pod_uid("train-2"), "r2-n2", t0)
        .unwrap();
    assert_eq!(b.stats().plans_active, 0);
}

/// Test 7, as the watch shows the cluster after a restart: the PodGroup, two pods bound in
/// r2 and the third pending, all from manifests.
#[test]
fn after_a_restart_the_watch_shows_the_bound_pods_and_the_rest_joins_them() {
    let pod_yaml = |name: &str, node: Option<&str>| {
        let (node_line, phase) = match node {
            Some(n) => (format!("\n  nodeName: {n}"), "Running"),
            None => (String::new(), "Pending"),
        };
        format!(
            r#"---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  uid: uid-{name}
spec:{node_line}
  schedulingGroup:
    podGroupName: train
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: '2'
status:
  phase: {phase}
"#
        )
    };
    let yaml = format!(
        r#"---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: train
  namespace: default
spec:
  schedulingPolicy:
    gang:
      minCount: 3
  schedulingConstraints:
    topology:
    - key: rack
{}{}{}{}"#,
        pod_yaml("train-0", Some("r2-n1")),
        pod_yaml("train-1", Some("r2-n1")),
        pod_yaml("train-2", None),
        restart_fillers(),
    );
    let mut b = two_racks(&yaml);
    assert_eq!(b.state.members(&leaf("train")).count(), 2);
    assert_eq!(
        b.state
            .pending_members(&leaf("train"))
            .iter()
            .map(|(u, _)| *u)
            .collect::<Vec<_>>(),
        ["uid-train-2"]
    );
    assert_eq!(cpu_used(&b, "r2-n1"), 4000);
    let t0 = Instant::now();
    b.state
        .apply_scheduling_group(gang("probe", 1, Some("rack"), None));
    assert_eq!(fresh_seat(&b, &member("probe", "probe-0", 2), t0), "r1-n2");

    assert_eq!(seat(&mut b, &member("train", "train-2", 2), t0), "r2-n2");
    assert_eq!(held_anywhere(&b), ["r2-n2"]);
}

/// Test 8: Events name the PodGroup, once per plan and once per new reason.
#[test]
fn notices_name_the_pod_group_once_per_plan_and_per_reason() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("fits", 2, Some("rack"), None));
    b.state
        .apply_scheduling_group(gang("huge", 5, Some("rack"), None));
    let fits = watched_members(&mut b, "fits", 2, 2);
    let huge = watched_members(&mut b, "huge", 5, 2);
    let t0 = Instant::now();

    assert_eq!(seat(&mut b, &fits[0], t0), "r1-n1");
    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let n = &notices[0];
    assert_eq!((n.reason, n.warning), ("TopologyPlanned", false));
    assert_eq!(n.regarding.kind.as_deref(), Some("PodGroup"));
    assert_eq!(n.regarding.name.as_deref(), Some("fits"));
    assert_eq!(n.regarding.namespace.as_deref(), Some("default"));
    assert_eq!(n.regarding.api_version.as_deref(), Some(POD_GROUP_V1BETA1));
    assert_eq!(
        n.note,
        "planned 2 pod(s) of PodGroup default/fits in rack r1"
    );
    // Another seat of the same plan: nothing new to say.
    assert_eq!(seat(&mut b, &fits[1], t0), "r1-n1");
    assert!(b.book.take_notices().is_empty());

    // fits holds r1-n1: r1 takes 2 more, r2 takes 4; the gang of 5 fits neither.
    let message = "PodGroup default/huge (gang, minCount 5): no rack fits 5 pods; best rack r2 \
                   fits 4 (cpu)";
    for pod in [&huge[0], &huge[0], &huge[1]] {
        let (pass, rejected) = ask(&mut b, pod, t0);
        assert!(pass.is_empty(), "{pass:?}");
        assert!(rejected.reason.contains(message), "{}", rejected.reason);
    }
    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let n = &notices[0];
    assert_eq!((n.reason, n.warning), ("TopologyDoesNotFit", true));
    assert_eq!(n.regarding.kind.as_deref(), Some("PodGroup"));
    assert_eq!(n.regarding.name.as_deref(), Some("huge"));
    assert_eq!(n.note, message);

    // A new reason (a busy pod in r2) is said once more.
    let busy = serde_json::from_value::<Pod>(json!({
        "metadata": {"name": "busy", "namespace": "default", "uid": "uid-busy"},
        "spec": {"nodeName": "r2-n1", "containers": [{"name": "c",
            "resources": {"requests": {"cpu": "2"}}}]},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    b.state
        .apply_bound_pod(&bound_pod_of(&busy).unwrap().unwrap());
    for _ in 0..2 {
        let (pass, _) = ask(&mut b, &huge[0], t0);
        assert!(pass.is_empty(), "{pass:?}");
    }
    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].reason, "TopologyDoesNotFit");
    assert!(
        notices[0].note.ends_with("best rack r2 fits 3 (cpu)"),
        "{}",
        notices[0].note
    );
    assert_eq!(
        b.group_failure(&leaf("huge")),
        Some(notices[0].note.as_str())
    );
}

/// A kube-tas.io copy of a PodGroup is named at its own apiVersion in Events.
#[test]
fn notices_name_a_kube_tas_pod_group_at_its_api_version() {
    let mut b = two_racks("");
    let spec = spec(json!({"gang": {"minCount": 1}}), Some("rack"), None);
    let own = scheduling_group("kube-tas.io/v1alpha1", false, &meta("own"), Some(&spec)).unwrap();
    b.state.apply_scheduling_group(own);
    let pod = member("own", "own-0", 1);
    assert_eq!(seat(&mut b, &pod, Instant::now()), "r1-n1");
    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(
        notices[0].regarding.api_version.as_deref(),
        Some("kube-tas.io/v1alpha1")
    );
    assert_eq!(notices[0].regarding.kind.as_deref(), Some("PodGroup"));
}

/// A Binding the API server refused frees the seat for the same pod to be filtered and bound
/// anew (`abort_bind`): it must get its seat back, not be planned beside it.
#[test]
fn a_refused_binding_gives_the_pod_its_seat_back() {
    // 4-cpu pods, one per node; the busy pod on r2-n1 leaves only r1 for the gang of 2.
    let mut b = two_racks(&filler_pod_yaml("busy", 1, "r2-n1"));
    b.state
        .apply_scheduling_group(gang("pair", 2, Some("rack"), None));
    let pods = watched_members(&mut b, "pair", 2, 4);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &pods[0], t0), "r1-n1");
    assert_eq!(seat(&mut b, &pods[1], t0), "r1-n2");
    let ticket = b
        .book
        .begin_bind(
            &b.state,
            "default",
            "pair-0",
            &pod_uid("pair-0"),
            "r1-n1",
            t0,
        )
        .unwrap();
    b.book.abort_bind(&ticket, "etcd timed out");
    assert_eq!(b.stats().binds_failed, 1);
    // The seat is still held for the group.
    assert_eq!(held(&b, "r1-n1"), Some((4000, 1)));

    let (pass, rejected) = ask(&mut b, &pods[0], t0);
    assert_eq!(pass, ["r1-n1"], "{}", rejected.reason);
    assert_eq!(b.stats().seats_held, 2);
    b.bind("default", "pair-0", &pod_uid("pair-0"), "r1-n1", t0)
        .unwrap();
    b.bind("default", "pair-1", &pod_uid("pair-1"), "r1-n2", t0)
        .unwrap();
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    assert_eq!(b.stats().plans_active, 0);
}

/// A pod recreated under the same name asks before the watch has dropped its predecessor:
/// every seat of the plan must be taken by a different pod (a seat no pod can bind to would
/// hold its room until the plan expires).
#[test]
fn a_pod_recreated_under_its_old_name_takes_one_seat() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("solo", 1, Some("rack"), None));
    let mut old = member("solo", "solo-0", 1);
    old.metadata.uid = Some("uid-solo-0-old".into());
    watch(&mut b, &old);
    let new = member("solo", "solo-0", 1);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &new, t0), "r1-n1");
    let plan = &b.book.plans[&main_key(&leaf("solo"))];
    let takers: Vec<String> = plan
        .seats
        .iter()
        .map(|s| match &s.holder {
            Holder::Taken(uid) => uid.clone(),
            other => panic!("a seat not taken: {other:?}"),
        })
        .collect();
    let mut distinct = takers.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        takers.len(),
        "seats taken twice: {takers:?}"
    );
    assert_eq!(b.stats().seats_held as usize, takers.len());
}

/// A CompositePodGroup that does not fit is said once on it with the same words, whichever
/// of its PodGroups' pods ask, and holds nothing.
#[test]
fn a_composite_that_does_not_fit_is_said_once() {
    // Workers need 3 nodes of one rack (3 cpu each); every rack has 2. The driver and the
    // parameter server fit, but the composite needs all 3 children. In z1 (the best zone) the
    // driver and ps take 2 cpu of r1-n1, so r1 takes only 1 worker and r2 is the best rack.
    let mut b = two_zones("");
    b.state
        .apply_scheduling_group(composite("job", 3, Some("zone")));
    b.state
        .apply_scheduling_group(gang("workers", 3, Some("rack"), Some("job")));
    b.state
        .apply_scheduling_group(gang("driver", 1, None, Some("job")));
    b.state
        .apply_scheduling_group(gang("ps", 1, None, Some("job")));
    watched_members(&mut b, "workers", 3, 3);
    let driver = member("driver", "driver-0", 1);
    watch(&mut b, &driver);
    let ps = member("ps", "ps-0", 1);
    watch(&mut b, &ps);
    let t0 = Instant::now();
    let message = "CompositePodGroup default/job (gang, minGroupCount 3): no zone holds 3 \
                   feasible children; best zone z1 holds 2; first failing child: PodGroup \
                   default/workers (gang, minCount 3): no rack fits 3 pods; best rack r2 fits \
                   2 (cpu)";
    for pod in [&driver, &driver, &ps] {
        let (pass, rejected) = ask(&mut b, pod, t0);
        assert!(pass.is_empty(), "{pass:?}");
        assert!(rejected.reason.ends_with(message), "{}", rejected.reason);
    }
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    assert_eq!(b.stats().plans_made, 0);
    let notices = b.book.take_notices();
    assert!(
        notices.iter().all(|n| n.reason == "TopologyDoesNotFit"
            && n.regarding.kind.as_deref() == Some("CompositePodGroup")
            && n.regarding.name.as_deref() == Some("job")
            && n.note == message),
        "{notices:#?}"
    );
    assert_eq!(notices.len(), 1, "the same Event twice: {notices:#?}");
}

/// A PodGroup whose parent CompositePodGroup is not there yet is turned down with the core's
/// words and holds nothing; once the parent exists the tree is planned.
#[test]
fn a_pod_group_under_a_missing_parent_is_planned_once_the_parent_exists() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("child", 1, Some("rack"), Some("parent")));
    let pod = member("child", "child-0", 1);
    watch(&mut b, &pod);
    let t0 = Instant::now();
    let (pass, rejected) = ask(&mut b, &pod, t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        rejected
            .reason
            .contains("child names parent CompositePodGroup parent, which does not exist"),
        "{}",
        rejected.reason
    );
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    b.state
        .apply_scheduling_group(composite("parent", 1, Some("zone")));
    assert_eq!(seat(&mut b, &pod, t0), "r1-n1");
    assert_eq!(b.stats().plans_made, 1);
}

/// A seat's node deleted before its pod is bound: the plan is dropped (its holds given back)
/// and the group planned anew where it fits.
#[test]
fn a_lost_seat_node_has_the_group_planned_anew() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("pair", 2, Some("rack"), None));
    let pods = watched_members(&mut b, "pair", 2, 3);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &pods[0], t0), "r1-n1");
    assert_eq!(held_anywhere(&b), ["r1-n1", "r1-n2"]);
    let _ = b.book.take_notices();
    assert!(b.state.delete_node("r1-n2"));

    // r1 has one node left: the pair goes to r2, and the lost plan holds nothing.
    let names: Vec<String> = all_nodes(&b).into_iter().filter(|n| n != "r1-n2").collect();
    let (pass, rejected) = ask_book(&mut b.book, &b.state, &names, &pods[0], t0);
    assert_eq!(pass, ["r2-n1"], "{}", rejected.reason);
    let (pass, _) = ask_book(&mut b.book, &b.state, &names, &pods[1], t0);
    assert_eq!(pass, ["r2-n2"]);
    assert_eq!(held_anywhere(&b), ["r2-n1", "r2-n2"]);
    let stats = b.stats();
    assert_eq!(
        (stats.plans_made, stats.plans_active, stats.seats_held),
        (2, 1, 2)
    );
    let reasons: Vec<&str> = b.book.take_notices().iter().map(|n| n.reason).collect();
    assert_eq!(reasons, ["TopologySeatLost", "TopologyPlanned"]);
}

/// A plan whose pods stop coming expires, gives its holds back and says so on the PodGroup;
/// the pod that comes late is planned anew.
#[test]
fn a_pod_group_plan_whose_pods_never_come_expires() {
    let mut b = two_racks("");
    b.state
        .apply_scheduling_group(gang("late", 2, Some("rack"), None));
    let pods = watched_members(&mut b, "late", 2, 2);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &pods[0], t0), "r1-n1");
    assert_eq!(held(&b, "r1-n1"), Some((4000, 2)));
    let _ = b.book.take_notices();

    let later = t0 + TTL + Duration::from_secs(1);
    assert!(lone_rejected(&mut b, &lone_pod("web", 1), later).is_empty());
    assert_eq!(held_anywhere(&b), Vec::<String>::new());
    let stats = b.stats();
    assert_eq!(
        (stats.plans_expired, stats.plans_active, stats.seats_held),
        (1, 0, 0)
    );
    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].reason, "TopologyPlanExpired");
    assert_eq!(notices[0].regarding.kind.as_deref(), Some("PodGroup"));
    assert_eq!(notices[0].regarding.name.as_deref(), Some("late"));

    assert_eq!(seat(&mut b, &pods[1], later), "r1-n1");
    assert_eq!(b.stats().plans_made, 2);
}

/// A gang is not tried before `minCount` of its pods exist (kube-scheduler's gang gate): the
/// pod waits, resolvably, nothing is held and no Event is raised; once the pods exist, it is
/// planned.
#[test]
fn a_gang_waits_for_its_pods_to_exist() {
    let mut b = two_racks("");
    b.state.track_pending_group_pods();
    b.state
        .apply_scheduling_group(gang("trio", 3, Some("rack"), None));
    let pods: Vec<Pod> = (0..3)
        .map(|i| member("trio", &format!("trio-{i}"), 1))
        .collect();
    watch(&mut b, &pods[0]);
    let t0 = Instant::now();
    let (pass, rejected) = ask(&mut b, &pods[1], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert_eq!(
        rejected.reason.as_ref(),
        "node(s) wait: PodGroup default/trio (gang, minCount 3): waiting for minCount pods \
         from a gang to appear in scheduling queue: 2 of 3 exist"
    );
    assert!(!rejected.unresolvable);
    assert!(held_anywhere(&b).is_empty());
    assert!(b.book.take_notices().is_empty());
    assert_eq!(b.stats().groups_not_fit, 0);
    watch(&mut b, &pods[1]);
    watch(&mut b, &pods[2]);
    assert_eq!(seat(&mut b, &pods[1], t0), "r1-n1");
    assert_eq!(b.stats().plans_made, 1);
}

/// A pod that tolerates everything may go to a cordoned or NotReady node (kube-scheduler lets
/// it): every node the core may choose has a seat, so the gang is seated whole.
#[test]
fn a_node_only_tolerating_pods_may_use_still_gets_their_seat() {
    let mut b = two_racks("");
    // r1-n1 cordoned: the core skips it for pods that do not tolerate the cordon.
    let mut cordoned = b.state.node_by_name("r1-n1").unwrap().clone();
    cordoned.unschedulable = true;
    cordoned.taints.push(k8s_openapi::api::core::v1::Taint {
        key: crate::keys::UNSCHEDULABLE_TAINT.to_string(),
        effect: "NoSchedule".to_string(),
        ..Default::default()
    });
    b.state.apply_node(cordoned);
    b.state
        .apply_scheduling_group(gang("tolerant", 2, Some("rack"), None));
    let tolerate_all = |name: &str| -> Pod {
        let mut p = member("tolerant", name, 2);
        p.spec.as_mut().unwrap().tolerations = Some(vec![k8s_openapi::api::core::v1::Toleration {
            operator: Some("Exists".to_string()),
            ..Default::default()
        }]);
        p
    };
    let pods = [tolerate_all("tolerant-0"), tolerate_all("tolerant-1")];
    for p in &pods {
        watch(&mut b, p);
    }
    let t0 = Instant::now();
    let seats: Vec<String> = pods.iter().map(|p| seat(&mut b, p, t0)).collect();
    assert_eq!(
        seats,
        ["r1-n1", "r1-n1"],
        "the cordoned node, first by name, takes both"
    );
    assert_eq!(b.stats().seats_held, 2);
    // A pod that does not tolerate it is kept off it.
    b.state
        .apply_scheduling_group(gang("plain", 1, Some("rack"), None));
    let plain = watched_members(&mut b, "plain", 1, 1);
    assert_ne!(seat(&mut b, &plain[0], t0), "r1-n1");
}

/// A seat's pod the pending watch does not show is taken for gone only once it has not been
/// filtered for a moment: a pod just created may ask before the watch shows it, and its seat
/// must stay its own meanwhile.
#[test]
fn a_seat_whose_pod_was_just_filtered_is_not_taken_for_vanished() {
    let mut b = two_racks("");
    b.state.track_pending_group_pods();
    b.state
        .apply_scheduling_group(gang("pair", 2, Some("rack"), None));
    let pods = watched_members(&mut b, "pair", 2, 4);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &pods[0], t0), "r1-n1");
    assert_eq!(seat(&mut b, &pods[1], t0), "r1-n2");
    // pair-1 leaves the pending watch (as a pod not shown yet is missing from it).
    assert!(b.state.remove_pending_member(&pod_uid("pair-1")));
    let newcomer = member("pair", "pair-2", 4);
    watch(&mut b, &newcomer);
    let soon = t0 + Duration::from_millis(500);
    let (pass, _) = ask(&mut b, &newcomer, soon);
    assert!(!pass.contains(&"r1-n2".to_string()), "{pass:?}");
    assert_eq!(
        seat(&mut b, &pods[1], soon),
        "r1-n2",
        "pair-1 keeps its seat"
    );
    // Not filtered since: gone, and its seat is the newcomer's.
    let later = soon + Duration::from_secs(2);
    let newcomer_b = member("pair", "pair-3", 4);
    watch(&mut b, &newcomer_b);
    assert_eq!(seat(&mut b, &newcomer_b, later), "r1-n2");
}

/// In live mode a seat whose pod is gone (deleted before it bound) is opened again, and the
/// pod that replaces it takes that seat instead of a new one.
#[test]
fn a_seat_whose_pod_vanished_goes_to_its_replacement() {
    let mut b = two_racks("");
    b.state.track_pending_group_pods();
    b.state
        .apply_scheduling_group(gang("pair", 2, Some("rack"), None));
    let pods = watched_members(&mut b, "pair", 2, 4);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &pods[0], t0), "r1-n1");
    assert_eq!(b.stats().seats_held, 2);
    // pair-1 is deleted before it asks; its controller makes pair-1b.
    assert!(b.state.remove_pending_member(&pod_uid("pair-1")));
    let replacement = member("pair", "pair-1b", 4);
    watch(&mut b, &replacement);
    assert_eq!(seat(&mut b, &replacement, t0), "r1-n2");
    assert_eq!(
        b.stats().seats_held,
        2,
        "the same two seats, nothing more held"
    );
    assert_eq!(b.stats().plans_made, 1);
    assert_eq!(b.stats().seats_reopened, 1);
    // From files nothing is known to be gone: the seat stays pair-1's, the newcomer finds no
    // room beside the group, and pair-1 still gets its seat.
    let mut files = two_racks("");
    files
        .state
        .apply_scheduling_group(gang("pair", 2, Some("rack"), None));
    let pods = watched_members(&mut files, "pair", 2, 4);
    assert_eq!(seat(&mut files, &pods[0], t0), "r1-n1");
    assert!(files.state.remove_pending_member(&pod_uid("pair-1")));
    let newcomer = member("pair", "pair-1b", 4);
    watch(&mut files, &newcomer);
    let (pass, rejected) = ask(&mut files, &newcomer, t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        rejected.reason.contains("rack r1 fits 0"),
        "{}",
        rejected.reason
    );
    assert_eq!(seat(&mut files, &pods[1], t0), "r1-n2");
    assert_eq!(files.stats().seats_held, 2);
}

/// A gang kept out only by other pods may be helped by preemption (resolvable); one that
/// would not fit on the empty cluster may not.
#[test]
fn only_a_gang_that_fits_an_empty_cluster_is_left_to_preemption() {
    // Busy pods of 3 cpu on r1-n1 and r2-n1: each rack keeps 5 cpu, the gang needs 6 in one.
    let fillers = format!(
        "{}{}",
        filler_pod_yaml("busy-1", 3, "r1-n1"),
        filler_pod_yaml("busy-2", 3, "r2-n1")
    );
    let mut b = two_racks(&fillers);
    b.state
        .apply_scheduling_group(gang("six", 3, Some("rack"), None));
    let pods = watched_members(&mut b, "six", 3, 2);
    let t0 = Instant::now();
    let (pass, rejected) = ask(&mut b, &pods[0], t0);
    assert!(pass.is_empty(), "{pass:?}");
    assert!(
        rejected.reason.contains("no rack fits 3 pods"),
        "{}",
        rejected.reason
    );
    assert!(!rejected.unresolvable, "{}", rejected.reason);
    // The same gang on the cluster without the busy pods fits: the fixture is what it says.
    let mut empty = two_racks("");
    empty
        .state
        .apply_scheduling_group(gang("six", 3, Some("rack"), None));
    let pods = watched_members(&mut empty, "six", 3, 2);
    assert_eq!(seat(&mut empty, &pods[0], t0), "r1-n1");
}

/// A composite `job` (PodGroups `a` and `b`, one rack) with r2 full, live (pending pods
/// watched): a-0, of 2 cpu, planned on r1-n1, its Binding refused, so its seat is open there.
fn open_seat_of_two_cpu_in_r1() -> (TestBook, Instant) {
    // r2 is full: the tree (one rack) can only be in r1.
    let fillers = format!(
        "{}{}",
        filler_pod_yaml("busy-1", 4, "r2-n1"),
        filler_pod_yaml("busy-2", 4, "r2-n2")
    );
    let mut b = two_racks(&fillers);
    b.state.track_pending_group_pods();
    b.state
        .apply_scheduling_group(composite("job", 1, Some("rack")));
    b.state
        .apply_scheduling_group(gang("a", 1, None, Some("job")));
    b.state
        .apply_scheduling_group(gang("b", 1, None, Some("job")));
    let a0 = member("a", "a-0", 2);
    watch(&mut b, &a0);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &a0, t0), "r1-n1");
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "a-0", &pod_uid("a-0"), "r1-n1", t0)
        .unwrap();
    b.book.abort_bind(&ticket, "etcd timed out");
    (b, t0)
}

/// An open seat is taken only by a pod its hold covers (no bigger than the pods it was planned
/// for): room beyond the hold is not the seat's to give. A bigger pod, made in place of one
/// gone, is planned with the tree and its room held in full; taking the seat, it held only the
/// seat's 2 cpu of its 4, and the other 2 were anyone's until its bind. The plan, grown to
/// 4 cpu, gives the open seat back rather than hold it at a size its node may not have. (A
/// pod the seat covers takes it: `an_open_seat_counts_its_pod_once_when_a_sibling_is_placed`.)
#[test]
fn an_open_seat_is_taken_only_by_a_pod_its_hold_covers() {
    let (mut b, t0) = open_seat_of_two_cpu_in_r1();
    assert_eq!(held(&b, "r1-n1"), Some((2000, 1)), "the open seat holds");
    // a-0 is gone; a-1, of 4 cpu, is made instead: r1-n1 would have room for it once the
    // seat's 2 cpu are given back, but the seat holds only 2.
    assert!(b.state.remove_pending_member(&pod_uid("a-0")));
    let a1 = member("a", "a-1", 4);
    watch(&mut b, &a1);
    let generation = b.book.generation;
    let node = seat(&mut b, &a1, t0);
    assert_eq!(node, "r1-n2", "a-1 is planned beside the open seat");
    assert_eq!(held(&b, &node), Some((4000, 1)), "its room held in full");
    // The plan now holds its seats at 4 cpu: the open seat, which r1-n1 might have no room
    // for at that size, is given back; b-0 is placed there. Room given back makes every
    // "does not fit" remembered stale (their stamps hold the book's generation).
    assert_eq!(held(&b, "r1-n1"), None, "the open seat is given back");
    assert!(b.book.generation > generation);
    let b0 = member("b", "b-0", 2);
    watch(&mut b, &b0);
    assert_eq!(seat(&mut b, &b0, t0), "r1-n1");
    assert_eq!(held(&b, "r1-n1"), Some((2000, 1)));
    // A pod of group a that fits the plan's size now finds no room left in r1.
    let a2 = member("a", "a-2", 4);
    watch(&mut b, &a2);
    let (pass, rejected) = ask(&mut b, &a2, t0);
    assert!(pass.is_empty(), "a-2 took room held for others: {pass:?}");
    assert!(
        rejected.reason.contains("node(s) cannot take"),
        "{}",
        rejected.reason
    );
}

/// When a sibling PodGroup's pod plans the tree, a pending pod the open seat does not cover
/// (bigger than the pods it was planned for) is placed with the tree, its room held, rather
/// than counted in the seat it could not take.
#[test]
fn a_pending_pod_an_open_seat_does_not_cover_is_placed_with_the_tree() {
    let (mut b, t0) = open_seat_of_two_cpu_in_r1();
    // a-0 is gone; a-1, of 4 cpu, is made instead and waits. b-0 asks first.
    assert!(b.state.remove_pending_member(&pod_uid("a-0")));
    let a1 = member("a", "a-1", 4);
    watch(&mut b, &a1);
    let b0 = member("b", "b-0", 2);
    watch(&mut b, &b0);
    assert_eq!(seat(&mut b, &b0, t0), "r1-n1", "beside the open seat");
    assert_eq!(
        held(&b, "r1-n2"),
        Some((4000, 1)),
        "a-1 is placed with the tree, its room held"
    );
    // Its plan, at 4 cpu now, gave back the open seat; b-0's seat holds on r1-n1.
    assert_eq!(held(&b, "r1-n1"), Some((2000, 1)));
    assert_eq!(seat(&mut b, &a1, t0), "r1-n2");
}

/// A seat whose Binding was refused stays open and held for its pod, which takes it back when
/// it asks. Meanwhile a sibling PodGroup's pod placed with the tree finds that pod counted
/// once, in its open seat: not also placed again beside it, on the room the sibling needs.
#[test]
fn an_open_seat_counts_its_pod_once_when_a_sibling_is_placed() {
    // r2 is full: the tree (one rack) can only be in r1, a node per 4-cpu pod.
    let fillers = format!(
        "{}{}",
        filler_pod_yaml("busy-1", 4, "r2-n1"),
        filler_pod_yaml("busy-2", 4, "r2-n2")
    );
    let mut b = two_racks(&fillers);
    b.state
        .apply_scheduling_group(composite("job", 1, Some("rack")));
    b.state
        .apply_scheduling_group(gang("a", 1, None, Some("job")));
    b.state
        .apply_scheduling_group(gang("b", 1, None, Some("job")));
    let a0 = member("a", "a-0", 4);
    watch(&mut b, &a0);
    let t0 = Instant::now();
    assert_eq!(seat(&mut b, &a0, t0), "r1-n1");
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "a-0", &pod_uid("a-0"), "r1-n1", t0)
        .unwrap();
    b.book.abort_bind(&ticket, "etcd timed out");
    assert_eq!(
        held(&b, "r1-n1"),
        Some((4000, 1)),
        "the open seat still holds"
    );
    let b0 = member("b", "b-0", 4);
    watch(&mut b, &b0);
    assert_eq!(seat(&mut b, &b0, t0), "r1-n2");
    assert_eq!(seat(&mut b, &a0, t0), "r1-n1");
}
