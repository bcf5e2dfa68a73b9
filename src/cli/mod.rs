//! The command line: one clap struct per subcommand, each parsed, then
//! validated once, then run. Invalid flags exit non-zero with a clear
//! message before anything starts.

mod admin;
mod backend;
mod coordinator;
mod demo;
mod kube;
mod node_zone;
mod proxy;
pub mod tls;

pub use coordinator::coordinator_metrics;
pub use proxy::data_plane;

use clap::{Parser, Subcommand, ValueEnum};
use std::io::IsTerminal;
use std::process::ExitCode;

/// switchyard — Gateway API routes cut over between backends without
/// dropping a request.
#[derive(Debug, Parser)]
#[command(name = "switchyard", version, about, long_about = None)]
pub struct Args {
    /// Log format for `tracing` output on stderr (filter with RUST_LOG).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "SWITCHYARD_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log output formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a coordinator (one member of the Raft group).
    Coordinator(coordinator::CoordinatorArgs),
    /// The main job: a whole deployment on loopback, cut over 20 times under continuous traffic.
    Demo(demo::DemoArgs),
    /// Run a small echo backend whose health can be scripted (for the demo and tests).
    Backend(backend::BackendArgs),
    /// Run a proxy replica (the data plane).
    Proxy(proxy::ProxyArgs),
    /// Store Kubernetes-shaped resources (Gateway API, Service, EndpointSlice) from YAML files.
    Apply(admin::ApplyArgs),
    /// Remove the resources named in YAML files.
    Delete(admin::DeleteArgs),
    /// Show the leader, every route's generations and cutover progress, and the proxies.
    Status(admin::StatusArgs),
    /// Create the CA and certificates a cluster's mutual TLS needs.
    Certs(tls::CertsArgs),
    /// Write the zone label of the node this pod runs on to a file (an init container for
    /// `proxy --zone-file`).
    NodeZone(node_zone::NodeZoneArgs),
}

/// Sets up the `tracing` subscriber: `RUST_LOG` (default `info`), colour
/// only when stderr is a terminal (a log file gets plain text).
///
/// openraft's own logs are off unless `RUST_LOG` names `openraft`: at INFO
/// they dump whole Raft states, and it reports routine events (a peer not
/// up yet at start-up, a vote that raced another) as WARN and ERROR.
/// switchyard logs what an operator needs of Raft itself (leadership,
/// quorum, peers it cannot reach, storage failures); `RUST_LOG=info,
/// openraft=warn` brings openraft's back when debugging.
pub fn init_tracing(format: LogFormat) {
    let directives = log_directives(std::env::var("RUST_LOG").ok().as_deref());
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_directives(None)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// The filter directives for `RUST_LOG`'s value (see [`init_tracing`]).
fn log_directives(rust_log: Option<&str>) -> String {
    let base = rust_log
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("info");
    if base.contains("openraft") {
        base.to_string()
    } else {
        format!("{base},openraft=off")
    }
}

/// The async runtime `command` runs on: a proxy with `--workers` runs on
/// one thread (a current-thread runtime; with N > 1 its client connections
/// go to N worker threads, `switchyard_proxy::server::workers`); every
/// other command, and a proxy without the flag, gets Tokio's
/// multi-threaded default (one worker per CPU, or `TOKIO_WORKER_THREADS`).
pub fn runtime_for(command: &Command) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match command {
        // With --workers, client connections are served on that many
        // threads of their own (one, this one); the rest of the proxy is
        // light and shares one thread.
        Command::Proxy(args) if args.workers.is_some() => {
            tokio::runtime::Builder::new_current_thread()
        }
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build()
}

/// Runs one subcommand; the exit code says how it went.
pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Coordinator(args) => coordinator::run(args).await,
        Command::Proxy(args) => proxy::run(args).await,
        Command::Backend(args) => backend::run(args).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Apply(args) => admin::apply(args).await,
        Command::Delete(args) => admin::delete(args).await,
        Command::Status(args) => admin::status(args).await,
        Command::Certs(args) => tls::run(args),
        Command::NodeZone(args) => node_zone::run(args).await,
    }
}

/// A future that resolves when the process gets SIGTERM or SIGINT.
///
/// The handlers are installed when this is called, not when the future is
/// first polled: call it before announcing the process as ready
/// (`LISTENING`), or a SIGTERM sent right after the announcement can find
/// the default action still in place and kill the process without its
/// clean stop (seen: a proxy killed before flushing its access log).
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        match (term, interrupt) {
            (Ok(mut term), Ok(mut interrupt)) => tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
                _ = interrupt.recv() => tracing::info!("SIGINT received, shutting down"),
            },
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM or SIGINT; stopping now");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::log_directives;

    #[test]
    fn openraft_is_quiet_unless_asked_for() {
        assert_eq!(log_directives(None), "info,openraft=off");
        assert_eq!(log_directives(Some(" ")), "info,openraft=off");
        assert_eq!(log_directives(Some("debug")), "debug,openraft=off");
        assert_eq!(
            log_directives(Some("info,openraft=warn")),
            "info,openraft=warn"
        );
    }
}
