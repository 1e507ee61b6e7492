-- Operators' decisions on refund registration mismatches (`consumer refund
-- resolve`). One row per discrepancy resolved: the refund (refund_no is ''
-- for an Alipay or Shouqianba trade's cumulative mismatch, which names no
-- refund; named_refund_no is the refund the operator named), the check
-- (refund_unregistered, refund_mismatch) and the fingerprint of what was
-- found (amounts and states, as reconcile reports it). Reconcile reports a
-- discrepancy whose check and fingerprint match a row as resolved; a later
-- different discrepancy of the same refund has another fingerprint and is
-- open. The refund registration (ss_refund_request) is never changed.
-- Rows are only inserted. CREATE ... IF NOT EXISTS: running this again is
-- harmless.
CREATE TABLE IF NOT EXISTS ss_refund_resolution (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id        BIGINT          NOT NULL,
  channel_code     VARBINARY(16)   NOT NULL,
  channel_trade_no VARBINARY(64)   NOT NULL,
  refund_no        VARBINARY(64)   NOT NULL,
  check_name       VARBINARY(32)   NOT NULL,
  fingerprint      VARBINARY(255)  NOT NULL,
  named_refund_no  VARBINARY(64)   NOT NULL,
  detail           TEXT            NOT NULL,
  note             VARCHAR(1024)   NOT NULL,
  resolved_by      VARCHAR(255)    NOT NULL,
  resolved_at      DATETIME(6)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_refund_resolution (tenant_id, channel_code, channel_trade_no, refund_no, check_name, fingerprint)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
