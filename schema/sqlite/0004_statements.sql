-- Channel statements (see the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_statement_file (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id     INTEGER NOT NULL,
  channel_code  BLOB    NOT NULL,
  statement_day TEXT    NOT NULL,
  format        TEXT    NOT NULL,
  sha1          TEXT    NOT NULL,
  line_count    INTEGER NOT NULL,
  imported_at   TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_statement_day ON ss_statement_file (tenant_id, channel_code, statement_day);

CREATE TABLE IF NOT EXISTS ss_statement_line (
  file_id           INTEGER NOT NULL,
  line_no           INTEGER NOT NULL,
  kind              TEXT    NOT NULL,
  channel_trade_no  BLOB    NOT NULL,
  merchant_order_no BLOB    NOT NULL,
  refund_no         BLOB    NOT NULL,
  amount            INTEGER NOT NULL,
  settled_amount    INTEGER NOT NULL,
  fee_micro_yuan    INTEGER NOT NULL,
  status            TEXT    NOT NULL,
  channel_time      TIMESTAMP NOT NULL,
  currency          TEXT    NOT NULL,
  PRIMARY KEY (file_id, line_no)
);
CREATE INDEX IF NOT EXISTS idx_statement_trade ON ss_statement_line (channel_trade_no);
