-- When a session last carried real user input (key, pointer), if ever.
ALTER TABLE sessions ADD COLUMN last_input BIGINT;
