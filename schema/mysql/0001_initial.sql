-- paycallback schema, version 1. MySQL 8.4 and MariaDB 10.11 alike: only SQL
-- both accept. Every key column and every unique index built from channel
-- identifiers is VARBINARY, so keys compare byte for byte ("rf-1" <> "RF-1",
-- "a" <> "a ").

-- The claim table. UNIQUE KEY uk_idem is the only judge of "already handled".
-- Rows are never deleted; retention only clears event_json and last_error.
CREATE TABLE IF NOT EXISTS ss_channel_idempotent (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id        BIGINT          NOT NULL,
  idempotent_key   VARBINARY(191)  NOT NULL,
  event_type       VARCHAR(32)     NOT NULL,
  status           VARCHAR(16)     NOT NULL,
  settle_outcome   VARCHAR(16)     NULL,
  fingerprint      CHAR(64)        NOT NULL,
  event_json       MEDIUMTEXT      NULL,
  source_topic     VARCHAR(249)    NOT NULL DEFAULT '',
  source_partition INT             NOT NULL DEFAULT -1,
  source_offset    BIGINT          NOT NULL DEFAULT -1,
  attempts         INT             NOT NULL DEFAULT 0,
  last_error       VARCHAR(1024)   NULL,
  dead_lettered_at DATETIME(6)     NULL,
  created_at       DATETIME(6)     NOT NULL,
  settled_at       DATETIME(6)     NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_idem (tenant_id, idempotent_key),
  KEY idx_status_created (status, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One row per (tenant, channel, channel trade no).
CREATE TABLE IF NOT EXISTS ss_channel_order (
  id                    BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id             BIGINT          NOT NULL,
  channel_code          VARBINARY(16)   NOT NULL,
  channel_trade_no      VARBINARY(64)   NOT NULL,
  merchant_order_no     VARBINARY(64)   NOT NULL,
  amount                BIGINT          NOT NULL,
  paid_amount           BIGINT          NOT NULL DEFAULT 0,
  refunded_amount       BIGINT          NOT NULL DEFAULT 0,
  max_cumulative_refund BIGINT          NOT NULL DEFAULT 0,
  currency              CHAR(3)         NOT NULL,
  status                VARCHAR(24)     NOT NULL,
  paid_at               DATETIME(6)     NULL,
  last_refund_at        DATETIME(6)     NULL,
  created_at            DATETIME(6)     NOT NULL,
  updated_at            DATETIME(6)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_order (tenant_id, channel_code, channel_trade_no),
  KEY idx_order_status (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Double-entry postings: inserted only, never updated or deleted. The unique
-- key makes a second posting for one event impossible even if a bug bypassed
-- the claim.
CREATE TABLE IF NOT EXISTS ss_ledger_entry (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id        BIGINT          NOT NULL,
  idempotent_key   VARBINARY(191)  NOT NULL,
  channel_code     VARBINARY(16)   NOT NULL,
  channel_trade_no VARBINARY(64)   NOT NULL,
  account          VARBINARY(64)   NOT NULL,
  direction        VARCHAR(6)      NOT NULL,
  amount           BIGINT          NOT NULL,
  currency         CHAR(3)         NOT NULL,
  created_at       DATETIME(6)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_ledger_source (tenant_id, idempotent_key, account, direction),
  KEY idx_ledger_trade (tenant_id, channel_code, channel_trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Refund pre-registration, committed before the channel is asked to refund.
CREATE TABLE IF NOT EXISTS ss_refund_request (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id        BIGINT          NOT NULL,
  channel_code     VARBINARY(16)   NOT NULL,
  channel_trade_no VARBINARY(64)   NOT NULL,
  refund_no        VARBINARY(64)   NOT NULL,
  amount           BIGINT          NOT NULL,
  status           VARCHAR(16)     NOT NULL,
  idempotent_key   VARBINARY(191)  NULL,
  created_at       DATETIME(6)     NOT NULL,
  updated_at       DATETIME(6)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_refund_request (tenant_id, channel_code, channel_trade_no, refund_no),
  KEY idx_refund_status (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
