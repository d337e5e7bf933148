//! axum handlers for the extender routes: `POST /scheduler/filter`, `/scheduler/prioritize`
//! and `/scheduler/bind`.
//!
//! Each handler takes the raw body and parses it itself, so that every problem with a request
//! is answered in the protocol's own shape and never as an axum extractor rejection (P10):
//!
//! | route | good request | bad body |
//! |---|---|---|
//! | `filter` | 200 `ExtenderFilterResult` | 200 `ExtenderFilterResult{Error}` |
//! | `bind` | 200 `ExtenderBindingResult` | 200 `{"Error": ...}` |
//! | `prioritize` | 200 bare `HostPriority` array | 400 with a plain-text message |
//!
//! The one rejection left to axum is reading the body itself: 413 when it is larger than the
//! server's limit, 400 when the connection breaks mid-body (nobody is left to read an answer).
//!
//! `prioritize` has no `Error` field in the protocol, and kube-scheduler ignores a failed
//! prioritize call (the extender then adds no score), so a 400 is the honest answer there.
//! `Error` strings never contain `%`: the scheduler uses them as a Go format string.
//!
//! Reading: the usual body (`Pod`, `Nodes`, `NodeNames`, names without escapes) is scanned by
//! hand, its names borrowed ([`scan`]); anything else goes to serde_json, whose errors name the
//! field.
//!
//! Depth: a hostile, deeply nested body cannot exhaust the stack. serde_json caps every
//! recursive descent at 128 levels and skips unknown fields without recursing; the wire types
//! refuse wrong shapes at the first level anyway. Size is limited by the server's body limit
//! (413), not here.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::List;
use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;
use serde::Serialize;
use tracing::Instrument;

use super::wire::{
    CandidateRequest, ExtenderArgsRef, ExtenderBindingArgs, ExtenderBindingResult,
    ExtenderFilterResult, PodOracle, RequestPod, go_format_safe, with_pod_oracle,
};
use super::{Extender, encode, scan};
use crate::cluster::meta_view::MetaView;

/// The longest parse-error message we send back or log; a serde message can quote a whole
/// (possibly huge) string value from the body.
const MAX_MESSAGE_CHARS: usize = 512;

/// The extender routes at their full paths (a nested router would cost every request a
/// second routing step).
pub fn routes(extender: Extender) -> Router {
    Router::new()
        .route("/scheduler/filter", post(filter))
        .route("/scheduler/prioritize", post(prioritize))
        .route("/scheduler/bind", post(bind))
        // Behind one `Arc`: axum clones the state for every request.
        .with_state(Arc::new(extender))
}

// The service is synchronous (a std `Mutex` around the plan book). A request in node-cache
// mode is answered on the async worker, up to every name of a 50,000-node cluster (about
// 2 MB with `percentageOfNodesToScore: 100`, the shipped setting): its work is tens of
// microseconds at the default sample and about a millisecond at 50,000 names, while a hop to
// the blocking pool and back costs about 100 µs (measured at 15,000 names: 620 against the
// floor's 551 µs with the hop, for 243 against 279 µs of service time). kube-scheduler calls
// one pod at a time, so this holds at most one of the workers; the other keeps answering the
// webhook and the probes. A body with full Node objects (`nodeCacheCapable: false`, not the
// shipped setting) is read on the worker too up to the same size, some hundreds of nodes and
// about 10 ms; larger bodies go to `spawn_blocking`. Either way a panic inside
// the service is caught and answered in protocol form instead of tearing down the
// connection. The first pod of a big gang makes its plan on the worker too (milliseconds at
// 10,000 pods, once per gang).

/// Bodies up to this size are answered on the async worker.
const INLINE_BODY_BYTES: usize = 4 << 20;

#[tracing::instrument(name = "filter", skip_all, fields(pod = tracing::field::Empty))]
async fn filter(State(extender): State<Arc<Extender>>, body: Bytes) -> Response {
    run_service("filter", body.len(), move || {
        json_bytes(filter_answer(&extender, &body))
    })
    .await
    .unwrap_or_else(|message| json_ok(&filter_error(&message)))
}

#[tracing::instrument(name = "prioritize", skip_all, fields(pod = tracing::field::Empty))]
async fn prioritize(State(extender): State<Arc<Extender>>, body: Bytes) -> Response {
    run_service("prioritize", body.len(), move || {
        match prioritize_answer(&extender, &body) {
            Ok(answer) => json_bytes(answer),
            Err(message) => plain(StatusCode::BAD_REQUEST, message),
        }
    })
    .await
    .unwrap_or_else(|message| plain(StatusCode::INTERNAL_SERVER_ERROR, message))
}

/// The service behind `POST /scheduler/filter`, without HTTP: a request body in, the JSON
/// answer out (always an `ExtenderFilterResult`; a bad body is answered with its `Error`).
/// What `kube-tas bench` and the benches time as the server's service time.
pub fn filter_answer(extender: &Extender, body: &[u8]) -> Vec<u8> {
    read_args(body, extender.seat_oracle(), |request| {
        extender.filter_json(request)
    })
    .unwrap_or_else(|message| {
        warn_bad_request("filter", &message);
        encode(&filter_error(&message))
    })
}

/// The service behind `POST /scheduler/prioritize`, without HTTP: the JSON `HostPriority`
/// array, or why the body cannot be read (answered 400).
pub fn prioritize_answer(extender: &Extender, body: &[u8]) -> Result<Vec<u8>, String> {
    read_args(body, extender.prioritize_oracle(), |request| {
        extender.prioritize_json(request)
    })
    .and_then(|answer| answer)
    .inspect_err(|message| {
        warn_bad_request("prioritize", message);
    })
}

/// Reads an `ExtenderArgs` body and hands it to `serve`: scanned by hand when it is the
/// usual shape (names borrowed, [`scan`]), else read by serde_json, which also says what is
/// wrong with a bad body. The pod's spec is left unread when `oracle` says the extender
/// answers the pod from memory ([`Extender::seat_oracle`] for `filter`,
/// [`Extender::prioritize_oracle`] for `prioritize`).
fn read_args<T>(
    body: &[u8],
    oracle: PodOracle,
    serve: impl FnOnce(CandidateRequest<'_>) -> T,
) -> Result<T, String> {
    let scanned = with_pod_oracle(oracle, || {
        scan::scan::<RequestPod<'_>, Option<List<Node>>>(body)
    });
    if let Some(scanned) = scanned {
        record_pod(&scanned.pod.metadata);
        return Ok(serve(CandidateRequest {
            pod: scanned.pod,
            nodes: scanned.nodes.flatten(),
            node_names: scanned.node_names.as_deref(),
            compact_names: scanned.compact_names,
        }));
    }
    let args = parse::<ExtenderArgsRef>(body)?;
    record_pod(&args.pod.metadata);
    let names: Option<Vec<&str>> = args
        .node_names
        .as_ref()
        .map(|v| v.iter().map(AsRef::as_ref).collect());
    Ok(serve(CandidateRequest {
        pod: RequestPod::read(args.pod),
        nodes: args.nodes,
        node_names: names.as_deref(),
        compact_names: None,
    }))
}

/// `bind` runs on the async worker: the bind body is tiny, the book's part is microseconds,
/// and the Binding write to the API server is awaited without holding any lock.
#[tracing::instrument(name = "bind", skip_all, fields(pod = tracing::field::Empty))]
async fn bind(State(extender): State<Arc<Extender>>, body: Bytes) -> Response {
    match parse::<ExtenderBindingArgs>(&body) {
        Ok(args) => {
            tracing::Span::current().record(
                "pod",
                tracing::field::display(format_args!("{}/{}", args.pod_namespace, args.pod_name)),
            );
            json_ok(&extender.bind_and_write(&args).await)
        }
        Err(message) => {
            warn_bad_request("bind", &message);
            json_ok(&bind_error(&message))
        }
    }
}

/// Runs `work` here when the body is small, else on the blocking pool, inside the current
/// span either way; a panic becomes `Err(message)`.
async fn run_service(
    route: &'static str,
    body_len: usize,
    work: impl FnOnce() -> Response + Send + 'static,
) -> Result<Response, String> {
    let failed = |e: &dyn std::fmt::Display| {
        tracing::error!(route, error = %e, "extender handler failed");
        format!("internal error in kube-tas {route}; see its log")
    };
    if body_len <= INLINE_BODY_BYTES {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .map_err(|_| failed(&"panicked"));
    }
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(work))
        .in_current_span()
        .await
        .map_err(|e| failed(&e))
}

/// Parses a request body, or says what is wrong with it (type name, field path, position).
fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, String> {
    let what = short_type_name::<T>();
    if body.is_empty() {
        return Err(format!("cannot read {what}: the request body is empty"));
    }
    // Fast path: plain serde_json. Only a body that fails is parsed again with path tracking
    // (which costs on every field) to say where the problem is.
    if let Ok(value) = serde_json::from_slice::<T>(body) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize::<_, T>(&mut de)
        .map_err(|e| describe_error(what, &e.path().to_string(), e.inner()))?;
    de.end().map_err(|e| describe_error(what, ".", &e))?;
    Ok(value)
}

fn describe_error(what: &str, path: &str, e: &serde_json::Error) -> String {
    let message = if path == "." || path.is_empty() {
        format!("cannot read {what}: {e}")
    } else {
        format!("cannot read {what}: {path}: {e}")
    };
    truncate(message)
}

fn truncate(mut message: String) -> String {
    if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
        message.truncate(cut);
        message.push_str(" ...");
    }
    message
}

/// The Go type name the scheduler sends (`ExtenderArgs` for our borrowed reading of it too).
fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    let full = full.split('<').next().unwrap_or(full);
    let short = full.rsplit("::").next().unwrap_or(full);
    short.strip_suffix("Ref").unwrap_or(short)
}

fn record_pod(meta: &MetaView) {
    tracing::Span::current().record(
        "pod",
        tracing::field::display(format_args!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or("")
        )),
    );
}

fn warn_bad_request(route: &'static str, message: &str) {
    tracing::warn!(route, error = message, "bad extender request");
}

fn filter_error(message: &str) -> ExtenderFilterResult {
    ExtenderFilterResult {
        error: go_format_safe(message),
        ..Default::default()
    }
}

fn bind_error(message: &str) -> ExtenderBindingResult {
    ExtenderBindingResult {
        error: go_format_safe(message),
    }
}

/// 200 with `value` as JSON.
fn json_ok<T: Serialize>(value: &T) -> Response {
    json_bytes(encode(value))
}

/// 200 with `bytes`, already JSON.
fn json_bytes(bytes: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response()
}

fn plain(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extender::wire::ExtenderArgs;

    #[test]
    fn empty_body_is_named() {
        let e = parse::<ExtenderArgs>(b"").unwrap_err();
        assert_eq!(e, "cannot read ExtenderArgs: the request body is empty");
    }

    #[test]
    fn missing_field_is_named() {
        let e = parse::<ExtenderArgs>(b"{}").unwrap_err();
        assert!(
            e.starts_with("cannot read ExtenderArgs: missing field `Pod`"),
            "{e}"
        );
    }

    #[test]
    fn wrong_type_names_the_field_path() {
        let e = parse::<ExtenderArgs>(br#"{"Pod":{},"NodeNames":5}"#).unwrap_err();
        assert!(
            e.starts_with("cannot read ExtenderArgs: NodeNames: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn trailing_garbage_is_refused() {
        let e = parse::<ExtenderBindingArgs>(
            br#"{"PodName":"p","PodNamespace":"n","PodUID":"u","Node":"x"} junk"#,
        )
        .unwrap_err();
        assert!(e.contains("trailing characters"), "{e}");
    }

    #[test]
    fn depth_is_capped() {
        let deep = "[".repeat(100_000);
        let e = parse::<serde_json::Value>(deep.as_bytes()).unwrap_err();
        assert!(e.contains("recursion limit exceeded"), "{e}");
    }

    #[test]
    fn long_messages_are_cut() {
        let huge = format!(r#"{{"Pod":{{}},"NodeNames":"{}"}}"#, "x".repeat(100_000));
        let e = parse::<ExtenderArgs>(huge.as_bytes()).unwrap_err();
        assert!(e.chars().count() <= MAX_MESSAGE_CHARS + 4, "{}", e.len());
    }
}
