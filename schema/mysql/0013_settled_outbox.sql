-- Settled events for the systems downstream (docs/contract.md, "Output:
-- settled events"): the transactional outbox. Settlement writes one row per
-- claim it settles POSTED, in the settling transaction itself (one
-- multi-row INSERT per transaction), so a commit has its events and a
-- rollback has none; a publisher sends them after the commit and sets
-- published_at.
--
-- ss_channel_order.settled_seq is the trade's counter: the trade_seq of its
-- latest event (0: none yet). Every settlement of a trade already locks the
-- trade's order row (SELECT … FOR UPDATE) and writes it in the same
-- transaction, so the counter is read and advanced under that lock:
-- gapless, in settlement order, and never restarted by the purge of old
-- outbox rows (a MAX(trade_seq) + 1 over the outbox would restart at 1 once
-- a trade's rows are purged). On the engines where the lock is not the
-- whole story it still holds, because the counter lives on a row the
-- transaction writes: on Galera a FOR UPDATE locks one node only, and two
-- nodes settling one trade at once both write the order row, so
-- certification commits one and fails the other (1213, run again, which
-- then reads the advanced counter); on TiDB in optimistic mode the same
-- write conflict fails the later commit (9007, run again). The UNIQUE key on
-- (trade, trade_seq) refuses a duplicate number outright on every engine.
-- Trades settled before this migration start at 0: their earlier
-- settlements have no events (there was no topic), so the first event a
-- consumer sees of a trade is always trade_seq 1.
--
-- ss_settled_outbox: uk_settled_event makes a second row for one event
-- impossible, as uk_ledger_source does for postings; value is the encoded
-- event (pkg/settled.Encode), kept so that every publishing of it is byte
-- for byte the same. ids are not in settlement order across Galera nodes
-- or TiDB servers (auto-increment per node), so a trade's rows are ordered
-- by trade_seq, never by id. idx_settled_pending finds the unpublished rows
-- oldest first and, within one settled_at, trade by trade in trade_seq
-- order; it also serves the purge of rows published before the retention.
-- idx_settled_time serves republishing a time range.
-- Each step only when absent, so running this again after a crash is
-- harmless (see 0002); the table's indexes are created with it.
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_channel_order' AND column_name = 'settled_seq') = 0,
  'ALTER TABLE ss_channel_order ADD COLUMN settled_seq BIGINT NOT NULL DEFAULT 0', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

CREATE TABLE IF NOT EXISTS ss_settled_outbox (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id        BIGINT          NOT NULL,
  idempotent_key   VARBINARY(191)  NOT NULL,
  channel_code     VARBINARY(16)   NOT NULL,
  channel_trade_no VARBINARY(64)   NOT NULL,
  trade_seq        BIGINT          NOT NULL,
  event_type       VARCHAR(32)     NOT NULL,
  source           VARCHAR(16)     NOT NULL,
  value            BLOB            NOT NULL,
  settled_at       DATETIME(6)     NOT NULL,
  published_at     DATETIME(6)     NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_settled_event (tenant_id, idempotent_key),
  UNIQUE KEY uk_settled_trade_seq (tenant_id, channel_code, channel_trade_no, trade_seq),
  KEY idx_settled_pending (published_at, settled_at, tenant_id, channel_code, channel_trade_no, trade_seq),
  KEY idx_settled_time (settled_at, tenant_id, channel_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
