//! An in-process fake Kubernetes API server for integration tests: an axum [`Router`] that,
//! handed to `kube::Client::new(router, "default")` ([`FakeApiServer::client`]), makes kube-rs
//! (typed `Api`, kube-runtime's `watcher`/`reflector`, kube-lease-manager) behave as against a
//! real API server, with no network, TLS or cluster.
//!
//! Faithful to the documented API server behaviour in what the tests lean on:
//! - paths `/api/v1/...` and `/apis/{group}/{version}/...` (namespaced, cluster-scoped and
//!   all-namespaces forms, the `status` subresource, `pods/{name}/binding`); every error is a
//!   `metav1.Status` with the real reason, code and message wording;
//! - one global resourceVersion bumped on every write; a write that changes nothing is a no-op
//!   (no new resourceVersion, no event), as on the real server;
//! - lists: label selectors (`=`, `==`, `!=`, `in`, `notin`, `k`, `!k`), only the field
//!   selectors the real server supports for the kind (others: 400), `limit`/`continue` pages all
//!   at the first page's resourceVersion, `resourceVersionMatch=Exact`; like the real server,
//!   items of built-in kinds carry no `apiVersion`/`kind` (custom resources' do);
//! - watches: replay after a resourceVersion, synthetic ADDED for `""`/`"0"`, `sendInitialEvents`
//!   ending with the `k8s.io/initial-events-end` BOOKMARK, a BOOKMARK when caught up and every
//!   second, `timeoutSeconds`, selectors (an object that stops matching arrives as DELETED with
//!   its previous state), and an ERROR event with a 410 `Expired` Status for a compacted
//!   resourceVersion; a stalled connection ([`FakeApiServer::stall_watches`]) sends nothing
//!   until resumed or ended by a compaction;
//! - writes: POST, PUT (resourceVersion precondition; required for custom resources), DELETE
//!   (uid/resourceVersion preconditions), merge, strategic (415 on custom resources) and JSON
//!   patches, and server-side apply with per-field ownership: an apply that changes a field
//!   another manager owns is a 409 Conflict unless `force=true`, an update takes the fields it
//!   changes, an applier's dropped fields are removed unless someone else owns them;
//! - main-resource writes keep `.status` (kinds with a status subresource), `status` writes keep
//!   everything else; pods are created `Pending`; a namespace must exist (the four system ones do).
//!
//! Limits: strategic merge and apply merge lists atomically (no merge keys) and field ownership
//! treats lists as leaves and is not rendered into `metadata.managedFields`; DELETE removes at
//! once (no finalizers, grace periods, cascading); no dry run, deletecollection, admission,
//! defaulting, schema validation, discovery, auth, YAML or protobuf; the two Event APIs are
//! separate stores; history is kept until [`FakeApiServer::compact`]. The test-side methods
//! ([`FakeApiServer::apply`], [`FakeApiServer::delete`]) bypass the API rules on purpose.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Map, Value, json};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

/// Namespaced.
const NS: u8 = 1;
/// Has a `status` subresource.
const ST: u8 = 2;
/// A custom resource (CRD).
const CR: u8 = 4;
/// DELETE answers with the deleted object rather than a Status.
const OBJ: u8 = 8;

const BOOKMARK_EVERY: Duration = Duration::from_secs(1);
/// A watch's length without `timeoutSeconds` (the real server's minimum request timeout).
const DEFAULT_WATCH_SECONDS: u64 = 1800;
const MODIFIED: &str = "the object has been modified; \
                        please apply your changes to the latest version and try again";

struct Res {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    flags: u8,
}

/// The resources served; add one with one line.
#[rustfmt::skip]
const RESOURCES: &[Res] = &[
    Res { group: "", version: "v1", plural: "namespaces", kind: "Namespace", flags: ST },
    Res { group: "", version: "v1", plural: "nodes", kind: "Node", flags: ST },
    Res { group: "", version: "v1", plural: "pods", kind: "Pod", flags: NS | ST | OBJ },
    Res { group: "", version: "v1", plural: "events", kind: "Event", flags: NS },
    Res { group: "events.k8s.io", version: "v1", plural: "events", kind: "Event", flags: NS },
    Res { group: "batch", version: "v1", plural: "jobs", kind: "Job", flags: NS | ST },
    Res { group: "coordination.k8s.io", version: "v1", plural: "leases", kind: "Lease", flags: NS },
    Res { group: "kueue.x-k8s.io", version: "v1beta2", plural: "topologies", kind: "Topology", flags: CR | OBJ },
    Res { group: "kueue.x-k8s.io", version: "v1beta2", plural: "resourceflavors", kind: "ResourceFlavor", flags: CR | OBJ },
    Res { group: "kueue.x-k8s.io", version: "v1beta2", plural: "clusterqueues", kind: "ClusterQueue", flags: CR | ST | OBJ },
    Res { group: "kueue.x-k8s.io", version: "v1beta2", plural: "localqueues", kind: "LocalQueue", flags: NS | CR | ST | OBJ },
    Res { group: "kueue.x-k8s.io", version: "v1beta2", plural: "workloads", kind: "Workload", flags: NS | CR | ST | OBJ },
    Res { group: "jobset.x-k8s.io", version: "v1alpha2", plural: "jobsets", kind: "JobSet", flags: NS | CR | ST | OBJ },
    Res { group: "leaderworkerset.x-k8s.io", version: "v1", plural: "leaderworkersets", kind: "LeaderWorkerSet", flags: NS | CR | ST | OBJ },
    Res { group: "scheduling.k8s.io", version: "v1beta1", plural: "podgroups", kind: "PodGroup", flags: NS | ST | OBJ },
    Res { group: "scheduling.k8s.io", version: "v1alpha3", plural: "podgroups", kind: "PodGroup", flags: NS | ST | OBJ },
    Res { group: "scheduling.k8s.io", version: "v1alpha2", plural: "podgroups", kind: "PodGroup", flags: NS | ST | OBJ },
    Res { group: "scheduling.k8s.io", version: "v1alpha3", plural: "compositepodgroups", kind: "CompositePodGroup", flags: NS | ST | OBJ },
    Res { group: "kube-tas.io", version: "v1alpha1", plural: "podgroups", kind: "PodGroup", flags: NS | CR | ST | OBJ },
    Res { group: "kube-tas.io", version: "v1alpha1", plural: "compositepodgroups", kind: "CompositePodGroup", flags: NS | CR | ST | OBJ },
];

/// Field selectors beyond `metadata.name`/`metadata.namespace`, as the real server has them:
/// (qualified resource, label, JSON path, value when absent).
#[rustfmt::skip]
const FIELD_LABELS: &[(&str, &str, &str, &str)] = &[
    ("pods", "spec.nodeName", "spec.nodeName", ""),
    ("pods", "spec.restartPolicy", "spec.restartPolicy", ""),
    ("pods", "spec.schedulerName", "spec.schedulerName", ""),
    ("pods", "spec.serviceAccountName", "spec.serviceAccountName", ""),
    ("pods", "spec.hostNetwork", "spec.hostNetwork", "false"),
    ("pods", "status.phase", "status.phase", ""),
    ("pods", "status.podIP", "status.podIP", ""),
    ("pods", "status.nominatedNodeName", "status.nominatedNodeName", ""),
    ("nodes", "spec.unschedulable", "spec.unschedulable", "false"),
    ("jobs.batch", "status.successful", "status.succeeded", "0"),
    ("events", "involvedObject.kind", "involvedObject.kind", ""),
    ("events", "involvedObject.namespace", "involvedObject.namespace", ""),
    ("events", "involvedObject.name", "involvedObject.name", ""),
    ("events", "involvedObject.uid", "involvedObject.uid", ""),
    ("events", "reason", "reason", ""),
    ("events", "source", "source.component", ""),
    ("events", "type", "type", ""),
];

impl Res {
    fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
    fn api_version(&self) -> String {
        match self.group {
            "" => self.version.to_string(),
            group => format!("{group}/{}", self.version),
        }
    }
    /// `pods`, `leases.coordination.k8s.io`: the resource as the real server's messages name it.
    fn qualified(&self) -> String {
        match self.group {
            "" => self.plural.to_string(),
            group => format!("{}.{group}", self.plural),
        }
    }
}

fn by_kind(api_version: &str, kind: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.kind == kind && r.api_version() == api_version)
}

fn by_plural(group: &str, version: &str, plural: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| (r.group, r.version, r.plural) == (group, version, plural))
}

// Errors: metav1.Status ----------------------------------------------------------------------

struct ApiError {
    code: u16,
    reason: String,
    message: String,
    details: Value,
}

type ApiResult<T> = Result<T, ApiError>;

fn fail(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
    let (reason, message) = (reason.to_string(), message.into());
    ApiError {
        code,
        reason,
        message,
        details: json!({}),
    }
}

impl ApiError {
    fn about(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = json!({ "name": name, "group": group, "kind": kind });
        self
    }
    fn status(&self) -> Value {
        json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "details": self.details,
                "code": self.code })
    }
}

fn no_route() -> ApiError {
    fail(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn not_found(r: &Res, name: &str) -> ApiError {
    let message = format!("{} \"{name}\" not found", r.qualified());
    fail(404, "NotFound", message).about(r.group, r.plural, name)
}

fn bad(message: impl Into<String>) -> ApiError {
    fail(400, "BadRequest", message)
}

fn invalid(kind: &str, name: &str, why: &str) -> ApiError {
    fail(
        422,
        "Invalid",
        format!("{kind} \"{name}\" is invalid: {why}"),
    )
    .about("", kind, name)
}

/// `Operation cannot be fulfilled on <resource> "<name>": <why>`, 409 Conflict.
fn conflict(qualified: &str, name: &str, why: &str) -> ApiError {
    let message = format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}");
    let (resource, group) = qualified.split_once('.').unwrap_or((qualified, ""));
    fail(409, "Conflict", message).about(group, resource, name)
}

fn expired(message: String) -> ApiError {
    fail(410, "Expired", message)
}

fn reply(code: u16, body: &Value) -> Response {
    reply_text(code, body.to_string())
}

fn reply_text(code: u16, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
    let json = HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, json);
    response
}

// State --------------------------------------------------------------------------------------

/// (resource index, namespace or "", name)
type Key = (usize, String, String);
type Path = Vec<String>;

/// One manager's fields of one object (a `managedFields` entry).
#[derive(Clone, PartialEq)]
struct Owner {
    manager: String,
    operation: &'static str,
    subresource: String,
    time: String,
    fields: BTreeSet<Path>,
}

struct Entry {
    obj: Arc<Stored>,
    owners: Vec<Owner>,
}

struct Event {
    rv: u64,
    res: usize,
    kind: &'static str,
    obj: Arc<Stored>,
    prev: Option<Arc<Stored>>,
}

/// An object as the fake keeps it: its JSON text, served as is, and what selectors read, so a
/// list or a watch never parses it. A parsed `Value` costs about ten times its text (a map per
/// JSON object), which kept the fake from holding a 50,000-node, 500,000-pod cluster.
struct Stored {
    res: usize,
    /// The object as JSON without `apiVersion` and `kind` (as a built-in kind's list item).
    body: Box<str>,
    /// The string-valued labels.
    labels: Vec<(String, String)>,
    /// The value each field selector of the kind compares (`None`: absent or null), by path;
    /// `metadata.name` and `metadata.namespace` first.
    fields: Vec<(&'static str, Option<String>)>,
}

impl Stored {
    fn new(res: usize, obj: &Value) -> Self {
        let r = &RESOURCES[res];
        let mut body = obj.as_object().cloned().unwrap_or_default();
        body.remove("apiVersion");
        body.remove("kind");
        let body = serde_json::to_string(&body)
            .unwrap_or_default()
            .into_boxed_str();
        let labels = obj["metadata"]["labels"].as_object().into_iter().flatten();
        let labels = labels.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())));
        let qualified = r.qualified();
        let kind_fields = FIELD_LABELS
            .iter()
            .filter(|f| f.0 == qualified)
            .map(|f| f.2);
        let paths = ["metadata.name", "metadata.namespace"]
            .into_iter()
            .chain(kind_fields);
        let fields = paths.map(|path| {
            let found = match obj.pointer(&format!("/{}", path.replace('.', "/"))) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
            };
            (path, found)
        });
        Self {
            res,
            body,
            labels: labels.collect(),
            fields: fields.collect(),
        }
    }

    /// The whole object as JSON, `apiVersion` and `kind` first.
    fn text(&self) -> String {
        let r = &RESOURCES[self.res];
        let rest = self.body.strip_prefix('{').unwrap_or("}");
        let comma = if rest.starts_with('}') { "" } else { "," };
        let (api_version, kind) = (r.api_version(), r.kind);
        format!(r#"{{"apiVersion":"{api_version}","kind":"{kind}"{comma}{rest}"#)
    }

    /// The whole object, parsed.
    fn value(&self) -> Value {
        serde_json::from_str(&self.text()).expect("the fake stores valid JSON")
    }

    fn label(&self, key: &str) -> Option<&str> {
        let found = self.labels.iter().find(|(k, _)| k == key);
        found.map(|(_, v)| v.as_str())
    }

    fn name(&self) -> &str {
        self.field("metadata.name").unwrap_or_default()
    }

    fn namespace(&self) -> &str {
        self.field("metadata.namespace").unwrap_or_default()
    }

    fn field(&self, path: &str) -> Option<&str> {
        let found = self.fields.iter().find(|(p, _)| *p == path);
        found.and_then(|(_, v)| v.as_deref())
    }
}

#[derive(Default)]
struct Inner {
    rv: u64,
    seq: u64,
    epoch: u64,
    compacted: u64,
    objects: BTreeMap<Key, Entry>,
    history: Vec<Event>,
    unserved: BTreeSet<usize>,
    /// Resources whose lists are answered 503 (an API server overloaded for that resource).
    lists_refused: BTreeSet<usize>,
    bindings: Vec<Value>,
    binding_failures: VecDeque<ApiError>,
    /// Answers of the next Bindings, which are stored all the same (a timeout after etcd
    /// committed, a connection reset before the answer).
    binding_answers_lost: VecDeque<ApiError>,
    /// While set, binding POSTs wait for a permit before they are served.
    binding_gate: Option<Arc<Semaphore>>,
    /// Binding POSTs waiting at that gate now.
    bindings_waiting: usize,
    /// While set, open watches send nothing (a stalled connection); a compaction still ends
    /// them with 410, as the reconnect after a stall would be answered.
    watches_stalled: bool,
    log: Vec<(String, u16)>,
    tick: watch::Sender<u64>,
}

/// The fake API server. Clones share one state.
#[derive(Clone)]
pub struct FakeApiServer {
    inner: Arc<Mutex<Inner>>,
}

impl Default for FakeApiServer {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeApiServer {
    /// An empty cluster with the namespaces `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease`.
    pub fn new() -> Self {
        let inner = Inner {
            rv: 1,
            ..Inner::default()
        };
        let server = Self {
            inner: Arc::new(Mutex::new(inner)),
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            server.apply(
                json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
            );
        }
        server
    }

    /// The API as an axum router; each request is answered in the caller's task.
    pub fn router(&self) -> Router {
        Router::new().fallback(handle).with_state(self.clone())
    }

    /// A kube client on [`Self::router`], default namespace `default`; needs a Tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// Test-side create or replace of a whole object, status included, with no API rule:
    /// resourceVersion set, uid and creationTimestamp when absent (kept from the stored object on
    /// replace), namespace `default` for a namespaced kind without one; ADDED or MODIFIED is
    /// emitted (nothing when unchanged). Returns the stored object.
    ///
    /// # Panics
    /// On a kind the fake does not serve or an object without `metadata.name`.
    pub fn apply(&self, object: Value) -> Value {
        let (av, kind) = (&object["apiVersion"], &object["kind"]);
        let found = by_kind(
            av.as_str().unwrap_or_default(),
            kind.as_str().unwrap_or_default(),
        );
        let r = found.unwrap_or_else(|| panic!("the fake API server does not serve {av} {kind}"));
        let (res, name) = (&RESOURCES[r], meta_str(&object, "name").to_string());
        assert!(!name.is_empty(), "metadata.name is required");
        let ns = match meta_str(&object, "namespace") {
            _ if !res.is(NS) => String::new(),
            "" => "default".to_string(),
            ns => ns.to_string(),
        };
        let mut g = self.lock();
        let key = (r, ns.clone(), name.clone());
        let (old, mut owners) = g.entry(&key);
        let mut new = object;
        if let Some(old) = &old {
            let meta = meta_mut(&mut new);
            for field in ["uid", "creationTimestamp", "generation"] {
                if let (None, Some(v)) = (meta.get(field), old["metadata"].get(field)) {
                    meta.insert(field.into(), v.clone());
                }
            }
            meta.insert(
                "resourceVersion".into(),
                old["metadata"]["resourceVersion"].clone(),
            );
        }
        g.init_meta(res, &ns, &name, &mut new);
        let before = old.as_ref().unwrap_or(&Value::Null);
        if before == &new {
            return new;
        }
        let _ = track(
            &mut owners,
            ("fake-apiserver", "Update", ""),
            before,
            &new,
            None,
            false,
        );
        g.commit(&key, Some(new), owners)
    }

    /// Test-side delete, emitting DELETED with the last state; false when there was none.
    pub fn delete(&self, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> bool {
        let Some(r) = by_kind(api_version, kind) else {
            return false;
        };
        let key = (r, ns.unwrap_or_default().to_string(), name.to_string());
        let mut g = self.lock();
        let found = g.objects.contains_key(&key);
        if found {
            g.commit(&key, None, Vec::new());
        }
        found
    }

    /// The stored object, if any.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        ns: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let key = (
            by_kind(api_version, kind)?,
            ns.unwrap_or_default().into(),
            name.into(),
        );
        self.lock().objects.get(&key).map(|e| e.obj.value())
    }

    /// Every Binding accepted by `pods/{name}/binding`, in order, with its namespace.
    pub fn bindings(&self) -> Vec<Value> {
        self.lock().bindings.clone()
    }

    /// The next `n` binding POSTs get this Status, before any other check.
    pub fn fail_bindings(&self, n: usize, code: u16, reason: &str, message: &str) {
        let failures = (0..n).map(|_| fail(code, reason, message));
        self.lock().binding_failures.extend(failures);
    }

    /// The next `n` binding POSTs are stored as usual (the pod bound, the Binding recorded),
    /// but answered with this Status: the writer cannot tell from the answer that it landed.
    pub fn lose_binding_answers(&self, n: usize, code: u16, reason: &str, message: &str) {
        let failures = (0..n).map(|_| fail(code, reason, message));
        self.lock().binding_answers_lost.extend(failures);
    }

    /// How many binding POSTs wait at [`Self::hold_bindings`]'s gate now.
    pub fn bindings_waiting(&self) -> usize {
        self.lock().bindings_waiting
    }

    /// Binding POSTs wait, unanswered, until the returned gate is given a permit (a slow API
    /// server); then every waiting and later one is served.
    pub fn hold_bindings(&self) -> Arc<Semaphore> {
        let gate = Arc::new(Semaphore::new(0));
        self.lock().binding_gate = Some(Arc::clone(&gate));
        gate
    }

    /// Open watches (and those opened later) send no event of the history until
    /// [`Self::resume_watches`] (what a watch had queued already, or a watch opened in the
    /// meantime queues at its start, such as its initial ADDED events, still goes out): the
    /// events of the meantime stay in the history, and a [`Self::compact`] in the meantime ends
    /// each watch with 410, so its client relists without ever seeing them.
    pub fn stall_watches(&self) {
        self.lock().watches_stalled = true;
    }

    /// Ends [`Self::stall_watches`]: open watches send what the history holds past them.
    pub fn resume_watches(&self) {
        let mut g = self.lock();
        g.watches_stalled = false;
        g.tick.send_modify(|_| {});
    }

    /// Forgets the history: a watch or continue token from before now gets 410 Expired, and
    /// each open watch receives an ERROR event with a 410 Status, then ends.
    pub fn compact(&self) {
        let mut g = self.lock();
        (g.epoch, g.compacted) = (g.epoch + 1, g.rv);
        g.history.clear();
        g.tick.send_modify(|_| {});
    }

    /// That resource answers 404 like a CRD not installed, and its open watches end.
    ///
    /// # Panics
    /// On a resource not in the registry.
    pub fn unserve(&self, group: &str, version: &str, plural: &str) {
        let r = by_plural(group, version, plural).expect("a resource in the registry");
        let mut g = self.lock();
        g.unserved.insert(r);
        g.tick.send_modify(|_| {});
    }

    /// Lists of that resource are answered 503 ServiceUnavailable until
    /// [`Self::accept_lists`]: a watch of it cannot sync meanwhile.
    ///
    /// # Panics
    /// On a resource not in the registry.
    pub fn refuse_lists(&self, group: &str, version: &str, plural: &str) {
        let r = by_plural(group, version, plural).expect("a resource in the registry");
        self.lock().lists_refused.insert(r);
    }

    /// Lists of that resource are served again after [`Self::refuse_lists`].
    pub fn accept_lists(&self, group: &str, version: &str, plural: &str) {
        if let Some(r) = by_plural(group, version, plural) {
            self.lock().lists_refused.remove(&r);
        }
    }

    /// Serves a resource again after [`Self::unserve`]; its objects were kept.
    pub fn serve_again(&self, group: &str, version: &str, plural: &str) {
        if let Some(r) = by_plural(group, version, plural) {
            self.lock().unserved.remove(&r);
        }
    }

    /// Every request so far as `"METHOD path?query"`, in arrival order.
    pub fn requests(&self) -> Vec<String> {
        self.lock()
            .log
            .iter()
            .map(|(line, _)| line.clone())
            .collect()
    }

    /// Every request so far with the HTTP status it got (200 for a watch that started).
    pub fn request_log(&self) -> Vec<(String, u16)> {
        self.lock().log.clone()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    /// The stored object, parsed, and its managers.
    fn entry(&self, key: &Key) -> (Option<Value>, Vec<Owner>) {
        let entry = self.objects.get(key);
        entry
            .map(|e| (Some(e.obj.value()), e.owners.clone()))
            .unwrap_or_default()
    }

    /// Stores or (for `None`) deletes an object under a new resourceVersion, records the event
    /// and wakes the watches. Returns the object as stored or as deleted.
    fn commit(&mut self, key: &Key, new: Option<Value>, owners: Vec<Owner>) -> Value {
        self.rv += 1;
        let rv = self.rv;
        let prev = self.objects.remove(key).map(|e| e.obj);
        let kind = match (&new, &prev) {
            (None, _) => "DELETED",
            (Some(_), None) => "ADDED",
            (Some(_), Some(_)) => "MODIFIED",
        };
        let stays = new.is_some();
        let mut obj = new
            .or_else(|| prev.as_deref().map(Stored::value))
            .unwrap_or_default();
        set_rv(&mut obj, rv);
        let stored = Arc::new(Stored::new(key.0, &obj));
        if stays {
            let entry = Entry {
                obj: stored.clone(),
                owners,
            };
            self.objects.insert(key.clone(), entry);
        }
        self.history.push(Event {
            rv,
            res: key.0,
            kind,
            obj: stored,
            prev,
        });
        self.tick.send_replace(rv);
        obj
    }

    /// The type and system metadata of a new object (uid, creationTimestamp when absent).
    fn init_meta(&mut self, r: &Res, ns: &str, name: &str, obj: &mut Value) {
        self.seq += 1;
        obj["apiVersion"] = r.api_version().into();
        obj["kind"] = r.kind.into();
        let meta = meta_mut(obj);
        meta.insert("name".into(), name.into());
        match r.is(NS) {
            true => meta.insert("namespace".into(), ns.into()),
            false => meta.remove("namespace"),
        };
        let uid = format!("00000000-0000-4000-8000-{:012x}", self.seq);
        meta.entry("uid").or_insert(uid.into());
        meta.entry("creationTimestamp").or_insert(now().into());
        meta.entry("generation").or_insert(1.into());
    }

    /// One resource's objects as they were at `rv` (later history undone), by (ns, name).
    fn state_at(&self, r: usize, rv: u64) -> BTreeMap<(String, String), Arc<Stored>> {
        let objects = self.objects.range((r, String::new(), String::new())..);
        let mut state: BTreeMap<_, _> = objects
            .take_while(|(k, _)| k.0 == r)
            .map(|(k, e)| ((k.1.clone(), k.2.clone()), e.obj.clone()))
            .collect();
        let later = self.history.iter().rev().take_while(|e| e.rv > rv);
        for e in later.filter(|e| e.res == r) {
            let key = (e.obj.namespace().to_string(), e.obj.name().to_string());
            match (&e.prev, e.kind) {
                (Some(prev), "MODIFIED" | "DELETED") => state.insert(key, prev.clone()),
                _ => state.remove(&key),
            };
        }
        state
    }

    fn namespace_exists(&self, ns: &str) -> ApiResult<()> {
        let key = (0, String::new(), ns.to_string());
        match self.objects.contains_key(&key) {
            true => Ok(()),
            false => Err(not_found(&RESOURCES[0], ns)),
        }
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata was made an object")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn set_rv(obj: &mut Value, rv: u64) {
    if obj.is_object() {
        meta_mut(obj).insert("resourceVersion".into(), rv.to_string().into());
    }
}

/// Carries what a client cannot change from `old` into `new`: system metadata and, on the
/// main resource, `.status`; a `status` write keeps everything but `.status`. The generation
/// goes up when anything outside metadata and status changed.
fn carry(r: &Res, old: &Value, new: &mut Value, status_write: bool) {
    if status_write {
        let status = new["status"].take();
        *new = old.clone();
        new["status"] = status;
        return;
    }
    if r.is(ST) {
        new["status"] = old["status"].clone();
    }
    new["apiVersion"] = old["apiVersion"].clone();
    new["kind"] = old["kind"].clone();
    if let (true, Some(o)) = (new["status"].is_null(), new.as_object_mut()) {
        o.remove("status");
    }
    let old_meta = old["metadata"].as_object().cloned().unwrap_or_default();
    let meta = meta_mut(new);
    meta.remove("managedFields");
    let system = [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
    ];
    for field in system.into_iter().chain(["resourceVersion", "generation"]) {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    if outside_meta(old) != outside_meta(new) {
        let generation = old_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(new).insert("generation".into(), (generation + 1).into());
    }
}

fn outside_meta(v: &Value) -> Vec<(&String, &Value)> {
    let fields = v.as_object().into_iter().flatten();
    fields
        .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
        .collect()
}

// Field ownership (server-side apply) ----------------------------------------------------------

/// The owned leaves of an object: all but apiVersion, kind and system metadata; objects are
/// descended into, scalars, lists and empty objects are leaves.
fn leaves(obj: &Value) -> BTreeMap<Path, &Value> {
    fn walk<'a>(v: &'a Value, path: &mut Path, out: &mut BTreeMap<Path, &'a Value>) {
        match v.as_object().filter(|o| !o.is_empty()) {
            Some(o) => o.iter().for_each(|(k, child)| {
                path.push(k.clone());
                walk(child, path, out);
                path.pop();
            }),
            None => drop(out.insert(path.clone(), v)),
        }
    }
    let mut out = BTreeMap::new();
    for (k, v) in obj.as_object().into_iter().flatten() {
        if k == "metadata" {
            for m in ["labels", "annotations", "finalizers", "ownerReferences"] {
                if let Some(mv) = v.get(m) {
                    walk(mv, &mut vec![k.clone(), m.to_string()], &mut out);
                }
            }
        } else if k != "apiVersion" && k != "kind" {
            walk(v, &mut vec![k.clone()], &mut out);
        }
    }
    out
}

/// A writer: (manager, operation, subresource).
type Who<'a> = (&'a str, &'static str, &'a str);

fn owned_by(o: &Owner, who: Who) -> bool {
    (o.manager.as_str(), o.operation, o.subresource.as_str()) == who
}

/// Records a write by `who` as structured-merge-diff does:
/// an apply (`applied`: its configuration's fields) that changes a field another manager owns
/// conflicts unless forced; any write takes the fields it changes from the others.
fn track(
    owners: &mut Vec<Owner>,
    who: Who,
    old: &Value,
    new: &Value,
    applied: Option<BTreeSet<Path>>,
    force: bool,
) -> ApiResult<()> {
    let (before, after) = (leaves(old), leaves(new));
    let changed: BTreeSet<Path> = after
        .iter()
        .filter(|(p, v)| before.get(*p) != Some(*v))
        .map(|(p, _)| p.clone())
        .collect();
    let removed: BTreeSet<_> = before
        .keys()
        .filter(|p| !after.contains_key(*p))
        .cloned()
        .collect();
    let is_me = |o: &Owner| owned_by(o, who);
    let mut conflicts = Vec::new();
    for o in owners
        .iter()
        .filter(|o| !is_me(o) && applied.is_some() && !force)
    {
        conflicts.extend(o.fields.intersection(&changed).map(|p| (o, p)));
    }
    if !conflicts.is_empty() {
        return Err(apply_conflict(&conflicts, &old["apiVersion"]));
    }
    for o in owners.iter_mut().filter(|o| !is_me(o)) {
        o.fields
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    if !owners.iter().any(is_me) {
        let (manager, operation, subresource) = (who.0.into(), who.1, who.2.into());
        let (time, fields) = (now(), BTreeSet::new());
        owners.push(Owner {
            manager,
            operation,
            subresource,
            time,
            fields,
        });
    }
    let mine = owners.iter_mut().find(|o| is_me(o)).expect("pushed above");
    if !changed.is_empty() || !removed.is_empty() {
        mine.time = now();
    }
    match applied {
        Some(fields) => mine.fields = fields,
        None => mine.fields.extend(changed),
    }
    mine.fields.retain(|p| !removed.contains(p));
    owners.retain(|o| !o.fields.is_empty());
    Ok(())
}

/// The real server's 409 for apply conflicts, its wording included.
fn apply_conflict(conflicts: &[(&Owner, &Path)], api_version: &Value) -> ApiError {
    let name = |o: &Owner| match o.operation {
        "Update" => format!(
            "\"{}\" using {} at {}",
            o.manager,
            api_version.as_str().unwrap_or(""),
            o.time
        ),
        _ => format!("\"{}\"", o.manager),
    };
    let path = |p: &Path| p.iter().map(|s| format!(".{s}")).collect::<String>();
    let message = match conflicts {
        [(o, p)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            name(o),
            path(p)
        ),
        _ => {
            let lines = conflicts
                .iter()
                .map(|(o, p)| format!("conflict with {}: {}", name(o), path(p)));
            let n = conflicts.len();
            format!(
                "Apply failed with {n} conflicts: {}",
                lines.collect::<Vec<_>>().join("\n")
            )
        }
    };
    let causes = conflicts.iter().map(|(o, p)| {
        json!({ "reason": "FieldManagerConflict", "message": format!("conflict with {}", name(o)),
                "field": path(p) })
    });
    let details = json!({ "causes": causes.collect::<Vec<_>>() });
    ApiError {
        details,
        ..fail(409, "Conflict", message)
    }
}

fn remove_path(obj: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let parent = parents
        .iter()
        .try_fold(obj, |node, seg| node.get_mut(seg.as_str()));
    if let Some(o) = parent.and_then(Value::as_object_mut) {
        o.remove(last);
    }
}

// Selectors ----------------------------------------------------------------------------------

enum LabelOp {
    Eq(String),
    Ne(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists(bool),
}

/// (JSON path, value when absent, `=` rather than `!=`, value)
type FieldReq = (&'static str, &'static str, bool, String);

#[derive(Default)]
struct Selectors {
    labels: Vec<(String, LabelOp)>,
    fields: Vec<FieldReq>,
}

impl Selectors {
    fn parse(r: &Res, q: &HashMap<String, String>) -> ApiResult<Self> {
        let mut sel = Selectors::default();
        let labels = q
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default();
        let (mut depth, mut start, mut terms) = (0, 0, Vec::new());
        for (i, ch) in labels.char_indices() {
            depth += match ch {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            if ch == ',' && depth == 0 {
                terms.push(&labels[start..i]);
                start = i + 1;
            }
        }
        terms.push(&labels[start..]);
        let set = |s: &str| -> Option<Vec<String>> {
            let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
            Some(inner.split(',').map(|v| v.trim().to_string()).collect())
        };
        let text = |v: &str| v.trim().to_string();
        for t in terms.into_iter().map(str::trim).filter(|t| !t.is_empty()) {
            let (key, op) = if let Some(k) = t.strip_prefix('!') {
                (k, Some(LabelOp::Exists(false)))
            } else if let Some((k, vs)) = t.split_once(" notin ") {
                (k, set(vs).map(LabelOp::NotIn))
            } else if let Some((k, vs)) = t.split_once(" in ") {
                (k, set(vs).map(LabelOp::In))
            } else if let Some((k, v)) = t.split_once("!=") {
                (k, Some(LabelOp::Ne(text(v))))
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                (k, Some(LabelOp::Eq(text(v))))
            } else {
                (t, Some(LabelOp::Exists(true)))
            };
            let key = key.trim();
            let key_ok = key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
            match op {
                Some(op) if key_ok && !key.is_empty() => sel.labels.push((key.to_string(), op)),
                _ => return Err(bad(format!("unable to parse requirement: {t:?}"))),
            }
        }
        let fields = q
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default();
        for t in fields.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (label, eq, value) = match t.split_once("!=") {
                Some((l, v)) => (l.trim(), false, text(v)),
                None => match t.split_once("==").or_else(|| t.split_once('=')) {
                    Some((l, v)) => (l.trim(), true, text(v)),
                    None => return Err(bad(format!("invalid selector: {fields:?}"))),
                },
            };
            let (path, absent) = match label {
                "metadata.name" => ("metadata.name", ""),
                "metadata.namespace" => ("metadata.namespace", ""),
                _ => FIELD_LABELS
                    .iter()
                    .find(|f| f.0 == r.qualified() && f.1 == label)
                    .map(|f| (f.2, f.3))
                    .ok_or_else(|| bad(format!("field label not supported: {label}")))?,
            };
            sel.fields.push((path, absent, eq, value));
        }
        Ok(sel)
    }

    fn matches(&self, obj: &Stored, ns: Option<&str>) -> bool {
        let label = |k: &str| obj.label(k);
        let labels_match = self.labels.iter().all(|(k, op)| match op {
            LabelOp::Eq(v) => label(k) == Some(v),
            LabelOp::Ne(v) => label(k) != Some(v),
            LabelOp::In(vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelOp::NotIn(vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelOp::Exists(exists) => label(k).is_some() == *exists,
        });
        let fields_match = self
            .fields
            .iter()
            .all(|(path, absent, eq, value)| (obj.field(path).unwrap_or(absent) == value) == *eq);
        ns.is_none_or(|ns| obj.namespace() == ns) && labels_match && fields_match
    }

    /// A history event as a watch with these selectors sees it: objects that start matching
    /// are ADDED, those that stop are DELETED (with their previous state).
    fn translate(&self, e: &Event, ns: Option<&str>) -> Option<String> {
        let now = self.matches(&e.obj, ns);
        let before = e.prev.as_deref().is_some_and(|p| self.matches(p, ns));
        let (kind, obj) = match (e.kind, before, now) {
            ("ADDED", _, true) | ("MODIFIED", false, true) => ("ADDED", e.obj.text()),
            ("MODIFIED", true, true) => ("MODIFIED", e.obj.text()),
            ("DELETED", _, true) => ("DELETED", e.obj.text()),
            ("MODIFIED", true, false) => {
                let mut gone = e.prev.as_deref().map(Stored::value).unwrap_or_default();
                set_rv(&mut gone, e.rv);
                ("DELETED", gone.to_string())
            }
            _ => return None,
        };
        Some(event_line(kind, &obj))
    }
}

// Requests -----------------------------------------------------------------------------------

async fn handle(State(server): State<FakeApiServer>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let line = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let line = format!("{} {line}", parts.method);
    let binding = parts.method == Method::POST && parts.uri.path().ends_with("/binding");
    let gate = binding
        .then(|| server.lock().binding_gate.clone())
        .flatten();
    if let Some(gate) = gate {
        server.lock().bindings_waiting += 1;
        drop(gate.acquire().await);
        server.lock().bindings_waiting -= 1;
    }
    let response = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(body) => server.serve(&parts.method, &parts.uri, &parts.headers, &body),
        Err(e) => Err(bad(format!("reading the request body: {e}"))),
    };
    let response = response.unwrap_or_else(|e| reply(e.code, &e.status()));
    server.lock().log.push((line, response.status().as_u16()));
    response
}

/// Pods start `Pending`; other kinds with a status subresource start without status.
fn reset_status(r: &Res, obj: &mut Value) {
    match (r.is(ST), r.kind) {
        (true, "Pod") => obj["status"] = json!({ "phase": "Pending" }),
        (true, _) => drop(obj.as_object_mut().map(|o| o.remove("status"))),
        _ => {}
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Create,
    Replace,
    Merge,
    JsonPatch,
    Apply,
    Bind,
    Delete,
}

/// One request, routed.
struct Call<'a> {
    r: usize,
    res: &'static Res,
    ns: String,
    sub: &'a str,
    q: HashMap<String, String>,
    headers: &'a HeaderMap,
    body: &'a [u8],
}

impl Call<'_> {
    fn param(&self, name: &str) -> &str {
        self.q.get(name).map(String::as_str).unwrap_or_default()
    }
    /// `fieldManager`, else the user agent's product, as the real server names managers.
    fn manager(&self) -> String {
        let agent = self
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok());
        let agent = agent
            .unwrap_or_default()
            .split('/')
            .next()
            .unwrap_or_default();
        let candidates = [self.param("fieldManager"), agent, "unknown"];
        candidates
            .into_iter()
            .find(|m| !m.is_empty())
            .unwrap_or_default()
            .to_string()
    }
}

impl FakeApiServer {
    fn serve(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: &[u8],
    ) -> ApiResult<Response> {
        let q =
            Query::<HashMap<String, String>>::try_from_uri(uri).map_err(|e| bad(e.to_string()))?;
        let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", "v1", rest @ ..] => ("", "v1", rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return Err(no_route()),
        };
        let (ns, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !matches!(rest, [] | ["status" | "finalize"]) => {
                (Some(*ns), rest)
            }
            _ => (None, rest),
        };
        let (plural, name, sub) = match rest {
            [plural] => (*plural, None, ""),
            [plural, name] => (*plural, Some(*name), ""),
            [plural, name, sub] => (*plural, Some(*name), *sub),
            _ => return Err(no_route()),
        };
        let found = by_plural(group, version, plural);
        let r = found
            .filter(|r| !self.lock().unserved.contains(r))
            .ok_or_else(no_route)?;
        let res = &RESOURCES[r];
        let collection_get = name.is_none() && method == Method::GET;
        let sub_ok = match sub {
            "" => true,
            "status" => res.is(ST),
            _ => sub == "binding" && res.kind == "Pod" && method == Method::POST,
        };
        if (res.is(NS) != ns.is_some() && !(ns.is_none() && collection_get)) || !sub_ok {
            return Err(no_route());
        }
        let ns = ns.unwrap_or_default().to_string();
        let call = Call {
            r,
            res,
            ns,
            sub,
            q: q.0,
            headers,
            body,
        };
        let watch = matches!(call.param("watch"), "true" | "1");
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let content_type = content_type
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default();
        let op = match (method.clone(), name, content_type.trim()) {
            (Method::GET, _, _) if watch && sub.is_empty() => return self.watch(&call, name),
            (Method::GET, None, _) => return self.list(&call),
            (Method::GET, Some(name), _) => {
                let g = self.lock();
                let e = g.objects.get(&(r, call.ns.clone(), name.into()));
                let found = e.ok_or_else(|| not_found(res, name))?;
                return Ok(reply_text(200, found.obj.text()));
            }
            (Method::POST, None, _) => Op::Create,
            (Method::POST, Some(_), _) if sub == "binding" => Op::Bind,
            (Method::PUT, Some(_), _) => Op::Replace,
            (Method::DELETE, Some(_), _) if sub.is_empty() => Op::Delete,
            (Method::PATCH, Some(_), "application/apply-patch+yaml") => Op::Apply,
            (Method::PATCH, Some(_), "application/merge-patch+json") => Op::Merge,
            (Method::PATCH, Some(_), "application/strategic-merge-patch+json") if !res.is(CR) => {
                Op::Merge
            }
            (Method::PATCH, Some(_), "application/json-patch+json") => Op::JsonPatch,
            (Method::PATCH, Some(_), _) => {
                let message = "the body of the request was in an unknown format - accepted media \
                    types include: application/json-patch+json, application/merge-patch+json, \
                    application/apply-patch+yaml";
                return Err(fail(415, "UnsupportedMediaType", message));
            }
            _ => {
                let message = "the server does not allow this method on the requested resource";
                return Err(fail(405, "MethodNotAllowed", message));
            }
        };
        self.write(&call, name, op)
    }

    fn list(&self, c: &Call) -> ApiResult<Response> {
        if self.lock().lists_refused.contains(&c.r) {
            return Err(fail(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ));
        }
        let sel = Selectors::parse(c.res, &c.q)?;
        let limit = match c.param("limit") {
            "" | "0" => usize::MAX,
            l => l.parse().map_err(|_| bad(format!("invalid limit: {l}")))?,
        };
        let (rv, rv_match, token) = (
            c.param("resourceVersion"),
            c.param("resourceVersionMatch"),
            c.param("continue"),
        );
        if !rv_match.is_empty() && rv.is_empty() {
            return Err(invalid_options(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !token.is_empty() && !matches!(rv, "" | "0") {
            return Err(bad(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let g = self.lock();
        let mut after = None;
        let at = if !token.is_empty() {
            let mut parts = token.splitn(3, '|');
            let at = parts.next().and_then(|rv| rv.parse::<u64>().ok());
            let (Some(at), Some(ns), Some(name)) = (at, parts.next(), parts.next()) else {
                return Err(bad(format!("continue key is not valid: {token}")));
            };
            if at < g.compacted {
                return Err(expired(
                    "The provided continue parameter is too old to display a \
                    consistent list result. You can start a new list without the continue \
                    parameter."
                        .into(),
                ));
            }
            after = Some((ns.to_string(), name.to_string()));
            at
        } else if rv_match == "Exact" {
            let at: u64 = rv
                .parse()
                .map_err(|_| bad(format!("invalid resourceVersion: {rv}")))?;
            if at < g.compacted {
                return Err(expired(format!(
                    "too old resource version: {at} ({})",
                    g.compacted
                )));
            }
            at
        } else {
            g.rv
        };
        let state = g.state_at(c.r, at);
        let mut matching = state
            .iter()
            .filter(|(k, _)| after.as_ref().is_none_or(|a| *k > a))
            .filter(|(_, o)| sel.matches(o, Some(c.ns.as_str()).filter(|ns| !ns.is_empty())));
        let (mut items, mut last) = (String::new(), None);
        for (key, obj) in matching.by_ref().take(limit) {
            items.push_str(if last.is_some() { "," } else { "" });
            match c.res.is(CR) {
                true => items.push_str(&obj.text()),
                false => items.push_str(&obj.body),
            }
            last = Some(key);
        }
        let remaining = matching.count();
        let mut metadata = json!({ "resourceVersion": at.to_string() });
        if let (true, Some((ns, name))) = (remaining > 0, last) {
            metadata["continue"] = format!("{at}|{ns}|{name}").into();
            if sel.labels.is_empty() && sel.fields.is_empty() {
                metadata["remainingItemCount"] = remaining.into();
            }
        }
        let (kind, api_version) = (format!("{}List", c.res.kind), c.res.api_version());
        let list = format!(
            r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{metadata},"items":[{items}]}}"#
        );
        Ok(reply_text(200, list))
    }

    fn watch(&self, c: &Call, name: Option<&str>) -> ApiResult<Response> {
        let initial = c.param("sendInitialEvents") == "true";
        let bookmarks = c.param("allowWatchBookmarks") == "true";
        let rv_match = c.param("resourceVersionMatch");
        if initial && (rv_match != "NotOlderThan" || !bookmarks) {
            return Err(invalid_options(
                "sendInitialEvents requires setting resourceVersionMatch \
                to NotOlderThan and allowWatchBookmarks to true",
            ));
        }
        if !initial && !rv_match.is_empty() {
            return Err(invalid_options(
                "resourceVersionMatch is forbidden for watch unless \
                sendInitialEvents is provided",
            ));
        }
        let seconds = match c.param("timeoutSeconds") {
            "" => DEFAULT_WATCH_SECONDS,
            t => t
                .parse()
                .map_err(|_| bad(format!("invalid timeoutSeconds: {t}")))?,
        };
        let mut sel = Selectors::parse(c.res, &c.q)?;
        if let Some(name) = name {
            sel.fields
                .push(("metadata.name", "", true, name.to_string()));
        }
        let rv = c.param("resourceVersion");
        let g = self.lock();
        let started = Instant::now();
        let ns = Some(c.ns.clone()).filter(|ns| !ns.is_empty());
        let mut cursor = Cursor {
            server: self.clone(),
            rx: g.tick.subscribe(),
            r: c.r,
            ns,
            sel,
            last: g.rv,
            epoch: g.epoch,
            queue: VecDeque::new(),
            bookmarks,
            deadline: started + Duration::from_secs(seconds.min(365 * 86_400)),
            next_bookmark: started,
            done: false,
        };
        if rv.is_empty() || rv == "0" || initial {
            let state = g.state_at(c.r, g.rv);
            let current = state
                .values()
                .filter(|o| cursor.sel.matches(o, cursor.ns.as_deref()));
            cursor
                .queue
                .extend(current.map(|o| event_line("ADDED", &o.text())));
            if initial {
                cursor
                    .queue
                    .push_back(bookmark(c.res, g.rv, true).to_string());
                cursor.next_bookmark = started + BOOKMARK_EVERY;
            }
        } else {
            cursor.last = rv
                .parse()
                .map_err(|_| bad(format!("invalid resourceVersion: {rv}")))?;
            if cursor.last < g.compacted {
                cursor
                    .queue
                    .push_back(expired_event(cursor.last, g.compacted).to_string());
                cursor.done = true;
            }
        }
        drop(g);
        let mut response = Response::new(Body::from_stream(futures::stream::unfold(
            cursor, next_line,
        )));
        let json = HeaderValue::from_static("application/json");
        response.headers_mut().insert(header::CONTENT_TYPE, json);
        Ok(response)
    }

    /// Every write: create, replace, patches, apply, binding, delete.
    fn write(&self, c: &Call, url_name: Option<&str>, op: Op) -> ApiResult<Response> {
        let res = c.res;
        if op == Op::Bind
            && let Some(failure) = self.lock().binding_failures.pop_front()
        {
            return Err(failure);
        }
        let body: Value = match c.body.iter().all(u8::is_ascii_whitespace) {
            true if op == Op::Delete => Value::Null,
            _ => serde_json::from_slice(c.body)
                .map_err(|e| bad(format!("the body of the request could not be decoded: {e}")))?,
        };
        if !body.is_object() && !matches!(op, Op::Delete | Op::JsonPatch) {
            return Err(bad("the body of the request is not a JSON object"));
        }
        let (body_name, body_ns) = (meta_str(&body, "name"), meta_str(&body, "namespace"));
        let name = url_name.unwrap_or(body_name);
        let must_match =
            matches!(op, Op::Replace | Op::Bind) || op == Op::Apply && !body_name.is_empty();
        if must_match && body_name != name {
            return Err(bad(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if !body_ns.is_empty()
            && res.is(NS)
            && body_ns != c.ns
            && !matches!(op, Op::Merge | Op::JsonPatch)
        {
            return Err(bad(
                "the namespace of the provided object does not match the namespace sent on the \
                 request",
            ));
        }
        if matches!(op, Op::Create | Op::Replace | Op::Apply) {
            for (field, want) in [("apiVersion", res.api_version()), ("kind", res.kind.into())] {
                match body[field].as_str() {
                    None if op != Op::Apply => {}
                    Some(got) if got == want => {}
                    got => {
                        return Err(bad(format!("{field} {got:?} in the body, {want} expected")));
                    }
                }
            }
        }
        let mut g = self.lock();
        let name = match (name, meta_str(&body, "generateName")) {
            ("", "") => {
                return Err(invalid(
                    res.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
            ("", prefix) => format!(
                "{prefix}{:05x}",
                (g.seq + 1).wrapping_mul(0x9E37_79B9) & 0xfffff
            ),
            (name, _) => name.to_string(),
        };
        let key = (c.r, c.ns.clone(), name.clone());
        let (old, mut owners) = g.entry(&key);
        let manager = c.manager();
        let (mut who, mut applied, mut force) = ((manager.as_str(), "Update", c.sub), None, false);
        if op == Op::Apply {
            if c.param("fieldManager").is_empty() {
                return Err(bad("PATCH, fieldManager is required for apply requests"));
            }
            (who.1, force) = ("Apply", c.param("force") == "true");
            let mine = leaves(&body).into_keys().filter(|p| match c.sub {
                "status" => p[0] == "status",
                _ => !(res.is(ST) && p[0] == "status"),
            });
            applied = Some(mine.collect::<BTreeSet<_>>());
        }
        let Some(old) = old else {
            if !matches!(op, Op::Create | Op::Apply) || !c.sub.is_empty() {
                return Err(not_found(res, &name));
            }
            if res.is(NS) {
                g.namespace_exists(&c.ns)?;
            }
            let mut new = body;
            let meta = meta_mut(&mut new);
            for field in [
                "uid",
                "creationTimestamp",
                "resourceVersion",
                "generation",
                "managedFields",
            ] {
                meta.remove(field);
            }
            g.init_meta(res, &c.ns, &name, &mut new);
            reset_status(res, &mut new);
            track(&mut owners, who, &Value::Null, &new, applied, force)?;
            return Ok(reply(201, &g.commit(&key, Some(new), owners)));
        };
        let mut new = old.clone();
        match op {
            Op::Create => {
                let message = format!("{} \"{name}\" already exists", res.qualified());
                return Err(fail(409, "AlreadyExists", message).about(res.group, res.plural, &name));
            }
            Op::Delete => {
                check_preconditions(
                    res,
                    &name,
                    body.get("preconditions").unwrap_or(&Value::Null),
                    &old,
                )?;
                let gone = g.commit(&key, None, Vec::new());
                if res.is(OBJ) {
                    return Ok(reply(200, &gone));
                }
                let details = json!({ "name": name, "group": res.group, "kind": res.plural,
                                      "uid": meta_str(&gone, "uid") });
                let status = json!({ "kind": "Status", "apiVersion": "v1", "metadata": {},
                                     "status": "Success", "details": details });
                return Ok(reply(200, &status));
            }
            Op::Replace if res.is(CR) && meta_str(&body, "resourceVersion").is_empty() => {
                let why =
                    "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update";
                return Err(invalid(res.kind, &name, why));
            }
            Op::Replace => new = body.clone(),
            Op::Merge => json_patch::merge(&mut new, &body),
            Op::JsonPatch => {
                let patch: json_patch::Patch = serde_json::from_value(body.clone())
                    .map_err(|e| bad(format!("invalid JSON patch: {e}")))?;
                json_patch::patch(&mut new, &patch).map_err(|e| {
                    fail(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
            }
            Op::Apply => {
                json_patch::merge(&mut new, &body);
                // What this manager applied before and no longer does goes, unless co-owned.
                let mine = owners.iter().find(|o| owned_by(o, who));
                let dropped = mine.map(|o| o.fields.clone()).unwrap_or_default();
                let applied = applied.as_ref().expect("set for apply");
                for p in dropped.difference(applied) {
                    let co_owned = owners
                        .iter()
                        .any(|o| !owned_by(o, who) && o.fields.contains(p));
                    if !co_owned {
                        remove_path(&mut new, p);
                    }
                }
            }
            Op::Bind => bind(&name, &body, &old, &mut new)?,
        }
        if !new.is_object() {
            return Err(fail(
                422,
                "Invalid",
                "the patched object is not a JSON object",
            ));
        }
        let wanted = meta_str(&new, "resourceVersion");
        if !wanted.is_empty() && wanted != meta_str(&old, "resourceVersion") {
            return Err(conflict(&res.qualified(), &name, MODIFIED));
        }
        if op != Op::Bind {
            carry(res, &old, &mut new, c.sub == "status");
        }
        let before = owners.clone();
        track(&mut owners, who, &old, &new, applied, force)?;
        let stored = match old == new && before == owners {
            true => old,
            false => g.commit(&key, Some(new), owners),
        };
        if op != Op::Bind {
            return Ok(reply(200, &stored));
        }
        let mut recorded = body;
        meta_mut(&mut recorded).insert("namespace".into(), c.ns.clone().into());
        g.bindings.push(recorded);
        if let Some(lost) = g.binding_answers_lost.pop_front() {
            return Err(lost);
        }
        let status = json!({ "kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Success", "code": 201 });
        Ok(reply(201, &status))
    }
}

/// uid/resourceVersion preconditions (of DeleteOptions, or of a Binding's metadata).
fn check_preconditions(res: &Res, name: &str, want: &Value, have: &Value) -> ApiResult<()> {
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let (want, have) = (
            want[field].as_str().unwrap_or_default(),
            meta_str(have, field),
        );
        if !want.is_empty() && want != have {
            let why = format!(
                "Precondition failed: {label} in precondition: {want}, {label} in object meta: \
                 {have}"
            );
            return Err(conflict(&res.qualified(), name, &why));
        }
    }
    Ok(())
}

/// `pods/{name}/binding` as the real BindingREST: target checks, the Binding's uid and
/// resourceVersion as preconditions, "being deleted" and "already assigned" conflicts, then
/// `spec.nodeName`, the Binding's annotations and the PodScheduled condition.
fn bind(name: &str, binding: &Value, pod: &Value, new: &mut Value) -> ApiResult<()> {
    let target = &binding["target"];
    match (
        target["kind"].as_str().unwrap_or_default(),
        target["name"].as_str().unwrap_or_default(),
    ) {
        ("" | "Node", "") => return Err(invalid("Binding", name, "target.name: Required value")),
        ("" | "Node", _) => {}
        (kind, _) => {
            let why = format!(
                "target.kind: Unsupported value: \"{kind}\": supported values: \"Node\", \
                 \"<empty>\""
            );
            return Err(invalid("Binding", name, &why));
        }
    }
    check_preconditions(&RESOURCES[2], name, &binding["metadata"], pod)?;
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if !meta_str(pod, "deletionTimestamp").is_empty() {
        let why = format!("pod {name} is being deleted, cannot be assigned to a host");
        return Err(conflict("pods/binding", name, &why));
    }
    if !node.is_empty() {
        let why = format!("pod {name} is already assigned to node \"{node}\"");
        return Err(conflict("pods/binding", name, &why));
    }
    for part in ["spec", "status"] {
        if !new[part].is_object() {
            new[part] = json!({});
        }
    }
    new["spec"]["nodeName"] = target["name"].clone();
    if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
        let meta = meta_mut(new);
        let existing = meta.entry("annotations").or_insert(json!({}));
        if let Some(existing) = existing.as_object_mut() {
            existing.extend(annotations.clone());
        }
    }
    let scheduled = json!({ "type": "PodScheduled", "status": "True", "lastProbeTime": null,
                            "lastTransitionTime": now() });
    let mut conditions = new["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c["type"] != "PodScheduled");
    conditions.push(scheduled);
    new["status"]["conditions"] = conditions.into();
    Ok(())
}

fn invalid_options(why: &str) -> ApiError {
    invalid("ListOptions.meta.k8s.io", "", why)
}

/// One watch event as its JSON line carries it; `object` is JSON text.
fn event_line(kind: &str, object: &str) -> String {
    format!(r#"{{"type":"{kind}","object":{object}}}"#)
}

fn bookmark(r: &Res, rv: u64, initial_end: bool) -> Value {
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if initial_end {
        metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    let object = json!({ "kind": r.kind, "apiVersion": r.api_version(), "metadata": metadata });
    json!({ "type": "BOOKMARK", "object": object })
}

fn expired_event(from: u64, compacted: u64) -> Value {
    let status = expired(format!("too old resource version: {from} ({compacted})")).status();
    json!({ "type": "ERROR", "object": status })
}

/// One open watch: a cursor into the history, advanced as the client reads.
struct Cursor {
    server: FakeApiServer,
    rx: watch::Receiver<u64>,
    r: usize,
    ns: Option<String>,
    sel: Selectors,
    last: u64,
    epoch: u64,
    /// Events to send, one JSON line each (without the newline).
    queue: VecDeque<String>,
    bookmarks: bool,
    deadline: Instant,
    next_bookmark: Instant,
    done: bool,
}

async fn next_line(mut c: Cursor) -> Option<(Result<Bytes, Infallible>, Cursor)> {
    loop {
        if let Some(event) = c.queue.pop_front() {
            let mut line = event.into_bytes();
            line.push(b'\n');
            return Some((Ok(Bytes::from(line)), c));
        }
        if c.done || Instant::now() >= c.deadline {
            return None;
        }
        c.rx.borrow_and_update();
        let stalled = {
            let g = c.server.lock();
            if g.unserved.contains(&c.r) {
                return None;
            }
            if g.epoch != c.epoch {
                c.queue
                    .push_back(expired_event(c.last, g.compacted).to_string());
                c.done = true;
                continue;
            }
            // A stalled watch sends nothing, bookmarks neither: it waits below.
            if !g.watches_stalled {
                let start = g.history.partition_point(|e| e.rv <= c.last);
                for e in g.history[start..].iter().filter(|e| e.res == c.r) {
                    c.queue.extend(c.sel.translate(e, c.ns.as_deref()));
                }
                c.last = c.last.max(g.rv);
                if c.queue.is_empty() && c.bookmarks && Instant::now() >= c.next_bookmark {
                    c.queue
                        .push_back(bookmark(&RESOURCES[c.r], c.last, false).to_string());
                    c.next_bookmark = Instant::now() + BOOKMARK_EVERY;
                }
            }
            g.watches_stalled
        };
        if c.queue.is_empty() {
            let wake = if c.bookmarks && !stalled {
                c.next_bookmark.min(c.deadline)
            } else {
                c.deadline
            };
            tokio::select! {
                changed = c.rx.changed() => if changed.is_err() { return None },
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}
