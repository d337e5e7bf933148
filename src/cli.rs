//! The command line: `kube-tas simulate ...`, `kube-tas serve ...` and `kube-tas certs ...`.
//! Every `serve` and `certs` flag can also be set through a `KUBE_TAS_*` environment variable.
//!
//! Exit codes: 0 when the command ran (a workload that does not fit is an answer, not an
//! error; `serve` stopped by a signal), 2 on bad input with a message naming the file, the
//! object and the field (or the flag), 1 when `serve` fails at run time (a port in use, ...)
//! or `certs` cannot write its files.
//!
//! `simulate` stays synchronous; `serve` builds a multi-thread tokio runtime of its own.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::certs::{self, CertsOptions};
use crate::server::{self, ConfigError, DEFAULT_MAX_BODY_BYTES, ServeConfig};
use crate::simulate;
use crate::topology::FeatureGates;

/// Topology-aware gang placement for Kubernetes, speaking Kueue's TAS annotations.
#[derive(Debug, Parser)]
#[command(name = "kube-tas", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// How log lines are written on stderr: `text` for people (colour only on a terminal),
    /// `json` (one object per line) for log collectors.
    #[arg(long, global = true, value_enum, env = "KUBE_TAS_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The `--log-format` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields.message`, the span fields).
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Place every pending TAS workload of a cluster given as manifests, and show where each
    /// lands (or why it does not fit, or why the webhook denies it).
    Simulate(SimulateArgs),
    /// Serve the scheduler extender (main port, TLS when a certificate is given) and the
    /// probes and metrics (admin port, plain HTTP) until SIGTERM or SIGINT.
    Serve(Box<ServeArgs>),
    /// Create a development CA (or reuse the one in --out) and a serving certificate for the
    /// kube-tas Service; print the caBundle (base64 of the CA's PEM) on stdout.
    Certs(CertsArgs),
    /// Start `serve` in process over a generated cluster and measure it as kube-scheduler and
    /// kube-apiserver call it (round trip over loopback: p50 / p99 / p99.9 per call, pods per
    /// second of a replayed scheduling cycle), optionally against a floor server that only
    /// parses and answers.
    Bench(BenchArgs),
}

impl Cli {
    /// The log level when `RUST_LOG` is unset: `info` for the long-running `serve` (listen
    /// addresses, certificate reloads), `warn` for one-shot commands.
    pub fn default_log_level(&self) -> &'static str {
        match self.command {
            Command::Serve(_) => "info",
            Command::Simulate(_) | Command::Certs(_) | Command::Bench(_) => "warn",
        }
    }
}

/// Sets up logging on stderr: `RUST_LOG` when set, else [`Cli::default_log_level`]; the
/// `--log-format`; ANSI colour only when stderr is a terminal and `NO_COLOR` is unset.
pub fn init_logging(cli: &Cli) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(cli.default_log_level()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => {
            let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            builder.with_ansi(colour).init();
        }
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Manifest files or folders (multi-document YAML or JSON, as `kubectl get -o yaml` prints).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Kueue feature gates, `NAME=BOOL,...` (Kueue's names and defaults).
    #[arg(long, env = "KUBE_TAS_FEATURE_GATES", default_value = "")]
    pub feature_gates: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Manifest files or folders holding the cluster (repeatable; in the environment,
    /// comma-separated). Without it, `serve` watches the API server (live mode).
    #[arg(
        long,
        value_name = "PATH",
        env = "KUBE_TAS_CLUSTER",
        value_delimiter = ','
    )]
    pub cluster: Vec<PathBuf>,
    /// Live mode: the kubeconfig file (else KUBECONFIG, ~/.kube/config, or the in-cluster
    /// service account).
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBE_TAS_KUBECONFIG",
        conflicts_with = "cluster"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// Live mode: elect one leader on a Lease; only the leader plans and binds.
    #[arg(long, env = "KUBE_TAS_LEADER_ELECT", default_value_t = true,
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,
    /// Namespace of the election's Lease (default: the pod's own, else kube-tas-system).
    #[arg(long, value_name = "NS", env = "KUBE_TAS_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the election's Lease.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBE_TAS_LEADER_ELECTION_ID",
        default_value = "kube-tas"
    )]
    pub leader_election_id: String,
    /// Seconds a leader's Lease lasts without renewal (a new leader takes over after it).
    #[arg(long, env = "KUBE_TAS_LEASE_DURATION_SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(3..=300))]
    pub lease_duration_seconds: u64,
    /// This replica's pod name: its identity in the election, and the pod it labels
    /// kube-tas.io/leader=true while it leads (default: the host name).
    #[arg(long, value_name = "NAME", env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Address of the main port (extender routes; TLS when --tls-cert/--tls-key are given).
    #[arg(long, env = "KUBE_TAS_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the admin port (/healthz, /readyz, /metrics; always plain HTTP).
    #[arg(long, env = "KUBE_TAS_ADMIN_LISTEN", default_value = "0.0.0.0:8080")]
    pub admin_listen: SocketAddr,
    /// PEM certificate chain for the main port, leaf first (needs --tls-key).
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBE_TAS_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for the main port (needs --tls-cert).
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBE_TAS_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// CA bundle (PEM) that callers must present a client certificate from (kube-scheduler's
    /// extender tlsConfig, the API server's admission kubeconfig); without it the main port
    /// takes any caller that reaches it. Needs --tls-cert/--tls-key.
    #[arg(long, value_name = "FILE", env = "KUBE_TAS_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// With --client-ca: client certificate names (subject CN, DNS or URI SAN) allowed on
    /// /scheduler/* (repeatable; in the environment, comma-separated); none allows any
    /// certificate the CA signed.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBE_TAS_EXTENDER_CLIENT_NAMES",
        value_delimiter = ','
    )]
    pub extender_client_names: Vec<String>,
    /// With --client-ca: client certificate names allowed on /mutate (repeatable; in the
    /// environment, comma-separated); none allows any certificate the CA signed.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBE_TAS_WEBHOOK_CLIENT_NAMES",
        value_delimiter = ','
    )]
    pub webhook_client_names: Vec<String>,
    /// How often the certificate files are checked for changes (a rotated Secret is served
    /// without a restart).
    #[arg(long, env = "KUBE_TAS_TLS_RELOAD_INTERVAL_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub tls_reload_interval_seconds: u64,
    /// Kueue feature gates, `NAME=BOOL,...` (Kueue's names and defaults).
    #[arg(long, env = "KUBE_TAS_FEATURE_GATES", default_value = "")]
    pub feature_gates: String,
    /// Plans of groups whose pods stop coming expire after this many seconds.
    #[arg(long, env = "KUBE_TAS_PLAN_TTL_SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub plan_ttl_seconds: u64,
    /// Larger request bodies are answered 413 (a 15k-node filter request without
    /// nodeCacheCapable is several MB).
    #[arg(long, env = "KUBE_TAS_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..=(1 << 32)))]
    pub max_body_bytes: u64,
    /// After SIGTERM, how long both ports keep serving while /readyz already answers 503, so
    /// endpoints are updated before connections are refused.
    #[arg(long, env = "KUBE_TAS_SHUTDOWN_DELAY_SECONDS", default_value_t = 5)]
    pub shutdown_delay_seconds: u64,
    /// After the delay, how long in-flight requests may take (delay plus grace below the
    /// pod's terminationGracePeriodSeconds).
    #[arg(long, env = "KUBE_TAS_SHUTDOWN_GRACE_SECONDS", default_value_t = 20)]
    pub shutdown_grace_seconds: u64,
}

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Blocks of the generated cluster (nodes = blocks × racks × hosts).
    #[arg(long, default_value_t = 5)]
    pub blocks: u32,
    /// Racks per block.
    #[arg(long, default_value_t = 25)]
    pub racks: u32,
    /// Hosts per rack.
    #[arg(long, default_value_t = 40)]
    pub hosts: u32,
    /// Node names per extender request; default: kube-scheduler's own sample for the
    /// cluster's size (500 of 5,000 nodes, 750 of 15,000, 2,500 of 50,000).
    #[arg(long, value_name = "N")]
    pub names: Option<usize>,
    /// Measured requests per call shape.
    #[arg(long, default_value_t = 2000)]
    pub samples: usize,
    /// Requests per call shape sent first and not measured.
    #[arg(long, default_value_t = 200)]
    pub warmup: usize,
    /// Send the same bodies to a floor server (parses and answers, decides nothing) in the
    /// same run and print the ratio.
    #[arg(long)]
    pub compare_floor: bool,
    /// Pods of the replayed scheduling cycle (filter → prioritize → bind; gangs of 8, 32 and
    /// 128 pods and a quarter lone pods); 0 skips it.
    #[arg(long, default_value_t = 2000)]
    pub replay_pods: usize,
    /// Connections of the concurrent `/mutate` run; 0 skips it.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Worker threads of the runtime kube-tas and the floor serve on; default: one per core,
    /// as `serve` runs. With 1 on a 2-core machine the client has a core to itself, the
    /// set-up of performance.md's floor figures.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub server_workers: Option<u16>,
}

/// Arguments of `certs`.
#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// Name of the Service the API server and kube-scheduler call (a DNS-1123 label).
    #[arg(long, value_name = "NAME", env = "KUBE_TAS_CERTS_SERVICE")]
    pub service: String,
    /// Namespace of that Service (a DNS-1123 label).
    #[arg(long, value_name = "NS", env = "KUBE_TAS_CERTS_NAMESPACE")]
    pub namespace: String,
    /// Folder for ca.crt, ca.key, tls.crt, tls.key (created if missing). A CA already there
    /// is reused, so the caBundle registered before stays valid.
    #[arg(long, value_name = "DIR", env = "KUBE_TAS_CERTS_OUT")]
    pub out: PathBuf,
    /// Extra DNS name for the serving certificate (repeatable; in the environment,
    /// comma-separated).
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBE_TAS_CERTS_DNS",
        value_delimiter = ','
    )]
    pub dns: Vec<String>,
    /// Extra IP address for the serving certificate (repeatable; in the environment,
    /// comma-separated).
    #[arg(
        long,
        value_name = "ADDRESS",
        env = "KUBE_TAS_CERTS_IP",
        value_delimiter = ','
    )]
    pub ip: Vec<IpAddr>,
    /// Lifetime of the serving certificate, in days.
    #[arg(long, value_name = "N", env = "KUBE_TAS_CERTS_DAYS",
          default_value_t = certs::DEFAULT_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub days: u32,
    /// Lifetime of a new CA, in days (a reused CA keeps its own).
    #[arg(long, value_name = "N", env = "KUBE_TAS_CERTS_CA_DAYS",
          default_value_t = certs::DEFAULT_CA_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub ca_days: u32,
    /// Put the caBundle into this configuration file, in place (repeatable; in the
    /// environment, comma-separated): every `caBundle:` value (MutatingWebhookConfiguration)
    /// and every `caData:` under `tlsConfig:` (KubeSchedulerConfiguration). Comments stay.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBE_TAS_CERTS_WRITE_CA_BUNDLE",
        value_delimiter = ','
    )]
    pub write_ca_bundle: Vec<PathBuf>,
}

/// Output formats of `simulate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The topology as a tree with free capacity and placed pods, for people.
    Table,
    /// The documented JSON shape, for programs.
    Json,
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Simulate(args) => run_simulate(args),
        Command::Serve(args) => run_serve(*args),
        Command::Certs(args) => run_certs(args),
        Command::Bench(args) => run_bench(&args),
    }
}

fn run_bench(args: &BenchArgs) -> ExitCode {
    let config = crate::bench::BenchConfig {
        blocks: args.blocks,
        racks: args.racks,
        hosts: args.hosts,
        names: args.names,
        samples: args.samples.max(1),
        warmup: args.warmup,
        compare_floor: args.compare_floor,
        replay_pods: args.replay_pods,
        mutate_concurrency: args.concurrency,
        server_workers: args.server_workers.map(usize::from),
    };
    match crate::bench::run(&config) {
        Ok(report) => {
            print!("{}", crate::bench::render(&report));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kube-tas bench: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_certs(args: CertsArgs) -> ExitCode {
    let options = CertsOptions {
        service: args.service,
        namespace: args.namespace,
        dns: args.dns,
        ips: args.ip,
        days: args.days,
        ca_days: args.ca_days,
    };
    let outcome = match certs::run(&options, &args.out, &args.write_ca_bundle) {
        Ok(o) => o,
        Err(e) if e.is_bad_input() => return fail(&e.to_string()),
        Err(e) => {
            eprintln!("kube-tas: {e}");
            return ExitCode::from(1);
        }
    };
    let issued = &outcome.issued;
    let dir = args.out.display();
    if issued.ca_reused() {
        eprintln!(
            "reused the CA in {dir} ({} and {} unchanged, expires {}): the caBundle registered \
             before stays valid",
            certs::CA_CERT_FILE,
            certs::CA_KEY_FILE,
            certs::show_time(issued.ca_not_after)
        );
    } else {
        eprintln!(
            "created a new development CA: {dir}/{} and {} (expires {})",
            certs::CA_CERT_FILE,
            certs::CA_KEY_FILE,
            certs::show_time(issued.ca_not_after)
        );
    }
    eprintln!(
        "wrote the serving certificate {dir}/{} and {} for {} (expires {})",
        certs::TLS_CERT_FILE,
        certs::TLS_KEY_FILE,
        issued.names.join(", "),
        certs::show_time(issued.tls_not_after)
    );
    for warning in &issued.warnings {
        eprintln!("warning: {warning}");
    }
    for edit in &outcome.ca_bundle_files {
        eprintln!(
            "put the caBundle into {} ({} value(s))",
            edit.path.display(),
            edit.replaced
        );
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", issued.ca_bundle()).is_err() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn run_serve(args: ServeArgs) -> ExitCode {
    let feature_gates = match FeatureGates::parse(&args.feature_gates) {
        Ok(g) => g,
        Err(e) => return fail(&format!("--feature-gates: {e}")),
    };
    let config = ServeConfig {
        cluster: args.cluster,
        kubeconfig: args.kubeconfig,
        leader_elect: args.leader_elect,
        leader_election_namespace: args.leader_election_namespace,
        leader_election_id: args.leader_election_id,
        pod_name: args.pod_name,
        lease_duration: Duration::from_secs(args.lease_duration_seconds),
        listen: args.listen,
        admin_listen: args.admin_listen,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        client_ca: args.client_ca,
        extender_clients: args.extender_client_names,
        webhook_clients: args.webhook_client_names,
        tls_reload_interval: Duration::from_secs(args.tls_reload_interval_seconds),
        feature_gates,
        plan_ttl: Duration::from_secs(args.plan_ttl_seconds),
        max_body_bytes: usize::try_from(args.max_body_bytes).unwrap_or(usize::MAX),
        shutdown_delay: Duration::from_secs(args.shutdown_delay_seconds),
        shutdown_grace: Duration::from_secs(args.shutdown_grace_seconds),
        node_id_sweep: server::DEFAULT_NODE_ID_SWEEP,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("kube-tas")
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kube-tas: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let bad_input = e.chain().any(|c| {
                c.is::<ConfigError>()
                    || c.is::<crate::cluster::LoadError>()
                    || c.is::<crate::cluster::live::ClientError>()
            });
            if bad_input {
                fail(&format!("{e:#}"))
            } else {
                eprintln!("kube-tas: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

fn run_simulate(args: SimulateArgs) -> ExitCode {
    let gates = match FeatureGates::parse(&args.feature_gates) {
        Ok(g) => g,
        Err(e) => return fail(&format!("--feature-gates: {e}")),
    };
    let started = std::time::Instant::now();
    let cluster = match crate::cluster::load_paths(&args.paths) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    for w in &cluster.warnings {
        eprintln!("warning: {w}");
    }
    let loaded = started.elapsed();
    let report = simulate::run(&cluster, &gates);
    for line in &report.left_out {
        eprintln!("warning: {line}");
    }
    tracing::info!(
        nodes = cluster.nodes.len(),
        workloads = cluster.workloads.len(),
        load_ms = loaded.as_secs_f64() * 1e3,
        simulate_ms = (started.elapsed() - loaded).as_secs_f64() * 1e3,
        "simulation done"
    );
    let text = match args.output {
        Output::Json => match serde_json::to_string_pretty(&report.to_json()) {
            Ok(s) => s + "\n",
            Err(e) => return fail(&format!("cannot encode the report: {e}")),
        },
        Output::Table => report.to_table(),
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(text.as_bytes()).is_err() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("kube-tas: {message}");
    ExitCode::from(2)
}
