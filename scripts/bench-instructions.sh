#!/usr/bin/env bash
# Instructions the proxy executes per point select by order id (one client, text and
# prepared), counted by valgrind's callgrind: a figure that does not drift with the load of a
# shared machine, for comparing builds (times there drift by tens of percent between runs).
# The proxy runs under callgrind; sysbench (scripts/bench/point_select.lua) sends a warm-up,
# the counters are zeroed, then --events statements are counted. User-space instructions of
# the whole process (tokio, the allocator, libc included), not the kernel's.
#
# With --syscalls, the proxy runs under `strace -f -c` instead and the table gives the system
# calls per statement, in all and by name (wake-ups between threads show as futex and eventfd
# writes, waits as epoll_wait); --clients runs that many sysbench threads.
#
#   scripts/bench-instructions.sh [--events 2000] [--modes text,prepared] [--syscalls]
#                                 [--clients 1] [--ids new|legacy] [--keep DIR] [--cache-sim]
#                                 [--peer] [BINARY ...]
#
# --cache-sim adds callgrind's simulation of this machine's caches and branch predictor:
# misses of the first-level instruction and data caches, of the last level, and
# mispredicted conditional and indirect branches, per statement (all simulated).
#
# --peer counts ProxySQL too (../shared/peers/proxysql, when there), a pass-through in
# front of ds0 under the same workload, its statements naming the physical tables; it is
# started under valgrind with a configuration like ../shared/peers/proxysql.sh's.
#
# --keep DIR copies each counted callgrind profile to DIR/callgrind.BINARY.MODE.out, for
# `callgrind_annotate --inclusive=yes` or `--tree=caller`.
#
# --ids legacy reads the sandbox's legacy order ids (routed by the cache) instead of
# new-format ones (routed by decoding the id).
#
# BINARY defaults to target/release/routekey-proxy, built here first (a few minutes on a
# fresh clone, without output). The proxy gets pool_size 128 per datasource unless the
# environment sets it (ROUTEKEY_DATASOURCES__DS0__POOL_SIZE), so --clients never waits for a
# connection. Starts the sandbox if it is down (and leaves it up); installs valgrind,
# sysbench, strace and gawk (apt-get) when missing. Each proxy
# gets its own port and is stopped before the next starts. Benchmarks only: never run by tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
sandbox="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
case "$sandbox" in /*) ;; *) sandbox="$repo/$sandbox" ;; esac
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
events=2000
modes=text,prepared
syscalls=
clients=1
ids=new
keep=
cache_sim=
peer=
binaries=()
while (( $# )); do
    case "$1" in
        --events) events="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        --syscalls) syscalls=1; shift ;;
        --clients) clients="$2"; shift 2 ;;
        --ids) ids="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        --cache-sim) cache_sim=1; shift ;;
        --peer) peer=1; shift ;;
        *) binaries+=("$1"); shift ;;
    esac
done
for tool in valgrind:valgrind sysbench:sysbench strace:strace; do
    if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
        echo "bench-instructions: installing ${tool##*:} (apt-get)" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tool##*:}" >/dev/null
    fi
done
scripts/sandbox.sh status >/dev/null 2>&1 || scripts/sandbox.sh up >&2
if (( ${#binaries[@]} == 0 )); then
    cargo build --release --locked -q
    binaries=(target/release/routekey-proxy)
fi
work="$(mktemp -d)"
proxy_pid=
cleanup() {
    [[ -n "$proxy_pid" ]] && kill -9 "$proxy_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
python3 - "$sandbox" "$ds0_port" "$work/ids.txt" "$ids" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "scripts/bench")
import bench
bench.ids_file(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
EOF
config="$(scripts/demo-config.sh)"
# A connection for every client up to 128 (--clients), unless the environment sets pool_size.
export ROUTEKEY_DATASOURCES__DS0__POOL_SIZE="${ROUTEKEY_DATASOURCES__DS0__POOL_SIZE:-128}"
export ROUTEKEY_DATASOURCES__DS1__POOL_SIZE="${ROUTEKEY_DATASOURCES__DS1__POOL_SIZE:-128}"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

# The statements' target: routekey-proxy (the logical t_order) or the peer (ProxySQL: the
# physical tables of the ids file, as user bench).
target_args=()
routekey_target() {
    target_args=(--mysql-user=app --mysql-password=app --mysql-db=orders --logical-table=t_order
        --mysql-port="$port")
}
peer_target() {
    target_args=(--mysql-user=bench --mysql-password=bench --mysql-db=order_shards
        --mysql-port="$peer_port")
}
routekey_target

# Waits up to 2 minutes for something to listen on 127.0.0.1:PORT (a proxy under valgrind
# starts slowly).
wait_port() { # port
    for _ in $(seq 240); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.5
    done
}

sysbench_run() { # mode events
    local ps=off
    [[ "$1" == prepared ]] && ps=on
    sysbench scripts/bench/point_select.lua --ids-file="$work/ids.txt" --ps="$ps" \
        --db-driver=mysql --mysql-ssl=off "${target_args[@]}" --threads="$clients" \
        --events="$2" --time=0 --mysql-host=127.0.0.1 run > "$work/sysbench.out" 2>&1 \
        || { cat "$work/sysbench.out" >&2; exit 1; }
}

# The proxy under strace, counting; --events statements after a warm-up.
count_syscalls() { # binary mode
    "$1" --config "$config" --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 \
        > "$work/proxy.log" 2>&1 &
    proxy_pid=$!
    wait_port "$port"
    sysbench_run "$2" 300
    strace -f -c -p "$proxy_pid" -o "$work/strace.out" 2>/dev/null &
    local strace_pid=$!
    sleep 1
    sysbench_run "$2" "$events"
    kill -INT "$strace_pid"
    wait "$strace_pid" 2>/dev/null || true
    kill -9 "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
    proxy_pid=
    # "% time seconds usecs/call calls [errors] syscall" rows; the last field is the name.
    gawk -v n="$events" -v bin="$1" -v mode="$2" '
        $1 ~ /^[0-9.]+$/ && $NF != "total" { calls[$NF] = $4; all += $4 }
        END {
            by = ""
            PROCINFO["sorted_in"] = "@val_num_desc"
            for (c in calls) if (calls[c] / n >= 0.05) by = by sprintf("%s %.2f, ", c, calls[c] / n)
            printf "| %s | %s | %.2f | %s |\n", bin, mode, all / n, substr(by, 1, length(by) - 2)
        }' "$work/strace.out"
}

if [[ -n "$syscalls" ]]; then
    command -v gawk >/dev/null 2>&1 || { apt-get update -qq >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gawk >/dev/null; }
    echo "| binary | mode | system calls per statement | by name (0.05 and more) |"
    echo "|---|---|---|---|"
    for binary in "${binaries[@]}"; do
        IFS=, read -ra mode_list <<< "$modes"
        for mode in "${mode_list[@]}"; do
            count_syscalls "$binary" "$mode"
        done
    done
    exit 0
fi

valgrind_flags=(--tool=callgrind)
if [[ -n "$cache_sim" ]]; then
    valgrind_flags+=(--cache-sim=yes --branch-sim=yes)
    echo "| binary | mode | instructions per statement | I1 misses | D1 misses | LL misses | mispredicted branches (conditional + indirect) |"
    echo "|---|---|---|---|---|---|---|"
else
    echo "| binary | mode | instructions per statement |"
    echo "|---|---|---|"
fi

# Counts what the process started by `$@` (under valgrind) executes for --events statements
# after a warm-up, and prints one row named `$name` for `$mode`.
count_instructions() { # name listen_port mode command...
    local name="$1" listen="$2" mode="$3"
    shift 3
    rm -f "$work"/callgrind.out*
    valgrind "${valgrind_flags[@]}" --callgrind-out-file="$work/callgrind.out.%p" "$@" \
        > "$work/proxy.log" 2>&1 < /dev/null &
    proxy_pid=$!
    wait_port "$listen"
    sysbench_run "$mode" 300
    callgrind_control -z "$proxy_pid" >/dev/null 2>&1
    sysbench_run "$mode" "$events"
    callgrind_control -d "$proxy_pid" >/dev/null 2>&1
    sleep 1
    local out
    out=$(ls "$work"/callgrind.out."$proxy_pid".* | grep -v '\.'"$proxy_pid"'$' | sort -t. -k4 -n | tail -1)
    if [[ -n "$keep" ]]; then
        mkdir -p "$keep"
        cp "$out" "$keep/callgrind.$(basename "$name").$mode.out"
    fi
    kill -9 "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
    proxy_pid=
    # summary: Ir [Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim]
    grep -h '^summary:' "$out" | awk -v n="$events" -v name="$name" -v mode="$mode" '{
        if (NF > 2)
            printf "| %s | %s | %d | %d | %d | %d | %d + %d |\n", name, mode, $2 / n, $5 / n,
                ($6 + $7) / n, ($8 + $9 + $10) / n, $12 / n, $14 / n
        else
            printf "| %s | %s | %d |\n", name, mode, $2 / n
    }'
}

for binary in "${binaries[@]}"; do
    IFS=, read -ra mode_list <<< "$modes"
    for mode in "${mode_list[@]}"; do
        count_instructions "$binary" "$port" "$mode" "$binary" \
            --config "$config" --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0
    done
done

peer_bin="$repo/../shared/peers/proxysql"
if [[ -n "$peer" ]]; then
    [[ -x "$peer_bin" ]] || { echo "bench-instructions: no $peer_bin for --peer" >&2; exit 1; }
    peer_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    peer_admin="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    for h in 127.0.0.1 localhost; do
        mariadb --no-defaults -h127.0.0.1 -P"$ds0_port" -uroot -e "
          CREATE USER IF NOT EXISTS 'bench'@'$h' IDENTIFIED BY 'bench';
          GRANT ALL ON order_shards.* TO 'bench'@'$h';"
    done
    IFS=, read -ra mode_list <<< "$modes"
    for mode in "${mode_list[@]}"; do
        rm -rf "$work/proxysql" && mkdir -p "$work/proxysql/data"
        cat > "$work/proxysql/proxysql.cnf" <<CNF
datadir="$work/proxysql/data"
admin_variables= { admin_credentials="admin:admin" mysql_ifaces="127.0.0.1:$peer_admin" }
mysql_variables= { threads=2 interfaces="127.0.0.1:$peer_port" max_connections=2048
                   monitor_username="bench" monitor_password="bench" }
mysql_servers= ( { address="127.0.0.1", port=$ds0_port, hostgroup=0, max_connections=1000 } )
mysql_users= ( { username="bench", password="bench", default_hostgroup=0, default_schema="order_shards", active=1 } )
mysql_query_rules= ( )
CNF
        peer_target
        count_instructions proxysql "$peer_port" "$mode" "$peer_bin" -f --initial \
            -c "$work/proxysql/proxysql.cnf" -D "$work/proxysql/data"
        routekey_target
    done
fi
