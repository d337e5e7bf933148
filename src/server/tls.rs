//! TLS for the main port: a rustls `ServerConfig` from PEM files (with client certificate
//! verification when `--client-ca` is given), and a hot reload that survives Kubernetes
//! Secret volume updates.
//!
//! Loading uses `rustls::pki_types::pem::PemObject` (not the unmaintained rustls-pemfile,
//! P4). ALPN offers `h2` then `http/1.1`: axum-server's connection builder detects either.
//!
//! Reload (P5): the kubelet updates a mounted Secret by swapping a `..data` symlink, which
//! deafens an inotify watch on the file paths. [`ServingCert::spawn_reloader`] instead polls:
//! every interval it reads the files (following the symlinks) and, when their bytes differ
//! from the last ones it saw, builds a new config. Only a pair that parses, and whose key
//! matches the certificate, replaces the served one (atomically, through
//! `RustlsConfig::reload_from_config`); anything else is logged and the previous certificate
//! stays. A broken pair is not retried until one of the files changes again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::metrics::Metrics;

/// What can go wrong loading the serving certificate.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not valid PEM of the expected kind.
    #[error("{path}: {what}: {source}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What we looked for.
        what: &'static str,
        /// Why it failed.
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no `CERTIFICATE` block.
    #[error("{path}: no CERTIFICATE block in the file")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The `--client-ca` bundle cannot verify client certificates.
    #[error("{path}: cannot use as the client CA: {message}")]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// rustls refused the pair (bad key, key not matching the certificate, ...).
    #[error("{cert} / {key}: {source}")]
    Rustls {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        source: rustls::Error,
    },
}

/// The certificate chain and private key files (PEM), as mounted from a Secret, and the CA
/// bundle client certificates must chain to (`--client-ca`), when callers must present one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first (`tls.crt`).
    pub cert: PathBuf,
    /// Private key, PKCS#8, PKCS#1 or SEC1 (`tls.key`).
    pub key: PathBuf,
    /// CA certificates (PEM) that sign the callers' client certificates.
    pub client_ca: Option<PathBuf>,
}

/// The bytes of the files last read: certificate, key, client CA (empty when none).
type Seen = (Vec<u8>, Vec<u8>, Vec<u8>);

/// The certificate being served, the files it came from, and the axum-server handle to swap
/// it.
pub struct ServingCert {
    files: TlsFiles,
    config: RustlsConfig,
    seen: Seen,
    metrics: Metrics,
}

impl ServingCert {
    /// Loads `files` (an error if they do not form a valid pair) and records the expiry in
    /// `metrics`.
    pub async fn load(files: TlsFiles, metrics: Metrics) -> Result<Self, TlsError> {
        let seen = read_files(&files).await?;
        let (config, not_after) = server_config(&files, &seen)?;
        log_loaded(&files, not_after, "loaded");
        if let Some(t) = not_after {
            metrics.set_cert_not_after(t);
        }
        Ok(Self {
            files,
            config: RustlsConfig::from_config(config),
            seen,
            metrics,
        })
    }

    /// The config to give axum-server; it follows every reload.
    pub fn rustls_config(&self) -> RustlsConfig {
        self.config.clone()
    }

    /// Re-reads the files; when their bytes changed and form a valid pair, serves the new
    /// certificate. `Ok(true)` when swapped, `Ok(false)` when nothing changed.
    pub async fn reload_if_changed(&mut self) -> Result<bool, TlsError> {
        let pair = read_files(&self.files).await?;
        if pair == self.seen {
            return Ok(false);
        }
        // Remember the pair even if it turns out broken: it is retried once a file changes
        // again, not on every tick.
        self.seen = pair;
        let (config, not_after) = server_config(&self.files, &self.seen)?;
        self.config.reload_from_config(config);
        if let Some(t) = not_after {
            self.metrics.set_cert_not_after(t);
        }
        log_loaded(&self.files, not_after, "reloaded");
        Ok(true)
    }

    /// Polls the files every `interval` (at least 10 ms) for the life of the runtime (see the
    /// module docs).
    pub fn spawn_reloader(mut self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let interval = interval.max(Duration::from_millis(10));
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await; // the first tick is immediate; the files were just loaded
            let mut last_error = None;
            loop {
                ticker.tick().await;
                match self.reload_if_changed().await {
                    Ok(_) => last_error = None,
                    Err(e) => {
                        let text = e.to_string();
                        if last_error.as_ref() != Some(&text) {
                            tracing::warn!(
                                error = %text,
                                "cannot reload the TLS certificate; keeping the previous one"
                            );
                            last_error = Some(text);
                        }
                    }
                }
            }
        })
    }
}

fn log_loaded(files: &TlsFiles, not_after: Option<i64>, what: &str) {
    tracing::info!(
        cert = %files.cert.display(),
        not_after_unix = not_after,
        "{what} the TLS certificate"
    );
}

async fn read_files(files: &TlsFiles) -> Result<Seen, TlsError> {
    let ca = match &files.client_ca {
        Some(path) => read(path).await?,
        None => Vec::new(),
    };
    Ok((read(&files.cert).await?, read(&files.key).await?, ca))
}

async fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })
}

/// Builds the server config for a PEM certificate chain and key (and, with a client CA, the
/// verifier of client certificates); also returns the leaf's `notAfter` (unix seconds) when
/// it can be read.
///
/// A client certificate, when presented, must chain to the client CA or the handshake fails;
/// one that is not presented is let through the handshake so that the HTTP layer can answer
/// 401 with a reason (`client_auth`) instead of a bare TLS alert.
pub fn server_config(
    files: &TlsFiles,
    (cert_pem, key_pem, ca_pem): &Seen,
) -> Result<(Arc<ServerConfig>, Option<i64>), TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: files.cert.clone(),
            what: "certificate chain",
            source,
        })?;
    let Some(leaf) = chain.first() else {
        return Err(TlsError::NoCertificate {
            path: files.cert.clone(),
        });
    };
    let not_after = cert_not_after(leaf);
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::Pem {
        path: files.key.clone(),
        what: "private key",
        source,
    })?;
    let rustls_error = |source| TlsError::Rustls {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    };
    // The process-wide provider when `main` installed one (ring), else ring explicitly: never
    // the "no provider chosen" panic of P2.
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(rustls_error)?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let verifier = client_verifier(path, ca_pem, provider)?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(rustls_error)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((Arc::new(config), not_after))
}

/// The verifier of client certificates signed by the CAs in `ca_pem`.
fn client_verifier(
    path: &Path,
    ca_pem: &[u8],
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let cas = CertificateDer::pem_slice_iter(ca_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: path.to_path_buf(),
            what: "client CA certificates",
            source,
        })?;
    if cas.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots.add(ca).map_err(|source| TlsError::ClientCa {
            path: path.to_path_buf(),
            message: source.to_string(),
        })?;
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::ClientCa {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// The `notAfter` of an X.509 certificate as unix seconds; `None` when the DER is not a
/// certificate.
pub fn cert_not_after(der: &[u8]) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(cert.validity().not_after.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_after_is_read_from_real_certificates() {
        let key = rcgen::KeyPair::generate().unwrap();
        for (y, m, d, want) in [
            (2031, 5, 6, 1_935_792_000), // UTCTime
            (2051, 1, 2, 2_556_230_400), // GeneralizedTime (2050 and later)
            (1999, 12, 31, 946_598_400), // UTCTime, 19xx
        ] {
            let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
            params.not_before = rcgen::date_time_ymd(1990, 1, 1);
            params.not_after = rcgen::date_time_ymd(y, m, d);
            let cert = params.self_signed(&key).unwrap();
            assert_eq!(cert_not_after(cert.der()), Some(want), "{y}-{m}-{d}");
        }
    }

    #[test]
    fn garbage_der_has_no_expiry() {
        assert_eq!(cert_not_after(b""), None);
        assert_eq!(cert_not_after(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(cert_not_after(&[0x30, 0x03, 0x30, 0x01]), None);
    }
}
