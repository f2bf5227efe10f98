import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** HikariCP (maximumPoolSize 3) in front of the proxy: state reset on return, validation, concurrent prepared load. */
final class PoolChecks extends ProxyClientSuite {

    static HikariDataSource pool(String props, String name) {
        HikariConfig hc = new HikariConfig();
        hc.setJdbcUrl(proxyUrl(props));
        hc.setDriverClassName("org.mariadb.jdbc.Driver");
        hc.setPoolName(name);
        hc.setMaximumPoolSize(3);
        hc.setMinimumIdle(3);
        hc.setConnectionTimeout(10_000);
        hc.setValidationTimeout(3_000);
        hc.setInitializationFailTimeout(10_000);
        return new HikariDataSource(hc);
    }

    static void run(Mode m) {
        String tag = "[" + m.name() + "] ";

        check(tag + "HikariCP resets autocommit, isolation and read-only on return; rolls back uncommitted work; validates with isValid()", () -> {
            String props = m.props() + "&assureReadOnly=true";
            Order probe = freshDirect("CN_CHANNEL", 3, "hikari");
            try (HikariDataSource ds = pool(props, "routekey-reset-" + (m.server() ? "sps" : "cps"))) {
                Connection[] cs = new Connection[3];
                Set<String> ids = new HashSet<>();
                String defaults;
                try (Connection c0 = ds.getConnection()) {
                    defaults = state(c0, probe);
                }
                for (int i = 0; i < 3; i++) {
                    cs[i] = ds.getConnection();
                    ids.add(scalar(cs[i], "SELECT CONNECTION_ID()"));
                }
                // dirty each borrowed connection differently
                cs[0].setAutoCommit(false);
                Order uncommitted = newOrder("EU_CHANNEL", 3, "hikari-uncommitted");
                try (PreparedStatement ps = cs[0].prepareStatement(INSERT_ORDER)) {
                    bindOrder(ps, uncommitted);
                    ps.executeUpdate();
                }
                cs[1].setTransactionIsolation(Connection.TRANSACTION_SERIALIZABLE);
                expect("SERIALIZABLE".equals(scalar(cs[1], "SELECT @@tx_isolation")), "SERIALIZABLE not in effect through the proxy: " + scalar(cs[1], "SELECT @@tx_isolation"));
                cs[2].setReadOnly(true);
                SQLException roErr = null;
                try {
                    execUpdate(cs[2], "UPDATE t_order SET status = 'RO' WHERE order_id = ?", probe.id);
                } catch (SQLException e) {
                    roErr = e;
                }
                expect(roErr != null && code(roErr) == 1792, "a write on a read-only pooled connection (assureReadOnly=true) gave " + errText(roErr) + " (MariaDB: 1792)");
                for (Connection c : cs) {
                    c.close();
                }
                Thread.sleep(600); // past HikariCP's 500 ms bypass window: the next borrow validates with isValid()
                expect(shardsHolding(uncommitted.id, "t_order").isEmpty(), "the uncommitted INSERT of a connection returned with autocommit off was kept: "
                    + uncommitted + " on " + shardsHolding(uncommitted.id, "t_order"));
                Set<String> ids2 = new HashSet<>();
                for (int i = 0; i < 3; i++) {
                    cs[i] = ds.getConnection();
                    ids2.add(scalar(cs[i], "SELECT CONNECTION_ID()"));
                }
                expect(ids.equals(ids2), "the pool replaced connections (validation or reset failed?): connection ids before " + ids + ", after " + ids2);
                for (int i = 0; i < 3; i++) {
                    String s = state(cs[i], probe);
                    expect(s.equals(defaults), "borrowed connection " + (i + 1) + " (" + props + ") was not reset:\n  fresh connection: " + defaults + "\n  reborrowed:       " + s);
                    int n = execUpdate(cs[i], "UPDATE t_order SET status = ? WHERE order_id = ?", "POOL" + i, probe.id);
                    Order now = physicalRow(probe.id, probe.shard);
                    expect(n == 1 && ("POOL" + i).equals(now.status), "autocommit write on reborrowed connection " + (i + 1) + ": " + n + " rows, status " + now.status);
                }
                for (Connection c : cs) {
                    c.close();
                }
                expect(ds.getHikariPoolMXBean().getTotalConnections() == 3, "pool size " + ds.getHikariPoolMXBean().getTotalConnections());
            }
        });

        check(tag + "HikariCP pool of 3, 8 threads x 200 prepared point selects and updates: zero errors, values right", () -> {
            List<Order> reads = new ArrayList<>();
            for (String k : List.of("newDs0", "newDs1", "legacyDs0", "legacyDs1", "lookalike", "emoji", "emojiLegacy", "nullNote", "cjkDs1")) {
                reads.add(P.get(k));
            }
            int k = 0;
            for (Order o : REF.values()) {
                if (k++ % 50 == 0) {
                    reads.add(o);
                }
            }
            List<String> chans = List.of("EU_CHANNEL", "GLOBAL_CHANNEL", "CN_CHANNEL", "BIZ_CHANNEL", "CORP_CHANNEL", "CN_CHANNEL", "EU_CHANNEL", "CORP_CHANNEL");
            List<Order> mine = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                mine.add(freshDirect(chans.get(t), t % 4, "load"));
            }
            ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
            AtomicInteger ops = new AtomicInteger();
            BigDecimal[] last = new BigDecimal[8];
            long t0 = System.nanoTime();
            try (HikariDataSource ds = pool(m.props(), "routekey-load-" + (m.server() ? "sps" : "cps"))) {
                ExecutorService ex = Executors.newFixedThreadPool(8);
                CountDownLatch start = new CountDownLatch(1);
                List<Future<?>> fs = new ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    int th = t;
                    fs.add(ex.submit(() -> {
                        Random r = new Random(th);
                        start.await();
                        for (int i = 0; i < 200; i++) {
                            try (Connection c = ds.getConnection()) {
                                if (i % 4 == 3) {
                                    BigDecimal amt = new BigDecimal(th * 1000 + i).movePointLeft(2);
                                    try (PreparedStatement ps = c.prepareStatement("UPDATE t_order SET amount = ?, status = ? WHERE order_id = ?")) {
                                        ps.setBigDecimal(1, amt);
                                        ps.setString(2, "L" + i);
                                        ps.setLong(3, mine.get(th).id);
                                        int n = ps.executeUpdate();
                                        if (n != 1) {
                                            errors.add("thread " + th + " op " + i + ": UPDATE of " + mine.get(th) + " affected " + n + " rows");
                                        }
                                    }
                                    last[th] = amt;
                                } else {
                                    Order o = reads.get(r.nextInt(reads.size()));
                                    try (PreparedStatement ps = c.prepareStatement(SQL_ORDER)) {
                                        ps.setLong(1, o.id);
                                        try (ResultSet rs = ps.executeQuery()) {
                                            if (!rs.next()) {
                                                errors.add("thread " + th + " op " + i + ": no row for " + o);
                                            } else {
                                                Order got = readOrder(rs);
                                                String d = sameOrder(o, got);
                                                if (!d.isEmpty()) {
                                                    errors.add("thread " + th + " op " + i + ": " + o + " differs from the reference: " + d);
                                                }
                                                if (rs.next()) {
                                                    errors.add("thread " + th + " op " + i + ": two rows for " + o);
                                                }
                                            }
                                        }
                                    }
                                }
                                ops.incrementAndGet();
                            } catch (Exception e) {
                                errors.add("thread " + th + " op " + i + ": " + describe(e));
                            }
                        }
                        return null;
                    }));
                }
                start.countDown();
                for (Future<?> f : fs) {
                    f.get(60, TimeUnit.SECONDS);
                }
                ex.shutdown();
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            out.println("    " + ops.get() + " operations in " + ms + " ms through the pool (" + m.props() + ")");
            List<String> errs = new ArrayList<>(errors);
            if (!errs.isEmpty()) {
                problems.add(errs.size() + " error(s) of 1600 operations (" + m.props() + "); first ones:\n  "
                    + String.join("\n  ", errs.subList(0, Math.min(5, errs.size()))));
            }
            for (int t = 0; t < 8; t++) {
                Order now = physicalRow(mine.get(t).id, mine.get(t).shard);
                expect(now != null && last[t] != null && last[t].compareTo(now.amount) == 0 && "L199".equals(now.status),
                    "thread " + t + ": final row " + mine.get(t) + " has amount " + (now == null ? "<gone>" : now.amount + " status " + now.status)
                        + ", expected " + last[t] + " L199");
            }
        });
    }

    /** What a borrower can observe of a connection's session state, client side and on both datasources. */
    static String state(Connection c, Order probe) throws SQLException {
        String client = "getAutoCommit=" + c.getAutoCommit() + " getTransactionIsolation=" + c.getTransactionIsolation() + " isReadOnly=" + c.isReadOnly();
        String vars = "@@autocommit AS ac, @@tx_isolation AS iso, @@tx_read_only AS ro";
        String plain = SessionChecks.row(c, "SELECT " + vars);
        String s0 = SessionChecks.shardVars(c, vars, P.get("newDs0"), false);
        String s1 = SessionChecks.shardVars(c, vars, probe, false);
        return client + "; SELECT: " + plain + "; on ds0 shard: " + s0.replace(Long.toString(P.get("newDs0").id), "<id>")
            + "; on ds1 shard: " + s1.replace(Long.toString(probe.id), "<id>");
    }
}
