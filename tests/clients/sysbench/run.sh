#!/usr/bin/env bash
# sysbench oltp_point_select through the proxy, with server-side prepared statements (its
# default), against an unsharded table on the default datasource; then the same run direct
# to MariaDB. Fails on any sysbench error; prints both throughputs and their ratio. It runs
# its own release build of the proxy (the other suites use the debug build), so the
# figures mean something.
#
# Environment (from scripts/client-tests.sh): ROUTEKEY_DS0_PORT, ROUTEKEY_SANDBOX_DIR.
# ROUTEKEY_SYSBENCH_TIME (seconds, default 5), ROUTEKEY_SYSBENCH_THREADS (default 8).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd -P)"
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
seconds="${ROUTEKEY_SYSBENCH_TIME:-5}"
threads="${ROUTEKEY_SYSBENCH_THREADS:-8}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
log="$sandbox/sysbench.log"

if ! command -v sysbench >/dev/null 2>&1; then
    echo "sysbench: installing the Debian package" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sysbench >/dev/null
fi

(cd "$repo" && cargo build --release --locked -q)
config="$("$repo/scripts/demo-config.sh")"
proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${CARGO_TARGET_DIR:-$repo/target}/release/routekey-proxy" --config "$config" --listen "127.0.0.1:$proxy_port" --admin-listen 127.0.0.1:0 \
    >"$sandbox/sysbench-proxy.log" 2>&1 </dev/null &
proxy_pid=$!
for _ in $(seq 100); do
    (echo >"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break
    sleep 0.1
done

common=(oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-db=orders
        --tables=1 --table-size=10000 --db-ps-mode=auto)
through=(--mysql-port="$proxy_port" --mysql-user=app --mysql-password=app)
direct=(--mysql-port="$ds0_port" --mysql-user=root)

sysbench "${common[@]}" "${through[@]}" cleanup >"$log" 2>&1 || true
finish() {
    sysbench "${common[@]}" "${through[@]}" cleanup >>"$log" 2>&1 || true
    kill "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
}
trap finish EXIT
sysbench "${common[@]}" "${through[@]}" prepare >>"$log" 2>&1

run() {
    local out
    out=$(sysbench "${common[@]}" "$@" --threads="$threads" --time="$seconds" run 2>&1) || {
        printf '%s\n' "$out" >&2
        return 1
    }
    printf '%s\n' "$out" >>"$log"
    local errors qps
    errors=$(printf '%s\n' "$out" | awk '/ignored errors:/ {print $3}')
    qps=$(printf '%s\n' "$out" | awk '/queries:/ {gsub(/\(/, "", $3); print $3}')
    if [[ "$errors" != "0" ]]; then
        printf 'sysbench reported %s ignored errors\n' "$errors" >&2
        printf '%s\n' "$out" >&2
        return 1
    fi
    printf '%s\n' "$qps"
}

proxied=$(run "${through[@]}")
plain=$(run "${direct[@]}")
python3 - "$proxied" "$plain" "$threads" "$seconds" <<'PY'
import sys
proxied, direct, threads, seconds = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"sysbench oltp_point_select, prepared statements, {threads} threads, {seconds} s each, 0 errors")
print(f"  through routekey-proxy: {proxied:9.0f} queries/s")
print(f"  direct MariaDB:         {direct:9.0f} queries/s")
print(f"  ratio:                  {proxied / direct:9.2f}")
PY
