-- A token's scopes: the actions it may take (vdi.ScopeSee, ScopeAct,
-- ScopeClaim), a JSON array. Tokens made before scopes had them all.
ALTER TABLE tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT '["see","act","claim"]';
