#!/usr/bin/env bash
# A release build of routekey-proxy laid out by a profile of its own hot path
# (profile-guided optimisation): the compiler places the code that point selects run
# together and the rest apart, so a statement misses the instruction cache less
# (docs/performance.md has what it gave).
#
#   scripts/build-pgo.sh [--events 20000]
#
# 1. builds an instrumented release binary (target/pgo-generate, RUSTFLAGS
#    -Cprofile-generate);
# 2. runs it in front of the sandbox under sysbench: point selects by order id, text and
#    prepared, new-format and legacy ids, 1 and 16 clients, --events each; then stops it
#    with SIGTERM, which writes the profile;
# 3. merges the profile with llvm-profdata of rustc's LLVM major version (Debian's
#    llvm-N package, installed with apt-get when missing);
# 4. builds the release binary with it: target/pgo/release/routekey-proxy.
#
# Two full release builds (fat LTO): 12-16 minutes on 2 cores. The separate target folders
# keep `cargo build --release`'s own build untouched. Starts the sandbox if it is down (and
# leaves it up); installs sysbench when missing. Benchmarks and deployments only: tests use
# debug builds.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
sandbox="${ROUTEKEY_SANDBOX_DIR:-$repo/.sandbox}"
case "$sandbox" in /*) ;; *) sandbox="$repo/$sandbox" ;; esac
ds0_port="${ROUTEKEY_DS0_PORT:-33061}"
events=20000
while (( $# )); do
    case "$1" in
        --events) events="$2"; shift 2 ;;
        *) echo "build-pgo: unknown argument $1" >&2; exit 2 ;;
    esac
done

llvm_major="$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')"
profdata="/usr/lib/llvm-$llvm_major/bin/llvm-profdata"
if [[ ! -x "$profdata" ]]; then
    echo "build-pgo: installing llvm-$llvm_major for llvm-profdata (apt-get)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "llvm-$llvm_major" >/dev/null
fi
if ! command -v sysbench >/dev/null 2>&1; then
    echo "build-pgo: installing sysbench (apt-get)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sysbench >/dev/null
fi
scripts/sandbox.sh status >/dev/null 2>&1 || scripts/sandbox.sh up >&2

work="$(mktemp -d)"
proxy_pid=
cleanup() {
    [[ -n "$proxy_pid" ]] && kill -9 "$proxy_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A fixed profile folder: the same RUSTFLAGS each time, so cargo reuses the instrumented build.
raw="$repo/target/pgo-generate/profiles"
echo "build-pgo: instrumented build (target/pgo-generate)" >&2
RUSTFLAGS="-Cprofile-generate=$raw" \
    cargo build --release --locked -q --target-dir target/pgo-generate

for kind in new legacy; do
    python3 - "$sandbox" "$ds0_port" "$work/ids-$kind.txt" "$kind" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "scripts/bench")
import bench
bench.ids_file(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
EOF
done
config="$(scripts/demo-config.sh)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
rm -rf "$raw"
ROUTEKEY_DATASOURCES__DS0__POOL_SIZE=64 ROUTEKEY_DATASOURCES__DS1__POOL_SIZE=64 \
    target/pgo-generate/release/routekey-proxy --config "$config" \
    --listen "127.0.0.1:$port" --admin-listen 127.0.0.1:0 > "$work/proxy.log" 2>&1 &
proxy_pid=$!
for _ in $(seq 120); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.5
done
echo "build-pgo: training run ($events statements per case)" >&2
for kind in new legacy; do
    for ps in off on; do
        for clients in 1 16; do
            sysbench scripts/bench/point_select.lua --ids-file="$work/ids-$kind.txt" --ps="$ps" \
                --db-driver=mysql --mysql-ssl=off --mysql-user=app --mysql-password=app \
                --mysql-db=orders --logical-table=t_order --mysql-host=127.0.0.1 \
                --mysql-port="$port" --threads="$clients" --events="$events" --time=0 run \
                > "$work/sysbench.out" 2>&1 || { cat "$work/sysbench.out" >&2; exit 1; }
        done
    done
done
# SIGTERM: the proxy drains and exits, and the profile is written at exit.
kill -TERM "$proxy_pid"
wait "$proxy_pid" || true
proxy_pid=
ls "$raw"/*.profraw >/dev/null 2>&1 \
    || { cat "$work/proxy.log" >&2; echo "build-pgo: no profile was written" >&2; exit 1; }
"$profdata" merge -o "$work/merged.profdata" "$raw"/*.profraw

echo "build-pgo: optimised build (target/pgo)" >&2
RUSTFLAGS="-Cprofile-use=$work/merged.profdata" \
    cargo build --release --locked -q --target-dir target/pgo
echo "$repo/target/pgo/release/routekey-proxy"
