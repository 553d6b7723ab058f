package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/dataplane/admin"
	"github.com/sluicegw/sluice/dataplane/answer"
	"github.com/sluicegw/sluice/dataplane/degrade"
)

// TestErrorsAreTheGatewaysProblems checks that every error of the node admin
// endpoint, the guard's and those of the handlers mounted on it, is written
// by the gateway's one problem writer: the same type URIs, request id and
// headers as a 404 of the traffic port. (Before, the endpoint and degrade
// each had a copy answering type about:blank, without a request id, and the
// guard's without Cache-Control: no-store or nosniff.)
func TestErrorsAreTheGatewaysProblems(t *testing.T) {
	t.Parallel()
	h := admin.New(admin.Settings{Token: "s3cret", Extra: degrade.Handlers(func() *degrade.Set { return nil })})
	tests := []struct {
		desc, method, host, remote, ctype, origin, body string
		want                                            int
	}{
		{desc: "unknown host", method: "GET", host: "attacker.example", remote: "127.0.0.1:1", want: http.StatusMisdirectedRequest},
		{desc: "cross origin", method: "GET", host: "127.0.0.1:9901", remote: "127.0.0.1:1", origin: "http://attacker.example", want: http.StatusForbidden},
		{desc: "no token", method: "GET", host: "127.0.0.1:9901", remote: "192.0.2.1:1", want: http.StatusUnauthorized},
		{desc: "bad override", method: "POST", host: "127.0.0.1:9901", remote: "127.0.0.1:1", ctype: "application/json", body: `{"rule":"x"}`, want: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			path := "/status"
			if tc.method == "POST" {
				path = "/degrade"
			}
			r := httptest.NewRequest(tc.method, path, strings.NewReader(tc.body))
			r.Host, r.RemoteAddr = tc.host, tc.remote
			if tc.ctype != "" {
				r.Header.Set("Content-Type", tc.ctype)
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)

			ref := httptest.NewRecorder()
			answer.WriteProblem(ref, httptest.NewRequest("GET", "/", nil), tc.want, "t", "d")
			if w.Code != tc.want {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, path, w.Code, w.Body, tc.want)
			}
			for _, name := range []string{"Content-Type", "Cache-Control", "X-Content-Type-Options"} {
				if got, want := w.Header().Get(name), ref.Header().Get(name); got != want {
					t.Errorf("%s = %q, want %q (as answer.WriteProblem)", name, got, want)
				}
			}
			var got, want map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			_ = json.Unmarshal(ref.Body.Bytes(), &want)
			if got["type"] != want["type"] || got["status"] != want["status"] {
				t.Errorf("type, status = %v, %v; want %v, %v", got["type"], got["status"], want["type"], want["status"])
			}
			if id := w.Header().Get("X-Request-Id"); id == "" || got["requestId"] != id {
				t.Errorf("requestId %v, X-Request-Id %q: want the same id in both", got["requestId"], id)
			}
		})
	}
}
