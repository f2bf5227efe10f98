#!/usr/bin/env bash
# Local MariaDB sandbox for routekey-proxy: two datasources (ds0, ds1) with seeded shard data, each
# a primary optionally followed by real MariaDB replicas.
#
#   scripts/sandbox.sh up [--replicas N]  install MariaDB if missing, start every server, (re)seed
#                                         everything, (re)build N replicas per datasource (default
#                                         $ROUTEKEY_REPLICAS or 0); always restores the canonical
#                                         topology (dsX primary and writable, dsXr1..dsXrN read-only
#                                         replicas of it) and removes replicas beyond N
#   scripts/sandbox.sh down               stop every server, replicas included (data dirs are kept)
#   scripts/sandbox.sh down --purge       stop every server and delete the sandbox folder
#   scripts/sandbox.sh status             exit 0 if every server of the sandbox runs, 3 otherwise
#   scripts/sandbox.sh promote <name>     make replica <name> (e.g. ds1r1) its datasource's primary:
#                                         switchover when the primary answers, failover when it is
#                                         not running (the dead one is left alone)
#   scripts/sandbox.sh start <name>       start one stopped/killed server with its usual flags; a
#                                         non-primary comes back read-only, replicating from the
#                                         datasource's current primary
#   scripts/sandbox.sh pid <name>         its mariadbd pid (nothing and exit 3 when not running)
#   scripts/sandbox.sh members <ds>       127.0.0.1:port list of ds0/ds1's servers, primary first
#   scripts/sandbox.sh up --spare         also start ds2, an empty spare server (no replicas, no
#                                         seed, an empty database `orders`: the target of `shards
#                                         move`), emptied at each up
#
# The ports `up` used are recorded in <sandbox>/ports: later commands on that sandbox use
# them when ROUTEKEY_DS0_PORT/DS1_PORT are unset, and refuse others while it runs.
# Environment: ROUTEKEY_SANDBOX_DIR (default <repo>/.sandbox),
#              ROUTEKEY_DS0_PORT (default 33061), ROUTEKEY_DS1_PORT (default 33062),
#              ROUTEKEY_DS2_PORT (the spare, default ROUTEKEY_DS1_PORT + 1),
#              ROUTEKEY_REPLICAS (default 0; up's --replicas wins).
# Servers listen on 127.0.0.1 only; user root, empty password; user routekey_ed25519
# (password ed25519-secret, every privilege) logs in with the ed25519 plugin. They offer TLS with the
# certificates under <sandbox>/tls/ (ca.pem, server.pem, client.pem, other-ca.pem; see ensure_certs).
#
# Replication: every server has a binary log in its data dir (ROW, log-slave-updates, GTIDs,
# gtid_strict_mode). Replica k (1-9) of dsX is dsXrk on port dsX's port + 10*k (33071/33072 for
# k=1 by default); server_id = gtid_domain_id: ds0 1, ds1 2, dsXrk 100*k + X + 1 (ds1r1 102).
# Replicas are read_only and follow their primary with MASTER_USE_GTID=slave_pos; `up` rebuilds
# them from a `mariadb-dump --gtid` of the primary's databases taken after the seed and waits
# until they caught up. Only with replicas is semi-sync on (AFTER_SYNC, 1000 ms, then async).
# <sandbox>/topology records the replica count and each datasource's primary. Account
# routekey_rw / routekey-secret (every server, not replicated) has every privilege but SUPER and
# READ_ONLY ADMIN: read_only refuses its writes (error 1290), not root's.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"
SANDBOX_DIR="${ROUTEKEY_SANDBOX_DIR:-$REPO_ROOT/.sandbox}"
DS0_PORT="${ROUTEKEY_DS0_PORT:-33061}"
DS1_PORT="${ROUTEKEY_DS1_PORT:-33062}"
DATASOURCES=(ds0 ds1)
SERVERS=(ds0 ds1) # the primaries the seed loads; `up` makes them the primaries again
MARKER=".routekey-sandbox"
TOPOLOGY_FILE_NAME="topology"
START_TIMEOUT=60
STOP_TIMEOUT=60
CATCHUP_TIMEOUT=60  # up: a rebuilt replica applying its primary's binary log
PROMOTE_TIMEOUT=30  # promote: the new primary applying what the old one wrote or it received
SEMI_SYNC_TIMEOUT_MS=1000
RW_USER=routekey_rw
RW_PASSWORD=routekey-secret

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

# The ports `up` started this sandbox's servers on, recorded in <sandbox>/ports: a command
# run without ROUTEKEY_DS0_PORT/DS1_PORT uses them (a second terminal needs no exports),
# and one run with other ports while a server of the sandbox runs is refused (it would
# reach another sandbox's servers on those ports).
PORTS_FILE="$SANDBOX_DIR/ports"
RECORDED_PORTS=""
if [[ -f "$PORTS_FILE" ]]; then
    read -r RECORDED_PORTS <"$PORTS_FILE" || true
    read -r -a recorded <<<"$RECORDED_PORTS"
    if (( ${#recorded[@]} >= 2 )); then
        [[ -n "${ROUTEKEY_DS0_PORT:-}" ]] || DS0_PORT="${recorded[0]}"
        [[ -n "${ROUTEKEY_DS1_PORT:-}" ]] || DS1_PORT="${recorded[1]}"
    fi
    RECORDED_PORTS="${recorded[0]:-} ${recorded[1]:-}"
fi
DS2_PORT="${ROUTEKEY_DS2_PORT:-$((DS1_PORT + 1))}"
if [[ -f "$SANDBOX_DIR/spare-port" && -z "${ROUTEKEY_DS2_PORT:-}" ]]; then
    read -r DS2_PORT <"$SANDBOX_DIR/spare-port" || true
fi

# Server names: ds0, ds1 (the primaries `up` makes) and dsXrK (replica K, 1-9, of dsX).
valid_name() { [[ "$1" =~ ^ds[01](r[1-9])?$ || "$1" == ds2 ]]; }
ds_of() { printf '%s\n' "${1:0:3}"; }
replica_index() { # 0 for ds0/ds1, K for dsXrK
    if [[ "$1" == *r* ]]; then printf '%s\n' "${1#*r}"; else printf '0\n'; fi
}
port_of() {
    valid_name "$1" || die "unknown server $1"
    local base
    case "$(ds_of "$1")" in
        ds0) base="$DS0_PORT" ;;
        ds1) base="$DS1_PORT" ;;
        ds2) base="$DS2_PORT" ;;
    esac
    printf '%s\n' "$(( base + 10 * $(replica_index "$1") ))"
}
# server_id and gtid_domain_id (the same number): ds0 1, ds1 2, dsXrK 100*K + X + 1.
server_id_of() {
    valid_name "$1" || die "unknown server $1"
    local x="${1:2:1}"
    printf '%s\n' "$(( 100 * $(replica_index "$1") + x + 1 ))"
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

sql_on() { # sql_on <name> <statements> -- run statements on one server, print rows tab-separated
    local port
    port="$(port_of "$1")"
    client "$port" -N -B -e "$2"
}

# One field of SHOW SLAVE STATUS (empty when the server has no replication configured).
# slave_field <status text from slave_status> <Field>
slave_status() { client "$(port_of "$1")" -e 'SHOW SLAVE STATUS\G'; }
slave_field() {
    awk -v f="$2" '{ line = $0; sub(/^ +/, "", line) }
        index(line, f ": ") == 1 || line == f ":" { sub(/^[^:]*: ?/, "", line); print line; exit }' <<<"$1"
}

# <sandbox>/topology: "replicas=N" and "dsX=<name of its primary>" lines.
topology_file() { printf '%s/%s\n' "$SANDBOX_DIR" "$TOPOLOGY_FILE_NAME"; }
topology_get() { # topology_get <key> <default>
    local f line
    f="$(topology_file)"
    if [[ -f "$f" ]]; then
        while IFS= read -r line; do
            if [[ "$line" == "$1="* ]]; then printf '%s\n' "${line#*=}"; return 0; fi
        done <"$f"
    fi
    printf '%s\n' "$2"
}
topology_write() { # topology_write <replicas> <ds0 primary> <ds1 primary>
    local f
    f="$(topology_file)"
    printf 'replicas=%s\nds0=%s\nds1=%s\n' "$1" "$2" "$3" >"$f.tmp"
    mv -f -- "$f.tmp" "$f"
}
replica_count() {
    local n
    n="$(topology_get replicas 0)"
    [[ "$n" =~ ^[0-9]$ ]] || die "$(topology_file): bad replicas=$n"
    printf '%s\n' "$n"
}
primary_of() { # primary_of <ds>
    local p
    p="$(topology_get "$1" "$1")"
    if ! valid_name "$p" || [[ "$(ds_of "$p")" != "$1" ]]; then die "$(topology_file): bad $1=$p"; fi
    printf '%s\n' "$p"
}
set_primary() { # set_primary <ds> <name>
    local p0 p1
    p0="$(primary_of ds0)"; p1="$(primary_of ds1)"
    case "$1" in ds0) p0="$2" ;; ds1) p1="$2" ;; esac
    topology_write "$(replica_count)" "$p0" "$p1"
}
servers_of() { # servers_of <ds>: dsX and its replicas, in canonical order
    local k n
    n="$(replica_count)"
    printf '%s\n' "$1"
    for (( k = 1; k <= n; k++ )); do printf '%sr%s\n' "$1" "$k"; done
}
all_servers() { local ds; for ds in "${DATASOURCES[@]}"; do servers_of "$ds"; done; }
all_replicas() { all_servers | grep r; }
# Replica data dirs present in the sandbox, whatever the topology file says (down removes them).
replica_dirs() {
    local d n
    for d in "$SANDBOX_DIR"/ds[01]r[1-9]; do
        n="${d##*/}"
        [[ -d "$d" ]] && valid_name "$n" && printf '%s\n' "$n"
    done
    return 0
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

# The sandboxes' ports (33000-34999: every sandbox of the scripts and tests, replicas
# included) are taken out of the kernel's ephemeral range, so an outgoing connection of a
# test or a replica never holds one of them as its local port when a server starts there
# (mariadbd then exits: "Address already in use"). Best effort: root only, the setting is
# kept as it is when it cannot be written.
reserve_ports() {
    local f=/proc/sys/net/ipv4/ip_local_reserved_ports current
    [[ "$(id -u)" == 0 && -w "$f" ]] || return 0
    current="$(cat "$f" 2>/dev/null || true)"
    case ",$current," in *",33000-34999,"*) return 0 ;; esac
    if [[ -z "$current" ]]; then
        printf '33000-34999\n' >"$f" 2>/dev/null || true
    else
        printf '%s,33000-34999\n' "$current" >"$f" 2>/dev/null || true
    fi
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
    # Replication flags. Binary log and relay log live in the data dir. A server that is not its
    # datasource's recorded primary starts read-only; --skip-slave-start because the caller points
    # it at the current primary itself. With replicas, semi-sync is on: master side on the primary,
    # slave side on the others, with --init-rpl-role=SLAVE: crash recovery then truncates the
    # binlog tail whose InnoDB commit was not durable (a killed primary's last commits) instead of
    # committing it, and the new primary sends those transactions back. They carry the server's
    # own server_id: only gtid_strict_mode makes a (semi-sync) replica apply them rather than skip
    # them as its own, so every server runs strict.
    local id primary replicas
    local -a repl
    id="$(server_id_of "$name")"
    primary="$(primary_of "$(ds_of "$name")")"
    replicas="$(replica_count)"
    repl=(--server-id="$id" --gtid-domain-id="$id" --log-bin=mariadb-bin --relay-log=relay-bin
          --log-slave-updates=ON --binlog-format=ROW --gtid-strict-mode=ON --skip-slave-start
          --binlog-expire-logs-seconds=604800
          --report-host=127.0.0.1 --report-port="$port"
          --rpl-semi-sync-master-wait-point=AFTER_SYNC
          --rpl-semi-sync-master-timeout="$SEMI_SYNC_TIMEOUT_MS")
    if [[ "$name" != "$primary" ]]; then
        repl+=(--read-only=ON)
        (( replicas == 0 )) || repl+=(--rpl-semi-sync-slave-enabled=ON --init-rpl-role=SLAVE)
    elif (( replicas > 0 )); then
        repl+=(--rpl-semi-sync-master-enabled=ON)
    fi
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
            --socket="$sock" --user=root --bind-address=127.0.0.1 \
            --pid-file="$pidfile" --innodb-buffer-pool-size=128M --max-connections=500 \
            --innodb-print-all-deadlocks=ON \
            --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
            --ssl-ca="$SANDBOX_DIR/tls/ca.pem" --ssl-cert="$SANDBOX_DIR/tls/server.pem" \
            --ssl-key="$SANDBOX_DIR/tls/server-key.pem" "${repl[@]}"
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

# A second backend account on every server that logs in with MariaDB's ed25519 plugin
# (client_ed25519), for tests of the proxy's backend authentication; and routekey_rw, every
# privilege but SUPER and READ_ONLY ADMIN (the two that let a session write on a read_only
# server). Made on each server with sql_log_bin=0, so they are never replicated (twice).
ED25519_USER=routekey_ed25519
ED25519_PASSWORD=ed25519-secret
ensure_accounts() { # ensure_accounts <name>
    local name="$1" host sql="SET SESSION sql_log_bin=0;"
    if [[ "$(sql_on "$name" "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'")" == 0 ]]; then
        sql+=" INSTALL SONAME 'auth_ed25519';"
    fi
    for host in 127.0.0.1 localhost; do
        sql+="
        CREATE OR REPLACE USER '$ED25519_USER'@'$host' IDENTIFIED VIA ed25519 USING PASSWORD('$ED25519_PASSWORD');
        GRANT ALL ON *.* TO '$ED25519_USER'@'$host';
        CREATE OR REPLACE USER '$RW_USER'@'$host' IDENTIFIED BY '$RW_PASSWORD';
        GRANT ALL ON *.* TO '$RW_USER'@'$host';
        REVOKE SUPER, READ_ONLY ADMIN ON *.* FROM '$RW_USER'@'$host';"
    done
    sql_on "$name" "$sql"
}

# Databases other than MariaDB's own, one a line.
user_databases() {
    sql_on "$1" "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN
        ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY SCHEMA_NAME"
}

# Make <name> a writable primary: no replication of its own, semi-sync master side when the
# sandbox has replicas, read_only off last.
make_primary() {
    local name="$1" semi=OFF
    (( $(replica_count) == 0 )) || semi=ON
    sql_on "$name" "STOP SLAVE; RESET SLAVE ALL;
        SET GLOBAL rpl_semi_sync_slave_enabled = OFF;
        SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC';
        SET GLOBAL rpl_semi_sync_master_timeout = $SEMI_SYNC_TIMEOUT_MS;
        SET GLOBAL rpl_semi_sync_master_enabled = $semi;
        SET GLOBAL read_only = OFF"
}

# Point <name> (read-only, semi-sync slave side when there are replicas) at <primary> with GTIDs
# and start replicating. gtid_slave_pos becomes @@gtid_current_pos first: the same as
# gtid_slave_pos for a plain replica, and for a former primary it adds the transactions it wrote
# itself (its binary log, its server_id), which gtid_slave_pos does not hold. With slave_pos
# alone a demoted primary asks for its domain from the start, which fails (error 1236) once the
# new primary's binary log no longer reaches back that far.
attach() {
    local name="$1" primary="$2" semi=OFF
    (( $(replica_count) == 0 )) || semi=ON
    sql_on "$name" "SET GLOBAL read_only = ON;
        STOP SLAVE;
        SET GLOBAL rpl_semi_sync_master_enabled = OFF;
        SET GLOBAL rpl_semi_sync_slave_enabled = $semi;
        SET GLOBAL gtid_slave_pos = @@gtid_current_pos;
        CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $(port_of "$primary"),
            MASTER_USER = 'root', MASTER_PASSWORD = '', MASTER_CONNECT_RETRY = 1,
            MASTER_USE_GTID = slave_pos;
        START SLAVE"
}

# Wait (bounded) until both replication threads of <name> run; on failure print why, return 1.
wait_slave_running() {
    local name="$1" timeout="$2" st deadline
    deadline=$(( SECONDS + timeout ))
    while :; do
        st="$(slave_status "$name")"
        [[ "$(slave_field "$st" Slave_IO_Running)" == Yes && "$(slave_field "$st" Slave_SQL_Running)" == Yes ]] \
            && return 0
        (( SECONDS < deadline )) || break
        sleep 0.2
    done
    log "$name: replication not running: IO $(slave_field "$st" Slave_IO_Running) ($(slave_field "$st" Last_IO_Error)), SQL $(slave_field "$st" Slave_SQL_Running) ($(slave_field "$st" Last_SQL_Error))"
    return 1
}

# Wait (bounded) until <name> has applied <gtid list>; returns 1 on timeout.
gtid_wait() {
    local name="$1" pos="$2" timeout="$3" r
    [[ -n "$pos" ]] || return 0
    r="$(sql_on "$name" "SELECT MASTER_GTID_WAIT('$pos', $timeout)")"
    [[ "$r" == 0 ]]
}

# <gtid list> without the GTIDs <server_id> wrote: that server has them (in its binary log),
# and MASTER_GTID_WAIT only looks at the GTIDs it applied as a replica.
gtid_without_server() {
    local out=() g
    local -a gtids
    IFS=, read -r -a gtids <<<"$1"
    for g in "${gtids[@]}"; do
        g="${g//[[:space:]]/}"
        [[ -n "$g" ]] || continue
        [[ "$(cut -d- -f2 <<<"$g")" == "$2" ]] || out+=("$g")
    done
    local IFS=,
    printf '%s\n' "${out[*]}"
}

# (Re)build replica <name> of its datasource's primary: drop its databases, load a consistent
# `mariadb-dump --gtid` of the primary's (not binary-logged on the replica), start replicating from
# the dump's GTID position. A dump rather than attaching before the seed: the replica then holds
# exactly the primary's data, also databases a test created there and the seed does not touch.
rebuild_replica() {
    local name="$1" primary dump pos db drop="SET SESSION sql_log_bin=0;"
    local -a dbs=()
    primary="$(primary_of "$(ds_of "$name")")"
    dump="$SANDBOX_DIR/seed/$name.dump.sql"
    sql_on "$name" "SET GLOBAL read_only = ON; STOP SLAVE; RESET SLAVE ALL"
    while IFS= read -r db; do
        [[ -n "$db" ]] && drop+=" DROP DATABASE \`$db\`;"
    done < <(user_databases "$name")
    sql_on "$name" "$drop RESET MASTER; SET GLOBAL gtid_slave_pos = ''"
    mapfile -t dbs < <(user_databases "$primary")
    if (( ${#dbs[@]} > 0 )); then
        mariadb-dump --no-defaults --protocol=TCP -h127.0.0.1 -P"$(port_of "$primary")" -uroot \
            --default-character-set=utf8mb4 --single-transaction --gtid --master-data=2 \
            --routines --events --triggers --hex-blob --databases "${dbs[@]}" >"$dump" \
            || die "$name: mariadb-dump of $primary failed"
        pos="$(sed -n "s/^-- SET GLOBAL gtid_slave_pos='\([^']*\)';.*/\1/p" "$dump" | head -n 1)"
        [[ -n "$pos" || -z "$(sql_on "$primary" "SELECT @@gtid_binlog_pos")" ]] \
            || die "$name: no GTID position in the dump of $primary ($dump)"
        { echo "SET SESSION sql_log_bin=0;"; cat "$dump"; } | client "$(port_of "$name")" --batch \
            || die "$name: loading the dump of $primary failed"
    else
        pos="$(sql_on "$primary" "SELECT @@gtid_binlog_pos")"
    fi
    sql_on "$name" "SET GLOBAL gtid_slave_pos = '$pos'"
    attach "$name" "$primary"
}

count_sql() { # count_sql <table-prefix> <shards...> -> one SELECT summing COUNT(*) over the tables
    local prefix="$1"; shift
    local parts=() s
    for s in "$@"; do parts+=("(SELECT COUNT(*) FROM order_shards.${prefix}_${s})"); done
    local IFS=+
    printf 'SELECT %s' "${parts[*]}"
}

REF_SQL="SELECT (SELECT COUNT(*) FROM orders_ref.t_order), (SELECT COUNT(*) FROM orders_ref.t_order_item),
                (SELECT COUNT(*) FROM order_meta.t_order_index), (SELECT COUNT(*) FROM orders.t_merchant)"

summary() {
    local o0 i0 o1 i1 ref refi idx merch name row row2 shards
    o0="$(client "$DS0_PORT" -N -e "$(count_sql t_order {0..9})")"
    i0="$(client "$DS0_PORT" -N -e "$(count_sql t_order_item {0..9})")"
    o1="$(client "$DS1_PORT" -N -e "$(count_sql t_order {10..19})")"
    i1="$(client "$DS1_PORT" -N -e "$(count_sql t_order_item {10..19})")"
    row="$(client "$DS0_PORT" -N -e "$REF_SQL")"
    read -r ref refi idx merch <<<"$row"
    cat <<EOF
routekey sandbox is up ($SANDBOX_DIR)
  ds0 127.0.0.1:$DS0_PORT  shards 0-9    t_order rows $o0, t_order_item rows $i0
                             orders_ref.t_order $ref, orders_ref.t_order_item $refi, order_meta.t_order_index $idx, orders.t_merchant $merch
  ds1 127.0.0.1:$DS1_PORT  shards 10-19  t_order rows $o1, t_order_item rows $i1
  sharded total: $((o0 + o1)) orders, $((i0 + i1)) items   (user root, empty password)
  ed25519 account: $ED25519_USER / $ED25519_PASSWORD
  read_only-bound account: $RW_USER / $RW_PASSWORD (no SUPER, no READ_ONLY ADMIN)
  ids: $SANDBOX_DIR/seed-summary.json
EOF
    if (( o0 + o1 != ref || i0 + i1 != refi )); then
        die "shard totals do not match orders_ref"
    fi
    # Replicas: the same counts as their primary, or up fails.
    local o i want
    for name in $(all_replicas); do
        if [[ "$(ds_of "$name")" == ds0 ]]; then shards="0 1 2 3 4 5 6 7 8 9"; want="$o0 $i0 $row"
        else shards="10 11 12 13 14 15 16 17 18 19"; want="$o1 $i1"; fi
        # shellcheck disable=SC2086 # shards is a list of numbers
        o="$(sql_on "$name" "$(count_sql t_order $shards)")"
        # shellcheck disable=SC2086
        i="$(sql_on "$name" "$(count_sql t_order_item $shards)")"
        row2="$o $i"
        [[ "$(ds_of "$name")" == ds0 ]] && row2+=" $(sql_on "$name" "$REF_SQL")"
        [[ "$row2" == "$want" ]] || die "$name: row counts ($row2) differ from its primary's ($want)"
        printf '  %-5s 127.0.0.1:%s  replica of %s (read-only, gtid %s), same rows as %s\n' "$name" \
            "$(port_of "$name")" "$(ds_of "$name")" "$(sql_on "$name" "SELECT @@gtid_slave_pos")" "$(ds_of "$name")"
    done
    if (( $(replica_count) > 0 )); then
        echo "  semi-sync replication on (AFTER_SYNC, ${SEMI_SYNC_TIMEOUT_MS} ms); members: ds0 $(members ds0), ds1 $(members ds1)"
    fi
}

# Stop replica data dirs beyond <n> and delete them.
remove_replicas_beyond() {
    local n="$1" name
    for name in $(replica_dirs); do
        (( $(replica_index "$name") > n )) || continue
        log "$name: removing (up asked for $n replicas)"
        stop_server "$name"
        rm -f -- "$(socket_of "$name")"
        rm -rf -- "$(datadir_of "$name")" "$(datadir_of "$name")-tmp"
        rm -f -- "$SANDBOX_DIR/seed/$name.dump.sql"
    done
}

# Run <function> <name> for every name in parallel; fail when one of them did.
run_parallel() {
    local fn="$1" name rc=0
    shift
    local -A jobs=()
    for name in "$@"; do
        "$fn" "$name" &
        jobs[$name]=$!
    done
    for name in "$@"; do
        wait "${jobs[$name]}" || { log "$name: $fn failed"; rc=1; }
    done
    return "$rc"
}

# A server running without a binary log (started by an older sandbox.sh) or with another
# server_id: restart it with this script's flags. Without TLS: say so.
check_server() {
    local name="$1" row
    row="$(sql_on "$name" "SELECT @@log_bin, @@log_slave_updates, @@server_id, @@have_ssl")"
    if [[ "${row%	*}" != "1	1	$(server_id_of "$name")" ]]; then
        log "$name: running without this script's replication flags (log_bin, log_slave_updates, server_id: $(cut -f1-3 <<<"$row" | tr '\t' ,)); restarting it"
        stop_server "$name"
        start_server "$name"
        wait_ready "$name"
        row="$(sql_on "$name" "SELECT @@have_ssl")"
    fi
    if [[ "${row##*	}" != YES ]]; then
        log "$name: running without TLS (started by an older sandbox.sh); 'down' then 'up' enables it"
    fi
}

# up: a replica stops following; a primary becomes a writable one without replication of its
# own, semi-sync off while the seed loads. With replicas it also gets an empty binary log and
# gtid_slave_pos, as the rebuilt replicas do: GTID state from an earlier promote (another
# server's domain, positions ahead of a reset binary log) would otherwise come back later as
# events sent twice or out-of-order errors (gtid_strict_mode). Not without replicas: RESET MASTER
# waits for a binlog checkpoint (up to ~1 s); --binlog-expire-logs-seconds bounds the files.
# Replication connections a `shards move` made and a killed test left behind: the named ones
# (`SHOW ALL SLAVES STATUS`) stopped and forgotten.
forget_named_connections() {
    local name="$1" conn sql=""
    while IFS=$'\t' read -r conn _; do
        [[ -n "$conn" ]] && sql+="STOP SLAVE '$conn'; RESET SLAVE '$conn' ALL;"
    done < <(client "$(port_of "$name")" -N -B -e "SHOW ALL SLAVES STATUS" | cut -f1)
    [[ -z "$sql" ]] || sql_on "$name" "$sql"
}

# The spare ds2: running, empty (no database but an empty `orders`, an empty binary log, no
# replication), the sandbox's accounts.
spare_up() {
    [[ -f "$(datadir_of ds2)/.initialized" ]] || init_datadir ds2
    start_server ds2
    wait_ready ds2
    check_server ds2
    forget_named_connections ds2
    local db drop="SET SESSION sql_log_bin=0;"
    while IFS= read -r db; do
        [[ -n "$db" ]] && drop+=" DROP DATABASE \`$db\`;"
    done < <(user_databases ds2)
    sql_on ds2 "$drop STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF; RESET MASTER; SET GLOBAL gtid_slave_pos = ''"
    # The database the demo's datasources select: a proxy configured with ds2 connects to it.
    sql_on ds2 "CREATE DATABASE orders"
    ensure_accounts ds2
    printf '%s\n' "$DS2_PORT" >"$SANDBOX_DIR/spare-port"
    echo "  ds2 127.0.0.1:$DS2_PORT  the spare: empty, no shards (server_id 3)"
}

detach_replica() { sql_on "$1" "SET GLOBAL read_only = ON; STOP SLAVE; RESET SLAVE ALL"; }
reset_primary() {
    local reset=""
    (( $(replica_count) == 0 )) || reset="RESET MASTER; SET GLOBAL gtid_slave_pos = '';"
    forget_named_connections "$1"
    sql_on "$1" "STOP SLAVE; RESET SLAVE ALL;
        SET GLOBAL rpl_semi_sync_master_enabled = OFF; SET GLOBAL rpl_semi_sync_slave_enabled = OFF;
        SET GLOBAL read_only = OFF; $reset"
}

cmd_up() {
    local replicas="${ROUTEKEY_REPLICAS:-0}" spare=0
    while (( $# > 0 )); do
        case "$1" in
            --replicas) (( $# >= 2 )) || die "usage: $0 up [--replicas N] [--spare]"; replicas="$2"; shift 2 ;;
            --replicas=*) replicas="${1#*=}"; shift ;;
            --spare) spare=1; shift ;;
            *) die "usage: $0 up [--replicas N] [--spare]" ;;
        esac
    done
    [[ "$replicas" =~ ^[0-9]$ ]] || die "the number of replicas must be 0-9, not '$replicas'"
    [[ "$DS0_PORT" != "$DS1_PORT" ]] || die "ROUTEKEY_DS0_PORT and ROUTEKEY_DS1_PORT must differ"
    local k
    for (( k = 1; k <= replicas; k++ )); do
        [[ "$(( DS0_PORT + 10 * k ))" != "$DS1_PORT" && "$(( DS1_PORT + 10 * k ))" != "$DS0_PORT" ]] \
            || die "replica ports (datasource port + 10*k) collide with ROUTEKEY_DS0_PORT/DS1_PORT"
    done
    ensure_installed
    reserve_ports
    ensure_sandbox_dir
    remove_replicas_beyond "$replicas"
    # The canonical topology: dsX is its primary, dsXr1..dsXrN its replicas.
    topology_write "$replicas" ds0 ds1
    printf '%s %s\n' "$DS0_PORT" "$DS1_PORT" >"$PORTS_FILE"
    local name
    local -a servers replicas_list
    mapfile -t servers < <(all_servers)
    mapfile -t replicas_list < <(all_replicas)
    for name in "${servers[@]}"; do
        if [[ -z "$(server_pid "$name")" ]] && ping_port "$(port_of "$name")"; then
            die "$name: port $(port_of "$name") is served by a process that is not this sandbox's $name"
        fi
    done
    ensure_certs
    local -a fresh=()
    for name in "${servers[@]}"; do
        [[ -f "$(datadir_of "$name")/.initialized" ]] || fresh+=("$name")
    done
    (( ${#fresh[@]} == 0 )) || run_parallel init_datadir "${fresh[@]}" || die "initialising data dirs failed"
    for name in "${servers[@]}"; do start_server "$name"; done
    for name in "${servers[@]}"; do wait_ready "$name"; done
    run_parallel check_server "${servers[@]}" || die "checking the servers failed"
    (( ${#replicas_list[@]} == 0 )) || run_parallel detach_replica "${replicas_list[@]}" \
        || die "detaching replicas failed"
    run_parallel reset_primary "${SERVERS[@]}" || die "resetting the primaries failed"
    seed
    run_parallel ensure_accounts "${servers[@]}" || die "creating the accounts failed"
    if (( replicas > 0 )); then
        for name in "${SERVERS[@]}"; do make_primary "$name"; done
        run_parallel rebuild_replica "${replicas_list[@]}" || die "rebuilding replicas failed"
        local pos
        for name in "${replicas_list[@]}"; do
            pos="$(sql_on "$(ds_of "$name")" "SELECT @@gtid_binlog_pos")"
            if ! gtid_wait "$name" "$pos" "$CATCHUP_TIMEOUT"; then
                wait_slave_running "$name" 0 || true
                die "$name: did not reach $(ds_of "$name")'s position $pos within ${CATCHUP_TIMEOUT}s"
            fi
        done
    fi
    summary
    (( spare == 0 )) || spare_up
}

cmd_down() {
    local purge=0
    case "${1:-}" in
        "") ;;
        --purge) purge=1 ;;
        *) die "usage: $0 down [--purge]" ;;
    esac
    local name
    local -a names=()
    if [[ -d "$SANDBOX_DIR" ]]; then
        mapfile -t names < <(replica_dirs)
        names=("${SERVERS[@]}" "${names[@]}")
        [[ -d "$(datadir_of ds2)" ]] && names+=(ds2)
        run_parallel stop_server "${names[@]}" || die "stopping servers failed"
    fi
    if (( purge )) && [[ -d "$SANDBOX_DIR" ]]; then
        [[ -e "$SANDBOX_DIR/$MARKER" ]] || die "$SANDBOX_DIR was not created by this script; not deleting it"
        [[ "$SANDBOX_DIR" != "$REPO_ROOT" && "$SANDBOX_DIR" != "$HOME" ]] || die "refusing to delete $SANDBOX_DIR"
        for name in "${names[@]}"; do rm -f -- "$(socket_of "$name")"; done
        rm -rf -- "$SANDBOX_DIR"
        log "removed $SANDBOX_DIR"
    fi
    echo "routekey sandbox is down"
}

cmd_status() {
    (( $# == 0 )) || die "usage: $0 status"
    local name port pid up=0 role st
    local -a names=()
    [[ -d "$SANDBOX_DIR" ]] && mapfile -t names < <(all_servers)
    (( ${#names[@]} > 0 )) || names=("${SERVERS[@]}")
    [[ -f "$(datadir_of ds2)/.initialized" ]] && names+=(ds2)
    for name in "${names[@]}"; do
        port="$(port_of "$name")"
        pid=""
        [[ -d "$(datadir_of "$name")" ]] && pid="$(server_pid "$name")"
        role=""
        if [[ -n "$pid" ]] && ping_port "$port"; then
            if (( $(replica_count) > 0 )) || [[ "$(primary_of "$(ds_of "$name")")" != "$name" ]]; then
                if [[ "$(primary_of "$(ds_of "$name")")" == "$name" ]]; then
                    role="  primary of $(ds_of "$name")"
                else
                    st="$(slave_status "$name")"
                    role="  replica of 127.0.0.1:$(slave_field "$st" Master_Port), io $(slave_field "$st" Slave_IO_Running), sql $(slave_field "$st" Slave_SQL_Running), behind $(slave_field "$st" Seconds_Behind_Master)s, read_only $(sql_on "$name" 'SELECT @@read_only')"
                fi
            fi
            echo "$name: running  127.0.0.1:$port (pid $pid)$role"
            up=$((up + 1))
        elif [[ -n "$pid" ]]; then
            echo "$name: not answering  127.0.0.1:$port (pid $pid, starting or hung)"
        else
            echo "$name: stopped  127.0.0.1:$port"
        fi
    done
    (( up == ${#names[@]} )) && return 0
    return 3
}

# Name of an initialised server of this sandbox, or die.
known_server() {
    valid_name "$1" || die "unknown server '$1' (ds0, ds1, ds0r1, ds1r1, ...)"
    if { [[ "$1" != ds2 ]] && (( $(replica_index "$1") > $(replica_count) )); } || [[ ! -f "$(datadir_of "$1")/.initialized" ]]; then
        die "$1 is not a server of the sandbox in $SANDBOX_DIR (scripts/sandbox.sh up [--replicas N])"
    fi
}

members() { # members <ds>: 127.0.0.1:port list, primary first, then the rest in canonical order
    local primary name
    local -a out
    primary="$(primary_of "$1")"
    out=("127.0.0.1:$(port_of "$primary")")
    for name in $(servers_of "$1"); do
        [[ "$name" == "$primary" ]] || out+=("127.0.0.1:$(port_of "$name")")
    done
    local IFS=,
    printf '%s\n' "${out[*]}"
}

cmd_members() {
    [[ $# == 1 && ( "$1" == ds0 || "$1" == ds1 ) ]] || die "usage: $0 members ds0|ds1"
    members "$1"
}

cmd_pid() {
    (( $# == 1 )) || die "usage: $0 pid <server>"
    valid_name "$1" || die "unknown server '$1'"
    local pid=""
    [[ -d "$(datadir_of "$1")" ]] && pid="$(server_pid "$1")"
    [[ -n "$pid" ]] || return 3
    printf '%s\n' "$pid"
}

cmd_start() {
    (( $# == 1 )) || die "usage: $0 start <server>"
    local name="$1" primary
    known_server "$name"
    if [[ -n "$(server_pid "$name")" ]]; then
        log "$name: already running (pid $(server_pid "$name")); nothing changed"
        return 0
    fi
    [[ -f "$SANDBOX_DIR/tls/.complete" ]] || die "no certificates in $SANDBOX_DIR/tls (scripts/sandbox.sh up)"
    reserve_ports
    start_server "$name"
    wait_ready "$name"
    primary="$(primary_of "$(ds_of "$name")")"
    if [[ "$name" == "$primary" ]]; then
        make_primary "$name"
        echo "$name: running, primary of $(ds_of "$name")"
    else
        attach "$name" "$primary"
        if [[ -n "$(server_pid "$primary")" ]]; then
            wait_slave_running "$name" 10 || die "$name: does not replicate from $primary"
        else
            log "$name: primary $primary is not running; $name connects to it once it runs"
        fi
        echo "$name: running, read-only replica of $primary"
    fi
}

cmd_promote() {
    (( $# == 1 )) || die "usage: $0 promote <server>"
    local name="$1" ds old st other pos deadline
    known_server "$name"
    ds="$(ds_of "$name")"
    old="$(primary_of "$ds")"
    if [[ "$name" == "$old" ]]; then
        log "$name: already the primary of $ds"
        members "$ds"
        return 0
    fi
    if [[ -z "$(server_pid "$name")" ]] || ! ping_port "$(port_of "$name")"; then die "$name is not running"; fi
    if [[ -n "$(server_pid "$old")" ]]; then
        ping_port "$(port_of "$old")" \
            || die "$ds: primary $old runs (pid $(server_pid "$old")) but does not answer; kill it for a failover"
        # Switchover: no more writes on the old primary, the new one applies all it wrote.
        log "$ds: switchover $old -> $name"
        sql_on "$old" "SET GLOBAL read_only = ON"
        pos="$(gtid_without_server "$(sql_on "$old" "SELECT @@gtid_binlog_pos")" "$(server_id_of "$name")")"
        if ! gtid_wait "$name" "$pos" "$PROMOTE_TIMEOUT"; then
            sql_on "$old" "SET GLOBAL read_only = OFF"
            wait_slave_running "$name" 0 || true
            die "$name did not apply $old's position $pos within ${PROMOTE_TIMEOUT}s; $old stays the primary"
        fi
        make_primary "$name"
        set_primary "$ds" "$name"
        attach "$old" "$name"
    else
        # Failover: the new primary first applies everything it received from the dead one.
        log "$ds: primary $old is not running; failover to $name"
        sql_on "$name" "STOP SLAVE IO_THREAD"
        deadline=$(( SECONDS + PROMOTE_TIMEOUT ))
        while :; do
            st="$(slave_status "$name")"
            [[ "$(slave_field "$st" Slave_SQL_Running)" == Yes ]] \
                || die "$name: SQL thread stopped: $(slave_field "$st" Last_SQL_Error)"
            if [[ "$(slave_field "$st" Master_Log_File)" == "$(slave_field "$st" Relay_Master_Log_File)" \
                  && "$(slave_field "$st" Read_Master_Log_Pos)" == "$(slave_field "$st" Exec_Master_Log_Pos)" ]]; then
                break
            fi
            (( SECONDS < deadline )) || die "$name: relay log not applied within ${PROMOTE_TIMEOUT}s"
            sleep 0.2
        done
        make_primary "$name"
        set_primary "$ds" "$name"
        log "$old: left alone; 'scripts/sandbox.sh start $old' brings it back as a read-only replica of $name"
    fi
    # Every other running server of the datasource follows the new primary.
    for other in $(servers_of "$ds"); do
        [[ "$other" != "$name" && "$other" != "$old" && -n "$(server_pid "$other")" ]] || continue
        attach "$other" "$name"
    done
    for other in $(servers_of "$ds"); do
        [[ "$other" != "$name" && -n "$(server_pid "$other")" ]] || continue
        wait_slave_running "$other" 10 || log "$other: WARNING: not replicating from $name"
    done
    echo "$name: primary of $ds; members $(members "$ds")"
}

# Refuses ports other than the recorded ones while a server of the sandbox runs.
check_ports() {
    [[ -n "$RECORDED_PORTS" && "$RECORDED_PORTS" != "$DS0_PORT $DS1_PORT" ]] || return 0
    local name
    for name in $(all_servers); do
        if [[ -n "$(server_pid "$name")" ]]; then
            die "$SANDBOX_DIR runs on ports $RECORDED_PORTS (ds0 ds1), not $DS0_PORT $DS1_PORT: unset ROUTEKEY_DS0_PORT/ROUTEKEY_DS1_PORT (the recorded ports are used) or stop it first"
        fi
    done
}

main() {
    local cmd="${1:-}"
    shift || true
    [[ "$cmd" == up || "$cmd" == down || "$cmd" == status || "$cmd" == promote || "$cmd" == start \
        || "$cmd" == pid || "$cmd" == members ]] && [[ -d "$SANDBOX_DIR" ]] && check_ports
    case "$cmd" in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        status) cmd_status "$@" ;;
        promote) cmd_promote "$@" ;;
        start) cmd_start "$@" ;;
        pid) cmd_pid "$@" ;;
        members) cmd_members "$@" ;;
        *) echo "usage: $0 up [--replicas N] | down [--purge] | status | promote <server> | start <server> | pid <server> | members ds0|ds1" >&2; exit 2 ;;
    esac
}

main "$@"
