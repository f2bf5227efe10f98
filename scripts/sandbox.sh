#!/usr/bin/env bash
# Local MariaDB sandbox for routekey-proxy: two servers (ds0, ds1) with seeded shard data.
#
#   scripts/sandbox.sh up            install MariaDB if missing, start both servers, (re)seed everything
#   scripts/sandbox.sh down          stop both servers (data dirs are kept)
#   scripts/sandbox.sh down --purge  stop both servers and delete the sandbox folder
#   scripts/sandbox.sh status        exit 0 if both servers run, 3 otherwise
#
# Environment: ROUTEKEY_SANDBOX_DIR (default <repo>/.sandbox),
#              ROUTEKEY_DS0_PORT (default 33061), ROUTEKEY_DS1_PORT (default 33062).
# Servers listen on 127.0.0.1 only; user root, empty password; user routekey_ed25519
# (password ed25519-secret, every privilege) logs in with the ed25519 plugin. They offer TLS with the
# certificates under <sandbox>/tls/ (ca.pem, server.pem, client.pem, other-ca.pem; see ensure_certs).
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"
SANDBOX_DIR="${ROUTEKEY_SANDBOX_DIR:-$REPO_ROOT/.sandbox}"
DS0_PORT="${ROUTEKEY_DS0_PORT:-33061}"
DS1_PORT="${ROUTEKEY_DS1_PORT:-33062}"
SERVERS=(ds0 ds1)
MARKER=".routekey-sandbox"
START_TIMEOUT=60
STOP_TIMEOUT=60

# mariadbd / mariadb-install-db live in /usr/sbin and /usr/bin on Debian.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

log() { printf 'sandbox: %s\n' "$*" >&2; }
die() { printf 'sandbox: ERROR: %s\n' "$*" >&2; exit 1; }

# Make the sandbox dir absolute (it may be relative to the caller's cwd).
abs_dir() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s/%s\n' "$(pwd -P)" "$1" ;;
    esac
}
SANDBOX_DIR="$(abs_dir "$SANDBOX_DIR")"
SANDBOX_DIR="${SANDBOX_DIR%/}"
[[ -n "$SANDBOX_DIR" ]] || die "refusing to use / as the sandbox dir"

port_of() {
    case "$1" in
        ds0) printf '%s\n' "$DS0_PORT" ;;
        ds1) printf '%s\n' "$DS1_PORT" ;;
        *) die "unknown server $1" ;;
    esac
}
datadir_of() { printf '%s/%s\n' "$SANDBOX_DIR" "$1"; }
pidfile_of() { printf '%s/mysqld.pid\n' "$(datadir_of "$1")"; }

# Unix socket paths are limited to 107 bytes; fall back to /tmp for long sandbox paths.
socket_of() {
    local s
    s="$(datadir_of "$1")/mysqld.sock"
    if (( ${#s} > 100 )); then
        s="/tmp/routekey-$(printf '%s' "$SANDBOX_DIR" | cksum | cut -d' ' -f1)-$1.sock"
    fi
    printf '%s\n' "$s"
}

client() { # client <port> [args...] -- the mariadb CLI against one server over TCP
    local port="$1"; shift
    mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$port" -uroot \
        --default-character-set=utf8mb4 --connect-timeout=5 "$@"
}

ping_port() { # exit 0 when a server answers on the port (even with "access denied")
    mariadb-admin --no-defaults --protocol=TCP -h127.0.0.1 -P"$1" -uroot \
        --connect-timeout=2 ping >/dev/null 2>&1
}

# Is <pid> a mariadbd serving <datadir>?  Guards against stale pid files / pid reuse.
# Only bash builtins here: it runs for every process when /proc is scanned.
is_our_mariadbd() {
    local pid="$1" datadir="$2" arg
    local -a argv=()
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    mapfile -d '' -t argv <"/proc/$pid/cmdline" 2>/dev/null || return 1
    (( ${#argv[@]} > 0 )) || return 1
    case "${argv[0]##*/}" in mariadbd|mysqld) ;; *) return 1 ;; esac
    for arg in "${argv[@]:1}"; do
        [[ "$arg" == "--datadir=$datadir" ]] && return 0
    done
    return 1
}

# Prints the pid of the mariadbd owning this server's datadir, or nothing.
server_pid() {
    local name="$1" datadir pidfile pid p
    datadir="$(datadir_of "$name")"
    pidfile="$(pidfile_of "$name")"
    if [[ -f "$pidfile" ]]; then
        pid="$(tr -dc '0-9' <"$pidfile" 2>/dev/null || true)"
        if [[ -n "$pid" ]] && is_our_mariadbd "$pid" "$datadir"; then
            printf '%s\n' "$pid"; return 0
        fi
    fi
    # No (valid) pid file, e.g. still starting up or the file was removed: scan /proc.
    for p in /proc/[0-9]*; do
        pid="${p#/proc/}"
        if is_our_mariadbd "$pid" "$datadir"; then
            printf '%s\n' "$pid"; return 0
        fi
    done
    return 0
}

ensure_installed() {
    local missing=0 b
    for b in mariadbd mariadb-install-db mariadb mariadb-admin; do
        command -v "$b" >/dev/null 2>&1 || missing=1
    done
    if (( missing )); then
        log "MariaDB not found; installing mariadb-server mariadb-client (apt-get)"
        [[ "$(id -u)" == 0 ]] || die "MariaDB is missing and installing it needs root"
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-server mariadb-client >&2
        for b in mariadbd mariadb-install-db mariadb mariadb-admin; do
            command -v "$b" >/dev/null 2>&1 || die "$b still missing after apt-get install"
        done
    fi
    command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH"
}

ensure_sandbox_dir() {
    if [[ -d "$SANDBOX_DIR" ]]; then
        if [[ ! -e "$SANDBOX_DIR/$MARKER" ]] && [[ -n "$(ls -A "$SANDBOX_DIR")" ]]; then
            die "$SANDBOX_DIR exists, is not empty and was not created by this script"
        fi
    fi
    mkdir -p "$SANDBOX_DIR"
    touch "$SANDBOX_DIR/$MARKER"
}

init_datadir() {
    local name="$1" datadir
    datadir="$(datadir_of "$name")"
    [[ -f "$datadir/.initialized" ]] && return 0
    # A half-initialised dir from an interrupted run: start over (never if a server uses it).
    [[ -z "$(server_pid "$name")" ]] || die "$name: server running on an uninitialised data dir $datadir"
    # Temporary files go to a directory of this server's own, not the shared /tmp (another
    # sandbox or a /tmp cleaner must not take them away mid-install).
    local tmpdir="$datadir-tmp" attempt
    for attempt in 1 2; do
        rm -rf -- "$datadir" "$tmpdir"
        mkdir -p "$datadir" "$tmpdir"
        log "$name: initialising data dir $datadir"
        if mariadb-install-db --no-defaults --datadir="$datadir" --user=root \
                --auth-root-authentication-method=normal --tmpdir="$tmpdir" \
                >"$datadir/install.log" 2>&1; then
            break
        fi
        tail -n 30 "$datadir/install.log" >&2 || true
        (( attempt == 1 )) || die "$name: mariadb-install-db failed (log: $datadir/install.log)"
        log "$name: mariadb-install-db failed; trying once more"
    done
    touch "$datadir/.initialized"
}

# A CA and certificates for TLS tests, made once per sandbox with openssl: ca.pem signs
# server.pem (localhost, 127.0.0.1, ::1) and client.pem; other-ca.pem is an unrelated CA for
# "wrong CA" tests. The servers start with the server certificate (TLS offered, not required).
ensure_certs() {
    local dir="$SANDBOX_DIR/tls"
    [[ -f "$dir/.complete" ]] && return 0
    command -v openssl >/dev/null 2>&1 || {
        log "openssl not found; installing it (apt-get)"
        [[ "$(id -u)" == 0 ]] || die "openssl is missing and installing it needs root"
        apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y openssl >&2
    }
    rm -rf -- "$dir"
    mkdir -p "$dir"
    log "creating a CA and certificates in $dir"
    local days=3650
    {
        openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -keyout "$dir/ca-key.pem" \
            -out "$dir/ca.pem" -subj "/CN=routekey sandbox CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
        openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -keyout "$dir/other-ca-key.pem" \
            -out "$dir/other-ca.pem" -subj "/CN=routekey unrelated CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
        local leaf
        for leaf in server client; do
            openssl req -newkey rsa:2048 -nodes -keyout "$dir/$leaf-key.pem" \
                -out "$dir/$leaf.csr" -subj "/CN=$([[ $leaf == server ]] && echo localhost || echo routekey-client)"
            printf '%s\n' "basicConstraints=critical,CA:FALSE" \
                "keyUsage=critical,digitalSignature,keyEncipherment" \
                "extendedKeyUsage=$([[ $leaf == server ]] && echo serverAuth || echo clientAuth)" \
                "subjectAltName=$([[ $leaf == server ]] && echo 'DNS:localhost,IP:127.0.0.1,IP:::1' || echo 'DNS:routekey-client')" \
                >"$dir/$leaf.ext"
            openssl x509 -req -in "$dir/$leaf.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
                -CAcreateserial -days "$days" -extfile "$dir/$leaf.ext" -out "$dir/$leaf.pem"
            rm -f -- "$dir/$leaf.csr" "$dir/$leaf.ext"
        done
    } >"$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log" >&2; die "openssl failed"; }
    # PKCS#8 keys: what rustls-pemfile and MariaDB both read.
    chmod 600 "$dir"/*-key.pem
    touch "$dir/.complete"
}

# Starts the server in the background unless it already runs. Does not wait for readiness.
start_server() {
    local name="$1" port datadir pidfile sock pid
    port="$(port_of "$name")"
    datadir="$(datadir_of "$name")"
    pidfile="$(pidfile_of "$name")"
    sock="$(socket_of "$name")"
    pid="$(server_pid "$name")"
    if [[ -n "$pid" ]]; then
        log "$name: already running (pid $pid, port $port)"
        return 0
    fi
    if ping_port "$port"; then
        die "$name: port $port is served by a process that is not this sandbox's $name (datadir $datadir)"
    fi
    rm -f -- "$pidfile"
    [[ -S "$sock" ]] && rm -f -- "$sock"
    log "$name: starting mariadbd on 127.0.0.1:$port"
    {
        printf '\n==== %s starting %s on port %s ====\n' "$(date -u +%FT%TZ)" "$name" "$port"
    } >>"$datadir/server.log"
    # Detach completely: own session, no tty, no inherited pipes (stdin/out/err or others),
    # so callers that wait for their output pipes to close (CI) are not held open.
    (
        for fdpath in /proc/self/fd/*; do
            fd="${fdpath##*/}"
            if [[ "$fd" =~ ^[0-9]+$ ]] && (( fd > 2 )); then
                exec {fd}>&-   # no redirection here: "exec 2>..." would be permanent
            fi
        done
        mkdir -p "$datadir-tmp"
        exec setsid mariadbd --no-defaults --datadir="$datadir" --tmpdir="$datadir-tmp" --port="$port" \
            --socket="$sock" --user=root --bind-address=127.0.0.1 --skip-log-bin \
            --pid-file="$pidfile" --innodb-buffer-pool-size=128M --max-connections=500 \
            --innodb-print-all-deadlocks=ON \
            --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
            --ssl-ca="$SANDBOX_DIR/tls/ca.pem" --ssl-cert="$SANDBOX_DIR/tls/server.pem" \
            --ssl-key="$SANDBOX_DIR/tls/server-key.pem"
    ) </dev/null >>"$datadir/server.log" 2>&1 &
    printf '%s\n' "$!" >"$datadir/.launcher.pid"
}

wait_ready() {
    local name="$1" port datadir deadline launcher
    port="$(port_of "$name")"
    datadir="$(datadir_of "$name")"
    launcher="$(cat "$datadir/.launcher.pid" 2>/dev/null || true)"
    deadline=$(( SECONDS + START_TIMEOUT ))
    while (( SECONDS < deadline )); do
        if [[ -n "$(server_pid "$name")" ]] && ping_port "$port"; then
            rm -f -- "$datadir/.launcher.pid"
            return 0
        fi
        # Fail fast if the process we launched has died (re-check once: setsid may have forked).
        if [[ -n "$launcher" ]] && ! kill -0 "$launcher" 2>/dev/null && [[ -z "$(server_pid "$name")" ]]; then
            sleep 1
            [[ -n "$(server_pid "$name")" ]] || break
        fi
        sleep 0.2
    done
    log "$name: server did not become ready on port $port; last lines of $datadir/server.log:"
    tail -n 40 "$datadir/server.log" >&2 || true
    die "$name: failed to start"
}

stop_server() {
    local name="$1" port pid deadline
    port="$(port_of "$name")"
    pid="$(server_pid "$name")"
    if [[ -z "$pid" ]]; then
        log "$name: not running"
        rm -f -- "$(pidfile_of "$name")"
        return 0
    fi
    log "$name: stopping (pid $pid)"
    mariadb-admin --no-defaults --protocol=TCP -h127.0.0.1 -P"$port" -uroot \
        --connect-timeout=5 --shutdown-timeout="$STOP_TIMEOUT" shutdown >/dev/null 2>&1 \
        || kill -TERM "$pid" 2>/dev/null || true
    deadline=$(( SECONDS + STOP_TIMEOUT ))
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name: still alive after ${STOP_TIMEOUT}s; sending SIGTERM"
        kill -TERM "$pid" 2>/dev/null || true
        deadline=$(( SECONDS + 20 ))
        while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    fi
    if kill -0 "$pid" 2>/dev/null; then
        log "$name: sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f -- "$(pidfile_of "$name")"
}

seed() {
    local out="$SANDBOX_DIR/seed" name port rc=0
    local -A jobs=()
    python3 "$SCRIPT_DIR/seed.py" --out-dir "$out" --ds0-port "$DS0_PORT" --ds1-port "$DS1_PORT" >&2
    mv -f -- "$out/seed-summary.json" "$SANDBOX_DIR/seed-summary.json"
    for name in "${SERVERS[@]}"; do
        port="$(port_of "$name")"
        client "$port" --batch <"$out/$name.sql" >"$out/$name.load.log" 2>&1 &
        jobs[$name]=$!
    done
    for name in "${SERVERS[@]}"; do
        if ! wait "${jobs[$name]}"; then
            log "$name: loading $out/$name.sql failed:"
            cat "$out/$name.load.log" >&2 || true
            rc=1
        fi
    done
    (( rc == 0 )) || die "seeding failed"
}

# A second backend account on both servers that logs in with MariaDB's ed25519 plugin
# (client_ed25519), for tests of the proxy's backend authentication.
ED25519_USER=routekey_ed25519
ED25519_PASSWORD=ed25519-secret
ensure_accounts() {
    local name port
    for name in "${SERVERS[@]}"; do
        port="$(port_of "$name")"
        if [[ "$(client "$port" -N -e "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'")" == 0 ]]; then
            client "$port" -e "INSTALL SONAME 'auth_ed25519'"
        fi
        client "$port" -e "
            CREATE OR REPLACE USER '$ED25519_USER'@'127.0.0.1' IDENTIFIED VIA ed25519 USING PASSWORD('$ED25519_PASSWORD');
            CREATE OR REPLACE USER '$ED25519_USER'@'localhost' IDENTIFIED VIA ed25519 USING PASSWORD('$ED25519_PASSWORD');
            GRANT ALL ON *.* TO '$ED25519_USER'@'127.0.0.1';
            GRANT ALL ON *.* TO '$ED25519_USER'@'localhost';"
    done
}

count_sql() { # count_sql <table-prefix> <shards...> -> one SELECT summing COUNT(*) over the tables
    local prefix="$1"; shift
    local parts=() s
    for s in "$@"; do parts+=("(SELECT COUNT(*) FROM order_shards.${prefix}_${s})"); done
    local IFS=+
    printf 'SELECT %s' "${parts[*]}"
}

summary() {
    local o0 i0 o1 i1 ref refi idx merch
    o0="$(client "$DS0_PORT" -N -e "$(count_sql t_order {0..9})")"
    i0="$(client "$DS0_PORT" -N -e "$(count_sql t_order_item {0..9})")"
    o1="$(client "$DS1_PORT" -N -e "$(count_sql t_order {10..19})")"
    i1="$(client "$DS1_PORT" -N -e "$(count_sql t_order_item {10..19})")"
    local row
    row="$(client "$DS0_PORT" -N -e \
        "SELECT (SELECT COUNT(*) FROM orders_ref.t_order), (SELECT COUNT(*) FROM orders_ref.t_order_item),
                (SELECT COUNT(*) FROM order_meta.t_order_index), (SELECT COUNT(*) FROM orders.t_merchant)")"
    read -r ref refi idx merch <<<"$row"
    cat <<EOF
routekey sandbox is up ($SANDBOX_DIR)
  ds0 127.0.0.1:$DS0_PORT  shards 0-9    t_order rows $o0, t_order_item rows $i0
                             orders_ref.t_order $ref, orders_ref.t_order_item $refi, order_meta.t_order_index $idx, orders.t_merchant $merch
  ds1 127.0.0.1:$DS1_PORT  shards 10-19  t_order rows $o1, t_order_item rows $i1
  sharded total: $((o0 + o1)) orders, $((i0 + i1)) items   (user root, empty password)
  ed25519 account: $ED25519_USER / $ED25519_PASSWORD
  ids: $SANDBOX_DIR/seed-summary.json
EOF
    if (( o0 + o1 != ref || i0 + i1 != refi )); then
        die "shard totals do not match orders_ref"
    fi
}

cmd_up() {
    (( $# == 0 )) || die "usage: $0 up"
    [[ "$DS0_PORT" != "$DS1_PORT" ]] || die "ROUTEKEY_DS0_PORT and ROUTEKEY_DS1_PORT must differ"
    ensure_installed
    local name
    for name in "${SERVERS[@]}"; do
        if [[ -z "$(server_pid "$name")" ]] && ping_port "$(port_of "$name")"; then
            die "$name: port $(port_of "$name") is served by a process that is not this sandbox's $name"
        fi
    done
    ensure_sandbox_dir
    ensure_certs
    for name in "${SERVERS[@]}"; do init_datadir "$name"; done
    for name in "${SERVERS[@]}"; do start_server "$name"; done
    for name in "${SERVERS[@]}"; do wait_ready "$name"; done
    for name in "${SERVERS[@]}"; do
        if [[ "$(client "$(port_of "$name")" -N -e 'SELECT @@have_ssl')" != YES ]]; then
            log "$name: running without TLS (started by an older sandbox.sh); 'down' then 'up' enables it"
        fi
    done
    seed
    ensure_accounts
    summary
}

cmd_down() {
    local purge=0
    case "${1:-}" in
        "") ;;
        --purge) purge=1 ;;
        *) die "usage: $0 down [--purge]" ;;
    esac
    local name
    if [[ -d "$SANDBOX_DIR" ]]; then
        for name in "${SERVERS[@]}"; do stop_server "$name"; done
    fi
    if (( purge )) && [[ -d "$SANDBOX_DIR" ]]; then
        [[ -e "$SANDBOX_DIR/$MARKER" ]] || die "$SANDBOX_DIR was not created by this script; not deleting it"
        [[ "$SANDBOX_DIR" != "$REPO_ROOT" && "$SANDBOX_DIR" != "$HOME" ]] || die "refusing to delete $SANDBOX_DIR"
        for name in "${SERVERS[@]}"; do rm -f -- "$(socket_of "$name")"; done
        rm -rf -- "$SANDBOX_DIR"
        log "removed $SANDBOX_DIR"
    fi
    echo "routekey sandbox is down"
}

cmd_status() {
    (( $# == 0 )) || die "usage: $0 status"
    local name port pid up=0
    for name in "${SERVERS[@]}"; do
        port="$(port_of "$name")"
        pid=""
        [[ -d "$(datadir_of "$name")" ]] && pid="$(server_pid "$name")"
        if [[ -n "$pid" ]] && ping_port "$port"; then
            echo "$name: running  127.0.0.1:$port (pid $pid)"
            up=$((up + 1))
        elif [[ -n "$pid" ]]; then
            echo "$name: not answering  127.0.0.1:$port (pid $pid, starting or hung)"
        else
            echo "$name: stopped  127.0.0.1:$port"
        fi
    done
    (( up == ${#SERVERS[@]} )) && return 0
    return 3
}

main() {
    local cmd="${1:-}"
    shift || true
    case "$cmd" in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        status) cmd_status "$@" ;;
        *) echo "usage: $0 up | down [--purge] | status" >&2; exit 2 ;;
    esac
}

main "$@"
