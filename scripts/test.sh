#!/usr/bin/env bash
# Runs every test of routekey-proxy on this machine: brings the MariaDB sandbox up (installing
# MariaDB when missing), installs redis-server when missing (tests/redis.rs starts its own),
# runs `cargo test` (unit tests and the in-process end-to-end tests; tests/topology/
# starts a sandbox of its own with replicas, .sandbox-topology; tests/xa/ and tests/moves/ their
# own, .sandbox-xa and .sandbox-move with a spare ds2; all taken down at the end), the
# Prometheus test
# (scripts/prometheus-test.sh: the Grafana dashboard's expressions against a real Prometheus
# scraping a proxy under a known workload; installs prometheus with apt-get when missing),
# then the real-client suites of tests/clients (mariadb CLI, PyMySQL, mysql-connector-python,
# Connector/J with HikariCP, node mysql2, sysbench) against the proxy binary, validates
# docker/ offline (scripts/validate-deploy.sh: hadolint, compose schema, kubernetes-validate,
# dashboard JSON, promtool on docker/prometheus/) and takes the sandbox down again. Exits
# non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*"; }

# Armed before `up`: a server that started before the other failed is stopped too. On a
# failure, the deadlocks InnoDB reported (the sandbox prints them all to each server's log)
# are shown first: a test that lost a deadlock to another test running beside it says so.
cleanup() {
    local status=$?
    if (( status != 0 )); then
        local log
        for log in "${ROUTEKEY_SANDBOX_DIR:-.sandbox}"/ds*/server.log; do
            [[ -f "$log" ]] || continue
            if grep -qi "deadlock" "$log"; then
                printf '\n== deadlocks in %s\n' "$log"
                grep -i -A 40 "deadlock" "$log" | head -200
            fi
        done
    fi
    scripts/sandbox.sh down >/dev/null 2>&1 || true
    # The replication sandbox tests/topology/ starts (primaries with replicas).
    if [[ -d "${ROUTEKEY_TOPOLOGY_SANDBOX_DIR:-.sandbox-topology}" ]]; then
        ROUTEKEY_SANDBOX_DIR="${ROUTEKEY_TOPOLOGY_SANDBOX_DIR:-.sandbox-topology}" \
            ROUTEKEY_DS0_PORT="${ROUTEKEY_TOPOLOGY_DS0_PORT:-33261}" \
            ROUTEKEY_DS1_PORT="${ROUTEKEY_TOPOLOGY_DS1_PORT:-33262}" \
            scripts/sandbox.sh down --purge >/dev/null 2>&1 || true
    fi
    # The sandbox tests/xa/ starts (its servers SIGKILLed and restarted by the tests).
    if [[ -d "${ROUTEKEY_XA_SANDBOX_DIR:-.sandbox-xa}" ]]; then
        ROUTEKEY_SANDBOX_DIR="${ROUTEKEY_XA_SANDBOX_DIR:-.sandbox-xa}" \
            ROUTEKEY_DS0_PORT="${ROUTEKEY_XA_DS0_PORT:-33361}" \
            ROUTEKEY_DS1_PORT="${ROUTEKEY_XA_DS1_PORT:-33362}" \
            scripts/sandbox.sh down --purge >/dev/null 2>&1 || true
    fi
    # The sandbox tests/moves/ starts (ds0, ds1 and the spare ds2 that shards move to).
    if [[ -d "${ROUTEKEY_MOVE_SANDBOX_DIR:-.sandbox-move}" ]]; then
        ROUTEKEY_SANDBOX_DIR="${ROUTEKEY_MOVE_SANDBOX_DIR:-.sandbox-move}" \
            ROUTEKEY_DS0_PORT="${ROUTEKEY_MOVE_DS0_PORT:-33461}" \
            ROUTEKEY_DS1_PORT="${ROUTEKEY_MOVE_DS1_PORT:-33462}" \
            ROUTEKEY_DS2_PORT="${ROUTEKEY_MOVE_DS2_PORT:-33463}" \
            scripts/sandbox.sh down --purge >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
step "sandbox up"
scripts/sandbox.sh up

step "redis-server"
if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server not found; installing redis-server (apt-get)" >&2
    if [[ "$(id -u)" != 0 ]]; then
        echo "test.sh: redis-server is missing and installing it needs root" >&2
        exit 1
    fi
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server >&2
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "test.sh: redis-server still missing after apt-get install" >&2
        exit 1
    fi
fi
redis-server --version

step "cargo test"
cargo test --locked

step "prometheus: every dashboard expression and alerting rule on a real Prometheus"
scripts/prometheus-test.sh

step "client tests"
scripts/client-tests.sh

step "deployment files (docker/, offline)"
ROUTEKEY_PROXY_BIN=target/debug/routekey-proxy scripts/validate-deploy.sh

step "all tests passed"
