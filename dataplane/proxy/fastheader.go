package proxy

import "github.com/valyala/fasthttp"

// clearFastHeader empties a response header the fasthttp engine will write,
// as ResponseHeader.Reset does, but keeps the engine's per-response settings
// (no default Date or Content-Type): Reset brings back fasthttp's default
// Date header, whose process-wide refresher goroutine, once started, never
// stops (see gateway.Node.newFastServer).
func clearFastHeader(h *fasthttp.ResponseHeader) {
	var keys [][]byte
	for k := range h.All() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		h.DelBytes(k)
	}
	h.ResetConnectionClose()
}
