-- Events rebuilt from a channel statement and published to the input topic
-- by `consumer statement reconcile --publish-missing`: one row per tenant
-- and idempotency key, written once the broker acknowledged the message,
-- so a second run publishes nothing for the key. The statement's day,
-- SHA-1 and line say where the event came from, the fingerprint what was
-- published. The worker's claim stays the judge of the event itself; this
-- table only keeps the command from publishing twice.
CREATE TABLE IF NOT EXISTS ss_statement_publish (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id       BIGINT          NOT NULL,
  idempotent_key  VARBINARY(191)  NOT NULL,
  channel_code    VARBINARY(16)   NOT NULL,
  statement_day   DATE            NOT NULL,
  statement_sha1  CHAR(40)        NOT NULL,
  line_no         INT             NOT NULL,
  fingerprint     CHAR(64)        NOT NULL,
  topic           VARCHAR(255)    NOT NULL,
  published_at    DATETIME(6)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_statement_publish (tenant_id, idempotent_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
