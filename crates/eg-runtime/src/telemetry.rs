//! Sets up `tracing` once per process: text or JSON lines on stderr, and OpenTelemetry
//! trace export when the `OTEL_*` variables ask for it ([`crate::traces`]).
//!
//! A log write must never hold up the process, least of all its shutdown. Stderr may be
//! a pipe whose reader stopped reading (once the pipe is full, a write blocks until it
//! reads again) or exited (a write fails with `EPIPE`; Rust ignores `SIGPIPE`, so that is
//! an error, not a signal). So the code that logs only queues the line; a thread of its
//! own writes the queue to stderr. When the queue is full the line is dropped, and once
//! the writer catches up it logs how many were. Write errors are ignored: there is
//! nowhere left to report them.

use crate::settings::LogSection;
use crate::traces;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Lines waiting for the writer thread; past this many, a new line is dropped.
const QUEUED_LINES: usize = 8192;

/// How long [`flush`] waits for the lines queued before it to be written.
const FLUSH_TIMEOUT: Duration = Duration::from_millis(500);

/// The queue to the writer thread, for [`flush`].
static QUEUE: OnceLock<SyncSender<Message>> = OnceLock::new();

/// Sets up logging, and trace export as the `OTEL_*` variables ask (exported as `tier`
/// unless they name the service); the lines logged are written out (within
/// [`FLUSH_TIMEOUT`]) and the last spans sent when the returned guard is dropped, so
/// keep it until the process ends. Call inside the tokio runtime. Fails only on `OTEL_*`
/// settings eg cannot honour.
pub fn init(log: &LogSection, tier: &str) -> Result<LogFlush, traces::ExportError> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let export = traces::export_from(|name| std::env::var(name).ok())?;
    let provider = traces::provider(&export, tier)?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.level));
    let writer = LossyStderr::start();
    let queue = writer.queue.clone();
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        // Colours only for a person at a terminal: log files and collectors get plain text.
        .with_ansi(std::io::stderr().is_terminal());
    // The log's level filters the log alone: trace spans are exported whatever it is.
    let lines = if log.format == "json" {
        lines.json().flatten_event(true).with_filter(filter).boxed()
    } else {
        lines.with_filter(filter).boxed()
    };
    let result = tracing_subscriber::registry()
        .with(lines)
        .with(provider.as_ref().map(traces::layer))
        .try_init();
    match result {
        Ok(()) => {
            let _ = QUEUE.set(queue);
        }
        Err(e) => eprintln!("logging was already set up: {e}"),
    }
    if let traces::Export::OtlpHttp { .. } = export {
        tracing::info!("exporting traces over OTLP/HTTP (OTEL_* variables)");
    }
    Ok(LogFlush)
}

/// Writes out the lines logged so far, waiting at most [`FLUSH_TIMEOUT`]: before the
/// process exits, without letting a stderr nobody reads hold it.
pub fn flush() {
    let Some(queue) = QUEUE.get() else { return };
    let deadline = Instant::now() + FLUSH_TIMEOUT;
    let (done, written) = mpsc::sync_channel(1);
    let mut message = Message::Flush(done);
    loop {
        match queue.try_send(message) {
            Ok(()) => break,
            Err(TrySendError::Full(again)) if Instant::now() < deadline => {
                message = again;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => return,
        }
    }
    let _ = written.recv_timeout(deadline.saturating_duration_since(Instant::now()));
}

/// Flushes the log when dropped (see [`init`]).
#[must_use = "the log is flushed when this is dropped: keep it until the process ends"]
pub struct LogFlush;

impl Drop for LogFlush {
    fn drop(&mut self) {
        traces::shutdown();
        flush();
    }
}

enum Message {
    Line(Vec<u8>),
    /// Answered once every line queued before it is written.
    Flush(SyncSender<()>),
}

/// The subscriber's writer: queues each line for the writer thread, or drops it.
struct LossyStderr {
    queue: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

impl LossyStderr {
    fn start() -> Self {
        let (queue, lines) = mpsc::sync_channel(QUEUED_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = dropped.clone();
        let spawned = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || write_lines(&lines, &counted));
        if let Err(e) = spawned {
            // Without a writer every line is dropped: say so the one way left.
            eprintln!("cannot start the log writer thread: {e}");
        }
        Self { queue, dropped }
    }
}

impl<'a> MakeWriter<'a> for LossyStderr {
    type Writer = &'a LossyStderr;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

impl Write for &LossyStderr {
    /// The subscriber writes each event as one line in one call.
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        if self.queue.try_send(Message::Line(line.to_vec())).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The writer thread: writes each queued line to stderr (unbuffered), until the process
/// ends. It may block on a full pipe; only this thread waits then.
fn write_lines(lines: &Receiver<Message>, dropped: &AtomicU64) {
    let mut stderr = std::io::stderr();
    for message in lines {
        match message {
            Message::Line(line) => {
                let _ = stderr.write_all(&line);
                let lost = dropped.swap(0, Ordering::Relaxed);
                if lost > 0 {
                    // Queued like any line, so it comes out in the log's format.
                    tracing::warn!(dropped = lost, "log lines dropped: stderr was not read fast enough");
                }
            }
            Message::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_lines_instead_of_blocking() {
        let (queue, lines) = mpsc::sync_channel(2);
        let writer = LossyStderr {
            queue,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        for n in 0..5 {
            let written = (&writer).write(format!("line {n}\n").as_bytes());
            assert_eq!(written.ok(), Some(7), "a line counts as written, queued or not");
        }
        assert_eq!(writer.dropped.load(Ordering::Relaxed), 3);
        let queued: Vec<Vec<u8>> = lines
            .try_iter()
            .filter_map(|m| match m {
                Message::Line(line) => Some(line),
                Message::Flush(_) => None,
            })
            .collect();
        assert_eq!(queued, [b"line 0\n".to_vec(), b"line 1\n".to_vec()]);
    }
}
