//! The coordinators under load: three started from the `switchyard` binary
//! on 127.0.0.1 with temporary data directories (plaintext, or mutual TLS
//! with a throwaway CA that also issues every agent its own certificate),
//! or given addresses of a cluster started elsewhere.
//!
//! Owns: starting, finding by address, killing one by PID (through the
//! harness, which never signals anything it did not spawn), and reading
//! what a started coordinator costs: CPU time and memory from `/proc`, the
//! size of its data directory, and its `/metrics`. Does not own: the gRPC
//! calls (`admin`, `agent`).

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard_harness::{Process, ProcessSpec, free_port, http_get};
use switchyard_tls::certs::{Authority, Validity, file_stem};
use switchyard_tls::{Identity, Security, Tls, TlsFiles};

/// How to reach the coordinators.
#[derive(Debug, Clone)]
pub enum ClusterSpec {
    /// Start three from this binary, with these extra coordinator flags.
    Start {
        /// The `switchyard` binary.
        binary: PathBuf,
        /// Mutual TLS instead of `--insecure`.
        tls: bool,
        /// Extra flags for every coordinator (`--max-message-bytes=...`).
        extra_args: Vec<String>,
        /// Their `RUST_LOG`: `warn` keeps what the harness holds in memory
        /// small; `info` says what the leader did (with `--keep-logs`).
        log_filter: String,
    },
    /// A cluster started elsewhere, plaintext (`HOST:PORT` each).
    Connect(Vec<String>),
}

/// One started coordinator.
pub struct Member {
    /// Its Raft id.
    pub id: u64,
    /// Its gRPC address.
    pub grpc: String,
    /// Its `/metrics` address.
    pub admin: String,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// The process.
    pub process: Process,
}

/// Certificates of a TLS run: the CA, kept to issue agents theirs.
struct Certificates {
    authority: Authority,
    dir: PathBuf,
}

/// The cluster under load.
pub struct Cluster {
    /// gRPC addresses, by Raft id order (id 1 first).
    pub addresses: Vec<String>,
    /// The started coordinators; empty for [`ClusterSpec::Connect`].
    pub members: Vec<Member>,
    certificates: Option<Certificates>,
    /// Holds data directories and certificates until the run ends.
    _work: Option<tempfile::TempDir>,
}

impl Cluster {
    /// Starts or connects as `spec` says. Started coordinators have
    /// printed their `LISTENING` line when this returns (a leader may not
    /// be elected yet: `admin::leader` waits for it).
    pub fn new(spec: &ClusterSpec) -> anyhow::Result<Cluster> {
        let (binary, tls, extra_args, log_filter) = match spec {
            ClusterSpec::Connect(addresses) => {
                return Ok(Cluster {
                    addresses: addresses.clone(),
                    members: Vec::new(),
                    certificates: None,
                    _work: None,
                });
            }
            ClusterSpec::Start {
                binary,
                tls,
                extra_args,
                log_filter,
            } => (binary, *tls, extra_args, log_filter),
        };
        if !binary.is_file() {
            bail!(
                "the switchyard binary {} does not exist (build it with `cargo build --release -p switchyard`, or pass --switchyard-bin)",
                binary.display()
            );
        }
        let work = tempfile::Builder::new()
            .prefix("switchyard-load.")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let certificates = if tls {
            let dir = work.path().join("certs");
            std::fs::create_dir_all(&dir)?;
            let authority = Authority::generate("switchyard-load CA", Validity::days(2))?;
            std::fs::write(dir.join("ca.pem"), authority.cert_pem())?;
            Some(Certificates { authority, dir })
        } else {
            None
        };
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let peers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(k, p)| format!("{}=127.0.0.1:{p}", k + 1))
            .collect();
        let mut members = Vec::new();
        for (k, port) in ports.iter().enumerate() {
            let id = k as u64 + 1;
            let data_dir = work.path().join(format!("c{id}"));
            let mut args: Vec<String> = vec![
                "coordinator".into(),
                format!("--id={id}"),
                format!("--listen=127.0.0.1:{port}"),
                format!("--peers={}", peers.join(",")),
                format!("--data-dir={}", data_dir.display()),
                "--admin-listen=127.0.0.1:0".into(),
            ];
            match &certificates {
                Some(c) => {
                    let (cert, key) = c.issue(&Identity::Coordinator(id))?;
                    args.push(format!("--ca={}", c.dir.join("ca.pem").display()));
                    args.push(format!("--cert={}", cert.display()));
                    args.push(format!("--key={}", key.display()));
                }
                None => args.push("--insecure".into()),
            }
            args.extend(extra_args.iter().cloned());
            let mut spec = ProcessSpec::new(format!("coordinator-{id}"), binary, args);
            // The harness keeps every line in memory.
            spec.env = vec![("RUST_LOG".into(), log_filter.clone())];
            spec.ready_timeout = Duration::from_secs(30);
            let process = Process::start(spec)?;
            members.push(Member {
                id,
                grpc: process.address("grpc")?,
                admin: process.address("admin")?,
                data_dir,
                process,
            });
        }
        Ok(Cluster {
            addresses: members.iter().map(|m| m.grpc.clone()).collect(),
            members,
            certificates,
            _work: Some(work),
        })
    }

    /// Whether this tool started the coordinators (so it can read their
    /// `/proc`, data directories and kill one).
    pub fn started(&self) -> bool {
        !self.members.is_empty()
    }

    /// The security a client with `identity` speaks: its own certificate
    /// under TLS, plaintext otherwise.
    pub fn security(&self, identity: &Identity) -> anyhow::Result<Security> {
        let Some(c) = &self.certificates else {
            return Ok(Security::Insecure);
        };
        let (cert, key) = c.issue(identity)?;
        let tls = Tls::load(TlsFiles {
            ca: c.dir.join("ca.pem"),
            cert,
            key,
        })
        .with_context(|| format!("cannot load the certificate of {identity}"))?;
        Ok(Security::Tls(tls))
    }

    /// The started member with gRPC address `address`.
    pub fn member(&self, address: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.grpc == address)
    }

    /// The started member with gRPC address `address`, to kill.
    pub fn member_mut(&mut self, address: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.grpc == address)
    }

    /// Every WARN or ERROR line the coordinators logged, but the one
    /// `--insecure` always gives (this tool asked for it).
    pub fn warnings(&self) -> Vec<String> {
        self.members
            .iter()
            .flat_map(|m| m.process.warnings())
            .filter(|line| !line.contains("--insecure"))
            .collect()
    }
}

impl Certificates {
    /// Issues `identity` a certificate and writes it beside the CA.
    fn issue(&self, identity: &Identity) -> anyhow::Result<(PathBuf, PathBuf)> {
        let issued = self.authority.issue(identity, Validity::days(2))?;
        Ok(issued.write(&self.dir, &file_stem(identity))?)
    }
}

/// What `/proc` says a process has cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcStats {
    /// utime + stime, seconds.
    pub cpu_seconds: f64,
    /// VmRSS, bytes.
    pub rss: u64,
    /// VmHWM (peak RSS), bytes.
    pub hwm: u64,
}

/// Reads `/proc/PID/stat` and `/proc/PID/status`.
pub fn proc_stats(pid: i32) -> anyhow::Result<ProcStats> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces), which ends
    // at the last ')': state is field 3, utime 14, stime 15.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("unexpected /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i - 3)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat has no field {i}"))
    };
    // USER_HZ, the unit of these fields, is 100 on every Linux ABI.
    let cpu_seconds = (ticks(14)? + ticks(15)?) as f64 / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Ok(ProcStats {
        cpu_seconds,
        rss: kib("VmRSS:"),
        hwm: kib("VmHWM:"),
    })
}

impl Member {
    /// Its `/proc` figures (zero when it is not running).
    pub fn stats(&self) -> ProcStats {
        self.process
            .pid()
            .and_then(|pid| proc_stats(pid).ok())
            .unwrap_or_default()
    }

    /// One gauge of its `/metrics` (the first sample of `name`), when it
    /// answers.
    pub fn metric(&self, name: &str) -> Option<f64> {
        metric(&self.admin, name)
    }
}

/// One sample of `name` from the `/metrics` at `admin`.
pub fn metric(admin: &str, name: &str) -> Option<f64> {
    metrics(admin)?.get(name).copied()
}

/// The `/metrics` at `admin`: the first sample of every metric, by name
/// (labels dropped).
pub fn metrics(admin: &str) -> Option<std::collections::BTreeMap<String, f64>> {
    let text = http_get(admin, "/metrics").ok()?;
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let key = key.split('{').next().unwrap_or(key);
        if let Ok(v) = value.parse::<f64>() {
            out.entry(key.to_string()).or_insert(v);
        }
    }
    Some(out)
}

/// [`metrics`] off the runtime's threads (it blocks on HTTP); empty when
/// they could not be read.
pub async fn scrape(admin: String) -> std::collections::BTreeMap<String, f64> {
    tokio::task::spawn_blocking(move || metrics(&admin).unwrap_or_default())
        .await
        .unwrap_or_default()
}

/// The series of counter family `family` at `admin`'s `/metrics`, by
/// their label values joined with spaces (`evidence digest taken`), the
/// ones at zero left out.
pub fn labelled(admin: &str, family: &str) -> Vec<(String, u64)> {
    let Ok(text) = http_get(admin, "/metrics") else {
        return Vec::new();
    };
    let prefix = format!("{family}{{");
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&prefix)?;
            let (labels, value) = rest.rsplit_once("} ")?;
            let value = value.trim().parse::<f64>().ok()? as u64;
            let values: Vec<&str> = labels
                .split(',')
                .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.trim_matches('"')))
                .collect();
            (value > 0).then(|| (values.join(" "), value))
        })
        .collect()
}

/// Bytes a directory tree occupies on disk (allocated blocks, as `du`).
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_spent_cpu_and_holds_memory() {
        let s = proc_stats(std::process::id() as i32).unwrap();
        assert!(s.rss > 0 && s.hwm >= s.rss, "{s:?}");
        assert!(s.cpu_seconds >= 0.0);
    }

    #[test]
    fn disk_usage_counts_files_below() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/f"), vec![1u8; 10_000]).unwrap();
        assert!(disk_usage(dir.path()) >= 10_000);
    }
}
