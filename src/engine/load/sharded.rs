//! `LOAD DATA LOCAL INFILE` into a sharded table: the client's file cut into records,
//! each routed as an INSERT's row (its order id decoded, else its `channel`/`region`
//! field or the statement's hint, else the index table; a row of the orders table
//! without an order id gets one issued, as an INSERT without `order_id` does), and loaded
//! into its shard in batches with the client's own statement.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::super::session::Session;
use super::{ask_for_file, drain_file, next_file_packet};
use crate::backend::{Diagnostic, FileRequest};
use crate::config::{ChannelId, DatasourceId, TableId};
use crate::error::ProxyError;
use crate::execute::Target;
use crate::protocol::binary::ParamValue;
use crate::protocol::packets::{OkInfo, sum_infos};
use crate::protocol::status::MoreResults;
use crate::route::Effects;
use crate::route::value::StatementValues;
use crate::sql::load_data::LoadData;
use crate::sql::load_data::rows::{self, Next, Record};
use crate::sql::{ContextKind, ContextSlot, ValueSlot};
use crate::wire::client::Client;

/// Bytes of records a shard's batch holds before it is loaded into the shard.
pub(super) const BATCH_BYTES: usize = 256 * 1024;

/// Bytes per packet of a batch sent to a shard.
const PACKET_BYTES: usize = 64 * 1024;

/// Ids issued at a time for rows without one, per channel.
const ID_STOCK: usize = 256;

/// `SHOW WARNINGS` keeps this many of a load's diagnostics (MariaDB's `max_error_count`
/// default).
const MAX_DIAGNOSTICS: usize = 64;

/// Where the fields the proxy routes by stand in each record.
struct Layout {
    /// The shard key's field; `None` when the column list leaves it out (the proxy
    /// issues the ids and puts each first in its record).
    key: Option<usize>,
    channel: Option<usize>,
    region: Option<usize>,
    /// Fields a record fills.
    fields: usize,
}

/// One shard's records not loaded yet.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Each record's number in the file (1-based, after `IGNORE n LINES`).
    records: Vec<u64>,
    /// Each record's order id.
    ids: Vec<u64>,
}

/// A load under way.
struct Loader<'a> {
    sql: &'a [u8],
    load: &'a LoadData,
    table: TableId,
    layout: Layout,
    hints: crate::sql::hints::RouteHints,
    /// The load runs in the client's transaction (else in one of its own per datasource).
    in_client_transaction: bool,
    batches: BTreeMap<u32, Batch>,
    /// Records read, lines consumed (line terminators seen, ignored lines included).
    records: u64,
    lines: u64,
    /// `IGNORE n LINES` still to skip.
    ignore: u64,
    ids: HashMap<ChannelId, VecDeque<u64>>,
    first_issued: Option<u64>,
    /// Index rows to write (ids that do not decode), with the line and record of each:
    /// written once every record is loaded, before the load commits (SPEC §5: an index row
    /// is committed before its order), so a load that fails leaves none.
    index_rows: Vec<(u64, ChannelId, u64, u64)>,
    /// The channel of each of those ids.
    pending: HashMap<u64, ChannelId>,
    /// The line and record being routed.
    at: (u64, u64),
    fx: Effects,
    /// Datasources the load wrote to, in order.
    touched: Vec<DatasourceId>,
    affected: u64,
    warnings: u64,
    info: Vec<u8>,
    /// The batches' diagnostics, each with where it stands in the file ([`Placed`]).
    diagnostics: Vec<Placed>,
}

/// A diagnostic of one batch and the file's record it stands at: its own row number, or,
/// for one that names none (a duplicate key), the row of the diagnostic before it in its
/// batch (the batch's first record when none is before it).
struct Placed {
    at: u64,
    names_a_row: bool,
    diagnostic: Diagnostic,
}

impl Session {
    /// Loads the client's file into sharded table `table` (see the module documentation).
    pub(super) async fn load_sharded(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &crate::sql::lexer::Lexed,
        load: &LoadData,
        table: TableId,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let layout = self.load_layout(load, table).await?;
        let hints =
            crate::sql::hints::route_hints(sql, &lexed.comments).map_err(ProxyError::unroutable)?;
        let in_client_transaction = self.in_transaction() || !self.state.autocommit;
        let pending = self.txn.next_characteristics();
        if !in_client_transaction {
            self.txn.begin_statement(b"START TRANSACTION");
        }
        self.state.warnings.clear();
        let mut l = Loader {
            sql,
            load,
            table,
            layout,
            hints,
            in_client_transaction,
            batches: BTreeMap::new(),
            records: 0,
            lines: 0,
            ignore: load.ignore_lines,
            ids: HashMap::new(),
            first_issued: None,
            index_rows: Vec::new(),
            pending: HashMap::new(),
            at: (0, 0),
            fx: Effects::default(),
            touched: Vec::new(),
            affected: 0,
            warnings: 0,
            info: Vec::new(),
            diagnostics: Vec::new(),
        };
        let mut loaded = self.load_file(client, &mut l).await;
        self.load_running(false);
        if loaded.is_ok() {
            loaded = self.write_index_rows(&mut l).await;
        }
        if let Err(ProxyError::ClientGone(_)) = &loaded {
            // Mid-file: the batch a connection was loading is cut off (it is broken and
            // goes); the transaction ends with the session.
            self.rt.router.apply(&l.fx).await;
            return loaded;
        }
        let ended = self.end_load(&mut l, loaded.is_ok()).await;
        self.rt.router.apply(&l.fx).await;
        if let Err(e) = loaded.and(ended) {
            if !in_client_transaction {
                if let Some(chars) = pending {
                    self.txn.set_next_characteristics(chars);
                }
            }
            self.txn.release_idle();
            return Err(e);
        }
        self.finish_load(client, l, more)
    }

    /// Where the routed fields stand, and the checks the statement must pass before the
    /// client is asked for its file.
    async fn load_layout(&mut self, load: &LoadData, table: TableId) -> Result<Layout, ProxyError> {
        let config = self.rt.config.clone();
        let sharding = &config.sharding;
        let refuse = |what: String| {
            Err(ProxyError::not_yet(format!(
                "LOAD DATA LOCAL INFILE into a sharded table {what}"
            )))
        };
        if let Err(why) = load.format.check() {
            return refuse(format!("with {why}"));
        }
        if load.partition {
            return refuse("with PARTITION".into());
        }
        if load.in_executable_comment {
            return refuse("inside an executable comment".into());
        }
        if let Some(cs) = &load.charset {
            if crate::sql::charset::decoding_for(cs).is_err() {
                return refuse(format!(
                    "in CHARACTER SET {cs} (its characters can hold the delimiters' bytes)"
                ));
            }
        }
        let routed = [
            &sharding.shard_key,
            &sharding.channel_column,
            &sharding.region_column,
        ];
        if let Some(c) = load.set_columns.iter().find(|c| routed.contains(c)) {
            return refuse(format!(
                "whose SET clause assigns `{c}`: the proxy routes each row by the file's fields (name the field in the column list)"
            ));
        }
        if load.columns.as_ref().is_some_and(|c| c.items.is_empty()) {
            return refuse("with an empty column list".into());
        }
        if self.txn.tables_locked() {
            return refuse("under LOCK TABLES (UNLOCK TABLES first)".into());
        }
        if self.final_status(MoreResults::None) & crate::protocol::status::IN_TRANS_READONLY != 0 {
            // As MariaDB answers it, before it asks for the file.
            return Err(ProxyError::client(
                crate::error::ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION,
                b"25006",
                "Cannot execute statement in a READ ONLY transaction",
            ));
        }
        let table_columns = match load.columns {
            Some(_) => Vec::new(),
            None => self.physical_columns(table).await?,
        };
        let at = load.positions(
            &table_columns,
            &[
                &sharding.shard_key,
                &sharding.channel_column,
                &sharding.region_column,
            ],
        );
        if at[0].is_none() && table.0 != 0 {
            return Err(ProxyError::unsupported(format!(
                "LOAD DATA into {} without {}: the proxy issues ids for new rows of {} only; a row of {} names the order it belongs to",
                sharding.binding_tables[usize::from(table.0)],
                sharding.shard_key,
                sharding.binding_tables[0],
                sharding.binding_tables[usize::from(table.0)],
            )));
        }
        Ok(Layout {
            key: at[0],
            channel: at[1],
            region: at[2],
            fields: load.field_count(&table_columns),
        })
    }

    /// The columns of a sharded table, in order (lower case), as its first shard has them.
    async fn physical_columns(&mut self, table: TableId) -> Result<Vec<String>, ProxyError> {
        let config = self.rt.config.clone();
        let shard = &config.sharding.shards[self.rt.router.first_shard() as usize];
        let sql = format!(
            "SELECT LOWER(COLUMN_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
            String::from_utf8_lossy(&crate::rewrite::quote_string(shard.database.as_bytes())),
            String::from_utf8_lossy(&crate::rewrite::quote_string(
                shard.tables[usize::from(table.0)].as_bytes()
            )),
        );
        let conn = self.connection(Target::primary(shard.datasource)).await?;
        let (_, rows) = conn.query_rows(sql.as_bytes()).await?;
        self.txn.release_idle();
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect())
    }

    /// Asks for the file and loads it record by record; after an error the rest of the
    /// file is read and dropped, so the client reads the error.
    async fn load_file(
        &mut self,
        client: &mut Client,
        l: &mut Loader<'_>,
    ) -> Result<(), ProxyError> {
        ask_for_file(client, l.load).await?;
        let max_record = self.rt.config.server.max_packet_size;
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let packet = next_file_packet(client).await?;
            let eof = packet.is_empty();
            if let Err(killed) = self.load_killed() {
                if !eof {
                    drain_file(client).await?;
                }
                return Err(killed);
            }
            pending.extend_from_slice(&packet);
            let used = match self.load_records(l, &pending, eof).await {
                Ok(used) => used,
                Err(e) => {
                    if !eof {
                        drain_file(client).await?;
                    }
                    return Err(e);
                }
            };
            pending.drain(..used);
            if eof {
                return self.flush_all(l).await;
            }
            if pending.len() > max_record {
                drain_file(client).await?;
                return Err(ProxyError::client(
                    crate::error::ER_NET_PACKET_TOO_LARGE,
                    b"08S01",
                    format!(
                        "LOAD DATA: line {} is longer than server.max_packet_size ({max_record} bytes); nothing was loaded",
                        l.lines + 1
                    ),
                ));
            }
        }
    }

    /// Loads the complete records at the start of `input` (all of it when `eof`); returns
    /// the bytes used.
    async fn load_records(
        &mut self,
        l: &mut Loader<'_>,
        input: &[u8],
        eof: bool,
    ) -> Result<usize, ProxyError> {
        let format = &l.load.format;
        let mut used = 0;
        while l.ignore > 0 {
            let Some(n) = rows::skip_line(&input[used..], eof, format) else {
                return Ok(used);
            };
            if n == 0 {
                return Ok(used);
            }
            l.lines += count_lines(&input[used..used + n], &format.line_end);
            used += n;
            l.ignore -= 1;
        }
        loop {
            match rows::next(&input[used..], eof, format, l.layout.fields) {
                Next::NeedMore => return Ok(used),
                Next::End(n) => return Ok(used + n),
                Next::Record(record) => {
                    let bytes = &input[used..used + record.len];
                    l.records += 1;
                    let line = l.lines + 1;
                    l.lines += count_lines(bytes, &format.line_end);
                    l.at = (line, l.records);
                    let routed = self.route_record(l, bytes, &record).await;
                    let (shard, id, bytes) = routed.map_err(|e| at_line(e, line, l.records))?;
                    let batch = l.batches.entry(shard).or_default();
                    batch.bytes.extend_from_slice(&bytes);
                    batch.records.push(l.records);
                    batch.ids.push(id);
                    if batch.bytes.len() >= BATCH_BYTES {
                        self.flush_batch(l, shard).await?;
                    }
                    used += record.len;
                }
            }
        }
    }

    /// The shard of one record, its order id, and its bytes as the shard gets them (with
    /// the id the proxy issued for it).
    async fn route_record(
        &mut self,
        l: &mut Loader<'_>,
        bytes: &[u8],
        record: &Record,
    ) -> Result<(u32, u64, Vec<u8>), ProxyError> {
        let config = self.rt.config.clone();
        let value = |at: Option<usize>| {
            at.and_then(|i| record.fields.get(i))
                .and_then(|f| f.value.clone())
        };
        let params = [
            value(l.layout.channel).map_or(ParamValue::Null, ParamValue::Bytes),
            value(l.layout.region).map_or(ParamValue::Null, ParamValue::Bytes),
        ];
        let mut slots = Vec::with_capacity(2);
        for (i, kind) in [ContextKind::Channel, ContextKind::Region]
            .into_iter()
            .enumerate()
        {
            if params[i] != ParamValue::Null {
                slots.push(ContextSlot {
                    kind,
                    value: ValueSlot::Param(i as u32),
                });
            }
        }
        let values = StatementValues {
            sql: l.sql,
            tokens: &[],
            mode: self.state.lex_mode,
            params: &params,
            last_insert_id: 0,
            generated: &[],
        };
        let rt = self.rt.clone();
        let router = &rt.router;
        let context = router.route_context(&slots, &l.hints, &values, true)?;
        let now = super::super::statement::now_ms();
        let key_field = l.layout.key.map(|i| record.fields.get(i));
        let key = &config.sharding.shard_key;
        let id = match key_field {
            Some(None) => {
                return Err(ProxyError::unroutable(format!(
                    "the record has no {key} field"
                )));
            }
            Some(Some(field)) => match &field.value {
                None if l.table.0 == 0 => None,
                None => {
                    return Err(ProxyError::unroutable(format!(
                        "{key} is NULL (a row of this table names the order it belongs to)"
                    )));
                }
                Some(text) => Some(plain_id(text).ok_or_else(|| {
                    ProxyError::unroutable(format!(
                        "{key} '{}' is not an order id (digits only)",
                        String::from_utf8_lossy(text)
                    ))
                })?),
            },
            None => None,
        };
        let Some(id) = id else {
            let Some(context) = context else {
                return Err(ProxyError::unroutable(format!(
                    "cannot issue an order id for it: it names no known {} or {} (give one, or a /*region='..'*/ hint, or an {key} field)",
                    config.sharding.channel_column, config.sharding.region_column
                )));
            };
            let channel = context.channel;
            let id = self.next_issued(l, channel).await?;
            if router.decoder().decode(id, now).is_err() {
                l.pending.insert(id, channel);
                l.index_rows.push((id, channel, l.at.0, l.at.1));
            }
            let shard = config.shard_of(channel, id);
            return Ok((shard, id, with_id(bytes, record, l, id)));
        };
        // An id an earlier record of this load placed has the index row it will write.
        let (channel, layer) = match l.pending.get(&id) {
            Some(&channel) => (channel, crate::route::Layer::Index),
            None => {
                let resolved = router.resolve(id, true, context, now, &mut l.fx).await?;
                let Some(channel) = resolved.channel else {
                    return Err(ProxyError::unroutable(format!(
                        "cannot route it: {key} {id} does not carry a route key, the index table has no row for it, and the record names no known channel or region"
                    )));
                };
                (channel, resolved.layer)
            }
        };
        if let Some(named) = params[0]
            .clone()
            .ne(&ParamValue::Null)
            .then(|| values.text(ValueSlot::Param(0)))
            .flatten()
            .and_then(|t| config.channel_by_name(&t))
        {
            if named != channel {
                return Err(ProxyError::unroutable(format!(
                    "{key} {id} belongs to {} but its {} field names another channel; refusing the load",
                    config.channel(channel).name,
                    config.sharding.channel_column
                )));
            }
        }
        if layer != crate::route::Layer::Decode && l.pending.insert(id, channel).is_none() {
            // Written again when the index knows it (it may have been pruned since as
            // dangling; writing it marks it young), as an INSERT does.
            l.index_rows.push((id, channel, l.at.0, l.at.1));
        }
        Ok((config.shard_of(channel, id), id, bytes.to_vec()))
    }

    /// The next id issued for `channel` (taken from a stock issued [`ID_STOCK`] at a time).
    async fn next_issued(
        &mut self,
        l: &mut Loader<'_>,
        channel: ChannelId,
    ) -> Result<u64, ProxyError> {
        let stock = l.ids.entry(channel).or_default();
        if stock.is_empty() {
            stock.extend(self.issue_ids(Some(channel), ID_STOCK).await?);
        }
        let id = l
            .ids
            .get_mut(&channel)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| ProxyError::Internal("no order id issued".into()))?;
        l.first_issued.get_or_insert(id);
        Ok(id)
    }

    /// Writes the index rows of the loaded records whose ids do not decode (each
    /// committed on its own, before the load commits). An index row that names another
    /// channel fails the load, naming the record.
    async fn write_index_rows(&mut self, l: &mut Loader<'_>) -> Result<(), ProxyError> {
        let rt = self.rt.clone();
        for &(id, channel, line, record) in &l.index_rows {
            rt.router
                .write_index(id, channel)
                .await
                .map_err(|e| at_line(e, line, record))?;
        }
        Ok(())
    }

    /// Loads every batch that holds records. A server's error does not stop the others: the
    /// error of the earliest row of the file is the load's, as one table would stop at it
    /// (the load is rolled back whatever fails). A file of no record in the client's
    /// transaction is loaded into the first shard all the same: the load opens the
    /// transaction (autocommit off) and gets the server's answer, as on one table.
    async fn flush_all(&mut self, l: &mut Loader<'_>) -> Result<(), ProxyError> {
        let shards: Vec<u32> = l.batches.keys().copied().collect();
        let mut first_error: Option<(u64, ProxyError)> = None;
        for shard in shards {
            match self.flush_batch(l, shard).await {
                Ok(()) => {}
                Err(ProxyError::Backend {
                    code,
                    state,
                    message,
                }) => {
                    let row = row_of(&message).unwrap_or(u64::MAX);
                    if first_error.as_ref().is_none_or(|(r, _)| row < *r) {
                        let e = ProxyError::Backend {
                            code,
                            state,
                            message,
                        };
                        first_error = Some((row, e));
                    }
                }
                Err(other) => return Err(other),
            }
        }
        if let Some((_, e)) = first_error {
            return Err(e);
        }
        if l.records == 0 && l.in_client_transaction && !self.in_transaction() {
            let first = self.rt.router.first_shard();
            self.load_batch(l, first, Batch::default()).await?;
        }
        Ok(())
    }

    /// Loads `shard`'s batch into the shard with the client's statement.
    async fn flush_batch(&mut self, l: &mut Loader<'_>, shard: u32) -> Result<(), ProxyError> {
        let Some(batch) = l.batches.remove(&shard).filter(|b| !b.records.is_empty()) else {
            return Ok(());
        };
        self.load_batch(l, shard, batch).await
    }

    /// Loads `batch` into `shard` with the client's statement; the server's errors and
    /// warnings in the file's terms (its row numbers, the logical table).
    async fn load_batch(
        &mut self,
        l: &mut Loader<'_>,
        shard: u32,
        batch: Batch,
    ) -> Result<(), ProxyError> {
        self.load_killed()?;
        let config = self.rt.config.clone();
        let place = &config.sharding.shards[shard as usize];
        let ds = place.datasource;
        let first_use = !l.touched.contains(&ds);
        if first_use && l.in_client_transaction {
            // With transactions.cross_datasource = "refuse" a transaction writes to one
            // datasource: the second one a load reaches is refused as any write there is.
            self.txn.check_write(ds, &config)?;
        }
        let physical = format!(
            "{}.{}",
            crate::sql::quote_ident(&place.database),
            crate::sql::quote_ident(&place.tables[usize::from(l.table.0)])
        );
        let logical = format!(
            "{}.{}",
            crate::sql::quote_ident(&config.sharding.logical_database),
            crate::sql::quote_ident(&config.sharding.binding_tables[usize::from(l.table.0)])
        );
        let in_file = |message: &[u8]| {
            let message = renumber_rows(message, &batch.records);
            String::from_utf8_lossy(&message)
                .replace(&physical, &logical)
                .into_bytes()
        };
        let in_file_terms = |e: ProxyError| match e {
            ProxyError::Backend {
                code,
                state,
                message,
            } => ProxyError::Backend {
                code,
                state,
                message: in_file(&message),
            },
            other => other,
        };
        let prepend = l
            .layout
            .key
            .is_none()
            .then(|| crate::sql::quote_ident(&config.sharding.shard_key));
        let statement = l.load.for_shard(l.sql, &physical, prepend.as_deref());
        if first_use {
            if l.in_client_transaction {
                let conn = self.connection(Target::primary(ds)).await?;
                conn.execute(b"SAVEPOINT routekey_load").await?;
            }
            self.record_write(ds);
            l.touched.push(ds);
        }
        self.connection(Target::primary(ds)).await?;
        // A KILL QUERY reaches the batch running on its backend (1317 from there).
        self.load_running(true);
        let conn = self.connection(Target::primary(ds)).await?;
        match conn.load_local(&statement).await.map_err(in_file_terms)? {
            FileRequest::Asked => {}
            FileRequest::Answered(_) => {
                return Err(ProxyError::Internal(format!(
                    "datasource {} loaded shard {shard} without asking for its records",
                    config.datasource(ds).name
                )));
            }
        }
        for chunk in batch.bytes.chunks(PACKET_BYTES) {
            conn.send_file_data(chunk).await?;
        }
        let ok = conn.finish_file().await.map_err(in_file_terms)?;
        let read = records_of(&ok.info);
        if read != Some(batch.records.len() as u64) {
            conn.mark_broken();
            return Err(ProxyError::Internal(format!(
                "shard {shard} read {} records where the proxy sent {}: the file is cut differently than the proxy expected; nothing was loaded",
                read.map_or("an unknown number of".to_owned(), |n| n.to_string()),
                batch.records.len()
            )));
        }
        if ok.warnings > 0 {
            // The batch's first 64 (the server keeps no more): the file's first 64 are
            // among the batches' first ones.
            let mut at = batch.records.first().copied().unwrap_or(0);
            for mut d in conn.diagnostics().await? {
                d.message = in_file(&d.message);
                let row = row_of(&d.message);
                // A duplicate key names the record's id, not its row.
                let by_id = || {
                    let text = String::from_utf8_lossy(&d.message);
                    let (i, _) = batch.ids.iter().enumerate().find(|(_, id)| {
                        text.contains(&format!("'{id}'")) || text.contains(&format!("'{id}-"))
                    })?;
                    batch.records.get(i).copied()
                };
                at = row.or_else(by_id).unwrap_or(at);
                l.diagnostics.push(Placed {
                    at,
                    names_a_row: row.is_some(),
                    diagnostic: d,
                });
            }
        }
        l.affected += ok.affected_rows;
        l.warnings += u64::from(ok.warnings);
        l.info = if l.info.is_empty() {
            ok.info
        } else {
            sum_infos(&l.info, &ok.info)
        };
        Ok(())
    }

    /// Commits (or rolls back) what the load did on each datasource it reached.
    async fn end_load(&mut self, l: &mut Loader<'_>, ok: bool) -> Result<(), ProxyError> {
        if !l.in_client_transaction {
            if !ok {
                self.txn.end(b"ROLLBACK").await.ok();
                return Ok(());
            }
            let atomic = self.txn.distributed().is_some();
            let committed = self.txn.end(b"COMMIT").await;
            if atomic {
                // Committed on every datasource or on none: the atomic commit's own error
                // says which (issue 27).
                return committed;
            }
            return committed.map_err(|e| {
                ProxyError::client(
                    crate::error::ER_ERROR_DURING_COMMIT,
                    b"HY000",
                    format!(
                        "LOAD DATA: the COMMIT failed on a datasource ({e}); datasources that committed before it keep their rows: check the table"
                    ),
                )
            });
        }
        let end: &[u8] = if ok {
            b"RELEASE SAVEPOINT routekey_load"
        } else {
            b"ROLLBACK TO SAVEPOINT routekey_load"
        };
        for ds in l.touched.clone() {
            if let Some(conn) = self.txn.held_mut(ds) {
                conn.execute(end).await?;
            }
        }
        Ok(())
    }

    /// The answer to a load that succeeded, and the session's bookkeeping.
    fn finish_load(
        &mut self,
        client: &mut Client,
        mut l: Loader<'_>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        if l.affected > 0 {
            self.txn.record_changed_rows();
        }
        if let Some(id) = l.first_issued {
            self.state.set_last_insert_id(id);
        }
        self.state.row_count = i64::try_from(l.affected).unwrap_or(i64::MAX);
        let (diagnostics, warnings) = in_file_order(l.diagnostics, l.warnings);
        l.warnings = warnings;
        self.state.warnings = diagnostics;
        self.txn.release_idle();
        let info = if l.info.is_empty() {
            // No record at all: what the server says of an empty file.
            b"Records: 0  Deleted: 0  Skipped: 0  Warnings: 0".to_vec()
        } else {
            with_warnings(&l.info, l.warnings)
        };
        client.ok(&OkInfo {
            affected_rows: l.affected,
            last_insert_id: l.first_issued.unwrap_or(0),
            status: self.final_status(more),
            warnings: u16::try_from(l.warnings).unwrap_or(u16::MAX),
            info,
            session_state: Vec::new(),
        })
    }
}

/// A record's bytes with the issued `id`: put first (the column list leaves the shard key
/// out) or in place of its NULL field.
fn with_id(bytes: &[u8], record: &Record, l: &Loader<'_>, id: u64) -> Vec<u8> {
    let id = id.to_string();
    let mut out = Vec::with_capacity(bytes.len() + id.len() + l.load.format.field_end.len());
    match l.layout.key.and_then(|i| record.fields.get(i)) {
        Some(field) => {
            out.extend_from_slice(&bytes[..field.raw.start]);
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(&bytes[field.raw.end..]);
        }
        None => {
            out.extend_from_slice(&bytes[..record.fields_start]);
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(&l.load.format.field_end);
            out.extend_from_slice(&bytes[record.fields_start..]);
        }
    }
    out
}

/// An order id written as plain digits (what the server reads as the same number).
fn plain_id(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// How many line terminators `bytes` holds.
fn count_lines(bytes: &[u8], line_end: &[u8]) -> u64 {
    memchr::memmem::find_iter(bytes, line_end).count() as u64
}

/// `Records: N` of a LOAD DATA's OK info.
fn records_of(info: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(info).ok()?;
    let rest = text.strip_prefix("Records: ")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A shard's diagnostic with its row numbers (of the batch) made the file's.
fn renumber_rows(message: &[u8], records: &[u64]) -> Vec<u8> {
    let text = String::from_utf8_lossy(message);
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(at) = rest.to_ascii_lowercase().find("row ") {
        let (before, after) = rest.split_at(at + 4);
        out.push_str(before);
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        match after[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|n| records.get(n.checked_sub(1)?))
        {
            Some(record) => out.push_str(&record.to_string()),
            None => out.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out.into_bytes()
}

/// A LOAD DATA info with its `Warnings: N` made `warnings` (the batches' sum counts a
/// statement's warning once per batch).
fn with_warnings(info: &[u8], warnings: u64) -> Vec<u8> {
    let text = String::from_utf8_lossy(info);
    match text.find("Warnings: ") {
        Some(at) => {
            let rest = &text[at + 10..];
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            format!("{}Warnings: {warnings}{}", &text[..at], &rest[digits..]).into_bytes()
        }
        None => info.to_vec(),
    }
}

/// The row number a message names (`... at row 12`, `Row 12 was truncated ...`).
fn row_of(message: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(message).to_ascii_lowercase();
    let at = text.find("row ")?;
    text[at + 4..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The diagnostics of every batch as one table's: the first [`MAX_DIAGNOSTICS`] in the
/// file's order; a statement's warning (one that names no row and that several batches
/// gave) once, first, as the server gives it before the rows'; the warning count less
/// those repeats.
fn in_file_order(mut placed: Vec<Placed>, warnings: u64) -> (Vec<Diagnostic>, u64) {
    let mut repeats = 0;
    let mut kept: Vec<Placed> = Vec::with_capacity(placed.len().min(MAX_DIAGNOSTICS));
    for p in placed.drain(..) {
        if !p.names_a_row {
            if let Some(first) = kept
                .iter_mut()
                .find(|k| !k.names_a_row && k.diagnostic == p.diagnostic)
            {
                first.at = 0;
                repeats += 1;
                continue;
            }
        }
        kept.push(p);
    }
    kept.sort_by_key(|p| p.at);
    kept.truncate(MAX_DIAGNOSTICS);
    (
        kept.into_iter().map(|p| p.diagnostic).collect(),
        warnings.saturating_sub(repeats),
    )
}

/// `e` with the line and record of the file it concerns.
fn at_line(e: ProxyError, line: u64, record: u64) -> ProxyError {
    match e {
        ProxyError::Client {
            code,
            state,
            message,
        } => ProxyError::Client {
            code,
            state,
            message: format!(
                "LOAD DATA line {line} (record {record}): {message}; nothing was loaded"
            ),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_row_numbers_become_the_files() {
        assert_eq!(
            renumber_rows(b"Row 2 doesn't contain data for all columns", &[4, 9]),
            b"Row 9 doesn't contain data for all columns"
        );
        assert_eq!(
            renumber_rows(b"Data truncated for column 'note' at row 1", &[17]),
            b"Data truncated for column 'note' at row 17"
        );
        assert_eq!(renumber_rows(b"no rows here", &[1]), b"no rows here");
    }

    #[test]
    fn only_plain_digits_are_ids_and_records_are_counted_from_the_info() {
        assert_eq!(plain_id(b"4257897811244828587"), Some(4257897811244828587));
        for bad in [
            &b""[..],
            b" 1",
            b"1.0",
            b"-1",
            b"0x10",
            b"99999999999999999999",
        ] {
            assert_eq!(plain_id(bad), None);
        }
        assert_eq!(
            records_of(b"Records: 12  Deleted: 0  Skipped: 0  Warnings: 1"),
            Some(12)
        );
        assert_eq!(records_of(b""), None);
        assert_eq!(count_lines(b"a\r\nb\r\n", b"\r\n"), 2);
    }
}
