#!/usr/bin/env bash
# mysql-connector-python through routekey-proxy (prepared and plain cursors, pure-Python and
# C extension), compared with the same connector talking straight to the shard's MariaDB.
# Run by scripts/client-tests.sh with ROUTEKEY_PROXY_PORT, ROUTEKEY_DS0_PORT, ROUTEKEY_DS1_PORT,
# ROUTEKEY_SANDBOX_DIR and ROUTEKEY_VENV (a virtualenv with pip) in the environment:
#
#   ROUTEKEY_CLIENT_SUITES=mysqlconnector scripts/client-tests.sh
set -euo pipefail

HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
MYSQL_CONNECTOR_VERSION="9.5.0"

: "${ROUTEKEY_PROXY_PORT:?set by scripts/client-tests.sh}"
: "${ROUTEKEY_SANDBOX_DIR:?set by scripts/client-tests.sh}"
: "${ROUTEKEY_VENV:?set by scripts/client-tests.sh}"
PY="$ROUTEKEY_VENV/bin/python"
[[ -x "$PY" ]] || { echo "mysqlconnector: no python in $ROUTEKEY_VENV" >&2; exit 1; }

if ! "$PY" -c "import sys, mysql.connector as m; sys.exit(m.__version__ != '$MYSQL_CONNECTOR_VERSION')" 2>/dev/null; then
    "$PY" -m pip install --quiet --disable-pip-version-check \
        "mysql-connector-python==$MYSQL_CONNECTOR_VERSION" >&2
fi

exec env PYTHONDONTWRITEBYTECODE=1 PYTHONFAULTHANDLER=1 "$PY" "$HERE/test_mysqlconnector.py" </dev/null
