-- Settled events for the systems downstream: the trade's counter on its
-- order row and the transactional outbox (see the mysql dialect).
ALTER TABLE ss_channel_order ADD COLUMN settled_seq INTEGER NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS ss_settled_outbox (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id        INTEGER NOT NULL,
  idempotent_key   BLOB    NOT NULL,
  channel_code     BLOB    NOT NULL,
  channel_trade_no BLOB    NOT NULL,
  trade_seq        INTEGER NOT NULL,
  event_type       TEXT    NOT NULL,
  source           TEXT    NOT NULL,
  value            BLOB    NOT NULL,
  settled_at       TIMESTAMP NOT NULL,
  published_at     TIMESTAMP NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_settled_event ON ss_settled_outbox (tenant_id, idempotent_key);
CREATE UNIQUE INDEX IF NOT EXISTS uk_settled_trade_seq ON ss_settled_outbox (tenant_id, channel_code, channel_trade_no, trade_seq);
CREATE INDEX IF NOT EXISTS idx_settled_pending ON ss_settled_outbox (published_at, settled_at, tenant_id, channel_code, channel_trade_no, trade_seq);
CREATE INDEX IF NOT EXISTS idx_settled_time ON ss_settled_outbox (settled_at, tenant_id, channel_code);
