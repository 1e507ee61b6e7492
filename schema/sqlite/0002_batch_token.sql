-- Batch claims (see the mysql dialect). SQLite migrations run in a
-- transaction of their own.
ALTER TABLE ss_channel_idempotent ADD COLUMN batch_token BLOB NULL;
CREATE INDEX IF NOT EXISTS idx_batch_token ON ss_channel_idempotent (batch_token);
