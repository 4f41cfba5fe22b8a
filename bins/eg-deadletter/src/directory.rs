//! The directory destination, laid out like an Event Grid blob container:
//! `<root>/<container>/<SUBSCRIPTION>/YYYY/M/D/H/<guid>.json`, each file a JSON array.
//! A file appears whole or not at all: written under a temporary name, fsynced,
//! renamed, and the folder fsynced.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Every folder part must be a plain name: nothing in a record can escape the root.
pub fn folder_path(root: &Path, parts: &[String]) -> std::io::Result<PathBuf> {
    let mut path = root.to_path_buf();
    for part in parts {
        let plain = !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !plain {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("refusing dead-letter folder part {part:?}"),
            ));
        }
        path.push(part);
    }
    Ok(path)
}

/// Writes `records` (a JSON array) as a new file in `folder`; returns its path.
pub fn write_file(folder: &Path, records: &[u8]) -> std::io::Result<PathBuf> {
    fs::create_dir_all(folder)?;
    let id = uuid::Uuid::new_v4();
    let temporary = folder.join(format!(".{id}.tmp"));
    let target = folder.join(format!("{id}.json"));
    let result = (|| {
        let mut file = File::create(&temporary)?;
        file.write_all(records)?;
        file.sync_all()?;
        fs::rename(&temporary, &target)?;
        File::open(folder)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result.map(|()| target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_parts_that_would_escape() {
        let root = Path::new("/dl");
        assert!(folder_path(root, &["c".into(), "..".into()]).is_err());
        assert!(folder_path(root, &["c/d".into()]).is_err());
        assert!(folder_path(root, &["".into()]).is_err());
        assert_eq!(
            folder_path(root, &["c".into(), "SUB".into(), "2026".into()]).unwrap(),
            PathBuf::from("/dl/c/SUB/2026")
        );
    }

    #[test]
    fn writes_whole_files() {
        let dir = std::env::temp_dir().join(format!("eg-dl-{}", uuid::Uuid::new_v4()));
        let path = write_file(&dir.join("a"), b"[1]").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"[1]");
        assert_eq!(fs::read_dir(dir.join("a")).unwrap().count(), 1);
        let _ = fs::remove_dir_all(dir);
    }
}
