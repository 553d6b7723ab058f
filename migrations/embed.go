// Package migrations holds the control plane's Postgres schema as numbered goose
// migrations (NNNNN_name.sql) and exports them as an fs.FS.
package migrations

import "embed"

// FS holds every migration file, at its root.
//
//go:embed *.sql
var FS embed.FS
