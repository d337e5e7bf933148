//! Synthetic clusters for benchmarks, load tests and demos, written as the same multi-document
//! manifests YAML that `kube-tas simulate` and `--cluster` read (`kubectl get -o yaml` shape).
//!
//! Everything here is pure and deterministic: the same [`SyntheticCluster`] (including its
//! `seed`) always gives byte-identical text, and nothing touches the file system. Every
//! document starts with `---`, so outputs can be concatenated
//! (`cluster.to_yaml() + &job_yaml(..)`).
//!
//! The cluster has one 3-level Topology `default` (block, rack, hostname), one ResourceFlavor
//! `tas-flavor` selecting `node-group: tas`, the ClusterQueue `tas-cluster-queue` (quota = the
//! cluster's total cpu, memory and `nvidia.com/gpu`) and the LocalQueue
//! `default/tas-user-queue`. Nodes are named like GKE nodes
//! (`gke-cluster-pool-<block>-<rack id>-<host>`); a chosen share of them run one bound non-TAS
//! pod that uses some of their CPU.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::keys::{HOSTNAME_LABEL, QUEUE_NAME_LABEL};

/// Node label of the outermost level (block).
pub const BLOCK_LABEL: &str = "cloud.provider.com/topology-block";
/// Node label of the middle level (rack).
pub const RACK_LABEL: &str = "cloud.provider.com/topology-rack";
/// Name of the generated Topology.
pub const TOPOLOGY_NAME: &str = "default";
/// Name of the generated ResourceFlavor.
pub const FLAVOR_NAME: &str = "tas-flavor";
/// Name of the generated ClusterQueue.
pub const CLUSTER_QUEUE_NAME: &str = "tas-cluster-queue";
/// Name of the generated LocalQueue (in [`NAMESPACE`]).
pub const LOCAL_QUEUE_NAME: &str = "tas-user-queue";
/// Namespace of the LocalQueue, the busy pods and the jobs.
pub const NAMESPACE: &str = "default";
/// The flavor's node label key; every generated node carries it with [`NODE_GROUP_VALUE`].
pub const NODE_GROUP_LABEL: &str = "node-group";
/// The flavor's node label value.
pub const NODE_GROUP_VALUE: &str = "tas";
/// The GPU resource name.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Container image of generated pods.
const IMAGE: &str = "registry.k8s.io/pause:3.10";

/// The labels a cloud provider puts on a GPU node beside the topology labels (15: architecture,
/// OS, instance type, region and zone in both spellings, node pool, boot disk, runtime, OS
/// distribution, machine family), for a node of block `block` (its zone and node pool follow
/// the block). Benches give them to their nodes so label reads cost what they cost in a
/// cluster.
pub fn cloud_node_labels(block: usize) -> Vec<(&'static str, String)> {
    let zone = format!("us-central1-{}", ["a", "b", "c"][block % 3]);
    let fixed = [
        ("beta.kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/instance-type", "a3-highgpu-8g"),
        ("beta.kubernetes.io/os", "linux"),
        ("cloud.google.com/gke-boot-disk", "pd-balanced"),
        ("cloud.google.com/gke-container-runtime", "containerd"),
        ("cloud.google.com/gke-os-distribution", "cos"),
        ("cloud.google.com/machine-family", "a3"),
        ("failure-domain.beta.kubernetes.io/region", "us-central1"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", "a3-highgpu-8g"),
        ("topology.kubernetes.io/region", "us-central1"),
    ];
    let mut labels: Vec<(&'static str, String)> =
        fixed.iter().map(|&(k, v)| (k, v.to_string())).collect();
    labels.push((
        "cloud.google.com/gke-nodepool",
        format!("a3-pool-{block:04}"),
    ));
    labels.push(("failure-domain.beta.kubernetes.io/zone", zone.clone()));
    labels.push(("topology.kubernetes.io/zone", zone));
    labels
}

/// Shape of a synthetic cluster: `blocks × racks_per_block × hosts_per_rack` identical nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticCluster {
    /// Number of blocks (outermost level).
    pub blocks: u32,
    /// Racks in each block.
    pub racks_per_block: u32,
    /// Hosts (nodes) in each rack.
    pub hosts_per_rack: u32,
    /// Allocatable CPU of each node, in whole cores.
    pub cpu_per_node: u32,
    /// Allocatable memory of each node, in GiB.
    pub memory_gi: u32,
    /// Allocatable `nvidia.com/gpu` of each node; 0 leaves the resource out of allocatable.
    pub gpus_per_node: u32,
    /// Allocatable `pods` of each node.
    pub pods_per_node: u32,
    /// Share of nodes (0..=100 %, larger values count as 100) that run one bound, Running,
    /// non-TAS pod requesting between 250m and half the node's CPU. Exactly
    /// `nodes × percent / 100` nodes (rounded down) are chosen, spread by `seed`.
    pub busy_fraction_percent: u32,
    /// Seed for node ids, the choice of busy nodes and their CPU use.
    pub seed: u64,
}

impl Default for SyntheticCluster {
    /// A small cluster: 2 blocks × 2 racks × 2 hosts of 8 cpu, 32Gi, 110 pods, no GPUs,
    /// no busy nodes.
    fn default() -> Self {
        Self {
            blocks: 2,
            racks_per_block: 2,
            hosts_per_rack: 2,
            cpu_per_node: 8,
            memory_gi: 32,
            gpus_per_node: 0,
            pods_per_node: 110,
            busy_fraction_percent: 0,
            seed: 0,
        }
    }
}

impl SyntheticCluster {
    /// Number of nodes the cluster has.
    pub fn node_count(&self) -> u128 {
        u128::from(self.blocks) * u128::from(self.racks_per_block) * u128::from(self.hosts_per_rack)
    }

    /// Number of nodes that get a busy pod (see [`Self::busy_fraction_percent`]).
    pub fn busy_node_count(&self) -> u128 {
        self.node_count() * u128::from(self.busy_fraction_percent.min(100)) / 100
    }

    /// The name of the node at (block, rack, host), all 0-based, e.g.
    /// `gke-cluster-pool-0002-9e3779bb-0003`. The middle part is a seed-dependent rack id,
    /// unique per rack.
    pub fn node_name(&self, block: u32, rack: u32, host: u32) -> String {
        let global_rack = u64::from(block)
            .wrapping_mul(u64::from(self.racks_per_block))
            .wrapping_add(u64::from(rack));
        // XOR with a per-seed mask is a bijection, so distinct racks keep distinct ids.
        let rack_id = (splitmix64(self.seed) as u32) ^ (global_rack as u32);
        format!("gke-cluster-pool-{block:04}-{rack_id:08x}-{host:04}")
    }

    /// The whole cluster as manifests: Topology, ResourceFlavor, ClusterQueue, LocalQueue, the
    /// Nodes (block by block, rack by rack), then the busy pods.
    pub fn to_yaml(&self) -> String {
        let nodes = self.node_count();
        // Roughly 400 bytes per node; capped so absurd shapes do not reserve absurd memory.
        let estimate = nodes.saturating_mul(450).min(256 << 20) as usize;
        let mut out = String::with_capacity(estimate + 2048);
        self.write_queue_objects(&mut out);

        let mut rng = splitmix64(self.seed ^ 0x5eed_b05e_5eed_b05e);
        let mut busy_left = self.busy_node_count();
        let mut nodes_left = nodes;
        let mut busy: Vec<(String, u32)> = Vec::new();
        for block in 0..self.blocks {
            for rack in 0..self.racks_per_block {
                for host in 0..self.hosts_per_rack {
                    let name = self.node_name(block, rack, host);
                    self.write_node(&mut out, &name, block, rack);
                    // Selection sampling (Knuth's algorithm S): exactly `busy_left` of the
                    // remaining nodes are chosen, each with equal chance.
                    rng = splitmix64(rng);
                    if nodes_left > 0 && u128::from(rng) % nodes_left < busy_left {
                        busy_left -= 1;
                        rng = splitmix64(rng);
                        busy.push((name, self.busy_cpu_millis(rng)));
                    }
                    nodes_left = nodes_left.saturating_sub(1);
                }
            }
        }
        for (node, millis) in &busy {
            write_busy_pod(&mut out, node, *millis);
        }
        out
    }

    /// CPU request of a busy pod: a multiple of 250m between 250m and half the node's CPU
    /// (or exactly half when that is below 250m).
    fn busy_cpu_millis(&self, random: u64) -> u32 {
        let half = self.cpu_per_node.saturating_mul(500);
        let steps = half / 250;
        if steps == 0 {
            return half;
        }
        (random % u64::from(steps)) as u32 * 250 + 250
    }

    fn write_queue_objects(&self, out: &mut String) {
        let nodes = self.node_count();
        let total_cpu = nodes * u128::from(self.cpu_per_node);
        let total_memory = nodes * u128::from(self.memory_gi);
        let total_gpu = nodes * u128::from(self.gpus_per_node);
        let _ = write!(
            out,
            "---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: {TOPOLOGY_NAME}
spec:
  levels:
  - nodeLabel: {BLOCK_LABEL}
  - nodeLabel: {RACK_LABEL}
  - nodeLabel: {HOSTNAME_LABEL}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: {FLAVOR_NAME}
spec:
  topologyName: {TOPOLOGY_NAME}
  nodeLabels:
    {NODE_GROUP_LABEL}: {NODE_GROUP_VALUE}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {CLUSTER_QUEUE_NAME}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources:
    - cpu
    - memory
    - {GPU_RESOURCE}
    flavors:
    - name: {FLAVOR_NAME}
      resources:
      - name: cpu
        nominalQuota: '{total_cpu}'
      - name: memory
        nominalQuota: {total_memory}Gi
      - name: {GPU_RESOURCE}
        nominalQuota: '{total_gpu}'
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: {LOCAL_QUEUE_NAME}
  namespace: {NAMESPACE}
spec:
  clusterQueue: {CLUSTER_QUEUE_NAME}
"
        );
    }

    fn write_node(&self, out: &mut String, name: &str, block: u32, rack: u32) {
        let _ = write!(
            out,
            "---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    {BLOCK_LABEL}: block-{block:04}
    {RACK_LABEL}: rack-{block:04}-{rack:04}
    {HOSTNAME_LABEL}: {name}
    {NODE_GROUP_LABEL}: {NODE_GROUP_VALUE}
status:
  allocatable:
    cpu: '{cpu}'
    memory: {memory}Gi
    ephemeral-storage: 100Gi
",
            cpu = self.cpu_per_node,
            memory = self.memory_gi,
        );
        if self.gpus_per_node > 0 {
            let _ = writeln!(out, "    {GPU_RESOURCE}: '{}'", self.gpus_per_node);
        }
        let _ = write!(
            out,
            "    pods: '{}'
  conditions:
  - type: Ready
    status: 'True'
",
            self.pods_per_node
        );
    }
}

fn write_busy_pod(out: &mut String, node: &str, cpu_millis: u32) {
    let _ = write!(
        out,
        "---
apiVersion: v1
kind: Pod
metadata:
  name: busy-{node}
  namespace: {NAMESPACE}
spec:
  nodeName: {node}
  containers:
  - name: main
    image: {IMAGE}
    resources:
      requests:
        cpu: {cpu_millis}m
status:
  phase: Running
"
    );
}

/// A pending `batch/v1` Job in `default`, queued to `tas-user-queue`: Indexed, with
/// `parallelism = completions = pods`, one container requesting `cpu_millis_per_pod`
/// millicores, and the pod-template annotation `annotation_key: value` (for example
/// `kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack`). An empty
/// `annotation_key` gives a Job without annotations. Strings are quoted as needed, so any
/// input gives valid YAML.
pub fn job_yaml(
    name: &str,
    pods: u32,
    cpu_millis_per_pod: u32,
    annotation_key: &str,
    value: &str,
) -> String {
    let mut out = String::with_capacity(768);
    let _ = write!(
        out,
        "---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {NAMESPACE}
  labels:
    {QUEUE_NAME_LABEL}: {LOCAL_QUEUE_NAME}
spec:
  parallelism: {pods}
  completions: {pods}
  completionMode: Indexed
  template:
",
        name = yaml_str(name),
    );
    if !annotation_key.is_empty() {
        let _ = write!(
            out,
            "    metadata:
      annotations:
        {}: {}
",
            yaml_str(annotation_key),
            yaml_str(value)
        );
    }
    let _ = write!(
        out,
        "    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: {IMAGE}
        resources:
          requests:
            cpu: {cpu_millis_per_pod}m
"
    );
    out
}

/// `s` as a YAML scalar that always reads back as the same string: plain when it is an
/// identifier-like word that no YAML schema would read as a bool, null or number, otherwise
/// double-quoted with JSON-style escapes.
fn yaml_str(s: &str) -> Cow<'_, str> {
    const RESERVED: [&str; 14] = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "nan", "inf", "infinity",
        "none", "nil",
    ];
    let plain = s.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/'))
        && !RESERVED.contains(&s.to_ascii_lowercase().as_str());
    if plain {
        return Cow::Borrowed(s);
    }
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                let _ = write!(q, "\\u{:04x}", u32::from(c));
            }
            c => q.push(c),
        }
    }
    q.push('"');
    Cow::Owned(q)
}

/// SplitMix64: a tiny, well-mixed, deterministic step function.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{
        PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY, PODSET_UNCONSTRAINED_TOPOLOGY,
    };
    use crate::topology::node::{first_untolerated_taint, taint_to_string};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
    use serde_json::Value;
    use std::collections::{BTreeMap, BTreeSet};

    fn docs(yaml: &str) -> Vec<Value> {
        match serde_saphyr::from_multiple::<Value>(yaml) {
            Ok(d) => d,
            Err(e) => panic!("YAML does not parse: {e}\n{yaml}"),
        }
    }

    fn kinds(docs: &[Value]) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for d in docs {
            let kind = d["kind"].as_str().unwrap_or("<none>").to_string();
            *m.entry(kind).or_insert(0) += 1;
        }
        m
    }

    fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
        docs.iter().filter(|d| d["kind"] == kind).collect()
    }

    #[test]
    fn counts_per_kind() {
        let cases = [
            (SyntheticCluster::default(), 8, 0),
            (
                SyntheticCluster {
                    busy_fraction_percent: 50,
                    ..Default::default()
                },
                8,
                4,
            ),
            (
                SyntheticCluster {
                    busy_fraction_percent: 100,
                    ..Default::default()
                },
                8,
                8,
            ),
            (
                SyntheticCluster {
                    busy_fraction_percent: 250,
                    ..Default::default()
                },
                8,
                8,
            ),
            (
                SyntheticCluster {
                    blocks: 3,
                    racks_per_block: 5,
                    hosts_per_rack: 7,
                    busy_fraction_percent: 33,
                    seed: 7,
                    ..Default::default()
                },
                105,
                34,
            ),
            (
                SyntheticCluster {
                    blocks: 0,
                    ..Default::default()
                },
                0,
                0,
            ),
        ];
        for (c, nodes, busy) in cases {
            assert_eq!(c.node_count(), nodes as u128);
            assert_eq!(c.busy_node_count(), busy as u128, "{c:?}");
            let d = docs(&c.to_yaml());
            let k = kinds(&d);
            assert_eq!(k.get("Topology"), Some(&1));
            assert_eq!(k.get("ResourceFlavor"), Some(&1));
            assert_eq!(k.get("ClusterQueue"), Some(&1));
            assert_eq!(k.get("LocalQueue"), Some(&1));
            assert_eq!(k.get("Node").copied().unwrap_or(0), nodes, "{c:?}");
            assert_eq!(k.get("Pod").copied().unwrap_or(0), busy, "{c:?}");
        }
    }

    #[test]
    fn nodes_are_well_formed() {
        let c = SyntheticCluster {
            blocks: 2,
            racks_per_block: 3,
            hosts_per_rack: 4,
            gpus_per_node: 8,
            busy_fraction_percent: 40,
            seed: 42,
            ..Default::default()
        };
        let d = docs(&c.to_yaml());
        let mut names = BTreeSet::new();
        let mut racks = BTreeSet::new();
        for v in of_kind(&d, "Node") {
            let node: Node = match serde_json::from_value(v.clone()) {
                Ok(n) => n,
                Err(e) => panic!("not a Node: {e}"),
            };
            let name = node.metadata.name.clone().unwrap_or_default();
            assert!(name.starts_with("gke-cluster-pool-"), "{name}");
            let labels = node.metadata.labels.clone().unwrap_or_default();
            assert_eq!(labels.get(HOSTNAME_LABEL), Some(&name));
            assert_eq!(
                labels.get(NODE_GROUP_LABEL).map(String::as_str),
                Some("tas")
            );
            assert!(labels.contains_key(BLOCK_LABEL));
            racks.insert((labels[BLOCK_LABEL].clone(), labels[RACK_LABEL].clone()));
            let status = node.status.unwrap_or_default();
            let alloc = status.allocatable.unwrap_or_default();
            assert_eq!(alloc.get("cpu").map(|q| q.0.as_str()), Some("8"));
            assert_eq!(alloc.get("memory").map(|q| q.0.as_str()), Some("32Gi"));
            assert_eq!(alloc.get("pods").map(|q| q.0.as_str()), Some("110"));
            assert_eq!(alloc.get(GPU_RESOURCE).map(|q| q.0.as_str()), Some("8"));
            let ready = status.conditions.unwrap_or_default();
            assert!(
                ready
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            );
            assert!(names.insert(name), "duplicate node name");
        }
        assert_eq!(names.len(), 24);
        assert_eq!(racks.len(), 6);

        for v in of_kind(&d, "Pod") {
            let pod: Pod = match serde_json::from_value(v.clone()) {
                Ok(p) => p,
                Err(e) => panic!("not a Pod: {e}"),
            };
            let spec = pod.spec.unwrap_or_default();
            assert!(names.contains(spec.node_name.as_deref().unwrap_or_default()));
            assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Running"));
            let cpu = spec.containers[0]
                .resources
                .clone()
                .and_then(|r| r.requests);
            let cpu = cpu
                .and_then(|r| r.get("cpu").map(|q| q.0.clone()))
                .unwrap_or_default();
            let millis: u32 = cpu.trim_end_matches('m').parse().unwrap_or(0);
            assert!(
                (250..=4000).contains(&millis) && millis.is_multiple_of(250),
                "{cpu}"
            );
        }
    }

    #[test]
    fn no_gpu_key_without_gpus() {
        let yaml = SyntheticCluster::default().to_yaml();
        let d = docs(&yaml);
        for n in of_kind(&d, "Node") {
            assert!(n["status"]["allocatable"].get(GPU_RESOURCE).is_none());
        }
    }

    #[test]
    fn deterministic_per_seed() {
        let a = SyntheticCluster {
            busy_fraction_percent: 50,
            seed: 1,
            ..Default::default()
        };
        let b = SyntheticCluster {
            seed: 2,
            ..a.clone()
        };
        assert_eq!(a.to_yaml(), a.clone().to_yaml());
        assert_ne!(a.to_yaml(), b.to_yaml());
    }

    #[test]
    fn node_names_unique_for_any_seed() {
        for seed in [0, 1, u64::MAX, 0xdead_beef] {
            let c = SyntheticCluster {
                blocks: 4,
                racks_per_block: 9,
                hosts_per_rack: 3,
                seed,
                ..Default::default()
            };
            let mut names = BTreeSet::new();
            for b in 0..c.blocks {
                for r in 0..c.racks_per_block {
                    for h in 0..c.hosts_per_rack {
                        assert!(names.insert(c.node_name(b, r, h)));
                    }
                }
            }
        }
    }

    #[test]
    fn queue_objects_reference_each_other() {
        let c = SyntheticCluster {
            gpus_per_node: 4,
            ..Default::default()
        };
        let d = docs(&c.to_yaml());
        let topo = of_kind(&d, "Topology")[0];
        let levels: Vec<&str> = topo["spec"]["levels"].as_array().map_or(vec![], |l| {
            l.iter().filter_map(|x| x["nodeLabel"].as_str()).collect()
        });
        assert_eq!(levels, [BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL]);
        let rf = of_kind(&d, "ResourceFlavor")[0];
        assert_eq!(rf["spec"]["topologyName"], TOPOLOGY_NAME);
        assert_eq!(rf["spec"]["nodeLabels"][NODE_GROUP_LABEL], NODE_GROUP_VALUE);
        let cq = of_kind(&d, "ClusterQueue")[0];
        let rg = &cq["spec"]["resourceGroups"][0];
        assert_eq!(rg["flavors"][0]["name"], FLAVOR_NAME);
        assert_eq!(rg["coveredResources"].as_array().map(Vec::len), Some(3));
        assert_eq!(rg["flavors"][0]["resources"][0]["nominalQuota"], "64");
        assert_eq!(rg["flavors"][0]["resources"][2]["nominalQuota"], "32");
        let lq = of_kind(&d, "LocalQueue")[0];
        assert_eq!(lq["spec"]["clusterQueue"], CLUSTER_QUEUE_NAME);
        assert_eq!(lq["metadata"]["namespace"], NAMESPACE);
    }

    #[test]
    fn job_shapes() {
        let cases = [
            ("train", 40, 1000, PODSET_PREFERRED_TOPOLOGY, BLOCK_LABEL),
            ("rack", 12, 2000, PODSET_REQUIRED_TOPOLOGY, RACK_LABEL),
            ("true", 1, 500, PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
            ("odd \"name\"\n: x", 3, 0, "weird key: #", "8"),
        ];
        for (name, pods, millis, key, value) in cases {
            let yaml = job_yaml(name, pods, millis, key, value);
            let d = docs(&yaml);
            assert_eq!(d.len(), 1);
            assert_eq!(d[0]["metadata"]["name"], name);
            assert_eq!(
                d[0]["metadata"]["labels"][QUEUE_NAME_LABEL],
                LOCAL_QUEUE_NAME
            );
            assert_eq!(
                d[0]["spec"]["template"]["metadata"]["annotations"][key],
                value
            );
            let job: Job = match serde_json::from_value(d[0].clone()) {
                Ok(j) => j,
                Err(e) => panic!("not a Job: {e}\n{yaml}"),
            };
            let spec = job.spec.unwrap_or_default();
            assert_eq!(spec.parallelism, Some(pods as i32));
            assert_eq!(spec.completions, Some(pods as i32));
            assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
            let pod = spec.template.spec.unwrap_or_default();
            let req = pod.containers[0].resources.clone().and_then(|r| r.requests);
            assert_eq!(
                req.and_then(|r| r.get("cpu").map(|q| q.0.clone())),
                Some(format!("{millis}m"))
            );
        }
        let bare = docs(&job_yaml("plain", 2, 1000, "", "ignored"));
        assert!(bare[0]["spec"]["template"].get("metadata").is_none());
    }

    #[test]
    fn cluster_and_job_concatenate() {
        let c = SyntheticCluster::default();
        let yaml = c.to_yaml() + &job_yaml("j", 4, 1000, PODSET_REQUIRED_TOPOLOGY, RACK_LABEL);
        let k = kinds(&docs(&yaml));
        assert_eq!(k.get("Job"), Some(&1));
        assert_eq!(k.get("Node"), Some(&8));
    }

    #[test]
    fn yaml_str_quotes_when_needed() {
        let cases = [
            ("abc", "abc"),
            (
                "cloud.provider.com/topology-rack",
                "cloud.provider.com/topology-rack",
            ),
            ("true", "\"true\""),
            ("No", "\"No\""),
            ("8", "\"8\""),
            ("", "\"\""),
            ("a b", "\"a b\""),
            ("a\"b\\", "\"a\\\"b\\\\\""),
            ("x\u{7}", "\"x\\u0007\""),
        ];
        for (input, want) in cases {
            assert_eq!(yaml_str(input), want);
        }
    }

    // ---- the sample data centre in examples/ ----

    fn example_docs() -> BTreeMap<String, Vec<Value>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut files = BTreeMap::new();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => panic!("{}: {e}", dir.display()),
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => panic!("{}: {e}", path.display()),
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            let parsed = match serde_saphyr::from_multiple::<Value>(&text) {
                Ok(d) => d,
                Err(e) => panic!("{name}: {e}"),
            };
            files.insert(name, parsed);
        }
        files
    }

    #[test]
    fn examples_parse_and_count() {
        let files = example_docs();
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "00-topology.yaml",
                "10-nodes.yaml",
                "20-running.yaml",
                "30-jobs.yaml",
                "40-sets.yaml",
                "50-podgroups.yaml"
            ]
        );
        let count = |file: &str| kinds(&files[file]);
        let topo = count("00-topology.yaml");
        assert_eq!(topo.get("Topology"), Some(&1));
        assert_eq!(topo.get("ResourceFlavor"), Some(&2));
        assert_eq!(topo.get("ClusterQueue"), Some(&2));
        assert_eq!(topo.get("LocalQueue"), Some(&2));
        assert_eq!(
            count("10-nodes.yaml"),
            BTreeMap::from([("Node".to_string(), 40)])
        );
        let running = count("20-running.yaml");
        assert_eq!(running.keys().collect::<Vec<_>>(), ["Pod"]);
        assert_eq!(
            count("30-jobs.yaml"),
            BTreeMap::from([("Job".to_string(), 7)])
        );
        assert_eq!(
            count("40-sets.yaml"),
            BTreeMap::from([
                ("JobSet".to_string(), 1),
                ("LeaderWorkerSet".to_string(), 1)
            ])
        );
        assert_eq!(
            count("50-podgroups.yaml"),
            BTreeMap::from([
                ("CompositePodGroup".to_string(), 1),
                ("PodGroup".to_string(), 2),
                ("Pod".to_string(), 9)
            ])
        );
    }

    #[test]
    fn example_objects_are_well_formed() {
        let files = example_docs();
        let all: Vec<&Value> = files.values().flatten().collect();
        let mut nodes = BTreeMap::new();
        for v in all.iter().filter(|d| d["kind"] == "Node") {
            let node: Node = match serde_json::from_value((*v).clone()) {
                Ok(n) => n,
                Err(e) => panic!("not a Node: {e}"),
            };
            let name = node.metadata.name.clone().unwrap_or_default();
            let labels = node.metadata.labels.clone().unwrap_or_default();
            assert_eq!(labels.get(HOSTNAME_LABEL), Some(&name));
            for level in [BLOCK_LABEL, RACK_LABEL, NODE_GROUP_LABEL] {
                assert!(labels.contains_key(level), "{name} lacks {level}");
            }
            let status = node.status.clone().unwrap_or_default();
            let alloc = status.allocatable.unwrap_or_default();
            for r in ["cpu", "memory", "pods"] {
                assert!(alloc.contains_key(r), "{name} lacks allocatable {r}");
            }
            let conditions = status.conditions.unwrap_or_default();
            assert!(
                conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True"),
                "{name}"
            );
            nodes.insert(name, node);
        }
        assert_eq!(nodes.len(), 40);
        assert!(nodes.contains_key("b1-r1-h1") && nodes.contains_key("gpu-b3-r2-h4"));

        // GPU nodes are tainted; the gpu flavor's toleration lets them in, nothing else does.
        let gpu_flavor = all
            .iter()
            .find(|d| d["kind"] == "ResourceFlavor" && d["metadata"]["name"] == "gpu-flavor");
        let tolerations: Vec<Toleration> = gpu_flavor
            .and_then(|f| serde_json::from_value(f["spec"]["tolerations"].clone()).ok())
            .unwrap_or_default();
        assert_eq!(tolerations.len(), 1);
        for (name, node) in &nodes {
            let taints = node.spec.clone().and_then(|s| s.taints).unwrap_or_default();
            if name.starts_with("gpu-") {
                let untolerated = first_untolerated_taint(&taints, &[]).map(taint_to_string);
                assert_eq!(
                    untolerated.as_deref(),
                    Some("nvidia.com/gpu=present:NoSchedule")
                );
                assert_eq!(first_untolerated_taint(&taints, &tolerations), None);
            } else {
                assert!(taints.is_empty(), "{name}");
            }
        }

        // The running pods; the Workload-API groups' pods are pending (checked by the tests of
        // simulate).
        for v in files["20-running.yaml"]
            .iter()
            .filter(|d| d["kind"] == "Pod")
        {
            let pod: Pod = match serde_json::from_value(v.clone()) {
                Ok(p) => p,
                Err(e) => panic!("not a Pod: {e}"),
            };
            let spec = pod.spec.unwrap_or_default();
            let node = spec.node_name.unwrap_or_default();
            assert!(
                node.starts_with("b1-") && nodes.contains_key(&node),
                "{node}"
            );
            assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Running"));
        }

        let queues: BTreeSet<&str> = all
            .iter()
            .filter(|d| d["kind"] == "LocalQueue")
            .filter_map(|d| d["metadata"]["name"].as_str())
            .collect();
        for v in all.iter().filter(|d| d["kind"] == "Job") {
            let job: Job = match serde_json::from_value((*v).clone()) {
                Ok(j) => j,
                Err(e) => panic!("not a Job: {e}"),
            };
            let labels = job.metadata.labels.clone().unwrap_or_default();
            let queue = labels
                .get(QUEUE_NAME_LABEL)
                .map(String::as_str)
                .unwrap_or_default();
            assert!(
                queues.contains(queue),
                "{:?} uses unknown queue {queue}",
                job.metadata.name
            );
            let spec = job.spec.unwrap_or_default();
            assert_eq!(spec.parallelism, spec.completions);
            assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
            let annotations = spec
                .template
                .metadata
                .and_then(|m| m.annotations)
                .unwrap_or_default();
            assert!(!annotations.is_empty(), "{:?}", job.metadata.name);
        }
    }
}
