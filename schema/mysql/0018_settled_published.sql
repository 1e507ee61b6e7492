-- What the publisher's mark costs (docs/design.md, "Settled events"):
-- before this migration an outbox row was unpublished while published_at
-- IS NULL, and marking it published did two expensive things to each row:
-- it moved the row's entry in idx_settled_pending, whose first column was
-- published_at, and it grew the row by the 8 bytes of a value where there
-- had been a NULL, so InnoDB rewrote the record instead of updating it in
-- place. Measured on MariaDB 10.11 (24,000 rows of 400-byte values,
-- inserted and marked 128 to a statement, the server's CPU from /proc):
-- insert + mark 39-44 us of server CPU per row before, 27.5-28.3 us with
-- this migration's layout, the mark alone 20-25 us before and 9.6-10 us
-- after; the microbenchmark and its figures are in
-- bench/results/issue35-settled.txt.
--
-- published is now what says whether a row was published (0 until the
-- broker acknowledged it, then 1), and the settlement writes published_at
-- as 1970-01-01 00:00:00 with the row, so that the mark rewrites a value
-- of the same size in place. published_at means something only where
-- published = 1. One narrow index, idx_settled_state (published,
-- settled_at), replaces idx_settled_pending and idx_settled_time: it finds
-- the unpublished rows oldest first (the sweeper orders ties by trade and
-- trade_seq itself), and the published ones of a time range (the purge,
-- republish).
--
-- The column is added with a default of 1, which every existing row takes
-- without a write (an instant ADD COLUMN on MariaDB, MySQL and TiDB, whose
-- existing rows read the default the column was added with), then its
-- default becomes 0 for the rows written from then on, and the rows still
-- unpublished are set to 0 through idx_settled_pending, before it goes: a
-- table of a week of events is not rewritten, and a row an older worker
-- inserts during the migration is unpublished whichever step it falls in.
-- During a rolling upgrade an older worker marks rows by published_at
-- alone: the rows it marks stay published = 0 and the sweepers publish
-- them again (at least once, as the contract says), and it no longer finds
-- the rows the newer workers wrote (their published_at is not NULL), which
-- the newer workers publish. Each step only when needed, so running this
-- again after a crash is harmless (see 0002).
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_settled_outbox' AND column_name = 'published') = 0,
  'ALTER TABLE ss_settled_outbox ADD COLUMN published TINYINT NOT NULL DEFAULT 1', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

ALTER TABLE ss_settled_outbox ALTER COLUMN published SET DEFAULT 0;

UPDATE ss_settled_outbox SET published = 0 WHERE published_at IS NULL AND published = 1;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_settled_outbox' AND index_name = 'idx_settled_state') = 0,
  'ALTER TABLE ss_settled_outbox ADD KEY idx_settled_state (published, settled_at)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_settled_outbox' AND index_name = 'idx_settled_pending') > 0,
  'ALTER TABLE ss_settled_outbox DROP KEY idx_settled_pending', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_settled_outbox' AND index_name = 'idx_settled_time') > 0,
  'ALTER TABLE ss_settled_outbox DROP KEY idx_settled_time', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
