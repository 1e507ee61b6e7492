-- The channel's own time of each claimed event (see the mysql dialect).
ALTER TABLE ss_channel_idempotent ADD COLUMN occurred_at TIMESTAMP NULL;
CREATE INDEX IF NOT EXISTS idx_tenant_occurred ON ss_channel_idempotent (tenant_id, occurred_at);
