//! Answers about the session and the logical schema: `SHOW WARNINGS`, `SHOW TABLES` (the
//! logical tables among the default datasource's), and `DESCRIBE`/`SHOW COLUMNS`/
//! `SHOW CREATE TABLE`/`SHOW INDEX` of a logical table, from its first shard.

use mysql_common::constants::{ColumnFlags, ColumnType, Command};

use super::session::Session;
use crate::config::ResultNames;
use crate::error::ProxyError;
use crate::execute::Target;
use crate::protocol::packets::{
    ColumnSpec, parse_text_row, put_lenenc_int, rewrite_column_definition, text_row,
};
use crate::protocol::status::MoreResults;
use crate::rewrite::quote_ident;
use crate::sql::TokSpan;
use crate::sql::lexer::Lexed;
use crate::sql::lexer::ident_text;
use crate::wire::client::Client;

/// A VARCHAR column of `chars` characters in the client's result character set.
pub(super) fn varchar(name: &str, chars: u32, charset: (u16, u32)) -> ColumnSpec<'_> {
    ColumnSpec {
        name,
        column_type: ColumnType::MYSQL_TYPE_VAR_STRING,
        flags: ColumnFlags::NOT_NULL_FLAG,
        charset: charset.0,
        length: chars * charset.1,
        decimals: 39,
    }
}

/// A BIGINT UNSIGNED NOT NULL column of `length` digits.
pub(super) fn unsigned_column(name: &str, length: u32) -> ColumnSpec<'_> {
    ColumnSpec {
        name,
        column_type: ColumnType::MYSQL_TYPE_LONGLONG,
        flags: ColumnFlags::NOT_NULL_FLAG | ColumnFlags::UNSIGNED_FLAG | ColumnFlags::BINARY_FLAG,
        charset: 63,
        length,
        decimals: 0,
    }
}

/// SQL `LIKE` with `%`, `_` and `\` escapes, ASCII case-insensitive (table names).
fn like(pattern: &[u8], text: &[u8]) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some((b'%', rest)) => (0..=t.len()).any(|i| go(rest, &t[i..])),
            Some((b'_', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some((b'\\', rest)) if !rest.is_empty() => {
                t.first().is_some_and(|c| c.eq_ignore_ascii_case(&rest[0]))
                    && go(&rest[1..], &t[1..])
            }
            Some((c, rest)) => {
                t.first().is_some_and(|x| x.eq_ignore_ascii_case(c)) && go(rest, &t[1..])
            }
        }
    }
    go(pattern, text)
}

impl Session {
    /// `SHOW WARNINGS`, `SHOW ERRORS`, `SHOW COUNT(*) WARNINGS|ERRORS`: the previous
    /// statement's diagnostics, fetched from its backend connection before it was released.
    pub fn show_diagnostics(
        &mut self,
        client: &mut Client,
        errors_only: bool,
        count: bool,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let rows: Vec<_> = self
            .state
            .warnings
            .iter()
            .filter(|d| !errors_only || d.level == b"Error")
            .collect();
        let status = self.final_status(more);
        if count {
            let name = if errors_only {
                "@@session.error_count"
            } else {
                "@@session.warning_count"
            };
            let spec = ColumnSpec {
                name,
                column_type: ColumnType::MYSQL_TYPE_LONGLONG,
                flags: ColumnFlags::UNSIGNED_FLAG | ColumnFlags::BINARY_FLAG,
                charset: 63,
                length: 21,
                decimals: 0,
            };
            let value = rows.len().to_string().into_bytes();
            return client.result_set(&[spec], &[vec![Some(value)]], ("", ""), status);
        }
        let charset = self.state.result_charset();
        let columns = [
            varchar("Level", 7, charset),
            ColumnSpec {
                name: "Code",
                column_type: ColumnType::MYSQL_TYPE_LONG,
                flags: ColumnFlags::NOT_NULL_FLAG
                    | ColumnFlags::UNSIGNED_FLAG
                    | ColumnFlags::BINARY_FLAG,
                charset: 63,
                length: 4,
                decimals: 0,
            },
            varchar("Message", 512, charset),
        ];
        let rows: Vec<Vec<Option<Vec<u8>>>> = rows
            .into_iter()
            .map(|d| {
                vec![
                    Some(d.level.clone()),
                    Some(d.code.clone()),
                    Some(d.message.clone()),
                ]
            })
            .collect();
        client.result_set(&columns, &rows, ("", ""), status)
    }

    /// `SHOW [SESSION] STATUS [LIKE ... | WHERE ...]`: the default datasource's answer,
    /// with the `Ssl_` variables that describe one connection replaced by the client
    /// connection's (see [`client_ssl_status`]); the backend's would describe the proxy's
    /// own link to it.
    pub async fn show_session_status(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let ds = self.rt.config.sharding.default_datasource;
        let conn = self.connection(Target::primary(ds)).await?;
        let fetched = conn.query_raw(sql).await;
        self.txn.release_idle();
        let (columns, raw_rows) = fetched?;
        let width = columns.len();
        let status = self.final_status(more);
        let mut header = Vec::new();
        put_lenenc_int(&mut header, width as u64);
        client.packet(&header)?;
        for def in &columns {
            client.packet(def)?;
        }
        client.columns_end(status)?;
        for raw in &raw_rows {
            let Some(mut row) = parse_text_row(raw, width).filter(|r| r.len() == 2) else {
                client.packet(raw)?;
                continue;
            };
            let name = row[0].clone().unwrap_or_default();
            if let Some(value) = client_ssl_status(&name, self.tls.as_ref()) {
                row[1] = Some(value.into_bytes());
            }
            let values: Vec<Option<&[u8]>> = row.iter().map(|v| v.as_deref()).collect();
            client.packet(&text_row(&values))?;
        }
        self.state.warnings.clear();
        client.rows_end(0, status)
    }

    /// `SHOW ROUTEKEY STATS`: resolutions by layer since the proxy started, decode failures
    /// by reason, context conflicts, hints followed for unknown ids, and (with a Redis tier)
    /// Redis lookups by result.
    pub fn show_route_stats(
        &mut self,
        client: &mut Client,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        use crate::route::Layer;
        let stats = self.rt.router.stats();
        let mut rows: Vec<(String, u64)> = Layer::ALL
            .iter()
            .map(|l| {
                let name = match l {
                    Layer::Unresolved => "unresolved".to_owned(),
                    l => format!("resolved_by_{}", l.label()),
                };
                (name, stats.layer(*l))
            })
            .collect();
        rows.extend(
            stats
                .decode_failures()
                .iter()
                .map(|(reason, n)| (format!("decode_failed_{reason}"), *n)),
        );
        rows.push(("context_conflicts".to_owned(), stats.context_conflicts()));
        rows.push((
            "hints_followed_for_unknown_ids".to_owned(),
            stats.hints_followed(),
        ));
        if let Some(shared) = self.rt.router.shared_cache() {
            let n = shared.stats().snapshot();
            rows.extend([
                ("redis_hit".to_owned(), n.hit),
                ("redis_miss".to_owned(), n.miss),
                ("redis_error".to_owned(), n.error),
                ("redis_skipped".to_owned(), n.skipped),
            ]);
        }
        let issued = self.proxy.issuer.stats();
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        for channel in &self.rt.config.channels {
            let n = &issued.per_channel[usize::from(channel.code)];
            rows.push((format!("ids_issued_{}", channel.name), load(n)));
        }
        rows.push((
            "ids_issued_without_region".to_owned(),
            load(&issued.without_region),
        ));
        rows.push(("id_clock_refusals".to_owned(), load(&issued.clock_refusals)));
        rows.extend(self.proxy.metrics.scatter_counts());
        rows.push((
            "id_leases_refused_full".to_owned(),
            load(&issued.lease_full),
        ));
        self.name_count_result(client, ("Counter", 64), "Value", rows, more)
    }

    /// A result of (name, unsigned count) rows: `SHOW ROUTEKEY STATS`, `... CALLERS`.
    pub(super) fn name_count_result(
        &self,
        client: &mut Client,
        (name, chars): (&str, u32),
        count: &str,
        rows: Vec<(String, u64)>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let columns = [
            varchar(name, chars, self.state.result_charset()),
            ColumnSpec {
                name: count,
                column_type: ColumnType::MYSQL_TYPE_LONGLONG,
                flags: ColumnFlags::NOT_NULL_FLAG
                    | ColumnFlags::UNSIGNED_FLAG
                    | ColumnFlags::BINARY_FLAG,
                charset: 63,
                length: 20,
                decimals: 0,
            },
        ];
        let rows: Vec<Vec<Option<Vec<u8>>>> = rows
            .into_iter()
            .map(|(k, v)| vec![Some(k.into_bytes()), Some(v.to_string().into_bytes())])
            .collect();
        client.result_set(&columns, &rows, ("", ""), self.final_status(more))
    }

    /// `SHOW ROUTEKEY SHARDS`: one row per shard: `shard`, `channel`, `datasource`,
    /// `database`, `tables` (the physical tables, comma-separated, in the order of the
    /// configuration's sharded tables), `pool` (its datasource's main pool: `up` with its
    /// open and idle connections, or `down` with the last connect error when it has no
    /// connection and connecting failed), `map_version` (the shard map version this session
    /// routes by: 0 before the shard map table was first read).
    pub fn show_route_shards(
        &mut self,
        client: &mut Client,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let config = &self.rt.config;
        let pools = self.rt.pools.report();
        let charset = self.state.result_charset();
        let columns = [
            unsigned_column("shard", 10),
            varchar("channel", 64, charset),
            varchar("datasource", 64, charset),
            varchar("database", 64, charset),
            varchar("tables", 1024, charset),
            varchar("pool", 512, charset),
            unsigned_column("map_version", 20),
        ];
        let version = config.sharding.map_version.to_string().into_bytes();
        let rows: Vec<Vec<Option<Vec<u8>>>> = config
            .sharding
            .shards
            .iter()
            .enumerate()
            .map(|(n, s)| {
                let ds = config.datasource(s.datasource);
                let channel = config
                    .channel_of_shard(n as u32)
                    .map_or("", |c| config.channel(c).name.as_str());
                // A datasource with members: its primary's pool (the first member's
                // while none is known).
                let primary = self
                    .rt
                    .topology
                    .cluster(s.datasource)
                    .and_then(|c| c.primary_now())
                    .map_or(ds.address.as_str(), |m| ds.members[m].as_str());
                let pool = pools
                    .iter()
                    .find(|p| {
                        p.datasource == ds.name
                            && p.pool == "main"
                            && (!p.clustered || p.member == primary)
                    })
                    .map_or_else(String::new, |p| {
                        if p.open == 0 && !p.last_error.is_empty() {
                            format!("down: {}", p.last_error)
                        } else {
                            format!("up: {} open, {} idle of {}", p.open, p.idle, p.size)
                        }
                    });
                vec![
                    Some(n.to_string().into_bytes()),
                    Some(channel.as_bytes().to_vec()),
                    Some(ds.name.clone().into_bytes()),
                    Some(s.database.clone().into_bytes()),
                    Some(s.tables.join(", ").into_bytes()),
                    Some(pool.into_bytes()),
                    Some(version.clone()),
                ]
            })
            .collect();
        client.result_set(&columns, &rows, ("", ""), self.final_status(more))
    }

    /// `SHOW ROUTEKEY POOLS`: one row per datasource and pool (`main`, and `found_rows`
    /// for clients with CLIENT_FOUND_ROWS): `datasource`, `pool`, `size`, `open`, `idle`,
    /// `in_use`, `waits` (checkouts that waited, since the pool was built), `timeouts`
    /// (of those, the ones that gave up), `connect_errors`, `last_error`.
    pub fn show_route_pools(
        &mut self,
        client: &mut Client,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let charset = self.state.result_charset();
        let columns = [
            varchar("datasource", 64, charset),
            varchar("pool", 16, charset),
            unsigned_column("size", 10),
            unsigned_column("open", 10),
            unsigned_column("idle", 10),
            unsigned_column("in_use", 10),
            unsigned_column("waits", 20),
            unsigned_column("timeouts", 20),
            unsigned_column("connect_errors", 20),
            varchar("last_error", 512, charset),
            varchar("member", 255, charset),
        ];
        let rows: Vec<Vec<Option<Vec<u8>>>> = self
            .rt
            .pools
            .report()
            .into_iter()
            .map(|p| {
                let n = |v: u64| Some(v.to_string().into_bytes());
                vec![
                    Some(p.datasource.into_bytes()),
                    Some(p.pool.as_bytes().to_vec()),
                    n(u64::from(p.size)),
                    n(u64::from(p.open)),
                    n(u64::from(p.idle)),
                    n(u64::from(p.open.saturating_sub(p.idle))),
                    n(p.waits),
                    n(p.timeouts),
                    n(p.connect_errors),
                    Some(p.last_error.into_bytes()),
                    Some(p.member.into_bytes()),
                ]
            })
            .collect();
        client.result_set(&columns, &rows, ("", ""), self.final_status(more))
    }

    /// `SHOW [FULL] TABLES`: the default datasource's tables plus the logical tables, sorted.
    pub async fn show_tables(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        database: Option<&str>,
        like_pattern: Option<&[u8]>,
        filtered: bool,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let config = self.rt.config.clone();
        let logical = &config.sharding.logical_database;
        if let Some(db) = database {
            self.checks.database(db)?;
        }
        let about_logical = match database {
            Some(db) => db.eq_ignore_ascii_case(logical),
            None => self
                .state
                .in_database(&self.rt.config.sharding.logical_database),
        };
        let ds = config.sharding.default_datasource;
        if !about_logical {
            return self.run_one(client, ds, sql.to_vec(), None, more).await;
        }
        if filtered {
            return Err(ProxyError::not_yet(
                "SHOW TABLES ... WHERE on the logical database (use LIKE)",
            ));
        }
        // The default datasource's database stands for the logical one: its own answer
        // (column definitions included) plus the logical tables.
        let physical = config
            .datasource(ds)
            .database
            .clone()
            .unwrap_or_else(|| logical.clone());
        let query = if physical == *logical {
            sql.to_vec()
        } else {
            let full = sql
                .windows(4)
                .take(12)
                .any(|w| w.eq_ignore_ascii_case(b"full"));
            let mut q = format!(
                "SHOW {}TABLES FROM {}",
                if full { "FULL " } else { "" },
                quote_ident(&physical)
            )
            .into_bytes();
            if let Some(p) = like_pattern {
                q.extend_from_slice(b" LIKE ");
                q.extend_from_slice(&crate::rewrite::quote_string(p));
            }
            q
        };
        let conn = self.connection(Target::read(ds)).await?;
        let fetched = conn.query_raw(&query).await;
        self.txn.release_idle();
        let (columns, raw_rows) = fetched?;
        let width = columns.len();
        let mut rows: Vec<Vec<Option<Vec<u8>>>> = raw_rows
            .iter()
            .filter_map(|r| parse_text_row(r, width))
            .collect();
        for t in &config.sharding.binding_tables {
            if like_pattern.is_none_or(|p| like(p, t.as_bytes())) {
                let mut row = vec![Some(t.clone().into_bytes())];
                if width > 1 {
                    row.push(Some(b"BASE TABLE".to_vec()));
                }
                rows.push(row);
            }
        }
        rows.sort();
        rows.dedup_by(|a, b| a.first() == b.first());
        let status = self.final_status(more);
        let mut header = Vec::new();
        put_lenenc_int(&mut header, width as u64);
        client.packet(&header)?;
        for def in &columns {
            client.packet(&rename_tables_in(def, &physical, logical))?;
        }
        client.columns_end(status)?;
        for row in &rows {
            let values: Vec<Option<&[u8]>> = row.iter().map(|v| v.as_deref()).collect();
            client.packet(&text_row(&values))?;
        }
        self.state.warnings.clear();
        client.rows_end(0, status)
    }

    /// DESCRIBE, SHOW COLUMNS, SHOW CREATE TABLE, SHOW INDEX of a table: a logical table
    /// answers from its first shard under its logical name; others pass through.
    #[allow(clippy::too_many_arguments)]
    pub async fn table_info(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        table: TokSpan,
        database: Option<TokSpan>,
        names_in_rows: bool,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let config = self.rt.config.clone();
        let mode = self.state.lex_mode;
        let tokens = &lexed.tokens;
        let name = ident_text(sql, &tokens[table.last as usize], mode);
        let qualifier = if table.first != table.last {
            Some(ident_text(sql, &tokens[table.first as usize], mode))
        } else {
            database.map(|d| ident_text(sql, &tokens[d.first as usize], mode))
        };
        if let Some(db) = &qualifier {
            self.checks.database(db)?;
        }
        let in_logical = match &qualifier {
            Some(db) => db.eq_ignore_ascii_case(&config.sharding.logical_database),
            None => self
                .state
                .in_database(&self.rt.config.sharding.logical_database),
        };
        let binding = config.binding_table(&name).filter(|_| in_logical);
        let Some(table_id) = binding else {
            let ds = config.sharding.default_datasource;
            return self.run_one(client, ds, sql.to_vec(), None, more).await;
        };
        let first = self.rt.router.first_shard();
        let shard = &config.sharding.shards[first as usize];
        let physical = &shard.tables[usize::from(table_id.0)];
        let range =
            |s: TokSpan| tokens[s.first as usize].range.start..tokens[s.last as usize].range.end;
        let mut edits = vec![(
            range(table),
            format!("{}.{}", quote_ident(&shard.database), quote_ident(physical)),
        )];
        if let Some(d) = database {
            edits.push((range(d), quote_ident(&shard.database)));
        }
        edits.sort_by_key(|e| e.0.start);
        let mut rewritten = Vec::with_capacity(sql.len() + 32);
        let mut at = 0;
        for (r, text) in &edits {
            rewritten.extend_from_slice(&sql[at..r.start]);
            rewritten.extend_from_slice(text.as_bytes());
            at = r.end;
        }
        rewritten.extend_from_slice(&sql[at..]);
        let names = shard.names.clone();
        if !names_in_rows {
            return self
                .run_one(client, shard.datasource, rewritten, Some(names), more)
                .await;
        }
        let logical = config.sharding.binding_tables[usize::from(table_id.0)].clone();
        self.rows_renamed(
            client,
            shard.datasource,
            &rewritten,
            physical,
            &logical,
            &names,
            more,
        )
        .await
    }

    /// Runs a small query and relays it with the physical table name in the rows replaced
    /// by the logical one (SHOW CREATE TABLE, SHOW INDEX).
    #[allow(clippy::too_many_arguments)]
    async fn rows_renamed(
        &mut self,
        client: &mut Client,
        ds: crate::config::DatasourceId,
        sql: &[u8],
        physical: &str,
        logical: &str,
        names: &std::sync::Arc<ResultNames>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let fetched = match self.connection(Target::read(ds)).await {
            Ok(conn) => conn.query_raw(sql).await,
            Err(e) => Err(e),
        };
        self.txn.release_idle();
        let (defs, rows) = fetched?;
        let from = format!("`{physical}`");
        let to = format!("`{logical}`");
        let status = self.final_status(more);
        if defs.is_empty() {
            return client.ok(&crate::protocol::packets::OkInfo {
                status,
                ..Default::default()
            });
        }
        client.send_columns(&defs, Some(names), status)?;
        for p in &rows {
            let row = parse_text_row(p, defs.len()).unwrap_or_default();
            let renamed: Vec<Option<Vec<u8>>> = row
                .into_iter()
                .map(|v| {
                    v.map(|v| {
                        if v == physical.as_bytes() {
                            logical.as_bytes().to_vec()
                        } else {
                            replace_first(&v, from.as_bytes(), to.as_bytes())
                        }
                    })
                })
                .collect();
            let values: Vec<Option<&[u8]>> = renamed.iter().map(|v| v.as_deref()).collect();
            client.packet(&text_row(&values))?;
        }
        self.state.warnings.clear();
        client.rows_end(0, status)
    }
}

impl Session {
    /// COM_FIELD_LIST (the CLI's name completion): the columns of a table. A logical table
    /// answers from its first shard under its logical names; others pass through.
    pub async fn field_list(&mut self, client: &mut Client, body: &[u8]) -> Result<(), ProxyError> {
        // A current database a reload took out of the scope lists nothing, as statements
        // are refused there (1044).
        self.refresh()?;
        if let Some(db) = self.state.database.as_deref() {
            self.checks.database(db)?;
        }
        let config = self.rt.config.clone();
        let (table, rest) = match body.iter().position(|&b| b == 0) {
            Some(i) => (&body[..i], &body[i..]),
            None => (body, &[][..]),
        };
        let name = String::from_utf8_lossy(table).into_owned();
        let binding = config.binding_table(&name).filter(|_| {
            self.state
                .in_database(&self.rt.config.sharding.logical_database)
        });
        let (ds, request, names) = match binding {
            Some(id) => {
                let shard = &config.sharding.shards[self.rt.router.first_shard() as usize];
                let mut request = shard.tables[usize::from(id.0)].clone().into_bytes();
                request.extend_from_slice(rest);
                (
                    shard.datasource,
                    request,
                    Some((shard.database.clone(), shard.names.clone())),
                )
            }
            None => (config.sharding.default_datasource, body.to_vec(), None),
        };
        let conn = self.connection(Target::read(ds)).await?;
        if let Some((database, _)) = &names {
            conn.init_db(database).await?;
        }
        conn.send_command(Command::COM_FIELD_LIST, &request).await?;
        let mut failure = None;
        loop {
            // The reply is column definitions up to an EOF: read as rows are.
            match conn.next_row().await {
                Ok(Some(p)) => match names
                    .as_ref()
                    .and_then(|(_, n)| rewrite_column_definition(&p, n))
                {
                    Some(renamed) => client.packet(&renamed)?,
                    None => client.packet(&p)?,
                },
                Ok(None) => break,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        self.txn.release_idle();
        match failure {
            Some(e) => Err(e),
            None => client.rows_end(0, self.status()),
        }
    }
}

/// A SHOW TABLES column definition with `Tables_in_<physical>` named after the logical
/// database (unchanged when the names agree).
fn rename_tables_in(def: &[u8], physical: &str, logical: &str) -> Vec<u8> {
    if physical == logical {
        return def.to_vec();
    }
    let from = format!("Tables_in_{physical}");
    let to = format!("Tables_in_{logical}");
    let mut pos = 0;
    let mut out = Vec::with_capacity(def.len() + 8);
    for _ in 0..6 {
        let Some(field) = crate::protocol::packets::read_lenenc_bytes(def, &mut pos) else {
            return def.to_vec();
        };
        crate::protocol::packets::put_lenenc_bytes(
            &mut out,
            &replace_first(field, from.as_bytes(), to.as_bytes()),
        );
    }
    out.extend_from_slice(&def[pos..]);
    out
}

fn replace_first(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    match haystack.windows(from.len()).position(|w| w == from) {
        Some(i) => [&haystack[..i], to, &haystack[i + from.len()..]].concat(),
        None => haystack.to_vec(),
    }
}

/// The value of status variable `name` for the client connection when it is one of the
/// `Ssl_` variables MariaDB keeps per connection; `None` for any other variable (the
/// backend's value stands). In clear text they read as MariaDB shows them for a clear-text
/// connection (empty, or 0). Over TLS, `Ssl_cipher` and `Ssl_version` are the client
/// connection's, `Ssl_cipher_list` names the one suite in use; the certificate dates and
/// verification settings are not tracked and read empty or 0.
pub fn client_ssl_status(
    name: &[u8],
    tls: Option<&crate::wire::stream::TlsInfo>,
) -> Option<String> {
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    let text = |v: Option<&String>| v.cloned().unwrap_or_default();
    Some(match name.as_str() {
        "ssl_cipher" | "ssl_cipher_list" => text(tls.map(|t| &t.cipher)),
        "ssl_version" => text(tls.map(|t| &t.version)),
        "ssl_server_not_after" | "ssl_server_not_before" => String::new(),
        "ssl_default_timeout" | "ssl_sessions_reused" | "ssl_verify_depth" | "ssl_verify_mode" => {
            "0".to_owned()
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn like_patterns() {
        assert!(like(b"t\\_%", b"t_order"));
        assert!(!like(b"t\\_%", b"tx"));
        assert!(like(b"%ORDER%", b"t_order_item"));
        assert!(like(b"t_order", b"T_ORDER"));
        assert!(!like(b"t_order", b"t_order_item"));
    }
}
