#!/usr/bin/env bash
# Java client suite of routekey-proxy: MariaDB Connector/J (Debian's libmariadb-java) and
# HikariCP (libhikaricp-java) through the proxy, each check compared with the same statement
# run directly on the shard's MariaDB server. Run by scripts/client-tests.sh, which sets:
#   ROUTEKEY_PROXY_PORT, ROUTEKEY_DS0_PORT (33061), ROUTEKEY_DS1_PORT (33062),
#   ROUTEKEY_SANDBOX_DIR (sandbox folder with seed-summary.json)
# Alone: ROUTEKEY_CLIENT_SUITES=java scripts/client-tests.sh
# Arguments, if any, are substrings of check names: only those checks run (the clean-up always runs).
# Output: one PASS/FAIL line per check (details indented under FAIL), then a summary; exit 1 on
# any failure.
set -euo pipefail

HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "$HERE/../../.." && pwd -P)"
SANDBOX_DIR="${ROUTEKEY_SANDBOX_DIR:-$REPO_ROOT/.sandbox}"
case "$SANDBOX_DIR" in /*) ;; *) SANDBOX_DIR="$REPO_ROOT/$SANDBOX_DIR" ;; esac
export ROUTEKEY_SANDBOX_DIR="$SANDBOX_DIR"
: "${ROUTEKEY_PROXY_PORT:?ROUTEKEY_PROXY_PORT is not set (run through scripts/client-tests.sh)}"

log() { printf 'java-suite: %s\n' "$*" >&2; }
die() { printf 'java-suite: ERROR: %s\n' "$*" >&2; exit 1; }

# --- packages (Debian) -----------------------------------------------------------------------
need=()
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
for pkg in libmariadb-java libhikaricp-java libslf4j-java; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if (( ${#need[@]} )); then
    command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} and no apt-get"
    SUDO=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "missing ${need[*]}; install them as root"
        SUDO=(sudo -n)
    fi
    log "installing ${need[*]} (apt-get)"
    "${SUDO[@]}" apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi

# Jar paths as the packages install them.
find_jar() { # package, basename regex
    dpkg -L "$1" 2>/dev/null | grep -E "^/usr/share/java/$2\.jar$" | head -n1
}
MARIADB_JAR="$(find_jar libmariadb-java 'mariadb-java-client')"
HIKARI_JAR="$(find_jar libhikaricp-java 'HikariCP')"
SLF4J_API_JAR="$(find_jar libslf4j-java 'slf4j-api')"
SLF4J_NOP_JAR="$(find_jar libslf4j-java 'slf4j-nop')"
for j in MARIADB_JAR HIKARI_JAR SLF4J_API_JAR SLF4J_NOP_JAR; do
    [[ -n "${!j}" && -f "${!j}" ]] || die "$j not found (dpkg -L)"
done
CP="$MARIADB_JAR:$HIKARI_JAR:$SLF4J_API_JAR:$SLF4J_NOP_JAR"

# --- compile -----------------------------------------------------------------------------------
BUILD_DIR="$SANDBOX_DIR/client-tests/java-build"
rm -rf -- "$BUILD_DIR"
mkdir -p "$BUILD_DIR"
javac -nowarn -encoding UTF-8 -d "$BUILD_DIR" -cp "$CP" "$HERE"/src/*.java >&2 \
    || die "javac failed"

# --- run ---------------------------------------------------------------------------------------
exec java -Dfile.encoding=UTF-8 -Duser.timezone=UTC -cp "$BUILD_DIR:$CP" ProxyClientSuite "$@"
