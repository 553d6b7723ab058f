// Package buildinfo is the build of Sluice's binaries (sluice-gateway,
// sluice-admin, sluicectl): its version, commit and date, set by the linker
// in a release build (make dist):
//
//	go build -ldflags "-X github.com/sluicegw/sluice/api/buildinfo.Version=v1.2.0 \
//	    -X github.com/sluicegw/sluice/api/buildinfo.Commit=4f2c1e9 \
//	    -X github.com/sluicegw/sluice/api/buildinfo.Date=2026-12-04T21:00:00Z"
//
// A plain go build leaves them "dev", "" and "". Version is what a gateway
// node registers as its build (api.NodeStatus.Build, the console's Build
// column), what --version and sluicectl version print, and the
// service.version of the binaries' OpenTelemetry traces.
package buildinfo

import "strings"

// Set by the linker (-X); see the package documentation.
var (
	// Version is the release: `git describe --tags --always --dirty` in
	// make dist; "dev" in a build without it.
	Version = "dev"
	// Commit is the full commit hash the binary was built from.
	Commit = ""
	// Date is when the binary was built, RFC 3339 in UTC.
	Date = ""
)

// String is the build in one line, as --version prints it after the
// program's name: "v1.2.0 (commit 4f2c1e9, built 2026-12-04T21:00:00Z)",
// or the version alone when the linker set nothing else.
func String() string {
	var extra []string
	if Commit != "" {
		extra = append(extra, "commit "+Commit)
	}
	if Date != "" {
		extra = append(extra, "built "+Date)
	}
	if len(extra) == 0 {
		return Version
	}
	return Version + " (" + strings.Join(extra, ", ") + ")"
}
