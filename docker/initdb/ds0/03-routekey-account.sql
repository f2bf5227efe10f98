-- routekey-proxy compose quickstart, datasource ds0: the proxy's backend account.
-- mysql_native_password (the proxy's backend handshake), all privileges on the databases the
-- proxy uses and on nothing else. The password is docker/config/compose.toml's.
CREATE USER IF NOT EXISTS 'routekey'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('routekey');
GRANT ALL PRIVILEGES ON order_shards.* TO 'routekey'@'%';
GRANT ALL PRIVILEGES ON orders.* TO 'routekey'@'%';
GRANT ALL PRIVILEGES ON order_meta.* TO 'routekey'@'%';
FLUSH PRIVILEGES;
