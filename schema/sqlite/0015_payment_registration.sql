-- Payment registrations (see the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_payment_registration (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id         INTEGER NOT NULL,
  channel_code      BLOB    NOT NULL,
  merchant_id       BLOB    NOT NULL,
  merchant_order_no BLOB    NOT NULL,
  amount            INTEGER NOT NULL,
  currency          TEXT    NOT NULL,
  status            TEXT    NOT NULL,
  channel_trade_no  BLOB    NULL,
  created_at        TIMESTAMP NOT NULL,
  expires_at        TIMESTAMP NOT NULL,
  registered_at     TIMESTAMP NOT NULL,
  updated_at        TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_payment_registration ON ss_payment_registration (tenant_id, channel_code, merchant_order_no);
CREATE INDEX IF NOT EXISTS idx_payment_registration_open ON ss_payment_registration (status, registered_at);
CREATE INDEX IF NOT EXISTS idx_order_merchant_no ON ss_channel_order (tenant_id, channel_code, merchant_order_no);
