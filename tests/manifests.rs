//! `manifests/` (with `certs/`'s kustomizations and the `Dockerfile`) installs a kube-tas that
//! works: every file parses as its Kubernetes type with no field lost, every kustomization
//! renders as kustomize would and uses every file, and the pieces fit kube-tas and each other:
//! the Deployment's args are `serve`'s own flags, its ports and probes are the servers', the
//! TLS flags point into the mounted Secret the overlays provide, the Services select the
//! replicas (the extender's only the leader, by kube-tas's own label), the pod runs
//! restricted, its shutdown fits its grace period, and the CRDs serve and keep what kube-tas
//! watches and reads (kube-tas.io's copies of the Workload API's kinds: upstream's specs, field
//! for field). The RBAC is checked against real requests in `tests/rbac.rs`.

mod common;
#[path = "common/manifests.rs"]
mod manifests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use axum::http::StatusCode;
use clap::{CommandFactory, Parser};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Container, Namespace, PodSpec, Probe, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube_tas::cli::{Cli, Command, ServeArgs};
use kube_tas::cluster::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Topology};
use kube_tas::cluster::live::leader::LEADER_LABEL;
use kube_tas::cluster::quantity::parse_quantity;
use kube_tas::server::admin::{Readiness, admin_router};
use kube_tas::server::metrics::Metrics;
use manifests::{Rendered, read_docs, render, repo, shown, split_image, str_at};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The kustomization that `kubectl apply -k manifests/` renders.
const ROOT: &str = "manifests";
const BASE: &str = "manifests/base";
const CERT_MANAGER_OVERLAY: &str = "manifests/overlays/cert-manager";
const DEV_OVERLAY: &str = "manifests/overlays/dev";
const CRDS: &str = "manifests/crds";
/// kube-tas.io's copies of the Workload API's PodGroup and CompositePodGroup.
const CRDS_WORKLOAD_API: &str = "manifests/crds-workload-api";
/// The distroless image's `nonroot` user (the Dockerfile's `USER nonroot`).
const NONROOT_UID: i64 = 65532;

fn deployment(r: &Rendered) -> Deployment {
    r.only_typed("Deployment")
}

fn pod_spec(d: &Deployment) -> &PodSpec {
    d.spec
        .template
        .spec
        .as_ref()
        .expect("the Deployment has a pod template spec")
}

/// The only container.
fn container(d: &Deployment) -> &Container {
    let containers = &pod_spec(d).containers;
    assert_eq!(containers.len(), 1, "one container");
    &containers[0]
}

fn template_labels(d: &Deployment) -> BTreeMap<String, String> {
    let meta = d
        .spec
        .template
        .metadata
        .as_ref()
        .expect("template metadata");
    meta.labels.clone().unwrap_or_default()
}

/// The container's command line, parsed by kube-tas's own parser.
fn serve_args(d: &Deployment) -> ServeArgs {
    let c = container(d);
    assert!(
        c.command.is_none(),
        "no command: the image's ENTRYPOINT is the kube-tas binary"
    );
    let cli = Cli::try_parse_from(argv(c)).unwrap_or_else(|e| panic!("the Deployment's args: {e}"));
    match cli.command {
        Command::Serve(args) => *args,
        other => panic!("the Deployment runs {other:?}, not serve"),
    }
}

fn argv(c: &Container) -> Vec<String> {
    std::iter::once("kube-tas".to_string())
        .chain(c.args.iter().flatten().cloned())
        .collect()
}

/// The container port `port` refers to (a number or a port name).
fn container_port(c: &Container, port: &IntOrString) -> i32 {
    let ports = c.ports.as_deref().unwrap_or_default();
    let found = match port {
        IntOrString::Int(n) => ports.iter().find(|p| p.container_port == *n),
        IntOrString::String(name) => ports.iter().find(|p| p.name.as_deref() == Some(name)),
    };
    found
        .unwrap_or_else(|| panic!("{port:?} is not a port of container {}", c.name))
        .container_port
}

fn http_get(probe: &Option<Probe>, what: &str) -> (String, IntOrString) {
    let get = probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .unwrap_or_else(|| panic!("a {what} with httpGet"));
    (get.path.clone().expect("a probe path"), get.port.clone())
}

// Every file parses --------------------------------------------------------------------------

/// Every `*.yaml` under `dir`, recursively, sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path.canonicalize().unwrap());
            }
        }
    }
    out.sort();
    out
}

/// The first place where `back` (the object as its type wrote it again) differs from `orig`:
/// a field the type does not have, or a value it reads differently.
fn lost(orig: &Value, back: &Value, path: &str) -> Option<String> {
    match (orig, back) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(k, v)| match b.get(k) {
            None => Some(format!("{path}.{k}: no such field")),
            Some(w) => lost(v, w, &format!("{path}.{k}")),
        }),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| lost(v, w, &format!("{path}[{i}]"))),
        _ if orig == back => None,
        // One number, written as an integer and read back as a float (a schema's `minimum: 1`).
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        _ => Some(format!("{path}: {orig} reads as {back}")),
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<(), String> {
    let object: T = serde_path_to_error::deserialize(doc).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&object).map_err(|e| e.to_string())?;
    match lost(doc, &back, "") {
        Some(problem) => Err(problem),
        None => Ok(()),
    }
}

/// Parses `doc` as its Kubernetes type; `Ok(false)` for a kind k8s-openapi has no type for
/// (cert-manager's), which other tests check field by field.
fn parse_as_its_type(doc: &Value) -> Result<bool, String> {
    let api_version = str_at(doc, "/apiVersion");
    let kind = str_at(doc, "/kind");
    macro_rules! types {
        ($($api_version:literal $kind:literal => $t:ty,)*) => {
            match (api_version, kind) {
                $(($api_version, $kind) => round_trip::<$t>(doc).map(|()| true),)*
                ("cert-manager.io/v1", "Issuer" | "Certificate") => Ok(false),
                _ => Err(format!("{api_version} {kind}: no Kubernetes type known to this test")),
            }
        };
    }
    types! {
        "v1" "Namespace" => Namespace,
        "v1" "ServiceAccount" => ServiceAccount,
        "v1" "Service" => Service,
        "v1" "Secret" => Secret,
        "apps/v1" "Deployment" => Deployment,
        "policy/v1" "PodDisruptionBudget" => PodDisruptionBudget,
        "networking.k8s.io/v1" "NetworkPolicy" => NetworkPolicy,
        "rbac.authorization.k8s.io/v1" "ClusterRole" => ClusterRole,
        "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" => ClusterRoleBinding,
        "rbac.authorization.k8s.io/v1" "Role" => Role,
        "rbac.authorization.k8s.io/v1" "RoleBinding" => RoleBinding,
        "apiextensions.k8s.io/v1" "CustomResourceDefinition" => CustomResourceDefinition,
        "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" =>
            MutatingWebhookConfiguration,
    }
}

#[test]
fn every_file_parses_as_its_kubernetes_type_with_no_field_lost() {
    let root = repo();
    let mut files: Vec<PathBuf> = yaml_files(&root.join("manifests"))
        .into_iter()
        .filter(|p| !p.ends_with(manifests::KUSTOMIZATION))
        .collect();
    files.push(root.join("webhooks/mutating-webhook.yaml"));
    files.push(root.join("certs/cert-manager.yaml"));
    let (mut typed, mut untyped) = (0, Vec::new());
    let mut problems = Vec::new();
    for file in &files {
        let docs = read_docs(file);
        assert!(!docs.is_empty(), "{}: no object", shown(file));
        for doc in docs {
            let what = format!(
                "{}: {} {}",
                shown(file),
                str_at(&doc, "/kind"),
                str_at(&doc, "/metadata/name")
            );
            match parse_as_its_type(&doc) {
                Ok(true) => typed += 1,
                Ok(false) => untyped.push(what),
                Err(e) => problems.push(format!("{what}: {e}")),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!(
        "{typed} objects parsed as their types; without a type here (cert-manager's, checked \
         by tests/webhook_config.rs): {untyped:#?}"
    );
}

// Kustomizations ------------------------------------------------------------------------------

/// Every folder with a kustomization under `manifests/` and `certs/`.
fn kustomizations() -> Vec<PathBuf> {
    let root = repo();
    [root.join("manifests"), root.join("certs")]
        .iter()
        .flat_map(|d| yaml_files(d))
        .filter(|p| p.ends_with(manifests::KUSTOMIZATION))
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect()
}

#[test]
fn every_kustomization_renders_and_every_file_is_used() {
    let all = kustomizations();
    let mut used = BTreeSet::new();
    for dir in &all {
        let rendered = render(dir);
        assert!(
            !rendered.objects.is_empty(),
            "{}: renders nothing",
            shown(dir)
        );
        used.extend(rendered.files);
    }
    for entry in [
        ROOT,
        BASE,
        CRDS,
        CRDS_WORKLOAD_API,
        CERT_MANAGER_OVERLAY,
        DEV_OVERLAY,
        "certs",
        "certs/dev",
    ] {
        let dir = repo().join(entry).canonicalize().unwrap();
        assert!(all.contains(&dir), "{entry} has no kustomization");
    }
    // Every manifest, and cert-manager's, is part of an installation.
    let root = repo();
    let mut files = yaml_files(&root.join("manifests"));
    files.extend(
        std::fs::read_dir(root.join("certs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .map(|p| p.canonicalize().unwrap()),
    );
    let unused: Vec<String> = files
        .iter()
        .filter(|f| !used.contains(*f))
        .map(|f| shown(f))
        .collect();
    assert!(
        unused.is_empty(),
        "files no kustomization includes: {unused:?}"
    );
}

#[test]
fn the_root_is_the_base_and_every_overlay_adds_to_it() {
    let base = render(BASE);
    assert_eq!(render(ROOT).objects, base.objects);
    for overlay in [CERT_MANAGER_OVERLAY, DEV_OVERLAY] {
        let rendered = render(overlay);
        for object in &base.objects {
            assert!(
                rendered.objects.contains(object),
                "{overlay} lacks the base's {:?}",
                manifests::identity(object)
            );
        }
        assert!(rendered.objects.len() > base.objects.len(), "{overlay}");
    }
    // The CRDs are applied only where Kueue (or the Workload API) is not served: never part of
    // an installation.
    for installation in [ROOT, CERT_MANAGER_OVERLAY, DEV_OVERLAY] {
        assert!(
            render(installation)
                .all("CustomResourceDefinition")
                .is_empty(),
            "{installation} must not install CRDs"
        );
    }
}

#[test]
fn the_overlays_provide_the_secret_the_deployment_mounts() {
    let d = deployment(&render(ROOT));
    let (secret, _) = tls_volume(&d);
    let namespace = d.metadata.namespace.clone().unwrap();
    // The base leaves the Secret to the overlays (or to the user).
    assert!(render(ROOT).all("Secret").is_empty());

    let cert_manager = render(CERT_MANAGER_OVERLAY);
    let writes: Vec<&str> = cert_manager
        .all("Certificate")
        .iter()
        .map(|c| str_at(c, "/spec/secretName"))
        .collect();
    assert!(
        writes.contains(&secret.as_str()),
        "no Certificate writes {secret}: {writes:?}"
    );
    let certificate = cert_manager
        .all("Certificate")
        .into_iter()
        .find(|c| str_at(c, "/spec/secretName") == secret)
        .unwrap();
    assert_eq!(str_at(certificate, "/metadata/namespace"), namespace);

    let dev = render(DEV_OVERLAY);
    let generated: Secret = manifests::typed(
        dev.named("Secret", &secret)
            .unwrap_or_else(|| panic!("{DEV_OVERLAY} makes no Secret {secret}")),
    );
    assert_eq!(
        generated.metadata.namespace.as_deref(),
        Some(namespace.as_str())
    );
    assert_eq!(generated.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys: BTreeSet<&str> = generated
        .data
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    use kube_tas::certs::{CA_CERT_FILE, CA_KEY_FILE, TLS_CERT_FILE, TLS_KEY_FILE};
    assert!(
        keys.contains(TLS_CERT_FILE) && keys.contains(TLS_KEY_FILE),
        "{keys:?}"
    );
    assert!(
        !keys.contains(CA_KEY_FILE),
        "the CA's key never goes into the cluster"
    );
    // From the files `kube-tas certs --out certs/dev` writes, under the exact name mounted.
    let certs_dev = repo().join("certs/dev").canonicalize().unwrap();
    for file in &dev.generator_files {
        assert_eq!(
            file.parent(),
            Some(certs_dev.as_path()),
            "{}",
            file.display()
        );
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(
            [TLS_CERT_FILE, TLS_KEY_FILE, CA_CERT_FILE].contains(&name),
            "{name} is not a file `kube-tas certs` writes"
        );
    }
    for (dir, generator) in &dev.generators {
        let keep_name = generator
            .options
            .as_ref()
            .and_then(|o| o.disable_name_suffix_hash);
        assert_eq!(
            keep_name,
            Some(true),
            "{}: a hash suffix would rename the Secret cert-manager and the docs call {secret}",
            shown(dir)
        );
    }
}

// The Deployment and `serve` ------------------------------------------------------------------

#[test]
fn the_deployment_runs_serve_in_live_mode_with_its_own_flags() {
    let d = deployment(&render(ROOT));
    let args = serve_args(&d);
    assert!(args.cluster.is_empty(), "live mode: no --cluster");
    assert!(args.kubeconfig.is_none(), "in-cluster: the service account");
    assert!(args.leader_elect, "two replicas elect one leader");
    assert!(d.spec.replicas.unwrap_or(1) >= 2);
    assert!(args.tls_cert.is_some() && args.tls_key.is_some(), "TLS");
    for addr in [args.listen, args.admin_listen] {
        assert!(
            addr.ip().is_unspecified(),
            "{addr}: must listen on the pod IP"
        );
    }

    // The replica's identity comes from the downward API, through the variable the flag reads.
    let serve = Cli::command();
    let serve = serve.find_subcommand("serve").unwrap();
    let pod_name_env = serve
        .get_arguments()
        .find(|a| a.get_id() == "pod_name")
        .and_then(|a| a.get_env())
        .expect("--pod-name has an environment variable")
        .to_str()
        .unwrap()
        .to_string();
    let env = container(&d).env.as_deref().unwrap_or_default();
    let field = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(field(&pod_name_env).as_deref(), Some("metadata.name"));
    // POD_NAMESPACE is where src/server/live.rs looks for the Lease's and the pod's namespace.
    assert_eq!(
        field("POD_NAMESPACE").as_deref(),
        Some("metadata.namespace")
    );
}

#[tokio::test]
async fn ports_and_probes_are_the_servers() {
    let d = deployment(&render(ROOT));
    let args = serve_args(&d);
    let c = container(&d);
    let main = i32::from(args.listen.port());
    let admin = i32::from(args.admin_listen.port());
    let declared: BTreeSet<i32> = c.ports.iter().flatten().map(|p| p.container_port).collect();
    assert_eq!(
        declared,
        BTreeSet::from([main, admin]),
        "the container's ports"
    );

    let (ready_path, ready_port) = http_get(&c.readiness_probe, "readinessProbe");
    let (live_path, live_port) = http_get(&c.liveness_probe, "livenessProbe");
    assert_eq!(
        container_port(c, &ready_port),
        admin,
        "readiness on the admin port"
    );
    assert_eq!(
        container_port(c, &live_port),
        admin,
        "liveness on the admin port"
    );
    assert_ne!(
        ready_path, live_path,
        "readiness and liveness mean different things"
    );

    // The paths are the admin server's: readiness follows serve's readiness, liveness does not.
    common::install_crypto_provider();
    let readiness = Readiness::new();
    let router = admin_router(readiness.clone(), Metrics::new(common::example_extender()));
    let get = |path: String| {
        let router = router.clone();
        async move { common::send(&router, "GET", &path, "").await.0 }
    };
    assert_eq!(
        get(ready_path.clone()).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        get(live_path.clone()).await,
        StatusCode::OK,
        "alive while not ready"
    );
    readiness.mark_ready();
    assert_eq!(get(ready_path.clone()).await, StatusCode::OK);
    readiness.begin_shutdown();
    assert_eq!(
        get(ready_path).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "draining"
    );
    assert_eq!(get(live_path).await, StatusCode::OK, "alive while draining");
    assert_eq!(get("/no-such-probe".into()).await, StatusCode::NOT_FOUND);
}

/// The Secret volume's Secret name and where it is mounted.
fn tls_volume(d: &Deployment) -> (String, PathBuf) {
    let spec = pod_spec(d);
    let secrets: Vec<_> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref().map(|s| (v.name.clone(), s)))
        .collect();
    assert_eq!(secrets.len(), 1, "one Secret volume");
    let (volume, secret) = &secrets[0];
    let mounts: Vec<_> = container(d)
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| &m.name == volume)
        .collect();
    assert_eq!(mounts.len(), 1, "the Secret is mounted once");
    let mount = mounts[0];
    assert_eq!(mount.read_only, Some(true), "mounted read-only");
    assert!(
        mount.sub_path.is_none() && mount.sub_path_expr.is_none(),
        "the kubelet never updates a subPath mount: a renewed certificate would not be seen"
    );
    (
        secret.secret_name.clone().expect("secretName"),
        PathBuf::from(&mount.mount_path),
    )
}

#[test]
fn tls_flags_point_into_the_mounted_secret() {
    let d = deployment(&render(ROOT));
    let args = serve_args(&d);
    let (_, mount) = tls_volume(&d);
    assert_eq!(
        args.tls_cert.as_deref(),
        Some(mount.join(kube_tas::certs::TLS_CERT_FILE).as_path())
    );
    assert_eq!(
        args.tls_key.as_deref(),
        Some(mount.join(kube_tas::certs::TLS_KEY_FILE).as_path())
    );
}

#[test]
fn services_select_the_replicas_and_the_extender_only_the_leader() {
    let r = render(ROOT);
    let d = deployment(&r);
    let labels = template_labels(&d);
    let c = container(&d);
    let main = i32::from(serve_args(&d).listen.port());

    // The leader label is set at run time, never by the Deployment, and never selected by it.
    assert!(
        !labels.contains_key(LEADER_LABEL),
        "the template must not carry {LEADER_LABEL}"
    );
    let selector = &d.spec.selector;
    let match_labels = selector.match_labels.clone().unwrap_or_default();
    assert!(!match_labels.contains_key(LEADER_LABEL));
    assert!(manifests::selects(
        &match_labels,
        selector.match_expressions.is_some(),
        &labels
    ));

    let services: Vec<Service> = r.all_typed("Service");
    assert_eq!(
        services.len(),
        2,
        "the extender's Service and the webhook's"
    );
    let mut leader_only = Vec::new();
    for service in &services {
        let name = service.metadata.name.clone().unwrap();
        let spec = service.spec.as_ref().unwrap();
        let selector = spec.selector.clone().unwrap_or_default();
        assert!(!selector.is_empty(), "{name}: a Service without selector");
        let mut leader = labels.clone();
        leader.insert(LEADER_LABEL.to_string(), "true".to_string());
        assert!(
            manifests::selects(&selector, false, &leader),
            "{name}: selects no kube-tas pod, not even the leader"
        );
        if selector.contains_key(LEADER_LABEL) {
            leader_only.push(name.clone());
        }
        for port in spec.ports.iter().flatten() {
            let target = port
                .target_port
                .clone()
                .unwrap_or(IntOrString::Int(port.port));
            assert_eq!(
                container_port(c, &target),
                main,
                "{name}: port {} must reach the main port",
                port.port
            );
        }
    }
    assert_eq!(
        leader_only.len(),
        1,
        "exactly one Service selects only the leader"
    );
}

#[test]
fn the_pod_runs_restricted() {
    let r = render(ROOT);
    let d = deployment(&r);
    let spec = pod_spec(&d);
    assert_ne!(spec.host_network, Some(true));
    assert_ne!(spec.host_pid, Some(true));
    assert_ne!(spec.host_ipc, Some(true));
    let pod = spec
        .security_context
        .as_ref()
        .expect("a pod securityContext");
    assert_eq!(pod.run_as_non_root, Some(true));
    assert_eq!(
        pod.run_as_user,
        Some(NONROOT_UID),
        "numeric, so the kubelet can check it"
    );
    assert_eq!(
        pod.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault")
    );
    let c = container(&d)
        .security_context
        .as_ref()
        .expect("a container securityContext");
    assert_eq!(c.allow_privilege_escalation, Some(false));
    assert_eq!(c.read_only_root_filesystem, Some(true));
    assert_ne!(c.privileged, Some(true));
    assert_ne!(c.run_as_non_root, Some(false));
    let drop = c
        .capabilities
        .as_ref()
        .and_then(|c| c.drop.clone())
        .unwrap_or_default();
    assert_eq!(drop, ["ALL"]);
    let add = c
        .capabilities
        .as_ref()
        .and_then(|c| c.add.clone())
        .unwrap_or_default();
    assert!(add.is_empty(), "no capability added: {add:?}");

    // The namespace enforces what the pod meets.
    let ns: Namespace = r.only_typed("Namespace");
    let ns_labels = ns.metadata.labels.unwrap_or_default();
    assert_eq!(
        ns_labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("restricted")
    );
}

#[test]
fn the_termination_grace_period_covers_the_whole_shutdown() {
    let d = deployment(&render(ROOT));
    let c = container(&d);
    let sleep = c
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|p| p.sleep.as_ref())
        .map(|s| s.seconds)
        .expect("a preStop sleep (the image has no shell for an exec hook)");
    assert!(sleep > 0);
    // Every phase of serve's shutdown is a `--shutdown-*-seconds` flag: add them all up as the
    // container sets them (or their defaults).
    let matches = Cli::command()
        .try_get_matches_from(argv(c))
        .unwrap_or_else(|e| panic!("{e}"));
    let serve = matches.subcommand_matches("serve").expect("serve");
    let cmd = Cli::command();
    let phases: Vec<(String, u64)> = cmd
        .find_subcommand("serve")
        .unwrap()
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .filter(|id| id.starts_with("shutdown_") && id.ends_with("_seconds"))
        .map(|id| {
            let value = *serve.get_one::<u64>(&id).expect("a default");
            (id, value)
        })
        .collect();
    assert!(
        phases.iter().any(|(id, _)| id == "shutdown_grace_seconds"),
        "{phases:?}"
    );
    let shutdown: u64 = phases.iter().map(|(_, s)| s).sum();
    let grace = pod_spec(&d)
        .termination_grace_period_seconds
        .expect("terminationGracePeriodSeconds, stated");
    assert!(
        grace > sleep + shutdown as i64,
        "terminationGracePeriodSeconds {grace} must exceed the preStop sleep {sleep} plus \
         serve's shutdown {phases:?}: the kubelet kills the container at the end"
    );
}

#[test]
fn resources_are_requested_and_memory_is_bounded() {
    let d = deployment(&render(ROOT));
    let resources = container(&d).resources.clone().expect("resources");
    let requests = resources.requests.unwrap_or_default();
    let limits = resources.limits.unwrap_or_default();
    let value = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| {
        parse_quantity(&q.0).unwrap_or_else(|e| panic!("{}: {e}", q.0))
    };
    for r in ["cpu", "memory"] {
        assert!(
            requests.get(r).is_some_and(|q| !value(q).is_zero()),
            "requests.{r}"
        );
    }
    let limit = limits.get("memory").expect("a memory limit");
    assert!(value(limit).nanos() >= value(&requests["memory"]).nanos());
    assert!(
        !limits.contains_key("cpu"),
        "no CPU limit: throttling adds latency to every webhook and extender call"
    );
}

#[test]
fn the_image_is_a_kustomize_image_tagged_with_the_crate_version() {
    let raw: Deployment =
        manifests::typed(&read_docs(&repo().join(BASE).join("deployment.yaml"))[0]);
    let image = container(&raw).image.clone().expect("an image");
    let (name, tag) = split_image(&image);
    assert_eq!(
        tag, "",
        "the tag comes from the kustomization's images: entry"
    );
    let base = manifests::kustomization(&repo().join(BASE));
    let entry = base
        .images
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no images: entry for {name}: users could not override it"));
    assert_eq!(entry.new_tag.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    let rendered = container(&deployment(&render(ROOT))).image.clone().unwrap();
    assert_eq!(rendered, format!("{name}:{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(
        split_image("registry:5000/a/b:1"),
        ("registry:5000/a/b", ":1")
    );
}

#[test]
fn the_disruption_budget_and_the_network_policy_cover_the_replicas() {
    let r = render(ROOT);
    let d = deployment(&r);
    let labels = template_labels(&d);
    let replicas = d.spec.replicas.unwrap_or(1);

    let pdb: PodDisruptionBudget = r.only_typed("PodDisruptionBudget");
    let spec = pdb.spec.expect("spec");
    let selector = spec.selector.expect("a selector");
    assert!(manifests::selects(
        &selector.match_labels.unwrap_or_default(),
        selector.match_expressions.is_some(),
        &labels
    ));
    match spec.min_available {
        Some(IntOrString::Int(n)) => assert!(n >= 1 && n < replicas, "minAvailable {n}"),
        other => panic!("minAvailable as a number of replicas: {other:?}"),
    }

    let policy: NetworkPolicy = r.only_typed("NetworkPolicy");
    let spec = policy.spec.expect("spec");
    let pods = spec.pod_selector.clone().unwrap_or_default();
    assert!(manifests::selects(
        &pods.match_labels.unwrap_or_default(),
        pods.match_expressions.is_some(),
        &labels
    ));
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_string()][..])
    );
    let c = container(&d);
    let mut admitted = BTreeSet::new();
    for rule in spec.ingress.iter().flatten() {
        let ports = rule.ports.as_deref().unwrap_or_default();
        assert!(!ports.is_empty(), "a rule without ports admits every port");
        for port in ports {
            admitted.insert(container_port(c, port.port.as_ref().expect("a port")));
        }
    }
    let served: BTreeSet<i32> = c.ports.iter().flatten().map(|p| p.container_port).collect();
    assert_eq!(admitted, served, "every port admitted, and only those");
}

#[test]
fn identity_rbac_bindings_and_namespaces_fit_together() {
    let r = render(ROOT);
    let ns: Namespace = r.only_typed("Namespace");
    let namespace = ns.metadata.name.unwrap();
    for object in &r.objects {
        let kind = str_at(object, "/kind");
        let cluster_scoped = ["Namespace", "ClusterRole", "ClusterRoleBinding"].contains(&kind);
        let object_ns = str_at(object, "/metadata/namespace");
        if cluster_scoped {
            assert_eq!(object_ns, "", "{kind} is cluster-scoped");
        } else {
            assert_eq!(
                object_ns,
                namespace,
                "{kind} {}",
                str_at(object, "/metadata/name")
            );
        }
    }
    let d = deployment(&r);
    let sa: ServiceAccount = r.only_typed("ServiceAccount");
    assert_eq!(pod_spec(&d).service_account_name, sa.metadata.name);
    assert_ne!(
        pod_spec(&d).automount_service_account_token,
        Some(false),
        "it needs its token"
    );
    let subject = (sa.metadata.name.unwrap(), namespace.clone());
    let check = |kind: &str,
                 subjects: &[k8s_openapi::api::rbac::v1::Subject],
                 role_kind: &str,
                 role: &str| {
        assert_eq!(subjects.len(), 1, "{kind}: only kube-tas's service account");
        let s = &subjects[0];
        assert_eq!(s.kind, "ServiceAccount");
        assert_eq!(
            (s.name.clone(), s.namespace.clone().unwrap_or_default()),
            subject
        );
        assert!(
            r.named(role_kind, role).is_some(),
            "{kind} refers to a missing {role_kind} {role}"
        );
    };
    for b in r.all_typed::<ClusterRoleBinding>("ClusterRoleBinding") {
        assert_eq!(b.role_ref.kind, "ClusterRole");
        check(
            "ClusterRoleBinding",
            b.subjects.as_deref().unwrap_or_default(),
            "ClusterRole",
            &b.role_ref.name,
        );
    }
    for b in r.all_typed::<RoleBinding>("RoleBinding") {
        assert_eq!(
            b.role_ref.kind, "Role",
            "a RoleBinding grants its namespace's Role"
        );
        check(
            "RoleBinding",
            b.subjects.as_deref().unwrap_or_default(),
            "Role",
            &b.role_ref.name,
        );
    }
}

#[test]
fn the_lease_rules_name_the_election_lease() {
    let r = render(ROOT);
    let args = serve_args(&deployment(&r));
    let role: Role = r.only_typed("Role");
    let named: Vec<Vec<String>> = role
        .rules
        .iter()
        .flatten()
        .filter(|rule| rule.resources.iter().flatten().any(|res| res == "leases"))
        .filter_map(|rule| rule.resource_names.clone())
        .collect();
    assert!(!named.is_empty(), "the Lease rules name the Lease");
    for names in named {
        assert_eq!(
            names,
            std::slice::from_ref(&args.leader_election_id),
            "--leader-election-id"
        );
    }
    let lease_ns = args.leader_election_namespace.clone();
    assert!(
        lease_ns.is_none() || lease_ns == role.metadata.namespace,
        "the Lease lives where the Role grants it"
    );
}

// CRDs -----------------------------------------------------------------------------------------

/// Whether a kube scope type is namespaced.
trait Scoped {
    const NAMESPACED: bool;
}
impl Scoped for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}
impl Scoped for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// The CRD serving `K` the way kube-tas watches it, and its schema at kube-tas's version.
fn crd_for<K>(crds: &Rendered) -> Value
where
    K: Resource<DynamicType = ()>,
    K::Scope: Scoped,
{
    let crd = crd_serving(
        crds,
        &K::group(&()),
        &K::version(&()),
        &K::kind(&()),
        &K::plural(&()),
        K::Scope::NAMESPACED,
    );
    served_schema(&crd)
}

/// The CRD `{plural}.{group}`: of `group`, `kind` and `plural`, in the given scope, serving
/// only `version`, which is also its storage version.
fn crd_serving(
    crds: &Rendered,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) -> CustomResourceDefinition {
    let crd: CustomResourceDefinition = manifests::typed(
        crds.named("CustomResourceDefinition", &format!("{plural}.{group}"))
            .unwrap_or_else(|| panic!("no CRD {plural}.{group}")),
    );
    let spec = &crd.spec;
    assert_eq!(spec.group, group);
    assert_eq!(spec.names.plural, plural);
    assert_eq!(spec.names.kind, kind);
    let scope = if namespaced { "Namespaced" } else { "Cluster" };
    assert_eq!(spec.scope, scope, "{plural}");
    let served: Vec<_> = spec.versions.iter().filter(|v| v.served).collect();
    assert_eq!(served.len(), 1, "{plural}: one version, kube-tas's");
    assert_eq!(served[0].name, version, "{plural}");
    assert!(served[0].storage, "{plural}: the storage version");
    crd
}

/// The schema of the CRD's served version.
fn served_schema(crd: &CustomResourceDefinition) -> Value {
    let v = crd.spec.versions.iter().find(|v| v.served).unwrap();
    let schema = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    serde_json::to_value(schema).unwrap()
}

/// Problems of `value` under `schema`, as the API server would see them: a wrong type, a
/// missing required field, a bound broken, an unknown field where none is preserved (the API
/// server would drop it). `declared_only`: a field must be declared even where unknown fields
/// are preserved, i.e. typed and bounded by the schema.
fn problems(schema: &Value, value: &Value, path: &str, declared_only: bool, out: &mut Vec<String>) {
    if value.is_null() || path == ".metadata" {
        return; // absent; metadata is the API server's own
    }
    macro_rules! fail {
        ($($what:tt)*) => { out.push(format!("{path}: {}", format!($($what)*))) };
    }
    if schema["x-kubernetes-int-or-string"] == true {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            fail!("{value} is neither an integer nor a string");
        }
        return;
    }
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
    match schema["type"].as_str() {
        Some("object") => {
            let Some(object) = value.as_object() else {
                return fail!("{value} is not an object");
            };
            for required in schema["required"].as_array().into_iter().flatten() {
                let key = required.as_str().unwrap();
                if object.get(key).is_none_or(Value::is_null) {
                    fail!("{key} is required");
                }
            }
            if schema["maxProperties"]
                .as_u64()
                .is_some_and(|max| object.len() as u64 > max)
            {
                fail!("more than {} properties", schema["maxProperties"]);
            }
            if schema["minProperties"]
                .as_u64()
                .is_some_and(|min| (object.len() as u64) < min)
            {
                fail!("fewer than {} properties", schema["minProperties"]);
            }
            for (key, v) in object {
                let at = format!("{path}.{key}");
                if let Some(p) = schema["properties"].get(key) {
                    problems(p, v, &at, declared_only, out);
                } else if schema["additionalProperties"].is_object() {
                    problems(&schema["additionalProperties"], v, &at, declared_only, out);
                } else if !preserve || declared_only {
                    out.push(format!("{at}: not declared by the schema"));
                }
            }
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                return fail!("{value} is not an array");
            };
            let n = items.len() as u64;
            if schema["minItems"].as_u64().is_some_and(|m| n < m) {
                fail!("fewer than {} items", schema["minItems"]);
            }
            if schema["maxItems"].as_u64().is_some_and(|m| n > m) {
                fail!("more than {} items", schema["maxItems"]);
            }
            for (i, item) in items.iter().enumerate() {
                problems(
                    &schema["items"],
                    item,
                    &format!("{path}[{i}]"),
                    declared_only,
                    out,
                );
            }
        }
        Some("string") => match value.as_str() {
            None => fail!("{value} is not a string"),
            Some(s) => {
                let len = s.chars().count() as u64;
                if schema["maxLength"].as_u64().is_some_and(|m| len > m)
                    || schema["minLength"].as_u64().is_some_and(|m| len < m)
                {
                    fail!("{s:?}: length out of bounds");
                }
                if let Some(allowed) = schema["enum"].as_array()
                    && !allowed.contains(value)
                {
                    fail!("{s:?} is not one of {allowed:?}");
                }
            }
        },
        Some("integer") => match value.as_i64() {
            None => fail!("{value} is not an integer (or beyond int64)"),
            Some(n) => {
                if schema["format"] == "int32" && i32::try_from(n).is_err() {
                    fail!("{n} is beyond int32");
                }
                if schema["minimum"].as_f64().is_some_and(|m| (n as f64) < m)
                    || schema["maximum"].as_f64().is_some_and(|m| (n as f64) > m)
                {
                    fail!("{n}: out of bounds");
                }
            }
        },
        Some("boolean") if !value.is_boolean() => fail!("{value} is not a boolean"),
        Some("boolean") => {}
        None if preserve => {}
        other => fail!("schema type {other:?} not understood by this test"),
    }
}

/// Every `kueue.x-k8s.io/v1beta2` object of `kind` in `examples/`.
fn example_objects(kind: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for file in yaml_files(&repo().join("examples")) {
        for doc in read_docs(&file) {
            if doc["kind"] == kind && doc["apiVersion"] == "kueue.x-k8s.io/v1beta2" {
                found.push(doc);
            }
        }
    }
    assert!(!found.is_empty(), "examples/ have no {kind}");
    found
}

/// `K`'s CRD serves kube-tas's group, version, plural and scope; every example object is
/// stored whole (nothing rejected, nothing pruned); and what kube-tas reads of it (the object
/// through kube-tas's own type, written back) is declared and typed by the schema.
fn check_crd<K>(crds: &Rendered)
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Serialize,
    K::Scope: Scoped,
{
    let schema = crd_for::<K>(crds);
    let kind = K::kind(&()).to_string();
    for object in example_objects(&kind) {
        let name = str_at(&object, "/metadata/name").to_string();
        let mut found = Vec::new();
        problems(&schema, &object, "", false, &mut found);
        assert!(found.is_empty(), "{kind} {name} as written: {found:?}");
        let read: K = manifests::typed(&object);
        let mut read = serde_json::to_value(&read).unwrap();
        read["apiVersion"] = object["apiVersion"].clone();
        read["kind"] = object["kind"].clone();
        problems(&schema, &read, "", true, &mut found);
        assert!(
            found.is_empty(),
            "{kind} {name} as kube-tas reads it: {found:?}"
        );
    }
}

#[test]
fn the_crds_serve_and_keep_what_kube_tas_watches_and_reads() {
    let crds = render(CRDS);
    assert_eq!(
        crds.all("CustomResourceDefinition").len(),
        crds.objects.len()
    );
    check_crd::<Topology>(&crds);
    check_crd::<ResourceFlavor>(&crds);
    check_crd::<ClusterQueue>(&crds);
    check_crd::<LocalQueue>(&crds);
    assert_eq!(
        crds.objects.len(),
        4,
        "Kueue's four kinds kube-tas reads, no more"
    );

    // The schema walk does find problems.
    let schema = crd_for::<Topology>(&crds);
    let mut found = Vec::new();
    let bad = serde_json::json!({"spec": {"levels": [{"nodeLabel": 7}], "extra": 1}});
    problems(&schema, &bad, "", true, &mut found);
    assert_eq!(found.len(), 2, "{found:?}");
}

// The Workload API's kinds, kube-tas.io's copies -----------------------------------------------

/// One of kube-tas.io's copies of a Workload API kind, and the upstream kind it copies.
struct WorkloadKind {
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    /// The upstream `apiVersion` whose spec the copy's is.
    upstream: &'static str,
}

const KUBE_TAS_GROUP: &str = "kube-tas.io";
const KUBE_TAS_VERSION: &str = "v1alpha1";
const POD_GROUP: WorkloadKind = WorkloadKind {
    kind: "PodGroup",
    plural: "podgroups",
    singular: "podgroup",
    upstream: "scheduling.k8s.io/v1beta1",
};
const COMPOSITE_POD_GROUP: WorkloadKind = WorkloadKind {
    kind: "CompositePodGroup",
    plural: "compositepodgroups",
    singular: "compositepodgroup",
    upstream: "scheduling.k8s.io/v1alpha3",
};

/// `kind`'s CRD in `crds`: kube-tas.io/v1alpha1, namespaced, with status as a subresource kept
/// as written and a spec that keeps no unknown field; its schema.
fn workload_crd(crds: &Rendered, kind: &WorkloadKind) -> Value {
    let crd = crd_serving(
        crds,
        KUBE_TAS_GROUP,
        KUBE_TAS_VERSION,
        kind.kind,
        kind.plural,
        true,
    );
    assert_eq!(crd.spec.names.singular.as_deref(), Some(kind.singular));
    let version = &crd.spec.versions[0];
    assert_eq!(crd.spec.versions.len(), 1, "{}", kind.plural);
    assert!(
        version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some()),
        "{}: status is a subresource",
        kind.plural
    );
    let schema = served_schema(&crd);
    let spec = &schema["properties"]["spec"];
    assert_eq!(spec["type"], "object", "{}", kind.plural);
    assert_ne!(
        spec["x-kubernetes-preserve-unknown-fields"], true,
        "{}: spec keeps no unknown field (upstream's spec, structural)",
        kind.plural
    );
    assert_eq!(
        schema["properties"]["status"]["x-kubernetes-preserve-unknown-fields"], true,
        "{}: status kept as written",
        kind.plural
    );
    // Every printer column shows a field the schema declares.
    for column in version.additional_printer_columns.iter().flatten() {
        if column.json_path == ".metadata.creationTimestamp" {
            continue;
        }
        let mut at = &schema;
        for step in column.json_path.trim_start_matches('.').split('.') {
            let (name, indexed) = match step.strip_suffix("[0]") {
                Some(name) => (name, true),
                None => (step, false),
            };
            at = &at["properties"][name];
            if indexed {
                at = &at["items"];
            }
        }
        assert!(
            at.is_object(),
            "{}: column {} shows {}, which the schema does not declare",
            kind.plural,
            column.name,
            column.json_path
        );
    }
    schema
}

/// The problems of `object` under `schema`, where nothing may be dropped (only the preserved
/// subtrees keep fields the schema does not declare).
fn problems_of(schema: &Value, object: &Value) -> Vec<String> {
    let mut found = Vec::new();
    problems(schema, object, "", false, &mut found);
    found
}

/// Every path the schema declares below `path`, down to the subtrees it keeps as written;
/// `[]` for an array's items.
fn declared_paths(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    for (key, property) in schema["properties"].as_object().into_iter().flatten() {
        let at = format!("{path}.{key}");
        out.insert(at.clone());
        declared_paths(property, &at, out);
    }
    if schema["items"].is_object() {
        declared_paths(&schema["items"], &format!("{path}[]"), out);
    }
}

/// Every path set in `value` below `path`, written as [`declared_paths`] writes them.
fn set_paths(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            for (key, v) in object {
                let at = format!("{path}.{key}");
                out.insert(at.clone());
                set_paths(v, &at, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                set_paths(item, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

/// Hand-written objects of the copies, as users write them (in kube-tas.io/v1alpha1).
fn workload_samples() -> Vec<Value> {
    let v = format!("{KUBE_TAS_GROUP}/{KUBE_TAS_VERSION}");
    vec![
        // A gang of 4 in one rack, child of a CompositePodGroup.
        serde_json::json!({
            "apiVersion": v, "kind": "PodGroup",
            "metadata": {"name": "trainer-0", "namespace": "ml"},
            "spec": {
                "parentCompositePodGroupName": "trainer",
                "schedulingPolicy": {"gang": {"minCount": 4}},
                "schedulingConstraints": {"topology": [{"key": "cloud.example.com/rack"}]},
            },
        }),
        // Basic, with the fields a workload controller would copy from its Workload.
        serde_json::json!({
            "apiVersion": v, "kind": "PodGroup",
            "metadata": {"name": "workers", "namespace": "ml"},
            "spec": {
                "workloadRef": {"workloadName": "train", "templateName": "workers"},
                "schedulingPolicy": {"basic": {}},
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpu-pair"}],
                "disruptionMode": {"all": {}},
                "priorityClassName": "batch-high",
                "priority": 1000,
                "preemptionPolicy": "Never",
            },
        }),
        // Two of its children placed together, all within one block; no Workload behind it.
        serde_json::json!({
            "apiVersion": v, "kind": "CompositePodGroup",
            "metadata": {"name": "trainer", "namespace": "ml"},
            "spec": {
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "schedulingConstraints": {"topology": [{"key": "cloud.example.com/block"}]},
            },
        }),
        serde_json::json!({
            "apiVersion": v, "kind": "CompositePodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {
                "parentCompositePodGroupName": "campaign",
                "workloadRef": {"workloadName": "train", "templateName": "all"},
                "schedulingPolicy": {"basic": {}},
                "disruptionMode": {"single": {}},
                "priorityClassName": "batch-high",
                "preemptionPolicy": "PreemptLowerPriority",
            },
        }),
    ]
}

/// Every field of upstream's specs set, from k8s-openapi's own types, and written out: one
/// object per scheduling policy. The struct literals list every field, so a field upstream adds
/// (a k8s-openapi update) does not compile until it is looked at here and in the CRDs.
fn upstream_specs(kind: &WorkloadKind) -> Vec<Value> {
    use k8s_openapi::api::scheduling::{v1alpha3, v1beta1};
    let empty = || Value::Object(Default::default());
    let mut specs = Vec::new();
    for gang in [true, false] {
        let spec = match kind.kind {
            "PodGroup" => serde_json::to_value(v1beta1::PodGroupSpec {
                workload_ref: Some(v1beta1::WorkloadReference {
                    workload_name: "train".into(),
                    template_name: "workers".into(),
                }),
                parent_composite_pod_group_name: Some("trainer".into()),
                scheduling_policy: v1beta1::PodGroupSchedulingPolicy {
                    basic: (!gang).then(|| v1beta1::BasicSchedulingPolicy(empty())),
                    gang: gang.then_some(v1beta1::GangSchedulingPolicy { min_count: 4 }),
                },
                scheduling_constraints: Some(v1beta1::PodGroupSchedulingConstraints {
                    topology: Some(vec![v1beta1::TopologyConstraint {
                        key: "cloud.example.com/rack".into(),
                    }]),
                }),
                resource_claims: Some(vec![v1beta1::PodGroupResourceClaim {
                    name: "gpus".into(),
                    resource_claim_name: None,
                    resource_claim_template_name: Some("gpu-pair".into()),
                }]),
                disruption_mode: Some(v1beta1::DisruptionMode {
                    all: gang.then(|| v1beta1::AllDisruptionMode(empty())),
                    single: (!gang).then(|| v1beta1::SingleDisruptionMode(empty())),
                }),
                priority_class_name: Some("batch-high".into()),
                priority: Some(1000),
                preemption_policy: Some("Never".into()),
            }),
            "CompositePodGroup" => serde_json::to_value(v1alpha3::CompositePodGroupSpec {
                parent_composite_pod_group_name: Some("campaign".into()),
                workload_ref: v1alpha3::WorkloadReference {
                    workload_name: "train".into(),
                    template_name: "all".into(),
                },
                scheduling_policy: v1alpha3::CompositePodGroupSchedulingPolicy {
                    basic: (!gang).then(|| v1alpha3::CompositeBasicSchedulingPolicy(empty())),
                    gang: gang
                        .then_some(v1alpha3::CompositeGangSchedulingPolicy { min_group_count: 2 }),
                },
                scheduling_constraints: Some(v1alpha3::CompositePodGroupSchedulingConstraints {
                    topology: Some(vec![v1alpha3::TopologyConstraint {
                        key: "cloud.example.com/block".into(),
                    }]),
                }),
                disruption_mode: Some(v1alpha3::CompositeDisruptionMode {
                    all: gang.then(|| v1alpha3::AllCompositeDisruptionMode(empty())),
                    single: (!gang).then(|| v1alpha3::SingleCompositeDisruptionMode(empty())),
                }),
                priority_class_name: Some("batch-high".into()),
                priority: Some(1000),
                preemption_policy: Some("PreemptLowerPriority".into()),
            }),
            other => panic!("{other}"),
        };
        specs.push(spec.unwrap());
    }
    specs
}

/// `object` parsed as upstream's kind (its apiVersion changed to upstream's), nothing lost;
/// `Ok(Some(field))` when upstream's type writes back a field the object lacks: a required
/// field left out (k8s-openapi reads one as its default).
fn as_upstream(kind: &WorkloadKind, object: &Value) -> Result<Option<String>, String> {
    use k8s_openapi::api::scheduling::{v1alpha3, v1beta1};
    fn back<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<Value, String> {
        let object: T = serde_path_to_error::deserialize(doc).map_err(|e| e.to_string())?;
        serde_json::to_value(&object).map_err(|e| e.to_string())
    }
    let mut object = object.clone();
    object["apiVersion"] = kind.upstream.into();
    let read = match kind.kind {
        "PodGroup" => back::<v1beta1::PodGroup>(&object)?,
        "CompositePodGroup" => back::<v1alpha3::CompositePodGroup>(&object)?,
        other => panic!("{other}"),
    };
    if let Some(problem) = lost(&object, &read, "") {
        return Err(problem);
    }
    Ok(lost(&read, &object, ""))
}

#[test]
fn the_workload_api_crds_are_upstreams_specs_in_kube_tas_io() {
    let crds = render(CRDS_WORKLOAD_API);
    assert_eq!(
        crds.all("CustomResourceDefinition").len(),
        crds.objects.len(),
        "CRDs only"
    );
    assert_eq!(crds.objects.len(), 2, "PodGroup and CompositePodGroup");
    for crd in crds.all_typed::<CustomResourceDefinition>("CustomResourceDefinition") {
        assert_ne!(
            crd.spec.group, "scheduling.k8s.io",
            "never a CRD in Kubernetes' own group"
        );
    }
    let samples = workload_samples();
    for kind in [POD_GROUP, COMPOSITE_POD_GROUP] {
        let schema = workload_crd(&crds, &kind);
        let spec_schema = &schema["properties"]["spec"];

        // Upstream's spec, every field set: stored whole, and nothing declared beyond it.
        let mut declared = BTreeSet::new();
        declared_paths(spec_schema, "", &mut declared);
        let mut upstream = BTreeSet::new();
        for spec in upstream_specs(&kind) {
            let mut found = Vec::new();
            problems(spec_schema, &spec, ".spec", false, &mut found);
            assert!(found.is_empty(), "{} upstream's spec: {found:?}", kind.kind);
            set_paths(&spec, "", &mut upstream);
        }
        let beyond: Vec<_> = declared.difference(&upstream).collect();
        assert!(
            beyond.is_empty(),
            "{}: the schema declares fields upstream's spec does not have: {beyond:?}",
            kind.kind
        );

        // The samples: stored whole, and (but for the departure) upstream objects too.
        let of_kind: Vec<&Value> = samples.iter().filter(|s| s["kind"] == kind.kind).collect();
        assert!(of_kind.len() >= 2, "{}", kind.kind);
        for sample in of_kind {
            let name = str_at(sample, "/metadata/name");
            let found = problems_of(&schema, sample);
            assert!(found.is_empty(), "{} {name}: {found:?}", kind.kind);
            let missing = as_upstream(&kind, sample)
                .unwrap_or_else(|e| panic!("{} {name} as upstream's: {e}", kind.kind));
            if kind.kind == "CompositePodGroup" && sample["spec"]["workloadRef"].is_null() {
                // The one departure: upstream requires workloadRef, the copy does not.
                assert_eq!(
                    missing.as_deref(),
                    Some(".spec.workloadRef: no such field"),
                    "{name}: upstream requires workloadRef"
                );
            } else {
                assert_eq!(missing, None, "{} {name}: upstream requires it", kind.kind);
            }
        }
    }
    assert!(
        samples.iter().any(
            |s| s["spec"]["schedulingPolicy"]["gang"]["minCount"].is_number()
                && s["spec"]["parentCompositePodGroupName"].is_string()
                && s["spec"]["schedulingConstraints"]["topology"][0]["key"].is_string()
        ),
        "a gang PodGroup with a topology key and a parent"
    );
}

#[test]
fn the_workload_api_crds_refuse_what_upstream_refuses() {
    let crds = render(CRDS_WORKLOAD_API);
    let pod_group = workload_crd(&crds, &POD_GROUP);
    let composite = workload_crd(&crds, &COMPOSITE_POD_GROUP);
    let gang = serde_json::json!({"gang": {"minCount": 2}});
    let topology = |keys: &[&str]| {
        let keys: Vec<Value> = keys.iter().map(|k| serde_json::json!({"key": k})).collect();
        serde_json::json!({"topology": keys})
    };
    // (schema, spec, the one problem it has)
    let cases = [
        (
            &pod_group,
            serde_json::json!({}),
            ".spec: schedulingPolicy is required",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": {}}),
            ".spec.schedulingPolicy: fewer than 1 properties",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}),
            ".spec.schedulingPolicy: more than 1 properties",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": {"gang": {"minCount": 0}}}),
            ".spec.schedulingPolicy.gang.minCount: 0: out of bounds",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": {"gang": {}}}),
            ".spec.schedulingPolicy.gang: minCount is required",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": {"basic": {"minCount": 1}}}),
            ".spec.schedulingPolicy.basic.minCount: not declared by the schema",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": gang, "topologyKey": "rack"}),
            ".spec.topologyKey: not declared by the schema",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": gang,
                "schedulingConstraints": topology(&["block", "rack"])}),
            ".spec.schedulingConstraints.topology: more than 1 items",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": gang, "workloadRef": {"workloadName": "w"}}),
            ".spec.workloadRef: templateName is required",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": gang,
                "resourceClaims": [{}, {}, {}, {}, {}]}),
            ".spec.resourceClaims: more than 4 items",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": gang, "priority": 1_i64 << 31}),
            ".spec.priority: 2147483648 is beyond int32",
        ),
        (
            &pod_group,
            serde_json::json!({"schedulingPolicy": gang, "preemptionPolicy": "Always"}),
            ".spec.preemptionPolicy: \"Always\" is not one of",
        ),
        (
            &composite,
            serde_json::json!({"schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "resourceClaims": []}),
            ".spec.resourceClaims: not declared by the schema",
        ),
        (
            &composite,
            serde_json::json!({"schedulingPolicy": {"gang": {"minGroupCount": 0}}}),
            ".spec.schedulingPolicy.gang.minGroupCount: 0: out of bounds",
        ),
        (
            &composite,
            serde_json::json!({"schedulingPolicy": {"basic": {}, "gang": {"minGroupCount": 1}}}),
            ".spec.schedulingPolicy: more than 1 properties",
        ),
        (
            &composite,
            serde_json::json!({"schedulingPolicy": {"basic": {}},
                "schedulingConstraints": topology(&["block", "rack"])}),
            ".spec.schedulingConstraints.topology: more than 1 items",
        ),
    ];
    for (schema, spec, expected) in cases {
        let object = serde_json::json!({"metadata": {"name": "x"}, "spec": spec});
        let found = problems_of(schema, &object);
        assert!(
            found.len() == 1 && found[0].starts_with(expected),
            "{spec}: expected {expected:?}, found {found:?}"
        );
    }
    // The gang of a PodGroup counts pods, that of a CompositePodGroup groups.
    let found = problems_of(
        &composite,
        &serde_json::json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
    );
    assert_eq!(found.len(), 2, "{found:?}");
}

// The image ------------------------------------------------------------------------------------

fn dockerfile() -> String {
    std::fs::read_to_string(repo().join("Dockerfile")).expect("a Dockerfile")
}

/// The instructions of the Dockerfile's last stage (the image that runs), from its `FROM` on,
/// trimmed, without blank lines and comments.
fn runtime_stage(dockerfile: &str) -> Vec<&str> {
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM");
    lines[last_from..].to_vec()
}

#[test]
fn the_dockerfile_builds_the_image_the_deployment_runs() {
    let text = dockerfile();
    let runtime = runtime_stage(&text);
    assert!(
        runtime[0].contains("distroless") && runtime[0].ends_with(":nonroot"),
        "{}",
        runtime[0]
    );
    assert!(
        runtime.contains(&"USER nonroot"),
        "runs as the image's nonroot user ({NONROOT_UID})"
    );
    let entrypoint = runtime
        .iter()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("an ENTRYPOINT");
    let entrypoint: Vec<String> =
        serde_json::from_str(entrypoint).expect("ENTRYPOINT in exec form (a JSON array)");
    let binary = Path::new(env!("CARGO_BIN_EXE_kube-tas"))
        .file_name()
        .unwrap();
    assert_eq!(Path::new(&entrypoint[0]).file_name(), Some(binary));
    assert!(
        text.contains(&format!("--bin {}", binary.to_str().unwrap())),
        "the image builds the kube-tas binary"
    );
    assert!(text.contains("--locked"), "from Cargo.lock");

    let exposed: BTreeSet<i32> = runtime
        .iter()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|l| l.split_whitespace())
        .map(|p| p.parse().unwrap())
        .collect();
    let d = deployment(&render(ROOT));
    let ports: BTreeSet<i32> = container(&d)
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();
    assert_eq!(exposed, ports);

    // Keys and certificates never enter the build context.
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).expect("a .dockerignore");
    let ignored: Vec<&str> = ignore.lines().map(str::trim).collect();
    for must in ["/target", "/.git", "/certs", "*.key"] {
        assert!(ignored.contains(&must), ".dockerignore lacks {must}");
    }
}

/// The allocator's purge delay that keeps the steady RSS within G8 (BENCHMARKS.md): the image
/// sets it, the Deployment states the same value for images built otherwise, and `live-load`
/// measures with it by default.
#[test]
fn the_image_the_deployment_and_live_load_set_the_same_allocator_purge_delay() {
    const VAR: &str = "MIMALLOC_PURGE_DELAY";
    let text = dockerfile();
    let in_image: Vec<&str> = runtime_stage(&text)
        .into_iter()
        .filter_map(|l| l.strip_prefix("ENV "))
        .filter_map(|kv| kv.trim().strip_prefix(VAR)?.strip_prefix('='))
        .collect();
    assert_eq!(
        in_image.len(),
        1,
        "one `ENV {VAR}=...` in the Dockerfile's runtime stage"
    );
    let d = deployment(&render(ROOT));
    let env = container(&d).env.clone().unwrap_or_default();
    let in_deployment: Vec<_> = env.iter().filter(|e| e.name == VAR).collect();
    assert_eq!(in_deployment.len(), 1, "one {VAR} in the Deployment's env");
    let value = in_deployment[0].value.as_deref().expect("a literal value");
    assert_eq!(value, in_image[0], "the Deployment and the image disagree");
    let live_load =
        std::fs::read_to_string(repo().join("examples/live-load.rs")).expect("live-load");
    let flag = live_load
        .split_once("purge_delay_ms: u32")
        .and_then(|(before, _)| before.rsplit_once("default_value_t = "))
        .and_then(|(_, after)| after.split(')').next());
    assert_eq!(
        flag,
        Some(value),
        "live-load's --purge-delay-ms default measures what ships"
    );
    let ms: u32 = value
        .parse()
        .unwrap_or_else(|e| panic!("{VAR}={value}: {e}"));
    assert!(
        (1..1000).contains(&ms),
        "{VAR}={ms}: below mimalloc's default of 1,000 ms (else it changes nothing), above 0 \
         (0 slows the initial lists by a page fault per reused page)"
    );
}
