//! The `switchyard` binary: parse flags, set up logging, hand over to the
//! library. Everything else lives in `switchyard::cli`.

use clap::Parser;
use std::process::ExitCode;

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
