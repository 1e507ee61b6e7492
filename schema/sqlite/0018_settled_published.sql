-- published says whether a settled event was published; published_at is
-- written as 1970-01-01 00:00:00 with the row and means something only
-- where published = 1 (see the mysql dialect). Rows published before this
-- migration are marked so; one index serves the unpublished rows, the
-- purge and republish.
ALTER TABLE ss_settled_outbox ADD COLUMN published INTEGER NOT NULL DEFAULT 0;
UPDATE ss_settled_outbox SET published = 1 WHERE published_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_settled_state ON ss_settled_outbox (published, settled_at);
DROP INDEX IF EXISTS idx_settled_pending;
DROP INDEX IF EXISTS idx_settled_time;
