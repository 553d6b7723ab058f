package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNewProxy(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path+" "+r.Header.Get("X-Forwarded-For"))
	}))
	defer up.Close()
	tests := []struct {
		desc, upstream string
		wantErr        bool
	}{
		{"http upstream", up.URL, false},
		{"no scheme", "127.0.0.1:1", true},
		{"ftp", "ftp://h", true},
		{"empty", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			h, err := newProxy(tt.upstream)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v", err)
			}
			if err != nil {
				return
			}
			px := httptest.NewServer(h)
			defer px.Close()
			resp, err := http.Get(px.URL + "/a/b")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.HasPrefix(string(body), "/a/b 127.0.0.1") {
				t.Fatalf("body %q", body)
			}
		})
	}
}

func TestNewFastProxy(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path+" "+r.Header.Get("X-Forwarded-For"))
	}))
	defer up.Close()
	if _, err := newFastProxy("127.0.0.1:1"); err == nil {
		t.Fatal("no scheme: want an error")
	}
	srv, err := newFastProxy(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/a/b")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "/a/b 127.0.0.1") {
		t.Fatalf("body %q", body)
	}
}
