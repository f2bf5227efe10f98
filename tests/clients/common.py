"""Shared helpers for the real-client tests (mariadb CLI and PyMySQL) of routekey-proxy.

The tests compare what a client sees through the proxy with what the same client sees when it
runs the equivalent *physical* statement directly on the shard's MariaDB server. Everything
here reads its settings from the environment that scripts/client-tests.sh sets:

  ROUTEKEY_PROXY_PORT    port of the proxy under test (127.0.0.1)
  ROUTEKEY_DS0_PORT      ds0 server (shards 0-9), default 33061
  ROUTEKEY_DS1_PORT      ds1 server (shards 10-19), default 33062
  ROUTEKEY_SANDBOX_DIR   sandbox folder holding seed-summary.json (default <repo>/.sandbox)
"""

import json
import os
import random
import re
import time
import unicodedata
from functools import lru_cache
from pathlib import Path

import pymysql

REPO_ROOT = Path(__file__).resolve().parents[2]
SANDBOX_DIR = Path(os.environ.get("ROUTEKEY_SANDBOX_DIR") or REPO_ROOT / ".sandbox").resolve()
HOST = "127.0.0.1"
PROXY_PORT = int(os.environ.get("ROUTEKEY_PROXY_PORT", "3307"))
DS_PORTS = {
    "ds0": int(os.environ.get("ROUTEKEY_DS0_PORT", "33061")),
    "ds1": int(os.environ.get("ROUTEKEY_DS1_PORT", "33062")),
}
PROXY_USER, PROXY_PASSWORD = "app", "app"
LOGICAL_DB = "orders"
PHYSICAL_DB = "order_shards"
SHARDS_PER_CHANNEL = 4
SNOWFLAKE_EPOCH_MS = 1288834974657
INDEX_TABLE = "order_meta.t_order_index"  # on ds0
REF_DB = "orders_ref"  # on ds0, every seeded order unsharded

ORDER_COLUMNS = "order_id, channel, region, user_id, amount, status, note, created_at"


# --------------------------------------------------------------------------------------------
# Seed data and topology
# --------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def summary():
    with open(SANDBOX_DIR / "seed-summary.json", encoding="utf-8") as f:
        return json.load(f)


def channels():
    return summary()["channels"]


def base_shard(channel):
    return channels()[channel]["base_shard"]


def channel_code(channel):
    return channels()[channel]["code"]


def shard_of(order_id, channel):
    return base_shard(channel) + order_id % SHARDS_PER_CHANNEL


def ds_of_shard(shard):
    for name, ds in summary()["datasources"].items():
        if shard in ds["shards"]:
            return name
    raise KeyError(shard)


def port_of_shard(shard):
    return DS_PORTS[ds_of_shard(shard)]


def shards_of_ds(ds):
    return summary()["datasources"][ds]["shards"]


# --------------------------------------------------------------------------------------------
# Order ids
# --------------------------------------------------------------------------------------------
_rng = random.Random()
_issued = set()


def fresh_new_id(channel, shard_offset=None):
    """A fresh new-format id for `channel` (timestamp now, random worker and sequence);
    with shard_offset, one whose id % 4 == shard_offset."""
    code = channel_code(channel)
    while True:
        now_ms = int(time.time() * 1000)
        oid = ((now_ms - SNOWFLAKE_EPOCH_MS) << 23) | (_rng.randrange(32) << 18) | (code << 14) | _rng.randrange(16384)
        if shard_offset is not None and oid % SHARDS_PER_CHANNEL != shard_offset:
            continue
        if oid not in _issued:
            _issued.add(oid)
            return oid


def fresh_legacy_id(shard_offset=None):
    """A fresh classic Snowflake id (41-bit time << 22 | 10-bit machine << 12 | seq) from 2020,
    whose route-key bits 17-14 decode to no channel code (so it can only route via the index)."""
    t2020 = 1577836800000
    while True:
        ts = t2020 + _rng.randrange(180 * 86400 * 1000)
        oid = ((ts - SNOWFLAKE_EPOCH_MS) << 22) | (_rng.randrange(1024) << 12) | _rng.randrange(4096)
        if (oid >> 14) & 15 in range(0, 6):
            continue  # keep bits 17-14 unassigned (6..15): not even a look-alike
        if shard_offset is not None and oid % SHARDS_PER_CHANNEL != shard_offset:
            continue
        if oid not in _issued and oid not in all_seeded_ids():
            _issued.add(oid)
            return oid


@lru_cache(maxsize=None)
def all_seeded_ids():
    ids = set()
    for ch in channels().values():
        ids.update(ch["new_format_ids"])
        ids.update(ch["legacy_ids"])
    return frozenset(ids)


def is_legacy(order_id):
    return any(order_id in ch["legacy_ids"] for ch in channels().values())


# --------------------------------------------------------------------------------------------
# Connections
# --------------------------------------------------------------------------------------------
def proxy_conn(**kw):
    args = dict(host=HOST, port=PROXY_PORT, user=PROXY_USER, password=PROXY_PASSWORD,
                database=LOGICAL_DB, charset="utf8mb4", connect_timeout=10, read_timeout=30,
                write_timeout=30)
    args.update(kw)
    return pymysql.connect(**args)


def direct_conn(ds, **kw):
    """A connection straight to one MariaDB server of the sandbox (default database `orders`)."""
    args = dict(host=HOST, port=DS_PORTS[ds], user="root", password="", database=LOGICAL_DB,
                charset="utf8mb4", connect_timeout=10, read_timeout=30, write_timeout=30)
    args.update(kw)
    return pymysql.connect(**args)


_admin = {}


def admin(ds):
    """A shared autocommit connection to one server, for placement checks and clean-up."""
    c = _admin.get(ds)
    if c is None or not c.open:
        c = direct_conn(ds, autocommit=True)
        _admin[ds] = c
    return c


def admin_query(ds, sql, args=None):
    with admin(ds).cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def shards_holding(order_id, table="t_order"):
    """Every physical shard (over both servers) whose `table` holds a row of this order id."""
    found = []
    for ds in DS_PORTS:
        parts = ["SELECT %d AS s FROM %s.%s_%d WHERE order_id = %d" % (s, PHYSICAL_DB, table, s, order_id)
                 for s in shards_of_ds(ds)]
        found += [r[0] for r in admin_query(ds, " UNION ALL ".join(parts))]
    return sorted(found)


def physical_row(order_id, shard):
    rows = admin_query(ds_of_shard(shard),
                       "SELECT %s FROM %s.t_order_%d WHERE order_id = %%s" % (ORDER_COLUMNS, PHYSICAL_DB, shard),
                       (order_id,))
    return rows[0] if rows else None


def index_channel(order_id):
    rows = admin_query("ds0", "SELECT channel FROM " + INDEX_TABLE + " WHERE order_id = %s", (order_id,))
    return rows[0][0] if rows else None


def purge_order(order_id):
    """Deletes every trace of an order the tests created: rows on any shard, index row."""
    for ds in DS_PORTS:
        for s in shards_of_ds(ds):
            admin_query(ds, "DELETE FROM %s.t_order_%d WHERE order_id = %d" % (PHYSICAL_DB, s, order_id))
            admin_query(ds, "DELETE FROM %s.t_order_item_%d WHERE order_id = %d" % (PHYSICAL_DB, s, order_id))
    admin_query("ds0", "DELETE FROM " + INDEX_TABLE + " WHERE order_id = %s", (order_id,))


# --------------------------------------------------------------------------------------------
# Rewriting a logical statement into the physical one (what the test expects the proxy to run)
# --------------------------------------------------------------------------------------------
_TABLE_RE = re.compile(
    r"(?<![\w$.`])(?:(`?)orders\1\.)?(`?)\b(t_order_item|t_order)\b(\2)(?![\w$])", re.IGNORECASE)


def physical_sql(sql, shard):
    """`t_order` / `orders`.`t_order` (and t_order_item) -> order_shards.t_order_<shard>.
    Identifiers only; the statements used by the tests hold these names nowhere else."""
    def repl(m):
        q = m.group(2)
        return "%s%s%s.%s%s_%d%s" % (q, PHYSICAL_DB, q, q, m.group(3).lower(), shard, q)
    if isinstance(sql, bytes):
        return _TABLE_RE_B.sub(lambda m: repl_b(m, shard), sql)
    return _TABLE_RE.sub(repl, sql)


_TABLE_RE_B = re.compile(_TABLE_RE.pattern.encode(), re.IGNORECASE)


def repl_b(m, shard):
    q = m.group(2)
    return b"%s%s%s.%s%s_%d%s" % (q, PHYSICAL_DB.encode(), q, q, m.group(3).lower(), shard, q)


# --------------------------------------------------------------------------------------------
# Picking seeded orders with interesting contents (read from the unsharded reference copy)
# --------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def reference_orders():
    """order_id -> dict of the reference row, for every seeded order."""
    out = {}
    with direct_conn("ds0", database=REF_DB, autocommit=True) as c, c.cursor() as cur:
        cur.execute("SELECT %s FROM t_order" % ORDER_COLUMNS)
        for r in cur.fetchall():
            d = dict(zip([x.strip() for x in ORDER_COLUMNS.split(",")], r))
            d["shard"] = shard_of(d["order_id"], d["channel"])
            d["ds"] = ds_of_shard(d["shard"])
            d["legacy"] = is_legacy(d["order_id"])
            out[d["order_id"]] = d
    return out


def has_emoji(s):
    return s is not None and any(ord(ch) > 0xFFFF for ch in s)


def has_cjk(s):
    return s is not None and any("CJK" in unicodedata.name(ch, "") or "HANGUL" in unicodedata.name(ch, "")
                                 or "HIRAGANA" in unicodedata.name(ch, "") for ch in s)


def pick(pred, legacy=None, ds=None, exclude=()):
    """The first seeded order (by id) matching the predicate on its reference row."""
    for oid in sorted(reference_orders()):
        o = reference_orders()[oid]
        if legacy is not None and o["legacy"] != legacy:
            continue
        if ds is not None and o["ds"] != ds:
            continue
        if oid in exclude:
            continue
        if pred(o):
            return o
    raise LookupError("no seeded order matches")


def orders_in_shard(shard, n):
    return [o for _, o in sorted(reference_orders().items()) if o["shard"] == shard][:n]


@lru_cache(maxsize=None)
def picked():
    """Seeded orders with interesting contents, picked from the reference copy."""
    p = {}
    p["new_ds0"] = pick(lambda o: o["note"] and o["note"].isascii() and o["created_at"].microsecond, legacy=False, ds="ds0")
    p["new_ds1"] = pick(lambda o: o["created_at"].microsecond, legacy=False, ds="ds1")
    p["legacy_ds0"] = pick(lambda o: True, legacy=True, ds="ds0")
    p["legacy_ds1"] = pick(lambda o: o["note"], legacy=True, ds="ds1")
    look = summary()["legacy_lookalikes"]
    # A legacy id whose bits 17-14 hold another channel's code, and whose real shard is on the
    # other server than the look-alike channel's shard: decoding it by its bits would be wrong.
    for x in look:
        o = reference_orders()[x["order_id"]]
        fake = shard_of(o["order_id"], x["looks_like_channel"])
        if ds_of_shard(fake) != o["ds"]:
            p["lookalike"] = o
            break
    p["null_note_new"] = pick(lambda o: o["note"] is None, legacy=False, ds="ds1")
    p["null_note_legacy"] = pick(lambda o: o["note"] is None, legacy=True)
    p["emoji"] = pick(lambda o: has_emoji(o["note"]), legacy=False)
    p["emoji_legacy"] = pick(lambda o: has_emoji(o["note"]), legacy=True)
    p["cjk"] = pick(lambda o: has_cjk(o["note"]))
    p["backslash"] = pick(lambda o: o["note"] is not None and "\\" in o["note"] and "'" in o["note"])
    p["newline"] = pick(lambda o: o["note"] is not None and "\n" in o["note"])
    p["empty"] = pick(lambda o: o["note"] == "")
    p["eacute"] = pick(lambda o: o["note"] is not None and "é" in o["note"] and not has_emoji(o["note"]))
    p["eacute_emoji"] = pick(lambda o: o["note"] is not None and "ç" in o["note"] and has_emoji(o["note"]))
    return p


@lru_cache(maxsize=None)
def multi_item_order(ds):
    """A seeded order with at least two items, on datasource `ds`."""
    rows = admin_query("ds0", "SELECT order_id FROM orders_ref.t_order_item GROUP BY order_id "
                              "HAVING COUNT(*) >= 2 ORDER BY order_id")
    for (oid,) in rows:
        if reference_orders()[oid]["ds"] == ds:
            return reference_orders()[oid]
    raise LookupError("no seeded order with two items on " + ds)


@lru_cache(maxsize=None)
def scatter_users():
    """Seeded user ids (1..500) with orders on both servers, the most orders first (then by
    id): WHERE user_id = <one of them> makes a small, stable scatter read over both servers."""
    users = {}
    for o in reference_orders().values():
        users.setdefault(o["user_id"], []).append(o)
    # 1, 7 and 42: user ids the suites' own rows are written with.
    both = [u for u, os_ in users.items() if len({o["ds"] for o in os_}) == 2 and u not in (1, 7, 42)]
    return sorted(both, key=lambda u: (-len(users[u]), u))


def unknown_legacy_id():
    oid = fresh_legacy_id()
    assert index_channel(oid) is None
    return oid
