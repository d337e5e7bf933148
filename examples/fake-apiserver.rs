//! A stand-in Kubernetes API server in its own process, for load tests of `kube-tas serve` in
//! live mode over loopback: the in-process fake of the integration tests
//! (`tests/common/fake_apiserver.rs`) filled with a generated cluster and served over plain HTTP.
//!
//! ```text
//! cargo build --release --example fake-apiserver
//! target/release/examples/fake-apiserver --blocks 15 --racks 25 --hosts 40 --pods-per-node 10 \
//!     --listen 127.0.0.1:6443 --kubeconfig-out /tmp/fake.kubeconfig
//! kube-tas serve --kubeconfig /tmp/fake.kubeconfig --leader-elect=false
//! ```
//!
//! The cluster (blocks × racks × hosts, with Kueue's topology labels, as `gen-cluster` names
//! them): one Topology, ResourceFlavor, ClusterQueue and LocalQueue; `--jobs` running Indexed
//! Jobs; Nodes as the kubelet reports them (~3.5 KB each: cloud labels, capacity, conditions,
//! addresses, node info, images); `--pods-per-node` bound Running pods per node, each a pod of
//! one of the Jobs as the Job controller, kube-scheduler and the kubelet leave it (~4 KB:
//! labels, annotations, the controller ownerReference, `managedFields`, env, volumes, a
//! cpu/memory request, container statuses). Pods fill the nodes in order, so each Job's pods
//! sit on consecutive nodes, as a topology-aware placement leaves them.
//!
//! Paginated lists: the fake computes every page of a list from scratch over the whole
//! collection (its full state, then the selectors over every remaining object), so the 300
//! pages of a 150,000-pod list take minutes, far slower than the real API server's watch cache,
//! and would measure the fake rather than its client. So `pods` and `nodes` lists with a
//! `limit` are answered by [`Pages`] here: the first page lists the collection once from the
//! fake (same selectors, in pages of 5,000) and keeps that snapshot; its pages carry continue
//! tokens into it, all at the snapshot's resourceVersion, as the real server's pages are. A fresh
//! list reuses the snapshot only while the fake's resourceVersion has not moved since (so it is
//! exactly the most recent state); anything else (watches, other kinds, `resourceVersion`
//! options) goes to the fake as is. The lists kube-tas's watches start with ([`WARM`]) are
//! snapshotted before the server listens, so a client's first page is not slowed either.
//!
//! Once the fake is filled it listens on `--listen`, writes `--kubeconfig-out` (server
//! `http://ADDR`, no auth; written to a temporary name then renamed, so a reader never sees half
//! a file) and prints `serving N nodes, M pods on ADDR` to stderr. It runs until killed.
//! `POST /fake/compact` forgets the history as a compaction does: every open watch ends with
//! 410 Gone, so its client lists the whole collection again.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/common/fake_apiserver.rs"]
mod fake_apiserver;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use clap::Parser;
use fake_apiserver::FakeApiServer;
use kube_tas::bench::requests::{fake_uid as uid, name_suffix as suffix};
use kube_tas::keys::{HOSTNAME_LABEL, JOB_COMPLETION_INDEX, PODSET_PREFERRED_TOPOLOGY};
use kube_tas::keys::{QUEUE_NAME_LABEL, STAMP_POD_GROUP_TOTAL_COUNT, STAMP_QUEUE_NAME};
use kube_tas::synthetic::{BLOCK_LABEL, CLUSTER_QUEUE_NAME, FLAVOR_NAME, LOCAL_QUEUE_NAME};
use kube_tas::synthetic::{NAMESPACE, NODE_GROUP_LABEL, NODE_GROUP_VALUE, RACK_LABEL};
use kube_tas::synthetic::{SyntheticCluster, TOPOLOGY_NAME};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tower::ServiceExt as _;

/// Serve a generated cluster from the fake API server over loopback HTTP.
#[derive(Debug, Parser)]
#[command(name = "fake-apiserver")]
struct Args {
    /// Number of blocks.
    #[arg(long, default_value_t = 15)]
    blocks: u32,
    /// Racks per block.
    #[arg(long, default_value_t = 25)]
    racks: u32,
    /// Hosts per rack.
    #[arg(long, default_value_t = 40)]
    hosts: u32,
    /// Bound Running pods per node (0: nodes only).
    #[arg(long, default_value_t = 10)]
    pods_per_node: u32,
    /// Running Jobs the pods belong to (at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// Address to listen on (port 0: any free port; the kubeconfig names the real one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write the kubeconfig that points at this server.
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: PathBuf,
}

/// `POST` here forgets the fake's history, as an etcd compaction does: every open watch ends
/// with 410 Gone and its client lists again (to measure a relist under load).
const COMPACT_ROUTE: &str = "/fake/compact";

/// Allocatable CPU of a node, in millicores (a 32-core machine less the kubelet's reserve).
const NODE_CPU_MILLIS: u32 = 31_850;
/// CPU each pod requests, in millicores.
const POD_CPU_MILLIS: u32 = 2_000;
/// When everything was created.
const CREATED: &str = "2026-01-01T00:00:00Z";
/// When the pods started.
const STARTED: &str = "2026-01-01T00:05:00Z";
const IMAGE: &str = "registry.example.com/ml/trainer:2026.01.3";
const IMAGE_DIGEST: &str =
    "sha256:9f2d4c1e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e";
const METRICS_IMAGE: &str = "gke.gcr.io/gke-metrics-agent:1.14.3-gke.0";
const METRICS_DIGEST: &str =
    "sha256:0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
const PAUSE_DIGEST: &str =
    "sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a";

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake-apiserver: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let started = Instant::now();
    let fake = FakeApiServer::new();
    let shape = SyntheticCluster {
        blocks: args.blocks,
        racks_per_block: args.racks,
        hosts_per_rack: args.hosts,
        ..SyntheticCluster::default()
    };
    let nodes = shape.node_count() as u64;
    let pods = nodes * u64::from(args.pods_per_node);
    let per_job = pods.div_ceil(u64::from(args.jobs)).max(1);
    for object in queue_objects(nodes) {
        fake.apply(object);
    }
    let jobs: Vec<JobRef> = (0..args.jobs)
        .map(|j| {
            let name = format!("train-{j:03}");
            let uid = uid(&format!("job/{name}"));
            let count = per_job.min(pods.saturating_sub(u64::from(j) * per_job));
            fake.apply(job(&name, &uid, count));
            JobRef { name, uid, count }
        })
        .collect();
    let (mut node_index, mut pod_index) = (0u64, 0u64);
    for block in 0..args.blocks {
        for rack in 0..args.racks {
            for host in 0..args.hosts {
                let name = shape.node_name(block, rack, host);
                fake.apply(node(&name, node_index, block, rack));
                for slot in 0..args.pods_per_node {
                    let job = &jobs[(pod_index / per_job) as usize];
                    let index = pod_index % per_job;
                    fake.apply(pod(job, index, &name, node_index, slot));
                    pod_index += 1;
                }
                node_index += 1;
            }
        }
    }
    let router = Pages::router(&fake).route(
        COMPACT_ROUTE,
        axum::routing::post({
            let fake = fake.clone();
            move || async move {
                fake.compact();
                StatusCode::NO_CONTENT
            }
        }),
    );
    for uri in WARM {
        let request = Request::get(*uri).body(Body::empty());
        let request = request.map_err(|e| format!("warm-up request {uri}: {e}"))?;
        let response = router.clone().oneshot(request).await;
        let status = response.map_or(StatusCode::INTERNAL_SERVER_ERROR, |r| r.status());
        if status != StatusCode::OK {
            return Err(format!("warm-up list {uri} answered {status}"));
        }
    }
    let filled = started.elapsed();

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("listener address: {e}"))?;
    write_kubeconfig(&args.kubeconfig_out, addr)?;
    eprintln!(
        "serving {nodes} nodes, {pods} pods on {addr} (filled in {:.1} s)",
        filled.as_secs_f64()
    );
    axum::serve(listener, router)
        .await
        .map_err(|e| format!("serving: {e}"))
}

/// A kubeconfig naming `http://ADDR`, no credentials.
fn write_kubeconfig(path: &Path, addr: SocketAddr) -> Result<(), String> {
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: http://{addr}
users:
- name: fake
  user: {{}}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: {NAMESPACE}
current-context: fake
"
    );
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The node's internal IP: one /16 per 256 × 256 nodes.
fn node_ip(node_index: u64) -> String {
    format!(
        "10.{}.{}.{}",
        128 + node_index / 65_536,
        (node_index / 256) % 256,
        node_index % 256
    )
}

/// The Topology, ResourceFlavor, ClusterQueue (quota: the whole cluster) and LocalQueue.
fn queue_objects(nodes: u64) -> Vec<Value> {
    let cpu = nodes * u64::from(NODE_CPU_MILLIS) / 1000;
    let memory = nodes * 120;
    vec![
        json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                "metadata": { "name": TOPOLOGY_NAME },
                "spec": { "levels": [{ "nodeLabel": BLOCK_LABEL }, { "nodeLabel": RACK_LABEL },
                                     { "nodeLabel": HOSTNAME_LABEL }] } }),
        json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": { "name": FLAVOR_NAME },
                "spec": { "topologyName": TOPOLOGY_NAME,
                          "nodeLabels": { NODE_GROUP_LABEL: NODE_GROUP_VALUE } } }),
        json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": { "name": CLUSTER_QUEUE_NAME },
                "spec": { "namespaceSelector": {}, "resourceGroups": [{
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{ "name": FLAVOR_NAME, "resources": [
                        { "name": "cpu", "nominalQuota": cpu.to_string() },
                        { "name": "memory", "nominalQuota": format!("{memory}Gi") }] }] }] } }),
        json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": { "name": LOCAL_QUEUE_NAME, "namespace": NAMESPACE },
                "spec": { "clusterQueue": CLUSTER_QUEUE_NAME } }),
    ]
}

struct JobRef {
    name: String,
    uid: String,
    /// Its pods (parallelism and completions).
    count: u64,
}

/// The pod template shared by a Job and its pods (before the controller's additions).
fn template_spec() -> Value {
    json!({
        "containers": [{
            "name": "main",
            "image": IMAGE,
            "command": ["/usr/bin/python3", "-m", "trainer.main"],
            "env": [
                { "name": "NODE_NAME", "valueFrom": { "fieldRef": { "apiVersion": "v1",
                  "fieldPath": "spec.nodeName" } } },
                { "name": "OMP_NUM_THREADS", "value": "2" }
            ],
            "ports": [{ "name": "nccl", "containerPort": 29500, "protocol": "TCP" }],
            "resources": {
                "requests": { "cpu": format!("{POD_CPU_MILLIS}m"), "memory": "8Gi" },
                "limits": { "memory": "8Gi" }
            },
            "volumeMounts": [{ "name": "scratch", "mountPath": "/scratch" }],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"
        }],
        "volumes": [{ "name": "scratch", "emptyDir": { "sizeLimit": "20Gi" } }],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler"
    })
}

/// A running Indexed Job of `count` pods, queued to the LocalQueue, preferring one rack.
fn job(name: &str, uid: &str, count: u64) -> Value {
    let selector = json!({ "matchLabels": { "batch.kubernetes.io/controller-uid": uid } });
    let mut template_labels = json!({ QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME, "app": "trainer" });
    template_labels["batch.kubernetes.io/controller-uid"] = uid.into();
    template_labels["batch.kubernetes.io/job-name"] = name.into();
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name, "namespace": NAMESPACE, "uid": uid, "creationTimestamp": CREATED,
            "labels": { QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME, "app": "trainer" },
            "annotations": { "kueue.x-k8s.io/job-min-parallelism": count.to_string() }
        },
        "spec": {
            "parallelism": count, "completions": count, "completionMode": "Indexed",
            "backoffLimit": 6, "suspend": false, "manualSelector": false,
            "podReplacementPolicy": "TerminatingOrFailed",
            "selector": selector,
            "template": {
                "metadata": { "labels": template_labels,
                              "annotations": { PODSET_PREFERRED_TOPOLOGY: RACK_LABEL } },
                "spec": template_spec()
            }
        },
        "status": { "active": count, "ready": count, "startTime": CREATED,
                    "uncountedTerminatedPods": {}, "terminating": 0 }
    })
}

/// A Node as the kubelet and the cloud controller report it.
fn node(name: &str, node_index: u64, block: u32, rack: u32) -> Value {
    let ip = node_ip(node_index);
    let instance_id = (7_000_000_000_000_000_000u64 + node_index).to_string();
    let csi_node_id = format!(
        "{{\"pd.csi.storage.gke.io\":\"projects/ml-prod/zones/us-central1-a/instances/{name}\"}}"
    );
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({ "type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": STARTED, "lastTransitionTime": CREATED })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid(&format!("node/{name}")),
            "creationTimestamp": CREATED,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": "n2-standard-32",
                "beta.kubernetes.io/os": "linux",
                "cloud.google.com/gke-nodepool": format!("pool-{block:04}"),
                "cloud.google.com/gke-os-distribution": "cos",
                "cloud.google.com/machine-family": "n2",
                "failure-domain.beta.kubernetes.io/region": "us-central1",
                "failure-domain.beta.kubernetes.io/zone": "us-central1-a",
                "kubernetes.io/arch": "amd64",
                HOSTNAME_LABEL: name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "n2-standard-32",
                "topology.kubernetes.io/region": "us-central1",
                "topology.kubernetes.io/zone": "us-central1-a",
                BLOCK_LABEL: format!("block-{block:04}"),
                RACK_LABEL: format!("rack-{block:04}-{rack:04}"),
                NODE_GROUP_LABEL: NODE_GROUP_VALUE
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "container.googleapis.com/instance_id": instance_id,
                "csi.volume.kubernetes.io/nodeid": csi_node_id
            }
        },
        "spec": {
            "podCIDR": format!("10.{}.{}.0/24", node_index / 256, node_index % 256),
            "podCIDRs": [format!("10.{}.{}.0/24", node_index / 256, node_index % 256)],
            "providerID": format!("gce://ml-prod/us-central1-a/{name}")
        },
        "status": {
            "capacity": { "cpu": "32", "ephemeral-storage": "98831908Ki", "hugepages-1Gi": "0",
                          "hugepages-2Mi": "0", "memory": "131890860Ki", "pods": "110" },
            "allocatable": { "cpu": format!("{NODE_CPU_MILLIS}m"),
                             "ephemeral-storage": "47060071478", "hugepages-1Gi": "0",
                             "hugepages-2Mi": "0", "memory": "125491372Ki", "pods": "110" },
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                          "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                          "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID",
                          "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady",
                          "kubelet is posting ready status")
            ],
            "addresses": [{ "type": "InternalIP", "address": ip },
                          { "type": "Hostname", "address": name }],
            "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": uid(&format!("boot/{name}")),
                "containerRuntimeVersion": "containerd://1.7.24",
                "kernelVersion": "6.6.56+",
                "kubeProxyVersion": "v1.33.1-gke.1000",
                "kubeletVersion": "v1.33.1-gke.1000",
                "machineID": format!("{:032x}", u128::from(node_index) * 0x9e37_79b9_7f4a_7c15),
                "operatingSystem": "linux",
                "osImage": "Container-Optimized OS from Google",
                "systemUUID": uid(&format!("system/{name}"))
            },
            "images": [
                { "names": [format!("{IMAGE}@{IMAGE_DIGEST}"), IMAGE],
                  "sizeBytes": 4_312_020_114u64 },
                { "names": [format!("{METRICS_IMAGE}@{METRICS_DIGEST}"), METRICS_IMAGE],
                  "sizeBytes": 84_201_117 },
                { "names": [format!("{PAUSE_IMAGE}@{PAUSE_DIGEST}"), PAUSE_IMAGE],
                  "sizeBytes": 320_368 }
            ]
        }
    })
}

/// Completion index `index` of `job`, bound to `node` and Running, as the Job controller,
/// kube-scheduler and the kubelet leave it.
fn pod(job: &JobRef, index: u64, node: &str, node_index: u64, slot: u32) -> Value {
    let name = format!("{}-{index}-{}", job.name, suffix(index));
    let mut spec = template_spec();
    spec["nodeName"] = node.into();
    spec["hostname"] = format!("{}-{index}", job.name).into();
    spec["subdomain"] = job.name.clone().into();
    spec["serviceAccountName"] = "default".into();
    spec["serviceAccount"] = "default".into();
    spec["priority"] = 0.into();
    spec["enableServiceLinks"] = true.into();
    spec["preemptionPolicy"] = "PreemptLowerPriority".into();
    spec["nodeSelector"] = json!({ NODE_GROUP_LABEL: NODE_GROUP_VALUE });
    spec["tolerations"] = json!([
        { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
          "tolerationSeconds": 300 },
        { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
          "tolerationSeconds": 300 }
    ]);
    let index_path = format!("metadata.annotations['{JOB_COMPLETION_INDEX}']");
    let index_env = json!({ "name": "JOB_COMPLETION_INDEX", "valueFrom": { "fieldRef": {
        "apiVersion": "v1", "fieldPath": index_path } } });
    if let Some(env) = spec["containers"][0]["env"].as_array_mut() {
        env.push(index_env);
    }
    let condition = |kind: &str| {
        json!({ "type": kind, "status": "True", "lastProbeTime": null,
                "lastTransitionTime": STARTED })
    };
    let pod_ip = format!("10.{}.{}.{}", node_index / 256, node_index % 256, 2 + slot);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": format!("{}-{index}-", job.name),
            "namespace": NAMESPACE,
            "uid": uid(&format!("{}/{index}", job.uid)),
            "creationTimestamp": CREATED,
            "labels": {
                "app": "trainer",
                "batch.kubernetes.io/controller-uid": job.uid,
                "batch.kubernetes.io/job-name": job.name,
                "controller-uid": job.uid,
                "job-name": job.name,
                JOB_COMPLETION_INDEX: index.to_string(),
                QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME
            },
            "annotations": {
                JOB_COMPLETION_INDEX: index.to_string(),
                PODSET_PREFERRED_TOPOLOGY: RACK_LABEL,
                STAMP_QUEUE_NAME: LOCAL_QUEUE_NAME,
                STAMP_POD_GROUP_TOTAL_COUNT: job.count.to_string()
            },
            "ownerReferences": [{ "apiVersion": "batch/v1", "kind": "Job", "name": job.name,
                                  "uid": job.uid, "controller": true,
                                  "blockOwnerDeletion": true }],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "managedFields": [
                { "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                  "time": CREATED, "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:metadata": { "f:annotations": { ".": {} }, "f:finalizers": { ".": {} },
                                    "f:generateName": {}, "f:labels": { ".": {} },
                                    "f:ownerReferences": { ".": {} } },
                    "f:spec": { "f:containers": { "k:{\"name\":\"main\"}": { ".": {},
                        "f:command": {}, "f:env": { ".": {} }, "f:image": {}, "f:name": {},
                        "f:resources": { ".": {}, "f:limits": {}, "f:requests": {} } } },
                      "f:hostname": {}, "f:subdomain": {}, "f:volumes": { ".": {} } } } },
                { "manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                  "time": STARTED, "fieldsType": "FieldsV1", "subresource": "status",
                  "fieldsV1": { "f:status": { "f:conditions": { ".": {} },
                    "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {},
                    "f:podIP": {}, "f:startTime": {} } } }
            ]
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": [condition("Initialized"),
                           condition("Ready"), condition("ContainersReady"),
                           condition("PodScheduled")],
            "hostIP": node_ip(node_index),
            "hostIPs": [{ "ip": node_ip(node_index) }],
            "podIP": pod_ip,
            "podIPs": [{ "ip": pod_ip }],
            "startTime": STARTED,
            "qosClass": "Burstable",
            "containerStatuses": [{
                "name": "main", "ready": true, "started": true, "restartCount": 0,
                "image": IMAGE, "imageID": format!("{IMAGE}@{IMAGE_DIGEST}"),
                "containerID": format!("containerd://{:016x}{:016x}{:016x}{:016x}",
                    node_index, u64::from(slot), index, node_index ^ 0x5eed),
                "state": { "running": { "startedAt": STARTED } },
                "lastState": {}
            }]
        }
    })
}

// Paginated lists from a snapshot ---------------------------------------------------------

/// The first pages of the lists kube-tas's watches make (`src/cluster/live/kinds.rs`), as
/// kube-runtime's watcher sends them; snapshotted before serving.
const WARM: &[&str] = &[
    "/api/v1/nodes?limit=500",
    "/api/v1/pods?fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded%2C\
     status.phase%21%3DFailed&limit=500",
];

/// Items per page when the snapshot is read from the fake.
const FILL_PAGE: usize = 5000;

/// Collections whose paginated lists are served from a snapshot.
const PAGED: &[&str] = &["/api/v1/pods", "/api/v1/nodes"];

/// A whole list as the fake answered it.
struct Snapshot {
    kind: String,
    api_version: String,
    resource_version: String,
    items: Vec<Box<RawValue>>,
    /// No selector: pages carry `remainingItemCount`, as on the real server.
    unselected: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FullList {
    kind: String,
    api_version: String,
    metadata: FullListMeta,
    items: Vec<Box<RawValue>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FullListMeta {
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: String,
}

/// Snapshots by collection path and selectors, at their resourceVersion.
#[derive(Clone)]
struct Pages {
    fake: FakeApiServer,
    snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>,
}

impl Pages {
    /// The fake's router behind the snapshot layer.
    fn router(fake: &FakeApiServer) -> Router {
        let pages = Pages {
            fake: fake.clone(),
            snapshots: Arc::default(),
        };
        fake.router()
            .layer(middleware::from_fn_with_state(pages, paginate))
    }

    fn get(&self, key: &str) -> Option<Arc<Snapshot>> {
        let snapshots = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        snapshots.get(key).cloned()
    }

    fn put(&self, key: String, snapshot: Arc<Snapshot>) {
        let mut snapshots = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        snapshots.insert(key, snapshot);
    }
}

/// Serves a `limit`ed list of a [`PAGED`] collection from a snapshot; everything else passes.
async fn paginate(State(pages): State<Pages>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if request.method() != Method::GET || !PAGED.contains(&path.as_str()) {
        return next.run(request).await;
    }
    let Ok(Query(q)) = Query::<HashMap<String, String>>::try_from_uri(request.uri()) else {
        return next.run(request).await;
    };
    let param = |name: &str| q.get(name).map_or("", String::as_str);
    let limit = param("limit").parse::<usize>().unwrap_or(0);
    let plain = param("resourceVersion").is_empty() && param("resourceVersionMatch").is_empty();
    if matches!(param("watch"), "true" | "1") || limit == 0 || !plain {
        return next.run(request).await;
    }
    let (labels, fields) = (param("labelSelector"), param("fieldSelector"));
    let key = format!("{path}?{labels}&{fields}");
    let (snapshot, offset) = match param("continue").split('|').collect::<Vec<_>>()[..] {
        [""] => {
            let current = pages.fake.resource_version().to_string();
            match pages.get(&key).filter(|s| s.resource_version == current) {
                Some(snapshot) => (snapshot, 0),
                None => {
                    let snapshot = match snapshot_of(next, &path, labels, fields).await {
                        Ok(snapshot) => Arc::new(snapshot),
                        Err(response) => return response,
                    };
                    pages.put(key, snapshot.clone());
                    (snapshot, 0)
                }
            }
        }
        ["page", rv, offset] => {
            let found = pages.get(&key).filter(|s| s.resource_version == rv);
            match (found, offset.parse::<usize>()) {
                (Some(snapshot), Ok(offset)) => (snapshot, offset),
                _ => return expired(),
            }
        }
        // A continue token of the fake's own (this layer was not in the way then).
        _ => return next.run(request).await,
    };
    page(&snapshot, offset, limit)
}

/// Lists the whole collection from the fake (same selectors), in pages of [`FILL_PAGE`]
/// (a page of the fake costs a pass over the whole collection, a whole list at once costs
/// a copy of it).
async fn snapshot_of(
    next: Next,
    path: &str,
    labels: &str,
    fields: &str,
) -> Result<Snapshot, Response> {
    let mut query = Vec::new();
    for (name, value) in [("labelSelector", labels), ("fieldSelector", fields)] {
        if !value.is_empty() {
            query.push(format!("{name}={}", encode(value)));
        }
    }
    query.push(format!("limit={FILL_PAGE}"));
    let query = query.join("&");
    let mut snapshot: Option<Snapshot> = None;
    let mut token = String::new();
    loop {
        let mut uri = format!("{path}?{query}");
        if !token.is_empty() {
            uri.push_str(&format!("&continue={}", encode(&token)));
        }
        let request = Request::get(uri)
            .body(Body::empty())
            .expect("a path and an encoded query");
        let response = next.clone().run(request).await;
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        if parts.status != StatusCode::OK {
            return Err(Response::from_parts(parts, Body::from(bytes)));
        }
        let list: FullList = serde_json::from_slice(&bytes).map_err(|e| {
            let message = format!("fake-apiserver: the fake's list did not parse: {e}");
            json_response(StatusCode::INTERNAL_SERVER_ERROR, message.into_bytes())
        })?;
        token = list.metadata.continue_token;
        match &mut snapshot {
            Some(s) => s.items.extend(list.items),
            None => {
                snapshot = Some(Snapshot {
                    kind: list.kind,
                    api_version: list.api_version,
                    resource_version: list.metadata.resource_version,
                    items: list.items,
                    unselected: labels.is_empty() && fields.is_empty(),
                });
            }
        }
        if token.is_empty() {
            return Ok(snapshot.expect("set by the first page"));
        }
    }
}

/// `limit` items of `snapshot` from `offset`, with a continue token when more remain.
fn page(snapshot: &Snapshot, offset: usize, limit: usize) -> Response {
    let items = snapshot.items.get(offset..).unwrap_or_default();
    let (items, remaining) = items.split_at(limit.min(items.len()));
    let rv = &snapshot.resource_version;
    let mut metadata = serde_json::json!({ "resourceVersion": rv });
    if !remaining.is_empty() {
        metadata["continue"] = format!("page|{rv}|{}", offset + items.len()).into();
        if snapshot.unselected {
            metadata["remainingItemCount"] = remaining.len().into();
        }
    }
    let head = serde_json::json!({ "kind": snapshot.kind, "apiVersion": snapshot.api_version,
                                   "metadata": metadata });
    let mut body = serde_json::to_vec(&head).unwrap_or_default();
    body.pop(); // the closing brace: the items follow
    body.extend_from_slice(br#","items":["#);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item.get().as_bytes());
    }
    body.extend_from_slice(b"]}");
    json_response(StatusCode::OK, body)
}

/// The real server's answer to a continue token it no longer has.
fn expired() -> Response {
    let status = serde_json::json!({ "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": "Expired", "code": 410,
        "message": "The provided continue parameter is too old to display a consistent list \
                    result. You can start a new list without the continue parameter." });
    json_response(
        StatusCode::GONE,
        serde_json::to_vec(&status).unwrap_or_default(),
    )
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let json = HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, json);
    response
}

/// Percent-encodes a query value (everything but unreserved characters).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
