"""PyMySQL through routekey-proxy, compared with PyMySQL connected straight to the shard's
server running the equivalent physical statement.

Compared for every statement: cursor.description (name, type_code, display_size,
internal_size, precision, scale, null_ok), the fetched values with their Python types,
rowcount, lastrowid, warning count and the transaction bits of the server status.
Writes are checked by reading the physical tables directly.
"""

import datetime
import decimal
import unittest

import pymysql
from pymysql.constants import CLIENT, SERVER_STATUS

import common as C

# The status bits a driver acts on: transactions, and the escaping mode (issue 23).
TX_BITS = (SERVER_STATUS.SERVER_STATUS_IN_TRANS | SERVER_STATUS.SERVER_STATUS_AUTOCOMMIT
           | SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES)
INSERT_SQL = ("INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) "
              "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")


def typed(rows):
    return [tuple((type(v).__name__, v) for v in r) for r in rows]


def outcome(conn, sql, args=None):
    """Everything a PyMySQL application can observe about one statement."""
    with conn.cursor() as cur:
        try:
            cur.execute(sql, args)
        except pymysql.MySQLError as e:
            return {"error": (type(e).__name__,) + tuple(e.args)}
        rows = cur.fetchall()
        return {
            "description": cur.description,
            "rows": typed(rows),
            "rowcount": cur.rowcount,
            "lastrowid": cur.lastrowid,
            "warnings": conn._result.warning_count if conn._result else None,
            "tx_status": conn.server_status & TX_BITS,
        }


def new_row(oid, channel, note="client test row", region=None, amount="12.34",
            created=datetime.datetime(2025, 3, 4, 5, 6, 7, 891000)):
    region = region or C.channels()[channel]["regions"][0]
    return (oid, channel, region, 42, decimal.Decimal(amount), "CREATED", note, created)


class PyCase(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.created = []
        self.conns = []

    def tearDown(self):
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass
        for oid in self.created:
            C.purge_order(oid)

    def proxy(self, **kw):
        c = C.proxy_conn(**kw)
        self.conns.append(c)
        return c

    def direct(self, ds, **kw):
        c = C.direct_conn(ds, **kw)
        self.conns.append(c)
        return c

    def fresh(self, channel, shard_offset=None):
        oid = C.fresh_new_id(channel, shard_offset)
        self.created.append(oid)
        return oid

    def fresh_legacy(self, shard_offset=None):
        oid = C.fresh_legacy_id(shard_offset)
        self.created.append(oid)
        return oid

    def assert_same(self, pconn, dconn, sql, shard, args=None, direct_sql=None, sort_rows=False):
        direct_sql = direct_sql if direct_sql is not None else C.physical_sql(sql, shard)
        d = outcome(dconn, direct_sql, args)
        p = outcome(pconn, sql, args)
        if sort_rows:
            for o in (d, p):
                if "rows" in o:
                    o["rows"] = sorted(o["rows"], key=repr)
        ctx = "\nstatement (proxy): %s\nstatement (direct, shard %d on %s): %s\nargs: %r" % (
            sql, shard, C.ds_of_shard(shard), direct_sql, args)
        self.assertNotIn("error", d, "direct run failed (test bug?)" + ctx)
        for key in ("description", "rows", "rowcount", "lastrowid", "warnings", "tx_status"):
            self.assertEqual(p.get(key, p.get("error")), d[key],
                             "%s differs (first: proxy, second: direct)%s" % (key, ctx))
        return p


class TestReads(PyCase):

    @classmethod
    def setUpClass(cls):
        cls.p = C.picked()

    def test_description_and_values(self):
        p = self.p
        pc = self.proxy()
        dcs = {ds: self.direct(ds) for ds in C.DS_PORTS}
        stmts = []
        for key in ("new_ds0", "new_ds1", "legacy_ds0", "legacy_ds1", "lookalike", "null_note_new", "null_note_legacy",
                    "emoji", "emoji_legacy", "cjk", "backslash", "newline", "empty", "eacute"):
            o = p[key]
            stmts.append(("SELECT * FROM t_order WHERE order_id = %s", o["shard"], (o["order_id"],)))
            stmts.append(("SELECT * FROM t_order WHERE order_id = %d" % o["order_id"], o["shard"], None))
        o = p["new_ds1"]
        stmts += [
            ("SELECT order_id, amount, created_at FROM t_order WHERE order_id = '%d'" % o["order_id"], o["shard"], None),
            ("SELECT o.order_id AS id, o.note AS remark, o.amount * 2 AS dbl, o.created_at + INTERVAL 1 SECOND AS later, "
             "CAST(o.note AS BINARY) AS raw, DATE(o.created_at) AS d, TIME(o.created_at) AS t, o.user_id / 3 AS third, "
             "NULL AS nothing, CAST(o.amount AS DOUBLE) AS dbl_amount, o.order_id + 0 AS id_expr "
             "FROM t_order AS o WHERE o.order_id = %s", o["shard"], (o["order_id"],)),
            ("SELECT order_id, CAST(REPEAT(COALESCE(note, 'x'), 300) AS BINARY) AS big_blob, "
             "REPEAT(COALESCE(note, 'y'), 300) AS big_text FROM t_order WHERE order_id = %s", o["shard"], (o["order_id"],)),
        ]
        for ds in ("ds0", "ds1"):
            m = C.multi_item_order(ds)
            stmts.append(("SELECT o.order_id, o.note, i.item_no, i.sku, i.qty, i.price FROM t_order o JOIN t_order_item i "
                          "ON i.order_id = o.order_id WHERE o.order_id = %s ORDER BY i.item_no", m["shard"], (m["order_id"],)))
            stmts.append(("SELECT * FROM t_order_item WHERE order_id = %s ORDER BY item_no", m["shard"], (m["order_id"],)))
        unknown = C.unknown_legacy_id()
        stmts += [
            ("SELECT COUNT(*) FROM t_order WHERE order_id = %s", 0, (unknown,)),
            ("SELECT COUNT(*), SUM(amount), MAX(created_at) FROM t_order WHERE order_id = %s", 19, (unknown,)),
            ("SELECT * FROM t_order WHERE order_id = %s", 5, (unknown,)),
        ]
        for sql, shard, args in stmts:
            with self.subTest(sql=sql, args=args):
                self.assert_same(pc, dcs[C.ds_of_shard(shard)], sql, shard, args)

    def test_python_types(self):
        """The values an application gets: int, Decimal, datetime with microseconds, str with
        emoji, None, bytes."""
        pc = self.proxy()
        o = self.p["emoji"]
        with pc.cursor() as cur:
            cur.execute("SELECT order_id, user_id, amount, created_at, note, CAST(note AS BINARY), region FROM t_order "
                        "WHERE order_id = %s", (o["order_id"],))
            r = cur.fetchone()
        self.assertEqual(r[0], o["order_id"])
        self.assertIsInstance(r[0], int)
        self.assertIsInstance(r[1], int)
        self.assertIsInstance(r[2], decimal.Decimal)
        self.assertEqual(r[2], o["amount"])
        self.assertIsInstance(r[3], datetime.datetime)
        self.assertEqual(r[3], o["created_at"])
        self.assertEqual(r[4], o["note"])
        self.assertTrue(C.has_emoji(r[4]))
        self.assertEqual(r[5], o["note"].encode("utf-8"))
        self.assertIsInstance(r[6], str)
        o = self.p["new_ds1"]
        with pc.cursor() as cur:
            cur.execute("SELECT created_at FROM t_order WHERE order_id = %s", (o["order_id"],))
            (ts,) = cur.fetchone()
        self.assertNotEqual(ts.microsecond, 0, "picked a row whose created_at has no fraction")
        self.assertEqual(ts, o["created_at"])
        o = self.p["null_note_legacy"]
        with pc.cursor() as cur:
            cur.execute("SELECT note FROM t_order WHERE order_id = %s", (o["order_id"],))
            self.assertEqual(cur.fetchall(), ((None,),))

    def test_multi_shard_in(self):
        p = self.p
        pc = self.proxy()
        ids = [p[k]["order_id"] for k in ("new_ds0", "new_ds1", "legacy_ds0", "legacy_ds1")]
        sql = "SELECT order_id, channel, amount, note, created_at FROM t_order WHERE order_id IN (%s, %s, %s, %s)"
        with pc.cursor() as cur:
            cur.execute(sql, ids)
            got = typed(cur.fetchall())
            desc = cur.description
        expected = []
        for k in ("new_ds0", "new_ds1", "legacy_ds0", "legacy_ds1"):
            o = p[k]
            d = outcome(self.direct(o["ds"]), C.physical_sql(sql, o["shard"]).replace("IN (%s, %s, %s, %s)", "= %s"),
                        (o["order_id"],))
            expected += d["rows"]
            self.assertEqual(desc, d["description"], "description differs: " + sql)
        self.assertEqual(sorted(got, key=repr), sorted(expected, key=repr), sql)

    def test_scatter_select_matches_reference(self):
        """Without a usable order id (WHERE user_id = <seeded user>) every shard is read and
        the rows merged: description, rows (in order: each ORDER BY is total), rowcount and
        status as the unsharded reference database orders_ref (ds0) answers the same SQL."""
        users = C.scatter_users()
        u, u2 = users[0], users[1]
        a, b = self.p["new_ds0"], self.p["new_ds1"]
        pc = self.proxy()
        ref = self.direct("ds0", database=C.REF_DB)
        stmts = [
            ("SELECT * FROM t_order WHERE user_id = %s ORDER BY order_id", (u,)),
            ("SELECT order_id, amount, note, created_at FROM t_order WHERE user_id = %s "
             "ORDER BY amount DESC, order_id LIMIT %s", (u, 3)),
            ("SELECT COUNT(*), SUM(amount), MIN(created_at), MAX(note), AVG(amount) FROM t_order WHERE user_id = %s", (u,)),
            ("SELECT channel, COUNT(*), MAX(amount) FROM t_order WHERE user_id IN (%s, %s) GROUP BY channel ORDER BY channel",
             (u, u2)),
            ("SELECT order_id, amount FROM t_order WHERE order_id IN (%s, %s) ORDER BY amount, order_id LIMIT 1",
             (a["order_id"], b["order_id"])),
            ("SELECT order_id FROM t_order WHERE order_id IN (%s, %s) ORDER BY order_id DESC", (a["order_id"], b["order_id"])),
        ]
        for sql, args in stmts:
            with self.subTest(sql=sql, args=args):
                p = self.assert_same(pc, ref, sql, 0, args, direct_sql=sql)
                self.assertGreater(len(p["rows"]), 0, "test picked a statement without rows")
        sql = "SELECT order_id, channel, amount FROM t_order WHERE user_id = %s"
        with self.subTest(sql=sql, unordered=True):
            self.assert_same(pc, ref, sql, 0, (u,), direct_sql=sql, sort_rows=True)

    def test_binary_literals(self):
        """Arbitrary bytes in `_binary` literals come back identical: as PyMySQL sends them
        (hex), as raw bytes in the statement text, and inside a statement on a sharded table."""
        pc = self.proxy()
        every_byte = bytes(range(256))
        samples = [b"\xff\x00\x27", b"\x5c\x27\x22\x00\x1a\n\r", every_byte, b"\xe9t\xe9", b"", b"\xf0\x9f\x98"]
        with pc.cursor() as cur:
            for b in samples:
                with self.subTest("param", b=b[:16]):
                    cur.execute("SELECT _binary %s AS b", (b,))
                    self.assertEqual(cur.fetchall(), ((b,),))
                with self.subTest("raw bytes in the statement", b=b[:16]):
                    cur.execute(b"SELECT _binary'" + pymysql.converters.escape_string(b.decode("latin1")).encode("latin1") + b"' AS b")
                    self.assertEqual(cur.fetchall(), ((b,),))
        o = self.p["legacy_ds1"]
        dc = self.direct(o["ds"])
        for b in samples:
            lit = b"_binary'" + pymysql.converters.escape_string(b.decode("latin1")).encode("latin1") + b"'"
            sql = b"SELECT order_id, " + lit + b" AS b, note FROM t_order WHERE order_id = " + str(o["order_id"]).encode()
            with self.subTest("raw bytes in a sharded statement", b=b[:16]):
                p = self.assert_same(pc, dc, sql, o["shard"])
                self.assertEqual(p["rows"][0][1], ("bytes", b))

    def test_latin1_connection(self):
        """charset='latin1': notes with é arrive as the server converts them, as directly."""
        pc = self.proxy(charset="latin1")
        for key in ("eacute", "eacute_emoji", "cjk"):
            o = self.p[key]
            dc = self.direct(o["ds"], charset="latin1")
            with self.subTest(key):
                p = self.assert_same(pc, dc, "SELECT order_id, note, HEX(note) FROM t_order WHERE order_id = %s",
                                     o["shard"], (o["order_id"],))
                if key == "eacute":
                    self.assertIn("é", p["rows"][0][1][1])
        with self.subTest("latin1 literal in the statement"):
            o = self.p["eacute"]
            self.assert_same(pc, self.direct(o["ds"], charset="latin1"),
                             "SELECT order_id, note LIKE %s AS has_e, %s AS lit, HEX(%s) FROM t_order WHERE order_id = %s",
                             o["shard"], ("%é%", "crème brûlée", "é", o["order_id"]))

    def test_refused_character_sets(self):
        """Character sets whose multibyte characters can hold the byte of '\\' are refused at
        connect with error 1115 and a clear message."""
        for cs in ("gbk", "sjis", "big5", "cp932"):
            with self.subTest(cs):
                with self.assertRaises(pymysql.err.OperationalError) as e:
                    self.proxy(charset=cs)
                self.assertEqual(e.exception.args[0], 1115, e.exception.args)
                self.assertIn(cs, e.exception.args[1])


class TestWrites(PyCase):

    def placement(self, oid):
        return C.shards_holding(oid)

    def test_insert_commit_rollback(self):
        pc = self.proxy()  # PyMySQL default: autocommit off (it sends SET AUTOCOMMIT = 0)
        self.assertFalse(pc.get_autocommit())
        oid = self.fresh("EU_CHANNEL")
        shard = C.shard_of(oid, "EU_CHANNEL")
        row = new_row(oid, "EU_CHANNEL", note="insert 🚀 'q' \\ back")
        # The same insert directly, to learn what MariaDB reports.
        twin = self.fresh("EU_CHANNEL", oid % 4)
        dc = self.direct("ds0")
        d = outcome(dc, C.physical_sql(INSERT_SQL, shard), new_row(twin, "EU_CHANNEL", note=row[6]))
        dc.rollback()
        p = outcome(pc, INSERT_SQL, row)
        self.assertEqual(p, d, "INSERT outcome (proxy, direct)")
        self.assertEqual(p["rowcount"], 1)
        self.assertEqual(p["tx_status"], SERVER_STATUS.SERVER_STATUS_IN_TRANS)
        self.assertEqual(self.placement(oid), [], "uncommitted row visible on a shard (not in a transaction?)")
        with pc.cursor() as cur:  # the transaction sees its own row
            cur.execute("SELECT note FROM t_order WHERE order_id = %s", (oid,))
            self.assertEqual(cur.fetchall(), ((row[6],),))
        pc.commit()
        self.assertEqual(self.placement(oid), [shard])
        self.assertEqual(C.physical_row(oid, shard), row)
        self.assertEqual(pc.server_status & TX_BITS, 0)

        oid2 = self.fresh("BIZ_CHANNEL")
        with pc.cursor() as cur:
            self.assertEqual(cur.execute(INSERT_SQL, new_row(oid2, "BIZ_CHANNEL")), 1)
        pc.rollback()
        self.assertEqual(self.placement(oid2), [], "rolled-back insert left a row")
        with pc.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t_order WHERE order_id = %s", (oid2,))
            self.assertEqual(cur.fetchone(), (0,))

    def test_insert_without_order_id_reports_the_issued_id(self):
        """INSERT without order_id: cursor.lastrowid and LAST_INSERT_ID() are the id the proxy
        issued for the row's channel; the row sits on that id's shard."""
        pc = self.proxy(autocommit=True)
        cols = "channel, region, user_id, amount, status, note, created_at"
        for channel in ("EU_CHANNEL", "BIZ_CHANNEL"):
            region = C.channels()[channel]["regions"][0]
            with pc.cursor() as cur:
                n = cur.execute("INSERT INTO t_order (%s) VALUES (%%s, %%s, 1, 1.50, 'NEW', 'auto id', NOW())" % cols,
                                (channel, region))
                oid = cur.lastrowid
                self.created.append(oid)
                self.assertEqual(n, 1)
                cur.execute("SELECT LAST_INSERT_ID()")
                self.assertEqual(cur.fetchone(), (oid,))
            self.assertEqual((oid >> 14) & 15, C.channels()[channel]["code"], "route key of %d" % oid)
            self.assertEqual(self.placement(oid), [C.shard_of(oid, channel)])

    def test_update_delete(self):
        pc = self.proxy()
        oid = self.fresh("CN_CHANNEL")
        shard = C.shard_of(oid, "CN_CHANNEL")
        with pc.cursor() as cur:
            cur.execute(INSERT_SQL, new_row(oid, "CN_CHANNEL"))
        pc.commit()
        self.assertEqual(self.placement(oid), [shard])
        upd = "UPDATE t_order SET note = %s, amount = amount + 1 WHERE order_id = %s"
        dc = self.direct(C.ds_of_shard(shard))
        with pc.cursor() as cur:
            self.assertEqual(cur.execute(upd, ("更新 ✓ 😀", oid)), 1)
            self.assertEqual(cur.rowcount, 1)
        pc.commit()
        self.assertEqual(C.physical_row(oid, shard)[6], "更新 ✓ 😀")
        self.assertEqual(C.physical_row(oid, shard)[4], decimal.Decimal("13.34"))
        # Same value again: MariaDB reports 0 changed rows (no CLIENT_FOUND_ROWS) and 1 with
        # CLIENT_FOUND_ROWS. Direct first, rolled back before the proxy runs (row locks).
        same = "UPDATE t_order SET note = %s WHERE order_id = %s"
        for flag in (0, CLIENT.FOUND_ROWS):
            pconn = self.proxy(client_flag=flag) if flag else pc
            dconn = self.direct(C.ds_of_shard(shard), client_flag=flag) if flag else dc
            d = outcome(dconn, C.physical_sql(same, shard), ("更新 ✓ 😀", oid))
            dconn.rollback()
            p = outcome(pconn, same, ("更新 ✓ 😀", oid))
            pconn.rollback()
            self.assertEqual(p, d, "UPDATE to the same value, client_flag=%d (proxy, direct)" % flag)
            self.assertEqual(p["rowcount"], 1 if flag else 0, "CLIENT_FOUND_ROWS=%d" % flag)
        with pc.cursor() as cur:
            self.assertEqual(cur.execute("DELETE FROM t_order WHERE order_id = %s", (oid,)), 1)
        self.assertEqual(self.placement(oid), [shard], "uncommitted delete visible")
        pc.commit()
        self.assertEqual(self.placement(oid), [])

    def test_update_legacy_row_rolled_back(self):
        """A seeded legacy order (routed through the index) updated then rolled back."""
        o = C.picked()["lookalike"]
        before = C.physical_row(o["order_id"], o["shard"])
        self.assertIsNotNone(before)
        pc = self.proxy()
        with pc.cursor() as cur:
            self.assertEqual(cur.execute("UPDATE t_order SET status = 'TEST-ROLLBACK' WHERE order_id = %s", (o["order_id"],)), 1)
            cur.execute("SELECT status FROM t_order WHERE order_id = %s", (o["order_id"],))
            self.assertEqual(cur.fetchall(), (("TEST-ROLLBACK",),))
        self.assertEqual(C.physical_row(o["order_id"], o["shard"]), before)
        pc.rollback()
        self.assertEqual(C.physical_row(o["order_id"], o["shard"]), before)
        with pc.cursor() as cur:
            cur.execute("SELECT status FROM t_order WHERE order_id = %s", (o["order_id"],))
            self.assertEqual(cur.fetchall(), ((before[5],),))

    def test_insert_legacy_id_writes_index_row(self):
        """A row whose id does not decode: the proxy writes the index row (committed at once,
        outside the client's transaction), the shard row follows the channel column."""
        pc = self.proxy()
        oid = self.fresh_legacy()
        shard = C.shard_of(oid, "BIZ_CHANNEL")
        with pc.cursor() as cur:
            self.assertEqual(cur.execute(INSERT_SQL, new_row(oid, "BIZ_CHANNEL")), 1)
        self.assertEqual(C.index_channel(oid), "BIZ_CHANNEL", "index row missing before the client's commit")
        self.assertEqual(self.placement(oid), [])
        pc.commit()
        self.assertEqual(self.placement(oid), [shard])
        with pc.cursor() as cur:
            cur.execute("SELECT order_id, channel FROM t_order WHERE order_id = %s", (oid,))
            self.assertEqual(cur.fetchall(), ((oid, "BIZ_CHANNEL"),))
        pc.commit()

    def test_executemany_one_datasource(self):
        """PyMySQL turns executemany into one multi-row INSERT; rows for four shards of one
        datasource are split over the shards and run as one transaction."""
        pc = self.proxy()
        ids = [self.fresh("EU_CHANNEL", k) for k in range(4)]
        rows = [new_row(oid, "EU_CHANNEL", note="bulk %d é" % i) for i, oid in enumerate(ids)]
        with pc.cursor() as cur:
            n = cur.executemany(INSERT_SQL, rows)
            self.assertEqual(n, 4)
            self.assertEqual(cur.rowcount, 4)
        for oid in ids:
            self.assertEqual(self.placement(oid), [])
        pc.commit()
        for oid, row in zip(ids, rows):
            shard = C.shard_of(oid, "EU_CHANNEL")
            self.assertEqual(self.placement(oid), [shard], oid)
            self.assertEqual(C.physical_row(oid, shard), row)

    def test_executemany_two_datasources_refused(self):
        """Rows for two datasources in one statement: refused with a MySQL error, nothing
        written, the connection still usable."""
        pc = self.proxy()
        ids = [self.fresh("EU_CHANNEL"), self.fresh("BIZ_CHANNEL")]  # ds0, ds1
        rows = [new_row(ids[0], "EU_CHANNEL"), new_row(ids[1], "BIZ_CHANNEL")]
        with pc.cursor() as cur:
            with self.assertRaises(pymysql.MySQLError) as e:
                cur.executemany(INSERT_SQL, rows)
        self.assertIsInstance(e.exception.args[0], int)
        self.assertGreaterEqual(e.exception.args[0], 1000, e.exception.args)
        pc.commit()
        for oid in ids:
            self.assertEqual(self.placement(oid), [], "partial write of a refused statement")
        with pc.cursor() as cur:
            cur.execute("SELECT 1")
            self.assertEqual(cur.fetchall(), ((1,),))

    def test_second_datasource_in_transaction_refused(self):
        """A transaction that wrote on ds0 may not write on ds1; it stays intact."""
        pc = self.proxy()
        a, b = self.fresh("EU_CHANNEL"), self.fresh("CORP_CHANNEL")
        with pc.cursor() as cur:
            cur.execute(INSERT_SQL, new_row(a, "EU_CHANNEL"))
            with self.assertRaises(pymysql.MySQLError) as e:
                cur.execute(INSERT_SQL, new_row(b, "CORP_CHANNEL"))
            self.assertGreaterEqual(e.exception.args[0], 1000, e.exception.args)
            # Reads of the other datasource are still allowed.
            o = C.picked()["new_ds1"]
            cur.execute("SELECT order_id FROM t_order WHERE order_id = %s", (o["order_id"],))
            self.assertEqual(cur.fetchall(), ((o["order_id"],),))
        pc.commit()
        self.assertEqual(self.placement(a), [C.shard_of(a, "EU_CHANNEL")])
        self.assertEqual(self.placement(b), [])

    def test_warnings(self):
        """A statement with a warning reports the same warning count, and SHOW WARNINGS
        answers for it, as directly."""
        pc = self.proxy()
        oid = self.fresh("GLOBAL_CHANNEL")
        twin = self.fresh("GLOBAL_CHANNEL", oid % 4)
        shard = C.shard_of(oid, "GLOBAL_CHANNEL")
        dc = self.direct(C.ds_of_shard(shard))
        d = outcome(dc, C.physical_sql(INSERT_SQL, shard), new_row(twin, "GLOBAL_CHANNEL", amount="1.005"))
        dw = outcome(dc, "SHOW WARNINGS")
        dc.rollback()
        p = outcome(pc, INSERT_SQL, new_row(oid, "GLOBAL_CHANNEL", amount="1.005"))
        pw = outcome(pc, "SHOW WARNINGS")
        pc.rollback()
        self.assertEqual(p, d, "INSERT with a warning (proxy, direct)")
        self.assertGreaterEqual(d["warnings"], 1, "test bug: no warning directly")
        self.assertEqual(pw["rows"], dw["rows"], "SHOW WARNINGS rows after the insert (proxy, direct)")
        self.assertEqual(pw, dw, "SHOW WARNINGS after the insert: description etc. (proxy, direct)")


class TestEscaping(PyCase):
    """PyMySQL escapes a string by the server's NO_BACKSLASH_ESCAPES status flag: with the
    wrong flag, a quote escaped as \\' ends the string on a server that takes backslashes
    literally (issue 23, the injection as reported)."""

    ATTACK = "\\' OR 1=1 -- "

    def count(self, conn):
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t_order WHERE note = %s", (self.ATTACK,))
            return cur.fetchall()[0][0]

    def test_no_backslash_escapes_reaches_the_driver(self):
        pc = self.proxy(autocommit=True)
        dc = self.direct("ds0", database="orders_ref", autocommit=True)
        for conn in (pc, dc):
            self.assertEqual(self.count(conn), 0)
            with conn.cursor() as cur:
                cur.execute("SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            self.assertTrue(conn.server_status & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES)
        self.assertEqual(self.count(dc), 0)
        self.assertEqual(self.count(pc), 0, "the attack string matched orders through the proxy")
        # The flag stays on every later reply, and goes with the mode.
        for conn in (pc, dc):
            conn.ping(reconnect=False)
            self.assertTrue(conn.server_status & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES)
            with conn.cursor() as cur:
                cur.execute("SET sql_mode = REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')")
            self.assertFalse(conn.server_status & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES)
            self.assertEqual(self.count(conn), 0)


class TestProtocol(PyCase):

    def test_ping(self):
        pc = self.proxy()
        pc.ping(reconnect=False)
        o = C.picked()["new_ds0"]
        with pc.cursor() as cur:
            cur.execute("SELECT order_id FROM t_order WHERE order_id = %s", (o["order_id"],))
            pc.ping(reconnect=False)  # inside the implicit transaction
            self.assertEqual(cur.fetchall(), ((o["order_id"],),))
            self.assertTrue(pc.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS)
            pc.ping(reconnect=False)
            cur.execute("SELECT 1")
            self.assertEqual(cur.fetchall(), ((1,),))

    def test_status_flags_follow_the_session(self):
        """Autocommit and in-transaction bits after each statement, as on a direct session."""
        o = C.picked()["legacy_ds1"]
        shard = o["shard"]
        pc, dc = self.proxy(), self.direct("ds1")
        seq = [("SELECT 1", None), ("SELECT order_id FROM t_order WHERE order_id = %s", (o["order_id"],)),
               ("COMMIT", None), ("SELECT 1", None), ("ROLLBACK", None), ("SET autocommit = 1", None),
               ("SELECT note FROM t_order WHERE order_id = %s", (o["order_id"],)), ("BEGIN", None),
               ("SELECT note FROM t_order WHERE order_id = %s", (o["order_id"],)), ("COMMIT", None),
               ("START TRANSACTION", None), ("ROLLBACK", None), ("SET autocommit = 0", None),
               ("SELECT note FROM t_order WHERE order_id = %s", (o["order_id"],)), ("ROLLBACK", None)]
        for i, (sql, args) in enumerate(seq):
            with self.subTest(step=i, sql=sql):
                self.assert_same(pc, dc, sql, shard, args)

    def test_multi_statements(self):
        a, b = C.picked()["new_ds1"], C.picked()["legacy_ds1"]
        pc = self.proxy(client_flag=CLIENT.MULTI_STATEMENTS)
        dc = self.direct("ds1", client_flag=CLIENT.MULTI_STATEMENTS)
        sql = ("SELECT order_id, note FROM t_order WHERE order_id = %d; SELECT order_id, amount, created_at FROM t_order "
               "WHERE order_id = %d" % (a["order_id"], b["order_id"]))
        direct_sql = ("SELECT order_id, note FROM order_shards.t_order_%d WHERE order_id = %d; SELECT order_id, amount, "
                      "created_at FROM order_shards.t_order_%d WHERE order_id = %d"
                      % (a["shard"], a["order_id"], b["shard"], b["order_id"]))

        def all_sets(conn, q):
            out = []
            with conn.cursor() as cur:
                try:
                    cur.execute(q)
                    while True:
                        out.append((cur.description, typed(cur.fetchall()), cur.rowcount))
                        if not cur.nextset():
                            break
                except pymysql.MySQLError as e:
                    out.append(("error",) + tuple(e.args))
            return out

        got, exp = all_sets(pc, sql), all_sets(dc, direct_sql)
        self.assertEqual(len(exp), 2)
        self.assertEqual(got, exp, "multi-statement results (proxy, direct)\nstatement: " + sql)
        # The second statement fails: first result, then the server's error.
        bad = "SELECT order_id FROM t_order WHERE order_id = %d; SELEC 2" % a["order_id"]
        got, exp = all_sets(pc, bad), all_sets(dc, C.physical_sql(bad, a["shard"]))
        self.assertEqual(got, exp, "multi-statement with a failing second statement\nstatement: " + bad)
        pc.ping(reconnect=False)
        # A write and a read in one query (a new session: see test_failed_statement_is_not_a_write).
        pc.rollback()
        pc = self.proxy(client_flag=CLIENT.MULTI_STATEMENTS)
        oid = self.fresh("CORP_CHANNEL")
        shard = C.shard_of(oid, "CORP_CHANNEL")
        q = ("INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) VALUES "
             "(%d, 'CORP_CHANNEL', 'KR', 1, 2.50, 'PAID', 'multi', '2025-07-01 00:00:00.123'); "
             "SELECT order_id, note FROM t_order WHERE order_id = %d" % (oid, oid))
        got = all_sets(pc, q)
        pc.commit()
        self.assertEqual([g[1:] for g in got], [([], 1), ([(("int", oid), ("str", "multi"))], 1)], q)
        self.assertEqual(C.shards_holding(oid), [shard])

    def test_failed_statement_is_not_a_write(self):
        """In a transaction, a statement the server rejects (bad SQL, passed through to the
        default datasource ds0) wrote nothing: a later write on ds1 must not be refused as a
        'second datasource' write."""
        o = C.picked()["new_ds1"]
        for pre in (["SELECT order_id FROM t_order WHERE order_id = %d" % o["order_id"], "SELEC 2"],
                    ["SELECT 1", "SELEC 2"],
                    ["SELECT order_id FROM t_order WHERE order_id = %d; SELEC 2" % o["order_id"]]):
            with self.subTest(pre=pre):
                pc = self.proxy(client_flag=CLIENT.MULTI_STATEMENTS)
                with pc.cursor() as cur:
                    for q in pre:
                        try:
                            cur.execute(q)
                            while cur.nextset():
                                pass
                        except pymysql.err.ProgrammingError as e:
                            self.assertEqual(e.args[0], 1064)
                    oid = self.fresh("CORP_CHANNEL")  # shards 16-19: ds1
                    try:
                        cur.execute(INSERT_SQL, new_row(oid, "CORP_CHANNEL"))
                    except pymysql.MySQLError as e:
                        self.fail("write on ds1 refused after %r failed: %r" % (pre, e.args))
                pc.rollback()

    def test_multi_statement_without_the_flag(self):
        """Without CLIENT_MULTI_STATEMENTS, `a; b` is a syntax error, as on the server."""
        o = C.picked()["new_ds0"]
        pc, dc = self.proxy(), self.direct("ds0")
        for sql in ("SELECT 1; SELECT 2", "SELECT order_id FROM t_order WHERE order_id = %d; SELECT 2" % o["order_id"]):
            with self.subTest(sql):
                p = outcome(pc, sql)
                d = outcome(dc, C.physical_sql(sql, o["shard"]))
                self.assertIn("error", d)
                self.assertIn("error", p, "proxy ran a multi-statement query without CLIENT_MULTI_STATEMENTS")
                # The proxy answers this itself: same class and code as the server (its own message).
                self.assertEqual(p["error"][:2], d["error"][:2])

    def test_connection_identity(self):
        pc = self.proxy()
        with pc.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID(), DATABASE()")
            cid, db = cur.fetchone()
        self.assertEqual(cid, pc.thread_id(), "CONNECTION_ID() is not the handshake's connection id")
        self.assertEqual(db, "orders")
        pc.select_db("orders")  # COM_INIT_DB
        # A database outside the user's scope (SPEC 8a), existing or not: 1044, as MySQL
        # answers a user without privileges on it (it does not tell which databases exist).
        with self.assertRaises(pymysql.MySQLError) as e:
            pc.select_db("no_such_db")
        self.assertEqual(e.exception.args[0], 1044)
        self.assertIn("to database 'no_such_db'", e.exception.args[1])
        with pc.cursor() as cur:
            cur.execute("SELECT DATABASE()")
            self.assertEqual(cur.fetchone(), ("orders",))

    def test_autocommit_mode(self):
        """autocommit=True: every statement commits at once; the status says so."""
        pc = self.proxy(autocommit=True)
        self.assertTrue(pc.get_autocommit())
        oid = self.fresh("GLOBAL_CHANNEL")
        with pc.cursor() as cur:
            cur.execute(INSERT_SQL, new_row(oid, "GLOBAL_CHANNEL"))
            self.assertEqual(pc.server_status & TX_BITS, SERVER_STATUS.SERVER_STATUS_AUTOCOMMIT)
        self.assertEqual(C.shards_holding(oid), [C.shard_of(oid, "GLOBAL_CHANNEL")])
        pc.autocommit(False)
        self.assertFalse(pc.get_autocommit())
        with pc.cursor() as cur:
            cur.execute("DELETE FROM t_order WHERE order_id = %s", (oid,))
        self.assertEqual(C.shards_holding(oid), [C.shard_of(oid, "GLOBAL_CHANNEL")])
        pc.rollback()
        self.assertEqual(C.shards_holding(oid), [C.shard_of(oid, "GLOBAL_CHANNEL")])

    def test_latin1_write(self):
        """A note written through a latin1 connection is stored as the same characters."""
        pc = self.proxy(charset="latin1")
        oid = self.fresh("EU_CHANNEL")
        note = "Crème brûlée, Ærø, ½ €"
        with pc.cursor() as cur:
            cur.execute(INSERT_SQL, new_row(oid, "EU_CHANNEL", note=note))
        pc.commit()
        shard = C.shard_of(oid, "EU_CHANNEL")
        self.assertEqual(C.physical_row(oid, shard)[6], note)
        with pc.cursor() as cur:
            cur.execute("SELECT note FROM t_order WHERE order_id = %s", (oid,))
            self.assertEqual(cur.fetchone(), (note,))


if __name__ == "__main__":
    unittest.main(verbosity=2)
