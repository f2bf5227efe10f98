#!/usr/bin/env bash
# Runs every test of routekey-proxy on this machine: brings the MariaDB sandbox up (installing
# MariaDB when missing), runs `cargo test` (unit tests and the in-process end-to-end tests),
# then the real-client suites of tests/clients (mariadb CLI, PyMySQL, mysql-connector-python,
# Connector/J with HikariCP, node mysql2, sysbench) against the proxy binary, and takes the
# sandbox down again. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s\n' "$*"; }

step "sandbox up"
scripts/sandbox.sh up
cleanup() { scripts/sandbox.sh down >/dev/null 2>&1 || true; }
trap cleanup EXIT

step "cargo test"
cargo test --locked

step "client tests"
scripts/client-tests.sh

step "all tests passed"
