#!/usr/bin/env bash
# Point selects by order id through routekey-proxy, against direct MariaDB and, when
# ../shared/peers is there, ProxySQL, interleaved in one run (sysbench; text protocol and
# prepared statements; TCP, and Unix sockets with --socket). Prints medians with min-max and
# ratios to direct, and writes results.json, summary.md and ratio.png (matplotlib) to the
# output folder (default .sandbox/bench-run).
#
#   scripts/bench.sh [--clients 1,4,16,64] [--modes text,prepared] [--reps 5] [--seconds 10]
#                    [--warmup 3] [--socket] [--proxy-cpus LIST] [--pool-size N] [--out DIR]
#                    [--ids new|legacy] [--no-peer] [--variant NAME=BINARY[,ENV=VALUE...]]
#
# --no-peer leaves ProxySQL out. --variant measures another build, or the same build with
# other environment settings (IDS=legacy gives it legacy ids), as a target of its own.
#
# --proxy-cpus 0 pins routekey-proxy and ProxySQL to CPU 0 (taskset); routekey-proxy then
# runs one worker thread, as server.worker_threads follows the CPUs the process may use.
# --pool-size N sets routekey-proxy's pool_size for each datasource (default: the demo
# configuration's 32; ProxySQL may open up to 1,000 backend connections).
#
# Starts the sandbox if it is down (and leaves it up), its own release proxy, and ProxySQL
# (../shared/peers/proxysql.sh); stops both at exit. Installs sysbench (apt-get) and
# matplotlib (into .sandbox/bench-venv) when missing. Benchmarks only: never run by tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
sandbox="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
case "$sandbox" in /*) ;; *) sandbox="$repo/$sandbox" ;; esac
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
out="$sandbox/bench-run"
args=()
while (( $# )); do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done

if ! command -v sysbench >/dev/null 2>&1; then
    echo "bench: installing sysbench (apt-get)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sysbench >/dev/null
fi
scripts/sandbox.sh status >/dev/null 2>&1 || scripts/sandbox.sh up >&2
venv="$sandbox/bench-venv"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    echo "bench: installing matplotlib into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q matplotlib >&2
fi
cargo build --release --locked -q
exec "$venv/bin/python" scripts/bench/bench.py --repo "$repo" --proxy target/release/routekey-proxy \
    --sandbox "$sandbox" --ds0-port "$ds0_port" --peers "$repo/../shared/peers" --out "$out" "${args[@]}"
