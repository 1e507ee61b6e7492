-- The channel's own time of each claimed event, kept in a column: a
-- statement of the channel's day is reconciled against it, and purge may
-- clear event_json. NULL for claims made before this migration (their
-- event_json still holds it until purged). The column, then its index,
-- each only when absent: TiDB refuses an index on a column added by the
-- same ALTER, and running this again after a crash between them is
-- harmless (see 0002).
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_channel_idempotent' AND column_name = 'occurred_at') = 0,
  'ALTER TABLE ss_channel_idempotent ADD COLUMN occurred_at DATETIME(6) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_channel_idempotent' AND index_name = 'idx_tenant_occurred') = 0,
  'ALTER TABLE ss_channel_idempotent ADD KEY idx_tenant_occurred (tenant_id, occurred_at)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
