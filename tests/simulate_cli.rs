//! End-to-end tests of `kube-tas simulate`: the documented JSON shape and exit codes
//! (DESIGN.md §4), the table output, bad input (exit 2, a message naming the file, object and
//! field, never a panic), admission denials, determinism and the `TASBalancedPlacement` gate.
//!
//! Every test runs the real binary. Manifests other than `examples/` are written into a fresh
//! directory under the system temp dir, removed when the test ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Runs `kube-tas simulate PATHS... EXTRA...`, with a clean environment for the knobs the
/// binary reads itself.
fn simulate(paths: &[&Path], extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kube-tas"))
        .arg("simulate")
        .args(paths)
        .args(extra)
        .env_remove("KUBE_TAS_FEATURE_GATES")
        .env_remove("RUST_LOG")
        .output()
        .expect("cannot run the kube-tas binary")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit code, stdout and stderr, for assertion messages.
fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status.code(),
        stdout(out),
        stderr(out)
    )
}

fn assert_no_panic(out: &Output) {
    assert!(
        !stdout(out).contains("panicked") && !stderr(out).contains("panicked"),
        "the binary panicked:\n{}",
        describe(out)
    );
}

/// Asserts the simulation ran (exit 0) and returns stdout.
fn assert_ran(out: &Output) -> String {
    assert_no_panic(out);
    assert_eq!(out.status.code(), Some(0), "{}", describe(out));
    stdout(out)
}

/// Asserts exit 2 with nothing on stdout, and every `needles` in stderr; returns stderr.
fn assert_bad_input(out: &Output, needles: &[&str]) -> String {
    assert_no_panic(out);
    assert_eq!(out.status.code(), Some(2), "{}", describe(out));
    assert!(
        out.stdout.is_empty(),
        "no report on bad input:\n{}",
        describe(out)
    );
    let err = stderr(out);
    for needle in needles {
        assert!(
            err.contains(needle),
            "stderr should mention {needle:?}:\n{}",
            describe(out)
        );
    }
    err
}

/// Runs `simulate PATHS... -o json EXTRA...`, expects exit 0 and parses the report.
fn simulate_json(paths: &[&Path], extra: &[&str]) -> Value {
    let out = simulate(paths, &[&["-o", "json"], extra].concat());
    let text = assert_ran(&out);
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", describe(&out)))
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kube-tas-simulate-cli-{}-{}-{label}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create a temp dir");
        TempDir(dir)
    }

    /// Writes `name` (relative, folders created) and returns its path.
    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("cannot create a fixture folder");
        }
        std::fs::write(&path, contents).expect("cannot write a fixture");
        path
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The report's entry for workload `name` (any kind, any namespace).
fn workload<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["workloads"]
        .as_array()
        .expect("`workloads` is an array")
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no workload {name:?} in the report:\n{report:#}"))
}

/// `admitted` defaults to true when absent (DESIGN.md §4).
fn admitted(w: &Value) -> bool {
    w.get("admitted").map(|a| a == true).unwrap_or(true)
}

fn message(v: &Value) -> &str {
    v["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no message in {v:#}"))
}

/// The only pod set of a workload.
fn only_pod_set(w: &Value) -> &Value {
    let pod_sets = w["podSets"].as_array().expect("`podSets` is an array");
    assert_eq!(pod_sets.len(), 1, "one pod set expected: {w:#}");
    &pod_sets[0]
}

/// `(values, count)` of every domain of a pod set.
fn domains(pod_set: &Value) -> Vec<(Vec<String>, i64)> {
    pod_set["domains"]
        .as_array()
        .unwrap_or_else(|| panic!("`domains` is an array: {pod_set:#}"))
        .iter()
        .map(|d| {
            let values = d["values"]
                .as_array()
                .unwrap_or_else(|| panic!("`values` is an array: {d:#}"))
                .iter()
                .map(|v| v.as_str().expect("a domain value is a string").to_string())
                .collect();
            (values, d["count"].as_i64().expect("`count` is an integer"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// A small valid cluster, in the shape of the conformance cases
// (the shared conformance suite's placement/*/cluster.yaml): one Topology block > rack > host, one
// flavor over every node, one ClusterQueue, one LocalQueue `default/tas-user-queue`.
// ---------------------------------------------------------------------------------------------

const QUEUES: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: default
spec:
  levels:
  - nodeLabel: cloud.com/topology-block
  - nodeLabel: cloud.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: tas-flavor
spec:
  topologyName: default
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: tas-cluster-queue
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources:
    - cpu
    flavors:
    - name: tas-flavor
      resources:
      - name: cpu
        nominalQuota: '1000'
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: tas-user-queue
  namespace: default
spec:
  clusterQueue: tas-cluster-queue
"#;

/// A ready Node `name` in block `b1`, rack `r1`, with `cpu` allocatable.
fn node(name: &str, cpu: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    cloud.com/topology-block: b1
    cloud.com/topology-rack: r1
    kubernetes.io/hostname: {name}
spec: {{}}
status:
  allocatable:
    cpu: {cpu}
    pods: '110'
  capacity:
    cpu: {cpu}
    pods: '110'
  conditions:
  - type: Ready
    status: 'True'
"#
    )
}

/// An Indexed Job `default/NAME` of `count` pods × 1 cpu on LocalQueue `queue`, with
/// `annotation` (a `key: value` line, or empty) on its pod template.
fn job(name: &str, queue: &str, count: u32, annotation: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: {queue}
spec:
  parallelism: {count}
  completions: {count}
  completionMode: Indexed
  template:
    metadata:
      annotations:
        {annotation}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources:
          requests:
            cpu: '1'
"#
    )
}

/// `docs` joined into one multi-document YAML stream.
fn stream(docs: &[&str]) -> String {
    docs.join("---\n")
}

// ---------------------------------------------------------------------------------------------
// 1. The sample cluster, JSON
// ---------------------------------------------------------------------------------------------

#[test]
fn examples_json_has_the_documented_shape() {
    let report = simulate_json(&[&examples_dir()], &[]);
    let workloads = report["workloads"].as_array().expect("`workloads` array");

    // Every pending Job of examples/30-jobs.yaml, then the JobSet and the LeaderWorkerSet
    // groups of examples/40-sets.yaml, in file order, then the Workload-API composite of
    // examples/50-podgroups.yaml.
    let names: Vec<&str> = workloads
        .iter()
        .map(|w| w["name"].as_str().expect("`name` is a string"))
        .collect();
    assert_eq!(
        names,
        [
            "train-40",
            "rack-required",
            "sliced",
            "multi-layer",
            "gpu-training",
            "too-big",
            "bad-annotation",
            "pretrain",
            "inference-0",
            "inference-1",
            "train"
        ],
        "{report:#}"
    );

    let levels = [
        "cloud.provider.com/topology-block",
        "cloud.provider.com/topology-rack",
        "kubernetes.io/hostname",
    ];
    for w in workloads {
        let kind = w["kind"].as_str().expect("`kind` is a string");
        if kind == "CompositePodGroup" {
            continue; // checked below: its levels are its own keys
        }
        assert!(
            ["Job", "JobSet", "LeaderWorkerSet"].contains(&kind),
            "{w:#}"
        );
        assert_eq!(w["namespace"], "default", "{w:#}");
        if !admitted(w) {
            assert!(
                w.get("podSets").is_none(),
                "a denied Job has no podSets: {w:#}"
            );
            continue;
        }
        for ps in w["podSets"].as_array().expect("`podSets` array") {
            if kind == "Job" {
                assert_eq!(ps["name"], "main", "{ps:#}");
            }
            let count = ps["count"].as_i64().expect("`count` is an integer");
            assert!(count > 0, "{ps:#}");
            if ps["fits"] == true {
                assert_eq!(ps["levels"], serde_json::json!(levels), "{ps:#}");
                let doms = domains(ps);
                assert!(!doms.is_empty(), "{ps:#}");
                for (values, c) in &doms {
                    assert_eq!(values.len(), levels.len(), "full path: {ps:#}");
                    assert!(*c > 0, "no empty domains: {ps:#}");
                }
                let total: i64 = doms.iter().map(|(_, c)| c).sum();
                assert_eq!(total, count, "domain counts sum to the pod count: {ps:#}");
            } else {
                assert_eq!(ps["fits"], false, "`fits` is a boolean: {ps:#}");
            }
        }
    }

    // The JobSet's driver and workers, and each LeaderWorkerSet group's leader and workers,
    // share one rack (podset-group-name, required rack).
    for (name, pod_sets) in [
        ("pretrain", [("driver", 1), ("workers", 12)]),
        ("inference-0", [("leader", 1), ("worker", 3)]),
        ("inference-1", [("leader", 1), ("worker", 3)]),
    ] {
        let w = workload(&report, name);
        let sets = w["podSets"].as_array().expect("`podSets` array");
        let got: Vec<(&str, i64)> = sets
            .iter()
            .map(|p| (p["name"].as_str().unwrap(), p["count"].as_i64().unwrap()))
            .collect();
        assert_eq!(got, pod_sets, "{w:#}");
        let racks: std::collections::BTreeSet<Vec<String>> = sets
            .iter()
            .inspect(|p| assert_eq!(p["fits"], true, "{name}: {p:#}"))
            .flat_map(domains)
            .map(|(v, _)| v[..2].to_vec())
            .collect();
        assert_eq!(racks.len(), 1, "{name} spans racks {racks:?}");
    }

    // The zone → rack CompositePodGroup: its two PodGroups as PodSets, all 9 pods in one block,
    // the 8 workers in one rack of it; levels are the keys from the root down.
    let train = workload(&report, "train");
    assert_eq!(train["kind"], "CompositePodGroup", "{train:#}");
    let sets = train["podSets"].as_array().expect("`podSets` array");
    let got: Vec<(&str, i64)> = sets
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["count"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        got,
        [("train-driver", 1), ("train-workers", 8)],
        "{train:#}"
    );
    assert_eq!(
        sets[0]["levels"],
        serde_json::json!([levels[0], levels[2]]),
        "{train:#}"
    );
    assert_eq!(sets[1]["levels"], serde_json::json!(levels), "{train:#}");
    let blocks: std::collections::BTreeSet<String> = sets
        .iter()
        .inspect(|p| assert_eq!(p["fits"], true, "{p:#}"))
        .flat_map(domains)
        .map(|(v, _)| v[0].clone())
        .collect();
    assert_eq!(blocks.len(), 1, "train spans blocks {blocks:?}");
    let worker_racks: std::collections::BTreeSet<Vec<String>> = domains(&sets[1])
        .into_iter()
        .map(|(v, _)| v[..2].to_vec())
        .collect();
    assert_eq!(worker_racks.len(), 1, "{train:#}");
    let placed: i64 = domains(&sets[1]).iter().map(|(_, c)| c).sum();
    assert_eq!(placed, 8, "{train:#}");

    // train-40 fits, in one block (preferred block, and a block has room).
    let train = workload(&report, "train-40");
    assert!(admitted(train), "{train:#}");
    let ps = only_pod_set(train);
    assert_eq!(ps["fits"], true, "{ps:#}");
    assert_eq!(ps["count"], 40, "{ps:#}");
    let doms = domains(ps);
    let block = &doms[0].0[0];
    assert!(
        doms.iter().all(|(v, _)| &v[0] == block),
        "train-40 spans several blocks: {ps:#}"
    );

    // rack-required: one rack; sliced and multi-layer: one block; gpu-training: one GPU rack.
    for (name, depth) in [
        ("rack-required", 2),
        ("sliced", 1),
        ("multi-layer", 1),
        ("gpu-training", 2),
    ] {
        let ps = only_pod_set(workload(&report, name));
        assert_eq!(ps["fits"], true, "{name}: {ps:#}");
        let doms = domains(ps);
        let first = &doms[0].0[..depth];
        assert!(
            doms.iter().all(|(v, _)| &v[..depth] == first),
            "{name} is not inside one {}: {ps:#}",
            levels[depth - 1]
        );
    }

    // too-big does not fit, and says how many would.
    let too_big = workload(&report, "too-big");
    assert!(admitted(too_big), "{too_big:#}");
    let ps = only_pod_set(too_big);
    assert_eq!(ps["fits"], false, "{ps:#}");
    assert_eq!(ps["count"], 40, "{ps:#}");
    assert!(
        message(ps).starts_with(r#"topology "default" allows to fit only"#),
        "{ps:#}"
    );
    assert!(
        ps.get("domains")
            .is_none_or(|d| d.as_array().is_some_and(|d| d.is_empty())),
        "a pod set that does not fit places nothing: {ps:#}"
    );

    // bad-annotation is denied by the webhook, quoting the annotation and Kueue's rule.
    let bad = workload(&report, "bad-annotation");
    assert_eq!(bad["admitted"], false, "{bad:#}");
    let msg = message(bad);
    assert!(msg.contains("kueue.x-k8s.io/podset-slice-size"), "{msg}");
    assert!(msg.contains("must be greater than or equal to 1"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// 2. The sample cluster, table
// ---------------------------------------------------------------------------------------------

#[test]
fn examples_table_lists_every_job_and_outcome() {
    let out = simulate(&[&examples_dir()], &[]);
    let table = assert_ran(&out);
    for name in [
        "train-40",
        "rack-required",
        "sliced",
        "multi-layer",
        "gpu-training",
        "too-big",
        "bad-annotation",
    ] {
        assert!(table.contains(name), "the table misses {name}:\n{table}");
    }
    for word in ["PLACED", "NO FIT", "DENIED"] {
        assert!(table.contains(word), "the table misses {word}:\n{table}");
    }
    let line_of = |name: &str| {
        table
            .lines()
            .find(|l| l.contains(&format!("default/{name}")) && l.contains("Job"))
            .unwrap_or_else(|| panic!("no summary line for {name}:\n{table}"))
    };
    assert!(line_of("train-40").contains("PLACED"), "{table}");
    assert!(line_of("too-big").contains("NO FIT"), "{table}");
    assert!(line_of("bad-annotation").contains("DENIED"), "{table}");
}

// ---------------------------------------------------------------------------------------------
// 3. Bad input: exit 2, a message naming the file and the problem, never a panic
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_yaml_unbalanced_brackets_names_the_file() {
    let dir = TempDir::new("unbalanced");
    let file = dir.write(
        "unbalanced.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: [n1, n2\n  labels: {a: b\n",
    );
    let out = simulate(&[&file], &[]);
    assert_bad_input(&out, &["unbalanced.yaml", "YAML"]);
}

#[test]
fn malformed_yaml_bad_indentation_names_the_file() {
    let dir = TempDir::new("indent");
    let file = dir.write(
        "indented.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n    name: n1\n  labels:\n    a: b\n",
    );
    let out = simulate(&[&file], &["-o", "json"]);
    assert_bad_input(&out, &["indented.yaml", "YAML"]);
}

#[test]
fn node_without_a_name_is_rejected() {
    let dir = TempDir::new("noname");
    let file = dir.write(
        "nameless.yaml",
        r#"apiVersion: v1
kind: Node
metadata:
  labels:
    kubernetes.io/hostname: h1
status:
  allocatable:
    cpu: '8'
"#,
    );
    let out = simulate(&[&file], &[]);
    assert_bad_input(&out, &["nameless.yaml", "Node", "metadata.name"]);
}

#[test]
fn bad_allocatable_quantity_names_the_field_and_the_node() {
    let dir = TempDir::new("quantity");
    let file = dir.write(
        "nodes.yaml",
        &stream(&[QUEUES, &node("good-node", "'8'"), &node("bad-node", "8x")]),
    );
    let out = simulate(&[&file], &[]);
    let err = assert_bad_input(
        &out,
        &["nodes.yaml", "bad-node", "status.allocatable.cpu", "8x"],
    );
    assert!(!err.contains("good-node"), "blames the wrong node: {err}");
}

/// A quantity beyond what can be counted is bad input naming the node and the field, never
/// a silent clamp to 2^63-1; the same node with a sane amount loads.
#[test]
fn an_absurd_quantity_is_an_error_not_a_clamp() {
    let dir = TempDir::new("absurd");
    let absurd =
        node("huge-node", "'8'").replace("pods: '110'\n  capacity", "pods: '1e400'\n  capacity");
    assert!(
        absurd.contains("pods: '1e400'"),
        "the fixture must carry the absurd amount"
    );
    let file = dir.write("nodes.yaml", &stream(&[QUEUES, &absurd]));
    assert_bad_input(
        &simulate(&[&file], &[]),
        &[
            "nodes.yaml",
            "huge-node",
            "status.allocatable.pods",
            "1e400",
            "clamped",
        ],
    );
    let cpu = dir.write("cpu.yaml", &stream(&[QUEUES, &node("fast-node", "'1e17'")]));
    assert_bad_input(
        &simulate(&[&cpu], &[]),
        &["fast-node", "status.allocatable.cpu", "millicores"],
    );
    let sane = dir.write("sane.yaml", &stream(&[QUEUES, &node("huge-node", "'8'")]));
    assert_ran(&simulate(&[&sane], &[]));
}

/// Quantities that each can be counted but whose sum over a pod's containers cannot are an
/// error too, naming the pod.
#[test]
fn requests_that_only_add_up_beyond_counting_are_an_error() {
    let dir = TempDir::new("absurd-sum");
    let pod = |cpu: &str| {
        [
            "apiVersion: v1",
            "kind: Pod",
            "metadata: {name: greedy, namespace: default}",
            "spec:",
            "  nodeName: good-node",
            "  containers:",
            &format!("  - {{name: a, image: x, resources: {{requests: {{cpu: '{cpu}'}}}}}}"),
            &format!("  - {{name: b, image: x, resources: {{requests: {{cpu: '{cpu}'}}}}}}"),
            "status: {phase: Running}",
            "",
        ]
        .join("\n")
    };
    let file = dir.write(
        "cluster.yaml",
        &stream(&[QUEUES, &node("good-node", "'8'"), &pod("5e15")]),
    );
    assert_bad_input(
        &simulate(&[&file], &[]),
        &["greedy", "add up to", "clamped"],
    );
    let sane = dir.write(
        "sane.yaml",
        &stream(&[QUEUES, &node("good-node", "'8'"), &pod("1")]),
    );
    assert_ran(&simulate(&[&sane], &[]));
}

/// Nothing to simulate is said, with a non-zero exit: a 0-byte file, a folder without
/// manifests, documents of kinds kube-tas does not read.
#[test]
fn empty_input_is_a_clear_error() {
    let dir = TempDir::new("empty");
    let empty_file = dir.write("empty.yaml", "");
    assert_bad_input(
        &simulate(&[&empty_file], &[]),
        &["nothing to load", "empty.yaml"],
    );
    let folder = dir.path().join("no-manifests");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("README.txt"), "not a manifest").unwrap();
    assert_bad_input(
        &simulate(&[&folder], &[]),
        &["nothing to load", "no-manifests"],
    );
    let other = dir.write(
        "other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    assert_bad_input(
        &simulate(&[&other], &[]),
        &["nothing to load", "other.yaml"],
    );
}

/// Nodes a flavor cannot use are reported once each run, with the reason and the names:
/// on stderr (whatever the output format) and in the table.
#[test]
fn nodes_left_out_are_reported_once_with_why() {
    let dir = TempDir::new("left-out");
    let down = node("down-node", "'8'").replace("status: 'True'", "status: 'False'");
    let unlabelled = node("bare-node", "'8'").replace("    cloud.com/topology-rack: r1\n", "");
    assert!(down.contains("status: 'False'") && !unlabelled.contains("topology-rack"));
    let file = dir.write(
        "cluster.yaml",
        &stream(&[QUEUES, &node("good-node", "'8'"), &down, &unlabelled]),
    );
    let table = simulate(&[&file], &[]);
    let out = assert_ran(&table);
    let err = stderr(&table);
    let line = "take none of its pods: 1 not Ready (down-node); 1 without the level label \
                cloud.com/topology-rack (bare-node)";
    assert_eq!(
        err.matches(line).count(),
        1,
        "reported once on stderr:\n{err}"
    );
    assert!(
        out.contains("Left out: flavor ") && out.contains(line),
        "{out}"
    );
    assert!(!err.contains("good-node"), "{err}");

    let json = simulate(&[&file], &["-o", "json"]);
    assert_ran(&json);
    assert_eq!(stderr(&json).matches(line).count(), 1, "{}", stderr(&json));
    let healthy = dir.write(
        "healthy.yaml",
        &stream(&[QUEUES, &node("good-node", "'8'")]),
    );
    let healthy = simulate(&[&healthy], &[]);
    assert_ran(&healthy);
    assert!(
        !stderr(&healthy).contains("take none"),
        "{}",
        stderr(&healthy)
    );
}

/// A warning of the loader reaches stderr exactly once (it used to be logged and printed).
#[test]
fn each_warning_is_printed_once() {
    let dir = TempDir::new("warn-once");
    let file = dir.write(
        "cluster.yaml",
        &stream(&[
            QUEUES,
            &node("good-node", "'8'"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
        ]),
    );
    let out = simulate(&[&file], &[]);
    assert_ran(&out);
    let err = stderr(&out);
    assert_eq!(err.matches("ConfigMap settings").count(), 1, "{err}");
    assert!(
        !err.contains("\u{1b}["),
        "no colour codes when stderr is not a terminal: {err:?}"
    );
}

#[test]
fn duplicate_node_names_across_files_name_both_files() {
    let dir = TempDir::new("duplicate");
    dir.write(
        "cluster/a-first.yaml",
        &stream(&[QUEUES, &node("twin", "'8'")]),
    );
    dir.write("cluster/b-second.yaml", &node("twin", "'4'"));
    let out = simulate(&[&dir.path().join("cluster")], &[]);
    assert_bad_input(&out, &["a-first.yaml", "b-second.yaml", "twin", "Node"]);
}

#[test]
fn unknown_feature_gate_is_rejected() {
    let out = simulate(&[&examples_dir()], &["--feature-gates", "NoSuchGate=true"]);
    assert_bad_input(&out, &["NoSuchGate"]);
}

#[test]
fn malformed_feature_gate_value_is_rejected() {
    let out = simulate(
        &[&examples_dir()],
        &["--feature-gates", "TASBalancedPlacement=maybe"],
    );
    assert_bad_input(&out, &["TASBalancedPlacement", "maybe"]);
}

#[test]
fn missing_path_is_named() {
    let dir = TempDir::new("missing");
    let missing = dir.path().join("does-not-exist.yaml");
    let out = simulate(&[&missing], &[]);
    assert_bad_input(&out, &["does-not-exist.yaml"]);
}

// ---------------------------------------------------------------------------------------------
// 4-5. Admission denials on a valid cluster: reported, not an error
// ---------------------------------------------------------------------------------------------

#[test]
fn job_on_a_missing_local_queue_is_denied() {
    let dir = TempDir::new("no-queue");
    let file = dir.write(
        "cluster.yaml",
        &stream(&[QUEUES, &node("x1", "'10'"), &job("lost", "nope", 2, "")]),
    );
    let report = simulate_json(&[&file], &[]);
    let lost = workload(&report, "lost");
    assert_eq!(lost["kind"], "Job", "{lost:#}");
    assert_eq!(lost["namespace"], "default", "{lost:#}");
    assert_eq!(lost["admitted"], false, "{lost:#}");
    let msg = message(lost);
    assert!(msg.contains("LocalQueue"), "{msg}");
    assert!(msg.contains("default/nope"), "{msg}");
}

#[test]
fn required_level_missing_from_the_topology_is_denied() {
    let dir = TempDir::new("no-level");
    let file = dir.write(
        "cluster.yaml",
        &stream(&[
            QUEUES,
            &node("x1", "'10'"),
            &job(
                "zoned",
                "tas-user-queue",
                2,
                "kueue.x-k8s.io/podset-required-topology: cloud.com/topology-zone",
            ),
        ]),
    );
    let report = simulate_json(&[&file], &[]);
    let zoned = workload(&report, "zoned");
    assert_eq!(zoned["admitted"], false, "{zoned:#}");
    let msg = message(zoned);
    assert!(
        msg.contains("kueue.x-k8s.io/podset-required-topology"),
        "{msg}"
    );
    assert!(msg.contains("cloud.com/topology-zone"), "{msg}");
    assert!(
        msg.contains("does not contain the requested level"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Determinism
// ---------------------------------------------------------------------------------------------

#[test]
fn examples_output_is_deterministic() {
    let run = |format: &str| {
        let out = simulate(&[&examples_dir()], &["-o", format]);
        assert_ran(&out);
        out.stdout
    };
    let first = run("json");
    assert_eq!(first, run("json"), "two JSON runs differ");
    let first = run("table");
    assert_eq!(first, run("table"), "two table runs differ");
}

// ---------------------------------------------------------------------------------------------
// 7. TASBalancedPlacement
// ---------------------------------------------------------------------------------------------

#[test]
fn balanced_placement_gate_changes_the_split() {
    // Two hosts of 10 cpu in one rack; 12 pods x 1 cpu preferring a rack. Kueue's default
    // packs the first host (10 + 2); balanced placement splits evenly (6 + 6).
    let dir = TempDir::new("balanced");
    let file = dir.write(
        "cluster.yaml",
        &stream(&[
            QUEUES,
            &node("x1", "'10'"),
            &node("x2", "'10'"),
            &job(
                "job",
                "tas-user-queue",
                12,
                "kueue.x-k8s.io/podset-preferred-topology: cloud.com/topology-rack",
            ),
        ]),
    );
    let split = |gates: &[&str]| {
        let report = simulate_json(&[&file], gates);
        let ps = only_pod_set(workload(&report, "job")).clone();
        assert_eq!(ps["fits"], true, "{ps:#}");
        let doms = domains(&ps);
        for (values, _) in &doms {
            assert_eq!(values[..2], ["b1", "r1"], "{ps:#}");
        }
        let mut counts: Vec<i64> = doms.iter().map(|(_, c)| *c).collect();
        counts.sort_unstable();
        counts
    };
    assert_eq!(split(&[]), [2, 10], "default placement");
    assert_eq!(
        split(&["--feature-gates", "TASBalancedPlacement=false"]),
        [2, 10],
        "gate explicitly off"
    );
    assert_eq!(
        split(&["--feature-gates", "TASBalancedPlacement=true"]),
        [6, 6],
        "balanced placement"
    );
}

/// Pod `index` of Job `job` (1 cpu) on `node`, in `phase`.
fn job_pod_on(job: &str, index: u32, node: &str, phase: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {job}-{index}
  namespace: default
  uid: uid-{job}-{index}
  annotations:
    batch.kubernetes.io/job-completion-index: '{index}'
    kueue.x-k8s.io/podset-required-topology: cloud.com/topology-rack
  ownerReferences:
  - apiVersion: batch/v1
    kind: Job
    name: {job}
    uid: job-uid-{job}
    controller: true
spec:
  nodeName: {node}
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: '1'
status:
  phase: {phase}
"#
    )
}

#[test]
fn a_running_job_whose_node_failed_is_placed_again_only_with_hot_swap_on() {
    // Job `train` (3 pods, one rack) runs on n1 and n2; n2 goes NotReady and pod 2 fails
    // there. The Job controller recreates pod 2: with TASFailedNodeReplacement (on by
    // default) simulate places it again, beside its Job, and reports all three pods.
    let dir = TempDir::new("hot-swap");
    let n2_not_ready = node("n2", "'4'").replace("status: 'True'", "status: 'False'");
    let path = dir.write(
        "cluster.yaml",
        &stream(&[
            QUEUES,
            &node("n1", "'4'"),
            &n2_not_ready,
            &node("n3", "'4'"),
            &job(
                "train",
                "tas-user-queue",
                3,
                "kueue.x-k8s.io/podset-required-topology: cloud.com/topology-rack",
            ),
            &job_pod_on("train", 0, "n1", "Running"),
            &job_pod_on("train", 1, "n1", "Running"),
            &job_pod_on("train", 2, "n2", "Failed"),
        ]),
    );
    let report = simulate_json(&[&path], &[]);
    let ps = only_pod_set(workload(&report, "train"));
    assert_eq!(ps["fits"], true, "{ps:#}");
    let mut got: Vec<(String, i64)> = domains(ps)
        .into_iter()
        .map(|(v, c)| (v.last().cloned().unwrap(), c))
        .collect();
    got.sort();
    // Pods 0 and 1 stay on n1; the replacement goes to n1 (room) or n3, never n2.
    let total: i64 = got.iter().map(|(_, c)| c).sum();
    assert_eq!(total, 3, "{got:?}");
    assert!(got.iter().all(|(n, _)| n != "n2"), "{got:?}");
    assert!(got.iter().any(|(n, c)| n == "n1" && *c >= 2), "{got:?}");
    // The replaced pod is marked, in the JSON and in the table.
    let replaced = ps["replaced"].as_array().expect("replaced domains");
    let replaced_count: i64 = replaced.iter().map(|d| d["count"].as_i64().unwrap()).sum();
    assert_eq!(replaced_count, 1, "{ps:#}");
    let table = assert_ran(&simulate(&[&path], &[]));
    assert!(
        table.contains("1 replaced for pods lost on a failed node")
            && table.contains("default/train (replaced)"),
        "{table}"
    );

    let off = simulate_json(
        &[&path],
        &["--feature-gates", "TASFailedNodeReplacement=false"],
    );
    assert_eq!(off["workloads"], serde_json::json!([]), "{off:#}");
}
