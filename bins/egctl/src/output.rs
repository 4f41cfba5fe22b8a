//! How answers are shown: plain tables for people (no borders, so `grep` and `awk`
//! work on them), or the API's JSON as it came with `--json`.

use comfy_table::{Table, presets};
use serde_json::Value;
use std::io::Write;

/// A table with a header row and one line per row, columns padded to line up.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut table = Table::new();
    table.load_style(presets::NOTHING);
    table.set_header(headers.iter().map(|h| h.to_owned()));
    for row in rows {
        table.add_row(row);
    }
    indent_free(&table)
}

/// Two columns, name and value, for one resource.
pub fn fields(pairs: Vec<(&str, String)>) -> String {
    let mut table = Table::new();
    table.load_style(presets::NOTHING);
    for (name, value) in pairs {
        table.add_row(vec![format!("{name}:"), value]);
    }
    indent_free(&table)
}

/// comfy-table pads every cell with one space on the left: drop that column of spaces
/// (and trailing ones) so output starts at the margin.
fn indent_free(table: &Table) -> String {
    let mut out = String::new();
    for line in table.trim_fmt().lines() {
        out.push_str(line.strip_prefix(' ').unwrap_or(line));
        out.push('\n');
    }
    out
}

/// A JSON value as one cell: strings without quotes, `-` for null or missing, arrays of
/// scalars joined with commas, anything else as compact JSON.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.is_empty() => "-".to_owned(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "-".to_owned(),
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            items.iter().map(cell).collect::<Vec<_>>().join(",")
        }
        Value::Number(n) if n.is_f64() => n.as_f64().map_or_else(|| n.to_string(), decimal),
        other => other.to_string(),
    }
}

/// A fractional number for people: two decimals, without a useless `.00`.
pub fn decimal(x: f64) -> String {
    let text = format!("{x:.2}");
    match text.strip_suffix(".00") {
        Some(whole) if whole != "-0" => whole.to_owned(),
        Some(_) => "0".to_owned(),
        None => text,
    }
}

/// Pretty JSON, newline-terminated.
pub fn json(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

/// Writes to stdout. A closed pipe (`egctl … | head`) ends output quietly instead of
/// panicking as `print!` would.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Renders any JSON object for people, whatever fields it has: scalars as a field
/// list, arrays of objects as tables (columns are the union of their fields, nested
/// objects flattened as `a.b`), nested objects as titled sections. Used for answers
/// whose shape egctl does not fix (`/admin/status`).
pub fn generic(value: &Value) -> String {
    let mut out = String::new();
    generic_into(&mut out, None, value);
    out
}

fn generic_into(out: &mut String, title: Option<&str>, value: &Value) {
    let Value::Object(object) = value else {
        section(out, title, &format!("{}\n", cell(value)));
        return;
    };
    let scalars: Vec<(&str, String)> = object
        .iter()
        .filter(|(_, v)| !is_nested(v))
        .map(|(k, v)| (k.as_str(), cell(v)))
        .collect();
    if !scalars.is_empty() {
        section(out, title, &fields(scalars));
    }
    for (key, v) in object.iter().filter(|(_, v)| is_nested(v)) {
        let name = title.map_or_else(|| key.clone(), |t| format!("{t}.{key}"));
        match v {
            Value::Array(items) => section(out, Some(&name), &rows_table(items)),
            nested => generic_into(out, Some(&name), nested),
        }
    }
}

fn is_nested(value: &Value) -> bool {
    match value {
        Value::Object(_) => true,
        Value::Array(items) => items.iter().any(Value::is_object),
        _ => false,
    }
}

fn section(out: &mut String, title: Option<&str>, body: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    if let Some(title) = title {
        out.push_str(&format!("{title}\n"));
    }
    out.push_str(body);
}

/// A table of objects: one row each, columns in first-seen order.
fn rows_table(items: &[Value]) -> String {
    let flat: Vec<Vec<(String, String)>> = items.iter().map(|item| flatten(None, item)).collect();
    let mut columns: Vec<String> = Vec::new();
    for (key, _) in flat.iter().flatten() {
        if !columns.contains(key) {
            columns.push(key.clone());
        }
    }
    let rows = flat
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| {
                    row.iter()
                        .find(|(k, _)| k == c)
                        .map_or_else(|| "-".to_owned(), |(_, v)| v.clone())
                })
                .collect()
        })
        .collect();
    let headers: Vec<&str> = columns.iter().map(String::as_str).collect();
    table(&headers, rows)
}

fn flatten(prefix: Option<&str>, value: &Value) -> Vec<(String, String)> {
    match value {
        Value::Object(object) => object
            .iter()
            .flat_map(|(k, v)| {
                let key = prefix.map_or_else(|| k.clone(), |p| format!("{p}.{k}"));
                flatten(Some(&key), v)
            })
            .collect(),
        other => vec![(prefix.unwrap_or("value").to_owned(), cell(other))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_line_up_without_borders() {
        let text = table(
            &["NAME", "N"],
            vec![vec!["a".into(), "1".into()], vec!["bbb".into(), "22".into()]],
        );
        assert_eq!(text, "NAME  N\na     1\nbbb   22\n");
    }

    #[test]
    fn cells_show_json_values_plainly() {
        assert_eq!(cell(&json!(null)), "-");
        assert_eq!(cell(&json!("x")), "x");
        assert_eq!(cell(&json!(["a", "b"])), "a,b");
        assert_eq!(cell(&json!(3)), "3");
        assert_eq!(cell(&json!(0.018917)), "0.02");
        assert_eq!(cell(&json!(2.0)), "2");
        assert_eq!(cell(&json!({"a": 1})), r#"{"a":1}"#);
    }

    #[test]
    fn generic_output_shows_any_shape() {
        let value = json!({
            "version": "1", "uptime": 3,
            "topics": [{"name": "t", "rates": {"in": 1}}, {"name": "u", "extra": true}],
            "queues": {"ready": 2},
        });
        let text = generic(&value);
        assert!(text.contains("version:"), "{text}");
        assert!(text.contains("topics\nname  rates.in  extra"), "{text}");
        assert!(text.contains("queues\nready:"), "{text}");
    }
}
