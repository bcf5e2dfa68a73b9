//! `switchyard demo`: runs [`crate::demo`] with the acceptance sequence and
//! prints its table. Exits non-zero if any request failed.

use clap::Args;
use std::process::ExitCode;

/// Flags of `switchyard demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Cutovers that only change a header value.
    #[arg(long, default_value_t = 10)]
    pub header_updates: usize,
    /// Cutovers to brand-new backend processes.
    #[arg(long, default_value_t = 10)]
    pub backend_swaps: usize,
    /// Request loops in flight at all times.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Kill -9 the leader coordinator during every Nth cutover.
    #[arg(long)]
    pub kill_leader_every: Option<usize>,
}

/// Runs the demo.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let binary = std::env::current_exe()?;
    let mut options = crate::demo::DemoOptions::acceptance(binary);
    options.header_updates = args.header_updates;
    options.backend_swaps = args.backend_swaps;
    options.concurrency = args.concurrency.max(1);
    options.kill_leader_every = args.kill_leader_every;
    let options_clean = args.kill_leader_every.is_none();
    options.progress = true;
    eprintln!(
        "starting 3 coordinators, 3 proxies (zones a, b, c) and backends on 127.0.0.1, mutual TLS from a throwaway CA; {} cutovers under continuous traffic",
        options.header_updates + options.backend_swaps
    );
    let report = crate::demo::run(options).await?;
    print!("{}", crate::demo::render(&report));
    if report.probe.failed > 0 {
        eprintln!(
            "error: {} of {} requests failed",
            report.probe.failed, report.probe.sent
        );
        return Ok(ExitCode::from(1));
    }
    // Killing the leader on purpose makes proxies and followers warn; a
    // run without faults must be silent.
    if options_clean && !report.warnings.is_empty() {
        eprintln!(
            "error: a clean run logged {} WARN/ERROR lines:\n{}",
            report.warnings.len(),
            report.warnings.join("\n")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
