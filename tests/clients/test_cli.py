"""The `mariadb` command-line client through routekey-proxy, compared with the same client
running the equivalent physical statement directly on the shard's server.

The only differences allowed between the two outputs are the Database / Table / Org_table
lines of `--column-type-info`: directly they name `order_shards` and `t_order_<n>`, through
the proxy they must name `orders` and `t_order` (or the alias the statement gave).
Statements read from several shards (scatter, IN over several shards with ORDER BY/LIMIT/
aggregates) are compared with the same SQL run on the unsharded reference database
`orders_ref` (ds0), where only the Database lines differ (`orders_ref` / `orders`).
"""

import difflib
import os
import re
import subprocess
import tempfile
import unittest

import common as C

MARIADB = os.environ.get("ROUTEKEY_MARIADB_CLI", "mariadb")


def run_cli(target, args=(), sql=None, stdin=None, charset="utf8mb4", database=C.LOGICAL_DB):
    """Runs the mariadb CLI against the proxy (target='proxy') or one server ('ds0'/'ds1').
    Returns (exit code, stdout bytes, stderr bytes)."""
    if target == "proxy":
        port, auth = C.PROXY_PORT, ["-u" + C.PROXY_USER, "--password=" + C.PROXY_PASSWORD]
    else:
        port, auth = C.DS_PORTS[target], ["-uroot"]
    cmd = [MARIADB, "--no-defaults", "--protocol=TCP", "-h" + C.HOST, "-P%d" % port,
           "--connect-timeout=10"] + auth
    if charset is not None:
        cmd.append("--default-character-set=" + charset)
    if database:
        cmd += ["-D", database]
    cmd += list(args)
    if sql is not None:
        cmd += ["-e", sql]
    env = dict(os.environ)
    env.pop("MYSQL_PWD", None)
    p = subprocess.run(cmd, input=stdin if stdin is not None else b"", capture_output=True,
                       timeout=60, env=env)
    return p.returncode, p.stdout, p.stderr


_DB_LINE = re.compile(rb"^(Database:\s+)`order_shards`$", re.M)
_REF_DB_LINE = re.compile(rb"^(Database:\s+)`orders_ref`$", re.M)
_TABLE_LINE = re.compile(rb"^((?:Org_)?[Tt]able:\s+)`(t_order_item|t_order)_\d+`$", re.M)


def expected_from_direct(out):
    """Direct output with only the Database/Table/Org_table lines rewritten to what the proxy
    must show: `orders`, and the logical table name where MariaDB showed the physical one
    (an alias stays as it is)."""
    out = _DB_LINE.sub(rb"\1`orders`", out)
    return _TABLE_LINE.sub(rb"\1`\2`", out)


def expected_from_reference(out):
    """Output of the same statement run on the unsharded reference database (orders_ref on
    ds0, the tables under their logical names) as the proxy must show it: only the
    Database lines of --column-type-info differ (`orders_ref` there, `orders` through the proxy)."""
    return _REF_DB_LINE.sub(rb"\1`orders`", out)


_ECHO = re.compile(rb"^-{14}\n.*?\n-{14}\n\n", re.M | re.S)


def strip_echo(err):
    return _ECHO.sub(b"<statement>\n", err)


def show(b):
    return b.decode("utf-8", "backslashreplace")


def diff(expected, got, exp_name="expected (direct, normalised)", got_name="proxy"):
    lines = difflib.unified_diff(show(expected).splitlines(), show(got).splitlines(),
                                 exp_name, got_name, lineterm="", n=2)
    out = "\n".join(lines)
    if len(out) > 6000:
        out = out[:6000] + "\n... (diff truncated)"
    return out


def parse_fields(out):
    """Field blocks of --column-type-info output: list of dicts (attribute -> value text)."""
    fields = []
    for m in re.finditer(rb"^Field\s+\d+:\s+(.*?)\n\n", out, re.M | re.S):
        block = b"Field:" + m.group(0).split(b":", 1)[1]
        d = {}
        for line in block.splitlines():
            if b":" in line:
                k, v = line.split(b":", 1)
                d[k.strip().decode()] = v.strip()
        fields.append(d)
    return fields


class CliCase(unittest.TestCase):
    maxDiff = None

    def assert_same_as_direct(self, sql, shard, args=("--column-type-info", "--table"), charset="utf8mb4",
                              direct_sql=None, stdin_encoding=None, expect_rc0=True):
        """Runs `sql` through the proxy and its physical form on `shard`'s server; the outputs
        (stdout, stderr and exit code) must be identical after normalisation."""
        direct_sql = direct_sql if direct_sql is not None else C.physical_sql(sql, shard)
        ds = C.ds_of_shard(shard)
        if stdin_encoding:
            prc, pout, perr = run_cli("proxy", args, stdin=sql.encode(stdin_encoding), charset=charset)
            drc, dout, derr = run_cli(ds, args, stdin=direct_sql.encode(stdin_encoding), charset=charset)
        else:
            prc, pout, perr = run_cli("proxy", args, sql=sql, charset=charset)
            drc, dout, derr = run_cli(ds, args, sql=direct_sql, charset=charset)
        ctx = "\nstatement (proxy): %s\nstatement (direct on %s, shard %d): %s\ncli args: %s charset=%s" % (
            sql, ds, shard, direct_sql, " ".join(args), charset)
        if expect_rc0:
            self.assertEqual(drc, 0, "direct run failed (test bug?): %s%s" % (show(derr), ctx))
        # On an error the CLI echoes the failing statement (our own text, which differs by the
        # table names we rewrote) between dashes: compare the rest exactly.
        self.assertEqual((prc, show(strip_echo(perr))), (drc, show(strip_echo(derr))),
                         "exit code / stderr differ (direct, proxy)" + ctx)
        self.assertEqual(len(_ECHO.findall(perr)), len(_ECHO.findall(derr)), "echoed statements" + ctx)
        exp = expected_from_direct(dout)
        if pout != exp:
            self.fail("stdout differs from the direct run\n" + diff(exp, pout) + ctx)
        return pout

    def assert_multi_shard(self, sql, shards, args=()):
        """A statement whose rows come from several shards: the column definitions must equal
        every shard's (normalised; Max_length the maximum over shards) and the rows the union
        of the shards' rows (order not specified)."""
        ctx = "\nstatement (proxy): %s\nshards: %s" % (sql, shards)
        # Column definitions.
        prc, pout, perr = run_cli("proxy", ("--column-type-info", "--table") + tuple(args), sql=sql)
        self.assertEqual(prc, 0, "proxy failed: %s%s" % (show(perr), ctx))
        expected_fields = None
        for s in shards:
            drc, dout, derr = run_cli(C.ds_of_shard(s), ("--column-type-info", "--table") + tuple(args),
                                      sql=C.physical_sql(sql, s))
            self.assertEqual(drc, 0, show(derr) + ctx)
            f = parse_fields(expected_from_direct(dout))
            if expected_fields is None:
                expected_fields = f
            else:
                self.assertEqual(len(f), len(expected_fields))
                for a, b in zip(expected_fields, f):
                    a["Max_length"] = str(max(int(a["Max_length"]), int(b["Max_length"]))).encode()
                    for k in a:
                        if k != "Max_length":
                            self.assertEqual(a[k], b[k], "shards disagree on %s (test bug?)%s" % (k, ctx))
        got_fields = parse_fields(pout)
        self.assertEqual(got_fields, expected_fields,
                         "column definitions differ\n" + diff(
                             b"\n".join(repr(x).encode() for x in expected_fields),
                             b"\n".join(repr(x).encode() for x in got_fields)) + ctx)
        # Rows, in batch mode.
        prc, pout, perr = run_cli("proxy", ("-B",) + tuple(args), sql=sql)
        self.assertEqual(prc, 0, show(perr) + ctx)
        header, rows = None, []
        for s in shards:
            drc, dout, derr = run_cli(C.ds_of_shard(s), ("-B",) + tuple(args), sql=C.physical_sql(sql, s))
            self.assertEqual(drc, 0, show(derr) + ctx)
            lines = dout.split(b"\n")[:-1]
            if lines:
                header = lines[0]
                rows += lines[1:]
        plines = pout.split(b"\n")[:-1]
        self.assertEqual(plines[0], header, "column names differ" + ctx)
        self.assertEqual(sorted(plines[1:]), sorted(rows),
                         "rows differ (sorted)\n" + diff(b"\n".join(sorted(rows)), b"\n".join(sorted(plines[1:]))) + ctx)
        self.assertGreater(len(rows), 0, "test picked ids without rows" + ctx)
        return pout


    def assert_same_as_reference(self, sql, ordered=True, args_list=(("--column-type-info", "--table"), ("-B",))):
        """A statement whose rows come from several shards (scatter, or an IN list over
        several shards) must answer what the same SQL answers on the unsharded reference
        database `orders_ref` (ds0), which holds every seeded row in one table of each name.
        ordered: the statement's ORDER BY is total, so rows (and the whole output) must be
        identical; otherwise the column definitions must be, and the rows the same multiset."""
        for args in args_list:
            ctx = "\nstatement (proxy and reference orders_ref on ds0): %s\ncli args: %s" % (sql, " ".join(args))
            prc, pout, perr = run_cli("proxy", args, sql=sql)
            drc, dout, derr = run_cli("ds0", args, sql=sql, database=C.REF_DB)
            self.assertEqual(drc, 0, "reference run failed (test bug?): %s%s" % (show(derr), ctx))
            self.assertEqual((prc, show(perr)), (0, ""), "proxy failed" + ctx)
            exp = expected_from_reference(dout)
            if ordered:
                if pout != exp:
                    self.fail("stdout differs from the reference run\n" + diff(exp, pout, "expected (orders_ref, normalised)") + ctx)
            elif "-B" in args:
                plines, elines = pout.split(b"\n"), exp.split(b"\n")
                self.assertEqual(plines[:1], elines[:1], "column names differ" + ctx)
                self.assertEqual(sorted(plines[1:]), sorted(elines[1:]), "rows differ (sorted)\n"
                                 + diff(b"\n".join(sorted(elines[1:])), b"\n".join(sorted(plines[1:]))) + ctx)
            else:
                self.assertEqual(parse_fields(pout), parse_fields(exp), "column definitions differ" + ctx)
        rc, out, _ = run_cli("ds0", ("-B",), sql=sql, database=C.REF_DB)
        self.assertGreater(len(out.split(b"\n")) - 2, 0, "test picked a statement without rows: " + sql)


class TestCliReads(CliCase):
    """Point reads, joins, aliases, every column type: byte-identical CLI output."""

    @classmethod
    def setUpClass(cls):
        cls.p = C.picked()
        cls.join_ds0 = C.multi_item_order("ds0")
        cls.join_ds1 = C.multi_item_order("ds1")

    def cases(self):
        p = self.p
        out = []
        for key in ("new_ds0", "new_ds1", "legacy_ds0", "legacy_ds1", "lookalike", "null_note_new",
                    "null_note_legacy", "emoji", "emoji_legacy", "cjk", "backslash", "newline", "empty", "eacute"):
            o = p[key]
            out.append((key + ": SELECT *", "SELECT * FROM t_order WHERE order_id = %d" % o["order_id"], o["shard"]))
        o = p["new_ds1"]
        out.append(("quoted id", "SELECT order_id, amount, created_at FROM t_order WHERE order_id = '%d'" % o["order_id"], o["shard"]))
        o = p["legacy_ds1"]
        out.append(("quoted legacy id, keywords in upper/lower case",
                    "select ORDER_ID, Note from t_order WHERE Order_Id = '%d'" % o["order_id"], o["shard"]))
        for o in (self.join_ds0, self.join_ds1):
            out.append(("join with aliases", "SELECT o.order_id, o.status, i.item_no, i.sku, i.qty, i.price FROM t_order o "
                        "JOIN t_order_item i ON i.order_id = o.order_id WHERE o.order_id = %d ORDER BY i.item_no" % o["order_id"], o["shard"]))
            out.append(("join without aliases", "SELECT t_order.order_id, t_order.amount, t_order_item.sku FROM t_order INNER JOIN t_order_item "
                        "ON t_order_item.order_id = t_order.order_id WHERE t_order.order_id = %d ORDER BY t_order_item.item_no" % o["order_id"], o["shard"]))
            out.append(("item table, all columns", "SELECT * FROM t_order_item WHERE order_id = %d ORDER BY item_no" % o["order_id"], o["shard"]))
        o = p["legacy_ds0"]
        out.append(("column and table aliases", "SELECT o.order_id AS id, o.note AS remark, o.amount AS amt, o.created_at AS ts "
                    "FROM t_order AS o WHERE o.order_id = %d" % o["order_id"], o["shard"]))
        o = p["emoji"]
        out.append(("backquotes, qualified name, alias", "SELECT `o`.`order_id`, `o`.`note`, `o`.`created_at` FROM `orders`.`t_order` `o` "
                    "WHERE `o`.`order_id` = %d" % o["order_id"], o["shard"]))
        out.append(("qualified name, qualified columns", "SELECT `t_order`.`order_id`, t_order.status FROM orders.t_order "
                    "WHERE `t_order`.`order_id` = %d" % o["order_id"], o["shard"]))
        o = p["new_ds1"]
        out.append(("expressions over every column type",
                    "SELECT order_id, order_id + 0 AS id_plus, amount, amount * 3 AS triple, user_id / 7 AS ratio, created_at, "
                    "created_at + INTERVAL 1 DAY AS next_day, DATE(created_at) AS d, TIME(created_at) AS t, "
                    "CAST(note AS BINARY) AS raw_note, LENGTH(note) AS len, note IS NULL AS no_note, "
                    "CONCAT(channel, '/', region) AS cr, UNIX_TIMESTAMP(created_at) AS unix_ts, NULL AS nothing "
                    "FROM t_order WHERE order_id = %d" % o["order_id"], o["shard"]))
        for key in ("null_note_legacy", "emoji", "cjk", "backslash"):
            o = p[key]
            out.append((key + ": note functions", "SELECT order_id, note, HEX(note), CHAR_LENGTH(note), COALESCE(note, 'none') AS n "
                        "FROM t_order WHERE order_id = %d" % o["order_id"], o["shard"]))
        # Two ids on one shard: IN with ORDER BY / LIMIT stays single-shard.
        for s in (2, 13):
            a, b, c = C.orders_in_shard(s, 3)
            ids = (a["order_id"], b["order_id"], c["order_id"])
            out.append(("IN on one shard with ORDER BY", "SELECT order_id, amount, status FROM t_order WHERE order_id IN (%d, %d, %d) "
                        "ORDER BY order_id DESC" % ids, s))
            out.append(("IN on one shard with ORDER BY + LIMIT", "SELECT order_id, amount FROM t_order WHERE order_id IN (%d, %d, %d) "
                        "ORDER BY amount, order_id LIMIT 2" % ids, s))
            out.append(("IN on one shard with aggregate", "SELECT COUNT(*), SUM(amount), MAX(created_at) FROM t_order "
                        "WHERE order_id IN (%d, %d, %d)" % ids, s))
        o = p["legacy_ds1"]
        out.append(("context predicate with a legacy id", "SELECT order_id, channel FROM t_order WHERE order_id = %d AND channel = '%s'"
                    % (o["order_id"], o["channel"]), o["shard"]))
        out.append(("DATABASE()", "SELECT DATABASE()", 0))
        return out

    def test_single_shard_reads_table_mode(self):
        for name, sql, shard in self.cases():
            with self.subTest(name, sql=sql):
                self.assert_same_as_direct(sql, shard)

    def test_single_shard_reads_batch_mode(self):
        for name, sql, shard in self.cases():
            with self.subTest(name, sql=sql):
                self.assert_same_as_direct(sql, shard, args=("-B",))

    def test_unknown_ids(self):
        """An id that no layer resolves: MySQL's answer for a row that does not exist."""
        unknown = C.unknown_legacy_id()
        stmts = [
            "SELECT COUNT(*) FROM t_order WHERE order_id = %d" % unknown,
            "SELECT COUNT(*), SUM(amount), MAX(created_at), MIN(note) FROM t_order WHERE order_id = %d" % unknown,
            "SELECT * FROM t_order WHERE order_id = %d" % unknown,
            "SELECT order_id, note FROM t_order WHERE order_id = '%d'" % unknown,
            "SELECT COUNT(*) FROM t_order WHERE order_id = 99999999999999999999",
            "SELECT COUNT(*) FROM t_order_item WHERE order_id = %d" % unknown,
        ]
        for sql in stmts:
            with self.subTest(sql=sql):
                self.assert_same_as_direct(sql, 0)
                self.assert_same_as_direct(sql, 17)

    def test_multi_shard_in_over_two_servers(self):
        p = self.p
        a, b = p["new_ds0"], p["new_ds1"]
        la, lb = p["legacy_ds0"], p["legacy_ds1"]
        cn = [C.pick(lambda o, s=s: o["shard"] == s) for s in (8, 10)]  # CN spans both servers
        cases = [
            ("SELECT order_id, channel, amount, note, created_at FROM t_order WHERE order_id IN (%d, %d)"
             % (a["order_id"], b["order_id"]), [a["shard"], b["shard"]]),
            ("SELECT * FROM t_order WHERE order_id IN (%d, %d, %d, %d)"
             % (la["order_id"], lb["order_id"], cn[0]["order_id"], cn[1]["order_id"]),
             sorted({la["shard"], lb["shard"], cn[0]["shard"], cn[1]["shard"]})),
            ("SELECT o.order_id, i.item_no, i.sku, i.price FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id "
             "WHERE o.order_id IN (%d, %d)" % (self.join_ds0["order_id"], self.join_ds1["order_id"]),
             sorted({self.join_ds0["shard"], self.join_ds1["shard"]})),
        ]
        for sql, shards in cases:
            with self.subTest(sql=sql):
                self.assertGreater(len({C.ds_of_shard(s) for s in shards}), 1)
                self.assert_multi_shard(sql, shards)

    def test_multi_shard_order_by_matches_reference(self):
        """IN over shards on both servers with ORDER BY / LIMIT / aggregates: merged exactly,
        the answer of one table holding all the rows (orders_ref)."""
        a, b = self.p["new_ds0"], self.p["new_ds1"]
        self.assertNotEqual(a["ds"], b["ds"])
        ids = "%d, %d" % (a["order_id"], b["order_id"])
        la, lb = self.p["legacy_ds0"], self.p["legacy_ds1"]
        ids4 = "%d, %d, %d, %d" % (a["order_id"], b["order_id"], la["order_id"], lb["order_id"])
        cases = [
            "SELECT order_id FROM t_order WHERE order_id IN (%s) ORDER BY order_id" % ids,
            "SELECT order_id FROM t_order WHERE order_id IN (%s) ORDER BY order_id DESC" % ids,
            "SELECT order_id FROM t_order WHERE order_id IN (%s) ORDER BY amount, order_id LIMIT 1" % ids,
            "SELECT order_id, amount, note, created_at FROM t_order WHERE order_id IN (%s) "
            "ORDER BY amount DESC, order_id LIMIT 2 OFFSET 1" % ids4,
            "SELECT COUNT(*) FROM t_order WHERE order_id IN (%s)" % ids,
            "SELECT COUNT(*), SUM(amount), MIN(created_at), MAX(note) FROM t_order WHERE order_id IN (%s)" % ids4,
        ]
        if a["amount"] != b["amount"]:  # the statement of the old check: a total order only without a tie
            cases.append("SELECT order_id FROM t_order WHERE order_id IN (%s) ORDER BY amount LIMIT 1" % ids)
        for sql in cases:
            with self.subTest(sql=sql):
                self.assert_same_as_reference(sql)

    def test_scatter_select_matches_reference(self):
        """No usable order id (WHERE user_id = <seeded user>): every shard is read and the
        rows merged exactly as orders_ref answers (in order where ORDER BY is total)."""
        both = C.scatter_users()
        self.assertGreaterEqual(len(both), 3, "no seeded users with orders on both servers")
        u, u2, u3 = both[:3]
        eu = [o for o in C.reference_orders().values() if o["user_id"] == u and o["channel"] == "EU_CHANNEL"]
        ordered = [
            "SELECT order_id, channel, amount, status, note, created_at FROM t_order WHERE user_id = %d ORDER BY order_id" % u,
            "SELECT * FROM t_order WHERE user_id = %d ORDER BY created_at DESC, order_id" % u,
            "SELECT order_id, amount FROM t_order WHERE user_id = %d ORDER BY amount DESC, order_id LIMIT 3" % u,
            "SELECT order_id, amount FROM t_order WHERE user_id = %d ORDER BY amount, order_id LIMIT 2 OFFSET 2" % u,
            "SELECT order_id, note FROM t_order WHERE user_id = %d ORDER BY note, order_id" % u,
            "SELECT COUNT(*), SUM(amount), MIN(created_at), MAX(note), AVG(amount) FROM t_order WHERE user_id = %d" % u,
            "SELECT channel, COUNT(*) AS n, SUM(amount) AS total FROM t_order WHERE user_id IN (%d, %d, %d) "
            "GROUP BY channel ORDER BY channel" % (u, u2, u3),
            "SELECT DISTINCT channel FROM t_order WHERE user_id IN (%d, %d, %d) ORDER BY channel" % (u, u2, u3),
            "SELECT o.order_id, i.item_no, i.sku, i.qty, i.price FROM t_order o JOIN t_order_item i "
            "ON i.order_id = o.order_id WHERE o.user_id = %d ORDER BY o.order_id, i.item_no" % u,
            "SELECT COUNT(*) FROM t_order WHERE user_id = 0",
        ]
        if eu:  # a channel named: its shards only
            ordered.append("SELECT order_id, region, amount FROM t_order WHERE channel = 'EU_CHANNEL' AND user_id = %d "
                           "ORDER BY order_id" % u)
        for sql in ordered:
            with self.subTest(sql=sql):
                self.assert_same_as_reference(sql)
        sql = "SELECT order_id, channel, amount, note FROM t_order WHERE user_id = %d" % u
        with self.subTest(sql=sql, ordered=False):
            self.assert_same_as_reference(sql, ordered=False)

    def test_scatter_update_is_refused_cleanly(self):
        """A scatter UPDATE (no order id; scatter_writes = "refuse", the default) is error
        1235 (42000) and changes nothing; with --force the session goes on. The row it would
        change is a fresh one written directly on its shard, under a user id of its own."""
        oid = C.fresh_new_id("BIZ_CHANNEL")
        shard = C.shard_of(oid, "BIZ_CHANNEL")
        user = 900_000_000 + C._rng.randrange(1_000_000)
        C.admin_query(C.ds_of_shard(shard),
                      "INSERT INTO %s.t_order_%d (%s) VALUES (%%s, 'BIZ_CHANNEL', 'HK', %%s, 5.00, 'NEW', 'scatter', "
                      "'2025-05-06 07:08:09.123')" % (C.PHYSICAL_DB, shard, C.ORDER_COLUMNS), (oid, user))
        try:
            before = C.physical_row(oid, shard)
            o = self.p["new_ds0"]
            for upd in ("UPDATE t_order SET status = 'SCATTERED' WHERE user_id = %d" % user,
                        "UPDATE t_order SET amount = amount WHERE user_id = %d" % user):
                script = "%s;\nSELECT order_id FROM t_order WHERE order_id = %d;\n" % (upd, o["order_id"])
                with self.subTest(upd):
                    rc, out, err = run_cli("proxy", ("-B", "--force"), stdin=script.encode())
                    self.assertRegex(show(err), r"(?m)^ERROR 1235 \(42000\)", "not error 1235: %s" % show(err))
                    self.assertEqual(show(out), "order_id\n%d\n" % o["order_id"], "session not usable after: " + upd)
                    self.assertEqual(C.physical_row(oid, shard), before, "the refused UPDATE changed the row")
        finally:
            C.purge_order(oid)


class TestCliMetadataStatements(CliCase):

    def test_describe(self):
        for stmt in ("DESCRIBE t_order", "DESCRIBE t_order_item", "DESC orders.t_order", "SHOW COLUMNS FROM t_order",
                     "SHOW FULL COLUMNS FROM t_order_item", "EXPLAIN t_order"):
            for args in (("--column-type-info", "--table"), ("-B",)):
                with self.subTest(stmt, args=args):
                    # "from its first shard": shard 0 on ds0.
                    self.assert_same_as_direct(stmt, 0, args=args)

    def test_show_create_table(self):
        """Answered from the first shard under the logical name: the same text as the
        reference copy (orders_ref.t_order has the same DDL under the name t_order)."""
        for table in ("t_order", "t_order_item"):
            with self.subTest(table):
                sql = "SHOW CREATE TABLE %s" % table
                self.assert_same_as_direct(sql, 0, args=("-B",), direct_sql="SHOW CREATE TABLE orders_ref.%s" % table)

    def test_show_tables_rows(self):
        """Logical tables (and the unsharded tables of the default datasource), one each."""
        rc, out, err = run_cli("proxy", ("-B",), sql="SHOW TABLES")
        self.assertEqual(rc, 0, show(err))
        self.assertEqual(show(out), "Tables_in_orders\nt_merchant\nt_order\nt_order_item\n")
        rc, out, err = run_cli("proxy", ("-B",), sql="SHOW TABLES LIKE 't_order%'")
        self.assertEqual((rc, show(err)), (0, ""))
        self.assertEqual(show(out), "Tables_in_orders (t_order%)\nt_order\nt_order_item\n")

    def test_show_tables_column_definition(self):
        """The column definition of SHOW TABLES equals MariaDB's (the proxy builds this result
        itself); compared with SHOW TABLES on ds0's `orders` database."""
        rc, pout, err = run_cli("proxy", ("--column-type-info", "--table"), sql="SHOW TABLES")
        self.assertEqual(rc, 0, show(err))
        rc, dout, err = run_cli("ds0", ("--column-type-info", "--table"), sql="SHOW TABLES")
        pf, df = parse_fields(pout), parse_fields(dout)
        for f in pf + df:
            f.pop("Max_length", None)  # the proxy lists more tables
        self.assertEqual(pf, df, "SHOW TABLES column definition differs from MariaDB's:\n" +
                         diff(b"\n".join(b"%s: %s" % (k.encode(), v) for f in df for k, v in f.items()),
                              b"\n".join(b"%s: %s" % (k.encode(), v) for f in pf for k, v in f.items()),
                              "MariaDB (ds0)", "proxy"))


class TestCliSessions(CliCase):
    """How people use the CLI: several statements per -e, source files, character sets, errors."""

    @classmethod
    def setUpClass(cls):
        cls.p = C.picked()
        cls.created = []

    @classmethod
    def tearDownClass(cls):
        for oid in cls.created:
            C.purge_order(oid)

    def test_multi_statement_e(self):
        a, b = self.p["new_ds1"], self.p["legacy_ds1"]  # both on ds1 so one direct run can compare
        self.assertEqual(a["ds"], b["ds"])
        sql = ("SELECT order_id, note FROM t_order WHERE order_id = %d; SELECT * FROM t_order_item WHERE order_id = %d; "
               "SELECT 1 AS one; SELECT order_id, amount FROM t_order WHERE order_id = %d" % (a["order_id"], a["order_id"], b["order_id"]))
        direct = ("SELECT order_id, note FROM order_shards.t_order_%d WHERE order_id = %d; "
                  "SELECT * FROM order_shards.t_order_item_%d WHERE order_id = %d; SELECT 1 AS one; "
                  "SELECT order_id, amount FROM order_shards.t_order_%d WHERE order_id = %d"
                  % (a["shard"], a["order_id"], a["shard"], a["order_id"], b["shard"], b["order_id"]))
        for args in (("--column-type-info", "--table"), ("-B",), ()):
            with self.subTest(args=args):
                self.assert_same_as_direct(sql, a["shard"], args=args, direct_sql=direct)

    def test_delimiter_sends_one_multi_statement_query(self):
        """With DELIMITER changed the CLI sends `a; b` as ONE COM_QUERY (it negotiates
        MULTI_STATEMENTS): the proxy must run both, like the server."""
        a = self.p["new_ds0"]
        body = "DELIMITER //\nSELECT order_id, status FROM t_order WHERE order_id = %d; SELECT 2 AS two //\nDELIMITER ;\nSELECT 3 AS three;\n" % a["order_id"]
        for args in (("--column-type-info", "--table"), ("-B",)):
            with self.subTest(args=args):
                self.assert_same_as_direct(body, a["shard"], args=args, stdin_encoding="utf-8")

    def test_source_file(self):
        a, b = self.p["emoji"], self.p["cjk"]
        stmts_proxy = ("-- a comment line\n"
                       "SELECT order_id, note FROM t_order WHERE order_id = %d;\n"
                       "/* block comment */ SELECT order_id, note\n  FROM t_order\n  WHERE order_id = %d;\n"
                       "# hash comment\nSELECT COUNT(*) FROM t_order_item WHERE order_id = %d;\n"
                       % (a["order_id"], a["order_id"], a["order_id"]))
        with tempfile.TemporaryDirectory() as d:
            pf, df = os.path.join(d, "proxy.sql"), os.path.join(d, "direct.sql")
            with open(pf, "w", encoding="utf-8") as f:
                f.write(stmts_proxy)
            with open(df, "w", encoding="utf-8") as f:
                f.write(C.physical_sql(stmts_proxy, a["shard"]))
            for args in (("--column-type-info", "--table"), ("-B",)):
                with self.subTest(args=args):
                    self.assert_same_as_direct("source " + pf, a["shard"], args=args, direct_sql="source " + df)
        _ = b

    def test_character_sets(self):
        """latin1 and utf8mb4 connections reading non-ASCII notes (é, CJK, emoji)."""
        for key in ("eacute", "eacute_emoji", "cjk", "emoji", "backslash"):
            o = self.p[key]
            sql = "SELECT order_id, note, HEX(note) AS hx FROM t_order WHERE order_id = %d" % o["order_id"]
            for charset in ("latin1", "utf8mb4", "utf8", None):
                for args in (("--column-type-info", "--table"), ("-B",)):
                    with self.subTest(key, charset=charset, args=args):
                        self.assert_same_as_direct(sql, o["shard"], args=args, charset=charset)

    def test_latin1_statement_text(self):
        """A statement sent in latin1 bytes (é as 0xE9): analysed and rewritten without
        mangling the literal."""
        o = self.p["eacute"]
        sql = ("SELECT order_id, note, note LIKE '%%é%%' AS has_e, 'crème brûlée' AS lit, HEX('é') AS hx "
               "FROM t_order WHERE order_id = %d;\n" % o["order_id"])
        for args in (("--column-type-info", "--table"), ("-B",)):
            with self.subTest(args=args):
                out = self.assert_same_as_direct(sql, o["shard"], args=args, charset="latin1", stdin_encoding="latin1")
                self.assertIn(b"E9", out)

    def test_latin1_insert_is_stored_as_utf8mb4(self):
        """A row written through a latin1 CLI session holds the right characters."""
        oid = C.fresh_new_id("EU_CHANNEL")
        self.created.append(oid)
        note = "Crème brûlée à la façon d'Ézé"
        sql = ("INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) VALUES "
               "(%d, 'EU_CHANNEL', 'FR', 7, 12.50, 'CREATED', '%s', '2025-02-03 04:05:06.789');\n"
               % (oid, note.replace("'", "\\'")))
        rc, out, err = run_cli("proxy", ("-B",), stdin=sql.encode("latin1"), charset="latin1")
        self.assertEqual((rc, show(err)), (0, ""), "statement: " + sql)
        shard = C.shard_of(oid, "EU_CHANNEL")
        self.assertEqual(C.shards_holding(oid), [shard])
        self.assertEqual(C.physical_row(oid, shard)[6], note)

    def test_errors_keep_session_usable_with_force(self):
        """Batch mode with --force: each failing statement prints the backend's error (same
        code, SQLSTATE and message as the server) and the next statements still run."""
        a = self.p["new_ds0"]
        existing = C.orders_in_shard(a["shard"], 1)[0]
        script = ("SELECT 1 AS one;\n"
                  "SELEC bad syntax here;\n"
                  "SELECT order_id, note FROM t_order WHERE order_id = %d;\n"
                  "SELECT no_such_column FROM t_order WHERE order_id = %d;\n"
                  "SELECT * FROM no_such_table;\n"
                  "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) "
                  "VALUES (%d, 'EU_CHANNEL', 'GB', 1, 1.00, 'CREATED', NOW());\n"
                  "SELECT order_id, amount FROM t_order WHERE order_id = %d;\n"
                  "SELECT 'still alive' AS last;\n"
                  % (a["order_id"], a["order_id"], existing["order_id"], a["order_id"]))
        for args in (("-B", "--force"), ("--table", "--force", "--column-type-info")):
            with self.subTest(args=args):
                out = self.assert_same_as_direct(script, a["shard"], args=args, stdin_encoding="utf-8",
                                                 expect_rc0=False)
                self.assertIn(b"still alive", out)
        # Without --force the CLI stops at the first error, with the same message.
        self.assert_same_as_direct(script, a["shard"], args=("-B",), stdin_encoding="utf-8", expect_rc0=False)

    def test_syntax_error_on_sharded_table(self):
        """Invalid SQL naming a sharded table is a syntax error (1064, SQLSTATE 42000) as on
        MariaDB, not a "not supported yet" error; the session goes on (--force)."""
        a = self.p["new_ds0"]
        for bad in ("SELECT 1 FROM t_order WHERE order_id = %d AND" % a["order_id"],
                    "SELECT order_id FROM t_order WHERE order_id = = %d" % a["order_id"],
                    "UPDATE t_order SET WHERE order_id = %d" % a["order_id"]):
            script = "%s;\nSELECT 'still alive' AS last;\n" % bad
            with self.subTest(bad):
                rc, out, err = run_cli("proxy", ("-B", "--force"), stdin=script.encode())
                drc, dout, derr = run_cli(a["ds"], ("-B", "--force"), stdin=C.physical_sql(script, a["shard"]).encode())
                self.assertEqual(show(out), "last\nstill alive\n", "session not usable after: " + bad)
                m = re.search(rb"(?m)^ERROR (\d+) \((\w+)\)", err)
                self.assertIsNotNone(m, show(err))
                dm = re.search(rb"(?m)^ERROR (\d+) \((\w+)\)", derr)
                self.assertEqual(m.groups(), dm.groups(),
                                 "error code/SQLSTATE differ from MariaDB's for %r\n  direct: %s\n  proxy:  %s"
                                 % (bad, show(strip_echo(derr)).strip(), show(strip_echo(err)).strip()))

    def test_interactive_style_commands(self):
        """`status`-free client commands that talk to the server: `use`, `\\G` output."""
        a = self.p["cjk"]
        script = ("use orders\nSELECT order_id, note, amount FROM t_order WHERE order_id = %d\\G\n"
                  "SELECT DATABASE();\n" % a["order_id"])
        self.assert_same_as_direct(script, a["shard"], args=("-B",), stdin_encoding="utf-8")
        self.assert_same_as_direct(script, a["shard"], args=("--table",), stdin_encoding="utf-8")


if __name__ == "__main__":
    unittest.main(verbosity=2)
