//! The RBAC of `manifests/` is exactly what `kube-tas serve` uses. `serve` runs in live mode,
//! configured from the Deployment's own args, against the recording fake API server through
//! everything it does in a cluster: every watch until ready, the election and the leader label,
//! and in two workload namespaces a gang planned (an Event created), two refused Bindings (the
//! second Event patched into a series) and a Binding written, then the shutdown (label removed,
//! Lease released). Each request is mapped to what the API server's RBAC authorizer checks
//! (verb, API group, resource and subresource, namespace, name) and must be granted to the
//! Deployment's service account by a ClusterRole through a ClusterRoleBinding, or by a Role in
//! the Role's namespace. Every (verb, group, resource) a rule grants must have been requested,
//! must allow a request no other rule allows, and, granted in every namespace, must have been
//! used cluster-wide or in more than one namespace.

mod common;
#[path = "common/fake_apiserver.rs"]
mod fake_apiserver;
#[path = "common/manifests.rs"]
mod manifests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::StatusCode;
use clap::Parser;
use fake_apiserver::FakeApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube_tas::cli::{Cli, Command};
use kube_tas::cluster::live::leader::LEADER_LABEL;
use kube_tas::server::ServeConfig;
use serde_json::{Value, json};

const RACK: &str = "cloud.provider.com/topology-rack";

/// Granted on purpose although this test does not drive it: `(verb, group, resource, why)`.
/// Each entry is checked to be still granted and still not requested, so it goes once the test
/// drives it. Empty: kube-lease-manager reads the Lease (get), creates it when missing (create,
/// driven here: the fake starts without it) and takes, renews and releases it with patches; it
/// never updates (PUT) or deletes the Lease, so neither is granted.
const UNDRIVEN: &[(&str, &str, &str, &str)] = &[];

/// One request as the RBAC authorizer sees it (k8s.io/apiserver's RequestInfo).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Access {
    verb: String,
    group: String,
    /// `resource` or `resource/subresource`.
    resource: String,
    /// "" for cluster-scoped and all-namespaces requests.
    namespace: String,
    /// "" for collections (and creates, whose name is in the body).
    name: String,
}

/// What the authorizer makes of `METHOD path?query`, or the non-resource path.
/// How long a condition may take to come true.
const WAIT: Duration = Duration::from_secs(20);

fn access_of(line: &str) -> Result<Access, String> {
    let (method, target) = line.split_once(' ').expect("METHOD path");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query: BTreeMap<&str, &str> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, mut rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return Err(path.to_string()),
    };
    let mut namespace = "";
    if let ["namespaces", ns, more @ ..] = rest {
        namespace = ns;
        // `namespaces/NAME` and its status/finalize are the Namespace object itself.
        if !matches!(more, [] | ["status" | "finalize", ..]) {
            rest = more;
        }
    }
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, "", ""),
        [resource, name] => (*resource, *name, ""),
        [resource, name, sub, ..] => (*resource, *name, *sub),
        [] => return Err(path.to_string()),
    };
    let mut verb = match method {
        "GET" | "HEAD" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        other => panic!("{other}: a method the authorizer does not map"),
    };
    if name.is_empty() {
        verb = match verb {
            "get" if matches!(query.get("watch"), Some(&"true" | &"1")) => "watch",
            "get" => "list",
            "delete" => "deletecollection",
            v => v,
        };
    }
    let resource = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    Ok(Access {
        verb: verb.to_string(),
        group: group.to_string(),
        resource,
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

/// One rule that applies to the service account, and where: `None` everywhere (a
/// ClusterRole's, through a ClusterRoleBinding), `Some(ns)` only in `ns` (a Role's).
#[derive(Debug, Clone)]
struct Grant {
    origin: String,
    namespace: Option<String>,
    rule: PolicyRule,
}

fn list(v: &Option<Vec<String>>) -> Vec<String> {
    v.clone().unwrap_or_default()
}

/// As the RBAC authorizer's RuleAllows, for resource requests.
fn allows(grant: &Grant, a: &Access) -> bool {
    let r = &grant.rule;
    grant.namespace.as_ref().is_none_or(|ns| *ns == a.namespace)
        && r.verbs.contains(&a.verb)
        && list(&r.api_groups).contains(&a.group)
        && list(&r.resources).contains(&a.resource)
        && (list(&r.resource_names).is_empty() || list(&r.resource_names).contains(&a.name))
}

/// Every rule granted to the Deployment's service account by the manifests.
fn grants(r: &manifests::Rendered, account: (&str, &str)) -> Vec<Grant> {
    let bound = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        subjects.iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && s.name == account.0
                && s.namespace.as_deref() == Some(account.1)
        })
    };
    let mut out = Vec::new();
    for b in r.all_typed::<ClusterRoleBinding>("ClusterRoleBinding") {
        if !bound(&b.subjects) {
            continue;
        }
        let role: ClusterRole = manifests::typed(r.named("ClusterRole", &b.role_ref.name).unwrap());
        for rule in role.rules.into_iter().flatten() {
            out.push(Grant {
                origin: format!("ClusterRole {}", b.role_ref.name),
                namespace: None,
                rule,
            });
        }
    }
    for b in r.all_typed::<RoleBinding>("RoleBinding") {
        if !bound(&b.subjects) {
            continue;
        }
        let ns = b.metadata.namespace.clone().unwrap();
        let role: Role = r
            .all_typed::<Role>("Role")
            .into_iter()
            .find(|role| {
                role.metadata.name.as_deref() == Some(b.role_ref.name.as_str())
                    && role.metadata.namespace.as_deref() == Some(ns.as_str())
            })
            .unwrap_or_else(|| panic!("RoleBinding to a missing Role {ns}/{}", b.role_ref.name));
        for rule in role.rules.into_iter().flatten() {
            out.push(Grant {
                origin: format!("Role {ns}/{}", b.role_ref.name),
                namespace: Some(ns.clone()),
                rule,
            });
        }
    }
    for g in &out {
        let r = &g.rule;
        for field in [&Some(r.verbs.clone()), &r.api_groups, &r.resources] {
            assert!(
                !list(field).iter().any(|v| v.contains('*')),
                "{}: no wildcards, only what is used: {r:?}",
                g.origin
            );
        }
        assert!(
            list(&r.non_resource_urls).is_empty(),
            "{}: kube-tas calls no non-resource URL",
            g.origin
        );
    }
    out
}

// Driving serve ---------------------------------------------------------------------------------

/// The namespaces of the workloads: two, so that what kube-tas does in its workloads'
/// namespaces (Events, Bindings) shows as done in more than one.
const WORKLOAD_NAMESPACES: [&str; 2] = ["default", "ml"];

/// kube-tas's own pod in `namespace`, and a cluster of four nodes in two racks with Kueue's
/// objects and, in each workload namespace, a LocalQueue and a 2-pod Job requiring one rack
/// whose first pod is pending.
fn objects(namespace: &str, pod: &str) -> Vec<Value> {
    let mut v = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace, "uid": "self",
                "labels": {"app.kubernetes.io/name": "kube-tas"}},
            "spec": {"containers": [{"name": "kube-tas", "image": "kube-tas"}]},
            "status": {"phase": "Running"}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "tas-flavor"}, "spec": {"topologyName": "default"}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name":
                "tas-flavor", "resources": [{"name": "cpu", "nominalQuota": "100"}]}]}]}}),
    ];
    for ns in WORKLOAD_NAMESPACES {
        v.extend([
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": ns}, "spec": {"clusterQueue": "cq"}}),
            json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "train", "namespace": ns, "uid": format!("job-{ns}"),
                    "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                    "template": {"metadata": {"annotations":
                        {"kueue.x-k8s.io/podset-required-topology": RACK}},
                        "spec": {"containers": [{"name": "w", "image": "pause",
                            "resources": {"requests": {"cpu": "2"}}}]}}}}),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "train-0", "namespace": ns, "uid": format!("pod-{ns}"),
                    "annotations": {"batch.kubernetes.io/job-completion-index": "0",
                        "kueue.x-k8s.io/podset-required-topology": RACK},
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                        "name": "train", "uid": format!("job-{ns}"), "controller": true}]},
                "spec": {"containers": [{"name": "w", "image": "pause",
                    "resources": {"requests": {"cpu": "2"}}}]},
                "status": {"phase": "Pending"}}),
        ]);
    }
    for (name, rack) in [("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")] {
        v.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {RACK: rack, "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    v
}

/// The node of the pod's seat, once `filter` has one.
async fn seat(main: SocketAddr, args: &Value) -> String {
    let mut node = String::new();
    common::eventually("the pod has a seat", WAIT, async || {
        let answer = common::post_json(main, "/scheduler/filter", args).await;
        match answer["NodeNames"].as_array().map(Vec::as_slice) {
            Some([n]) => {
                node = n.as_str().unwrap().to_string();
                true
            }
            _ => false,
        }
    })
    .await;
    node
}

/// Plans the Job in `ns` (a TopologyPlanned Event), has its first two Bindings refused
/// (BindingFailed, created, then patched into a series of 2), then binds.
async fn place_gang(fake: &FakeApiServer, main: SocketAddr, ns: &str) {
    let pod = fake.get("v1", "Pod", Some(ns), "train-0").unwrap();
    let uid = pod["metadata"]["uid"].clone();
    let filter = json!({"Pod": pod, "NodeNames": ["h1", "h2", "h3", "h4"]});
    fake.fail_bindings(2, 500, "InternalError", "etcdserver: request timed out");
    for attempt in 0..3 {
        let node = seat(main, &filter).await;
        let bound = common::post_json(
            main,
            "/scheduler/bind",
            &json!({"PodName": "train-0", "PodNamespace": ns, "PodUID": uid, "Node": node}),
        )
        .await;
        let error = bound["Error"].as_str().unwrap_or("");
        assert_eq!(
            error.is_empty(),
            attempt == 2,
            "{ns}: bind {attempt}: {bound}"
        );
    }
    // Waited for in the request log rather than read through the API, so the log holds only
    // kube-tas's own requests.
    let series = format!("PATCH /apis/events.k8s.io/v1/namespaces/{ns}/events/");
    common::eventually(
        "the second BindingFailed patches the first",
        WAIT,
        async || fake.requests().iter().any(|l| l.starts_with(&series)),
    )
    .await;
}

/// Runs serve as the Deployment configures it through everything it asks of the API server;
/// returns the fake and every request serve made.
async fn drive_serve(deployment: &Deployment) -> (FakeApiServer, Vec<(String, u16)>) {
    let spec = deployment.spec.template.spec.as_ref().unwrap();
    let container = &spec.containers[0];
    let argv =
        std::iter::once("kube-tas".to_string()).chain(container.args.iter().flatten().cloned());
    let Command::Serve(args) = Cli::try_parse_from(argv).unwrap().command else {
        panic!("the Deployment runs serve");
    };
    let namespace = deployment.metadata.namespace.clone().unwrap();
    let pod = "kube-tas-5d8f7c9b4-x2k7q";
    let fake = FakeApiServer::new();
    for o in objects(&namespace, pod) {
        fake.apply(o);
    }
    // The Deployment's settings; what differs is what a test needs: loopback ports without
    // TLS (neither changes a request to the API server), the identity the downward API would
    // give (POD_NAME, POD_NAMESPACE), no shutdown delay and a short drain.
    let config = ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        leader_elect: args.leader_elect,
        leader_election_namespace: args.leader_election_namespace.or(Some(namespace.clone())),
        leader_election_id: args.leader_election_id.clone(),
        lease_duration: Duration::from_secs(args.lease_duration_seconds),
        pod_name: Some(pod.to_string()),
        plan_ttl: Duration::from_secs(args.plan_ttl_seconds),
        shutdown_delay: Duration::ZERO,
        shutdown_grace: Duration::from_secs(1),
        ..ServeConfig::default()
    };
    assert!(config.leader_elect, "the Deployment elects a leader");
    let serve = common::LiveServe::start(config, fake.client()).await;
    let (main, admin) = (serve.main, serve.admin);

    // Every watch listed; the election won; the leader label set.
    common::eventually("/readyz is 200", WAIT, async || {
        common::get_text(admin, "/readyz").await.0 == StatusCode::OK
    })
    .await;
    common::eventually("the leader labels its pod", WAIT, async || {
        fake.get("v1", "Pod", Some(&namespace), pod)
            .is_some_and(|p| p["metadata"]["labels"][LEADER_LABEL] == "true")
    })
    .await;
    for ns in WORKLOAD_NAMESPACES {
        place_gang(&fake, main, ns).await;
    }
    assert_eq!(fake.bindings().len(), WORKLOAD_NAMESPACES.len());

    serve.stop().await;
    let log = fake.request_log();
    (fake, log)
}

/// Each rule of `grants` split into one grant per (verb, group, resource).
fn single_grants(grants: &[Grant]) -> Vec<Grant> {
    let mut out = Vec::new();
    for g in grants {
        for verb in &g.rule.verbs {
            for group in list(&g.rule.api_groups) {
                for resource in list(&g.rule.resources) {
                    out.push(Grant {
                        rule: PolicyRule {
                            verbs: vec![verb.clone()],
                            api_groups: Some(vec![group.clone()]),
                            resources: Some(vec![resource]),
                            ..g.rule.clone()
                        },
                        ..g.clone()
                    });
                }
            }
        }
    }
    out
}

fn describe(g: &Grant) -> String {
    let r = &g.rule;
    let names = list(&r.resource_names);
    format!(
        "{}: {} {:?} {}{}",
        g.origin,
        r.verbs[0],
        list(&r.api_groups)[0],
        list(&r.resources)[0],
        if names.is_empty() {
            String::new()
        } else {
            format!(" {names:?}")
        }
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rbac_grants_exactly_what_serve_uses() {
    let rendered = manifests::render("manifests");
    let deployment: Deployment = rendered.only_typed("Deployment");
    let namespace = deployment.metadata.namespace.clone().unwrap();
    let account = deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .expect("serviceAccountName");
    let grants = grants(&rendered, (&account, &namespace));
    assert!(
        !grants.is_empty(),
        "nothing is granted to {namespace}/{account}"
    );

    let (fake, log) = drive_serve(&deployment).await;
    let mut accesses = BTreeSet::new();
    let mut non_resource = BTreeSet::new();
    for (line, _) in &log {
        match access_of(line) {
            Ok(a) => {
                accesses.insert(a);
            }
            Err(path) => {
                non_resource.insert(path);
            }
        }
    }
    assert!(
        non_resource.is_empty(),
        "non-resource requests, which no rule here grants: {non_resource:?}"
    );
    // The drive did what it says: per workload namespace, the Events of a plan and of two
    // refused Bindings (the second as a series), and a Binding.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::all(fake.client());
    let events = events.list(&Default::default()).await.unwrap().items;
    for ns in WORKLOAD_NAMESPACES {
        let here = |reason: &str| {
            events.iter().find(|e| {
                e.metadata.namespace.as_deref() == Some(ns) && e.reason.as_deref() == Some(reason)
            })
        };
        assert!(here("TopologyPlanned").is_some(), "{ns}: {events:#?}");
        let failed = here("BindingFailed").expect("BindingFailed");
        assert_eq!(failed.series.as_ref().map(|s| s.count), Some(2), "{ns}");
    }

    // Every request is granted.
    let refused: Vec<&Access> = accesses
        .iter()
        .filter(|a| !grants.iter().any(|g| allows(g, a)))
        .collect();
    assert!(
        refused.is_empty(),
        "serve made requests its RBAC does not grant (the API server answers 403):\n{refused:#?}"
    );

    // Everything granted is requested, and needed where it is granted: each (verb, group,
    // resource) of each rule allows some request that no other rule allows, and one granted
    // everywhere (a ClusterRole's) is used cluster-wide or in more than one namespace (else it
    // belongs in a Role of that namespace).
    let singles = single_grants(&grants);
    let mut unneeded = Vec::new();
    for (i, one) in singles.iter().enumerate() {
        let verb = &one.rule.verbs[0];
        let group = &list(&one.rule.api_groups)[0];
        let resource = &list(&one.rule.resources)[0];
        let undriven = UNDRIVEN
            .iter()
            .any(|(v, gr, r, _)| (*v, *gr, *r) == (verb, group, resource));
        let used: Vec<&Access> = accesses.iter().filter(|a| allows(one, a)).collect();
        if !used.is_empty() {
            assert!(
                !undriven,
                "{verb} {group}/{resource} is requested now: remove it from UNDRIVEN"
            );
        } else if !undriven {
            unneeded.push(format!("{}: never requested", describe(one)));
            continue;
        }
        let only_here = used.iter().any(|a| {
            !singles
                .iter()
                .enumerate()
                .any(|(j, other)| j != i && allows(other, a))
        });
        if !used.is_empty() && !only_here {
            unneeded.push(format!(
                "{}: every request it allows another rule allows too",
                describe(one)
            ));
        }
        let spaces: BTreeSet<&str> = used.iter().map(|a| a.namespace.as_str()).collect();
        if one.namespace.is_none() && spaces.len() == 1 && !spaces.contains("") {
            unneeded.push(format!(
                "{}: granted in every namespace, used only in {spaces:?}: a Role there",
                describe(one)
            ));
        }
    }
    assert!(
        unneeded.is_empty(),
        "granted beyond what serve uses (least privilege: remove or narrow it, or explain in \
         UNDRIVEN):\n{}\nrequests:\n{accesses:#?}",
        unneeded.join("\n")
    );
    for (verb, group, resource, why) in UNDRIVEN {
        assert!(
            singles.iter().any(|g| g.rule.verbs[0] == *verb
                && list(&g.rule.api_groups)[0] == *group
                && list(&g.rule.resources)[0] == *resource),
            "UNDRIVEN {verb} {group}/{resource} ({why}) is no longer granted: remove the entry"
        );
    }
}

#[test]
fn requests_map_as_the_authorizer_maps_them() {
    let a = |line: &str| access_of(line).unwrap();
    let watch =
        a("GET /api/v1/pods?fieldSelector=spec.nodeName%21%3D&watch=true&timeoutSeconds=290");
    assert_eq!(
        (
            watch.verb.as_str(),
            watch.resource.as_str(),
            watch.namespace.as_str()
        ),
        ("watch", "pods", "")
    );
    assert_eq!(a("GET /apis/batch/v1/jobs?limit=500").verb, "list");
    let lease = a("GET /apis/coordination.k8s.io/v1/namespaces/kube-tas-system/leases/kube-tas");
    assert_eq!(
        (
            lease.verb.as_str(),
            lease.group.as_str(),
            lease.namespace.as_str(),
            lease.name.as_str()
        ),
        ("get", "coordination.k8s.io", "kube-tas-system", "kube-tas")
    );
    let bind = a("POST /api/v1/namespaces/default/pods/p-0/binding");
    assert_eq!(
        (bind.verb.as_str(), bind.resource.as_str()),
        ("create", "pods/binding")
    );
    assert_eq!(
        a("PUT /apis/coordination.k8s.io/v1/namespaces/x/leases/l").verb,
        "update"
    );
    assert_eq!(
        a("DELETE /api/v1/namespaces/x/pods").verb,
        "deletecollection"
    );
    let ns = a("GET /api/v1/namespaces/default");
    assert_eq!(
        (ns.resource.as_str(), ns.name.as_str()),
        ("namespaces", "default")
    );
    assert_eq!(access_of("GET /version"), Err("/version".to_string()));
}
