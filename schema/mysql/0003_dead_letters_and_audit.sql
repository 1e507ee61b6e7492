-- Dead letters as records the worker and the operators can reason about,
-- and the operators' audit trail.

-- One row per dead letter written, inserted after the dead-letter topic
-- acknowledged the write (acks=all). The unique key is the source message
-- (its coordinates and a SHA-256 of its key and value) and the kind: a
-- replay or a new group that dead-letters the same message again finds the
-- row and skips the second write (decode, claim and settle still run).
-- closed_* record an operator's `consumer dlq close`; a dead letter is also
-- resolved when a claim with the same key and fingerprint settled after it.
CREATE TABLE IF NOT EXISTS ss_dead_letter (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  source_topic     VARBINARY(249)  NOT NULL,
  source_partition INT             NOT NULL,
  source_offset    BIGINT          NOT NULL,
  message_hash     BINARY(32)      NOT NULL,
  kind             VARCHAR(32)     NOT NULL,
  tenant_id        BIGINT          NULL,
  idempotent_key   VARBINARY(191)  NULL,
  fingerprint      CHAR(64)        NULL,
  channel_code     VARBINARY(16)   NULL,
  channel_trade_no VARBINARY(64)   NULL,
  error            VARCHAR(1024)   NOT NULL DEFAULT '',
  created_at       DATETIME(6)     NOT NULL,
  closed_at        DATETIME(6)     NULL,
  closed_by        VARCHAR(255)    NULL,
  close_note       VARCHAR(1024)   NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_dead_letter_source (source_topic, source_partition, source_offset, message_hash, kind),
  KEY idx_dead_letter_trade (tenant_id, channel_code, channel_trade_no),
  KEY idx_dead_letter_key (tenant_id, idempotent_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Every operator action that changes state: who, when, with which
-- arguments (secrets never stored), and how it ended. Never updated.
CREATE TABLE IF NOT EXISTS ss_operator_audit (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  at          DATETIME(6)     NOT NULL,
  os_user     VARCHAR(255)    NOT NULL,
  host        VARCHAR(255)    NOT NULL,
  command     VARCHAR(64)     NOT NULL,
  arguments   TEXT            NOT NULL,
  result      VARCHAR(16)     NOT NULL,
  detail      TEXT            NULL,
  PRIMARY KEY (id),
  KEY idx_audit_at (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
