-- A draft save is an event too (kind draft, from the draft.update,
-- draft.put_rule, draft.delete_rule and draft.reset audit events): the
-- stream announces it with the actor and the draft's new ETag, so that a
-- console tab editing the same draft learns of another save before its own.

-- +goose Up
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
	CHECK (kind IN ('degrade', 'breaker', 'publish', 'rollback', 'canary', 'override', 'node_joined', 'node_left', 'apply_error', 'draft'));

-- +goose Down
DELETE FROM events WHERE kind = 'draft';
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check
	CHECK (kind IN ('degrade', 'breaker', 'publish', 'rollback', 'canary', 'override', 'node_joined', 'node_left', 'apply_error'));
