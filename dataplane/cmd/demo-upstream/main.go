// Command demo-upstream is a small HTTP service for the demo stack, the
// end-to-end tests and the proxy benchmark. It answers every request with a
// short JSON echo of what it received. Query parameters shape the answer:
// status=N sets the status, sleep=DURATION delays it, size=N pads the body to
// N bytes. GET /healthz answers ok. With --jwt-key it is also the demo's
// identity provider: GET /.well-known/jwks.json serves the key's public
// half, and --print-tokens prints two tokens signed by it (see idp.go).
//
//	demo-upstream --listen 127.0.0.1:8081 --name a [--jwt-key FILE [--print-tokens]]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on")
	name := flag.String("name", "demo", "name reported in every answer (tells replicas apart)")
	jwtKey := flag.String("jwt-key", "", "Ed25519 private key (PKCS#8 PEM) of the demo identity provider, created if missing; its public half is served at "+jwksPath)
	tokens := flag.Bool("print-tokens", false, "with --jwt-key: print two demo tokens (alice on plan pro, bob on plan free; 30 days) and exit")
	flag.Parse()
	h := handler(*name)
	if *jwtKey != "" {
		priv, err := loadOrCreateKey(*jwtKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo-upstream:", err)
			os.Exit(1)
		}
		if *tokens {
			if err := printTokens(os.Stdout, priv, time.Now()); err != nil {
				fmt.Fprintln(os.Stderr, "demo-upstream:", err)
				os.Exit(1)
			}
			return
		}
		h = withJWKS(h, jwksHandler(priv))
	}
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	slog.Info("demo upstream listening", "addr", *listen, "name", *name)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "demo-upstream:", err)
		os.Exit(1)
	}
}

func handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		q := r.URL.Query()
		status := http.StatusOK
		if s := q.Get("status"); s != "" {
			if v, err := strconv.Atoi(s); err == nil && v >= 200 && v <= 599 {
				status = v
			}
		}
		if s := q.Get("sleep"); s != "" {
			if d, err := time.ParseDuration(s); err == nil && d > 0 && d <= time.Minute {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
		}
		body := map[string]any{
			"upstream":  name,
			"method":    r.Method,
			"path":      r.URL.Path,
			"requestId": r.Header.Get("X-Request-Id"),
			"forwarded": r.Header.Get("X-Forwarded-For"),
		}
		b, _ := json.Marshal(body)
		if s := q.Get("size"); s != "" {
			if n, err := strconv.Atoi(s); err == nil && n > len(b) && n <= 16<<20 {
				b = append(b[:len(b)-1], []byte(`,"pad":"`+strings.Repeat("x", max(0, n-len(b)-10))+`"}`)...)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(append(b, '\n'))
	})
}
