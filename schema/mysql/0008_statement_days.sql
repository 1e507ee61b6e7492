-- A statement day built from several files. ss_statement_file stays the
-- row of one tenant, channel and Beijing-time day (the file last imported
-- that changed it: format, sha1); the lines held for the day move to
-- ss_statement_entry, each with the file it came from (source_sha1,
-- line_no: its number in that file) and the merchant it names, so that
-- Shouqianba query responses merge per order across files, and a WeChat or
-- Alipay bill replaces its own merchant's lines only. version is the
-- SHA-256 of the day's lines held (sorted canonical encoding), what
-- `consumer statement reconcile` records in ss_statement_reconcile
-- (statement_version) and --publish-missing compares. Lines imported
-- before name no merchant (merchant_id ''): a bill for the day replaces
-- them with its own.
-- Each step runs only when still needed (MySQL 8.4 has no ADD COLUMN IF
-- NOT EXISTS), so running this again after a crash is harmless (see 0002).
CREATE TABLE IF NOT EXISTS ss_statement_entry (
  file_id           BIGINT UNSIGNED NOT NULL,
  source_sha1       VARBINARY(40)   NOT NULL,
  line_no           INT             NOT NULL,
  merchant_id       VARBINARY(64)   NOT NULL,
  kind              VARCHAR(16)     NOT NULL,
  channel_trade_no  VARBINARY(64)   NOT NULL,
  merchant_order_no VARBINARY(64)   NOT NULL,
  refund_no         VARBINARY(64)   NOT NULL,
  amount            BIGINT          NOT NULL,
  settled_amount    BIGINT          NOT NULL,
  fee_micro_yuan    BIGINT          NOT NULL,
  status            VARCHAR(32)     NOT NULL,
  channel_time      DATETIME(6)     NOT NULL,
  currency          CHAR(3)         NOT NULL,
  imported_at       DATETIME(6)     NOT NULL,
  PRIMARY KEY (file_id, source_sha1, line_no),
  KEY idx_statement_entry_trade (channel_trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.tables
  WHERE table_schema = DATABASE() AND table_name = 'ss_statement_line') = 1,
  'INSERT IGNORE INTO ss_statement_entry (file_id, source_sha1, line_no, merchant_id, kind, channel_trade_no, merchant_order_no, refund_no, amount, settled_amount, fee_micro_yuan, status, channel_time, currency, imported_at) SELECT l.file_id, f.sha1, l.line_no, '''', l.kind, l.channel_trade_no, l.merchant_order_no, l.refund_no, l.amount, l.settled_amount, l.fee_micro_yuan, l.status, l.channel_time, l.currency, f.imported_at FROM ss_statement_line AS l JOIN ss_statement_file AS f ON f.id = l.file_id',
  'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

DROP TABLE IF EXISTS ss_statement_line;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_statement_file' AND column_name = 'version') = 0,
  'ALTER TABLE ss_statement_file ADD COLUMN version CHAR(64) NOT NULL DEFAULT ''''', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_statement_reconcile' AND column_name = 'statement_version') = 0,
  'ALTER TABLE ss_statement_reconcile ADD COLUMN statement_version CHAR(64) NOT NULL DEFAULT ''''', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
