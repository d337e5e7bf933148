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

/// Installs the SIGTERM and SIGINT (Ctrl-C) handlers now (on unix; elsewhere Ctrl-C alone,
/// installed on the first poll) and returns a future that resolves on the first of them.
/// Call it before the server is marked ready: a signal that arrives between "ready" and the
/// first poll of a lazily installed handler would otherwise take the default action and kill
/// the process without draining. If a handler cannot be installed, that signal is logged and
/// ignored rather than treated as received. Must be called inside the runtime.
pub fn signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &'static str| {
            let installed = signal(kind);
            async move {
                match installed {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "cannot listen for {name}");
                        std::future::pending::<()>().await;
                    }
                }
            }
        };
        let interrupt = listen(SignalKind::interrupt(), "SIGINT");
        let term = listen(SignalKind::terminate(), "SIGTERM");
        async move {
            tokio::select! {
                () = interrupt => tracing::info!("SIGINT received, shutting down"),
                () = term => tracing::info!("SIGTERM received, shutting down"),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => tracing::info!("Ctrl-C received, shutting down"),
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    /// The handlers are in place when `signal` returns, before its future is first polled: a
    /// SIGTERM sent in between is caught (a lazily installed handler would let it kill the
    /// whole test process).
    #[tokio::test]
    async fn a_sigterm_sent_before_the_first_poll_is_caught() {
        let stop = super::signal();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("the SIGTERM was not seen");
    }
}
