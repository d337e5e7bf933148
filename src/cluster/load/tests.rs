//! Loader tests: real files in a scratch folder, one behaviour each.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::cluster::WorkloadKind;

/// A scratch folder, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kube-tas-load-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create scratch folder");
        Scratch(dir)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create folder");
        }
        fs::write(&path, text).expect("write file");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Loads `text` from a file named `name` in a fresh scratch folder.
fn load_one(name: &str, text: &str) -> (Scratch, PathBuf, Result<Cluster, LoadError>) {
    let scratch = Scratch::new();
    let path = scratch.write(name, text);
    let result = load_paths(&[&path]);
    (scratch, path, result)
}

fn load_ok(text: &str) -> Cluster {
    let (_scratch, _path, result) = load_one("cluster.yaml", text);
    result.unwrap_or_else(|e| panic!("load failed: {e}"))
}

fn load_err(text: &str) -> (String, String) {
    let (_scratch, path, result) = load_one("cluster.yaml", text);
    let err = result.expect_err("load should fail");
    (path.display().to_string(), err.to_string())
}

fn node(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/hostname: {name}
spec: {{}}
status:
  allocatable:
    cpu: '{cpu}'
    memory: 1Gi
    pods: '110'
  conditions:
  - type: Ready
    status: 'True'
"
    )
}

const QUEUES: &str = "apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: default
spec:
  levels:
  - nodeLabel: cloud.com/block
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: tas-flavor
spec:
  nodeLabels:
    pool: a
  topologyName: default
  tolerations:
  - key: gpu
    operator: Exists
    effect: NoSchedule
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tas-flavor
      resources:
      - name: cpu
        nominalQuota: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq
  namespace: team
spec:
  clusterQueue: cq
";

#[test]
fn loads_every_kind() {
    let text = format!(
        "{QUEUES}---\n{}---\n{}---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: team
  labels:
    kueue.x-k8s.io/queue-name: lq
spec:
  parallelism: 4
  completions: 8
  suspend: true
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.com/block
    spec:
      restartPolicy: Never
      nodeSelector:
        pool: a
      tolerations:
      - key: gpu
        operator: Exists
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - key: zone
                operator: In
                values: [z1]
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 5
            preference:
              matchExpressions:
              - key: fast
                operator: Exists
      containers:
      - name: main
        image: pause
        resources:
          requests:
            cpu: 500m
            memory: 1Gi
---
apiVersion: v1
kind: Pod
metadata:
  name: running
  namespace: default
  uid: u-1
  annotations:
    kueue.x-k8s.io/podset-unconstrained-topology: 'true'
spec:
  nodeName: n1
  containers:
  - name: c
    resources:
      requests:
        cpu: '1'
status:
  phase: Running
",
        node("n1", "8"),
        node("n2", "4")
    );
    let cluster = load_ok(&text);
    assert!(cluster.warnings.is_empty(), "{:?}", cluster.warnings);

    assert_eq!(cluster.nodes.len(), 2);
    let n1 = &cluster.nodes[0];
    assert_eq!(n1.name, "n1");
    assert_eq!(n1.allocatable["cpu"], 8000);
    assert_eq!(n1.allocatable["memory"], 1 << 30);
    assert_eq!(n1.allocatable["pods"], 110);
    assert_eq!(&n1.labels["kubernetes.io/hostname"], "n1");
    assert!(n1.ready && !n1.unschedulable);

    assert_eq!(cluster.kueue.topologies["default"].spec.levels.len(), 2);
    assert_eq!(
        cluster.kueue.resource_flavors["tas-flavor"]
            .spec
            .topology_name
            .as_deref(),
        Some("default")
    );
    assert!(cluster.kueue.cluster_queues.contains_key("cq"));
    assert_eq!(
        cluster.kueue.local_queues[&("team".to_string(), "lq".to_string())]
            .spec
            .cluster_queue,
        "cq"
    );

    assert_eq!(cluster.bound_pods.len(), 1);
    let pod = &cluster.bound_pods[0];
    assert_eq!(
        (pod.namespace.as_str(), pod.name.as_str()),
        ("default", "running")
    );
    assert_eq!(pod.node_name, "n1");
    assert_eq!(pod.uid.as_deref(), Some("u-1"));
    assert_eq!(pod.requests["cpu"], 1000);
    assert!(pod.tas);
    assert_eq!(pod.owner_job, None);

    assert_eq!(cluster.workloads.len(), 1);
    let job = &cluster.workloads[0];
    assert_eq!(job.kind, WorkloadKind::Job);
    assert_eq!(
        (job.namespace.as_str(), job.name.as_str()),
        ("team", "train")
    );
    assert_eq!(job.queue_name.as_deref(), Some("lq"));
    assert_eq!(job.source.document, 7);
    let ps = &job.pod_sets[0];
    assert_eq!(ps.spec.name, "main");
    assert_eq!(ps.spec.count, 4);
    assert_eq!(ps.spec.requests["cpu"], 500);
    assert_eq!(ps.spec.requests["memory"], 1 << 30);
    assert_eq!(ps.spec.topology, None);
    assert!(!ps.spec.implied);
    assert_eq!(ps.spec.node_selector["pool"], "a");
    assert_eq!(ps.spec.tolerations.len(), 1);
    assert!(ps.spec.required_affinity.is_some());
    assert_eq!(ps.spec.preferred_affinity[0].weight, 5);
    assert_eq!(
        ps.annotations["kueue.x-k8s.io/podset-required-topology"],
        "cloud.com/block"
    );
    assert_eq!(ps.annotations_path, "spec.template.metadata.annotations");
}

#[test]
fn job_count_follows_kueue() {
    let job = |spec: &str| {
        format!(
            "apiVersion: batch/v1
kind: Job
metadata: {{name: j}}
spec:
{spec}
  template:
    spec:
      containers: [{{name: c}}]
"
        )
    };
    let count = |spec: &str| load_ok(&job(spec)).workloads[0].pod_sets[0].spec.count;
    assert_eq!(count("  completions: 3"), 1);
    assert_eq!(count("  parallelism: 5"), 5);
    assert_eq!(count("  parallelism: 5\n  completions: 2"), 2);
    assert_eq!(count("  parallelism: 2\n  completions: 9"), 2);
    assert_eq!(
        load_ok(&job("  parallelism: 1")).workloads[0].namespace,
        "default"
    );

    let (path, err) = load_err(&job("  parallelism: -1"));
    assert_eq!(
        err,
        format!(
            "{path}: document 1 (Job default/j): spec.parallelism: must be greater than or equal \
             to 0, got -1"
        )
    );
}

#[test]
fn running_and_finished_jobs_are_not_pending() {
    let text = "apiVersion: batch/v1
kind: Job
metadata: {name: running, namespace: ns}
spec:
  template:
    spec:
      containers: [{name: c}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: done, namespace: ns}
spec:
  template:
    spec:
      containers: [{name: c}]
status:
  conditions:
  - type: Complete
    status: 'True'
---
apiVersion: batch/v1
kind: Job
metadata: {name: waiting, namespace: ns}
spec:
  template:
    spec:
      containers: [{name: c}]
---
apiVersion: v1
kind: Pod
metadata:
  name: running-0
  namespace: ns
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: running, uid: u1, controller: true}
spec:
  containers: [{name: c}]
---
apiVersion: v1
kind: Pod
metadata:
  name: waiting-0
  namespace: ns
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: waiting, uid: u2, controller: true}
spec:
  containers: [{name: c}]
status:
  phase: Failed
";
    let cluster = load_ok(text);
    let names: Vec<_> = cluster.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["waiting"]);
    // The pending pod of the running Job is neither bound nor a workload of its own.
    assert!(cluster.bound_pods.is_empty());
}

#[test]
fn bound_pods_skip_terminal_phases_and_know_their_job() {
    let pod = |name: &str, phase: &str| {
        format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  ownerReferences:
  - {{apiVersion: batch/v1, kind: Job, name: j, uid: x, controller: true}}
spec:
  nodeName: n1
  containers:
  - name: c
    resources: {{limits: {{cpu: 600m}}}}
status: {{phase: {phase}}}
"
        )
    };
    let text = [
        pod("a", "Running"),
        pod("b", "Succeeded"),
        pod("c", "Failed"),
        pod("d", "Pending"),
    ]
    .join("---\n");
    let cluster = load_ok(&text);
    let names: Vec<_> = cluster.bound_pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "d"]);
    assert_eq!(cluster.bound_pods[0].owner_job.as_deref(), Some("j"));
    assert_eq!(cluster.bound_pods[0].requests["cpu"], 600);
    assert!(!cluster.bound_pods[0].tas);
    assert!(cluster.workloads.is_empty());
}

#[test]
fn pending_pods_and_pod_groups_become_workloads_in_file_order() {
    let pod = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ns
{extra}spec:
  containers:
  - name: c
    resources: {{requests: {{cpu: '1'}}}}
"
        )
    };
    let grouped = |name: &str, count: &str| {
        pod(
            name,
            &format!(
                "  labels:
    kueue.x-k8s.io/pod-group-name: g
    kueue.x-k8s.io/queue-name: lq
  annotations:
    kueue.x-k8s.io/pod-group-total-count: '{count}'
    kueue.x-k8s.io/podset-required-topology: rack
"
            ),
        )
    };
    let job = "apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns}
spec:
  template:
    spec:
      containers: [{name: c}]
";
    let text = [
        grouped("g-0", "3"),
        pod(
            "single",
            "  annotations: {kueue.x-k8s.io/queue-name: lq2}\n",
        ),
        job.to_string(),
        grouped("g-1", "3"),
    ]
    .join("---\n");
    let cluster = load_ok(&text);
    let got: Vec<_> = cluster
        .workloads
        .iter()
        .map(|w| (w.kind, w.name.as_str(), w.pod_sets[0].spec.count))
        .collect();
    assert_eq!(
        got,
        [
            (WorkloadKind::PodGroup, "g", 3),
            (WorkloadKind::Pod, "single", 1),
            (WorkloadKind::Job, "j", 1),
        ]
    );
    let group = &cluster.workloads[0];
    assert_eq!(group.queue_name.as_deref(), Some("lq"));
    assert_eq!(group.source.document, 1);
    assert_eq!(group.pod_sets[0].annotations_path, "metadata.annotations");
    assert_eq!(
        group.pod_sets[0].annotations["kueue.x-k8s.io/podset-required-topology"],
        "rack"
    );
    assert_eq!(cluster.workloads[1].queue_name.as_deref(), Some("lq2"));

    // Pods of one group with different requests are different PodSets (one per shape, as
    // Kueue forms them), counted as loaded; a total count the loaded pods do not reach is
    // warned about.
    let bigger = grouped("g-1", "3").replace("cpu: '1'", "cpu: '2'");
    let cluster = load_ok(&[grouped("g-0", "3"), bigger.clone()].join("---\n"));
    let sets: Vec<(i64, i32)> = cluster.workloads[0]
        .pod_sets
        .iter()
        .map(|p| (p.spec.requests["cpu"], p.spec.count))
        .collect();
    assert_eq!(sets, [(1000, 1), (2000, 1)]);
    assert!(
        cluster.workloads[0]
            .pod_sets
            .iter()
            .all(|p| p.spec.name.len() == 8)
    );
    assert_eq!(cluster.warnings.len(), 1);
    assert!(
        cluster.warnings[0].contains("2 pods of 2 shapes are loaded")
            && cluster.warnings[0].contains("says 3"),
        "{:?}",
        cluster.warnings
    );
    let complete = [grouped("g-0", "3"), grouped("g-2", "3"), bigger].join("---\n");
    let cluster = load_ok(&complete);
    let sets: Vec<i32> = cluster.workloads[0]
        .pod_sets
        .iter()
        .map(|p| p.spec.count)
        .collect();
    assert_eq!(sets, [2, 1]);
    assert!(cluster.warnings.is_empty(), "{:?}", cluster.warnings);

    // A group with a bound pod already runs.
    let bound = grouped("g-2", "3").replace("spec:\n", "spec:\n  nodeName: n1\n");
    let cluster = load_ok(&[grouped("g-0", "3"), bound].join("---\n"));
    assert!(cluster.workloads.is_empty());
    assert_eq!(cluster.bound_pods.len(), 1);

    // Disagreeing and invalid counts.
    let (path, err) = load_err(&[grouped("g-0", "3"), grouped("g-1", "4")].join("---\n"));
    assert_eq!(
        err,
        format!(
            "{path}: document 2 (Pod ns/g-1): \
             metadata.annotations[\"kueue.x-k8s.io/pod-group-total-count\"]: \
             4 disagrees with 3 of Pod ns/g-0 in pod group ns/g"
        )
    );
    for bad in ["0", "-2", "x", "99999999999"] {
        let (_, err) = load_err(&grouped("g-0", bad));
        assert!(err.contains("must be a positive integer"), "{bad}: {err}");
    }
}

#[test]
fn bad_quantity_names_file_document_object_and_field() {
    let text = format!("{}---\n---\n{}", node("a", "8"), node("b1-r1-x1", "8x"));
    let (path, err) = load_err(&text);
    assert_eq!(
        err,
        format!(
            "{path}: document 3 (Node b1-r1-x1): status.allocatable.cpu: invalid quantity \"8x\""
        )
    );
}

#[test]
fn bad_request_quantity_names_the_container_field() {
    let text = "apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns}
spec:
  template:
    spec:
      containers:
      - name: c
        resources: {requests: {cpu: 1x}}
";
    let (path, err) = load_err(text);
    assert_eq!(
        err,
        format!(
            "{path}: document 1 (Job ns/j): \
             spec.template.spec.containers[0].resources.requests.cpu: invalid quantity \"1x\""
        )
    );
}

#[test]
fn bad_quota_is_an_error() {
    let text = QUEUES.replace("nominalQuota: 1000", "nominalQuota: lots");
    let (path, err) = load_err(&text);
    assert_eq!(
        err,
        format!(
            "{path}: document 3 (ClusterQueue cq): \
             spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: \
             invalid quantity \"lots\""
        )
    );
}

#[test]
fn type_errors_name_the_field_path() {
    let text = "apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  parallelism: many
  template:
    spec:
      containers: [{name: c}]
";
    let (path, err) = load_err(text);
    assert!(
        err.starts_with(&format!(
            "{path}: document 1 (Job default/j): spec.parallelism: "
        )),
        "{err}"
    );

    let text = "apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: [a, b]
";
    let (path, err) = load_err(text);
    assert!(
        err.starts_with(&format!(
            "{path}: document 1 (Node node-a): metadata.labels: "
        )),
        "{err}"
    );
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let (_scratch, path, result) = load_one(
        "bad.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: [unclosed\n",
    );
    match result {
        Err(LoadError::Syntax {
            path: p,
            format,
            line,
            ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(format, "YAML");
            assert!(line.is_some_and(|l| l >= 4), "line {line:?}");
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }

    let (path, err) = load_err("a: 1\nb: : :\n");
    assert!(err.starts_with(&format!("{path}:2:")), "{err}");
    assert!(err.contains("invalid YAML"), "{err}");
}

#[test]
fn malformed_json_names_file_and_line() {
    let (_scratch, path, result) = load_one("bad.json", "{\"apiVersion\": \"v1\",\n \"kind\": }");
    let err = result.expect_err("bad JSON").to_string();
    assert!(err.starts_with(&format!("{}:2:", path.display())), "{err}");
    assert!(err.contains("invalid JSON"), "{err}");
}

#[test]
fn missing_names_are_errors() {
    let (path, err) = load_err("apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}\n");
    assert_eq!(
        err,
        format!("{path}: document 1 (Node): metadata.name: missing (every Node needs a name)")
    );

    let (_, err) = load_err("apiVersion: v1\nkind: Pod\nmetadata: {namespace: ns}\nspec: {}\n");
    assert!(err.contains("(Pod): metadata.name: missing"), "{err}");

    let (path, err) = load_err("metadata: {name: x}\n");
    assert_eq!(err, format!("{path}: document 1: kind: missing"));

    let (path, err) = load_err("kind: Node\nmetadata: {name: x}\n");
    assert_eq!(
        err,
        format!("{path}: document 1 (Node): apiVersion: missing")
    );

    let (path, err) = load_err("just a string\n");
    assert_eq!(
        err,
        format!(
            "{path}: document 1: expected a Kubernetes object (a mapping with apiVersion and \
             kind), found a string"
        )
    );
}

#[test]
fn duplicates_name_both_locations() {
    let text = format!("{}---\n{}", node("n1", "8"), node("n1", "4"));
    let (path, err) = load_err(&text);
    assert_eq!(
        err,
        format!("duplicate Node n1: {path}: document 2 repeats {path}: document 1")
    );

    // Across files, and for namespaced kinds only within one namespace.
    let scratch = Scratch::new();
    let pod = |ns: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: {ns}}}\nspec: {{}}\n")
    };
    scratch.write("a.yaml", &pod("one"));
    scratch.write("b.yaml", &pod("two"));
    assert!(load_paths(&[&scratch.0]).is_ok());
    scratch.write("c.yaml", &format!("---\n{}", pod("one")));
    let err = load_paths(&[&scratch.0])
        .expect_err("duplicate pod")
        .to_string();
    assert_eq!(
        err,
        format!(
            "duplicate Pod one/p: {}: document 1 repeats {}: document 1",
            scratch.0.join("c.yaml").display(),
            scratch.0.join("a.yaml").display()
        )
    );
}

#[test]
fn unknown_kinds_are_skipped_with_a_warning() {
    let text = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: cm}}
---
{}",
        node("n1", "1")
    );
    let (_scratch, path, result) = load_one("cluster.yaml", &text);
    let cluster = result.expect("loads");
    assert_eq!(cluster.nodes.len(), 1);
    assert_eq!(
        cluster.warnings,
        [
            format!(
                "{}: document 1 (Deployment default/web): skipped: kind apps/v1 Deployment \
                 is not read by kube-tas",
                path.display()
            ),
            format!(
                "{}: document 2 (ConfigMap cm): skipped: kind v1 ConfigMap is not read by \
                 kube-tas",
                path.display()
            ),
        ]
    );
}

#[test]
fn empty_documents_are_skipped_but_counted() {
    // The comment before the first `---` is not a document; `{}` and `null` are empty ones.
    let text = format!(
        "# leading comment\n---\n---\n# only a comment\n---\n{}---\n{{}}\n---\nnull\n---\n{}",
        node("n1", "1"),
        node("n2", "zzz")
    );
    let (path, err) = load_err(&text);
    assert!(
        err.starts_with(&format!("{path}: document 6 (Node n2): ")),
        "{err}"
    );
    // Only empty documents: nothing to load is an error, not an empty cluster.
    let (path, err) = load_err("\n---\n\n---\n");
    assert!(
        err.starts_with(&format!("nothing to load: {path} hold")),
        "{err}"
    );
}

#[test]
fn flow_and_json_style_documents_parse() {
    let text = r#"--- {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": 2}}}
--- {apiVersion: v1, kind: Node, metadata: {name: b}, status: {allocatable: {cpu: 1.5}}}
"#;
    let cluster = load_ok(text);
    assert_eq!(cluster.nodes[0].allocatable["cpu"], 2000);
    assert_eq!(cluster.nodes[1].allocatable["cpu"], 1500);
    assert!(!cluster.nodes[0].ready);

    let (_scratch, _path, result) = load_one(
        "nodes.json",
        r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}
           {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"},
            "status": {"allocatable": {"cpu": "9x"}}}"#,
    );
    let err = result.expect_err("bad quantity").to_string();
    assert!(
        err.contains(": document 2 (Node b): status.allocatable.cpu"),
        "{err}"
    );
}

#[test]
fn lists_are_expanded() {
    let text = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: a}
- apiVersion: v1
  kind: Node
  metadata: {name: b}
---
apiVersion: v1
kind: NodeList
items:
- metadata: {name: c}
  spec: {unschedulable: true}
";
    let cluster = load_ok(text);
    let names: Vec<_> = cluster.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(cluster.nodes[2].unschedulable);

    let (path, err) = load_err(
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n",
    );
    assert_eq!(
        err,
        format!(
            "duplicate Node a: {path}: document 1 items[1] repeats {path}: document 1 items[0]"
        )
    );
}

#[test]
fn folders_are_read_recursively_in_path_order() {
    let scratch = Scratch::new();
    scratch.write("b.yaml", &node("from-b", "1"));
    scratch.write("a/z.yml", &node("from-a-z", "1"));
    scratch.write(
        "a.json",
        r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "from-a-json"}}"#,
    );
    scratch.write("notes.txt", "not yaml at all: [");
    scratch.write(".hidden/x.yaml", &node("hidden", "1"));
    scratch.write("..data/y.yaml", &node("data", "1"));
    let extra = scratch.write("extra/file.manifest", &node("explicit", "1"));
    let cluster = load_paths(&[scratch.0.clone(), extra]).expect("loads");
    let names: Vec<_> = cluster.nodes.iter().map(|n| n.name.as_str()).collect();
    // Paths compare by component: folder "a" sorts before file "a.json".
    assert_eq!(names, ["from-a-z", "from-a-json", "from-b", "explicit"]);
}

#[test]
fn unreadable_paths_are_named() {
    let scratch = Scratch::new();
    let missing = scratch.0.join("nope.yaml");
    let err = load_paths(&[&missing])
        .expect_err("missing file")
        .to_string();
    assert!(
        err.starts_with(&format!("{}: cannot read: ", missing.display())),
        "{err}"
    );

    let bin = scratch.0.join("bin.yaml");
    fs::write(&bin, [0xff, 0xfe, 0x00, 0x41]).expect("write");
    let err = load_paths(&[&bin]).expect_err("not UTF-8").to_string();
    assert!(
        err.starts_with(&format!("{}: cannot read: ", bin.display())),
        "{err}"
    );
}

#[test]
fn empty_folder_warns() {
    let scratch = Scratch::new();
    let empty = scratch.0.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let nodes = scratch.0.join("nodes.yaml");
    fs::write(&nodes, node("n1", "1")).unwrap();
    let cluster = load_paths(&[&empty, &nodes]).expect("loads");
    assert_eq!(cluster.warnings.len(), 1);
    assert!(cluster.warnings[0].contains("no *.yaml"));
    // Alone, the empty folder is nothing to load.
    let err = load_paths(&[&empty]).unwrap_err().to_string();
    assert!(err.starts_with("nothing to load: "), "{err}");
}

#[test]
fn node_readiness_and_taints() {
    let text = "apiVersion: v1
kind: Node
metadata: {name: node-a}
spec:
  unschedulable: true
  taints:
  - {key: gpu, value: 'yes', effect: NoSchedule}
status:
  conditions:
  - {type: MemoryPressure, status: 'False'}
  - {type: Ready, status: 'False'}
";
    let cluster = load_ok(text);
    let n = &cluster.nodes[0];
    assert!(!n.ready);
    assert!(n.unschedulable);
    assert_eq!(n.taints[0].key, "gpu");
    assert!(n.allocatable.is_empty());
}

/// Walks `dir` for `cluster.yaml` files one level down.
fn case_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path().join("cluster.yaml"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn conformance_clusters_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    assert!(root.is_dir(), "{} is missing", root.display());
    let mut checked = 0;
    for file in case_files(&root.join("podgroups")) {
        let cluster = load_paths(&[&file]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!cluster.scheduling_pods.is_empty(), "{}", file.display());
        assert!(
            cluster.warnings.is_empty(),
            "{}: {:?}",
            file.display(),
            cluster.warnings
        );
        checked += 1;
    }
    for suite in ["placement", "admission"] {
        for file in case_files(&root.join(suite)) {
            let cluster = load_paths(&[&file]).unwrap_or_else(|e| panic!("{e}"));
            let names: Vec<_> = cluster
                .workloads
                .iter()
                .map(|w| format!("{}/{}", w.namespace, w.name))
                .collect();
            assert_eq!(names, ["default/job"], "{}", file.display());
            assert!(
                cluster.warnings.is_empty(),
                "{}: {:?}",
                file.display(),
                cluster.warnings
            );
            assert!(!cluster.kueue.topologies.is_empty(), "{}", file.display());
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "no cluster.yaml found under {}",
        root.display()
    );
    println!("loaded {checked} conformance clusters");
}

/// Document numbers as the loader assigns them, one per non-empty document.
fn numbers(text: &str) -> Vec<usize> {
    parse_yaml_documents(Path::new("t.yaml"), text)
        .expect("parses")
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn document_numbers_count_empty_documents() {
    assert_eq!(numbers("a: 1\n---\nb: 2\n"), [1, 2]);
    assert_eq!(numbers("---\na: 1\n---\nb: 2\n"), [1, 2]);
    assert_eq!(numbers("# c\n---\n---\na: 1\n--- {b: 2}\n"), [2, 3]);
    assert_eq!(numbers("~\n---\na: 1\n"), [2]);
    assert_eq!(
        numbers("%YAML 1.2\n---\na: 1\n---\n---\nb: |\n  x\n  ---y\n"),
        [1, 3]
    );
    assert_eq!(numbers("a: 1\r\n---\r\nb: 2\r\n"), [1, 2]);
    assert_eq!(numbers("héllo: wörld\n---\n---\nü: 1\n"), [1, 3]);
    // `...` ends a document; the next may start without `---` (the parser decides).
    assert_eq!(numbers("a: 1\n...\nb: 2\n...\n---\nc: 3\n"), [1, 2, 3]);
    assert_eq!(numbers("a: 1\n...\n---\n...\n---\nc: 3\n"), [1, 3]);
}

#[test]
fn marker_scan_agrees_with_the_parser() {
    let cases = [
        "a: 1\n---\nb: 2\n",
        "# c\n\n---\n---\na: 1\n--- {b: 2}\n---\n# x\n---\nc: [1]\n",
        "%YAML 1.2\n---\na: &x {q: 1}\nb: *x\n",
        "---\n~\n---\nnull\n---\n'x'\n",
        "  # indented comment\n---\na: 1\n",
        "key: |\n  ---not a marker\n---\nb: 2\n",
    ];
    for text in cases {
        let docs: Vec<serde_saphyr::Spanned<Value>> =
            serde_saphyr::from_multiple(text).expect("parses");
        let by_markers = document_starts_by_markers(text).expect("no `...`");
        let by_parsing = document_starts_by_parsing(text).expect("scans");
        for d in docs {
            let span = d.referenced.span();
            let byte = span.byte_offset().expect("string source");
            assert_eq!(
                by_markers.partition_point(|&s| s <= byte),
                by_parsing.partition_point(|&s| s <= span.offset()),
                "{text:?}"
            );
        }
    }
}

#[test]
fn older_and_list_shapes() {
    let text = "apiVersion: kueue.x-k8s.io/v1alpha1
kind: Topology
metadata: {name: old}
spec:
  levels: [{nodeLabel: kubernetes.io/hostname}]
---
apiVersion: v1
kind: List
---
apiVersion: v1
kind: List
items: null
";
    let cluster = load_ok(text);
    assert_eq!(cluster.kueue.topologies["old"].spec.levels.len(), 1);
    assert!(cluster.warnings.is_empty(), "{:?}", cluster.warnings);

    let (path, err) = load_err("apiVersion: v1\nkind: List\nitems: {a: 1}\n");
    assert_eq!(
        err,
        format!("{path}: document 1 (List): items: must be a list")
    );
}

#[test]
fn pod_group_label_needs_a_total_count() {
    let text = "apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: {kueue.x-k8s.io/pod-group-name: g}
spec:
  containers: [{name: c}]
";
    let (path, err) = load_err(text);
    assert_eq!(
        err,
        format!(
            "{path}: document 1 (Pod default/p): \
             metadata.annotations[\"kueue.x-k8s.io/pod-group-total-count\"]: \
             missing (required with the kueue.x-k8s.io/pod-group-name label)"
        )
    );
}

#[test]
fn local_queue_needs_a_cluster_queue() {
    let (path, err) = load_err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: ns}\n",
    );
    assert_eq!(
        err,
        format!(
            "{path}: document 1 (LocalQueue ns/q): spec.clusterQueue: missing (a LocalQueue \
             must name its ClusterQueue)"
        )
    );
    let (_, err) = load_err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q}\nspec: {}\n",
    );
    assert!(
        err.contains("(LocalQueue default/q): spec: missing field `clusterQueue`"),
        "{err}"
    );
}

mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn load_text(text: &str) -> Result<(), LoadError> {
        let mut loader = Loader::default();
        let path = Path::new("fuzz.yaml");
        for (document, value) in parse_documents(path, text)? {
            let at = Source {
                path: path.to_path_buf(),
                document,
                item: None,
            };
            loader.load_document(at, value)?;
        }
        loader.finish().map(|_| ())
    }

    proptest! {
        #[test]
        fn any_text_loads_or_fails_cleanly(text in "\\PC{0,200}") {
            let _ = load_text(&text);
        }

        #[test]
        fn yaml_shaped_text_loads_or_fails_cleanly(
            text in "(apiVersion: (v1|batch/v1|kueue.x-k8s.io/v1beta2)\n|kind: (Node|Pod|Job|List|ClusterQueue)\n|metadata: \\{name: [a-c]\\}\n|spec: \\{[a-zA-Z]{0,8}: [-0-9a-z]{0,4}\\}\n|status: \\{allocatable: \\{cpu: [0-9a-z]{0,3}\\}\\}\n|items: \\[\\{\\}\\]\n|---\n|  - x\n|: \n){0,12}"
        ) {
            let _ = load_text(&text);
        }
    }
}

const POD_GROUPS: &str = r#"
apiVersion: scheduling.k8s.io/v1alpha3
kind: CompositePodGroup
metadata: {name: job, namespace: ml}
spec:
  schedulingPolicy: {gang: {minGroupCount: 2}}
  schedulingConstraints: {topology: [{key: zone}]}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: workers, namespace: ml}
spec:
  parentCompositePodGroupName: job
  schedulingPolicy: {gang: {minCount: 2}}
  schedulingConstraints: {topology: [{key: rack}]}
---
apiVersion: kube-tas.io/v1alpha1
kind: PodGroup
metadata: {name: driver, namespace: ml}
spec:
  parentCompositePodGroupName: job
  schedulingPolicy: {basic: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: w-0, namespace: ml}
spec:
  schedulingGroup: {podGroupName: workers}
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: w-1, namespace: ml}
spec:
  nodeName: n1
  schedulingGroup: {podGroupName: workers}
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: d-0, namespace: ml, labels: {kube-tas.io/pod-group: driver}}
spec:
  containers: [{name: c}]
"#;

#[test]
fn workload_api_groups_and_their_pods_load_in_file_order() {
    let c = load_ok(POD_GROUPS);
    let groups: Vec<(&str, bool, Option<&str>)> = c
        .scheduling_groups
        .iter()
        .map(|g| (g.name.as_str(), g.composite, g.parent.as_deref()))
        .collect();
    assert_eq!(
        groups,
        [
            ("job", true, None),
            ("workers", false, Some("job")),
            ("driver", false, Some("job"))
        ]
    );
    assert_eq!(
        c.scheduling_groups[2].origin,
        crate::cluster::scheduling_groups::Origin::KubeTas
    );
    // Pending members wait for their group; a bound one is usage of its group.
    let pending: Vec<&str> = c
        .scheduling_pods
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(pending, ["w-0", "d-0"]);
    assert!(
        c.workloads.is_empty(),
        "not Kueue workloads: {:?}",
        c.workloads
    );
    let [bound] = c.bound_pods.as_slice() else {
        panic!("{:?}", c.bound_pods)
    };
    assert_eq!(bound.group.kind, WorkloadKind::SchedulingGroup);
    assert_eq!(bound.group.to_string(), "PodGroup ml/workers");
    // Scoring counts 100m / 200Mi for what a container does not request.
    assert_eq!(bound.scoring.get("memory"), Some(&(200 << 20)));
}

#[test]
fn a_bad_workload_api_group_names_file_object_and_field() {
    let (path, err) = load_err(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n\
         spec: {schedulingPolicy: {gang: {minCount: 0}}}\n",
    );
    assert!(err.starts_with(&path), "{err}");
    assert!(
        err.contains("(PodGroup default/g): spec.schedulingPolicy.gang.minCount: Invalid value: 0"),
        "{err}"
    );
    let (_, err) = load_err(
        "apiVersion: kube-tas.io/v1alpha1\nkind: CompositePodGroup\nmetadata: {name: c}\n\
         spec: {schedulingPolicy: {basic: {}, gang: {minGroupCount: 1}}}\n",
    );
    assert!(
        err.contains("CompositePodGroup default/c") && err.contains("not both"),
        "{err}"
    );
    // A PodGroup at a version kube-tas does not read is skipped with a warning.
    let c = load_ok(&format!(
        "{}---\napiVersion: scheduling.k8s.io/v1alpha9\nkind: PodGroup\nmetadata: {{name: g}}\n\
         spec: {{}}\n",
        node("n1", "1")
    ));
    assert!(c.scheduling_groups.is_empty());
    assert!(
        c.warnings[0].contains("not read by kube-tas"),
        "{:?}",
        c.warnings
    );
    let (_, err) = load_err(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {kube-tas.io/pod-group: g}}\n\
         spec: {containers: [{name: c, resources: {requests: {cpu: 1x}}}]}\n",
    );
    assert!(
        err.contains("Pod default/p") && err.contains("cpu"),
        "{err}"
    );
}

/// A stream past [`PARALLEL_YAML_BYTES`]: `nodes` nodes, an empty document after the first.
fn big_stream(nodes: usize, last_cpu: &str) -> String {
    let mut text = format!("{}---\n", node("n-0", "8"));
    for i in 1..nodes {
        let cpu = if i + 1 == nodes { last_cpu } else { "8" };
        text.push_str("---\n");
        text.push_str(&node(&format!("n-{i}"), cpu));
    }
    assert!(text.len() >= PARALLEL_YAML_BYTES, "{} bytes", text.len());
    text
}

#[test]
fn a_large_stream_parsed_in_pieces_keeps_order_and_numbering() {
    let text = big_stream(5000, "8");
    let starts = document_starts_by_markers(&text).expect("markers only");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        let docs = parse_yaml_in_pieces(&text, &starts).expect("parsed in pieces");
        let numbers: Vec<usize> = docs.iter().map(|(n, _)| *n).collect();
        // Document 2 is the empty one.
        assert_eq!(&numbers[..3], &[1, 3, 4]);
        assert_eq!(numbers.len(), 5000);
        assert_eq!(numbers[4999], 5001);
    }
    let cluster = load_ok(&text);
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    let want: Vec<String> = (0..5000).map(|i| format!("n-{i}")).collect();
    assert_eq!(names, want);
}

#[test]
fn a_large_stream_names_the_document_and_line_of_a_problem() {
    let (path, err) = load_err(&big_stream(5000, "8x"));
    assert_eq!(
        err,
        format!(
            "{path}: document 5001 (Node n-4999): status.allocatable.cpu: invalid quantity \"8x\""
        )
    );
    // A syntax error in the last piece is reported at its line in the whole file.
    let mut text = big_stream(5000, "8");
    let lines = text.lines().count();
    text.push_str("---\nkind: [unclosed\n");
    let (path, err) = load_err(&text);
    // The bracket opens on the last line; the parser finds it unclosed at the stream's end.
    let at = |line: usize| format!("{path}:{line}:");
    assert!(
        err.starts_with(&at(lines + 2)) || err.starts_with(&at(lines + 3)),
        "{err} (the file has {lines} lines before the bad document)"
    );
}
