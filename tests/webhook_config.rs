//! `webhooks/mutating-webhook.yaml` stays in sync with the server and the manifests: it parses
//! as the `admissionregistration.k8s.io/v1` object the API server takes, registers the webhook
//! under kube-tas's name on `/mutate` of the manifests' webhook Service (every replica), while
//! `webhooks/scheduler-config.yaml` names the manifests' extender Service (the leader only),
//! and keeps the choices style.md practice 14 and extender-protocol.md §4.4 ask for.
//! `certs/cert-manager.yaml` issues the certificate its `inject-ca-from` annotation names, for
//! both Services.

#[path = "common/manifests.rs"]
mod manifests;

use std::path::Path;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Service;
use kube_tas::cluster::live::leader::LEADER_LABEL;
use serde_json::Value;

const WEBHOOK: &str = "webhooks/mutating-webhook.yaml";
const SCHEDULER: &str = "webhooks/scheduler-config.yaml";
const CERT_MANAGER: &str = "certs/cert-manager.yaml";

fn read(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()))
}

fn webhook_config() -> MutatingWebhookConfiguration {
    serde_saphyr::from_str(&read(WEBHOOK)).unwrap_or_else(|e| panic!("{WEBHOOK}: {e}"))
}

/// The only webhook entry.
fn webhook(config: &MutatingWebhookConfiguration) -> &MutatingWebhook {
    let webhooks = config.webhooks.as_deref().unwrap_or_default();
    assert_eq!(webhooks.len(), 1, "{WEBHOOK}: exactly one webhook");
    &webhooks[0]
}

/// The scheduler extender's only entry.
fn scheduler_extender() -> Value {
    let config: Value =
        serde_saphyr::from_str(&read(SCHEDULER)).unwrap_or_else(|e| panic!("{SCHEDULER}: {e}"));
    config["extenders"][0].clone()
}

/// `(service, namespace, port)` of the extender's `https://NAME.NS.svc:PORT/...` urlPrefix.
fn scheduler_service() -> (String, String, i32) {
    let url = scheduler_extender()["urlPrefix"]
        .as_str()
        .unwrap_or_else(|| panic!("{SCHEDULER}: no urlPrefix"))
        .to_string();
    let authority = url
        .strip_prefix("https://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("{SCHEDULER}: urlPrefix {url:?} is not https://HOST/..."));
    let (host, port) = authority
        .split_once(':')
        .unwrap_or_else(|| panic!("{SCHEDULER}: urlPrefix {url:?} has no port"));
    let labels: Vec<&str> = host.split('.').collect();
    assert!(
        labels.len() == 3 && labels[2] == "svc",
        "{SCHEDULER}: urlPrefix host {host:?} is not NAME.NAMESPACE.svc"
    );
    (
        labels[0].to_string(),
        labels[1].to_string(),
        port.parse().expect("the urlPrefix port is a number"),
    )
}

/// The Service of `manifests/` named `name` in `namespace`; panics naming what is missing, or
/// when it has no `port`.
fn manifests_service(name: &str, namespace: &str, port: i32) -> Service {
    let rendered = manifests::render("manifests");
    let services: Vec<Service> = rendered.all_typed("Service");
    let service = services
        .into_iter()
        .find(|s| {
            s.metadata.name.as_deref() == Some(name)
                && s.metadata.namespace.as_deref() == Some(namespace)
        })
        .unwrap_or_else(|| panic!("manifests/ has no Service {namespace}/{name}"));
    let ports = service.spec.as_ref().and_then(|s| s.ports.clone());
    assert!(
        ports.iter().flatten().any(|p| p.port == port),
        "Service {namespace}/{name} has no port {port}"
    );
    service
}

/// What a Service's selector asks of the leader label, if anything.
fn leader_selector(service: &Service) -> Option<String> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.get(LEADER_LABEL).cloned())
}

fn strings(v: &Option<Vec<String>>) -> Vec<&str> {
    v.iter().flatten().map(String::as_str).collect()
}

#[test]
fn registers_the_webhook_as_designed() {
    let config = webhook_config();
    assert_eq!(config.metadata.name.as_deref(), Some("kube-tas"));
    let hook = webhook(&config);
    assert_eq!(hook.name, kube_tas::admission::WEBHOOK_NAME);

    // The manifests' webhook Service, which selects every replica (each answers /mutate), on
    // /mutate; the extender's Service selects only the leader.
    let service = hook
        .client_config
        .service
        .as_ref()
        .expect("clientConfig.service (not url): the API server dials the Service");
    assert!(hook.client_config.url.is_none());
    let port = service
        .port
        .expect("the port must be explicit (default 443)");
    let webhook_service = manifests_service(&service.name, &service.namespace, port);
    assert_eq!(
        leader_selector(&webhook_service),
        None,
        "the webhook's Service must select every replica, not only the leader"
    );
    assert_eq!(service.path.as_deref(), Some("/mutate"));
    let (name, namespace, port) = scheduler_service();
    let extender_service = manifests_service(&name, &namespace, port);
    assert_eq!(
        leader_selector(&extender_service).as_deref(),
        Some("true"),
        "the extender's Service must select only the leader (only it plans and binds)"
    );
    assert_eq!(service.namespace, namespace, "one namespace for kube-tas");

    assert_eq!(hook.admission_review_versions, ["v1"]);
    assert_eq!(hook.side_effects, "None");
    assert_eq!(hook.timeout_seconds, Some(2));
    assert_eq!(
        hook.failure_policy.as_deref(),
        Some("Fail"),
        "failurePolicy must be set explicitly"
    );
    assert_eq!(hook.reinvocation_policy.as_deref(), Some("Never"));
    assert_eq!(hook.match_policy.as_deref(), Some("Equivalent"));

    // Our own namespace (and kube-system) never reach the webhook: no deadlock on rollout.
    let selector = hook
        .namespace_selector
        .as_ref()
        .expect("a namespaceSelector");
    let exclusion = selector
        .match_expressions
        .iter()
        .flatten()
        .find(|e| e.key == "kubernetes.io/metadata.name" && e.operator == "NotIn")
        .expect("a kubernetes.io/metadata.name NotIn expression");
    let excluded = strings(&exclusion.values);
    assert!(excluded.contains(&namespace.as_str()), "{excluded:?}");
    assert!(excluded.contains(&"kube-system"), "{excluded:?}");

    // Jobs, Pods, JobSets and LeaderWorkerSets on CREATE, namespaced.
    let rules = hook.rules.as_deref().unwrap_or_default();
    for (group, version, resource) in [
        ("batch", "v1", "jobs"),
        ("", "v1", "pods"),
        ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
    ] {
        let rule = rules
            .iter()
            .find(|r| strings(&r.resources).contains(&resource))
            .unwrap_or_else(|| panic!("no rule for {resource}"));
        assert_eq!(strings(&rule.api_groups), [group], "{resource}");
        assert_eq!(strings(&rule.api_versions), [version], "{resource}");
        assert_eq!(strings(&rule.operations), ["CREATE"], "{resource}");
        assert_eq!(rule.scope.as_deref(), Some("Namespaced"), "{resource}");
    }
    assert_eq!(rules.len(), 4);

    // Calls are limited to TAS workloads by CEL matchConditions (at most 64, unique names).
    let conditions = hook.match_conditions.as_deref().unwrap_or_default();
    assert!(!conditions.is_empty(), "matchConditions scope the webhook");
    assert!(conditions.len() <= 64);
    let mut names: Vec<&str> = conditions.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        conditions.len(),
        "condition names must be unique"
    );
    let all = conditions
        .iter()
        .map(|c| c.expression.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for needle in [
        "request.kind.kind",
        "'kueue.x-k8s.io/queue-name'",
        "'kueue.x-k8s.io/podset-'",
        "'kueue.x-k8s.io/pod-group-name'",
        "'kube-tas.io/'",
        "object.spec.template.metadata.annotations",
        "'JobSet'",
        "'jobset.sigs.k8s.io/jobset-name'",
        "rj.template.spec.template.metadata.annotations",
        "'LeaderWorkerSet'",
        "leaderWorkerTemplate.workerTemplate.metadata.annotations",
    ] {
        assert!(
            all.contains(needle),
            "matchConditions do not mention {needle}"
        );
    }
    for condition in conditions {
        let e = &condition.expression;
        assert_eq!(
            e.matches('(').count(),
            e.matches(')').count(),
            "{}: unbalanced parentheses",
            condition.name
        );
        // Every map read is guarded: `x in object.metadata.labels` needs has(...) first.
        for map in ["object.metadata.labels", "object.metadata.annotations"] {
            let uses = e.matches(map).count();
            let guards = e.matches(&format!("has({map})")).count();
            assert!(
                uses == 0 || guards > 0,
                "{}: {map} is read without has()",
                condition.name
            );
        }
    }
}

#[test]
fn ca_bundle_is_the_shared_placeholder_until_filled() {
    let placeholder = base64::engine::general_purpose::STANDARD
        .decode(kube_tas::certs::CA_BUNDLE_PLACEHOLDER)
        .unwrap();
    assert_eq!(
        placeholder,
        b"PLACEHOLDER: kube-tas certs writes the CA bundle (PEM) here"
    );
    let config = webhook_config();
    let ca_bundle = webhook(&config)
        .client_config
        .ca_bundle
        .as_ref()
        .expect("clientConfig.caBundle");
    assert_eq!(
        ca_bundle.0, placeholder,
        "{WEBHOOK}: commit the placeholder, never a real CA"
    );
    assert_eq!(
        scheduler_extender()["tlsConfig"]["caData"].as_str(),
        Some(kube_tas::certs::CA_BUNDLE_PLACEHOLDER),
        "{SCHEDULER}: the same placeholder"
    );
}

#[test]
fn cert_manager_issues_the_certificate_the_webhook_names() {
    let config = webhook_config();
    let annotation = config
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("cert-manager.io/inject-ca-from"))
        .expect("the cert-manager.io/inject-ca-from annotation");
    let (namespace, name) = annotation.split_once('/').expect("NAMESPACE/NAME");

    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&read(CERT_MANAGER)).unwrap_or_else(|e| panic!("{e}"));
    let find = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{CERT_MANAGER}: no {kind} {name}"))
    };
    for doc in &docs {
        assert_eq!(doc["apiVersion"], "cert-manager.io/v1");
        assert_eq!(doc["metadata"]["namespace"], namespace, "{doc}");
    }

    let serving = find("Certificate", name);
    let spec = &serving["spec"];
    assert_eq!(spec["secretName"], "kube-tas-tls");
    let dns: Vec<&str> = spec["dnsNames"]
        .as_array()
        .expect("dnsNames")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The names the API server and kube-scheduler verify: NAME.NAMESPACE.svc of each Service
    // they call.
    let (svc, ns, _) = scheduler_service();
    let webhook_service = webhook(&config).client_config.service.clone().unwrap();
    let webhook_host = format!("{}.{}.svc", webhook_service.name, webhook_service.namespace);
    for host in [format!("{svc}.{ns}.svc"), webhook_host.clone()] {
        assert!(
            dns.contains(&host.as_str()),
            "dnsNames lack {host}: {dns:?}"
        );
    }
    // The same names as the documented
    // `kube-tas certs --service kube-tas --namespace kube-tas-system --dns <webhook host>`.
    let want = kube_tas::certs::CertsOptions {
        dns: vec![webhook_host],
        ..kube_tas::certs::CertsOptions::new(svc, ns)
    }
    .dns_names();
    assert_eq!(dns, want, "the same names as `kube-tas certs`");
    assert_eq!(spec["privateKey"]["algorithm"], "ECDSA");
    assert_eq!(spec["privateKey"]["size"], 256);
    assert!(spec["duration"].is_string() && spec["renewBefore"].is_string());
    assert!(
        spec["usages"]
            .as_array()
            .is_some_and(|u| u.iter().any(|u| u == "server auth")),
        "usages must include server auth"
    );

    // The chain: serving <- CA Issuer <- CA Certificate <- self-signed Issuer.
    let ca_issuer = find("Issuer", spec["issuerRef"]["name"].as_str().unwrap());
    let ca_secret = ca_issuer["spec"]["ca"]["secretName"].as_str().unwrap();
    let ca = docs
        .iter()
        .find(|d| d["kind"] == "Certificate" && d["spec"]["secretName"] == ca_secret)
        .unwrap_or_else(|| panic!("no Certificate writes Secret {ca_secret}"));
    assert_eq!(ca_secret, "kube-tas-ca");
    assert_eq!(ca["spec"]["isCA"], true);
    let root = find("Issuer", ca["spec"]["issuerRef"]["name"].as_str().unwrap());
    assert!(root["spec"]["selfSigned"].is_object());
}
