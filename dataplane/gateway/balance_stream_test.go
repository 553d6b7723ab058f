package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// TestStreamingTargetIsOutstanding: a target whose answer is still being
// streamed to the client counts as outstanding for the balancer until the
// body ends, on either HTTP/1.1 engine (the fasthttp engine streams the body
// after the request path returned): meanwhile the least-outstanding choice
// sends new requests to the other target.
func TestStreamingTargetIsOutstanding(t *testing.T) {
	release := make(chan struct{})
	slowOn := make(chan string, 1)
	target := func(name string) string {
		return newPlainUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				slowOn <- name
				_, _ = io.WriteString(w, "first\n")
				w.(http.Flusher).Flush()
				<-release
				_, _ = io.WriteString(w, "last\n")
				return
			}
			_, _ = io.WriteString(w, name)
		})
	}
	a, b := target("a"), target("b")
	_, base, _ := MustStart(t, fmt.Sprintf("namespace: bal\nroutes:\n  - {id: all, match: {pathPrefix: /}, upstream: {targets: [{url: %q}, {url: %q}]}}\n", a, b))
	defer close(release)
	resp, err := http.Get(base + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q: %v", line, err)
	}
	slow := <-slowOn
	for i := range 10 {
		r, err := http.Get(base + "/who")
		if err != nil {
			t.Fatal(err)
		}
		who, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if string(who) == slow {
			t.Fatalf("request %d went to %s, which is still streaming an answer", i, slow)
		}
	}
}
