-- The querier's work and its log (see the mysql dialect).
ALTER TABLE ss_payment_registration ADD COLUMN query_next_at TIMESTAMP NULL;
ALTER TABLE ss_payment_registration ADD COLUMN query_stopped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ss_payment_registration ADD COLUMN query_retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ss_payment_registration ADD COLUMN query_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ss_payment_registration ADD COLUMN lease_owner BLOB NULL;
ALTER TABLE ss_payment_registration ADD COLUMN lease_token BLOB NULL;
ALTER TABLE ss_payment_registration ADD COLUMN lease_until TIMESTAMP NULL;
ALTER TABLE ss_refund_request ADD COLUMN query_next_at TIMESTAMP NULL;
ALTER TABLE ss_refund_request ADD COLUMN query_stopped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ss_refund_request ADD COLUMN query_retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ss_refund_request ADD COLUMN query_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ss_refund_request ADD COLUMN lease_owner BLOB NULL;
ALTER TABLE ss_refund_request ADD COLUMN lease_token BLOB NULL;
ALTER TABLE ss_refund_request ADD COLUMN lease_until TIMESTAMP NULL;
CREATE INDEX IF NOT EXISTS idx_refund_query ON ss_refund_request (status, query_stopped, created_at);
CREATE INDEX IF NOT EXISTS idx_payment_registration_query ON ss_payment_registration (status, query_stopped, query_next_at);
CREATE TABLE IF NOT EXISTS ss_query_log (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id         INTEGER   NOT NULL,
  channel_code      BLOB      NOT NULL,
  kind              TEXT      NOT NULL,
  merchant_id       BLOB      NOT NULL,
  merchant_order_no BLOB      NOT NULL,
  channel_trade_no  BLOB      NOT NULL,
  refund_no         BLOB      NOT NULL,
  asked_at          TIMESTAMP NOT NULL,
  answer            TEXT      NOT NULL,
  raw_state         TEXT      NOT NULL,
  detail            TEXT      NOT NULL,
  published         INTEGER   NOT NULL,
  querier           BLOB      NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_query_log_order ON ss_query_log (tenant_id, channel_code, merchant_order_no);
CREATE INDEX IF NOT EXISTS idx_query_log_trade ON ss_query_log (tenant_id, channel_code, channel_trade_no);
