-- Batch claims: a multi-row INSERT … ON DUPLICATE KEY UPDATE id = id sets
-- batch_token only on the rows it inserts; reading the token back tells
-- which claims the statement made. The unique index still decides each row.
-- The column, then its index: TiDB refuses an index on a column added by
-- the same ALTER. Each step runs only when its column or index is absent
-- (MySQL 8.4 has no ADD COLUMN IF NOT EXISTS), so running this again after
-- a crash between them is harmless on MySQL, MariaDB and TiDB alike.
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_channel_idempotent' AND column_name = 'batch_token') = 0,
  'ALTER TABLE ss_channel_idempotent ADD COLUMN batch_token VARBINARY(16) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_channel_idempotent' AND index_name = 'idx_batch_token') = 0,
  'ALTER TABLE ss_channel_idempotent ADD KEY idx_batch_token (batch_token)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
