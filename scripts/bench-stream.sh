#!/usr/bin/env bash
# Large results through routekey-proxy: transfer rate against direct MariaDB (same run) and
# the growth of the proxy's peak resident memory (VmHWM) while it relays ~1 GiB of small
# rows, 1 GiB of 16 MiB rows, and 64 MiB of each to a client reading at 1 MiB/s (about two
# minutes). Prints a table and writes stream.md / stream.json to .sandbox/bench-run.
#
#   scripts/bench-stream.sh [--gib 1] [--slow-mib 64]
#
# Starts the sandbox if it is down, its own release proxy; raises ds0's max_allowed_packet
# to 64 MiB for the 16 MiB rows and puts it back at exit. Benchmarks only: never run by tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
sandbox="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
case "$sandbox" in /*) ;; *) sandbox="$repo/$sandbox" ;; esac
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
scripts/sandbox.sh status >/dev/null 2>&1 || scripts/sandbox.sh up >&2
cargo build --release --locked -q
sql() { mariadb --no-defaults -h127.0.0.1 -P"$ds0_port" -uroot -N -e "$1"; }
previous=$(sql 'SELECT @@GLOBAL.max_allowed_packet')
trap 'sql "SET GLOBAL max_allowed_packet = $previous"' EXIT
sql 'SET GLOBAL max_allowed_packet = 67108864'
python3 scripts/bench/stream.py --repo "$repo" --proxy target/release/routekey-proxy \
    --ds0-port "$ds0_port" --out "$sandbox/bench-run" "$@"
