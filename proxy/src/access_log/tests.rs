//! The writer on its own: a full queue drops lines without waiting, a
//! flush writes everything queued, failed writes are counted and warned
//! about once; and the pieces of a line.

use super::record::{refused_line, rfc3339};
use super::writer::{self, Message};
use super::*;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchyard_proto::model::ObjectName;

const WAIT: Duration = Duration::from_secs(5);

fn settings(queue: usize) -> writer::Settings {
    writer::Settings {
        queue,
        // Every line goes straight to the output: the tests see each
        // write.
        buffer: 1,
        target: "test".to_owned(),
    }
}

/// An output that says when a write starts, and blocks it until opened.
struct Gate {
    entered: SyncSender<()>,
    open: Arc<(Mutex<bool>, Condvar)>,
    written: Arc<Mutex<Vec<u8>>>,
}

impl Write for Gate {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let _ = self.entered.try_send(());
        let (open, opened) = &*self.open;
        let mut open = open.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
        self.written.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_full_queue_drops_lines_and_never_waits() {
    const QUEUE: usize = 4;
    let (entered_tx, entered) = std::sync::mpsc::sync_channel(QUEUE * 4);
    let open = Arc::new((Mutex::new(false), Condvar::new()));
    let written = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate {
        entered: entered_tx,
        open: Arc::clone(&open),
        written: Arc::clone(&written),
    };
    let dropped = Counter::default();
    let log = AccessLog::start(
        Box::new(gate),
        settings(QUEUE),
        dropped.clone(),
        Counter::default(),
    )
    .unwrap();

    // The writer takes line 0 and blocks writing it: the queue is empty.
    log.send("line 0\n".to_owned());
    entered
        .recv_timeout(WAIT)
        .expect("the writer started writing");
    // The queue takes QUEUE more lines; the next ten are dropped, and no
    // `send` waits for the blocked writer.
    let started = std::time::Instant::now();
    for i in 1..=QUEUE + 10 {
        log.send(format!("line {i}\n"));
    }
    assert!(started.elapsed() < Duration::from_secs(1), "send waited");
    assert_eq!(dropped.get(), 10);

    // Once the output takes bytes again, everything queued is written.
    *open.0.lock().unwrap() = true;
    open.1.notify_all();
    assert!(log.flush(WAIT).await, "flushed");
    let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
    let expected: String = (0..=QUEUE).map(|i| format!("line {i}\n")).collect();
    assert_eq!(text, expected);
    assert_eq!(dropped.get(), 10);
}

/// An output that collects what it is given.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<u8>>>);

impl Write for Collect {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_flush_writes_every_line_queued_before_it() {
    let out = Collect::default();
    let log = AccessLog::start(
        Box::new(out.clone()),
        writer::Settings {
            queue: 64,
            buffer: 64 * 1024,
            target: "test".to_owned(),
        },
        Counter::default(),
        Counter::default(),
    )
    .unwrap();
    for i in 0..50 {
        log.send(format!("{i}\n"));
    }
    // Buffered: a second's flush timer has not run yet.
    assert!(log.flush(WAIT).await);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.lines().count(), 50);
}

/// An output whose every write fails, as a closed pipe's would.
struct Broken;

impl Write for Broken {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed pipe"))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn failed_writes_are_counted_and_warned_about_once() {
    let logs = Arc::new(Mutex::new(Vec::new()));
    let sink = Collect(Arc::clone(&logs));
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .without_time()
        .with_writer(move || sink.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (queue, lines): (SyncSender<Message>, Receiver<Message>) = std::sync::mpsc::sync_channel(8);
    for i in 0..3 {
        queue.send(Message::Line(format!("{i}\n"))).unwrap();
    }
    drop(queue);
    let errors = Counter::default();
    // On this thread, so that its log lines are captured; it returns once
    // the queue is empty and closed.
    writer::run(lines, Box::new(Broken), &settings(8), &errors);
    assert_eq!(errors.get(), 3);
    let text = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let warnings: Vec<_> = text.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("closed pipe"), "{text}");
}

#[test]
fn timestamps_are_rfc3339_utc_to_the_microsecond() {
    let at = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
    assert_eq!(rfc3339(at), "2023-11-14T22:13:20.123456Z");
    assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
    assert_eq!(rfc3339(SystemTime::now()).len(), 27);
}

#[test]
fn a_refused_head_has_null_request_fields() {
    let key = ListenerKey {
        gateway: Some(ObjectName::new("web", "gw")),
        port: 80,
    };
    let client: SocketAddr = "10.0.0.7:5000".parse().unwrap();
    let line = refused_line(
        &key,
        Some(client),
        http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        &"message head is too large",
    );
    assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["listener"], "web/gw:80");
    assert_eq!(v["client"], "10.0.0.7:5000");
    assert_eq!(v["status"], 431);
    assert!(v["method"].is_null() && v["route"].is_null() && v["duration_ms"].is_null());
    assert_eq!(v["error"]["kind"], "head_too_large");
    assert_eq!(v["error"]["blame"], "downstream");
}

#[test]
fn targets_parse() {
    assert_eq!(AccessLogTarget::parse("-"), Ok(AccessLogTarget::Stdout));
    assert_eq!(
        AccessLogTarget::parse("/var/log/a.json"),
        Ok(AccessLogTarget::File(PathBuf::from("/var/log/a.json")))
    );
    assert!(AccessLogTarget::parse("").is_err());
}
