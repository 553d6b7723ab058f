// Package sluice is the control plane's domain: namespaces, draft rule sets,
// changes and reviews, immutable versions, publications, audit events, users,
// API tokens and nodes; the service interfaces over them; and the error codes
// every implementation returns. It imports only the standard library and the
// api module.
//
// Nodes. Live nodes are read from their lease-bound registration keys in
// etcd. A NodeWatcher in sluice-admin follows each namespace's nodes prefix
// (list, watch, list again on compaction) into the NodeHistory in Postgres:
// every node seen, its last registration, whether it is live, when it was
// last seen (refreshed by a heartbeat while live, so that a node that
// vanishes while no sluice-admin runs keeps a LastSeen close to the truth),
// and the first time it was seen reporting each version. Gone nodes are
// listed for a retention (sluice-admin --node-retention, 24h) and forgotten
// after 7 days; the per-version records are kept. A rollout's delays are
// measured from the version's first write to etcd to the control plane's
// first sight of each node reporting it, so they include the watch's lag and
// are only as good as sluice-admin's uptime.
//
// Canaries. Publishing with a canary selector creates the next version as
// usual but queues a canary outbox operation instead of a ruleset one. While
// a canary is active no other version can be published (ECONFLICT); promote
// or abort it first. An emergency rollback is the exception: it publishes
// and ends the canary (an abort queued behind the rollback's write).
package sluice
