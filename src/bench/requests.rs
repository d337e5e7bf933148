//! The requests kube-scheduler and kube-apiserver send, built as they build them: the
//! extender's `ExtenderArgs` with a realistic ~6 KB Pod and a window of candidate names
//! (kube-scheduler's rotating sample), and the webhook's `AdmissionReview` of a Job or of a
//! Job's pod. Shared by `kube-tas bench` and the load generator example.
//!
//! Everything here is pure and deterministic: the same inputs give the same bytes.

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use crate::admission::review::{API_VERSION, KIND};
use crate::keys::{JOB_COMPLETION_INDEX, QUEUE_NAME_ANNOTATION, QUEUE_NAME_LABEL};
use crate::synthetic::NAMESPACE;

/// kube-scheduler's `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_PERCENT: usize = 5;

/// The parts of a Job that its pods inherit.
#[derive(Debug, Clone)]
pub struct JobInfo {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.completions` (else `parallelism`, else 1): completion indices are `0..count`.
    pub count: usize,
    /// `spec.template` (metadata and spec), possibly `null`.
    pub template: Value,
    /// The whole Job as the manifest has it.
    pub object: Value,
}

impl JobInfo {
    /// A TAS Job for the webhook: it names a LocalQueue or carries a `podset-*` annotation.
    pub fn is_tas(&self) -> bool {
        let meta = &self.object["metadata"];
        meta["labels"].get(QUEUE_NAME_LABEL).is_some()
            || meta["annotations"].get(QUEUE_NAME_ANNOTATION).is_some()
            || self.template["metadata"]["annotations"]
                .as_object()
                .is_some_and(|a| a.keys().any(|k| k.starts_with("kueue.x-k8s.io/podset-")))
    }

    /// A `Complete` or `Failed` condition that is `True`.
    pub fn finished(&self) -> bool {
        self.object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                matches!(c["type"].as_str(), Some("Complete" | "Failed"))
                    && c["status"].as_str() == Some("True")
            })
    }
}

pub fn job_info(job: &Value) -> JobInfo {
    let meta = &job["metadata"];
    let namespace = meta["namespace"].as_str().unwrap_or(NAMESPACE).to_string();
    let name = meta["name"].as_str().unwrap_or_default().to_string();
    let uid = match meta["uid"].as_str() {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        // Manifests written by hand have no uid; the server matches the owner by name.
        _ => fake_uid(&format!("job/{namespace}/{name}")),
    };
    let spec = &job["spec"];
    let count = spec["completions"]
        .as_u64()
        .or_else(|| spec["parallelism"].as_u64())
        .unwrap_or(1)
        .max(1) as usize;
    JobInfo {
        namespace,
        name,
        uid,
        count,
        template: spec["template"].clone(),
        object: job.clone(),
    }
}

/// A stable UUID-shaped id for `key` (FNV-1a, twice).
pub fn fake_uid(key: &str) -> String {
    let fnv = |seed: u64| {
        key.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let a = fnv(0xcbf2_9ce4_8422_2325);
    let b = fnv(a ^ 0x9e37_79b9_7f4a_7c15);
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0xfff,
        b & 0xffff_ffff_ffff
    )
}

/// Five lowercase alphanumerics, like the suffix of a generated name.
pub fn name_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995;
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

pub fn lone_pod(i: usize) -> Value {
    let name = format!("inference-api-{}", name_suffix(i as u64));
    let mut pod = base_pod(&name, &fake_uid(&format!("pod/{name}/{i}")));
    let meta = &mut pod["metadata"];
    meta["labels"] = json!({
        "app.kubernetes.io/name": "inference-api",
        "app.kubernetes.io/instance": "inference-api-prod",
        "app.kubernetes.io/component": "server",
        "app.kubernetes.io/part-of": "ml-platform",
        "app.kubernetes.io/version": "2.14.1",
        "team": "ml-serving",
        "cost-center": "cc-4711"
    });
    meta["annotations"] = json!({
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
        "prometheus.io/path": "/metrics",
        "kubectl.kubernetes.io/default-container": "main",
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"
    });
    pod
}

/// A pod of `job` with completion index `index`, as the Job controller creates it: the
/// template's labels, annotations and spec, plus the controller's labels, the index annotation
/// and label, the controller `ownerReference` and the `JOB_COMPLETION_INDEX` variable.
pub fn gang_pod(job: &JobInfo, index: usize) -> Value {
    let name = format!("{}-{index}-{}", job.name, name_suffix(index as u64 ^ 0xab));
    let mut pod = base_pod(&name, &fake_uid(&format!("{}/{index}", job.uid)));
    let template = &job.template;
    let mut labels = template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", job.uid.as_str()),
        ("batch.kubernetes.io/job-name", job.name.as_str()),
        ("controller-uid", job.uid.as_str()),
        ("job-name", job.name.as_str()),
        (JOB_COMPLETION_INDEX, &index.to_string()),
    ] {
        labels.insert(k.to_string(), Value::from(v));
    }
    let mut annotations = template["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.insert(JOB_COMPLETION_INDEX.to_string(), index.to_string().into());

    let meta = &mut pod["metadata"];
    meta["namespace"] = job.namespace.clone().into();
    meta["generateName"] = format!("{}-{index}-", job.name).into();
    meta["labels"] = Value::Object(labels);
    meta["annotations"] = Value::Object(annotations);
    meta["ownerReferences"] = json!([{
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job.name,
        "uid": job.uid,
        "controller": true,
        "blockOwnerDeletion": true
    }]);

    // The template decides what the pod requests; the realistic extras stay.
    let tspec = &template["spec"];
    let spec = &mut pod["spec"];
    if let Some(containers) = tspec["containers"].as_array() {
        let base = spec["containers"][0].clone();
        let merged: Vec<Value> = containers
            .iter()
            .map(|c| {
                let mut merged = merge(&base, c);
                // Exactly the template's requests: the plan is made from the Job's template.
                merged["resources"] = match &c["resources"] {
                    Value::Null => json!({}),
                    r => r.clone(),
                };
                if let Some(env) = merged["env"].as_array_mut() {
                    env.push(
                        json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef":
                        {"apiVersion": "v1",
                         "fieldPath": format!("metadata.annotations['{JOB_COMPLETION_INDEX}']")}}}),
                    );
                }
                merged
            })
            .collect();
        spec["containers"] = Value::Array(merged);
    }
    for key in [
        "initContainers",
        "nodeSelector",
        "affinity",
        "priorityClassName",
        "priority",
        "overhead",
        "resources",
        "schedulingGates",
        "subdomain",
    ] {
        if !tspec[key].is_null() {
            spec[key] = tspec[key].clone();
        }
    }
    if let Some(t) = tspec["tolerations"].as_array() {
        let mut all = t.clone();
        all.extend(spec["tolerations"].as_array().cloned().unwrap_or_default());
        spec["tolerations"] = Value::Array(all);
    }
    if let Some(policy) = tspec["restartPolicy"].as_str() {
        spec["restartPolicy"] = policy.into();
    }
    if !tspec["subdomain"].is_null() {
        spec["hostname"] = format!("{}-{index}", job.name).into();
    }
    pod
}

/// `over` laid over `base`: objects merge key by key, anything else replaces.
fn merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            let mut out: Map<String, Value> = b.clone();
            for (k, v) in o {
                let merged = match out.get(k) {
                    Some(old) => merge(old, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => over.clone(),
    }
}

/// The bulk of a realistic pending Pod: what kubectl, the API server's admission plugins and
/// the informer leave on it (about 5.5 KB serialized; ~6 KB with labels and annotations).
fn base_pod(name: &str, uid: &str) -> Value {
    json!({
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": uid,
            "resourceVersion": "48213977",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {".": {}}, "f:labels": {".": {}},
                                   "f:ownerReferences": {".": {}}},
                    "f:spec": {
                        "f:containers": {"k:{\"name\":\"main\"}": {
                            ".": {}, "f:args": {}, "f:command": {}, "f:env": {".": {}},
                            "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                            "f:ports": {".": {}}, "f:readinessProbe": {".": {}},
                            "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
                            "f:securityContext": {".": {}}, "f:terminationMessagePath": {},
                            "f:terminationMessagePolicy": {}, "f:volumeMounts": {".": {}}}},
                        "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                        "f:schedulerName": {}, "f:securityContext": {".": {}},
                        "f:terminationGracePeriodSeconds": {}, "f:tolerations": {},
                        "f:volumes": {".": {}}
                    }
                }
            }, {
                "manager": "kube-scheduler",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-01T00:00:01Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"PodScheduled\"}": {
                    ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:message": {},
                    "f:reason": {}, "f:status": {}, "f:type": {}}}}},
                "subresource": "status"
            }]
        },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "registry.example.com/ml/trainer:2026.01.3@sha256:9f2d4c1e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e",
                "command": ["/usr/bin/python3", "-m", "trainer.main"],
                "args": ["--config=/etc/trainer/config.yaml", "--checkpoint-dir=/scratch/ckpt",
                         "--log-format=json", "--metrics-port=9090"],
                "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
                          {"name": "nccl", "containerPort": 29500, "protocol": "TCP"}],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                    {"name": "OMP_NUM_THREADS", "value": "4"},
                    {"name": "NCCL_DEBUG", "value": "WARN"},
                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                    {"name": "HF_HOME", "value": "/scratch/hf-cache"},
                    {"name": "TRAINER_RUN_ID", "value": "run-2026-01-01-7f3a9c"},
                    {"name": "WANDB_MODE", "value": "offline"},
                    {"name": "MASTER_PORT", "value": "29500"},
                    {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"containerName": "main", "resource": "limits.cpu", "divisor": "0"}}},
                    {"name": "MEMORY_LIMIT", "valueFrom": {"resourceFieldRef": {"containerName": "main", "resource": "limits.memory", "divisor": "0"}}}
                ],
                "resources": {
                    "requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2Gi"},
                    "limits": {"memory": "1Gi", "ephemeral-storage": "4Gi"}
                },
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/trainer", "readOnly": true},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                    {"name": "kube-api-access-7xk2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
                ],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
                                   "initialDelaySeconds": 5, "periodSeconds": 10, "timeoutSeconds": 1,
                                   "successThreshold": 1, "failureThreshold": 3},
                "livenessProbe": {"tcpSocket": {"port": "nccl"}, "initialDelaySeconds": 30,
                                  "periodSeconds": 20, "timeoutSeconds": 2, "successThreshold": 1,
                                  "failureThreshold": 6},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                                    "runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": "trainer-config", "defaultMode": 420}},
                {"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
                {"name": "kube-api-access-7xk2p", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}}
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {"fsGroup": 1000},
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        // What a pod looks like after one failed attempt: the scheduler's condition and
        // its managed-fields entry (pods usually reach the extender more than once).
        "status": {
            "phase": "Pending",
            "qosClass": "Burstable",
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": null,
                "lastTransitionTime": "2026-01-01T00:00:01Z",
                "reason": "Unschedulable",
                "message": "0/5000 nodes are available: 1000 node(s) outside the rack chosen for the group, 4000 Insufficient cpu. preemption: 0/5000 nodes are available: 5000 No preemption victims found for incoming pod."
            }]
        }
    })
}

/// The ServiceAccount token volume the API server's ServiceAccount admission plugin adds to a
/// pod (never to a Job's template).
const SERVICE_ACCOUNT_VOLUME: &str = "kube-api-access-7xk2p";

/// `job` as kube-apiserver hands it to mutating admission when `kubectl create` creates it:
/// in-tree defaults applied (SetDefaults_Job, SetDefaults_PodSpec), `managedFields` from the
/// field manager, no `uid`, `resourceVersion`, `spec.selector` or status yet (those come after
/// admission). About 6 KB serialized.
pub fn job_object(job: &JobInfo) -> Value {
    let mut spec = match &job.object["spec"] {
        Value::Object(spec) => spec.clone(),
        _ => Map::new(),
    };
    if spec.get("manualSelector") != Some(&Value::Bool(true)) {
        spec.remove("selector");
    }
    if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
        spec.insert("completions".to_string(), 1.into());
    }
    let backoff_limit = if spec.contains_key("backoffLimitPerIndex") {
        Value::from(i32::MAX)
    } else {
        Value::from(6)
    };
    let pod_replacement_policy = if spec.contains_key("podFailurePolicy") {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    for (key, default) in [
        ("parallelism", Value::from(1)),
        ("backoffLimit", backoff_limit),
        ("completionMode", Value::from("NonIndexed")),
        ("suspend", Value::Bool(false)),
        ("podReplacementPolicy", Value::from(pod_replacement_policy)),
        ("manualSelector", Value::Bool(false)),
    ] {
        spec.entry(key).or_insert(default);
    }
    spec.insert("template".to_string(), job_template(job));

    let meta = &job.object["metadata"];
    let mut labels = meta["labels"].as_object().cloned().unwrap_or_default();
    for (k, v) in [
        ("app.kubernetes.io/name", "trainer"),
        ("app.kubernetes.io/instance", job.name.as_str()),
        ("app.kubernetes.io/component", "training"),
        ("app.kubernetes.io/part-of", "ml-platform"),
        ("app.kubernetes.io/managed-by", "kubectl"),
        ("team", "ml-research"),
        ("cost-center", "cc-4711"),
        ("ml-platform.example.com/project", "llm-pretrain"),
        ("ml-platform.example.com/tier", "research"),
    ] {
        labels.entry(k).or_insert_with(|| v.into());
    }
    let mut annotations = meta["annotations"].as_object().cloned().unwrap_or_default();
    for (k, v) in [
        ("owner", "ml-research@example.com"),
        (
            "ml-platform.example.com/submitted-by",
            "jane.doe@example.com",
        ),
        ("ml-platform.example.com/notify", "chat:#ml-research-runs"),
        (
            "ml-platform.example.com/description",
            "Pre-training ablation 12 of the 7B model: cosine schedule with a longer warmup, \
             data mix v7 (code 18%, web 52%, books 12%, papers 18%); compare with ablation 9 \
             at 20k steps before scaling out.",
        ),
        (
            "ml-platform.example.com/experiment",
            "llm-pretrain-7b/ablation-12",
        ),
        (
            "ml-platform.example.com/git-commit",
            "4f9c2e1b7a3d5c8e0f1a2b3c4d5e6f7a8b9c0d1e",
        ),
        (
            "ml-platform.example.com/dataset",
            "s3://datasets-example/pretrain/v7/shards-*.tar",
        ),
    ] {
        annotations.entry(k).or_insert_with(|| v.into());
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": labels,
            "annotations": annotations,
            "managedFields": [{
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "batch/v1",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {".": {}}, "f:labels": {".": {}}},
                    "f:spec": {
                        "f:backoffLimit": {}, "f:completionMode": {}, "f:completions": {},
                        "f:manualSelector": {}, "f:parallelism": {},
                        "f:podReplacementPolicy": {}, "f:suspend": {},
                        "f:template": {
                            "f:metadata": {"f:annotations": {".": {}}, "f:labels": {".": {}}},
                            "f:spec": {
                                "f:containers": {".": {}}, "f:dnsPolicy": {},
                                "f:restartPolicy": {}, "f:schedulerName": {},
                                "f:securityContext": {".": {}},
                                "f:terminationGracePeriodSeconds": {}, "f:volumes": {".": {}}
                            }
                        }
                    }
                }
            }]
        },
        "spec": spec,
        "status": {}
    })
}

/// The Job's `spec.template` as it is stored: the manifest's template (its annotations and
/// requests decide the webhook's answer) with the realistic container of [`base_pod`], less
/// what only pods get (the ServiceAccount volume, the default tolerations, the priority, the
/// completion-index variable).
fn job_template(job: &JobInfo) -> Value {
    let mut spec = gang_pod(job, 0)["spec"].take();
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        volumes.retain(|v| v["name"] != SERVICE_ACCOUNT_VOLUME);
    }
    for container in spec["containers"].as_array_mut().into_iter().flatten() {
        if let Some(mounts) = container["volumeMounts"].as_array_mut() {
            mounts.retain(|m| m["name"] != SERVICE_ACCOUNT_VOLUME);
        }
        if let Some(env) = container["env"].as_array_mut() {
            env.retain(|e| e["name"] != "JOB_COMPLETION_INDEX");
        }
    }
    let own_tolerations: Vec<Value> = job.template["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let spec_map = spec.as_object_mut().expect("a pod spec is an object");
    if own_tolerations.is_empty() {
        spec_map.remove("tolerations");
    } else {
        spec_map.insert("tolerations".to_string(), Value::Array(own_tolerations));
    }
    for key in [
        "serviceAccountName",
        "serviceAccount",
        "preemptionPolicy",
        "hostname",
    ] {
        spec_map.remove(key);
    }
    if job.template["spec"]["priority"].is_null() {
        spec_map.remove("priority");
    }

    let tmeta = &job.template["metadata"];
    let mut labels = tmeta["labels"].as_object().cloned().unwrap_or_default();
    let mut annotations = tmeta["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    add_template_extras(job, &mut labels, &mut annotations);
    json!({"metadata": {"labels": labels, "annotations": annotations}, "spec": spec})
}

/// The labels and annotations a real training Job's pod template carries besides Kueue's
/// (kept where the manifest sets them): what its pods inherit too.
fn add_template_extras(
    job: &JobInfo,
    labels: &mut Map<String, Value>,
    annotations: &mut Map<String, Value>,
) {
    for (k, v) in [
        ("app.kubernetes.io/name", "trainer"),
        ("app.kubernetes.io/instance", job.name.as_str()),
        ("app.kubernetes.io/component", "training"),
        ("team", "ml-research"),
    ] {
        labels.entry(k).or_insert_with(|| v.into());
    }
    let first_container = job.template["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or("main")
        .to_string();
    let run_config = json!({
        "model": {"name": "llm-7b", "layers": 32, "hidden": 4096, "heads": 32,
                  "vocab": 32000, "seqLen": 4096, "precision": "bf16"},
        "optimizer": {"name": "adamw", "lr": 0.0003, "betas": [0.9, 0.95],
                      "weightDecay": 0.1, "warmupSteps": 2000, "schedule": "cosine"},
        "data": {"train": "s3://datasets-example/pretrain/v7/train-*.tar",
                 "eval": "s3://datasets-example/pretrain/v7/eval-*.tar",
                 "tokenizer": "s3://models-example/tokenizers/llm-32k/v3"},
        "parallelism": {"data": 8, "tensor": 2, "pipeline": 1, "zeroStage": 1},
        "checkpoint": {"dir": "/scratch/ckpt", "everySteps": 1000, "keep": 3},
        "batch": {"microBatch": 4, "globalBatch": 1024, "gradAccum": 16}
    });
    for (k, v) in [
        ("prometheus.io/scrape", "true".to_string()),
        ("prometheus.io/port", "9090".to_string()),
        ("prometheus.io/path", "/metrics".to_string()),
        ("kubectl.kubernetes.io/default-container", first_container),
        (
            "cluster-autoscaler.kubernetes.io/safe-to-evict",
            "false".to_string(),
        ),
        ("ml-platform.example.com/run-config", run_config.to_string()),
    ] {
        annotations.entry(k).or_insert_with(|| v.into());
    }
}

/// A pod of `job` with completion index `index` as kube-apiserver hands it to mutating
/// admission when the Job controller creates it from the Job's unpatched template: no name yet
/// (`generateName`), the controller `ownerReference` and tracking finalizer, the pod admission
/// plugins' additions, `managedFields` of kube-controller-manager, an empty status.
pub fn job_pod_object(job: &JobInfo, index: usize) -> Value {
    let mut pod = gang_pod(job, index);
    // What the template carries besides the manifest's (see `job_template`).
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    add_template_extras(job, &mut labels, &mut annotations);
    for (key, extras) in [("labels", labels), ("annotations", annotations)] {
        if let Some(map) = pod["metadata"][key].as_object_mut() {
            for (k, v) in extras {
                map.entry(k).or_insert(v);
            }
        }
    }
    pod["apiVersion"] = "v1".into();
    pod["kind"] = "Pod".into();
    let meta = pod["metadata"]
        .as_object_mut()
        .expect("a pod's metadata is an object");
    for key in ["name", "uid", "resourceVersion", "creationTimestamp"] {
        meta.remove(key);
    }
    meta.insert(
        "finalizers".to_string(),
        json!(["batch.kubernetes.io/job-tracking"]),
    );
    // Only the controller's own entry: the scheduler has not seen the pod yet.
    if let Some(fields) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
        fields.truncate(1);
    }
    pod["status"] = json!({});
    pod
}

/// Who creates the object: a user applying the Job, or the Job controller creating its pods.
pub fn creator(job_controller: bool) -> Value {
    match job_controller {
        true => json!({
            "username": "system:serviceaccount:kube-system:job-controller",
            "uid": fake_uid("serviceaccount/kube-system/job-controller"),
            "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                       "system:authenticated"]
        }),
        false => json!({
            "username": "kubernetes-admin",
            "groups": ["kubeadm:cluster-admins", "system:authenticated"]
        }),
    }
}

/// The AdmissionReview kube-apiserver sends for the CREATE of `object` (a Job or a Pod) by
/// `user` (extender-protocol.md §4.1); `name` is left out for a `generateName` object.
pub fn review_body(uid: &str, object: &Value, user: &Value) -> Bytes {
    let (group, resource) = match object["kind"].as_str() {
        Some("Job") => ("batch", "jobs"),
        _ => ("", "pods"),
    };
    let gvk = json!({"group": group, "version": "v1", "kind": object["kind"]});
    let gvr = json!({"group": group, "version": "v1", "resource": resource});
    let mut request = json!({
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "namespace": object["metadata"]["namespace"],
        "operation": "CREATE",
        "userInfo": user,
        "object": object,
        "oldObject": null,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    });
    if let Some(name) = object["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
    {
        request["name"] = name.into();
    }
    let review = json!({"apiVersion": API_VERSION, "kind": KIND, "request": request});
    Bytes::from(review.to_string())
}

/// The candidate names of request `i`: kube-scheduler starts each search where the previous
/// one stopped (`nextStartNodeIndex`), so consecutive windows of `k` names, wrapping around.
pub fn names_window(quoted: &[String], k: usize, i: usize, out: &mut String) {
    let n = quoted.len();
    let start = if k >= n { 0 } else { (i * k) % n };
    for j in 0..k.min(n) {
        if j > 0 {
            out.push(',');
        }
        out.push_str(&quoted[(start + j) % n]);
    }
}

/// One request body: `{"Pod":...,"Nodes":null,"NodeNames":[...]}`.
pub fn request_body(pod: &Value, names: &str) -> Bytes {
    let pod = pod.to_string();
    let mut body = String::with_capacity(pod.len() + names.len() + 40);
    body.push_str("{\"Pod\":");
    body.push_str(&pod);
    body.push_str(",\"Nodes\":null,\"NodeNames\":[");
    body.push_str(names);
    body.push_str("]}");
    Bytes::from(body)
}

/// kube-scheduler's `numFeasibleNodesToFind` with the adaptive percentage (the default,
/// `percentageOfNodesToScore: 0`): `50 - nodes/125` percent, at least 5 % and 100 nodes.
pub fn sample_size(nodes: usize) -> usize {
    if nodes < MIN_FEASIBLE_NODES {
        return nodes;
    }
    let percent = 50usize
        .saturating_sub(nodes / 125)
        .max(MIN_FEASIBLE_PERCENT);
    (nodes * percent / 100).max(MIN_FEASIBLE_NODES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_matches_kube_scheduler() {
        assert_eq!(sample_size(50), 50);
        assert_eq!(sample_size(640), 288);
        assert_eq!(sample_size(5_000), 500);
        assert_eq!(sample_size(15_000), 750);
        assert_eq!(sample_size(50_000), 2_500);
    }

    #[test]
    fn windows_rotate_and_wrap() {
        let quoted: Vec<String> = (0..5).map(|i| format!("\"n{i}\"")).collect();
        let mut out = String::new();
        names_window(&quoted, 2, 2, &mut out);
        assert_eq!(out, r#""n4","n0""#);
    }
}
