//! TLS for the main port: a rustls `ServerConfig` from PEM files, and a hot reload that
//! survives Kubernetes Secret volume updates.
//!
//! Loading uses `rustls::pki_types::pem::PemObject` (not the unmaintained rustls-pemfile,
//! P4). ALPN offers `h2` then `http/1.1`: axum-server's connection builder detects either.
//!
//! Reload (P5): the kubelet updates a mounted Secret by swapping a `..data` symlink, which
//! deafens an inotify watch on the file paths. [`ServingCert::spawn_reloader`] instead polls:
//! every interval it reads both files (following the symlinks) and, when their bytes differ
//! from the last pair it saw, builds a new config. Only a pair that parses, and whose key
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

/// The certificate chain and private key files (PEM), as mounted from a Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first (`tls.crt`).
    pub cert: PathBuf,
    /// Private key, PKCS#8, PKCS#1 or SEC1 (`tls.key`).
    pub key: PathBuf,
}

/// The certificate being served, the files it came from, and the axum-server handle to swap
/// it.
pub struct ServingCert {
    files: TlsFiles,
    config: RustlsConfig,
    seen: (Vec<u8>, Vec<u8>),
    metrics: Metrics,
}

impl ServingCert {
    /// Loads `files` (an error if they do not form a valid pair) and records the expiry in
    /// `metrics`.
    pub async fn load(files: TlsFiles, metrics: Metrics) -> Result<Self, TlsError> {
        let seen = read_pair(&files).await?;
        let (config, not_after) = server_config(&files, &seen.0, &seen.1)?;
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
        let pair = read_pair(&self.files).await?;
        if pair == self.seen {
            return Ok(false);
        }
        // Remember the pair even if it turns out broken: it is retried once a file changes
        // again, not on every tick.
        self.seen = pair;
        let (config, not_after) = server_config(&self.files, &self.seen.0, &self.seen.1)?;
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

async fn read_pair(files: &TlsFiles) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    Ok((read(&files.cert).await?, read(&files.key).await?))
}

async fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })
}

/// Builds the server config for a PEM certificate chain and key; also returns the leaf's
/// `notAfter` (unix seconds) when it can be read.
pub fn server_config(
    files: &TlsFiles,
    cert_pem: &[u8],
    key_pem: &[u8],
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
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(rustls_error)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(rustls_error)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((Arc::new(config), not_after))
}

/// The `notAfter` of an X.509 certificate as unix seconds, read straight from the DER
/// (Certificate → tbsCertificate → optional version, serial, signature, issuer, validity).
/// `None` when the DER does not have that shape.
pub fn cert_not_after(der: &[u8]) -> Option<i64> {
    let (cert, _) = der_element(der, 0x30)?;
    let (mut tbs, _) = der_element(cert, 0x30)?;
    if tbs.first() == Some(&0xa0) {
        tbs = der_element(tbs, 0xa0)?.1; // explicit [0] version
    }
    let tbs = der_element(tbs, 0x02)?.1; // serialNumber
    let tbs = der_element(tbs, 0x30)?.1; // signature algorithm
    let tbs = der_element(tbs, 0x30)?.1; // issuer
    let (validity, _) = der_element(tbs, 0x30)?;
    let tag = *validity.first()?;
    let (_, rest) = der_element(validity, tag)?; // notBefore
    let tag = *rest.first()?;
    let (time, _) = der_element(rest, tag)?;
    let time = std::str::from_utf8(time).ok()?;
    match tag {
        0x17 => {
            // UTCTime YYMMDDHHMMSSZ; years 50..99 are 19xx (RFC 5280).
            let yy: i64 = time.get(0..2)?.parse().ok()?;
            let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
            unix_seconds(year, time.get(2..)?)
        }
        0x18 => unix_seconds(time.get(0..4)?.parse().ok()?, time.get(4..)?), // GeneralizedTime
        _ => None,
    }
}

/// Splits one DER element with tag `tag` off the front of `input`: (contents, rest).
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = input.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// `MMDDHHMMSSZ` of year `year` as unix seconds (UTC only, as RFC 5280 requires).
fn unix_seconds(year: i64, rest: &str) -> Option<i64> {
    if rest.len() != 11 || !rest.ends_with('Z') {
        return None;
    }
    let field = |i: usize| -> Option<i64> { rest.get(i..i + 2)?.parse().ok() };
    let (month, day) = (field(0)?, field(2)?);
    let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_to_unix() {
        assert_eq!(unix_seconds(1970, "0101000000Z"), Some(0));
        assert_eq!(unix_seconds(2000, "0301000000Z"), Some(951_868_800));
        assert_eq!(unix_seconds(2038, "0119031408Z"), Some(2_147_483_648));
        assert_eq!(unix_seconds(2024, "1301000000Z"), None);
        assert_eq!(unix_seconds(2024, "0101000000"), None);
    }

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
