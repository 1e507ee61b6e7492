-- The settled-event sweeper's lease (docs/design.md, "Settled events"): a
-- sweeper claims unpublished outbox rows by writing its own token and an
-- expiry with a conditional UPDATE (…WHERE id IN (…) AND published_at IS
-- NULL AND (lease_until IS NULL OR lease_until < now)), so two sweepers
-- never publish one row within a lease, on every engine: InnoDB makes the
-- second UPDATE wait for the first's row locks and then re-reads the rows
-- (READ COMMITTED), TiDB does the same in pessimistic mode and fails the
-- later commit in optimistic mode, Galera certification fails the later
-- node's. No SKIP LOCKED, which TiDB does not offer. lease_owner is the
-- claiming round's random token, lease_until its expiry (the sweeper's
-- clock, UTC). Both NULL for a row nobody has claimed. Each column only
-- when absent, so running this again after a crash is harmless (see 0002).
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_settled_outbox' AND column_name = 'lease_owner') = 0,
  'ALTER TABLE ss_settled_outbox ADD COLUMN lease_owner VARBINARY(32) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_settled_outbox' AND column_name = 'lease_until') = 0,
  'ALTER TABLE ss_settled_outbox ADD COLUMN lease_until DATETIME(6) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
