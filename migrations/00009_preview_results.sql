-- Preview results: the figures of a change's preview when it stopped
-- (DELETE, expiry noticed by the sweep, its change published, rejected or
-- reopened), so that an approver who opens the change later sees them.
-- One row per change: the latest preview. figures is the sluice.Preview
-- (JSON: per-rule rows, since, until, selector, nodes counted, state
-- finished, endedAt, reason).

-- +goose Up
CREATE TABLE preview_results (
	namespace  text NOT NULL,
	change_id  bigint NOT NULL,
	since      timestamptz NOT NULL,
	ended_at   timestamptz NOT NULL,
	reason     text NOT NULL,
	figures    text NOT NULL,
	PRIMARY KEY (namespace, change_id)
);

-- +goose Down
DROP TABLE preview_results;
