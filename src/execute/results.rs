//! Sending a plan's steps and reading their replies. Steps are grouped in lanes, one per
//! backend connection: outside a transaction each step of a read gets a lane of its own
//! (fresh pooled connections, so the shards work in parallel; `sharding.max_fan_out`
//! bounds how many), inside a transaction or a pinned session a lane is the session's one
//! connection to a datasource and its steps run one after another. The first step of
//! every lane is sent at once; a lane's next step is sent when the previous one is read.

use std::collections::VecDeque;

use bytes::BytesMut;
use mysql_common::constants::Command;

use super::target::{Access, Target};
use super::transaction::{Transaction, Wants};
use crate::backend::{BackendConn, Diagnostic, PooledConn, Reply, ResultEnd};
use crate::config::DatasourceId;
use crate::error::ProxyError;
use crate::plan::Plan;
use crate::protocol::binary::{BoundParam, LongData, SentParam, build_execute};
use crate::protocol::packets::OkInfo;
use crate::rewrite::Param;

/// The parameters of a prepared statement's execution.
pub struct Binding<'a> {
    /// The client's COM_STMT_EXECUTE payload (values are ranges of it).
    pub payload: &'a [u8],
    /// The parameters.
    pub params: &'a [BoundParam],
    /// Long data per parameter (COM_STMT_SEND_LONG_DATA).
    pub long_data: &'a [Option<LongData>],
}

/// Session values a statement changes on its backend connection that its replies do not
/// carry: read back right after each step.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras {
    /// `SQL_CALC_FOUND_ROWS`: `FOUND_ROWS()` comes from the servers (summed).
    pub calc_found_rows: bool,
    /// `LAST_INSERT_ID(expr)` sets the session's value.
    pub sets_insert_id: bool,
    /// The session's `autocommit`. A step that ends with the other (a procedure that ran
    /// `SET autocommit = ...`: that lasts after it returns) has it read back.
    pub autocommit: bool,
}

/// How one step ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepEnd {
    /// It returned rows (else an OK).
    pub result_set: bool,
    /// OK: rows affected.
    pub affected_rows: u64,
    /// OK: the insert id.
    pub last_insert_id: u64,
    /// OK: its info text.
    pub info: Vec<u8>,
    /// Warnings.
    pub warnings: u16,
    /// Status flags of its final packet.
    pub status: u16,
}

impl StepEnd {
    fn from_ok(ok: &OkInfo) -> Self {
        Self {
            result_set: false,
            affected_rows: ok.affected_rows,
            last_insert_id: ok.last_insert_id,
            info: ok.info.clone(),
            warnings: ok.warnings,
            status: ok.status,
        }
    }

    fn from_rows(end: ResultEnd) -> Self {
        Self {
            result_set: true,
            warnings: end.warnings,
            status: end.status,
            ..Default::default()
        }
    }

    /// Another result of the same command follows (a `CALL`).
    pub fn more_results(&self) -> bool {
        self.status & mysql_common::constants::StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits() != 0
    }
}

enum LaneConn<'c> {
    Held(&'c mut PooledConn),
    Owned(Box<PooledConn>),
}

impl LaneConn<'_> {
    fn conn(&mut self) -> &mut BackendConn {
        match self {
            LaneConn::Held(c) => c,
            LaneConn::Owned(c) => c,
        }
    }
}

struct Lane<'c> {
    datasource: DatasourceId,
    conn: LaneConn<'c>,
    /// Its steps, in order; `next` is the first not yet sent.
    steps: Vec<usize>,
    next: usize,
}

#[derive(Debug)]
enum State {
    Waiting,
    Sent,
    Rows,
    /// Read into memory: its column definitions (until [`Results::reply`] takes them),
    /// rows and end.
    Buffered(Option<(Vec<BytesMut>, u16)>, VecDeque<BytesMut>, StepEnd),
    Done(StepEnd),
}

/// The replies of a running plan.
pub struct Results<'c, 'p> {
    plan: &'p Plan,
    lanes: Vec<Lane<'c>>,
    lane_of: Vec<usize>,
    state: Vec<State>,
    binding: Option<&'p Binding<'p>>,
    extras: Extras,
    /// Rows held in memory for merges (buffered steps).
    buffered: u64,
    /// For a merged read, each step's datasource name: a backend error names it.
    origin: Option<Vec<String>>,
    /// Diagnostics of the steps (`SHOW WARNINGS` of each that had warnings).
    pub diagnostics: Vec<Diagnostic>,
    /// `FOUND_ROWS()` summed over the steps (with [`Extras::calc_found_rows`]).
    pub found_rows: u64,
    /// The value `LAST_INSERT_ID(expr)` set (with [`Extras::sets_insert_id`]).
    pub insert_id_set: Option<u64>,
    /// `@@session.autocommit` as read back after a step that ended with the other
    /// ([`Extras::autocommit`]).
    pub autocommit_read: Option<bool>,
}

/// One more connection to `ds` for a scatter that holds one already (asked for only as
/// many times as the pool has connections to give), within the datasource's
/// `connect_timeout`: `None` when the wait runs out (another session took it; the
/// scatter's other lanes take the steps) or the connection fails (the first one of the
/// datasource worked; the error is logged).
async fn spare(txn: &Transaction, target: Target, wants: &Wants<'_>) -> Option<PooledConn> {
    let wait = wants.config.datasource(target.datasource).connect_timeout;
    match tokio::time::timeout(wait, txn.fresh(target, wants)).await {
        Ok(Ok(conn)) => Some(conn),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "a scatter runs without a spare connection");
            None
        }
        Err(_) => None,
    }
}

/// Counts a statement on each member of a clustered datasource its lanes reach: a read
/// (by the member's role) or a primary access.
fn count_members(lanes: &mut [Lane<'_>], wants: &Wants<'_>, access: Access) {
    for i in 0..lanes.len() {
        let (ds, member) = (lanes[i].datasource, lanes[i].conn.conn().member());
        // Once per member (a scatter may run several lanes on one member).
        let earlier = lanes[..i]
            .iter_mut()
            .any(|l| l.datasource == ds && l.conn.conn().member() == member);
        if earlier {
            continue;
        }
        if let Some(cluster) = wants.topology.cluster(ds) {
            match access {
                Access::Read => cluster.count_read(member, !cluster.is_primary(member)),
                Access::Primary => cluster.count_write(member),
            }
        }
    }
}

impl<'c, 'p> Results<'c, 'p> {
    /// Takes the connections the plan's steps need and sends the first step of each lane.
    /// `parallel`: steps may run on fresh connections of their own (outside a
    /// transaction), at most `fan_out` at once.
    pub async fn start(
        plan: &'p Plan,
        txn: &'c mut Transaction,
        wants: &Wants<'_>,
        binding: Option<&'p Binding<'p>>,
        extras: Extras,
        parallel: Option<usize>,
        access: Access,
    ) -> Result<Self, ProxyError> {
        let steps = plan.steps.len();
        let mut lanes = match parallel {
            Some(fan_out) if steps > 1 => {
                Self::owned_lanes(plan, txn, wants, fan_out, access).await?
            }
            _ => Self::held_lanes(plan, txn, wants, access).await?,
        };
        if !wants.topology.is_empty() {
            count_members(&mut lanes, wants, access);
        }
        let mut lane_of = vec![0; steps];
        for (l, lane) in lanes.iter_mut().enumerate() {
            for &s in &lane.steps {
                lane_of[s] = l;
            }
        }
        let mut results = Self {
            plan,
            lanes,
            lane_of,
            state: (0..steps).map(|_| State::Waiting).collect(),
            binding,
            extras,
            buffered: 0,
            origin: (steps > 1 && plan.execution.merge().is_some()).then(|| {
                plan.steps
                    .iter()
                    .map(|s| wants.config.datasource(s.datasource).name.clone())
                    .collect()
            }),
            diagnostics: Vec::new(),
            found_rows: 0,
            insert_id_set: None,
            autocommit_read: None,
        };
        for l in 0..results.lanes.len() {
            results.send_next(l).await?;
        }
        Ok(results)
    }

    /// One lane per datasource, on the session's held connections.
    async fn held_lanes(
        plan: &Plan,
        txn: &'c mut Transaction,
        wants: &Wants<'_>,
        access: Access,
    ) -> Result<Vec<Lane<'c>>, ProxyError> {
        let mut datasources: Vec<DatasourceId> = plan.steps.iter().map(|s| s.datasource).collect();
        datasources.sort();
        datasources.dedup();
        for ds in &datasources {
            let target = Target {
                datasource: *ds,
                access,
            };
            txn.connection(target, wants).await?;
        }
        let mut lanes = Vec::new();
        for (ds, conn) in txn.held_iter_mut() {
            if !datasources.contains(&ds) {
                continue;
            }
            let steps = (0..plan.steps.len())
                .filter(|&i| plan.steps[i].datasource == ds)
                .collect();
            lanes.push(Lane {
                datasource: ds,
                conn: LaneConn::Held(conn),
                steps,
                next: 0,
            });
        }
        // Lanes in the order of their first step (the order results are read in).
        lanes.sort_by_key(|l| l.steps[0]);
        Ok(lanes)
    }

    /// Fresh connections, one per step up to `fan_out` (at least one per datasource) and
    /// up to each datasource's `pool_size`; beyond them a lane takes several steps of its
    /// datasource.
    ///
    /// The first connection of each datasource is waited for like any checkout, in
    /// datasource order, so two scatters never each hold what the other waits for. The
    /// others are only taken as the pool has them to give ([`spare`]): a scatter on a
    /// busy or small pool runs on fewer connections instead of waiting for more while it
    /// holds some.
    async fn owned_lanes(
        plan: &Plan,
        txn: &Transaction,
        wants: &Wants<'_>,
        fan_out: usize,
        access: Access,
    ) -> Result<Vec<Lane<'c>>, ProxyError> {
        let mut by_ds: Vec<(DatasourceId, Vec<usize>)> = Vec::new();
        for (i, step) in plan.steps.iter().enumerate() {
            match by_ds.iter_mut().find(|(d, _)| *d == step.datasource) {
                Some((_, v)) => v.push(i),
                None => by_ds.push((step.datasource, vec![i])),
            }
        }
        by_ds.sort_by_key(|(ds, _)| *ds);
        let total = plan.steps.len();
        let budget = fan_out.min(total).max(by_ds.len());
        let mut lanes = Vec::new();
        for (ds, steps) in by_ds {
            // This datasource's share of the connections, at least one, and no more than
            // its pool can open.
            let share = ((steps.len() * budget) / total)
                .max(1)
                .min(steps.len())
                .min(wants.pools.capacity(ds, wants.found_rows));
            let target = Target {
                datasource: ds,
                access,
            };
            let first = txn.fresh(target, wants).await?;
            let member = first.member();
            let mut conns = vec![first];
            let spares = (share - 1).min(wants.pools.available(ds, member, wants.found_rows));
            let more = (0..spares).map(|_| spare(txn, target, wants));
            conns.extend(
                futures_util::future::join_all(more)
                    .await
                    .into_iter()
                    .flatten(),
            );
            let per = steps.len().div_ceil(conns.len());
            for (chunk, conn) in steps.chunks(per).zip(conns) {
                lanes.push(Lane {
                    datasource: ds,
                    conn: LaneConn::Owned(Box::new(conn)),
                    steps: chunk.to_vec(),
                    next: 0,
                });
            }
        }
        lanes.sort_by_key(|l| l.steps[0]);
        Ok(lanes)
    }

    /// The backend threads the plan runs on (KILL QUERY reaches them).
    pub fn threads(&mut self) -> Vec<(DatasourceId, usize, u32)> {
        self.lanes
            .iter_mut()
            .map(|l| {
                let conn = l.conn.conn();
                (l.datasource, conn.member(), conn.thread_id())
            })
            .collect()
    }

    /// Rows held in memory for the merge so far.
    pub fn buffered_rows(&self) -> u64 {
        self.buffered
    }

    /// Sends the lane's next step, if any.
    async fn send_next(&mut self, l: usize) -> Result<(), ProxyError> {
        let lane = &mut self.lanes[l];
        let Some(&step) = lane.steps.get(lane.next) else {
            return Ok(());
        };
        lane.next += 1;
        let statement = &self.plan.steps[step].statement;
        let conn = lane.conn.conn();
        match self.binding {
            None => {
                conn.send_command(Command::COM_QUERY, &statement.sql)
                    .await?
            }
            Some(b) => send_execute(conn, &statement.sql, &statement.params, b).await?,
        }
        self.state[step] = State::Sent;
        Ok(())
    }

    /// Reads the reply of `step` (sending it first when its lane reached it): an OK, or a
    /// result set's column definitions (rows follow with [`Results::next_row`]). After a
    /// result that announced more (a `CALL`), the next result of the same step.
    pub async fn reply(&mut self, step: usize) -> Result<Reply, ProxyError> {
        let l = self.lane_of[step];
        if matches!(self.state[step], State::Waiting) {
            if self.lanes[l].steps.get(self.lanes[l].next) != Some(&step) {
                return Err(ProxyError::Internal(format!(
                    "step {step} read before the steps ahead of it on its connection"
                )));
            }
            self.send_next(l).await?;
        }
        if let State::Buffered(defs, _, _) = &mut self.state[step] {
            return match defs.take() {
                Some((columns, status)) => Ok(Reply::ResultSet { columns, status }),
                None => Err(ProxyError::Internal(format!(
                    "step {step}'s reply was read twice"
                ))),
            };
        }
        let conn = self.lanes[l].conn.conn();
        let reply = conn
            .read_reply()
            .await
            .map_err(|e| named(&self.origin, step, e))?;
        match &reply {
            Reply::Ok(ok) => {
                if ok.last_insert_id != 0 {
                    conn.state.vars.insert(
                        "last_insert_id".to_owned(),
                        ok.last_insert_id.to_string().into_bytes(),
                    );
                }
                let end = StepEnd::from_ok(ok);
                self.step_done(step, end).await?;
            }
            Reply::ResultSet { .. } => self.state[step] = State::Rows,
        }
        Ok(reply)
    }

    /// The next row of `step`'s result set; `None` at its end ([`Results::end`] then tells
    /// how it ended).
    pub async fn next_row(&mut self, step: usize) -> Result<Option<BytesMut>, ProxyError> {
        if let State::Buffered(_, rows, end) = &mut self.state[step] {
            return Ok(match rows.pop_front() {
                Some(row) => Some(row),
                None => {
                    let end = std::mem::take(end);
                    self.state[step] = State::Done(end);
                    None
                }
            });
        }
        let l = self.lane_of[step];
        let conn = self.lanes[l].conn.conn();
        match conn
            .next_row()
            .await
            .map_err(|e| named(&self.origin, step, e))?
        {
            Some(row) => Ok(Some(row)),
            None => {
                let end = StepEnd::from_rows(conn.result_end());
                self.step_done(step, end).await?;
                Ok(None)
            }
        }
    }

    /// Relays `step`'s next row to `to` as it arrives when it is at least `threshold` bytes
    /// (see [`BackendConn::relay_large_row`]); `false` when it is not (or the step's rows are
    /// buffered): read it with [`Results::next_row`].
    pub async fn relay_large_row<T>(
        &mut self,
        step: usize,
        threshold: usize,
        to: &mut crate::protocol::PacketStream<T>,
    ) -> Result<bool, ProxyError>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        if !matches!(self.state[step], State::Rows) {
            return Ok(false);
        }
        let l = self.lane_of[step];
        self.lanes[l]
            .conn
            .conn()
            .relay_large_row(threshold, to)
            .await
    }

    /// How `step` ended, once read to its end.
    pub fn end(&self, step: usize) -> Option<&StepEnd> {
        match &self.state[step] {
            State::Done(end) => Some(end),
            _ => None,
        }
    }

    /// A step ended: its diagnostics and read-back values are fetched before its
    /// connection runs anything else, then the lane's next step is sent.
    async fn step_done(&mut self, step: usize, end: StepEnd) -> Result<(), ProxyError> {
        let l = self.lane_of[step];
        let more = end.more_results();
        let conn = self.lanes[l].conn.conn();
        if !more {
            if end.warnings > 0 {
                self.diagnostics.extend(conn.diagnostics().await?);
            }
            if self.extras.calc_found_rows && end.result_set {
                self.found_rows += conn.scalar(b"SELECT FOUND_ROWS() LIMIT 1").await?;
            }
            if self.extras.sets_insert_id {
                let id = conn.scalar(b"SELECT LAST_INSERT_ID() LIMIT 1").await?;
                conn.state
                    .vars
                    .insert("last_insert_id".to_owned(), id.to_string().into_bytes());
                self.insert_id_set = Some(id);
            }
            let autocommit = end.status & crate::protocol::status::AUTOCOMMIT != 0;
            if autocommit != self.extras.autocommit {
                let on = conn.scalar(b"SELECT @@session.autocommit LIMIT 1").await? == 1;
                conn.state.vars.insert(
                    "autocommit".to_owned(),
                    if on { b"1" } else { b"0" }.to_vec(),
                );
                self.autocommit_read = Some(on);
            }
        }
        self.state[step] = State::Done(end);
        if !more {
            self.send_next(l).await?;
        }
        Ok(())
    }

    /// Whether every step has a connection of its own (no step waits for another's rows
    /// to be read before its own reply can be).
    pub fn lanes_unshared(&self) -> bool {
        self.lanes.iter().all(|l| l.steps.len() <= 1)
    }

    /// Reads every step that shares its connection with a later step into memory, so that
    /// the result sets of all steps can be read side by side (an ordered merge). `cap`
    /// bounds the rows held; past it the statement fails.
    pub async fn buffer_shared_lanes(&mut self, cap: u64) -> Result<(), ProxyError> {
        for l in 0..self.lanes.len() {
            let steps = self.lanes[l].steps.clone();
            let Some((_, earlier)) = steps.split_last() else {
                continue;
            };
            for &step in earlier {
                let defs = match self.reply(step).await? {
                    Reply::Ok(_) => continue,
                    Reply::ResultSet { columns, status } => (columns, status),
                };
                let mut rows = VecDeque::new();
                loop {
                    let conn = self.lanes[l].conn.conn();
                    match conn.next_row().await? {
                        Some(row) => {
                            self.buffered += 1;
                            if self.buffered > cap {
                                return Err(row_cap_error(cap));
                            }
                            rows.push_back(row);
                        }
                        None => {
                            let end = StepEnd::from_rows(conn.result_end());
                            self.step_done(step, end.clone()).await?;
                            self.state[step] = State::Buffered(Some(defs), rows, end);
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// After the statement failed on the proxy's side while replies were still coming (a
    /// merge past `sharding.merge_row_cap`, a client that went away): reads what the
    /// session's held connections still owe and drops it, so the connection, and the
    /// transaction or session state on it, stays usable; steps not yet sent are never
    /// sent. Fresh connections (outside a transaction) are left as they are: the pool
    /// discards a connection with a reply unread. A connection that fails while being
    /// read stays broken (the session then learns its transaction is lost).
    pub async fn settle(&mut self) {
        for lane in &mut self.lanes {
            let LaneConn::Held(conn) = &mut lane.conn else {
                continue;
            };
            for &step in &lane.steps {
                if !conn.awaiting_reply() {
                    break;
                }
                let in_rows = match &self.state[step] {
                    State::Sent => false,
                    State::Rows => true,
                    State::Done(end) if end.more_results() => false,
                    _ => continue,
                };
                if let Err(e) = finish_reply(conn, in_rows).await {
                    tracing::debug!(error = %e, "reply left unread after a failed statement");
                }
                self.state[step] = State::Done(StepEnd::default());
            }
        }
    }

    /// The statement asked for `SQL_CALC_FOUND_ROWS`: [`Results::found_rows`] is kept.
    pub fn counts_found_rows(&self) -> bool {
        self.extras.calc_found_rows
    }

    /// The datasources whose connections the plan used.
    pub fn datasources(&self) -> Vec<DatasourceId> {
        self.lanes.iter().map(|l| l.datasource).collect()
    }
}

/// A backend's error in one step of a merged read, with the datasource it came from
/// appended (the server's message names the shard table where it names one); other
/// errors unchanged.
fn named(origin: &Option<Vec<String>>, step: usize, e: ProxyError) -> ProxyError {
    match (e, origin.as_ref().and_then(|o| o.get(step))) {
        (
            ProxyError::Backend {
                code,
                state,
                mut message,
            },
            Some(name),
        ) => {
            message.extend_from_slice(format!(" (on datasource {name})").as_bytes());
            ProxyError::Backend {
                code,
                state,
                message,
            }
        }
        (e, _) => e,
    }
}

/// Reads the rest of the reply `conn` is in (`in_rows`: inside a result set's rows, else
/// before a result's header) and drops it; a backend ERR ends it too.
async fn finish_reply(conn: &mut BackendConn, in_rows: bool) -> Result<(), ProxyError> {
    if in_rows && !conn.skip_rows().await?.more_results() {
        return Ok(());
    }
    let reply = conn.read_reply().await?;
    conn.drain_reply(reply).await.map(drop)
}

/// The error of a merge that would hold more than `sharding.merge_row_cap` rows.
pub fn row_cap_error(cap: u64) -> ProxyError {
    ProxyError::MergeCap(format!(
        "this merge of several shards: it would hold more than sharding.merge_row_cap = {cap} rows in memory (add a LIMIT, narrow it with a WHERE clause, or run it outside a transaction)"
    ))
}

/// Runs `sql` as a prepared statement on `conn` with the client's parameters that its
/// placeholders take: long data first (numbered as the backend statement sees it), then
/// COM_STMT_EXECUTE.
async fn send_execute(
    conn: &mut BackendConn,
    sql: &[u8],
    params: &[Param],
    b: &Binding<'_>,
) -> Result<(), ProxyError> {
    let statement = conn.prepare_cached(sql).await?.statement;
    let mut sent = Vec::with_capacity(params.len());
    for (n, p) in params.iter().enumerate() {
        match p {
            Param::Client(i) => {
                let bound = b.params.get(*i).ok_or_else(|| {
                    ProxyError::Internal(format!("parameter {i} of the execution is missing"))
                })?;
                if let Some(Some(data)) = b.long_data.get(*i) {
                    for chunk in &data.chunks {
                        let mut body = Vec::with_capacity(chunk.len() + 6);
                        body.extend_from_slice(&statement.id.to_le_bytes());
                        body.extend_from_slice(&(n as u16).to_le_bytes());
                        body.extend_from_slice(chunk);
                        conn.send_no_reply(Command::COM_STMT_SEND_LONG_DATA, &body)
                            .await?;
                    }
                }
                sent.push(SentParam::Bound(bound));
            }
            Param::Value(v) => sent.push(SentParam::UInt(*v)),
        }
    }
    let payload = build_execute(statement.id, b.payload, &sent);
    conn.send_raw_command(&payload).await
}
