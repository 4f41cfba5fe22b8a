//! The command line: every command, its arguments and its help text (clap derive).
//! Arguments are checked here as far as they can be without the server (times parse,
//! one of `--endpoint`/`--file`), so a wrong command line fails before any request.

use crate::destinations::{self, BlobTarget, S3Target};
use crate::times;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "egctl",
    version,
    about = "Operate an eg deployment: topics, subscriptions, publishing, queues, dead letters, delivery history",
    after_help = "Target: --url, EGCTL_URL, `url` in the config file, else http://127.0.0.1:8080.\n\
                  Token:  --token-file/--token, EGCTL_TOKEN_FILE/EGCTL_TOKEN, `token_file`/`token` in the config file.\n\
                  Config: --config, EGCTL_CONFIG, else $XDG_CONFIG_HOME/egctl/config.toml or ~/.config/egctl/config.toml.\n\
                  Hints:  EGCTL_HINT_PREFIX spells the commands egctl suggests (`just egctl` sets it to \"just egctl\").\n\
                  Exit codes: 0 ok, 1 the API refused, 2 bad usage or configuration, 3 eg-ingress unreachable,\n\
                  4 the subscription was written but is not Succeeded (it waits for its endpoint's validation)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// eg-ingress's base URL [env: EGCTL_URL] [default: http://127.0.0.1:8080]
    #[arg(long, global = true, value_name = "URL")]
    pub url: Option<String>,
    /// The admin bearer token (prefer --token-file: arguments show in process lists) [env: EGCTL_TOKEN]
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// A file holding the admin bearer token [env: EGCTL_TOKEN_FILE]
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// TOML config file with keys url, token, token_file [env: EGCTL_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the API's JSON instead of tables
    #[arg(long, global = true)]
    pub json: bool,
    /// Longest wait for one API answer
    #[arg(long, global = true, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

// Parsed once per run: the size of the subscription create flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, list, show and delete topics; show and regenerate their access keys
    #[command(subcommand)]
    Topics(TopicCommand),
    /// Create, list, show, delete, pause, resume and validate event subscriptions
    #[command(subcommand, visible_alias = "subs")]
    Subscriptions(SubscriptionCommand),
    /// Publish events to a topic (fetches the topic's key1 with the admin token)
    Publish(PublishArgs),
    /// Queue depths per partition and per tier
    Queues,
    /// An overview of the deployment: topics, subscriptions, rates, queues
    Status,
    /// List, inspect, redrive and purge a subscription's dead letters
    #[command(subcommand, name = "deadletters", visible_alias = "dl")]
    DeadLetters(DeadLetterCommand),
    /// The delivery attempts of one event
    History(HistoryArgs),
    /// Replay a window of an archived topic into one subscription; follow and cancel it
    #[command(subcommand)]
    Replays(ReplayCommand),
}

#[derive(Debug, Subcommand)]
pub enum ReplayCommand {
    /// Start a replay of the events the topic accepted in a window (docs/archive.md)
    Start {
        topic: String,
        subscription: String,
        /// Accepted at or after this time (RFC 3339, or a duration ago: 3h)
        #[arg(long, value_name = "TIME", value_parser = times::parse)]
        from: DateTime<Utc>,
        /// Accepted before this time (RFC 3339, or a duration ago: 30m); default now
        #[arg(long, value_name = "TIME", value_parser = times::parse)]
        to: Option<DateTime<Utc>>,
        /// Only events of this type (repeat for several), besides the subscription's filter
        #[arg(long = "event-type", value_name = "TYPE")]
        event_types: Vec<String>,
        /// Only events whose subject begins with this, besides the subscription's filter
        #[arg(long, value_name = "PREFIX")]
        subject_begins_with: Option<String>,
        /// Most events enqueued per second (1–100000; default 1000)
        #[arg(long, value_name = "N")]
        rate: Option<u32>,
        /// Follow the job until it ends (as `replays show --follow`)
        #[arg(long)]
        follow: bool,
    },
    /// A subscription's replays, newest first (finished ones are kept a week)
    List { topic: String, subscription: String },
    /// One replay and its progress
    Show {
        topic: String,
        subscription: String,
        id: String,
        /// Print its progress every second until it ends
        #[arg(long)]
        follow: bool,
    },
    /// Stop a running replay (what it enqueued stays enqueued)
    Cancel {
        topic: String,
        subscription: String,
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create a topic, or update one (PUT)
    Create {
        name: String,
        /// The schema publishers use (CustomEventSchema needs an inputSchemaMapping: use --file)
        #[arg(long, value_enum)]
        input_schema: Option<InputSchema>,
        /// A namespace topic (publisherType Custom, CloudEvents only): push and queue
        /// subscriptions with Event Grid namespaces' delivery rules
        #[arg(long, conflicts_with = "file")]
        namespace: bool,
        /// How long a namespace topic keeps events, in days (1–7, default 1); bounds its
        /// subscriptions' time-to-live. Makes a namespace topic, as --namespace does
        #[arg(long, value_name = "DAYS", conflicts_with = "file")]
        retention_days: Option<u8>,
        /// Skip an event published again within this long (20s to 1d, such as 10m):
        /// answered 200, stored once (duplicateDetectionHistoryTimeWindow)
        #[arg(long, value_name = "DURATION", value_parser = parse_duplicate_window)]
        duplicate_window: Option<String>,
        /// Archive every accepted event to the local directory's folder NAME (under the
        /// dead-letter worker's directory); for Azure Blob or S3 write properties.archive
        /// with --file (docs/archive.md)
        #[arg(long, value_name = "NAME", requires = "archive_retention_days")]
        archive_container: Option<String>,
        /// How long archived events are kept, in days (1–3650)
        #[arg(long, value_name = "DAYS", requires = "archive_container")]
        archive_retention_days: Option<u16>,
        /// A topic resource as JSON ({"properties":{…}}), `-` for stdin
        #[arg(long, short, value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// List every topic
    List,
    /// Show one topic
    Show { name: String },
    /// Delete a topic and all its subscriptions
    Delete { name: String },
    /// Show a topic's two access keys
    Keys { name: String },
    /// Replace one of a topic's access keys; the old one stops working
    Regenerate { name: String, key: KeyName },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum InputSchema {
    EventGridSchema,
    CloudEventSchemaV1_0,
    CustomEventSchema,
}

impl InputSchema {
    pub fn as_str(self) -> &'static str {
        match self {
            InputSchema::EventGridSchema => "EventGridSchema",
            InputSchema::CloudEventSchemaV1_0 => "CloudEventSchemaV1_0",
            InputSchema::CustomEventSchema => "CustomEventSchema",
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KeyName {
    Key1,
    Key2,
}

impl KeyName {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyName::Key1 => "key1",
            KeyName::Key2 => "key2",
        }
    }
}

// Parsed once per run: the size of the create flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum SubscriptionCommand {
    /// Create a subscription, or update one (PUT), from flags or a resource file; exits 4
    /// when its endpoint did not pass validation (the message says what it answered)
    Create(SubscriptionCreate),
    /// List a topic's subscriptions
    List { topic: String },
    /// Show one subscription
    Show { topic: String, name: String },
    /// Delete a subscription (its queued deliveries are dropped)
    Delete { topic: String, name: String },
    /// Stop delivering to a subscription; its events wait (and keep their time-to-live)
    Pause { topic: String, name: String },
    /// Deliver again what a paused subscription holds
    Resume { topic: String, name: String },
    /// The endpoint's delivery health: failures and probation, as every sender sees it
    Health { topic: String, name: String },
    /// Run the endpoint validation handshake again (after fixing the receiver); exits 4
    /// while the subscription is still not Succeeded
    Validate { topic: String, name: String },
}

/// The flags build `{"properties":{…}}`; `--file` sends a resource as it is.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new(crate::endpoints::DESTINATION).multiple(false)))]
pub struct SubscriptionCreate {
    pub topic: String,
    pub name: String,
    /// The webhook URL deliveries are POSTed to
    #[arg(long, value_name = "URL", group = crate::endpoints::DESTINATION,
          required_unless_present_any = ["file", crate::endpoints::DESTINATION])]
    pub endpoint: Option<String>,
    /// A storage queue or a broker instead of a webhook (boxed: the command enum stays small)
    #[command(flatten)]
    pub to: Box<crate::endpoints::EndpointFlags>,
    /// A bearer token on every request to the webhook (boxed as `to` is)
    #[command(flatten)]
    pub auth: Box<crate::webhook_auth::WebhookAuthFlags>,
    /// Queue mode (namespace topics): consumers receive events with a lock and acknowledge
    /// them, instead of a webhook
    #[arg(long, group = crate::endpoints::DESTINATION, conflicts_with = "max_events_per_batch")]
    pub queue: bool,
    /// Queue mode: how long a received event stays locked to its receiver (60–300 s, default 60)
    #[arg(long, value_name = "SECONDS")]
    pub lock_duration: Option<u64>,
    /// Attempts before an event is dead-lettered or dropped (custom topics 1–30, namespace 1–10)
    #[arg(long, value_name = "N", visible_alias = "max-delivery-count")]
    pub max_attempts: Option<u32>,
    /// Namespace topics: time-to-live of an event as ISO 8601 (PT10M, P1D), at most the
    /// topic's retention
    #[arg(long, value_name = "DURATION", conflicts_with = "ttl_minutes")]
    pub ttl: Option<String>,
    /// Time-to-live of an event for this subscription, in minutes
    #[arg(long, value_name = "N")]
    pub ttl_minutes: Option<u32>,
    /// Deliver only these event types (comma-separated)
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub event_types: Vec<String>,
    #[arg(long, value_name = "PREFIX")]
    pub subject_begins_with: Option<String>,
    #[arg(long, value_name = "SUFFIX")]
    pub subject_ends_with: Option<String>,
    /// Events per delivery request (1–5000)
    #[arg(long, value_name = "N")]
    pub max_events_per_batch: Option<u32>,
    /// Dead-letter into this container of the dead-letter directory
    #[arg(long, value_name = "CONTAINER", conflicts_with_all = ["dead_letter_blob", "dead_letter_s3"])]
    pub dead_letter_container: Option<String>,
    /// Dead-letter into a blob container of an Azure storage account configured in eg:
    /// ACCOUNT/CONTAINER, or the account's resource id followed by /CONTAINER
    /// (/subscriptions/…/providers/Microsoft.Storage/storageAccounts/ACCOUNT/CONTAINER)
    #[arg(long, value_name = "ACCOUNT/CONTAINER", value_parser = destinations::parse_blob, conflicts_with = "dead_letter_s3")]
    pub dead_letter_blob: Option<BlobTarget>,
    /// Dead-letter into an S3 bucket through an S3 connection configured in eg:
    /// CONNECTION/BUCKET, or CONNECTION/BUCKET/KEY/PREFIX
    #[arg(long, value_name = "CONNECTION/BUCKET[/PREFIX]", value_parser = destinations::parse_s3)]
    pub dead_letter_s3: Option<S3Target>,
    /// EventGridSchema, CloudEventSchemaV1_0 or CustomInputSchema (default: the topic's)
    #[arg(long, value_name = "SCHEMA")]
    pub delivery_schema: Option<String>,
    /// Create it paused
    #[arg(long)]
    pub paused: bool,
    /// Deliveries per second at most, shared by every sender (decimals allowed: 0.5)
    #[arg(long, value_name = "PER_SECOND", conflicts_with = "queue")]
    pub rate_limit: Option<f64>,
    /// Requests that may go at once after a quiet spell (with --rate-limit)
    #[arg(long, value_name = "N", requires = "rate_limit")]
    pub burst: Option<u32>,
    /// Requests in flight at once at most, shared by every sender
    #[arg(long, value_name = "N", conflicts_with = "queue")]
    pub max_concurrent_requests: Option<u32>,
    /// Deliver each key's events one at a time, in the order eg accepted them: subject,
    /// type, partitionkey (CloudEvents) or data:<path> (a field of the event's data)
    #[arg(long, value_name = "KEY", value_parser = parse_order_by, conflicts_with = "queue")]
    pub order_by: Option<serde_json::Value>,
    /// A subscription resource as JSON ({"properties":{…}}), `-` for stdin
    #[arg(long, short, value_name = "FILE", conflicts_with_all = [
        crate::endpoints::DESTINATION, "max_attempts", "ttl_minutes", "event_types", "subject_begins_with",
        "subject_ends_with", "max_events_per_batch", "dead_letter_container", "dead_letter_blob", "dead_letter_s3",
        "delivery_schema", "paused",
        "lock_duration", "ttl", "rate_limit", "max_concurrent_requests", "order_by",
    ])]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    pub topic: String,
    /// The event type (eventType, or type for CloudEvents topics)
    #[arg(long = "type", value_name = "TYPE", required_unless_present = "file")]
    pub event_type: Option<String>,
    #[arg(long, value_name = "SUBJECT", required_unless_present = "file")]
    pub subject: Option<String>,
    /// The event id (default: a new UUID)
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// The event's data, as JSON (default: {})
    #[arg(long, value_name = "JSON")]
    pub data: Option<String>,
    /// The CloudEvents source, for CloudEvents topics
    #[arg(long, value_name = "URI", default_value = "/egctl")]
    pub source: String,
    /// A file holding the request body as the topic's schema takes it, sent as it is; `-` for stdin
    #[arg(long, short, value_name = "FILE", conflicts_with_all = ["event_type", "subject", "id", "data"])]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum DeadLetterCommand {
    /// List dead letters, oldest first
    List {
        topic: String,
        subscription: String,
        #[command(flatten)]
        window: Window,
        /// The most records shown (pages are followed up to this many)
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: u64,
    },
    /// Show one dead letter with its full record
    Show {
        topic: String,
        subscription: String,
        /// The record id (the ID column of `deadletters list`)
        id: String,
    },
    /// Deliver dead letters again (each at most once); prints progress on stderr
    Redrive {
        topic: String,
        subscription: String,
        #[command(flatten)]
        selection: Selection,
        /// Records handled per API call (1–10000)
        #[arg(long, value_name = "N", default_value_t = 1000)]
        chunk: u32,
    },
    /// Delete dead letters for good; asks first unless --yes
    Purge {
        topic: String,
        subscription: String,
        #[command(flatten)]
        selection: Selection,
        /// Records handled per API call (1–10000)
        #[arg(long, value_name = "N", default_value_t = 1000)]
        chunk: u32,
        /// Do not ask (required when stdin is not a terminal)
        #[arg(long, short)]
        yes: bool,
    },
}

/// A time window over dead-letter times: from inclusive, to exclusive.
#[derive(Debug, Args)]
pub struct Window {
    /// From this time (RFC 3339, or a duration ago: 2h)
    #[arg(long, value_name = "TIME", value_parser = times::parse)]
    pub from: Option<DateTime<Utc>>,
    /// Up to this time, exclusive (RFC 3339, or a duration ago: 30m)
    #[arg(long, value_name = "TIME", value_parser = times::parse)]
    pub to: Option<DateTime<Utc>>,
}

/// Which dead letters a redrive or purge applies to; at least one must be given.
#[derive(Debug, Args)]
#[group(required = true, multiple = true)]
pub struct Selection {
    /// Every dead letter of the subscription
    #[arg(long, conflicts_with_all = ["from", "to", "event_ids", "ids"])]
    pub all: bool,
    /// Dead-lettered at or after this time (RFC 3339, or a duration ago: 2h)
    #[arg(long, value_name = "TIME", value_parser = times::parse)]
    pub from: Option<DateTime<Utc>>,
    /// Dead-lettered before this time (RFC 3339, or a duration ago: 30m)
    #[arg(long, value_name = "TIME", value_parser = times::parse)]
    pub to: Option<DateTime<Utc>>,
    /// Only these event ids
    #[arg(long = "event-id", value_name = "ID", num_args = 1..)]
    pub event_ids: Vec<String>,
    /// Only these record ids (the ID column of `deadletters list`)
    #[arg(long = "id", value_name = "RECORD_ID", num_args = 1..)]
    pub ids: Vec<String>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    pub topic: String,
    pub event_id: String,
    /// Only this subscription's attempts
    #[arg(long, value_name = "NAME")]
    pub subscription: Option<String>,
}

/// `--duplicate-window`: eg's duration form (`10m`) as the ISO 8601 duration the API
/// takes (`PT600S`); the API checks the bounds and shows it back in its largest unit.
fn parse_duplicate_window(text: &str) -> Result<String, String> {
    let window =
        humantime::parse_duration(text).map_err(|_| format!("{text:?} is not a duration such as 30s, 10m or 1d"))?;
    if window.subsec_nanos() != 0 {
        return Err(format!("{text:?}: give whole seconds"));
    }
    Ok(format!("PT{}S", window.as_secs()))
}

/// `--order-by`: the `orderedDelivery` object the API takes.
fn parse_order_by(text: &str) -> Result<serde_json::Value, String> {
    use serde_json::json;
    match text {
        "subject" => Ok(json!({"key": "subject"})),
        "type" => Ok(json!({"key": "eventType"})),
        "partitionkey" => Ok(json!({"key": "partitionKey"})),
        _ => match text.strip_prefix("data:") {
            Some(path) if !path.is_empty() => Ok(json!({"key": "data", "path": path})),
            _ => Err(format!(
                "{text:?} is not an ordering key: subject, type, partitionkey or data:<path> (data:accountId)"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_duplicate_window_is_written_in_iso_8601_seconds() {
        assert_eq!(parse_duplicate_window("10m").unwrap(), "PT600S");
        assert_eq!(parse_duplicate_window("1d").unwrap(), "PT86400S");
        assert!(
            parse_duplicate_window("ten minutes")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(parse_duplicate_window("1500ms").unwrap_err().contains("whole seconds"));
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_redrive_needs_a_selection_and_all_stands_alone() {
        let parse = |args: &[&str]| Cli::try_parse_from(std::iter::once("egctl").chain(args.iter().copied()));
        assert!(parse(&["dl", "redrive", "t", "s"]).is_err());
        assert!(parse(&["dl", "redrive", "t", "s", "--all"]).is_ok());
        assert!(parse(&["dl", "redrive", "t", "s", "--all", "--from", "2h"]).is_err());
        assert!(parse(&["dl", "redrive", "t", "s", "--from", "2h", "--to", "now"]).is_ok());
        assert!(parse(&["dl", "purge", "t", "s", "--event-id", "a", "b", "--yes"]).is_ok());
        let repeated = parse(&["dl", "redrive", "t", "s", "--event-id", "a", "--event-id", "b", "c"]).unwrap();
        match repeated.command {
            Command::DeadLetters(DeadLetterCommand::Redrive { selection, .. }) => {
                assert_eq!(selection.event_ids, ["a", "b", "c"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["dl", "list", "t", "s", "--from", "yesterday"]).is_err());
    }

    #[test]
    fn subscriptions_take_an_endpoint_or_a_file() {
        let parse = |args: &[&str]| Cli::try_parse_from(std::iter::once("egctl").chain(args.iter().copied()));
        assert!(parse(&["subscriptions", "create", "t", "s"]).is_err());
        assert!(parse(&["subscriptions", "create", "t", "s", "--endpoint", "http://x"]).is_ok());
        assert!(parse(&["subscriptions", "create", "t", "s", "--file", "f.json"]).is_ok());
        assert!(
            parse(&[
                "subscriptions",
                "create",
                "t",
                "s",
                "--file",
                "f",
                "--max-attempts",
                "3"
            ])
            .is_err()
        );
        assert!(parse(&["publish", "t", "--type", "A"]).is_err());
        assert!(parse(&["publish", "t", "--type", "A", "--subject", "/s"]).is_ok());
    }

    #[test]
    fn one_dead_letter_destination_at_most_and_each_checked_on_the_command_line() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(
                ["egctl", "subscriptions", "create", "t", "s", "--endpoint", "http://x"]
                    .iter()
                    .chain(args),
            )
        };
        assert!(parse(&["--dead-letter-blob", "acct/dead"]).is_ok());
        assert!(parse(&["--dead-letter-s3", "minio/bucket/prefix"]).is_ok());
        for both in [
            ["--dead-letter-blob", "acct/dead", "--dead-letter-s3", "minio/b"],
            ["--dead-letter-container", "dead", "--dead-letter-s3", "minio/b"],
            ["--dead-letter-container", "dead", "--dead-letter-blob", "acct/dead"],
        ] {
            assert!(parse(&both).is_err(), "{both:?}");
        }
        let bad = parse(&["--dead-letter-blob", "just-a-container"]).unwrap_err();
        assert_eq!(bad.exit_code(), 2, "a usage error");
        assert!(bad.to_string().contains("ACCOUNT/CONTAINER"), "{bad}");
        assert!(parse(&["--dead-letter-s3", "minio"]).is_err());
        let with_file = Cli::try_parse_from([
            "egctl",
            "subscriptions",
            "create",
            "t",
            "s",
            "--file",
            "f.json",
            "--dead-letter-s3",
            "minio/b",
        ]);
        assert!(with_file.is_err(), "a resource file says it all");
    }
}
