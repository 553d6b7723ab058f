// Command bareproxy is a bare reverse proxy with keep-alive upstream
// connections and nothing else: no routing, limits or logging. It is a
// benchmark peer (scripts/bench-proxy.sh), to show what an HTTP stack costs
// by itself next to sluice-gateway, and is not built by make build. With
// --engine nethttp (the default) it is net/http's httputil.ReverseProxy;
// with --engine fasthttp, fasthttp's Server and HostClient, the stack
// sluice-gateway's HTTP/1.1 engine is built on.
//
//	bareproxy --listen 127.0.0.1:18095 --upstream http://127.0.0.1:18091 [--engine fasthttp]
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18095", "address to serve on")
	upstream := flag.String("upstream", "", "upstream base URL (http://host:port)")
	engine := flag.String("engine", "nethttp", "HTTP stack: nethttp or fasthttp")
	flag.Parse()
	if *engine == "fasthttp" {
		srv, err := newFastProxy(*upstream)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bareproxy:", err)
			os.Exit(2)
		}
		log.Fatal(srv.ListenAndServe(*listen))
	}
	if *engine != "nethttp" {
		fmt.Fprintf(os.Stderr, "bareproxy: --engine %q: want nethttp or fasthttp\n", *engine)
		os.Exit(2)
	}
	h, err := newProxy(*upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(2)
	}
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 75 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// newProxy returns a ReverseProxy to upstream keeping up to 256 idle
// connections, as sluice-gateway's pools do.
func newProxy(upstream string) (http.Handler, error) {
	u, err := parseUpstream(upstream)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport: tr,
	}, nil
}

func parseUpstream(upstream string) (*url.URL, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--upstream %q: want http://host:port", upstream)
	}
	return u, nil
}

// newFastProxy returns a fasthttp server forwarding to upstream through one
// HostClient: the client's header less Connection, the upstream's Host and
// X-Forwarded-For added, the answer relayed.
func newFastProxy(upstream string) (*fasthttp.Server, error) {
	u, err := parseUpstream(upstream)
	if err != nil {
		return nil, err
	}
	hc := &fasthttp.HostClient{
		Addr:                   u.Host,
		IsTLS:                  u.Scheme == "https",
		MaxConns:               1 << 14,
		MaxIdleConnDuration:    90 * time.Second,
		DisablePathNormalizing: true,
	}
	handle := func(ctx *fasthttp.RequestCtx) {
		req := &ctx.Request
		req.Header.Del("Connection")
		req.Header.SetHost(u.Host)
		req.Header.Add("X-Forwarded-For", ctx.RemoteIP().String())
		if err := hc.Do(req, &ctx.Response); err != nil {
			ctx.Error("bad gateway", fasthttp.StatusBadGateway)
		}
		ctx.Response.Header.Del("Connection")
	}
	return &fasthttp.Server{Handler: handle, ReadTimeout: 10 * time.Second, IdleTimeout: 75 * time.Second}, nil
}
