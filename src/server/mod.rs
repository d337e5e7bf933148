//! `kube-tas serve`: the HTTP servers around the extender.
//!
//! * the **main** port (TLS when a certificate is given): `/scheduler/{filter,prioritize,bind}`
//!   and the admission webhook `/mutate` ([`main_router`]), with a request-body limit (413 beyond it), a request timeout and
//!   per-route metrics;
//! * the **admin** port (always plain HTTP): `/healthz`, `/readyz`, `/metrics`
//!   ([`admin::admin_router`]).
//!
//! Submodules: [`admin`] (probes, [`admin::Readiness`]), [`metrics`] (prometheus-client
//! registry), [`tls`] (rustls config and hot reload), [`shutdown`] (signals and drain).
//!
//! Lifecycle ([`run`]): validate the configuration, load the cluster, build the plan book,
//! bind both listeners ([`start`]), become ready, serve until SIGTERM/SIGINT, then drain
//! (readiness 503 first, see [`shutdown`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum_server::Handle;
use tokio::task::JoinHandle;
use tower_http::timeout::TimeoutLayer;

use crate::admission::Webhook;
use crate::extender::Extender;
use crate::topology::FeatureGates;

pub mod admin;
pub mod client_auth;
pub mod live;
pub mod metrics;
pub mod shutdown;
pub mod tls;

use admin::Readiness;
use client_auth::{AllowedClients, ClientPolicy};
use metrics::Metrics;
use tls::{ServingCert, TlsFiles};

/// Default request-body limit: a `nodeCacheCapable: false` filter request for 15k nodes is
/// several MB; a 50k-name `NodeNames` list is about 2 MB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A request (body included) that takes longer than this is answered 408. kube-scheduler
/// gives up after its `httpTimeout` (5 s by default) anyway.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// An HTTP/1 client must send its request headers within this time (slowloris guard). TLS
/// handshakes have axum-server's own 10 s limit.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the admin server may take to close once the main server drained.
const ADMIN_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Everything `serve` needs; the command line fills it (see `cli::ServeArgs` for the flags).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Manifest files or folders holding the cluster; empty means live mode (watch the API
    /// server).
    pub cluster: Vec<PathBuf>,
    /// Live mode: the kubeconfig to use (else `KUBECONFIG`, `~/.kube/config`, in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// Live mode: elect one leader among the replicas (only it plans and binds).
    pub leader_elect: bool,
    /// Where the election's Lease lives (default: the pod's own namespace, else
    /// `kube-tas-system`).
    pub leader_election_namespace: Option<String>,
    /// The Lease's name.
    pub leader_election_id: String,
    /// This replica's identity in the election and the pod it labels as leader (the pod's
    /// name; default: the host name).
    pub pod_name: Option<String>,
    /// How long a Lease is held without renewal.
    pub lease_duration: Duration,
    /// The main (extender, webhook) listener.
    pub listen: SocketAddr,
    /// The admin (probes, metrics) listener, plain HTTP.
    pub admin_listen: SocketAddr,
    /// PEM certificate chain; TLS needs both this and [`Self::tls_key`].
    pub tls_cert: Option<PathBuf>,
    /// PEM private key.
    pub tls_key: Option<PathBuf>,
    /// CA bundle (PEM) that callers' client certificates must chain to; without it the main
    /// port takes any caller (the NetworkPolicy is then the guard). Needs TLS.
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: the identities (certificate CN or DNS/URI SAN) allowed on the
    /// extender routes; empty allows any certificate the CA signed.
    pub extender_clients: Vec<String>,
    /// With `client_ca`: the identities allowed on `/mutate`; empty allows any.
    pub webhook_clients: Vec<String>,
    /// How often the certificate files are checked for changes.
    pub tls_reload_interval: Duration,
    /// Kueue feature gates.
    pub feature_gates: FeatureGates,
    /// Plans whose pods never come expire after this.
    pub plan_ttl: Duration,
    /// Larger request bodies are answered 413.
    pub max_body_bytes: usize,
    /// After SIGTERM, how long both ports keep serving while `/readyz` already answers 503.
    pub shutdown_delay: Duration,
    /// How long in-flight requests may take to finish after the delay.
    pub shutdown_grace: Duration,
    /// Live mode: how often the ids of deleted nodes are looked at for giving back (not on
    /// the command line: [`DEFAULT_NODE_ID_SWEEP`]).
    pub node_id_sweep: Duration,
}

/// How often live mode gives back the ids of deleted nodes nothing refers to any more.
pub const DEFAULT_NODE_ID_SWEEP: Duration = Duration::from_secs(60);

impl Default for ServeConfig {
    /// The command line's defaults (no cluster, no TLS).
    fn default() -> Self {
        Self {
            cluster: Vec::new(),
            kubeconfig: None,
            leader_elect: true,
            leader_election_namespace: None,
            leader_election_id: "kube-tas".to_string(),
            pod_name: None,
            lease_duration: Duration::from_secs(15),
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            admin_listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            extender_clients: Vec::new(),
            webhook_clients: Vec::new(),
            tls_reload_interval: Duration::from_secs(10),
            feature_gates: FeatureGates::default(),
            plan_ttl: Duration::from_secs(60),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_delay: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(20),
            node_id_sweep: DEFAULT_NODE_ID_SWEEP,
        }
    }
}

/// A configuration `serve` cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--kubeconfig` with `--cluster`.
    #[error(
        "--kubeconfig and --cluster exclude each other: --cluster serves a cluster given as \
         manifest files, --kubeconfig (or none of both) watches the API server"
    )]
    ClusterAndKubeconfig,
    /// One of `--tls-cert` / `--tls-key` without the other.
    #[error(
        "{given} is given but {missing} is missing: give both for TLS, or neither for plain HTTP"
    )]
    HalfTls {
        /// The flag given.
        given: &'static str,
        /// The flag missing.
        missing: &'static str,
    },
    /// `--client-ca` without a serving certificate: client certificates need TLS.
    #[error("--client-ca needs TLS: give --tls-cert and --tls-key too")]
    ClientCaWithoutTls,
    /// An empty allowed client name (`--extender-client-names=`, `a,,b`): it would read as
    /// "no list", which allows every certificate of the CA.
    #[error(
        "{flag} has an empty name: give the identities to allow (certificate CN or SAN), or \
         leave the flag out to allow every certificate the --client-ca signed"
    )]
    EmptyClientName {
        /// The flag given.
        flag: &'static str,
    },
    /// Allowed client names without `--client-ca`: nothing would check them.
    #[error(
        "{flag} is given without --client-ca: client names are only checked on certificates \
         signed by that CA"
    )]
    ClientNamesWithoutCa {
        /// The flag given.
        flag: &'static str,
    },
}

impl ServeConfig {
    /// Checks what can be checked without I/O; returns the TLS files when TLS is on.
    pub fn validate(&self) -> Result<Option<TlsFiles>, ConfigError> {
        if !self.cluster.is_empty() && self.kubeconfig.is_some() {
            return Err(ConfigError::ClusterAndKubeconfig);
        }
        self.tls_files()
    }

    fn tls_files(&self) -> Result<Option<TlsFiles>, ConfigError> {
        for (flag, names) in [
            ("--extender-client-names", &self.extender_clients),
            ("--webhook-client-names", &self.webhook_clients),
        ] {
            if names.iter().any(|n| n.trim().is_empty()) {
                return Err(ConfigError::EmptyClientName { flag });
            }
        }
        if self.client_ca.is_none() {
            for (flag, names) in [
                ("--extender-client-names", &self.extender_clients),
                ("--webhook-client-names", &self.webhook_clients),
            ] {
                if !names.is_empty() {
                    return Err(ConfigError::ClientNamesWithoutCa { flag });
                }
            }
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.client_ca.clone(),
            })),
            (None, None) if self.client_ca.is_some() => Err(ConfigError::ClientCaWithoutTls),
            (None, None) => Ok(None),
            (Some(_), None) => Err(ConfigError::HalfTls {
                given: "--tls-cert",
                missing: "--tls-key",
            }),
            (None, Some(_)) => Err(ConfigError::HalfTls {
                given: "--tls-key",
                missing: "--tls-cert",
            }),
        }
    }
}

/// The main router with the default body limit and a metrics registry of its own: the
/// `/scheduler/*` routes and `/mutate` as [`start`] serves them.
pub fn main_router(extender: Extender) -> Router {
    let metrics = Metrics::new(extender.clone());
    main_router_with(extender, &metrics, DEFAULT_MAX_BODY_BYTES)
}

/// The main router counting into `metrics`, refusing bodies over `max_body_bytes` with 413.
pub fn main_router_with(extender: Extender, metrics: &Metrics, max_body_bytes: usize) -> Router {
    main_router_for(extender, metrics, max_body_bytes, None)
}

/// [`main_router_with`], and with a client policy, callers it does not allow refused before
/// anything else (see [`client_auth`]).
pub fn main_router_for(
    extender: Extender,
    metrics: &Metrics,
    max_body_bytes: usize,
    clients: Option<Arc<ClientPolicy>>,
) -> Router {
    let webhook = Webhook::new(extender.state().clone(), extender.gates().clone());
    let mut router = crate::extender::http::routes(extender)
        .merge(crate::admission::http::routes(webhook, metrics.clone()));
    // Layers added later wrap the earlier ones: metrics sees the client check's 401s and 403s,
    // and the handlers' 413s (their body is read as `Bytes`, within the limit set below).
    if let Some(policy) = clients {
        router = router.route_layer(axum::middleware::from_fn_with_state(
            policy,
            client_auth::require_client,
        ));
    }
    router
        .route_layer(metrics::TrackLayer::new(metrics.clone()))
        // Replaces axum's 2 MB default for `Bytes`: one limit, applied where the body is read.
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

/// Both servers, listening. Dropping it does not stop them; call [`Self::shutdown`].
pub struct RunningServer {
    main_addr: SocketAddr,
    admin_addr: SocketAddr,
    readiness: Readiness,
    metrics: Metrics,
    main_handle: Handle<SocketAddr>,
    admin_handle: Handle<SocketAddr>,
    main_task: JoinHandle<std::io::Result<()>>,
    admin_task: JoinHandle<std::io::Result<()>>,
    reloader: Option<JoinHandle<()>>,
}

impl RunningServer {
    /// Where the main server listens (the real port when configured with port 0).
    pub fn main_addr(&self) -> SocketAddr {
        self.main_addr
    }

    /// Where the admin server listens.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The readiness `/readyz` reports; [`start`] leaves it not ready.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// The metrics both servers share.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Resolves only if a server stops by itself, with why.
    pub async fn failed(&mut self) -> anyhow::Error {
        let (which, result) = tokio::select! {
            r = &mut self.main_task => ("main", r),
            r = &mut self.admin_task => ("admin", r),
        };
        match result {
            Ok(Ok(())) => anyhow::anyhow!("the {which} server stopped unexpectedly"),
            Ok(Err(e)) => anyhow::Error::new(e).context(format!("the {which} server failed")),
            Err(e) => anyhow::Error::new(e).context(format!("the {which} server task failed")),
        }
    }

    /// Readiness off at once while both servers keep serving for `delay` (so the endpoints
    /// controller and the load balancers stop sending here before any connection is refused),
    /// then the main server drained (at most `grace`), then the admin server stopped.
    pub async fn shutdown(self, delay: Duration, grace: Duration) -> anyhow::Result<()> {
        let stopping = self.stop_main(delay, grace).await;
        stopping.finish().await
    }

    /// The first part of [`Self::shutdown`]: readiness off, `delay` of serving, the main
    /// server drained. What else must stop before the admin server (live mode: the watches
    /// and the election) stops between this and [`Stopping::finish`].
    pub async fn stop_main(self, delay: Duration, grace: Duration) -> Stopping {
        self.readiness.begin_shutdown();
        if !delay.is_zero() {
            tracing::info!(
                delay_seconds = delay.as_secs_f64(),
                "not ready; still serving until the endpoints are updated"
            );
            tokio::time::sleep(delay).await;
        }
        let main = stop_server(&self.main_handle, self.main_task, grace).await;
        tracing::info!("main server drained");
        Stopping {
            main,
            admin_handle: self.admin_handle,
            admin_task: self.admin_task,
            reloader: self.reloader,
        }
    }
}

/// How often a graceful shutdown is asked for again until the server stops: axum-server's
/// accept loop hears the request only while it waits for a connection, so one asked while it
/// sets a connection up would be lost.
const SHUTDOWN_REPEAT: Duration = Duration::from_millis(50);

/// Stops one server: graceful shutdown (open connections get `grace` to finish), asked again
/// until the accept loop has heard it; past `grace` and a second more, the task is aborted.
async fn stop_server(
    handle: &Handle<SocketAddr>,
    mut task: JoinHandle<std::io::Result<()>>,
    grace: Duration,
) -> Result<std::io::Result<()>, tokio::task::JoinError> {
    let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(1);
    handle.graceful_shutdown(Some(grace));
    loop {
        tokio::select! {
            result = &mut task => return result,
            () = tokio::time::sleep(SHUTDOWN_REPEAT) => {}
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!("a server did not stop within its grace period; closing it");
            task.abort();
            return match task.await {
                Err(e) if e.is_cancelled() => Ok(Ok(())),
                other => other,
            };
        }
        // Only the accept loop listens for this again; connections already draining keep
        // the deadline the first call set.
        handle.graceful_shutdown(Some(grace));
    }
}

/// A server whose main port has drained and whose admin port still answers (probes,
/// metrics) until [`Self::finish`].
pub struct Stopping {
    main: Result<std::io::Result<()>, tokio::task::JoinError>,
    admin_handle: Handle<SocketAddr>,
    admin_task: JoinHandle<std::io::Result<()>>,
    reloader: Option<JoinHandle<()>>,
}

impl Stopping {
    /// Stops the admin server; reports how the main server ended.
    pub async fn finish(self) -> anyhow::Result<()> {
        let admin = stop_server(&self.admin_handle, self.admin_task, ADMIN_SHUTDOWN_GRACE).await;
        if let Some(reloader) = self.reloader {
            reloader.abort();
        }
        self.main
            .context("the main server task failed")?
            .context("the main server failed")?;
        admin
            .context("the admin server task failed")?
            .context("the admin server failed")?;
        Ok(())
    }
}

/// Binds both listeners and serves `extender` (TLS when the config names a certificate,
/// polling it for changes). Not ready yet: the caller marks [`RunningServer::readiness`]
/// when everything else is in place. `config.cluster` is not read here.
pub async fn start(config: &ServeConfig, extender: Extender) -> anyhow::Result<RunningServer> {
    let tls_files = config.tls_files()?;
    let metrics = Metrics::new(extender.clone());
    let readiness = Readiness::new();
    let serving_cert = match tls_files {
        Some(files) => Some(
            ServingCert::load(files, metrics.clone())
                .await
                .context("cannot load the TLS certificate (--tls-cert, --tls-key)")?,
        ),
        None => None,
    };

    let main_listener = std::net::TcpListener::bind(config.listen)
        .with_context(|| format!("cannot listen on {} (--listen)", config.listen))?;
    let admin_listener = std::net::TcpListener::bind(config.admin_listen)
        .with_context(|| format!("cannot listen on {} (--admin-listen)", config.admin_listen))?;
    let main_addr = main_listener.local_addr()?;
    let admin_addr = admin_listener.local_addr()?;

    let clients = config.client_ca.as_ref().map(|_| {
        Arc::new(ClientPolicy {
            extender: AllowedClients::new(config.extender_clients.iter().cloned()),
            webhook: AllowedClients::new(config.webhook_clients.iter().cloned()),
        })
    });
    let main_app =
        main_router_for(extender, &metrics, config.max_body_bytes, clients).into_make_service();
    let main_handle = Handle::new();
    let (main_task, reloader) = match serving_cert {
        Some(cert) => {
            let server = axum_server::from_tcp_rustls(main_listener, cert.rustls_config())
                .context("cannot use the main listener")?;
            let server = with_timeouts(server).handle(main_handle.clone());
            let task = tokio::spawn(server.serve(main_app));
            (task, Some(cert.spawn_reloader(config.tls_reload_interval)))
        }
        None => {
            let server =
                axum_server::from_tcp(main_listener).context("cannot use the main listener")?;
            let server = with_timeouts(server).handle(main_handle.clone());
            (tokio::spawn(server.serve(main_app)), None)
        }
    };

    let admin_app = admin::admin_router(readiness.clone(), metrics.clone()).into_make_service();
    let admin_handle = Handle::new();
    let admin_server =
        axum_server::from_tcp(admin_listener).context("cannot use the admin listener")?;
    let admin_server = with_timeouts(admin_server).handle(admin_handle.clone());
    let admin_task = tokio::spawn(admin_server.serve(admin_app));

    tracing::info!(
        address = %main_addr,
        tls = reloader.is_some(),
        client_certificates = config.client_ca.is_some(),
        "listening on /scheduler/{{filter,prioritize,bind}} and /mutate"
    );
    tracing::info!(address = %admin_addr, "admin listening on /healthz, /readyz, /metrics");
    Ok(RunningServer {
        main_addr,
        admin_addr,
        readiness,
        metrics,
        main_handle,
        admin_handle,
        main_task,
        admin_task,
        reloader,
    })
}

/// The HTTP/1 settings every listener of `serve` has (the header-read timeout).
pub(crate) fn with_timeouts<Acc>(
    mut server: axum_server::Server<SocketAddr, Acc>,
) -> axum_server::Server<SocketAddr, Acc> {
    server
        .http_builder()
        .http1()
        .header_read_timeout(HEADER_READ_TIMEOUT);
    server
}

/// `kube-tas serve`: from manifest files (`--cluster`) or from the API server (live mode),
/// serve until SIGTERM/SIGINT, drain.
pub async fn run(config: ServeConfig) -> anyhow::Result<()> {
    config.validate()?;
    if config.cluster.is_empty() {
        live::run(config).await
    } else {
        run_files(config).await
    }
}

/// Files mode: the manifests fed to the state once, every replica its own planner.
async fn run_files(config: ServeConfig) -> anyhow::Result<()> {
    let paths = config.cluster.clone();
    let started = std::time::Instant::now();
    let cluster = tokio::task::spawn_blocking(move || crate::cluster::load_paths(&paths))
        .await
        .context("loading the cluster failed")??;
    for w in &cluster.warnings {
        tracing::warn!("{w}");
    }
    tracing::info!(
        nodes = cluster.nodes.len(),
        bound_pods = cluster.bound_pods.len(),
        load_ms = started.elapsed().as_secs_f64() * 1e3,
        "cluster loaded"
    );
    let extender = Extender::over_cluster(&cluster, config.feature_gates.clone(), config.plan_ttl);
    // Every tree built before ready (the files do not change: built once).
    let notes = {
        let state = extender.state().read();
        state.warm_trees();
        state.left_out_notes()
    };
    for note in notes {
        tracing::warn!("{note}");
    }
    let stop = shutdown::signal();
    let mut server = start(&config, extender).await?;
    server.readiness().mark_ready();
    tracing::info!("ready");
    tokio::select! {
        () = stop => {}
        e = server.failed() => return Err(e),
    }
    server
        .shutdown(config.shutdown_delay, config.shutdown_grace)
        .await
}
