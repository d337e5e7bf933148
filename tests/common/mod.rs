//! Helpers shared by the integration tests: the rustls provider (P2), scratch directories, an
//! extender over the `examples/` cluster, and tiny HTTP/1.1 and TLS clients.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use kube_tas::extender::Extender;
use kube_tas::plans::PlanBook;
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
    Extender::new(PlanBook::new(
        cluster,
        FeatureGates::default(),
        Duration::from_secs(60),
    ))
}

/// A well-formed `ExtenderArgs` body (cache mode).
pub const GOOD_ARGS: &str = r#"{"Pod":{"metadata":{"name":"p-0","namespace":"default","uid":"u-0"},
    "spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}},
    "Nodes":null,"NodeNames":["b1-r1-h1","b1-r1-h2"]}"#;

/// A well-formed `ExtenderBindingArgs` body.
pub const GOOD_BINDING: &str =
    r#"{"PodName":"p-0","PodNamespace":"default","PodUID":"u-0","Node":"b1-r1-h1"}"#;

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
