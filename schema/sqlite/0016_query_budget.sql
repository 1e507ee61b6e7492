-- The querier's per-merchant budget (see the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_query_budget (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id     INTEGER   NOT NULL,
  channel_code  BLOB      NOT NULL,
  merchant_id   BLOB      NOT NULL,
  milli_tokens  INTEGER   NOT NULL,
  updated_at    TIMESTAMP NOT NULL,
  backoff_until TIMESTAMP NULL,
  backoffs      INTEGER   NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_query_budget ON ss_query_budget (tenant_id, channel_code, merchant_id);
