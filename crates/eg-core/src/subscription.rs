//! Event subscriptions (spec §2) as validated types, read from and written back to
//! Event Grid's resource layout so existing Event Grid JSON reads naturally.
//!
//! A subscription value can only exist valid ("parse, don't validate"): every range of
//! §2 is checked in `Subscription::from_resource`, and each refusal names its field.

use crate::api_error::InvalidField;
use crate::event::json_type;
use crate::routing::Routing;
use crate::filter::EventFilter;
use crate::names::{SubscriptionName, TopicName};
use crate::time::UnixMillis;
use chrono::DateTime;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::time::Duration;

pub const MAX_DELIVERY_HEADERS: usize = 10;
pub const MAX_HEADER_VALUE_BYTES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    pub name: SubscriptionName,
    pub topic: TopicName,
    /// The full webhook URL. Its query may hold a secret: shown only by `getFullUrl`.
    pub endpoint_url: String,
    pub filter: EventFilter,
    pub retry_policy: RetryPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterDestination>,
    pub batching: BatchSettings,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivery_headers: Vec<DeliveryHeader>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_time: Option<UnixMillis>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    max_delivery_attempts: u32,
    event_time_to_live_in_minutes: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_delivery_attempts: 30,
            event_time_to_live_in_minutes: 1440,
        }
    }
}

impl RetryPolicy {
    /// `maxDeliveryAttempts` 1–30, `eventTimeToLiveInMinutes` 1–1440.
    pub fn new(max_delivery_attempts: u32, ttl_minutes: u32) -> Result<Self, InvalidField> {
        if !(1..=30).contains(&max_delivery_attempts) {
            return Err(InvalidField::new(
                "maxDeliveryAttempts",
                format!("must be between 1 and 30, got {max_delivery_attempts}"),
            ));
        }
        if !(1..=1440).contains(&ttl_minutes) {
            return Err(InvalidField::new(
                "eventTimeToLiveInMinutes",
                format!("must be between 1 and 1440, got {ttl_minutes}"),
            ));
        }
        Ok(Self {
            max_delivery_attempts,
            event_time_to_live_in_minutes: ttl_minutes,
        })
    }

    pub fn max_delivery_attempts(&self) -> u32 {
        self.max_delivery_attempts
    }

    pub fn event_time_to_live(&self) -> Duration {
        Duration::from_secs(u64::from(self.event_time_to_live_in_minutes) * 60)
    }
}

/// A local directory destination laid out like an Event Grid blob container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterDestination {
    pub container_name: String,
}

impl DeadLetterDestination {
    /// Container names follow Azure's rules (3–63 of `[a-z0-9-]`, starting with a letter
    /// or digit, no `--`), which also keeps them from escaping the dead-letter root.
    pub fn new(container_name: &str) -> Result<Self, InvalidField> {
        let field = "containerName";
        let len = container_name.len();
        let valid_chars = container_name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !(3..=63).contains(&len)
            || !valid_chars
            || container_name.starts_with('-')
            || container_name.ends_with('-')
            || container_name.contains("--")
        {
            return Err(InvalidField::new(
                field,
                format!(
                    "{container_name:?} is not a valid container name: 3-63 lower-case letters, digits or single hyphens, starting and ending with a letter or digit"
                ),
            ));
        }
        Ok(Self {
            container_name: container_name.to_owned(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchSettings {
    pub max_events_per_batch: u32,
    pub preferred_batch_size_in_kilobytes: u32,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            max_events_per_batch: 1,
            preferred_batch_size_in_kilobytes: 64,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryHeader {
    pub name: String,
    pub value: HeaderValueSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum HeaderValueSource {
    Static { value: String, is_secret: bool },
    Dynamic { source_field: String },
}

impl DeliveryHeader {
    /// The header's value for one event; `None` when a dynamic source field is missing
    /// or is not a string, number or boolean.
    pub fn value_for(&self, event: &Value) -> Option<String> {
        match &self.value {
            HeaderValueSource::Static { value, .. } => Some(value.clone()),
            HeaderValueSource::Dynamic { source_field } => {
                let found = source_field.split('.').try_fold(event, |v, key| v.get(key))?;
                match found {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    Value::Bool(b) => Some(b.to_string()),
                    _ => None,
                }
            }
        }
    }
}

impl Subscription {
    /// Reads a `PUT …/eventSubscriptions/{name}` body.
    pub fn from_resource(
        topic: TopicName,
        name: SubscriptionName,
        body: &Value,
        now: UnixMillis,
    ) -> Result<Self, InvalidField> {
        let props = object_at(body, "properties")?;
        let (endpoint_url, batching, delivery_headers) = destination(props).map_err(|e| e.within("properties"))?;
        let filter = match props.get("filter") {
            None | Some(Value::Null) => EventFilter::default(),
            Some(v) => EventFilter::from_json(v).map_err(|e| e.within("properties.filter"))?,
        };
        match props.get("eventDeliverySchema") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "EventGridSchema" => {}
            Some(other) => {
                return Err(InvalidField::new(
                    "properties.eventDeliverySchema",
                    format!("only \"EventGridSchema\" is supported by this version of eg, got {other}"),
                ));
            }
        }
        let retry_policy = match props.get("retryPolicy") {
            None | Some(Value::Null) => RetryPolicy::default(),
            Some(v) => retry_policy(v).map_err(|e| e.within("properties.retryPolicy"))?,
        };
        let dead_letter = match props.get("deadLetterDestination") {
            None | Some(Value::Null) => None,
            Some(v) => Some(dead_letter_destination(v).map_err(|e| e.within("properties.deadLetterDestination"))?),
        };
        let expiration_time = match props.get("expirationTimeUtc") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                let field = "properties.expirationTimeUtc";
                let at = DateTime::parse_from_rfc3339(s)
                    .map_err(|_| InvalidField::new(field, format!("{s:?} is not an RFC 3339 timestamp")))?;
                let at = UnixMillis(at.timestamp_millis());
                if at <= now {
                    return Err(InvalidField::new(field, "must be in the future"));
                }
                Some(at)
            }
            Some(other) => {
                return Err(InvalidField::new(
                    "properties.expirationTimeUtc",
                    format!("must be a string, got {}", json_type(other)),
                ));
            }
        };
        for key in props.keys() {
            if !matches!(
                key.as_str(),
                "destination"
                    | "filter"
                    | "eventDeliverySchema"
                    | "retryPolicy"
                    | "deadLetterDestination"
                    | "expirationTimeUtc"
                    | "labels"
                    | "topic"
                    | "provisioningState"
            ) {
                return Err(InvalidField::new(
                    format!("properties.{key}"),
                    "not a known subscription property",
                ));
            }
        }
        Ok(Self {
            name,
            topic,
            endpoint_url,
            filter,
            retry_policy,
            dead_letter,
            batching,
            delivery_headers,
            expiration_time,
        })
    }

    /// The resource as `GET` shows it: the endpoint's base URL only, no secret header values.
    pub fn to_resource(&self) -> Value {
        let headers: Vec<Value> = self
            .delivery_headers
            .iter()
            .map(|h| match &h.value {
                HeaderValueSource::Static { value, is_secret } => json!({
                    "name": h.name, "type": "Static",
                    "properties": if *is_secret { json!({"isSecret": true}) } else { json!({"value": value, "isSecret": false}) },
                }),
                HeaderValueSource::Dynamic { source_field } => json!({
                    "name": h.name, "type": "Dynamic", "properties": {"sourceField": source_field},
                }),
            })
            .collect();
        let mut destination_props = json!({
            "endpointBaseUrl": base_url(&self.endpoint_url),
            "maxEventsPerBatch": self.batching.max_events_per_batch,
            "preferredBatchSizeInKilobytes": self.batching.preferred_batch_size_in_kilobytes,
        });
        if !headers.is_empty() {
            destination_props["deliveryAttributeMappings"] = Value::Array(headers);
        }
        let mut props = json!({
            "topic": format!("/topics/{}", self.topic),
            "provisioningState": "Succeeded",
            "destination": {"endpointType": "WebHook", "properties": destination_props},
            "filter": self.filter,
            "eventDeliverySchema": "EventGridSchema",
            "retryPolicy": self.retry_policy,
        });
        if let Some(dl) = &self.dead_letter {
            props["deadLetterDestination"] =
                json!({"endpointType": "LocalDirectory", "properties": {"containerName": dl.container_name}});
        }
        if let Some(at) = self.expiration_time {
            props["expirationTimeUtc"] = Value::String(at.to_rfc3339());
        }
        json!({
            "id": format!("/topics/{}/eventSubscriptions/{}", self.topic, self.name),
            "name": self.name,
            "type": "Microsoft.EventGrid/eventSubscriptions",
            "properties": props,
        })
    }

    /// Whether a published event goes to this subscription.
    pub fn matches(&self, event: &Routing<'_>, now: UnixMillis) -> bool {
        self.expiration_time.is_none_or(|at| now < at) && self.filter.matches(event)
    }
}

/// Scheme, host, port and path: the URL without its query or fragment, which may hold secrets.
pub fn base_url(full: &str) -> String {
    match url::Url::parse(full) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.to_string()
        }
        Err(_) => String::new(),
    }
}

fn object_at<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, InvalidField> {
    match v.get(field) {
        Some(Value::Object(map)) => Ok(map),
        Some(other) => Err(InvalidField::new(
            field,
            format!("must be an object, got {}", json_type(other)),
        )),
        None => Err(InvalidField::new(field, "is required")),
    }
}

fn destination(props: &Map<String, Value>) -> Result<(String, BatchSettings, Vec<DeliveryHeader>), InvalidField> {
    let dest = props
        .get("destination")
        .ok_or_else(|| InvalidField::new("destination", "is required"))?;
    match dest.get("endpointType") {
        Some(Value::String(t)) if t == "WebHook" => {}
        Some(other) => {
            return Err(InvalidField::new(
                "destination.endpointType",
                format!("only \"WebHook\" is supported, got {other}"),
            ));
        }
        None => return Err(InvalidField::new("destination.endpointType", "is required")),
    }
    let dp = object_at(dest, "properties").map_err(|e| e.within("destination"))?;
    let field = "destination.properties.endpointUrl";
    let endpoint_url = match dp.get("endpointUrl") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(InvalidField::new(field, "must be a string")),
        None => return Err(InvalidField::new(field, "is required")),
    };
    let parsed =
        url::Url::parse(&endpoint_url).map_err(|e| InvalidField::new(field, format!("is not an absolute URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(InvalidField::new(field, "must be an http or https URL with a host"));
    }
    let batching = BatchSettings {
        max_events_per_batch: ranged_u32(dp, "maxEventsPerBatch", 1, 5000, 1)
            .map_err(|e| e.within("destination.properties"))?,
        preferred_batch_size_in_kilobytes: ranged_u32(dp, "preferredBatchSizeInKilobytes", 1, 1024, 64)
            .map_err(|e| e.within("destination.properties"))?,
    };
    let headers = match dp.get("deliveryAttributeMappings") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => delivery_headers(v).map_err(|e| e.within("destination.properties"))?,
    };
    Ok((endpoint_url, batching, headers))
}

fn ranged_u32(map: &Map<String, Value>, field: &str, min: u32, max: u32, default: u32) -> Result<u32, InvalidField> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (u64::from(min)..=u64::from(max)).contains(&n) => Ok(n as u32),
            _ => Err(InvalidField::new(
                field,
                format!("must be an integer between {min} and {max}, got {v}"),
            )),
        },
    }
}

fn retry_policy(v: &Value) -> Result<RetryPolicy, InvalidField> {
    let Value::Object(map) = v else {
        return Err(InvalidField::new("", "must be an object"));
    };
    let attempts = ranged_u32(map, "maxDeliveryAttempts", 1, 30, 30)?;
    let ttl = ranged_u32(map, "eventTimeToLiveInMinutes", 1, 1440, 1440)?;
    RetryPolicy::new(attempts, ttl)
}

fn dead_letter_destination(v: &Value) -> Result<DeadLetterDestination, InvalidField> {
    match v.get("endpointType") {
        Some(Value::String(t)) if t == "LocalDirectory" || t == "StorageBlob" => {}
        _ => {
            return Err(InvalidField::new(
                "endpointType",
                "must be \"LocalDirectory\" (a directory laid out like a blob container)",
            ));
        }
    }
    let props = object_at(v, "properties")?;
    match props.get("containerName") {
        Some(Value::String(name)) => DeadLetterDestination::new(name).map_err(|e| e.within("properties")),
        _ => Err(InvalidField::new(
            "properties.containerName",
            "is required and must be a string",
        )),
    }
}

fn delivery_headers(v: &Value) -> Result<Vec<DeliveryHeader>, InvalidField> {
    let field = "deliveryAttributeMappings";
    let Value::Array(items) = v else {
        return Err(InvalidField::new(field, "must be an array"));
    };
    if items.len() > MAX_DELIVERY_HEADERS {
        return Err(InvalidField::new(
            field,
            format!("at most {MAX_DELIVERY_HEADERS} headers, got {}", items.len()),
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = |sub: &str| format!("{field}[{i}].{sub}");
            let name = match item.get("name") {
                Some(Value::String(n)) if is_http_token(n) => n.clone(),
                _ => return Err(InvalidField::new(at("name"), "must be a valid HTTP header name")),
            };
            if name.to_ascii_lowercase().starts_with("aeg-") {
                return Err(InvalidField::new(at("name"), "must not start with \"aeg-\" (reserved)"));
            }
            if seen.iter().any(|s| s.eq_ignore_ascii_case(&name)) {
                return Err(InvalidField::new(at("name"), format!("{name:?} is given twice")));
            }
            seen.push(name.clone());
            let props = item.get("properties").cloned().unwrap_or(Value::Null);
            let value = match item.get("type").and_then(Value::as_str) {
                Some("Static") => {
                    let value = match props.get("value") {
                        Some(Value::String(s)) if s.len() <= MAX_HEADER_VALUE_BYTES && !s.contains(['\r', '\n']) => {
                            s.clone()
                        }
                        _ => {
                            return Err(InvalidField::new(
                                at("properties.value"),
                                format!("must be a single-line string of at most {MAX_HEADER_VALUE_BYTES} bytes"),
                            ));
                        }
                    };
                    let is_secret = props.get("isSecret").and_then(Value::as_bool).unwrap_or(false);
                    HeaderValueSource::Static { value, is_secret }
                }
                Some("Dynamic") => match props.get("sourceField") {
                    Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => HeaderValueSource::Dynamic {
                        source_field: s.clone(),
                    },
                    _ => {
                        return Err(InvalidField::new(
                            at("properties.sourceField"),
                            "must be a non-empty string",
                        ));
                    }
                },
                _ => return Err(InvalidField::new(at("type"), "must be \"Static\" or \"Dynamic\"")),
            };
            Ok(DeliveryHeader { name, value })
        })
        .collect()
}

fn is_http_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<Subscription, InvalidField> {
        Subscription::from_resource(
            TopicName::parse("orders").unwrap(),
            SubscriptionName::parse("billing").unwrap(),
            &body,
            UnixMillis(0),
        )
    }

    fn body() -> Value {
        json!({"properties": {
            "destination": {"endpointType": "WebHook", "properties": {"endpointUrl": "https://hooks.example/in?code=secret"}},
            "filter": {"includedEventTypes": ["A"]},
            "retryPolicy": {"maxDeliveryAttempts": 5, "eventTimeToLiveInMinutes": 60},
            "deadLetterDestination": {"endpointType": "LocalDirectory", "properties": {"containerName": "dead-letters"}}
        }})
    }

    #[test]
    fn reads_event_grid_resource_json() {
        let s = parse(body()).unwrap();
        assert_eq!(s.retry_policy.max_delivery_attempts(), 5);
        assert_eq!(s.retry_policy.event_time_to_live(), Duration::from_secs(3600));
        assert_eq!(s.dead_letter.unwrap().container_name, "dead-letters");
        assert_eq!(s.batching, BatchSettings::default());
    }

    #[test]
    fn get_never_shows_the_full_url_or_secrets() {
        let mut b = body();
        b["properties"]["destination"]["properties"]["deliveryAttributeMappings"] =
            json!([{"name": "X-Key", "type": "Static", "properties": {"value": "hunter2", "isSecret": true}}]);
        let shown = parse(b).unwrap().to_resource().to_string();
        assert!(!shown.contains("secret"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("https://hooks.example/in"), "{shown}");
    }

    #[test]
    fn ranges_are_enforced_naming_the_field() {
        let mut b = body();
        b["properties"]["retryPolicy"]["maxDeliveryAttempts"] = json!(31);
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.retryPolicy.maxDeliveryAttempts"
        );
        let mut b = body();
        b["properties"]["retryPolicy"]["eventTimeToLiveInMinutes"] = json!(0);
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.retryPolicy.eventTimeToLiveInMinutes"
        );
        let mut b = body();
        b["properties"]["destination"]["properties"]["maxEventsPerBatch"] = json!(5001);
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.destination.properties.maxEventsPerBatch"
        );
        let mut b = body();
        b["properties"]["destination"]["properties"]["endpointUrl"] = json!("ftp://x");
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.destination.properties.endpointUrl"
        );
        let mut b = body();
        b["properties"]["deadLetterDestination"]["properties"]["containerName"] = json!("../etc");
        assert_eq!(
            parse(b).unwrap_err().field,
            "properties.deadLetterDestination.properties.containerName"
        );
    }

    #[test]
    fn header_rules_are_enforced() {
        let with = |h: Value| {
            let mut b = body();
            b["properties"]["destination"]["properties"]["deliveryAttributeMappings"] = h;
            parse(b)
        };
        let err = with(json!([{"name": "aeg-x", "type": "Static", "properties": {"value": "v"}}])).unwrap_err();
        assert!(err.field.ends_with("[0].name"), "{err}");
        let err = with(json!([{"name": "bad name", "type": "Static", "properties": {"value": "v"}}])).unwrap_err();
        assert!(err.field.ends_with("[0].name"), "{err}");
        let many: Vec<Value> = (0..11)
            .map(|i| json!({"name": format!("h{i}"), "type": "Static", "properties": {"value": "v"}}))
            .collect();
        assert!(with(Value::Array(many)).is_err());
        let long = json!([{"name": "h", "type": "Static", "properties": {"value": "x".repeat(4097)}}]);
        assert!(with(long).is_err());
    }

    #[test]
    fn dynamic_headers_take_scalar_fields_only() {
        let h = DeliveryHeader {
            name: "h".into(),
            value: HeaderValueSource::Dynamic {
                source_field: "data.k".into(),
            },
        };
        assert_eq!(h.value_for(&json!({"data": {"k": 5}})), Some("5".into()));
        assert_eq!(h.value_for(&json!({"data": {"k": {"x": 1}}})), None);
        assert_eq!(h.value_for(&json!({"data": {}})), None);
    }

    #[test]
    fn expired_subscriptions_stop_matching() {
        let mut b = body();
        b["properties"]["expirationTimeUtc"] = json!("1970-01-01T00:00:01Z");
        let s = parse(b).unwrap();
        let fields = serde_json::Map::new();
        let e = Routing {
            event_type: "A",
            subject: "s",
            fields: &fields,
        };
        assert!(s.matches(&e, UnixMillis(0)));
        assert!(!s.matches(&e, UnixMillis(1000)));
    }
}
