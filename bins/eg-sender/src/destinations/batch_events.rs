//! The events of a rendered batch one by one, for destinations that carry one event per
//! message (a storage queue message, a broker message). The batch was rendered once, in
//! the subscription's delivery schema with its output conversion, as a webhook would get
//! it; each event is cut out of that body as it was rendered, byte for byte, never parsed
//! and written again (which could reorder fields or change a number's spelling).

use serde_json::value::RawValue;

/// A delivery body that is neither a JSON array of events nor one event: a bug in the
/// render step, since it wrote the body.
#[derive(Debug, thiserror::Error)]
#[error("the rendered batch is not a JSON array of events nor one event: {0}")]
pub struct NotEvents(#[from] serde_json::Error);

/// Each event's JSON text in `body`: the elements of a JSON array (Event Grid and custom
/// schema deliveries, CloudEvents batches), or the whole body when it is one event (a
/// single CloudEvent).
pub fn events_of(body: &str) -> Result<Vec<&str>, NotEvents> {
    let events: Vec<&RawValue> = if body.trim_start().starts_with('[') {
        serde_json::from_str(body)?
    } else {
        vec![serde_json::from_str(body)?]
    };
    Ok(events.into_iter().map(|event| event.get().trim()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_array_is_cut_into_its_events_as_written() {
        let body = r#"[{"id":"a","data":{"n":1.50}},{"id":"b","s":"],["}]"#;
        assert_eq!(
            events_of(body).unwrap(),
            [r#"{"id":"a","data":{"n":1.50}}"#, r#"{"id":"b","s":"],["}"#]
        );
        assert_eq!(
            events_of(r#" [ {"id":"a"} , {"id":"b"} ] "#).unwrap(),
            [r#"{"id":"a"}"#, r#"{"id":"b"}"#]
        );
        assert_eq!(events_of("[]").unwrap(), Vec::<&str>::new());
    }

    #[test]
    fn one_cloud_event_is_the_whole_body() {
        let body = r#"{"specversion":"1.0","id":"a"}"#;
        assert_eq!(events_of(body).unwrap(), [body]);
    }

    #[test]
    fn a_body_that_is_not_events_is_an_error() {
        assert!(events_of(r#"[{"id":"a"}"#).is_err(), "unterminated");
        assert!(events_of(r#"[{"id":"a"} {"id":"b"}]"#).is_err(), "no comma");
        assert!(events_of(r#"[{"id":"a"}] x"#).is_err(), "trailing bytes");
        assert!(events_of(r#"[{"id":}]"#).is_err(), "not JSON");
    }
}
