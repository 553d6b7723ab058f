package gateway

import "github.com/sluicegw/sluice/dataplane/internal/evloop"

// testEngines are the HTTP/1.1 engines a test runs on: fasthttp and, where
// it is built, the event-loop engine.
func testEngines() []string {
	if evloop.Supported {
		return []string{EngineFastHTTP, EngineLoop}
	}
	return []string{EngineFastHTTP}
}
