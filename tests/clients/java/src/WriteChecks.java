import java.math.BigDecimal;
import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Writes through the proxy, placement checked on the physical tables; batches; generated keys and update counts. */
final class WriteChecks extends ProxyClientSuite {

    static void run(Mode m) {
        String tag = "[" + m.name() + "] ";

        check(tag + "INSERT/UPDATE/DELETE placement on both datasources (t_order and t_order_item)", () -> {
            try (Conns c = new Conns(m.props())) {
                for (Object[] spec : new Object[][] {{"EU_CHANNEL", 1}, {"CN_CHANNEL", 1}, {"CN_CHANNEL", 2}, {"CORP_CHANNEL", 3}}) {
                    Order o = newOrder((String) spec[0], (Integer) spec[1], m.name());
                    String where = o + ", " + c.props;
                    try (PreparedStatement ps = c.p.prepareStatement(INSERT_ORDER)) {
                        bindOrder(ps, o);
                        boolean rs = ps.execute();
                        int uc = ps.getUpdateCount();
                        expect(!rs && uc == 1, INSERT_ORDER + " (" + where + "): execute() returned " + rs + ", getUpdateCount() " + uc + " (MariaDB: false, 1)");
                    }
                    List<Integer> at = shardsHolding(o.id, "t_order");
                    if (!expect(at.equals(List.of(o.shard)), INSERT_ORDER + " (" + where + "): row found on shards " + at + ", expected [" + o.shard + "]")) {
                        continue;
                    }
                    String d = sameOrder(o, physicalRow(o.id, o.shard));
                    expect(d.isEmpty(), INSERT_ORDER + " (" + where + "): stored row differs from the bound values: " + d);
                    expectRows(compareQuery(c, SQL_ORDER, o.shard, "setLong(1, " + o.id + ") -- the row just inserted", ps -> ps.setLong(1, o.id)), 1, SQL_ORDER);
                    for (int item = 1; item <= 2; item++) {
                        int n = execUpdate(c.p, INSERT_ITEM, o.id, item, "SKU-J" + item, item * 2, new BigDecimal("19.99"));
                        expect(n == 1, INSERT_ITEM + " (" + where + ") item " + item + ": " + n + " affected rows");
                    }
                    List<Integer> items = shardsHolding(o.id, "t_order_item");
                    expect(items.equals(List.of(o.shard, o.shard)), INSERT_ITEM + " (" + where + "): item rows on shards " + items + ", expected 2 on " + o.shard);
                    expectRows(compareQuery(c, SQL_JOIN, o.shard, "setLong(1, " + o.id + ") -- the rows just inserted", ps -> ps.setLong(1, o.id)), 2, SQL_JOIN);

                    o.status = "PAID";
                    o.amount = o.amount.add(new BigDecimal("10.05"));
                    o.note = "updated \ud83d\udce6 " + m.name();
                    int n;
                    try (PreparedStatement ps = c.p.prepareStatement(UPDATE_ORDER)) {
                        ps.setString(1, o.status);
                        ps.setBigDecimal(2, o.amount);
                        ps.setString(3, o.note);
                        ps.setLong(4, o.id);
                        n = ps.executeUpdate();
                        expect(n == 1 && ps.getUpdateCount() == 1, UPDATE_ORDER + " (" + where + "): executeUpdate " + n + ", getUpdateCount " + ps.getUpdateCount());
                        // the same values again: MariaDB with CLIENT_FOUND_ROWS (Connector/J default) reports 1
                        int again = ps.executeUpdate();
                        int direct;
                        try (PreparedStatement dp = c.d(o.ds).prepareStatement(physical(UPDATE_ORDER, o.shard))) {
                            dp.setString(1, o.status);
                            dp.setBigDecimal(2, o.amount);
                            dp.setString(3, o.note);
                            dp.setLong(4, o.id);
                            direct = dp.executeUpdate();
                        }
                        expect(again == direct, UPDATE_ORDER + " (" + where + ") re-executed with the same values: direct MariaDB reports "
                            + direct + " row(s), the proxy " + again);
                    }
                    d = sameOrder(o, physicalRow(o.id, o.shard));
                    expect(d.isEmpty(), UPDATE_ORDER + " (" + where + "): stored row differs: " + d);

                    n = execUpdate(c.p, "DELETE FROM t_order_item WHERE order_id = ?", o.id);
                    expect(n == 2, "DELETE FROM t_order_item WHERE order_id = ? (" + where + "): " + n + " affected rows, expected 2");
                    n = execUpdate(c.p, "DELETE FROM t_order WHERE order_id = ?", o.id);
                    expect(n == 1, "DELETE FROM t_order WHERE order_id = ? (" + where + "): " + n + " affected rows, expected 1");
                    List<Integer> left = shardsHolding(o.id, "t_order");
                    left.addAll(shardsHolding(o.id, "t_order_item"));
                    expect(left.isEmpty(), "after the DELETEs (" + where + ") rows remain on shards " + left);
                    n = execUpdate(c.p, "DELETE FROM t_order WHERE order_id = ?", o.id);
                    expect(n == 0, "DELETE of a deleted order (" + where + "): " + n + " affected rows, expected 0");
                }
            }
        });

        for (boolean affected : new boolean[] {false, true}) {
            check(tag + "affected rows of a no-op UPDATE with useAffectedRows=" + affected + " (CLIENT_FOUND_ROWS)", () -> {
                try (Conns c = new Conns(m.props() + "&useAffectedRows=" + affected)) {
                    for (Order o : List.of(freshDirect("GLOBAL_CHANNEL", 1, "affected"), freshDirect("BIZ_CHANNEL", 0, "affected"))) {
                        String sql = "UPDATE t_order SET status = ?, amount = ? WHERE order_id = ?";
                        int[] pr = new int[2], dr = new int[2];
                        String[] st = {"SHIPPED", "SHIPPED"};
                        for (int i = 0; i < 2; i++) {
                            pr[i] = execUpdate(c.p, sql, st[i], o.amount, o.id);
                        }
                        execUpdate(admin(o.ds), "UPDATE order_shards.t_order_" + o.shard + " SET status = 'NEW' WHERE order_id = ?", o.id);
                        for (int i = 0; i < 2; i++) {
                            dr[i] = execUpdate(c.d(o.ds), physical(sql, o.shard), st[i], o.amount, o.id);
                        }
                        expect(Arrays.equals(pr, dr), sql + " (" + c.props + ", " + o + ") changing then repeating: direct MariaDB reports "
                            + Arrays.toString(dr) + ", the proxy " + Arrays.toString(pr));
                    }
                }
            });
        }

        check(tag + "NULL order id in writes: UPDATE/DELETE affect 0 rows, INSERT refused, connection usable", () -> {
            try (Conns c = new Conns(m.props())) {
                for (String sql : List.of("UPDATE t_order SET status = 'X' WHERE order_id = ?", "DELETE FROM t_order WHERE order_id = ?",
                    "DELETE FROM t_order_item WHERE order_id = ?")) {
                    int p = -1, d;
                    SQLException err = null;
                    try (PreparedStatement ps = c.p.prepareStatement(sql)) {
                        ps.setNull(1, Types.BIGINT);
                        p = ps.executeUpdate();
                    } catch (SQLException e) {
                        err = e;
                    }
                    try (PreparedStatement ps = c.d("ds0").prepareStatement(physical(sql, 0))) {
                        ps.setNull(1, Types.BIGINT);
                        d = ps.executeUpdate();
                    }
                    expect(err == null && p == d, sql + " with setNull(1, BIGINT) (" + c.props + "): direct MariaDB " + d
                        + " affected rows, the proxy " + (err != null ? errText(err) : p + " affected rows"));
                }
                Order o = newOrder("EU_CHANNEL", 0, "null-insert");
                SQLException err = null;
                try (PreparedStatement ps = c.p.prepareStatement(INSERT_ORDER)) {
                    bindOrder(ps, o);
                    ps.setNull(1, Types.BIGINT);
                    ps.executeUpdate();
                } catch (SQLException e) {
                    err = e;
                }
                expect(err != null, INSERT_ORDER + " with a NULL order_id (" + c.props + "): the proxy accepted it (MariaDB refuses with 1048)");
                expectUsable(c.p, "an INSERT with a NULL order id");
            }
        });

        check(tag + "getGeneratedKeys() and getUpdateCount() of INSERTs like MariaDB", () -> {
            try (Conns c = new Conns(m.props())) {
                for (String ch : List.of("EU_CHANNEL", "CORP_CHANNEL")) {
                    Order po = newOrder(ch, 2, "keys"), dor = newOrder(ch, 2, "keys");
                    Snap pk, dk;
                    int pn, dn, puc, duc;
                    try (PreparedStatement ps = c.p.prepareStatement(INSERT_ORDER, Statement.RETURN_GENERATED_KEYS)) {
                        bindOrder(ps, po);
                        pn = ps.executeUpdate();
                        puc = ps.getUpdateCount();
                        try (ResultSet rs = ps.getGeneratedKeys()) {
                            pk = Snap.of(rs);
                        }
                    }
                    try (PreparedStatement ps = c.d(dor.ds).prepareStatement(physical(INSERT_ORDER, dor.shard), Statement.RETURN_GENERATED_KEYS)) {
                        bindOrder(ps, dor);
                        dn = ps.executeUpdate();
                        duc = ps.getUpdateCount();
                        try (ResultSet rs = ps.getGeneratedKeys()) {
                            dk = Snap.of(rs);
                        }
                    }
                    String diff = Snap.diff(dk, pk);
                    expect(pn == dn && puc == duc && diff.isEmpty(), INSERT_ORDER + " with RETURN_GENERATED_KEYS (" + c.props + ", " + po
                        + "): direct executeUpdate " + dn + " getUpdateCount " + duc + " keys " + dk + "; proxy " + pn + " " + puc + " keys " + pk
                        + (diff.isEmpty() ? "" : "\n" + diff));
                    expect(shardsHolding(po.id, "t_order").equals(List.of(po.shard)), "generated-keys INSERT of " + po + " placed on " + shardsHolding(po.id, "t_order"));

                    // text Statement: executeUpdate with generated keys, execute()/getUpdateCount()/getMoreResults()
                    Order p2 = newOrder(ch, 3, "text"), d2 = newOrder(ch, 3, "text");
                    String[] res = new String[2];
                    for (int side = 0; side < 2; side++) {
                        Order o = side == 0 ? p2 : d2;
                        Connection conn = side == 0 ? c.p : c.d(o.ds);
                        String table = side == 0 ? "t_order" : "order_shards.t_order_" + o.shard;
                        String sql = "INSERT INTO " + table + " (" + ORDER_COLS + ") VALUES (" + o.id + ", '" + o.channel + "', '" + o.region + "', "
                            + o.userId + ", " + o.amount + ", 'NEW', 'text insert', '2025-01-02 03:04:05.678')";
                        try (Statement st = conn.createStatement()) {
                            int n = st.executeUpdate(sql, Statement.RETURN_GENERATED_KEYS);
                            Snap k;
                            try (ResultSet rs = st.getGeneratedKeys()) {
                                k = Snap.of(rs);
                            }
                            String upd = "UPDATE " + table + " SET status = 'TEXT' WHERE order_id = " + o.id;
                            boolean isRs = st.execute(upd);
                            int uc = st.getUpdateCount();
                            boolean more = st.getMoreResults();
                            int uc2 = st.getUpdateCount();
                            boolean sel = st.execute("SELECT order_id FROM " + table + " WHERE order_id = " + o.id);
                            int uc3 = st.getUpdateCount();
                            res[side] = "executeUpdate=" + n + " keys=" + k.rows.size() + " row(s) " + (k.rows.isEmpty() ? "" : k.rows.get(0)[0])
                                + "; execute(UPDATE)=" + isRs + " getUpdateCount=" + uc + " getMoreResults=" + more + " then getUpdateCount=" + uc2
                                + "; execute(SELECT)=" + sel + " getUpdateCount=" + uc3;
                        }
                    }
                    expect(res[0].equals(res[1]), "text Statement INSERT/UPDATE/SELECT (" + c.props + ", " + p2 + "): direct MariaDB: " + res[1] + "\n  proxy: " + res[0]);
                    expect(shardsHolding(p2.id, "t_order").equals(List.of(p2.shard)), "text INSERT of " + p2 + " placed on " + shardsHolding(p2.id, "t_order"));
                }
            }
        });

        check(tag + "INSERT without order_id: getGeneratedKeys() and LAST_INSERT_ID() give the id the proxy issued; the row is on its shard", () -> {
            try (Conns c = new Conns(m.props())) {
                for (String ch : List.of("EU_CHANNEL", "CORP_CHANNEL")) {
                    Order o = newOrder(ch, -1, "auto id");
                    String sql = "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES (?, ?, ?, ?, 'NEW', ?, ?)";
                    long key;
                    try (PreparedStatement ps = c.p.prepareStatement(sql, Statement.RETURN_GENERATED_KEYS)) {
                        ps.setString(1, o.channel);
                        ps.setString(2, o.region);
                        ps.setLong(3, o.userId);
                        ps.setBigDecimal(4, o.amount);
                        ps.setString(5, o.note);
                        ps.setTimestamp(6, o.createdAt);
                        int n = ps.executeUpdate();
                        expect(n == 1, sql + " (" + c.props + "): executeUpdate " + n);
                        try (ResultSet rs = ps.getGeneratedKeys()) {
                            expect(rs.next(), sql + " (" + c.props + "): no generated key");
                            key = rs.getLong(1);
                        }
                    }
                    CREATED.add(key);
                    long last;
                    try (Statement st = c.p.createStatement(); ResultSet rs = st.executeQuery("SELECT LAST_INSERT_ID()")) {
                        rs.next();
                        last = rs.getLong(1);
                    }
                    int code = (int) ((key >>> 14) & 15);
                    int shard = shardOf(key, ch);
                    expect(last == key, "LAST_INSERT_ID() " + Long.toUnsignedString(last) + " after generated key " + Long.toUnsignedString(key));
                    expect(code == CH_CODE.get(ch), "generated key " + Long.toUnsignedString(key) + " carries route key " + code + ", not " + ch + "'s");
                    expect(shardsHolding(key, "t_order").equals(List.of(shard)), "INSERT without order_id of " + ch + ": " + Long.toUnsignedString(key)
                        + " on " + shardsHolding(key, "t_order") + ", expected shard " + shard);
                }
            }
        });

        check(tag + "multi-row INSERT with parameters: split by shard on one datasource (affected rows summed), refused over two (1235)", () -> {
            String row = "(?, ?, ?, ?, ?, ?, ?, ?)";
            String sql3 = "INSERT INTO t_order (" + ORDER_COLS + ") VALUES " + row + ", " + row + ", " + row;
            try (Conns c = new Conns(m.props())) {
                for (String ch : List.of("CORP_CHANNEL", "GLOBAL_CHANNEL")) {
                    List<Order> po = List.of(newOrder(ch, 0, "multi"), newOrder(ch, 1, "multi"), newOrder(ch, 3, "multi"));
                    List<Order> dor = List.of(newOrder(ch, 2, "multi"), newOrder(ch, 2, "multi"), newOrder(ch, 2, "multi"));
                    String pr, dr;
                    try (PreparedStatement ps = c.p.prepareStatement(sql3)) {
                        bindRows(ps, po);
                        pr = ps.executeUpdate() + " row(s), getUpdateCount " + ps.getUpdateCount();
                    } catch (SQLException e) {
                        pr = errText(e);
                    }
                    try (PreparedStatement ps = c.d(dor.get(0).ds).prepareStatement(physical(sql3, dor.get(0).shard))) {
                        bindRows(ps, dor);
                        dr = ps.executeUpdate() + " row(s), getUpdateCount " + ps.getUpdateCount();
                    }
                    expect(pr.equals(dr), sql3 + " (" + c.props + ", rows " + po + "): direct MariaDB (3 rows into one shard) " + dr + ", proxy " + pr);
                    for (Order o : po) {
                        List<Integer> at = shardsHolding(o.id, "t_order");
                        expect(at.equals(List.of(o.shard)), sql3 + " (" + c.props + "): " + o + " found on shards " + at);
                        String d = sameOrder(o, physicalRow(o.id, o.shard));
                        expect(d.isEmpty(), sql3 + " (" + c.props + "): " + o + " stored with other values (parameters split wrongly?): " + d);
                    }
                }
                List<Order> xs = List.of(newOrder("EU_CHANNEL", 0, "multi-xds"), newOrder("CORP_CHANNEL", 0, "multi-xds"), newOrder("EU_CHANNEL", 1, "multi-xds"));
                String pr;
                try (PreparedStatement ps = c.p.prepareStatement(sql3)) {
                    bindRows(ps, xs);
                    pr = ps.executeUpdate() + " row(s)";
                } catch (SQLException e) {
                    pr = errText(e);
                }
                expect(pr.startsWith("error 1235"), sql3 + " (" + c.props + ", rows on ds0 and ds1 " + xs + "): expected error 1235, the proxy gave " + pr);
                for (Order o : xs) {
                    expect(shardsHolding(o.id, "t_order").isEmpty(), "refused multi-row INSERT wrote " + o + " to " + shardsHolding(o.id, "t_order"));
                }
                expectUsable(c.p, "a refused multi-row INSERT");
            }
        });

        for (boolean rewrite : new boolean[] {false, true}) {
            check(tag + "executeBatch INSERT/UPDATE/DELETE on one datasource, rewriteBatchedStatements=" + rewrite, () -> {
                String props = m.props() + "&rewriteBatchedStatements=" + rewrite;
                try (Conns c = new Conns(props)) {
                    for (String ch : List.of("EU_CHANNEL", "CORP_CHANNEL")) {
                        List<Order> po = new ArrayList<>(), dor = new ArrayList<>();
                        for (int i = 0; i < 6; i++) {
                            po.add(newOrder(ch, i % 4, "batch"));
                            dor.add(newOrder(ch, 0, "batch"));
                        }
                        int dshard = dor.get(0).shard;
                        String ds = dor.get(0).ds;
                        // INSERT
                        int[][] r = batch(c, ds, dshard, INSERT_ORDER, po, dor, (ps, o) -> bindOrder(ps, o));
                        String what = INSERT_ORDER + " x6 over shards of " + ch + " (" + props + ")";
                        expect(r[0] != null && Arrays.equals(r[0], r[1]), what + ": executeBatch direct MariaDB (6 rows into one shard) "
                            + Arrays.toString(r[1]) + ", proxy " + (r[0] == null ? errText(lastBatchError) : Arrays.toString(r[0])));
                        for (Order o : po) {
                            List<Integer> at = shardsHolding(o.id, "t_order");
                            expect(at.equals(List.of(o.shard)), what + ": " + o + " found on shards " + at);
                        }
                        // UPDATE
                        String upd = "UPDATE t_order SET status = ?, amount = ? WHERE order_id = ?";
                        r = batch(c, ds, dshard, upd, po, dor, (ps, o) -> {
                            ps.setString(1, "BATCHED");
                            ps.setBigDecimal(2, new BigDecimal("77.70"));
                            ps.setLong(3, o.id);
                        });
                        what = upd + " x6 (" + props + ", " + ch + ")";
                        expect(r[0] != null && Arrays.equals(r[0], r[1]), what + ": executeBatch direct MariaDB " + Arrays.toString(r[1])
                            + ", proxy " + (r[0] == null ? errText(lastBatchError) : Arrays.toString(r[0])));
                        for (Order o : po) {
                            Order got = physicalRow(o.id, o.shard);
                            expect(got != null && "BATCHED".equals(got.status) && new BigDecimal("77.70").compareTo(got.amount) == 0,
                                what + ": " + o + " now " + (got == null ? "missing" : got.status + " " + got.amount));
                        }
                        // text Statement batch
                        int[] tp = null, td;
                        SQLException terr = null;
                        try (Statement st = c.p.createStatement()) {
                            for (Order o : po.subList(0, 3)) {
                                st.addBatch("UPDATE t_order SET status = 'TEXTBATCH' WHERE order_id = " + o.id);
                            }
                            tp = st.executeBatch();
                        } catch (SQLException e) {
                            terr = e;
                        }
                        try (Statement st = c.d(ds).createStatement()) {
                            for (Order o : dor.subList(0, 3)) {
                                st.addBatch("UPDATE order_shards.t_order_" + dshard + " SET status = 'TEXTBATCH' WHERE order_id = " + o.id);
                            }
                            td = st.executeBatch();
                        }
                        expect(terr == null && Arrays.equals(tp, td), "Statement.addBatch(\"UPDATE t_order SET status = 'TEXTBATCH' WHERE order_id = <id>\") x3 ("
                            + props + ", " + ch + "): direct MariaDB " + Arrays.toString(td) + ", proxy " + (terr != null ? errText(terr) : Arrays.toString(tp)));
                        for (Order o : po.subList(0, 3)) {
                            Order got = physicalRow(o.id, o.shard);
                            expect(got != null && "TEXTBATCH".equals(got.status), "text batch UPDATE (" + props + "): " + o + " status " + (got == null ? "missing" : got.status));
                        }
                        // DELETE
                        String del = "DELETE FROM t_order WHERE order_id = ?";
                        r = batch(c, ds, dshard, del, po, dor, (ps, o) -> ps.setLong(1, o.id));
                        expect(r[0] != null && Arrays.equals(r[0], r[1]), del + " x6 (" + props + ", " + ch + "): executeBatch direct MariaDB "
                            + Arrays.toString(r[1]) + ", proxy " + (r[0] == null ? errText(lastBatchError) : Arrays.toString(r[0])));
                        for (Order o : po) {
                            expect(shardsHolding(o.id, "t_order").isEmpty(), del + " batch (" + props + "): " + o + " still on " + shardsHolding(o.id, "t_order"));
                        }
                    }
                }
            });
        }

        check(tag + "executeBatch INSERT over both datasources: separate statements succeed, a rewritten multi-row INSERT is refused whole (1235)", () -> {
            for (boolean rewrite : new boolean[] {false, true}) {
                String props = m.props() + "&rewriteBatchedStatements=" + rewrite;
                try (Connection pc = proxy(props)) {
                    List<Order> rows = List.of(newOrder("EU_CHANNEL", 0, "xds"), newOrder("CORP_CHANNEL", 1, "xds"),
                        newOrder("GLOBAL_CHANNEL", 2, "xds"), newOrder("BIZ_CHANNEL", 3, "xds"));
                    int[] r = null;
                    SQLException err = null;
                    try (PreparedStatement ps = pc.prepareStatement(INSERT_ORDER)) {
                        for (Order o : rows) {
                            bindOrder(ps, o);
                            ps.addBatch();
                        }
                        r = ps.executeBatch();
                    } catch (SQLException e) {
                        err = e;
                    }
                    String what = INSERT_ORDER + " batch of " + rows + " (" + props + ")";
                    if (!rewrite) {
                        expect(err == null && Arrays.equals(r, new int[] {1, 1, 1, 1}), what + ": executeBatch gave "
                            + (err != null ? errText(err) : Arrays.toString(r)) + ", expected [1, 1, 1, 1] (one statement per row)");
                        for (Order o : rows) {
                            expect(shardsHolding(o.id, "t_order").equals(List.of(o.shard)), what + ": " + o + " on " + shardsHolding(o.id, "t_order"));
                        }
                    } else {
                        expect(err != null && code(err) == 1235, what + ": expected error 1235 (one multi-row INSERT over two datasources), got "
                            + (err != null ? errText(err) : Arrays.toString(r)));
                        for (Order o : rows) {
                            expect(shardsHolding(o.id, "t_order").isEmpty(), what + ": refused, yet " + o + " was written to " + shardsHolding(o.id, "t_order"));
                        }
                        expectUsable(pc, "a refused batch");
                    }
                }
            }
        });
    }

    static void bindRows(PreparedStatement ps, List<Order> rows) throws SQLException {
        int i = 0;
        for (Order o : rows) {
            ps.setLong(++i, o.id);
            ps.setString(++i, o.channel);
            ps.setString(++i, o.region);
            ps.setLong(++i, o.userId);
            ps.setBigDecimal(++i, o.amount);
            ps.setString(++i, o.status);
            ps.setString(++i, o.note);
            ps.setTimestamp(++i, o.createdAt);
        }
    }

    interface RowBinder {
        void bind(PreparedStatement ps, Order o) throws SQLException;
    }

    static SQLException lastBatchError;

    /** Runs the batch through the proxy (rows po) and directly on one physical shard (rows dor); returns {proxy, direct}. */
    static int[][] batch(Conns c, String ds, int shard, String sql, List<Order> po, List<Order> dor, RowBinder b) throws Exception {
        int[] pr = null, dr;
        lastBatchError = null;
        try (PreparedStatement ps = c.p.prepareStatement(sql)) {
            for (Order o : po) {
                b.bind(ps, o);
                ps.addBatch();
            }
            pr = ps.executeBatch();
        } catch (SQLException e) {
            lastBatchError = e;
            if (e instanceof BatchUpdateException) {
                problems.add("proxy BatchUpdateException, update counts " + Arrays.toString(((BatchUpdateException) e).getUpdateCounts()) + ": " + describe(e));
            }
        }
        try (PreparedStatement ps = c.d(ds).prepareStatement(physical(sql, shard))) {
            for (Order o : dor) {
                b.bind(ps, o);
                ps.addBatch();
            }
            dr = ps.executeBatch();
        }
        return new int[][] {pr, dr};
    }
}
