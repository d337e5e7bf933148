//! The floor `kube-tas bench` compares against (performance.md §6): a minimal axum server on
//! the same runtime that reads the same bodies the cheapest correct way and decides nothing.
//!
//! * `filter` and `prioritize`: the Pod kept as unparsed raw JSON, the names borrowed from the
//!   body and each looked up in a set of the cluster's node names (foldhash); the answer
//!   passes (or scores) the first 16 known names (filter's answer written by hand, each name
//!   copied as it came);
//! * [`FILTER_EVERY_NAME`]: the same filter passing every known name, the answer a lone pod
//!   must get when nothing is held (the scheduler drops each node the answer leaves out): what
//!   the protocol alone costs for such an answer, to tell it from what kube-tas adds;
//! * `/mutate`: the review read as untyped JSON (the object included), answered `allowed` with
//!   a fixed one-operation JSON Patch and the request's `uid`.
//!
//! Whatever kube-tas costs above this is what its decisions cost.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::value::RawValue;

/// How many names the floor passes or scores.
pub const ANSWERED_NAMES: usize = 16;

/// The floor's filter that passes every known name (not a kube-tas route).
pub const FILTER_EVERY_NAME: &str = "/scheduler/filter-every-name";

#[derive(Deserialize)]
struct Args<'a> {
    #[serde(rename = "Pod", borrow)]
    _pod: &'a RawValue,
    #[serde(rename = "NodeNames", borrow, default)]
    node_names: Option<Vec<&'a str>>,
}

/// The floor's routes: `/scheduler/filter`, `/scheduler/prioritize` and `/mutate`.
pub fn router(node_names: impl IntoIterator<Item = String>) -> Router {
    let names: Arc<FloorNames> = Arc::new(node_names.into_iter().collect());
    Router::new()
        .route("/scheduler/filter", post(filter))
        .route(FILTER_EVERY_NAME, post(filter_every_name))
        .route("/scheduler/prioritize", post(prioritize))
        .route("/mutate", post(mutate))
        .with_state(names)
}

/// The first `limit` names of `args` that `names` knows.
fn known<'a>(names: &FloorNames, args: &Args<'a>, limit: usize) -> Vec<&'a str> {
    args.node_names
        .iter()
        .flatten()
        .copied()
        .filter(|n| names.contains(*n))
        .take(limit)
        .collect()
}

/// The node names the floor knows, hashed as fast as kube-tas hashes (performance.md §6.2:
/// "borrowed parse plus ahash lookup"; foldhash is as fast).
pub type FloorNames = HashSet<String, foldhash::fast::RandomState>;

/// The floor's filter, without HTTP: `None` for a body it cannot read.
pub fn filter_answer(names: &FloorNames, body: &[u8]) -> Option<Vec<u8>> {
    filter_passing(names, body, ANSWERED_NAMES)
}

/// The floor's filter passing every known name, without HTTP: `None` for a body it cannot
/// read.
pub fn filter_every_name_answer(names: &FloorNames, body: &[u8]) -> Option<Vec<u8>> {
    filter_passing(names, body, usize::MAX)
}

fn filter_passing(names: &FloorNames, body: &[u8], limit: usize) -> Option<Vec<u8>> {
    let args = serde_json::from_slice::<Args>(body).ok()?;
    let pass = known(names, &args, limit);
    // Written by hand, the cheapest correct way: a name read as a borrowed `&str` had no
    // escape in the body, so it holds no quote, backslash or control character either and is
    // written as it is.
    const HEAD: &[u8] = br#"{"Nodes":null,"NodeNames":["#;
    const TAIL: &[u8] = br#"],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}"#;
    let names_bytes: usize = pass.iter().map(|n| n.len() + 3).sum();
    let mut out = Vec::with_capacity(HEAD.len() + names_bytes + TAIL.len());
    out.extend_from_slice(HEAD);
    for (i, name) in pass.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(TAIL);
    Some(out)
}

/// The floor's prioritize, without HTTP: `None` for a body it cannot read.
pub fn prioritize_answer(names: &FloorNames, body: &[u8]) -> Option<Vec<u8>> {
    let args = serde_json::from_slice::<Args>(body).ok()?;
    let hosts: Vec<serde_json::Value> = known(names, &args, ANSWERED_NAMES)
        .into_iter()
        .map(|h| serde_json::json!({"Host": h, "Score": 10}))
        .collect();
    serde_json::to_vec(&hosts).ok()
}

/// The floor's `/mutate`, without HTTP: `None` for a body it cannot read.
pub fn mutate_answer(body: &[u8]) -> Option<Vec<u8>> {
    let review = serde_json::from_slice::<serde_json::Value>(body).ok()?;
    // `[{"op":"add","path":"/metadata/labels/kube-tas.io~1floor","value":"1"}]`, base64.
    let patch = "W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscy9rdWJlLXRhcy5pb34xZmxvb3IiLCJ2YWx1ZSI6IjEifV0=";
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true,
                     "patchType": "JSONPatch", "patch": patch}
    }))
    .ok()
}

async fn filter(State(names): State<Arc<FloorNames>>, body: Bytes) -> Response {
    json(filter_answer(&names, &body))
}

async fn filter_every_name(State(names): State<Arc<FloorNames>>, body: Bytes) -> Response {
    json(filter_every_name_answer(&names, &body))
}

async fn prioritize(State(names): State<Arc<FloorNames>>, body: Bytes) -> Response {
    json(prioritize_answer(&names, &body))
}

async fn mutate(body: Bytes) -> Response {
    json(mutate_answer(&body))
}

fn json(answer: Option<Vec<u8>>) -> Response {
    match answer {
        Some(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        None => StatusCode::BAD_REQUEST.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passing(answer: Option<Vec<u8>>) -> Vec<String> {
        let answer: serde_json::Value = serde_json::from_slice(&answer.unwrap()).unwrap();
        serde_json::from_value(answer["NodeNames"].clone()).unwrap()
    }

    /// The floor's filter passes the first 16 known names; its every-name filter passes each
    /// known name, in the order sent, and neither passes a name it does not know. The
    /// hand-written answer is the JSON a filter answer is.
    #[test]
    fn the_floor_passes_sixteen_names_or_every_known_name() {
        let known: Vec<String> = (0..20).map(|i| format!("node-{i:02}")).collect();
        let names: FloorNames = known.iter().cloned().collect();
        let mut sent = known.clone();
        sent.insert(3, "not-a-node".to_string());
        let body = serde_json::to_vec(&serde_json::json!({"Pod": {}, "NodeNames": sent})).unwrap();

        assert_eq!(
            passing(filter_answer(&names, &body)),
            known[..ANSWERED_NAMES]
        );
        let every = filter_every_name_answer(&names, &body).unwrap();
        let every: serde_json::Value = serde_json::from_slice(&every).unwrap();
        let expected = serde_json::json!({
            "Nodes": null, "NodeNames": known, "FailedNodes": {},
            "FailedAndUnresolvableNodes": {}, "Error": ""
        });
        assert_eq!(every, expected);
        assert_eq!(filter_every_name_answer(&names, b"{"), None);
    }
}
