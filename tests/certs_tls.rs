//! `kube-tas certs` end to end: the certificate it writes is served by `serve`, a client that
//! trusts only the CA it wrote verifies it for the name the API server dials, and a second run
//! (same CA, new serving certificate) is served without a restart. `--write-ca-bundle` fills
//! the repository's two configuration files, keeping their comments.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;

use common::{ScratchDir, example_extender, examples_dir, http1};
use kube_tas::server::{ServeConfig, start};

/// The name the API server verifies for Service kube-tas in kube-tas-system.
const SERVICE_HOST: &str = "kube-tas.kube-tas-system.svc";

fn certs(out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kube-tas"))
        .args([
            "certs",
            "--service",
            "kube-tas",
            "--namespace",
            "kube-tas-system",
        ])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("kube-tas runs")
}

/// Runs `certs` and expects success; returns (stdout, stderr).
fn certs_ok(out: &Path, extra: &[&str]) -> (String, String) {
    let output = certs(out, extra);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "certs failed: {stderr}");
    (stdout, stderr)
}

fn cert_der(path: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(path)
        .unwrap_or_else(|e| panic!("{}: no PEM certificate: {e}", path.display()))
}

/// A TLS client (HTTP/1.1) that trusts only `ca`.
fn client(ca: CertificateDer<'static>) -> tokio_rustls::TlsConnector {
    common::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Handshakes as `host`; returns the stream and the leaf certificate the server sent.
async fn handshake(
    connector: &tokio_rustls::TlsConnector,
    addr: std::net::SocketAddr,
    host: &str,
) -> std::io::Result<(
    tokio_rustls::client::TlsStream<TcpStream>,
    CertificateDer<'static>,
)> {
    let tcp = TcpStream::connect(addr).await?;
    let tls = connector
        .connect(ServerName::try_from(host.to_string()).unwrap(), tcp)
        .await?;
    let leaf = tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned();
    Ok((tls, leaf))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certs_are_served_verified_and_rotated_without_restart() {
    common::install_crypto_provider();
    let scratch = ScratchDir::new("certs-tls");
    let out = scratch.path().join("dev"); // created by `certs`
    let (stdout, stderr) = certs_ok(&out, &[]);
    let ca_pem = std::fs::read(out.join("ca.crt")).unwrap();
    assert_eq!(
        stdout,
        format!("{}\n", BASE64.encode(&ca_pem)),
        "stdout is the caBundle"
    );
    assert!(stderr.contains("created a new development CA"), "{stderr}");
    let first_leaf = cert_der(&out.join("tls.crt"));

    let config = ServeConfig {
        cluster: vec![examples_dir()],
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        tls_cert: Some(out.join("tls.crt")),
        tls_key: Some(out.join("tls.key")),
        tls_reload_interval: Duration::from_millis(100),
        ..ServeConfig::default()
    };
    let server = start(&config, example_extender()).await.unwrap();
    let addr = server.main_addr();
    let trusts_our_ca = client(cert_der(&out.join("ca.crt")));

    // Verified against ca.crt for the Service name; a real HTTP answer comes back.
    let (tls, served) = handshake(&trusts_our_ca, addr, SERVICE_HOST).await.unwrap();
    assert_eq!(served, first_leaf, "the served leaf is tls.crt");
    let (status, body) = http1(tls, "POST", "/scheduler/bind", "{}").await;
    assert_eq!(status, hyper::StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert!(answer["Error"].is_string(), "{answer}");

    // A client trusting another CA, or dialing a name the certificate lacks, is refused.
    let other_ca = {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    };
    assert!(
        handshake(&client(other_ca), addr, SERVICE_HOST)
            .await
            .is_err()
    );
    assert!(
        handshake(&trusts_our_ca, addr, "kube-tas.elsewhere.svc")
            .await
            .is_err()
    );

    // Second run: same CA (byte for byte, same caBundle), a new serving certificate.
    let (stdout_again, stderr) = certs_ok(&out, &[]);
    assert!(stderr.contains("reused the CA"), "{stderr}");
    assert_eq!(std::fs::read(out.join("ca.crt")).unwrap(), ca_pem);
    assert_eq!(stdout_again, stdout);
    let second_leaf = cert_der(&out.join("tls.crt"));
    assert_ne!(second_leaf, first_leaf);

    // Served without a restart, still verified against the same CA.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (tls, served) = handshake(&trusts_our_ca, addr, SERVICE_HOST)
            .await
            .expect("the CA did not change, so every handshake verifies");
        if served == second_leaf {
            let (status, _) = http1(tls, "GET", "/no-such-route", "").await;
            assert_eq!(status, hyper::StatusCode::NOT_FOUND);
            break;
        }
        assert_eq!(served, first_leaf, "only the old or the new certificate");
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server
        .shutdown(Duration::ZERO, Duration::from_secs(1))
        .await
        .unwrap();
}

fn repo_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

#[test]
fn write_ca_bundle_fills_both_repository_configs() {
    let scratch = ScratchDir::new("certs-bundle");
    let webhook = scratch.path().join("mutating-webhook.yaml");
    let scheduler = scratch.path().join("scheduler-config.yaml");
    let webhook_before =
        std::fs::read_to_string(repo_file("webhooks/mutating-webhook.yaml")).unwrap();
    let scheduler_before =
        std::fs::read_to_string(repo_file("webhooks/scheduler-config.yaml")).unwrap();
    std::fs::write(&webhook, &webhook_before).unwrap();
    std::fs::write(&scheduler, &scheduler_before).unwrap();

    let out = scratch.path().join("dev");
    let (stdout, stderr) = certs_ok(
        &out,
        &[
            "--write-ca-bundle",
            webhook.to_str().unwrap(),
            "--write-ca-bundle",
            scheduler.to_str().unwrap(),
        ],
    );
    let ca_pem = std::fs::read(out.join("ca.crt")).unwrap();
    let bundle = stdout.trim_end();
    assert_eq!(BASE64.decode(bundle).unwrap(), ca_pem);
    assert!(stderr.contains("mutating-webhook.yaml"), "{stderr}");
    assert!(stderr.contains("scheduler-config.yaml"), "{stderr}");

    // Both still parse, and carry the CA.
    let webhook_after = std::fs::read_to_string(&webhook).unwrap();
    let config: MutatingWebhookConfiguration = serde_saphyr::from_str(&webhook_after).unwrap();
    let hooks = config.webhooks.unwrap();
    assert_eq!(hooks[0].client_config.ca_bundle.as_ref().unwrap().0, ca_pem);
    let scheduler_after = std::fs::read_to_string(&scheduler).unwrap();
    let parsed: Value = serde_saphyr::from_str(&scheduler_after).unwrap();
    let ca_data = parsed["extenders"][0]["tlsConfig"]["caData"]
        .as_str()
        .unwrap();
    assert_eq!(BASE64.decode(ca_data).unwrap(), ca_pem);

    // Nothing else changed: comments, indentation and every other value are as they were.
    let placeholder = kube_tas::certs::CA_BUNDLE_PLACEHOLDER;
    assert_eq!(webhook_after, webhook_before.replace(placeholder, bundle));
    assert_eq!(
        scheduler_after,
        scheduler_before.replace(placeholder, bundle)
    );
    assert!(webhook_after.contains("# Fail: if kube-tas cannot be reached"));
    assert!(scheduler_after.contains("# TLS to the Service."));

    // Again with the same CA: the files already hold this bundle and stay as they are.
    certs_ok(&out, &["--write-ca-bundle", webhook.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&webhook).unwrap(), webhook_after);
}

#[test]
fn a_file_without_a_ca_bundle_key_is_bad_input_and_nothing_is_written() {
    let scratch = ScratchDir::new("certs-nokey");
    let config = scratch.path().join("config.yaml");
    std::fs::write(&config, "# no key here\nkind: ConfigMap\ndata: {}\n").unwrap();
    let out = scratch.path().join("dev");
    let output = certs(&out, &["--write-ca-bundle", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("config.yaml"), "{stderr}");
    assert!(
        stderr.contains("caBundle") && stderr.contains("caData"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    assert!(!out.exists(), "no certificate written on bad input");

    let output = certs(&out, &["--ip", "not-an-ip"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--ip"));
    let output = Command::new(env!("CARGO_BIN_EXE_kube-tas"))
        .args([
            "certs",
            "--service",
            "Kube_TAS",
            "--namespace",
            "ns",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--service \"Kube_TAS\""));
}
