#!/usr/bin/env bash
# Benchmarks of the plan -> execute -> merge core (not timed tests), all in one interleaved run:
#
#  1. point selects by order id (mariadb-slap, 16 clients): direct MariaDB, the proxy built
#     from a baseline commit (default 1da0878, the last commit before issue 25), and the
#     proxy built from the working tree;
#  2. scatters over the 20 shards at 4 and 16 clients: `SELECT COUNT(*) FROM t_order`, a
#     dashboard's `GROUP BY channel` and a top-10 `ORDER BY created_at DESC LIMIT 10`,
#     through the working tree's proxy with its shards combined (one statement per
#     datasource, the default) and with `sharding.combine_shards = false` (one statement
#     per shard), against the same statement on `orders_ref` (every order in one table)
#     direct to MariaDB.
#
#   scripts/bench-core.sh [REPS] [BASELINE]     (defaults: 5 repetitions, 1da0878)
#
# Needs the sandbox (scripts/sandbox.sh up). Builds both release binaries (the baseline in a
# git worktree under .sandbox/bench/, sharing target/ for dependencies), starts both proxies
# on free ports (logs under .sandbox/bench/), stops them on exit. Prints medians with
# min-max and the ratios.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reps="${1:-5}"
baseline="${2:-1da0878}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-.sandbox}"
work="$sandbox/bench"
mkdir -p "$work"
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"

# --- binaries ------------------------------------------------------------------------------
# shellcheck source=scripts/bench/binaries.sh
source scripts/bench/binaries.sh
build_binaries "$work" "$baseline"

# --- proxies -------------------------------------------------------------------------------
config="$(scripts/demo-config.sh)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
start() { # name port [binary]
    "$work/routekey-proxy-${3:-$1}" --config "$config" --listen "127.0.0.1:$2" --admin-listen 127.0.0.1:0 \
        >"$work/$1.log" 2>&1 </dev/null &
    pids+=($!)
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "bench-core: the $1 proxy did not start; see $work/$1.log" >&2
    exit 1
}
old_port=$(free_port); start baseline "$old_port"
new_port=$(free_port); start current "$new_port"
per_shard_port=$(free_port)
ROUTEKEY_SHARDING__COMBINE_SHARDS=false start per-shard "$per_shard_port" current

read -r id shard < <(python3 - "$sandbox/seed-summary.json" <<'PY'
import json, sys
eu = json.load(open(sys.argv[1]))["channels"]["EU_CHANNEL"]
i = eu["new_format_ids"][0]
print(i, eu["base_shard"] + i % 4)
PY
)

# seconds for QUERIES statements over CLIENTS connections (one mariadb-slap iteration)
slap() { # port user pass schema clients queries sql
    mariadb-slap --no-defaults --protocol=TCP -h127.0.0.1 -P"$1" -u"$2" ${3:+-p"$3"} \
        --create-schema="$4" --concurrency="$5" --iterations=1 --number-of-queries="$6" \
        --query="$7" 2>&1 | awk '/Average number of seconds/ {print $(NF-1)}'
}
point_direct() { slap "$ds0_port" root "" order_shards 16 40000 "SELECT * FROM t_order_$shard WHERE order_id = $id"; }
point_proxy() { slap "$1" app app orders 16 40000 "SELECT * FROM t_order WHERE order_id = $id"; }
declare -A scatter_sql=(
    [count]="SELECT COUNT(*) FROM t_order"
    [group]="SELECT channel, COUNT(*), SUM(amount) FROM t_order GROUP BY channel"
    [top10]="SELECT order_id, user_id, amount, created_at FROM t_order ORDER BY created_at DESC LIMIT 10"
)
scatter() { # who clients query-name
    local sql="${scatter_sql[$3]}"
    case $1 in
        direct) slap "$ds0_port" root "" orders_ref "$2" 2000 "$sql" ;;
        combined) slap "$new_port" app app orders "$2" 2000 "$sql" ;;
        per_shard) slap "$per_shard_port" app app orders "$2" 2000 "$sql" ;;
    esac
}

# warm-up
point_proxy "$old_port" >/dev/null; point_proxy "$new_port" >/dev/null; point_direct >/dev/null
for q in count group top10; do
    scatter combined 4 "$q" >/dev/null; scatter per_shard 4 "$q" >/dev/null
done

results="$work/results.txt"
: >"$results"
for rep in $(seq "$reps"); do
    # rotate the order so no side always runs first
    case $((rep % 3)) in
        0) order="direct old new"; plans="direct combined per_shard" ;;
        1) order="old new direct"; plans="combined per_shard direct" ;;
        2) order="new direct old"; plans="per_shard direct combined" ;;
    esac
    for who in $order; do
        case $who in
            direct) echo "point direct $(point_direct)" >>"$results" ;;
            old) echo "point baseline $(point_proxy "$old_port")" >>"$results" ;;
            new) echo "point current $(point_proxy "$new_port")" >>"$results" ;;
        esac
    done
    for clients in 4 16; do
        for q in count group top10; do
            for who in $plans; do
                echo "$q-$clients $who $(scatter "$who" "$clients" "$q")" >>"$results"
            done
        done
    done
    echo "bench-core: repetition $rep of $reps done" >&2
done

python3 - "$results" "$reps" "$baseline" <<'PY'
import statistics, sys
from collections import defaultdict
secs = defaultdict(list)
failed = []
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) != 3:
        failed.append(line.strip())  # mariadb-slap printed no time: the run failed
        continue
    kind, who, s = parts
    secs[(kind, who)].append(float(s))
def queries(kind):
    return 40000 if kind == "point" else 2000
def qps(key):
    return [queries(key[0]) / s for s in secs[key]]
def show(label, key):
    v = qps(key)
    print(f"  {label:<40} {statistics.median(v):9.0f} q/s  (min {min(v):.0f}, max {max(v):.0f})")
    return statistics.median(v)
print(f"{sys.argv[2]} interleaved repetitions; medians with min-max")
if failed:
    print(f"  runs that failed and are left out: {failed}")
print("point select by order id, 16 clients, 40,000 queries per run:")
d = show("direct MariaDB", ("point", "direct"))
o = show(f"routekey-proxy baseline {sys.argv[3]}", ("point", "baseline"))
n = show("routekey-proxy current", ("point", "current"))
print(f"  ratio to direct: baseline {o/d:.2f}, current {n/d:.2f}; current / baseline {n/o:.3f}")
names = {"count": "COUNT(*)", "group": "GROUP BY channel", "top10": "ORDER BY created_at DESC LIMIT 10"}
for clients in (4, 16):
    print(f"scatter over 20 shards on 2 datasources, {clients} clients, 2,000 queries per run "
          "(direct = orders_ref, one table):")
    for q in ("count", "group", "top10"):
        key = f"{q}-{clients}"
        print(f" {names[q]}")
        d = show("direct orders_ref", (key, "direct"))
        c = show("proxy, one statement per datasource", (key, "combined"))
        p = show("proxy, one statement per shard", (key, "per_shard"))
        print(f"  ratio to one table: combined {c/d:.2f}, per shard {p/d:.2f}; combined / per shard {c/p:.2f}")
PY
