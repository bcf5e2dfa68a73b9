//! One child process under the harness's control.

use anyhow::{Context, bail};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to start a process; kept so it can be restarted identically.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Short name for logs (`coordinator-1`).
    pub name: String,
    /// Executable.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// How long to wait for the `LISTENING` line.
    pub ready_timeout: Duration,
}

impl ProcessSpec {
    /// A spec with a 20 s readiness timeout and `RUST_LOG=info`.
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>, args: Vec<String>) -> Self {
        ProcessSpec {
            name: name.into(),
            program: program.into(),
            args,
            env: vec![("RUST_LOG".into(), "info".into())],
            ready_timeout: Duration::from_secs(20),
        }
    }
}

/// A running (or stopped) child process.
pub struct Process {
    spec: ProcessSpec,
    child: Option<Child>,
    /// Bound addresses from the `LISTENING` line, by name.
    pub addresses: BTreeMap<String, String>,
    log: Arc<Mutex<Vec<String>>>,
}

/// Reserves a free loopback port for a peer list that must be known
/// before the processes start. The port comes from below the kernel's
/// ephemeral range ([`RESERVED_PORTS`]), never from a bind to port 0: a
/// port the kernel handed out and this function released can be given
/// again at once to any outgoing connection or `bind(0)` of the machine
/// (a test once failed on "Address already in use" that way), while
/// ports below the range are only ever taken on purpose. Within this
/// process successive calls never repeat a port (a counter from a random
/// start); each candidate is checked by binding it.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = u32::from(RESERVED_PORTS.end - RESERVED_PORTS.start);
    if NEXT.load(Ordering::Relaxed) == u32::MAX {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            ^ std::process::id().wrapping_mul(2_654_435_761);
        let _ = NEXT.compare_exchange(u32::MAX, seed % span, Ordering::Relaxed, Ordering::Relaxed);
    }
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        let port = RESERVED_PORTS.start + n as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    // Every reserved port taken: fall back to one the kernel picks.
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// Where [`free_port`] picks from: below Linux's default ephemeral range
/// (32768–60999), above the well-known and common service ports.
pub const RESERVED_PORTS: std::ops::Range<u16> = 12_000..32_000;

fn pump(
    reader: impl Read + Send + 'static,
    name: String,
    log: Arc<Mutex<Vec<String>>>,
    tx: Option<mpsc::Sender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if let Some(tx) = &tx {
                let _ = tx.send(line.clone());
            }
            if let Ok(mut log) = log.lock() {
                log.push(format!("[{name}] {line}"));
            }
        }
    });
}

impl Process {
    /// Starts the process and waits for its `LISTENING` line.
    pub fn start(spec: ProcessSpec) -> anyhow::Result<Process> {
        let mut p = Process {
            spec,
            child: None,
            addresses: BTreeMap::new(),
            log: Arc::new(Mutex::new(Vec::new())),
        };
        p.launch()?;
        Ok(p)
    }

    fn launch(&mut self) -> anyhow::Result<()> {
        let mut command = Command::new(&self.spec.program);
        command
            .args(&self.spec.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.spec.env {
            command.env(k, v);
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", self.spec.name))?;
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().context("no stdout")?;
        let stderr = child.stderr.take().context("no stderr")?;
        pump(stdout, self.spec.name.clone(), self.log.clone(), Some(tx));
        pump(stderr, self.spec.name.clone(), self.log.clone(), None);
        self.child = Some(child);
        let deadline = Instant::now() + self.spec.ready_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("LISTENING ") {
                        self.addresses = rest
                            .split_whitespace()
                            .filter_map(|pair| pair.split_once('='))
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect();
                        return Ok(());
                    }
                }
                Err(_) => {
                    let status = self
                        .child
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                    bail!(
                        "{} printed no LISTENING line within {:?} (exit status {status:?}); log:\n{}",
                        self.spec.name,
                        self.spec.ready_timeout,
                        self.log_text()
                    );
                }
            }
        }
    }

    /// The process's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The address bound under `name` in the `LISTENING` line.
    pub fn address(&self, name: &str) -> anyhow::Result<String> {
        self.addresses.get(name).cloned().with_context(|| {
            format!(
                "{} has no address named {name}: {:?}",
                self.spec.name, self.addresses
            )
        })
    }

    /// The PID while running.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Signals the child — a PID this harness spawned and has not reaped
    /// yet, so it cannot name an unrelated process. A child that already
    /// exited is not an error here (the next wait reaps it).
    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
        }
    }

    /// `SIGKILL` and reap.
    pub fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// `SIGTERM`, then wait up to `grace` for exit (`SIGKILL` after that).
    /// Returns the exit code when it exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> Option<i32> {
        self.signal(Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status.code();
            }
            if Instant::now() >= deadline {
                self.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Sends `SIGTERM` and returns at once (see [`Process::terminate`] to
    /// wait for the exit).
    pub fn ask_to_stop(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// `SIGSTOP`.
    pub fn pause(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// `SIGCONT`.
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    /// Starts it again with the same arguments (same data dir).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.log
            .lock()
            .map(|mut l| l.push(format!("[{}] --- restarted ---", self.spec.name)))
            .ok();
        self.launch()
    }

    /// Whether the process is running (not exited).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Everything it printed so far.
    /// The log so far, line by line, each prefixed with `[name]`.
    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Every WARN or ERROR line the process has logged (tracing's text
    /// format; colour codes are ignored), with the process's name. A clean
    /// run has none.
    pub fn warnings(&self) -> Vec<String> {
        self.log_lines()
            .into_iter()
            .filter(|line| is_warning(line))
            .collect()
    }

    /// The whole log, one line per line.
    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("===== log of {} =====\n{}", self.spec.name, self.log_text());
        }
        self.kill();
    }
}

/// A plain HTTP/1.1 GET to `address` (`HOST:PORT`), returning the body; for
/// reading a process's `/metrics` in tests.
pub fn http_get(address: &str, path: &str) -> anyhow::Result<String> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default())
}

/// Whether a tracing text line is at WARN or ERROR level: the level is the
/// second field (after the timestamp), possibly wrapped in ANSI colour.
pub fn is_warning(line: &str) -> bool {
    let plain = strip_ansi(line);
    plain
        .split_whitespace()
        .take(3)
        .any(|word| word == "WARN" || word == "ERROR")
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_found_with_or_without_colour() {
        assert!(is_warning(
            "[proxy-a] 2026-12-03T10:00:00.1Z  WARN switchyard_proxy::control: x"
        ));
        assert!(is_warning(
            "[c-1] \u{1b}[2m2026-12-03T10:00:00Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m y"
        ));
        assert!(!is_warning(
            "[c-1] 2026-12-03T10:00:00Z  INFO switchyard: a WARN inside a message"
        ));
        assert!(!is_warning("[c-1] LISTENING grpc=127.0.0.1:1"));
    }

    #[test]
    fn free_ports_come_from_below_the_ephemeral_range_and_never_repeat() {
        let ports: Vec<u16> = (0..50).map(|_| super::free_port()).collect();
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for port in ports {
            assert!(super::RESERVED_PORTS.contains(&port), "{port}");
            std::net::TcpListener::bind(("127.0.0.1", port)).expect("still free");
        }
    }
}
