"""Client security through routekey-proxy with real clients (demo configuration):

  app       mysql_native_password, password app
  app_sha2  caching_sha2_password, password app
  app_tls   mysql_native_password, password app, require_tls

TLS is verified against the sandbox CA (<sandbox>/tls/ca.pem); other-ca.pem must be refused.
Every check prints PASS or FAIL; exits 1 when anything failed. The first login of app_sha2
in this proxy process is a full authentication: it runs first here (PyMySQL over clear-text
TCP, so through the RSA public key exchange), before any fast-path login.
"""

import os
import subprocess
import sys
import traceback
from pathlib import Path

import mysql.connector
import pymysql

HOST = "127.0.0.1"
PORT = int(os.environ["ROUTEKEY_PROXY_PORT"])
TLS = Path(os.environ["ROUTEKEY_SANDBOX_DIR"]) / "tls"
CA, OTHER_CA = str(TLS / "ca.pem"), str(TLS / "other-ca.pem")
FAILED = []


def check(name, ok, detail=""):
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else ": %s" % detail), flush=True)
    if not ok:
        FAILED.append(name)


def run(name, fn):
    try:
        fn()
    except Exception:  # a check that raised failed
        check(name, False, traceback.format_exc())


def status(cur, name):
    cur.execute("SHOW STATUS LIKE %s", (name,))
    rows = cur.fetchall()
    return rows[0][1] if rows else None


def pymysql_conn(user, tls=True, ca=CA, **kw):
    args = dict(host=HOST, port=PORT, user=user, password="app", database="orders")
    if tls:
        args.update(ssl_ca=ca, ssl_verify_cert=True, ssl_verify_identity=True)
    else:
        # PyMySQL 1.2 uses TLS whenever the server offers it, unless told not to.
        args.update(ssl_disabled=True)
    args.update(kw)
    return pymysql.connect(**args)


def error_code(fn):
    try:
        fn()
    except (pymysql.err.OperationalError, mysql.connector.Error) as e:
        return getattr(e, "errno", None) or e.args[0]
    return None


def pymysql_sha2_rsa_first():
    conn = pymysql_conn("app_sha2", tls=False)
    check("pymysql caching_sha2 full authentication over TCP asked for the RSA key",
          conn.server_public_key is not None and b"BEGIN PUBLIC KEY" in conn.server_public_key,
          repr(conn.server_public_key))
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM t_order")
    check("pymysql caching_sha2 over TCP (RSA) works", cur.fetchone()[0] == 1500)
    conn.close()
    wrong = error_code(lambda: pymysql_conn("app_sha2", tls=False, password="apq"))
    check("pymysql caching_sha2 wrong password refused with 1045", wrong == 1045, wrong)


def pymysql_tls():
    conn = pymysql_conn("app")
    cur = conn.cursor()
    cipher, version = status(cur, "Ssl_cipher"), status(cur, "Ssl_version")
    check("pymysql TLS: Ssl_cipher names the suite", bool(cipher) and cipher.startswith("TLS"), cipher)
    check("pymysql TLS: Ssl_version", bool(version) and version.startswith("TLSv1."), version)
    cur.execute("SELECT COUNT(*) FROM t_order")
    check("pymysql TLS: statements work", cur.fetchone()[0] == 1500)
    conn.close()
    plain = pymysql_conn("app", tls=False)
    check("pymysql clear text: Ssl_cipher empty", status(plain.cursor(), "Ssl_cipher") == "")
    plain.close()
    conn = pymysql_conn("app_sha2")
    check("pymysql caching_sha2 over TLS", status(conn.cursor(), "Ssl_cipher").startswith("TLS"))
    conn.close()


def pymysql_refusals():
    try:
        pymysql_conn("app", ca=OTHER_CA)
        check("pymysql: a certificate of another CA is refused", False, "connected")
    except pymysql.err.OperationalError as e:
        check("pymysql: a certificate of another CA is refused", "CERTIFICATE_VERIFY_FAILED" in str(e), e)
    code = error_code(lambda: pymysql_conn("app_tls", tls=False))
    check("pymysql: require_tls user refused in clear text with 1045", code == 1045, code)
    conn = pymysql_conn("app_tls")
    check("pymysql: require_tls user accepted over TLS", status(conn.cursor(), "Ssl_cipher").startswith("TLS"))
    conn.close()


def connector(user, pure, tls=True, **kw):
    args = dict(host=HOST, port=PORT, user=user, password="app", database="orders", use_pure=pure)
    if tls:
        args.update(ssl_ca=CA, ssl_verify_cert=True, ssl_verify_identity=True)
    else:
        args.update(ssl_disabled=True)
    args.update(kw)
    return mysql.connector.connect(**args)


def connector_checks():
    modes = [True]
    if getattr(mysql.connector, "HAVE_CEXT", False):
        modes.append(False)
    for pure in modes:
        mode = "pure" if pure else "cext"
        conn = connector("app", pure)
        cur = conn.cursor()
        cipher = status(cur, "Ssl_cipher")
        check("connector %s TLS: Ssl_cipher" % mode, bool(cipher) and cipher.startswith("TLS"), cipher)
        conn.close()
        conn = connector("app_sha2", pure, auth_plugin="caching_sha2_password")
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM t_order")
        check("connector %s caching_sha2 over TLS" % mode, cur.fetchone()[0] == 1500)
        conn.close()
        # After a full authentication, the fast path needs no TLS; a client opening with
        # mysql_native_password (the greeting's) is switched to caching_sha2_password.
        # (The C extension refuses auth_plugin="caching_sha2_password" with ssl_disabled by
        # itself, before it connects: only the pure implementation names it here.)
        conn = connector("app_sha2", pure, tls=False)
        check("connector %s switched to caching_sha2, fast path over TCP" % mode,
              status(conn.cursor(), "Ssl_cipher") == "")
        conn.close()
        if pure:
            conn = connector("app_sha2", pure, tls=False, auth_plugin="caching_sha2_password")
            check("connector pure caching_sha2 fast path over TCP",
                  status(conn.cursor(), "Ssl_cipher") == "")
            conn.close()
        # A native user, the client opening with caching_sha2: switched to native.
        conn = connector("app", pure, auth_plugin="caching_sha2_password")
        check("connector %s switched to mysql_native_password" % mode, conn.is_connected())
        conn.close()
        code = error_code(lambda: connector("app_tls", pure, tls=False))
        check("connector %s require_tls refused in clear text" % mode, code == 1045, code)


def cli(*args, user="app"):
    cmd = ["mariadb", "--no-defaults", "--protocol=TCP", "-h", HOST, "-P", str(PORT),
           "-u", user, "-papp", "-N", "-B"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def cli_checks():
    r = cli("--ssl", "--ssl-ca=" + CA, "--ssl-verify-server-cert", "-e", "SHOW STATUS LIKE 'Ssl_cipher'")
    check("mariadb CLI --ssl --ssl-verify-server-cert: Ssl_cipher",
          r.returncode == 0 and "\tTLS" in r.stdout, r.stdout + r.stderr)
    r = cli("--ssl", "-e", "SHOW STATUS LIKE 'Ssl_version'")
    check("mariadb CLI --ssl: Ssl_version", r.returncode == 0 and "TLSv1." in r.stdout, r.stdout + r.stderr)
    r = cli("--ssl", "--ssl-ca=" + OTHER_CA, "--ssl-verify-server-cert", "-e", "SELECT 1")
    check("mariadb CLI: another CA refused", r.returncode != 0, r.stdout + r.stderr)
    r = cli("--skip-ssl", "-e", "SELECT 1", user="app_tls")
    check("mariadb CLI: require_tls refused in clear text",
          r.returncode != 0 and "1045" in r.stderr, r.stdout + r.stderr)
    r = cli("--ssl", "-e", "SELECT COUNT(*) FROM orders.t_order", user="app_sha2")
    check("mariadb CLI: caching_sha2 over TLS", r.returncode == 0 and r.stdout.strip() == "1500",
          r.stdout + r.stderr)
    r = cli("--skip-ssl", "-e", "SELECT COUNT(*) FROM orders.t_order", user="app_sha2")
    check("mariadb CLI: caching_sha2 over TCP", r.returncode == 0 and r.stdout.strip() == "1500",
          r.stdout + r.stderr)


def socket_checks():
    """The proxy's Unix socket (server.socket): a local client, secure, named localhost."""
    path = os.environ.get("ROUTEKEY_PROXY_SOCKET")
    check("the proxy listens on a Unix socket", bool(path) and os.path.exists(path), path)
    conn = pymysql.connect(unix_socket=path, user="app", password="app", database="orders")
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM t_order")
    check("pymysql unix_socket: statements work", cur.fetchone()[0] == 1500)
    cur.execute("SHOW PROCESSLIST")
    hosts = {row[2] for row in cur.fetchall()}
    check("pymysql unix_socket: the session's host is localhost", "localhost" in hosts, hosts)
    conn.close()
    conn = pymysql.connect(unix_socket=path, user="app_tls", password="app", database="orders")
    check("pymysql unix_socket: a require_tls user may log in (the socket is secure)",
          conn.open)
    conn.close()
    r = subprocess.run(["mariadb", "--no-defaults", "--socket=" + path, "-uapp_sha2", "-papp",
                        "-N", "-B", "orders", "-e", "SELECT COUNT(*) FROM t_order"],
                       capture_output=True, text=True, timeout=30)
    check("mariadb CLI --socket, caching_sha2 in clear over the socket",
          r.returncode == 0 and r.stdout.strip() == "1500", r.stdout + r.stderr)


def main():
    run("pymysql caching_sha2 RSA", pymysql_sha2_rsa_first)
    run("pymysql TLS", pymysql_tls)
    run("pymysql refusals", pymysql_refusals)
    run("mysql-connector", connector_checks)
    run("mariadb CLI", cli_checks)
    run("unix socket", socket_checks)
    print("security: %d failed" % len(FAILED))
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
