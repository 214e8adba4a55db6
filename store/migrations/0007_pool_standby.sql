-- How many free members of a local pool are kept powered on (vdi.Pool.Standby).
ALTER TABLE local_pools ADD COLUMN standby INTEGER NOT NULL DEFAULT 0;
