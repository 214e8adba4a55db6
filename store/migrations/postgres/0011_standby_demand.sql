-- A local pool's standby may follow demand (vdi.Standby): standby is its
-- min, standby_max its max (0: a fixed standby of standby), and
-- standby_schedule its vdi.StandbySchedule as JSON ('' for none). 0010 is
-- the shares branch's.
ALTER TABLE local_pools ADD COLUMN standby_max BIGINT NOT NULL DEFAULT 0;
ALTER TABLE local_pools ADD COLUMN standby_schedule TEXT NOT NULL DEFAULT '';
