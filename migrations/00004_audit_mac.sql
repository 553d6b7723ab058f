-- A keyed audit chain. mac is the HMAC-SHA256, under a key that only
-- sluice-admin holds (never stored in the database), of the event's id and
-- content and the mac of the event before: someone who can rewrite the table
-- cannot recompute it. Events written before this migration (or by an admin
-- run without a key) have an empty mac and are covered by the unkeyed sha256
-- chain (prev_hash, hash) only.

-- +goose Up
ALTER TABLE audit_events ADD COLUMN mac text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_events DROP COLUMN mac;
