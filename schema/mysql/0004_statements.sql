-- Channel statements (对账单) as imported: one file row per tenant,
-- channel and Beijing-time day (the statement currently held for that
-- day), and its lines. A corrected file for a day replaces the old one
-- after the difference is reported; importing the same bytes again
-- changes nothing (same sha1).
CREATE TABLE IF NOT EXISTS ss_statement_file (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id     BIGINT          NOT NULL,
  channel_code  VARBINARY(16)   NOT NULL,
  statement_day DATE            NOT NULL,
  format        VARCHAR(64)     NOT NULL,
  sha1          CHAR(40)        NOT NULL,
  line_count    INT             NOT NULL,
  imported_at   DATETIME(6)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_statement_day (tenant_id, channel_code, statement_day)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS ss_statement_line (
  file_id           BIGINT UNSIGNED NOT NULL,
  line_no           INT             NOT NULL,
  kind              VARCHAR(16)     NOT NULL,
  channel_trade_no  VARBINARY(64)   NOT NULL,
  merchant_order_no VARBINARY(64)   NOT NULL,
  refund_no         VARBINARY(64)   NOT NULL,
  amount            BIGINT          NOT NULL,
  settled_amount    BIGINT          NOT NULL,
  fee_micro_yuan    BIGINT          NOT NULL,
  status            VARCHAR(32)     NOT NULL,
  channel_time      DATETIME(6)     NOT NULL,
  currency          CHAR(3)         NOT NULL,
  PRIMARY KEY (file_id, line_no),
  KEY idx_statement_trade (channel_trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
