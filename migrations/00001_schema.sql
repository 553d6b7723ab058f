-- The control plane's schema. Postgres is the source of truth: the draft rule
-- set of each namespace, changes and their reviews, immutable versions, the
-- publication outbox that the publisher projects into etcd, users, sessions,
-- API tokens, and the hash-chained audit log.

-- +goose Up
CREATE TABLE users (
	id            bigserial PRIMARY KEY,
	username      text NOT NULL UNIQUE CHECK (username ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
	password_hash text NOT NULL,
	role          text NOT NULL CHECK (role IN ('viewer', 'editor', 'approver', 'admin')),
	disabled      boolean NOT NULL DEFAULT false,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL
);

-- A console session. id is the sha256 of the cookie's secret: a stolen
-- database does not yield live cookies.
CREATE TABLE sessions (
	id         text PRIMARY KEY,
	user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	csrf_token text NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- An automation token. Only the sha256 of the secret is kept.
CREATE TABLE api_tokens (
	id           bigserial PRIMARY KEY,
	user_id      bigint NOT NULL REFERENCES users (id),
	name         text NOT NULL,
	role         text NOT NULL CHECK (role IN ('viewer', 'editor', 'approver', 'admin')),
	hash         text NOT NULL UNIQUE,
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz,
	revoked_at   timestamptz,
	last_used_at timestamptz
);

CREATE TABLE namespaces (
	name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	description text NOT NULL DEFAULT '',
	created_at  timestamptz NOT NULL,
	created_by  text NOT NULL
);

-- The one draft rule set of a namespace. document is the rule set's JSON;
-- revision grows by one with every write and is the draft's ETag.
CREATE TABLE drafts (
	namespace  text PRIMARY KEY REFERENCES namespaces (name),
	document   text NOT NULL,
	checksum   text NOT NULL,
	revision   bigint NOT NULL,
	updated_at timestamptz NOT NULL,
	updated_by text NOT NULL
);

-- A proposed new version: a copy of the draft (or of an older version, for a
-- rollback) and the version it was diffed against.
CREATE TABLE changes (
	id                bigserial PRIMARY KEY,
	namespace         text NOT NULL REFERENCES namespaces (name),
	title             text NOT NULL,
	description       text NOT NULL DEFAULT '',
	author            text NOT NULL,
	state             text NOT NULL CHECK (state IN ('open', 'approved', 'rejected', 'published')),
	base_version      bigint NOT NULL,
	document          text NOT NULL,
	checksum          text NOT NULL,
	rollback_of       bigint,
	published_version bigint,
	created_at        timestamptz NOT NULL,
	updated_at        timestamptz NOT NULL
);
CREATE INDEX changes_namespace ON changes (namespace, id DESC);

CREATE TABLE reviews (
	id         bigserial PRIMARY KEY,
	change_id  bigint NOT NULL REFERENCES changes (id),
	reviewer   text NOT NULL,
	decision   text NOT NULL CHECK (decision IN ('approve', 'reject', 'reopen')),
	comment    text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL
);
CREATE INDEX reviews_change ON reviews (change_id, id);

-- Immutable, numbered per namespace.
CREATE TABLE versions (
	namespace   text NOT NULL REFERENCES namespaces (name),
	number      bigint NOT NULL CHECK (number > 0),
	document    text NOT NULL,
	checksum    text NOT NULL,
	change_id   bigint REFERENCES changes (id),
	rollback_of bigint,
	emergency   boolean NOT NULL DEFAULT false,
	reason      text NOT NULL DEFAULT '',
	created_at  timestamptz NOT NULL,
	created_by  text NOT NULL,
	PRIMARY KEY (namespace, number)
);

-- The outbox: one row per version, projected into etcd by the publisher in
-- version order.
CREATE TABLE publications (
	id              bigserial PRIMARY KEY,
	namespace       text NOT NULL,
	version         bigint NOT NULL,
	state           text NOT NULL CHECK (state IN ('pending', 'published', 'failed')),
	attempts        integer NOT NULL DEFAULT 0,
	last_error      text NOT NULL DEFAULT '',
	etcd_revision   bigint,
	created_at      timestamptz NOT NULL,
	next_attempt_at timestamptz NOT NULL,
	published_at    timestamptz,
	UNIQUE (namespace, version),
	FOREIGN KEY (namespace, version) REFERENCES versions (namespace, number)
);
CREATE INDEX publications_pending ON publications (namespace, version) WHERE state = 'pending';

-- The audit log: append-only, each row carrying the hash of the one before.
-- before and after are JSON text exactly as hashed.
CREATE TABLE audit_events (
	id          bigserial PRIMARY KEY,
	at          timestamptz NOT NULL,
	actor       text NOT NULL,
	action      text NOT NULL,
	object      text NOT NULL DEFAULT '',
	namespace   text NOT NULL DEFAULT '',
	before      text,
	after       text,
	request_id  text NOT NULL DEFAULT '',
	client_addr text NOT NULL DEFAULT '',
	emergency   boolean NOT NULL DEFAULT false,
	prev_hash   text NOT NULL,
	hash        text NOT NULL
);
CREATE INDEX audit_events_actor ON audit_events (actor, id);
CREATE INDEX audit_events_action ON audit_events (action, id);
CREATE INDEX audit_events_namespace ON audit_events (namespace, id);
CREATE INDEX audit_events_at ON audit_events (at);

-- +goose StatementBegin
CREATE FUNCTION sluice_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'sluice: % on % is refused: the table is append-only', TG_OP, TG_TABLE_NAME
		USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
	FOR EACH ROW EXECUTE FUNCTION sluice_refuse_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
	FOR EACH STATEMENT EXECUTE FUNCTION sluice_refuse_change();
CREATE TRIGGER versions_immutable BEFORE UPDATE OR DELETE ON versions
	FOR EACH ROW EXECUTE FUNCTION sluice_refuse_change();
CREATE TRIGGER versions_no_truncate BEFORE TRUNCATE ON versions
	FOR EACH STATEMENT EXECUTE FUNCTION sluice_refuse_change();

-- +goose Down
DROP TABLE audit_events;
DROP TABLE publications;
DROP TABLE versions;
DROP TABLE reviews;
DROP TABLE changes;
DROP TABLE drafts;
DROP TABLE namespaces;
DROP TABLE api_tokens;
DROP TABLE sessions;
DROP TABLE users;
DROP FUNCTION sluice_refuse_change();
