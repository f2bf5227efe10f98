//! Replays the fuzzers' minimised corpora (`fuzz/corpus/<target>/`) and the inputs that
//! once crashed or hung a target (`fuzz/regressions/<target>/`) through the same harness
//! functions the cargo-fuzz targets call (`fuzz/harness.rs`), on stable Rust, so every
//! `cargo test` keeps what the fuzzers found. See docs/fuzzing.md.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

/// The files of `fuzz/<kind>/<target>/`, sorted; none when the folder is missing.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs every input of `kind` through its target; panics name the file that failed.
fn replay(kind: &str) -> usize {
    let mut count = 0;
    for (target, run) in harness::TARGETS {
        for file in inputs(kind, target) {
            let data = std::fs::read(&file).unwrap();
            if std::panic::catch_unwind(|| run(&data)).is_err() {
                panic!("{target} panics on {}", file.display());
            }
            count += 1;
        }
    }
    count
}

#[test]
fn every_corpus_input_passes_through_its_target() {
    let count = replay("corpus");
    // The committed corpus: a missing or emptied folder is a mistake, not a pass.
    for (target, _) in harness::TARGETS {
        assert!(
            !inputs("corpus", target).is_empty(),
            "fuzz/corpus/{target}/ is empty"
        );
    }
    assert!(count > 0);
}

#[test]
fn every_regression_input_passes_through_its_target() {
    replay("regressions");
}

#[test]
fn packets_are_cut_at_their_length_prefix() {
    assert_eq!(
        harness::packets(&[2, 0, b'a', b'b', 1, 0, b'c', 5, 0, b'd']),
        vec![&b"ab"[..], b"c", b"d"]
    );
    assert!(harness::packets(&[7]).is_empty());
}
