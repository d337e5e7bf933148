//! `kube-tas serve` in live mode end to end, against the in-process fake API server: not
//! ready until every kind is listed, then the leader labels its own pod, answers the extender
//! over HTTP, writes the Binding, exports the watch metrics, and takes its label off on the
//! way out.

mod common;
#[path = "common/fake_apiserver.rs"]
mod fake_apiserver;

use std::time::Duration;

use axum::http::StatusCode;
use fake_apiserver::FakeApiServer;
use kube_tas::server::ServeConfig;
use serde_json::{Value, json};

const RACK: &str = "cloud.provider.com/topology-rack";

/// How long a condition may take to come true.
const WAIT: Duration = Duration::from_secs(15);

fn objects() -> Vec<Value> {
    let mut v = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-tas-system"}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "kube-tas-0", "namespace": "kube-tas-system", "uid": "self"},
            "spec": {"containers": [{"name": "kube-tas", "image": "kube-tas"}]},
            "status": {"phase": "Running"}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": "cloud.provider.com/topology-block"},
                {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "tas-flavor"}, "spec": {"topologyName": "default"}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name":
                "tas-flavor", "resources": [{"name": "cpu", "nominalQuota": "100"}]}]}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}),
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "default", "uid": "job-uid",
                "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                "template": {"metadata": {"annotations":
                    {"kueue.x-k8s.io/podset-required-topology": RACK}},
                    "spec": {"containers": [{"name": "w", "image": "pause",
                        "resources": {"requests": {"cpu": "2"}}}]}}}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "train-0", "namespace": "default", "uid": "uid-train-0",
                "annotations": {"batch.kubernetes.io/job-completion-index": "0",
                    "kueue.x-k8s.io/podset-required-topology": RACK},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                    "uid": "job-uid", "controller": true}]},
            "spec": {"containers": [{"name": "w", "image": "pause",
                "resources": {"requests": {"cpu": "2"}}}]},
            "status": {"phase": "Pending"}}),
    ];
    for (name, rack) in [("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")] {
        v.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"cloud.provider.com/topology-block": "b1",
                RACK: rack, "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    v
}

fn leader_label(fake: &FakeApiServer) -> Option<String> {
    fake.get("v1", "Pod", Some("kube-tas-system"), "kube-tas-0")
        .and_then(|p| {
            p["metadata"]["labels"]["kube-tas.io/leader"]
                .as_str()
                .map(str::to_string)
        })
}

/// The election's Lease `kube-tas` in `namespace`, as the API server holds it.
fn lease(fake: &FakeApiServer, namespace: &str) -> Option<Value> {
    fake.get(
        "coordination.k8s.io/v1",
        "Lease",
        Some(namespace),
        "kube-tas",
    )
}

/// Who holds the Lease in `kube-tas-system`, as the API server says.
fn lease_holder(fake: &FakeApiServer) -> Option<String> {
    lease(fake, "kube-tas-system")
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
}

/// `serve`'s live-mode configuration for these tests: loopback ports, the election's Lease in
/// `namespace`, this replica named `pod`, no shutdown delay.
fn live_config(namespace: &str, pod: &str, lease_duration: Duration) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        leader_election_namespace: Some(namespace.into()),
        pod_name: Some(pod.into()),
        lease_duration,
        shutdown_delay: Duration::ZERO,
        shutdown_grace: Duration::from_secs(1),
        ..ServeConfig::default()
    }
}

/// The value of a metric sample line `name value` (or `name{labels} value`) on `/metrics`
/// (never its HELP line, which also begins with the name).
async fn metric(admin: std::net::SocketAddr, sample: &str) -> Option<u64> {
    let (_, text) = common::get_text(admin, "/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
}

/// The fake API server holding [`objects`], and one replica serving it with no election
/// (`config` may change its configuration), once `/readyz` is 200.
async fn lone_replica_ready(
    config: impl FnOnce(ServeConfig) -> ServeConfig,
) -> (FakeApiServer, common::LiveServe) {
    let fake = FakeApiServer::new();
    for o in objects() {
        fake.apply(o);
    }
    let config = config(ServeConfig {
        leader_elect: false,
        ..live_config("kube-tas-system", "kube-tas-0", Duration::from_secs(3))
    });
    let serve = common::LiveServe::start(config, fake.client()).await;
    let admin = serve.admin;
    common::eventually("/readyz is 200", WAIT, async || {
        common::get_text(admin, "/readyz").await.0 == StatusCode::OK
    })
    .await;
    (fake, serve)
}

/// Whether the replica with admin port `admin` reports itself the leader.
async fn reports_leader(admin: std::net::SocketAddr) -> bool {
    metric(admin, "kube_tas_leader").await == Some(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_in_live_mode_gets_ready_leads_and_binds() {
    let fake = FakeApiServer::new();
    for o in objects() {
        fake.apply(o);
    }
    // LeaderWorkerSet-style optional kinds aside, a missing Kueue kind must not block readiness.
    fake.unserve("kueue.x-k8s.io", "v1beta2", "clusterqueues");
    let config = live_config("kube-tas-system", "kube-tas-0", Duration::from_secs(3));
    let serve = common::LiveServe::start(config, fake.client()).await;
    let (main, admin) = (serve.main, serve.admin);

    common::eventually("/readyz is 200", WAIT, async || {
        common::get_text(admin, "/readyz").await.0 == StatusCode::OK
    })
    .await;
    common::eventually("the leader labels its pod", WAIT, async || {
        leader_label(&fake).as_deref() == Some("true")
    })
    .await;
    let (_, metrics) = common::get_text(admin, "/metrics").await;
    for line in [
        "kube_tas_watch_synced{kind=\"nodes\"} 1",
        "kube_tas_watch_served{kind=\"clusterqueues\"} 0",
        "kube_tas_cluster_nodes 4",
        "kube_tas_leader 1",
    ] {
        // Whole lines: `kube_tas_leader 1` is also how its HELP line begins.
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing from\n{metrics}"
        );
    }
    assert!(metrics.contains("kube_tas_watch_errors_total{kind=\"clusterqueues\"}"));

    // Without the ClusterQueue the Job cannot be admitted: the extender says why.
    let pod = fake.get("v1", "Pod", Some("default"), "train-0").unwrap();
    let args = json!({"Pod": pod, "NodeNames": ["h1", "h2", "h3", "h4"]});
    let answer = common::post_json(main, "/scheduler/filter", &args).await;
    let failed = answer["FailedAndUnresolvableNodes"].to_string();
    assert!(failed.contains("ClusterQueue"), "{answer}");
    // The ClusterQueue kind is installed: the pod is planned and bound.
    fake.serve_again("kueue.x-k8s.io", "v1beta2", "clusterqueues");
    fake.apply(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name":
            "tas-flavor", "resources": [{"name": "cpu", "nominalQuota": "100"}]}]}]}}),
    );
    let mut seat = Value::Null;
    common::eventually("the pod is planned", WAIT, async || {
        seat = common::post_json(main, "/scheduler/filter", &args).await["NodeNames"].clone();
        seat.as_array().is_some_and(|s| s.len() == 1)
    })
    .await;
    let node = seat[0].as_str().unwrap().to_string();
    let bound = common::post_json(
        main,
        "/scheduler/bind",
        &json!({"PodName": "train-0", "PodNamespace": "default", "PodUID": "uid-train-0",
            "Node": node}),
    )
    .await;
    assert_eq!(bound["Error"].as_str().unwrap_or(""), "", "{bound}");
    let bindings = fake.bindings();
    assert_eq!(bindings.len(), 1);
    assert_eq!(bindings[0]["target"]["name"], node.as_str());
    let (_, metrics) = common::get_text(admin, "/metrics").await;
    assert!(metrics.contains("kube_tas_pods_bound_total 1"), "{metrics}");

    // The plan is recorded as an Event on the Job, where `kubectl describe job` shows it.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(fake.client(), "default");
    let mut planned = None;
    common::eventually("a TopologyPlanned Event on the Job", WAIT, async || {
        let list = events.list(&Default::default()).await.unwrap();
        planned = list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("TopologyPlanned"));
        planned.is_some()
    })
    .await;
    let planned = planned.unwrap();
    let regarding = planned.regarding.unwrap();
    assert_eq!(regarding.kind.as_deref(), Some("Job"));
    assert_eq!(regarding.name.as_deref(), Some("train"));
    assert_eq!(regarding.uid.as_deref(), Some("job-uid"));
    let note = planned.note.unwrap_or_default();
    assert!(
        note.contains("rack r") && note.contains("2 pod(s)"),
        "{note}"
    );
    assert_eq!(planned.reporting_controller.as_deref(), Some("kube-tas"));

    serve.stop().await;
    assert_eq!(leader_label(&fake), None, "the label comes off on shutdown");
}

/// A replica whose election cannot start (here the Lease's namespace does not exist yet, as
/// when the API server refuses or is unreachable at start) follows, and leads once the
/// election can start: it is started again, not given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_election_that_cannot_start_is_tried_again_until_it_leads() {
    let fake = FakeApiServer::new();
    for o in objects() {
        fake.apply(o);
    }
    let config = live_config("created-later", "kube-tas-0", Duration::from_secs(3));
    let serve = common::LiveServe::start(config, fake.client()).await;
    let admin = serve.admin;
    common::eventually("/readyz is 200", WAIT, async || {
        common::get_text(admin, "/readyz").await.0 == StatusCode::OK
    })
    .await;
    // The first attempt has failed (a Lease POST answered 404) and the replica follows.
    common::eventually("the Lease's creation is refused", WAIT, async || {
        fake.request_log().iter().any(|(line, code)| {
            line.starts_with("POST") && line.contains("/leases") && *code == 404
        })
    })
    .await;
    assert!(!reports_leader(admin).await, "no Lease, no leader");

    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "created-later"}}));
    common::eventually(
        "the replica leads once the namespace exists",
        WAIT,
        async || reports_leader(admin).await,
    )
    .await;
    assert!(
        lease(&fake, "created-later").is_some(),
        "the Lease is created"
    );
    serve.stop().await;
}

/// A replica takes part in the election only once its watches have listed everything: until
/// then it neither takes the Lease nor says it leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_leads_only_once_its_watches_are_synced() {
    let fake = FakeApiServer::new();
    for o in objects() {
        fake.apply(o);
    }
    fake.refuse_lists("", "v1", "pods");
    let config = live_config("kube-tas-system", "kube-tas-0", Duration::from_secs(3));
    let serve = common::LiveServe::start(config, fake.client()).await;
    let admin = serve.admin;
    common::eventually("a pod list is refused", WAIT, async || {
        (fake.request_log().iter()).any(|(line, code)| line.contains("/pods") && *code == 503)
    })
    .await;
    // The Lease is free all along: only the unsynced watch keeps the replica out.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!reports_leader(admin).await, "a replica not synced leads");
    let taken = lease(&fake, "kube-tas-system");
    assert!(taken.is_none(), "the Lease was taken: {taken:?}");
    assert_eq!(
        common::get_text(admin, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    fake.accept_lists("", "v1", "pods");
    common::eventually("the replica leads once synced", WAIT, async || {
        reports_leader(admin).await
    })
    .await;
    serve.stop().await;
}

/// A leader shutting down stops planning at once but lets its Lease go only once the Binding
/// it is writing has ended: the next leader would otherwise plan on room that Binding takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_lets_its_lease_go_only_after_the_binding_it_writes() {
    let fake = FakeApiServer::new();
    for o in objects() {
        fake.apply(o);
    }
    let config = live_config("kube-tas-system", "kube-tas-0", Duration::from_secs(15));
    let serve = common::LiveServe::start(config, fake.client()).await;
    let (main, admin) = (serve.main, serve.admin);
    common::eventually("the replica leads", WAIT, async || {
        reports_leader(admin).await
    })
    .await;
    let pod = fake.get("v1", "Pod", Some("default"), "train-0").unwrap();
    let args = json!({"Pod": pod, "NodeNames": ["h1", "h2", "h3", "h4"]});
    let seat = common::post_json(main, "/scheduler/filter", &args).await["NodeNames"].clone();
    let node = seat[0].as_str().expect("a seat").to_string();
    let gate = fake.hold_bindings();
    let bind_args = json!({"PodName": "train-0", "PodNamespace": "default",
        "PodUID": "uid-train-0", "Node": node});
    let bind =
        tokio::spawn(async move { common::post_json(main, "/scheduler/bind", &bind_args).await });
    common::eventually("the Binding is being written", WAIT, async || {
        fake.bindings_waiting() == 1
    })
    .await;
    let stopping = tokio::spawn(serve.stop());
    common::eventually("the leader steps down", WAIT, async || {
        !reports_leader(admin).await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !stopping.is_finished(),
        "shut down with a Binding being written"
    );
    assert_eq!(
        lease_holder(&fake).as_deref(),
        Some("kube-tas-0"),
        "the Lease is kept while the Binding is written"
    );
    gate.add_permits(1);
    let bound = bind.await.unwrap();
    assert_eq!(bound["Error"].as_str().unwrap_or(""), "", "{bound}");
    stopping.await.unwrap();
    assert_ne!(
        lease_holder(&fake).as_deref(),
        Some("kube-tas-0"),
        "the Lease is let go"
    );
    assert_eq!(fake.bindings().len(), 1);
}

/// A leader shut down as on SIGTERM releases the Lease, and the other replica takes it at once
/// (within its Lease reads, a second or two), not after the old lease would have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_released_lease_is_taken_over_before_it_would_have_expired() {
    let fake = FakeApiServer::new();
    for o in objects() {
        fake.apply(o);
    }
    let lease_duration = Duration::from_secs(15);
    let config = |pod: &str| live_config("kube-tas-system", pod, lease_duration);
    let first = common::LiveServe::start(config("kube-tas-0"), fake.client()).await;
    let first_admin = first.admin;
    common::eventually("the first replica leads", WAIT, async || {
        reports_leader(first_admin).await
    })
    .await;
    let second = common::LiveServe::start(config("kube-tas-1"), fake.client()).await;
    let second_admin = second.admin;
    common::eventually("the second replica is ready", WAIT, async || {
        common::get_text(second_admin, "/readyz").await.0 == StatusCode::OK
    })
    .await;
    assert!(!reports_leader(second_admin).await, "one leader at a time");

    first.stop().await;
    let stopped = std::time::Instant::now();
    common::eventually("the second replica leads", lease_duration / 3, async || {
        reports_leader(second_admin).await
    })
    .await;
    assert!(
        stopped.elapsed() < lease_duration / 3,
        "{:?}",
        stopped.elapsed()
    );
    assert_eq!(lease_holder(&fake).as_deref(), Some("kube-tas-1"));
    second.stop().await;
}

/// The flavor's tree is built before the replica is ready and again after each change, ahead
/// of the requests: neither the first `filter` nor one after a node changed builds it, and
/// the nodes it leaves out are on `/metrics` without a request (a scrape builds no tree).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trees_are_built_before_ready_and_after_each_change_ahead_of_requests() {
    const BUILDS: &str = "kube_tas_topology_tree_builds_total";
    const CORDONED: &str =
        "kube_tas_flavor_nodes_left_out{flavor=\"tas-flavor\",reason=\"unschedulable\"}";
    let (fake, serve) = lone_replica_ready(|c| c).await;
    let (main, admin) = (serve.main, serve.admin);
    let ready = metric(admin, BUILDS).await.expect("the build counter");
    assert_eq!(ready, 1, "one flavor, built once before ready");
    let pod = fake.get("v1", "Pod", Some("default"), "train-0").unwrap();
    let args = json!({"Pod": pod, "NodeNames": ["h1", "h2", "h3", "h4"]});
    let answer = common::post_json(main, "/scheduler/filter", &args).await;
    assert_eq!(
        answer["NodeNames"].as_array().map(Vec::len),
        Some(1),
        "{answer}"
    );
    assert_eq!(
        metric(admin, BUILDS).await,
        Some(ready),
        "the filter built no tree"
    );
    assert_eq!(metric(admin, CORDONED).await, None);

    // h4 is cordoned: the tree is built again without a request, and shows it left out.
    let mut h4 = fake.get("v1", "Node", None, "h4").unwrap();
    h4["spec"]["unschedulable"] = json!(true);
    fake.apply(h4);
    common::eventually("the tree built again after the change", WAIT, async || {
        metric(admin, CORDONED).await == Some(1)
    })
    .await;
    let changed = metric(admin, BUILDS).await.expect("the build counter");
    assert_eq!(changed, ready + 1, "built once for the change");
    let answer = common::post_json(main, "/scheduler/filter", &args).await;
    assert!(answer.is_object(), "{answer}");
    assert_eq!(
        metric(admin, BUILDS).await,
        Some(changed),
        "the filter built no tree"
    );
    serve.stop().await;
}

/// Under node churn with fresh names (an autoscaler's), the ids of deleted nodes are given
/// back and taken by the next new nodes: the ids in use stay at the nodes known, and a node
/// on a reused id is placed on like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleted_nodes_give_their_ids_to_new_ones() {
    const NODES: &str = "kube_tas_cluster_nodes";
    const IDS: &str = "kube_tas_cluster_node_ids";
    let (fake, serve) = lone_replica_ready(|c| ServeConfig {
        node_id_sweep: Duration::from_millis(100),
        ..c
    })
    .await;
    let (main, admin) = (serve.main, serve.admin);
    assert_eq!(
        (metric(admin, NODES).await, metric(admin, IDS).await),
        (Some(4), Some(4))
    );
    let mut h4 = fake.get("v1", "Node", None, "h4").unwrap();
    // h4 goes and h5 comes, then h6 (the autoscaler names each afresh).
    for name in ["h5", "h6"] {
        let gone = h4["metadata"]["name"].as_str().unwrap().to_string();
        assert!(fake.delete("v1", "Node", None, &gone));
        h4["metadata"]["name"] = json!(name);
        h4["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        h4["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        h4["metadata"].as_object_mut().unwrap().remove("uid");
        fake.apply(h4.clone());
        common::eventually("the gone node's id given back", WAIT, async || {
            metric(admin, NODES).await == Some(4) && metric(admin, IDS).await == Some(4)
        })
        .await;
    }
    // A gang pod's seat may be the new node, on a reused id: the filter answers one of the
    // nodes that exist.
    let pod = fake.get("v1", "Pod", Some("default"), "train-0").unwrap();
    let args = json!({"Pod": pod, "NodeNames": ["h1", "h2", "h3", "h6"]});
    let answer = common::post_json(main, "/scheduler/filter", &args).await;
    let names = answer["NodeNames"].as_array().expect("node names");
    assert_eq!(names.len(), 1, "{answer}");
    assert!(
        ["h1", "h2", "h3", "h6"].contains(&names[0].as_str().unwrap()),
        "{answer}"
    );
    serve.stop().await;
}
