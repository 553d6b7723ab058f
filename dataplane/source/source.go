// Package source is where a gateway's rule sets come from: a rules file on
// disk (File: watched, and reloaded on SIGHUP), or etcd (Etcd: the
// namespace's published value and a canary value for this node, checked
// against the trusted signing keys, followed with the shared etcdwatch module) with a
// state dir on disk (LoadState, SaveState: the last applied document, so a
// node restarts on it while etcd is away). A source emits whole documents,
// never deltas; it skips a document identical to the last one it emitted,
// and the newest one wins. Validation and compilation are the consumer's: a
// source only reads.
package source

import (
	"context"
	"time"
)

// Update is one rule-set document read from a source.
type Update struct {
	// Data is the document as read (YAML or JSON).
	Data []byte
	// Version is the version the source gives the document: the published
	// version for etcd, and a load counter (1, 2, ...) for a file.
	Version int64
	// Source names where the document came from, e.g. "file:/etc/sluice/rules.yaml".
	Source string
	// ReadAt is when the document was read.
	ReadAt time.Time
	// Err, when set, says the source could not read a document (Data is
	// nil); the consumer reports it and keeps what it has.
	Err error
}

// Apply receives each new document. It returns an error when the document was
// refused; the source reports it and keeps going.
type Apply func(ctx context.Context, u Update) error
