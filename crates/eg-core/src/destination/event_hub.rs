//! An Azure event hub (Event Grid's `EventHub`), written as Event Grid writes it: the
//! `resourceId` of the hub, `/subscriptions/…/providers/Microsoft.EventHub/namespaces/<namespace>/eventhubs/<hub>`.
//!
//! eg delivers through the namespace's Kafka endpoint, so an event hub is a Kafka topic
//! of a connection eg builds from the namespace's connection string
//! (`EG__BROKERS__EVENT_HUBS__<NAMESPACE>__CONNECTION_STRING`): the operator configures
//! the namespace once, and subscriptions name it by resource id as they do in Azure.
//!
//! One record per event. The record's key (what Event Hubs calls the partition key) is
//! the delivery property named `PartitionKey` when the subscription sets one, else none,
//! so records are spread over the hub's partitions as Event Grid spreads its events.

use super::{Kafka, Kind, NamedConnections, RecordKey, required_string};
use crate::api_error::InvalidField;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The delivery property whose value becomes a record's key.
pub const PARTITION_KEY_PROPERTY: &str = "PartitionKey";

/// An event hub of a namespace configured in eg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventHub {
    /// The namespace as the resource id spells it (`contoso-events`).
    pub namespace: String,
    pub hub: String,
    /// As written, shown back.
    pub resource_id: String,
}

impl EventHub {
    /// The settings section of Event Hubs namespaces (`EG__BROKERS__EVENT_HUBS__<NAME>__…`).
    pub const CONNECTIONS: &str = "event_hubs";

    /// The name the namespace is configured under: its name in lower case with `-` as
    /// `_` (settings keys cannot hold a hyphen; namespace names cannot hold `_`).
    pub fn connection(&self) -> String {
        namespace_connection(&self.namespace)
    }

    /// The Kafka topic this hub is, on the connection [`EventHub::connection`] names.
    pub fn as_kafka(&self) -> Kafka {
        Kafka {
            connection: self.connection(),
            topic: self.hub.clone(),
            key: RecordKey::FromDeliveryProperty(PARTITION_KEY_PROPERTY.to_owned()),
        }
    }
}

/// The configuration name of the Event Hubs namespace `namespace`.
pub fn namespace_connection(namespace: &str) -> String {
    namespace.to_ascii_lowercase().replace('-', "_")
}

impl Kind for EventHub {
    const ENDPOINT_TYPE: &'static str = "EventHub";
    const OWN: &'static [&'static str] = &["resourceId"];
    const SHARED: &'static [&'static str] = &["deliveryAttributeMappings"];
    const SINCE_CAPABILITIES: bool = true;

    fn read(props: &Map<String, Value>) -> Result<Self, InvalidField> {
        let resource_id = required_string(props, "resourceId")?;
        let (namespace, hub) = namespace_and_hub(&resource_id)?;
        Ok(Self {
            namespace,
            hub,
            resource_id,
        })
    }

    fn show(&self) -> Map<String, Value> {
        let mut props = Map::new();
        props.insert("resourceId".to_owned(), json!(self.resource_id));
        props
    }

    fn check_configured(&self, configured: &impl NamedConnections) -> Result<(), InvalidField> {
        if configured.has_broker_connection(Self::CONNECTIONS, &self.connection()) {
            return Ok(());
        }
        Err(InvalidField::new(
            "properties.resourceId",
            format!(
                "eg has no configuration for the Event Hubs namespace {:?}: an operator must add it (EG__BROKERS__EVENT_HUBS__{}__CONNECTION_STRING) before subscriptions can deliver there",
                self.namespace,
                self.connection().to_ascii_uppercase()
            ),
        ))
    }

    fn identity(&self) -> String {
        format!("eventhub://{}/{}", self.connection(), self.hub)
    }
}

/// The namespace and hub of `/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.EventHub/namespaces/<namespace>/eventhubs/<hub>`
/// (segment names compared as Azure does, ignoring case), each checked against Azure's
/// naming rules.
fn namespace_and_hub(resource_id: &str) -> Result<(String, String), InvalidField> {
    let field = "properties.resourceId";
    let parts: Vec<&str> = resource_id.trim_matches('/').split('/').collect();
    let shaped = parts.len() == 10
        && parts[0].eq_ignore_ascii_case("subscriptions")
        && parts[2].eq_ignore_ascii_case("resourceGroups")
        && parts[4].eq_ignore_ascii_case("providers")
        && parts[5].eq_ignore_ascii_case("Microsoft.EventHub")
        && parts[6].eq_ignore_ascii_case("namespaces")
        && parts[8].eq_ignore_ascii_case("eventhubs")
        && parts.iter().all(|p| !p.is_empty());
    if !shaped {
        return Err(InvalidField::new(
            field,
            format!(
                "{resource_id:?} is not an event hub id: expected /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.EventHub/namespaces/<namespace>/eventhubs/<hub>"
            ),
        ));
    }
    let (namespace, hub) = (parts[7], parts[9]);
    let starts_with_letter = namespace.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let ends_alnum = namespace.chars().last().is_some_and(|c| c.is_ascii_alphanumeric());
    if !((6..=50).contains(&namespace.len())
        && starts_with_letter
        && ends_alnum
        && namespace.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    {
        return Err(InvalidField::new(
            field,
            format!(
                "{namespace:?} is not an Event Hubs namespace name: 6-50 letters, digits or hyphens, starting with a letter and ending with a letter or digit"
            ),
        ));
    }
    let hub_edges = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !((1..=256).contains(&hub.len())
        && hub_edges(hub.chars().next())
        && hub_edges(hub.chars().last())
        && hub
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(InvalidField::new(
            field,
            format!(
                "{hub:?} is not an event hub name: 1-256 letters, digits, '.', '_' or '-', starting and ending with a letter or digit"
            ),
        ));
    }
    Ok((namespace.to_owned(), hub.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Configured, read, reads_back};
    use super::super::{RecordKey, Target};
    use serde_json::json;

    const HUB: &str =
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/Contoso-Events/eventhubs/orders";

    #[test]
    fn an_event_hub_as_event_grid_writes_it_is_a_kafka_topic_of_its_namespace() {
        let target = read("EventHub", json!({"resourceId": HUB})).unwrap();
        reads_back(&target);
        let Target::EventHub(hub) = &target else {
            panic!("{target:?}")
        };
        assert_eq!(hub.namespace, "Contoso-Events");
        assert_eq!(hub.connection(), "contoso_events", "the settings name");
        let kafka = hub.as_kafka();
        assert_eq!(
            (kafka.connection.as_str(), kafka.topic.as_str()),
            ("contoso_events", "orders")
        );
        assert_eq!(kafka.key, RecordKey::FromDeliveryProperty("PartitionKey".to_owned()));
        assert_eq!(
            kafka.key.of_event(r#"{"id":"e-1"}"#),
            None,
            "the sender reads it from the headers"
        );
        assert_eq!(target.display_name(), "eventhub://contoso_events/orders");
        assert!(target.check_configured(&Configured).is_ok());
        assert_eq!(
            serde_json::to_value(&target).unwrap()["kind"],
            "eventHub",
            "the stored tag"
        );
        // Segment names are Azure's, in any case.
        assert!(
            read(
                "EventHub",
                json!({"resourceId": HUB.replace("Microsoft.EventHub", "microsoft.eventhub")})
            )
            .is_ok()
        );
    }

    #[test]
    fn event_hub_ids_and_names_are_checked_naming_the_field() {
        for (resource_id, says) in [
            (
                "/subscriptions/0/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/contoso-events",
                "is not an event hub id",
            ),
            (
                "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Storage/namespaces/contoso-events/eventhubs/h",
                "is not an event hub id",
            ),
            (
                "/subscriptions/0/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/ns/eventhubs/h",
                "is not an Event Hubs namespace name",
            ),
            (
                "/subscriptions/0/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/contoso_events/eventhubs/h",
                "is not an Event Hubs namespace name",
            ),
            (
                "/subscriptions/0/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/contoso-events/eventhubs/-h",
                "is not an event hub name",
            ),
        ] {
            let err = read("EventHub", json!({ "resourceId": resource_id })).unwrap_err();
            assert_eq!(err.field, "properties.resourceId");
            assert!(err.problem.contains(says), "{resource_id}: {err}");
        }
        let err = read("EventHub", json!({})).unwrap_err();
        assert_eq!(err.field, "properties.resourceId");
        let err = read("EventHub", json!({"resourceId": HUB, "maxEventsPerBatch": 10})).unwrap_err();
        assert_eq!(err.field, "properties.maxEventsPerBatch", "one event per record");
    }

    #[test]
    fn an_unconfigured_namespace_is_refused_naming_the_setting_that_adds_it() {
        let other = read(
            "EventHub",
            json!({"resourceId": HUB.replace("Contoso-Events", "fabrikam-hubs")}),
        )
        .unwrap();
        let err = other.check_configured(&Configured).unwrap_err();
        assert_eq!(err.field, "properties.resourceId");
        assert!(
            err.problem
                .contains("EG__BROKERS__EVENT_HUBS__FABRIKAM_HUBS__CONNECTION_STRING"),
            "{err}"
        );
    }
}
