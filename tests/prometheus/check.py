#!/usr/bin/env python3
"""The dashboard and the alerts proven on a real Prometheus (run by scripts/prometheus-test.sh).

A proxy runs in front of the sandbox, scraped every second by a Prometheus, with a peer
proxy sharing its Redis tier. Its ds1 is a cluster: the sandbox's ds1 (primary), ds1r1
(replica) and a member nothing listens on (down). This driver:

1. warms up: opens the client connection, creates every series the workload touches
   (a backend error, one id per caller without a region), and has the peer look up the
   ids that the scraped proxy will then find in Redis;
2. waits for a scrape that holds the warmed-up counters: T0;
3. runs a fixed mixed workload through the MySQL and the admin port (WORKLOAD below);
4. waits for a scrape that holds the final counters: T1;
5. runs the replica workload on ds1 (replicas()): reads on the replica and the primary,
   a causal wait that catches up and one that times out (ds1r1 held back by a table lock),
   then three faults, each kept until Prometheus shows its alert and undone at once:
   replication stopped on ds1r1 (lag +Inf), no primary (read_only on ds1, with a write
   refused and run again), split brain (ds1r1 writable); the moment each alert became
   active is kept;
6. waits for a scrape with every member back and the final counters: T2;
7. evaluates every expression of docker/grafana/routekey-proxy.json through Prometheus's
   HTTP API, at T1 with $__range and $__rate_interval set to T1 - T0 (so each increase() is
   exactly the workload's count, with no extrapolation), or, for the entries marked
   "window": "replicas", at T2 over T2 - T1, with $instance the proxy's admin address, and
   compares each answer with tests/prometheus/expectations.json; then the expressions the
   table lists for each fault's moment, and the replica alerts (ALERTS) active then and at
   T2, with their summaries;
8. checks that Prometheus evaluates every rule of docker/prometheus/alerts.yml without error.

Whatever it changes on the sandbox (read_only, replication, rows it inserted) is recorded
in PROMTEST_FAULTS before it is changed and undone before it exits; `check.py --restore`
undoes what a killed run left (prometheus-test.sh runs it on exit).

An expression of the dashboard missing from the table, or changed since its entry was
written, fails the test. Exit 0 when everything matches, 1 otherwise.
Environment: PROMTEST_PROXY (host:port, MySQL), PROMTEST_ADMIN, PROMTEST_PEER,
PROMTEST_PROMETHEUS (host:port), PROMTEST_REDIS_PORT, PROMTEST_SEED
(the sandbox's seed-summary.json), PROMTEST_CONFIG (the proxy's configuration),
PROMTEST_DS1_MEMBERS (ds1's primary and replica, host:port,host:port), PROMTEST_DOWN_MEMBER
(the member nothing listens on), PROMTEST_FAULTS (the record of changes to undo).
"""

import json
import math
import os
import re
import socket
import sys
import threading
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
ALERT_TIMEOUT = 20.0  # a probe, a scrape and a rule evaluation, each every second
REPLICA_USER = "app_replica"  # reads = "replica" in the configuration prometheus-test.sh writes
# The alerts on clustered datasources, and the one they take clustered datasources from.
REPLICA_ALERTS = ["RoutekeySplitBrain", "RoutekeyNoPrimary", "RoutekeyMemberDown",
                  "RoutekeyReplicaLagging", "RoutekeyDatasourceDown"]


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
        self.base_shard = {c["name"]: c["base_shard"] for c in config["channels"]}
        sh = config["sharding"]
        self.per_channel = sh["shards_per_channel"]
        self.datasource_of = {s: r["datasource"] for r in sh["shards"] for s in range(r["first"], r["last"] + 1)}
        self.physical = f"{sh['physical_database']}.{sh['physical_table']}"

    def table(self, channel, order_id):
        """The datasource and the physical t_order table of a decodable id of `channel`."""
        shard = self.base_shard[channel] + order_id % self.per_channel
        name = self.physical.replace("{shard}", str(shard)).replace("{table}", "t_order")
        return self.datasource_of[shard], name

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


def issue(admin, agent, body, timeout=10):
    data = json.dumps(body).encode()
    answer = json.loads(
        http(f"http://{admin}/v1/order-ids", data, {"User-Agent": agent, "Content-Type": "application/json"},
             timeout)
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

    def alerts(self):
        """The alerts active now (pending or firing), with their rendered annotations."""
        return json.loads(http(f"{self.base}/api/v1/alerts"))["data"]["alerts"]


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
    "routekey_reads_total",
    "routekey_causal_waits_total",
    "routekey_write_retries_total",
    "routekey_member_role",
    "routekey_split_brain",
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


def connect(addr, user="app"):
    host, port = addr
    return pymysql.connect(
        host=host, port=port, user=user, password="app", database="orders",
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
    # After `scripts/sandbox.sh up` (prometheus-test.sh runs it when the sandbox had no
    # replica) the lease rows are new: the first id waits about 12 s for them.
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        try:
            issue(admin, "promtest-batch", {}, timeout=SETTLE_TIMEOUT)
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

    sandbox = Sandbox(os.environ["PROMTEST_DS1_MEMBERS"], os.environ["PROMTEST_FAULTS"])
    down = os.environ["PROMTEST_DOWN_MEMBER"]
    members = {"$primary": sandbox.members["primary"], "$replica": sandbox.members["replica"], "$down": down}
    try:
        moments = replicas(prom, admin, proxy, conn, sandbox, layout, chans, members)
    finally:
        sandbox.restore()
    t2 = settle(prom, admin, instance)
    replica_window_ms = round((t2 - t1) * 1000)
    log(f"T2 = {t2:.3f}; replica window {replica_window_ms} ms")
    moments["end"] = wait_resolved(prom, instance)

    failures = check_dashboard(prom, table, {"": (t1, window_ms), "replicas": (t2, replica_window_ms)},
                               instance, members)
    failures += check_moments(prom, table, moments, replica_window_ms, instance, members)
    failures += check_rules(prom)
    conn.close()
    if failures:
        for f in failures:
            print(f"FAIL  {f}")
        print(f"prometheus-test: {len(failures)} check(s) failed")
        return 1
    print("prometheus-test: every dashboard expression matches its expectation; the replica alerts are active "
          "when and only when expected; every alerting rule evaluates")
    return 0


# ---- ds1 as a cluster: the sandbox's servers, the replica workload, the faults -------------


class Sandbox:
    """Root connections to ds1's primary and replica (the servers, not through the proxy),
    and the record (PROMTEST_FAULTS) of what the test changed on them: each change is
    written there before it is made and removed once undone, so that whatever happens it
    is undone, by this process or by `check.py --restore`."""

    # What undoes each change: the server and the statement.
    UNDO = {
        "primary_read_only": ("primary", "SET GLOBAL read_only = 0"),
        "replica_writable": ("replica", "SET GLOBAL read_only = 1"),
        "replica_stopped": ("replica", "START SLAVE"),
    }

    def __init__(self, members, record):
        primary, replica = members.split(",")[:2]
        self.members = {"primary": primary, "replica": replica}
        self.record = record

    def conn(self, which):
        host, port = self.members[which].rsplit(":", 1)
        return pymysql.connect(host=host, port=int(port), user="root", password="", autocommit=True,
                               connect_timeout=10, read_timeout=30)

    def run(self, which, sql):
        conn = self.conn(which)
        try:
            with conn.cursor() as c:
                c.execute(sql)
                return c.fetchall()
        finally:
            conn.close()

    def recorded(self):
        try:
            with open(self.record) as f:
                return [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def _write(self, entries):
        with open(self.record, "w") as f:
            f.writelines(e + "\n" for e in entries)

    def change(self, name, which, sql):
        """Makes change `name` (a key of UNDO) by running `sql` on `which`."""
        self._write(self.recorded() + [name])
        self.run(which, sql)

    def row(self, table, order_id):
        """Records a row about to be inserted through the proxy (deleted on the primary)."""
        self._write(self.recorded() + [f"row {table} {order_id}"])

    def undo(self, name):
        which, sql = self.UNDO[name]
        self.run(which, sql)
        self._write([e for e in self.recorded() if e != name])

    def restore(self):
        """Undoes every recorded change, the rows last (root writes whatever read_only)."""
        entries = self.recorded()
        for name in [e for e in entries if e in self.UNDO]:
            self.undo(name)
        for entry in [e for e in entries if e.startswith("row ")]:
            _, table, order_id = entry.split()
            self.run("primary", f"DELETE FROM {table} WHERE order_id = {int(order_id)}")
            self._write([e for e in self.recorded() if e != entry])
        unknown = self.recorded()
        if unknown:
            sys.exit(f"{self.record}: cannot undo {unknown}")

    def check_canonical(self):
        """ds1 writable, ds1r1 read-only and replicating: the state the test starts from."""
        if self.recorded():
            sys.exit(f"{self.record} lists changes not undone: {self.recorded()}")
        (ro,), = self.run("primary", "SELECT @@global.read_only")
        conn = self.conn("replica")
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as c:
                c.execute("SELECT @@global.read_only AS ro")
                replica_ro = c.fetchone()["ro"]
                c.execute("SHOW SLAVE STATUS")
                status = c.fetchone() or {}
        finally:
            conn.close()
        running = status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes"
        if ro != 0 or replica_ro != 1 or not running:
            sys.exit(f"ds1 is not as scripts/sandbox.sh up leaves it: primary read_only={ro}, replica "
                     f"read_only={replica_ro}, replication running: {running}")


class HeldBack:
    """LOCK TABLES `table` READ on the replica: its replication cannot apply a write to that
    table until unlocked, so a read that must see such a write waits for it (or gives up)."""

    def __init__(self, sandbox, table):
        self.sandbox = sandbox
        self.conn = sandbox.conn("replica")
        with self.conn.cursor() as c:
            c.execute(f"LOCK TABLES {table} READ")
        self.saw_wait = False
        self.thread = None

    def release_once_waited(self, timeout=10.0):
        """Unlocks, in a thread, as soon as a MASTER_GTID_WAIT runs on the replica."""
        def watch():
            poll = self.sandbox.conn("replica")
            try:
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and not self.saw_wait:
                    with poll.cursor() as c:
                        c.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                  "WHERE INFO LIKE 'SELECT MASTER_GTID_WAIT(%'")
                        self.saw_wait = c.fetchone()[0] > 0
                    if not self.saw_wait:
                        time.sleep(0.005)
            finally:
                poll.close()
                self.release()
        self.thread = threading.Thread(target=watch, daemon=True)
        self.thread.start()

    def release(self):
        if self.conn is not None:
            with self.conn.cursor() as c:
                c.execute("UNLOCK TABLES")
            self.conn.close()
            self.conn = None

    def join(self):
        if self.thread is not None:
            self.thread.join()


def insert(conn, table_of, sandbox, channel, order_id, record=True):
    """Inserts order `order_id` through the proxy (recorded, to be deleted at the end, unless
    the caller recorded it)."""
    ds, table = table_of(channel, order_id)
    assert ds == "ds1", (channel, order_id, ds)
    if record:
        sandbox.row(table, order_id)
    region = "HK" if channel == "BIZ_CHANNEL" else "KR"
    with conn.cursor() as c:
        c.execute(f"INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) "
                  f"VALUES ({order_id}, '{channel}', '{region}', 1, 1.00, 'NEW', NOW(3))")


def metric(admin, name, **labels):
    """The sum of the proxy's series `name` with these labels, by its /metrics now."""
    out = 0.0
    for key, value in scrape(admin).items():
        if key == name or key.startswith(name + "{"):
            have = dict(re.findall(r'(\w+)="([^"]*)"', key))
            if all(have.get(k) == v for k, v in labels.items()):
                out += value
    return out


def wait_alert(prom, name, state, labels):
    """Waits until alert `name` is `state` with `labels`; returns the time of the rule
    evaluation that made it so (the ALERTS sample) and the active alerts then."""
    deadline = time.monotonic() + ALERT_TIMEOUT
    selector = ",".join([f'alertname="{name}"', f'alertstate="{state}"']
                        + [f'{k}="{v}"' for k, v in labels.items()])
    while True:
        active = prom.alerts()
        if any(a["labels"].get("alertname") == name and a["state"] == state
               and all(a["labels"].get(k) == v for k, v in labels.items()) for a in active):
            at = prom.query(f"timestamp(ALERTS{{{selector}}})")
            if at:
                return at[0][1], active
        if time.monotonic() > deadline:
            sys.exit(f"{name} {labels} not {state} within {ALERT_TIMEOUT}s; active: "
                     f"{[(a['labels'], a['state']) for a in active]}")
        time.sleep(0.2)


def wait_resolved(prom, instance):
    """Waits until no fault's alert is active any more (RoutekeyMemberDown stays: its member
    is down throughout); returns the time of that rule evaluation and the active alerts."""
    faults = {"RoutekeySplitBrain", "RoutekeyNoPrimary", "RoutekeyReplicaLagging"}
    deadline = time.monotonic() + ALERT_TIMEOUT
    while True:
        active = prom.alerts()
        if not any(a["labels"].get("alertname") in faults for a in active):
            at = prom.query(f'timestamp(ALERTS{{alertname="RoutekeyMemberDown",instance="{instance}"}})')
            if at:
                return at[0][1], active
        if time.monotonic() > deadline:
            sys.exit(f"the faults' alerts still active after {ALERT_TIMEOUT}s: "
                     f"{[(a['labels'], a['state']) for a in active]}")
        time.sleep(0.2)


def wait_metrics(admin, what, ok, timeout=20.0):
    """Until `ok(scrape)` holds for the proxy's /metrics."""
    deadline = time.monotonic() + timeout
    while not ok(scrape(admin)):
        if time.monotonic() > deadline:
            sys.exit(f"the proxy's /metrics do not show {what} within {timeout}s")
        time.sleep(0.1)


def replicas(prom, admin, proxy, app, sandbox, layout, chans, members):
    """The replica window's workload and faults on ds1 (expectations.json, "replicas");
    returns each fault's moment: the time its alert became active, and the alerts then."""
    sandbox.check_canonical()
    primary, replica = members["$primary"], members["$replica"]
    role = lambda m, member: m.get(f'routekey_member_role{{datasource="ds1",member="{member}"}}')
    ids = chans["BIZ_CHANNEL"]["new_format_ids"][120:130]
    assert all(layout.table("BIZ_CHANNEL", i)[0] == "ds1" for i in ids)
    moments = {}

    # Reads: 6 on the replica (app_replica, no write of its own), 4 on the primary (app).
    reader = connect(proxy, REPLICA_USER)
    for i in ids[:6]:
        point(reader, i)
    for i in ids[6:]:
        point(app, i)
    reader.close()

    # Causal waits: a session that wrote reads its row on the replica only once the replica
    # applied it. The replica's table is locked, so the read must wait: released as soon as
    # the wait runs, it catches up; kept locked, the wait gives up after causal_wait (1 s)
    # and the primary reads.
    writer = connect(proxy, REPLICA_USER)
    now_ms = int(time.time() * 1000)
    new_id = lambda seq: layout.make(now_ms, layout.code_of["BIZ_CHANNEL"], worker=30, seq=16000 + seq)
    caught, late, retried = new_id(1), new_id(2), new_id(3)
    held = HeldBack(sandbox, layout.table("BIZ_CHANNEL", caught)[1])
    try:
        insert(writer, layout.table, sandbox, "BIZ_CHANNEL", caught)
        held.release_once_waited()
        point(writer, caught)
    finally:
        held.join()
        held.release()
    if not held.saw_wait:
        sys.exit("the replica read after the session's write ran no MASTER_GTID_WAIT on the replica")
    held = HeldBack(sandbox, layout.table("BIZ_CHANNEL", late)[1])
    try:
        insert(writer, layout.table, sandbox, "BIZ_CHANNEL", late)
        point(writer, late)
    finally:
        held.release()
    log("replica reads and causal waits done")

    # Replication stopped on ds1r1: its lag is +Inf.
    sandbox.change("replica_stopped", "replica", "STOP SLAVE")
    moments["replica_stopped"] = wait_alert(prom, "RoutekeyReplicaLagging", "pending",
                                            {"datasource": "ds1", "member": replica})
    sandbox.undo("replica_stopped")
    log("replication stopped: seen")

    # No primary: ds1 read_only. A write sent to it right then is refused (1290) and runs
    # again once a probe round has looked and a primary is back. A probe that sees read_only
    # before the write is sent makes it wait for a primary instead (no retry): then again.
    for attempt in range(3):
        order_id = retried + attempt
        sandbox.row(layout.table("BIZ_CHANNEL", order_id)[1], order_id)  # here: one writer of the record
        sandbox.change("primary_read_only", "primary", "SET GLOBAL read_only = 1")
        result = {}

        def write():
            try:
                insert(writer, layout.table, sandbox, "BIZ_CHANNEL", order_id, record=False)
                result["ok"] = True
            except Exception as e:  # reported below
                result["error"] = e
        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        if attempt == 0:
            moments["no_primary"] = wait_alert(prom, "RoutekeyNoPrimary", "pending", {"datasource": "ds1"})
        else:
            wait_metrics(admin, "no primary of ds1",
                         lambda m: m.get('routekey_datasource_up{datasource="ds1"}') == 0)
        sandbox.undo("primary_read_only")
        thread.join(30)
        if not result.get("ok"):
            sys.exit(f"the write during the failover did not succeed: {result.get('error', 'no answer in 30s')}")
        if metric(admin, "routekey_write_retries_total", datasource="ds1") >= 1:
            break
        log("the probe saw read_only before the write was sent (no retry); once more")
    else:
        sys.exit("no write was run again in 3 attempts")
    log("no primary: seen; a write was run again")

    # Split brain: ds1r1 writable beside ds1.
    sandbox.change("replica_writable", "replica", "SET GLOBAL read_only = 0")
    moments["split_brain"] = wait_alert(prom, "RoutekeySplitBrain", "firing", {"datasource": "ds1"})
    sandbox.undo("replica_writable")
    log("split brain: seen")
    writer.close()

    # Back to normal before T2: the primary writable, the replica replicating and readable.
    wait_metrics(admin, "ds1 back to its primary and a replicating replica", lambda m: (
        role(m, primary) == 1 and role(m, replica) == 0
        and m.get('routekey_split_brain{datasource="ds1"}') == 0
        and m.get(f'routekey_member_lag_seconds{{datasource="ds1",member="{replica}"}}', math.inf) <= 5))
    return moments


def restore_only():
    """`check.py --restore`: undo what PROMTEST_FAULTS lists (a run that was killed)."""
    Sandbox(os.environ["PROMTEST_DS1_MEMBERS"], os.environ["PROMTEST_FAULTS"]).restore()
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


def with_members(entry, members):
    """`entry` with $primary, $replica and $down in its label values replaced by addresses."""
    text = json.dumps(entry)
    for k, v in members.items():
        text = text.replace(k, v)
    return json.loads(text)


def substitute(expr, window_ms, instance):
    # Dots in the instance match themselves too: =~ is a regex match.
    return (expr.replace("$__rate_interval", f"{window_ms + 1}ms")
                .replace("$__range", f"{window_ms + 1}ms")
                .replace("$instance", instance))


def check_dashboard(prom, table, windows, instance, members):
    """Every expression of the dashboard against its entry, at the end of its window
    (`windows`: the entry's "window" -> (time, window ms))."""
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
        at, window_ms = windows[entry.get("window", "")]
        result = prom.query(substitute(expr, window_ms, instance), at)
        failures += [f"{key}: {p}" for p in compare(with_members(entry, members), result, window_ms / 1000.0)]
    for key in sorted(set(entries) - seen):
        failures.append(f"{key}: in the table but on no panel of the dashboard")
    return failures


def check_moments(prom, table, moments, window_ms, instance, members):
    """At each fault's moment (and at T2, "end"): the expressions the table lists for it, and
    the replica alerts active then (ALERTS), each with its state and summary."""
    failures = []
    exprs = dict(dashboard_targets())
    for name, spec in table["moments"].items():
        if name not in moments:
            failures.append(f"moment {name}: not reached")
            continue
        at, active = moments[name]
        spec = with_members(spec, members)
        for key, entry in spec.get("panels", {}).items():
            if key not in exprs:
                failures.append(f"moment {name}, {key}: on no panel of the dashboard")
                continue
            result = prom.query(substitute(exprs[key], window_ms, instance), at)
            failures += [f"moment {name}, {key}: {p}" for p in compare(entry, result, window_ms / 1000.0)]
        names = "|".join(REPLICA_ALERTS)
        got = prom.query(f'ALERTS{{alertname=~"{names}",instance="{instance}"}}', at)
        rest = list(got)
        for want in spec["alerts"]:
            states = want["alertstate"] if isinstance(want["alertstate"], list) else [want["alertstate"]]
            hit = [r for r in rest if r[0].get("alertname") == want["alertname"]
                   and r[0].get("alertstate") in states
                   and all(r[0].get(k) == v for k, v in want["labels"].items())]
            if len(hit) != 1:
                failures.append(f"moment {name}: {len(hit)} {want['alertname']} {states} {want['labels']} "
                                f"in ALERTS (got: {fmt(got)})")
                continue
            rest.remove(hit[0])
            summary = [a["annotations"].get("summary") for a in active
                       if a["labels"].get("alertname") == want["alertname"]
                       and all(a["labels"].get(k) == v for k, v in want["labels"].items())]
            expected = want["summary"].replace("$instance", instance)
            if summary != [expected]:
                failures.append(f"moment {name}: {want['alertname']} summary {summary}, expected {expected!r}")
        for labels, _ in rest:
            failures.append(f"moment {name}: unexpected alert {labels}")
    return failures


def matches(want, labels):
    return all(v == "*" or labels.get(k) == v for k, v in want.items()) and set(want) == set(labels)


def compare(entry, result, window_s):
    problems = []
    if not result:
        if entry.get("may_be_empty") or entry.get("series") == []:
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
        expected = float(want["value"])  # "+Inf" as a string (JSON has no infinity)
    if math.isinf(expected):
        return None if value == expected else f"{value}, expected {expected}"
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
    sys.exit(restore_only() if sys.argv[1:] == ["--restore"] else main())
