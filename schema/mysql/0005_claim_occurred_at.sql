-- The channel's own time of each claimed event, kept in a column: a
-- statement of the channel's day is reconciled against it, and purge may
-- clear event_json. NULL for claims made before this migration (their
-- event_json still holds it until purged). One ALTER: whole or nothing.
ALTER TABLE ss_channel_idempotent
  ADD COLUMN occurred_at DATETIME(6) NULL,
  ADD KEY idx_tenant_occurred (tenant_id, occurred_at);
