// Command sdkbench serves a trivial net/http handler ("ok" on /hello), alone
// or behind sluicehttp.Middleware following a rules file, for
// scripts/bench-sdk.sh, which measures the middleware's CPU per request
// under wrk (issue 31: at most 1.3× the handler alone's).
//
//	sdkbench --listen 127.0.0.1:18600                      # the handler alone
//	sdkbench --listen 127.0.0.1:18601 --rules rules.yaml   # behind the middleware
//
// With --rules it waits until the rule set is applied before listening, so
// that no measured request runs unguarded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/sluicegw/sluice/dataplane/sdk"
	"github.com/sluicegw/sluice/dataplane/sdk/sluicehttp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sdkbench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sdkbench", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:18600", "address to serve on")
	rules := fs.String("rules", "", "kind: service rules file; empty serves the handler alone")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	if *rules != "" {
		g, err := sdk.New(ctx, sdk.Config{Namespace: "bench-svc", RulesFile: *rules, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer g.Close()
		for deadline := time.Now().Add(10 * time.Second); g.Service() == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("the rule set was not applied within 10s")
			}
		}
		h = sluicehttp.Middleware(g, h)
	}
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
