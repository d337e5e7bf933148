//! Graceful shutdown: on SIGTERM or SIGINT, readiness turns 503 first, then the main server
//! stops accepting and drains in-flight requests for at most a grace period, then the admin
//! server stops.
//!
//! Order matters: kubelet and the endpoints controller learn from `/readyz` that we are
//! leaving while `/healthz` stays 200, so the pod is not restarted mid-drain. The grace period
//! must stay below the pod's `terminationGracePeriodSeconds` (30 s by default).

use std::net::SocketAddr;
use std::time::Duration;

use axum_server::Handle;

use super::admin::Readiness;

/// Resolves on the first SIGTERM or SIGINT (Ctrl-C). If a handler cannot be installed, that
/// signal is logged and ignored rather than treated as received.
pub async fn signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received, shutting down"),
        () = term => tracing::info!("SIGTERM received, shutting down"),
    }
}

/// Starts the drain of the main server: readiness off, then `graceful_shutdown(grace)` (open
/// connections finish their requests; after `grace` they are closed).
pub fn begin(readiness: &Readiness, main: &Handle<SocketAddr>, grace: Duration) {
    readiness.begin_shutdown();
    main.graceful_shutdown(Some(grace));
}
