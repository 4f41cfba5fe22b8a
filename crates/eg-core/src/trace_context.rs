//! W3C trace context (<https://www.w3.org/TR/trace-context/>) as eg keeps it with an
//! event: the `traceparent` that names the trace and the span an event belongs to, and
//! the vendors' `tracestate` that travels with it.
//!
//! A context comes from a publish request's `traceparent`/`tracestate` headers, or from
//! a CloudEvent's distributed-tracing extension attributes of the same names. It is kept
//! only when present and well formed: an event without one costs nothing, and a malformed
//! one is ignored for tracing, never a reason to refuse a publish (the publisher's event
//! matters more than its trace). Parsing is pure; spans and export live in
//! `eg_runtime::traces`.

/// The only `traceparent` version this parser reads in full; a higher version is read
/// by its first four fields, as the specification asks.
const VERSION_00: &str = "00";
/// The `sampled` bit of the trace flags.
const SAMPLED: u8 = 0x01;
/// The longest `tracestate` kept (the specification's 32 members of at most 256
/// characters would be 8 KiB; 512 bytes keeps a few vendors' entries and bounds the
/// bytes stored per delivery).
pub const MAX_TRACESTATE_LEN: usize = 512;

/// A well-formed W3C trace context: a parsed `traceparent` and its `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lower-case hex digits, not all zero.
    trace_id: String,
    /// 16 lower-case hex digits, not all zero: the span the context names as parent.
    parent_id: String,
    flags: u8,
    /// `None` when absent, empty, too long or not printable ASCII.
    tracestate: Option<String>,
}

impl TraceContext {
    /// The context of a `traceparent` value and, when given, a `tracestate` value;
    /// `None` when the `traceparent` is malformed (ignored for tracing, as the
    /// specification asks). A `tracestate` that cannot be kept is dropped alone.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let value = traceparent.trim();
        let mut parts = value.split('-');
        let (version, trace_id, parent_id, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let rest = parts.next();
        if !is_hex(version, 2) || version == "ff" {
            return None;
        }
        // Version 00 has exactly four fields; a later version may append more.
        if version == VERSION_00 && (rest.is_some() || value.len() != 55) {
            return None;
        }
        if !is_hex(trace_id, 32) || !is_hex(parent_id, 16) || !is_hex(flags, 2) {
            return None;
        }
        if all_zero(trace_id) || all_zero(parent_id) {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Self {
            trace_id: trace_id.to_owned(),
            parent_id: parent_id.to_owned(),
            flags,
            tracestate: tracestate.and_then(keepable_tracestate),
        })
    }

    /// The context a CloudEvent's distributed-tracing extension attributes carry
    /// (`traceparent`, `tracestate`, strings), if any and well formed.
    pub fn of_attributes(attributes: &serde_json::Map<String, serde_json::Value>) -> Option<Self> {
        let traceparent = attributes.get("traceparent")?.as_str()?;
        let tracestate = attributes.get("tracestate").and_then(serde_json::Value::as_str);
        Self::parse(traceparent, tracestate)
    }

    /// The same trace, continued by the span `span_id` (16 hex digits) with `sampled`
    /// as its decision: what eg sends on when its own span is the parent.
    pub fn child(&self, span_id: &str, sampled: bool) -> Option<Self> {
        if !is_hex(span_id, 16) || all_zero(span_id) {
            return None;
        }
        Some(Self {
            trace_id: self.trace_id.clone(),
            parent_id: span_id.to_ascii_lowercase(),
            flags: if sampled {
                self.flags | SAMPLED
            } else {
                self.flags & !SAMPLED
            },
            tracestate: self.tracestate.clone(),
        })
    }

    /// The `traceparent` value, version 00 (what eg stores and sends).
    pub fn traceparent(&self) -> String {
        format!("{VERSION_00}-{}-{}-{:02x}", self.trace_id, self.parent_id, self.flags)
    }

    /// The `tracestate` value, when there is one.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace's id: 32 lower-case hex digits.
    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// The parent span's id: 16 lower-case hex digits.
    pub fn parent_id(&self) -> &str {
        &self.parent_id
    }

    /// Whether the parent recorded its span (the `sampled` flag).
    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// The trace flags, as sent.
    pub fn flags(&self) -> u8 {
        self.flags
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn all_zero(s: &str) -> bool {
    s.bytes().all(|b| b == b'0')
}

/// A `tracestate` worth keeping: non-empty, bounded, printable ASCII (it is sent again
/// as a header value).
fn keepable_tracestate(value: &str) -> Option<String> {
    let value = value.trim();
    let printable = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    (!value.is_empty() && value.len() <= MAX_TRACESTATE_LEN && printable).then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PARENT: &str = "00f067aa0ba902b7";

    fn header(flags: &str) -> String {
        format!("00-{TRACE}-{PARENT}-{flags}")
    }

    #[test]
    fn a_well_formed_traceparent_parses_into_its_parts() {
        let context = TraceContext::parse(&header("01"), Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.trace_id(), TRACE);
        assert_eq!(context.parent_id(), PARENT);
        assert!(context.sampled());
        assert_eq!(context.tracestate(), Some("congo=t61rcWkgMzE"));
        assert_eq!(context.traceparent(), header("01"));
    }

    #[test]
    fn an_unsampled_context_is_kept_with_its_flag() {
        let context = TraceContext::parse(&header("00"), None).unwrap();
        assert!(!context.sampled());
        assert_eq!(context.traceparent(), header("00"));
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            String::new(),
            "garbage".to_owned(),
            format!("00-{}-{PARENT}-01", "0".repeat(32)),
            format!("00-{TRACE}-{}-01", "0".repeat(16)),
            format!("00-{}-{PARENT}-01", TRACE.to_uppercase()),
            format!("00-{TRACE}-{PARENT}-1"),
            format!("00-{TRACE}-{PARENT}-01-extra"),
            format!("ff-{TRACE}-{PARENT}-01"),
            format!("00-{TRACE}x-{PARENT}-01"),
        ] {
            assert_eq!(TraceContext::parse(&bad, None), None, "{bad:?} must not parse");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_four_fields() {
        let context = TraceContext::parse(&format!("01-{TRACE}-{PARENT}-01-more"), None).unwrap();
        assert_eq!(context.traceparent(), header("01"), "eg sends on version 00");
    }

    #[test]
    fn a_tracestate_that_cannot_be_kept_is_dropped_alone() {
        let long = "a=".to_owned() + &"b".repeat(MAX_TRACESTATE_LEN);
        for bad in ["", "  ", "a=\u{7}", long.as_str()] {
            let context = TraceContext::parse(&header("01"), Some(bad)).unwrap();
            assert_eq!(context.tracestate(), None, "{bad:?}");
        }
    }

    #[test]
    fn a_cloudevents_extension_attribute_carries_a_context() {
        let attributes = serde_json::json!({"id": "1", "traceparent": header("01"), "tracestate": "k=v"});
        let context = TraceContext::of_attributes(attributes.as_object().unwrap()).unwrap();
        assert_eq!(context.tracestate(), Some("k=v"));
        let not_a_string = serde_json::json!({"traceparent": 7});
        assert_eq!(TraceContext::of_attributes(not_a_string.as_object().unwrap()), None);
    }

    #[test]
    fn a_child_keeps_the_trace_and_names_the_new_span() {
        let context = TraceContext::parse(&header("00"), Some("k=v")).unwrap();
        let child = context.child("b7ad6b7169203331", true).unwrap();
        assert_eq!(child.traceparent(), format!("00-{TRACE}-b7ad6b7169203331-01"));
        assert_eq!(child.tracestate(), Some("k=v"));
        assert_eq!(context.child("0000000000000000", true), None);
    }
}
