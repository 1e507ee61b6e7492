-- A statement day built from several files (see the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_statement_entry (
  file_id           INTEGER NOT NULL,
  source_sha1       BLOB    NOT NULL,
  line_no           INTEGER NOT NULL,
  merchant_id       BLOB    NOT NULL,
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
  imported_at       TIMESTAMP NOT NULL,
  PRIMARY KEY (file_id, source_sha1, line_no)
);
CREATE INDEX IF NOT EXISTS idx_statement_entry_trade ON ss_statement_entry (channel_trade_no);
INSERT INTO ss_statement_entry (file_id, source_sha1, line_no, merchant_id, kind, channel_trade_no, merchant_order_no,
  refund_no, amount, settled_amount, fee_micro_yuan, status, channel_time, currency, imported_at)
  SELECT l.file_id, f.sha1, l.line_no, '', l.kind, l.channel_trade_no, l.merchant_order_no, l.refund_no, l.amount,
    l.settled_amount, l.fee_micro_yuan, l.status, l.channel_time, l.currency, f.imported_at
  FROM ss_statement_line AS l JOIN ss_statement_file AS f ON f.id = l.file_id;
DROP TABLE ss_statement_line;
ALTER TABLE ss_statement_file ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE ss_statement_reconcile ADD COLUMN statement_version TEXT NOT NULL DEFAULT '';
