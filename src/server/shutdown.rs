//! Graceful shutdown signals. On SIGTERM or SIGINT ([`super::RunningServer::shutdown`]):
//! readiness turns 503 at once, both ports keep serving for the shutdown delay, then the main
//! server stops accepting and drains in-flight requests for at most a grace period, then the
//! admin server stops.
//!
//! Order matters: the endpoints controller learns from `/readyz` (and from the pod's deletion)
//! that we are leaving, but kube-proxy, the API server and kube-scheduler act on that a moment
//! later; until then they still send here, and a closed port would fail their calls. `/healthz`
//! stays 200 throughout, so the pod is not restarted mid-drain. Delay plus grace must stay
//! below the pod's `terminationGracePeriodSeconds` (30 s by default).

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
