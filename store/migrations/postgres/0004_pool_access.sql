-- Who may use a local pool (vdi.Access) and what one user may hold of it
-- (vdi.Limits), as JSON like the policy.
ALTER TABLE local_pools ADD COLUMN access TEXT NOT NULL DEFAULT '{}';
ALTER TABLE local_pools ADD COLUMN limits TEXT NOT NULL DEFAULT '{}';
