//! The `switchyard` binary: parse flags, set up logging, hand over to the
//! library. Everything else lives in `switchyard::cli`.

use clap::Parser;
use std::process::ExitCode;

/// mimalloc rather than glibc's malloc: the proxy makes many small
/// short-lived allocations per request, and mimalloc cut its CPU per
/// request by 5.6–7.1 % in `bench/proxy-bench.sh` (bench/RESULTS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = switchyard::cli::Args::parse();
    switchyard::cli::init_tracing(args.log_format);
    let runtime = match switchyard::cli::runtime_for(&args.command) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(switchyard::cli::run(args.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
