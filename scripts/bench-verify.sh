#!/usr/bin/env bash
# What `verify` and `index backfill --dry-run` cost as tables grow (a benchmark, not a test):
# fills copies of the 20 shards (database rk_bench_verify, index in rk_bench_verify_meta) with
# ROWS orders each time, a quarter of them legacy ids with index rows, one item per order,
# then runs the release binary over them and prints rows read, rows/s and peak resident
# memory (VmHWM, from /usr/bin/time); then empties the index table and runs verify (a
# finding per legacy order), backfill, and verify again. Memory should not grow with ROWS.
#
#   scripts/bench-verify.sh [ROWS...]        (default: 100000 1000000)
#
# Needs the sandbox (scripts/sandbox.sh up); drops its databases at exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sizes=("${@:-100000 1000000}")
read -r -a sizes <<<"${sizes[*]}"
ds0="${ROUTEKEY_DS0_PORT:-33061}"
ds1="${ROUTEKEY_DS1_PORT:-33062}"
db=rk_bench_verify
meta=rk_bench_verify_meta
work="$(mktemp -d)"
sql() { mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$1" -uroot -N -e "$2"; }
cleanup() {
    sql "$ds0" "DROP DATABASE IF EXISTS $db; DROP DATABASE IF EXISTS $meta" || true
    sql "$ds1" "DROP DATABASE IF EXISTS $db" || true
    rm -rf -- "$work"
}
trap cleanup EXIT
command -v /usr/bin/time >/dev/null || { apt-get install -y -qq time >/dev/null; }

cargo build --release --quiet
sed -e "s/\"order_shards\"/\"$db\"/" -e "s/\"order_meta\"/\"$meta\"/" \
    -e "s/127.0.0.1:33061/127.0.0.1:$ds0/" -e "s/127.0.0.1:33062/127.0.0.1:$ds1/" \
    config/demo.toml >"$work/bench.toml"

codes=(5 2 1 3 4)   # route key codes of the channels by base shard 0, 4, 8, 12, 16
names=(EU_CHANNEL GLOBAL_CHANNEL CN_CHANNEL BIZ_CHANNEL CORP_CHANNEL)
new_t0=$((1751328000000 - 1288834974657))   # 2025-07-01, after every route_key_since
old_t0=$((1550000000000 - 1288834974657))   # 2019, a classic Snowflake id

fill() { # fill <rows in total>
    local per=$(($1 / 20)) legacy s port ch
    legacy=$((per / 4))
    sql "$ds0" "DROP DATABASE IF EXISTS $db; DROP DATABASE IF EXISTS $meta; CREATE DATABASE $db; CREATE DATABASE $meta;
        CREATE TABLE $meta.t_order_index LIKE order_meta.t_order_index"
    sql "$ds1" "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
    for s in $(seq 0 19); do
        port=$ds0; ((s >= 10)) && port=$ds1
        ch=$((s / 4))
        sql "$port" "CREATE TABLE $db.t_order_$s LIKE order_shards.t_order_$s;
            CREATE TABLE $db.t_order_item_$s LIKE order_shards.t_order_item_$s;
            INSERT INTO $db.t_order_$s (order_id, channel, region, user_id, amount, status, created_at)
              SELECT (($new_t0 + seq) << 23) | (1 << 18) | (${codes[$ch]} << 14) | $((s % 4)),
                     '${names[$ch]}', 'GB', seq, 1.00, 'NEW', NOW(3) FROM $db.seq_1_to_$((per - legacy));
            INSERT INTO $db.t_order_$s (order_id, channel, region, user_id, amount, status, created_at)
              SELECT (($old_t0 + seq * 5 + $ch) << 22) | $((s % 4)),
                     '${names[$ch]}', 'GB', seq, 1.00, 'NEW', NOW(3) FROM $db.seq_1_to_$legacy;
            INSERT INTO $db.t_order_item_$s SELECT order_id, 1, 'SKU', 1, 1.00 FROM $db.t_order_$s;"
        sql "$ds0" "INSERT INTO $meta.t_order_index (order_id, channel)
              SELECT (($old_t0 + seq * 5 + $ch) << 22) | $((s % 4)), '${names[$ch]}' FROM $meta.seq_1_to_$legacy"
    done
}

run() { # run <label> <args...>: prints rows/s and VmHWM
    local label="$1"; shift
    /usr/bin/time -f '%e %M' -o "$work/time" target/release/routekey-proxy --config "$work/bench.toml" "$@" \
        >"$work/out" 2>"$work/err" || [[ $? == 1 ]] || { cat "$work/out" "$work/err" >&2; exit 1; }
    read -r secs kib < <(tail -n1 "$work/time")
    printf '%-28s %6s s %4s MiB peak RSS  %s; %s\n' "$label" "$secs" "$((kib / 1024))" \
        "$(grep -m1 -E 'rows read|rows scanned' "$work/out" | sed 's/^ *//')" \
        "$(grep -m1 -E '^total|needs a person' "$work/out" | sed 's/  */ /g')"
}

for n in "${sizes[@]}"; do
    echo "== $n orders ($((n / 4)) legacy with index rows), $n items" >&2
    fill "$n"
    run "verify ($n)" verify
    run "backfill --dry-run ($n)" index backfill --dry-run
    # The legacy tail before a backfill: every index row missing, a finding per legacy order.
    sql "$ds0" "TRUNCATE $meta.t_order_index"
    run "verify, no index ($n)" verify --report "$work/findings.jsonl"
    run "backfill ($n)" index backfill
    run "verify after ($n)" verify
done
