#!/usr/bin/env bash
# Client security through routekey-proxy with real clients: TLS (PyMySQL, mysql-connector-python
# pure and C extension, the mariadb CLI with --ssl and --ssl-verify-server-cert against the
# sandbox CA), a require_tls user, caching_sha2_password (over TLS; over clear-text TCP with the
# proxy's RSA key where the client implements the exchange), Ssl_cipher/Ssl_version.
# Run by scripts/client-tests.sh (environment: ROUTEKEY_PROXY_PORT, ROUTEKEY_SANDBOX_DIR,
# ROUTEKEY_VENV), against the demo configuration (users app, app_sha2, app_tls):
#
#   ROUTEKEY_CLIENT_SUITES=security scripts/client-tests.sh
set -euo pipefail

HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
MYSQL_CONNECTOR_VERSION="9.5.0"

: "${ROUTEKEY_PROXY_PORT:?set by scripts/client-tests.sh}"
: "${ROUTEKEY_SANDBOX_DIR:?set by scripts/client-tests.sh}"
: "${ROUTEKEY_VENV:?set by scripts/client-tests.sh}"
PY="$ROUTEKEY_VENV/bin/python"
[[ -x "$PY" ]] || { echo "security: no python in $ROUTEKEY_VENV" >&2; exit 1; }

# PyMySQL encrypts with `cryptography` for caching_sha2_password's RSA exchange.
if ! "$PY" -c "import sys, mysql.connector as m, cryptography; sys.exit(m.__version__ != '$MYSQL_CONNECTOR_VERSION')" 2>/dev/null; then
    "$PY" -m pip install --quiet --disable-pip-version-check \
        "mysql-connector-python==$MYSQL_CONNECTOR_VERSION" cryptography >&2
fi

exec env PYTHONDONTWRITEBYTECODE=1 PYTHONFAULTHANDLER=1 "$PY" "$HERE/test_security.py" </dev/null
