//! `pull` (issue 15): pull delivery through Event Grid's namespace API. A namespace topic
//! with one queue-mode subscription; `--events` 1 KB CloudEvents published beforehand
//! through `:publish` (100 per request); then `--consumers` consumers each loop
//! `:receive` (`maxEvents=100`) → `:acknowledge` of every token until the queue is
//! drained, every event counted as acknowledged exactly once. Against the raw Redis
//! ceiling measured on the same Redis in the same run ([`crate::stream_ceiling`]). Then
//! the receive latency of a waiting consumer: one `:receive` waiting on the empty queue,
//! one event published, the time from the publish's `200` to the receive's `200`.

use super::{Rows, Scenario};
use crate::args::Flags;
use crate::ceiling::Fsync;
use crate::cpu::Processes;
use crate::ctx::Ctx;
use crate::histogram::Histogram;
use crate::launcher::{Launcher, Role, Tier, Transport};
use crate::pull_api::{PullApi, cloud_event, cloud_event_batch};
use crate::report::{Row, thousands};
use crate::stream_ceiling;
use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SCENARIO: Scenario = Scenario {
    name: "pull",
    summary: "9: pull delivery: receive(100) + acknowledge events/s, and a waiting receive's latency",
    usage: USAGE,
    run,
};

const USAGE: &str = "\
eg-bench pull: a namespace topic with one queue-mode subscription. Events published
beforehand (:publish, 100 per request) are drained by consumers looping receive
(maxEvents=100) → acknowledge; then the latency of a receive waiting on the empty queue
for one publish. The raw Redis stream ceiling (XREADGROUP COUNT 100 + XACK + XDEL, as
many clients as consumers) is measured on the same Redis.

usage: eg-bench pull [options]

  --events N             events to publish and drain (default 200000; quick 10000)
  --consumers N          consumers (and ceiling clients) at once (default 4)
  --samples N            waiting receives timed (default 200; quick 30)

";

const TOPIC: &str = "benchpull";
const SUBSCRIPTION: &str = "consumers";
const EVENT_BYTES: usize = 1024;
const BATCH: u64 = 100;
/// Concurrent publish requests while filling the queue (not measured).
const PUBLISHERS: u64 = 8;
/// A drain that acknowledges nothing for this long has stalled.
const STALL: Duration = Duration::from_secs(30);
/// Time for a waiting receive to reach eg and start waiting before the publish.
const SETTLE: Duration = Duration::from_millis(50);

fn run(ctx: &mut Ctx, mut flags: Flags) -> Rows<'_> {
    Box::pin(async move {
        let events: u64 = flags.number("events", ctx.sized(200_000, 10_000))?;
        let consumers: usize = flags.number("consumers", 4)?;
        let samples: u64 = flags.number("samples", ctx.sized(200, 30))?;
        flags.finish()?;
        if events == 0 || consumers == 0 || samples == 0 {
            bail!("--events, --consumers and --samples must be at least 1");
        }
        let d = PullDeployment::start(ctx).await?;

        eprintln!("pull: publishing {events} events …");
        let published_in = prepublish(&d.api, events).await?;
        eprintln!("pull: draining with {consumers} consumers …");
        let processes = d.processes();
        let before = processes.sample();
        let drained = drain(&d.api, events, consumers).await?;
        let cpu = processes.sample().since(&before);
        let rate = events as f64 / drained.seconds;
        eprintln!("pull: {} events/s; the raw Redis stream ceiling …", thousands(rate));

        let clients = redis_connections(consumers, &d.launcher).await?;
        let ceiling =
            stream_ceiling::read_ack_delete(d.launcher.redis().await?, clients, events, &cloud_event(0, EVENT_BYTES))
                .await?;
        eprintln!("pull: ceiling {} events/s; waiting receives …", thousands(ceiling));

        let waits = waiting_receives(&d.api, samples).await?;
        let latency = waits.after_publish.latency();
        let sent = waits.after_send.latency();
        d.finish(ctx.keep);

        let mut throughput = Row::new("9 pull", format!("receive 100 + acknowledge, {consumers} consumers"));
        throughput.rate = Some((rate, "events/s"));
        throughput.ceiling = Some((
            format!("XREADGROUP COUNT 100 + XACK + XDEL, {consumers} clients, same Redis, same run"),
            ceiling,
        ));
        throughput.cpu = Some((cpu, drained.seconds));
        throughput.counted = Some(events as f64);
        throughput.figures.push((
            "acknowledged".into(),
            format!(
                "{} of {} published, each exactly once ({} receives, {} empty)",
                thousands(events as f64),
                thousands(events as f64),
                thousands(drained.receives as f64),
                drained.empty_receives
            ),
        ));
        throughput.figures.push((
            "publishing them beforehand (:publish, 100 per request, 8 at once)".into(),
            format!("{} events/s", thousands(events as f64 / published_in)),
        ));
        throughput.notes.extend(notes(events));
        throughput.details = json!({
            "events": events, "consumers": consumers, "seconds": drained.seconds,
            "receives": drained.receives, "emptyReceives": drained.empty_receives,
            "ceilingEventsPerSecond": ceiling.round(),
        });

        let mut waiting = Row::new("9 pull", "receive latency, a waiting consumer");
        waiting.latency_label = Some("publish's 200 → the waiting receive's 200");
        waiting.latency = Some(latency);
        waiting.figures.push((
            "publish's 200 → waiting receive's 200".into(),
            format!(
                "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} receives",
                latency.p50_ms, latency.p90_ms, latency.p99_ms, latency.max_ms, latency.count
            ),
        ));
        waiting.figures.push((
            "publish sent → waiting receive's 200".into(),
            format!(
                "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                sent.p50_ms, sent.p90_ms, sent.p99_ms, sent.max_ms
            ),
        ));
        waiting.figures.push((
            "receive answered before the publish's 200 (counted as 0)".into(),
            format!("{} of {samples}", waits.answered_first),
        ));
        waiting.notes.push(format!(
            "one receive (maxEvents=1, maxWaitTime=60) on the empty queue, {} ms later one event published; acknowledged before the next",
            SETTLE.as_millis()
        ));
        waiting.details = json!({
            "publishToReceive": latency.to_json(), "sendToReceive": sent.to_json(),
            "answeredBeforePublish": waits.answered_first,
        });
        eprintln!(
            "pull: waiting receive p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
            latency.p50_ms, latency.p90_ms, latency.p99_ms
        );
        Ok(vec![throughput, waiting])
    })
}

fn notes(events: u64) -> Vec<String> {
    vec![
        "appendfsync everysec".into(),
        format!(
            "{} 1 KB CloudEvents published beforehand; the rate is from the first receive to the last acknowledgement",
            thousands(events as f64)
        ),
        "queue subscription: receiveLockDurationInSeconds 60, maxDeliveryCount 10; receive maxWaitTime 10".into(),
        "eg-ingress and eg-scheduler run (no sender: a queue subscription is not pushed)".into(),
    ]
}

/// One connection per ceiling client.
async fn redis_connections(n: usize, launcher: &Launcher) -> anyhow::Result<Vec<redis::aio::MultiplexedConnection>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(launcher.redis().await?);
    }
    Ok(out)
}

/// Redis, eg-ingress and eg-scheduler, a namespace topic and its queue subscription.
struct PullDeployment {
    ingress: Tier,
    scheduler: Tier,
    api: PullApi,
    /// Declared last: dropped (Redis stopped) after the tiers.
    launcher: Launcher,
}

impl PullDeployment {
    async fn start(ctx: &Ctx) -> anyhow::Result<Self> {
        let launcher = Launcher::new(ctx.bin_dir.clone(), Fsync::EverySec, Transport::UnixSocket, &[])?;
        let ingress = launcher.start(Role::Ingress, "ingress", &[]).await?;
        let topic = json!({"properties": {
            "publisherType": "Custom", "inputSchema": "CloudEventSchemaV1_0", "eventRetentionInDays": 1,
        }});
        launcher
            .admin(&ingress, Method::PUT, &format!("/topics/{TOPIC}"), Some(&topic))
            .await?;
        let keys = launcher
            .admin(&ingress, Method::POST, &format!("/topics/{TOPIC}/listKeys"), None)
            .await?;
        let key = keys["key1"].as_str().context("no key1 in listKeys")?.to_owned();
        let subscription = json!({"properties": {
            "deliveryConfiguration": {"deliveryMode": "Queue", "queue": {
                "receiveLockDurationInSeconds": 60, "maxDeliveryCount": 10, "eventTimeToLive": "P1D",
            }},
            "eventDeliverySchema": "CloudEventSchemaV1_0",
        }});
        launcher
            .admin(
                &ingress,
                Method::PUT,
                &format!("/topics/{TOPIC}/eventSubscriptions/{SUBSCRIPTION}"),
                Some(&subscription),
            )
            .await?;
        let scheduler = launcher.start(Role::Scheduler, "scheduler", &[]).await?;
        let api = PullApi::new(launcher.http().clone(), &ingress.url, TOPIC, SUBSCRIPTION, &key);
        Ok(Self {
            ingress,
            scheduler,
            api,
            launcher,
        })
    }

    fn processes(&self) -> Processes {
        let mut p = Processes::default();
        p.add("ingress", self.ingress.pid());
        p.add("scheduler", self.scheduler.pid());
        if let Some(pid) = self.launcher.redis_pid() {
            p.add("redis", pid);
        }
        p.add("bench", std::process::id());
        p
    }

    fn finish(self, keep: bool) {
        let Self {
            ingress,
            scheduler,
            launcher,
            ..
        } = self;
        drop((ingress, scheduler));
        if keep {
            eprintln!("logs kept in {}", launcher.keep_run_dir().display());
        }
    }
}

/// Publishes `events` events, 100 per request, several requests at once; the seconds taken.
async fn prepublish(api: &PullApi, events: u64) -> anyhow::Result<f64> {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..PUBLISHERS)
        .map(|_| {
            let (api, next) = (api.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let first = next.fetch_add(BATCH, Ordering::Relaxed);
                    if first >= events {
                        return anyhow::Ok(());
                    }
                    let count = BATCH.min(events - first);
                    api.publish(cloud_event_batch(first, count, EVENT_BYTES)).await?;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

struct Drained {
    seconds: f64,
    receives: u64,
    empty_receives: u64,
}

/// `consumers` consumers loop receive(100) → acknowledge until `events` are acknowledged;
/// fails unless every event `bench-0…` was acknowledged exactly once.
async fn drain(api: &PullApi, events: u64, consumers: usize) -> anyhow::Result<Drained> {
    let acknowledged = Arc::new(AtomicU64::new(0));
    let receives = Arc::new(AtomicU64::new(0));
    let empty = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    // Per consumer, so a consumer stopped while waiting in a receive keeps its ids.
    let ids: Vec<Arc<Mutex<Vec<String>>>> = (0..consumers).map(|_| Arc::default()).collect();
    let started = Instant::now();
    let tasks: Vec<_> = ids
        .iter()
        .map(|ids| {
            let (api, ids) = (api.clone(), ids.clone());
            let (acknowledged, receives, empty, failed) =
                (acknowledged.clone(), receives.clone(), empty.clone(), failed.clone());
            tokio::spawn(async move {
                while acknowledged.load(Ordering::Relaxed) < events {
                    let received = api.receive(BATCH as u32, 10).await?;
                    receives.fetch_add(1, Ordering::Relaxed);
                    if received.is_empty() {
                        empty.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let (succeeded, failures) = api.acknowledge(&received).await?;
                    failed.fetch_add(failures as u64, Ordering::Relaxed);
                    let n = succeeded.len() as u64;
                    ids.lock()
                        .map_err(|_| anyhow::anyhow!("a consumer panicked"))?
                        .extend(succeeded);
                    acknowledged.fetch_add(n, Ordering::Relaxed);
                }
                anyhow::Ok(())
            })
        })
        .collect();

    // Done when every event is acknowledged: the other consumers may be waiting in a
    // receive on the empty queue by then, and are stopped.
    let (mut last, mut moved) = (0, Instant::now());
    loop {
        let now = acknowledged.load(Ordering::Relaxed);
        if now >= events || tasks.iter().all(|t| t.is_finished()) {
            break;
        }
        if now != last {
            (last, moved) = (now, Instant::now());
        } else if moved.elapsed() > STALL {
            bail!(
                "the drain stalled: {now} of {events} acknowledged, nothing for {} s",
                STALL.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    for task in tasks {
        if task.is_finished() {
            task.await??;
        } else {
            task.abort();
        }
    }

    let mut seen = HashSet::new();
    let mut duplicates = 0u64;
    for list in &ids {
        let list = list.lock().map_err(|_| anyhow::anyhow!("a consumer panicked"))?;
        for id in list.iter() {
            if !seen.insert(id.clone()) {
                duplicates += 1;
            }
        }
    }
    let expected: HashSet<String> = (0..events).map(|n| format!("bench-{n:010}")).collect();
    let missing = expected.difference(&seen).count();
    let unknown = seen.difference(&expected).count();
    let failed = failed.load(Ordering::Relaxed);
    if missing + unknown > 0 || duplicates > 0 || failed > 0 {
        bail!(
            "not every event was acknowledged exactly once: {missing} missing, {duplicates} acknowledged twice, {unknown} not published, {failed} tokens failed"
        );
    }
    Ok(Drained {
        seconds,
        receives: receives.load(Ordering::Relaxed),
        empty_receives: empty.load(Ordering::Relaxed),
    })
}

struct Waits {
    /// The publish's `200` → the receive's `200`.
    after_publish: Histogram,
    /// The publish sent → the receive's `200`.
    after_send: Histogram,
    /// Receives answered before the publish's answer came back.
    answered_first: u64,
}

/// `samples` times: a receive waits on the empty queue, one event is published, the
/// receive's answer is timed from the publish's; the event is then acknowledged.
async fn waiting_receives(api: &PullApi, samples: u64) -> anyhow::Result<Waits> {
    let mut waits = Waits {
        after_publish: Histogram::default(),
        after_send: Histogram::default(),
        answered_first: 0,
    };
    for n in 0..samples {
        let waiter = {
            let api = api.clone();
            tokio::spawn(async move {
                let received = api.receive(1, 60).await?;
                anyhow::Ok((Instant::now(), received))
            })
        };
        tokio::time::sleep(SETTLE).await;
        let sent = Instant::now();
        api.publish(cloud_event_batch(1_000_000_000 + n, 1, EVENT_BYTES))
            .await?;
        let published = Instant::now();
        let (answered, received) = waiter.await??;
        if received.len() != 1 {
            bail!("a waiting receive got {} events for one publish", received.len());
        }
        let (succeeded, _) = api.acknowledge(&received).await?;
        if succeeded.len() != 1 {
            bail!("the waiting receive's event could not be acknowledged");
        }
        if answered < published {
            waits.answered_first += 1;
        }
        waits
            .after_publish
            .record(answered.saturating_duration_since(published).as_micros() as u64);
        waits
            .after_send
            .record(answered.saturating_duration_since(sent).as_micros() as u64);
    }
    Ok(waits)
}
