-- The latest statement reconciliation of each tenant, channel and day (see
-- the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_statement_reconcile (
  id                   INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id            INTEGER NOT NULL,
  channel_code         BLOB    NOT NULL,
  statement_day        TEXT    NOT NULL,
  statement_sha1       TEXT    NOT NULL,
  reconciled_at        TIMESTAMP NOT NULL,
  line_count           INTEGER NOT NULL,
  posting_count        INTEGER NOT NULL,
  missing_in_ledger    INTEGER NOT NULL,
  missing_in_statement INTEGER NOT NULL,
  amount_mismatch      INTEGER NOT NULL,
  status_mismatch      INTEGER NOT NULL,
  fee_micro_yuan       INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_statement_reconcile_day ON ss_statement_reconcile (tenant_id, channel_code, statement_day);
CREATE INDEX IF NOT EXISTS idx_statement_reconcile_day ON ss_statement_reconcile (statement_day);
CREATE INDEX IF NOT EXISTS idx_statement_file_day ON ss_statement_file (statement_day);
