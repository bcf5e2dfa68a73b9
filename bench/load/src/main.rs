//! The `switchyard-load` binary: flags, then [`switchyard_load::run`], then
//! the table on stdout (or `--write-yaml` only).

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use switchyard_load::cluster::ClusterSpec;
use switchyard_load::{Options, routes};
use switchyard_proto::model::parse_duration;

/// Load tool for switchyard's control plane: starts 3 coordinators on
/// 127.0.0.1 (or uses given ones), stores N generated HTTPRoutes (each with
/// its Service and a one-endpoint EndpointSlice), runs M simulated proxy
/// agents in this process, and prints the scale figures as one table with
/// this command line.
#[derive(Debug, Parser)]
#[command(name = "switchyard-load", version)]
struct Args {
    /// Number of HTTPRoutes to store; each comes with its own Service and EndpointSlice, so
    /// the store holds 3 × N + 3 objects.
    #[arg(long, default_value_t = 1000)]
    routes: usize,
    /// Number of simulated proxy agents (tokio tasks, each with its own id, a zone among
    /// zone-a/b/c and, with --tls, its own certificate).
    #[arg(long, default_value_t = 20)]
    agents: usize,
    /// The switchyard binary to start the coordinators from.
    #[arg(long, default_value = "target/release/switchyard")]
    switchyard_bin: PathBuf,
    /// Use these coordinators (HOST:PORT,...; plaintext) instead of starting three. The
    /// CPU, memory, data-directory and leader-kill figures need started ones and are skipped.
    #[arg(long, value_delimiter = ',')]
    connect: Vec<String>,
    /// Mutual TLS: a throwaway CA issues each coordinator, the admin client and every agent its
    /// own certificate (default: the coordinators run with --insecure).
    #[arg(long)]
    tls: bool,
    /// An extra flag for every started coordinator, e.g. --coordinator-arg=--max-message-bytes=67108864
    /// (repeat for several).
    #[arg(long = "coordinator-arg", allow_hyphen_values = true)]
    coordinator_args: Vec<String>,
    /// Objects per apply in the bulk apply: the coordinators' --max-objects-per-apply.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Single-route changes per apply → Ready measurement and per CPU measurement.
    #[arg(long, default_value_t = 20)]
    changes: usize,
    /// Routes stored when the reference CPU per update is measured (the figure is the ratio
    /// of CPU per update at --routes to CPU per update at this many).
    #[arg(long, default_value_t = 100)]
    cpu_reference_routes: usize,
    /// Concurrent clients of the committed-updates-per-second figure, one route each.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// How long the committed-updates-per-second figure runs.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    throughput_time: Duration,
    /// Routes moved to fresh backends (their evidence held back) so they are pending when the
    /// leader is killed.
    #[arg(long, default_value_t = 20)]
    pending: usize,
    /// Bound of every wait (a leader, Ready, a resync, an election...).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    wait: Duration,
    /// Also run the acceptance sequence (10 header changes, 10 fresh backends, a prober through
    /// three real proxies, 0 failed requests allowed) with every route in the store and the agents
    /// connected. The generated EndpointSlices then all list one real backend on 127.0.0.1.
    /// Needs coordinators started here, without --tls.
    #[arg(long)]
    acceptance: bool,
    /// Write each started coordinator's whole log into DIR at the end (coordinator-<id>.log),
    /// and the acceptance sequence's real proxies' and backends' (acceptance.log);
    /// the coordinators then log at info, not only their warnings.
    #[arg(long, value_name = "DIR")]
    keep_logs: Option<PathBuf>,
    /// The started coordinators' RUST_LOG (default: info with --keep-logs, else warn), e.g.
    /// `info,openraft=warn` to see Raft's own complaints in the kept logs.
    #[arg(long, value_name = "FILTER")]
    coordinator_log: Option<String>,
    /// Only write the generated store as Kubernetes YAML into this directory (files of at
    /// most --batch objects, in apply order, for `switchyard apply -f`), and exit.
    #[arg(long, value_name = "DIR")]
    write_yaml: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    keep_freed_memory();
    let args = Args::parse();
    if let Some(dir) = &args.write_yaml {
        return match routes::write_yaml(dir, args.routes, args.batch) {
            Ok(files) => {
                println!("wrote {} files to {}", files.len(), dir.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("switchyard-load: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let cluster = if args.connect.is_empty() {
        let mut extra_args = args.coordinator_args.clone();
        // Room for the generated routes plus the few the figures and the
        // acceptance sequence add, unless asked otherwise.
        if !extra_args.iter().any(|a| a.starts_with("--max-routes")) {
            extra_args.push(format!("--max-routes={}", args.routes.max(10_000) + 100));
        }
        ClusterSpec::Start {
            binary: args.switchyard_bin.clone(),
            tls: args.tls,
            extra_args,
            log_filter: args.coordinator_log.clone().unwrap_or_else(|| {
                if args.keep_logs.is_some() {
                    "info"
                } else {
                    "warn"
                }
                .into()
            }),
        }
    } else {
        ClusterSpec::Connect(args.connect.clone())
    };
    let options = Options {
        routes: args.routes,
        agents: args.agents,
        cluster,
        batch: args.batch,
        changes: args.changes,
        cpu_reference_routes: args.cpu_reference_routes,
        clients: args.clients,
        seconds: args.throughput_time.as_secs_f64(),
        pending: args.pending,
        wait: args.wait,
        acceptance: args.acceptance,
        keep_logs: args.keep_logs.clone(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    match switchyard_load::run(&options).await {
        Ok(report) => {
            println!("{}", report.table());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("switchyard-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Keeps memory this process freed for its next allocations, instead of
/// giving it back to the kernel. The tool runs 200 agents on the machine
/// it measures: at the resync each assembles a payload of about a MiB
/// while the one decoding agent builds the whole view, and with glibc's
/// defaults (large blocks mapped afresh, a heap's free top trimmed) these
/// were new pages to fault in and zero — a third of the machine's CPU in a
/// profile of that phase, in runs whose earlier phases happened to leave
/// the heaps trimmed, and none in others. The figure measured the
/// allocator's state, not the coordinators.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
        const MMAP_THRESHOLD: libc::c_int = 32 << 20;
        const TRIM_THRESHOLD: libc::c_int = 1 << 30;
        // SAFETY: mallopt only sets two of the allocator's global tunables
        // (under its own lock); no memory is touched.
        let set = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        };
        if !set {
            eprintln!("switchyard-load: mallopt refused; freed memory may go back to the kernel");
        }
    }
}
