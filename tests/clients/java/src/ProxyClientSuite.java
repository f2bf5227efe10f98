import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;

import java.io.ByteArrayInputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.io.StringReader;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * MariaDB Connector/J and HikariCP through routekey-proxy. Every check runs a statement through
 * the proxy (logical tables, database `orders`, user app) and, where a result is involved, the
 * same statement directly on the shard's MariaDB server (physical table
 * order_shards.t_order_<n>) with the same driver settings, and compares what Connector/J shows:
 * values, getObject() classes, ResultSetMetaData (type names, precision, scale, signedness,
 * labels; table and schema names logical through the proxy). Writes are checked by reading the
 * physical tables directly. Prints PASS/FAIL per check and a summary; exits 1 on any failure.
 */
public class ProxyClientSuite {
    // ---------------------------------------------------------------------------------------
    // Environment and topology
    // ---------------------------------------------------------------------------------------
    static final String HOST = "127.0.0.1";
    static final long EPOCH_MS = 1288834974657L;
    static final int SHARDS_PER_CHANNEL = 4;
    static int proxyPort;
    static final Map<String, Integer> DS_PORT = new LinkedHashMap<>();
    static Path sandbox;
    static final Map<Integer, String> SHARD_DS = new TreeMap<>();
    static final Map<String, Integer> CH_CODE = new LinkedHashMap<>();
    static final Map<String, Integer> CH_BASE = new LinkedHashMap<>();
    static final Map<String, String> CH_REGION = new LinkedHashMap<>();
    static final Set<Long> LEGACY = new HashSet<>();
    static final Set<Long> SEEDED = new HashSet<>();
    static List<Object> lookalikes;

    static PrintStream out;
    static final Random RND = new Random();
    /** Every order id this run created (through the proxy or directly): purged at the end. */
    static final Set<Long> CREATED = ConcurrentHashMap.newKeySet();

    record Mode(String name, String props, boolean server) {
    }

    static final Mode SERVER = new Mode("useServerPrepStmts=true", "useServerPrepStmts=true", true);
    static final Mode CLIENT = new Mode("useServerPrepStmts=false", "useServerPrepStmts=false", false);
    static final Mode[] MODES = {SERVER, CLIENT};

    static final String ORDER_COLS = "order_id, channel, region, user_id, amount, status, note, created_at";
    static final String SQL_ORDER = "SELECT " + ORDER_COLS + " FROM t_order WHERE order_id = ?";
    static final String SQL_STAR = "SELECT * FROM t_order WHERE order_id = ?";
    static final String SQL_ALIAS = "SELECT o.order_id AS id, o.amount AS total, o.created_at, o.note AS memo, "
        + "o.status FROM t_order AS o WHERE o.order_id = ?";
    static final String SQL_JOIN = "SELECT o.order_id, o.channel, o.amount, i.item_no, i.sku, i.qty, i.price, "
        + "i.qty * i.price AS line_total FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id "
        + "WHERE o.order_id = ? ORDER BY i.item_no";
    static final String SQL_TYPES = "SELECT order_id, note, amount, amount * 3 AS tripled, "
        + "CAST(amount AS DECIMAL(20,6)) AS wide, -amount AS neg, amount / 7 AS ratio, created_at, "
        + "CAST(created_at AS DATETIME(6)) AS created_us, DATE(created_at) AS d, TIME(created_at) AS t, "
        + "user_id, CAST(user_id AS SIGNED) AS uid_signed, CHAR_LENGTH(note) AS chars, LENGTH(note) AS bytes "
        + "FROM t_order WHERE order_id = ? AND note = ? AND amount = ? AND created_at = ?";
    static final String SQL_BIN = "SELECT order_id, CAST(note AS BINARY) AS note_bin, "
        + "REPEAT(CAST(note AS BINARY), 300) AS note_blob, ? AS raw, LENGTH(?) AS raw_len, HEX(?) AS raw_hex "
        + "FROM t_order WHERE order_id = ?";
    static final String SQL_LONG = "SELECT order_id, LENGTH(?) AS len, MD5(?) AS md5 FROM t_order WHERE order_id = ?";
    static final String INSERT_ORDER = "INSERT INTO t_order (" + ORDER_COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    static final String INSERT_ITEM = "INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES (?, ?, ?, ?, ?)";
    static final String UPDATE_ORDER = "UPDATE t_order SET status = ?, amount = ?, note = ? WHERE order_id = ?";

    // ---------------------------------------------------------------------------------------
    // Orders
    // ---------------------------------------------------------------------------------------
    static final class Order {
        long id;
        String channel, region, status, note;
        long userId;
        BigDecimal amount;
        Timestamp createdAt;
        int shard;
        String ds;
        boolean legacy;

        @Override
        public String toString() {
            return id + " (" + channel + ", shard " + shard + " on " + ds + (legacy ? ", legacy id" : ", new-format id") + ")";
        }
    }

    static final Map<Long, Order> REF = new LinkedHashMap<>();
    static final Map<String, Order> P = new LinkedHashMap<>();
    static final Map<String, Order> MULTI_ITEM = new HashMap<>();
    static List<Order> sameShardTrio;

    static int shardOf(long id, String channel) {
        return CH_BASE.get(channel) + (int) Long.remainderUnsigned(id, SHARDS_PER_CHANNEL);
    }

    static String dsOf(int shard) {
        return SHARD_DS.get(shard);
    }

    static List<Integer> shardsOf(String ds) {
        List<Integer> l = new ArrayList<>();
        for (Map.Entry<Integer, String> e : SHARD_DS.entrySet()) {
            if (e.getValue().equals(ds)) {
                l.add(e.getKey());
            }
        }
        return l;
    }

    /** A fresh new-format id of the channel (timestamp now, random worker and sequence); offset: id % 4, or -1. */
    static long freshId(String channel, int offset) {
        int code = CH_CODE.get(channel);
        while (true) {
            long now = System.currentTimeMillis();
            long id = ((now - EPOCH_MS) << 23) | ((long) RND.nextInt(32) << 18) | ((long) code << 14) | RND.nextInt(16384);
            if (offset >= 0 && id % SHARDS_PER_CHANNEL != offset) {
                continue;
            }
            if (SEEDED.contains(id) || !CREATED.add(id)) {
                continue;
            }
            return id;
        }
    }

    /** A fresh legacy-format id that the index table does not know (routes nowhere). */
    static long unknownLegacyId() throws SQLException {
        long t2020 = 1577836800000L;
        while (true) {
            long ts = t2020 + (long) (RND.nextDouble() * 180L * 86400 * 1000);
            long id = ((ts - EPOCH_MS) << 22) | ((long) RND.nextInt(1024) << 12) | RND.nextInt(4096);
            int bits = (int) ((id >> 14) & 15);
            if (bits < 6 || SEEDED.contains(id)) {
                continue;
            }
            try (PreparedStatement ps = admin("ds0").prepareStatement("SELECT 1 FROM order_meta.t_order_index WHERE order_id = ?")) {
                ps.setLong(1, id);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) {
                        return id;
                    }
                }
            }
        }
    }

    static Order newOrder(String channel, int offset, String tag) {
        Order o = new Order();
        o.id = freshId(channel, offset);
        o.channel = channel;
        o.region = CH_REGION.get(channel);
        o.userId = 900_000_000L + RND.nextInt(1_000_000);
        o.amount = new BigDecimal(RND.nextInt(9_999_999)).movePointLeft(2).add(new BigDecimal("0.01"));
        o.status = "NEW";
        o.note = "java " + tag + " \u00fc\u00e9 \u2713 \ud83d\ude80 \u4e2d\u6587";
        o.createdAt = Timestamp.valueOf("2025-07-08 09:10:11." + String.format("%03d", 1 + RND.nextInt(998)));
        o.shard = shardOf(o.id, channel);
        o.ds = dsOf(o.shard);
        return o;
    }

    static void bindOrder(PreparedStatement ps, Order o) throws SQLException {
        ps.setLong(1, o.id);
        ps.setString(2, o.channel);
        ps.setString(3, o.region);
        ps.setLong(4, o.userId);
        ps.setBigDecimal(5, o.amount);
        ps.setString(6, o.status);
        ps.setString(7, o.note);
        ps.setTimestamp(8, o.createdAt);
    }

    static String physical(String sql, int shard) {
        Matcher m = Pattern.compile("(?i)(?<![\\w$.`])(?:(`?)orders\\1\\.)?(`?)\\b(t_order_item|t_order)\\b(\\2)(?![\\w$])").matcher(sql);
        StringBuilder b = new StringBuilder();
        while (m.find()) {
            String q = m.group(2);
            m.appendReplacement(b, Matcher.quoteReplacement(q + "order_shards" + q + "." + q + m.group(3).toLowerCase() + "_" + shard + q));
        }
        m.appendTail(b);
        return b.toString();
    }

    // ---------------------------------------------------------------------------------------
    // Connections
    // ---------------------------------------------------------------------------------------
    static String amp(String props) {
        return props == null || props.isEmpty() ? "" : "&" + props;
    }

    static String proxyUrl(String props) {
        return "jdbc:mariadb://" + HOST + ":" + proxyPort + "/orders?user=app&password=app&connectTimeout=5000&socketTimeout=30000" + amp(props);
    }

    static String directUrl(String ds, String props) {
        return "jdbc:mariadb://" + HOST + ":" + DS_PORT.get(ds) + "/orders?user=root&connectTimeout=5000&socketTimeout=30000" + amp(props);
    }

    static Connection proxy(String props) throws SQLException {
        return DriverManager.getConnection(proxyUrl(props));
    }

    static Connection direct(String ds, String props) throws SQLException {
        return DriverManager.getConnection(directUrl(ds, props));
    }

    static final Map<String, Connection> ADMIN = new HashMap<>();

    /** Shared autocommit connections straight to each server (placement checks, clean-up). */
    static synchronized Connection admin(String ds) throws SQLException {
        Connection c = ADMIN.get(ds);
        if (c == null || !c.isValid(2)) {
            c = direct(ds, "");
            ADMIN.put(ds, c);
        }
        return c;
    }

    /** A proxy connection and direct ones (same driver settings), opened on demand. */
    static final class Conns implements AutoCloseable {
        final String props;
        final Connection p;
        final Map<String, Connection> d = new HashMap<>();

        Conns(String props) throws SQLException {
            this.props = props;
            this.p = proxy(props);
        }

        Connection d(String ds) throws SQLException {
            Connection c = d.get(ds);
            if (c == null) {
                c = direct(ds, props);
                d.put(ds, c);
            }
            return c;
        }

        @Override
        public void close() {
            closeQuietly(p);
            for (Connection c : d.values()) {
                closeQuietly(c);
            }
        }
    }

    static void closeQuietly(AutoCloseable c) {
        try {
            if (c != null) {
                c.close();
            }
        } catch (Exception ignored) {
            // closing
        }
    }

    // ---------------------------------------------------------------------------------------
    // Check framework
    // ---------------------------------------------------------------------------------------
    interface Body {
        void run() throws Exception;
    }

    interface Binder {
        void bind(PreparedStatement ps) throws Exception;
    }

    static final class Fail extends RuntimeException {
        Fail(String m) {
            super(m, null, false, false);
        }
    }

    static int passed, failed;
    static final List<String> FAILED = new ArrayList<>();
    static List<String> filters = new ArrayList<>();
    static List<String> problems = new ArrayList<>();

    static void check(String name, Body body) {
        if (!filters.isEmpty() && filters.stream().noneMatch(name::contains)) {
            return;
        }
        problems = Collections.synchronizedList(new ArrayList<>());
        long t0 = System.nanoTime();
        Throwable thrown = null;
        try {
            body.run();
        } catch (Throwable e) {
            thrown = e;
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        List<String> all = new ArrayList<>(problems);
        if (thrown != null) {
            all.add(thrown instanceof Fail ? thrown.getMessage() : "unexpected exception: " + describe(thrown));
        }
        if (all.isEmpty()) {
            passed++;
            out.println("PASS " + name + " (" + ms + " ms)");
        } else {
            failed++;
            FAILED.add(name);
            out.println("FAIL " + name + " (" + ms + " ms)");
            int n = 0;
            for (String p : all) {
                if (++n > 8) {
                    out.println("    ... " + (all.size() - 8) + " more problem(s)");
                    break;
                }
                out.println(indent(p, "    "));
            }
        }
        out.flush();
    }

    static String indent(String s, String pre) {
        return pre + s.strip().replace("\n", "\n" + pre);
    }

    /** Non-fatal: records a problem and lets the check go on. */
    static boolean expect(boolean ok, String msg) {
        if (!ok) {
            problems.add(msg);
        }
        return ok;
    }

    /** Fatal: the check cannot go on. */
    static void require(boolean ok, String msg) {
        if (!ok) {
            throw new Fail(msg);
        }
    }

    static String describe(Throwable e) {
        StringBuilder b = new StringBuilder();
        Throwable t = e;
        int depth = 0;
        while (t != null && depth++ < 4) {
            if (b.length() > 0) {
                b.append("\n  caused by: ");
            }
            b.append(t.getClass().getName()).append(": ").append(t.getMessage());
            if (t instanceof SQLException) {
                SQLException s = (SQLException) t;
                b.append(" [errorCode ").append(s.getErrorCode()).append(", SQLState ").append(s.getSQLState()).append("]");
            }
            t = t.getCause();
        }
        for (StackTraceElement el : e.getStackTrace()) {
            if (el.getClassName().startsWith("ProxyClientSuite")) {
                b.append("\n  at ").append(el);
                break;
            }
        }
        return b.toString();
    }

    static int code(Throwable e) {
        Throwable t = e;
        while (t != null) {
            if (t instanceof SQLException) {
                SQLException s = (SQLException) t;
                if (s.getErrorCode() != 0) {
                    return s.getErrorCode();
                }
                if (s.getNextException() != null && s.getNextException() != s) {
                    int c = code(s.getNextException());
                    if (c != 0) {
                        return c;
                    }
                }
            }
            t = t.getCause();
        }
        return 0;
    }

    static String errText(Throwable e) {
        return e == null ? "no error" : "error " + code(e) + ": " + e.getMessage();
    }

    // ---------------------------------------------------------------------------------------
    // Query comparison
    // ---------------------------------------------------------------------------------------
    static final class Res {
        Snap snap;
        SQLException err;
        String psClass;
    }

    static Res run(Connection c, String sql, Binder b) throws Exception {
        Res r = new Res();
        PreparedStatement ps = null;
        try {
            ps = c.prepareStatement(sql);
            r.psClass = ps.getClass().getSimpleName();
            b.bind(ps);
            try (ResultSet rs = ps.executeQuery()) {
                r.snap = Snap.of(rs);
            }
        } catch (SQLException e) {
            r.err = e;
        } finally {
            closeQuietly(ps);
        }
        return r;
    }

    static Res exec(PreparedStatement ps, Binder b) throws Exception {
        Res r = new Res();
        r.psClass = ps.getClass().getSimpleName();
        try {
            b.bind(ps);
            try (ResultSet rs = ps.executeQuery()) {
                r.snap = Snap.of(rs);
            }
        } catch (SQLException e) {
            r.err = e;
        }
        return r;
    }

    static String ctx(String settings, String sql, String params, int shard) {
        return "statement: " + sql + "\nsettings: " + (settings.isEmpty() ? "(driver defaults)" : settings)
            + "\nparameters: " + params + "\ndirect run on " + dsOf(shard) + " (127.0.0.1:" + DS_PORT.get(dsOf(shard))
            + "): " + physical(sql, shard);
    }

    /** Compares two results of one statement; records problems; returns the proxy's snapshot (null on error). */
    static Snap compare(String context, Res d, Res p) {
        if (d.err != null) {
            problems.add(context + "\ndirect MariaDB failed (test bug?): " + describe(d.err));
            return null;
        }
        if (p.err != null) {
            problems.add(context + "\ndirect MariaDB: " + d.snap + "\nproxy: " + describe(p.err));
            return null;
        }
        String diff = Snap.diff(d.snap, p.snap);
        if (d.psClass != null && p.psClass != null && !d.psClass.equals(p.psClass)) {
            diff += "statement class: direct " + d.psClass + ", proxy " + p.psClass
                + " (Connector/J falls back to a client-side statement when COM_STMT_PREPARE fails)\n";
        }
        if (!diff.isEmpty()) {
            problems.add(context + "\ndifferences:\n" + indent(diff, "  ") + "\ndirect MariaDB: " + d.snap + "\nproxy: " + p.snap);
        }
        return p.snap;
    }

    static Snap compareQuery(Conns c, String sql, int shard, String params, Binder b) throws Exception {
        Res p = run(c.p, sql, b);
        Res d = run(c.d(dsOf(shard)), physical(sql, shard), b);
        return compare(ctx(c.props, sql, params, shard), d, p);
    }

    static void expectRows(Snap s, int n, String what) {
        if (s != null) {
            expect(s.rows.size() == n, what + ": expected " + n + " row(s), the proxy gave " + s.rows.size() + ": " + s);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Direct reads of the physical tables
    // ---------------------------------------------------------------------------------------
    static List<Integer> shardsHolding(long id, String table) throws SQLException {
        List<Integer> found = new ArrayList<>();
        for (String ds : DS_PORT.keySet()) {
            StringBuilder q = new StringBuilder();
            for (int s : shardsOf(ds)) {
                if (q.length() > 0) {
                    q.append(" UNION ALL ");
                }
                q.append("SELECT ").append(s).append(" AS s FROM order_shards.").append(table).append('_').append(s)
                    .append(" WHERE order_id = ").append(Long.toUnsignedString(id));
            }
            try (Statement st = admin(ds).createStatement(); ResultSet rs = st.executeQuery(q.toString())) {
                while (rs.next()) {
                    found.add(rs.getInt(1));
                }
            }
        }
        Collections.sort(found);
        return found;
    }

    static Order physicalRow(long id, int shard) throws SQLException {
        try (PreparedStatement ps = admin(dsOf(shard)).prepareStatement(
            "SELECT " + ORDER_COLS + " FROM order_shards.t_order_" + shard + " WHERE order_id = ?")) {
            ps.setLong(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return null;
                }
                Order o = readOrder(rs);
                o.shard = shard;
                o.ds = dsOf(shard);
                return o;
            }
        }
    }

    static Order readOrder(ResultSet rs) throws SQLException {
        Order o = new Order();
        o.id = rs.getLong("order_id");
        o.channel = rs.getString("channel");
        o.region = rs.getString("region");
        o.userId = rs.getLong("user_id");
        o.amount = rs.getBigDecimal("amount");
        o.status = rs.getString("status");
        o.note = rs.getString("note");
        o.createdAt = rs.getTimestamp("created_at");
        return o;
    }

    static String sameOrder(Order exp, Order got) {
        if (got == null) {
            return "row missing";
        }
        List<String> d = new ArrayList<>();
        if (exp.id != got.id) d.add("order_id " + exp.id + " vs " + got.id);
        if (!exp.channel.equals(got.channel)) d.add("channel " + exp.channel + " vs " + got.channel);
        if (!exp.region.equals(got.region)) d.add("region " + exp.region + " vs " + got.region);
        if (exp.userId != got.userId) d.add("user_id " + exp.userId + " vs " + got.userId);
        if (exp.amount.compareTo(got.amount) != 0) d.add("amount " + exp.amount + " vs " + got.amount);
        if (!exp.status.equals(got.status)) d.add("status " + exp.status + " vs " + got.status);
        if (exp.note == null ? got.note != null : !exp.note.equals(got.note)) d.add("note " + Snap.quote(exp.note) + " vs " + Snap.quote(got.note));
        if (!exp.createdAt.equals(got.createdAt)) d.add("created_at " + exp.createdAt + " vs " + got.createdAt);
        return String.join(", ", d);
    }

    static void insertDirect(Order o) throws SQLException {
        try (PreparedStatement ps = admin(o.ds).prepareStatement(
            "INSERT INTO order_shards.t_order_" + o.shard + " (" + ORDER_COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)")) {
            bindOrder(ps, o);
            ps.executeUpdate();
        }
    }

    static Order freshDirect(String channel, int offset, String tag) throws SQLException {
        Order o = newOrder(channel, offset, tag);
        insertDirect(o);
        return o;
    }

    static int execUpdate(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setObject(i + 1, params[i]);
            }
            return ps.executeUpdate();
        }
    }

    static String scalar(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                ps.setObject(i + 1, params[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getString(1) : "<no row>";
            }
        }
    }

    /** A connection still serves statements: SELECT 42 and a sharded point select. */
    static void expectUsable(Connection c, String after) {
        try {
            String v = scalar(c, "SELECT 42");
            expect("42".equals(v), "after " + after + ": SELECT 42 gave " + v);
            Order o = P.get("newDs1");
            try (PreparedStatement ps = c.prepareStatement(SQL_ORDER)) {
                ps.setLong(1, o.id);
                try (ResultSet rs = ps.executeQuery()) {
                    expect(rs.next() && rs.getLong(1) == o.id, "after " + after + ": point select of " + o + " found no row");
                }
            }
            expect(c.isValid(3), "after " + after + ": isValid() is false");
        } catch (Exception e) {
            problems.add("after " + after + " the connection is not usable: " + describe(e));
        }
    }

    // ---------------------------------------------------------------------------------------
    // Setup
    // ---------------------------------------------------------------------------------------
    @SuppressWarnings("unchecked")
    static void setup() throws Exception {
        String port = System.getenv("ROUTEKEY_PROXY_PORT");
        if (port == null || port.isEmpty()) {
            throw new IllegalStateException("ROUTEKEY_PROXY_PORT is not set");
        }
        proxyPort = Integer.parseInt(port);
        DS_PORT.put("ds0", Integer.parseInt(envOr("ROUTEKEY_DS0_PORT", "33061")));
        DS_PORT.put("ds1", Integer.parseInt(envOr("ROUTEKEY_DS1_PORT", "33062")));
        sandbox = Paths.get(envOr("ROUTEKEY_SANDBOX_DIR", ".sandbox"));
        Map<String, Object> sum = (Map<String, Object>) Json.parse(
            new String(Files.readAllBytes(sandbox.resolve("seed-summary.json")), StandardCharsets.UTF_8));
        Map<String, Object> dss = (Map<String, Object>) sum.get("datasources");
        for (Map.Entry<String, Object> e : dss.entrySet()) {
            for (Object s : (List<Object>) ((Map<String, Object>) e.getValue()).get("shards")) {
                SHARD_DS.put(((Long) s).intValue(), e.getKey());
            }
        }
        Map<String, Object> chs = (Map<String, Object>) sum.get("channels");
        for (Map.Entry<String, Object> e : chs.entrySet()) {
            Map<String, Object> ch = (Map<String, Object>) e.getValue();
            CH_CODE.put(e.getKey(), ((Long) ch.get("code")).intValue());
            CH_BASE.put(e.getKey(), ((Long) ch.get("base_shard")).intValue());
            CH_REGION.put(e.getKey(), (String) ((List<Object>) ch.get("regions")).get(0));
            for (Object id : (List<Object>) ch.get("legacy_ids")) {
                LEGACY.add((Long) id);
                SEEDED.add((Long) id);
            }
            for (Object id : (List<Object>) ch.get("new_format_ids")) {
                SEEDED.add((Long) id);
            }
        }
        lookalikes = (List<Object>) sum.get("legacy_lookalikes");

        try (Statement st = admin("ds0").createStatement();
             ResultSet rs = st.executeQuery("SELECT " + ORDER_COLS + " FROM orders_ref.t_order ORDER BY order_id")) {
            while (rs.next()) {
                Order o = readOrder(rs);
                o.shard = shardOf(o.id, o.channel);
                o.ds = dsOf(o.shard);
                o.legacy = LEGACY.contains(o.id);
                REF.put(o.id, o);
            }
        }
        pick("newDs0", o -> !o.legacy && o.ds.equals("ds0") && o.note != null && o.note.chars().allMatch(ch -> ch < 128)
            && o.createdAt.getNanos() != 0);
        pick("newDs1", o -> !o.legacy && o.ds.equals("ds1") && o.createdAt.getNanos() != 0);
        pick("legacyDs0", o -> o.legacy && o.ds.equals("ds0"));
        pick("legacyDs1", o -> o.legacy && o.ds.equals("ds1") && o.note != null);
        for (Object x : lookalikes) {
            Map<String, Object> m = (Map<String, Object>) x;
            Order o = REF.get((Long) m.get("order_id"));
            int fake = shardOf(o.id, (String) m.get("looks_like_channel"));
            if (!dsOf(fake).equals(o.ds)) {
                P.put("lookalike", o);
                break;
            }
        }
        require(P.containsKey("lookalike"), "no legacy look-alike id in the seed");
        pick("emoji", o -> !o.legacy && hasEmoji(o.note));
        pick("emojiLegacy", o -> o.legacy && hasEmoji(o.note));
        pick("nullNote", o -> o.note == null && o.ds.equals("ds1"));
        pick("cjkDs1", o -> !o.legacy && o.ds.equals("ds1") && o.note != null && o.note.chars().anyMatch(ch -> ch >= 0x3000) && !hasEmoji(o.note));

        try (Statement st = admin("ds0").createStatement();
             ResultSet rs = st.executeQuery("SELECT order_id FROM orders_ref.t_order_item GROUP BY order_id HAVING COUNT(*) >= 2 ORDER BY order_id")) {
            while (rs.next()) {
                Order o = REF.get(rs.getLong(1));
                if (o != null) {
                    MULTI_ITEM.putIfAbsent(o.ds, o);
                }
            }
        }
        require(MULTI_ITEM.size() == 2, "no multi-item orders on both datasources");
        Map<Integer, List<Order>> byShard = new TreeMap<>();
        for (Order o : REF.values()) {
            byShard.computeIfAbsent(o.shard, k -> new ArrayList<>()).add(o);
        }
        sameShardTrio = byShard.get(13).subList(0, 3);
    }

    interface Pred {
        boolean test(Order o);
    }

    static void pick(String name, Pred p) {
        for (Order o : REF.values()) {
            if (p.test(o)) {
                P.put(name, o);
                return;
            }
        }
        throw new IllegalStateException("no seeded order for " + name);
    }

    static boolean hasEmoji(String s) {
        return s != null && s.codePoints().anyMatch(cp -> cp > 0xFFFF);
    }

    static String envOr(String k, String d) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? d : v;
    }

    // ---------------------------------------------------------------------------------------
    // Main
    // ---------------------------------------------------------------------------------------
    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        filters = Arrays.asList(args);
        long t0 = System.nanoTime();
        try {
            setup();
        } catch (Exception e) {
            out.println("FAIL setup: " + describe(e));
            System.exit(1);
        }
        java.sql.Driver drv = DriverManager.getDriver(proxyUrl(""));
        out.println("java suite: MariaDB Connector/J " + drv.getMajorVersion() + "." + drv.getMinorVersion()
            + ", Java " + System.getProperty("java.version") + ", proxy 127.0.0.1:" + proxyPort + ", ds0 :" + DS_PORT.get("ds0") + ", ds1 :" + DS_PORT.get("ds1"));
        try {
            for (Mode m : MODES) {
                ReadChecks.run(m);
            }
            for (Mode m : MODES) {
                WriteChecks.run(m);
            }
            for (Mode m : MODES) {
                SessionChecks.run(m);
            }
            for (Mode m : MODES) {
                SessionChecks.cancel(m);
                SessionChecks.queryTimeout(m);
            }
            for (Mode m : MODES) {
                PoolChecks.run(m);
            }
        } finally {
            filters = new ArrayList<>(); // the clean-up always runs
            check("clean-up: rows created by this run are deleted", ProxyClientSuite::cleanup);
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        out.println();
        out.println("java suite: " + passed + " passed, " + failed + " failed in " + String.format("%.1f", ms / 1000.0) + " s");
        for (String f : FAILED) {
            out.println("  FAILED: " + f);
        }
        if (failed > 0) {
            out.println("  proxy log: " + sandbox.resolve("client-tests").resolve("proxy.log"));
        }
        out.flush();
        System.exit(failed == 0 ? 0 : 1);
    }

    static void cleanup() throws Exception {
        List<Long> ids = new ArrayList<>(CREATED);
        for (int from = 0; from < ids.size(); from += 200) {
            List<Long> part = ids.subList(from, Math.min(ids.size(), from + 200));
            StringBuilder in = new StringBuilder();
            for (long id : part) {
                in.append(in.length() == 0 ? "" : ",").append(Long.toUnsignedString(id));
            }
            for (String ds : DS_PORT.keySet()) {
                try (Statement st = admin(ds).createStatement()) {
                    for (int s : shardsOf(ds)) {
                        st.executeUpdate("DELETE FROM order_shards.t_order_item_" + s + " WHERE order_id IN (" + in + ")");
                        st.executeUpdate("DELETE FROM order_shards.t_order_" + s + " WHERE order_id IN (" + in + ")");
                    }
                }
            }
            try (Statement st = admin("ds0").createStatement()) {
                st.executeUpdate("DELETE FROM order_meta.t_order_index WHERE order_id IN (" + in + ")");
            }
        }
        int left = 0;
        for (int from = 0; from < ids.size(); from += 200) {
            List<Long> part = ids.subList(from, Math.min(ids.size(), from + 200));
            StringBuilder in = new StringBuilder();
            for (long id : part) {
                in.append(in.length() == 0 ? "" : ",").append(Long.toUnsignedString(id));
            }
            for (String ds : DS_PORT.keySet()) {
                StringBuilder q = new StringBuilder("SELECT 0");
                for (int s : shardsOf(ds)) {
                    q.append(" + (SELECT COUNT(*) FROM order_shards.t_order_").append(s).append(" WHERE order_id IN (").append(in).append("))");
                    q.append(" + (SELECT COUNT(*) FROM order_shards.t_order_item_").append(s).append(" WHERE order_id IN (").append(in).append("))");
                }
                left += Integer.parseInt(scalar(admin(ds), q.toString()));
            }
        }
        expect(left == 0, left + " rows of created orders remain after clean-up");
    }
}
