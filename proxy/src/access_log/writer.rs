//! The access log's writer thread: takes lines off the queue, writes them
//! through a buffer, flushes on a timer, on request and at the end.
//!
//! Not here: dropping lines when the queue is full (the sending side,
//! [`super::AccessLog::send`]), what a line says (`record`).

use prometheus_client::metrics::counter::Counter;
use std::io::{self, BufWriter, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tracing::warn;

/// Longest a written line waits in the buffer before it is flushed.
pub(super) const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// What the queue carries.
#[derive(Debug)]
pub(super) enum Message {
    /// One line, newline included.
    Line(String),
    /// Flush what was written so far, then say so.
    Flush(oneshot::Sender<()>),
}

/// How a writer is set up.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// Lines the queue holds.
    pub queue: usize,
    /// Bytes buffered before a write reaches the output.
    pub buffer: usize,
    /// The output, for the log line about failed writes.
    pub target: String,
}

/// Writes what `lines` brings to `out` until every sender is gone, then
/// flushes and returns. Runs on its own thread: writes block.
pub(super) fn run(
    lines: Receiver<Message>,
    out: Box<dyn Write + Send>,
    settings: &Settings,
    write_errors: &Counter,
) {
    let mut out = Output {
        out: BufWriter::with_capacity(settings.buffer, out),
        target: &settings.target,
        write_errors,
        warned: false,
    };
    // When the oldest line not flushed yet was written.
    let mut unflushed_since: Option<Instant> = None;
    loop {
        let message = match unflushed_since {
            None => match lines.recv() {
                Ok(message) => message,
                Err(_) => break,
            },
            Some(since) => match lines.recv_timeout(FLUSH_EVERY.saturating_sub(since.elapsed())) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => {
                    out.flush();
                    unflushed_since = None;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            },
        };
        match message {
            Message::Line(line) => {
                out.write(line.as_bytes());
                let since = *unflushed_since.get_or_insert_with(Instant::now);
                // A steady stream of lines never lets `recv_timeout` time
                // out: flush on schedule anyway.
                if since.elapsed() >= FLUSH_EVERY {
                    out.flush();
                    unflushed_since = None;
                }
            }
            Message::Flush(ack) => {
                out.flush();
                unflushed_since = None;
                let _ = ack.send(());
            }
        }
    }
    out.flush();
}

/// The buffered output and what it does when writing fails.
struct Output<'a> {
    out: BufWriter<Box<dyn Write + Send>>,
    target: &'a str,
    write_errors: &'a Counter,
    /// A failure was logged already: one WARN per writer, not per line.
    warned: bool,
}

impl Output<'_> {
    fn write(&mut self, bytes: &[u8]) {
        if let Err(error) = self.out.write_all(bytes) {
            self.failed(&error);
        }
    }

    fn flush(&mut self) {
        if let Err(error) = self.out.flush() {
            self.failed(&error);
        }
    }

    /// Counts a failed write. The buffer keeps what it could not write (a
    /// full buffer refuses new lines, which are lost) and tries again on
    /// the next write or flush, so the log resumes once the output takes
    /// bytes again.
    fn failed(&mut self, error: &io::Error) {
        self.write_errors.inc();
        if !self.warned {
            self.warned = true;
            warn!(
                output = self.target,
                %error,
                "access log write failed; lines are lost while writes fail \
                 (counted in switchyard_proxy_access_log_write_errors_total), requests are still served"
            );
        }
    }
}
