-- Events: what happened in a namespace, for the events timeline and the
-- stream (degrade and breaker transitions from node reports, publishes,
-- rollbacks, canaries, overrides, nodes joining and leaving, apply errors).
-- dedupe_key identifies the occurrence (the node's boot and report sequence, the
-- audit event, the registration's etcd revision): every control-plane
-- replica that sees it inserts the same key, and ON CONFLICT DO NOTHING
-- keeps the first. Inserts take an advisory lock so that ids commit in
-- order (a stream reading id > N never skips a later-committed smaller id).
-- Rows older than sluice-admin --event-retention (30 days) are deleted.
--
-- canaries.analysis is the canary's analysis settings (JSON, NULL without
-- one); canaries.comparison the analyser's latest comparison (JSON), kept
-- so that a restarted or new leader carries on.

-- +goose Up
CREATE TABLE events (
	id        bigserial PRIMARY KEY,
	namespace text NOT NULL,
	at        timestamptz NOT NULL,
	kind      text NOT NULL CHECK (kind IN ('degrade', 'breaker', 'publish', 'rollback', 'canary', 'override', 'node_joined', 'node_left', 'apply_error')),
	node      text NOT NULL DEFAULT '',
	rule      text NOT NULL DEFAULT '',
	from_state text NOT NULL DEFAULT '',
	to_state  text NOT NULL DEFAULT '',
	version   bigint NOT NULL DEFAULT 0,
	actor     text NOT NULL DEFAULT '',
	detail    text,
	dedupe_key text NOT NULL,
	UNIQUE (namespace, dedupe_key)
);
CREATE INDEX events_namespace ON events (namespace, id DESC);
CREATE INDEX events_at ON events (at);
ALTER TABLE canaries ADD COLUMN analysis text, ADD COLUMN comparison text;

-- +goose Down
ALTER TABLE canaries DROP COLUMN analysis, DROP COLUMN comparison;
DROP TABLE events;
