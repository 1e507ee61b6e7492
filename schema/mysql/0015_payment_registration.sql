-- Payment registrations (docs/design.md, "Registrations"): the services that
-- start payments tell the worker before they ask the channel (content type
-- application/vnd.paycb.registration+json, or consumer payment register).
-- A registration moves no money. uk_payment_registration makes one row per
-- merchant order number of a tenant and channel: a second registration of
-- the same order is found by the duplicate key (the same one changes
-- nothing, another one is a conflict). Identifiers are VARBINARY, compared
-- byte for byte like every key column. status: REGISTERED, SUCCEEDED (a
-- callback, statement line or query answer settled it; channel_trade_no is
-- then the channel's trade number), CLOSED, EXPIRED, ABNORMAL; every update
-- is conditional on the current status. idx_payment_registration_open
-- serves the querier's list of open registrations and the gauges.
--
-- idx_order_merchant_no on ss_channel_order lets a registration find the
-- trade of its merchant order number (the callback is keyed by the trade
-- number, the registration by the merchant order number), so that a
-- registration consumed after its payment settled is SUCCEEDED at once.
-- Each step only when absent, so running this again after a crash is
-- harmless (see 0002).
CREATE TABLE IF NOT EXISTS ss_payment_registration (
  id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id         BIGINT          NOT NULL,
  channel_code      VARBINARY(16)   NOT NULL,
  merchant_id       VARBINARY(64)   NOT NULL,
  merchant_order_no VARBINARY(64)   NOT NULL,
  amount            BIGINT          NOT NULL,
  currency          CHAR(3)         NOT NULL,
  status            VARCHAR(16)     NOT NULL,
  channel_trade_no  VARBINARY(64)   NULL,
  created_at        DATETIME(6)     NOT NULL,
  expires_at        DATETIME(6)     NOT NULL,
  registered_at     DATETIME(6)     NOT NULL,
  updated_at        DATETIME(6)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_payment_registration (tenant_id, channel_code, merchant_order_no),
  KEY idx_payment_registration_open (status, registered_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'ss_channel_order' AND index_name = 'idx_order_merchant_no') = 0,
  'ALTER TABLE ss_channel_order ADD KEY idx_order_merchant_no (tenant_id, channel_code, merchant_order_no)', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
