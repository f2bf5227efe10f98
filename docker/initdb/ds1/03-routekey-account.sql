-- routekey-proxy compose quickstart, datasource ds1: the proxy's backend account.
-- mysql_native_password (the proxy's backend handshake), all privileges on the databases the
-- proxy uses and on nothing else. The password is docker/config/compose.toml's.
CREATE USER IF NOT EXISTS 'routekey'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('routekey');
GRANT ALL PRIVILEGES ON order_shards.* TO 'routekey'@'%';
GRANT ALL PRIVILEGES ON orders.* TO 'routekey'@'%';
-- The decision table of transactions across datasources (`[transactions]`: database
-- `routekey`, created by the proxy if missing).
GRANT ALL PRIVILEGES ON routekey.* TO 'routekey'@'%';
-- SHOW SLAVE STATUS, which the proxy's probes of a datasource with `members` read (a server
-- of its own needs it too once it gets replicas). No SUPER, no READ_ONLY ADMIN: read_only
-- must stop this account on a replica.
GRANT SLAVE MONITOR ON *.* TO 'routekey'@'%';
FLUSH PRIVILEGES;
