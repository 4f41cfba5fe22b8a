//! Topics (spec §1): a named place to publish to, with an input schema.

use crate::api_error::InvalidField;
use crate::names::TopicName;
use crate::profile::DeliveryProfile;
use crate::schema::InputSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};


#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Topic {
    pub name: TopicName,
    pub input_schema: InputSchema,
    #[serde(default)]
    pub profile: DeliveryProfile,
}

impl Topic {
    /// Reads a `PUT /admin/topics/{topic}` body (which may be empty).
    pub fn from_resource(name: TopicName, body: &Value) -> Result<Self, InvalidField> {
        let input_schema = match body.get("properties") {
            None | Some(Value::Null) => InputSchema::default(),
            Some(Value::Object(props)) => {
                if let Some(key) = props
                    .keys()
                    .find(|k| !matches!(k.as_str(), "inputSchema" | "endpoint" | "provisioningState"))
                {
                    return Err(InvalidField::new(
                        format!("properties.{key}"),
                        "not a known topic property",
                    ));
                }
                match props.get("inputSchema") {
                    None | Some(Value::Null) => InputSchema::default(),
                    Some(Value::String(s)) if s == "EventGridSchema" => InputSchema::EventGridSchema,
                    Some(other) => {
                        return Err(InvalidField::new(
                            "properties.inputSchema",
                            format!("only \"EventGridSchema\" is supported by this version of eg, got {other}"),
                        ));
                    }
                }
            }
            Some(_) => return Err(InvalidField::new("properties", "must be an object")),
        };
        Ok(Self {
            name,
            input_schema,
            profile: DeliveryProfile::default(),
        })
    }

    /// The id stamped into each event's `topic` field.
    pub fn id(&self) -> String {
        format!("/topics/{}", self.name)
    }

    /// The resource as the management API shows it; `public_base` is the ingress's public URL.
    pub fn to_resource(&self, public_base: &str) -> Value {
        json!({
            "id": self.id(),
            "name": self.name,
            "type": "Microsoft.EventGrid/topics",
            "properties": {
                "endpoint": format!("{}/topics/{}/api/events", public_base.trim_end_matches('/'), self.name),
                "inputSchema": self.input_schema,
                "provisioningState": "Succeeded",
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_renders_the_publish_endpoint() {
        let t = Topic::from_resource(TopicName::parse("orders").unwrap(), &json!({})).unwrap();
        let r = t.to_resource("http://localhost:8080/");
        assert_eq!(
            r["properties"]["endpoint"],
            "http://localhost:8080/topics/orders/api/events"
        );
        assert_eq!(r["properties"]["inputSchema"], "EventGridSchema");
    }

    #[test]
    fn refuses_unknown_schemas_and_properties() {
        let name = || TopicName::parse("orders").unwrap();
        let err = Topic::from_resource(name(), &json!({"properties": {"inputSchema": "Avro"}})).unwrap_err();
        assert_eq!(err.field, "properties.inputSchema");
        let err = Topic::from_resource(name(), &json!({"properties": {"colour": 1}})).unwrap_err();
        assert_eq!(err.field, "properties.colour");
    }
}
