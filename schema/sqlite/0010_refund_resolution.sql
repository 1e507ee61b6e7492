-- Operators' decisions on refund registration mismatches (see the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_refund_resolution (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id        INTEGER NOT NULL,
  channel_code     BLOB    NOT NULL,
  channel_trade_no BLOB    NOT NULL,
  refund_no        BLOB    NOT NULL,
  check_name       BLOB    NOT NULL,
  fingerprint      BLOB    NOT NULL,
  named_refund_no  BLOB    NOT NULL,
  detail           TEXT    NOT NULL,
  note             TEXT    NOT NULL,
  resolved_by      TEXT    NOT NULL,
  resolved_at      TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_refund_resolution ON ss_refund_resolution (tenant_id, channel_code, channel_trade_no, refund_no, check_name, fingerprint);
