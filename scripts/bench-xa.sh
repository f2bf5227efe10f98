#!/usr/bin/env bash
# Benchmark of atomic commits across datasources (issue 27; never run by tests), all in one
# interleaved run (sysbench, text protocol):
#
#  1. point selects by order id (scripts/bench/point_select.lua: new-format EU and GLOBAL
#     orders, all on ds0) at 1 and 16 clients: direct MariaDB ds0, the proxy built from a
#     baseline commit (default eb5611c, the last commit before issue 27) and from the
#     working tree. Issue 27 must leave them unchanged.
#  2. transfers (scripts/bench/transfer.lua) at 1 and 16 clients, each client with its own
#     pair of orders (one on ds0, one on ds1: no lock waits between clients):
#       atomic    BEGIN; UPDATE ds0 order; UPDATE ds1 order; COMMIT      (current proxy)
#       separate  BEGIN; UPDATE ds0 order; COMMIT; BEGIN; UPDATE ds1 order; COMMIT
#                 (current proxy, and the baseline proxy: one-datasource commits are unchanged)
#     Figures per transfer: transfers/s, latency p50/p99, the proxy's CPU, the servers' CPU,
#     InnoDB fsyncs and binlog group commits on each server. Before the repetitions the
#     servers' general log (log_output TABLE) records two transfers of each kind by one
#     client: the statements the proxy sends per transfer; the log's settings are restored.
#
#   scripts/bench-xa.sh [REPS] [BASELINE]     (defaults: 5 repetitions, eb5611c)
#
# ROUTEKEY_BENCH_SECONDS (default 4) is the length of each measurement. Brings the sandbox
# up (scripts/sandbox.sh up: every amount reseeded; no replicas unless ROUTEKEY_REPLICAS
# says so, and semi-synchronous replication would add a replica's acknowledgement to every
# commit), builds both release binaries (the baseline in a git worktree under
# <sandbox>/bench/), starts the proxies on free ports with the demo configuration (logs in
# <sandbox>/bench/xa-*.log) and stops them on exit. Prints medians with min-max and the
# ratios; sysbench's own output is kept in <sandbox>/bench/xa-runs/. Every amount a
# transfer changes is back to its value at the end (checked; restored if not), and the
# decision records the run leaves in routekey.routekey_xa_decisions are counted, then
# deleted once the proxies are stopped. Installs sysbench (apt-get) when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reps="${1:-5}"
baseline="${2:-eb5611c}"
seconds="${ROUTEKEY_BENCH_SECONDS:-4}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-.sandbox}"
work="$sandbox/bench"
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
ds1_port="${ROUTEKEY_DS1_PORT:-33062}"

if ! command -v sysbench >/dev/null 2>&1; then
    echo "bench-xa: installing sysbench (apt-get)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sysbench >/dev/null
fi
scripts/sandbox.sh up >&2
mkdir -p "$work"
runs="$work/xa-runs"
rm -rf "$runs"
mkdir -p "$runs"

# --- binaries (scripts/bench/binaries.sh) --------------------------------------------------
# shellcheck source=scripts/bench/binaries.sh
source scripts/bench/binaries.sh
# What "now" is: the working tree's commit, and whether its sources had changes of their own.
current="$(git rev-parse --short HEAD)"
if [[ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ]]; then
    current="$current + uncommitted changes in src/"
fi
build_binaries "$work" "$baseline"

# --- proxies: config/demo.toml on the sandbox's ports ----------------------------------------
config="$(scripts/demo-config.sh)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
trap cleanup EXIT
start() { # name port binary
    "$work/routekey-proxy-$3" --config "$config" --listen "127.0.0.1:$2" --admin-listen 127.0.0.1:0 \
        >"$work/xa-$1.log" 2>&1 </dev/null &
    pids+=($!)
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "bench-xa: the $1 proxy did not start; see $work/xa-$1.log" >&2
    exit 1
}
old_port=$(free_port); start baseline "$old_port" baseline
old_pid=${pids[-1]}
new_port=$(free_port); start current "$new_port" current
new_pid=${pids[-1]}
ds0_pid=$(scripts/sandbox.sh pid ds0)
ds1_pid=$(scripts/sandbox.sh pid ds1)

sql() { # port sql...: root on a sandbox server
    local port="$1"; shift
    mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$port" -uroot -N --batch -e "$*"
}

# --- ids: every one placed by EXPLAIN ROUTE through the current proxy ----------------------
# xa-points.txt: "<id> <physical table>" for the point selects (EU and GLOBAL, on ds0);
# xa-pairs.txt: "<ds0 id> <ds0 table> <ds1 id> <ds1 table>", one pair per client (EU on ds0,
# BIZ on ds1).
python3 - "$sandbox/seed-summary.json" "$new_port" "$work" <<'PY'
import json, subprocess, sys
summary, port, work = sys.argv[1:]
ch = json.load(open(summary))["channels"]
points = ch["EU_CHANNEL"]["new_format_ids"] + ch["GLOBAL_CHANNEL"]["new_format_ids"]
pairs = list(zip(ch["EU_CHANNEL"]["new_format_ids"][:16], ch["BIZ_CHANNEL"]["new_format_ids"][:16]))
ids = points + [b for _, b in pairs]
script = "".join(f"EXPLAIN ROUTE SELECT * FROM t_order WHERE order_id = {i};\n" for i in ids)
out = subprocess.run(
    ["mariadb", "--no-defaults", "--protocol=TCP", "-h127.0.0.1", f"-P{port}", "-uapp", "-papp",
     "orders", "--batch"], input=script, capture_output=True, text=True, check=True).stdout
lines = out.splitlines()
assert len(lines) == 2 * len(ids), f"EXPLAIN ROUTE: {len(lines)} lines for {len(ids)} ids"
where = {}
for header, row in zip(lines[0::2], lines[1::2]):
    r = dict(zip(header.split("\t"), row.split("\t")))
    where[int(r["order_id"])] = (r["datasource"], r["physical_table"].split(".")[-1])
for i in points + [a for a, _ in pairs]:
    assert where[i][0] == "ds0", f"order {i} routes to {where[i][0]}, not ds0"
for _, b in pairs:
    assert where[b][0] == "ds1", f"order {b} routes to {where[b][0]}, not ds1"
with open(f"{work}/xa-points.txt", "w") as f:
    f.writelines(f"{i} {where[i][1]}\n" for i in points)
with open(f"{work}/xa-pairs.txt", "w") as f:
    f.writelines(f"{a} {where[a][1]} {b} {where[b][1]}\n" for a, b in pairs)
PY
ds0_ids=$(awk '{print $1}' "$work/xa-pairs.txt" | paste -sd,)
ds1_ids=$(awk '{print $3}' "$work/xa-pairs.txt" | paste -sd,)

# "<id> <amount>" of every order a transfer touches, read on its server
amounts() {
    local q0 q1
    q0=$(awk '{printf "%sSELECT order_id, amount FROM order_shards.%s WHERE order_id = %s", (NR>1?" UNION ALL ":""), $2, $1}' "$work/xa-pairs.txt")
    q1=$(awk '{printf "%sSELECT order_id, amount FROM order_shards.%s WHERE order_id = %s", (NR>1?" UNION ALL ":""), $4, $3}' "$work/xa-pairs.txt")
    { sql "$ds0_port" "$q0"; sql "$ds1_port" "$q1"; } | sort
}
amounts >"$work/xa-amounts-before.txt"

# --- measurements --------------------------------------------------------------------------
ticks() { # user + system clock ticks of a process so far
    awk '{print $14 + $15}' "/proc/$1/stat"
}
uticks() { # user clock ticks of a process so far
    awk '{print $14}' "/proc/$1/stat"
}
status() { # Innodb_data_fsyncs and Binlog_group_commits of one server
    sql "$1" "SELECT variable_value FROM information_schema.global_status WHERE variable_name IN ('INNODB_DATA_FSYNCS', 'BINLOG_GROUP_COMMITS') ORDER BY variable_name DESC" | paste -sd' '
}
# sysbench ARGS...: runs one measurement; its output goes to stdout, a failure stops the run
bench() {
    local out rc=0
    out=$(sysbench "$@" --db-driver=mysql --mysql-ssl=off --mysql-host=127.0.0.1 \
        --histogram=on --report-interval=0 run 2>&1) || rc=$?
    if (( rc != 0 )) || grep -q FATAL <<<"$out"; then
        printf 'bench-xa: sysbench %s failed:\n%s\n' "$*" "$out" >&2
        exit 1
    fi
    printf '%s\n' "$out"
}
point_args() { # who
    case $1 in
        direct) echo "--mysql-port=$ds0_port --mysql-user=root --mysql-db=order_shards" ;;
        baseline) echo "--mysql-port=$old_port --mysql-user=app --mysql-password=app --mysql-db=orders --logical-table=t_order" ;;
        current) echo "--mysql-port=$new_port --mysql-user=app --mysql-password=app --mysql-db=orders --logical-table=t_order" ;;
    esac
}
transfer_args() { # who
    case $1 in
        atomic) echo "--mode=atomic --mysql-port=$new_port" ;;
        separate) echo "--mode=separate --mysql-port=$new_port" ;;
        baseline_separate) echo "--mode=separate --mysql-port=$old_port" ;;
    esac
}
proxy_pid() { # who: the proxy measured, or nothing for direct MariaDB
    case $1 in
        baseline|baseline_separate) echo "$old_pid" ;;
        current|atomic|separate) echo "$new_pid" ;;
    esac
}
# measure KIND WHO CLIENTS SECONDS REP: one run, its sysbench output in $runs and one line in
# the results: kind who clients rep file proxy-ticks proxy-user-ticks server-ticks fsyncs0 group0
# fsyncs1 group1 (ticks: CPU clock ticks, user + system unless named)
measure() {
    local kind="$1" who="$2" clients="$3" secs="$4" rep="$5" file pid p0 p1 u0 u1 s0 s1 before after
    file="$runs/$kind-$who-$clients-$rep.txt"
    pid=$(proxy_pid "$who")
    p0=0 u0=0; if [[ -n "$pid" ]]; then p0=$(ticks "$pid") u0=$(uticks "$pid"); fi
    s0=$(( $(ticks "$ds0_pid") + $(ticks "$ds1_pid") ))
    before="$(status "$ds0_port") $(status "$ds1_port")"
    if [[ $kind == point ]]; then
        # shellcheck disable=SC2046 # the arguments are meant to split
        bench scripts/bench/point_select.lua --ids-file="$work/xa-points.txt" \
            $(point_args "$who") --threads="$clients" --time="$secs" >"$file"
    else
        # shellcheck disable=SC2046
        bench scripts/bench/transfer.lua $(transfer_args "$who") --ds0-ids="$ds0_ids" \
            --ds1-ids="$ds1_ids" --mysql-user=app --mysql-password=app --mysql-db=orders \
            --threads="$clients" --time="$secs" >"$file"
    fi
    after="$(status "$ds0_port") $(status "$ds1_port")"
    p1=0 u1=0; if [[ -n "$pid" ]]; then p1=$(ticks "$pid") u1=$(uticks "$pid"); fi
    s1=$(( $(ticks "$ds0_pid") + $(ticks "$ds1_pid") ))
    echo "$kind $who $clients $rep $file $((p1 - p0)) $((u1 - u0)) $((s1 - s0)) $(awk -v a="$after" -v b="$before" \
        'BEGIN {n = split(a, x); split(b, y); for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? " " : ""), x[i] - y[i]}')" >>"$results"
}

results="$work/xa-results.txt"
: >"$results"
points="direct baseline current"
transfers="atomic separate baseline_separate"
echo "bench-xa: warm-up" >&2
for who in $points; do measure point "$who" 16 2 warmup; done
for who in $transfers; do measure transfer "$who" 16 2 warmup; done
grep -v ' warmup ' "$results" >"$results.tmp" || true
mv "$results.tmp" "$results"

# --- the statements each transfer sends, from the servers' general log --------------------
# One sysbench client, two transfers (one each way) of each kind, the log on around each.
log_settings=()
for port in "$ds0_port" "$ds1_port"; do
    log_settings+=("$(sql "$port" "SELECT CONCAT(@@global.general_log, ' ', @@global.log_output)")")
done
restore_log() {
    local i=0 port on output
    for port in "$ds0_port" "$ds1_port"; do
        read -r on output <<<"${log_settings[$i]}"
        sql "$port" "SET GLOBAL general_log = $on; SET GLOBAL log_output = '$output'"
        i=$((i + 1))
    done
}
trap 'restore_log; cleanup' EXIT
for mode in atomic separate; do
    for port in "$ds0_port" "$ds1_port"; do
        sql "$port" "SET GLOBAL general_log = 0; TRUNCATE TABLE mysql.general_log; SET GLOBAL log_output = 'TABLE'; SET GLOBAL general_log = 1"
    done
    sysbench scripts/bench/transfer.lua --mode="$mode" --ds0-ids="$ds0_ids" --ds1-ids="$ds1_ids" \
        --db-driver=mysql --mysql-ssl=off --mysql-host=127.0.0.1 --mysql-port="$new_port" \
        --mysql-user=app --mysql-password=app --mysql-db=orders --threads=1 --events=2 --time=0 \
        run >"$runs/general-log-$mode-sysbench.txt" 2>&1
    for port in "$ds0_port" "$ds1_port"; do
        sql "$port" "SET GLOBAL general_log = 0"
        name=ds0; [[ $port == "$ds1_port" ]] && name=ds1
        sql "$port" "SELECT '$name', thread_id, command_type, REPLACE(REPLACE(argument, '\n', ' '), '\t', ' ') FROM mysql.general_log ORDER BY event_time"
        sql "$port" "TRUNCATE TABLE mysql.general_log"
    done >"$runs/general-log-$mode.txt"
done
restore_log
trap cleanup EXIT

# --- interleaved repetitions ---------------------------------------------------------------
rotate() { # rep words...: the words, starting at the rep-th (so no target always runs first)
    local r="$1"; shift
    printf '%s\n' "$@" | awk -v r="$r" '{a[NR]=$0} END {for (i=0;i<NR;i++) print a[(i+r)%NR+1]}' | paste -sd' '
}
: >"$work/xa-load.txt"
for rep in $(seq "$reps"); do
    echo "$rep start $(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/xa-load.txt"
    for clients in 1 16; do
        # shellcheck disable=SC2086
        for who in $(rotate "$rep" $points); do measure point "$who" "$clients" "$seconds" "$rep"; done
        # shellcheck disable=SC2086
        for who in $(rotate "$rep" $transfers); do measure transfer "$who" "$clients" "$seconds" "$rep"; done
    done
    echo "$rep end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/xa-load.txt"
    echo "bench-xa: repetition $rep of $reps done" >&2
done

# --- the seed as it was, the decision records ----------------------------------------------
amounts >"$work/xa-amounts-after.txt"
amounts_note="every transferred amount is back to its value before the run"
if ! cmp -s "$work/xa-amounts-before.txt" "$work/xa-amounts-after.txt"; then
    amounts_note="amounts differed after the run (restored): $(diff "$work/xa-amounts-before.txt" "$work/xa-amounts-after.txt" | grep -c '^>') orders"
    while read -r a ta b tb; do
        for pair in "$ds0_port $ta $a" "$ds1_port $tb $b"; do
            read -r port table id <<<"$pair"
            sql "$port" "UPDATE order_shards.$table SET amount = $(awk -v i="$id" '$1 == i {print $2}' "$work/xa-amounts-before.txt") WHERE order_id = $id"
        done
    done <"$work/xa-pairs.txt"
fi
cleanup # the proxies stop before their decision records go
decisions() { # port: rows in the decision table, 0 when it does not exist
    if [[ "$(sql "$1" "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'routekey' AND table_name = 'routekey_xa_decisions'")" == 1 ]]; then
        sql "$1" "SELECT COUNT(*) FROM routekey.routekey_xa_decisions"
    else
        echo 0
    fi
}
decision_rows="ds0 $(decisions "$ds0_port"), ds1 $(decisions "$ds1_port")"
prepared="ds0 $(sql "$ds0_port" "XA RECOVER" | wc -l), ds1 $(sql "$ds1_port" "XA RECOVER" | wc -l)"
for port in "$ds0_port" "$ds1_port"; do
    [[ "$(decisions "$port")" == 0 ]] || sql "$port" "DELETE FROM routekey.routekey_xa_decisions"
done
warnings="baseline $(grep -cE ' (WARN|ERROR) ' "$work/xa-baseline.log" || true), current $(grep -cE ' (WARN|ERROR) ' "$work/xa-current.log" || true)"

python3 - "$results" "$reps" "$baseline" "$seconds" "$runs" "$work/xa-load.txt" \
    "$amounts_note" "$decision_rows" "$prepared" "$warnings" "$(getconf CLK_TCK)" "$current" <<'PY'
import os, re, statistics, sys, time
from collections import defaultdict
(results, reps, baseline, seconds, runs, load, amounts_note, decision_rows, prepared, warnings,
 tck, current) = sys.argv[1:]
tck = int(tck)
HIST = re.compile(r"^\s*(\d+\.\d+)\s+\|[* ]*?\s(\d+)\s*$")

def parse(path):
    text = open(path).read()
    events = rate = None
    hist = []
    errors = 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("transactions:"):
            events = int(s.split()[1]); rate = float(s.split()[2].lstrip("("))
        elif s.startswith("ignored errors:"):
            errors = int(s.split()[2])
        elif m := HIST.match(line):
            hist.append((float(m[1]), int(m[2])))
    if errors:
        sys.exit(f"bench-xa: {errors} ignored errors in {path}")
    return events, rate, hist

def pct(hist, q):
    total, seen = sum(c for _, c in hist), 0
    for v, c in hist:
        seen += c
        if seen >= q * total:
            return v
    return float("nan")

runs_by = defaultdict(dict)  # (kind, who, clients) -> rep -> figures
for line in open(results):
    kind, who, clients, rep, path, pticks, uticks, sticks, f0, g0, f1, g1 = line.split()
    events, rate, hist = parse(path)
    runs_by[(kind, who, int(clients))][rep] = dict(
        rate=rate, events=events, p50=pct(hist, 0.5), p99=pct(hist, 0.99),
        proxy_us=int(pticks) / tck * 1e6 / events, proxy_user_us=int(uticks) / tck * 1e6 / events,
        servers_us=int(sticks) / tck * 1e6 / events,
        f0=int(f0) / events, g0=int(g0) / events, f1=int(f1) / events, g1=int(g1) / events)

def cell(vals, fmt="{:,.0f}"):
    return f"{fmt.format(statistics.median(vals))} ({fmt.format(min(vals))}-{fmt.format(max(vals))})"

def ratio(a, b):  # per repetition, then median (min-max)
    ra, rb = runs_by[a], runs_by[b]
    return cell([ra[r]["rate"] / rb[r]["rate"] for r in ra if r in rb], "{:.3f}")

def med(key, field):
    return statistics.median(v[field] for v in runs_by[key].values())

loads = [float(l.split()[2]) for l in open(load)]
print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {reps} interleaved repetitions of "
      f"{seconds} s; medians with min-max; proxy now = {current}, baseline = {baseline}")
print(f"machine: {os.cpu_count()} CPUs; 1-minute load average {min(loads):.2f}-{max(loads):.2f} "
      "at the repetitions' starts and ends")
print("point select by order id (sysbench, text; 400 new-format orders on ds0), queries/s:")
labels = {"direct": "direct MariaDB ds0", "baseline": f"proxy {baseline}", "current": "proxy now"}
for clients in (1, 16):
    print(f"  {clients} client(s):")
    for who, label in labels.items():
        k = ("point", who, clients)
        cpu = "" if who == "direct" else (
            f", proxy CPU {med(k, 'proxy_us'):.1f} µs/query (user {med(k, 'proxy_user_us'):.1f})")
        print(f"    {label:<22} {cell([v['rate'] for v in runs_by[k].values()]):>26}   "
              f"p50 {med(k, 'p50'):.3f} ms, p99 {med(k, 'p99'):.3f} ms{cpu}")
    print(f"    ratio to direct: {baseline} {ratio(('point', 'baseline', clients), ('point', 'direct', clients))}, "
          f"now {ratio(('point', 'current', clients), ('point', 'direct', clients))}; "
          f"now / {baseline} {ratio(('point', 'current', clients), ('point', 'baseline', clients))}")
print("transfers (sysbench, text; each client its own ds0 order and ds1 order), per transfer:")
tlabels = {"atomic": "atomic, proxy now", "separate": "separate, proxy now",
           "baseline_separate": f"separate, proxy {baseline}"}
for clients in (1, 16):
    print(f"  {clients} client(s):")
    for who, label in tlabels.items():
        k = ("transfer", who, clients)
        print(f"    {label:<28} {cell([v['rate'] for v in runs_by[k].values()]):>22} transfers/s   "
              f"p50 {med(k, 'p50'):.3f} ms, p99 {med(k, 'p99'):.3f} ms")
        print(f"    {'':<28} CPU µs/transfer: proxy {med(k, 'proxy_us'):.0f} (user {med(k, 'proxy_user_us'):.0f}), servers {med(k, 'servers_us'):.0f}; "
              f"InnoDB fsyncs ds0 {med(k, 'f0'):.2f}, ds1 {med(k, 'f1'):.2f}; "
              f"binlog group commits ds0 {med(k, 'g0'):.2f}, ds1 {med(k, 'g1'):.2f}")
    print(f"    atomic / separate: {ratio(('transfer', 'atomic', clients), ('transfer', 'separate', clients))}; "
          f"separate now / {baseline}: "
          f"{ratio(('transfer', 'separate', clients), ('transfer', 'baseline_separate', clients))}")

print("statements per transfer (one client, two transfers of each kind under the general log):")
print("  client -> proxy: atomic 4 (BEGIN, UPDATE, UPDATE, COMMIT); separate 6 (2 x BEGIN, UPDATE, COMMIT)")
for mode in ("atomic", "separate"):
    rows = [l.rstrip("\n").split("\t") for l in open(f"{runs}/general-log-{mode}.txt")]
    rows = [r + [""] * (4 - len(r)) for r in rows]
    # The connections that ran the transfers (those that updated t_order); on each, what
    # comes before its first BEGIN or XA START is setup, not per transfer (a pooled
    # connection taking the client's character set, the session defaults read again).
    threads = {(r[0], r[1]) for r in rows if r[3].upper().startswith("UPDATE")}
    per, setup, begun, other = defaultdict(list), [], set(), 0
    for ds, thread, cmd, arg in rows:
        if (ds, thread) not in threads or cmd in ("Connect", "Quit"):
            other += 1
            continue
        words = arg.split()
        head = " ".join(words[:2]).upper() if words[:1] == ["XA"] else (words[0].upper() if words else cmd)
        if head in ("BEGIN", "XA START"):
            begun.add((ds, thread))
        if (ds, thread) not in begun:
            setup.append(f"{ds} {head}")
            continue
        per[ds].append("INSERT (decision)" if head == "INSERT" else head)
    counts = {ds: len(v) / 2 for ds, v in per.items()}
    detail = "; ".join(
        f"{ds}: " + ", ".join(f"{h} x{v.count(h) / 2:g}" for h in dict.fromkeys(v)) for ds, v in sorted(per.items()))
    print(f"  proxy -> servers, {mode}: {sum(counts.values()):g} per transfer ({detail})")
    print(f"    before the first transfer, not per transfer: {', '.join(setup) or 'nothing'}; "
          f"{other} other log rows (connects, quits, the resolver, this script's own statements)")
print(f"after the run: {amounts_note}; decision records {decision_rows} "
      "(deleted now; the proxies prune them after decision_retention, 24 h); "
      f"prepared XA branches left {prepared}; proxy log lines with WARN or ERROR: {warnings}")
PY
