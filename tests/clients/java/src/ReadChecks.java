import java.io.ByteArrayInputStream;
import java.io.StringReader;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/** Prepared reads: point selects by every id form and setter, repeated executions, joins, NULL ids, value types. */
final class ReadChecks extends ProxyClientSuite {

    static List<Order> pointIds() {
        return List.of(P.get("newDs0"), P.get("newDs1"), P.get("legacyDs0"), P.get("legacyDs1"), P.get("lookalike"),
            P.get("emoji"), P.get("emojiLegacy"), P.get("nullNote"), P.get("cjkDs1"));
    }

    interface Setter {
        void set(PreparedStatement ps, int i, long id) throws Exception;
    }

    static void run(Mode m) {
        String tag = "[" + m.name() + "] ";
        Object[][] setters = {
            {"setLong", (Setter) (ps, i, id) -> ps.setLong(i, id)},
            {"setString", (Setter) (ps, i, id) -> ps.setString(i, Long.toUnsignedString(id))},
            {"setBigDecimal", (Setter) (ps, i, id) -> ps.setBigDecimal(i, new BigDecimal(Long.toUnsignedString(id)))},
            {"setObject(BigInteger)", (Setter) (ps, i, id) -> ps.setObject(i, new BigInteger(Long.toUnsignedString(id)))},
        };
        for (Object[] st : setters) {
            String sname = (String) st[0];
            Setter setter = (Setter) st[1];
            check(tag + "point select by new-format, legacy and look-alike ids, " + sname, () -> {
                try (Conns c = new Conns(m.props())) {
                    for (Order o : pointIds()) {
                        Snap s = compareQuery(c, SQL_ORDER, o.shard, sname + "(1, " + o.id + ") -- " + o,
                            ps -> setter.set(ps, 1, o.id));
                        expectRows(s, 1, SQL_ORDER + " with " + o);
                    }
                }
            });
        }

        check(tag + "SELECT * point select", () -> {
            try (Conns c = new Conns(m.props())) {
                for (Order o : List.of(P.get("newDs0"), P.get("legacyDs1"))) {
                    expectRows(compareQuery(c, SQL_STAR, o.shard, "setLong(1, " + o.id + ") -- " + o, ps -> ps.setLong(1, o.id)), 1, SQL_STAR);
                }
            }
        });

        check(tag + "one PreparedStatement executed repeatedly (ids on both datasources, setLong/setString/setBigDecimal, NULL, unknown id)", () -> repeated(m));

        for (String cache : new String[] {"cachePrepStmts=true", "cachePrepStmts=false"}) {
            check(tag + "same statement text prepared again and again on one connection (" + cache + ")", () -> {
                try (Conns c = new Conns(m.props() + "&" + cache)) {
                    for (int i = 0; i < 6; i++) {
                        Order o = i % 3 == 0 ? P.get("newDs0") : i % 3 == 1 ? P.get("newDs1") : P.get("legacyDs0");
                        expectRows(compareQuery(c, SQL_ORDER, o.shard, "prepare #" + (i + 1) + ": setLong(1, " + o.id + ") -- " + o,
                            ps -> ps.setLong(1, o.id)), 1, SQL_ORDER);
                    }
                }
            });
        }

        check(tag + "40 distinct statements open at once on one connection, executed round-robin on both datasources", () -> {
            try (Connection pc = proxy(m.props())) {
                List<PreparedStatement> open = new ArrayList<>();
                try {
                    for (int k = 0; k < 40; k++) {
                        open.add(pc.prepareStatement("SELECT order_id, amount, note, " + k + " AS k FROM t_order WHERE order_id = ?"));
                    }
                    List<Order> ids = List.of(P.get("newDs0"), P.get("newDs1"), P.get("legacyDs0"), P.get("legacyDs1"), P.get("emoji"));
                    int bad = 0;
                    for (int round = 0; round < 3; round++) {
                        for (int k = 0; k < 40; k++) {
                            Order o = ids.get((k + round) % ids.size());
                            PreparedStatement ps = open.get(k);
                            ps.setLong(1, o.id);
                            String got;
                            try (ResultSet rs = ps.executeQuery()) {
                                got = rs.next() ? rs.getLong(1) + " " + rs.getBigDecimal(2) + " " + rs.getString(3) + " " + rs.getInt(4) + (rs.next() ? " +more rows" : "") : "no row";
                            } catch (SQLException e) {
                                got = errText(e);
                            }
                            String exp = o.id + " " + o.amount + " " + o.note + " " + k;
                            if (!got.equals(exp) && bad++ < 5) {
                                problems.add("statement #" + k + " (SELECT order_id, amount, note, " + k + " AS k FROM t_order WHERE order_id = ?; " + m.props()
                                    + ") round " + (round + 1) + " with " + o + ": expected " + Snap.quote(exp) + ", the proxy gave " + Snap.quote(got));
                            }
                        }
                    }
                } finally {
                    open.forEach(ProxyClientSuite::closeQuietly);
                }
                expectUsable(pc, "40 open statements");
            }
        });

        for (String alias : new String[] {"", "useOldAliasMetadataBehavior=true"}) {
            check(tag + "aliases and column labels" + (alias.isEmpty() ? "" : " (" + alias + ")"), () -> {
                try (Conns c = new Conns(m.props() + (alias.isEmpty() ? "" : "&" + alias))) {
                    for (Order o : List.of(P.get("newDs1"), P.get("legacyDs0"))) {
                        Snap s = compareQuery(c, SQL_ALIAS, o.shard, "setLong(1, " + o.id + ") -- " + o, ps -> ps.setLong(1, o.id));
                        expectRows(s, 1, SQL_ALIAS);
                        if (s != null) {
                            String table = s.cols.get(0)[Snap.F_TABLE];
                            expect(table.equals(alias.isEmpty() ? "t_order" : "o"),
                                SQL_ALIAS + ": getTableName(1) through the proxy is '" + table + "'");
                            expect(s.cols.get(0)[Snap.F_LABEL].equals("id") && s.cols.get(3)[Snap.F_LABEL].equals("memo"),
                                SQL_ALIAS + ": labels " + s.cols.get(0)[Snap.F_LABEL] + ", " + s.cols.get(3)[Snap.F_LABEL]);
                        }
                    }
                }
            });
        }

        check(tag + "join of t_order and t_order_item (both datasources, one statement re-executed)", () -> {
            try (Conns c = new Conns(m.props())) {
                for (Order o : List.of(MULTI_ITEM.get("ds0"), MULTI_ITEM.get("ds1"))) {
                    Snap s = compareQuery(c, SQL_JOIN, o.shard, "setLong(1, " + o.id + ") -- " + o, ps -> ps.setLong(1, o.id));
                    if (s != null) {
                        expect(s.rows.size() >= 2, SQL_JOIN + ": expected at least 2 item rows for " + o + ", got " + s.rows.size());
                        expect(s.cols.get(3)[Snap.F_TABLE].equals("t_order_item") && s.cols.get(0)[Snap.F_TABLE].equals("t_order"),
                            SQL_JOIN + ": table names through the proxy " + s.cols.get(0)[Snap.F_TABLE] + ", " + s.cols.get(3)[Snap.F_TABLE]);
                    }
                }
                // one PreparedStatement, alternating datasources
                try (PreparedStatement pp = c.p.prepareStatement(SQL_JOIN)) {
                    Map<Integer, PreparedStatement> dps = new HashMap<>();
                    try {
                        for (int i = 0; i < 4; i++) {
                            Order o = MULTI_ITEM.get(i % 2 == 0 ? "ds1" : "ds0");
                            PreparedStatement dp = dps.computeIfAbsent(o.shard, sh -> prep(c, SQL_JOIN, sh));
                            compare(ctx(c.props, SQL_JOIN, "execution #" + (i + 1) + " of one statement: setLong(1, " + o.id + ") -- " + o, o.shard),
                                exec(dp, ps -> ps.setLong(1, o.id)), exec(pp, ps -> ps.setLong(1, o.id)));
                        }
                    } finally {
                        dps.values().forEach(ProxyClientSuite::closeQuietly);
                    }
                }
            }
        });

        check(tag + "NULL order id: empty result like MariaDB", () -> {
            try (Conns c = new Conns(m.props())) {
                Object[][] nulls = {
                    {"setNull(1, Types.BIGINT)", (Binder) ps -> ps.setNull(1, Types.BIGINT)},
                    {"setNull(1, Types.VARCHAR)", (Binder) ps -> ps.setNull(1, Types.VARCHAR)},
                    {"setString(1, null)", (Binder) ps -> ps.setString(1, null)},
                    {"setObject(1, null)", (Binder) ps -> ps.setObject(1, null)},
                };
                for (Object[] n : nulls) {
                    for (String sql : List.of(SQL_ORDER, SQL_JOIN)) {
                        expectRows(compareQuery(c, sql, 0, (String) n[0], (Binder) n[1]), 0, sql + " with " + n[0]);
                    }
                }
                long unknown = unknownLegacyId();
                expectRows(compareQuery(c, SQL_ORDER, 0, "setLong(1, " + unknown + ") -- a legacy id the index does not know",
                    ps -> ps.setLong(1, unknown)), 0, SQL_ORDER + " with an unknown legacy id");
            }
        });

        check(tag + "IN list of three ids on one shard", () -> {
            String sql = "SELECT " + ORDER_COLS + " FROM t_order WHERE order_id IN (?, ?, ?) ORDER BY order_id";
            try (Conns c = new Conns(m.props())) {
                List<Order> t = sameShardTrio;
                expectRows(compareQuery(c, sql, t.get(0).shard, "setLong x3: " + t,
                    ps -> {
                        ps.setLong(1, t.get(2).id);
                        ps.setString(2, Long.toString(t.get(0).id));
                        ps.setLong(3, t.get(1).id);
                    }), 3, sql);
            }
        });

        check(tag + "emoji, DECIMAL and DATETIME(3) values and parameters", () -> {
            try (Conns c = new Conns(m.props())) {
                for (Order o : List.of(P.get("emoji"), P.get("emojiLegacy"), P.get("cjkDs1"), P.get("newDs0"))) {
                    Snap s = compareQuery(c, SQL_TYPES, o.shard,
                        "setLong(1, " + o.id + "), setString(2, " + Snap.quote(o.note) + "), setBigDecimal(3, " + o.amount
                            + "), setTimestamp(4, " + o.createdAt + ") -- " + o,
                        ps -> {
                            ps.setLong(1, o.id);
                            ps.setString(2, o.note);
                            ps.setBigDecimal(3, o.amount);
                            ps.setTimestamp(4, o.createdAt);
                        });
                    expectRows(s, 1, SQL_TYPES + " for " + o);
                    if (s != null && s.rows.size() == 1) {
                        expect(o.note.equals(s.value(0, "note")), "note through the proxy " + Snap.quote(String.valueOf(s.value(0, "note")))
                            + ", reference " + Snap.quote(o.note));
                        expect(o.createdAt.equals(s.value(0, "created_at")), "created_at through the proxy " + s.value(0, "created_at")
                            + ", reference " + o.createdAt);
                    }
                }
            }
        });

        check(tag + "binary values: VARBINARY, MEDIUMBLOB and byte[] parameters (all 256 byte values)", () -> {
            byte[] tail = "\ud83d\ude80\u00e9\u0000".getBytes(StandardCharsets.UTF_8);
            byte[] raw = new byte[256 + tail.length];
            for (int i = 0; i < 256; i++) {
                raw[i] = (byte) i;
            }
            System.arraycopy(tail, 0, raw, 256, tail.length);
            String hex = hex(raw);
            try (Conns c = new Conns(m.props())) {
                for (Order o : List.of(P.get("emoji"), P.get("legacyDs1"))) {
                    Snap s = compareQuery(c, SQL_BIN, o.shard, "setBytes(1..3, <263 bytes: 0x00..0xff + UTF-8 of rocket, e-acute, NUL>), setLong(4, " + o.id + ") -- " + o,
                        ps -> {
                            ps.setBytes(1, raw);
                            ps.setBytes(2, raw);
                            ps.setBytes(3, raw);
                            ps.setLong(4, o.id);
                        });
                    expectRows(s, 1, SQL_BIN);
                    if (s != null && s.rows.size() == 1) {
                        expect(hex.equals(s.value(0, "raw_hex")), "HEX(?) of the byte[] parameter through the proxy: " + s.value(0, "raw_hex"));
                        expect(Long.valueOf(raw.length).equals(((Number) s.value(0, "raw_len")).longValue()),
                            "LENGTH(?) through the proxy: " + s.value(0, "raw_len"));
                    }
                }
            }
        });

        check(tag + "streamed parameters (setBinaryStream 300 KB, setCharacterStream; COM_STMT_SEND_LONG_DATA when server-prepared)", () -> {
            byte[] big = new byte[300_000];
            new Random(42).nextBytes(big);
            String md5 = Snap.md5Hex(big);
            try (Conns c = new Conns(m.props())) {
                for (Order o : List.of(P.get("newDs1"), P.get("newDs0"))) {
                    Snap s = compareQuery(c, SQL_LONG, o.shard, "setBinaryStream(1, <300000 bytes>), setBinaryStream(2, <same>), setLong(3, " + o.id + ")",
                        ps -> {
                            ps.setBinaryStream(1, new ByteArrayInputStream(big));
                            ps.setBinaryStream(2, new ByteArrayInputStream(big));
                            ps.setLong(3, o.id);
                        });
                    expectRows(s, 1, SQL_LONG);
                    if (s != null && s.rows.size() == 1) {
                        expect(((Number) s.value(0, "len")).longValue() == big.length, "LENGTH(?) of the stream through the proxy: " + s.value(0, "len"));
                        expect(md5.equals(s.value(0, "md5")), "MD5(?) of the stream through the proxy: " + s.value(0, "md5") + ", expected " + md5);
                    }
                }
                Order e = P.get("emoji");
                String sql = SQL_ORDER + " AND note = ?";
                expectRows(compareQuery(c, sql, e.shard, "setLong(1, " + e.id + "), setCharacterStream(2, " + Snap.quote(e.note) + ")",
                    ps -> {
                        ps.setLong(1, e.id);
                        ps.setCharacterStream(2, new StringReader(e.note));
                    }), 1, sql);
                // the same statement re-executed after a streamed execution, without streams
                try (PreparedStatement pp = c.p.prepareStatement(SQL_LONG)) {
                    for (int i = 0; i < 3; i++) {
                        byte[] small = ("round " + i).getBytes(StandardCharsets.UTF_8);
                        Order o = i % 2 == 0 ? P.get("newDs0") : P.get("newDs1");
                        if (i == 0) {
                            pp.setBinaryStream(1, new ByteArrayInputStream(big));
                            pp.setBinaryStream(2, new ByteArrayInputStream(big));
                        } else {
                            pp.setBytes(1, small);
                            pp.setBytes(2, small);
                        }
                        pp.setLong(3, o.id);
                        try (ResultSet rs = pp.executeQuery()) {
                            boolean row = rs.next();
                            long len = row ? rs.getLong("len") : -1;
                            String md = row ? rs.getString("md5") : null;
                            long expLen = i == 0 ? big.length : small.length;
                            String expMd5 = i == 0 ? md5 : Snap.md5Hex(small);
                            expect(row && len == expLen && expMd5.equals(md),
                                SQL_LONG + " execution #" + (i + 1) + " of one statement (" + (i == 0 ? "streams" : "setBytes after streams")
                                    + "): expected len " + expLen + " md5 " + expMd5 + ", the proxy gave " + (row ? len + " " + md : "no row"));
                        }
                    }
                }
            }
        });

        check(tag + "PreparedStatement metadata before execution (column and parameter metadata)", () -> {
            try (Conns c = new Conns(m.props())) {
                for (String sql : List.of(SQL_ORDER, SQL_ALIAS, SQL_JOIN, SQL_TYPES, INSERT_ORDER, UPDATE_ORDER)) {
                    Snap pm = null, dm = null;
                    int pc = -1, dc = -1;
                    String pcls = null, dcls = null;
                    try (PreparedStatement pp = c.p.prepareStatement(sql); PreparedStatement dp = c.d("ds0").prepareStatement(physical(sql, 0))) {
                        pcls = pp.getClass().getSimpleName();
                        dcls = dp.getClass().getSimpleName();
                        dm = Snap.meta(dp.getMetaData());
                        dc = dp.getParameterMetaData().getParameterCount();
                        try {
                            pm = Snap.meta(pp.getMetaData());
                            pc = pp.getParameterMetaData().getParameterCount();
                        } catch (SQLException e) {
                            problems.add(ctx(c.props, sql, "(none: getMetaData()/getParameterMetaData())", 0) + "\nproxy: " + describe(e));
                            continue;
                        }
                    }
                    String diff = Snap.diff(dm, pm);
                    if (!diff.isEmpty() || pc != dc || !pcls.equals(dcls)) {
                        problems.add(ctx(c.props, sql, "(none: getMetaData()/getParameterMetaData() before execution)", 0)
                            + "\nparameter count: direct " + dc + ", proxy " + pc + "; statement class: direct " + dcls + ", proxy " + pcls
                            + "\ndifferences:\n" + indent(diff.isEmpty() ? "(none in column metadata)" : diff, "  "));
                    }
                }
            }
        });

        check(tag + "SELECT without an order id (scatter) and IN over two datasources with ORDER BY/LIMIT: as the unsharded reference orders_ref answers", () -> {
            List<Long> users = scatterUsers();
            long u = users.get(0), u2 = users.get(1);
            Order a = P.get("newDs0"), b = P.get("newDs1");
            Object[][] cases = {
                {"SELECT " + ORDER_COLS + " FROM t_order WHERE user_id = ? ORDER BY order_id", (Binder) ps -> ps.setLong(1, u), "setLong(1, " + u + ")"},
                {"SELECT * FROM t_order WHERE user_id = ? ORDER BY created_at DESC, order_id", (Binder) ps -> ps.setString(1, Long.toString(u)), "setString(1, \"" + u + "\")"},
                {"SELECT order_id, amount, note FROM t_order WHERE user_id = ? ORDER BY amount DESC, order_id LIMIT ?",
                    (Binder) ps -> { ps.setLong(1, u); ps.setInt(2, 3); }, "setLong(1, " + u + "), setInt(2, 3)"},
                {"SELECT COUNT(*) AS n, SUM(amount) AS total, MIN(created_at) AS first, MAX(note) AS mx, AVG(amount) AS mean FROM t_order WHERE user_id = ?",
                    (Binder) ps -> ps.setLong(1, u), "setLong(1, " + u + ")"},
                {"SELECT channel, COUNT(*) AS n, SUM(amount) AS total FROM t_order WHERE user_id IN (?, ?) GROUP BY channel ORDER BY channel",
                    (Binder) ps -> { ps.setLong(1, u); ps.setLong(2, u2); }, "setLong(1, " + u + "), setLong(2, " + u2 + ")"},
                {"SELECT order_id, amount FROM t_order WHERE order_id IN (?, ?) ORDER BY order_id",
                    (Binder) ps -> { ps.setLong(1, b.id); ps.setLong(2, a.id); }, "setLong(1, " + b.id + "), setLong(2, " + a.id + ") -- " + b + ", " + a},
                {"SELECT order_id FROM t_order WHERE order_id IN (?, ?) ORDER BY amount, order_id LIMIT 1",
                    (Binder) ps -> { ps.setLong(1, a.id); ps.setLong(2, b.id); }, "setLong(1, " + a.id + "), setLong(2, " + b.id + ") -- " + a + ", " + b},
            };
            try (Conns c = new Conns(m.props()); Connection ref = direct("ds0", m.props())) {
                for (Object[] k : cases) {
                    String sql = (String) k[0];
                    String refSql = sql.replace("FROM t_order ", "FROM orders_ref.t_order ");
                    Binder bind = (Binder) k[1];
                    Res p = run(c.p, sql, bind);
                    Res d = run(ref, refSql, bind);
                    Snap s = compare("statement: " + sql + "\nsettings: " + c.props + "\nparameters: " + k[2]
                        + "\nreference run on ds0 (127.0.0.1:" + DS_PORT.get("ds0") + "): " + refSql, d, p);
                    if (s != null) {
                        expect(!s.rows.isEmpty(), sql + ": no rows (test picked values without rows)");
                    }
                }
            }
        });

        check(tag + "a statement the proxy refuses (scatter UPDATE, error 1235) leaves the connection usable and changes nothing", () -> {
            Order fresh = freshDirect("BIZ_CHANNEL", 2, "scatter");
            try (Conns c = new Conns(m.props())) {
                String upd = "UPDATE t_order SET status = ? WHERE user_id = ?";
                SQLException err = null;
                int n = -1;
                try (PreparedStatement ps = c.p.prepareStatement(upd)) {
                    ps.setString(1, "SCATTERED");
                    ps.setLong(2, fresh.userId);
                    n = ps.executeUpdate();
                } catch (SQLException e) {
                    err = e;
                }
                expect(err != null && code(err) == 1235, upd + " (" + c.props + "): expected error 1235, the proxy gave "
                    + (err != null ? errText(err) : n + " affected row(s)"));
                Order now = physicalRow(fresh.id, fresh.shard);
                expect(now != null && "NEW".equals(now.status), "the refused scatter UPDATE changed " + fresh + ": status " + (now == null ? "row gone" : now.status));
                expectUsable(c.p, "a refused scatter UPDATE");
            }
        });
    }

    /** Seeded user ids with orders on both datasources, the most orders first (then by id). */
    static List<Long> scatterUsers() {
        Map<Long, List<Order>> users = new HashMap<>();
        for (Order o : REF.values()) {
            if (o.userId <= 500 && o.userId != 1 && o.userId != 7 && o.userId != 42) { // not the suites' own rows' user ids
                users.computeIfAbsent(o.userId, k -> new ArrayList<>()).add(o);
            }
        }
        List<Long> both = new ArrayList<>();
        for (Map.Entry<Long, List<Order>> e : users.entrySet()) {
            if (e.getValue().stream().map(o -> o.ds).distinct().count() == 2) {
                both.add(e.getKey());
            }
        }
        both.sort((x, y) -> users.get(y).size() != users.get(x).size() ? users.get(y).size() - users.get(x).size() : Long.compare(x, y));
        require(both.size() >= 2, "no seeded users with orders on both datasources");
        return both;
    }

    static PreparedStatement prep(Conns c, String sql, int shard) {
        try {
            return c.d(dsOf(shard)).prepareStatement(physical(sql, shard));
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    static String hex(byte[] a) {
        StringBuilder b = new StringBuilder();
        for (byte x : a) {
            b.append(String.format("%02X", x & 0xff));
        }
        return b.toString();
    }

    /** One PreparedStatement executed many times with ids on both datasources and several parameter types. */
    static void repeated(Mode m) throws Exception {
        Order n0 = P.get("newDs0"), n1 = P.get("newDs1"), l0 = P.get("legacyDs0"), l1 = P.get("legacyDs1"),
            lk = P.get("lookalike"), em = P.get("emoji");
        long unknown = unknownLegacyId();
        List<Object[]> steps = new ArrayList<>();
        // {order or null, setter name}
        for (Object[] s : new Object[][] {
            {n0, "setLong"}, {n0, "setLong"}, {n1, "setLong"}, {l0, "setLong"}, {l1, "setLong"}, {lk, "setLong"},
            {null, "setNull"}, {n0, "setLong"}, {n1, "setString"}, {l0, "setString"}, {em, "setBigDecimal"},
            {n1, "setBigDecimal"}, {n0, "setLong"}, {unknown, "setLong"}, {n1, "setLong"},
        }) {
            steps.add(s);
        }
        for (int i = 0; i < 20; i++) {
            Order o = List.of(n0, n1, l0, l1, em).get(i % 5);
            steps.add(new Object[] {o, "setLong"});
        }
        for (String sql : List.of(SQL_ORDER, SQL_STAR)) {
            try (Conns c = new Conns(m.props()); PreparedStatement pp = c.p.prepareStatement(sql)) {
                Map<Integer, PreparedStatement> dps = new HashMap<>();
                try {
                    int k = 0;
                    for (Object[] s : steps) {
                        k++;
                        Object o = s[0];
                        String setter = (String) s[1];
                        long id = o instanceof Order ? ((Order) o).id : o instanceof Long ? (Long) o : 0;
                        int shard = o instanceof Order ? ((Order) o).shard : 0;
                        Binder b;
                        switch (setter) {
                            case "setNull": b = ps -> ps.setNull(1, Types.BIGINT); break;
                            case "setString": b = ps -> ps.setString(1, Long.toString(id)); break;
                            case "setBigDecimal": b = ps -> ps.setBigDecimal(1, BigDecimal.valueOf(id)); break;
                            default: b = ps -> ps.setLong(1, id);
                        }
                        PreparedStatement dp = dps.computeIfAbsent(shard, sh -> prep(c, sql, sh));
                        int before = problems.size();
                        Snap snap = compare(ctx(c.props, sql, "execution #" + k + " of one PreparedStatement: " + setter + "(1, "
                            + (o == null ? "null" : id) + ")" + (o instanceof Order ? " -- " + o : ""), shard), exec(dp, b), exec(pp, b));
                        if (snap != null) {
                            expectRows(snap, o instanceof Order ? 1 : 0, sql + " execution #" + k);
                        }
                        if (problems.size() - before > 0 && problems.size() > 6) {
                            return; // enough detail
                        }
                    }
                } finally {
                    dps.values().forEach(ProxyClientSuite::closeQuietly);
                }
            }
        }
    }
}
