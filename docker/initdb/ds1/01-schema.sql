-- routekey-proxy compose quickstart, datasource ds1: schema.
-- Same databases and DDL as scripts/seed.py (the local sandbox); a handful of its
-- deterministic rows. Run once by the mariadb image on an empty data volume.

SET NAMES utf8mb4 COLLATE utf8mb4_general_ci;

CREATE DATABASE IF NOT EXISTS order_shards DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE DATABASE IF NOT EXISTS orders DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;

CREATE TABLE order_shards.t_order_10 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_10 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_11 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_11 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_12 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_12 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_13 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_13 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_14 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_14 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_15 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_15 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_16 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_16 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_17 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_17 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_18 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_18 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_19 (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  region CHAR(2) NOT NULL,
  user_id BIGINT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  note VARCHAR(255) CHARACTER SET utf8mb4 NULL,
  created_at DATETIME(3) NOT NULL,
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_item_19 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
