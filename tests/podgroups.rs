//! The Workload-API conformance cases (`tests/conformance/podgroups`, kube-scheduler 1.37's
//! own placement of PodGroups and CompositePodGroups) checked in process against their
//! `expect.json`, as the shared runner checks the release binary: `fits`, then the pods per
//! domain with every path cut to `compare_levels` values (which node inside the constraint
//! domain is kube-scheduler's per-pod choice), per PodSet for a CompositePodGroup. Also the
//! shape `simulate -o json` promises: the kind, `levels` and `count` of each PodSet.
//! Every mismatch of every case is reported at once.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;

use common::conformance::{self, case_gates};
use kube_tas::cluster::load_paths;
use kube_tas::simulate;

/// The cases must be there and this many of them run.
const MIN_CASES: usize = 10;

/// Pods per domain path cut to `compare_levels` values (all of them without it).
fn domains(pod_set: &Value, compare_levels: Option<usize>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for d in pod_set["domains"].as_array().into_iter().flatten() {
        let values: Vec<&str> = d["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let cut = compare_levels.map_or(values.len(), |k| k.min(values.len()));
        *out.entry(values[..cut].join("/")).or_insert(0) += d["count"].as_i64().unwrap_or(0);
    }
    out
}

fn want_domains(want: &Value) -> BTreeMap<String, i64> {
    want["domains"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(-1)))
        .collect()
}

fn levels(v: &Value) -> Vec<String> {
    v["levels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect()
}

/// Compares one PodSet with its expectation; problems are pushed to `bad`.
fn check_pod_set(
    label: &str,
    got: &Value,
    want: &Value,
    compare_levels: Option<usize>,
    bad: &mut Vec<String>,
) {
    let fits = got["fits"].as_bool().unwrap_or(false);
    if Some(fits) != want["fits"].as_bool() {
        bad.push(format!(
            "{label}: fits={fits}, want {}; message: {}",
            want["fits"], got["message"]
        ));
        return;
    }
    if let Some(count) = want["count"].as_i64()
        && got["count"].as_i64() != Some(count)
    {
        bad.push(format!("{label}: count {}, want {count}", got["count"]));
    }
    if want.get("levels").is_some() && levels(got) != levels(want) {
        bad.push(format!(
            "{label}: levels {:?}, want {:?}",
            levels(got),
            levels(want)
        ));
    }
    if fits {
        let (g, w) = (domains(got, compare_levels), want_domains(want));
        if g != w {
            bad.push(format!("{label}: domains {g:?}, want {w:?}"));
        }
        if let Some(placed) = want["placed"].as_i64() {
            let n: i64 = g.values().sum();
            if n != placed {
                bad.push(format!("{label}: {n} pods placed, want {placed}"));
            }
        }
    } else if let Some(m) = want["message"].as_str() {
        let got_message = got["message"].as_str().unwrap_or("");
        if !got_message.contains(m) {
            bad.push(format!("{label}: message {got_message:?} lacks {m:?}"));
        }
    }
}

#[test]
fn every_podgroups_case_places_as_kube_scheduler_does() {
    let cases = conformance::cases(&["podgroups"], &[]);
    assert!(
        cases.len() >= MIN_CASES,
        "only {} podgroups cases; expected at least {MIN_CASES}",
        cases.len()
    );
    let mut bad = Vec::new();
    let (mut fitting, mut not_fitting) = (0, 0);
    for case in &cases {
        let label = &case.label;
        let expect: Value = serde_json::from_str(
            &std::fs::read_to_string(case.dir.join("expect.json")).expect("expect.json"),
        )
        .expect("expect.json is JSON");
        let gates = case_gates(&case.dir).unwrap_or_else(|e| panic!("{label}: {e}"));
        let cluster =
            load_paths(&[case.dir.join("cluster.yaml")]).unwrap_or_else(|e| panic!("{label}: {e}"));
        let out = simulate::run(&cluster, &gates).to_json();
        let name = expect["workload"].as_str().expect("workload");
        let (namespace, name) = name.split_once('/').expect("namespace/name");
        let Some(w) = out["workloads"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|w| w["namespace"] == namespace && w["name"] == name)
        else {
            bad.push(format!("{label}: workload {namespace}/{name} missing"));
            continue;
        };
        if w["kind"] != expect["kind"] {
            bad.push(format!(
                "{label}: kind {}, want {}",
                w["kind"], expect["kind"]
            ));
        }
        if expect["fits"].as_bool() == Some(true) {
            fitting += 1;
        } else {
            not_fitting += 1;
        }
        let pod_sets = w["podSets"].as_array().cloned().unwrap_or_default();
        let top_levels = expect["compare_levels"].as_u64().map(|k| k as usize);
        match expect["podsets"].as_object() {
            None => {
                let [only] = pod_sets.as_slice() else {
                    bad.push(format!("{label}: {} podSets, want one", pod_sets.len()));
                    continue;
                };
                if only["name"] != "main" {
                    bad.push(format!("{label}: podSet {}, want main", only["name"]));
                }
                check_pod_set(label, only, &expect, top_levels, &mut bad);
            }
            Some(want_sets) => {
                for (leaf, want) in want_sets {
                    let Some(got) = pod_sets.iter().find(|p| p["name"] == leaf.as_str()) else {
                        bad.push(format!("{label}: podSet {leaf} missing"));
                        continue;
                    };
                    let k = want["compare_levels"]
                        .as_u64()
                        .map(|k| k as usize)
                        .or(top_levels);
                    check_pod_set(&format!("{label} [{leaf}]"), got, want, k, &mut bad);
                }
            }
        }
    }
    // The sample holds both outcomes; a test that only ever sees one proves half.
    assert!(
        fitting > 0 && not_fitting > 0,
        "{fitting} fitting, {not_fitting} not"
    );
    assert!(
        bad.is_empty(),
        "{} mismatch(es):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The table says what the JSON says: a PodGroup that does not exist, or a gang that fits
/// nowhere, is `NO FIT` with its reason; a placed one is `PLACED` in its domain.
#[test]
fn the_table_reports_pod_groups_as_the_json_does() {
    let table = |case: &str| {
        let dir = std::path::Path::new(conformance::CONFORMANCE)
            .join("podgroups")
            .join(case);
        let cluster = load_paths(&[dir.join("cluster.yaml")]).expect("the case loads");
        simulate::run(&cluster, &Default::default()).to_table()
    };
    let missing = table("pods-of-a-missing-podgroup-are-not-placed");
    assert!(
        missing.contains("NO FIT   PodGroup default/ghost: 2 pod(s)")
            && missing.contains("PodGroup default/ghost does not exist"),
        "{missing}"
    );
    assert!(!missing.contains("SKIPPED"), "{missing}");
    let nowhere = table("gang-fits-nowhere-stays-pending");
    assert!(
        nowhere.contains("NO FIT   PodGroup default/pg1")
            && nowhere.contains("no rack fits 3 pods"),
        "{nowhere}"
    );
    let placed = table("composite-zone-rack-workers-and-driver");
    assert!(
        placed.contains("PLACED   CompositePodGroup default/workload-root [workload-workers]: 8/8 pod(s) in zone zone-1, rack rack-1"),
        "{placed}"
    );
}
