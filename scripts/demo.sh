#!/usr/bin/env bash
# The demo: the MariaDB sandbox (two datasources, each a primary and one replica, and a spare; twenty
# shards, seeded orders), a release build, and routekey-proxy on 127.0.0.1:3307
# (ROUTEKEY_LISTEN to change it) in the foreground, with its admin HTTP port on
# 127.0.0.1:9307 (ROUTEKEY_ADMIN_LISTEN). Its configuration (scripts/demo-config.sh --cluster)
# is config/demo.toml with each datasource's `members`, a user app_ro that reads from replicas,
# and ds2, an empty spare server that `shards move` can move shards to.
# Ctrl-C stops the proxy; the sandbox keeps running until `scripts/sandbox.sh down`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

listen="${ROUTEKEY_LISTEN:-127.0.0.1:3307}"
admin="${ROUTEKEY_ADMIN_LISTEN:-127.0.0.1:9307}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-.sandbox}"
scripts/sandbox.sh up --replicas 1 --spare
cargo build --release --locked
config="$(scripts/demo-config.sh --cluster)"
members1="$(scripts/sandbox.sh members ds1)"   # primary first: ds1, then ds1r1
primary1="${members1%%,*}"
replica1="${members1##*,}"
ids=$(python3 - "$sandbox/seed-summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
eu = d["channels"]["EU_CHANNEL"]
cn = d["channels"]["CN_CHANNEL"]
biz = d["channels"]["BIZ_CHANNEL"]
print(eu["new_format_ids"][0], eu["legacy_ids"][0], eu["legacy_ids"][1], cn["new_format_ids"][1],
      biz["new_format_ids"][0])
PY
)
read -r new_id legacy_id legacy_hinted cn_id biz_id <<<"$ids"
# cargo builds into $CARGO_TARGET_DIR when it is set.
bin="${CARGO_TARGET_DIR:-target}/release/routekey-proxy"
# A second terminal reaches this sandbox by its folder (its ports are recorded there).
sbx_env=""
[[ -z "${ROUTEKEY_SANDBOX_DIR:-}" ]] || sbx_env="ROUTEKEY_SANDBOX_DIR=$ROUTEKEY_SANDBOX_DIR "
cat <<TXT

routekey-proxy is starting on $listen in front of the sandbox ($config).
Connect with (-c keeps comments, so route hints reach the proxy):

    mariadb -c -h${listen%:*} -P${listen##*:} -uapp -papp orders

and try, one per routing layer (SHOW ROUTEKEY STATS shows which layer answered):

    -- layer 1, decode: a new order id carries its channel (EU) in bits 17-14
    SELECT order_id, channel, region, amount FROM t_order WHERE order_id = $new_id;
    -- layer 3, the index table: a legacy id is looked up once; run it twice, the second
    -- answer comes from the cache (resolved_by_index, then resolved_by_cache)
    SELECT order_id, channel, status FROM t_order WHERE order_id = $legacy_id;
    -- layer 2, context: the statement names the channel, so the index is not asked
    SELECT order_id, status FROM t_order WHERE order_id = $legacy_hinted /*route_key='EU_CHANNEL'*/;
    -- unresolved: MySQL's own answer for a row that does not exist, from no guessed shard
    SELECT COUNT(*) FROM t_order WHERE order_id = 1741610183681160000;
    -- ... and a write the proxy cannot place is refused (error 1526), never guessed
    UPDATE t_order SET status = 'PAID' WHERE order_id = 1741610183681160000;
    -- a join of binding tables on order_id, over two shards on two servers
    SELECT o.order_id, i.sku FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id
     WHERE o.order_id IN ($new_id, $cn_id);
    SHOW ROUTEKEY STATS;
    -- new order ids: one for a region, or filled in by an INSERT that names no order_id
    SELECT NEXT_ORDER_ID('GB');
    INSERT INTO t_order (channel, region, user_id, amount, status, created_at)
      VALUES ('EU_CHANNEL', 'FR', 7, 12.50, 'NEW', NOW());
    SELECT LAST_INSERT_ID();

Replicas: each datasource is a primary and a replica (ds1: $primary1, ds1r1: $replica1);
the proxy probes them every second and writes where read_only is off. app_ro (password app)
reads from replicas:

    mariadb -c -h${listen%:*} -P${listen##*:} -uapp_ro -papp orders

    SHOW ROUTEKEY TOPOLOGY;   -- every member: role, state, lag, GTID position, reads, writes
    -- the member column: $replica1 (replica)
    EXPLAIN ROUTE SELECT order_id, status FROM t_order WHERE order_id = $biz_id;
    SELECT order_id, channel, status FROM t_order WHERE order_id = $biz_id;

A switchover: in another terminal  ${sbx_env}scripts/sandbox.sh promote ds1r1 , then SHOW ROUTEKEY
TOPOLOGY again: within a second $replica1 is ds1's primary; $primary1 turns replica and
serves reads two probes later, when the EXPLAIN ROUTE above names it.
${sbx_env}scripts/sandbox.sh promote ds1  switches back (and the next scripts/demo.sh restores
the topology anyway). The sandbox's commands use the ports it was started on (<sandbox>/ports).

Moving shards while you query: BIZ_CHANNEL's shards 12-15 from ds1 to ds2, an empty spare server
(copy, catch-up, checksums, a cut-over that pauses writes for a moment; docs/operations.md):

    $bin --config $config shards move --shards 12-15 --to ds2
    SHOW ROUTEKEY SHARDS;    -- map_version 2: shards 12-15 on ds2
    $bin --config $config shards move --shards 12-15 --reverse    (back; then --finish)

Order ids over HTTP:  curl -s -XPOST $admin/v1/order-ids -d '{"region":"GB","count":3}' -H 'content-type: application/json'
Metrics and probes:   curl -s $admin/metrics | grep routekey_route_resolutions;  curl -s $admin/readyz
What an id says about itself:  $bin --config $config decode $legacy_id
Ctrl-C (or SIGTERM) drains and stops the proxy; ${sbx_env}scripts/sandbox.sh down stops the sandbox.

TXT
exec "$bin" --config "$config" --listen "$listen" --admin-listen "$admin"
