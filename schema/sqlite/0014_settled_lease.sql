-- The settled-event sweeper's lease (see the mysql dialect).
ALTER TABLE ss_settled_outbox ADD COLUMN lease_owner BLOB NULL;
ALTER TABLE ss_settled_outbox ADD COLUMN lease_until TIMESTAMP NULL;
