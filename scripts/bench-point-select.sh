#!/usr/bin/env bash
# Point-select throughput through the proxy against the same statement direct to the shard's
# MariaDB, measured in the same run with mariadb-slap (ships with the MariaDB client).
#
#   scripts/bench-point-select.sh [CLIENTS] [QUERIES]     (defaults: 16 clients, 40000 queries)
#
# Needs the sandbox (scripts/sandbox.sh up). Starts its own release proxy on a free port.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
clients="${1:-16}"
queries="${2:-40000}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-.sandbox}"
cargo build --release --locked -q
config="$(scripts/demo-config.sh)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log="$sandbox/bench-proxy.log"
target/release/routekey-proxy --config "$config" --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 >"$log" 2>&1 </dev/null &
proxy=$!
trap 'kill "$proxy" 2>/dev/null || true; wait "$proxy" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done
read -r id shard < <(python3 - "$sandbox/seed-summary.json" <<'PY'
import json, sys
eu = json.load(open(sys.argv[1]))["channels"]["EU_CHANNEL"]
i = eu["new_format_ids"][0]
print(i, eu["base_shard"] + i % 4)
PY
)
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
slap() {
    mariadb-slap --no-defaults -h127.0.0.1 "$@" --concurrency="$clients" --iterations=3 \
        --number-of-queries="$queries" 2>&1 | awk '/Average number of seconds/ {print $(NF-1)}'
}
direct=$(slap -P"$ds0_port" -uroot --create-schema=order_shards \
    --query="SELECT * FROM t_order_$shard WHERE order_id = $id")
proxied=$(slap -P"$port" -uapp -papp --create-schema=orders \
    --query="SELECT * FROM t_order WHERE order_id = $id")
python3 - "$direct" "$proxied" "$clients" "$queries" <<'PY'
import sys
direct, proxied, clients, queries = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
print(f"{clients} clients, {queries} point selects, average of 3 runs")
print(f"direct MariaDB : {queries / direct:9.0f} queries/s")
print(f"routekey-proxy : {queries / proxied:9.0f} queries/s")
print(f"ratio          : {direct / proxied:9.2f}")
PY
