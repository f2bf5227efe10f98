#!/usr/bin/env bash
# Real-client tests of routekey-proxy: the `mariadb` CLI and PyMySQL, through the proxy binary,
# compared with the same clients talking straight to the shard's MariaDB server
# (tests/clients/). The last step of scripts/test.sh; runnable alone once the sandbox is up:
#
#   scripts/sandbox.sh up && scripts/client-tests.sh [run.py args, e.g. -k multi test_pymysql]
#
# It installs PyMySQL into a virtualenv under the sandbox folder, builds the proxy
# (cargo build --locked), starts target/debug/routekey-proxy with config/demo.toml (ports from the environment) on a free
# port of 127.0.0.1 (output to a log file), runs the tests, stops the proxy, and exits non-zero
# on any failure (printing the end of the proxy log).
#
# Environment: ROUTEKEY_SANDBOX_DIR (default <repo>/.sandbox), ROUTEKEY_DS0_PORT (33061),
#              ROUTEKEY_DS1_PORT (33062).
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"
cd "$REPO_ROOT"

SANDBOX_DIR="${ROUTEKEY_SANDBOX_DIR:-$REPO_ROOT/.sandbox}"
case "$SANDBOX_DIR" in /*) ;; *) SANDBOX_DIR="$REPO_ROOT/$SANDBOX_DIR" ;; esac
DS0_PORT="${ROUTEKEY_DS0_PORT:-33061}"
DS1_PORT="${ROUTEKEY_DS1_PORT:-33062}"
VENV="$SANDBOX_DIR/venv"
WORK_DIR="$SANDBOX_DIR/client-tests"
PROXY_LOG="$WORK_DIR/proxy.log"
PYMYSQL_REQ="$REPO_ROOT/tests/clients/requirements.txt"
START_TIMEOUT=30

log() { printf 'client-tests: %s\n' "$*" >&2; }
die() { printf 'client-tests: ERROR: %s\n' "$*" >&2; exit 1; }

started=$SECONDS

# --- prerequisites ---------------------------------------------------------------------------
command -v mariadb >/dev/null 2>&1 \
    || die "the mariadb client is missing; scripts/sandbox.sh up installs it"
command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH"
command -v cargo >/dev/null 2>&1 || die "cargo not found on PATH"
[[ -f "$SANDBOX_DIR/seed-summary.json" ]] \
    || die "$SANDBOX_DIR/seed-summary.json missing; run scripts/sandbox.sh up first"
for port in "$DS0_PORT" "$DS1_PORT"; do
    mariadb-admin --no-defaults --protocol=TCP -h127.0.0.1 -P"$port" -uroot \
        --connect-timeout=5 ping >/dev/null 2>&1 \
        || die "no sandbox MariaDB answers on 127.0.0.1:$port; run scripts/sandbox.sh up first"
done
mkdir -p "$WORK_DIR"

# --- Python virtualenv with PyMySQL ----------------------------------------------------------
venv_ok() {
    [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -m pip --version >/dev/null 2>&1
}
if ! venv_ok; then
    log "creating virtualenv $VENV"
    rm -rf -- "$VENV"
    if ! python3 -m venv "$VENV" >&2; then
        # Debian's python3 needs python3-venv (ensurepip) for this.
        if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
            die "python3 -m venv failed; install python3-venv"
        fi
        log "installing python3-venv (apt-get)"
        rm -rf -- "$VENV"
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv >&2
        python3 -m venv "$VENV" >&2 || die "python3 -m venv still fails"
    fi
fi
if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$PYMYSQL_REQ" >&2; then
    die "pip install -r $PYMYSQL_REQ failed"
fi

# --- the proxy -------------------------------------------------------------------------------
log "cargo build --locked"
cargo build --locked >&2
PROXY_BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/routekey-proxy"
[[ -x "$PROXY_BIN" ]] || die "$PROXY_BIN missing after the build"

PROXY_PORT="$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')"

proxy_pid=""
cleanup() {
    if [[ -n "$proxy_pid" ]] && kill -0 "$proxy_pid" 2>/dev/null; then
        kill -TERM "$proxy_pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$proxy_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$proxy_pid" 2>/dev/null || true
        wait "$proxy_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PROXY_CONFIG="$("$REPO_ROOT/scripts/demo-config.sh")"
# The proxy listens on a Unix socket too (server.socket), for the socket checks.
PROXY_SOCKET="$SANDBOX_DIR/client-tests.sock"
log "starting the proxy on 127.0.0.1:$PROXY_PORT with $PROXY_CONFIG (log: $PROXY_LOG)"
: >"$PROXY_LOG"
# No inherited pipes beyond the log file (CI waits for open pipes to close); the subshell
# execs the proxy, so $! is the proxy's own pid.
(
    for fdpath in /proc/self/fd/*; do
        fd="${fdpath##*/}"
        if [[ "$fd" =~ ^[0-9]+$ ]] && (( fd > 2 )); then
            exec {fd}>&-
        fi
    done
    # The suites' checks of writes over two datasources expect the refusal (1235) of
    # transactions.cross_datasource = "refuse"; atomic commits (the default since issue 27)
    # are proven by tests/atomic.rs and tests/xa/ (their client-suite checks are still to
    # be written).
    NO_COLOR=1 ROUTEKEY_SERVER__SOCKET="$PROXY_SOCKET" ROUTEKEY_TRANSACTIONS__CROSS_DATASOURCE=refuse \
        exec "$PROXY_BIN" --config "$PROXY_CONFIG" --listen "127.0.0.1:$PROXY_PORT" --admin-listen 127.0.0.1:0
) </dev/null >>"$PROXY_LOG" 2>&1 &
proxy_pid=$!

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
deadline=$(( SECONDS + START_TIMEOUT ))
until port_open "$PROXY_PORT"; do
    if ! kill -0 "$proxy_pid" 2>/dev/null; then
        log "the proxy exited before accepting connections; its log:"
        tail -n 50 "$PROXY_LOG" >&2 || true
        exit 1
    fi
    if (( SECONDS >= deadline )); then
        log "the proxy did not accept connections on port $PROXY_PORT within ${START_TIMEOUT}s; its log:"
        tail -n 50 "$PROXY_LOG" >&2 || true
        exit 1
    fi
    sleep 0.1
done

# --- the tests -------------------------------------------------------------------------------
rc=0
ROUTEKEY_PROXY_PORT="$PROXY_PORT" ROUTEKEY_DS0_PORT="$DS0_PORT" ROUTEKEY_DS1_PORT="$DS1_PORT" \
ROUTEKEY_SANDBOX_DIR="$SANDBOX_DIR" PYTHONDONTWRITEBYTECODE=1 \
    "$VENV/bin/python" "$REPO_ROOT/tests/clients/run.py" "$@" </dev/null || rc=$?

# Other client suites: each tests/clients/<suite>/run.sh installs what it needs and runs
# against the same proxy (same environment). ROUTEKEY_CLIENT_SUITES limits them.
for suite_run in "$REPO_ROOT"/tests/clients/*/run.sh; do
    [[ -e "$suite_run" ]] || continue
    suite="$(basename "$(dirname "$suite_run")")"
    if [[ -n "${ROUTEKEY_CLIENT_SUITES:-}" && " $ROUTEKEY_CLIENT_SUITES " != *" $suite "* ]]; then
        continue
    fi
    log "client suite $suite"
    ROUTEKEY_PROXY_PORT="$PROXY_PORT" ROUTEKEY_DS0_PORT="$DS0_PORT" ROUTEKEY_DS1_PORT="$DS1_PORT" \
    ROUTEKEY_SANDBOX_DIR="$SANDBOX_DIR" ROUTEKEY_VENV="$VENV" ROUTEKEY_PROXY_SOCKET="$PROXY_SOCKET" \
        bash "$suite_run" </dev/null || { log "client suite $suite FAILED"; rc=1; }
done

if ! kill -0 "$proxy_pid" 2>/dev/null; then
    log "the proxy is no longer running (it crashed during the tests)"
    rc=1
fi
if (( rc != 0 )); then
    log "FAILED after $(( SECONDS - started ))s; last lines of the proxy log ($PROXY_LOG):"
    tail -n 60 "$PROXY_LOG" >&2 || true
    exit 1
fi
log "all client tests passed in $(( SECONDS - started ))s"
