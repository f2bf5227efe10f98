#!/usr/bin/env bash
# Instructions the proxy executes per point select by order id (one client, text and
# prepared), counted by valgrind's callgrind: a figure that does not drift with the load of a
# shared machine, for comparing builds (times there drift by tens of percent between runs).
# The proxy runs under callgrind; sysbench (scripts/bench/point_select.lua) sends a warm-up,
# the counters are zeroed, then --events statements are counted. User-space instructions of
# the whole process (tokio, the allocator, libc included), not the kernel's.
#
#   scripts/bench-instructions.sh [--events 2000] [--modes text,prepared] [BINARY ...]
#
# BINARY defaults to target/release/routekey-proxy (built here). Starts the sandbox if it is
# down (and leaves it up); installs valgrind and sysbench (apt-get) when missing. Each proxy
# gets its own port and is stopped before the next starts. Benchmarks only: never run by tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
sandbox="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
case "$sandbox" in /*) ;; *) sandbox="$repo/$sandbox" ;; esac
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
events=2000
modes=text,prepared
binaries=()
while (( $# )); do
    case "$1" in
        --events) events="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        *) binaries+=("$1"); shift ;;
    esac
done
for tool in valgrind:valgrind sysbench:sysbench; do
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
python3 - "$sandbox" "$ds0_port" "$work/ids.txt" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "scripts/bench")
import bench
bench.ids_file(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
EOF
config="$(scripts/demo-config.sh)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

sysbench_run() { # mode events
    local ps=off
    [[ "$1" == prepared ]] && ps=on
    sysbench scripts/bench/point_select.lua --ids-file="$work/ids.txt" --ps="$ps" \
        --db-driver=mysql --mysql-ssl=off --mysql-user=app --mysql-password=app \
        --mysql-db=orders --logical-table=t_order --threads=1 --events="$2" --time=0 \
        --mysql-host=127.0.0.1 --mysql-port="$port" run > "$work/sysbench.out" 2>&1 \
        || { cat "$work/sysbench.out" >&2; exit 1; }
}

echo "| binary | mode | instructions per statement |"
echo "|---|---|---|"
for binary in "${binaries[@]}"; do
    IFS=, read -ra mode_list <<< "$modes"
    for mode in "${mode_list[@]}"; do
        rm -f "$work"/callgrind.out*
        valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out.%p" "$binary" \
            --config "$config" --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 \
            > "$work/proxy.log" 2>&1 &
        proxy_pid=$!
        for _ in $(seq 240); do
            (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
            sleep 0.5
        done
        sysbench_run "$mode" 300
        callgrind_control -z "$proxy_pid" >/dev/null 2>&1
        sysbench_run "$mode" "$events"
        callgrind_control -d "$proxy_pid" >/dev/null 2>&1
        sleep 1
        total=$(grep -h '^summary:' "$work"/callgrind.out."$proxy_pid".1 | awk '{print $2}')
        kill -9 "$proxy_pid" 2>/dev/null || true
        wait "$proxy_pid" 2>/dev/null || true
        proxy_pid=
        echo "| $binary | $mode | $(( total / events )) |"
    done
done
