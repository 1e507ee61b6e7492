-- The querier's per-merchant budget (docs/querier.md, "The per-merchant
-- budget"): one token bucket per (tenant, channel, merchant) that every
-- querier of a deployment draws from. A querier reads its row with SELECT …
-- FOR UPDATE, computes the refill and the spend (internal/queryplan.Budget)
-- on the database's clock (UTC_TIMESTAMP(6), so queriers whose clocks
-- differ still agree) and writes it back in the same transaction. A
-- merchant's first query inserts the row; two queriers inserting it at
-- once meet uk_query_budget, and the loser runs its transaction again and
-- reads the winner's row. On Galera and in TiDB's optimistic mode the
-- lock is not the whole story: the row is written by every spend, so a
-- concurrent spend fails certification or the write-conflict check at
-- COMMIT (1213, 9007) and runs again on the committed state. milli_tokens
-- are thousandths of a token: integers, so every querier computes the same
-- state from the same row. backoff_until is the end of a rate-limit
-- back-off (NULL: none), backoffs the rate-limit answers in a row.
CREATE TABLE IF NOT EXISTS ss_query_budget (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  tenant_id     BIGINT          NOT NULL,
  channel_code  VARBINARY(16)   NOT NULL,
  merchant_id   VARBINARY(64)   NOT NULL,
  milli_tokens  BIGINT          NOT NULL,
  updated_at    DATETIME(6)     NOT NULL,
  backoff_until DATETIME(6)     NULL,
  backoffs      INT             NOT NULL DEFAULT 0,
  PRIMARY KEY (id),
  UNIQUE KEY uk_query_budget (tenant_id, channel_code, merchant_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
