-- +goose Up
-- The control plane's schema is created by later migrations; this one marks
-- the start of the history.
SELECT 1;

-- +goose Down
SELECT 1;
