//! The log lines a test's own thread emits, for asserting that something
//! is *not* logged as a warning. The live tests run on tokio's
//! current-thread runtime, so the watcher and publisher tasks they spawn
//! log on the test's thread, where the subscriber is the default.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Captured lines, from [`Logs::capture`] until dropped.
pub struct Logs {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures everything at `DEBUG` and above from now on.
    pub fn capture() -> Logs {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .without_time()
            .with_writer(move || Sink(sink.clone()))
            .finish();
        Logs {
            buffer,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        let bytes = self.buffer.lock().expect("log buffer").clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Every WARN and ERROR line so far.
    pub fn warnings(&self) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with("WARN") || l.starts_with("ERROR")
            })
            .collect()
    }
}
