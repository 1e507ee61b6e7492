-- The result of the latest `consumer statement reconcile` of each tenant,
-- channel and Beijing-time day: the number of discrepancies per category,
-- the day's fees, and the SHA-1 of the statement file it compared, so a
-- corrected file imported since shows the day as not reconciled. A rerun of
-- the day replaces the row (the latest run wins). The worker's metrics read
-- it, with ss_statement_file, over the last days (idx_*_day).
CREATE TABLE IF NOT EXISTS ss_statement_reconcile (
  id                   BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id            BIGINT          NOT NULL,
  channel_code         VARBINARY(16)   NOT NULL,
  statement_day        DATE            NOT NULL,
  statement_sha1       CHAR(40)        NOT NULL,
  reconciled_at        DATETIME(6)     NOT NULL,
  line_count           INT             NOT NULL,
  posting_count        INT             NOT NULL,
  missing_in_ledger    INT             NOT NULL,
  missing_in_statement INT             NOT NULL,
  amount_mismatch      INT             NOT NULL,
  status_mismatch      INT             NOT NULL,
  fee_micro_yuan       BIGINT          NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_statement_reconcile_day (tenant_id, channel_code, statement_day),
  KEY idx_statement_reconcile_day (statement_day)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The statements of a day across tenants, for the metrics; only when
-- absent, so running this again after a crash is harmless (see 0002).
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_statement_file' AND index_name = 'idx_statement_file_day') = 0,
  'ALTER TABLE ss_statement_file ADD KEY idx_statement_file_day (statement_day)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
