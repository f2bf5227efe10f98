//! The logical schema in `information_schema` and `SHOW TABLE STATUS` (SPEC §8): a DBA's
//! tool or mariadb-dump asking the server's catalog about the logical database sees the
//! logical tables (each described by its first shard, with row counts and sizes summed
//! over every shard) and never the physical shard tables or the proxy's own databases.
//!
//! How: for each catalog view a statement names (`TABLES`, `COLUMNS`, `STATISTICS`,
//! `KEY_COLUMN_USAGE`, `TABLE_CONSTRAINTS`, `SCHEMATA`, `TRIGGERS`, `PARTITIONS`,
//! `PROCESSLIST`), the default datasource's connection gets a temporary copy of the view
//! (`CREATE TEMPORARY TABLE ... AS SELECT * FROM information_schema.X WHERE 0`, so every
//! column keeps the view's type) holding the rows the client may see — those of the
//! databases in its scope (SPEC §8a), plus the logical tables' rows; for `PROCESSLIST`
//! the proxy's own sessions it may see —; the statement runs against the copies
//! and they are dropped before the connection goes back to its pool. Temporary tables work
//! under `LOCK TABLES` and inside a transaction without ending it.

use super::session::Session;
use crate::config::ResultNames;
use crate::config::{Config, DatasourceId};
use crate::error::ProxyError;
use crate::execute::Target;
use crate::execute::results::Extras;
use crate::plan::Plan;
use crate::protocol::packets::{parse_text_row, read_lenenc_bytes};
use crate::protocol::status::MoreResults;
use crate::rewrite::{quote_ident, quote_string};
use crate::sql::lexer::{Lexed, TokenKind};
use crate::wire::client::Client;

/// A catalog view the proxy answers with the logical tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// Its name in `information_schema`, upper case.
    pub name: &'static str,
    /// Columns holding a database name.
    schema_columns: &'static [&'static str],
    /// Columns holding a table name.
    table_columns: &'static [&'static str],
}

/// The views answered with the logical tables (and `PROCESSLIST` with the proxy's own
/// sessions the user may see).
pub const VIEWS: [View; 9] = [
    View {
        name: "TABLES",
        schema_columns: &["TABLE_SCHEMA"],
        table_columns: &["TABLE_NAME"],
    },
    View {
        name: "COLUMNS",
        schema_columns: &["TABLE_SCHEMA"],
        table_columns: &["TABLE_NAME"],
    },
    View {
        name: "STATISTICS",
        schema_columns: &["TABLE_SCHEMA", "INDEX_SCHEMA"],
        table_columns: &["TABLE_NAME"],
    },
    View {
        name: "KEY_COLUMN_USAGE",
        schema_columns: &[
            "TABLE_SCHEMA",
            "CONSTRAINT_SCHEMA",
            "REFERENCED_TABLE_SCHEMA",
        ],
        table_columns: &["TABLE_NAME", "REFERENCED_TABLE_NAME"],
    },
    View {
        name: "SCHEMATA",
        schema_columns: &["SCHEMA_NAME"],
        table_columns: &[],
    },
    View {
        name: "TABLE_CONSTRAINTS",
        schema_columns: &["TABLE_SCHEMA", "CONSTRAINT_SCHEMA"],
        table_columns: &["TABLE_NAME"],
    },
    View {
        name: "PROCESSLIST",
        schema_columns: &["DB"],
        table_columns: &[],
    },
    // mariadb-dump reads these two; the logical tables have no triggers of their own.
    View {
        name: "TRIGGERS",
        schema_columns: &["TRIGGER_SCHEMA", "EVENT_OBJECT_SCHEMA"],
        table_columns: &["EVENT_OBJECT_TABLE"],
    },
    View {
        name: "PARTITIONS",
        schema_columns: &["TABLE_SCHEMA"],
        table_columns: &["TABLE_NAME"],
    },
];

/// `information_schema.PROCESSLIST`.
const PROCESSLIST: View = VIEWS[6];

/// Where a statement names a catalog view: the byte range of the reference
/// (`information_schema.TABLES`, or `TABLES` alone while the session is in
/// `information_schema`), the view, and whether an alias follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewRef {
    /// Bytes of the statement naming the view.
    pub range: std::ops::Range<usize>,
    /// The view.
    pub view: View,
    /// `AS x` or `x` follows.
    pub aliased: bool,
}

/// Words after a table reference that are not an alias.
const NOT_ALIAS: &[&str] = &[
    "where",
    "join",
    "inner",
    "left",
    "right",
    "cross",
    "natural",
    "straight_join",
    "on",
    "using",
    "group",
    "order",
    "having",
    "limit",
    "union",
    "except",
    "intersect",
    "window",
    "for",
    "lock",
    "into",
    "procedure",
    "use",
    "ignore",
    "force",
    "partition",
    "full",
];

/// The catalog views `lexed` names, in statement order; empty when it names none.
pub fn view_refs(sql: &[u8], lexed: &Lexed, in_information_schema: bool) -> Vec<ViewRef> {
    let tokens: Vec<_> = lexed
        .tokens
        .iter()
        .filter(|t| !t.is_exec_marker())
        .collect();
    let mode = crate::sql::lexer::LexMode::default();
    let name = |i: usize| {
        tokens
            .get(i)
            .filter(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent))
            .map(|t| crate::sql::command::ident_ref(sql, t, mode))
    };
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        let Some(view) = name(i).and_then(|n| {
            VIEWS
                .iter()
                .find(|v| v.name.eq_ignore_ascii_case(&n))
                .copied()
        }) else {
            continue;
        };
        let dotted = i >= 2 && tokens[i - 1].is_punct(sql, ".");
        let start = if dotted {
            if !name(i - 2).is_some_and(|d| d.eq_ignore_ascii_case("information_schema")) {
                continue;
            }
            tokens[i - 2].range.start
        } else {
            // Unqualified, with information_schema the current database: wherever it
            // stands (after FROM, JOIN, STRAIGHT_JOIN, a parenthesis, TABLE, ...), so no
            // form reaches the backend's own view. A name that is no table there makes a
            // statement the server refuses, never one that reads the backend's view.
            if !in_information_schema {
                continue;
            }
            tokens[i].range.start
        };
        if tokens.get(i + 1).is_some_and(|t| t.is_punct(sql, ".")) {
            continue; // a column qualified as `TABLES.col`
        }
        let aliased = tokens.get(i + 1).is_some_and(|t| {
            t.is_word(sql, "as")
                || t.kind == TokenKind::QuotedIdent
                || (t.kind == TokenKind::Word && !NOT_ALIAS.iter().any(|w| t.is_word(sql, w)))
        });
        out.push(ViewRef {
            range: start..tokens[i].range.end,
            view,
            aliased,
        });
    }
    out
}

/// The name of a view's temporary copy.
fn copy_name(database: &str, view: View) -> String {
    format!(
        "{}.{}",
        quote_ident(database),
        quote_ident(&format!("routekey_is_{}", view.name.to_ascii_lowercase()))
    )
}

/// `sql` with each view reference replaced by its copy (aliased as the view when the
/// statement gives no alias, so `TABLES.col` still resolves) and `DATABASE()`/`SCHEMA()`
/// replaced by the session's database.
pub fn rewrite(
    sql: &[u8],
    lexed: &Lexed,
    refs: &[ViewRef],
    copies_in: &str,
    database: Option<&str>,
) -> Vec<u8> {
    let mut edits: Vec<(std::ops::Range<usize>, Vec<u8>)> = refs
        .iter()
        .map(|r| {
            let mut text = copy_name(copies_in, r.view).into_bytes();
            if !r.aliased {
                text.extend_from_slice(format!(" AS {}", quote_ident(r.view.name)).as_bytes());
            }
            (r.range.clone(), text)
        })
        .collect();
    let t = &lexed.tokens;
    for i in 0..t.len().saturating_sub(2) {
        let function = t[i].is_word(sql, "database") || t[i].is_word(sql, "schema");
        if function && t[i + 1].is_punct(sql, "(") && t[i + 2].is_punct(sql, ")") {
            let value = match database {
                Some(db) => quote_string(db.as_bytes()),
                None => b"NULL".to_vec(),
            };
            edits.push((t[i].range.start..t[i + 2].range.end, value));
        }
    }
    crate::sql::lexer::splice(sql, edits)
}

/// How result column definitions name the copies: `information_schema.<VIEW>`.
fn copy_names(copies_in: &str) -> ResultNames {
    ResultNames {
        physical_database: copies_in.to_owned(),
        logical_database: "information_schema".to_owned(),
        tables: VIEWS
            .iter()
            .map(|v| {
                (
                    format!("routekey_is_{}", v.name.to_ascii_lowercase()),
                    v.name.to_owned(),
                )
            })
            .collect(),
    }
}

/// The rows of a view a client may see: those of the databases in its scope (SPEC §8a),
/// never a physical shard table (when a shard database is one of them).
fn visible(view: View, config: &Config, scope: &crate::plan::scope::Scope) -> String {
    let schema = view.schema_columns[0];
    let list = |names: &mut dyn Iterator<Item = &str>| -> String {
        names
            .map(|n| String::from_utf8_lossy(&quote_string(n.as_bytes())).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // BINARY: database names compare exactly, as the scope compares them.
    let mut sql = format!(
        "(BINARY {schema} IN ({}) OR LOWER({schema}) = 'information_schema')",
        list(&mut scope.databases())
    );
    let open: Vec<(&str, &str)> = config
        .sharding
        .shards
        .iter()
        .filter(|s| scope.allows(&s.database))
        .flat_map(|s| {
            s.tables
                .iter()
                .map(move |t| (s.database.as_str(), t.as_str()))
        })
        .collect();
    if let (Some(table), false) = (view.table_columns.first(), open.is_empty()) {
        let pairs: Vec<String> = open
            .iter()
            .map(|(d, t)| {
                format!(
                    "({}, {})",
                    list(&mut [*d].into_iter()),
                    list(&mut [*t].into_iter())
                )
            })
            .collect();
        sql.push_str(&format!(
            " AND ({schema}, {table}) NOT IN ({})",
            pairs.join(", ")
        ));
    }
    sql
}

/// The name of a column definition.
fn column_name(def: &[u8]) -> Option<String> {
    let mut pos = 0;
    for _ in 0..4 {
        read_lenenc_bytes(def, &mut pos)?;
    }
    read_lenenc_bytes(def, &mut pos).map(|n| String::from_utf8_lossy(n).to_ascii_uppercase())
}

/// Rows and sizes of one logical table, summed over its shards.
#[derive(Debug, Default, Clone)]
struct Sizes {
    rows: u64,
    data: u64,
    index: u64,
    free: u64,
    updated: Option<Vec<u8>>,
}

type Row = Vec<Option<Vec<u8>>>;

/// The first shard's row of `view` made the logical table's: database and table names
/// replaced, and for `TABLES` the sizes summed over every shard.
fn logicalize(
    row: &mut Row,
    names: &[String],
    view: View,
    config: &Config,
    first: usize,
    sizes: &[Sizes],
) {
    let shard = &config.sharding.shards[first];
    let logical = &config.sharding.logical_database;
    let col = |n: &str| names.iter().position(|c| c == n);
    for c in view.schema_columns.iter().filter_map(|c| col(c)) {
        if row[c]
            .as_deref()
            .is_some_and(|v| v.eq_ignore_ascii_case(shard.database.as_bytes()))
        {
            row[c] = Some(logical.clone().into_bytes());
        }
    }
    let mut table_id = None;
    for c in view.table_columns.iter().filter_map(|c| col(c)) {
        if let Some(t) = shard
            .tables
            .iter()
            .position(|t| row[c].as_deref() == Some(t.as_bytes()))
        {
            row[c] = Some(config.sharding.binding_tables[t].clone().into_bytes());
            table_id.get_or_insert(t);
        }
    }
    let (Some(t), "TABLES") = (table_id, view.name) else {
        return;
    };
    let s = &sizes[t];
    let mut set = |name: &str, value: Option<String>| {
        if let Some(c) = col(name) {
            row[c] = value.map(String::into_bytes);
        }
    };
    set("TABLE_ROWS", Some(s.rows.to_string()));
    set("DATA_LENGTH", Some(s.data.to_string()));
    set("INDEX_LENGTH", Some(s.index.to_string()));
    set("DATA_FREE", Some(s.free.to_string()));
    set(
        "AVG_ROW_LENGTH",
        Some(s.data.checked_div(s.rows).unwrap_or(0).to_string()),
    );
    // Each shard has its own counter; the logical table has none.
    set("AUTO_INCREMENT", None);
    set("CHECKSUM", None);
    if let Some(c) = col("UPDATE_TIME") {
        row[c] = s.updated.clone();
    }
}

/// `SHOW TABLE STATUS` columns over `information_schema.TABLES` (MariaDB 10.11's 20).
const STATUS_COLUMNS: [(&str, &str); 20] = [
    ("TABLE_NAME", "Name"),
    ("ENGINE", "Engine"),
    ("VERSION", "Version"),
    ("ROW_FORMAT", "Row_format"),
    ("TABLE_ROWS", "Rows"),
    ("AVG_ROW_LENGTH", "Avg_row_length"),
    ("DATA_LENGTH", "Data_length"),
    ("MAX_DATA_LENGTH", "Max_data_length"),
    ("INDEX_LENGTH", "Index_length"),
    ("DATA_FREE", "Data_free"),
    ("AUTO_INCREMENT", "Auto_increment"),
    ("CREATE_TIME", "Create_time"),
    ("UPDATE_TIME", "Update_time"),
    ("CHECK_TIME", "Check_time"),
    ("TABLE_COLLATION", "Collation"),
    ("CHECKSUM", "Checksum"),
    ("CREATE_OPTIONS", "Create_options"),
    ("TABLE_COMMENT", "Comment"),
    ("MAX_INDEX_LENGTH", "Max_index_length"),
    ("TEMPORARY", "Temporary"),
];

/// The query answering `SHOW TABLE STATUS` of the logical database from the copy of
/// `TABLES`; `filter` is the statement's `LIKE 'p'` or `WHERE ...` clause as written.
pub fn table_status_query(copies_in: &str, logical: &str, filter: Option<&[u8]>) -> Vec<u8> {
    let columns: Vec<String> = STATUS_COLUMNS
        .iter()
        .map(|(from, to)| format!("{from} AS {}", quote_ident(to)))
        .collect();
    let mut sql = format!(
        "SELECT * FROM (SELECT {} FROM {} AS `TABLES` WHERE TABLE_SCHEMA = ",
        columns.join(", "),
        copy_name(copies_in, VIEWS[0]),
    )
    .into_bytes();
    sql.extend_from_slice(&quote_string(logical.as_bytes()));
    sql.extend_from_slice(b") AS `status`");
    if let Some(filter) = filter {
        if filter.len() >= 4 && filter[..4].eq_ignore_ascii_case(b"like") {
            sql.extend_from_slice(b" WHERE `Name` ");
        } else {
            sql.push(b' ');
        }
        sql.extend_from_slice(filter);
    }
    // No LIMIT: MariaDB cuts SHOW TABLE STATUS to sql_select_limit too.
    sql.extend_from_slice(b" ORDER BY `Name`");
    sql
}

impl Session {
    /// A statement naming catalog views, answered against copies holding the logical
    /// tables (see the module's documentation).
    pub(super) async fn catalog_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        refs: &[ViewRef],
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let (_, copies_in) = self.copies_home();
        let rewritten = rewrite(sql, lexed, refs, &copies_in, self.state.database.as_deref());
        let mut views: Vec<View> = refs.iter().map(|r| r.view).collect();
        views.dedup();
        self.run_on_copies(client, &views, None, rewritten, more)
            .await
    }

    /// `SHOW TABLE STATUS`: of the logical database from the copy of `TABLES`; of any
    /// other database as the default datasource answers it.
    pub(super) async fn show_table_status(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        database: Option<&str>,
        filter: Option<usize>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let Some(db) = database
            .or(self.state.database.as_deref())
            .map(str::to_owned)
        else {
            return Err(ProxyError::client(
                crate::error::ER_NO_DB_ERROR,
                b"3D000",
                "No database selected",
            ));
        };
        self.checks.database(&db)?;
        let logical = self.rt.config.sharding.logical_database.clone();
        let (ds, copies_in) = self.copies_home();
        if !db.eq_ignore_ascii_case(&logical) {
            return self.run_one(client, ds, sql.to_vec(), None, more).await;
        }
        let query = table_status_query(&copies_in, &logical, filter.map(|at| &sql[at..]));
        self.run_on_copies(client, &[VIEWS[0]], Some(&copies_in), query, more)
            .await
    }

    /// Where the copies live: the default datasource, in its database.
    fn copies_home(&self) -> (DatasourceId, String) {
        let config = &self.rt.config;
        let ds = config.sharding.default_datasource;
        let database = config
            .datasource(ds)
            .database
            .clone()
            .unwrap_or_else(|| config.sharding.logical_database.clone());
        (ds, database)
    }

    /// Fills the copies of `views`, runs `query` on them and relays its answer, then drops
    /// them, whatever happened, before the connection is released.
    async fn run_on_copies(
        &mut self,
        client: &mut Client,
        views: &[View],
        only_schema: Option<&str>,
        query: Vec<u8>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let (ds, copies_in) = self.copies_home();
        let plan = Plan::single(ds, query, Some(std::sync::Arc::new(copy_names(&copies_in))));
        self.state.warnings.clear();
        let mut made = Vec::new();
        let mut ran = Ok(());
        for view in views {
            ran = self
                .fill_copy(*view, &copies_in, only_schema, &mut made)
                .await;
            if ran.is_err() {
                break;
            }
        }
        let ran = match ran {
            Ok(()) => {
                self.run_plan(client, &plan, None, Extras::default(), more)
                    .await
            }
            Err(e) => Err(e),
        };
        if let Ok(conn) = self.connection(Target::primary(ds)).await {
            for copy in made {
                let drop = format!("DROP TEMPORARY TABLE IF EXISTS {copy}");
                if let Err(e) = conn.execute(drop.as_bytes()).await {
                    tracing::warn!(error = %e, "could not drop a catalog copy; the connection is discarded");
                    conn.mark_broken();
                    break;
                }
            }
        }
        self.conclude(client, &plan, ran, more).await
    }

    /// Creates and fills the copy of one view on the default datasource's connection.
    async fn fill_copy(
        &mut self,
        view: View,
        copies_in: &str,
        only_schema: Option<&str>,
        made: &mut Vec<String>,
    ) -> Result<(), ProxyError> {
        let config = self.rt.config.clone();
        let logical = &config.sharding.logical_database;
        let copy = copy_name(copies_in, view);
        if view == PROCESSLIST {
            return self.fill_processlist(copy, made).await;
        }
        let logical_rows = self.logical_rows(view).await?;
        let mut filter = visible(view, &config, &self.checks.scope());
        if let Some(schema) = only_schema {
            let literal = quote_string(schema.as_bytes());
            filter.push_str(&format!(
                " AND {} = {}",
                view.schema_columns[0],
                String::from_utf8_lossy(&literal)
            ));
        }
        let mut statements = vec![
            format!("DROP TEMPORARY TABLE IF EXISTS {copy}").into_bytes(),
            format!(
                "CREATE TEMPORARY TABLE {copy} AS SELECT * FROM information_schema.{} WHERE 0",
                view.name
            )
            .into_bytes(),
            format!(
                "INSERT INTO {copy} SELECT * FROM information_schema.{} WHERE {filter}",
                view.name
            )
            .into_bytes(),
        ];
        if !copies_in.eq_ignore_ascii_case(logical) {
            // The default datasource's database stands for the logical one.
            for c in view.schema_columns {
                statements.push(
                    format!(
                        "UPDATE {copy} SET {c} = {} WHERE {c} = {}",
                        String::from_utf8_lossy(&quote_string(logical.as_bytes())),
                        String::from_utf8_lossy(&quote_string(copies_in.as_bytes()))
                    )
                    .into_bytes(),
                );
            }
        }
        if !logical_rows.is_empty() {
            let mut insert = format!("INSERT INTO {copy} VALUES ").into_bytes();
            for (i, row) in logical_rows.iter().enumerate() {
                insert.extend_from_slice(if i == 0 { b"(" } else { b", (" });
                for (j, v) in row.iter().enumerate() {
                    if j > 0 {
                        insert.extend_from_slice(b", ");
                    }
                    match v {
                        Some(v) => insert.extend_from_slice(&quote_string(v)),
                        None => insert.extend_from_slice(b"NULL"),
                    }
                }
                insert.push(b')');
            }
            statements.push(insert);
        }
        let ds = config.sharding.default_datasource;
        let conn = self.connection(Target::primary(ds)).await?;
        for (i, sql) in statements.iter().enumerate() {
            conn.execute(sql).await?;
            if i == 1 {
                made.push(copy.clone());
            }
        }
        Ok(())
    }

    /// The copy of `information_schema.PROCESSLIST`: the backend's columns, the proxy's
    /// sessions the user may see as rows (columns the proxy does not know keep their
    /// implicit defaults).
    async fn fill_processlist(
        &mut self,
        copy: String,
        made: &mut Vec<String>,
    ) -> Result<(), ProxyError> {
        let quote = |v: &str| String::from_utf8_lossy(&quote_string(v.as_bytes())).into_owned();
        let rows: Vec<String> = self
            .process_rows()
            .into_iter()
            .map(|r| {
                format!(
                    "({}, {}, {}, {}, {}, {}, '', {}, {})",
                    r.id,
                    quote(&r.user),
                    quote(&r.host),
                    r.db.as_deref().map_or("NULL".to_owned(), quote),
                    quote(r.command),
                    r.time,
                    r.info.as_deref().map_or("NULL".to_owned(), quote),
                    r.time_ms,
                )
            })
            .collect();
        let statements = [
            format!("DROP TEMPORARY TABLE IF EXISTS {copy}"),
            format!(
                "CREATE TEMPORARY TABLE {copy} AS SELECT * FROM information_schema.PROCESSLIST WHERE 0"
            ),
            format!(
                "SET STATEMENT sql_mode = '' FOR INSERT INTO {copy} (ID, USER, HOST, DB, COMMAND, TIME, STATE, INFO, TIME_MS) VALUES {}",
                rows.join(", ")
            ),
        ];
        let ds = self.rt.config.sharding.default_datasource;
        let conn = self.connection(Target::primary(ds)).await?;
        for (i, sql) in statements.iter().enumerate() {
            if i == 2 && rows.is_empty() {
                break;
            }
            conn.execute(sql.as_bytes()).await?;
            if i == 1 {
                made.push(copy.clone());
            }
        }
        Ok(())
    }

    /// `SHOW DATABASES | SCHEMAS [LIKE 'pattern' | WHERE ...]`: from the copy of
    /// `SCHEMATA`, which holds exactly the databases the user may use.
    pub(super) async fn show_databases(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        filter: Option<usize>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let (_, copies_in) = self.copies_home();
        let copy = copy_name(&copies_in, VIEWS[4]);
        let clause = filter.map(|at| &sql[at..]).unwrap_or_default();
        let like = clause.len() >= 4 && clause[..4].eq_ignore_ascii_case(b"like");
        let (label, condition) = if like {
            let pattern = &clause[4..];
            let lexed = crate::sql::lexer::lex(pattern, self.state.lex_mode);
            let text = lexed
                .tokens
                .first()
                .map(|t| crate::sql::lexer::ident_text(pattern, t, self.state.lex_mode))
                .unwrap_or_default();
            let label = format!("Database ({text})");
            let condition = format!(
                "WHERE {} LIKE {}",
                quote_ident(&label),
                String::from_utf8_lossy(pattern)
            );
            (label, condition)
        } else {
            let label = "Database".to_owned();
            (label, String::from_utf8_lossy(clause).into_owned())
        };
        let query = format!(
            "SELECT * FROM (SELECT SCHEMA_NAME AS {} FROM {copy}) AS d {condition} ORDER BY 1",
            quote_ident(&label),
        );
        self.run_on_copies(client, &[VIEWS[4]], None, query.into_bytes(), more)
            .await
    }

    /// The logical tables' rows of `view`, from the first shard (sizes of `TABLES` summed
    /// over every shard).
    async fn logical_rows(&mut self, view: View) -> Result<Vec<Row>, ProxyError> {
        if view.table_columns.is_empty() || view.name == "TRIGGERS" {
            // Databases: the default datasource's stands for the logical one. Triggers of
            // the shard tables are not the logical tables'.
            return Ok(Vec::new());
        }
        let config = self.rt.config.clone();
        let first = self.rt.router.first_shard() as usize;
        let shard = &config.sharding.shards[first];
        let tables: Vec<String> = shard
            .tables
            .iter()
            .map(|t| String::from_utf8_lossy(&quote_string(t.as_bytes())).into_owned())
            .collect();
        let sql = format!(
            "SELECT * FROM information_schema.{} WHERE TABLE_SCHEMA = {} AND TABLE_NAME IN ({}) LIMIT 18446744073709551615",
            view.name,
            String::from_utf8_lossy(&quote_string(shard.database.as_bytes())),
            tables.join(", ")
        );
        let (defs, raw) = self
            .connection(Target::read(shard.datasource))
            .await?
            .query_raw(sql.as_bytes())
            .await?;
        let names: Vec<String> = defs
            .iter()
            .map(|d| column_name(d).unwrap_or_default())
            .collect();
        let sizes = if view.name == "TABLES" {
            self.sizes().await?
        } else {
            Vec::new()
        };
        let mut rows = Vec::new();
        for r in &raw {
            let mut row = parse_text_row(r, defs.len()).ok_or_else(|| {
                ProxyError::Internal("a catalog row from the backend could not be read".into())
            })?;
            logicalize(&mut row, &names, view, &config, first, &sizes);
            rows.push(row);
        }
        Ok(rows)
    }

    /// Rows and sizes of each logical table, summed over its shards, by [`TableId`] index.
    async fn sizes(&mut self) -> Result<Vec<Sizes>, ProxyError> {
        let config = self.rt.config.clone();
        let mut sizes = vec![Sizes::default(); config.sharding.binding_tables.len()];
        let mut datasources: Vec<DatasourceId> = config
            .sharding
            .shards
            .iter()
            .map(|s| s.datasource)
            .collect();
        datasources.sort();
        datasources.dedup();
        for ds in datasources {
            let pairs: Vec<String> = config
                .sharding
                .shards
                .iter()
                .filter(|s| s.datasource == ds)
                .flat_map(|s| {
                    s.tables
                        .iter()
                        .map(move |t| (s.database.as_str(), t.as_str()))
                })
                .map(|(d, t)| {
                    format!(
                        "({}, {})",
                        String::from_utf8_lossy(&quote_string(d.as_bytes())),
                        String::from_utf8_lossy(&quote_string(t.as_bytes()))
                    )
                })
                .collect();
            let sql = format!(
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH, DATA_FREE, UPDATE_TIME FROM information_schema.TABLES WHERE (TABLE_SCHEMA, TABLE_NAME) IN ({}) LIMIT 18446744073709551615",
                pairs.join(", ")
            );
            let (_, raw) = self
                .connection(Target::read(ds))
                .await?
                .query_raw(sql.as_bytes())
                .await?;
            for r in &raw {
                let Some(v) = parse_text_row(r, 7) else {
                    continue;
                };
                let num = |i: usize| -> u64 {
                    v[i].as_deref()
                        .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
                        .unwrap_or(0)
                };
                let table = config.sharding.shards.iter().find_map(|s| {
                    let same_db = v[0]
                        .as_deref()
                        .is_some_and(|d| d.eq_ignore_ascii_case(s.database.as_bytes()));
                    same_db.then(|| {
                        s.tables
                            .iter()
                            .position(|t| v[1].as_deref() == Some(t.as_bytes()))
                    })?
                });
                let Some(t) = table else { continue };
                let s = &mut sizes[t];
                s.rows += num(2);
                s.data += num(3);
                s.index += num(4);
                s.free += num(5);
                if v[6] > s.updated {
                    s.updated = v[6].clone();
                }
            }
        }
        Ok(sizes)
    }
}

/// The refusal of a statement naming the information_schema views the proxy answers
/// itself, where it cannot answer them: `where_` says in what statements.
pub(super) fn views_refused(where_: &str) -> ProxyError {
    ProxyError::not_yet(format!(
        "information_schema views the proxy answers (TABLES, COLUMNS, SCHEMATA, PROCESSLIST, ...) {where_}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::{LexMode, lex};

    fn refs(sql: &str, in_is: bool) -> Vec<(String, &'static str, bool)> {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        view_refs(sql.as_bytes(), &lexed, in_is)
            .into_iter()
            .map(|r| (sql[r.range].to_owned(), r.view.name, r.aliased))
            .collect()
    }

    #[test]
    fn views_are_found_qualified_or_in_information_schema() {
        assert_eq!(
            refs(
                "SELECT engine, table_type FROM INFORMATION_SCHEMA.TABLES WHERE table_schema = DATABASE()",
                false
            ),
            vec![("INFORMATION_SCHEMA.TABLES".to_owned(), "TABLES", false)]
        );
        assert_eq!(
            refs(
                "select * from `information_schema`.`columns` c join information_schema.statistics s on 1",
                false
            ),
            vec![
                ("`information_schema`.`columns`".to_owned(), "COLUMNS", true),
                (
                    "information_schema.statistics".to_owned(),
                    "STATISTICS",
                    true
                ),
            ]
        );
        assert!(refs("SELECT tables FROM t", false).is_empty());
        assert!(refs("SELECT * FROM tables", false).is_empty());
        assert_eq!(refs("SELECT * FROM tables", true).len(), 1);
        assert!(refs("SELECT * FROM information_schema.ROUTINES", false).is_empty());
        assert_eq!(
            refs("SELECT * FROM information_schema.PARTITIONS", false).len(),
            1
        );
        assert!(refs("SELECT TABLES.TABLE_NAME FROM x", true).is_empty());
    }

    #[test]
    fn the_rewrite_names_the_copies_and_the_session_database() {
        let sql = "SELECT table_name FROM INFORMATION_SCHEMA.TABLES WHERE table_schema = DATABASE() AND TABLES.table_name = 't'";
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let r = view_refs(sql.as_bytes(), &lexed, false);
        let out = String::from_utf8(rewrite(
            sql.as_bytes(),
            &lexed,
            &r,
            "orders",
            Some("orders"),
        ))
        .unwrap();
        assert_eq!(
            out,
            "SELECT table_name FROM `orders`.`routekey_is_tables` AS `TABLES` WHERE table_schema = 'orders' AND TABLES.table_name = 't'"
        );
    }

    #[test]
    fn table_status_filters_by_like_or_where() {
        let q = String::from_utf8(table_status_query(
            "orders",
            "orders",
            Some(b"LIKE 't\\_order'"),
        ))
        .unwrap();
        assert!(q.contains("TABLE_ROWS AS `Rows`"), "{q}");
        assert!(
            q.ends_with(") AS `status` WHERE `Name` LIKE 't\\_order' ORDER BY `Name`"),
            "{q}"
        );
        let q = String::from_utf8(table_status_query(
            "orders",
            "orders",
            Some(b"WHERE Engine IS NOT NULL"),
        ))
        .unwrap();
        assert!(
            q.ends_with("AS `status` WHERE Engine IS NOT NULL ORDER BY `Name`"),
            "{q}"
        );
    }

    #[test]
    fn shard_rows_become_the_logical_table_with_summed_sizes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml");
        let config = Config::load(std::path::Path::new(path)).unwrap();
        let names: Vec<String> = [
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_ROWS",
            "AVG_ROW_LENGTH",
            "DATA_LENGTH",
            "AUTO_INCREMENT",
            "UPDATE_TIME",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let v = |s: &str| Some(s.as_bytes().to_vec());
        let mut row = vec![
            v("order_shards"),
            v("t_order_0"),
            v("66"),
            v("248"),
            v("16384"),
            v("67"),
            None,
        ];
        let sizes = vec![
            Sizes {
                rows: 1500,
                data: 300_000,
                index: 10,
                free: 0,
                updated: v("2026-12-01 11:08:07"),
            },
            Sizes::default(),
        ];
        logicalize(&mut row, &names, VIEWS[0], &config, 0, &sizes);
        assert_eq!(
            row,
            vec![
                v("orders"),
                v("t_order"),
                v("1500"),
                v("200"),
                v("300000"),
                None,
                v("2026-12-01 11:08:07")
            ]
        );
    }
}
