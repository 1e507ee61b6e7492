-- Batch claims: a multi-row INSERT … ON DUPLICATE KEY UPDATE id = id sets
-- batch_token only on the rows it inserts; reading the token back tells
-- which claims the statement made. The unique index still decides each row.
-- One ALTER statement: it applies whole or not at all.
ALTER TABLE ss_channel_idempotent
  ADD COLUMN batch_token VARBINARY(16) NULL,
  ADD KEY idx_batch_token (batch_token);
