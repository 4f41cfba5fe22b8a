//! An Amazon SQS queue (eg's `AmazonSQS`) reached through a connection configured in
//! eg: one message per event, standard or FIFO.
//!
//! The subscription names the queue by the URL AWS gives it
//! (`https://sqs.<region>.amazonaws.com/<account>/<queue>`). The URL only names the
//! queue: requests go to the connection's endpoint, never to the URL's host, so a
//! subscription cannot point eg at a host the operator did not configure.
//!
//! A queue whose name ends `.fifo` is a FIFO queue. Its messages need a group id and a
//! deduplication id; [`AmazonSqs::fifo_ids`] decides both here, as pure policy.

use super::{Kind, NamedConnections, connection, required_string};
use crate::api_error::InvalidField;
use crate::ordering::{OrderBy, OrderingKey};
use crate::routing::Routing;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// SQS allows 10 message attributes; eg's own `aeg-*` take three of them.
pub const MAX_DELIVERY_ATTRIBUTES: usize = 7;

/// The longest message group id and deduplication id SQS takes.
const MAX_FIFO_ID: usize = 128;

/// The group id of a FIFO message whose key is empty: SQS refuses an empty one.
pub const DEFAULT_GROUP: &str = "default";

/// A queue to send to, through an SQS connection configured in eg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmazonSqs {
    pub connection: String,
    /// As written, and sent as the request's `QueueUrl`.
    pub queue_url: String,
    /// The queue's AWS account id (the URL's first path segment).
    pub account: String,
    /// The queue's name (the URL's last path segment).
    pub queue: String,
}

/// A FIFO message's ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FifoIds {
    pub group: String,
    pub deduplication: String,
}

impl AmazonSqs {
    /// The settings section of SQS connections (`EG__BROKERS__SQS__<NAME>__…`).
    pub const CONNECTIONS: &str = "sqs";

    /// What names the queue in probation, the status page and logs:
    /// `sqs://<connection>/<account>/<queue>` (no host, no secret).
    pub fn queue_identity(&self) -> String {
        format!("sqs://{}/{}/{}", self.connection, self.account, self.queue)
    }

    /// Whether the queue is a FIFO queue (AWS requires the `.fifo` suffix on those).
    pub fn is_fifo(&self) -> bool {
        self.queue.ends_with(".fifo")
    }

    /// The ids a FIFO queue needs for one event (`None` for a standard queue). The
    /// group is the subscription's ordering key when it has one, else the event's
    /// subject, so one subject's events stay in order; an empty key is
    /// [`DEFAULT_GROUP`]. The deduplication id is the event id, so a retry of an event
    /// SQS already holds is dropped by the queue within its five-minute window. A value
    /// SQS would refuse (over 128 characters, or outside printable ASCII) is replaced by
    /// its SHA-256 in hex, which keeps equal values equal.
    pub fn fifo_ids(&self, ordering: Option<&OrderBy>, event: &Routing<'_>, event_id: &str) -> Option<FifoIds> {
        if !self.is_fifo() {
            return None;
        }
        let key = match ordering {
            Some(order) => order.key_of(event),
            None => OrderingKey(event.subject.to_owned()),
        };
        let group = if key.0.is_empty() {
            DEFAULT_GROUP.to_owned()
        } else {
            fifo_id(&key.0)
        };
        Some(FifoIds {
            group,
            deduplication: fifo_id(event_id),
        })
    }
}

/// `value` when SQS takes it as a group or deduplication id, else its SHA-256 in hex.
fn fifo_id(value: &str) -> String {
    let takes = !value.is_empty() && value.len() <= MAX_FIFO_ID && value.chars().all(|c| c.is_ascii_graphic());
    if takes {
        value.to_owned()
    } else {
        Sha256::digest(value.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl Kind for AmazonSqs {
    const ENDPOINT_TYPE: &'static str = "AmazonSQS";
    const OWN: &'static [&'static str] = &["connection", "queueUrl"];
    /// One message per event (an SQS attempt carries one; the sender's client batches
    /// concurrent attempts into one request), so no batching; delivery properties
    /// become message attributes.
    const SHARED: &'static [&'static str] = &["deliveryAttributeMappings"];

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let connection = connection(props)?;
        let queue_url = required_string(props, "queueUrl")?;
        let (account, queue) = queue_of(&queue_url)?;
        check_attributes(props)?;
        Ok(Self {
            connection,
            queue_url,
            account,
            queue,
        })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("connection".to_owned(), json!(self.connection));
        props.insert("queueUrl".to_owned(), json!(self.queue_url));
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        if configured.has_broker_connection(Self::CONNECTIONS, &self.connection) {
            return Ok(());
        }
        Err(InvalidField::new(
            "properties.connection",
            format!(
                "eg has no SQS connection named {:?}: an operator must configure it (EG__BROKERS__SQS__{}__REGION) before subscriptions can deliver through it",
                self.connection,
                self.connection.to_ascii_uppercase()
            ),
        ))
    }

    fn identity(&self) -> String {
        self.queue_identity()
    }
}

/// The account and queue name of a queue URL: `http(s)://<host>/<account>/<queue>`,
/// the queue 1–80 of `[A-Za-z0-9_-]` with an optional `.fifo` suffix (AWS's rule).
fn queue_of(url: &str) -> Result<(String, String), InvalidField> {
    let field = "properties.queueUrl";
    let shape = || {
        InvalidField::new(
            field,
            format!(
                "{url:?} is not a queue URL: expected https://sqs.<region>.amazonaws.com/<account-id>/<queue-name>, as AWS shows it"
            ),
        )
    };
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(shape)?;
    let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    let [host, account, queue] = parts.as_slice() else {
        return Err(shape());
    };
    if host.is_empty() || account.is_empty() || url.contains(['?', '#']) {
        return Err(shape());
    }
    let base = queue.strip_suffix(".fifo").unwrap_or(queue);
    let valid = (1..=80).contains(&queue.len())
        && !base.is_empty()
        && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(InvalidField::new(
            field,
            format!(
                "{queue:?} is not a queue name: 1-80 letters, digits, '-' or '_', with \".fifo\" at the end for a FIFO queue"
            ),
        ));
    }
    Ok(((*account).to_owned(), (*queue).to_owned()))
}

/// Delivery properties become message attributes: at most
/// [`MAX_DELIVERY_ATTRIBUTES`], each named as SQS allows.
fn check_attributes(props: &Map<String, Value>) -> Result<(), InvalidField> {
    let Some(Value::Array(mappings)) = props.get("deliveryAttributeMappings") else {
        return Ok(());
    };
    if mappings.len() > MAX_DELIVERY_ATTRIBUTES {
        return Err(InvalidField::new(
            "properties.deliveryAttributeMappings",
            format!(
                "has {} entries; an SQS message carries at most 10 attributes and eg's own take 3, so at most {MAX_DELIVERY_ATTRIBUTES}",
                mappings.len()
            ),
        ));
    }
    for (i, mapping) in mappings.iter().enumerate() {
        let Some(name) = mapping.get("name").and_then(Value::as_str) else {
            continue; // the subscription's own reading names what is wrong
        };
        let lower = name.to_ascii_lowercase();
        let valid = name.len() <= 256
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !name.starts_with('.')
            && !name.ends_with('.')
            && !name.contains("..")
            && !lower.starts_with("aws.")
            && !lower.starts_with("amazon.");
        if !valid {
            return Err(InvalidField::new(
                format!("properties.deliveryAttributeMappings[{i}].name"),
                format!(
                    "{name:?} cannot name an SQS message attribute: letters, digits, '-', '_' and '.' (not first, last or twice in a row), not starting \"AWS.\" or \"Amazon.\""
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Target;
    use super::super::tests::{read, reads_back};
    use super::*;
    use crate::routing::Routing;

    const URL: &str = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders";

    fn queue(url: &str) -> AmazonSqs {
        match read("AmazonSQS", json!({"connection": "aws", "queueUrl": url})).unwrap() {
            Target::AmazonSqs(q) => q,
            other => panic!("{other:?}"),
        }
    }

    fn event(subject: &str, data: Value) -> Map<String, Value> {
        let Value::Object(map) = json!({"subject": subject, "eventType": "t", "data": data}) else {
            panic!()
        };
        map
    }

    fn routing<'a>(map: &'a Map<String, Value>) -> Routing<'a> {
        Routing {
            event_type: "t",
            subject: map["subject"].as_str().unwrap_or_default(),
            fields: map,
        }
    }

    #[test]
    fn an_sqs_queue_is_named_by_its_url_and_identified_without_its_host() {
        let target = read("AmazonSQS", json!({"connection": "aws", "queueUrl": URL})).unwrap();
        reads_back(&target);
        assert_eq!(target.display_name(), "sqs://aws/123456789012/orders");
        let Target::AmazonSqs(q) = &target else { panic!() };
        assert!(!q.is_fifo());
        assert!(queue("http://127.0.0.1:5000/123456789012/jobs.fifo").is_fifo());
        for bad in [
            "sqs.amazonaws.com/1/q",
            "https://h/q",
            "https://h/1/q/extra",
            "https://h/1/has space",
            "https://h/1/.fifo",
            "https://h/1/q?x=1",
            &format!("https://h/1/{}", "q".repeat(81)),
        ] {
            let err = read("AmazonSQS", json!({"connection": "aws", "queueUrl": bad})).unwrap_err();
            assert_eq!(err.field, "properties.queueUrl", "{bad}: {err}");
        }
    }

    #[test]
    fn an_sqs_destination_takes_no_batching_and_at_most_seven_attributes() {
        let err = read(
            "AmazonSQS",
            json!({"connection": "aws", "queueUrl": URL, "maxEventsPerBatch": 10}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.maxEventsPerBatch");
        let mapping = |name: &str| json!({"name": name, "type": "Static", "properties": {"value": "v"}});
        let eight: Vec<Value> = (0..8).map(|i| mapping(&format!("p{i}"))).collect();
        let err = read(
            "AmazonSQS",
            json!({"connection": "aws", "queueUrl": URL, "deliveryAttributeMappings": eight}),
        )
        .unwrap_err();
        assert_eq!(err.field, "properties.deliveryAttributeMappings");
        for bad in ["AWS.trace", "a b", ".x", "x.", "a..b"] {
            let err = read(
                "AmazonSQS",
                json!({"connection": "aws", "queueUrl": URL, "deliveryAttributeMappings": [mapping("ok"), mapping(bad)]}),
            )
            .unwrap_err();
            assert_eq!(err.field, "properties.deliveryAttributeMappings[1].name", "{bad}");
        }
        assert!(
            read(
                "AmazonSQS",
                json!({"connection": "aws", "queueUrl": URL, "deliveryAttributeMappings": [mapping("team.name-1_x")]}),
            )
            .is_ok()
        );
    }

    #[test]
    fn an_unknown_sqs_connection_is_refused_naming_its_setting() {
        let err = queue(URL)
            .check_configured(&super::super::tests::Configured)
            .unwrap_err();
        assert_eq!(err.field, "properties.connection");
        assert!(err.problem.contains("EG__BROKERS__SQS__AWS__REGION"), "{err}");
    }

    #[test]
    fn fifo_messages_are_grouped_by_the_ordering_key_else_the_subject_and_deduplicated_by_event_id() {
        let standard = queue(URL);
        let fifo = queue("https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo");
        let e = event("/orders/1", json!({"account": "acct-7"}));
        assert_eq!(standard.fifo_ids(None, &routing(&e), "id-1"), None);
        assert_eq!(
            fifo.fifo_ids(None, &routing(&e), "id-1"),
            Some(FifoIds {
                group: "/orders/1".into(),
                deduplication: "id-1".into()
            })
        );
        let by_account = OrderBy::Data("account".into());
        assert_eq!(
            fifo.fifo_ids(Some(&by_account), &routing(&e), "id-1").unwrap().group,
            "acct-7"
        );
        let no_subject = event("", json!({}));
        assert_eq!(
            fifo.fifo_ids(None, &routing(&no_subject), "id-2").unwrap().group,
            DEFAULT_GROUP
        );
        let odd = event("/ordres/é", json!({}));
        let long_id = "x".repeat(200);
        let ids = fifo.fifo_ids(None, &routing(&odd), &long_id).unwrap();
        assert_eq!(ids.group.len(), 64, "a key SQS refuses is hashed");
        assert_eq!(ids.deduplication.len(), 64);
        assert_eq!(
            ids,
            fifo.fifo_ids(None, &routing(&odd), &long_id).unwrap(),
            "the same on every attempt"
        );
    }
}
