//! Where an interrupted `index backfill` resumes: the last order id it handled, written
//! atomically (a temporary file renamed over the old one).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The state of a backfill run, saved between order ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// What the run does: its scope (`--channel`/`--shard`), its options and the tables it
    /// reads and writes. A resume must do the same.
    pub run: String,
    /// The run reached the end of its scan: nothing is left to resume.
    pub finished: bool,
    /// Every order id up to this one was handled (scans resume above it); `None` before
    /// the first.
    pub after: Option<u64>,
    /// Rows scanned, over every run so far.
    pub scanned: u64,
    /// Index rows written, over every run so far.
    pub written: u64,
    /// Dangling index rows deleted, over every run so far.
    pub pruned: u64,
    /// Rows left to a person (in the report), over every run so far.
    #[serde(default)]
    pub needs_person: u64,
}

impl Checkpoint {
    /// The checkpoint in `path`; `None` when the file does not exist.
    ///
    /// # Errors
    /// The file cannot be read or is not a checkpoint.
    pub fn load(path: &Path) -> Result<Option<Self>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("--checkpoint {}: not a checkpoint: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("--checkpoint {}: {e}", path.display())),
        }
    }

    /// Writes it to `path` atomically.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string(self).expect("a checkpoint serializes");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| format!("--checkpoint {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_and_a_missing_file_is_none() {
        let path = std::env::temp_dir().join(format!("rk-ckpt-{}.json", std::process::id()));
        let _ = std::fs::remove_file(&path);
        assert_eq!(Checkpoint::load(&path).unwrap(), None);
        let c = Checkpoint {
            run: "all shards".into(),
            finished: false,
            after: Some(42),
            scanned: 7,
            written: 3,
            pruned: 1,
            needs_person: 2,
        };
        c.save(&path).unwrap();
        assert_eq!(Checkpoint::load(&path).unwrap(), Some(c));
        std::fs::write(&path, "nonsense").unwrap();
        assert!(Checkpoint::load(&path).is_err());
        let _ = std::fs::remove_file(path);
    }
}
