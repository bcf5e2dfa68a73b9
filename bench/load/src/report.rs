//! The figures of one run and the table they print as: one row per goal of
//! issue 14, with the measured value, the goal and how it was measured,
//! under the exact command line that produced it.
//!
//! Owns: the figures' types, percentiles, and formatting. Each figure is a
//! `Result`: a phase that failed says why in its row instead of a number.

use std::fmt::Write as _;
use std::time::Duration;

/// A figure, or why it is missing.
pub type Figure<T> = Result<T, String>;

/// The `p`-th quantile (0..=1) of sorted `values`, nearest rank.
pub fn quantile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The acceptance sequence through real proxies at this size.
#[derive(Debug, Clone)]
pub struct Acceptance {
    /// Requests the prober sent.
    pub sent: u64,
    /// Requests that failed.
    pub failed: u64,
    /// The first few failures, with what went wrong.
    pub first_failures: Vec<String>,
    /// Cutovers done (each Ready before the next).
    pub cutovers: usize,
    /// Apply → Ready of each cutover (every live proxy: the agents and the
    /// three real proxies).
    pub ready: Latencies,
    /// WARN and ERROR lines of the real proxies and backends.
    pub warnings: usize,
    /// The first of them.
    pub first_warning: Option<String>,
    /// The three real proxies' memory and route-table installs.
    pub real: RealProxies,
}

/// What the real proxies of the acceptance sequence measured of
/// themselves.
#[derive(Debug, Clone)]
pub struct RealProxies {
    /// Largest VmRSS among them at the end of the sequence, bytes.
    pub rss: u64,
    /// Largest VmHWM (peak RSS), bytes.
    pub hwm: u64,
    /// Most routes one of their tables held.
    pub routes: usize,
    /// Installs of a whole route table (most routes compiled).
    pub whole_tables: Latencies,
    /// Installs of an update (most routes taken from the previous table).
    pub updates: Latencies,
}

/// p50 / p99 / max of some durations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latencies {
    /// How many.
    pub count: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

impl Latencies {
    /// Of `values`, in any order.
    pub fn of(mut values: Vec<Duration>) -> Latencies {
        values.sort_unstable();
        Latencies {
            count: values.len(),
            p50: quantile(&values, 0.5),
            p99: quantile(&values, 0.99),
            max: values.last().copied().unwrap_or_default(),
        }
    }
}

/// Single-route changes, apply → Ready, with the apply's own reply
/// (its Raft commit) apart: the rest is the cutover's commit and the
/// fleet's heartbeats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApplyToReady {
    /// From sending the Apply to the route Ready at its generation.
    pub ready: Latencies,
    /// From sending the Apply to its reply.
    pub committed: Latencies,
}

/// Bulk apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Bulk {
    /// Objects applied.
    pub objects: usize,
    /// Applies they took.
    pub applies: usize,
    /// Wall time.
    pub elapsed: Duration,
}

/// Full resync of the agents.
#[derive(Debug, Clone, PartialEq)]
pub struct Resync {
    /// Agents started.
    pub agents: usize,
    /// Agents that held a complete configuration at the target version.
    pub resynced: usize,
    /// The version that counted as current.
    pub target_version: u64,
    /// Their times.
    pub times: Latencies,
    /// Payloads (snapshots, deltas) the tool decoded, and those an agent
    /// took from another's decode of byte-for-byte the same payload.
    pub decodes: (u64, u64),
}

/// Committed updates with many clients.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// Clients.
    pub clients: usize,
    /// Applies committed.
    pub commits: u64,
    /// Cutovers the leader committed meanwhile (`None` when its metrics
    /// could not be read: coordinators not started here).
    pub cutovers: Option<u64>,
    /// Applies refused or failed.
    pub errors: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Coordinator CPU per single-route update.
#[derive(Debug, Clone, PartialEq)]
pub struct Cpu {
    /// Routes stored in the reference measurement.
    pub reference_routes: usize,
    /// CPU seconds per update (all coordinators, idle rate subtracted),
    /// at the reference size.
    pub at_reference: f64,
    /// The same at the full size.
    pub at_full: f64,
}

/// Coordinator memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    /// Largest VmRSS over the coordinators, bytes.
    pub rss: u64,
    /// Largest VmHWM over the coordinators, bytes.
    pub hwm: u64,
}

/// Data directory against live state.
#[derive(Debug, Clone, PartialEq)]
pub struct Disk {
    /// Single-route updates committed before the measurement.
    pub updates: u64,
    /// JSON bytes of the applied objects.
    pub live_bytes: u64,
    /// Largest data directory over the coordinators, bytes on disk.
    pub dir_bytes: u64,
}

/// Leader kill.
#[derive(Debug, Clone, PartialEq)]
pub struct Failover {
    /// Routes pending when the leader was killed.
    pub pending: usize,
    /// From the kill to a survivor reporting itself leader.
    pub election: Duration,
    /// From then to no transition pending (all committed).
    pub committed: Duration,
    /// The proxies' sets the new leader received by then, by set, form
    /// and outcome (its `proxy_sets` counters), e.g. `evidence digest
    /// taken 199`.
    pub sets: Vec<(String, u64)>,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// The command line.
    pub command: String,
    /// Routes and agents of the run.
    pub routes: usize,
    /// Agents.
    pub agents: usize,
    /// Bulk apply of the routes.
    pub bulk: Figure<Bulk>,
    /// Full resync.
    pub resync: Figure<Resync>,
    /// Apply → Ready at the full size.
    pub ready: Figure<ApplyToReady>,
    /// Committed updates per second.
    pub throughput: Figure<Throughput>,
    /// CPU per update, full vs reference.
    pub cpu: Figure<Cpu>,
    /// RSS.
    pub memory: Figure<Memory>,
    /// Data directory.
    pub disk: Figure<Disk>,
    /// Leader kill.
    pub failover: Figure<Failover>,
    /// The acceptance sequence at this size (`None`: not asked for).
    pub acceptance: Option<Figure<Acceptance>>,
    /// Counters and remarks printed under the table.
    pub notes: Vec<String>,
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn mib(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

fn row<T>(
    out: &mut String,
    figure: &str,
    f: &Figure<T>,
    goal: &str,
    show: impl Fn(&T) -> (String, String),
) {
    let (value, how) = match f {
        Ok(v) => show(v),
        Err(why) => ("—".to_string(), why.clone()),
    };
    let _ = writeln!(out, "| {figure} | {value} | {goal} | {how} |");
}

impl Report {
    /// The table, Markdown.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "`{}`\n", self.command);
        let _ = writeln!(
            out,
            "{} routes, {} agents; 3 coordinators on 127.0.0.1.\n",
            self.routes, self.agents
        );
        out.push_str("| figure | measured | goal | how |\n| --- | --- | --- | --- |\n");
        row(
            &mut out,
            "bulk apply",
            &self.bulk,
            "≥ 5,000 objects/s",
            |b| {
                let rate = b.objects as f64 / b.elapsed.as_secs_f64().max(1e-9);
                (
                    format!("{rate:.0} objects/s"),
                    format!(
                        "{} objects in {} applies, {:.2} s",
                        b.objects,
                        b.applies,
                        b.elapsed.as_secs_f64()
                    ),
                )
            },
        );
        row(
            &mut out,
            "full resync of all agents (p99)",
            &self.resync,
            "< 2 s",
            |r| {
                (
                    ms(r.times.p99),
                    format!(
                        "{}/{} agents from empty to a complete configuration at version ≥ {}; p50 {}, max {}; payloads decoded {}, shared by identical bytes {}",
                        r.resynced,
                        r.agents,
                        r.target_version,
                        ms(r.times.p50),
                        ms(r.times.max),
                        r.decodes.0,
                        r.decodes.1
                    ),
                )
            },
        );
        row(
            &mut out,
            "apply → Ready, one route, policy all (p50 / p99)",
            &self.ready,
            "< 50 ms / < 200 ms",
            |r| {
                (
                    format!("{} / {}", ms(r.ready.p50), ms(r.ready.p99)),
                    format!(
                        "{} changes, max {}; Ready from the leader's WatchStatus; of which the apply's own reply p50 {} / p99 {}",
                        r.ready.count,
                        ms(r.ready.max),
                        ms(r.committed.p50),
                        ms(r.committed.p99)
                    ),
                )
            },
        );
        row(
            &mut out,
            "committed route updates per second",
            &self.throughput,
            "≥ 1,000",
            |t| {
                (
                    format!(
                        "{:.0}/s",
                        t.commits as f64 / t.elapsed.as_secs_f64().max(1e-9)
                    ),
                    format!(
                        "{} clients, {} commits, {} errors in {:.1} s; cut over meanwhile: {}",
                        t.clients,
                        t.commits,
                        t.errors,
                        t.elapsed.as_secs_f64(),
                        t.cutovers.map_or_else(
                            || "not known".to_string(),
                            |c| format!(
                                "{c} ({:.0}/s)",
                                c as f64 / t.elapsed.as_secs_f64().max(1e-9)
                            )
                        )
                    ),
                )
            },
        );
        row(
            &mut out,
            "coordinator CPU per update, N ÷ reference",
            &self.cpu,
            "≤ 2",
            |c| {
                (
                    format!("{:.2}", c.at_full / c.at_reference.max(1e-9)),
                    format!(
                        "{:.1} ms at {} routes vs {:.1} ms at {} (utime+stime of all 3, idle rate subtracted)",
                        c.at_full * 1000.0,
                        self.routes,
                        c.at_reference * 1000.0,
                        c.reference_routes
                    ),
                )
            },
        );
        row(&mut out, "coordinator RSS", &self.memory, "< 1 GiB", |m| {
            (
                mib(m.rss),
                format!("largest VmRSS; peak VmHWM {}", mib(m.hwm)),
            )
        });
        row(
            &mut out,
            "data directory ÷ live state",
            &self.disk,
            "< 10×",
            |d| {
                (
                    format!("{:.1}×", d.dir_bytes as f64 / d.live_bytes.max(1) as f64),
                    format!(
                        "largest data dir {} after {} single-route updates; live state = JSON of the applied objects, {}",
                        mib(d.dir_bytes),
                        d.updates,
                        mib(d.live_bytes)
                    ),
                )
            },
        );
        row(
            &mut out,
            "leader kill → pending committed",
            &self.failover,
            "< 1.5 s after election",
            |f| {
                (
                    ms(f.committed),
                    format!(
                        "{} routes pending at SIGKILL; election seen {} after the kill; the new leader took the agents' sets: {}",
                        f.pending,
                        ms(f.election),
                        if f.sets.is_empty() {
                            "(not counted)".to_owned()
                        } else {
                            f.sets
                                .iter()
                                .map(|(what, n)| format!("{what} {n}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ),
                )
            },
        );
        if let Some(acceptance) = &self.acceptance {
            row(
                &mut out,
                "acceptance sequence at this size",
                acceptance,
                "0 failed requests",
                |a| {
                    (
                        format!("{} failed of {}", a.failed, a.sent),
                        format!(
                            "{}{} cutovers through 3 real proxies with the agents connected; apply → Ready p50 {}, max {}; {} WARN/ERROR lines of proxies and backends{}; one real proxy: RSS {} (peak {}) with {} routes, route table installed whole p50 {} ({} installs), updated p50 {} / max {} ({} installs)",
                            if a.first_failures.is_empty() {
                                String::new()
                            } else {
                                format!("first failures: {}; ", a.first_failures.join("; "))
                            },
                            a.cutovers,
                            ms(a.ready.p50),
                            ms(a.ready.max),
                            a.warnings,
                            a.first_warning
                                .as_ref()
                                .map(|w| format!(" (first: {w})"))
                                .unwrap_or_default(),
                            mib(a.real.rss),
                            mib(a.real.hwm),
                            a.real.routes,
                            ms(a.real.whole_tables.p50),
                            a.real.whole_tables.count,
                            ms(a.real.updates.p50),
                            ms(a.real.updates.max),
                            a.real.updates.count,
                        ),
                    )
                },
            );
        }
        for note in &self.notes {
            let _ = writeln!(out, "\n{note}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let l = Latencies::of(v.into_iter().rev().collect());
        assert_eq!(
            (l.p50, l.p99, l.max),
            (
                Duration::from_millis(50),
                Duration::from_millis(99),
                Duration::from_millis(100)
            )
        );
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }
}
