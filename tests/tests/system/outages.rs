//! Outages and restarts: Redis down, Redis hanging, Redis back without its consumer
//! groups or without any data, and each tier stopped with SIGTERM (also with a log pipe
//! nobody reads). Publishers get a prompt `503` and never hang; every tier keeps running
//! and resumes on its own; nothing acknowledged is lost.

use eg_system_tests::{
    Behaviour, DEADLINE, Options, Receiver, Reply, System, TierId, dead_letter_to, eventually, numbered_events,
    subscription, tally, text_reply,
};
use eg_testkit::tier::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

/// A publish during an outage must be answered within the storage bound (1 s by
/// default); this is the generous limit the tests hold it to on a busy machine.
const OUTAGE_ANSWER_LIMIT: Duration = Duration::from_secs(5);

fn ids(prefix: &str, count: usize) -> BTreeSet<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

/// Waits until the sender has settled everything it read: the receiver records an event
/// before the sender hears the answer, and a settle still in flight when a test breaks
/// Redis would come back as a reclaimed (duplicate) delivery.
async fn wait_settled(system: &System) {
    eventually(DEADLINE, "every delivery settled (nothing pending)", || async {
        let keyspace = system.keyspace();
        let mut partitions = keyspace.all_partitions();
        partitions
            .all(|partition| {
                system
                    .redis_cli(&["XPENDING", &partition.ready(), "senders"])
                    .starts_with('0')
            })
            .then_some(())
    })
    .await;
}

/// A system with one topic and one subscription to `receiver`.
async fn system_with_subscription(options: Options, receiver: &Receiver) -> System {
    let system = System::start(options).await;
    system.create_topic("orders").await;
    system
        .create_subscription(
            "orders",
            "audit",
            subscription(receiver.url(), json!({"deadLetterDestination": dead_letter_to("dead")})),
        )
        .await;
    system
}

/// Publishes during an outage: a `503` with `Retry-After`, promptly.
async fn assert_refused_promptly(system: &System, body: &Value) {
    let started = Instant::now();
    let response = system.publish("orders", body).await;
    let elapsed = started.elapsed();
    let retry_after = response.headers().get("retry-after").cloned();
    let (status, text) = text_reply(response).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "publish during an outage: {text}"
    );
    assert!(retry_after.is_some(), "a 503 carries Retry-After");
    assert!(text.contains("ServiceUnavailable"), "Event Grid's error body: {text}");
    assert!(
        elapsed < OUTAGE_ANSWER_LIMIT,
        "the publish hung for {elapsed:?} during the outage"
    );
}

const ALL_TIERS: [TierId; 4] = [
    TierId::Ingress,
    TierId::Scheduler,
    TierId::DeadLetter,
    TierId::Sender(0),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_gets_prompt_503s_and_every_tier_resumes_when_it_returns() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let mut system = system_with_subscription(Options::default(), &receiver).await;
    system
        .publish_ok("orders", &Value::from(numbered_events("before", 0..5)))
        .await;
    receiver.wait_for_ids(&ids("before", 5), DEADLINE).await;
    wait_settled(&system).await;

    system.stop_redis();
    assert_refused_promptly(&system, &Value::from(numbered_events("during", 0..5))).await;
    for tier in ALL_TIERS {
        assert_eq!(
            system.readyz(tier).await,
            Some(StatusCode::SERVICE_UNAVAILABLE),
            "{tier:?} /readyz while Redis is down"
        );
    }
    // Every loop meets the outage (reads, promotes, reclaims, dead-letter passes, catalog refreshes).
    tokio::time::sleep(Duration::from_secs(3)).await;
    for tier in ALL_TIERS {
        assert!(system.is_running(tier), "{tier:?} exited while Redis was down");
    }

    system.start_redis();
    for tier in ALL_TIERS {
        eventually(DEADLINE, &format!("{tier:?} ready again"), || async {
            (system.readyz(tier).await == Some(StatusCode::OK)).then_some(())
        })
        .await;
    }
    system
        .publish_ok("orders", &Value::from(numbered_events("after", 0..5)))
        .await;
    receiver.wait_for_ids(&ids("after", 5), DEADLINE).await;
    let received = tally(&receiver.event_ids());
    assert!(
        received.keys().all(|id| !id.starts_with("during")),
        "events refused with 503 were not accepted"
    );
    assert!(received.values().all(|n| *n == 1), "no duplicates: {received:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_redis_gets_prompt_503s_not_hanging_publishes() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = system_with_subscription(Options::default(), &receiver).await;
    system
        .publish_ok("orders", &Value::from(numbered_events("before", 0..3)))
        .await;
    receiver.wait_for_ids(&ids("before", 3), DEADLINE).await;

    // SIGSTOP: connections stay open and nothing answers (a network partition, a stuck host).
    let pid = system.redis().pid().unwrap().to_string();
    let signal = |sig: &str| assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
    signal("-STOP");
    let refused = async {
        assert_refused_promptly(&system, &Value::from(numbered_events("during", 0..3))).await;
        assert_refused_promptly(&system, &Value::from(numbered_events("during2", 0..3))).await;
        let started = Instant::now();
        let ready = system.readyz(TierId::Ingress).await;
        (ready, started.elapsed())
    }
    .await;
    signal("-CONT");
    let (ready, took) = refused;
    assert_eq!(
        ready,
        Some(StatusCode::SERVICE_UNAVAILABLE),
        "/readyz while Redis hangs"
    );
    assert!(took < OUTAGE_ANSWER_LIMIT, "/readyz hung for {took:?}");

    system
        .publish_ok("orders", &Value::from(numbered_events("after", 0..3)))
        .await;
    receiver.wait_for_ids(&ids("after", 3), DEADLINE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_consumer_groups_are_recreated_and_delivery_carries_on() {
    // The second request of each event fails with 400: it is dead-lettered, so the
    // dead-letter stream's group is exercised too.
    const REPLIES: &[Reply] = &[Reply::status(200), Reply::status(400)];
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    let system = system_with_subscription(Options::default(), &receiver).await;
    system
        .publish_ok("orders", &Value::from(numbered_events("before", 0..1)))
        .await;
    receiver.wait_for_ids(&ids("before", 1), DEADLINE).await;
    wait_settled(&system).await;

    for partition in system.keyspace().all_partitions() {
        for (key, group) in [(partition.ready(), "senders"), (partition.deadletter(), "deadletter")] {
            system.redis_cli(&["XGROUP", "DESTROY", &key, group]);
        }
    }
    system
        .publish_ok("orders", &Value::from(numbered_events("after", 0..1)))
        .await;
    let dead = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(dead[0].record["id"], "after-0", "{:?}", dead[0].record);
    system
        .publish_ok("orders", &Value::from(numbered_events("later", 0..3)))
        .await;
    receiver.wait_for_ids(&ids("later", 3), DEADLINE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_back_empty_is_survived_once_the_catalog_is_recreated() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let system = system_with_subscription(Options::default(), &receiver).await;
    system
        .publish_ok("orders", &Value::from(numbered_events("before", 0..2)))
        .await;
    receiver.wait_for_ids(&ids("before", 2), DEADLINE).await;

    system.redis_cli(&["FLUSHALL"]);
    // The topic is gone with the data: publishers are told so, not accepted into the void.
    let (status, text) = text_reply(
        system
            .publish("orders", &Value::from(numbered_events("lost", 0..1)))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "publish to a topic Redis lost: {text}");

    // Operators recreate the catalog; every tier carries on without a restart.
    let other = Receiver::start(Behaviour::Status(200)).await;
    system.create_topic("orders").await;
    system
        .create_subscription(
            "orders",
            "audit",
            subscription(other.url(), json!({"deadLetterDestination": dead_letter_to("dead")})),
        )
        .await;
    system
        .publish_ok("orders", &Value::from(numbered_events("after", 0..3)))
        .await;
    other.wait_for_ids(&ids("after", 3), DEADLINE).await;
    assert!(
        receiver.event_ids().iter().all(|id| id.starts_with("before")),
        "nothing was routed by the catalog Redis lost"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_sender_settles_what_it_holds_and_exits() {
    // Every delivery takes 1.5 s to answer: SIGTERM lands while attempts are in flight.
    const SLOW: &[Reply] = &[
        Reply::status(200).after(Duration::from_millis(1500)),
        Reply::status(200).after(Duration::from_millis(1500)),
        Reply::status(200).after(Duration::from_millis(1500)),
    ];
    let receiver = Receiver::start(Behaviour::Script(SLOW)).await;
    let mut system = system_with_subscription(
        Options::default()
            .delivery_timeouts("5s", "60s")
            .env("EG__SHUTDOWN__GRACE", "20s"),
        &receiver,
    )
    .await;
    system
        .publish_ok("orders", &Value::from(numbered_events("held", 0..3)))
        .await;
    receiver.wait_for(1, DEADLINE).await;

    let (status, took) = system.terminate(TierId::Sender(0), Duration::from_secs(20)).await;
    assert!(status.success(), "sender exit after SIGTERM: {status}");
    // It waited for the attempt in flight (1.5 s), and no longer than the grace.
    assert!(
        took >= Duration::from_millis(500),
        "exited after {took:?}: did not wait for attempts in flight"
    );
    // Nothing is left pending in the group: no delivery waits out the 60 s visibility timeout.
    for partition in system.keyspace().all_partitions() {
        let pending = system.redis_cli(&["XPENDING", &partition.ready(), "senders"]);
        assert!(
            pending.starts_with('0'),
            "partition {} still holds deliveries: {pending}",
            partition.index
        );
    }

    system.restart(TierId::Sender(0)).await;
    system
        .publish_ok("orders", &Value::from(numbered_events("after", 0..2)))
        .await;
    let mut expected = ids("held", 3);
    expected.extend(ids("after", 2));
    receiver.wait_for_ids(&expected, DEADLINE).await;
    let received = tally(&receiver.event_ids());
    assert!(
        received.values().all(|n| *n == 1),
        "delivered exactly once: {received:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ingress_finishes_the_publish_in_flight() {
    let receiver = Receiver::start(Behaviour::Status(200)).await;
    let mut system = system_with_subscription(Options::default(), &receiver).await;
    let key = system.create_topic("slow").await;
    system
        .create_subscription("slow", "audit", subscription(receiver.url(), json!({})))
        .await;

    // A publisher halfway through sending its body when SIGTERM arrives.
    let body = Value::from(numbered_events("inflight", 0..2)).to_string();
    let (head, tail) = body.as_bytes().split_at(body.len() / 2);
    let address = system.ingress_url().trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "POST /topics/slow/api/events HTTP/1.1\r\nhost: {address}\r\naeg-sas-key: {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(head).await.unwrap();
    // Time for the ingress to accept the connection and start the request: one still in
    // its listen queue when SIGTERM stops accepting would be reset instead.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let pid = system.tier_pid(TierId::Ingress);
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stream.write_all(tail).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the publish in flight was finished: {answer}"
    );

    let (status, took) = system.wait_exit(TierId::Ingress, Duration::from_secs(10)).await;
    assert!(
        status.success(),
        "ingress exit after SIGTERM: {status} (after {took:?})"
    );
    receiver.wait_for_ids(&ids("inflight", 2), DEADLINE).await;

    system.restart(TierId::Ingress).await;
    system
        .publish_ok("orders", &Value::from(numbered_events("after", 0..2)))
        .await;
    receiver.wait_for_ids(&ids("after", 2), DEADLINE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_scheduler_and_deadletter_exit_promptly_and_lose_nothing() {
    // Two failures then success: each event needs the scheduler to promote two retries.
    const REPLIES: &[Reply] = &[Reply::status(500), Reply::status(500)];
    let receiver = Receiver::start(Behaviour::Script(REPLIES)).await;
    let refuser = Receiver::start(Behaviour::Status(400)).await;
    let mut system = system_with_subscription(Options::default(), &receiver).await;
    system
        .create_subscription(
            "orders",
            "refused",
            subscription(refuser.url(), json!({"deadLetterDestination": dead_letter_to("dead")})),
        )
        .await;

    system
        .publish_ok("orders", &Value::from(numbered_events("first", 0..1)))
        .await;
    refuser.wait_for(1, DEADLINE).await;
    for tier in [TierId::Scheduler, TierId::DeadLetter] {
        let (status, took) = system.terminate(tier, Duration::from_secs(10)).await;
        assert!(
            status.success(),
            "{tier:?} exit after SIGTERM: {status} (after {took:?})"
        );
    }
    // While they are down, a retry is due and a dead-letter record waits.
    tokio::time::sleep(Duration::from_secs(2)).await;
    system.restart(TierId::Scheduler).await;
    system.restart(TierId::DeadLetter).await;

    receiver.wait_for_ids(&ids("first", 1), DEADLINE).await;
    let dead = system.wait_dead_letters(1, DEADLINE).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].record["deadLetterReason"], "NonRetriableFailure");
    // Written once: a second record would show up by now if the restart replayed it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        system.dead_letter_records().len(),
        1,
        "the dead-letter record was written once"
    );
}

/// A tier whose stdout and stderr are a pipe nobody reads still stops on SIGTERM within
/// its grace: a log write must never hold it up. The sender's pipe is full before it
/// starts (its reader stopped reading: a write would block); the scheduler's reader is
/// gone (a write fails with `EPIPE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_tier_whose_log_pipe_nobody_reads() {
    const GRACE: Duration = Duration::from_secs(10);
    let system = System::start(
        Options::default()
            .senders(0)
            .env("EG__SHUTDOWN__GRACE", "10s")
            .env("EG__LOG__LEVEL", "debug"),
    )
    .await;
    let (reader, full) = std::io::pipe().unwrap();
    fill(&full);
    let mut sender = system
        .start_with_output(Role::Sender, full.try_clone().unwrap().into(), full.into())
        .await;
    let (gone, closed) = std::io::pipe().unwrap();
    drop(gone);
    let mut scheduler = system
        .start_with_output(Role::Scheduler, closed.try_clone().unwrap().into(), closed.into())
        .await;
    for (name, tier) in [("sender", &mut sender), ("scheduler", &mut scheduler)] {
        let (status, took) = tier.terminate(GRACE).await;
        assert!(status.success(), "{name} exit after SIGTERM: {status} (after {took:?})");
    }
    drop(reader);
}

/// Fills `pipe` through a non-blocking descriptor of its own, so the one a tier is given
/// stays blocking: a pipe whose reader stopped reading.
fn fill(pipe: &std::io::PipeWriter) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let mut own = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", pipe.as_raw_fd()))
        .unwrap();
    // Page-sized writes are all or nothing: single bytes fill what they leave.
    for chunk in [&[b'x'; 4096][..], b"x"] {
        loop {
            match own.write(chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("cannot fill the pipe: {e}"),
            }
        }
    }
}
