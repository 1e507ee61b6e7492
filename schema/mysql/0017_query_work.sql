-- The querier's work (docs/querier.md): each open registration, payment or
-- refund, carries when it is next asked about and who holds it meanwhile.
-- query_next_at is the next ask (NULL: not asked yet, due at created_at
-- plus the first wait, queryplan.Policy.First); query_stopped = 1 when the
-- querier asks no more (a final answer, the horizon, the last chance past
-- expiry); query_retries the transient failures in a row (the back-off);
-- query_count the asks sent. A querier leases rows with one conditional
-- UPDATE (…WHERE id IN (…) AND still open AND due AND (lease_until IS NULL
-- OR lease_until < now)) writing its name (lease_owner), a random token of
-- the round (lease_token) and the lease's end (lease_until), then reads
-- back the rows by token: on InnoDB the second UPDATE waits for the first's
-- row locks and re-reads them, TiDB fails the later commit in optimistic
-- mode, Galera certification the later node's; no SKIP LOCKED, which TiDB
-- lacks (as 0014). Recording an answer is conditional on owner and token,
-- so a querier whose lease ran out changes nothing.
--
-- ss_query_log is one row per query sent, for consumer trade: the
-- registration asked about, when, the answer label, the channel's own state
-- and whether the answer was published for the worker to settle.
--
-- Each column, index and table only when absent, so running this again
-- after a crash is harmless (see 0002).

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND column_name = 'query_next_at') = 0,
  'ALTER TABLE ss_payment_registration ADD COLUMN query_next_at DATETIME(6) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND column_name = 'query_stopped') = 0,
  'ALTER TABLE ss_payment_registration ADD COLUMN query_stopped TINYINT NOT NULL DEFAULT 0', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND column_name = 'query_retries') = 0,
  'ALTER TABLE ss_payment_registration ADD COLUMN query_retries INT NOT NULL DEFAULT 0', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND column_name = 'query_count') = 0,
  'ALTER TABLE ss_payment_registration ADD COLUMN query_count INT NOT NULL DEFAULT 0', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND column_name = 'lease_owner') = 0,
  'ALTER TABLE ss_payment_registration ADD COLUMN lease_owner VARBINARY(64) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND column_name = 'lease_token') = 0,
  'ALTER TABLE ss_payment_registration ADD COLUMN lease_token VARBINARY(32) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND column_name = 'lease_until') = 0,
  'ALTER TABLE ss_payment_registration ADD COLUMN lease_until DATETIME(6) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND column_name = 'query_next_at') = 0,
  'ALTER TABLE ss_refund_request ADD COLUMN query_next_at DATETIME(6) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND column_name = 'query_stopped') = 0,
  'ALTER TABLE ss_refund_request ADD COLUMN query_stopped TINYINT NOT NULL DEFAULT 0', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND column_name = 'query_retries') = 0,
  'ALTER TABLE ss_refund_request ADD COLUMN query_retries INT NOT NULL DEFAULT 0', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND column_name = 'query_count') = 0,
  'ALTER TABLE ss_refund_request ADD COLUMN query_count INT NOT NULL DEFAULT 0', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND column_name = 'lease_owner') = 0,
  'ALTER TABLE ss_refund_request ADD COLUMN lease_owner VARBINARY(64) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND column_name = 'lease_token') = 0,
  'ALTER TABLE ss_refund_request ADD COLUMN lease_token VARBINARY(32) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND column_name = 'lease_until') = 0,
  'ALTER TABLE ss_refund_request ADD COLUMN lease_until DATETIME(6) NULL', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_refund_request' AND index_name = 'idx_refund_query') = 0,
  'ALTER TABLE ss_refund_request ADD KEY idx_refund_query (status, query_stopped, created_at)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_payment_registration' AND index_name = 'idx_payment_registration_query') = 0,
  'ALTER TABLE ss_payment_registration ADD KEY idx_payment_registration_query (status, query_stopped, query_next_at)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;

CREATE TABLE IF NOT EXISTS ss_query_log (
  id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id         BIGINT          NOT NULL,
  channel_code      VARBINARY(16)   NOT NULL,
  kind              VARCHAR(16)     NOT NULL,
  merchant_id       VARBINARY(64)   NOT NULL,
  merchant_order_no VARBINARY(64)   NOT NULL,
  channel_trade_no  VARBINARY(64)   NOT NULL,
  refund_no         VARBINARY(64)   NOT NULL,
  asked_at          DATETIME(6)     NOT NULL,
  answer            VARCHAR(32)     NOT NULL,
  raw_state         VARCHAR(64)     NOT NULL,
  detail            VARCHAR(512)    NOT NULL,
  published         TINYINT         NOT NULL,
  querier           VARBINARY(64)   NOT NULL,
  PRIMARY KEY (id),
  KEY idx_query_log_order (tenant_id, channel_code, merchant_order_no),
  KEY idx_query_log_trade (tenant_id, channel_code, channel_trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
