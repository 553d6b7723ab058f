package sluicehttp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/sluicegw/sluice/dataplane/sdk"
	"github.com/sluicegw/sluice/dataplane/sdk/sluicehttp"
)

// The service's own route /api/orders is limited to one request a minute
// per client; the middleware answers the second with the gateway's 429.
func ExampleMiddleware() {
	dir, _ := os.MkdirTemp("", "sluicehttp-example")
	defer os.RemoveAll(dir)
	rules := filepath.Join(dir, "rules.yaml")
	_ = os.WriteFile(rules, []byte(`namespace: orders-svc
kind: service
routes:
  - id: orders
    match: {pathPrefix: /api/orders}
limits:
  - {id: orders-per-ip, routes: [orders], key: [ip], algorithm: token_bucket, rate: 1, period: 1m}
`), 0o600)
	g, err := sdk.New(context.Background(), sdk.Config{Namespace: "orders-svc", RulesFile: rules, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/api/orders", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	srv := httptest.NewServer(sluicehttp.Middleware(g, mux))
	defer srv.Close()

	for range 2 {
		resp, err := http.Get(srv.URL + "/api/orders")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Output:
	// 200 text/plain; charset=utf-8
	// 429 application/problem+json
}
