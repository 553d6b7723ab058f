-- Scheduled publish: an approved change with publish_at set is published by
-- the control plane's scheduler at that time (scheduled_by is the approver
-- who scheduled it). NULL for a change published by hand.

-- +goose Up
ALTER TABLE changes ADD COLUMN publish_at timestamptz, ADD COLUMN scheduled_by text;
CREATE INDEX changes_publish_at ON changes (publish_at) WHERE publish_at IS NOT NULL AND state = 'approved';

-- +goose Down
DROP INDEX changes_publish_at;
ALTER TABLE changes DROP COLUMN publish_at, DROP COLUMN scheduled_by;
