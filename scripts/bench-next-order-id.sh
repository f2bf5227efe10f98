#!/usr/bin/env bash
# Order id issuance throughput: `SELECT NEXT_ORDER_ID('GB')` through the proxy against
# `SELECT 1` direct to MariaDB, same client count, measured in the same run with mariadb-slap.
#
#   scripts/bench-next-order-id.sh [CLIENTS] [QUERIES]     (defaults: 16 clients, 40000 queries)
#
# Needs the sandbox (scripts/sandbox.sh up). Starts its own release proxy on a free port; the
# proxy takes a worker id lease at its first id and gives it back when it stops.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
clients="${1:-16}"
queries="${2:-40000}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-.sandbox}"
cargo build --release --locked -q
config="$(scripts/demo-config.sh)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log="$sandbox/bench-ids-proxy.log"
target/release/routekey-proxy --config "$config" --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 \
    >"$log" 2>&1 </dev/null &
proxy=$!
trap 'kill -TERM "$proxy" 2>/dev/null || true; wait "$proxy" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
slap() {
    mariadb-slap --no-defaults -h127.0.0.1 "$@" --concurrency="$clients" --iterations=3 \
        --number-of-queries="$queries" 2>&1 | awk '/Average number of seconds/ {print $(NF-1)}'
}
# Take the lease before timing.
mariadb --no-defaults -h127.0.0.1 -P"$port" -uapp -papp orders -N -e "SELECT NEXT_ORDER_ID('GB')" >/dev/null
direct=$(slap -P"$ds0_port" -uroot --create-schema=orders --query="SELECT 1")
proxied=$(slap -P"$port" -uapp -papp --create-schema=orders --query="SELECT NEXT_ORDER_ID('GB')")
python3 - "$direct" "$proxied" "$clients" "$queries" <<'PY'
import sys
direct, proxied, clients, queries = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
print(f"{clients} clients, {queries} queries, average of 3 runs")
print(f"direct MariaDB, SELECT 1            : {queries / direct:9.0f} queries/s")
print(f"routekey-proxy, NEXT_ORDER_ID('GB') : {queries / proxied:9.0f} queries/s")
print(f"ratio                               : {direct / proxied:9.2f}")
PY
