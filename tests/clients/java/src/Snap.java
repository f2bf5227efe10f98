import java.math.BigDecimal;
import java.security.MessageDigest;
import java.sql.Blob;
import java.sql.Clob;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * What Connector/J shows of one result: per column the ResultSetMetaData fields, per cell the
 * getObject() class and value and the getString() text. Two snapshots (direct MariaDB on the
 * physical table, and the proxy on the logical one) are compared field by field; the direct
 * one's physical table and schema names are mapped to the logical ones first.
 */
final class Snap {
    static final String[] FIELDS = {
        "label", "name", "table", "catalog", "typeName", "type", "className",
        "precision", "scale", "signed", "nullable", "displaySize", "autoIncrement"
    };
    static final int F_LABEL = 0, F_TABLE = 2, F_CATALOG = 3;

    private static final Pattern PHYSICAL_TABLE = Pattern.compile("(?i)^(t_order_item|t_order)_\\d+$");

    final List<String[]> cols = new ArrayList<>();
    final List<String[]> rows = new ArrayList<>();
    /** getObject() values of the cells (for extra assertions by the checks). */
    final List<Object[]> values = new ArrayList<>();

    static Snap of(ResultSet rs) throws SQLException {
        Snap s = meta(rs.getMetaData());
        int n = s.cols.size();
        while (rs.next()) {
            String[] r = new String[n];
            Object[] v = new Object[n];
            for (int c = 1; c <= n; c++) {
                Object o = rs.getObject(c);
                if (o instanceof Blob) {
                    Blob b = (Blob) o;
                    o = b.getBytes(1, (int) b.length());
                    r[c - 1] = "java.sql.Blob:" + repr(o);
                } else if (o instanceof Clob) {
                    Clob b = (Clob) o;
                    o = b.getSubString(1, (int) b.length());
                    r[c - 1] = "java.sql.Clob:" + repr(o);
                } else {
                    r[c - 1] = o == null ? "NULL" : o.getClass().getName() + ":" + repr(o);
                }
                String str = rs.getString(c);
                r[c - 1] += "  getString=" + (str == null ? "NULL" : quote(str));
                v[c - 1] = o;
            }
            s.rows.add(r);
            s.values.add(v);
        }
        return s;
    }

    static Snap meta(ResultSetMetaData md) throws SQLException {
        Snap s = new Snap();
        if (md == null) {
            return s;
        }
        for (int c = 1; c <= md.getColumnCount(); c++) {
            s.cols.add(new String[] {
                md.getColumnLabel(c), md.getColumnName(c), md.getTableName(c), md.getCatalogName(c),
                md.getColumnTypeName(c), String.valueOf(md.getColumnType(c)), md.getColumnClassName(c),
                String.valueOf(md.getPrecision(c)), String.valueOf(md.getScale(c)),
                String.valueOf(md.isSigned(c)), String.valueOf(md.isNullable(c)),
                String.valueOf(md.getColumnDisplaySize(c)), String.valueOf(md.isAutoIncrement(c)),
            });
        }
        return s;
    }

    /** The direct snapshot as the proxy should show it: logical table and schema names. */
    Snap logical() {
        Snap s = new Snap();
        for (String[] c : cols) {
            String[] d = c.clone();
            d[F_TABLE] = PHYSICAL_TABLE.matcher(d[F_TABLE]).replaceAll("$1");
            if ("order_shards".equalsIgnoreCase(d[F_CATALOG]) || "orders_ref".equalsIgnoreCase(d[F_CATALOG])) { // orders_ref: the unsharded reference
                d[F_CATALOG] = "orders";
            }
            s.cols.add(d);
        }
        s.rows.addAll(rows);
        s.values.addAll(values);
        return s;
    }

    int col(String label) {
        for (int i = 0; i < cols.size(); i++) {
            if (cols.get(i)[F_LABEL].equalsIgnoreCase(label)) {
                return i;
            }
        }
        throw new IllegalArgumentException("no column " + label);
    }

    Object value(int row, String label) {
        return values.get(row)[col(label)];
    }

    /** Differences between what direct MariaDB gives (mapped to logical names) and the proxy; "" if none. */
    static String diff(Snap direct, Snap proxy) {
        Snap exp = direct.logical();
        StringBuilder b = new StringBuilder();
        if (exp.cols.size() != proxy.cols.size()) {
            b.append("column count: direct MariaDB ").append(exp.cols.size()).append(" ")
                .append(labels(exp)).append(", proxy ").append(proxy.cols.size()).append(" ")
                .append(labels(proxy)).append('\n');
        }
        for (int c = 0; c < Math.min(exp.cols.size(), proxy.cols.size()); c++) {
            for (int f = 0; f < FIELDS.length; f++) {
                String e = exp.cols.get(c)[f], p = proxy.cols.get(c)[f];
                if (!eq(e, p)) {
                    b.append("column ").append(c + 1).append(" (").append(exp.cols.get(c)[F_LABEL]).append(") ")
                        .append(FIELDS[f]).append(": direct MariaDB ").append(quote(direct.cols.get(c)[f]))
                        .append(f == F_TABLE || f == F_CATALOG ? " (expected through the proxy: " + quote(e) + ")" : "")
                        .append(", proxy ").append(quote(p)).append('\n');
                }
            }
        }
        if (exp.rows.size() != proxy.rows.size()) {
            b.append("row count: direct MariaDB ").append(exp.rows.size()).append(", proxy ")
                .append(proxy.rows.size()).append('\n');
        }
        for (int r = 0; r < Math.min(exp.rows.size(), proxy.rows.size()); r++) {
            String[] e = exp.rows.get(r), p = proxy.rows.get(r);
            for (int c = 0; c < Math.min(e.length, p.length); c++) {
                if (!eq(e[c], p[c])) {
                    String label = c < exp.cols.size() ? exp.cols.get(c)[F_LABEL] : "#" + (c + 1);
                    b.append("row ").append(r + 1).append(" column ").append(label)
                        .append(": direct MariaDB ").append(e[c]).append(", proxy ").append(p[c]).append('\n');
                }
            }
        }
        return b.toString();
    }

    private static boolean eq(String a, String b) {
        return a == null ? b == null : a.equals(b);
    }

    private static String labels(Snap s) {
        List<String> l = new ArrayList<>();
        for (String[] c : s.cols) {
            l.add(c[F_LABEL]);
        }
        return l.toString();
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder();
        b.append(labels(this)).append(" ").append(rows.size()).append(" row(s)");
        for (String[] r : rows) {
            b.append("\n    ").append(String.join(" ; ", r));
        }
        return b.toString();
    }

    static String repr(Object o) {
        if (o == null) {
            return "NULL";
        }
        if (o instanceof byte[]) {
            byte[] a = (byte[]) o;
            if (a.length > 48) {
                return "bytes[len=" + a.length + ",md5=" + md5Hex(a) + "]";
            }
            StringBuilder b = new StringBuilder("0x");
            for (byte x : a) {
                b.append(String.format("%02x", x & 0xff));
            }
            return b.toString();
        }
        if (o instanceof BigDecimal) {
            BigDecimal d = (BigDecimal) o;
            return d.toPlainString() + "(scale " + d.scale() + ")";
        }
        if (o instanceof String) {
            return quote((String) o);
        }
        return String.valueOf(o);
    }

    static String quote(String s) {
        if (s == null) {
            return "NULL";
        }
        if (s.length() > 120) {
            return "'" + esc(s.substring(0, 60)) + "...'(len=" + s.length() + ",md5=" + md5Hex(s.getBytes(java.nio.charset.StandardCharsets.UTF_8)) + ")";
        }
        return "'" + esc(s) + "'";
    }

    private static String esc(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\n') {
                b.append("\\n");
            } else if (c == '\\') {
                b.append("\\\\");
            } else if (c == '\'') {
                b.append("\\'");
            } else if (c < 0x20 || c == 0x7f || c == 0xfffd) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    static String md5Hex(byte[] a) {
        try {
            byte[] d = MessageDigest.getInstance("MD5").digest(a);
            StringBuilder b = new StringBuilder();
            for (byte x : d) {
                b.append(String.format("%02x", x & 0xff));
            }
            return b.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
