"""mysql-connector-python through routekey-proxy, compared with the same connector talking
straight to the shard's MariaDB server running the equivalent physical statement.

Run by tests/clients/mysqlconnector/run.sh (environment from scripts/client-tests.sh):
  ROUTEKEY_PROXY_PORT, ROUTEKEY_DS0_PORT, ROUTEKEY_DS1_PORT, ROUTEKEY_SANDBOX_DIR

Every check prints PASS or FAIL with its name; the run ends with a summary line
("N passed, N failed") and exits 1 when anything failed. Both implementations of the
connector are exercised: the pure-Python one (use_pure=True) and the C extension when it is
installed. What is compared for each statement: cursor.description, the fetched values with
their Python types, rowcount, lastrowid and warning count. Writes are checked by reading the
physical tables directly. Rows the suite creates use fresh ids and are deleted at the end
(with their index rows).
"""

import datetime
import decimal
import io
import json
import os
import random
import re
import struct
import sys
import time
import traceback
import warnings
from pathlib import Path

import mysql.connector
from mysql.connector.constants import ClientFlag, ServerCmd

HOST = "127.0.0.1"
PROXY_PORT = int(os.environ["ROUTEKEY_PROXY_PORT"])
DS_PORTS = {"ds0": int(os.environ.get("ROUTEKEY_DS0_PORT", "33061")),
            "ds1": int(os.environ.get("ROUTEKEY_DS1_PORT", "33062"))}
SANDBOX_DIR = Path(os.environ["ROUTEKEY_SANDBOX_DIR"])
EPOCH_MS = 1288834974657
PHYSICAL_DB = "order_shards"
INDEX_TABLE = "order_meta.t_order_index"
COLS = "order_id, channel, region, user_id, amount, status, note, created_at"
INSERT_SQL = "INSERT INTO t_order (%s) VALUES (?, ?, ?, ?, ?, ?, ?, ?)" % COLS
VERBOSE = os.environ.get("ROUTEKEY_TEST_VERBOSE") == "1"

SUMMARY = json.loads((SANDBOX_DIR / "seed-summary.json").read_text(encoding="utf-8"))
CHANNELS = SUMMARY["channels"]

MODES = [True]
try:
    from mysql.connector import HAVE_CEXT
except ImportError:  # pragma: no cover
    HAVE_CEXT = False
if HAVE_CEXT:
    MODES.append(False)


def mode_name(pure):
    return "pure" if pure else "cext"


# ------------------------------------------------------------------------------------------
# Reporting
# ------------------------------------------------------------------------------------------
RESULTS = {"pass": 0, "fail": 0, "skip": 0}
FAILURES = []


def short(v, n=1500):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "...(%d chars)" % len(s)


def check(name, ok, detail=""):
    if ok:
        RESULTS["pass"] += 1
        print("PASS %s" % name, flush=True)
    else:
        RESULTS["fail"] += 1
        FAILURES.append(name)
        print("FAIL %s" % name, flush=True)
        if detail:
            for line in str(detail).splitlines():
                print("     " + line)
    return ok


def check_eq(name, got, expected, ctx=""):
    return check(name, got == expected,
                 "%s\n  proxy   : %s\n  expected: %s" % (ctx, short(got), short(expected)) if got != expected else "")


def skip(name, why):
    RESULTS["skip"] += 1
    print("SKIP %s (%s)" % (name, why), flush=True)


def run_group(name, fn, *args):
    """Runs one group of checks; an exception the group did not expect is a failure of it."""
    try:
        fn(*args)
    except Exception:
        check(name + " (raised)", False, traceback.format_exc())


# ------------------------------------------------------------------------------------------
# Topology, ids, connections
# ------------------------------------------------------------------------------------------
def shard_of(oid, channel):
    return CHANNELS[channel]["base_shard"] + oid % 4


def ds_of_shard(shard):
    for name, ds in SUMMARY["datasources"].items():
        if shard in ds["shards"]:
            return name
    raise KeyError(shard)


_rng = random.Random()
_issued = set()
CREATED = set()  # every id this run may have written, purged at the end


def all_seeded():
    out = set()
    for ch in CHANNELS.values():
        out.update(ch["new_format_ids"])
        out.update(ch["legacy_ids"])
    return out


SEEDED = all_seeded()


def fresh_new_id(channel, offset=None):
    code = CHANNELS[channel]["code"]
    while True:
        now = int(time.time() * 1000)
        oid = ((now - EPOCH_MS) << 23) | (_rng.randrange(32) << 18) | (code << 14) | _rng.randrange(16384)
        if offset is not None and oid % 4 != offset:
            continue
        if oid not in _issued:
            _issued.add(oid)
            CREATED.add(oid)
            return oid


def fresh_legacy_id(offset=None):
    """A classic Snowflake id from 2020 whose bits 17-14 name no channel (routes by index only)."""
    t2020 = 1577836800000
    while True:
        ts = t2020 + _rng.randrange(180 * 86400 * 1000)
        oid = ((ts - EPOCH_MS) << 22) | (_rng.randrange(1024) << 12) | _rng.randrange(4096)
        if (oid >> 14) & 15 in range(0, 6):
            continue
        if offset is not None and oid % 4 != offset:
            continue
        if oid not in _issued and oid not in SEEDED:
            _issued.add(oid)
            CREATED.add(oid)
            return oid


def proxy_conn(pure, **kw):
    args = dict(host=HOST, port=PROXY_PORT, user="app", password="app", database="orders",
                use_pure=pure, connection_timeout=10)
    args.update(kw)
    return mysql.connector.connect(**args)


def direct_conn(ds, pure, **kw):
    args = dict(host=HOST, port=DS_PORTS[ds], user="root", password="", database="orders",
                use_pure=pure, connection_timeout=10)
    args.update(kw)
    return mysql.connector.connect(**args)


_admin = {}


def admin_query(ds, sql, args=None):
    c = _admin.get(ds)
    if c is None or not c.is_connected():
        c = direct_conn(ds, True, autocommit=True)
        _admin[ds] = c
    cur = c.cursor()
    pexec(cur, sql, args)
    rows = cur.fetchall() if cur.with_rows else []
    cur.close()
    return rows


def shards_holding(oid, table="t_order"):
    found = []
    for ds, info in SUMMARY["datasources"].items():
        parts = ["SELECT %d FROM %s.%s_%d WHERE order_id = %d" % (s, PHYSICAL_DB, table, s, oid)
                 for s in info["shards"]]
        found += [r[0] for r in admin_query(ds, " UNION ALL ".join(parts))]
    return sorted(found)


def physical_row(oid, shard):
    rows = admin_query(ds_of_shard(shard), "SELECT %s FROM %s.t_order_%d WHERE order_id = %%s"
                       % (COLS, PHYSICAL_DB, shard), (oid,))
    return rows[0] if rows else None


def index_channel(oid):
    rows = admin_query("ds0", "SELECT channel FROM %s WHERE order_id = %%s" % INDEX_TABLE, (oid,))
    return rows[0][0] if rows else None


def purge(oid):
    for ds, info in SUMMARY["datasources"].items():
        for s in info["shards"]:
            admin_query(ds, "DELETE FROM %s.t_order_%d WHERE order_id = %d" % (PHYSICAL_DB, s, oid))
            admin_query(ds, "DELETE FROM %s.t_order_item_%d WHERE order_id = %d" % (PHYSICAL_DB, s, oid))
    admin_query("ds0", "DELETE FROM %s WHERE order_id = %%s" % INDEX_TABLE, (oid,))


_TABLE_RE = re.compile(r"(?<![\w$.`])(?:orders\.)?\b(t_order_item|t_order)\b(?![\w$])", re.IGNORECASE)


def physical_sql(sql, shard):
    return _TABLE_RE.sub(lambda m: "%s.%s_%d" % (PHYSICAL_DB, m.group(1).lower(), shard), sql)


# ------------------------------------------------------------------------------------------
# Seeded orders worth reading (from the unsharded reference copy on ds0)
# ------------------------------------------------------------------------------------------
REF = {}


def load_reference():
    legacy = set()
    for ch in CHANNELS.values():
        legacy.update(ch["legacy_ids"])
    for r in admin_query("ds0", "SELECT %s FROM orders_ref.t_order ORDER BY order_id" % COLS):
        d = dict(zip([c.strip() for c in COLS.split(",")], r))
        d["shard"] = shard_of(d["order_id"], d["channel"])
        d["ds"] = ds_of_shard(d["shard"])
        d["legacy"] = d["order_id"] in legacy
        REF[d["order_id"]] = d


def scatter_users():
    """Seeded user ids with orders on both servers, the most orders first (then by id)."""
    users = {}
    for o in REF.values():
        if o["user_id"] <= 500 and o["user_id"] not in (1, 7, 42):  # not the suites' own rows' user ids
            users.setdefault(o["user_id"], []).append(o)
    both = [u for u, os_ in users.items() if len({o["ds"] for o in os_}) == 2]
    return sorted(both, key=lambda u: (-len(users[u]), u))


def has_emoji(s):
    return s is not None and any(ord(ch) > 0xFFFF for ch in s)


def has_cjk(s):
    return s is not None and any(0x4E00 <= ord(ch) <= 0x9FFF or 0xAC00 <= ord(ch) <= 0xD7AF for ch in s)


def pick(pred, legacy=None, ds=None):
    for oid in sorted(REF):
        o = REF[oid]
        if legacy is not None and o["legacy"] != legacy:
            continue
        if ds is not None and o["ds"] != ds:
            continue
        if pred(o):
            return o
    raise LookupError("no seeded order matches")


def picks():
    p = {
        "new_ds0": pick(lambda o: o["created_at"].microsecond, legacy=False, ds="ds0"),
        "new_ds1": pick(lambda o: o["created_at"].microsecond, legacy=False, ds="ds1"),
        "legacy_ds0": pick(lambda o: True, legacy=True, ds="ds0"),
        "legacy_ds1": pick(lambda o: o["note"], legacy=True, ds="ds1"),
        "null_note": pick(lambda o: o["note"] is None),
        "emoji": pick(lambda o: has_emoji(o["note"]), legacy=False),
        "emoji_legacy": pick(lambda o: has_emoji(o["note"]), legacy=True),
        "cjk": pick(lambda o: has_cjk(o["note"])),
        "quotes": pick(lambda o: o["note"] is not None and "'" in o["note"] and "\\" in o["note"]),
        "empty_note": pick(lambda o: o["note"] == ""),
    }
    for x in SUMMARY["legacy_lookalikes"]:
        o = REF[x["order_id"]]
        if ds_of_shard(shard_of(o["order_id"], x["looks_like_channel"])) != o["ds"]:
            p["lookalike"] = o
            break
    return p


# ------------------------------------------------------------------------------------------
# What an application observes about one statement
# ------------------------------------------------------------------------------------------
def typed(rows):
    if rows is None:
        return None
    return [tuple((type(v).__name__, v) for v in r) for r in rows]


def outcome(conn, sql, args=None, prepared=True):
    cur = conn.cursor(prepared=prepared)
    try:
        pexec(cur, sql, args)
        rows = cur.fetchall() if cur.with_rows else None
        return {"description": cur.description, "rows": typed(rows), "rowcount": cur.rowcount,
                "lastrowid": cur.lastrowid, "warnings": cur.warning_count}
    except mysql.connector.Error as e:
        return {"error": (type(e).__name__, e.errno, e.msg)}
    finally:
        cur.close()


def compare(name, pconn, dconn, sql, shard, args=None, prepared=True, direct_sql=None):
    dsql = direct_sql or physical_sql(sql, shard)
    d = outcome(dconn, dsql, args, prepared)
    p = outcome(pconn, sql, args, prepared)
    ctx = "statement: %s\ndirect (shard %d, %s): %s\nargs: %s" % (sql, shard, ds_of_shard(shard), dsql, short(args))
    if "error" in d:
        return check(name, False, "direct run failed (test bug): %s\n%s" % (d["error"], ctx))
    return check_eq(name, p, d, ctx)


def id_variants(oid, pure=True):
    v = [("int", oid), ("str", str(oid))]
    return v + [("Decimal", decimal.Decimal(oid))] if pure else v


# The C extension corrupts its own heap when it binds decimal.Decimal parameters of a prepared
# statement (glibc aborts with "corrupted size vs. prev_size" within a few hundred executions,
# directly against MariaDB as well; seen with 8.0.33, 8.4.0, 9.1.0 and 9.5.0). So the cext
# runs send Decimal values as str, and its id variants leave Decimal out.
def _is_cext_prepared(cur):
    return type(cur).__name__.startswith("CMySQLCursorPrepared")


def cext_safe(args):
    if isinstance(args, (list, tuple)):
        return type(args)(str(a) if isinstance(a, decimal.Decimal) else a for a in args)
    return args


def pexec(cur, sql, args=None):
    if args is not None and _is_cext_prepared(cur):
        args = cext_safe(args)
    return cur.execute(sql, args)


def pexecmany(cur, sql, seq):
    if _is_cext_prepared(cur):
        seq = [cext_safe(a) for a in seq]
    return cur.executemany(sql, seq)


# ------------------------------------------------------------------------------------------
# Groups of checks
# ------------------------------------------------------------------------------------------
def g_prepare_metadata():
    """The prepare answer itself (pure implementation: cmd_stmt_prepare returns the parameter
    and column definitions): same count and definitions as a direct prepare."""
    pc = proxy_conn(True)
    dc = direct_conn("ds0", True)
    stmts = [
        "SELECT * FROM t_order WHERE order_id = ?",
        "SELECT order_id, amount * ? AS x, note FROM t_order WHERE order_id = ? AND status <> ?",
        INSERT_SQL,
        "UPDATE t_order SET note = ?, amount = ? WHERE order_id = ?",
        "DELETE FROM t_order WHERE order_id = ?",
        "SELECT i.sku, i.qty, o.amount FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id WHERE o.order_id = ?",
    ]
    for sql in stmts:
        p = pc.cmd_stmt_prepare(sql.encode())
        d = dc.cmd_stmt_prepare(physical_sql(sql, 0).encode())
        got = {k: p[k] for k in ("num_params", "num_columns", "parameters", "columns", "warning_count")}
        exp = {k: d[k] for k in ("num_params", "num_columns", "parameters", "columns", "warning_count")}
        check_eq("pure: COM_STMT_PREPARE answer (parameter/column definitions) %s" % sql, got, exp)
        pc.cmd_stmt_close(p["statement_id"])
        dc.cmd_stmt_close(d["statement_id"])
    pc.close()
    dc.close()


def g_point_selects(pure, p):
    m = mode_name(pure)
    pc = proxy_conn(pure)
    dcs = {ds: direct_conn(ds, pure) for ds in DS_PORTS}
    for key in sorted(p):
        o = p[key]
        for tname, v in id_variants(o["order_id"], pure):
            compare("%s: prepared SELECT * by %s id (%s) as %s" % (m, key, o["ds"], tname), pc, dcs[o["ds"]],
                    "SELECT * FROM t_order WHERE order_id = ?", o["shard"], (v,))
    o = p["emoji"]
    compare("%s: prepared SELECT named columns, CAST(note AS BINARY), emoji" % m, pc, dcs[o["ds"]],
            "SELECT order_id, user_id, amount, created_at, note, CAST(note AS BINARY) AS raw, region "
            "FROM t_order WHERE order_id = ?", o["shard"], (o["order_id"],))
    # Python types and values as the application sees them, independently of the direct run.
    cur = pc.cursor(prepared=True)
    pexec(cur, "SELECT order_id, user_id, amount, created_at, note, CAST(note AS BINARY) FROM t_order "
                "WHERE order_id = ?", (str(o["order_id"]),))
    r = cur.fetchall()
    cur.close()
    r = [tuple(bytes(v) if isinstance(v, bytearray) else v for v in x) for x in r]  # cext: bytearray
    exp = [(o["order_id"], o["user_id"], o["amount"], o["created_at"], o["note"], o["note"].encode())]
    check_eq("%s: prepared values/types equal the reference copy (int, Decimal, datetime(3), emoji str, bytes)" % m,
             typed(r), typed(exp))
    for c in [pc] + list(dcs.values()):
        c.rollback()
        c.close()


def g_repeated(pure, p):
    """One prepared statement executed again and again (one cursor, same operation object),
    alternating datasources, id types and legacy/new ids."""
    m = mode_name(pure)
    pc = proxy_conn(pure)
    dcs = {ds: direct_conn(ds, pure) for ds in DS_PORTS}
    sql = "SELECT order_id, channel, amount, note, created_at FROM t_order WHERE order_id = ?"
    pcur = pc.cursor(prepared=True)
    dcurs = {}
    keys = ["new_ds0", "new_ds1", "legacy_ds0", "legacy_ds1", "lookalike", "emoji", "cjk", "null_note"]
    bad = []
    n = 0
    for rnd in range(3):
        for i, key in enumerate(keys):
            o = p[key]
            variants = id_variants(o["order_id"], pure)
            tname, v = variants[(i + rnd) % len(variants)]
            dsql = physical_sql(sql, o["shard"])
            dcur = dcurs.get(dsql)
            if dcur is None:
                dcur = dcurs[dsql] = dcs[o["ds"]].cursor(prepared=True)
            try:
                pexec(pcur, sql, (v,))
                got = (typed(pcur.fetchall()), pcur.description)
            except mysql.connector.Error as e:
                got = ("error", e.errno, e.msg)
            pexec(dcur, dsql, (v,))
            exp = (typed(dcur.fetchall()), dcur.description)
            n += 1
            if got != exp:
                bad.append("round %d %s id %s as %s:\n  proxy : %s\n  direct: %s" % (rnd, key, o["order_id"], tname,
                                                                                   short(got), short(exp)))
    check("%s: one prepared statement executed %d times over both datasources (new, legacy, int/str(/Decimal) ids)"
          % (m, n), not bad, "\n".join(bad[:5]))
    # Several statements prepared at once on one connection, executions interleaved.
    sqls = ["SELECT note FROM t_order WHERE order_id = ?",
            "SELECT amount, created_at FROM t_order WHERE order_id = ?",
            "SELECT COUNT(*) FROM t_order_item WHERE order_id = ?"]
    curs = [pc.cursor(prepared=True) for _ in sqls]
    bad = []
    for rnd in range(2):
        for key in ("new_ds0", "legacy_ds1", "new_ds1", "legacy_ds0"):
            o = p[key]
            for cur, s in zip(curs, sqls):
                pexec(cur, s, (o["order_id"],))
                got = typed(cur.fetchall())
                dcur = dcs[o["ds"]].cursor(prepared=True)
                pexec(dcur, physical_sql(s, o["shard"]), (o["order_id"],))
                exp = typed(dcur.fetchall())
                dcur.close()
                if got != exp:
                    bad.append("%s %s: proxy %s direct %s" % (s, key, short(got), short(exp)))
    check("%s: three statements prepared on one connection, executions interleaved over both datasources" % m,
          not bad, "\n".join(bad[:5]))
    for cur in curs + [pcur] + list(dcurs.values()):
        cur.close()
    # A statement closed and prepared again (new cursor, same text).
    o = p["new_ds1"]
    for i in range(3):
        compare("%s: statement prepared again after COM_STMT_CLOSE (#%d)" % (m, i + 1), pc, dcs[o["ds"]],
                "SELECT * FROM t_order WHERE order_id = ?", o["shard"], (o["order_id"],))
    for c in [pc] + list(dcs.values()):
        c.rollback()
        c.close()


def g_expressions(pure, p):
    m = mode_name(pure)
    pc = proxy_conn(pure)
    dcs = {ds: direct_conn(ds, pure) for ds in DS_PORTS}
    o = p["new_ds1"]
    compare("%s: prepared SELECT with expressions (decimal*2, datetime+interval, binary, date, time, /, NULL, double)" % m,
            pc, dcs[o["ds"]],
            "SELECT o.order_id AS id, o.note AS remark, o.amount * 2 AS dbl, o.created_at + INTERVAL 1 SECOND AS later, "
            "CAST(o.note AS BINARY) AS raw, DATE(o.created_at) AS d, TIME(o.created_at) AS t, o.user_id / 3 AS third, "
            "NULL AS nothing, CAST(o.amount AS DOUBLE) AS dbl_amount, o.order_id + 0 AS id_expr, ? AS param_echo "
            "FROM t_order AS o WHERE o.order_id = ?", o["shard"], ("echo \u00e9\U0001F600", o["order_id"]))
    compare("%s: prepared SELECT with a large generated value (REPEAT, 2 kB+ text and blob)" % m, pc, dcs[o["ds"]],
            "SELECT order_id, CAST(REPEAT(COALESCE(note, 'x'), 300) AS BINARY) AS big_blob, "
            "REPEAT(COALESCE(note, 'y'), 300) AS big_text FROM t_order WHERE order_id = ?", o["shard"], (o["order_id"],))
    compare("%s: prepared aggregate on one order" % m, pc, dcs[o["ds"]],
            "SELECT COUNT(*), SUM(amount), MAX(created_at) FROM t_order WHERE order_id = ?", o["shard"], (o["order_id"],))
    items = admin_query("ds0", "SELECT order_id FROM orders_ref.t_order_item GROUP BY order_id HAVING COUNT(*) >= 2 "
                               "ORDER BY order_id")
    done = set()
    for (oid,) in items:
        o = REF[oid]
        if o["ds"] in done:
            continue
        done.add(o["ds"])
        compare("%s: prepared JOIN t_order/t_order_item (%s)" % (m, o["ds"]), pc, dcs[o["ds"]],
                "SELECT o.order_id, o.note, i.item_no, i.sku, i.qty, i.price FROM t_order o JOIN t_order_item i "
                "ON i.order_id = o.order_id WHERE o.order_id = ? ORDER BY i.item_no", o["shard"], (str(oid),))
        compare("%s: prepared SELECT * FROM t_order_item (%s)" % (m, o["ds"]), pc, dcs[o["ds"]],
                "SELECT * FROM t_order_item WHERE order_id = ? ORDER BY item_no", o["shard"], (oid,))
    # IN list over both datasources: rows equal the union of the direct answers.
    keys = ("new_ds0", "new_ds1", "legacy_ds0", "legacy_ds1")
    sql = "SELECT order_id, channel, amount, note, created_at FROM t_order WHERE order_id IN (?, ?, ?, ?)"
    cur = pc.cursor(prepared=True)
    pexec(cur, sql, tuple(p[k]["order_id"] for k in keys))
    got = sorted(typed(cur.fetchall()), key=repr)
    desc = cur.description
    cur.close()
    exp = []
    for k in keys:
        o = p[k]
        d = outcome(dcs[o["ds"]], physical_sql(sql, o["shard"]).replace("IN (?, ?, ?, ?)", "= ?"), (o["order_id"],))
        exp += d["rows"]
        edesc = d["description"]
    check_eq("%s: prepared IN (?, ?, ?, ?) over both datasources: rows" % m, got, sorted(exp, key=repr), sql)
    check_eq("%s: prepared IN (?, ?, ?, ?) over both datasources: description" % m, desc, edesc, sql)
    # Ids nothing resolves, and NULL ids: MySQL's empty answers.
    unknown = fresh_legacy_id()
    compare("%s: prepared SELECT * by an unknown legacy id (empty result)" % m, pc, dcs["ds0"],
            "SELECT * FROM t_order WHERE order_id = ?", 0, (unknown,))
    compare("%s: prepared COUNT/SUM/MAX by an unknown legacy id" % m, pc, dcs["ds1"],
            "SELECT COUNT(*), SUM(amount), MAX(created_at) FROM t_order WHERE order_id = ?", 19, (str(unknown),))
    compare("%s: prepared SELECT * with a NULL id (empty result)" % m, pc, dcs["ds0"],
            "SELECT * FROM t_order WHERE order_id = ?", 0, (None,))
    compare("%s: prepared COUNT(*) with a NULL id" % m, pc, dcs["ds0"],
            "SELECT COUNT(*) FROM t_order WHERE order_id = ?", 0, (None,))
    for c in [pc] + list(dcs.values()):
        c.rollback()
        c.close()


def new_row(oid, channel, note="mysqlconnector test row \u00e9\U0001F680 '\\\"", amount="12.34", offset_s=0):
    region = CHANNELS[channel]["regions"][0]
    created = datetime.datetime(2025, 3, 4, 5, 6, 7, 891000) + datetime.timedelta(seconds=offset_s)
    return (oid, channel, region, 42, decimal.Decimal(amount), "CREATED", note, created)


def check_placed(name, oid, channel, row=None, table="t_order"):
    shard = shard_of(oid, channel)
    where = shards_holding(oid, table)
    ok = check("%s: placed on shard %d only" % (name, shard), where == [shard], "held by shards %s" % where)
    if ok and row is not None:
        check_eq("%s: physical row equals what was written" % name, physical_row(oid, shard), row)


def g_writes(pure):
    """INSERT / UPDATE / DELETE through prepared cursors, checked on the physical tables, with
    what the connector reports compared with the same statement on a twin row run directly."""
    m = mode_name(pure)
    pc = proxy_conn(pure)
    for channel, ds in (("EU_CHANNEL", "ds0"), ("BIZ_CHANNEL", "ds1")):
        dc = direct_conn(ds, pure)
        oid = fresh_new_id(channel)
        twin = fresh_new_id(channel, oid % 4)
        shard = shard_of(oid, channel)
        row = new_row(oid, channel)
        p = outcome(pc, INSERT_SQL, row)
        pc.commit()
        d = outcome(dc, physical_sql(INSERT_SQL, shard), (twin,) + row[1:])
        dc.commit()
        check_eq("%s: prepared INSERT %s (%s): rowcount/lastrowid/warnings" % (m, channel, ds), p, d)
        check_placed("%s: prepared INSERT %s" % (m, channel), oid, channel, row)
        # UPDATE by id as str, then a no-op UPDATE (FOUND_ROWS is among the connector's default flags).
        upd = "UPDATE t_order SET note = ?, amount = ? WHERE order_id = ?"
        args = ("updated \u4e2d\u6587 \U0001F600", decimal.Decimal("99.95"))
        p = outcome(pc, upd, args + (str(oid),))
        pc.commit()
        d = outcome(dc, physical_sql(upd, shard), args + (str(twin),))
        dc.commit()
        check_eq("%s: prepared UPDATE by str id (%s): rowcount/warnings" % (m, ds), p, d)
        check_eq("%s: prepared UPDATE (%s): physical row" % (m, ds), physical_row(oid, shard),
                 row[:4] + (decimal.Decimal("99.95"), row[5], args[0], row[7]))
        p = outcome(pc, upd, args + (decimal.Decimal(oid),))
        pc.commit()
        d = outcome(dc, physical_sql(upd, shard), args + (decimal.Decimal(twin),))
        dc.commit()
        check_eq("%s: prepared no-op UPDATE by Decimal id (%s): rowcount (found rows)" % (m, ds), p, d)
        # UPDATE / DELETE with a NULL id: nothing matched.
        p = outcome(pc, upd, args + (None,))
        d = outcome(dc, physical_sql(upd, shard), args + (None,))
        pc.rollback()
        dc.rollback()
        check_eq("%s: prepared UPDATE with a NULL id (%s): 0 rows" % (m, ds), p, d)
        p = outcome(pc, "DELETE FROM t_order WHERE order_id = ?", (None,))
        d = outcome(dc, physical_sql("DELETE FROM t_order WHERE order_id = ?", shard), (None,))
        pc.rollback()
        dc.rollback()
        check_eq("%s: prepared DELETE with a NULL id (%s): 0 rows" % (m, ds), p, d)
        # An item in the same transaction (same datasource), then DELETE of both by Decimal id.
        item_sql = "INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES (?, ?, ?, ?, ?)"
        p = outcome(pc, item_sql, (oid, 1, "SKU-\u00e9", 3, decimal.Decimal("1.50")))
        pc.commit()
        check_eq("%s: prepared INSERT t_order_item (%s): rowcount" % (m, ds), p["rowcount"] if "rowcount" in p else p, 1)
        check_placed("%s: prepared INSERT t_order_item" % m, oid, channel, None, "t_order_item")
        p1 = outcome(pc, "DELETE FROM t_order_item WHERE order_id = ?", (decimal.Decimal(oid),))
        p2 = outcome(pc, "DELETE FROM t_order WHERE order_id = ?", (decimal.Decimal(oid),))
        pc.commit()
        d = outcome(dc, physical_sql("DELETE FROM t_order WHERE order_id = ?", shard), (decimal.Decimal(twin),))
        dc.commit()
        check_eq("%s: prepared DELETE by Decimal id (%s): rowcount/warnings" % (m, ds), p2, d)
        check_eq("%s: prepared DELETE t_order_item (%s): rowcount" % (m, ds), p1.get("rowcount", p1), 1)
        check("%s: prepared DELETE (%s): no row left on any shard" % (m, ds),
              shards_holding(oid) == [] and shards_holding(oid, "t_order_item") == [],
              "order on %s, items on %s" % (shards_holding(oid), shards_holding(oid, "t_order_item")))
        dc.close()
    # A legacy id (no route key): the INSERT names the channel, the proxy writes the index row.
    oid = fresh_legacy_id()
    row = new_row(oid, "CORP_CHANNEL", note="legacy insert")
    p = outcome(pc, INSERT_SQL, row)
    pc.commit()
    check_eq("%s: prepared INSERT with a legacy id: rowcount" % m, p.get("rowcount", p), 1)
    check_placed("%s: prepared INSERT with a legacy id" % m, oid, "CORP_CHANNEL", row)
    check_eq("%s: prepared INSERT with a legacy id: index row" % m, index_channel(oid), "CORP_CHANNEL")
    p = outcome(pc, "UPDATE t_order SET status = ? WHERE order_id = ?", ("PAID", str(oid)))
    pc.commit()
    check_eq("%s: prepared UPDATE by legacy id (routed by the index): rowcount" % m, p.get("rowcount", p), 1)
    check_eq("%s: prepared UPDATE by legacy id: physical row" % m,
             physical_row(oid, shard_of(oid, "CORP_CHANNEL")), row[:5] + ("PAID",) + row[6:])
    p = outcome(pc, "DELETE FROM t_order WHERE order_id = ?", (oid,))
    pc.commit()
    check_eq("%s: prepared DELETE by legacy id: rowcount" % m, p.get("rowcount", p), 1)
    check_eq("%s: prepared DELETE by legacy id: gone" % m, shards_holding(oid), [])
    # An INSERT with a NULL id is refused (no id issuance yet); the connection stays usable.
    p = outcome(pc, INSERT_SQL, (None,) + new_row(0, "EU_CHANNEL")[1:])
    pc.rollback()
    check("%s: prepared INSERT with a NULL id is refused with an error" % m, "error" in p, short(p))
    o = REF[sorted(REF)[0]]
    q = outcome(pc, "SELECT order_id FROM t_order WHERE order_id = ?", (o["order_id"],))
    check_eq("%s: connection usable after the refused INSERT" % m, q.get("rows"), [(("int", o["order_id"]),)])
    pc.rollback()
    pc.close()


def g_multirow(pure):
    m = mode_name(pure)
    pc = proxy_conn(pure)
    # Three rows on three BIZ shards (all ds1): split by shard, affected rows summed.
    ids = [fresh_new_id("BIZ_CHANNEL", k) for k in (0, 1, 2)]
    rows = [new_row(i, "BIZ_CHANNEL", note="multirow %d" % n, offset_s=n) for n, i in enumerate(ids)]
    sql = "INSERT INTO t_order (%s) VALUES %s" % (COLS, ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * 3))
    p = outcome(pc, sql, tuple(v for r in rows for v in r))
    pc.commit()
    check_eq("%s: prepared 3-row INSERT over 3 shards of ds1: rowcount summed" % m, p.get("rowcount", p), 3)
    for r in rows:
        check_placed("%s: prepared 3-row INSERT, id %d" % (m, r[0]), r[0], "BIZ_CHANNEL", r)
    # Rows on both datasources in one statement: refused with 1235, nothing written.
    a, b = fresh_new_id("EU_CHANNEL"), fresh_new_id("CORP_CHANNEL")
    sql2 = "INSERT INTO t_order (%s) VALUES %s" % (COLS, ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * 2))
    p = outcome(pc, sql2, new_row(a, "EU_CHANNEL") + new_row(b, "CORP_CHANNEL"))
    pc.rollback()
    check_eq("%s: prepared 2-row INSERT over ds0 and ds1: refused with 1235" % m,
             p.get("error", (None, None))[1], 1235, short(p))
    check_eq("%s: refused cross-datasource INSERT wrote nothing" % m, shards_holding(a) + shards_holding(b), [])
    p = outcome(pc, "DELETE FROM t_order WHERE order_id IN (?, ?, ?)", tuple(ids))
    pc.commit()
    check_eq("%s: prepared DELETE ... IN (?, ?, ?) over 3 shards: rowcount" % m, p.get("rowcount", p), 3)
    pc.close()


def executemany_rowcount_direct(pure, n):
    """What this implementation reports for an executemany of n one-row statements run
    directly (the C extension's prepared executemany reports -n: a connector quirk)."""
    dc = direct_conn("ds0", pure)
    cur = dc.cursor(prepared=True)
    pexec(cur, "CREATE TEMPORARY TABLE rk_em (a INT)")
    pexecmany(cur, "INSERT INTO rk_em VALUES (?)", [(i,) for i in range(n)])
    rc = cur.rowcount
    cur.close()
    dc.rollback()
    dc.close()
    return rc


def g_executemany(pure):
    m = mode_name(pure)
    pc = proxy_conn(pure)
    exp4 = executemany_rowcount_direct(pure, 4)
    ids = [fresh_new_id("EU_CHANNEL", k) for k in (0, 1, 2, 3)]
    rows = [new_row(i, "EU_CHANNEL", note="executemany %d" % n, offset_s=n) for n, i in enumerate(ids)]
    cur = pc.cursor(prepared=True)
    pexecmany(cur, INSERT_SQL, rows)
    check_eq("%s: prepared executemany INSERT of 4 rows (4 shards, ds0): rowcount" % m, cur.rowcount,exp4)
    pc.commit()
    for r in rows:
        check_placed("%s: prepared executemany INSERT, id %d" % (m, r[0]), r[0], "EU_CHANNEL", r)
    pexecmany(cur, "UPDATE t_order SET status = ? WHERE order_id = ?", [("SHIPPED", str(i)) for i in ids])
    check_eq("%s: prepared executemany UPDATE by str ids: rowcount" % m, cur.rowcount,exp4)
    pc.commit()
    check("%s: prepared executemany UPDATE: physical rows" % m,
          all(physical_row(i, shard_of(i, "EU_CHANNEL"))[5] == "SHIPPED" for i in ids))
    # Rows on both datasources in one transaction (autocommit is off): the second is refused.
    a, b = fresh_new_id("GLOBAL_CHANNEL"), fresh_new_id("CORP_CHANNEL")
    err = None
    try:
        pexecmany(cur, INSERT_SQL, [new_row(a, "GLOBAL_CHANNEL"), new_row(b, "CORP_CHANNEL")])
    except mysql.connector.Error as e:
        err = (e.errno, e.msg)
    pc.rollback()
    check_eq("%s: prepared executemany over ds0 then ds1 in one transaction: 1235" % m, (err or (None,))[0], 1235,
             short(err))
    check_eq("%s: ... and after ROLLBACK nothing is written" % m, shards_holding(a) + shards_holding(b), [])
    pexecmany(cur, "DELETE FROM t_order WHERE order_id = ?", [(decimal.Decimal(i),) for i in ids])
    check_eq("%s: prepared executemany DELETE by Decimal ids: rowcount" % m, cur.rowcount,exp4)
    pc.commit()
    check_eq("%s: prepared executemany DELETE: gone" % m, [shards_holding(i) for i in ids], [[]] * 4)
    cur.close()
    pc.close()


def g_defaults_and_transactions(pure):
    m = mode_name(pure)
    pc = proxy_conn(pure)
    dc = direct_conn("ds1", pure)
    check_eq("%s: connector default autocommit is off through the proxy" % m, pc.autocommit, dc.autocommit)
    sql = ("SELECT @@autocommit, @@character_set_client, @@character_set_connection, @@character_set_results, "
           "@@collation_connection, @@time_zone")
    for prepared in (False, True):
        compare("%s: session settings after connect (%s)" % (m, "prepared" if prepared else "text"),
                pc, dc, sql, 10, None, prepared, direct_sql=sql)
    check_eq("%s: connection.charset/collation as negotiated" % m, (pc.charset, pc.collation), (dc.charset, dc.collation))
    try:
        pc.ping(reconnect=False)
        ok = True
    except Exception as e:
        ok = repr(e)
    check_eq("%s: COM_PING" % m, ok, True)
    dc.rollback()
    dc.close()
    # Uncommitted, rolled back, then committed.
    oid = fresh_new_id("CORP_CHANNEL")
    shard = shard_of(oid, "CORP_CHANNEL")
    row = new_row(oid, "CORP_CHANNEL", note="tx row")
    cur = pc.cursor(prepared=True)
    pexec(cur, INSERT_SQL, row)
    check_eq("%s: INSERT inside the implicit transaction: not visible to others before COMMIT" % m,
             shards_holding(oid), [])
    pexec(cur, "SELECT note FROM t_order WHERE order_id = ?", (oid,))
    check_eq("%s: ... but visible to the same transaction" % m, cur.fetchall(), [("tx row",)])
    pc.rollback()
    pexec(cur, "SELECT note FROM t_order WHERE order_id = ?", (oid,))
    check_eq("%s: ROLLBACK: the row is gone (proxy read)" % m, cur.fetchall(), [])
    check_eq("%s: ROLLBACK: the row is gone (physical)" % m, shards_holding(oid), [])
    pexec(cur, INSERT_SQL, row)
    pexec(cur, "UPDATE t_order SET status = ? WHERE order_id = ?", ("PAID", oid))
    pc.commit()
    check_eq("%s: COMMIT: INSERT + UPDATE landed" % m, physical_row(oid, shard), row[:5] + ("PAID",) + row[6:])
    # Autocommit switched on by the application.
    pc.autocommit = True
    pexec(cur, "UPDATE t_order SET status = ? WHERE order_id = ?", ("DONE", str(oid)))
    check_eq("%s: autocommit=True: UPDATE visible at once" % m, physical_row(oid, shard)[5], "DONE")
    pc.autocommit = False
    pexec(cur, "DELETE FROM t_order WHERE order_id = ?", (oid,))
    pc.commit()
    check_eq("%s: DELETE committed" % m, shards_holding(oid), [])
    # A SELECT without an order id is a scatter read: every shard, rows merged as the
    # unsharded reference database (orders_ref on ds0) answers the same SQL.
    users = scatter_users()
    rc = direct_conn("ds0", pure, database="orders_ref")
    for sql, args in (
            ("SELECT * FROM t_order WHERE user_id = ? ORDER BY order_id", (users[0],)),
            ("SELECT order_id, amount, note FROM t_order WHERE user_id = ? ORDER BY amount DESC, order_id LIMIT 3",
             (users[0],)),
            ("SELECT COUNT(*), SUM(amount), MIN(created_at), MAX(note) FROM t_order WHERE user_id = ?", (users[0],)),
            ("SELECT channel, COUNT(*) FROM t_order WHERE user_id IN (?, ?) GROUP BY channel ORDER BY channel",
             (users[0], users[1]))):
        for prepared in (True, False):
            q = sql if prepared else sql.replace("?", "%s")
            compare("%s: %s SELECT without an order id (scatter) equals orders_ref: %s"
                    % (m, "prepared" if prepared else "text", sql), pc, rc, q, 0, args, prepared, direct_sql=q)
    rc.rollback()
    rc.close()
    pc.rollback()
    # A scatter UPDATE is still refused (scatter_writes = "refuse"): 1235, and the connection
    # stays usable.
    err = None
    try:
        pexec(cur, "UPDATE t_order SET amount = amount WHERE user_id = ?", (users[0],))
    except mysql.connector.Error as e:
        err = e.errno
    check_eq("%s: prepared UPDATE without an order id: 1235" % m, err, 1235)
    pc.rollback()
    o = REF[sorted(REF)[-1]]
    cur2 = pc.cursor(prepared=True)
    pexec(cur2, "SELECT order_id FROM t_order WHERE order_id = ?", (o["order_id"],))
    check_eq("%s: connection usable after the 1235" % m, cur2.fetchall(), [(o["order_id"],)])
    cur2.close()
    cur.close()
    pc.rollback()
    pc.close()


def g_text_cursor(pure, p):
    """The connector's plain cursor with its defaults (client-side %s interpolation, text protocol)."""
    m = mode_name(pure)
    pc = proxy_conn(pure)
    dcs = {ds: direct_conn(ds, pure) for ds in DS_PORTS}
    for key in ("new_ds0", "new_ds1", "legacy_ds0", "legacy_ds1", "lookalike", "emoji", "cjk", "quotes", "null_note"):
        o = p[key]
        for tname, v in id_variants(o["order_id"]):
            compare("%s: text cursor SELECT * by %s id as %s" % (m, key, tname), pc, dcs[o["ds"]],
                    "SELECT * FROM t_order WHERE order_id = %s", o["shard"], (v,), prepared=False)
    # executemany INSERT: the connector rewrites it into one multi-row INSERT (split by shard).
    ids = [fresh_new_id("CN_CHANNEL", k) for k in (2, 3)]  # shards 10, 11: both on ds1
    rows = [new_row(i, "CN_CHANNEL", note="text executemany %d \U0001F389" % n) for n, i in enumerate(ids)]
    cur = pc.cursor()
    pexecmany(cur, "INSERT INTO t_order (%s) VALUES (%%s, %%s, %%s, %%s, %%s, %%s, %%s, %%s)" % COLS, rows)
    check_eq("%s: text executemany INSERT of 2 rows (2 shards, ds1): rowcount" % m, cur.rowcount, 2)
    pc.commit()
    for r in rows:
        check_placed("%s: text executemany INSERT, id %d" % (m, r[0]), r[0], "CN_CHANNEL", r)
    pexec(cur, "UPDATE t_order SET note = %s WHERE order_id = %s", ("it's a \\ test", ids[0]))
    check_eq("%s: text UPDATE: rowcount" % m, cur.rowcount, 1)
    pc.commit()
    check_eq("%s: text UPDATE: physical note" % m, physical_row(ids[0], shard_of(ids[0], "CN_CHANNEL"))[6],
             "it's a \\ test")
    pexec(cur, "DELETE FROM t_order WHERE order_id IN (%s, %s)", tuple(str(i) for i in ids))
    check_eq("%s: text DELETE IN (...): rowcount" % m, cur.rowcount, 2)
    pc.commit()
    check_eq("%s: text DELETE: gone" % m, [shards_holding(i) for i in ids], [[], []])
    cur.close()
    for c in [pc] + list(dcs.values()):
        c.rollback()
        c.close()


def g_long_data(p):
    """COM_STMT_SEND_LONG_DATA: the pure implementation sends a file-like parameter in 128 kB
    chunks (the C extension cannot: it raises for io objects)."""
    pc = proxy_conn(True)
    o = p["new_ds1"]
    dc = direct_conn(o["ds"], True)
    rnd = random.Random(7)
    big = bytes(rnd.randrange(256) for _ in range(400 * 1024))  # 4 chunks
    sql = "SELECT order_id, ? AS big, LENGTH(?) AS len, SHA2(?, 256) AS sha FROM t_order WHERE order_id = ?"
    pcur = pc.cursor(prepared=True)
    dcur = dc.cursor(prepared=True)
    for n, payload in enumerate((big, big[::-1][:200 * 1024] + b"\x00\xff")):
        pexec(pcur, sql, (io.BytesIO(payload), io.BytesIO(payload), io.BytesIO(payload), o["order_id"]))
        got = (pcur.fetchall(), pcur.description)
        pexec(dcur, physical_sql(sql, o["shard"]), (io.BytesIO(payload), io.BytesIO(payload), io.BytesIO(payload),
                                                   o["order_id"]))
        exp = (dcur.fetchall(), dcur.description)
        check_eq("pure: long data (%d bytes, %d chunks) in a prepared SELECT, execution #%d" %
                 (len(payload), (len(payload) + 131071) // 131072, n + 1), got, exp)
        check("pure: long data execution #%d returns the payload byte for byte" % (n + 1),
              bool(got[0]) and got[0][0][1] == payload and got[0][0][2] == len(payload))
    # The same statement executed without long data afterwards: nothing stale is replayed.
    pexec(pcur, sql, (b"abc", b"abc", b"abc", o["order_id"]))
    got = pcur.fetchall()
    pexec(dcur, physical_sql(sql, o["shard"]), (b"abc", b"abc", b"abc", o["order_id"]))
    check_eq("pure: same statement re-executed with inline values after long data", got, dcur.fetchall())
    pcur.close()
    dcur.close()
    # Long data in a write: a note sent as a stream (utf-8 with emoji) for a fresh row.
    oid = fresh_new_id("GLOBAL_CHANNEL")
    row = new_row(oid, "GLOBAL_CHANNEL", note="placeholder")
    cur = pc.cursor(prepared=True)
    pexec(cur, INSERT_SQL, row)
    note = "long data note \U0001F600 \u4e2d\u6587 'q' \\ " + "x" * 180
    pexec(cur, "UPDATE t_order SET note = ? WHERE order_id = ?", (io.BytesIO(note.encode("utf-8")), oid))
    check_eq("pure: prepared UPDATE with the note as long data: rowcount", cur.rowcount, 1)
    pc.commit()
    check_eq("pure: prepared UPDATE with long data: physical note", physical_row(oid, shard_of(oid, "GLOBAL_CHANNEL")),
             row[:6] + (note,) + row[7:])
    pexec(cur, "DELETE FROM t_order WHERE order_id = ?", (oid,))
    pc.commit()
    cur.close()
    dc.close()
    pc.close()


# Raw protocol through the pure connector's own connection (its handshake, our packets).
def _execute_packet(stmt_id, values, types=None, long_data=()):
    """COM_STMT_EXECUTE payload: values are bytes already encoded (None = NULL); types a list
    of (type, flags) or None for "new params bound = 0"; long_data: indexes sent as long data."""
    n = len(values)
    bitmap = bytearray((n + 7) // 8)
    body = b""
    for i, v in enumerate(values):
        if v is None:
            bitmap[i // 8] |= 1 << (i % 8)
        elif i not in long_data:
            body += v
    pkt = struct.pack("<IBI", stmt_id, 0, 1) + bytes(bitmap)
    if types is None:
        pkt += b"\x00"
    else:
        pkt += b"\x01" + b"".join(struct.pack("<BB", t, f) for t, f in types)
    return pkt + body


def _raw_exec(conn, pkt, columns):
    res = conn._handle_binary_result(conn._send_cmd(ServerCmd.STMT_EXECUTE, packet=pkt))
    if isinstance(res, dict):
        return res
    conn.unread_result = True
    rows, _eof = conn.get_rows(binary=True, columns=res[1])
    return {"rows": typed(rows), "columns": res[1]}


def _lenenc(b):
    assert len(b) < 251
    return bytes([len(b)]) + b


def g_raw_protocol(p):
    """What mysql-connector never sends but the issue requires: re-executions without parameter
    types, unsigned LONGLONG ids, long data followed by COM_STMT_RESET, and parameter type codes
    the proxy's decoding library cannot handle."""
    o = p["new_ds0"]
    lg = p["legacy_ds1"]
    pc = proxy_conn(True)
    if pc._client_flags & ClientFlag.CLIENT_QUERY_ATTRIBUTES:
        skip("raw: COM_STMT_EXECUTE variants", "CLIENT_QUERY_ATTRIBUTES negotiated; packets differ")
        pc.close()
        return
    dcs = {ds: direct_conn(ds, True) for ds in DS_PORTS}
    sql = "SELECT order_id, note, amount FROM t_order WHERE order_id = ?"
    ps = pc.cmd_stmt_prepare(sql.encode())
    dstmts = {}

    def dstmt(obj):
        k = (obj["ds"], obj["shard"])
        if k not in dstmts:
            dstmts[k] = dcs[obj["ds"]].cmd_stmt_prepare(physical_sql(sql, obj["shard"]).encode())
        return dstmts[k]["statement_id"]

    LONGLONG, VAR_STRING, NEWDECIMAL, BLOB = 8, 253, 246, 252
    steps = [
        ("signed LONGLONG", o, [struct.pack("<q", o["order_id"])], [(LONGLONG, 0)]),
        ("no types (re-execution reuses signed LONGLONG)", o, [struct.pack("<q", o["order_id"])], None),
        ("unsigned LONGLONG", lg, [struct.pack("<Q", lg["order_id"])], [(LONGLONG, 0x80)]),
        ("no types (reuses unsigned LONGLONG), other datasource", o, [struct.pack("<Q", o["order_id"])], None),
        ("VAR_STRING", lg, [_lenenc(str(lg["order_id"]).encode())], [(VAR_STRING, 0)]),
        ("no types (reuses VAR_STRING)", o, [_lenenc(str(o["order_id"]).encode())], None),
        ("NEWDECIMAL", lg, [_lenenc(str(lg["order_id"]).encode())], [(NEWDECIMAL, 0)]),
        ("no types (reuses NEWDECIMAL)", o, [_lenenc(str(o["order_id"]).encode())], None),
        ("NULL id", o, [None], [(LONGLONG, 0)]),
        ("no types after NULL (reuses LONGLONG)", lg, [struct.pack("<q", lg["order_id"])], None),
    ]
    current = None
    for label, obj, vals, types in steps:
        current = types or current
        got = _raw_exec(pc, _execute_packet(ps["statement_id"], vals, types), None)
        # Direct: the same values with the types in force sent explicitly (the direct
        # statement differs per shard, so its remembered types are not the proxy's).
        exp = _raw_exec(dcs[obj["ds"]], _execute_packet(dstmt(obj), vals, current), None)
        check_eq("raw: COM_STMT_EXECUTE with %s" % label, got, exp)
    # Long data, COM_STMT_RESET, long data again: only the second reaches the execution.
    sql2 = "SELECT order_id, ? AS v FROM t_order WHERE order_id = ?"
    ps2 = pc.cmd_stmt_prepare(sql2.encode())
    ds2 = dcs[o["ds"]].cmd_stmt_prepare(physical_sql(sql2, o["shard"]).encode())
    results = []
    for conn, sid in ((pc, ps2["statement_id"]), (dcs[o["ds"]], ds2["statement_id"])):
        conn.cmd_stmt_send_long_data(sid, 0, io.BytesIO(b"stale-" * 1000))
        conn.cmd_stmt_reset(sid)
        conn.cmd_stmt_send_long_data(sid, 0, io.BytesIO(b"fresh-" * 30000))
        conn.cmd_stmt_send_long_data(sid, 0, io.BytesIO(b"+tail"))
        pkt = _execute_packet(sid, [b"", struct.pack("<q", o["order_id"])], [(BLOB, 0), (LONGLONG, 0)], long_data=(0,))
        results.append(_raw_exec(conn, pkt, None))
    check_eq("raw: long data, COM_STMT_RESET, long data in two packets: only the data after the reset",
             results[0], results[1])
    check("raw: ... value is the concatenation of the two packets after the reset",
          results[0].get("rows") == [(("int", o["order_id"]), ("bytes", b"fresh-" * 30000 + b"+tail"))],
          short(results[0].get("rows"), 200))
    # Parameter type codes the decoding library cannot handle: an error, never a dropped connection.
    for code, name in ((17, "TIMESTAMP2"), (18, "DATETIME2"), (19, "TIME2"), (20, "TYPED_ARRAY"), (0xF4, "0xF4 (unknown)")):
        pkt = _execute_packet(ps["statement_id"], [b"\x00" * 8], [(code, 0)])
        try:
            res = _raw_exec(pc, pkt, None)
            outcome_ = "answer %s" % short(res, 200)
        except mysql.connector.Error as e:
            outcome_ = "error %s %s" % (e.errno, e.msg)
        alive = True
        try:
            got = _raw_exec(pc, _execute_packet(ps["statement_id"], [struct.pack("<q", o["order_id"])], [(LONGLONG, 0)]),
                            None)
            alive = got.get("rows") == [(("int", o["order_id"]), ("str", o["note"]) if o["note"] is not None
                                         else ("NoneType", None), ("Decimal", o["amount"]))]
        except Exception as e:  # a dropped connection
            alive = repr(e)
        check("raw: parameter type %s refused with an error, connection still serves the statement" % name,
              outcome_.startswith("error") and alive is True, "got: %s; afterwards: %s" % (outcome_, alive))
        if alive is not True:
            pc = proxy_conn(True)
            ps = pc.cmd_stmt_prepare(sql.encode())
    # COM_RESET_CONNECTION deallocates the session's prepared statements (as on the server):
    # executing the old id fails the same way, and a new prepare works.
    res = []
    for conn, sid, obj in ((pc, ps["statement_id"], o), (dcs[o["ds"]], dstmt(o), o)):
        conn.cmd_reset_connection()
        try:
            r = _raw_exec(conn, _execute_packet(sid, [struct.pack("<q", obj["order_id"])], [(LONGLONG, 0)]), None)
            res.append(("answer", r))
        except mysql.connector.Error as e:
            res.append(("error", e.errno, e.sqlstate))
    check_eq("raw: COM_STMT_EXECUTE of a statement id after COM_RESET_CONNECTION", res[0], res[1])
    try:
        ps3 = pc.cmd_stmt_prepare(sql.encode())
        got = _raw_exec(pc, _execute_packet(ps3["statement_id"], [struct.pack("<q", o["order_id"])], [(LONGLONG, 0)]), None)
        got = got.get("rows")
    except mysql.connector.Error as e:
        got = ("error", e.errno, e.msg)
    check_eq("raw: prepare and execute after COM_RESET_CONNECTION", got,
             [(("int", o["order_id"]), ("str", o["note"]) if o["note"] is not None else ("NoneType", None),
               ("Decimal", o["amount"]))])
    for c in [pc] + list(dcs.values()):
        try:
            c.close()
        except Exception:
            pass


def proxy_backend_threads(ds):
    """Server thread ids of the proxy's connections to one datasource (None if unknown)."""
    ports = _proxy_backend_ports(DS_PORTS[ds])
    if ports is None:
        return None
    if not ports:
        return []
    rows = admin_query(ds, "SELECT ID FROM information_schema.PROCESSLIST WHERE SUBSTRING_INDEX(HOST, ':', -1) IN (%s)"
                       % ", ".join(str(x) for x in ports))
    return [r[0] for r in rows]


def open_proxy_transactions(ds):
    """InnoDB transactions open on the proxy's backend connections to `ds`."""
    threads = proxy_backend_threads(ds)
    if not threads:
        return threads
    return admin_query(ds, "SELECT trx_mysql_thread_id, trx_state, trx_rows_locked, trx_rows_modified, "
                           "CAST(trx_started AS CHAR) FROM information_schema.innodb_trx "
                           "WHERE trx_mysql_thread_id IN (%s)" % ", ".join(str(t) for t in threads))


def row_lockable(oid, shard, timeout=3):
    """Whether a direct UPDATE of the row gets its lock within `timeout` seconds."""
    c = direct_conn(ds_of_shard(shard), True, autocommit=True)
    try:
        cur = c.cursor()
        cur.execute("SET SESSION innodb_lock_wait_timeout = %d" % timeout)
        cur.execute("UPDATE %s.t_order_%d SET note = note WHERE order_id = %d" % (PHYSICAL_DB, shard, oid))
        return True
    except mysql.connector.Error as e:
        return "%s %s" % (e.errno, e.msg)
    finally:
        c.close()


def g_errors(pure, p):
    """Errors and warnings as MySQL gives them (code, SQLSTATE, message); after each failed
    write the client rolls back (autocommit is off): no lock may stay behind."""
    m = mode_name(pure)
    o = p["new_ds0"]

    def err_of(conn, sql, args):
        cur = conn.cursor(prepared=True)
        try:
            pexec(cur, sql, args)
            if cur.with_rows:
                cur.fetchall()
            return None
        except mysql.connector.Error as e:
            return (e.errno, e.sqlstate, e.msg)
        finally:
            cur.close()
            conn.rollback()

    cases = [
        ("unknown column", "SELECT nope FROM t_order WHERE order_id = ?", (o["order_id"],)),
        ("syntax error after the WHERE", "SELECT * FROM t_order WHERE order_id = ? ORDER BY", (o["order_id"],)),
        ("duplicate key", INSERT_SQL, (o["order_id"],) + new_row(0, o["channel"])[1:]),
        ("value too long for note (strict mode)", "UPDATE t_order SET note = ? WHERE order_id = ?", ("n" * 300, o["order_id"])),
        ("out of range amount", "UPDATE t_order SET amount = ? WHERE order_id = ?", ("1e20", o["order_id"])),
    ]
    # Direct expectations first (a lock the proxy might leave behind must not skew them).
    dc = direct_conn(o["ds"], pure)
    c0 = dc.cursor()
    c0.execute("SET SESSION innodb_lock_wait_timeout = 5")
    c0.close()
    expected = [err_of(dc, physical_sql(sql, o["shard"]), args) for _, sql, args in cases]
    dc.close()
    pc = proxy_conn(pure)
    for (label, sql, args), exp in zip(cases, expected):
        got = err_of(pc, sql, args)
        check_eq("%s: prepared statement error, %s: code, SQLSTATE, message" % (m, label), got, exp, sql)
        if sql.startswith(("INSERT", "UPDATE")):
            # MySQL: after ROLLBACK the session holds no transaction and no lock.
            lockable = row_lockable(o["order_id"], o["shard"])
            trx = open_proxy_transactions(o["ds"])  # after: InnoDB refreshes this view every 0.1 s
            check("%s: after the failed %s and ROLLBACK no transaction stays open on the proxy's backend "
                  "connections, and the row can be locked by others" % (m, label),
                  trx == [] and lockable is True,
                  "statement: %s (connector defaults: autocommit off)\nopen InnoDB transactions on the proxy's "
                  "%s connections (thread, state, rows locked, rows modified, started): %s\ndirect UPDATE of the row "
                  "(innodb_lock_wait_timeout=3): %s" % (sql, o["ds"], trx, lockable))
    check_eq("%s: the row is unchanged after the refused writes" % m, physical_row(o["order_id"], o["shard"]),
             tuple(o[c.strip()] for c in COLS.split(",")))
    # Warnings: count and SHOW WARNINGS content.
    dc = direct_conn(o["ds"], pure)
    pc.get_warnings = True
    dc.get_warnings = True
    sql = "SELECT order_id, 1/0 AS z, CAST('12abc' AS UNSIGNED) AS u FROM t_order WHERE order_id = ?"
    res = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the connector also raises them as Python warnings
        for conn, q in ((pc, sql), (dc, physical_sql(sql, o["shard"]))):
            for prepared in (True, False):
                cur = conn.cursor(prepared=prepared)
                pexec(cur, q.replace("?", "%s") if not prepared else q, (o["order_id"],))
                rows = cur.fetchall()
                res.append((prepared, typed(rows), cur.warning_count, cur.warnings))
                cur.close()
    check_eq("%s: warnings (count and SHOW WARNINGS), prepared and text" % m, res[:2], res[2:], sql)
    pc.get_warnings = False
    cur = pc.cursor(prepared=True)
    pexec(cur, "SELECT order_id FROM t_order WHERE order_id = ?", (o["order_id"],))
    check_eq("%s: connection usable after the errors" % m, cur.fetchall(), [(o["order_id"],)])
    cur.close()
    pc.rollback()
    dc.rollback()
    pc.close()
    dc.close()


def g_collations(pure, p):
    """The collation the application asks for decides the character set ids in the column
    definitions (cursor.description[i][8] here): MariaDB reports the client's collation."""
    m = mode_name(pure)
    o = p["cjk"]
    sql = "SELECT note, channel, CONCAT(region, ?) AS expr, @@collation_connection AS cc FROM t_order WHERE order_id = ?"
    for coll in ("utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin"):
        pc = proxy_conn(pure, charset="utf8mb4", collation=coll)
        dc = direct_conn(o["ds"], pure, charset="utf8mb4", collation=coll)
        for prepared in (True, False):
            q = sql if prepared else sql.replace("?", "%s")
            compare("%s: collation %s, %s: description (charset ids) and values" % (m, coll, "prepared" if prepared else "text"),
                    pc, dc, q, o["shard"], ("-x", o["order_id"]), prepared)
        pc.rollback()
        dc.rollback()
        pc.close()
        dc.close()


def _tcp_table():
    """(local_port, remote_port, state, inode) of every IPv4/IPv6 TCP socket of this machine."""
    out = []
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(f).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            lport = int(parts[1].rsplit(":", 1)[1], 16)
            rport = int(parts[2].rsplit(":", 1)[1], 16)
            out.append((lport, rport, parts[3], parts[9]))
    return out


def _proxy_backend_ports(backend_port):
    """Local ports of the proxy process's established connections to a backend server: the
    proxy is the process that listens on ROUTEKEY_PROXY_PORT."""
    table = _tcp_table()
    listen = {inode for lp, rp, st, inode in table if lp == PROXY_PORT and st == "0A"}
    if not listen:
        return None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = [os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%s/fd" % pid)]
        except OSError:
            continue
        inodes = {x[8:-1] for x in fds if x.startswith("socket:[")}
        if inodes & listen:
            return sorted(lp for lp, rp, st, inode in table if rp == backend_port and st == "01" and inode in inodes)
    return None


def g_backend_replaced(p):
    """The proxy's backend connections are killed on the server (as a restart or wait_timeout
    would): the client's prepared statement keeps working, prepared again on new connections."""
    o = p["new_ds1"]
    pc = proxy_conn(True, autocommit=True)
    cur = pc.cursor(prepared=True)
    sql = "SELECT order_id, note, amount, created_at FROM t_order WHERE order_id = ?"
    pexec(cur, sql, (o["order_id"],))
    before = cur.fetchall()
    check_eq("pure: backend replaced: first execution", before,
             [(o["order_id"], o["note"], o["amount"], o["created_at"])])
    ports = _proxy_backend_ports(DS_PORTS["ds1"])
    if ports is None:
        skip("pure: backend replaced", "cannot find the proxy process from /proc (not root?)")
        pc.close()
        return
    killed = []
    if ports:
        # HOST reads "localhost:PORT" or "127.0.0.1:PORT": match the client port.
        rows = admin_query("ds1", "SELECT ID FROM information_schema.PROCESSLIST WHERE "
                           "SUBSTRING_INDEX(HOST, ':', -1) IN (%s)" % ", ".join(str(x) for x in ports))
        for (tid,) in rows:
            try:
                admin_query("ds1", "KILL CONNECTION %d" % tid)
                killed.append(tid)
            except mysql.connector.Error:
                pass
    if not check("pure: backend replaced: killed the proxy's backend connections to ds1 (%d)" % len(killed),
                 len(killed) > 0, "proxy's local ports to ds1: %s" % ports):
        pc.close()
        return
    # Wait until the kernel has the server's FIN on every killed connection (CLOSE_WAIT on
    # the proxy's side), then a little longer: the proxy has every means to see it.
    deadline = time.time() + 3
    while time.time() < deadline:
        states = {lp: st for lp, rp, st, _ in _tcp_table() if lp in ports and rp == DS_PORTS["ds1"]}
        if all(st != "01" for st in states.values()):
            break
        time.sleep(0.02)
    time.sleep(0.1)
    states = {lp: {"01": "ESTABLISHED", "08": "CLOSE_WAIT"}.get(st, st)
              for lp, rp, st, _ in _tcp_table() if lp in ports and rp == DS_PORTS["ds1"]}
    results = []
    for i in range(3):
        try:
            pexec(cur, sql, (o["order_id"],))
            results.append(cur.fetchall())
        except mysql.connector.Error as e:
            results.append(("error", e.errno, e.msg))
    check_eq("pure: backend replaced: the same prepared statement, executed 3 times after the kill", results,
             [before] * 3, "proxy's killed backend sockets before the execution (local port: state): %s" % states)
    cur2 = pc.cursor(prepared=True)
    try:
        pexec(cur2, "SELECT note FROM t_order WHERE order_id = ?", (o["order_id"],))
        got = cur2.fetchall()
    except mysql.connector.Error as e:
        got = ("error", e.errno, e.msg)
    check_eq("pure: backend replaced: a new prepared statement after the kill", got, [(o["note"],)])
    cur2.close()
    cur.close()
    pc.close()


def main():
    started = time.time()
    import mysql.connector as mc
    print("mysql-connector-python %s, implementations: %s; proxy 127.0.0.1:%d" %
          (mc.__version__, ", ".join(mode_name(x) for x in MODES), PROXY_PORT), flush=True)
    if not HAVE_CEXT:
        skip("cext: all checks", "the C extension is not installed")
    else:
        skip("cext: decimal.Decimal parameters of prepared statements",
             "the C extension corrupts its heap binding them (a connector bug, also direct to MariaDB): "
             "its runs send Decimal values as str")
    load_reference()
    p = picks()
    try:
        run_group("pure: prepare metadata", g_prepare_metadata)
        for pure in MODES:
            m = mode_name(pure)
            run_group(m + ": point selects", g_point_selects, pure, p)
            run_group(m + ": repeated executions", g_repeated, pure, p)
            run_group(m + ": expressions", g_expressions, pure, p)
            run_group(m + ": writes", g_writes, pure)
            run_group(m + ": multi-row", g_multirow, pure)
            run_group(m + ": executemany", g_executemany, pure)
            run_group(m + ": defaults and transactions", g_defaults_and_transactions, pure)
            run_group(m + ": text cursor", g_text_cursor, pure, p)
            run_group(m + ": errors and warnings", g_errors, pure, p)
            run_group(m + ": collations", g_collations, pure, p)
        run_group("pure: long data", g_long_data, p)
        if HAVE_CEXT:
            skip("cext: long data", "the C extension raises InterfaceError for io objects, it never sends "
                                    "COM_STMT_SEND_LONG_DATA (covered by the pure and raw checks)")
        run_group("raw protocol", g_raw_protocol, p)
        run_group("pure: backend replaced", g_backend_replaced, p)
    finally:
        for oid in sorted(CREATED):
            try:
                purge(oid)
            except Exception:
                traceback.print_exc()
    print("")
    if FAILURES:
        print("failed checks:")
        for f in FAILURES:
            print("  - " + f)
    print("mysqlconnector suite ran in %.1fs" % (time.time() - started))
    print("mysqlconnector: %d passed, %d failed, %d skipped" % (RESULTS["pass"], RESULTS["fail"], RESULTS["skip"]))
    return 1 if RESULTS["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
