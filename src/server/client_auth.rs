//! Who may call the main port, when `--client-ca` is given.
//!
//! Without it, anyone who reaches the port can POST `filter` for an invented group and make
//! kube-tas hold capacity: the NetworkPolicy is then the only guard. With it, the TLS layer
//! verifies any client certificate against the CA ([`super::tls`]), and this middleware,
//! before any body is read, answers
//!
//! * **401** when the caller presented no certificate;
//! * **403** when its certificate names none of the identities allowed for the route: the
//!   extender routes (`/scheduler/...`, `--extender-client-names`) and the webhook (`/mutate`,
//!   `--webhook-client-names`); an empty list allows every certificate the CA signed.
//!
//! A certificate's identities are its subject common names and its DNS and URI subject
//! alternative names (kube-scheduler's and the API server's client certificates usually carry
//! their name as the common name, e.g. `system:kube-scheduler`, `kube-apiserver`). A refused
//! request is answered before it reaches the extender or the webhook, so it changes nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_server::tls::TlsInfo;

/// Which client identities a group of routes accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedClients {
    names: BTreeSet<String>,
}

impl AllowedClients {
    /// Allows exactly `names`; no names allows every certificate the CA signed.
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        Self {
            names: names.into_iter().filter(|n| !n.is_empty()).collect(),
        }
    }

    fn allows(&self, identities: &[String]) -> bool {
        self.names.is_empty() || identities.iter().any(|i| self.names.contains(i))
    }

    fn describe(&self) -> String {
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        names.join(", ")
    }
}

/// The client policy of the main port.
#[derive(Debug, Clone, Default)]
pub struct ClientPolicy {
    /// Who may call `/scheduler/filter`, `/scheduler/prioritize` and `/scheduler/bind`.
    pub extender: AllowedClients,
    /// Who may call `/mutate`.
    pub webhook: AllowedClients,
}

/// The identities a DER certificate names: subject common names, then DNS and URI subject
/// alternative names. Empty when the DER does not parse.
pub fn identities(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let mut out: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::DNSName(n)
                | x509_parser::extensions::GeneralName::URI(n) => out.push((*n).to_string()),
                _ => {}
            }
        }
    }
    out
}

/// axum middleware: refuses callers the policy does not allow (see the module docs).
pub async fn require_client(
    State(policy): State<Arc<ClientPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    // Any other route of the main port (none today) still needs a certificate of the CA.
    let anyone = AllowedClients::default();
    let (allowed, route) = if path.starts_with("/scheduler/") {
        (&policy.extender, "the scheduler extender")
    } else if path == "/mutate" {
        (&policy.webhook, "the admission webhook")
    } else {
        (&anyone, "this port")
    };
    let leaf = request
        .extensions()
        .get::<Arc<TlsInfo>>()
        .and_then(|info| info.peer_certificates.first().cloned());
    let Some(leaf) = leaf else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            format!("{route} requires a client certificate signed by the --client-ca of kube-tas"),
        );
    };
    let identities = identities(&leaf);
    if !allowed.allows(&identities) {
        tracing::warn!(
            route = path,
            client = ?identities,
            "refused a client certificate not allowed for this route"
        );
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "{route} does not accept the client certificate of {}; it accepts {}",
                if identities.is_empty() {
                    "no name".to_string()
                } else {
                    identities.join(", ")
                },
                allowed.describe()
            ),
        );
    }
    next.run(request).await
}

fn refuse(status: StatusCode, message: String) -> Response {
    (
        status,
        [("content-type", "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: &str, sans: &[&str]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn identities_are_the_common_name_and_the_dns_names() {
        let der = cert("system:kube-scheduler", &["scheduler.example"]);
        assert_eq!(
            identities(&der),
            ["system:kube-scheduler", "scheduler.example"]
        );
        assert!(identities(b"not a certificate").is_empty());
    }

    #[test]
    fn an_empty_list_allows_any_signed_certificate_a_list_only_its_names() {
        let any = AllowedClients::new(Vec::new());
        assert!(any.allows(&["whoever".into()]));
        assert!(any.allows(&[]));
        let only = AllowedClients::new(["kube-apiserver".to_string()]);
        assert!(only.allows(&["x".into(), "kube-apiserver".into()]));
        assert!(!only.allows(&["kube-apiserver-x".into()]));
        assert!(!only.allows(&[]));
    }
}
