#!/usr/bin/env python3
"""Deterministic seed data for the routekey-proxy sandbox.

Writes, into --out-dir:
  ds0.sql             schema + data for datasource ds0 (shards 0-9, orders, order_meta, orders_ref)
  ds1.sql             schema + data for datasource ds1 (shards 10-19, empty orders)
  seed-summary.json   topology plus the generated ids (new-format / legacy per channel)

Standard library only.  Same output on every run (fixed random seed, fixed time window).
Load with:  mariadb -h127.0.0.1 -P<port> -uroot --default-character-set=utf8mb4 < dsN.sql
"""

import argparse
import json
import os
import random
import sys
from datetime import datetime, timedelta, timezone

# ---------------------------------------------------------------------------
# Topology (must match config/demo.toml)
# ---------------------------------------------------------------------------
SNOWFLAKE_EPOCH_MS = 1288834974657
UTC = timezone.utc
UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_ms(iso):
    return int((datetime.fromisoformat(iso.replace("Z", "+00:00")) - UNIX_EPOCH) / timedelta(milliseconds=1))


# name, route key code, base shard, route_key_since, regions
CHANNELS = [
    ("EU_CHANNEL", 5, 0, "2024-01-01T00:00:00Z", ["GB", "ES", "FR", "DE", "IT", "NL"]),
    ("GLOBAL_CHANNEL", 2, 4, "2024-03-01T00:00:00Z", ["US", "JP", "SG", "AU", "BR"]),
    ("CN_CHANNEL", 1, 8, "2024-06-01T00:00:00Z", ["CN"]),
    ("BIZ_CHANNEL", 3, 12, "2025-01-01T00:00:00Z", ["HK", "TW"]),
    ("CORP_CHANNEL", 4, 16, "2025-06-01T00:00:00Z", ["KR", "MY"]),
]
SHARDS_PER_CHANNEL = 4
# datasource -> (default port, shards it holds)
DATASOURCES = {
    "ds0": {"host": "127.0.0.1", "port": 33061, "shards": list(range(0, 10))},
    "ds1": {"host": "127.0.0.1", "port": 33062, "shards": list(range(10, 20))},
}
SHARD_TO_DS = {s: ds for ds, d in DATASOURCES.items() for s in d["shards"]}

NEW_PER_CHANNEL = 200
LEGACY_PER_CHANNEL = 100
LOOKALIKES_OTHER = 16   # forced legacy ids whose bits 17-14 hold ANOTHER channel's code
LOOKALIKES_OWN = 4      # forced legacy ids whose bits 17-14 hold their OWN channel's code
RANDOM_SEED = 20240601

LEGACY_START_MS = iso_ms("2019-01-01T00:00:00Z")
# Upper bound for new-format timestamps. Fixed (not "now") so the data is identical on every
# run; clamped to the real clock so no id is ever in the future.
FIXED_END_MS = iso_ms("2026-01-01T00:00:00Z")

STATUSES = ["CREATED", "PAID", "SHIPPED", "CANCELLED"]

NOTES_PLAIN = [
    "leave at the door", "gift wrap please", "call before delivery", "express",
    "second attempt", "fragile", "no invoice", "deliver after 6pm", "priority customer",
    "reorder", "",
]
NOTES_UNICODE = [
    "Café crème – livraison rapide",
    "Größe XL, Lieferung an Straße 5",
    "日本語のメモ：午前中配達",
    "加急订单，请尽快发货",
    "🚀 fast shipping",
    "naïve façade 😀👍",
    "Ñandú — envío urgente",
    "Zürich → München",
    "한국어 메모: 문 앞에 놓아주세요",
    "快速配送 🚚💨",
    "Ελληνικά και русский текст",
    "emoji only 🎉🎁🧧",
]
NOTES_TRICKY = [
    "O'Reilly's order",
    'customer said "hello"',
    "C:\\orders\\inbox\\new",
    "back\\slash and 'quote' and \"dq\"",
    "100% cotton_blend",
    "a; DROP TABLE t_order; --",
    "line1\nline2",
    "tab\tseparated",
    "ends with backslash \\",
    "/* not a comment */ -- nor this # or that",
    "'",
    "\\'",
]

MERCHANT_NAMES = [
    "Acme Retail", "Globex", "Initech", "Umbrella Trading", "Café Müller GmbH",
    "東京商事", "上海贸易有限公司", "Stark Supplies", "Wayne Imports", "O'Brien & Sons",
    "Hooli", "Soylent Foods", "Tyrell Goods", "서울상사", "Vandelay Industries",
    "Kuala Mart", "Aperture Labs", "Nordic Design AB", "Sydney Surf Co", "São Paulo Têxtil",
]

T_ORDER_DDL = """(
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

T_ORDER_ITEM_DDL = """(
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

T_MERCHANT_DDL = """(
  merchant_id INT UNSIGNED PRIMARY KEY,
  name VARCHAR(64) NOT NULL,
  country CHAR(2) NOT NULL,
  created_at DATETIME NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

T_ORDER_INDEX_DDL = """(
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

DB_OPTS = "DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
ALL_DBS = ["order_shards", "orders", "order_meta", "orders_ref"]
INSERT_BATCH = 250


# ---------------------------------------------------------------------------
# Id helpers
# ---------------------------------------------------------------------------
def new_format_id(ts_ms, worker, code, seq):
    assert 0 <= worker < 32 and 0 <= code < 16 and 0 <= seq < 16384
    v = ((ts_ms - SNOWFLAKE_EPOCH_MS) << 23) | (worker << 18) | (code << 14) | seq
    assert 0 < v < 2 ** 63
    return v


def legacy_id(ts_ms, machine, seq):
    assert 0 <= machine < 1024 and 0 <= seq < 4096
    v = ((ts_ms - SNOWFLAKE_EPOCH_MS) << 22) | (machine << 12) | seq
    assert 0 < v < 2 ** 63
    return v


def code_bits(order_id):
    return (order_id >> 14) & 15


def new_format_ts(order_id):
    return (order_id >> 23) + SNOWFLAKE_EPOCH_MS


def fmt_dt_ms(ts_ms):
    dt = UNIX_EPOCH + timedelta(milliseconds=ts_ms)
    return dt.strftime("%Y-%m-%d %H:%M:%S") + ".%03d" % (ts_ms % 1000)


def fmt_iso(ts_ms):
    dt = UNIX_EPOCH + timedelta(milliseconds=ts_ms)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (ts_ms % 1000)


def money(cents):
    return "%d.%02d" % (cents // 100, cents % 100)


def sql_str(s):
    """MariaDB string literal (default sql_mode, i.e. backslash escapes enabled)."""
    if s is None:
        return "NULL"
    out = (s.replace("\\", "\\\\")
            .replace("'", "\\'")
            .replace("\0", "\\0")
            .replace("\n", "\\n")
            .replace("\r", "\\r")
            .replace("\x1a", "\\Z"))
    return "'" + out + "'"


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------
def generate(now_ms):
    rng = random.Random(RANDOM_SEED)
    end_ms = min(FIXED_END_MS, now_ms)
    since = {name: iso_ms(s) for name, _c, _b, s, _r in CHANNELS}
    code_to_channel = {c: name for name, c, _b, _s, _r in CHANNELS}
    used = set()
    orders = []  # dicts
    summary_channels = {}
    lookalikes = []

    def pick_note():
        r = rng.random()
        if r < 0.15:
            return None
        if r < 0.35:
            return rng.choice(NOTES_UNICODE)
        if r < 0.50:
            return rng.choice(NOTES_TRICKY)
        return rng.choice(NOTES_PLAIN)

    def make_order(oid, ts, name, base, regions, fmt):
        items = []
        total = 0
        for item_no in range(1, rng.randint(1, 3) + 1):
            qty = rng.randint(1, 5)
            price = rng.randint(99, 99999)
            total += qty * price
            items.append({"item_no": item_no, "sku": "SKU-%04d" % rng.randint(1000, 9999),
                          "qty": qty, "price": money(price)})
        shard = base + oid % SHARDS_PER_CHANNEL
        return {
            "order_id": oid, "channel": name, "region": rng.choice(regions),
            "user_id": rng.randint(1, 500), "amount": money(total),
            "status": rng.choice(STATUSES), "note": pick_note(),
            "created_at": fmt_dt_ms(ts), "ts_ms": ts, "shard": shard,
            "ds": SHARD_TO_DS[shard], "format": fmt, "items": items,
        }

    for name, code, base, _s, regions in CHANNELS:
        t0 = since[name]
        if end_ms <= t0:
            sys.exit("seed.py: clock is before %s route_key_since; cannot generate new-format ids" % name)
        new_ids, legacy_ids = [], []

        # --- new-format ids: ts in [since, end], spread over the range -----------------
        # Edge cases first: 1 s after the switch, and the newest one.
        new_ts = [t0 + 1000, end_ms - 1]
        new_ts += [rng.randint(t0, end_ms - 1) for _ in range(NEW_PER_CHANNEL - len(new_ts))]
        for ts in new_ts:
            while True:
                oid = new_format_id(ts, rng.randrange(32), code, rng.randrange(16384))
                if oid not in used:
                    break
            used.add(oid)
            assert code_bits(oid) == code and new_format_ts(oid) == ts
            new_ids.append(oid)
            orders.append(make_order(oid, ts, name, base, regions, "new"))

        # --- legacy Snowflake ids: ts in [2019-01-01, since) ---------------------------
        other_codes = [c for _n, c, _b, _s, _r in CHANNELS if c != code]
        forced = [other_codes[i % len(other_codes)] for i in range(LOOKALIKES_OTHER)]
        forced += [code] * LOOKALIKES_OWN
        # Edge cases: 1 ms and 1 s before the switch.
        legacy_ts = [t0 - 1, t0 - 1000]
        legacy_ts += [rng.randint(LEGACY_START_MS, t0 - 1) for _ in range(LEGACY_PER_CHANNEL - len(legacy_ts))]
        for i, ts in enumerate(legacy_ts):
            while True:
                if i < len(forced):
                    # machine bits 2..5 land on id bits 14..17
                    machine = (rng.randrange(16) << 6) | (forced[i] << 2) | rng.randrange(4)
                else:
                    machine = rng.randrange(1024)
                oid = legacy_id(ts, machine, rng.randrange(4096))
                if oid not in used:
                    break
            used.add(oid)
            if i < len(forced):
                assert code_bits(oid) == forced[i]
            legacy_ids.append(oid)
            orders.append(make_order(oid, ts, name, base, regions, "legacy"))
            cb = code_bits(oid)
            if 1 <= cb <= 5:
                looks_like = code_to_channel[cb]
                # Must be distinguishable from a real route-key id by its embedded timestamp.
                assert new_format_ts(oid) < since[looks_like], oid
                lookalikes.append({
                    "order_id": oid, "channel": name, "code_bits": cb,
                    "looks_like_channel": looks_like,
                    "decoded_new_format_ts": fmt_iso(new_format_ts(oid)),
                })

        n_look = sum(1 for x in lookalikes if x["channel"] == name)
        assert n_look >= 10, (name, n_look)
        summary_channels[name] = {
            "code": code,
            "base_shard": base,
            "shards": list(range(base, base + SHARDS_PER_CHANNEL)),
            "route_key_since": _s,
            "route_key_since_ms": t0,
            "regions": regions,
            "new_format_ids": new_ids,
            "legacy_ids": legacy_ids,
        }

    assert len(orders) == len(used) == len(CHANNELS) * (NEW_PER_CHANNEL + LEGACY_PER_CHANNEL)

    merchants = []
    countries = [r for *_x, regs in CHANNELS for r in regs]
    for i, mname in enumerate(MERCHANT_NAMES):
        day = UNIX_EPOCH + timedelta(days=17900 + 37 * i, seconds=rng.randrange(86400))
        merchants.append((i + 1, mname, countries[i % len(countries)], day.strftime("%Y-%m-%d %H:%M:%S")))

    summary = {
        "snowflake_epoch_ms": SNOWFLAKE_EPOCH_MS,
        "random_seed": RANDOM_SEED,
        "new_format_ts_upper_bound_ms": end_ms,
        "datasources": DATASOURCES,
        "channels": summary_channels,
        "legacy_ids_with_code_bits": [x["order_id"] for x in lookalikes],
        "legacy_lookalikes": lookalikes,
        "counts": {
            "orders": len(orders),
            "items": sum(len(o["items"]) for o in orders),
            "orders_per_shard": {str(s): sum(1 for o in orders if o["shard"] == s) for s in range(20)},
            "merchants": len(merchants),
        },
    }
    return orders, merchants, summary


# ---------------------------------------------------------------------------
# SQL rendering
# ---------------------------------------------------------------------------
def order_values(o):
    return "(%d,%s,%s,%d,%s,%s,%s,%s)" % (
        o["order_id"], sql_str(o["channel"]), sql_str(o["region"]), o["user_id"],
        o["amount"], sql_str(o["status"]), sql_str(o["note"]), sql_str(o["created_at"]))


def item_values(o):
    return ["(%d,%d,%s,%d,%s)" % (o["order_id"], it["item_no"], sql_str(it["sku"]), it["qty"], it["price"])
            for it in o["items"]]


def inserts(out, table, rows):
    for i in range(0, len(rows), INSERT_BATCH):
        out.append("INSERT INTO %s VALUES\n%s;" % (table, ",\n".join(rows[i:i + INSERT_BATCH])))


def render(ds, orders, merchants):
    out = [
        "-- generated by scripts/seed.py for %s; do not edit" % ds,
        "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci;",
        "SET SESSION lock_wait_timeout = 30;",
        "SET SESSION foreign_key_checks = 0, unique_checks = 0;",
    ]
    for db in ALL_DBS:
        out.append("DROP DATABASE IF EXISTS %s;" % db)
    dbs = ["order_shards", "orders"] + (["order_meta", "orders_ref"] if ds == "ds0" else [])
    for db in dbs:
        out.append("CREATE DATABASE %s %s;" % (db, DB_OPTS))
    shards = DATASOURCES[ds]["shards"]
    for s in shards:
        out.append("CREATE TABLE order_shards.t_order_%d %s;" % (s, T_ORDER_DDL))
        out.append("CREATE TABLE order_shards.t_order_item_%d %s;" % (s, T_ORDER_ITEM_DDL))
    if ds == "ds0":
        out.append("CREATE TABLE orders.t_merchant %s;" % T_MERCHANT_DDL)
        out.append("CREATE TABLE order_meta.t_order_index %s;" % T_ORDER_INDEX_DDL)
        out.append("CREATE TABLE orders_ref.t_order %s;" % T_ORDER_DDL)
        out.append("CREATE TABLE orders_ref.t_order_item %s;" % T_ORDER_ITEM_DDL)

    out.append("START TRANSACTION;")
    for s in shards:
        mine = sorted((o for o in orders if o["shard"] == s), key=lambda o: o["order_id"])
        inserts(out, "order_shards.t_order_%d" % s, [order_values(o) for o in mine])
        inserts(out, "order_shards.t_order_item_%d" % s, [v for o in mine for v in item_values(o)])
    if ds == "ds0":
        allo = sorted(orders, key=lambda o: o["order_id"])
        inserts(out, "orders_ref.t_order", [order_values(o) for o in allo])
        inserts(out, "orders_ref.t_order_item", [v for o in allo for v in item_values(o)])
        inserts(out, "order_meta.t_order_index (order_id, channel)",
                ["(%d,%s)" % (o["order_id"], sql_str(o["channel"])) for o in allo if o["format"] == "legacy"])
        inserts(out, "orders.t_merchant",
                ["(%d,%s,%s,%s)" % (m[0], sql_str(m[1]), sql_str(m[2]), sql_str(m[3])) for m in merchants])
    out.append("COMMIT;")
    return "\n".join(out) + "\n"


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True, help="where to write ds0.sql, ds1.sql, seed-summary.json")
    ap.add_argument("--ds0-port", type=int, default=33061, help="recorded in seed-summary.json")
    ap.add_argument("--ds1-port", type=int, default=33062, help="recorded in seed-summary.json")
    args = ap.parse_args()

    DATASOURCES["ds0"]["port"] = args.ds0_port
    DATASOURCES["ds1"]["port"] = args.ds1_port
    now_ms = int((datetime.now(UTC) - UNIX_EPOCH) / timedelta(milliseconds=1))
    orders, merchants, summary = generate(now_ms)

    os.makedirs(args.out_dir, exist_ok=True)
    for ds in DATASOURCES:
        write_atomic(os.path.join(args.out_dir, "%s.sql" % ds), render(ds, orders, merchants))
    write_atomic(os.path.join(args.out_dir, "seed-summary.json"), json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    c = summary["counts"]
    print("seed: %d orders, %d items, %d legacy ids with code bits 1..5 -> %s"
          % (c["orders"], c["items"], len(summary["legacy_ids_with_code_bits"]), args.out_dir))


if __name__ == "__main__":
    main()
