#!/usr/bin/env bash
# node mysql2 through routekey-proxy (execute and query, single connections and a pool),
# compared with mysql2 talking straight to the shard's MariaDB. Run by scripts/client-tests.sh
# with ROUTEKEY_PROXY_PORT, ROUTEKEY_DS0_PORT, ROUTEKEY_DS1_PORT and ROUTEKEY_SANDBOX_DIR set:
#
#   ROUTEKEY_CLIENT_SUITES=node scripts/client-tests.sh
#
# mysql2 comes from the npm registry, pinned by package.json + package-lock.json beside this
# file, installed with `npm ci` into <sandbox>/client-tests/node-mysql2 (never into the repo);
# the install is skipped while the lock file there is unchanged.
set -euo pipefail

HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
: "${ROUTEKEY_PROXY_PORT:?set by scripts/client-tests.sh}"
: "${ROUTEKEY_SANDBOX_DIR:?set by scripts/client-tests.sh}"

# Node.js (18 or newer) and npm: Debian's packages when missing.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || { echo "node: node and npm are missing and there is no apt-get" >&2; exit 1; }
    echo "node: installing nodejs and npm with apt-get" >&2
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >&2 \
        || { $SUDO apt-get update -q >&2 && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >&2; } \
        || { echo "node: apt-get install nodejs npm failed" >&2; exit 1; }
fi
major=$(node -p 'process.versions.node.split(".")[0]')
(( major >= 18 )) || { echo "node: Node.js $major is too old (18 or newer)" >&2; exit 1; }

DEPS="$ROUTEKEY_SANDBOX_DIR/client-tests/node-mysql2"
mkdir -p "$DEPS"
if ! cmp -s "$HERE/package-lock.json" "$DEPS/package-lock.json" \
        || ! cmp -s "$HERE/package.json" "$DEPS/package.json" \
        || [[ ! -f "$DEPS/node_modules/mysql2/package.json" ]]; then
    cp "$HERE/package.json" "$HERE/package-lock.json" "$DEPS/"
    (cd "$DEPS" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

exec env MYSQL2_DIR="$DEPS/node_modules/mysql2" node "$HERE/test.js" </dev/null
