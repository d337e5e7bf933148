//! The axum handler for `POST /mutate`: parse the AdmissionReview, decide, answer.
//!
//! Every answer is HTTP 200 with an AdmissionReview, because the API server treats any other
//! status as a failed call (and then applies `failurePolicy` with a message nobody can act
//! on). A review that cannot be read is refused with code 400 and says why; its `uid` is
//! echoed when it can be found at all. The body is parsed by hand (never an axum extractor
//! rejection, P10); the server's body-limit layer answers 413 beyond its size.
//!
//! The decision is pure CPU work of some tens of microseconds over an immutable view, so it
//! runs on the async worker: no lock, no blocking-pool hop.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use tracing::field::{Empty, display};

use super::mutation::{Decision, Webhook, shorten};
use super::review::{
    API_VERSION, AdmissionResponse, AdmissionReviewIn, AdmissionReviewOut, KIND, Status,
};
use crate::server::metrics::Metrics;

/// The webhook route, `POST /mutate`, counting decisions into `metrics`.
pub fn routes(webhook: Webhook, metrics: Metrics) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .with_state((webhook, metrics))
}

#[tracing::instrument(
    name = "mutate",
    skip_all,
    fields(uid = Empty, kind = Empty, object = Empty, dry_run = Empty, decision = Empty)
)]
async fn mutate(State((webhook, metrics)): State<(Webhook, Metrics)>, body: Bytes) -> Response {
    let review = review(&webhook, &body);
    let response = &review.response;
    let decision = match (&response.status, &response.patch) {
        (Some(s), _) if s.code == 400 => "invalid",
        (Some(_), _) => "denied",
        (None, Some(_)) => "patched",
        (None, None) => "allowed",
    };
    tracing::Span::current().record("decision", decision);
    if let Some(status) = &response.status {
        tracing::info!(code = status.code, message = %status.message, "refused");
    }
    metrics.observe_admission(decision);
    match serde_json::to_vec(&review) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The answer to one request body: always an AdmissionReview.
pub fn review(webhook: &Webhook, body: &[u8]) -> AdmissionReviewOut {
    let parsed = match serde_json::from_slice::<AdmissionReviewIn<'_>>(body) {
        Ok(parsed) => parsed,
        Err(e) => return unreadable(body, format!("cannot read the AdmissionReview: {e}")),
    };
    let envelope = |response| AdmissionReviewOut {
        api_version: parsed.api_version.clone(),
        kind: parsed.kind.clone(),
        response,
    };
    // A body without its envelope (`{}`): answered in kube-tas's own, naming what is missing.
    let missing: Vec<&str> = [
        ("apiVersion", parsed.api_version.is_empty()),
        ("kind", parsed.kind.is_empty()),
    ]
    .into_iter()
    .filter_map(|(field, empty)| empty.then_some(field))
    .collect();
    if !missing.is_empty() {
        let message = missing
            .iter()
            .map(|f| format!("{f}: Required value"))
            .collect::<Vec<_>>()
            .join("; ");
        return AdmissionReviewOut {
            api_version: API_VERSION.to_string(),
            kind: KIND.to_string(),
            response: AdmissionResponse {
                uid: parsed.request.map(|r| r.uid).unwrap_or_default(),
                allowed: false,
                status: Some(Status::failure(
                    400,
                    format!("not an {API_VERSION} {KIND}: {message}"),
                )),
                ..Default::default()
            },
        };
    }
    if parsed.api_version != API_VERSION || parsed.kind != KIND {
        return envelope(AdmissionResponse {
            uid: parsed.request.map(|r| r.uid).unwrap_or_default(),
            allowed: false,
            status: Some(Status::failure(
                400,
                format!(
                    "apiVersion {:?}, kind {:?}: kube-tas answers only {API_VERSION} \
                     {KIND} (set admissionReviewVersions: [v1])",
                    parsed.api_version, parsed.kind
                ),
            )),
            ..Default::default()
        });
    }
    let Some(request) = &parsed.request else {
        return envelope(AdmissionResponse {
            status: Some(Status::failure(400, "request: Required value")),
            ..Default::default()
        });
    };
    let span = tracing::Span::current();
    span.record("uid", request.uid.as_str());
    span.record("kind", display(&request.kind));
    span.record(
        "object",
        display(format_args!(
            "{}/{}",
            request.namespace.as_deref().unwrap_or(""),
            request.name.as_deref().unwrap_or("")
        )),
    );
    span.record("dry_run", request.dry_run.unwrap_or(false));
    let mut response = AdmissionResponse {
        uid: request.uid.clone(),
        ..Default::default()
    };
    match webhook.decide(request) {
        Decision::Allow { patch, warnings } => {
            response.allowed = true;
            response.warnings = warnings;
            if !patch.is_empty() {
                match serde_json::to_vec(&patch) {
                    Ok(bytes) => {
                        response.patch_type = Some("JSONPatch".to_string());
                        response.patch = Some(STANDARD.encode(bytes));
                    }
                    Err(e) => {
                        response.allowed = false;
                        response.status = Some(Status::failure(
                            500,
                            format!("kube-tas could not encode its patch: {e}"),
                        ));
                    }
                }
            }
        }
        Decision::Deny { code, message } => {
            response.status = Some(Status::failure(code, message));
        }
    }
    envelope(response)
}

/// A refusal for a body that is not an AdmissionReview, echoing whatever envelope and uid
/// can still be found in it.
fn unreadable(body: &[u8], message: String) -> AdmissionReviewOut {
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Loose {
        #[serde(default)]
        api_version: Option<String>,
        #[serde(default)]
        kind: Option<String>,
        #[serde(default)]
        request: Option<LooseRequest>,
    }
    #[derive(Deserialize, Default)]
    struct LooseRequest {
        #[serde(default)]
        uid: Option<String>,
    }
    let loose: Loose = serde_json::from_slice(body).unwrap_or_default();
    let message = if body.is_empty() {
        "cannot read the AdmissionReview: the request body is empty".to_string()
    } else {
        shorten(message)
    };
    AdmissionReviewOut {
        api_version: loose.api_version.unwrap_or_else(|| API_VERSION.to_string()),
        kind: loose.kind.unwrap_or_else(|| KIND.to_string()),
        response: AdmissionResponse {
            uid: loose.request.and_then(|r| r.uid).unwrap_or_default(),
            allowed: false,
            status: Some(Status::failure(400, message)),
            ..Default::default()
        },
    }
}
