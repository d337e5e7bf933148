//! Tests of the plan book: plans, seats, held capacity, binding, expiry and restarts, with
//! clocks the tests control (no HTTP, no sleeping).
//!
//! Every cluster here is small and written out in full: one block `b1` of `racks` racks, each
//! with two hosts of 4 cpu (so a rack holds 8 one-cpu pods), labelled `node-group: tas` for the
//! flavor `tas-flavor`, plus one node `web-1` outside the flavor. Jobs go to the LocalQueue
//! `tas-user-queue` in `default`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::cluster::{Cluster, WorkloadKind, load_paths};

/// The book and the state it decides over, called as the extender calls them; `cluster` is
/// the loaded manifests (nodes in file order: the scheduler's candidate list).
struct TestBook {
    book: PlanBook,
    state: ClusterState,
    cluster: Cluster,
}

impl TestBook {
    fn new(cluster: Cluster, ttl: Duration) -> Self {
        Self {
            book: PlanBook::new(FeatureGates::default(), ttl),
            state: ClusterState::from_cluster(&cluster),
            cluster,
        }
    }

    fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    fn filter(&mut self, pod: &Pod, candidates: &[&str], now: Instant) -> FilterVerdict {
        self.book.filter(&self.state, pod, candidates, now)
    }

    fn bind(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        now: Instant,
    ) -> Result<(), BindError> {
        self.book
            .bind(&mut self.state, namespace, name, uid, node, now)
    }

    fn favoured(&mut self, pod: &Pod, candidates: &[&str]) -> Vec<usize> {
        self.book.favoured(pod, candidates)
    }

    fn group_failure(&self, group: &GroupKey) -> Option<&str> {
        self.book.group_failure(group)
    }

    fn stats(&self) -> PlanStats {
        self.book.stats()
    }

    fn node_usage(&self, node: &str) -> Option<ResourceList> {
        self.state.node_usage(node)
    }
}

const RACK: &str = "cloud.provider.com/topology-rack";
const BLOCK: &str = "cloud.provider.com/topology-block";
const TTL: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Cluster builders
// ---------------------------------------------------------------------------------------------

/// Topology, flavor, queues and nodes: `racks` racks x 2 hosts x 4 cpu, and `web-1`.
fn base_yaml(racks: usize) -> String {
    let mut y = String::from(
        r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: default
spec:
  levels:
  - nodeLabel: cloud.provider.com/topology-block
  - nodeLabel: cloud.provider.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: tas-flavor
spec:
  topologyName: default
  nodeLabels:
    node-group: tas
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: tas-cluster-queue
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: tas-flavor
      resources:
      - name: cpu
        nominalQuota: '1000'
      - name: memory
        nominalQuota: 4000Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: tas-user-queue
  namespace: default
spec:
  clusterQueue: tas-cluster-queue
---
apiVersion: v1
kind: Node
metadata:
  name: web-1
  labels:
    kubernetes.io/hostname: web-1
    node-group: web
spec: {}
status:
  allocatable: {cpu: '4', memory: 16Gi, pods: '110'}
  conditions: [{type: Ready, status: 'True'}]
"#,
    );
    for r in 1..=racks {
        for h in 1..=2 {
            let name = format!("b1-r{r}-h{h}");
            y.push_str(&format!(
                r#"---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    cloud.provider.com/topology-block: b1
    cloud.provider.com/topology-rack: r{r}
    kubernetes.io/hostname: {name}
    node-group: tas
spec: {{}}
status:
  allocatable: {{cpu: '4', memory: 16Gi, pods: '110'}}
  conditions: [{{type: Ready, status: 'True'}}]
"#
            ));
        }
    }
    y
}

/// An Indexed Job of `n` pods of `cpu` cpu each, all in one domain of `level` (required).
fn job_yaml(name: &str, n: usize, cpu: u32, level: &str) -> String {
    format!(
        r#"---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  uid: job-uid-{name}
  labels:
    kueue.x-k8s.io/queue-name: tas-user-queue
spec:
  parallelism: {n}
  completions: {n}
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: {level}
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: registry.k8s.io/pause:3.10
        resources:
          requests:
            cpu: '{cpu}'
"#
    )
}

/// Pod `index` of Job `job`, already bound to `node` and Running (as the API server holds it).
fn bound_job_pod_yaml(job: &str, index: usize, cpu: u32, node: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Pod
metadata:
  name: {job}-{index}-abcde
  namespace: default
  uid: uid-{job}-{index}
  labels:
    batch.kubernetes.io/job-name: {job}
    batch.kubernetes.io/job-completion-index: '{index}'
  annotations:
    batch.kubernetes.io/job-completion-index: '{index}'
    kueue.x-k8s.io/podset-required-topology: {RACK}
  ownerReferences:
  - apiVersion: batch/v1
    kind: Job
    name: {job}
    uid: job-uid-{job}
    controller: true
    blockOwnerDeletion: true
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: worker
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: '{cpu}'
status:
  phase: Running
"#
    )
}

/// An ordinary Running pod (no group) of `cpu` cpu on `node`.
fn filler_pod_yaml(name: &str, cpu: u32, node: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  nodeName: {node}
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: '{cpu}'
status:
  phase: Running
"#
    )
}

/// Writes `yaml` to a fresh temp dir, loads it, removes the dir.
fn load(yaml: &str) -> Cluster {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "kube-tas-plans-tests-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.yaml"), yaml).unwrap();
    let cluster = load_paths(&[&dir]);
    let _ = std::fs::remove_dir_all(&dir);
    cluster.unwrap_or_else(|e| panic!("test cluster does not load: {e}\n{yaml}"))
}

/// A book over `racks` racks plus `extra` documents (Jobs, bound pods).
fn book(racks: usize, extra: &str) -> TestBook {
    book_with_ttl(racks, extra, TTL)
}

fn book_with_ttl(racks: usize, extra: &str, ttl: Duration) -> TestBook {
    let yaml = format!("{}{extra}", base_yaml(racks));
    TestBook::new(load(&yaml), ttl)
}

// ---------------------------------------------------------------------------------------------
// Pods as kube-scheduler sends them
// ---------------------------------------------------------------------------------------------

/// Pending pod `index` of Indexed Job `job` (`cpu` cpu), uid `uid-<job>-<index>`.
fn job_pod(job: &str, index: usize, cpu: u32) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("{job}-{index}-xyz12"),
            "generateName": format!("{job}-{index}-"),
            "namespace": "default",
            "uid": format!("uid-{job}-{index}"),
            "labels": {
                "batch.kubernetes.io/job-name": job,
                "job-name": job,
                "batch.kubernetes.io/controller-uid": format!("job-uid-{job}"),
                "controller-uid": format!("job-uid-{job}"),
                "batch.kubernetes.io/job-completion-index": index.to_string(),
            },
            "annotations": {
                "batch.kubernetes.io/job-completion-index": index.to_string(),
                "kueue.x-k8s.io/podset-required-topology": RACK,
            },
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": job,
                "uid": format!("job-uid-{job}"), "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "containers": [{"name": "worker", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu.to_string()}}}],
            "nodeSelector": {"node-group": "tas"},
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }))
    .unwrap()
}

/// Pod `name` (1 cpu) of the NonIndexed Job `job`: no index tells it from its siblings.
fn unindexed_pod(job: &str, name: &str) -> Pod {
    without_index(job_pod(job, 0, 1), format!("{job}-{name}"))
}

/// `pod` named `name` (uid `uid-{name}`) without its completion index, as a NonIndexed Job's
/// pods carry none.
fn without_index(mut pod: Pod, name: String) -> Pod {
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.metadata.name = Some(name);
    let numbered = [&mut pod.metadata.labels, &mut pod.metadata.annotations];
    for numbers in numbered.into_iter().flatten() {
        numbers.remove("batch.kubernetes.io/job-completion-index");
    }
    pod
}

/// A pod with no owner and no queue: belongs to no group.
fn lone_pod(name: &str, cpu: u32) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]},
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }))
    .unwrap()
}

fn uid(job: &str, index: usize) -> String {
    format!("uid-{job}-{index}")
}

fn pod_name(job: &str, index: usize) -> String {
    format!("{job}-{index}-xyz12")
}

// ---------------------------------------------------------------------------------------------
// Reading answers
// ---------------------------------------------------------------------------------------------

/// Every node of the book, in file order: the scheduler's candidate list.
fn all_nodes(b: &TestBook) -> Vec<String> {
    b.cluster().nodes.iter().map(|n| n.name.clone()).collect()
}

/// The one node a group pod is sent to (its seat), panicking on anything else.
fn seat_of(b: &mut TestBook, pod: &Pod, now: Instant) -> String {
    let names = all_nodes(b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match b.filter(pod, &candidates, now) {
        FilterVerdict::Only { pass, rejected, .. } => {
            assert_eq!(
                pass.len(),
                1,
                "a hostname-lowest seat is one node; got {pass:?} ({rejected:?})"
            );
            names[pass[0]].clone()
        }
        other => panic!("expected the seat's node only, got {other:?}"),
    }
}

/// The rack label of a node.
fn rack_of(b: &TestBook, node: &str) -> String {
    let n = b.cluster().nodes.iter().find(|n| n.name == node).unwrap();
    format!("{}/{}", &n.labels[BLOCK], &n.labels[RACK])
}

fn cpu_used(b: &TestBook, node: &str) -> i64 {
    b.node_usage(node)
        .and_then(|u| u.get("cpu").copied())
        .unwrap_or(0)
}

fn cpu_allocatable(b: &TestBook, node: &str) -> i64 {
    b.cluster()
        .nodes
        .iter()
        .find(|n| n.name == node)
        .unwrap()
        .allocatable["cpu"]
}

/// Seats of pods `0..n` of `job`, filtered in index order at `now`.
fn seats(b: &mut TestBook, job: &str, n: usize, cpu: u32, now: Instant) -> Vec<String> {
    (0..n)
        .map(|i| seat_of(b, &job_pod(job, i, cpu), now))
        .collect()
}

fn count_by<'a>(items: impl IntoIterator<Item = &'a String>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for i in items {
        *m.entry(i.clone()).or_insert(0) += 1;
    }
    m
}

/// The candidates a lone pod is turned away from, by name.
fn lone_rejected(b: &mut TestBook, pod: &Pod, now: Instant) -> Vec<String> {
    let names = all_nodes(b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    match b.filter(pod, &candidates, now) {
        FilterVerdict::Except { rejected } => {
            for (_, why) in &rejected {
                assert!(why.reason.starts_with("node(s) "), "{}", why.reason);
            }
            rejected.iter().map(|(i, _)| names[*i].clone()).collect()
        }
        other => panic!("a lone pod gets Except, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Plans and seats
// ---------------------------------------------------------------------------------------------

#[test]
fn a_gangs_plan_gives_each_pod_a_seat() {
    let mut b = book(2, &job_yaml("train", 6, 1, RACK));
    let t0 = Instant::now();
    let first = seat_of(&mut b, &job_pod("train", 0, 1), t0);
    // The whole gang is planned at the first pod: six seats held, one plan.
    let s = b.stats();
    assert_eq!((s.plans_made, s.plans_active, s.seats_held), (1, 1, 6));
    let mut nodes = vec![first];
    nodes.extend((1..6).map(|i| seat_of(&mut b, &job_pod("train", i, 1), t0)));
    // Six pods of 1 cpu need two 4-cpu hosts; no host gets more than fits.
    let per_node = count_by(&nodes);
    assert!(per_node.len() >= 2, "{per_node:?}");
    for (node, pods) in &per_node {
        assert!(node.starts_with("b1-"), "{node} is not in the flavor");
        assert!(
            *pods as i64 * 1000 <= cpu_allocatable(&b, node),
            "{per_node:?}"
        );
    }
    let s = b.stats();
    assert_eq!((s.plans_made, s.seats_held, s.pods_bound), (1, 6, 0));
}

#[test]
fn a_rack_required_gang_sits_in_one_rack() {
    // Each rack has 2 cpu taken on its first host: 6 free per rack, 12 in the cluster.
    let extra = format!(
        "{}{}{}",
        filler_pod_yaml("f1", 2, "b1-r1-h1"),
        filler_pod_yaml("f2", 2, "b1-r2-h1"),
        job_yaml("train", 6, 1, RACK)
    );
    let mut b = book(2, &extra);
    let nodes = seats(&mut b, "train", 6, 1, Instant::now());
    let racks: Vec<String> = nodes.iter().map(|n| rack_of(&b, n)).collect();
    assert!(racks.iter().all(|r| *r == racks[0]), "{nodes:?}");
    // It needs both hosts of that rack, within their free room (2 and 4 cpu).
    let per_node = count_by(&nodes);
    assert_eq!(per_node.len(), 2, "{per_node:?}");
    for (node, pods) in &per_node {
        let free = cpu_allocatable(&b, node) - cpu_used(&b, node);
        assert!(
            *pods as i64 * 1000 <= free,
            "{node}: {pods} pods, {free}m free"
        );
    }
}

#[test]
fn the_same_pod_gets_the_same_seat_on_every_call() {
    let mut b = book(2, &job_yaml("train", 8, 1, RACK));
    let t0 = Instant::now();
    let pod = job_pod("train", 3, 1);
    let first = seat_of(&mut b, &pod, t0);
    // Other pods come in between; the candidate list arrives in another order.
    for i in [0, 5, 7] {
        seat_of(&mut b, &job_pod("train", i, 1), t0 + Duration::from_secs(1));
    }
    for k in 0..3 {
        assert_eq!(
            seat_of(&mut b, &pod, t0 + Duration::from_secs(2 + k)),
            first
        );
    }
    let mut reversed = all_nodes(&b);
    reversed.reverse();
    let candidates: Vec<&str> = reversed.iter().map(String::as_str).collect();
    match b.filter(&pod, &candidates, t0 + Duration::from_secs(9)) {
        FilterVerdict::Only { pass, .. } => {
            assert_eq!(pass.len(), 1);
            assert_eq!(reversed[pass[0]], first);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(b.favoured(&pod, &candidates).len(), 1);
    assert_eq!(reversed[b.favoured(&pod, &candidates)[0]], first);
    // Repeated calls made no new plan and took no new seat.
    let s = b.stats();
    assert_eq!((s.plans_made, s.seats_held), (1, 8));
}

#[test]
fn completion_index_i_takes_seat_i() {
    // 8 pods x 1 cpu fill one rack: seats in topology order are h1 x4, then h2 x4.
    let mut b = book(2, &job_yaml("train", 8, 1, RACK));
    let t0 = Instant::now();
    // Arrive in reverse order: seats follow the index, not the arrival order.
    let mut by_index = vec![String::new(); 8];
    for i in (0..8).rev() {
        by_index[i] = seat_of(&mut b, &job_pod("train", i, 1), t0);
    }
    let rack = rack_of(&b, &by_index[0]);
    assert!(
        by_index.iter().all(|n| rack_of(&b, n) == rack),
        "{by_index:?}"
    );
    assert!(
        by_index[..4].iter().all(|n| n.ends_with("-h1")),
        "{by_index:?}"
    );
    assert!(
        by_index[4..].iter().all(|n| n.ends_with("-h2")),
        "{by_index:?}"
    );
}

/// A pod made in place of one deleted before it was bound (same index, another uid) takes its
/// predecessor's seat: in a full rack there is no room for an extra seat beside the dead one.
/// A pod of an index nobody held finds no seat there.
#[test]
fn a_pod_made_in_place_of_one_deleted_before_its_bind_takes_its_seat() {
    let mut b = book(1, &job_yaml("train", 8, 1, RACK));
    let t0 = Instant::now();
    let by_index = seats(&mut b, "train", 8, 1, t0);
    assert_eq!(b.stats().seats_held, 8);
    let with_uid = |index: usize, uid: &str| {
        let mut pod = job_pod("train", index, 1);
        pod.metadata.uid = Some(uid.to_string());
        pod
    };
    let t1 = t0 + Duration::from_secs(1);
    assert_eq!(
        seat_of(&mut b, &with_uid(3, "uid-train-3-again"), t1),
        by_index[3]
    );
    let s = b.stats();
    assert_eq!(
        (s.plans_made, s.seats_held, s.seats_reopened),
        (1, 8, 1),
        "{s:?}"
    );
    // The successor binds there; the plan is whole once the others bind too.
    let name = pod_name("train", 3);
    b.bind("default", &name, "uid-train-3-again", &by_index[3], t1)
        .unwrap();
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let stranger = with_uid(8, "uid-train-8");
    let refused = b.filter(&stranger, &candidates, t1);
    assert!(
        matches!(&refused, FilterVerdict::Only { pass, .. } if pass.is_empty()),
        "{refused:?}"
    );
    for i in (0..8).filter(|&i| i != 3) {
        b.bind(
            "default",
            &pod_name("train", i),
            &uid("train", i),
            &by_index[i],
            t1,
        )
        .unwrap();
    }
    let s = b.stats();
    assert_eq!((s.plans_active, s.seats_held), (0, 0), "{s:?}");
}

/// A pod whose rank has no seat of its own (an index past the plan's seats) took the first
/// open one; deleted before its bind, its successor (same index) still finds that seat once
/// no seat is open.
#[test]
fn a_successor_finds_its_predecessors_seat_away_from_its_rank() {
    let mut b = book(1, &job_yaml("train", 8, 1, RACK));
    let t0 = Instant::now();
    seats(&mut b, "train", 7, 1, t0);
    let with_uid = |index: usize, uid: &str| {
        let mut pod = job_pod("train", index, 1);
        pod.metadata.uid = Some(uid.to_string());
        pod
    };
    let last = seat_of(&mut b, &with_uid(9, "uid-train-9"), t0);
    assert_eq!(b.stats().seats_held, 8);
    assert_eq!(seat_of(&mut b, &with_uid(9, "uid-train-9-again"), t0), last);
    assert_eq!(b.stats().seats_held, 8, "no extra seat");
}

/// Pods with no index take the open seats in turn; a seat opened again below the last one
/// taken (its Binding refused) is the next pod's, not an extra seat beside the plan; the plan
/// is complete, and let go, only when its last seat is bound.
#[test]
fn pods_without_an_index_take_the_lowest_open_seat_and_complete_the_plan() {
    let mut b = book_with_ttl(1, &job_yaml("train", 4, 1, RACK), Duration::from_secs(3600));
    let t0 = Instant::now();
    let pods: Vec<Pod> = ["a", "b", "c", "d"]
        .map(|c| unindexed_pod("train", c))
        .into();
    let seat: Vec<String> = pods.iter().map(|p| seat_of(&mut b, p, t0)).collect();
    assert_eq!(b.stats().seats_held, 4);
    b.bind("default", "train-a", "uid-train-a", &seat[0], t0)
        .unwrap();
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "train-b", "uid-train-b", &seat[1], t0)
        .unwrap();
    b.book.abort_bind(&ticket, "the pod is gone");
    b.bind("default", "train-c", "uid-train-c", &seat[2], t0)
        .unwrap();
    // b's seat is open: the next pod takes it.
    let newcomer = unindexed_pod("train", "e");
    assert_eq!(seat_of(&mut b, &newcomer, t0), seat[1]);
    let s = b.stats();
    assert_eq!((s.seats_held, s.plans_active), (2, 1), "{s:?}");
    b.bind("default", "train-e", "uid-train-e", &seat[1], t0)
        .unwrap();
    assert_eq!(b.stats().plans_active, 1, "d's seat is not bound yet");
    b.bind("default", "train-d", "uid-train-d", &seat[3], t0)
        .unwrap();
    let s = b.stats();
    assert_eq!(
        (s.pods_bound, s.seats_held, s.plans_active),
        (4, 0, 0),
        "{s:?}"
    );
}

/// Pods numbered only by a JobSet's Job index (a NonIndexed replicated Job: siblings share
/// it) are not each other's predecessors: a sibling waiting keeps its seat.
#[test]
fn siblings_sharing_only_a_job_index_keep_their_seats() {
    let mut b = book(1, &job_yaml("train", 8, 1, RACK));
    let t0 = Instant::now();
    let by_index = seats(&mut b, "train", 7, 1, t0);
    let sibling = |uid: &str| {
        let mut pod = job_pod("train", 7, 1);
        pod.metadata.uid = Some(uid.to_string());
        let numbered = [&mut pod.metadata.labels, &mut pod.metadata.annotations];
        for numbers in numbered.into_iter().flatten() {
            numbers.remove("batch.kubernetes.io/job-completion-index");
        }
        let labels = pod.metadata.labels.get_or_insert_default();
        labels.insert("jobset.sigs.k8s.io/job-index".into(), "0".into());
        pod
    };
    let first = seat_of(&mut b, &sibling("uid-sibling-a"), t0);
    assert_eq!(rack_of(&b, &first), rack_of(&b, &by_index[0]));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let second = b.filter(&sibling("uid-sibling-b"), &candidates, t0);
    assert!(
        matches!(&second, FilterVerdict::Only { pass, .. } if pass.is_empty()),
        "{second:?}"
    );
    // The first still has its seat.
    assert_eq!(seat_of(&mut b, &sibling("uid-sibling-a"), t0), first);
}

#[test]
fn a_second_gang_cannot_take_the_first_gangs_seats() {
    // Two racks of 8 cpu; each gang needs a whole rack.
    let extra = format!(
        "{}{}{}",
        job_yaml("gang-a", 4, 2, RACK),
        job_yaml("gang-b", 4, 2, RACK),
        job_yaml("gang-c", 4, 2, RACK)
    );
    let mut b = book(2, &extra);
    let t0 = Instant::now();
    let a = seat_of(&mut b, &job_pod("gang-a", 0, 2), t0);
    let b0 = seat_of(&mut b, &job_pod("gang-b", 0, 2), t0);
    assert_ne!(rack_of(&b, &a), rack_of(&b, &b0));
    let a_all = seats(&mut b, "gang-a", 4, 2, t0);
    let b_all = seats(&mut b, "gang-b", 4, 2, t0);
    assert!(
        a_all.iter().all(|n| !b_all.contains(n)),
        "{a_all:?} {b_all:?}"
    );
    assert_eq!(b.stats().seats_held, 8);

    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdict = b.filter(&job_pod("gang-c", 0, 2), &candidates, t0);
    let FilterVerdict::Only { pass, rejected, .. } = verdict else {
        panic!("{verdict:?}")
    };
    assert!(pass.is_empty());
    assert!(
        rejected.reason.starts_with("node(s) "),
        "{}",
        rejected.reason
    );
    assert!(
        rejected.reason.contains("Job default/gang-c"),
        "{}",
        rejected.reason
    );
    // It would fit on an empty cluster, so freeing capacity could help.
    assert!(!rejected.unresolvable);
    let key = GroupKey {
        kind: WorkloadKind::Job,
        namespace: "default".into(),
        name: "gang-c".into(),
    };
    assert!(b.group_failure(&key).is_some());
    // Asking again is answered from memory: same words, no second count.
    let again = b.filter(&job_pod("gang-c", 1, 2), &candidates, t0);
    assert_eq!(
        again,
        FilterVerdict::Only {
            pass: vec![],
            rejected,
            seat: false
        }
    );
    let s = b.stats();
    assert_eq!((s.plans_made, s.groups_not_fit, s.seats_held), (2, 1, 8));
}

#[test]
fn a_gang_that_can_never_fit_is_unresolvable() {
    // 5 pods x 2 cpu = 10 cpu, a rack has 8.
    let mut b = book(2, &job_yaml("huge", 5, 2, RACK));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdict = b.filter(&job_pod("huge", 0, 2), &candidates, Instant::now());
    let FilterVerdict::Only { pass, rejected, .. } = verdict else {
        panic!("{verdict:?}")
    };
    assert!(pass.is_empty());
    assert!(rejected.unresolvable, "{rejected:?}");
    assert!(rejected.reason.contains("Job default/huge"), "{rejected:?}");
    assert_eq!(b.stats().seats_held, 0);
}

/// A remembered "does not fit" is of one workload: a Job deleted and created again smaller
/// under its name is tried anew, although no capacity moved meanwhile (what else moves the
/// workloads' generation: `the_workloads_generation_moves_only_when_one_changes`).
#[test]
fn a_job_created_again_smaller_under_its_name_is_planned_anew() {
    let mut b = book(2, &job_yaml("huge", 5, 2, RACK));
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let t0 = Instant::now();
    let FilterVerdict::Only { pass, rejected, .. } =
        b.filter(&job_pod("huge", 0, 2), &candidates, t0)
    else {
        panic!("a Job's pod is placed with its Job")
    };
    assert!(
        pass.is_empty() && rejected.reason.contains("5 pods"),
        "{rejected:?}"
    );
    // The same Job, asked again: the remembered answer.
    let again = b.filter(&job_pod("huge", 0, 2), &candidates, t0);
    assert!(matches!(&again, FilterVerdict::Only { pass, .. } if pass.is_empty()));
    // Deleted and created again with 3 pods (6 cpu fit in a rack of 8).
    assert!(b.state.delete_job("default", "huge"));
    let smaller = load(&format!("{}{}", base_yaml(2), job_yaml("huge", 3, 2, RACK)));
    let workload = smaller.jobs[&("default".to_string(), "huge".to_string())].clone();
    b.state
        .apply_job("default", "huge", workload, Incarnation::UNKNOWN);
    let seat = seat_of(&mut b, &job_pod("huge", 0, 2), t0);
    assert!(names.contains(&seat), "{seat}");
    assert_eq!(b.stats().seats_held, 3);
}

#[test]
fn a_lone_pod_is_kept_off_held_capacity() {
    let mut b = book(2, &job_yaml("gang-a", 4, 2, RACK));
    let t0 = Instant::now();
    let a = seats(&mut b, "gang-a", 1, 2, t0);
    let rack = rack_of(&b, &a[0]);
    let held_nodes: Vec<String> = all_nodes(&b)
        .into_iter()
        .filter(|n| n.starts_with("b1-") && rack_of(&b, n) == rack)
        .collect();
    assert_eq!(held_nodes.len(), 2);
    // Only one pod of the gang has come, but its whole rack is held.
    let rejected = lone_rejected(&mut b, &lone_pod("web", 1), t0);
    assert_eq!(rejected, held_nodes);
    // The other rack and the node outside the flavor are open to it.
    assert_eq!(all_nodes(&b).len() - rejected.len(), 3);
}

#[test]
fn a_lone_pod_may_use_what_a_partly_held_node_has_left() {
    // 3 pods x 1 cpu: the plan uses at most 3 cpu of some host, leaving room there.
    let mut b = book(2, &job_yaml("small", 3, 1, RACK));
    let t0 = Instant::now();
    let nodes = seats(&mut b, "small", 3, 1, t0);
    let held = count_by(&nodes);
    for cpu in [1u32, 2, 4] {
        let rejected = lone_rejected(&mut b, &lone_pod(&format!("lone-{cpu}"), cpu), t0);
        let expected: Vec<String> = all_nodes(&b)
            .into_iter()
            .filter(|n| {
                let held_cpu = held.get(n).copied().unwrap_or(0) as i64 * 1000;
                held_cpu > 0 && cpu_allocatable(&b, n) - held_cpu < i64::from(cpu) * 1000
            })
            .collect();
        assert_eq!(rejected, expected, "lone pod of {cpu} cpu, seats {held:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Binding
// ---------------------------------------------------------------------------------------------

#[test]
fn binding_every_pod_turns_held_capacity_into_usage() {
    let extra = format!(
        "{}{}",
        job_yaml("gang-a", 4, 2, RACK),
        job_yaml("gang-b", 4, 2, RACK)
    );
    let mut b = book(2, &extra);
    let t0 = Instant::now();
    let nodes = seats(&mut b, "gang-a", 4, 2, t0);
    for (i, node) in nodes.iter().enumerate() {
        b.bind(
            "default",
            &pod_name("gang-a", i),
            &uid("gang-a", i),
            node,
            t0,
        )
        .unwrap();
    }
    let s = b.stats();
    assert_eq!(
        (s.pods_bound, s.seats_held, s.plans_active, s.plans_made),
        (4, 0, 0, 1)
    );
    for (node, pods) in count_by(&nodes) {
        assert_eq!(cpu_used(&b, &node), pods as i64 * 2000, "{node}");
        assert_eq!(b.node_usage(&node).unwrap()["pods"], pods as i64);
    }
    // Nothing is held any more: a lone pod is turned away from nothing (the scheduler's own
    // resource filter sees the bound pods).
    assert!(lone_rejected(&mut b, &lone_pod("web", 1), t0).is_empty());
    // The bound pods are usage now: the next gang takes the other rack.
    let next = seats(&mut b, "gang-b", 4, 2, t0);
    assert!(
        next.iter()
            .all(|n| rack_of(&b, n) != rack_of(&b, &nodes[0]))
    );
    // A bound pod asked about again is sent to its node only.
    assert_eq!(seat_of(&mut b, &job_pod("gang-a", 2, 2), t0), nodes[2]);
}

#[test]
fn binding_outside_the_seat_is_refused_naming_the_seat() {
    let mut b = book(2, &job_yaml("train", 4, 2, RACK));
    let t0 = Instant::now();
    let seat = seat_of(&mut b, &job_pod("train", 0, 2), t0);
    let other = all_nodes(&b)
        .into_iter()
        .find(|n| n.starts_with("b1-") && *n != seat)
        .unwrap();
    let e = b
        .bind(
            "default",
            &pod_name("train", 0),
            &uid("train", 0),
            &other,
            t0,
        )
        .unwrap_err();
    assert!(e.0.contains(&seat), "{e}");
    assert!(e.0.contains(&other), "{e}");
    let s = b.stats();
    assert_eq!((s.pods_bound, s.seats_held), (0, 4));
    assert_eq!(cpu_used(&b, &other), 0);
    assert_eq!(cpu_used(&b, &seat), 0);
    // The seat itself is still good.
    b.bind(
        "default",
        &pod_name("train", 0),
        &uid("train", 0),
        &seat,
        t0,
    )
    .unwrap();
    assert_eq!(cpu_used(&b, &seat), 2000);
    assert_eq!(b.stats().seats_held, 3);
}

#[test]
fn binding_a_pod_never_filtered_is_refused() {
    let mut b = book(2, &job_yaml("train", 4, 2, RACK));
    let e = b
        .bind(
            "default",
            "stranger",
            "uid-stranger",
            "b1-r1-h1",
            Instant::now(),
        )
        .unwrap_err();
    assert!(e.0.contains("default/stranger"), "{e}");
    assert!(e.0.contains("filter"), "{e}");
    assert_eq!(b.stats().pods_bound, 0);
    assert_eq!(cpu_used(&b, "b1-r1-h1"), 0);
    assert_eq!(b.cluster().bound_pods.len(), 0);
}

#[test]
fn binding_twice_to_the_same_node_counts_once() {
    let mut b = book(2, &job_yaml("train", 4, 2, RACK));
    let t0 = Instant::now();
    let seat = seat_of(&mut b, &job_pod("train", 1, 2), t0);
    b.bind(
        "default",
        &pod_name("train", 1),
        &uid("train", 1),
        &seat,
        t0,
    )
    .unwrap();
    let stats = b.stats();
    let usage = b.node_usage(&seat);
    let bound = b.cluster().bound_pods.len();
    b.bind(
        "default",
        &pod_name("train", 1),
        &uid("train", 1),
        &seat,
        t0,
    )
    .unwrap();
    assert_eq!(b.stats(), stats);
    assert_eq!(b.node_usage(&seat), usage);
    assert_eq!(b.cluster().bound_pods.len(), bound);
    assert_eq!(stats.pods_bound, 1);
    // Moving a bound pod elsewhere is refused.
    let other = all_nodes(&b)
        .into_iter()
        .find(|n| n.starts_with("b1-") && *n != seat)
        .unwrap();
    let e = b
        .bind(
            "default",
            &pod_name("train", 1),
            &uid("train", 1),
            &other,
            t0,
        )
        .unwrap_err();
    assert!(e.0.contains(&seat), "{e}");
    assert_eq!(b.stats(), stats);
}

#[test]
fn a_lone_pod_binds_anywhere_it_was_filtered() {
    let mut b = book(1, "");
    let t0 = Instant::now();
    assert!(lone_rejected(&mut b, &lone_pod("web", 1), t0).is_empty());
    b.bind("default", "web", "uid-web", "web-1", t0).unwrap();
    assert_eq!(cpu_used(&b, "web-1"), 1000);
    assert_eq!(b.stats().pods_bound, 1);
    let e = b
        .bind("default", "web", "uid-web", "no-such-node", t0)
        .unwrap_err();
    assert!(e.0.contains("web-1"), "{e}");
}

#[test]
fn a_bound_pod_is_let_go_a_ttl_after_its_bind() {
    let ttl = Duration::from_secs(60);
    let mut b = book_with_ttl(1, "", ttl);
    let t0 = Instant::now();
    lone_rejected(&mut b, &lone_pod("web", 1), t0);
    b.bind("default", "web", "uid-web", "web-1", t0).unwrap();
    // Within the TTL a retried bind is answered as done, and the pod is still in the book.
    b.bind("default", "web", "uid-web", "web-1", t0 + ttl / 2)
        .unwrap();
    assert_eq!(b.stats().pods_bound, 1);
    lone_rejected(&mut b, &lone_pod("other", 1), t0 + ttl / 2);
    assert!(b.book.pods.contains_key("uid-web"));
    // A TTL after, the book lets it go; its usage stays in the cluster state.
    lone_rejected(&mut b, &lone_pod("other", 1), t0 + ttl * 2);
    assert!(!b.book.pods.contains_key("uid-web"));
    assert_eq!(cpu_used(&b, "web-1"), 1000);
}

#[test]
fn binding_to_a_node_kube_tas_does_not_know_is_refused() {
    let mut b = book(1, "");
    let t0 = Instant::now();
    lone_rejected(&mut b, &lone_pod("web", 1), t0);
    let e = b
        .bind("default", "web", "uid-web", "no-such-node", t0)
        .unwrap_err();
    assert!(e.0.contains("no-such-node"), "{e}");
    assert_eq!(b.stats().pods_bound, 0);
}

/// A deleted node's id is not given back while a live plan's tree lists it (a seat there, or a
/// member an extra seat may take) or a Binding to it is being written: reused meanwhile, a
/// hold or the bind's commit would land on another node.
#[test]
fn a_deleted_nodes_id_is_kept_while_a_plan_or_a_binding_refers_to_it() {
    let mut b = book(2, &job_yaml("train", 4, 2, RACK));
    let t0 = Instant::now();
    let seat = seat_of(&mut b, &job_pod("train", 0, 2), t0);
    let other = all_nodes(&b)
        .into_iter()
        .find(|n| n.starts_with("b1-") && rack_of(&b, n) != rack_of(&b, &seat))
        .unwrap();
    lone_rejected(&mut b, &lone_pod("web", 1), t0);
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "web", "uid-web", "web-1", t0)
        .unwrap();
    for node in [seat.as_str(), other.as_str(), "web-1"] {
        assert!(b.state.delete_node(node));
    }
    assert!(
        b.state.flavor("tas-flavor").is_some(),
        "the state's tree lists none of them"
    );
    let ids = |b: &TestBook| [&seat, &other, "web-1"].map(|n| b.state.node_id(n));
    let known = ids(&b);
    assert!(known.iter().all(Option::is_some));
    let reclaim = |b: &mut TestBook| b.state.reclaim_node_ids(|c| b.book.node_ids_in_use(c));
    assert_eq!(reclaim(&mut b), 0);
    assert_eq!(ids(&b), known);
    // The Binding fails: web-1 is let go.
    b.book.abort_bind(&ticket, "the node is gone");
    assert_eq!(reclaim(&mut b), 1);
    assert_eq!(ids(&b), [known[0], known[1], None]);
    // The plan expires: its tree's nodes are let go too.
    b.book.sweep(&b.state, t0 + TTL + Duration::from_secs(1));
    assert_eq!(b.stats().plans_active, 0);
    assert_eq!(reclaim(&mut b), 2);
    assert_eq!(ids(&b), [None, None, None]);
}

/// A Binding that ends after the book was cleared (leadership lost, then won back) and the pod
/// filtered anew records nothing: its ticket's node is not the book's to count any more (the
/// watch brings the pod where it was bound).
#[test]
fn a_bind_begun_before_the_book_was_cleared_commits_nothing() {
    let mut b = book(1, "");
    let t0 = Instant::now();
    lone_rejected(&mut b, &lone_pod("web", 1), t0);
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "web", "uid-web", "web-1", t0)
        .unwrap();
    b.book.clear();
    lone_rejected(&mut b, &lone_pod("web", 1), t0);
    b.book.commit_bind(&mut b.state, &ticket, t0);
    assert_eq!(cpu_used(&b, "web-1"), 0);
    assert_eq!(b.stats().pods_bound, 0);
    // The pod's own bind, begun now, is counted.
    b.bind("default", "web", "uid-web", "web-1", t0).unwrap();
    assert_eq!(cpu_used(&b, "web-1"), 1000);
}

/// A pod without a seat holds its room from its bind's start to its end: kube-scheduler
/// filters the next pods while a Binding is written, and neither a pod nor a plan may be given
/// the same room meanwhile.
#[test]
fn a_pod_without_a_seat_holds_its_room_while_its_binding_is_written() {
    let mut b = book(1, "");
    let t0 = Instant::now();
    let web = "web-1".to_string();
    // web-1 has 4 cpu: room for one of these pods.
    assert!(!lone_rejected(&mut b, &lone_pod("a", 4), t0).contains(&web));
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "a", "uid-a", "web-1", t0)
        .unwrap();
    assert!(lone_rejected(&mut b, &lone_pod("b", 4), t0).contains(&web));
    // The messages say what holds the room: a pod being bound, not a plan.
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let FilterVerdict::Except { rejected } = b.filter(&lone_pod("b", 4), &candidates, t0) else {
        panic!("a lone pod gets Except");
    };
    let (_, why) = rejected.iter().find(|(i, _)| names[*i] == web).unwrap();
    assert_eq!(
        &*why.reason,
        "node(s) have their free capacity held for 1 pod whose Binding is being written"
    );
    let refused = (b.book)
        .begin_bind(&b.state, "default", "b", "uid-b", "web-1", t0)
        .unwrap_err();
    assert!(
        refused.0.ends_with(
            "no room for pod default/b: its free capacity is held for 1 pod whose \
                        Binding is being written"
        ),
        "{}",
        refused.0
    );
    assert_eq!(b.stats().seats_held, 0, "a pod being bound is not a seat");
    // a's Binding refused: the room is free again.
    b.book.abort_bind(&ticket, "etcd timed out");
    assert!(b.book.held_on(&b.state, "web-1").is_none());
    assert!(!lone_rejected(&mut b, &lone_pod("b", 4), t0).contains(&web));
    let ticket = (b.book)
        .begin_bind(&b.state, "default", "b", "uid-b", "web-1", t0)
        .unwrap();
    b.book.commit_bind(&mut b.state, &ticket, t0);
    // Committed: the pod's usage, nothing held.
    assert_eq!(cpu_used(&b, "web-1"), 4000);
    assert!(b.book.held_on(&b.state, "web-1").is_none());
}

/// A pod the watch shows bound before its Binding's answer is counted beside its seat's hold
/// until the commit, which gives that room back: a gang turned down meanwhile is planned anew
/// at its next pod, not answered with the "does not fit" remembered.
#[test]
fn room_a_commit_gives_back_reaches_a_gang_turned_down_meanwhile() {
    // One rack of two 4-cpu hosts; a filler takes h2 whole.
    let extra = format!(
        "{}{}{}",
        job_yaml("a", 1, 2, RACK),
        job_yaml("b", 1, 2, RACK),
        filler_pod_yaml("busy", 4, "b1-r1-h2")
    );
    let mut b = book(1, &extra);
    let t0 = Instant::now();
    let seat = seat_of(&mut b, &job_pod("a", 0, 2), t0);
    assert_eq!(seat, "b1-r1-h1");
    let ticket = (b.book)
        .begin_bind(
            &b.state,
            "default",
            &pod_name("a", 0),
            &uid("a", 0),
            &seat,
            t0,
        )
        .unwrap();
    let shown = load(&bound_job_pod_yaml("a", 0, 2, &seat));
    b.state.apply_bound_pod(&shown.bound_pods[0]);
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdict = b.filter(&job_pod("b", 0, 2), &candidates, t0);
    assert!(
        matches!(&verdict, FilterVerdict::Only { pass, .. } if pass.is_empty()),
        "h1 counts a-0 twice until the commit: {verdict:?}"
    );
    b.book.commit_bind(&mut b.state, &ticket, t0);
    assert_eq!(cpu_used(&b, &seat), 2000);
    assert_eq!(seat_of(&mut b, &job_pod("b", 0, 2), t0), seat);
}

// ---------------------------------------------------------------------------------------------
// Expiry
// ---------------------------------------------------------------------------------------------

#[test]
fn a_plan_whose_pods_never_come_expires_and_gives_its_capacity_back() {
    // One rack: gang-a's plan holds all of it, so gang-b cannot fit until it expires.
    let extra = format!(
        "{}{}",
        job_yaml("gang-a", 4, 2, RACK),
        job_yaml("gang-b", 4, 2, RACK)
    );
    let mut b = book(1, &extra);
    let t0 = Instant::now();
    let a = seat_of(&mut b, &job_pod("gang-a", 0, 2), t0);
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let refused = b.filter(
        &job_pod("gang-b", 0, 2),
        &candidates,
        t0 + Duration::from_secs(1),
    );
    assert!(
        matches!(&refused, FilterVerdict::Only { pass, .. } if pass.is_empty()),
        "{refused:?}"
    );

    // Just before the TTL nothing expires.
    let before = t0 + TTL - Duration::from_secs(1);
    assert_eq!(
        lone_rejected(&mut b, &lone_pod("early", 1), before).len(),
        2
    );
    assert_eq!(b.stats().plans_expired, 0);

    // Another pod's filter call after the TTL sweeps the plan away.
    let after = t0 + TTL + Duration::from_secs(1);
    assert!(lone_rejected(&mut b, &lone_pod("late", 1), after).is_empty());
    let s = b.stats();
    assert_eq!(
        (s.plans_expired, s.seats_held, s.plans_active),
        (1, 0, 0),
        "{s:?}"
    );

    // The capacity is free again: gang-b (refused before) now gets the rack.
    let later = after + Duration::from_secs(1);
    let b_nodes = seats(&mut b, "gang-b", 4, 2, later);
    assert!(b_nodes.iter().all(|n| rack_of(&b, n) == rack_of(&b, &a)));
    let s = b.stats();
    assert_eq!((s.plans_made, s.plans_active, s.seats_held), (2, 1, 4));
}

#[test]
fn a_plan_whose_pods_keep_coming_does_not_expire() {
    let mut b = book(1, &job_yaml("gang-a", 4, 2, RACK));
    let t0 = Instant::now();
    let first = seat_of(&mut b, &job_pod("gang-a", 0, 2), t0);
    let mid = t0 + TTL - Duration::from_secs(5);
    seat_of(&mut b, &job_pod("gang-a", 1, 2), mid);
    // TTL after the first call, but not after the last one.
    let later = t0 + TTL + Duration::from_secs(5);
    assert_eq!(lone_rejected(&mut b, &lone_pod("web", 1), later).len(), 2);
    assert_eq!(b.stats().plans_expired, 0);
    // The plan is the same one: index 2 takes the rack's other host (seats h1, h1, h2, h2).
    assert!(first.ends_with("-h1"), "{first}");
    assert_eq!(seat_of(&mut b, &job_pod("gang-a", 2, 2), later), "b1-r1-h2");
    assert_eq!(b.stats().plans_made, 1);
}

#[test]
fn a_filtered_pod_can_bind_while_its_plan_is_alive() {
    // Pod 0 is filtered early; its siblings keep the plan alive; it binds after one TTL
    // (kube-scheduler may hold a pod in Permit while the rest of a gang arrives).
    let mut b = book(1, &job_yaml("gang-a", 4, 2, RACK));
    let t0 = Instant::now();
    let seat0 = seat_of(&mut b, &job_pod("gang-a", 0, 2), t0);
    let mid = t0 + TTL - Duration::from_secs(5);
    for i in 1..4 {
        seat_of(&mut b, &job_pod("gang-a", i, 2), mid);
    }
    let later = t0 + TTL + Duration::from_secs(5);
    let bound = b.bind(
        "default",
        &pod_name("gang-a", 0),
        &uid("gang-a", 0),
        &seat0,
        later,
    );
    // The plan is alive (touched TTL - 5s ago) and pod 0 still holds its seat in it.
    let s = b.stats();
    assert_eq!((s.plans_expired, s.plans_active), (0, 1), "{s:?}");
    assert!(
        bound.is_ok(),
        "pod 0 holds seat {seat0} in a live plan, yet its bind is refused: {bound:?}"
    );
    assert_eq!((s.pods_bound, s.seats_held), (1, 3), "{s:?}");
    assert_eq!(cpu_used(&b, &seat0), 2000);
}

// ---------------------------------------------------------------------------------------------
// Restart safety
// ---------------------------------------------------------------------------------------------

#[test]
fn after_a_restart_the_rest_of_a_gang_joins_its_bound_half() {
    // Job `resume`: 6 pods x 1 cpu, rack required. Before the restart pods 0-2 were bound in
    // rack r3 (2 on h1, 1 on h2). Rack r1 is the tightest fit for 3 pods (4 cpu free, a
    // filler pod uses h1), r2 is empty, r3 has 5 cpu free: a plan that forgot the bound pods
    // would pick r1.
    let extra = format!(
        "{}{}{}{}{}",
        job_yaml("resume", 6, 1, RACK),
        bound_job_pod_yaml("resume", 0, 1, "b1-r3-h1"),
        bound_job_pod_yaml("resume", 1, 1, "b1-r3-h1"),
        bound_job_pod_yaml("resume", 2, 1, "b1-r3-h2"),
        filler_pod_yaml("filler", 4, "b1-r1-h1"),
    );
    let mut b = book(3, &extra);
    assert_eq!(cpu_used(&b, "b1-r3-h1"), 2000);
    let t0 = Instant::now();
    let rest: Vec<String> = (3..6)
        .map(|i| seat_of(&mut b, &job_pod("resume", i, 1), t0))
        .collect();
    // Only the three missing pods are planned.
    let s = b.stats();
    assert_eq!((s.plans_made, s.seats_held), (1, 3), "{s:?}");
    for n in &rest {
        assert_eq!(rack_of(&b, n), "b1/r3", "{rest:?}");
    }
    // Nothing double-booked: seats plus bound pods fit every host.
    let per_node = count_by(&rest);
    for (node, pods) in &per_node {
        let total = cpu_used(&b, node) + *pods as i64 * 1000;
        assert!(total <= cpu_allocatable(&b, node), "{node}: {per_node:?}");
    }
    for (k, (i, node)) in (3..6).zip(&rest).enumerate() {
        b.bind(
            "default",
            &pod_name("resume", i),
            &uid("resume", i),
            node,
            t0,
        )
        .unwrap_or_else(|e| panic!("bind #{k}: {e}"));
    }
    for node in ["b1-r3-h1", "b1-r3-h2"] {
        assert!(cpu_used(&b, node) <= cpu_allocatable(&b, node), "{node}");
    }
    assert_eq!(cpu_used(&b, "b1-r3-h1") + cpu_used(&b, "b1-r3-h2"), 6000);
    let s = b.stats();
    assert_eq!((s.pods_bound, s.seats_held, s.plans_active), (3, 0, 0));
}

#[test]
fn after_a_restart_the_rest_never_lands_on_capacity_the_bound_pods_use() {
    // Job `pair`: 4 pods x 2 cpu, a whole rack. Pods 0 and 1 were bound on b1-r2-h1 (now
    // full); the other two fit only on b1-r2-h2.
    let extra = format!(
        "{}{}{}",
        job_yaml("pair", 4, 2, RACK),
        bound_job_pod_yaml("pair", 0, 2, "b1-r2-h1"),
        bound_job_pod_yaml("pair", 1, 2, "b1-r2-h1"),
    );
    let mut b = book(2, &extra);
    assert_eq!(cpu_used(&b, "b1-r2-h1"), 4000);
    let t0 = Instant::now();
    for i in 2..4 {
        let seat = seat_of(&mut b, &job_pod("pair", i, 2), t0);
        assert_eq!(seat, "b1-r2-h2", "pod {i}");
        b.bind("default", &pod_name("pair", i), &uid("pair", i), &seat, t0)
            .unwrap();
    }
    assert_eq!(cpu_used(&b, "b1-r2-h1"), 4000);
    assert_eq!(cpu_used(&b, "b1-r2-h2"), 4000);
    let s = b.stats();
    assert_eq!((s.plans_made, s.pods_bound, s.seats_held), (1, 2, 0));
    // Rack r1 was never touched.
    assert_eq!(cpu_used(&b, "b1-r1-h1") + cpu_used(&b, "b1-r1-h2"), 0);
}

#[test]
fn a_partly_bound_plan_that_expires_is_replanned_beside_its_bound_pods() {
    // Pods 0 and 1 of `train` bind, 2 and 3 stall past the TTL: the open seats go back. Then
    // ordinary pods fill the other rack down to exactly 2 free cpu (the tightest fit for the
    // two missing pods), yet when pod 2 finally comes the rest is planned again inside the
    // rack of pods 0 and 1.
    let mut b = book(2, &job_yaml("train", 4, 1, RACK));
    let t0 = Instant::now();
    let first: Vec<String> = (0..2)
        .map(|i| seat_of(&mut b, &job_pod("train", i, 1), t0))
        .collect();
    let home = rack_of(&b, &first[0]);
    for (i, node) in first.iter().enumerate() {
        b.bind("default", &pod_name("train", i), &uid("train", i), node, t0)
            .unwrap();
    }
    assert_eq!(b.stats().seats_held, 2);

    // A lone pod's call after the TTL sweeps the plan; lone pods then fill the other rack.
    let after = t0 + TTL + Duration::from_secs(1);
    let others: Vec<String> = all_nodes(&b)
        .into_iter()
        .filter(|n| n.starts_with("b1-") && rack_of(&b, n) != home)
        .collect();
    for (node, cpu) in others.iter().zip([4u32, 2]) {
        let name = format!("lone-{node}");
        assert!(lone_rejected(&mut b, &lone_pod(&name, cpu), after).is_empty());
        b.bind("default", &name, &format!("uid-{name}"), node, after)
            .unwrap();
    }
    let s = b.stats();
    assert_eq!(
        (s.plans_expired, s.seats_held, s.pods_bound),
        (1, 0, 4),
        "{s:?}"
    );

    let later = after + Duration::from_secs(1);
    let rest: Vec<String> = (2..4)
        .map(|i| seat_of(&mut b, &job_pod("train", i, 1), later))
        .collect();
    assert!(
        rest.iter().all(|n| rack_of(&b, n) == home),
        "{first:?} then {rest:?}"
    );
    let s = b.stats();
    assert_eq!((s.plans_made, s.seats_held), (2, 2), "{s:?}");
}

#[test]
fn without_a_hostname_level_a_seat_is_a_rack() {
    // Topology block > rack: a seat is a rack; the pod may go to any of its hosts, and the
    // rack's capacity is what is held.
    let yaml = base_yaml(2).replace("  - nodeLabel: kubernetes.io/hostname\n", "")
        + &job_yaml("train", 4, 2, RACK);
    let mut b = TestBook::new(load(&yaml), TTL);
    let t0 = Instant::now();
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdict = b.filter(&job_pod("train", 0, 2), &candidates, t0);
    let FilterVerdict::Only { pass, rejected, .. } = verdict else {
        panic!("{verdict:?}")
    };
    let passed: Vec<&str> = pass.iter().map(|&i| candidates[i]).collect();
    assert_eq!(passed.len(), 2, "{passed:?} {rejected:?}");
    assert_eq!(rack_of(&b, passed[0]), rack_of(&b, passed[1]));
    assert!(rejected.reason.contains("rack"), "{rejected:?}");
    // The whole rack is held: a lone pod is kept off both its hosts.
    let mut held: Vec<String> = passed.iter().map(|s| s.to_string()).collect();
    held.sort();
    let mut off = lone_rejected(&mut b, &lone_pod("web", 1), t0);
    off.sort();
    assert_eq!(off, held);
    // Binding on either host of the seat's rack is fine; elsewhere is not.
    let outside = names
        .iter()
        .find(|n| n.starts_with("b1-") && !held.contains(n))
        .unwrap();
    let e = b
        .bind(
            "default",
            &pod_name("train", 0),
            &uid("train", 0),
            outside,
            t0,
        )
        .unwrap_err();
    assert!(e.0.contains(passed[0]) && e.0.contains(passed[1]), "{e}");
    b.bind(
        "default",
        &pod_name("train", 0),
        &uid("train", 0),
        passed[1],
        t0,
    )
    .unwrap();
    assert_eq!(cpu_used(&b, passed[1]), 2000);
    assert_eq!(b.stats().seats_held, 3);
}

/// A second flavor over the same nodes whose Topology stops at the rack (seats are racks),
/// with its own ClusterQueue and LocalQueue `rack-queue`.
const RACK_FLAVOR_YAML: &str = r#"---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: racks
spec:
  levels:
  - nodeLabel: cloud.provider.com/topology-block
  - nodeLabel: cloud.provider.com/topology-rack
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: rack-flavor
spec:
  topologyName: racks
  nodeLabels:
    node-group: tas
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: rack-cluster-queue
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: rack-flavor
      resources:
      - name: cpu
        nominalQuota: '1000'
      - name: memory
        nominalQuota: 4000Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: rack-queue
  namespace: default
spec:
  clusterQueue: rack-cluster-queue
"#;

#[test]
fn a_hold_on_a_rack_seat_is_kept_from_a_plan_on_another_flavor_over_the_same_nodes() {
    // One rack of 2 hosts x 4 cpu. `wide` (rack-flavor, seats are racks) takes the whole rack;
    // `small` (tas-flavor, hostname seats) needs one cpu in one rack: it must not fit while
    // `wide` holds the rack, and must fit once `wide`'s plan expires.
    let yaml = base_yaml(1)
        + RACK_FLAVOR_YAML
        + &job_yaml("wide", 8, 1, RACK).replace("tas-user-queue", "rack-queue")
        + &job_yaml("small", 1, 1, RACK);
    let mut b = TestBook::new(load(&yaml), TTL);
    let t0 = Instant::now();
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdict = b.filter(&job_pod("wide", 0, 1), &candidates, t0);
    let FilterVerdict::Only { pass, .. } = &verdict else {
        panic!("{verdict:?}")
    };
    assert_eq!(pass.len(), 2, "a rack seat passes both hosts: {verdict:?}");
    // Both hosts are fully held (4 seats on each), whichever flavor asks.
    for host in ["b1-r1-h1", "b1-r1-h2"] {
        let held = b.book.held_on(&b.state, host).unwrap();
        assert_eq!((held["cpu"], held[PODS_KEY]), (4000, 4), "{host}");
    }
    let verdict = b.filter(&job_pod("small", 0, 1), &candidates, t0);
    let FilterVerdict::Only { pass, rejected, .. } = &verdict else {
        panic!("{verdict:?}")
    };
    assert!(pass.is_empty(), "small must not fit: {verdict:?}");
    assert!(
        rejected.reason.contains("Job default/small"),
        "{rejected:?}"
    );
    assert!(!lone_rejected(&mut b, &lone_pod("web", 1), t0).is_empty());
    // The rack seat binds on either host; the hold follows the pod.
    b.bind(
        "default",
        &pod_name("wide", 0),
        &uid("wide", 0),
        "b1-r1-h2",
        t0,
    )
    .unwrap();
    let held: i64 = ["b1-r1-h1", "b1-r1-h2"]
        .iter()
        .map(|h| b.book.held_on(&b.state, h).map_or(0, |r| r["cpu"]))
        .sum();
    assert_eq!(held + cpu_used(&b, "b1-r1-h2"), 8000);
    assert!(
        cpu_used(&b, "b1-r1-h2") + b.book.held_on(&b.state, "b1-r1-h2").unwrap()["cpu"] <= 4000
    );
    // Once `wide` expires, `small` fits.
    let later = t0 + TTL + Duration::from_secs(1);
    assert_eq!(seats(&mut b, "small", 1, 1, later).len(), 1);
}

const PODS_KEY: &str = crate::topology::resources::PODS;

#[test]
fn notices_say_what_happened_to_a_group_once() {
    // One rack of 8 cpu: `fits` (4 x 1 cpu) is planned, `huge` (16 x 1 cpu) never fits.
    let yaml = base_yaml(1) + &job_yaml("fits", 4, 1, RACK) + &job_yaml("huge", 16, 1, RACK);
    let mut b = TestBook::new(load(&yaml), TTL);
    let t0 = Instant::now();
    seat_of(&mut b, &job_pod("fits", 0, 1), t0);
    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].reason, "TopologyPlanned");
    assert!(!notices[0].warning);
    assert_eq!(notices[0].regarding.kind.as_deref(), Some("Job"));
    assert_eq!(notices[0].regarding.uid.as_deref(), Some("job-uid-fits"));
    assert!(
        notices[0]
            .note
            .contains("4 pod(s) of Job default/fits in rack r1"),
        "{notices:?}"
    );
    // Another seat of the same plan: nothing new to say.
    seat_of(&mut b, &job_pod("fits", 1, 1), t0);
    assert!(b.book.take_notices().is_empty());
    // A group that does not fit is said once, not on every retry.
    let names = all_nodes(&b);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    for _ in 0..3 {
        let _ = b.filter(&job_pod("huge", 0, 1), &candidates, t0);
    }
    let notices = b.book.take_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].reason, "TopologyDoesNotFit");
    assert!(
        notices[0].warning && notices[0].note.contains("16 pods"),
        "{notices:?}"
    );
    // The first plan's pods stop coming: it expires, and says how many seats it gave back.
    let later = t0 + TTL + Duration::from_secs(1);
    let _ = b.filter(&lone_pod("web", 1), &candidates, later);
    let notices = b.book.take_notices();
    let expired: Vec<&Notice> = notices
        .iter()
        .filter(|n| n.reason == "TopologyPlanExpired")
        .collect();
    assert_eq!(expired.len(), 1, "{notices:?}");
    assert!(expired[0].note.contains("2 seat(s)"), "{notices:?}");
}

mod held_messages;
mod hot_swap;
mod known;
mod kueue_takeover;
mod quiet_seats;
mod scheduling;

#[test]
fn positions_compare_whole_names_whatever_their_tails() {
    let candidates = [
        "gke-pool-a-0001",
        "gke-pool-b-0001",
        "n1",
        "",
        "x-n1",
        "gke-pool-a-0001",
    ];
    assert_eq!(positions(&candidates, &["gke-pool-a-0001"]), vec![0, 5]);
    assert_eq!(positions(&candidates, &["n1"]), vec![2]);
    assert_eq!(positions(&candidates, &[""]), vec![3]);
    assert_eq!(
        positions(&candidates, &["n1", "gke-pool-b-0001"]),
        vec![1, 2]
    );
    assert!(positions(&candidates, &["gke-pool-c-0001", "1"]).is_empty());
    assert_eq!(tail("ab"), u64::from_le_bytes(*b"ab\0\0\0\0\0\0"));
}
