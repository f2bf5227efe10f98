//! The column definitions of a combined scatter's answer (`sharding.combine_shards`).
//!
//! A datasource's shards asked in one statement (their selects joined with `UNION ALL`)
//! answer with the UNION's column definitions, and MariaDB describes a UNION's columns
//! without their schema, table, original table and key flags (`PRI_KEY`,
//! `NO_DEFAULT_VALUE`, ...), and with the original column name of an expression set to its
//! name. One table answers with all of them, so the answer's definitions come from a
//! statement that describes them exactly: the first shard's select run alone (or, when the
//! merge computes select items, with `LIMIT 0`). That description is kept here, with a
//! fingerprint of the UNION's own definitions as they came beside it, and used again while
//! the UNION describes its columns byte for byte as it did: the same statement (values
//! included: they can change column flags, `plan::combine::shape`) under the same session
//! variables then costs one statement per datasource.
//!
//! What the UNION's definitions do not carry (the table's key flags) can change without
//! changing them: an index added outside the proxy. Entries therefore live at most
//! [`KEEP_FOR`]; DDL through the proxy forgets every entry at once.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;

/// How long a description is used before it is asked for again: the bound on how long an
/// index added or dropped outside the proxy leaves a combined scatter's key flags behind.
pub const KEEP_FOR: Duration = Duration::from_secs(60);

/// A described answer's column definitions.
#[derive(Debug)]
pub struct DescribedColumns {
    /// Every column's definition packet, as the describing statement returned it (physical
    /// names; the engine renames them as it sends them), hidden columns included.
    pub definitions: Vec<BytesMut>,
    /// [`fingerprint`] of the combined statement's own definitions when they were
    /// described.
    pub fingerprint: u64,
}

/// Described answers by statement and session ([`ColumnCache::key`]). A clone shares the
/// entries.
#[derive(Clone)]
pub struct ColumnCache {
    cache: moka::sync::Cache<u64, Arc<DescribedColumns>>,
}

impl ColumnCache {
    /// A cache of up to `capacity` descriptions, each kept for [`KEEP_FOR`].
    pub fn new(capacity: u64) -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(KEEP_FOR)
                .build(),
        }
    }

    /// The description kept under `key`.
    pub fn get(&self, key: u64) -> Option<Arc<DescribedColumns>> {
        self.cache.get(&key)
    }

    /// Keeps a description.
    pub fn insert(&self, key: u64, columns: DescribedColumns) {
        self.cache.insert(key, Arc::new(columns));
    }

    /// Forgets the description under `key` (the combined statement no longer describes
    /// its columns as it did).
    pub fn forget(&self, key: u64) {
        self.cache.invalidate(&key);
    }

    /// Forgets every description (DDL ran through the proxy).
    pub fn clear(&self) {
        self.cache.invalidate_all();
    }

    /// The key of a statement's description: the statement (`shape`, from the planner) and
    /// what of the session decides how columns are described (`session`: its variables and
    /// current database, hashed by the engine).
    pub fn key(shape: u64, session: u64) -> u64 {
        let mut h = fixed_hasher();
        (shape, session).hash(&mut h);
        h.finish()
    }
}

/// A hasher that gives the same value in every process and run (keys are compared only
/// within one process, but a fixed seed keeps test failures reproducible).
pub fn fixed_hasher() -> impl Hasher {
    foldhash::fast::FixedState::with_seed(0x726f_7574_656b_6579).build_hasher()
}

/// A fingerprint of column definition packets: every byte of every definition.
pub fn fingerprint(definitions: &[BytesMut]) -> u64 {
    let mut h = fixed_hasher();
    definitions.len().hash(&mut h);
    for d in definitions {
        d[..].hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_sees_every_byte_and_the_column_count() {
        let a = vec![BytesMut::from(&b"def\x03abc"[..])];
        let b = vec![BytesMut::from(&b"def\x03abd"[..])];
        assert_ne!(fingerprint(&a), fingerprint(&b));
        let twice = vec![a[0].clone(), a[0].clone()];
        assert_ne!(fingerprint(&a), fingerprint(&twice));
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
    }

    #[test]
    fn descriptions_are_kept_forgotten_and_cleared() {
        let cache = ColumnCache::new(8);
        let key = ColumnCache::key(1, 2);
        assert_ne!(key, ColumnCache::key(1, 3));
        assert!(cache.get(key).is_none());
        cache.insert(
            key,
            DescribedColumns {
                definitions: Vec::new(),
                fingerprint: 7,
            },
        );
        assert_eq!(cache.get(key).map(|c| c.fingerprint), Some(7));
        cache.forget(key);
        assert!(cache.get(key).is_none());
        cache.insert(
            key,
            DescribedColumns {
                definitions: Vec::new(),
                fingerprint: 7,
            },
        );
        cache.clear();
        assert!(cache.get(key).is_none());
    }
}
