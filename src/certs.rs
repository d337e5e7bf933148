//! `kube-tas certs`: the certificates that let the API server (webhook) and kube-scheduler
//! (extender) reach `kube-tas serve` over TLS, for development and test clusters. Production
//! clusters use cert-manager instead (see `certs/README.md`).
//!
//! [`run`] writes four files into one folder, named as in a `kubernetes.io/tls` Secret plus
//! the CA: `ca.crt`, `ca.key`, `tls.crt`, `tls.key`. The serving certificate is ECDSA P-256,
//! signed by the CA, for the Service's DNS names (`NAME`, `NAME.NS`, `NAME.NS.svc`,
//! `NAME.NS.svc.cluster.local`) plus any extra names and addresses.
//!
//! Invariants:
//! * an existing CA (`ca.crt` + `ca.key` in the folder) is reused and never rewritten, so the
//!   caBundle already registered with the API server and kube-scheduler stays valid;
//! * nothing is written until everything has been checked: the names, the CA, the new
//!   certificate (verified against `ca.crt` as a TLS client would) and every configuration
//!   file the caBundle goes into;
//! * every file is replaced atomically (a temporary file in the same folder, then a rename),
//!   so a server polling `tls.crt` / `tls.key` never reads half a file; key files are `0600`.
//!
//! [`put_ca_bundle`] writes the caBundle (standard base64 of the CA's PEM) into configuration
//! files as a text edit that keeps comments and layout: the value of every `caBundle:` key
//! (MutatingWebhookConfiguration and the like) and of every `caData:` key under `tlsConfig:`
//! (KubeSchedulerConfiguration extenders). The result is parsed again before it is written.

use std::fs;
use std::io::{self, Write as _};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use serde_json::Value;
use time::{Duration, OffsetDateTime};

/// The CA certificate (PEM); its base64 is the caBundle.
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA private key (PEM, PKCS#8).
pub const CA_KEY_FILE: &str = "ca.key";
/// The serving certificate (PEM), the `tls.crt` of a `kubernetes.io/tls` Secret.
pub const TLS_CERT_FILE: &str = "tls.crt";
/// The serving key (PEM, PKCS#8), the `tls.key` of a `kubernetes.io/tls` Secret.
pub const TLS_KEY_FILE: &str = "tls.key";

/// Common name of the CA that `certs` creates.
pub const DEV_CA_COMMON_NAME: &str = "kube-tas development CA";

/// The value the repository's configuration files carry until `certs --write-ca-bundle` (or
/// cert-manager) fills them: base64 of `PLACEHOLDER: kube-tas certs writes the CA bundle (PEM)
/// here`. It is valid base64 but not PEM, so a component started with it fails loudly instead
/// of running without certificate checks, as an empty value would make kube-scheduler do.
pub const CA_BUNDLE_PLACEHOLDER: &str =
    "UExBQ0VIT0xERVI6IGt1YmUtdGFzIGNlcnRzIHdyaXRlcyB0aGUgQ0EgYnVuZGxlIChQRU0pIGhlcmU=";

/// Default lifetime of the serving certificate, in days.
pub const DEFAULT_DAYS: u32 = 365;
/// Default lifetime of a new CA, in days.
pub const DEFAULT_CA_DAYS: u32 = 3650;

/// The certificates start this long before "now", so that nodes whose clocks lag a little
/// accept them at once.
const CLOCK_SKEW: Duration = Duration::hours(1);

/// What can go wrong in `certs`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag's value is not acceptable.
    #[error("{flag} {value:?}: {reason}")]
    BadFlag {
        /// The flag, e.g. `--service`.
        flag: &'static str,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An input file (an existing CA, a configuration file) cannot be used.
    #[error("{}: {reason}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A configuration file has no key to put the caBundle into.
    #[error(
        "{}: no `caBundle:` key and no `caData:` key under `tlsConfig:`, so there is nowhere \
         to put the CA bundle",
        path.display()
    )]
    NoCaBundleKey {
        /// The file.
        path: PathBuf,
    },
    /// rcgen could not build a key or certificate.
    #[error("cannot create the {what}: {source}")]
    Generate {
        /// What was being built.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: rcgen::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// True when the user's input is at fault (the command line exits 2), false for failures
    /// of the machine (a file that cannot be written: exit 1).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, Self::Write { .. } | Self::Generate { .. })
    }
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What to issue (the flags of `kube-tas certs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertsOptions {
    /// The Service's name (a DNS-1123 label).
    pub service: String,
    /// The Service's namespace (a DNS-1123 label).
    pub namespace: String,
    /// Extra DNS names for the serving certificate.
    pub dns: Vec<String>,
    /// Extra IP addresses for the serving certificate.
    pub ips: Vec<IpAddr>,
    /// Lifetime of the serving certificate, in days.
    pub days: u32,
    /// Lifetime of a new CA, in days (an existing CA keeps its own).
    pub ca_days: u32,
}

impl CertsOptions {
    /// Options for `service` in `namespace` with the default lifetimes and no extra names.
    pub fn new(service: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            namespace: namespace.into(),
            dns: Vec::new(),
            ips: Vec::new(),
            days: DEFAULT_DAYS,
            ca_days: DEFAULT_CA_DAYS,
        }
    }

    /// Checks the names and lifetimes.
    pub fn validate(&self) -> Result<()> {
        check_label("--service", &self.service)?;
        check_label("--namespace", &self.namespace)?;
        for name in &self.dns {
            check_dns_name(name)?;
        }
        for (flag, days) in [("--days", self.days), ("--ca-days", self.ca_days)] {
            if days == 0 {
                return Err(Error::BadFlag {
                    flag,
                    value: days.to_string(),
                    reason: "must be at least 1".into(),
                });
            }
        }
        Ok(())
    }

    /// The name the API server verifies for a webhook Service, `NAME.NS.svc`; also the
    /// certificate's common name.
    pub fn service_host(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }

    /// The DNS names of the serving certificate: the Service's four forms, then the extras,
    /// without duplicates.
    pub fn dns_names(&self) -> Vec<String> {
        let (svc, ns) = (&self.service, &self.namespace);
        let mut names = vec![
            svc.clone(),
            format!("{svc}.{ns}"),
            format!("{svc}.{ns}.svc"),
            format!("{svc}.{ns}.svc.cluster.local"),
        ];
        for name in &self.dns {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    fn ip_addresses(&self) -> Vec<IpAddr> {
        let mut ips = Vec::new();
        for ip in &self.ips {
            if !ips.contains(ip) {
                ips.push(*ip);
            }
        }
        ips
    }
}

/// A DNS-1123 label: at most 63 of `a-z`, `0-9`, `-`, starting and ending alphanumeric.
fn check_label(flag: &'static str, value: &str) -> Result<()> {
    label_problem(value).map_or(Ok(()), |reason| {
        Err(Error::BadFlag {
            flag,
            value: value.into(),
            reason: format!("must be a DNS-1123 label (a Kubernetes object name): {reason}"),
        })
    })
}

fn label_problem(label: &str) -> Option<&'static str> {
    if label.is_empty() {
        Some("it is empty")
    } else if label.len() > 63 {
        Some("it is longer than 63 characters")
    } else if !label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("only lowercase letters, digits and '-' are allowed")
    } else if label.starts_with('-') || label.ends_with('-') {
        Some("it must start and end with a letter or digit")
    } else {
        None
    }
}

/// A DNS name of DNS-1123 labels (at most 253 characters), optionally a `*.` wildcard.
fn check_dns_name(name: &str) -> Result<()> {
    let bad = |reason: String| Error::BadFlag {
        flag: "--dns",
        value: name.into(),
        reason,
    };
    if name.parse::<IpAddr>().is_ok() {
        return Err(bad("an IP address: give it with --ip".into()));
    }
    if name.len() > 253 {
        return Err(bad("longer than 253 characters".into()));
    }
    let labels = name.strip_prefix("*.").unwrap_or(name);
    for label in labels.split('.') {
        if let Some(reason) = label_problem(label) {
            return Err(bad(format!(
                "must be a DNS name of DNS-1123 labels, label {label:?}: {reason}"
            )));
        }
    }
    Ok(())
}

/// A CA and a serving certificate, in memory (see [`issue`]).
#[derive(Debug, Clone)]
pub struct Issued {
    /// `ca.crt` as written (for a reused CA: the file's bytes, unchanged).
    pub ca_cert_pem: String,
    /// `ca.key` of a new CA; `None` when the CA in the folder is reused.
    pub new_ca_key_pem: Option<String>,
    /// When the CA expires.
    pub ca_not_after: OffsetDateTime,
    /// The serving certificate (PEM).
    pub tls_cert_pem: String,
    /// The serving key (PEM, PKCS#8).
    pub tls_key_pem: String,
    /// When the serving certificate expires.
    pub tls_not_after: OffsetDateTime,
    /// The serving certificate's DNS names and IP addresses.
    pub names: Vec<String>,
    /// Things the user should know (a CA that expires before the requested lifetime, ...).
    pub warnings: Vec<String>,
}

impl Issued {
    /// True when the CA in the folder was reused.
    pub fn ca_reused(&self) -> bool {
        self.new_ca_key_pem.is_none()
    }

    /// The caBundle: standard, padded base64 of the CA's PEM, as `caBundle` and `caData`
    /// take it.
    pub fn ca_bundle(&self) -> String {
        BASE64.encode(self.ca_cert_pem.as_bytes())
    }
}

/// Builds the certificates for `options` in memory: reuses the CA in `dir` when it holds
/// `ca.crt` and `ca.key`, else creates a development CA; then issues a serving certificate
/// valid from `now` (less a clock-skew margin) and checks that it verifies against the CA
/// for `NAME.NS.svc`. Reads `dir`, writes nothing.
pub fn issue(options: &CertsOptions, dir: &Path, now: OffsetDateTime) -> Result<Issued> {
    options.validate()?;
    let mut warnings = Vec::new();
    let (ca, new_ca_key_pem) = match load_ca(dir)? {
        Some(ca) => (ca, None),
        None => {
            let (ca, key_pem) = new_ca(now, options.ca_days)?;
            (ca, Some(key_pem))
        }
    };
    let Ca {
        cert_pem: ca_cert_pem,
        issuer,
        not_after: ca_not_after,
    } = ca;
    if ca_not_after <= now {
        return Err(Error::BadFile {
            path: dir.join(CA_CERT_FILE),
            reason: format!(
                "the CA expired on {}; remove {CA_CERT_FILE} and {CA_KEY_FILE} to create a new \
                 one (and register the new caBundle)",
                show_time(ca_not_after)
            ),
        });
    }
    let mut tls_not_after = now + Duration::days(i64::from(options.days));
    if tls_not_after > ca_not_after {
        warnings.push(format!(
            "the CA expires on {}, before the {} days asked for: the serving certificate \
             expires with it",
            show_time(ca_not_after),
            options.days
        ));
        tls_not_after = ca_not_after;
    }

    let dns_names = options.dns_names();
    let ips = options.ip_addresses();
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, options.service_host());
    params.subject_alt_names = dns_names
        .iter()
        .map(|n| {
            let name = n.clone().try_into().map_err(|source| Error::Generate {
                what: "serving certificate",
                source,
            })?;
            Ok(SanType::DnsName(name))
        })
        .chain(ips.iter().map(|ip| Ok(SanType::IpAddress(*ip))))
        .collect::<Result<_>>()?;
    params.not_before = now - CLOCK_SKEW;
    params.not_after = tls_not_after;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = generate_key("serving key")?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|source| Error::Generate {
            what: "serving certificate",
            source,
        })?;

    verify_serving_cert(
        ca_cert_pem.as_bytes(),
        cert.der(),
        &options.service_host(),
        now,
    )
    .map_err(|reason| Error::BadFile {
        path: dir.join(CA_CERT_FILE),
        reason: format!(
            "the new serving certificate does not verify against this CA ({reason}); does \
             {CA_KEY_FILE} belong to {CA_CERT_FILE}?"
        ),
    })?;

    let names = dns_names
        .into_iter()
        .chain(ips.iter().map(IpAddr::to_string))
        .collect();
    Ok(Issued {
        ca_cert_pem,
        new_ca_key_pem,
        ca_not_after,
        tls_cert_pem: cert.pem(),
        tls_key_pem: key.serialize_pem(),
        tls_not_after,
        names,
        warnings,
    })
}

struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
    not_after: OffsetDateTime,
}

fn generate_key(what: &'static str) -> Result<KeyPair> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
        .map_err(|source| Error::Generate { what, source })
}

/// A self-signed CA that may sign end-entity certificates only (path length 0), and its key
/// (PEM).
fn new_ca(now: OffsetDateTime, days: u32) -> Result<(Ca, String)> {
    let generate = |source| Error::Generate { what: "CA", source };
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, DEV_CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = now - CLOCK_SKEW;
    params.not_after = now + Duration::days(i64::from(days));
    let not_after = params.not_after;
    let key = generate_key("CA key")?;
    let cert = params.self_signed(&key).map_err(generate)?;
    let key_pem = key.serialize_pem();
    let ca = Ca {
        cert_pem: cert.pem(),
        issuer: Issuer::new(params, key),
        not_after,
    };
    Ok((ca, key_pem))
}

/// The CA in `dir`, when both of its files are there; an error when only one is.
fn load_ca(dir: &Path) -> Result<Option<Ca>> {
    let (cert_path, key_path) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
    let (cert_pem, key_pem) = match (read_if_exists(&cert_path)?, read_if_exists(&key_path)?) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) | (None, Some(_)) => {
            let (present, missing) = if cert_path.exists() {
                (&cert_path, CA_KEY_FILE)
            } else {
                (&key_path, CA_CERT_FILE)
            };
            return Err(Error::BadFile {
                path: present.clone(),
                reason: format!(
                    "{missing} is missing next to it: give both to reuse the CA, or remove this \
                     file to create a new CA"
                ),
            });
        }
    };
    let bad_cert = |reason: String| Error::BadFile {
        path: cert_path.clone(),
        reason,
    };
    let bad_key = |reason: String| Error::BadFile {
        path: key_path.clone(),
        reason,
    };
    let cert = CertificateDer::pem_slice_iter(&cert_pem)
        .next()
        .ok_or_else(|| bad_cert("no CERTIFICATE block in the file".into()))?
        .map_err(|e| bad_cert(format!("not a PEM certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| bad_key(format!("not a PEM private key: {e}")))?;
    let key = KeyPair::try_from(&key).map_err(|e| {
        bad_key(format!(
            "unusable key ({e}); a PKCS#8 `PRIVATE KEY` (ECDSA P-256/P-384, Ed25519 or RSA) is \
             needed, e.g. converted with `openssl pkcs8 -topk8 -nocrypt`"
        ))
    })?;
    let not_after = crate::server::tls::cert_not_after(&cert)
        .and_then(|t| OffsetDateTime::from_unix_timestamp(t).ok())
        .ok_or_else(|| bad_cert("cannot read the certificate's expiry".into()))?;
    let issuer = Issuer::from_ca_cert_der(&cert, key)
        .map_err(|e| bad_cert(format!("not a usable CA certificate: {e}")))?;
    let cert_pem = String::from_utf8(cert_pem).map_err(|_| bad_cert("not UTF-8 text".into()))?;
    Ok(Some(Ca {
        cert_pem,
        issuer,
        not_after,
    }))
}

fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::BadFile {
            path: path.to_path_buf(),
            reason: format!("cannot read: {e}"),
        }),
    }
}

/// Verifies `leaf` for `host` against the CA certificates in `ca_pem`, as a TLS client (the
/// API server, kube-scheduler) would at `now`.
pub fn verify_serving_cert(
    ca_pem: &[u8],
    leaf: &CertificateDer<'_>,
    host: &str,
    now: OffsetDateTime,
) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| format!("CA PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("CA certificate: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| e.to_string())?;
    let server_name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let seconds = u64::try_from(now.unix_timestamp()).unwrap_or_default();
    rustls::client::danger::ServerCertVerifier::verify_server_cert(
        verifier.as_ref(),
        leaf,
        &[],
        &server_name,
        &[],
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds)),
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// A date for people: `2026-05-01 12:00 UTC`.
pub fn show_time(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{} {:02}:{:02} UTC", t.date(), t.hour(), t.minute())
}

/// One configuration file with the caBundle put in, checked, not yet written.
#[derive(Debug, Clone)]
pub struct CaBundleEdit {
    /// The file (symbolic links resolved: the link's target is rewritten).
    pub path: PathBuf,
    /// The new text.
    pub text: String,
    /// How many values were replaced.
    pub replaced: usize,
}

impl CaBundleEdit {
    /// Replaces the file atomically, keeping its permissions.
    pub fn write(&self) -> Result<()> {
        let mode = file_mode(&self.path);
        write_atomically(&self.path, self.text.as_bytes(), mode)
    }
}

/// Puts `ca_bundle` into the configuration file `path` in memory (see the module docs) and
/// checks the result: it must still parse as YAML, and every `caBundle` / `tlsConfig.caData`
/// value in it must be `ca_bundle`.
pub fn put_ca_bundle(path: &Path, ca_bundle: &str) -> Result<CaBundleEdit> {
    let bad = |reason: String| Error::BadFile {
        path: path.to_path_buf(),
        reason,
    };
    let path = fs::canonicalize(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let text = fs::read_to_string(&path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let before = serde_saphyr::from_multiple::<Value>(&text)
        .map_err(|e| bad(format!("not valid YAML: {e}")))?;
    let (edited, replaced) = replace_ca_bundle(&text, ca_bundle);
    if replaced == 0 {
        let mut found = Vec::new();
        for doc in &before {
            collect_ca_bundles(doc, None, &mut found);
        }
        if found.is_empty() {
            return Err(Error::NoCaBundleKey { path });
        }
        return Err(bad(
            "its caBundle/caData keys are in flow style (`{...}` or JSON), which this edit \
             does not change; set the value by hand"
                .into(),
        ));
    }
    let docs = serde_saphyr::from_multiple::<Value>(&edited).map_err(|e| {
        bad(format!(
            "putting the CA bundle in would break the file ({e}); set the value by hand"
        ))
    })?;
    let mut found = Vec::new();
    for doc in &docs {
        collect_ca_bundles(doc, None, &mut found);
    }
    if found.len() != replaced || found.iter().any(|v| v.as_str() != Some(ca_bundle)) {
        return Err(bad(format!(
            "the edit replaced {replaced} value(s) but the result holds {} caBundle/caData \
             value(s), not all equal to the new bundle; set the value by hand",
            found.len()
        )));
    }
    Ok(CaBundleEdit {
        path,
        text: edited,
        replaced,
    })
}

/// Every value of a `caBundle` key, and of a `caData` key in a `tlsConfig` mapping.
fn collect_ca_bundles<'a>(value: &'a Value, parent: Option<&str>, found: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if is_ca_bundle_key(key, parent) {
                    found.push(v);
                } else {
                    collect_ca_bundles(v, Some(key), found);
                }
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|v| collect_ca_bundles(v, parent, found)),
        _ => {}
    }
}

fn is_ca_bundle_key(key: &str, parent: Option<&str>) -> bool {
    key == "caBundle" || (key == "caData" && parent == Some("tlsConfig"))
}

/// The text edit behind [`put_ca_bundle`]: sets the value of every `caBundle:` key and every
/// `caData:` key under `tlsConfig:` to `ca_bundle`, line by line, keeping comments,
/// indentation and the value's quoting. Block-style YAML only (a key inside a `{...}` flow
/// mapping is not seen). Returns the new text and how many values were replaced.
pub fn replace_ca_bundle(text: &str, ca_bundle: &str) -> (String, usize) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len() + ca_bundle.len());
    let mut replaced = 0;
    // (indent, key) of the mappings enclosing the current line.
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let (body, eol) = split_eol(line);
        let trimmed = body.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            out.push_str(line);
            continue;
        }
        if body.starts_with("---") || body.starts_with("...") {
            path.clear();
            out.push_str(line);
            continue;
        }
        let Some(entry) = parse_key_line(body) else {
            out.push_str(line);
            continue;
        };
        while path
            .last()
            .is_some_and(|(indent, _)| *indent >= entry.indent)
        {
            path.pop();
        }
        let parent = path.last().map(|(_, key)| key.as_str());
        let value = ValueShape::of(entry.value);
        if is_ca_bundle_key(&entry.key, parent) {
            out.push_str(&body[..entry.value_start]);
            out.push(' ');
            let quote = match entry.value.trim_start().chars().next() {
                Some(q @ ('"' | '\'')) => Some(q),
                _ => None,
            };
            if let Some(q) = quote {
                out.push(q);
                out.push_str(ca_bundle);
                out.push(q);
            } else {
                out.push_str(ca_bundle);
            }
            out.push_str(value.comment);
            out.push_str(eol);
            replaced += 1;
            // The old value's continuation lines (a block scalar, a folded plain or quoted
            // scalar) go; blank and comment lines after it stay.
            let mut kept_blank = String::new();
            while let Some(next) = lines.get(i) {
                let next_body = split_eol(next).0;
                let next_trimmed = next_body.trim_start();
                let next_indent = next_body.len() - next_trimmed.len();
                if next_trimmed.is_empty() {
                    kept_blank.push_str(next);
                } else if next_indent > entry.indent
                    && (value.open || !next_trimmed.starts_with('#'))
                {
                    kept_blank.clear();
                } else {
                    break;
                }
                i += 1;
            }
            out.push_str(&kept_blank);
            path.push((entry.indent, entry.key));
            continue;
        }
        out.push_str(line);
        if value.block_scalar {
            // Pass a block scalar's lines through untouched: its text is not YAML structure.
            while let Some(next) = lines.get(i) {
                let next_body = split_eol(next).0;
                let next_trimmed = next_body.trim_start();
                if !next_trimmed.is_empty() && next_body.len() - next_trimmed.len() <= entry.indent
                {
                    break;
                }
                out.push_str(next);
                i += 1;
            }
        }
        path.push((entry.indent, entry.key));
    }
    (out, replaced)
}

fn split_eol(line: &str) -> (&str, &str) {
    let body = line.trim_end_matches(['\n', '\r']);
    (body, &line[body.len()..])
}

/// `key: value` on one line of block YAML, list dashes (`- key: value`) included.
struct KeyLine<'a> {
    /// Column of the key.
    indent: usize,
    /// The key, unquoted.
    key: String,
    /// Byte offset just after the `:`.
    value_start: usize,
    /// Everything after the `:`.
    value: &'a str,
}

fn parse_key_line(body: &str) -> Option<KeyLine<'_>> {
    let mut pos = body.len() - body.trim_start_matches(' ').len();
    while body[pos..].starts_with("- ") || &body[pos..] == "-" {
        pos += 1;
        pos += body[pos..].len() - body[pos..].trim_start_matches(' ').len();
    }
    let rest = &body[pos..];
    let (key, key_len) = match rest.chars().next()? {
        q @ ('"' | '\'') => {
            let end = rest[1..].find(q)? + 1;
            (rest[1..end].to_string(), end + 1)
        }
        '#' | '{' | '[' | '|' | '>' | '&' | '*' | '!' | '%' | '@' | '`' => return None,
        _ => {
            let end = rest
                .match_indices(':')
                .map(|(i, _)| i)
                .find(|&i| rest[i + 1..].is_empty() || rest[i + 1..].starts_with([' ', '\t']))?;
            (rest[..end].trim_end().to_string(), end)
        }
    };
    let after_key = &rest[key_len..];
    let colon = after_key.len() - after_key.trim_start_matches([' ', '\t']).len();
    if !after_key[colon..].starts_with(':') {
        return None;
    }
    let value_start = pos + key_len + colon + 1;
    Some(KeyLine {
        indent: pos,
        key,
        value_start,
        value: &body[value_start..],
    })
}

/// What follows a key's `:` on its line.
struct ValueShape<'a> {
    /// The trailing comment with the blanks before it (`""` if none).
    comment: &'a str,
    /// The value goes on below (empty, a block scalar, an unclosed quoted scalar).
    open: bool,
    /// The value is a `|` or `>` block scalar.
    block_scalar: bool,
}

impl<'a> ValueShape<'a> {
    fn of(value: &'a str) -> Self {
        let trimmed = value.trim_start_matches([' ', '\t']);
        let lead = value.len() - trimmed.len();
        // Where the scalar ends on this line, relative to `value`.
        let (end, closed) = match trimmed.chars().next() {
            Some(q @ ('"' | '\'')) => match closing_quote(&trimmed[1..], q) {
                Some(i) => (lead + 1 + i + 1, true),
                None => (value.len(), false),
            },
            _ => {
                let comment = trimmed
                    .match_indices('#')
                    .map(|(i, _)| i)
                    .find(|&i| i == 0 || trimmed[..i].ends_with([' ', '\t']));
                (lead + comment.unwrap_or(trimmed.len()), true)
            }
        };
        let scalar = value[..end].trim();
        let comment_start = value[..end].trim_end_matches([' ', '\t']).len();
        let comment = if value[end..].trim().is_empty() {
            ""
        } else {
            &value[comment_start..]
        };
        let block_scalar = scalar.starts_with(['|', '>']);
        Self {
            comment,
            open: !closed || scalar.is_empty() || block_scalar,
            block_scalar,
        }
    }
}

/// The index of the quote closing a scalar that starts just before `s`.
fn closing_quote(s: &str, quote: char) -> Option<usize> {
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if quote == '"' && c == '\\' {
            chars.next();
        } else if c == quote {
            // '' inside a single-quoted scalar is an escaped quote.
            if quote == '\'' && chars.peek().is_some_and(|&(_, n)| n == '\'') {
                chars.next();
            } else {
                return Some(i);
            }
        }
    }
    None
}

/// Everything `certs` did (see [`run`]).
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The certificates.
    pub issued: Issued,
    /// The files written into the output folder, in order.
    pub written: Vec<PathBuf>,
    /// The configuration files the caBundle went into.
    pub ca_bundle_files: Vec<CaBundleEdit>,
}

/// `kube-tas certs`: issues the certificates ([`issue`]), prepares every caBundle edit
/// ([`put_ca_bundle`]), and only then writes the certificate files into `dir` (created if
/// missing) and the configuration files, each atomically.
pub fn run(options: &CertsOptions, dir: &Path, ca_bundle_files: &[PathBuf]) -> Result<Outcome> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::BadFlag {
            flag: "--out",
            value: dir.display().to_string(),
            reason: "not a directory".into(),
        });
    }
    let issued = issue(options, dir, OffsetDateTime::now_utc())?;
    let ca_bundle = issued.ca_bundle();
    let edits = ca_bundle_files
        .iter()
        .map(|path| put_ca_bundle(path, &ca_bundle))
        .collect::<Result<Vec<_>>>()?;

    fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<(&str, &str, u32)> = Vec::new();
    if let Some(key) = &issued.new_ca_key_pem {
        files.push((CA_KEY_FILE, key, 0o600));
        files.push((CA_CERT_FILE, &issued.ca_cert_pem, 0o644));
    }
    // The key first: a server polling the pair may see a new key with the old certificate
    // for a moment, which it refuses (they do not match) and retries on its next poll.
    files.push((TLS_KEY_FILE, &issued.tls_key_pem, 0o600));
    files.push((TLS_CERT_FILE, &issued.tls_cert_pem, 0o644));
    let mut written = Vec::new();
    for (name, contents, mode) in files {
        let path = dir.join(name);
        write_atomically(&path, contents.as_bytes(), Some(mode))?;
        written.push(path);
    }
    for edit in &edits {
        edit.write()?;
    }
    Ok(Outcome {
        issued,
        written,
        ca_bundle_files: edits,
    })
}

#[cfg(unix)]
fn file_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn file_mode(_path: &Path) -> Option<u32> {
    None
}

/// Writes `contents` to a temporary file next to `path`, flushes it, then renames it over
/// `path`: readers see the old file or the new one, never a mix. `mode` (unix permissions)
/// is set on the temporary file before any byte is written.
fn write_atomically(path: &Path, contents: &[u8], mode: Option<u32>) -> Result<()> {
    let write_error = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        // A temporary file left by a crashed run would keep its old mode through open().
        let _ = fs::remove_file(&tmp);
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if let Some(mode) = mode {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(mode);
        }
        #[cfg(not(unix))]
        let _ = mode;
        let mut file = options.open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        // Make the rename itself durable; not every platform can open a folder.
        if let Ok(dir) = fs::File::open(dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;
    use x509_parser::prelude::{FromDer as _, X509Certificate};

    /// A folder under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "kube-tas-certs-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            Self(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn der_of(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn options() -> CertsOptions {
        CertsOptions {
            dns: vec!["localhost".into(), "kube-tas".into()],
            ips: vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()],
            ..CertsOptions::new("kube-tas", "kube-tas-system")
        }
    }

    #[test]
    fn serving_cert_has_the_service_names_and_verifies_against_the_ca() {
        let dir = TempDir::new("sans");
        let now = OffsetDateTime::now_utc();
        let issued = issue(&options(), &dir.0, now).unwrap();
        assert!(!issued.ca_reused());

        let leaf_der = der_of(&issued.tls_cert_pem);
        let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
        let sans = leaf.subject_alternative_name().unwrap().unwrap();
        let mut dns = Vec::new();
        let mut ips = Vec::new();
        for name in &sans.value.general_names {
            match name {
                GeneralName::DNSName(n) => dns.push(n.to_string()),
                GeneralName::IPAddress(ip) => ips.push(ip.to_vec()),
                other => panic!("unexpected SAN {other:?}"),
            }
        }
        assert_eq!(
            dns,
            [
                "kube-tas",
                "kube-tas.kube-tas-system",
                "kube-tas.kube-tas-system.svc",
                "kube-tas.kube-tas-system.svc.cluster.local",
                "localhost",
            ]
        );
        assert_eq!(
            ips,
            [
                vec![127, 0, 0, 1],
                std::net::Ipv6Addr::LOCALHOST.octets().to_vec()
            ]
        );
        assert_eq!(issued.names.len(), 7);

        let cn = leaf.subject().iter_common_name().next().unwrap();
        assert_eq!(cn.as_str().unwrap(), "kube-tas.kube-tas-system.svc");
        let eku = leaf.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.client_auth, "{eku:?}");
        assert!(!leaf.is_ca());
        assert_eq!(
            leaf.public_key().algorithm.algorithm,
            x509_parser::oid_registry::OID_KEY_TYPE_EC_PUBLIC_KEY
        );
        assert_eq!(
            leaf.public_key()
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok()),
            Some(x509_parser::oid_registry::OID_EC_P256)
        );
        let days = (leaf.validity().not_after.to_datetime() - now).whole_days();
        assert!((364..=365).contains(&days), "{days}");

        // The CA: self-signed, a CA that signs certificates, and the leaf's issuer.
        let ca_der = der_of(&issued.ca_cert_pem);
        let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
        assert!(ca.is_ca());
        let usage = ca.key_usage().unwrap().unwrap().value;
        assert!(usage.key_cert_sign() && usage.crl_sign());
        assert_eq!(
            ca.subject()
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap(),
            DEV_CA_COMMON_NAME
        );
        ca.verify_signature(None).unwrap();
        leaf.verify_signature(Some(ca.public_key())).unwrap();
        assert_eq!(leaf.issuer(), ca.subject());

        // And as a TLS client sees it: valid for the host the API server dials, not others.
        let ca_pem = issued.ca_cert_pem.as_bytes();
        verify_serving_cert(ca_pem, &leaf_der, "kube-tas.kube-tas-system.svc", now).unwrap();
        verify_serving_cert(ca_pem, &leaf_der, "127.0.0.1", now).unwrap();
        verify_serving_cert(ca_pem, &leaf_der, "other.kube-tas-system.svc", now).unwrap_err();
        let other = issue(&options(), &TempDir::new("other").0, now).unwrap();
        verify_serving_cert(
            other.ca_cert_pem.as_bytes(),
            &leaf_der,
            "kube-tas.kube-tas-system.svc",
            now,
        )
        .unwrap_err();
    }

    #[test]
    fn ca_in_the_folder_is_reused_byte_for_byte() {
        let dir = TempDir::new("reuse");
        let first = run(&options(), &dir.0, &[]).unwrap();
        assert!(!first.issued.ca_reused());
        let ca_crt = fs::read(dir.0.join(CA_CERT_FILE)).unwrap();
        let ca_key = fs::read(dir.0.join(CA_KEY_FILE)).unwrap();
        let tls_crt = fs::read(dir.0.join(TLS_CERT_FILE)).unwrap();
        assert_eq!(first.issued.ca_bundle(), BASE64.encode(&ca_crt));

        let second = run(&options(), &dir.0, &[]).unwrap();
        assert!(second.issued.ca_reused());
        assert_eq!(
            second.written,
            [dir.0.join(TLS_KEY_FILE), dir.0.join(TLS_CERT_FILE)]
        );
        assert_eq!(fs::read(dir.0.join(CA_CERT_FILE)).unwrap(), ca_crt);
        assert_eq!(fs::read(dir.0.join(CA_KEY_FILE)).unwrap(), ca_key);
        assert_eq!(second.issued.ca_bundle(), first.issued.ca_bundle());
        let new_tls_crt = fs::read(dir.0.join(TLS_CERT_FILE)).unwrap();
        assert_ne!(new_tls_crt, tls_crt, "a new serving certificate");
        verify_serving_cert(
            &ca_crt,
            &CertificateDer::from_pem_slice(&new_tls_crt).unwrap(),
            "kube-tas.kube-tas-system.svc",
            OffsetDateTime::now_utc(),
        )
        .unwrap();
        // No temporary files left behind.
        let mut names: Vec<_> = fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    }

    #[cfg(unix)]
    #[test]
    fn key_files_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = TempDir::new("modes");
        run(&options(), &dir.0, &[]).unwrap();
        for (file, mode) in [("ca.key", 0o600), ("tls.key", 0o600)] {
            let got = fs::metadata(dir.0.join(file)).unwrap().permissions().mode() & 0o777;
            assert_eq!(got, mode, "{file}");
        }
    }

    #[test]
    fn half_a_ca_or_a_broken_one_is_refused() {
        let dir = TempDir::new("half");
        run(&options(), &dir.0, &[]).unwrap();
        let key = fs::read(dir.0.join(CA_KEY_FILE)).unwrap();

        fs::remove_file(dir.0.join(CA_KEY_FILE)).unwrap();
        let e = run(&options(), &dir.0, &[]).unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("ca.key is missing"), "{e}");

        // A key that does not belong to the certificate.
        let other = TempDir::new("half-other");
        run(&options(), &other.0, &[]).unwrap();
        fs::copy(other.0.join(CA_KEY_FILE), dir.0.join(CA_KEY_FILE)).unwrap();
        let e = issue(&options(), &dir.0, OffsetDateTime::now_utc()).unwrap_err();
        assert!(
            e.to_string().contains("does not verify against this CA"),
            "{e}"
        );

        fs::write(dir.0.join(CA_KEY_FILE), &key).unwrap();
        fs::write(dir.0.join(CA_CERT_FILE), "not PEM").unwrap();
        let e = issue(&options(), &dir.0, OffsetDateTime::now_utc()).unwrap_err();
        assert!(e.to_string().contains("no CERTIFICATE block"), "{e}");
    }

    #[test]
    fn serving_cert_never_outlives_the_ca() {
        let dir = TempDir::new("expiry");
        let now = OffsetDateTime::now_utc();
        let opts = CertsOptions {
            days: 400,
            ca_days: 30,
            ..options()
        };
        let issued = issue(&opts, &dir.0, now).unwrap();
        assert_eq!(issued.tls_not_after, issued.ca_not_after);
        assert_eq!(issued.warnings.len(), 1, "{:?}", issued.warnings);
    }

    #[test]
    fn bad_names_are_rejected() {
        let cases: Vec<(CertsOptions, &str)> = vec![
            (CertsOptions::new("", "ns"), "--service \"\""),
            (
                CertsOptions::new("Kube-Tas", "ns"),
                "--service \"Kube-Tas\"",
            ),
            (
                CertsOptions::new("kube_tas", "ns"),
                "only lowercase letters",
            ),
            (CertsOptions::new("-x", "ns"), "start and end"),
            (CertsOptions::new("a".repeat(64), "ns"), "longer than 63"),
            (CertsOptions::new("svc", "a.b"), "--namespace \"a.b\""),
            (
                CertsOptions {
                    dns: vec!["10.0.0.1".into()],
                    ..CertsOptions::new("svc", "ns")
                },
                "give it with --ip",
            ),
            (
                CertsOptions {
                    dns: vec!["bad..name".into()],
                    ..CertsOptions::new("svc", "ns")
                },
                "--dns \"bad..name\"",
            ),
            (
                CertsOptions {
                    dns: vec!["under_score.example".into()],
                    ..CertsOptions::new("svc", "ns")
                },
                "--dns",
            ),
            (
                CertsOptions {
                    days: 0,
                    ..CertsOptions::new("svc", "ns")
                },
                "--days",
            ),
        ];
        for (opts, expect) in cases {
            let e = opts.validate().unwrap_err();
            assert!(e.is_bad_input());
            assert!(e.to_string().contains(expect), "{opts:?}: {e}");
        }
        let ok = CertsOptions {
            dns: vec!["*.example.com".into(), "localhost".into()],
            ..CertsOptions::new("kube-tas", "kube-tas-system")
        };
        ok.validate().unwrap();
    }

    const WEBHOOK: &str = "\
# The webhook. caBundle: in a comment is not touched.
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: kube-tas
webhooks:
  - name: mutate.kube-tas.io
    matchConditions:
      - name: x
        expression: >-
          a ? b :
          caBundle: c
    clientConfig:
      # Filled by kube-tas certs.
      caBundle: UExBQ0VI   # placeholder
      service:
        name: kube-tas
  - name: second.kube-tas.io
    clientConfig:
      caBundle: \"\"
      url: https://example.com
";

    #[test]
    fn ca_bundle_replacement_keeps_comments_and_layout() {
        let (text, n) = replace_ca_bundle(WEBHOOK, "QUJD");
        assert_eq!(n, 2);
        let expected = WEBHOOK
            .replace("caBundle: UExBQ0VI   #", "caBundle: QUJD   #")
            .replace("caBundle: \"\"", "caBundle: \"QUJD\"");
        assert_eq!(text, expected);
    }

    #[test]
    fn ca_data_only_under_tls_config() {
        let config = "\
extenders:
- urlPrefix: https://x
  caData: keep
  tlsConfig:
    # comment
    caData: 'old'
    insecure: false
";
        let (text, n) = replace_ca_bundle(config, "TkVX");
        assert_eq!(n, 1);
        assert_eq!(text, config.replace("caData: 'old'", "caData: 'TkVX'"));
    }

    #[test]
    fn multi_line_values_are_replaced_whole() {
        let config = "\
a:
  caBundle: |
    LS0tLS1C
    RUdJTi0t

  # after
  next: 1
b:
  caBundle: LS0t
    continued
  after: 2
";
        let (text, n) = replace_ca_bundle(config, "TkVX");
        assert_eq!(n, 2);
        assert_eq!(
            text,
            "a:\n  caBundle: TkVX\n\n  # after\n  next: 1\nb:\n  caBundle: TkVX\n  after: 2\n"
        );
    }

    #[test]
    fn put_ca_bundle_checks_the_file() {
        let dir = TempDir::new("bundle");
        let path = dir.0.join("webhook.yaml");
        fs::write(&path, WEBHOOK).unwrap();
        let edit = put_ca_bundle(&path, "QUJD").unwrap();
        assert_eq!(edit.replaced, 2);
        edit.write().unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("# Filled by kube-tas certs."), "{text}");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        assert_eq!(docs[0]["webhooks"][0]["clientConfig"]["caBundle"], "QUJD");
        assert_eq!(docs[0]["webhooks"][1]["clientConfig"]["caBundle"], "QUJD");

        let none = dir.0.join("none.yaml");
        fs::write(&none, "kind: ConfigMap\ndata:\n  caData: x\n").unwrap();
        let e = put_ca_bundle(&none, "QUJD").unwrap_err();
        assert!(matches!(e, Error::NoCaBundleKey { .. }), "{e}");
        assert!(e.to_string().contains("none.yaml"), "{e}");
        assert!(e.to_string().contains("caBundle"), "{e}");

        let json = dir.0.join("webhook.json");
        fs::write(
            &json,
            r#"{"webhooks": [{"clientConfig": {"caBundle": "x"}}]}"#,
        )
        .unwrap();
        let e = put_ca_bundle(&json, "QUJD").unwrap_err();
        assert!(e.to_string().contains("flow style"), "{e}");

        let broken = dir.0.join("broken.yaml");
        fs::write(&broken, "a: [\n").unwrap();
        let e = put_ca_bundle(&broken, "QUJD").unwrap_err();
        assert!(e.to_string().contains("not valid YAML"), "{e}");

        let e = put_ca_bundle(&dir.0.join("missing.yaml"), "QUJD").unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("missing.yaml"), "{e}");
    }

    #[test]
    fn a_bad_bundle_file_stops_everything_before_any_write() {
        let dir = TempDir::new("atomic");
        let out = dir.0.join("out");
        let e = run(&options(), &out, &[dir.0.join("missing.yaml")]).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(!out.exists(), "nothing is written on bad input");
    }
}
