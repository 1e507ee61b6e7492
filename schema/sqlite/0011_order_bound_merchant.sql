-- The merchant the worker's merchant check passed the trade's payment for
-- (see the mysql dialect).
ALTER TABLE ss_channel_order ADD COLUMN bound_merchant_id BLOB NOT NULL DEFAULT '';
