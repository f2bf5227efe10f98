#!/usr/bin/env bash
# The Grafana dashboard and the alerting rules proven on a real Prometheus (run by
# scripts/test.sh after `cargo test`; needs the sandbox up: scripts/sandbox.sh up).
#
#   scripts/prometheus-test.sh
#
# ds1 runs as a replication cluster: when the sandbox has no replica, this brings it up again
# with one (`scripts/sandbox.sh up --replicas 1`: reseeds every server, ~15 s; its output in
# the temporary folder). Then it starts, each with its own ports and its output in a file
# under a temporary folder:
#   - redis-server (the shared cache tier; installed with apt-get when missing),
#   - the proxy (target/debug/routekey-proxy, built when missing) with the sandbox's demo
#     configuration, that Redis, ds1 as a cluster (members: the sandbox's ds1 and ds1r1 as
#     routekey_rw, and a member nothing listens on: a member down) and a user app_replica
#     with reads = "replica"; and a peer proxy with the same configuration (not scraped),
#   - Prometheus (Debian's prometheus package, installed with apt-get when missing) with its
#     own data folder, scraping the proxy's admin port every second and evaluating
#     docker/prometheus/alerts.yml;
# then one transaction across datasources through the proxy (an UPDATE of a ds0 order and of
# a ds1 order in one BEGIN..COMMIT, every amount as it was at its end), checked on Prometheus:
# routekey_commits_total{kind="atomic"} up by exactly one, one XA branch prepared, and every
# expression of the dashboard's "Transactions across datasources" row answering; then runs
# tests/prometheus/check.py (PyMySQL in the sandbox's virtualenv): a fixed mixed
# workload, then replica reads, causal waits and faults on ds1 (replication stopped, no
# primary with a write retried, split brain: each undone before it returns, and by this
# script's exit if it could not), then every expression of docker/grafana/routekey-proxy.json
# and the replica alerts evaluated by Prometheus and compared with
# tests/prometheus/expectations.json. Everything it started is stopped on exit. Exits
# non-zero when a check fails.
#
# Environment: ROUTEKEY_SANDBOX_DIR, ROUTEKEY_DS0_PORT, ROUTEKEY_DS1_PORT (as sandbox.sh);
# ROUTEKEY_PROMTEST_PORT (default 29570, below the kernel's ephemeral range so that no client
# socket of the tests before it holds one of them): the first of seven ports (proxy, its admin
# port, peer, its admin port, Prometheus, Redis, and the down member's, where nothing may
# listen); ROUTEKEY_PROXY_BIN (default target/debug/routekey-proxy); ROUTEKEY_PROMTEST_KEEP=1
# keeps the temporary folder.
set -euo pipefail

REPO="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$REPO"
SANDBOX_DIR="${ROUTEKEY_SANDBOX_DIR:-$REPO/.sandbox}"
case "$SANDBOX_DIR" in /*) ;; *) SANDBOX_DIR="$REPO/$SANDBOX_DIR" ;; esac
BASE="${ROUTEKEY_PROMTEST_PORT:-29570}"
PROXY_PORT=$BASE ADMIN_PORT=$((BASE + 1)) PEER_PORT=$((BASE + 2)) PEER_ADMIN_PORT=$((BASE + 3))
PROM_PORT=$((BASE + 4)) REDIS_PORT=$((BASE + 5)) DOWN_PORT=$((BASE + 6))
PROXY_BIN="${ROUTEKEY_PROXY_BIN:-${CARGO_TARGET_DIR:-target}/debug/routekey-proxy}"
VENV="$SANDBOX_DIR/venv"
START_TIMEOUT=60

log() { printf 'prometheus-test: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
started=$SECONDS

# ---- tools --------------------------------------------------------------------------------
apt_install() { # apt_install COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    [[ "$(id -u)" == 0 ]] || die "$1 is missing and installing $2 needs root"
    log "$1 not found; installing $2 (apt-get)"
    local out
    out="$( { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2"; } 2>&1 )" \
        || { printf '%s\n' "$out" >&2; die "apt-get install $2 failed"; }
    command -v "$1" >/dev/null 2>&1 || die "$1 still missing after apt-get install $2"
}
apt_install prometheus prometheus
apt_install redis-server redis-server
scripts/sandbox.sh status >/dev/null 2>&1 || die "the sandbox is not running (scripts/sandbox.sh up)"

# ---- the temporary folder, and what is undone on exit -------------------------------------
WORK="$(mktemp -d /tmp/routekey-promtest.XXXXXX)"
PIDS=()
FAULTS="$WORK/faults"  # what check.py changed on the sandbox and has not undone yet
cleanup() {
    local rc=$? pid
    if [[ -s "$FAULTS" ]]; then
        log "undoing what check.py left changed on ds1: $(tr '\n' ' ' <"$FAULTS")"
        PROMTEST_FAULTS="$FAULTS" PROMTEST_DS1_MEMBERS="$DS1_MEMBERS" PYTHONDONTWRITEBYTECODE=1 \
            timeout 60 "$VENV/bin/python" tests/prometheus/check.py --restore </dev/null >&2 || rc=1
    fi
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if (( rc != 0 )); then
        for f in "$WORK"/*.log; do
            [[ -f "$f" ]] || continue
            log "last lines of $f:"
            tail -n 20 "$f" >&2 || true
        done
    fi
    if [[ "${ROUTEKEY_PROMTEST_KEEP:-}" == 1 ]]; then
        log "kept $WORK"
    else
        rm -rf -- "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the sandbox: ds1 with a replica -------------------------------------------------------
# ds1 needs a replica, and the canonical topology (sandbox.sh's topology file: ds1 primary).
topology_value() { sed -n "s/^$1=//p" "$SANDBOX_DIR/topology" 2>/dev/null; }
if [[ "$(topology_value replicas)" != [1-9] || "$(topology_value ds1)" != ds1 ]]; then
    log "the sandbox has no replica, or ds1 is not its primary: scripts/sandbox.sh up --replicas 1 (log: $WORK/sandbox-up.log)"
    scripts/sandbox.sh up --replicas 1 </dev/null >"$WORK/sandbox-up.log" 2>&1 || {
        tail -n 20 "$WORK/sandbox-up.log" >&2
        die "scripts/sandbox.sh up --replicas 1 failed"
    }
fi
DS1_MEMBERS="$(scripts/sandbox.sh members ds1)"
[[ "$DS1_MEMBERS" == *,* ]] || die "ds1 has no replica: scripts/sandbox.sh members ds1 says '$DS1_MEMBERS'"
DS1_MEMBERS="${DS1_MEMBERS%%,*},$(cut -d, -f2 <<<"$DS1_MEMBERS")"  # the primary and ds1r1
DOWN_MEMBER="127.0.0.1:$DOWN_PORT"
[[ -f "$SANDBOX_DIR/seed-summary.json" ]] || die "no $SANDBOX_DIR/seed-summary.json (scripts/sandbox.sh up seeds it)"
if [[ ! -x "$PROXY_BIN" ]]; then
    log "building $PROXY_BIN (cargo build --locked)"
    cargo build --locked >&2
fi
# PyMySQL in the sandbox's virtualenv, as scripts/client-tests.sh makes it.
if ! { [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import pymysql' 2>/dev/null; }; then
    if ! [[ -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf -- "$VENV"
        if ! python3 -m venv "$VENV" >&2; then
            rm -rf -- "$VENV"
            apt_install_venv() {
                [[ "$(id -u)" == 0 ]] || die "python3 -m venv failed and installing python3-venv needs root"
                apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
            }
            apt_install_venv
            python3 -m venv "$VENV" >&2 || die "python3 -m venv $VENV failed"
        fi
    fi
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/clients/requirements.txt >&2 \
        || die "pip install -r tests/clients/requirements.txt failed"
fi

# ---- processes ----------------------------------------------------------------------------
spawn() { # spawn LOG COMMAND... -- in the background, stdin and stdout off the caller's
    local out="$1"
    shift
    (
        for fdpath in /proc/self/fd/*; do
            fd="${fdpath##*/}"
            if [[ "$fd" =~ ^[0-9]+$ ]] && (( fd > 2 )); then exec {fd}>&-; fi
        done
        NO_COLOR=1 exec "$@"
    ) </dev/null >>"$out" 2>&1 &
    PIDS+=("$!")
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # wait_port PORT NAME LOG
    local deadline=$(( SECONDS + START_TIMEOUT ))
    until port_open "$1"; do
        (( SECONDS < deadline )) || die "$2 does not listen on port $1 after ${START_TIMEOUT}s (log: $3)"
        kill -0 "${PIDS[-1]}" 2>/dev/null || die "$2 exited (log: $3)"
        sleep 0.1
    done
}

spawn "$WORK/redis.log" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$WORK"
wait_port "$REDIS_PORT" redis-server "$WORK/redis.log"

# The demo configuration on the sandbox's ports, with the Redis tier (a generous timeout:
# a slow Redis call would be skipped and counted, not what this test measures), ds1 as a
# cluster and a user whose reads go to replicas.
! port_open "$DOWN_PORT" || die "port $DOWN_PORT (the down member's) is in use"
DEMO_CONFIG="$(scripts/demo-config.sh)"
CONFIG="$WORK/routekey.toml"
"$VENV/bin/python" - "$DEMO_CONFIG" "$CONFIG" "$REDIS_PORT" "$DS1_MEMBERS,$DOWN_MEMBER" <<'PY' \
    || die "could not write $CONFIG"
import re, sys

src, dst, redis_port, members = sys.argv[1:]
members = members.split(",")
app_replica = """[[users]]
name = "app_replica"
password = "app"
reads = "replica"

"""
out, section, done = [], None, set()
for line in open(src, encoding="utf-8").read().splitlines(keepends=True):
    m = re.match(r"\s*\[+\s*([^\]]+?)\s*\]+\s*$", line)
    if m:
        section = m.group(1)
        if section == "datasources.ds0":
            out.append(app_replica)
            done.add("app_replica")
    key = line.split("=", 1)[0].strip()
    if section == "datasources.ds1" and key in ("address", "user", "password"):
        line = {
            "address": "members = [%s]\n" % ", ".join('"%s"' % a for a in members),
            "user": 'user = "routekey_rw"\n',        # read_only stops it (no SUPER)
            "password": 'password = "routekey-secret"\n',
        }[key]
        done.add(key)
    out.append(line)
    if section == "cache" and m:
        out.append('redis_url = "redis://127.0.0.1:%s/0"\nredis_timeout = "5s"\n' % redis_port)
        done.add("cache")
# A causal wait long enough that a replica held back by check.py is waited for, not given up
# on; probes every second (the default); a write waits up to 20 s for a primary.
out.append('\n[topology]\nprobe_interval = "1s"\ncausal_wait = "1s"\nfailover_wait = "20s"\n')
missing = {"app_replica", "address", "user", "password", "cache"} - done
if missing:
    sys.exit("the demo configuration has no %s" % ", ".join(sorted(missing)))
with open(dst, "w", encoding="utf-8") as f:
    f.writelines(out)
PY

spawn "$WORK/proxy.log" "$PROXY_BIN" --config "$CONFIG" \
    --listen "127.0.0.1:$PROXY_PORT" --admin-listen "127.0.0.1:$ADMIN_PORT"
wait_port "$PROXY_PORT" "the proxy" "$WORK/proxy.log"
wait_port "$ADMIN_PORT" "the proxy's admin port" "$WORK/proxy.log"
spawn "$WORK/peer.log" "$PROXY_BIN" --config "$CONFIG" \
    --listen "127.0.0.1:$PEER_PORT" --admin-listen "127.0.0.1:$PEER_ADMIN_PORT"
wait_port "$PEER_PORT" "the peer proxy" "$WORK/peer.log"

cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $REPO/docker/prometheus/alerts.yml
scrape_configs:
  - job_name: routekey-proxy
    static_configs:
      - targets: ["127.0.0.1:$ADMIN_PORT"]
EOF
spawn "$WORK/prometheus.log" prometheus --config.file="$WORK/prometheus.yml" \
    --storage.tsdb.path="$WORK/data" --web.listen-address="127.0.0.1:$PROM_PORT" \
    --web.console.templates="$WORK" --web.console.libraries="$WORK"
wait_port "$PROM_PORT" Prometheus "$WORK/prometheus.log"
log "redis :$REDIS_PORT, proxy :$PROXY_PORT (admin :$ADMIN_PORT), peer :$PEER_PORT, prometheus :$PROM_PORT; logs in $WORK"

# ---- one transaction across datasources ---------------------------------------------------
# An UPDATE of a ds0 order and of a ds1 order in one BEGIN..COMMIT through the proxy, as
# check.py runs its statements: ds0 keeps the plain transaction (the decision branch), ds1
# joins as an XA branch, and COMMIT commits both atomically. Each order gets amount + 1 and
# then amount - 1 in the transaction: real row changes on both servers (and an XA PREPARE
# in ds1's binary log), the seed as it was once it commits or rolls back. Before check.py's
# workload, so its window holds no commit. Then, on Prometheus, between the scrapes that
# hold the proxy's counters before and after it: routekey_commits_total{kind="atomic"} up
# by exactly 1, routekey_xa_branches_prepared_total by 1, no atomic commit failure; and
# every expression of the dashboard's "Transactions across datasources" row, over that
# window at the later scrape, answers.
log "one transaction across ds0 and ds1"
"$VENV/bin/python" - "127.0.0.1:$PROXY_PORT" "127.0.0.1:$ADMIN_PORT" "127.0.0.1:$PROM_PORT" \
    "$SANDBOX_DIR/seed-summary.json" "$CONFIG" "$REPO/docker/grafana/routekey-proxy.json" <<'PY' \
    || die "the transaction across datasources is not what Prometheus shows"
import json, sys, time, tomllib, urllib.parse, urllib.request

import pymysql

proxy, admin, prom, seed_path, config_path, dashboard_path = sys.argv[1:]
ROW = "Transactions across datasources"
COUNTERS = ["routekey_commits_total", "routekey_xa_branches_prepared_total",
            "routekey_atomic_commit_failures_total"]


def log(msg):
    print(f"prometheus-test: {msg}", file=sys.stderr, flush=True)


def http(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def metrics():
    """The proxy's /metrics now: {series: value}."""
    out = {}
    for line in http(f"http://{admin}/metrics").splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def query(expr, at=None):
    params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
    body = json.loads(http(f"http://{prom}/api/v1/query?" + urllib.parse.urlencode(params)))
    if body.get("status") != "success":
        sys.exit(f"{expr}: {body}")
    data = body["data"]
    if data["resultType"] == "scalar":
        return [({}, float(data["result"][1]))]
    return [(s["metric"], float(s["value"][1])) for s in data["result"]]


def series(name, **labels):
    return name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")


def settle():
    """The time of the first scrape holding the proxy's transaction counters as they are now."""
    deadline = time.monotonic() + 60
    want = {k: v for k, v in metrics().items() if k.split("{")[0] in COUNTERS}
    while True:
        latest = query(f'timestamp(up{{job="routekey-proxy",instance="{admin}"}})')
        if latest:
            at = latest[0][1]
            got = {}
            for key in want:
                name, _, labels = key.partition("{")
                r = query(f'{name}{{instance="{admin}"{"," + labels[:-1] if labels else ""}}}', at)
                got[key] = r[0][1] if r else None
            if got == want:
                return at, want
        if time.monotonic() > deadline:
            sys.exit(f"no scrape holds the proxy's counters within 60s: want {want}, got {got}")
        time.sleep(0.3)


with open(config_path, "rb") as f:
    config = tomllib.load(f)
with open(seed_path) as f:
    seed = json.load(f)
sharding = config["sharding"]
datasource_of = {s: r["datasource"] for r in sharding["shards"] for s in range(r["first"], r["last"] + 1)}
base = {c["name"]: c["base_shard"] for c in config["channels"]}
orders = {}  # datasource -> an order id of it
for channel, ids in seed["channels"].items():
    order_id = ids["new_format_ids"][140]
    orders.setdefault(datasource_of[base[channel] + order_id % sharding["shards_per_channel"]], order_id)
if not {"ds0", "ds1"} <= set(orders):
    sys.exit(f"no seeded order on both ds0 and ds1: {orders}")
pair = [orders["ds0"], orders["ds1"]]

before_at, before = settle()
host, port = proxy.rsplit(":", 1)
conn = pymysql.connect(host=host, port=int(port), user="app", password="app", database="orders",
                       autocommit=True, program_name="promtest", connect_timeout=10, read_timeout=30)
try:
    with conn.cursor() as c:
        c.execute(f"SELECT order_id, amount FROM t_order WHERE order_id IN ({pair[0]}, {pair[1]})")
        amounts = dict(c.fetchall())
        c.execute("BEGIN")
        for delta in ("+ 1", "- 1"):
            for order_id in pair:
                c.execute(f"UPDATE t_order SET amount = amount {delta} WHERE order_id = {order_id}")
                if c.rowcount != 1:
                    sys.exit(f"UPDATE of order {order_id}: {c.rowcount} rows")
        c.execute("COMMIT")
        c.execute(f"SELECT order_id, amount FROM t_order WHERE order_id IN ({pair[0]}, {pair[1]})")
        if dict(c.fetchall()) != amounts or len(amounts) != 2:
            sys.exit(f"the orders' amounts changed: {amounts}")
finally:
    conn.close()
after_at, after = settle()
window_ms = round((after_at - before_at) * 1000)

failures = []
wanted = [(series("routekey_commits_total", kind="atomic"), 1),
          (series("routekey_xa_branches_prepared_total"), 1),
          (series("routekey_atomic_commit_failures_total", result="rolled_back"), 0),
          (series("routekey_atomic_commit_failures_total", result="unknown"), 0)]
for key, delta in wanted:
    name, _, labels = key.partition("{")
    selector = f'{name}{{instance="{admin}"{"," + labels[:-1] if labels else ""}}}'
    a, b = query(selector, before_at), query(selector, after_at)
    if not a or not b or b[0][1] - a[0][1] != delta:
        failures.append(f"{selector}: {a and a[0][1]} -> {b and b[0][1]} on Prometheus, expected +{delta}")

with open(dashboard_path) as f:
    panels = json.load(f)["panels"]
start = next((i for i, p in enumerate(panels) if p.get("type") == "row" and p.get("title") == ROW), None)
if start is None:
    sys.exit(f"the dashboard has no row {ROW!r}")
row = []
for p in panels[start + 1:]:
    if p.get("type") == "row":
        break
    row.append(p)
exprs = [(f"{p['title']} / {t['refId']}", t["expr"]) for p in row for t in p.get("targets") or []]
if not exprs:
    failures.append(f"the row {ROW!r} has no panel")
for key, expr in exprs:
    text = (expr.replace("$__rate_interval", f"{window_ms + 1}ms")
            .replace("$__range", f"{window_ms + 1}ms").replace("$instance", admin))
    result = query(text, after_at)
    if not result:
        failures.append(f"{key}: no data for {text}")
    else:
        log(f"  {key}: " + ", ".join(f"{m or ''}={v:g}" for m, v in result))
if failures:
    for f in failures:
        print(f"FAIL  {f}")
    sys.exit(1)
log(f"the transaction across datasources: committed atomically (orders {pair[0]} on ds0, "
    f"{pair[1]} on ds1), seen by Prometheus over {window_ms} ms; {len(exprs)} expressions of the "
    f"row {ROW!r} answer")
PY

rc=0
PROMTEST_PROXY="127.0.0.1:$PROXY_PORT" PROMTEST_ADMIN="127.0.0.1:$ADMIN_PORT" \
PROMTEST_PEER="127.0.0.1:$PEER_PORT" \
PROMTEST_PROMETHEUS="127.0.0.1:$PROM_PORT" PROMTEST_REDIS_PORT="$REDIS_PORT" \
PROMTEST_SEED="$SANDBOX_DIR/seed-summary.json" PROMTEST_CONFIG="$CONFIG" PYTHONDONTWRITEBYTECODE=1 \
PROMTEST_DS1_MEMBERS="$DS1_MEMBERS" PROMTEST_DOWN_MEMBER="$DOWN_MEMBER" PROMTEST_FAULTS="$FAULTS" \
    "$VENV/bin/python" tests/prometheus/check.py </dev/null || rc=$?
for i in "${!PIDS[@]}"; do
    kill -0 "${PIDS[$i]}" 2>/dev/null || { log "a process it started exited early (see the logs)"; rc=1; }
done
(( rc == 0 )) || die "FAILED after $(( SECONDS - started ))s"
log "passed in $(( SECONDS - started ))s"
