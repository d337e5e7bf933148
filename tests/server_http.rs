//! HTTP contracts of `kube-tas serve`: every bad body gets an answer in protocol form (filter
//! and bind: 200 with `Error`; prioritize: 400; oversized: 413) and the server keeps serving;
//! the admin probes and metrics; startup validation; and TLS with a certificate rotated
//! through a Secret-style symlink swap, served without a restart.
//!
//! These tests check the shape of answers only, never the placement decisions.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;

use common::{GOOD_ARGS, GOOD_BINDING, ScratchDir, example_extender, http1, send, send_request};
use kube_tas::server::admin::{Readiness, admin_router};
use kube_tas::server::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};
use kube_tas::server::{ServeConfig, main_router, main_router_with, start};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A filter answer: 200, JSON with every PascalCase key of `ExtenderFilterResult`.
fn assert_filter_shape(status: StatusCode, body: &[u8]) -> Value {
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(body));
    let v: Value = serde_json::from_slice(body).expect("filter answers JSON");
    for key in [
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    ] {
        assert!(v.get(key).is_some(), "filter answer lacks {key}: {v}");
    }
    v
}

/// A filter answer that reports a bad request: a non-empty `Error` without `%`.
fn assert_filter_error(status: StatusCode, body: &[u8]) -> String {
    let v = assert_filter_shape(status, body);
    let error = v["Error"].as_str().unwrap().to_string();
    assert!(!error.is_empty(), "{v}");
    assert!(!error.contains('%'), "{error}");
    assert!(error.len() < 1_000, "{error}");
    error
}

fn assert_bind_error(status: StatusCode, body: &[u8]) -> String {
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(body).expect("bind answers JSON");
    let error = v["Error"].as_str().expect("Error is a string").to_string();
    assert!(!error.is_empty() && !error.contains('%'), "{error}");
    error
}

/// Normal requests on all three routes get their protocol shapes.
async fn assert_still_serving(router: &Router) {
    let (status, _, body) = send(router, "POST", "/scheduler/filter", GOOD_ARGS).await;
    assert_filter_shape(status, &body);
    let (status, _, body) = send(router, "POST", "/scheduler/prioritize", GOOD_ARGS).await;
    assert_eq!(status, StatusCode::OK);
    assert!(serde_json::from_slice::<Value>(&body).unwrap().is_array());
    let (status, _, body) = send(router, "POST", "/scheduler/bind", GOOD_BINDING).await;
    assert_eq!(status, StatusCode::OK);
    assert!(serde_json::from_slice::<Value>(&body).unwrap()["Error"].is_string());
}

fn nested(depth: usize) -> String {
    "[".repeat(depth)
}

// ---------------------------------------------------------------------------------------------
// Bad input on the extender routes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn bad_bodies_are_answered_in_protocol_form() {
    let router = main_router(example_extender());
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), "the request body is empty"),
        (
            "truncated",
            r#"{"Pod":{"metadata":{"name":"p""#.into(),
            "EOF",
        ),
        ("not JSON", "hello, scheduler".into(), "expected value"),
        (
            "missing Pod",
            r#"{"NodeNames":["a"]}"#.into(),
            "missing field `Pod`",
        ),
        (
            "wrong type",
            r#"{"Pod":{},"NodeNames":5}"#.into(),
            "NodeNames",
        ),
        (
            "percent in value",
            r#"{"Pod":{},"NodeNames":"100%"}"#.into(),
            "100 percent",
        ),
        // 100k-deep JSON: no stack overflow anywhere. Our types refuse a sequence within the
        // first levels, serde_json skips unknown fields without recursing, and its depth
        // limit (128) guards every recursive descent.
        ("deep nesting", nested(100_000), "invalid type: sequence"),
        (
            "deep unknown field",
            format!(r#"{{"Pod":{{}},"X":{}"#, nested(100_000)),
            "EOF while parsing a list",
        ),
        (
            "deep inside the pod",
            format!(r#"{{"Pod":{{"metadata":{{"x":{}"#, nested(100_000)),
            "EOF while parsing a list",
        ),
        (
            "trailing junk",
            format!("{GOOD_ARGS} junk"),
            "trailing characters",
        ),
    ];
    for (name, body, expect) in &cases {
        let (status, content_type, answer) =
            send(&router, "POST", "/scheduler/filter", body.clone()).await;
        let error = assert_filter_error(status, &answer);
        assert!(
            error.starts_with("cannot read ExtenderArgs"),
            "{name}: {error}"
        );
        assert!(error.contains(expect), "{name}: {error}");
        assert_eq!(content_type, "application/json", "{name}");

        let (status, _, answer) =
            send(&router, "POST", "/scheduler/prioritize", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}");
        let text = String::from_utf8(answer.to_vec()).unwrap();
        // No Go format string here: the plain-text message keeps its `%`.
        let expect = if *name == "percent in value" {
            "\"100%\""
        } else {
            expect
        };
        assert!(text.contains(expect), "{name}: {text}");

        let (status, _, answer) = send(&router, "POST", "/scheduler/bind", body.clone()).await;
        let error = assert_bind_error(status, &answer);
        assert!(
            error.starts_with("cannot read ExtenderBindingArgs"),
            "{name}: {error}"
        );
    }
    // A balanced 100k-deep value in an unknown field is skipped: a normal answer.
    let deep = format!(
        r#"{{"Pod":{{"metadata":{{"name":"p"}}}},"X":{}{},"NodeNames":[]}}"#,
        nested(100_000),
        "]".repeat(100_000)
    );
    let (status, _, answer) = send(&router, "POST", "/scheduler/filter", deep).await;
    assert_filter_shape(status, &answer);
    let (status, _, answer) = send(&router, "POST", "/scheduler/bind", r#"{"PodName":7}"#).await;
    let error = assert_bind_error(status, &answer);
    assert!(error.contains("PodName"), "{error}");
    assert_still_serving(&router).await;
}

#[tokio::test]
async fn oversized_bodies_get_413_and_serving_continues() {
    let router = main_router(example_extender());
    let big = vec![b' '; 20 * 1024 * 1024];
    for route in ["filter", "prioritize", "bind"] {
        let uri = format!("/scheduler/{route}");
        // Announced by Content-Length: refused before reading.
        let request = Request::post(&uri)
            .header(header::CONTENT_LENGTH, big.len())
            .body(Body::from(big.clone()))
            .unwrap();
        let (status, _, _) = send_request(&router, request).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{route} with length");
        // No Content-Length: cut off while reading.
        let (status, _, _) = send(&router, "POST", &uri, big.clone()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{route} streamed");
    }
    assert_still_serving(&router).await;
}

#[tokio::test]
async fn body_limit_is_configurable_and_bodies_above_axum_default_pass() {
    let extender = example_extender();
    let metrics = Metrics::new(extender.clone());
    // 3 MB is above axum's own 2 MB default for `Bytes`, below our limit.
    let router = main_router_with(extender.clone(), &metrics, 4 * 1024 * 1024);
    let padded = format!("{GOOD_ARGS}{}", " ".repeat(3 * 1024 * 1024));
    let (status, _, body) = send(&router, "POST", "/scheduler/filter", padded.clone()).await;
    assert_filter_shape(status, &body);
    let small = main_router_with(extender, &metrics, 1024);
    let (status, _, _) = send(&small, "POST", "/scheduler/filter", padded).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn wrong_method_and_unknown_route_are_plain_http_errors() {
    let router = main_router(example_extender());
    let (status, _, _) = send(&router, "GET", "/scheduler/filter", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _, _) = send(&router, "POST", "/scheduler/preempt", GOOD_ARGS).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_still_serving(&router).await;
}

// ---------------------------------------------------------------------------------------------
// Admin: probes and metrics
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn probes_follow_readiness() {
    let extender = example_extender();
    let readiness = Readiness::new();
    let admin = admin_router(readiness.clone(), Metrics::new(extender));
    let status = |r: &Router, path: &'static str| {
        let r = r.clone();
        async move { send(&r, "GET", path, "").await.0 }
    };
    assert_eq!(status(&admin, "/healthz").await, StatusCode::OK);
    assert_eq!(
        status(&admin, "/readyz").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    readiness.mark_ready();
    assert_eq!(status(&admin, "/readyz").await, StatusCode::OK);
    readiness.begin_shutdown();
    assert_eq!(
        status(&admin, "/readyz").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(status(&admin, "/healthz").await, StatusCode::OK);
}

#[tokio::test]
async fn metrics_count_routes_and_show_plan_numbers() {
    let extender = example_extender();
    let metrics = Metrics::new(extender.clone());
    let router = main_router_with(extender, &metrics, 1024);
    send(&router, "POST", "/scheduler/filter", GOOD_ARGS).await;
    send(&router, "POST", "/scheduler/filter", GOOD_ARGS).await;
    send(&router, "POST", "/scheduler/prioritize", "nope").await;
    send(&router, "POST", "/scheduler/bind", vec![b' '; 4096]).await;
    send(&router, "POST", "/nowhere", "").await;

    let admin = admin_router(Readiness::new(), metrics);
    let (status, content_type, body) = send(&admin, "GET", "/metrics", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
    let text = String::from_utf8(body.to_vec()).unwrap();
    for line in [
        r#"kube_tas_http_requests_total{route="/scheduler/filter",code="200"} 2"#,
        r#"kube_tas_http_requests_total{route="/scheduler/prioritize",code="400"} 1"#,
        r#"kube_tas_http_requests_total{route="/scheduler/bind",code="413"} 1"#,
        r#"kube_tas_http_request_duration_seconds_count{route="/scheduler/filter"} 2"#,
        r#"kube_tas_http_request_duration_seconds_bucket{le="0.00002",route="/scheduler/filter"}"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    for name in [
        "kube_tas_plans_made_total ",
        "kube_tas_plans_expired_total ",
        "kube_tas_plans_active ",
        "kube_tas_seats_held ",
        "kube_tas_pods_bound_total ",
        "kube_tas_groups_not_fit_total ",
        "kube_tas_seats_reopened_total 0",
        "kube_tas_replacements_total{result=\"placed\"} 0",
        "kube_tas_replacements_total{result=\"failed\"} 0",
    ] {
        assert!(text.contains(name), "missing {name} in\n{text}");
    }
    assert!(!text.contains("nowhere"), "{text}");
    // No TLS here: no certificate expiry that would read as "expired in 1970".
    assert!(!text.contains("tls_cert_not_after"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Startup validation
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn serve_refuses_a_config_it_cannot_run() {
    // Live mode with a kubeconfig that is not there: the file is named.
    let config = ServeConfig {
        kubeconfig: Some("/does/not/exist/kubeconfig".into()),
        ..ServeConfig::default()
    };
    let error = kube_tas::server::run(config).await.unwrap_err().to_string();
    assert!(
        error.contains("cannot use --kubeconfig /does/not/exist/kubeconfig"),
        "{error}"
    );
    let config = ServeConfig {
        cluster: vec![common::examples_dir()],
        kubeconfig: Some("k.yaml".into()),
        ..ServeConfig::default()
    };
    let error = kube_tas::server::run(config).await.unwrap_err().to_string();
    assert!(error.contains("exclude each other"), "{error}");

    let config = ServeConfig {
        cluster: vec![common::examples_dir()],
        tls_cert: Some("cert.pem".into()),
        ..ServeConfig::default()
    };
    let error = kube_tas::server::run(config).await.unwrap_err().to_string();
    assert!(error.contains("--tls-key is missing"), "{error}");

    let config = ServeConfig {
        cluster: vec![common::examples_dir()],
        client_ca: Some("ca.pem".into()),
        ..ServeConfig::default()
    };
    let error = kube_tas::server::run(config).await.unwrap_err().to_string();
    assert!(error.contains("--client-ca needs TLS"), "{error}");

    let config = ServeConfig {
        cluster: vec![common::examples_dir()],
        extender_clients: vec!["system:kube-scheduler".into(), " ".into()],
        ..ServeConfig::default()
    };
    let error = kube_tas::server::run(config).await.unwrap_err().to_string();
    assert!(
        error.contains("--extender-client-names has an empty name"),
        "{error}"
    );

    let config = ServeConfig {
        cluster: vec![common::examples_dir()],
        webhook_clients: vec!["kube-apiserver".into()],
        ..ServeConfig::default()
    };
    let error = kube_tas::server::run(config).await.unwrap_err().to_string();
    assert!(
        error.contains("--webhook-client-names is given without --client-ca"),
        "{error}"
    );

    let config = ServeConfig {
        cluster: vec![common::examples_dir().join("does-not-exist.yaml")],
        ..ServeConfig::default()
    };
    assert!(kube_tas::server::run(config).await.is_err());
}

/// Runs `kube-tas --log-format FORMAT serve --cluster examples` until it logs its "ready" line
/// (not the admin line that names `/readyz`), stops it with SIGTERM, and returns everything it
/// wrote on stderr.
fn serve_logs(format: &str) -> String {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc::RecvTimeoutError;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kube-tas"))
        .args(["--log-format", format, "serve", "--cluster"])
        .arg(common::examples_dir())
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--shutdown-delay-seconds", "0"])
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Lines are read on a thread of their own, so that a server that never logs "ready" fails
    // the test at the deadline instead of blocking it in a read.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut logs = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                logs.push_str(&line);
                logs.push('\n');
                if line.ends_with(" ready") || line.contains(r#""message":"ready""#) {
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("never ready:\n{logs}");
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("serve exited before it was ready:\n{logs}")
            }
        }
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for line in lines {
        logs.push_str(&line);
        logs.push('\n');
    }
    assert!(child.wait().unwrap().success(), "{logs}");
    logs
}

/// `--log-format json` writes one JSON object per line; the text format has no colour codes
/// when stderr is not a terminal.
#[test]
fn logs_are_json_lines_or_plain_text() {
    let json = serve_logs("json");
    let lines: Vec<&str> = json.lines().collect();
    assert!(lines.len() >= 3, "{json}");
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            v["level"].is_string() && v["fields"]["message"].is_string(),
            "{line}"
        );
    }
    assert!(json.contains("SIGTERM received"), "{json}");

    let text = serve_logs("text");
    assert!(text.contains("INFO") && text.contains("ready"), "{text}");
    assert!(!text.contains('\u{1b}'), "colour codes in a pipe: {text:?}");
    assert!(serde_json::from_str::<Value>(text.lines().next().unwrap()).is_err());
}

#[test]
fn the_binary_names_a_missing_cluster_and_exits_2() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kube-tas"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .env_remove("KUBE_TAS_CLUSTER")
        .env_remove("KUBE_TAS_TLS_CERT")
        .env_remove("KUBE_TAS_TLS_KEY")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("KUBECONFIG", "/does/not/exist/kubeconfig")
        .env("HOME", "/does/not/exist")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no cluster to talk to"), "{stderr}");
    assert!(stderr.contains("--cluster PATH"), "{stderr}");

    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kube-tas"))
        .args(["serve", "--cluster", "examples", "--tls-cert", "c.pem"])
        .env_remove("KUBE_TAS_TLS_KEY")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--tls-key"), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// Real listeners: plain HTTP, then TLS with rotation
// ---------------------------------------------------------------------------------------------

fn loopback_config() -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        ..ServeConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_server_serves_probes_and_routes_then_drains() {
    let server = start(&loopback_config(), example_extender()).await.unwrap();
    let admin = server.admin_addr();
    let get = |path: &'static str| async move {
        http1(TcpStream::connect(admin).await.unwrap(), "GET", path, "").await
    };
    assert_eq!(get("/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    server.readiness().mark_ready();
    assert_eq!(get("/readyz").await.0, StatusCode::OK);
    assert_eq!(get("/healthz").await.0, StatusCode::OK);

    let main = TcpStream::connect(server.main_addr()).await.unwrap();
    let (status, body) = http1(main, "POST", "/scheduler/filter", GOOD_ARGS).await;
    assert_filter_shape(status, &body);
    let main = TcpStream::connect(server.main_addr()).await.unwrap();
    let (status, _) = http1(main, "POST", "/scheduler/filter", "{").await;
    assert_eq!(status, StatusCode::OK);

    let (_, metrics) = get("/metrics").await;
    let metrics = String::from_utf8(metrics.to_vec()).unwrap();
    assert!(
        metrics.contains(r#"kube_tas_http_requests_total{route="/scheduler/filter",code="200"} 2"#),
        "{metrics}"
    );

    let readiness = server.readiness().clone();
    let main_addr = server.main_addr();
    let started = Instant::now();
    server
        .shutdown(Duration::ZERO, Duration::from_secs(2))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!readiness.is_ready());
    assert!(
        TcpStream::connect(main_addr).await.is_err(),
        "main port still open"
    );
}

/// SIGTERM's first part: `/readyz` is 503 at once, yet both ports go on answering, on open
/// and on new connections, for the whole delay; only then does the main port close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_shutdown_delay_readiness_is_off_and_requests_are_still_answered() {
    let server = start(&loopback_config(), example_extender()).await.unwrap();
    server.readiness().mark_ready();
    let (main_addr, admin) = (server.main_addr(), server.admin_addr());
    let get = |path: &'static str| async move {
        http1(TcpStream::connect(admin).await.unwrap(), "GET", path, "").await
    };
    let delay = Duration::from_millis(1_500);
    let started = Instant::now();
    let stopping = tokio::spawn(server.shutdown(delay, Duration::from_secs(1)));

    let readiness_off = async {
        loop {
            if get("/readyz").await.0 == StatusCode::SERVICE_UNAVAILABLE {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_millis(500), readiness_off)
        .await
        .expect("/readyz turns 503 at once");
    assert_eq!(get("/healthz").await.0, StatusCode::OK, "liveness stays");
    let mut answered = 0;
    while started.elapsed() < delay - Duration::from_millis(300) {
        let main = TcpStream::connect(main_addr)
            .await
            .expect("the main port still accepts during the delay");
        let (status, body) = http1(main, "POST", "/scheduler/filter", GOOD_ARGS).await;
        assert_filter_shape(status, &body);
        answered += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered >= 5, "only {answered} requests in the delay");

    stopping.await.unwrap().unwrap();
    assert!(
        started.elapsed() >= delay,
        "closed before the delay ran out"
    );
    assert!(
        TcpStream::connect(main_addr).await.is_err(),
        "main port still open after the delay and the drain"
    );
}

struct Ca {
    cert: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

fn new_ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca {
        cert: cert.der().clone(),
        issuer: Issuer::new(params, key),
    }
}

/// A serving certificate for localhost / 127.0.0.1 signed by `ca`: (cert PEM, key PEM, DER).
fn new_leaf(ca: &Ca, serial: u64) -> (String, String, CertificateDer<'static>) {
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params.serial_number = Some(serial.into());
    params.not_after = rcgen::date_time_ymd(2040, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().clone())
}

/// Writes a Secret volume the way the kubelet does: files in a timestamped folder, a `..data`
/// symlink to it swapped atomically, and `tls.crt` / `tls.key` pointing through `..data`.
fn write_secret(dir: &Path, version: &str, cert: &str, key: &str) {
    let data = dir.join(version);
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("tls.crt"), cert).unwrap();
    std::fs::write(data.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(file)).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(file), dir.join(file)).unwrap();
        }
    }
}

fn client(ca: &Ca, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert.clone()).unwrap();
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Handshakes as `localhost`; returns the stream, the served leaf and the negotiated ALPN.
async fn handshake(
    connector: &tokio_rustls::TlsConnector,
    addr: std::net::SocketAddr,
) -> std::io::Result<(
    tokio_rustls::client::TlsStream<TcpStream>,
    CertificateDer<'static>,
    Option<Vec<u8>>,
)> {
    let tcp = TcpStream::connect(addr).await?;
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    let (_, session) = tls.get_ref();
    let leaf = session.peer_certificates().unwrap()[0].clone().into_owned();
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    Ok((tls, leaf, alpn))
}

/// A client certificate `cn` signed by `ca`: (chain, key).
fn client_cert(
    ca: &Ca,
    cn: &str,
) -> (
    Vec<CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    (vec![cert.der().clone()], key)
}

/// A client trusting `server_ca` that presents `identity` (a certificate signed by its CA).
fn client_with_cert(server_ca: &Ca, identity: Option<(&Ca, &str)>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_ca.cert.clone()).unwrap();
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let mut config = match identity {
        Some((ca, cn)) => {
            let (chain, key) = client_cert(ca, cn);
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// The first pod of the example Job `rack-required`: a filter call for it plans the gang.
const GANG_ARGS: &str = r#"{"Pod":{"metadata":{"name":"rack-required-0-x","namespace":"default",
    "uid":"u-rr-0","labels":{"batch.kubernetes.io/job-name":"rack-required",
    "batch.kubernetes.io/job-completion-index":"0"},
    "annotations":{"kueue.x-k8s.io/podset-required-topology":"cloud.provider.com/topology-rack"},
    "ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"rack-required","uid":"j",
    "controller":true}]},
    "spec":{"nodeSelector":{"node-group":"tas"},
    "containers":[{"name":"c","resources":{"requests":{"cpu":"2"}}}]}},
    "Nodes":null,"NodeNames":["b1-r1-h1","b1-r1-h2","b1-r2-h1"]}"#;

/// With `--client-ca`, each route takes only the client certificates named for it: the
/// scheduler's on the extender, the API server's on the webhook. No certificate is 401, a
/// certificate of another name 403, one from another CA fails the handshake; a refused call
/// plans nothing, while the same call from the scheduler makes a plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_checked_per_route() {
    common::install_crypto_provider();
    let dir = ScratchDir::new("client-ca");
    let (server_ca, client_ca, stranger_ca) =
        (new_ca("serving"), new_ca("clients"), new_ca("stranger"));
    let (cert, key, _) = new_leaf(&server_ca, 1);
    write_secret(dir.path(), "..v1", &cert, &key);
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, pem_of(&client_ca.cert)).unwrap();
    let config = ServeConfig {
        tls_cert: Some(dir.path().join("tls.crt")),
        tls_key: Some(dir.path().join("tls.key")),
        client_ca: Some(ca_file),
        extender_clients: vec!["system:kube-scheduler".into()],
        webhook_clients: vec!["kube-apiserver".into()],
        ..loopback_config()
    };
    let extender = example_extender();
    let server = start(&config, extender.clone()).await.unwrap();
    let addr = server.main_addr();
    let call = |connector: tokio_rustls::TlsConnector, path: &'static str, body: &'static str| async move {
        let (tls, _, _) = handshake(&connector, addr).await?;
        let (status, body) = http1(tls, "POST", path, body).await;
        Ok::<_, std::io::Error>((status, String::from_utf8_lossy(&body).into_owned()))
    };
    let scheduler = || client_with_cert(&server_ca, Some((&client_ca, "system:kube-scheduler")));
    let apiserver = || client_with_cert(&server_ca, Some((&client_ca, "kube-apiserver")));

    // No certificate: 401, nothing planned.
    let (status, body) = call(
        client_with_cert(&server_ca, None),
        "/scheduler/filter",
        GANG_ARGS,
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("client certificate"), "{body}");
    // The wrong identity for the route: 403 naming it, nothing planned.
    let (status, body) = call(apiserver(), "/scheduler/filter", GANG_ARGS)
        .await
        .unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("kube-apiserver") && body.contains("system:kube-scheduler"),
        "{body}"
    );
    let (status, body) = call(scheduler(), "/mutate", "{}").await.unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // A certificate of another CA: refused in the handshake or on the first request.
    let stranger = client_with_cert(&server_ca, Some((&stranger_ca, "system:kube-scheduler")));
    let refused = match handshake(&stranger, addr).await {
        Err(_) => true,
        Ok((tls, _, _)) => {
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                    .await
                    .map_or((None, None), |(s, c)| (Some(s), Some(c)));
            if let Some(conn) = conn {
                tokio::spawn(conn);
            }
            match sender.as_mut() {
                None => true,
                Some(sender) => {
                    let request = axum::http::Request::post("/scheduler/filter")
                        .header("host", "localhost")
                        .body(http_body_util::Full::new(axum::body::Bytes::from(
                            GANG_ARGS,
                        )))
                        .unwrap();
                    sender.send_request(request).await.is_err()
                }
            }
        }
    };
    assert!(refused, "a certificate of another CA got an answer");
    assert_eq!(extender.stats().plans_made, 0, "a refused caller planned");

    // The right identities: answered, and the scheduler's filter plans the gang.
    let (status, body) = call(apiserver(), "/mutate", "{}").await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(scheduler(), "/scheduler/filter", GANG_ARGS)
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(extender.stats().plans_made, 1, "{body}");
    server
        .shutdown(Duration::ZERO, Duration::from_secs(1))
        .await
        .unwrap();
}

/// PEM of one DER certificate.
fn pem_of(der: &CertificateDer<'_>) -> String {
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der.as_ref());
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_and_hot_reloads_a_rotated_secret() {
    common::install_crypto_provider();
    let dir = ScratchDir::new("tls");
    let (ca1, ca2) = (new_ca("ca one"), new_ca("ca two"));
    let (cert1, key1, der1) = new_leaf(&ca1, 1);
    write_secret(dir.path(), "..v1", &cert1, &key1);

    let config = ServeConfig {
        tls_cert: Some(dir.path().join("tls.crt")),
        tls_key: Some(dir.path().join("tls.key")),
        tls_reload_interval: Duration::from_millis(100),
        ..loopback_config()
    };
    let server = start(&config, example_extender()).await.unwrap();
    let addr = server.main_addr();
    let trusts_ca1 = client(&ca1, &[b"h2", b"http/1.1"]);
    let trusts_ca2 = client(&ca2, &[b"h2", b"http/1.1"]);

    let (_, served, alpn) = handshake(&trusts_ca1, addr).await.unwrap();
    assert_eq!(served, der1);
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    assert!(handshake(&trusts_ca2, addr).await.is_err());
    let metrics = server.metrics().encode().unwrap();
    assert!(
        metrics.contains("kube_tas_tls_cert_not_after_seconds 2208988800"),
        "{metrics}"
    );

    // The extender routes over TLS (HTTP/1.1).
    let (tls, _, _) = handshake(&client(&ca1, &[b"http/1.1"]), addr)
        .await
        .unwrap();
    let (status, body) = http1(tls, "POST", "/scheduler/prioritize", GOOD_ARGS).await;
    assert_eq!(status, StatusCode::OK);
    assert!(serde_json::from_slice::<Value>(&body).unwrap().is_array());

    // A broken rotation (garbage certificate) is refused; the old certificate stays.
    write_secret(dir.path(), "..v2", "not a certificate", &key1);
    tokio::time::sleep(Duration::from_millis(350)).await;
    let (_, served, _) = handshake(&trusts_ca1, addr).await.unwrap();
    assert_eq!(served, der1);

    // A real rotation to a new key and CA is served without a restart.
    let (cert2, key2, der2) = new_leaf(&ca2, 2);
    write_secret(dir.path(), "..v3", &cert2, &key2);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match handshake(&trusts_ca2, addr).await {
            Ok((_, served, _)) => {
                assert_eq!(served, der2);
                break;
            }
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(e) => panic!("the rotated certificate was never served: {e}"),
        }
    }
    assert!(handshake(&trusts_ca1, addr).await.is_err());
    server
        .shutdown(Duration::ZERO, Duration::from_secs(1))
        .await
        .unwrap();
}
