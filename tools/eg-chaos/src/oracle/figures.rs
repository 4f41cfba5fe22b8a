//! The report's figures by destination kind: how the (event, subscription) pairs owed
//! to each kind ended.

use crate::scenario::{DeadLetterTo, Destination};
use serde_json::{Value, json};

/// A subscription's kind for the report's figures.
pub(super) fn kind_name(destination: Destination, dead_letter_to: DeadLetterTo) -> &'static str {
    match (destination, dead_letter_to) {
        (Destination::WebHook, DeadLetterTo::LocalDirectory) => "webhook",
        (Destination::WebHook, DeadLetterTo::AzureBlob) => "webhook_dead_lettering_to_azure_blob",
        (Destination::RabbitMq, _) => "rabbitmq",
        (Destination::Nats, _) => "nats",
        (Destination::Kafka, _) => "kafka",
        (Destination::Sqs, _) => "sqs",
    }
}

/// One destination kind's figures: (event, subscription) pairs owed, how they ended,
/// extra copies at the destination (at least once allows them) and extra dead-letter
/// records of one pair.
#[derive(Default)]
pub(super) struct KindFigures {
    pub(super) owed: u64,
    pub(super) delivered: u64,
    pub(super) dead_lettered: u64,
    pub(super) lost: u64,
    pub(super) duplicates: u64,
    pub(super) duplicate_dead_letters: u64,
}

impl KindFigures {
    pub(super) fn to_json(&self) -> Value {
        json!({"owed": self.owed, "delivered": self.delivered, "dead_lettered": self.dead_lettered,
               "lost": self.lost, "duplicates": self.duplicates,
               "duplicate_dead_letter_records": self.duplicate_dead_letters})
    }
}
