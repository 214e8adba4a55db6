-- A token's scopes (see ../0013_token_scopes.sql).
ALTER TABLE tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT '["see","act","claim"]';
