-- Dead letters that stay findable and are never doubled by a redrive.
-- dlq_topic, dlq_partition, dlq_offset: where the dead letter is in the
-- dead-letter topic, when known (recorded when an operator closes or
-- redrives it; NULL for a row the worker wrote). redriven_from: the
-- x-redriven-from header (<dlq topic>/<partition>@<offset>) of the message
-- whose dead letter this is, when it was a redrive; redriven_from_id: the
-- row of the dead letter that redrive failed again for. Its unique key
-- gives every dead letter at most one successor: a redrive that fails again
-- supersedes its original (shown `redriven`), so an original message has
-- at most one open dead letter. idx_dead_letter_hash finds an original by
-- its message's bytes when its position was not recorded.
-- Columns first, then the indexes (TiDB refuses an index on a column added
-- by the same ALTER); each step only when absent, so running this again
-- after a crash is harmless (see 0002).
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND column_name = 'dlq_topic') = 0,
  'ALTER TABLE ss_dead_letter ADD COLUMN dlq_topic VARBINARY(249) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND column_name = 'dlq_partition') = 0,
  'ALTER TABLE ss_dead_letter ADD COLUMN dlq_partition INT NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND column_name = 'dlq_offset') = 0,
  'ALTER TABLE ss_dead_letter ADD COLUMN dlq_offset BIGINT NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND column_name = 'redriven_from') = 0,
  'ALTER TABLE ss_dead_letter ADD COLUMN redriven_from VARCHAR(512) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND column_name = 'redriven_from_id') = 0,
  'ALTER TABLE ss_dead_letter ADD COLUMN redriven_from_id BIGINT NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND index_name = 'idx_dead_letter_position') = 0,
  'ALTER TABLE ss_dead_letter ADD KEY idx_dead_letter_position (dlq_topic, dlq_partition, dlq_offset)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND index_name = 'uk_dead_letter_redriven_from') = 0,
  'ALTER TABLE ss_dead_letter ADD UNIQUE KEY uk_dead_letter_redriven_from (redriven_from_id)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_dead_letter' AND index_name = 'idx_dead_letter_hash') = 0,
  'ALTER TABLE ss_dead_letter ADD KEY idx_dead_letter_hash (message_hash)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
