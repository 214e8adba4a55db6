-- A holder's Leases: a claim on PostgreSQL checks its user's rules against
-- them in the write that takes the member (store/leases_rules.go).
CREATE INDEX leases_holder ON leases (holder);
