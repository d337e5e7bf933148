//! The admission webhook over HTTP (`POST /mutate`), fed AdmissionReviews in the exact shape
//! kube-apiserver sends (`tests/fixtures/admission/*.json`, described in the README there).
//!
//! Every answer is decoded as the API server decodes it: HTTP 200, `apiVersion`/`kind` and
//! `response.uid` echoed, `patch` a padded standard-base64 string with `patchType: JSONPatch`.
//! The patch is applied with `json_patch` to the request's `object` and the result is read
//! back as a typed Job or Pod and checked field by field; the patched object minus what the
//! webhook injects must be the original.
//!
//! The cluster is `tests/fixtures/admission/cluster.yaml`: Topology block > rack > host, a CPU
//! flavor (`node-group: cpu`, 2 blocks x 2 racks x 2 hosts of 4 cpu) and a GPU flavor
//! (`node-group: gpu`, two tolerations), LocalQueues `ml/cpu-queue` and `ml/gpu-queue`, and
//! the Job `ml/legacy-train`, created before the webhook and running.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, Toleration};
use serde_json::{Value, json};
use tokio::net::TcpStream;

use common::{send, send_request};
use kube_tas::cluster::Cluster;
use kube_tas::extender::Extender;

use kube_tas::server::admin::{Readiness, admin_router};
use kube_tas::server::metrics::Metrics;
use kube_tas::server::{DEFAULT_MAX_BODY_BYTES, ServeConfig, main_router, main_router_with, start};
use kube_tas::topology::FeatureGates;

const BLOCK: &str = "cloud.provider.com/topology-block";
const RACK: &str = "cloud.provider.com/topology-rack";
const REQUIRED: &str = "kueue.x-k8s.io/podset-required-topology";
const PREFERRED: &str = "kueue.x-k8s.io/podset-preferred-topology";
const STAMP_COUNT: &str = "kube-tas.io/pod-group-total-count";
const STAMP_QUEUE: &str = "kube-tas.io/queue-name";
const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The stamps of the fixtures' 4-pod Jobs, by queue.
const CPU_JOB_STAMPS: &[(&str, &str)] = &[(STAMP_COUNT, "4"), (STAMP_QUEUE, "cpu-queue")];
const GPU_JOB_STAMPS: &[(&str, &str)] = &[(STAMP_COUNT, "4"), (STAMP_QUEUE, "gpu-queue")];

/// A Job's pod template, a Pod's root.
const JOB_TEMPLATE: &[&str] = &["spec", "template"];
const POD_ROOT: &[&str] = &[];

// ---------------------------------------------------------------------------------------------
// Fixtures and the cluster
// ---------------------------------------------------------------------------------------------

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission")
}

/// An AdmissionReview fixture.
fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn load_cluster() -> Cluster {
    let cluster = kube_tas::cluster::load_paths(&[fixtures_dir().join("cluster.yaml")])
        .expect("cluster.yaml loads");
    assert!(cluster.warnings.is_empty(), "{:?}", cluster.warnings);
    cluster
}

fn extender() -> Extender {
    Extender::over_cluster(
        &load_cluster(),
        FeatureGates::default(),
        Duration::from_secs(60),
    )
}

fn router() -> Router {
    main_router(extender())
}

/// What a flavor injects.
struct Flavor {
    node_labels: BTreeMap<String, String>,
    tolerations: Vec<Value>,
}

fn cpu_flavor() -> Flavor {
    Flavor {
        node_labels: [("node-group".to_string(), "cpu".to_string())].into(),
        tolerations: Vec::new(),
    }
}

fn gpu_flavor() -> Flavor {
    Flavor {
        node_labels: [("node-group".to_string(), "gpu".to_string())].into(),
        tolerations: vec![
            json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "cloud.provider.com/gpu-pool", "operator": "Equal",
                "value": "reserved", "effect": "NoSchedule"}),
        ],
    }
}

// ---------------------------------------------------------------------------------------------
// Sending reviews and reading answers as the API server does
// ---------------------------------------------------------------------------------------------

/// The webhook's AdmissionReview answer.
#[derive(Debug, Clone)]
struct Answer {
    review: Value,
}

impl Answer {
    /// Reads an answer body: HTTP 200, JSON, an AdmissionReview with `response.allowed` set.
    fn read(status: StatusCode, content_type: &str, body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(content_type, "application/json", "{text}");
        let review: Value = serde_json::from_slice(body).expect("the answer is JSON");
        let response = &review["response"];
        assert!(response.is_object(), "no response: {review}");
        assert!(
            response["allowed"].is_boolean(),
            "`allowed` must always be written (the API server reads a missing one as false): \
             {review}"
        );
        assert!(response["uid"].is_string(), "{review}");
        // `patch` and `patchType` come together.
        assert_eq!(
            response.get("patch").is_some(),
            response.get("patchType").is_some(),
            "{review}"
        );
        Answer { review }
    }

    fn response(&self) -> &Value {
        &self.review["response"]
    }

    fn uid(&self) -> &str {
        self.response()["uid"].as_str().unwrap()
    }

    fn allowed(&self) -> bool {
        self.response()["allowed"].as_bool().unwrap()
    }

    fn warnings(&self) -> Vec<String> {
        match self.response().get("warnings") {
            None => Vec::new(),
            Some(w) => w
                .as_array()
                .expect("warnings is a list")
                .iter()
                .map(|s| s.as_str().expect("a warning is a string").to_string())
                .collect(),
        }
    }

    /// The JSON Patch, decoded as the API server decodes it: `patch` must be a JSON string of
    /// padded standard base64 (never a byte array, never URL-safe), `patchType` `JSONPatch`.
    fn patch(&self) -> Option<json_patch::Patch> {
        let response = self.response();
        let raw = response.get("patch")?;
        assert_eq!(response["patchType"], "JSONPatch", "{response}");
        let text = raw
            .as_str()
            .unwrap_or_else(|| panic!("patch must be a base64 string, not {raw}"));
        assert!(
            text.len() % 4 == 0
                && text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'='),
            "patch is not padded standard base64: {text}"
        );
        let bytes = STANDARD.decode(text).expect("standard base64");
        let ops: Value = serde_json::from_slice(&bytes).expect("the patch is JSON");
        let ops = ops.as_array().expect("a JSON Patch is an array");
        assert!(!ops.is_empty(), "an empty patch must be left out");
        for op in ops {
            // The webhook adds what is missing; it never removes or moves anything.
            assert!(op["op"] == "add" || op["op"] == "replace", "{op}");
        }
        Some(serde_json::from_slice(&bytes).expect("RFC 6902 operations"))
    }

    /// `(code, message)` of a refusal, checking the `metav1.Status` shape.
    fn denial(&self) -> (u16, String) {
        let response = self.response();
        assert!(!self.allowed(), "expected a refusal: {response}");
        assert!(response.get("patch").is_none(), "{response}");
        let status = &response["status"];
        assert_eq!(status["status"], "Failure", "{response}");
        let code = status["code"].as_u64().expect("status.code") as u16;
        let reason = match code {
            400 => "BadRequest",
            422 => "Invalid",
            _ => "Forbidden",
        };
        assert_eq!(status["reason"], reason, "{response}");
        let message = status["message"].as_str().expect("status.message");
        assert!(!message.is_empty(), "{response}");
        (code, message.to_string())
    }

    /// No `warnings` (absent or empty).
    fn assert_no_warnings(&self) {
        let warnings = self.warnings();
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    /// Allowed, with no patch and no refusal.
    fn assert_allowed_unchanged(&self) {
        let response = self.response();
        assert!(self.allowed(), "{response}");
        assert!(response.get("status").is_none(), "{response}");
        assert!(self.patch().is_none(), "expected no patch: {response}");
    }
}

/// Posts `body` to `/mutate` and reads the answer with [`Answer::read`].
async fn post_review(router: &Router, body: impl Into<Body>) -> Answer {
    let (status, content_type, bytes) = send(router, "POST", "/mutate", body).await;
    Answer::read(status, &content_type, &bytes)
}

/// Posts `review` to `/mutate` and checks the envelope the API server verifies: apiVersion,
/// kind and uid echoed.
async fn mutate(router: &Router, review: &Value) -> Answer {
    let answer = post_review(router, serde_json::to_vec(review).unwrap()).await;
    assert_eq!(answer.review["apiVersion"], review["apiVersion"]);
    assert_eq!(answer.review["kind"], review["kind"]);
    assert_eq!(answer.uid(), review["request"]["uid"].as_str().unwrap());
    answer
}

/// [`mutate`], expecting `review` to be allowed.
async fn mutate_allowed(router: &Router, review: &Value) -> Answer {
    let answer = mutate(router, review).await;
    assert!(answer.allowed(), "{}", answer.response());
    answer
}

/// [`mutate`], expecting `review` to be refused with 403: the message.
async fn mutate_forbidden(router: &Router, review: &Value) -> String {
    let (code, message) = mutate(router, review).await.denial();
    assert_eq!(code, 403);
    message
}

/// Every one of `parts` is in `message`.
fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

/// The request's object with the answer's patch applied (unchanged without a patch).
fn patched(review: &Value, answer: &Answer) -> Value {
    let mut object = review["request"]["object"].clone();
    if let Some(patch) = answer.patch() {
        json_patch::patch(&mut object, &patch).expect("the patch applies to the object");
    }
    object
}

/// `review` with another uid and `object`: a second request of the same shape.
fn rewrap(review: &Value, uid: &str, object: Value) -> Value {
    let mut r = review.clone();
    r["request"]["uid"] = json!(uid);
    r["request"]["object"] = object;
    r
}

/// `review` changed by `edit` on its object, under a new uid.
fn derived(review: &Value, uid: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let mut object = review["request"]["object"].clone();
    edit(&mut object);
    rewrap(review, uid, object)
}

fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |v, k| &v[*k])
}

fn at_mut<'a>(value: &'a mut Value, path: &[&str]) -> &'a mut Value {
    path.iter().fold(value, |v, k| &mut v[*k])
}

/// The pod template of a patched Job (`at` = [`JOB_TEMPLATE`]) or a Pod ([`POD_ROOT`]), read
/// as the typed object: the patched result must still be a valid Job or Pod.
fn typed_template(object: &Value, path: &[&str]) -> PodTemplateSpec {
    if path == JOB_TEMPLATE {
        let job: Job = serde_json::from_value(object.clone()).expect("a valid batch/v1 Job");
        job.spec.expect("Job spec").template
    } else {
        let pod: Pod = serde_json::from_value(object.clone()).expect("a valid v1 Pod");
        PodTemplateSpec {
            metadata: Some(pod.metadata),
            spec: pod.spec,
        }
    }
}

fn toleration(v: &Value) -> Toleration {
    serde_json::from_value(v.clone()).unwrap()
}

/// Checks a patched Job or Pod field by field: the node selector is the user's plus the
/// flavor's labels, the tolerations the user's first then the flavor's missing ones with no
/// duplicate, the annotations the user's plus `stamps`; and the object minus exactly these
/// additions is the original.
fn assert_injected(
    original: &Value,
    result: &Value,
    path: &[&str],
    flavor: &Flavor,
    stamps: &[(&str, &str)],
) {
    let before = typed_template(original, path);
    let after = typed_template(result, path);
    let before_spec = before.spec.clone().unwrap_or_default();
    let after_spec = after.spec.clone().expect("a pod spec");

    let mut selector = before_spec.node_selector.clone().unwrap_or_default();
    for (k, v) in &flavor.node_labels {
        selector.entry(k.clone()).or_insert_with(|| v.clone());
    }
    assert_eq!(
        after_spec.node_selector.clone().unwrap_or_default(),
        selector,
        "nodeSelector"
    );

    let mut tolerations = before_spec.tolerations.clone().unwrap_or_default();
    for t in flavor.tolerations.iter().map(toleration) {
        if !tolerations.contains(&t) {
            tolerations.push(t);
        }
    }
    let got = after_spec.tolerations.clone().unwrap_or_default();
    assert_eq!(
        got, tolerations,
        "tolerations: the user's first, then the flavor's"
    );
    for (i, t) in got.iter().enumerate() {
        assert!(!got[i + 1..].contains(t), "duplicate toleration {t:?}");
    }

    let mut annotations = before
        .metadata
        .clone()
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    for (k, v) in stamps {
        annotations.insert(k.to_string(), v.to_string());
    }
    let got = after
        .metadata
        .clone()
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    assert_eq!(got, annotations, "annotations");

    assert_eq!(
        &strip_injection(result, original, path, flavor, stamps),
        original,
        "the patch changed something besides nodeSelector, tolerations and the stamps"
    );
}

/// The request's object patched by `answer`, checked with [`assert_injected`].
fn assert_patch_injects(
    review: &Value,
    answer: &Answer,
    path: &[&str],
    flavor: &Flavor,
    stamps: &[(&str, &str)],
) -> Value {
    let result = patched(review, answer);
    assert_injected(&review["request"]["object"], &result, path, flavor, stamps);
    result
}

/// `result` without what the webhook may add at `path`: the flavor's node labels,
/// tolerations and the stamps the original lacks (and the maps and lists that held only them).
fn strip_injection(
    result: &Value,
    original: &Value,
    path: &[&str],
    flavor: &Flavor,
    stamps: &[(&str, &str)],
) -> Value {
    let mut out = result.clone();
    let before = at(original, path);
    let template = at_mut(&mut out, path);

    if let Some(meta) = template.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            for (k, _) in stamps {
                if before["metadata"]["annotations"].get(*k).is_none() {
                    annotations.remove(*k);
                }
            }
            if annotations.is_empty() && before["metadata"].get("annotations").is_none() {
                meta.remove("annotations");
            }
        }
        if meta.is_empty() && before.get("metadata").is_none() {
            template.as_object_mut().unwrap().remove("metadata");
        }
    }

    let spec = template["spec"].as_object_mut().expect("a pod spec");
    if let Some(selector) = spec.get_mut("nodeSelector").and_then(Value::as_object_mut) {
        for k in flavor.node_labels.keys() {
            if before["spec"]["nodeSelector"].get(k).is_none() {
                selector.remove(k);
            }
        }
        if selector.is_empty() && before["spec"].get("nodeSelector").is_none() {
            spec.remove("nodeSelector");
        }
    }
    if let Some(list) = spec.get_mut("tolerations").and_then(Value::as_array_mut) {
        let had = before["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        list.retain(|t| {
            had.iter().any(|h| toleration(h) == toleration(t))
                || !flavor
                    .tolerations
                    .iter()
                    .any(|f| toleration(f) == toleration(t))
        });
        if list.is_empty() && before["spec"].get("tolerations").is_none() {
            spec.remove("tolerations");
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The fixtures themselves
// ---------------------------------------------------------------------------------------------

/// Every fixture has the API server's shape, and the README describes each one.
#[test]
fn fixtures_have_the_api_servers_shape() {
    let readme = std::fs::read_to_string(fixtures_dir().join("README.md")).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        assert!(
            readme.contains(name.as_str()),
            "README.md does not describe {name}"
        );
        let review = fixture(name);
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{name}");
        assert_eq!(review["kind"], "AdmissionReview", "{name}");
        let request = review["request"].as_object().expect("request");
        let mut keys: Vec<&str> = request.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut expected = vec![
            "dryRun",
            "kind",
            "namespace",
            "object",
            "oldObject",
            "operation",
            "options",
            "requestKind",
            "requestResource",
            "resource",
            "uid",
            "userInfo",
        ];
        let object = &request["object"];
        let meta = &object["metadata"];
        // Go's `omitempty`: no `name` in the request before a generateName is resolved.
        if meta.get("generateName").is_some() {
            assert!(meta.get("name").is_none(), "{name}");
        } else {
            expected.push("name");
            assert_eq!(request["name"], meta["name"], "{name}");
        }
        expected.sort_unstable();
        assert_eq!(keys, expected, "{name}");
        assert_eq!(request["operation"], "CREATE", "{name}");
        assert!(request["oldObject"].is_null(), "{name}");
        assert_eq!(request["kind"], request["requestKind"], "{name}");
        assert_eq!(request["resource"], request["requestResource"], "{name}");
        assert_eq!(request["namespace"], meta["namespace"], "{name}");
        assert_eq!(request["options"]["kind"], "CreateOptions", "{name}");
        assert_eq!(request["options"]["apiVersion"], "meta.k8s.io/v1", "{name}");
        let dry_run = request["dryRun"].as_bool().expect("dryRun");
        assert_eq!(
            dry_run,
            request["options"].get("dryRun").is_some(),
            "{name}: dryRun and options.dryRun agree"
        );
        // Mutating admission runs before the API server fills the system fields.
        assert!(meta.get("uid").is_none(), "{name}");
        assert!(meta["creationTimestamp"].is_null(), "{name}");
        assert!(meta["managedFields"].is_array(), "{name}");
        assert_eq!(object["status"], json!({}), "{name}");
        let kind = &request["kind"];
        match kind["kind"].as_str().unwrap() {
            "Job" => {
                assert_eq!(object["apiVersion"], "batch/v1", "{name}");
                assert_eq!(kind["group"], "batch", "{name}");
                assert_eq!(request["resource"]["resource"], "jobs", "{name}");
                let job: Job = serde_json::from_value(object.clone()).expect("a Job");
                let spec = job.spec.unwrap();
                assert_eq!(spec.backoff_limit, Some(6), "{name}");
                assert_eq!(spec.suspend, Some(false), "{name}");
                assert!(spec.completion_mode.is_some(), "{name}");
                assert!(spec.pod_replacement_policy.is_some(), "{name}");
                assert!(spec.manual_selector.is_none(), "{name}");
                // The selector is generated after mutating admission.
                assert!(spec.selector.is_none(), "{name}");
                let pod = spec.template.spec.unwrap();
                assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirst"), "{name}");
                assert_eq!(pod.termination_grace_period_seconds, Some(30), "{name}");
                assert_eq!(
                    pod.scheduler_name.as_deref(),
                    Some("default-scheduler"),
                    "{name}"
                );
                for c in &pod.containers {
                    assert!(c.termination_message_path.is_some(), "{name}");
                    assert!(c.image_pull_policy.is_some(), "{name}");
                }
            }
            "Pod" => {
                assert_eq!(object["apiVersion"], "v1", "{name}");
                assert_eq!(kind["group"], "", "{name}");
                assert_eq!(request["resource"]["resource"], "pods", "{name}");
                let pod: Pod = serde_json::from_value(object.clone()).expect("a Pod");
                let spec = pod.spec.unwrap();
                assert_eq!(spec.priority, Some(0), "{name}");
                assert_eq!(spec.enable_service_links, Some(true), "{name}");
                assert!(spec.preemption_policy.is_some(), "{name}");
                let tolerations = spec.tolerations.unwrap_or_default();
                for key in [
                    "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/unreachable",
                ] {
                    assert!(
                        tolerations
                            .iter()
                            .any(|t| t.key.as_deref() == Some(key)
                                && t.toleration_seconds == Some(300)),
                        "{name}: DefaultTolerationSeconds adds {key}"
                    );
                }
                if let Some(owner) = pod.metadata.owner_references.as_ref() {
                    assert_eq!(owner.len(), 1, "{name}");
                    assert_eq!(owner[0].kind, "Job", "{name}");
                    assert_eq!(owner[0].controller, Some(true), "{name}");
                    assert_eq!(owner[0].block_owner_deletion, Some(true), "{name}");
                    assert_eq!(
                        request["userInfo"]["username"],
                        "system:serviceaccount:kube-system:job-controller",
                        "{name}"
                    );
                    let annotations = pod.metadata.annotations.unwrap_or_default();
                    assert!(annotations.contains_key(COMPLETION_INDEX), "{name}");
                }
            }
            other => panic!("{name}: unexpected kind {other}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_tas_job_gets_the_flavor_node_labels_and_the_stamps() {
    let router = router();
    let review = fixture("job-tas-rack.json");
    let answer = mutate_allowed(&router, &review).await;
    assert!(answer.response().get("status").is_none());
    answer.assert_no_warnings();
    assert!(answer.patch().is_some(), "a TAS Job is patched");
    let result = assert_patch_injects(
        &review,
        &answer,
        JOB_TEMPLATE,
        &cpu_flavor(),
        CPU_JOB_STAMPS,
    );
    let template = typed_template(&result, JOB_TEMPLATE);
    let annotations = template.metadata.unwrap().annotations.unwrap();
    assert_eq!(annotations[REQUIRED], RACK, "the user's annotation is kept");
    assert_eq!(
        template.spec.unwrap().tolerations,
        None,
        "no flavor toleration"
    );
}

#[tokio::test]
async fn a_gpu_job_gets_the_flavor_tolerations_after_its_own_and_keeps_its_node_selector() {
    let router = router();
    let review = fixture("job-gpu.json");
    let answer = mutate_allowed(&router, &review).await;
    answer.assert_no_warnings();
    let result = assert_patch_injects(
        &review,
        &answer,
        JOB_TEMPLATE,
        &gpu_flavor(),
        GPU_JOB_STAMPS,
    );
    let spec = typed_template(&result, JOB_TEMPLATE).spec.unwrap();
    let selector = spec.node_selector.unwrap();
    assert_eq!(selector["cloud.provider.com/gpu-model"], "h100");
    assert_eq!(selector["node-group"], "gpu");
    assert_eq!(selector.len(), 2);
    let keys: Vec<_> = spec
        .tolerations
        .unwrap()
        .iter()
        .map(|t| t.key.clone().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "example.com/maintenance",
            "nvidia.com/gpu",
            "cloud.provider.com/gpu-pool"
        ]
    );

    // A template that already has one of the flavor's tolerations gets only the other.
    let has_one = derived(&review, "gpu-has-one", |job| {
        job["spec"]["template"]["spec"]["tolerations"]
            .as_array_mut()
            .unwrap()
            .push(gpu_flavor().tolerations[0].clone());
    });
    let answer = mutate(&router, &has_one).await;
    let result = assert_patch_injects(
        &has_one,
        &answer,
        JOB_TEMPLATE,
        &gpu_flavor(),
        GPU_JOB_STAMPS,
    );
    let tolerations = &result["spec"]["template"]["spec"]["tolerations"];
    assert_eq!(tolerations.as_array().unwrap().len(), 3, "{tolerations}");

    // The user's own value of the flavor's key is not a conflict when it agrees.
    let agrees = derived(&review, "gpu-agrees", |job| {
        job["spec"]["template"]["spec"]["nodeSelector"]["node-group"] = json!("gpu");
    });
    let answer = mutate(&router, &agrees).await;
    assert_patch_injects(
        &agrees,
        &answer,
        JOB_TEMPLATE,
        &gpu_flavor(),
        GPU_JOB_STAMPS,
    );
}

#[tokio::test]
async fn a_job_naming_only_a_queue_gets_whole_maps_where_it_has_none() {
    let router = router();
    let review = fixture("job-tas-rack.json");
    // No annotations at all (the TAS-only ClusterQueue implies the topology), then no
    // template metadata at all: the patch adds the missing map or object whole.
    let no_annotations = derived(&review, "no-annotations", |job| {
        job["spec"]["template"]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
    });
    let no_metadata = derived(&review, "no-metadata", |job| {
        job["spec"]["template"]
            .as_object_mut()
            .unwrap()
            .remove("metadata");
    });
    for case in [&no_annotations, &no_metadata] {
        let answer = mutate_allowed(&router, case).await;
        answer.assert_no_warnings();
        assert_patch_injects(case, &answer, JOB_TEMPLATE, &cpu_flavor(), CPU_JOB_STAMPS);
    }
}

#[tokio::test]
async fn a_preferred_top_level_is_admitted_with_a_warning() {
    let router = router();
    let review = derived(&fixture("job-tas-rack.json"), "preferred-block", |job| {
        let annotations = &mut job["spec"]["template"]["metadata"]["annotations"];
        annotations.as_object_mut().unwrap().remove(REQUIRED);
        annotations[PREFERRED] = json!(BLOCK);
    });
    let answer = mutate_allowed(&router, &review).await;
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(PREFERRED), "{warnings:?}");
    assert!(warnings[0].contains(BLOCK), "{warnings:?}");
    assert!(
        warnings[0].contains("top level of Topology \"default\""),
        "{warnings:?}"
    );
    assert_patch_injects(
        &review,
        &answer,
        JOB_TEMPLATE,
        &cpu_flavor(),
        CPU_JOB_STAMPS,
    );
}

/// The webhook may be called again (`reinvocationPolicy: IfNeeded`): what it patched gets no
/// second patch, and the same warnings.
#[tokio::test]
async fn a_patched_object_sent_again_gets_no_patch() {
    let router = router();
    for name in [
        "job-tas-rack.json",
        "job-gpu.json",
        "pod-legacy-job-replacement.json",
        "pod-bare-queued.json",
        "pod-group-member.json",
    ] {
        let review = fixture(name);
        let first = mutate(&router, &review).await;
        assert!(first.patch().is_some(), "{name}: patched the first time");
        let again = rewrap(&review, "again", patched(&review, &first));
        let second = mutate(&router, &again).await;
        second.assert_allowed_unchanged();
        assert_eq!(second.warnings(), first.warnings(), "{name}");
    }
}

/// A new Job whose template already carries stamps (copied from `kubectl get job -o yaml` of
/// another Job) gets them set to its own gang size and queue: stale stamps would send its pods
/// to the wrong flavor (here `gpu-queue`) or plan them as gangs of the wrong size.
#[tokio::test]
async fn stale_stamps_in_a_new_job_are_corrected_or_refused() {
    let router = router();
    let review = derived(&fixture("job-tas-rack.json"), "stale-stamps", |job| {
        let annotations = &mut job["spec"]["template"]["metadata"]["annotations"];
        annotations[STAMP_COUNT] = json!("2");
        annotations[STAMP_QUEUE] = json!("gpu-queue");
    });
    let answer = mutate(&router, &review).await;
    if answer.allowed() {
        let result = patched(&review, &answer);
        let annotations = &result["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(annotations[STAMP_COUNT], "4", "the Job has 4 pods");
        assert_eq!(
            annotations[STAMP_QUEUE], "cpu-queue",
            "the Job names cpu-queue"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------------------------

/// The Job controller's pod from a template the webhook already patched carries everything:
/// nothing is changed twice.
#[tokio::test]
async fn a_pod_from_a_patched_template_gets_no_patch() {
    let router = router();
    let review = fixture("pod-gpu-job-patched-template.json");
    let pod = &review["request"]["object"];

    // The fixture is what the Job controller makes of job-gpu.json once patched.
    let job_review = fixture("job-gpu.json");
    let job = patched(&job_review, &mutate(&router, &job_review).await);
    let template = &job["spec"]["template"];
    for (k, v) in template["metadata"]["annotations"].as_object().unwrap() {
        assert_eq!(&pod["metadata"]["annotations"][k], v, "annotation {k}");
    }
    assert_eq!(
        pod["spec"]["nodeSelector"],
        template["spec"]["nodeSelector"]
    );
    let from_template = template["spec"]["tolerations"].as_array().unwrap();
    let on_pod = pod["spec"]["tolerations"].as_array().unwrap();
    assert_eq!(&on_pod[..from_template.len()], from_template.as_slice());

    let answer = mutate(&router, &review).await;
    answer.assert_allowed_unchanged();
    answer.assert_no_warnings();

    // An empty `name` (rather than none) reads the same.
    let mut named = rewrap(&review, "empty-name", pod.clone());
    named["request"]["name"] = json!("");
    mutate(&router, &named).await.assert_allowed_unchanged();
}

/// A Job created before the webhook: its pods get, in their own spec, what the template never
/// got, including the stamps (read from the Job in the cluster view).
#[tokio::test]
async fn a_pod_of_a_job_created_before_the_webhook_is_patched_itself() {
    let router = router();
    let review = fixture("pod-legacy-job-replacement.json");
    let answer = mutate_allowed(&router, &review).await;
    answer.assert_no_warnings();
    let stamps = [(STAMP_COUNT, "2"), (STAMP_QUEUE, "gpu-queue")];
    let result = assert_patch_injects(&review, &answer, POD_ROOT, &gpu_flavor(), &stamps);
    let spec = typed_template(&result, POD_ROOT).spec.unwrap();
    let keys: Vec<_> = spec
        .tolerations
        .unwrap()
        .iter()
        .map(|t| t.key.clone().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
            "nvidia.com/gpu",
            "cloud.provider.com/gpu-pool"
        ]
    );
}

/// A Job's pod is admitted as its Job, but its own nodeSelector is checked too: a pod that
/// contradicts the Job's flavor is refused, naming the key, not given the flavor's tolerations.
#[tokio::test]
async fn a_job_pod_contradicting_its_flavor_is_denied() {
    let router = router();
    let review = derived(
        &fixture("pod-legacy-job-replacement.json"),
        "pod-conflict",
        |pod| {
            pod["spec"]["nodeSelector"] = json!({"node-group": "cpu"});
        },
    );
    let message = mutate_forbidden(&router, &review).await;
    assert_mentions(
        &message,
        &[
            "spec.nodeSelector[node-group]",
            "\"cpu\"",
            "gpu-flavor",
            "node-group=gpu",
        ],
    );
}

/// A TAS pod whose Job is neither in the cluster view nor stamped cannot be sized: refused
/// with the reason, rather than let through to be placed as a lone pod.
#[tokio::test]
async fn a_pod_of_an_unknown_unstamped_job_is_denied() {
    let router = router();
    let review = derived(
        &fixture("pod-legacy-job-replacement.json"),
        "unknown-job",
        |pod| {
            pod["metadata"]["ownerReferences"][0]["name"] = json!("vanished");
            pod["metadata"]["generateName"] = json!("vanished-1-");
        },
    );
    let message = mutate_forbidden(&router, &review).await;
    assert!(message.contains("ml/vanished"), "{message}");
    assert!(message.contains(STAMP_COUNT), "{message}");
    assert!(message.contains("recreate the Job"), "{message}");

    // The same pod without any TAS mark is not kube-tas's business.
    let unmarked = derived(&review, "unknown-unmarked", |pod| {
        pod["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(REQUIRED);
    });
    mutate(&router, &unmarked).await.assert_allowed_unchanged();
}

#[tokio::test]
async fn a_bare_pod_with_a_queue_label_is_patched_in_its_own_spec() {
    let router = router();
    let review = fixture("pod-bare-queued.json");
    let answer = mutate_allowed(&router, &review).await;
    answer.assert_no_warnings();
    // A lone pod is its own gang: no stamps.
    let result = assert_patch_injects(&review, &answer, POD_ROOT, &cpu_flavor(), &[]);
    assert!(result["metadata"].get("annotations").is_none());
}

#[tokio::test]
async fn a_plain_pod_group_member_is_patched() {
    let router = router();
    let review = fixture("pod-group-member.json");
    let answer = mutate_allowed(&router, &review).await;
    // The pod keeps the role of its shape as submitted (Kueue's role-hash annotation).
    let pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(review["request"]["object"].clone()).unwrap();
    let role =
        kube_tas::cluster::role::pod_role(&pod.metadata, pod.spec.as_ref().unwrap()).unwrap();
    assert_eq!(role.len(), 8, "{role}");
    assert_patch_injects(
        &review,
        &answer,
        POD_ROOT,
        &gpu_flavor(),
        &[("kueue.x-k8s.io/role-hash", role.as_str())],
    );
}

// ---------------------------------------------------------------------------------------------
// Refusals and pass-through
// ---------------------------------------------------------------------------------------------

/// Beside an existing Kueue: a pod Kueue manages (its scheduling gate, its PodSet label or its
/// Workload annotation) is left to Kueue, unpatched, though it names a queue and a topology.
#[tokio::test]
async fn a_pod_kueue_manages_is_left_to_kueue() {
    let router = router();
    let review = fixture("pod-bare-queued.json");
    // Without Kueue's marks the same pod is patched: the test can tell.
    assert!(mutate_allowed(&router, &review).await.patch().is_some());
    type Mark = (&'static str, fn(&mut Value));
    let marks: [Mark; 3] = [
        ("gate", |pod| {
            pod["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/topology"}]);
        }),
        ("podset label", |pod| {
            pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] = json!("main");
        }),
        ("workload annotation", |pod| {
            let meta = pod["metadata"].as_object_mut().unwrap();
            let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            annotations["kueue.x-k8s.io/workload"] = json!("pod-solo-3c2f1");
        }),
    ];
    for (i, (mark, edit)) in marks.into_iter().enumerate() {
        let marked = derived(&review, &format!("kueue-{i}"), edit);
        let answer = mutate(&router, &marked).await;
        assert!(
            answer.allowed() && answer.patch().is_none(),
            "{mark}: {}",
            answer.response()
        );
    }
}

#[tokio::test]
async fn an_invalid_annotation_is_denied_quoting_the_key_and_the_rule() {
    let router = router();
    let message = mutate_forbidden(&router, &fixture("job-invalid-slice-size.json")).await;
    assert_mentions(
        &message,
        &[
            "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]",
            "Invalid value: \"0\"",
            "must be greater than or equal to 1",
        ],
    );
}

#[tokio::test]
async fn a_missing_local_queue_is_denied_by_name() {
    let router = router();
    let message = mutate_forbidden(&router, &fixture("job-missing-queue.json")).await;
    assert!(
        message.contains("LocalQueue \"ml/no-such-queue\" does not exist"),
        "{message}"
    );
    assert!(message.contains("kueue.x-k8s.io/queue-name"), "{message}");
}

#[tokio::test]
async fn a_node_selector_contradicting_the_flavor_is_denied_naming_the_key() {
    let router = router();
    let review = derived(&fixture("job-tas-rack.json"), "conflict", |job| {
        job["spec"]["template"]["spec"]["nodeSelector"] = json!({"node-group": "gpu"});
    });
    let message = mutate_forbidden(&router, &review).await;
    assert_mentions(
        &message,
        &[
            "spec.template.spec.nodeSelector[node-group]",
            "\"gpu\"",
            "cpu-flavor",
            "node-group=cpu",
        ],
    );
}

#[tokio::test]
async fn a_level_the_topology_lacks_is_denied() {
    let router = router();
    let review = derived(&fixture("job-tas-rack.json"), "no-such-level", |job| {
        job["spec"]["template"]["metadata"]["annotations"][REQUIRED] =
            json!("cloud.provider.com/topology-zone");
    });
    let message = mutate_forbidden(&router, &review).await;
    assert!(message.contains(REQUIRED), "{message}");
    assert!(
        message.contains("cloud.provider.com/topology-zone"),
        "{message}"
    );
}

#[tokio::test]
async fn a_job_outside_kueue_passes_untouched() {
    let router = router();
    let answer = mutate(&router, &fixture("job-plain.json")).await;
    answer.assert_allowed_unchanged();
    answer.assert_no_warnings();
}

#[tokio::test]
async fn another_kind_passes_with_a_warning() {
    let router = router();
    let deployment = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "d1e2f3a4-0000-4000-8000-000000000001",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "web", "namespace": "ml", "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:authenticated"]},
            "object": {"kind": "Deployment", "apiVersion": "apps/v1",
                "metadata": {"name": "web", "namespace": "ml", "creationTimestamp": null,
                    "labels": {"kueue.x-k8s.io/queue-name": "cpu-queue"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
                "status": {}},
            "oldObject": null, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    });
    let answer = mutate(&router, &deployment).await;
    answer.assert_allowed_unchanged();
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("apps/v1 Deployment"), "{warnings:?}");
    assert!(
        warnings[0].contains("MutatingWebhookConfiguration"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn updates_deletes_and_subresources_pass_unpatched() {
    let router = router();
    let review = fixture("job-tas-rack.json");
    let object = review["request"]["object"].clone();

    let mut update = rewrap(&review, "update", object.clone());
    update["request"]["operation"] = json!("UPDATE");
    update["request"]["oldObject"] = object.clone();
    update["request"]["options"] = json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"});

    let mut delete = rewrap(&review, "delete", Value::Null);
    delete["request"]["operation"] = json!("DELETE");
    delete["request"]["oldObject"] = object;
    delete["request"]["options"] = json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
        "propagationPolicy": "Background"});

    // `pods/binding` CREATE, as the default binder sends it.
    let pod = fixture("pod-bare-queued.json");
    let mut binding = rewrap(
        &pod,
        "binding",
        json!({"kind": "Binding", "apiVersion": "v1",
            "metadata": {"name": "notebook", "namespace": "ml", "creationTimestamp": null},
            "target": {"kind": "Node", "name": "b1-r1-h1"}}),
    );
    binding["request"]["subResource"] = json!("binding");
    binding["request"]["requestSubResource"] = json!("binding");
    binding["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Binding"});
    binding["request"]["requestKind"] = binding["request"]["kind"].clone();

    for review in [&update, &delete, &binding] {
        let answer = mutate(&router, review).await;
        answer.assert_allowed_unchanged();
        answer.assert_no_warnings();
    }
}

// ---------------------------------------------------------------------------------------------
// Dry run
// ---------------------------------------------------------------------------------------------

/// The plan numbers of `/metrics` (everything but the request and admission counters).
async fn plan_numbers(metrics: &Metrics) -> Vec<String> {
    let admin = admin_router(Readiness::new(), metrics.clone());
    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let (status, _, body) = send_request(&admin, request).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body.to_vec()).unwrap();
    let lines: Vec<String> = text
        .lines()
        .filter(|l| {
            ["plans_", "seats_held", "pods_bound", "groups_not_fit"]
                .iter()
                .any(|m| l.starts_with(&format!("kube_tas_{m}")))
        })
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 6, "{text}");
    lines
}

fn without_uid(answer: &Answer) -> Value {
    let mut r = answer.review.clone();
    r["response"]["uid"] = Value::Null;
    r
}

#[tokio::test]
async fn a_dry_run_gets_the_same_answer_and_leaves_no_trace() {
    let extender = extender();
    let metrics = Metrics::new(extender.clone());
    let router = main_router_with(extender.clone(), &metrics, DEFAULT_MAX_BODY_BYTES);
    let stats = extender.stats();
    let numbers = plan_numbers(&metrics).await;

    let real = fixture("job-tas-rack.json");
    let dry = fixture("job-tas-rack-dry-run.json");
    assert_eq!(dry["request"]["dryRun"], true);
    assert_eq!(dry["request"]["object"], real["request"]["object"]);
    let before = mutate(&router, &real).await;
    for _ in 0..5 {
        let answer = mutate(&router, &dry).await;
        assert_eq!(without_uid(&answer), without_uid(&before));
    }
    // Nothing was reserved: the real request still gets the first answer.
    let after = mutate(&router, &real).await;
    assert_eq!(after.review, before.review);

    assert_eq!(extender.stats(), stats);
    assert_eq!(plan_numbers(&metrics).await, numbers);

    // Denials and pass-throughs are the same in a dry run too.
    for name in ["job-invalid-slice-size.json", "job-plain.json"] {
        let review = fixture(name);
        let mut dry = rewrap(&review, "dry", review["request"]["object"].clone());
        dry["request"]["dryRun"] = json!(true);
        dry["request"]["options"]["dryRun"] = json!(["All"]);
        let real = mutate(&router, &review).await;
        let dry = mutate(&router, &dry).await;
        assert_eq!(without_uid(&dry), without_uid(&real), "{name}");
    }
    assert_eq!(extender.stats(), stats);
}

// ---------------------------------------------------------------------------------------------
// End to end: webhook, then the extender
// ---------------------------------------------------------------------------------------------

/// The Job as the API server stores it after admission: its uid, selector and selector labels.
fn stored_job(admitted: &Value, uid: &str) -> Value {
    let mut job = admitted.clone();
    let name = job["metadata"]["name"].as_str().unwrap().to_string();
    job["metadata"]["uid"] = json!(uid);
    job["metadata"]["creationTimestamp"] = json!("2026-01-06T10:00:00Z");
    job["metadata"]["generation"] = json!(1);
    job["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    job["spec"]["manualSelector"] = json!(false);
    let template = &mut job["spec"]["template"];
    if template.get("metadata").is_none() {
        template["metadata"] = json!({"creationTimestamp": null});
    }
    template["metadata"]["labels"] = json!({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    });
    job
}

/// Pod `index` of an Indexed Job as the Job controller submits it from the stored Job's
/// template, after the API server's in-tree admission plugins (service account volume,
/// default tolerations, priority): the object the webhook reviews.
fn job_controller_pod(job: &Value, index: usize) -> Value {
    let name = job["metadata"]["name"].as_str().unwrap();
    let template = &job["spec"]["template"];
    let mut meta = template["metadata"].clone();
    meta["generateName"] = json!(format!("{name}-{index}-"));
    meta["namespace"] = job["metadata"]["namespace"].clone();
    meta["labels"][COMPLETION_INDEX] = json!(index.to_string());
    meta["annotations"][COMPLETION_INDEX] = json!(index.to_string());
    meta["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": name,
        "uid": job["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]);
    meta["finalizers"] = json!(["batch.kubernetes.io/job-tracking"]);
    let mut spec = template["spec"].clone();
    let volume = format!("kube-api-access-{index:05}");
    spec["volumes"] = json!([{"name": volume, "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
        "defaultMode": 420}}]);
    for c in spec["containers"].as_array_mut().unwrap() {
        c["env"] = json!([{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "apiVersion": "v1",
            "fieldPath": format!("metadata.labels['{COMPLETION_INDEX}']")}}}]);
        c["volumeMounts"] = json!([{"name": volume, "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]);
    }
    spec["hostname"] = json!(format!("{name}-{index}"));
    spec["serviceAccountName"] = json!("default");
    spec["serviceAccount"] = json!("default");
    if spec.get("tolerations").is_none() {
        spec["tolerations"] = json!([]);
    }
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        spec["tolerations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": key,
            "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
    }
    spec["priority"] = json!(0);
    spec["enableServiceLinks"] = json!(true);
    spec["preemptionPolicy"] = json!("PreemptLowerPriority");
    json!({"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": {}})
}

/// The pod as stored and sent to the scheduler: a generated name, a uid, phase Pending.
fn stored_pod(pod: &Value, index: usize) -> Value {
    let mut pod = pod.clone();
    let generate = pod["metadata"]["generateName"]
        .as_str()
        .unwrap()
        .to_string();
    pod["metadata"]["name"] = json!(format!("{generate}x{index:04}"));
    pod["metadata"]["uid"] = json!(format!("6b0c2f4e-{index:04}-4222-8333-0123456789ab"));
    pod["metadata"]["creationTimestamp"] = json!("2026-01-06T10:00:01Z");
    pod["status"] = json!({"phase": "Pending", "qosClass": "Burstable"});
    pod
}

fn node_names(cluster: &Cluster) -> Vec<String> {
    cluster.nodes.iter().map(|n| n.name.clone()).collect()
}

/// `(block, rack)` of a node: the rack domain's full path.
fn rack_of(cluster: &Cluster, node: &str) -> (String, String) {
    let n = cluster
        .nodes
        .iter()
        .find(|n| n.name == node)
        .unwrap_or_else(|| panic!("{node} is not a node"));
    (n.labels[BLOCK].to_string(), n.labels[RACK].to_string())
}

async fn filter(router: &Router, pod: &Value, names: &[String]) -> Value {
    let args = json!({"Pod": pod, "Nodes": null, "NodeNames": names});
    let (status, _, body) = send(router, "POST", "/scheduler/filter", args.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

async fn bind(router: &Router, pod: &Value, node: &str) -> String {
    let args = json!({"PodName": pod["metadata"]["name"], "PodNamespace": "ml",
        "PodUID": pod["metadata"]["uid"], "Node": node});
    let (status, _, body) = send(router, "POST", "/scheduler/bind", args.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&body).unwrap();
    v["Error"].as_str().unwrap().to_string()
}

/// A TAS Job the cluster view does not know is admitted by the webhook; the pods the Job
/// controller makes of its patched template pass the webhook untouched, and the extender
/// places the whole gang in one rack, learning the gang from the stamps.
#[tokio::test]
async fn an_admitted_job_is_placed_as_one_gang_by_the_extender() {
    let cluster = load_cluster();
    let names = node_names(&cluster);
    let extender = extender();
    let router = main_router(extender.clone());
    let job_review = fixture("job-tas-rack.json");
    let answer = mutate_allowed(&router, &job_review).await;
    let job = stored_job(
        &patched(&job_review, &answer),
        "0b5e8c1a-2b7d-4f6e-9a1c-77e1a2b3c4d5",
    );
    let pod_envelope = fixture("pod-gpu-job-patched-template.json");

    let mut racks = Vec::new();
    let mut hosts = Vec::new();
    for index in 0..4 {
        let pod = job_controller_pod(&job, index);
        let review = rewrap(&pod_envelope, &format!("pod-{index}"), pod);
        let answer = mutate(&router, &review).await;
        answer.assert_allowed_unchanged();
        let pod = stored_pod(&patched(&review, &answer), index);
        let v = filter(&router, &pod, &names).await;
        assert_eq!(v["Error"], "", "{v}");
        let passed = v["NodeNames"].as_array().expect("NodeNames");
        assert_eq!(passed.len(), 1, "a gang pod gets its seat: {v}");
        let node = passed[0].as_str().unwrap().to_string();
        assert_eq!(bind(&router, &pod, &node).await, "", "binding pod {index}");
        racks.push(rack_of(&cluster, &node));
        hosts.push(node);
    }
    assert!(
        racks.iter().all(|r| *r == racks[0]),
        "the gang spans racks: {hosts:?}"
    );
    assert!(
        hosts.iter().all(|h| {
            cluster
                .nodes
                .iter()
                .any(|n| &n.name == h && n.labels.get("node-group") == Some("cpu"))
        }),
        "{hosts:?}"
    );
    assert_eq!(extender.stats().pods_bound, 4);
}

/// Without the stamps (the template as the user wrote it), a pod of a Job outside the
/// cluster view cannot be sized: the webhook refuses it, and the extender answers an Error.
#[tokio::test]
async fn without_the_stamps_the_gang_size_is_unknown() {
    let cluster = load_cluster();
    let names = node_names(&cluster);
    let router = router();
    let job_review = fixture("job-tas-rack.json");
    let job = stored_job(
        &job_review["request"]["object"],
        "0b5e8c1a-2b7d-4f6e-9a1c-0000000000aa",
    );
    let pod = job_controller_pod(&job, 0);
    let review = rewrap(
        &fixture("pod-gpu-job-patched-template.json"),
        "bare",
        pod.clone(),
    );
    let message = mutate_forbidden(&router, &review).await;
    assert!(message.contains("ml/train-rack"), "{message}");

    let v = filter(&router, &stored_pod(&pod, 0), &names).await;
    let error = v["Error"].as_str().unwrap();
    assert!(error.contains("Job ml/train-rack"), "{v}");
    assert!(error.contains("gang size is unknown"), "{v}");
}

// ---------------------------------------------------------------------------------------------
// Malformed input
// ---------------------------------------------------------------------------------------------

/// A 400 refusal in AdmissionReview form, echoing `api_version` and `uid`.
fn assert_bad_request(name: &str, answer: &Answer, api_version: &str, uid: &str) -> String {
    assert_eq!(answer.review["apiVersion"], api_version, "{name}");
    assert_eq!(answer.review["kind"], "AdmissionReview", "{name}");
    assert_eq!(answer.uid(), uid, "{name}");
    let (code, message) = answer.denial();
    assert_eq!(code, 400, "{name}: {message}");
    assert!(message.len() < 1_000, "{name}: {message}");
    message
}

#[tokio::test]
async fn malformed_reviews_are_answered_400_in_review_form() {
    let router = router();
    let good = fixture("job-tas-rack.json");
    let uid = good["request"]["uid"].as_str().unwrap().to_string();
    let good_text = serde_json::to_string(&good).unwrap();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        serde_json::to_string(&v).unwrap()
    };
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let with_object = |object: &str| {
        let marker = "\"__OBJECT__\"";
        edit(&|v| v["request"]["object"] = json!("__OBJECT__")).replace(marker, object)
    };
    // (case, body, whose uid is echoed, text in the message)
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("empty body", String::new(), "", "the request body is empty"),
        ("not JSON", "hello, webhook".into(), "", "expected value"),
        ("truncated", good_text[..400].to_string(), "", "EOF"),
        (
            "a JSON array",
            "[]".into(),
            "",
            "cannot read the AdmissionReview",
        ),
        (
            "an empty object",
            "{}".into(),
            "",
            "apiVersion: Required value; kind: Required value",
        ),
        (
            "no kind",
            r#"{"apiVersion":"admission.k8s.io/v1"}"#.into(),
            "",
            "kind: Required value",
        ),
        (
            "a JSON string",
            "\"AdmissionReview\"".into(),
            "",
            "invalid type",
        ),
        (
            "trailing junk",
            format!("{good_text} junk"),
            "",
            "trailing characters",
        ),
        (
            "request missing",
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.into(),
            "",
            "request: Required value",
        ),
        (
            "request.kind missing",
            edit(&|v| {
                v["request"].as_object_mut().unwrap().remove("kind");
            }),
            &uid,
            "missing field `kind`",
        ),
        (
            "uid not a string",
            edit(&|v| v["request"]["uid"] = json!(7)),
            "",
            "invalid type",
        ),
        (
            "object missing on CREATE",
            edit(&|v| {
                v["request"].as_object_mut().unwrap().remove("object");
            }),
            &uid,
            "request.object: Required value",
        ),
        (
            "object null on CREATE",
            edit(&|v| v["request"]["object"] = Value::Null),
            &uid,
            "request.object: Required value",
        ),
        (
            "object of the wrong shape",
            edit(&|v| v["request"]["object"]["spec"] = json!(5)),
            &uid,
            "cannot read batch/v1 Job",
        ),
        (
            "object a string",
            edit(&|v| v["request"]["object"] = json!("a Job")),
            &uid,
            "cannot read batch/v1 Job",
        ),
        (
            "100k-deep array as the object",
            with_object(&deep),
            &uid,
            "cannot read batch/v1 Job",
        ),
        (
            "100k-deep array inside the object",
            with_object(&format!(r#"{{"metadata":{{"labels":{deep}}}}}"#)),
            &uid,
            "cannot read batch/v1 Job",
        ),
        (
            "100k-deep unclosed array",
            with_object(&"[".repeat(100_000)),
            "",
            "cannot read the AdmissionReview",
        ),
    ];
    for (name, body, echoed, expect) in &cases {
        let answer = post_review(&router, body.clone()).await;
        let message = assert_bad_request(name, &answer, "admission.k8s.io/v1", echoed);
        assert!(message.contains(expect), "{name}: {message}");
    }

    // Another AdmissionReview version: refused, its apiVersion echoed so the API server can
    // read the answer.
    let v1beta1 = edit(&|v| v["apiVersion"] = json!("admission.k8s.io/v1beta1"));
    let answer = post_review(&router, v1beta1).await;
    let message = assert_bad_request("v1beta1", &answer, "admission.k8s.io/v1beta1", &uid);
    assert!(message.contains("admissionReviewVersions"), "{message}");

    // Serving continues.
    let answer = mutate(&router, &good).await;
    assert!(answer.patch().is_some());
}

#[tokio::test]
async fn an_oversized_review_gets_413_and_serving_continues() {
    let extender = extender();
    let metrics = Metrics::new(extender.clone());
    let router = main_router_with(extender, &metrics, 64 * 1024);
    let good = fixture("job-tas-rack.json");
    // A well-formed review padded to 1 MB.
    let big = format!(
        "{}{}",
        serde_json::to_string(&good).unwrap(),
        " ".repeat(1024 * 1024)
    );
    // Announced by Content-Length: refused before reading.
    let request = Request::post("/mutate")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, big.len())
        .body(Body::from(big.clone()))
        .unwrap();
    let (status, _, _) = send_request(&router, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // No Content-Length header: cut off while reading.
    let request = Request::post("/mutate")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(big))
        .unwrap();
    let (status, _, _) = send_request(&router, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    let answer = mutate(&router, &good).await;
    assert!(answer.allowed() && answer.patch().is_some());
    let text = metrics.encode().unwrap();
    for line in [
        r#"kube_tas_http_requests_total{route="/mutate",code="413"} 2"#,
        r#"kube_tas_http_requests_total{route="/mutate",code="200"} 1"#,
        r#"kube_tas_admission_reviews_total{decision="patched"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics and a real server
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn decisions_are_counted_in_metrics() {
    let extender = extender();
    let metrics = Metrics::new(extender.clone());
    let router = main_router_with(extender, &metrics, DEFAULT_MAX_BODY_BYTES);
    for name in [
        "job-tas-rack.json",
        "job-gpu.json",
        "pod-bare-queued.json",
        "job-plain.json",
        "pod-gpu-job-patched-template.json",
        "job-invalid-slice-size.json",
        "job-missing-queue.json",
    ] {
        mutate(&router, &fixture(name)).await;
    }
    send(&router, "POST", "/mutate", "").await;
    send(&router, "POST", "/mutate", "{").await;
    let text = metrics.encode().unwrap();
    for line in [
        r#"kube_tas_admission_reviews_total{decision="patched"} 3"#,
        r#"kube_tas_admission_reviews_total{decision="allowed"} 2"#,
        r#"kube_tas_admission_reviews_total{decision="denied"} 2"#,
        r#"kube_tas_admission_reviews_total{decision="invalid"} 2"#,
        r#"kube_tas_http_requests_total{route="/mutate",code="200"} 9"#,
        r#"kube_tas_http_request_duration_seconds_count{route="/mutate"} 9"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_webhook_answers_over_http() {
    let config = ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        ..ServeConfig::default()
    };
    let server = start(&config, extender()).await.unwrap();
    server.readiness().mark_ready();
    let review = fixture("job-gpu.json");
    let stream = TcpStream::connect(server.main_addr()).await.unwrap();
    // The API server appends `?timeout=`; the route matches on the path.
    let (status, body) = common::http1(
        stream,
        "POST",
        "/mutate?timeout=10s",
        &serde_json::to_string(&review).unwrap(),
    )
    .await;
    let answer = Answer::read(status, "application/json", &body);
    assert_eq!(answer.uid(), review["request"]["uid"].as_str().unwrap());
    assert_patch_injects(
        &review,
        &answer,
        JOB_TEMPLATE,
        &gpu_flavor(),
        GPU_JOB_STAMPS,
    );

    let admin = TcpStream::connect(server.admin_addr()).await.unwrap();
    let (_, metrics) = common::http1(admin, "GET", "/metrics", "").await;
    let metrics = String::from_utf8(metrics.to_vec()).unwrap();
    assert!(
        metrics.contains(r#"kube_tas_admission_reviews_total{decision="patched"} 1"#),
        "{metrics}"
    );
    server
        .shutdown(Duration::ZERO, Duration::from_secs(2))
        .await
        .unwrap();
}
