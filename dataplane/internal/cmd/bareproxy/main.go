// Command bareproxy is a bare httputil.ReverseProxy with keep-alive
// upstream connections and nothing else: no routing, limits or logging. It
// is a benchmark peer (scripts/bench-proxy.sh), to show what net/http's
// server and client cost by themselves next to sluice-gateway, and is not
// built by make build.
//
//	bareproxy --listen 127.0.0.1:18095 --upstream http://127.0.0.1:18091
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
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18095", "address to serve on")
	upstream := flag.String("upstream", "", "upstream base URL (http://host:port)")
	flag.Parse()
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
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--upstream %q: want http://host:port", upstream)
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
