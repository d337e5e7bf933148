//! `webhooks/scheduler-config.yaml` stays in sync with the server: the KubeSchedulerConfiguration
//! registers kube-tas the way DESIGN.md §3 and style.md practice 14 require, and every verb it
//! names is a route the real router answers with 200.
//!
//! The URL rule is kube-scheduler's: `strings.TrimRight(urlPrefix, "/") + "/" + verb`
//! (extender-protocol.md §1).

use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

const CONFIG: &str = "webhooks/scheduler-config.yaml";

fn config() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(CONFIG);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    serde_saphyr::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{CONFIG}: {e}"))
}

/// The only extender entry.
fn extender(config: &Value) -> &Value {
    let extenders = config["extenders"]
        .as_array()
        .unwrap_or_else(|| panic!("{CONFIG}: `extenders` is not a list"));
    assert_eq!(extenders.len(), 1, "{CONFIG}: exactly one extender");
    &extenders[0]
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{CONFIG}: `{key}` is not a string: {}", v[key]))
}

/// `(scheme, authority, path)` of an absolute URL, without a query or fragment.
fn split_url(url: &str) -> (&str, &str, &str) {
    let (scheme, rest) = url
        .split_once("://")
        .unwrap_or_else(|| panic!("urlPrefix {url:?} has no scheme"));
    assert!(
        !rest.contains(['?', '#']),
        "urlPrefix {url:?} has a query or fragment"
    );
    match rest.find('/') {
        Some(i) => (scheme, &rest[..i], &rest[i..]),
        None => (scheme, rest, ""),
    }
}

/// A Go `time.ParseDuration` string (`"5s"`, `"1m30s"`, `"500ms"`, `"1.5s"`); no sign.
fn parse_go_duration(s: &str) -> Option<Duration> {
    const UNITS: [(&str, f64); 7] = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
    ];
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let (_, scale) = UNITS.iter().find(|(u, _)| *u == &rest[..unit_len])?;
        total += number * scale;
        rest = &rest[unit_len..];
    }
    (!s.is_empty()).then(|| Duration::from_secs_f64(total))
}

/// Standard, padded base64 (what Go's `[]byte` fields take in YAML/JSON).
fn is_base64(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    s.len().is_multiple_of(4)
        && s.len() - body.len() <= 2
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

#[test]
fn duration_parser_follows_go() {
    let cases = [
        ("5s", Some(5_000)),
        ("1m30s", Some(90_000)),
        ("500ms", Some(500)),
        ("1.5s", Some(1_500)),
        ("0", Some(0)),
        ("", None),
        ("5", None),
        ("5x", None),
        ("s", None),
    ];
    for (text, millis) in cases {
        assert_eq!(
            parse_go_duration(text).map(|d| d.as_millis()),
            millis,
            "{text:?}"
        );
    }
}

#[test]
fn registers_the_extender_as_designed() {
    let config = config();
    assert_eq!(
        str_field(&config, "apiVersion"),
        "kubescheduler.config.k8s.io/v1"
    );
    assert_eq!(str_field(&config, "kind"), "KubeSchedulerConfiguration");

    let ext = extender(&config);
    let (scheme, authority, path) = split_url(str_field(ext, "urlPrefix"));
    assert_eq!(scheme, "https", "the scheme comes from urlPrefix alone");
    assert_eq!(authority, "kube-tas.kube-tas-system.svc:8443");
    assert!(
        path.trim_end_matches('/').ends_with("/scheduler"),
        "urlPrefix path {path:?} must end with /scheduler"
    );

    assert_eq!(str_field(ext, "filterVerb"), "filter");
    assert_eq!(str_field(ext, "prioritizeVerb"), "prioritize");
    assert_eq!(str_field(ext, "bindVerb"), "bind");
    assert!(
        ext["preemptVerb"].as_str().unwrap_or_default().is_empty(),
        "no preemptVerb: kube-tas does not serve preempt"
    );

    assert_eq!(ext["nodeCacheCapable"], Value::Bool(true));
    assert!(
        ext["weight"].as_i64().is_some_and(|w| w > 0),
        "weight must be a positive integer (validation, with a prioritizeVerb): {}",
        ext["weight"]
    );
    let timeout = str_field(ext, "httpTimeout");
    let timeout = parse_go_duration(timeout)
        .unwrap_or_else(|| panic!("httpTimeout {timeout:?} is not a Go duration"));
    assert!(
        timeout > Duration::ZERO && timeout <= Duration::from_secs(30),
        "httpTimeout {timeout:?} must be in (0, 30s]"
    );
    assert_eq!(
        ext["ignorable"],
        Value::Bool(false),
        "ignorable must be explicitly false: a gang must not scatter when kube-tas is down"
    );

    assert_eq!(ext["enableHTTPS"], Value::Bool(true));
    let ca = str_field(&ext["tlsConfig"], "caData");
    // An empty caData would make kube-scheduler skip certificate verification.
    assert!(
        !ca.is_empty() && is_base64(ca),
        "tlsConfig.caData must be non-empty base64: {ca:?}"
    );

    assert_eq!(config["percentageOfNodesToScore"].as_i64(), Some(100));
    let profiles = config["profiles"]
        .as_array()
        .unwrap_or_else(|| panic!("{CONFIG}: `profiles` is not a list"));
    assert!(
        profiles
            .iter()
            .any(|p| p["schedulerName"] == "default-scheduler"),
        "a profile for default-scheduler"
    );
    for p in profiles {
        assert!(
            p.get("percentageOfNodesToScore").is_none(),
            "a profile-level percentageOfNodesToScore would override the global 100"
        );
    }
    assert_eq!(config["leaderElection"]["leaderElect"], Value::Bool(true));
}

/// The extender service over the sample data centre in `examples/`.
fn extender_service() -> kube_tas::extender::Extender {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let cluster = kube_tas::cluster::load_paths(&[examples])
        .unwrap_or_else(|e| panic!("examples/ do not load: {e}"));
    kube_tas::extender::Extender::over_cluster(
        &cluster,
        kube_tas::topology::FeatureGates::default(),
        Duration::from_secs(60),
    )
}

#[tokio::test]
async fn every_configured_verb_is_served() {
    const ARGS: &str = r#"{"Pod":{"metadata":{"name":"p","namespace":"default","uid":"u1"},"spec":{"containers":[]}},"Nodes":null,"NodeNames":[]}"#;
    const BINDING: &str = r#"{"PodName":"p","PodNamespace":"default","PodUID":"u1","Node":"n"}"#;

    let config = config();
    let ext = extender(&config);
    let (_, _, path) = split_url(str_field(ext, "urlPrefix"));
    let prefix = path.trim_end_matches('/');
    let router = kube_tas::server::main_router(extender_service());

    for (key, body) in [
        ("filterVerb", ARGS),
        ("prioritizeVerb", ARGS),
        ("bindVerb", BINDING),
    ] {
        let uri = format!("{prefix}/{}", str_field(ext, key));
        // As kube-scheduler's HTTPExtender sends it.
        let request = Request::post(&uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap_or_else(|e| panic!("POST {uri}: {e}"));
        let response = router
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|e| match e {});
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("POST {uri}: reading the body: {e}"))
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(status, StatusCode::OK, "POST {uri} ({key}): {text}");
        let answer: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("POST {uri}: not JSON ({e}): {text}"));
        // The protocol's own shapes: prioritize is a bare array, the others carry `Error`.
        if key == "prioritizeVerb" {
            assert!(answer.is_array(), "POST {uri}: {text}");
        } else {
            assert!(answer["Error"].is_string(), "POST {uri}: {text}");
        }
    }
}
