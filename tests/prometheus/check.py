#!/usr/bin/env python3
"""The dashboard proven on a real Prometheus (run by scripts/prometheus-test.sh).

A proxy runs in front of the sandbox, scraped every second by a Prometheus, with a peer
proxy sharing its Redis tier. This driver:

1. warms up: opens the client connection, creates every series the workload touches
   (a backend error, one id per caller without a region), and has the peer look up the
   ids that the scraped proxy will then find in Redis;
2. waits for a scrape that holds the warmed-up counters: T0;
3. runs a fixed mixed workload through the MySQL and the admin port (WORKLOAD below);
4. waits for a scrape that holds the final counters: T1;
5. evaluates every expression of docker/grafana/routekey-proxy.json at T1 through
   Prometheus's HTTP API, with $__range and $__rate_interval set to T1 - T0 (so each
   increase() is exactly the workload's count, with no extrapolation) and $instance to
   the proxy's admin address, and compares each answer with tests/prometheus/expectations.json;
6. checks that Prometheus evaluates every rule of docker/prometheus/alerts.yml without error.

An expression of the dashboard missing from the table, or changed since its entry was
written, fails the test. Exit 0 when everything matches, 1 otherwise.
Environment: PROMTEST_PROXY (host:port, MySQL), PROMTEST_ADMIN, PROMTEST_PEER,
PROMTEST_PROMETHEUS (host:port), PROMTEST_REDIS_PORT, PROMTEST_SEED
(the sandbox's seed-summary.json), PROMTEST_CONFIG (the proxy's configuration).
"""

import json
import math
import os
import socket
import sys
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

import pymysql

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(REPO, "docker/grafana/routekey-proxy.json")
EXPECTATIONS = os.path.join(REPO, "tests/prometheus/expectations.json")
PROGRAM = "promtest"
SETTLE_TIMEOUT = 60.0


def log(msg):
    print(f"prometheus-test: {msg}", file=sys.stderr, flush=True)


def env_addr(name):
    host, port = os.environ[name].rsplit(":", 1)
    return host, int(port)


# ---- the id layout, to pick legacy ids by the reason they fail to decode -------------------


class Layout:
    def __init__(self, config):
        idc = config["id"]
        self.seq_bits = idc["sequence_bits"]
        self.rk_bits = idc["route_key_bits"]
        self.worker_bits = idc["worker_bits"]
        self.epoch_ms = parse_ms(idc["epoch"])
        self.skew_ms = 5000
        self.channels = {c["code"]: (c["name"], parse_ms(c["route_key_since"])) for c in config["channels"]}
        self.code_of = {c["name"]: c["code"] for c in config["channels"]}

    def reason(self, order_id, now_ms):
        """Why `order_id` does not decode (as the proxy labels it), or None when it does."""
        code = (order_id >> self.seq_bits) & ((1 << self.rk_bits) - 1)
        ts = (order_id >> (self.seq_bits + self.rk_bits + self.worker_bits)) + self.epoch_ms
        if code == 0:
            return "no_code"
        if code not in self.channels:
            return "unassigned_code"
        if ts < self.channels[code][1]:
            return "before_route_key_since"
        if ts > now_ms + self.skew_ms:
            return "in_future"
        return None

    def make(self, ts_ms, code, worker=31, seq=0):
        return (
            ((ts_ms - self.epoch_ms) << (self.seq_bits + self.rk_bits + self.worker_bits))
            | (worker << (self.seq_bits + self.rk_bits))
            | (code << self.seq_bits)
            | seq
        )


def parse_ms(text):
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def pick(ids, layout, reason, n, now_ms, used):
    out = [i for i in ids if i not in used and layout.reason(i, now_ms) == reason][:n]
    if len(out) < n:
        sys.exit(f"the seed has {len(out)} legacy ids failing with {reason}, {n} needed")
    used.update(out)
    return out


# ---- HTTP: the admin port, Prometheus -----------------------------------------------------


def http(url, data=None, headers=None, timeout=10):
    req = urllib.request.Request(url, data=data, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def issue(admin, agent, body):
    data = json.dumps(body).encode()
    answer = json.loads(
        http(f"http://{admin}/v1/order-ids", data, {"User-Agent": agent, "Content-Type": "application/json"})
    )
    return answer["ids"]


def scrape(admin):
    """The proxy's /metrics as {name{labels}: value} (labels sorted, as Prometheus keeps them)."""
    out = {}
    for line in http(f"http://{admin}/metrics").splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value)
    return out


def total(metrics, name):
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


class Prometheus:
    def __init__(self, addr):
        self.base = f"http://{addr}"

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = json.loads(http(f"{self.base}/api/v1/query?" + urllib.parse.urlencode(params)))
        if body.get("status") != "success":
            raise RuntimeError(f"{expr}: {body}")
        data = body["data"]
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def rules(self):
        return json.loads(http(f"{self.base}/api/v1/rules"))["data"]["groups"]


# The series that say a scrape holds the state we wait for.
REFERENCE = [
    "routekey_statements_total",
    "routekey_route_resolutions_total",
    "routekey_ids_issued_total",
    "routekey_ids_issued_without_region_total",
    "routekey_client_connections",
    "routekey_client_connections_accepted_total",
    "routekey_backend_errors_total",
    "routekey_cache_redis_requests_total",
]


def settle(prom, admin, job_instance):
    """The timestamp (s) of the first scrape whose samples equal the proxy's counters now."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    got = None
    while True:
        now = scrape(admin)
        want = {name: total(now, name) for name in REFERENCE}
        latest = prom.query(f'timestamp(up{{job="routekey-proxy",instance="{job_instance}"}})')
        if latest:
            at = latest[0][1]
            got = {}
            for name in REFERENCE:
                r = prom.query(f'sum({name}{{instance="{job_instance}"}})', at)
                got[name] = r[0][1] if r else None
            if got == want:
                return at
        if time.monotonic() > deadline:
            sys.exit(f"no scrape holds the proxy's counters within {SETTLE_TIMEOUT}s: want {want}, got {got}")
        time.sleep(0.3)


# ---- the workload -------------------------------------------------------------------------


def connect(addr):
    host, port = addr
    return pymysql.connect(
        host=host, port=port, user="app", password="app", database="orders",
        autocommit=True, program_name=PROGRAM, connect_timeout=10, read_timeout=30,
    )


def select(conn, sql):
    with conn.cursor() as c:
        c.execute(sql)
        return c.fetchall()


def expect_error(conn, sql, code):
    try:
        select(conn, sql)
    except pymysql.MySQLError as e:
        if e.args[0] != code:
            sys.exit(f"{sql}: error {e.args}, expected {code}")
        return
    sys.exit(f"{sql}: no error, expected {code}")


def point(conn, order_id, hint="", found=True):
    rows = select(conn, f"{hint}SELECT order_id FROM t_order WHERE order_id = {order_id}")
    if found and [r[0] for r in rows] != [order_id]:
        sys.exit(f"order {order_id} ({hint or 'no hint'}): got {rows}")
    if not found and rows:
        sys.exit(f"order {order_id} should not resolve: got {rows}")


def wait_connections(admin, n):
    """Until the proxy counts `n` open client connections (it sees a close a moment later)."""
    deadline = time.monotonic() + 10
    while total(scrape(admin), "routekey_client_connections") != n:
        if time.monotonic() > deadline:
            sys.exit(f"the proxy does not count {n} open client connections")
        time.sleep(0.05)


def wait_redis_keys(port, n):
    deadline = time.monotonic() + 10
    while True:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"DBSIZE\r\n")
            size = int(s.recv(64).decode().strip().lstrip(":"))
        if size >= n:
            return
        if time.monotonic() > deadline:
            sys.exit(f"the peer's Redis writes did not arrive: {size} keys, {n} expected")
        time.sleep(0.1)


def main():
    proxy, peer = env_addr("PROMTEST_PROXY"), env_addr("PROMTEST_PEER")
    admin = os.environ["PROMTEST_ADMIN"]
    prom = Prometheus(os.environ["PROMTEST_PROMETHEUS"])
    with open(os.environ["PROMTEST_CONFIG"], "rb") as f:
        layout = Layout(tomllib.load(f))
    with open(os.environ["PROMTEST_SEED"]) as f:
        seed = json.load(f)
    with open(EXPECTATIONS) as f:
        table = json.load(f)
    now_ms = int(time.time() * 1000)

    chans = seed["channels"]
    legacy_all = [i for c in chans.values() for i in c["legacy_ids"]]
    used = set()
    # 20 legacy ids read twice (index table, then cache): 10 look like new ids of another
    # channel but are too old, 6 carry an unassigned code, 4 code 0.
    uncached = (pick(legacy_all, layout, "before_route_key_since", 10, now_ms, used)
                + pick(legacy_all, layout, "unassigned_code", 6, now_ms, used)
                + pick(legacy_all, layout, "no_code", 4, now_ms, used))
    # 5 legacy ids the peer proxy looks up first: the scraped proxy finds them in Redis.
    in_redis = pick(legacy_all, layout, "before_route_key_since", 5, now_ms, used)
    # 10 EU legacy ids with a route hint (context).
    eu_legacy = chans["EU_CHANNEL"]["legacy_ids"]
    hinted = (pick(eu_legacy, layout, "before_route_key_since", 5, now_ms, used)
              + pick(eu_legacy, layout, "unassigned_code", 5, now_ms, used))
    # 10 ids nothing resolves: 4 code 0, 4 an unassigned code, 2 from the future.
    unassigned = next(c for c in range(1, 1 << layout.rk_bits) if c not in layout.channels)
    recent = now_ms - 3_600_000
    future = now_ms + 86_400_000
    unresolved = ([layout.make(recent, 0, seq=i) for i in range(4)]
                  + [layout.make(recent, unassigned, seq=i) for i in range(4)]
                  + [layout.make(future, layout.code_of["EU_CHANNEL"], seq=i) for i in range(2)])
    assert [layout.reason(i, now_ms) for i in unresolved] == ["no_code"] * 4 + ["unassigned_code"] * 4 + ["in_future"] * 2
    # 40 new-format ids, 8 per channel; 3 of the EU ones with a CN hint (a context conflict).
    new_ids = [i for c in chans.values() for i in c["new_format_ids"][100:108]]
    assert all(layout.reason(i, now_ms) is None for i in new_ids)
    conflicting = chans["EU_CHANNEL"]["new_format_ids"][110:113]

    # -- warm-up: every series the workload touches exists before T0 -------------------------
    # The first id takes a worker id lease; right after `cargo test` every worker id may
    # still be leased for a moment (503 until a lease expires).
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        try:
            issue(admin, "promtest-batch", {})
            break
        except urllib.error.HTTPError as e:
            if e.code != 503 or time.monotonic() > deadline:
                raise
            log(f"no worker id lease yet ({e.read().decode().strip()}); trying again")
            time.sleep(1)
    conn = connect(proxy)
    expect_error(conn, "SELECT * FROM no_such_table", 1146)
    select(conn, "SELECT NEXT_ORDER_ID()")
    issue(admin, "promtest-single", {})
    issue(admin, "promtest-unknown-region", {"region": "XX"})
    peer_conn = connect(peer)
    for i in in_redis:
        point(peer_conn, i)
    peer_conn.close()
    wait_redis_keys(int(os.environ["PROMTEST_REDIS_PORT"]), len(in_redis))
    instance = admin
    t0 = settle(prom, admin, instance)
    log(f"T0 = {t0:.3f}; running the workload")

    # -- the workload (its counts are the table's) -------------------------------------------
    for i in new_ids[:37]:
        point(conn, i)
    for i in conflicting:
        point(conn, i, "/*route_key='CN_CHANNEL'*/ ")
    for _ in range(2):
        for i in uncached:
            point(conn, i)
    for i in in_redis:
        point(conn, i)
    for i in hinted:
        point(conn, i, "/*route_key='EU_CHANNEL'*/ ")
    for i in unresolved:
        point(conn, i, found=False)
    for _ in range(3):
        expect_error(conn, "SELECT * FROM no_such_table", 1146)
    for _ in range(4):
        select(conn, "SELECT NEXT_ORDER_ID()")
    for _ in range(2):
        select(conn, "SELECT NEXT_ORDER_ID('US')")
    for _ in range(2):
        issue(admin, "promtest-batch", {"count": 5})
    for _ in range(3):
        issue(admin, "promtest-single", {})
    issue(admin, "promtest-unknown-region", {"region": "XX", "count": 2})
    issue(admin, "promtest-gb", {"region": "GB", "count": 3})
    for _ in range(2):
        connect(proxy).close()
    wait_connections(admin, 1)
    t1 = settle(prom, admin, instance)
    window_ms = round((t1 - t0) * 1000)
    log(f"T1 = {t1:.3f}; window {window_ms} ms")

    failures = check_dashboard(prom, table, t1, window_ms, instance)
    failures += check_rules(prom)
    conn.close()
    if failures:
        for f in failures:
            print(f"FAIL  {f}")
        print(f"prometheus-test: {len(failures)} check(s) failed")
        return 1
    print("prometheus-test: every dashboard expression matches its expectation; every alerting rule evaluates")
    return 0


# ---- the dashboard against the table ------------------------------------------------------


def dashboard_targets():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    panels = []
    for p in dash["panels"]:
        panels.append(p)
        panels.extend(p.get("panels", []))
    for p in panels:
        for t in p.get("targets") or []:
            yield f"{p['title']} / {t['refId']}", t["expr"]


def substitute(expr, window_ms, instance):
    # Dots in the instance match themselves too: =~ is a regex match.
    return (expr.replace("$__rate_interval", f"{window_ms + 1}ms")
                .replace("$__range", f"{window_ms + 1}ms")
                .replace("$instance", instance))


def check_dashboard(prom, table, at, window_ms, instance):
    failures = []
    entries = table["panels"]
    seen = set()
    for key, expr in dashboard_targets():
        seen.add(key)
        entry = entries.get(key)
        if entry is None:
            failures.append(f"{key}: no expectation in {os.path.relpath(EXPECTATIONS, REPO)} for {expr!r}")
            continue
        if entry["expr"] != expr:
            failures.append(f"{key}: the dashboard's expression changed; update its expectation\n"
                            f"      dashboard: {expr}\n      table:     {entry['expr']}")
            continue
        result = prom.query(substitute(expr, window_ms, instance), at)
        failures += [f"{key}: {p}" for p in compare(entry, result, window_ms / 1000.0)]
    for key in sorted(set(entries) - seen):
        failures.append(f"{key}: in the table but on no panel of the dashboard")
    return failures


def matches(want, labels):
    return all(v == "*" or labels.get(k) == v for k, v in want.items()) and set(want) == set(labels)


def compare(entry, result, window_s):
    problems = []
    if not result:
        if entry.get("may_be_empty"):
            return []
        return [f"empty result; expected {entry['series']}"]
    if entry.get("series") == "any":
        return []
    rest = list(result)
    for want in entry["series"]:
        hit = [r for r in rest if matches(want["labels"], r[0])]
        if len(hit) != 1:
            problems.append(f"{len(hit)} series match {want['labels']} (result: {fmt(result)})")
            continue
        rest.remove(hit[0])
        problem = check_value(want, hit[0][1], window_s)
        if problem:
            problems.append(f"{want['labels']}: {problem}")
    others = entry.get("others")
    for labels, value in rest:
        if others is None:
            problems.append(f"unexpected series {labels} = {value}")
        elif others == "nan" and not math.isnan(value):
            problems.append(f"{labels} = {value}, expected NaN (no observations)")
        elif others != "nan" and value != others:
            problems.append(f"{labels} = {value}, expected {others}")
    return problems


def check_value(want, value, window_s):
    if "min" in want or "max" in want:
        lo, hi = want.get("min", -math.inf), want.get("max", math.inf)
        if math.isnan(value) or not lo <= value <= hi:
            return f"{value} outside [{lo}, {hi}]"
        return None
    if "per_window" in want:
        expected = want["per_window"] / window_s
    else:
        expected = want["value"]
    if expected == 0:
        return None if value == 0 else f"{value}, expected 0"
    if math.isnan(value) or abs(value - expected) > 0.10 * abs(expected):
        return f"{value}, expected {expected} (within 10%)"
    return None


def fmt(result):
    return ", ".join(f"{labels}={value:g}" for labels, value in result)


def check_rules(prom):
    failures = []
    rules = [r for g in prom.rules() for r in g["rules"]]
    if not rules:
        failures.append("Prometheus loaded no alerting rule")
    for r in rules:
        if r.get("health") != "ok" or r.get("lastError"):
            failures.append(f"rule {r.get('name')}: health {r.get('health')} {r.get('lastError', '')}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
