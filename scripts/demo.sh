#!/usr/bin/env bash
# The demo: the MariaDB sandbox (two servers, twenty shards, seeded orders), a release build,
# and routekey-proxy on 127.0.0.1:3307 in the foreground. Ctrl-C stops the proxy; the sandbox
# keeps running until `scripts/sandbox.sh down`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/sandbox.sh up
cargo build --release --locked
summary=.sandbox/seed-summary.json
ids=$(python3 - "$summary" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
eu = d["channels"]["EU_CHANNEL"]
cn = d["channels"]["CN_CHANNEL"]
print(eu["new_format_ids"][0], eu["legacy_ids"][0], cn["new_format_ids"][1])
PY
)
read -r new_id legacy_id cn_id <<<"$ids"
bin=target/release/routekey-proxy
cat <<TXT

routekey-proxy is starting on 127.0.0.1:3307 in front of the sandbox (config/demo.toml).
Connect with:

    mariadb -h127.0.0.1 -P3307 -uapp -papp orders

and try, one per routing layer:

    -- layer 1, decode: a new order id carries its channel (EU) in bits 17-14
    SELECT order_id, channel, region, amount FROM t_order WHERE order_id = $new_id;
    -- layer 3, index table (then cache): a legacy id, looked up once, cached after
    SELECT order_id, channel, status FROM t_order WHERE order_id = $legacy_id;
    -- layer 2, context: a hint names the channel of an id the index does not know
    SELECT COUNT(*) FROM t_order WHERE order_id = 1741610183681160000 /*route_key='EU_CHANNEL'*/;
    -- unresolved: MySQL's own answer for a row that does not exist, from no guessed shard
    SELECT COUNT(*) FROM t_order WHERE order_id = 1741610183681160000;
    -- a join of binding tables on order_id, over two shards on two servers
    SELECT o.order_id, i.sku FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id
     WHERE o.order_id IN ($new_id, $cn_id);
    -- what an id says about itself
    --   $bin decode $legacy_id

Ctrl-C stops the proxy; scripts/sandbox.sh down stops the sandbox.

TXT
exec "$bin" --config config/demo.toml
