-- Dead letters that stay findable and are never doubled by a redrive (see
-- the mysql dialect).
ALTER TABLE ss_dead_letter ADD COLUMN dlq_topic BLOB NULL;
ALTER TABLE ss_dead_letter ADD COLUMN dlq_partition INTEGER NULL;
ALTER TABLE ss_dead_letter ADD COLUMN dlq_offset INTEGER NULL;
ALTER TABLE ss_dead_letter ADD COLUMN redriven_from TEXT NULL;
ALTER TABLE ss_dead_letter ADD COLUMN redriven_from_id INTEGER NULL;
CREATE INDEX IF NOT EXISTS idx_dead_letter_position ON ss_dead_letter (dlq_topic, dlq_partition, dlq_offset);
CREATE UNIQUE INDEX IF NOT EXISTS uk_dead_letter_redriven_from ON ss_dead_letter (redriven_from_id);
CREATE INDEX IF NOT EXISTS idx_dead_letter_hash ON ss_dead_letter (message_hash);
