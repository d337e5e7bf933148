//! The admin router, served on its own plain-HTTP port, outside TLS and request metrics:
//!
//! * `GET /healthz`: 200 as long as the process serves HTTP (liveness);
//! * `GET /readyz`: 200 only between "loaded and listening" and the start of shutdown,
//!   503 before and after (readiness);
//! * `GET /metrics`: OpenMetrics text.
//!
//! [`Readiness`] only moves forward: starting → ready → draining. Once shutdown began,
//! nothing makes the process ready again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};

const STARTING: u8 = 0;
const READY: u8 = 1;
const DRAINING: u8 = 2;

/// Whether the server should receive traffic; shared by the admin router and the startup and
/// shutdown code. Starts not ready.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicU8>);

impl Readiness {
    /// Not ready yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ready, unless shutdown already began.
    pub fn mark_ready(&self) {
        let _ = self
            .0
            .compare_exchange(STARTING, READY, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Not ready, for good: shutdown began.
    pub fn begin_shutdown(&self) {
        self.0.store(DRAINING, Ordering::SeqCst);
    }

    /// True between [`Self::mark_ready`] and [`Self::begin_shutdown`].
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst) == READY
    }
}

#[derive(Clone)]
struct AdminState {
    readiness: Readiness,
    metrics: Metrics,
}

/// `/healthz`, `/readyz` and `/metrics`.
pub fn admin_router(readiness: Readiness, metrics: Metrics) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_handler))
        .with_state(AdminState { readiness, metrics })
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> (StatusCode, &'static str) {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

async fn metrics_handler(State(state): State<AdminState>) -> Response {
    // Encoding reads the plan book under its (std) lock, which a big filter may hold for a
    // few milliseconds: keep that off the async workers.
    let metrics = state.metrics.clone();
    match tokio::task::spawn_blocking(move || metrics.encode()).await {
        Ok(Ok(text)) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response(),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot encode metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "metrics encoding failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_moves_forward_only() {
        let r = Readiness::new();
        assert!(!r.is_ready());
        r.mark_ready();
        assert!(r.is_ready());
        r.begin_shutdown();
        assert!(!r.is_ready());
        r.mark_ready();
        assert!(!r.is_ready());
    }
}
