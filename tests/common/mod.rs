//! Helpers shared by the integration tests: the rustls provider (P2), scratch directories, an
//! extender over the `examples/` cluster, in-process router calls, tiny HTTP/1.1 and TLS
//! clients, a keep-alive HTTP/1.1 client, and the conformance suite's cases ([`conformance`]).
#![allow(dead_code)] // each test binary uses its own subset

pub mod conformance;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use kube_tas::extender::Extender;

use kube_tas::topology::FeatureGates;

/// Installs ring as the process-wide rustls provider, once (tests have no `main`).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Creates `kube-tas-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "kube-tas-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("cannot create a scratch dir");
        Self(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// An extender over the `examples/` cluster with Kueue's default gates.
pub fn example_extender() -> Extender {
    let cluster = kube_tas::cluster::load_paths(&[examples_dir()]).expect("examples load");
    Extender::over_cluster(&cluster, FeatureGates::default(), Duration::from_secs(60))
}

/// A well-formed `ExtenderArgs` body (cache mode).
pub const GOOD_ARGS: &str = r#"{"Pod":{"metadata":{"name":"p-0","namespace":"default","uid":"u-0"},
    "spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}},
    "Nodes":null,"NodeNames":["b1-r1-h1","b1-r1-h2"]}"#;

/// A well-formed `ExtenderBindingArgs` body.
pub const GOOD_BINDING: &str =
    r#"{"PodName":"p-0","PodNamespace":"default","PodUID":"u-0","Node":"b1-r1-h1"}"#;

/// Calls `router` in process with a JSON `body`; returns the status, the `Content-Type` ("" when
/// absent) and the whole body.
pub async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    body: impl Into<Body>,
) -> (StatusCode, String, Bytes) {
    send_request(
        router,
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.into())
            .unwrap(),
    )
    .await
}

/// Calls `router` in process with `request`; returns as [`send`] does.
pub async fn send_request(router: &Router, request: Request<Body>) -> (StatusCode, String, Bytes) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, content_type, body)
}

/// Sends one HTTP/1.1 request over `stream`; returns the status and the whole body.
pub async fn http1<S>(stream: S, method: &str, path: &str, body: &str) -> (StatusCode, Bytes)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP handshake");
    tokio::spawn(conn);
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let response = sender.send_request(request).await.expect("HTTP response");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, body)
}

/// A POST's answer, as read by [`KeepAlive::post`].
pub struct Reply {
    pub status: StatusCode,
    /// The `Content-Type` header ("" when absent or not text).
    pub content_type: String,
    pub body: Bytes,
}

/// POSTs over one keep-alive HTTP/1.1 connection to a running server, opened on first use and
/// reopened when the server has closed it.
pub struct KeepAlive {
    addr: SocketAddr,
    /// The connection and its driver task.
    conn: Option<(SendRequest<Full<Bytes>>, JoinHandle<()>)>,
    /// Connections opened (1 when keep-alive held throughout).
    connections: usize,
}

impl KeepAlive {
    /// A client of `addr`; connects on the first [`post`](Self::post).
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            conn: None,
            connections: 0,
        }
    }

    /// Connections opened so far.
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// POSTs `body` as JSON to `path_and_query` with `Accept: accept`; the answer whatever its
    /// status, or why there is none.
    pub async fn post(
        &mut self,
        path_and_query: &str,
        accept: &str,
        body: Vec<u8>,
    ) -> Result<Reply, String> {
        let addr = self.addr;
        if self.conn.as_ref().is_none_or(|(s, _)| s.is_closed()) {
            let stream = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
            stream
                .set_nodelay(true)
                .map_err(|e| format!("TCP_NODELAY: {e}"))?;
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP handshake with {addr}: {e}"))?;
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            self.connections += 1;
            self.conn = Some((sender, task));
        }
        let (sender, _) = self.conn.as_mut().expect("connected above");
        sender
            .ready()
            .await
            .map_err(|e| format!("connection not ready: {e}"))?;
        let request = Request::builder()
            .method("POST")
            .uri(path_and_query)
            .header(header::HOST, addr.to_string())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("no response: {e}"))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("cannot read the body: {e}"))?
            .to_bytes();
        Ok(Reply {
            status,
            content_type,
            body,
        })
    }

    /// Closes the connection and waits for its task, so that the server can drain at once.
    pub async fn close(&mut self) {
        if let Some((sender, task)) = self.conn.take() {
            drop(sender);
            let _ = task.await;
        }
    }
}

/// `GET path` on a fresh connection: the status and the body as text.
pub async fn get_text(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (status, body) = http1(stream, "GET", path, "").await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// `POST path` of JSON on a fresh connection; asserts 200 and returns the JSON answer.
pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
) -> serde_json::Value {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (status, body) = http1(stream, "POST", path, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

/// Polls `check` every 25 ms until it holds; fails naming `what` after `timeout`.
pub async fn eventually(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// `serve` in live mode over `client`, running until [`LiveServe::stop`].
pub struct LiveServe {
    /// The main (extender, webhook) port.
    pub main: SocketAddr,
    /// The admin port.
    pub admin: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl LiveServe {
    /// Starts `serve` with `config` and waits until both listeners are up.
    pub async fn start(config: kube_tas::server::ServeConfig, client: kube::Client) -> Self {
        let (addrs_tx, addrs_rx) = tokio::sync::oneshot::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(kube_tas::server::live::run_with(
            config,
            client,
            async {
                let _ = stop_rx.await;
            },
            move |s| {
                let _ = addrs_tx.send((s.main_addr(), s.admin_addr()));
            },
        ));
        let (main, admin) = addrs_rx.await.unwrap();
        Self {
            main,
            admin,
            stop,
            task,
        }
    }

    /// Stops it as SIGTERM would and waits for the shutdown to finish cleanly.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}
