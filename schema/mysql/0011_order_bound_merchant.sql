-- The merchant the worker's merchant check (PAYCB_TENANT_MERCHANTS_FILE)
-- passed the trade's payment for: the merchant its payment callback named
-- (Shouqianba terminal_sn, WeChat sub_mchid or mchid, Alipay seller_id),
-- bound to the order's tenant when the payment settled; '' when no payment
-- is posted, or it was posted unchecked (no binding, an event rebuilt from
-- a statement, a payment settled before this migration). A Shouqianba
-- refund or cancel forwarded as an API answer names no terminal_sn; the
-- worker accepts one only for a trade whose payment recorded a merchant
-- here that is still bound to the tenant (docs/channels.md). The column
-- only when absent, so running this again after a crash is harmless (see
-- 0002).
SET @paycb_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'ss_channel_order' AND column_name = 'bound_merchant_id') = 0,
  'ALTER TABLE ss_channel_order ADD COLUMN bound_merchant_id VARBINARY(64) NOT NULL DEFAULT ''''', 'DO 0');
PREPARE paycb_ddl FROM @paycb_ddl;
EXECUTE paycb_ddl;
DEALLOCATE PREPARE paycb_ddl;
