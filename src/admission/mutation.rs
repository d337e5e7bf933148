//! The webhook's decision for one AdmissionReview request: which object it is, whether it is
//! a TAS workload, [`admit`] for the verdict, and the [`Injection`] patch.
//!
//! * **Jobs** (`batch/v1`) on CREATE: a Job naming a queue or carrying a `podset-*`
//!   annotation is validated and admitted; its pod template gets the flavor's node labels and
//!   tolerations and kube-tas's stamps (gang size, queue), so its pods tell the extender their
//!   gang even before the cluster view shows the Job.
//! * **Pods** (`v1`) on CREATE: a bare pod or plain pod-group pod is admitted the same way
//!   and patched in its own spec; a plain pod group's pod is stamped with its role
//!   (`kueue.x-k8s.io/role-hash`), the PodSet of its shape, as Kueue's webhook does. A Job's pod is admitted as its Job (from the cluster view,
//!   else from the stamps its template gave it) and gets only what it lacks: nothing when
//!   the Job's template was patched already.
//! * **JobSets** (`jobset.x-k8s.io/v1alpha2`) and **LeaderWorkerSets**
//!   (`leaderworkerset.x-k8s.io/v1`) on CREATE: validated as one workload of several PodSets
//!   (Kueue's rules, `podset-group-name` pairs included); each TAS PodSet's template gets its
//!   flavor's node labels and tolerations and the stamps of its PodSet and queue. Their pods
//!   are admitted as their set's PodSet and get only what they lack.
//! * Anything else (other operations, subresources, other kinds) passes unchanged.
//!
//! Pure and stateless: the same request always gets the same answer, and a `dryRun` request
//! changes nothing because no request does (`sideEffects: None`).

use std::collections::BTreeMap;

use json_patch::PatchOperation;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::object::{read_job, read_pod};
use super::patch::{Injection, PodTemplateNow};
use super::review::{AdmissionRequest, GroupVersionKind};
use super::{Admitted, Denial, admit};
use crate::cluster::group::{GroupKey, PodSetHint};
use crate::cluster::sets::{JobSet, LeaderWorkerSet, workload_of_jobset, workload_of_lws_group};
use crate::cluster::state::{ClusterState, SharedState};
use crate::cluster::{
    Cluster, Workload, WorkloadKind, controller_job_of, managed_by_kueue, name_or_generate_name,
    namespace_or_default, owned_by_jobset, pod_marks_tas, workload_of_job, workload_of_pod,
    workload_of_stamped_job_pod,
};
use crate::keys;
use crate::topology::FeatureGates;

/// The longest part of a parse error quoted back (serde can quote a whole string value).
const MAX_ERROR_CHARS: usize = 512;

/// The webhook: the shared cluster state it resolves queues, flavors and Jobs against (the
/// same state the extender decides over, so a Job created after startup is known as soon as
/// the watch shows it), and the feature gates. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Webhook {
    state: SharedState,
    gates: FeatureGates,
}

/// What the webhook answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Store the object, with `patch` applied (none when empty).
    Allow {
        /// JSON Patch operations; empty when nothing is added.
        patch: Vec<PatchOperation>,
        /// Shown to the user by kubectl.
        warnings: Vec<String>,
    },
    /// Refuse it.
    Deny {
        /// 403 (a rule refuses it), 422 (a field cannot be read), 400 (the review itself is
        /// malformed).
        code: u16,
        /// What to fix.
        message: String,
    },
}

impl Decision {
    fn allow() -> Self {
        Decision::Allow {
            patch: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn deny(code: u16, message: impl Into<String>) -> Self {
        Decision::Deny {
            code,
            message: message.into(),
        }
    }
}

impl From<Denial> for Decision {
    fn from(d: Denial) -> Self {
        Decision::deny(403, d.message)
    }
}

impl Webhook {
    /// A webhook reading `state`.
    pub fn new(state: SharedState, gates: FeatureGates) -> Self {
        Self { state, gates }
    }

    /// A webhook over a cluster given as manifests (a state of its own, fed as events).
    pub fn over_cluster(cluster: &Cluster, gates: FeatureGates) -> Self {
        Self::new(SharedState::new(ClusterState::from_cluster(cluster)), gates)
    }

    /// Decides one request.
    pub fn decide(&self, request: &AdmissionRequest<'_>) -> Decision {
        if request.operation != "CREATE" || request.sub_resource.is_some() {
            return Decision::allow();
        }
        let kind = Handled::of(&request.kind);
        let Some(kind) = kind else {
            return Decision::Allow {
                patch: Vec::new(),
                warnings: vec![format!(
                    "kube-tas mutates only batch/v1 Jobs, v1 Pods, jobset.x-k8s.io/v1alpha2 \
                     JobSets and leaderworkerset.x-k8s.io/v1 LeaderWorkerSets; this {} passed \
                     unchanged (check the rules of the MutatingWebhookConfiguration)",
                    request.kind
                )],
            };
        };
        let Some(raw) = request.object else {
            return Decision::deny(
                400,
                "request.object: Required value: a CREATE review carries the object",
            );
        };
        match kind {
            Handled::Job => match read(read_job, raw.get(), &request.kind) {
                Ok(mut job) => {
                    fill_namespace(&mut job.metadata, request);
                    self.job(&job)
                }
                Err(d) => d,
            },
            Handled::Pod => match read(read_pod, raw.get(), &request.kind) {
                Ok(mut pod) => {
                    fill_namespace(&mut pod.metadata, request);
                    self.pod(&pod)
                }
                Err(d) => d,
            },
            Handled::JobSet => match read(read_typed::<JobSet>, raw.get(), &request.kind) {
                Ok(mut js) => {
                    fill_namespace(&mut js.metadata, request);
                    self.jobset(&js)
                }
                Err(d) => d,
            },
            Handled::LeaderWorkerSet => {
                match read(read_typed::<LeaderWorkerSet>, raw.get(), &request.kind) {
                    Ok(mut lws) => {
                        fill_namespace(&mut lws.metadata, request);
                        self.lws(&lws)
                    }
                    Err(d) => d,
                }
            }
        }
    }

    /// A JobSet on CREATE.
    pub fn jobset(&self, js: &JobSet) -> Decision {
        let templates: Vec<(Vec<String>, Option<&PodTemplateSpec>)> = js
            .spec
            .replicated_jobs
            .iter()
            .enumerate()
            .map(|(i, rj)| {
                let at = ["spec", "replicatedJobs", &i.to_string(), "template", "spec"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain(["template".to_string()])
                    .collect();
                (at, rj.template.spec.as_ref().map(|s| &s.template))
            })
            .collect();
        self.set(&js.metadata, &templates, || {
            workload_of_jobset(js, &Default::default())
        })
    }

    /// A LeaderWorkerSet on CREATE (validated and patched as its replica groups' workload).
    pub fn lws(&self, lws: &LeaderWorkerSet) -> Decision {
        let lwt = &lws.spec.leader_worker_template;
        let at = |t: &str| -> Vec<String> {
            ["spec", "leaderWorkerTemplate", t]
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        let mut templates = Vec::new();
        if let Some(leader) = &lwt.leader_template {
            templates.push((at("leaderTemplate"), Some(leader)));
        }
        templates.push((at("workerTemplate"), Some(&lwt.worker_template)));
        self.set(&lws.metadata, &templates, || {
            workload_of_lws_group(lws, 0, &Default::default())
        })
    }

    /// A set (JobSet, LeaderWorkerSet) whose PodSet `i` comes from `templates[i]` (the JSON
    /// Pointer tokens to the pod template, and the template).
    fn set(
        &self,
        meta: &ObjectMeta,
        templates: &[(Vec<String>, Option<&PodTemplateSpec>)],
        workload: impl FnOnce() -> Result<Workload, crate::cluster::FieldError>,
    ) -> Decision {
        let marked = templates.iter().any(|(_, t)| {
            has_podset_annotation(
                t.and_then(|t| t.metadata.as_ref())
                    .and_then(|m| m.annotations.as_ref()),
            )
        });
        if !names_queue(meta) && !marked {
            return Decision::allow();
        }
        let workload = match workload() {
            Ok(w) => w,
            Err(e) => return Decision::deny(422, e.to_string()),
        };
        let state = self.state.read();
        let Admitted { pod_sets, warnings } = match admit(&workload, state.kueue(), &self.gates) {
            Ok(Some(a)) => a,
            Ok(None) => return Decision::allow(),
            Err(d) => return d.into(),
        };
        let mut patch = Vec::new();
        for (i, ps) in pod_sets.iter().enumerate() {
            let (Some(flavor), Some((at, Some(template)))) = (&ps.flavor, templates.get(i)) else {
                continue;
            };
            let (Some(rf), Some(spec)) = (
                state.kueue().resource_flavors.get(flavor),
                template.spec.as_ref(),
            ) else {
                continue;
            };
            let injection = Injection::of_flavor(rf, set_stamps(&workload, i));
            let meta = template.metadata.as_ref();
            let tokens: Vec<&str> = at.iter().map(String::as_str).collect();
            patch.extend(injection.patch_for(&PodTemplateNow {
                at: &tokens,
                has_metadata: meta.is_some(),
                annotations: meta.and_then(|m| m.annotations.as_ref()),
                spec,
            }));
        }
        Decision::Allow { patch, warnings }
    }

    /// A Job on CREATE.
    pub fn job(&self, job: &Job) -> Decision {
        let template = job.spec.as_ref().map(|s| &s.template);
        let template_annotations = template
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref());
        if !names_queue(&job.metadata) && !has_podset_annotation(template_annotations) {
            return Decision::allow();
        }
        if owned_by_jobset(&job.metadata) {
            // Its JobSet was admitted as one workload and its template patched already.
            return Decision::allow();
        }
        let workload = match workload_of_job(job) {
            Ok(w) => w,
            Err(e) => return Decision::deny(422, e.to_string()),
        };
        let state = self.state.read();
        let Found {
            mut injection,
            warnings,
            ..
        } = match self.injection(&state, &workload) {
            Ok(Some(found)) => found,
            Ok(None) => return Decision::allow(),
            Err(d) => return d.into(),
        };
        injection.annotations = stamps(&workload);
        // `workload_of_job` refused a Job without `spec.template.spec`.
        let (Some(template), Some(spec)) = (template, template.and_then(|t| t.spec.as_ref()))
        else {
            return Decision::allow();
        };
        let meta = template.metadata.as_ref();
        let now = PodTemplateNow {
            at: &["spec", "template"],
            has_metadata: meta.is_some(),
            annotations: meta.and_then(|m| m.annotations.as_ref()),
            spec,
        };
        Decision::Allow {
            patch: injection.patch_for(&now),
            warnings,
        }
    }

    /// A Pod on CREATE.
    pub fn pod(&self, pod: &Pod) -> Decision {
        let meta = &pod.metadata;
        let group = GroupKey::of_pod(meta, pod.spec.as_ref());
        if group.kind == WorkloadKind::SchedulingGroup {
            // A Workload-API PodGroup's pod: its PodGroup says how it is placed, and no
            // ResourceFlavor is involved; nothing to validate or inject.
            return Decision::allow();
        }
        if managed_by_kueue(meta, pod.spec.as_ref()) || self.state.read().kueue_manages(&group) {
            // Kueue's own TAS places it (its marks, or a Kueue Workload of its Job): kube-tas
            // does not fight it.
            return Decision::allow();
        }
        let annotations = meta.annotations.as_ref();
        let marked = pod_marks_tas(meta);
        let namespace = namespace_or_default(meta);
        let name = name_or_generate_name(meta);
        let owned;
        let state = self.state.read();
        if matches!(
            group.kind,
            WorkloadKind::JobSet | WorkloadKind::LeaderWorkerSet
        ) {
            return self.set_pod(&state, pod, &group);
        }
        let (workload, stamp) = match controller_job_of(meta) {
            Some(job) => {
                if let Some(w) = state.job(&namespace, &job) {
                    (w, true)
                } else if let Some(stamped) = workload_of_stamped_job_pod(pod, &job) {
                    owned = match stamped {
                        Ok(w) => w,
                        Err(e) => return Decision::deny(422, e.to_string()),
                    };
                    (&owned, false)
                } else if marked {
                    return Decision::deny(
                        403,
                        format!(
                            "pod {namespace}/{name}: its Job {namespace}/{job} is not in \
                             kube-tas's cluster view and the pod carries no {} annotation, so \
                             its gang size and queue are unknown (a Job created before the \
                             webhook was registered): recreate the Job",
                            keys::STAMP_POD_GROUP_TOTAL_COUNT
                        ),
                    );
                } else {
                    return Decision::allow();
                }
            }
            None if !marked => return Decision::allow(),
            None => {
                owned = match workload_of_pod(pod) {
                    Ok(w) => w,
                    Err(e) => return Decision::deny(422, e.to_string()),
                };
                (&owned, false)
            }
        };
        let Found {
            mut injection,
            warnings,
            flavor,
        } = match self.injection(&state, workload) {
            Ok(Some(found)) => found,
            Ok(None) => return Decision::allow(),
            Err(d) => return d.into(),
        };
        if stamp {
            injection.annotations = stamps(workload);
        }
        let no_spec = Default::default();
        if let PodSetHint::Role(role) = PodSetHint::of_pod(meta, pod.spec.as_ref())
            && annotations.is_none_or(|a| !a.contains_key(keys::ROLE_HASH))
        {
            // A plain pod group's pod keeps the role of its shape as submitted (Kueue's role
            // hash annotation), so the flavor's injection does not move it to another PodSet.
            injection
                .annotations
                .insert(keys::ROLE_HASH.to_string(), role.to_string());
        }
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);
        // A Job's pod was checked as its Job's template; its own spec may still differ.
        if let Some((key, have, want)) = injection.node_selector_conflict(spec) {
            return Decision::deny(
                403,
                format!(
                    "spec.nodeSelector[{key}]: Invalid value: {have:?}: ResourceFlavor \
                     \"{flavor}\" places {} on nodes with {key}={want}",
                    workload_label(workload)
                ),
            );
        }
        let now = PodTemplateNow {
            at: &[],
            has_metadata: true,
            annotations,
            spec,
        };
        Decision::Allow {
            patch: injection.patch_for(&now),
            warnings,
        }
    }

    /// A JobSet's or LeaderWorkerSet's pod: admitted as its set's PodSet; it gets what its
    /// PodSet's pods must carry and lack (nothing when it comes from a patched template).
    fn set_pod(&self, state: &ClusterState, pod: &Pod, group: &GroupKey) -> Decision {
        let Some(workload) = state.workload(group) else {
            return Decision::Allow {
                patch: Vec::new(),
                warnings: vec![format!(
                    "{group} is not in kube-tas's cluster view yet; pod {}/{} passed unchanged",
                    group.namespace,
                    name_or_generate_name(&pod.metadata)
                )],
            };
        };
        let Admitted { pod_sets, warnings } = match admit(&workload, state.kueue(), &self.gates) {
            Ok(Some(a)) => a,
            Ok(None) => return Decision::allow(),
            Err(d) => return d.into(),
        };
        let names: Vec<&str> = pod_sets.iter().map(|p| p.spec.name.as_str()).collect();
        let Some(i) = PodSetHint::of_pod(&pod.metadata, pod.spec.as_ref())
            .resolve(&names)
            .and_then(|n| names.iter().position(|m| *m == n))
        else {
            return Decision::deny(
                403,
                format!(
                    "pod {}/{} names no PodSet of {group} (it has {})",
                    group.namespace,
                    name_or_generate_name(&pod.metadata),
                    names.join(", ")
                ),
            );
        };
        let Some(rf) = pod_sets[i]
            .flavor
            .as_ref()
            .and_then(|f| state.kueue().resource_flavors.get(f))
        else {
            return Decision::allow();
        };
        let injection = Injection::of_flavor(rf, set_stamps(&workload, i));
        let no_spec = Default::default();
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);
        Decision::Allow {
            patch: injection.patch_for(&PodTemplateNow {
                at: &[],
                has_metadata: true,
                annotations: pod.metadata.annotations.as_ref(),
                spec,
            }),
            warnings,
        }
    }

    /// Admits `workload`; for a TAS PodSet, what its pods must carry. `Ok(None)`: not placed
    /// by kube-tas.
    fn injection(
        &self,
        state: &ClusterState,
        workload: &Workload,
    ) -> Result<Option<Found>, Denial> {
        let Some(Admitted { pod_sets, warnings }) = admit(workload, state.kueue(), &self.gates)?
        else {
            return Ok(None);
        };
        // Jobs and pods have one PodSet, `main`.
        let Some(flavor) = pod_sets.first().and_then(|ps| ps.flavor.as_ref()) else {
            return Ok(None);
        };
        let Some(rf) = state.kueue().resource_flavors.get(flavor) else {
            return Ok(None);
        };
        Ok(Some(Found {
            injection: Injection::of_flavor(rf, BTreeMap::new()),
            warnings,
            flavor: flavor.clone(),
        }))
    }
}

/// What an admitted TAS workload's pods must carry, and what to tell the user.
struct Found {
    injection: Injection,
    warnings: Vec<String>,
    /// The ResourceFlavor's name, for messages.
    flavor: String,
}

/// The stamps of a Job's pods: gang size and queue. A Job with no pods to run
/// (`parallelism: 0`) gets no size stamp rather than an unusable `0`.
pub fn stamps(workload: &Workload) -> BTreeMap<String, String> {
    let mut stamps = BTreeMap::new();
    if let Some(ps) = workload.pod_sets.first().filter(|ps| ps.spec.count > 0) {
        stamps.insert(
            keys::STAMP_POD_GROUP_TOTAL_COUNT.to_string(),
            ps.spec.count.to_string(),
        );
    }
    if let Some(queue) = &workload.queue_name {
        stamps.insert(keys::STAMP_QUEUE_NAME.to_string(), queue.clone());
    }
    stamps
}

/// The stamps of a JobSet's or LeaderWorkerSet's PodSet template `index`: its PodSet and the
/// set's queue (the pods carry neither otherwise).
pub fn set_stamps(workload: &Workload, index: usize) -> BTreeMap<String, String> {
    let mut stamps = BTreeMap::new();
    if let Some(ps) = workload.pod_sets.get(index) {
        stamps.insert(keys::STAMP_POD_SET.to_string(), ps.spec.name.clone());
    }
    if let Some(queue) = &workload.queue_name {
        stamps.insert(keys::STAMP_QUEUE_NAME.to_string(), queue.clone());
    }
    stamps
}

/// `Job ns/name`, `Pod ns/name`, `PodGroup ns/name`: what a pod was admitted as.
fn workload_label(w: &Workload) -> String {
    format!("{} {}/{}", w.kind, w.namespace, w.name)
}

/// The kinds the webhook mutates.
#[derive(Debug, Clone, Copy)]
enum Handled {
    Job,
    Pod,
    JobSet,
    LeaderWorkerSet,
}

impl Handled {
    fn of(gvk: &GroupVersionKind) -> Option<Self> {
        match (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()) {
            ("batch", "v1", "Job") => Some(Handled::Job),
            ("", "v1", "Pod") => Some(Handled::Pod),
            ("jobset.x-k8s.io", "v1alpha2", "JobSet") => Some(Handled::JobSet),
            ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet") => Some(Handled::LeaderWorkerSet),
            _ => None,
        }
    }
}

/// Reads a whole object into its serde type (JobSets and LeaderWorkerSets are read whole).
fn read_typed<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(json)
}

/// Reads `request.object` with `reader`, or a 400 naming what could not be read.
fn read<T>(
    reader: fn(&str) -> Result<T, serde_json::Error>,
    raw: &str,
    gvk: &GroupVersionKind,
) -> Result<T, Decision> {
    reader(raw).map_err(|e| {
        Decision::deny(
            400,
            format!(
                "request.object: cannot read {gvk}: {}",
                shorten(e.to_string())
            ),
        )
    })
}

/// `text`, cut to [`MAX_ERROR_CHARS`] bytes (on a character boundary) with `…`.
pub(super) fn shorten(mut text: String) -> String {
    if text.len() > MAX_ERROR_CHARS {
        let mut end = MAX_ERROR_CHARS;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// The API server sets the namespace before admission; a review built by hand may not.
fn fill_namespace(meta: &mut ObjectMeta, request: &AdmissionRequest<'_>) {
    if meta.namespace.as_deref().is_none_or(str::is_empty) {
        meta.namespace = request.namespace.clone().filter(|n| !n.is_empty());
    }
}

/// The queue-name label or its legacy annotation.
fn names_queue(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(keys::QUEUE_NAME_LABEL))
        || meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(keys::QUEUE_NAME_ANNOTATION))
}

fn has_podset_annotation(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.is_some_and(|a| {
        a.keys()
            .any(|k| k.starts_with(keys::PODSET_ANNOTATION_PREFIX))
    })
}
