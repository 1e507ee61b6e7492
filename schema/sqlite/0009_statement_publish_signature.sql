-- The id of the statement key that signed each published event (see the
-- mysql dialect).
ALTER TABLE ss_statement_publish ADD COLUMN signature_key_id VARCHAR(64) NULL;
