-- User names are unique regardless of case: "Alice" and "alice" would read
-- as one person in the audit log and in the four-eyes checks. Logins match
-- names case-insensitively through this index.

-- +goose Up
CREATE UNIQUE INDEX users_username_lower ON users (lower(username));

-- +goose Down
DROP INDEX users_username_lower;
