#!/usr/bin/env bash
# Benchmark of reads on replicas (issue 26; never run by tests), all in one interleaved run:
#
#  1. point selects by order id (mariadb-slap, text protocol) at 1 and 16 clients through:
#     direct MariaDB (ds0, and its replica ds0r1), the proxy built from a baseline commit
#     (default 8346693, the last commit before issue 26) and from the working tree with
#     ds0/ds1 as one server each (`address`), and the working tree with ds0/ds1 as clusters
#     (`members`: primary and replica) read by a user with reads = "primary" and by one
#     with reads = "replica" (causal; the session never wrote, so no wait is needed);
#  2. insert-then-read pairs (one client; the INSERT lets the proxy issue the id, the read
#     names LAST_INSERT_ID()) by a reads = "primary" user, a causal replica user (the read
#     waits on the replica for the write: MASTER_GTID_WAIT) and an eventual one: the cost
#     of a causal wait.
#
#   scripts/bench-replicas.sh [REPS] [BASELINE]     (defaults: 5 repetitions, 8346693)
#
# Brings the sandbox up with one replica per datasource (scripts/sandbox.sh up --replicas 1),
# builds both release binaries (the baseline in a git worktree under .sandbox/bench/), starts
# the proxies on free ports (logs under .sandbox/bench/), stops them on exit. Prints medians
# with min-max and the ratios; the rows the pairs inserted are deleted at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
reps="${1:-5}"
baseline="${2:-8346693}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-.sandbox}"
work="$sandbox/bench"
mkdir -p "$work"
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
ds1_port="${ROUTEKEY_DS1_PORT:-33062}"
replica_port=$((ds0_port + 10))

scripts/sandbox.sh up --replicas 1 >&2

# --- binaries (scripts/bench/binaries.sh) --------------------------------------------------
# shellcheck source=scripts/bench/binaries.sh
source scripts/bench/binaries.sh
build_binaries "$work" "$baseline"

# --- configurations ------------------------------------------------------------------------
# One server per datasource: config/demo.toml on the sandbox's ports. Clusters: the same
# with `members` (primary, replica), the account read_only stops, and the replica users.
plain="$work/replicas-plain.toml"
cluster="$work/replicas-cluster.toml"
python3 - config/demo.toml "$plain" "$cluster" "$ds0_port" "$ds1_port" <<'PY'
import sys
src, plain, cluster, p0, p1 = sys.argv[1:]
text = open(src).read()
text = text.replace("127.0.0.1:33061", f"127.0.0.1:{p0}").replace("127.0.0.1:33062", f"127.0.0.1:{p1}")
open(plain, "w").write(text)
for port in (p0, p1):
    text = text.replace(
        f'address = "127.0.0.1:{port}"',
        f'members = ["127.0.0.1:{port}", "127.0.0.1:{int(port) + 10}"]',
    )
# Only the datasources log in as root.
text = text.replace('user = "root"\npassword = ""', 'user = "routekey_rw"\npassword = "routekey-secret"')
users = ""
for name, consistency in (("app_ro", "session"), ("app_ev", "eventual")):
    users += (f'\n[[users]]\nname = "{name}"\npassword = "app"\nreads = "replica"\n'
              f'consistency = "{consistency}"\n')
text = text.replace("[datasources.ds0]", users.lstrip("\n") + "\n[datasources.ds0]", 1)
assert text.count("members = ") == 2 and text.count("routekey_rw") == 2, "demo.toml changed shape"
open(cluster, "w").write(text)
PY

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
start() { # name port binary config
    "$work/routekey-proxy-$3" --config "$4" --listen "127.0.0.1:$2" --admin-listen 127.0.0.1:0 \
        >"$work/$1.log" 2>&1 </dev/null &
    pids+=($!)
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "bench-replicas: the $1 proxy did not start; see $work/$1.log" >&2
    exit 1
}
old_port=$(free_port); start baseline "$old_port" baseline "$plain"
new_port=$(free_port); start current "$new_port" current "$plain"
cl_port=$(free_port); start clustered "$cl_port" current "$cluster"
sleep 2 # the clustered proxy's first probe rounds

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
        --delimiter=";" --query="$7" 2>&1 | awk '/Average number of seconds/ {print $(NF-1)}'
}
queries() { if (( $1 == 1 )); then echo 10000; else echo 40000; fi; }
point() { # who clients
    local q; q=$(queries "$2")
    case $1 in
        direct) slap "$ds0_port" root "" order_shards "$2" "$q" "SELECT * FROM t_order_$shard WHERE order_id = $id" ;;
        direct_replica) slap "$replica_port" root "" order_shards "$2" "$q" "SELECT * FROM t_order_$shard WHERE order_id = $id" ;;
        baseline) slap "$old_port" app app orders "$2" "$q" "SELECT * FROM t_order WHERE order_id = $id" ;;
        current) slap "$new_port" app app orders "$2" "$q" "SELECT * FROM t_order WHERE order_id = $id" ;;
        members_primary) slap "$cl_port" app app orders "$2" "$q" "SELECT * FROM t_order WHERE order_id = $id" ;;
        members_replica) slap "$cl_port" app_ro app orders "$2" "$q" "SELECT * FROM t_order WHERE order_id = $id" ;;
    esac
}
pair_sql="INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES ('EU_CHANNEL', 'GB', 7, 1.00, 'CREATED', 'bench-replicas', NOW(3));SELECT * FROM t_order WHERE order_id = LAST_INSERT_ID()"
pairs() { slap "$cl_port" "$1" app orders 1 2000 "$pair_sql"; } # 1,000 pairs

targets="direct direct_replica baseline current members_primary members_replica"
for who in $targets; do point "$who" 16 >/dev/null; done
for u in app app_ro app_ev; do pairs "$u" >/dev/null; done

results="$work/replicas-results.txt"
: >"$results"
for rep in $(seq "$reps"); do
    # rotate the order so no target always runs first
    order=$(echo $targets | tr ' ' '\n' | awk -v r="$rep" '{a[NR]=$0} END {for (i=0;i<NR;i++) print a[(i+r)%NR+1]}' | tr '\n' ' ')
    for clients in 1 16; do
        for who in $order; do
            echo "point-$clients $who $(point "$who" "$clients")" >>"$results"
        done
    done
    for u in $(echo app app_ro app_ev | tr ' ' '\n' | awk -v r="$rep" '{a[NR]=$0} END {for (i=0;i<NR;i++) print a[(i+r)%NR+1]}'); do
        echo "pairs $u $(pairs "$u")" >>"$results"
    done
    echo "bench-replicas: repetition $rep of $reps done" >&2
done
mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$ds0_port" -uroot -e \
    "$(for s in 0 1 2 3; do printf 'DELETE FROM order_shards.t_order_%s WHERE note = %s;' "$s" "'bench-replicas'"; done)"

python3 - "$results" "$reps" "$baseline" <<'PY'
import statistics, sys
from collections import defaultdict
secs = defaultdict(list)
failed = []
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) != 3:
        failed.append(line.strip())
        continue
    kind, who, s = parts
    secs[(kind, who)].append(float(s))
print(f"{sys.argv[2]} interleaved repetitions; medians with min-max")
if failed:
    print(f"  runs that failed and are left out: {failed}")
labels = {
    "direct": "direct MariaDB ds0 (primary)",
    "direct_replica": "direct MariaDB ds0r1 (replica)",
    "baseline": f"proxy {sys.argv[3]}, one server each",
    "current": "proxy now, one server each",
    "members_primary": "proxy now, members, reads primary",
    "members_replica": "proxy now, members, reads replica",
}
for clients in (1, 16):
    n = 10000 if clients == 1 else 40000
    print(f"point select by order id, {clients} client(s), {n:,} queries per run:")
    med = {}
    for who, label in labels.items():
        v = [n / s for s in secs[(f"point-{clients}", who)]]
        if not v:
            continue
        med[who] = statistics.median(v)
        print(f"  {label:<40} {med[who]:9.0f} q/s  (min {min(v):.0f}, max {max(v):.0f})")
    d, dr = med["direct"], med["direct_replica"]
    print(f"  ratio to direct: baseline {med['baseline']/d:.3f}, now {med['current']/d:.3f} "
          f"(now / baseline {med['current']/med['baseline']:.3f}); members reads primary "
          f"{med['members_primary']/d:.3f}; members reads replica {med['members_replica']/dr:.3f} "
          f"of direct to the replica")
    print(f"  replica path / primary path, each against its own server: "
          f"{(med['members_replica']/dr)/(med['members_primary']/d):.3f}; "
          f"members primary / one server: {med['members_primary']/med['current']:.3f}")
print("insert-then-read pairs, 1 client, 1,000 pairs per run (ms per pair):")
ms = {}
for who, label in (("app", "reads primary"), ("app_ro", "reads replica, causal"), ("app_ev", "reads replica, eventual")):
    v = [s for s in secs[("pairs", who)]]
    per = [s * 1000 / 1000 for s in v]
    ms[who] = statistics.median(per)
    print(f"  {label:<40} {ms[who]:7.3f} ms  (min {min(per):.3f}, max {max(per):.3f})")
print(f"  a causal read after a write costs {ms['app_ro'] - ms['app_ev']:+.3f} ms against an eventual "
      f"one and {ms['app_ro'] - ms['app']:+.3f} ms against a primary read")
PY
