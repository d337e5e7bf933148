//! Every case of `tests/conformance/admission` (and `placement`, `podset-groups` and
//! `node-replacement`: they hold denied workloads too) gives the same verdict and
//! message over HTTP, as kube-apiserver calls the mutating webhook, as through `simulate`.
//!
//! Per case, a real `kube-tas` main server is started in process on `127.0.0.1:0` (the
//! [`kube_tas::server::start`] stack, on a multi-thread runtime of its own) over the case's
//! cluster and gates. The case's manifests are read here, independently of the loader, and
//! every pending workload object is taken with the loader's rules (a `batch/v1` Job that has
//! not finished and has no non-terminal pod; a `v1` Pod in no terminal phase, without
//! `spec.nodeName` and without a controlling Job; plain pod groups whose pods are all
//! pending). Each object is wrapped in an `admission.k8s.io/v1` AdmissionReview exactly as
//! kube-apiserver sends it on CREATE and POSTed to `/mutate?timeout=10s` over one keep-alive
//! HTTP/1.1 connection. A pod group is sent pod by pod; it is denied when any of its pods is.
//!
//! The answers are compared with [`simulate::run`] workload by workload:
//!
//! * denied in `simulate` ⇔ `allowed: false` over HTTP, with code 403 and the message kubectl
//!   shows (`admission webhook "<name>" denied the request: <status.message>`) equal to
//!   `simulate`'s `message`;
//! * admitted: `allowed: true`, `warnings` equal to `simulate`'s, and a patch (if any) that is
//!   a `JSONPatch` applying cleanly to the object;
//! * not reported by `simulate` (not a TAS workload): `allowed: true`, no patch, no warning;
//! * every answer is HTTP 200 with an AdmissionReview echoing `apiVersion`, `kind` and `uid`.
//!
//! Every mismatch of every case is collected and reported at once.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hyper::StatusCode;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use common::conformance::{self, CONFORMANCE, Case, PLAN_TTL, case_gates};
use common::{KeepAlive, Reply};
use kube_tas::admission::WEBHOOK_NAME;
use kube_tas::extender::Extender;

use kube_tas::server::{ServeConfig, start};
use kube_tas::simulate;

/// The folder that must exist (CI always has it), then folders run when present.
const REQUIRED_FOLDERS: &[&str] = &[
    "admission",
    "placement",
    "podset-groups",
    "node-replacement",
];
const OPTIONAL_FOLDERS: &[&str] = &[];

/// The webhook's `timeoutSeconds`, which client-go appends as `?timeout=`.
const WEBHOOK_TIMEOUT: &str = "10s";

/// The workload label key of the plain pod groups.
const POD_GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";

// ---------------------------------------------------------------------------------------------
// The HTTP client
// ---------------------------------------------------------------------------------------------

/// An AdmissionReview client over one keep-alive HTTP/1.1 connection to a running server.
struct WebhookClient<'rt> {
    /// The client's runtime (never the server's).
    rt: &'rt Runtime,
    /// The keep-alive connection, opened on first use.
    http: KeepAlive,
    /// Reviews sent.
    sent: usize,
}

impl<'rt> WebhookClient<'rt> {
    fn new(rt: &'rt Runtime, addr: SocketAddr) -> Self {
        Self {
            rt,
            http: KeepAlive::new(addr),
            sent: 0,
        }
    }

    /// POSTs `review` to `/mutate`: the answer when it is HTTP 200 with a JSON body, or why
    /// not.
    fn post(&mut self, review: &Value) -> Result<Value, String> {
        self.sent += 1;
        self.rt.block_on(self.send(review))
    }

    async fn send(&mut self, review: &Value) -> Result<Value, String> {
        let bytes = serde_json::to_vec(review).map_err(|e| format!("cannot encode: {e}"))?;
        let Reply {
            status,
            content_type,
            body,
        } = self
            .http
            .post(
                &format!("/mutate?timeout={WEBHOOK_TIMEOUT}"),
                "application/json, */*",
                bytes,
            )
            .await?;
        if status != StatusCode::OK {
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        if !content_type.starts_with("application/json") {
            return Err(format!(
                "Content-Type {content_type:?}, not application/json"
            ));
        }
        serde_json::from_slice(&body).map_err(|e| {
            format!(
                "cannot parse the answer ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        })
    }

    /// Connections opened (1 when keep-alive held for the whole case).
    fn connections(&self) -> usize {
        self.http.connections()
    }

    /// Closes the keep-alive connection and waits for its task, so that the server can drain
    /// at once.
    fn close(&mut self) {
        self.rt.block_on(self.http.close());
    }
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// The case's manifests (`*.yaml`, `*.yml`), sorted: what the server loads and what is read
/// here for the objects to send.
fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension().is_some_and(|e| {
                    e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml")
                })
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("no manifest in {}", dir.display()));
    }
    Ok(files)
}

// ---------------------------------------------------------------------------------------------
// Pending workloads, read from the manifests
// ---------------------------------------------------------------------------------------------

/// Every object of the manifests, in file order, `List`s expanded (items inherit the list's
/// apiVersion and, for a typed list such as `PodList`, its item kind).
fn read_objects(files: &[PathBuf]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| format!("cannot parse {}: {e}", file.display()))?;
        for doc in docs {
            expand(doc, &mut out);
        }
    }
    Ok(out)
}

fn expand(doc: Value, out: &mut Vec<Value>) {
    if !doc.is_object() {
        return;
    }
    let kind = str_at(&doc, &["kind"]).to_string();
    let is_list =
        kind == "List" || (kind.ends_with("List") && doc.get("items").is_some_and(Value::is_array));
    if !is_list {
        out.push(doc);
        return;
    }
    let api_version = str_at(&doc, &["apiVersion"]).to_string();
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
    let items = doc
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for mut item in items {
        if let Some(map) = item.as_object_mut() {
            if let Some(k) = item_kind {
                map.entry("apiVersion")
                    .or_insert_with(|| Value::from(api_version.clone()));
                map.entry("kind").or_insert_with(|| Value::from(k));
            }
            out.push(item);
        }
    }
}

/// The string at `path`, `""` when absent or not a string.
fn str_at<'v>(v: &'v Value, path: &[&str]) -> &'v str {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.namespace`, `default` when absent or empty.
fn namespace_of(object: &Value) -> String {
    match str_at(object, &["metadata", "namespace"]) {
        "" => "default".to_string(),
        ns => ns.to_string(),
    }
}

/// The name of the Job among the controller owner references.
fn controller_job(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r.get("controller") == Some(&Value::Bool(true)) && str_at(r, &["kind"]) == "Job")
        .map(|r| str_at(r, &["name"]).to_string())
}

/// A Job with a `Complete` or `Failed` condition that is `True`.
fn finished(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            matches!(str_at(c, &["type"]), "Complete" | "Failed")
                && str_at(c, &["status"]) == "True"
        })
}

/// A workload waiting to be placed, with the objects that a user (or a controller) creates
/// for it.
struct Pending {
    /// `Job`, `Pod`, `PodGroup`: as `simulate` names it.
    kind: &'static str,
    namespace: String,
    name: String,
    /// What is sent, in file order: one Job, one Pod, or every pod of a group.
    objects: Vec<Value>,
}

impl Pending {
    fn key(&self) -> (String, String, String) {
        (
            self.kind.to_string(),
            self.namespace.clone(),
            self.name.clone(),
        )
    }
}

/// The pending workloads of `objects`, by the loader's rules (see the module doc), in the
/// order of their first object.
fn pending_workloads(objects: &[Value]) -> Vec<Pending> {
    let mut running_jobs = BTreeSet::new();
    let mut running_groups = BTreeSet::new();
    let mut pending: Vec<(usize, Pending)> = Vec::new();
    let mut groups: BTreeMap<(String, String), (usize, Pending)> = BTreeMap::new();

    for (seq, pod) in objects.iter().enumerate() {
        if str_at(pod, &["apiVersion"]) != "v1" || str_at(pod, &["kind"]) != "Pod" {
            continue;
        }
        if matches!(str_at(pod, &["status", "phase"]), "Succeeded" | "Failed") {
            continue;
        }
        let namespace = namespace_of(pod);
        let owner = controller_job(pod);
        if let Some(job) = &owner {
            running_jobs.insert((namespace.clone(), job.clone()));
        }
        let group = match str_at(pod, &["metadata", "labels", POD_GROUP_NAME_LABEL]) {
            "" => None,
            g => Some(g.to_string()),
        };
        if !str_at(pod, &["spec", "nodeName"]).is_empty() {
            if let Some(group) = group {
                running_groups.insert((namespace, group));
            }
            continue;
        }
        if owner.is_some() {
            continue;
        }
        match group {
            None => pending.push((
                seq,
                Pending {
                    kind: "Pod",
                    name: str_at(pod, &["metadata", "name"]).to_string(),
                    namespace,
                    objects: vec![pod.clone()],
                },
            )),
            Some(group) => {
                groups
                    .entry((namespace.clone(), group.clone()))
                    .or_insert_with(|| {
                        (
                            seq,
                            Pending {
                                kind: "PodGroup",
                                namespace,
                                name: group,
                                objects: Vec::new(),
                            },
                        )
                    })
                    .1
                    .objects
                    .push(pod.clone());
            }
        }
    }
    for (key, group) in groups {
        if !running_groups.contains(&key) {
            pending.push(group);
        }
    }
    for (seq, job) in objects.iter().enumerate() {
        if str_at(job, &["apiVersion"]) != "batch/v1" || str_at(job, &["kind"]) != "Job" {
            continue;
        }
        let namespace = namespace_of(job);
        let name = str_at(job, &["metadata", "name"]).to_string();
        if finished(job) || running_jobs.contains(&(namespace.clone(), name.clone())) {
            continue;
        }
        pending.push((
            seq,
            Pending {
                kind: "Job",
                namespace,
                name,
                objects: vec![job.clone()],
            },
        ));
    }
    pending.sort_by_key(|(seq, _)| *seq);
    pending.into_iter().map(|(_, p)| p).collect()
}

// ---------------------------------------------------------------------------------------------
// Reviews
// ---------------------------------------------------------------------------------------------

/// The AdmissionReview kube-apiserver sends for the CREATE of `object` (a Job or a Pod): the
/// namespace filled in as the API server does before admission, `name` left out when empty
/// (a `generateName` object), no `subResource`.
fn review_of(object: &Value, namespace: &str, uid: &str) -> Value {
    let (group, version, kind, resource) = match str_at(object, &["kind"]) {
        "Job" => ("batch", "v1", "Job", "jobs"),
        _ => ("", "v1", "Pod", "pods"),
    };
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".to_string(), Value::from(namespace));
    }
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": resource});
    let mut request = json!({
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": {
            "username": "kubernetes-admin",
            "groups": ["kubeadm:cluster-admins", "system:authenticated"]
        },
        "object": object,
        "oldObject": null,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    });
    let name = str_at(&object, &["metadata", "name"]);
    if !name.is_empty() {
        request["name"] = Value::from(name);
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request
    })
}

/// One object's answer, read from the AdmissionReview.
#[derive(Debug)]
struct Answer {
    /// `Pod default/x` or `Job default/x`, for messages.
    object: String,
    allowed: bool,
    code: Option<i64>,
    message: Option<String>,
    warnings: Vec<String>,
    has_patch: bool,
}

/// Reads `answer` to the review with `uid` for `object`; the envelope and the patch are
/// checked here (every problem is pushed to `problems`).
fn read_answer(
    label: &str,
    object: &Value,
    uid: &str,
    answer: &Value,
    problems: &mut Vec<String>,
) -> Answer {
    for (key, want) in [
        ("apiVersion", "admission.k8s.io/v1"),
        ("kind", "AdmissionReview"),
    ] {
        if str_at(answer, &[key]) != want {
            problems.push(format!(
                "{label}: answer {key} {}, want {want:?}",
                answer[key]
            ));
        }
    }
    let response = &answer["response"];
    if str_at(response, &["uid"]) != uid {
        problems.push(format!(
            "{label}: response.uid {}, want {uid:?}",
            response["uid"]
        ));
    }
    let allowed = match response.get("allowed") {
        Some(Value::Bool(b)) => *b,
        other => {
            problems.push(format!(
                "{label}: response.allowed is {other:?}, not a boolean (the API server reads a \
                 missing field as false)"
            ));
            false
        }
    };
    let warnings: Vec<String> = response
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|w| w.as_str().unwrap_or_default().to_string())
        .collect();
    let patch = response.get("patch");
    let patch_type = response.get("patchType");
    match (patch, patch_type) {
        (None, None) => {}
        (Some(patch), Some(Value::String(t))) if t == "JSONPatch" => {
            check_patch(label, object, patch, problems);
        }
        (patch, patch_type) => problems.push(format!(
            "{label}: response.patch {patch:?} with response.patchType {patch_type:?} (they come \
             together, and patchType is \"JSONPatch\")"
        )),
    }
    if !allowed && patch.is_some() {
        problems.push(format!("{label}: a denial carries a patch"));
    }
    Answer {
        object: format!(
            "{} {}/{}",
            str_at(object, &["kind"]),
            namespace_of(object),
            str_at(object, &["metadata", "name"])
        ),
        allowed,
        code: response.pointer("/status/code").and_then(Value::as_i64),
        message: response
            .pointer("/status/message")
            .and_then(Value::as_str)
            .map(str::to_string),
        warnings,
        has_patch: patch.is_some(),
    }
}

/// The patch is standard base64 of an RFC 6902 JSON Patch that applies to the object.
fn check_patch(label: &str, object: &Value, patch: &Value, problems: &mut Vec<String>) {
    let Some(text) = patch.as_str() else {
        problems.push(format!(
            "{label}: response.patch is {patch}, not a base64 string"
        ));
        return;
    };
    let bytes = match STANDARD.decode(text) {
        Ok(b) => b,
        Err(e) => {
            problems.push(format!(
                "{label}: response.patch is not standard base64 ({e})"
            ));
            return;
        }
    };
    let operations: json_patch::Patch = match serde_json::from_slice(&bytes) {
        Ok(p) => p,
        Err(e) => {
            problems.push(format!(
                "{label}: response.patch is not a JSON Patch ({e}): {}",
                String::from_utf8_lossy(&bytes)
            ));
            return;
        }
    };
    let mut doc = object.clone();
    if let Err(e) = json_patch::patch(&mut doc, &operations) {
        problems.push(format!(
            "{label}: the patch does not apply to the object ({e}): {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// One case
// ---------------------------------------------------------------------------------------------

/// What one case contributed.
#[derive(Default)]
struct Outcome {
    mismatches: Vec<String>,
    /// Workloads compared with a `simulate` verdict.
    workloads: usize,
    denials: usize,
    admissions: usize,
    /// Admitted workloads whose warnings were compared and not empty.
    with_warnings: usize,
    /// Pending workloads `simulate` does not report (not TAS), checked to pass unchanged.
    passed_unchanged: usize,
    /// Workloads `simulate` reports of kinds the webhook does not see (e.g. JobSet).
    other_kinds: usize,
    reviews: usize,
    connections: usize,
}

fn run_case(case: &Case, index: usize, server_rt: &Runtime, client_rt: &Runtime) -> Outcome {
    let mut out = Outcome::default();
    let gates = match case_gates(&case.dir) {
        Ok(g) => g,
        Err(e) => {
            out.mismatches.push(e);
            return out;
        }
    };
    let paths = match manifest_files(&case.dir) {
        Ok(p) => p,
        Err(e) => {
            out.mismatches.push(e);
            return out;
        }
    };
    let cluster = match kube_tas::cluster::load_paths(&paths) {
        Ok(c) => c,
        Err(e) => {
            out.mismatches.push(format!("cannot load the cluster: {e}"));
            return out;
        }
    };
    let objects = match read_objects(&paths) {
        Ok(o) => o,
        Err(e) => {
            out.mismatches.push(e);
            return out;
        }
    };
    let pending = pending_workloads(&objects);

    // simulate's verdicts by (kind, namespace, name).
    let report = simulate::run(&cluster, &gates).to_json();
    let mut expected: BTreeMap<(String, String, String), Value> = BTreeMap::new();
    for w in report["workloads"].as_array().into_iter().flatten() {
        let key = (
            str_at(w, &["kind"]).to_string(),
            str_at(w, &["namespace"]).to_string(),
            str_at(w, &["name"]).to_string(),
        );
        expected.insert(key, w.clone());
    }

    let config = ServeConfig {
        cluster: paths.clone(),
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        feature_gates: gates.clone(),
        plan_ttl: PLAN_TTL,
        ..ServeConfig::default()
    };
    let extender = Extender::over_cluster(&cluster, gates.clone(), PLAN_TTL);
    let server = match server_rt.block_on(start(&config, extender)) {
        Ok(s) => s,
        Err(e) => {
            out.mismatches
                .push(format!("the server does not start: {e:#}"));
            return out;
        }
    };
    let mut client = WebhookClient::new(client_rt, server.main_addr());

    let mut seen = BTreeSet::new();
    for workload in &pending {
        let label = format!("{} {}/{}", workload.kind, workload.namespace, workload.name);
        let mut answers = Vec::new();
        for object in &workload.objects {
            let uid = format!("{index:08x}-0000-4000-8000-{:012x}", client.sent);
            let review = review_of(object, &workload.namespace, &uid);
            match client.post(&review) {
                Ok(answer) => answers.push(read_answer(
                    &label,
                    &review["request"]["object"],
                    &uid,
                    &answer,
                    &mut out.mismatches,
                )),
                Err(e) => out.mismatches.push(format!("{label}: POST /mutate: {e}")),
            }
        }
        if answers.len() != workload.objects.len() {
            continue;
        }
        let key = workload.key();
        seen.insert(key.clone());
        let Some(want) = expected.get(&key) else {
            // Not a TAS workload for simulate: the webhook lets it pass unchanged.
            out.passed_unchanged += 1;
            for a in &answers {
                if !a.allowed || a.has_patch || !a.warnings.is_empty() {
                    out.mismatches.push(format!(
                        "{label}: simulate does not report it (not a TAS workload), but over HTTP \
                         {} is {}{}{}",
                        a.object,
                        if a.allowed { "allowed" } else { "denied" },
                        if a.has_patch { ", patched" } else { "" },
                        match (&a.message, a.warnings.is_empty()) {
                            (Some(m), _) => format!(": {m}"),
                            (None, false) => format!(", warnings {:?}", a.warnings),
                            (None, true) => String::new(),
                        }
                    ));
                }
            }
            continue;
        };
        out.workloads += 1;
        compare(&label, want, &answers, &mut out);
    }
    for (key, want) in &expected {
        if seen.contains(key) {
            continue;
        }
        // A running Job placed again for pods lost on a failed node (hot swap) was admitted
        // when it was created: nothing of it goes through CREATE again.
        if key.0 == "Job"
            && cluster
                .replacements
                .contains_key(&(key.1.clone(), key.2.clone()))
        {
            continue;
        }
        if matches!(key.0.as_str(), "Job" | "Pod" | "PodGroup") {
            out.mismatches.push(format!(
                "{} {}/{}: simulate reports it (admitted {}), but no pending object of it was \
                 found in the manifests to send",
                key.0, key.1, key.2, want["admitted"]
            ));
        } else {
            out.other_kinds += 1;
        }
    }

    client.close();
    out.reviews = client.sent;
    out.connections = client.connections();
    if let Err(e) = server_rt.block_on(server.shutdown(Duration::ZERO, Duration::from_secs(1))) {
        out.mismatches
            .push(format!("the server does not shut down cleanly: {e:#}"));
    }
    out
}

/// Compares the answers for one workload's objects with `simulate`'s verdict `want`.
fn compare(label: &str, want: &Value, answers: &[Answer], out: &mut Outcome) {
    let admitted = want
        .get("admitted")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let denied = answers.iter().find(|a| !a.allowed);
    match (admitted, denied) {
        (true, None) => {
            out.admissions += 1;
            let want_warnings: Vec<&str> = want
                .get("warnings")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|w| w.as_str().unwrap_or_default())
                .collect();
            if !want_warnings.is_empty() {
                out.with_warnings += 1;
            }
            for a in answers {
                if a.warnings != want_warnings {
                    out.mismatches.push(format!(
                        "{label}: warnings of {}: simulate {want_warnings:?}, over HTTP {:?}",
                        a.object, a.warnings
                    ));
                }
            }
        }
        (true, Some(a)) => out.mismatches.push(format!(
            "{label}: simulate admits it, but over HTTP {} is denied (code {:?}): {:?}",
            a.object, a.code, a.message
        )),
        (false, None) => out.mismatches.push(format!(
            "{label}: simulate denies it ({}), but over HTTP it is allowed",
            want["message"]
        )),
        (false, Some(a)) => {
            out.denials += 1;
            let shown = format!(
                "admission webhook \"{WEBHOOK_NAME}\" denied the request: {}",
                a.message.as_deref().unwrap_or("")
            );
            let want_message = want.get("message").and_then(Value::as_str);
            if want_message != Some(shown.as_str()) {
                out.mismatches.push(format!(
                    "{label}: denial of {}:\n        simulate:  {}\n        over HTTP: {shown:?}",
                    a.object,
                    want.get("message").unwrap_or(&Value::Null)
                ));
            }
            if a.code != Some(403) {
                out.mismatches.push(format!(
                    "{label}: denial of {}: status.code {:?}, want 403",
                    a.object, a.code
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

#[test]
fn conformance_cases_get_the_same_admission_verdict_over_http_as_in_simulate() {
    let cases = conformance::cases(REQUIRED_FOLDERS, OPTIONAL_FOLDERS);
    let (server_rt, client_rt) = conformance::runtimes();

    let mut report = String::new();
    let mut failed_cases = 0;
    let mut per_folder: BTreeMap<&str, usize> = BTreeMap::new();
    let mut total = Outcome::default();
    let mut reconnected = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let outcome = run_case(case, index, &server_rt, &client_rt);
        *per_folder.entry(case.folder).or_insert(0) += 1;
        total.workloads += outcome.workloads;
        total.denials += outcome.denials;
        total.admissions += outcome.admissions;
        total.with_warnings += outcome.with_warnings;
        total.passed_unchanged += outcome.passed_unchanged;
        total.other_kinds += outcome.other_kinds;
        total.reviews += outcome.reviews;
        if outcome.connections > 1 {
            reconnected.push(format!("{} ({})", case.label, outcome.connections));
        }
        if !outcome.mismatches.is_empty() {
            failed_cases += 1;
            let _ = writeln!(report, "{}:", case.label);
            for m in &outcome.mismatches {
                let _ = writeln!(report, "    {m}");
            }
        }
    }

    assert!(
        report.is_empty(),
        "{failed_cases} of {} conformance cases answer differently over HTTP (POST /mutate) \
         than in simulate:\n{report}",
        cases.len()
    );
    assert!(
        per_folder.get("admission").copied().unwrap_or(0) > 0,
        "no admission case found under {CONFORMANCE}/admission: the comparison is vacuous"
    );
    assert!(
        total.denials > 0 && total.admissions > 0,
        "{} denials and {} admissions compared in {} cases: need at least one of each",
        total.denials,
        total.admissions,
        cases.len()
    );
    assert!(
        reconnected.is_empty(),
        "the keep-alive connection was not kept for the whole case: {reconnected:?}"
    );
    eprintln!(
        "{} cases ({per_folder:?}) alike over HTTP: {} workloads compared ({} denials, {} \
         admissions, {} with warnings), {} non-TAS workloads passed unchanged, {} workloads of \
         other kinds not sent; {} reviews",
        cases.len(),
        total.workloads,
        total.denials,
        total.admissions,
        total.with_warnings,
        total.passed_unchanged,
        total.other_kinds,
        total.reviews
    );
}
