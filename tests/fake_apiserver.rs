//! The fake API server (`tests/common/fake_apiserver.rs`) against the real clients: kube's typed
//! `Api`, kube-runtime's `watcher` and `reflector`, and kube-lease-manager.

#[path = "common/fake_apiserver.rs"]
mod fake_apiserver;

use std::time::Duration;

use fake_apiserver::FakeApiServer;
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams, WatchEvent, WatchParams,
};
use kube::runtime::reflector;
use kube::runtime::watcher;
use kube::runtime::watcher::Event;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

fn node(name: &str, pool: &str) -> Value {
    let metadata = json!({ "name": name, "labels": { "pool": pool } });
    json!({ "apiVersion": "v1", "kind": "Node", "metadata": metadata })
}

fn pod(ns: &str, name: &str, node: Option<&str>) -> Value {
    let app = if name.ends_with('1') { "db" } else { "web" };
    let metadata = json!({ "name": name, "namespace": ns, "labels": { "app": app } });
    let spec = json!({ "containers": [{ "name": "c", "image": "busybox" }] });
    let mut pod = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                          "status": { "phase": "Pending" } });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = node.into();
        pod["status"]["phase"] = "Running".into();
    }
    pod
}

fn api_code(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String, String) {
    match result {
        Err(kube::Error::Api(s)) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn next<K>(
    stream: &mut (impl Stream<Item = Result<Event<K>, watcher::Error>> + Unpin),
) -> Result<Event<K>, watcher::Error> {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("a watcher event in time")
        .expect("the watcher goes on")
}

fn describe(event: &Event<Node>) -> String {
    let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
    match event {
        Event::Init => "Init".into(),
        Event::InitApply(n) => format!("InitApply {}", name(n)),
        Event::InitDone => "InitDone".into(),
        Event::Apply(n) => format!("Apply {}", name(n)),
        Event::Delete(n) => format!("Delete {}", name(n)),
    }
}

async fn expect_events(
    stream: &mut (impl Stream<Item = Result<Event<Node>, watcher::Error>> + Unpin),
    want: &[&str],
) {
    for w in want {
        let event = next(stream).await.expect("no watcher error");
        assert_eq!(describe(&event), *w);
    }
}

#[tokio::test]
async fn lists_page_consistently_and_errors_are_statuses() {
    let server = FakeApiServer::new();
    for i in 1..=7 {
        server.apply(pod(
            "default",
            &format!("p{i}"),
            (i % 2 == 0).then_some("n1"),
        ));
    }
    server.apply(pod("kube-system", "other", None));
    let pods: Api<Pod> = Api::default_namespaced(server.client());

    let first = pods
        .list(&ListParams::default().limit(3))
        .await
        .expect("first page");
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    let rv = first.metadata.resource_version.clone();
    // Writes after the first page do not show in the later pages.
    server.apply(pod("default", "p99", None));
    assert!(server.delete("v1", "Pod", Some("default"), "p5"));
    let mut names: Vec<String> = first
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let mut token = first.metadata.continue_;
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = pods
            .list(&ListParams::default().limit(3).continue_token(&t))
            .await
            .expect("next page");
        assert_eq!(
            page.metadata.resource_version, rv,
            "every page at the first page's resourceVersion"
        );
        names.extend(page.items.iter().filter_map(|p| p.metadata.name.clone()));
        token = page.metadata.continue_;
    }
    assert_eq!(names, ["p1", "p2", "p3", "p4", "p5", "p6", "p7"]);
    // A fresh list sees the writes.
    let now = pods.list(&ListParams::default()).await.expect("list");
    assert_eq!(now.items.len(), 7);
    assert!(
        now.items
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some("p5"))
    );

    let all: Api<Pod> = Api::all(server.client());
    assert_eq!(
        all.list(&ListParams::default())
            .await
            .expect("all namespaces")
            .items
            .len(),
        8
    );
    let unscheduled = all
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .expect("field selector");
    assert_eq!(
        unscheduled.items.len(),
        5,
        "p1 p3 p7 p99 and kube-system/other"
    );
    let web_running = pods
        .list(
            &ListParams::default()
                .labels("app=web")
                .fields("status.phase=Running"),
        )
        .await
        .expect("both");
    assert_eq!(web_running.items.len(), 3, "p2 p4 p6");
    let not_db = pods
        .list(&ListParams::default().labels("app notin (db),app"))
        .await
        .expect("set-based");
    assert_eq!(not_db.items.len(), 6);

    let (code, reason, message) = api_code(pods.get("missing").await);
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (404, "NotFound", "pods \"missing\" not found")
    );
    let (code, reason, _) = api_code(
        pods.list(&ListParams::default().fields("spec.bogus=x"))
            .await,
    );
    assert_eq!((code, reason.as_str()), (400, "BadRequest"));
    let existing: Pod = serde_json::from_value(pod("default", "p1", None)).expect("a pod");
    let (code, reason, _) = api_code(pods.create(&PostParams::default(), &existing).await);
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    let elsewhere: Api<Pod> = Api::namespaced(server.client(), "nowhere");
    let mut existing = existing;
    existing.metadata.namespace = None;
    let (code, _, message) = api_code(elsewhere.create(&PostParams::default(), &existing).await);
    assert_eq!(
        (code, message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );
}

#[tokio::test]
async fn writes_follow_the_api_rules() {
    let server = FakeApiServer::new();
    let client = server.client();
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    let lease: Lease =
        serde_json::from_value(json!({ "metadata": { "name": "l" }, "spec": {} })).expect("lease");
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create");
    let stale = created.clone();
    let patched = leases
        .patch(
            "l",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "leaseDurationSeconds": 5 } })),
        )
        .await
        .expect("merge patch");
    assert_eq!(
        patched.spec.as_ref().and_then(|s| s.lease_duration_seconds),
        Some(5)
    );
    let (code, reason, _) = api_code(leases.replace("l", &PostParams::default(), &stale).await);
    assert_eq!(
        (code, reason.as_str()),
        (409, "Conflict"),
        "PUT with a stale resourceVersion"
    );
    // Server-side apply: a second manager changing an owned field conflicts unless forced.
    let apply = |holder: &str| {
        Patch::Apply(
            json!({ "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "spec": { "holderIdentity": holder } }),
        )
    };
    leases
        .patch("l", &PatchParams::apply("one"), &apply("one"))
        .await
        .expect("first applier takes the field");
    let (code, reason, message) = api_code(
        leases
            .patch("l", &PatchParams::apply("two"), &apply("two"))
            .await,
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"one\": .spec.holderIdentity"
    );
    leases
        .patch("l", &PatchParams::apply("two"), &apply("one"))
        .await
        .expect("same value: shared, no conflict");
    let forced = leases
        .patch("l", &PatchParams::apply("two").force(), &apply("two"))
        .await
        .expect("forced");
    assert_eq!(
        forced.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("two")
    );
    // A custom resource takes no strategic merge patch; junk bodies and paths get Statuses.
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "ResourceFlavor");
    let flavors: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "resourceflavors"),
    );
    let flavor = json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                         "metadata": { "name": "f" } });
    server.apply(flavor);
    let (code, _, _) = api_code(
        flavors
            .patch(
                "f",
                &PatchParams::default(),
                &Patch::Strategic(json!({ "spec": {} })),
            )
            .await,
    );
    assert_eq!(code, 415);
    let (code, body) = raw(
        &server,
        "POST",
        "/api/v1/namespaces/default/pods",
        "{not json",
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (400, Some("BadRequest")));
    let (code, body) = raw(&server, "GET", "/apis/example.com/v1/widgets", "").await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            404,
            Some("the server could not find the requested resource")
        )
    );
    assert!(
        server
            .requests()
            .contains(&"GET /apis/example.com/v1/widgets".to_string())
    );
}

/// A request straight to the router through kube's client, for what typed `Api` cannot send.
async fn raw(server: &FakeApiServer, method: &str, uri: &str, body: &str) -> (u16, Value) {
    raw_with(server, method, uri, "application/json", body).await
}

/// A GET's status and body as text.
async fn raw_text(server: &FakeApiServer, uri: &str) -> (u16, String) {
    use http_body_util::BodyExt;
    let request = axum::http::Request::get(uri)
        .body(kube::client::Body::empty())
        .expect("a request");
    let response = server.client().send(request).await.expect("a response");
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.expect("a body");
    (
        code,
        String::from_utf8_lossy(&bytes.to_bytes()).into_owned(),
    )
}

#[tokio::test]
async fn objects_are_served_as_stored_by_lists_gets_and_watches() {
    let server = FakeApiServer::new();
    let mut n1 = node("n1", "a");
    n1["spec"] =
        json!({ "unschedulable": true, "taints": [{ "key": "k", "effect": "NoSchedule" }] });
    n1["metadata"]["annotations"] = json!({ "note": "a \"quoted\" value" });
    let n1 = server.apply(n1);
    let topology = server.apply(json!({ "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology", "metadata": { "name": "t" },
        "spec": { "levels": [{ "nodeLabel": "rack" }] } }));
    assert_eq!(server.get("v1", "Node", None, "n1"), Some(n1.clone()));
    let mut item = n1.clone();
    let fields = item.as_object_mut().expect("an object");
    fields.remove("apiVersion");
    fields.remove("kind");

    // A built-in kind's list items carry no apiVersion or kind; a custom resource's do.
    let (code, list) = raw(&server, "GET", "/api/v1/nodes", "").await;
    assert_eq!(
        (code, &list["kind"], &list["apiVersion"]),
        (200, &json!("NodeList"), &json!("v1"))
    );
    assert_eq!(list["items"], json!([item]));
    let (_, list) = raw(
        &server,
        "GET",
        "/apis/kueue.x-k8s.io/v1beta2/topologies",
        "",
    )
    .await;
    assert_eq!(list["items"], json!([topology]));
    // Selectors read the stored fields: a boolean compares as its text, an absent field as the
    // field's default.
    server.apply(node("n2", "c"));
    for value in ["true", "false"] {
        let uri = format!("/api/v1/nodes?fieldSelector=spec.unschedulable%3D{value}");
        let (_, list) = raw(&server, "GET", &uri, "").await;
        let names: Vec<&Value> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| &i["metadata"]["name"])
            .collect();
        let want = if value == "true" { "n1" } else { "n2" };
        assert_eq!(names, [want], "{uri}");
    }
    assert!(server.delete("v1", "Node", None, "n2"));
    let (_, one) = raw(&server, "GET", "/api/v1/nodes/n1", "").await;
    assert_eq!(one, n1);

    // A watch from "0" sends the object whole; a MODIFIED that leaves the selector arrives as
    // DELETED with the previous state at the event's resourceVersion.
    let mut moved = n1.clone();
    moved["metadata"]["labels"]["pool"] = json!("b");
    let moved = server.apply(moved);
    let (code, text) = raw_text(
        &server,
        "/api/v1/nodes?watch=true&resourceVersion=0&timeoutSeconds=1",
    )
    .await;
    assert_eq!(code, 200);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines, [json!({ "type": "ADDED", "object": moved })]);
    let (_, text) = raw_text(
        &server,
        &format!(
            "/api/v1/nodes?watch=true&labelSelector=pool%3Da&resourceVersion={}&timeoutSeconds=1",
            n1["metadata"]["resourceVersion"]
                .as_str()
                .expect("a resourceVersion")
        ),
    )
    .await;
    let mut gone = n1.clone();
    gone["metadata"]["resourceVersion"] = moved["metadata"]["resourceVersion"].clone();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines, [json!({ "type": "DELETED", "object": gone })]);
}

async fn raw_with(
    server: &FakeApiServer,
    method: &str,
    uri: &str,
    ctype: &str,
    body: &str,
) -> (u16, Value) {
    use http_body_util::BodyExt;
    let request = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ctype)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .expect("a request");
    let response = server.client().send(request).await.expect("a response");
    let code = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn watch_nodes(streaming: bool) {
    let server = FakeApiServer::new();
    server.apply(node("n1", "a"));
    server.apply(node("n2", "a"));
    let nodes: Api<Node> = Api::all(server.client());
    let config = if streaming {
        watcher::Config::default().streaming_lists()
    } else {
        watcher::Config::default()
    };
    let mut events = watcher(nodes.clone(), config).boxed();
    expect_events(
        &mut events,
        &["Init", "InitApply n1", "InitApply n2", "InitDone"],
    )
    .await;
    server.apply(node("n3", "b"));
    expect_events(&mut events, &["Apply n3"]).await;
    server.delete("v1", "Node", None, "n1");
    expect_events(&mut events, &["Delete n1"]).await;
    let asked = server
        .requests()
        .iter()
        .any(|r| r.contains("sendInitialEvents=true"));
    assert_eq!(asked, streaming);

    // With a label selector, a node that stops matching is a Delete, one that starts an Apply.
    let mut pool_a = watcher(nodes, watcher::Config::default().labels("pool=a")).boxed();
    expect_events(&mut pool_a, &["Init", "InitApply n2", "InitDone"]).await;
    server.apply(node("n2", "b"));
    server.apply(node("n3", "a"));
    expect_events(&mut pool_a, &["Delete n2", "Apply n3"]).await;
}

#[tokio::test]
async fn watcher_lists_then_watches() {
    watch_nodes(false).await;
}

#[tokio::test]
async fn watcher_streaming_lists() {
    watch_nodes(true).await;
}

#[tokio::test]
async fn raw_watch_bookmarks_and_timeout() {
    let server = FakeApiServer::new();
    server.apply(node("n1", "a"));
    let nodes: Api<Node> = Api::all(server.client());
    let rv = server.resource_version().to_string();
    let params = WatchParams::default().timeout(2);
    let started = std::time::Instant::now();
    let events: Vec<_> = tokio::time::timeout(
        WAIT,
        nodes.watch(&params, &rv).await.expect("watch").collect(),
    )
    .await
    .expect("the watch ends");
    let bookmarks = events
        .iter()
        .filter(|e| matches!(e, Ok(WatchEvent::Bookmark(_))))
        .count();
    assert!(
        bookmarks >= 2,
        "one when caught up, then every second: {events:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2) && started.elapsed() < Duration::from_secs(4)
    );
    // From a compacted resourceVersion: an ERROR event with 410 Expired.
    server.apply(node("n2", "a"));
    server.compact();
    let mut stream = nodes
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    match stream.try_next().await {
        Ok(Some(WatchEvent::Error(s))) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn compaction_makes_the_watcher_relist() {
    let server = FakeApiServer::new();
    for n in ["n1", "n2"] {
        server.apply(node(n, "a"));
    }
    let (store, writer) = reflector::store::<Node>();
    let nodes: Api<Node> = Api::all(server.client());
    let mut events = reflector(writer, watcher(nodes, watcher::Config::default())).boxed();
    expect_events(
        &mut events,
        &["Init", "InitApply n1", "InitApply n2", "InitDone"],
    )
    .await;
    server.apply(node("n3", "a"));
    expect_events(&mut events, &["Apply n3"]).await;
    // The gap: the watcher is not reading while n1 goes and the history is compacted.
    server.delete("v1", "Node", None, "n1");
    server.compact();
    match next(&mut events).await {
        Err(watcher::Error::WatchError(s)) => assert_eq!(s.code, 410),
        other => panic!(
            "expected a 410 watch error, got {:?}",
            other.map(|e| describe(&e))
        ),
    }
    expect_events(
        &mut events,
        &["Init", "InitApply n2", "InitApply n3", "InitDone"],
    )
    .await;
    let mut names: Vec<String> = store
        .state()
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["n2", "n3"], "the deletion made in the gap is seen");
    let lists = server
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/nodes?") && !r.contains("watch="))
        .count();
    assert_eq!(lists, 2);
}

#[tokio::test]
async fn binding_sets_the_node_once() {
    let server = FakeApiServer::new();
    server.apply(pod("default", "p", None));
    server.apply(pod("default", "q", None));
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let rv = server.resource_version().to_string();
    let mut watch = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let binding = |pod: &str, node: &str, uid: Option<&str>| Binding {
        metadata: ObjectMeta {
            name: Some(pod.into()),
            uid: uid.map(Into::into),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.into()),
            ..Default::default()
        },
    };
    let status: kube::core::Status = pods
        .create_subresource(
            "binding",
            "p",
            &PostParams::default(),
            &binding("p", "n1", None),
        )
        .await
        .expect("bound");
    assert_eq!(status.code, 201);
    let bound = pods.get("p").await.expect("pod");
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("n1")
    );
    let conditions = bound.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    match tokio::time::timeout(WAIT, watch.try_next())
        .await
        .expect("an event")
    {
        Ok(Some(WatchEvent::Modified(p))) => {
            assert_eq!(p.spec.and_then(|s| s.node_name).as_deref(), Some("n1"))
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    let again = pods
        .create_subresource::<_, Value>(
            "binding",
            "p",
            &PostParams::default(),
            &binding("p", "n2", None),
        )
        .await;
    let (code, reason, message) = api_code(again);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(
        message,
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \
         \"n1\""
    );
    let missing = pods
        .create_subresource::<_, Value>(
            "binding",
            "gone",
            &PostParams::default(),
            &binding("gone", "n1", None),
        )
        .await;
    assert_eq!(api_code(missing).0, 404);
    let wrong_uid = pods
        .create_subresource::<_, Value>(
            "binding",
            "q",
            &PostParams::default(),
            &binding("q", "n1", Some("not-q")),
        )
        .await;
    let (code, _, message) = api_code(wrong_uid);
    assert!(
        code == 409 && message.contains("Precondition failed: UID in precondition: not-q"),
        "{message}"
    );

    server.fail_bindings(1, 500, "InternalError", "etcdserver: request timed out");
    let injected = pods
        .create_subresource::<_, Value>(
            "binding",
            "q",
            &PostParams::default(),
            &binding("q", "n2", None),
        )
        .await;
    assert_eq!(
        api_code(injected),
        (
            500,
            "InternalError".into(),
            "etcdserver: request timed out".into()
        )
    );
    pods.create_subresource::<_, Value>(
        "binding",
        "q",
        &PostParams::default(),
        &binding("q", "n2", None),
    )
    .await
    .expect("after the failure");
    let recorded: Vec<_> = server
        .bindings()
        .iter()
        .map(|b| b["target"]["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(recorded, ["n1", "n2"]);
}

const LEASE_SECONDS: u64 = 3;

async fn manager(client: &kube::Client, lease: &str, identity: &str) -> LeaseManager {
    // `with_identity` would keep the field manager of the builder's random identity.
    LeaseManagerBuilder::new(client.clone(), lease)
        .with_namespace("default")
        .with_parameters(LeaseParams::new(identity, LEASE_SECONDS, 1))
        .build()
        .await
        .expect("a lease manager")
}

#[tokio::test]
async fn lease_manager_elects_one_leader() {
    let server = FakeApiServer::new();
    let client = server.client();
    // Race two managers for a free lease, polled in one task so both read it free before
    // either writes; retry on a new lease in the rare interleaving where one reads it taken.
    let mut raced = None;
    for round in 0..10 {
        let lease = format!("tas-leader-{round}");
        let (a, b) = (
            manager(&client, &lease, "a").await,
            manager(&client, &lease, "b").await,
        );
        let winner = tokio::select! {
            won = a.changed() => { assert!(won.expect("a")); "a" }
            won = b.changed() => { assert!(won.expect("b")); "b" }
        };
        let path = format!("PATCH /apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}?");
        if server
            .request_log()
            .iter()
            .any(|(r, code)| *code == 409 && r.starts_with(&path))
        {
            raced = Some((lease, a, b, winner));
            break;
        }
    }
    let (lease, a, b, winner) =
        raced.expect("the contender's apply got a 409 Conflict at least once");
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    let holder = |l: Lease| l.spec.and_then(|s| s.holder_identity).unwrap_or_default();
    assert_eq!(holder(leases.get(&lease).await.expect("lease")), winner);
    // Another manager applying the holder without force is refused, as the contender was.
    let intrude = Patch::Apply(
        json!({ "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "spec": { "holderIdentity": "intruder" } }),
    );
    let (code, _, message) = api_code(
        leases
            .patch(&lease, &PatchParams::apply("intruder"), &intrude)
            .await,
    );
    assert_eq!(code, 409);
    assert!(
        message.contains(&format!("conflict with \"kube-lease-manager-{winner}\""))
            && message.contains(".spec.holderIdentity"),
        "{message}"
    );

    let (rx_a, task_a) = a.watch().await;
    let (rx_b, task_b) = b.watch().await;
    let (mut leader_rx, mut other_rx, leader_task, other_task) = if winner == "a" {
        (rx_a, rx_b, task_a, task_b)
    } else {
        (rx_b, rx_a, task_b, task_a)
    };
    // Several seconds (past a renewal) of exactly one leader.
    for _ in 0..50 {
        let (l, o) = (
            *leader_rx.borrow_and_update(),
            *other_rx.borrow_and_update(),
        );
        assert!(l && !o, "exactly one leader: leader {l}, other {o}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The leader's manager goes (its watch releases the lease); the other takes over in time.
    drop(leader_rx);
    tokio::time::timeout(WAIT, leader_task)
        .await
        .expect("the watch ends")
        .expect("joined")
        .expect("released");
    let released = std::time::Instant::now();
    tokio::time::timeout(
        Duration::from_secs(LEASE_SECONDS + 1),
        other_rx.wait_for(|leader| *leader),
    )
    .await
    .expect("the other becomes leader within the lease duration")
    .expect("channel open");
    assert!(released.elapsed() <= Duration::from_secs(LEASE_SECONDS + 1));
    let other = if winner == "a" { "b" } else { "a" };
    assert_eq!(holder(leases.get(&lease).await.expect("lease")), other);
    drop(other_rx);
    let _ = tokio::time::timeout(WAIT, other_task).await;
}

#[tokio::test]
async fn unserved_crd_fails_the_watcher() {
    let server = FakeApiServer::new();
    server.unserve("kueue.x-k8s.io", "v1beta2", "topologies");
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Topology");
    let topologies: Api<DynamicObject> = Api::all_with(
        server.client(),
        &ApiResource::from_gvk_with_plural(&gvk, "topologies"),
    );
    let mut events = watcher(topologies, watcher::Config::default()).boxed();
    assert!(matches!(next(&mut events).await, Ok(Event::Init)));
    match next(&mut events).await {
        Err(watcher::Error::InitialListFailed(kube::Error::Api(s))) => assert_eq!(s.code, 404),
        other => panic!("expected a 404, got {:?}", other.is_ok()),
    }
    server.serve_again("kueue.x-k8s.io", "v1beta2", "topologies");
    assert!(matches!(next(&mut events).await, Ok(Event::Init)));
    assert!(matches!(next(&mut events).await, Ok(Event::InitDone)));
}

#[tokio::test]
async fn status_subresource_and_apply_ownership() {
    let server = FakeApiServer::new();
    let client = server.client();
    let raw_patch = |path: &str, ctype: &str, body: Value| {
        let (server, path, ctype) = (server.clone(), path.to_string(), ctype.to_string());
        async move { raw_with(&server, "PATCH", &path, &ctype, &body.to_string()).await }
    };
    // Main-resource writes keep .status; status writes keep the rest; spec changes bump generation.
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    let job: Job = serde_json::from_value(
        json!({ "metadata": { "name": "j" }, "spec": { "parallelism": 1,
        "template": { "spec": { "containers": [] } } }, "status": { "active": 9 } }),
    )
    .expect("job");
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("create");
    assert!(created.status.is_none(), "status is not taken on create");
    let status = json!({ "status": { "active": 2 }, "spec": { "parallelism": 5 } });
    let patched = jobs
        .patch_status("j", &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("status");
    assert_eq!(patched.status.as_ref().and_then(|s| s.active), Some(2));
    assert_eq!(patched.spec.as_ref().and_then(|s| s.parallelism), Some(1));
    assert_eq!(patched.metadata.generation, Some(1));
    let spec = json!({ "status": { "active": 7 }, "spec": { "parallelism": 3 } });
    let patched = jobs
        .patch("j", &PatchParams::default(), &Patch::Merge(spec))
        .await
        .expect("spec");
    assert_eq!(patched.status.and_then(|s| s.active), Some(2));
    assert_eq!(patched.metadata.generation, Some(2));
    // Apply: fields an applier drops go unless another manager owns them.
    let path = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/f?fieldManager=m";
    let apply = |spec: Value| {
        json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                      "metadata": { "name": "f" }, "spec": spec })
    };
    let (code, _) = raw_patch(
        path,
        "application/apply-patch+yaml",
        apply(json!({ "a": 1, "b": 2 })),
    )
    .await;
    assert_eq!(code, 201, "apply creates");
    let merge = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/f?fieldManager=other";
    raw_patch(
        merge,
        "application/merge-patch+json",
        json!({ "spec": { "c": 3 } }),
    )
    .await;
    let (code, body) = raw_patch(
        path,
        "application/apply-patch+yaml",
        apply(json!({ "a": 1, "c": 3 })),
    )
    .await;
    assert_eq!(
        (code, &body["spec"]),
        (200, &json!({ "a": 1, "c": 3 })),
        "b dropped, c shared"
    );
    let (code, body) = raw_patch(
        path,
        "application/apply-patch+yaml",
        apply(json!({ "a": 1 })),
    )
    .await;
    assert_eq!(
        (code, &body["spec"]),
        (200, &json!({ "a": 1, "c": 3 })),
        "c still owned by other"
    );
    let test_op = json!([{ "op": "test", "path": "/spec/a", "value": 2 }]);
    let (code, _) = raw_patch(path, "application/json-patch+json", test_op).await;
    assert_eq!(code, 422);
    let stored = server
        .get("kueue.x-k8s.io/v1beta2", "ResourceFlavor", None, "f")
        .expect("stored");
    assert_eq!(stored["metadata"]["generation"], 3);
}
