// Package e2e holds the end-to-end test and benchmarks of gateway nodes
// following etcd: real sluice-admin and sluice-gateway processes (built once
// per run), a real Postgres database (created per run on the machine's
// server at 127.0.0.1:5432, dropped after), and a real etcd server embedded
// in the test process so that the test can stop it and start it again on
// the same directory and ports.
//
// The package has no non-test code. Run the test with
//
//	go test -count=1 -run TestGatewaysFollowEtcd ./dataplane/e2e/
//
// and the benchmarks (not part of the normal test pass) with
//
//	go test -count=1 -run '^$' -bench Propagation -benchtime 1x ./dataplane/e2e/
//	go test -count=1 -run '^$' -bench SwapsUnderLoad -benchtime 1x -timeout 10m ./dataplane/e2e/
//
// TestDocCommands runs the command lines of README.md's 5-minute tour, then
// every sh block of docs/*.md not marked <!-- not-tested: REASON -->,
// against one stack started as make run starts it (demo rules, demo
// upstream and identity provider, a gateway with Redis, bin/sluicectl), so
// the docs' commands cannot drift from the code.
//
// SLUICE_E2E_BIN=DIR uses sluice-admin and sluice-gateway binaries already
// built in DIR instead of building them (and sluicectl, demo-upstream when
// there).
package e2e
