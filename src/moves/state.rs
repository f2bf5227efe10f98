//! A move run as the moves table in the meta datasource records it
//! ([`crate::route::shard_map::create_moves_table_sql`]). Every step is written here before
//! it is taken, so a rerun after a kill (or on another machine) knows where the move
//! stands.

use std::ops::RangeInclusive;

use mysql_async::prelude::Queryable;

/// Where a move stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Creating the tables on the target and copying a snapshot (redone whole when rerun).
    Copy,
    /// The target replicates the moved tables from the snapshot's position.
    CatchUp,
    /// Comparing chunk checksums at one position.
    Verify,
    /// Waiting for a moment to fence: the target close behind, no prepared XA branch.
    CutOver,
    /// The moved tables are (being) renamed away on the source; the new map is not yet
    /// published. Proxies that meet the fence wait for the map.
    Fenced,
    /// The new map is published: the target serves the shards; the source keeps its tables
    /// renamed until `--finish`.
    Switched,
    /// `--finish` dropped the source's renamed tables.
    Finished,
    /// `--abort` undid it before the cut-over.
    Aborted,
}

impl Step {
    /// The name stored in the `step` column.
    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::CatchUp => "catch_up",
            Self::Verify => "verify",
            Self::CutOver => "cut_over",
            Self::Fenced => crate::route::shard_map::FENCED_STEP,
            Self::Switched => "switched",
            Self::Finished => "finished",
            Self::Aborted => "aborted",
        }
    }

    /// The step a stored name names.
    ///
    /// # Errors
    /// An unknown name.
    pub fn parse(name: &str) -> Result<Self, String> {
        [
            Self::Copy,
            Self::CatchUp,
            Self::Verify,
            Self::CutOver,
            Self::Fenced,
            Self::Switched,
            Self::Finished,
            Self::Aborted,
        ]
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| format!("unknown move step `{name}` in the moves table"))
    }

    /// Still moving: the steps before the new map is published.
    pub fn active(self) -> bool {
        !matches!(self, Self::Switched | Self::Finished | Self::Aborted)
    }
}

/// One row of the moves table.
#[derive(Debug, Clone)]
pub struct Move {
    /// Its id (part of the renamed tables' names).
    pub id: u64,
    /// The shards moved.
    pub shards: RangeInclusive<u32>,
    /// The datasource they leave.
    pub source: String,
    /// The datasource they go to.
    pub target: String,
    /// Where it stands.
    pub step: Step,
    /// The source's GTID position of the copied snapshot.
    pub snapshot_pos: Option<String>,
    /// The source's GTID position once fenced.
    pub fence_pos: Option<String>,
    /// The shard map version the cut-over publishes.
    pub map_version: Option<u64>,
    /// Appended to the source tables the cut-over renames (`__moved_<id>`).
    pub suffix: String,
    /// Rows the copy wrote.
    pub rows_copied: u64,
    /// How long writes to the moved shards paused at the cut-over, ms.
    pub pause_ms: Option<u64>,
    /// The last thing worth knowing (a retried cut-over, an error).
    pub detail: Option<String>,
}

/// `a-b`, or `a` for one shard.
pub fn shards_text(shards: &RangeInclusive<u32>) -> String {
    if shards.start() == shards.end() {
        shards.start().to_string()
    } else {
        format!("{}-{}", shards.start(), shards.end())
    }
}

type MoveRow = (
    u64,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<u64>,
    String,
    u64,
    Option<u64>,
    Option<String>,
);

const COLUMNS: &str = "id, shards, source, target, step, snapshot_pos, fence_pos, map_version, suffix, rows_copied, pause_ms, detail";

fn from_row(row: MoveRow) -> Result<Move, String> {
    let (id, shards, source, target, step, snapshot_pos, fence_pos, map_version, suffix) = (
        row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8,
    );
    Ok(Move {
        id,
        shards: crate::config::shard_map::parse_shard_range(&shards)?,
        source,
        target,
        step: Step::parse(&step)?,
        snapshot_pos,
        fence_pos,
        map_version,
        suffix,
        rows_copied: row.9,
        pause_ms: row.10,
        detail: row.11,
    })
}

/// The moves table on the meta datasource's primary.
pub struct Moves<'a> {
    /// Its qualified, quoted name.
    pub table: &'a str,
}

impl Moves<'_> {
    /// Moves whose rows match `filter` (an SQL condition), newest first.
    async fn select(
        &self,
        conn: &mut mysql_async::Conn,
        filter: &str,
    ) -> Result<Vec<Move>, String> {
        let rows: Vec<MoveRow> = conn
            .query(format!(
                "SELECT {COLUMNS} FROM {} WHERE {filter} ORDER BY id DESC",
                self.table
            ))
            .await
            .map_err(|e| format!("reading the moves table: {e}"))?;
        rows.into_iter().map(from_row).collect()
    }

    /// The move not yet switched, finished or aborted (at most one runs at a time).
    ///
    /// # Errors
    /// The meta datasource's.
    pub async fn active(&self, conn: &mut mysql_async::Conn) -> Result<Option<Move>, String> {
        Ok(self
            .select(conn, "step NOT IN ('switched', 'finished', 'aborted')")
            .await?
            .into_iter()
            .next())
    }

    /// Switched or finished moves, newest first.
    ///
    /// # Errors
    /// The meta datasource's.
    pub async fn done(&self, conn: &mut mysql_async::Conn) -> Result<Vec<Move>, String> {
        self.select(conn, "step IN ('switched', 'finished')").await
    }

    /// Switched moves (their source tables kept, renamed), newest first.
    ///
    /// # Errors
    /// The meta datasource's.
    pub async fn switched(&self, conn: &mut mysql_async::Conn) -> Result<Vec<Move>, String> {
        self.select(conn, "step = 'switched'").await
    }

    /// The last `n` moves, newest first.
    ///
    /// # Errors
    /// The meta datasource's.
    pub async fn recent(&self, conn: &mut mysql_async::Conn, n: u32) -> Result<Vec<Move>, String> {
        let mut all = self.select(conn, "1").await?;
        all.truncate(n as usize);
        Ok(all)
    }

    /// Records a new move at its first step; its id.
    ///
    /// # Errors
    /// The meta datasource's.
    pub async fn insert(
        &self,
        conn: &mut mysql_async::Conn,
        shards: &RangeInclusive<u32>,
        source: &str,
        target: &str,
    ) -> Result<Move, String> {
        conn.exec_drop(
            format!(
                "INSERT INTO {} (shards, source, target, step, suffix, started_at, updated_at) VALUES (?, ?, ?, 'copy', '', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
                self.table
            ),
            (shards_text(shards), source, target),
        )
        .await
        .map_err(|e| format!("recording the move: {e}"))?;
        let id = conn.last_insert_id().unwrap_or(0);
        let suffix = format!("__moved_{id}");
        conn.exec_drop(
            format!("UPDATE {} SET suffix = ? WHERE id = ?", self.table),
            (&suffix, id),
        )
        .await
        .map_err(|e| format!("recording the move: {e}"))?;
        Ok(Move {
            id,
            shards: shards.clone(),
            source: source.to_owned(),
            target: target.to_owned(),
            step: Step::Copy,
            snapshot_pos: None,
            fence_pos: None,
            map_version: None,
            suffix,
            rows_copied: 0,
            pause_ms: None,
            detail: None,
        })
    }

    /// Writes `mv`'s step and findings.
    ///
    /// # Errors
    /// The meta datasource's: the step is not recorded, so it must not be taken.
    pub async fn record(&self, conn: &mut mysql_async::Conn, mv: &Move) -> Result<(), String> {
        conn.exec_drop(
            format!(
                "UPDATE {} SET step = ?, snapshot_pos = ?, fence_pos = ?, map_version = ?, rows_copied = ?, pause_ms = ?, detail = ?, updated_at = UTC_TIMESTAMP(6) WHERE id = ?",
                self.table
            ),
            (
                mv.step.name(),
                &mv.snapshot_pos,
                &mv.fence_pos,
                mv.map_version,
                mv.rows_copied,
                mv.pause_ms,
                &mv.detail,
                mv.id,
            ),
        )
        .await
        .map_err(|e| format!("recording step {} of move {}: {e}", mv.step.name(), mv.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_by_name_and_only_the_early_ones_are_active() {
        for step in [
            Step::Copy,
            Step::CatchUp,
            Step::Verify,
            Step::CutOver,
            Step::Fenced,
            Step::Switched,
            Step::Finished,
            Step::Aborted,
        ] {
            assert_eq!(Step::parse(step.name()).unwrap(), step);
            assert_eq!(
                step.active(),
                !matches!(step, Step::Switched | Step::Finished | Step::Aborted)
            );
        }
        assert_eq!(Step::Fenced.name(), crate::route::shard_map::FENCED_STEP);
        assert!(Step::parse("copying").is_err());
    }

    #[test]
    fn shard_ranges_are_written_as_parsed() {
        assert_eq!(shards_text(&(12..=15)), "12-15");
        assert_eq!(shards_text(&(7..=7)), "7");
        let back = crate::config::shard_map::parse_shard_range(&shards_text(&(12..=15)));
        assert_eq!(back.unwrap(), 12..=15);
    }
}
