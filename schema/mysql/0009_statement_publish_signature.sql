-- The id of the statement key that signed each event published from a
-- statement (x-paycb-statement-signature). NULL for events published
-- before statement events were signed: the workers dead-letter those
-- unauthenticated, so `--publish-missing` publishes such an event again,
-- signed, while it is still missing and unclaimed. Added only when absent,
-- so running this again after a crash is harmless (see 0002).
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_statement_publish' AND column_name = 'signature_key_id') = 0,
  'ALTER TABLE ss_statement_publish ADD COLUMN signature_key_id VARCHAR(64) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
