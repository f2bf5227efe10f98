#!/usr/bin/env python3
"""Writes the fuzz targets' starting inputs into fuzz/seeds/<target>/ (see docs/fuzzing.md).

    fuzz/make_seeds.py [MARIADB_PORT]

client_packets: handshake responses as MySQL/MariaDB clients send them, and prepared
statement exchanges (SEND_LONG_DATA, EXECUTE) in the harness's framing. sql_analysis:
statements from the repository's own tests, each under a few session flag bytes.
backend_packets: a real MariaDB's greeting, OK, ERR and result sets (text and binary rows),
read from the sandbox server at MARIADB_PORT (default 33061; skipped when it is down).
"""
import hashlib
import os
import re
import socket
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "seeds")


def write(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def frame(*packets):
    return b"".join(struct.pack("<H", len(p)) + p for p in packets)


def lenenc(b):
    n = len(b)
    if n < 251:
        return bytes([n]) + b
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n) + b
    return b"\xfd" + struct.pack("<I", n)[:3] + b


# ---- client_packets ----------------------------------------------------------------------
def handshake_response(user, db=None, plugin=b"mysql_native_password", attrs=None, collation=45):
    caps = 0x0001 | 0x0004 | 0x0200 | 0x8000 | 0x00080000 | 0x00200000 | 0x01000000
    if db is not None:
        caps |= 0x0008
    if attrs is not None:
        caps |= 0x00100000
    body = struct.pack("<IIB", caps, 1 << 24, collation) + b"\0" * 23
    body += user + b"\0" + lenenc(b"\x11" * 20)
    if db is not None:
        body += db + b"\0"
    body += plugin + b"\0"
    if attrs is not None:
        kv = b"".join(lenenc(k) + lenenc(v) for k, v in attrs.items())
        body += lenenc(kv)
    return body


def client_seeds():
    t = "client_packets"
    write(t, handshake_response(b"app", b"orders"))
    write(t, handshake_response(b"app", None, b"caching_sha2_password", {b"_client_name": b"libmariadb", b"program_name": b"mysql"}))
    write(t, handshake_response(b"app", b"orders", b"client_ed25519", {}, collation=8))
    write(t, struct.pack("<IIB", 0x0001 | 0x0200 | 0x0800 | 0x8000, 1 << 24, 45) + b"\0" * 23)  # SSL request
    # prepared statement exchanges: param count, then framed packets
    ll = struct.pack("<IB", 7, 0) + struct.pack("<I", 1)
    # 3 params: LONGLONG unsigned 42, NULL, VAR_STRING 'abc'
    ex = ll + bytes([0b010, 1, 8, 0x80, 6, 0, 253, 0]) + struct.pack("<Q", 42) + lenenc(b"abc")
    write(t, bytes([3]) + frame(b"\x17" + ex))
    again = ll + bytes([0b010, 0]) + struct.pack("<Q", 42) + lenenc(b"abc")
    write(t, bytes([3]) + frame(b"\x17" + ex, b"\x17" + again))
    long = b"\x18" + struct.pack("<IH", 7, 2) + b"x" * 40
    ex2 = ll + bytes([0, 1, 8, 0x80, 6, 0, 252, 0]) + struct.pack("<Q", 42)
    write(t, bytes([3]) + frame(long, long, b"\x17" + ex2))
    # dates, times, decimals, doubles
    ex3 = ll + bytes([0, 1, 10, 0, 12, 0, 11, 0, 246, 0, 5, 0, 1, 0, 2, 0])
    ex3 += bytes([4]) + struct.pack("<HBB", 2026, 12, 2)
    ex3 += bytes([7]) + struct.pack("<HBBBBB", 2026, 12, 2, 3, 4, 5)
    ex3 += bytes([8, 0]) + struct.pack("<IBBB", 1, 2, 3, 4)
    ex3 += lenenc(b"12.50") + struct.pack("<d", 1.5) + b"\x7f" + struct.pack("<h", -3)
    write(t, bytes([7]) + frame(b"\x17" + ex3))


# ---- sql_analysis ------------------------------------------------------------------------
STATEMENT = re.compile(
    r'"((?:SELECT|INSERT|UPDATE|DELETE|REPLACE|SHOW|SET|USE|BEGIN|START|COMMIT|ROLLBACK|EXPLAIN|CALL|LOCK|UNLOCK|CREATE|ALTER|DROP|DESCRIBE|DESC|PREPARE|EXECUTE|KILL|FLUSH|WITH|/\*)[^"\\]*(?:\\.[^"\\]*)*)"',
    re.IGNORECASE,
)


def sql_seeds():
    t = "sql_analysis"
    seen = set()
    for folder in ("src", "tests"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if not name.endswith(".rs"):
                    continue
                text = open(os.path.join(dirpath, name), encoding="utf-8").read()
                for m in STATEMENT.finditer(text):
                    try:
                        sql = m.group(1).encode().decode("unicode_escape").encode("latin-1")
                    except (UnicodeDecodeError, UnicodeEncodeError):
                        sql = m.group(1).encode()
                    if 8 <= len(sql) <= 2000 and sql not in seen:
                        seen.add(sql)
    for i, sql in enumerate(sorted(seen)):
        flags = [0, 8, 1 | 2, 4, 16][i % 5]
        write(t, bytes([flags]) + sql)
    write(t, b"\0" + b"; ".join(sorted(seen)[:20]))


# ---- backend_packets ---------------------------------------------------------------------
def read_packet(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            raise EOFError
        head += chunk
    n = head[0] | head[1] << 8 | head[2] << 16
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            raise EOFError
        body += chunk
    return head[3], body


def send(s, seq, body):
    s.sendall(struct.pack("<I", len(body))[:3] + bytes([seq]) + body)


def result_set(s):
    """The packets of one reply up to the end of its rows (classic EOF protocol)."""
    first = read_packet(s)[1]
    packets = [first]
    if first[0] in (0x00, 0xFF):
        return packets
    eofs = 0
    while eofs < 2:
        p = read_packet(s)[1]
        packets.append(p)
        if p[0] == 0xFF:
            break
        if p[0] == 0xFE and len(p) < 9:
            eofs += 1
    return packets


def backend_seeds(port):
    t = "backend_packets"
    write(t, b"\x00\x01\x00\x02\x00\x00\x00")  # OK
    write(t, b"\xff\x15\x04#28000Access denied for user 'x'")  # ERR
    write(t, b"\xfe\x00\x00\x02\x00")  # EOF
    write(t, b"\xfemysql_native_password\x00" + b"a" * 20 + b"\x00")  # auth switch
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError as e:
        print(f"make_seeds: no MariaDB on {port} ({e}); backend seeds without a live server")
        return
    _, greeting = read_packet(s)
    write(t, greeting)
    caps = 0x0001 | 0x0004 | 0x0200 | 0x2000 | 0x8000 | 0x00020000 | 0x00080000 | 0x00200000
    send(s, 1, struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 + b"root\0\0mysql_native_password\0")
    _, ok = read_packet(s)
    write(t, ok)
    queries = [
        b"SELECT 1, NULL, 'abc', 1.5e0, CAST(12.50 AS DECIMAL(10,2)), NOW(6), CURDATE(), TIME'-12:34:56.5', 18446744073709551615",
        b"SELECT * FROM orders_ref.t_order ORDER BY order_id LIMIT 3",
        b"SELECT * FROM no_such_db.t",
        b"DO 1",
        b"SHOW VARIABLES LIKE 'version%'",
    ]
    for q in queries:
        send(s, 0, b"\x03" + q)
        packets = result_set(s)
        write(t, frame(*packets))
        write(t, packets[0])
        if len(packets) > 1:
            write(t, packets[1])  # a column definition alone
    # binary rows: prepare and execute
    for q in queries[:2]:
        send(s, 0, b"\x16" + q)
        p = read_packet(s)[1]
        if p[0] != 0:
            continue
        stmt, cols, params = struct.unpack("<IHH", p[1:9])
        for _ in range(cols + (1 if cols else 0) + params + (1 if params else 0)):
            read_packet(s)
        send(s, 0, b"\x17" + struct.pack("<IBI", stmt, 0, 1))
        write(t, frame(*result_set(s)))
    s.close()


if __name__ == "__main__":
    client_seeds()
    sql_seeds()
    backend_seeds(int(sys.argv[1]) if len(sys.argv) > 1 else 33061)
    for target in sorted(os.listdir(OUT)):
        print(target, len(os.listdir(os.path.join(OUT, target))))
