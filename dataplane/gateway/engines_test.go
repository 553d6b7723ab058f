package gateway

import "github.com/sluicegw/sluice/dataplane/internal/evloop"

// testEngines are the HTTP/1.1 engines a test runs on: net/http, fasthttp
// and, where it is built, the event-loop engine.
func testEngines() []string {
	if evloop.Supported {
		return []string{EngineNetHTTP, EngineFastHTTP, EngineLoop}
	}
	return []string{EngineNetHTTP, EngineFastHTTP}
}

// fastParsed reports whether engine parses HTTP/1.1 with fasthttp (the
// fasthttp and event-loop engines), whose strictness differs from
// net/http's in places.
func fastParsed(engine string) bool { return engine == EngineFastHTTP || engine == EngineLoop }
