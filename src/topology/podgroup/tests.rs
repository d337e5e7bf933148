//! One test per rule of the module docs, with the scheduler's arithmetic written out.

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::*;
use crate::topology::fixtures::NodeBuilder;

const RACK: &str = "rack";
const ZONE: &str = "zone";
const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;

/// A Ready node of `cpu` cores in `rack` (110 pod slots, no memory).
fn node(name: &str, rack: &str, cpu: i64) -> NodeInfo {
    NodeBuilder::new(name).label(RACK, rack).cpu(cpu).build()
}

/// A pod requesting `milli` CPU and nothing else (so 200Mi memory in scoring).
fn pod(name: &str, milli: i64) -> PendingPod {
    let requests = ResourceList::from([(CPU.to_string(), milli)]);
    PendingPod {
        name: name.into(),
        non_zero: non_zero_requests([&requests]),
        requests,
        ..Default::default()
    }
}

fn pods_of(n: usize, milli: i64) -> Vec<PendingPod> {
    (0..n).map(|i| pod(&format!("p-{i}"), milli)).collect()
}

fn gang(min_count: u32) -> PodGroupPolicy {
    PodGroupPolicy::Gang { min_count }
}

fn pg(name: &str, policy: PodGroupPolicy, key: Option<&str>, pending: Vec<PendingPod>) -> Group {
    Group {
        namespace: "ml".into(),
        name: name.into(),
        parent: None,
        created: 0,
        key: key.map(str::to_string),
        kind: GroupKind::PodGroup {
            policy,
            pending,
            bound: Vec::new(),
        },
    }
}

fn cpg(name: &str, policy: CompositePolicy, key: Option<&str>) -> Group {
    Group {
        namespace: "ml".into(),
        name: name.into(),
        parent: None,
        created: 0,
        key: key.map(str::to_string),
        kind: GroupKind::Composite { policy },
    }
}

fn child(mut g: Group, parent: &str) -> Group {
    g.parent = Some(parent.into());
    g
}

fn with_bound(mut g: Group, nodes: &[&str]) -> Group {
    if let GroupKind::PodGroup { bound, .. } = &mut g.kind {
        *bound = nodes.iter().map(|n| n.to_string()).collect();
    }
    g
}

/// Usage of `pods` pods requesting `milli` CPU each on `node`.
fn holding(usage: &mut Usage, node: &str, pods: usize, milli: i64) {
    let p = pod("x", milli);
    for _ in 0..pods {
        usage
            .entry(node.into())
            .or_default()
            .add_pod(&p.requests, &p.non_zero);
    }
}

/// The nodes shared, as the cluster state gives them.
fn shared(nodes: &[NodeInfo]) -> Vec<Arc<NodeInfo>> {
    nodes.iter().cloned().map(Arc::new).collect()
}

fn run(nodes: &[NodeInfo], usage: &Usage, groups: &[Group], root: &str) -> Decision {
    place(&shared(nodes), usage, groups, root).unwrap()
}

/// `value → pods placed` of a leaf, from its last path level.
fn per_node(leaf: &LeafDecision) -> Vec<(&str, &str)> {
    leaf.assignments
        .iter()
        .map(|a| (a.pod.as_str(), a.node.as_str()))
        .collect()
}

fn path(leaf: &LeafDecision) -> Vec<String> {
    leaf.path
        .iter()
        .map(|l| format!("{}={}", l.key, l.value))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Candidates
// ---------------------------------------------------------------------------------------------

#[test]
fn candidates_are_values_of_the_key_and_unlabelled_nodes_are_dropped() {
    let nodes = [
        node("a1", "r1", 2),
        NodeBuilder::new("bare").cpu(64).build(),
        node("b1", "r2", 2),
        node("a2", "r1", 2),
    ];
    let all: Vec<usize> = (0..nodes.len()).collect();
    assert_eq!(
        candidates(&shared(&nodes), &all, Some(RACK)),
        vec![
            (Some("r1".to_string()), vec![0, 3]),
            (Some("r2".to_string()), vec![2]),
        ]
    );
    // Each candidate's nodes in name order, whatever order they were given in.
    assert_eq!(
        candidates(&shared(&nodes), &all, None),
        vec![(None, vec![0, 3, 2, 1])]
    );
    assert_eq!(
        candidates(&shared(&nodes), &[3, 2, 1, 0], Some(RACK)),
        vec![
            (Some("r1".to_string()), vec![0, 3]),
            (Some("r2".to_string()), vec![2]),
        ]
    );

    // The 64-core unlabelled node would take all three pods; with the key it is no candidate.
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(3), Some(RACK), pods_of(3, 1000))],
        "w",
    );
    assert!(d.fits);
    assert_eq!(d.placement.as_deref(), Some("r1"));
    assert!(d.leaves[0].assignments.iter().all(|a| a.node != "bare"));
}

#[test]
fn no_labelled_node_is_unschedulable_with_the_schedulers_words() {
    let nodes = [NodeBuilder::new("bare").cpu(64).build()];
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(1), Some(RACK), pods_of(1, 1000))],
        "w",
    );
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some("PodGroup ml/w (gang, minCount 1): no nodes found with topology label 'rack'")
    );
    assert_eq!(d.leaves[0].unplaced, vec!["p-0"]);
}

#[test]
fn no_key_is_one_placement_of_every_node_labelled_or_not() {
    // Five 1-cpu pods on four 2-cpu nodes: they must span racks and the unlabelled node.
    let nodes = [
        node("n1", "r1", 2),
        node("n2", "r2", 2),
        NodeBuilder::new("n3").cpu(2).build(),
        node("n4", "r3", 2),
    ];
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(5), None, pods_of(5, 1000))],
        "w",
    );
    assert!(d.fits);
    assert_eq!(d.placement, None);
    assert!(d.scores.is_empty(), "one placement is not scored");
    // First node by name that has room.
    assert_eq!(
        per_node(&d.leaves[0]),
        vec![
            ("p-0", "n1"),
            ("p-1", "n1"),
            ("p-2", "n2"),
            ("p-3", "n2"),
            ("p-4", "n3")
        ]
    );
    assert!(d.leaves[0].path.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Feasibility
// ---------------------------------------------------------------------------------------------

#[test]
fn gang_needs_min_count_pods_in_one_domain() {
    // r1 holds 2 one-cpu pods, r2 1: neither holds 3, though the cluster does.
    let nodes = [node("a1", "r1", 2), node("b1", "r2", 1)];
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(3), Some(RACK), pods_of(3, 1000))],
        "w",
    );
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some("PodGroup ml/w (gang, minCount 3): no rack fits 3 pods; best rack r1 fits 2 (cpu)")
    );
    assert!(d.leaves[0].assignments.is_empty());
    assert_eq!(d.leaves[0].unplaced.len(), 3);

    // minCount 2: r1 is feasible with 2 of the 3; the third stays pending.
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(2), Some(RACK), pods_of(3, 1000))],
        "w",
    );
    assert!(d.fits);
    assert_eq!(d.placement.as_deref(), Some("r1"));
    assert_eq!(per_node(&d.leaves[0]), vec![("p-0", "a1"), ("p-1", "a1")]);
    assert_eq!(d.leaves[0].unplaced, vec!["p-2"]);
}

#[test]
fn basic_places_only_what_fits_in_one_domain() {
    // Three 1-cpu pods, two one-node racks of 2 cpu, b1 already holds 500m: r1 takes 2
    // (count 100 + fit 2000/2000 = 100), r2 takes 1 (count 1*100/2 = 50 + fit 1500/2000 = 75).
    let nodes = [node("a1", "r1", 2), node("b1", "r2", 2)];
    let mut usage = Usage::new();
    holding(&mut usage, "b1", 1, 500);
    let d = run(
        &nodes,
        &usage,
        &[pg("w", PodGroupPolicy::Basic, Some(RACK), pods_of(3, 1000))],
        "w",
    );
    assert!(d.fits);
    assert_eq!(d.placement.as_deref(), Some("r1"));
    assert_eq!(per_node(&d.leaves[0]), vec![("p-0", "a1"), ("p-1", "a1")]);
    assert_eq!(d.leaves[0].unplaced, vec!["p-2"]);
    assert_eq!(
        d.scores.iter().map(|s| s.total).collect::<Vec<_>>(),
        vec![200, 125]
    );

    // Nothing fits at all: basic is not feasible either.
    let d = run(
        &nodes,
        &usage,
        &[pg("w", PodGroupPolicy::Basic, Some(RACK), pods_of(1, 4000))],
        "w",
    );
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some("PodGroup ml/w (basic): no rack fits 1 pod; best rack r1 fits 0 (cpu)")
    );
}

// ---------------------------------------------------------------------------------------------
// Scoring
// ---------------------------------------------------------------------------------------------

#[test]
fn pods_count_normalizes_by_the_maximum_with_integer_division() {
    // raw = bound 2 + proposed [1, 3, 0]: [3, 5, 2] → 3*100/5 = 60, 100, 2*100/5 = 40.
    assert_eq!(pods_count_scores(&[3, 5, 2]), vec![60, 100, 40]);
    // 2*100/3 = 66.67 → 66.
    assert_eq!(pods_count_scores(&[2, 3]), vec![66, 100]);
    assert_eq!(pods_count_scores(&[0, 0]), vec![0, 0]);
}

#[test]
fn pods_count_term_decides_when_bin_packing_ties() {
    // Basic, 3 one-cpu pods. r1: one 2-cpu node, fits 2 → fit 2000/2000 = 100, raw 2.
    // r2: one 3-cpu node, fits 3 → fit 3000/3000 = 100, raw 3.
    // count: r1 2*100/3 = 66, r2 100 → totals 166 and 200.
    let nodes = [node("a1", "r1", 2), node("b1", "r2", 3)];
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", PodGroupPolicy::Basic, Some(RACK), pods_of(3, 1000))],
        "w",
    );
    assert_eq!(
        d.scores,
        vec![
            CandidateScore {
                value: Some("r1".into()),
                pods_count: 66,
                resources_fit: 100,
                total: 166
            },
            CandidateScore {
                value: Some("r2".into()),
                pods_count: 100,
                resources_fit: 100,
                total: 200
            },
        ]
    );
    assert_eq!(d.placement.as_deref(), Some("r2"));
}

#[test]
fn resources_fit_term_prefers_the_most_allocated_domain() {
    // Gang 3 of 1 cpu. r1: 2 nodes of 2 cpu → 3000/4000 = 75; r2: 3 nodes → 3000/6000 = 50;
    // r3: 1 node, infeasible. No node has memory, so memory is skipped (not averaged as 0).
    // count: 100 each → totals 175 and 150.
    let nodes = [
        node("n1", "r1", 2),
        node("n2", "r1", 2),
        node("n3", "r2", 2),
        node("n4", "r2", 2),
        node("n5", "r2", 2),
        node("n6", "r3", 2),
    ];
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(3), Some(RACK), pods_of(3, 1000))],
        "w",
    );
    assert_eq!(
        d.scores
            .iter()
            .map(|s| (
                s.value.clone().unwrap(),
                s.pods_count,
                s.resources_fit,
                s.total
            ))
            .collect::<Vec<_>>(),
        vec![("r1".into(), 100, 75, 175), ("r2".into(), 100, 50, 150)]
    );
    assert_eq!(d.placement.as_deref(), Some("r1"));
}

#[test]
fn resources_fit_counts_cpu_and_memory_with_the_non_zero_defaults() {
    // One 1-cpu pod (no memory request: 200Mi in scoring). Both racks: one 2-cpu / 1Gi node.
    // r2's node holds a pod that requests nothing: 100m / 200Mi in scoring.
    // r1: cpu 1000*100/2000 = 50, memory 200Mi*100/1024Mi = 19 → (50+19)/2 = 34.
    // r2: cpu 1100*100/2000 = 55, memory 400Mi*100/1024Mi = 39 → (55+39)/2 = 47.
    // Without the defaults both would be (50+0)/2 = 25, a tie.
    let nodes = [
        NodeBuilder::new("a1")
            .label(RACK, "r1")
            .cpu(2)
            .resource(MEMORY, GI)
            .build(),
        NodeBuilder::new("b1")
            .label(RACK, "r2")
            .cpu(2)
            .resource(MEMORY, GI)
            .build(),
    ];
    let mut usage = Usage::new();
    usage.entry("b1".into()).or_default().add_pod(
        &ResourceList::new(),
        &non_zero_requests([&ResourceList::new()]),
    );
    let d = run(
        &nodes,
        &usage,
        &[pg("w", gang(1), Some(RACK), pods_of(1, 1000))],
        "w",
    );
    assert_eq!(
        d.scores.iter().map(|s| s.resources_fit).collect::<Vec<_>>(),
        vec![34, 47]
    );
    assert_eq!(d.placement.as_deref(), Some("r2"));
}

#[test]
fn non_zero_defaults_apply_per_container_and_per_missing_resource() {
    let cpu_only = ResourceList::from([(CPU.to_string(), 500)]);
    let explicit_zero = ResourceList::from([(CPU.to_string(), 0), (MEMORY.to_string(), 0)]);
    let nothing = ResourceList::new();
    // 500 + 0 + 100 millicores; 200Mi + 0 + 200Mi.
    assert_eq!(
        non_zero_requests([&cpu_only, &explicit_zero, &nothing]),
        ResourceList::from([(CPU.to_string(), 600), (MEMORY.to_string(), 400 * MI)])
    );
}

#[test]
fn resources_fit_caps_requested_at_allocatable() {
    let n = NodeBuilder::new("a").cpu(1).resource(MEMORY, GI).build();
    // cpu 3000 > 1000 → 100; memory 512Mi → 50; (100+50)/2 = 75.
    assert_eq!(resources_fit_score([(&n, [3000, 512 * MI])]), 75);
}

#[test]
fn a_single_feasible_placement_is_not_scored() {
    let nodes = [node("a1", "r1", 2), node("b1", "r2", 1)];
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(2), Some(RACK), pods_of(2, 1000))],
        "w",
    );
    assert!(d.fits);
    assert_eq!(d.placement.as_deref(), Some("r1"));
    assert!(d.scores.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Bound pods
// ---------------------------------------------------------------------------------------------

#[test]
fn bound_pods_fix_the_domain_even_against_the_score() {
    // Three pods of the gang run in r2 (minCount 3 is met); one more arrives. r1 would score
    // higher ((2000+1000)/4000 = 75 against (3000+1000)/6000 = 66), but only r2 is a candidate.
    let nodes = [
        node("n1", "r1", 2),
        node("n2", "r1", 2),
        node("n3", "r2", 2),
        node("n4", "r2", 2),
        node("n5", "r2", 2),
    ];
    let mut usage = Usage::new();
    holding(&mut usage, "n1", 1, 2000);
    holding(&mut usage, "n3", 2, 1000);
    holding(&mut usage, "n4", 1, 1000);
    let g = with_bound(
        pg("w", gang(3), Some(RACK), vec![pod("p-3", 1000)]),
        &["n3", "n3", "n4"],
    );
    let d = run(&nodes, &usage, std::slice::from_ref(&g), "w");
    assert!(d.fits);
    assert_eq!(d.placement.as_deref(), Some("r2"));
    assert_eq!(per_node(&d.leaves[0]), vec![("p-3", "n4")]);

    // Without the bound pods (and minCount 1) r1 wins on score.
    drop(g);
    let free = pg("w", gang(1), Some(RACK), vec![pod("p-3", 1000)]);
    let d = run(&nodes, &usage, &[free], "w");
    assert_eq!(
        d.scores.iter().map(|s| s.resources_fit).collect::<Vec<_>>(),
        vec![75, 66]
    );
    assert_eq!(d.placement.as_deref(), Some("r1"));
}

#[test]
fn bound_pods_in_a_full_domain_keep_the_rest_pending() {
    let nodes = [node("a1", "r1", 1), node("b1", "r2", 4)];
    let mut usage = Usage::new();
    holding(&mut usage, "a1", 1, 1000);
    let g = with_bound(
        pg("w", gang(2), Some(RACK), vec![pod("p-1", 1000)]),
        &["a1"],
    );
    let d = run(&nodes, &usage, &[g], "w");
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some("PodGroup ml/w (gang, minCount 2): rack r1 fits 0 pods of the 1 needed (cpu)")
    );
}

#[test]
fn bound_pods_spanning_two_domains_place_nothing_more() {
    let nodes = [node("a1", "r1", 4), node("b1", "r2", 4)];
    let g = with_bound(
        pg("w", gang(2), Some(RACK), vec![pod("p-2", 1000)]),
        &["a1", "b1"],
    );
    let d = run(&nodes, &Usage::new(), &[g], "w");
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some(
            "PodGroup ml/w (gang, minCount 2): its pods already run in 2 different racks \
             (r1, r2); nothing more is placed"
        )
    );
    assert_eq!(d.leaves[0].unplaced, vec!["p-2"]);
}

// ---------------------------------------------------------------------------------------------
// Filters
// ---------------------------------------------------------------------------------------------

#[test]
fn the_pods_count_is_a_resource() {
    // a1 has CPU for 4 pods but 2 pod slots, one taken: one pod fits.
    let nodes = [NodeBuilder::new("a1")
        .label(RACK, "r1")
        .cpu(4)
        .resource(PODS, 2)
        .build()];
    let mut usage = Usage::new();
    holding(&mut usage, "a1", 1, 0);
    let d = run(
        &nodes,
        &usage,
        &[pg("w", gang(2), Some(RACK), pods_of(2, 1000))],
        "w",
    );
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some("PodGroup ml/w (gang, minCount 2): rack r1 fits 1 pod of the 2 needed (pods)")
    );
}

#[test]
fn taints_keep_pods_off_unless_tolerated() {
    let mut tainted = node("a1", "r1", 8);
    tainted.taints.push(Taint {
        key: "gpu".into(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    });
    let d = run(
        std::slice::from_ref(&tainted),
        &Usage::new(),
        &[pg("w", gang(2), Some(RACK), pods_of(2, 1000))],
        "w",
    );
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some(
            "PodGroup ml/w (gang, minCount 2): rack r1 fits 0 pods of the 2 needed \
             (taint gpu=true:NoSchedule)"
        )
    );

    // Tolerated, the tainted rack is the only one that holds the gang.
    let nodes = [tainted, node("b1", "r2", 1)];
    let mut tolerant = pods_of(2, 1000);
    for p in &mut tolerant {
        p.tolerations.push(Toleration {
            key: Some("gpu".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        });
    }
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(2), Some(RACK), tolerant)],
        "w",
    );
    assert!(d.fits);
    assert_eq!(d.placement.as_deref(), Some("r1"));
}

#[test]
fn not_ready_and_cordoned_nodes_take_no_pods() {
    let mut cordoned = node("c1", "r1", 8);
    cordoned.unschedulable = true;
    let nodes = [
        NodeBuilder::new("a1")
            .label(RACK, "r1")
            .cpu(8)
            .not_ready()
            .build(),
        cordoned,
    ];
    let used = |_: &str| 0;
    let p = pod("p", 1000);
    assert_eq!(reject(&nodes[0], used, &p), Some(Reject::NotReady));
    assert_eq!(reject(&nodes[1], used, &p), Some(Reject::Unschedulable));
    let mut tolerant = p.clone();
    tolerant.tolerations.push(Toleration {
        key: Some(NOT_READY_TAINT.into()),
        operator: Some("Exists".into()),
        ..Default::default()
    });
    assert_eq!(reject(&nodes[0], used, &tolerant), None);
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(1), Some(RACK), vec![p])],
        "w",
    );
    assert_eq!(
        d.message.as_deref(),
        Some(
            "PodGroup ml/w (gang, minCount 1): rack r1 fits 0 pods of the 1 needed \
             (unschedulable on 1 node, not ready on 1 node)"
        )
    );
}

#[test]
fn node_selector_narrows_the_nodes_inside_a_domain() {
    let nodes = [
        node("a1", "r1", 4),
        NodeBuilder::new("a2")
            .label(RACK, "r1")
            .label("disk", "ssd")
            .cpu(1)
            .build(),
    ];
    let mut p = pod("p", 1000);
    p.node_selector.insert("disk".into(), "ssd".into());
    let d = run(
        &nodes,
        &Usage::new(),
        &[pg("w", gang(1), Some(RACK), vec![p])],
        "w",
    );
    assert_eq!(per_node(&d.leaves[0]), vec![("p", "a2")]);
}

// ---------------------------------------------------------------------------------------------
// CompositePodGroup
// ---------------------------------------------------------------------------------------------

#[test]
fn children_are_confined_to_the_parents_placement() {
    // Root gang minGroupCount 2 by rack; pg1 and pg2 (gang 2, no key). r2 (listed first, with
    // 2 cpu left) holds pg1 but not pg2; r1 holds both.
    let nodes = [
        node("n3", "r2", 1),
        node("n4", "r2", 1),
        node("n1", "r1", 2),
        node("n2", "r1", 2),
    ];
    let groups = [
        cpg(
            "root",
            CompositePolicy::Gang { min_group_count: 2 },
            Some(RACK),
        ),
        child(pg("pg1", gang(2), None, pods_of(2, 1000)), "root"),
        child(pg("pg2", gang(2), None, pods_of(2, 1000)), "root"),
    ];
    let d = run(&nodes, &Usage::new(), &groups, "root");
    assert!(d.fits && d.composite);
    assert_eq!(d.placement.as_deref(), Some("r1"));
    for leaf in &d.leaves {
        assert!(leaf.fits, "{leaf:?}");
        assert_eq!(path(leaf), vec!["rack=r1"]);
        assert!(
            leaf.assignments
                .iter()
                .all(|a| a.node == "n1" || a.node == "n2")
        );
    }
}

#[test]
fn zone_then_rack_workers_and_driver() {
    // zone-1: a, b in rack-1, c in rack-2; zone-2: d in rack-1, e in rack-3. 4 cpu each,
    // workers 8 x 1 cpu (gang 8, rack), driver 1 x 1 cpu (gang 1, rack), root gang 2 by zone.
    let n = |name: &str, zone: &str, rack: &str| {
        NodeBuilder::new(name)
            .label(ZONE, zone)
            .label(RACK, rack)
            .cpu(4)
            .resource(MEMORY, 16 * GI)
            .build()
    };
    let nodes = [
        n("node-a", "zone-1", "rack-1"),
        n("node-b", "zone-1", "rack-1"),
        n("node-c", "zone-1", "rack-2"),
        n("node-d", "zone-2", "rack-1"),
        n("node-e", "zone-2", "rack-3"),
    ];
    let mut workers = child(pg("workers", gang(8), Some(RACK), pods_of(8, 1000)), "root");
    workers.created = 1;
    let mut driver = child(pg("driver", gang(1), Some(RACK), pods_of(1, 1000)), "root");
    driver.created = 2;
    let groups = [
        cpg(
            "root",
            CompositePolicy::Gang { min_group_count: 2 },
            Some(ZONE),
        ),
        workers,
        driver,
    ];
    let d = run(&nodes, &Usage::new(), &groups, "root");
    assert!(d.fits);
    assert_eq!(d.placement.as_deref(), Some("zone-1"));
    assert!(d.scores.is_empty(), "zone-2 cannot hold the workers");
    let names: Vec<&str> = d.leaves.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, vec!["workers", "driver"]);
    assert_eq!(path(&d.leaves[0]), vec!["zone=zone-1", "rack=rack-1"]);
    assert_eq!(d.leaves[0].assignments.len(), 8);
    // rack-1 is full after the workers: the driver goes to rack-2 of zone-1, never node-d.
    assert_eq!(path(&d.leaves[1]), vec!["zone=zone-1", "rack=rack-2"]);
    assert_eq!(per_node(&d.leaves[1]), vec![("p-0", "node-c")]);
}

#[test]
fn min_group_count_children_must_be_feasible() {
    // One rack of 2 cpu: pg1 (2 pods) fits, pg2 (3 pods) never does.
    let nodes = [node("n1", "r1", 2)];
    let groups = |min_group_count| {
        vec![
            cpg(
                "root",
                CompositePolicy::Gang { min_group_count },
                Some(RACK),
            ),
            child(pg("pg1", gang(2), None, pods_of(2, 1000)), "root"),
            child(pg("pg2", gang(3), None, pods_of(3, 500)), "root"),
        ]
    };
    let d = run(&nodes, &Usage::new(), &groups(2), "root");
    assert!(!d.fits);
    assert_eq!(
        d.message.as_deref(),
        Some(
            "CompositePodGroup ml/root (gang, minGroupCount 2): rack r1 holds 1 feasible child \
             of the 2 needed; first failing child: PodGroup ml/pg2 (gang, minCount 3): 0 pods \
             fit of the 3 needed (cpu)"
        )
    );
    assert!(d.leaves.iter().all(|l| !l.fits && l.assignments.is_empty()));

    let d = run(&nodes, &Usage::new(), &groups(1), "root");
    assert!(d.fits);
    assert!(d.leaves[0].fits);
    assert_eq!(d.leaves[0].assignments.len(), 2);
    assert!(!d.leaves[1].fits);
    assert_eq!(
        d.leaves[1].message.as_deref(),
        Some("PodGroup ml/pg2 (gang, minCount 3): 0 pods fit of the 3 needed (cpu)")
    );
}

#[test]
fn children_go_in_creation_then_name_order() {
    // One slot; the child first in (created, name) order takes it.
    let nodes = [node("n1", "r1", 1)];
    let groups = |created_b: i64| {
        let mut a = child(pg("a", gang(1), None, pods_of(1, 1000)), "root");
        a.created = 5;
        let mut b = child(pg("b", gang(1), None, pods_of(1, 1000)), "root");
        b.created = created_b;
        vec![cpg("root", CompositePolicy::Basic, None), a, b]
    };
    let d = run(&nodes, &Usage::new(), &groups(1), "root");
    let fits: Vec<(&str, bool)> = d.leaves.iter().map(|l| (l.name.as_str(), l.fits)).collect();
    assert_eq!(fits, vec![("b", true), ("a", false)]);
    let d = run(&nodes, &Usage::new(), &groups(5), "root");
    let fits: Vec<(&str, bool)> = d.leaves.iter().map(|l| (l.name.as_str(), l.fits)).collect();
    assert_eq!(fits, vec![("a", true), ("b", false)]);
}

#[test]
fn depth_is_at_most_four() {
    let chain = |depth: usize| {
        let mut groups = vec![cpg("c1", CompositePolicy::Basic, None)];
        for i in 2..depth {
            groups.push(child(
                cpg(&format!("c{i}"), CompositePolicy::Basic, None),
                &format!("c{}", i - 1),
            ));
        }
        groups.push(child(
            pg("leaf", gang(1), None, pods_of(1, 1000)),
            &format!("c{}", depth - 1),
        ));
        groups
    };
    let nodes = [node("n1", "r1", 1)];
    assert!(run(&nodes, &Usage::new(), &chain(4), "c1").fits);
    assert_eq!(
        place(&shared(&nodes), &Usage::new(), &chain(5), "c1"),
        Err(Error::TooDeep {
            group: "leaf".into(),
            depth: 5
        })
    );
}

#[test]
fn cycles_missing_parents_and_non_roots_are_errors() {
    let nodes = [node("n1", "r1", 1)];
    let groups = [
        cpg("root", CompositePolicy::Basic, None),
        child(cpg("x", CompositePolicy::Basic, None), "y"),
        child(cpg("y", CompositePolicy::Basic, None), "x"),
    ];
    assert_eq!(
        place(&shared(&nodes), &Usage::new(), &groups, "root"),
        Err(Error::Cycle(vec!["x".into(), "y".into(), "x".into()]))
    );
    let groups = [child(pg("w", gang(1), None, pods_of(1, 1000)), "gone")];
    assert!(matches!(
        place(&shared(&nodes), &Usage::new(), &groups, "w"),
        Err(Error::MissingParent { .. })
    ));
    let groups = [
        pg("p", gang(1), None, Vec::new()),
        child(pg("w", gang(1), None, pods_of(1, 1000)), "p"),
    ];
    assert!(matches!(
        place(&shared(&nodes), &Usage::new(), &groups, "p"),
        Err(Error::ParentNotComposite { .. })
    ));
    let groups = [
        cpg("root", CompositePolicy::Basic, None),
        child(pg("w", gang(1), None, pods_of(1, 1000)), "root"),
    ];
    assert!(matches!(
        place(&shared(&nodes), &Usage::new(), &groups, "w"),
        Err(Error::NotRoot { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Sequencing
// ---------------------------------------------------------------------------------------------

#[test]
fn record_lets_the_next_group_see_the_pods_placed() {
    // pg1 takes r2 (2000/2000 = 100 against 2000/6000 = 33); pg2 then finds r2 full.
    let nodes = [
        node("n1", "r1", 2),
        node("n2", "r1", 2),
        node("n3", "r1", 2),
        node("n4", "r2", 2),
    ];
    let groups = [
        pg("pg1", PodGroupPolicy::Basic, Some(RACK), pods_of(2, 1000)),
        pg("pg2", PodGroupPolicy::Basic, Some(RACK), pods_of(2, 1000)),
    ];
    let mut usage = Usage::new();
    let d1 = run(&nodes, &usage, &groups, "pg1");
    assert_eq!(d1.placement.as_deref(), Some("r2"));
    assert_eq!(
        run(&nodes, &usage, &groups, "pg2").placement.as_deref(),
        Some("r2")
    );
    record(&mut usage, &groups, &d1);
    assert_eq!(usage["n4"].requested[CPU], 2000);
    assert_eq!(usage["n4"].requested[PODS], 2);
    assert_eq!(
        run(&nodes, &usage, &groups, "pg2").placement.as_deref(),
        Some("r1")
    );
}
