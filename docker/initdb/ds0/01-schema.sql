-- routekey-proxy compose quickstart, datasource ds0: schema.
-- Same databases and DDL as scripts/seed.py (the local sandbox); a handful of its
-- deterministic rows. Run once by the mariadb image on an empty data volume.

SET NAMES utf8mb4 COLLATE utf8mb4_general_ci;

CREATE DATABASE IF NOT EXISTS order_shards DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE DATABASE IF NOT EXISTS orders DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE DATABASE IF NOT EXISTS order_meta DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;

CREATE TABLE order_shards.t_order_0 (
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
CREATE TABLE order_shards.t_order_item_0 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_1 (
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
CREATE TABLE order_shards.t_order_item_1 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_2 (
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
CREATE TABLE order_shards.t_order_item_2 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_3 (
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
CREATE TABLE order_shards.t_order_item_3 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_4 (
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
CREATE TABLE order_shards.t_order_item_4 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_5 (
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
CREATE TABLE order_shards.t_order_item_5 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_6 (
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
CREATE TABLE order_shards.t_order_item_6 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_7 (
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
CREATE TABLE order_shards.t_order_item_7 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_8 (
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
CREATE TABLE order_shards.t_order_item_8 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE order_shards.t_order_9 (
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
CREATE TABLE order_shards.t_order_item_9 (
  order_id BIGINT UNSIGNED NOT NULL,
  item_no INT UNSIGNED NOT NULL,
  sku VARCHAR(32) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, item_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- unsharded table of the logical database (passes through to ds0)
CREATE TABLE orders.t_merchant (
  merchant_id INT UNSIGNED PRIMARY KEY,
  name VARCHAR(64) NOT NULL,
  country CHAR(2) NOT NULL,
  created_at DATETIME NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- index table of legacy ids (order_id -> channel)
CREATE TABLE order_meta.t_order_index (
  order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  channel VARCHAR(32) NOT NULL,
  created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
