// Package spec names the OpenAPI document the generated client comes from and
// how client.gen.go records which version of it that was.
package spec

import (
	"crypto/sha256"
	"encoding/hex"
)

// Path is api/openapi.yaml relative to the client package's directory (where
// go generate runs specgen and where the freshness test runs).
const Path = "../../../../../api/openapi.yaml"

// StampPrefix starts the first line of client.gen.go, followed by Sum of the
// spec it was generated from.
const StampPrefix = "spec sha256: "

// Sum is the hex sha256 of the spec's bytes.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
