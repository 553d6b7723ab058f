-- The review warnings of a change (api.Warnings of its rules against its base
-- version), as a JSON array, computed when it is opened or reopened. NULL for
-- changes opened before this migration: they are computed when read.

-- +goose Up
ALTER TABLE changes ADD COLUMN warnings text;

-- +goose Down
ALTER TABLE changes DROP COLUMN warnings;
