-- Events published from channel statements (see the mysql dialect).
CREATE TABLE IF NOT EXISTS ss_statement_publish (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant_id       INTEGER NOT NULL,
  idempotent_key  BLOB    NOT NULL,
  channel_code    BLOB    NOT NULL,
  statement_day   TEXT    NOT NULL,
  statement_sha1  TEXT    NOT NULL,
  line_no         INTEGER NOT NULL,
  fingerprint     TEXT    NOT NULL,
  topic           TEXT    NOT NULL,
  published_at    TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_statement_publish ON ss_statement_publish (tenant_id, idempotent_key);
