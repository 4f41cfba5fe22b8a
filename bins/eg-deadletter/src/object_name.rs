//! The name of a dead-letter object: Event Grid's blob layout,
//! `[<key prefix>/]<SUBSCRIPTION>/YYYY/M/D/H/<guid>.json`. The guid a worker proposes for
//! the records it read is derived from them (a UUID v5 of their partition, stream entry
//! ids and delivery ids), not drawn at random; Redis keeps the name each record was first
//! given (`eg_store::dead_letter_objects`), so every later attempt at a record uses that
//! one (see `worker`).

use eg_core::subscription::DeadLetterStore;
use uuid::Uuid;

/// The namespace of dead-letter object names (a fixed, random UUID).
const NAMESPACE: Uuid = Uuid::from_u128(0x5d1e_a7c3_2b9f_4e08_9a41_c6f0_d3b2_7e15);

/// One record as its object name sees it.
#[derive(Debug, Clone, Copy)]
pub struct RecordId<'a> {
    /// The dead-letter stream entry id (unique within its partition).
    pub entry_id: &'a str,
    /// The delivery's id (unique across deployments).
    pub delivery_id: &'a str,
}

/// The object path of the object named `guid` holding records of one `folder`
/// (`entry.folder()`). Refuses a folder part that is not a plain name, so nothing in a
/// record can escape the subscription's folder, and a guid that is not a UUID.
pub fn object_path(key_prefix: &str, folder: &[String], guid: &str) -> Result<String, String> {
    if let Some(part) = folder.iter().find(|part| !is_plain(part)) {
        return Err(format!("refusing dead-letter folder part {part:?}"));
    }
    let guid = Uuid::parse_str(guid).map_err(|_| format!("refusing dead-letter object name {guid:?}: not a UUID"))?;
    let mut path = String::new();
    for part in folder {
        path.push_str(part);
        path.push('/');
    }
    path.push_str(&guid.hyphenated().to_string());
    path.push_str(".json");
    Ok(under_key_prefix(key_prefix, path))
}

/// The key prefix of an S3 destination; other stores have none.
pub fn key_prefix(store: &DeadLetterStore) -> &str {
    match store {
        DeadLetterStore::S3 { key_prefix, .. } => key_prefix,
        _ => "",
    }
}

/// `path` under `key_prefix` (its slashes at either end ignored; empty: `path` itself).
pub fn under_key_prefix(key_prefix: &str, path: String) -> String {
    match key_prefix.trim_matches('/') {
        "" => path,
        prefix => format!("{prefix}/{path}"),
    }
}

/// The same records, in whatever order they were read, give the same id; any other set
/// gives another.
pub fn group_id(partition: u16, records: &[RecordId<'_>]) -> Uuid {
    let mut lines: Vec<String> = records
        .iter()
        .map(|r| format!("{} {}", r.entry_id, r.delivery_id))
        .collect();
    lines.sort_unstable();
    let name = format!("partition {partition}\n{}", lines.join("\n"));
    Uuid::new_v5(&NAMESPACE, name.as_bytes())
}

fn is_plain(part: &str) -> bool {
    !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<RecordId<'a>> {
        pairs
            .iter()
            .map(|&(entry_id, delivery_id)| RecordId { entry_id, delivery_id })
            .collect()
    }

    fn folder() -> Vec<String> {
        ["BILLING", "2026", "3", "4", "5"].map(String::from).to_vec()
    }

    #[test]
    fn paths_follow_the_blob_layout_under_the_prefix() {
        let id = group_id(0, &ids(&[("1-0", "d1")])).to_string();
        assert_eq!(
            object_path("", &folder(), &id).unwrap(),
            format!("BILLING/2026/3/4/5/{id}.json")
        );
        assert_eq!(
            object_path("/eg/dead/", &folder(), &id).unwrap(),
            format!("eg/dead/BILLING/2026/3/4/5/{id}.json")
        );
    }

    #[test]
    fn the_name_depends_on_the_set_of_records_only() {
        let a = group_id(1, &ids(&[("1-0", "d1"), ("2-0", "d2")]));
        assert_eq!(a, group_id(1, &ids(&[("2-0", "d2"), ("1-0", "d1")])), "order");
        assert_ne!(a, group_id(1, &ids(&[("1-0", "d1")])), "a subset");
        assert_ne!(
            a,
            group_id(2, &ids(&[("1-0", "d1"), ("2-0", "d2")])),
            "another partition"
        );
        assert_ne!(
            a,
            group_id(1, &ids(&[("1-0", "d1"), ("2-0", "d3")])),
            "another delivery"
        );
        assert_eq!(a.get_version_num(), 5);
    }

    #[test]
    fn refuses_parts_that_would_escape() {
        let id = group_id(0, &ids(&[("1-0", "d1")])).to_string();
        for bad in ["..", "a/b", "", "a.b"] {
            let folder = vec!["SUB".to_owned(), bad.to_owned()];
            assert!(object_path("", &folder, &id).is_err(), "{bad:?}");
        }
        for bad in ["", "../x", "not-a-uuid"] {
            assert!(object_path("", &folder(), bad).is_err(), "{bad:?}");
        }
    }
}
