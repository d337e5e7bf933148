//! Start-up cost of `kube-tas serve` in live mode against a big cluster: spawns the
//! `fake-apiserver` example (a separate process standing in for the API server on loopback),
//! then `kube-tas serve --kubeconfig ... --leader-elect=false` on free loopback ports, and
//! measures
//!
//! * the time from spawning kube-tas to the first `200` of `GET /readyz` (polled every 20 ms),
//!   that is until every watched kind has applied its first list;
//! * kube-tas's `VmRSS` and `VmHWM` (peak RSS) from `/proc/PID/status` at ready and again after
//!   `--steady-seconds` (the steady figure split into anonymous memory and mapped files), and
//!   the CPU time it used (user + system) by then;
//! * `kube_tas_cluster_nodes` and `kube_tas_cluster_pods` from `/metrics`, to confirm that
//!   everything arrived.
//!
//! kube-tas runs with `MIMALLOC_PURGE_DELAY` as the image sets it (`--purge-delay-ms`), so the
//! memory measured is what ships.
//!
//! ```text
//! cargo build --release --bin kube-tas --example fake-apiserver --example live-load
//! target/release/examples/live-load --blocks 15 --racks 25 --hosts 40 --pods-per-node 10
//! ```
//!
//! With `--failover crash` or `--failover term` it measures leader failover instead: two
//! replicas in live mode with leader election (`--lease-duration-seconds`), the time from
//! killing the leader (SIGKILL, or SIGTERM for a rolling update) until the other one reports
//! `kube_tas_leader 1` on `/metrics` (polled every 20 ms).
//!
//! ```text
//! target/release/examples/live-load --blocks 1 --pods-per-node 2 --failover crash
//! ```
//!
//! Each phase (filling the fake, reaching ready) gives up after `--timeout-seconds`; the
//! children are killed at the end, on success or not. kube-tas's log is kept in a file whose path
//! is printed. The last line of the report is one `RESULT key=value ...` line, for scripts.
//! Linux only (`/proc`).

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;

/// Measure kube-tas's time to ready and memory against the fake API server.
#[derive(Debug, Parser)]
#[command(name = "live-load")]
struct Args {
    /// The fake-apiserver example binary.
    #[arg(long, default_value = "target/release/examples/fake-apiserver")]
    fake_apiserver: PathBuf,
    /// The kube-tas binary.
    #[arg(long, default_value = "target/release/kube-tas")]
    kube_tas: PathBuf,
    /// Blocks of the generated cluster.
    #[arg(long, default_value_t = 15)]
    blocks: u32,
    /// Racks per block.
    #[arg(long, default_value_t = 25)]
    racks: u32,
    /// Hosts per rack.
    #[arg(long, default_value_t = 40)]
    hosts: u32,
    /// Bound Running pods per node.
    #[arg(long, default_value_t = 10)]
    pods_per_node: u32,
    /// Jobs the pods belong to.
    #[arg(long, default_value_t = 10)]
    jobs: u32,
    /// Seconds after ready to sample memory again.
    #[arg(long, default_value_t = 10)]
    steady_seconds: u64,
    /// Seconds each phase may take before giving up.
    #[arg(long, default_value_t = 120)]
    timeout_seconds: u64,
    /// Measure leader failover instead: how the leader is stopped.
    #[arg(long, value_enum)]
    failover: Option<Stop>,
    /// The replicas' `--lease-duration-seconds` in failover mode.
    #[arg(long, default_value_t = 15)]
    lease_duration_seconds: u64,
    /// `MIMALLOC_PURGE_DELAY` (ms) given to kube-tas alone (not to the fake API server): the
    /// value the image and the Deployment set, so the memory measured is what ships; 1000 is
    /// the allocator's own default.
    #[arg(long, default_value_t = 50)]
    purge_delay_ms: u32,
}

/// How the leader is stopped in failover mode.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Stop {
    /// SIGKILL: the Lease must expire before the other replica takes over.
    Crash,
    /// SIGTERM: the leader gives the Lease up as it shuts down.
    Term,
}

/// Kills its child when dropped.
struct Guard {
    name: &'static str,
    child: Child,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Guard {
    fn spawn(name: &'static str, command: &mut Command) -> Result<Self, String> {
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {name} ({command:?}): {e}"))?;
        Ok(Self { name, child })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if the child has exited.
    fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!("{} exited early: {status}", self.name)),
            Ok(None) => Ok(()),
            Err(e) => Err(format!("{}: {e}", self.name)),
        }
    }
}

/// What `/proc/PID` says about a process.
#[derive(Debug, Clone, Copy, Default)]
struct ProcSample {
    rss_kb: u64,
    hwm_kb: u64,
    /// The anonymous part of RSS (heap, stacks); the rest is mapped files (the binary).
    anon_kb: u64,
    /// User + system CPU time.
    cpu_seconds: f64,
    /// System CPU time alone (mostly page faults while memory grows).
    sys_seconds: f64,
    /// Minor page faults.
    faults: u64,
}

fn proc_sample(pid: u32) -> Result<ProcSample, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("reading /proc/{pid}/status: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("reading /proc/{pid}/stat: {e}"))?;
    // Fields after the command (which may hold spaces) start at field 3: minflt is field 10,
    // utime and stime are fields 14 and 15, in USER_HZ (100 per second on Linux).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let stat_field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
    Ok(ProcSample {
        rss_kb: field("VmRSS:"),
        hwm_kb: field("VmHWM:"),
        anon_kb: field("RssAnon:"),
        cpu_seconds: (stat_field(14) + stat_field(15)) as f64 / 100.0,
        sys_seconds: stat_field(15) as f64 / 100.0,
        faults: stat_field(10),
    })
}

/// One plain HTTP/1.1 GET on loopback: (status, body).
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

/// The value of an unlabelled gauge in a Prometheus text exposition.
fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// (nodes, pods) kube-tas reports.
fn counted(admin: SocketAddr) -> Result<(u64, u64), String> {
    let (status, body) = http_get(admin, "/metrics").map_err(|e| format!("GET /metrics: {e}"))?;
    if status != 200 {
        return Err(format!("GET /metrics answered {status}"));
    }
    let get = |name| metric(&body, name).map_or(0, |v| v as u64);
    Ok((get("kube_tas_cluster_nodes"), get("kube_tas_cluster_pods")))
}

/// Two distinct free loopback ports (bound together, then released).
fn free_ports() -> Result<(SocketAddr, SocketAddr), String> {
    let bind = || TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"));
    let (a, b) = (bind()?, bind()?);
    let addr = |l: &TcpListener| l.local_addr().map_err(|e| e.to_string());
    Ok((addr(&a)?, addr(&b)?))
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("live-load: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let timeout = Duration::from_secs(args.timeout_seconds);
    let dir = std::env::temp_dir().join(format!("kube-tas-live-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let kubeconfig = dir.join("kubeconfig");

    let fill_started = Instant::now();
    let mut fake = Guard::spawn(
        "fake-apiserver",
        Command::new(&args.fake_apiserver)
            .args(["--blocks", &args.blocks.to_string()])
            .args(["--racks", &args.racks.to_string()])
            .args(["--hosts", &args.hosts.to_string()])
            .args(["--pods-per-node", &args.pods_per_node.to_string()])
            .args(["--jobs", &args.jobs.to_string()])
            .args(["--listen", "127.0.0.1:0"])
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdin(Stdio::null()),
    )?;
    wait_for_file(&kubeconfig, &mut fake, timeout)?;
    let fill = fill_started.elapsed();
    let fake_filled = proc_sample(fake.pid())?;
    eprintln!(
        "live-load: fake API server filled in {:.1} s, RSS {:.0} MiB",
        fill.as_secs_f64(),
        mib(fake_filled.rss_kb)
    );
    if let Some(stop) = args.failover {
        return failover(args, stop, &dir, &kubeconfig, &mut fake);
    }

    let started = Instant::now();
    let mut tas = Replica::spawn(
        args,
        "kube-tas",
        &dir,
        &kubeconfig,
        &["--leader-elect=false"],
    )?;
    let (admin, log_path) = (tas.admin, tas.log.clone());
    let pid = tas.guard.pid();
    loop {
        if let Ok((200, _)) = http_get(admin, "/readyz") {
            break;
        }
        tas.guard
            .check_alive()
            .and_then(|()| fake.check_alive())
            .map_err(|e| format!("{e} (log: {})", log_path.display()))?;
        if started.elapsed() > timeout {
            return Err(format!(
                "kube-tas not ready after {} s (log: {})",
                timeout.as_secs(),
                log_path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ready = started.elapsed();
    let at_ready = proc_sample(pid)?;
    let fake_at_ready = proc_sample(fake.pid())?;
    let (nodes_ready, pods_ready) = counted(admin)?;

    std::thread::sleep(Duration::from_secs(args.steady_seconds));
    tas.guard.check_alive()?;
    let steady = proc_sample(pid)?;
    let (nodes, pods) = counted(admin)?;

    let expected_nodes = u64::from(args.blocks) * u64::from(args.racks) * u64::from(args.hosts);
    let expected_pods = expected_nodes * u64::from(args.pods_per_node);
    println!(
        "cluster: {expected_nodes} nodes, {expected_pods} pods (fake filled in {:.1} s)",
        fill.as_secs_f64()
    );
    println!("time to ready:      {:8.0} ms", ready.as_secs_f64() * 1e3);
    println!(
        "at ready:           RSS {:7.1} MiB  VmHWM {:7.1} MiB  cpu {:6.2} s (sys {:.2} s, \
         {} page faults)  counted {nodes_ready} nodes, {pods_ready} pods",
        mib(at_ready.rss_kb),
        mib(at_ready.hwm_kb),
        at_ready.cpu_seconds,
        at_ready.sys_seconds,
        at_ready.faults
    );
    println!(
        "after {:>2} s:         RSS {:7.1} MiB  VmHWM {:7.1} MiB  (anonymous {:.1} MiB, \
         files {:.1} MiB)  cpu {:6.2} s  counted {nodes} nodes, {pods} pods",
        args.steady_seconds,
        mib(steady.rss_kb),
        mib(steady.hwm_kb),
        mib(steady.anon_kb),
        mib(steady.rss_kb.saturating_sub(steady.anon_kb)),
        steady.cpu_seconds
    );
    println!(
        "fake API server:    RSS {:7.1} MiB  cpu while kube-tas loaded {:6.2} s",
        mib(fake_at_ready.rss_kb),
        fake_at_ready.cpu_seconds - fake_filled.cpu_seconds
    );
    println!("kube-tas log:       {}", log_path.display());
    let complete = nodes == expected_nodes && pods == expected_pods;
    println!(
        "RESULT ready_ms={:.0} rss_ready_kb={} hwm_ready_kb={} rss_steady_kb={} hwm_steady_kb={} \
         anon_steady_kb={} cpu_ready_s={:.2} sys_ready_s={:.2} faults_ready={} nodes={nodes} pods={pods} \
         complete={complete} purge_delay_ms={}",
        ready.as_secs_f64() * 1e3,
        at_ready.rss_kb,
        at_ready.hwm_kb,
        steady.rss_kb,
        steady.hwm_kb,
        steady.anon_kb,
        at_ready.cpu_seconds,
        at_ready.sys_seconds,
        at_ready.faults,
        args.purge_delay_ms
    );
    drop(tas);
    drop(fake);
    if !complete {
        return Err(format!(
            "kube-tas counted {nodes} nodes and {pods} pods, expected {expected_nodes} and \
             {expected_pods}"
        ));
    }
    Ok(())
}

/// One `kube-tas serve` in live mode against the fake, on free loopback ports, its output in
/// `NAME.log` beside the kubeconfig.
struct Replica {
    name: String,
    admin: SocketAddr,
    log: PathBuf,
    guard: Guard,
}

impl Replica {
    /// Starts it with `election` (its leader-election flags) after the common ones.
    fn spawn(
        args: &Args,
        name: &str,
        dir: &Path,
        kubeconfig: &Path,
        election: &[&str],
    ) -> Result<Self, String> {
        let (listen, admin) = free_ports()?;
        let log_path = dir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let guard = Guard::spawn(
            "kube-tas",
            Command::new(&args.kube_tas)
                .arg("serve")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(election)
                .env("MIMALLOC_PURGE_DELAY", args.purge_delay_ms.to_string())
                .args(["--listen", &listen.to_string()])
                .args(["--admin-listen", &admin.to_string()])
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err),
        )?;
        Ok(Self {
            name: name.to_string(),
            admin,
            log: log_path,
            guard,
        })
    }

    /// A replica that takes part in the election, named `name`, in failover mode.
    fn elected(args: &Args, name: &str, dir: &Path, kubeconfig: &Path) -> Result<Self, String> {
        let lease = args.lease_duration_seconds.to_string();
        let election = [
            "--leader-elect=true",
            "--pod-name",
            name,
            "--leader-election-namespace",
            "default",
            "--lease-duration-seconds",
            &lease,
        ];
        Self::spawn(args, name, dir, kubeconfig, &election)
    }

    /// Whether it reports itself the leader (`None` while `/metrics` does not answer).
    fn leads(&self) -> Option<bool> {
        match http_get(self.admin, "/metrics") {
            Ok((200, body)) => Some(metric(&body, "kube_tas_leader") == Some(1.0)),
            _ => None,
        }
    }
}

/// Failover mode: two replicas, the leader stopped, the time until the other leads.
fn failover(
    args: &Args,
    stop: Stop,
    dir: &Path,
    kubeconfig: &Path,
    fake: &mut Guard,
) -> Result<(), String> {
    let timeout = Duration::from_secs(args.timeout_seconds);
    let mut replicas = [
        Replica::elected(args, "live-load-a", dir, kubeconfig)?,
        Replica::elected(args, "live-load-b", dir, kubeconfig)?,
    ];
    let started = Instant::now();
    let leader = loop {
        if let Some(i) = replicas.iter().position(|r| r.leads() == Some(true)) {
            break i;
        }
        for r in &mut replicas {
            r.guard
                .check_alive()
                .map_err(|e| format!("{e} (log: {})", r.log.display()))?;
        }
        fake.check_alive()?;
        if started.elapsed() > timeout {
            return Err(format!("no replica leads after {} s", timeout.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let first_lead = started.elapsed();
    let [a, b] = &mut replicas;
    let (old, new) = if leader == 0 { (a, b) } else { (b, a) };
    if new.leads() == Some(true) {
        return Err(format!("{} and {} both lead", old.name, new.name));
    }
    let stopped = Instant::now();
    match stop {
        Stop::Crash => old
            .guard
            .child
            .kill()
            .map_err(|e| format!("killing {}: {e}", old.name))?,
        Stop::Term => {
            let status = Command::new("kill")
                .args(["-TERM", &old.guard.pid().to_string()])
                .status()
                .map_err(|e| format!("running kill: {e}"))?;
            if !status.success() {
                return Err(format!("kill -TERM {} failed: {status}", old.guard.pid()));
            }
        }
    }
    loop {
        if new.leads() == Some(true) {
            break;
        }
        new.guard
            .check_alive()
            .map_err(|e| format!("{e} (log: {})", new.log.display()))?;
        if stopped.elapsed() > timeout {
            return Err(format!(
                "{} does not lead {} s after {} stopped (log: {})",
                new.name,
                timeout.as_secs(),
                old.name,
                new.log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = stopped.elapsed();
    println!(
        "first leader:       {} after {:.0} ms",
        old.name,
        first_lead.as_secs_f64() * 1e3
    );
    println!(
        "failover ({stop:?}):   {} leads {:.0} ms after {} stopped (lease {} s)",
        new.name,
        took.as_secs_f64() * 1e3,
        old.name,
        args.lease_duration_seconds
    );
    println!(
        "logs:               {}, {}",
        old.log.display(),
        new.log.display()
    );
    println!(
        "RESULT failover_ms={:.0} stop={stop:?} lease_s={} first_lead_ms={:.0}",
        took.as_secs_f64() * 1e3,
        args.lease_duration_seconds,
        first_lead.as_secs_f64() * 1e3
    );
    Ok(())
}

/// Waits until `path` exists (the fake writes it once it serves), or the child dies, or time
/// runs out.
fn wait_for_file(path: &Path, child: &mut Guard, timeout: Duration) -> Result<(), String> {
    let started = Instant::now();
    while !path.exists() {
        child.check_alive()?;
        if started.elapsed() > timeout {
            return Err(format!(
                "{} did not write {} within {} s",
                child.name,
                path.display(),
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
