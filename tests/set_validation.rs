//! The JobSet and LeaderWorkerSet rows of Kueue's webhook tables
//! (`pkg/controller/jobs/{jobset,leaderworkerset}/*_webhook_test.go`, the rows of the shared
//! `validation-public.json`), sent to the webhook as the objects a user creates: every
//! expected error appears in the denial with Kueue's field path and words, and the valid rows
//! are admitted with each TAS PodSet template patched.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use kube_tas::admission::{Decision, Webhook};
use kube_tas::cluster::sets::{JobSet, LeaderWorkerSet, SetEntry};
use kube_tas::cluster::state::{ClusterState, SharedState};
use kube_tas::topology::FeatureGates;

const REQ: &str = "kueue.x-k8s.io/podset-required-topology";
const PREF: &str = "kueue.x-k8s.io/podset-preferred-topology";
const GROUP: &str = "kueue.x-k8s.io/podset-group-name";
const SREQ: &str = "kueue.x-k8s.io/podset-slice-required-topology";
const SSIZE: &str = "kueue.x-k8s.io/podset-slice-size";
const BLOCK: &str = "cloud.com/block";

/// A webhook over a TAS queue `tas-queue` (flavor `tas-flavor`, Topology block > rack > host).
fn webhook() -> Webhook {
    webhook_with(|_| {})
}

/// [`webhook`], with `more` applied to its state.
fn webhook_with(more: impl FnOnce(&mut ClusterState)) -> Webhook {
    let mut state = ClusterState::new();
    state.apply_topology(
        "default",
        de(json!({"metadata": {"name": "default"}, "spec": {"levels": [
            {"nodeLabel": BLOCK}, {"nodeLabel": "cloud.com/rack"},
            {"nodeLabel": "kubernetes.io/hostname"}]}})),
    );
    state.apply_resource_flavor(
        "tas-flavor",
        de(
            json!({"metadata": {"name": "tas-flavor"}, "spec": {"topologyName": "default",
            "nodeLabels": {"node-group": "tas"}}}),
        ),
    );
    state.apply_cluster_queue(
        "cq",
        de(
            json!({"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{
            "coveredResources": ["cpu"], "flavors": [{"name": "tas-flavor",
                "resources": [{"name": "cpu", "nominalQuota": "100"}]}]}]}}),
        ),
    );
    state.apply_local_queue(
        "default",
        "tas-queue",
        de(
            json!({"metadata": {"name": "tas-queue", "namespace": "default"},
            "spec": {"clusterQueue": "cq"}}),
        ),
    );
    more(&mut state);
    Webhook::new(SharedState::new(state), FeatureGates::default())
}

fn de<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn template(annotations: &[(&str, &str)]) -> Value {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "c",
        "resources": {"requests": {"cpu": "1"}}}]}})
}

/// A replicated Job: `(name, replicas, parallelism, completions, template annotations)`.
type Rj<'a> = (&'a str, i32, i32, Option<i32>, &'a [(&'a str, &'a str)]);

/// A JobSet of these replicated Jobs.
fn jobset(rjs: &[Rj<'_>]) -> JobSet {
    let rjs: Vec<Value> = rjs
        .iter()
        .map(|(name, replicas, parallelism, completions, annotations)| {
            json!({"name": name, "replicas": replicas, "template": {"spec": {
                "parallelism": parallelism, "completions": completions,
                "template": template(annotations)}}})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "js", "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "tas-queue"}},
        "spec": {"replicatedJobs": rjs}
    }))
    .unwrap()
}

/// A LeaderWorkerSet of `size`, with a leader template when `leader` is given.
fn lws(size: i32, leader: Option<&[(&str, &str)]>, worker: &[(&str, &str)]) -> LeaderWorkerSet {
    let mut lwt = json!({"size": size, "workerTemplate": template(worker)});
    if let Some(l) = leader {
        lwt["leaderTemplate"] = template(l);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "lws", "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "tas-queue"}},
        "spec": {"replicas": 2, "leaderWorkerTemplate": lwt}
    }))
    .unwrap()
}

const JS: [&str; 4] = [
    "spec.replicatedJobs[0].template.spec.template.metadata.annotations",
    "spec.replicatedJobs[1].template.spec.template.metadata.annotations",
    "spec.replicatedJobs[2].template.spec.template.metadata.annotations",
    "spec.replicatedJobs[3].template.spec.template.metadata.annotations",
];
const LEADER: &str = "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations";
const WORKER: &str = "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations";

/// The denial's message, or a panic naming the row.
fn denied(row: &str, d: Decision) -> String {
    match d {
        Decision::Deny { code, message } => {
            assert_eq!(code, 403, "{row}: {message}");
            message
        }
        Decision::Allow { .. } => panic!("{row}: admitted, want denied"),
    }
}

/// The patch's operations as text, or a panic naming the row.
fn admitted(row: &str, d: Decision) -> String {
    match d {
        Decision::Allow { patch, .. } => serde_json::to_string(&patch).unwrap(),
        Decision::Deny { message, .. } => panic!("{row}: denied: {message}"),
    }
}

fn assert_errors(row: &str, message: &str, errors: &[String]) {
    for e in errors {
        assert!(
            message.contains(e.as_str()),
            "{row}:\n  want {e}\n  in   {message}"
        );
    }
}

#[test]
fn jobset_rows() {
    let w = webhook();
    let block = (REQ, BLOCK);

    let row = "valid topology request";
    let patch = admitted(
        row,
        w.jobset(&jobset(&[
            ("launcher", 1, 1, None, &[block]),
            ("worker", 1, 1, None, &[block]),
        ])),
    );
    // Both templates get the flavor's node selector and their PodSet stamp.
    for (i, ps) in ["launcher", "worker"].iter().enumerate() {
        assert!(
            patch.contains(&format!(
                "/spec/replicatedJobs/{i}/template/spec/template/spec"
            )),
            "{row}: {patch}"
        );
        assert!(patch.contains(&format!("\"{ps}\"")), "{row}: {patch}");
    }
    assert!(patch.contains("node-group"), "{row}: {patch}");

    let row = "valid PodSet grouping request";
    admitted(
        row,
        w.jobset(&jobset(&[
            ("launcher", 1, 1, Some(1), &[(GROUP, "groupname"), block]),
            ("worker", 4, 1, Some(1), &[(GROUP, "groupname"), block]),
        ])),
    );

    let row = "invalid PodSet grouping request - groups of size other than 2";
    let message = denied(
        row,
        w.jobset(&jobset(&[
            ("job1", 1, 1, Some(1), &[block, (GROUP, "1podset")]),
            ("job2", 1, 1, Some(1), &[block, (GROUP, "3podsets")]),
            ("job3", 2, 1, Some(1), &[block, (GROUP, "3podsets")]),
            ("job4", 2, 2, Some(1), &[block, (GROUP, "3podsets")]),
        ])),
    );
    let size = |i: usize, v: &str, n: usize| {
        format!(
            "{}[{GROUP}]: Invalid value: \"{v}\": can only define groups of exactly 2 pod sets, \
             got: {n} pod set(s)",
            JS[i]
        )
    };
    assert_errors(
        row,
        &message,
        &[
            size(0, "1podset", 1),
            size(1, "3podsets", 3),
            size(2, "3podsets", 3),
            size(3, "3podsets", 3),
        ],
    );
}

#[test]
fn leaderworkerset_rows() {
    let w = webhook();
    let block = (REQ, BLOCK);
    let size_of_group = |path: &str, v: &str| {
        format!(
            "{path}[{GROUP}]: Invalid value: \"{v}\": can only define groups of exactly 2 pod \
             sets, got: 1 pod set(s)"
        )
    };

    let row = "valid topology request";
    let patch = admitted(row, w.lws(&lws(1, Some(&[block]), &[block])));
    assert!(
        patch.contains("/spec/leaderWorkerTemplate/leaderTemplate/spec"),
        "{row}: {patch}"
    );

    let row = "invalid slice topology request - slice size larger than number of podsets";
    let message = denied(
        row,
        w.lws(&lws(
            4,
            Some(&[block, (SREQ, BLOCK), (SSIZE, "2")]),
            &[block, (SREQ, BLOCK), (SSIZE, "20")],
        )),
    );
    assert_errors(
        row,
        &message,
        &[
            format!(
                "{LEADER}[{SSIZE}]: Invalid value: \"2\": must not be greater than pod set count 1"
            ),
            format!(
                "{WORKER}[{SSIZE}]: Invalid value: \"20\": must not be greater than pod set count 3"
            ),
        ],
    );

    let row = "invalid slice topology request - slice size provided without slice topology";
    let message = denied(row, w.lws(&lws(4, Some(&[(SSIZE, "1")]), &[(SSIZE, "1")])));
    let forbidden = |path: &str| {
        format!("{path}[{SSIZE}]: Forbidden: may not be set when '{SREQ}' is not specified")
    };
    assert_errors(row, &message, &[forbidden(LEADER), forbidden(WORKER)]);

    let row = "invalid PodSet group name request - value is a number";
    let message = denied(
        row,
        w.lws(&lws(
            1,
            Some(&[(GROUP, "1234"), block]),
            &[(GROUP, "1234"), block],
        )),
    );
    assert_errors(
        row,
        &message,
        &[
            format!("{LEADER}[{GROUP}]: Invalid value: \"1234\": must not be a number"),
            format!("{WORKER}[{GROUP}]: Invalid value: \"1234\": must not be a number"),
        ],
    );

    let row = "invalid PodSet grouping request - group specified only in leader";
    let message = denied(
        row,
        w.lws(&lws(1, Some(&[(GROUP, "groupname"), block]), &[])),
    );
    assert_errors(row, &message, &[size_of_group(LEADER, "groupname")]);

    let row = "invalid PodSet grouping request - group specified only in worker";
    let message = denied(
        row,
        w.lws(&lws(1, Some(&[]), &[(GROUP, "groupname"), block])),
    );
    assert_errors(row, &message, &[size_of_group(WORKER, "groupname")]);

    let row = "invalid PodSet grouping request - group name does not match";
    let message = denied(
        row,
        w.lws(&lws(
            1,
            Some(&[(GROUP, "groupname1"), block]),
            &[(GROUP, "groupname2"), block],
        )),
    );
    assert_errors(
        row,
        &message,
        &[
            size_of_group(LEADER, "groupname1"),
            size_of_group(WORKER, "groupname2"),
        ],
    );

    let row = "invalid PodSet grouping request - preferred topology request does not match";
    let message = denied(
        row,
        w.lws(&lws(
            1,
            Some(&[(GROUP, "groupname"), (PREF, BLOCK)]),
            &[(GROUP, "groupname"), (PREF, "cloud.com/rack")],
        )),
    );
    let consistent = |path: &str, other: &str| {
        format!(
            "{path}: Invalid value: must specify '{REQ}' or '{PREF}' topology consistent with \
             '{other}' in group 'groupname'"
        )
    };
    assert_errors(
        row,
        &message,
        &[consistent(LEADER, WORKER), consistent(WORKER, LEADER)],
    );

    let row =
        "invalid PodSet grouping request - neither preferred nor required topology is requested";
    let message = denied(
        row,
        w.lws(&lws(
            1,
            Some(&[(GROUP, "groupname")]),
            &[(GROUP, "groupname")],
        )),
    );
    let neither = |path: &str| {
        format!(
            "{path}[{GROUP}]: Forbidden: may not be set when neither '{PREF}' nor '{REQ}' is \
             specified"
        )
    };
    assert_errors(row, &message, &[neither(LEADER), neither(WORKER)]);

    let row = "invalid PodSet grouping request - grouping requested without leader template";
    let message = denied(
        row,
        w.lws(&lws(1, None, &[(GROUP, "groupname"), (PREF, BLOCK)])),
    );
    assert_errors(row, &message, &[size_of_group(WORKER, "groupname")]);
}

/// A pod of an admitted LeaderWorkerSet is admitted as its group's PodSet: the leader (worker
/// index 0) as `leader`, the others as `worker`, each stamped with its PodSet.
#[test]
fn a_leaderworkerset_pod_is_admitted_as_its_pod_set() {
    let set = lws(3, Some(&[(REQ, BLOCK)]), &[(REQ, BLOCK)]);
    // The webhook reads sets from the shared state, as the watch feeds it.
    let w = webhook_with(|state| {
        let (key, entry) = SetEntry::of_lws(&set, &Default::default()).unwrap();
        state.apply_set(key, entry);
    });
    for (index, pod_set) in [("0", "leader"), ("2", "worker")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("lws-1-{index}"), "namespace": "default",
                "labels": {"leaderworkerset.sigs.k8s.io/name": "lws",
                    "leaderworkerset.sigs.k8s.io/group-index": "1",
                    "leaderworkerset.sigs.k8s.io/worker-index": index}},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .unwrap();
        let patch = admitted(pod_set, w.pod(&pod));
        assert!(
            patch.contains(&format!("\"kube-tas.io/pod-set\":\"{pod_set}\"")),
            "{pod_set}: {patch}"
        );
        assert!(patch.contains("node-group"), "{pod_set}: {patch}");
    }
    // Group 2 does not exist (2 replicas): its pod's set is unknown, so it passes unpatched
    // with a warning naming the group.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "lws-2-0", "namespace": "default",
            "labels": {"leaderworkerset.sigs.k8s.io/name": "lws",
                "leaderworkerset.sigs.k8s.io/group-index": "2",
                "leaderworkerset.sigs.k8s.io/worker-index": "0"}},
        "spec": {"containers": [{"name": "c"}]}
    }))
    .unwrap();
    let Decision::Allow { patch, warnings } = w.pod(&pod) else {
        panic!("an unknown group's pod is not refused");
    };
    assert!(patch.is_empty(), "{patch:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("LeaderWorkerSet default/lws-2")),
        "{warnings:?}"
    );
}

/// The Jobs a JobSet controller creates carry their replicated Job's (patched) template and
/// half a `podset-group-name` pair: they pass unchanged, never judged as Jobs on their own.
#[test]
fn a_jobsets_own_job_passes_unchanged() {
    let w = webhook();
    let job: k8s_openapi::api::batch::v1::Job = de(json!({
        "metadata": {"name": "js-driver-0", "namespace": "default",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "js"},
            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "name": "js", "uid": "u", "controller": true}]},
        "spec": {"parallelism": 1, "template": template(&[(REQ, BLOCK), (GROUP, "g")])}
    }));
    assert_eq!(
        w.job(&job),
        Decision::Allow {
            patch: Vec::new(),
            warnings: Vec::new()
        }
    );
    // The same Job on its own is judged (and refused: half a group, no queue).
    let mut alone = job.clone();
    alone.metadata.labels = None;
    alone.metadata.owner_references = None;
    let message = denied("a lone Job", w.job(&alone));
    assert!(
        message.contains("can only define groups of exactly 2 pod sets"),
        "{message}"
    );
}
