'use strict';
// node mysql2 through routekey-proxy, compared with mysql2 talking straight to the shard's
// MariaDB server running the equivalent physical statement (run by ./run.sh).
//
// Environment: ROUTEKEY_PROXY_PORT, ROUTEKEY_DS0_PORT, ROUTEKEY_DS1_PORT, ROUTEKEY_SANDBOX_DIR,
// MYSQL2_DIR (the installed mysql2 package folder).
//
// Every check prints PASS or FAIL; the run ends with "node: N passed, N failed" and exits 1
// when anything failed. Compared for each statement: the rows (values and JS types) and the
// column definitions (`fields`: name, type, flags, decimals, length, charset, encoding, and
// db/table/orgTable, which must be the logical names), or for writes the result header
// (affectedRows, insertId, changedRows, info, warnings). Writes are checked on the physical
// tables. Rows created here use fresh ids and are deleted at the end with their index rows.

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const mysql = require(path.join(process.env.MYSQL2_DIR, 'promise'));
const mysql2Version = require(path.join(process.env.MYSQL2_DIR, 'package.json')).version;

const HOST = '127.0.0.1';
const PROXY_PORT = Number(process.env.ROUTEKEY_PROXY_PORT);
const DS_PORTS = {
  ds0: Number(process.env.ROUTEKEY_DS0_PORT || 33061),
  ds1: Number(process.env.ROUTEKEY_DS1_PORT || 33062),
};
const SUMMARY_TEXT = fs.readFileSync(path.join(process.env.ROUTEKEY_SANDBOX_DIR, 'seed-summary.json'), 'utf8');
const SUMMARY = JSON.parse(SUMMARY_TEXT); // ids in it are JSON numbers: exact ones come from the text
function idsInText(key) {
  const out = new Set();
  for (const m of SUMMARY_TEXT.matchAll(new RegExp(`"${key}":\\s*\\[([^\\]]*)\\]`, 'g'))) {
    for (const x of m[1].split(',')) if (x.trim()) out.add(x.trim());
  }
  return out;
}
const LEGACY_IDS = idsInText('legacy_ids');
const SEEDED = new Set([...idsInText('new_format_ids'), ...LEGACY_IDS]);
const CHANNELS = SUMMARY.channels;
const EPOCH_MS = 1288834974657n;
const COLS = 'order_id, channel, region, user_id, amount, status, note, created_at';
const INSERT_SQL = `INSERT INTO t_order (${COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

// Option sets: 64-bit ids must survive (supportBigNumbers + bigNumberStrings), numbers where
// safe (supportBigNumbers alone), and mysql2's defaults (lossy BIGINT, compared all the same).
const OPTION_SETS = {
  bigNumberStrings: { supportBigNumbers: true, bigNumberStrings: true, dateStrings: true },
  supportBigNumbers: { supportBigNumbers: true },
  defaults: {},
};
const SAFE = OPTION_SETS.bigNumberStrings;

// ------------------------------------------------------------------------------------------
// Reporting
// ------------------------------------------------------------------------------------------
let passed = 0;
let failed = 0;
let skipped = 0;
const failures = [];

function show(v, n = 1500) {
  let s;
  try {
    s = JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x));
  } catch (e) {
    s = String(v);
  }
  if (s === undefined) s = String(v);
  return s.length <= n ? s : `${s.slice(0, n)}...(${s.length} chars)`;
}

function check(name, ok, detail) {
  if (ok) {
    passed += 1;
    console.log(`PASS ${name}`);
  } else {
    failed += 1;
    failures.push(name);
    console.log(`FAIL ${name}`);
    if (detail) {
      for (const line of String(detail).split('\n')) console.log(`     ${line}`);
    }
  }
  return ok;
}

// Where two JSON-like values differ: "path: proxy-value != expected-value" lines.
function diffPaths(a, b, at = '', out = []) {
  if (out.length >= 12) return out;
  const isObj = (x) => x !== null && typeof x === 'object';
  if (isObj(a) && isObj(b) && Array.isArray(a) === Array.isArray(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) diffPaths(a[k], b[k], `${at}${Array.isArray(a) ? `[${k}]` : `.${k}`}`, out);
    return out;
  }
  if (show(a, 1e9) !== show(b, 1e9)) out.push(`${at || '(value)'}: proxy ${show(a, 300)} != expected ${show(b, 300)}`);
  return out;
}

function checkEq(name, got, expected, ctx = '') {
  const a = show(got, 1e9);
  const b = show(expected, 1e9);
  if (a === b) return check(name, true);
  return check(name, false, `${ctx}\n  differences:\n    ${diffPaths(got, expected).join('\n    ')}`
    + `\n  proxy   : ${show(got, 600)}\n  expected: ${show(expected, 600)}`);
}

function skip(name, why) {
  skipped += 1;
  console.log(`SKIP ${name} (${why})`);
}

async function group(name, fn) {
  try {
    await fn();
  } catch (e) {
    check(`${name} (raised)`, false, e && e.stack ? e.stack : String(e));
  }
  if (charsetCompared) {
    check(`${name}: column characterSet (collation id) equals direct MariaDB's in all ${charsetCompared} compared results`,
      charsetDiffs.length === 0,
      `${charsetDiffs.length} of ${charsetCompared} differ, e.g.\n  ${charsetDiffs.slice(0, 3).join('\n  ')}`);
  }
  charsetCompared = 0;
  charsetDiffs.length = 0;
}

// ------------------------------------------------------------------------------------------
// Topology and ids
// ------------------------------------------------------------------------------------------
function shardOf(id, channel) {
  return CHANNELS[channel].base_shard + Number(BigInt(id) % 4n);
}

function dsOfShard(shard) {
  for (const [name, ds] of Object.entries(SUMMARY.datasources)) {
    if (ds.shards.includes(shard)) return name;
  }
  throw new Error(`no datasource for shard ${shard}`);
}

const issued = new Set();
const created = new Set();

function randInt(n) {
  return crypto.randomInt(n);
}

function freshNewId(channel, offset) {
  const code = BigInt(CHANNELS[channel].code);
  for (;;) {
    const ts = BigInt(Date.now()) - EPOCH_MS;
    const id = (ts << 23n) | (BigInt(randInt(32)) << 18n) | (code << 14n) | BigInt(randInt(16384));
    if (offset !== undefined && id % 4n !== BigInt(offset)) continue;
    const s = id.toString();
    if (issued.has(s)) continue;
    issued.add(s);
    created.add(s);
    return s;
  }
}

function freshLegacyId(offset) {
  const t2020 = 1577836800000n;
  for (;;) {
    const ts = t2020 + BigInt(randInt(180 * 86400)) * 1000n + BigInt(randInt(1000));
    const id = ((ts - EPOCH_MS) << 22n) | (BigInt(randInt(1024)) << 12n) | BigInt(randInt(4096));
    const bits = Number((id >> 14n) & 15n);
    if (bits <= 5) continue;
    if (offset !== undefined && id % 4n !== BigInt(offset)) continue;
    const s = id.toString();
    if (issued.has(s) || SEEDED.has(s)) continue;
    issued.add(s);
    created.add(s);
    return s;
  }
}

// An id below 2^53 (a JS number holds it exactly): no route key, so it lives by its index row.
function freshSafeNumberId(offset) {
  for (;;) {
    const id = 1e15 + randInt(2 ** 40) * 4 + offset;
    if (!Number.isSafeInteger(id)) continue;
    const s = String(id);
    if (issued.has(s) || SEEDED.has(s)) continue;
    issued.add(s);
    created.add(s);
    return id;
  }
}

// ------------------------------------------------------------------------------------------
// Connections
// ------------------------------------------------------------------------------------------
const opened = [];

async function proxy(opts = SAFE, extra = {}) {
  const c = await mysql.createConnection({
    host: HOST, port: PROXY_PORT, user: 'app', password: 'app', database: 'orders', connectTimeout: 10000,
    ...opts, ...extra,
  });
  opened.push(c);
  return c;
}

async function direct(ds, opts = SAFE, extra = {}) {
  const c = await mysql.createConnection({
    host: HOST, port: DS_PORTS[ds], user: 'root', password: '', database: 'orders', connectTimeout: 10000,
    ...opts, ...extra,
  });
  opened.push(c);
  return c;
}

const admins = {};
async function admin(ds) {
  if (!admins[ds]) admins[ds] = await direct(ds, { ...SAFE, multipleStatements: false });
  return admins[ds];
}

async function adminQuery(ds, sql, args) {
  const [rows] = await (await admin(ds)).query(sql, args);
  return rows;
}

async function shardsHolding(id, table = 't_order') {
  const found = [];
  for (const [ds, info] of Object.entries(SUMMARY.datasources)) {
    const sql = info.shards
      .map((s) => `SELECT ${s} AS s FROM order_shards.${table}_${s} WHERE order_id = ${BigInt(id)}`)
      .join(' UNION ALL ');
    for (const r of await adminQuery(ds, sql)) found.push(Number(r.s));
  }
  return found.sort((a, b) => a - b);
}

async function physicalRow(id, shard) {
  const rows = await adminQuery(
    dsOfShard(shard),
    `SELECT ${COLS}, HEX(note) AS note_hex FROM order_shards.t_order_${shard} WHERE order_id = ?`,
    [String(id)],
  );
  return rows[0] || null;
}

async function indexChannel(id) {
  const rows = await adminQuery('ds0', 'SELECT channel FROM order_meta.t_order_index WHERE order_id = ?', [String(id)]);
  return rows.length ? rows[0].channel : null;
}

async function purge(id) {
  for (const [ds, info] of Object.entries(SUMMARY.datasources)) {
    for (const s of info.shards) {
      await adminQuery(ds, `DELETE FROM order_shards.t_order_${s} WHERE order_id = ${BigInt(id)}`);
      await adminQuery(ds, `DELETE FROM order_shards.t_order_item_${s} WHERE order_id = ${BigInt(id)}`);
    }
  }
  await adminQuery('ds0', `DELETE FROM order_meta.t_order_index WHERE order_id = ${BigInt(id)}`);
}

const TABLE_RE = /(?<![\w$.`])(?:orders\.)?\b(t_order_item|t_order)\b(?![\w$])/gi;
function physicalSql(sql, shard) {
  return sql.replace(TABLE_RE, (m, t) => `order_shards.${t.toLowerCase()}_${shard}`);
}

// ------------------------------------------------------------------------------------------
// What an application observes
// ------------------------------------------------------------------------------------------
function typedValue(v) {
  if (v === null) return ['null', null];
  if (Buffer.isBuffer(v)) return ['Buffer', v.toString('hex')];
  if (v instanceof Date) return ['Date', Number.isNaN(v.getTime()) ? 'Invalid' : v.toISOString()];
  if (typeof v === 'bigint') return ['bigint', v.toString()];
  if (typeof v === 'number') return ['number', Object.is(v, -0) ? '-0' : String(v)];
  if (typeof v === 'object') return ['object', JSON.stringify(v)];
  return [typeof v, v];
}

function typedRows(rows) {
  return rows.map((r) => (Array.isArray(r) ? r.map(typedValue) : Object.entries(r).map(([k, v]) => [k, ...typedValue(v)])));
}

const FIELD_KEYS = ['catalog', 'schema', 'table', 'orgTable', 'name', 'orgName', 'characterSet', 'encoding',
  'columnLength', 'columnType', 'type', 'flags', 'decimals'];

function fieldInfo(fields) {
  if (!fields) return null;
  return fields.map((f) => Object.fromEntries(FIELD_KEYS.map((k) => [k, f[k]])));
}

// The direct run's column definitions with physical names turned logical: what the proxy must send.
function logicalFields(fields) {
  if (!fields) return null;
  return fields.map((f) => {
    const g = { ...f };
    if (g.schema === 'order_shards' || g.schema === 'orders_ref') g.schema = 'orders'; // orders_ref: the unsharded reference
    for (const k of ['table', 'orgTable']) {
      const m = /^(t_order_item|t_order)_\d+$/.exec(g[k] || '');
      if (m) g[k] = m[1];
    }
    return g;
  });
}

function header(res) {
  return {
    affectedRows: res.affectedRows,
    insertId: typeof res.insertId === 'bigint' ? res.insertId.toString() : res.insertId,
    changedRows: res.changedRows,
    info: res.info,
    warningStatus: res.warningStatus,
    txBits: res.serverStatus & 0x3, // SERVER_STATUS_IN_TRANS | SERVER_STATUS_AUTOCOMMIT
  };
}

async function outcome(conn, method, sql, args) {
  try {
    const [res, fields] = await conn[method](sql, args);
    if (Array.isArray(res)) return { rows: typedRows(res), fields: fieldInfo(fields) };
    return { header: header(res) };
  } catch (e) {
    return { error: [e.errno, e.code, e.message] };
  }
}

// Column character sets are compared apart from the rest (one root cause would otherwise
// fail every comparison): each group ends with one check over all the results it compared.
let charsetCompared = 0;
const charsetDiffs = [];

function charsets(o) {
  return o && o.fields ? o.fields.map((f) => `${f.name}:${f.characterSet}`) : null;
}

function withoutCharset(o) {
  if (!o || !o.fields) return o;
  return { ...o, fields: o.fields.map(({ characterSet, ...rest }) => rest) };
}

function noteCharsets(name, p, d) {
  if (!d || !d.fields) return;
  charsetCompared += 1;
  const a = charsets(p);
  const b = charsets(d);
  if (show(a) !== show(b)) charsetDiffs.push(`${name}:\n    proxy    ${show(a)}\n    expected ${show(b)}`);
}

// Compares outcomes: everything but the character sets here, those in the group's check.
function sameOutcome(name, p, d, ctx) {
  noteCharsets(name, p, d);
  return checkEq(name, withoutCharset(p), withoutCharset(d), ctx);
}

async function compare(name, pconn, dconn, method, sql, shard, args, directSql) {
  const dsql = directSql || physicalSql(sql, shard);
  const d = await outcome(dconn, method, dsql, args);
  const p = await outcome(pconn, method, sql, args);
  const ctx = `${method}: ${sql}\ndirect (shard ${shard}, ${dsOfShard(shard)}): ${dsql}\nargs: ${show(args)}`;
  if (d.error) return check(name, false, `direct run failed (test bug): ${show(d.error)}\n${ctx}`);
  if (d.fields) d.fields = logicalFields(d.fields);
  return sameOutcome(name, p, d, ctx);
}

// ------------------------------------------------------------------------------------------
// Seeded orders worth reading
// ------------------------------------------------------------------------------------------
const REF = new Map();
const P = {};

function hasEmoji(s) {
  return s != null && [...s].some((ch) => ch.codePointAt(0) > 0xffff);
}
function hasCjk(s) {
  return s != null && [...s].some((ch) => {
    const c = ch.codePointAt(0);
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xac00 && c <= 0xd7af);
  });
}

async function loadReference() {
  const text = SUMMARY_TEXT;
  const rows = await adminQuery('ds0', `SELECT ${COLS} FROM orders_ref.t_order ORDER BY order_id`);
  for (const r of rows) {
    const o = { ...r, id: r.order_id };
    o.shard = shardOf(o.id, o.channel);
    o.ds = dsOfShard(o.shard);
    o.legacy = LEGACY_IDS.has(o.id);
    REF.set(o.id, o);
  }
  const lookalikes = [...text.matchAll(/"order_id":\s*(\d+),\s*"channel":\s*"(\w+)",\s*"code_bits":\s*\d+,\s*"looks_like_channel":\s*"(\w+)"/g)];
  const pick = (pred, legacyFlag, ds) => {
    for (const o of REF.values()) {
      if (legacyFlag !== undefined && o.legacy !== legacyFlag) continue;
      if (ds !== undefined && o.ds !== ds) continue;
      if (pred(o)) return o;
    }
    throw new Error('no seeded order matches');
  };
  P.new_ds0 = pick((o) => !o.created_at.endsWith('.000'), false, 'ds0');
  P.new_ds1 = pick((o) => !o.created_at.endsWith('.000'), false, 'ds1');
  P.legacy_ds0 = pick(() => true, true, 'ds0');
  P.legacy_ds1 = pick((o) => o.note, true, 'ds1');
  P.emoji = pick((o) => hasEmoji(o.note), false);
  P.emoji_legacy = pick((o) => hasEmoji(o.note), true);
  P.cjk = pick((o) => hasCjk(o.note));
  P.quotes = pick((o) => o.note != null && o.note.includes("'") && o.note.includes('\\'));
  P.null_note = pick((o) => o.note === null);
  P.empty_note = pick((o) => o.note === '');
  for (const m of lookalikes) {
    const o = REF.get(m[1]);
    if (o && dsOfShard(shardOf(o.id, m[3])) !== o.ds) {
      P.lookalike = o;
      break;
    }
  }
  if (!P.lookalike) throw new Error('no look-alike legacy id found');
}

// Seeded user ids with orders on both datasources, the most orders first (then by id).
function scatterUsers() {
  const users = new Map();
  for (const o of REF.values()) {
    const u = Number(o.user_id);
    if (u > 500 || [1, 7, 42].includes(u)) continue; // not the suites' own rows' user ids
    if (!users.has(u)) users.set(u, []);
    users.get(u).push(o);
  }
  return [...users.entries()].filter(([, os]) => new Set(os.map((o) => o.ds)).size === 2)
    .sort((x, y) => y[1].length - x[1].length || x[0] - y[0]).map(([u]) => u);
}

function itemOrders() {
  return adminQuery('ds0', 'SELECT order_id FROM orders_ref.t_order_item GROUP BY order_id HAVING COUNT(*) >= 2 ORDER BY order_id');
}

// ------------------------------------------------------------------------------------------
// Groups of checks
// ------------------------------------------------------------------------------------------
async function gPointSelects() {
  for (const [optName, opts] of Object.entries(OPTION_SETS)) {
    const pc = await proxy(opts);
    const dcs = { ds0: await direct('ds0', opts), ds1: await direct('ds1', opts) };
    for (const [key, o] of Object.entries(P)) {
      for (const [tname, v] of [['string', o.id], ['BigInt', BigInt(o.id)]]) {
        for (const method of ['execute', 'query']) {
          await compare(`${optName}: ${method} SELECT * by ${key} id (${o.ds}) as ${tname}`, pc, dcs[o.ds], method,
            'SELECT * FROM t_order WHERE order_id = ?', o.shard, [v]);
        }
      }
    }
    for (const c of [pc, dcs.ds0, dcs.ds1]) await c.end();
  }
  // The metadata itself, independently of the direct run: logical names.
  const pc = await proxy();
  const o = P.new_ds1;
  const [, fields] = await pc.execute('SELECT * FROM t_order WHERE order_id = ?', [o.id]);
  checkEq('execute: fields carry db "orders", table and orgTable "t_order"',
    fields.map((f) => [f.db, f.table, f.orgTable, f.name, f.orgName]),
    COLS.split(', ').map((c) => ['orders', 't_order', 't_order', c, c]));
  const [, f2] = await pc.query('SELECT o.order_id AS id, o.note FROM t_order AS o WHERE o.order_id = ?', [o.id]);
  checkEq('query: aliased table: table "o", orgTable "t_order", db "orders"',
    f2.map((f) => [f.db, f.table, f.orgTable, f.name, f.orgName]),
    [['orders', 'o', 't_order', 'id', 'order_id'], ['orders', 'o', 't_order', 'note', 'note']]);
  await pc.end();
}

async function gRepeated() {
  const pc = await proxy();
  const dcs = { ds0: await direct('ds0'), ds1: await direct('ds1') };
  const sql = 'SELECT order_id, channel, amount, note, created_at FROM t_order WHERE order_id = ?';
  const keys = ['new_ds0', 'new_ds1', 'legacy_ds0', 'legacy_ds1', 'lookalike', 'emoji', 'cjk', 'null_note'];
  const bad = [];
  let n = 0;
  for (let rnd = 0; rnd < 3; rnd += 1) {
    for (const [i, key] of keys.entries()) {
      const o = P[key];
      const v = (i + rnd) % 2 ? BigInt(o.id) : o.id;
      const p = await outcome(pc, 'execute', sql, [v]);
      const d = await outcome(dcs[o.ds], 'execute', physicalSql(sql, o.shard), [v]);
      d.fields = logicalFields(d.fields);
      n += 1;
      noteCharsets(`repeated execute ${key}`, p, d);
      if (show(withoutCharset(p), 1e9) !== show(withoutCharset(d), 1e9)) bad.push(`round ${rnd} ${key} ${o.id}:\n  proxy : ${show(p)}\n  direct: ${show(d)}`);
    }
  }
  check(`execute: one statement (mysql2's per-connection cache) executed ${n} times over both datasources`,
    bad.length === 0, bad.slice(0, 4).join('\n'));
  // An explicit prepared statement object, executed many times, then closed and prepared again.
  const stmt = await pc.prepare('SELECT note, amount FROM t_order WHERE order_id = ?');
  const bad2 = [];
  for (let rnd = 0; rnd < 2; rnd += 1) {
    for (const key of keys) {
      const o = P[key];
      const [rows] = await stmt.execute([o.id]);
      const [exp] = await dcs[o.ds].execute(physicalSql('SELECT note, amount FROM t_order WHERE order_id = ?', o.shard), [o.id]);
      if (show(typedRows(rows)) !== show(typedRows(exp))) bad2.push(`${key}: ${show(rows)} vs ${show(exp)}`);
    }
  }
  check('prepare(): a statement object executed 16 times over both datasources', bad2.length === 0, bad2.join('\n'));
  stmt.close();
  pc.unprepare(sql);
  const o = P.legacy_ds1;
  await compare('execute after unprepare (COM_STMT_CLOSE) prepares the statement again', pc, dcs[o.ds], 'execute',
    sql, o.shard, [o.id]);
  // Interleaved statements on one connection.
  const sqls = ['SELECT note FROM t_order WHERE order_id = ?', 'SELECT amount, created_at FROM t_order WHERE order_id = ?',
    'SELECT COUNT(*) AS n FROM t_order_item WHERE order_id = ?'];
  const bad3 = [];
  for (let rnd = 0; rnd < 2; rnd += 1) {
    for (const key of ['new_ds0', 'legacy_ds1', 'new_ds1', 'legacy_ds0']) {
      const ob = P[key];
      for (const s of sqls) {
        const p = await outcome(pc, 'execute', s, [ob.id]);
        const d = await outcome(dcs[ob.ds], 'execute', physicalSql(s, ob.shard), [ob.id]);
        if (show(p.rows) !== show(d.rows)) bad3.push(`${s} ${key}: ${show(p)} vs ${show(d)}`);
      }
    }
  }
  check('execute: three statements interleaved on one connection over both datasources', bad3.length === 0,
    bad3.slice(0, 4).join('\n'));
  for (const c of [pc, dcs.ds0, dcs.ds1]) await c.end();
}

async function gExpressions() {
  for (const method of ['execute', 'query']) {
    const pc = await proxy();
    const dcs = { ds0: await direct('ds0'), ds1: await direct('ds1') };
    const o = P.new_ds1;
    await compare(`${method}: SELECT with expressions and aliases (fields: decimals, lengths, flags, charset)`, pc, dcs[o.ds],
      method,
      'SELECT o.order_id AS id, o.note AS remark, o.amount * 2 AS dbl, o.created_at + INTERVAL 1 SECOND AS later, '
      + 'CAST(o.note AS BINARY) AS raw, DATE(o.created_at) AS d, TIME(o.created_at) AS t, o.user_id / 3 AS third, '
      + 'NULL AS nothing, CAST(o.amount AS DOUBLE) AS dbl_amount, o.order_id + 0 AS id_expr, ? AS echo '
      + 'FROM t_order AS o WHERE o.order_id = ?', o.shard, ['echo é 😀 中文', o.id]);
    await compare(`${method}: large generated text and blob`, pc, dcs[o.ds], method,
      "SELECT order_id, CAST(REPEAT(COALESCE(note, 'x'), 300) AS BINARY) AS big_blob, "
      + "REPEAT(COALESCE(note, 'y'), 300) AS big_text FROM t_order WHERE order_id = ?", o.shard, [o.id]);
    await compare(`${method}: aggregate on one order`, pc, dcs[o.ds], method,
      'SELECT COUNT(*) AS n, SUM(amount) AS s, MAX(created_at) AS m FROM t_order WHERE order_id = ?', o.shard, [o.id]);
    const done = new Set();
    for (const r of await itemOrders()) {
      const x = REF.get(r.order_id);
      if (done.has(x.ds)) continue;
      done.add(x.ds);
      await compare(`${method}: JOIN t_order/t_order_item (${x.ds})`, pc, dcs[x.ds], method,
        'SELECT o.order_id, o.note, i.item_no, i.sku, i.qty, i.price FROM t_order o JOIN t_order_item i '
        + 'ON i.order_id = o.order_id WHERE o.order_id = ? ORDER BY i.item_no', x.shard, [x.id]);
      await compare(`${method}: SELECT * FROM t_order_item, item_no as a number (${x.ds})`, pc, dcs[x.ds], method,
        'SELECT * FROM t_order_item WHERE order_id = ? AND item_no >= ? ORDER BY item_no', x.shard, [BigInt(x.id), 1]);
    }
    // IN list over both datasources.
    const keys = ['new_ds0', 'new_ds1', 'legacy_ds0', 'legacy_ds1'];
    const sql = 'SELECT order_id, channel, amount, note, created_at FROM t_order WHERE order_id IN (?, ?, ?, ?)';
    const p = await outcome(pc, method, sql, keys.map((k) => P[k].id));
    let exp = [];
    let expFields = null;
    for (const k of keys) {
      const x = P[k];
      const d = await outcome(dcs[x.ds], method, physicalSql(sql, x.shard).replace('IN (?, ?, ?, ?)', '= ?'), [x.id]);
      exp = exp.concat(d.rows);
      expFields = logicalFields(d.fields);
    }
    const sortRows = (rows) => (rows || []).map((r) => show(r)).sort();
    checkEq(`${method}: IN (?, ?, ?, ?) over both datasources: rows`, sortRows(p.rows), sortRows(exp), sql);
    sameOutcome(`${method}: IN (?, ?, ?, ?) over both datasources: fields`, { fields: p.fields }, { fields: expFields }, sql);
    // Ids nothing resolves, and NULL: MySQL's empty answers.
    const unknown = freshLegacyId();
    await compare(`${method}: SELECT * by an unknown legacy id`, pc, dcs.ds0, method,
      'SELECT * FROM t_order WHERE order_id = ?', 0, [unknown]);
    await compare(`${method}: COUNT/SUM/MAX by an unknown legacy id`, pc, dcs.ds1, method,
      'SELECT COUNT(*) AS n, SUM(amount) AS s, MAX(created_at) AS m FROM t_order WHERE order_id = ?', 19, [BigInt(unknown)]);
    await compare(`${method}: SELECT * with a NULL id`, pc, dcs.ds0, method,
      'SELECT * FROM t_order WHERE order_id = ?', 0, [null]);
    // Parameters of other types: DATETIME (Date), TINY (boolean), DOUBLE (number), JSON (object).
    const x = P.new_ds0;
    await compare(`${method}: Date, boolean, number and object parameters`, pc, dcs[x.ds], method,
      'SELECT order_id, ? AS d, ? AS b, ? AS n, ? AS j FROM t_order WHERE order_id = ? AND created_at <= ?', x.shard,
      [new Date(Date.UTC(2024, 5, 1, 0, 0, 1, 250)), true, 1.5, { a: 1, b: 'é' }, x.id, new Date(Date.UTC(2031, 0, 1))]);
    for (const c of [pc, dcs.ds0, dcs.ds1]) await c.end();
  }
}

async function gBinary() {
  const pc = await proxy();
  const o = P.emoji;
  const dc = await direct(o.ds);
  const every = Buffer.from([...Array(256).keys()]);
  const text = "emoji 😀🚀 中文 한국어 'q' \"dq\" \\ back \u0000 nul";
  for (const method of ['execute', 'query']) {
    await compare(`${method}: Buffer of every byte and an emoji/CJK/NUL string as parameters`, pc, dc, method,
      'SELECT order_id, ? AS raw, HEX(?) AS hx, ? AS txt, note, CAST(note AS BINARY) AS note_raw FROM t_order WHERE order_id = ?',
      o.shard, [every, every, text, o.id]);
    const [rows] = await pc[method]('SELECT ? AS raw, ? AS txt, note FROM t_order WHERE order_id = ?', [every, text, o.id]);
    check(`${method}: the Buffer comes back byte for byte`, rows.length === 1 && Buffer.isBuffer(rows[0].raw)
      && rows[0].raw.equals(every), show(rows));
    checkEq(`${method}: the string and the seeded emoji note come back unchanged`, rows.length && [rows[0].txt, rows[0].note],
      [text, o.note]);
  }
  // A row written with emoji / CJK / quotes / backslash: the bytes on the shard are its UTF-8.
  for (const method of ['execute', 'query']) {
    const id = freshNewId('GLOBAL_CHANNEL');
    const note = `${method} 😀 中文 it's \\ "x" é`;
    await pc[method](INSERT_SQL, [id, 'GLOBAL_CHANNEL', 'US', 7, '1.00', 'CREATED', note, '2025-01-02 03:04:05.678']);
    const row = await physicalRow(id, shardOf(id, 'GLOBAL_CHANNEL'));
    checkEq(`${method}: INSERT of an emoji/CJK note: UTF-8 bytes on the shard`, row && row.note_hex,
      Buffer.from(note, 'utf8').toString('hex').toUpperCase());
    await pc[method]('DELETE FROM t_order WHERE order_id = ?', [id]);
  }
  await pc.end();
  await dc.end();
}

function newRow(id, channel, note = 'mysql2 test row é 🚀', amount = '12.34', sec = 7) {
  return [id, channel, CHANNELS[channel].regions[0], 42, amount, 'CREATED', note, `2025-03-04 05:06:${String(sec).padStart(2, '0')}.891`];
}

function rowObj(r) {
  return { order_id: String(r[0]), channel: r[1], region: r[2], user_id: String(r[3]), amount: r[4], status: r[5], note: r[6],
    created_at: r[7] };
}

function physicalPart(row) {
  if (!row) return row;
  const { note_hex: _unused, ...rest } = row;
  return rest;
}

async function checkPlaced(name, id, channel, row, table = 't_order') {
  const shard = shardOf(id, channel);
  const where = await shardsHolding(id, table);
  const ok = checkEq(`${name}: placed on shard ${shard} only`, where, [shard]);
  if (ok && row) checkEq(`${name}: physical row equals what was written`, physicalPart(await physicalRow(id, shard)), rowObj(row));
}

async function gWrites() {
  for (const method of ['execute', 'query']) {
    const pc = await proxy();
    for (const [channel, ds] of [['EU_CHANNEL', 'ds0'], ['BIZ_CHANNEL', 'ds1']]) {
      const dc = await direct(ds);
      const id = freshNewId(channel);
      const twin = freshNewId(channel, Number(BigInt(id) % 4n));
      const shard = shardOf(id, channel);
      const row = newRow(id, channel);
      let p = await outcome(pc, method, INSERT_SQL, row);
      let d = await outcome(dc, method, physicalSql(INSERT_SQL, shard), [twin, ...row.slice(1)]);
      checkEq(`${method}: INSERT ${channel} (${ds}): result header`, p, d);
      await checkPlaced(`${method}: INSERT ${channel}`, id, channel, row);
      const upd = 'UPDATE t_order SET note = ?, amount = ? WHERE order_id = ?';
      p = await outcome(pc, method, upd, ['updated 中文 😀', '99.95', BigInt(id)]);
      d = await outcome(dc, method, physicalSql(upd, shard), ['updated 中文 😀', '99.95', BigInt(twin)]);
      checkEq(`${method}: UPDATE by BigInt id (${ds}): affectedRows/changedRows/info`, p, d);
      checkEq(`${method}: UPDATE (${ds}): physical row`, physicalPart(await physicalRow(id, shard)),
        rowObj([...row.slice(0, 4), '99.95', row[5], 'updated 中文 😀', row[7]]));
      p = await outcome(pc, method, upd, ['updated 中文 😀', '99.95', id]);
      d = await outcome(dc, method, physicalSql(upd, shard), ['updated 中文 😀', '99.95', twin]);
      checkEq(`${method}: no-op UPDATE by string id (${ds}): affectedRows/changedRows/info`, p, d);
      p = await outcome(pc, method, upd, ['x', '1.00', null]);
      d = await outcome(dc, method, physicalSql(upd, shard), ['x', '1.00', null]);
      checkEq(`${method}: UPDATE with a NULL id (${ds}): nothing matched`, p, d);
      const item = 'INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES (?, ?, ?, ?, ?)';
      p = await outcome(pc, method, item, [id, 1, 'SKU-é', 3, '1.50']);
      d = await outcome(dc, method, physicalSql(item, shard), [twin, 1, 'SKU-é', 3, '1.50']);
      checkEq(`${method}: INSERT t_order_item, numbers as item_no/qty (${ds}): result header`, p, d);
      await checkPlaced(`${method}: INSERT t_order_item`, id, channel, null, 't_order_item');
      p = await outcome(pc, method, 'DELETE FROM t_order_item WHERE order_id = ?', [BigInt(id)]);
      checkEq(`${method}: DELETE t_order_item (${ds}): affectedRows`, p.header && p.header.affectedRows, 1, show(p));
      p = await outcome(pc, method, 'DELETE FROM t_order WHERE order_id = ?', [id]);
      d = await outcome(dc, method, physicalSql('DELETE FROM t_order WHERE order_id = ?', shard), [twin]);
      checkEq(`${method}: DELETE (${ds}): result header`, p, d);
      checkEq(`${method}: DELETE (${ds}): nothing left on any shard`,
        [await shardsHolding(id), await shardsHolding(id, 't_order_item')], [[], []]);
      await adminQuery(ds, `DELETE FROM order_shards.t_order_item_${shard} WHERE order_id = ${twin}`);
      await dc.end();
    }
    // A legacy id: the INSERT names the channel and the proxy writes the index row first.
    const lid = freshLegacyId();
    const lrow = newRow(lid, 'CORP_CHANNEL', 'legacy row');
    let p = await outcome(pc, method, INSERT_SQL, lrow);
    checkEq(`${method}: INSERT with a legacy id: affectedRows`, p.header && p.header.affectedRows, 1, show(p));
    await checkPlaced(`${method}: INSERT with a legacy id`, lid, 'CORP_CHANNEL', lrow);
    checkEq(`${method}: INSERT with a legacy id: index row`, await indexChannel(lid), 'CORP_CHANNEL');
    p = await outcome(pc, method, 'UPDATE t_order SET status = ? WHERE order_id = ?', ['PAID', BigInt(lid)]);
    checkEq(`${method}: UPDATE by legacy id (index): affectedRows`, p.header && p.header.affectedRows, 1, show(p));
    p = await outcome(pc, method, 'SELECT status FROM t_order WHERE order_id = ?', [lid]);
    checkEq(`${method}: read back by legacy id`, p.rows, [[['status', 'string', 'PAID']]]);
    p = await outcome(pc, method, 'DELETE FROM t_order WHERE order_id = ?', [lid]);
    checkEq(`${method}: DELETE by legacy id: affectedRows`, p.header && p.header.affectedRows, 1, show(p));
    checkEq(`${method}: DELETE by legacy id: gone`, await shardsHolding(lid), []);
    // A JS number id where it is safe (below 2^53): execute sends it as a DOUBLE.
    const nid = freshSafeNumberId(2);
    const nrow = newRow(nid, 'CN_CHANNEL', 'number id');
    p = await outcome(pc, method, INSERT_SQL, nrow);
    checkEq(`${method}: INSERT with a safe JS number id (${nid}): affectedRows`, p.header && p.header.affectedRows, 1, show(p));
    await checkPlaced(`${method}: INSERT with a safe JS number id`, nid, 'CN_CHANNEL', nrow);
    const dcn = await direct(dsOfShard(shardOf(nid, 'CN_CHANNEL')));
    await compare(`${method}: SELECT * by a safe JS number id`, pc, dcn, method, 'SELECT * FROM t_order WHERE order_id = ?',
      shardOf(nid, 'CN_CHANNEL'), [nid]);
    await dcn.end();
    p = await outcome(pc, method, 'DELETE FROM t_order WHERE order_id = ?', [nid]);
    checkEq(`${method}: DELETE by a safe JS number id: affectedRows`, p.header && p.header.affectedRows, 1, show(p));
    // An unsafe number id is not an exact id: never a wrong row (proxy refuses, or answers as MySQL).
    const o = P.new_ds1;
    const dc1 = await direct(o.ds);
    const pd = await outcome(pc, method, 'SELECT order_id FROM t_order WHERE order_id = ?', [Number(o.id)]);
    const dd = await outcome(dc1, method, physicalSql('SELECT order_id FROM t_order WHERE order_id = ?', o.shard), [Number(o.id)]);
    check(`${method}: an unsafe JS number id (${Number(o.id)}) gives an error or the direct answer`,
      (pd.error && pd.error[0] === 1292) || show(pd.rows) === show(dd.rows), `proxy ${show(pd)}\ndirect ${show(dd)}`);
    await dc1.end();
    // INSERT with a NULL id: refused, connection usable.
    p = await outcome(pc, method, INSERT_SQL, [null, ...newRow('0', 'EU_CHANNEL').slice(1)]);
    check(`${method}: INSERT with a NULL id is refused`, !!p.error, show(p));
    p = await outcome(pc, method, 'SELECT order_id FROM t_order WHERE order_id = ?', [P.new_ds0.id]);
    checkEq(`${method}: connection usable after the refused INSERT`, p.rows, [[['order_id', 'string', P.new_ds0.id]]]);
    // A SELECT without an order id is a scatter read: rows and fields as the unsharded
    // reference database (orders_ref on ds0) answers the same SQL.
    const users = scatterUsers();
    const rc = await direct('ds0', SAFE, { database: 'orders_ref' });
    for (const [sql, args] of [
      ['SELECT * FROM t_order WHERE user_id = ? ORDER BY order_id', [users[0]]],
      ['SELECT order_id, amount, note FROM t_order WHERE user_id = ? ORDER BY amount DESC, order_id LIMIT 3', [users[0]]],
      ['SELECT COUNT(*) AS n, SUM(amount) AS s, MIN(created_at) AS first, MAX(note) AS mx FROM t_order WHERE user_id = ?', [users[0]]],
      ['SELECT channel, COUNT(*) AS n FROM t_order WHERE user_id IN (?, ?) GROUP BY channel ORDER BY channel', [users[0], users[1]]],
      ['SELECT order_id FROM t_order WHERE order_id IN (?, ?) ORDER BY amount, order_id LIMIT 1', [P.new_ds0.id, P.new_ds1.id]],
    ]) {
      await compare(`${method}: SELECT without an order id (scatter) equals orders_ref: ${sql}`, pc, rc, method, sql, 0, args, sql);
    }
    await rc.end();
    // A scatter UPDATE is still refused (scatter_writes = "refuse"): 1235, connection usable.
    p = await outcome(pc, method, 'UPDATE t_order SET amount = amount WHERE user_id = ?', [users[0]]);
    checkEq(`${method}: UPDATE without an order id: 1235`, p.error && p.error[0], 1235, show(p));
    p = await outcome(pc, method, 'SELECT order_id FROM t_order WHERE order_id = ?', [P.legacy_ds1.id]);
    checkEq(`${method}: connection usable after the 1235`, p.rows, [[['order_id', 'string', P.legacy_ds1.id]]]);
    await pc.end();
  }
}

async function gMultiRow() {
  const pc = await proxy();
  // execute: three rows on three BIZ shards (all ds1), split by shard, affected rows summed.
  const ids = [0, 1, 2].map((k) => freshNewId('BIZ_CHANNEL', k));
  const rows = ids.map((id, n) => newRow(id, 'BIZ_CHANNEL', `multirow ${n}`, '3.00', n));
  const sql = `INSERT INTO t_order (${COLS}) VALUES ${Array(3).fill('(?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`;
  let p = await outcome(pc, 'execute', sql, rows.flat());
  checkEq('execute: 3-row INSERT over 3 shards of ds1: affectedRows summed', p.header && p.header.affectedRows, 3, show(p));
  for (const r of rows) await checkPlaced(`execute: 3-row INSERT, id ${r[0]}`, r[0], 'BIZ_CHANNEL', r);
  // query: mysql2's nested-array expansion (VALUES ?) over four EU shards (ds0).
  const ids2 = [0, 1, 2, 3].map((k) => freshNewId('EU_CHANNEL', k));
  const rows2 = ids2.map((id, n) => newRow(id, 'EU_CHANNEL', `bulk ${n} 😀`, '4.00', n));
  p = await outcome(pc, 'query', `INSERT INTO t_order (${COLS}) VALUES ?`, [rows2]);
  checkEq('query: bulk INSERT ... VALUES ? of 4 rows over 4 shards of ds0: affectedRows summed',
    p.header && p.header.affectedRows, 4, show(p));
  for (const r of rows2) await checkPlaced(`query: bulk INSERT, id ${r[0]}`, r[0], 'EU_CHANNEL', r);
  // Rows on both datasources in one statement: refused with 1235, nothing written.
  const a = freshNewId('EU_CHANNEL');
  const b = freshNewId('CORP_CHANNEL');
  const sql2 = `INSERT INTO t_order (${COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?)`;
  p = await outcome(pc, 'execute', sql2, [...newRow(a, 'EU_CHANNEL'), ...newRow(b, 'CORP_CHANNEL')]);
  checkEq('execute: 2-row INSERT over ds0 and ds1: 1235', p.error && p.error[0], 1235, show(p));
  checkEq('execute: ... nothing written', [...(await shardsHolding(a)), ...(await shardsHolding(b))], []);
  p = await outcome(pc, 'execute', 'DELETE FROM t_order WHERE order_id IN (?, ?, ?)', ids);
  checkEq('execute: DELETE ... IN (?, ?, ?) over 3 shards: affectedRows', p.header && p.header.affectedRows, 3, show(p));
  p = await outcome(pc, 'query', 'DELETE FROM t_order WHERE order_id IN (?)', [ids2]);
  checkEq('query: DELETE ... IN (?) with an array over 4 shards: affectedRows', p.header && p.header.affectedRows, 4, show(p));
  await pc.end();
}

async function gTransaction() {
  const pc = await proxy();
  const dc = await direct('ds1');
  for (const s of ['SELECT @@autocommit AS a, @@collation_connection AS c, @@character_set_client AS cs, @@character_set_results AS cr, @@time_zone AS tz']) {
    await compare('query: session settings after connect', pc, dc, 'query', s, 10, [], s);
    await compare('execute: session settings after connect', pc, dc, 'execute', s, 10, [], s);
  }
  await dc.end();
  const ids = [0, 1].map((k) => freshNewId('CN_CHANNEL', k)); // shards 8, 9 (ds0)
  const rows = ids.map((id) => newRow(id, 'CN_CHANNEL', 'tx row'));
  await pc.beginTransaction();
  let p = await outcome(pc, 'execute', INSERT_SQL, rows[0]);
  checkEq('transaction: INSERT inside: affectedRows and in-transaction status',
    p.header && [p.header.affectedRows, p.header.txBits & 1], [1, 1], show(p));
  checkEq('transaction: not visible to others before COMMIT', await shardsHolding(ids[0]), []);
  p = await outcome(pc, 'execute', 'SELECT note FROM t_order WHERE order_id = ?', [ids[0]]);
  checkEq('transaction: visible inside the transaction', p.rows, [[['note', 'string', 'tx row']]]);
  await pc.rollback();
  checkEq('transaction: ROLLBACK: gone', await shardsHolding(ids[0]), []);
  await pc.beginTransaction();
  await pc.execute(INSERT_SQL, rows[0]);
  await pc.query(INSERT_SQL, rows[1]);
  await pc.execute('INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES (?, ?, ?, ?, ?)', [ids[1], 1, 'S', 1, '2.00']);
  await pc.execute('UPDATE t_order SET status = ? WHERE order_id = ?', ['PAID', BigInt(ids[0])]);
  await pc.commit();
  await checkPlaced('transaction: COMMIT: first row', ids[0], 'CN_CHANNEL', [...rows[0].slice(0, 5), 'PAID', ...rows[0].slice(6)]);
  await checkPlaced('transaction: COMMIT: second row', ids[1], 'CN_CHANNEL', rows[1]);
  await checkPlaced('transaction: COMMIT: item', ids[1], 'CN_CHANNEL', null, 't_order_item');
  // Writes to both datasources in one transaction: the second is refused (1235), rollback leaves nothing.
  const a = freshNewId('EU_CHANNEL');
  const b = freshNewId('BIZ_CHANNEL');
  await pc.beginTransaction();
  const pa = await outcome(pc, 'execute', INSERT_SQL, newRow(a, 'EU_CHANNEL'));
  const pb = await outcome(pc, 'execute', INSERT_SQL, newRow(b, 'BIZ_CHANNEL'));
  checkEq('transaction: a write to a second datasource: 1235', [pa.header && pa.header.affectedRows, pb.error && pb.error[0]],
    [1, 1235], show(pb));
  await pc.rollback();
  checkEq('transaction: ... after ROLLBACK nothing is written', [...(await shardsHolding(a)), ...(await shardsHolding(b))], []);
  p = await outcome(pc, 'execute', 'DELETE FROM t_order WHERE order_id IN (?, ?)', ids);
  checkEq('transaction: connection usable afterwards (DELETE of both rows)', p.header && p.header.affectedRows, 2, show(p));
  await pc.execute('DELETE FROM t_order_item WHERE order_id = ?', [ids[1]]);
  await pc.end();
}

async function gPool() {
  const pool = mysql.createPool({
    host: HOST, port: PROXY_PORT, user: 'app', password: 'app', database: 'orders', connectionLimit: 4, ...SAFE,
  });
  const dcs = { ds0: await direct('ds0'), ds1: await direct('ds1') };
  const keys = ['new_ds0', 'new_ds1', 'legacy_ds0', 'legacy_ds1', 'lookalike', 'emoji', 'cjk', 'quotes'];
  const sql = 'SELECT * FROM t_order WHERE order_id = ?';
  const expected = {};
  for (const k of keys) {
    const o = P[k];
    expected[k] = await outcome(dcs[o.ds], 'execute', physicalSql(sql, o.shard), [o.id]);
    expected[k].fields = logicalFields(expected[k].fields);
  }
  const jobs = [];
  for (let i = 0; i < 48; i += 1) {
    const k = keys[i % keys.length];
    const method = i % 3 === 2 ? 'query' : 'execute';
    jobs.push(outcome(pool, method, sql, [i % 2 ? BigInt(P[k].id) : P[k].id]).then((r) => [k, method, r]));
  }
  const results = await Promise.all(jobs);
  for (const [k, m, r] of results) noteCharsets(`pool ${m} ${k}`, r, expected[k]);
  const bad = results.filter(([k, , r]) => show(withoutCharset(r), 1e9) !== show(withoutCharset(expected[k]), 1e9))
    .map(([k, m, r]) => `${m} ${k}: ${show(r, 300)} vs ${show(expected[k], 300)}`);
  check('pool (4 connections): 48 concurrent execute/query point selects over both datasources', bad.length === 0,
    bad.slice(0, 4).join('\n'));
  // A connection checked out, used, released and checked out again: its cached statements still work.
  const bad2 = [];
  for (let i = 0; i < 6; i += 1) {
    const conn = await pool.getConnection();
    const k = keys[i % keys.length];
    const r = await outcome(conn, 'execute', sql, [P[k].id]);
    noteCharsets(`pool getConnection ${k}`, r, expected[k]);
    if (show(withoutCharset(r), 1e9) !== show(withoutCharset(expected[k]), 1e9)) bad2.push(`${k}: ${show(r, 300)}`);
    conn.release();
  }
  check('pool: getConnection/execute/release six times (statement cache of reused connections)', bad2.length === 0,
    bad2.join('\n'));
  // A transaction on a pooled connection, then the connection serves others.
  const conn = await pool.getConnection();
  const id = freshNewId('CORP_CHANNEL');
  await conn.beginTransaction();
  await conn.execute(INSERT_SQL, newRow(id, 'CORP_CHANNEL', 'pool tx'));
  await conn.commit();
  conn.release();
  await checkPlaced('pool: INSERT in a transaction on a pooled connection', id, 'CORP_CHANNEL', newRow(id, 'CORP_CHANNEL', 'pool tx'));
  const [res] = await pool.execute('DELETE FROM t_order WHERE order_id = ?', [id]);
  checkEq('pool: DELETE through pool.execute', res.affectedRows, 1);
  await pool.end();
  await dcs.ds0.end();
  await dcs.ds1.end();
}

// The proxy's own backend connections: the process listening on ROUTEKEY_PROXY_PORT, its
// established sockets to a datasource (from /proc), their server thread ids.
function tcpTable() {
  const out = [];
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let lines;
    try {
      lines = fs.readFileSync(f, 'utf8').split('\n').slice(1);
    } catch (e) {
      continue;
    }
    for (const line of lines) {
      const parts = line.trim().split(/\s+/);
      if (parts.length < 10) continue;
      out.push({ lport: parseInt(parts[1].split(':').pop(), 16), rport: parseInt(parts[2].split(':').pop(), 16),
        state: parts[3], inode: parts[9] });
    }
  }
  return out;
}

function proxyBackendPorts(backendPort) {
  const table = tcpTable();
  const listen = new Set(table.filter((t) => t.lport === PROXY_PORT && t.state === '0A').map((t) => t.inode));
  if (!listen.size) return null;
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let inodes;
    try {
      inodes = new Set(fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
        try {
          return fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
        } catch (e) {
          return '';
        }
      }).filter((x) => x.startsWith('socket:[')).map((x) => x.slice(8, -1)));
    } catch (e) {
      continue;
    }
    if ([...listen].some((i) => inodes.has(i))) {
      return table.filter((t) => t.rport === backendPort && t.state === '01' && inodes.has(t.inode)).map((t) => t.lport);
    }
  }
  return null;
}

async function openProxyTransactions(ds) {
  const ports = proxyBackendPorts(DS_PORTS[ds]);
  if (ports === null) return null;
  if (!ports.length) return [];
  const threads = (await adminQuery(ds, `SELECT ID FROM information_schema.PROCESSLIST WHERE SUBSTRING_INDEX(HOST, ':', -1) IN (${ports.join(', ')})`))
    .map((r) => r.ID);
  if (!threads.length) return [];
  return adminQuery(ds, 'SELECT trx_mysql_thread_id AS thread, trx_state AS state, trx_rows_locked AS rows_locked, '
    + `trx_rows_modified AS rows_modified FROM information_schema.innodb_trx WHERE trx_mysql_thread_id IN (${threads.join(', ')})`);
}

async function rowLockable(id, shard) {
  const c = await direct(dsOfShard(shard));
  try {
    await c.query('SET SESSION innodb_lock_wait_timeout = 3');
    await c.query(`UPDATE order_shards.t_order_${shard} SET note = note WHERE order_id = ${BigInt(id)}`);
    return true;
  } catch (e) {
    return `${e.errno} ${e.message}`;
  } finally {
    await c.end();
  }
}

// A write that fails inside a transaction, then ROLLBACK: as on MySQL, no transaction or lock
// may stay behind (with BEGIN, and with autocommit off).
async function gFailedWriteRollback() {
  const o = P.new_ds0;
  const dup = [o.id, o.channel, CHANNELS[o.channel].regions[0], 1, '1.00', 'X', 'dup', '2025-01-01 00:00:00'];
  const dc = await direct(o.ds);
  const exp = await outcome(dc, 'execute', physicalSql(INSERT_SQL, o.shard), dup);
  await dc.end();
  const pc = await proxy();
  for (const how of ['START TRANSACTION', 'SET autocommit = 0']) {
    for (const method of ['execute', 'query']) {
      if (how.startsWith('START')) await pc.beginTransaction(); else await pc.query(how);
      const p = await outcome(pc, method, INSERT_SQL, dup);
      checkEq(`${how}: ${method} duplicate-key INSERT: the server's error`, p.error, exp.error);
      await pc.rollback();
      const lockable = await rowLockable(o.id, o.shard);
      const trx = await openProxyTransactions(o.ds); // after: InnoDB refreshes this view every 0.1 s
      check(`${how}: ${method} failed INSERT then ROLLBACK: no transaction left open on the proxy's backend connections, `
        + 'the row can be locked by others', show(trx) === '[]' && lockable === true,
      `statement: ${INSERT_SQL} (id ${o.id}, already present)\nopen InnoDB transactions on the proxy's ${o.ds} `
        + `connections: ${show(trx)}\ndirect UPDATE of the row (innodb_lock_wait_timeout=3): ${lockable}`);
      if (!how.startsWith('START')) await pc.query('SET autocommit = 1');
    }
  }
  await pc.end();
}

// The collation a client asks for in its handshake decides the character set ids of string
// columns in result metadata (MariaDB reports the handshake collation, e.g. 224 for mysql2's
// default utf8mb4_unicode_ci).
async function gCollations() {
  const o = P.cjk;
  const sql = 'SELECT note, channel, CONCAT(region, ?) AS expr, @@collation_connection AS cc FROM t_order WHERE order_id = ?';
  for (const charset of ['UTF8MB4_UNICODE_CI', 'UTF8MB4_GENERAL_CI', 'UTF8MB4_BIN']) {
    const pc = await proxy(SAFE, { charset });
    const dc = await direct(o.ds, SAFE, { charset });
    for (const method of ['query', 'execute']) {
      const d = await outcome(dc, method, physicalSql(sql, o.shard), ['-x', o.id]);
      const p = await outcome(pc, method, sql, ['-x', o.id]);
      checkEq(`${method}: charset ${charset}${charset === 'UTF8MB4_UNICODE_CI' ? " (mysql2's default)" : ''}: `
        + 'column characterSet ids and @@collation_connection', [charsets(p), p.rows && p.rows[0][3]],
      [charsets(d), d.rows && d.rows[0][3]], sql);
    }
    await pc.end();
    await dc.end();
  }
}

async function main() {
  const started = Date.now();
  console.log(`node ${process.version}, mysql2 ${mysql2Version}; proxy ${HOST}:${PROXY_PORT}`);
  await loadReference();
  try {
    await group('point selects', gPointSelects);
    await group('repeated executions', gRepeated);
    await group('expressions', gExpressions);
    await group('binary and emoji', gBinary);
    await group('writes', gWrites);
    await group('multi-row', gMultiRow);
    await group('transaction', gTransaction);
    await group('pool', gPool);
    await group('collations', gCollations);
    await group('failed write and rollback', gFailedWriteRollback);
  } finally {
    for (const id of created) {
      try {
        await purge(id);
      } catch (e) {
        console.log(`cleanup of ${id} failed: ${e.message}`);
      }
    }
    for (const c of opened) {
      try {
        c.destroy();
      } catch (e) {
        // already closed
      }
    }
  }
  console.log('');
  if (failures.length) {
    console.log('failed checks:');
    for (const f of failures) console.log(`  - ${f}`);
  }
  console.log(`node suite ran in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  console.log(`node: ${passed} passed, ${failed} failed, ${skipped} skipped`);
  return failed ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.log(`FAIL node suite crashed: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
