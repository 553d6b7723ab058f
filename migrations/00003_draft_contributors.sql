-- Four eyes over content, not only over who opened a change: the users who
-- wrote a draft's content may not approve it.
--
-- drafts.contributors holds the ids of the users who edited the draft since
-- it last equalled a published version (a publish that leaves the draft equal
-- to the published rules empties it). changes.contributors is the draft's
-- list, with the change's author, taken when the change was opened; for a
-- rollback, the user who asked for it.

-- +goose Up
ALTER TABLE drafts ADD COLUMN contributors bigint[] NOT NULL DEFAULT '{}';
ALTER TABLE changes ADD COLUMN contributors bigint[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE changes DROP COLUMN contributors;
ALTER TABLE drafts DROP COLUMN contributors;
