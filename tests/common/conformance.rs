//! The conformance cases as the HTTP conformance tests walk them: where they are (the copy in
//! `tests/conformance/`, see its README), their case
//! folders in `run.py`'s order, each case's feature gates as `run.py` passes them on, and the
//! two runtimes the tests drive a real server and a client with.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::runtime::Runtime;

use kube_tas::topology::FeatureGates;

/// The conformance folders, kept in the repository.
pub const CONFORMANCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance");

/// The gates `run.py` passes on with `--feature-gates` (its `SEMANTIC_GATES`); the others in
/// a case's `feature_gates` are dropped, as the runner drops them.
pub const SEMANTIC_GATES: &[&str] = &[
    "TASBalancedPlacement",
    "TASProfileMixed",
    "TASMultiLayerTopology",
    "TASRespectNodeAffinityPreferred",
    "TASFailedNodeReplacement",
    "TASReplaceNodeOnPodTermination",
    "TASFailedNodeReplacementFailFast",
    "TASReplaceNodeOnNodeTaints",
    "SkipReassignmentForPodOwnedWorkloads",
    "TASReplaceNodeDueToNotReadyOverFixedTime",
];

/// As long as `simulate`'s own plan TTL: every pod of a gang comes at once.
pub const PLAN_TTL: Duration = Duration::from_secs(24 * 3600);

/// One case folder.
pub struct Case {
    /// `placement/<name>`.
    pub label: String,
    /// `placement`, `admission`, ...
    pub folder: &'static str,
    /// The case's folder.
    pub dir: PathBuf,
}

/// The cases of every `required` folder (which must exist), then of every `optional` one
/// that does, in that order.
pub fn cases(required: &[&'static str], optional: &[&'static str]) -> Vec<Case> {
    let mut cases = Vec::new();
    for folder in required {
        cases.extend(cases_in(folder, true));
    }
    for folder in optional {
        cases.extend(cases_in(folder, false));
    }
    cases
}

/// Every folder holding an `expect.json` under `folder`, sorted by name (as `run.py` lists).
fn cases_in(folder: &'static str, required: bool) -> Vec<Case> {
    let root = Path::new(CONFORMANCE).join(folder);
    if !root.is_dir() {
        assert!(
            !required,
            "the conformance folder {} is missing: the repository keeps it in \
             tests/conformance/{folder}; this test must not pass without running the cases",
            root.display()
        );
        return Vec::new();
    }
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .map(|entry| entry.expect("directory entry").file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| root.join(n).join("expect.json").is_file())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| Case {
            label: format!("{folder}/{name}"),
            folder,
            dir: root.join(name),
        })
        .collect()
}

/// The `--feature-gates` value `run.py` builds from `expect.json`'s `feature_gates` (the
/// same as `case.json`'s): the semantic gates only, sorted by name.
pub fn gates_spec(expect: &Value) -> String {
    let Some(gates) = expect.get("feature_gates").and_then(Value::as_object) else {
        return String::new();
    };
    let mut items: Vec<(&String, bool)> = gates
        .iter()
        .filter(|(k, _)| SEMANTIC_GATES.contains(&k.as_str()))
        .map(|(k, v)| (k, v.as_bool().unwrap_or(false)))
        .collect();
    items.sort();
    items
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The case's gates, or why they cannot be read.
pub fn case_gates(dir: &Path) -> Result<FeatureGates, String> {
    let path = dir.join("expect.json");
    let expect: Value = std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let spec = gates_spec(&expect);
    FeatureGates::parse(&spec).map_err(|e| format!("--feature-gates {spec:?} is refused: {e}"))
}

/// The server's runtime, with worker threads of its own, and the client's, which runs on the
/// test's thread only inside `block_on` while a request is in flight.
pub fn runtimes() -> (Runtime, Runtime) {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("kube-tas-server")
        .enable_all()
        .build()
        .expect("server runtime");
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    (server, client)
}
