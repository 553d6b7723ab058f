-- Gateway nodes followed from etcd, the versions each was seen applying, and
-- canary publications.
--
-- The outbox gains operation kinds: besides writing a version to the ruleset
-- key ('ruleset'), it writes a canary ('canary': the canary key), promotes one
-- ('promote': the ruleset key and the canary key's deletion, in one etcd
-- transaction) or ends one ('abort': the canary key's deletion). A version may
-- now have one row per kind; operations of a namespace run in id order.

-- +goose Up
ALTER TABLE publications DROP CONSTRAINT publications_namespace_version_key;
ALTER TABLE publications
	ADD COLUMN kind text NOT NULL DEFAULT 'ruleset' CHECK (kind IN ('ruleset', 'canary', 'promote', 'abort')),
	ADD COLUMN selector text;
ALTER TABLE publications ADD CONSTRAINT publications_namespace_version_kind_key UNIQUE (namespace, version, kind);
DROP INDEX publications_pending;
CREATE INDEX publications_pending ON publications (namespace, id) WHERE state = 'pending';

-- A canary: version is published to the nodes matching selector (JSON object
-- of labels) until it is promoted to every node or aborted. At most one is
-- active per namespace.
CREATE TABLE canaries (
	id         bigserial PRIMARY KEY,
	namespace  text NOT NULL REFERENCES namespaces (name),
	version    bigint NOT NULL,
	selector   text NOT NULL,
	state      text NOT NULL CHECK (state IN ('active', 'promoted', 'aborted')),
	created_at timestamptz NOT NULL,
	created_by text NOT NULL,
	ended_at   timestamptz,
	ended_by   text NOT NULL DEFAULT '',
	reason     text NOT NULL DEFAULT '',
	FOREIGN KEY (namespace, version) REFERENCES versions (namespace, number)
);
CREATE UNIQUE INDEX canaries_one_active ON canaries (namespace) WHERE state = 'active';
CREATE INDEX canaries_namespace ON canaries (namespace, id DESC);

-- Every node the control plane has seen registered, with its last
-- registration (api.NodeStatus JSON). live is false once its key is gone;
-- last_seen is then when it was last seen registered.
CREATE TABLE nodes (
	namespace  text NOT NULL REFERENCES namespaces (name),
	node_id    text NOT NULL,
	status     text NOT NULL,
	live       boolean NOT NULL,
	first_seen timestamptz NOT NULL,
	last_seen  timestamptz NOT NULL,
	PRIMARY KEY (namespace, node_id)
);
CREATE INDEX nodes_gone ON nodes (namespace, last_seen) WHERE NOT live;

-- When each node was first seen reporting each version it applied.
-- applied_at is the node's own claim (its clock), first_seen the control
-- plane's observation.
CREATE TABLE node_versions (
	namespace  text NOT NULL REFERENCES namespaces (name),
	version    bigint NOT NULL,
	node_id    text NOT NULL,
	checksum   text NOT NULL,
	first_seen timestamptz NOT NULL,
	applied_at timestamptz,
	PRIMARY KEY (namespace, version, node_id)
);

-- +goose Down
DROP TABLE node_versions;
DROP TABLE nodes;
DROP TABLE canaries;
DROP INDEX publications_pending;
CREATE INDEX publications_pending ON publications (namespace, version) WHERE state = 'pending';
DELETE FROM publications WHERE kind <> 'ruleset';
ALTER TABLE publications DROP CONSTRAINT publications_namespace_version_kind_key;
ALTER TABLE publications DROP COLUMN selector, DROP COLUMN kind;
ALTER TABLE publications ADD CONSTRAINT publications_namespace_version_key UNIQUE (namespace, version);
