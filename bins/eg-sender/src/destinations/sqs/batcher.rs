//! One queue's batcher: SQS takes up to 10 messages in one `SendMessageBatch`, and an
//! SQS attempt carries one event, so the attempts in flight to the same queue are
//! gathered here into shared requests. Each attempt hands in its message and waits for
//! its own answer; the batcher sends when 10 are waiting, when the next message would
//! take the request over SQS's 1 MiB, or [`LINGER`] after the first one came, whichever
//! is first. Requests are sent from tasks of their own, so the next batch gathers while
//! one is in flight.
//!
//! The batcher is a task per queue, started on the queue's first attempt; it lives as
//! long as its queue's entry in the client (the process). It holds no lock while
//! sending.

use super::outcome::Answer;
use super::request::{Entry, Queue};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long the first message waits for others. Short: an idle queue's attempt costs at
/// most this much more; a busy one fills its 10 entries sooner.
pub const LINGER: Duration = Duration::from_millis(2);

/// SQS's most entries in one request.
pub const MAX_ENTRIES: usize = 10;

/// SQS's most bytes of messages in one request (the sum of their sizes).
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// A message waiting for its request, and where its answer goes.
pub struct Waiting {
    pub entry: Entry,
    pub answer: oneshot::Sender<Answer>,
}

/// Where attempts hand in their messages for one queue.
#[derive(Clone)]
pub struct Batcher {
    waiting: mpsc::UnboundedSender<Waiting>,
}

impl Batcher {
    /// Starts the batcher of `queue` (on the current tokio runtime).
    pub fn start(queue: Arc<Queue>) -> Self {
        let (waiting, incoming) = mpsc::unbounded_channel();
        tokio::spawn(gather(queue, incoming));
        Self { waiting }
    }

    /// Sends `entry` in the next request to the queue and waits for its answer.
    pub async fn send(&self, entry: Entry) -> Answer {
        let (answer, answered) = oneshot::channel();
        if self.waiting.send(Waiting { entry, answer }).is_err() {
            return Answer::gone();
        }
        answered.await.unwrap_or_else(|_| Answer::gone())
    }
}

/// Gathers waiting messages into requests until every [`Batcher`] of the queue is gone.
async fn gather(queue: Arc<Queue>, mut incoming: mpsc::UnboundedReceiver<Waiting>) {
    let mut carried: Option<Waiting> = None;
    loop {
        let first = match carried.take() {
            Some(first) => first,
            None => match incoming.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let mut bytes = first.entry.size;
        let mut batch = vec![first];
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        while batch.len() < MAX_ENTRIES {
            tokio::select! {
                () = &mut linger => break,
                next = incoming.recv() => match next {
                    Some(next) if bytes + next.entry.size <= MAX_REQUEST_BYTES => {
                        bytes += next.entry.size;
                        batch.push(next);
                    }
                    // Too big to join: it opens the next request.
                    Some(next) => {
                        carried = Some(next);
                        break;
                    }
                    None => break,
                },
            }
        }
        tokio::spawn(answer_all(Arc::clone(&queue), batch));
    }
}

/// Sends one request and hands each waiting attempt its own entry's answer.
async fn answer_all(queue: Arc<Queue>, batch: Vec<Waiting>) {
    let (entries, answers): (Vec<Entry>, Vec<oneshot::Sender<Answer>>) =
        batch.into_iter().map(|w| (w.entry, w.answer)).unzip();
    let answered = queue.send_batch(&entries).await;
    for (answer, told) in answers.into_iter().zip(answered) {
        // An attempt that timed out no longer listens; its event is retried.
        let _ = answer.send(told);
    }
}
