//! One deployment for one measurement: a [`Launcher`] (Redis, and the tiers started as
//! processes), a topic with `subscriptions` subscriptions that all match every event and
//! all point at one in-process [`Receiver`] (or at the destination the setup names), and
//! the processes whose CPU is accounted.

use crate::ceiling::Fsync;
use crate::cpu::Processes;
use crate::launcher::{Launcher, Role, Tier, Transport};
use crate::load::Target;
use crate::receiver::{Behaviour, Receiver};
use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

pub const TOPIC: &str = "bench";

/// What to start.
#[derive(Debug, Clone)]
pub struct Setup {
    pub fsync: Fsync,
    /// How the tiers reach Redis.
    pub transport: Transport,
    /// eg-sender processes (0: none, deliveries accumulate).
    pub senders: usize,
    /// Whether eg-scheduler and eg-deadletter run.
    pub scheduler: bool,
    pub subscriptions: usize,
    /// `maxEventsPerBatch` of every subscription (1: no batching).
    pub max_events_per_batch: u32,
    pub receiver: Behaviour,
    /// Every subscription's `destination` instead of a webhook to the receiver (a
    /// broker or a storage queue).
    pub destination: Option<serde_json::Value>,
    /// Every subscription's `deadLetterDestination` (none: eg's default, the local directory).
    pub dead_letter_destination: Option<serde_json::Value>,
    /// Every subscription's `deliveryLimits` (none: unlimited).
    pub delivery_limits: Option<serde_json::Value>,
    /// Every subscription's `orderedDelivery`, if any.
    pub ordered_delivery: Option<serde_json::Value>,
    /// More properties of every webhook destination (a `deliveryIdentity`, …).
    pub webhook_properties: Option<serde_json::Value>,
    /// The topic's `duplicateDetectionHistoryTimeWindow` (none: no duplicate check).
    pub duplicate_window: Option<&'static str>,
    /// The topic's `archive` (none: not archived).
    pub archive: Option<serde_json::Value>,
    /// Settings for every tier on top of the production defaults.
    pub env: Vec<(&'static str, String)>,
    /// Settings for the senders only.
    pub sender_env: Vec<(&'static str, String)>,
}

impl Setup {
    pub fn new(fsync: Fsync) -> Self {
        Self {
            fsync,
            transport: Transport::UnixSocket,
            senders: 1,
            scheduler: true,
            subscriptions: 1,
            max_events_per_batch: 1,
            receiver: Behaviour::default(),
            destination: None,
            dead_letter_destination: None,
            delivery_limits: None,
            ordered_delivery: None,
            webhook_properties: None,
            duplicate_window: None,
            archive: None,
            env: Vec::new(),
            sender_env: Vec::new(),
        }
    }

    /// Every setting that differs from eg's defaults, for the report.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![format!("appendfsync {}", self.fsync.name())];
        if self.transport != Transport::UnixSocket {
            out.push(format!("the tiers reach Redis over {}", self.transport.name()));
        }
        // A secret setting is named, never shown.
        let shown = |k: &str, v: &str| {
            if k.contains("SECRET") {
                format!("{k}=***")
            } else {
                format!("{k}={v}")
            }
        };
        out.extend(self.env.iter().map(|(k, v)| shown(k, v)));
        out.extend(
            self.sender_env
                .iter()
                .map(|(k, v)| format!("{} (senders)", shown(k, v))),
        );
        if self.max_events_per_batch > 1 {
            out.push(format!(
                "maxEventsPerBatch {} with preferredBatchSizeInKilobytes 1024",
                self.max_events_per_batch
            ));
        }
        out
    }
}

pub struct Deployment {
    pub receiver: Arc<Receiver>,
    pub ingress: Tier,
    pub senders: Vec<Tier>,
    others: Vec<(&'static str, Tier)>,
    pub target: Target,
    /// Declared last: dropped (Redis stopped) after the tiers.
    pub launcher: Launcher,
}

impl Deployment {
    pub async fn start(bin_dir: PathBuf, setup: &Setup) -> anyhow::Result<Self> {
        let launcher = Launcher::new(bin_dir, setup.fsync, setup.transport, &setup.env)?;
        let receiver = Arc::new(Receiver::start(setup.receiver).await?);
        let ingress = launcher.start(Role::Ingress, "ingress", &[]).await?;
        launcher
            .admin(
                &ingress,
                Method::PUT,
                &format!("/topics/{TOPIC}"),
                Some(&topic_body(setup.duplicate_window, setup.archive.as_ref())),
            )
            .await?;
        let keys = launcher
            .admin(&ingress, Method::POST, &format!("/topics/{TOPIC}/listKeys"), None)
            .await?;
        let key = keys["key1"].as_str().context("no key1 in listKeys")?.to_owned();
        for i in 0..setup.subscriptions {
            let mut destination = json!({"endpointUrl": format!("{}/{i}", receiver.url())});
            if setup.max_events_per_batch > 1 {
                destination["maxEventsPerBatch"] = json!(setup.max_events_per_batch);
                destination["preferredBatchSizeInKilobytes"] = json!(1024);
            }
            if let Some(serde_json::Value::Object(more)) = &setup.webhook_properties {
                destination
                    .as_object_mut()
                    .context("a webhook's properties")?
                    .extend(more.clone());
            }
            let destination = match &setup.destination {
                Some(other) => other.clone(),
                None => json!({"endpointType": "WebHook", "properties": destination}),
            };
            let mut subscription = json!({"properties": {"destination": destination}});
            if let Some(dead_letter) = &setup.dead_letter_destination {
                subscription["properties"]["deadLetterDestination"] = dead_letter.clone();
            }
            if let Some(limits) = &setup.delivery_limits {
                subscription["properties"]["deliveryLimits"] = limits.clone();
            }
            if let Some(order) = &setup.ordered_delivery {
                subscription["properties"]["orderedDelivery"] = order.clone();
            }
            let created = launcher
                .admin(
                    &ingress,
                    Method::PUT,
                    &format!("/topics/{TOPIC}/eventSubscriptions/sub{i}"),
                    Some(&subscription),
                )
                .await?;
            let state = created["properties"]["provisioningState"].as_str().unwrap_or_default();
            if state != "Succeeded" {
                bail!("subscription sub{i} is {state:?}, not Succeeded: {created}");
            }
        }
        let mut others = Vec::new();
        if setup.scheduler {
            others.push(("scheduler", launcher.start(Role::Scheduler, "scheduler", &[]).await?));
            others.push(("deadletter", launcher.start(Role::DeadLetter, "deadletter", &[]).await?));
        }
        let target = Target::new(launcher.http().clone(), &ingress.url, TOPIC, &key);
        let mut deployment = Self {
            receiver,
            ingress,
            senders: Vec::new(),
            others,
            target,
            launcher,
        };
        for _ in 0..setup.senders {
            deployment.add_sender(&setup.sender_env).await?;
        }
        Ok(deployment)
    }

    pub async fn add_sender(&mut self, env: &[(&str, String)]) -> anyhow::Result<()> {
        let label = format!("sender-{}", self.senders.len() + 1);
        let sender = self.launcher.start(Role::Sender, &label, env).await?;
        self.senders.push(sender);
        Ok(())
    }

    /// Every process whose CPU counts: the tiers, redis-server and this program.
    pub fn processes(&self) -> Processes {
        let mut p = Processes::default();
        p.add("ingress", self.ingress.pid());
        for (label, tier) in &self.others {
            p.add(label, tier.pid());
        }
        for s in &self.senders {
            p.add("sender", s.pid());
        }
        if let Some(pid) = self.launcher.redis_pid() {
            p.add("redis", pid);
        }
        p.add("bench", std::process::id());
        p
    }

    /// Keeps the run directory (tier logs) if asked; says where it is.
    pub fn finish(self, keep: bool) {
        let Self {
            launcher,
            senders,
            others,
            ingress,
            receiver,
            ..
        } = self;
        drop((senders, others, ingress, receiver));
        if keep {
            eprintln!("logs kept in {}", launcher.keep_run_dir().display());
        }
    }
}

/// The bench topic's JSON: Event Grid schema, and the duplicate window and archive if the
/// setup has them.
fn topic_body(duplicate_window: Option<&str>, archive: Option<&serde_json::Value>) -> serde_json::Value {
    let mut body = json!({"properties": {"inputSchema": "EventGridSchema"}});
    if let Some(archive) = archive {
        body["properties"]["archive"] = archive.clone();
    }
    if let Some(window) = duplicate_window {
        body["properties"]["duplicateDetectionHistoryTimeWindow"] = json!(window);
    }
    body
}
