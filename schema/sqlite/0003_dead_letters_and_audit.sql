-- Dead letters and the operators' audit trail (see the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_dead_letter (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  source_topic     BLOB    NOT NULL,
  source_partition INTEGER NOT NULL,
  source_offset    INTEGER NOT NULL,
  message_hash     BLOB    NOT NULL,
  kind             TEXT    NOT NULL,
  tenant_id        INTEGER NULL,
  idempotent_key   BLOB    NULL,
  fingerprint      TEXT    NULL,
  channel_code     BLOB    NULL,
  channel_trade_no BLOB    NULL,
  error            TEXT    NOT NULL DEFAULT '',
  created_at       TIMESTAMP NOT NULL,
  closed_at        TIMESTAMP NULL,
  closed_by        TEXT    NULL,
  close_note       TEXT    NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_dead_letter_source ON ss_dead_letter (source_topic, source_partition, source_offset, message_hash, kind);
CREATE INDEX IF NOT EXISTS idx_dead_letter_trade ON ss_dead_letter (tenant_id, channel_code, channel_trade_no);
CREATE INDEX IF NOT EXISTS idx_dead_letter_key ON ss_dead_letter (tenant_id, idempotent_key);

CREATE TABLE IF NOT EXISTS ss_operator_audit (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  at        TIMESTAMP NOT NULL,
  os_user   TEXT    NOT NULL,
  host      TEXT    NOT NULL,
  command   TEXT    NOT NULL,
  arguments TEXT    NOT NULL,
  result    TEXT    NOT NULL,
  detail    TEXT    NULL
);
CREATE INDEX IF NOT EXISTS idx_audit_at ON ss_operator_audit (at);
