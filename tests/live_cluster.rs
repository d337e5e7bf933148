//! Live mode against the in-process fake API server (real list/watch JSON, resourceVersions,
//! 410 Gone, Status errors, the Binding subresource, server-side apply conflicts): the watches
//! feed the shared state, the extender writes Bindings, the webhook reads the live state, and
//! leader election keeps one planner.

#[path = "common/fake_apiserver.rs"]
mod fake_apiserver;

use std::time::{Duration, Instant};

use fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube_tas::admission::{Decision, Webhook};
use kube_tas::cluster::WorkloadKind;
use kube_tas::cluster::group::GroupKey;
use kube_tas::cluster::live::leader::{self, ElectionConfig};
use kube_tas::cluster::live::{Leadership, Watches, unconfirmed};
use kube_tas::cluster::state::{ClusterState, SharedState};
use kube_tas::extender::{Binder, Extender, ExtenderBindingArgs, quiet_seats};
use kube_tas::plans::PlanBook;
use kube_tas::topology::FeatureGates;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BLOCK: &str = "cloud.provider.com/topology-block";
const RACK: &str = "cloud.provider.com/topology-rack";
const HOST: &str = "kubernetes.io/hostname";

// ---------------------------------------------------------------------------------------------
// Objects as the API server holds them
// ---------------------------------------------------------------------------------------------

fn node(name: &str, rack: &str, cpu: u32, ready: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {BLOCK: "b1", RACK: rack, HOST: name,
            "node-group": "tas"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu.to_string(), "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
        }
    })
}

fn kueue_objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "tas-flavor"},
            "spec": {"topologyName": "default", "nodeLabels": {"node-group": "tas"}}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "tas-cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                "flavors": [{"name": "tas-flavor", "resources": [{"name": "cpu",
                    "nominalQuota": "1000"}]}]}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "tas-queue", "namespace": "default"},
            "spec": {"clusterQueue": "tas-cq"}}),
    ]
}

/// An Indexed Job of `n` pods of `cpu` cpu, all in one rack (required).
fn job(name: &str, n: u32, cpu: u32) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": format!("job-uid-{name}"),
            "labels": {"kueue.x-k8s.io/queue-name": "tas-queue"}},
        "spec": {"parallelism": n, "completions": n, "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "w",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu.to_string()}}}]}}}
    })
}

/// Pod `index` of Job `job` (as the Job controller creates it), bound to `node` and Running
/// when given.
fn job_pod(job: &str, index: u32, cpu: u32, node: Option<&str>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{job}-{index}"), "namespace": "default",
            "uid": format!("uid-{job}-{index}"),
            "labels": {"batch.kubernetes.io/job-completion-index": index.to_string()},
            "annotations": {"batch.kubernetes.io/job-completion-index": index.to_string(),
                "kueue.x-k8s.io/podset-required-topology": RACK},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                "uid": format!("job-uid-{job}"), "controller": true}]
        },
        "spec": {"containers": [{"name": "w", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu.to_string()}}}],
            "nodeSelector": {"node-group": "tas"}},
        "status": {"phase": "Pending"}
    });
    if let Some(n) = node {
        pod["spec"]["nodeName"] = json!(n);
        pod["status"]["phase"] = json!("Running");
    }
    pod
}

/// A JobSet `name` with a driver (1 pod of `driver_cpu`) and `workers` pods of 1 cpu, both
/// PodSets required in one rack and joined by `podset-group-name`.
fn jobset(name: &str, driver_cpu: u32, workers: u32) -> Value {
    let rj = |rj: &str, n: u32, cpu: u32| {
        json!({"name": rj, "replicas": 1, "template": {"spec": {
            "parallelism": n, "completions": n, "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK,
                    "kueue.x-k8s.io/podset-group-name": "gang"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "w",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu.to_string()}}}]}}}}})
    };
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default", "uid": format!("js-uid-{name}"),
            "labels": {"kueue.x-k8s.io/queue-name": "tas-queue"}},
        "spec": {"replicatedJobs": [rj("driver", 1, driver_cpu), rj("workers", workers, 1)]}
    })
}

/// Pod `index` of replicated Job `rj` of JobSet `js` (Job index 0), as the Job controller
/// creates it from the JobSet's Job.
fn jobset_pod(js: &str, rj: &str, index: u32, cpu: u32) -> Value {
    let job = format!("{js}-{rj}-0");
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{job}-{index}"), "namespace": "default",
            "uid": format!("uid-{job}-{index}"),
            "labels": {"jobset.sigs.k8s.io/jobset-name": js,
                "jobset.sigs.k8s.io/replicatedjob-name": rj,
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-completion-index": index.to_string()},
            "annotations": {"batch.kubernetes.io/job-completion-index": index.to_string(),
                "kueue.x-k8s.io/podset-required-topology": RACK,
                "kueue.x-k8s.io/podset-group-name": "gang"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                "uid": format!("job-uid-{job}"), "controller": true}]
        },
        "spec": {"containers": [{"name": "w", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu.to_string()}}}],
            "nodeSelector": {"node-group": "tas"}},
        "status": {"phase": "Pending"}
    })
}

/// Pending pod `name` of plain pod group `group` of `total` pods, of `cpu` cpu, required in
/// one rack.
fn group_pod(group: &str, name: &str, total: u32, cpu: u32) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "labels": {"kueue.x-k8s.io/pod-group-name": group,
                "kueue.x-k8s.io/queue-name": "tas-queue"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": total.to_string(),
                "kueue.x-k8s.io/podset-required-topology": RACK}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu.to_string()}}}],
            "nodeSelector": {"node-group": "tas"}},
        "status": {"phase": "Pending"}
    })
}

fn lone_pod(name: &str, cpu: u32, node: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]},
        "status": {"phase": phase}
    })
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A fake API server with `objects`, watched into a fresh state.
struct Live {
    fake: FakeApiServer,
    state: SharedState,
    watches: Watches,
}

impl Live {
    async fn start(fake: FakeApiServer) -> Self {
        let state = SharedState::new(ClusterState::new());
        let watches = Watches::start(fake.client(), state.clone());
        let live = Self {
            fake,
            state,
            watches,
        };
        live.until("every kind is synced", |_| true).await;
        live
    }

    /// Waits (at most 10 s) for the watches to be synced and `cond` to hold.
    async fn until(&self, what: &str, cond: impl Fn(&ClusterState) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.watches.status().synced() && cond(&self.state.read()) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn extender(&self) -> Extender {
        Extender::new(
            self.state.clone(),
            PlanBook::new(FeatureGates::default(), Duration::from_secs(60)),
        )
        .with_binder(Binder::Api(self.fake.client()))
    }

    /// The pod as the API server holds it, as kube-scheduler sends it.
    fn pod(&self, name: &str) -> Pod {
        let v = self
            .fake
            .get("v1", "Pod", Some("default"), name)
            .unwrap_or_else(|| panic!("pod {name} is not in the fake API server"));
        serde_json::from_value(v).unwrap()
    }
}

fn with_objects(objects: impl IntoIterator<Item = Value>) -> FakeApiServer {
    let fake = FakeApiServer::new();
    for o in objects {
        fake.apply(o);
    }
    fake
}

/// Two racks: r1 = h1, h2 (4 cpu each); r2 = h3, h4 (8 cpu each).
fn two_racks() -> Vec<Value> {
    let mut objects = kueue_objects();
    objects.extend([
        node("h1", "r1", 4, true),
        node("h2", "r1", 4, true),
        node("h3", "r2", 8, true),
        node("h4", "r2", 8, true),
    ]);
    objects
}

fn cpu(state: &ClusterState, node: &str) -> i64 {
    state
        .node_usage(node)
        .and_then(|u| u.get("cpu").copied())
        .unwrap_or(0)
}

/// The node(s) filter passes for `pod` among every node.
fn filter(extender: &Extender, pod: &Pod) -> Result<Vec<String>, String> {
    let names: Vec<String> = extender
        .state()
        .read()
        .nodes()
        .map(|(_, n)| n.name.clone())
        .collect();
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let result = extender.filter_cached(pod, &candidates);
    if !result.error.is_empty() {
        return Err(result.error);
    }
    Ok(result.node_names.unwrap_or_default())
}

fn rack_of(state: &ClusterState, node: &str) -> String {
    state.node_by_name(node).unwrap().labels[RACK].to_string()
}

fn binding_args(pod: &Pod, node: &str) -> ExtenderBindingArgs {
    ExtenderBindingArgs {
        pod_name: pod.metadata.name.clone().unwrap(),
        pod_namespace: "default".into(),
        pod_uid: pod.metadata.uid.clone().unwrap(),
        node: node.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_sync_then_node_and_pod_changes_move_free_capacity() {
    let mut objects = two_racks();
    objects.push(lone_pod("web", 2, "h1", "Running"));
    objects.push(lone_pod("done", 3, "h2", "Succeeded"));
    objects.push(job("train", 2, 1));
    let live = Live::start(with_objects(objects)).await;
    {
        let s = live.state.read();
        assert_eq!(s.node_count(), 4);
        assert_eq!(cpu(&s, "h1"), 2000, "a running pod is usage");
        assert_eq!(cpu(&s, "h2"), 0, "a finished pod is not");
        assert!(s.job("default", "train").is_some());
        assert!(
            s.kueue()
                .local_queues
                .contains_key(&("default".into(), "tas-queue".into()))
        );
        let f = s.flavor("tas-flavor").unwrap();
        assert_eq!(f.tree.leaves().len(), 4);
    }
    for k in live.watches.status().kinds() {
        assert!(k.is_synced() && k.is_served(), "{}", k.name);
    }
    // The pod finishes: its cpu comes back.
    live.fake.apply(lone_pod("web", 2, "h1", "Succeeded"));
    live.until("web's usage is given back", |s| cpu(s, "h1") == 0)
        .await;
    // A node goes NotReady: out of the flavor's tree; Ready again: back in.
    live.fake.apply(node("h2", "r1", 4, false));
    live.until("h2 leaves the tree", |s| {
        s.flavor("tas-flavor")
            .unwrap()
            .tree
            .leaf_of_node("h2")
            .is_none()
    })
    .await;
    live.fake.apply(node("h2", "r1", 4, true));
    live.until("h2 is back", |s| {
        s.flavor("tas-flavor")
            .unwrap()
            .tree
            .leaf_of_node("h2")
            .is_some()
    })
    .await;
    // More allocatable: free capacity follows.
    live.fake.apply(node("h1", "r1", 6, true));
    live.until("h1 has 6 cpu", |s| {
        let f = s.flavor("tas-flavor").unwrap();
        let leaf = f.tree.leaf_of_node("h1").unwrap();
        let free = s.free_capacity(&f, |_| None);
        free.remaining(leaf)[f.tree.resource_id("cpu").unwrap()] == 6000
    })
    .await;
    // A deleted node is gone.
    live.fake.delete("v1", "Node", None, "h4");
    live.until("h4 is deleted", |s| s.node_by_name("h4").is_none())
        .await;
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_relabelled_into_another_rack_moves_in_the_tree() {
    let live = Live::start(with_objects(two_racks())).await;
    let path = |s: &ClusterState| {
        let f = s.flavor("tas-flavor").unwrap();
        let leaf = f.tree.leaf_of_node("h2").unwrap();
        f.tree.id(leaf)
    };
    assert_eq!(path(&live.state.read()), "b1,r1,h2");
    live.fake.apply(node("h2", "r2", 4, true));
    live.until("h2 sits in r2", |s| path(s) == "b1,r2,h2").await;
    live.watches.stop().await;
}

/// Two racks and a Job "train" of two 4-CPU pods, both pending.
fn train_of_two() -> Vec<Value> {
    let mut objects = two_racks();
    objects.push(job("train", 2, 4));
    objects.push(job_pod("train", 0, 4, None));
    objects.push(job_pod("train", 1, 4, None));
    objects
}

/// A bind whose request is dropped while the Binding is written (kube-scheduler restarted,
/// its connection closed) still ends: the API server's answer is recorded, so the seat is not
/// left begun for good (its plan held, the pod refused as "being bound" at every retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_dropped_while_the_binding_is_written_still_ends() {
    let live = Live::start(with_objects(train_of_two())).await;
    let extender = live.extender();
    let p0 = live.pod("train-0");
    let seat = filter(&extender, &p0).unwrap();
    assert_eq!(seat.len(), 1, "{seat:?}");
    let gate = live.fake.hold_bindings();
    let args = binding_args(&p0, &seat[0]);
    let dropped = tokio::time::timeout(Duration::from_millis(300), extender.bind_and_write(&args));
    let dropped = dropped.await;
    assert!(
        dropped.is_err(),
        "the Binding is held: the bind cannot have ended"
    );
    assert_eq!(
        extender.stats().seats_held,
        2,
        "both seats held, one being bound"
    );
    gate.add_permits(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while extender.stats().seats_held != 1 || live.fake.bindings().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the dropped bind never ended: {:?}, {} Bindings",
            extender.stats(),
            live.fake.bindings().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(live.fake.bindings().len(), 1);
    assert_eq!(cpu(&extender.state().read(), &seat[0]), 4000, "recorded");
    // kube-scheduler's retry of the same bind is answered as done, not refused.
    let again = extender.bind_and_write(&binding_args(&p0, &seat[0])).await;
    assert_eq!(again.error, "", "{again:?}");
    assert_eq!(live.fake.bindings().len(), 1);
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_posts_the_binding_and_a_refused_binding_frees_the_seat() {
    let live = Live::start(with_objects(train_of_two())).await;
    let extender = live.extender();

    let p0 = live.pod("train-0");
    let seat0 = filter(&extender, &p0).unwrap();
    assert_eq!(seat0.len(), 1, "{seat0:?}");
    let bound = extender.bind_and_write(&binding_args(&p0, &seat0[0])).await;
    assert_eq!(bound.error, "", "{bound:?}");
    let bindings = live.fake.bindings();
    assert_eq!(bindings.len(), 1);
    assert_eq!(bindings[0]["metadata"]["name"], "train-0");
    assert_eq!(bindings[0]["metadata"]["uid"], "uid-train-0");
    assert_eq!(bindings[0]["target"]["kind"], "Node");
    assert_eq!(bindings[0]["target"]["name"], seat0[0].as_str());
    // Recorded at once (before the watch), then confirmed by the watch without counting twice.
    assert_eq!(cpu(&extender.state().read(), &seat0[0]), 4000);
    live.until("the watch shows train-0 bound", |s| {
        s.pod("uid-train-0").is_some_and(|p| !p.assumed)
    })
    .await;
    assert_eq!(cpu(&live.state.read(), &seat0[0]), 4000);

    // The API server refuses the next Binding: the error says why, the seat is free again.
    live.fake
        .fail_bindings(1, 500, "InternalError", "etcdserver: request timed out");
    let p1 = live.pod("train-1");
    let seat1 = filter(&extender, &p1).unwrap();
    assert_eq!(seat1.len(), 1);
    assert_eq!(
        rack_of(&live.state.read(), &seat0[0]),
        rack_of(&live.state.read(), &seat1[0])
    );
    let refused = extender.bind_and_write(&binding_args(&p1, &seat1[0])).await;
    assert!(
        refused.error.contains("etcdserver: request timed out") && refused.error.contains("500"),
        "{refused:?}"
    );
    assert_eq!(cpu(&live.state.read(), &seat1[0]), 0, "nothing recorded");
    assert_eq!(extender.stats().binds_failed, 1);
    assert_eq!(
        extender.stats().seats_held,
        1,
        "the seat is open and still held"
    );
    // The scheduler retries: the same seat, and this time the Binding is written.
    assert_eq!(filter(&extender, &p1).unwrap(), seat1);
    let bound = extender.bind_and_write(&binding_args(&p1, &seat1[0])).await;
    assert_eq!(bound.error, "", "{bound:?}");
    assert_eq!(live.fake.bindings().len(), 2);
    assert_eq!(extender.stats().seats_held, 0);

    // A pod already bound by someone else: the API server's 409 comes back and nothing stays.
    live.fake.apply(lone_pod("other", 1, "h3", "Running"));
    live.until("other is bound", |s| s.pod("uid-other").is_some())
        .await;
    let mut other = live.pod("other");
    other.spec.as_mut().unwrap().node_name = None;
    let before = cpu(&live.state.read(), "h4");
    assert!(filter(&extender, &other).is_ok());
    let conflict = extender.bind_and_write(&binding_args(&other, "h4")).await;
    assert!(conflict.error.contains("409"), "{conflict:?}");
    assert_eq!(cpu(&live.state.read(), "h4"), before);

    // A pod outside any group that does not fit the node is refused before any write.
    live.fake.apply(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "big", "namespace": "default", "uid": "uid-big"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": "9"}}}]},
        "status": {"phase": "Pending"}
    }));
    let big = live.pod("big");
    assert!(filter(&extender, &big).is_ok());
    let writes = live.fake.bindings().len();
    let too_big = extender.bind_and_write(&binding_args(&big, "h4")).await;
    assert!(too_big.error.contains("no room"), "{too_big:?}");
    assert_eq!(live.fake.bindings().len(), writes);
    live.watches.stop().await;
}

/// A Binding stored whose answer is an error (etcd committed after the API server stopped
/// waiting; a connection lost): the pod read back is bound to its seat's node, so the bind is
/// done, not refused: its seat is not opened again (held beside the pod's usage, taken by a
/// replacement with no room) and kube-scheduler is not told to retry a pod that runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_stored_but_answered_with_an_error_is_a_bind_done() {
    let live = Live::start(with_objects(train_of_two())).await;
    let extender = live.extender();
    let p0 = live.pod("train-0");
    let seat = filter(&extender, &p0).unwrap();
    assert_eq!(seat.len(), 1, "{seat:?}");
    live.fake
        .lose_binding_answers(1, 504, "Timeout", "etcdserver: request timed out");
    let bound = extender.bind_and_write(&binding_args(&p0, &seat[0])).await;
    assert_eq!(bound.error, "", "{bound:?}");
    assert_eq!(live.fake.bindings().len(), 1);
    let stats = extender.stats();
    assert_eq!(
        (stats.binds_failed, stats.pods_bound, stats.seats_held),
        (0, 1, 1)
    );
    assert_eq!(cpu(&extender.state().read(), &seat[0]), 4000, "recorded");
    // A Binding refused for good is not read back as done: the pod is not bound.
    live.fake
        .fail_bindings(1, 500, "InternalError", "etcdserver: request timed out");
    let p1 = live.pod("train-1");
    let seat1 = filter(&extender, &p1).unwrap();
    let refused = extender.bind_and_write(&binding_args(&p1, &seat1[0])).await;
    assert!(refused.error.contains("500"), "{refused:?}");
    assert_eq!(extender.stats().binds_failed, 1);
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_in_the_middle_of_a_gang_places_the_rest_in_the_same_rack() {
    // Pods 0 and 1 of a 4-pod gang run on h3 (rack r2). The rest (2 x 2 cpu) would fit best
    // in r1 (8 cpu free against r2's 12), but must join their gang in r2.
    let mut objects = two_racks();
    objects.push(job("train", 4, 2));
    objects.push(job_pod("train", 0, 2, Some("h3")));
    objects.push(job_pod("train", 1, 2, Some("h3")));
    objects.push(job_pod("train", 2, 2, None));
    objects.push(job_pod("train", 3, 2, None));
    let live = Live::start(with_objects(objects)).await;
    let extender = live.extender();
    for i in [2, 3] {
        let pod = live.pod(&format!("train-{i}"));
        let seat = filter(&extender, &pod).unwrap();
        assert_eq!(seat.len(), 1);
        assert_eq!(
            rack_of(&live.state.read(), &seat[0]),
            "r2",
            "pod {i}: {seat:?}"
        );
        let bound = extender.bind_and_write(&binding_args(&pod, &seat[0])).await;
        assert_eq!(bound.error, "");
    }
    // Without the gang's bound pods the plan would have gone to r1: the test can tell.
    let fresh = FakeApiServer::new();
    for o in two_racks() {
        fresh.apply(o);
    }
    fresh.apply(job("train", 2, 2));
    fresh.apply(lone_pod("a", 2, "h3", "Running"));
    fresh.apply(lone_pod("b", 2, "h3", "Running"));
    fresh.apply(job_pod("train", 0, 2, None));
    let other = Live::start(fresh).await;
    let seat = filter(&other.extender(), &other.pod("train-0")).unwrap();
    assert_eq!(rack_of(&other.state.read(), &seat[0]), "r1");
    live.watches.stop().await;
    other.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_recreated_after_its_node_went_not_ready_joins_its_gang() {
    // A 2-pod gang (1 cpu each, one rack) runs on h3 and h4 (rack r2). Fillers leave r1 room
    // for exactly 2 such pods: the tightest rack for a lone 1-cpu pod.
    let mut objects = two_racks();
    objects.push(job("train", 2, 1));
    objects.push(job_pod("train", 0, 1, Some("h3")));
    objects.push(job_pod("train", 1, 1, Some("h4")));
    objects.push(lone_pod("fill-1", 3, "h1", "Running"));
    objects.push(lone_pod("fill-2", 3, "h2", "Running"));
    let live = Live::start(with_objects(objects)).await;
    // Notices go out as Events, as `serve` publishes them.
    let (notices, notice_rx) = kube_tas::cluster::live::events::channel();
    let extender = live.extender().with_notices(notices);
    let cancel = CancellationToken::new();
    let publisher = tokio::spawn(kube_tas::cluster::live::events::publish(
        live.fake.client(),
        "test".to_string(),
        notice_rx,
        cancel.clone(),
    ));
    // h4 goes NotReady, its pod fails; the Job controller recreates pod 1 (new uid, pending).
    live.fake.apply(node("h4", "r2", 8, false));
    let mut failed = job_pod("train", 1, 1, Some("h4"));
    failed["status"]["phase"] = json!("Failed");
    live.fake.apply(failed);
    live.until("h4 is NotReady and its pod gone", |s| {
        s.node_by_name("h4").is_some_and(|n| !n.ready) && cpu(s, "h4") == 0
    })
    .await;
    let mut recreated = job_pod("train", 1, 1, None);
    recreated["metadata"]["name"] = json!("train-1-again");
    recreated["metadata"]["uid"] = json!("uid-train-1-again");
    live.fake.apply(recreated);
    let pod = live.pod("train-1-again");
    let seat = filter(&extender, &pod).unwrap();
    assert_eq!(
        seat,
        vec!["h3".to_string()],
        "the replacement joins its gang in r2"
    );
    let bound = extender.bind_and_write(&binding_args(&pod, &seat[0])).await;
    assert_eq!(bound.error, "");
    assert_eq!(
        cpu(&live.state.read(), "h3"),
        2000,
        "pod 0 and its replacement"
    );
    assert_eq!(extender.stats().replacements_placed, 1);
    // The replacement is an Event on the Job, naming the node that failed.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(live.fake.client(), "default");
    let deadline = Instant::now() + Duration::from_secs(10);
    let replaced = loop {
        let list = events.list(&Default::default()).await.unwrap();
        if let Some(e) = list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("TopologyReplacementPlanned"))
        {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "no TopologyReplacementPlanned Event"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let regarding = replaced.regarding.unwrap();
    assert_eq!(
        (regarding.kind.as_deref(), regarding.name.as_deref()),
        (Some("Job"), Some("train"))
    );
    let note = replaced.note.unwrap_or_default();
    assert!(
        note.contains("node h4 failed for the group (the node is NotReady)"),
        "{note}"
    );
    cancel.cancel();
    publisher.await.unwrap();
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_missing_from_the_cluster_does_not_block_readiness() {
    let fake = with_objects(two_racks().into_iter().filter(|o| o["kind"] != "Topology"));
    fake.unserve("kueue.x-k8s.io", "v1beta2", "topologies");
    let live = Live::start(fake).await;
    let status = live.watches.status();
    let topologies = status
        .kinds()
        .iter()
        .find(|k| k.name == "topologies")
        .unwrap();
    assert!(!topologies.is_served() && !topologies.is_synced());
    assert!(topologies.errors() >= 1);
    let nodes = status.kinds().iter().find(|k| k.name == "nodes").unwrap();
    assert!(nodes.is_synced());
    assert_eq!(live.state.read().node_count(), 4);
    // Installed later: picked up on the next retry.
    live.fake
        .serve_again("kueue.x-k8s.io", "v1beta2", "topologies");
    live.fake.apply(kueue_objects().remove(0));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(topologies.is_synced() && live.state.read().flavor("tas-flavor").is_some()) {
        assert!(Instant::now() < deadline, "the Topology never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(topologies.is_served());
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_410_gone_replaces_what_it_lists() {
    let live = Live::start(with_objects(two_racks())).await;
    let nodes = live
        .watches
        .status()
        .kinds()
        .iter()
        .find(|k| k.name == "nodes")
        .unwrap()
        .clone();
    assert_eq!(nodes.relists(), 1);
    live.fake.compact();
    live.fake.delete("v1", "Node", None, "h1");
    let deadline = Instant::now() + Duration::from_secs(20);
    while nodes.relists() < 2 {
        assert!(Instant::now() < deadline, "no relist after 410 Gone");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    live.until("h1 is gone", |s| s.node_by_name("h1").is_none())
        .await;
    assert_eq!(live.state.read().node_count(), 3);
    live.watches.stop().await;
}

/// Binds whose watch events a stalled watch and a 410 lost: the relist settles them. The pod it
/// lists bound counts once and is no longer assumed; the pod deleted in the gap, which it does
/// not list, gives its capacity back (no event would ever remove it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_whose_events_a_410_lost_are_settled_by_the_relist() {
    let live = Live::start(with_objects(train_of_two())).await;
    let extender = live.extender();
    let kinds = live.watches.status().kinds();
    let pods = kinds.iter().find(|k| k.name == "pods").unwrap();
    live.fake.stall_watches();
    let mut seats = Vec::new();
    for name in ["train-0", "train-1"] {
        let pod = live.pod(name);
        let seat = filter(&extender, &pod).unwrap();
        assert_eq!(seat.len(), 1, "{seat:?}");
        let bound = extender.bind_and_write(&binding_args(&pod, &seat[0])).await;
        assert_eq!(bound.error, "", "{bound:?}");
        seats.push(seat[0].clone());
    }
    assert_eq!(live.fake.bindings().len(), 2);
    assert!(live.fake.delete("v1", "Pod", Some("default"), "train-1"));
    // The watch is stalled: neither bind is confirmed, and the deletion is not seen.
    tokio::time::sleep(Duration::from_millis(300)).await;
    {
        let s = live.state.read();
        for uid in ["uid-train-0", "uid-train-1"] {
            assert!(s.pod(uid).is_some_and(|p| p.assumed), "{uid} assumed");
        }
        let on = |node: &str| seats.iter().filter(|s| *s == node).count() as i64 * 4000;
        assert_eq!(cpu(&s, &seats[0]), on(&seats[0]));
        assert_eq!(cpu(&s, &seats[1]), on(&seats[1]));
    }
    let relists = pods.relists();
    live.fake.compact();
    let deadline = Instant::now() + Duration::from_secs(20);
    while pods.relists() == relists {
        assert!(Instant::now() < deadline, "no pod relist after 410 Gone");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let s = live.state.read();
        assert!(
            s.pod("uid-train-0").is_some_and(|p| !p.assumed),
            "train-0 listed bound: confirmed"
        );
        assert!(s.pod("uid-train-1").is_none(), "train-1 not listed: gone");
        let on = |node: &str| i64::from(seats[0] == node) * 4000;
        assert_eq!(cpu(&s, &seats[0]), on(&seats[0]), "train-0 counted once");
        assert_eq!(cpu(&s, &seats[1]), on(&seats[1]), "train-1 given back");
    }
    live.fake.resume_watches();
    live.watches.stop().await;
}

/// A bind the pod watch never shows (its pod deleted where no event reports it) is read back
/// once it is old: the pod gone gives its usage back, the pod bound as recorded stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_the_watch_never_shows_are_read_back() {
    let live = Live::start(with_objects(train_of_two())).await;
    let extender = live.extender();
    live.fake.stall_watches();
    let mut seats = Vec::new();
    for name in ["train-0", "train-1"] {
        let pod = live.pod(name);
        let seat = filter(&extender, &pod).unwrap();
        let bound = extender.bind_and_write(&binding_args(&pod, &seat[0])).await;
        assert_eq!(bound.error, "", "{bound:?}");
        seats.push(seat[0].clone());
    }
    assert!(live.fake.delete("v1", "Pod", Some("default"), "train-1"));
    let client = live.fake.client();
    // Binds newer than the cut are not read.
    let early = Instant::now() - Duration::from_secs(3600);
    let outcome = unconfirmed::check_once(&client, &live.state, early).await;
    assert_eq!(outcome, unconfirmed::CheckOutcome::default());
    let outcome = unconfirmed::check_once(&client, &live.state, Instant::now()).await;
    assert_eq!(
        (outcome.given_back, outcome.holding, outcome.unread),
        (1, 1, 0),
        "{outcome:?}"
    );
    {
        let s = live.state.read();
        assert!(
            s.pod("uid-train-0").is_some_and(|p| p.assumed),
            "train-0 kept"
        );
        assert!(s.pod("uid-train-1").is_none(), "train-1 given back");
        let on = |node: &str| i64::from(seats[0] == node) * 4000;
        assert_eq!(cpu(&s, &seats[0]), on(&seats[0]));
        assert_eq!(cpu(&s, &seats[1]), on(&seats[1]));
    }
    // The watch resumed confirms train-0: nothing is left to read.
    live.fake.resume_watches();
    live.until("train-0 confirmed", |s| {
        s.pod("uid-train-0").is_some_and(|p| !p.assumed)
    })
    .await;
    let outcome = unconfirmed::check_once(&client, &live.state, Instant::now()).await;
    assert_eq!(outcome, unconfirmed::CheckOutcome::default());
    // A bind recorded under the pod's name (no uid sent) beside the watch's record under its
    // uid counts the pod twice: read back, it is given back.
    let usage = live.state.read().pod("uid-train-0").cloned().unwrap();
    live.state
        .write()
        .assume("default/train-0", ("default", "train-0"), usage);
    assert_eq!(cpu(&live.state.read(), &seats[0]), 8000);
    let outcome = unconfirmed::check_once(&client, &live.state, Instant::now()).await;
    assert_eq!(outcome.given_back, 1, "{outcome:?}");
    assert_eq!(cpu(&live.state.read(), &seats[0]), 4000);
    live.watches.stop().await;
}

/// A NonIndexed Job's pod deleted before its bind: no index tells its successor from a sibling
/// still waiting, so its seat is read back once it is quiet. Deleted, its seat is opened, and
/// the pod made in its place takes it in the full rack; the siblings still pending keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seat_of_a_pod_deleted_before_its_bind_is_read_back_and_opened() {
    let mut objects = two_racks();
    let mut train = job("train", 4, 4);
    train["spec"]["completionMode"] = json!("NonIndexed");
    objects.push(train);
    let unindexed = |name: &str| {
        let mut pod = job_pod("train", 0, 4, None);
        pod["metadata"]["name"] = json!(format!("train-{name}"));
        pod["metadata"]["uid"] = json!(format!("uid-train-{name}"));
        pod["metadata"]["labels"] = json!({});
        pod["metadata"]["annotations"] = json!({"kueue.x-k8s.io/podset-required-topology": RACK});
        pod
    };
    for name in ["a", "b", "c", "d"] {
        objects.push(unindexed(name));
    }
    let live = Live::start(with_objects(objects)).await;
    let extender = live.extender();
    // Four pods of 4 cpu in one rack: only r2 (2 x 8 cpu) holds them, and is then full.
    for name in ["a", "b", "c", "d"] {
        let nodes = filter(&extender, &live.pod(&format!("train-{name}"))).unwrap();
        assert_eq!(nodes.len(), 1, "train-{name}: {nodes:?}");
        assert_eq!(rack_of(&live.state.read(), &nodes[0]), "r2");
    }
    assert!(live.fake.delete("v1", "Pod", Some("default"), "train-d"));
    live.fake.apply(unindexed("e"));
    let e = live.pod("train-e");
    assert_eq!(filter(&extender, &e).unwrap(), Vec::<String>::new());
    let client = live.fake.client();
    // Seats asked for after the cut are not read.
    let early = Instant::now() - Duration::from_secs(3600);
    let outcome = quiet_seats::check_once(&client, &extender, early).await;
    assert_eq!(outcome, quiet_seats::CheckOutcome::default());
    let outcome = quiet_seats::check_once(&client, &extender, Instant::now()).await;
    assert_eq!(
        (outcome.reopened, outcome.waiting, outcome.unread),
        (1, 3, 0),
        "{outcome:?}"
    );
    let nodes = filter(&extender, &e).unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(rack_of(&live.state.read(), &nodes[0]), "r2");
    assert_eq!(extender.stats().seats_held, 4, "no extra seat");
    let outcome = quiet_seats::check_once(&client, &extender, Instant::now()).await;
    assert_eq!((outcome.reopened, outcome.waiting), (0, 4), "{outcome:?}");
    live.watches.stop().await;
}

/// Events a watch holds at once go in under one write lock: 200 pod events that reach the
/// watch together (a stalled watch resumed, as a chunk of events or a list page comes) take a
/// few write locks, not one each (each of which would wait a timer tick whenever a reader,
/// a request or a tree build, held the state).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_a_watch_holds_at_once_go_in_under_one_write_lock() {
    const PODS: usize = 200;
    let live = Live::start(with_objects(two_racks())).await;
    let kinds = live.watches.status().kinds();
    let pods = kinds.iter().find(|k| k.name == "pods").unwrap();
    let (events, writes) = (pods.events(), pods.writes());
    live.fake.stall_watches();
    let hosts = ["h1", "h2", "h3", "h4"];
    for i in 0..PODS {
        live.fake
            .apply(lone_pod(&format!("web-{i}"), 0, hosts[i % 4], "Running"));
    }
    live.fake.resume_watches();
    live.until("every pod is applied", |s| s.pod_count() == PODS)
        .await;
    let (events, writes) = (pods.events() - events, pods.writes() - writes);
    assert_eq!(events, PODS as u64);
    assert!(
        writes * 4 <= events,
        "{events} events took {writes} write locks"
    );
    live.watches.stop().await;
}

/// The node-id sweep takes the plan book and the state's write lock as the watches take the
/// lock: while a reader holds the state (a tree build), it waits holding neither the book nor
/// a place in the lock's queue, so a request (the book, then a read of the state) goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_id_sweep_waits_for_a_tree_build_without_holding_up_requests() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};

    /// Lets the reader go when dropped, on success or when an assertion fails.
    struct Release(mpsc::Sender<()>);
    impl Drop for Release {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    let live = Live::start(with_objects(two_racks())).await;
    let extender = live.extender();
    // A deleted node nothing refers to: the sweep gives its id back.
    assert!(live.fake.delete("v1", "Node", None, "h4"));
    live.until("h4 is gone", |s| s.node_by_name("h4").is_none())
        .await;
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let building = {
        let state = live.state.clone();
        std::thread::spawn(move || {
            let _read = state.read();
            held_tx.send(()).expect("the test waits");
            let _ = release_rx.recv();
        })
    };
    let release = Release(release_tx);
    held_rx.recv().expect("the build holds its read lock");
    let waiting = Arc::new(AtomicBool::new(false));
    let sweep = {
        let (extender, waiting) = (extender.clone(), waiting.clone());
        tokio::spawn(async move {
            // A patience no slow machine reaches: the sweep never queues for the lock here.
            let patience = Duration::from_secs(600);
            let mut sweep = std::pin::pin!(extender.reclaim_node_ids_within(patience));
            std::future::poll_fn(|cx| {
                let poll = sweep.as_mut().poll(cx);
                waiting.store(poll.is_pending(), Ordering::SeqCst);
                poll
            })
            .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !waiting.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the sweep never waited (it blocked)"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let request = {
        let extender = extender.clone();
        std::thread::spawn(move || extender.with_book(|_, state| state.node_count()))
    };
    while !request.is_finished() {
        assert!(
            Instant::now() < deadline,
            "a request waits behind the sweep (the book held, or a writer queued)"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(request.join().expect("no panic"), 3);
    drop(release);
    building.join().expect("no panic");
    let reclaimed = tokio::time::timeout(Duration::from_secs(10), sweep)
        .await
        .expect("the sweep ends once the build lets go")
        .expect("no panic");
    assert_eq!(reclaimed, 1, "h4's id is given back");
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_sees_a_job_created_after_startup() {
    let live = Live::start(with_objects(two_racks())).await;
    let webhook = Webhook::new(live.state.clone(), FeatureGates::default());
    // A TAS pod of a Job nobody has seen, without the webhook's stamps: refused.
    let pod: Pod = serde_json::from_value(job_pod("late", 0, 1, None)).unwrap();
    let Decision::Deny { code, message } = webhook.pod(&pod) else {
        panic!("a pod of an unknown Job must be refused")
    };
    assert_eq!(code, 403);
    assert!(
        message.contains("not in kube-tas's cluster view"),
        "{message}"
    );
    // The Job is created: the webhook knows its gang from the watch.
    live.fake.apply(job("late", 3, 1));
    live.until("the Job is watched", |s| s.job("default", "late").is_some())
        .await;
    let Decision::Allow { patch, .. } = webhook.pod(&pod) else {
        panic!("the pod of a watched Job must be admitted")
    };
    let text = serde_json::to_string(&patch).unwrap();
    assert!(
        text.contains("pod-group-total-count") && text.contains("\"3\""),
        "{text}"
    );
    live.watches.stop().await;
}

/// Kueue's Workload of Job `job`, as Kueue's Job controller creates it (owned by the Job).
fn kueue_workload(job: &str) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": format!("job-{job}-5f2b1"), "namespace": "default",
            "uid": format!("wl-uid-{job}"),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                "uid": format!("job-uid-{job}"), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"queueName": "tas-queue", "podSets": [{"name": "main", "count": 2,
            "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}]}
    })
}

/// A Job whose Kueue Workload exists is Kueue's: its pods are neither patched by `/mutate`
/// nor planned (filter passes every node), until the Workload goes. The same pods of a Job
/// without a Workload are patched and planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_kueue_has_a_workload_for_is_left_to_kueue() {
    let mut objects = two_racks();
    objects.extend([
        job("queued", 2, 1),
        job("ours", 2, 1),
        kueue_workload("queued"),
    ]);
    let live = Live::start(with_objects(objects)).await;
    let extender = live.extender();
    let webhook = Webhook::new(live.state.clone(), FeatureGates::default());
    let every_node = vec!["h1", "h2", "h3", "h4"];

    let queued: Pod = serde_json::from_value(job_pod("queued", 0, 1, None)).unwrap();
    let Decision::Allow { patch, .. } = webhook.pod(&queued) else {
        panic!("Kueue's pod is admitted")
    };
    assert!(patch.is_empty(), "Kueue's pod is not patched: {patch:?}");
    assert_eq!(
        filter(&extender, &queued).unwrap(),
        every_node,
        "passed through"
    );
    assert_eq!(extender.stats().plans_made, 0);

    let ours: Pod = serde_json::from_value(job_pod("ours", 0, 1, None)).unwrap();
    let Decision::Allow { patch, .. } = webhook.pod(&ours) else {
        panic!("our pod is admitted")
    };
    assert!(
        !patch.is_empty(),
        "a pod of a Job Kueue does not manage is patched"
    );
    let placed = filter(&extender, &ours).unwrap();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(extender.stats().plans_made, 1);

    // The Workload goes (Kueue stopped managing the Job): kube-tas plans its pods.
    let name = "job-queued-5f2b1";
    assert!(
        live.fake
            .delete("kueue.x-k8s.io/v1beta2", "Workload", Some("default"), name)
    );
    live.until("the Workload is gone", |s| {
        s.kueue_workload_keys().is_empty()
    })
    .await;
    let placed = filter(&extender, &queued).unwrap();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(extender.stats().plans_made, 2);
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_created_after_startup_is_planned_as_one_workload() {
    let live = Live::start(with_objects(two_racks())).await;
    let extender = live.extender();
    // A driver pod before its JobSet is watched: an error naming the JobSet, no placement.
    let driver: Pod = serde_json::from_value(jobset_pod("train", "driver", 0, 4)).unwrap();
    let err = filter(&extender, &driver).unwrap_err();
    assert!(
        err.contains("JobSet default/train") && err.contains("not in kube-tas's cluster view"),
        "{err}"
    );
    // Created: the driver (4 cpu) and 10 workers (1 cpu) need 14 cpu in one rack: only r2
    // (2 × 8 cpu) has room. The driver's first filter plans the whole JobSet.
    live.fake.apply(jobset("train", 4, 10));
    live.until("the JobSet is watched", |s| {
        s.workload(&GroupKey {
            kind: WorkloadKind::JobSet,
            namespace: "default".into(),
            name: "train".into(),
        })
        .is_some()
    })
    .await;
    let nodes = filter(&extender, &driver).unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let state = extender.state();
    assert_eq!(rack_of(&state.read(), &nodes[0]), "r2");
    let stats = extender.stats();
    assert_eq!(stats.plans_active, 2, "one plan per PodSet: {stats:?}");
    assert_eq!(stats.seats_held, 11, "{stats:?}");
    // Every worker is seated in the driver's rack.
    for i in 0..10 {
        let worker: Pod = serde_json::from_value(jobset_pod("train", "workers", i, 1)).unwrap();
        let nodes = filter(&extender, &worker).unwrap();
        assert_eq!(nodes.len(), 1, "worker {i}: {nodes:?}");
        assert_eq!(rack_of(&state.read(), &nodes[0]), "r2", "worker {i}");
    }
    // A second JobSet whose workers cannot fit next to it gets no pod through, and holds
    // nothing: its driver alone would fit in r1, but the workload is planned whole or not
    // at all.
    live.fake.apply(jobset("big", 2, 7));
    live.until("the second JobSet is watched", |s| {
        s.workload(&GroupKey {
            kind: WorkloadKind::JobSet,
            namespace: "default".into(),
            name: "big".into(),
        })
        .is_some()
    })
    .await;
    let big_driver: Pod = serde_json::from_value(jobset_pod("big", "driver", 0, 2)).unwrap();
    assert_eq!(
        filter(&extender, &big_driver).unwrap(),
        Vec::<String>::new()
    );
    let after = extender.stats();
    assert_eq!(after.plans_active, 2, "{after:?}");
    assert_eq!(
        after.seats_held, 11,
        "nothing of the refused JobSet is held: {after:?}"
    );
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_of_two_shapes_waits_for_all_its_pods_then_is_planned_whole() {
    let live = Live::start(with_objects(two_racks())).await;
    let extender = live.extender();
    // The scheduler may ask before the watch shows any pod of the group: it waits.
    let early: Pod = serde_json::from_value(group_pod("mixed", "mixed-head", 4, 4)).unwrap();
    let names: Vec<String> = live
        .state
        .read()
        .nodes()
        .map(|(_, n)| n.name.clone())
        .collect();
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let unseen = extender.filter_cached(&early, &candidates);
    assert_eq!(unseen.node_names, Some(vec![]), "{unseen:?}");
    assert!(
        unseen
            .failed_nodes
            .values()
            .all(|r| r.contains("no pod of PodGroup default/mixed")),
        "{unseen:?}"
    );
    // A head of 4 cpu and three workers of 1 cpu: two shapes, two PodSets. Only the head
    // exists yet: its shape alone does not say the group's, so nothing is placed.
    live.fake.apply(group_pod("mixed", "mixed-head", 4, 4));
    live.until("the head is watched", |s| {
        s.pod_group_incomplete(&GroupKey {
            kind: WorkloadKind::PodGroup,
            namespace: "default".into(),
            name: "mixed".into(),
        }) == Some((1, 4))
    })
    .await;
    let head = live.pod("mixed-head");
    let names: Vec<String> = live
        .state
        .read()
        .nodes()
        .map(|(_, n)| n.name.clone())
        .collect();
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let waiting = extender.filter_cached(&head, &candidates);
    assert_eq!(waiting.node_names, Some(vec![]), "{waiting:?}");
    let reason = waiting
        .failed_nodes
        .values()
        .next()
        .cloned()
        .unwrap_or_default();
    assert!(reason.contains("has 1 of its 4 pods"), "{waiting:?}");
    assert_eq!(extender.stats().plans_active, 0);

    for i in 0..3 {
        live.fake
            .apply(group_pod("mixed", &format!("mixed-w{i}"), 4, 1));
    }
    live.until("every pod of the group is watched", |s| {
        s.pod_group_incomplete(&GroupKey {
            kind: WorkloadKind::PodGroup,
            namespace: "default".into(),
            name: "mixed".into(),
        })
        .is_none()
    })
    .await;
    // 7 cpu in one rack; the head's filter plans both PodSets.
    let nodes = filter(&extender, &head).unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let stats = extender.stats();
    assert_eq!((stats.plans_active, stats.seats_held), (2, 4), "{stats:?}");
    let rack = rack_of(&live.state.read(), &nodes[0]);
    for i in 0..3 {
        let worker = live.pod(&format!("mixed-w{i}"));
        let nodes = filter(&extender, &worker).unwrap();
        assert_eq!(nodes.len(), 1, "worker {i}: {nodes:?}");
        assert_eq!(rack_of(&live.state.read(), &nodes[0]), rack, "worker {i}");
    }
    live.watches.stop().await;
}

/// A plain pod group's pod deleted after it took its seat, before it was bound: the pending
/// watch shows it gone, and the pod made in its place takes its seat (in a full rack there is
/// no room for another beside it). While the deleted pod is still watched pending, its seat
/// stays its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_pod_deleted_before_its_bind_leaves_its_seat_to_the_next() {
    let live = Live::start(with_objects(two_racks())).await;
    let extender = live.extender();
    let group = GroupKey {
        kind: WorkloadKind::PodGroup,
        namespace: "default".into(),
        name: "g".into(),
    };
    // Four pods of 4 cpu in one rack: only r2 (2 x 8 cpu) holds them, and is then full.
    for i in 0..4 {
        live.fake.apply(group_pod("g", &format!("g-{i}"), 4, 4));
    }
    live.until("every pod of the group is watched", |s| {
        s.pod_group_incomplete(&group).is_none() && s.is_pending_group_pod("uid-g-3")
    })
    .await;
    for i in 0..4 {
        let nodes = filter(&extender, &live.pod(&format!("g-{i}"))).unwrap();
        assert_eq!(nodes.len(), 1, "g-{i}: {nodes:?}");
        assert_eq!(rack_of(&live.state.read(), &nodes[0]), "r2");
    }
    assert_eq!(extender.stats().seats_held, 4);
    // g-4 comes while g-3 is still pending: every seat is someone's, and r2 is full.
    live.fake.apply(group_pod("g", "g-4", 4, 4));
    live.until("g-4 is watched", |s| s.is_pending_group_pod("uid-g-4"))
        .await;
    let g4 = live.pod("g-4");
    assert_eq!(filter(&extender, &g4).unwrap(), Vec::<String>::new());
    // g-3 is deleted: its seat is g-4's, once g-3 has not been filtered for a while (a pod
    // just created may take its seat before the pending watch shows it).
    assert!(live.fake.delete("v1", "Pod", Some("default"), "g-3"));
    live.until("g-3 is gone", |s| !s.is_pending_group_pod("uid-g-3"))
        .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(extender.stats().seats_reopened, 0);
    let nodes = filter(&extender, &g4).unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(rack_of(&live.state.read(), &nodes[0]), "r2");
    assert_eq!(extender.stats().seats_held, 4);
    assert_eq!(extender.stats().seats_reopened, 1);
    live.watches.stop().await;
}

/// A plain pod group of three shapes (three PodSets, each required in one rack) whose head is
/// bound, planned anew by a new leader's book: no pod of the head's role is pending any more,
/// and the two other roles are still planned each at its own count, each in one rack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_with_a_role_bound_whole_is_planned_anew_by_role() {
    let live = Live::start(with_objects(two_racks())).await;
    let group = GroupKey {
        kind: WorkloadKind::PodGroup,
        namespace: "default".into(),
        name: "mixed".into(),
    };
    live.fake.apply(group_pod("mixed", "mixed-head", 5, 4));
    for i in 0..2 {
        live.fake
            .apply(group_pod("mixed", &format!("mixed-m{i}"), 5, 2));
        live.fake
            .apply(group_pod("mixed", &format!("mixed-w{i}"), 5, 1));
    }
    live.until("every pod of the group is watched", |s| {
        s.pod_group_incomplete(&group).is_none() && s.is_pending_group_pod("uid-mixed-w1")
    })
    .await;
    let extender = live.extender();
    let head = live.pod("mixed-head");
    let nodes = filter(&extender, &head).unwrap();
    let bound = extender
        .bind_and_write(&binding_args(&head, &nodes[0]))
        .await;
    assert_eq!(bound.error, "", "{bound:?}");
    live.until("the head is bound", |s| {
        s.pod("uid-mixed-head").is_some_and(|p| !p.assumed)
            && !s.is_pending_group_pod("uid-mixed-head")
    })
    .await;
    // A new leader: no plan; the other roles are planned from the cluster.
    let next = live.extender();
    for role in ["m", "w"] {
        let racks: Vec<String> = (0..2)
            .map(|i| {
                let name = format!("mixed-{role}{i}");
                let nodes = filter(&next, &live.pod(&name)).unwrap();
                assert_eq!(nodes.len(), 1, "{name}: {nodes:?}");
                rack_of(&live.state.read(), &nodes[0])
            })
            .collect();
        assert_eq!(racks[0], racks[1], "role {role}: {racks:?}");
    }
    let stats = next.stats();
    assert_eq!((stats.plans_active, stats.seats_held), (2, 4), "{stats:?}");
    live.watches.stop().await;
}

/// A replica elected on a Lease nobody holds yet takes it and keeps it, with a few Lease
/// requests a second: an election that restarted itself on finding the Lease free (as it is
/// while the lease manager takes it) would hammer the API server and never settle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_election_on_a_free_lease_settles_at_once() {
    let live = Live::start(with_objects(two_racks())).await;
    let config = ElectionConfig {
        namespace: "default".into(),
        lease_name: "kube-tas".into(),
        identity: "replica-a".into(),
        lease_duration: Duration::from_secs(3),
        renew_before: Duration::from_secs(1),
    };
    let leadership = Leadership::elected("replica-a");
    let cancel = CancellationToken::new();
    let task = tokio::spawn(leader::run(
        live.fake.client(),
        config,
        leadership.clone(),
        cancel.clone(),
    ));
    let started = Instant::now();
    while !leadership.is_leader() {
        assert!(started.elapsed() < Duration::from_secs(5), "never led");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let lease_requests = || {
        live.fake
            .requests()
            .iter()
            .filter(|r| r.contains("/leases"))
            .count()
    };
    let before = lease_requests();
    let leading = Instant::now();
    while leading.elapsed() < Duration::from_secs(3) {
        assert!(
            leadership.is_leader(),
            "stopped leading after {:?}",
            leading.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Three confirmations a second, each with the lease manager's own read, and a renewal
    // or two: some tens of requests, where a restart loop sends hundreds.
    let sent = lease_requests() - before;
    assert!((3..=60).contains(&sent), "{sent} Lease requests in 3 s");
    cancel.cancel();
    let _ = task.await;
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_never_both_plan_across_a_leader_change() {
    let mut objects = two_racks();
    objects.push(job("train", 1, 1));
    objects.push(job_pod("train", 0, 1, None));
    let fake = with_objects(objects);
    let live = Live::start(fake).await;
    let lease = |identity: &str| ElectionConfig {
        namespace: "default".into(),
        lease_name: "kube-tas".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(3),
        renew_before: Duration::from_secs(1),
    };
    let a = Leadership::elected("replica-a");
    let b = Leadership::elected("replica-b");
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let task_a = tokio::spawn(leader::run(
        live.fake.client(),
        lease("replica-a"),
        a.clone(),
        cancel_a.clone(),
    ));
    let task_b = tokio::spawn(leader::run(
        live.fake.client(),
        lease("replica-b"),
        b.clone(),
        cancel_b.clone(),
    ));
    let ext_a = live.extender().with_leadership(a.clone());
    let ext_b = live.extender().with_leadership(b.clone());
    let followers = CancellationToken::new();
    for ext in [&ext_a, &ext_b] {
        let (ext, cancel) = (ext.clone(), followers.clone());
        tokio::spawn(async move {
            ext.drop_plans_when_not_leading(cancel, |_| async {}).await;
        });
    }
    let both_hold = || ext_a.stats().seats_held > 0 && ext_b.stats().seats_held > 0;

    // Sample both for 6 s: never two leaders, and a leader most of the time.
    let mut led = 0;
    let mut samples = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        let (la, lb) = (a.is_leader(), b.is_leader());
        assert!(!(la && lb), "both replicas lead at once");
        led += usize::from(la || lb);
        samples += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        led * 2 > samples,
        "a leader only {led} of {samples} samples"
    );
    let (leader, leader_cancel, follower, follower_ext) = if a.is_leader() {
        (&a, &cancel_a, &b, &ext_b)
    } else {
        (&b, &cancel_b, &a, &ext_a)
    };
    assert!(leader.is_leader());
    // The follower refuses to plan and names the leader.
    let pod = live.pod("train-0");
    let e = filter(follower_ext, &pod).unwrap_err();
    assert!(
        e.contains("not the leader") && e.contains(leader.identity()),
        "{e}"
    );
    // The leader plans the gang: its seat is held by the leader only.
    let leader_ext = if leader.identity() == "replica-a" {
        &ext_a
    } else {
        &ext_b
    };
    assert_eq!(filter(leader_ext, &pod).unwrap().len(), 1);
    assert_eq!(leader_ext.stats().seats_held, 1);
    assert_eq!(follower_ext.stats().seats_held, 0);
    // The leader steps down (its process ends): the other takes over within the lease.
    leader_cancel.cancel();
    let handover = Instant::now();
    while !follower.is_leader() {
        assert!(!(leader.is_leader() && follower.is_leader()));
        assert!(!both_hold(), "two replicas hold plans at once");
        assert!(
            handover.elapsed() < Duration::from_secs(10),
            "no new leader after the old one released"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!leader.is_leader());
    // The old leader dropped its plans on stepping down; the new one plans afresh.
    let dropped = Instant::now();
    while leader_ext.stats().seats_held > 0 {
        assert!(
            dropped.elapsed() < Duration::from_secs(5),
            "the old leader kept its plans"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(filter(follower_ext, &pod).unwrap().len(), 1);
    assert_eq!(follower_ext.stats().seats_held, 1);
    assert!(!both_hold());
    cancel_a.cancel();
    cancel_b.cancel();
    followers.cancel();
    let _ = task_a.await;
    let _ = task_b.await;
    live.watches.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Workload-API groups
// ---------------------------------------------------------------------------------------------

/// A PodGroup (or, with `composite`, a CompositePodGroup) at `api_version`.
fn scheduling_group(
    api_version: &str,
    kind: &str,
    name: &str,
    policy: Value,
    key: Option<&str>,
    parent: Option<&str>,
) -> Value {
    let mut spec = json!({"schedulingPolicy": policy});
    if let Some(key) = key {
        spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
    }
    if let Some(parent) = parent {
        spec["parentCompositePodGroupName"] = json!(parent);
    }
    json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// A pending pod naming PodGroup `group`: by `spec.schedulingGroup`, or (`by_label`) by the
/// `kube-tas.io/pod-group` label.
fn member_pod(group: &str, name: &str, cpu: u32, by_label: bool) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]},
        "status": {"phase": "Pending"}
    });
    if by_label {
        pod["metadata"]["labels"] = json!({"kube-tas.io/pod-group": group});
    } else {
        pod["spec"]["schedulingGroup"] = json!({"podGroupName": group});
    }
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_pod_group_is_placed_in_one_rack_and_its_bindings_written() {
    let mut objects = two_racks();
    objects.push(scheduling_group(
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        "workers",
        json!({"gang": {"minCount": 3}}),
        Some(RACK),
        None,
    ));
    for i in 0..3 {
        objects.push(member_pod("workers", &format!("w-{i}"), 2, false));
    }
    // A pod of no group, pending too: the member watch leaves it out.
    objects.push(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "other", "namespace": "default", "uid": "uid-other"},
        "spec": {"containers": []}, "status": {"phase": "Pending"}}));
    let live = Live::start(with_objects(objects)).await;
    let group = GroupKey {
        kind: WorkloadKind::SchedulingGroup,
        namespace: "default".into(),
        name: "workers".into(),
    };
    live.until("the PodGroup and its 3 pods are watched", |s| {
        s.scheduling_group_count() == 1 && s.pending_members(&group).len() == 3
    })
    .await;
    assert_eq!(live.state.read().pending_member_uids().len(), 3);
    let extender = live.extender();
    // 6 cpu: 75% of rack r1 (2 x 4) against 37% of r2 (2 x 8): MostAllocated takes r1.
    let mut seats = Vec::new();
    for i in 0..3 {
        let pod = live.pod(&format!("w-{i}"));
        let seat = filter(&extender, &pod).unwrap();
        assert_eq!(seat.len(), 1, "w-{i}: {seat:?}");
        let bound = extender.bind_and_write(&binding_args(&pod, &seat[0])).await;
        assert_eq!(bound.error, "", "{bound:?}");
        seats.push(seat[0].clone());
    }
    let racks: Vec<String> = seats
        .iter()
        .map(|n| rack_of(&live.state.read(), n))
        .collect();
    assert_eq!(racks, ["r1", "r1", "r1"], "{seats:?}");
    assert_eq!(live.fake.bindings().len(), 3);
    assert_eq!(extender.stats().plans_made, 1);
    assert_eq!(extender.stats().seats_held, 0);
    live.until("the bound pods leave the member watch", |s| {
        s.pending_members(&group).is_empty() && s.members(&group).count() == 3
    })
    .await;
    // The PodGroup deleted: forgotten.
    assert!(live.fake.delete(
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        Some("default"),
        "workers"
    ));
    live.until("the PodGroup is gone", |s| s.scheduling_group_count() == 0)
        .await;
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_tas_own_group_kinds_place_a_composite_where_the_workload_api_is_not_served() {
    let fake = with_objects(two_racks());
    for version in ["v1beta1", "v1alpha3", "v1alpha2"] {
        fake.unserve("scheduling.k8s.io", version, "podgroups");
    }
    fake.unserve("scheduling.k8s.io", "v1alpha3", "compositepodgroups");
    const V: &str = "kube-tas.io/v1alpha1";
    fake.apply(scheduling_group(
        V,
        "CompositePodGroup",
        "job",
        json!({"gang": {"minGroupCount": 2}}),
        Some(RACK),
        None,
    ));
    fake.apply(scheduling_group(
        V,
        "PodGroup",
        "job-workers",
        json!({"gang": {"minCount": 2}}),
        None,
        Some("job"),
    ));
    fake.apply(scheduling_group(
        V,
        "PodGroup",
        "job-driver",
        json!({"basic": {}}),
        None,
        Some("job"),
    ));
    for i in 0..2 {
        fake.apply(member_pod("job-workers", &format!("worker-{i}"), 4, true));
    }
    fake.apply(member_pod("job-driver", "driver", 1, true));
    let live = Live::start(fake).await;
    let status = live.watches.status();
    for name in [
        "podgroups",
        "podgroups.v1alpha3",
        "podgroups.v1alpha2",
        "compositepodgroups",
    ] {
        let kind = status.kinds().iter().find(|k| k.name == name).unwrap();
        assert!(!kind.is_served(), "{name} is reported as not served");
    }
    for name in ["podgroups.kube-tas.io", "compositepodgroups.kube-tas.io"] {
        let kind = status.kinds().iter().find(|k| k.name == name).unwrap();
        assert!(kind.is_served() && kind.is_synced(), "{name}");
    }
    live.until("3 groups and 3 pods", |s| {
        s.scheduling_group_count() == 3 && s.pending_member_uids().len() == 3
    })
    .await;
    let extender = live.extender();
    // The driver asks first; the whole tree is planned at once, in one rack.
    let mut racks = Vec::new();
    for name in ["driver", "worker-0", "worker-1"] {
        let pod = live.pod(name);
        let seat = filter(&extender, &pod).unwrap();
        assert_eq!(seat.len(), 1, "{name}: {seat:?}");
        racks.push(rack_of(&live.state.read(), &seat[0]));
        let bound = extender.bind_and_write(&binding_args(&pod, &seat[0])).await;
        assert_eq!(bound.error, "", "{bound:?}");
    }
    assert!(racks.iter().all(|r| *r == racks[0]), "{racks:?}");
    assert_eq!(extender.stats().plans_made, 2, "one plan per PodGroup");
    live.watches.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_group_kind_served_a_pod_naming_a_pod_group_waits_for_it() {
    let fake = with_objects(two_racks());
    for (group, version) in [
        ("scheduling.k8s.io", "v1beta1"),
        ("scheduling.k8s.io", "v1alpha3"),
        ("scheduling.k8s.io", "v1alpha2"),
        ("kube-tas.io", "v1alpha1"),
    ] {
        fake.unserve(group, version, "podgroups");
    }
    fake.unserve("scheduling.k8s.io", "v1alpha3", "compositepodgroups");
    fake.unserve("kube-tas.io", "v1alpha1", "compositepodgroups");
    fake.apply(member_pod("ghost", "g-0", 1, false));
    let live = Live::start(fake).await;
    live.until("the pod is watched", |s| s.pending_member_uids().len() == 1)
        .await;
    let extender = live.extender();
    let pod = live.pod("g-0");
    let names: Vec<String> = live
        .state
        .read()
        .nodes()
        .map(|(_, n)| n.name.clone())
        .collect();
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let result = extender.filter_cached(&pod, &candidates);
    assert_eq!(
        result.node_names.clone().unwrap_or_default(),
        Vec::<String>::new()
    );
    let reasons: Vec<&String> = result
        .failed_nodes
        .values()
        .chain(result.failed_and_unresolvable_nodes.values())
        .collect();
    assert_eq!(reasons.len(), 4, "{result:?}");
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("PodGroup default/ghost does not exist")),
        "{reasons:?}"
    );
    assert!(
        result.failed_and_unresolvable_nodes.is_empty(),
        "it may appear"
    );
    assert_eq!(extender.stats().seats_held, 0);
    live.watches.stop().await;
}
