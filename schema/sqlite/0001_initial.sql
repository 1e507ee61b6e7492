-- paycallback schema, version 1, embedded SQLite dialect (the demo). BLOB
-- columns compare with memcmp, so keys compare byte for byte as in MySQL's
-- VARBINARY. Times are stored as bun writes time.Time for SQLite.

CREATE TABLE IF NOT EXISTS ss_channel_idempotent (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id        INTEGER NOT NULL,
  idempotent_key   BLOB    NOT NULL CHECK (length(idempotent_key) <= 191),
  event_type       TEXT    NOT NULL,
  status           TEXT    NOT NULL,
  settle_outcome   TEXT    NULL,
  fingerprint      TEXT    NOT NULL,
  event_json       TEXT    NULL,
  source_topic     TEXT    NOT NULL DEFAULT '',
  source_partition INTEGER NOT NULL DEFAULT -1,
  source_offset    INTEGER NOT NULL DEFAULT -1,
  attempts         INTEGER NOT NULL DEFAULT 0,
  last_error       TEXT    NULL,
  dead_lettered_at TIMESTAMP NULL,
  created_at       TIMESTAMP NOT NULL,
  settled_at       TIMESTAMP NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_idem ON ss_channel_idempotent (tenant_id, idempotent_key);
CREATE INDEX IF NOT EXISTS idx_status_created ON ss_channel_idempotent (status, created_at);

CREATE TABLE IF NOT EXISTS ss_channel_order (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id             INTEGER NOT NULL,
  channel_code          BLOB    NOT NULL,
  channel_trade_no      BLOB    NOT NULL,
  merchant_order_no     BLOB    NOT NULL,
  amount                INTEGER NOT NULL,
  paid_amount           INTEGER NOT NULL DEFAULT 0,
  refunded_amount       INTEGER NOT NULL DEFAULT 0,
  max_cumulative_refund INTEGER NOT NULL DEFAULT 0,
  currency              TEXT    NOT NULL,
  status                TEXT    NOT NULL,
  paid_at               TIMESTAMP NULL,
  last_refund_at        TIMESTAMP NULL,
  created_at            TIMESTAMP NOT NULL,
  updated_at            TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_order ON ss_channel_order (tenant_id, channel_code, channel_trade_no);
CREATE INDEX IF NOT EXISTS idx_order_status ON ss_channel_order (status, updated_at);

CREATE TABLE IF NOT EXISTS ss_ledger_entry (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id        INTEGER NOT NULL,
  idempotent_key   BLOB    NOT NULL,
  channel_code     BLOB    NOT NULL,
  channel_trade_no BLOB    NOT NULL,
  account          BLOB    NOT NULL,
  direction        TEXT    NOT NULL,
  amount           INTEGER NOT NULL,
  currency         TEXT    NOT NULL,
  created_at       TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_ledger_source ON ss_ledger_entry (tenant_id, idempotent_key, account, direction);
CREATE INDEX IF NOT EXISTS idx_ledger_trade ON ss_ledger_entry (tenant_id, channel_code, channel_trade_no);

CREATE TABLE IF NOT EXISTS ss_refund_request (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id        INTEGER NOT NULL,
  channel_code     BLOB    NOT NULL,
  channel_trade_no BLOB    NOT NULL,
  refund_no        BLOB    NOT NULL,
  amount           INTEGER NOT NULL,
  status           TEXT    NOT NULL,
  idempotent_key   BLOB    NULL,
  created_at       TIMESTAMP NOT NULL,
  updated_at       TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_refund_request ON ss_refund_request (tenant_id, channel_code, channel_trade_no, refund_no);
CREATE INDEX IF NOT EXISTS idx_refund_status ON ss_refund_request (status, updated_at);
