#!/usr/bin/env bash
# The demo: the MariaDB sandbox (two servers, twenty shards, seeded orders), a release build,
# and routekey-proxy on 127.0.0.1:3307 (ROUTEKEY_LISTEN to change it) in the foreground,
# with its admin HTTP port on 127.0.0.1:9307 (ROUTEKEY_ADMIN_LISTEN).
# Ctrl-C stops the proxy; the sandbox keeps running until `scripts/sandbox.sh down`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

listen="${ROUTEKEY_LISTEN:-127.0.0.1:3307}"
admin="${ROUTEKEY_ADMIN_LISTEN:-127.0.0.1:9307}"
sandbox="${ROUTEKEY_SANDBOX_DIR:-.sandbox}"
scripts/sandbox.sh up
cargo build --release --locked
config="$(scripts/demo-config.sh)"
ids=$(python3 - "$sandbox/seed-summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
eu = d["channels"]["EU_CHANNEL"]
cn = d["channels"]["CN_CHANNEL"]
print(eu["new_format_ids"][0], eu["legacy_ids"][0], eu["legacy_ids"][1], cn["new_format_ids"][1])
PY
)
read -r new_id legacy_id legacy_hinted cn_id <<<"$ids"
# cargo builds into $CARGO_TARGET_DIR when it is set.
bin="${CARGO_TARGET_DIR:-target}/release/routekey-proxy"
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

Order ids over HTTP:  curl -s -XPOST $admin/v1/order-ids -d '{"region":"GB","count":3}' -H 'content-type: application/json'
Metrics and probes:   curl -s $admin/metrics | grep routekey_route_resolutions;  curl -s $admin/readyz
What an id says about itself:  $bin --config $config decode $legacy_id
Ctrl-C (or SIGTERM) drains and stops the proxy; scripts/sandbox.sh down stops the sandbox.

TXT
exec "$bin" --config "$config" --listen "$listen" --admin-listen "$admin"
