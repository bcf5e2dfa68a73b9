//! The last events of a run, and the report a failing seed prints: seed,
//! invariant, step, what broke, the trace, and the one-line command that
//! reproduces it.

use std::collections::VecDeque;
use std::fmt;

/// How many events a failure shows.
pub const TRACE_LEN: usize = 40;

/// A ring of the most recent events.
#[derive(Debug, Default)]
pub struct Trace {
    events: VecDeque<String>,
}

impl Trace {
    /// Records one event.
    pub fn push(&mut self, event: String) {
        if self.events.len() == TRACE_LEN {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    /// The recorded events, oldest first.
    pub fn events(&self) -> Vec<String> {
        self.events.iter().cloned().collect()
    }
}

/// One seed that broke an invariant.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// Profile name.
    pub profile: &'static str,
    /// Which invariant (its checker's name), or `panic`.
    pub invariant: &'static str,
    /// Step at which it broke (fault-phase steps, then heal rounds).
    pub step: usize,
    /// Simulated time since the start, ms.
    pub at_ms: u64,
    /// What exactly broke.
    pub detail: String,
    /// The last events before it.
    pub trace: Vec<String>,
    /// The test binary to rerun (`sim_default`).
    pub test: String,
}

impl Failure {
    /// The command that runs exactly this seed again.
    pub fn reproduce(&self) -> String {
        let profile = if self.profile == "default" {
            String::new()
        } else {
            format!("SWITCHYARD_CHAOS_PROFILE={} ", self.profile)
        };
        // The broken-core tests live in their own workspace (see
        // `sim/faults/Cargo.toml`).
        let package = if self.test.starts_with("sim_default") {
            "-p switchyard-sim"
        } else {
            "--manifest-path sim/faults/Cargo.toml"
        };
        format!(
            "{profile}SWITCHYARD_SIM_SEED={} cargo test {package} --test {}",
            self.seed, self.test
        )
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation seed {} broke invariant: {}",
            self.seed, self.invariant
        )?;
        writeln!(f, "  profile: {}", self.profile)?;
        writeln!(f, "  step: {} (t=+{}ms)", self.step, self.at_ms)?;
        writeln!(f, "  what: {}", self.detail)?;
        writeln!(f, "  last {} events:", self.trace.len())?;
        for event in &self.trace {
            writeln!(f, "    {event}")?;
        }
        write!(f, "  reproduce: {}", self.reproduce())
    }
}
