//! Reading Prometheus text: the `/metrics` pages of the tiers, summed over the samples
//! a test asks about. Fetching them is [`System`](crate::System)'s job.

use std::collections::HashMap;

/// The sum of every sample of metric `name` whose labels include all of `labels`
/// (Prometheus text format); 0 when there is none.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(parse_sample)
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v)))
        .map(|(_, _, value)| value)
        .sum()
}

fn parse_sample(line: &str) -> Option<(String, HashMap<String, String>, f64)> {
    let line = line.trim();
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series.to_owned(), HashMap::new(), value));
    };
    let mut labels = HashMap::new();
    let mut rest = rest.strip_suffix('}')?;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut val = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        val.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => val.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').trim().to_owned(), val);
        rest = &after[end..];
    }
    Some((name.to_owned(), labels, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_prometheus_samples_by_label() {
        let text = "# TYPE DroppedEventCount counter\n\
            DroppedEventCount{topic=\"t\",subscription=\"s\",reason=\"NonRetriableFailure\"} 1\n\
            DroppedEventCount{topic=\"t\",subscription=\"s2\",reason=\"NonRetriableFailure\"} 2\n\
            DroppedEventCount{topic=\"t\",subscription=\"s\",reason=\"TimeToLiveExceeded\"} 4\n\
            Other 7\n";
        assert_eq!(metric(text, "DroppedEventCount", &[("subscription", "s")]), 5.0);
        assert_eq!(
            metric(text, "DroppedEventCount", &[("reason", "NonRetriableFailure")]),
            3.0
        );
        assert_eq!(metric(text, "DroppedEventCount", &[("subscription", "x")]), 0.0);
        assert_eq!(metric(text, "Other", &[]), 7.0);
        assert_eq!(metric(text, "Missing", &[]), 0.0);
    }
}
